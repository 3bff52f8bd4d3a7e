//! `attune-bench learn`: attune-learn's learned index: lookup time (model predict + last-mile
//! search over a sorted in-memory key array) against plain binary search over the same array,
//! model size, segments and training time, over attune-workload's key sets, per error bound δ.
//!
//! Run (one row per line appended to FILE with `--out`, on stdout with `--json`):
//!
//! ```text
//! attune-bench learn [--sizes 1000000,10000000]
//!     [--deltas 2,4,8,16,32] [--sets linear,seg1,seg10,normal,lognormal,osm]
//!     [--lookups 1000000] [--seed 42] [--out benches/results/learn.jsonl]
//! ```
//!
//! Every row carries the exact command and the machine. Both fits (cone, pivot) run for every δ, each with binary and radix
//! segment search; at the default δ a `learn-bytes16` row runs 16-byte keys through the key
//! mapper. Times are medians of 3 runs, measured as thread CPU time (robust on a shared, loaded
//! machine) and as wall time. Lookups are uniform over the keys (positive lookups) plus, for each,
//! its successor when that is absent (negative lookups in the key set's gaps). The model and
//! binary search must return the same lower bound for every query or the harness exits with an
//! error. Single-threaded.

use std::hint::black_box;
use std::time::Instant;

use serde::Serialize;

use crate::output::{round_to, Fail, Sink};

use attune_learn::plr::RADIX_SEGMENTS_MIN;
use attune_learn::{LearnedIndex, PlrFit, PlrModel, SegmentSearch, DELTA_DEFAULT};
use attune_workload::keys::{encode_key16, KeySet};
use attune_workload::rng::Xoshiro256;

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
}

const USAGE: &str = "usage: attune-bench learn [--sizes 1000000,10000000] [--deltas 2,4,8,16,32] \
                     [--sets linear,seg1,...] [--lookups 1000000] [--seed 42] [--out FILE] [--json]";

fn parse_list<T: std::str::FromStr>(s: &str, what: &str) -> Result<Vec<T>, Fail> {
    s.split(',')
        .map(|v| {
            v.trim()
                .parse()
                .map_err(|_| Fail::Usage(format!("bad {what} `{v}`")))
        })
        .collect()
}

fn parse_one<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, Fail> {
    s.trim()
        .parse()
        .map_err(|_| Fail::Usage(format!("bad {what} `{s}`")))
}

/// `None` for `--help`.
fn parse_args(argv: &[String]) -> Result<Option<Args>, Fail> {
    let mut a = Args {
        sizes: vec![1_000_000, 10_000_000],
        deltas: vec![2, 4, 8, 16, 32],
        sets: ["linear", "seg1", "seg10", "normal", "lognormal", "osm"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        lookups: 1_000_000,
        seed: 42,
    };
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            return Ok(None);
        }
        let val = it
            .next()
            .ok_or_else(|| Fail::Usage(format!("{flag} needs a value\n{USAGE}")))?;
        match flag.as_str() {
            "--sizes" => a.sizes = parse_list(val, "size")?,
            "--deltas" => a.deltas = parse_list(val, "delta")?,
            "--sets" => a.sets = parse_list(val, "key set")?,
            "--lookups" => a.lookups = parse_one(val, "lookup count")?,
            "--seed" => a.seed = parse_one(val, "seed")?,
            other => return Err(Fail::Usage(format!("unknown argument `{other}`\n{USAGE}"))),
        }
    }
    Ok(Some(a))
}

/// One row: a fit at one error bound over one key set.
#[derive(Serialize)]
struct Row<'a> {
    bench: &'static str,
    model: &'static str,
    keyset: &'a str,
    n: u64,
    delta: u32,
    segments: usize,
    model_bytes: usize,
    encoded_bytes: usize,
    model_bytes_per_key: f64,
    train_ns_per_key_cpu: f64,
    queries: usize,
    negatives: usize,
    lookup_ns_bsearch_cpu: f64,
    lookup_ns_bsearch_wall: f64,
    lookup_ns_model_binary_cpu: f64,
    lookup_ns_model_binary_wall: f64,
    lookup_ns_model_radix_cpu: f64,
    lookup_ns_model_radix_wall: f64,
    speedup_best_cpu: f64,
    default_search: &'static str,
    speedup_default_cpu: f64,
    mean_window: f64,
}

/// One row: 16-byte keys through the key mapper at the default error bound.
#[derive(Serialize)]
struct Bytes16Row<'a> {
    bench: &'static str,
    model: &'static str,
    keyset: &'a str,
    n: usize,
    delta: u32,
    prefix_len: usize,
    segments: usize,
    distinct_mapped: u64,
    train_ns_per_key_cpu: f64,
    queries: usize,
    lookup_ns_bsearch_cpu: f64,
    lookup_ns_bsearch_wall: f64,
    lookup_ns_model_cpu: f64,
    lookup_ns_model_wall: f64,
    speedup_cpu: f64,
}

/// Runs `attune-bench learn ARGS`.
pub fn run(argv: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let Some(args) = parse_args(&argv)? else {
        return Ok(());
    };
    for set_name in &args.sets {
        for &n in &args.sizes {
            let set = KeySet::from_name(set_name, n, args.seed)
                .map_err(|e| Fail::Usage(e.to_string()))?;
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
                    let m = PlrModel::train_with(&keys, delta, fit)
                        .map_err(|e| format!("training {fit_name} on {set_name}: {e}"))?;
                    train_cpu.push((thread_cpu_ns() - c0) as f64 / n as f64);
                    model = Some(m);
                }
                train_cpu.sort_by(f64::total_cmp);
                let mut m = model.ok_or("no model trained")?;
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
                        return Err(Fail::Run(format!(
                            "model lookups disagree with binary search on {set_name} \
                             n={n} delta={delta} {fit_name} ({name})"
                        )));
                    }
                    row_search.push((name, cpu, wall));
                }
                let qual = m.quality();
                let encoded = attune_learn::LearnedIndex::from_u64_model(m.clone()).encoded_len();
                let best_cpu = row_search.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
                let default_cpu = row_search[usize::from(default_radix)].1;
                let row = Row {
                    bench: "learn",
                    model: fit_name,
                    keyset: set_name,
                    n,
                    delta,
                    segments: m.segment_count(),
                    model_bytes,
                    encoded_bytes: encoded,
                    model_bytes_per_key: round_to(model_bytes as f64 / n as f64, 4),
                    train_ns_per_key_cpu: round_to(train_cpu[1], 2),
                    queries: q.len(),
                    negatives,
                    lookup_ns_bsearch_cpu: round_to(bs_cpu, 1),
                    lookup_ns_bsearch_wall: round_to(bs_wall, 1),
                    lookup_ns_model_binary_cpu: round_to(row_search[0].1, 1),
                    lookup_ns_model_binary_wall: round_to(row_search[0].2, 1),
                    lookup_ns_model_radix_cpu: round_to(row_search[1].1, 1),
                    lookup_ns_model_radix_wall: round_to(row_search[1].2, 1),
                    speedup_best_cpu: round_to(bs_cpu / best_cpu, 3),
                    default_search: if default_radix { "radix" } else { "binary" },
                    speedup_default_cpu: round_to(bs_cpu / default_cpu, 3),
                    mean_window: round_to(qual.mean_window, 1),
                };
                if sink.human() {
                    println!(
                        "{set_name:<10} n={n:<9} delta={delta:<3} {fit_name:<17} {} segments, \
                         bsearch {bs_cpu:.1} ns, model {:.1} ns (x{:.2})",
                        row.segments, row.lookup_ns_model_binary_cpu, row.speedup_default_cpu
                    );
                }
                sink.row(&row)?;
            }
            if args.deltas.contains(&DELTA_DEFAULT) {
                let row = bytes16_row(&keys, q, set_name)?;
                if sink.human() {
                    println!(
                        "{set_name:<10} n={n:<9} 16-byte keys: bsearch {:.1} ns, model {:.1} ns",
                        row.lookup_ns_bsearch_cpu, row.lookup_ns_model_cpu
                    );
                }
                sink.row(&row)?;
            }
        }
    }
    Ok(())
}

/// The byte-key path an engine takes: 16-byte keys (8-byte big-endian integer + 8 zero bytes, as
/// Bourbon's evaluation) through the key mapper and model, against binary search over the same
/// 16-byte keys, at the default delta.
fn bytes16_row<'a>(keys: &[u64], q: &[u64], set_name: &'a str) -> Result<Bytes16Row<'a>, Fail> {
    let n = keys.len();
    let keys16: Vec<[u8; 16]> = keys.iter().map(|&k| encode_key16(k)).collect();
    let q16: Vec<[u8; 16]> = q.iter().map(|&k| encode_key16(k)).collect();
    let c0 = thread_cpu_ns();
    let idx = LearnedIndex::train(&keys16, DELTA_DEFAULT)
        .map_err(|e| format!("training on 16-byte {set_name} keys: {e}"))?;
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
        return Err(Fail::Run(format!(
            "16-byte model lookups disagree with binary search on {set_name} n={n}"
        )));
    }
    Ok(Bytes16Row {
        bench: "learn-bytes16",
        model: match idx.model().fit() {
            PlrFit::Cone => "greedy-plr-cone",
            PlrFit::Pivot => "greedy-plr-pivot",
        },
        keyset: set_name,
        n,
        delta: DELTA_DEFAULT,
        prefix_len: idx.mapper().prefix().len(),
        segments: idx.model().segment_count(),
        distinct_mapped: idx.quality().distinct_keys,
        train_ns_per_key_cpu: round_to(train, 2),
        queries: q16.len(),
        lookup_ns_bsearch_cpu: round_to(bs_cpu, 1),
        lookup_ns_bsearch_wall: round_to(bs_wall, 1),
        lookup_ns_model_cpu: round_to(m_cpu, 1),
        lookup_ns_model_wall: round_to(m_wall, 1),
        speedup_cpu: round_to(bs_cpu / m_cpu, 3),
    })
}
