//! `attune-bench hash`: VIP hashing vs plain chained hashing vs `std::collections::HashMap`
//! (hashbrown) on identical, seeded streams, one process run, one JSON line per table.
//!
//! Modes (see `--help` and docs/vip-hashing.md):
//! * `roofline` — fetch-only zipf stream; `vip` is the table built in increasing popularity
//!   order (the VIP configuration known in advance, no learning), `chained` the same keys in
//!   random order.
//! * `adaptive` — fetch/insert/delete mix with optional popularity churn; `vip` learns on the
//!   fly (adaptive schedule), `chained` is the same table with learning off.
//! * `join` — PK-FK hash join, `|S| = ratio · |R|`, zipf-distributed foreign keys; `vip` learns
//!   during the first `min(|R|, |S|/61)` probes.
//! * `q9` — TPC-H query 9 over tables in `--data DIR` (written by `attune bench hash-q9`), run
//!   by DuckDB's plan with every hash join on the table under test (module `q9`).
//!
//! Streams come from attune-workload's Wiscer generator and are materialised before timing;
//! only table operations are timed. Thread-safety: single-threaded.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::hint::black_box;
use std::time::Instant;

use serde::Serialize;

use crate::output::{Fail, Fields, Sink};

mod q9;

use attune_hash::{JoinMode, JoinTable, Schedule, VipConfig, VipMap};
use attune_workload::wiscer::{KeyOrder, KeyPattern, WiscerConfig};
use attune_workload::Op as WOp;

/// `std::collections::HashMap` (hashbrown inside) with the same fmix64 hasher as our tables.
type StdMap<V> = HashMap<u64, V, BuildHasherDefault<attune_hash::Fmix64Hasher>>;

const USAGE: &str = "\
usage: attune-bench hash [options]
  --tables LIST          vip,chained,hashbrown (default: all three); counter (roofline,
                         adaptive) is the chained table with a 1-byte request counter per
                         entry bumped on every fetch, kept in the node's padding (24-byte
                         nodes); counter-wide the same counter widening the node to 32 bytes
                         (the source's Fig. 3.6, 16 -> 17-byte entries); vip-learn-always
                         (adaptive mode) learns on every fetch, to measure learning's cost;
                         vip-oracle (adaptive mode) is the roofline's VIP build, never learning;
                         vip-no-gather (adaptive mode) skips gathering hot entries after learning
  --mode MODE            roofline | adaptive | join | q9 (default roofline)
  --data DIR             q9: the column files of one TPC-H data set (attune bench hash-q9
                         writes them); --zipf and --seed then only label the rows
  --zipf LIST            zipf factors, comma separated (default 1.0)
  --keys N               keys in the table / |R| of the join (default 1000000)
  --operations M         timed operations / probes per repeat; join: ignored (default 10000000)
  --load-factor LIST     roofline/adaptive: fix buckets = 2^floor(log2 N) and load
                         round(F*buckets) keys (comma list sweeps F); default: grow naturally
  --churn PRCT:FREQ      adaptive: every FREQ fetches, the top keys taking PRCT% of requests
                         swap ranks with random less popular keys
  --mix F:I:D            adaptive: fetch/insert/delete percentages (default 100:0:0)
  --ratio LIST           join: |S|/|R| ratios, comma separated (default 16)
  --seed LIST            stream seeds, comma separated; each seed is its own setting
                         (new keys, ranks and stream) (default 1)
  --repeat R             rounds (each rebuilds every table); each table's median run is
                         reported (default 1). Within a round all tables are alive and are fed
                         the stream in lockstep chunks of 2^20 operations, timed per table
  --learn-factor F       adaptive VIP: N_L = F * buckets (default: the library's)
  --out PATH             append one JSON row per table and setting to PATH
  --json                 print the rows as JSON lines on stdout (no table)
";

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("{0}\n\n{USAGE}")]
    Usage(String),
    #[error("table error: {0}")]
    Table(#[from] attune_hash::HashError),
    #[error("workload error: {0}")]
    Workload(#[from] attune_workload::WorkloadError),
    #[error("{0}")]
    Output(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Roofline,
    Adaptive,
    Join,
    Q9,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum TableKind {
    Vip,
    /// Diagnostic: learn+adapt on every fetch (measures the cost of the learn phase).
    LearnAlways,
    /// Diagnostic: adaptive VIP without gathering hot entries after learning.
    NoGather,
    /// Diagnostic: the roofline's VIP configuration (built in increasing popularity order,
    /// never learns) driven by the adaptive stream, to compare learning with its ideal.
    Oracle,
    Chained,
    /// The chained table with a 1-byte request counter per entry, bumped on every fetch, in
    /// the node's padding (nodes stay 24 bytes): the cost of counting in the loop.
    Counter,
    /// The same counter in a value that widens the node to 32 bytes: counting plus memory.
    CounterWide,
    Hashbrown,
}

impl TableKind {
    fn name(self) -> &'static str {
        match self {
            TableKind::Vip => "vip",
            TableKind::LearnAlways => "vip-learn-always",
            TableKind::Oracle => "vip-oracle",
            TableKind::NoGather => "vip-no-gather",
            TableKind::Chained => "chained",
            TableKind::Counter => "counter",
            TableKind::CounterWide => "counter-wide",
            TableKind::Hashbrown => "hashbrown",
        }
    }
}

#[derive(Debug, Clone)]
struct Args {
    tables: Vec<TableKind>,
    mode: Mode,
    zipfs: Vec<f64>,
    keys: usize,
    operations: usize,
    load_factors: Vec<Option<f64>>,
    churn: Option<(f64, u64)>,
    mix: (f64, f64, f64),
    ratios: Vec<usize>,
    seeds: Vec<u64>,
    repeat: usize,
    /// `N_L / buckets` of the adaptive VIP table (`None`: the library default).
    learn_factor: Option<f64>,
    /// q9: the directory of column files.
    data: Option<String>,
}

fn usage(msg: impl Into<String>) -> BenchError {
    BenchError::Usage(msg.into())
}

fn parse_num<T: std::str::FromStr>(flag: &str, s: &str) -> Result<T, BenchError> {
    s.trim()
        .parse()
        .map_err(|_| usage(format!("{flag}: cannot parse {s:?}")))
}

fn parse_list<T: std::str::FromStr>(flag: &str, s: &str) -> Result<Vec<T>, BenchError> {
    s.split(',').map(|p| parse_num(flag, p)).collect()
}

fn parse_args(argv: &[String]) -> Result<Args, BenchError> {
    let mut a = Args {
        tables: vec![TableKind::Vip, TableKind::Chained, TableKind::Hashbrown],
        mode: Mode::Roofline,
        zipfs: vec![1.0],
        keys: 1_000_000,
        operations: 10_000_000,
        load_factors: vec![None],
        churn: None,
        mix: (100.0, 0.0, 0.0),
        ratios: vec![16],
        seeds: vec![1],
        repeat: 1,
        learn_factor: None,
        data: None,
    };
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(usage("help requested"));
        }
        let val = it
            .next()
            .ok_or_else(|| usage(format!("{flag} needs a value")))?;
        match flag.as_str() {
            "--tables" => {
                a.tables = val
                    .split(',')
                    .map(|t| match t.trim() {
                        "vip" => Ok(TableKind::Vip),
                        "vip-learn-always" => Ok(TableKind::LearnAlways),
                        "vip-oracle" => Ok(TableKind::Oracle),
                        "vip-no-gather" => Ok(TableKind::NoGather),
                        "chained" => Ok(TableKind::Chained),
                        "counter" => Ok(TableKind::Counter),
                        "counter-wide" => Ok(TableKind::CounterWide),
                        "hashbrown" => Ok(TableKind::Hashbrown),
                        other => Err(usage(format!("--tables: unknown table {other:?}"))),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--mode" => {
                a.mode = match val.as_str() {
                    "roofline" => Mode::Roofline,
                    "adaptive" => Mode::Adaptive,
                    "join" => Mode::Join,
                    "q9" => Mode::Q9,
                    other => return Err(usage(format!("--mode: unknown mode {other:?}"))),
                }
            }
            "--zipf" => a.zipfs = parse_list("--zipf", val)?,
            "--keys" => a.keys = parse_num("--keys", val)?,
            "--operations" => a.operations = parse_num("--operations", val)?,
            "--load-factor" => {
                a.load_factors = parse_list::<f64>("--load-factor", val)?
                    .into_iter()
                    .map(Some)
                    .collect()
            }
            "--churn" => {
                let (p, f) = val
                    .split_once(':')
                    .ok_or_else(|| usage("--churn wants PRCT:FREQ, e.g. 25:1000000"))?;
                a.churn = Some((parse_num("--churn", p)?, parse_num("--churn", f)?));
            }
            "--mix" => {
                let parts: Vec<f64> = val
                    .split(':')
                    .map(|p| parse_num("--mix", p))
                    .collect::<Result<_, _>>()?;
                match parts[..] {
                    [f, i, d] => a.mix = (f, i, d),
                    _ => return Err(usage("--mix wants F:I:D, e.g. 98:1:1")),
                }
            }
            "--ratio" => a.ratios = parse_list("--ratio", val)?,
            "--seed" => a.seeds = parse_list("--seed", val)?,
            "--repeat" => a.repeat = parse_num("--repeat", val)?,
            "--learn-factor" => a.learn_factor = Some(parse_num("--learn-factor", val)?),
            "--data" => a.data = Some(val.clone()),
            other => return Err(usage(format!("unknown option {other:?}"))),
        }
    }
    validate(&a)?;
    Ok(a)
}

fn validate(a: &Args) -> Result<(), BenchError> {
    if a.seeds.is_empty() || a.seeds.len() > 100 {
        return Err(usage("--seed takes 1 to 100 seeds"));
    }
    if a.tables.is_empty() {
        return Err(usage("--tables is empty"));
    }
    if a.mode != Mode::Adaptive && a.tables.contains(&TableKind::LearnAlways) {
        return Err(usage("vip-learn-always is a table of --mode adaptive only"));
    }
    for kind in [TableKind::Oracle, TableKind::NoGather] {
        if a.mode != Mode::Adaptive && a.tables.contains(&kind) {
            return Err(usage(format!(
                "{} is a table of --mode adaptive only",
                kind.name()
            )));
        }
    }
    if a.mode == Mode::Q9 {
        if a.data.is_none() {
            return Err(usage("--mode q9 needs --data DIR"));
        }
        if let Some(k) = a.tables.iter().find(|k| {
            !matches!(
                k,
                TableKind::Vip | TableKind::Chained | TableKind::Hashbrown
            )
        }) {
            return Err(usage(format!(
                "{} is not a table of --mode q9 (vip, chained, hashbrown)",
                k.name()
            )));
        }
    }
    for kind in [TableKind::Counter, TableKind::CounterWide] {
        if a.mode == Mode::Join && a.tables.contains(&kind) {
            return Err(usage(format!(
                "{} is a table of --mode roofline or adaptive",
                kind.name()
            )));
        }
    }
    if !(16..=200_000_000).contains(&a.keys) {
        return Err(usage("--keys must be in [16, 2e8]"));
    }
    if a.operations == 0 || a.operations > 2_000_000_000 {
        return Err(usage("--operations must be in [1, 2e9]"));
    }
    if a.zipfs
        .iter()
        .any(|z| !(z.is_finite() && (0.0..=10.0).contains(z)))
    {
        return Err(usage("--zipf factors must be in [0, 10]"));
    }
    if a.load_factors
        .iter()
        .flatten()
        .any(|f| !(0.05..=1.5).contains(f))
    {
        return Err(usage("--load-factor must be in [0.05, 1.5]"));
    }
    if let Some((p, f)) = a.churn {
        if !(p > 0.0 && p <= 100.0) || f == 0 {
            return Err(usage("--churn: PRCT in (0, 100], FREQ >= 1"));
        }
    }
    let (f, i, d) = a.mix;
    if f < 0.0 || i < 0.0 || d < 0.0 || (f + i + d - 100.0).abs() > 1e-6 {
        return Err(usage("--mix percentages must be >= 0 and sum to 100"));
    }
    if a.ratios.iter().any(|r| !(1..=1024).contains(r)) {
        return Err(usage("--ratio values must be in [1, 1024]"));
    }
    if a.mode == Mode::Join
        && a.keys.saturating_mul(*a.ratios.iter().max().unwrap_or(&1)) > 1e9 as usize
    {
        return Err(usage("join: keys * ratio must be at most 1e9"));
    }
    if !(1..=99).contains(&a.repeat) {
        return Err(usage("--repeat must be in [1, 99]"));
    }
    Ok(())
}

// ----- streams (attune-workload's Wiscer) --------------------------------------------------

/// A table operation of the timed stream.
#[derive(Clone, Copy)]
enum Op {
    Get(u64),
    Insert(u64),
    Remove(u64),
}

/// The keys of a run: `keys[i]` is inserted i-th; `by_rank[r]` has popularity rank r.
struct KeySpace {
    keys: Vec<u64>,
    by_rank: Vec<u64>,
}

/// Wiscer (seed 004 §3.3, implemented in attune-workload) with this run's options: random
/// 64-bit keys (or sequential for the join's primary keys) in a random popularity order.
fn wiscer(
    args: &Args,
    seed: u64,
    zipf: f64,
    n: usize,
    ops: usize,
    sequential_keys: bool,
) -> Result<(KeySpace, Vec<Op>), BenchError> {
    let (f, i, d) = if args.mode == Mode::Adaptive {
        args.mix
    } else {
        (100.0, 0.0, 0.0)
    };
    let (freq, prct) = match (args.mode, args.churn) {
        (Mode::Adaptive, Some((p, f))) => (f, p),
        _ => (0, 0.0),
    };
    let cfg = WiscerConfig {
        zipf,
        initial_size: n as u64,
        operation_count: ops as u64,
        fetch_proportion: f / 100.0,
        insert_proportion: i / 100.0,
        delete_proportion: d / 100.0,
        dist_shift_freq: freq,
        dist_shift_prct: prct,
        key_pattern: if sequential_keys {
            KeyPattern::Sequential
        } else {
            KeyPattern::Random
        },
        key_order: KeyOrder::Random,
        seed,
    };
    let keys: Vec<u64> = cfg.load()?.map(|op| op.key()).collect();
    let run = cfg.run()?;
    let by_rank = run.popularity_order().to_vec();
    let mut stream = Vec::with_capacity(ops);
    for op in run {
        stream.push(match op {
            WOp::Insert { key, .. } => Op::Insert(key),
            WOp::Delete { key } => Op::Remove(key),
            other => Op::Get(other.key()),
        });
    }
    Ok((KeySpace { keys, by_rank }, stream))
}

// ----- timing -----------------------------------------------------------------------------

/// Wall-clock and this thread's CPU time. On a shared machine the CPU time is the steadier
/// measure (time spent descheduled is excluded), so throughput is computed from it; the wall
/// time is reported alongside.
struct Timer {
    wall: Instant,
    cpu: f64,
}

fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

impl Timer {
    fn start() -> Timer {
        Timer {
            wall: Instant::now(),
            cpu: thread_cpu_seconds(),
        }
    }
    /// (cpu seconds, wall seconds) since start.
    fn stop(&self) -> (f64, f64) {
        (
            thread_cpu_seconds() - self.cpu,
            self.wall.elapsed().as_secs_f64(),
        )
    }
}

// ----- runs ---------------------------------------------------------------------------------

/// Operations per lockstep chunk (default 2^20, 30-100 ms here): long enough that a table
/// re-warms its hot set in a small part of the chunk, short enough that load bursts from other
/// processes on a shared machine fall on every table alike.
const CHUNK_OPS: usize = 1 << 20;

/// One measured table run.
#[derive(Default, Clone)]
struct Run {
    /// CPU seconds of the timed part (throughput is computed from this).
    seconds: f64,
    wall_seconds: f64,
    build_seconds: f64,
    ops: u64,
    avg_displacement: Option<f64>,
    extra: Vec<(&'static str, f64)>,
    buckets: Option<usize>,
    load_factor: Option<f64>,
    /// Heap bytes of the table after the timed part.
    heap_bytes: Option<usize>,
    /// Most heap bytes during the timed part (VIP: plus the count table of a learn phase).
    peak_heap_bytes: Option<usize>,
    checksum: u64,
}

/// The three operations the streams issue, for both table families.
trait Kv {
    fn fetch(&mut self, k: &u64) -> Option<u64>;
    fn put(&mut self, k: u64, v: u64) -> Option<u64>;
    fn del(&mut self, k: &u64) -> Option<u64>;
}

impl Kv for VipMap<u64, u64> {
    #[inline(always)]
    fn fetch(&mut self, k: &u64) -> Option<u64> {
        self.get(k).copied()
    }
    fn put(&mut self, k: u64, v: u64) -> Option<u64> {
        self.insert(k, v)
    }
    fn del(&mut self, k: &u64) -> Option<u64> {
        self.remove(k)
    }
}

/// A value with a 1-byte request counter (9 bytes, alignment 1): a `u64 -> Counted` node
/// (key 8 + next 4 + value 9) still fits in 24 bytes, so the counter lives in what was padding.
#[derive(Clone, Copy)]
#[repr(C, packed)]
struct Counted {
    value: u64,
    count: u8,
}

/// The counter variant of Fig. 3.6: every fetch bumps the entry's 1-byte counter.
impl Kv for VipMap<u64, Counted> {
    #[inline(always)]
    fn fetch(&mut self, k: &u64) -> Option<u64> {
        let c = self.get_mut(k)?;
        c.count = c.count.saturating_add(1);
        Some(c.value)
    }
    fn put(&mut self, k: u64, v: u64) -> Option<u64> {
        self.insert(k, Counted { value: v, count: 0 })
            .map(|c| c.value)
    }
    fn del(&mut self, k: &u64) -> Option<u64> {
        self.remove(k).map(|c| c.value)
    }
}

/// The wide counter variant: `(u64, u8)` is 16 bytes, so the node grows from 24 to 32 bytes.
impl Kv for VipMap<u64, (u64, u8)> {
    #[inline(always)]
    fn fetch(&mut self, k: &u64) -> Option<u64> {
        let c = self.get_mut(k)?;
        c.1 = c.1.saturating_add(1);
        Some(c.0)
    }
    fn put(&mut self, k: u64, v: u64) -> Option<u64> {
        self.insert(k, (v, 0)).map(|c| c.0)
    }
    fn del(&mut self, k: &u64) -> Option<u64> {
        self.remove(k).map(|c| c.0)
    }
}

impl Kv for StdMap<u64> {
    #[inline(always)]
    fn fetch(&mut self, k: &u64) -> Option<u64> {
        self.get(k).copied()
    }
    fn put(&mut self, k: u64, v: u64) -> Option<u64> {
        self.insert(k, v)
    }
    fn del(&mut self, k: &u64) -> Option<u64> {
        self.remove(k)
    }
}

fn apply_gets<T: Kv>(t: &mut T, keys: &[u64]) -> u64 {
    let mut sum = 0u64;
    for k in keys {
        sum = sum.wrapping_add(t.fetch(black_box(k)).unwrap_or(0));
    }
    sum
}

fn apply_ops<T: Kv>(t: &mut T, ops: &[Op]) -> u64 {
    let mut sum = 0u64;
    for op in ops {
        match *op {
            Op::Get(k) => sum = sum.wrapping_add(t.fetch(black_box(&k)).unwrap_or(0)),
            Op::Insert(k) => sum = sum.wrapping_add(t.put(k, k).unwrap_or(1)),
            Op::Remove(k) => sum = sum.wrapping_add(t.del(&k).unwrap_or(2)),
        }
    }
    sum
}

/// A table under test.
enum Table {
    Vip(Box<VipMap<u64, u64>>),
    Counter(Box<VipMap<u64, Counted>>),
    CounterWide(Box<VipMap<u64, (u64, u8)>>),
    Std(StdMap<u64>),
}

/// Runs `$body` with `$m` bound to the table as a `&mut impl Kv`.
macro_rules! each_table {
    ($t:expr, $m:ident => $body:expr) => {
        match $t {
            Table::Vip(m) => {
                let $m = &mut **m;
                $body
            }
            Table::Counter(m) => {
                let $m = &mut **m;
                $body
            }
            Table::CounterWide(m) => {
                let $m = &mut **m;
                $body
            }
            Table::Std($m) => $body,
        }
    };
}

/// Heap bytes of a `HashMap<u64, u64>` from its capacity (hashbrown: a power-of-two bucket
/// count at most 7/8 full, 16-byte slots plus one control byte each and one trailing group).
fn std_heap_bytes(m: &StdMap<u64>) -> usize {
    let cap = m.capacity();
    if cap == 0 {
        return 0;
    }
    let buckets = if cap < 8 {
        (cap + 1).next_power_of_two()
    } else {
        (cap * 8 / 7).next_power_of_two()
    };
    buckets * (16 + 1) + 16
}

impl Table {
    fn gets(&mut self, keys: &[u64]) -> u64 {
        each_table!(self, m => apply_gets(m, keys))
    }

    fn ops(&mut self, ops: &[Op]) -> u64 {
        each_table!(self, m => apply_ops(m, ops))
    }

    /// Fills the table with `keys` in order, learning off; returns the build CPU seconds.
    fn fill(&mut self, keys: &[u64]) -> f64 {
        let t0 = Timer::start();
        for &k in keys {
            each_table!(self, m => m.put(k, k));
        }
        t0.stop().0
    }

    /// Heap bytes now.
    fn heap_bytes(&self) -> usize {
        match self {
            Table::Vip(m) => m.heap_bytes(),
            Table::Counter(m) => m.heap_bytes(),
            Table::CounterWide(m) => m.heap_bytes(),
            Table::Std(m) => std_heap_bytes(m),
        }
    }

    fn describe(&self, run: &mut Run) {
        let heap = self.heap_bytes();
        run.heap_bytes = Some(heap);
        run.peak_heap_bytes = Some(heap);
        match self {
            Table::Counter(m) => {
                run.avg_displacement = Some(m.stats().avg_displacement());
                run.buckets = Some(m.buckets());
            }
            Table::CounterWide(m) => {
                run.avg_displacement = Some(m.stats().avg_displacement());
                run.buckets = Some(m.buckets());
            }
            _ => {}
        }
        if let Table::Vip(m) = self {
            let st = m.stats();
            if st.learn_phases > 0 {
                // A learn phase holds one u32 count per entry beside the table.
                run.peak_heap_bytes = Some(heap + 4 * m.len());
            }
            run.avg_displacement = Some(st.avg_displacement());
            run.buckets = Some(m.buckets());
            run.extra = vec![
                ("learn_phases", st.learn_phases as f64),
                ("relearns", st.relearns as f64),
                ("learn_fetches", st.learn_fetches as f64),
                ("swaps", st.swaps as f64),
                ("gathers", st.gathers as f64),
                ("rehashes", st.rehashes as f64),
                ("misses", st.misses as f64),
            ];
        }
    }
}

/// The schedule a VIP-family table runs during the timed part.
fn timed_schedule(kind: TableKind, mode: Mode) -> Schedule {
    match (kind, mode) {
        (TableKind::Vip | TableKind::NoGather, Mode::Adaptive) => Schedule::Adaptive,
        (TableKind::LearnAlways, _) => Schedule::LearnOnce(u64::MAX),
        _ => Schedule::Off,
    }
}

/// Builds the table of `kind`: VIP-family tables are filled with learning off (the schedule
/// starts with the timed stream), `vip` in roofline mode in increasing popularity order.
fn build_table(
    kind: TableKind,
    args: &Args,
    ks: &KeySpace,
    buckets: Option<usize>,
) -> Result<(Table, Run), BenchError> {
    let (n, mode) = (ks.keys.len(), args.mode);
    let mut table = match kind {
        TableKind::Hashbrown => Table::Std(StdMap::with_capacity_and_hasher(n, Default::default())),
        TableKind::Counter | TableKind::CounterWide => {
            let config = VipConfig::chained();
            let b = buckets.unwrap_or(attune_hash::map::MIN_BUCKETS);
            if kind == TableKind::Counter {
                let mut m = VipMap::with_buckets(b, config)?;
                m.reserve(n);
                Table::Counter(Box::new(m))
            } else {
                let mut m = VipMap::with_buckets(b, config)?;
                m.reserve(n);
                Table::CounterWide(Box::new(m))
            }
        }
        _ => {
            let d = VipConfig::chained();
            let config = VipConfig {
                learn_factor: args.learn_factor.unwrap_or(d.learn_factor),
                gather_hot: kind != TableKind::NoGather,
                ..d
            };
            let mut m = match buckets {
                Some(b) => VipMap::with_buckets(b, config)?,
                None => VipMap::new(config)?,
            };
            m.reserve(n);
            Table::Vip(Box::new(m))
        }
    };
    let oracle = (kind == TableKind::Vip && mode == Mode::Roofline) || kind == TableKind::Oracle;
    let build_seconds = if oracle {
        // Head insertion from least to most popular leaves every chain in popularity order.
        let order: Vec<u64> = ks.by_rank.iter().rev().copied().collect();
        table.fill(&order)
    } else {
        table.fill(&ks.keys)
    };
    let mut run = Run {
        build_seconds,
        ..Run::default()
    };
    match &mut table {
        Table::Vip(m) => {
            run.load_factor = Some(m.load_factor());
            m.reset_stats();
            m.set_schedule(timed_schedule(kind, mode));
        }
        Table::Counter(m) => {
            run.load_factor = Some(m.load_factor());
            m.reset_stats();
        }
        Table::CounterWide(m) => {
            run.load_factor = Some(m.load_factor());
            m.reset_stats();
        }
        Table::Std(_) => {}
    }
    Ok((table, run))
}

/// Feeds `total` operations to every item in chunks of [`CHUNK_OPS`], rotating which item goes
/// first, and times each item's chunks separately. Returns per item (cpu, wall, checksum).
fn lockstep<T>(
    items: &mut [T],
    total: usize,
    mut step: impl FnMut(&mut T, std::ops::Range<usize>) -> Result<u64, BenchError>,
) -> Result<Vec<(f64, f64, u64)>, BenchError> {
    let n = items.len();
    let mut acc = vec![(0.0f64, 0.0f64, 0u64); n];
    let chunks = total.div_ceil(CHUNK_OPS);
    for c in 0..chunks {
        let range = c * CHUNK_OPS..((c + 1) * CHUNK_OPS).min(total);
        for j in 0..n {
            let i = (c + j) % n;
            let t0 = Timer::start();
            let sum = step(&mut items[i], range.clone())?;
            let (cpu, wall) = t0.stop();
            acc[i].0 += cpu;
            acc[i].1 += wall;
            acc[i].2 = acc[i].2.wrapping_add(sum);
        }
    }
    Ok(acc)
}

/// One round of roofline or adaptive runs: all tables built, then driven in lockstep.
fn round_kv(
    args: &Args,
    ks: &KeySpace,
    gets: &[u64],
    ops: &[Op],
    buckets: Option<usize>,
) -> Result<Vec<Run>, BenchError> {
    let mut tables = Vec::new();
    let mut runs = Vec::new();
    for &kind in &args.tables {
        let (t, r) = build_table(kind, args, ks, buckets)?;
        tables.push(t);
        runs.push(r);
    }
    let total = if args.mode == Mode::Roofline {
        gets.len()
    } else {
        ops.len()
    };
    let timed = lockstep(&mut tables, total, |t, r| {
        Ok(if args.mode == Mode::Roofline {
            t.gets(&gets[r])
        } else {
            t.ops(&ops[r])
        })
    })?;
    for ((run, table), (cpu, wall, sum)) in runs.iter_mut().zip(&tables).zip(timed) {
        (run.seconds, run.wall_seconds, run.checksum) = (cpu, wall, sum);
        run.ops = total as u64;
        table.describe(run);
    }
    Ok(runs)
}

/// A join under test: its build table and its output pairs.
enum JoinSide {
    Vip(Box<JoinTable>, Vec<(u32, u32)>),
    Std(StdMap<u32>, Vec<(u32, u32)>),
}

/// One round of joins: all tables build on R in lockstep, then probe S in lockstep (each
/// table's chunks timed separately). Time is build + probe, `(r_row, s_row)` pairs
/// materialised.
fn round_join(args: &Args, r: &[u64], s: &[u64]) -> Result<Vec<Run>, BenchError> {
    let mut sides = Vec::new();
    for &kind in &args.tables {
        sides.push(match kind {
            TableKind::Hashbrown => {
                JoinSide::Std(StdMap::with_hasher(Default::default()), Vec::new())
            }
            _ => JoinSide::Vip(Box::new(JoinTable::new()?), Vec::new()),
        });
    }
    let build = lockstep(&mut sides, r.len(), |side, range| {
        match side {
            JoinSide::Vip(t, _) => t.build_rows(&r[range.clone()], range.start)?,
            JoinSide::Std(m, _) => {
                for (j, &k) in r[range.clone()].iter().enumerate() {
                    m.insert(k, (range.start + j) as u32);
                }
            }
        }
        Ok(0)
    })?;
    for (side, &kind) in sides.iter_mut().zip(&args.tables) {
        match side {
            JoinSide::Vip(t, out) => {
                let mode = if kind == TableKind::Vip {
                    JoinMode::Vip
                } else {
                    JoinMode::Default
                };
                t.begin_probe(s.len(), mode)?;
                *out = Vec::with_capacity(s.len());
            }
            JoinSide::Std(_, out) => *out = Vec::with_capacity(s.len()),
        }
    }
    let probe = lockstep(&mut sides, s.len(), |side, range| match side {
        JoinSide::Vip(t, out) => Ok(t.probe_rows(&s[range.clone()], range.start, out)? as u64),
        JoinSide::Std(m, out) => {
            let before = out.len();
            for (j, k) in s[range.clone()].iter().enumerate() {
                if let Some(&i) = m.get(k) {
                    out.push((i, (range.start + j) as u32));
                }
            }
            Ok((out.len() - before) as u64)
        }
    })?;
    let mut runs = Vec::new();
    for ((side, b), p) in sides.iter().zip(build).zip(probe) {
        let mut run = Run {
            build_seconds: b.0,
            seconds: b.0 + p.0,
            wall_seconds: b.1 + p.1,
            ops: s.len() as u64,
            checksum: p.2,
            extra: vec![("probe_cpu_seconds", p.0)],
            ..Run::default()
        };
        if let JoinSide::Vip(t, out) = side {
            black_box(out);
            let st = t.stats();
            run.avg_displacement = Some(st.avg_displacement());
            run.buckets = Some(t.buckets());
            run.load_factor = Some(t.load_factor());
            run.extra.push(("learn_fetches", st.learn_fetches as f64));
            run.extra.push(("swaps", st.swaps as f64));
        }
        runs.push(run);
    }
    Ok(runs)
}

/// Runs `repeat` rounds and keeps each table's median-time run.
fn median_rounds(
    tables: &[TableKind],
    repeat: usize,
    mut round: impl FnMut() -> Result<Vec<Run>, BenchError>,
) -> Result<Vec<(TableKind, Run)>, BenchError> {
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); tables.len()];
    for _ in 0..repeat {
        for (i, r) in round()?.into_iter().enumerate() {
            runs[i].push(r);
        }
    }
    Ok(tables
        .iter()
        .zip(runs)
        .map(|(&t, mut rs)| {
            rs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
            let mid = rs.len() / 2;
            (t, rs.swap_remove(mid))
        })
        .collect())
}

// ----- output -------------------------------------------------------------------------------

/// One row: one table in one setting (median round).
#[derive(Serialize)]
struct Row<'a> {
    table: &'static str,
    mode: &'static str,
    zipf: f64,
    keys: usize,
    operations: u64,
    cpu_seconds: f64,
    wall_seconds: f64,
    ops_per_sec: f64,
    build_seconds: f64,
    avg_displacement: Option<f64>,
    speedup_vs_chained: Option<f64>,
    speedup_vs_hashbrown: Option<f64>,
    buckets: Option<usize>,
    load_factor: Option<f64>,
    load_factor_target: Option<f64>,
    heap_bytes: Option<usize>,
    peak_heap_bytes: Option<usize>,
    ratio: Option<usize>,
    churn: Option<String>,
    mix: String,
    seed: u64,
    repeat: usize,
    /// Table-specific counters (learning rounds, moves, ...), named by the table.
    #[serde(flatten)]
    extra: Fields,
    checksum: u64,
    /// `Cpus_allowed_list` of the process: a single CPU when pinned with `taskset -c`.
    cpus_allowed: Option<&'a str>,
}

fn cpus_allowed() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

struct Setting {
    seed: u64,
    zipf: f64,
    keys: usize,
    load_factor_target: Option<f64>,
    ratio: Option<usize>,
}

fn emit(
    args: &Args,
    setting: &Setting,
    results: &[(TableKind, Run)],
    sink: &Sink,
) -> Result<(), BenchError> {
    let find = |k: TableKind| {
        results
            .iter()
            .find(|(t, _)| *t == k)
            .map(|(_, r)| r.seconds)
    };
    let (chained, hashbrown) = (find(TableKind::Chained), find(TableKind::Hashbrown));
    let mode = match args.mode {
        Mode::Roofline => "roofline",
        Mode::Adaptive => "adaptive",
        Mode::Join => "join",
        Mode::Q9 => "q9",
    };
    let cpus = cpus_allowed();
    for (kind, run) in results {
        let ops_per_sec = run.ops as f64 / run.seconds;
        let speedup = |base: Option<f64>| base.map(|b| b / run.seconds);
        let (f, i, d) = args.mix;
        let mut extra = Fields::default();
        for (name, v) in &run.extra {
            extra.push(*name, *v);
        }
        if sink.human() {
            println!(
                "{mode:8} {:9} zipf={:<4} keys={:<9} ratio={:<4} lf={:<6} {:>7.2} Mops/s  \
                 disp={:<6} vs_chained={}",
                kind.name(),
                setting.zipf,
                setting.keys,
                setting.ratio.map(|r| r.to_string()).unwrap_or("-".into()),
                run.load_factor
                    .map(|l| format!("{l:.3}"))
                    .unwrap_or("-".into()),
                ops_per_sec / 1e6,
                run.avg_displacement
                    .map(|d| format!("{d:.3}"))
                    .unwrap_or("-".into()),
                chained
                    .map(|c| format!("{:.3}", c / run.seconds))
                    .unwrap_or("-".into()),
            );
        }
        sink.row(&Row {
            table: kind.name(),
            mode,
            zipf: setting.zipf,
            keys: setting.keys,
            operations: run.ops,
            cpu_seconds: run.seconds,
            wall_seconds: run.wall_seconds,
            ops_per_sec,
            build_seconds: run.build_seconds,
            avg_displacement: run.avg_displacement,
            speedup_vs_chained: speedup(chained),
            speedup_vs_hashbrown: speedup(hashbrown),
            buckets: run.buckets,
            load_factor: run.load_factor,
            load_factor_target: setting.load_factor_target,
            heap_bytes: run.heap_bytes,
            peak_heap_bytes: run.peak_heap_bytes,
            ratio: setting.ratio,
            churn: args.churn.map(|(p, f)| format!("{p}:{f}")),
            mix: format!("{f}:{i}:{d}"),
            seed: setting.seed,
            repeat: args.repeat,
            extra,
            checksum: run.checksum,
            cpus_allowed: cpus.as_deref(),
        })
        .map_err(BenchError::Output)?;
    }
    Ok(())
}

fn fixed_buckets(keys: usize, lf: Option<f64>) -> (usize, Option<usize>) {
    match lf {
        None => (keys, None),
        Some(f) => {
            let b = 1usize << (usize::BITS - 1 - keys.leading_zeros());
            let b = b.max(attune_hash::map::MIN_BUCKETS);
            (((f * b as f64).round() as usize).max(1), Some(b))
        }
    }
}

fn run_args(args: &Args, sink: &Sink) -> Result<(), BenchError> {
    if args.mode == Mode::Q9 {
        return q9::run(args, sink);
    }
    for (&seed, &zipf_theta) in args
        .seeds
        .iter()
        .flat_map(|s| args.zipfs.iter().map(move |z| (s, z)))
    {
        match args.mode {
            Mode::Roofline | Mode::Adaptive => {
                for &lf in &args.load_factors {
                    let (n, buckets) = fixed_buckets(args.keys, lf);
                    let (ks, ops) = wiscer(args, seed, zipf_theta, n, args.operations, false)?;
                    let gets: Vec<u64> = if args.mode == Mode::Roofline {
                        ops.iter()
                            .map(|op| match *op {
                                Op::Get(k) | Op::Insert(k) | Op::Remove(k) => k,
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    let results = median_rounds(&args.tables, args.repeat, || {
                        round_kv(args, &ks, &gets, &ops, buckets)
                    })?;
                    let setting = Setting {
                        seed,
                        zipf: zipf_theta,
                        keys: n,
                        load_factor_target: lf,
                        ratio: None,
                    };
                    emit(args, &setting, &results, sink)?;
                }
            }
            Mode::Q9 => unreachable!("handled above"),
            Mode::Join => {
                for &ratio in &args.ratios {
                    // R: keys 1..=|R| (sequential pattern); S: zipf fetches over R's keys.
                    let (ks, probes) =
                        wiscer(args, seed, zipf_theta, args.keys, args.keys * ratio, true)?;
                    let r = ks.keys;
                    let s: Vec<u64> = probes
                        .iter()
                        .map(|op| match *op {
                            Op::Get(k) | Op::Insert(k) | Op::Remove(k) => k,
                        })
                        .collect();
                    let results =
                        median_rounds(&args.tables, args.repeat, || round_join(args, &r, &s))?;
                    let setting = Setting {
                        seed,
                        zipf: zipf_theta,
                        keys: args.keys,
                        load_factor_target: None,
                        ratio: Some(ratio),
                    };
                    emit(args, &setting, &results, sink)?;
                }
            }
        }
    }
    Ok(())
}

/// Runs `attune-bench hash ARGS`.
pub fn run(argv: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    match parse_args(&argv).and_then(|a| run_args(&a, sink)) {
        Ok(()) => Ok(()),
        Err(BenchError::Usage(m)) if m == "help requested" => {
            print!("{USAGE}");
            Ok(())
        }
        Err(e @ BenchError::Usage(_)) => Err(Fail::Usage(e.to_string())),
        Err(e) => Err(Fail::Run(e.to_string())),
    }
}
