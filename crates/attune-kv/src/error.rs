//! Errors of the engine. One enum, `#[non_exhaustive]`; corruption carries its location so that a
//! caller (and `attune kv verify`) can say exactly which file and byte went bad.

use std::path::PathBuf;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error the engine returns.
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
    /// The caller passed something the engine cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Another process (or another handle in this process) holds the database lock.
    #[error(
        "database at {path} is locked by another opener (one writable handle per directory, or \
         any number of read_only ones, not both; to read beside a writer, open with \
         secondary=True)"
    )]
    Locked { path: PathBuf },
    /// The directory exists but holds no Attune database (and create_if_missing is off), or holds
    /// something else.
    #[error("{path} is not an Attune database: {detail}")]
    NotADatabase { path: PathBuf, detail: String },
    /// The database was written by a newer (or unknown) format version.
    #[error("{path} uses format version {found}; this build reads versions up to {supported}")]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// The database already exists and `error_if_exists` was set.
    #[error("database at {path} already exists (error_if_exists is set)")]
    AlreadyExists { path: PathBuf },
    /// The handle was closed, or a background error made the database read-only.
    #[error("database is closed or unusable: {0}")]
    Closed(String),
    /// The handle was opened by another process, which then forked this one. The child shares
    /// the parent's files and lock but has none of its background threads, so a write here
    /// would be lost or would tear the parent's log: every operation refuses instead.
    #[error(
        "database at {path} was opened in process {opener_pid}, and this process ({pid}) is a \
         fork of it: a handle cannot cross fork(); open the database in this process (after \
         the parent closes it), or use the multiprocessing 'spawn' start method"
    )]
    Forked {
        path: PathBuf,
        opener_pid: u32,
        pid: u32,
    },
    /// A write (or other change) to a database opened with `read_only`.
    #[error("database at {path} is open read-only: {op} needs a writable open (read_only=false)")]
    ReadOnly { path: PathBuf, op: &'static str },
    /// A transaction or conditional write found a key changed since it was read (or not
    /// holding the value the caller expected); nothing was written. Retry from a fresh read.
    #[error("conflict: {0}; nothing was written (retry with fresh reads)")]
    Conflict(String),
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

    /// Builds an I/O error.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// True for corruption errors.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// A copy that keeps the kind and message (io::Error is not Clone). Used to hand one
    /// background error to many waiting writers.
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption {
                file,
                offset,
                detail,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                detail: detail.clone(),
            },
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::Locked { path } => Error::Locked { path: path.clone() },
            Error::NotADatabase { path, detail } => Error::NotADatabase {
                path: path.clone(),
                detail: detail.clone(),
            },
            Error::UnsupportedVersion {
                path,
                found,
                supported,
            } => Error::UnsupportedVersion {
                path: path.clone(),
                found: *found,
                supported: *supported,
            },
            Error::AlreadyExists { path } => Error::AlreadyExists { path: path.clone() },
            Error::Closed(s) => Error::Closed(s.clone()),
            Error::Forked {
                path,
                opener_pid,
                pid,
            } => Error::Forked {
                path: path.clone(),
                opener_pid: *opener_pid,
                pid: *pid,
            },
            Error::ReadOnly { path, op } => Error::ReadOnly {
                path: path.clone(),
                op,
            },
            Error::Conflict(s) => Error::Conflict(s.clone()),
        }
    }
}
