//! Range partitioning (`Options::partitioning = Range`): scans against a `BTreeMap` model
//! across migrations and reopens, the manifest's record of the mode, the keys range mode
//! refuses, and what dense keys do to it.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_plush::{Error, Migration, Options, Partitioning, Plush};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

fn range(bits: u32) -> Options {
    Options {
        partitioning: Partitioning::Range,
        significant_key_bits: bits,
        migration: Migration::Inline,
        ..crate::support::small()
    }
}

/// [`range`] on the crash tests' geometry (4 DRAM entries of 64 records), so that a few
/// thousand keys migrate through several levels.
fn range_tiny(bits: u32) -> Options {
    Options {
        partitioning: Partitioning::Range,
        significant_key_bits: bits,
        migration: Migration::Inline,
        ..crate::support::tiny()
    }
}

/// Checks `scan` from random starts with random limits, and one full scan, against the model.
fn check_scans(db: &Plush, model: &BTreeMap<u64, Vec<u8>>, rng: &mut ChaCha8Rng, keys: u64) {
    let full: Vec<(u64, Vec<u8>)> = model.iter().map(|(k, v)| (*k, v.clone())).collect();
    assert_eq!(db.scan_bytes(0, usize::MAX).unwrap(), full);
    for _ in 0..40 {
        let start = rng.gen_range(0..keys + 10);
        let limit = rng.gen_range(0..150);
        let want: Vec<(u64, Vec<u8>)> = model
            .range(start..)
            .take(limit)
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        assert_eq!(
            db.scan_bytes(start, limit).unwrap(),
            want,
            "start {start} limit {limit}"
        );
    }
}

fn model_run(bits: u32, keys: u64, key_of: impl Fn(u64) -> u64, seed: u64) {
    let dir = crate::support::scratch();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    for round in 0..3 {
        let db = Plush::open(dir.path(), range_tiny(bits)).unwrap();
        check_scans(&db, &model, &mut rng, key_of(keys));
        for _ in 0..6000 {
            let k = key_of(rng.gen_range(0..keys));
            match rng.gen_range(0..10) {
                0..=1 => {
                    db.delete(k).unwrap();
                    model.remove(&k);
                }
                2 => {
                    // A value too long for a bucket: the payload log, resolved by the scan.
                    let v = vec![round as u8; rng.gen_range(9..40)];
                    db.put_bytes(&k.to_le_bytes(), &v).unwrap();
                    model.insert(k, v);
                }
                _ => {
                    let v = rng.gen_range(0..1u64 << 40);
                    db.put(k, v).unwrap();
                    model.insert(k, v.to_le_bytes().to_vec());
                }
            }
        }
        assert!(
            db.stats().migrations[2] > 0,
            "the run must migrate past level 1: {:?}",
            db.stats().migrations
        );
        check_scans(&db, &model, &mut rng, key_of(keys));
        db.verify().unwrap();
        if round == 1 {
            drop(db); // a crash-like reopen: the DRAM level comes back from the log
        } else {
            db.close().unwrap();
        }
    }
}

#[test]
fn scans_match_a_model_across_migrations_and_reopens_dense_keys() {
    // 3000 keys 0..3000 with 12 significant bits.
    model_run(12, 3000, |i| i, 1);
}

#[test]
fn scans_match_a_model_across_migrations_and_reopens_spread_keys() {
    // Keys spread over the whole u64 range with the default 64 bits.
    model_run(64, 3000, |i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15), 2);
}

#[test]
fn scan_on_a_hash_partitioned_database_says_to_create_it_with_range() {
    let dir = crate::support::scratch();
    let db = Plush::open(dir.path(), crate::support::small()).unwrap();
    db.put(1, 2).unwrap();
    let e = db.scan(0, 10).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("partitioning = range"), "{e}");
}

#[test]
fn reopening_with_the_other_partitioning_names_both() {
    let dir = crate::support::scratch();
    drop(Plush::open(dir.path(), range(20)).unwrap());
    let e = Plush::open(
        dir.path(),
        Options {
            significant_key_bits: 30,
            ..range(20)
        },
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("significant_key_bits = 30"), "{e}");
    assert!(e.to_string().contains("significant_key_bits = 20"), "{e}");
    // Left at the default (hash), the stored mode applies.
    let db = Plush::open(dir.path(), crate::support::small()).unwrap();
    assert_eq!(db.stats().partitioning, "range");
    assert_eq!(db.stats().significant_key_bits, 20);
    db.put(5, 6).unwrap();
    assert_eq!(db.scan(0, 10).unwrap(), vec![(5, 6)]);
    drop(db);

    let dir = crate::support::scratch();
    drop(Plush::open(dir.path(), crate::support::small()).unwrap());
    let e = Plush::open(dir.path(), range(64)).err().unwrap();
    let m = e.to_string();
    assert!(m.contains("partitioning = range was given"), "{m}");
    assert!(m.contains("created with partitioning = hash"), "{m}");
}

#[test]
fn range_mode_refuses_keys_it_cannot_place() {
    let dir = crate::support::scratch();
    let db = Plush::open(dir.path(), range(16)).unwrap();
    let e = db.put_bytes(b"abc", b"v").unwrap_err();
    assert!(e.to_string().contains("8-byte integer keys"), "{e}");
    assert!(db.get_bytes(b"a longer key").is_err());
    assert!(db.delete_bytes(b"abc").is_err());
    let e = db.put(1 << 16, 1).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("16 significant key bits"), "{e}");
    db.put((1 << 16) - 1, 1).unwrap();
    assert_eq!(db.get(1 << 16).unwrap(), None);
    assert_eq!(db.scan(1 << 16, 10).unwrap(), vec![]);
    assert_eq!(db.scan(0, 10).unwrap(), vec![((1 << 16) - 1, 1)]);
}

/// Small integer keys with 64 significant bits all share level 1's entry 0 and each deeper
/// level's first entry: once the deepest level's entry is full, upserts fail with a clear
/// `Full` error (nothing is lost: the keys acknowledged so far still read back); with the
/// keys' width as significant bits they spread.
#[test]
fn dense_keys_overfill_one_range_unless_their_width_is_given() {
    let dir = crate::support::scratch();
    let opts = Options {
        levels_max: 3,
        ..range(64)
    };
    let db = Plush::open(dir.path(), opts).unwrap();
    let mut acked = 0;
    let err = loop {
        match db.put(acked, acked + 1) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 10_000, "dense keys never overfilled");
    };
    assert!(matches!(err, Error::Full(_)), "{err}");
    assert!(err.to_string().contains("significant_key_bits"), "{err}");
    // DRAM entry 0 and one entry on each of the three levels: 4 × 64 records.
    assert_eq!(acked, 4 * 64);
    for k in 0..acked {
        assert_eq!(db.get(k).unwrap(), Some(k + 1), "key {k}");
    }
    let all = db.scan(0, usize::MAX).unwrap();
    assert_eq!(all.len() as u64, acked);
    drop(db);

    let dir = crate::support::scratch();
    let opts = Options {
        levels_max: 3,
        ..range(13)
    };
    let db = Plush::open(dir.path(), opts).unwrap();
    for k in 0..8000 {
        db.put(k, k + 1).unwrap();
    }
    assert_eq!(
        db.scan(4000, 3).unwrap(),
        vec![(4000, 4001), (4001, 4002), (4002, 4003)]
    );
}
