//! What an open refuses, and writes nothing for: a directory that is not a Plush database, a
//! database whose manifest is missing, and files shorter than the manifest's geometry.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{scratch, small};
use attune_plush::{Backend, Error, Options, Plush};
use std::collections::BTreeMap;
use std::path::Path;

fn options() -> Options {
    Options {
        dram_entries_log2: 2,
        payload_segment_bytes: 64 << 10,
        backend: Backend::Msync,
        sync: false,
        ..small()
    }
}

/// Every file's name and length: what "wrote nothing" is checked against.
fn listing(dir: &Path) -> BTreeMap<String, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect()
}

/// A database with records on two persistent levels and in the log.
fn filled(dir: &Path) {
    let db = Plush::open(dir, options()).unwrap();
    for k in 0..3000u64 {
        db.put(k, k * 7).unwrap();
    }
    assert!(db.stats().levels >= 2, "{:?}", db.stats());
}

#[test]
fn a_missing_manifest_is_corruption_and_nothing_is_written() {
    let dir = scratch();
    filled(dir.path());
    std::fs::remove_file(dir.path().join("manifest.plush")).unwrap();
    let before = listing(dir.path());
    for opts in [options(), Options::default()] {
        let err = Plush::open(dir.path(), opts).err().unwrap();
        assert!(matches!(err, Error::Corruption { .. }), "{err}");
        assert!(
            err.to_string().contains("manifest.plush is missing"),
            "{err}"
        );
        assert_eq!(listing(dir.path()), before);
    }
}

#[test]
fn a_directory_of_other_files_is_not_a_database_and_nothing_is_written() {
    let dir = scratch();
    std::fs::write(dir.path().join("data.txt"), b"mine").unwrap();
    let before = listing(dir.path());
    let err = Plush::open(dir.path(), options()).err().unwrap();
    assert!(matches!(err, Error::NotADatabase { .. }), "{err}");
    assert!(err.to_string().contains("data.txt"), "{err}");
    assert_eq!(listing(dir.path()), before);
}

#[test]
fn an_empty_directory_or_one_with_only_a_lock_file_is_created() {
    let dir = scratch();
    std::fs::write(dir.path().join("LOCK"), b"").unwrap();
    let db = Plush::open(dir.path(), options()).unwrap();
    db.put(1, 2).unwrap();
    drop(db);
    assert_eq!(
        Plush::open(dir.path(), options()).unwrap().get(1).unwrap(),
        Some(2)
    );
}

/// Damages one file of a filled database; the open must fail with corruption naming it.
fn refused_after(damage: impl Fn(&Path), file: &str) {
    let dir = scratch();
    filled(dir.path());
    damage(&dir.path().join(file));
    let before = listing(dir.path());
    let err = Plush::open(dir.path(), options()).err().unwrap();
    assert!(matches!(err, Error::Corruption { .. }), "{file}: {err}");
    assert!(err.to_string().contains(file), "{file}: {err}");
    assert_eq!(listing(dir.path()), before, "{file}");
}

fn truncate(to: u64) -> impl Fn(&Path) {
    move |p: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(to)
            .unwrap()
    }
}

fn remove(p: &Path) {
    std::fs::remove_file(p).unwrap()
}

#[test]
fn a_missing_or_short_level_file_is_corruption() {
    for file in ["level-01.plush", "level-02.plush"] {
        refused_after(remove, file);
        refused_after(truncate(0), file);
        refused_after(truncate(4096), file);
    }
}

#[test]
fn a_missing_or_short_log_is_corruption() {
    refused_after(remove, "log.plush");
    refused_after(truncate(0), "log.plush");
    refused_after(truncate(4096), "log.plush");
}

#[test]
fn a_zeroed_level_header_is_corruption() {
    refused_after(
        |p: &Path| {
            let mut b = std::fs::read(p).unwrap();
            b[..64].fill(0);
            std::fs::write(p, b).unwrap();
        },
        "level-02.plush",
    );
}

#[test]
fn an_undamaged_database_reopens_with_every_record() {
    let dir = scratch();
    filled(dir.path());
    let db = Plush::open(dir.path(), options()).unwrap();
    for k in 0..3000u64 {
        assert_eq!(db.get(k).unwrap(), Some(k * 7));
    }
}

/// A database whose log holds many records not yet migrated (a large DRAM level).
fn logged(dir: &Path) -> Options {
    let opts = Options {
        dram_entries_log2: 8,
        log_partitions: 1,
        log_chunks: 16,
        ..options()
    };
    let db = Plush::open(dir, opts.clone()).unwrap();
    for k in 0..1000u64 {
        db.put(k, k + 1).unwrap();
    }
    assert_eq!(db.stats().levels, 0);
    opts
}

fn flip_log_byte(dir: &Path, off: usize) {
    let p = dir.join("log.plush");
    let mut b = std::fs::read(&p).unwrap();
    b[off] ^= 0x10;
    std::fs::write(&p, b).unwrap();
}

#[test]
fn a_damaged_log_entry_followed_by_records_is_corruption() {
    let dir = scratch();
    let opts = logged(dir.path());
    flip_log_byte(dir.path(), 64 + 32 * 3 + 5); // entry 3 of chunk 0
    let err = Plush::open(dir.path(), opts).err().unwrap();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    assert!(err.to_string().contains("log.plush"), "{err}");
}

#[test]
fn a_damaged_log_chunk_header_is_corruption() {
    let dir = scratch();
    let opts = logged(dir.path());
    flip_log_byte(dir.path(), 9); // the generation word of chunk 0
    let err = Plush::open(dir.path(), opts).err().unwrap();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    assert!(err.to_string().contains("header"), "{err}");
}

#[test]
fn a_torn_last_entry_is_a_tail_and_the_records_before_it_stay() {
    let dir = scratch();
    let opts = logged(dir.path());
    flip_log_byte(dir.path(), 64 + 32 * 999 + 5); // the last entry
    let db = Plush::open(dir.path(), opts).unwrap();
    for k in 0..999u64 {
        assert_eq!(db.get(k).unwrap(), Some(k + 1));
    }
}

#[test]
fn verify_counts_the_records_waiting_in_the_dram_level() {
    let dir = scratch();
    let opts = logged(dir.path());
    let db = Plush::open(dir.path(), opts).unwrap();
    let r = db.verify().unwrap();
    assert_eq!((r.records, r.dram_records), (0, 1000));
}
