//! attune-io: devices for Attune's I/O experiments.
//!
//! * [`ssd`]: a deterministic discrete-event simulated SSD with documented, validated
//!   parameters (channels and chips, striping, pages, a write buffer and its flushes,
//!   garbage-collection busy periods that inflate reads 10–60×, hot locations, queueing). It is
//!   the ground truth for trace experiments and, later, for the device profiler.
//! * [`trace`]: readers for the MSR-Cambridge cut format, the CloudPhysics CSV and Attune's own
//!   block-trace formats, with re-rating and resizing.
//! * [`replay`]: one trace on one simulated device, with Heimdall's features per I/O;
//!   [`direct`]: the same trace against a real file with `O_DIRECT` (per-I/O latency).
//! * [`features`], [`model`]: the history an admission model sees, and checksummed weight files
//!   with integer-quantised (×1024) inference, joint inference for P = 1..9.
//! * [`profile`], [`stats`]: learning an SSD's stripe, chunk, flash page and hot locations from
//!   two latency experiments (`docs/ssd-profile.md`).
//! * [`check`]: the five rules over an I/O trace, with extra flash pages and write amplification.
//! * [`osreplay`]: a program's system calls (an strace log) replayed on the simulated SSD
//!   through a page-cache model (the SQLite study).
//! * [`prefetch`]: TinFetch (prefix/suffix stream separation, readahead and a tiny integer
//!   network), heuristic baselines and the prefetching evaluator (unlimited cache, 20 ms pending).
//! * [`route`]: two or three replicas serving their traces, reads routed by always-admit,
//!   random, hedging, C3, LinnOS or Heimdall.
//! * [`clock`]: the write clock, a host-side prediction of a replica's garbage collection from
//!   the bytes the host wrote to it (a routing option).
//!
//! Design notes: `docs/ssd-sim.md`, `docs/heimdall.md`; the weight-file format:
//! `docs/formats/io-model.md`.
//!
//! ```
//! use attune_io::ssd::{IoRequest, Ssd, SsdParams};
//! use attune_workload::trace::IoKind;
//!
//! let mut ssd = Ssd::new(SsdParams::default(), 42).unwrap();
//! let done = ssd.submit(IoRequest { time_ns: 0, offset: 0, size: 4096, kind: IoKind::Read });
//! assert!(done.latency_ns() > 60_000); // one page: 60 µs array read + transfer + controller
//! ```
//!
//! Thread-safety: every type is a single-owner value or immutable after construction.

pub mod check;
pub mod clock;
pub mod direct;
pub mod error;
pub mod features;
pub mod model;
pub mod osreplay;
pub mod prefetch;
pub mod profile;
pub mod replay;
pub mod route;
pub mod ssd;
pub mod stats;
pub mod trace;

pub use error::{IoError, Result};
pub use model::{MlpFile, QuantizedMlp};
pub use ssd::{Ssd, SsdParams};
