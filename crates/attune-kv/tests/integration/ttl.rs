//! Writes with a time to live: invisible from their expiry on in every read path (memtable,
//! tables, value log, iterators both ways, snapshots, `multi_get`, the hot-key cache), kept
//! across a reopen and a value-log collection, and dropped by compaction. Time moves by the
//! memory environment's settable wall clock, never by sleeping.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem;
use attune_kv::env::MemEnv;
use attune_kv::{Error, Options, ReadOptions, WriteOptions, DB};
use std::time::Duration;

const T0: u64 = 1_800_000_000_000; // a Unix millisecond in 2027

fn open_opts(env: &MemEnv, opts: Options) -> DB {
    open_mem(env, opts).unwrap()
}

fn open(env: &MemEnv) -> DB {
    open_opts(
        env,
        Options {
            write_buffer_size: 64 << 10,
            min_blob_size: 200,
            blob_gc_space_amp: 0.0,
            ..Options::default()
        },
    )
}

fn ttl(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

fn wo() -> WriteOptions {
    WriteOptions::default()
}

fn big(tag: &str) -> Vec<u8> {
    let mut v = tag.as_bytes().to_vec();
    v.resize(1000, b'.');
    v
}

fn all_forward(db: &DB) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

fn all_reverse(db: &DB) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_last();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    out.reverse();
    out
}

/// Puts an old plain version, then a newer expiring one, of `a` (inline) and `b` (separated),
/// and a plain `c`.
fn write_three(db: &DB) {
    db.put(b"a", b"old-a").unwrap();
    db.put(b"b", &big("old-b")).unwrap();
    db.put_ttl(b"a", b"new-a", ttl(10), wo()).unwrap();
    db.put_ttl(b"b", &big("new-b"), ttl(10), wo()).unwrap();
    db.put(b"c", b"plain").unwrap();
}

fn check_live(db: &DB) {
    assert_eq!(db.get(b"a").unwrap().unwrap(), b"new-a");
    assert_eq!(db.get(b"b").unwrap().unwrap(), big("new-b"));
    let want = vec![
        (b"a".to_vec(), b"new-a".to_vec()),
        (b"b".to_vec(), big("new-b")),
        (b"c".to_vec(), b"plain".to_vec()),
    ];
    assert_eq!(all_forward(db), want);
    assert_eq!(all_reverse(db), want);
}

/// After expiry the keys are gone, and their older versions stay hidden.
fn check_expired(db: &DB) {
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"b").unwrap(), None);
    let got = db
        .multi_get(&[b"b".as_slice(), b"c", b"a"], &ReadOptions::default())
        .unwrap();
    assert_eq!(got, vec![None, Some(b"plain".to_vec()), None]);
    let want = vec![(b"c".to_vec(), b"plain".to_vec())];
    assert_eq!(all_forward(db), want);
    assert_eq!(all_reverse(db), want);
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek(b"a");
    assert!(it.valid() && it.key() == b"c");
}

#[test]
fn expired_entries_read_as_deleted_from_every_place() {
    for place in ["memtable", "level 0", "deeper level"] {
        let env = MemEnv::new();
        env.set_unix_millis(T0);
        let db = open(&env);
        write_three(&db);
        match place {
            "level 0" => db.flush().unwrap(),
            "deeper level" => db.compact_range(None, None).unwrap(),
            _ => {}
        }
        env.set_unix_millis(T0 + 9_999);
        check_live(&db);
        env.set_unix_millis(T0 + 10_000); // the expiry instant itself: expired
        check_expired(&db);
    }
}

#[test]
fn a_snapshot_taken_before_expiry_sees_the_expiry_too() {
    let env = MemEnv::new();
    env.set_unix_millis(T0);
    let db = open(&env);
    write_three(&db);
    let snap = db.snapshot().unwrap();
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..ReadOptions::default()
    };
    assert_eq!(db.get_opt(b"a", &ro).unwrap().unwrap(), b"new-a");
    env.set_unix_millis(T0 + 60_000);
    assert_eq!(db.get_opt(b"a", &ro).unwrap(), None);
    assert_eq!(db.get_opt(b"b", &ro).unwrap(), None);
    // A snapshot from before the expiring write still sees the version it hid.
    drop(snap);
}

#[test]
fn expiries_survive_a_reopen_from_the_log_and_from_tables() {
    for flush in [false, true] {
        let env = MemEnv::new();
        env.set_unix_millis(T0);
        {
            let db = open(&env);
            write_three(&db);
            if flush {
                db.flush().unwrap();
            }
            db.close().unwrap();
        }
        let db = open(&env);
        check_live(&db);
        env.set_unix_millis(T0 + 10_000);
        check_expired(&db);
    }
}

#[test]
fn compaction_drops_expired_entries_and_frees_their_values() {
    let env = MemEnv::new();
    env.set_unix_millis(T0);
    let db = open(&env);
    for i in 0..200u32 {
        let k = format!("k{i:04}");
        if i % 2 == 0 {
            db.put_ttl(k.as_bytes(), &big(&k), ttl(5), wo()).unwrap();
        } else {
            db.put(k.as_bytes(), &big(&k)).unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    assert_eq!(db.verify().unwrap().table_entries, 200);
    assert_eq!(db.stats().blob_garbage_bytes, 0);
    env.set_unix_millis(T0 + 5_000);
    db.compact_range(None, None).unwrap();
    // The bottom level keeps no tombstone for them either.
    assert_eq!(db.verify().unwrap().table_entries, 100);
    let garbage = db.stats().blob_garbage_bytes;
    assert!(
        garbage > 100 * 1000,
        "expired values count as garbage: {garbage}"
    );
    let r = db.gc_with_ratio(0.1).unwrap();
    assert!(r.bytes_reclaimed > 0, "{r:?}");
    for i in 0..200u32 {
        let k = format!("k{i:04}");
        let got = db.get(k.as_bytes()).unwrap();
        assert_eq!(got, (i % 2 == 1).then(|| big(&k)), "{k}");
    }
}

#[test]
fn an_expired_entry_above_older_versions_becomes_a_tombstone() {
    let env = MemEnv::new();
    env.set_unix_millis(T0);
    let db = open(&env);
    db.put(b"a", b"old-a").unwrap();
    db.compact_range(None, None).unwrap(); // "old-a" at the bottom level
    db.put_ttl(b"a", b"new-a", ttl(1), wo()).unwrap();
    db.put(b"z", b"z").unwrap();
    db.flush().unwrap();
    env.set_unix_millis(T0 + 1_000);
    // Compact only level 0 into level 1 by a range that still leaves "old-a" below? A full
    // compaction merges both; either way "old-a" must not come back.
    db.compact_range(Some(b"a"), Some(b"a")).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    env.set_unix_millis(T0); // a clock set back cannot revive a compacted expiry
    assert_eq!(db.get(b"a").unwrap(), None);
}

#[test]
fn a_collection_moves_a_value_with_its_expiry() {
    let env = MemEnv::new();
    env.set_unix_millis(T0);
    let db = open_opts(
        &env,
        Options {
            write_buffer_size: 64 << 10,
            min_blob_size: 200,
            blob_file_size: 64 << 10,
            blob_gc_space_amp: 0.0,
            ..Options::default()
        },
    );
    db.put_ttl(b"keep", &big("keep"), ttl(100), wo()).unwrap();
    // Overwrites make the first segment mostly garbage.
    for round in 0..3 {
        for i in 0..60u32 {
            db.put(format!("o{i:03}").as_bytes(), &big(&format!("{round}")))
                .unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    let r = db.gc_with_ratio(0.1).unwrap();
    assert!(r.records_rewritten >= 1, "{r:?}");
    assert_eq!(db.get(b"keep").unwrap().unwrap(), big("keep"));
    env.set_unix_millis(T0 + 100_000);
    assert_eq!(db.get(b"keep").unwrap(), None);
}

#[test]
fn the_hot_key_cache_never_outlives_an_expiry() {
    let env = MemEnv::new();
    env.set_unix_millis(T0);
    let db = open_opts(
        &env,
        Options {
            hot_key_cache_bytes: 1 << 20,
            ..Options::default()
        },
    );
    db.put_ttl(b"hot", b"v", ttl(1), wo()).unwrap();
    db.flush().unwrap();
    for _ in 0..1000 {
        assert_eq!(db.get(b"hot").unwrap().unwrap(), b"v");
    }
    env.set_unix_millis(T0 + 1_000);
    assert_eq!(db.get(b"hot").unwrap(), None);
}

#[test]
fn a_zero_ttl_is_refused() {
    let env = MemEnv::new();
    let db = open(&env);
    match db.put_ttl(b"k", b"v", Duration::ZERO, wo()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("ttl"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(db.get(b"k").unwrap(), None);
}
