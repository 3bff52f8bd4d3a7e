//! Checkpoints: a consistent copy that opens as a database of its own, made while the source
//! keeps taking writes; linked where the file system allows, copied where it does not; the
//! source and the checkpoint are independent afterwards.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{contents, open_mem_at};
use attune_kv::env::MemEnv;
use attune_kv::{Error, Options, DB};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn options() -> Options {
    Options {
        write_buffer_size: 256 << 10,
        min_blob_size: 512,
        blob_file_size: 1 << 20,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

fn value(i: u32, round: u32) -> Vec<u8> {
    // Every third value is large enough for the value log.
    let len = if i.is_multiple_of(3) { 2000 } else { 40 };
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(len, b'a' + (round % 26) as u8);
    v
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Writes three rounds (with deletes), checkpoints, then writes more: the checkpoint holds
/// exactly the state at the call.
fn round_trip(db: &DB, open_checkpoint: impl Fn() -> DB, dest: &Path) {
    let mut model = BTreeMap::new();
    for round in 0..3 {
        for i in 0..1500u32 {
            if (i + round) % 7 == 0 {
                db.delete(&key(i)).unwrap();
                model.remove(&key(i));
            } else {
                db.put(&key(i), &value(i, round)).unwrap();
                model.insert(key(i), value(i, round));
            }
        }
        if round == 1 {
            db.compact_range(None, None).unwrap();
            db.gc_with_ratio(0.0).unwrap();
        }
    }
    let r = db.checkpoint(dest).unwrap();
    assert!(r.sequence > 0, "{r:?}");
    // Writes after the checkpoint stay out of it.
    for i in 0..100u32 {
        db.put(&key(i), b"after").unwrap();
    }
    db.put(b"zzz-after", b"x").unwrap();
    let cp = open_checkpoint();
    assert_eq!(contents(&cp), model);
    cp.verify().unwrap();
    // The checkpoint is a database of its own: writes there do not reach the source.
    cp.put(b"only-in-checkpoint", b"1").unwrap();
    cp.compact_range(None, None).unwrap();
    cp.gc_with_ratio(0.0).unwrap();
    assert_eq!(db.get(b"only-in-checkpoint").unwrap(), None);
    assert_eq!(db.get(&key(1)).unwrap().as_deref(), Some(&b"after"[..]));
    // And the source still reads everything after the checkpoint's compaction and GC.
    db.compact_range(None, None).unwrap();
    db.verify().unwrap();
    let mut expected = model;
    for i in 0..100u32 {
        expected.insert(key(i), b"after".to_vec());
    }
    expected.insert(b"zzz-after".to_vec(), b"x".to_vec());
    assert_eq!(contents(db), expected);
}

#[test]
fn a_checkpoint_on_the_file_system_links_and_opens_with_the_state_at_the_call() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, dest) = (tmp.path().join("db"), tmp.path().join("cp"));
    let db = DB::open(&src, options()).unwrap();
    round_trip(&db, || DB::open(&dest, options()).unwrap(), &dest);
    // Tables and sealed segments were linked, not copied.
    let db2 = DB::open(tmp.path().join("db2"), options()).unwrap();
    for i in 0..3000u32 {
        db2.put(&key(i), &value(i, 0)).unwrap();
    }
    db2.flush().unwrap();
    let r = db2.checkpoint(tmp.path().join("cp2")).unwrap();
    assert!(r.files_linked > 0, "{r:?}");
}

#[test]
fn a_checkpoint_where_links_are_impossible_copies() {
    let env = MemEnv::new();
    let open = |dir: &str| open_mem_at(&env, dir, options()).unwrap();
    let db = open("/db");
    round_trip(&db, || open("/cp"), Path::new("/cp"));
}

#[test]
fn a_checkpoint_refuses_a_destination_that_holds_files_or_is_the_database() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("db");
    let db = DB::open(&src, options()).unwrap();
    db.put(b"k", b"v").unwrap();
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("something"), b"x").unwrap();
    let e = db.checkpoint(&full).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("not empty"), "{e}");
    assert!(matches!(
        db.checkpoint(&src),
        Err(Error::InvalidArgument(_))
    ));
    // An empty directory is accepted.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    db.checkpoint(&empty).unwrap();
    let cp = DB::open(&empty, options()).unwrap();
    assert_eq!(cp.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_checkpoint_taken_while_writers_run_opens_to_a_prefix_of_each_writers_history() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Arc::new(DB::open(tmp.path().join("db"), options()).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Each writer counts up on its own key; a batch writes the counter and a large value
    // naming it, so a checkpoint mixing two moments would show mismatched pairs.
    let writers: Vec<_> = (0..2u32)
        .map(|w| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 200 {
                    n += 1;
                    let mut b = attune_kv::WriteBatch::new();
                    b.put(format!("w{w}").as_bytes(), n.to_string().as_bytes())
                        .unwrap();
                    let mut big = n.to_string().into_bytes();
                    big.resize(1500, b'.');
                    b.put(format!("w{w}-big").as_bytes(), &big).unwrap();
                    db.write(b, Default::default()).unwrap();
                }
            })
        })
        .collect();
    for c in 0..3 {
        while db.get(b"w1").unwrap().is_none() || db.get(b"w0").unwrap().is_none() {
            std::thread::yield_now();
        }
        let dest = tmp.path().join(format!("cp{c}"));
        db.checkpoint(&dest).unwrap();
        let cp = DB::open(&dest, options()).unwrap();
        for w in 0..2 {
            let n = cp.get(format!("w{w}").as_bytes()).unwrap().unwrap();
            let big = cp.get(format!("w{w}-big").as_bytes()).unwrap().unwrap();
            assert!(big.starts_with(&n) && big[n.len()] == b'.', "writer {w}");
        }
        cp.verify().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in writers {
        h.join().unwrap();
    }
}

#[test]
fn a_checkpoint_cut_short_before_its_current_file_does_not_open_as_a_database() {
    let tmp = tempfile::tempdir().unwrap();
    let db = DB::open(tmp.path().join("db"), options()).unwrap();
    for i in 0..500u32 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    let dest = tmp.path().join("cp");
    db.checkpoint(&dest).unwrap();
    // CURRENT is written last: without it the directory is what a crash mid-checkpoint leaves.
    std::fs::remove_file(dest.join("CURRENT")).unwrap();
    let r = DB::open(&dest, options());
    assert!(
        matches!(r, Err(Error::NotADatabase { .. })),
        "{:?}",
        r.err()
    );
}

#[test]
fn a_checkpoint_refuses_an_empty_path_and_a_place_inside_the_database() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("db");
    let db = DB::open(&src, options()).unwrap();
    db.put(b"k", b"v").unwrap();
    for bad in [Path::new(""), &src.join("sub"), &src.join("a/b")] {
        let e = db.checkpoint(bad).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
    }
    assert!(!src.join("sub").exists());
}

#[test]
fn the_active_segment_is_copied_up_to_what_was_written() {
    let tmp = tempfile::tempdir().unwrap();
    let db = DB::open(tmp.path().join("db"), options()).unwrap();
    for i in 0..200u32 {
        db.put(&key(i), &[7u8; 1500]).unwrap();
    }
    let r = db.checkpoint(tmp.path().join("cp")).unwrap();
    // 200 records of about 1.5 KB: well under the space a mapped segment reserves ahead.
    assert!(r.bytes_copied < 400_000, "{r:?}");
    let cp = DB::open(tmp.path().join("cp"), options()).unwrap();
    assert_eq!(cp.get(&key(199)).unwrap(), Some(vec![7u8; 1500]));
}
