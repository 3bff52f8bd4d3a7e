//! Records what built the harness, for `machine::Machine`: the rustc version and the git commit
//! of the sources (`ATTUNE_BENCH_RUSTC`, `ATTUNE_BENCH_GIT_COMMIT`; "unknown" when not found).
//! Reruns when HEAD or the current branch moves, so a new commit is never reported as the old one.

use std::process::Command;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    Some(s.trim().to_string()).filter(|s| !s.is_empty())
}

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = output(&rustc, &["--version"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=ATTUNE_BENCH_RUSTC={version}");
    let commit = output("git", &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=ATTUNE_BENCH_GIT_COMMIT={commit}");
    for what in ["HEAD", "packed-refs"] {
        if let Some(p) = output("git", &["rev-parse", "--git-path", what]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(branch) = output("git", &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = output("git", &["rev-parse", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
