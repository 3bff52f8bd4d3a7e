//! Secondary instances beside a live writer: a secondary opens without the writer's lock, reads
//! a consistent state, keeps reading files the writer removes, and `try_catch_up` follows the
//! writer's flushes, compactions, value-log collections, log switches and new manifests. In one
//! process on `MemEnv` (deterministic interleavings), and across processes: the writer is this
//! test binary run again as a child (`writer_child`), killed with SIGKILL in one test.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{contents, count_from_first, open_mem};
use attune_kv::env::{Env, MemEnv};
use attune_kv::{Error, Options, ReadOptions, DB};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Keys the model writes to.
const KEYS: u64 = 400;

fn writer_options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        blob_file_size: 256 << 10,
        wal_sync_interval_ms: 0,
        // No automatic value-log collection: its relocations are writes with sequence numbers
        // of their own, at times the scheduler picks, so a catch-up after the writer stopped
        // could still find something new. The writer collects at fixed points instead.
        blob_gc_space_amp: 0.0,
        ..Options::default()
    }
}

fn secondary_options() -> Options {
    Options {
        secondary: true,
        ..writer_options()
    }
}

fn key(k: u64) -> Vec<u8> {
    format!("k{k:05}").into_bytes()
}

fn is_delete(i: u64) -> bool {
    i % 7 == 3
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("{i:010}").into_bytes();
    if i.is_multiple_of(4) {
        v.resize(1_500, b'x'); // separated into the value log
    }
    v
}

/// Operation `i` of the model: a put of `value(i)` or a delete, on key `i % KEYS`.
fn apply(db: &DB, i: u64) -> attune_kv::Result<()> {
    let k = key(i % KEYS);
    if is_delete(i) {
        db.delete(&k)
    } else {
        db.put(&k, &value(i))
    }
}

/// Runs operations `from..to` with a flush, a compaction and a value-log collection now and then.
fn run_writer(db: &DB, from: u64, to: u64) -> attune_kv::Result<()> {
    for i in from..to {
        apply(db, i)?;
        if i % 700 == 699 {
            db.flush()?;
        }
        if i % 2_500 == 2_499 {
            db.compact_range(None, None)?;
        }
        if i % 3_000 == 2_999 {
            db.gc_with_ratio(0.0)?;
        }
    }
    Ok(())
}

/// The state after the first `p` operations.
fn model(p: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for i in p.saturating_sub(KEYS)..p {
        if is_delete(i) {
            m.remove(&key(i % KEYS));
        } else {
            m.insert(key(i % KEYS), value(i));
        }
    }
    m
}

/// The number of operations whose result `got` is (it must be the state after some prefix of
/// the operations); panics when it is no prefix.
fn prefix_of(got: &BTreeMap<Vec<u8>, Vec<u8>>) -> u64 {
    let newest = got
        .values()
        .map(|v| {
            std::str::from_utf8(&v[..10])
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .expect("a value the model wrote")
        })
        .max();
    let low = newest.map_or(0, |n| n + 1);
    // Deletes after the newest put seen may be part of the prefix too.
    for p in low..=low + 2 * KEYS {
        if *got == model(p) {
            return p;
        }
    }
    panic!(
        "the secondary's state ({} keys, newest write {newest:?}) is no prefix of the writes",
        got.len()
    );
}

#[test]
fn a_secondary_opens_beside_the_writer_and_catches_up_on_demand() {
    let env = MemEnv::new();
    let w = open_mem(&env, writer_options()).unwrap();
    run_writer(&w, 0, 1_000).unwrap();
    let s = open_mem(&env, secondary_options()).unwrap();
    assert!(s.is_secondary() && !w.is_secondary());
    assert_eq!(prefix_of(&contents(&s)), 1_000);
    let mut done = 1_000;
    for round in 0..8 {
        let next = done + 1_100 + round * 300;
        run_writer(&w, done, next).unwrap();
        // Nothing moves until asked.
        assert_eq!(prefix_of(&contents(&s)), done);
        let c = s.try_catch_up().unwrap();
        assert!(c.sequence_after > c.sequence_before, "{c:?}");
        assert_eq!(prefix_of(&contents(&s)), next, "round {round}: {c:?}");
        done = next;
    }
    // Caught up already: nothing to do.
    let c = s.try_catch_up().unwrap();
    assert_eq!(c.sequence_after, c.sequence_before);
    assert!(s.verify().is_ok());
    s.close().unwrap();
    w.close().unwrap();
}

#[test]
fn files_the_writer_removes_stay_readable_until_the_next_catch_up() {
    let env = MemEnv::new();
    let w = open_mem(&env, writer_options()).unwrap();
    run_writer(&w, 0, 2_000).unwrap();
    let s = open_mem(&env, secondary_options()).unwrap();
    let mut it = s.iter(&ReadOptions::default()).unwrap();
    // The writer rewrites every table and collects every segment: all the files the secondary
    // read are gone from the directory.
    run_writer(&w, 2_000, 2_600).unwrap();
    w.flush().unwrap();
    w.compact_range(None, None).unwrap();
    w.gc_with_ratio(0.0).unwrap();
    w.compact_range(None, None).unwrap();
    assert_eq!(prefix_of(&contents(&s)), 2_000);
    assert_eq!(count_from_first(&mut it), model(2_000).len());
    s.try_catch_up().unwrap();
    assert_eq!(prefix_of(&contents(&s)), 2_600);
    drop(it);
    s.close().unwrap();
    w.close().unwrap();
}

#[test]
fn a_catch_up_follows_a_new_manifest_after_the_writer_reopens() {
    let env = MemEnv::new();
    let w = open_mem(&env, writer_options()).unwrap();
    run_writer(&w, 0, 1_500).unwrap();
    let s = open_mem(&env, secondary_options()).unwrap();
    w.close().unwrap();
    let w = open_mem(&env, writer_options()).unwrap(); // recovery writes a new manifest
    run_writer(&w, 1_500, 3_200).unwrap();
    let c = s.try_catch_up().unwrap();
    assert!(c.manifest_records > 0, "{c:?}");
    assert_eq!(prefix_of(&contents(&s)), 3_200);
    // After the writer closes, one catch-up sees everything.
    run_writer(&w, 3_200, 3_900).unwrap();
    w.close().unwrap();
    s.try_catch_up().unwrap();
    assert_eq!(prefix_of(&contents(&s)), 3_900);
}

#[test]
fn a_secondary_refuses_changes_and_a_primary_refuses_catch_up() {
    let env = MemEnv::new();
    let w = open_mem(&env, writer_options()).unwrap();
    w.put(b"a", b"1").unwrap();
    let s = open_mem(&env, secondary_options()).unwrap();
    assert!(matches!(s.put(b"k", b"v"), Err(Error::ReadOnly { .. })));
    assert!(matches!(s.flush(), Err(Error::ReadOnly { .. })));
    assert!(matches!(s.gc(), Err(Error::ReadOnly { .. })));
    assert!(matches!(
        s.compact_range(None, None),
        Err(Error::ReadOnly { .. })
    ));
    match w.try_catch_up() {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("secondary"), "{m}"),
        r => panic!("unexpected {r:?}"),
    }
    assert_eq!(s.get(b"a").unwrap(), Some(b"1".to_vec()));
    // A read-only open still conflicts with the writer; a secondary does not.
    let ro = Options {
        read_only: true,
        ..writer_options()
    };
    assert!(matches!(open_mem(&env, ro), Err(Error::Locked { .. })));
    // No database: nothing is created.
    let err = attune_kv::DB::open_with_env(
        std::sync::Arc::new(env.clone()),
        Path::new("/none"),
        secondary_options(),
    )
    .err()
    .unwrap();
    assert!(matches!(err, Error::NotADatabase { .. }), "{err}");
    assert!(!env.exists(Path::new("/none")));
}

#[test]
fn a_catch_up_is_seen_by_point_reads_with_the_hot_key_cache_on() {
    let env = MemEnv::new();
    let w = open_mem(&env, writer_options()).unwrap();
    w.put(b"hot", b"1").unwrap();
    let s = open_mem(
        &env,
        Options {
            hot_key_cache_bytes: 1 << 20,
            ..secondary_options()
        },
    )
    .unwrap();
    for _ in 0..100 {
        assert_eq!(s.get(b"hot").unwrap(), Some(b"1".to_vec()));
    }
    w.put(b"hot", b"2").unwrap();
    s.try_catch_up().unwrap();
    assert_eq!(s.get(b"hot").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn a_table_missing_at_open_is_retried_then_reported_with_what_to_do() {
    let env = MemEnv::new();
    let w = open_mem(&env, writer_options()).unwrap();
    run_writer(&w, 0, 1_500).unwrap();
    w.close().unwrap();
    let table = env
        .list_dir(Path::new("/db"))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".sst"))
        .unwrap();
    env.remove_file(&Path::new("/db").join(&table)).unwrap();
    let err = open_mem(&env, secondary_options()).err().unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("try_catch_up") && msg.contains(&table),
        "{msg}"
    );
}

// ---- across processes ----

const CHILD_DIR: &str = "ATTUNE_SECONDARY_TEST_DIR";
const CHILD_OPS: &str = "ATTUNE_SECONDARY_TEST_OPS";

/// The writer of the cross-process tests: runs only when a parent test starts it.
#[test]
#[ignore = "the writer child of the cross-process secondary tests"]
fn writer_child() {
    let (Ok(dir), Ok(ops)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_OPS)) else {
        return;
    };
    let ops: u64 = ops.parse().unwrap();
    let db = DB::open(&dir, writer_options()).unwrap();
    run_writer(&db, 0, ops).unwrap();
    db.close().unwrap();
}

/// The writer child, killed when the test ends (a failing test leaves no writer behind).
struct Writer(std::process::Child);

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_writer(dir: &Path, ops: u64) -> Writer {
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "secondary::writer_child",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_OPS, ops.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Writer(child)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("attune-secondary-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Opens a secondary once the child has created the database.
fn open_secondary(dir: &Path, child: &mut std::process::Child) -> DB {
    loop {
        match DB::open(dir, secondary_options()) {
            Ok(db) => return db,
            Err(Error::NotADatabase { .. }) => {
                assert!(
                    child.try_wait().unwrap().is_none(),
                    "the writer exited before it created the database"
                );
                std::thread::yield_now();
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_secondary_in_another_process_follows_a_live_writer() {
    let dir = scratch("live");
    let ops = 12_000;
    let mut w = spawn_writer(&dir, ops);
    let child = &mut w.0;
    let s = open_secondary(&dir, child);
    let mut seen = prefix_of(&contents(&s));
    let mut catch_ups = 0;
    while child.try_wait().unwrap().is_none() {
        s.try_catch_up().unwrap();
        let p = prefix_of(&contents(&s));
        assert!(p >= seen, "went back from {seen} to {p}");
        seen = p;
        catch_ups += 1;
    }
    assert!(child.wait().unwrap().success());
    s.try_catch_up().unwrap();
    assert_eq!(prefix_of(&contents(&s)), ops, "after {catch_ups} catch-ups");
    s.verify().unwrap();
    s.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_writer_killed_mid_write_leaves_a_prefix_to_catch_up_with() {
    let dir = scratch("killed");
    let mut w = spawn_writer(&dir, u64::MAX / 2);
    let child = &mut w.0;
    let s = open_secondary(&dir, child);
    // Catch up while the writer runs, until it has gone through flushes, a compaction and a
    // collection, then kill it in the middle of whatever it is writing.
    let mut seen = 0;
    while seen < 3_500 {
        s.try_catch_up().unwrap();
        seen = prefix_of(&contents(&s));
        assert!(child.try_wait().unwrap().is_none(), "the writer exited");
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    s.try_catch_up().unwrap();
    let after = prefix_of(&contents(&s));
    assert!(after >= seen);
    // A writable open recovers the same prefix or a longer one (records the secondary left as
    // torn are gone for good), and the secondary follows it.
    let w = DB::open(&dir, writer_options()).unwrap();
    let recovered = prefix_of(&contents(&w));
    assert!(recovered >= after, "{recovered} < {after}");
    w.close().unwrap();
    s.try_catch_up().unwrap();
    assert_eq!(prefix_of(&contents(&s)), recovered);
    s.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
