"""`delete_range(begin, end)`, as a RocksDB user expects it: one write deletes every key in
[begin, end) written before it, in gets, `in`, multi_get, iteration (both directions) and
snapshots, through flush, compaction and reopen; a `WriteBatch` applies it in order; bad bounds
are `InvalidArgumentError`s naming the argument; `attune kv delete-range` does the same."""

import json

import pytest

import attune
from attune.cli import main as cli_main


def _keys(db, **kw):
    return [k for k, _ in db.items(**kw)]


def test_a_range_is_gone_from_every_read_and_stays_gone(tmp_path):
    path = tmp_path / "db"
    with attune.DB(path) as db:
        for i in range(100):
            db.put(b"k%03d" % i, b"v%d" % i)
        db.flush()
        snap = db.snapshot()
        db.delete_range(b"k010", b"k090")
        db.put(b"k050", b"again")
        live = [b"k%03d" % i for i in range(100) if not 10 <= i < 90 or i == 50]
        assert _keys(db) == live
        assert _keys(db, reverse=True) == live[::-1]
        assert db.get(b"k020") is None and b"k020" not in db
        assert db.multi_get([b"k009", b"k010", b"k050", b"k090"]) == [
            b"v9",
            None,
            b"again",
            b"v90",
        ]
        assert snap.get(b"k020") == b"v20"
        del snap
        db.flush()
        db.compact()
        assert _keys(db) == live
    with attune.DB(path) as db:
        assert _keys(db) == live


def test_a_batch_applies_a_range_deletion_in_order(tmp_path):
    with attune.DB(tmp_path / "db") as db:
        b = attune.WriteBatch()
        b.put(b"a1", b"1")
        b.delete_range(b"a", b"b")
        b.put(b"a2", b"2")
        db.write(b)
        assert _keys(db) == [b"a2"]


def test_bad_bounds_name_the_argument(tmp_path):
    with attune.DB(tmp_path / "db") as db:
        with pytest.raises(attune.InvalidArgumentError, match="begin"):
            db.delete_range(b"b", b"a")
        with pytest.raises(attune.InvalidArgumentError, match="end"):
            db.delete_range(b"a", b"x" * (70 << 10))
        with pytest.raises(attune.InvalidArgumentError, match="begin"):
            attune.WriteBatch().delete_range(b"z", b"a")
        db.put(b"a", b"1")
        db.delete_range(b"a", b"a")  # empty: deletes nothing
        assert db[b"a"] == b"1"


def test_cli_delete_range(tmp_path, capsys):
    path = str(tmp_path / "db")
    with attune.DB(path) as db:
        for k in (b"a", b"b", b"c"):
            db.put(k, b"v")
    assert cli_main(["kv", "delete-range", path, "a", "c", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    with attune.DB(path) as db:
        assert _keys(db) == [b"c"]
    assert cli_main(["kv", "delete-range", path, "c", "a"]) != 0
