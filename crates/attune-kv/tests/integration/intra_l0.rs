//! Intra-L0 compaction (`l0_intra_compaction`): when L1 holds more of L0's key range than L0
//! itself, a due L0 compaction merges the L0 files into one L0 file. The merged file must read
//! exactly as the files it replaces: newer versions over older ones, a tombstone kept while L1
//! still holds the key it deletes, a snapshot's view kept, and files flushed after the merge
//! still reading as newer than it (also after a reopen, which orders L0 from the manifest).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{contents, open_mem};
use attune_kv::env::MemEnv;
use attune_kv::{Options, ReadOptions, DB};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const KEYS: u32 = 2_000;

fn options(intra: bool) -> Options {
    Options {
        write_buffer_size: 1 << 20,
        l0_compaction_trigger: 2,
        l0_intra_compaction: intra,
        min_blob_size: 64,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Every key with a 100-byte base value, compacted into L1 (much larger than the L0 files the
/// tests add after it).
fn base(db: &DB, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in 0..KEYS {
        let v = format!("base{i:096}").into_bytes();
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    db.compact_range(None, None).unwrap();
    let st = db.stats();
    assert_eq!(st.level_files[0], 0);
    assert!(st.level_files[1] > 0, "{:?}", st.level_files);
}

/// Waits until the background compaction has left level 0 with at most `files` files.
fn wait_l0(db: &DB, files: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.stats().level_files[0] > files {
        assert!(
            Instant::now() < deadline,
            "no compaction of level 0 within 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Two rounds of `writes(round)`, each flushed into its own L0 file, recorded in `model`.
fn flushed_rounds(
    db: &DB,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    writes: impl Fn(u32) -> Vec<(Vec<u8>, Vec<u8>)>,
) {
    for round in 0..2 {
        for (k, v) in writes(round) {
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
    }
}

fn intra_merges(db: &DB) -> u64 {
    db.stats().level_compactions[0].compactions
}

#[test]
fn merged_level0_keeps_newest_versions_tombstones_and_snapshots() {
    let env = MemEnv::new();
    let db = open_mem(&env, options(true)).unwrap();
    let mut model = BTreeMap::new();
    base(&db, &mut model);
    let l1_files = db.stats().level_files[1];

    // Older L0 file: overwrite 5 (separated value), delete 6, overwrite 7.
    db.put(&key(5), &[b'a'; 200]).unwrap();
    db.delete(&key(6)).unwrap();
    db.put(&key(7), b"a").unwrap();
    db.flush().unwrap();
    let snap = db.snapshot().unwrap();
    let mut at_snap = model.clone();
    at_snap.insert(key(5), vec![b'a'; 200]);
    at_snap.remove(&key(6));
    at_snap.insert(key(7), b"a".to_vec());
    // Newer L0 file: overwrite 5 again, delete 7, bring back nothing.
    db.put(&key(5), b"b").unwrap();
    db.delete(&key(7)).unwrap();
    db.flush().unwrap();
    wait_l0(&db, 1);

    let st = db.stats();
    assert_eq!(intra_merges(&db), 1, "{:?}", st.level_compactions);
    assert_eq!(st.level_files[0], 1, "the two L0 files became one");
    assert_eq!(st.level_files[1], l1_files, "L1 was not rewritten");
    model.insert(key(5), b"b".to_vec());
    model.remove(&key(6));
    model.remove(&key(7));
    assert_eq!(db.get(&key(5)).unwrap().as_deref(), Some(&b"b"[..]));
    assert_eq!(
        db.get(&key(6)).unwrap(),
        None,
        "the tombstone still hides L1's version"
    );
    assert_eq!(db.get(&key(7)).unwrap(), None);
    assert_eq!(contents(&db), model);
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..ReadOptions::default()
    };
    for k in [5, 6, 7, 8] {
        assert_eq!(
            db.get_opt(&key(k), &ro).unwrap(),
            at_snap.get(&key(k)).cloned(),
            "key {k} at the snapshot"
        );
    }
    drop(snap);

    // A file flushed after the merge reads as newer than it, before and after a reopen.
    db.put(&key(6), b"c").unwrap();
    db.put(&key(5), b"c").unwrap();
    db.flush().unwrap();
    model.insert(key(6), b"c".to_vec());
    model.insert(key(5), b"c".to_vec());
    assert_eq!(contents(&db), model);
    wait_l0(&db, 1);
    assert_eq!(contents(&db), model);
    db.close().unwrap();
    let db = open_mem(&env, options(true)).unwrap();
    assert_eq!(db.get(&key(5)).unwrap().as_deref(), Some(&b"c"[..]));
    assert_eq!(contents(&db), model);
    // Everything down into L1 and below: the same answers.
    db.compact_range(None, None).unwrap();
    assert_eq!(db.stats().level_files[0], 0);
    assert_eq!(contents(&db), model);
}

#[test]
fn switched_off_level0_goes_into_level1() {
    let env = MemEnv::new();
    let db = open_mem(&env, options(false)).unwrap();
    let mut model = BTreeMap::new();
    base(&db, &mut model);
    flushed_rounds(&db, &mut model, |round| {
        vec![(key(round), vec![round as u8])]
    });
    wait_l0(&db, 0);
    assert_eq!(intra_merges(&db), 0);
    assert_eq!(contents(&db), model);
}

#[test]
fn level0_larger_than_its_overlap_in_level1_goes_down() {
    // L1 holds only the first ten keys; the L0 files span all of them, so L0 > its overlap.
    let env = MemEnv::new();
    let db = open_mem(&env, options(true)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..10 {
        db.put(&key(i), b"x").unwrap();
        model.insert(key(i), b"x".to_vec());
    }
    db.compact_range(None, None).unwrap();
    flushed_rounds(&db, &mut model, |round| {
        (0..KEYS)
            .map(|i| (key(i), format!("{round}{i:099}").into_bytes()))
            .collect()
    });
    wait_l0(&db, 0);
    assert_eq!(intra_merges(&db), 0);
    assert_eq!(contents(&db), model);
}

#[test]
fn option_parses_and_round_trips() {
    let mut o = Options::default();
    assert!(o.l0_intra_compaction);
    o.set("l0_intra_compaction", "off").unwrap();
    assert!(!o.l0_intra_compaction);
    assert!(o
        .describe()
        .iter()
        .any(|(k, v)| *k == "l0_intra_compaction" && v == "false"));
    let e = o.set("l0_intra_compaction", "sometimes").unwrap_err();
    assert!(e.to_string().contains("l0_intra_compaction"), "{e}");
}
