//! The `prefetcher` option on the simulated SSD: `off` prefetches nothing, `fixed` one hint per
//! value, `tinfetch` hints from the first read, merges values written next to each other into
//! few reads, learns how far scans go, feeds unhinted value reads to the block prefetcher, and
//! every setting returns the same data. Model files that are missing, damaged or of another kind
//! fail the open, naming the file.

#![allow(clippy::unwrap_used)]

use attune_io::ssd::SsdParams;
use attune_kv::env::{DeviceEnv, DeviceLayout, MemEnv};
use attune_kv::{Error, Options, PrefetchSwitches, Prefetcher, ReadOptions, DB};
use std::path::Path;
use std::sync::Arc;

const N: u64 = 2000;

fn opts(p: Prefetcher) -> Options {
    Options {
        write_buffer_size: 1 << 20,
        wal_sync_interval_ms: 0,
        block_cache_size: 1 << 20,
        prefetcher: p,
        ..Options::default()
    }
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = vec![b'v'; 4096];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// A database of N 4 KiB values written in key order (the value log follows the keys).
fn loaded() -> Arc<DeviceEnv> {
    let env = Arc::new(
        DeviceEnv::new(
            Arc::new(MemEnv::new()),
            SsdParams::default(),
            5,
            DeviceLayout::default(),
        )
        .unwrap(),
    );
    let db = DB::open_with_env(env.clone(), Path::new("/db"), opts(Prefetcher::Off)).unwrap();
    for i in 0..N {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    // Settled: a compaction left for the next open would read (and prefetch) beside the
    // measured scans, at a moment the scheduler picks.
    db.compact_range(None, None).unwrap();
    db.close().unwrap();
    env
}

/// 40 scans of 30 values each from spread-out starts; checks every value.
fn scans(db: &DB) {
    for s in 0..40u64 {
        let start = (s * 37) % (N - 40);
        let mut it = db.iter(&ReadOptions::default()).unwrap();
        it.seek(&key(start));
        for j in 0..30 {
            assert!(it.valid());
            assert_eq!(it.key(), key(start + j));
            assert_eq!(it.value(), &value(start + j)[..]);
            it.next();
        }
        it.status().unwrap();
    }
}

fn run(p: Prefetcher, switches: PrefetchSwitches) -> (attune_kv::env::DeviceStats, DB) {
    let env = loaded();
    let o = Options {
        prefetch_switches: switches,
        ..opts(p)
    };
    let db = DB::open_with_env(env.clone(), Path::new("/db"), o).unwrap();
    let before = env.stats();
    scans(&db);
    let s = env.stats();
    let d = attune_kv::env::DeviceStats {
        prefetches: s.prefetches - before.prefetches,
        prefetch_bytes: s.prefetch_bytes - before.prefetch_bytes,
        prefetch_hits: s.prefetch_hits - before.prefetch_hits,
        prefetch_used_bytes: s.prefetch_used_bytes - before.prefetch_used_bytes,
        reads: s.reads - before.reads,
        clock_ns: s.clock_ns - before.clock_ns,
        ..s
    };
    (d, db)
}

#[test]
fn off_fixed_and_tinfetch_return_the_same_data_and_prefetch_as_they_say() {
    let (off, db) = run(Prefetcher::Off, PrefetchSwitches::default());
    assert_eq!(off.prefetches, 0);
    assert_eq!(db.stats().prefetch, Default::default());
    let (fixed, _) = run(Prefetcher::Fixed, PrefetchSwitches::default());
    // One hint per value (each value spans two 4 KiB blocks, the second often shared).
    assert!(
        fixed.prefetches > 600 && fixed.prefetch_hits > 600,
        "{fixed:?}"
    );
    let (tin, db) = run(Prefetcher::TinFetch, PrefetchSwitches::default());
    let pf = db.stats().prefetch;
    // Values next to each other are merged: far fewer reads than values hinted.
    assert!(pf.hint_values > 900, "{pf:?}");
    assert!(pf.hint_reads * 4 < pf.hint_values, "{pf:?}");
    assert!(tin.prefetches * 4 < fixed.prefetches, "{tin:?} {fixed:?}");
    // Hints start at the first read once the history knows scans go on, in few large reads:
    // the scans take less device time than with the fixed rule.
    assert!(tin.clock_ns < fixed.clock_ns, "{tin:?} {fixed:?}");
    assert!(fixed.clock_ns < off.clock_ns, "{fixed:?} {off:?}");
    // The accounting agrees with the device's: hinted bytes used never exceed those read.
    assert!(pf.hint_used_bytes <= pf.hint_bytes, "{pf:?}");
    assert!(tin.prefetch_used_bytes <= tin.prefetch_bytes, "{tin:?}");
    // Without merging: one read per hinted value, same data.
    let no_merge = PrefetchSwitches {
        merge: false,
        ..PrefetchSwitches::default()
    };
    let (_, db) = run(Prefetcher::TinFetch, no_merge);
    let pf = db.stats().prefetch;
    assert!(pf.hint_reads * 2 > pf.hint_values, "{pf:?}");
}

#[test]
fn point_reads_in_key_order_feed_the_block_prefetcher() {
    let env = loaded();
    let db = DB::open_with_env(env.clone(), Path::new("/db"), opts(Prefetcher::TinFetch)).unwrap();
    for i in 100..400 {
        assert_eq!(db.get(&key(i)).unwrap().unwrap(), value(i));
    }
    let pf = db.stats().prefetch;
    // No scan: no hints; the gets continue each other in the value log: readahead.
    assert_eq!(pf.hint_values, 0, "{pf:?}");
    assert!(pf.block_stream_reads >= 290, "{pf:?}");
    assert!(pf.block_reads > 0 && pf.block_used_bytes > 0, "{pf:?}");
    assert!(env.stats().prefetch_hits > 200, "{:?}", env.stats());
    drop(db);
    // With the block prefetcher off, the same gets prefetch nothing.
    let o = Options {
        prefetch_switches: PrefetchSwitches {
            block_streams: false,
            ..PrefetchSwitches::default()
        },
        ..opts(Prefetcher::TinFetch)
    };
    let db = DB::open_with_env(env.clone(), Path::new("/db"), o).unwrap();
    for i in 500..600 {
        assert_eq!(db.get(&key(i)).unwrap().unwrap(), value(i));
    }
    let pf = db.stats().prefetch;
    assert_eq!((pf.block_stream_reads, pf.block_reads), (0, 0), "{pf:?}");
}

#[test]
fn model_files_that_are_missing_damaged_or_misplaced_fail_the_open() {
    let env = loaded();
    let open = |o: Options| DB::open_with_env(env.clone(), Path::new("/db"), o).err();
    let dir = std::env::temp_dir().join(format!("attune-prefetcher-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.bin");
    let e = open(Options {
        prefetch_model: missing.to_str().unwrap().into(),
        ..opts(Prefetcher::TinFetch)
    })
    .unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("missing.bin"), "{e}");
    let damaged = dir.join("damaged.bin");
    std::fs::write(&damaged, [0u8; 64]).unwrap();
    let e = open(Options {
        prefetch_model: damaged.to_str().unwrap().into(),
        ..opts(Prefetcher::TinFetch)
    })
    .unwrap();
    assert!(matches!(e, Error::Corruption { .. }), "{e}");
    assert!(e.to_string().contains("damaged.bin"), "{e}");
    // A model with another prefetcher is a mistake the caller hears about.
    let e = open(Options {
        prefetch_model: damaged.to_str().unwrap().into(),
        ..opts(Prefetcher::Fixed)
    })
    .unwrap();
    assert!(e.to_string().contains("prefetcher=tinfetch"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
    // The string forms.
    let mut o = Options::default();
    o.set("prefetcher", "tinfetch").unwrap();
    assert_eq!(o.prefetcher, Prefetcher::TinFetch);
    let e = o.set("prefetcher", "sometimes").err().unwrap();
    assert!(e.to_string().contains("off, fixed, tinfetch"), "{e}");
}

/// Pairs of gets that continue each other and then jump far: each pair starts the block
/// prefetcher's readahead, and what it reads is never used.
fn pairs_then_jumps(db: &DB) {
    for round in 0..6u64 {
        let mut i = round * 11;
        while i + 1 < N {
            assert_eq!(db.get(&key(i)).unwrap().unwrap(), value(i));
            assert_eq!(db.get(&key(i + 1)).unwrap().unwrap(), value(i + 1));
            i += 97;
        }
    }
}

#[test]
fn block_throttle_pauses_readahead_that_goes_unused() {
    let env = loaded();
    let db = DB::open_with_env(env.clone(), Path::new("/db"), opts(Prefetcher::TinFetch)).unwrap();
    pairs_then_jumps(&db);
    let on = db.stats().prefetch;
    drop(db);
    let o = Options {
        prefetch_switches: PrefetchSwitches {
            block_throttle: false,
            ..PrefetchSwitches::default()
        },
        ..opts(Prefetcher::TinFetch)
    };
    let db = DB::open_with_env(env.clone(), Path::new("/db"), o).unwrap();
    pairs_then_jumps(&db);
    let off = db.stats().prefetch;
    assert!(on.block_paused > 0, "{on:?}");
    assert_eq!(off.block_paused, 0, "{off:?}");
    assert!(on.block_bytes * 3 < off.block_bytes * 2, "{on:?} {off:?}");
    // Nothing that was worth reading is lost: readahead was (nearly) never used here.
    assert!(off.block_used_bytes * 4 < off.block_bytes, "{off:?}");
}
