//! Per-step timing of point lookups, for the latency breakdown of docs/learned-index.md
//! (Bourbon's Fig. 2.3 in spirit: where a lookup's time goes). Compiled in only with the cargo
//! feature `step-timing`; without it every function here is an empty inline function, so the
//! read path carries no cost.
//!
//! A lookup calls [`start`], then [`mark`] at the end of each step: the time since the previous
//! mark is added to that step. Steps that repeat (one table after another) accumulate. Totals are
//! per thread; [`take`] returns and clears the calling thread's.
//!
//! Thread-safety: thread-local state only. Overhead when enabled: one clock read per mark (about
//! 20 ns on this machine's TSC clock), which the breakdown's total includes; compare the total
//! with an uninstrumented run's latency to see it.

/// The steps of a point lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Memtable and immutable memtable.
    Memtable = 0,
    /// Finding the candidate tables (L0 range checks, the per-level file search, opening or
    /// borrowing the table handle).
    FindFiles = 1,
    /// The table's Bloom filter.
    Filter = 2,
    /// Index-block search (baseline) or model prediction (learned; for level models, the level
    /// prediction).
    Index = 3,
    /// Loading the data block (cache or mapping) and searching it or the model's window,
    /// including copying the record's value.
    Block = 4,
    /// Everything after the tables answered: reading a separated value from the value log,
    /// counters, returning.
    Value = 5,
}

/// Number of steps.
pub const STEPS: usize = 6;
/// Step names, in [`Step`] order.
pub const STEP_NAMES: [&str; STEPS] = [
    "memtable",
    "find_files",
    "filter",
    "index",
    "block",
    "value",
];

#[cfg(feature = "step-timing")]
mod imp {
    use super::{Step, STEPS};
    use std::cell::Cell;
    use std::time::Instant;

    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
        static TOTAL: Cell<[u64; STEPS]> = const { Cell::new([0; STEPS]) };
        static LOOKUPS: Cell<u64> = const { Cell::new(0) };
    }

    #[inline]
    pub fn start() {
        LOOKUPS.with(|n| n.set(n.get() + 1));
        LAST.with(|l| l.set(Some(Instant::now())));
    }

    #[inline]
    pub fn mark(step: Step) {
        let now = Instant::now();
        let Some(prev) = LAST.with(|l| l.replace(Some(now))) else {
            return;
        };
        let ns = u64::try_from(now.duration_since(prev).as_nanos()).unwrap_or(u64::MAX);
        TOTAL.with(|t| {
            let mut v = t.get();
            v[step as usize] = v[step as usize].saturating_add(ns);
            t.set(v);
        });
    }

    pub fn take() -> (u64, [u64; STEPS]) {
        LAST.with(|l| l.set(None));
        (
            LOOKUPS.with(|n| n.replace(0)),
            TOTAL.with(|t| t.replace([0; STEPS])),
        )
    }
}

#[cfg(not(feature = "step-timing"))]
mod imp {
    use super::{Step, STEPS};

    #[inline(always)]
    pub fn start() {}

    #[inline(always)]
    pub fn mark(_step: Step) {}

    pub fn take() -> (u64, [u64; STEPS]) {
        (0, [0; STEPS])
    }
}

/// Starts timing a lookup on this thread.
#[inline(always)]
pub fn start() {
    imp::start();
}

/// Ends `step`: the time since the previous mark (or [`start`]) is added to it.
#[inline(always)]
pub fn mark(step: Step) {
    imp::mark(step);
}

/// This thread's (lookups started, nanoseconds per step) since the last call; zeros without the
/// `step-timing` feature.
pub fn take() -> (u64, [u64; STEPS]) {
    imp::take()
}
