//! Level files of earlier format versions. Version 3, written before directory entries carried
//! record checksums: they open unchecked, read right, take new records, and `verify` counts
//! their records in `records_not_checksummed`. Version 4, whose checksum slots cover the
//! records but not the meta word: they open with the version-4 rules, read right and take new
//! records. The files are made from a current database by the older layouts
//! (`docs/formats/plush.md`): header word 1 is the version (and word 6 the header's crc32c
//! over words 1-5 with it); words 1 and 2 of every directory entry, the checksum slots, were
//! reserved and zero in version 3 and `size << 32 | crc` in version 4.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{scratch, small};
use attune_plush::layout::{Geometry, BUCKET_WORDS, FILTER_WORDS_PER_BUCKET};
use attune_plush::level::{
    level_file_name, FORMAT_VERSION, LEVEL_HEADER_BYTES, LEVEL_VERSION_CHECKED, LEVEL_VERSION_META,
};
use attune_plush::{Backend, Options, Plush};
use std::path::Path;

fn options() -> Options {
    Options {
        dram_entries_log2: 2,
        backend: Backend::Msync,
        sync: false,
        ..small()
    }
}

fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
}

fn set_word(b: &mut [u8], i: usize, v: u64) {
    b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
}

/// Rewrites level `num`'s file as version 3; returns the entries whose slots held a checksum.
fn make_version_3(dir: &Path, geo: Geometry, num: usize) -> usize {
    make_version(dir, geo, num, FORMAT_VERSION)
}

/// Rewrites level `num`'s file as `version` (3 or 4); returns the entries whose slots held a
/// checksum.
fn make_version(dir: &Path, geo: Geometry, num: usize, version: u64) -> usize {
    let p = dir.join(level_file_name(num));
    let mut b = std::fs::read(&p).unwrap();
    assert_eq!(word(&b, 1), LEVEL_VERSION_META, "a current level file");
    set_word(&mut b, 1, version);
    let header_crc = crc32c::crc32c(&b[8..48]);
    set_word(&mut b, 6, u64::from(header_crc));
    let dir_words = (8 + geo.buckets() * FILTER_WORDS_PER_BUCKET).div_ceil(8) * 8;
    let mut slotted = 0;
    for e in 0..geo.entries(num) {
        let w = LEVEL_HEADER_BYTES / 8 + e * dir_words;
        slotted += usize::from(word(&b, w + 1) != 0 || word(&b, w + 2) != 0);
        for s in [w + 1, w + 2] {
            // Version 4: the size moves from bits 48-63 to 32-63, the meta check goes.
            let v4 = (word(&b, s) >> 48) << 32 | (word(&b, s) & 0xffff_ffff);
            let v = if version == LEVEL_VERSION_CHECKED {
                v4
            } else {
                0
            };
            set_word(&mut b, s, v);
        }
    }
    // The buckets follow the directory: the file's length is the one the layout gives.
    let buckets = geo.entries(num) * geo.buckets() * BUCKET_WORDS * 8;
    assert!(b.len() >= LEVEL_HEADER_BYTES + geo.entries(num) * dir_words * 8 + buckets);
    std::fs::write(&p, b).unwrap();
    slotted
}

#[test]
fn version_3_level_files_open_unchecked_read_right_and_are_counted() {
    let dir = scratch();
    let o = options();
    let geo = Geometry {
        dram_entries_log2: o.dram_entries_log2,
        fanout_log2: o.fanout_log2,
    };
    let levels = {
        let db = Plush::open(dir.path(), o.clone()).unwrap();
        for k in 0..3000u64 {
            db.put(k, k * 7).unwrap();
        }
        db.checkpoint().unwrap();
        let r = db.verify().unwrap();
        assert_eq!(r.records_not_checksummed, 0, "{r:?}");
        assert!(r.levels >= 2, "{r:?}");
        r.levels
    };
    let slotted: usize = (1..=levels)
        .map(|n| make_version_3(dir.path(), geo, n))
        .sum();
    assert!(slotted > 0, "the current files carried checksums");

    let db = Plush::open(dir.path(), o.clone()).unwrap();
    for k in 0..3000u64 {
        assert_eq!(db.get(k).unwrap(), Some(k * 7), "key {k}");
    }
    assert_eq!(db.get(3000).unwrap(), None);
    let r = db.verify().unwrap();
    assert!(r.records >= 3000 && r.dram_records == 0, "{r:?}");
    assert_eq!(r.records_not_checksummed, r.records, "{r:?}");

    // New records migrate into the unchecked files, which stay version 3 and readable.
    for k in 3000..4000u64 {
        db.put(k, k * 7).unwrap();
    }
    db.delete(5).unwrap();
    db.checkpoint().unwrap();
    drop(db);
    let db = Plush::open(dir.path(), o).unwrap();
    for k in 0..4000u64 {
        let want = (k != 5).then_some(k * 7);
        assert_eq!(db.get(k).unwrap(), want, "key {k}");
    }
    let r = db.verify().unwrap();
    assert!(r.records_not_checksummed > 0, "{r:?}");
    for n in 1..=levels {
        let b = std::fs::read(dir.path().join(level_file_name(n))).unwrap();
        assert_eq!(word(&b, 1), FORMAT_VERSION, "level {n}");
    }
}

#[test]
fn version_4_level_files_open_with_their_rules_read_right_and_take_records() {
    let dir = scratch();
    let o = options();
    let geo = Geometry {
        dram_entries_log2: o.dram_entries_log2,
        fanout_log2: o.fanout_log2,
    };
    let levels = {
        let db = Plush::open(dir.path(), o.clone()).unwrap();
        for k in 0..3000u64 {
            db.put(k, k * 7).unwrap();
        }
        db.checkpoint().unwrap();
        db.verify().unwrap().levels
    };
    for n in 1..=levels {
        make_version(dir.path(), geo, n, LEVEL_VERSION_CHECKED);
    }
    let db = Plush::open(dir.path(), o.clone()).unwrap();
    for k in 0..3000u64 {
        assert_eq!(db.get(k).unwrap(), Some(k * 7), "key {k}");
    }
    let r = db.verify().unwrap();
    assert_eq!(r.records_not_checksummed, 0, "{r:?}");
    for k in 3000..4000u64 {
        db.put(k, k * 7).unwrap();
    }
    db.checkpoint().unwrap();
    drop(db);
    let db = Plush::open(dir.path(), o).unwrap();
    for k in 0..4000u64 {
        assert_eq!(db.get(k).unwrap(), Some(k * 7), "key {k}");
    }
    db.verify().unwrap();
    for n in 1..=levels {
        let b = std::fs::read(dir.path().join(level_file_name(n))).unwrap();
        assert_eq!(word(&b, 1), LEVEL_VERSION_CHECKED, "level {n}");
    }
}
