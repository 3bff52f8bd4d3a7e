//! `attune-bench cache-kv` rows end to end: a tiny sweep cell, whose row must keep the field
//! names, nesting and value types that the results files, `benches/cache/*.py` and the page
//! generator read.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

const SWEEP_FIELDS: [&str; 21] = [
    "adaptive_over_best_static",
    "alpha",
    "bench",
    "c_a_ns",
    "c_k_ns",
    "command",
    "compression",
    "configs",
    "env",
    "half_over_adaptive",
    "keys",
    "le_adaptive_ns",
    "le_best_static_ns",
    "m_over_adaptive",
    "machine",
    "memory_bytes",
    "min_over_adaptive",
    "pattern",
    "ratio",
    "sample_inv",
    "worse_end_over_adaptive",
];

const CONFIG_FIELDS: [&str; 14] = [
    "adoptions",
    "compressed_cache",
    "final_app_bytes",
    "ghost_bytes_peak",
    "last_round",
    "last_round_measured_le_ns",
    "le_predicted_ns",
    "measured",
    "reverts",
    "round_log",
    "rounds",
    "sizing",
    "state",
    "warmup_reads",
];

const MEASURED_FIELDS: [&str; 11] = [
    "block_reads_per_read",
    "cpu_ns_per_read",
    "device_reads_per_read",
    "h_a",
    "h_k",
    "latency_ns",
    "le_ns",
    "process_cpu_ns_per_read",
    "reads",
    "second_hit_ns",
    "wall_ns_per_read",
];

const ROUND_FIELDS: [&str; 12] = [
    "accesses",
    "adopted",
    "app_fit_excluded",
    "app_footprint_bytes",
    "fit_app_bytes",
    "overflow_app_bytes",
    "passes",
    "samples",
    "second_footprint_bytes",
    "stopped_early",
    "warm_started",
    "warmup_samples",
];

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

fn set<const N: usize>(names: [&'static str; N]) -> BTreeSet<&'static str> {
    names.into_iter().collect()
}

#[test]
fn a_tiny_sweep_cell_writes_the_row_shape_readers_expect() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_attune-bench"))
        .args([
            "cache-kv",
            "sweep",
            "--memory-mib",
            "4",
            "--sample-inv",
            "64",
            "--patterns",
            "hot20",
            "--ratios",
            "1.0",
            "--compressions",
            "zstd",
            "--reads",
            "2000",
            "--warmup",
            "2000",
            "--adapt-max",
            "2000000",
            "--probe-dir",
            dir.path().to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "one cell, one row: {text}");
    let row = &rows[0];
    assert_eq!(keys(row), set(SWEEP_FIELDS));
    assert_eq!(row["bench"], "cache-kv-sweep");
    assert!(row["ratio"].is_f64() && row["keys"].is_u64() && row["sample_inv"] == 64);
    let configs = row["configs"].as_array().unwrap();
    let sizings: Vec<&str> = configs
        .iter()
        .filter_map(|c| c["sizing"].as_str())
        .collect();
    assert_eq!(sizings, ["adaptive", "1MiB", "2097152", "4194304"]);
    for c in configs {
        assert_eq!(keys(c), set(CONFIG_FIELDS));
        assert_eq!(keys(&c["measured"]), set(MEASURED_FIELDS));
        assert!(c["measured"]["reads"].is_u64() && c["measured"]["h_a"].is_f64());
        assert_eq!(
            keys(&c["compressed_cache"]),
            set(["capacity_bytes", "evictions", "usage_bytes"])
        );
        for r in c["round_log"].as_array().unwrap() {
            assert_eq!(keys(r), set(ROUND_FIELDS));
        }
        // A candidate is an array: [M_a bytes, H_a, H_k, L_e ns].
        for cand in c["last_round"].as_array().unwrap() {
            let cand = cand.as_array().unwrap();
            assert!(cand.len() == 4 && cand[0].is_u64() && cand[1].is_f64());
        }
    }
    // Whether the adaptive configuration finishes a controller round in so short a run depends on
    // the machine's speed, so the test checks the shape of what the log holds, not that it holds
    // something.
}
