//! `attune-bench`: the one benchmark harness of the repository (see `docs/bench.md`).
//!
//! Subcommands, one module each: `kv micro|ycsb|engines` (the engine and its peers), `hash`
//! (VIP hashing), `cache-sim` (Symbiosis on traces), `cache-kv` (Symbiosis in the engine),
//! `embed` (embedding-store caches), `io` (Heimdall's inference, the simulated SSD), `learn`
//! (learned-index lookups), `pipes` (Data Pipes against fio, external sorts), `ingest` (bulk
//! loading), `plush` (the Plush
//! hash table against the engines), `workload` (generator speed), `lookup-steps` (per-step lookup
//! latency; needs the `step-timing` feature), `lookup-probe` (a read-path profiling loop) and
//! `machine` (the machine description every row carries). Every subcommand takes `--out PATH`,
//! `--json` and `--no-progress` ([`attune_bench::output`]). The hidden `__child` subcommand is the
//! per-engine child process of `kv`. Exit codes: 0 success (missing peers are skipped), 1 a run
//! or an engine failed, 2 bad arguments.

use std::path::PathBuf;
use std::process::ExitCode;

use attune_bench::engine::{self, DB_BENCH};
use attune_bench::error::{BenchError, Result};
use attune_bench::machine::Machine;
use attune_bench::micro::{Micro, MicroParams};
use attune_bench::options::{parse_count, parse_size, Compression, EngineSpec, Settings};
use attune_bench::output::{command_line, Fail, OutputArgs, Sink};
use attune_bench::runner::{self, Plan, ProgressMode, Suite};
use attune_bench::ycsb::{ensure_load_first, YcsbTask, YCSB_KEYS};
use attune_bench::{
    cache_kv, cache_sim, child, dbbench, device, device_kv, embed, hash, io, learn, lookup_probe,
};
use attune_bench::{ingest, lookup_steps, merge_counters, pipes, plush, range_delete, workload};
use attune_workload::LoadOrder;
use clap::{Args, Parser, Subcommand};

/// `--engines` when none is given: Attune and every in-process peer.
const DEFAULT_ENGINES: &str = "attune,rocksdb,leveldb,wiredtiger,lmdb";

#[derive(Parser)]
#[command(
    name = "attune-bench",
    version,
    about = "The benchmark harness: Attune and its peers on one workload stream, and every \
             component's benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The key-value engine beside RocksDB, LevelDB, WiredTiger, LMDB and db_bench.
    Kv {
        #[command(subcommand)]
        cmd: Box<KvCmd>,
    },
    /// VIP hashing vs chained hashing vs std HashMap: roofline, adaptive, join (`--help`).
    #[command(disable_help_flag = true)]
    Hash(Raw),
    /// Data Pipes: `io` (mechanisms against fio), `sort` (external sorts at one memory limit).
    #[command(disable_help_flag = true)]
    Pipes(Raw),
    /// Bulk loading: puts, write batches and external tables + ingest, Attune and RocksDB
    /// (`--help`).
    #[command(disable_help_flag = true)]
    Ingest(Raw),
    /// Symbiosis and the replacement policies on simulated traces (`--help`).
    #[command(disable_help_flag = true)]
    CacheSim(Raw),
    /// Embedding-store caches on the Criteo-like workload: hit rates, L1 latency (`--help`).
    #[command(disable_help_flag = true)]
    Embed(Raw),
    /// Symbiosis in the engine: sweep, dynamic, overhead, ablation (`--help`).
    #[command(disable_help_flag = true)]
    CacheKv(Raw),
    /// Learned-index lookups against binary search over attune-workload's key sets (`--help`).
    #[command(disable_help_flag = true)]
    Learn(Raw),
    /// Nanoseconds per generated item of every attune-workload generator (`--help`).
    #[command(disable_help_flag = true)]
    Workload(Raw),
    /// Range deletions: one tombstone against a delete per key, and its read cost (`--help`).
    #[command(disable_help_flag = true)]
    RangeDelete(Raw),
    /// Counters by `add` merges against get+put read-modify-write (`--help`).
    #[command(disable_help_flag = true)]
    MergeCounters(Raw),
    /// Plush against Attune's LSM, RocksDB and LMDB on 8-byte records (`--help`).
    #[command(disable_help_flag = true)]
    Plush(Raw),
    /// Heimdall's quantised inference (P = 1..9), LinnOS, and the simulated SSD (`--help`).
    #[command(disable_help_flag = true)]
    Io(Raw),
    /// The SSD profiler on planted simulated devices and the I/O rule checker (`--help`).
    #[command(disable_help_flag = true)]
    Device(Raw),
    /// Attune on the simulated SSD: fillrandom tuned by the profile, YCSB E with prefetchers (`--help`).
    #[command(disable_help_flag = true)]
    DeviceKv(Raw),
    /// Point-lookup latency per step, learned indexes off and on (`step-timing` builds only).
    #[command(disable_help_flag = true)]
    LookupSteps(Raw),
    /// Random gets on a compacted database, learned indexes off and on, for profiling.
    #[command(disable_help_flag = true)]
    LookupProbe(Raw),
    /// Describe this machine and build as every results row records it.
    Machine {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    #[command(name = "__child", hide = true)]
    Child { job: String },
}

#[derive(Subcommand)]
enum KvCmd {
    /// db_bench-style micro benchmarks (fillseq, fillrandom, overwrite, readrandom, readseq, seekrandom).
    Micro(MicroArgs),
    /// YCSB core workloads (load, then a..f) from attune-workload.
    Ycsb(YcsbArgs),
    /// List the engines and whether each can run on this machine.
    Engines {
        #[command(flatten)]
        output: OutputArgs,
    },
}

/// The arguments of a subcommand that parses its own (the output flags are taken out first).
#[derive(Args)]
struct Raw {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

#[derive(Args)]
struct Common {
    /// Engines, comma-separated; each `name` or `name:key=value;key=value`. The default is Attune
    /// and every peer; a peer whose library is missing here is skipped with one line.
    #[arg(long, default_value = DEFAULT_ENGINES)]
    engines: String,
    /// Keys in the key space (db_bench --num / YCSB recordcount), e.g. 1000000 or 1M.
    #[arg(long, default_value = "100000")]
    records: String,
    /// Operations per read benchmark and thread (db_bench --reads) / YCSB operationcount.
    #[arg(long)]
    operations: Option<String>,
    /// Block compression: none, snappy, lz4, zstd.
    #[arg(long, default_value = "none")]
    compression: String,
    /// Block cache bytes (e.g. 8MiB, 1GiB).
    #[arg(long, default_value = "8MiB")]
    cache_size: String,
    /// Write buffer (memtable) bytes.
    #[arg(long, default_value = "64MiB")]
    write_buffer_size: String,
    /// Sync every write to the device.
    #[arg(long)]
    sync: bool,
    /// Client threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Engine background threads (flush/compaction), where the engine has the knob.
    #[arg(long, default_value_t = 2)]
    background_threads: usize,
    /// Base seed of every random stream.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Unrecorded operations per thread before each read/run phase.
    #[arg(long, default_value = "0")]
    warmup_ops: String,
    /// Drop the database files from the page cache before each phase.
    #[arg(long)]
    cold: bool,
    /// Run each engine process inside a cgroup v2 with this memory.max.
    #[arg(long)]
    memory_limit: Option<String>,
    /// Where the databases go (default: a fresh directory under the system temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Keep the databases afterwards.
    #[arg(long)]
    keep: bool,
    /// Run every engine this many times, interleaved (rows carry `repeat`).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
struct MicroArgs {
    /// Benchmarks in order, comma-separated.
    #[arg(
        long,
        default_value = "fillseq,fillrandom,readrandom,readseq,seekrandom,overwrite"
    )]
    benchmarks: String,
    /// Key bytes.
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    /// Value bytes.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Writes per write batch (1 = plain puts).
    #[arg(long, default_value_t = 1)]
    batch_size: usize,
    /// Entries read after each seekrandom seek (db_bench --seek_nexts; 10 or 100 = range scans).
    #[arg(long, default_value_t = 0)]
    seek_nexts: u64,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct YcsbArgs {
    /// Phases in order: load, then workload letters (a `load` is added first when missing).
    #[arg(long, default_value = "load,a,b,c,f,d,e")]
    workloads: String,
    /// Key set: `ycsb` (YCSB's hashed key numbers) or an attune-workload set (linear, seg1, ...).
    #[arg(long, default_value = YCSB_KEYS)]
    key_set: String,
    /// Request distribution override, e.g. zipfian:0.99, uniform, latest (default: the workload's).
    #[arg(long)]
    distribution: Option<String>,
    /// Load order of a key set: `sequential` (ascending) or `random[:SEED]` (default seed:
    /// --seed).
    #[arg(long, default_value = "sequential")]
    load_order: String,
    /// YCSB fieldcount.
    #[arg(long, default_value_t = 10)]
    field_count: u32,
    /// YCSB fieldlength (bytes).
    #[arg(long, default_value_t = 100)]
    field_length: u32,
    #[command(flatten)]
    common: Common,
}

fn settings(c: &Common) -> Result<Settings> {
    if c.threads == 0 {
        return Err(BenchError::invalid("--threads", "must be at least 1"));
    }
    if c.background_threads == 0 {
        return Err(BenchError::invalid(
            "--background-threads",
            "must be at least 1",
        ));
    }
    Ok(Settings {
        cache_bytes: parse_size(&c.cache_size)?,
        write_buffer_bytes: parse_size(&c.write_buffer_size)?,
        compression: Compression::parse(&c.compression)?,
        sync: c.sync,
        threads: c.threads,
        background_threads: c.background_threads,
        extra: Default::default(),
    })
}

fn plan(common: &Common, suite: Suite) -> Result<Plan> {
    if common.repeat == 0 || common.repeat > 100 {
        return Err(BenchError::invalid("--repeat", "must be between 1 and 100"));
    }
    let engines = EngineSpec::parse_list(&common.engines)?;
    for e in &engines {
        if e.name != DB_BENCH {
            engine::find(&e.name)?;
        }
    }
    let dir = common.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("attune-bench-{}", std::process::id()))
    });
    Ok(Plan {
        suite,
        engines,
        base: settings(common)?,
        dir,
        keep: common.keep || common.dir.is_some(),
        memory_limit: common.memory_limit.as_deref().map(parse_size).transpose()?,
        progress: ProgressMode::parse(
            common
                .output
                .progress_mode()
                .map_err(|e| BenchError::invalid("--progress", e))?,
        )?,
        out: common.output.out.clone(),
        json_stdout: common.output.json,
        command: command_line(),
        repeat: common.repeat,
    })
}

fn run_plan(plan: Plan) -> Result<ExitCode> {
    let (rows, failed) = runner::run(&plan)?;
    if let Some(p) = &plan.out {
        eprintln!(
            "attune-bench: {} rows written to {}",
            rows.len(),
            p.display()
        );
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn micro(a: &MicroArgs) -> Result<ExitCode> {
    let c = &a.common;
    let benches = a
        .benchmarks
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Micro::parse)
        .collect::<Result<Vec<_>>>()?;
    let records = parse_count("--records", &c.records)?;
    let params = MicroParams {
        records,
        operations: match &c.operations {
            Some(o) => parse_count("--operations", o)?,
            None => records,
        },
        key_size: a.key_size,
        value_size: a.value_size,
        batch_size: a.batch_size,
        seek_nexts: a.seek_nexts,
        seed: c.seed,
        warmup_ops: parse_count("--warmup-ops", &c.warmup_ops)?,
        cold: c.cold,
        threads: c.threads,
    };
    run_plan(plan(c, Suite::Micro { benches, params })?)
}

fn ycsb(a: &YcsbArgs) -> Result<ExitCode> {
    let c = &a.common;
    let records = parse_count("--records", &c.records)?;
    let operations = match &c.operations {
        Some(o) => parse_count("--operations", o)?,
        None => records,
    };
    let warmup_ops = parse_count("--warmup-ops", &c.warmup_ops)?;
    let load_order = match a
        .load_order
        .parse::<LoadOrder>()
        .map_err(|e| BenchError::invalid("--load-order", e.to_string()))?
    {
        LoadOrder::Sequential => None,
        LoadOrder::Random(0) if !a.load_order.contains(':') => Some(c.seed),
        LoadOrder::Random(seed) => Some(seed),
    };
    if load_order.is_some() && a.key_set == YCSB_KEYS {
        return Err(BenchError::invalid(
            "--load-order",
            "applies to attune-workload key sets; YCSB's hashed keys load in hash order",
        ));
    }
    let mut tasks = a
        .workloads
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|w| {
            Ok(YcsbTask {
                workload: YcsbTask::parse_workload(w)?,
                records,
                operations,
                distribution: a.distribution.clone(),
                key_set: a.key_set.clone(),
                field_count: a.field_count,
                field_length: a.field_length,
                seed: c.seed,
                threads: c.threads,
                warmup_ops,
                cold: c.cold,
                load_order,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let load_added = ensure_load_first(&mut tasks);
    if load_added {
        eprintln!(
            "attune-bench: note: `{}` needs a loaded database: running `load` ({records} records) \
             first (its rows carry \"load_added\": true)",
            tasks[1].workload
        );
    }
    run_plan(plan(c, Suite::Ycsb { tasks, load_added })?)
}

/// One row of `kv engines`.
#[derive(serde::Serialize)]
struct EngineRow<'a> {
    engine: &'a str,
    about: &'a str,
    available: bool,
    reason: Option<String>,
}

fn engines(output: &OutputArgs) -> std::result::Result<ExitCode, Fail> {
    let sink = Sink::new(output, command_line());
    let mut list: Vec<(&str, &str, std::result::Result<(), String>)> = engine::ENGINES
        .iter()
        .map(|k| (k.name, k.about, (k.probe)().map_err(|e| e.to_string())))
        .collect();
    list.push((
        DB_BENCH,
        "RocksDB's own db_bench tool (rocksdb-tools)",
        dbbench::probe().map_err(|e| e.to_string()),
    ));
    for (name, about, ok) in list {
        if sink.human() {
            match &ok {
                Ok(()) => println!("{name:<12} available    {about}"),
                Err(e) => println!("{name:<12} unavailable  {e}"),
            }
        }
        if sink.path().is_some() || !sink.human() {
            sink.row(&EngineRow {
                engine: name,
                about,
                available: ok.is_ok(),
                reason: ok.err(),
            })?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn machine(json: bool) -> ExitCode {
    let m = Machine::current();
    if json {
        match serde_json::to_string(&m) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("attune-bench machine: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        let mem = m
            .mem_bytes
            .map_or("unknown".into(), |b| format!("{} MiB", b >> 20));
        println!("cpu       {} ({} logical CPUs)", m.cpu, m.nproc);
        println!("memory    {mem}");
        println!("kernel    {}", m.kernel);
        println!("commit    {}", m.git_commit);
        println!("rustc     {}", m.rustc);
        println!("features  {}", m.build_features.join(","));
    }
    ExitCode::SUCCESS
}

/// Runs a subcommand that parses its own arguments: the output flags are taken out here, the
/// rest goes to `run`.
fn raw(
    name: &str,
    a: &Raw,
    run: fn(Vec<String>, &Sink) -> std::result::Result<(), Fail>,
) -> ExitCode {
    let r = OutputArgs::split(a.args.clone())
        .map_err(Fail::Usage)
        .and_then(|(o, rest)| run(rest, &Sink::new(&o, command_line())));
    fail_code(name, r.map(|_| ExitCode::SUCCESS))
}

fn fail_code(name: &str, r: std::result::Result<ExitCode, Fail>) -> ExitCode {
    match r {
        Ok(c) => c,
        Err(Fail::Usage(e)) => {
            eprintln!("attune-bench {name}: {e}");
            ExitCode::from(2)
        }
        Err(Fail::Run(e)) => {
            eprintln!("attune-bench {name}: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match &cli.cmd {
        Cmd::Kv { cmd } => match cmd.as_ref() {
            KvCmd::Micro(a) => micro(a),
            KvCmd::Ycsb(a) => ycsb(a),
            KvCmd::Engines { output } => return fail_code("kv engines", engines(output)),
        },
        Cmd::Hash(a) => return raw("hash", a, hash::run),
        Cmd::Pipes(a) => return raw("pipes", a, pipes::run),
        Cmd::Ingest(a) => return raw("ingest", a, ingest::run),
        Cmd::CacheSim(a) => return raw("cache-sim", a, cache_sim::run),
        Cmd::Embed(a) => return raw("embed", a, embed::run),
        Cmd::CacheKv(a) => return raw("cache-kv", a, cache_kv::run),
        Cmd::Learn(a) => return raw("learn", a, learn::run),
        Cmd::Workload(a) => return raw("workload", a, workload::run),
        Cmd::RangeDelete(a) => return raw("range-delete", a, range_delete::run),
        Cmd::MergeCounters(a) => return raw("merge-counters", a, merge_counters::run),
        Cmd::Plush(a) => return raw("plush", a, plush::run),
        Cmd::Io(a) => return raw("io", a, io::run),
        Cmd::Device(a) => return raw("device", a, device::run),
        Cmd::DeviceKv(a) => return raw("device-kv", a, device_kv::run),
        Cmd::LookupSteps(a) => return raw("lookup-steps", a, lookup_steps::run),
        Cmd::LookupProbe(a) => return raw("lookup-probe", a, lookup_probe::run),
        Cmd::Machine { json } => return machine(*json),
        Cmd::Child { job } => serde_json::from_str::<child::Job>(job)
            .map_err(BenchError::from)
            .and_then(|j| child::run(&j))
            .map(|_| ExitCode::SUCCESS),
    };
    match r {
        Ok(c) => c,
        Err(e) => {
            eprintln!("attune-bench: error: {e}");
            match e {
                BenchError::InvalidArgument { .. }
                | BenchError::UnknownEngine { .. }
                | BenchError::UnknownWorkload { .. } => ExitCode::from(2),
                _ => ExitCode::from(1),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn engines_default_to_attune_and_every_peer() {
        for verb in ["micro", "ycsb"] {
            let cli = Cli::try_parse_from(["attune-bench", "kv", verb]).unwrap();
            let common = match &cli.cmd {
                Cmd::Kv { cmd } => match cmd.as_ref() {
                    KvCmd::Micro(a) => &a.common,
                    KvCmd::Ycsb(a) => &a.common,
                    KvCmd::Engines { .. } => unreachable!(),
                },
                _ => unreachable!(),
            };
            let names: Vec<String> = EngineSpec::parse_list(&common.engines)
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect();
            assert_eq!(names.first().map(String::as_str), Some("attune"), "{verb}");
            // fjall is a peer of `plush` only (behind a cargo feature), not of `kv`.
            let every: Vec<&str> = engine::ENGINES
                .iter()
                .map(|k| k.name)
                .filter(|&n| n != attune_bench::engines::fjall::NAME)
                .collect();
            assert_eq!(names, every, "{verb}");
        }
    }

    #[test]
    fn every_subcommand_takes_the_output_flags() {
        for verb in ["micro", "ycsb", "engines"] {
            let argv = [
                "attune-bench",
                "kv",
                verb,
                "--out",
                "x.jsonl",
                "--json",
                "--no-progress",
            ];
            assert!(Cli::try_parse_from(argv).is_ok(), "kv {verb}");
        }
        for verb in [
            "hash",
            "cache-sim",
            "embed",
            "cache-kv",
            "learn",
            "workload",
            "io",
            "device",
            "device-kv",
            "lookup-steps",
            "plush",
            "range-delete",
            "merge-counters",
        ] {
            let cli = Cli::try_parse_from(["attune-bench", verb, "--json", "--help"]).unwrap();
            let raw = match &cli.cmd {
                Cmd::Hash(r)
                | Cmd::CacheSim(r)
                | Cmd::Embed(r)
                | Cmd::CacheKv(r)
                | Cmd::Learn(r)
                | Cmd::Workload(r)
                | Cmd::RangeDelete(r)
                | Cmd::MergeCounters(r)
                | Cmd::Io(r)
                | Cmd::Device(r)
                | Cmd::DeviceKv(r)
                | Cmd::LookupSteps(r)
                | Cmd::Plush(r) => r,
                _ => unreachable!(),
            };
            assert_eq!(raw.args, ["--json", "--help"], "{verb}");
        }
    }
}
