"""`attune.repair` and `attune kv repair`: salvage a damaged database into one that opens."""

import json
import os
import subprocess
import sys

import pytest

import attune

ATTUNE = [sys.executable, "-m", "attune.cli"]
SMALL = {"write_buffer_size": "16KiB", "target_file_size": "16KiB", "min_blob_size": "200"}


def _fill(path):
    model = {}
    with attune.DB(path, **SMALL) as db:
        for i in range(800):
            k = b"key%05d" % i
            v = (b"v%d:" % i).ljust(300 if i % 4 == 0 else 30, b"x")
            db.put(k, v)
            model[k] = v
        db.flush()
        for i in range(0, 800, 9):
            db.delete(b"key%05d" % i)
            del model[b"key%05d" % i]
    return model


def _contents(path):
    with attune.DB(path) as db:
        return dict(db.items())


def test_repair_of_a_healthy_database_changes_nothing_reads_see(tmp_path):
    path = tmp_path / "db"
    model = _fill(path)
    r = attune.repair(path)
    assert r["clean"] and r["keys"] == len(model)
    assert r["values_lost"] == 0 and r["segments_kept"] >= 1
    assert _contents(path) == model


def test_repair_after_current_is_damaged(tmp_path):
    path = tmp_path / "db"
    model = _fill(path)
    (path / "CURRENT").write_text("not a manifest\n")
    with pytest.raises(attune.CorruptionError):
        attune.DB(path)
    r = attune.repair(str(path))
    assert r["keys"] == len(model)
    assert "CURRENT" in os.listdir(path / "lost")
    assert _contents(path) == model


def test_damaged_table_is_reported_and_kept_in_lost(tmp_path):
    path = tmp_path / "db"
    model = _fill(path)
    victim = max((p for p in path.iterdir() if p.suffix == ".sst"), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[100] ^= 0xFF
    victim.write_bytes(bytes(data))
    r = attune.repair(path)
    f = next(f for f in r["files"] if f["name"] == victim.name)
    assert f["kind"] == "table" and f["records_lost"] > 0 and f["moved_to_lost"]
    assert f["error"] and victim.name in os.listdir(path / "lost")
    assert not r["clean"]
    got = _contents(path)
    assert len(model) - len(got) <= f["records_lost"]
    for k, v in got.items():
        assert model.get(k) == v


def test_repair_refuses_a_database_held_open(tmp_path):
    path = tmp_path / "db"
    _fill(path)
    with attune.DB(path), pytest.raises(attune.LockedError):
        attune.repair(path)


@pytest.mark.parametrize("bad", ["", "missing"])
def test_bad_path_names_the_argument(tmp_path, bad):
    with pytest.raises(attune.InvalidArgumentError, match="path"):
        attune.repair(str(tmp_path / bad) if bad else "")


def test_bad_option_names_the_option(tmp_path):
    path = tmp_path / "db"
    _fill(path)
    with pytest.raises(attune.InvalidArgumentError, match="no_such_option"):
        attune.repair(path, no_such_option="1")


def test_cli_repair_json_and_text(tmp_path):
    path = tmp_path / "db"
    model = _fill(path)
    (path / "CURRENT").write_text("garbage\n")
    out = subprocess.run(
        [*ATTUNE, "kv", "repair", str(path), "--json"], capture_output=True, text=True, check=True
    )
    r = json.loads(out.stdout)
    assert r["keys"] == len(model) and r["clean"]
    out = subprocess.run(
        [*ATTUNE, "kv", "repair", str(path)], capture_output=True, text=True, check=True
    )
    assert "repaired" in out.stdout and "nothing lost" in out.stdout
    assert _contents(path) == model
    bad = subprocess.run(
        [*ATTUNE, "kv", "repair", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "path" in bad.stderr
