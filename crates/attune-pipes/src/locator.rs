//! Resource locators: where data lives. A locator owns its resource (memory it allocated or
//! mapped, a file it opened) and is shared by reference counting (`Locator` is a cheap clone).
//!
//! Kinds: [`Locator::dram`] (an owned, page-aligned heap buffer), [`Locator::core_cache`] (a
//! buffer the size of one core's L2 cache, locked in memory where allowed: the stand-in for the
//! chapter's core-cache locator, since no stock Linux call places data in a given cache),
//! [`Locator::pmem`] (a file mapped shared, by default under `/dev/shm`: persistent-memory
//! stand-in, or a file on a DAX mount) and [`Locator::file`] (a file read and written through
//! system calls, buffered or O_DIRECT).
//!
//! Safety contract, the reason the memory is never borrowed from the caller: a request in flight
//! holds a reference to the memory it reads or writes, so the memory outlives it whatever the
//! caller drops. The caller reads and writes a memory locator's bytes only through
//! [`Locator::bytes`], an exclusive guard refused while a transfer uses the memory (and no
//! transfer starts while a guard is held). Dropping memory with a request in flight is
//! impossible by construction; the drop asserts it anyway and aborts rather than free memory
//! the kernel may still write.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};

/// Alignment of every buffer the library allocates, and of O_DIRECT offsets and lengths.
pub const DIRECT_ALIGN_BYTES: u64 = 4096;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What kind of resource a locator names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum LocatorKind {
    Dram,
    CoreCache,
    Pmem,
    File,
    DirectFile,
}

impl LocatorKind {
    /// The name used in errors, reports and the Python API.
    pub fn name(self) -> &'static str {
        match self {
            LocatorKind::Dram => "dram",
            LocatorKind::CoreCache => "core_cache",
            LocatorKind::Pmem => "pmem",
            LocatorKind::File => "file",
            LocatorKind::DirectFile => "direct_file",
        }
    }
}

/// How a file locator opens its file.
#[derive(Clone, Copy, Debug, Default)]
pub struct FileOptions {
    /// O_DIRECT: bypass the page cache (offsets, lengths and memory aligned to 4 KiB).
    pub direct: bool,
    /// Open for writing too (pipes into the file).
    pub write: bool,
    /// Create the file if missing (implies `write`).
    pub create: bool,
    /// Truncate it to zero length when opened (implies `write`).
    pub truncate: bool,
}

/// How a DRAM locator is allocated.
#[derive(Clone, Copy, Debug)]
pub struct DramOptions {
    /// From 2 MiB on, map the buffer on 2 MiB boundaries and ask for transparent huge pages
    /// (`MADV_HUGEPAGE`) before it is first touched. Default on: a device moves a request into
    /// physically contiguous memory in few segments (a 1 MiB read is one 2 MiB-page segment
    /// instead of 256 4 KiB ones, so a virtio disk limited to 254 segments per request takes it
    /// as one request instead of two) and the CPU's copies take fewer TLB misses. Off: a heap
    /// allocation on 4 KiB pages. The kernel may still back the buffer with small pages (THP
    /// `never`, fragmented memory); [`Locator::huge_pages`] says whether the advice was given.
    pub huge_pages: bool,
}

impl Default for DramOptions {
    fn default() -> Self {
        DramOptions { huge_pages: true }
    }
}

/// Addressable memory: a heap allocation or a shared file mapping.
pub(crate) struct Memory {
    pub(crate) id: u64,
    ptr: *mut u8,
    len: usize,
    backing: Backing,
    access: Mutex<Access>,
}

enum Backing {
    Heap(Layout),
    Map {
        _file: File,
    },
    /// An anonymous mapping of `map_len` bytes (2 MiB-aligned, transparent huge pages asked for).
    Anon {
        map_len: usize,
    },
}

/// Size and alignment of a transparent huge page on x86-64 and most arm64 kernels.
const HUGE_PAGE_BYTES: usize = 2 << 20;

#[derive(Default)]
struct Access {
    in_flight: u64,
    borrowed: bool,
}

// SAFETY: the pointer is owned by this struct; concurrent access to the bytes is arbitrated by
// `access` (the caller's exclusive guard vs. transfers, which touch disjoint or kernel-owned
// ranges while the guard is refused).
unsafe impl Send for Memory {}
unsafe impl Sync for Memory {}

impl Memory {
    fn heap(len: usize) -> Result<Memory> {
        let layout = Layout::from_size_align(len, DIRECT_ALIGN_BYTES as usize)
            .map_err(|e| Error::InvalidArgument(format!("buffer of {len} bytes: {e}")))?;
        // SAFETY: len > 0 is checked by the callers.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::BadLocator {
                what: format!("dram({len})"),
                reason: "out of memory".into(),
            });
        }
        Ok(Memory::new(ptr, len, Backing::Heap(layout)))
    }

    /// Anonymous memory on 2 MiB boundaries with `MADV_HUGEPAGE` given before the first touch,
    /// so that the kernel backs it with huge pages where it can (transparent huge pages in
    /// `always` or `madvise` mode). None when the kernel refuses the mapping or the advice: the
    /// caller then uses the heap.
    fn huge(len: usize) -> Option<Memory> {
        let map_len = len.checked_next_multiple_of(HUGE_PAGE_BYTES)?;
        let over = map_len.checked_add(HUGE_PAGE_BYTES)?;
        // SAFETY: a fresh anonymous private mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                over,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let start = (base as usize).next_multiple_of(HUGE_PAGE_BYTES);
        let head = start - base as usize;
        let tail = over - head - map_len;
        // SAFETY: trims the parts of the mapping just made that lie outside [start, +map_len).
        unsafe {
            if head > 0 {
                libc::munmap(base, head);
            }
            if tail > 0 {
                libc::munmap((start + map_len) as *mut libc::c_void, tail);
            }
        }
        let ptr = start as *mut u8;
        // SAFETY: advice on the mapping just made, before any page of it is touched.
        if unsafe { libc::madvise(ptr.cast(), map_len, libc::MADV_HUGEPAGE) } != 0 {
            // SAFETY: the mapping just made, never handed out.
            unsafe { libc::munmap(ptr.cast(), map_len) };
            return None;
        }
        Some(Memory::new(ptr, len, Backing::Anon { map_len }))
    }

    pub(crate) fn huge_pages(&self) -> bool {
        matches!(self.backing, Backing::Anon { .. })
    }

    fn new(ptr: *mut u8, len: usize, backing: Backing) -> Memory {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Memory {
            id,
            ptr,
            len,
            backing,
            access: Mutex::new(Access::default()),
        }
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn lock(&self) -> MutexGuard<'_, Access> {
        self.access.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers one more transfer using this memory; refused while the caller holds the bytes.
    pub(crate) fn begin_transfer(&self, what: &str) -> Result<()> {
        let mut a = self.lock();
        if a.borrowed {
            return Err(Error::Busy {
                what: what.into(),
                reason: "its bytes are borrowed through Locator::bytes".into(),
            });
        }
        a.in_flight += 1;
        Ok(())
    }

    /// The transfer that `begin_transfer` registered has no request left in flight.
    pub(crate) fn end_transfer(&self) {
        let mut a = self.lock();
        assert!(a.in_flight > 0, "end_transfer without begin_transfer");
        a.in_flight -= 1;
    }

    pub(crate) fn transfers_in_flight(&self) -> u64 {
        self.lock().in_flight
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        let in_flight = self.access.get_mut().map(|a| a.in_flight).unwrap_or(0);
        if in_flight != 0 {
            // Freeing memory that a request may still write would corrupt the heap: never.
            eprintln!(
                "attune-pipes: memory {} dropped with {in_flight} transfers in flight",
                self.id
            );
            std::process::abort();
        }
        match &self.backing {
            // SAFETY: allocated in `heap` with this layout; no request uses it (checked above).
            Backing::Heap(layout) => unsafe { dealloc(self.ptr, *layout) },
            // SAFETY: mapped in `Locator::pmem` with this length.
            Backing::Map { .. } => unsafe {
                libc::munmap(self.ptr.cast(), self.len);
            },
            // SAFETY: mapped in `Memory::huge` with this length.
            Backing::Anon { map_len } => unsafe {
                libc::munmap(self.ptr.cast(), *map_len);
            },
        }
    }
}

/// A file opened by a locator.
pub(crate) struct FileRes {
    pub(crate) id: u64,
    pub(crate) file: File,
    pub(crate) path: PathBuf,
    pub(crate) direct: bool,
    pub(crate) writable: bool,
    /// A shared mapping of the file for the mmap mechanism, made on first use and remade larger.
    pub(crate) map: Mutex<Option<FileMap>>,
}

pub(crate) struct FileMap {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: the mapping is owned by FileRes and unmapped in its drop; access goes through the mutex.
unsafe impl Send for FileMap {}

impl Drop for FileMap {
    fn drop(&mut self) {
        // SAFETY: mapped by the mmap mechanism with this length.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

impl FileRes {
    pub(crate) fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// The file's current length.
    pub(crate) fn len(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| Error::io("fstat", &self.path, &e))
    }
}

pub(crate) enum Res {
    Memory {
        mem: Memory,
        kind: LocatorKind,
        label: String,
    },
    File(FileRes),
}

/// A resource locator: a source or destination of data movement. Clones share the resource.
#[derive(Clone)]
pub struct Locator(pub(crate) Arc<Res>);

impl std::fmt::Debug for Locator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Locator({})", self.describe())
    }
}

fn check_size(what: &str, bytes: u64) -> Result<usize> {
    if bytes == 0 {
        return Err(Error::BadLocator {
            what: what.into(),
            reason: "size must be > 0".into(),
        });
    }
    usize::try_from(bytes).map_err(|_| Error::BadLocator {
        what: what.into(),
        reason: "size does not fit in memory".into(),
    })
}

/// Size in bytes of the L2 cache of `core` (sysfs), if the kernel describes it.
pub fn cache_bytes(core: usize, level: u32) -> Option<u64> {
    let base = format!("/sys/devices/system/cpu/cpu{core}/cache");
    for index in 0..8 {
        let dir = format!("{base}/index{index}");
        let lvl = std::fs::read_to_string(format!("{dir}/level")).ok()?;
        if lvl.trim() != level.to_string() {
            continue;
        }
        let ty = std::fs::read_to_string(format!("{dir}/type")).unwrap_or_default();
        if ty.trim() == "Instruction" {
            continue;
        }
        let size = std::fs::read_to_string(format!("{dir}/size")).ok()?;
        let s = size.trim();
        let (num, mul) = if let Some(k) = s.strip_suffix('K') {
            (k, 1024)
        } else if let Some(m) = s.strip_suffix('M') {
            (m, 1024 * 1024)
        } else {
            (s, 1)
        };
        return num.parse::<u64>().ok().map(|n| n * mul);
    }
    None
}

/// Number of CPUs sharing the last-level cache of CPU 0 (at least 1).
pub fn llc_sharing_cpus() -> u64 {
    for index in (0..8).rev() {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        if let Ok(list) = std::fs::read_to_string(format!("{dir}/shared_cpu_list")) {
            let mut n = 0u64;
            for part in list.trim().split(',') {
                n += match part.split_once('-') {
                    Some((a, b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
                        (Ok(a), Ok(b)) if b >= a => b - a + 1,
                        _ => 1,
                    },
                    None => 1,
                };
            }
            return n.max(1);
        }
    }
    1
}

impl Locator {
    /// A DRAM buffer of `bytes` (zeroed, 4 KiB-aligned), owned by the library; from 2 MiB on,
    /// on huge pages where the kernel grants them (see [`DramOptions::huge_pages`]).
    pub fn dram(bytes: u64) -> Result<Locator> {
        Locator::dram_with(bytes, DramOptions::default())
    }

    /// A DRAM buffer of `bytes` with options.
    pub fn dram_with(bytes: u64, opts: DramOptions) -> Result<Locator> {
        let len = check_size(&format!("dram({bytes})"), bytes)?;
        let huge = if opts.huge_pages && len >= HUGE_PAGE_BYTES {
            Memory::huge(len)
        } else {
            None
        };
        let mem = match huge {
            Some(m) => m,
            None => Memory::heap(len)?,
        };
        Ok(Locator(Arc::new(Res::Memory {
            mem,
            kind: LocatorKind::Dram,
            label: format!("dram({bytes})"),
        })))
    }

    /// A buffer the size of `core`'s L2 cache (or `bytes` when given), locked in memory where
    /// the locked-memory limit allows. Pipes into it behave like DRAM pipes: stock Linux has no
    /// call that places data in a given core's cache (that is what DDIO and CLDEMOTE would add).
    pub fn core_cache(core: usize, bytes: Option<u64>) -> Result<Locator> {
        let what = format!("core_cache({core})");
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        if core >= cpus && !Path::new(&format!("/sys/devices/system/cpu/cpu{core}")).exists() {
            return Err(Error::BadLocator {
                what,
                reason: format!("no core {core} on this machine"),
            });
        }
        let size = match bytes {
            Some(b) => b,
            None => cache_bytes(core, 2).ok_or_else(|| Error::BadLocator {
                what: what.clone(),
                reason: "the kernel does not describe this core's L2 cache; give bytes".into(),
            })?,
        };
        let len = check_size(&what, size)?;
        let mem = Memory::heap(len)?;
        // SAFETY: the range is the allocation just made. Failure (a small RLIMIT_MEMLOCK) is fine.
        unsafe {
            libc::mlock(mem.ptr.cast(), len);
        }
        Ok(Locator(Arc::new(Res::Memory {
            mem,
            kind: LocatorKind::CoreCache,
            label: what,
        })))
    }

    /// A persistent-memory stand-in: `path` created or opened, sized to `bytes` (blocks reserved
    /// with `posix_fallocate`, so a full file system fails here and not with SIGBUS later) and
    /// mapped shared. Use a file under `/dev/shm`, or on a DAX mount where one exists.
    pub fn pmem(path: impl AsRef<Path>, bytes: u64) -> Result<Locator> {
        let path = path.as_ref();
        let what = format!("pmem({})", path.display());
        let len = check_size(&what, bytes)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::BadLocator {
                what: what.clone(),
                reason: e.to_string(),
            })?;
        // SAFETY: fd is open; the range is checked by the kernel.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, bytes as libc::off_t) };
        if rc != 0 {
            return Err(Error::from_errno("posix_fallocate", path, 0, rc));
        }
        // SAFETY: a fresh shared mapping of an open file of at least `len` bytes.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::last_os("mmap", path, 0));
        }
        let mem = Memory::new(ptr.cast(), len, Backing::Map { _file: file });
        Ok(Locator(Arc::new(Res::Memory {
            mem,
            kind: LocatorKind::Pmem,
            label: what,
        })))
    }

    /// A file read and written through system calls (or mapped, by the mmap mechanism).
    pub fn file(path: impl AsRef<Path>, opts: FileOptions) -> Result<Locator> {
        let path = path.as_ref();
        let write = opts.write || opts.create || opts.truncate;
        let mut oo = OpenOptions::new();
        oo.read(true)
            .write(write)
            .create(opts.create)
            .truncate(opts.truncate);
        if opts.direct {
            oo.custom_flags(libc::O_DIRECT);
        }
        let file = oo.open(path).map_err(|e| Error::BadLocator {
            what: format!("file({})", path.display()),
            reason: e.to_string(),
        })?;
        let meta = file.metadata().map_err(|e| Error::io("fstat", path, &e))?;
        if meta.is_dir() {
            return Err(Error::BadLocator {
                what: format!("file({})", path.display()),
                reason: "is a directory".into(),
            });
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Ok(Locator(Arc::new(Res::File(FileRes {
            id,
            file,
            path: path.to_path_buf(),
            direct: opts.direct,
            writable: write,
            map: Mutex::new(None),
        }))))
    }

    /// Which kind of resource this is.
    pub fn kind(&self) -> LocatorKind {
        match &*self.0 {
            Res::Memory { kind, .. } => *kind,
            Res::File(f) if f.direct => LocatorKind::DirectFile,
            Res::File(_) => LocatorKind::File,
        }
    }

    /// Whether this memory was mapped for huge pages and the kernel took the advice (the pages
    /// themselves may still be small: see [`DramOptions::huge_pages`]); false for files.
    pub fn huge_pages(&self) -> bool {
        self.memory().is_some_and(Memory::huge_pages)
    }

    /// Size in bytes: the memory's size, or the file's current length.
    pub fn len(&self) -> Result<u64> {
        match &*self.0 {
            Res::Memory { mem, .. } => Ok(mem.len() as u64),
            Res::File(f) => f.len(),
        }
    }

    /// True when the memory has no bytes or the file is empty.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// `kind(detail)`, as errors and reports name the locator.
    pub fn describe(&self) -> String {
        match &*self.0 {
            Res::Memory { label, .. } => label.clone(),
            Res::File(f) => format!("{}({})", self.kind().name(), f.path.display()),
        }
    }

    /// The file's path (files and pmem mappings are named by it; DRAM has none).
    pub fn path(&self) -> Option<PathBuf> {
        match &*self.0 {
            Res::File(f) => Some(f.path.clone()),
            _ => None,
        }
    }

    /// Exclusive access to a memory locator's bytes; refused while a transfer uses them.
    pub fn bytes(&self) -> Result<BytesGuard<'_>> {
        let Res::Memory { mem, .. } = &*self.0 else {
            return Err(Error::InvalidArgument(format!(
                "{} is a file: its bytes move through a pipe",
                self.describe()
            )));
        };
        let mut a = mem.lock();
        if a.in_flight > 0 || a.borrowed {
            return Err(Error::Busy {
                what: self.describe(),
                reason: format!("{} transfers in flight or already borrowed", a.in_flight),
            });
        }
        a.borrowed = true;
        Ok(BytesGuard { mem })
    }

    /// Transfers currently using this memory (0 for files).
    pub fn transfers_in_flight(&self) -> u64 {
        match &*self.0 {
            Res::Memory { mem, .. } => mem.transfers_in_flight(),
            Res::File(_) => 0,
        }
    }

    /// Flushes a file's data (fdatasync) or a pmem mapping (msync).
    pub fn sync(&self) -> Result<()> {
        match &*self.0 {
            Res::File(f) => f
                .file
                .sync_data()
                .map_err(|e| Error::io("fdatasync", &f.path, &e)),
            Res::Memory {
                mem,
                kind: LocatorKind::Pmem,
                label,
            } => {
                // SAFETY: the mapping made in `pmem`.
                let rc = unsafe { libc::msync(mem.ptr.cast(), mem.len, libc::MS_SYNC) };
                if rc != 0 {
                    return Err(Error::last_os("msync", Path::new(label), 0));
                }
                Ok(())
            }
            Res::Memory { .. } => Ok(()),
        }
    }

    pub(crate) fn memory(&self) -> Option<&Memory> {
        match &*self.0 {
            Res::Memory { mem, .. } => Some(mem),
            Res::File(_) => None,
        }
    }

    pub(crate) fn file_res(&self) -> Option<&FileRes> {
        match &*self.0 {
            Res::File(f) => Some(f),
            Res::Memory { .. } => None,
        }
    }
}

/// The caller's exclusive view of a memory locator's bytes (see [`Locator::bytes`]).
pub struct BytesGuard<'a> {
    mem: &'a Memory,
}

impl std::ops::Deref for BytesGuard<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: no transfer uses the memory while the guard exists (begin_transfer refuses).
        unsafe { std::slice::from_raw_parts(self.mem.ptr, self.mem.len) }
    }
}

impl std::ops::DerefMut for BytesGuard<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and the guard is exclusive (a second `bytes` is refused).
        unsafe { std::slice::from_raw_parts_mut(self.mem.ptr, self.mem.len) }
    }
}

impl Drop for BytesGuard<'_> {
    fn drop(&mut self) {
        self.mem.lock().borrowed = false;
    }
}
