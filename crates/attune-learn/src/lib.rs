//! # attune-learn: small models for hot paths
//!
//! The learned-index half of Bourbon (Dai 2025, ch. 2) as a standalone crate: an engine (here
//! attune-kv) uses it to replace block-index search inside an SSTable, and to decide which files
//! are worth a model.
//!
//! ```
//! use attune_learn::{LearnedIndex, DELTA_DEFAULT};
//!
//! // Keys of one sorted file (any length, bytewise order).
//! let keys: Vec<Vec<u8>> = (0..10_000u64).map(|i| format!("user:{:08}", i * 7).into_bytes())
//!     .collect();
//! let idx = LearnedIndex::train(&keys, DELTA_DEFAULT).unwrap();
//! let w = idx.predict(b"user:00000700").to_usize(); // the window [lo, hi) of positions
//! assert!(w.contains(&100) && w.len() <= 2 * DELTA_DEFAULT as usize + 2);
//! // Persist it beside the file; decoding untrusted bytes never panics.
//! let back = LearnedIndex::decode(&idx.encode()).unwrap();
//! assert_eq!(back, idx);
//! ```
//!
//! * [`plr`] — Greedy-PLR with error bound δ: one pass, linear time; `predict` returns a window
//!   guaranteed to hold the key (and its lower bound) for every key, present or absent.
//! * [`keymap`] — order-preserving byte key → `u64` mapping (common prefix stripped), with
//!   graceful degradation when keys collapse, reported by [`Quality`].
//! * [`index`] — [`LearnedIndex`]: mapper + model, the unit an engine stores per file.
//! * [`format`](mod@format) — the versioned, checksummed persisted form
//!   (docs/formats/learned-model.md).
//! * [`analyzer`] — Bourbon's cost-benefit analyzer (§2.3.4): wait, estimate, prioritise.
//! * [`analyzer_state`] — the analyzer's statistics, persisted across reopen.
//! * [`hindsight`] — what each model cost and saved: the least any analyzer could have learned.
//!
//! Design, choices where the source is silent, and measured numbers: `docs/learned-index.md`.

// Tests may unwrap: a failed unwrap is a failed test. Library code never does (workspace lint).
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod analyzer;
pub mod analyzer_state;
pub mod error;
pub mod format;
pub mod hindsight;
pub mod index;
pub mod keymap;
pub mod plr;

pub use analyzer::{
    Analyzer, AnalyzerConfig, AnalyzerStats, Benefit, Decision, FileStats, LevelSummary,
    LookupPath, LookupResult,
};
pub use error::{LearnError, Result};
pub use hindsight::{FrontierPoint, Hindsight};
pub use index::{LearnedIndex, LearnedIndexBuilder};
pub use keymap::KeyMapper;
pub use plr::{
    PlrBuilder, PlrFit, PlrModel, PosRange, Quality, Segment, SegmentSearch, DELTA_DEFAULT,
    DELTA_MAX, PLR_FIT_DEFAULT,
};

#[cfg(test)]
mod tests {
    /// The types an engine shares among reader threads are `Send + Sync`.
    #[test]
    fn shared_types_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<crate::LearnedIndex>();
        assert_send_sync::<crate::PlrModel>();
        assert_send_sync::<crate::Analyzer>();
        assert_send_sync::<crate::FileStats>();
        assert_send_sync::<crate::LearnError>();
    }
}
