//! Runs one measured phase on an open engine with `threads` client threads and collects what each
//! operation cost: count, wall time, a latency histogram (nanoseconds, 3 significant digits, via
//! `hdrhistogram`), reads found, user bytes written.
//!
//! Thread-safety: each client thread owns its [`Session`], histogram and generators; threads share
//! only an atomic progress counter. Invariant: only operations inside the measured window are
//! recorded (warm-up operations go through the same code with recording off).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::engine::{Engine, Session};
use crate::error::{BenchError, Result};

/// Highest latency the histograms track: one hour, far above any single operation.
const LATENCY_NS_MAX: u64 = 3_600_000_000_000;
/// Operations between two updates of the shared progress counter (keeps the counter off the
/// hot path's cache line most of the time).
const PROGRESS_EVERY: u64 = 256;

/// Per-thread accumulator handed to the phase's body.
pub struct ThreadStats<'p> {
    hist: Histogram<u64>,
    /// Operations completed (recorded or not).
    pub ops: u64,
    /// Reads that found their key.
    pub found: u64,
    /// Key + value bytes written by the workload.
    pub user_bytes_written: u64,
    recording: bool,
    pending: u64,
    progress: &'p AtomicU64,
    cpu_seconds: f64,
    runqueue_seconds: Option<f64>,
}

impl ThreadStats<'_> {
    /// Records one operation that started at `start` (and ends now).
    #[inline]
    pub fn done(&mut self, start: Instant) {
        let ns = start.elapsed().as_nanos().min(u128::from(LATENCY_NS_MAX)) as u64;
        self.done_ns(ns);
    }

    /// Records one operation that took `ns` nanoseconds.
    #[inline]
    pub fn done_ns(&mut self, ns: u64) {
        self.ops += 1;
        if self.recording {
            self.hist.saturating_record(ns.max(1));
            self.pending += 1;
            if self.pending >= PROGRESS_EVERY {
                self.progress.fetch_add(self.pending, Ordering::Relaxed);
                self.pending = 0;
            }
        }
    }
}

/// What a phase measured.
#[derive(Debug, Clone)]
pub struct PhaseResult {
    /// Operations recorded (all threads).
    pub ops: u64,
    /// Wall seconds from the first thread's start to the last thread's end.
    pub seconds: f64,
    /// Latency in nanoseconds.
    pub hist: Histogram<u64>,
    /// Reads that found their key.
    pub found: u64,
    /// Key + value bytes written.
    pub user_bytes_written: u64,
    /// CPU seconds the client threads spent in the measured body (the foreground work, without
    /// the engine's background threads).
    pub client_cpu_seconds: f64,
    /// Seconds the client threads waited for a CPU in the measured body, summed over threads
    /// (`None` without `/proc/thread-self/schedstat`).
    pub client_runqueue_seconds: Option<f64>,
}

/// The body of a phase: thread index, its session, its stats.
pub type Body<'a> = dyn Fn(usize, &mut dyn Session, &mut ThreadStats<'_>) -> Result<()> + Sync + 'a;

/// Runs `warmup` (unrecorded, if given) then `body` on `threads` threads, each with its own session.
pub fn run_phase(
    engine: &dyn Engine,
    threads: usize,
    progress: &AtomicU64,
    warmup: Option<&Body<'_>>,
    body: &Body<'_>,
) -> Result<PhaseResult> {
    let threads = threads.max(1);
    let barrier = Barrier::new(threads);
    let hists = (0..threads)
        .map(|_| Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| BenchError::invalid("histogram", e.to_string()))?;
    let results: Vec<Result<(ThreadStats<'_>, Instant, Instant)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = hists
            .into_iter()
            .enumerate()
            .map(|(t, hist)| {
                let barrier = &barrier;
                scope.spawn(move || -> Result<(ThreadStats<'_>, Instant, Instant)> {
                    let mut stats = ThreadStats {
                        hist,
                        ops: 0,
                        found: 0,
                        user_bytes_written: 0,
                        recording: false,
                        pending: 0,
                        progress,
                        cpu_seconds: 0.0,
                        runqueue_seconds: None,
                    };
                    let mut session = engine.session();
                    let warm = match (session.as_mut(), warmup) {
                        (Ok(s), Some(w)) => w(t, s.as_mut(), &mut stats),
                        _ => Ok(()),
                    };
                    stats.ops = 0;
                    stats.found = 0;
                    stats.user_bytes_written = 0;
                    stats.recording = true;
                    // Every thread reaches the barrier, even after an error, so none waits forever.
                    barrier.wait();
                    warm?;
                    let mut session = session?;
                    let start = Instant::now();
                    let cpu0 = crate::metrics::thread_cpu_seconds();
                    let wait0 = crate::metrics::thread_runqueue_seconds();
                    body(t, session.as_mut(), &mut stats)?;
                    stats.cpu_seconds = crate::metrics::thread_cpu_seconds() - cpu0;
                    stats.runqueue_seconds = wait0
                        .zip(crate::metrics::thread_runqueue_seconds())
                        .map(|(a, b)| (b - a).max(0.0));
                    let end = Instant::now();
                    progress.fetch_add(stats.pending, Ordering::Relaxed);
                    drop(session);
                    Ok((stats, start, end))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::Engine {
                        engine: "driver".into(),
                        op: "client thread",
                        detail: "panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut total: Option<PhaseResult> = None;
    let (mut first, mut last): (Option<Instant>, Option<Instant>) = (None, None);
    for r in results {
        let (stats, start, end) = r?;
        first = Some(first.map_or(start, |f| f.min(start)));
        last = Some(last.map_or(end, |l| l.max(end)));
        match total.as_mut() {
            None => {
                total = Some(PhaseResult {
                    ops: stats.ops,
                    seconds: 0.0,
                    hist: stats.hist,
                    found: stats.found,
                    user_bytes_written: stats.user_bytes_written,
                    client_cpu_seconds: stats.cpu_seconds,
                    client_runqueue_seconds: stats.runqueue_seconds,
                })
            }
            Some(t) => {
                t.ops += stats.ops;
                t.found += stats.found;
                t.user_bytes_written += stats.user_bytes_written;
                t.client_cpu_seconds += stats.cpu_seconds;
                t.client_runqueue_seconds = t
                    .client_runqueue_seconds
                    .zip(stats.runqueue_seconds)
                    .map(|(a, b)| a + b);
                t.hist
                    .add(&stats.hist)
                    .map_err(|e| BenchError::invalid("histogram", e.to_string()))?;
            }
        }
    }
    let mut total = total.ok_or_else(|| BenchError::invalid("threads", "no thread ran"))?;
    total.seconds = match (first, last) {
        (Some(f), Some(l)) => l.duration_since(f),
        _ => Duration::ZERO,
    }
    .as_secs_f64();
    Ok(total)
}
