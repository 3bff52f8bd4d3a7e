//! Latency breakdown of point lookups per step (memtable, finding files, Bloom filter, index
//! search or model prediction, block load + window/block search, value), with learned indexes
//! off and on, over attune-workload's key sets: the "latency breakdown per lookup step" of
//! docs/learned-index.md. Needs attune-bench's `step-timing` feature (attune-kv's
//! `attune_kv::internals::steps`), which adds one clock read per step; the rows carry the instrumented total
//! so it can be set against an uninstrumented run. A binary built without the feature refuses to
//! run this subcommand (its every step would read zero).
//!
//! ```sh
//! cargo build --release -p attune-bench --features step-timing
//! attune-bench lookup-steps --records 200000 --gets 400000 --repeat 3 \
//!     --out benches/results/learned-steps.jsonl
//! ```
//!
//! Each key set: 16-byte keys (attune-workload's encoding), 100-byte values, loaded in key
//! order, compacted into tables and learned (`learn_all`); then, alternating off / model for
//! `--repeat` rounds in one process, `--gets` uniform random present-key lookups after a warm
//! pass. A row holds the round with the median total.

use attune_kv::internals::steps::{self, STEPS, STEP_NAMES};
use attune_kv::LearnedIndex;
use attune_kv::{Compression, Options, DB};
use attune_workload::keys::{encode_key16, KeySet};
use serde::Serialize;
use std::time::Instant;

use crate::output::{round_to, Fail, Fields, Sink};

const USAGE: &str = "usage: attune-bench lookup-steps [--keysets a,b] [--records N] [--gets N] \
                     [--repeat N] [--dir DIR] [--out FILE] [--json]";

fn opts(mode: LearnedIndex) -> Options {
    Options {
        learned_index: mode,
        learned_wait_ms: 3_600_000,
        compression: Compression::None,
        block_cache_size: 256 << 20,
        ..Options::default()
    }
}

/// One row: a key set's lookups on one path (median round).
#[derive(Serialize)]
struct Row<'a> {
    suite: &'static str,
    key_set: &'a str,
    path: &'static str,
    records: u64,
    lookups: u64,
    repeats: usize,
    /// `ns_<step>`: mean nanoseconds per lookup in each step (`attune_kv::internals::steps::STEP_NAMES`).
    #[serde(flatten)]
    steps: Fields,
    ns_total: f64,
    ns_wall: f64,
}

struct Args {
    keysets: Vec<String>,
    records: u64,
    gets: u64,
    repeat: usize,
    dir: std::path::PathBuf,
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, Fail> {
    v.parse()
        .map_err(|_| Fail::Usage(format!("{flag}: bad number `{v}`")))
}

/// `None` for `--help`.
fn parse_args(argv: &[String]) -> Result<Option<Args>, Fail> {
    let mut a = Args {
        keysets: ["linear", "seg1", "seg10", "normal", "lognormal", "osm"]
            .map(String::from)
            .to_vec(),
        records: 200_000,
        gets: 400_000,
        repeat: 3,
        dir: std::env::temp_dir().join(format!("attune-lookup-steps-{}", std::process::id())),
    };
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            return Ok(None);
        }
        let v = it
            .next()
            .ok_or_else(|| Fail::Usage(format!("{flag} needs a value\n{USAGE}")))?;
        match flag.as_str() {
            "--keysets" => a.keysets = v.split(',').map(String::from).collect(),
            "--records" => a.records = num(flag, v)?,
            "--gets" => a.gets = num(flag, v)?,
            "--repeat" => a.repeat = num(flag, v)?,
            "--dir" => a.dir = v.into(),
            other => return Err(Fail::Usage(format!("unknown argument {other}\n{USAGE}"))),
        }
    }
    if a.repeat == 0 || a.gets == 0 || a.records == 0 {
        return Err(Fail::Usage(
            "--records, --gets and --repeat must be >= 1".into(),
        ));
    }
    Ok(Some(a))
}

fn kv(what: &str, e: attune_kv::Error) -> Fail {
    Fail::Run(format!("{what}: {e}"))
}

/// Runs `attune-bench lookup-steps ARGS`.
pub fn run(argv: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let Some(a) = parse_args(&argv)? else {
        return Ok(());
    };
    if !cfg!(feature = "step-timing") {
        return Err(Fail::Usage(
            "this binary has no step timing: build it with \
             `cargo build --release -p attune-bench --features step-timing`"
                .into(),
        ));
    }
    let value = vec![b'v'; 100];
    if sink.human() {
        println!(
            "| key set | path | lookups | {} | total ns |",
            STEP_NAMES.join(" | ")
        );
        println!("|---|---|---|{}---|", "---|".repeat(STEPS));
    }
    for ks_name in &a.keysets {
        let ks =
            KeySet::from_name(ks_name, a.records, 42).map_err(|e| Fail::Usage(e.to_string()))?;
        let _ = std::fs::remove_dir_all(&a.dir);
        {
            let db = DB::open(&a.dir, opts(LearnedIndex::Always)).map_err(|e| kv("open", e))?;
            for i in 0..ks.len() {
                db.put(&encode_key16(ks.key_at(i)), &value)
                    .map_err(|e| kv("put", e))?;
            }
            db.flush().map_err(|e| kv("flush", e))?;
            db.compact_range(None, None).map_err(|e| kv("compact", e))?;
            db.learn_all().map_err(|e| kv("learn", e))?;
            db.close().map_err(|e| kv("close", e))?;
        }
        let mut results: Vec<Vec<(f64, [f64; STEPS])>> = vec![Vec::new(), Vec::new()];
        for round in 0..a.repeat {
            for (m, mode) in [LearnedIndex::Off, LearnedIndex::Always]
                .into_iter()
                .enumerate()
            {
                let db = DB::open(&a.dir, opts(mode)).map_err(|e| kv("open", e))?;
                for i in 0..ks.len() {
                    let _ = db
                        .get(&encode_key16(ks.key_at(i)))
                        .map_err(|e| kv("get", e))?;
                }
                let _ = steps::take();
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ round as u64;
                let t = Instant::now();
                for _ in 0..a.gets {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let k = ks.key_at((x >> 11) % ks.len());
                    if db
                        .get(&encode_key16(k))
                        .map_err(|e| kv("get", e))?
                        .is_none()
                    {
                        return Err(Fail::Run(format!("key {k} of {ks_name} not found")));
                    }
                }
                let wall = t.elapsed().as_nanos() as f64 / a.gets as f64;
                let (n, ns) = steps::take();
                if n != a.gets {
                    return Err(Fail::Run(format!("{n} of {} gets were timed", a.gets)));
                }
                let per: [f64; STEPS] = ns.map(|v| v as f64 / n as f64);
                results[m].push((wall, per));
                db.close().map_err(|e| kv("close", e))?;
            }
        }
        for (m, path) in ["baseline", "model"].into_iter().enumerate() {
            let mut rs = results[m].clone();
            rs.sort_by(|x, y| x.1.iter().sum::<f64>().total_cmp(&y.1.iter().sum::<f64>()));
            let (wall, per) = rs[(rs.len() - 1) / 2];
            let total: f64 = per.iter().sum();
            if sink.human() {
                println!(
                    "| {ks_name} | {path} | {} | {} | {total:.0} |",
                    a.gets,
                    per.iter()
                        .map(|v| format!("{v:.0}"))
                        .collect::<Vec<_>>()
                        .join(" | ")
                );
            }
            let round1 = |v: f64| round_to(v, 1);
            let mut steps = Fields::default();
            for (name, ns) in STEP_NAMES.iter().zip(per) {
                steps.push(format!("ns_{name}"), round1(ns));
            }
            let row = Row {
                suite: "learned-steps",
                key_set: ks_name,
                path,
                records: a.records,
                lookups: a.gets,
                repeats: a.repeat,
                steps,
                ns_total: round1(total),
                ns_wall: round1(wall),
            };
            sink.row(&row)?;
        }
    }
    let _ = std::fs::remove_dir_all(&a.dir);
    Ok(())
}
