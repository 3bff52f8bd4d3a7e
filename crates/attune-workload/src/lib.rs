//! # attune-workload
//!
//! Deterministic, streaming workload generators for Attune's tests, benchmarks and CLI: one
//! library so that no component grows a private generator.
//!
//! * [`keys`] — indexable sorted key sets (Bourbon's linear / seg-1% / seg-10% / normal, SOSD's
//!   lognormal / uniform dense / uniform sparse, an OSM-like clustered set), 16-byte encoding,
//!   sequential and random load orders without materialising.
//! * [`criteo`] — a Criteo-like recommendation workload: 26 categorical tables with Zipf keys
//!   correlated across tables through latent clusters, 13 dense features and a hidden click model.
//! * [`dist`] — request distributions over `[0, n)`: uniform, zipfian (any θ >= 0), scrambled
//!   zipfian, hotspot, exponential, latest, sequential.
//! * [`ycsb`] — YCSB core workloads A–F with `CoreWorkload` semantics.
//! * [`wiscer`] — Wiscer's skewed hash-table workloads with popularity churn.
//! * [`mixgraph`] — RocksDB `db_bench` mix_graph (Cao et al., FAST '20) key-range hotness.
//! * [`trace`] — block-I/O trace records, CSV and binary readers/writers, synthetic generators.
//! * [`records`] — sort-benchmark records (100 bytes, 10-byte key, gensort's ASCII layout).
//!
//! Every stream is a pure function of its parameters and seed: the PRNGs ([`rng`]) are written
//! out in this crate, so a seed names the same stream across dependency upgrades. Generation is
//! O(1) memory except where documented (the OSM-like set's cluster table, Wiscer's popularity
//! order). Bad parameters give a [`WorkloadError`] before any work. Thread-safety: configurations
//! and key sets are immutable and `Sync`; each stream is owned by one thread (make one per client
//! with distinct seeds). Design notes, sources and measured costs: `docs/workload.md`.
//!
//! ```
//! use attune_workload::{keys::KeySet, ycsb::{CoreWorkload, YcsbConfig}, Op};
//!
//! let set = KeySet::from_name("seg1", 1_000, 7).unwrap();
//! assert!(set.key_at(100) > set.key_at(99) + 1); // a gap after every 100 keys
//!
//! let cfg = YcsbConfig::core(CoreWorkload::A, 1_000, 10, 42);
//! let ops: Vec<Op> = cfg.run().unwrap().collect();
//! assert_eq!(ops.len(), 10);
//! ```

// Tests may unwrap: a failed unwrap is a failed test. Library code never does (workspace lint).
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod criteo;
pub mod dist;
pub mod error;
pub mod keys;
pub mod mixgraph;
pub mod op;
pub mod perm;
pub mod records;
pub mod rng;
pub mod trace;
pub mod wiscer;
pub mod ycsb;

pub use dist::{RequestDist, Sampler};
pub use error::{Result, WorkloadError};
pub use keys::{KeySet, KeySetKind, LoadOrder};
pub use op::Op;
