//! Errors of the embedding store. Every variant names what was wrong and where.

use std::path::PathBuf;

/// An error of `attune-embed`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// A parameter or an input the caller gave is invalid (wrong dims, non-finite values...).
    #[error("{0}")]
    InvalidArgument(String),
    /// A table name the store does not hold.
    #[error("unknown table `{name}`; the store holds: {known}")]
    UnknownTable {
        /// The name asked for.
        name: String,
        /// The names the store holds.
        known: String,
    },
    /// A key at or past the table's row count.
    #[error("key {key} out of range for table `{table}` ({rows} rows) at request {request}")]
    KeyOutOfRange {
        /// Table name.
        table: String,
        /// The key.
        key: u64,
        /// Rows of the table.
        rows: u64,
        /// Index of the request in the batch.
        request: usize,
    },
    /// A table file is damaged (bad magic, checksum, length).
    #[error("corrupt table file {path}: {reason} (at byte {offset})")]
    Corruption {
        /// The file.
        path: PathBuf,
        /// Byte offset of the damage.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// An I/O error on a file.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Result of this crate.
pub type Result<T> = std::result::Result<T, EmbedError>;

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> EmbedError + '_ {
    move |source| EmbedError::Io {
        path: path.to_path_buf(),
        source,
    }
}
