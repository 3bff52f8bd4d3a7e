//! Model-based randomized test: long random sequences of put / delete / batch / get / iterate /
//! snapshot / flush / compact / reopen / crash run against the engine and an in-memory ordered map,
//! and every answer is compared. Small buffers force many flushes and compactions.
//!
//! Replay a failure with `ATTUNE_SEED=<seed> cargo test --release --test model`.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem;
use attune_kv::env::MemEnv;
use attune_kv::{Options, ReadOptions, WriteBatch, WriteOptions, DB};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Value-log segments collected across seeds (reported, and required to be non-zero).
static GC_SEGMENTS: AtomicU64 = AtomicU64::new(0);
/// Table lookups served by learned models across seeds (required to be non-zero).
static LEARNED_LOOKUPS: AtomicU64 = AtomicU64::new(0);
/// Level models built across seeds (required to be non-zero: lookups then go through them).
static LEVEL_MODELS: AtomicU64 = AtomicU64::new(0);

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[allow(clippy::field_reassign_with_default)] // one random choice per line reads best
fn small_options(rng: &mut StdRng) -> Options {
    let mut o = Options::default();
    o.write_buffer_size = rng.gen_range(4 << 10..64 << 10);
    o.block_size = [256, 1024, 4096][rng.gen_range(0..3)];
    o.target_file_size = rng.gen_range(8 << 10..64 << 10);
    o.max_bytes_for_level_base = rng.gen_range(32 << 10..256 << 10);
    o.l0_compaction_trigger = rng.gen_range(1..4);
    o.l0_slowdown_writes_trigger = 8;
    o.l0_stop_writes_trigger = 12;
    o.block_cache_size = [0, 64 << 10, 1 << 20][rng.gen_range(0..3)];
    o.compression = [
        attune_kv::Compression::None,
        attune_kv::Compression::Lz4,
        attune_kv::Compression::Zstd,
    ][rng.gen_range(0..3)];
    o.bloom_bits_per_key = [0, 10][rng.gen_range(0..2)];
    o.wal_sync_interval_ms = 0;
    // Value separation: every value, only large ones, or off; tiny segments so that they
    // rotate and garbage collection (automatic or not) runs often.
    o.enable_blob_files = rng.gen_bool(0.8);
    o.min_blob_size = [0, 64, 1024][rng.gen_range(0..3)];
    o.blob_file_size = rng.gen_range(4 << 10..64 << 10);
    o.blob_gc_space_amp = [0.0, 1.2, 2.0][rng.gen_range(0..3)];
    o.blob_gc_garbage_ratio = [0.0, 0.25, 0.5][rng.gen_range(0..3)];
    o.blob_prefetch_depth = [0, 2, 16][rng.gen_range(0..3)];
    // Learned indexes: off, analyzer, always or offline, often with no wait so the background
    // learner races with flushes and compactions; small error bounds make the windows tight;
    // level models (built by learn_all) half the time.
    o.learned_index = [
        attune_kv::LearnedIndex::Off,
        attune_kv::LearnedIndex::Analyzer,
        attune_kv::LearnedIndex::Always,
        attune_kv::LearnedIndex::Offline,
    ][rng.gen_range(0..4)];
    o.learned_level = rng.gen_bool(0.5);
    o.learned_wait_ms = [0, 0, 50][rng.gen_range(0..3)];
    o.learned_delta = [1, 2, 8, 32][rng.gen_range(0..4)];
    o.learned_benefit = [
        attune_kv::LearnedBenefit::Remaining,
        attune_kv::LearnedBenefit::Lifetime,
    ][rng.gen_range(0..2)];
    // Intra-L0 merges on for two of the three block sizes: no extra draw, so each seed keeps
    // the operations it had before the option existed.
    o.l0_intra_compaction = o.block_size != 1024;
    o
}

fn random_key(rng: &mut StdRng, space: u64) -> Vec<u8> {
    let k = rng.gen_range(0..space);
    // Mix fixed-width and variable-length keys, including prefixes of each other.
    match k % 3 {
        0 => format!("k{k:06}").into_bytes(),
        1 => format!("k{k}").into_bytes(),
        _ => k.to_be_bytes().to_vec(),
    }
}

/// A range to delete: half the time between two random keys (often wide), half the time the
/// keys that start with one random key (narrow).
fn random_range(rng: &mut StdRng, space: u64) -> (Vec<u8>, Vec<u8>) {
    let a = random_key(rng, space);
    if rng.gen_bool(0.5) {
        let mut hi = a.clone();
        hi.push(0xff);
        return (a, hi);
    }
    let b = random_key(rng, space);
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

fn model_delete_range(m: &mut Model, lo: &[u8], hi: &[u8]) {
    let gone: Vec<Vec<u8>> = m
        .range(lo.to_vec()..hi.to_vec())
        .map(|(k, _)| k.clone())
        .collect();
    for k in gone {
        m.remove(&k);
    }
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let n = [0usize, 1, 10, 100, 1000, 5000][rng.gen_range(0..6)];
    (0..n).map(|_| rng.gen::<u8>() % 16).collect()
}

fn scan(
    db: &DB,
    ro: &ReadOptions,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    reverse: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ro).expect("open an iterator");
    it.set_bounds(lo.map(<[u8]>::to_vec), hi.map(<[u8]>::to_vec));
    let mut out = Vec::new();
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().expect("iterator error");
    out
}

fn model_scan(
    m: &Model,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    reverse: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<_> = m
        .iter()
        .filter(|(k, _)| {
            lo.is_none_or(|l| k.as_slice() >= l) && hi.is_none_or(|h| k.as_slice() < h)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if reverse {
        v.reverse();
    }
    v
}

fn run_seed(seed: u64, steps: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let env = MemEnv::new();
    let _dir = Path::new("/db");
    let opts = small_options(&mut rng);
    let open = |env: &MemEnv| open_mem(env, opts.clone());
    let mut db = open(&env).unwrap_or_else(|e| panic!("seed {seed}: open: {e}"));
    let mut model = Model::new();
    let mut snapshots: Vec<(attune_kv::Snapshot, Model)> = Vec::new();
    let space = rng.gen_range(20..2000);
    for step in 0..steps {
        let ctx = || format!("seed {seed} step {step}");
        let op = rng.gen_range(0..100);
        match op {
            0..=39 => {
                let (k, v) = (random_key(&mut rng, space), random_value(&mut rng));
                db.put(&k, &v)
                    .unwrap_or_else(|e| panic!("{}: put: {e}", ctx()));
                model.insert(k, v);
            }
            40..=46 => {
                let k = random_key(&mut rng, space);
                db.delete(&k)
                    .unwrap_or_else(|e| panic!("{}: delete: {e}", ctx()));
                model.remove(&k);
            }
            47..=49 => {
                let (lo, hi) = random_range(&mut rng, space);
                db.delete_range(&lo, &hi)
                    .unwrap_or_else(|e| panic!("{}: delete_range: {e}", ctx()));
                model_delete_range(&mut model, &lo, &hi);
            }
            50..=54 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = random_key(&mut rng, space);
                    if rng.gen_bool(0.7) {
                        let v = random_value(&mut rng);
                        b.put(&k, &v).unwrap();
                        model.insert(k, v);
                    } else if rng.gen_bool(0.1) {
                        let (lo, hi) = random_range(&mut rng, space);
                        b.delete_range(&lo, &hi).unwrap();
                        model_delete_range(&mut model, &lo, &hi);
                    } else {
                        b.delete(&k).unwrap();
                        model.remove(&k);
                    }
                }
                db.write(
                    b,
                    WriteOptions {
                        sync: rng.gen_bool(0.2),
                    },
                )
                .unwrap_or_else(|e| panic!("{}: batch: {e}", ctx()));
            }
            55..=74 => {
                let k = random_key(&mut rng, space);
                let got = db.get(&k).unwrap_or_else(|e| panic!("{}: get: {e}", ctx()));
                assert_eq!(got.as_ref(), model.get(&k), "{}: get {:?}", ctx(), k);
            }
            75..=81 => {
                let a = random_key(&mut rng, space);
                let b = random_key(&mut rng, space);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let lo = rng.gen_bool(0.8).then_some(lo);
                let hi = rng.gen_bool(0.8).then_some(hi);
                let reverse = rng.gen_bool(0.5);
                let got = scan(
                    &db,
                    &ReadOptions::default(),
                    lo.as_deref(),
                    hi.as_deref(),
                    reverse,
                );
                let want = model_scan(&model, lo.as_deref(), hi.as_deref(), reverse);
                if got != want {
                    let gk: Vec<String> = got
                        .iter()
                        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                        .collect();
                    let wk: Vec<String> = want
                        .iter()
                        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                        .collect();
                    panic!("{}: scan lo={lo:?} hi={hi:?} reverse={reverse}\n got keys {gk:?}\nwant keys {wk:?}", ctx());
                }
            }
            82..=84 => {
                // Mixed-direction walk from a seek point.
                let target = random_key(&mut rng, space);
                let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
                it.seek(&target);
                let keys: Vec<&Vec<u8>> = model.keys().collect();
                let mut pos = keys.partition_point(|k| k.as_slice() < target.as_slice()) as i64;
                for _ in 0..rng.gen_range(1..30) {
                    let expect = keys.get(pos as usize).filter(|_| pos >= 0);
                    assert_eq!(
                        it.valid(),
                        expect.is_some(),
                        "{}: walk validity at {pos} (status {:?})",
                        ctx(),
                        it.status()
                    );
                    let Some(k) = expect else { break };
                    assert_eq!(it.key(), k.as_slice(), "{}: walk key", ctx());
                    if rng.gen_bool(0.5) {
                        it.next();
                        pos += 1;
                    } else {
                        it.prev();
                        pos -= 1;
                    }
                }
            }
            85..=87 => {
                if snapshots.len() < 4 {
                    snapshots.push((db.snapshot().unwrap(), model.clone()));
                } else {
                    snapshots.remove(rng.gen_range(0..snapshots.len()));
                }
            }
            88..=90 => {
                if let Some((s, m)) = snapshots.get(rng.gen_range(0..snapshots.len().max(1))) {
                    let ro = ReadOptions {
                        snapshot: Some(s.sequence()),
                        ..Default::default()
                    };
                    let k = random_key(&mut rng, space);
                    assert_eq!(
                        db.get_opt(&k, &ro).unwrap().as_ref(),
                        m.get(&k),
                        "{}: snapshot get",
                        ctx()
                    );
                    assert_eq!(
                        scan(&db, &ro, None, None, false),
                        model_scan(m, None, None, false),
                        "{}: snapshot scan",
                        ctx()
                    );
                }
            }
            91 => {
                let ratio = [0.0, 0.3, 1.0][rng.gen_range(0..3)];
                db.gc_with_ratio(ratio)
                    .unwrap_or_else(|e| panic!("{}: gc: {e}", ctx()));
            }
            92..=93 => {
                db.flush()
                    .unwrap_or_else(|e| panic!("{}: flush: {e}", ctx()));
                if opts.learned_index != attune_kv::LearnedIndex::Off && rng.gen_bool(0.8) {
                    db.learn_all()
                        .unwrap_or_else(|e| panic!("{}: learn_all: {e}", ctx()));
                }
            }
            94..=95 => {
                let a = random_key(&mut rng, space);
                db.compact_range(None, Some(&a))
                    .unwrap_or_else(|e| panic!("{}: compact: {e}", ctx()));
                if opts.learned_index != attune_kv::LearnedIndex::Off {
                    db.learn_all()
                        .unwrap_or_else(|e| panic!("{}: learn_all: {e}", ctx()));
                    LEVEL_MODELS.fetch_add(db.stats().level_models, Ordering::Relaxed);
                }
            }
            96..=97 => {
                snapshots.clear();
                LEARNED_LOOKUPS.fetch_add(db.stats().learned.learned_lookups, Ordering::Relaxed);
                db.close()
                    .unwrap_or_else(|e| panic!("{}: close: {e}", ctx()));
                db = open(&env).unwrap_or_else(|e| panic!("{}: reopen: {e}", ctx()));
            }
            _ => {
                // Machine crash after a sync write: everything acknowledged before it survives.
                let k = random_key(&mut rng, space);
                let v = random_value(&mut rng);
                db.put_opt(&k, &v, WriteOptions { sync: true }).unwrap();
                model.insert(k, v);
                snapshots.clear();
                LEARNED_LOOKUPS.fetch_add(db.stats().learned.learned_lookups, Ordering::Relaxed);
                env.power_off(); // the old handle's threads can no longer touch the files
                drop(db);
                env.crash();
                db = open(&env).unwrap_or_else(|e| panic!("{}: open after crash: {e}", ctx()));
            }
        }
    }
    assert_eq!(
        scan(&db, &ReadOptions::default(), None, None, false),
        model_scan(&model, None, None, false),
        "seed {seed}: final scan"
    );
    let stats = db.stats();
    GC_SEGMENTS.fetch_add(stats.gc_segments_collected, Ordering::Relaxed);
    LEARNED_LOOKUPS.fetch_add(stats.learned.learned_lookups, Ordering::Relaxed);
    assert_eq!(
        stats.level_files.len(),
        7,
        "seed {seed}: stats cover every level"
    );
    db.verify()
        .unwrap_or_else(|e| panic!("seed {seed}: verify: {e}"));
}

#[test]
fn random_histories_match_an_ordered_map() {
    if let Ok(s) = std::env::var("ATTUNE_SEED") {
        run_seed(s.parse().expect("ATTUNE_SEED must be a number"), 20_000);
        return;
    }
    let seeds: u64 = std::env::var("ATTUNE_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    for seed in 0..seeds {
        run_seed(seed, 3_000);
    }
    let gc = GC_SEGMENTS.load(Ordering::Relaxed);
    let learned = LEARNED_LOOKUPS.load(Ordering::Relaxed);
    let levels = LEVEL_MODELS.load(Ordering::Relaxed);
    eprintln!(
        "model test: {seeds} seeds x 3000 operations matched the ordered map \
         ({gc} value-log segments garbage-collected, {learned} table lookups through models, \
         {levels} level models built)"
    );
    assert!(
        seeds < 8 || levels > 0,
        "no level model was built: the test lost its teeth"
    );
    assert!(
        seeds < 8 || learned > 0,
        "no lookup went through a learned model: the test lost its teeth"
    );
    assert!(
        seeds < 8 || gc > 0,
        "no garbage collection ran: the test lost its teeth"
    );
}
