"""A handle's life as a rocksdict, plyvel or py-lmdb user meets it: close() closes whatever
iterators and snapshots exist, a forked child cannot use its parent's handle, read-only opens
share a database and read a full disk, errors pickle, and keys come as bytes, str or buffers."""

import array
import multiprocessing as mp
import os
import pickle
import shutil
import subprocess

import pytest

import attune


def _open(path, **kw):
    return attune.DB(path, write_buffer_size="256KiB", **kw)


# -- close() closes ------------------------------------------------------------------------------


def test_readme_snapshot_outliving_its_with_block_does_not_keep_the_lock(tmp_path):
    p = tmp_path / "db"
    with _open(p) as db:
        db.put(b"user:2", b"grace")
        with db.snapshot() as snap:
            db.put(b"user:2", b"hopper")
            assert snap.get(b"user:2") == b"grace"
        it = db.items()
        assert list(it)  # exhausted, still referenced
    # `snap` and `it` are alive here: the database must still be closed.
    with _open(p) as db:
        assert db.get(b"user:2") == b"hopper"


def test_every_object_tied_to_a_closed_database_raises_closed_error(tmp_path):
    db = _open(tmp_path / "db")
    for i in range(1000):
        db.put(b"k%04d" % i, b"v")
    fresh = db.items()
    partial = db.items()
    next(partial)  # holds a fetched chunk it has not handed out yet
    exhausted = db.items(start=b"k0000", end=b"k0001")
    assert len(list(exhausted)) == 1
    live_snap = db.snapshot()
    snap_items = live_snap.items()
    released = db.snapshot()
    released.release()
    batch = attune.WriteBatch()
    batch.put(b"x", b"y")
    db.close()
    assert db.closed

    for name, call in [
        ("fresh iterator", lambda: next(fresh)),
        ("partly read iterator", lambda: next(partial)),
        ("exhausted iterator", lambda: next(exhausted)),
        ("snapshot.get", lambda: live_snap.get(b"k0001")),
        ("snapshot.items", lambda: live_snap.items()),
        ("snapshot iterator", lambda: next(snap_items)),
        ("released snapshot", lambda: released.get(b"k0001")),
        ("get", lambda: db.get(b"k0001")),
        ("put", lambda: db.put(b"a", b"b")),
        ("delete", lambda: db.delete(b"a")),
        ("write", lambda: db.write(batch)),
        ("items", lambda: db.items()),
        ("snapshot", lambda: db.snapshot()),
        ("flush", lambda: db.flush()),
        ("compact", lambda: db.compact()),
        ("verify", lambda: db.verify()),
        ("gc", lambda: db.gc()),
        ("stats", lambda: db.stats()),
        ("set_block_cache_capacity", lambda: db.set_block_cache_capacity(1 << 20)),
        ("with", lambda: db.__enter__()),
    ]:
        with pytest.raises(attune.ClosedError):
            call()
            pytest.fail(f"{name} worked on a closed database")
    db.close()  # a second close does nothing

    # The lock was released although every object above is still alive.
    with _open(tmp_path / "db") as again:
        assert again.get(b"k0999") == b"v"


def test_close_releases_the_lock_for_another_process(tmp_path):
    p = tmp_path / "db"
    db = _open(p)
    db.put(b"k", b"v")
    it = db.items()
    db.close()
    code = "import attune, sys; d = attune.DB(sys.argv[1]); print(d.get(b'k').decode()); d.close()"
    out = subprocess.run(
        [os.sys.executable, "-c", code, str(p)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "v"
    del it


# -- fork ----------------------------------------------------------------------------------------


def _child_uses_parents_handle(db, q):
    results = {}
    for name, call in [
        ("put", lambda: db.put(b"child", b"x")),
        ("get", lambda: db.get(b"parent")),
        ("items", lambda: list(db.items())),
        ("snapshot", lambda: db.snapshot()),
    ]:
        try:
            call()
            results[name] = "worked"
        except attune.ForkedError as e:
            results[name] = ("ForkedError", str(e))
        except BaseException as e:  # noqa: BLE001 (report anything else to the parent)
            results[name] = (type(e).__name__, str(e))
    try:
        db.close()
        results["close"] = "ok"
    except BaseException as e:  # noqa: BLE001
        results["close"] = (type(e).__name__, str(e))
    q.put(results)


def test_fork_child_gets_forked_error_and_the_parent_loses_nothing(tmp_path):
    p = tmp_path / "db"
    db = _open(p)
    db.put(b"parent", b"before")
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_child_uses_parents_handle, args=(db, q))
    child.start()
    results = q.get(timeout=120)
    child.join(120)
    assert child.exitcode == 0
    for name in ("put", "get", "items", "snapshot"):
        assert results[name][0] == "ForkedError", (name, results[name])
        assert "open the database in this process" in results[name][1]
    assert results["close"] == "ok"
    db.put(b"p", b"y")
    db.close()
    with _open(p) as db:
        assert db.get(b"child") is None
        assert db.get(b"p") == b"y"
        assert db.get(b"parent") == b"before"


def _spawned_worker(path, key):
    with attune.DB(path) as db:
        db.put(key, b"from-worker", sync=True)
        return db.get(key)


def _spawned_worker_fails(path):
    attune.DB(path, not_an_option=1)


def test_spawn_workers_open_their_own_handle_and_errors_arrive_as_attune_errors(tmp_path):
    p = str(tmp_path / "db")
    _open(p).close()
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(_spawned_worker, (p, b"w")) == b"from-worker"
        with pytest.raises(attune.InvalidArgumentError, match="not_an_option"):
            pool.apply(_spawned_worker_fails, (p,))
    with _open(p) as db:
        assert db.get(b"w") == b"from-worker"


# -- read-only opens -----------------------------------------------------------------------------


def test_read_only_opens_share_a_database_and_refuse_writes(tmp_path):
    p = tmp_path / "db"
    with _open(p) as db:
        for i in range(3000):
            db.put(b"k%05d" % i, b"v" * 100)
    before = sorted(os.listdir(p))
    a = attune.DB(p, read_only=True)
    b = attune.DB(p, read_only=True)
    assert a.get(b"k02999") == b"v" * 100
    assert len(list(b.items())) == 3000
    with pytest.raises(attune.ReadOnlyError, match="read_only"):
        a.put(b"x", b"y")
    with pytest.raises(attune.LockedError):
        attune.DB(p)
    a.close()
    b.close()
    assert sorted(os.listdir(p)) == before


def test_read_only_never_creates_a_database(tmp_path):
    with pytest.raises(attune.NotADatabaseError, match="read-only"):
        attune.DB(tmp_path / "nothing", read_only=True)
    assert not (tmp_path / "nothing").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
def test_full_disk_opens_read_only_and_leaves_no_partial_file(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mnt)], check=True)
    try:
        p = mnt / "db"
        # The whole history stays in the WAL (big write buffer): reopening must write a table.
        with attune.DB(p, write_buffer_size="16MiB", enable_blob_files=False) as db:
            for i in range(5000):
                db.put(b"k%05d" % i, os.urandom(500))
            expect = {k: v for k, v in db.items()}
        filler = mnt / "filler"
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 16))
                    f.flush()
            except OSError:
                pass
        listing = sorted(os.listdir(p))
        with pytest.raises(attune.StorageIOError, match="read_only=True"):
            attune.DB(p)
        assert sorted(os.listdir(p)) == listing, "the failed open left a file behind"
        with attune.DB(p, read_only=True) as db:
            assert dict(db.items()) == expect
        os.remove(filler)
        with attune.DB(p) as db:
            assert db.get(b"k04999") == expect[b"k04999"]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        shutil.rmtree(mnt, ignore_errors=True)


# -- errors and argument types -------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls",
    [
        attune.Error,
        attune.CorruptionError,
        attune.StorageIOError,
        attune.LockedError,
        attune.NotADatabaseError,
        attune.AlreadyExistsError,
        attune.UnsupportedVersionError,
        attune.InvalidArgumentError,
        attune.ClosedError,
        attune.ForkedError,
        attune.ReadOnlyError,
    ],
)
def test_every_error_pickles_with_its_location(cls):
    e = cls("what went wrong", "/some/file", 42)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and str(back) == "what went wrong"
    assert (back.path, back.offset) == ("/some/file", 42)
    assert type(back).__module__ == "attune.errors"


def test_raised_errors_name_attune_errors_and_carry_the_path(tmp_path):
    p = tmp_path / "db"
    a = _open(p)
    with pytest.raises(attune.LockedError) as info:
        _open(p)
    assert type(info.value).__module__ == "attune.errors"
    assert info.value.path == str(p)
    a.close()
    with pytest.raises(attune.AlreadyExistsError):
        attune.DB(p, error_if_exists=True)


def test_keys_and_values_accept_str_bytearray_memoryview_and_buffers(tmp_path):
    with _open(tmp_path / "db") as db:
        db.put("naïve", "café")
        assert db.get("naïve") == "café".encode()
        db.put(bytearray(b"ba"), memoryview(b"mv"))
        assert db.get(b"ba") == b"mv"
        db.put(array.array("B", b"arr"), b"1")
        assert db.get(memoryview(b"arr")) == b"1"
        batch = attune.WriteBatch()
        batch.put("s", bytearray(b"t"))
        batch.delete(memoryview(b"ba"))
        db.write(batch)
        assert db.get(b"s") == b"t" and db.get(b"ba") is None
        assert [k for k, _ in db.items(start="n", end=bytearray(b"t"))] == [
            "naïve".encode(),
            b"s",
        ]
        with db.snapshot() as snap:
            assert snap.get("s") == b"t"
        for bad in (5, None, 1.5, ["a"]):
            with pytest.raises(TypeError, match="key must be bytes, str"):
                db.put(bad, b"v")
            with pytest.raises(TypeError, match="key must be bytes, str"):
                db.get(bad)


def test_ratio_options_take_floats_and_negative_numbers_are_refused(tmp_path):
    with attune.DB(tmp_path / "db", min_blob_size="4KiB", blob_gc_space_amp=1.5) as db:
        assert db.stats()["options"]["blob_gc_space_amp"] == "1.5"
    with pytest.raises(attune.InvalidArgumentError, match="write_buffer_size"):
        attune.DB(tmp_path / "db2", write_buffer_size=-1)
    with pytest.raises(attune.InvalidArgumentError, match="finite"):
        attune.DB(tmp_path / "db3", blob_gc_space_amp=float("nan"))


def test_a_dropped_database_is_not_kept_open_by_a_released_snapshot_or_a_finished_iterator(
    tmp_path,
):
    import gc

    p = tmp_path / "db"
    db = _open(p)
    db.put(b"k", b"v")
    snap = db.snapshot()
    snap.release()
    it = db.items()
    assert list(it) == [(b"k", b"v")]
    del db
    gc.collect()
    with _open(p) as again:  # neither `snap` nor `it` holds the lock
        assert again.get(b"k") == b"v"
    with pytest.raises(attune.ClosedError):
        snap.get(b"k")
    with pytest.raises(attune.ClosedError):
        next(it)


def test_iterating_a_temporary_handle_reads_everything(tmp_path):
    p = tmp_path / "db"
    with _open(p) as db:
        for i in range(1000):
            db.put(b"k%04d" % i, b"v")
    # The DB object is dropped at once; the iterator keeps the engine open until it ends.
    assert sum(1 for _ in _open(p).items()) == 1000
    with _open(p) as db:  # and then it is closed
        assert db.get(b"k0999") == b"v"


def test_sizes_given_beside_memory_budget_or_a_static_split_are_refused_not_overridden(tmp_path):
    with pytest.raises(attune.InvalidArgumentError, match="block_cache_size cannot be given"):
        attune.DB(tmp_path / "a", memory_budget="64MiB", block_cache_size="2MiB")
    with pytest.raises(attune.InvalidArgumentError, match="write_buffer_size cannot be given"):
        attune.DB(tmp_path / "b", memory_budget="64MiB", write_buffer_size="1MiB")
    with pytest.raises(attune.InvalidArgumentError, match="disagree"):
        attune.DB(tmp_path / "c", cache_sizing="8MiB", block_cache_size="2MiB")
    with pytest.raises(attune.InvalidArgumentError, match="too large"):
        attune.DB(tmp_path / "d", write_buffer_size=2**70)
    assert not any((tmp_path / n).exists() for n in "abcd")


def test_paths_may_be_str_bytes_or_pathlike_and_a_nul_byte_is_refused(tmp_path):
    with attune.DB(os.fsencode(tmp_path / "b")) as db:
        db.put(b"k", b"v")
    with attune.DB(str(tmp_path / "b")) as db:
        assert db.get(b"k") == b"v"
    with pytest.raises(attune.InvalidArgumentError, match="NUL"):
        attune.DB(str(tmp_path / "a\0b"))
    with pytest.raises(TypeError, match="path must be"):
        attune.DB(42)


def test_damaged_value_a_table_points_to_fails_verify_and_open_and_keeps_the_file(tmp_path):
    """Two damaged bytes inside a value-log record that a flushed table points to: verify says
    so (file and offset), a writable open refuses with CorruptionError instead of cutting the
    segment, and the segment file stays for salvage."""
    path = tmp_path / "db"
    with attune.DB(str(path), compression="none") as db:
        for i in range(20000):
            db.put(b"key%06d" % i, b"v" * 100)
        db.put(b"big", b"B" * 5000)
        db.flush()
    (segment,) = sorted(path.glob("*.vlog"))
    with open(segment, "r+b") as f:
        f.seek(2000)
        f.write(b"ZZ")
    with attune.DB(str(path), read_only=True) as db, pytest.raises(attune.CorruptionError) as err:
        db.verify()
    assert segment.name in str(err.value)
    with pytest.raises(attune.CorruptionError) as err:
        attune.DB(str(path))
    assert segment.name in str(err.value)
    assert segment.exists()
