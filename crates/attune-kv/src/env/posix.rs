//! The real environment: `std::fs` files with a user-space write buffer, `pread` for random reads,
//! `flock`-style advisory locks (`File::try_lock`). Random reads can report whether they hit the
//! page cache (`mincore` on a mapping, `preadv2(RWF_NOWAIT)` for `pread`), and `O_DIRECT` files
//! come from `super::direct`. On Linux, append-only logs are written through a shared memory map
//! of space reserved with `fallocate` ([`PosixEnv::with_mmap_logs`]).

use super::{Env, FileLock, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Bytes buffered in user space before a `write` system call. 64 KiB keeps system calls rare for
/// table building while staying far below any memory budget.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// The operating system's file system.
pub struct PosixEnv {
    start: Instant,
    mmap_reads: bool,
    mmap_logs: bool,
    /// Most bytes of files mapped for reading at once (see [`PosixEnv::with_mmap_limit`]).
    mmap_limit: u64,
    /// Bytes currently mapped for reading; each mapping gives its share back when dropped.
    mapped: Arc<AtomicU64>,
    /// Whether files read with `pread` because they are beyond `mmap_limit` leave their
    /// uncompressed blocks to the page cache (see [`PosixEnv::with_uncompressed_beyond_limit`]).
    uncompressed_beyond_limit_uncached: bool,
}

impl PosixEnv {
    pub fn new() -> Self {
        PosixEnv {
            start: Instant::now(),
            mmap_reads: true,
            mmap_logs: true,
            mmap_limit: u64::MAX,
            mapped: Arc::new(AtomicU64::new(0)),
            uncompressed_beyond_limit_uncached: false,
        }
    }

    /// With `on`, a table read with `pread` because mapping it would pass the mapping limit
    /// ([`PosixEnv::with_mmap_limit`]) says its uncompressed blocks are better left to the page
    /// cache ([`RandomAccessFile::leave_uncompressed_to_page_cache`]): such tables exist only
    /// when they outgrow the memory, and there a block held both in the block cache and in the
    /// page cache halves what fits (docs/kv.md "Uncompressed blocks beyond the mapping limit").
    /// Default off.
    pub fn with_uncompressed_beyond_limit_uncached(mut self, on: bool) -> Self {
        self.uncompressed_beyond_limit_uncached = on;
        self
    }

    /// Maps a file for reading only while the mapped total stays within `bytes`; files beyond
    /// it are read with `pread`. Under memory pressure mapped pages are costlier to reclaim than
    /// plain page-cache pages, and a mapped read that faults waits for that reclaim: in a 32 MiB
    /// cgroup with 116 MB of tables, mapped reads ran at half the speed of `pread`
    /// (docs/kv.md "Reads through a mapping or pread"). Default unlimited.
    pub fn with_mmap_limit(mut self, bytes: u64) -> Self {
        self.mmap_limit = bytes;
        self
    }

    /// Bytes of files currently mapped for reading.
    pub fn mapped_bytes(&self) -> u64 {
        self.mapped.load(Ordering::Relaxed)
    }

    /// Whether [`Env::new_log_writable`] files are written through a shared memory map (default,
    /// Linux only) instead of a `write` system call per flush. See [`MappedLog`].
    pub fn with_mmap_logs(mut self, on: bool) -> Self {
        self.mmap_logs = on;
        self
    }

    /// Whether random-access files are memory-mapped (default) or read with `pread`. Mapping
    /// turns a block read that hits the page cache into a memory copy instead of a system call,
    /// as LevelDB does on 64-bit systems; tables are immutable, so the mapping never changes.
    pub fn with_mmap_reads(mut self, on: bool) -> Self {
        self.mmap_reads = on;
        self
    }
}

/// Memory this process may use: the smaller of its cgroup limit
/// ([`cgroup_memory_limit_bytes`]) and physical memory (`MemTotal`). `None` when neither can be
/// read (not Linux, no /proc).
pub fn memory_limit_bytes() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    });
    match (total, cgroup_memory_limit_bytes()) {
        (Some(t), Some(c)) => Some(t.min(c)),
        (t, c) => t.or(c),
    }
}

/// Anonymous resident memory of this process (`RssAnon` of `/proc/self/status`): its heap and
/// stacks, not the page cache it reads through. `None` where it cannot be read.
pub fn process_anon_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("RssAnon:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The smallest cgroup memory limit on the path from this process's cgroup to the root (v2
/// `memory.max`, v1 `memory.limit_in_bytes`; v1's "no limit" is a huge number). `None` when no
/// limit is set or none can be read.
pub fn cgroup_memory_limit_bytes() -> Option<u64> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut limit: Option<u64> = None;
    for line in groups.lines() {
        // "0::/path" (v2) or "4:memory:/path" (v1, possibly with other controllers).
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(rel)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (root, file) = if controllers.is_empty() {
            (Path::new("/sys/fs/cgroup"), "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (Path::new("/sys/fs/cgroup/memory"), "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut dir = root.join(rel.trim().trim_start_matches('/'));
        loop {
            let value = std::fs::read_to_string(dir.join(file)).ok();
            // "max" (v2) does not parse: no limit at this level.
            if let Some(n) = value.and_then(|v| v.trim().parse::<u64>().ok()) {
                limit = Some(limit.map_or(n, |l| l.min(n)));
            }
            if dir == root || !dir.pop() {
                break;
            }
        }
    }
    // v1 reports "no limit" as the largest page-aligned i64.
    limit.filter(|&l| l < 1 << 62)
}

/// A read-only shared mapping of a whole (immutable) file.
struct MmapRandom {
    ptr: *const u8,
    len: usize,
    path: PathBuf,
    /// The environment's mapped-bytes total, given `len` back on drop.
    mapped: Arc<AtomicU64>,
}

// SAFETY: the mapping is read-only and lives until drop; reads copy out of it.
unsafe impl Send for MmapRandom {}
unsafe impl Sync for MmapRandom {}

impl MmapRandom {
    fn map(file: &File, len: u64, path: &Path, mapped: Arc<AtomicU64>) -> Option<MmapRandom> {
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
        mapped.fetch_add(len as u64, Ordering::Relaxed);
        Some(MmapRandom {
            ptr: ptr as *const u8,
            len,
            path: path.to_path_buf(),
            mapped,
        })
    }
}

/// Page size assumed by `mincore` probes and prefetch hints (x86-64 and arm64 base pages).
const PAGE_BYTES: usize = 4096;

impl MmapRandom {
    /// Whether every page of `[offset, offset + len)` is in the page cache (`mincore`); `None`
    /// when the range is outside the mapping or the call fails.
    fn resident(&self, offset: u64, len: usize) -> Option<bool> {
        let (pages, resident) = self.resident_pages(offset, len)?;
        Some(pages == resident)
    }

    /// (pages in `[offset, offset + len)`, how many of them are in the page cache), from
    /// `mincore`; `None` when the range is outside the mapping or the call fails.
    fn resident_pages(&self, offset: u64, len: usize) -> Option<(usize, usize)> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(len.max(1))?;
        if end > self.len {
            return None;
        }
        let first = start / PAGE_BYTES * PAGE_BYTES;
        let pages = (end - first).div_ceil(PAGE_BYTES);
        // Small ranges (values, merged hints up to 256 KiB) probe without an allocation.
        let mut small = [0u8; 64];
        let mut big = Vec::new();
        let vec: &mut [u8] = if pages <= small.len() {
            &mut small[..pages]
        } else {
            big.resize(pages, 0);
            &mut big
        };
        self.mincore(first, end, vec)
            .then(|| (pages, vec.iter().filter(|&&b| b & 1 == 1).count()))
    }

    /// Fills `vec` (one byte per page, bit 0 set when the page is in the page cache) for the
    /// pages of `[first, end)`; `first` page-aligned, `end` within the mapping. False when the
    /// call fails.
    fn mincore(&self, first: usize, end: usize, vec: &mut [u8]) -> bool {
        debug_assert!(first.is_multiple_of(PAGE_BYTES) && end <= self.len);
        debug_assert!(vec.len() >= (end - first).div_ceil(PAGE_BYTES));
        // SAFETY: [first, end) starts page-aligned inside the mapping (mincore accepts a tail
        // past `len` within the last page); `vec` has at least one byte per page.
        let rc = unsafe {
            libc::mincore(
                self.ptr.add(first) as *mut libc::c_void,
                end - first,
                vec.as_mut_ptr(),
            )
        };
        rc == 0
    }
}

impl Drop for MmapRandom {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mapped in `map`.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
        self.mapped.fetch_sub(self.len as u64, Ordering::Relaxed);
    }
}

impl RandomAccessFile for MmapRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        if start > self.len || self.len - start < buf.len() {
            return Err(super::read_past_end(
                &self.path,
                offset,
                buf.len(),
                self.len,
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
    fn cached(&self, offset: u64, len: u64) -> Option<bool> {
        self.resident(offset, usize::try_from(len).ok()?)
    }
    fn resident_bytes(&self, offset: u64, len: u64) -> Option<u64> {
        if len == 0 {
            return None;
        }
        let (pages, resident) = self.resident_pages(offset, usize::try_from(len).ok()?)?;
        // Whole pages: the range's first and last page count fully; clamp to the range.
        Some(
            ((resident * PAGE_BYTES) as u64)
                .min(len)
                .min((pages * PAGE_BYTES) as u64),
        )
    }
    fn read_exact_at_probed(&self, buf: &mut [u8], offset: u64) -> Result<Option<bool>> {
        let resident = self.resident(offset, buf.len());
        self.read_exact_at(buf, offset)?;
        Ok(resident)
    }
    fn prefetch(&self, offset: u64, len: u64) {
        let page = PAGE_BYTES as u64;
        let mut start = offset & !(page - 1);
        let mut end = (offset.saturating_add(len)).min(self.len as u64);
        if start >= end {
            return;
        }
        // Ask only for the span between the first and the last page not in the page cache.
        // `MADV_WILLNEED` looks every page of its range up in the page cache; `mincore` answers
        // from the page tables for pages this process has mapped, so on a cached table (the
        // common case for a scan) the probe costs a fraction of the hint it saves.
        let pages = (end - start).div_ceil(page) as usize;
        let mut vec = [0u8; 256];
        if pages <= vec.len() && self.mincore(start as usize, end as usize, &mut vec[..pages]) {
            let missing = |b: &u8| b & 1 == 0;
            let Some(first) = vec[..pages].iter().position(missing) else {
                return;
            };
            let last = vec[..pages].iter().rposition(missing).unwrap_or(first);
            let base = start;
            start = base + first as u64 * page;
            end = end.min(base + (last as u64 + 1) * page);
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
        data_sync_handle(&self.file, &self.path)
    }
}

impl Drop for PosixWritable {
    fn drop(&mut self) {
        // Best effort: a file dropped without flush still hands its bytes to the OS. Errors here
        // cannot be reported; callers that care call flush/sync first.
        let _ = self.flush();
    }
}

/// Bytes a [`MappedLog`] reserves with `fallocate` at a time: 4 MiB, or the log's expected size
/// when smaller (but at least 64 KiB). One `fallocate` per 4 MiB of appends costs nothing
/// measurable, and at most this much reserved space lies unused past the end of an open log (cut
/// off when it is dropped, found as a zero tail after a crash).
#[cfg(target_os = "linux")]
const LOG_RESERVE_BYTES: u64 = 4 << 20;
#[cfg(target_os = "linux")]
const LOG_RESERVE_BYTES_MIN: u64 = 64 << 10;
/// Bytes of a [`MappedLog`] faulted in ahead of its end at a time, in one
/// `madvise(MADV_POPULATE_WRITE)`: 256 KiB (64 pages), so that appends do not take one page fault
/// each and no single append waits for more than a fraction of a millisecond of faulting.
#[cfg(target_os = "linux")]
const LOG_POPULATE_BYTES: u64 = 256 << 10;
/// Initial address space mapped for a [`MappedLog`]: 64 MiB, doubled (`mremap`) as it grows.
/// Address space costs nothing until touched.
#[cfg(target_os = "linux")]
const LOG_MAP_BYTES_MIN: u64 = 64 << 20;

/// An append-only file written through a shared, writable memory map of space reserved with
/// `fallocate` (Linux). An append is a memory copy into the page cache — no system call — which
/// is as safe from a process crash as a `write(2)` (the pages belong to the file, not to the
/// process); `sync` is `fdatasync`, which writes back pages dirtied through the map as well.
/// The space is reserved before it is mapped and touched, so a full disk is an error from
/// `fallocate`, never a `SIGBUS` from a page fault. The file is `len` bytes of appends followed by
/// up to [`LOG_RESERVE_BYTES`] of zeros; dropping it cuts the zeros off, a crash leaves them (log
/// readers stop at the first record that fails its checksum, as at any torn tail).
///
/// Thread safety: owned by one writer (`&mut self`); readers open the file separately and see
/// appended bytes at once (same page cache).
#[cfg(target_os = "linux")]
struct MappedLog {
    file: File,
    path: PathBuf,
    map: *mut u8,
    map_bytes: u64,
    /// Bytes appended.
    len: u64,
    /// Bytes reserved (the file's size).
    reserved: u64,
    /// Bytes faulted in (writable without a page fault).
    populated: u64,
    /// Bytes whose pages were dropped from this process's page tables (see `grow`).
    released: u64,
    /// Reservation step (see [`LOG_RESERVE_BYTES`]).
    step: u64,
}

// SAFETY: the mapping is private to this value (no other reference to it exists) and is only
// touched through `&mut self`.
#[cfg(target_os = "linux")]
unsafe impl Send for MappedLog {}

#[cfg(target_os = "linux")]
impl MappedLog {
    /// Creates the log; None when the file system cannot reserve space (`fallocate` unsupported),
    /// in which case the caller writes with `write(2)`.
    fn create(path: &Path, expected_bytes: u64) -> Result<Option<MappedLog>> {
        let step = match expected_bytes {
            0 => LOG_RESERVE_BYTES,
            n => n
                .clamp(LOG_RESERVE_BYTES_MIN, LOG_RESERVE_BYTES)
                .next_multiple_of(4096),
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        // SAFETY: fallocate on a descriptor we own; the result is checked.
        let r = unsafe { libc::fallocate(fd, 0, 0, step as libc::off_t) };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(None),
                _ => Err(Error::io("fallocate", path, e)),
            };
        }
        // SAFETY: a fresh shared mapping of a file opened read-write; checked below. Pages past
        // the file's end are never touched (appends stay below `reserved`).
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LOG_MAP_BYTES_MIN as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(Error::io("mmap", path, std::io::Error::last_os_error()));
        }
        Ok(Some(MappedLog {
            file,
            path: path.to_path_buf(),
            map: map as *mut u8,
            map_bytes: LOG_MAP_BYTES_MIN,
            len: 0,
            reserved: step,
            populated: 0,
            released: 0,
            step,
        }))
    }

    /// Reserves and maps room for `end` bytes.
    fn grow(&mut self, end: u64) -> Result<()> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.file);
        let reserved = end.div_ceil(self.step) * self.step;
        let (Ok(off), Ok(n)) = (
            libc::off_t::try_from(self.reserved),
            libc::off_t::try_from(reserved - self.reserved),
        ) else {
            return Err(Error::InvalidArgument(format!(
                "log {} would exceed the largest file offset",
                self.path.display()
            )));
        };
        // SAFETY: fallocate on a descriptor we own; the result is checked.
        if unsafe { libc::fallocate(fd, 0, off, n) } != 0 {
            return Err(Error::io(
                "fallocate",
                &self.path,
                std::io::Error::last_os_error(),
            ));
        }
        self.reserved = reserved;
        // Written whole pages are never touched again: drop them from the page tables. They
        // stay in the page cache (dirty until written back, which MADV_DONTNEED does not
        // prevent on a shared file mapping), so this costs nothing in durability, keeps the
        // process's resident size to the log's unwritten tail, and makes the final `munmap`
        // cheap.
        let done = self.len & !4095;
        if done > self.released {
            // SAFETY: [released, done) lies inside the mapping; page aligned; only hints.
            unsafe {
                libc::madvise(
                    self.map.add(self.released as usize) as *mut libc::c_void,
                    (done - self.released) as usize,
                    libc::MADV_DONTNEED,
                );
            }
            self.released = done;
        }
        if reserved > self.map_bytes {
            let bytes = reserved.max(self.map_bytes * 2);
            // SAFETY: remapping exactly the region mapped before; MREMAP_MAYMOVE lets the
            // kernel move it (nothing else points into it). Checked below.
            let map = unsafe {
                libc::mremap(
                    self.map as *mut libc::c_void,
                    self.map_bytes as usize,
                    bytes as usize,
                    libc::MREMAP_MAYMOVE,
                )
            };
            if map == libc::MAP_FAILED {
                return Err(Error::io(
                    "mremap",
                    &self.path,
                    std::io::Error::last_os_error(),
                ));
            }
            self.map = map as *mut u8;
            self.map_bytes = bytes;
        }
        Ok(())
    }

    /// Faults in the pages up to `end` (plus [`LOG_POPULATE_BYTES`]) in one call. A hint: when
    /// the kernel lacks `MADV_POPULATE_WRITE` the appends take the faults instead.
    fn populate(&mut self, end: u64) {
        let page = 4096;
        let start = self.populated.max(self.len & !(page - 1));
        let stop = (end + LOG_POPULATE_BYTES).min(self.reserved);
        if stop <= start {
            return;
        }
        // SAFETY: [start, stop) lies inside the mapping and the reserved file; page aligned.
        unsafe {
            libc::madvise(
                self.map.add(start as usize) as *mut libc::c_void,
                (stop - start) as usize,
                libc::MADV_POPULATE_WRITE,
            );
        }
        self.populated = stop;
    }
}

#[cfg(target_os = "linux")]
impl WritableFile for MappedLog {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let end = self.len + data.len() as u64;
        if end > self.reserved {
            self.grow(end)?;
        }
        if end > self.populated {
            self.populate(end);
        }
        // SAFETY: [len, end) lies below `reserved` (reserved file space, so no SIGBUS) and below
        // `map_bytes` (mapped); the map is writable and not aliased by any Rust reference.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.map.add(self.len as usize),
                data.len(),
            )
        };
        self.len = end;
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(()) // the bytes are in the page cache already
    }
    fn sync(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn sync_handle(&self) -> Option<super::SyncHandle> {
        data_sync_handle(&self.file, &self.path)
    }
}

#[cfg(target_os = "linux")]
impl Drop for MappedLog {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the current mapping; nothing refers to it afterwards.
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.map_bytes as usize);
        }
        // Cut the reserved zeros off (best effort: a log that keeps them reads as ending at its
        // last whole record, as after a crash).
        let _ = self.file.set_len(self.len);
    }
}

/// Bytes of `[offset, offset + len)` of `file` in the page cache (whole pages, clamped to
/// `len`): a temporary read-only mapping probed with `mincore` and unmapped again. Mapping faults
/// nothing in, so the probe reads no data and charges no memory. `None` when the range is empty
/// or a call fails.
fn resident_bytes_of_fd(file: &File, offset: u64, len: u64) -> Option<u64> {
    if len == 0 {
        return None;
    }
    let first = offset / PAGE_BYTES as u64 * PAGE_BYTES as u64;
    let span = usize::try_from(offset + len - first).ok()?;
    let pages = span.div_ceil(PAGE_BYTES);
    let fd = std::os::fd::AsRawFd::as_raw_fd(file);
    // SAFETY: a fresh private read-only mapping of a descriptor we own, checked below, and
    // unmapped before returning; nothing reads through it.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            libc::off_t::try_from(first).ok()?,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    let mut vec = vec![0u8; pages];
    // SAFETY: `ptr` maps `span` bytes (page-aligned start); `vec` has one byte per page.
    let rc = unsafe { libc::mincore(ptr, span, vec.as_mut_ptr()) };
    // SAFETY: unmapping exactly the region mapped above.
    unsafe {
        libc::munmap(ptr, span);
    }
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count();
    (rc == 0).then(|| ((resident * PAGE_BYTES) as u64).min(len))
}

struct PosixRandom {
    file: File,
    path: PathBuf,
    size: u64,
    /// See [`RandomAccessFile::leave_uncompressed_to_page_cache`].
    leave_uncompressed: bool,
}

impl RandomAccessFile for PosixRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                super::read_past_end(&self.path, offset, buf.len(), self.size)
            } else {
                Error::io("pread", &self.path, e)
            }
        })
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn leave_uncompressed_to_page_cache(&self) -> bool {
        self.leave_uncompressed
    }
    fn resident_bytes(&self, offset: u64, len: u64) -> Option<u64> {
        resident_bytes_of_fd(&self.file, offset, len)
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
    file: File,
}
impl FileLock for PosixLock {}
impl Drop for PosixLock {
    fn drop(&mut self) {
        // flock locks belong to the open file description, which a forked child shares through
        // its copy of the descriptor: closing ours alone would leave the lock held for as long
        // as any child lives. Unlocking releases it for the description, whoever else holds it.
        let _ = self.file.unlock();
    }
}

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
    fn new_log_writable(&self, path: &Path, expected_bytes: u64) -> Result<Box<dyn WritableFile>> {
        #[cfg(target_os = "linux")]
        if self.mmap_logs {
            if let Some(m) = MappedLog::create(path, expected_bytes)? {
                return Ok(Box::new(m));
            }
        }
        self.new_writable(path)
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
        // Check-then-add is not atomic: concurrent opens may overshoot the limit by a file each,
        // which only costs a little more mapped memory.
        let fits = self.mapped.load(Ordering::Relaxed).saturating_add(size) <= self.mmap_limit;
        if self.mmap_reads && fits {
            if let Some(m) = MmapRandom::map(&file, size, path, self.mapped.clone()) {
                return Ok(Arc::new(m));
            }
        }
        // Table reads are random (a lookup reads one block); iterators and compactions ask for
        // read-ahead themselves (`prefetch`). Without this, a block read next to cached pages
        // makes the kernel read ahead around it, which under a memory limit evicts the pages
        // in use (RocksDB's `advise_random_on_open` does the same).
        // SAFETY: fadvise on a descriptor we own; it only hints the kernel.
        unsafe {
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
                0,
                libc::POSIX_FADV_RANDOM,
            );
        }
        Ok(Arc::new(PosixRandom {
            file,
            path: path.to_path_buf(),
            size,
            leave_uncompressed: self.mmap_reads && !fits && self.uncompressed_beyond_limit_uncached,
        }))
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|e| Error::io("read", path, e))
    }
    fn read_from(&self, path: &Path, offset: u64) -> Result<Vec<u8>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io("seek", path, e))?;
        let mut data = Vec::new();
        f.read_to_end(&mut data)
            .map_err(|e| Error::io("read", path, e))?;
        Ok(data)
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
    fn link_file(&self, from: &Path, to: &Path) -> Result<bool> {
        match std::fs::hard_link(from, to) {
            Ok(()) => Ok(true),
            // Another file system, or one without hard links: copy.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EXDEV | libc::EPERM | libc::EOPNOTSUPP | libc::EMLINK)
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(Error::io("link", to, e)),
        }
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
            Ok(()) => Ok(Box::new(PosixLock { file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked {
                path: path.parent().unwrap_or(path).to_path_buf(),
            }),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("flock", path, e)),
        }
    }
    fn lock_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        // Read-only: never create the file (the directory may not be writable).
        let file = File::open(path).map_err(|e| Error::io("open lock", path, e))?;
        match file.try_lock_shared() {
            Ok(()) => Ok(Box::new(PosixLock { file })),
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

/// A handle that `fdatasync`s `file` from another thread (a clone of its descriptor).
fn data_sync_handle(file: &File, path: &Path) -> Option<super::SyncHandle> {
    let f = file.try_clone().ok()?;
    let path = path.to_path_buf();
    Some(Arc::new(move || {
        f.sync_data().map_err(|e| Error::io("fdatasync", &path, e))
    }))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// 1000-byte chunks with distinct contents.
    fn chunk(i: usize) -> Vec<u8> {
        vec![(i % 251) as u8 + 1; 1000]
    }

    #[test]
    fn files_beyond_the_mmap_limit_are_read_with_pread_and_drops_give_bytes_back() {
        let dir = tempfile::tempdir().unwrap();
        let env = PosixEnv::new().with_mmap_limit(2500);
        let paths: Vec<_> = (0..3)
            .map(|i| dir.path().join(format!("{i:06}.sst")))
            .collect();
        for (i, p) in paths.iter().enumerate() {
            std::fs::write(p, chunk(i)).unwrap();
        }
        let a = env.open_random(&paths[0]).unwrap();
        let b = env.open_random(&paths[1]).unwrap();
        assert_eq!(env.mapped_bytes(), 2000);
        // The third would make 3000 > 2500 mapped bytes: read with pread instead.
        let c = env.open_random(&paths[2]).unwrap();
        assert_eq!(env.mapped_bytes(), 2000);
        for (i, f) in [&a, &b, &c].into_iter().enumerate() {
            let mut buf = vec![0u8; 1000];
            f.read_exact_at(&mut buf, 0).unwrap();
            assert_eq!(buf, chunk(i));
        }
        drop(a);
        assert_eq!(env.mapped_bytes(), 1000);
        let again = env.open_random(&paths[2]).unwrap();
        assert_eq!(env.mapped_bytes(), 2000);
        drop((b, c, again));
        assert_eq!(env.mapped_bytes(), 0);
    }

    #[test]
    fn residency_is_probed_on_mapped_and_pread_files_alike() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        let bytes = vec![7u8; 3 * PAGE_BYTES + 100];
        std::fs::write(&path, &bytes).unwrap();
        let len = bytes.len() as u64;
        // Just written: every page is in the page cache, through either kind of file.
        let mapped = PosixEnv::new().open_random(&path).unwrap();
        let pread = PosixEnv::new()
            .with_mmap_reads(false)
            .open_random(&path)
            .unwrap();
        assert!(mapped.mapped().is_some() && pread.mapped().is_none());
        for f in [&mapped, &pread] {
            assert_eq!(f.resident_bytes(0, len), Some(len));
            // Clamped to the range asked, which need not be page-aligned.
            assert_eq!(f.resident_bytes(100, 50), Some(50));
            assert_eq!(f.resident_bytes(0, 0), None);
        }
    }

    #[test]
    fn the_memory_limit_is_at_most_physical_memory() {
        let total = std::fs::read_to_string("/proc/meminfo").unwrap();
        let kib: u64 = total
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let limit = memory_limit_bytes().unwrap();
        assert!(limit > 0 && limit <= kib * 1024, "{limit}");
    }

    #[test]
    fn mapped_log_appends_are_readable_at_once_and_drop_cuts_the_reserved_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.vlog");
        let env = PosixEnv::new();
        let mut f = env.new_log_writable(&path, 64 << 10).unwrap();
        let mut expected = Vec::new();
        // 300 KB through 64 KiB reservations: five reservations, each mapped before use.
        for i in 0..300 {
            f.append(&chunk(i)).unwrap();
            expected.extend_from_slice(&chunk(i));
        }
        assert_eq!(f.len(), expected.len() as u64);
        let reserved = std::fs::metadata(&path).unwrap().len();
        assert!(
            reserved >= f.len() && reserved.is_multiple_of(64 << 10),
            "{reserved}"
        );
        // Readers see appended bytes before any flush or sync (same page cache).
        let r = env.open_random(&path).unwrap();
        let mut got = vec![0u8; 1000];
        r.read_exact_at(&mut got, 299 * 1000).unwrap();
        assert_eq!(got, chunk(299));
        f.sync().unwrap();
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn mapped_log_left_open_by_a_crash_ends_in_zeros_after_its_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000002.vlog");
        let env = PosixEnv::new();
        let mut f = env.new_log_writable(&path, 0).unwrap();
        f.append(&chunk(7)).unwrap();
        // A process that dies never runs the destructor: model it by leaking the file.
        std::mem::forget(f);
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len() as u64, LOG_RESERVE_BYTES);
        assert_eq!(&data[..1000], &chunk(7)[..]);
        assert!(data[1000..].iter().all(|&b| b == 0));
    }

    #[test]
    fn log_files_are_plain_writes_when_mapping_is_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000003.vlog");
        let env = PosixEnv::new().with_mmap_logs(false);
        let mut f = env.new_log_writable(&path, 64 << 10).unwrap();
        f.append(&chunk(1)).unwrap();
        f.flush().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1000);
    }
}
