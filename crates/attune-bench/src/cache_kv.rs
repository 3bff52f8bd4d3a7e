//! `attune-bench cache-kv`: engine-level benchmarks of adaptive cache sizing (Symbiosis).
//!
//! Unlike `attune-bench cache-sim` (which replays traces through the crate's model of two caches),
//! every number here comes from the real engine: `attune_kv::DB` with `memory_budget`, the
//! user/user layout (uncompressed `BlockCache` + in-process compressed cache), the background
//! controller thread, real LZ4/Zstd blocks and real `get`s.
//!
//! * `sweep` — static cells (access pattern × M:D_u × compression); per cell one database is
//!   loaded once and every configuration (adaptive, static M_a = minimum, M/2, M, the engine's
//!   default) reads it in the same process, one after the other with the same seeded keys.
//! * `dynamic` — a two-phase workload (hotspot moved and skew changed) with the controller's
//!   timeline, convergence time and per-read latency percentiles around the change.
//! * `overhead` — CPU per read of adaptive against static sizing at the same M_a, during the
//!   first simulation round and after it; interleaved repeats, medians.
//! * `ablation` — sampling-rate ablation on one cell: every candidate split measured statically,
//!   and for each 1/R the first simulation round's predicted H_a, H_k and L_e per candidate
//!   (predicted-vs-measured curves; `benches/cache/kv_ablation_plot.py`).
//!
//! Device reads: with `--env mem` the database lives in `MemEnv`, whose O_DIRECT file is its
//! normal file, so the *hit counts* are deterministic and every read costs only CPU. The device
//! is then modelled: each real device read (second-tier miss) is charged C_k, measured once at
//! start by `attune_cache::calibrate` with O_DIRECT reads of a probe file on `--probe-dir`, and
//! the reported latency per read is `thread CPU time per read + device reads per read × C_k`.
//! With `--env disk` the database is on `--dir` and reads really go to the device (O_DIRECT).
//!
//! Thread-safety: single-threaded driver (the engine's own threads run beside it).
//! Invariants: every row carries `command` (the exact command line) and `machine`
//! ([`crate::output::Sink`]). Every row kind, and every object nested in one, is a
//! `#[derive(Serialize)]` struct in [`rows`].

use attune_kv::env::{Env, MemEnv, PosixEnv};
use attune_kv::CacheTierStats;
use attune_kv::{Options, DB};
use attune_workload::dist::{RequestDist, Sampler};
use clap::{Parser, Subcommand};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::output::{Fail, Sink};

mod rows;

use rows::{
    AbSegment, AblationRow, AdaptiveRow, CompressedCache, Controller, DynamicRow, InRound,
    MeasuredCandidate, MedianCpu, Metric, OverheadAbRow, OverheadRepeat, OverheadRow, PerKind,
    Percentiles, Predicted, Segment, Spread, SweepConfig, SweepRow, Timeline, Window,
};

/// Whether progress notes go to stderr (set once by [`run`] from the output flags).
static PROGRESS: AtomicBool = AtomicBool::new(false);

/// A progress note on stderr, when progress is on.
macro_rules! note {
    ($($arg:tt)*) => {
        if PROGRESS.load(Ordering::Relaxed) {
            eprintln!($($arg)*);
        }
    };
}
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Value length in bytes. Default 1000: YCSB's record size, about four values per 4 KiB block.
const VALUE_BYTES: usize = 1000;
/// Reads between polls of `DB::stats()` while waiting for the controller. Default 32 Ki: a poll
/// (a mutex and a copy of the timeline) is then well under 0.1 % of the reads' time.
const POLL_READS: u64 = 1 << 15;
/// Probe file for C_k. Default 64 MiB: larger than any device cache in reach of one read.
const PROBE_BYTES: u64 = 64 << 20;
/// Reads per calibration measurement. Default 256 (medians).
const PROBE_REPS: usize = 256;

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("engine: {0}")]
    Kv(#[from] attune_kv::Error),
    #[error("workload: {0}")]
    Workload(#[from] attune_workload::WorkloadError),
    #[error("calibration: {0}")]
    Calibrate(#[from] attune_cache::CacheError),
    #[error("io on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("bad argument: {0}")]
    Arg(String),
    #[error("engine reported no cache tiers (memory_budget not applied?)")]
    NoTiers,
    #[error("wrong value for key {0}")]
    WrongValue(u64),
    #[error("{0}")]
    Output(String),
}

type Result<T> = std::result::Result<T, BenchError>;

#[derive(Parser, Debug)]
#[command(
    name = "attune-bench cache-kv",
    about = "Engine-level Symbiosis benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(clap::Args, Debug, Clone)]
struct Common {
    /// Cache budget M in MiB (memory_budget = 2·M: two memtables of M/2 each).
    #[arg(long, default_value_t = 32)]
    memory_mib: u64,
    /// 1/R of the controller's sampling (cache_sample_inv).
    #[arg(long, default_value_t = 16)]
    sample_inv: u32,
    /// Where the database lives: mem (MemEnv; device reads modelled at C_k) or disk.
    #[arg(long, default_value = "mem")]
    env: String,
    /// Database directory for --env disk.
    #[arg(long, default_value = "target/cache-kv-db")]
    dir: PathBuf,
    /// Directory for the O_DIRECT probe that measures C_k (a real file system).
    #[arg(long, default_value = "target")]
    probe_dir: PathBuf,
    /// Seed of the key streams.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// Static cells: pattern × M:D_u × compression, every configuration per cell.
    Sweep {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value = "uniform,zipf,hot20")]
        patterns: String,
        #[arg(long, default_value = "0.2,0.6,1.0")]
        ratios: String,
        #[arg(long, default_value = "lz4,zstd")]
        compressions: String,
        /// Reads measured per configuration (after warm-up / adaptation).
        #[arg(long, default_value_t = 1_000_000)]
        reads: u64,
        /// Warm-up reads of a static configuration.
        #[arg(long, default_value_t = 600_000)]
        warmup: u64,
        /// Most reads an adaptive configuration may take to finish its rounds and settle.
        #[arg(long, default_value_t = 6_000_000)]
        adapt_max: u64,
        /// Run only the adaptive configuration (diagnosis; no ratios).
        #[arg(long, default_value_t = false)]
        adaptive_only: bool,
    },
    /// Two phases: `--phase1` on the head of the key space, then `--phase2` mirrored onto the
    /// tail (hotspot moved; a different pattern changes the skew).
    Dynamic {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value = "hot20")]
        phase1: String,
        #[arg(long, default_value = "hot10")]
        phase2: String,
        #[arg(long, default_value = "0.6")]
        ratio: f64,
        #[arg(long, default_value = "zstd")]
        compression: String,
        /// Reads per phase.
        #[arg(long, default_value_t = 4_000_000)]
        phase_reads: u64,
        /// Also run static M_a = M/2 and the minimum with the same phases.
        #[arg(long, default_value_t = false)]
        statics: bool,
        /// Write the timeline as JSON here (for the plot).
        #[arg(long)]
        timeline: Option<PathBuf>,
    },
    /// Sampling ablation: static H_a/H_k/L_e at every candidate, predictions per 1/R.
    Ablation {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value = "hot20")]
        pattern: String,
        #[arg(long, default_value = "0.6")]
        ratio: f64,
        #[arg(long, default_value = "zstd")]
        compression: String,
        /// Values of 1/R, comma-separated.
        #[arg(long, default_value = "2,4,8,16,32,64,128,256")]
        sample_invs: String,
        /// Reads measured per static candidate (after `warmup`).
        #[arg(long, default_value_t = 300_000)]
        reads: u64,
        #[arg(long, default_value_t = 300_000)]
        warmup: u64,
        /// Most reads an adaptive run may take to finish its first round.
        #[arg(long, default_value_t = 8_000_000)]
        adapt_max: u64,
    },
    /// CPU per read, adaptive vs static at the same M_a, in and outside rounds.
    Overhead {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value = "hot20")]
        pattern: String,
        #[arg(long, default_value = "0.6")]
        ratio: f64,
        #[arg(long, default_value = "zstd")]
        compression: String,
        /// Interleaved repeats.
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Reads per measured segment (first-round mode).
        #[arg(long, default_value_t = 600_000)]
        reads: u64,
        /// `first-round`: adaptive during its first round and after it against a static
        /// database at the settled split. `alternating`: one warm database at
        /// the settled split in simulation-only mode, segments with and without a running
        /// round interleaved (see `overhead_alternating`).
        #[arg(long, default_value = "first-round")]
        mode: String,
        /// Alternating mode: cycles of three segments (A, A', B) in rotating order.
        #[arg(long, default_value_t = 24)]
        cycles: u32,
        /// Alternating mode: reads per segment.
        #[arg(long, default_value_t = 65_536)]
        segment_reads: u64,
        /// Alternating mode: reads at the settled split before the first cycle.
        #[arg(long, default_value_t = 600_000)]
        warmup: u64,
    },
}

/// Runs `attune-bench cache-kv ARGS`.
pub fn run(argv: Vec<String>, sink: &Sink) -> std::result::Result<(), Fail> {
    let argv = std::iter::once("attune-bench cache-kv".to_string()).chain(argv);
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            print!("{e}");
            return Ok(());
        }
        Err(e) => return Err(Fail::Usage(e.to_string())),
    };
    PROGRESS.store(sink.progress(), Ordering::Relaxed);
    let r = match cli.mode {
        Mode::Sweep {
            common,
            patterns,
            ratios,
            compressions,
            reads,
            warmup,
            adapt_max,
            adaptive_only,
        } => sweep(
            &common,
            sink,
            &SweepArgs {
                patterns: split(&patterns),
                ratios: parse_list(&ratios),
                compressions: split(&compressions),
                reads,
                warmup,
                adapt_max,
                adaptive_only,
            },
        ),
        Mode::Dynamic {
            common,
            phase1,
            phase2,
            ratio,
            compression,
            phase_reads,
            statics,
            timeline,
        } => dynamic(
            &common,
            sink,
            [&phase1, &phase2],
            ratio,
            &compression,
            phase_reads,
            statics,
            timeline.as_deref(),
        ),
        Mode::Ablation {
            common,
            pattern,
            ratio,
            compression,
            sample_invs,
            reads,
            warmup,
            adapt_max,
        } => ablation(
            &common,
            sink,
            &pattern,
            ratio,
            &compression,
            &sample_invs,
            (reads, warmup, adapt_max),
        ),
        Mode::Overhead {
            common,
            pattern,
            ratio,
            compression,
            repeat,
            reads,
            mode,
            cycles,
            segment_reads,
            warmup,
        } => match mode.as_str() {
            "first-round" => overhead(&common, sink, &pattern, ratio, &compression, repeat, reads),
            "alternating" => overhead_alternating(
                &common,
                sink,
                &OverheadAb {
                    pattern: &pattern,
                    ratio,
                    compression: &compression,
                    cycles,
                    segment_reads,
                    warmup,
                },
            ),
            m => Err(BenchError::Arg(format!(
                "unknown overhead mode `{m}` (first-round, alternating)"
            ))),
        },
    };
    match r {
        Ok(()) => Ok(()),
        Err(e @ BenchError::Arg(_)) => Err(Fail::Usage(e.to_string())),
        Err(e) => Err(Fail::Run(e.to_string())),
    }
}

fn split(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

fn parse_list(s: &str) -> Result<Vec<f64>> {
    split(s)
        .iter()
        .map(|x| {
            x.parse::<f64>()
                .ok()
                .filter(|v| *v > 0.0 && *v <= 4.0)
                .ok_or_else(|| BenchError::Arg(format!("ratio `{x}` is not a number in (0, 4]")))
        })
        .collect()
}

struct SweepArgs {
    patterns: Vec<String>,
    ratios: Result<Vec<f64>>,
    compressions: Vec<String>,
    reads: u64,
    warmup: u64,
    adapt_max: u64,
    adaptive_only: bool,
}

/// The request distribution of a pattern name.
fn pattern(name: &str) -> Result<RequestDist> {
    let hot = |d: f64, o: f64| RequestDist::Hotspot {
        data_fraction: d,
        ops_fraction: o,
    };
    Ok(match name {
        "uniform" => RequestDist::Uniform,
        "zipf" => RequestDist::ScrambledZipfian(0.99),
        "hot30" => hot(0.3, 0.7),
        "hot20" => hot(0.2, 0.8),
        "hot10" => hot(0.1, 0.9),
        _ => {
            return Err(BenchError::Arg(format!(
                "unknown pattern `{name}` (uniform, zipf, hot30, hot20, hot10)"
            )))
        }
    })
}

/// Random share of a value per compressor: LZ4 ≈ 0.5 on-disk/logical, Zstd ≈ 0.25.
fn random_fraction(compression: &str) -> Result<f64> {
    match compression {
        "lz4" => Ok(0.45),
        "zstd" => Ok(0.18),
        "none" => Ok(1.0),
        _ => Err(BenchError::Arg(format!(
            "unknown compression `{compression}` (lz4, zstd, none)"
        ))),
    }
}

fn key(i: u64) -> [u8; 16] {
    let mut k = *b"user000000000000";
    let s = format!("{i:012}");
    k[4..].copy_from_slice(s.as_bytes());
    k
}

/// A value whose first `1 − random_fraction` is text derived from `i`, the rest pseudo-random.
fn value(i: u64, random_fraction: f64) -> Vec<u8> {
    let text = format!("field0=value-of-record-{i:012};");
    let mut v: Vec<u8> = text.bytes().cycle().take(VALUE_BYTES).collect();
    let start = ((1.0 - random_fraction) * VALUE_BYTES as f64) as usize;
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for b in v.iter_mut().skip(start) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    v
}

/// A loaded database and the environment it lives in.
struct Dataset {
    env: Arc<dyn Env>,
    dir: PathBuf,
    keys: u64,
    compression: String,
    random_fraction: f64,
    logical_bytes: u64,
    disk_bytes: u64,
}

fn make_env(c: &Common) -> Result<(Arc<dyn Env>, PathBuf)> {
    match c.env.as_str() {
        "mem" => Ok((Arc::new(MemEnv::new()), PathBuf::from("/db"))),
        "disk" => {
            let _ = std::fs::remove_dir_all(&c.dir);
            Ok((Arc::new(PosixEnv::new()), c.dir.clone()))
        }
        e => Err(BenchError::Arg(format!("unknown env `{e}` (mem, disk)"))),
    }
}

fn base_options(c: &Common, compression: &str) -> Vec<(String, String)> {
    vec![
        ("memory_budget".into(), format!("{}MiB", 2 * c.memory_mib)),
        ("cache_layout".into(), "user".into()),
        ("compression".into(), compression.into()),
        ("enable_blob_files".into(), "false".into()),
        ("cache_sample_inv".into(), c.sample_inv.to_string()),
        ("wal_sync_interval_ms".into(), "0".into()),
        // Point lookups through the index only: the learned index's window reads neighbouring
        // blocks (about 3 block reads per get with it on), which is a different workload for the
        // caches and not what the split is being measured on.
        ("learned_index".into(), "off".into()),
    ]
}

fn open(ds: &Dataset, opts: &[(String, String)]) -> Result<DB> {
    let mut o = Options::default();
    for (k, v) in opts {
        o.set(k, v)?;
    }
    Ok(DB::open_with_env(ds.env.clone(), &ds.dir, o)?)
}

/// Loads `M / ratio` logical bytes of records.
fn load(c: &Common, ratio: f64, compression: &str) -> Result<Dataset> {
    let (env, dir) = make_env(c)?;
    let rf = random_fraction(compression)?;
    let logical = (c.memory_mib as f64 * (1 << 20) as f64 / ratio) as u64;
    let keys = (logical / (VALUE_BYTES as u64 + 16)).max(1);
    let mut ds = Dataset {
        env,
        dir,
        keys,
        compression: compression.to_string(),
        random_fraction: rf,
        logical_bytes: keys * (VALUE_BYTES as u64 + 16),
        disk_bytes: 0,
    };
    let mut opts = base_options(c, compression);
    opts.push(("cache_sizing".into(), "1MiB".into()));
    opts.push(("cache_miss_costs".into(), "3000:16000".into()));
    let db = open(&ds, &opts)?;
    for i in 0..keys {
        db.put(&key(i), &value(i, rf))?;
    }
    db.compact_range(None, None)?;
    ds.disk_bytes = db.stats().live_sst_bytes;
    drop(db);
    Ok(ds)
}

/// CPU time of the whole process (reader, controller thread, compactions), ns.
fn process_cpu_ns() -> u64 {
    // SAFETY: a zeroed rusage is a valid out-parameter for getrusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return 0;
    }
    let t = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn tiers(db: &DB) -> Result<CacheTierStats> {
    db.stats().cache_tiers.ok_or(BenchError::NoTiers)
}

/// Counters of one measured span.
#[derive(Clone, Copy, Default, Debug)]
struct Span {
    reads: u64,
    wall_ns: u64,
    cpu_ns: u64,
    proc_cpu_ns: u64,
    app_hits: u64,
    second_hits: u64,
    device_reads: u64,
    second_ns: u64,
}

struct Snap {
    wall: Instant,
    cpu: u64,
    proc_cpu: u64,
    t: CacheTierStats,
}

fn snap(db: &DB) -> Result<Snap> {
    Ok(Snap {
        wall: Instant::now(),
        cpu: attune_kv::env::thread_cpu_ns(),
        proc_cpu: process_cpu_ns(),
        t: tiers(db)?,
    })
}

fn span(a: &Snap, b: &Snap, reads: u64) -> Span {
    Span {
        reads,
        wall_ns: u64::try_from((b.wall - a.wall).as_nanos()).unwrap_or(u64::MAX),
        cpu_ns: b.cpu.saturating_sub(a.cpu),
        proc_cpu_ns: b.proc_cpu.saturating_sub(a.proc_cpu),
        app_hits: b.t.app_hits - a.t.app_hits,
        second_hits: b.t.second_hits - a.t.second_hits,
        device_reads: b.t.device_reads - a.t.device_reads,
        second_ns: b.t.second_ns - a.t.second_ns,
    }
}

impl Span {
    fn blocks(&self) -> u64 {
        self.app_hits + self.second_hits + self.device_reads
    }
    fn h_a(&self) -> f64 {
        self.app_hits as f64 / self.blocks().max(1) as f64
    }
    fn h_k(&self) -> f64 {
        self.second_hits as f64 / (self.second_hits + self.device_reads).max(1) as f64
    }
    /// L_e per block read from the span's hit counts.
    fn le(&self, c_a: f64, c_k: f64) -> f64 {
        (1.0 - self.h_a()) * (c_a + (1.0 - self.h_k()) * c_k)
    }
    /// Per read: measured CPU + modelled device time (mem env), or measured wall (disk env).
    fn latency_ns(&self, c_k: f64, disk: bool) -> f64 {
        let n = self.reads.max(1) as f64;
        if disk {
            self.wall_ns as f64 / n
        } else {
            (self.cpu_ns as f64 + self.device_reads as f64 * c_k) / n
        }
    }
    /// The span per read, as the rows' `measured` object.
    fn row(&self, c_a: f64, c_k: f64, disk: bool) -> rows::Measured {
        let n = self.reads.max(1) as f64;
        rows::Measured {
            reads: self.reads,
            wall_ns_per_read: self.wall_ns as f64 / n,
            cpu_ns_per_read: self.cpu_ns as f64 / n,
            process_cpu_ns_per_read: self.proc_cpu_ns as f64 / n,
            block_reads_per_read: self.blocks() as f64 / n,
            device_reads_per_read: self.device_reads as f64 / n,
            h_a: self.h_a(),
            h_k: self.h_k(),
            second_hit_ns: self.second_ns as f64 / self.second_hits.max(1) as f64,
            le_ns: self.le(c_a, c_k),
            latency_ns: self.latency_ns(c_k, disk),
        }
    }
}

/// Reads `n` keys drawn from `sampler` (checking every value), polling `poll` every
/// [`POLL_READS`] reads; stops early when `poll` returns true. Returns the reads done.
fn read_n(
    db: &DB,
    ds: &Dataset,
    sampler: &mut Sampler,
    n: u64,
    mut poll: impl FnMut(&DB) -> Result<bool>,
) -> Result<u64> {
    let mut done = 0;
    while done < n {
        let batch = POLL_READS.min(n - done);
        for _ in 0..batch {
            let i = sampler.next_item();
            read_one(db, ds, i)?;
        }
        done += batch;
        if poll(db)? {
            break;
        }
    }
    Ok(done)
}

fn read_one(db: &DB, ds: &Dataset, i: u64) -> Result<()> {
    match db.get(&key(i))? {
        Some(v) if v.len() == VALUE_BYTES && v == value(i, ds.random_fraction) => Ok(()),
        _ => Err(BenchError::WrongValue(i)),
    }
}

fn emit<T: Serialize>(sink: &Sink, row: &T) -> Result<()> {
    if sink.human() {
        println!("{}", to_json(row));
    }
    sink.row(row).map_err(BenchError::Output)
}

/// `value` as one line of JSON, for notes and human output.
fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| format!("(not JSON: {e})"))
}

/// C_k of this machine's disk: an O_DIRECT read of one compressed block (median), minus a
/// cached read. Measured once per process.
fn device_cost(c: &Common, block: usize) -> Result<f64> {
    std::fs::create_dir_all(&c.probe_dir).map_err(|source| BenchError::Io {
        path: c.probe_dir.clone(),
        source,
    })?;
    let cal =
        attune_cache::calibrate::calibrate(&c.probe_dir, PROBE_BYTES, block, PROBE_REPS, || 0)?;
    note!(
        "C_k probe: device {:.0} ns, cached {:.0} ns, method {:?}, suspect {}",
        cal.device_read_ns,
        cal.cached_read_ns,
        cal.device_method,
        cal.device_suspect
    );
    Ok(cal.second_miss_ns)
}

/// C_a of this dataset: median time of compressed-cache hits (fetch + decompress + parse), from a
/// static run at the minimum split that reads until 20 000 second-tier hits were timed.
fn app_miss_cost(c: &Common, ds: &Dataset, dist: &RequestDist) -> Result<f64> {
    let mut opts = base_options(c, &ds.compression);
    opts.push(("cache_sizing".into(), "1MiB".into()));
    opts.push(("cache_miss_costs".into(), "3000:16000".into()));
    let db = open(ds, &opts)?;
    let mut s = Sampler::new(dist, ds.keys, c.seed ^ 0xca)?;
    read_n(&db, ds, &mut s, 2_000_000, |db| {
        tiers(db).map(|t| t.second_hits >= 20_000)
    })?;
    let t = tiers(&db)?;
    // The median, not the mean: on this shared machine preempted reads inflate the mean.
    Ok(t.second_hit_ns_median
        .or(t.device_read_ns_median)
        .unwrap_or(1000.0))
}

/// One configuration's run over a cell: warm up (static) or adapt until settled (adaptive),
/// then measure `reads`.
#[allow(clippy::too_many_arguments)]
fn run_config(
    c: &Common,
    ds: &Dataset,
    dist: &RequestDist,
    sizing: &str,
    costs: (f64, f64),
    reads: u64,
    warmup: u64,
    adapt_max: u64,
) -> Result<(Span, CacheTierStats, u64)> {
    let mut opts = base_options(c, &ds.compression);
    if sizing != "default" {
        opts.push(("cache_sizing".into(), sizing.into()));
    }
    opts.push((
        "cache_miss_costs".into(),
        format!("{:.0}:{:.0}", costs.0, costs.1),
    ));
    let db = open(ds, &opts)?;
    let mut s = Sampler::new(dist, ds.keys, c.seed)?;
    let adaptive = tiers(&db)?.sizing == "adaptive";
    let warm = if adaptive {
        // Adapt: at least one finished round and a stable controller, or the cap.
        read_n(&db, ds, &mut s, adapt_max, |db| {
            let t = tiers(db)?;
            Ok(t.rounds >= 1 && t.state == "stable")
        })?
    } else {
        read_n(&db, ds, &mut s, warmup, |_| Ok(false))?
    };
    let a = snap(&db)?;
    let n = read_n(&db, ds, &mut s, reads, |_| Ok(false))?;
    let b = snap(&db)?;
    Ok((span(&a, &b, n), b.t, warm))
}

fn sweep(c: &Common, sink: &Sink, a: &SweepArgs) -> Result<()> {
    let ratios = match &a.ratios {
        Ok(r) => r.clone(),
        Err(e) => return Err(BenchError::Arg(e.to_string())),
    };
    let disk = c.env == "disk";
    let c_k = device_cost(c, 2048)?;
    let m = c.memory_mib << 20;
    // Without a budget the engine's default is a `block_cache_size` = 32 MiB block cache and
    // no compressed tier; at M = 32 MiB that is exactly static M_a = M (so "over default" is
    // "over M" there). With a budget the default is adaptive.
    let mut configs = vec![
        "adaptive".to_string(),
        "1MiB".to_string(),
        format!("{}", m / 2),
        format!("{m}"),
    ];
    if a.adaptive_only {
        configs.truncate(1);
    }
    for comp in &a.compressions {
        for &ratio in &ratios {
            let t0 = Instant::now();
            let ds = load(c, ratio, comp)?;
            note!(
                "loaded {} keys ({} MB logical, {} MB on disk, alpha {:.3}) in {:.1}s",
                ds.keys,
                ds.logical_bytes >> 20,
                ds.disk_bytes >> 20,
                ds.disk_bytes as f64 / ds.logical_bytes as f64,
                t0.elapsed().as_secs_f64()
            );
            for p in &a.patterns {
                let dist = pattern(p)?;
                let c_a = app_miss_cost(c, &ds, &dist)?;
                let mut results = Vec::new();
                for cfg in &configs {
                    let t1 = Instant::now();
                    let (sp, t, warm) = run_config(
                        c,
                        &ds,
                        &dist,
                        cfg,
                        (c_a, c_k),
                        a.reads,
                        a.warmup,
                        a.adapt_max,
                    )?;
                    note!(
                        "  {comp} {ratio} {p} {cfg}: M_a {} MiB, H_a {:.3} H_k {:.3}, \
                         {:.0} ns/read ({:.1}s)",
                        t.app_bytes >> 20,
                        sp.h_a(),
                        sp.h_k(),
                        sp.latency_ns(c_k, disk),
                        t1.elapsed().as_secs_f64()
                    );
                    results.push((cfg.clone(), sp, t, warm));
                }
                if a.adaptive_only {
                    for (_, sp, t, warm) in &results {
                        let timeline = t
                            .timeline
                            .iter()
                            .map(|w| (w.ms, w.app_bytes, w.h_a, w.h_k, w.le_model_ns, w.state));
                        emit(
                            sink,
                            &AdaptiveRow {
                                bench: "cache-kv-adaptive",
                                pattern: p,
                                ratio,
                                compression: comp,
                                c_a_ns: c_a,
                                c_k_ns: c_k,
                                warmup_reads: *warm,
                                measured: sp.row(c_a, c_k, disk),
                                final_app_bytes: t.app_bytes,
                                rounds: t.rounds,
                                adoptions: t.adoptions,
                                reverts: t.reverts,
                                ghost_bytes_peak: t.ghost_bytes_peak,
                                last_round: &t.last_round,
                                last_round_measured_le_ns: t.last_round_measured_le_ns,
                                timeline: timeline.collect(),
                            },
                        )?;
                    }
                    continue;
                }
                let lat: Vec<f64> = results.iter().map(|r| r.1.latency_ns(c_k, disk)).collect();
                let les: Vec<f64> = results.iter().map(|r| r.1.le(c_a, c_k)).collect();
                // Best static among the three fixed splits (the default is the adaptive
                // controller itself when a budget is set, so it is reported separately).
                let best_static = lat[1..4].iter().copied().fold(f64::INFINITY, f64::min);
                let worse_end = lat[1].max(lat[3]);
                let configs = results
                    .iter()
                    .map(|(cfg, sp, t, warm)| SweepConfig {
                        sizing: cfg,
                        final_app_bytes: t.app_bytes,
                        rounds: t.rounds,
                        adoptions: t.adoptions,
                        reverts: t.reverts,
                        state: t.state,
                        warmup_reads: *warm,
                        ghost_bytes_peak: t.ghost_bytes_peak,
                        le_predicted_ns: t.le_predicted_ns,
                        last_round: &t.last_round,
                        last_round_measured_le_ns: t.last_round_measured_le_ns,
                        round_log: rows::round_log(t),
                        compressed_cache: t.compressed.as_ref().map(|cc| CompressedCache {
                            capacity_bytes: cc.capacity_bytes,
                            usage_bytes: cc.usage_bytes,
                            evictions: cc.evictions,
                        }),
                        measured: sp.row(c_a, c_k, disk),
                    })
                    .collect();
                emit(
                    sink,
                    &SweepRow {
                        bench: "cache-kv-sweep",
                        env: &c.env,
                        pattern: p,
                        ratio,
                        compression: comp,
                        alpha: ds.disk_bytes as f64 / ds.logical_bytes as f64,
                        keys: ds.keys,
                        memory_bytes: m,
                        sample_inv: c.sample_inv,
                        c_a_ns: c_a,
                        c_k_ns: c_k,
                        configs,
                        adaptive_over_best_static: best_static / lat[0],
                        worse_end_over_adaptive: worse_end / lat[0],
                        m_over_adaptive: lat[3] / lat[0],
                        min_over_adaptive: lat[1] / lat[0],
                        half_over_adaptive: lat[2] / lat[0],
                        le_adaptive_ns: les[0],
                        le_best_static_ns: les[1..4].iter().copied().fold(f64::INFINITY, f64::min),
                    },
                )?;
            }
        }
    }
    Ok(())
}

/// Per-read latency percentiles of a slice of nanoseconds; `None` for an empty slice.
fn percentiles(v: &mut [u32]) -> Option<Percentiles> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let p = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    Some(Percentiles {
        n: v.len(),
        p50: p(0.5),
        p95: p(0.95),
        p99: p(0.99),
    })
}

#[allow(clippy::too_many_arguments)]
fn dynamic(
    c: &Common,
    sink: &Sink,
    phases: [&str; 2],
    ratio: f64,
    compression: &str,
    phase_reads: u64,
    statics: bool,
    timeline_out: Option<&Path>,
) -> Result<()> {
    let c_k = device_cost(c, 2048)?;
    let ds = load(c, ratio, compression)?;
    let m = c.memory_mib << 20;
    let p1 = pattern(phases[0])?;
    let p2 = pattern(phases[1])?;
    let c_a = app_miss_cost(c, &ds, &p1)?;
    let mut sizings = vec!["adaptive".to_string()];
    if statics {
        sizings.push("1MiB".to_string());
        sizings.push(format!("{}", m / 2));
        sizings.push(format!("{m}"));
    }
    let mut timeline_rows = Vec::new();
    for sizing in &sizings {
        let mut opts = base_options(c, &ds.compression);
        opts.push(("cache_sizing".into(), sizing.clone()));
        opts.push(("cache_miss_costs".into(), format!("{c_a:.0}:{c_k:.0}")));
        let opened = Instant::now();
        let db = open(&ds, &opts)?;
        // Phase 1 on the head of the key space, phase 2 mirrored onto the tail.
        let mut s1 = Sampler::new(&p1, ds.keys, c.seed)?;
        let mut s2 = Sampler::new(&p2, ds.keys, c.seed + 1)?;
        let mut lat: Vec<u32> = Vec::with_capacity((2 * phase_reads) as usize);
        // Each read's wall time. With --env disk that includes the real device reads; with
        // --env mem a device read costs only a memory copy (no C_k is added per read).
        let mut buf: Vec<u32> = Vec::with_capacity(256);
        let mut switch_ms = 0u64;
        let mut switch_accesses = 0u64;
        // When the controller was polled, ms from open.
        let mut polls_ms: Vec<u64> = Vec::new();
        for phase in 0..2u64 {
            if phase == 1 {
                switch_ms = u64::try_from(opened.elapsed().as_millis()).unwrap_or(0);
                switch_accesses = tiers(&db)?.accesses_recorded;
            }
            let mut done = 0;
            while done < phase_reads {
                for _ in 0..256 {
                    let i = if phase == 0 {
                        s1.next_item()
                    } else {
                        ds.keys - 1 - s2.next_item()
                    };
                    let t = Instant::now();
                    read_one(&db, &ds, i)?;
                    buf.push(u32::try_from(t.elapsed().as_nanos()).unwrap_or(u32::MAX));
                }
                done += 256;
                if done % 8192 == 0 || done >= phase_reads {
                    // The poll reads the stats as it always has (a run without tiers is an
                    // error); only its time is kept.
                    tiers(&db)?;
                    polls_ms.push(u64::try_from(opened.elapsed().as_millis()).unwrap_or(0));
                    lat.append(&mut buf);
                }
            }
            lat.append(&mut buf);
        }
        let t = tiers(&db)?;
        // Convergence: from the switch to the first window after it in which the controller
        // is stable again having adapted (a round started after the switch), in ms.
        let after: Vec<_> = t.timeline.iter().filter(|w| w.ms >= switch_ms).collect();
        let first_busy = after.iter().position(|w| w.state != "stable");
        let converged_ms = first_busy.and_then(|b| {
            after[b..]
                .iter()
                .find(|w| w.state == "stable")
                .map(|w| w.ms - switch_ms)
        });
        // The same in block reads: the converged window's count minus the count at the switch.
        let converged_accesses = first_busy.and_then(|b| {
            after[b..]
                .iter()
                .find(|w| w.state == "stable")
                .map(|w| w.accesses.saturating_sub(switch_accesses))
        });
        let per_phase = phase_reads as usize;
        let conv_reads = converged_ms.map(|ms| {
            // Reads during adaptation, estimated from the polls' timestamps.
            polls_ms
                .iter()
                .filter(|&&p| p >= switch_ms && p <= switch_ms + ms)
                .count()
                * 8192
        });
        let n_lat = lat.len();
        let (p1lat, rest) = lat.split_at_mut(per_phase.min(n_lat));
        let adapt_n = conv_reads.unwrap_or(0).min(rest.len());
        let (during, steady2) = rest.split_at_mut(adapt_n);
        let windows = t
            .timeline
            .iter()
            .map(|w| Window {
                ms: w.ms,
                accesses: w.accesses,
                app_bytes: w.app_bytes,
                h_a: w.h_a,
                h_k: w.h_k,
                le_model_ns: w.le_model_ns,
                le_measured_ns: Some(w.le_measured_ns).filter(|x| x.is_finite()),
                state: w.state,
            })
            .collect();
        let controller = Controller {
            rounds: t.rounds,
            adoptions: t.adoptions,
            reverts: t.reverts,
            restarts: t.restarts,
            ghost_bytes_peak: t.ghost_bytes_peak,
            last_round: t.last_round.clone(),
            le_predicted_ns: t.le_predicted_ns,
            round_log: rows::round_log(&t),
        };
        let mut row = DynamicRow {
            bench: "cache-kv-dynamic",
            env: c.env.clone(),
            sizing: sizing.clone(),
            scenario: format!("{} head -> {} tail", phases[0], phases[1]),
            ratio,
            compression: compression.to_string(),
            alpha: ds.disk_bytes as f64 / ds.logical_bytes as f64,
            memory_bytes: m,
            sample_inv: c.sample_inv,
            c_a_ns: c_a,
            c_k_ns: c_k,
            phase_reads,
            switch_ms,
            converged_ms,
            switch_accesses,
            converged_accesses,
            final_app_bytes: t.app_bytes,
            latency_phase1: percentiles(p1lat),
            latency_adapting: percentiles(during),
            latency_phase2_after: percentiles(steady2),
            controller: vec![controller],
            timeline: Timeline::Summary(format!(
                "{} windows (see --timeline file)",
                t.timeline.len()
            )),
        };
        // The results row names the windows; the --timeline file holds them.
        emit(sink, &row)?;
        row.timeline = Timeline::Windows(windows);
        timeline_rows.push(row);
        drop(db);
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(p) = timeline_out {
        let text = serde_json::to_string(&timeline_rows).unwrap_or_default();
        std::fs::write(p, text).map_err(|source| BenchError::Io {
            path: p.to_path_buf(),
            source,
        })?;
    }
    Ok(())
}

/// The sampling ablation (see [`Mode::Ablation`]): one row per 1/R with the first round's
/// predictions next to the statically measured hit ratios of the same candidates.
fn ablation(
    c: &Common,
    sink: &Sink,
    pattern_name: &str,
    ratio: f64,
    compression: &str,
    sample_invs: &str,
    (reads, warmup, adapt_max): (u64, u64, u64),
) -> Result<()> {
    let invs: Vec<u32> = split(sample_invs)
        .iter()
        .map(|x| {
            x.parse::<u32>()
                .ok()
                .filter(|&v| v >= 1)
                .ok_or_else(|| BenchError::Arg(format!("bad 1/R `{x}` (an integer >= 1)")))
        })
        .collect::<Result<_>>()?;
    let dist = pattern(pattern_name)?;
    let disk = c.env == "disk";
    let c_k = device_cost(c, 2048)?;
    let ds = load(c, ratio, compression)?;
    let c_a = app_miss_cost(c, &ds, &dist)?;
    let costs = (c_a, c_k);
    // Predictions per 1/R: the first round of an adaptive run.
    let mut predicted = Vec::new();
    for &inv in &invs {
        let mut ci = c.clone();
        ci.sample_inv = inv;
        let mut opts = base_options(&ci, &ds.compression);
        opts.push(("cache_sizing".into(), "adaptive".into()));
        opts.push(("cache_miss_costs".into(), format!("{c_a:.0}:{c_k:.0}")));
        let db = open(&ds, &opts)?;
        let mut s = Sampler::new(&dist, ds.keys, c.seed)?;
        let n = read_n(&db, &ds, &mut s, adapt_max, |db| Ok(tiers(db)?.rounds >= 1))?;
        let t = tiers(&db)?;
        note!(
            "  1/R = {inv}: first round after {n} reads, {} candidates, ghost peak {} B",
            t.last_round.len(),
            t.ghost_bytes_peak
        );
        predicted.push((inv, n, t));
    }
    // The candidates (from the first run; every run has the same list).
    let cands: Vec<u64> = predicted
        .first()
        .map(|p| p.2.last_round.iter().map(|x| x.0).collect())
        .unwrap_or_default();
    let mut measured = Vec::new();
    for &m_a in &cands {
        let (sp, _, _) = run_config(
            c,
            &ds,
            &dist,
            &m_a.to_string(),
            costs,
            reads,
            warmup,
            adapt_max,
        )?;
        note!(
            "  static {} MiB: H_a {:.3} H_k {:.3}",
            m_a >> 20,
            sp.h_a(),
            sp.h_k()
        );
        measured.push(MeasuredCandidate {
            app_bytes: m_a,
            h_a: sp.h_a(),
            h_k: sp.h_k(),
            le_ns: sp.le(c_a, c_k),
            measured: sp.row(c_a, c_k, disk),
        });
    }
    let le_meas: Vec<f64> = measured.iter().map(|m| m.le_ns).collect();
    let best_meas = le_meas.iter().copied().fold(f64::INFINITY, f64::min);
    for (inv, n, t) in &predicted {
        let pred = &t.last_round;
        let mut err = (0.0f64, 0.0f64, 0.0f64, 0usize);
        for (p, m) in pred.iter().zip(&measured) {
            let (mh_a, mh_k, mle) = (m.h_a, m.h_k, m.le_ns);
            err.0 += (p.1 - mh_a).abs();
            err.1 += (p.2 - mh_k).abs();
            err.2 += (p.3 - mle).abs() / mle.max(1.0);
            err.3 += 1;
        }
        let k = err.3.max(1) as f64;
        let chosen = pred
            .iter()
            .enumerate()
            .min_by(|a, b| a.1 .3.total_cmp(&b.1 .3))
            .map_or(0, |x| x.0);
        let predicted = pred.iter().map(|p| Predicted {
            app_bytes: p.0,
            h_a: p.1,
            h_k: p.2,
            le_ns: p.3,
        });
        emit(
            sink,
            &AblationRow {
                bench: "cache-kv-ablation",
                env: &c.env,
                pattern: pattern_name,
                ratio,
                compression,
                alpha: ds.disk_bytes as f64 / ds.logical_bytes as f64,
                memory_bytes: c.memory_mib << 20,
                c_a_ns: c_a,
                c_k_ns: c_k,
                sample_inv: *inv,
                round_reads: *n,
                round_log: rows::round_log(t),
                ghost_bytes_peak: t.ghost_bytes_peak,
                predicted: predicted.collect(),
                measured: &measured,
                mean_abs_err_h_a: err.0 / k,
                mean_abs_err_h_k: err.1 / k,
                mean_rel_err_le: err.2 / k,
                chosen_app_bytes: pred.get(chosen).map(|p| p.0),
                chosen_over_best_measured_le: le_meas.get(chosen).map(|l| l / best_meas),
            },
        )?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn overhead(
    c: &Common,
    sink: &Sink,
    pattern_name: &str,
    ratio: f64,
    compression: &str,
    repeat: u32,
    reads: u64,
) -> Result<()> {
    let dist = pattern(pattern_name)?;
    let ds = load(c, ratio, compression)?;
    let c_a = app_miss_cost(c, &ds, &dist)?;
    let costs = format!("{c_a:.0}:16000");
    // Where adaptive settles (one run), then adaptive vs static at that M_a, interleaved.
    let settle = |sizing: &str| -> Result<(DB, Sampler, u64)> {
        let mut opts = base_options(c, &ds.compression);
        opts.push(("cache_sizing".into(), sizing.into()));
        opts.push(("cache_miss_costs".into(), costs.clone()));
        let db = open(&ds, &opts)?;
        let s = Sampler::new(&dist, ds.keys, c.seed)?;
        Ok((db, s, 0))
    };
    let mut rows = Vec::new();
    for rep in 0..repeat {
        // Adaptive: segments during the first round, then after it settled.
        let (db, mut s, _) = settle("adaptive")?;
        let mut in_round = Vec::new();
        loop {
            let a = snap(&db)?;
            let busy_a = a.t.state == "adapting" && a.t.rounds == 0;
            let n = read_n(&db, &ds, &mut s, POLL_READS, |_| Ok(false))?;
            let b = snap(&db)?;
            let busy_b = b.t.state == "adapting" && b.t.rounds == 0;
            if busy_a && busy_b {
                in_round.push(span(&a, &b, n));
            }
            if b.t.rounds >= 1 && b.t.state == "stable" {
                break;
            }
            if b.t.accesses_recorded > 40_000_000 {
                break;
            }
        }
        let settled_app = tiers(&db)?.app_bytes;
        let a = snap(&db)?;
        let n = read_n(&db, &ds, &mut s, reads, |_| Ok(false))?;
        let b = snap(&db)?;
        let outside = span(&a, &b, n);
        let ghost_peak = b.t.ghost_bytes_peak;
        drop(db);
        // Static at the same M_a: warm, then measure the same number of reads.
        let (db, mut s, _) = settle(&settled_app.to_string())?;
        read_n(&db, &ds, &mut s, reads, |_| Ok(false))?;
        let a = snap(&db)?;
        let n = read_n(&db, &ds, &mut s, reads, |_| Ok(false))?;
        let b = snap(&db)?;
        let fixed = span(&a, &b, n);
        drop(db);
        let sum = in_round.iter().fold(Span::default(), |mut acc, x| {
            acc.reads += x.reads;
            acc.cpu_ns += x.cpu_ns;
            acc.proc_cpu_ns += x.proc_cpu_ns;
            acc.wall_ns += x.wall_ns;
            acc.app_hits += x.app_hits;
            acc.second_hits += x.second_hits;
            acc.device_reads += x.device_reads;
            acc
        });
        let per = |s: &Span, f: fn(&Span) -> u64| f(s) as f64 / s.reads.max(1) as f64;
        let segment = |s: &Span| Segment {
            reads: s.reads,
            cpu_ns_per_read: per(s, |s| s.cpu_ns),
            process_cpu_ns_per_read: per(s, |s| s.proc_cpu_ns),
            h_a: s.h_a(),
            h_k: s.h_k(),
        };
        let row = OverheadRepeat {
            rep,
            settled_app_bytes: settled_app,
            ghost_bytes_peak: ghost_peak,
            ghost_peak_fraction_of_m: ghost_peak as f64 / (c.memory_mib << 20) as f64,
            adaptive_in_round: InRound {
                reads: sum.reads,
                cpu_ns_per_read: per(&sum, |s| s.cpu_ns),
                process_cpu_ns_per_read: per(&sum, |s| s.proc_cpu_ns),
                block_reads_per_read: sum.blocks() as f64 / sum.reads.max(1) as f64,
            },
            adaptive_outside: segment(&outside),
            static_same_split: segment(&fixed),
        };
        note!("{}", to_json(&row));
        rows.push(row);
    }
    // Medians over the repeats (a non-finite value, which a row writes as null, is left out).
    let med = |f: fn(&OverheadRepeat) -> f64| -> f64 {
        let mut v: Vec<f64> = rows.iter().map(f).filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let fixed = med(|r| r.static_same_split.process_cpu_ns_per_read);
    let round = med(|r| r.adaptive_in_round.process_cpu_ns_per_read);
    let outside = med(|r| r.adaptive_outside.process_cpu_ns_per_read);
    emit(
        sink,
        &OverheadRow {
            bench: "cache-kv-overhead",
            env: &c.env,
            pattern: pattern_name,
            ratio,
            compression,
            memory_bytes: c.memory_mib << 20,
            sample_inv: c.sample_inv,
            repeats: rows,
            median_process_cpu_ns_per_read: MedianCpu {
                fixed,
                adaptive_in_round: round,
                adaptive_outside: outside,
            },
            overhead_in_round: round / fixed - 1.0,
            overhead_outside: outside / fixed - 1.0,
        },
    )
}

/// Arguments of the alternating overhead measurement.
struct OverheadAb<'a> {
    pattern: &'a str,
    ratio: f64,
    compression: &'a str,
    cycles: u32,
    segment_reads: u64,
    warmup: u64,
}

/// Segment kinds of the alternating measurement: A and A' hold the round (no simulation work),
/// B runs it. A' against A is the noise floor; B against A is the overhead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seg {
    A,
    A2,
    B,
}

impl Seg {
    fn name(self) -> &'static str {
        match self {
            Seg::A => "A",
            Seg::A2 => "A2",
            Seg::B => "B",
        }
    }
}

/// The six orders of (A, A', B); cycle i uses order i mod 6, so every kind sits in every
/// position equally often over a multiple of six cycles (drift and position effects cancel).
const SEG_ORDERS: [[Seg; 3]; 6] = [
    [Seg::A, Seg::A2, Seg::B],
    [Seg::B, Seg::A, Seg::A2],
    [Seg::A2, Seg::B, Seg::A],
    [Seg::A, Seg::B, Seg::A2],
    [Seg::A2, Seg::A, Seg::B],
    [Seg::B, Seg::A2, Seg::A],
];

/// Per-read costs of one segment, ns.
#[derive(Clone, Copy, Debug, Default)]
struct SegCost {
    process: f64,
    reader: f64,
    controller: f64,
}

/// Median and the 10th / 90th percentiles (nearest rank) of `v`; NaN for an empty slice.
fn spread(v: &[f64]) -> Spread {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Spread::default();
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| Some(v[((v.len() - 1) as f64 * q).round() as usize]);
    Spread {
        median: at(0.5),
        p10: at(0.1),
        p90: at(0.9),
        min: v.first().copied(),
        max: v.last().copied(),
        n: v.len(),
    }
}

/// Overhead like for like. One database at the split adaptive
/// settles at (found by an adaptive run first), warmed, then put in simulation-only mode
/// (`Controller::set_simulation_only`: nothing is ever adopted or resized). Then `cycles`
/// cycles of three equal segments of reads, in the rotating orders of [`SEG_ORDERS`]: A and A'
/// with the simulation round held (accesses skip it), B with a round running back to back.
/// The reads, the database, the split and the Tracker are the same in all three; only B
/// simulates. Per segment: process CPU (`CLOCK_PROCESS_CPUTIME_ID`: reader, controller and all),
/// the reader thread's CPU and the controller's pump CPU, per read; per cycle the relative
/// differences B/A − 1 (overhead) and A'/A − 1 (noise floor); the row reports their medians
/// and 10th-90th percentiles over the cycles, and the pooled ratios.
fn overhead_alternating(c: &Common, sink: &Sink, a: &OverheadAb<'_>) -> Result<()> {
    let dist = pattern(a.pattern)?;
    let ds = load(c, a.ratio, a.compression)?;
    let c_a = app_miss_cost(c, &ds, &dist)?;
    let costs = format!("{c_a:.0}:16000");
    let mut opts = base_options(c, &ds.compression);
    opts.push(("cache_sizing".into(), "adaptive".into()));
    opts.push(("cache_miss_costs".into(), costs.clone()));
    // Where adaptive settles.
    let settled_app = {
        let db = open(&ds, &opts)?;
        let mut s = Sampler::new(&dist, ds.keys, c.seed)?;
        read_n(&db, &ds, &mut s, 40_000_000, |db| {
            let t = tiers(db)?;
            Ok(t.rounds >= 1 && t.state == "stable")
        })?;
        tiers(&db)?.app_bytes
    };
    let db = open(&ds, &opts)?;
    let ctl = db.cache_sizing().ok_or(BenchError::NoTiers)?.clone();
    ctl.set_simulation_only(false);
    ctl.resize(settled_app);
    let mut s = Sampler::new(&dist, ds.keys, c.seed ^ 0xab)?;
    read_n(&db, &ds, &mut s, a.warmup, |_| Ok(false))?;
    let mut segs: Vec<AbSegment> = Vec::new();
    let mut cycles: Vec<[SegCost; 3]> = Vec::new();
    let load_start = crate::machine::loadavg_1m();
    for cycle in 0..a.cycles {
        let mut cost = [SegCost::default(); 3];
        for &kind in &SEG_ORDERS[cycle as usize % SEG_ORDERS.len()] {
            ctl.pump();
            ctl.set_simulation_only(kind == Seg::B);
            let (t0, p0, c0) = (
                attune_kv::env::thread_cpu_ns(),
                attune_kv::env::process_cpu_ns(),
                tiers(&db)?,
            );
            let n = read_n(&db, &ds, &mut s, a.segment_reads, |_| Ok(false))?;
            ctl.pump();
            let (t1, p1, c1) = (
                attune_kv::env::thread_cpu_ns(),
                attune_kv::env::process_cpu_ns(),
                tiers(&db)?,
            );
            let per = |x: u64| x as f64 / n.max(1) as f64;
            let sc = SegCost {
                process: per(p1.saturating_sub(p0)),
                reader: per(t1.saturating_sub(t0)),
                controller: per(c1.controller_cpu_ns.saturating_sub(c0.controller_cpu_ns)),
            };
            cost[kind as usize] = sc;
            let blocks = (c1.app_hits + c1.second_hits + c1.device_reads)
                - (c0.app_hits + c0.second_hits + c0.device_reads);
            segs.push(AbSegment {
                cycle,
                kind: kind.name(),
                reads: n,
                process_cpu_ns_per_read: sc.process,
                reader_cpu_ns_per_read: sc.reader,
                controller_cpu_ns_per_read: sc.controller,
                block_reads_per_read: per(blocks),
                h_a: per_ratio(c1.app_hits - c0.app_hits, blocks),
                rounds_finished: c1.rounds - c0.rounds,
                state_end: c1.state,
            });
        }
        cycles.push(cost);
    }
    let t = tiers(&db)?;
    let rel = |f: fn(&SegCost) -> f64, x: Seg| -> Vec<f64> {
        cycles
            .iter()
            .map(|cy| f(&cy[x as usize]) / f(&cy[Seg::A as usize]) - 1.0)
            .collect()
    };
    let pooled = |f: fn(&SegCost) -> f64, x: Seg| -> f64 {
        let sum = |k: Seg| cycles.iter().map(|cy| f(&cy[k as usize])).sum::<f64>();
        sum(x) / sum(Seg::A) - 1.0
    };
    let diff_ns = |f: fn(&SegCost) -> f64, x: Seg| -> Vec<f64> {
        cycles
            .iter()
            .map(|cy| f(&cy[x as usize]) - f(&cy[Seg::A as usize]))
            .collect()
    };
    let of_kind = |f: fn(&SegCost) -> f64, x: Seg| -> Spread {
        spread(
            &cycles
                .iter()
                .map(|cy| f(&cy[x as usize]))
                .collect::<Vec<_>>(),
        )
    };
    let metric = |f: fn(&SegCost) -> f64| Metric {
        per_read_ns: PerKind {
            a: of_kind(f, Seg::A),
            a2: of_kind(f, Seg::A2),
            b: of_kind(f, Seg::B),
        },
        overhead_b_vs_a: spread(&rel(f, Seg::B)),
        noise_a2_vs_a: spread(&rel(f, Seg::A2)),
        extra_ns_per_read_b_minus_a: spread(&diff_ns(f, Seg::B)),
        extra_ns_per_read_a2_minus_a: spread(&diff_ns(f, Seg::A2)),
        pooled_overhead: pooled(f, Seg::B),
        pooled_noise: pooled(f, Seg::A2),
    };
    let process = metric(|x| x.process);
    note!(
        "process CPU per read: overhead {} noise {}",
        to_json(&process.overhead_b_vs_a),
        to_json(&process.noise_a2_vs_a)
    );
    emit(
        sink,
        &OverheadAbRow {
            bench: "cache-kv-overhead-ab",
            env: &c.env,
            pattern: a.pattern,
            ratio: a.ratio,
            compression: a.compression,
            memory_bytes: c.memory_mib << 20,
            sample_inv: c.sample_inv,
            settled_app_bytes: settled_app,
            cycles: a.cycles,
            segment_reads: a.segment_reads,
            loadavg_1m_start: load_start,
            process_cpu: process,
            reader_cpu: metric(|x| x.reader),
            controller_cpu: metric(|x| x.controller),
            rounds_finished: t.rounds,
            ghost_bytes_peak: t.ghost_bytes_peak,
            round_log: rows::round_log(&t),
            segments: segs,
        },
    )
}

fn per_ratio(x: u64, n: u64) -> f64 {
    x as f64 / n.max(1) as f64
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_errors_not_panics() {
        assert!(pattern("hot50").is_err());
        assert!(random_fraction("snappy").is_err());
        assert!(parse_list("0.2,abc").is_err());
        assert!(parse_list("0").is_err());
        assert_eq!(parse_list("0.2, 1.0").unwrap(), vec![0.2, 1.0]);
    }

    #[test]
    fn values_are_deterministic_sized_and_compress_as_configured() {
        for (comp, lo, hi) in [("lz4", 0.40, 0.60), ("zstd", 0.15, 0.30)] {
            let rf = random_fraction(comp).unwrap();
            let mut raw = Vec::new();
            for i in 0..400u64 {
                let v = value(i, rf);
                assert_eq!(v.len(), VALUE_BYTES);
                assert_eq!(v, value(i, rf));
                raw.extend_from_slice(&key(i));
                raw.extend_from_slice(&v);
            }
            // Compress 4 KiB blocks as the engine would.
            let packed: usize = raw
                .chunks(4096)
                .map(|b| match comp {
                    "lz4" => lz4_flex::block::compress(b).len(),
                    _ => zstd::bulk::compress(b, 3).map_or(b.len(), |c| c.len()),
                })
                .sum();
            let alpha = packed as f64 / raw.len() as f64;
            assert!((lo..hi).contains(&alpha), "{comp}: alpha {alpha}");
        }
    }

    #[test]
    fn spread_of_a_known_sample_and_of_nothing() {
        let v: Vec<f64> = (0..=100).map(f64::from).rev().collect();
        let s = spread(&v);
        assert_eq!(s.median, Some(50.0));
        assert_eq!(s.p10, Some(10.0));
        assert_eq!(s.p90, Some(90.0));
        assert_eq!((s.min, s.max), (Some(0.0), Some(100.0)));
        assert_eq!(s.n, 101);
        let empty = serde_json::to_value(spread(&[f64::NAN])).unwrap();
        assert_eq!(
            empty,
            serde_json::json!({"median": null, "p10": null, "p90": null, "n": 0})
        );
    }

    #[test]
    fn every_segment_kind_sits_in_every_position_equally_often() {
        for pos in 0..3 {
            for kind in [Seg::A, Seg::A2, Seg::B] {
                let n = SEG_ORDERS.iter().filter(|o| o[pos] == kind).count();
                assert_eq!(n, 2, "kind {kind:?} at position {pos}");
            }
        }
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut v: Vec<u32> = (1..=1000).rev().collect();
        let p = percentiles(&mut v).unwrap();
        assert_eq!((p.n, p.p50, p.p99), (1000, 500, 990));
        assert_eq!(percentiles(&mut []), None);
    }
}
