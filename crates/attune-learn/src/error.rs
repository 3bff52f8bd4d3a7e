//! Errors of attune-learn: one enum for the whole crate, with corruption of persisted models as
//! its own variants carrying the byte offset where the decoder stopped.
//!
//! Thread-safety: plain data (`Send + Sync`). Invariant: no error is ever built from a formatted
//! `String` of unknown origin; reasons are static text plus typed fields.

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, LearnError>;

/// Everything that can go wrong in attune-learn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LearnError {
    /// Training input was not sorted (non-decreasing after key mapping).
    #[error("keys out of order at position {position}: mapped key {key:#x} after {previous:#x}")]
    Unsorted {
        /// Zero-based position of the offending key in the input.
        position: u64,
        /// Mapped value of the key before it.
        previous: u64,
        /// Mapped value of the offending key.
        key: u64,
    },
    /// A parameter outside its documented range.
    #[error("invalid parameter {name} = {value}: {reason}")]
    InvalidParameter {
        /// Parameter name.
        name: &'static str,
        /// The value given.
        value: u64,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// The persisted model ended before a field it announced.
    #[error("truncated learned model: needed {needed} bytes at offset {offset}, {available} left")]
    Truncated {
        /// Byte offset of the field that did not fit.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// The stored checksum does not match the bytes.
    #[error("learned model checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// CRC32C stored in the trailer.
        stored: u32,
        /// CRC32C of the bytes read.
        computed: u32,
    },
    /// A format version this build does not read.
    #[error(
        "learned model format version {found} is not supported (this build reads {supported})"
    )]
    UnsupportedVersion {
        /// Version found in the header.
        found: u16,
        /// Version this build reads.
        supported: u16,
    },
    /// Structurally invalid content behind a valid checksum (or a bad magic/kind).
    #[error("corrupt learned model at byte {offset}: {reason}")]
    Corrupt {
        /// Byte offset where the problem was detected.
        offset: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

impl LearnError {
    /// True for every variant that means "the persisted bytes are bad" (the engine then drops
    /// the model and relearns).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            LearnError::Truncated { .. }
                | LearnError::ChecksumMismatch { .. }
                | LearnError::UnsupportedVersion { .. }
                | LearnError::Corrupt { .. }
        )
    }
}
