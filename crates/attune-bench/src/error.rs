//! The harness's error type: every failure the driver, an engine or a child process can report.
//!
//! Thread-safety: plain data, `Send + Sync`. Invariant: every message names what was wrong and, for
//! a bad choice, lists the valid ones, so that the command line never answers with a panic.

use std::path::PathBuf;

/// Everything that can go wrong in `attune-bench`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A command-line value or an engine option that cannot be used (checked before any work).
    #[error("invalid {what}: {detail}")]
    InvalidArgument {
        /// Which option or value.
        what: String,
        /// Why, and the valid choices when there is a fixed set.
        detail: String,
    },
    /// An engine name that is not registered.
    #[error("unknown engine `{name}`; valid engines: {valid}")]
    UnknownEngine {
        /// The name given.
        name: String,
        /// Comma-separated registered names.
        valid: String,
    },
    /// A workload or benchmark name that is not known.
    #[error("unknown {kind} `{name}`; valid: {valid}")]
    UnknownWorkload {
        /// "benchmark", "workload", "distribution" or "key set".
        kind: &'static str,
        /// The name given.
        name: String,
        /// Comma-separated valid names.
        valid: String,
    },
    /// The engine's shared library could not be loaded (the engine is skipped, not fatal).
    #[error("{engine}: library not available ({detail})")]
    LibraryMissing {
        /// Engine name.
        engine: String,
        /// What dlopen/dlsym said.
        detail: String,
    },
    /// The engine does not support a requested setting (e.g. a compression it was built without).
    #[error("{engine}: unsupported setting: {detail}")]
    Unsupported {
        /// Engine name.
        engine: String,
        /// Which setting and what the engine can do instead.
        detail: String,
    },
    /// An engine call returned an error.
    #[error("{engine}: {op} failed: {detail}")]
    Engine {
        /// Engine name.
        engine: String,
        /// The operation (open, put, get, ...).
        op: &'static str,
        /// The engine's own message.
        detail: String,
    },
    /// A file-system or process operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What we were doing.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The db_bench tool's output could not be parsed or the tool failed.
    #[error("db_bench: {0}")]
    DbBench(String),
    /// A child process failed or produced output the parent cannot read.
    #[error("child for {engine}/{workload}: {detail}")]
    Child {
        /// Engine spec.
        engine: String,
        /// Workload name.
        workload: String,
        /// Exit status or protocol problem.
        detail: String,
    },
    /// JSON encoding/decoding of a row or a job.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

impl BenchError {
    /// Shorthand for [`BenchError::InvalidArgument`].
    pub fn invalid(what: impl Into<String>, detail: impl Into<String>) -> Self {
        BenchError::InvalidArgument {
            what: what.into(),
            detail: detail.into(),
        }
    }

    /// Shorthand for [`BenchError::Io`].
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, BenchError>;
