//! Crash consistency of group commit: several writer threads share the recovery log's
//! barriers (one leader hands the group's entries to the device and issues one barrier for
//! them), and the crash simulator cuts the run at a random barrier — between a group's
//! hand-off and its barrier, or inside a migration another thread runs. After recovery every
//! write a thread saw acknowledged is there, every other key holds its acknowledged value or
//! the value its writer had in flight, and nothing deleted or overwritten comes back.
//!
//! The threads interleave as the scheduler lets them, so which groups form differs from run to
//! run; the check holds for every interleaving (a write counts as acknowledged only if the
//! simulator had not crashed when it returned, and the crash image is taken at one instant).
//! Each case prints its seed on failure; the crash point and the values replay from it.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_plush::{GroupCommit, Image, Migration, Options, Plush, SimModel, SimStorage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

const THREADS: u64 = 4;
const KEYS_PER_THREAD: u64 = 150;

fn options(migration: Migration) -> Options {
    Options {
        migration,
        dram_filter_levels: 1,
        ..crate::support::tiny()
    }
}

/// What one writer thread saw: its keys' acknowledged values, and the write in flight when
/// the simulator crashed.
struct Seen {
    acked: BTreeMap<u64, Option<u64>>,
    in_flight: Option<(u64, Option<u64>)>,
}

fn write_until_crash(db: &Plush, sim: &SimStorage, t: u64, seed: u64, ops: usize) -> Seen {
    let mut rng = ChaCha8Rng::seed_from_u64(seed * THREADS + t);
    let mut seen = Seen {
        acked: BTreeMap::new(),
        in_flight: None,
    };
    for _ in 0..ops {
        if sim.crashed() {
            break;
        }
        // Each thread owns its keys, so a key's versions are ordered by one thread.
        let key = t * KEYS_PER_THREAD + rng.gen_range(0..KEYS_PER_THREAD);
        let new = (!rng.gen_bool(0.15)).then(|| rng.gen_range(0..u64::MAX));
        let r = match new {
            Some(v) => db.put(key, v),
            None => db.delete(key),
        };
        if sim.crashed() {
            seen.in_flight = Some((key, new));
            break;
        }
        r.unwrap_or_else(|e| panic!("seed {seed}: thread {t}: write failed without a crash: {e}"));
        seen.acked.insert(key, new);
    }
    seen
}

fn group_crashes(model: SimModel, migration: Migration, syncs_in_flight_max: usize) {
    group_crashes_with(
        model,
        migration,
        GroupCommit {
            window: false,
            syncs_in_flight_max,
            ..GroupCommit::default()
        },
        true,
    );
}

fn group_crashes_with(model: SimModel, migration: Migration, group: GroupCommit, pack: bool) {
    let syncs_in_flight_max = group.syncs_in_flight_max;
    let cases = 250u64;
    let opts = Options {
        log_pack_groups: pack,
        ..options(migration)
    };
    let (mut crashed, mut syncs, mut covered) = (0u64, 0u64, 0u64);
    for seed in 0..cases {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let ops = rng.gen_range(100..400);
        let crash_at = rng.gen_range(1..(ops as u64 * THREADS / 2));
        let sim = SimStorage::with_group(Image::new(), crash_at, seed, model, group);
        sim.sync_yields(4);
        if group.gather {
            sim.sync_sleep_us(60);
        }
        let seen: Vec<Seen> = match Plush::open_with(Box::new(sim.clone()), opts.clone()) {
            Ok(db) => {
                let seen = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..THREADS)
                        .map(|t| {
                            let (db, sim) = (&db, &sim);
                            s.spawn(move || write_until_crash(db, sim, t, seed, ops))
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let st = db.stats();
                syncs += st.log_syncs;
                covered += st.log_sync_barriers;
                seen
            }
            Err(e) => {
                assert!(
                    sim.crashed(),
                    "seed {seed}: open failed without a crash: {e}"
                );
                Vec::new()
            }
        };
        crashed += sim.crashed() as u64;
        let image = sim.crash_image().unwrap_or_else(|| sim.image_now());
        let db = Plush::open_with(
            Box::new(SimStorage::with_model(image, 0, 0, model)),
            options(Migration::Inline),
        )
        .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        for s in &seen {
            for (&key, &want) in &s.acked {
                let got = db.get(key).unwrap();
                if let Some((k, new)) = s.in_flight {
                    if k == key && got == new {
                        continue;
                    }
                }
                assert_eq!(
                    got, want,
                    "seed {seed}: key {key} lost its acknowledged value"
                );
            }
            if let Some((k, new)) = s.in_flight {
                if !s.acked.contains_key(&k) {
                    let got = db.get(k).unwrap();
                    assert!(
                        got.is_none() || got == new,
                        "seed {seed}: key {k} holds {got:?}"
                    );
                }
            }
        }
        // Keys no thread wrote stay absent.
        let written: std::collections::BTreeSet<u64> = seen
            .iter()
            .flat_map(|s| s.acked.keys().copied().chain(s.in_flight.map(|f| f.0)))
            .collect();
        for key in 0..THREADS * KEYS_PER_THREAD {
            if !written.contains(&key) {
                assert_eq!(
                    db.get(key).unwrap(),
                    None,
                    "seed {seed}: key {key} appeared"
                );
            }
        }
        db.verify()
            .unwrap_or_else(|e| panic!("seed {seed}: verify: {e}"));
    }
    eprintln!(
        "{model:?}, {migration:?}, {syncs_in_flight_max} in flight: {cases} cases, {crashed} \
         crashed mid-run; {covered} log barriers in {syncs} syncs"
    );
    assert!(crashed >= cases * 9 / 10, "too few crashes: {crashed}");
}

#[test]
fn a_crash_inside_a_group_loses_only_unacknowledged_writes_mapped_inline() {
    group_crashes(SimModel::Mapped, Migration::Inline, 1);
}

#[test]
fn a_crash_inside_a_group_loses_only_unacknowledged_writes_write_backend_background() {
    group_crashes(SimModel::Write, Migration::Background, 1);
}

#[test]
fn a_crash_with_several_syncs_in_flight_loses_only_unacknowledged_writes() {
    group_crashes(SimModel::Write, Migration::Inline, 4);
}

/// The `Write` model with the leader's log writes as whole pages through `O_DIRECT`
/// (`log_direct_io`: any word stored in a flushed page may reach the media with it); the
/// tests above model the default, exact ranges through the page cache (a store reaches the
/// media only with its own flushed line).
#[test]
fn a_crash_inside_a_group_of_direct_page_writes_loses_only_unacknowledged_writes() {
    group_crashes_with(
        SimModel::Write,
        Migration::Inline,
        GroupCommit {
            window: false,
            syncs_in_flight_max: 4,
            direct: true,
            gather: false,
        },
        true,
    );
}

/// Gathering on (the default) with syncs slow enough for it to engage (each simulated
/// barrier sleeps 60 µs, above `GATHER_SYNC_NS_MIN`): leaders wait for the writers the last
/// sync released, and a crash at any barrier still loses only unacknowledged writes.
#[test]
fn a_crash_inside_a_gathered_group_loses_only_unacknowledged_writes() {
    group_crashes_with(
        SimModel::Write,
        Migration::Inline,
        GroupCommit {
            window: false,
            syncs_in_flight_max: 4,
            direct: false,
            gather: true,
        },
        true,
    );
}

/// The recovery log by key hash (`log_pack_groups` off: each DRAM entry's records in one
/// partition, the layout of manifest version 3), with several syncs in flight.
#[test]
fn a_crash_inside_a_group_logged_by_key_hash_loses_only_unacknowledged_writes() {
    group_crashes_with(
        SimModel::Write,
        Migration::Background,
        GroupCommit {
            window: false,
            syncs_in_flight_max: 4,
            ..GroupCommit::default()
        },
        false,
    );
}

/// `n` keys whose DRAM entries differ (their writers never wait for each other's entry lock).
fn keys_in_distinct_entries(opts: &Options, n: usize) -> Vec<u64> {
    let geo = attune_plush::layout::Geometry {
        dram_entries_log2: opts.dram_entries_log2,
        fanout_log2: opts.fanout_log2,
    };
    let mut entries = std::collections::BTreeSet::new();
    (0u64..)
        .filter(|k| entries.insert(geo.entry_of(attune_plush::layout::hash_key(*k), 0)))
        .take(n)
        .collect()
}

/// `n` keys whose DRAM entries fall in distinct log partitions (logged by key hash, each in
/// its own partition, so on its own page).
fn keys_in_distinct_partitions(opts: &Options, n: usize) -> Vec<u64> {
    let geo = attune_plush::layout::Geometry {
        dram_entries_log2: opts.dram_entries_log2,
        fanout_log2: opts.fanout_log2,
    };
    let parts = opts.log_partitions;
    let mut seen = std::collections::BTreeSet::new();
    (0u64..)
        .filter(|k| seen.insert(geo.entry_of(attune_plush::layout::hash_key(*k), 0) & (parts - 1)))
        .take(n)
        .collect()
}

/// What [`held_group_crashes`] saw: group writes that reached the media and that did not, and
/// the log pages the group's sync wrote (in every seed).
struct HeldGroups {
    survived: u64,
    lost: u64,
    group_pages: Vec<u64>,
}

/// A group made on purpose: the first writer's barrier is held in flight until three more
/// writers wait, so those three form the next group, and the crash comes at that group's
/// barrier (after the leader handed their entries to the device, before it completed). The
/// held write was acknowledged and survives; each of the three is whole or absent.
fn held_group_crashes(opts: &Options, keys: &[u64], seeds: u64) -> HeldGroups {
    let mut out = HeldGroups {
        survived: 0,
        lost: 0,
        group_pages: Vec::new(),
    };
    for seed in 0..seeds {
        let sim = SimStorage::with_model(Image::new(), 0, seed, SimModel::Write);
        let db = Plush::open_with(Box::new(sim.clone()), opts.clone()).unwrap();
        for (i, k) in keys.iter().enumerate() {
            db.put(*k, 1 + i as u64).unwrap();
        }
        let before = db.stats();
        let f = sim.fences();
        sim.hold_barrier(f + 1, 3);
        sim.crash_at(f + 2);
        std::thread::scope(|s| {
            let held = s.spawn(|| db.put(keys[0], 100));
            while sim.fences() == f {
                std::thread::yield_now();
            }
            let group: Vec<_> = (1..4)
                .map(|i| {
                    let db = &db;
                    let k = keys[i];
                    s.spawn(move || db.put(k, 200 + i as u64))
                })
                .collect();
            held.join().unwrap().unwrap();
            for g in group {
                g.join().unwrap().unwrap();
            }
        });
        let after = db.stats();
        assert_eq!(
            (
                after.log_syncs - before.log_syncs,
                after.log_sync_barriers - before.log_sync_barriers
            ),
            (2, 4),
            "seed {seed}: one held barrier, then one group of three"
        );
        // The held barrier wrote its one entry's page; the rest is the group's.
        out.group_pages
            .push(after.log_sync_pages - before.log_sync_pages - 1);
        let image = sim.crash_image().expect("the group's barrier crashed");
        drop(db);
        let db = Plush::open_with(
            Box::new(SimStorage::with_model(image, 0, 0, SimModel::Write)),
            opts.clone(),
        )
        .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
        assert_eq!(
            db.get(keys[0]).unwrap(),
            Some(100),
            "seed {seed}: acknowledged write lost"
        );
        for (i, k) in keys.iter().enumerate().skip(1) {
            match db.get(*k).unwrap() {
                Some(v) if v == 200 + i as u64 => out.survived += 1,
                Some(v) if v == 1 + i as u64 => out.lost += 1,
                other => panic!("seed {seed}: key {k} holds {other:?}"),
            }
        }
        db.verify()
            .unwrap_or_else(|e| panic!("seed {seed}: verify: {e}"));
    }
    out
}

#[test]
fn a_crash_between_a_groups_hand_off_and_its_barrier_keeps_every_acknowledged_write() {
    let opts = Options {
        dram_entries_log2: 4,
        log_chunks: 6,
        ..options(Migration::Inline)
    };
    let keys = keys_in_distinct_entries(&opts, 4);
    let seen = held_group_crashes(&opts, &keys, 200);
    let (survived, lost) = (seen.survived, seen.lost);
    eprintln!(
        "group of three torn at its barrier: {survived} writes reached the media, {lost} not"
    );
    assert!(survived > 0 && lost > 0, "{survived} survived, {lost} lost");
}

/// Packing the log (`log_pack_groups`, the default): three writers whose keys are logged in
/// three different partitions by key hash write one log page per sync when packed (their
/// entries share the page of their chunk's header, which records the acknowledged entries),
/// three to six when logged by key hash (three entry pages, and the header pages of the
/// chunks whose earlier appends' acknowledgements the sync carries); either way a crash at
/// that group's barrier keeps every acknowledged write, and each of the three is whole or
/// absent.
#[test]
fn a_packed_group_writes_one_log_page_and_a_crash_at_its_barrier_keeps_acknowledged_writes() {
    for (pack, pages) in [(true, 1..=1u64), (false, 3..=6)] {
        let opts = Options {
            dram_entries_log2: 4,
            log_partitions: 4,
            log_chunks: 6,
            log_pack_groups: pack,
            ..options(Migration::Inline)
        };
        let keys = keys_in_distinct_partitions(&opts, 4);
        let seen = held_group_crashes(&opts, &keys, 60);
        assert!(
            seen.group_pages.iter().all(|p| pages.contains(p)),
            "log_pack_groups {pack}: pages per group {:?}, expected {pages:?}",
            seen.group_pages
        );
        assert!(seen.survived > 0 && seen.lost > 0, "log_pack_groups {pack}");
    }
}
