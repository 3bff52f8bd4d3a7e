//! Heuristic baselines, each with the chapter's 128 KB prefetch unless it sizes its own.
//!
//! * [`Readahead`]: Linux's on-demand readahead (`mm/readahead.c`) as a block device sees it: one
//!   readahead state (a block device is one file), no readahead for a random access, an initial
//!   window of 4× / 2× the request when an access is sequential, then each window 4× / 2× the last
//!   up to 128 KB, issued asynchronously when the reader reaches the previous window.
//! * [`Stride`]: the last two deltas between access starts agree → prefetch 128 KB at the next
//!   stride.
//! * [`Markov`]: a first-order Markov chain over 128 KB regions; prefetches the most frequent
//!   successor region of the current one (table bounded by [`MARKOV_REGIONS_MAX`]).
//! * [`Leap`]: Leap's majority trend: a Boyer–Moore majority over the last 4, 8, 16, 32 deltas;
//!   when one has a majority, prefetch along it (128 KB of requests).
//! * [`Predicted`]: a fixed list of predicted next offsets, one per access (the learned
//!   sequence baseline computes them offline), each prefetching 128 KB there.
//!
//! Thread-safety: single-owner values.

use std::collections::HashMap;

use super::{Access, PrefetchRange, Prefetcher, BLOCK_BYTES, PREFETCH_BYTES};

const WINDOW_BLOCKS_MAX: u64 = PREFETCH_BYTES / BLOCK_BYTES;

/// Prefetches nothing (the reference: load 1.0, no hits).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPrefetch;

impl Prefetcher for NoPrefetch {
    fn name(&self) -> String {
        "none".into()
    }
    fn access(&mut self, _a: &Access, _out: &mut Vec<PrefetchRange>) {}
}

/// Linux-style readahead with ramp-up (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Readahead {
    /// Last block of the previous access + 1.
    prev_end: Option<u64>,
    /// Start of the current window (blocks), its size, and its asynchronous marker.
    start: u64,
    size: u64,
    async_size: u64,
}

impl Readahead {
    /// A fresh state.
    pub fn new() -> Self {
        Self::default()
    }
}

/// `get_init_ra_size`: 4× a small request, 2× a medium one, else the maximum.
fn init_size(req: u64) -> u64 {
    let r = req.next_power_of_two();
    let max = WINDOW_BLOCKS_MAX;
    if r <= max / 32 {
        r * 4
    } else if r <= max / 4 {
        r * 2
    } else {
        max
    }
}

/// `get_next_ra_size`: 4× a small window, 2× a medium one, capped at the maximum.
fn next_size(cur: u64) -> u64 {
    let max = WINDOW_BLOCKS_MAX;
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

impl Prefetcher for Readahead {
    fn name(&self) -> String {
        "readahead".into()
    }
    fn access(&mut self, a: &Access, out: &mut Vec<PrefetchRange>) {
        let first = a.offset / BLOCK_BYTES;
        let end = a.end().div_ceil(BLOCK_BYTES);
        let req = (end - first).max(1);
        let win_end = self.start + self.size;
        let marker = win_end.saturating_sub(self.async_size);
        if self.size > 0 && first <= win_end && end > marker && first >= self.start {
            // Reached the asynchronous marker of the current window: ramp up and read ahead.
            let next = next_size(self.size).min(WINDOW_BLOCKS_MAX);
            self.start = win_end;
            self.size = next;
            self.async_size = next;
        } else if self.prev_end.is_some_and(|p| first == p || first + 1 == p) {
            // Sequential but outside any window: initial readahead from here.
            let size = init_size(req).max(req).min(WINDOW_BLOCKS_MAX.max(req));
            self.start = first;
            self.size = size;
            self.async_size = size.saturating_sub(req);
            if self.async_size == 0 {
                self.async_size = size;
            }
        } else {
            // A random access: read only what was asked, keep no window.
            self.prev_end = Some(end);
            self.size = 0;
            return;
        }
        self.prev_end = Some(end);
        let from = self.start.max(end);
        let to = self.start + self.size;
        if to > from {
            out.push(PrefetchRange {
                offset: from * BLOCK_BYTES,
                len: (to - from) * BLOCK_BYTES,
            });
        }
    }
}

/// The stride prefetcher (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Stride {
    last: Option<u64>,
    delta: Option<i64>,
}

impl Stride {
    /// A fresh state.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Prefetcher for Stride {
    fn name(&self) -> String {
        "stride".into()
    }
    fn access(&mut self, a: &Access, out: &mut Vec<PrefetchRange>) {
        let s = a.offset / BLOCK_BYTES;
        if let Some(l) = self.last {
            let d = s as i64 - l as i64;
            if d != 0 && self.delta == Some(d) {
                if let Some(next) = s.checked_add_signed(d) {
                    out.push(PrefetchRange {
                        offset: next * BLOCK_BYTES,
                        len: PREFETCH_BYTES,
                    });
                }
            }
            self.delta = Some(d);
        }
        self.last = Some(s);
    }
}

/// Most regions the Markov table holds before it starts over (a memory bound).
pub const MARKOV_REGIONS_MAX: usize = 1 << 20;
const MARKOV_SUCCESSORS: usize = 4;
const REGION_BLOCKS: u64 = PREFETCH_BYTES / BLOCK_BYTES;

/// First-order Markov chain over 128 KB regions.
#[derive(Clone, Debug, Default)]
pub struct Markov {
    last: Option<u64>,
    table: HashMap<u64, Vec<(u64, u32)>>,
}

impl Markov {
    /// A fresh state.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Prefetcher for Markov {
    fn name(&self) -> String {
        "markov".into()
    }
    fn access(&mut self, a: &Access, out: &mut Vec<PrefetchRange>) {
        let region = a.offset / BLOCK_BYTES / REGION_BLOCKS;
        if let Some(p) = self.last.filter(|&p| p != region) {
            if self.table.len() >= MARKOV_REGIONS_MAX {
                self.table.clear();
            }
            let succ = self.table.entry(p).or_default();
            if let Some(e) = succ.iter_mut().find(|(r, _)| *r == region) {
                e.1 = e.1.saturating_add(1);
            } else if succ.len() < MARKOV_SUCCESSORS {
                succ.push((region, 1));
            } else if let Some(e) = succ.iter_mut().min_by_key(|e| e.1) {
                // Replace the least frequent successor.
                *e = (region, 1);
            }
        }
        if self.last != Some(region) {
            if let Some(best) = self
                .table
                .get(&region)
                .and_then(|s| s.iter().max_by_key(|e| e.1))
            {
                out.push(PrefetchRange {
                    offset: best.0 * REGION_BLOCKS * BLOCK_BYTES,
                    len: PREFETCH_BYTES,
                });
            }
        }
        self.last = Some(region);
    }
}

const LEAP_HISTORY: usize = 32;

/// Leap's majority-trend prefetcher.
#[derive(Clone, Debug, Default)]
pub struct Leap {
    last: Option<u64>,
    deltas: std::collections::VecDeque<i64>,
}

impl Leap {
    /// A fresh state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The majority delta of the most recent 4, 8, 16 or 32 deltas (smallest window first).
    fn trend(&self) -> Option<i64> {
        let n = self.deltas.len();
        let mut w = 4;
        while w <= LEAP_HISTORY && w <= n {
            let recent = self.deltas.iter().skip(n - w);
            let (mut cand, mut count) = (0i64, 0usize);
            for &d in recent.clone() {
                if count == 0 {
                    cand = d;
                    count = 1;
                } else if d == cand {
                    count += 1;
                } else {
                    count -= 1;
                }
            }
            if recent.filter(|&&d| d == cand).count() > w / 2 {
                return Some(cand);
            }
            w *= 2;
        }
        None
    }
}

impl Prefetcher for Leap {
    fn name(&self) -> String {
        "leap".into()
    }
    fn access(&mut self, a: &Access, out: &mut Vec<PrefetchRange>) {
        let s = a.offset / BLOCK_BYTES;
        if let Some(l) = self.last {
            if self.deltas.len() == LEAP_HISTORY {
                self.deltas.pop_front();
            }
            self.deltas.push_back(s as i64 - l as i64);
        }
        self.last = Some(s);
        let Some(d) = self.trend().filter(|&d| d != 0) else {
            return;
        };
        let req = a.size.div_ceil(BLOCK_BYTES).max(1);
        let steps = (WINDOW_BLOCKS_MAX / req).max(1);
        let mut at = s;
        for _ in 0..steps {
            let Some(n) = at.checked_add_signed(d) else {
                break;
            };
            at = n;
            out.push(PrefetchRange {
                offset: at * BLOCK_BYTES,
                len: req * BLOCK_BYTES,
            });
        }
    }
}

/// Externally predicted next offsets, one per access (`None`: no prefetch).
#[derive(Clone, Debug)]
pub struct Predicted {
    name: String,
    preds: Vec<Option<u64>>,
    i: usize,
}

impl Predicted {
    /// `preds[i]` is the byte offset to prefetch 128 KB from after access `i`.
    pub fn new(name: &str, preds: Vec<Option<u64>>) -> Self {
        Self {
            name: name.into(),
            preds,
            i: 0,
        }
    }
}

impl Prefetcher for Predicted {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn access(&mut self, _a: &Access, out: &mut Vec<PrefetchRange>) {
        if let Some(Some(off)) = self.preds.get(self.i) {
            out.push(PrefetchRange {
                offset: *off,
                len: PREFETCH_BYTES,
            });
        }
        self.i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(off_blocks: u64, blocks: u64) -> Access {
        Access {
            offset: off_blocks * BLOCK_BYTES,
            size: blocks * BLOCK_BYTES,
            blocks,
            ..Access::default()
        }
    }

    fn run(p: &mut dyn Prefetcher, seq: &[(u64, u64)]) -> Vec<Vec<PrefetchRange>> {
        seq.iter()
            .map(|&(o, n)| {
                let mut v = Vec::new();
                p.access(&acc(o, n), &mut v);
                v
            })
            .collect()
    }

    #[test]
    fn readahead_ignores_random_reads_and_ramps_on_sequential_ones() {
        let mut r = Readahead::new();
        let out = run(
            &mut r,
            &[(100, 1), (5000, 1), (5001, 1), (5002, 1), (5005, 1)],
        );
        assert!(out[0].is_empty() && out[1].is_empty());
        // Initial window 4 blocks from 5001: 5002..5005 prefetched.
        assert_eq!(out[2][0].offset, 5002 * BLOCK_BYTES);
        assert_eq!(out[2][0].len, 3 * BLOCK_BYTES);
        // Reaching the window: the next one is 4× as large (16 blocks).
        let grown: u64 = out[3].iter().chain(&out[4]).map(|r| r.len).sum();
        assert!(grown >= 16 * BLOCK_BYTES, "{out:?}");
        assert!(out.iter().flatten().all(|r| r.len <= PREFETCH_BYTES));
    }

    #[test]
    fn stride_needs_two_equal_deltas() {
        let mut s = Stride::new();
        let out = run(&mut s, &[(0, 1), (10, 1), (20, 1)]);
        assert!(out[1].is_empty());
        assert_eq!(out[2][0].offset, 30 * BLOCK_BYTES);
    }

    #[test]
    fn markov_predicts_the_usual_successor_region() {
        let mut m = Markov::new();
        let r = REGION_BLOCKS;
        let out = run(&mut m, &[(0, 1), (5 * r, 1), (9 * r, 1), (0, 1)]);
        assert_eq!(out[3][0].offset, 5 * r * BLOCK_BYTES);
    }

    #[test]
    fn leap_follows_a_majority_trend_despite_noise() {
        let mut l = Leap::new();
        let out = run(
            &mut l,
            &[(0, 1), (3, 1), (6, 1), (1000, 1), (1003, 1), (1006, 1)],
        );
        let last = &out[5];
        assert_eq!(last[0].offset, 1009 * BLOCK_BYTES);
    }
}
