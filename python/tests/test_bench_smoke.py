"""Smoke test of the harness through `attune bench`: tiny runs on every peer engine installed here
(rows and fields present and sane), YCSB through attune-workload, and clear errors for bad input.
Skipped engines are printed; the test fails if the harness binary is missing."""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from attune.bench import find_binary
from attune.cli import main

FIELDS = (
    "engine",
    "workload",
    "ops_per_sec",
    "latency_us",
    "bytes_read",
    "bytes_written",
    "write_amp",
    "space_amp",
    "peak_rss_bytes",
    "cpu_seconds",
    "settings",
    "command",
    "machine",
)
PEERS = ("attune", "rocksdb", "leveldb", "wiredtiger", "lmdb", "db_bench")


def _available() -> list[str]:
    out = subprocess.run(
        [str(find_binary()), "kv", "engines", "--json"], capture_output=True, text=True, check=True
    ).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    for r in rows:
        if not r["available"]:
            print(f"skipping {r['engine']}: {r['reason']}")
    return [r["engine"] for r in rows if r["available"] and r["engine"] in PEERS]


def _assert_rate_well_formed(r: dict) -> None:
    """ops_per_sec is finite, >= 0, and agrees with ops / seconds (no speed is demanded)."""
    rate, seconds = r["ops_per_sec"], r["seconds"]
    assert isinstance(rate, float) and math.isfinite(rate) and rate >= 0, r
    assert math.isfinite(seconds) and seconds >= 0, r
    if seconds > 0:
        assert math.isclose(rate, r["ops"] / seconds, rel_tol=1e-9), r


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_micro_on_every_available_peer_writes_complete_rows(tmp_path):
    engines = _available()
    assert engines, "no peer engine available: install the Debian packages (make setup)"
    out = tmp_path / "micro.jsonl"
    benches = "fillseq,fillrandom,readrandom,readseq,seekrandom,overwrite"
    code = main(
        [
            "bench",
            "micro",
            "--records",
            "2000",
            "--benchmarks",
            benches,
            "--engines",
            ",".join(engines),
            "--json",
            str(out),
            "--dir",
            str(tmp_path / "db"),
        ]
    )
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 6 * len(engines)
    for r in rows:
        for f in FIELDS:
            assert f in r, (r["engine"], r["workload"], f)
        # Speed-independent: a 2,000-entry readseq may finish in well under a millisecond.
        if r["workload"] == "readseq":  # one pass over the live keys (~63% after fillrandom)
            assert 0 < r["ops"] <= 2000, (r["engine"], r["ops"])
        else:
            assert r["ops"] == 2000, (r["engine"], r["workload"])
        _assert_rate_well_formed(r)
        lat = r["latency_us"]
        assert 0 <= lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"] + 1e-9
        assert r["cpu_seconds"] >= 0 and r["peak_rss_bytes"] > 0
        assert r["command"].startswith("attune-bench kv micro")
        assert r["machine"]["nproc"] >= 1
        if r["workload"] in ("fillseq", "fillrandom", "overwrite"):
            assert r["write_amp"] is not None and r["write_amp"] > 0
        else:
            assert r["write_amp"] is None
    by = {(r["engine"], r["workload"]): r for r in rows}
    for e in engines:
        assert by[(e, "fillseq")]["ops"] == 2000
        # readrandom after fillrandom finds about 63% of the keys (db_bench semantics).
        found = by[(e, "readrandom")]["found"]
        assert 1000 < found < 1600, (e, found)
        if e != "db_bench":
            # readseq visits every live key once; the harness counts live keys by replaying the
            # fillrandom stream, so the two must agree exactly.
            live = by[(e, "readrandom")]["logical_bytes"] // (16 + 100)
            assert by[(e, "readseq")]["found"] == live, e


def test_ycsb_load_and_workloads_run_on_rocksdb_and_lmdb(tmp_path):
    engines = [e for e in _available() if e in ("attune", "rocksdb", "lmdb")]
    if not engines:
        pytest.skip("neither rocksdb nor lmdb is installed")
    out = tmp_path / "ycsb.jsonl"
    code = main(
        [
            "bench",
            "ycsb",
            "--records",
            "2000",
            "--operations",
            "2000",
            "--workloads",
            "load,a,c,e",
            "--distribution",
            "zipfian:0.99",
            "--engines",
            ",".join(engines),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    rows = _rows(out)
    assert [r["workload"] for r in rows] == ["load", "a", "c", "e"] * len(engines)
    for r in rows:
        assert r["suite"] == "ycsb" and r["ops"] > 0
    c = [r for r in rows if r["workload"] == "c"]
    assert all(r["found"] == r["ops"] for r in c), "every read of workload c hits a loaded key"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--engines", "nosuchdb"], "valid engines: attune, rocksdb"),
        (["--records", "0"], "--records"),
        (["--benchmarks", "fillseq,readbogus"], "valid: fillseq"),
        (["--compression", "brotli"], "valid: none, snappy, lz4, zstd"),
        (["--cache-size", "12XB"], "unknown suffix"),
        (["--engines", "rocksdb:nokey=1"], "valid keys"),
        (["--engines", "leveldb:compression=lz4"], "leveldb offers none, snappy"),
    ],
)
def test_bad_input_is_a_clear_error_before_any_work(args, message, tmp_path, capfd):
    code = main(["bench", "micro", *args, "--json", str(tmp_path / "x.jsonl")])
    assert code == 2
    err = capfd.readouterr().err
    assert message in err and "Traceback" not in err and "panicked" not in err
    assert not (tmp_path / "x.jsonl").exists()


def test_cold_warm_and_threads_are_applied(tmp_path):
    engines = [e for e in _available() if e in ("rocksdb", "leveldb", "lmdb", "wiredtiger")]
    if not engines:
        pytest.skip("no in-process peer engine installed")
    out = tmp_path / "cold.jsonl"
    code = main(
        [
            "bench",
            "micro",
            "--records",
            "2000",
            "--operations",
            "500",
            "--benchmarks",
            "fillrandom,readrandom",
            "--engines",
            engines[0],
            "--threads",
            "2",
            "--cold",
            "--warmup-ops",
            "100",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    fill, read = _rows(out)
    assert fill["ops"] == 2 * 2000, "each thread performs the full count, as in db_bench"
    assert read["ops"] == 2 * 500, "warm-up operations are not recorded"
    assert read["params"]["cold"] and read["params"]["cold_files_dropped"] > 0
    assert read["params"]["threads"] == 2 and read["params"]["warmup_ops"] == 100


def test_ycsb_run_phases_without_load_load_first_and_say_so(tmp_path, capfd):
    out = tmp_path / "ycsb.jsonl"
    argv = ["bench", "ycsb", "--engines", "attune", "--workloads", "c,a", "--records", "500"]
    argv += ["--operations", "300", "--json", str(out)]
    assert main(argv) == 0
    err = capfd.readouterr().err
    assert "running `load` (500 records) first" in err
    rows = _rows(out)
    assert [r["workload"] for r in rows] == ["load", "c", "a"]
    assert rows[0]["params"]["load_added"] is True and rows[0]["ops"] == 500
    assert all("load_added" not in r["params"] for r in rows[1:])
    assert rows[1]["found"] == rows[1]["ops"] == 300, "every read of c finds a loaded key"


def test_compression_an_engine_lacks_runs_the_nearest_codec_and_records_both(tmp_path, capfd):
    engines = [e for e in _available() if e in ("attune", "leveldb", "lmdb")]
    if "leveldb" not in engines:
        pytest.skip("leveldb is not installed")
    out = tmp_path / "lz4.jsonl"
    argv = ["bench", "micro", "--engines", ",".join(engines), "--compression", "lz4"]
    argv += ["--records", "300", "--benchmarks", "fillseq", "--json", str(out)]
    assert main(argv) == 0, "an engine without lz4 is not a failure"
    err = capfd.readouterr().err
    assert "leveldb has no lz4 compression" in err and "running it with snappy" in err
    by = {r["engine"]: r for r in _rows(out)}
    assert set(by) == set(engines)
    leveldb = by["leveldb"]
    assert leveldb["params"]["compression"] == "snappy"
    assert leveldb["params"]["compression_requested"] == "lz4"
    assert leveldb["settings"]["compression"] == "snappy"
    if "lmdb" in by:
        assert by["lmdb"]["params"]["compression"] == "none"
        assert by["lmdb"]["params"]["compression_requested"] == "lz4"
    if "attune" in by:
        assert by["attune"]["params"]["compression"] == "lz4"
        assert "compression_requested" not in by["attune"]["params"]


def test_dabstep_phases_split_a_run_at_its_loads_and_preprocessing():
    # The phases of a DABstep-shaped run come from its nodes' timeline: the payments load's
    # end, the last preprocessing node's end, and the wide phase after it.
    from attune.bench.dabstep import phase_of
    from attune.bench.pipelines import _dabstep_phases
    from attune.pipelines.dag import RunResult

    assert [phase_of(n) for n in ("payments", "d2.fees", "d1.with_month", "d2.scheme_NexPay")] == [
        "load",
        "load",
        "preprocess",
        "preprocess",
    ]
    assert phase_of("d5.fraud_aci") == phase_of("delta3") == "compute"

    def node(start: float, end: float, cpu: float) -> dict:
        return {"started_at": start, "ended_at": end, "compute_cpu_seconds": cpu}

    res = RunResult(
        {},
        nodes={
            "payments": node(100.5, 101.0, 0.4),
            "fees": node(100.25, 100.5, 0.1),
            "with_month": node(101.0, 101.5, 0.2),
            "merchant": node(101.5, 102.0, 0.1),
            "fraud_aci": node(102.0, 102.5, 0.05),
        },
        seconds=2.75,
        started_at=100.0,
    )
    got = _dabstep_phases(res)
    assert got == pytest.approx(
        {
            "first_start_seconds": 0.25,
            "payments_done_seconds": 1.0,
            "preprocess_done_seconds": 2.0,
            "wide_phase_seconds": 0.75,
            "payments_cpu_seconds": 0.4,
            "preprocess_cpu_seconds": 0.3,
            "compute_cpu_seconds": 0.05,
        }
    )
