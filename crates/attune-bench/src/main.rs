//! `attune-bench`: the command line of the benchmark harness (see `docs/bench.md`).
//!
//! Subcommands: `micro` (db_bench-style benchmarks), `ycsb` (YCSB A–F), `engines` (what can run
//! here). The hidden `__child` subcommand is the per-engine child process. Exit codes: 0 all
//! engines ran (missing peers are skipped), 1 an engine failed, 2 bad arguments.

use std::path::PathBuf;
use std::process::ExitCode;

use attune_bench::engine::{self, DB_BENCH};
use attune_bench::error::{BenchError, Result};
use attune_bench::micro::{Micro, MicroParams};
use attune_bench::options::{parse_count, parse_size, Compression, EngineSpec, Settings};
use attune_bench::runner::{self, Plan, ProgressMode, Suite};
use attune_bench::ycsb::{ensure_load_first, YcsbTask, YCSB_KEYS};
use attune_bench::{child, dbbench};
use attune_workload::LoadOrder;
use clap::{Args, Parser, Subcommand};

/// `--engines` when none is given: Attune and every in-process peer.
const DEFAULT_ENGINES: &str = "attune,rocksdb,leveldb,wiredtiger,lmdb";

#[derive(Parser)]
#[command(
    name = "attune-bench",
    version,
    about = "Drive Attune and its peers with one workload stream"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// db_bench-style micro benchmarks (fillseq, fillrandom, overwrite, readrandom, readseq, seekrandom).
    Micro(MicroArgs),
    /// YCSB core workloads (load, then a..f) from attune-workload.
    Ycsb(YcsbArgs),
    /// List the engines and whether each can run on this machine.
    Engines {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    #[command(name = "__child", hide = true)]
    Child { job: String },
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
    /// Write result rows as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Run every engine this many times, interleaved (rows carry `repeat`).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Progress display: auto, bar, lines, none.
    #[arg(long, default_value = "auto")]
    progress: String,
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

fn command_line() -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(first) = args.first_mut() {
        *first = "attune-bench".to_string();
    }
    args.iter()
        .map(|a| {
            if a.chars()
                .any(|c| c.is_whitespace() || ";&|<>'\"$".contains(c))
            {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
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
        progress: ProgressMode::parse(&common.progress)?,
        json: common.json.clone(),
        command: command_line(),
        repeat: common.repeat,
    })
}

fn run_plan(plan: Plan) -> Result<ExitCode> {
    let (rows, failed) = runner::run(&plan)?;
    if let Some(p) = &plan.json {
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

fn engines(json: bool) -> ExitCode {
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
        if json {
            let v = serde_json::json!({"engine": name, "about": about, "available": ok.is_ok(), "reason": ok.err()});
            println!("{v}");
        } else {
            match ok {
                Ok(()) => println!("{name:<12} available    {about}"),
                Err(e) => println!("{name:<12} unavailable  {e}"),
            }
        }
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match &cli.cmd {
        Cmd::Micro(a) => micro(a),
        Cmd::Ycsb(a) => ycsb(a),
        Cmd::Engines { json } => Ok(engines(*json)),
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
            let cli = Cli::try_parse_from(["attune-bench", verb]).unwrap();
            let common = match &cli.cmd {
                Cmd::Micro(a) => &a.common,
                Cmd::Ycsb(a) => &a.common,
                _ => unreachable!(),
            };
            let names: Vec<String> = EngineSpec::parse_list(&common.engines)
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect();
            assert_eq!(names.first().map(String::as_str), Some("attune"), "{verb}");
            let every: Vec<&str> = engine::ENGINES.iter().map(|k| k.name).collect();
            assert_eq!(names, every, "{verb}");
        }
    }
}
