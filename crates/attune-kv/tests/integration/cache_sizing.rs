//! Adaptive cache sizing through the whole engine: the budget split stays exact while
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

/// Upper bound of one cached block's charge here: the default 4 KiB blocks (a block may run
/// past its target by one 400-byte record) plus the entry's bookkeeping.
const BLOCK_CHARGE_MAX: u64 = 8 << 10;

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
        // Each reader may be between adding a block's charge and evicting for it (the caches'
        // invariant holds once the calls in flight return, checked exactly after the join
        // below): one block per reader.
        let in_flight = 2 * BLOCK_CHARGE_MAX;
        assert!(
            s.block_cache.usage_bytes <= s.block_cache.capacity_bytes + in_flight,
            "step {step}: block cache {} > {}",
            s.block_cache.usage_bytes,
            s.block_cache.capacity_bytes
        );
        assert!(
            cc.usage_bytes <= cc.capacity_bytes + in_flight,
            "step {step}: compressed cache {} > {}",
            cc.usage_bytes,
            cc.capacity_bytes
        );
    }
    for r in readers {
        r.join().unwrap();
    }
    // With no call in flight the invariant is exact.
    let s = db.stats();
    assert!(s.block_cache.usage_bytes <= s.block_cache.capacity_bytes);
    let cc = s.cache_tiers.unwrap().compressed.unwrap();
    assert!(cc.usage_bytes <= cc.capacity_bytes);
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

/// About 3.5:1 compressible with Zstd (three quarters text), different per key.
fn value_z(i: u64) -> Vec<u8> {
    let mut v = format!("field-{i:08}-abcdefgh;").repeat(24).into_bytes();
    v.truncate(400);
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for b in v.iter_mut().skip(300) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    v
}

#[test]
fn adaptive_user_layout_moves_from_the_minimum_to_the_analytic_interior_optimum() {
    // Uniform reads over D_u ≈ 1.6·M uncompressed that compress to under half of M. With the
    // inclusive compressed tier an LRU under uniform access holds a share min(1, C / D) of the
    // data, so L_e(M_a) = (1 − min(1, M_a/D_u))·(C_a + (1 − min(1, (M − M_a)/D_c))·C_k), D_u and
    // D_c measured as the two caches charge them. With C_k = 16·C_a the minimum wastes memory
    // on a compressed tier that already holds everything, M_a = M leaves no compressed tier and
    // pays device reads: the optimum is the largest candidate whose remainder still holds D_c.
    println!("seed {SEED:#x}");
    let env = Arc::new(MemEnv::new());
    let n = 30_000;
    let zstd = [("compression", "zstd"), ("cache_layout", "user")];
    let (d_u, d_c) = {
        // Charges of every block in each cache: one big static split that holds all of both.
        let mut o = zstd.to_vec();
        o.extend([("memory_budget", "128MiB"), ("cache_sizing", "32MiB")]);
        let db = open(&env, &o);
        for i in 0..n {
            db.put(&key(i), &value_z(i)).unwrap();
        }
        db.compact_range(None, None).unwrap();
        for i in 0..n {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value_z(i)));
        }
        let s = db.stats();
        let t = s.cache_tiers.unwrap();
        assert_eq!(
            t.compressed.as_ref().unwrap().evictions,
            0,
            "all of D_c fits: {t:?}"
        );
        assert!(
            s.block_cache.usage_bytes < 32 << 20,
            "all of D_u fits: {t:?}"
        );
        (s.block_cache.usage_bytes, t.compressed.unwrap().usage_bytes)
    };
    let mut o = zstd.to_vec();
    o.extend([
        ("memory_budget", "16MiB"),
        ("cache_miss_costs", "1000:16000"),
    ]);
    let db = open(&env, &o);
    let c = db.cache_sizing().unwrap().clone();
    let start = db.stats().cache_tiers.unwrap();
    let m = start.budget_bytes;
    assert_eq!(m, 8 << 20, "16 MiB budget: two 4 MiB memtables, M = 8 MiB");
    assert_eq!(start.app_bytes, 1 << 20, "starts at the minimum");
    println!("M {m}, D_u {d_u}, D_c {d_c}");
    let le = |m_a: u64| {
        let h_a = (m_a as f64 / d_u as f64).min(1.0);
        let h_k = ((m - m_a) as f64 / d_c as f64).min(1.0);
        (1.0 - h_a) * (1000.0 + (1.0 - h_k) * 16000.0)
    };
    let mut cands: Vec<(u64, f64)> = (1..=8).map(|i| (i * m / 8, le(i * m / 8))).collect();
    cands.sort_by(|a, b| a.1.total_cmp(&b.1));
    let best = cands[0].0;
    println!("analytic L_e per candidate (best first): {cands:?}");
    assert!(
        best > 1 << 20 && best < m,
        "the data must make the optimum interior: {cands:?}"
    );
    assert!(cands[1].1 > 1.05 * cands[0].1, "a clear optimum: {cands:?}");
    let mut rng = StdRng::seed_from_u64(SEED);
    for _ in 0..60 {
        for _ in 0..10_000 {
            let i = rng.gen_range(0..n);
            assert_eq!(db.get(&key(i)).unwrap(), Some(value_z(i)));
        }
        c.pump();
        let t = db.stats().cache_tiers.unwrap();
        if t.rounds >= 1 && t.state == "stable" {
            break;
        }
    }
    let t = db.stats().cache_tiers.unwrap();
    assert!(t.rounds >= 1 && t.adoptions >= 1, "{t:?}");
    assert_eq!(
        t.app_bytes, best,
        "adopted the analytic optimum: {:?}",
        t.last_round
    );
    let cc = t.compressed.unwrap();
    assert_eq!(t.app_bytes + cc.capacity_bytes, m);
    // At the optimum every application miss is served by the compressed tier.
    let w = t.timeline.last().unwrap();
    assert!(w.h_k > 0.99, "{w:?}");
}
