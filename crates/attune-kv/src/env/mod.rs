//! The file-system seam. Every file, directory, lock and clock access of the engine goes through an
//! [`Env`], so tests can swap in an in-memory, crash-simulating, fault-injecting implementation
//! ([`MemEnv`]) and a simulated device can be plugged in later.
//!
//! Thread safety: an `Env` is shared by all threads (`Send + Sync`). A [`WritableFile`] is owned by
//! one writer at a time; a [`RandomAccessFile`] is read concurrently by many threads.
//!
//! Durability contract (what the engine relies on): bytes passed to `append` are visible to readers
//! of the file after `flush`; they survive a *process* crash after `flush`; they survive a machine
//! crash only after `sync`. A newly created or renamed file's directory entry survives a machine
//! crash only after `sync_dir` on its directory; the same holds for a removed file and for a
//! directory made by `create_dir_all` (its entry lives in its parent directory).

pub mod bulk;
mod device;
mod direct;
pub mod fork;
mod mem;
mod posix;
mod readonly;

pub use bulk::BulkIo;
pub use device::{
    file_kind, DeviceEnv, DeviceLayout, DevicePrefetcher, DeviceStats, KindWrites, FILE_KINDS,
    OS_PAGE_BYTES,
};
pub use mem::{
    CrashReport, FaultError, FaultKind, FaultOp, FaultPlan, FaultRule, MemEnv, Trigger,
    SECTOR_BYTES,
};
pub use posix::{cgroup_memory_limit_bytes, memory_limit_bytes, process_anon_bytes, PosixEnv};
pub use readonly::ReadOnlyEnv;

use crate::error::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// See [`WritableFile::sync_handle`].
pub type SyncHandle = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// A file being written sequentially.
pub trait WritableFile: Send {
    /// Appends bytes (may be buffered in user space until `flush`).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system.
    fn flush(&mut self) -> Result<()>;
    /// Flushes and makes the bytes durable (fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// A function that fsyncs what was flushed before it is called, usable without `&mut self`
    /// (so that a writer need not wait while another thread syncs). None: use [`Self::sync`].
    fn sync_handle(&self) -> Option<SyncHandle> {
        None
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read at arbitrary offsets by many threads.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `buf.len()` bytes at `offset`; a short file is an error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Size of the file when it was opened.
    fn size(&self) -> u64;
    /// Hints that `[offset, offset + len)` will be read soon, so the OS can start reading it in
    /// the background (several hints are served in parallel by the device). A no-op by default.
    fn prefetch(&self, _offset: u64, _len: u64) {}
    /// Whether every page of `[offset, offset + len)` is already in the OS page cache, asked
    /// without reading it (`mincore` on a mapped file); `None` when this file cannot tell.
    fn cached(&self, _offset: u64, _len: u64) -> Option<bool> {
        None
    }
    /// How many bytes of `[offset, offset + len)` are in the OS page cache (whole pages,
    /// clamped to `len`), asked without reading them; `None` when this file cannot tell. The
    /// learner uses it to price the device reads a training would make.
    fn resident_bytes(&self, _offset: u64, _len: u64) -> Option<u64> {
        None
    }
    /// The whole file as memory, when it is memory-mapped (read-only, valid while `self`
    /// lives): readers of immutable files may then use bytes in place instead of copying them.
    /// None by default.
    fn mapped(&self) -> Option<&[u8]> {
        None
    }
    /// Like [`Self::read_exact_at`], and also says whether the bytes were already in the OS page
    /// cache before the read: `Some(true)` all of them, `Some(false)` not all (a device read),
    /// `None` unknown (the cache-sizing controller then infers it from the read's latency).
    fn read_exact_at_probed(&self, buf: &mut [u8], offset: u64) -> Result<Option<bool>> {
        self.read_exact_at(buf, offset)?;
        Ok(None)
    }
    /// Whether blocks stored uncompressed in this file are better left to the OS page cache than
    /// copied into the block cache: the page cache already holds the same bytes after a read,
    /// and a second copy halves what fits in a memory limit. False by default (the block cache
    /// takes every block read).
    fn leave_uncompressed_to_page_cache(&self) -> bool {
        false
    }
}

/// Held while the database directory is locked; dropping it releases the lock.
pub trait FileLock: Send + Sync {}

/// The operating environment.
pub trait Env: Send + Sync + 'static {
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Opens a file for reads that bypass the OS page cache (`O_DIRECT`), for the user/user cache
    /// layout. The default opens a normal random-access file: an environment without a page
    /// cache (such as [`MemEnv`]) reads from its "device" either way. A file system that refuses
    /// `O_DIRECT` (tmpfs, some overlays) gives an `InvalidArgument` error naming the path.
    fn open_random_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_random(path)
    }
    /// Whether files live on the operating system's file system (so that a probe file may be
    /// written beside them with `std::fs` to calibrate miss costs). Default false.
    fn is_os_filesystem(&self) -> bool {
        false
    }
    /// Creates (or truncates) a file for writing.
    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates (or truncates) an append-only log (a value-log segment) expected to grow to about
    /// `expected_bytes` (0: unknown). An environment may make its appends cheaper than
    /// [`Env::new_writable`]'s (the real one writes through a memory map), with the same
    /// durability contract. Default: `new_writable`.
    fn new_log_writable(&self, path: &Path, expected_bytes: u64) -> Result<Box<dyn WritableFile>> {
        let _ = expected_bytes;
        self.new_writable(path)
    }
    /// Opens an existing file for appending (used to continue a value log).
    fn new_appendable(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    fn read_all(&self, path: &Path) -> Result<Vec<u8>>;
    /// The bytes of `path` from `offset` to its end (empty when it is not longer), read with
    /// system calls, never through a map: a file another process may truncate (a log it is
    /// appending to) cannot fault the reader. Default: [`Env::read_all`] less the first bytes.
    fn read_from(&self, path: &Path, offset: u64) -> Result<Vec<u8>> {
        let mut data = self.read_all(path)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        data.drain(..start);
        Ok(data)
    }
    fn file_size(&self, path: &Path) -> Result<u64>;
    fn exists(&self, path: &Path) -> bool;
    /// Names (not paths) of the entries of `dir`.
    fn list_dir(&self, dir: &Path) -> Result<Vec<String>>;
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Makes `to` a hard link of `from`. `Ok(false)` when links are not possible here (another
    /// file system, or an Env without them): the caller copies instead.
    fn link_file(&self, _from: &Path, _to: &Path) -> Result<bool> {
        Ok(false)
    }
    /// Makes directory entries of `dir` durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Takes an exclusive lock on `path` (created if needed); fails with `Error::Locked`.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Takes a shared lock on `path`, which must exist: any number of shared holders, never
    /// beside an exclusive one (read-only opens). Without an override, an exclusive lock.
    fn lock_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.lock(path)
    }
    /// Microseconds on a monotonic clock.
    fn now_micros(&self) -> u64;
    /// Wall-clock time, Unix milliseconds: what write expiries are stamped and read against.
    fn now_unix_millis(&self) -> u64 {
        system_unix_millis()
    }
}

/// The system's wall clock in Unix milliseconds (0 for a clock before 1970).
pub fn system_unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Writes `data` to `path` durably and atomically: temp file, sync, rename, sync directory.
/// The error of a read of `len` bytes at `offset` that runs past the end of a file of `size`
/// bytes (every file implementation reports it the same way: corruption at that offset).
pub(crate) fn read_past_end(
    path: &Path,
    offset: u64,
    len: usize,
    size: impl std::fmt::Display,
) -> crate::error::Error {
    crate::error::Error::corruption(
        path,
        offset,
        format!("read of {len} bytes past end of file (size {size})"),
    )
}

/// CPU nanoseconds the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`; 0 if the clock
/// cannot be read). Background work measures its cost with it: unlike wall-clock time, a loaded
/// machine does not inflate it.
pub fn thread_cpu_ns() -> u64 {
    cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU nanoseconds the whole process has used (`CLOCK_PROCESS_CPUTIME_ID`, nanosecond
/// resolution unlike `getrusage`; 0 if the clock cannot be read).
pub fn process_cpu_ns() -> u64 {
    cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; on failure it stays zeroed.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

pub fn write_file_atomic(env: &dyn Env, path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = env.new_writable(&tmp)?;
    f.append(data)?;
    f.sync()?;
    drop(f);
    env.rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        env.sync_dir(dir)?;
    }
    Ok(())
}

/// `dir/name`, or the first of `dir/name.1`, `dir/name.2`, … that does not exist: where a file
/// set aside (repair's and open's `lost/`) goes without replacing one set aside before.
pub(crate) fn unused_path(env: &dyn Env, dir: &Path, name: &str) -> PathBuf {
    let mut to = dir.join(name);
    let mut i = 1;
    while env.exists(&to) {
        to = dir.join(format!("{name}.{i}"));
        i += 1;
    }
    to
}

/// Creates `dir` (and missing ancestors) and makes each new directory's name durable by syncing
/// its parent directory, so that files later made durable inside it cannot vanish with it.
pub fn create_dir_all_durable(env: &dyn Env, dir: &Path) -> Result<()> {
    let created: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !env.exists(d))
        .collect();
    env.create_dir_all(dir)?;
    // Deepest first is fine: each sync makes one name durable in an existing directory.
    for d in created {
        let parent = match d.parent() {
            Some(p) if p.as_os_str().is_empty() => Path::new("."),
            Some(p) => p,
            None => continue,
        };
        env.sync_dir(parent)?;
    }
    Ok(())
}
