"""Incremental backups as a RocksDB BackupEngine user relies on them: generations share files,
each restores to exactly the state it was made at, damage is found and never restored, a backup
cut short does not exist, and purge frees what no kept backup uses."""

import json
import os
from pathlib import Path

import pytest

import attune
from attune.backup import BackupEngine
from attune.cli import main as cli_main


def _db(path):
    return attune.DB(path, write_buffer_size="64KiB", min_blob_size=512)


def _fill(db, gen, n=400):
    for i in range(n):
        db.put(f"k{i:05}".encode(), f"{gen}-{i}-".encode() * (1 + i % 80))


def _contents(path):
    with attune.DB(path, create_if_missing=False) as db:
        return dict(db.items())


def test_generations_share_files_and_each_restores_its_own_state(tmp_path):
    with _db(tmp_path / "db") as db, BackupEngine(tmp_path / "bk") as engine:
        _fill(db, 1)
        db.compact()
        first = engine.create(db)
        want1 = dict(db.items())
        _fill(db, 2, n=50)  # a few more writes: most tables are unchanged
        second = engine.create(db)
        want2 = dict(db.items())
        assert [b.id for b in engine.list()] == [1, 2]
        assert first.bytes_new == first.size > 0
        assert second.bytes_new < second.size, "the second backup re-copied everything"
        engine.verify(1)
        engine.verify()
        engine.restore(tmp_path / "r1", 1)
        engine.restore(tmp_path / "r2")
    assert _contents(tmp_path / "r1") == want1
    assert _contents(tmp_path / "r2") == want2
    assert want1 != want2


def test_a_damaged_backup_file_is_found_and_never_restored(tmp_path):
    with _db(tmp_path / "db") as db, BackupEngine(tmp_path / "bk") as engine:
        _fill(db, 1)
        info = engine.create(db)
    victim = max(info.files, key=lambda f: f.size)
    path = tmp_path / "bk" / "shared" / victim.shared_name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    with BackupEngine(tmp_path / "bk") as engine:
        with pytest.raises(attune.CorruptionError, match=victim.shared_name) as e:
            engine.verify()
        assert e.value.path == str(path)
        with pytest.raises(attune.CorruptionError):
            engine.restore(tmp_path / "restored")
        (tmp_path / "empty").mkdir()
        with pytest.raises(attune.CorruptionError):
            engine.restore(tmp_path / "empty")
    assert not (tmp_path / "restored").exists(), "a failed restore leaves nothing behind"
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())
    assert [p.name for p in tmp_path.iterdir() if "restoring" in p.name] == []


def test_a_backup_cut_short_does_not_exist_and_purge_reclaims_it(tmp_path, monkeypatch):
    with _db(tmp_path / "db") as db, BackupEngine(tmp_path / "bk") as engine:
        _fill(db, 1)
        engine.create(db)
        _fill(db, 2)
        db.flush()
        # The record's rename is the last step: a crash before it leaves no backup.
        monkeypatch.setattr(os, "replace", _fail_on_meta(os.replace))
        with pytest.raises(OSError):
            engine.create(db)
        monkeypatch.undo()
        assert [x.id for x in engine.list()] == [1]
        assert not list((tmp_path / "bk").glob("tmp-*"))
        freed = engine.purge()
        assert freed > 0, "the files of the cut-short backup are reclaimed"
        engine.verify(1)


def _fail_on_meta(real):
    def replace(src, dst):
        if Path(dst).parent.name == "meta":
            raise OSError(5, "simulated crash before the record is in place")
        return real(src, dst)

    return replace


def test_purge_keeps_the_newest_and_frees_what_only_the_old_used(tmp_path):
    with _db(tmp_path / "db") as db, BackupEngine(tmp_path / "bk") as engine:
        for gen in range(3):
            _fill(db, gen)
            db.compact()
            engine.create(db)
        want = dict(db.items())
        assert engine.purge(keep=1) > 0
        assert [b.id for b in engine.list()] == [3]
        engine.verify()
        engine.restore(tmp_path / "r")
    assert _contents(tmp_path / "r") == want


def test_bad_arguments_are_clear_errors(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(attune.InvalidArgumentError, match="is a file"):
        BackupEngine(tmp_path / "file")
    (tmp_path / "bk").mkdir()
    with BackupEngine(tmp_path / "bk") as engine:
        with pytest.raises(attune.InvalidArgumentError, match="holds no backup"):
            engine.restore(tmp_path / "r")
        with pytest.raises(attune.LockedError):
            BackupEngine(tmp_path / "bk")
        with _db(tmp_path / "db") as db:
            db.put(b"a", b"1")
            engine.create(db)
        with pytest.raises(attune.InvalidArgumentError, match="no backup 7"):
            engine.verify(7)
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "x").write_text("x")
        with pytest.raises(attune.InvalidArgumentError, match="not an empty directory"):
            engine.restore(tmp_path / "full")
        with pytest.raises(attune.InvalidArgumentError, match="keep"):
            engine.purge(keep=-1)
    engine = BackupEngine(tmp_path / "bk")
    with pytest.raises(attune.InvalidArgumentError, match="backup id"):
        engine.delete(None)
    with pytest.raises(attune.InvalidArgumentError, match="open attune.DB"):
        engine.create(str(tmp_path / "db"))
    engine.close()
    with pytest.raises(attune.ClosedError):
        engine.list()


def test_a_missing_or_database_directory_is_refused_and_never_created(tmp_path):
    missing = tmp_path / "typo"
    with BackupEngine(missing) as engine:
        for call in (engine.list, engine.verify, engine.purge):
            with pytest.raises(attune.InvalidArgumentError, match="no backup directory"):
                call()
    assert not missing.exists()
    with _db(tmp_path / "db") as db:
        db.put(b"a", b"1")
    with pytest.raises(attune.InvalidArgumentError, match="database directory"):
        BackupEngine(tmp_path / "db")
    with (
        _db(tmp_path / "db") as db,
        BackupEngine(tmp_path / "db" / "inside") as engine,
        pytest.raises(attune.InvalidArgumentError, match="inside the database"),
    ):
        engine.create(db)
    assert not (tmp_path / "db" / "inside").exists()


def test_damaged_records_are_skipped_named_and_never_followed_outside(tmp_path):
    with _db(tmp_path / "db") as db, BackupEngine(tmp_path / "bk") as engine:
        db.put(b"a", b"1")
        good = engine.create(db)
    meta = tmp_path / "bk" / "meta"
    record = json.loads((meta / "1.json").read_text())
    record["id"] = 2
    record["files"][0]["name"] = "../../escaped"
    (meta / "2.json").write_text(json.dumps(record))
    (meta / "3.json").write_text("[1, 2]")
    (meta / "4.json").write_text("{not json")
    with BackupEngine(tmp_path / "bk") as engine:
        assert [b.id for b in engine.list()] == [good.id]
        assert sorted(Path(p).name for p, _ in engine.damaged()) == ["2.json", "3.json", "4.json"]
        with pytest.raises(attune.InvalidArgumentError, match="no backup 2"):
            engine.restore(tmp_path / "r", 2)
        with pytest.raises(attune.CorruptionError, match="cannot be read"):
            engine.purge()  # could delete what the damaged records need
        engine.restore(tmp_path / "r")
    assert not (tmp_path.parent / "escaped").exists()
    assert _contents(tmp_path / "r") == {b"a": b"1"}


def test_a_long_lived_handle_backs_up_incrementally(tmp_path):
    with _db(tmp_path / "db") as db, BackupEngine(tmp_path / "bk") as engine:
        sizes = []
        for gen in range(4):
            for i in range(200):
                db.put(f"g{gen}-{i:04}".encode(), os.urandom(2000))  # separated values
            sizes.append(engine.create(db).bytes_new)
        assert [b.bytes_new for b in engine.list()] == sizes
    # Each generation wrote about 400 KB; none copies the earlier ones' values again.
    assert max(sizes[1:]) < 2 * 200 * 2000, sizes


def test_threads_share_an_engine(tmp_path):
    import threading

    with _db(tmp_path / "db") as db, BackupEngine(tmp_path / "bk") as engine:
        db.put(b"a", b"1")
        errors = []

        def work():
            try:
                engine.create(db)
            except Exception as e:  # noqa: BLE001 (collected for the assertion)
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert [b.id for b in engine.list()] == [1, 2, 3, 4]
        engine.verify(4)


def test_cli_backup_round_trip(tmp_path, capsys):
    db, bk, dest = (str(tmp_path / n) for n in ("db", "bk", "restored"))
    assert cli_main(["kv", "put", db, "hello", "world"]) == 0
    assert cli_main(["kv", "backup", "create", db, bk, "--json"]) == 0
    capsys.readouterr()
    assert cli_main(["kv", "backup", "list", bk, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["backups"]
    assert [b["id"] for b in listed] == [1]
    assert cli_main(["kv", "backup", "verify", bk, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert cli_main(["kv", "backup", "restore", bk, dest, "--json"]) == 0
    capsys.readouterr()
    assert cli_main(["kv", "get", dest, "hello"]) == 0
    assert capsys.readouterr().out.strip() == "world"
    assert cli_main(["kv", "backup", "purge", bk, "--keep", "1", "--json"]) == 0
