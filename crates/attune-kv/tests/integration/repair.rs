//! Repair: damage each kind of file in turn (CURRENT, the manifest, a table block, a log
//! record, a value-log record), repair, open, and check that every record of the undamaged files
//! reads with its newest value, that no deleted key comes back, and that what was lost is
//! reported and kept in `lost/`. Repair of a healthy database changes nothing reads see, and a
//! repair interrupted by a fault leaves a directory that repair completes.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{contents, open_mem_at};
use attune_kv::env::{Env, FaultError, FaultOp, FaultPlan, MemEnv, Trigger};
use attune_kv::internals::{BlockCache, InternalIterator, Table, TableIter};
use attune_kv::{repair_with_env, Error, Options, RepairReport, LOST_DIR};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "/db";

fn options() -> Options {
    Options {
        write_buffer_size: 16 << 10,
        target_file_size: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        min_blob_size: 200,
        wal_sync_interval_ms: 0,
        // Collection runs where `build` calls it, not when a background thread gets to it, so
        // that which log holds which writes does not depend on timing.
        blob_gc_space_amp: 0.0,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    // Every fourth value is large enough to go to the value log.
    let len = if i.is_multiple_of(4) {
        300
    } else {
        20 + i % 40
    };
    let mut v = format!("v{i}.{round}:").into_bytes();
    v.resize(len as usize, b'a' + (i % 26) as u8);
    v
}

/// The newest value of each live key, and every value each key ever had.
struct Model {
    live: BTreeMap<Vec<u8>, Vec<u8>>,
    history: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
}

/// Tables in several levels, separated values, overwrites, deletions, a collected value-log
/// segment, and writes left only in the log (the database is closed without a flush).
fn build(env: &MemEnv) -> Model {
    let db = open_mem_at(env, DIR, options()).unwrap();
    let mut m = Model {
        live: BTreeMap::new(),
        history: BTreeMap::new(),
    };
    let put = |m: &mut Model, i: u32, round: u32| {
        db.put(&key(i), &value(i, round)).unwrap();
        m.live.insert(key(i), value(i, round));
        m.history.entry(key(i)).or_default().insert(value(i, round));
    };
    for i in 0..1500 {
        put(&mut m, i, 0);
    }
    db.compact_range(None, None).unwrap();
    for i in (0..1500).step_by(3) {
        put(&mut m, i, 1);
    }
    db.flush().unwrap();
    for i in (0..1500).step_by(11) {
        db.delete(&key(i)).unwrap();
        m.live.remove(&key(i));
    }
    db.flush().unwrap();
    assert!(db.gc().unwrap().segments_collected > 0);
    for i in (0..1500).step_by(7) {
        put(&mut m, i, 2);
    }
    db.close().unwrap();
    m
}

fn env_arc(env: &MemEnv) -> Arc<dyn Env> {
    Arc::new(env.clone())
}

fn repair(env: &MemEnv) -> RepairReport {
    repair_with_env(env_arc(env), Path::new(DIR), options()).unwrap()
}

fn files(env: &MemEnv, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = env
        .list_dir(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .map(|n| Path::new(DIR).join(n))
        .collect();
    v.sort();
    v
}

fn overwrite(env: &MemEnv, path: &Path, data: &[u8]) {
    let mut w = env.new_writable(path).unwrap();
    w.append(data).unwrap();
    w.sync().unwrap();
}

/// User keys stored in table `path` (every version).
fn table_keys(env: &MemEnv, path: &Path) -> BTreeSet<Vec<u8>> {
    let f = env.open_random(path).unwrap();
    let t = Table::open(f, path.to_path_buf(), 1, Arc::new(BlockCache::new(1 << 20))).unwrap();
    let mut it = TableIter::new(Arc::new(t), false);
    it.seek_to_first();
    let mut out = BTreeSet::new();
    while it.valid() {
        let k = it.key();
        out.insert(k[..k.len() - 8].to_vec());
        it.next();
    }
    out
}

/// Opens the repaired database and checks it against the model: keys outside `suspect` read
/// exactly as the model says; keys in it either read one of their past values or are absent.
fn check(env: &MemEnv, m: &Model, suspect: &BTreeSet<Vec<u8>>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = open_mem_at(env, DIR, options()).unwrap();
    let got = contents(&db);
    for (k, v) in &m.live {
        if !suspect.contains(k) {
            assert_eq!(got.get(k), Some(v), "key {:?}", String::from_utf8_lossy(k));
        }
    }
    for (k, v) in &got {
        if suspect.contains(k) {
            assert!(
                m.history[k].contains(v),
                "{:?} reads a value it never had",
                k
            );
        } else {
            assert_eq!(m.live.get(k), Some(v), "{:?} came back", k);
        }
    }
    // The repaired database takes writes and keeps them across a reopen.
    db.put(b"key00000", b"after repair").unwrap();
    db.close().unwrap();
    let db = open_mem_at(env, DIR, options()).unwrap();
    assert_eq!(db.get(b"key00000").unwrap().unwrap(), b"after repair");
    db.close().unwrap();
    got
}

fn lost_names(env: &MemEnv) -> Vec<String> {
    env.list_dir(&Path::new(DIR).join(LOST_DIR))
        .unwrap_or_default()
}

#[test]
fn healthy_database_reads_the_same_after_repair() {
    let env = MemEnv::new();
    let m = build(&env);
    let r = repair(&env);
    assert!(r.clean(), "{r:#?}");
    assert_eq!(r.keys as usize, m.live.len());
    assert!(r.segments_kept > 0);
    let got = check(&env, &m, &BTreeSet::new());
    assert_eq!(got, m.live);
    // Twice is the same as once.
    let r2 = repair(&env);
    assert!(r2.clean(), "{r2:#?}");
}

#[test]
fn report_counts_live_keys_apart_from_deleted_ones() {
    // The README's database: of six keys, one point-deleted, one under a range deletion and one
    // expired, three are live; the deleted three are written (they stay deleted) and counted
    // apart.
    let env = MemEnv::new();
    env.set_unix_millis(1_000_000);
    let db = open_mem_at(&env, DIR, options()).unwrap();
    for k in ["user:1", "user:2", "user:3", "visits"] {
        db.put(k.as_bytes(), b"v").unwrap();
    }
    db.delete(b"user:1").unwrap();
    let wo = attune_kv::WriteOptions::default();
    db.put_ttl(b"session:7", b"t", std::time::Duration::from_secs(3600), wo)
        .unwrap();
    db.put_ttl(b"temp", b"t", std::time::Duration::from_secs(1), wo)
        .unwrap();
    db.delete_range(b"session:", b"session;").unwrap();
    db.close().unwrap();
    env.set_unix_millis(1_000_000 + 2_000);
    let r = repair(&env);
    assert!(r.clean(), "{r:#?}");
    assert_eq!((r.keys, r.keys_deleted), (3, 3), "{r:#?}");
    let db = open_mem_at(&env, DIR, options()).unwrap();
    assert_eq!(contents(&db).len() as u64, r.keys);
    db.close().unwrap();
}

#[test]
fn damaged_current_is_repaired() {
    let env = MemEnv::new();
    let m = build(&env);
    overwrite(&env, &Path::new(DIR).join("CURRENT"), b"garbage\n");
    assert!(open_mem_at(&env, DIR, options()).is_err());
    let r = repair(&env);
    assert_eq!(r.values_lost, 0);
    assert_eq!(check(&env, &m, &BTreeSet::new()), m.live);
    assert!(lost_names(&env).contains(&"CURRENT".to_string()));
}

#[test]
fn damaged_manifest_is_repaired() {
    let env = MemEnv::new();
    let m = build(&env);
    let manifest = files(&env, "")
        .into_iter()
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    let len = env.file_size(&manifest).unwrap() as usize;
    for off in (0..len).step_by(17) {
        env.corrupt_byte(&manifest, off, 0x5a);
    }
    assert!(open_mem_at(&env, DIR, options()).is_err());
    repair(&env);
    assert_eq!(check(&env, &m, &BTreeSet::new()), m.live);
}

#[test]
fn damaged_table_block_loses_only_that_block() {
    let env = MemEnv::new();
    let m = build(&env);
    let tables = files(&env, ".sst");
    let victim = tables
        .iter()
        .max_by_key(|p| env.file_size(p).unwrap())
        .unwrap();
    let suspect = table_keys(&env, victim);
    env.corrupt_byte(victim, 100, 0xff);
    let r = repair(&env);
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    let f = r.files.iter().find(|f| f.name == name).unwrap();
    assert!(f.records_lost > 0 && f.records_kept > 0, "{f:?}");
    assert!(f.moved_to_lost);
    assert!(lost_names(&env).contains(&name));
    let got = check(&env, &m, &suspect);
    let missing = m.live.keys().filter(|k| !got.contains_key(*k)).count() as u64;
    assert!(
        missing <= f.records_lost,
        "{missing} keys gone, {} reported",
        f.records_lost
    );
}

#[test]
fn damaged_table_footer_moves_the_table_to_lost() {
    let env = MemEnv::new();
    let m = build(&env);
    let victim = files(&env, ".sst").pop().unwrap();
    let suspect = table_keys(&env, &victim);
    let len = env.file_size(&victim).unwrap() as usize;
    env.corrupt_byte(&victim, len - 3, 0xff);
    let r = repair(&env);
    let name = victim.file_name().unwrap().to_string_lossy().into_owned();
    let f = r.files.iter().find(|f| f.name == name).unwrap();
    assert_eq!(f.records_kept, 0);
    assert!(f.moved_to_lost && f.error.is_some(), "{f:?}");
    check(&env, &m, &suspect);
}

#[test]
fn damaged_log_is_replayed_up_to_the_damage() {
    let env = MemEnv::new();
    let m = build(&env);
    // The log holding the last writes: the largest (a flush when the memtable filled may have
    // switched to a new log that holds only the final few records).
    let log = files(&env, ".log")
        .into_iter()
        .max_by_key(|p| env.file_size(p).unwrap())
        .unwrap();
    let len = env.file_size(&log).unwrap() as usize;
    assert!(len > 0);
    env.corrupt_byte(&log, len / 2, 0xff);
    // The keys written after the last flush are suspect: those in the log.
    let suspect: BTreeSet<Vec<u8>> = (0..1500).step_by(7).map(key).collect();
    let r = repair(&env);
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    let f = r.files.iter().find(|f| f.name == name).unwrap();
    assert!(
        f.records_kept > 0 && f.records_lost > 0 && f.moved_to_lost,
        "{f:?}"
    );
    let got = check(&env, &m, &suspect);
    // Records before the damage are kept with their newest value.
    assert_eq!(got.get(&key(0)), m.live.get(&key(0)));
}

#[test]
fn damaged_value_log_keeps_every_value_that_verifies() {
    let env = MemEnv::new();
    let m = build(&env);
    let seg = files(&env, ".vlog").into_iter().next().unwrap();
    env.corrupt_byte(&seg, 2000, 0xff);
    let r = repair(&env);
    let name = seg.file_name().unwrap().to_string_lossy().into_owned();
    let f = r.files.iter().find(|f| f.name == name).unwrap();
    assert!(f.moved_to_lost && f.error.is_some(), "{f:?}");
    assert!(r.values_inlined > 0, "{r:#?}");
    assert!(!env.exists(&seg));
    // Separated values (every fourth key) are suspect; the rest are exact.
    let suspect: BTreeSet<Vec<u8>> = (0..1500).step_by(4).map(key).collect();
    let got = check(&env, &m, &suspect);
    let missing = m.live.keys().filter(|k| !got.contains_key(*k)).count() as u64;
    assert!(
        missing <= r.values_lost,
        "{missing} keys gone, {} reported",
        r.values_lost
    );
    assert!(
        r.values_lost <= 2,
        "one damaged record loses its value only: {r:#?}"
    );
}

#[test]
fn interrupted_repair_can_be_run_again() {
    for (op, at) in [
        (FaultOp::Append, 3),
        (FaultOp::Sync, 2),
        (FaultOp::Create, 4),
        (FaultOp::Rename, 0),
        (FaultOp::Remove, 1),
        (FaultOp::SyncDir, 1),
    ] {
        let env = MemEnv::new();
        let m = build(&env);
        let victim = files(&env, ".sst").pop().unwrap();
        let suspect = table_keys(&env, &victim);
        env.corrupt_byte(&victim, 100, 0xff);
        env.set_fault_plan(FaultPlan::new(7).with(op, FaultError::Io, Trigger::Once(at)));
        let first = repair_with_env(env_arc(&env), Path::new(DIR), options());
        env.clear_faults();
        env.crash();
        if let Err(e) = &first {
            assert!(matches!(e, Error::Io { .. }), "{op:?}: {e}");
        }
        repair(&env);
        check(&env, &m, &suspect);
    }
}

#[test]
fn repair_interrupted_at_any_removal_brings_no_deleted_key_back() {
    // Repair removes the old files one by one once the new ones are in place (a removal that
    // fails is left for later). Should it stop after removing a file whose deletion shadowed a
    // value in a file still there, the next run must not read that value again.
    let removals = {
        let env = MemEnv::new();
        build(&env);
        env.list_dir(Path::new(DIR)).unwrap().len() as u64
    };
    assert!(removals > 5, "{removals} files");
    for at in 0..removals {
        let env = MemEnv::new();
        let m = build(&env);
        env.set_fault_plan(FaultPlan::new(7).with(
            FaultOp::Remove,
            FaultError::Io,
            Trigger::Once(at),
        ));
        let _ = repair_with_env(env_arc(&env), Path::new(DIR), options());
        env.clear_faults();
        env.crash();
        repair(&env);
        check(&env, &m, &BTreeSet::new());
    }
}

#[test]
fn bad_arguments_are_named() {
    let env = MemEnv::new();
    let e = repair_with_env(env_arc(&env), Path::new(""), options()).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(ref s) if s.contains("path")),
        "{e}"
    );
    let e = repair_with_env(env_arc(&env), Path::new("/nope"), options()).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(ref s) if s.contains("path")),
        "{e}"
    );
    let opts = Options {
        read_only: true,
        ..options()
    };
    build(&env);
    let e = repair_with_env(env_arc(&env), Path::new(DIR), opts).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(ref s) if s.contains("read_only")),
        "{e}"
    );
    // A database held open is refused.
    let db = open_mem_at(&env, DIR, options()).unwrap();
    assert!(repair_with_env(env_arc(&env), Path::new(DIR), options()).is_err());
    db.close().unwrap();
}
