//! A level filter word that lost bits must not hide a key: a lookup whose filter rules the key
//! out checks the entry's filter words against its records (once per meta word), in the DRAM
//! copy of a top level's filters as in a level read from the file, so `get` fails with
//! corruption naming the file and the word's offset instead of returning absent, in read-only
//! and writable opens; `verify` names the same offset. A bit set by damage hides nothing and
//! is not reported by lookups. (Crash points inside migrations, where filters hold more bits
//! than the published size needs, are `crash.rs`'s: no false corruption there.)
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::scratch;
use attune_plush::{Backend, Error, Options, Plush};
use std::path::Path;

/// 16 DRAM entries of fanout 16, so 12,000 records fill level 1 (4,096) and spill to level 2.
fn options(dram_filter_levels: usize) -> Options {
    Options {
        dram_entries_log2: 4,
        fanout_log2: 4,
        log_partitions: 16,
        log_chunk_bytes: 64 << 10,
        log_chunks: 8,
        payload_segment_bytes: 64 << 10,
        preallocate_levels: 0,
        dram_filter_levels,
        backend: Backend::Msync,
        ..Options::default()
    }
}

const RECORDS: u64 = 12_000;

/// `k -> k * 3 + 1` for `k < RECORDS`, checkpointed (nothing left in the log), closed.
fn build(dir: &Path) {
    let db = Plush::open(dir, options(2)).unwrap();
    for k in 0..RECORDS {
        db.put(k, k * 3 + 1).unwrap();
    }
    db.checkpoint().unwrap();
    assert!(db.stats().levels >= 2, "{:?}", db.stats());
}

fn word(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

/// Byte offset of filter word `w` of bucket 0 of the first level-`num` entry holding at least
/// 16 records (so bucket 0 is full: every bit of its filter belongs to one of its keys).
fn filter_word_offset(dir: &Path, num: usize, w: usize) -> usize {
    let o = options(0);
    let (d, f) = (o.dram_entries_log2, o.fanout_log2);
    let entries = 1usize << (d + (num as u32 - 1) * f);
    let dir_words = (8 + 2 * (1usize << f)).div_ceil(8) * 8;
    let b = std::fs::read(dir.join(format!("level-{num:02}.plush"))).unwrap();
    let i = (0..entries)
        .find(|i| word(&b, 4096 + i * dir_words * 8) & 0xffff >= 16)
        .expect("an entry of 16 records or more");
    let off = 4096 + i * dir_words * 8 + (8 + w) * 8;
    assert_ne!(word(&b, off), 0, "filter word {w} of bucket 0 has bits");
    off
}

fn damage(dir: &Path, file: &str, off: usize, f: impl Fn(u64) -> u64) {
    let path = dir.join(file);
    let mut b = std::fs::read(&path).unwrap();
    let w = f(word(&b, off));
    b[off..off + 8].copy_from_slice(&w.to_le_bytes());
    std::fs::write(&path, b).unwrap();
}

/// Whether `err` is corruption naming `file` at byte `off`.
fn names(err: &Error, file: &str, off: usize) -> bool {
    match err {
        Error::Corruption {
            file: f, offset, ..
        } => f.to_string_lossy().ends_with(file) && *offset == off as u64,
        _ => false,
    }
}

/// Every open mode and DRAM-copy setting: no key reads as absent or wrong; some `get` (or the
/// open) fails naming `file` at `off`; `verify` fails the same way.
fn refused(dir: &Path, file: &str, off: usize, dram_filter_levels: &[usize]) {
    for &levels in dram_filter_levels {
        for read_only in [true, false] {
            let at = format!("read_only={read_only} dram_filter_levels={levels}");
            let opts = Options {
                read_only,
                ..options(levels)
            };
            let db = match Plush::open(dir, opts) {
                Ok(db) => db,
                Err(e) => {
                    assert!(names(&e, file, off), "{at}: {e}");
                    continue;
                }
            };
            let (mut silent, mut errors) = (0, 0);
            for k in 0..RECORDS {
                match db.get(k) {
                    Ok(Some(v)) if v == k * 3 + 1 => {}
                    Ok(_) => silent += 1,
                    Err(e) => {
                        assert!(names(&e, file, off), "{at} key {k}: {e}");
                        errors += 1;
                    }
                }
            }
            assert_eq!(silent, 0, "{at}: keys read as absent without an error");
            assert!(errors > 0, "{at}: no get reported the damage");
            let e = db.verify().unwrap_err();
            assert!(names(&e, file, off), "{at}: verify: {e}");
        }
    }
}

#[test]
fn a_zeroed_filter_word_on_level_1_is_corruption_from_get() {
    let dir = scratch();
    build(dir.path());
    let off = filter_word_offset(dir.path(), 1, 0);
    damage(dir.path(), "level-01.plush", off, |_| 0);
    // Level 1 with its filters copied to DRAM at open (1, 2) and read from the file (0).
    refused(dir.path(), "level-01.plush", off, &[2, 0]);
}

#[test]
fn a_cleared_filter_bit_on_level_1_is_corruption_from_get() {
    let dir = scratch();
    build(dir.path());
    let off = filter_word_offset(dir.path(), 1, 1);
    damage(dir.path(), "level-01.plush", off, |w| w & (w - 1));
    refused(dir.path(), "level-01.plush", off, &[2, 0]);
}

#[test]
fn a_zeroed_filter_word_on_level_2_is_corruption_from_get() {
    let dir = scratch();
    build(dir.path());
    let off = filter_word_offset(dir.path(), 2, 1);
    damage(dir.path(), "level-02.plush", off, |_| 0);
    // Level 2 read from the file (1) and from its DRAM copy (2).
    refused(dir.path(), "level-02.plush", off, &[1, 2]);
}

#[test]
fn a_cleared_filter_bit_on_level_2_is_corruption_from_get() {
    let dir = scratch();
    build(dir.path());
    let off = filter_word_offset(dir.path(), 2, 0);
    damage(dir.path(), "level-02.plush", off, |w| w & (w - 1));
    refused(dir.path(), "level-02.plush", off, &[1, 2]);
}

/// A bit that damage sets hides no key: every record reads back (a lookup may probe one more
/// bucket), in both open modes.
#[test]
fn a_set_filter_bit_hides_nothing() {
    let dir = scratch();
    build(dir.path());
    let off = filter_word_offset(dir.path(), 1, 0);
    damage(dir.path(), "level-01.plush", off, |w| {
        w | !w & (!w).wrapping_neg()
    });
    for read_only in [true, false] {
        let db = Plush::open(
            dir.path(),
            Options {
                read_only,
                ..options(2)
            },
        )
        .unwrap();
        for k in 0..RECORDS {
            assert_eq!(db.get(k).unwrap(), Some(k * 3 + 1), "key {k}");
        }
        db.verify().unwrap();
    }
}
