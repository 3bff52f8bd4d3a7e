"""Adaptive cache sizing from Python: options, stats()["cache_tiers"], `attune cache mrc`."""

import itertools
import json
import subprocess
import sys

import pytest

import attune

ATTUNE = [sys.executable, "-m", "attune.cli"]


def _fill(db, n=3000):
    batch = attune.WriteBatch()
    for i in range(n):
        batch.put(b"key%06d" % i, (b"value-%06d-" % i) * 40)
    db.write(batch)
    db.compact()


def test_without_memory_budget_there_is_no_controller(tmp_path):
    with attune.DB(str(tmp_path / "db")) as db:
        assert db.stats()["cache_tiers"] is None


def test_user_layout_reports_an_exact_split_and_every_tier(tmp_path):
    opts = {"memory_budget": "8MiB", "cache_layout": "user", "cache_sizing": "1MiB"}
    opts.update(enable_blob_files="false", cache_miss_costs="3000:16000")
    try:
        db = attune.DB(str(tmp_path / "db"), **opts)
    except attune.InvalidArgumentError as e:  # a file system without O_DIRECT (tmpfs)
        assert "O_DIRECT" in str(e)
        pytest.skip(str(e))
    with db:
        _fill(db)
        for _ in range(2):
            for i in range(3000):
                assert db.get(b"key%06d" % i) == (b"value-%06d-" % i) * 40
        t = db.stats()["cache_tiers"]
    assert t["layout"] == "user" and t["sizing"] == str(1 << 20)
    assert t["app_bytes"] == 1 << 20
    assert t["app_bytes"] + t["compressed_cache"]["capacity_bytes"] == t["budget_bytes"]
    assert t["second_hits"] > 0 and t["device_reads"] > 0 and t["unknown_reads"] == 0
    assert t["second_ns"] > 0 and t["device_ns"] > 0
    assert 0 < t["second_hit_ns_median"] and 0 < t["device_read_ns_median"]
    assert t["costs_source"] == "fixed"


@pytest.mark.parametrize(
    "opts",
    [
        {"cache_layout": "both"},
        {"cache_sizing": "lots"},
        {"cache_layout": "user"},  # needs memory_budget
        {"memory_budget": "64MiB", "cache_sizing": "1GiB"},  # above the cache budget
        {"cache_miss_costs": "fast"},
    ],
)
def test_bad_cache_options_raise_invalid_argument(tmp_path, opts):
    with pytest.raises(attune.InvalidArgumentError):
        attune.DB(str(tmp_path / "db"), **opts)


def test_cli_cache_mrc_prints_a_curve_as_json(tmp_path):
    path = str(tmp_path / "db")
    with attune.DB(path, enable_blob_files="false") as db:
        _fill(db, 6000)
    out = subprocess.run(
        [
            *ATTUNE,
            "cache",
            "mrc",
            path,
            "--reads",
            "150000",  # the controller closes a window every 65,536 block accesses
            "--memory-budget",
            "8MiB",
            "--distribution",
            "uniform",
            "-o",
            "cache_sample_inv=1",
            "--json",
            "--timeline",
            str(tmp_path / "timeline.json"),
            "--timeline-plot",
            str(tmp_path / "timeline.png"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    r = json.loads(out.stdout)
    assert r["keys"] == 6000 and r["found"] == 150000
    assert r["rounds"] >= 1, r
    assert r["controller_cpu_ns"] > 0, "the controller's own CPU time is counted"
    series = json.loads((tmp_path / "timeline.json").read_text())
    assert series["rounds"] == r["rounds"] and series["timeline"], series
    ms = [w["ms"] for w in series["timeline"]]
    assert ms == sorted(ms) and all(0 < w["app_bytes"] <= 8 << 20 for w in series["timeline"])
    assert (tmp_path / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ratios = [p["miss_ratio"] for p in r["mrc"]]
    assert ratios and all(a >= b for a, b in itertools.pairwise(ratios)), "a miss-ratio curve falls"
    assert ratios[0] == 1.0 and ratios[-1] < 0.1


def test_cli_cache_mrc_refuses_a_missing_database(tmp_path):
    out = subprocess.run(
        [*ATTUNE, "cache", "mrc", str(tmp_path / "nothing"), "--reads", "10"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
