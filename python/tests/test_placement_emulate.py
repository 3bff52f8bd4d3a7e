"""attune.placement.emulate: emulated devices are set up and always removed; the retriever reads
every byte; calibration writes a catalogue. No timing is asserted."""

from __future__ import annotations

import subprocess

import pytest

from attune.placement import devices as dv
from attune.placement import emulate as em

DEVS = [dv.Device("fast", 100.0, 40e6, readers=2), dv.Device("slow", 10.0, 20e6)]


def _loops_of(path) -> list[str]:
    out = subprocess.run(["losetup", "-a"], check=True, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(path) in line]


def _check_reads(e, tmp_path):
    files = []
    for i, (name, d) in enumerate(sorted(e.dirs().items())):
        p = d / f"f{i}.bin"
        p.write_bytes(bytes(range(256)) * 4096 * (i + 1))
        files.append(p)
    r = e.read_files(files)
    assert r["bytes"] == {"fast": 1 << 20, "slow": 2 << 20}
    cal = em.calibrate(e, big_bytes=4 << 20, small_files=2, repeats=1)
    assert [d.name for d in cal] == ["fast", "slow"]
    assert all(d.measured[d.codec] > 0 for d in cal)
    assert dv.devices_from_doc(__import__("tomllib").loads(dv.devices_to_toml(cal)), "calibrated")[
        0
    ].measured


def test_inprocess_mode_reads_every_byte(tmp_path):
    with em.Emulator(DEVS, tmp_path / "emu", mode="inprocess", speed=1.0) as e:
        assert e.mode == "inprocess" and e.cgroup is None
        _check_reads(e, tmp_path)


def test_bad_arguments():
    with pytest.raises(em.InvalidArgumentError, match="emulation mode"):
        em.Emulator(DEVS, "/tmp/x", mode="fast")
    with pytest.raises(em.InvalidArgumentError, match="speed"):
        em.Emulator(DEVS, "/tmp/x", speed=0)


@pytest.mark.skipif(
    em.kernel_unavailable() is not None, reason=f"kernel emulation: {em.kernel_unavailable()}"
)
def test_kernel_mode_sets_up_throttles_and_cleans_up(tmp_path):
    work = tmp_path / "emu"
    with em.Emulator(DEVS, work, mode="kernel", speed=1.0, image_bytes=64 << 20) as e:
        cg = e.cgroup
        assert cg is not None and cg.exists()
        lines = (cg / "blkio.throttle.read_bps_device").read_text().split("\n")
        assert sorted(int(x.split()[1]) for x in lines if x) == [20_000_000, 40_000_000]
        assert len(_loops_of(work)) == 2
        _check_reads(e, tmp_path)
    assert not cg.exists()
    assert _loops_of(work) == []
    assert not any(work.glob("*.img"))

    # an exception inside the block cleans up too
    with pytest.raises(RuntimeError), em.Emulator(DEVS, work, mode="kernel", image_bytes=64 << 20):
        raise RuntimeError("boom")
    assert _loops_of(work) == []


def test_measured_run_on_emulated_devices(tmp_path):
    """Loads TPC-H SF 0.01 onto two in-process devices, places it with budget-mode LOPT,
    migrates, and measures every query: rows for all 22, predictions from the model."""
    import shutil as sh
    import sys
    from pathlib import Path

    gen = sh.which("tpchgen-cli") or sh.which("tpchgen-cli", path=str(Path(sys.executable).parent))
    if gen is None:
        pytest.skip("tpchgen-cli not installed (dev extra)")
    from attune.placement import measure as me
    from attune.placement import store as st
    from attune.placement import strategies as sg
    from attune.placement import trace as tr
    from attune.placement.model import Workload

    data = tmp_path / "data"
    subprocess.run(
        [gen, "parquet", "-s", "0.01", "--output-dir", str(data)],
        check=True,
        capture_output=True,
    )
    tables = {p.stem: str(p) for p in data.glob("*.parquet")}
    devs = [dv.Device("fast", 100.0, 400e6, readers=2), dv.Device("slow", 10.0, 200e6)]
    with em.Emulator(devs, tmp_path / "emu", mode="inprocess") as e:
        mounted = e.mounted_devices()
        store = st.create_store(tmp_path / "store", tables, mounted)
        sql = tr.tpch_queries()
        w = Workload(store.model_columns(), tr.extract_workload(sql, tr.TPCH_SCHEMA))
        lo = sg.min_cost(w, mounted)
        r = sg.lopt(w, mounted, mode="budget", budget_ct=lo * 1.5)
        few = Workload(w.columns, {q: w.queries[q] for q in ("q01", "q06", "q14")})
        terms = me.engine_terms(store, few, sql, repeats=1)  # on the loaded placement
        st.migrate(store, r.placement, mounted)
        rows = me.run_queries(e, store, w, sql, mounted)
        few = Workload(store.model_columns(), few.queries)
        seq = me.run_queries(e, store, few, sql, mounted, pipeline=False, terms=terms)
    assert [x["query"] for x in rows] == sorted(sql)
    assert all(x["predicted_s"] > 0 and x["io_s"] > 0 and x["engine_s"] > 0 for x in rows)
    assert all(x["pipeline"] for x in rows) and not any(x["pipeline"] for x in seq)
    assert sum(x["predicted_s"] for x in rows) == pytest.approx(r.predicted_s, rel=1e-9)
    assert [x["query"] for x in seq] == ["q01", "q06", "q14"]
    for x in seq:
        assert x["predicted_s"] == pytest.approx(
            x["predicted_io_s"] + x["decode_term_s"] + x["exec_term_s"], rel=1e-12
        )


def test_engine_prediction():
    from attune.placement import measure as me

    term = {"decode_s": 2.0, "exec_s": 0.5}
    assert me.engine_prediction(3.0, term, True) == 3.5  # decoding hidden behind reading
    assert me.engine_prediction(1.0, term, True) == 2.5  # reading hidden behind decoding
    assert me.engine_prediction(1.0, term, False) == 3.5  # sequential: everything adds up
