//! The one description of the machine and the build that every results row carries (`machine`),
//! and that `attune-bench machine --json` prints for harnesses outside this binary (the Python
//! `attune bench splitdf` reads it from there, so both sides record the same fields).
//!
//! Fields: CPU model and logical CPUs (`/proc/cpuinfo`, `available_parallelism`), memory
//! (`/proc/meminfo`), kernel release, the git commit of the sources when the row was made (see
//! [`Machine::git_commit`]), the rustc that
//! built it, the cargo features it was built with, and the 1-minute load average when the row was
//! made (so a reader can tell a quiet run from one that shared the CPUs). A field that cannot be
//! read is "unknown" (strings) or null (numbers); describing the machine never fails.
//!
//! Thread-safety: [`Machine::current`] reads `/proc` and may be called from any thread.

use serde::{Deserialize, Serialize};

/// What a row was measured on. Field names are stable: results files and reports read them.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Machine {
    /// CPU model name (`model name` in /proc/cpuinfo).
    pub cpu: String,
    /// Logical CPUs this process may use.
    pub nproc: usize,
    /// Installed memory (MemTotal).
    pub mem_bytes: Option<u64>,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Commit of the sources when the description was taken: `git rev-parse HEAD` of the
    /// checkout the binary was built in, run now (a binary built at an older commit still names
    /// the commit that made the row), with `-dirty` appended when tracked files outside
    /// `benches/results/` and `docs/` (outputs and prose, not code) differ from it; the commit
    /// stamped at build time when no checkout is found.
    pub git_commit: String,
    /// `rustc --version` of the compiler that built the binary.
    pub rustc: String,
    /// Cargo features of attune-bench this binary has (e.g. `step-timing`).
    pub build_features: Vec<String>,
    /// 1-minute load average when the description was taken.
    pub loadavg_1m: Option<f64>,
}

impl Machine {
    /// Describes this machine now.
    pub fn current() -> Machine {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".to_string());
        let mem_bytes = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .map(|k| k * 1024)
        });
        let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
        let build_features = build_features();
        Machine {
            cpu,
            nproc,
            mem_bytes,
            kernel,
            git_commit: git_head(env!("CARGO_MANIFEST_DIR"))
                .unwrap_or_else(|| env!("ATTUNE_BENCH_GIT_COMMIT").to_string()),
            rustc: env!("ATTUNE_BENCH_RUSTC").to_string(),
            build_features,
            loadavg_1m: loadavg_1m(),
        }
    }

    /// This description with the load average read again (rows made later in a long run).
    pub fn now(&self) -> Machine {
        Machine {
            loadavg_1m: loadavg_1m(),
            ..self.clone()
        }
    }
}

/// The cargo features of attune-bench compiled into this binary that change what it measures or
/// which engines it can run (a row then says which binary made it, e.g. `attune-bench-fjall`).
pub fn build_features() -> Vec<String> {
    let mut out = Vec::new();
    if cfg!(feature = "step-timing") {
        out.push("step-timing".to_string());
    }
    if cfg!(feature = "fjall") {
        out.push("fjall".to_string());
    }
    out
}

/// Which tracked paths make a tree dirty: all but results rows and generated or prose pages
/// (git pathspecs, relative to the checkout's top).
const DIRTY_PATHSPECS: [&str; 3] = [
    ":(top)",
    ":(top,exclude)benches/results",
    ":(top,exclude)docs",
];

/// `HEAD` of the git checkout holding `dir`, with `-dirty` when tracked files matching
/// [`DIRTY_PATHSPECS`] differ from it; None when `dir` is in no checkout or git is missing.
pub fn git_head(dir: &str) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--verify", "HEAD"]).filter(|h| !h.is_empty())?;
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(DIRTY_PATHSPECS);
    Some(match git(&status) {
        Some(changed) if !changed.is_empty() => format!("{head}-dirty"),
        _ => head,
    })
}

/// The 1-minute load average (`/proc/loadavg`), or None.
pub fn loadavg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_this_linux_machine() {
        let m = Machine::current();
        assert!(m.nproc >= 1);
        assert_ne!(m.kernel, "unknown");
        assert!(m.mem_bytes.unwrap_or(0) > 0);
        assert!(m.rustc.starts_with("rustc"), "{}", m.rustc);
        let v = serde_json::to_value(&m).unwrap();
        for k in [
            "cpu",
            "nproc",
            "mem_bytes",
            "kernel",
            "git_commit",
            "rustc",
            "loadavg_1m",
        ] {
            assert!(v.get(k).is_some(), "{k} missing");
        }
    }

    #[test]
    fn the_commit_is_this_checkouts_head_now() {
        let Some(head) = git_head(env!("CARGO_MANIFEST_DIR")) else {
            return; // built outside a git checkout: the build-time stamp is used
        };
        let sha = head.trim_end_matches("-dirty");
        assert_eq!(sha.len(), 40, "{head}");
        assert!(sha.bytes().all(|b| b.is_ascii_hexdigit()), "{head}");
        assert_eq!(Machine::current().git_commit, head);
        let missing = std::env::temp_dir().join("attune-bench-no-such-directory");
        assert_eq!(git_head(&missing.to_string_lossy()), None);
    }

    #[test]
    fn the_stamp_lists_the_features_built_in() {
        let f = Machine::current().build_features;
        assert_eq!(
            f.iter().any(|x| x == "fjall"),
            cfg!(feature = "fjall"),
            "{f:?}"
        );
        assert_eq!(
            f.iter().any(|x| x == "step-timing"),
            cfg!(feature = "step-timing"),
            "{f:?}"
        );
    }
}
