"""Opening a database: degenerate paths, other engines' directories, files that do not belong to
the database, and options that must be refused with a message naming them."""

import shutil

import pytest

import attune


def test_empty_path_is_refused_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(attune.InvalidArgumentError, match="path is empty"):
        attune.DB("")
    assert list(tmp_path.iterdir()) == []


def test_path_that_is_a_regular_file_is_not_a_database(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_bytes(b"hello")
    with pytest.raises(attune.NotADatabaseError, match="is a file, not a directory"):
        attune.DB(f)
    assert f.read_bytes() == b"hello"


def test_rocksdb_directory_is_named_as_rocksdb(tmp_path):
    rocksdict = pytest.importorskip("rocksdict")
    path = tmp_path / "rocks"
    r = rocksdict.Rdict(str(path))
    r[b"k"] = b"v"
    r.close()
    before = sorted(p.name for p in path.iterdir())
    with pytest.raises(attune.NotADatabaseError, match="this is a RocksDB database") as e:
        attune.DB(path)
    assert "Attune cannot read it" in str(e.value)
    assert sorted(p.name for p in path.iterdir()) == before


def test_leveldb_directory_is_named_as_leveldb(tmp_path):
    plyvel = pytest.importorskip("plyvel")
    path = tmp_path / "level"
    d = plyvel.DB(str(path), create_if_missing=True)
    d.put(b"k", b"v")
    d.close()
    before = sorted(p.name for p in path.iterdir())
    with pytest.raises(attune.NotADatabaseError, match="this is a LevelDB database"):
        attune.DB(path)
    assert sorted(p.name for p in path.iterdir()) == before


def _newest_log(path):
    logs = [p for p in path.iterdir() if p.suffix == ".log" and p.stat().st_size > 0]
    return max(logs, key=lambda p: int(p.stem))


def test_stray_log_from_another_database_is_refused_and_kept(tmp_path):
    other = attune.DB(tmp_path / "other")
    other.put(b"stray", b"from another database")
    other.close()  # the write stays in the other database's log
    mine = attune.DB(tmp_path / "db")
    mine.put(b"mine", b"1")
    mine.close()
    stray = tmp_path / "db" / "000998.log"
    shutil.copy(_newest_log(tmp_path / "other"), stray)
    content = stray.read_bytes()

    with pytest.raises(attune.CorruptionError, match="000998.log") as e:
        attune.DB(tmp_path / "db")
    assert "move it out" in str(e.value)
    assert stray.read_bytes() == content

    stray.rename(tmp_path / "000998.log")
    with attune.DB(tmp_path / "db") as db:
        assert db.get(b"mine") == b"1"
        assert db.get(b"stray") is None


@pytest.mark.parametrize("value", [0, 15])
def test_max_open_files_too_small_is_refused_naming_the_option(tmp_path, value):
    with pytest.raises(attune.InvalidArgumentError, match="max_open_files"):
        attune.DB(tmp_path / "db", max_open_files=value)
    assert not (tmp_path / "db").exists()


def test_zstd_level_without_zstd_compression_is_refused(tmp_path):
    with pytest.raises(attune.InvalidArgumentError, match="zstd_level .* compression is lz4"):
        attune.DB(tmp_path / "db", compression="lz4", zstd_level=5)
    with attune.DB(tmp_path / "db", compression="zstd", zstd_level=5) as db:
        db.put(b"k", b"v")


def test_cache_size_and_block_cache_size_disagreeing_is_refused(tmp_path):
    with pytest.raises(attune.InvalidArgumentError, match="cache_size.*block_cache_size"):
        attune.DB(tmp_path / "db", cache_size="64MiB", block_cache_size="8MiB")
    with attune.DB(tmp_path / "db", cache_size="8MiB", block_cache_size="8MiB") as db:
        db.put(b"k", b"v")
