"""Secondary instances from Python: `attune.DB(path, secondary=True)` beside a writer (in this
process and in another one), `try_catch_up()`, and the `attune kv` verbs that read a database an
application holds open."""

import json
import multiprocessing as mp

import pytest

import attune
from attune.cli import main as cli_main


def _open(path, **kw):
    return attune.DB(path, write_buffer_size="64KiB", **kw)


def test_a_secondary_reads_beside_the_writer_and_moves_only_when_asked(tmp_path):
    p = tmp_path / "db"
    with _open(p) as w:
        for i in range(500):
            w.put(f"k{i:04d}", b"v1")
        w.flush()
        w.put(b"big", b"x" * 5000)  # in the value log
        s = _open(p, secondary=True)
        assert s.secondary and not w.secondary
        assert s[b"k0001"] == b"v1" and s[b"big"] == b"x" * 5000
        for i in range(500):
            w.put(f"k{i:04d}", b"v2")
        w.compact()
        w.delete(b"big")
        assert s[b"k0001"] == b"v1"  # nothing moves until asked
        c = s.try_catch_up()
        assert c["sequence_after"] > c["sequence_before"]
        assert set(c) == {
            "sequence_before",
            "sequence_after",
            "manifest_records",
            "wal_records",
            "passes",
        }
        assert s[b"k0499"] == b"v2" and b"big" not in s
        assert len(list(s.keys())) == 500
        assert s.verify()["tables"] >= 1
        with pytest.raises(attune.ReadOnlyError):
            s.put(b"k", b"v")
        with pytest.raises(attune.InvalidArgumentError, match="secondary"):
            w.try_catch_up()
        s.close()


def test_a_secondary_needs_an_existing_database(tmp_path):
    with pytest.raises(attune.NotADatabaseError):
        attune.DB(tmp_path / "none", secondary=True)
    assert not (tmp_path / "none").exists()


def _writer(path, ready, go, done):
    with _open(path) as db:
        for i in range(300):
            db.put(f"k{i:04d}", b"first")
        ready.set()
        go.wait()
        for i in range(300):
            db.put(f"k{i:04d}", b"second")
        db.flush()
        done.set()
        go.wait()  # hold the database open until the parent is done


def test_a_secondary_follows_a_writer_in_another_process(tmp_path):
    p = str(tmp_path / "db")
    ctx = mp.get_context("spawn")
    ready, go, done = ctx.Event(), ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_writer, args=(p, ready, go, done))
    proc.start()
    try:
        assert ready.wait(60)
        with pytest.raises(attune.LockedError):
            attune.DB(p, read_only=True)
        s = _open(p, secondary=True)
        assert s[b"k0000"] == b"first"
        go.set()
        assert done.wait(60)
        s.try_catch_up()
        assert {v for _, v in s.items()} == {b"second"}
        s.close()
    finally:
        go.set()
        proc.join(60)
    assert proc.exitcode == 0


def test_kv_verbs_read_a_database_an_application_holds_open(tmp_path, capsys):
    p = str(tmp_path / "db")
    with _open(p) as w:
        w.put(b"greeting", b"hello")
        w.flush()
        w.put(b"other", b"x")
        capsys.readouterr()
        assert cli_main(["kv", "get", p, "greeting", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["value"] == "hello" and out["open_mode"] == "secondary"
        assert cli_main(["kv", "stats", p, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["open_mode"] == "secondary"
        assert cli_main(["kv", "verify", p, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["ok"] and out["open_mode"] == "secondary"
        assert cli_main(["kv", "scan", p, "--json"]) == 0
        cap = capsys.readouterr()
        assert [json.loads(line)["key"] for line in cap.out.splitlines()] == ["greeting", "other"]
        assert json.loads(cap.err.strip().splitlines()[-1]) == {"open_mode": "secondary"}
        assert cli_main(["kv", "get", p, "greeting"]) == 0
        cap = capsys.readouterr()
        assert cap.out.strip() == "hello" and "secondary" in cap.err
        # A writing verb cannot share it: the advice is the command line's, not a keyword.
        assert cli_main(["kv", "put", p, "k", "v"]) == 1
        err = capsys.readouterr().err
        assert "stop the process that holds it" in err and "secondary=True" not in err
    # Closed: the verbs open read-only again.
    assert cli_main(["kv", "get", p, "greeting", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["open_mode"] == "read_only"
