//! Point-lookup probe for profiling the read path: loads `N` keys (db_bench's 16-byte keys,
//! 100-byte values) into a fully compacted database, then times random gets with learned
//! indexes off and on, alternating, in one process.
//!
//! `cargo run --release -p attune-kv --example lookup_probe -- DIR [N] [GETS] [ROUNDS]`
//! (`PROBE_MODE=off` or `always` runs one mode only, e.g. under `perf record`)

#![allow(clippy::unwrap_used)]

use attune_kv::LearnedIndex;
use attune_kv::{Compression, Options, DB};
use std::time::Instant;

fn key(i: u64) -> Vec<u8> {
    let mut k = i.to_be_bytes().to_vec();
    k.resize(16, b'0');
    k
}

fn opts(mode: LearnedIndex) -> Options {
    Options {
        learned_index: mode,
        learned_wait_ms: 3_600_000,
        compression: Compression::None,
        block_cache_size: 2 << 30,
        ..Options::default()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(&args[1]);
    let n: u64 = args.get(2).map_or(2_000_000, |s| s.parse().unwrap());
    let gets: u64 = args.get(3).map_or(2_000_000, |s| s.parse().unwrap());
    let rounds: usize = args.get(4).map_or(3, |s| s.parse().unwrap());
    if !dir.join("CURRENT").exists() {
        let db = DB::open(&dir, opts(LearnedIndex::Always)).unwrap();
        let v = vec![b'x'; 100];
        let mut x = 1u64;
        for _ in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            db.put(&key((x >> 11) % n), &v).unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        db.learn_all().unwrap();
        db.close().unwrap();
    }
    for round in 0..rounds {
        let only = std::env::var("PROBE_MODE").ok();
        for mode in [LearnedIndex::Off, LearnedIndex::Always] {
            if only.as_deref().is_some_and(|m| m != mode.name()) {
                continue;
            }
            let db = DB::open(&dir, opts(mode)).unwrap();
            let mut x = 7u64 + round as u64;
            // Warm the block cache.
            for i in 0..n {
                let _ = db.get(&key(i)).unwrap();
            }
            let t = Instant::now();
            let c0 = attune_kv::env::thread_cpu_ns();
            let mut found = 0u64;
            for _ in 0..gets {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                found += u64::from(db.get(&key((x >> 11) % n)).unwrap().is_some());
            }
            let ns = t.elapsed().as_nanos() as f64 / gets as f64;
            let cpu = (attune_kv::env::thread_cpu_ns() - c0) as f64 / gets as f64;
            let st = db.stats();
            println!(
                "round {round} {:8} {ns:7.1} ns/get ({cpu:7.1} CPU ns) found {found} model lookups {}/{} files {:?} model bytes {}",
                mode.name(),
                st.learned.learned_lookups,
                st.learned.total_lookups,
                st.level_files,
                st.model_bytes
            );
        }
    }
}
