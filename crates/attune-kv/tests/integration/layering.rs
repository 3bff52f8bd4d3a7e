//! The engine's modules import only downward: this test reads every source file under `src/`,
//! collects the `crate::<module>` paths its code names (comments and `#[cfg(test)]` modules
//! excluded) and checks each arrow between top-level modules against `ALLOWED`. A new arrow is a
//! design decision: add it here (and to docs/ARCHITECTURE.md), or move the code it needs. A
//! second test does the same per file (`crate::` and `super::` paths; a folder's `mod.rs`
//! declaring its files with `mod x;` is not an import) and demands no loop at all: inside
//! `cache/`, for instance, the block cache holds the sizing tiers but the tiers never reach back
//! for the block cache.
//!
//! The layers, bottom up (a module may import any module listed for it, never one above it):
//!
//! ```text
//! error · util · merge · options · env foundations (merge: the merge operators)
//! key · iter · vlog · wal · batch      records, logs and the value log
//! block · memtable · index             blocks, the memtable, learned models
//! cache                                block cache, compressed tier, adaptive sizing, hot keys
//! table                                tables (read every block through the cache)
//! version                              versions, manifest, compaction picking, learning
//! db                                   the database
//! lib                                  the crate root: re-exports only
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Which top-level modules each top-level module may import.
const ALLOWED: &[(&str, &[&str])] = &[
    ("error", &[]),
    ("util", &["error"]),
    ("merge", &["error", "util"]),
    ("options", &["error", "merge"]),
    ("env", &["error"]),
    ("key", &["error", "util"]),
    ("iter", &["error", "key", "merge"]),
    ("vlog", &["env", "error", "util"]),
    ("wal", &["env", "error", "util"]),
    ("batch", &["error", "key", "util", "vlog"]),
    ("block", &["env", "error", "iter", "key", "options", "util"]),
    ("memtable", &["error", "iter", "key", "util", "vlog"]),
    ("index", &["env", "error", "key", "options", "util"]),
    ("cache", &["block", "env", "error", "options", "util"]),
    (
        "table",
        &[
            "block", "cache", "env", "error", "index", "iter", "key", "memtable", "options",
            "util", "vlog",
        ],
    ),
    (
        "version",
        &[
            "merge", "block", "cache", "env", "error", "index", "iter", "key", "memtable",
            "options", "table", "util", "vlog", "wal",
        ],
    ),
    (
        "db",
        &[
            "merge", "batch", "block", "cache", "env", "error", "index", "iter", "key", "memtable",
            "options", "table", "util", "version", "vlog", "wal",
        ],
    ),
    (
        "lib",
        &[
            "merge", "batch", "block", "cache", "db", "env", "error", "index", "iter", "key",
            "memtable", "options", "table", "util", "version", "vlog", "wal",
        ],
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: its folder under `src/`, or its stem.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("file under src");
    let first = rel.components().next().expect("non-empty path");
    let name = first.as_os_str().to_string_lossy();
    name.strip_suffix(".rs").unwrap_or(&name).to_string()
}

/// The code of a file without comments and without its `#[cfg(test)]` modules (tests may use
/// anything: they sit beside the code they check).
fn code_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") && lines.peek().is_some_and(|n| n.contains("mod ")) {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push(line.split("//").next().unwrap_or(""));
    }
    out
}

/// The top-level modules named by `crate::<name>` paths, including `crate::{a, b::c}` lists.
fn imported(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(list) = rest.strip_prefix('{') {
            let end = list.find('}').unwrap_or(list.len());
            for item in list[..end].split(',') {
                let name = item.trim().split("::").next().unwrap_or("");
                if !name.is_empty() {
                    names.push(name.to_string());
                }
            }
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            names.push(rest[..end].to_string());
        }
    }
    names
}

/// Every arrow `module -> imported module` in the crate's code, with one file that draws it.
fn arrows() -> BTreeMap<(String, String), PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut out = BTreeMap::new();
    for file in files {
        let from = module_of(&src, &file);
        let text = std::fs::read_to_string(&file).expect("read source");
        for line in code_lines(&text) {
            for to in imported(line) {
                // `crate::DB` and other root re-exports are the crate root.
                let to = if to.starts_with(char::is_uppercase) {
                    "lib".to_string()
                } else {
                    to
                };
                if to != from {
                    out.entry((from.clone(), to))
                        .or_insert_with(|| file.clone());
                }
            }
        }
    }
    out
}

#[test]
fn every_import_points_down_the_layers() {
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(m, to)| (*m, to.iter().copied().collect()))
        .collect();
    let mut bad = Vec::new();
    for ((from, to), file) in arrows() {
        match allowed.get(from.as_str()) {
            None => bad.push(format!("{from} is not in ALLOWED (new module? {file:?})")),
            Some(ok) if !ok.contains(to.as_str()) => {
                bad.push(format!("{from} -> {to} is not allowed ({file:?})"))
            }
            Some(_) => {}
        }
    }
    assert!(
        bad.is_empty(),
        "imports against the layers:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_allowed_arrows_have_no_cycle() {
    // Kahn's algorithm over ALLOWED: every module must come out.
    let mut indegree: BTreeMap<&str, usize> = ALLOWED.iter().map(|(m, _)| (*m, 0)).collect();
    for (_, to) in ALLOWED {
        for t in *to {
            *indegree
                .get_mut(t)
                .expect("every target is a listed module") += 1;
        }
    }
    let mut ready: Vec<&str> = indegree
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(m, _)| *m)
        .collect();
    let mut seen = 0;
    while let Some(m) = ready.pop() {
        seen += 1;
        let to = ALLOWED
            .iter()
            .find(|(x, _)| *x == m)
            .map(|(_, t)| *t)
            .unwrap_or(&[]);
        for t in to {
            let n = indegree.get_mut(t).expect("listed");
            *n -= 1;
            if *n == 0 {
                ready.push(t);
            }
        }
    }
    assert_eq!(seen, ALLOWED.len(), "ALLOWED has a cycle");
}

/// The module a file is: its path under `src/` without `.rs`, a folder's `mod.rs` being the
/// folder (`cache/mod.rs` is `cache`, `cache/tiers.rs` is `cache/tiers`).
fn file_module(src: &Path, file: &Path) -> String {
    let rel = file
        .strip_prefix(src)
        .expect("file under src")
        .with_extension("");
    let rel = rel.to_string_lossy().replace('\\', "/");
    rel.strip_suffix("/mod").unwrap_or(&rel).to_string()
}

/// The modules a line names through `crate::a::b…` and `super::…` paths, resolved to the
/// longest prefix that is a module of the crate.
fn file_refs(line: &str, this: &str, modules: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    // `super` of module `a/b` is `a`, of `a` the crate root (a file's own `mod tests` is cut).
    let parent = this
        .rsplit_once('/')
        .map_or(String::new(), |(p, _)| p.to_string());
    for (marker, base) in [("crate::", String::new()), ("super::", parent)] {
        let mut rest = line;
        while let Some(i) = rest.find(marker) {
            rest = &rest[i + marker.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let mut path: Vec<&str> = rest[..end].split("::").filter(|s| !s.is_empty()).collect();
            let mut target = String::new();
            while !path.is_empty() {
                let cand = if base.is_empty() {
                    path.join("/")
                } else {
                    format!("{base}/{}", path.join("/"))
                };
                if modules.contains(&cand) {
                    target = cand;
                    break;
                }
                path.pop();
            }
            if target.is_empty() && !base.is_empty() {
                target = base.clone();
            }
            if !target.is_empty() && target != this {
                out.push(target);
            }
        }
    }
    out
}

#[test]
fn no_file_imports_itself_through_a_loop() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| file_module(&src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let this = file_module(&src, file);
        let text = std::fs::read_to_string(file).expect("read source");
        for line in code_lines(&text) {
            for to in file_refs(line, &this, &modules) {
                // The crate root only re-exports.
                if this != "lib" {
                    edges.entry(this.clone()).or_default().insert(to);
                }
            }
        }
    }
    // Depth-first search for a back edge; report the loop it closes.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        stack.push(m.to_string());
        for to in edges.get(m).into_iter().flatten() {
            match state.get(to.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == to).unwrap_or(0);
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(to.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(to, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in &modules {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0 {
            let cycle = visit(m, &edges, &mut state, &mut Vec::new());
            assert!(
                cycle.is_none(),
                "import loop between files: {}",
                cycle.unwrap_or_default().join(" -> ")
            );
        }
    }
}
