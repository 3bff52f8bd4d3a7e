//! Injected faults of every kind (ENOSPC and short appends, EIO on fsync, directory fsync,
//! create, rename, unlink and read), each followed by a clean reopen and by a simulated machine
//! crash (torn at sector granularity): a fault surfaces as an error, never a panic; every write
//! acknowledged before it is readable after a clean reopen; after a crash the acknowledged writes
//! that survive are a prefix that holds every acknowledged `sync` write; failed writes are all or
//! nothing; and the database accepts writes again. Seeds are printed on failure;
//! `ATTUNE_FAULT_SEEDS=N` runs more.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem_at;
use attune_kv::env::{Env, FaultError, FaultOp, FaultPlan, MemEnv, Trigger};
use attune_kv::{Options, ReadOptions, WriteBatch, WriteOptions, DB};
use std::path::Path;
use std::time::{Duration, Instant};

const DIR: &str = "/data/db";

fn options() -> Options {
    Options {
        write_buffer_size: 8 << 10,
        target_file_size: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        l0_compaction_trigger: 2,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

fn open(env: &MemEnv) -> attune_kv::Result<DB> {
    open_mem_at(env, DIR, options())
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("value{i}:").into_bytes();
    v.resize(40 + i % 150, b'a' + (i % 26) as u8);
    v
}

/// One write of the history: the keys it sets (each key is written once, by one write).
struct Write {
    keys: Vec<usize>,
    sync: bool,
    acked: bool,
}

/// Runs a single-threaded history with `plan` installed; returns the writes and the faults.
fn run_history(env: &MemEnv, db: &DB, plan: FaultPlan, ctx: &str) -> Vec<Write> {
    env.set_fault_plan(plan);
    let mut writes = Vec::new();
    let mut next = 0usize;
    for step in 0..600usize {
        let sync = step % 5 == 0;
        let keys: Vec<usize> = if step % 7 == 3 {
            (next..next + 3).collect()
        } else {
            vec![next]
        };
        next += keys.len();
        let r = if keys.len() == 1 {
            db.put_opt(&key(keys[0]), &value(keys[0]), WriteOptions { sync })
        } else {
            let mut b = WriteBatch::new();
            for &k in &keys {
                b.put(&key(k), &value(k)).unwrap();
            }
            db.write(b, WriteOptions { sync })
        };
        writes.push(Write {
            keys,
            sync,
            acked: r.is_ok(),
        });
        if step % 97 == 50 {
            let _ = db.flush(); // an error here is a fault surfacing: fine
        }
        if step % 211 == 100 {
            let _ = db.compact_range(None, None);
        }
        if step % 13 == 0 && step > 0 {
            // Reads under faults: an error or the right answer, never a wrong one.
            let probe = step * 7 % next;
            if let Ok(Some(v)) = db.get(&key(probe)) {
                assert_eq!(v, value(probe), "{ctx}: get returned a wrong value");
            }
        }
    }
    writes
}

/// Checks the recovered database against the history. `crashed`: only a prefix of acknowledged
/// writes must survive (holding every acknowledged sync write); otherwise all of them.
///
/// `holes_allowed`: after a failed fsync that dropped dirty pages (Linux), writes acknowledged
/// without `sync` after the last acknowledged sync write may be lost individually; everything up
/// to and including that sync write must still be there.
fn verify(db: &DB, writes: &[Write], crashed: bool, holes_allowed: bool, ctx: &str) {
    let present = |k: usize| -> bool {
        match db
            .get(&key(k))
            .unwrap_or_else(|e| panic!("{ctx}: get after recovery: {e}"))
        {
            Some(v) => {
                assert_eq!(v, value(k), "{ctx}: key {k} has a wrong value");
                true
            }
            None => false,
        }
    };
    let mut cut = None; // index of the first acknowledged write missing
    let last_sync = writes.iter().rposition(|w| w.acked && w.sync);
    for (i, w) in writes.iter().enumerate() {
        let here: Vec<bool> = w.keys.iter().map(|&k| present(k)).collect();
        assert!(
            here.iter().all(|&p| p) || here.iter().all(|&p| !p),
            "{ctx}: write {i} (batch) is partly present: {here:?}"
        );
        let is_here = here.first().copied().unwrap_or(false);
        if !w.acked {
            continue; // in flight: either way is allowed
        }
        match (is_here, cut) {
            (false, None) => cut = Some(i),
            (true, Some(c)) if !holes_allowed => {
                panic!("{ctx}: acknowledged write {i} survived but {c} did not")
            }
            _ => {}
        }
    }
    match cut {
        Some(c) if !crashed => panic!("{ctx}: acknowledged write {c} lost without a crash"),
        Some(c) => assert!(
            last_sync.is_none_or(|s| c > s),
            "{ctx}: acknowledged sync write {} lost (cut at {c})",
            last_sync.unwrap_or(0)
        ),
        None => {}
    }
    // A full scan agrees with the point reads: only keys of the history, in order.
    let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
    it.seek_to_first();
    let mut last: Option<Vec<u8>> = None;
    while it.valid() {
        let k = it.key().to_vec();
        assert!(
            last.as_ref().is_none_or(|l| *l < k),
            "{ctx}: scan out of order"
        );
        let i: usize = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
        assert_eq!(it.value(), value(i).as_slice(), "{ctx}: scan value of {i}");
        last = Some(k);
        it.next();
    }
    it.status().unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
}

fn seeds() -> u64 {
    std::env::var("ATTUNE_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4)
}

/// For each seed and trigger: history under the plan, then (a) clean reopen, (b) torn crash.
fn exercise(op: FaultOp, error: FaultError, tweak: impl Fn(&mut FaultPlan)) -> u64 {
    let mut fired_total = 0;
    for seed in 0..seeds() {
        let triggers = [
            Trigger::Once(seed * 3),
            Trigger::Once(10 + seed * 37),
            Trigger::From(40 + seed * 11),
            Trigger::Random {
                per_million: 20_000,
            },
        ];
        for (t, trigger) in triggers.into_iter().enumerate() {
            for crash in [false, true] {
                let ctx = format!(
                    "op {op:?} error {error:?} seed {seed} trigger {trigger:?} crash {crash} \
                     (replay: ATTUNE_FAULT_SEEDS={} cargo test --release -p attune-kv \
                     --test fault_plan)",
                    seed + 1
                );
                let env = MemEnv::new();
                let db = open(&env).unwrap();
                let mut plan = FaultPlan::new(seed * 16 + t as u64).with(op, error, trigger);
                tweak(&mut plan);
                let plan_loses_data = plan.sync_failure_loses_data;
                let writes = run_history(&env, &db, plan, &ctx);
                fired_total += env.faults_fired();
                let db = if crash {
                    env.power_off();
                    drop(db);
                    env.clear_faults();
                    env.crash_torn(seed * 31 + t as u64);
                    open(&env).unwrap_or_else(|e| panic!("{ctx}: open after crash: {e}"))
                } else {
                    // The handle may refuse writes now; closing it must not lose anything.
                    env.clear_faults();
                    drop(db);
                    open(&env).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"))
                };
                let holes_allowed = crash && plan_loses_data;
                verify(&db, &writes, crash, holes_allowed, &ctx);
                db.put_opt(b"after", b"recovery", WriteOptions { sync: true })
                    .unwrap_or_else(|e| panic!("{ctx}: write after recovery: {e}"));
            }
        }
    }
    // Renames only happen at open (CURRENT); `open_under_faults_...` covers them.
    assert!(
        fired_total > 0 || op == FaultOp::Rename,
        "{op:?}: no fault fired"
    );
    eprintln!("fault_plan {op:?}/{error:?}: {fired_total} faults injected, 0 violations");
    fired_total
}

#[test]
fn disk_full_on_append_fails_writes_and_loses_nothing_acknowledged() {
    exercise(FaultOp::Append, FaultError::NoSpace, |_| {});
}

#[test]
fn short_append_before_enospc_leaves_a_torn_tail_that_recovery_drops() {
    exercise(FaultOp::Append, FaultError::NoSpace, |p| {
        p.partial_appends = true
    });
}

#[test]
fn eio_on_fsync_fails_writes_and_loses_nothing_acknowledged() {
    exercise(FaultOp::Sync, FaultError::Io, |_| {});
}

#[test]
fn eio_on_fsync_that_drops_dirty_pages_loses_nothing_acknowledged() {
    exercise(FaultOp::Sync, FaultError::Io, |p| {
        p.sync_failure_loses_data = true
    });
}

#[test]
fn eio_on_directory_fsync_loses_nothing_acknowledged() {
    exercise(FaultOp::SyncDir, FaultError::Io, |_| {});
}

#[test]
fn failing_create_rename_and_unlink_lose_nothing_acknowledged() {
    exercise(FaultOp::Create, FaultError::NoSpace, |_| {});
    exercise(FaultOp::Rename, FaultError::Io, |_| {});
    exercise(FaultOp::Remove, FaultError::Io, |_| {});
}

#[test]
fn eio_on_reads_is_an_error_never_a_wrong_answer() {
    exercise(FaultOp::Read, FaultError::Io, |_| {});
}

#[test]
fn open_under_faults_fails_cleanly_and_a_later_open_recovers() {
    let ops = [
        FaultOp::Create,
        FaultOp::Sync,
        FaultOp::SyncDir,
        FaultOp::Read,
        FaultOp::Rename,
        FaultOp::Remove,
        FaultOp::Append,
    ];
    let mut fired = 0;
    for op in ops {
        let env = MemEnv::new();
        let db = open(&env).unwrap();
        for i in 0..300 {
            db.put(&key(i), &value(i)).unwrap();
        }
        drop(db);
        for n in 0..6 {
            env.set_fault_plan(FaultPlan::new(n).with(op, FaultError::Io, Trigger::Once(n)));
            // Either outcome is fine; a panic is not.
            if let Ok(db) = open(&env) {
                drop(db);
            }
            fired += env.faults_fired();
        }
        env.clear_faults();
        let db = open(&env).unwrap_or_else(|e| panic!("{op:?}: open after faults: {e}"));
        for i in 0..300 {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "{op:?}: key {i}");
        }
    }
    assert!(
        fired >= ops.len() as u64,
        "only {fired} faults fired at open"
    );
}

/// Regression: a database made in a new directory must make that directory's name durable
/// (sync of the parent directory), or a machine crash loses the whole database, synced writes
/// included.
#[test]
fn new_database_directory_survives_a_machine_crash() {
    let env = MemEnv::new();
    let db = open(&env).unwrap();
    db.put_opt(b"k", b"v", WriteOptions { sync: true }).unwrap();
    env.power_off();
    drop(db);
    env.crash();
    let db = open(&env).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// Regression: when the background WAL fsync fails, the engine must stop acknowledging writes.
/// After a failed fsync Linux may have dropped the dirty pages it covered, so a later successful
/// fsync would acknowledge a `sync` write that sits behind a hole of lost earlier writes.
#[test]
fn failed_background_wal_sync_stops_later_writes() {
    let env = MemEnv::new();
    let opts = Options {
        wal_sync_interval_ms: 5,
        ..options()
    };
    let db = open_mem_at(&env, DIR, opts).unwrap();
    db.put(b"a", b"1").unwrap();
    let mut plan = FaultPlan::new(0).with(FaultOp::Sync, FaultError::Io, Trigger::Once(0));
    plan.sync_failure_loses_data = true;
    env.set_fault_plan(plan);
    let t = Instant::now();
    while env.faults_fired() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "background sync never ran"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let r = db.put_opt(b"b", b"2", WriteOptions { sync: true });
    assert!(
        r.is_err(),
        "a sync write was acknowledged after a failed fsync"
    );
}

/// Control: torn machine crashes with no fault at all still recover a prefix of the history.
#[test]
fn torn_machine_crashes_without_faults_recover_a_prefix() {
    for seed in 0..seeds() * 8 {
        let ctx = format!(
            "seed {seed} (replay: ATTUNE_FAULT_SEEDS={} cargo test --release -p attune-kv \
             --test fault_plan torn_machine)",
            seed / 8 + 1
        );
        let env = MemEnv::new();
        let db = open(&env).unwrap();
        let writes = run_history(&env, &db, FaultPlan::new(seed), &ctx);
        assert!(
            writes.iter().all(|w| w.acked),
            "{ctx}: a write failed without faults"
        );
        env.power_off();
        drop(db);
        env.crash_torn(seed);
        let db = open(&env).unwrap_or_else(|e| panic!("{ctx}: open after crash: {e}"));
        verify(&db, &writes, true, false, &ctx);
    }
}

/// A database whose log holds sequences 1-3 (keys a, b, c) followed by a later log holding
/// sequence 4 (key d), written by hand and synced; returns the earlier log's path.
fn two_logs(env: &MemEnv) -> std::path::PathBuf {
    let db = open(env).unwrap();
    for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")] {
        db.put(k, v).unwrap(); // sequences 1, 2, 3 in one log
    }
    drop(db);
    let dir = Path::new(DIR);
    // A crash, not a clean close: no clean-close record (its check is not what is tested).
    env.remove_file(&dir.join("CLOSED")).unwrap();
    let last_log = env
        .list_dir(dir)
        .unwrap()
        .into_iter()
        .filter_map(|n| n.strip_suffix(".log")?.parse::<u64>().ok())
        .max()
        .unwrap();
    // The later log holds sequence 4: seq | count | kind, key, value.
    let mut batch = 4u64.to_le_bytes().to_vec();
    batch.extend_from_slice(&1u32.to_le_bytes());
    batch.extend_from_slice(&[1, 1, b'd', 1, b'4']);
    let next = dir.join(format!("{:06}.log", last_log + 1));
    let mut w = attune_kv::internals::LogWriter::new(env.new_writable(&next).unwrap());
    w.add_record(&batch).unwrap();
    w.sync().unwrap();
    env.sync_dir(dir).unwrap();
    dir.join(format!("{last_log:06}.log"))
}

/// Regression: a machine crash can keep part of a later WAL's unsynced bytes while an earlier
/// WAL lost its unsynced tail (write-back order between files is the kernel's). Replaying the
/// later log after the hole would recover a state that is not a prefix of the history; recovery
/// must stop at the first sequence gap.
#[test]
fn recovery_stops_at_a_sequence_gap_between_logs() {
    let env = MemEnv::new();
    let log = two_logs(&env);
    // The earlier log loses its last record (sequence 3) as a torn tail.
    let len = env.file_size(&log).unwrap() as usize;
    assert!(env.corrupt_byte(&log, len - 1, 0xff));
    let db = open(&env).unwrap();
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get(b"c").unwrap(), None, "the torn record came back");
    assert_eq!(
        db.get(b"d").unwrap(),
        None,
        "sequence 4 was replayed after the hole at sequence 3"
    );
    // New writes continue after the recovered prefix and survive another reopen.
    db.put(b"e", b"5").unwrap();
    drop(db);
    let db = open(&env).unwrap();
    assert_eq!(db.get(b"e").unwrap(), Some(b"5".to_vec()));
    assert_eq!(db.get(b"d").unwrap(), None);
}

/// Regression (found by `attune-stress --mode mem`, seen once in a 3-thread run): the same hole,
/// but the earlier log lost *every* record (it was never synced, and the crash kept none of its
/// unsynced bytes) while the later log kept its first. With no record of the earlier log
/// replayed there was nothing to compare the later log's first sequence with; the manifest's
/// last sequence (what the tables hold) now is.
#[test]
fn recovery_stops_when_an_earlier_log_lost_every_record() {
    let env = MemEnv::new();
    let log = two_logs(&env);
    // The earlier log kept none of its (unsynced) bytes.
    env.new_writable(&log).unwrap().sync().unwrap();
    assert_eq!(env.file_size(&log).unwrap(), 0);
    let db = open(&env).unwrap();
    for k in [b"a", b"b", b"c", b"d"] {
        assert_eq!(
            db.get(k).unwrap(),
            None,
            "key {} came back: sequence 4 was replayed after the hole at 1..=3",
            k[0] as char
        );
    }
    db.put(b"e", b"5").unwrap();
    drop(db);
    let db = open(&env).unwrap();
    assert_eq!(db.get(b"e").unwrap(), Some(b"5".to_vec()));
    assert_eq!(db.get(b"d").unwrap(), None);
}

/// Regression (found by `attune-stress --mode kill`, SIGKILL during the first open): a crash
/// between writing the first manifest and CURRENT left a directory that every later open refused
/// as "not empty and has no CURRENT file". Such leftovers (manifest, CURRENT's temp file) are an
/// interrupted creation; the database is created again. A directory holding tables or logs but
/// no CURRENT is still refused.
#[test]
fn crash_while_creating_the_database_does_not_leave_it_unopenable() {
    let mut created = 0;
    for n in 0..8 {
        let env = MemEnv::new();
        // Fail the n-th create: the first open stops somewhere between manifest and CURRENT.
        env.set_fault_plan(FaultPlan::new(n).with(
            FaultOp::Create,
            FaultError::Io,
            Trigger::Once(n),
        ));
        let first = open(&env);
        env.clear_faults();
        drop(first);
        let db = open(&env).unwrap_or_else(|e| panic!("create fault {n}: reopen: {e}"));
        db.put_opt(b"k", b"v", WriteOptions { sync: true }).unwrap();
        drop(db);
        let db = open(&env).unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
        created += 1;
    }
    assert_eq!(created, 8);
    // Same through a machine crash right after the manifest is written: CURRENT's rename fails.
    let env = MemEnv::new();
    env.set_fault_plan(FaultPlan::new(0).with(FaultOp::Rename, FaultError::Io, Trigger::Once(0)));
    assert!(open(&env).is_err());
    env.clear_faults();
    env.crash_torn(3);
    open(&env).unwrap_or_else(|e| panic!("after a crash during creation: {e}"));
    // Tables without CURRENT are not an interrupted creation: still refused.
    let env = MemEnv::new();
    env.create_dir_all(Path::new(DIR)).unwrap();
    drop(
        env.new_writable(&Path::new(DIR).join("000005.sst"))
            .unwrap(),
    );
    assert!(open(&env).is_err());
}
