//! Bulk ingest of external tables (`TableWriter`, `DB::ingest`): semantics (shadowing, snapshots,
//! placement, memtable flush), a model test against an ordered map with reopen and compaction,
//! bad inputs (each a clear error with nothing ingested), and a fault injected at every file
//! operation of the ingest followed by a clean reopen and by a machine crash (all files or none).
//! Seeds are printed on failure; `ATTUNE_SEED=s` replays one model seed.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{contents, open_mem_at};
use attune_kv::env::{write_file_atomic, Env, FaultError, FaultOp, FaultPlan, MemEnv, Trigger};
use attune_kv::{Error, Options, ReadOptions, TableWriter, WriteOptions, DB};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const DIR: &str = "/data/db";
const EXT: &str = "/ext";

fn options() -> Options {
    Options {
        write_buffer_size: 16 << 10,
        target_file_size: 16 << 10,
        max_bytes_for_level_base: 64 << 10,
        l0_compaction_trigger: 2,
        wal_sync_interval_ms: 0,
        min_blob_size: 64,
        blob_file_size: 32 << 10,
        ..Options::default()
    }
}

fn open(env: &MemEnv) -> DB {
    open_mem_at(env, DIR, options()).unwrap()
}

fn env() -> MemEnv {
    let env = MemEnv::new();
    env.create_dir_all(Path::new(EXT)).unwrap();
    env
}

/// Writes an external table of `entries` (None = deletion) at `/ext/<name>`.
fn external(env: &MemEnv, name: &str, entries: &[(Vec<u8>, Option<Vec<u8>>)]) -> PathBuf {
    let path = Path::new(EXT).join(name);
    let e: Arc<dyn Env> = Arc::new(env.clone());
    let mut w = TableWriter::create_with_env(e, &path, &Options::default()).unwrap();
    for (k, v) in entries {
        match v {
            Some(v) => w.put(k, v).unwrap(),
            None => w.delete(k).unwrap(),
        }
    }
    w.finish().unwrap();
    path
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn tables_in_dir(env: &MemEnv) -> usize {
    env.list_dir(Path::new(DIR))
        .unwrap()
        .iter()
        .filter(|n| n.ends_with(".sst"))
        .count()
}

#[test]
fn ingested_keys_shadow_older_writes_and_earlier_snapshots_do_not_see_them() {
    let env = env();
    let db = open(&env);
    db.put(b"a", b"old").unwrap();
    db.put(b"b", b"old").unwrap();
    db.put(b"z", b"kept").unwrap();
    db.flush().unwrap();
    let snap = db.snapshot().unwrap();
    let f = external(
        &env,
        "one.sst",
        &[
            (b"a".to_vec(), Some(b"new".to_vec())),
            (b"b".to_vec(), None),
            (b"c".to_vec(), Some(vec![7u8; 5000])),
        ],
    );
    let r = db.ingest(&[&f], false).unwrap();
    assert_eq!(r.entries, 3);
    assert_eq!(r.files.len(), 1);
    assert!(env.exists(&f), "copy mode keeps the source");
    assert_eq!(db.get(b"a").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.get(b"c").unwrap(), Some(vec![7u8; 5000]));
    assert_eq!(db.get(b"z").unwrap(), Some(b"kept".to_vec()));
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..Default::default()
    };
    assert_eq!(db.get_opt(b"a", &ro).unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get_opt(b"b", &ro).unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get_opt(b"c", &ro).unwrap(), None);
    // A later write shadows the ingested version.
    db.put(b"a", b"newer").unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"newer".to_vec()));
    drop(snap);
    drop(db);
    let db = open(&env);
    assert_eq!(db.get(b"a").unwrap(), Some(b"newer".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.get(b"c").unwrap(), Some(vec![7u8; 5000]));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.get(b"c").unwrap(), Some(vec![7u8; 5000]));
    db.put(b"d", b"after").unwrap();
    drop(db);
    let db = open(&env);
    assert_eq!(db.get(b"d").unwrap(), Some(b"after".to_vec()));
}

#[test]
fn a_file_overlapping_nothing_goes_to_the_bottom_level_and_an_overlapping_one_higher() {
    let env = env();
    let db = open(&env);
    let f = external(&env, "a.sst", &[(b"m".to_vec(), Some(b"1".to_vec()))]);
    let r = db.ingest(&[&f], false).unwrap();
    assert_eq!(
        r.files[0].level, 6,
        "an empty database places it at the last level"
    );
    let g = external(&env, "b.sst", &[(b"m".to_vec(), Some(b"2".to_vec()))]);
    let r = db.ingest(&[&g], false).unwrap();
    // Level 0 while a background compaction runs (its output could land across the file).
    assert!(
        matches!(r.files[0].level, 5 | 0),
        "above the file it overlaps: {}",
        r.files[0].level
    );
    assert_eq!(db.get(b"m").unwrap(), Some(b"2".to_vec()));
}

/// Files whose keys exist nowhere else go in unchanged at sequence 0 when no snapshot exists
/// (nothing to shadow, nobody to hide them from); a snapshot makes the ingest rewrite them
/// with a new sequence so that the snapshot does not see them.
#[test]
fn disjoint_files_keep_sequence_zero_unless_a_snapshot_exists() {
    let env = env();
    let db = open(&env);
    db.put(b"a", b"1").unwrap();
    db.flush().unwrap();
    let f = external(&env, "m.sst", &[(b"m".to_vec(), Some(b"file".to_vec()))]);
    let r = db.ingest(&[&f], false).unwrap();
    assert_eq!(r.sequence, 0, "placed as it is");
    assert_eq!(r.files[0].level, 6);
    db.put(b"m", b"later").unwrap();
    assert_eq!(db.get(b"m").unwrap(), Some(b"later".to_vec()));
    let snap = db.snapshot().unwrap();
    let g = external(&env, "x.sst", &[(b"x".to_vec(), Some(b"file".to_vec()))]);
    let r = db.ingest(&[&g], false).unwrap();
    assert!(
        r.sequence > snap.sequence(),
        "rewritten with a new sequence"
    );
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..Default::default()
    };
    assert_eq!(db.get_opt(b"x", &ro).unwrap(), None);
    assert_eq!(db.get(b"x").unwrap(), Some(b"file".to_vec()));
    drop(snap);
    drop(db);
    let db = open(&env);
    assert_eq!(db.get(b"m").unwrap(), Some(b"later".to_vec()));
    assert_eq!(db.get(b"x").unwrap(), Some(b"file".to_vec()));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"m").unwrap(), Some(b"later".to_vec()));
}

#[test]
fn an_older_range_deletion_does_not_hide_ingested_keys() {
    // A range tombstone does not widen its table's key range, so a file can overlap no table's
    // range and still fall under an older tombstone: at sequence 0 it would read as deleted.
    let env = env();
    let db = open(&env);
    db.put(b"a", b"1").unwrap();
    db.put(b"c", b"3").unwrap();
    db.delete_range(b"b", b"z").unwrap();
    db.flush().unwrap();
    let f = external(&env, "m.sst", &[(b"m".to_vec(), Some(b"file".to_vec()))]);
    let r = db.ingest(&[&f], false).unwrap();
    assert!(r.sequence > 0, "rewritten above the tombstone");
    assert_eq!(db.get(b"m").unwrap(), Some(b"file".to_vec()));
    assert_eq!(db.get(b"c").unwrap(), None);
    // Past the tombstone's end (exclusive) nothing covers a file: it keeps sequence 0.
    let g = external(&env, "z.sst", &[(b"z".to_vec(), Some(b"far".to_vec()))]);
    assert_eq!(db.ingest(&[&g], false).unwrap().sequence, 0);
    drop(db);
    let db = open(&env);
    assert_eq!(db.get(b"m").unwrap(), Some(b"file".to_vec()));
    assert_eq!(db.get(b"z").unwrap(), Some(b"far".to_vec()));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"m").unwrap(), Some(b"file".to_vec()));
}

/// A memtable holding anything is flushed first: its entries sit below the ingested files, and
/// the manifest's last sequence stays what the tables hold.
#[test]
fn a_memtable_is_flushed_first_and_an_empty_one_is_not() {
    let env = env();
    let db = open(&env);
    db.put(b"k1", b"mem").unwrap();
    let f = external(&env, "x.sst", &[(b"x".to_vec(), Some(b"1".to_vec()))]);
    assert!(db.ingest(&[&f], false).unwrap().memtable_flushed);
    let h = external(&env, "y.sst", &[(b"y".to_vec(), Some(b"1".to_vec()))]);
    assert!(!db.ingest(&[&h], false).unwrap().memtable_flushed);
    db.put(b"k1", b"mem").unwrap();
    let g = external(&env, "k.sst", &[(b"k1".to_vec(), Some(b"file".to_vec()))]);
    let r = db.ingest(&[&g], false).unwrap();
    assert!(r.memtable_flushed);
    assert_eq!(db.get(b"k1").unwrap(), Some(b"file".to_vec()));
    drop(db);
    let db = open(&env);
    assert_eq!(db.get(b"k1").unwrap(), Some(b"file".to_vec()));
    assert_eq!(db.get(b"x").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn move_removes_the_sources_once_ingested() {
    let env = env();
    let db = open(&env);
    let f = external(&env, "a.sst", &[(b"a".to_vec(), Some(b"1".to_vec()))]);
    let g = external(&env, "b.sst", &[(b"b".to_vec(), Some(b"2".to_vec()))]);
    let r = db.ingest(&[&g, &f], true).unwrap();
    assert!(r.sources_removed);
    assert!(!env.exists(&f) && !env.exists(&g));
    assert_eq!(
        r.files[0].smallest_key, b"a",
        "files are reported in key order"
    );
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
}

/// Each bad input: the error kind and words, and nothing ingested (no table added, contents
/// unchanged).
#[test]
fn bad_inputs_are_refused_by_name_and_nothing_is_ingested() {
    let env = env();
    let db = open(&env);
    db.put(b"a", b"1").unwrap();
    db.flush().unwrap();
    let before = contents(&db);
    let tables = tables_in_dir(&env);
    let good = external(&env, "good.sst", &[(b"q".to_vec(), Some(b"1".to_vec()))]);
    let check = |paths: &[PathBuf], want: &str, corruption: bool| {
        let e = db.ingest(paths, false).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "{msg} (wanted {want:?})");
        assert_eq!(
            matches!(e, Error::Corruption { .. }),
            corruption,
            "{msg}: error kind"
        );
        assert_eq!(contents(&db), before, "{want}: nothing may be ingested");
        assert_eq!(tables_in_dir(&env), tables, "{want}: no table may be left");
    };
    check(&[], "paths is empty", false);
    check(
        &[good.clone(), PathBuf::from("/ext/missing.sst")],
        "missing.sst does not exist",
        false,
    );
    check(&[good.clone(), good.clone()], "given twice", false);
    // Overlapping files.
    let o1 = external(
        &env,
        "o1.sst",
        &[(b"b".to_vec(), None), (b"f".to_vec(), None)],
    );
    let o2 = external(&env, "o2.sst", &[(b"e".to_vec(), Some(b"x".to_vec()))]);
    check(&[o1.clone(), o2.clone()], "overlap", false);
    // A damaged file: a flipped byte in its first data block.
    let bad = external(
        &env,
        "bad.sst",
        &(0..200)
            .map(|i| (key(i), Some(vec![b'v'; 30])))
            .collect::<Vec<_>>(),
    );
    assert!(env.corrupt_byte(&bad, 10, 0x40));
    check(&[good.clone(), bad], "bad.sst", true);
    // A foreign engine's table: RocksDB's magic number at the end.
    let foreign = Path::new(EXT).join("rocks.sst");
    let mut bytes = vec![0u8; 200];
    bytes.extend_from_slice(&0x88e2_41b7_85f4_cff7u64.to_le_bytes());
    write_file_atomic(&env, &foreign, &bytes).unwrap();
    check(&[foreign], "RocksDB table", false);
    // Not a table at all.
    let junk = Path::new(EXT).join("junk.sst");
    write_file_atomic(&env, &junk, &[1u8; 300]).unwrap();
    check(&[junk], "junk.sst", true);
    // A table of a database: entries carry sequences.
    let other = open_mem_at(&env, "/other", options()).unwrap();
    other.put(b"zz", b"1").unwrap();
    other.flush().unwrap();
    drop(other);
    let name = env
        .list_dir(Path::new("/other"))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".sst"))
        .unwrap();
    let copied = Path::new(EXT).join("db-table.sst");
    let data = env.read_all(&Path::new("/other").join(&name)).unwrap();
    write_file_atomic(&env, &copied, &data).unwrap();
    check(&[copied], "not an external table", false);
    // A file inside the database directory.
    let inside = Path::new(DIR).join(
        env.list_dir(Path::new(DIR))
            .unwrap()
            .into_iter()
            .find(|n| n.ends_with(".sst"))
            .unwrap(),
    );
    check(&[inside], "database directory", false);
    // The good file alone still goes in.
    db.ingest(&[&good], false).unwrap();
    assert_eq!(db.get(b"q").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn ingest_on_a_read_only_handle_is_refused() {
    let env = env();
    drop(open(&env));
    let f = external(&env, "a.sst", &[(b"a".to_vec(), Some(b"1".to_vec()))]);
    let db = open_mem_at(
        &env,
        DIR,
        Options {
            read_only: true,
            ..options()
        },
    )
    .unwrap();
    assert!(matches!(
        db.ingest(&[&f], false),
        Err(Error::ReadOnly { .. })
    ));
}

/// The oracle of the model test: every key's value.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// SplitMix64 for the model test's choices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn value(seed: u64, step: usize, k: usize, big: bool) -> Vec<u8> {
    let mut v = format!("v{seed}:{step}:{k}:").into_bytes();
    if big {
        v.resize(200, b'x');
    }
    v
}

fn model_seeds() -> Vec<u64> {
    if let Some(s) = std::env::var("ATTUNE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![s];
    }
    let n = std::env::var("ATTUNE_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6u64);
    (0..n).collect()
}

/// Ingests interleaved with puts, deletes, snapshots, flushes, compactions and reopens, against
/// an ordered map; snapshots keep copies of the map.
#[test]
fn model_ingest_interleaved_with_writes_snapshots_compactions_and_reopen() {
    const KEYS: u64 = 400;
    for seed in model_seeds() {
        let ctx = format!("seed {seed} (replay: ATTUNE_SEED={seed})");
        let env = env();
        let mut db = open(&env);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut snaps: Vec<(attune_kv::Snapshot, Model)> = Vec::new();
        let mut rng = Rng(seed);
        let mut files = 0usize;
        for step in 0..600usize {
            match rng.below(100) {
                0..=44 => {
                    let k = rng.below(KEYS) as usize;
                    let v = value(seed, step, k, rng.below(4) == 0);
                    db.put(&key(k), &v).unwrap();
                    model.insert(key(k), v);
                }
                45..=59 => {
                    let k = rng.below(KEYS) as usize;
                    db.delete(&key(k)).unwrap();
                    model.remove(&key(k));
                }
                60..=71 => {
                    // 1-3 disjoint files, each a run of keys with puts and deletions.
                    let n = 1 + rng.below(3) as usize;
                    let mut start = rng.below(KEYS / 2) as usize;
                    let mut paths = Vec::new();
                    let mut changes = Vec::new();
                    for _ in 0..n {
                        let len = 1 + rng.below(40) as usize;
                        let mut entries = Vec::new();
                        for k in start..(start + len).min(KEYS as usize) {
                            if rng.below(3) == 0 {
                                continue;
                            }
                            let v = (rng.below(5) != 0)
                                .then(|| value(seed, step, k, rng.below(4) == 0));
                            entries.push((key(k), v));
                        }
                        start += len + rng.below(10) as usize;
                        if entries.is_empty() {
                            continue;
                        }
                        files += 1;
                        paths.push(external(&env, &format!("f{files}.sst"), &entries));
                        changes.extend(entries);
                    }
                    if paths.is_empty() {
                        continue;
                    }
                    let mv = rng.below(2) == 0;
                    db.ingest(&paths, mv)
                        .unwrap_or_else(|e| panic!("{ctx}: step {step}: ingest: {e}"));
                    for (k, v) in changes {
                        match v {
                            Some(v) => model.insert(k, v),
                            None => model.remove(&k),
                        };
                    }
                }
                72..=77 => {
                    if snaps.len() < 4 {
                        snaps.push((db.snapshot().unwrap(), model.clone()));
                    } else {
                        snaps.remove(rng.below(4) as usize);
                    }
                }
                78..=83 => db.flush().unwrap(),
                84..=87 => db.compact_range(None, None).unwrap(),
                88..=90 => {
                    snaps.clear();
                    drop(db);
                    db = open(&env);
                }
                _ => {
                    let k = rng.below(KEYS) as usize;
                    assert_eq!(
                        db.get(&key(k)).unwrap(),
                        model.get(&key(k)).cloned(),
                        "{ctx}: step {step}: get {k}"
                    );
                }
            }
            if step % 50 == 49 {
                assert!(
                    contents(&db) == model,
                    "{ctx}: step {step}: contents differ"
                );
                for (i, (s, m)) in snaps.iter().enumerate() {
                    let ro = ReadOptions {
                        snapshot: Some(s.sequence()),
                        ..Default::default()
                    };
                    let mut it = db.iter(&ro).unwrap();
                    it.seek_to_first();
                    let mut got = BTreeMap::new();
                    while it.valid() {
                        got.insert(it.key().to_vec(), it.value().to_vec());
                        it.next();
                    }
                    it.status().unwrap();
                    assert!(got == *m, "{ctx}: step {step}: snapshot {i} differs");
                }
            }
        }
        snaps.clear();
        drop(db);
        let db = open(&env);
        assert!(contents(&db) == model, "{ctx}: after reopen");
    }
}

/// A fault at the n-th operation of each kind while an ingest runs, then a clean reopen or a
/// machine crash: the ingested files are all there or none, every write acknowledged before a
/// successful ingest survives it, and the database takes writes again.
#[test]
fn a_fault_at_any_file_operation_of_an_ingest_leaves_all_files_or_none() {
    let mut fired = 0u64;
    let mut outcomes = [0u32; 2];
    // The files overlap earlier writes (rewritten with a new sequence) or nothing (placed
    // unchanged at sequence 0).
    for base in [100usize, 1000] {
        for op in [
            FaultOp::Append,
            FaultOp::Sync,
            FaultOp::SyncDir,
            FaultOp::Create,
            FaultOp::Read,
        ] {
            for n in 0..12u64 {
                for crash in [false, true] {
                    let ctx = format!("files at {base}: op {op:?} at {n} crash {crash}");
                    let env = env();
                    let db = open(&env);
                    for i in 0..150 {
                        let sync = i % 50 == 49;
                        db.put_opt(&key(i), b"before", WriteOptions { sync })
                            .unwrap();
                    }
                    let a: Vec<_> = (base..base + 120)
                        .map(|i| (key(i), Some(b"ingested".to_vec())))
                        .collect();
                    let b: Vec<_> = (base + 200..base + 300)
                        .map(|i| (key(i), Some(vec![b'i'; 100])))
                        .collect();
                    let fa = external(&env, "a.sst", &a);
                    let fb = external(&env, "b.sst", &b);
                    env.set_fault_plan(FaultPlan::new(n).with(
                        op,
                        FaultError::Io,
                        Trigger::Once(n),
                    ));
                    let r = db.ingest(&[&fa, &fb], false);
                    fired += env.faults_fired();
                    env.clear_faults();
                    outcomes[usize::from(r.is_ok())] += 1;
                    let db = if crash {
                        env.power_off();
                        drop(db);
                        env.crash_torn(n);
                        open_mem_at(&env, DIR, options())
                            .unwrap_or_else(|e| panic!("{ctx}: open after crash: {e}"))
                    } else {
                        drop(db);
                        open_mem_at(&env, DIR, options())
                            .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"))
                    };
                    let is = |i: usize, v: &[u8]| db.get(&key(i)).unwrap().as_deref() == Some(v);
                    let first = is(base, b"ingested");
                    for i in (base..base + 120).chain(base + 200..base + 300) {
                        let want: &[u8] = if i < base + 120 {
                            b"ingested"
                        } else {
                            &[b'i'; 100]
                        };
                        assert_eq!(is(i, want), first, "{ctx}: key {i}: files partly ingested");
                    }
                    if r.is_ok() {
                        assert!(first, "{ctx}: a successful ingest was lost");
                        for i in 0..100 {
                            assert!(is(i, b"before"), "{ctx}: write {i} before the ingest lost");
                        }
                    } else if !crash {
                        // Not synced yet may be lost only by a crash.
                        for i in 0..100 {
                            assert!(is(i, b"before"), "{ctx}: write {i} lost without a crash");
                        }
                    }
                    if !first && !crash {
                        for i in 100..150 {
                            assert!(is(i, b"before"), "{ctx}: write {i} lost without a crash");
                        }
                    }
                    db.put_opt(b"after", b"1", WriteOptions { sync: true })
                        .unwrap_or_else(|e| panic!("{ctx}: write after recovery: {e}"));
                    // A second ingest of the same files works (or finds them in already).
                    db.ingest(&[&fa, &fb], false)
                        .unwrap_or_else(|e| panic!("{ctx}: ingest after recovery: {e}"));
                    assert!(is(base + 50, b"ingested"), "{ctx}");
                }
            }
        }
    }
    assert!(fired > 0, "no fault fired");
    assert!(
        outcomes[0] > 0 && outcomes[1] > 0,
        "faults should both fail and spare ingests: {outcomes:?}"
    );
    eprintln!("ingest faults: {fired} injected, outcomes (failed, ok) {outcomes:?}");
}

/// The manifest's last record is an ingestion's (tables at new sequence numbers that no log
/// holds). Damaging it must not delete the ingested tables as unlisted: with evidence that the
/// record had been durable (later writes in the log, or a clean close past it) the open fails
/// naming the manifest and repair recovers everything; without (what a crash during the
/// ingestion leaves) the open goes on and keeps the tables in `lost/`.
#[test]
fn a_damaged_ingestion_record_keeps_the_ingested_tables() {
    let opts = || Options {
        wal_sync_interval_ms: 0,
        ..Options::default()
    };
    let manifest = |env: &MemEnv| {
        let name = env
            .list_dir(Path::new(DIR))
            .unwrap()
            .into_iter()
            .find(|n| n.starts_with("MANIFEST-"))
            .unwrap();
        Path::new(DIR).join(name)
    };
    // later: writes after the ingestion; clean: a clean close (else a crash's state).
    for (later, clean) in [(true, false), (false, true), (false, false)] {
        let case = format!("later writes {later}, clean close {clean}");
        let env = env();
        let db = open_mem_at(&env, DIR, opts()).unwrap();
        for i in 0..100 {
            db.put(&key(i), b"old").unwrap();
        }
        db.flush().unwrap();
        // Overlaps the table: rewritten at a new sequence number.
        let f = external(
            &env,
            "f.sst",
            &(50..150)
                .map(|i| (key(i), Some(b"ingested".to_vec())))
                .collect::<Vec<_>>(),
        );
        assert!(db.ingest(&[&f], false).unwrap().sequence > 0, "{case}");
        if later {
            db.put(b"zz-later", b"1").unwrap();
        }
        drop(db);
        if !clean {
            env.remove_file(&Path::new(DIR).join("CLOSED")).unwrap();
        }
        let m = manifest(&env);
        let len = env.file_size(&m).unwrap() as usize;
        assert!(env.corrupt_byte(&m, len - 1, 0x5a), "{case}");
        let before = env.list_dir(Path::new(DIR)).unwrap();
        match open_mem_at(&env, DIR, opts()) {
            Err(e) if later || clean => {
                let msg = e.to_string();
                assert!(
                    matches!(e, Error::Corruption { .. })
                        && msg.contains("MANIFEST-")
                        && msg.contains("repair"),
                    "{case}: {msg}"
                );
                let mut after = env.list_dir(Path::new(DIR)).unwrap();
                let mut b = before.clone();
                after.sort();
                b.sort();
                assert_eq!(after, b, "{case}: the refused open changed files");
                attune_kv::repair_with_env(
                    Arc::new(env.clone()) as Arc<dyn Env>,
                    Path::new(DIR),
                    opts(),
                )
                .unwrap();
                let db = open_mem_at(&env, DIR, opts()).unwrap();
                assert_eq!(
                    db.get(&key(120)).unwrap().as_deref(),
                    Some(&b"ingested"[..])
                );
                assert_eq!(db.get(&key(60)).unwrap().as_deref(), Some(&b"ingested"[..]));
                assert_eq!(db.get(&key(10)).unwrap().as_deref(), Some(&b"old"[..]));
                if later {
                    assert_eq!(db.get(b"zz-later").unwrap().as_deref(), Some(&b"1"[..]));
                }
            }
            Err(e) => panic!("{case}: {e}"),
            Ok(db) => {
                assert!(!later && !clean, "{case}: the damaged record was accepted");
                // The ingestion did not happen; its table is kept, not deleted.
                assert_eq!(db.get(&key(120)).unwrap(), None);
                assert_eq!(db.get(&key(60)).unwrap().as_deref(), Some(&b"old"[..]));
                let lost = env.list_dir(&Path::new(DIR).join("lost")).unwrap();
                assert!(lost.iter().any(|n| n.ends_with(".sst")), "{case}: {lost:?}");
            }
        }
    }
}
