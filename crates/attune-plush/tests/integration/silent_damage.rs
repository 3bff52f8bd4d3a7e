//! One damaged word of the recovery log or of a level's directory must never make an
//! acknowledged record read as absent (or as an older value) without a corruption error, at the
//! open or at the first read, and `verify` must report it. Each scenario builds a database,
//! damages one word (or, for the epochs, one bit of each meta word) in a copy of its files,
//! reopens it read-only and writable, reads every key and runs `verify`.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::scratch;
use attune_plush::{Backend, Error, Options, Plush};
use std::path::Path;

fn options() -> Options {
    Options {
        dram_entries_log2: 12,
        log_partitions: 64,
        log_chunk_bytes: 64 << 10,
        log_chunks: 12,
        payload_segment_bytes: 64 << 10,
        preallocate_levels: 0,
        backend: Backend::Msync,
        ..Options::default()
    }
}

/// 3,000 records `k -> k + 7`, all in the log (none migrated), closed cleanly.
fn log_only(dir: &Path) -> Vec<(u64, u64)> {
    let db = Plush::open(dir, options()).unwrap();
    let recs: Vec<(u64, u64)> = (0..3000u64).map(|k| (k, k + 7)).collect();
    for (k, v) in &recs {
        db.put(*k, *v).unwrap();
    }
    assert_eq!(db.stats().migrations.iter().sum::<u64>(), 0);
    recs
}

/// 20,000 records checkpointed to level 1, then 3,000 more in the log only.
fn leveled(dir: &Path) -> Vec<(u64, u64)> {
    let db = Plush::open(dir, options()).unwrap();
    let mut recs = Vec::new();
    for k in 0..20_000u64 {
        db.put(k, k * 3 + 1).unwrap();
        recs.push((k, k * 3 + 1));
    }
    db.checkpoint().unwrap();
    for k in 20_000..23_000u64 {
        db.put(k, k * 3 + 1).unwrap();
        recs.push((k, k * 3 + 1));
    }
    recs
}

fn edit(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = std::fs::read(path).unwrap();
    f(&mut b);
    std::fs::write(path, b).unwrap();
}

fn word(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

fn set_word(b: &mut [u8], off: usize, w: u64) {
    b[off..off + 8].copy_from_slice(&w.to_le_bytes());
}

/// Byte offsets of level 1's meta words (default fanout: 40 words per directory entry).
fn level1_metas(b: &[u8]) -> impl Iterator<Item = usize> {
    let entries = 1usize << options().dram_entries_log2;
    let len = b.len();
    (0..entries)
        .map(|i| 4096 + i * 40 * 8)
        .filter(move |o| o + 8 <= len)
}

/// Whether `err` is corruption naming `file`.
fn names(err: &Error, file: &str) -> bool {
    matches!(err, Error::Corruption { .. }) && err.to_string().contains(file)
}

/// Reopens `dir` read-only and writable: the open fails with corruption naming `file`, or
/// every record reads back (or fails with corruption) and `verify` finds the damage.
fn no_silent_loss(dir: &Path, recs: &[(u64, u64)], file: &str) {
    no_silent_loss_in(dir, recs, file, &[true, false]);
}

fn no_silent_loss_in(dir: &Path, recs: &[(u64, u64)], file: &str, modes: &[bool]) {
    for &read_only in modes {
        let opts = Options {
            read_only,
            ..options()
        };
        let db = match Plush::open(dir, opts) {
            Err(e) => {
                assert!(names(&e, file), "read_only={read_only}: {e}");
                continue;
            }
            Ok(db) => db,
        };
        let mut silent = 0;
        for (k, v) in recs {
            match db.get(*k) {
                Ok(got) if got == Some(*v) => {}
                Ok(_) => silent += 1,
                Err(e) => assert!(names(&e, file), "read_only={read_only} key {k}: {e}"),
            }
        }
        assert_eq!(
            silent, 0,
            "read_only={read_only}: keys lost without an error"
        );
        match db.verify() {
            Ok(r) => panic!("read_only={read_only}: verify says OK: {r:?}"),
            Err(e) => assert!(names(&e, file), "read_only={read_only}: {e}"),
        }
    }
}

#[test]
fn a_flipped_bit_in_a_log_entry_followed_by_a_few_in_its_page_is_corruption() {
    let dir = scratch();
    let recs = log_only(dir.path());
    edit(&dir.path().join("log.plush"), |b| {
        b[64 + 32 * 100 + 3] ^= 0x04
    });
    no_silent_loss(dir.path(), &recs, "log.plush");
}

#[test]
fn a_flipped_bit_in_the_last_log_entry_of_a_page_is_corruption() {
    let dir = scratch();
    let recs = log_only(dir.path());
    edit(&dir.path().join("log.plush"), |b| {
        b[64 + 32 * 127 + 3] ^= 0x04
    });
    no_silent_loss(dir.path(), &recs, "log.plush");
}

#[test]
fn a_flipped_bit_in_a_chunk_headers_generation_is_corruption() {
    let dir = scratch();
    let recs = log_only(dir.path());
    edit(&dir.path().join("log.plush"), |b| b[8] ^= 0x01);
    no_silent_loss(dir.path(), &recs, "log.plush");
}

#[test]
fn a_zeroed_chunk_header_magic_is_corruption() {
    let dir = scratch();
    let recs = log_only(dir.path());
    edit(&dir.path().join("log.plush"), |b| b[..8].fill(0));
    no_silent_loss(dir.path(), &recs, "log.plush");
}

#[test]
fn a_level_entry_whose_size_word_reads_zero_is_corruption() {
    let dir = scratch();
    let recs = leveled(dir.path());
    edit(&dir.path().join("level-01.plush"), |b| {
        let off = level1_metas(b)
            .find(|o| word(b, *o) & 0xffff == 4)
            .expect("an entry of 4 records");
        let w = word(b, off);
        set_word(b, off, w & !0xffff);
    });
    no_silent_loss(dir.path(), &recs, "level-01.plush");
}

#[test]
fn a_raised_epoch_in_level_meta_words_is_corruption() {
    let dir = scratch();
    let recs = leveled(dir.path());
    edit(&dir.path().join("level-01.plush"), |b| {
        let offs: Vec<usize> = level1_metas(b).filter(|o| word(b, *o) != 0).collect();
        assert!(!offs.is_empty());
        for off in offs {
            let w = word(b, off);
            set_word(b, off, w | 1 << 20);
        }
    });
    no_silent_loss(dir.path(), &recs, "level-01.plush");
}

/// A single raised epoch (one word): recovery must not skip the entry's log records.
#[test]
fn one_raised_epoch_word_is_corruption() {
    let dir = scratch();
    let recs = leveled(dir.path());
    edit(&dir.path().join("level-01.plush"), |b| {
        let off = level1_metas(b).find(|o| word(b, *o) != 0).unwrap();
        let w = word(b, off);
        set_word(b, off, w + (1 << 16));
    });
    no_silent_loss(dir.path(), &recs, "level-01.plush");
}

/// Every one-bit error of a level-1 meta word (size and epoch bits alike) is found, read-only
/// (which writes nothing, so the same files serve every bit).
#[test]
fn every_one_bit_error_of_a_level_meta_word_is_found() {
    let dir = scratch();
    let recs = leveled(dir.path());
    let path = dir.path().join("level-01.plush");
    let b = std::fs::read(&path).unwrap();
    let off = level1_metas(&b)
        .find(|o| word(&b, *o) & 0xffff >= 2)
        .unwrap();
    for bit in 0..64 {
        edit(&path, |b| b[off + bit / 8] ^= 1 << (bit % 8));
        no_silent_loss_in(dir.path(), &recs, "level-01.plush", &[true]);
        edit(&path, |b| b[off + bit / 8] ^= 1 << (bit % 8));
    }
    Plush::open(dir.path(), options())
        .unwrap()
        .verify()
        .unwrap();
}

/// The clean-close record is what tells damage to the newest entries from a torn tail; a
/// database that crashed (no record) and one reopened after a clean close both read every
/// record, and a second clean close vouches again.
#[test]
fn a_clean_close_after_a_recovery_reopens_without_complaint() {
    let dir = scratch();
    let recs = log_only(dir.path());
    for read_only in [true, false, false, true] {
        let db = Plush::open(
            dir.path(),
            Options {
                read_only,
                ..options()
            },
        )
        .unwrap();
        for (k, v) in &recs {
            assert_eq!(db.get(*k).unwrap(), Some(*v));
        }
        db.verify().unwrap();
    }
}

/// The files of the open database in `from`, copied to `to` while it is open: what a crash
/// (a process killed) leaves on tmpfs, where the mappings' stores are the files' pages. No
/// clean-close record.
fn copy_open_database(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Opens `dir` read-only and writable with `opts`: each open fails with corruption naming
/// `log.plush` at byte `at`, and says what to do.
fn every_open_fails_at(dir: &Path, opts: &Options, at: usize) {
    for read_only in [true, false] {
        let e = Plush::open(
            dir,
            Options {
                read_only,
                ..opts.clone()
            },
        )
        .err()
        .expect("the open must fail");
        let msg = e.to_string();
        assert!(
            names(&e, "log.plush")
                && msg.contains(&format!("offset {at}"))
                && msg.contains("restore log.plush from a backup"),
            "read_only={read_only}: {msg}"
        );
    }
}

/// Byte offset of the last entry of partition 0's first page: packed, the log's first 128
/// appends go there, and the next 128 to partition 1, and so on.
const LAST_OF_PARTITION_0: usize = 64 + 32 * 127;

/// An outside user's finding: after a crash, a damaged word in the newest entry of a
/// partition's chunk read as the crash's torn tail, so that acknowledged record read as absent
/// and `verify` said OK, although thousands of newer entries lay in other partitions. Entries
/// of other partitions prove nothing (a writer can stall between drawing its sequence number
/// and storing its entry); the chunk's own record of acknowledged entries does.
#[test]
fn after_a_crash_a_damaged_newest_entry_of_a_partition_is_corruption() {
    let (live, dir) = (scratch(), scratch());
    let db = Plush::open(live.path(), options()).unwrap();
    let recs: Vec<(u64, u64)> = (0..3000u64).map(|k| (k, k + 7)).collect();
    for (k, v) in &recs {
        db.put(*k, *v).unwrap();
    }
    copy_open_database(live.path(), dir.path());
    drop(db);
    edit(&dir.path().join("log.plush"), |b| {
        set_word(b, LAST_OF_PARTITION_0, 0)
    });
    every_open_fails_at(dir.path(), &options(), LAST_OF_PARTITION_0);
}

/// An outside user's finding: after a crash, one zeroed word at slot 64 of the run a
/// partition was still appending (124 entries, so its end-of-run record did not exist yet)
/// read as the crash's torn tail: the 60 acknowledged records from there on read as absent
/// and `verify` said OK. The run records its acknowledged tail every 16 appends, so damage
/// below the newest record is corruption naming the slot.
#[test]
fn after_a_crash_damage_inside_the_run_still_being_appended_is_corruption() {
    let live = scratch();
    let db = Plush::open(live.path(), options()).unwrap();
    // Packed: runs 0..=22 fill partitions 0..=22, and partition 23 holds the last 124.
    for k in 0..3068u64 {
        db.put(k, k + 7).unwrap();
    }
    let opts = options();
    let chunk_23 = 23 * opts.log_chunks * opts.log_chunk_bytes;
    for slot in [20usize, 64, 111] {
        let dir = scratch();
        copy_open_database(live.path(), dir.path());
        let at = chunk_23 + 64 + 32 * slot;
        edit(&dir.path().join("log.plush"), |b| {
            assert_ne!(word(b, at), 0, "slot {slot} holds an entry");
            set_word(b, at, 0)
        });
        every_open_fails_at(dir.path(), &options(), at);
    }
    drop(db);
}

/// An outside user's finding: with several writers, the finished runs of a crash image
/// recorded 124–127 acknowledged entries, not 128, so damage to a run's last entries read as
/// a torn tail (an overwrite read its old value, without an error). Writers that drew
/// consecutive append numbers take the partition's lock in any order, and the record was
/// raised by the one that drew the run's last number, not by the one that wrote its last slot.
#[test]
fn with_concurrent_writers_every_finished_run_records_all_its_entries() {
    let (live, dir) = (scratch(), scratch());
    let db = Plush::open(live.path(), options()).unwrap();
    let (threads, each) = (8u64, 4000u64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = &db;
            s.spawn(move || {
                for i in 0..each {
                    let k = i * threads + t;
                    db.put(k, k + 7).unwrap();
                }
            });
        }
    });
    copy_open_database(live.path(), dir.path());
    drop(db);
    let opts = options();
    let chunk = |p: usize| p * opts.log_chunks * opts.log_chunk_bytes;
    // Packed: run r (appends 128·r to 128·r + 127) goes to partition r mod 64, whose first
    // chunk holds all of its runs here.
    let appends = (threads * each) as usize;
    let entries = |p: usize| {
        (p..appends.div_ceil(128))
            .step_by(64)
            .map(|r| (appends - 128 * r).min(128))
            .sum::<usize>()
    };
    let b = std::fs::read(dir.path().join("log.plush")).unwrap();
    for p in 0..64 {
        let acked = word(&b, chunk(p) + 24) & 0xFFFF_FFFF;
        assert_eq!(acked as usize, entries(p) / 16 * 16, "partition {p}");
    }
    // The newest entry of partition 0, which ends a full run, is damage, not a torn tail.
    assert_eq!(entries(0) % 128, 0);
    let at = chunk(0) + 64 + 32 * (entries(0) - 1);
    edit(&dir.path().join("log.plush"), |b| b[at + 3] ^= 0x04);
    every_open_fails_at(dir.path(), &options(), at);
}

/// `verify` on a live session reports damage to an acknowledged newest entry as well.
#[test]
fn verify_reports_a_damaged_newest_entry_of_a_partition() {
    let dir = scratch();
    let db = Plush::open(dir.path(), options()).unwrap();
    for k in 0..3000u64 {
        db.put(k, k + 7).unwrap();
    }
    db.verify().unwrap();
    // The Msync back end maps the log shared: the damage is what the session reads.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("log.plush"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[0u8; 8], LAST_OF_PARTITION_0 as u64).unwrap();
    let e = db.verify().expect_err("verify must fail");
    assert!(
        names(&e, "log.plush")
            && e.to_string()
                .contains(&format!("offset {LAST_OF_PARTITION_0}")),
        "{e}"
    );
}

/// A session with `sync` off records a clean close too (its close makes the log durable
/// first), so damage to the newest entry of a partition fails the next open.
#[test]
fn a_cleanly_closed_unsynced_database_with_a_damaged_newest_entry_fails_the_open() {
    let dir = scratch();
    let unsynced = Options {
        sync: false,
        ..options()
    };
    let db = Plush::open(dir.path(), unsynced.clone()).unwrap();
    let recs: Vec<(u64, u64)> = (0..3000u64).map(|k| (k, k + 7)).collect();
    for (k, v) in &recs {
        db.put(*k, *v).unwrap();
    }
    db.close().unwrap();
    // Undamaged, it reopens (both ways) and reads every record.
    no_silent_loss_or_ok(dir.path(), &recs, &unsynced);
    edit(&dir.path().join("log.plush"), |b| {
        b[LAST_OF_PARTITION_0 + 3] ^= 0x04
    });
    every_open_fails_at(dir.path(), &unsynced, LAST_OF_PARTITION_0);
}

/// Every record reads back and `verify` is OK, read-only first (a writable open clears the
/// clean-close record and records it again at its close).
fn no_silent_loss_or_ok(dir: &Path, recs: &[(u64, u64)], opts: &Options) {
    for read_only in [true, false] {
        let db = Plush::open(
            dir,
            Options {
                read_only,
                ..opts.clone()
            },
        )
        .unwrap();
        for (k, v) in recs {
            assert_eq!(
                db.get(*k).unwrap(),
                Some(*v),
                "read_only={read_only} key {k}"
            );
        }
        db.verify().unwrap();
    }
}
