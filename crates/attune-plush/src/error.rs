//! Errors of the Plush engine: one `#[non_exhaustive]` enum; corruption names the file and the
//! byte offset that failed its check.

use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error Plush returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error on `path` while doing `op`.
    #[error("I/O error during {op} on {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Data on disk failed a checksum or a structural check.
    #[error("corruption in {file} at offset {offset}: {detail}")]
    Corruption {
        file: PathBuf,
        offset: u64,
        detail: String,
    },
    /// The caller passed something Plush cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Another handle holds the directory's lock.
    #[error(
        "hash database at {path} is locked by another opener (a writable open needs the \
         directory alone; read-only opens share it with each other, not with a writer)"
    )]
    Locked { path: PathBuf },
    /// A write (put, delete, checkpoint, garbage collection) on a handle opened read-only.
    #[error("hash database at {path} is open read-only: {op} refused")]
    ReadOnly { path: PathBuf, op: &'static str },
    /// The directory holds no Plush database (and `create_if_missing` is off).
    #[error("{path} is not a HashDB (Plush) database: {detail}")]
    NotADatabase { path: PathBuf, detail: String },
    /// The files were written by an unknown format version.
    #[error("{path} uses format version {found}; this build reads versions up to {supported}")]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// The deepest allowed level is full (raise `levels_max`), or a recovery log has no room
    /// left for the records the DRAM level holds (raise `log_chunks`).
    #[error("hash database is full: {0}")]
    Full(String),
}

impl Error {
    /// Builds a corruption error for `file` at `offset`.
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, detail: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            detail: detail.into(),
        }
    }

    /// Wraps an I/O error on `path` during `op`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
