//! Where every subcommand's rows go, and the flags that say so (the same in every subcommand):
//!
//! * `--out PATH` appends the rows to PATH as JSON lines (created with its parent directories on
//!   the first row; appending lets several commands build one results file).
//! * `--json` prints the rows as JSON lines on stdout, and nothing else on stdout (human
//!   summaries are dropped; notes and errors go to stderr).
//! * Progress (per-phase bars or lines on stderr) is on when stderr is a terminal, off with
//!   `--no-progress` or `--json`. `--progress auto|bar|lines|none` picks a display explicitly
//!   (`lines` prints `PROGRESS {json}` lines for the Python front's bars).
//!
//! Every row is a `#[derive(Serialize)]` struct; [`Sink::row`] adds the exact `command` and the
//! [`Machine`] after its fields. Thread-safety: a [`Sink`] is `Sync`; rows from
//! several threads are written whole, one line each (lines never interleave).

use std::fs::{File, OpenOptions};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use clap::Args;
use serde::Serialize;

use crate::machine::Machine;

/// `x` rounded to `digits` decimals: the precision a row field is stored with (run-to-run noise
/// is far larger, so more digits would only make the files harder to read).
pub fn round_to(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}

/// The output flags of every subcommand.
#[derive(Args, Clone, Debug, Default)]
pub struct OutputArgs {
    /// Append the result rows as JSON lines to PATH.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Print the result rows as JSON lines on stdout (and nothing else on stdout).
    #[arg(long)]
    pub json: bool,
    /// No progress display (the default when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// Progress display: auto, bar, lines, none.
    #[arg(long, value_name = "MODE")]
    pub progress: Option<String>,
}

impl OutputArgs {
    /// Takes the output flags out of a hand-parsed subcommand's arguments; returns them and the
    /// rest in order.
    pub fn split(args: Vec<String>) -> std::result::Result<(OutputArgs, Vec<String>), String> {
        let mut o = OutputArgs::default();
        let mut rest = Vec::new();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            if let Some(v) = a.strip_prefix("--out=") {
                o.out = Some(PathBuf::from(v));
            } else if let Some(v) = a.strip_prefix("--progress=") {
                o.progress = Some(v.to_string());
            } else {
                match a.as_str() {
                    "--out" => {
                        let v = it.next().ok_or("--out needs a PATH")?;
                        o.out = Some(PathBuf::from(v));
                    }
                    "--progress" => o.progress = Some(it.next().ok_or("--progress needs a MODE")?),
                    "--json" => o.json = true,
                    "--no-progress" => o.no_progress = true,
                    _ => rest.push(a),
                }
            }
        }
        o.progress_mode()?;
        Ok((o, rest))
    }

    /// The progress display these flags ask for: `auto`, `bar`, `lines` or `none`
    /// (`--no-progress` and `--json` mean `none`).
    pub fn progress_mode(&self) -> std::result::Result<&str, String> {
        let m = self.progress.as_deref().unwrap_or("auto");
        if !matches!(m, "auto" | "bar" | "lines" | "none") {
            return Err(format!(
                "--progress: `{m}` is not one of auto, bar, lines, none"
            ));
        }
        Ok(if self.no_progress || self.json {
            "none"
        } else {
            m
        })
    }

    /// Whether progress is shown: `auto` means when stderr is a terminal.
    pub fn progress_on(&self) -> bool {
        match self.progress_mode() {
            Ok("auto") => std::io::stderr().is_terminal(),
            Ok("none") | Err(_) => false,
            Ok(_) => true,
        }
    }
}

/// Why a subcommand stopped: bad arguments (exit status 2) or a failed run (exit status 1).
#[derive(Debug)]
pub enum Fail {
    /// The arguments were wrong; the message says which and how to fix them.
    Usage(String),
    /// The run itself failed.
    Run(String),
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::Run(s)
    }
}

impl From<&str> for Fail {
    fn from(s: &str) -> Fail {
        Fail::Run(s.to_string())
    }
}

/// The command line that reproduces a run, shell-quoted, starting with `attune-bench`.
pub fn command_line() -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(first) = args.first_mut() {
        *first = "attune-bench".to_string();
    }
    args.iter()
        .map(|a| {
            if a.is_empty()
                || a.chars()
                    .any(|c| c.is_whitespace() || ";&|<>'\"$*?()".contains(c))
            {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The rows of one run: to `--out`, to stdout with `--json`, each with `command` and `machine`.
pub struct Sink {
    path: Option<PathBuf>,
    file: Mutex<Option<File>>,
    json: bool,
    progress: bool,
    command: String,
    machine: Machine,
    rows: Mutex<u64>,
}

impl Sink {
    /// A sink for `o`, recording `command` and this machine in every row. Opens nothing yet: a
    /// run that fails before its first row leaves no file behind.
    pub fn new(o: &OutputArgs, command: String) -> Sink {
        Sink {
            path: o.out.clone(),
            file: Mutex::new(None),
            json: o.json,
            progress: o.progress_on(),
            command,
            machine: Machine::current(),
            rows: Mutex::new(0),
        }
    }

    /// Whether progress notes should be shown (stderr).
    pub fn progress(&self) -> bool {
        self.progress
    }

    /// Whether human-readable summaries may go to stdout (not with `--json`).
    pub fn human(&self) -> bool {
        !self.json
    }

    /// The command line recorded in the rows.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The machine recorded in the rows (load average as of now).
    pub fn machine(&self) -> Machine {
        self.machine.now()
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows.lock().map_or(0, |n| *n)
    }

    /// The `--out` path, if any.
    pub fn path(&self) -> Option<&PathBuf> {
        self.path.as_ref()
    }

    /// Writes one row: its fields in order, then `command` and `machine` (a row type must not
    /// have fields of those names).
    pub fn row<T: Serialize>(&self, row: &T) -> std::result::Result<(), String> {
        #[derive(Serialize)]
        struct Full<'a, T: Serialize> {
            #[serde(flatten)]
            row: &'a T,
            command: &'a str,
            machine: Machine,
        }
        let full = Full {
            row,
            command: &self.command,
            machine: self.machine(),
        };
        let mut line = serde_json::to_string(&full).map_err(|e| format!("row to JSON: {e}"))?;
        line.push('\n');
        if let Some(p) = &self.path {
            let mut guard = self.file.lock().map_err(|_| "output file lock poisoned")?;
            if guard.is_none() {
                if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                }
                let f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| format!("cannot open {}: {e}", p.display()))?;
                *guard = Some(f);
            }
            if let Some(f) = guard.as_mut() {
                // One write per line: appends from concurrent runs never interleave.
                f.write_all(line.as_bytes())
                    .and_then(|_| f.flush())
                    .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            }
        }
        if self.json {
            let mut out = std::io::stdout().lock();
            out.write_all(line.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| format!("stdout: {e}"))?;
        }
        if let Ok(mut n) = self.rows.lock() {
            *n += 1;
        }
        Ok(())
    }
}

/// A row whose field names are only known at run time (e.g. one field per lookup step), in
/// order; serialized as a JSON object through serde like any row.
#[derive(Clone, Debug, Default)]
pub struct Fields(pub Vec<(String, serde_json::Value)>);

impl Fields {
    /// Adds a field.
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<serde_json::Value>) {
        self.0.push((name.into(), value.into()));
    }
}

impl Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn split_takes_the_output_flags_and_keeps_the_rest_in_order() {
        let (o, rest) = OutputArgs::split(strings(&[
            "--mode",
            "join",
            "--out",
            "r.jsonl",
            "--json",
            "--keys",
            "5",
            "--no-progress",
        ]))
        .unwrap();
        assert_eq!(o.out, Some(PathBuf::from("r.jsonl")));
        assert!(o.json && o.no_progress);
        assert_eq!(rest, strings(&["--mode", "join", "--keys", "5"]));
        assert_eq!(o.progress_mode().unwrap(), "none");
    }

    #[test]
    fn progress_none_is_the_same_as_no_progress() {
        let (o, _) = OutputArgs::split(strings(&["--progress", "none"])).unwrap();
        assert!(!o.progress_on());
        assert!(OutputArgs::split(strings(&["--progress", "loud"])).is_err());
    }

    #[test]
    fn rows_append_with_command_and_machine() {
        #[derive(Serialize)]
        struct R {
            bench: &'static str,
            n: u64,
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/rows.jsonl");
        let o = OutputArgs {
            out: Some(p.clone()),
            ..Default::default()
        };
        for n in 0..2 {
            let sink = Sink::new(&o, "attune-bench test".into());
            sink.row(&R { bench: "t", n }).unwrap();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1]["n"], 1);
        assert_eq!(rows[0]["command"], "attune-bench test");
        assert!(rows[0]["machine"]["nproc"].as_u64().unwrap() >= 1);
    }

    #[test]
    fn nothing_is_created_before_the_first_row() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("none.jsonl");
        let o = OutputArgs {
            out: Some(p.clone()),
            ..Default::default()
        };
        let _sink = Sink::new(&o, String::new());
        assert!(!p.exists());
    }
}
