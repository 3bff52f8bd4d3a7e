//! `DB::multi_get`: every key answered at one state, in the order asked, from every place a
//! key can live (memtable, level 0, deeper levels, the value log).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem;
use attune_kv::env::MemEnv;
use attune_kv::{Error, Options, ReadOptions, DB};

fn open(env: &MemEnv) -> DB {
    let opts = Options {
        write_buffer_size: 64 << 10,
        min_blob_size: 200,
        ..Options::default()
    };
    open_mem(env, opts).unwrap()
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Values over 200 bytes (separated) for multiples of 3, short ones otherwise.
fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("v{round}-{i}-").into_bytes();
    v.resize(if i.is_multiple_of(3) { 300 } else { 20 }, b'x');
    v
}

#[test]
fn answers_match_get_in_the_order_asked_from_every_place() {
    let env = MemEnv::new();
    let db = open(&env);
    for i in 0..300 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap(); // deeper level
    for i in (0..300).step_by(4) {
        db.put(&key(i), &value(i, 1)).unwrap();
    }
    db.flush().unwrap(); // level 0
    for i in (0..300).step_by(5) {
        db.delete(&key(i)).unwrap(); // memtable
    }
    for i in (1..300).step_by(7) {
        db.put(&key(i), &value(i, 2)).unwrap();
    }
    // Unsorted, with duplicates and keys that never existed.
    let mut asked: Vec<Vec<u8>> = (0..320).rev().map(key).collect();
    asked.push(key(3));
    asked.push(key(3));
    asked.insert(0, b"absent".to_vec());
    let got = db.multi_get(&asked, &ReadOptions::default()).unwrap();
    assert_eq!(got.len(), asked.len());
    for (k, v) in asked.iter().zip(&got) {
        assert_eq!(*v, db.get(k).unwrap(), "key {}", String::from_utf8_lossy(k));
    }
    assert!(got
        .iter()
        .any(|v| v.as_ref().is_some_and(|v| v.len() == 300)));
    assert!(got.iter().any(Option::is_none));
    let empty: Vec<Vec<u8>> = Vec::new();
    assert!(db
        .multi_get(&empty, &ReadOptions::default())
        .unwrap()
        .is_empty());
}

#[test]
fn a_snapshot_read_sees_the_state_it_was_taken_at() {
    let env = MemEnv::new();
    let db = open(&env);
    for i in 0..50 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    let snap = db.snapshot().unwrap();
    for i in 0..50 {
        db.put(&key(i), &value(i, 1)).unwrap();
    }
    db.delete(&key(7)).unwrap();
    let keys: Vec<Vec<u8>> = (0..50).map(key).collect();
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..Default::default()
    };
    let old = db.multi_get(&keys, &ro).unwrap();
    let new = db.multi_get(&keys, &ReadOptions::default()).unwrap();
    for i in 0..50u32 {
        assert_eq!(old[i as usize], Some(value(i, 0)));
        let want = (i != 7).then(|| value(i, 1));
        assert_eq!(new[i as usize], want);
    }
}

#[test]
fn an_oversized_key_is_an_invalid_argument() {
    let env = MemEnv::new();
    let db = open(&env);
    db.put(b"a", b"1").unwrap();
    let keys = vec![b"a".to_vec(), vec![b'k'; attune_kv::MAX_KEY_BYTES + 1]];
    match db.multi_get(&keys, &ReadOptions::default()) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("key"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}
