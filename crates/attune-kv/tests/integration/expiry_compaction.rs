//! Expiry-driven compaction: once the earliest expiring entry of a table of level 1 or below
//! has passed, the compaction thread rewrites the table where it is, although no level is over
//! its size and nothing is written, so the space of expired entries comes back on its own. The
//! engine's clock is the in-memory environment's, moved by the test.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem;
use attune_kv::env::MemEnv;
use attune_kv::{Options, WriteOptions, DB};
use std::time::{Duration, Instant};

const T0: u64 = 1_800_000_000_000;

fn options(interval_ms: u64) -> Options {
    Options {
        write_buffer_size: 64 << 10,
        min_blob_size: 200,
        blob_gc_space_amp: 0.0,
        expiry_compaction_interval_ms: interval_ms,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// 300 entries that expire after a minute (half of them separated into the value log) and 300
/// that never do, all compacted below level 0.
fn fill(db: &DB) {
    for i in 0..600u32 {
        let v = vec![b'a' + (i % 26) as u8; if i.is_multiple_of(2) { 400 } else { 60 }];
        if expiring(i) {
            db.put_ttl(
                &key(i),
                &v,
                Duration::from_secs(60),
                WriteOptions::default(),
            )
            .unwrap();
        } else {
            db.put(&key(i), &v).unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
}

fn expiry_compactions(db: &DB) -> u64 {
    db.stats()
        .level_compactions
        .iter()
        .map(|l| l.expiry_compactions)
        .sum()
}

fn expiring(i: u32) -> bool {
    i.is_multiple_of(2) || i.is_multiple_of(3)
}

#[test]
fn expired_tables_are_rewritten_without_writes() {
    let env = MemEnv::new();
    env.set_unix_millis(T0);
    let db = open_mem(&env, options(1)).unwrap();
    fill(&db);
    let before = db.stats();
    assert_eq!(expiry_compactions(&db), 0, "nothing has expired yet");
    assert_eq!(before.level_files[0], 0);
    env.set_unix_millis(T0 + 61_000);
    // Waits for the background thread's own check (no write, flush or compact call wakes it).
    let deadline = Instant::now() + Duration::from_secs(30);
    while expiry_compactions(&db) == 0 {
        assert!(
            Instant::now() < deadline,
            "no expiry compaction within 30 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let after = db.stats();
    assert!(
        after.live_sst_bytes < before.live_sst_bytes,
        "{} -> {}",
        before.live_sst_bytes,
        after.live_sst_bytes
    );
    assert!(after.blob_garbage_bytes > before.blob_garbage_bytes);
    for i in 0..600u32 {
        assert_eq!(db.get(&key(i)).unwrap().is_some(), !expiring(i), "key {i}");
    }
    // Done once: the rewritten tables hold no expired entry, so nothing is picked again.
    let n = expiry_compactions(&db);
    db.flush().unwrap();
    db.close().unwrap();
    assert!(n >= 1);
}

#[test]
fn zero_interval_turns_it_off() {
    let env = MemEnv::new();
    env.set_unix_millis(T0);
    let db = open_mem(&env, options(0)).unwrap();
    fill(&db);
    let before = db.stats().live_sst_bytes;
    env.set_unix_millis(T0 + 61_000);
    db.put(b"wake", b"up").unwrap();
    db.flush().unwrap();
    assert_eq!(expiry_compactions(&db), 0);
    assert!(db.stats().live_sst_bytes >= before);
    // Reads hide expired entries either way; compact() still drops them.
    assert!(db.get(&key(0)).unwrap().is_none());
    db.compact_range(None, None).unwrap();
    assert!(db.stats().live_sst_bytes < before);
}

#[test]
fn the_option_is_set_by_name() {
    let mut o = Options::default();
    o.set("expiry_compaction_interval_ms", "0").unwrap();
    assert_eq!(o.expiry_compaction_interval_ms, 0);
    let e = o.set("expiry_compaction_interval_ms", "soon").unwrap_err();
    assert!(
        e.to_string().contains("expiry_compaction_interval_ms"),
        "{e}"
    );
}
