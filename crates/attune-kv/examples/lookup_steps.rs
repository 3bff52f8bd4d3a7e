//! Latency breakdown of point lookups per step (memtable, finding files, Bloom filter, index
//! search or model prediction, block load + window/block search, value), with learned indexes
//! off and on, over attune-workload's key sets: the "latency breakdown per lookup step" of
//! issue #6 (docs/learned-index.md). Needs the `step-timing` feature (src/steps.rs), which adds
//! one clock read per step; the rows carry the instrumented total so it can be set against an
//! uninstrumented run.
//!
//! ```sh
//! cargo run --release -p attune-kv --features step-timing --example lookup_steps -- \
//!     --records 200000 --gets 400000 --repeat 3 --json benches/results/learned-steps.jsonl
//! ```
//!
//! Each key set: 16-byte keys (attune-workload's encoding), 100-byte values, loaded in key
//! order, compacted into tables and learned (`learn_all`); then, alternating off / model for
//! `--repeat` rounds in one process, `--gets` uniform random present-key lookups after a warm
//! pass. A row holds the round with the median total.

#![allow(clippy::unwrap_used)] // a measurement tool: a failure is the report

use attune_kv::internals::steps::{self, STEPS, STEP_NAMES};
use attune_kv::LearnedIndex;
use attune_kv::{Compression, Options, DB};
use attune_workload::keys::{encode_key16, KeySet};
use std::io::Write;
use std::time::Instant;

fn opts(mode: LearnedIndex) -> Options {
    Options {
        learned_index: mode,
        learned_wait_ms: 3_600_000,
        compression: Compression::None,
        block_cache_size: 256 << 20,
        ..Options::default()
    }
}

fn machine() -> serde_like::Json {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    serde_like::obj(&[
        ("nproc", serde_like::num(nproc as f64)),
        ("cpu", serde_like::str(&cpu)),
        ("kernel", serde_like::str(kernel.trim())),
    ])
}

/// Just enough JSON for flat rows (the example has no serde dependency).
mod serde_like {
    pub type Json = String;
    pub fn str(s: &str) -> Json {
        let mut o = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => o.push_str("\\\""),
                '\\' => o.push_str("\\\\"),
                c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
                c => o.push(c),
            }
        }
        o.push('"');
        o
    }
    pub fn num(v: f64) -> Json {
        if v.is_finite() {
            format!("{v}")
        } else {
            "null".into()
        }
    }
    pub fn obj(fields: &[(&str, Json)]) -> Json {
        let inner: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{}:{v}", str(k)))
            .collect();
        format!("{{{}}}", inner.join(","))
    }
}

struct Args {
    keysets: Vec<String>,
    records: u64,
    gets: u64,
    repeat: usize,
    json: Option<String>,
    dir: std::path::PathBuf,
}

fn parse_args() -> Args {
    let mut a = Args {
        keysets: ["linear", "seg1", "seg10", "normal", "lognormal", "osm"]
            .map(String::from)
            .to_vec(),
        records: 200_000,
        gets: 400_000,
        repeat: 3,
        json: None,
        dir: std::env::temp_dir().join("attune-lookup-steps"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--keysets" => a.keysets = val().split(',').map(String::from).collect(),
            "--records" => a.records = val().parse().unwrap(),
            "--gets" => a.gets = val().parse().unwrap(),
            "--repeat" => a.repeat = val().parse().unwrap(),
            "--json" => a.json = Some(val()),
            "--dir" => a.dir = val().into(),
            "--help" | "-h" => {
                println!(
                    "lookup_steps [--keysets a,b] [--records N] [--gets N] [--repeat N] \
                     [--json FILE] [--dir DIR]"
                );
                std::process::exit(0);
            }
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

fn main() {
    let a = parse_args();
    let command = std::iter::once(
        "cargo run --release -p attune-kv --features step-timing --example lookup_steps --"
            .to_string(),
    )
    .chain(std::env::args().skip(1))
    .collect::<Vec<_>>()
    .join(" ");
    let mut out = a.json.as_ref().map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap()
    });
    let value = vec![b'v'; 100];
    println!(
        "| key set | path | lookups | {} | total ns |",
        STEP_NAMES.join(" | ")
    );
    println!("|---|---|---|{}---|", "---|".repeat(STEPS));
    for ks_name in &a.keysets {
        let ks = KeySet::from_name(ks_name, a.records, 42).unwrap();
        let _ = std::fs::remove_dir_all(&a.dir);
        {
            let db = DB::open(&a.dir, opts(LearnedIndex::Always)).unwrap();
            for i in 0..ks.len() {
                db.put(&encode_key16(ks.key_at(i)), &value).unwrap();
            }
            db.flush().unwrap();
            db.compact_range(None, None).unwrap();
            db.learn_all().unwrap();
            db.close().unwrap();
        }
        let mut results: Vec<Vec<(f64, [f64; STEPS])>> = vec![Vec::new(), Vec::new()];
        for round in 0..a.repeat {
            for (m, mode) in [LearnedIndex::Off, LearnedIndex::Always]
                .into_iter()
                .enumerate()
            {
                let db = DB::open(&a.dir, opts(mode)).unwrap();
                for i in 0..ks.len() {
                    let _ = db.get(&encode_key16(ks.key_at(i))).unwrap();
                }
                let _ = steps::take();
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ round as u64;
                let t = Instant::now();
                for _ in 0..a.gets {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let k = ks.key_at((x >> 11) % ks.len());
                    assert!(db.get(&encode_key16(k)).unwrap().is_some());
                }
                let wall = t.elapsed().as_nanos() as f64 / a.gets as f64;
                let (n, ns) = steps::take();
                assert_eq!(n, a.gets, "every get was timed (built with step-timing?)");
                let per: [f64; STEPS] = ns.map(|v| v as f64 / n as f64);
                results[m].push((wall, per));
                db.close().unwrap();
            }
        }
        for (m, path) in ["baseline", "model"].into_iter().enumerate() {
            let mut rs = results[m].clone();
            rs.sort_by(|x, y| x.1.iter().sum::<f64>().total_cmp(&y.1.iter().sum::<f64>()));
            let (wall, per) = rs[(rs.len() - 1) / 2];
            let total: f64 = per.iter().sum();
            println!(
                "| {ks_name} | {path} | {} | {} | {total:.0} |",
                a.gets,
                per.iter()
                    .map(|v| format!("{v:.0}"))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
            if let Some(f) = out.as_mut() {
                let mut fields: Vec<(&str, String)> = vec![
                    ("suite", serde_like::str("learned-steps")),
                    ("key_set", serde_like::str(ks_name)),
                    ("path", serde_like::str(path)),
                    ("records", serde_like::num(a.records as f64)),
                    ("lookups", serde_like::num(a.gets as f64)),
                    ("repeats", serde_like::num(a.repeat as f64)),
                ];
                let names: Vec<String> = STEP_NAMES.iter().map(|s| format!("ns_{s}")).collect();
                for (i, name) in names.iter().enumerate() {
                    fields.push((
                        name.as_str(),
                        serde_like::num((per[i] * 10.0).round() / 10.0),
                    ));
                }
                fields.push(("ns_total", serde_like::num((total * 10.0).round() / 10.0)));
                fields.push(("ns_wall", serde_like::num((wall * 10.0).round() / 10.0)));
                fields.push(("command", serde_like::str(&command)));
                fields.push(("machine", machine()));
                writeln!(f, "{}", serde_like::obj(&fields)).unwrap();
            }
        }
    }
    let _ = std::fs::remove_dir_all(&a.dir);
}
