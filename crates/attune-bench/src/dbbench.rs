//! RocksDB's own `db_bench` as a pseudo-engine: runs `/usr/bin/db_bench` (Debian's rocksdb-tools)
//! with flags equivalent to our settings, one process per benchmark, and parses its report into the
//! same rows our engines produce. This is how the harness checks that RocksDB driven through our
//! bindings performs like RocksDB driven by its own tool.
//!
//! Flag mapping: `--num=records --reads=operations --key_size --value_size --cache_size
//! --write_buffer_size --compression_type --threads --sync --max_background_jobs
//! --compression_ratio=0.5 --histogram=1 --benchmarks=<one> --seed`, and `--use_existing_db=1`
//! for every benchmark that is not a fill (fills start from an empty database, as in db_bench).
//! Byte counters, CPU and peak RSS come from `wait4`'s rusage of the db_bench process (so they
//! include opening and closing the database); latency percentiles come from db_bench's histogram
//! (p95, which db_bench does not print, is interpolated from its bucket table).
//!
//! Thread-safety: plain functions. Invariant: a report we cannot parse is an error, never a zero.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{BenchError, Result};
use crate::micro::{Micro, MicroParams};
use crate::options::{Compression, Settings};

/// Where Debian's rocksdb-tools installs the tool; `ATTUNE_DB_BENCH` overrides.
pub const DB_BENCH_PATH: &str = "/usr/bin/db_bench";

/// The tool to run.
pub fn tool_path() -> PathBuf {
    std::env::var_os("ATTUNE_DB_BENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| DB_BENCH_PATH.into())
}

/// Whether the tool is installed; the error says where we looked.
pub fn probe() -> Result<()> {
    let p = tool_path();
    if p.is_file() {
        Ok(())
    } else {
        Err(BenchError::LibraryMissing {
            engine: "db_bench".into(),
            detail: format!("{} not found (Debian package rocksdb-tools)", p.display()),
        })
    }
}

/// db_bench's latency histogram for one benchmark, in microseconds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    /// Operations counted.
    pub count: u64,
    /// Mean.
    pub average: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Percentiles printed by db_bench.
    pub p50: f64,
    /// 75th.
    pub p75: f64,
    /// 95th, interpolated from the bucket table (db_bench does not print it).
    pub p95: Option<f64>,
    /// 99th.
    pub p99: f64,
    /// 99.9th.
    pub p999: f64,
    /// 99.99th.
    pub p9999: f64,
}

/// One benchmark's report line (and histogram, when `--histogram=1`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// The benchmark's name (`fillrandom`, ...).
    pub name: String,
    /// Microseconds per operation (per thread).
    pub micros_per_op: f64,
    /// Operations per second over all threads.
    pub ops_per_sec: f64,
    /// Seconds the benchmark ran.
    pub seconds: f64,
    /// Operations done.
    pub operations: u64,
    /// For reads: keys found and keys looked up (`(X of Y found)`).
    pub found: Option<(u64, u64)>,
    /// The latency histogram, if printed.
    pub histogram: Option<Histogram>,
}

impl Report {
    /// Wall seconds of the run, as precise as the report line allows. db_bench prints the seconds
    /// with three decimals, so a short run loses them (a 2,000-entry `readseq` prints `0.001` or
    /// `0.000 seconds`), while its `ops/sec` is computed from microseconds and printed as an
    /// integer. The value with the smaller relative rounding error wins: the printed seconds
    /// (±0.0005 s) for long runs, `operations / ops_per_sec` (±1 op/s) for short ones.
    pub fn elapsed_seconds(&self) -> f64 {
        let rate_is_finer = self.ops_per_sec > 0.0 && self.seconds < 0.0005 * self.ops_per_sec;
        if rate_is_finer {
            self.operations as f64 / self.ops_per_sec
        } else {
            self.seconds
        }
    }
}

fn bad(detail: impl Into<String>) -> BenchError {
    BenchError::DbBench(detail.into())
}

fn num<T: std::str::FromStr>(tok: Option<&str>, what: &str, line: &str) -> Result<T> {
    tok.and_then(|t| t.trim_end_matches([';', ',']).parse().ok())
        .ok_or_else(|| bad(format!("cannot read {what} in `{line}`")))
}

/// Value following `label` among whitespace-separated tokens.
fn after<T: std::str::FromStr>(tokens: &[&str], label: &str, line: &str) -> Result<T> {
    let i = tokens
        .iter()
        .position(|t| *t == label)
        .ok_or_else(|| bad(format!("no {label} in `{line}`")))?;
    num(tokens.get(i + 1).copied(), label, line)
}

/// Parses db_bench's standard output into one report per benchmark run.
pub fn parse(text: &str) -> Result<Vec<Report>> {
    let mut out: Vec<Report> = Vec::new();
    let mut buckets: Vec<(f64, f64, f64, f64)> = Vec::new(); // lo, hi, pct, cumulative pct
    for raw in text.lines() {
        let line = raw.trim_end();
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if line.contains(" micros/op ") && tokens.get(1) == Some(&":") {
            finish_p95(&mut out, &mut buckets);
            let name = tokens[0].to_string();
            let micros_per_op = num(tokens.get(2).copied(), "micros/op", line)?;
            let ops_per_sec = after(&tokens, "micros/op", line)?;
            let seconds = num(
                tokens
                    .iter()
                    .position(|t| *t == "seconds")
                    .and_then(|i| tokens.get(i - 1))
                    .copied(),
                "seconds",
                line,
            )?;
            let operations = num(
                tokens
                    .iter()
                    .position(|t| t.starts_with("operations"))
                    .and_then(|i| tokens.get(i - 1))
                    .copied(),
                "operations",
                line,
            )?;
            let found = match (line.find('('), line.find(" found)")) {
                (Some(a), Some(b)) if a < b => {
                    let inner: Vec<&str> = line[a + 1..b].split_whitespace().collect();
                    match (inner.first(), inner.get(2)) {
                        (Some(x), Some(y)) => {
                            Some((num(Some(x), "found", line)?, num(Some(y), "of", line)?))
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            out.push(Report {
                name,
                micros_per_op,
                ops_per_sec,
                seconds,
                operations,
                found,
                histogram: None,
            });
            continue;
        }
        let Some(last) = out.last_mut() else { continue };
        if line.starts_with("Count: ") {
            let h = last.histogram.get_or_insert_with(Histogram::default);
            h.count = after(&tokens, "Count:", line)?;
            h.average = after(&tokens, "Average:", line)?;
        } else if line.starts_with("Min: ") {
            let h = last.histogram.get_or_insert_with(Histogram::default);
            h.min = after(&tokens, "Min:", line)?;
            h.max = after(&tokens, "Max:", line)?;
        } else if line.starts_with("Percentiles: ") {
            let h = last.histogram.get_or_insert_with(Histogram::default);
            h.p50 = after(&tokens, "P50:", line)?;
            h.p75 = after(&tokens, "P75:", line)?;
            h.p99 = after(&tokens, "P99:", line)?;
            h.p999 = after(&tokens, "P99.9:", line)?;
            h.p9999 = after(&tokens, "P99.99:", line)?;
        } else if (line.starts_with('[') || line.starts_with('(')) && line.contains(']') {
            // `[ lo, hi ] count pct% cum% ###`
            let cleaned = line.replace(['[', '(', ']', ',', '%'], " ");
            let t: Vec<&str> = cleaned.split_whitespace().collect();
            if t.len() >= 5 {
                buckets.push((
                    num(t.first().copied(), "bucket low", line)?,
                    num(t.get(1).copied(), "bucket high", line)?,
                    num(t.get(3).copied(), "bucket percent", line)?,
                    num(t.get(4).copied(), "bucket cumulative", line)?,
                ));
            }
        }
    }
    finish_p95(&mut out, &mut buckets);
    if out.is_empty() {
        return Err(bad(
            "no benchmark result line (`NAME : X micros/op ...`) in the output",
        ));
    }
    Ok(out)
}

/// Interpolates p95 of the last report from the collected bucket table.
fn finish_p95(out: &mut [Report], buckets: &mut Vec<(f64, f64, f64, f64)>) {
    if let Some(h) = out.last_mut().and_then(|r| r.histogram.as_mut()) {
        if let Some(&(lo, hi, pct, cum)) = buckets.iter().find(|b| b.3 >= 95.0) {
            let before = cum - pct;
            let frac = if pct > 0.0 {
                ((95.0 - before) / pct).clamp(0.0, 1.0)
            } else {
                1.0
            };
            h.p95 = Some((lo + (hi - lo) * frac).min(h.max.max(lo)));
        }
    }
    buckets.clear();
}

/// Engine keys passed through to db_bench as `--KEY=VALUE` (`db_bench:enable_blob_files=1`):
/// BlobDB (RocksDB's integrated value separation) and filter settings.
pub const KEYS: &[&str] = &[
    "enable_blob_files",
    "min_blob_size",
    "blob_file_size",
    "enable_blob_garbage_collection",
    "blob_garbage_collection_age_cutoff",
    "blob_compression_type",
    "bloom_bits",
    "block_size",
];

/// The flags that give db_bench our settings for one benchmark.
pub fn flags(bench: Micro, dir: &Path, p: &MicroParams, s: &Settings) -> Vec<String> {
    let compression = match s.compression {
        Compression::None => "none",
        Compression::Snappy => "snappy",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
    };
    let mut v = vec![
        format!("--db={}", dir.display()),
        format!("--benchmarks={}", bench.name()),
        format!("--use_existing_db={}", u8::from(!bench.fresh())),
        format!("--num={}", p.records),
        format!("--reads={}", p.operations),
        format!("--key_size={}", p.key_size),
        format!("--value_size={}", p.value_size),
        "--compression_ratio=0.5".to_string(),
        format!("--cache_size={}", s.cache_bytes),
        format!("--write_buffer_size={}", s.write_buffer_bytes),
        format!("--compression_type={compression}"),
        format!("--threads={}", s.threads),
        format!("--sync={}", u8::from(s.sync)),
        format!("--max_background_jobs={}", s.background_threads),
        // db_bench draws a random seed when given 0, and each process seeds its thread streams
        // from this value alone: a distinct non-zero seed per benchmark keeps `readrandom` from
        // replaying the exact keys `fillrandom` wrote (which would find 100%).
        format!(
            "--seed={}",
            p.seed.wrapping_add((bench as u64 + 1) * 1_000_003).max(1)
        ),
        format!("--batch_size={}", p.batch_size),
        "--histogram=1".to_string(),
        "--stats_interval_seconds=0".to_string(),
        format!("--seek_nexts={}", p.seek_nexts),
    ];
    if !s.extra.contains_key("bloom_bits") {
        // The same filter the RocksDB binding builds by default.
        v.push(format!(
            "--bloom_bits={}",
            crate::engines::BLOOM_BITS_DEFAULT
        ));
    }
    v.extend(s.extra.iter().map(|(k, x)| format!("--{k}={x}")));
    v
}

/// What running db_bench once measured.
#[derive(Debug, Clone)]
pub struct Run {
    /// The parsed report of the single benchmark.
    pub report: Report,
    /// rusage of the db_bench process.
    pub usage: ChildUsage,
    /// The exact command line (for the row's settings).
    pub argv: Vec<String>,
}

/// Resource use of a finished child process, from `wait4`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildUsage {
    /// User + system CPU seconds.
    pub cpu_seconds: f64,
    /// Peak RSS in bytes (`ru_maxrss`).
    pub peak_rss_bytes: u64,
    /// Bytes read from storage (`ru_inblock * 512`).
    pub bytes_read: u64,
    /// Bytes written to storage (`ru_oublock * 512`).
    pub bytes_written: u64,
}

/// Waits for `pid` and returns its exit code (or negative signal) and resource use.
pub fn wait_with_usage(pid: u32) -> Result<(i32, ChildUsage)> {
    let mut status: libc::c_int = 0;
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: waiting for our own child; rusage filled by the kernel.
    let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, ru.as_mut_ptr()) };
    if rc < 0 {
        return Err(BenchError::io(
            "wait4",
            format!("pid {pid}"),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: filled by wait4.
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        -libc::WTERMSIG(status)
    } else {
        -1
    };
    Ok((
        code,
        ChildUsage {
            cpu_seconds: tv(ru.ru_utime) + tv(ru.ru_stime),
            peak_rss_bytes: (ru.ru_maxrss as u64) * 1024,
            bytes_read: (ru.ru_inblock as u64) * 512,
            bytes_written: (ru.ru_oublock as u64) * 512,
        },
    ))
}

/// Runs db_bench once with `argv` and parses its report.
pub fn run(argv: Vec<String>, pre_exec: Option<&crate::cgroup::Limit>) -> Result<Run> {
    let tool = tool_path();
    let mut cmd = Command::new(&tool);
    cmd.args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| BenchError::io("spawn", &tool, e))?;
    if let Some(limit) = pre_exec {
        limit.add_pid(child.id())?;
    }
    let mut err_pipe = child.stderr.take();
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_string(&mut s);
        }
        s
    });
    let mut out = String::new();
    if let Some(mut p) = child.stdout.take() {
        p.read_to_string(&mut out)
            .map_err(|e| BenchError::io("read stdout of", &tool, e))?;
    }
    let (code, usage) = wait_with_usage(child.id())?;
    let stderr = err_thread.join().unwrap_or_default();
    if code != 0 {
        let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        return Err(bad(format!("exited with {code}: {tail}")));
    }
    let mut reports = parse(&out)?;
    let report = reports.pop().ok_or_else(|| bad("no report"))?;
    let mut full = vec![tool.display().to_string()];
    full.extend(argv);
    Ok(Run {
        report,
        usage,
        argv: full,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILL: &str = include_str!("../testdata/db_bench_7.8.3_fillrandom.txt");
    const READ: &str = include_str!("../testdata/db_bench_7.8.3_readrandom.txt");
    const READSEQ: &str = include_str!("../testdata/db_bench_7.8.3_readseq.txt");

    #[test]
    fn parses_fillrandom_report_and_histogram() {
        let r = parse(FILL).unwrap();
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!(r.name, "fillrandom");
        assert_eq!(r.operations, 20000);
        assert!((r.micros_per_op - 6.113).abs() < 1e-9);
        assert!((r.ops_per_sec - 161640.0).abs() < 1e-9);
        assert!((r.seconds - 0.124).abs() < 1e-9);
        assert_eq!(r.found, None);
        let h = r.histogram.as_ref().unwrap();
        assert_eq!(h.count, 20000);
        assert!((h.p50 - 3.35).abs() < 1e-9 && (h.p99 - 9.58).abs() < 1e-9);
        assert!((h.p999 - 42.5).abs() < 1e-9 && (h.max - 4201.0).abs() < 1e-9);
        // 95% falls in the (4, 6] bucket: 80.460% before it, 15.395% inside.
        let p95 = h.p95.unwrap();
        assert!(
            (p95 - (4.0 + 2.0 * (95.0 - 80.46) / 15.395)).abs() < 1e-6,
            "{p95}"
        );
    }

    #[test]
    fn parses_readrandom_found_counts() {
        let r = parse(READ).unwrap();
        assert_eq!(r[0].name, "readrandom");
        assert_eq!(r[0].found, Some((12596, 20000)));
        assert!(r[0].histogram.as_ref().unwrap().p95.is_some());
    }

    #[test]
    fn short_run_takes_its_seconds_from_the_rate_not_the_rounded_seconds() {
        // `1966568 ops/sec 0.001 seconds 2000 operations`: 2000 / 0.001 would be 2,000,000.
        let r = &parse(READSEQ).unwrap()[0];
        assert_eq!(r.name, "readseq");
        assert!((r.seconds - 0.001).abs() < 1e-12);
        let s = r.elapsed_seconds();
        assert!((s - 2000.0 / 1_966_568.0).abs() < 1e-12, "{s}");
        assert!((r.operations as f64 / s - 1_966_568.0).abs() < 1e-6);
    }

    #[test]
    fn run_printed_as_zero_seconds_still_has_a_rate() {
        // The same line from a machine fast enough to print `0.000 seconds`.
        let text = READSEQ.replace(
            "1966568 ops/sec 0.001 seconds",
            "5012531 ops/sec 0.000 seconds",
        );
        let r = &parse(&text).unwrap()[0];
        assert_eq!(r.seconds, 0.0);
        let s = r.elapsed_seconds();
        assert!(s > 0.0 && s.is_finite());
        assert!((r.operations as f64 / s - 5_012_531.0).abs() < 1e-6);
    }

    #[test]
    fn the_finer_of_seconds_and_rate_is_used() {
        // `161640 ops/sec 0.124 seconds`: the rate is known to 0.0006%, the seconds to 0.4%.
        let r = &parse(FILL).unwrap()[0];
        assert!((r.elapsed_seconds() - 20000.0 / 161_640.0).abs() < 1e-12);
        let long = READSEQ.replace(
            "1966568 ops/sec 0.001 seconds 2000",
            "1000 ops/sec 12.345 seconds 12345",
        );
        // `1000 ops/sec 12.345 seconds`: now the seconds (0.004%) beat the rate (0.1%).
        let r = &parse(&long).unwrap()[0];
        assert!((r.elapsed_seconds() - 12.345).abs() < 1e-12);
    }

    #[test]
    fn output_without_result_line_is_an_error() {
        assert!(parse("RocksDB: version 7.8.3\nDate: x\n").is_err());
        assert!(parse("fillrandom   :   abc micros/op 1 ops/sec 1 seconds 1 operations;").is_err());
    }
}
