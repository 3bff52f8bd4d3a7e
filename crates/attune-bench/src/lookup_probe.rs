//! Point-lookup probe for profiling the read path: loads `N` keys (db_bench's 16-byte keys,
//! 100-byte values) into a fully compacted database, then times random gets with learned
//! indexes off and on, alternating, in one process.
//!
//! `attune-bench lookup-probe DIR [N] [GETS] [ROUNDS] [--mode off|always] [--out F] [--json]`
//! (`--mode` runs one mode only, e.g. under `perf record`). `DIR` is loaded once and kept, so
//! later runs profile reads only. One row per round and mode.

use attune_kv::LearnedIndex;
use attune_kv::{Compression, Options, DB};
use serde::Serialize;
use std::time::Instant;

use crate::output::{round_to, Fail, Sink};

const USAGE: &str = "usage: attune-bench lookup-probe DIR [N=2000000] [GETS=2000000] [ROUNDS=3] \
                     [--mode off|always] [--out FILE] [--json]";

/// One row: one mode in one round.
#[derive(Serialize)]
struct Row {
    bench: &'static str,
    round: usize,
    mode: &'static str,
    records: u64,
    gets: u64,
    ns_per_get_wall: f64,
    ns_per_get_cpu: f64,
    found: u64,
    learned_lookups: u64,
    total_lookups: u64,
    model_bytes: u64,
}

fn kv(what: &str, e: attune_kv::Error) -> Fail {
    Fail::Run(format!("{what}: {e}"))
}

fn key(i: u64) -> Vec<u8> {
    let mut k = i.to_be_bytes().to_vec();
    k.resize(16, b'0');
    k
}

fn opts(mode: LearnedIndex) -> Options {
    Options {
        learned_index: mode,
        learned_wait_ms: 3_600_000,
        compression: Compression::None,
        block_cache_size: 2 << 30,
        ..Options::default()
    }
}

/// Runs `attune-bench lookup-probe ARGS`.
pub fn run(argv: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let mut pos = Vec::new();
    let mut only: Option<String> = None;
    let mut it = argv.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--mode" => only = Some(it.next().ok_or_else(|| Fail::Usage(USAGE.into()))?),
            _ if a.starts_with("--") => return Err(Fail::Usage(format!("unknown {a}\n{USAGE}"))),
            _ => pos.push(a),
        }
    }
    let num = |i: usize, default: u64| -> Result<u64, Fail> {
        pos.get(i).map_or(Ok(default), |s| {
            s.parse()
                .map_err(|_| Fail::Usage(format!("bad number `{s}`\n{USAGE}")))
        })
    };
    let dir = std::path::PathBuf::from(pos.first().ok_or_else(|| Fail::Usage(USAGE.into()))?);
    let n = num(1, 2_000_000)?.max(1);
    let gets = num(2, 2_000_000)?.max(1);
    let rounds = num(3, 3)? as usize;
    if !dir.join("CURRENT").exists() {
        let db = DB::open(&dir, opts(LearnedIndex::Always)).map_err(|e| kv("open", e))?;
        let v = vec![b'x'; 100];
        let mut x = 1u64;
        for _ in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            db.put(&key((x >> 11) % n), &v).map_err(|e| kv("put", e))?;
        }
        db.flush().map_err(|e| kv("flush", e))?;
        db.compact_range(None, None).map_err(|e| kv("compact", e))?;
        db.learn_all().map_err(|e| kv("learn", e))?;
        db.close().map_err(|e| kv("close", e))?;
    }
    for round in 0..rounds {
        for mode in [LearnedIndex::Off, LearnedIndex::Always] {
            if only.as_deref().is_some_and(|m| m != mode.name()) {
                continue;
            }
            let db = DB::open(&dir, opts(mode)).map_err(|e| kv("open", e))?;
            let mut x = 7u64 + round as u64;
            // Warm the block cache.
            for i in 0..n {
                let _ = db.get(&key(i)).map_err(|e| kv("get", e))?;
            }
            let t = Instant::now();
            let c0 = attune_kv::env::thread_cpu_ns();
            let mut found = 0u64;
            for _ in 0..gets {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let got = db.get(&key((x >> 11) % n)).map_err(|e| kv("get", e))?;
                found += u64::from(got.is_some());
            }
            let ns = t.elapsed().as_nanos() as f64 / gets as f64;
            let cpu = (attune_kv::env::thread_cpu_ns() - c0) as f64 / gets as f64;
            let st = db.stats();
            if sink.human() {
                println!(
                    "round {round} {:8} {ns:7.1} ns/get ({cpu:7.1} CPU ns) found {found} \
                     model lookups {}/{} files {:?} model bytes {}",
                    mode.name(),
                    st.learned.learned_lookups,
                    st.learned.total_lookups,
                    st.level_files,
                    st.model_bytes
                );
            }
            sink.row(&Row {
                bench: "lookup-probe",
                round,
                mode: mode.name(),
                records: n,
                gets,
                ns_per_get_wall: round_to(ns, 1),
                ns_per_get_cpu: round_to(cpu, 1),
                found,
                learned_lookups: st.learned.learned_lookups,
                total_lookups: st.learned.total_lookups,
                model_bytes: st.model_bytes,
            })?;
        }
    }
    Ok(())
}
