//! The parent side: validates everything, then runs each engine's phases in child processes (or
//! `db_bench` for the `db_bench` pseudo-engine), turns what they measured into result rows, writes
//! them as JSON lines and shows progress.
//!
//! Thread-safety: single-threaded orchestration; children run one at a time so engines never
//! compete for the machine. Invariants: no child starts before every engine spec, benchmark name
//! and parameter has been checked; an engine whose library is missing is skipped with one line;
//! a failing or crashing child ends only that engine's remaining phases.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::cgroup::Limit;
use crate::child::{Job, Latency, Measured, Task};
use crate::dbbench;
use crate::engine::{self, DB_BENCH};
use crate::error::{BenchError, Result};
use crate::machine::Machine;
use crate::metrics;
use crate::micro::{self, Micro, MicroParams};
use crate::options::{Compression, EngineSpec, Settings};
use crate::ycsb::YcsbTask;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar on a terminal, nothing otherwise.
    Auto,
    /// Always a bar (indicatif).
    Bar,
    /// `PROGRESS {json}` lines on stderr, for the Python front's tqdm.
    Lines,
    /// Nothing.
    None,
}

impl ProgressMode {
    /// Parses `auto|bar|lines|none`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(ProgressMode::Auto),
            "bar" => Ok(ProgressMode::Bar),
            "lines" => Ok(ProgressMode::Lines),
            "none" => Ok(ProgressMode::None),
            o => Err(BenchError::invalid(
                "--progress",
                format!("`{o}`; valid: auto, bar, lines, none"),
            )),
        }
    }
}

/// The work of one run.
#[derive(Debug, Clone)]
pub enum Suite {
    /// Micro benchmarks in order.
    Micro {
        /// Benchmarks.
        benches: Vec<Micro>,
        /// Shared parameters.
        params: MicroParams,
    },
    /// YCSB phases in order.
    Ycsb {
        /// One task per phase.
        tasks: Vec<YcsbTask>,
        /// Whether the first task is a `load` the harness added (see
        /// [`crate::ycsb::ensure_load_first`]); its row carries `"load_added": true`.
        load_added: bool,
    },
}

/// One result row (one JSON line).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    /// The engine entry exactly as given.
    pub engine: String,
    /// The benchmark or YCSB phase.
    pub workload: String,
    /// `micro` or `ycsb`.
    pub suite: String,
    /// Operations measured.
    pub ops: u64,
    /// Seconds measured.
    pub seconds: f64,
    /// Throughput.
    pub ops_per_sec: f64,
    /// Latency percentiles (microseconds).
    pub latency_us: Latency,
    /// Reads that found their key (or entries visited for scans).
    pub found: u64,
    /// Bytes the process read from storage.
    pub bytes_read: Option<u64>,
    /// Bytes the process wrote to storage.
    pub bytes_written: Option<u64>,
    /// Key + value bytes the workload wrote.
    pub user_bytes_written: u64,
    /// `bytes_written / user_bytes_written` (write phases only).
    pub write_amp: Option<f64>,
    /// `disk_bytes / logical_bytes`.
    pub space_amp: Option<f64>,
    /// Allocated bytes of the database directory after the phase.
    pub disk_bytes: u64,
    /// Live keys × (key + value bytes) after the phase.
    pub logical_bytes: u64,
    /// Peak RSS of the engine's process.
    pub peak_rss_bytes: Option<u64>,
    /// CPU seconds of the engine's process during the phase.
    pub cpu_seconds: f64,
    /// CPU seconds of the client threads in the measured window: the foreground work, without
    /// the engine's background threads (flush, compaction, learning). Null for db_bench rows.
    #[serde(default)]
    pub client_cpu_seconds: Option<f64>,
    /// Seconds the client threads spent runnable but waiting for a CPU in the measured window,
    /// summed over threads (from `/proc/thread-self/schedstat`; null where it is not kept, and
    /// for db_bench rows).
    #[serde(default)]
    pub client_runqueue_seconds: Option<f64>,
    /// Throughput over the wall time less the client's mean wait for a CPU: roughly what the
    /// phase would have reached with a core free for the client. Every wait is subtracted,
    /// whichever thread held the CPU (the engine's own threads included; their work stays in
    /// `cpu_seconds`). Less sensitive to a shared machine's load than `ops_per_sec`.
    #[serde(default)]
    pub ops_per_sec_unqueued: Option<f64>,
    /// The engine's exact settings.
    pub settings: serde_json::Value,
    /// The engine's counters after the phase (Attune: learned-index statistics), or null.
    #[serde(default)]
    pub engine_stats: serde_json::Value,
    /// The workload parameters.
    pub params: serde_json::Value,
    /// `{"requested": bytes, "enforced": bool, "reason": ...}` or null.
    pub memory_limit: serde_json::Value,
    /// Which repetition (only with `--repeat` > 1).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub repeat: Option<usize>,
    /// The command line that reproduces the row.
    pub command: String,
    /// The machine (with the load average when the row was made).
    pub machine: Machine,
}

/// A run: what to do, on which engines, where, and how to report.
#[derive(Debug)]
pub struct Plan {
    /// Work.
    pub suite: Suite,
    /// Engines in order.
    pub engines: Vec<EngineSpec>,
    /// Settings shared by every engine.
    pub base: Settings,
    /// Parent directory for the databases.
    pub dir: PathBuf,
    /// Keep the databases afterwards.
    pub keep: bool,
    /// `--memory-limit`.
    pub memory_limit: Option<u64>,
    /// Progress display.
    pub progress: ProgressMode,
    /// JSON-lines output file (`--out`, appended to).
    pub out: Option<PathBuf>,
    /// Rows as JSON lines on stdout instead of the one-line summaries (`--json`).
    pub json_stdout: bool,
    /// The command line (recorded in rows).
    pub command: String,
    /// How many times to run every engine (interleaved: all engines once, then again).
    pub repeat: usize,
}

/// Live keys of a micro run, replayed from the key streams (one bit per key index).
struct KeyBits {
    bits: Vec<u64>,
    live: u64,
}

impl KeyBits {
    fn new(records: u64) -> Self {
        KeyBits {
            bits: vec![0; records.div_ceil(64) as usize],
            live: 0,
        }
    }
    fn clear(&mut self) {
        self.bits.iter_mut().for_each(|w| *w = 0);
        self.live = 0;
    }
    fn set(&mut self, i: u64) {
        if let Some(w) = self.bits.get_mut((i / 64) as usize) {
            let m = 1u64 << (i % 64);
            if *w & m == 0 {
                *w |= m;
                self.live += 1;
            }
        }
    }
}

struct Resolved {
    spec: EngineSpec,
    settings: Settings,
    /// The `--compression` asked for when the engine runs with another (it lacks the codec).
    compression_requested: Option<Compression>,
}

/// Settings of one engine entry: the spec over the shared settings, with the compression
/// replaced by the nearest codec the engine offers when the shared `--compression` names one it
/// lacks (returned second, with the warning to print). A codec the entry names itself
/// (`leveldb:compression=lz4`) is taken literally: an engine without it is an error.
fn resolve_engine(
    spec: &EngineSpec,
    base: &Settings,
    keys: &[&str],
    offered: &[Compression],
) -> Result<(Settings, Option<(Compression, String)>)> {
    let mut settings = spec.resolve(base, keys)?;
    let requested = settings.compression;
    if offered.contains(&requested) {
        return Ok((settings, None));
    }
    if spec.pairs.iter().any(|(k, _)| k == "compression") {
        return Err(BenchError::invalid(
            format!("option for engine `{}`", spec.name),
            format!(
                "compression `{}`: {} offers {}",
                requested.name(),
                spec.name,
                Compression::list(offered)
            ),
        ));
    }
    let effective = requested.closest_in(offered);
    settings.compression = effective;
    let warning = format!(
        "attune-bench: warning: {} has no {} compression (it offers {}); running it with {} \
         (its rows record compression={}, compression_requested={})",
        spec.given,
        requested.name(),
        Compression::list(offered),
        effective.name(),
        effective.name(),
        requested.name(),
    );
    Ok((settings, Some((requested, warning))))
}

/// Runs the plan; returns the rows written and how many engines failed.
pub fn run(plan: &Plan) -> Result<(Vec<Row>, usize)> {
    // 1. Check everything before any work.
    let mut resolved = Vec::new();
    let mut warnings = Vec::new();
    for spec in &plan.engines {
        let (keys, offered): (&[&str], &[Compression]) = if spec.name == DB_BENCH {
            (dbbench::KEYS, Compression::ALL)
        } else {
            let kind = engine::find(&spec.name)?;
            (kind.keys, kind.compressions)
        };
        let (settings, substituted) = resolve_engine(spec, &plan.base, keys, offered)?;
        let compression_requested = substituted.map(|(requested, warning)| {
            warnings.push(warning);
            requested
        });
        resolved.push(Resolved {
            spec: spec.clone(),
            settings,
            compression_requested,
        });
    }
    match &plan.suite {
        Suite::Micro { benches, params } => {
            params.validate()?;
            if benches.is_empty() {
                return Err(BenchError::invalid("--benchmarks", "no benchmark given"));
            }
            if !benches[0].fresh() {
                return Err(BenchError::invalid(
                    "--benchmarks",
                    format!(
                        "`{}` needs a database: start the list with fillseq or fillrandom",
                        benches[0].name()
                    ),
                ));
            }
        }
        Suite::Ycsb { tasks, .. } => {
            for t in tasks {
                t.validate()?;
            }
            if tasks.first().map(|t| t.workload.as_str()) != Some(crate::ycsb::LOAD) {
                return Err(BenchError::invalid(
                    "--workloads",
                    "the first YCSB phase must be `load`",
                ));
            }
            if resolved.iter().any(|r| r.spec.name == DB_BENCH) {
                return Err(BenchError::invalid(
                    "--engines",
                    "db_bench runs micro benchmarks only",
                ));
            }
        }
    }
    for w in &warnings {
        eprintln!("{w}");
    }
    let limit_note;
    let limit = match plan.memory_limit {
        None => {
            limit_note = serde_json::Value::Null;
            None
        }
        Some(bytes) => match Limit::create(bytes) {
            Ok(l) => {
                limit_note = json!({"requested": bytes, "enforced": true, "cgroup": l.path(), "cgroup_version": l.version()});
                Some(l)
            }
            Err(e) => {
                eprintln!("attune-bench: warning: --memory-limit not enforced: {e}");
                limit_note =
                    json!({"requested": bytes, "enforced": false, "reason": e.to_string()});
                None
            }
        },
    };
    if !plan.keep {
        interrupt::remove_on_signal(&plan.dir);
    }
    std::fs::create_dir_all(&plan.dir).map_err(|e| BenchError::io("create", &plan.dir, e))?;
    let mut out = match &plan.out {
        Some(p) => {
            if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| BenchError::io("create", parent, e))?;
            }
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p);
            Some(f.map_err(|e| BenchError::io("open", p, e))?)
        }
        None => None,
    };
    let machine = Machine::current();
    let mut rows = Vec::new();
    let mut failed = 0;
    let mut skipped = vec![false; resolved.len()];
    for rep in 0..plan.repeat.max(1) {
        for (idx, r) in resolved.iter().enumerate() {
            let probe = if r.spec.name == DB_BENCH {
                dbbench::probe()
            } else {
                engine::find(&r.spec.name).and_then(|k| (k.probe)())
            };
            if skipped[idx] {
                continue;
            }
            if let Err(e) = probe {
                eprintln!("attune-bench: skipping {}: {e}", r.spec.given);
                skipped[idx] = true;
                continue;
            }
            let db_dir = plan
                .dir
                .join(format!("{idx}-{}", sanitize(&r.spec.name)))
                .join("db");
            let result = run_engine(
                plan,
                r,
                &db_dir,
                limit.as_ref(),
                &limit_note,
                &machine,
                &mut |mut row| {
                    if plan.repeat > 1 {
                        row.repeat = Some(rep);
                    }
                    let line = serde_json::to_string(&row)?;
                    if plan.json_stdout {
                        let mut stdout = std::io::stdout().lock();
                        writeln!(stdout, "{line}")
                            .and_then(|_| stdout.flush())
                            .map_err(|e| BenchError::io("write", "stdout", e))?;
                    } else {
                        print_row(&row);
                    }
                    if let Some(f) = out.as_mut() {
                        writeln!(f, "{line}").and_then(|_| f.flush()).map_err(|e| {
                            BenchError::io("write", plan.out.clone().unwrap_or_default(), e)
                        })?;
                    }
                    rows.push(row);
                    Ok(())
                },
            );
            if let Err(e) = result {
                failed += 1;
                eprintln!("attune-bench: {} failed: {e}", r.spec.given);
            }
            if !plan.keep {
                let _ = std::fs::remove_dir_all(db_dir.parent().unwrap_or(&db_dir));
            }
        }
    }
    if !plan.keep {
        let _ = std::fs::remove_dir(&plan.dir);
    }
    Ok((rows, failed))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

fn print_row(r: &Row) {
    println!(
        "{:<28} {:<11} {:>12.0} ops/s  p50 {:>8.2}us  p99 {:>9.2}us  w-amp {:>6}  s-amp {:>6}  rss {:>6} MiB",
        r.engine,
        r.workload,
        r.ops_per_sec,
        r.latency_us.p50,
        r.latency_us.p99,
        r.write_amp.map_or("-".to_string(), |v| format!("{v:.2}")),
        r.space_amp.map_or("-".to_string(), |v| format!("{v:.2}")),
        r.peak_rss_bytes.map_or("-".to_string(), |v| format!("{}", v >> 20)),
    );
}

/// Progress display for one phase.
struct Progress {
    mode: ProgressMode,
    bar: Option<indicatif::ProgressBar>,
    engine: String,
    workload: String,
    total: u64,
}

impl Progress {
    fn new(mode: ProgressMode, engine: &str, workload: &str, total: u64) -> Self {
        let bar_on = match mode {
            ProgressMode::Bar => true,
            ProgressMode::Auto => std::io::stderr().is_terminal(),
            _ => false,
        };
        let bar = bar_on.then(|| {
            let b = indicatif::ProgressBar::new(total);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{msg:<36} [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})",
            ) {
                b.set_style(style.progress_chars("=> "));
            }
            b.set_message(format!("{engine} {workload}"));
            b
        });
        let p = Progress {
            mode,
            bar,
            engine: engine.into(),
            workload: workload.into(),
            total,
        };
        p.update(0);
        p
    }
    fn update(&self, done: u64) {
        if let Some(b) = &self.bar {
            b.set_position(done.min(self.total));
        } else if self.mode == ProgressMode::Lines {
            eprintln!(
                "PROGRESS {}",
                json!({"engine": self.engine, "workload": self.workload, "done": done.min(self.total), "total": self.total})
            );
        }
    }
    fn finish(&self) {
        self.update(self.total);
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_engine(
    plan: &Plan,
    r: &Resolved,
    db_dir: &Path,
    limit: Option<&Limit>,
    limit_note: &serde_json::Value,
    machine: &Machine,
    emit: &mut dyn FnMut(Row) -> Result<()>,
) -> Result<()> {
    match &plan.suite {
        Suite::Micro { benches, params } => {
            let mut keys = KeyBits::new(params.records);
            for &bench in benches {
                if bench.fresh() {
                    let _ = std::fs::remove_dir_all(db_dir);
                    keys.clear();
                }
                std::fs::create_dir_all(db_dir).map_err(|e| BenchError::io("create", db_dir, e))?;
                let total = params.ops_per_thread(bench) * params.threads as u64;
                let name = micro::row_name(bench, params);
                let progress = Progress::new(plan.progress, &r.spec.given, &name, total);
                let measured = if r.spec.name == DB_BENCH {
                    run_db_bench(bench, params, &r.settings, db_dir, limit)
                } else {
                    let job = Job {
                        spec: r.spec.clone(),
                        settings: r.settings.clone(),
                        dir: db_dir.to_path_buf(),
                        task: Task::Micro {
                            bench,
                            params: params.clone(),
                        },
                        cgroup_procs: limit.map(|l| l.procs_file()),
                    };
                    run_child(&job, &name, &progress)
                };
                progress.finish();
                let measured = measured?;
                for t in 0..params.threads {
                    for i in micro::written_keys(params, bench, t) {
                        keys.set(i);
                    }
                }
                let logical = keys.live * (params.key_size + params.value_size) as u64;
                let mut p = json!({
                    "records": params.records, "operations": params.operations,
                    "key_size": params.key_size, "value_size": params.value_size,
                    "batch_size": params.batch_size, "threads": params.threads,
                    "seek_nexts": params.seek_nexts,
                    "seed": params.seed, "warmup_ops": params.warmup_ops, "cold": params.cold,
                    "cold_files_dropped": measured.cold_files_dropped,
                    "compression": r.settings.compression.name(),
                });
                note_compression(&mut p, r);
                emit(make_row(
                    &r.spec.given,
                    &name,
                    "micro",
                    measured,
                    logical,
                    p,
                    limit_note,
                    &plan.command,
                    machine,
                ))?;
            }
        }
        Suite::Ycsb { tasks, load_added } => {
            let _ = std::fs::remove_dir_all(db_dir);
            std::fs::create_dir_all(db_dir).map_err(|e| BenchError::io("create", db_dir, e))?;
            let mut live = 0u64;
            for (i, t) in tasks.iter().enumerate() {
                let progress =
                    Progress::new(plan.progress, &r.spec.given, &t.workload, t.total_ops());
                let job = Job {
                    spec: r.spec.clone(),
                    settings: r.settings.clone(),
                    dir: db_dir.to_path_buf(),
                    task: Task::Ycsb(t.clone()),
                    cgroup_procs: limit.map(|l| l.procs_file()),
                };
                let measured = run_child(&job, &t.workload, &progress);
                progress.finish();
                let measured = measured?;
                live += t.inserts()?;
                let logical = live * (16 + t.record_bytes() as u64);
                let mut p = json!({
                    "records": t.records, "operations": t.operations,
                    "distribution": t.distribution_name(),
                    "load_order": t.load_order.map_or("sequential".to_string(), |s| format!("random:{s}")),
                    "key_set": t.key_set, "field_count": t.field_count, "field_length": t.field_length,
                    "threads": t.threads, "seed": t.seed, "warmup_ops": t.warmup_ops, "cold": t.cold,
                    "cold_files_dropped": measured.cold_files_dropped,
                    "compression": r.settings.compression.name(),
                });
                note_compression(&mut p, r);
                if i == 0 && *load_added {
                    p["load_added"] = json!(true);
                }
                emit(make_row(
                    &r.spec.given,
                    &t.workload,
                    "ycsb",
                    measured,
                    logical,
                    p,
                    limit_note,
                    &plan.command,
                    machine,
                ))?;
            }
        }
    }
    Ok(())
}

/// Adds `compression_requested` to a row's params when the engine ran with another codec.
fn note_compression(params: &mut serde_json::Value, r: &Resolved) {
    if let Some(c) = r.compression_requested {
        params["compression_requested"] = json!(c.name());
    }
}

#[allow(clippy::too_many_arguments)]
fn make_row(
    engine: &str,
    workload: &str,
    suite: &str,
    m: Measured,
    logical: u64,
    params: serde_json::Value,
    limit_note: &serde_json::Value,
    command: &str,
    machine: &Machine,
) -> Row {
    let ratio = |a: Option<u64>, b: u64| a.filter(|_| b > 0).map(|a| a as f64 / b as f64);
    Row {
        engine: engine.to_string(),
        workload: workload.to_string(),
        suite: suite.to_string(),
        ops: m.ops,
        seconds: m.seconds,
        ops_per_sec: if m.seconds > 0.0 {
            m.ops as f64 / m.seconds
        } else {
            0.0
        },
        latency_us: m.latency_us,
        found: m.found,
        bytes_read: m.bytes_read,
        bytes_written: m.bytes_written,
        user_bytes_written: m.user_bytes_written,
        write_amp: ratio(m.bytes_written, m.user_bytes_written),
        space_amp: ratio(Some(m.disk_bytes), logical),
        disk_bytes: m.disk_bytes,
        logical_bytes: logical,
        peak_rss_bytes: m.peak_rss_bytes,
        cpu_seconds: m.cpu_seconds,
        client_cpu_seconds: m.client_cpu_seconds,
        client_runqueue_seconds: m.client_runqueue_seconds,
        ops_per_sec_unqueued: m.client_runqueue_seconds.and_then(|w| {
            let threads = params["threads"].as_u64().unwrap_or(1).max(1) as f64;
            let busy = m.seconds - w / threads;
            (busy > 0.0).then(|| m.ops as f64 / busy)
        }),
        settings: m.settings,
        engine_stats: m.engine_stats,
        params,
        memory_limit: limit_note.clone(),
        repeat: None,
        command: command.to_string(),
        machine: machine.now(),
    }
}

/// Spawns this executable as a child for `job` and reads its protocol lines.
fn run_child(job: &Job, workload: &str, progress: &Progress) -> Result<Measured> {
    let exe =
        std::env::current_exe().map_err(|e| BenchError::io("locate", "current executable", e))?;
    let arg = serde_json::to_string(job)?;
    let fail = |detail: String| BenchError::Child {
        engine: job.spec.given.clone(),
        workload: workload.into(),
        detail,
    };
    let mut child = Command::new(&exe)
        .arg("__child")
        .arg(&arg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::io("spawn", &exe, e))?;
    let _running = interrupt::ChildGuard::new(child.id());
    let mut err_pipe = child.stderr.take();
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = std::io::Read::read_to_string(p, &mut s);
        }
        s
    });
    let mut result: Option<Measured> = None;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line.map_err(|e| fail(format!("reading its output: {e}")))?;
            if let Some(rest) = line.strip_prefix("progress ") {
                if let Some(done) = rest.split_whitespace().next().and_then(|d| d.parse().ok()) {
                    progress.update(done);
                }
            } else if let Some(rest) = line.strip_prefix("result ") {
                result = Some(serde_json::from_str(rest)?);
            }
        }
    }
    let status = child.wait().map_err(|e| fail(format!("wait: {e}")))?;
    interrupt::stop_if_interrupted();
    let stderr = err_thread.join().unwrap_or_default();
    let stderr = stderr.trim();
    if !status.success() {
        let how = match status.code() {
            Some(c) => format!("exited with {c}"),
            None => {
                use std::os::unix::process::ExitStatusExt;
                match status.signal() {
                    Some(9) => {
                        "killed by SIGKILL (the OOM killer, if a memory limit is set)".into()
                    }
                    s => format!("killed by signal {}", s.unwrap_or(0)),
                }
            }
        };
        return Err(fail(if stderr.is_empty() {
            how
        } else {
            format!("{how}: {stderr}")
        }));
    }
    result.ok_or_else(|| fail("finished without a result line".into()))
}

fn run_db_bench(
    bench: Micro,
    p: &MicroParams,
    s: &Settings,
    dir: &Path,
    limit: Option<&Limit>,
) -> Result<Measured> {
    let cold_files_dropped = p.cold.then(|| metrics::drop_page_cache(dir));
    let argv = dbbench::flags(bench, dir, p, s);
    let run = dbbench::run(argv, limit)?;
    let rep = &run.report;
    let h = rep.histogram.clone().unwrap_or_default();
    let user_bytes_written = if bench.writes() {
        rep.operations * (p.key_size + p.value_size) as u64
    } else {
        0
    };
    Ok(Measured {
        ops: rep.operations,
        seconds: rep.elapsed_seconds(),
        latency_us: Latency {
            p50: h.p50,
            p95: h.p95.unwrap_or(f64::NAN),
            p99: h.p99,
            p999: h.p999,
            max: h.max,
            mean: h.average,
        },
        found: rep.found.map_or(0, |f| f.0),
        user_bytes_written,
        bytes_read: Some(run.usage.bytes_read),
        bytes_written: Some(run.usage.bytes_written),
        cpu_seconds: run.usage.cpu_seconds,
        client_cpu_seconds: None,
        client_runqueue_seconds: None,
        peak_rss_bytes: Some(run.usage.peak_rss_bytes),
        disk_bytes: metrics::disk_bytes(dir),
        settings: json!({
            "tool": "db_bench (rocksdb-tools), linked to the same librocksdb",
            "argv": run.argv,
            "block_cache_bytes": s.cache_bytes,
            "write_buffer_size": s.write_buffer_bytes,
            "compression": s.compression.name(),
            "max_background_jobs": s.background_threads,
            "sync": s.sync,
            "note": "byte counters, CPU and RSS cover the whole db_bench process (open and close included)",
        }),
        cold_files_dropped,
        engine_stats: serde_json::Value::Null,
    })
}

/// Ctrl-C (SIGINT) or SIGTERM while a benchmark runs: kill the running child, remove the
/// temporary directory (hundreds of MB of databases) and exit with 128 + the signal, as a shell
/// reports a process the signal ended.
///
/// Thread-safety: [`remove_on_signal`] is called once, from the orchestrating thread, before any
/// other thread or child starts: it blocks the two signals in that thread (threads started later
/// inherit the mask; children get an empty mask, std resets it at spawn) and one watcher thread
/// takes them with `sigwait`, so no code runs in a signal handler.
pub(crate) mod interrupt {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    /// Set by the watcher before it kills the children: their deaths are not failures to report.
    static INTERRUPTED: AtomicBool = AtomicBool::new(false);

    /// After a child ended: if the watcher killed it, wait here for the watcher to remove the
    /// directory and exit the process, rather than report the killed child as a failure.
    pub(super) fn stop_if_interrupted() {
        while INTERRUPTED.load(Ordering::SeqCst) {
            std::thread::park();
        }
    }

    /// Pids of the children running now (at most one: children run one at a time).
    static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

    /// Registers a running child for the watcher to kill; unregisters it when dropped.
    pub(super) struct ChildGuard(u32);

    impl ChildGuard {
        pub(super) fn new(pid: u32) -> Self {
            if let Ok(mut c) = CHILDREN.lock() {
                c.push(pid);
            }
            if INTERRUPTED.load(Ordering::SeqCst) {
                kill(pid); // started after the watcher looked: it must not outlive the directory
            }
            ChildGuard(pid)
        }
    }

    impl Drop for ChildGuard {
        fn drop(&mut self) {
            if let Ok(mut c) = CHILDREN.lock() {
                c.retain(|&p| p != self.0);
            }
        }
    }

    /// Starts the watcher that removes `dir` on SIGINT or SIGTERM. Does nothing (the default
    /// signal behaviour stays) if the signals cannot be blocked or the thread cannot start.
    pub(crate) fn remove_on_signal(dir: &Path) {
        // SAFETY: sigset_t is plain data that sigemptyset/sigaddset initialise; the pointers
        // are to this stack frame and live through each call.
        let set = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            set
        };
        // SAFETY: `set` is initialised above; a null old-set pointer is allowed.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return;
        }
        let dir: PathBuf = dir.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("attune-bench-signals".into())
            .spawn(move || watch(set, &dir));
        if spawned.is_err() {
            // SAFETY: as above; unblocking restores the default behaviour.
            unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
        }
    }

    fn kill(pid: u32) {
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: kill takes any pid; a child that already exited is at worst ESRCH (it is
            // not reaped before its guard drops, so the pid is not reused).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }

    fn watch(set: libc::sigset_t, dir: &Path) {
        let mut sig: libc::c_int = 0;
        // SAFETY: `set` is an initialised signal set and `sig` a valid out pointer.
        let rc = unsafe { libc::sigwait(&set, &mut sig) };
        if rc != 0 {
            return;
        }
        INTERRUPTED.store(true, Ordering::SeqCst);
        let pids: Vec<u32> = CHILDREN.lock().map(|c| c.clone()).unwrap_or_default();
        for pid in pids {
            kill(pid);
        }
        // A killed child may finish a write in flight: remove, wait a moment, remove again.
        for _ in 0..3 {
            let _ = std::fs::remove_dir_all(dir);
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        eprintln!("attune-bench: interrupted; removed {}", dir.display());
        std::process::exit(128 + sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEVELDB: &[Compression] = &[Compression::None, Compression::Snappy];

    fn base(c: Compression) -> Settings {
        Settings {
            compression: c,
            ..Settings::default()
        }
    }

    #[test]
    fn shared_compression_an_engine_lacks_runs_the_nearest_codec_with_a_warning() {
        let spec = EngineSpec::parse("leveldb").unwrap();
        let (s, sub) = resolve_engine(&spec, &base(Compression::Lz4), &[], LEVELDB).unwrap();
        assert_eq!(s.compression, Compression::Snappy);
        let (requested, warning) = sub.unwrap();
        assert_eq!(requested, Compression::Lz4);
        assert!(
            warning.contains("leveldb has no lz4") && warning.contains("running it with snappy"),
            "{warning}"
        );
    }

    #[test]
    fn offered_compression_is_kept_without_a_warning() {
        let spec = EngineSpec::parse("leveldb").unwrap();
        let (s, sub) = resolve_engine(&spec, &base(Compression::Snappy), &[], LEVELDB).unwrap();
        assert_eq!(s.compression, Compression::Snappy);
        assert!(sub.is_none());
    }

    #[test]
    fn compression_named_in_the_engine_entry_is_not_substituted() {
        let spec = EngineSpec::parse("leveldb:compression=lz4").unwrap();
        let e = resolve_engine(&spec, &base(Compression::None), &[], LEVELDB)
            .unwrap_err()
            .to_string();
        assert!(e.contains("lz4") && e.contains("none, snappy"), "{e}");
    }
}
