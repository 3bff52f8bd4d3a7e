//! Reads that bypass the OS page cache (`O_DIRECT`), for the user/user cache layout, where the
//! engine's own compressed block cache replaces the page cache and the memory budget is split
//! exactly between the two in-process caches (docs/symbiosis.md).
//!
//! `O_DIRECT` needs the file offset, the length and the buffer address aligned to the device's
//! logical block size. A read of `[offset, offset + len)` therefore reads the covering range
//! rounded out to [`DIRECT_ALIGN_BYTES`] into an aligned scratch buffer and copies the wanted
//! bytes out. Thread safety: `pread` on a shared descriptor; no state besides the descriptor.
//! Invariant: every system call sees an aligned offset, length and address.

use super::RandomAccessFile;
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Alignment of direct reads. Default 4 KiB: the logical block size of NVMe and virtio disks and
/// a multiple of the 512 B sectors of older devices (any larger multiple also works).
pub const DIRECT_ALIGN_BYTES: usize = 4096;

/// A read-only file opened with `O_DIRECT`.
pub(crate) struct DirectRandom {
    file: File,
    path: PathBuf,
    size: u64,
}

impl DirectRandom {
    /// Opens `path` with `O_DIRECT`; a file system that refuses it is an `InvalidArgument` error.
    pub(crate) fn open(path: &Path) -> Result<DirectRandom> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::EINVAL) {
                    Error::InvalidArgument(format!(
                        "cache_layout=user needs O_DIRECT reads, which the file system of {} \
                         refuses (tmpfs and some overlay file systems do); use \
                         cache_layout=kernel there",
                        path.display()
                    ))
                } else {
                    Error::io("open O_DIRECT", path, e)
                }
            })?;
        let size = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        Ok(DirectRandom {
            file,
            path: path.to_path_buf(),
            size,
        })
    }
}

/// A zeroed buffer of at least `len` bytes whose usable part starts at an aligned address.
struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> AlignedBuf {
        let raw = vec![0u8; len + DIRECT_ALIGN_BYTES];
        let start = raw.as_ptr().align_offset(DIRECT_ALIGN_BYTES);
        debug_assert!(start < DIRECT_ALIGN_BYTES);
        AlignedBuf { raw, start, len }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
    fn as_ref(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
}

impl RandomAccessFile for DirectRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.size)
            .ok_or_else(|| super::read_past_end(&self.path, offset, buf.len(), self.size))?;
        let align = DIRECT_ALIGN_BYTES as u64;
        let first = offset / align * align;
        let last = end.div_ceil(align) * align;
        let span = usize::try_from(last - first).map_err(|_| {
            Error::InvalidArgument(format!("direct read of {} bytes", last - first))
        })?;
        let mut scratch = AlignedBuf::new(span);
        let mut got = 0usize;
        let want = (end - first) as usize;
        while got < want {
            // Every call starts on an aligned offset and address with an aligned length: `got`
            // only grows by whole aligned reads until the file's end (a short final read).
            let dst = &mut scratch.as_mut()[got..];
            let n = self
                .file
                .read_at(dst, first + got as u64)
                .map_err(|e| Error::io("pread O_DIRECT", &self.path, e))?;
            if n == 0 {
                return Err(Error::corruption(
                    &self.path,
                    offset,
                    format!("file ended at {} during a direct read", first + got as u64),
                ));
            }
            got += n;
            if !got.is_multiple_of(DIRECT_ALIGN_BYTES) && got < want {
                return Err(Error::corruption(
                    &self.path,
                    offset,
                    "short unaligned direct read before the wanted range ended".to_string(),
                ));
            }
        }
        let skip = (offset - first) as usize;
        buf.copy_from_slice(&scratch.as_ref()[skip..skip + buf.len()]);
        Ok(())
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_exact_at_probed(&self, buf: &mut [u8], offset: u64) -> Result<Option<bool>> {
        // A direct read never hits the page cache.
        self.read_exact_at(buf, offset)?;
        Ok(Some(false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_direct_reads_return_the_right_bytes_or_a_clear_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = match DirectRandom::open(&path) {
            Ok(f) => f,
            Err(e) => {
                // tmpfs: the refusal must say what to do.
                let m = e.to_string();
                assert!(
                    m.contains("O_DIRECT") && m.contains("cache_layout=kernel"),
                    "{m}"
                );
                return;
            }
        };
        for (off, len) in [
            (0u64, 1usize),
            (4095, 2),
            (123, 9000),
            (19_990, 10),
            (0, 20_000),
        ] {
            let mut b = vec![0u8; len];
            f.read_exact_at(&mut b, off).unwrap();
            assert_eq!(
                &b[..],
                &data[off as usize..off as usize + len],
                "{off}+{len}"
            );
        }
        let mut b = vec![0u8; 11];
        assert!(f.read_exact_at(&mut b, 19_990).unwrap_err().is_corruption());
    }
}
