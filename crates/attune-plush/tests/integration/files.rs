//! The file back ends end to end: records survive close and reopen through the recovery log
//! and the level files, with pwrite (group commit), msync and (where the CPU has it) clwb; one
//! writer per directory; concurrent writers and readers agree with a per-thread oracle.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{scratch, small};
use attune_plush::persist::clwb_available;
use attune_plush::{Backend, Error, Options, Plush};
use std::collections::HashMap;

fn options(backend: Backend) -> Options {
    Options { backend, ..small() }
}

fn round_trip(backend: Backend) {
    let dir = scratch();
    let db = Plush::open(dir.path(), options(backend)).unwrap();
    for k in 0..30_000u64 {
        db.put(k, k * 3).unwrap();
    }
    for k in (0..30_000u64).step_by(7) {
        db.delete(k).unwrap();
    }
    assert!(db.stats().levels >= 2);
    drop(db);
    let db = Plush::open(dir.path(), options(backend)).unwrap();
    for k in 0..30_000u64 {
        let want = (k % 7 != 0).then_some(k * 3);
        assert_eq!(db.get(k).unwrap(), want, "key {k}");
    }
    db.verify().unwrap();
}

#[test]
fn write_backend_keeps_every_record_across_reopen() {
    round_trip(Backend::Write);
}

/// Durable upserts from four threads at once: their barriers share fdatasyncs (group commit);
/// every acknowledged record is in the file after reopen.
#[test]
fn concurrent_synced_writers_share_barriers_and_keep_every_record() {
    let dir = scratch();
    let db = Plush::open(dir.path(), options(Backend::Write)).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let db = &db;
            s.spawn(move || {
                for i in 0..3_000u64 {
                    db.put(i * 4 + t, i ^ t).unwrap();
                }
            });
        }
    });
    let fences = db.stats().fences;
    assert!(fences >= 12_000, "one barrier per upsert: {fences}");
    drop(db);
    let db = Plush::open(dir.path(), options(Backend::Write)).unwrap();
    for t in 0..4u64 {
        for i in 0..3_000u64 {
            assert_eq!(
                db.get(i * 4 + t).unwrap(),
                Some(i ^ t),
                "thread {t} item {i}"
            );
        }
    }
    db.verify().unwrap();
}

/// The same on the disk (the target directory's file system, not tmpfs), with the leader's
/// page writes through `O_DIRECT` and through the page cache, each reopened with the other
/// setting: four synced writers (every upsert acknowledged after its group's `fdatasync`),
/// some keys upserted twice, so pages are written again after their first write.
#[test]
fn synced_writers_on_the_disk_keep_every_record_with_direct_and_buffered_log_writes() {
    for direct in [true, false] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let opts = |direct: bool| Options {
            log_direct_io: direct,
            ..options(Backend::Write)
        };
        let db = Plush::open(dir.path(), opts(direct)).unwrap();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let db = &db;
                s.spawn(move || {
                    for i in 0..150u64 {
                        db.put((i % 100) * 4 + t, i << 8 | t).unwrap();
                    }
                });
            }
        });
        let st = db.stats();
        assert!(st.fences >= 600, "one barrier per upsert: {}", st.fences);
        drop(db);
        let db = Plush::open(dir.path(), opts(!direct)).unwrap();
        for t in 0..4u64 {
            for i in 50..150u64 {
                assert_eq!(
                    db.get((i % 100) * 4 + t).unwrap(),
                    Some(i << 8 | t),
                    "direct {direct}: thread {t} item {i}"
                );
            }
        }
        db.verify().unwrap();
    }
}

#[test]
fn msync_files_keep_every_record_across_reopen() {
    round_trip(Backend::Msync);
}

#[test]
fn clwb_mapping_keeps_every_record_across_reopen() {
    if clwb_available() {
        round_trip(Backend::Clwb);
    }
}

#[test]
fn a_second_opener_gets_a_locked_error() {
    let dir = scratch();
    let _db = Plush::open(dir.path(), options(Backend::Msync)).unwrap();
    let err = Plush::open(dir.path(), options(Backend::Msync))
        .err()
        .unwrap();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
}

#[test]
fn a_missing_database_without_create_is_not_a_database() {
    let dir = scratch();
    let opts = Options {
        create_if_missing: false,
        ..options(Backend::Msync)
    };
    let err = Plush::open(&dir.path().join("nothing"), opts)
        .err()
        .unwrap();
    assert!(matches!(err, Error::NotADatabase { .. }), "{err}");
}

#[test]
fn values_in_the_pointer_space_are_stored_out_of_place() {
    let dir = scratch();
    let db = Plush::open(dir.path(), options(Backend::Write)).unwrap();
    let odd = [
        attune_plush::TOMBSTONE,
        0xFFFF_0000_0000_0001,
        0xFFFF_FFFF_FFFF_FFFE,
    ];
    for (k, v) in odd.iter().enumerate() {
        db.put(k as u64, *v).unwrap();
    }
    assert_eq!(db.stats().payload_appends, 3);
    drop(db);
    let db = Plush::open(dir.path(), options(Backend::Write)).unwrap();
    for (k, v) in odd.iter().enumerate() {
        assert_eq!(db.get(k as u64).unwrap(), Some(*v));
    }
}

#[test]
fn a_damaged_manifest_is_corruption() {
    let dir = scratch();
    drop(Plush::open(dir.path(), options(Backend::Msync)).unwrap());
    let path = dir.path().join("manifest.plush");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let err = Plush::open(dir.path(), options(Backend::Msync))
        .err()
        .unwrap();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
}

#[test]
fn two_writers_and_a_reader_agree_with_their_oracles() {
    let dir = scratch();
    let opts = Options {
        sync: false,
        ..options(Backend::Msync)
    };
    let db = Plush::open(dir.path(), opts.clone()).unwrap();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let db = &db;
            s.spawn(move || {
                let mut mine = HashMap::new();
                for i in 0..40_000u64 {
                    // Disjoint key sets per thread, overwritten many times.
                    let k = (i * 7919 % 5000) * 2 + t;
                    db.put(k, i).unwrap();
                    mine.insert(k, i);
                    if i % 97 == 0 {
                        let probe = (i * 31 % 5000) * 2 + t;
                        assert_eq!(
                            db.get(probe).unwrap(),
                            mine.get(&probe).copied(),
                            "thread {t}"
                        );
                    }
                }
                for (k, v) in mine {
                    assert_eq!(db.get(k).unwrap(), Some(v), "thread {t} key {k}");
                }
            });
        }
        let db = &db;
        s.spawn(move || {
            for i in 0..50_000u64 {
                let _ = db.get(i % 10_000);
            }
        });
    });
    drop(db);
    let db = Plush::open(dir.path(), opts).unwrap();
    db.verify().unwrap();
}

/// Log chunks take file blocks as their tail reaches them (`log::RESERVE_STEP_BYTES` at a
/// time), not when they are taken: a new default database allocates 64 partitions × 64 KiB of
/// its 1.9 GiB log file, not a 5 MiB chunk per partition (320 MiB).
#[test]
fn a_new_database_allocates_its_log_as_it_fills() {
    use std::os::unix::fs::MetadataExt;
    let dir = scratch();
    let allocated =
        |dir: &std::path::Path| std::fs::metadata(dir.join("log.plush")).unwrap().blocks() * 512;
    let fast = Options {
        sync: false,
        ..Options::default()
    };
    let db = Plush::open(dir.path(), fast.clone()).unwrap();
    let new = allocated(dir.path());
    // Each partition's first 64 KiB, and on tmpfs also the pages of the other chunks'
    // headers, which recovery reads through the shared mapping (a read fault allocates a
    // tmpfs page; on a disk file system it maps the zero page).
    assert!(
        new <= 64 * ((64 << 10) + 6 * 4096),
        "a new log allocated {new} bytes"
    );
    // One partition's appends pass its first step: the next step is allocated, no more.
    let per_step = (64 << 10) / 32;
    let mut n = 0;
    let mut k = 0u64;
    while n < 3 * per_step * 64 {
        db.put(k, k).unwrap();
        k += 1;
        n += 1;
    }
    drop(db);
    let used = allocated(dir.path());
    assert!(used > new, "{used} <= {new}");
    // At most the step its tail reached past the three it filled, per partition, and the
    // header pages of its other chunks on tmpfs (as above).
    assert!(used <= 64 * (4 * (64 << 10) + 6 * 4096), "{used}");
    let db = Plush::open(dir.path(), fast).unwrap();
    for k in (0..k).step_by(97) {
        assert_eq!(db.get(k).unwrap(), Some(k));
    }
}

/// The log's layout is fixed at creation: a database logged by key hash (manifest version 3,
/// which older builds read) stays so when reopened with packing at its default (on) and keeps
/// every record; a packed one (version 4) reopened with packing explicitly off is refused
/// (an explicit mismatch with the stored geometry is an invalid argument). A manifest of
/// a version this build does not know is refused, not read.
#[test]
fn the_log_layout_is_fixed_at_creation_and_an_unknown_version_is_refused() {
    let version = |dir: &std::path::Path| {
        let bytes = std::fs::read(dir.join("manifest.plush")).unwrap();
        u64::from_le_bytes(bytes[8..16].try_into().unwrap())
    };
    for (pack, want) in [(false, 3u64), (true, 4)] {
        let dir = scratch();
        let opts = |pack| Options {
            log_pack_groups: pack,
            ..options(Backend::Write)
        };
        let db = Plush::open(dir.path(), opts(pack)).unwrap();
        for k in 0..3_000u64 {
            db.put(k, k + 1).unwrap();
        }
        drop(db);
        assert_eq!(version(dir.path()), want, "log_pack_groups {pack}");
        if pack {
            // Explicitly asking for the other layout than the stored one is refused ...
            let err = Plush::open(dir.path(), opts(false)).err().unwrap();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
            assert!(err.to_string().contains("log_pack_groups = false"), "{err}");
            continue;
        }
        // ... while the option at its default yields to the stored layout.
        let db = Plush::open(dir.path(), opts(!pack)).unwrap();
        for k in 3_000..6_000u64 {
            db.put(k, k + 1).unwrap();
        }
        drop(db);
        assert_eq!(
            version(dir.path()),
            want,
            "reopened with log_pack_groups {}",
            !pack
        );
        let db = Plush::open(dir.path(), opts(!pack)).unwrap();
        for k in 0..6_000u64 {
            assert_eq!(db.get(k).unwrap(), Some(k + 1), "key {k}");
        }
        drop(db);
    }
    let dir = scratch();
    drop(Plush::open(dir.path(), options(Backend::Write)).unwrap());
    let path = dir.path().join("manifest.plush");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..16].copy_from_slice(&5u64.to_le_bytes());
    // A damaged version word (its checksum no longer holds) is damage, not a newer format.
    std::fs::write(&path, &bytes).unwrap();
    let err = Plush::open(dir.path(), options(Backend::Write))
        .err()
        .unwrap();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    // A newer build's manifest: version 5 under a checksum that holds.
    let crc = u64::from(crc32c::crc32c(&bytes[8..64]));
    bytes[64..72].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let err = Plush::open(dir.path(), options(Backend::Write))
        .err()
        .unwrap();
    assert!(
        matches!(err, Error::UnsupportedVersion { found: 5, .. }),
        "{err}"
    );
}

/// A recovery log too large to be meant (a size typo) is an argument error before anything is
/// created; it used to leave a manifest of that geometry, which no later open could use.
#[test]
fn an_oversized_log_is_refused_and_creates_nothing() {
    let dir = scratch();
    let path = dir.path().join("new");
    for opts in [
        Options {
            log_chunk_bytes: 1 << 40,
            ..Options::default()
        },
        Options {
            log_chunks: 1_000_000_000,
            ..Options::default()
        },
        Options {
            log_chunk_bytes: usize::MAX / 4096 * 4096,
            ..Options::default()
        },
    ] {
        let e = Plush::open(&path, opts).err().expect("the open must fail");
        assert!(matches!(&e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("recovery log's limit"), "{e}");
        assert!(!path.exists(), "{e}");
    }
}

/// A new database the file system cannot hold (its recovery log fills the whole file as it is
/// used, and level 1 is preallocated) is refused before the manifest is written, saying what
/// it needs and what to change.
#[test]
fn a_creation_the_free_space_cannot_hold_writes_nothing() {
    let sim = attune_plush::SimStorage::new(0, 1);
    sim.limit_space(Some(1 << 30));
    let e = Plush::open_with(Box::new(sim.clone()), Options::default())
        .err()
        .expect("the open must fail");
    assert!(matches!(&e, Error::Io { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("needs") && msg.contains("GiB free"), "{msg}");
    assert!(msg.contains("Nothing was created"), "{msg}");
    assert!(sim.image_now().is_empty(), "{:?}", sim.image_now().keys());
    assert_eq!(sim.space_left(), Some(1 << 30));
    // The same space holds a database with a smaller log and no preallocation.
    let fits = Options {
        log_chunks: 5,
        log_chunk_bytes: 1 << 20,
        dram_entries_log2: 10,
        log_partitions: 4,
        preallocate_levels: 0,
        ..Options::default()
    };
    Plush::open_with(Box::new(sim), fits)
        .unwrap()
        .put(1, 2)
        .unwrap();
}

/// An empty path names the problem instead of an I/O error on "".
#[test]
fn an_empty_path_is_an_argument_error() {
    for read_only in [false, true] {
        let e = Plush::open(
            std::path::Path::new(""),
            Options {
                read_only,
                ..Options::default()
            },
        )
        .err()
        .expect("the open must fail");
        assert!(matches!(&e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("path is empty"), "{e}");
    }
}

/// `dram_filter_levels` past the format's deepest level is refused before anything is created;
/// above `levels_max` it still means "every level", so the default stays valid with a shallow
/// `levels_max`.
#[test]
fn dram_filter_levels_past_the_format_limit_is_refused() {
    let dir = scratch();
    let err = Plush::open(
        dir.path(),
        Options {
            dram_filter_levels: 99,
            ..options(Backend::Write)
        },
    )
    .err()
    .expect("99 filter levels must be refused");
    assert!(matches!(&err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("dram_filter_levels 99"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let db = Plush::open(
        dir.path(),
        Options {
            levels_max: 1,
            ..options(Backend::Write)
        },
    )
    .unwrap();
    db.put(1, 2).unwrap();
    assert_eq!(db.get(1).unwrap(), Some(2));
}
