//! The child side of the harness: one process per (engine, workload) so that byte counters, CPU
//! and peak RSS belong to that engine alone and a crash in a peer ends only its own runs.
//!
//! Protocol (child's stdout, one line each): `progress <done> <total>` while working, then
//! `result <json>` with a [`Measured`] object. Errors go to stderr and the exit code is non-zero.
//!
//! Thread-safety: runs on the child's main thread plus the driver's client threads and one
//! progress-printer thread. Invariant: counters are sampled before the engine opens and after it
//! closes, so the engine's start-up and shutdown I/O belong to the phase that caused them.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::driver::{run_phase, PhaseResult};
use crate::engine;
use crate::error::Result;
use crate::metrics;
use crate::micro::{self, Micro, MicroParams};
use crate::options::{EngineSpec, Settings};

/// What the parent asks a child to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The engine entry.
    pub spec: EngineSpec,
    /// Resolved settings.
    pub settings: Settings,
    /// The database directory.
    pub dir: PathBuf,
    /// The work.
    pub task: Task,
    /// A cgroup.procs file to join first (`--memory-limit`), if any.
    pub cgroup_procs: Option<PathBuf>,
}

/// One unit of work.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Task {
    /// A micro benchmark.
    Micro {
        /// Which.
        bench: Micro,
        /// Its parameters.
        params: MicroParams,
    },
    /// A YCSB phase.
    Ycsb(crate::ycsb::YcsbTask),
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Latency {
    /// From a nanosecond histogram.
    pub fn from_hist(h: &hdrhistogram::Histogram<u64>) -> Latency {
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            p50: us(h.value_at_quantile(0.50)),
            p95: us(h.value_at_quantile(0.95)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

/// What one child measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measured {
    /// Operations recorded.
    pub ops: u64,
    /// Seconds of the measured window.
    pub seconds: f64,
    /// Latency percentiles.
    pub latency_us: Latency,
    /// Reads that found their key (reads only).
    pub found: u64,
    /// Key + value bytes written by the workload.
    pub user_bytes_written: u64,
    /// Bytes read from storage between open and close.
    pub bytes_read: Option<u64>,
    /// Bytes written to storage between open and close (flush at the end of writes included).
    pub bytes_written: Option<u64>,
    /// CPU seconds between open and close.
    pub cpu_seconds: f64,
    /// CPU seconds of the client threads in the measured window (foreground work only).
    #[serde(default)]
    pub client_cpu_seconds: Option<f64>,
    /// Seconds the client threads waited for a CPU in the measured window (summed).
    #[serde(default)]
    pub client_runqueue_seconds: Option<f64>,
    /// Peak RSS of the process.
    pub peak_rss_bytes: Option<u64>,
    /// Allocated bytes of the database directory after close.
    pub disk_bytes: u64,
    /// The engine's reported settings.
    pub settings: serde_json::Value,
    /// Files dropped from the page cache before opening (cold runs).
    pub cold_files_dropped: Option<usize>,
    /// The engine's own counters after the phase ([`crate::engine::Engine::stats`]).
    #[serde(default)]
    pub engine_stats: serde_json::Value,
}

/// Prints progress lines every `PROGRESS_PERIOD` until stopped.
const PROGRESS_PERIOD: Duration = Duration::from_millis(200);

/// Runs `job`, printing the protocol lines on stdout; an error goes back to `main`, which
/// prints it on stderr and exits non-zero.
pub fn run(job: &Job) -> Result<()> {
    if let Some(procs) = &job.cgroup_procs {
        std::fs::write(procs, std::process::id().to_string())
            .map_err(|e| crate::error::BenchError::io("join cgroup", procs, e))?;
    }
    let kind = engine::find(&job.spec.name)?;
    let (cold, total) = match &job.task {
        Task::Micro { bench, params } => (
            params.cold,
            params.ops_per_thread(*bench) * params.threads as u64,
        ),
        Task::Ycsb(t) => (t.cold, t.total_ops()),
    };
    let cold_files_dropped = cold.then(|| metrics::drop_page_cache(&job.dir));
    let io0 = metrics::io_bytes();
    let cpu0 = metrics::cpu_seconds();
    let db = (kind.open)(&job.dir, &job.settings)?;
    let settings = db.settings();
    let progress = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let phase: Result<PhaseResult> = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut out = std::io::stdout();
            while !stop.load(Ordering::Relaxed) {
                let _ = writeln!(out, "progress {} {total}", progress.load(Ordering::Relaxed));
                let _ = out.flush();
                let t = Instant::now();
                while t.elapsed() < PROGRESS_PERIOD && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
        let r = match &job.task {
            Task::Micro { bench, params } => {
                let (body, warm) = micro::bodies(params, *bench);
                let r = run_phase(
                    db.as_ref(),
                    params.threads,
                    &progress,
                    warm.as_deref(),
                    &*body,
                );
                if r.is_ok() && bench.writes() {
                    db.flush().map(|_| ()).and(r)
                } else {
                    r
                }
            }
            Task::Ycsb(t) => crate::ycsb::run_task(db.as_ref(), t, &progress),
        };
        stop.store(true, Ordering::Relaxed);
        r
    });
    let phase = phase?;
    let mut settings = settings;
    if let Some(t) = db.settings().get("cache_tiers") {
        // What the cache-sizing controller saw during the phase (Attune with memory_budget).
        settings["cache_tiers"] = t.clone();
    }
    // Counters that only mean something after the phase (Attune's hot-key cache) replace the
    // values seen at open.
    if let Some(h) = db.settings().get("hot_key_cache") {
        settings["hot_key_cache"] = h.clone();
    }
    let engine_stats = db.stats();
    db.close()?;
    let io1 = metrics::io_bytes();
    let cpu1 = metrics::cpu_seconds();
    let (bytes_read, bytes_written) = match (io0, io1) {
        (Some(a), Some(b)) => (
            Some(b.read - a.read.min(b.read)),
            Some(b.written - a.written.min(b.written)),
        ),
        _ => (None, None),
    };
    let measured = Measured {
        ops: phase.ops,
        seconds: phase.seconds,
        latency_us: Latency::from_hist(&phase.hist),
        found: phase.found,
        user_bytes_written: phase.user_bytes_written,
        bytes_read,
        bytes_written,
        cpu_seconds: cpu1 - cpu0,
        client_cpu_seconds: Some(phase.client_cpu_seconds),
        client_runqueue_seconds: phase.client_runqueue_seconds,
        peak_rss_bytes: metrics::peak_rss_bytes(),
        disk_bytes: metrics::disk_bytes(&job.dir),
        settings,
        cold_files_dropped,
        engine_stats,
    };
    let mut out = std::io::stdout();
    let line = serde_json::to_string(&measured)?;
    let _ = writeln!(out, "result {line}");
    let _ = out.flush();
    Ok(())
}
