//! The ablations' options: `recovery_log` off (upserts reach the DRAM level only; a crash keeps
//! exactly what migrations moved) and `preallocate_levels` (levels allocated whole at open, or
//! as migrations reach them).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{scratch, small, tiny};
use attune_plush::{Image, Migration, Options, Plush, SimModel, SimStorage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

fn unlogged() -> Options {
    Options {
        migration: Migration::Inline,
        dram_filter_levels: 1,
        recovery_log: false,
        ..tiny()
    }
}

const KEYS: u64 = 500;

/// Random puts and deletes with the log off, checkpoints at random points, cut at a random
/// barrier (inside a migration or a checkpoint, or never). After recovery every key holds its
/// value as of the last checkpoint that returned, or a value written after it (a migration
/// since then may have moved it): never an older one, never one nobody wrote.
fn unlogged_crashes(model: SimModel, cases: u64) {
    let (mut crashed, mut changed) = (0u64, 0u64);
    for seed in 0..cases {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Per key: the value at the last completed checkpoint, and every value since.
        let mut durable: BTreeMap<u64, Option<u64>> = BTreeMap::new();
        let mut since: BTreeMap<u64, Vec<Option<u64>>> = BTreeMap::new();
        let sim = SimStorage::with_model(Image::new(), rng.gen_range(1..60), seed, model);
        if let Ok(db) = Plush::open_with(Box::new(sim.clone()), unlogged()) {
            let mut next = 1u64;
            for _ in 0..rng.gen_range(100..800) {
                if sim.crashed() {
                    break;
                }
                if rng.gen_bool(0.02) {
                    let r = db.checkpoint();
                    if sim.crashed() {
                        break;
                    }
                    r.unwrap_or_else(|e| panic!("seed {seed}: checkpoint failed: {e}"));
                    for (k, vs) in std::mem::take(&mut since) {
                        durable.insert(k, *vs.last().unwrap());
                    }
                    continue;
                }
                let key = rng.gen_range(0..KEYS);
                let new = (!rng.gen_bool(0.15)).then(|| {
                    next += 1;
                    next
                });
                // Recorded before the call: an operation the crash cut may or may not be kept.
                since.entry(key).or_default().push(new);
                let r = match new {
                    Some(v) => db.put(key, v),
                    None => db.delete(key),
                };
                if sim.crashed() {
                    break;
                }
                r.unwrap_or_else(|e| panic!("seed {seed}: op failed without a crash: {e}"));
            }
            assert_eq!(
                db.stats().log_appends,
                0,
                "seed {seed}: the log was written"
            );
            std::mem::forget(db); // a crash: no clean close, no checkpoint
        }
        crashed += sim.crashed() as u64;
        let image = sim.crash_image().unwrap_or_else(|| sim.image_now());
        let sim2 = SimStorage::with_model(image, 0, seed + 1_000_000, model);
        let db = Plush::open_with(Box::new(sim2), unlogged())
            .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        assert_eq!(db.stats().recovered_records, 0, "seed {seed}");
        assert!(!db.stats().recovery_log);
        for key in 0..KEYS {
            let got = db.get(key).unwrap();
            let base = durable.get(&key).copied().flatten();
            let later = since.get(&key).map(Vec::as_slice).unwrap_or(&[]);
            assert!(
                got == base || later.contains(&got),
                "seed {seed}: key {key} holds {got:?}; last checkpoint {base:?}, written since \
                 {later:?}"
            );
            changed += (got != base) as u64;
        }
        db.verify()
            .unwrap_or_else(|e| panic!("seed {seed}: verify: {e}"));
        std::mem::forget(db);
    }
    eprintln!(
        "{model:?}: {cases} cases, {crashed} crashed, {changed} keys moved past a checkpoint"
    );
    assert!(crashed >= cases / 2, "too few crashes: {crashed}");
    assert!(
        changed > 0,
        "no migration between checkpoints was ever kept"
    );
}

#[test]
fn unlogged_crashes_keep_what_migrated_mapped() {
    unlogged_crashes(SimModel::Mapped, 400);
}

#[test]
fn unlogged_crashes_keep_what_migrated_write() {
    unlogged_crashes(SimModel::Write, 400);
}

/// Without the log nothing but the DRAM level holds a new record: a crash before any migration
/// loses it, and a clean close keeps it (the close checkpoints).
#[test]
fn unlogged_records_survive_a_clean_close_and_not_a_crash() {
    let sim = SimStorage::new(0, 1);
    let db = Plush::open_with(Box::new(sim.clone()), unlogged()).unwrap();
    for k in 0..50u64 {
        db.put(k, k + 100).unwrap();
    }
    assert_eq!(db.stats().migrations.iter().sum::<u64>(), 0);
    let crash = sim.image_now();
    db.close().unwrap();
    let after_close = sim.image_now();
    let db = Plush::open_with(Box::new(SimStorage::from_image(crash, 0, 2)), unlogged()).unwrap();
    assert!((0..50).all(|k| db.get(k).unwrap().is_none()));
    std::mem::forget(db);
    let db = Plush::open_with(
        Box::new(SimStorage::from_image(after_close, 0, 3)),
        unlogged(),
    )
    .unwrap();
    assert!((0..50u64).all(|k| db.get(k).unwrap() == Some(k + 100)));
}

/// Records logged by an earlier session are replayed and migrated at once by an open without
/// the log, so an unlogged overwrite followed by a crash cannot bring the logged version back.
#[test]
fn an_unlogged_open_migrates_what_was_logged() {
    let sim = SimStorage::new(0, 1);
    let logged = Options {
        recovery_log: true,
        ..unlogged()
    };
    let db = Plush::open_with(Box::new(sim.clone()), logged.clone()).unwrap();
    db.put(7, 1).unwrap();
    db.put(8, 1).unwrap();
    let image = sim.image_now();
    std::mem::forget(db);
    let sim = SimStorage::from_image(image, 0, 2);
    let db = Plush::open_with(Box::new(sim.clone()), unlogged()).unwrap();
    assert_eq!(db.stats().recovered_records, 2);
    db.put(7, 2).unwrap();
    db.delete(8).unwrap();
    let image = sim.image_now();
    std::mem::forget(db);
    for options in [unlogged(), logged] {
        let db = Plush::open_with(
            Box::new(SimStorage::from_image(image.clone(), 0, 3)),
            options,
        )
        .unwrap();
        // The unlogged writes are gone with the crash; what the open migrated stays.
        assert_eq!(db.get(7).unwrap(), Some(1));
        assert_eq!(db.get(8).unwrap(), Some(1));
        assert_eq!(db.stats().recovered_records, 0);
        std::mem::forget(db);
    }
}

fn allocated_bytes(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// `preallocate_levels` = n: levels 1..=n exist and are allocated whole after the open; 0: no
/// level file until a migration reaches it, and then only the entries migrated into.
#[test]
fn preallocation_allocates_the_first_levels_at_open() {
    let dir = scratch();
    let opts = Options {
        preallocate_levels: 2,
        ..small()
    };
    let db = Plush::open(dir.path(), opts).unwrap();
    assert_eq!(db.stats().levels_preallocated, 2);
    for name in ["level-01.plush", "level-02.plush"] {
        let p = dir.path().join(name);
        assert!(
            allocated_bytes(&p) >= std::fs::metadata(&p).unwrap().len(),
            "{name}"
        );
    }
    assert!(!dir.path().join("level-03.plush").exists());
    drop(db);

    let dir = scratch();
    let opts = Options {
        preallocate_levels: 0,
        ..small()
    };
    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    assert_eq!(db.stats().levels, 0);
    assert!(!dir.path().join("level-01.plush").exists());
    db.put(1, 2).unwrap();
    db.checkpoint().unwrap();
    let p = dir.path().join("level-01.plush");
    assert!(allocated_bytes(&p) < std::fs::metadata(&p).unwrap().len() / 4);
    assert_eq!(db.stats().levels_preallocated, 0);
    drop(db);
    // Reopened with preallocation on, the existing level is allocated whole too.
    let db = Plush::open(dir.path(), small()).unwrap();
    assert!(allocated_bytes(&p) >= std::fs::metadata(&p).unwrap().len());
    assert_eq!(db.get(1).unwrap(), Some(2));
}

/// Without the log, a payload collection that moves a migrated record must make its new
/// pointer durable before the old segment goes: a crash right after the collection keeps every
/// migrated record readable.
#[test]
fn an_unlogged_payload_collection_keeps_migrated_records_after_a_crash() {
    let sim = SimStorage::new(0, 1);
    let opts = Options {
        payload_segment_bytes: 8192,
        payload_gc: false,
        ..unlogged()
    };
    let db = Plush::open_with(Box::new(sim.clone()), opts.clone()).unwrap();
    let value = |k: u64, round: u64| vec![(k + round) as u8; 100 + k as usize];
    for k in 0..60u64 {
        db.put_bytes(&k.to_le_bytes(), &value(k, 0)).unwrap();
    }
    db.checkpoint().unwrap();
    // Half the keys overwritten and migrated: their old records are garbage, the rest live.
    for k in (0..60u64).step_by(2) {
        db.put_bytes(&k.to_le_bytes(), &value(k, 1)).unwrap();
    }
    db.checkpoint().unwrap();
    assert!(db.collect_garbage(true).unwrap() > 0);
    assert!(db.stats().payload_gc_records_moved > 0);
    let image = sim.image_now();
    std::mem::forget(db);
    let db = Plush::open_with(Box::new(SimStorage::from_image(image, 0, 2)), opts).unwrap();
    for k in 0..60u64 {
        let want = value(k, if k % 2 == 0 { 1 } else { 0 });
        assert_eq!(
            db.get_bytes(&k.to_le_bytes()).unwrap(),
            Some(want),
            "key {k}"
        );
    }
}
