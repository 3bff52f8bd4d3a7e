//! `attune-bench merge-counters`: counters incremented with the `add` merge operator against
//! the same counters incremented by read-modify-write (`get`, add one, `put`).
//!
//! Run: `attune-bench merge-counters [--counters N] [--increments N] [--dir DIR] [--out FILE]
//! [--json]`. Each variant starts from a fresh database under `--dir` (default options plus
//! `merge_operator=add`), one thread, unsynced writes:
//!
//! - `increment`: `--increments` increments of counters drawn uniformly (xorshift, the same
//!   sequence for both variants) from `--counters` 8-byte little-endian counters; `merge`
//!   writes one operand per increment, `get+put` reads the counter, adds one and writes it back.
//!   The ratio row is merge ÷ get+put throughput.
//! - `read`: a get of every counter (the fastest of three passes), for the merge database after
//!   a flush (the flush combines each counter's operands into one; a read combines that with
//!   what is under it), after a full compaction (folded into one value per counter), and for the
//!   get+put database (one value per counter); ratios are over the get+put database's rate.
//!
//! Every counter is checked against the expected count in both databases. RocksDB's merge
//! operator is not reached through the harness's C-API adapter (it needs C callbacks for the
//! operator), so the peers are Attune's two ways of counting in the same run.

use std::path::Path;
use std::time::Instant;

use attune_kv::{Options, DB};
use serde::Serialize;

use crate::output::{round_to, Fail, Sink};

const USAGE: &str = "usage: attune-bench merge-counters [--counters N] [--increments N] \
                     [--dir DIR] [--out FILE] [--json]";

#[derive(Serialize)]
struct Row<'a> {
    bench: &'static str,
    case: &'a str,
    variant: &'a str,
    counters: u64,
    ops: u64,
    seconds: f64,
    ops_per_sec: f64,
    /// merge ÷ get+put (increment ratio row); the variant's rate ÷ get+put's (reads).
    ratio: Option<f64>,
}

fn key(i: u64) -> Vec<u8> {
    format!("counter:{i:08}").into_bytes()
}

fn open(dir: &Path) -> Result<DB, Fail> {
    let _ = std::fs::remove_dir_all(dir);
    let mut o = Options::default();
    o.set("merge_operator", "add")
        .map_err(|e| Fail::Run(e.to_string()))?;
    DB::open(dir, o).map_err(|e| Fail::Run(format!("open {}: {e}", dir.display())))
}

/// The counters incremented, in order: xorshift64*, the same for every variant.
fn picks(n: u64, counters: u64) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D) % counters
        })
        .collect()
}

fn value(v: Option<Vec<u8>>) -> Result<u64, Fail> {
    match v {
        None => Ok(0),
        Some(b) => b
            .as_slice()
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| Fail::Run(format!("a counter holds {} bytes", b.len()))),
    }
}

/// Gets of every counter per second, the fastest of three passes; each must hold `want`.
fn read_all(db: &DB, counters: u64, want: &[u64]) -> Result<f64, Fail> {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for i in 0..counters {
            let v = value(db.get(&key(i)).map_err(|e| e.to_string())?)?;
            if v != want[i as usize] {
                return Err(Fail::Run(format!(
                    "counter {i} reads {v}, expected {}",
                    want[i as usize]
                )));
            }
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Runs `attune-bench merge-counters ARGS`.
pub fn run(args: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let (mut counters, mut increments) = (10_000u64, 1_000_000u64);
    let mut dir = std::env::temp_dir().join("attune-merge-counters");
    if !crate::options::counts_and_dir(
        &args,
        &mut [
            ("--counters", &mut counters),
            ("--increments", &mut increments),
        ],
        &mut dir,
        USAGE,
    )? {
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let emit = |case: &str, variant: &str, ops: u64, secs: f64, ratio: Option<f64>| {
        let rate = ops as f64 / secs.max(1e-9);
        if sink.human() {
            let r = ratio.map_or(String::new(), |r| format!("  ratio {r:.2}"));
            println!("{case:<9} {variant:<22} {ops:>9} ops {secs:>9.4} s {rate:>14.0} ops/s{r}");
        }
        sink.row(&Row {
            bench: "merge-counters",
            case,
            variant,
            counters,
            ops,
            seconds: round_to(secs, 6),
            ops_per_sec: rate.round(),
            ratio: ratio.map(|r| round_to(r, 3)),
        })
    };
    let order = picks(increments, counters);
    let mut want = vec![0u64; counters as usize];
    for &c in &order {
        want[c as usize] += 1;
    }

    // get+put first: its database stays open for the read comparison.
    let rmw = open(&dir.join("get-put"))?;
    let t = Instant::now();
    for &c in &order {
        let k = key(c);
        let v = value(rmw.get(&k).map_err(|e| e.to_string())?)?;
        rmw.put(&k, &(v + 1).to_le_bytes())
            .map_err(|e| e.to_string())?;
    }
    let rmw_secs = t.elapsed().as_secs_f64();
    emit("increment", "get+put", increments, rmw_secs, None)?;

    let merged = open(&dir.join("merge"))?;
    let t = Instant::now();
    for &c in &order {
        merged
            .merge(&key(c), &1u64.to_le_bytes())
            .map_err(|e| e.to_string())?;
    }
    let merge_secs = t.elapsed().as_secs_f64();
    emit("increment", "merge", increments, merge_secs, None)?;
    emit(
        "increment",
        "ratio",
        increments,
        merge_secs,
        Some(rmw_secs / merge_secs.max(1e-9)),
    )?;

    for db in [&rmw, &merged] {
        db.flush().map_err(|e| e.to_string())?;
    }
    let base = read_all(&rmw, counters, &want)?;
    emit("read", "get+put", counters, base, Some(1.0))?;
    let s = read_all(&merged, counters, &want)?;
    emit(
        "read",
        "merge, flushed",
        counters,
        s,
        Some(base / s.max(1e-9)),
    )?;
    merged
        .compact_range(None, None)
        .map_err(|e| e.to_string())?;
    let s = read_all(&merged, counters, &want)?;
    emit(
        "read",
        "merge, compacted",
        counters,
        s,
        Some(base / s.max(1e-9)),
    )?;
    merged.close().map_err(|e| e.to_string())?;
    rmw.close().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
