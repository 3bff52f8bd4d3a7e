//! The stress driver: threads of random operations (puts, deletes, range deletes, batches, point
//! reads, range scans both ways, snapshot reads, flushes, compactions) against an [`Oracle`],
//! cut by crashes, then a recovery that is checked key by key and by a full scan.
//!
//! Two crash modes:
//! - `mem`: the database runs on a [`MemEnv`]; at a point drawn from the seed the machine is
//!   powered off mid-operation and crashed (either everything unsynced lost, or torn at sector
//!   granularity with a prefix of directory operations kept); some cycles also run under a
//!   [`FaultPlan`] (ENOSPC, EIO, failing fsyncs) or end in a clean close.
//! - `kill`: a child process runs the workload on the real file system and streams every issue
//!   and acknowledgement to the parent through a pipe *before* (issue) and *after* (ack) the
//!   operation; the parent kills it with SIGKILL at a seeded moment, reopens the database and
//!   checks it against the oracle rebuilt from the stream (all acknowledged writes must survive a
//!   process crash).
//!
//! Every random choice comes from the seed (ChaCha8 streams per cycle and thread); thread
//! interleaving and background work are the scheduler's, so a failing seed is replayed by
//! running the same command (with `--threads 1` the workload itself is fully determined).
//!
//! A quarter of the puts carry a time to live of a day (never reached in a run).
//!
//! Values name their writer: `"<key>:<op>:"` then filler derived from the op, so a recovered
//! value identifies exactly which write produced it and any foreign byte is caught.
//!
//! Thread safety: workers share the `DB` and the `Oracle`; counters are atomics.

use crate::counters::{self, counter_key, COUNTERS, COUNTERS_START};
use crate::oracle::{Lost, Oracle, VerifyStats};
use attune_kv::env::{CrashReport, Env, FaultError, FaultOp, FaultPlan, MemEnv, PosixEnv, Trigger};
use attune_kv::LearnedIndex;
use attune_kv::{Compression, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions, DB};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Keys per run: 2,000 keeps each key written many times per cycle (overwrites, deletes and
/// batches collide) while a full verification stays cheap.
pub const KEYS_DEFAULT: u32 = 2000;
/// Keys a scan covers (and locks): 24.
const SCAN_KEYS_MAX: u32 = 24;
/// Updates per batch: 2 to 8.
const BATCH_KEYS_MAX: usize = 8;
/// Snapshots a worker holds at once: 2.
const SNAPSHOTS_MAX: usize = 2;
/// The time to live of the stress run's expiring puts: a day, far beyond any run.
const TTL_FAR: Duration = Duration::from_secs(86_400);

/// Crash mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Mem,
    Kill,
}

/// The engine under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// attune-kv's `DB` (the LSM tree).
    Db,
    /// The Plush hash table (`attune.HashDB`); `kill` mode only (see [`crate::hash`]).
    Hash,
}

/// A run's settings.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    pub mode: Mode,
    pub engine: Engine,
    pub seed: u64,
    pub threads: usize,
    pub duration: Duration,
    /// Stop after this many crash/recover cycles (0: only the duration limits the run).
    pub cycles_max: u64,
    pub keys: u32,
    /// Directory for `kill` mode (a temporary one when None).
    pub dir: Option<PathBuf>,
    /// Path of this program, for `kill` mode children.
    pub exe: Option<PathBuf>,
}

/// Totals of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub mode: String,
    pub engine: String,
    pub seed: u64,
    pub threads: usize,
    pub cycles: u64,
    pub machine_crashes: u64,
    pub torn_crashes: u64,
    pub clean_closes: u64,
    pub sigkills: u64,
    /// SIGKILLs that landed before the child had finished opening (recovery interrupted).
    pub sigkills_during_open: u64,
    pub operations: u64,
    pub writes_acked: u64,
    pub writes_failed: u64,
    pub reads_verified: u64,
    pub scans_verified: u64,
    pub snapshot_reads_verified: u64,
    /// Flushes (HashDB: checkpoints, every DRAM entry migrated).
    pub flushes: u64,
    pub compactions: u64,
    /// Value-log segments collected by on-demand GC ops.
    pub gc_segments: u64,
    /// Transactions committed, and those that failed with the conflict planted for them.
    pub txn_commits: u64,
    pub txn_conflicts: u64,
    /// Ingests acknowledged (mem mode) or issued (kill mode, counted from the child's stream).
    pub ingests: u64,
    pub fault_cycles: u64,
    pub faults_injected: u64,
    pub torn_files: u64,
    pub garbage_sectors: u64,
    pub unsynced_bytes_dropped: u64,
    pub dir_ops_reverted: u64,
    pub keys_verified: u64,
    pub scan_entries_verified: u64,
    pub inflight_writes_recovered: u64,
    pub unsynced_writes_lost: u64,
    /// HashDB kill cycles whose child ran without the recovery log (judged by
    /// [`crate::oracle::Lost::Unmigrated`]).
    pub unlogged_cycles: u64,
    /// Catch-ups of the secondary reader (`mem` cycles that draw it) and the keys it checked.
    pub secondary_catch_ups: u64,
    pub secondary_keys_checked: u64,
    /// `add` merges acknowledged, and merge-counter values checked after recoveries.
    pub merges_acked: u64,
    pub counters_verified: u64,
    pub violations: u64,
    pub seconds: f64,
    pub replay: String,
}

/// Operations of the mix. Adding one is a variant, a weight in [`MIX`] and an arm in
/// `Worker::step`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Put,
    Delete,
    /// `delete_range` over 1–24 consecutive keys: to the oracle, an atomic delete of each.
    DeleteRange,
    Batch,
    Get,
    Scan,
    SnapshotRead,
    Flush,
    Compact,
    /// Value-log garbage collection on demand (it also runs in the background).
    Gc,
    /// `learn_all` (file models and, with `learned_level`, level models) when models are on.
    Learn,
    /// A table of 1–16 sorted keys built with `TableWriter` and added by `DB::ingest`: to the
    /// oracle a synced batch (an acknowledged ingest is durable, with every write before it).
    Ingest,
    /// An `add` merge to a counter key (`counters.rs`), read back.
    Merge,
    /// An optimistic transaction: reads checked against the oracle, then a commit; a quarter
    /// of them meet a write planted after their snapshot and must fail with a conflict.
    Txn,
}

/// Weights of the operations (per 1,000). Writes dominate so crashes land in busy logs; flushes
/// and compactions are frequent enough that crashes also land in table and manifest writes.
const MIX: [(Op, u32); 14] = [
    (Op::Put, 400),
    (Op::Delete, 105),
    (Op::DeleteRange, 15),
    (Op::Batch, 120),
    (Op::Get, 200),
    (Op::Scan, 60),
    (Op::SnapshotRead, 50),
    (Op::Flush, 20),
    (Op::Compact, 10),
    (Op::Gc, 8),
    (Op::Learn, 5),
    (Op::Txn, 40),
    (Op::Ingest, 12),
    (Op::Merge, 60),
];

/// One of `mix`'s operations, drawn by weight (a worker's next step, DB's or HashDB's).
pub(crate) fn pick_weighted<T: Copy>(rng: &mut ChaCha8Rng, mix: &[(T, u32)]) -> T {
    let total: u32 = mix.iter().map(|m| m.1).sum();
    let mut x = rng.gen_range(0..total);
    for &(op, w) in mix {
        if x < w {
            return op;
        }
        x -= w;
    }
    mix[mix.len() - 1].0
}

/// SplitMix64 for deriving stream seeds.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The stream (per cycle) that draws whether a secondary reader runs beside the workers.
const SECONDARY_STREAM: u64 = 1 << 32;
/// The stream of the option draws added after a seed's history was fixed (see [`options`]).
const LATER_OPTIONS_STREAM: u64 = 1 << 33;

pub(crate) fn stream(seed: u64, a: u64, b: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix(seed ^ mix(a ^ mix(b))))
}

pub fn key_bytes(k: u32) -> Vec<u8> {
    format!("k{k:07}").into_bytes()
}

pub(crate) fn parse_key(b: &[u8]) -> Option<u32> {
    std::str::from_utf8(b.strip_prefix(b"k")?)
        .ok()?
        .parse()
        .ok()
}

/// The value written by op `op` to key `k`.
pub fn value_bytes(k: u32, op: u64) -> Vec<u8> {
    let h = mix(op ^ (u64::from(k) << 40));
    let len = match h % 100 {
        0 => 4096 + (h >> 8) as usize % 8192, // a few large values span blocks
        _ => 8 + (h >> 8) as usize % 300,
    };
    let mut v = format!("{k}:{op}:").into_bytes();
    let mut x = h;
    while v.len() < len {
        x = mix(x);
        v.push(b'a' + (x % 26) as u8);
    }
    v
}

/// The op that wrote `v` to key `k`, if `v` is exactly such a value.
pub(crate) fn value_op(k: u32, v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v.get(..v.len().min(40))?).ok()?;
    let mut parts = s.splitn(3, ':');
    let key: u32 = parts.next()?.parse().ok()?;
    let op: u64 = parts.next()?.parse().ok()?;
    (key == k && value_bytes(k, op) == v).then_some(op)
}

pub(crate) fn describe(v: Option<&[u8]>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => String::from_utf8_lossy(&v[..v.len().min(32)]).into_owned(),
    }
}

/// Where write issues and outcomes go besides the oracle (the pipe to the parent in kill mode).
pub(crate) trait Sink: Send + Sync {
    fn issue(&self, op: u64, sync: bool, items: &[(u32, bool)]);
    fn finish(&self, op: u64, ok: bool);
    /// A maintenance event the workers counted (`what` names a [`Report`] field: `flushes`,
    /// `compactions`, `gc_segments`, `txn_commits`, `txn_conflicts`). A killed child cannot
    /// send a summary, so kill mode streams each event and the parent adds them up.
    fn counted(&self, _what: &'static str, _n: u64) {}
    /// An ingest's keys: a synced write to the oracle (`PipeSink` marks it for the count).
    fn issue_ingest(&self, op: u64, items: &[(u32, bool)]) {
        self.issue(op, true, items);
    }
    /// A merge of `n` to counter `c` begins / ended (see [`crate::counters`]).
    fn merge_issue(&self, _c: u32, _n: u64) {}
    fn merge_finish(&self, _c: u32, _n: u64, _ok: bool, _sync: bool) {}
    /// Checkpoint `id` (HashDB: every DRAM entry migrated) begins / returned successfully;
    /// without the recovery log, the writes acknowledged before it began are durable once it
    /// returned.
    fn checkpoint_begin(&self, _id: u64) {}
    fn checkpoint_done(&self, _id: u64) {}
}

struct NoSink;
impl Sink for NoSink {
    fn issue(&self, _: u64, _: bool, _: &[(u32, bool)]) {}
    fn finish(&self, _: u64, _: bool) {}
}

/// Streams events as lines on stdout: `I <op> <sync 0|1> <key><P|D>...`, `A|F <op>`,
/// `N <counter> <n>` (see [`Sink::counted`]) and `K|C <checkpoint id>` (see
/// [`Sink::checkpoint_begin`]).
pub(crate) struct PipeSink {
    out: Mutex<std::io::Stdout>,
}

impl PipeSink {
    pub(crate) fn stdout() -> PipeSink {
        PipeSink {
            out: Mutex::new(std::io::stdout()),
        }
    }
}

impl PipeSink {
    /// `I <op> <sync: 0|1, or 2 for an ingest, synced> <key><P|D>...`.
    fn issue_line(&self, op: u64, sync_field: u8, items: &[(u32, bool)]) {
        let mut line = format!("I {op} {sync_field}");
        for (k, put) in items {
            line.push_str(&format!(" {k}{}", if *put { 'P' } else { 'D' }));
        }
        line.push('\n');
        let mut o = self.out.lock();
        // The parent must know of a write before the engine does: write and flush first.
        if o.write_all(line.as_bytes())
            .and_then(|_| o.flush())
            .is_err()
        {
            std::process::exit(3); // the parent is gone
        }
    }
}

impl Sink for PipeSink {
    fn issue(&self, op: u64, sync: bool, items: &[(u32, bool)]) {
        self.issue_line(op, u8::from(sync), items);
    }
    fn issue_ingest(&self, op: u64, items: &[(u32, bool)]) {
        self.issue_line(op, 2, items);
    }
    fn finish(&self, op: u64, ok: bool) {
        self.line(&format!("{} {op}\n", if ok { 'A' } else { 'F' }));
    }
    fn merge_issue(&self, c: u32, n: u64) {
        self.line(&format!("M {c} {n}\n"));
    }
    fn merge_finish(&self, c: u32, n: u64, ok: bool, sync: bool) {
        self.line(&format!("m {c} {n} {} {}\n", u8::from(ok), u8::from(sync)));
    }
    fn counted(&self, what: &'static str, n: u64) {
        if n > 0 {
            self.line(&format!("N {what} {n}\n"));
        }
    }
    fn checkpoint_begin(&self, id: u64) {
        self.line(&format!("K {id}\n"));
    }
    fn checkpoint_done(&self, id: u64) {
        self.line(&format!("C {id}\n"));
    }
}

impl PipeSink {
    fn line(&self, line: &str) {
        let mut o = self.out.lock();
        if o.write_all(line.as_bytes())
            .and_then(|_| o.flush())
            .is_err()
        {
            std::process::exit(3); // the parent is gone
        }
    }
}

/// Counters shared by the workers of a cycle.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) ops: AtomicU64,
    pub(crate) acked: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) reads: AtomicU64,
    scans: AtomicU64,
    snap_reads: AtomicU64,
    /// Flushes (HashDB: checkpoints).
    pub(crate) flushes: AtomicU64,
    compactions: AtomicU64,
    pub(crate) gc_segments: AtomicU64,
    ingests: AtomicU64,
    txn_commits: AtomicU64,
    txn_conflicts: AtomicU64,
    merges: AtomicU64,
}

/// What workers share in one cycle.
struct Shared<'a> {
    db: &'a DB,
    oracle: &'a Oracle,
    sink: &'a dyn Sink,
    next_op: &'a AtomicU64,
    counters: &'a Counters,
    stop: &'a AtomicBool,
    /// Errors are expected (powered off, or faults injected): they mark writes as failed.
    errors_expected: &'a AtomicBool,
    violation: &'a Mutex<Option<String>>,
    keys: u32,
    /// The database's file system, and a directory (inside the database's, which the engine
    /// ignores) for the tables `Op::Ingest` builds.
    env: Arc<dyn Env>,
    ingest_dir: PathBuf,
}

impl Shared<'_> {
    fn fail(&self, msg: String) {
        let mut v = self.violation.lock();
        if v.is_none() {
            *v = Some(msg);
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    fn error(&self, what: &str, e: &attune_kv::Error) {
        if !self.errors_expected.load(Ordering::SeqCst) {
            self.fail(format!("{what} failed without an injected fault: {e}"));
        }
    }
}

/// A key read through a snapshot and the (op, put) values the oracle allowed when it was taken.
type SnapshotExpect = (u32, Vec<(u64, bool)>);

struct Worker<'a> {
    sh: &'a Shared<'a>,
    rng: ChaCha8Rng,
    snapshots: Vec<(Snapshot, Vec<SnapshotExpect>)>,
}

fn check_read(k: u32, got: Option<&[u8]>, allowed: &[(u64, bool)]) -> Result<(), String> {
    let ok = match got {
        None => allowed.iter().any(|&(_, put)| !put),
        Some(v) => value_op(k, v).is_some_and(|op| allowed.contains(&(op, true))),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "key {k}: read {} but the oracle allows {allowed:?} (op, put)",
            describe(got)
        ))
    }
}

impl Worker<'_> {
    fn run(&mut self) {
        while !self.sh.stop.load(Ordering::Relaxed) {
            self.step();
            self.sh.counters.ops.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn key(&mut self) -> u32 {
        // A hot tenth of the keys takes half the traffic.
        if self.rng.gen_bool(0.5) {
            self.rng.gen_range(0..(self.sh.keys / 10).max(1))
        } else {
            self.rng.gen_range(0..self.sh.keys)
        }
    }

    fn step(&mut self) {
        let sh = self.sh;
        match pick_weighted(&mut self.rng, &MIX) {
            Op::Put => {
                let k = self.key();
                self.write(vec![(k, true)], None);
            }
            Op::Delete => {
                let k = self.key();
                self.write(vec![(k, false)], None);
            }
            Op::DeleteRange => {
                let a = self.key();
                let b = (a + self.rng.gen_range(1..=SCAN_KEYS_MAX)).min(sh.keys);
                self.write((a..b).map(|k| (k, false)).collect(), Some((a, b)));
            }
            Op::Batch => {
                let n = self.rng.gen_range(2..=BATCH_KEYS_MAX);
                let mut keys: Vec<u32> = (0..n).map(|_| self.key()).collect();
                keys.sort_unstable();
                keys.dedup();
                let items = keys
                    .into_iter()
                    .map(|k| (k, self.rng.gen_bool(0.75)))
                    .collect();
                self.write(items, None);
            }
            Op::Get => {
                let k = self.key();
                let g = sh.oracle.lock(&[k]);
                let allowed = Oracle::allowed_live(&g[0]);
                match sh.db.get(&key_bytes(k)) {
                    Ok(v) => {
                        if let Err(e) = check_read(k, v.as_deref(), &allowed) {
                            sh.fail(format!("get: {e}"));
                        }
                        sh.counters.reads.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => sh.error("get", &e),
                }
            }
            Op::Scan => self.scan(),
            Op::SnapshotRead => self.snapshot_op(),
            Op::Flush => match sh.db.flush() {
                Ok(()) => {
                    sh.counters.flushes.fetch_add(1, Ordering::Relaxed);
                    sh.sink.counted("flushes", 1);
                }
                Err(e) => sh.error("flush", &e),
            },
            Op::Compact => {
                let a = key_bytes(self.key());
                let b = key_bytes(self.key());
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                match sh.db.compact_range(Some(&lo), Some(&hi)) {
                    Ok(()) => {
                        sh.counters.compactions.fetch_add(1, Ordering::Relaxed);
                        sh.sink.counted("compactions", 1);
                    }
                    Err(e) => sh.error("compaction", &e),
                }
            }
            Op::Learn if sh.db.options().learned_index == LearnedIndex::Off => {}
            Op::Learn => {
                if let Err(e) = sh.db.learn_all() {
                    sh.error("learn_all", &e);
                }
            }
            Op::Txn => self.transaction(),
            Op::Ingest => self.ingest(),
            Op::Merge => self.merge_counter(),
            Op::Gc if std::env::var("NOGC").is_ok() => {}
            Op::Gc => {
                let ratio = [0.0, 0.3][self.rng.gen_range(0..2)];
                match sh.db.gc_with_ratio(ratio) {
                    Ok(r) => {
                        sh.counters
                            .gc_segments
                            .fetch_add(r.segments_collected, Ordering::Relaxed);
                        sh.sink.counted("gc_segments", r.segments_collected);
                    }
                    Err(e) => sh.error("gc", &e),
                }
            }
        }
    }

    /// Adds 1 to 3 to a merge counter (alone, or as a batch of two operands), then reads it
    /// back: the value must lie between what was acknowledged before the read and what was
    /// issued after it.
    fn merge_counter(&mut self) {
        let sh = self.sh;
        let c = self.rng.gen_range(0..COUNTERS);
        let sync = self.rng.gen_bool(0.1);
        let n = self.rng.gen_range(1..=3u64);
        let split = n > 1 && self.rng.gen_bool(0.5);
        let ctr = &sh.oracle.counters;
        ctr.issue(c, n);
        sh.sink.merge_issue(c, n);
        let wo = WriteOptions { sync };
        let key = counter_key(c);
        let r = if split {
            let mut b = WriteBatch::new();
            b.merge(&key, &1u64.to_le_bytes())
                .and_then(|()| b.merge(&key, &(n - 1).to_le_bytes()))
                .and_then(|()| sh.db.write(b, wo))
        } else {
            sh.db.merge_opt(&key, &n.to_le_bytes(), wo)
        };
        let ok = r.is_ok();
        match &r {
            Ok(()) => {
                sh.counters.merges.fetch_add(1, Ordering::Relaxed);
                sh.counters.acked.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                sh.error("merge", e);
                sh.counters.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        ctr.finish(c, n, ok, sync);
        sh.sink.merge_finish(c, n, ok, sync);
        let lo = ctr.lower_now(c);
        let got = sh.db.get(&key);
        let hi = ctr.upper_now(c);
        match got.map(|v| counters::decode(v.as_deref())) {
            Ok(Ok(v)) if (lo..=hi).contains(&v) => {
                sh.counters.reads.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Ok(v)) => sh.fail(format!(
                "merge counter {c} reads {v}, expected between {lo} and {hi}"
            )),
            Ok(Err(e)) => sh.fail(format!("merge counter {c}: {e}")),
            Err(e) => sh.error("merge counter read", &e),
        }
    }

    /// Writes `items` (key, put?) atomically; `range` = (a, b): they are the deletes of keys
    /// a..b, written as one `delete_range`.
    fn write(&mut self, items: Vec<(u32, bool)>, range: Option<(u32, u32)>) {
        let sh = self.sh;
        let sync = self.rng.gen_bool(0.1);
        let keys: Vec<u32> = items.iter().map(|&(k, _)| k).collect();
        let mut guards = sh.oracle.lock(&keys);
        let op = sh.next_op.fetch_add(1, Ordering::SeqCst);
        sh.oracle.issue(&mut guards, op, &items);
        sh.sink.issue(op, sync, &items);
        let wo = WriteOptions { sync };
        // A quarter of the puts carry a time to live far beyond the run: the oracle treats them
        // as plain puts, and the run checks that expiring entries survive every crash,
        // recovery, flush, compaction and collection like any other.
        let ttl = self.rng.gen_bool(0.25).then_some(TTL_FAR);
        let r = if let Some((a, b)) = range {
            sh.db.delete_range_opt(&key_bytes(a), &key_bytes(b), wo)
        } else if items.len() == 1 && self.rng.gen_bool(0.5) {
            let (k, put) = items[0];
            match (put, ttl) {
                (true, None) => sh.db.put_opt(&key_bytes(k), &value_bytes(k, op), wo),
                (true, Some(t)) => sh.db.put_ttl(&key_bytes(k), &value_bytes(k, op), t, wo),
                (false, _) => sh.db.delete_opt(&key_bytes(k), wo),
            }
        } else {
            let mut b = WriteBatch::new();
            let mut r = Ok(());
            let expires = sh.db.now_unix_millis() + TTL_FAR.as_millis() as u64;
            for &(k, put) in &items {
                if r.is_ok() {
                    r = match (put, ttl) {
                        (true, None) => b.put(&key_bytes(k), &value_bytes(k, op)),
                        (true, Some(_)) => {
                            b.put_with_expiry(&key_bytes(k), &value_bytes(k, op), expires)
                        }
                        (false, _) => b.delete(&key_bytes(k)),
                    };
                }
            }
            r.and_then(|()| sh.db.write(b, wo))
        };
        let ok = r.is_ok();
        if let Err(e) = &r {
            sh.error("write", e);
            sh.counters.failed.fetch_add(1, Ordering::Relaxed);
        } else {
            sh.counters.acked.fetch_add(1, Ordering::Relaxed);
        }
        sh.oracle.finish(&mut guards, op, ok, sync);
        sh.sink.finish(op, ok);
    }

    /// Builds an external table of 1–16 sorted keys in `<db>/ingest-tmp/` and ingests it
    /// (moved or copied). The keys are locked in the oracle while the table is built, so the
    /// values it holds name this operation like any write's.
    fn ingest(&mut self) {
        let sh = self.sh;
        let n = self.rng.gen_range(1..=2 * BATCH_KEYS_MAX);
        let mut keys: Vec<u32> = (0..n).map(|_| self.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        let items: Vec<(u32, bool)> = keys.iter().map(|&k| (k, self.rng.gen_bool(0.8))).collect();
        let mv = self.rng.gen_bool(0.5);
        let mut guards = sh.oracle.lock(&keys);
        let op = sh.next_op.fetch_add(1, Ordering::SeqCst);
        let dir = sh.ingest_dir.as_path();
        let path = dir.join(format!("{op}.sst"));
        let built = sh.env.create_dir_all(dir).and_then(|()| {
            let mut w =
                attune_kv::TableWriter::create_with_env(sh.env.clone(), &path, sh.db.options())?;
            for &(k, put) in &items {
                if put {
                    w.put(&key_bytes(k), &value_bytes(k, op))?;
                } else {
                    w.delete(&key_bytes(k))?;
                }
            }
            w.finish()
        });
        if let Err(e) = built {
            // Not a write: nothing was issued.
            return sh.error("table writer", &e);
        }
        sh.oracle.issue(&mut guards, op, &items);
        sh.sink.issue_ingest(op, &items);
        let r = sh.db.ingest(&[&path], mv);
        let ok = r.is_ok();
        if let Err(e) = &r {
            sh.error("ingest", e);
            sh.counters.failed.fetch_add(1, Ordering::Relaxed);
        } else {
            sh.counters.acked.fetch_add(1, Ordering::Relaxed);
            sh.counters.ingests.fetch_add(1, Ordering::Relaxed);
        }
        sh.oracle.finish(&mut guards, op, ok, true);
        sh.sink.finish(op, ok);
        let _ = sh.env.remove_file(&path);
    }

    /// A transaction over 1–4 keys, locked in the oracle so no other worker writes them: its
    /// reads must be what the oracle allows, and its commit must succeed, unless this worker
    /// planted a write to its first key after the snapshot, when it must fail with a conflict
    /// and leave that write in place. (A conflict without a planted write is allowed: a
    /// garbage-collection move rewrites a key's pointer at a new sequence.)
    fn transaction(&mut self) {
        let sh = self.sh;
        let n = self.rng.gen_range(1..=4);
        let mut keys: Vec<u32> = (0..n).map(|_| self.key()).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut guards = sh.oracle.lock(&keys);
        let mut txn = match sh.db.transaction() {
            Ok(t) => t,
            Err(e) => return sh.error("begin a transaction", &e),
        };
        for (g, &k) in guards.iter().zip(&keys) {
            match txn.get(&key_bytes(k)) {
                Ok(v) => {
                    if let Err(e) = check_read(k, v.as_deref(), &Oracle::allowed_live(g)) {
                        return sh.fail(format!("transaction read: {e}"));
                    }
                }
                Err(e) => return sh.error("transaction read", &e),
            }
        }
        let planted = if self.rng.gen_bool(0.25) {
            let k = keys[0];
            let op = sh.next_op.fetch_add(1, Ordering::SeqCst);
            sh.oracle.issue(&mut guards[..1], op, &[(k, true)]);
            sh.sink.issue(op, false, &[(k, true)]);
            let r = sh.db.put(&key_bytes(k), &value_bytes(k, op));
            if let Err(e) = &r {
                sh.error("write planted in a transaction", e);
            }
            sh.oracle.finish(&mut guards[..1], op, r.is_ok(), false);
            sh.sink.finish(op, r.is_ok());
            if r.is_err() {
                return;
            }
            Some((k, op))
        } else {
            None
        };
        let items: Vec<(u32, bool)> = keys.iter().map(|&k| (k, self.rng.gen_bool(0.8))).collect();
        let sync = self.rng.gen_bool(0.1);
        let op = sh.next_op.fetch_add(1, Ordering::SeqCst);
        for &(k, put) in &items {
            let r = if put {
                txn.put(&key_bytes(k), &value_bytes(k, op))
            } else {
                txn.delete(&key_bytes(k))
            };
            if let Err(e) = r {
                return sh.fail(format!("transaction buffer of key {k}: {e}"));
            }
        }
        sh.oracle.issue(&mut guards, op, &items);
        sh.sink.issue(op, sync, &items);
        let r = txn.commit(WriteOptions { sync });
        let ok = r.is_ok();
        match (&r, planted) {
            (Ok(()), Some((k, p))) => sh.fail(format!(
                "transaction {op} committed although key {k} was written (op {p}) after its \
                 snapshot"
            )),
            (Ok(()), None) => {
                sh.counters.txn_commits.fetch_add(1, Ordering::Relaxed);
                sh.sink.counted("txn_commits", 1);
                sh.counters.acked.fetch_add(1, Ordering::Relaxed);
            }
            (Err(attune_kv::Error::Conflict(_)), planted) => {
                if planted.is_some() {
                    sh.counters.txn_conflicts.fetch_add(1, Ordering::Relaxed);
                    sh.sink.counted("txn_conflicts", 1);
                }
            }
            (Err(e), _) => {
                sh.error("transaction commit", e);
                sh.counters.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        // A failed commit wrote nothing: the planted write is what a read finds.
        if let (Err(attune_kv::Error::Conflict(_)), Some((k, p))) = (&r, planted) {
            match sh.db.get(&key_bytes(k)) {
                Ok(v) => {
                    if let Err(e) = check_read(k, v.as_deref(), &[(p, true)]) {
                        sh.fail(format!("after a conflicting commit: {e}"));
                    }
                }
                Err(e) => sh.error("read after a conflict", &e),
            }
        }
        sh.oracle.finish(&mut guards, op, ok, sync);
        sh.sink.finish(op, ok);
    }

    fn scan(&mut self) {
        let sh = self.sh;
        let lo = self.rng.gen_range(0..sh.keys);
        let n = self.rng.gen_range(1..=SCAN_KEYS_MAX).min(sh.keys - lo);
        let keys: Vec<u32> = (lo..lo + n).collect();
        let guards = sh.oracle.lock(&keys);
        let mut it = sh
            .db
            .iter(&ReadOptions::default())
            .expect("open an iterator");
        let upper = key_bytes(lo + n);
        it.set_bounds(Some(key_bytes(lo)), Some(upper.clone()));
        let reverse = self.rng.gen_bool(0.3);
        let mut got: Vec<(u32, Vec<u8>)> = Vec::new();
        if reverse {
            it.seek_for_prev(&key_bytes(lo + n - 1));
        } else {
            it.seek(&key_bytes(lo));
        }
        let mut steps = 0;
        while it.valid() && steps <= SCAN_KEYS_MAX {
            match parse_key(it.key()) {
                Some(k) => got.push((k, it.value().to_vec())),
                None => {
                    sh.fail(format!("scan returned a foreign key {:?}", it.key()));
                    return;
                }
            }
            if reverse {
                it.prev();
            } else {
                it.next();
            }
            steps += 1;
        }
        if let Err(e) = it.status() {
            sh.error("scan", &e);
            return;
        }
        if reverse {
            got.reverse();
        }
        let mut gi = got.iter().peekable();
        for (g, k) in guards.iter().zip(lo..lo + n) {
            let allowed = Oracle::allowed_live(g);
            let here = gi.next_if(|(gk, _)| *gk == k).map(|(_, v)| v.as_slice());
            if let Err(e) = check_read(k, here, &allowed) {
                sh.fail(format!("scan [{lo}, {}) reverse={reverse}: {e}", lo + n));
                return;
            }
        }
        if let Some((k, _)) = gi.next() {
            sh.fail(format!(
                "scan [{lo}, {}) returned key {k} out of order",
                lo + n
            ));
            return;
        }
        sh.counters.scans.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot_op(&mut self) {
        let sh = self.sh;
        if self.snapshots.len() < SNAPSHOTS_MAX && self.rng.gen_bool(0.5) {
            let mut keys: Vec<u32> = (0..6).map(|_| self.key()).collect();
            keys.sort_unstable();
            keys.dedup();
            let guards = sh.oracle.lock(&keys);
            let snap = sh.db.snapshot().expect("take a snapshot");
            let expect = keys
                .iter()
                .zip(guards.iter())
                .map(|(&k, g)| (k, Oracle::allowed_live(g)))
                .collect();
            drop(guards);
            self.snapshots.push((snap, expect));
            return;
        }
        let Some(i) =
            (!self.snapshots.is_empty()).then(|| self.rng.gen_range(0..self.snapshots.len()))
        else {
            return;
        };
        let (snap, expect) = self.snapshots.swap_remove(i);
        let ro = ReadOptions {
            snapshot: Some(snap.sequence()),
            ..Default::default()
        };
        for (k, allowed) in &expect {
            match sh.db.get_opt(&key_bytes(*k), &ro) {
                Ok(v) => {
                    if let Err(e) = check_read(*k, v.as_deref(), allowed) {
                        sh.fail(format!("snapshot read at {}: {e}", snap.sequence()));
                        return;
                    }
                }
                Err(e) => {
                    sh.error("snapshot read", &e);
                    return;
                }
            }
        }
        sh.counters.snap_reads.fetch_add(1, Ordering::Relaxed);
    }
}

/// The cycle's options: [`drawn_options`] from the cycle's stream, then the draws added since
/// from a stream of their own, so that every seed's earlier history (options and operations)
/// stays what it was.
fn options(seed: u64, cycle: u64, rng: &mut ChaCha8Rng) -> Options {
    let mut o = drawn_options(rng);
    // The merge counters' operator (recorded by the first open; given every time here).
    o.merge_operator = attune_kv::builtin_merge_operator("add").ok();
    let mut later = stream(seed, cycle, LATER_OPTIONS_STREAM);
    // Intra-L0 compaction (on by default) off in a quarter of the cycles.
    o.l0_intra_compaction = later.gen_bool(0.75);
    o
}

/// Options drawn from the seed: small buffers so that flushes, compactions and log switches are
/// frequent and crashes land inside them.
fn drawn_options(rng: &mut ChaCha8Rng) -> Options {
    let compression = match rng.gen_range(0..3) {
        0 => Compression::None,
        1 => Compression::Lz4,
        _ => Compression::Zstd,
    };
    Options {
        write_buffer_size: rng.gen_range(16..256) << 10,
        target_file_size: rng.gen_range(32..256) << 10,
        max_bytes_for_level_base: rng.gen_range(128..1024) << 10,
        l0_compaction_trigger: rng.gen_range(2..5),
        block_size: [1024, 4096][rng.gen_range(0..2)],
        compression,
        wal_sync_interval_ms: [0, 20, 200][rng.gen_range(0..3)],
        bloom_bits_per_key: [0, 10][rng.gen_range(0..2)],
        // Value separation for a third to all values, small segments that rotate and get
        // collected while the crashes land.
        enable_blob_files: rng.gen_bool(0.8) && std::env::var("NOBLOB").is_err(),
        min_blob_size: [0, 128, 300][rng.gen_range(0..3)],
        blob_file_size: rng.gen_range(16..128) << 10,
        blob_gc_space_amp: if std::env::var("NOGC").is_ok() {
            0.0
        } else {
            [0.0, 1.3][rng.gen_range(0..2)]
        },
        blob_gc_garbage_ratio: 0.25,
        // Learned indexes on most runs, often with no wait, so the learner races with
        // compactions and crashes land while model files are written.
        learned_index: [
            attune_kv::LearnedIndex::Off,
            attune_kv::LearnedIndex::Analyzer,
            attune_kv::LearnedIndex::Always,
            attune_kv::LearnedIndex::Offline,
        ][rng.gen_range(0..4)],
        learned_wait_ms: [0, 50][rng.gen_range(0..2)],
        learned_delta: [2, 8][rng.gen_range(0..2)],
        learned_benefit: [
            attune_kv::LearnedBenefit::Remaining,
            attune_kv::LearnedBenefit::Lifetime,
        ][rng.gen_range(0..2)],
        // Level models (persisted as LEVEL-N.atlm and checked against the level at open).
        learned_level: rng.gen_bool(0.5),
        // The analyzer's control sample (off, every timed lookup of a learned table, the
        // default) sends lookups of learned tables down the baseline path; calibration only
        // changes which tables get learned.
        learned_control_sample: [0, 1, 16][rng.gen_range(0..3)],
        learned_calibrate: rng.gen_bool(0.5),
        learned_breakeven: rng.gen_bool(0.5),
        learned_io_cost: rng.gen_bool(0.5),
        // The block cache's replacement policy (the stress runs leave the cache budget off, so
        // S3-FIFO needs no static size).
        block_cache_policy: [
            attune_kv::BlockCachePolicy::Lru,
            attune_kv::BlockCachePolicy::S3Fifo,
        ][rng.gen_range(0..2)],
        ..Options::default()
    }
}

/// Reads every key and a full forward scan; returns the op of each key's value. A value that no
/// write produced, a scan that disagrees with the point reads or a read error is a violation.
fn read_back(db: &DB, keys: u32, report: &mut Report) -> Result<Vec<Option<u64>>, String> {
    let mut out = Vec::with_capacity(keys as usize);
    for k in 0..keys {
        let v = db
            .get(&key_bytes(k))
            .map_err(|e| format!("get of key {k} after recovery: {e}"))?;
        let op = match &v {
            None => None,
            Some(v) => Some(value_op(k, v).ok_or_else(|| {
                format!(
                    "key {k} holds a value no write produced: {}",
                    describe(Some(v))
                )
            })?),
        };
        out.push(op);
    }
    let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
    // The merge counters come after the keys (`read_counters` checks them).
    it.set_bounds(None, Some(COUNTERS_START.to_vec()));
    it.seek_to_first();
    let mut expect = (0..keys).filter(|&k| out[k as usize].is_some());
    let mut n = 0u64;
    while it.valid() {
        let k = parse_key(it.key()).ok_or_else(|| format!("scan: foreign key {:?}", it.key()))?;
        let want = expect.next();
        if want != Some(k) {
            return Err(format!(
                "full scan: found key {k}, point reads expect {want:?}"
            ));
        }
        if value_op(k, it.value()) != out[k as usize] {
            return Err(format!(
                "full scan: key {k} value differs from its point read"
            ));
        }
        n += 1;
        it.next();
    }
    it.status()
        .map_err(|e| format!("full scan after recovery: {e}"))?;
    if let Some(k) = expect.next() {
        return Err(format!(
            "full scan ended before key {k}, which a point read found"
        ));
    }
    report.keys_verified += u64::from(keys);
    report.scan_entries_verified += n;
    Ok(out)
}

/// Reads every merge counter with `get` and with a scan of the counters' range; they must agree
/// and hold 8-byte values.
fn read_counters(db: &DB, report: &mut Report) -> Result<Vec<u64>, String> {
    let mut out = Vec::with_capacity(COUNTERS as usize);
    for c in 0..COUNTERS {
        let v = db
            .get(&counter_key(c))
            .map_err(|e| format!("get of merge counter {c} after recovery: {e}"))?;
        out.push(counters::decode(v.as_deref())?);
    }
    let mut it = db.iter(&ReadOptions::default()).expect("open an iterator");
    it.set_bounds(Some(COUNTERS_START.to_vec()), None);
    // Backwards, so that the reverse merge path is checked too.
    it.seek_to_last();
    let mut scanned = vec![0u64; COUNTERS as usize];
    while it.valid() {
        let c = (0..COUNTERS)
            .find(|&c| counter_key(c) == it.key())
            .ok_or_else(|| format!("counter scan: foreign key {:?}", it.key()))?;
        scanned[c as usize] = counters::decode(Some(it.value()))?;
        it.prev();
    }
    it.status()
        .map_err(|e| format!("counter scan after recovery: {e}"))?;
    if scanned != out {
        return Err(format!(
            "merge counters: a reverse scan reads {scanned:?}, point reads {out:?}"
        ));
    }
    report.counters_verified += u64::from(COUNTERS);
    Ok(out)
}

pub(crate) fn add_counters(report: &mut Report, c: &Counters) {
    report.merges_acked += c.merges.load(Ordering::Relaxed);
    report.operations += c.ops.load(Ordering::Relaxed);
    report.writes_acked += c.acked.load(Ordering::Relaxed);
    report.writes_failed += c.failed.load(Ordering::Relaxed);
    report.reads_verified += c.reads.load(Ordering::Relaxed);
    report.scans_verified += c.scans.load(Ordering::Relaxed);
    report.snapshot_reads_verified += c.snap_reads.load(Ordering::Relaxed);
    report.flushes += c.flushes.load(Ordering::Relaxed);
    report.compactions += c.compactions.load(Ordering::Relaxed);
    report.gc_segments += c.gc_segments.load(Ordering::Relaxed);
    report.txn_commits += c.txn_commits.load(Ordering::Relaxed);
    report.txn_conflicts += c.txn_conflicts.load(Ordering::Relaxed);
    report.ingests += c.ingests.load(Ordering::Relaxed);
}

fn add_verify(report: &mut Report, s: &VerifyStats) {
    report.inflight_writes_recovered += s.inflight_recovered;
    report.unsynced_writes_lost += s.writes_lost_allowed;
}

/// The command that replays a run.
pub fn replay_command(cfg: &Config) -> String {
    let mut s = format!(
        "attune-stress --mode {} --seed {} --threads {} --duration {}s",
        match cfg.mode {
            Mode::Mem => "mem",
            Mode::Kill => "kill",
        },
        cfg.seed,
        cfg.threads,
        cfg.duration.as_secs().max(1)
    );
    if cfg.engine == Engine::Hash {
        s.push_str(" --engine hash");
    }
    if cfg.cycles_max > 0 {
        s.push_str(&format!(" --cycles {}", cfg.cycles_max));
    }
    if cfg.keys != KEYS_DEFAULT {
        s.push_str(&format!(" --keys {}", cfg.keys));
    }
    s
}

/// A run that found a violation: the message names the cycle and the replay command.
#[derive(Debug, thiserror::Error)]
#[error("violation in cycle {cycle} ({mode}, seed {seed}): {detail}\nreplay: {replay}")]
pub struct Violation {
    pub cycle: u64,
    pub mode: String,
    pub seed: u64,
    pub detail: String,
    pub replay: String,
    pub report: Box<Report>,
}

/// The options of a cycle that matter for reproducing a violation, for its report (a cycle's
/// options come from (seed, cycle), but reading them off the report is quicker).
fn cycle_shape(o: &Options) -> String {
    format!(
        "cycle options: write_buffer_size {}, blob files {} (min {} B, segment {} B, gc space \
         amp {}), learned {:?}, wal sync {} ms, compression {:?}, intra-L0 {}",
        o.write_buffer_size,
        o.enable_blob_files,
        o.min_blob_size,
        o.blob_file_size,
        o.blob_gc_space_amp,
        o.learned_index,
        o.wal_sync_interval_ms,
        o.compression,
        o.l0_intra_compaction,
    )
}

fn violation(cfg: &Config, cycle: u64, detail: String, mut report: Report) -> Violation {
    report.violations += 1;
    Violation {
        cycle,
        mode: format!("{:?}", cfg.mode).to_lowercase(),
        seed: cfg.seed,
        detail,
        replay: replay_command(cfg),
        report: Box::new(report),
    }
}

fn new_report(cfg: &Config) -> Report {
    Report {
        mode: format!("{:?}", cfg.mode).to_lowercase(),
        engine: format!("{:?}", cfg.engine).to_lowercase(),
        seed: cfg.seed,
        threads: cfg.threads,
        replay: replay_command(cfg),
        ..Default::default()
    }
}

fn done(cfg: &Config, start: Instant, cycles: u64) -> bool {
    (cfg.cycles_max > 0 && cycles >= cfg.cycles_max)
        || (cfg.duration > Duration::ZERO && start.elapsed() >= cfg.duration)
}

/// Runs the workers on `db` until `stop`; `until` decides when the main thread stops them
/// (returns after the workers are joined). Returns a worker-found violation.
#[allow(clippy::too_many_arguments)]
fn run_workers(
    db: &DB,
    env: Arc<dyn Env>,
    dir: &Path,
    oracle: &Oracle,
    sink: &dyn Sink,
    next_op: &AtomicU64,
    counters: &Counters,
    errors_expected: &AtomicBool,
    cfg: &Config,
    cycle: u64,
    until: &mut dyn FnMut(&Counters, &AtomicBool),
) -> Option<String> {
    let stop = AtomicBool::new(false);
    let violation = Mutex::new(None);
    let sh = Shared {
        db,
        oracle,
        sink,
        next_op,
        counters,
        stop: &stop,
        errors_expected,
        violation: &violation,
        keys: cfg.keys,
        env,
        ingest_dir: dir.join("ingest-tmp"),
    };
    std::thread::scope(|s| {
        for t in 0..cfg.threads {
            let sh = &sh;
            s.spawn(move || {
                let mut w = Worker {
                    sh,
                    rng: stream(cfg.seed, cycle, t as u64 + 1),
                    snapshots: Vec::new(),
                };
                w.run();
            });
        }
        until(counters, &stop);
        stop.store(true, Ordering::SeqCst);
    });
    violation.into_inner()
}

/// How a `mem` cycle ends.
#[derive(Clone, Copy, Debug)]
enum CycleEnd {
    /// Power off, then lose everything not durable.
    Crash,
    /// Power off, then a torn crash shaped by the seed.
    TornCrash,
    /// Close the database cleanly: every acknowledged write must survive.
    Close,
}

/// Runs `mem` mode: crash/recover cycles on a [`MemEnv`].
pub fn run_mem(cfg: &Config) -> Result<Report, Box<Violation>> {
    let start = Instant::now();
    let mut report = new_report(cfg);
    if cfg.engine != Engine::Db {
        let detail = "mem mode runs attune-kv's DB only; the hash table's simulated crashes \
                      are attune-plush's crash tests (use --mode kill)";
        return Err(Box::new(violation(cfg, 0, detail.into(), report)));
    }
    let env = MemEnv::new();
    let dir = Path::new("/stress/db");
    let oracle = Oracle::new(cfg.keys);
    let next_op = AtomicU64::new(1);
    let mut cycle = 0u64;
    while !done(cfg, start, cycle) {
        let mut rng = stream(cfg.seed, cycle, 0);
        let opts = options(cfg.seed, cycle, &mut rng);
        let shape = cycle_shape(&opts);
        // The cycle's fault plan as the violation reports it ("false": none).
        let faults_drawn = std::cell::RefCell::new(String::from("false"));
        let fail = |detail: String, report: &Report| {
            let detail = format!("{detail}\n{shape}, faults {}", faults_drawn.borrow());
            Box::new(violation(cfg, cycle, detail, report.clone()))
        };
        let db = DB::open_with_env(Arc::new(env.clone()) as Arc<dyn Env>, dir, opts.clone())
            .map_err(|e| fail(format!("open after recovery: {e}"), &report))?;
        let faults = rng.gen_bool(0.25);
        let errors_expected = AtomicBool::new(faults);
        if faults {
            let plan = fault_plan(&mut rng);
            *faults_drawn.borrow_mut() = format!(
                "{:?} (partial appends {})",
                plan.rules, plan.partial_appends
            );
            env.set_fault_plan(plan);
            report.fault_cycles += 1;
        }
        let crash_after_ops = rng.gen_range(50..4000u64);
        let deadline = Instant::now() + Duration::from_secs(5);
        let end = match rng.gen_range(0..10) {
            0 => CycleEnd::Close,
            1..=4 => CycleEnd::Crash,
            _ => CycleEnd::TornCrash,
        };
        let counters = Counters::default();
        let powered = &env;
        let expected = &errors_expected;
        // Half the cycles run a secondary instance beside the workers (its own stream, so the
        // rest of a seed's draws stay as they were).
        let with_secondary = stream(cfg.seed, cycle, SECONDARY_STREAM).gen_bool(0.5);
        let follow_stop = AtomicBool::new(false);
        let (found, followed) = std::thread::scope(|s| {
            let reader = with_secondary.then(|| {
                s.spawn(|| {
                    crate::secondary::follow(
                        &env,
                        dir,
                        &opts,
                        &next_op,
                        &errors_expected,
                        &follow_stop,
                    )
                })
            });
            let found = run_workers(
                &db,
                Arc::new(env.clone()),
                dir,
                &oracle,
                &NoSink,
                &next_op,
                &counters,
                &errors_expected,
                cfg,
                cycle,
                &mut |c: &Counters, stop: &AtomicBool| {
                    while !stop.load(Ordering::SeqCst)
                        && c.ops.load(Ordering::Relaxed) < crash_after_ops
                        && Instant::now() < deadline
                    {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    if !matches!(end, CycleEnd::Close) {
                        // From here on, errors are the crash: the disk is frozen mid-operation.
                        expected.store(true, Ordering::SeqCst);
                        powered.power_off();
                    }
                },
            );
            follow_stop.store(true, Ordering::SeqCst);
            let followed = reader.map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the secondary reader panicked".into()))
            });
            (found, followed)
        });
        add_counters(&mut report, &counters);
        match followed {
            Some(Ok(f)) => {
                report.secondary_catch_ups += f.catch_ups;
                report.secondary_keys_checked += f.keys_checked;
            }
            Some(Err(v)) => return Err(fail(v, &report)),
            None => {}
        }
        report.faults_injected = env.faults_fired();
        if let Some(v) = found {
            return Err(fail(v, &report));
        }
        let crash: Option<CrashReport> = match end {
            CycleEnd::Close => {
                env.clear_faults();
                drop(db); // a clean close (its errors surface as failed writes already)
                report.clean_closes += 1;
                None
            }
            CycleEnd::Crash => {
                drop(db);
                env.clear_faults();
                report.machine_crashes += 1;
                Some(env.crash())
            }
            CycleEnd::TornCrash => {
                drop(db);
                env.clear_faults();
                report.machine_crashes += 1;
                report.torn_crashes += 1;
                Some(env.crash_torn(mix(cfg.seed ^ cycle)))
            }
        };
        if let Some(c) = &crash {
            report.torn_files += c.torn_files as u64;
            report.garbage_sectors += c.garbage_sectors as u64;
            report.unsynced_bytes_dropped += c.bytes_dropped;
            report.dir_ops_reverted += c.dir_ops_reverted as u64;
        }
        let db = DB::open_with_env(Arc::new(env.clone()) as Arc<dyn Env>, dir, opts)
            .map_err(|e| fail(format!("open after {end:?}: {e}"), &report))?;
        let read = read_back(&db, cfg.keys, &mut report).map_err(|e| fail(e, &report))?;
        let mut vs = VerifyStats::default();
        // A clean close after injected faults may not have synced: judge it as a crash then.
        let all_durable = matches!(end, CycleEnd::Close) && !faults;
        oracle
            .verify(&read, all_durable, &mut vs)
            .map_err(|e| fail(format!("after {end:?}: {e}"), &report))?;
        let ctr = read_counters(&db, &mut report).map_err(|e| fail(e, &report))?;
        oracle
            .counters
            .verify(&ctr, all_durable)
            .map_err(|e| fail(format!("after {end:?}: {e}"), &report))?;
        oracle.counters.rebase(&ctr);
        add_verify(&mut report, &vs);
        oracle.rebase(&read);
        drop(db);
        cycle += 1;
        report.cycles = cycle;
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

/// A random fault plan: one kind of operation fails once, from some point, or at random.
fn fault_plan(rng: &mut ChaCha8Rng) -> FaultPlan {
    let ops = [
        (FaultOp::Append, FaultError::NoSpace),
        (FaultOp::Sync, FaultError::Io),
        (FaultOp::SyncDir, FaultError::Io),
        (FaultOp::Create, FaultError::NoSpace),
        (FaultOp::Remove, FaultError::Io),
        (FaultOp::Read, FaultError::Io),
    ];
    let (op, error) = ops[rng.gen_range(0..ops.len())];
    let trigger = match rng.gen_range(0..3) {
        0 => Trigger::Once(rng.gen_range(0..200)),
        1 => Trigger::From(rng.gen_range(0..400)),
        _ => Trigger::Random {
            per_million: rng.gen_range(100..5000),
        },
    };
    let mut p = FaultPlan::new(rng.gen()).with(op, error, trigger);
    p.partial_appends = rng.gen_bool(0.5);
    p
}

/// Runs the workload of a `kill`-mode child in `dir` on the real file system, streaming events
/// on stdout, until killed (or `cfg.duration`, a safety limit).
pub fn run_child(cfg: &Config, dir: &Path, cycle: u64, op_base: u64) -> Result<(), String> {
    if cfg.engine == Engine::Hash {
        return crate::hash::run_child(cfg, dir, cycle, op_base);
    }
    let mut rng = stream(cfg.seed, cycle, 0);
    let opts = options(cfg.seed, cycle, &mut rng);
    let db = DB::open_with_env(Arc::new(PosixEnv::new()) as Arc<dyn Env>, dir, opts)
        .map_err(|e| format!("child open: {e}"))?;
    // The child's own oracle starts from what is in the database now (the parent verified it).
    let oracle = Oracle::new(cfg.keys);
    let mut dummy = Report::default();
    let read = read_back(&db, cfg.keys, &mut dummy)?;
    oracle.rebase(&read);
    oracle.counters.rebase(&read_counters(&db, &mut dummy)?);
    println!("R");
    let sink = PipeSink::stdout();
    let next_op = AtomicU64::new(op_base);
    let counters = Counters::default();
    let errors_expected = AtomicBool::new(false);
    let limit = cfg.duration;
    let found = run_workers(
        &db,
        Arc::new(PosixEnv::new()),
        dir,
        &oracle,
        &sink,
        &next_op,
        &counters,
        &errors_expected,
        cfg,
        cycle,
        &mut |_: &Counters, stop: &AtomicBool| {
            let t = Instant::now();
            while !stop.load(Ordering::SeqCst) && t.elapsed() < limit {
                std::thread::sleep(Duration::from_millis(1));
            }
        },
    );
    match found {
        Some(v) => Err(v),
        None => Ok(()),
    }
}

/// Applies one line of a child's stream to the parent's oracle. Pending writes keep their key
/// locks between issue and finish only in the child; the parent applies lines in order.
fn apply_line(
    oracle: &Oracle,
    line: &str,
    open: &mut std::collections::HashMap<u64, (Vec<u32>, bool)>,
) -> Result<(), String> {
    let mut parts = line.split_ascii_whitespace();
    let bad = || format!("malformed child line {line:?}");
    match parts.next() {
        Some("I") => {
            let op: u64 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
            // "2": an ingest, synced.
            let sync = matches!(parts.next(), Some("1" | "2"));
            let mut items = Vec::new();
            for p in parts {
                let (k, kind) = p.split_at(p.len().saturating_sub(1));
                let k: u32 = k.parse().map_err(|_| bad())?;
                if k >= oracle.key_count() {
                    return Err(bad());
                }
                items.push((k, kind == "P"));
            }
            let keys: Vec<u32> = items.iter().map(|&(k, _)| k).collect();
            let mut g = oracle.lock(&keys);
            oracle.issue(&mut g, op, &items);
            open.insert(op, (keys, sync));
        }
        Some(tag @ ("A" | "F")) => {
            let op: u64 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
            let (keys, sync) = open.remove(&op).ok_or_else(bad)?;
            let mut g = oracle.lock(&keys);
            oracle.finish(&mut g, op, tag == "A", sync);
        }
        Some(tag @ ("M" | "m")) => {
            let mut num = || {
                parts
                    .next()
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or_else(bad)
            };
            let c = num()?;
            let n = num()?;
            if c >= u64::from(COUNTERS) {
                return Err(bad());
            }
            if tag == "M" {
                oracle.counters.issue(c as u32, n);
            } else {
                let ok = num()? == 1;
                let sync = num()? == 1;
                oracle.counters.finish(c as u32, n, ok, sync);
            }
        }
        Some(tag @ ("K" | "C")) => {
            let id: u64 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
            if tag == "K" {
                oracle.checkpoint_begin(id);
            } else {
                oracle
                    .checkpoint_done(id)
                    .map_err(|e| format!("{e}: line {line:?}"))?;
            }
        }
        Some("R" | "N") | None => {}
        Some(_) => return Err(bad()),
    }
    Ok(())
}

/// Adds a child's `N <counter> <n>` line to the parent's report.
fn add_counted(report: &mut Report, line: &str) -> Result<(), String> {
    let bad = || format!("malformed child line {line:?}");
    let mut parts = line.split_ascii_whitespace().skip(1);
    let what = parts.next().ok_or_else(bad)?;
    let n: u64 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    let field = match what {
        "flushes" => &mut report.flushes,
        "compactions" => &mut report.compactions,
        "gc_segments" => &mut report.gc_segments,
        "txn_commits" => &mut report.txn_commits,
        "txn_conflicts" => &mut report.txn_conflicts,
        _ => return Err(bad()),
    };
    *field += n;
    Ok(())
}

/// Runs `kill` mode: children on the real file system, killed with SIGKILL.
pub fn run_kill(cfg: &Config) -> Result<Report, Box<Violation>> {
    let start = Instant::now();
    let mut report = new_report(cfg);
    let tmp;
    let dir = match &cfg.dir {
        Some(d) => d.clone(),
        None => {
            tmp = TempDir::new().map_err(|e| Box::new(violation(cfg, 0, e, report.clone())))?;
            tmp.path.join("db")
        }
    };
    let exe = cfg
        .exe
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("attune-stress"));
    let oracle = Oracle::new(cfg.keys);
    let mut op_base = 1u64;
    let mut cycle = 0u64;
    while !done(cfg, start, cycle) {
        let fail = |detail: String, report: &Report| {
            Box::new(violation(cfg, cycle, detail, report.clone()))
        };
        let mut rng = stream(cfg.seed, cycle, 1 << 32);
        let child = spawn_child(&exe, cfg, &dir, cycle, op_base)
            .map_err(|e| fail(format!("spawn child: {e}"), &report))?;
        let (lines, max_op, ready, child_error) =
            drive_child(child, &mut rng).map_err(|e| fail(e, &report))?;
        if let Some(e) = child_error {
            return Err(fail(format!("child reported: {e}"), &report));
        }
        let mut open = std::collections::HashMap::new();
        for l in &lines {
            if l.starts_with("I ") && l.split(' ').nth(2) == Some("2") {
                report.ingests += 1;
            }
            apply_line(&oracle, l, &mut open).map_err(|e| fail(e, &report))?;
            if l.starts_with("N ") {
                add_counted(&mut report, l).map_err(|e| fail(e, &report))?;
            }
        }
        report.operations += lines.iter().filter(|l| l.starts_with('I')).count() as u64;
        report.writes_acked += lines.iter().filter(|l| l.starts_with('A')).count() as u64;
        report.merges_acked += lines
            .iter()
            .filter(|l| l.starts_with("m ") && l.split(' ').nth(3) == Some("1"))
            .count() as u64;
        report.sigkills += 1;
        report.sigkills_during_open += u64::from(!ready);
        op_base = max_op.max(op_base) + 1;
        let read = match cfg.engine {
            Engine::Db => DB::open_with_env(
                Arc::new(PosixEnv::new()) as Arc<dyn Env>,
                &dir,
                Options::default(),
            )
            .map_err(|e| format!("open after SIGKILL: {e}"))
            .and_then(|db| read_back(&db, cfg.keys, &mut report)),
            Engine::Hash => crate::hash::reopen_and_read(&dir, cfg.keys, &mut report)
                .map_err(|e| format!("{e}\n{}", crate::hash::cycle_shape(cfg, cycle))),
        }
        .map_err(|e| fail(e, &report))?;
        if cfg.engine == Engine::Db {
            let ctr = DB::open_with_env(
                Arc::new(PosixEnv::new()) as Arc<dyn Env>,
                &dir,
                Options::default(),
            )
            .map_err(|e| format!("open after SIGKILL: {e}"))
            .and_then(|db| read_counters(&db, &mut report))
            .and_then(|ctr| {
                oracle
                    .counters
                    .verify(&ctr, true)
                    .map(|()| ctr)
                    .map_err(|e| format!("after SIGKILL: {e}"))
            })
            .map_err(|e| fail(e, &report))?;
            oracle.counters.rebase(&ctr);
        }
        // Without the recovery log (a HashDB cycle may draw it off) a SIGKILL loses what no
        // checkpoint migrated; otherwise nothing acknowledged.
        let lost = match cfg.engine {
            Engine::Hash if !crate::hash::cycle_options(cfg, cycle).recovery_log => {
                report.unlogged_cycles += 1;
                Lost::Unmigrated
            }
            _ => Lost::Nothing,
        };
        let mut vs = VerifyStats::default();
        oracle.verify_after(&read, lost, &mut vs).map_err(|e| {
            let shape = match cfg.engine {
                Engine::Db => String::new(),
                Engine::Hash => format!("\n{}", crate::hash::cycle_shape(cfg, cycle)),
            };
            fail(format!("after SIGKILL: {e}{shape}"), &report)
        })?;
        add_verify(&mut report, &vs);
        oracle.rebase(&read);
        cycle += 1;
        report.cycles = cycle;
    }
    report.seconds = start.elapsed().as_secs_f64();
    Ok(report)
}

fn spawn_child(
    exe: &Path,
    cfg: &Config,
    dir: &Path,
    cycle: u64,
    op_base: u64,
) -> std::io::Result<Child> {
    Command::new(exe)
        .arg("--child")
        .args(["--mode", "kill"])
        .arg("--dir")
        .arg(dir)
        .args(["--seed", &cfg.seed.to_string()])
        .args(["--threads", &cfg.threads.to_string()])
        .args([
            "--engine",
            match cfg.engine {
                Engine::Db => "db",
                Engine::Hash => "hash",
            },
        ])
        .args(["--keys", &cfg.keys.to_string()])
        .args(["--cycle", &cycle.to_string()])
        .args(["--op-base", &op_base.to_string()])
        .args(["--duration", "30s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// Reads the child's stream until a seeded moment after it is ready, kills it with SIGKILL and
/// drains the pipe. Returns (lines, largest op seen, whether it got ready, its error if it
/// exited by itself).
fn drive_child(
    mut child: Child,
    rng: &mut ChaCha8Rng,
) -> Result<(Vec<String>, u64, bool, Option<String>), String> {
    let stdout = child.stdout.take().ok_or("child has no stdout")?;
    let stderr = child.stderr.take().ok_or("child has no stderr")?;
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let ready = Arc::new(AtomicBool::new(false));
    let reader = {
        let lines = lines.clone();
        let ready = ready.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(b'\n', &mut buf) {
                    // A line cut by the kill has no newline: its write was never issued.
                    Ok(0) | Err(_) => break,
                    Ok(_) if buf.last() != Some(&b'\n') => break,
                    Ok(_) => {}
                }
                let l = String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned();
                if l == "R" {
                    ready.store(true, Ordering::SeqCst);
                }
                lines.lock().push(l);
            }
        })
    };
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
        s
    });
    // Kill during recovery (before "R") sometimes, usually during the workload.
    let during_open = rng.gen_bool(0.1);
    let delay = Duration::from_millis(if during_open {
        rng.gen_range(0..30)
    } else {
        rng.gen_range(20..600)
    });
    let t = Instant::now();
    let mut exited = None;
    while t.elapsed() < Duration::from_secs(20) {
        if let Ok(Some(st)) = child.try_wait() {
            exited = Some(st);
            break;
        }
        let go = if during_open {
            t.elapsed() >= delay
        } else {
            ready.load(Ordering::SeqCst) && t.elapsed() >= delay
        };
        if go {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    if exited.is_none() {
        // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGKILL);
        }
        let _ = child.wait();
    }
    let _ = reader.join();
    let err = err_reader.join().unwrap_or_default();
    let child_error = exited.map(|st| format!("child exited by itself ({st}): {err}"));
    let lines = std::mem::take(&mut *lines.lock());
    let max_op = lines
        .iter()
        .filter(|l| l.starts_with('I'))
        .filter_map(|l| l.split_ascii_whitespace().nth(1)?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    let r = ready.load(Ordering::SeqCst);
    Ok((lines, max_op, r, child_error))
}

/// A temporary directory removed on drop (kill mode's default database location).
struct TempDir {
    path: PathBuf,
}

impl TempDir {
    fn new() -> Result<TempDir, String> {
        let base = std::env::temp_dir();
        for i in 0..1000u32 {
            let p = base.join(format!("attune-stress-{}-{i}", std::process::id()));
            if std::fs::create_dir(&p).is_ok() {
                return Ok(TempDir { path: p });
            }
        }
        Err("cannot create a temporary directory".into())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_counter_lines_add_up_in_the_parents_report() {
        let oracle = Oracle::new(16);
        let mut open = std::collections::HashMap::new();
        let mut report = Report::default();
        for l in [
            "N flushes 1",
            "N gc_segments 3",
            "N flushes 1",
            "N compactions 2",
        ] {
            apply_line(&oracle, l, &mut open).unwrap();
            add_counted(&mut report, l).unwrap();
        }
        assert_eq!(report.flushes, 2);
        assert_eq!(report.gc_segments, 3);
        assert_eq!(report.compactions, 2);
        assert!(add_counted(&mut report, "N nonsense 1").is_err());
        assert!(add_counted(&mut report, "N flushes x").is_err());
    }

    /// A checkpoint's `K`/`C` lines make the writes acknowledged before its `K` durable for
    /// an unlogged reopen; a `C` without its `K` is a malformed stream.
    #[test]
    fn a_childs_returned_checkpoint_makes_earlier_writes_durable_without_the_log() {
        let oracle = Oracle::new(2);
        let mut open = std::collections::HashMap::new();
        for l in ["I 1 0 0P", "A 1", "K 2", "I 3 0 1P", "A 3", "C 2"] {
            apply_line(&oracle, l, &mut open).unwrap();
        }
        let mut vs = VerifyStats::default();
        assert!(oracle
            .verify_after(&[Some(1), None], Lost::Unmigrated, &mut vs)
            .is_ok());
        assert!(oracle
            .verify_after(&[None, Some(3)], Lost::Unmigrated, &mut vs)
            .is_err());
        assert!(apply_line(&oracle, "C 9", &mut open).is_err());
    }
}
