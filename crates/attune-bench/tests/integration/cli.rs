//! The subcommands end to end through the binary: the shared output flags (`--out` appends rows,
//! `--json` prints rows and nothing else on stdout), the machine description every row carries,
//! and tiny runs of the component subcommands.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attune-bench"))
        .args(args)
        .output()
        .expect("spawn attune-bench")
}

fn ok(args: &[&str]) -> Output {
    let out = bench(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every stdout line parsed as JSON (fails on a line that is not).
fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

const MACHINE_FIELDS: [&str; 7] = [
    "cpu",
    "nproc",
    "mem_bytes",
    "kernel",
    "git_commit",
    "rustc",
    "loadavg_1m",
];

#[test]
fn machine_json_has_every_field_rows_carry() {
    let rows = json_lines(&ok(&["machine", "--json"]));
    assert_eq!(rows.len(), 1);
    for f in MACHINE_FIELDS {
        assert!(rows[0].get(f).is_some(), "{f} missing: {}", rows[0]);
    }
}

#[test]
fn json_prints_only_rows_and_out_appends_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r/workload.jsonl");
    let args = ["workload", "--items", "2000", "--json", "--out"];
    let mut argv = args.to_vec();
    argv.push(out.to_str().unwrap());
    let rows = json_lines(&ok(&argv));
    assert!(rows.len() > 10, "{}", rows.len());
    for r in &rows {
        assert_eq!(r["bench"], "workload");
        assert!(r["command"]
            .as_str()
            .unwrap()
            .starts_with("attune-bench workload"));
        for f in MACHINE_FIELDS {
            assert!(r["machine"].get(f).is_some(), "{f}");
        }
    }
    ok(&argv);
    let lines = std::fs::read_to_string(&out).unwrap().lines().count();
    assert_eq!(lines, 2 * rows.len(), "a second run appends");
}

#[test]
fn learn_checks_the_model_against_binary_search() {
    let out = ok(&[
        "learn",
        "--sizes",
        "5000",
        "--deltas",
        "8",
        "--sets",
        "seg10",
        "--lookups",
        "5000",
        "--json",
    ]);
    let rows = json_lines(&out);
    let benches: Vec<&str> = rows.iter().map(|r| r["bench"].as_str().unwrap()).collect();
    assert_eq!(benches, ["learn", "learn", "learn-bytes16"]);
}

#[test]
fn cache_sim_replay_counts_misses_per_policy_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.txt");
    let ids: Vec<String> = (0..2000u64).map(|i| (i * 7 % 300).to_string()).collect();
    std::fs::write(&trace, ids.join("\n")).unwrap();
    let t = trace.to_str().unwrap();
    let rows = json_lines(&ok(&[
        "cache-sim",
        "--mode",
        "replay",
        "--trace",
        t,
        "--cache-blocks",
        "16,512",
        "--json",
    ]));
    assert_eq!(rows.len(), 4);
    let big = rows
        .iter()
        .find(|r| r["policy"] == "lru" && r["cache_blocks"] == 512);
    assert_eq!(
        big.unwrap()["misses"],
        300,
        "only cold misses when everything fits"
    );
}

#[test]
fn bad_arguments_exit_2_with_the_subcommand_named() {
    for args in [
        &["workload", "--items", "none"][..],
        &["learn", "--bogus", "1"],
        &["cache-sim", "--mode", "sideways"],
        &["cache-kv", "sweep", "--bogus"],
        &["lookup-probe"],
        &["kv", "micro", "--progress", "loud"],
    ] {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn lookup_steps_needs_the_step_timing_build() {
    let out = bench(&[
        "lookup-steps",
        "--records",
        "1000",
        "--gets",
        "1000",
        "--repeat",
        "1",
    ]);
    if cfg!(feature = "step-timing") {
        assert!(out.status.success());
    } else {
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--features step-timing"));
    }
}
