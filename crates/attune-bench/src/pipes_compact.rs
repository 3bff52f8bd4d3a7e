//! `attune-bench pipes compact`: Attune's compaction and value-log collection with their I/O
//! through the environment (`pipes_bulk_io=off`) and through Data Pipes (`on`), in one run on the
//! same data, interleaved.
//!
//! Per repeat and setting: a fresh database is loaded with `--records` keys in random order
//! (16-byte keys; one value in `--blob-every` is `--blob-bytes` long and goes to the value log,
//! the others are `--value-bytes`), flushed, closed, dropped from the page cache and reopened;
//! then `compact_range` over everything is timed (compaction reads every table and writes the
//! merged level), then half of the large values are overwritten, flushed and a collection with
//! ratio 0.3 is timed (it reads each segment whole and rewrites its live half).

use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::time::Instant;

use attune_kv::{Options, DB};
use attune_workload::rng::SplitMix64;
use serde::Serialize;

use crate::options::{parse_count, parse_size};
use crate::output::{Fail, Sink};
use crate::rundir::RunDir;

const USAGE: &str = "usage: attune-bench pipes compact [--records N] [--value-bytes SIZE] \
[--blob-bytes SIZE] [--blob-every K] [--repeat N] [--dir DIR] [--out FILE] [--json]";

#[derive(Serialize)]
struct CompactRow {
    bench: &'static str,
    engine: String,
    phase: &'static str,
    records: u64,
    repeat: u32,
    /// Bytes of the files the phase starts from (tables for compaction, segments for GC).
    input_bytes: u64,
    seconds: f64,
    mib_per_s: f64,
    cpu_seconds: f64,
    mechanism: String,
}

fn kv<E: std::fmt::Display>(e: E) -> Fail {
    Fail::Run(e.to_string())
}

fn dir_bytes(dir: &Path, ext: &str) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == ext))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn drop_dir_cache(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if let Ok(f) = std::fs::File::open(e.path()) {
                // SAFETY: advisory calls on an open descriptor.
                unsafe {
                    libc::fdatasync(f.as_raw_fd());
                    libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
                }
            }
        }
    }
}

fn cpu_now() -> f64 {
    attune_kv::env::process_cpu_ns() as f64 / 1e9
}

pub fn run(args: &[String], sink: &Sink) -> Result<(), Fail> {
    let mut records = 400_000u64;
    let mut value_bytes = 100u64;
    let mut blob_bytes = 4096u64;
    let mut blob_every = 8u64;
    let mut repeat = 3u32;
    let mut dir: Option<std::path::PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| Fail::Usage(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--records" => records = parse_count("--records", &val()?).map_err(kv)?,
            "--value-bytes" => value_bytes = parse_size(&val()?).map_err(kv)?,
            "--blob-bytes" => blob_bytes = parse_size(&val()?).map_err(kv)?,
            "--blob-every" => blob_every = val()?.parse::<u64>().map_err(kv)?.max(1),
            "--repeat" => repeat = val()?.parse::<u32>().map_err(kv)?.max(1),
            "--dir" => dir = Some(val()?.into()),
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(Fail::Usage(format!("unknown option {other}\n{USAGE}"))),
        }
    }
    let run_dir = RunDir::new(dir, "pipes-compact")?;
    let base = run_dir.path();
    for r in 0..repeat {
        // Alternate which setting goes first, so neither always follows the other.
        let order = if r.is_multiple_of(2) {
            [false, true]
        } else {
            [true, false]
        };
        for pipes in order {
            let db_dir = base.join(if pipes { "on" } else { "off" });
            let _ = std::fs::remove_dir_all(&db_dir);
            let rows = one(
                &db_dir,
                pipes,
                records,
                value_bytes,
                blob_bytes,
                blob_every,
                r,
            );
            let _ = std::fs::remove_dir_all(&db_dir);
            for row in rows? {
                sink.row(&row)?;
                if sink.human() {
                    println!(
                        "{:22} {:8} {:8.2} s {:8.1} MiB/s",
                        row.engine, row.phase, row.seconds, row.mib_per_s
                    );
                }
            }
        }
    }
    Ok(())
}

fn options(pipes: bool, blob_bytes: u64) -> Options {
    Options {
        pipes_bulk_io: pipes,
        min_blob_size: blob_bytes.max(1),
        // Collection and compaction only when asked: the timed phases are the only ones.
        blob_gc_space_amp: 0.0,
        l0_compaction_trigger: 1 << 20,
        l0_slowdown_writes_trigger: 1 << 20,
        l0_stop_writes_trigger: 1 << 20,
        blob_file_size: 64 << 20,
        ..Options::default()
    }
}

fn one(
    dir: &Path,
    pipes: bool,
    records: u64,
    value_bytes: u64,
    blob_bytes: u64,
    blob_every: u64,
    repeat: u32,
) -> Result<Vec<CompactRow>, Fail> {
    let engine = format!("pipes_bulk_io={}", if pipes { "on" } else { "off" });
    let opts = options(pipes, blob_bytes);
    let value = |i: u64, gen: u64| -> Vec<u8> {
        let n = if i.is_multiple_of(blob_every) {
            blob_bytes
        } else {
            value_bytes
        };
        let mut rng = SplitMix64::new(i ^ (gen << 40));
        (0..n).map(|_| b'a' + (rng.next_u64() % 26) as u8).collect()
    };
    let key = |i: u64| format!("{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).into_bytes();
    {
        let db = DB::open(dir, opts.clone()).map_err(kv)?;
        for i in 0..records {
            db.put(&key(i), &value(i, 0)).map_err(kv)?;
        }
        db.flush().map_err(kv)?;
        db.close().map_err(kv)?;
    }
    let mut rows = Vec::new();
    drop_dir_cache(dir);
    let db = DB::open(dir, opts.clone()).map_err(kv)?;
    let mechanism = db.bulk_io().to_string();
    let input = dir_bytes(dir, "sst");
    let (c0, t0) = (cpu_now(), Instant::now());
    db.compact_range(None, None).map_err(kv)?;
    let secs = t0.elapsed().as_secs_f64();
    rows.push(CompactRow {
        bench: "pipes-compact",
        engine: engine.clone(),
        phase: "compact",
        records,
        repeat,
        input_bytes: input,
        seconds: secs,
        mib_per_s: input as f64 / secs / (1 << 20) as f64,
        cpu_seconds: cpu_now() - c0,
        mechanism: mechanism.clone(),
    });
    // Garbage: overwrite every other large value, so that the old segments are half dead.
    let mut i = 0;
    while i < records {
        db.put(&key(i), &value(i, 1)).map_err(kv)?;
        i += 2 * blob_every;
    }
    db.flush().map_err(kv)?;
    db.compact_range(None, None).map_err(kv)?;
    db.close().map_err(kv)?;
    drop_dir_cache(dir);
    let db = DB::open(dir, opts).map_err(kv)?;
    let input = dir_bytes(dir, "vlog");
    let (c0, t0) = (cpu_now(), Instant::now());
    let report = db.gc_with_ratio(0.3).map_err(kv)?;
    let secs = t0.elapsed().as_secs_f64();
    if report.segments_collected == 0 {
        return Err(Fail::Run("the collection collected nothing".into()));
    }
    rows.push(CompactRow {
        bench: "pipes-compact",
        engine,
        phase: "gc",
        records,
        repeat,
        input_bytes: input,
        seconds: secs,
        mib_per_s: input as f64 / secs / (1 << 20) as f64,
        cpu_seconds: cpu_now() - c0,
        mechanism,
    });
    db.close().map_err(kv)?;
    Ok(rows)
}
