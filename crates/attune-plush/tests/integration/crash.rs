//! Crash consistency on the crash simulator: random upserts and deletes against an oracle,
//! cut at a random persistence barrier (inside an insert, a log compaction, a migration at any
//! depth, or a recovery), the unfenced words torn at random, then recovered and checked key by
//! key: no acknowledged record lost, no deleted or overwritten one back. Every case is seeded;
//! a failure prints the seed that replays it. Each scenario runs with inline migration on the
//! mapped model and with queued (background) migration on the `Write` back end's model; the
//! queue is drained by the test thread at random points (`Migration::Manual`), so a crash can
//! cut a background migration at any barrier and the run still replays from its seed.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_plush::{Image, Migration, Options, Partitioning, Plush, SimModel, SimStorage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

fn small_options() -> Options {
    Options {
        migration: Migration::Inline,
        dram_filter_levels: 1,
        ..crate::support::tiny()
    }
}

const KEYS: u64 = 700;

/// Applies random operations until the simulator crashes (or `ops` ran). Returns the key of the
/// operation in flight at the crash with its old and new value, and whether it migrated.
fn run_ops(
    db: &Plush,
    sim: &SimStorage,
    rng: &mut ChaCha8Rng,
    ops: usize,
    oracle: &mut BTreeMap<u64, Option<u64>>,
) -> (Option<(u64, Option<u64>)>, bool) {
    let manual = db.options().migration == Migration::Manual;
    for _ in 0..ops {
        if sim.crashed() {
            return (None, false);
        }
        if manual && rng.gen_bool(0.1) {
            let r = db.migrate_queued();
            if sim.crashed() {
                return (None, true);
            }
            r.unwrap_or_else(|e| panic!("background migration failed without a crash: {e}"));
        }
        let key = rng.gen_range(0..KEYS);
        let new = if rng.gen_bool(0.15) {
            None
        } else {
            Some(rng.gen_range(0..u64::MAX))
        };
        let migrations_before: u64 = db.stats().migrations.iter().sum();
        let r = match new {
            Some(v) => db.put(key, v),
            None => db.delete(key),
        };
        if sim.crashed() {
            let migrated = db.stats().migrations.iter().sum::<u64>() != migrations_before;
            return (Some((key, new)), migrated);
        }
        r.unwrap_or_else(|e| panic!("op failed without a crash: {e}"));
        oracle.insert(key, new);
    }
    (None, false)
}

fn check(
    db: &Plush,
    oracle: &BTreeMap<u64, Option<u64>>,
    in_flight: Option<(u64, Option<u64>)>,
    seed: u64,
) {
    for key in 0..KEYS {
        let want = oracle.get(&key).copied().flatten();
        let got = db.get(key).unwrap();
        if let Some((k, new)) = in_flight {
            if k == key && (got == want || got == new) {
                continue;
            }
        }
        assert_eq!(got, want, "seed {seed}: key {key}");
    }
    if db.options().partitioning == Partitioning::Range {
        // The scan agrees with the point lookups (which the oracle just checked).
        let live: Vec<(u64, u64)> = (0..KEYS)
            .filter_map(|k| db.get(k).unwrap().map(|v| (k, v)))
            .collect();
        assert_eq!(db.scan(0, usize::MAX).unwrap(), live, "seed {seed}: scan");
    }
    db.verify()
        .unwrap_or_else(|e| panic!("seed {seed}: verify: {e}"));
}

/// Resolves an in-flight operation after recovery: whichever outcome the engine kept is now
/// the acknowledged state.
fn settle(
    db: &Plush,
    oracle: &mut BTreeMap<u64, Option<u64>>,
    in_flight: Option<(u64, Option<u64>)>,
) {
    if let Some((k, _)) = in_flight {
        oracle.insert(k, db.get(k).unwrap());
    }
}

#[test]
fn random_crashes_lose_and_resurrect_nothing_mapped_inline() {
    random_crashes(SimModel::Mapped, Migration::Inline, true, false);
}

#[test]
fn random_crashes_lose_and_resurrect_nothing_write_backend_background() {
    random_crashes(SimModel::Write, Migration::Manual, true, false);
}

/// The recovery log by key hash (`log_pack_groups` off, manifest version 3); the tests above
/// pack it (the default).
#[test]
fn random_crashes_lose_and_resurrect_nothing_logged_by_key_hash() {
    random_crashes(SimModel::Write, Migration::Manual, false, false);
}

/// Range partitioning (keys placed by their top bits of 10): the same oracle, and after each
/// recovery a full scan must agree with the point lookups.
#[test]
fn random_crashes_lose_and_resurrect_nothing_range_partitioned() {
    random_crashes(SimModel::Write, Migration::Manual, true, true);
}

fn random_crashes(model: SimModel, migration: Migration, pack: bool, range: bool) {
    let small_options = || Options {
        migration,
        log_pack_groups: pack,
        partitioning: if range {
            Partitioning::Range
        } else {
            Partitioning::Hash
        },
        significant_key_bits: if range { 10 } else { 64 },
        ..small_options()
    };
    let sim_from =
        |image: Image, crash: u64, seed: u64| SimStorage::with_model(image, crash, seed, model);
    let cases = 1000u64;
    let (mut crashed, mut in_migration) = (0u64, 0u64);
    let (mut in_recovery, mut after_recovery) = (0u64, 0u64);
    for seed in 0..cases {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut oracle = BTreeMap::new();
        let mut image = attune_plush::Image::new();
        // Two rounds: a fresh database, then the recovered one, each crashed at a random
        // barrier (the open's own barriers included).
        for round in 0..2u64 {
            let ops = rng.gen_range(200..1200);
            let tag = seed * 8 + round * 4;
            let sim = sim_from(image, rng.gen_range(1..ops as u64), tag);
            let (in_flight, migrated) =
                match Plush::open_with(Box::new(sim.clone()), small_options()) {
                    Ok(db) => run_ops(&db, &sim, &mut rng, ops, &mut oracle),
                    Err(e) => {
                        assert!(
                            sim.crashed(),
                            "seed {seed}: open failed without a crash: {e}"
                        );
                        (None, false)
                    }
                };
            crashed += sim.crashed() as u64;
            in_migration += migrated as u64;
            image = sim.crash_image().unwrap_or_else(|| sim.image_now());
            // Half of the time: recover, then crash again soon (inside the recovery's own
            // barriers, which only a database cut during its creation has, or in the first
            // operations on the recovered state, which test the rebuilt DRAM epochs).
            let mut in_flight = in_flight;
            if rng.gen_bool(0.5) {
                let sim2 = sim_from(image.clone(), rng.gen_range(1..40), tag + 1);
                if let Ok(db2) = Plush::open_with(Box::new(sim2.clone()), small_options()) {
                    if sim2.crashed() {
                        in_recovery += 1;
                    } else {
                        check(&db2, &oracle, in_flight, seed);
                        settle(&db2, &mut oracle, in_flight);
                        in_flight = run_ops(&db2, &sim2, &mut rng, 60, &mut oracle).0;
                        after_recovery += sim2.crashed() as u64;
                    }
                }
                image = sim2.crash_image().unwrap_or_else(|| sim2.image_now());
            }
            let sim3 = sim_from(image, 0, tag + 2);
            let db = Plush::open_with(Box::new(sim3.clone()), small_options())
                .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
            check(&db, &oracle, in_flight, seed);
            settle(&db, &mut oracle, in_flight);
            drop(db);
            image = sim3.image_now();
        }
    }
    eprintln!(
        "{model:?}, {migration:?}, pack {pack}, range {range}: {cases} cases × 2 rounds: {crashed} crashed mid-run, {in_migration} inside a \
         migration, {in_recovery} inside a recovery, {after_recovery} in the operations \
         right after one"
    );
    assert!(crashed >= cases, "too few crashes: {crashed}");
    assert!(
        in_migration >= 50,
        "too few crashes inside a migration: {in_migration}"
    );
    assert!(
        after_recovery >= 200,
        "too few crashes after a recovery: {after_recovery}"
    );
}

#[test]
fn many_records_spill_through_levels_and_survive_reopen() {
    let sim = SimStorage::new(0, 1);
    let db = Plush::open_with(Box::new(sim.clone()), small_options()).unwrap();
    let mut oracle = BTreeMap::new();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for i in 0..20_000u64 {
        let k = rng.gen_range(0..5000u64);
        if i % 10 == 3 {
            db.delete(k).unwrap();
            oracle.insert(k, None);
        } else {
            db.put(k, i).unwrap();
            oracle.insert(k, Some(i));
        }
    }
    assert!(db.stats().levels >= 3, "{:?}", db.stats());
    check(&db, &oracle, None, 7);
    drop(db);
    let db = Plush::open_with(
        Box::new(SimStorage::from_image(sim.image_now(), 0, 2)),
        small_options(),
    )
    .unwrap();
    check(&db, &oracle, None, 7);
    assert!(db.stats().recovered_records > 0);
}

/// Every barrier of one run, in turn: the run is replayed from scratch and cut at barrier k, for
/// every k, so that every step of every migration (data, meta, clear, at every depth), every log
/// compaction and every chunk initialisation is a crash point once.
#[test]
fn a_crash_at_every_barrier_of_a_run_loses_nothing_mapped_inline() {
    crash_at_every_barrier(SimModel::Mapped, Migration::Inline);
}

#[test]
fn a_crash_at_every_barrier_of_a_run_loses_nothing_write_backend_background() {
    crash_at_every_barrier(SimModel::Write, Migration::Manual);
}

fn crash_at_every_barrier(model: SimModel, migration: Migration) {
    let small_options = || Options {
        migration,
        ..small_options()
    };
    let ops = 1200;
    let total = {
        let sim = SimStorage::new(0, 0);
        let db = Plush::open_with(Box::new(sim.clone()), small_options()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        run_ops(&db, &sim, &mut rng, ops, &mut BTreeMap::new());
        assert!(db.stats().levels >= 2, "the run must reach level 2");
        if migration == Migration::Manual {
            let s = db.stats();
            assert!(
                s.migrations_background > 0 && s.migrations_background > s.migrations_inline,
                "most migrations must come from the queue: {s:?}"
            );
        }
        sim.fences()
    };
    for k in 1..=total {
        let sim = SimStorage::with_model(Image::new(), k, k, model);
        let mut oracle = BTreeMap::new();
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        let in_flight = match Plush::open_with(Box::new(sim.clone()), small_options()) {
            Ok(db) => run_ops(&db, &sim, &mut rng, ops, &mut oracle).0,
            Err(_) => None,
        };
        assert!(sim.crashed(), "barrier {k} of {total} was not reached");
        let image = sim.crash_image().unwrap();
        let db = Plush::open_with(
            Box::new(SimStorage::with_model(image, 0, 0, model)),
            small_options(),
        )
        .unwrap_or_else(|e| panic!("barrier {k}: recovery failed: {e}"));
        check(&db, &oracle, in_flight, k);
    }
    eprintln!("{model:?}, {migration:?}: {total} barriers, each a crash point once");
}
