//! Learned indexes in the engine: the model path agrees with the index path on every present and
//! absent key (several key shapes, versions under snapshots, deletions), persisted models survive
//! a reopen without relearning, and damaged model files are rejected and rebuilt.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_kv::LearnedIndex;
use attune_kv::{Options, ReadOptions, DB};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn options(mode: LearnedIndex) -> Options {
    Options {
        learned_index: mode,
        // No background learning during the tests: they learn with `learn_all` when they
        // choose, so what is compared is deterministic.
        learned_wait_ms: 3_600_000,
        write_buffer_size: 256 << 10,
        target_file_size: 256 << 10,
        block_size: 1024,
        // Few enough flushes that no compaction replaces a learned table behind a test's back.
        l0_compaction_trigger: 8,
        compression: attune_kv::Compression::None,
        ..Options::default()
    }
}

/// Key shapes: fixed-width integers, variable-length decimal strings, and long keys that share
/// a 40-byte prefix (the mapping must strip it) before a binary suffix.
fn key(shape: usize, i: u64) -> Vec<u8> {
    match shape {
        0 => (i * 7).to_be_bytes().to_vec(),
        1 => format!("user{}", i * 13).into_bytes(),
        _ => {
            let mut k = b"p".repeat(40);
            k.extend_from_slice(&(i * 3).to_be_bytes());
            k
        }
    }
}

/// Fixed-width values, so tables of fixed-width keys have the fixed layout (arithmetic record
/// offsets); tables holding deletions do not (tombstones have empty values).
fn value(i: u64, round: u64) -> Vec<u8> {
    format!("v{i:08}-{round}").into_bytes()
}

fn table_files(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// Every key of `shape` below `n`: latest reads match `model`, reads at sequence `snap` match
/// `old`, and a key just after each one (between present keys, and past the end) is absent.
fn check_point_reads(
    db: &DB,
    shape: usize,
    n: u64,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    old: &BTreeMap<Vec<u8>, Vec<u8>>,
    snap: u64,
) {
    let ro = ReadOptions {
        snapshot: Some(snap),
        ..Default::default()
    };
    for i in 0..n {
        let k = key(shape, i);
        assert_eq!(
            db.get(&k).unwrap(),
            model.get(&k).cloned(),
            "shape {shape} key {i}"
        );
        let mut absent = k.clone();
        absent.push(0);
        assert_eq!(db.get(&absent).unwrap(), None, "shape {shape} after {i}");
        assert_eq!(
            db.get_opt(&k, &ro).unwrap(),
            old.get(&k).cloned(),
            "snapshot {i}"
        );
    }
}

#[test]
fn model_path_agrees_with_the_map_for_present_absent_and_old_keys() {
    for shape in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let db = DB::open(dir.path(), options(LearnedIndex::Always)).unwrap();
        let n = 20_000u64;
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for i in 0..n {
            db.put(&key(shape, i), &value(i, 0)).unwrap();
            model.insert(key(shape, i), value(i, 0));
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        let snap = db.snapshot().unwrap();
        let old = model.clone();
        // Newer versions of every third key and deletions of every fifth, in a newer table.
        for i in (0..n).step_by(3) {
            db.put(&key(shape, i), &value(i, 1)).unwrap();
            model.insert(key(shape, i), value(i, 1));
        }
        for i in (0..n).step_by(5) {
            db.delete(&key(shape, i)).unwrap();
            model.remove(&key(shape, i));
        }
        db.flush().unwrap();
        let learned = db.learn_all().unwrap();
        let st = db.stats();
        assert!(learned >= 2, "shape {shape}: {learned} tables learned");
        assert_eq!(
            st.files_with_models, learned,
            "shape {shape}: {:?} {:?}",
            st.level_files, st.learned
        );
        assert!(st.model_bytes > 0);
        if shape != 1 {
            assert!(
                !st.fixed_layout_files.is_empty(),
                "shape {shape}: fixed-width keys and values give fixed-layout tables"
            );
        }
        // Decimal keys too: the radix key mapping keeps them learnable.
        assert_eq!(st.learned.files_unlearnable, 0, "shape {shape}");
        let before = st.learned.learned_lookups;
        check_point_reads(&db, shape, n, &model, &old, snap.sequence());
        // Seeks go through the models too: compare the next three keys after each target.
        for i in (0..n).step_by(97) {
            let mut target = key(shape, i);
            if i % 2 == 1 {
                target.push(0); // absent: between two keys
            }
            let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
            it.seek(&target);
            let want: Vec<Vec<u8>> = model
                .range(target.clone()..)
                .take(3)
                .map(|(k, _)| k.clone())
                .collect();
            let mut got = Vec::new();
            while it.valid() && got.len() < 3 {
                got.push(it.key().to_vec());
                it.next();
            }
            it.status().unwrap();
            assert_eq!(got, want, "shape {shape} seek {i}");
        }
        assert_eq!(db.get(b"").unwrap(), None);
        assert_eq!(db.get(&[0xff; 80]).unwrap(), None);
        let st = db.stats();
        assert!(
            st.learned.learned_lookups - before >= n,
            "shape {shape}: only {} lookups used a model",
            st.learned.learned_lookups - before
        );
        drop(snap);
    }
}

#[test]
fn off_mode_serves_the_same_answers_without_models() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), options(LearnedIndex::Off)).unwrap();
    for i in 0..5_000 {
        db.put(&key(1, i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    assert!(
        db.learn_all().is_err(),
        "learn_all must refuse when models are off"
    );
    for i in 0..5_000 {
        assert_eq!(db.get(&key(1, i)).unwrap(), Some(value(i, 0)));
    }
    let st = db.stats();
    assert_eq!(st.learned.mode, "off");
    assert_eq!(st.learned.total_lookups, 0);
    assert_eq!(st.files_with_models, 0);
    assert!(table_files(dir.path(), "atlm").is_empty());
}

#[test]
fn persisted_models_are_loaded_at_reopen_without_relearning() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = DB::open(dir.path(), options(LearnedIndex::Analyzer)).unwrap();
        for i in 0..30_000 {
            db.put(&key(0, i), &value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert!(db.learn_all().unwrap() > 0);
        db.close().unwrap();
    }
    let models = table_files(dir.path(), "atlm");
    assert_eq!(models.len(), table_files(dir.path(), "sst").len());
    let db = DB::open(dir.path(), options(LearnedIndex::Analyzer)).unwrap();
    for i in 0..30_000 {
        assert_eq!(db.get(&key(0, i)).unwrap(), Some(value(i, 0)));
    }
    let st = db.stats();
    assert_eq!(st.files_with_models as usize, models.len());
    assert_eq!(st.learned.files_learned, 0, "nothing was relearned");
    // Every lookup but the analyzer's control sample (one timed lookup in
    // learned_control_sample goes down the baseline path) is served by a model.
    let controls = st.learned.total_lookups - st.learned.learned_lookups;
    let per = attune_kv::internals::TIMING_SAMPLE * Options::default().learned_control_sample;
    assert!(
        controls <= st.learned.total_lookups / per + 1,
        "{controls} of {} lookups missed the models",
        st.learned.total_lookups
    );
    assert!(controls > 0, "the control sample took no lookup");
    db.close().unwrap();
    // With the control sample off, every lookup is served by a model.
    let mut o = options(LearnedIndex::Analyzer);
    o.learned_control_sample = 0;
    let db = DB::open(dir.path(), o).unwrap();
    for i in 0..30_000 {
        assert_eq!(db.get(&key(0, i)).unwrap(), Some(value(i, 0)));
    }
    let st = db.stats();
    assert_eq!(st.learned.learned_lookups, st.learned.total_lookups);
}

#[test]
fn damaged_model_files_are_rejected_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = DB::open(dir.path(), options(LearnedIndex::Always)).unwrap();
        for i in 0..30_000 {
            db.put(&key(2, i), &value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert!(db.learn_all().unwrap() > 0);
        db.close().unwrap();
    }
    let models = table_files(dir.path(), "atlm");
    assert!(!models.is_empty());
    // One model with a flipped byte, one truncated, one replaced by another table's model.
    let mut bytes = std::fs::read(&models[0]).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&models[0], &bytes).unwrap();
    if models.len() > 1 {
        let b = std::fs::read(&models[1]).unwrap();
        std::fs::write(&models[1], &b[..b.len() / 3]).unwrap();
    }
    if models.len() > 2 {
        std::fs::copy(&models[0], &models[2]).unwrap();
    }
    let db = DB::open(dir.path(), options(LearnedIndex::Always)).unwrap();
    for i in 0..30_000 {
        assert_eq!(db.get(&key(2, i)).unwrap(), Some(value(i, 0)), "key {i}");
    }
    let st = db.stats();
    let damaged = models.len().min(3) as u64;
    assert_eq!(st.learned.models_rejected, damaged);
    assert_eq!(
        st.files_with_models as usize,
        models.len() - damaged as usize
    );
    db.learn_all().unwrap();
    assert_eq!(db.stats().files_with_models as usize, models.len());
    assert_eq!(table_files(dir.path(), "atlm").len(), models.len());
    for i in (0..30_000).step_by(7) {
        assert_eq!(db.get(&key(2, i)).unwrap(), Some(value(i, 0)));
    }
}

#[test]
fn background_learner_learns_tables_after_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        learned_wait_ms: 0,
        ..options(LearnedIndex::Always)
    };
    let db = DB::open(dir.path(), opts).unwrap();
    for i in 0..20_000 {
        db.put(&key(1, i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    // The learner polls every 10 ms; allow it plenty of time on a loaded machine.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let st = db.stats();
        let tables: usize = st.level_files.iter().sum();
        if tables > 0 && st.files_with_models as usize == tables {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the background learner did not learn {tables} tables: {:?}",
            st.learned
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for i in 0..20_000 {
        assert_eq!(db.get(&key(1, i)).unwrap(), Some(value(i, 0)));
    }
    assert!(db.stats().learned.learned_lookups >= 20_000);
}

#[test]
fn level_models_agree_with_the_map_and_are_dropped_when_the_level_changes() {
    for shape in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            learned_level: true,
            ..options(LearnedIndex::Offline)
        };
        let db = DB::open(dir.path(), opts).unwrap();
        let n = 20_000u64;
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for i in 0..n {
            db.put(&key(shape, i), &value(i, 0)).unwrap();
            model.insert(key(shape, i), value(i, 0));
        }
        db.flush().unwrap();
        let snap = db.snapshot().unwrap();
        let old = model.clone();
        for i in (0..n).step_by(3) {
            db.put(&key(shape, i), &value(i, 1)).unwrap();
            model.insert(key(shape, i), value(i, 1));
        }
        for i in (0..n).step_by(5) {
            db.delete(&key(shape, i)).unwrap();
            model.remove(&key(shape, i));
        }
        // One sorted level of many files holding old versions (the snapshot keeps them) next
        // to new ones and tombstones.
        db.compact_range(None, None).unwrap();
        db.learn_all().unwrap();
        let st = db.stats();
        assert!(
            st.level_files.iter().skip(1).any(|&c| c >= 2),
            "shape {shape}: {:?}",
            st.level_files
        );
        assert_eq!(st.level_models, 1, "shape {shape}: {:?}", st.level_files);
        assert!(st.level_model_bytes > 0);
        let check = |db: &DB, model: &BTreeMap<Vec<u8>, Vec<u8>>| {
            check_point_reads(db, shape, n, model, &old, snap.sequence());
            assert_eq!(db.get(b"").unwrap(), None);
            assert_eq!(db.get(&[0xff; 80]).unwrap(), None);
        };
        check(&db, &model);
        // A change to the level drops its model; answers stay the same on the file path.
        for i in (1..n).step_by(7) {
            db.put(&key(shape, i), &value(i, 2)).unwrap();
            model.insert(key(shape, i), value(i, 2));
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(db.stats().level_models, 0, "shape {shape}");
        check(&db, &model);
        db.learn_all().unwrap();
        assert_eq!(db.stats().level_models, 1, "shape {shape}");
        check(&db, &model);
        drop(snap);
    }
}

/// Waits (on a loaded machine, up to 30 s) until `done` holds for the database's stats.
fn wait_for(db: &DB, what: &str, done: impl Fn(&attune_kv::Stats) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let st = db.stats();
        if done(&st) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {:?} {:?}",
            st.level_files,
            st.learned
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn level_models_are_relearned_online_after_the_level_changes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        learned_level: true,
        learned_wait_ms: 0,
        ..options(LearnedIndex::Always)
    };
    let db = DB::open(dir.path(), opts).unwrap();
    let n = 20_000u64;
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for round in 0..2 {
        for i in (round..n).step_by(1 + round as usize * 6) {
            db.put(&key(0, i), &value(i, round)).unwrap();
            model.insert(key(0, i), value(i, round));
        }
        db.flush().unwrap();
        // A change of the sorted level drops its model; the learner builds a new one once the
        // level has settled, without learn_all.
        db.compact_range(None, None).unwrap();
        wait_for(&db, "the level model was not relearned", |st| {
            st.level_models == 1 && st.learned.level_models_learned > round
        });
        let snap = db.snapshot().unwrap();
        check_point_reads(&db, 0, n, &model, &model, snap.sequence());
    }
    // The online model is persisted like one learn_all builds.
    let level_files = table_files(dir.path(), "atlm").into_iter().filter(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("LEVEL-"))
    });
    assert!(level_files.count() >= 1);
}

#[test]
fn offline_mode_learns_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        learned_wait_ms: 0,
        ..options(LearnedIndex::Offline)
    };
    let db = DB::open(dir.path(), opts).unwrap();
    for i in 0..20_000 {
        db.put(&key(0, i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    // A background learner would learn these within milliseconds (wait 0, polled every 10 ms).
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(db.stats().files_with_models, 0);
    let learned = db.learn_all().unwrap();
    assert!(learned > 0);
    assert_eq!(db.stats().files_with_models, learned);
}

#[test]
fn level_models_persist_across_reopen_and_stale_or_damaged_ones_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        learned_level: true,
        ..options(LearnedIndex::Offline)
    };
    let n = 20_000u64;
    {
        let db = DB::open(dir.path(), opts()).unwrap();
        for i in 0..n {
            db.put(&key(0, i), &value(i, 0)).unwrap();
        }
        db.compact_range(None, None).unwrap();
        db.learn_all().unwrap();
        assert_eq!(db.stats().level_models, 1);
        db.close().unwrap();
    }
    let level_files = table_files(dir.path(), "atlm")
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("LEVEL-")
        })
        .collect::<Vec<_>>();
    assert_eq!(level_files.len(), 1, "one level model file");
    {
        let db = DB::open(dir.path(), opts()).unwrap();
        assert_eq!(db.stats().level_models, 1, "loaded at open, no learn_all");
        for i in (0..n).step_by(11) {
            assert_eq!(db.get(&key(0, i)).unwrap(), Some(value(i, 0)));
        }
        db.close().unwrap();
    }
    // Damaged: rejected at open and removed; answers unchanged.
    let mut bytes = std::fs::read(&level_files[0]).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&level_files[0], &bytes).unwrap();
    {
        let db = DB::open(dir.path(), opts()).unwrap();
        assert_eq!(db.stats().level_models, 0);
        assert!(!level_files[0].exists(), "a damaged level model is removed");
        for i in (0..n).step_by(11) {
            assert_eq!(db.get(&key(0, i)).unwrap(), Some(value(i, 0)));
        }
        db.learn_all().unwrap();
        // The level changes after the model was written: at the next open it is stale.
        for i in (0..n).step_by(2) {
            db.put(&key(0, i), &value(i, 1)).unwrap();
        }
        db.compact_range(None, None).unwrap();
        db.close().unwrap();
    }
    let db = DB::open(dir.path(), opts()).unwrap();
    assert_eq!(
        db.stats().level_models,
        0,
        "a stale level model is not installed"
    );
    for i in (0..n).step_by(7) {
        let want = value(i, if i % 2 == 0 { 1 } else { 0 });
        assert_eq!(db.get(&key(0, i)).unwrap(), Some(want));
    }
}

#[test]
fn a_window_that_crosses_blocks_reads_one_block_through_the_cache() {
    // With a memory budget every block goes through the block cache (no in-place views), so a
    // window spanning two blocks used to read both; the index block now picks the one that
    // holds the key. Variable-length keys: the general (not fixed-layout) path.
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        memory_budget: 64 << 20,
        cache_sizing: Some(attune_kv::CacheSizing::Static(24 << 20)),
        ..options(LearnedIndex::Offline)
    };
    let db = DB::open(dir.path(), opts).unwrap();
    let n = 20_000u64;
    for i in 0..n {
        db.put(&key(1, i), &value(i, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    assert!(db.learn_all().unwrap() > 0);
    let before = db.stats();
    for i in 0..n {
        assert_eq!(db.get(&key(1, i)).unwrap(), Some(value(i, 0)));
    }
    let after = db.stats();
    let blocks = (after.block_cache.hits + after.block_cache.misses)
        - (before.block_cache.hits + before.block_cache.misses);
    assert!(after.learned.learned_lookups - before.learned.learned_lookups >= n);
    assert_eq!(blocks, n, "one data block per lookup");
}

/// The entries an iterator yields from `target`: `count` forward, or backward from the entry
/// before `target` when `back`.
fn walk(it: &mut attune_kv::DbIterator, target: &[u8], count: usize, back: bool) -> Vec<Vec<u8>> {
    it.seek(target);
    if back {
        if it.valid() {
            it.prev();
        } else {
            it.seek_to_last();
        }
    }
    let mut got = Vec::new();
    while it.valid() && got.len() < count {
        got.push([it.key(), b"=", it.value()].concat());
        if back {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().unwrap();
    got
}

#[test]
fn learned_seeks_over_the_value_log_layout_agree_with_the_map_across_blocks() {
    // WiscKey's layout: every value in the value log, so the tables hold fixed-size keys and
    // value pointers and a learned seek takes the fixed-layout path (no index entry, no block
    // trailer, no offset array read). Seeks to present and absent keys, under a snapshot that
    // keeps older versions in the same table, then walks that cross block boundaries both ways.
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        min_blob_size: 16,
        ..options(LearnedIndex::Offline)
    };
    let db = DB::open(dir.path(), opts).unwrap();
    let n = 6_000u64;
    let long = |i: u64, round: u64| format!("{:040}", i * 10 + round).into_bytes();
    let mut map: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for i in 0..n {
        db.put(&key(0, i), &long(i, 0)).unwrap();
        map.insert(key(0, i), long(i, 0));
    }
    let snap = db.snapshot().unwrap();
    let old = map.clone();
    for i in (0..n).step_by(3) {
        db.put(&key(0, i), &long(i, 1)).unwrap();
        map.insert(key(0, i), long(i, 1));
    }
    db.compact_range(None, None).unwrap();
    assert!(db.learn_all().unwrap() > 0);
    let st = db.stats();
    assert!(!st.fixed_layout_files.is_empty(), "{:?}", st.level_files);
    assert_eq!(st.files_with_models, st.fixed_layout_files.len() as u64);
    let ro_old = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..Default::default()
    };
    for (ro, m) in [(ReadOptions::default(), &map), (ro_old, &old)] {
        let mut it = db.iter(&ro).unwrap();
        let expect = |target: &[u8], count: usize, back: bool| -> Vec<Vec<u8>> {
            let pair = |(k, v): (&Vec<u8>, &Vec<u8>)| [k.as_slice(), b"=", v].concat();
            if back {
                m.range(..target.to_vec())
                    .rev()
                    .take(count)
                    .map(pair)
                    .collect()
            } else {
                m.range(target.to_vec()..).take(count).map(pair).collect()
            }
        };
        for i in (0..n).chain([n + 5]) {
            let mut targets = vec![key(0, i)];
            let mut absent = key(0, i);
            absent.push(0);
            targets.push(absent);
            for t in targets {
                let count = if i % 50 == 0 { 80 } else { 2 };
                assert_eq!(
                    walk(&mut it, &t, count, false),
                    expect(&t, count, false),
                    "{i}"
                );
                if i % 7 == 0 {
                    assert_eq!(
                        walk(&mut it, &t, 40, true),
                        expect(&t, 40, true),
                        "{i} back"
                    );
                }
            }
        }
        assert_eq!(walk(&mut it, b"", 3, false), expect(b"", 3, false));
    }
    drop(snap);
}

/// The analyzer's statistics are saved at close and restored at open, so a reopened database
/// judges files from what it saw before instead of going back to the always-learn bootstrap; a
/// damaged state file is removed and counted, and the database opens as if it had none.
#[test]
fn analyzer_statistics_survive_a_reopen_and_a_damaged_state_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        learned_wait_ms: 0,
        l0_compaction_trigger: 2,
        ..options(LearnedIndex::Analyzer)
    };
    let db = DB::open(dir.path(), opts()).unwrap();
    // Overwrite the same keys round after round: flushes and compactions retire tables, and
    // the reads between rounds give the retired tables lookup statistics.
    for round in 0..6 {
        for i in 0..8_000 {
            db.put(&key(0, i), &value(i, round)).unwrap();
        }
        db.flush().unwrap();
        for i in (0..8_000).step_by(3) {
            assert_eq!(db.get(&key(0, i)).unwrap(), Some(value(i, round)));
        }
    }
    db.compact_range(None, None).unwrap();
    let before = db.stats().learned;
    assert!(!before.state_loaded);
    assert!(!before.levels.is_empty(), "no table retired: {before:?}");
    db.close().unwrap();
    let state = dir.path().join("ANALYZER");
    assert!(state.exists());

    // The learner of the first open may still have been training when its statistics were
    // read, so the round trip is checked between two opens whose learner never runs (every
    // file waits an hour): what the second saved at close is what the third loads.
    let quiet = || Options {
        learned_wait_ms: 3_600_000,
        ..opts()
    };
    let db = DB::open(dir.path(), quiet()).unwrap();
    let loaded = db.stats().learned;
    assert!(loaded.state_loaded);
    assert!(!loaded.levels.is_empty());
    assert!(loaded.train_ns_per_record > 0.0);
    db.close().unwrap();
    let db = DB::open(dir.path(), quiet()).unwrap();
    let again = db.stats().learned;
    assert!(again.state_loaded);
    assert_eq!(again.levels, loaded.levels);
    assert_eq!(again.train_ns_per_record, loaded.train_ns_per_record);
    db.close().unwrap();

    let mut bytes = std::fs::read(&state).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&state, &bytes).unwrap();
    let db = DB::open(dir.path(), opts()).unwrap();
    let st = db.stats().learned;
    assert!(!st.state_loaded);
    assert!(st.levels.is_empty());
    assert_eq!(st.models_rejected, 1);
    assert!(!state.exists());
    for i in (0..8_000).step_by(7) {
        assert_eq!(db.get(&key(0, i)).unwrap(), Some(value(i, 5)));
    }
}

/// The engine on the simulated SSD, whose reads bypass any page cache: a training pass over
/// any table would read all of it from the device.
fn cold_device_db(io_cost: bool) -> DB {
    use attune_kv::env::{DeviceEnv, DeviceLayout, MemEnv};
    let mem = Arc::new(MemEnv::new());
    let params = attune_io::ssd::SsdParams::default();
    let env = Arc::new(DeviceEnv::new(mem, params, 3, DeviceLayout::default()).unwrap());
    let opts = Options {
        learned_wait_ms: 0,
        learned_io_cost: io_cost,
        ..options(LearnedIndex::Analyzer)
    };
    let db = DB::open_with_env(env, Path::new("/db"), opts).unwrap();
    for i in 0..20_000 {
        db.put(&key(1, i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db
}

#[test]
fn a_table_on_the_device_is_not_learned_when_its_reads_cost_more_than_its_choice_pays() {
    // A bootstrap choice (no statistics yet) of ~20k records costs ~0.2 ms of CPU to train;
    // reading its ~600 KB from the device costs more: it is put back, not learned.
    let db = cold_device_db(true);
    wait_for(&db, "the learner deferred the tables", |st| {
        let tables: u64 = st.level_files.iter().map(|&n| n as u64).sum();
        tables > 0 && st.learned.files_deferred_io == tables
    });
    let st = db.stats();
    assert_eq!(st.files_with_models, 0, "{:?}", st.learned);
    assert!(st.learned.deferred_io_bytes > 0);
    for i in 0..20_000 {
        assert_eq!(db.get(&key(1, i)).unwrap(), Some(value(i, 0)));
    }
    // Asked for explicitly, learning still happens whatever it reads.
    db.learn_all().unwrap();
    let st = db.stats();
    let tables: usize = st.level_files.iter().sum();
    assert_eq!(st.files_with_models as usize, tables);

    // With the I/O cost off the same tables are learned by the background learner.
    let db = cold_device_db(false);
    wait_for(&db, "the learner learned the tables", |st| {
        let tables: usize = st.level_files.iter().sum();
        tables > 0 && st.files_with_models as usize == tables
    });
    assert_eq!(db.stats().learned.files_deferred_io, 0);
}
