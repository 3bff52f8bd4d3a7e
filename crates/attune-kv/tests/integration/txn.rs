//! Optimistic transactions and conditional writes: a commit is all or nothing, a write that
//! reached a key after the snapshot makes the commit fail (wherever that write now lives:
//! memtable, table, or a compacted level), and a committed transaction survives a crash whole.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem;
use attune_kv::env::MemEnv;
use attune_kv::{Error, Options, WriteBatch, WriteOptions, DB};
use std::sync::Arc;

fn open(env: &MemEnv) -> DB {
    open_mem(
        env,
        Options {
            write_buffer_size: 1 << 20,
            wal_sync_interval_ms: 0,
            min_blob_size: 64,
            ..Options::default()
        },
    )
    .unwrap()
}

fn get(db: &DB, k: &[u8]) -> Option<Vec<u8>> {
    db.get(k).unwrap()
}

#[test]
fn a_commit_writes_everything_and_reads_see_the_transactions_own_writes() {
    let env = MemEnv::new();
    let db = open(&env);
    db.put(b"a", b"1").unwrap();
    db.put(b"gone", b"x").unwrap();
    let mut t = db.transaction().unwrap();
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    t.put(b"a", b"2").unwrap();
    t.put(b"b", &[7u8; 200]).unwrap(); // large enough for the value log
    t.delete(b"gone").unwrap();
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(t.get(b"gone").unwrap(), None);
    // Nothing is visible outside before the commit.
    assert_eq!(get(&db, b"a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&db, b"b"), None);
    t.commit(WriteOptions::default()).unwrap();
    assert_eq!(get(&db, b"a").as_deref(), Some(&b"2"[..]));
    assert_eq!(get(&db, b"b"), Some(vec![7u8; 200]));
    assert_eq!(get(&db, b"gone"), None);
}

#[test]
fn a_rolled_back_or_dropped_transaction_writes_nothing() {
    let env = MemEnv::new();
    let db = open(&env);
    let mut t = db.transaction().unwrap();
    t.put(b"a", b"1").unwrap();
    t.rollback();
    let mut t = db.transaction().unwrap();
    t.put(b"b", b"1").unwrap();
    drop(t);
    assert_eq!(get(&db, b"a"), None);
    assert_eq!(get(&db, b"b"), None);
}

#[test]
fn reads_stay_at_the_snapshot_while_others_write() {
    let env = MemEnv::new();
    let db = open(&env);
    db.put(b"k", b"old").unwrap();
    let t = db.transaction().unwrap();
    db.put(b"k", b"new").unwrap();
    db.flush().unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"old"[..]));
}

/// Where the conflicting write lives when the commit checks: the memtable, an L0 table, or
/// a compacted level.
#[derive(Clone, Copy, Debug)]
enum Where {
    Memtable,
    Table,
    Compacted,
}

fn conflict_case(place: Where, conflicting: impl Fn(&DB)) {
    let env = MemEnv::new();
    let db = open(&env);
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
    }
    db.put(b"counter", b"1").unwrap();
    let mut t = db.transaction().unwrap();
    let v = t.get(b"counter").unwrap();
    assert_eq!(v.as_deref(), Some(&b"1"[..]));
    conflicting(&db);
    match place {
        Where::Memtable => {}
        Where::Table => db.flush().unwrap(),
        Where::Compacted => db.compact_range(None, None).unwrap(),
    }
    t.put(b"counter", b"2").unwrap();
    t.put(b"other", b"written by the transaction").unwrap();
    let e = t.commit(WriteOptions::default()).unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{place:?}: {e}");
    assert!(e.to_string().contains("\"counter\""), "{e}");
    // Nothing of the transaction was written.
    assert_eq!(get(&db, b"other"), None, "{place:?}");
    assert_ne!(
        get(&db, b"counter").as_deref(),
        Some(&b"2"[..]),
        "{place:?}"
    );
}

#[test]
fn a_put_after_the_snapshot_is_a_conflict_wherever_it_lives() {
    for place in [Where::Memtable, Where::Table, Where::Compacted] {
        conflict_case(place, |db| db.put(b"counter", b"5").unwrap());
    }
}

#[test]
fn a_delete_after_the_snapshot_is_a_conflict_wherever_it_lives() {
    for place in [Where::Memtable, Where::Table, Where::Compacted] {
        conflict_case(place, |db| db.delete(b"counter").unwrap());
    }
}

#[test]
fn a_write_to_the_same_key_with_the_same_value_is_still_a_conflict() {
    conflict_case(Where::Memtable, |db| db.put(b"counter", b"1").unwrap());
}

#[test]
fn writes_to_other_keys_and_writes_before_the_snapshot_do_not_conflict() {
    let env = MemEnv::new();
    let db = open(&env);
    db.put(b"k", b"1").unwrap();
    db.flush().unwrap();
    let mut t = db.transaction().unwrap();
    db.put(b"unrelated", b"x").unwrap();
    t.put(b"k", b"2").unwrap();
    t.commit(WriteOptions::default()).unwrap();
    assert_eq!(get(&db, b"k").as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_plain_get_is_not_checked_and_get_for_update_is() {
    let env = MemEnv::new();
    let db = open(&env);
    db.put(b"read", b"1").unwrap();
    // Snapshot isolation: a key only read may change under the transaction.
    let mut t = db.transaction().unwrap();
    t.get(b"read").unwrap();
    db.put(b"read", b"2").unwrap();
    t.put(b"w", b"x").unwrap();
    t.commit(WriteOptions::default()).unwrap();
    // get_for_update makes the read part of the check.
    let mut t = db.transaction().unwrap();
    t.get_for_update(b"read").unwrap();
    db.put(b"read", b"3").unwrap();
    t.put(b"w", b"y").unwrap();
    assert!(matches!(
        t.commit(WriteOptions::default()),
        Err(Error::Conflict(_))
    ));
    assert_eq!(get(&db, b"w").as_deref(), Some(&b"x"[..]));
}

#[test]
fn of_two_transactions_on_one_key_only_the_first_commit_wins() {
    let env = MemEnv::new();
    let db = open(&env);
    db.put(b"k", b"0").unwrap();
    let mut t1 = db.transaction().unwrap();
    let mut t2 = db.transaction().unwrap();
    t1.put(b"k", b"t1").unwrap();
    t2.put(b"k", b"t2").unwrap();
    t1.commit(WriteOptions::default()).unwrap();
    assert!(matches!(
        t2.commit(WriteOptions::default()),
        Err(Error::Conflict(_))
    ));
    assert_eq!(get(&db, b"k").as_deref(), Some(&b"t1"[..]));
}

#[test]
fn concurrent_increments_with_retry_lose_no_update() {
    let env = MemEnv::new();
    let db = Arc::new(open(&env));
    db.put(b"n", b"0").unwrap();
    let threads = 4;
    let per = 200;
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut conflicts = 0u64;
                for _ in 0..per {
                    loop {
                        let mut t = db.transaction().unwrap();
                        let n: u64 = String::from_utf8(t.get(b"n").unwrap().unwrap())
                            .unwrap()
                            .parse()
                            .unwrap();
                        t.put(b"n", (n + 1).to_string().as_bytes()).unwrap();
                        match t.commit(WriteOptions::default()) {
                            Ok(()) => break,
                            Err(Error::Conflict(_)) => conflicts += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        get(&db, b"n").as_deref(),
        Some((threads * per).to_string().as_bytes())
    );
}

#[test]
fn write_if_is_compare_and_set() {
    let env = MemEnv::new();
    let db = open(&env);
    let mut b = WriteBatch::new();
    b.put(b"k", b"1").unwrap();
    // Expect absent: holds.
    db.write_if(b, vec![(b"k".to_vec(), None)], WriteOptions::default())
        .unwrap();
    // Expect absent again: fails, nothing written.
    let mut b = WriteBatch::new();
    b.put(b"k", b"2").unwrap();
    b.put(b"side", b"effect").unwrap();
    let e = db
        .write_if(b, vec![(b"k".to_vec(), None)], WriteOptions::default())
        .unwrap_err();
    assert!(matches!(e, Error::Conflict(_)), "{e}");
    assert_eq!(get(&db, b"side"), None);
    // Expect the value it holds (from a table, through the value log): holds.
    db.put(b"k", &[9u8; 100]).unwrap();
    db.flush().unwrap();
    let mut b = WriteBatch::new();
    b.delete(b"k").unwrap();
    db.write_if(
        b,
        vec![(b"k".to_vec(), Some(vec![9u8; 100]))],
        WriteOptions::default(),
    )
    .unwrap();
    assert_eq!(get(&db, b"k"), None);
    // A key over the limit is an invalid argument, not a conflict.
    let e = db
        .write_if(
            WriteBatch::new(),
            vec![(vec![0u8; 70_000], None)],
            WriteOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn a_committed_transaction_survives_a_crash_whole_and_an_uncommitted_one_leaves_nothing() {
    let env = MemEnv::new();
    {
        let db = open(&env);
        let mut t = db.transaction().unwrap();
        for i in 0..50u32 {
            t.put(format!("t{i:02}").as_bytes(), &[i as u8; 80])
                .unwrap();
        }
        t.commit(WriteOptions { sync: true }).unwrap();
        let mut u = db.transaction().unwrap();
        u.put(b"uncommitted", b"x").unwrap();
        env.power_off(); // the old handle's threads can no longer touch the files
        drop(u);
        drop(db);
        env.crash();
    }
    let db = open(&env);
    for i in 0..50u32 {
        assert_eq!(
            get(&db, format!("t{i:02}").as_bytes()),
            Some(vec![i as u8; 80])
        );
    }
    assert_eq!(get(&db, b"uncommitted"), None);
}

#[test]
fn transactions_are_refused_on_a_read_only_open() {
    let env = MemEnv::new();
    drop(open(&env));
    let db = open_mem(
        &env,
        Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(matches!(db.transaction(), Err(Error::ReadOnly { .. })));
}
