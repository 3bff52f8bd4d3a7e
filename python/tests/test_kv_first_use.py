"""What a new user of `attune.DB` meets first: errors for arguments of the wrong type that name
the argument, what was given and what is accepted (and still catch as `TypeError`), a
`ClosedError` that carries the database's path, reprs that say what a handle is, the
read-only hint of a permission error, and repair's count of live keys."""

import ctypes
import os
import pickle
import subprocess
import sys

import pytest

import attune


@pytest.fixture
def db(tmp_path):
    d = attune.DB(tmp_path / "db")
    yield d
    d.close()


# -- arguments of the wrong type -----------------------------------------------------------------

ACCEPTED = ("bytes", "str", "bytearray", "memoryview")


@pytest.mark.parametrize(
    ("bad", "shown"), [(5, "int 5"), (None, "None"), (1.5, "float 1.5"), (["a"], "list ['a']")]
)
def test_a_key_or_value_of_the_wrong_type_names_the_argument_the_type_and_what_is_accepted(
    db, bad, shown
):
    calls = {
        "key": [
            lambda: db.put(bad, b"v"),
            lambda: db.get(bad),
            lambda: db.delete(bad),
            lambda: db[bad],
            lambda: bad in db,
            lambda: attune.WriteBatch().put(bad, b"v"),
        ],
        "value": [lambda: db.put(b"k", bad), lambda: attune.WriteBatch().put(b"k", bad)],
    }
    for arg, fns in calls.items():
        for fn in fns:
            with pytest.raises(attune.InvalidArgumentTypeError) as info:
                fn()
            msg = str(info.value)
            assert msg.startswith(f"{arg} must be "), msg
            assert shown in msg, msg
            assert all(a in msg for a in ACCEPTED), msg
    assert db.get(b"k") is None, "nothing was written"


def test_a_type_error_is_an_attune_error_and_still_a_builtin_type_error(db):
    # A RocksDB or plyvel user's `except TypeError` keeps working; `except attune.Error` and
    # `except attune.InvalidArgumentError` (a ValueError) catch it too.
    for cls in (TypeError, ValueError, attune.Error, attune.InvalidArgumentError):
        with pytest.raises(cls):
            db.put(1, b"v")
    e = pickle.loads(pickle.dumps(attune.InvalidArgumentTypeError("key must be bytes")))
    assert type(e) is attune.InvalidArgumentTypeError and str(e) == "key must be bytes"


def test_flags_take_only_true_or_false(db, tmp_path):
    db.put(b"k", b"v", sync=True)
    calls = [
        lambda: db.put(b"k", b"v", sync="yes"),
        lambda: db.delete(b"k", sync="no"),
        lambda: db.write(attune.WriteBatch(), sync=1.0),
        lambda: db.transaction(sync=None),
    ]
    for fn in calls:
        with pytest.raises(attune.InvalidArgumentTypeError, match=r"^sync must be True or False"):
            fn()
    with pytest.raises(attune.InvalidArgumentTypeError, match="sync must be .*; got str 'yes'"):
        db.put(b"k", b"v", sync="yes")
    with pytest.raises(TypeError, match="reverse must be True or False; got str 'no'"):
        db.items(reverse="no")
    with pytest.raises(attune.InvalidArgumentTypeError, match="^seal_value_log must be True"):
        db.checkpoint(str(tmp_path / "cp"), seal_value_log="yes")
    with pytest.raises(attune.InvalidArgumentTypeError, match="^move must be True or False"):
        db.ingest([], move=0)
    assert db.get(b"k") == b"v"


def test_other_wrong_types_name_their_argument(db):
    with pytest.raises(attune.InvalidArgumentTypeError, match="keys must be an iterable"):
        db.multi_get(7)
    with pytest.raises(attune.InvalidArgumentTypeError, match="keys must be .* not a single"):
        db.multi_get(b"k")
    with pytest.raises(attune.InvalidArgumentTypeError, match="path must be .*; got int 42"):
        attune.DB(42)


# -- ClosedError carries the path ----------------------------------------------------------------


def test_every_closed_error_has_the_database_path(tmp_path):
    path = tmp_path / "db"
    db = attune.DB(path)
    db.put(b"a", b"1")
    it = db.items()
    snap = db.snapshot()
    txn = db.transaction()
    released = db.snapshot()
    released.release()
    db.close()
    calls = [
        lambda: db.get(b"a"),
        lambda: db.put(b"a", b"2"),
        lambda: db.__enter__(),
        lambda: next(it),
        lambda: snap.get(b"a"),
        lambda: released.get(b"a"),
        lambda: txn.put(b"a", b"2"),
        lambda: txn.commit(),
    ]
    for fn in calls:
        with pytest.raises(attune.ClosedError) as info:
            fn()
        assert info.value.path == str(path), (str(info.value), info.value.path)


def test_an_ended_transaction_and_a_released_snapshot_name_the_path(db):
    txn = db.transaction()
    txn.commit()
    with pytest.raises(attune.ClosedError, match="ended") as info:
        txn.put(b"a", b"1")
    assert info.value.path == db.path
    snap = db.snapshot()
    snap.release()
    with pytest.raises(attune.ClosedError, match="released") as info:
        snap.get(b"a")
    assert info.value.path == db.path


# -- reprs ---------------------------------------------------------------------------------------


def test_reprs_say_what_each_object_is(tmp_path):
    path = tmp_path / "db"
    with attune.DB(path) as db:
        assert repr(db) == f'attune.DB("{path}", open)'
        db.put(b"a", b"1")
        b = attune.WriteBatch()
        assert repr(b) == "attune.WriteBatch(0 operations)"
        b.put(b"x", b"1")
        assert repr(b) == "attune.WriteBatch(1 operation)"
        b.delete(b"y")
        b.expect(b"x", None)
        assert repr(b) == "attune.WriteBatch(2 operations, 1 expectation)"
        with db.snapshot() as snap:
            seq = snap.sequence
            assert repr(snap) == f'attune.Snapshot("{path}", sequence={seq})'
            it = snap.keys(start=b"a", end=b"b", reverse=True)
            assert repr(it) == (
                f"attune.Items(\"{path}\", keys, start=b'a', end=b'b', reverse=True, "
                f"snapshot={seq})"
            )
            assert list(it) == [b"a"]
            assert repr(it).endswith(", exhausted)")
        assert repr(snap) == f'attune.Snapshot("{path}", sequence={seq}, released)'
        assert (
            repr(db.items(prefix=b"a")) == f"attune.Items(\"{path}\", items, start=b'a', end=b'b')"
        )
        txn = db.transaction()
        txn.put(b"c", b"3")
        assert repr(txn) == f'attune.Transaction("{path}", sequence={seq}, 1 buffered write)'
        txn.rollback()
        assert repr(txn) == f'attune.Transaction("{path}", ended)'
        live_txn, live_items = db.transaction(), db.items()
    assert repr(db) == f'attune.DB("{path}", closed)'
    assert repr(live_txn) == f'attune.Transaction("{path}", closed)'
    assert repr(live_items) == f'attune.Items("{path}", items, closed)'
    with attune.DB(path, read_only=True) as ro:
        assert repr(ro) == f'attune.DB("{path}", open, read_only=True)'
        with attune.DB(path, secondary=True) as sec:
            assert repr(sec) == f'attune.DB("{path}", open, secondary=True)'
    assert repr(ro) == f'attune.DB("{path}", closed, read_only=True)'


# -- a database this process may not write -------------------------------------------------------

_OPEN_BOTH_WAYS = """
import sys, attune
try:
    attune.DB(sys.argv[1])
except attune.StorageIOError as e:
    print("writable:", e.path, "|", e)
with attune.DB(sys.argv[1], read_only=True) as db:
    print("read_only:", db.get(b"k"))
"""


def _without_dac_override():
    """In the child before exec: drop CAP_DAC_OVERRIDE from the bounding set, so that a root
    child is held to the files' permission bits like any other user."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE)")


PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1


def test_a_writable_open_refused_by_a_permission_suggests_read_only(tmp_path):
    path = tmp_path / "db"
    with attune.DB(path) as db:
        db.put(b"k", b"v")
    for name in os.listdir(path):
        os.chmod(path / name, 0o444)
    os.chmod(path, 0o555)
    try:
        out = subprocess.run(
            [sys.executable, "-c", _OPEN_BOTH_WAYS, str(path)],
            capture_output=True,
            text=True,
            check=True,
            preexec_fn=_without_dac_override if os.geteuid() == 0 else None,
        ).stdout
    finally:
        os.chmod(path, 0o755)
    assert "Permission denied" in out and "open with read_only=True to read it" in out, out
    assert f"writable: {path}" in out, out
    assert "read_only: b'v'" in out, out


# -- repair counts live keys ---------------------------------------------------------------------


def test_repair_of_the_readme_database_counts_live_keys_apart_from_deleted_ones(tmp_path):
    path = tmp_path / "db"
    with attune.DB(path) as db:
        db.put(b"user:1", b"ada")
        db.put(b"user:2", b"grace")
        batch = attune.WriteBatch()
        batch.put(b"user:3", b"edsger")
        batch.delete(b"user:1")
        db.write(batch)
        db[b"config"] = b"on"
        del db[b"config"]
        db.put(b"session:7", b"token", ttl=3600)
        db.delete_range(b"session:", b"session;")
        db[b"visits"] = b"1"
    r = attune.repair(path)
    assert r["clean"]
    assert (r["keys"], r["keys_deleted"]) == (3, 3)
    with attune.DB(path) as db:
        assert sorted(db) == [b"user:2", b"user:3", b"visits"]


_OPEN_UNREACHABLE = """
import sys, attune
for what, open_ in [
    ("db read_only", lambda p: attune.DB(p, read_only=True)),
    ("db writable", lambda p: attune.DB(p)),
    ("hash read_only", lambda p: attune.HashDB(p, read_only=True)),
    ("hash writable", lambda p: attune.HashDB(p)),
]:
    try:
        open_(sys.argv[1] if what.startswith("db") else sys.argv[2])
        print(what, "opened")
    except attune.Error as e:
        print(what, type(e).__name__, "|", e)
"""


def _without_dac_override_or_search():
    """As `_without_dac_override`, and without CAP_DAC_READ_SEARCH: directories' search bits
    hold for a root child too."""
    _without_dac_override()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_READ_SEARCH, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_READ_SEARCH)")


CAP_DAC_READ_SEARCH = 2


def test_a_database_behind_an_unsearchable_directory_is_a_permission_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    with attune.DB(locked / "db") as db:
        db.put(b"k", b"v")
    with attune.HashDB(locked / "h") as h:
        h.put(b"k", b"v")
    os.chmod(locked, 0o000)
    try:
        out = subprocess.run(
            [sys.executable, "-c", _OPEN_UNREACHABLE, str(locked / "db"), str(locked / "h")],
            capture_output=True,
            text=True,
            check=True,
            preexec_fn=_without_dac_override_or_search if os.geteuid() == 0 else None,
        ).stdout
    finally:
        os.chmod(locked, 0o755)
    for what in ["db read_only", "db writable", "hash read_only", "hash writable"]:
        line = next(x for x in out.splitlines() if x.startswith(what + " "))
        assert "StorageIOError" in line and "Permission denied" in line, out
        assert "does not exist" not in line, out
        assert "read_only=True" not in line, out
    for what in ["db writable", "hash writable"]:
        line = next(x for x in out.splitlines() if x.startswith(what + " "))
        assert "check the permissions" in line, out


def test_repair_of_a_hash_database_says_what_it_is(tmp_path):
    with attune.HashDB(tmp_path / "h") as h:
        h.put(b"k", b"v")
    with pytest.raises(attune.InvalidArgumentError, match="hash database"):
        attune.repair(tmp_path / "h")
    with attune.HashDB(tmp_path / "h") as h:
        assert h.get(b"k") == b"v"


def test_a_negative_option_is_an_invalid_argument_like_the_others(tmp_path):
    with pytest.raises(attune.InvalidArgumentError, match="^invalid argument: option block_size"):
        attune.DB(tmp_path / "db", block_size=-1)
