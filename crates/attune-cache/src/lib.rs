//! # attune-cache
//!
//! Replacement policies, ghost caches, miss-ratio curves, and **Symbiosis** (Dai et al., FAST '24):
//! online sizing of an uncompressed application cache against a compressed second tier (the OS
//! page cache or an in-process compressed block cache) that share one memory budget M.
//!
//! Engine-independent: the engine reports each block read ([`BlockAccess`]: file, block number,
//! offset, lengths, whether each tier hit, optionally the latency) and asks
//! [`Symbiosis::app_target_bytes`] what M_a to use; the rest of M is the second tier's.
//!
//! * [`policy`] — byte-charged [`Lru`] and [`S3Fifo`] behind [`ReplacementPolicy`].
//! * [`stack`] — O(log n) byte stack distances (Fenwick tree over access times) and the LRU
//!   miss-ratio curve.
//! * [`twotier`] — the two-tier model and the cost formula L_e = (1 − H_a)(C_a + (1 − H_k)C_k).
//! * [`ghost`] — GhostSim: 9 candidates, stack-distance application ghost, page-level
//!   second-tier ghosts of all candidates side by side within 0.2 % of M (or the paper's one
//!   ghost shrunk candidate by candidate), early stop once the ranking is settled,
//!   misalignment-aware group sampling (R = 1/64, G = 32).
//! * [`tracker`] — the controller: windows, Stable/Adapting/Settling/Paused, reset policy, guard,
//!   restarts and pauses.
//! * [`calibrate`] — measuring C_a and C_k (`O_DIRECT`, with a documented fallback).
//!
//! ```
//! use attune_cache::{BlockAccess, GhostConfig, MissCosts, SecondTier, Symbiosis, SymbiosisConfig};
//!
//! let ghost = GhostConfig::new(64 << 20, 1 << 20, SecondTier::kernel_default());
//! let costs = MissCosts { app_miss_ns: 3_000.0, second_miss_ns: 15_000.0 };
//! let mut sym = Symbiosis::new(SymbiosisConfig::new(ghost, costs)).unwrap();
//! let access = BlockAccess {
//!     file: 7, block_no: 3, offset: 3 * 2048, compressed_len: 2048, uncompressed_len: 4096,
//!     app_hit: false, second_hit: Some(true), latency_ns: None,
//! };
//! if let Some(m_a) = sym.record(&access) {
//!     println!("resize the block cache to {m_a} bytes");
//! }
//! assert_eq!(sym.app_target_bytes(), 1 << 20);
//! ```
//!
//! Design, paper mapping and measurements: `docs/symbiosis.md`.

// Tests may unwrap: a failed unwrap is a failed test. Library code never does (workspace lint).
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod access;
pub mod calibrate;
pub mod error;
pub mod ghost;
pub mod policy;
pub mod stack;
pub mod synth;
pub mod tracker;
pub mod twotier;

#[cfg(test)]
mod tests;

pub use access::{BlockAccess, SecondTier};
pub use error::{CacheError, Result};
pub use ghost::{CandidatePrediction, EarlyStop, GhostConfig, GhostSim, GroupSampler};
pub use policy::{BlockKey, Lru, PolicyKind, ReplacementPolicy, S3Fifo};
pub use stack::{Distance, DistanceHistogram, StackDistance};
pub use synth::{BlockLayout, BlockRef, ClosedLoop};
pub use tracker::{MissCosts, RoundReport, State, Symbiosis, SymbiosisConfig, SymbiosisStats};
pub use twotier::{expected_latency, HitCounts, TierHit, TwoTier};
