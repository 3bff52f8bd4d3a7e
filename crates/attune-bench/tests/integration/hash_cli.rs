//! `attune-bench hash` end to end: tiny runs of every mode write one well-formed JSON object
//! per table, and bad options exit with status 2 and a message instead of panicking.

use std::process::Command;

fn bench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_attune-bench"));
    c.arg("hash");
    c
}

fn run_ok(args: &[&str], json: &std::path::Path) -> Vec<String> {
    let out = bench()
        .args(args)
        .arg("--out")
        .arg(json)
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(json)
        .expect("json")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_mode_writes_one_row_per_table_with_the_required_fields() {
    let cases: [&[&str]; 3] = [
        &[
            "--mode",
            "roofline",
            "--zipf",
            "0,1.5",
            "--keys",
            "3000",
            "--operations",
            "20000",
        ],
        &[
            "--mode",
            "adaptive",
            "--zipf",
            "1",
            "--keys",
            "3000",
            "--operations",
            "50000",
            "--mix",
            "90:5:5",
            "--churn",
            "25:1000",
        ],
        &[
            "--mode", "join", "--zipf", "2", "--keys", "2000", "--ratio", "4,16",
        ],
    ];
    let dir = tempfile::tempdir().expect("temp dir");
    for (i, args) in cases.iter().enumerate() {
        let json = dir.path().join(format!("case{i}.jsonl"));
        let rows = run_ok(args, &json);
        let settings = if i == 0 || i == 2 { 2 } else { 1 };
        assert_eq!(rows.len(), 3 * settings, "{rows:?}");
        for row in &rows {
            for field in [
                "\"table\":",
                "\"zipf\":",
                "\"ops_per_sec\":",
                "\"avg_displacement\":",
                "\"command\":",
                "\"machine\":",
                "\"nproc\":",
            ] {
                assert!(row.contains(field), "{field} missing in {row}");
            }
            assert!(row.starts_with('{') && row.ends_with('}'));
        }
        // The three tables of a join return the same number of matches.
        if i == 2 {
            let sums: Vec<&str> = rows
                .iter()
                .map(|r| r.split("\"checksum\":").nth(1).unwrap_or(""))
                .collect();
            let first: Vec<&str> = sums
                .iter()
                .map(|s| s.split(',').next().unwrap_or(""))
                .collect();
            assert!(first[..3].iter().all(|s| *s == first[0]), "{first:?}");
        }
    }
}

#[test]
fn bad_options_exit_with_status_2_and_a_message() {
    let bad: [&[&str]; 7] = [
        &["--mode", "sideways"],
        &["--zipf", "abc"],
        &["--tables", "vip,btree"],
        &["--mix", "50:50"],
        &["--churn", "25"],
        &["--keys", "3"],
        &["--tables", "vip-learn-always", "--mode", "join"],
    ];
    for args in bad {
        let out = bench().args(args).output().expect("spawn");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("attune-bench hash:") && !err.contains("panicked"),
            "{err}"
        );
    }
}
