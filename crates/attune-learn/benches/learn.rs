//! Benchmark harness for attune-learn's learned index: lookup time (model predict + last-mile
//! search over a sorted in-memory key array) against plain binary search over the same array,
//! model size, segments and training time, over attune-workload's key sets, per error bound δ.
//!
//! Run (one JSON object per line on stdout, appended to FILE with `--out`):
//!
//! ```text
//! cargo bench -p attune-learn --bench learn -- [--sizes 1000000,10000000]
//!     [--deltas 2,4,8,16,32] [--sets linear,seg1,seg10,normal,lognormal,osm]
//!     [--lookups 1000000] [--seed 42] [--out benches/results/learn.jsonl]
//! ```
//!
//! A relative `--out` path is resolved from the workspace root. Every row carries the exact
//! command and the machine. Both fits (cone, pivot) run for every δ, each with binary and radix
//! segment search; at the default δ a `learn-bytes16` row runs 16-byte keys through the key
//! mapper. Times are medians of 3 runs, measured as thread CPU time (robust on a shared, loaded
//! machine) and as wall time. Lookups are uniform over the keys (positive lookups) plus, for each,
//! its successor when that is absent (negative lookups in the key set's gaps). The model and
//! binary search must return the same lower bound for every query or the harness exits with an
//! error. Single-threaded.

#![allow(clippy::unwrap_used)] // a benchmark harness: a failed unwrap is a failed run

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use attune_learn::plr::RADIX_SEGMENTS_MIN;
use attune_learn::{LearnedIndex, PlrFit, PlrModel, SegmentSearch, DELTA_DEFAULT};
use attune_workload::keys::{encode_key16, KeySet};
use attune_workload::rng::Xoshiro256;

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{{\"nproc\":{nproc},\"cpu\":\"{}\",\"kernel\":\"{}\"}}",
        cpu.replace('"', "'"),
        kernel
    )
}

fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(-1.0)
}

/// CPU time of the calling thread in nanoseconds.
fn thread_cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// Median (cpu, wall) ns per item of 3 runs of `f` (which handles `items` items and returns a
/// checksum), and the checksum.
fn measure(items: usize, mut f: impl FnMut() -> u64) -> (f64, f64, u64) {
    let mut cpu = Vec::new();
    let mut wall = Vec::new();
    let mut sum = 0;
    for _ in 0..3 {
        let c0 = thread_cpu_ns();
        let t = Instant::now();
        sum = black_box(f());
        wall.push(t.elapsed().as_nanos() as f64 / items as f64);
        cpu.push((thread_cpu_ns() - c0) as f64 / items as f64);
    }
    cpu.sort_by(f64::total_cmp);
    wall.sort_by(f64::total_cmp);
    (cpu[1], wall[1], sum)
}

struct Args {
    sizes: Vec<u64>,
    deltas: Vec<u32>,
    sets: Vec<String>,
    lookups: usize,
    seed: u64,
    out: Option<String>,
}

fn parse_list<T: std::str::FromStr>(s: &str, what: &str) -> Vec<T> {
    s.split(',')
        .map(|v| {
            v.trim().parse().unwrap_or_else(|_| {
                eprintln!("error: bad {what} `{v}`");
                std::process::exit(2)
            })
        })
        .collect()
}

fn parse_args() -> Args {
    let mut a = Args {
        sizes: vec![1_000_000, 10_000_000],
        deltas: vec![2, 4, 8, 16, 32],
        sets: ["linear", "seg1", "seg10", "normal", "lognormal", "osm"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        lookups: 1_000_000,
        seed: 42,
        out: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let val = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--sizes" => a.sizes = parse_list(&val, "size"),
            "--deltas" => a.deltas = parse_list(&val, "delta"),
            "--sets" => a.sets = parse_list(&val, "key set"),
            "--lookups" => a.lookups = parse_list(&val, "lookup count")[0],
            "--seed" => a.seed = parse_list(&val, "seed")[0],
            "--out" => a.out = Some(val),
            "--bench" => {
                i += 1; // cargo bench passes --bench to harness = false targets
                continue;
            }
            other => {
                eprintln!("error: unknown argument `{other}` (see the file's doc comment)");
                std::process::exit(2)
            }
        }
        i += 2;
    }
    a
}

fn main() {
    let args = parse_args();
    let command = format!(
        "cargo bench -p attune-learn --bench learn -- {}",
        std::env::args()
            .skip(1)
            .filter(|a| a != "--bench")
            .collect::<Vec<_>>()
            .join(" ")
    );
    let machine = machine();
    // cargo runs benches in the crate's directory: a relative --out is taken from the
    // workspace root, so the documented command writes to benches/results/ at the top.
    let mut out = args.out.as_ref().map(|p| {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(p);
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .unwrap_or_else(|e| {
                eprintln!("error: cannot open {}: {e}", p.display());
                std::process::exit(2)
            })
    });
    for set_name in &args.sets {
        for &n in &args.sizes {
            let set = KeySet::from_name(set_name, n, args.seed).unwrap_or_else(|e| {
                eprintln!("error: {e}");
                std::process::exit(2)
            });
            let keys: Vec<u64> = set.iter().collect();
            // Queries: uniform positive keys, and as many absent keys (successor of a key where
            // that is not itself a key; key sets with no gaps give positives only).
            let mut rng = Xoshiro256::new(args.seed, n);
            let mut queries = Vec::with_capacity(args.lookups * 2);
            let mut negatives = 0usize;
            for _ in 0..args.lookups {
                let i = rng.below(n) as usize;
                queries.push(keys[i]);
                let succ = keys[i].wrapping_add(1);
                if keys.get(i + 1) != Some(&succ) && succ != 0 {
                    queries.push(succ);
                    negatives += 1;
                }
            }
            // Shuffle so positives and negatives interleave unpredictably (Fisher-Yates).
            for i in (1..queries.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                queries.swap(i, j);
            }
            let q = &queries;
            let (bs_cpu, bs_wall, bs_sum) = measure(q.len(), || {
                q.iter()
                    .map(|&x| keys.partition_point(|&k| k < x) as u64)
                    .fold(0u64, u64::wrapping_add)
            });
            for (&delta, fit) in args
                .deltas
                .iter()
                .flat_map(|d| [(d, PlrFit::Cone), (d, PlrFit::Pivot)])
            {
                let fit_name = match fit {
                    PlrFit::Cone => "greedy-plr-cone",
                    PlrFit::Pivot => "greedy-plr-pivot",
                };
                let mut train_cpu = Vec::new();
                let mut model = None;
                for _ in 0..3 {
                    let c0 = thread_cpu_ns();
                    let m = PlrModel::train_with(&keys, delta, fit).unwrap();
                    train_cpu.push((thread_cpu_ns() - c0) as f64 / n as f64);
                    model = Some(m);
                }
                train_cpu.sort_by(f64::total_cmp);
                let mut m = model.unwrap();
                // Size and default search path of the model as built (SegmentSearch::Auto); the
                // forced radix measurement below may add a table.
                let model_bytes = m.size_bytes();
                let default_radix = m.segment_count() >= RADIX_SEGMENTS_MIN;
                let mut row_search = Vec::new();
                for (name, search) in [
                    ("binary", SegmentSearch::Binary),
                    ("radix", SegmentSearch::Radix),
                ] {
                    m.set_segment_search(search);
                    let mr = &m;
                    let (cpu, wall, sum) = measure(q.len(), || {
                        q.iter()
                            .map(|&x| mr.lower_bound(&keys, x) as u64)
                            .fold(0u64, u64::wrapping_add)
                    });
                    if sum != bs_sum {
                        eprintln!(
                            "error: model lookups disagree with binary search on {set_name} \
                             n={n} delta={delta} {fit_name} ({name})"
                        );
                        std::process::exit(1);
                    }
                    row_search.push((name, cpu, wall));
                }
                let qual = m.quality();
                let encoded = attune_learn::LearnedIndex::from_u64_model(m.clone()).encoded_len();
                let best_cpu = row_search.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
                let default_cpu = row_search[usize::from(default_radix)].1;
                let row = format!(
                    "{{\"bench\":\"learn\",\"model\":\"{fit_name}\",\"keyset\":\"{set_name}\",\
                     \"n\":{n},\"delta\":{delta},\"segments\":{},\"model_bytes\":{model_bytes},\
                     \"encoded_bytes\":{encoded},\"model_bytes_per_key\":{:.4},\
                     \"train_ns_per_key_cpu\":{:.2},\"queries\":{},\"negatives\":{negatives},\
                     \"lookup_ns_bsearch_cpu\":{bs_cpu:.1},\"lookup_ns_bsearch_wall\":{bs_wall:.1},\
                     \"lookup_ns_model_binary_cpu\":{:.1},\"lookup_ns_model_binary_wall\":{:.1},\
                     \"lookup_ns_model_radix_cpu\":{:.1},\"lookup_ns_model_radix_wall\":{:.1},\
                     \"speedup_best_cpu\":{:.3},\"default_search\":\"{}\",\
                     \"speedup_default_cpu\":{:.3},\"mean_window\":{:.1},\"loadavg_1m\":{:.2},\
                     \"command\":\"{command}\",\"machine\":{machine}}}",
                    m.segment_count(),
                    model_bytes as f64 / n as f64,
                    train_cpu[1],
                    q.len(),
                    row_search[0].1,
                    row_search[0].2,
                    row_search[1].1,
                    row_search[1].2,
                    bs_cpu / best_cpu,
                    if default_radix { "radix" } else { "binary" },
                    bs_cpu / default_cpu,
                    qual.mean_window,
                    loadavg(),
                );
                println!("{row}");
                if let Some(f) = out.as_mut() {
                    writeln!(f, "{row}").unwrap();
                }
            }
            if args.deltas.contains(&DELTA_DEFAULT) {
                let row = bytes16_row(&keys, q, set_name, &command, &machine);
                println!("{row}");
                if let Some(f) = out.as_mut() {
                    writeln!(f, "{row}").unwrap();
                }
            }
        }
    }
}

/// The byte-key path an engine takes: 16-byte keys (8-byte big-endian integer + 8 zero bytes, as
/// Bourbon's evaluation) through the key mapper and model, against binary search over the same
/// 16-byte keys, at the default delta.
fn bytes16_row(keys: &[u64], q: &[u64], set_name: &str, command: &str, machine: &str) -> String {
    let n = keys.len();
    let keys16: Vec<[u8; 16]> = keys.iter().map(|&k| encode_key16(k)).collect();
    let q16: Vec<[u8; 16]> = q.iter().map(|&k| encode_key16(k)).collect();
    let c0 = thread_cpu_ns();
    let idx = LearnedIndex::train(&keys16, DELTA_DEFAULT).unwrap();
    let train = (thread_cpu_ns() - c0) as f64 / n as f64;
    let (bs_cpu, bs_wall, bs_sum) = measure(q16.len(), || {
        q16.iter()
            .map(|x| keys16.partition_point(|k| k < x) as u64)
            .fold(0u64, u64::wrapping_add)
    });
    let (m_cpu, m_wall, m_sum) = measure(q16.len(), || {
        q16.iter()
            .map(|x| {
                let r = idx.predict(x).to_usize();
                (r.start + keys16[r.clone()].partition_point(|k| k < x)) as u64
            })
            .fold(0u64, u64::wrapping_add)
    });
    if m_sum != bs_sum {
        eprintln!("error: 16-byte model lookups disagree with binary search on {set_name} n={n}");
        std::process::exit(1);
    }
    format!(
        "{{\"bench\":\"learn-bytes16\",\"model\":\"greedy-plr-{}\",\"keyset\":\"{set_name}\",\
         \"n\":{n},\"delta\":{DELTA_DEFAULT},\"prefix_len\":{},\"segments\":{},\
         \"distinct_mapped\":{},\"train_ns_per_key_cpu\":{train:.2},\"queries\":{},\
         \"lookup_ns_bsearch_cpu\":{bs_cpu:.1},\"lookup_ns_bsearch_wall\":{bs_wall:.1},\
         \"lookup_ns_model_cpu\":{m_cpu:.1},\"lookup_ns_model_wall\":{m_wall:.1},\
         \"speedup_cpu\":{:.3},\"loadavg_1m\":{:.2},\"command\":\"{command}\",\
         \"machine\":{machine}}}",
        match idx.model().fit() {
            PlrFit::Cone => "cone",
            PlrFit::Pivot => "pivot",
        },
        idx.mapper().prefix().len(),
        idx.model().segment_count(),
        idx.quality().distinct_keys,
        q16.len(),
        bs_cpu / m_cpu,
        loadavg(),
    )
}
