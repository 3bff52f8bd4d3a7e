//! Micro benchmarks with db_bench's semantics: `fillseq`, `fillrandom`, `overwrite`, `readrandom`,
//! `readseq`, `seekrandom`.
//!
//! * `fillseq`: keys 0..records in order, into an empty database. `fillrandom`: `records` puts of
//!   uniformly random keys in `[0, records)` (so about 63% distinct), into an empty database.
//!   `overwrite`: as `fillrandom`, on the existing database.
//! * `readrandom`: `operations` gets of uniformly random keys; `found` counts hits.
//!   `seekrandom`: `operations` seeks to random keys reading the entry found (db_bench's
//!   `seek_nexts=0`); `found` counts exact matches. `readseq`: one forward iteration over up to
//!   `operations` entries from the first key, one operation (and one latency sample) per entry.
//! * As in db_bench each client thread performs the full count with its own random stream
//!   (seed + thread index), and `entries_per_batch` groups writes into write batches.
//!
//! Thread-safety: the bodies built here run on the driver's client threads; each keeps its own
//! generators. Invariant: the key stream of a write benchmark is a pure function of its
//! parameters, so [`written_keys`] replays it exactly to count the live keys.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::driver::{Body, ThreadStats};
use crate::engine::{BatchOp, Session};
use crate::error::{BenchError, Result};
use crate::keys::{make_key, Rng, ValueGen};

/// One micro benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Micro {
    /// Sequential keys into an empty database.
    FillSeq,
    /// Random keys into an empty database.
    FillRandom,
    /// Random keys over the existing database.
    Overwrite,
    /// Random point reads.
    ReadRandom,
    /// One forward scan.
    ReadSeq,
    /// Random seeks.
    SeekRandom,
}

/// Every benchmark with its name, in db_bench's spelling.
pub const ALL: &[(&str, Micro)] = &[
    ("fillseq", Micro::FillSeq),
    ("fillrandom", Micro::FillRandom),
    ("overwrite", Micro::Overwrite),
    ("readrandom", Micro::ReadRandom),
    ("readseq", Micro::ReadSeq),
    ("seekrandom", Micro::SeekRandom),
];

impl Micro {
    /// Looks a benchmark up by name; the error lists the valid ones.
    pub fn parse(name: &str) -> Result<Micro> {
        let n = name.trim();
        ALL.iter()
            .find(|(k, _)| *k == n)
            .map(|(_, m)| *m)
            .ok_or_else(|| BenchError::UnknownWorkload {
                kind: "benchmark",
                name: n.to_string(),
                valid: ALL.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "),
            })
    }

    /// The db_bench name.
    pub fn name(self) -> &'static str {
        ALL.iter().find(|(_, m)| *m == self).map_or("?", |(k, _)| k)
    }

    /// Starts from an empty database.
    pub fn fresh(self) -> bool {
        matches!(self, Micro::FillSeq | Micro::FillRandom)
    }

    /// Writes data.
    pub fn writes(self) -> bool {
        matches!(self, Micro::FillSeq | Micro::FillRandom | Micro::Overwrite)
    }
}

/// Sizes and counts shared by every micro benchmark of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MicroParams {
    /// Keys in the key space (db_bench `--num`).
    pub records: u64,
    /// Reads/seeks per thread (db_bench `--reads`); `readseq` visits at most this many entries.
    pub operations: u64,
    /// Key bytes.
    pub key_size: usize,
    /// Value bytes.
    pub value_size: usize,
    /// Writes per batch (db_bench `--batch_size`/entries_per_batch; 1 = plain puts).
    pub batch_size: usize,
    /// Base seed of every random stream.
    pub seed: u64,
    /// Unrecorded operations per thread before a read benchmark's measurement.
    pub warmup_ops: u64,
    /// Drop the database files from the page cache before the benchmark.
    pub cold: bool,
    /// Client threads.
    pub threads: usize,
    /// Entries read after each `seekrandom` seek (db_bench `--seek_nexts`): 10 or 100 make it
    /// a short range scan.
    #[serde(default)]
    pub seek_nexts: u64,
}

/// The result-row name of `bench`: `seekrandom` with `seek_nexts` > 0 is `seekrandom_nextN`.
pub fn row_name(bench: Micro, p: &MicroParams) -> String {
    if bench == Micro::SeekRandom && p.seek_nexts > 0 {
        format!("seekrandom_next{}", p.seek_nexts)
    } else {
        bench.name().to_string()
    }
}

impl MicroParams {
    /// Checks values that would make a run meaningless; called before any work.
    pub fn validate(&self) -> Result<()> {
        if self.records == 0 {
            return Err(BenchError::invalid("--records", "must be at least 1"));
        }
        if self.operations == 0 {
            return Err(BenchError::invalid("--operations", "must be at least 1"));
        }
        if self.key_size == 0 || self.key_size > 1 << 16 {
            return Err(BenchError::invalid(
                "--key-size",
                "must be between 1 and 65536 bytes",
            ));
        }
        if self.key_size < 8 && self.records > 1u64 << (8 * self.key_size as u32) {
            return Err(BenchError::invalid(
                "--key-size",
                format!(
                    "{} bytes cannot hold {} distinct keys",
                    self.key_size, self.records
                ),
            ));
        }
        if self.value_size > 64 << 20 {
            return Err(BenchError::invalid(
                "--value-size",
                "must be at most 64 MiB",
            ));
        }
        if self.batch_size == 0 {
            return Err(BenchError::invalid("--batch-size", "must be at least 1"));
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(BenchError::invalid(
                "--threads",
                "must be between 1 and 1024",
            ));
        }
        Ok(())
    }

    /// Operations one thread performs in `bench` (for progress totals).
    pub fn ops_per_thread(&self, bench: Micro) -> u64 {
        match bench {
            Micro::FillSeq | Micro::FillRandom | Micro::Overwrite => self.records,
            Micro::ReadRandom | Micro::SeekRandom => self.operations,
            Micro::ReadSeq => self.operations.min(self.records),
        }
    }
}

/// The seed of thread `t`'s stream in `bench` (warm-up streams use a different salt).
fn stream_seed(p: &MicroParams, bench: Micro, t: usize, warmup: bool) -> u64 {
    let salt = (bench as u64 + 1) * 0x1000_0000_0000 + if warmup { 0x9999_0000 } else { 0 };
    p.seed.wrapping_add(salt).wrapping_add(t as u64)
}

/// The key indices thread `t` writes in `bench`, in order (empty for read benchmarks).
pub fn written_keys(p: &MicroParams, bench: Micro, t: usize) -> Box<dyn Iterator<Item = u64>> {
    let records = p.records;
    match bench {
        Micro::FillSeq => Box::new(0..records),
        Micro::FillRandom | Micro::Overwrite => {
            let mut rng = Rng::new(stream_seed(p, bench, t, false));
            Box::new((0..records).map(move |_| rng.below(records)))
        }
        _ => Box::new(std::iter::empty()),
    }
}

fn write_body(
    p: &MicroParams,
    bench: Micro,
) -> impl Fn(usize, &mut dyn Session, &mut ThreadStats<'_>) -> Result<()> + Sync + '_ {
    move |t, s, st| {
        let mut values = ValueGen::new(stream_seed(p, bench, t, false), p.value_size, 0.5);
        let mut keys = written_keys(p, bench, t);
        let per = (p.key_size + p.value_size) as u64;
        if p.batch_size <= 1 {
            let mut key = Vec::with_capacity(p.key_size);
            for i in keys.by_ref() {
                make_key(i, p.key_size, &mut key);
                let v = values.next(p.value_size);
                let start = Instant::now();
                s.put(&key, v)?;
                st.done(start);
                st.user_bytes_written += per;
            }
            return Ok(());
        }
        // Batched writes: one latency sample per batch, `batch_size` operations counted.
        let mut key_buf: Vec<Vec<u8>> = vec![Vec::new(); p.batch_size];
        let mut val_buf: Vec<Vec<u8>> = vec![Vec::new(); p.batch_size];
        loop {
            let mut n = 0;
            for (k, v) in key_buf.iter_mut().zip(val_buf.iter_mut()) {
                let Some(i) = keys.next() else { break };
                make_key(i, p.key_size, k);
                v.clear();
                v.extend_from_slice(values.next(p.value_size));
                n += 1;
            }
            if n == 0 {
                return Ok(());
            }
            let ops: Vec<BatchOp<'_>> = (0..n)
                .map(|j| BatchOp::Put(&key_buf[j], &val_buf[j]))
                .collect();
            let start = Instant::now();
            s.write_batch(&ops)?;
            let ns = start.elapsed().as_nanos() as u64;
            for _ in 0..n {
                st.done_ns(ns);
            }
            st.user_bytes_written += per * n as u64;
        }
    }
}

fn read_body(
    p: &MicroParams,
    bench: Micro,
    warmup: bool,
) -> impl Fn(usize, &mut dyn Session, &mut ThreadStats<'_>) -> Result<()> + Sync + '_ {
    move |t, s, st| {
        let count = if warmup { p.warmup_ops } else { p.operations };
        let mut rng = Rng::new(stream_seed(p, bench, t, warmup));
        let mut key = Vec::with_capacity(p.key_size);
        let mut value = Vec::with_capacity(p.value_size);
        match bench {
            Micro::ReadRandom => {
                for _ in 0..count {
                    make_key(rng.below(p.records), p.key_size, &mut key);
                    let start = Instant::now();
                    let hit = s.get(&key, &mut value)?;
                    st.done(start);
                    st.found += u64::from(hit);
                }
            }
            Micro::SeekRandom => {
                for _ in 0..count {
                    make_key(rng.below(p.records), p.key_size, &mut key);
                    let mut exact = false;
                    let start = Instant::now();
                    let mut first = true;
                    s.scan(&key, 1 + p.seek_nexts as usize, &mut |k, v| {
                        if first {
                            exact = k == key.as_slice();
                            first = false;
                        }
                        value.clear();
                        value.extend_from_slice(v);
                    })?;
                    st.done(start);
                    st.found += u64::from(exact);
                }
            }
            Micro::ReadSeq => {
                let mut last = Instant::now();
                let mut visited = 0u64;
                s.scan(&[], count as usize, &mut |_, v| {
                    value.clear();
                    value.extend_from_slice(v);
                    let now = Instant::now();
                    st.done_ns(now.duration_since(last).as_nanos() as u64);
                    last = now;
                    visited += 1;
                })?;
                st.found += visited;
            }
            _ => {}
        }
        Ok(())
    }
}

/// The measured body and optional warm-up body of `bench`.
pub fn bodies(p: &MicroParams, bench: Micro) -> (Box<Body<'_>>, Option<Box<Body<'_>>>) {
    if bench.writes() {
        (Box::new(write_body(p, bench)), None)
    } else {
        let warm: Option<Box<Body<'_>>> = if p.warmup_ops > 0 {
            Some(Box::new(read_body(p, bench, true)))
        } else {
            None
        };
        (Box::new(read_body(p, bench, false)), warm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> MicroParams {
        MicroParams {
            records: 1000,
            operations: 1000,
            key_size: 16,
            value_size: 100,
            seek_nexts: 0,
            batch_size: 1,
            seed: 1,
            warmup_ops: 0,
            cold: false,
            threads: 1,
        }
    }

    #[test]
    fn unknown_benchmark_lists_valid_names() {
        let e = Micro::parse("fillbogus").unwrap_err().to_string();
        assert!(e.contains("fillseq") && e.contains("seekrandom"), "{e}");
        assert_eq!(Micro::parse("readseq").unwrap(), Micro::ReadSeq);
    }

    #[test]
    fn zero_records_is_rejected_before_work() {
        let mut p = params();
        p.records = 0;
        assert!(p.validate().is_err());
        let mut p = params();
        p.key_size = 1;
        assert!(p.validate().is_err(), "1-byte keys cannot hold 1000 keys");
        assert!(params().validate().is_ok());
    }

    #[test]
    fn fillrandom_stream_replays_identically() {
        let p = params();
        let a: Vec<u64> = written_keys(&p, Micro::FillRandom, 0).collect();
        let b: Vec<u64> = written_keys(&p, Micro::FillRandom, 0).collect();
        assert_eq!(a, b);
        let distinct: std::collections::BTreeSet<u64> = a.iter().copied().collect();
        // About 1 - 1/e of the key space: 632 of 1000 expected.
        assert!((560..700).contains(&distinct.len()), "{}", distinct.len());
        let c: Vec<u64> = written_keys(&p, Micro::FillRandom, 1).collect();
        assert_ne!(a, c, "threads draw different streams");
    }
}
