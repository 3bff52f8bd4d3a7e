//! What an open refuses, and writes nothing for: a directory that is not a Plush database, a
//! database whose manifest is missing, empty or damaged, files shorter than the manifest's
//! geometry, and geometry options that contradict the stored ones.
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
    assert_eq!(db.stats().migrations.iter().sum::<u64>(), 0);
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

/// A crash (no clean-close record in the manifest's word 12; these sessions run with `sync`
/// off, so no append was acknowledged as durable and the chunk header records none) during
/// the last append: the damaged last entry reads as that tear.
#[test]
fn a_torn_last_entry_is_a_tail_and_the_records_before_it_stay() {
    let dir = scratch();
    let opts = logged(dir.path());
    flip_log_byte(dir.path(), 64 + 32 * 999 + 5); // the last entry
    let p = dir.path().join("manifest.plush");
    let mut b = std::fs::read(&p).unwrap();
    b[12 * 8..13 * 8].fill(0);
    std::fs::write(&p, b).unwrap();
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

/// Opens `dir` with `opts` and returns the corruption error, checking that it names the
/// manifest and that the open wrote nothing.
fn manifest_refused(dir: &Path, opts: Options) -> String {
    let before = listing(dir);
    let err = Plush::open(dir, opts).err().unwrap();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    let path = dir.join("manifest.plush");
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    assert_eq!(listing(dir), before);
    err.to_string()
}

#[test]
fn an_empty_or_short_manifest_beside_plush_files_is_corruption_and_never_rewritten() {
    for len in [0, 8, 4095] {
        let dir = scratch();
        filled(dir.path());
        truncate(len)(&dir.path().join("manifest.plush"));
        // With the stored geometry and with the defaults: neither may write a default manifest.
        for opts in [options(), Options::default()] {
            let msg = manifest_refused(dir.path(), opts);
            assert!(
                msg.contains("restore manifest.plush from a backup"),
                "{msg}"
            );
            assert!(msg.contains("level-01.plush"), "{msg}");
        }
        let ro = Options {
            read_only: true,
            ..options()
        };
        manifest_refused(dir.path(), ro);
    }
}

/// A filled database whose manifest `edit` damaged, opened with `opts`: what
/// [`manifest_refused`] returns.
fn edited_manifest_refused(edit: impl Fn(&mut [u8]), opts: Options) -> String {
    let dir = scratch();
    filled(dir.path());
    let p = dir.path().join("manifest.plush");
    let mut b = std::fs::read(&p).unwrap();
    edit(&mut b);
    std::fs::write(&p, b).unwrap();
    manifest_refused(dir.path(), opts)
}

#[test]
fn a_manifest_with_a_zeroed_magic_beside_plush_files_is_corruption() {
    let msg = edited_manifest_refused(|b| b[..8].fill(0), Options::default());
    assert!(msg.contains("zero magic"), "{msg}");
}

#[test]
fn an_empty_manifest_alone_is_a_creation_cut_short_and_is_created() {
    let dir = scratch();
    std::fs::write(dir.path().join("manifest.plush"), b"").unwrap();
    let db = Plush::open(dir.path(), options()).unwrap();
    db.put(1, 2).unwrap();
    drop(db);
    assert_eq!(
        Plush::open(dir.path(), options()).unwrap().get(1).unwrap(),
        Some(2)
    );
}

#[test]
fn a_manifest_with_a_damaged_magic_is_corruption_not_a_foreign_directory() {
    let msg = edited_manifest_refused(|b| b[0] ^= 0x01, options());
    assert!(msg.contains("magic"), "{msg}");
}

#[test]
fn log_corruption_names_the_log_by_its_full_path() {
    let dir = scratch();
    let opts = logged(dir.path());
    flip_log_byte(dir.path(), 64 + 32 * 3 + 5);
    let err = Plush::open(dir.path(), opts).err().unwrap();
    let path = dir.path().join("log.plush");
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    match err {
        Error::Corruption { file, .. } => assert_eq!(file, path),
        e => panic!("{e}"),
    }
}

#[test]
fn a_geometry_option_that_differs_from_the_stored_one_is_refused_naming_both() {
    let dir = scratch();
    filled(dir.path());
    for (opts, name, given, stored) in [
        (
            Options {
                dram_entries_log2: 5,
                ..options()
            },
            "dram_entries_log2",
            "5",
            "2",
        ),
        (
            Options {
                fanout_log2: 3,
                ..options()
            },
            "fanout_log2",
            "3",
            "2",
        ),
        (
            Options {
                log_partitions: 2,
                ..options()
            },
            "log_partitions",
            "2",
            "4",
        ),
    ] {
        let err = Plush::open(dir.path(), opts).err().unwrap();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("{name} = {given} was given")),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("created with {name} = {stored}")),
            "{msg}"
        );
    }
}

#[test]
fn options_left_at_their_defaults_take_the_stored_geometry() {
    let dir = scratch();
    filled(dir.path());
    let opts = Options {
        sync: false,
        backend: Backend::Msync,
        ..Options::default()
    };
    let db = Plush::open(dir.path(), opts).unwrap();
    assert_eq!(db.options().dram_entries_log2, 2);
    for k in 0..3000u64 {
        assert_eq!(db.get(k).unwrap(), Some(k * 7));
    }
}
