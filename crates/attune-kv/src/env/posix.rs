//! The real environment: `std::fs` files with a user-space write buffer, `pread` for random reads,
//! `flock`-style advisory locks (`File::try_lock`). Random reads can report whether they hit the
//! page cache (`mincore` on a mapping, `preadv2(RWF_NOWAIT)` for `pread`), and `O_DIRECT` files
//! come from `super::direct`.

use super::{Env, FileLock, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Bytes buffered in user space before a `write` system call. 64 KiB keeps system calls rare for
/// table building while staying far below any memory budget.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// The operating system's file system.
pub struct PosixEnv {
    start: Instant,
    mmap_reads: bool,
}

impl PosixEnv {
    pub fn new() -> Self {
        PosixEnv {
            start: Instant::now(),
            mmap_reads: true,
        }
    }

    /// Whether random-access files are memory-mapped (default) or read with `pread`. Mapping
    /// turns a block read that hits the page cache into a memory copy instead of a system call,
    /// as LevelDB does on 64-bit systems; tables are immutable, so the mapping never changes.
    pub fn with_mmap_reads(mut self, on: bool) -> Self {
        self.mmap_reads = on;
        self
    }
}

/// A read-only shared mapping of a whole (immutable) file.
struct MmapRandom {
    ptr: *const u8,
    len: usize,
    path: PathBuf,
}

// SAFETY: the mapping is read-only and lives until drop; reads copy out of it.
unsafe impl Send for MmapRandom {}
unsafe impl Sync for MmapRandom {}

impl MmapRandom {
    fn map(file: &File, len: u64, path: &Path) -> Option<MmapRandom> {
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        // SAFETY: mapping a file we opened read-only; the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(file),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        // Point lookups touch one block: without this, every page fault reads around the page
        // (up to the read-ahead window), and under a memory limit those extra pages evict the
        // ones in use (measured: about 5 MiB read per get in a 32 MiB cgroup). Sequential readers
        // (table iterators) ask for read-ahead themselves with `prefetch`.
        // SAFETY: advice on exactly the region just mapped; failure only loses the hint.
        unsafe {
            libc::madvise(ptr, len, libc::MADV_RANDOM);
        }
        Some(MmapRandom {
            ptr: ptr as *const u8,
            len,
            path: path.to_path_buf(),
        })
    }
}

/// Page size assumed by `mincore` probes and prefetch hints (x86-64 and arm64 base pages).
const PAGE_BYTES: usize = 4096;

impl MmapRandom {
    /// Whether every page of `[offset, offset + len)` is in the page cache (`mincore`); `None`
    /// when the range is outside the mapping or the call fails.
    fn resident(&self, offset: u64, len: usize) -> Option<bool> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len.max(1))?;
        if end > self.len {
            return None;
        }
        let first = start / PAGE_BYTES * PAGE_BYTES;
        let pages = (end - first).div_ceil(PAGE_BYTES);
        let mut vec = vec![0u8; pages];
        // SAFETY: [first, first + pages pages) starts page-aligned inside the mapping (mincore
        // accepts a tail past `len` within the last page); `vec` has one byte per page.
        let rc = unsafe {
            libc::mincore(
                self.ptr.add(first) as *mut libc::c_void,
                end - first,
                vec.as_mut_ptr(),
            )
        };
        (rc == 0).then(|| vec.iter().all(|&b| b & 1 == 1))
    }
}

impl Drop for MmapRandom {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mapped in `map`.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

impl RandomAccessFile for MmapRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        if start > self.len || self.len - start < buf.len() {
            return Err(Error::corruption(
                &self.path,
                offset,
                format!(
                    "read of {} bytes past end of file (size {})",
                    buf.len(),
                    self.len
                ),
            ));
        }
        // SAFETY: bounds checked above; the mapping is valid for `len` bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(start), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }
    fn size(&self) -> u64 {
        self.len as u64
    }
    fn mapped(&self) -> Option<&[u8]> {
        // SAFETY: the mapping is valid and read-only for `len` bytes until drop, and the files
        // mapped are immutable (tables), so the bytes do not change under the borrow.
        Some(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }
    fn read_exact_at_probed(&self, buf: &mut [u8], offset: u64) -> Result<Option<bool>> {
        let resident = self.resident(offset, buf.len());
        self.read_exact_at(buf, offset)?;
        Ok(resident)
    }
    fn prefetch(&self, offset: u64, len: u64) {
        let page = 4096u64;
        let start = offset & !(page - 1);
        let end = (offset.saturating_add(len)).min(self.len as u64);
        if start >= end {
            return;
        }
        // SAFETY: the advised range lies inside the mapping (clamped above); madvise only hints.
        unsafe {
            libc::madvise(
                self.ptr.add(start as usize) as *mut libc::c_void,
                (end - start) as usize,
                libc::MADV_WILLNEED,
            );
        }
    }
}

impl Default for PosixEnv {
    fn default() -> Self {
        Self::new()
    }
}

struct PosixWritable {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    len: u64,
}

impl WritableFile for PosixWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        if self.buf.len() + data.len() > WRITE_BUFFER_BYTES {
            self.flush()?;
            if data.len() > WRITE_BUFFER_BYTES {
                return self
                    .file
                    .write_all(data)
                    .map_err(|e| Error::io("write", &self.path, e));
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .write_all(&self.buf)
                .map_err(|e| Error::io("write", &self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn sync_handle(&self) -> Option<super::SyncHandle> {
        let f = self.file.try_clone().ok()?;
        let path = self.path.clone();
        Some(Arc::new(move || {
            f.sync_data().map_err(|e| Error::io("fdatasync", &path, e))
        }))
    }
}

impl Drop for PosixWritable {
    fn drop(&mut self) {
        // Best effort: a file dropped without flush still hands its bytes to the OS. Errors here
        // cannot be reported; callers that care call flush/sync first.
        let _ = self.flush();
    }
}

struct PosixRandom {
    file: File,
    path: PathBuf,
    size: u64,
}

impl RandomAccessFile for PosixRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::corruption(
                    &self.path,
                    offset,
                    format!(
                        "read of {} bytes past end of file (size {})",
                        buf.len(),
                        self.size
                    ),
                )
            } else {
                Error::io("pread", &self.path, e)
            }
        })
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn read_exact_at_probed(&self, buf: &mut [u8], offset: u64) -> Result<Option<bool>> {
        let Ok(off) = i64::try_from(offset) else {
            self.read_exact_at(buf, offset)?;
            return Ok(None);
        };
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: one iovec over `buf`, which outlives the call; the descriptor is ours.
        let n = unsafe {
            libc::preadv2(
                std::os::fd::AsRawFd::as_raw_fd(&self.file),
                &iov,
                1,
                off,
                libc::RWF_NOWAIT,
            )
        };
        if n >= 0 && n as usize == buf.len() {
            return Ok(Some(true));
        }
        let errno = std::io::Error::last_os_error().raw_os_error();
        let got = if n > 0 { n as usize } else { 0 };
        if n < 0 && errno != Some(libc::EAGAIN) {
            // RWF_NOWAIT unsupported here (old kernel, file system): plain read, unknown tier.
            self.read_exact_at(buf, offset)?;
            return Ok(None);
        }
        // EAGAIN or a short read: some page was not cached; read the rest from the device.
        self.read_exact_at(&mut buf[got..], offset + got as u64)?;
        Ok(Some(false))
    }
    fn prefetch(&self, offset: u64, len: u64) {
        let (Ok(off), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: fadvise on a descriptor we own; it only hints the kernel.
        unsafe {
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&self.file),
                off,
                len,
                libc::POSIX_FADV_WILLNEED,
            );
        }
    }
}

struct PosixLock {
    _file: File,
}
impl FileLock for PosixLock {}

impl Env for PosixEnv {
    fn open_random_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(super::direct::DirectRandom::open(path)?))
    }
    fn is_os_filesystem(&self) -> bool {
        true
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("mkdir", dir, e))
    }
    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(PosixWritable {
            file,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES),
            len: 0,
        }))
    }
    fn new_appendable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .map_err(|e| Error::io("open for append", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        Ok(Box::new(PosixWritable {
            file,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES),
            len,
        }))
    }
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let size = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        if self.mmap_reads {
            if let Some(m) = MmapRandom::map(&file, size, path) {
                return Ok(Arc::new(m));
            }
        }
        Ok(Arc::new(PosixRandom {
            file,
            path: path.to_path_buf(),
            size,
        }))
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|e| Error::io("read", path, e))
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(std::fs::metadata(path)
            .map_err(|e| Error::io("stat", path, e))?
            .len())
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io("readdir", dir, e))? {
            let entry = entry.map_err(|e| Error::io("readdir", dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                out.push(name.to_string());
            }
        }
        Ok(out)
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io("unlink", path, e))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let d = File::open(dir).map_err(|e| Error::io("open dir", dir, e))?;
        d.sync_all().map_err(|e| Error::io("fsync dir", dir, e))
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open lock", path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(PosixLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked {
                path: path.parent().unwrap_or(path).to_path_buf(),
            }),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("flock", path, e)),
        }
    }
    fn now_micros(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }
}
