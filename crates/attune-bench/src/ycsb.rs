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
//! Thread-safety: each client thread builds its own stream. Invariant: a phase is a pure function
//! of its [`YcsbTask`].

use std::str::FromStr;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use attune_workload::keys::{encode_key16, KeySet};
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
        if self.workload != LOAD && self.operations == 0 {
            return Err(BenchError::invalid("--operations", "must be at least 1"));
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(BenchError::invalid(
                "--threads",
                "must be between 1 and 1024",
            ));
        }
        if self.workload != LOAD {
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

    /// Parses a `--workloads` entry.
    pub fn parse_workload(name: &str) -> Result<String> {
        let n = name.trim().to_ascii_lowercase();
        if n == LOAD {
            return Ok(n);
        }
        CoreWorkload::from_str(&n).map_err(|_| BenchError::UnknownWorkload {
            kind: "YCSB workload",
            name: name.to_string(),
            valid: "load, a, b, c, d, e, f".to_string(),
        })?;
        Ok(n.trim_start_matches("workload").to_string())
    }

    fn config(&self, thread: usize) -> Result<YcsbConfig> {
        let letter = if self.workload == LOAD {
            "a"
        } else {
            self.workload.as_str()
        };
        let w = CoreWorkload::from_str(letter).map_err(wl_err)?;
        let per_thread = self.operations.div_ceil(self.threads as u64);
        let seed = self.seed.wrapping_add(1 + thread as u64 * 0x9E37_79B9);
        let mut cfg = YcsbConfig::core(w, self.records, per_thread, seed);
        cfg.field_count = self.field_count;
        cfg.field_length = self.field_length;
        if self.key_set != YCSB_KEYS {
            cfg.insert_order = InsertOrder::Ordered;
        }
        if let Some(d) = &self.distribution {
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
    let set = task.key_set()?;
    let record = task.record_bytes();
    let key_bytes = |k: u64| -> [u8; 16] {
        encode_key16(match &set {
            Some(s) => s.key_at(k),
            None => k,
        })
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
                    s.put(&key_bytes(key), values.next(record))?;
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
        }
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
    fn inserts_are_counted_for_insert_workloads_only() {
        assert_eq!(task("a").inserts().unwrap(), 0);
        let d = task("d").inserts().unwrap();
        assert!((20..90).contains(&d), "about 5% of 1000: {d}");
        assert_eq!(task(LOAD).inserts().unwrap(), 1000);
    }
}
