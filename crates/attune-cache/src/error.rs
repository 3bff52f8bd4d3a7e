//! Errors of attune-cache: bad configurations (caught before any work) and calibration I/O.
//!
//! Thread-safety: plain data. Invariant: no operation on the hot path (recording an access,
//! looking up a block) returns an error; only constructors, reconfiguration and calibration do.

use std::path::PathBuf;

/// Result alias for this crate.
pub type Result<T> = std::result::Result<T, CacheError>;

/// Everything that can go wrong in attune-cache.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// A configuration field is out of range; `reason` says which bound it broke.
    #[error("invalid cache configuration: {field} = {value}: {reason}")]
    BadConfig {
        /// Field name as spelled in the configuration struct.
        field: &'static str,
        /// The value given, formatted.
        value: String,
        /// The rule it broke.
        reason: &'static str,
    },
    /// A policy name that is not one of `lru`, `s3fifo`.
    #[error("unknown replacement policy `{0}` (expected lru or s3fifo)")]
    UnknownPolicy(String),
    /// Calibration could not read or write its probe file.
    #[error("calibration I/O on {path}: {source}")]
    CalibrationIo {
        /// The probe file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Calibration was given inputs it cannot measure with (empty block, tiny file).
    #[error("calibration input rejected: {0}")]
    CalibrationInput(&'static str),
}

/// Builds a [`CacheError::BadConfig`].
pub(crate) fn bad(field: &'static str, value: impl ToString, reason: &'static str) -> CacheError {
    CacheError::BadConfig {
        field,
        value: value.to_string(),
        reason,
    }
}
