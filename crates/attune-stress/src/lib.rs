//! # attune-stress
//!
//! Evidence that attune-kv keeps its durability promises (like RocksDB's `db_stress`):
//!
//! - [`stress`]: threads of random puts, deletes, batches, scans, snapshot reads, flushes and
//!   compactions against an expected-state [`oracle`], cut by simulated machine crashes (torn at
//!   sector granularity, under injected I/O faults) or by real SIGKILLs of a child process, each
//!   followed by a recovery verified key by key and by a full scan.
//! - [`counters`]: `add` merge counters beside the oracle's keys, checked within bounds while
//!   the workers run and after every crash (no acknowledged merge lost, none applied twice).
//! - a secondary instance (`secondary.rs`): in half the `mem` cycles a reader thread opens the
//!   database as a secondary beside the workers, catches up again and again, and checks every
//!   key and value it reads against what the workers issued.
//! - [`hash`]: the same oracle and SIGKILL cycles for the Plush hash table (`--engine hash`):
//!   upserts, deletes and point reads under either durability setting, with checkpoints and
//!   payload-log collections, each reopen read back key by key and structure-checked.
//! - [`decoders`]: one harness per on-disk decoder, run by the cargo-fuzz targets in `fuzz/` and
//!   by the property tests in `tests/integration/decoders.rs`.
//!
//! Command line: `attune-stress --duration 60s --threads 4 --seed 1 --mode mem|kill
//! [--engine db|hash] --json`.
//! Design, guarantees and figures: `docs/RELIABILITY.md`.

pub mod counters;
pub mod decoders;
pub mod hash;
pub mod oracle;
mod secondary;
pub mod stress;

pub use stress::{
    replay_command, run_child, run_kill, run_mem, Config, Engine, Mode, Report, Violation,
};
