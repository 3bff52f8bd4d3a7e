"""The hot-key cache seen from Python: the `hot_key_cache_bytes` option of `attune.DB`, its
counters in `stats()["hot_key_cache"]`, fresh values after writes, snapshot reads, bad sizes."""

import pytest

import attune


def test_hot_reads_are_served_from_the_cache_and_writes_replace_them(tmp_path):
    with attune.DB(tmp_path / "db", hot_key_cache_bytes="1MiB") as db:
        db.put(b"hot", b"v1")
        for _ in range(5):
            assert db.get(b"hot") == b"v1"
        s = db.stats()["hot_key_cache"]
        assert s["capacity_bytes"] == 1 << 20
        assert s["hits"] >= 3 and s["entries"] == 1 and 0 < s["bytes"] <= 1 << 20
        db.put(b"hot", b"v2")
        assert db.get(b"hot") == b"v2"
        db.delete(b"hot")
        assert db.get(b"hot") is None


def test_snapshot_reads_bypass_the_cache(tmp_path):
    with attune.DB(tmp_path / "db", hot_key_cache_bytes="1MiB") as db:
        db.put(b"k", b"old")
        with db.snapshot() as snap:
            db.put(b"k", b"new")
            for _ in range(4):
                assert db.get(b"k") == b"new"
            assert snap.get(b"k") == b"old"


def test_the_cache_is_off_by_default(tmp_path):
    with attune.DB(tmp_path / "db") as db:
        db.put(b"k", b"v")
        for _ in range(4):
            db.get(b"k")
        s = db.stats()["hot_key_cache"]
        assert s["capacity_bytes"] == 0 and s["hits"] == 0


def test_a_tiny_cache_size_is_a_clear_error(tmp_path):
    with pytest.raises(attune.InvalidArgumentError, match="hot_key_cache_bytes"):
        attune.DB(tmp_path / "db", hot_key_cache_bytes=1000)
