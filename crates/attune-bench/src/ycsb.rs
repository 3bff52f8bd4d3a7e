//! YCSB core workloads A–F driven from `attune-workload`'s streams (the one workload library).
//!
//! Phases: `load` inserts `records` records in key-number order (YCSB's load phase); each of
//! `a`..`f` then runs `operations` operations on the loaded database, in the order given. Key
//! bytes: the stored key number (YCSB's `fnvhash64(keynum)` for `--key-set ycsb`, or the
//! `keynum`-th key of an `attune-workload` key set such as `linear`, `seg1`, `normal`) encoded
//! as 16 bytes big-endian (`encode_key16`), so every engine sees the same byte strings.
//! Records are one value of `field_count * field_length` bytes (YCSB default 10 × 100); updates
//! and read-modify-writes rewrite the whole record, as YCSB's key-value bindings (RocksDB's
//! included) do. Values come from the same compressible generator as the micro benchmarks.
//! Multi-threaded runs split `operations` across threads with distinct seeds; workloads that
//! insert (d, e) run single-threaded because each stream hands out insert key numbers from the
//! same counter.
//!
//! Beyond A–F, phases for the learned-index evaluation (docs/learned-index.md):
//! * `<letter>:<distribution>` runs a workload with its own request distribution (`c:uniform`,
//!   `c:zipfian:0.99`), so one run can read one loaded database under several distributions;
//! * `scan<N>` (N in 1..=100000): only range queries of exactly N records (uniform start keys
//!   unless a distribution is given);
//! * `write<P>` (P in 0..=100): P% updates of loaded keys, the rest reads (uniform unless given);
//! * `compact`: flush and compact everything into the bottom level (db_bench's `compact`), timed
//!   as one operation; `learn`: learn a model for every table now (Attune's `learn_all`, the
//!   "offline" learning), timed as one operation. Engines without them record zero operations.
//!
//! Load order: with an attune-workload key set the load inserts key numbers 0..records in order
//! (`load_order: None`, sequential) or in a seeded random permutation of them (`Some(seed)`).
//!
//! Thread-safety: each client thread builds its own stream. Invariant: a phase is a pure function
//! of its [`YcsbTask`].

use std::str::FromStr;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use attune_workload::keys::{encode_key16, KeySet};
use attune_workload::perm::Permutation;
use attune_workload::ycsb::{CoreWorkload, InsertOrder, YcsbConfig};
use attune_workload::{Op, RequestDist};
use serde::{Deserialize, Serialize};

use crate::driver::{run_phase, Body, PhaseResult};
use crate::engine::Engine;
use crate::error::{BenchError, Result};
use crate::keys::ValueGen;

/// Name of the load phase in `--workloads` and in result rows.
pub const LOAD: &str = "load";
/// Key set name meaning YCSB's own hashed key numbers.
pub const YCSB_KEYS: &str = "ycsb";
/// Name of the flush-and-compact phase.
pub const COMPACT: &str = "compact";
/// Name of the learn-every-table phase.
pub const LEARN: &str = "learn";
/// Longest `scan<N>` range (records). Default 100000: far above the 1/10/100, low enough
/// that one operation stays a range query rather than a full scan of a benchmark database.
pub const MAX_SCAN: u32 = 100_000;

/// What a phase name asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Load,
    Compact,
    Learn,
    /// A core workload letter.
    Core(CoreWorkload),
    /// Range queries of exactly this many records.
    Scan(u32),
    /// This percentage of updates, the rest reads.
    Writes(u32),
}

const VALID_WORKLOADS: &str = "load, a, b, c, d, e, f (optionally `:<distribution>`), \
scan<N>, write<P>, compact, learn";

fn parse_kind(head: &str) -> Option<Kind> {
    match head {
        LOAD => Some(Kind::Load),
        COMPACT => Some(Kind::Compact),
        LEARN => Some(Kind::Learn),
        _ => {
            if let Some(n) = head.strip_prefix("scan") {
                return n
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_SCAN).contains(n))
                    .map(Kind::Scan);
            }
            if let Some(p) = head.strip_prefix("write") {
                return p
                    .parse::<u32>()
                    .ok()
                    .filter(|p| *p <= 100)
                    .map(Kind::Writes);
            }
            CoreWorkload::from_str(head).ok().map(Kind::Core)
        }
    }
}

/// One YCSB phase, as sent to a child.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct YcsbTask {
    /// `load` or a workload letter `a`..`f`.
    pub workload: String,
    /// `recordcount`.
    pub records: u64,
    /// `operationcount` (all threads together).
    pub operations: u64,
    /// `--distribution` override (`None`: the workload's own).
    pub distribution: Option<String>,
    /// `ycsb` or an attune-workload key-set name.
    pub key_set: String,
    /// `fieldcount`.
    pub field_count: u32,
    /// `fieldlength`.
    pub field_length: u32,
    /// Base seed.
    pub seed: u64,
    /// Client threads.
    pub threads: usize,
    /// Unrecorded operations per thread before measuring (run phases only).
    pub warmup_ops: u64,
    /// Drop the page cache of the database files first.
    pub cold: bool,
    /// Load order of a key set: `None` ascending, `Some(seed)` a random permutation.
    #[serde(default)]
    pub load_order: Option<u64>,
}

/// Puts a `load` phase first when the phases start with one that needs a loaded database (YCSB
/// runs a..f against the records `load` inserted, and users of YCSB expect `--workloads a,b` to
/// load first). The added phase is the first phase's parameters with workload `load`. Returns
/// whether one was added; an empty list stays empty.
pub fn ensure_load_first(tasks: &mut Vec<YcsbTask>) -> bool {
    match tasks.first() {
        Some(first) if first.workload != LOAD => {
            let load = YcsbTask {
                workload: LOAD.to_string(),
                distribution: None,
                warmup_ops: 0,
                ..first.clone()
            };
            tasks.insert(0, load);
            true
        }
        _ => false,
    }
}

fn wl_err(e: attune_workload::WorkloadError) -> BenchError {
    BenchError::invalid("ycsb", e.to_string())
}

impl YcsbTask {
    /// Checks the task and builds (and drops) its generators so every error shows before work.
    pub fn validate(&self) -> Result<()> {
        if self.records == 0 {
            return Err(BenchError::invalid("--records", "must be at least 1"));
        }
        let kind = self.kind()?;
        let runs = !matches!(kind, Kind::Load | Kind::Compact | Kind::Learn);
        if runs && self.operations == 0 {
            return Err(BenchError::invalid("--operations", "must be at least 1"));
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(BenchError::invalid(
                "--threads",
                "must be between 1 and 1024",
            ));
        }
        if runs {
            let cfg = self.config(0)?;
            if cfg.insert_proportion > 0.0 && self.threads > 1 {
                return Err(BenchError::invalid(
                    "--threads",
                    format!(
                        "workload {} inserts; run it with --threads 1",
                        self.workload
                    ),
                ));
            }
            cfg.run().map_err(wl_err)?;
        }
        self.key_set()?;
        Ok(())
    }

    /// Parses a `--workloads` entry (see the module doc) into its canonical name.
    pub fn parse_workload(name: &str) -> Result<String> {
        let n = name.trim().to_ascii_lowercase();
        let (head, dist) = match n.split_once(':') {
            Some((h, d)) => (h, Some(d)),
            None => (n.as_str(), None),
        };
        let head = head.trim_start_matches("workload");
        let unknown = || BenchError::UnknownWorkload {
            kind: "YCSB workload",
            name: name.to_string(),
            valid: VALID_WORKLOADS.to_string(),
        };
        let kind = parse_kind(head).ok_or_else(unknown)?;
        match dist {
            None => Ok(head.to_string()),
            Some(_) if matches!(kind, Kind::Load | Kind::Compact | Kind::Learn) => {
                Err(BenchError::invalid(
                    "--workloads",
                    format!("`{name}`: a distribution applies to run phases only"),
                ))
            }
            Some(d) => {
                RequestDist::from_str(d).map_err(wl_err)?;
                Ok(format!("{head}:{d}"))
            }
        }
    }

    fn kind(&self) -> Result<Kind> {
        let head = self
            .workload
            .split_once(':')
            .map_or(self.workload.as_str(), |p| p.0);
        parse_kind(head).ok_or_else(|| BenchError::UnknownWorkload {
            kind: "YCSB workload",
            name: self.workload.clone(),
            valid: VALID_WORKLOADS.to_string(),
        })
    }

    /// The phase's request distribution: its own (`c:uniform`), else `--distribution`.
    fn distribution(&self) -> Option<&str> {
        self.workload
            .split_once(':')
            .map(|p| p.1)
            .or(self.distribution.as_deref())
    }

    /// The request distribution the phase uses, for result rows.
    pub fn distribution_name(&self) -> String {
        match (self.distribution(), self.kind()) {
            (Some(d), _) => d.to_string(),
            (None, Ok(Kind::Scan(_) | Kind::Writes(_))) => "uniform".to_string(),
            _ => "workload default".to_string(),
        }
    }

    /// Whether the phase runs operations from a stream (not load, compact or learn).
    fn is_run(&self) -> bool {
        !matches!(self.kind(), Ok(Kind::Load | Kind::Compact | Kind::Learn))
    }

    fn config(&self, thread: usize) -> Result<YcsbConfig> {
        let kind = self.kind()?;
        let w = match kind {
            Kind::Core(w) => w,
            Kind::Load | Kind::Compact | Kind::Learn => CoreWorkload::A,
            Kind::Scan(_) | Kind::Writes(_) => CoreWorkload::C,
        };
        let per_thread = self.operations.div_ceil(self.threads as u64);
        let seed = self.seed.wrapping_add(1 + thread as u64 * 0x9E37_79B9);
        let mut cfg = YcsbConfig::core(w, self.records, per_thread, seed);
        cfg.field_count = self.field_count;
        cfg.field_length = self.field_length;
        if self.key_set != YCSB_KEYS {
            cfg.insert_order = InsertOrder::Ordered;
        }
        match kind {
            Kind::Scan(n) => {
                cfg.read_proportion = 0.0;
                cfg.scan_proportion = 1.0;
                cfg.min_scan_length = n;
                cfg.max_scan_length = n;
                cfg.request_distribution = RequestDist::Uniform;
            }
            Kind::Writes(p) => {
                cfg.update_proportion = f64::from(p) / 100.0;
                cfg.read_proportion = 1.0 - cfg.update_proportion;
                cfg.request_distribution = RequestDist::Uniform;
            }
            _ => {}
        }
        if let Some(d) = self.distribution() {
            cfg.request_distribution = RequestDist::from_str(d).map_err(wl_err)?;
        }
        Ok(cfg)
    }

    /// The key set, when keys are not YCSB's hashed numbers. Sized for every key the phase
    /// can insert.
    fn key_set(&self) -> Result<Option<KeySet>> {
        if self.key_set == YCSB_KEYS {
            return Ok(None);
        }
        let n = self.records + self.operations + 1;
        KeySet::from_name(&self.key_set, n, self.seed)
            .map(Some)
            .map_err(|e| BenchError::UnknownWorkload {
                kind: "key set",
                name: self.key_set.clone(),
                valid: format!("ycsb, or an attune-workload key set ({e})"),
            })
    }

    /// Operations in the phase (progress total).
    pub fn total_ops(&self) -> u64 {
        if self.workload == LOAD {
            self.records
        } else if !self.is_run() {
            1
        } else {
            self.operations.div_ceil(self.threads as u64) * self.threads as u64
        }
    }

    /// Bytes of one record's value.
    pub fn record_bytes(&self) -> usize {
        (self.field_count as usize) * (self.field_length as usize)
    }

    /// New keys the phase inserts in total (load: all records).
    pub fn inserts(&self) -> Result<u64> {
        if self.workload == LOAD {
            return Ok(self.records);
        }
        if !self.is_run() {
            return Ok(0);
        }
        let mut n = 0;
        for t in 0..self.threads {
            n += self
                .config(t)?
                .run()
                .map_err(wl_err)?
                .filter(|op| matches!(op, Op::Insert { .. }))
                .count() as u64;
        }
        Ok(n)
    }
}

/// Runs one phase on `db`.
pub fn run_task(db: &dyn Engine, task: &YcsbTask, progress: &AtomicU64) -> Result<PhaseResult> {
    match task.kind()? {
        Kind::Compact | Kind::Learn => return run_step(db, task, progress),
        _ => {}
    }
    let set = task.key_set()?;
    let record = task.record_bytes();
    let key_bytes = |k: u64| -> [u8; 16] {
        encode_key16(match &set {
            Some(s) => s.key_at(k),
            None => k,
        })
    };
    // Random load order: key number i of the load becomes perm(i), a bijection on 0..records.
    let load_perm = match (task.load_order, &set) {
        (Some(seed), Some(_)) if task.workload == LOAD => Some(
            Permutation::new(task.records, seed)
                .map_err(|e| BenchError::invalid("--load-order", e.to_string()))?,
        ),
        _ => None,
    };
    let load_key = |k: u64| match &load_perm {
        Some(p) => p.apply(k),
        None => k,
    };
    let load_threads = if task.workload == LOAD {
        1
    } else {
        task.threads
    };
    let body = |t: usize,
                s: &mut dyn crate::engine::Session,
                st: &mut crate::driver::ThreadStats<'_>,
                warm: bool|
     -> Result<()> {
        let mut values = ValueGen::new(task.seed.wrapping_add(t as u64), record, 0.5);
        let mut buf = Vec::with_capacity(record);
        let cfg = task.config(t)?;
        let ops: Box<dyn Iterator<Item = Op>> = if task.workload == LOAD {
            Box::new(cfg.load().map_err(wl_err)?)
        } else if warm {
            let mut w = cfg.clone();
            w.seed = w.seed.wrapping_add(0x5741_524D);
            w.operation_count = task.warmup_ops;
            Box::new(w.run().map_err(wl_err)?)
        } else {
            Box::new(cfg.run().map_err(wl_err)?)
        };
        for op in ops {
            let start = Instant::now();
            match op {
                Op::Read { key } => {
                    st.found += u64::from(s.get(&key_bytes(key), &mut buf)?);
                }
                Op::Update { key, .. } | Op::Insert { key, .. } => {
                    s.put(&key_bytes(load_key(key)), values.next(record))?;
                    st.user_bytes_written += (16 + record) as u64;
                }
                Op::ReadModifyWrite { key, .. } => {
                    let k = key_bytes(key);
                    st.found += u64::from(s.get(&k, &mut buf)?);
                    s.put(&k, values.next(record))?;
                    st.user_bytes_written += (16 + record) as u64;
                }
                Op::Scan { start: from, len } => {
                    let n = s.scan(&key_bytes(from), len as usize, &mut |_, v| {
                        buf.clear();
                        buf.extend_from_slice(v);
                    })?;
                    st.found += u64::from(n > 0);
                }
                Op::Delete { key } => s.delete(&key_bytes(key))?,
            }
            st.done(start);
        }
        Ok(())
    };
    let measured: &Body<'_> = &|t, s, st| body(t, s, st, false);
    let warm_body: &Body<'_> = &|t, s, st| body(t, s, st, true);
    let warm = (task.warmup_ops > 0 && task.workload != LOAD).then_some(warm_body);
    let r = run_phase(db, load_threads, progress, warm, measured)?;
    if task.workload == LOAD || r.user_bytes_written > 0 {
        db.flush()?;
    }
    Ok(r)
}

/// Runs `compact` or `learn` as one timed operation; an engine without the step records none.
fn run_step(db: &dyn Engine, task: &YcsbTask, progress: &AtomicU64) -> Result<PhaseResult> {
    let learn = task.kind()? == Kind::Learn;
    let body: &Body<'_> = &|_, _, st| {
        let start = Instant::now();
        let did = if learn {
            db.learn()?.is_some()
        } else {
            db.compact()?
        };
        if did {
            st.done(start);
        }
        Ok(())
    };
    run_phase(db, 1, progress, None, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(w: &str) -> YcsbTask {
        YcsbTask {
            workload: w.to_string(),
            records: 1000,
            operations: 1000,
            distribution: None,
            key_set: YCSB_KEYS.to_string(),
            field_count: 10,
            field_length: 100,
            seed: 7,
            threads: 1,
            warmup_ops: 0,
            cold: false,
            load_order: None,
        }
    }

    #[test]
    fn run_phases_without_load_get_a_load_first() {
        let mut tasks = vec![task("a"), task("c")];
        tasks[0].distribution = Some("uniform".into());
        assert!(ensure_load_first(&mut tasks));
        let names: Vec<&str> = tasks.iter().map(|t| t.workload.as_str()).collect();
        assert_eq!(names, ["load", "a", "c"]);
        assert_eq!(tasks[0].records, tasks[1].records);
        assert_eq!(tasks[0].distribution, None);
        assert_eq!(tasks[0].total_ops(), tasks[0].records);
    }

    #[test]
    fn phases_that_start_with_load_are_left_alone() {
        let mut tasks = vec![task(LOAD), task("a")];
        assert!(!ensure_load_first(&mut tasks));
        assert_eq!(tasks.len(), 2);
        let mut none: Vec<YcsbTask> = Vec::new();
        assert!(!ensure_load_first(&mut none));
        assert!(none.is_empty());
    }

    #[test]
    fn workload_names_are_checked_with_the_valid_list() {
        assert_eq!(YcsbTask::parse_workload("A").unwrap(), "a");
        assert_eq!(YcsbTask::parse_workload("workloadc").unwrap(), "c");
        let e = YcsbTask::parse_workload("g").unwrap_err().to_string();
        assert!(e.contains("load, a, b"), "{e}");
    }

    #[test]
    fn bad_distribution_and_key_set_fail_validation() {
        let mut t = task("a");
        t.distribution = Some("zipfian:-1".into());
        assert!(t.validate().is_err());
        let mut t = task("a");
        t.key_set = "bogus".into();
        assert!(t.validate().unwrap_err().to_string().contains("key set"));
        let mut t = task("d");
        t.threads = 2;
        assert!(
            t.validate().is_err(),
            "inserting workloads are single-threaded"
        );
        assert!(task("e").validate().is_ok());
    }

    #[test]
    fn learned_index_phases_parse_and_bad_ones_name_the_valid_list() {
        assert_eq!(YcsbTask::parse_workload("C:Uniform").unwrap(), "c:uniform");
        assert_eq!(
            YcsbTask::parse_workload("c:zipfian:0.9").unwrap(),
            "c:zipfian:0.9"
        );
        assert_eq!(YcsbTask::parse_workload("scan10").unwrap(), "scan10");
        assert_eq!(YcsbTask::parse_workload("write50").unwrap(), "write50");
        assert_eq!(YcsbTask::parse_workload("compact").unwrap(), "compact");
        assert_eq!(YcsbTask::parse_workload("learn").unwrap(), "learn");
        for bad in [
            "scan0",
            "scan100001",
            "write101",
            "writex",
            "c:bogus",
            "learn:uniform",
        ] {
            assert!(YcsbTask::parse_workload(bad).is_err(), "{bad}");
        }
        let e = YcsbTask::parse_workload("g").unwrap_err().to_string();
        assert!(e.contains("scan<N>"), "{e}");
    }

    #[test]
    fn scan_and_write_phases_build_the_promised_mix() {
        let t = task("scan10");
        t.validate().unwrap();
        let c = t.config(0).unwrap();
        assert_eq!((c.min_scan_length, c.max_scan_length), (10, 10));
        assert_eq!(c.scan_proportion, 1.0);
        assert_eq!(c.request_distribution, RequestDist::Uniform);
        let c = task("write20:zipfian").config(0).unwrap();
        assert!((c.update_proportion - 0.2).abs() < 1e-12);
        assert!((c.read_proportion - 0.8).abs() < 1e-12);
        assert_ne!(c.request_distribution, RequestDist::Uniform);
        assert_eq!(task("c:latest").distribution_name(), "latest");
        assert_eq!(task("compact").total_ops(), 1);
        assert_eq!(task("learn").inserts().unwrap(), 0);
    }

    #[test]
    fn random_load_order_inserts_every_key_once() {
        use crate::options::{Compression, Settings};
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            cache_bytes: 1 << 20,
            write_buffer_bytes: 1 << 20,
            compression: Compression::None,
            sync: false,
            threads: 1,
            background_threads: 1,
            extra: Default::default(),
        };
        let db = (crate::engine::find("attune").unwrap().open)(dir.path(), &settings).unwrap();
        let mut t = task(LOAD);
        t.key_set = "seg10".into();
        t.records = 500;
        t.field_count = 1;
        t.load_order = Some(3);
        let progress = AtomicU64::new(0);
        run_task(db.as_ref(), &t, &progress).unwrap();
        let set = t.key_set().unwrap().unwrap();
        let mut s = db.session().unwrap();
        let mut v = Vec::new();
        for i in 0..500 {
            assert!(
                s.get(&encode_key16(set.key_at(i)), &mut v).unwrap(),
                "key {i}"
            );
        }
        assert!(!s.get(&encode_key16(set.key_at(500)), &mut v).unwrap());
        drop(s);
        let r = run_step(db.as_ref(), &task(COMPACT), &progress).unwrap();
        assert_eq!(r.ops, 1, "attune compacts");
        db.close().unwrap();
    }

    #[test]
    fn inserts_are_counted_for_insert_workloads_only() {
        assert_eq!(task("a").inserts().unwrap(), 0);
        let d = task("d").inserts().unwrap();
        assert!((20..90).contains(&d), "about 5% of 1000: {d}");
        assert_eq!(task(LOAD).inserts().unwrap(), 1000);
    }
}
