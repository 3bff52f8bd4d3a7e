//! Adaptive cache sizing (issue 7) through the whole engine: the budget split stays exact while
//! readers run, the controller adapts to the analytically best split, and reads report which
//! tier served them. Deterministic: MemEnv's user layout knows every tier exactly, and the tests
//! pump the controller themselves after the reads (the background thread feeds the same log in
//! the same order).

#![allow(clippy::unwrap_used)]

use attune_kv::env::{Env, MemEnv};
use attune_kv::{Options, DB};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;

const SEED: u64 = 0x5eed_0007;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// About 2:1 compressible with LZ4, different per key.
fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-of-{i:08}-").repeat(30).into_bytes();
    v.truncate(400);
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for b in v.iter_mut().skip(200) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    v
}

fn open(env: &Arc<MemEnv>, opts: &[(&str, &str)]) -> DB {
    let mut o = Options::default();
    for (k, v) in [
        ("memory_budget", "8MiB"),
        ("enable_blob_files", "false"),
        ("cache_miss_costs", "3000:16000"),
        ("cache_sample_inv", "1"),
        ("wal_sync_interval_ms", "0"),
    ]
    .iter()
    .chain(opts)
    {
        o.set(k, v).unwrap();
    }
    let env: Arc<dyn Env> = env.clone();
    DB::open_with_env(env, Path::new("/db"), o).unwrap()
}

fn load(db: &DB, n: u64) {
    for i in 0..n {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.compact_range(None, None).unwrap();
}

#[test]
fn user_layout_split_stays_exact_while_resized_under_concurrent_readers() {
    println!("seed {SEED:#x}");
    let env = Arc::new(MemEnv::new());
    let db = Arc::new(open(
        &env,
        &[("cache_layout", "user"), ("cache_sizing", "2MiB")],
    ));
    let n = 6000;
    load(&db, n);
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(SEED + t);
                for _ in 0..20_000 {
                    let i = rng.gen_range(0..n);
                    assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
                }
            })
        })
        .collect();
    let c = db.cache_sizing().unwrap().clone();
    let budget = c.budget_bytes();
    for step in 0..200u64 {
        c.resize((step * 7919 * 4096) % budget);
        let s = db.stats();
        let t = s.cache_tiers.unwrap();
        let cc = t.compressed.unwrap();
        assert_eq!(
            s.block_cache.capacity_bytes + cc.capacity_bytes,
            budget,
            "step {step}"
        );
        assert!(s.block_cache.usage_bytes <= s.block_cache.capacity_bytes);
        assert!(cc.usage_bytes <= cc.capacity_bytes);
    }
    for r in readers {
        r.join().unwrap();
    }
    // Then a fixed split where all compressed blocks fit the second tier but not the first:
    // the second sequential pass is served by the compressed cache.
    c.resize(1 << 20);
    for _ in 0..2 {
        for i in 0..n {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
        }
    }
    c.pump();
    let t = db.stats().cache_tiers.unwrap();
    assert_eq!(
        t.unknown_reads, 0,
        "the user layout knows every tier: {t:?}"
    );
    assert!(t.second_hits > 0 && t.device_reads > 0, "{t:?}");
    assert_eq!(t.sizing, "2097152");
    assert_eq!(t.rounds, 0, "a static split never simulates");
}

#[test]
fn adaptive_user_layout_grows_the_block_cache_until_all_data_fits_uncompressed() {
    // ~2.4 MB of raw blocks, cache budget 4 MiB: once every block fits in the uncompressed cache
    // L_e = 0, so the analytic optimum is any M_a >= D_u; the controller must leave the minimum
    // and adopt a candidate at or above the point where the miss-ratio curve reaches 0.
    println!("seed {SEED:#x}");
    let env = Arc::new(MemEnv::new());
    let db = open(&env, &[("cache_layout", "user")]);
    let n = 6000;
    load(&db, n);
    let c = db.cache_sizing().unwrap().clone();
    let start = db.stats().cache_tiers.unwrap();
    assert_eq!(start.app_bytes, 1 << 20, "starts at the minimum");
    let mut rng = StdRng::seed_from_u64(SEED);
    for round in 0..40 {
        for _ in 0..10_000 {
            let i = rng.gen_range(0..n);
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
        }
        c.pump();
        if db.stats().cache_tiers.unwrap().adoptions > 0 && round > 30 {
            break;
        }
    }
    let t = db.stats().cache_tiers.unwrap();
    assert!(t.adoptions >= 1, "{t:?}");
    let fits = t.mrc.iter().find(|p| p.1 == 0.0).unwrap().0;
    assert!(
        fits > 1 << 20 && t.app_bytes >= fits,
        "fits at {fits}: {t:?}"
    );
    assert_eq!(t.le_predicted_ns, Some(0.0), "{t:?}");
    assert!(t.timeline.last().unwrap().h_a > 0.9, "{t:?}");
    let cc = t.compressed.unwrap();
    assert_eq!(t.app_bytes + cc.capacity_bytes, t.budget_bytes);
}

#[test]
fn kernel_layout_on_real_files_probes_the_page_cache_for_every_miss() {
    let dir = tempfile::tempdir().unwrap();
    for mmap in ["true", "false"] {
        let mut o = Options::default();
        for (k, v) in [
            ("memory_budget", "8MiB"),
            ("enable_blob_files", "false"),
            ("cache_miss_costs", "3000:16000"),
            ("cache_sizing", "1MiB"),
            ("mmap_reads", mmap),
        ] {
            o.set(k, v).unwrap();
        }
        let path = dir.path().join(mmap);
        let db = DB::open(&path, o).unwrap();
        load(&db, 6000);
        for i in 0..6000 {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)));
        }
        let c = db.cache_sizing().unwrap().clone();
        c.pump();
        let t = db.stats().cache_tiers.unwrap();
        let reads = t.app_hits + t.second_hits + t.device_reads + t.unknown_reads;
        assert_eq!(reads, t.accesses_recorded + t.accesses_dropped, "{t:?}");
        assert!(reads >= 6000, "{t:?}");
        if mmap == "true" {
            // mincore always answers on a mapping.
            assert_eq!(t.unknown_reads, 0, "{t:?}");
        }
        assert_eq!(t.layout, "kernel");
    }
}
