//! Scenario tests of the hot-key cache (`hot_key_cache_bytes`, src/cache/hotkeys.rs) through the
//! database: a randomized model test with the cache on (skewed keys so that it serves many
//! reads; puts, deletes, batches, snapshot reads, flushes, value-log garbage collection and
//! reopens, every answer compared with a map), a concurrent reader/writer test that no read
//! returns a value older than the last acknowledged write, and the snapshot, reopen and GC
//! rules one by one.
//!
//! Replay one seed of the model test with `ATTUNE_SEED=<seed> cargo test --release --test
//! hot_key_cache`.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem;
use attune_kv::env::{Env, MemEnv};
use attune_kv::{Options, ReadOptions, WriteBatch, WriteOptions, DB};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn open(env: &MemEnv, opts: &Options) -> DB {
    open_mem(env, opts.clone()).unwrap()
}

fn cache_options(bytes: u64) -> Options {
    Options {
        hot_key_cache_bytes: bytes,
        write_buffer_size: 16 << 10,
        target_file_size: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        wal_sync_interval_ms: 0,
        min_blob_size: 64,
        blob_file_size: 8 << 10,
        ..Options::default()
    }
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    // 80% of the operations go to 8 hot keys, the rest to 400 others.
    let k = if rng.gen_bool(0.8) {
        rng.gen_range(0..8)
    } else {
        rng.gen_range(8..408)
    };
    format!("key{k:04}").into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let n = [1usize, 10, 100, 300][rng.gen_range(0..4)];
    let b = rng.gen::<u8>();
    vec![b; n]
}

/// Returns the cache hits of the run.
fn run_seed(seed: u64, ops: usize) -> u64 {
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let env = MemEnv::new();
    let opts = cache_options([16 << 10, 64 << 10, 1 << 20][rng.gen_range(0..3)]);
    let mut db = open(&env, &opts);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut snaps = Vec::new();
    let mut hits = 0;
    for step in 0..ops {
        match rng.gen_range(0..100) {
            0..=54 => {
                let k = key(&mut rng);
                let got = db.get(&k).unwrap();
                assert_eq!(
                    got.as_ref(),
                    model.get(&k),
                    "seed {seed} step {step} get {k:?}"
                );
            }
            55..=74 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            75..=82 => {
                let k = key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            83..=89 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..6) {
                    let k = key(&mut rng);
                    if rng.gen_bool(0.7) {
                        let v = value(&mut rng);
                        b.put(&k, &v).unwrap();
                        model.insert(k, v);
                    } else {
                        b.delete(&k).unwrap();
                        model.remove(&k);
                    }
                }
                db.write(b, WriteOptions::default()).unwrap();
            }
            90..=93 => {
                if snaps.len() < 4 {
                    snaps.push((db.snapshot().unwrap(), model.clone()));
                } else {
                    let (s, m) = snaps.swap_remove(rng.gen_range(0..snaps.len()));
                    let ro = ReadOptions {
                        snapshot: Some(s.sequence()),
                        ..ReadOptions::default()
                    };
                    for _ in 0..20 {
                        let k = key(&mut rng);
                        let got = db.get_opt(&k, &ro).unwrap();
                        assert_eq!(got.as_ref(), m.get(&k), "seed {seed} step {step} snapshot");
                    }
                }
            }
            94..=95 => db.flush().unwrap(),
            96..=97 => {
                db.gc_with_ratio(0.0).unwrap();
            }
            _ => {
                snaps.clear();
                hits += db.stats().hot_key_cache.hits;
                db.close().unwrap();
                db = open(&env, &opts);
                assert_eq!(
                    db.stats().hot_key_cache.entries,
                    0,
                    "a reopened cache is empty"
                );
            }
        }
    }
    for (k, v) in &model {
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            Some(v),
            "seed {seed} final {k:?}"
        );
    }
    let s = db.stats().hot_key_cache;
    assert!(s.bytes <= s.capacity_bytes, "seed {seed}: {s:?}");
    snaps.clear();
    db.close().unwrap();
    hits + s.hits
}

#[test]
fn random_operations_with_the_cache_on_agree_with_a_map() {
    if let Ok(s) = std::env::var("ATTUNE_SEED") {
        run_seed(s.parse().expect("ATTUNE_SEED must be a number"), 20_000);
        return;
    }
    let hits: u64 = (1..=6).map(|seed| run_seed(seed, 4_000)).sum();
    // The scenario is only a test of the cache if the cache served reads.
    assert!(hits > 1000, "the cache served only {hits} reads");
}

#[test]
fn concurrent_readers_never_see_a_value_older_than_the_last_acknowledged_write() {
    let env = MemEnv::new();
    let db = Arc::new(open(&env, &cache_options(256 << 10)));
    const KEYS: u64 = 4;
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    for k in 0..KEYS {
        db.put(&k.to_be_bytes(), &0u64.to_be_bytes()).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3u64)
        .map(|r| {
            let (db, acked, done) = (db.clone(), acked.clone(), done.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                let mut k = r;
                while !done.load(Ordering::Acquire) || reads < 1000 {
                    k = (k + 1) % KEYS;
                    let floor = acked[k as usize].load(Ordering::Acquire);
                    let v = db.get(&k.to_be_bytes()).unwrap().unwrap();
                    let got = u64::from_be_bytes(v.try_into().unwrap());
                    assert!(
                        got >= floor,
                        "key {k}: read {got} after {floor} was acknowledged"
                    );
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for i in 1..=20_000u64 {
        let k = i % KEYS;
        if i % 50 == 0 {
            // A batch touching every key, and a flush now and then.
            let mut b = WriteBatch::new();
            for kk in 0..KEYS {
                b.put(&kk.to_be_bytes(), &i.to_be_bytes()).unwrap();
            }
            db.write(b, WriteOptions::default()).unwrap();
            for a in acked.iter() {
                a.store(i, Ordering::Release);
            }
        } else {
            db.put(&k.to_be_bytes(), &i.to_be_bytes()).unwrap();
            acked[k as usize].store(i, Ordering::Release);
        }
        if i % 5000 == 0 {
            db.flush().unwrap();
        }
    }
    done.store(true, Ordering::Release);
    let reads: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    let s = db.stats().hot_key_cache;
    println!("reads {reads}, cache {s:?}");
    assert!(s.hits > 0, "the cache never served a read: {s:?}");
}

fn warm(db: &DB, k: &[u8]) {
    for _ in 0..3 {
        db.get(k).unwrap();
    }
}

#[test]
fn a_snapshot_read_bypasses_the_cache() {
    let env = MemEnv::new();
    let db = open(&env, &cache_options(1 << 20));
    db.put(b"k", b"v1").unwrap();
    warm(&db, b"k");
    assert!(db.stats().hot_key_cache.hits >= 1);
    let snap = db.snapshot().unwrap();
    db.put(b"k", b"v2").unwrap();
    warm(&db, b"k");
    let before = db.stats().hot_key_cache;
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..ReadOptions::default()
    };
    assert_eq!(db.get_opt(b"k", &ro).unwrap(), Some(b"v1".to_vec()));
    let after = db.stats().hot_key_cache;
    assert_eq!((before.hits, before.misses), (after.hits, after.misses));
    assert_eq!(db.get(b"k").unwrap(), Some(b"v2".to_vec()));
}

#[test]
fn put_and_delete_replace_a_cached_value_at_once() {
    let env = MemEnv::new();
    let db = open(&env, &cache_options(1 << 20));
    db.put(b"k", b"v1").unwrap();
    warm(&db, b"k");
    assert_eq!(db.stats().hot_key_cache.entries, 1);
    db.put(b"k", b"v2").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v2".to_vec()));
    warm(&db, b"k");
    db.delete(b"k").unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    let mut b = WriteBatch::new();
    b.put(b"k", b"v3").unwrap();
    db.write(b, WriteOptions::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v3".to_vec()));
    assert!(db.stats().hot_key_cache.invalidations >= 2);
}

#[test]
fn a_reopened_database_serves_the_latest_value() {
    let env = MemEnv::new();
    let opts = cache_options(1 << 20);
    let db = open(&env, &opts);
    db.put(b"k", b"v1").unwrap();
    warm(&db, b"k");
    db.put(b"k", b"v2").unwrap();
    db.close().unwrap();
    let db = open(&env, &opts);
    assert_eq!(db.stats().hot_key_cache.entries, 0);
    assert_eq!(db.get(b"k").unwrap(), Some(b"v2".to_vec()));
    db.close().unwrap();
}

#[test]
fn garbage_collection_keeps_cached_blob_values_correct() {
    let env = MemEnv::new();
    let db = open(&env, &cache_options(1 << 20));
    let big = |i: u32| vec![(i % 251) as u8; 200];
    for round in 0..4u32 {
        for i in 0..100u32 {
            db.put(&i.to_be_bytes(), &big(i + round)).unwrap();
        }
        for i in 0..10u32 {
            warm(&db, &i.to_be_bytes());
        }
    }
    db.flush().unwrap();
    let report = db.gc_with_ratio(0.0).unwrap();
    println!("{report:?}");
    for i in 0..100u32 {
        assert_eq!(db.get(&i.to_be_bytes()).unwrap(), Some(big(i + 3)));
    }
    assert!(db.stats().hot_key_cache.hits > 0);
}

#[test]
fn too_small_a_cache_is_a_clear_error() {
    let env = MemEnv::new();
    let r = DB::open_with_env(
        Arc::new(env) as Arc<dyn Env>,
        Path::new("/db"),
        cache_options(1000),
    );
    match r {
        Err(attune_kv::Error::InvalidArgument(m)) => assert!(m.contains("hot_key_cache_bytes")),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("accepted a 1000-byte cache"),
    }
}
