//! # attune-bench
//!
//! The repository's one benchmark harness (library crates ship no benchmark binaries). Its core
//! drives Attune's engine and its peers — RocksDB, LevelDB, WiredTiger and LMDB
//! through their C APIs, plus RocksDB's own `db_bench` tool — with the same workload stream, the
//! same memory budget, compression, durability and threads, and writes one JSON row per engine and
//! workload (throughput, latency percentiles, I/O bytes, write and space amplification, peak RSS,
//! CPU seconds, the engine's exact settings, the command and the machine).
//!
//! * [`engine`] — the [`engine::Engine`]/[`engine::Session`] traits and the registry.
//! * [`engines`] — one file per engine (peers are `dlopen`ed at run time).
//! * [`micro`] — db_bench-style micro benchmarks; [`ycsb`] — YCSB A–F from `attune-workload`.
//! * [`runner`] — the parent process: validation, one child process per (engine, workload),
//!   rows; [`child`] — the child process; [`dbbench`] — running and parsing `db_bench`.
//!
//! The other subcommands measure one component each, one module per subcommand: [`hash`] (VIP
//! hashing), [`cache_sim`] (Symbiosis on simulated traces), [`cache_kv`] (Symbiosis in the
//! engine), [`learn`] (learned-index lookups), [`workload`] (generator speed), [`lookup_steps`]
//! and [`lookup_probe`] (the engine's read path). All share [`output`] (`--out`, `--json`,
//! progress; rows through serde with `command` and [`machine`]).
//!
//! Design and measured numbers: `docs/bench.md`.
//!
//! Thread-safety: see each module; the binary runs one engine process at a time.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cache_kv;
pub mod cache_sim;
pub mod cgroup;
pub mod child;
pub mod dbbench;
pub mod device;
pub mod device_kv;
pub mod driver;
pub mod embed;
pub mod engine;
pub mod engines;
pub mod error;
pub mod hash;
pub mod ingest;
pub mod io;
pub mod keys;
pub mod learn;
pub mod lookup_probe;
pub mod lookup_steps;
pub mod machine;
pub mod merge_counters;
pub mod metrics;
pub mod micro;
pub mod options;
pub mod output;
pub mod pipes;
pub mod pipes_compact;
pub mod plush;
pub mod range_delete;
pub mod rundir;
pub mod runner;
pub mod workload;
pub mod ycsb;

pub use error::{BenchError, Result};
