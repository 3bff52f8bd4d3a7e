//! The prefetching evaluator (§4.4–4.5 of the TinFetch chapter).
//!
//! Replays a trace against one [`Prefetcher`]. The cache is unlimited and holds only prefetched
//! 4 KiB blocks (demand misses go to storage and are not cached, so the figures measure the
//! prefetcher and nothing else). A prefetched block enters a pending queue and becomes usable
//! `delay_ns` (20 ms) after it was issued; a demand for a pending block is a **late** prefetch:
//! a miss. Requests for blocks already cached or pending cost nothing (they are not re-fetched).
//!
//! Metrics, over the accesses from index `measure_from` on (the test half of a 50:50 split). The
//! earlier accesses drive the prefetcher (it enters the measured half warmed up), but the cache is
//! emptied at `measure_from`: a block prefetched during the warm-up was never charged to the
//! measured half, so it may not count as a hit there either. Every measured hit is paid for by a
//! prefetch issued in the measured half.
//!
//! * hit rate = demanded blocks served from the cache ÷ demanded blocks;
//! * accuracy = prefetched blocks used in time at least once ÷ prefetched blocks;
//! * timeliness = prefetched blocks first used in time ÷ those first used at all (not
//!   applicable, `None`, when no prefetched block was used);
//! * bandwidth load = (demand misses + prefetched blocks) ÷ demanded blocks (1.0 without
//!   prefetching);
//! * score = hit rate ÷ bandwidth load (Eq. 4.1).
//!
//! Thread-safety: pure function over its inputs.

use std::collections::HashMap;

use attune_workload::trace::{BlockRecord, IoKind};

use super::{Access, PrefetchRange, Prefetcher, BLOCK_BYTES, PREFETCH_BYTES_MAX};

/// Evaluation settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalConfig {
    /// Pending-queue delay before a prefetched block is usable (default 20 ms, the chapter's HDD
    /// fetch time).
    pub delay_ns: u64,
    /// First access index that is measured (0 = all; `n / 2` for the 50:50 split of learned
    /// methods). Earlier accesses still drive the prefetcher and the cache.
    pub measure_from: usize,
    /// Only reads are demands; writes are skipped entirely (default false: every I/O is a demand,
    /// as in the chapter's LBA sequences).
    pub reads_only: bool,
}

impl Default for EvalConfig {
    fn default() -> Self {
        Self {
            delay_ns: 20_000_000,
            measure_from: 0,
            reads_only: false,
        }
    }
}

/// One method's figures on one trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Method name.
    pub method: String,
    /// Measured accesses.
    pub accesses: u64,
    /// Demanded blocks.
    pub demand_blocks: u64,
    /// Demanded blocks served from the cache.
    pub hit_blocks: u64,
    /// Demanded blocks whose prefetch was still pending (late).
    pub late_blocks: u64,
    /// Blocks prefetched (fetched from storage by the prefetcher).
    pub prefetched_blocks: u64,
    /// Prefetched blocks used in time at least once.
    pub useful_blocks: u64,
    /// Prefetched blocks first demanded while still pending.
    pub late_first_blocks: u64,
    /// Prefetch decisions that requested something.
    pub decisions: u64,
}

impl Metrics {
    /// Hit rate in [0, 1].
    pub fn hit_rate(&self) -> f64 {
        ratio(self.hit_blocks, self.demand_blocks)
    }
    /// Accuracy in [0, 1].
    pub fn accuracy(&self) -> f64 {
        ratio(self.useful_blocks, self.prefetched_blocks)
    }
    /// Timeliness in [0, 1]; `None` (not applicable) when no prefetched block was used at all.
    pub fn timeliness(&self) -> Option<f64> {
        let used = self.useful_blocks + self.late_first_blocks;
        (used > 0).then(|| ratio(self.useful_blocks, used))
    }
    /// Storage bandwidth load (1.0 = the demand traffic alone).
    pub fn bandwidth_load(&self) -> f64 {
        if self.demand_blocks == 0 {
            return 1.0;
        }
        let misses = self.demand_blocks - self.hit_blocks;
        (misses + self.prefetched_blocks) as f64 / self.demand_blocks as f64
    }
    /// Score = hit rate ÷ bandwidth load.
    pub fn score(&self) -> f64 {
        let l = self.bandwidth_load();
        if l > 0.0 {
            self.hit_rate() / l
        } else {
            0.0
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

struct Entry {
    ready_ns: u64,
    used: bool,
    measured: bool,
}

/// Replays `trace` against `p` and measures it.
pub fn evaluate(trace: &[BlockRecord], p: &mut dyn Prefetcher, cfg: &EvalConfig) -> Metrics {
    let mut m = Metrics {
        method: p.name(),
        ..Metrics::default()
    };
    let mut cache: HashMap<u64, Entry> = HashMap::new();
    let mut reqs: Vec<PrefetchRange> = Vec::new();
    let mut fetched_prev = 0u64;
    let mut warming = cfg.measure_from > 0;
    for (i, r) in trace.iter().enumerate() {
        if cfg.reads_only && r.kind != IoKind::Read {
            continue;
        }
        let measured = i >= cfg.measure_from;
        if measured && warming {
            // Warm-up prefetches are not charged to the measured half: they may not hit in it.
            cache.clear();
            warming = false;
        }
        let t = r.timestamp_ns;
        let size = u64::from(r.size.max(1));
        let first = r.offset / BLOCK_BYTES;
        let last = r.offset.saturating_add(size - 1) / BLOCK_BYTES;
        let mut a = Access {
            time_ns: t,
            offset: r.offset,
            size,
            write: r.kind == IoKind::Write,
            blocks: last - first + 1,
            fetched_prev_blocks: fetched_prev,
            ..Access::default()
        };
        for b in first..=last {
            if let Some(e) = cache.get_mut(&b) {
                if e.ready_ns <= t {
                    a.hit_blocks += 1;
                    if !e.used {
                        e.used = true;
                        a.useful_blocks += 1;
                        if e.measured {
                            m.useful_blocks += 1;
                        }
                    }
                } else {
                    a.late_blocks += 1;
                    if measured {
                        m.late_blocks += 1;
                    }
                    if !e.used && e.measured {
                        m.late_first_blocks += 1;
                    }
                    // Counted once as late; a later in-time use does not make it useful.
                    e.used = true;
                }
            }
        }
        if measured {
            m.accesses += 1;
            m.demand_blocks += a.blocks;
            m.hit_blocks += a.hit_blocks;
        }
        reqs.clear();
        p.access(&a, &mut reqs);
        let mut any = false;
        fetched_prev = 0;
        for q in &reqs {
            let len = q.len.min(PREFETCH_BYTES_MAX);
            if len == 0 {
                continue;
            }
            let qf = q.offset / BLOCK_BYTES;
            let ql = q.offset.saturating_add(len - 1) / BLOCK_BYTES;
            for b in qf..=ql {
                if let std::collections::hash_map::Entry::Vacant(v) = cache.entry(b) {
                    v.insert(Entry {
                        ready_ns: t.saturating_add(cfg.delay_ns),
                        used: false,
                        measured,
                    });
                    any = true;
                    fetched_prev += 1;
                    if measured {
                        m.prefetched_blocks += 1;
                    }
                }
            }
        }
        if any && measured {
            m.decisions += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prefetch::baselines::NoPrefetch;

    fn rec(t_ms: u64, off: u64, size: u32) -> BlockRecord {
        BlockRecord {
            timestamp_ns: t_ms * 1_000_000,
            offset: off,
            size,
            kind: IoKind::Read,
            latency_ns: 0,
        }
    }

    /// Prefetches the next 8 blocks after every access.
    struct Next8;
    impl Prefetcher for Next8 {
        fn name(&self) -> String {
            "next8".into()
        }
        fn access(&mut self, a: &Access, out: &mut Vec<PrefetchRange>) {
            out.push(PrefetchRange {
                offset: a.end(),
                len: 8 * BLOCK_BYTES,
            });
        }
    }

    #[test]
    fn no_prefetching_has_load_one_and_no_hits() {
        let t: Vec<_> = (0..100).map(|i| rec(i, i * 4096, 4096)).collect();
        let m = evaluate(&t, &mut NoPrefetch, &EvalConfig::default());
        assert_eq!(m.hit_rate(), 0.0);
        assert_eq!(m.bandwidth_load(), 1.0);
        assert_eq!(m.score(), 0.0);
    }

    #[test]
    fn sequential_reads_hit_after_the_pending_delay() {
        // 4 KiB reads 30 ms apart: every prefetch has arrived before its demand.
        let t: Vec<_> = (0..100).map(|i| rec(i * 30, i * 4096, 4096)).collect();
        let m = evaluate(&t, &mut Next8, &EvalConfig::default());
        assert_eq!(m.hit_blocks, 99);
        assert_eq!(m.prefetched_blocks, 8 + 99);
        assert_eq!(m.timeliness(), Some(1.0));
        // Load: 1 miss + 107 prefetched over 100 demanded.
        assert!((m.bandwidth_load() - 1.08).abs() < 1e-12);
    }

    #[test]
    fn prefetches_arriving_after_the_demand_are_late_misses() {
        // 1 ms apart: every demand finds its block still pending.
        let t: Vec<_> = (0..10).map(|i| rec(i, i * 4096, 4096)).collect();
        let m = evaluate(&t, &mut Next8, &EvalConfig::default());
        assert_eq!(m.hit_blocks, 0);
        assert_eq!(m.late_blocks, 9);
        assert_eq!(m.timeliness(), Some(0.0));
        assert_eq!(m.accuracy(), 0.0);
    }

    #[test]
    fn the_split_measures_only_the_second_half() {
        let t: Vec<_> = (0..100).map(|i| rec(i * 30, i * 4096, 4096)).collect();
        let cfg = EvalConfig {
            measure_from: 50,
            ..EvalConfig::default()
        };
        let m = evaluate(&t, &mut Next8, &cfg);
        assert_eq!(m.accesses, 50);
        // Access 50's block was prefetched by access 49, in the warm-up: not a measured hit.
        assert_eq!(m.hit_blocks, 49);
        assert_eq!(m.prefetched_blocks, 8 + 49);
    }

    #[test]
    fn warm_up_prefetches_do_not_hit_in_the_measured_half() {
        // Prefetches the next 64 blocks once, on the first access, and never again.
        struct Once(bool);
        impl Prefetcher for Once {
            fn name(&self) -> String {
                "once".into()
            }
            fn access(&mut self, a: &Access, out: &mut Vec<PrefetchRange>) {
                if !self.0 {
                    self.0 = true;
                    out.push(PrefetchRange {
                        offset: a.end(),
                        len: 64 * BLOCK_BYTES,
                    });
                }
            }
        }
        let t: Vec<_> = (0..40).map(|i| rec(i * 30, i * 4096, 4096)).collect();
        let whole = evaluate(&t, &mut Once(false), &EvalConfig::default());
        assert_eq!(whole.hit_blocks, 39);
        let cfg = EvalConfig {
            measure_from: 20,
            ..EvalConfig::default()
        };
        let m = evaluate(&t, &mut Once(false), &cfg);
        // Nothing was prefetched in the measured half, so nothing there is a hit.
        assert_eq!(m.prefetched_blocks, 0);
        assert_eq!(m.hit_blocks, 0);
        assert_eq!(m.bandwidth_load(), 1.0);
        assert_eq!(m.timeliness(), None);
    }

    #[test]
    fn timeliness_is_not_applicable_without_prefetching() {
        let t: Vec<_> = (0..10).map(|i| rec(i * 30, i * 4096, 4096)).collect();
        let m = evaluate(&t, &mut NoPrefetch, &EvalConfig::default());
        assert_eq!(m.timeliness(), None);
    }
}
