//! The S3-FIFO block cache (`block_cache_policy=s3fifo`) through the whole engine: a
//! randomized history of puts, overwrites and deletes with flushes and compactions (which erase
//! the files they replace from the cache), read back through a block cache far smaller than the
//! data, must answer every get exactly as a model map does, under both policies. Seeded: the
//! seed is printed, and `ATTUNE_TEST_SEED=<n>` replays one.

#![allow(clippy::unwrap_used)]

use attune_kv::env::{Env, MemEnv};
use attune_kv::{Options, DB};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn seed() -> u64 {
    std::env::var("ATTUNE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random)
}

fn open(policy: &str) -> DB {
    let mut o = Options::default();
    for (k, v) in [
        ("block_cache_policy", policy),
        ("block_cache_size", "64KiB"),
        ("write_buffer_size", "64KiB"),
        ("enable_blob_files", "false"),
        ("wal_sync_interval_ms", "0"),
    ] {
        o.set(k, v).unwrap();
    }
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    DB::open_with_env(env, Path::new("/db"), o).unwrap()
}

fn history(policy: &str, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let db = open(policy);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let keys = 4000u64;
    for step in 0..30_000u64 {
        let k = format!("key{:06}", rng.gen_range(0..keys)).into_bytes();
        match rng.gen_range(0..100) {
            0..=54 => {
                let len = rng.gen_range(1..300);
                let v: Vec<u8> = (0..len).map(|i| (step as u8) ^ (i as u8)).collect();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            55..=59 => {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            _ => assert_eq!(
                db.get(&k).unwrap(),
                model.get(&k).cloned(),
                "policy {policy} seed {seed} step {step}"
            ),
        }
        if step % 7000 == 6999 {
            db.compact_range(None, None).unwrap();
        }
    }
    // Every key, twice (the second pass reads through a warm cache).
    for _ in 0..2 {
        for i in 0..keys {
            let k = format!("key{i:06}").into_bytes();
            assert_eq!(
                db.get(&k).unwrap(),
                model.get(&k).cloned(),
                "policy {policy} seed {seed}"
            );
        }
    }
    let s = db.stats();
    let c = s.block_cache;
    assert!(c.usage_bytes <= c.capacity_bytes, "{c:?}");
    assert!(c.hits > 0 && c.misses > 0 && c.evictions > 0, "{c:?}");
    assert_eq!(db.options().block_cache_policy.name(), policy);
}

#[test]
fn s3fifo_block_cache_answers_every_get_like_the_model() {
    let seed = seed();
    println!("seed {seed}");
    history("s3fifo", seed);
}

#[test]
fn lru_block_cache_answers_the_same_history() {
    let seed = seed();
    println!("seed {seed}");
    history("lru", seed);
}

#[test]
fn s3fifo_with_adaptive_sizing_is_refused_with_a_clear_error() {
    let mut o = Options::default();
    o.set("block_cache_policy", "s3fifo").unwrap();
    o.set("memory_budget", "16MiB").unwrap();
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let e = DB::open_with_env(env.clone(), Path::new("/db"), o.clone())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("block_cache_policy") && e.contains("cache_sizing"),
        "{e}"
    );
    // A static split with a budget works: S3-FIFO sits in front of the second tier.
    o.set("cache_sizing", "4MiB").unwrap();
    let db = DB::open_with_env(env, Path::new("/db"), o).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}
