"""Functional dependencies in SplitGen (strategy "fd"): detection from distinct counts with the
sampling pre-filter, grouping before Algorithm 6, and splits that reconstruct exactly.

Hypothesis runs derandomized, so every run checks the same tables.
"""

import json
import math
import tempfile

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attune.frames import SplitError, read_split, split_arrow
from attune.frames.splitgen import (
    EXACT,
    FD,
    PAPER,
    ColumnStats,
    Dependency,
    TableStats,
    fd_groups,
    gen_attribute_groups,
)
from attune.frames.stats import compute_stats, detect_dependencies

SETTINGS = {
    "derandomize": True,
    "deadline": None,
    "print_blob": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def col(name, distinct, size, nrows):
    return ColumnStats(name, distinct, size, size * nrows)


# --- SplitGen on hand-made statistics ---------------------------------------------------------


def geo_stats(strategy, narrow=False):
    """zip (2,000 values) -> city (400) -> state (50), 8-byte text each, 20,000 rows: the
    product of distinct counts (4e7 rows) hides a 2,000-row dimension."""
    n = 20_000
    cols = (col("zip", 2000, 8, n), col("city", 400, 8, n), col("state", 50, 8, n))
    deps = (Dependency("zip", ("city", "state")), Dependency("city", ("state",)))
    return TableStats(n, cols, EXACT, narrow_keys=narrow, strategy=strategy, dependencies=deps)


def test_paper_strategy_misses_the_dependency_group_and_fd_finds_it():
    paper = gen_attribute_groups(geo_stats(PAPER))
    # Algorithm 6 as printed: state alone, then city alone (products of distinct counts explode).
    assert ("zip", "city", "state") not in [tuple(sorted(g)) for g in paper.dims]
    fd = gen_attribute_groups(geo_stats(FD))
    assert fd.fd_groups == {"zip": ("zip", "city", "state")}
    assert [sorted(g) for g in fd.dims] == [["city", "state", "zip"]]
    assert fd.fact == []
    assert fd.steps[0].action == "fd"
    assert fd.estimated_saving(geo_stats(FD)) > paper.estimated_saving(geo_stats(PAPER))


def test_a_dependency_group_saves_where_algorithm_6_refuses():
    # Two 8-byte columns tied one to one, 8-byte keys: no column can start a group alone
    # (EST of one column >= n * 8 = ACT), so the paper's sweep refuses the table.
    n = 10_000
    cols = (col("code", 100, 8, n), col("name", 100, 8, n))
    deps = (Dependency("code", ("name",)), Dependency("name", ("code",)))
    paper = gen_attribute_groups(TableStats(n, cols, strategy=PAPER, dependencies=deps))
    assert paper.dims == []
    fd = gen_attribute_groups(TableStats(n, cols, strategy=FD, dependencies=deps))
    assert [sorted(g) for g in fd.dims] == [["code", "name"]]


def test_without_dependencies_fd_is_algorithm_6():
    n = 1000
    cols = (col("a", 3, 30, n), col("b", 7, 30, n), col("c", 900, 8, n))
    paper = gen_attribute_groups(TableStats(n, cols, strategy=PAPER))
    fd = gen_attribute_groups(TableStats(n, cols, strategy=FD))
    assert (fd.dims, fd.fact) == (paper.dims, paper.fact)


def test_a_dependent_that_costs_more_than_it_saves_stays_out():
    # "note" is determined by id_group but is long in one row and empty elsewhere: adding it
    # would add distinct * max_size to EST and almost nothing to ACT.
    n = 10_000
    cols = (
        col("grp", 500, 16, n),
        col("label", 500, 16, n),
        ColumnStats("note", 2, 5000, 5000),
    )
    deps = (Dependency("grp", ("label", "note")),)
    groups, _ = fd_groups(TableStats(n, cols, strategy=FD, dependencies=deps))
    assert groups == {"grp": ("grp", "label")}


def test_every_column_lands_once_and_groups_save():
    n = 50_000
    cols = tuple(col(f"c{i}", d, 12, n) for i, d in enumerate([5, 40, 40, 300, 300, 49_000, 2]))
    deps = (
        Dependency("c3", ("c1", "c4", "c0")),
        Dependency("c4", ("c3", "c1", "c0")),
        Dependency("c1", ("c2", "c0")),
    )
    for strategy in (FD, PAPER):
        for narrow in (False, True):
            stats = TableStats(n, cols, narrow_keys=narrow, strategy=strategy, dependencies=deps)
            plan = gen_attribute_groups(stats)
            placed = [a for g in plan.dims for a in g] + plan.fact
            assert sorted(placed) == sorted(c.name for c in cols)
            assert plan.estimated_saving(stats) > 0


def test_unknown_strategy_or_column_is_an_error():
    n = 10
    cols = (col("a", 2, 4, n),)
    with pytest.raises(ValueError, match="strategy"):
        gen_attribute_groups(TableStats(n, cols, strategy="magic"))
    with pytest.raises(ValueError, match="unknown column"):
        gen_attribute_groups(
            TableStats(n, cols, strategy=FD, dependencies=(Dependency("a", ("zz",)),))
        )


# --- detection in DuckDB ----------------------------------------------------------------------


def detect(table: pa.Table, sample_rows=50, narrow=True):
    con = duckdb.connect()
    con.register("arrow_t", table)
    con.execute("CREATE TABLE t AS SELECT * FROM arrow_t")
    stats = compute_stats(con, "t", EXACT, narrow_keys=narrow)
    deps = detect_dependencies(con, "t", stats, sample_rows=sample_rows)
    con.close()
    return {d.determinant: set(d.dependents) for d in deps}


def test_detection_finds_exact_dependencies_and_constants():
    n = 400
    city = [f"city-{i % 40:03d}" for i in range(n)]
    t = pa.table(
        {
            "city": city,
            "state": [f"state-{i % 40 % 8}" for i in range(n)],
            "country": ["US"] * n,
            "other": [f"o{(i * 7) % 13}" for i in range(n)],
            "id": list(range(n)),
        }
    )
    found = detect(t)
    assert found["city"] == {"state", "country"}
    assert "state" not in found["other"]
    assert "id" not in found  # a key is never a determinant (it cannot make a smaller dimension)
    assert "country" not in found  # a constant is a dependent of every determinant, no more


def test_one_violating_row_outside_the_sample_is_caught_by_the_exact_check():
    n = 5000
    a = [f"a{i % 50}" for i in range(n)]
    b = [f"b{i % 50}" for i in range(n)]
    b[-1] = "b-odd"  # a -> b fails on the last row only
    t = pa.table({"a": a, "b": b, "c": [f"c{i % 50}" for i in range(n)]})
    found = detect(t, sample_rows=100)
    assert "b" not in found.get("a", set())
    assert "c" in found["a"] and "a" in found["c"]


def test_nulls_and_signed_zeros_count_as_values():
    n = 600
    x = [None if i % 3 == 0 else f"x{i % 3}" for i in range(n)]  # None, x1, x2
    y = [None if i % 3 == 0 else f"y{i % 3}" for i in range(n)]  # ties one to one with x
    z = [-0.0 if i % 3 == 0 else 0.0 for i in range(n)]  # two values, equal as numbers
    w = [float(i % 3 == 0) for i in range(n)]
    t = pa.table({"x": x, "y": y, "z": z, "w": w, "pad": [f"p{i % 150}" for i in range(n)]})
    found = detect(t)
    assert found["x"] >= {"y", "z", "w"}
    # z tells -0.0 from 0.0, exactly as w tells 1.0 from 0.0 (but not x1 from x2)
    assert "w" in found["z"] and "z" in found["w"] and "x" not in found["z"]


# --- splits with dependencies -----------------------------------------------------------------


def fd_table(n, d, dependents, width=6):
    """n rows, a determinant with d values and ``dependents`` columns derived from it."""
    cols = {"k": [i % d for i in range(n)]}
    for j in range(dependents):
        cols[f"dep{j}"] = [f"{'v' * width}{j}-{(i % d) * 7919 % 10007}" for i in range(n)]
    cols["m"] = [i * 3 % 101 for i in range(n)]
    return pa.table(cols)


@pytest.mark.parametrize("n,d,deps", [(2000, 40, 1), (5000, 700, 2), (3000, 3, 3)])
def test_a_table_with_an_exact_dependency_is_split_and_comes_back(n, d, deps):
    t = fd_table(n, d, deps)
    with tempfile.TemporaryDirectory() as tmp:
        res = split_arrow(t, tmp + "/s")
        grouped = {c for g in res.plan.dims for c in g}
        assert {f"dep{j}" for j in range(deps)} <= grouped
        back = read_split(tmp + "/s")
        assert back.schema == t.schema and back.equals(t)


def test_paper_refuses_what_fd_splits():
    # 8-byte integer determinant and 8-byte text dependent, 1,000 distinct: as printed every
    # single column costs EST >= n * 8 = ACT, so Algorithm 6 emits nothing.
    n, d = 20_000, 1000
    t = pa.table(
        {
            "code": pa.array([i % d for i in range(n)], pa.int64()),
            "name": [f"n{(i % d):07d}" for i in range(n)],
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        with pytest.raises(SplitError, match="no attribute group would shrink"):
            split_arrow(t, tmp + "/p", strategy="paper")
        res = split_arrow(t, tmp + "/f", strategy="fd", narrow_keys=False)
        assert [sorted(g) for g in res.plan.dims] == [["code", "name"]]
        assert read_split(tmp + "/f").equals(t)


WORDS = ["", "alpha-long-value-0001", "beta-long-value-00002", None, "é-ü-ß"]


@st.composite
def dependent_tables(draw):
    """Random determinants with columns derived from them through random maps (exact
    dependencies), noise columns, NULLs, NaN and signed zeros."""
    nrows = draw(st.integers(1, 80))
    ndet = draw(st.integers(1, 2))
    cols: dict[str, pa.Array] = {}
    for i in range(ndet):
        dvals = draw(st.integers(1, 6))
        det = draw(st.lists(st.integers(0, dvals - 1), min_size=nrows, max_size=nrows))
        cols[f"det{i}"] = pa.array(det, pa.int32())
        for j in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["str", "float", "int"]))
            if kind == "str":
                m = draw(st.lists(st.sampled_from(WORDS), min_size=dvals, max_size=dvals))
                cols[f"d{i}_{j}_s"] = pa.array([m[v] for v in det], pa.string())
            elif kind == "float":
                vals = [0.0, -0.0, 1.5, math.nan, math.inf, None]
                m = draw(st.lists(st.sampled_from(vals), min_size=dvals, max_size=dvals))
                cols[f"d{i}_{j}_f"] = pa.array([m[v] for v in det], pa.float64())
            else:
                m = draw(st.lists(st.integers(-5, 5) | st.none(), min_size=dvals, max_size=dvals))
                cols[f"d{i}_{j}_i"] = pa.array([m[v] for v in det], pa.int64())
    noise = draw(st.lists(st.sampled_from(WORDS), min_size=nrows, max_size=nrows))
    cols["noise"] = pa.array(noise, pa.string())
    return pa.table(cols)


def canon_rows(t: pa.Table):
    def c(v):
        return ("f", repr(v)) if isinstance(v, float) else (type(v).__name__, repr(v))

    return sorted(tuple(c(v) for v in r.values()) for r in t.to_pylist())


@settings(max_examples=25, **SETTINGS)
@given(
    t=dependent_tables(),
    strategy=st.sampled_from(["fd", "paper"]),
    narrow=st.sampled_from([None, True, False]),
    variant=st.sampled_from(["exact", "approx"]),
)
def test_split_with_dependencies_reconstructs_exactly(t, strategy, narrow, variant):
    with tempfile.TemporaryDirectory() as tmp:
        try:
            res = split_arrow(t, tmp + "/s", strategy=strategy, narrow_keys=narrow, variant=variant)
        except SplitError as exc:
            assert "refusing" in str(exc), str(exc)
            if variant == "exact" and strategy == "fd":
                assert "no attribute group" in str(exc), str(exc)
            return
        if variant == "exact":
            assert res.split_logical_bytes < res.input_logical_bytes
        back = read_split(tmp + "/s")
        assert back.schema == t.schema
        assert canon_rows(back) == canon_rows(t)


def test_cli_strategy_and_narrow_key_switches(tmp_path, capsys):
    from attune.cli import main

    n, d = 20_000, 1000
    lines = ["code,name"] + [f"{i % d},n{(i % d):07d}" for i in range(n)]
    src = tmp_path / "t.csv"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "fd"
    assert main(["split", str(src), "--out", str(out), "--json", "--no-progress"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["strategy"] == "fd" and obj["narrow_keys"] is True
    assert obj["fd_groups"] == {"code": ["code", "name"]}
    args = ["split", str(src), "--json", "--no-progress", "--strategy", "paper"]
    assert main([*args, "--out", str(tmp_path / "p")]) == 1  # refused, as printed
    assert "no attribute group" in capsys.readouterr().out
    assert main([*args, "--narrow-keys", "--out", str(tmp_path / "pn")]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["strategy"] == "paper" and obj["narrow_keys"] is True
