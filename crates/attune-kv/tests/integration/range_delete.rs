//! `delete_range`: range tombstones hide the keys of `[begin, end)` written before them in
//! gets, multi_get, iterators (both directions, seeks) and snapshots, through flushes,
//! compactions, reopens and crashes; compaction drops the keys they cover and then the
//! tombstones themselves; bad arguments are `InvalidArgument` naming the argument.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{contents, open_mem};
use attune_kv::env::MemEnv;
use attune_kv::{Error, Options, ReadOptions, WriteBatch, WriteOptions, DB};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        compression: attune_kv::Compression::None,
        target_file_size: 16 << 10,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

/// Every view of the database agrees that exactly the keys of `live` are present.
fn check(db: &DB, live: &[u32], ro: &ReadOptions, ctx: &str) {
    let all: Vec<Vec<u8>> = (0..200).map(key).collect();
    let got = db.multi_get(&all, ro).unwrap();
    for (i, v) in got.iter().enumerate() {
        let want = live.contains(&(i as u32));
        assert_eq!(v.is_some(), want, "{ctx}: multi_get {i}");
        assert_eq!(
            db.get_opt(&all[i], ro).unwrap().is_some(),
            want,
            "{ctx}: get {i}"
        );
    }
    let mut it = db.iter(ro).unwrap();
    it.seek_to_first();
    let mut fwd = Vec::new();
    while it.valid() {
        fwd.push(it.key().to_vec());
        it.next();
    }
    let want: Vec<Vec<u8>> = live.iter().map(|&i| key(i)).collect();
    assert_eq!(fwd, want, "{ctx}: forward scan");
    it.seek_to_last();
    let mut rev = Vec::new();
    while it.valid() {
        rev.push(it.key().to_vec());
        it.prev();
    }
    rev.reverse();
    assert_eq!(rev, want, "{ctx}: reverse scan");
    // A seek into the deleted range lands on the first live key after it.
    it.seek(&key(20));
    let first_after = live.iter().find(|&&i| i >= 20).map(|&i| key(i));
    assert_eq!(
        it.valid().then(|| it.key().to_vec()),
        first_after,
        "{ctx}: seek"
    );
    it.seek_for_prev(&key(60));
    let last_before = live.iter().rev().find(|&&i| i <= 60).map(|&i| key(i));
    assert_eq!(
        it.valid().then(|| it.key().to_vec()),
        last_before,
        "{ctx}: seek_for_prev"
    );
    it.status().unwrap();
}

#[test]
fn a_range_deletion_hides_its_keys_in_every_read_and_after_every_transition() {
    let env = MemEnv::new();
    let mut db = open_mem(&env, options()).unwrap();
    for i in 0..200u32 {
        db.put(&key(i), &[b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    let before = db.snapshot().unwrap();
    db.delete_range(&key(10), &key(90)).unwrap();
    // Rewritten after the deletion: visible again.
    db.put(&key(50), b"new").unwrap();
    let live: Vec<u32> = (0..200)
        .filter(|&i| !(10..90).contains(&i) || i == 50)
        .collect();
    let all: Vec<u32> = (0..200).collect();
    let snap = ReadOptions {
        snapshot: Some(before.sequence()),
        ..Default::default()
    };
    let ro = ReadOptions::default();
    check(&db, &live, &ro, "memtable");
    check(&db, &all, &snap, "snapshot, memtable");
    db.flush().unwrap();
    check(&db, &live, &ro, "flushed");
    check(&db, &all, &snap, "snapshot, flushed");
    db.compact_range(None, None).unwrap();
    check(&db, &live, &ro, "compacted");
    check(&db, &all, &snap, "snapshot, compacted");
    drop(before);
    db.close().unwrap();
    db = open_mem(&env, options()).unwrap();
    check(&db, &live, &ro, "reopened");
    assert_eq!(db.get(&key(50)).unwrap().as_deref(), Some(&b"new"[..]));
    db.compact_range(None, None).unwrap();
    check(&db, &live, &ro, "compacted without snapshots");
}

#[test]
fn compaction_drops_covered_keys_and_then_the_tombstone() {
    let env = MemEnv::new();
    let db = open_mem(&env, options()).unwrap();
    for i in 0..2000u32 {
        db.put(format!("x{i:05}").as_bytes(), &[7u8; 200]).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let full: u64 = db.stats().level_bytes.iter().sum();
    assert!(full > 200_000, "{full}");
    db.delete_range(b"x", b"y").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let s = db.stats();
    let files: usize = s.level_files.iter().sum();
    assert_eq!(files, 0, "covered keys and the tombstone are gone: {s:?}");
    assert!(contents(&db).is_empty());
}

#[test]
fn a_snapshot_keeps_what_it_sees_through_compaction() {
    let env = MemEnv::new();
    let db = open_mem(&env, options()).unwrap();
    for i in 0..200u32 {
        db.put(&key(i), b"v").unwrap();
    }
    let snap = db.snapshot().unwrap();
    db.delete_range(&key(0), &key(200)).unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..Default::default()
    };
    let all: Vec<u32> = (0..200).collect();
    check(&db, &all, &ro, "snapshot after compaction");
    check(&db, &[], &ReadOptions::default(), "latest after compaction");
    drop(snap);
    db.compact_range(None, None).unwrap();
    check(
        &db,
        &[],
        &ReadOptions::default(),
        "latest, snapshot released",
    );
    assert_eq!(db.stats().level_files.iter().sum::<usize>(), 0);
}

#[test]
fn range_deletions_in_a_batch_apply_in_order() {
    let env = MemEnv::new();
    let db = open_mem(&env, options()).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"a1", b"1").unwrap();
    b.put(b"a2", b"2").unwrap();
    b.delete_range(b"a", b"b").unwrap();
    b.put(b"a3", b"3").unwrap();
    db.write(b, WriteOptions::default()).unwrap();
    let m = contents(&db);
    assert_eq!(m.keys().cloned().collect::<Vec<_>>(), vec![b"a3".to_vec()]);
}

#[test]
fn bad_bounds_are_invalid_arguments_naming_the_argument() {
    let env = MemEnv::new();
    let db = open_mem(&env, options()).unwrap();
    match db.delete_range(b"b", b"a") {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("begin"), "{m}"),
        r => panic!("{r:?}"),
    }
    let long = vec![0u8; attune_kv::MAX_KEY_BYTES + 1];
    match db.delete_range(b"a", &long) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("end"), "{m}"),
        r => panic!("{r:?}"),
    }
    // An empty range deletes nothing and writes nothing.
    db.put(b"a", b"1").unwrap();
    db.delete_range(b"a", b"a").unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn a_synced_range_deletion_survives_a_crash() {
    let env = MemEnv::new();
    let db = open_mem(&env, options()).unwrap();
    for i in 0..200u32 {
        db.put(&key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    db.delete_range_opt(&key(10), &key(90), WriteOptions { sync: true })
        .unwrap();
    env.power_off();
    drop(db);
    env.crash();
    let db = open_mem(&env, options()).unwrap();
    let live: Vec<u32> = (0..200).filter(|&i| !(10..90).contains(&i)).collect();
    check(&db, &live, &ReadOptions::default(), "after crash");
    // Recovery flushed the replayed tombstone: a second crash keeps it too.
    env.power_off();
    drop(db);
    env.crash();
    let db = open_mem(&env, options()).unwrap();
    check(&db, &live, &ReadOptions::default(), "after a second crash");
}

#[test]
fn the_hot_key_cache_forgets_a_deleted_range() {
    let env = MemEnv::new();
    let db = open_mem(
        &env,
        Options {
            hot_key_cache_bytes: 1 << 20,
            ..options()
        },
    )
    .unwrap();
    db.put(b"hot", b"v").unwrap();
    for _ in 0..10 {
        assert!(db.get(b"hot").unwrap().is_some());
    }
    db.delete_range(b"h", b"i").unwrap();
    assert_eq!(db.get(b"hot").unwrap(), None);
}

#[test]
fn separated_values_under_a_range_deletion_are_not_moved_back_by_gc() {
    let env = MemEnv::new();
    let db = open_mem(
        &env,
        Options {
            enable_blob_files: true,
            min_blob_size: 16,
            blob_file_size: 8 << 10,
            ..options()
        },
    )
    .unwrap();
    for i in 0..200u32 {
        db.put(&key(i), &[3u8; 300]).unwrap();
    }
    db.delete_range(&key(0), &key(100)).unwrap();
    db.flush().unwrap();
    db.gc_with_ratio(0.0).unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let live: Vec<u32> = (100..200).collect();
    check(&db, &live, &ReadOptions::default(), "after gc");
}

#[test]
fn repair_carries_range_deletions_from_tables_and_logs() {
    let env = MemEnv::new();
    let db = open_mem(&env, options()).unwrap();
    for i in 0..200u32 {
        db.put(&key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    // One tombstone in a table, one only in the log.
    db.delete_range(&key(10), &key(20)).unwrap();
    db.flush().unwrap();
    db.delete_range_opt(&key(100), &key(150), WriteOptions { sync: true })
        .unwrap();
    env.power_off();
    drop(db);
    env.crash();
    let env_arc = std::sync::Arc::new(env.clone()) as std::sync::Arc<dyn attune_kv::env::Env>;
    let live: Vec<u32> = (0..200)
        .filter(|&i| !(10..20).contains(&i) && !(100..150).contains(&i))
        .collect();
    for run in 0..2 {
        attune_kv::repair_with_env(env_arc.clone(), std::path::Path::new("/db"), options())
            .unwrap();
        let db = open_mem(&env, options()).unwrap();
        check(
            &db,
            &live,
            &ReadOptions::default(),
            &format!("repair run {run}"),
        );
        db.close().unwrap();
    }
}
