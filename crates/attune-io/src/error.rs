//! Errors of the device crate: one enum, one variant per kind of mistake.
//!
//! Parameters are validated before any simulation starts ([`IoError::InvalidParameter`] names
//! the parameter); trace lines that do not parse name their line number
//! ([`IoError::MalformedTrace`]); damaged weight files name the byte offset
//! ([`IoError::CorruptModel`]). Nothing here panics on user input.
//!
//! Thread-safety: plain data (`Send + Sync`).

use thiserror::Error;

/// Everything that can go wrong in attune-io.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum IoError {
    /// A simulator, policy or pipeline parameter is outside its allowed range.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name as the user spells it (`channels`, `gc_read_inflation_max`, ...).
        name: &'static str,
        /// The offending value, formatted.
        value: String,
        /// The allowed range.
        reason: String,
    },
    /// A line of a text trace does not parse.
    #[error("malformed {format} trace at line {line}: {reason}")]
    MalformedTrace {
        /// The trace format being read (`msr`, `cloudphysics`, `attune-csv`).
        format: &'static str,
        /// 1-based line number.
        line: u64,
        /// What was wrong.
        reason: String,
    },
    /// A binary Attune block trace is damaged (from attune-workload's reader).
    #[error(transparent)]
    Workload(#[from] attune_workload::WorkloadError),
    /// A model weight file is damaged.
    #[error("corrupt model file at byte {offset}: {reason}")]
    CorruptModel {
        /// Byte offset where the problem was found.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// A weight file of a format version this build does not read.
    #[error("unsupported model file version {found} (this build reads version {supported})")]
    UnsupportedModelVersion {
        /// Version in the file.
        found: u16,
        /// Version this build reads.
        supported: u16,
    },
    /// An operating-system I/O error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Result alias of the crate.
pub type Result<T> = std::result::Result<T, IoError>;

/// Builds an [`IoError::InvalidParameter`].
pub(crate) fn invalid(name: &'static str, value: impl ToString, reason: impl ToString) -> IoError {
    IoError::InvalidParameter {
        name,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}
