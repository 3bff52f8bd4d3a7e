"""Bulk ingest from Python: `attune.TableWriter`, `DB.ingest` and `attune kv ingest`."""

import json
import subprocess
import sys

import pytest

import attune

ATTUNE = [sys.executable, "-m", "attune.cli"]


def write_table(path, items, **options):
    with attune.TableWriter(path, **options) as w:
        for k, v in items:
            if v is None:
                w.delete(k)
            else:
                w.put(k, v)
    return str(path)


def test_ingested_keys_shadow_older_ones_and_snapshots_keep_the_past(tmp_path):
    f = write_table(tmp_path / "a.sst", [(b"a", b"new"), (b"b", None), ("c", "text")])
    with attune.DB(tmp_path / "db") as db:
        db.put(b"a", b"old")
        db.put(b"b", b"old")
        snap = db.snapshot()
        r = db.ingest([f])
        assert r["entries"] == 3 and len(r["files"]) == 1
        assert r["files"][0]["smallest_key"] == b"a" and r["files"][0]["largest_key"] == b"c"
        assert r["memtable_flushed"] and not r["sources_removed"]
        assert db[b"a"] == b"new" and b"b" not in db and db[b"c"] == b"text"
        assert snap.get(b"a") == b"old" and snap.get(b"b") == b"old" and snap.get(b"c") is None
        snap.release()
    with attune.DB(tmp_path / "db") as db:
        assert db[b"a"] == b"new" and db.get(b"b") is None


def test_move_removes_sources_and_a_single_path_is_accepted(tmp_path):
    f = write_table(tmp_path / "a.sst", [(b"k", b"v")])
    with attune.DB(tmp_path / "db") as db:
        r = db.ingest(tmp_path / "a.sst", move=True)
        assert r["sources_removed"]
    assert not (tmp_path / "a.sst").exists()
    assert f


def test_finish_describes_the_file_and_out_of_order_keys_name_their_position(tmp_path):
    w = attune.TableWriter(str(tmp_path / "t.sst"), compression="zstd", block_size="8KiB")
    w.put(b"k1", b"v")
    with pytest.raises(attune.InvalidArgumentError, match="position 1"):
        w.put(b"k0", b"v")
    w.put(b"k2", b"v")
    assert w.entries == 2
    info = w.finish()
    assert info["entries"] == 2 and info["deletions"] == 0 and info["file_size"] > 0
    assert info["smallest_key"] == b"k1" and info["largest_key"] == b"k2"
    assert w.finished
    with pytest.raises(attune.InvalidArgumentError, match="already finished"):
        w.put(b"k3", b"v")


def test_a_block_that_raises_leaves_no_file(tmp_path):
    path = tmp_path / "t.sst"
    with pytest.raises(RuntimeError), attune.TableWriter(path) as w:
        w.put(b"a", b"1")
        raise RuntimeError("stop")
    assert not path.exists()


def test_bad_inputs_raise_named_errors_and_ingest_nothing(tmp_path):
    good = write_table(tmp_path / "good.sst", [(b"q", b"1")])
    o1 = write_table(tmp_path / "o1.sst", [(b"a", b"1"), (b"f", b"1")])
    o2 = write_table(tmp_path / "o2.sst", [(b"c", b"1")])
    junk = tmp_path / "junk.sst"
    junk.write_bytes(b"x" * 300)
    bad = write_table(tmp_path / "bad.sst", [(b"k%04d" % i, b"v" * 40) for i in range(300)])
    with open(bad, "r+b") as fh:
        fh.seek(20)
        byte = fh.read(1)[0]
        fh.seek(20)
        fh.write(bytes([byte ^ 0x40]))
    with attune.DB(tmp_path / "db") as db:
        db.put(b"z", b"1")
        cases = [
            ([good, str(tmp_path / "missing.sst")], attune.InvalidArgumentError, "missing.sst"),
            ([o1, o2], attune.InvalidArgumentError, "overlap"),
            ([good, str(junk)], attune.CorruptionError, "junk.sst"),
            ([good, bad], attune.CorruptionError, "bad.sst"),
            ([], attune.InvalidArgumentError, "empty"),
        ]
        for paths, cls, words in cases:
            with pytest.raises(cls, match=words):
                db.ingest(paths)
            assert list(db.keys()) == [b"z"]


def test_read_only_handle_refuses_ingest(tmp_path):
    f = write_table(tmp_path / "a.sst", [(b"k", b"v")])
    attune.DB(tmp_path / "db").close()
    with attune.DB(tmp_path / "db", read_only=True) as db, pytest.raises(attune.ReadOnlyError):
        db.ingest([f])


def test_cli_ingest_prints_json_and_a_bad_file_is_a_clean_error(tmp_path):
    f = write_table(tmp_path / "a.sst", [(b"k", b"v"), (b"\xff", b"w")])
    attune.DB(tmp_path / "db").close()
    out = subprocess.run(
        [*ATTUNE, "kv", "ingest", str(tmp_path / "db"), f, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    r = json.loads(out.stdout)
    assert r["entries"] == 2 and r["files"][0]["smallest_key"] == "k"
    assert r["files"][0]["largest_key_hex"] == "ff"
    with attune.DB(tmp_path / "db") as db:
        assert db[b"k"] == b"v"
    bad = subprocess.run(
        [*ATTUNE, "kv", "ingest", str(tmp_path / "db"), str(tmp_path / "nope.sst"), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode != 0
    assert json.loads(bad.stdout)["error"] == "InvalidArgumentError"
