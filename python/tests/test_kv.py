"""The Python front of the key-value engine: API, errors, iteration, snapshots, threads."""

import os
import threading

import pytest

import attune


@pytest.fixture
def db(tmp_path):
    d = attune.DB(tmp_path / "db", write_buffer_size="64KiB")
    yield d
    d.close()


def test_put_get_delete_round_trip(db):
    db.put(b"k", b"v")
    assert db.get(b"k") == b"v"
    db.delete(b"k")
    assert db.get(b"k") is None
    assert db.get(b"never") is None


def test_batch_is_atomic_and_ordered(db):
    b = attune.WriteBatch()
    b.put(b"a", b"1")
    b.put(b"b", b"2")
    b.delete(b"a")
    assert len(b) == 3
    db.write(b, sync=True)
    assert db.get(b"a") is None and db.get(b"b") == b"2"


def test_items_forward_reverse_and_bounds(db):
    for i in range(2000):
        db.put(b"key%05d" % i, b"v%d" % i)
    db.flush()
    keys = [k for k, _ in db.items(start=b"key00100", end=b"key00110")]
    assert keys == [b"key%05d" % i for i in range(100, 110)]
    rev = [k for k, _ in db.items(start=b"key00100", end=b"key00110", reverse=True)]
    assert rev == list(reversed(keys))
    assert sum(1 for _ in db.items()) == 2000


def test_snapshot_sees_the_past(db):
    db.put(b"k", b"old")
    with db.snapshot() as snap:
        db.put(b"k", b"new")
        db.put(b"other", b"x")
        assert snap.get(b"k") == b"old"
        assert [k for k, _ in snap.items()] == [b"k"]
    assert db.get(b"k") == b"new"
    with pytest.raises(attune.ClosedError):
        snap.get(b"k")


def test_reopen_keeps_data_and_compaction_keeps_it_too(tmp_path):
    path = tmp_path / "db"
    with attune.DB(path, write_buffer_size="32KiB") as db:
        for i in range(5000):
            db.put(b"%06d" % i, os.urandom(50))
        db.put(b"last", b"value", sync=True)
    with attune.DB(path) as db:
        assert db.get(b"last") == b"value"
        db.compact()
        assert db.get(b"last") == b"value"
        s = db.stats()
        assert sum(s["level_files"]) >= 1
        assert db.verify()["entries"] >= 5001


def test_second_opener_gets_a_clear_locked_error(tmp_path):
    with attune.DB(tmp_path / "db"), pytest.raises(attune.LockedError, match="locked"):
        attune.DB(tmp_path / "db")


def test_foreign_directory_is_refused(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "photo.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(attune.NotADatabaseError, match="photo.jpg"):
        attune.DB(tmp_path / "x")


def test_bad_options_raise_invalid_argument(tmp_path):
    with pytest.raises(attune.InvalidArgumentError, match="block_size"):
        attune.DB(tmp_path / "db", blok_size=4096)
    with pytest.raises(attune.InvalidArgumentError, match="compression"):
        attune.DB(tmp_path / "db2", compression="gzip")
    with pytest.raises(attune.InvalidArgumentError):
        attune.DB(tmp_path / "db3", block_cache_size=[1])


def test_errors_share_one_base_class():
    for cls in (
        attune.CorruptionError,
        attune.LockedError,
        attune.NotADatabaseError,
        attune.InvalidArgumentError,
        attune.ClosedError,
        attune.StorageIOError,
        attune.UnsupportedVersionError,
    ):
        assert issubclass(cls, attune.Error)


def test_storage_io_errors_are_os_errors_with_their_path():
    """Code written for files (``except OSError``) catches Attune's I/O errors too, and the
    error keeps its message and path through a pickle (a multiprocessing worker's error)."""
    import pickle

    with pytest.raises(OSError) as info:
        attune.DB("/proc/attune-test-db")  # procfs refuses the mkdir, even to root
    err = info.value
    assert isinstance(err, attune.StorageIOError), repr(err)
    assert err.path == "/proc/attune-test-db", err.path
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is attune.StorageIOError
    assert (str(back), back.path) == (str(err), err.path)


def test_corrupted_table_raises_corruption_error_naming_the_file(tmp_path):
    path = tmp_path / "db"
    with attune.DB(path) as db:
        for i in range(3000):
            db.put(b"%06d" % i, b"v" * 100)
        db.compact()
    sst = min(p for p in path.iterdir() if p.suffix == ".sst")
    data = bytearray(sst.read_bytes())
    data[20] ^= 0x55
    sst.write_bytes(bytes(data))
    with attune.DB(path) as db:
        with pytest.raises(attune.CorruptionError, match=sst.name):
            for i in range(3000):
                db.get(b"%06d" % i)
        with pytest.raises(attune.CorruptionError):
            db.verify()


def test_closed_database_raises(tmp_path):
    db = attune.DB(tmp_path / "db")
    db.close()
    assert db.closed
    with pytest.raises(attune.ClosedError):
        db.put(b"a", b"b")


def test_threads_write_and_read_concurrently(db):
    def worker(t):
        for i in range(2000):
            db.put(b"t%d-%05d" % (t, i), b"x" * 20)
            assert db.get(b"t%d-%05d" % (t, i)) == b"x" * 20

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(1 for _ in db.items()) == 8000
    assert db.stats()["writes"] == 8000


def test_stats_report_options_and_cache(db):
    s = db.stats()
    assert s["options"]["write_buffer_size"] == str(64 * 1024)
    assert {"hits", "misses", "hit_rate", "capacity_bytes"} <= set(s["block_cache"])


def test_large_values_go_to_the_value_log_and_gc_reclaims_them(tmp_path):
    opts = {"min_blob_size": "256", "blob_file_size": "32KiB", "blob_gc_space_amp": "0"}
    with attune.DB(str(tmp_path / "db"), **opts) as db:
        for rnd in range(4):
            for i in range(200):
                db.put(b"k%04d" % i, (b"r%d-" % rnd) + b"x" * 600)
        db.compact()
        before = db.stats()
        assert before["blob_bytes"] > 200 * 600
        assert before["blob_garbage_bytes"] > 0
        r = db.gc(ratio=0.2)
        assert r["segments_collected"] > 0
        after = db.stats()
        assert after["blob_bytes"] < before["blob_bytes"]
        # The pause is whole microseconds: a fast machine may round it to 0.
        assert after["gc_segments_collected"] >= r["segments_collected"]
        assert isinstance(after["gc_max_pause_micros"], int) and after["gc_max_pause_micros"] >= 0
        assert all(v == b"r3-" + b"x" * 600 for _, v in db.items())
        assert db.verify()["entries"] > 0
        with pytest.raises(attune.InvalidArgumentError):
            db.gc(ratio=2.0)


def test_damaged_value_log_raises_corruption_error_naming_the_segment(tmp_path):
    path = tmp_path / "db"
    with attune.DB(str(path), min_blob_size="100") as db:
        for i in range(50):
            db.put(b"k%03d" % i, b"v" * 500)
    seg = min(p for p in path.iterdir() if p.suffix == ".vlog")
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0xFF
    seg.write_bytes(bytes(data))
    # The active segment is checked at open: damage with valid records after it is not a torn
    # tail, so the open fails rather than dropping the later writes.
    with pytest.raises(attune.CorruptionError, match=seg.name), attune.DB(str(path)) as db:
        for i in range(50):
            db.get(b"k%03d" % i)


def test_the_dict_like_face(db):
    db[b"a"] = b"1"
    db["b"] = "2"  # str keys and values are stored as UTF-8
    assert db[b"a"] == b"1" and db[b"b"] == b"2"
    assert b"a" in db and "b" in db and b"zz" not in db
    with pytest.raises(KeyError) as e:
        db[b"zz"]
    assert e.value.args == (b"zz",)
    assert db.get(b"zz", b"fallback") == b"fallback"
    assert db.get(b"zz") is None and db.get(b"a", b"fallback") == b"1"
    del db[b"a"]
    assert b"a" not in db
    del db[b"never-written"]  # a delete is a blind write, as in RocksDB
    assert list(db) == [b"b"]


def test_keys_values_and_prefix_iteration(db):
    for k in [b"app", b"apple", b"apricot", b"b", b"a\xff", b"a\xff\xff", b"\xff\xff"]:
        db.put(k, k.upper())
    db.flush()
    assert list(db.keys(prefix=b"ap")) == [b"app", b"apple", b"apricot"]
    assert list(db.values(prefix=b"app")) == [b"APP", b"APPLE"]
    assert list(db.keys(prefix=b"ap", reverse=True)) == [b"apricot", b"apple", b"app"]
    # A prefix ending in 0xff bytes: the bound is the next shorter prefix's successor.
    assert list(db.keys(prefix=b"a\xff")) == [b"a\xff", b"a\xff\xff"]
    assert list(db.keys(prefix=b"\xff")) == [b"\xff\xff"]
    # start/end narrow a prefix further, never widen it.
    assert list(db.keys(prefix=b"ap", start=b"apple")) == [b"apple", b"apricot"]
    assert list(db.keys(prefix=b"ap", end=b"b")) == [b"app", b"apple", b"apricot"]
    assert dict(db.items(prefix=b"b")) == {b"b": b"B"}


def test_multi_get_answers_in_the_order_asked(db):
    for i in range(500):
        db.put(b"k%04d" % i, b"v%d" % i)
    db.flush()
    asked = [b"k0499", b"missing", b"k0000", b"k0250", b"k0000"]
    assert db.multi_get(asked) == [b"v499", None, b"v0", b"v250", b"v0"]
    assert db.multi_get(k for k in [b"k0001"]) == [b"v1"]
    assert db.multi_get([]) == []
    with pytest.raises(TypeError, match="iterable of keys"):
        db.multi_get(b"k0001")
    with pytest.raises(TypeError, match="key must be bytes"):
        db.multi_get([b"k0001", 7])


def test_a_snapshot_has_the_same_read_face(db):
    db[b"x"] = b"old"
    with db.snapshot() as s:
        db[b"x"] = b"new"
        db[b"y"] = b"later"
        assert s[b"x"] == b"old" and b"y" not in s and s.get(b"y", 0) == 0
        assert s.multi_get([b"x", b"y"]) == [b"old", None]
        assert list(s) == [b"x"] and list(s.values(prefix=b"x")) == [b"old"]
        with pytest.raises(KeyError):
            s[b"y"]
    with pytest.raises(attune.ClosedError):
        s[b"x"]


def test_a_transaction_commits_at_the_end_of_its_block(db):
    db[b"n"] = b"1"
    with db.transaction() as txn:
        n = int(txn[b"n"])
        txn[b"n"] = str(n + 1)
        txn.put("name", "ada")  # str keys and values are UTF-8
        assert txn.get(b"n") == b"2"  # reads see the transaction's own writes
        assert db[b"n"] == b"1"  # others do not, until the commit
        assert len(txn) == 2
    assert db[b"n"] == b"2"
    assert db[b"name"] == b"ada"


def test_a_block_that_raises_rolls_the_transaction_back(db):
    with pytest.raises(RuntimeError), db.transaction() as txn:
        txn[b"k"] = b"v"
        raise RuntimeError("stop")
    assert b"k" not in db


def test_a_write_after_the_snapshot_makes_the_commit_raise_conflict(db):
    db[b"n"] = b"1"
    with pytest.raises(attune.ConflictError, match='"n"'), db.transaction() as txn:
        n = int(txn[b"n"])
        db[b"n"] = b"5"  # someone else writes the key first
        txn[b"n"] = str(n + 1)
        txn[b"other"] = b"x"
    assert db[b"n"] == b"5"
    assert b"other" not in db
    assert isinstance(attune.ConflictError("x"), attune.Error)


def test_get_for_update_guards_a_key_the_transaction_only_reads(db):
    db[b"limit"] = b"10"
    txn = db.transaction()
    assert txn.get_for_update(b"limit") == b"10"
    db[b"limit"] = b"0"
    txn[b"spent"] = b"10"
    with pytest.raises(attune.ConflictError):
        txn.commit()
    with pytest.raises(attune.ClosedError, match="ended"):
        txn.put(b"a", b"b")
    assert b"spent" not in db


def test_concurrent_increments_lose_no_update(db):
    db[b"n"] = b"0"

    def work():
        for _ in range(100):
            while True:
                try:
                    with db.transaction() as txn:
                        txn[b"n"] = str(int(txn[b"n"]) + 1)
                    break
                except attune.ConflictError:
                    continue

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db[b"n"] == b"300"


def test_compare_and_set_and_conditional_batches(db):
    assert db.compare_and_set(b"k", None, b"1")  # absent: set
    assert not db.compare_and_set(b"k", None, b"2")  # not absent any more
    assert db.compare_and_set(b"k", b"1", b"2")
    assert db[b"k"] == b"2"
    assert db.compare_and_set(b"k", b"2", None)  # None deletes
    assert b"k" not in db
    b = attune.WriteBatch()
    b.put(b"a", b"1")
    b.put(b"b", b"1")
    b.expect(b"a", None)
    db.write(b)
    assert db[b"b"] == b"1"
    with pytest.raises(attune.ConflictError):
        db.write(b)  # a exists now: nothing written
    with pytest.raises(TypeError, match="expected"):
        db.compare_and_set(b"k", 5, b"1")


def test_a_key_no_write_accepts_is_refused_where_it_is_named(db):
    big = b"k" * (64 * 1024 + 1)
    with pytest.raises(attune.InvalidArgumentError, match="key"):
        attune.WriteBatch().expect(big, None)
    with pytest.raises(attune.InvalidArgumentError, match="key"):
        db.get(big)
    with pytest.raises(attune.InvalidArgumentError, match="key"):
        _ = big in db


def test_a_transaction_fails_cleanly_after_close(tmp_path):
    db = attune.DB(str(tmp_path / "db"))
    txn = db.transaction()
    txn[b"k"] = b"v"
    db.close()
    with pytest.raises(attune.ClosedError):
        txn.commit()
    with pytest.raises(attune.ClosedError):
        db.transaction()


def test_checkpoint_is_an_openable_copy_at_the_call(tmp_path):
    with attune.DB(tmp_path / "db", min_blob_size=64) as db:
        for i in range(500):
            db[f"k{i:04}"] = str(i) * (40 if i % 2 else 2)
        r = db.checkpoint(tmp_path / "cp")
        assert r["sequence"] >= 500 and r["files_linked"] + r["files_copied"] > 0
        db[b"after"] = b"1"
        with pytest.raises(attune.InvalidArgumentError, match="not empty"):
            db.checkpoint(tmp_path / "cp")
    with attune.DB(tmp_path / "cp") as cp:
        assert cp[b"k0007"] == b"7" * 40
        assert b"after" not in cp
        assert sum(1 for _ in cp) == 500
