"""Learned indexes in attune.DB: the option, learn_all, stats, persisted models and the CLI."""

import itertools
import json
import subprocess
import sys

import pytest

import attune

ATTUNE = [sys.executable, "-m", "attune.cli"]


def _fill(db, n=20_000):
    for i in range(n):
        db.put(i.to_bytes(8, "big") + b"00000000", b"v%d" % i)
    db.flush()
    db.compact()


def test_models_serve_lookups_and_show_in_stats(tmp_path):
    with attune.DB(str(tmp_path / "db"), learned_index="always", learned_wait_ms=3_600_000) as db:
        _fill(db)
        assert db.learn_all() >= 1
        for i in range(0, 20_000, 7):
            assert db.get(i.to_bytes(8, "big") + b"00000000") == b"v%d" % i
        assert db.get(b"absent") is None
        s = db.stats()
    assert s["learned"]["mode"] == "always"
    assert s["learned"]["files_with_models"] >= 1
    assert s["model_bytes"] > 0
    assert s["learned_lookups"] > 0
    assert s["learned_lookups"] <= s["total_lookups"]
    assert s["options"]["learned_delta"] == "8"


def test_off_mode_has_no_models_and_learn_all_explains(tmp_path):
    with attune.DB(str(tmp_path / "db"), learned_index="off") as db:
        _fill(db, 2_000)
        with pytest.raises(attune.InvalidArgumentError, match="learned_index is off"):
            db.learn_all()
        assert db.stats()["learned"]["mode"] == "off"


def test_bad_learned_options_are_clear_errors(tmp_path):
    with pytest.raises(attune.InvalidArgumentError, match="valid: off, analyzer, always, offline"):
        attune.DB(str(tmp_path / "a"), learned_index="sometimes")
    with pytest.raises(attune.InvalidArgumentError, match="learned_delta"):
        attune.DB(str(tmp_path / "b"), learned_delta=0)


def test_cli_learn_reports_json(tmp_path):
    path = str(tmp_path / "db")
    with attune.DB(path) as db:
        _fill(db)
    out = subprocess.run(
        [*ATTUNE, "kv", "learn", path, "--json"], capture_output=True, text=True, check=True
    )
    r = json.loads(out.stdout)
    assert r["tables_with_models"] == r["tables"] >= 1
    assert 0 < r["model_bytes"] < r["live_sst_bytes"]
    # The models were persisted: a reopened database has them without learning.
    with attune.DB(path, learned_wait_ms=3_600_000) as db:
        db.get(b"x")
        s = db.stats()
    assert s["learned"]["files_with_models"] == r["tables"]
    assert s["learned"]["files_learned"] == 0


def test_offline_mode_and_level_models(tmp_path):
    path = str(tmp_path / "db")
    opts = {"learned_index": "offline", "learned_level": True, "target_file_size": 64 << 10}
    with attune.DB(path, **opts) as db:
        _fill(db)
        s = db.stats()
        assert s["learned"]["files_with_models"] == 0, "offline: nothing learned in background"
        assert sum(s["level_files"][1:]) >= 2
        db.learn_all()
        s = db.stats()
        assert s["level_models"] == 1 and s["level_model_bytes"] > 0
    with attune.DB(path, **opts) as db:
        assert db.stats()["level_models"] == 1, "level models are loaded at open"
        for i in range(0, 20_000, 13):
            assert db.get(i.to_bytes(8, "big") + b"00000000") == b"v%d" % i


def test_cli_learn_levels(tmp_path):
    path = str(tmp_path / "db")
    with attune.DB(path, target_file_size=64 << 10) as db:
        _fill(db)
    out = subprocess.run(
        [*ATTUNE, "kv", "learn", path, "--mode", "offline", "--levels", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    r = json.loads(out.stdout)
    assert r["level_models"] == 1 and r["level_model_bytes"] > 0


def test_analyzer_benefit_option_and_its_accounting(tmp_path):
    path = str(tmp_path / "db")
    opts = {"learned_benefit": "lifetime", "learned_wait_ms": 0, "write_buffer_size": 64 << 10}
    with attune.DB(path, **opts) as db:
        for r in range(3):
            _fill(db, 5_000)
        s = db.stats()["learned"]
        assert db.stats()["options"]["learned_benefit"] == "lifetime"
    for key in ("benefit_realized_ns", "benefit_predicted_ns", "files_bootstrap"):
        assert s[key] >= 0
    assert s["analyzer_state_loaded"] is False
    # The analyzer's statistics were saved at close and are read back at open.
    with attune.DB(path, learned_wait_ms=0) as db:
        assert db.stats()["learned"]["analyzer_state_loaded"] is True
    with pytest.raises(attune.InvalidArgumentError, match="valid: remaining, lifetime"):
        attune.DB(path, learned_benefit="sometimes")


def test_calibration_and_hindsight_are_reported_and_calibration_can_be_off(tmp_path):
    path = str(tmp_path / "db")
    opts = {"learned_index": "always", "learned_wait_ms": 3_600_000, "write_buffer_size": 64 << 10}
    with attune.DB(path, **opts) as db:
        _fill(db, 5_000)
        assert db.learn_all() >= 1
        for i in range(0, 5_000, 7):
            db.get(i.to_bytes(8, "big") + b"00000000")
        s = db.stats()["learned"]
    # Always-learn trains models: hindsight accounts each one's cost and what it saved.
    assert s["hindsight_files"] > 0 and s["hindsight_learn_ns"] > 0
    frontier = s["hindsight_frontier"]
    assert frontier[0][0] == 0 and frontier[0][1] == s["hindsight_learn_ns"]
    assert all(b[1] <= a[1] for a, b in itertools.pairwise(frontier))
    assert 0.25 <= s["benefit_calibration"] <= 4
    with attune.DB(path, learned_calibrate=False) as db:
        assert db.stats()["options"]["learned_calibrate"] == "false"
        assert db.stats()["learned"]["benefit_calibration"] == 1.0
    with pytest.raises(attune.InvalidArgumentError, match="learned_calibrate"):
        attune.DB(path, learned_calibrate="maybe")
    with attune.DB(path, learned_control_sample=0) as db:
        assert db.stats()["options"]["learned_control_sample"] == "0"
    with pytest.raises(attune.InvalidArgumentError, match="learned_control_sample"):
        attune.DB(path, learned_control_sample=1 << 30)


def test_mmap_reads_limit_option(tmp_path):
    path = str(tmp_path / "db")
    with attune.DB(path, mmap_reads_limit="64KiB", write_buffer_size=64 << 10) as db:
        _fill(db, 5_000)
        for i in range(0, 5_000, 11):
            assert db.get(i.to_bytes(8, "big") + b"00000000") == b"v%d" % i
        assert db.stats()["options"]["mmap_reads_limit"] == str(64 << 10)
    with pytest.raises(attune.InvalidArgumentError, match="valid: auto, unlimited"):
        attune.DB(path, mmap_reads_limit="lots")


def test_breakeven_can_be_switched_off_and_is_counted(tmp_path):
    path = str(tmp_path / "db")
    with attune.DB(path) as db:
        assert db.stats()["options"]["learned_breakeven"] == "true"
        assert db.stats()["learned"]["files_breakeven"] == 0
    with attune.DB(path, learned_breakeven=False) as db:
        assert db.stats()["options"]["learned_breakeven"] == "false"
    with pytest.raises(attune.InvalidArgumentError, match="learned_breakeven"):
        attune.DB(path, learned_breakeven="sometimes")


def test_learning_io_cost_can_be_switched_off_and_is_counted(tmp_path):
    path = str(tmp_path / "db")
    with attune.DB(path) as db:
        assert db.stats()["options"]["learned_io_cost"] == "true"
        learned = db.stats()["learned"]
        assert learned["files_deferred_io"] == 0
        assert learned["deferred_io_bytes"] == 0
        assert learned["io_ns_per_byte"] > 0
    with attune.DB(path, learned_io_cost=False) as db:
        assert db.stats()["options"]["learned_io_cost"] == "false"
    with pytest.raises(attune.InvalidArgumentError, match="learned_io_cost"):
        attune.DB(path, learned_io_cost="sometimes")
