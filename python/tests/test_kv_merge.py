"""`merge(key, operand)` with the built-in merge operators, as a RocksDB user knows `Merge()`:
counters (`add`, ints as 8 little-endian bytes), appends and maxima, in gets, `in`, multi_get,
iteration and snapshots, through flush, compaction and reopen (the operator is recorded); in a
`WriteBatch` and a transaction; bad operands and a missing or different operator raise
`InvalidArgumentError`s naming what was wrong; `attune kv merge` does the same from the shell."""

import json

import pytest

import attune
from attune.cli import main as cli_main


def _int(b):
    return int.from_bytes(b, "little")


def test_counters_add_across_flush_compaction_and_reopen(tmp_path):
    path = tmp_path / "db"
    with attune.DB(path, merge_operator="add") as db:
        for i in range(50):
            db.merge(b"hits", 1)
            if i % 20 == 0:
                db.flush()
        db.merge(b"hits", (5).to_bytes(8, "little"))
        db.merge("hits", -2)  # a negative int subtracts
        snap = db.snapshot()
        db.merge(b"hits", 10)
        assert _int(db[b"hits"]) == 63
        assert _int(snap.get(b"hits")) == 53
        db.compact()
        assert _int(db.get(b"hits")) == 63
        assert b"hits" in db and b"misses" not in db
        assert [_int(v) for v in db.multi_get([b"hits", b"hits"])] == [63, 63]
        assert [(k, _int(v)) for k, v in db.items()] == [(b"hits", 63)]
    # Reopened without the option: the recorded operator is used.
    with attune.DB(path) as db:
        db.merge(b"hits", 1)
        assert _int(db[b"hits"]) == 64


def test_append_and_max(tmp_path):
    with attune.DB(tmp_path / "a", merge_operator="append:,") as db:
        db.put(b"log", b"start")
        db.merge(b"log", b"x")
        db.merge(b"log", "y")
        assert db[b"log"] == b"start,x,y"
        del db[b"log"]
        db.merge(b"log", b"z")
        assert db[b"log"] == b"z"
        assert list(db.items(reverse=True)) == [(b"log", b"z")]
    with attune.DB(tmp_path / "m", merge_operator="max") as db:
        for v in (b"b", b"d", b"a"):
            db.merge(b"k", v)
        assert db[b"k"] == b"d"


def test_a_batch_and_a_transaction_merge(tmp_path):
    with attune.DB(tmp_path / "db", merge_operator="add") as db:
        b = attune.WriteBatch()
        b.put(b"c", (0).to_bytes(8, "little"))  # put takes bytes; merge also ints
        b.merge(b"c", 3)
        b.merge(b"c", 4)
        db.write(b)
        assert _int(db[b"c"]) == 7
        with db.transaction() as txn:
            txn.merge(b"c", 1)
            assert _int(txn[b"c"]) == 8
        assert _int(db[b"c"]) == 8
        txn = db.transaction()
        txn.merge(b"c", 1)
        db.merge(b"c", 100)
        with pytest.raises(attune.ConflictError):
            txn.commit()
        assert _int(db[b"c"]) == 108


def test_bad_operands_and_operators_are_refused(tmp_path):
    path = tmp_path / "db"
    with attune.DB(path, merge_operator="add") as db:
        with pytest.raises(attune.InvalidArgumentError, match="operand"):
            db.merge(b"c", b"short")
        with pytest.raises(attune.InvalidArgumentError, match="operand"):
            db.merge(b"c", 2**64)
        with pytest.raises(attune.InvalidArgumentTypeError, match="operand"):
            db.merge(b"c", 1.5)
        b = attune.WriteBatch()
        b.merge(b"c", b"xy")
        with pytest.raises(attune.InvalidArgumentError, match="operand"):
            db.write(b)
        db.put(b"text", b"not a number")
        db.merge(b"text", 1)
        with pytest.raises(attune.InvalidArgumentError, match="text"):
            db.get(b"text")
    with pytest.raises(attune.InvalidArgumentError, match="merge_operator"):
        attune.DB(path, merge_operator="append")
    with pytest.raises(attune.InvalidArgumentError, match="merge_operator"):
        attune.DB(tmp_path / "other", merge_operator="sum")
    with (
        attune.DB(tmp_path / "plain") as db,
        pytest.raises(attune.InvalidArgumentError, match="merge_operator"),
    ):
        db.merge(b"c", 1)


def test_cli_merge(tmp_path, capsys):
    path = str(tmp_path / "db")
    assert cli_main(["kv", "merge", path, "n", "5", "--int", "-o", "merge_operator=add"]) == 0
    assert capsys.readouterr().out.strip() == "5"
    assert cli_main(["kv", "merge", path, "n", "-2", "--int", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["int"] == 3
    assert cli_main(["kv", "merge", path, "n", "abc", "--int"]) != 0
    assert "OPERAND" in capsys.readouterr().err
    assert cli_main(["kv", "merge", path, "n", "abc"]) != 0  # 3 bytes: not an add operand
    assert "operand" in capsys.readouterr().err
