"""attune.HashDB (Plush) meets a user the way attune.DB does: a context manager, close() that is
idempotent and makes every later call a ClosedError, one opener per directory, ForkedError in a
forked child, attune errors for bad arguments and damaged files, stats and verify as dicts; and
the `attune hash-db` verbs."""

import json
import multiprocessing as mp
import shutil
import tempfile
from pathlib import Path

import pytest

import attune
from attune.cli import main

SMALL = {"dram_entries_log2": 6, "log_partitions": 4, "log_chunk_bytes": 1 << 20, "sync": False}


def _open(path, **kw):
    return attune.HashDB(path, **{**SMALL, **kw})


def test_put_get_delete_survive_close_and_reopen(tmp_path):
    p = tmp_path / "h"
    with _open(p) as db:
        for k in range(20_000):
            db.put(k, k * 2 + 1)
        db.delete(5)
        db.put(b"\x01" * 8, b"\x02" * 8)
        assert db.get_int(7) == 15
        assert db.get(7) == (15).to_bytes(8, "little")
        assert db.get_int(5) is None
        s = db.stats()
        assert s["puts"] == 20_001 and s["deletes"] == 1
        assert s["levels"] >= 1
    assert db.closed
    with _open(p) as db:
        assert db.get_int(19_999) == 39_999
        assert db.get_int(5) is None
        assert db.get(b"\x01" * 8) == b"\x02" * 8
        r = db.verify()
        assert r["records"] > 0 and r["levels"] >= 1


@pytest.mark.parametrize("migration", ["inline", "background"])
@pytest.mark.parametrize("syncs_in_flight", [1, 4])
def test_durable_writes_through_the_write_backend_and_either_migration(
    tmp_path, migration, syncs_in_flight
):
    # tmpfs where there is one: a synced write on a disk is a device flush (the benchmark's
    # business); this test checks behaviour. 4 DRAM entries of 256 records: migrations happen.
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path
    p = base / "h"
    opts = {**SMALL, "dram_entries_log2": 2, "sync": True, "backend": "write"}
    opts["migration"] = migration
    opts["log_syncs_in_flight_max"] = syncs_in_flight
    try:
        _durable_round_trip(p, opts)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    with pytest.raises(attune.InvalidArgumentError, match="migration"):
        attune.HashDB(tmp_path / "z", migration="sometimes")


def _durable_round_trip(p, opts):
    migration = opts["migration"]
    with attune.HashDB(p, **opts) as db:
        for k in range(6_000):
            db.put(k, k + 1)
        s = db.stats()
        assert s["migrations_background"] + s["migrations_inline"] > 0
        if migration == "inline":
            assert s["migrations_background"] == 0
        assert s["log_syncs"] <= s["fences"]
    with attune.HashDB(p, **opts) as db:
        assert all(db.get_int(k) == k + 1 for k in range(0, 6_000, 7))


def test_close_is_idempotent_and_later_calls_raise_closed_error(tmp_path):
    db = _open(tmp_path / "h")
    db.close()
    db.close()
    for call in (lambda: db.put(1, 2), lambda: db.get(1), lambda: db.stats(), db.verify):
        with pytest.raises(attune.ClosedError):
            call()
    assert "closed" in repr(db)


def test_bad_arguments_raise_invalid_argument(tmp_path):
    with _open(tmp_path / "h") as db:
        with pytest.raises(attune.InvalidArgumentError, match="key is 4097 bytes"):
            db.put(b"k" * 4097, 1)
        with pytest.raises(attune.InvalidArgumentError, match="value is"):
            db.put(b"k", b"v" * (1 << 20 + 1))
        with pytest.raises(attune.InvalidArgumentError, match="2\\*\\*64"):
            db.put(-1, 1)
        with pytest.raises(attune.InvalidArgumentTypeError, match="key must be bytes"):
            db.get(None)
        with pytest.raises(TypeError, match="value must be bytes, an int"):
            db.put(1, 2.5)
        with pytest.raises(TypeError, match="no len"):
            len(db)
    with pytest.raises(attune.InvalidArgumentError, match="unknown HashDB option"):
        attune.HashDB(tmp_path / "x", not_an_option=1)
    with pytest.raises(attune.InvalidArgumentError, match="log_partitions"):
        attune.HashDB(tmp_path / "y", log_partitions=3)
    with pytest.raises(attune.InvalidArgumentError, match="log_syncs_in_flight_max 0"):
        attune.HashDB(tmp_path / "w", log_syncs_in_flight_max=0)


def test_a_full_database_is_a_full_error_naming_the_option_and_keeps_what_it_took(tmp_path):
    with attune.HashDB(tmp_path / "h", levels_max=1, dram_entries_log2=6) as db:
        with pytest.raises(attune.FullError, match="levels_max 1") as err:
            for i in range(1_000_000):
                db.put(i, i)
        assert isinstance(err.value, attune.Error)
        assert db.get(i) is None
        assert all(db.get(k) == k.to_bytes(8, "little") for k in range(i))


def test_one_opener_per_directory_and_no_database_without_create(tmp_path):
    with _open(tmp_path / "h"), pytest.raises(attune.LockedError):
        _open(tmp_path / "h")
    with pytest.raises(attune.NotADatabaseError):
        _open(tmp_path / "nothing", create_if_missing=False)


def test_a_damaged_manifest_is_a_corruption_error_naming_the_file(tmp_path):
    p = tmp_path / "h"
    _open(p).close()
    m = p / "manifest.plush"
    b = bytearray(m.read_bytes())
    b[20] ^= 1
    m.write_bytes(bytes(b))
    with pytest.raises(attune.CorruptionError) as e:
        _open(p)
    assert "manifest.plush" in str(e.value)


def _filled(p):
    """A database with records on the persistent levels (so level files exist)."""
    with _open(p, dram_entries_log2=2) as db:
        for k in range(3_000):
            db.put(k, k * 7)
        assert db.stats()["levels"] >= 1


def test_an_empty_manifest_beside_level_files_is_corruption_and_never_rewritten(tmp_path):
    p = tmp_path / "h"
    _filled(p)
    m = p / "manifest.plush"
    m.write_bytes(b"")
    for kw in ({}, {"dram_entries_log2": 2}):
        with pytest.raises(attune.CorruptionError, match="restore manifest.plush") as e:
            attune.HashDB(p, sync=False, **kw)
        assert e.value.path == str(m)
        assert m.stat().st_size == 0


def test_an_empty_manifest_alone_is_created_as_a_new_database(tmp_path):
    p = tmp_path / "h"
    p.mkdir()
    (p / "manifest.plush").write_bytes(b"")
    with _open(p) as db:
        db.put(1, 2)
    with _open(p) as db:
        assert db.get_int(1) == 2


def test_a_manifest_with_a_damaged_magic_is_corruption_not_a_foreign_directory(tmp_path):
    p = tmp_path / "h"
    _open(p).close()
    m = p / "manifest.plush"
    b = bytearray(m.read_bytes())
    b[0] ^= 1
    m.write_bytes(bytes(b))
    with pytest.raises(attune.CorruptionError, match="magic") as e:
        _open(p)
    assert e.value.path == str(m)


def test_reopening_with_another_geometry_names_the_option_and_both_values(tmp_path):
    p = tmp_path / "h"
    _open(p).close()
    with pytest.raises(attune.InvalidArgumentError, match="dram_entries_log2 = 8 was given") as e:
        _open(p, dram_entries_log2=8)
    assert "created with dram_entries_log2 = 6" in str(e.value)
    with pytest.raises(attune.InvalidArgumentError, match="created with log_partitions = 4"):
        _open(p, log_partitions=16)
    # Options left out take the stored geometry.
    with attune.HashDB(p, sync=False) as db:
        db.put(1, 2)
        assert db.get_int(1) == 2


def test_verify_of_a_new_database_counts_no_unchecksummed_records(tmp_path, capsys):
    p = tmp_path / "h"
    _filled(p)
    with attune.HashDB(p, sync=False) as db:
        r = db.verify()
    assert r["records"] > 0
    assert r["records_not_checksummed"] == 0
    assert main(["hash-db", "verify", str(p)]) == 0
    assert "carry no checksum" not in capsys.readouterr().out


def test_verify_returns_the_shape_of_the_cli_json(tmp_path, capsys):
    p = tmp_path / "h"
    _filled(p)
    with attune.HashDB(p, read_only=True) as db:
        r = db.verify()
    assert r["ok"] is True
    assert main(["hash-db", "verify", str(p), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert set(cli) - {"seconds"} == set(r)


def test_a_filter_word_that_lost_bits_is_corruption_from_get_never_absent(tmp_path, capsys):
    p = tmp_path / "h"
    with _open(p) as db:
        for k in range(3_000):
            db.put(k, k * 3)
        db.checkpoint()
    # Level 1 (64 entries of 40 words): bucket 0's first filter word (entry word 8) of the
    # first entry holding 16 records or more, zeroed.
    f = p / "level-01.plush"
    data = bytearray(f.read_bytes())
    entry = next(i for i in range(64) if int.from_bytes(data[4096 + i * 320 :][:2], "little") >= 16)
    off = 4096 + entry * 320 + 8 * 8
    assert data[off : off + 8] != bytes(8)
    data[off : off + 8] = bytes(8)
    f.write_bytes(bytes(data))
    for read_only in (True, False):
        with _open(p, read_only=read_only) as db:
            errors = 0
            for k in range(3_000):
                try:
                    assert db.get_int(k) == k * 3, f"key {k}"
                except attune.CorruptionError as e:
                    assert f"level-01.plush at offset {off}" in str(e)
                    errors += 1
            assert errors > 0
            with pytest.raises(attune.CorruptionError, match=f"offset {off}:"):
                db.verify()
    assert main(["hash-db", "verify", str(p), "--json"]) == 1
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["ok"] is False


def _child_uses_parents_handle(db, q):
    out = {}
    for name, call in [("put", lambda: db.put(9, 9)), ("get", lambda: db.get(1))]:
        try:
            call()
            out[name] = "worked"
        except attune.ForkedError as e:
            out[name] = ("ForkedError", str(e))
        except BaseException as e:  # noqa: BLE001 (report anything else to the parent)
            out[name] = (type(e).__name__, str(e))
    db.close()
    q.put(out)


def test_fork_child_gets_forked_error_and_the_parent_loses_nothing(tmp_path):
    p = tmp_path / "h"
    db = _open(p)
    db.put(1, 100)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_child_uses_parents_handle, args=(db, q))
    child.start()
    out = q.get(timeout=120)
    child.join(120)
    assert child.exitcode == 0
    for name in ("put", "get"):
        assert out[name][0] == "ForkedError", (name, out[name])
    db.put(2, 200)
    db.close()
    with _open(p) as db:
        assert db.get_int(9) is None
        assert db.get_int(1) == 100 and db.get_int(2) == 200


def test_cli_verbs(tmp_path, capsys):
    p = str(tmp_path / "h")
    opts = ["-o", "dram_entries_log2=8", "-o", "log_partitions=4", "-o", "log_chunk_bytes=1048576"]
    assert main(["hash-db", "open", p, *opts, "--json"]) == 0
    # Level 1 is created and allocated at open (preallocate_levels, default 1).
    opened = json.loads(capsys.readouterr().out)
    assert opened["levels"] == 1 and opened["levels_preallocated"] == 1
    assert main(["hash-db", "put", p, "42", "0x10"]) == 0
    assert main(["hash-db", "get", p, "42", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {
        "key": 42,
        "found": True,
        "value": 16,
    }
    assert main(["hash-db", "delete", p, "42"]) == 0
    assert main(["hash-db", "get", p, "42"]) == 1
    assert main(["hash-db", "stats", p, "--json"]) == 0
    # Counters are per open; the put and the delete come back from the recovery log.
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["recovered_records"] == 2
    assert main(["hash-db", "verify", p, "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["ok"] is True
    assert main(["hash-db", "get", str(tmp_path / "none"), "1"]) != 0


def test_keys_and_values_of_any_size_survive_reopen_and_collection(tmp_path):
    p = tmp_path / "v"
    opts = {"payload_segment_bytes": 64 << 10}
    want = {}
    with _open(p, **opts) as db:
        for i in range(3000):
            k = b"user:%d" % (i % 300)
            v = bytes([i % 251]) * (i % 200)
            db.put(k, v)
            want[k] = v
        db.put(7, 2**64 - 1)  # the tombstone's bit pattern, stored out of place
        db.put(b"", b"empty key")
        want[b""] = b"empty key"
        db.delete(b"user:5")
        want.pop(b"user:5")
        s = db.stats()
        assert s["payload_appends"] > 2900 and s["payload_segments"] >= 1
    with _open(p, **opts) as db:
        assert db.get_int(7) == 2**64 - 1
        assert db.get(b"user:5") is None
        for k, v in want.items():
            assert db.get(k) == v
        db.checkpoint()
        assert db.collect_garbage(all=True) >= 1
        assert db.stats()["payload_gc_bytes_freed"] > 0
        for k, v in want.items():
            assert db.get(k) == v
        with pytest.raises(attune.InvalidArgumentError, match="not 8"):
            db.get_int(b"user:1")
        assert db.verify()["payload_records"] >= 0


def test_cli_text_keys_and_values(tmp_path, capsys):
    from attune import cli

    p = str(tmp_path / "t")
    assert cli.main(["hash-db", "open", p, "--json"]) == 0
    assert cli.main(["hash-db", "put", p, "--text", "a long key", "a longer value", "--json"]) == 0
    capsys.readouterr()
    assert cli.main(["hash-db", "get", p, "--text", "a long key", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"value": "a longer value"' in out and '"key": "a long key"' in out


def test_cli_boolean_options_bad_text_and_honest_delete(tmp_path, capsys):
    p = str(tmp_path / "h")
    opts = ["-o", "dram_entries_log2=8", "-o", "log_partitions=4", "-o", "log_chunk_bytes=1048576"]
    assert main(["hash-db", "open", p, *opts, "--json"]) == 0
    capsys.readouterr()
    # Booleans take 0/1, true/false, yes/no, on/off; anything else is one JSON error.
    assert main(["hash-db", "put", p, "1", "2", "-o", "sync=0", "--json"]) == 0
    assert main(["hash-db", "get", p, "1", "-o", "payload_gc=1", "--json"]) == 0
    capsys.readouterr()
    assert main(["hash-db", "put", p, "1", "2", "-o", "sync=maybe", "--json"]) != 0
    err = json.loads(capsys.readouterr().out)
    assert err["error"] == "InvalidArgumentError" and "sync" in err["message"]
    # Bytes that are not UTF-8 arrive in argv as lone surrogates.
    assert main(["hash-db", "put", p, "--text", "bin", "\udcff\udcfe", "--json"]) != 0
    err = json.loads(capsys.readouterr().out)
    assert err["error"] == "InvalidArgumentError" and "UTF-8" in err["message"]
    # delete says whether the key existed.
    assert main(["hash-db", "delete", p, "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"key": 1, "existed": True}
    assert main(["hash-db", "delete", p, "999", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"key": 999, "existed": False}


def test_wrong_types_of_options_are_invalid_argument_errors(tmp_path):
    p = tmp_path / "h"
    for kw in ({"sync": "yes"}, {"payload_gc": 2}, {"dram_entries_log2": True}, {"backend": 3}):
        with pytest.raises(attune.InvalidArgumentError, match=next(iter(kw))):
            _open(p, **kw)
    with _open(p, sync=0, payload_gc=1):
        pass


def test_byte_count_options_take_size_strings(tmp_path):
    opts = {k: v for k, v in SMALL.items() if k != "log_chunk_bytes"}
    with attune.HashDB(tmp_path / "h", log_chunk_bytes="1MiB", **opts) as db:
        db.put(1, 2)
    # The stored geometry is the same whether given as text or as an int.
    with attune.HashDB(tmp_path / "h", log_chunk_bytes=1 << 20, **opts) as db:
        assert db.get_int(1) == 2
    for bad in ("1 potato", "-4KiB", ""):
        with pytest.raises(attune.InvalidArgumentError, match="log_chunk_bytes.*not a size"):
            attune.HashDB(tmp_path / "bad", log_chunk_bytes=bad, **opts)
    assert not (tmp_path / "bad").exists()


def test_with_on_a_closed_handle_is_a_closed_error(tmp_path):
    db = _open(tmp_path / "h")
    db.close()
    with pytest.raises(attune.ClosedError), db:
        pass


def test_a_directory_of_other_files_or_without_its_manifest_is_refused(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.txt").write_bytes(b"mine")
    with pytest.raises(attune.NotADatabaseError, match="data.txt"):
        _open(other)
    assert sorted(x.name for x in other.iterdir()) == ["data.txt"]
    p = tmp_path / "h"
    with _open(p) as db:
        db.put(1, 2)
    (p / "manifest.plush").unlink()
    before = {x.name: x.stat().st_size for x in p.iterdir()}
    with pytest.raises(attune.CorruptionError, match="manifest.plush is missing"):
        attune.HashDB(p)
    assert {x.name: x.stat().st_size for x in p.iterdir()} == before


def test_read_only_handles_share_a_database_refuse_writes_and_exclude_a_writer(tmp_path, capsys):
    p = tmp_path / "h"
    with _open(p) as db:
        for k in range(3_000):
            db.put(k, k + 1)
        db.put(b"long key", b"long value")
    files = {f.name: f.read_bytes() for f in p.iterdir()}
    with _open(p, read_only=True) as r1, _open(p, read_only=True) as r2:
        assert r1.get_int(2_999) == 3_000 and r2.get(b"long key") == b"long value"
        for call in (
            lambda: r1.put(1, 2),
            lambda: r1.delete(1),
            r1.checkpoint,
            lambda: r1.collect_garbage(all=True),
        ):
            with pytest.raises(attune.ReadOnlyError, match="read-only"):
                call()
        assert r1.verify()["dram_records"] + r1.verify()["records"] >= 3_001
        # A writer is refused while readers hold the database (as attune.DB does).
        with pytest.raises(attune.LockedError):
            _open(p)
        # The CLI's read verbs open read-only, beside these readers.
        assert main(["hash-db", "get", str(p), "7", "--json"]) == 0
        assert json.loads(capsys.readouterr().out.splitlines()[-1])["value"] == 8
        assert main(["hash-db", "stats", str(p), "--json"]) == 0
        assert main(["hash-db", "verify", str(p), "--json"]) == 0
        capsys.readouterr()
    assert {f.name: f.read_bytes() for f in p.iterdir()} == files
    with _open(p) as w:
        with pytest.raises(attune.LockedError):
            _open(p, read_only=True)
        w.put(1, 5)
    with pytest.raises(attune.NotADatabaseError):
        _open(tmp_path / "absent", read_only=True, create_if_missing=True)
    assert not (tmp_path / "absent").exists()


def _flip_level_record(path, key, value, part):
    """Flips one byte of `key`'s key or value word in the level file that holds it (a bucket is
    16 keys, then their 16 values). Returns the file's name."""
    pattern = key.to_bytes(8, "little")
    for f in sorted(path.glob("level-*.plush")):
        data = bytearray(f.read_bytes())
        at = data.find(pattern, 4096)
        while at >= 0 and at % 8:
            at = data.find(pattern, at + 1)
        if at < 0 or data[at + 128 : at + 136] != value.to_bytes(8, "little"):
            continue
        off = at + (3 if part == "key" else 128 + 3)
        data[off] ^= 0x5A
        f.write_bytes(bytes(data))
        return f.name
    raise AssertionError(f"key {key} not found in a level file")


@pytest.mark.parametrize("part", ["key", "value"])
def test_flipped_level_record_is_corruption_never_a_wrong_value(tmp_path, part):
    src = tmp_path / "h"
    n = 3000
    with _open(src) as db:
        for k in range(1, n + 1):
            db.put(k, k * 7 + 1)
        db.checkpoint()
        assert db.verify()["records_not_checksummed"] == 0
    victim = 1234
    name = _flip_level_record(src, victim, victim * 7 + 1, part)
    with _open(src) as db:
        with pytest.raises(attune.CorruptionError, match=name) as e:
            db.get_int(victim)
        assert "directory entry" in str(e.value)
        for k in range(1, n + 1):
            try:
                v = db.get_int(k)
            except attune.CorruptionError:
                continue
            assert v == k * 7 + 1, f"key {k} read back {v}"
        with pytest.raises(attune.CorruptionError, match=name):
            db.verify()


def test_dict_face_mirrors_db(tmp_path):
    # The mapping face attune.DB offers, where it fits a hash table: h[k] (KeyError when
    # missing), h[k] = v, del h[k] (a blind delete, as DB's), k in h, get(k, default).
    with _open(tmp_path / "h") as h:
        h[1] = 2
        h[b"user:17"] = b"Ada"
        assert h[1] == (2).to_bytes(8, "little")
        assert h[b"user:17"] == b"Ada"
        # int key 1 and its 8 little-endian bytes are the same key.
        assert h[(1).to_bytes(8, "little")] == (2).to_bytes(8, "little")
        assert 1 in h and (1).to_bytes(8, "little") in h and b"user:17" in h
        assert 2 not in h and b"nobody" not in h
        with pytest.raises(KeyError) as e:
            h[b"nobody"]
        assert e.value.args == (b"nobody",)
        assert h.get(b"nobody") is None and h.get(b"nobody", b"x") == b"x"
        assert h.get_int(99, 7) == 7 and h.get_int(1, 7) == 2
        del h[1]
        assert 1 not in h and h.get(1) is None
        del h[b"never-written"]  # a blind delete, as DB's: no KeyError
        with pytest.raises(KeyError):
            h[1]
        # No ordered iteration (and no len): a clear TypeError, never a walk of h[0], h[1], ...
        with pytest.raises(TypeError, match="iteration"):
            iter(h)
        with pytest.raises(TypeError):
            len(h)
        with pytest.raises(attune.InvalidArgumentError):
            h[1.5] = 2
    with pytest.raises(attune.ClosedError):
        h[b"user:17"]
    with pytest.raises(attune.ClosedError):
        _ = b"user:17" in h


def test_cli_hex_keys_and_values(tmp_path, capsys):
    # --hex as `attune kv`'s: keys and values are hex digits (an optional 0x prefix), given and
    # printed; binary keys reach the same records the Python API wrote.
    p = str(tmp_path / "x")
    assert main(["hash-db", "open", p, "--json"]) == 0
    with attune.HashDB(p, sync=False) as h:
        h[b"\x00\xffkey"] = b"\x01\x02\x80"
        h[7] = 9
    capsys.readouterr()
    assert main(["hash-db", "get", p, "--hex", "00ff6b6579", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"key": "00ff6b6579", "found": True, "value": "010280"}
    assert main(["hash-db", "get", p, "--hex", "0x0700000000000000"]) == 0
    assert capsys.readouterr().out == "0900000000000000\n"
    assert main(["hash-db", "put", p, "--hex", "fe00", "0x00ff", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"key": "fe00", "value": "00ff"}
    with attune.HashDB(p, read_only=True) as h:
        assert h[b"\xfe\x00"] == b"\x00\xff"
    assert main(["hash-db", "delete", p, "--hex", "fe00", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"key": "fe00", "existed": True}
    assert main(["hash-db", "get", p, "--hex", "fe00", "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {"key": "fe00", "found": False, "value": None}
    # Bad hex is one JSON error naming the argument; --hex and --text exclude each other.
    assert main(["hash-db", "get", p, "--hex", "xyz", "--json"]) != 0
    err = json.loads(capsys.readouterr().out)
    assert err["error"] == "InvalidArgumentError" and "KEY 'xyz' is not hex" in err["message"]
    assert main(["hash-db", "put", p, "--hex", "00", "0", "--json"]) != 0
    err = json.loads(capsys.readouterr().out)
    assert "VALUE '0' is not hex" in err["message"]
    assert main(["hash-db", "get", p, "--hex", "--text", "00"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_keys_and_values_are_taken_as_db_takes_them(tmp_path):
    """str is stored as UTF-8, bytearray and memoryview as their bytes, as attune.DB does."""
    with _open(tmp_path / "h") as db:
        db.put("clé", "välue")
        assert db.get("clé".encode()) == "välue".encode()
        db.put(bytearray(b"ba"), memoryview(b"mv"))
        assert db[b"ba"] == b"mv"
        assert "clé" in db


def test_ablation_options_show_in_stats_and_an_unlogged_close_keeps_records(tmp_path, capsys):
    p = tmp_path / "h"
    with _open(p) as db:
        s = db.stats()
        assert s["recovery_log"] is True and s["levels_preallocated"] == 1
    q = tmp_path / "unlogged"
    with _open(q, recovery_log=False, preallocate_levels=0) as db:
        for k in range(1000):
            db.put(k, k + 1)
        s = db.stats()
        assert s["recovery_log"] is False and s["log_appends"] == 0
        assert s["levels_preallocated"] == 0
    # The close migrated the DRAM level: nothing is left to replay, nothing was lost.
    with _open(q, recovery_log=False) as db:
        assert db.stats()["recovered_records"] == 0
        assert all(db.get_int(k) == k + 1 for k in range(1000))
    with pytest.raises(attune.InvalidArgumentError, match="recovery_log"):
        _open(tmp_path / "bad", recovery_log="maybe")
    assert main(["hash-db", "open", str(tmp_path / "cli"), "-o", "recovery_log=off"]) == 0
    assert "recovery log off" in capsys.readouterr().out


def test_range_partitioning_scans_in_key_order_and_hash_mode_says_how(tmp_path, capsys):
    p = tmp_path / "r"
    model: dict[int, bytes] = {}
    with _open(p, partitioning="range", significant_key_bits=16, preallocate_levels=0) as db:
        for k in range(0, 30_000, 7):
            k %= 1 << 16
            db.put(k, k + 1)
            model[k] = (k + 1).to_bytes(8, "little")
        for k in range(0, 1 << 16, 5):
            db.delete(k)
            model.pop(k, None)
        db.put(11, b"a value longer than eight bytes")
        model[11] = b"a value longer than eight bytes"
        s = db.stats()
        assert s["partitioning"] == "range" and s["significant_key_bits"] == 16
        assert sum(s["migrations"]) > 0
        want = sorted(model.items())
        assert db.scan() == want
        assert db.scan(start=9, limit=3) == [x for x in want if x[0] >= 9][:3]
        with pytest.raises(attune.InvalidArgumentError, match="8-byte integer keys"):
            db.put(b"short", 1)
        with pytest.raises(attune.InvalidArgumentError, match="significant key bits"):
            db.put(1 << 16, 1)
        with pytest.raises(attune.InvalidArgumentError, match="start"):
            db.scan(start=-1)
        with pytest.raises(attune.InvalidArgumentError, match="limit"):
            db.scan(limit="ten")
    # Reopened without options: the stored mode; the scan sees the same records.
    with attune.HashDB(p) as db:
        assert db.scan() == want
    with pytest.raises(attune.InvalidArgumentError, match="expected hash or range"):
        _open(tmp_path / "h", partitioning="bogus")
    with _open(tmp_path / "h") as db:
        db.put(1, 2)
        with pytest.raises(attune.InvalidArgumentError, match="partitioning = range"):
            db.scan()
    with pytest.raises(attune.InvalidArgumentError, match="created with partitioning = hash"):
        _open(tmp_path / "h", partitioning="range")
    capsys.readouterr()
    assert main(["hash-db", "scan", str(p), "--start", "20", "--limit", "2", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rows == [
        {"key": k, "value": int.from_bytes(v, "little")}
        for k, v in [x for x in want if x[0] >= 20][:2]
    ]


def test_synced_writes_on_tmpfs_issue_no_syncs_unless_asked(tmp_path):
    # On tmpfs a sync writes nothing: by default none is issued and the records are durable
    # all the same (a reopen reads them); elide_tmpfs_syncs=False keeps every sync.
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm")
    base = Path(tempfile.mkdtemp(dir=shm))
    try:
        for elide in (True, False):
            p = base / f"h-{elide}"
            opts = {**SMALL, "sync": True, "elide_tmpfs_syncs": elide}
            with attune.HashDB(p, **opts) as db:
                for k in range(200):
                    db.put(k, k + 1)
                syncs = db.stats()["log_syncs"]
            assert (syncs == 0) == elide, (elide, syncs)
            with attune.HashDB(p, **opts) as db:
                assert all(db.get_int(k) == k + 1 for k in range(200))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_option_messages_say_what_is_wrong_with_the_value(tmp_path):
    p = tmp_path / "h"
    cases = [
        ({"log_chunk_bytes": 2**70}, r"log_chunk_bytes=1180591620717411303424 is too large"),
        ({"dram_entries_log2": 2**32 + 16}, r"dram_entries_log2=4294967312 is too large"),
        ({"log_chunks": -1}, r"log_chunks=-1 is negative"),
        (
            {"dram_entries_log2": "16"},
            r"dram_entries_log2='16' must be a non-negative int, not str",
        ),
    ]
    for kw, msg in cases:
        with pytest.raises(attune.InvalidArgumentError, match=msg):
            attune.HashDB(p, **kw)
    # The type's bound (2**32 - 1) is not the option's range, so it is not quoted as one.
    with pytest.raises(attune.InvalidArgumentError) as e:
        attune.HashDB(p, dram_entries_log2=2**32 + 16)
    assert "4294967295" not in str(e.value)
    assert not p.exists()


def test_an_open_hash_db_and_db_are_true(tmp_path):
    """`if db:` must not fall back to the refusing len() and raise."""
    with _open(tmp_path / "h") as h:
        assert h
    with attune.DB(str(tmp_path / "d")) as db:
        assert db


def test_cli_options_take_size_strings_and_name_the_option(tmp_path, capsys):
    p = str(tmp_path / "h")
    opts = ["-o", "log_chunk_bytes=1MiB", "-o", "dram_entries_log2=10"]
    assert main(["hash-db", "open", p, *opts, "--json"]) == 0
    capsys.readouterr()
    q = str(tmp_path / "q")
    assert main(["hash-db", "open", q, "-o", "dram_entries_log2=-1", "--json"]) != 0
    out = capsys.readouterr()
    assert "dram_entries_log2=-1 is negative" in out.out + out.err
    assert "2**64" not in out.out + out.err  # the option's range, not a key's
    assert main(["hash-db", "open", q, "-o", "dram_entries_log2=99", "--json"]) != 0
    out = capsys.readouterr()
    assert "not in 1..=24" in out.out + out.err
    assert main(["hash-db", "open", q, "-o", "log_chunk_bytes=lots", "--json"]) != 0
    out = capsys.readouterr()
    assert "log_chunk_bytes" in out.out + out.err


def test_an_empty_path_is_refused_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for kw in ({}, {"read_only": True}):
        with pytest.raises(attune.InvalidArgumentError, match="path is empty"):
            attune.HashDB("", **kw)
    assert list(tmp_path.iterdir()) == []


def test_bools_are_refused_as_keys_and_values_as_options_refuse_them(tmp_path):
    with _open(tmp_path / "h") as db:
        for call in (lambda: db.put(True, 1), lambda: db.put(1, False), lambda: db.get(True)):
            with pytest.raises(attune.InvalidArgumentTypeError, match="not a bool; got bool"):
                call()
        db.put(1, 1)
        assert db.get_int(1) == 1


def test_a_too_large_value_message_reads_right(tmp_path):
    msg = "a key of 8 bytes with its value"
    with _open(tmp_path / "h") as db, pytest.raises(attune.InvalidArgumentError, match=msg):
        db.put(b"8 bytes!", b"v" * ((1 << 20) + 1))


def test_an_oversized_log_is_refused_before_anything_is_created(tmp_path):
    p = tmp_path / "half"
    for kw in ({"log_chunk_bytes": "1TiB"}, {"log_chunks": 10**9}):
        with pytest.raises(attune.InvalidArgumentError, match="recovery log's limit"):
            attune.HashDB(p, **kw)
        assert not p.exists()
    with attune.HashDB(p, **SMALL) as db:
        db.put(1, 2)


_CREATE_UNDER_A_FILE_SIZE_LIMIT = """
import resource, signal, sys
import attune
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
try:
    attune.HashDB(sys.argv[1])
except attune.StorageIOError as e:
    print("refused:", e)
"""


def test_a_failed_creation_takes_back_what_it_wrote(tmp_path):
    """A file-size limit lets the manifest be written and fails the log's file: the open must
    leave the directory as it found it, so that the next open creates the database afresh."""
    import subprocess
    import sys

    new = tmp_path / "a" / "b"
    existing = tmp_path / "empty"
    existing.mkdir()
    for p in (new, existing):
        out = subprocess.run(
            [sys.executable, "-c", _CREATE_UNDER_A_FILE_SIZE_LIMIT, str(p)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "refused:" in out and "log.plush" in out, out
    assert not (tmp_path / "a").exists(), list((tmp_path / "a").rglob("*"))
    assert existing.is_dir() and list(existing.iterdir()) == []
    with attune.HashDB(new, **SMALL) as db:
        db.put(1, 2)


def test_short_sessions_that_write_share_one_payload_segment(tmp_path, capsys):
    p = tmp_path / "h"
    with _open(p) as db:
        db.put(b"python key", b"python value")
    for i in range(4):
        assert main(["hash-db", "put", str(p), "--text", f"k{i}", f"value {i}"]) == 0
    capsys.readouterr()
    assert sorted(f.name for f in p.glob("payload-*.plush")) == ["payload-000001.plush"]
    with _open(p, read_only=True) as db:
        assert db.get(b"python key") == b"python value"
        assert [db.get(f"k{i}".encode()) for i in range(4)] == [
            f"value {i}".encode() for i in range(4)
        ]


def _without_dac_override():
    """In the child before exec: a root child is held to the files' permission bits."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(24, 1, 0, 0, 0) != 0:  # PR_CAPBSET_DROP, CAP_DAC_OVERRIDE
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE)")


def test_the_cli_put_on_a_database_it_may_not_write_gives_a_hint_for_the_cli(tmp_path):
    import os
    import subprocess
    import sys

    p = tmp_path / "h"
    with _open(p) as db:
        db.put(1, 2)
    for f in p.iterdir():
        os.chmod(f, 0o444)
    os.chmod(p, 0o555)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "attune.cli", "hash-db", "put", str(p), "3", "4"],
            check=False,
            capture_output=True,
            text=True,
            preexec_fn=_without_dac_override if os.geteuid() == 0 else None,
        )
    finally:
        os.chmod(p, 0o755)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "attune hash-db get" in out and "read_only=True" in out, out
