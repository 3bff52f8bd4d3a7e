//! Compaction and value-log collection with their I/O through Data Pipes (`pipes_bulk_io`): the
//! database reads back exactly what was written after compactions and collections, across a
//! reopen, and the option changes nothing on disk (a database written with it on opens with it off).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::contents;
use attune_kv::{Options, DB};
use std::collections::BTreeMap;

fn options(pipes: bool) -> Options {
    Options {
        pipes_bulk_io: pipes,
        write_buffer_size: 256 << 10,
        target_file_size: 128 << 10,
        max_bytes_for_level_base: 512 << 10,
        l0_compaction_trigger: 2,
        min_blob_size: 1000,
        blob_file_size: 256 << 10,
        blob_gc_space_amp: 0.0,
        ..Options::default()
    }
}

fn value(i: u64, gen: u64) -> Vec<u8> {
    let n = if i.is_multiple_of(5) { 3000 } else { 60 };
    (0..n).map(|j| (i * 7 + j * 13 + gen * 101) as u8).collect()
}

#[test]
fn compaction_and_collection_through_pipes_keep_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    {
        let db = DB::open(dir.path(), options(true)).unwrap();
        assert_ne!(db.bulk_io(), "env", "pipes should serve a POSIX directory");
        for gen in 0..3u64 {
            for i in 0..3000u64 {
                if gen > 0 && !i.is_multiple_of(3) {
                    continue;
                }
                let k = format!("key{:08}", i * 7919 % 3001).into_bytes();
                let v = value(i, gen);
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            db.flush().unwrap();
        }
        for i in (0..3000u64).step_by(11) {
            let k = format!("key{:08}", i * 7919 % 3001).into_bytes();
            db.delete(&k).unwrap();
            model.remove(&k);
        }
        db.compact_range(None, None).unwrap();
        let report = db.gc_with_ratio(0.05).unwrap();
        assert!(report.segments_collected > 0, "{report:?}");
        assert_eq!(contents(&db), model);
        db.close().unwrap();
    }
    // Reopened with the option off: the files are the engine's ordinary files.
    let db = DB::open(dir.path(), options(false)).unwrap();
    assert_eq!(db.bulk_io(), "env");
    assert_eq!(contents(&db), model);
    db.verify().unwrap();
}
