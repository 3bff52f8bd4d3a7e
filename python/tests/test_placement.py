"""attune.placement: device files, the cost model, SQL traces, strategies, store and migration."""

from __future__ import annotations

import pytest

pytest.importorskip("highspy")
pytest.importorskip("sqlglot")
duckdb = pytest.importorskip("duckdb")

from attune.errors import CorruptionError, InvalidArgumentError
from attune.placement import devices as dv
from attune.placement import model as m
from attune.placement import store as st
from attune.placement import strategies as sg
from attune.placement import trace as tr

FAST = dv.Device("fast", 100.0, 1000.0, capacity=None)
SLOW = dv.Device("slow", 10.0, 100.0, capacity=None)


def small_workload() -> m.Workload:
    cols = {f"t.{c}": m.Column("t", c, 300.0, {"zstd": 100.0}) for c in ("a", "b", "cold")}
    scans = {"q1": [m.Scan("t", ("a", "b"))], "q2": [m.Scan("t", ("a",))]}
    return m.Workload(cols, scans)


def test_default_catalogue_is_table_2_1():
    d = {x.name: x for x in dv.load_devices()}
    assert d["nvme"].cost_ct_per_gb == 125 and d["nvme"].throughput == 2.10e9
    assert d["sata"].cost_ct_per_gb == 60 and d["hdd"].throughput == 0.23e9


def test_device_file_round_trip_and_errors(tmp_path):
    p = tmp_path / "dev.toml"
    devs = [FAST.with_capacity(1e9), SLOW]
    p.write_text(dv.devices_to_toml(devs))
    assert [(d.name, d.capacity, d.throughput) for d in dv.load_devices(p)] == [
        ("fast", 1e9, 1000.0),
        ("slow", None, 100.0),
    ]
    p.write_text('[[device]]\nname = "x"\ncost_ct_per_gb = 1\nthroughput = "fast"\n')
    with pytest.raises(InvalidArgumentError, match="device #1 \\(x\\): throughput"):
        dv.load_devices(p)
    p.write_text('[[device]]\nname = "x"\nthroughput = 1\n')
    with pytest.raises(InvalidArgumentError, match="missing required key 'cost_ct_per_gb'"):
        dv.load_devices(p)
    p.write_text("[[device]\n")
    with pytest.raises(InvalidArgumentError, match="not valid TOML"):
        dv.load_devices(p)
    p.write_text('[[device]]\nname = "x"\ncost_ct_per_gb = 1\nthroughput = 1\nspeed = 3\n')
    with pytest.raises(InvalidArgumentError, match="unknown key"):
        dv.load_devices(p)
    with pytest.raises(InvalidArgumentError, match="no such file"):
        dv.load_devices(tmp_path / "missing.toml")


def test_model_equations():
    w = small_workload()
    devs = [FAST, SLOW]
    split = {"t.a": "fast", "t.b": "slow", "t.cold": "slow"}
    # q1 reads a (fast: 0.1 s) and b (slow: 1 s) in parallel: 1 s; q2 reads a: 0.1 s
    assert m.query_times(w, devs, split) == pytest.approx({"q1": 1.0, "q2": 0.1})
    assert m.cost(w, devs, split) == pytest.approx((100 * 100 + 200 * 10) / 1e9)


def test_unknown_column_is_an_error():
    with pytest.raises(InvalidArgumentError, match="unknown column 't.zz'"):
        m.Workload({"t.a": m.Column("t", "a", 1.0)}, {"q": [m.Scan("t", ("a", "zz"))]})


def test_tpch_trace():
    w = tr.extract_workload(tr.tpch_queries(), tr.TPCH_SCHEMA)
    assert len(w) == 22
    assert w["q01"] == [
        m.Scan(
            "lineitem",
            (
                "l_quantity",
                "l_extendedprice",
                "l_discount",
                "l_tax",
                "l_returnflag",
                "l_linestatus",
                "l_shipdate",
            ),
        )
    ]
    # EXISTS (SELECT * ...) reads only the columns it filters on
    assert w["q04"][0] == m.Scan("lineitem", ("l_orderkey", "l_commitdate", "l_receiptdate"))
    # q15 reads lineitem twice (the view is inlined twice)
    assert [s.table for s in w["q15"]].count("lineitem") == 2
    assert sum(len(s) for s in w.values()) == 87


def test_trace_errors():
    with pytest.raises(Exception, match="q"):
        tr.extract_scans("SELECT nope FROM lineitem", tr.TPCH_SCHEMA, name="q")


def test_strategies_capacity_mode():
    w = small_workload()
    devs = [FAST.with_capacity(200.0), SLOW.with_capacity(1000.0)]
    lopt = sg.lopt(w, devs)
    assert lopt.status == "optimal"
    # both hot columns fit on fast: LOPT still splits a and b to read them in parallel only
    # when that is faster; here fast+fast = 0.2 s for q1 vs max(0.1, 1) = 1 s
    assert lopt.placement == {"t.a": "fast", "t.b": "fast", "t.cold": "slow"}
    hc = sg.hot_column(w, devs)
    assert hc.placement["t.a"] == "fast"
    assert lopt.predicted_s <= hc.predicted_s + 1e-12
    ht = sg.hot_table(w, devs)
    assert set(ht.placement.values()) == {"slow"}  # the table does not fit on fast whole
    assert ht.predicted_s >= lopt.predicted_s


def test_budget_mode_and_errors():
    w = small_workload()
    floor = sg.min_cost(w, [FAST, SLOW])
    r = sg.lopt(w, [FAST, SLOW], mode="budget", budget_ct=floor * 1.0)
    assert set(r.placement.values()) == {"slow"}
    with pytest.raises(InvalidArgumentError, match="infeasible budget"):
        sg.lopt(w, [FAST, SLOW], mode="budget", budget_ct=floor / 2)
    with pytest.raises(InvalidArgumentError, match="capacity mode only"):
        sg.solve(w, [FAST, SLOW], "hot-column", mode="budget", budget_ct=1.0)
    with pytest.raises(InvalidArgumentError, match=r"column t\.a .* fits on no device"):
        sg.lopt(w, [FAST.with_capacity(10.0), SLOW.with_capacity(10.0)])
    with pytest.raises(InvalidArgumentError, match="need at least 0.0 MB"):
        sg.lopt(w, [FAST.with_capacity(150.0), SLOW.with_capacity(140.0)])
    with pytest.raises(InvalidArgumentError, match="infeasible"):  # the total fits, not whole
        sg.lopt(w, [FAST.with_capacity(150.0), SLOW.with_capacity(150.0)])
    curve = sg.pareto(w, [FAST, SLOW], points=4)
    assert curve[0].predicted_s >= curve[-1].predicted_s
    adv = sg.advise(curve)
    assert adv["predicted_s"] <= curve[0].predicted_s


def test_no_regression():
    w = small_workload()
    devs = [FAST.with_capacity(200.0), SLOW.with_capacity(1000.0)]
    current = {"t.a": "slow", "t.b": "fast", "t.cold": "slow"}
    r = sg.lopt(w, devs, no_regression=current)
    before = m.query_times(w, devs, current)
    after = m.query_times(w, devs, r.placement)
    assert all(after[q] <= before[q] + 1e-12 for q in before)


def _store(tmp_path):
    con = duckdb.connect()
    src = tmp_path / "t.parquet"
    con.execute(
        f"COPY (SELECT range AS a, range * 2 AS b FROM range(1000)) TO '{src}' (FORMAT parquet)"
    )
    devs = [FAST, SLOW]
    return st.create_store(tmp_path / "store", {"t": str(src)}, devs), devs


def test_store_views_and_migration(tmp_path):
    s, devs = _store(tmp_path)
    assert s.placement() == {"t.a": "slow", "t.b": "slow"}
    con = st.connect(s)
    assert con.execute("SELECT sum(a), sum(b) FROM t").fetchone() == (499500, 999000)
    out = st.migrate(s, {"t.a": "fast"}, devs)
    assert out["moved_columns"] == 1
    s2 = st.open_store(s.root)
    assert s2.placement() == {"t.a": "fast", "t.b": "slow"}
    assert st.verify(s2) == []
    assert st.connect(s2).execute("SELECT sum(a), sum(b) FROM t").fetchone() == (499500, 999000)


def test_interrupted_migration_leaves_old_placement_readable(tmp_path):
    s, devs = _store(tmp_path)
    with pytest.raises(Exception, match="fail_after"):
        st.migrate(s, {"t.a": "fast", "t.b": "fast"}, devs, fail_after=1)
    s2 = st.open_store(s.root)
    assert s2.placement() == {"t.a": "slow", "t.b": "slow"}
    assert st.verify(s2) == []
    assert st.connect(s2).execute("SELECT sum(a) FROM t").fetchone() == (499500,)
    assert len(st.gc(s2)) == 1  # the new file written before the interruption
    st.migrate(s2, {"t.a": "fast", "t.b": "fast"}, devs)
    assert st.open_store(s.root).placement() == {"t.a": "fast", "t.b": "fast"}


def _readable(root) -> dict[str, str]:
    """Every column readable where the manifest says: checksums and a query over all."""
    s = st.open_store(root)
    assert st.verify(s) == []
    assert st.connect(s).execute("SELECT sum(a), sum(b) FROM t").fetchone() == (499500, 999000)
    return s.placement()


def test_failed_migration_leaves_every_column_readable(tmp_path, monkeypatch):
    """Injected I/O failures at each step of a migration: while writing the new files (the
    disk fills after one), at the manifest switch, and while deleting the old files. Every
    column stays readable in its old place (before the switch) or its new one (after)."""
    import errno
    import os

    s, devs = _store(tmp_path)
    target = {"t.a": "fast", "t.b": "fast"}
    real_write, calls = st._write_column, []

    def full_after_one(*a, **k):
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(*a, **k)

    monkeypatch.setattr(st, "_write_column", full_after_one)
    with pytest.raises(st.StorageIOError, match="migrating t.b to fast"):
        st.migrate(s, target, devs)
    monkeypatch.setattr(st, "_write_column", real_write)
    assert _readable(s.root) == {"t.a": "slow", "t.b": "slow"}
    assert len(st.gc(st.open_store(s.root))) == 1

    real_replace = os.replace

    def no_rename(src, dst):
        if str(dst).endswith(st.MANIFEST):
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(src, dst)

    monkeypatch.setattr(st.os, "replace", no_rename)
    with pytest.raises(st.StorageIOError, match="old placement stands"):
        st.migrate(st.open_store(s.root), target, devs)
    monkeypatch.setattr(st.os, "replace", real_replace)
    assert _readable(s.root) == {"t.a": "slow", "t.b": "slow"}
    assert len(st.gc(st.open_store(s.root))) == 2

    real_unlink = st.Path.unlink

    def no_unlink(self, *a, **k):
        if self.name.endswith(".g1.parquet"):
            raise OSError(errno.EIO, "Input/output error")
        return real_unlink(self, *a, **k)

    monkeypatch.setattr(st.Path, "unlink", no_unlink)
    out = st.migrate(st.open_store(s.root), target, devs)
    monkeypatch.setattr(st.Path, "unlink", real_unlink)
    assert len(out["old_files_left"]) == 2
    assert _readable(s.root) == target
    assert len(st.gc(st.open_store(s.root))) == 2
    assert _readable(s.root) == target


def test_corrupt_manifest(tmp_path):
    s, _ = _store(tmp_path)
    p = s.root / st.MANIFEST
    p.write_text(p.read_text().replace('"rows": 1000', '"rows": 1001'))
    with pytest.raises(CorruptionError, match="checksum"):
        st.open_store(s.root)


def test_lopt_decomposition_matches_the_full_mip():
    w = small_workload()
    cols = dict(w.columns)
    cols["u.k"] = m.Column("u", "k", 600.0, {"zstd": 200.0})
    w2 = m.Workload(cols, {**w.queries, "q3": [m.Scan("u", ("k",))]})
    devs = [FAST.with_capacity(250.0), SLOW.with_capacity(1000.0)]
    a = sg.lopt(w2, devs, decompose=True)
    b = sg.lopt(w2, devs, decompose=False, warm_start=False)
    assert a.status == b.status == "optimal"
    assert a.predicted_s == pytest.approx(b.predicted_s, rel=1e-4)
    assert a.extra["bound_s"] <= a.predicted_s * (1 + 1e-9)


def test_cheapen_never_slows_and_moves_cold_columns():
    w = small_workload()
    devs = [FAST, SLOW]
    p = {"t.a": "fast", "t.b": "fast", "t.cold": "fast"}
    q = sg.cheapen(w, devs, p, mode="budget")
    assert q["t.cold"] == "slow"
    assert m.total_time(w, devs, q) <= m.total_time(w, devs, p)
    assert m.cost(w, devs, q) < m.cost(w, devs, p)


def test_hot_column_repairs_a_stuck_greedy():
    sizes = {"c0": 20.0, "c1": 10.0, "c2": 40.0, "c3": 10.0}
    cols = {f"t.{c}": m.Column("t", c, s * 3, {"zstd": s}) for c, s in sizes.items()}
    w = m.Workload(cols, {"q1": [m.Scan("t", ("c0",))], "q2": [m.Scan("t", ("c0", "c1"))]})
    devs = [FAST.with_capacity(50.0), SLOW.with_capacity(32.0)]
    with pytest.raises(InvalidArgumentError, match="fits on no device"):
        sg.hot_column(w, devs, repair=False)
    r = sg.hot_column(w, devs)
    assert r.extra["repaired"] and set(r.placement) == set(cols)
    assert all(r.used_bytes[d.name] <= d.capacity for d in devs)


def test_hot_table_repairs_a_stuck_greedy():
    sizes = {"t0": 20.0, "t1": 10.0, "t2": 40.0, "t3": 10.0}
    cols = {f"{t}.c": m.Column(t, "c", s * 3, {"zstd": s}) for t, s in sizes.items()}
    scans = {"q1": [m.Scan("t0", ("c",))], "q2": [m.Scan("t0", ("c",)), m.Scan("t1", ("c",))]}
    w = m.Workload(cols, scans)
    devs = [FAST.with_capacity(50.0), SLOW.with_capacity(32.0)]
    with pytest.raises(InvalidArgumentError, match="fits on no device"):
        sg.hot_table(w, devs, repair=False)
    r = sg.hot_table(w, devs)
    assert r.extra["repaired"] and set(r.placement) == set(cols)
    assert all(r.used_bytes[d.name] <= d.capacity for d in devs)


def _coupled_workload() -> m.Workload:
    """Two tables competing for the fast device."""
    cols, scans = {}, {}
    for t, n in (("t", 3), ("u", 3)):
        for i in range(n):
            cols[f"{t}.c{i}"] = m.Column(t, f"c{i}", 300.0 + 50 * i, {"zstd": 100.0 + 20 * i})
        scans[f"q{t}1"] = [m.Scan(t, ("c0", "c1"))]
        scans[f"q{t}2"] = [m.Scan(t, ("c1", "c2"))]
    cols["u.cold"] = m.Column("u", "cold", 600.0, {"zstd": 200.0})
    return m.Workload(cols, scans)


def test_lagrangian_bound_is_valid_and_the_optimum_unchanged():
    w = _coupled_workload()
    devs = [FAST.with_capacity(300.0), SLOW.with_capacity(1000.0)]
    full = sg.lopt(w, devs, decompose=False, warm_start=False)
    lag = sg.lopt(w, devs, lagrange_iterations=10)
    plain = sg.lopt(w, devs, lagrange_iterations=1, decompose=True)
    assert full.status == lag.status == plain.status == "optimal"
    assert lag.predicted_s == pytest.approx(full.predicted_s, rel=1e-4)
    assert plain.predicted_s == pytest.approx(full.predicted_s, rel=1e-4)
    # every Lagrangian bound is a lower bound, and pricing the capacity only raises it
    assert plain.extra["lagrange_bound_s"] <= lag.extra["lagrange_bound_s"] + 1e-12
    assert lag.extra["lagrange_bound_s"] <= full.predicted_s * (1 + 1e-9)


def test_capacity_mode_solves_the_full_mip_without_the_table_stage_by_default():
    w = _coupled_workload()
    devs = [FAST.with_capacity(300.0), SLOW.with_capacity(1000.0)]
    plain = sg.lopt(w, devs)
    staged = sg.lopt(w, devs, decompose=True)
    assert plain.status == staged.status == "optimal"
    assert plain.extra["decomposed"] is False and "lagrange_bound_s" not in plain.extra
    assert "lagrange_bound_s" in staged.extra
    assert plain.predicted_s == pytest.approx(staged.predicted_s, rel=1e-4)
    # the scaled capacity rows still hold the placement to the capacities
    assert all(plain.used_bytes[d.name] <= d.capacity * (1 + 1e-9) for d in devs)


def test_budget_mode_relaxing_unread_columns_is_exact():
    w = _coupled_workload()
    devs = [FAST, SLOW]
    budget = sg.min_cost(w, devs) * 1.4
    a = sg.lopt(w, devs, mode="budget", budget_ct=budget, relax_untouched=True)
    b = sg.lopt(w, devs, mode="budget", budget_ct=budget, relax_untouched=False)
    assert a.status == b.status == "optimal"
    assert a.predicted_s == pytest.approx(b.predicted_s, rel=1e-4)
    assert a.cost_ct <= budget * (1 + 1e-9) and a.placement["u.cold"] == "slow"


def test_solver_summary_keeps_decompose_settings_apart():
    from attune.bench.place import summarize

    def row(dec, cpu, status="optimal"):
        r = {
            "bench": "place-mixes",
            "strategy": "lopt",
            "mix": {"a": 100},
            "time_limit_s": 120.0,
            "lagrange_max": 1,
            "predicted_s": 1.0,
            "bound_s": 1.0,
            "gap": 0.0,
            "status": status,
            "solve_s": 10 * cpu,
            "solve_cpu_s": cpu,
        }
        if dec is not None:
            r["decompose"] = dec
        return r

    out = summarize([row(None, 2.0), row("on", 6.0), row("on", 1.0, "Time limit reached")])
    by = {r["decompose"]: r for r in out if r["bench"] == "place-solver-summary"}
    assert set(by) == {"auto", "on"}  # rows written before the flag count as auto
    assert by["auto"]["optimal_within_5s_cpu"] == 1 and by["auto"]["optimal_within_5s"] == 0
    assert by["on"]["mixes"] == 2 and by["on"]["optimal"] == 1
    assert by["on"]["optimal_within_5s_cpu"] == 0 and by["on"]["max_solve_cpu_s"] == 6.0
