//! Open-path tests: degenerate paths, directories of other engines, files that do not belong to
//! the database, and option combinations that must be refused before anything is written.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_kv::env::{Env, MemEnv};
use attune_kv::{Error, Options, DB};
use std::path::Path;
use std::sync::Arc;

fn options() -> Options {
    Options {
        write_buffer_size: 32 << 10,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

#[test]
fn empty_path_is_refused_before_touching_the_file_system() {
    let env = Arc::new(MemEnv::new());
    let e = DB::open_with_env(env.clone(), Path::new(""), options())
        .err()
        .expect("an empty path must be refused");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("path is empty"), "{e}");
    for name in ["LOCK", "CURRENT", "./LOCK"] {
        assert!(!env.exists(Path::new(name)), "{name} was created");
    }
}

#[test]
fn path_that_is_a_regular_file_is_not_a_database() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("data.bin");
    std::fs::write(&file, b"not a directory").unwrap();
    let e = DB::open(&file, options()).err().expect("must refuse");
    assert!(matches!(e, Error::NotADatabase { .. }), "{e}");
    assert!(e.to_string().contains("is a file, not a directory"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");

    let below = file.join("db");
    let e = DB::open(&below, options()).err().expect("must refuse");
    assert!(matches!(e, Error::NotADatabase { .. }), "{e}");
    assert!(e.to_string().contains("data.bin is a file"), "{e}");
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Writes `files` into `dir`, opens it, and checks that the refusal names `engine` and that the
/// directory is left as it was.
fn assert_refused_as(dir: &Path, files: &[(&str, Vec<u8>)], engine: &str) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, data) in files {
        std::fs::write(dir.join(name), data).unwrap();
    }
    let listing = |d: &Path| {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let before = listing(dir);
    let e = DB::open(dir, options()).err().expect("must refuse");
    assert!(matches!(e, Error::NotADatabase { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("this is a {engine} database")),
        "{msg}"
    );
    assert!(msg.contains("Attune cannot read it"), "{msg}");
    assert_eq!(
        listing(dir),
        before,
        "opening must not change the directory"
    );
}

#[test]
fn rocksdb_directory_is_named_not_reported_as_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    // The files RocksDB 9 leaves after one put, with its manifest's first bytes.
    let manifest = hex(
        "8213b07927000181402461343037313831312d333633632d343038372d39\
         3231312d653034316135643935333961052b28430000017ab4089e0f0001",
    );
    let files = [
        ("CURRENT", b"MANIFEST-000005\n".to_vec()),
        ("MANIFEST-000005", manifest),
        ("IDENTITY", b"a4071811-363c-4087-9211-e041a5d9539a".to_vec()),
        (
            "OPTIONS-000007",
            b"# This is a RocksDB option file.\n".to_vec(),
        ),
        ("LOCK", Vec::new()),
        ("LOG", b"RocksDB version: 9.8.4\n".to_vec()),
        ("000008.log", Vec::new()),
        ("000009.sst", vec![0; 64]),
    ];
    assert_refused_as(&tmp.path().join("rocks"), &files, "RocksDB");
    // Without CURRENT (a half-copied directory) the names alone tell.
    assert_refused_as(&tmp.path().join("rocks-no-current"), &files[2..], "RocksDB");
}

#[test]
fn leveldb_directory_is_named_not_reported_as_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    // LevelDB 1.23 after one put: a manifest whose first record names the comparator.
    let manifest = hex(
        "56f9b8f81c0001011a6c6576656c64622e4279746577697365436f6d70617261746f72\
         a49c8bbe0800010203090003040400",
    );
    let files = [
        ("CURRENT", b"MANIFEST-000002\n".to_vec()),
        ("MANIFEST-000002", manifest),
        ("LOCK", Vec::new()),
        (
            "LOG",
            b"2026/01/01-00:00:00.000000 1 Delete type=3 #1\n".to_vec(),
        ),
        (
            "000003.log",
            hex("e99f78191100010100000000000000010000000101610131"),
        ),
    ];
    assert_refused_as(&tmp.path().join("level"), &files, "LevelDB");
    // Older or compacted LevelDB directories hold .ldb tables.
    let mut with_tables = files.to_vec();
    with_tables.push(("000005.ldb", vec![0; 64]));
    assert_refused_as(&tmp.path().join("level-ldb"), &with_tables[2..], "LevelDB");
}

/// A WAL holding one write batch (sequence `seq`: put `key` = `value`), as the engine writes it.
fn write_log(path: &Path, seq: u64, key: &[u8], value: &[u8]) {
    use attune_kv::env::PosixEnv;
    let mut batch = seq.to_le_bytes().to_vec();
    batch.extend_from_slice(&1u32.to_le_bytes());
    batch.push(1); // kind: value
    batch.push(key.len() as u8);
    batch.extend_from_slice(key);
    batch.push(value.len() as u8);
    batch.extend_from_slice(value);
    let env = PosixEnv::new();
    let mut w = attune_kv::internals::LogWriter::new(env.new_writable(path).unwrap());
    w.add_record(&batch).unwrap();
    w.sync().unwrap();
}

#[test]
fn stray_log_copied_into_the_directory_is_neither_replayed_nor_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = DB::open(&dir, options()).unwrap();
    db.put(b"mine", b"1").unwrap();
    db.close().unwrap();
    let stray = dir.join("000998.log");
    write_log(&stray, 1, b"stray", b"from another database");
    let bytes = std::fs::read(&stray).unwrap();

    let e = DB::open(&dir, options())
        .err()
        .expect("a stray log must fail the open");
    assert!(matches!(e, Error::Corruption { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("000998.log") && msg.contains("move it out"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read(&stray).unwrap(),
        bytes,
        "the stray log must be left as it was"
    );

    std::fs::rename(&stray, tmp.path().join("000998.log")).unwrap();
    let db = DB::open(&dir, options()).unwrap();
    assert_eq!(db.get(b"mine").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"stray").unwrap(), None);
}

/// A log above the manifest's record whose sequences happen to continue the history (a copy of
/// another database's log that started alike, or of this one's) is refused too, and left as it
/// was: sequences alone cannot tell it is this database's.
#[test]
fn a_log_above_the_record_that_continues_the_sequences_is_refused_not_merged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = DB::open(&dir, options()).unwrap();
    db.put(b"mine", b"1").unwrap();
    db.close().unwrap();
    // Nothing flushed: the next write is sequence 1, which this log holds.
    let copied = dir.join("000990.log");
    write_log(&copied, 1, b"foreign", b"from a database that began alike");
    let bytes = std::fs::read(&copied).unwrap();
    let e = DB::open(&dir, options())
        .err()
        .expect("the log must be refused");
    assert!(matches!(e, Error::Corruption { .. }), "{e}");
    assert!(e.to_string().contains("000990.log"), "{e}");
    assert_eq!(std::fs::read(&copied).unwrap(), bytes, "left as it was");
    let ro = Options {
        read_only: true,
        ..options()
    };
    assert!(
        DB::open(&dir, ro).is_err(),
        "a read-only open refuses it too"
    );
}

/// Recovery replays only logs the manifest accounts for, so a WAL created by a memtable switch
/// must be accounted for before it holds a write: a crash right after the switch (before the
/// flush of the old memtable records anything) must still recover every synced write.
#[test]
fn every_wal_is_accounted_for_by_the_manifest_before_it_holds_a_write() {
    use attune_kv::internals::VersionSet;
    use attune_kv::WriteOptions;
    let env = MemEnv::new();
    let dir = Path::new("/db");
    let opts = Options {
        write_buffer_size: 8 << 10,
        ..options()
    };
    let db = DB::open_with_env(Arc::new(env.clone()), dir, opts.clone()).unwrap();
    let value = vec![b'v'; 200];
    let sync = WriteOptions { sync: true };
    for i in 0..400u32 {
        db.put_opt(format!("key{i:05}").as_bytes(), &value, sync)
            .unwrap();
        let mut vs = VersionSet::new(Arc::new(env.clone()), dir.to_path_buf());
        vs.recover().unwrap();
        for name in env.list_dir(dir).unwrap() {
            if let Some(Ok(n)) = name.strip_suffix(".log").map(str::parse::<u64>) {
                assert!(
                    vs.accounts_for(n),
                    "after write {i}: {name} holds writes but the manifest records next file \
                     number {}",
                    vs.recorded_next_file_number
                );
            }
        }
    }
    env.power_off();
    drop(db);
    env.crash();
    let db = DB::open_with_env(Arc::new(env.clone()), dir, opts).unwrap();
    for i in 0..400u32 {
        let got = db.get(format!("key{i:05}").as_bytes()).unwrap();
        assert_eq!(got.as_deref(), Some(&value[..]), "key{i:05} lost");
    }
}

/// Loads 2,000 keys into tables on real files, reopens with every table beyond the mapping
/// limit (`mmap_reads_limit = 0`: each is read with `pread`), reads every key twice and returns
/// the block cache's inserts and hits.
fn block_cache_after_pread_gets(compression: &str, to_page_cache: &str) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options();
    o.set("compression", compression).unwrap();
    o.set("enable_blob_files", "false").unwrap();
    let key = |i: u32| format!("key{i:06}").into_bytes();
    {
        let db = DB::open(dir.path(), o.clone()).unwrap();
        for i in 0..2000u32 {
            db.put(&key(i), &[b'v'; 200]).unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    o.set("mmap_reads_limit", "0").unwrap();
    o.set("uncompressed_to_page_cache", to_page_cache).unwrap();
    o.set("learned_index", "off").unwrap();
    let db = DB::open(dir.path(), o).unwrap();
    for _ in 0..2 {
        for i in 0..2000u32 {
            assert_eq!(db.get(&key(i)).unwrap(), Some(vec![b'v'; 200]), "key {i}");
        }
    }
    let c = db.stats().block_cache;
    (c.inserts, c.hits)
}

#[test]
fn uncompressed_blocks_read_with_pread_beyond_the_mapping_limit_are_left_to_the_page_cache() {
    // Uncompressed: the page cache holds the blocks; the block cache takes none of them.
    assert_eq!(block_cache_after_pread_gets("none", "true"), (0, 0));
    // Switched off: the block cache takes them, as RocksDB's does, and the second pass hits.
    let (inserts, hits) = block_cache_after_pread_gets("none", "false");
    assert!(inserts > 0 && hits >= 2000, "inserts {inserts} hits {hits}");
    // Compressed blocks are cached either way: the page cache holds only their compressed form.
    let (inserts, hits) = block_cache_after_pread_gets("lz4", "true");
    assert!(inserts > 0 && hits >= 2000, "inserts {inserts} hits {hits}");
}
