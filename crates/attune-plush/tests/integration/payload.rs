//! The payload log end to end: keys and values of any size up to the limits, out of place;
//! updates, deletes and garbage collection against an oracle; reopen; crashes at random
//! barriers of the crash simulator (inside payload appends, segment creation, collections and
//! migrations), with no acknowledged record lost and no overwritten or deleted one back.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::scratch;
use attune_plush::payload::{KEY_BYTES_MAX, VALUE_BYTES_MAX};
use attune_plush::{Backend, Error, Image, Migration, Options, Plush, SimModel, SimStorage};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

fn options() -> Options {
    Options {
        dram_entries_log2: 4,
        fanout_log2: 2,
        log_partitions: 2,
        log_chunk_bytes: 16 << 10,
        log_chunks: 4,
        payload_segment_bytes: 16 << 10,
        ..Options::default()
    }
}

/// Opens `dir` writable and then read-only: each open must fail with corruption, and `check`
/// sees its message right after it (before the next open), so that what an open left on disk
/// can be checked per open.
fn every_open_fails_as_corruption(dir: &std::path::Path, opts: &Options, check: impl Fn(&str)) {
    for read_only in [false, true] {
        let o = Options {
            read_only,
            ..opts.clone()
        };
        let err = Plush::open(dir, o).err().expect("the open must fail");
        assert!(matches!(&err, Error::Corruption { .. }), "{err}");
        check(&err.to_string());
    }
}

/// Key `i`: lengths 0..40 (8-byte ones included, so inline and out-of-place records mix).
fn key(i: u64) -> Vec<u8> {
    let len = (i % 41) as usize;
    let mut k: Vec<u8> = i.to_le_bytes().iter().cycle().take(len).copied().collect();
    if len >= 4 {
        k[..4].copy_from_slice(&(i as u32).to_be_bytes());
    }
    k
}

fn value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = match rng.gen_range(0..4) {
        0 => 8,
        1 => rng.gen_range(0..8),
        _ => rng.gen_range(9..300),
    };
    (0..len).map(|_| rng.gen()).collect()
}

fn check(db: &Plush, oracle: &BTreeMap<Vec<u8>, Option<Vec<u8>>>, ctx: &str) {
    for (k, want) in oracle {
        assert_eq!(&db.get_bytes(k).unwrap(), want, "{ctx}: key {k:?}");
    }
    db.verify().unwrap_or_else(|e| panic!("{ctx}: verify: {e}"));
}

#[test]
fn variable_size_records_survive_updates_collection_and_reopen() {
    for backend in [Backend::Write, Backend::Msync] {
        let dir = scratch();
        let opts = Options {
            backend,
            ..options()
        };
        let db = Plush::open(dir.path(), opts.clone()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut oracle = BTreeMap::new();
        for i in 0..6000u64 {
            let k = key(rng.gen_range(0..400));
            if i % 9 == 4 {
                db.delete_bytes(&k).unwrap();
                oracle.insert(k, None);
            } else {
                let v = value(&mut rng);
                db.put_bytes(&k, &v).unwrap();
                oracle.insert(k, Some(v));
            }
        }
        check(&db, &oracle, "before reopen");
        let s = db.stats();
        assert!(s.payload_appends > 3000 && s.levels >= 2, "{s:?}");
        assert!(
            s.payload_gc_runs > 0,
            "automatic collection never ran: {s:?}"
        );
        drop(db);
        let db = Plush::open(dir.path(), opts).unwrap();
        check(&db, &oracle, "after reopen");
        // Collect everything: only live records survive, and the table still answers.
        db.checkpoint().unwrap();
        let before = db.stats();
        db.collect_garbage(true).unwrap();
        let after = db.stats();
        assert!(after.payload_gc_bytes_freed > 0, "{after:?}");
        assert!(
            after.payload_segments <= before.payload_segments,
            "{after:?}"
        );
        check(&db, &oracle, "after a full collection");
        let live: usize = oracle
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| k.len() + v.len() + 16))
            .sum();
        assert!(
            (after.payload_bytes as usize) < 4 * live + 4 * (16 << 10),
            "payload bytes {} for {live} live bytes",
            after.payload_bytes
        );
    }
}

#[test]
fn collection_off_keeps_every_segment() {
    let dir = scratch();
    let opts = Options {
        payload_gc: false,
        ..options()
    };
    let db = Plush::open(dir.path(), opts).unwrap();
    for i in 0..3000u64 {
        db.put_bytes(&key(i % 50), &[i as u8; 100]).unwrap();
    }
    let s = db.stats();
    assert_eq!(s.payload_gc_runs, 0);
    assert!(s.payload_segments > 10, "{s:?}");
}

#[test]
fn bad_sizes_are_refused_naming_the_argument() {
    let dir = scratch();
    let db = Plush::open(
        dir.path(),
        Options {
            payload_segment_bytes: 2 << 20,
            ..options()
        },
    )
    .unwrap();
    let long_key = vec![1u8; KEY_BYTES_MAX + 1];
    let err = db.put_bytes(&long_key, b"v").unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.starts_with("key is")),
        "{err}"
    );
    assert!(matches!(
        db.get_bytes(&long_key),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.delete_bytes(&long_key),
        Err(Error::InvalidArgument(_))
    ));
    let err = db
        .put_bytes(b"k", &vec![0u8; VALUE_BYTES_MAX + 1])
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.starts_with("value is")),
        "{err}"
    );
    db.put_bytes(&vec![2u8; KEY_BYTES_MAX], &vec![3u8; VALUE_BYTES_MAX])
        .unwrap();
    assert_eq!(
        db.get_bytes(&vec![2u8; KEY_BYTES_MAX])
            .unwrap()
            .unwrap()
            .len(),
        VALUE_BYTES_MAX
    );
    // A value that does not fit this database's segments.
    let small = scratch();
    let db = Plush::open(small.path(), options()).unwrap();
    let err = db.put_bytes(b"k", &[0u8; 20_000]).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.starts_with("value is")),
        "{err}"
    );
}

#[test]
fn the_word_api_and_the_bytes_api_share_eight_byte_keys() {
    let dir = scratch();
    let db = Plush::open(dir.path(), options()).unwrap();
    db.put(5, 99).unwrap();
    assert_eq!(
        db.get_bytes(&5u64.to_le_bytes()).unwrap(),
        Some(99u64.to_le_bytes().to_vec())
    );
    db.put_bytes(&6u64.to_le_bytes(), b"a longer value")
        .unwrap();
    let err = db.get(6).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("14-byte value")),
        "{err}"
    );
    db.put_bytes(&6u64.to_le_bytes(), &7u64.to_le_bytes())
        .unwrap();
    assert_eq!(db.get(6).unwrap(), Some(7));
    db.put_bytes(b"", b"empty key").unwrap();
    db.put_bytes(b"empty value", b"").unwrap();
    assert_eq!(
        db.get_bytes(b"").unwrap().as_deref(),
        Some(&b"empty key"[..])
    );
    assert_eq!(
        db.get_bytes(b"empty value").unwrap().as_deref(),
        Some(&b""[..])
    );
    assert_eq!(db.get_bytes(b"absent").unwrap(), None);
}

#[test]
fn a_damaged_payload_record_is_corruption_not_data() {
    let dir = scratch();
    let opts = Options {
        backend: Backend::Msync,
        ..options()
    };
    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    db.put_bytes(b"some key", b"some value that is long")
        .unwrap();
    drop(db);
    let path = dir.path().join("payload-000001.plush");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[64 + 16 + 10] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let db = Plush::open(dir.path(), opts).unwrap();
    let err = db.get_bytes(b"some key").unwrap_err();
    assert!(matches!(&err, Error::Corruption { .. }), "{err}");
    assert!(err.to_string().contains("payload-000001.plush"), "{err}");
}

/// The lookup path compares the key in place and copies only the value: every byte of a
/// record's header, key and value, damaged alone, must read as corruption (a damaged key
/// never as an absent key), for keys and values that do and do not end on a word boundary.
#[test]
fn every_damaged_byte_of_a_payload_record_is_corruption() {
    let opts = Options {
        backend: Backend::Msync,
        ..options()
    };
    for (klen, vlen) in [(13usize, 0usize), (13, 5), (16, 1000), (9, 31), (24, 8)] {
        let key: Vec<u8> = (0..klen).map(|i| b'a' + i as u8).collect();
        let val: Vec<u8> = (0..vlen).map(|i| (i * 7 + 1) as u8).collect();
        let dir = scratch();
        let db = Plush::open(dir.path(), opts.clone()).unwrap();
        db.put_bytes(&key, &val).unwrap();
        assert_eq!(db.get_bytes(&key).unwrap().as_deref(), Some(&val[..]));
        drop(db);
        let path = dir.path().join("payload-000001.plush");
        let clean = std::fs::read(&path).unwrap();
        for i in 64..64 + 16 + klen + vlen {
            let mut bytes = clean.clone();
            bytes[i] ^= 0x04;
            std::fs::write(&path, bytes).unwrap();
            let db = Plush::open(dir.path(), opts.clone()).unwrap();
            let err = db.get_bytes(&key).unwrap_err();
            assert!(
                matches!(&err, Error::Corruption { .. }),
                "key {klen} B, value {vlen} B, byte {i}: {err}"
            );
        }
        std::fs::write(&path, &clean).unwrap();
        let db = Plush::open(dir.path(), opts.clone()).unwrap();
        assert_eq!(db.get_bytes(&key).unwrap().as_deref(), Some(&val[..]));
    }
}

const KEYS: u64 = 120;

fn sim_options(migration: Migration) -> Options {
    Options {
        migration,
        dram_filter_levels: 1,
        payload_segment_bytes: 8192,
        ..crate::support::tiny()
    }
}

type Oracle = BTreeMap<Vec<u8>, Option<Vec<u8>>>;
type InFlight = Option<(Vec<u8>, Option<Vec<u8>>)>;

fn run_ops(
    db: &Plush,
    sim: &SimStorage,
    rng: &mut ChaCha8Rng,
    ops: usize,
    o: &mut Oracle,
) -> InFlight {
    let manual = db.options().migration == Migration::Manual;
    for _ in 0..ops {
        if sim.crashed() {
            return None;
        }
        if manual && rng.gen_bool(0.1) {
            let r = db.migrate_queued();
            if sim.crashed() {
                return None;
            }
            r.unwrap();
        }
        if rng.gen_bool(0.01) {
            let r = db.collect_garbage(true);
            if sim.crashed() {
                return None;
            }
            r.unwrap();
        }
        let k = key(rng.gen_range(0..KEYS));
        let new = (!rng.gen_bool(0.15)).then(|| value(rng));
        let r = match &new {
            Some(v) => db.put_bytes(&k, v),
            None => db.delete_bytes(&k),
        };
        if sim.crashed() {
            return Some((k, new));
        }
        r.unwrap_or_else(|e| panic!("op failed without a crash: {e}"));
        o.insert(k, new);
    }
    None
}

fn check_sim(db: &Plush, o: &mut Oracle, in_flight: InFlight, seed: u64) {
    for i in 0..KEYS {
        let k = key(i);
        let want = o.get(&k).cloned().flatten();
        let got = db
            .get_bytes(&k)
            .unwrap_or_else(|e| panic!("seed {seed}: key {k:?}: {e}"));
        if let Some((fk, new)) = &in_flight {
            if *fk == k && (got == want || got == *new) {
                o.insert(k, got);
                continue;
            }
        }
        assert_eq!(got, want, "seed {seed}: key {k:?}");
    }
    db.verify()
        .unwrap_or_else(|e| panic!("seed {seed}: verify: {e}"));
}

#[test]
fn random_crashes_keep_variable_size_records() {
    let cases = 300u64;
    let mut gc_runs = 0;
    for (model, migration) in [
        (SimModel::Mapped, Migration::Inline),
        (SimModel::Write, Migration::Manual),
    ] {
        for seed in 0..cases {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut oracle = Oracle::new();
            let mut image = Image::new();
            for round in 0..2u64 {
                let ops = rng.gen_range(200..900);
                let crash = rng.gen_range(1..ops as u64 * 2);
                let sim = SimStorage::with_model(image, crash, seed * 4 + round, model);
                let in_flight =
                    match Plush::open_with(Box::new(sim.clone()), sim_options(migration)) {
                        Ok(db) => {
                            let f = run_ops(&db, &sim, &mut rng, ops, &mut oracle);
                            gc_runs += db.stats().payload_gc_runs;
                            f
                        }
                        Err(e) => {
                            assert!(sim.crashed(), "seed {seed}: open failed: {e}");
                            None
                        }
                    };
                image = sim.crash_image().unwrap_or_else(|| sim.image_now());
                let sim2 = SimStorage::with_model(image, 0, seed * 4 + round + 2, model);
                let db = Plush::open_with(Box::new(sim2.clone()), sim_options(migration))
                    .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
                check_sim(&db, &mut oracle, in_flight, seed);
                drop(db);
                image = sim2.image_now();
            }
        }
    }
    assert!(gc_runs > 100, "too few collections: {gc_runs}");
}

/// Every barrier of one run with payload records, each a crash point once.
#[test]
fn a_crash_at_every_barrier_keeps_variable_size_records() {
    let ops = 500;
    for (model, migration) in [
        (SimModel::Mapped, Migration::Inline),
        (SimModel::Write, Migration::Manual),
    ] {
        let total = {
            let sim = SimStorage::new(0, 0);
            let db = Plush::open_with(Box::new(sim.clone()), sim_options(migration)).unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            run_ops(&db, &sim, &mut rng, ops, &mut Oracle::new());
            let s = db.stats();
            assert!(s.payload_gc_runs > 0 && s.levels >= 2, "{s:?}");
            sim.fences()
        };
        for k in 1..=total {
            let sim = SimStorage::with_model(Image::new(), k, k, model);
            let mut oracle = Oracle::new();
            let mut rng = ChaCha8Rng::seed_from_u64(5);
            let in_flight = match Plush::open_with(Box::new(sim.clone()), sim_options(migration)) {
                Ok(db) => run_ops(&db, &sim, &mut rng, ops, &mut oracle),
                Err(_) => None,
            };
            assert!(sim.crashed(), "barrier {k} of {total} was not reached");
            let db = Plush::open_with(
                Box::new(SimStorage::with_model(
                    sim.crash_image().unwrap(),
                    0,
                    0,
                    model,
                )),
                sim_options(migration),
            )
            .unwrap_or_else(|e| panic!("barrier {k}: recovery failed: {e}"));
            check_sim(&db, &mut oracle, in_flight, k);
        }
    }
}

/// A database of `n` keys whose values (about 100 bytes) fill several 16 KiB segments.
fn filled(dir: &std::path::Path, n: u64) -> (Options, BTreeMap<Vec<u8>, Vec<u8>>) {
    let opts = Options {
        backend: Backend::Msync,
        payload_gc: false,
        ..options()
    };
    let db = Plush::open(dir, opts.clone()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..n {
        let (k, v) = (
            format!("user:{i:05}").into_bytes(),
            format!("{i:0100}").into_bytes(),
        );
        db.put_bytes(&k, &v).unwrap();
        model.insert(k, v);
    }
    drop(db);
    (opts, model)
}

fn segment(dir: &std::path::Path, n: u32) -> std::path::PathBuf {
    dir.join(format!("payload-{n:06}.plush"))
}

#[test]
fn a_collection_keeps_a_damaged_segment_and_loses_no_key() {
    let dir = scratch();
    let (opts, model) = filled(dir.path(), 400);
    // Damage a record near the start of segment 1: the records after it are still live.
    let path = segment(dir.path(), 1);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[64 + 3 * 128 + 40] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();

    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    let unreadable = |db: &Plush| {
        let mut bad = Vec::new();
        for (k, v) in &model {
            match db.get_bytes(k) {
                Ok(got) => assert_eq!(got.as_ref(), Some(v), "{k:?} read back wrong"),
                Err(e) => {
                    assert!(matches!(e, Error::Corruption { .. }), "{e}");
                    bad.push(k.clone());
                }
            }
        }
        bad
    };
    let before = unreadable(&db);
    assert_eq!(before.len(), 1, "one damaged record, one unreadable key");
    let err = db.collect_garbage(true).unwrap_err();
    assert!(matches!(&err, Error::Corruption { .. }), "{err}");
    assert!(err.to_string().contains("payload-000001.plush"), "{err}");
    assert!(err.to_string().contains("valid records after it"), "{err}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes.len() as u64);
    assert_eq!(unreadable(&db), before, "the collection lost no key");
    // Migrations and a reopen lose nothing either.
    db.checkpoint().unwrap();
    drop(db);
    let db = Plush::open(dir.path(), opts).unwrap();
    assert_eq!(unreadable(&db), before);
}

#[test]
fn a_missing_segment_fails_the_open_and_a_collected_one_does_not() {
    let dir = scratch();
    let (opts, mut model) = filled(dir.path(), 400);
    assert!(
        segment(dir.path(), 3).exists(),
        "the values fill three segments"
    );
    // Overwrite the keys of segment 1 (the first ~120) and collect: its file stays, empty.
    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    for (k, v) in model.iter_mut().take(150) {
        *v = b"new value, out of place too".to_vec();
        db.put_bytes(k, v).unwrap();
    }
    assert!(db.collect_garbage(true).unwrap() >= 1);
    assert_eq!(std::fs::metadata(segment(dir.path(), 1)).unwrap().len(), 0);
    db.checkpoint().unwrap();
    let rep = db.verify().unwrap();
    assert!(rep.payload_records > 0, "{rep:?}");
    drop(db);
    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    for (k, v) in &model {
        assert_eq!(db.get_bytes(k).unwrap().as_ref(), Some(v));
    }
    db.verify().unwrap();
    drop(db);

    // A live segment lost between opens: every open refuses, naming it.
    let live = (1..10)
        .map(|n| segment(dir.path(), n))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
        .unwrap();
    let keep = std::fs::read(&live).unwrap();
    std::fs::remove_file(&live).unwrap();
    for read_only in [false, true] {
        let o = Options {
            read_only,
            ..opts.clone()
        };
        let err = Plush::open(dir.path(), o)
            .err()
            .expect("the open must fail");
        assert!(matches!(&err, Error::Corruption { .. }), "{err}");
        let name = live.file_name().unwrap().to_string_lossy().into_owned();
        assert!(err.to_string().contains(&name), "{err}");
        assert!(err.to_string().contains("missing"), "{err}");
    }
    std::fs::write(&live, keep).unwrap();
    Plush::open(dir.path(), opts).unwrap().verify().unwrap();
}

#[test]
fn a_lost_newest_segment_fails_the_open_and_its_number_is_never_given_again() {
    let dir = scratch();
    let (opts, _) = filled(dir.path(), 400);
    let newest = (1..10)
        .rev()
        .map(|n| segment(dir.path(), n))
        .find(|p| p.exists())
        .unwrap();
    let keep = std::fs::read(&newest).unwrap();
    std::fs::remove_file(&newest).unwrap();
    // The manifest records the highest segment created: a new segment under the lost one's
    // number would give its pointers another key's records.
    let err = Plush::open(dir.path(), opts.clone())
        .err()
        .expect("the open must fail");
    assert!(matches!(&err, Error::Corruption { .. }), "{err}");
    let name = newest.file_name().unwrap().to_string_lossy().into_owned();
    assert!(err.to_string().contains(&name), "{err}");
    std::fs::write(&newest, keep).unwrap();
    Plush::open(dir.path(), opts).unwrap().verify().unwrap();
}

#[test]
fn a_database_whose_collections_removed_files_still_opens() {
    let dir = scratch();
    let (opts, mut model) = filled(dir.path(), 400);
    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    for (k, v) in model.iter_mut().take(150) {
        *v = b"x".repeat(20);
        db.put_bytes(k, v).unwrap();
    }
    assert!(db.collect_garbage(true).unwrap() >= 1);
    drop(db);
    // As an older build left it: the collected file removed, the manifest without the record.
    std::fs::remove_file(segment(dir.path(), 1)).unwrap();
    let manifest = dir.path().join("manifest.plush");
    let mut m = std::fs::read(&manifest).unwrap();
    m[80..88].fill(0);
    std::fs::write(&manifest, m).unwrap();
    let db = Plush::open(dir.path(), opts).unwrap();
    for (k, v) in &model {
        assert_eq!(db.get_bytes(k).unwrap().as_ref(), Some(v));
    }
    db.checkpoint().unwrap();
    db.verify().unwrap();
}

#[test]
fn a_segment_lost_before_the_manifest_recorded_numbers_is_never_a_dropped_key() {
    let dir = scratch();
    let (opts, model) = filled(dir.path(), 400);
    // As an older build left it, and then a live segment lost: the open cannot tell it from
    // a collected one, but reads and migrations can (its records are their keys' newest).
    let manifest = dir.path().join("manifest.plush");
    let mut m = std::fs::read(&manifest).unwrap();
    m[80..96].fill(0);
    std::fs::write(&manifest, m).unwrap();
    std::fs::remove_file(segment(dir.path(), 2)).unwrap();
    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    let lost: Vec<_> = model
        .keys()
        .filter(|k| db.get_bytes(k).is_err())
        .cloned()
        .collect();
    assert!(!lost.is_empty());
    let err = db.checkpoint().unwrap_err();
    assert!(matches!(&err, Error::Corruption { .. }), "{err}");
    assert!(err.to_string().contains("payload-000002.plush"), "{err}");
    assert!(db.verify().is_err());
    drop(db);
    let db = Plush::open(dir.path(), opts).unwrap();
    for k in &lost {
        assert!(
            db.get_bytes(k).is_err(),
            "{k:?} must stay an error, not vanish"
        );
    }
    for (k, v) in model.iter().filter(|(k, _)| !lost.contains(k)) {
        assert_eq!(db.get_bytes(k).unwrap().as_ref(), Some(v));
    }
}

fn segment_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("payload-"))
        .collect();
    names.sort();
    names
}

/// A short session (a CLI `put`) appends to the newest segment instead of creating one: ten
/// opens that write one record each leave one segment file, every record readable.
#[test]
fn opens_that_each_write_one_record_share_one_segment() {
    for backend in [Backend::Write, Backend::Msync] {
        let dir = scratch();
        let opts = Options {
            backend,
            ..options()
        };
        for i in 0..10u8 {
            let db = Plush::open(dir.path(), opts.clone()).unwrap();
            db.put_bytes(format!("session key {i}").as_bytes(), &[i; 40])
                .unwrap();
        }
        assert_eq!(segment_files(dir.path()), ["payload-000001.plush"]);
        let db = Plush::open(dir.path(), opts.clone()).unwrap();
        for i in 0..10u8 {
            let got = db.get_bytes(format!("session key {i}").as_bytes()).unwrap();
            assert_eq!(got, Some(vec![i; 40]), "{backend:?}: key {i}");
        }
        db.verify().unwrap();
        // An open that writes no payload record takes nothing from the segment either.
        db.put(7, 8).unwrap();
        drop(db);
        assert_eq!(segment_files(dir.path()), ["payload-000001.plush"]);
    }
}

/// Bytes after the newest segment's valid records (a record a crash tore) are never
/// overwritten: the next append seals that segment and starts another.
#[test]
fn a_torn_tail_is_sealed_not_overwritten() {
    let dir = scratch();
    let opts = Options {
        backend: Backend::Msync,
        ..options()
    };
    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..20u64 {
        let (k, v) = (key(i + 9), vec![i as u8; 50]);
        db.put_bytes(&k, &v).unwrap();
        model.insert(k, v);
    }
    drop(db);
    // Half a record's header after the last record: what a torn append leaves.
    let path = segment(dir.path(), 1);
    let mut bytes = std::fs::read(&path).unwrap();
    let end = bytes.len() - bytes.iter().rev().position(|b| *b != 0).unwrap();
    let tail = end.div_ceil(8) * 8;
    bytes[tail..tail + 8].copy_from_slice(&0x0000_0040_0000_0010u64.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();

    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    db.put_bytes(b"after the tear", &[9; 30]).unwrap();
    model.insert(b"after the tear".to_vec(), vec![9; 30]);
    assert_eq!(
        segment_files(dir.path()),
        ["payload-000001.plush", "payload-000002.plush"]
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the torn tail was written over"
    );
    for (k, v) in &model {
        assert_eq!(db.get_bytes(k).unwrap().as_ref(), Some(v));
    }
    db.verify().unwrap();
}

/// A segment file cut short outside Plush is corruption at every open, and a writable open
/// leaves it as it is (it used to extend it back to its length).
#[test]
fn a_truncated_segment_fails_the_open_and_is_not_extended() {
    let dir = scratch();
    let (opts, _) = filled(dir.path(), 400);
    let path = segment(dir.path(), 1);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(8192).unwrap();
    drop(f);
    every_open_fails_as_corruption(dir.path(), &opts, |msg| {
        assert!(msg.contains("payload-000001.plush"), "{msg}");
        assert!(msg.contains("truncated") && msg.contains("backup"), "{msg}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
    });
}

/// A zeroed magic word on a segment the manifest records as created, or one holding records, is
/// damage: every open fails naming it and leaves the file as it is (a writable open used to
/// empty it as if its creation had been cut short, destroying its records). With the magic
/// restored, every record reads back.
#[test]
fn a_zeroed_segment_magic_is_corruption_and_the_segment_is_kept() {
    let dir = scratch();
    let (opts, model) = filled(dir.path(), 400);
    let path = segment(dir.path(), 1);
    let pristine = std::fs::read(&path).unwrap();
    let mut damaged = pristine.clone();
    damaged[..8].fill(0);
    std::fs::write(&path, &damaged).unwrap();
    every_open_fails_as_corruption(dir.path(), &opts, |msg| {
        assert!(msg.contains("payload-000001.plush"), "{msg}");
        assert!(msg.contains("magic"), "{msg}");
        assert!(
            std::fs::read(&path).unwrap() == damaged,
            "the open changed the segment"
        );
    });
    std::fs::write(&path, &pristine).unwrap();
    let db = Plush::open(dir.path(), opts).unwrap();
    for (k, v) in &model {
        assert_eq!(db.get_bytes(k).unwrap().as_ref(), Some(v));
    }
    db.verify().unwrap();
}

/// An outside user's finding: the newest segment truncated to 0 bytes opened without an error
/// (a 0-byte file is how a collected segment looks), and only the reads of its keys failed.
/// No collection takes the newest segment the manifest records as created, so an empty file
/// there was cut outside Plush: every open fails naming it and leaves it as it is.
#[test]
fn the_newest_segment_truncated_to_nothing_fails_the_open() {
    let dir = scratch();
    let (opts, model) = filled(dir.path(), 400);
    let newest = (1..)
        .take_while(|n| segment(dir.path(), *n).exists())
        .last()
        .unwrap();
    assert!(newest > 1, "the test wants several segments");
    let path = segment(dir.path(), newest);
    let pristine = std::fs::read(&path).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    every_open_fails_as_corruption(dir.path(), &opts, |msg| {
        assert!(msg.contains(&format!("payload-{newest:06}.plush")), "{msg}");
        assert!(msg.contains("truncated") && msg.contains("backup"), "{msg}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    });
    std::fs::write(&path, &pristine).unwrap();
    let db = Plush::open(dir.path(), opts).unwrap();
    for (k, v) in &model {
        assert_eq!(db.get_bytes(k).unwrap().as_ref(), Some(v));
    }
    db.verify().unwrap();
}

/// A session with `sync` off makes nothing durable as it goes, and its close records a clean
/// close that vouches for the log: the payload records the log's pointers name must be on the
/// media by then too, or a power loss after the close would read them as damage. The
/// simulator keeps only a random part of what was never fenced.
#[test]
fn an_unsynced_sessions_close_makes_its_payload_records_durable() {
    let opts = Options {
        sync: false,
        ..sim_options(Migration::Inline)
    };
    for seed in 0..8u64 {
        let sim = SimStorage::new(0, seed);
        let db = Plush::open_with(Box::new(sim.clone()), opts.clone()).unwrap();
        let recs: Vec<(Vec<u8>, Vec<u8>)> = (0..120u32)
            .map(|i| (format!("a long key {i:04}").into_bytes(), vec![i as u8; 40]))
            .collect();
        for (k, v) in &recs {
            db.put_bytes(k, v).unwrap();
        }
        db.close().unwrap();
        let after = SimStorage::from_image(sim.image_now(), 0, seed);
        let db = Plush::open_with(Box::new(after), opts.clone()).unwrap();
        for (k, v) in &recs {
            assert_eq!(
                db.get_bytes(k).unwrap().as_deref(),
                Some(&v[..]),
                "seed {seed} key {}",
                String::from_utf8_lossy(k)
            );
        }
    }
}
