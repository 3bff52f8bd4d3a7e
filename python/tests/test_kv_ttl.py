"""Writes with a time to live, as a rocksdict or Redis user expects them: `put(k, v, ttl=s)`
reads as absent once `s` seconds have passed, everywhere a key can be read, and bad ttls are
`InvalidArgumentError`s naming `ttl`. Expiry is only ever checked after the wall clock has
passed it, so no assertion depends on the machine's speed."""

import json
import math
import time

import pytest

import attune
from attune.cli import main as cli_main


def _wait_past(deadline):
    while time.time() <= deadline:
        time.sleep(max(0.0, deadline - time.time()) + 0.01)


def test_an_entry_lives_until_its_ttl_and_hides_older_versions(tmp_path):
    with attune.DB(tmp_path / "db") as db:
        db.put(b"session", b"old")
        t = time.time()
        db.put(b"session", b"new", ttl=0.2)
        db.put(b"big", b"x" * 100_000, ttl=0.2)  # a separated value
        db.put(b"user", b"kept", ttl=3600)
        db.put(b"plain", b"p")
        _wait_past(t + 0.25)
        assert db.get(b"session") is None
        assert db.get(b"big") is None
        assert db[b"user"] == b"kept"
        assert b"session" not in db
        assert db.multi_get([b"session", b"user", b"big"]) == [None, b"kept", None]
        assert [k for k, _ in db.items()] == [b"plain", b"user"]
        db.flush()
        db.compact()
        assert db.get(b"session") is None  # compaction never revives the older version
        assert db.get(b"user") == b"kept"


def test_batch_entries_take_a_ttl_counted_from_when_they_are_added(tmp_path):
    with attune.DB(tmp_path / "db") as db:
        b = attune.WriteBatch()
        t = time.time()
        b.put(b"a", b"1", ttl=0.2)
        b.put(b"b", b"2")
        db.write(b)
        _wait_past(t + 0.25)
        assert db.get(b"a") is None
        assert db.get(b"b") == b"2"


def test_expiries_survive_a_reopen(tmp_path):
    p = tmp_path / "db"
    with attune.DB(p) as db:
        db.put(b"k", b"v", ttl=3600, sync=True)
        t = time.time()
        db.put(b"short", b"v", ttl=0.2, sync=True)
    _wait_past(t + 0.25)
    with attune.DB(p) as db:
        assert db.get(b"k") == b"v"
        assert db.get(b"short") is None


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "10", True, b"1"])
def test_bad_ttls_are_invalid_arguments_naming_ttl(tmp_path, bad):
    with attune.DB(tmp_path / "db") as db:
        with pytest.raises(attune.InvalidArgumentError, match="ttl"):
            db.put(b"k", b"v", ttl=bad)
        with pytest.raises(attune.InvalidArgumentError, match="ttl"):
            attune.WriteBatch().put(b"k", b"v", ttl=bad)
        assert db.get(b"k") is None


def test_cli_put_takes_a_ttl(tmp_path, capsys):
    p = str(tmp_path / "db")
    assert cli_main(["kv", "put", p, "k", "v", "--ttl", "3600", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert cli_main(["kv", "get", p, "k"]) == 0
    assert capsys.readouterr().out.strip() == "v"
