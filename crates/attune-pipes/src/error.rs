//! Errors of attune-pipes: one enum, every variant naming what was wrong and where.
//!
//! Errors are `Clone` because one failed transfer is observed by every waiter of its handle.
//! I/O errors keep the OS error number and render it with the OS message.

use std::fmt;
use std::path::PathBuf;

/// The errno of an I/O failure, rendered with the OS message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

/// Every failure of a locator, a pipe, the runtime or the sort.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A locator's parameters are unusable (a zero size, a missing file, a core that is not there).
    #[error("bad locator {what}: {reason}")]
    BadLocator { what: String, reason: String },
    /// A range outside a memory locator, or an empty or overflowing transfer.
    #[error("bad range on {what}: offset {offset} + {len} bytes exceeds its {size} bytes")]
    OutOfRange {
        what: String,
        offset: u64,
        len: u64,
        size: u64,
    },
    /// O_DIRECT needs offsets, lengths and addresses aligned to the device's block.
    #[error("{what} is not aligned to {align} bytes (O_DIRECT on {path:?})")]
    Misaligned {
        path: PathBuf,
        what: String,
        align: u64,
    },
    /// A read that the file cannot satisfy: it ends before the range does.
    #[error(
        "short file {path:?}: reading {len} bytes at offset {offset} but the file has {file_len}"
    )]
    ShortFile {
        path: PathBuf,
        offset: u64,
        len: u64,
        file_len: u64,
    },
    /// The file system is full (ENOSPC) or the file reached its size limit (EFBIG, RLIMIT_FSIZE).
    #[error("no space to write {path:?} at offset {offset}: {errno}")]
    NoSpace {
        path: PathBuf,
        offset: u64,
        errno: Errno,
    },
    /// Any other failed system call, with the file and offset it touched.
    #[error("{op} failed on {path:?} at offset {offset}: {errno}")]
    Io {
        op: &'static str,
        path: PathBuf,
        offset: u64,
        errno: Errno,
    },
    /// A declared path or mechanism the runtime cannot serve (rejected before any data moves).
    #[error("unsupported pipe {path}: {reason}")]
    Unsupported { path: String, reason: String },
    /// The memory is borrowed by the caller (or in flight) and cannot be used right now.
    #[error("{what} is busy: {reason}")]
    Busy { what: String, reason: String },
    /// The transfer was cancelled (by its handle or because the runtime shut down).
    #[error("transfer cancelled after {bytes_done} bytes")]
    Cancelled { bytes_done: u64 },
    /// Bad options (a zero queue depth, a block size that is not a power of two, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Input to the sort that is not whole records.
    #[error("bad sort input {path:?}: {reason}")]
    BadInput { path: PathBuf, reason: String },
}

/// Result of attune-pipes.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error from `errno` of `op` on `path` at `offset`, full disks classified as such.
    pub(crate) fn from_errno(
        op: &'static str,
        path: &std::path::Path,
        offset: u64,
        errno: i32,
    ) -> Error {
        let path = path.to_path_buf();
        if errno == libc::ENOSPC || errno == libc::EFBIG || errno == libc::EDQUOT {
            Error::NoSpace {
                path,
                offset,
                errno: Errno(errno),
            }
        } else {
            Error::Io {
                op,
                path,
                offset,
                errno: Errno(errno),
            }
        }
    }

    /// The error of the last OS call.
    pub(crate) fn last_os(op: &'static str, path: &std::path::Path, offset: u64) -> Error {
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        Error::from_errno(op, path, offset, errno)
    }

    pub(crate) fn io(op: &'static str, path: &std::path::Path, e: &std::io::Error) -> Error {
        Error::from_errno(op, path, 0, e.raw_os_error().unwrap_or(libc::EIO))
    }
}
