//! # attune-embed
//!
//! Embedding tables larger than memory, served by one lookup per request of N keys (one per
//! table), where what matters is the **perfect-hit rate**: a request is served from memory only
//! when all N keys are cached.
//!
//! * [`table`] — the flat-file back end: one file of fixed-size fp32 rows per table, with a
//!   checksummed header, `pread` row reads and atomic bulk loads (`docs/formats/embed-table.md`).
//! * [`kvtable`] — the Attune-DB back end: every table in one `attune-kv` database, key =
//!   table id ‖ row (big-endian), misses read with `multi_get`, loads committed by one synced
//!   batch (`docs/formats/embed-kv.md`).
//! * [`policy`] — replacement policies over grouped requests: LRU, LFU, CLOCK, ARC and EVCache's
//!   group-score EV-LFU (aggHit computed once per request, max-based scores capped at N, O(1)
//!   eviction by per-score lists, perfect-page flush).
//! * [`codec`] — EVMix precisions: 32, 16, 8 and 4 bits per value, clipping to [−1, 1].
//! * [`store`] — [`EmbedStore`]: the tables behind one or two exclusive cache tiers.
//! * [`prox`] — EVProx's L3: a bounded key → surrogate map with CLOCK second chance.
//! * [`sim`] — hit-rate simulation of a policy on key streams, without values.
//!
//! Design, decisions and measurements: `docs/evstore.md`. Thread-safety: every type is `Send`
//! and owned by one thread at a time; the Python binding serialises lookups with a mutex.

// Tests may unwrap: a failed unwrap is a failed test. Library code never does (workspace lint).
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod codec;
pub mod error;
pub mod kvtable;
mod lists;
pub mod policy;
pub mod prox;
pub mod sim;
pub mod store;
pub mod table;

pub use codec::Precision;
pub use error::{EmbedError, Result};
pub use policy::{Policy, PolicyKind};
pub use sim::{GroupSim, SimStats};
pub use store::{Backend, EmbedStats, EmbedStore, StoreOptions, NO_SURROGATE};
pub use table::TableFile;
