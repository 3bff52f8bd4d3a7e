//! Persistence back ends: how bytes Plush stores into a mapped region become durable.
//!
//! Plush addresses each persistent file (one per level, one per recovery-log partition) as a
//! region of 8-byte atomic words. It stores with ordinary atomic stores, then asks the back end
//! to `flush` the cache lines it wrote and to `fence` (a persistence barrier: after it returns,
//! every line flushed before it is durable). The back ends implement [`Persist`]:
//!
//! - [`Backend::Write`] (the default): the recovery log is a `MAP_PRIVATE` mapping of its file,
//!   so stores stay in process memory; `flush` writes the byte range into the file with
//!   `pwrite` (each thread its own, in parallel), and `fence` makes it durable with an
//!   `fdatasync`. Fences from concurrent threads form a group: one thread (the leader) issues
//!   the `fdatasync` for the whole group, the others wait for it (group commit, like a WAL's). No page faults on the append path, no write-protect faults after a write-back. The
//!   level files are mapped shared and synced like `Msync` (a barrier there is per migration,
//!   not per upsert).
//! - [`Backend::Msync`]: a `MAP_SHARED` mapping of an ordinary file. `flush` records the dirty
//!   page range; `fence` makes it durable with one `msync(MS_SYNC)` over the union of the pages
//!   flushed since the last fence (grouped: a migration that flushes hundreds of lines pays one
//!   sync; concurrent fences on one file share one sync as in `Write`). Cost: one page write-back per barrier, i.e. one device flush per acknowledged
//!   upsert on a disk (the same price as RocksDB's `sync=true`); on tmpfs an msync is a no-op.
//! - [`Backend::Clwb`]: the same mapping, with `clwb` per flushed line and `sfence` per fence,
//!   the persistence barrier of the chapter. Durable across power loss only on a DAX mapping of
//!   persistent memory; on tmpfs or the page cache it measures the instruction cost only.
//!   Available where the CPU has `clwb` (checked with `cpuid`).
//! - [`SimStorage`]: a crash simulator. Each region is a DRAM "cache" view plus a shadow media
//!   image that receives only lines flushed before a fence. At a chosen fence it captures the
//!   crash image: the shadow, with every word that differs from the view (stored but not yet
//!   fenced) independently either reaching the media or not, which tears unflushed data at
//!   8-byte granularity, exactly what a power failure may do on PMem. With
//!   [`SimModel::Write`] it models the `Write` back end instead: a store to the log that was
//!   never flushed sits in private memory and never reaches the media; a flushed, unfenced one
//!   was handed to `pwrite` and may or may not have been written back, word by word (devices
//!   promise no more than sector atomicity, and not all of them that).
//!
//! With durability off ([`crate::Options::sync`] false) the file back ends skip both calls
//! (`Write` then maps the log shared, like `Msync`): stores to a shared mapping reach the page
//! cache at once and survive a process crash, not a power loss.
//!
//! Thread safety: regions are shared by all threads; word access is atomic, `flush`/`fence`
//! may be called concurrently.

use crate::error::{Error, Result};
use parking_lot::Condvar;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of a CPU cache line, the unit of `flush`.
pub const LINE_BYTES: usize = 64;
/// Bytes of a PMem media block, the unit of the "blocks touched" counter.
pub const BLOCK_BYTES: usize = 256;
const PAGE_BYTES: usize = 4096;

/// One mapped region and how to make its stores durable.
pub trait Persist: Send + Sync {
    /// The region as atomic 8-byte words.
    fn words(&self) -> &[AtomicU64];
    /// Starts writing back the cache lines covering `[off, off + len)` bytes.
    fn flush(&self, off: usize, len: usize);
    /// Persistence barrier: every line flushed before this call is durable when it returns.
    fn fence(&self) -> Result<()>;
    /// Hint: `[off, off + len)` was made durable and will not be stored to for a while, so a
    /// private copy of it may be dropped (the `Write` back end's log). Default: nothing.
    fn discard(&self, _off: usize, _len: usize) {}
    /// Sync system-call sequences issued so far (a group commit issues one per group).
    fn syncs(&self) -> u64 {
        0
    }
    /// (barriers the syncs covered, nanoseconds spent in syncs) so far.
    fn sync_profile(&self) -> (u64, u64) {
        (0, 0)
    }
    /// A writer announces that it is about to flush and fence (a group-commit leader may wait
    /// for it); `withdraw` retracts the announcement (at its fence, or on an error).
    fn announce(&self) {}
    fn withdraw(&self) {}
    /// The barrier of a writer that announced it: the announcement is retracted once its
    /// ticket is drawn (so a waiting leader counts it in).
    fn fence_announced(&self) -> Result<()> {
        self.withdraw();
        self.fence()
    }
}

/// What a region holds (back ends treat the recovery log differently).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    /// The manifest or a level file: read in place by lookups.
    Level,
    /// The recovery log: read only by recovery and compaction.
    Log,
}

/// Opens the regions of one database.
pub trait Storage: Send + Sync {
    /// Opens region `name` of `len_bytes` (a multiple of 4096); `None` when it does not exist
    /// and `create` is false. A new region reads as zeros.
    fn open_region(
        &self,
        name: &str,
        len_bytes: usize,
        create: bool,
        kind: RegionKind,
    ) -> Result<Option<Box<dyn Persist>>>;
    /// Where the regions live (for error messages).
    fn location(&self) -> PathBuf;
    /// Names of the regions that exist.
    fn list_regions(&self) -> Result<Vec<String>>;
    /// Removes region `name` (durably: a file back end syncs the directory). Handles opened
    /// before stay usable until dropped.
    fn remove_region(&self, name: &str) -> Result<()>;
}

/// Which system calls or instructions make the files durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The log written with `pwrite` + group-committed `fdatasync`; levels as `Msync`.
    Write,
    /// `msync(MS_SYNC)` over the pages flushed since the last fence.
    Msync,
    /// `clwb` per line and `sfence` per fence (needs the `clwb` instruction).
    Clwb,
}

impl Backend {
    /// Parses `write`, `msync` or `clwb`.
    pub fn parse(s: &str) -> Result<Backend> {
        match s {
            "write" => Ok(Backend::Write),
            "msync" => Ok(Backend::Msync),
            "clwb" => Ok(Backend::Clwb),
            _ => Err(Error::InvalidArgument(format!(
                "persistence back end {s:?}: expected write, msync or clwb"
            ))),
        }
    }

    /// The name `parse` accepts.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Write => "write",
            Backend::Msync => "msync",
            Backend::Clwb => "clwb",
        }
    }
}

/// True when this CPU has the `clwb` instruction.
pub fn clwb_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // Leaf 0 gives the highest leaf; leaf 7's EBX bit 24 is clwb.
        let max_leaf = std::arch::x86_64::__cpuid(0).eax;
        if max_leaf < 7 {
            return false;
        }
        let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
        leaf7.ebx & (1 << 24) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Regions as files in one directory, mapped shared.
pub struct FileStorage {
    dir: PathBuf,
    backend: Backend,
    sync: bool,
    window: bool,
}

impl FileStorage {
    /// Files in `dir`, made durable by `backend` when `sync` is set.
    pub fn new(dir: &Path, backend: Backend, sync: bool) -> Result<FileStorage> {
        FileStorage::with_window(dir, backend, sync, true)
    }

    /// As `new`; `window` switches the group-commit window ([`COMMIT_WINDOW_NS_MAX`]).
    pub fn with_window(
        dir: &Path,
        backend: Backend,
        sync: bool,
        window: bool,
    ) -> Result<FileStorage> {
        if backend == Backend::Clwb && !clwb_available() {
            return Err(Error::InvalidArgument(
                "the clwb back end needs a CPU with the clwb instruction; use msync".into(),
            ));
        }
        Ok(FileStorage {
            dir: dir.to_path_buf(),
            backend,
            sync,
            window,
        })
    }
}

impl Storage for FileStorage {
    fn open_region(
        &self,
        name: &str,
        len_bytes: usize,
        create: bool,
        kind: RegionKind,
    ) -> Result<Option<Box<dyn Persist>>> {
        assert!(len_bytes > 0 && len_bytes.is_multiple_of(PAGE_BYTES));
        let path = self.dir.join(name);
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        let have = file
            .metadata()
            .map_err(|e| Error::io("stat", &path, e))?
            .len();
        if have < len_bytes as u64 {
            // A new file, or one whose creation a crash cut short: extend (sparse, reads zero).
            file.set_len(len_bytes as u64)
                .map_err(|e| Error::io("set_len", &path, e))?;
            if self.sync {
                file.sync_all().map_err(|e| Error::io("fsync", &path, e))?;
                sync_dir(&self.dir)?;
            }
        } else if have > len_bytes as u64 {
            return Err(Error::corruption(
                &path,
                have,
                format!("file is {have} bytes, its geometry says {len_bytes}"),
            ));
        }
        let written = self.sync && self.backend == Backend::Write && kind == RegionKind::Log;
        let map =
            Mapping::new(&file, len_bytes, written).map_err(|e| Error::io("mmap", &path, e))?;
        let how = match self.backend {
            _ if written => How::Pwrite,
            Backend::Clwb => How::Clwb,
            Backend::Write | Backend::Msync => How::Msync,
        };
        Ok(Some(Box::new(FileRegion {
            path,
            map,
            file,
            how,
            sync: self.sync,
            group: Group {
                window: self.window,
                ..Group::default()
            },
        })))
    }

    fn location(&self) -> PathBuf {
        self.dir.clone()
    }

    fn list_regions(&self) -> Result<Vec<String>> {
        let rd = std::fs::read_dir(&self.dir).map_err(|e| Error::io("read_dir", &self.dir, e))?;
        let mut out = Vec::new();
        for e in rd {
            let e = e.map_err(|e| Error::io("read_dir", &self.dir, e))?;
            if let Some(n) = e.file_name().to_str() {
                out.push(n.to_string());
            }
        }
        Ok(out)
    }

    fn remove_region(&self, name: &str) -> Result<()> {
        let path = self.dir.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io("remove", &path, e)),
        }
        if self.sync {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    let d = std::fs::File::open(dir).map_err(|e| Error::io("open dir", dir, e))?;
    d.sync_all().map_err(|e| Error::io("fsync dir", dir, e))
}

struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access goes through atomics.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// A shared mapping, or a private one (stores stay in process memory) when `private`.
    fn new(file: &std::fs::File, len: usize, private: bool) -> std::io::Result<Mapping> {
        use std::os::unix::io::AsRawFd;
        let flags = if private {
            libc::MAP_PRIVATE
        } else {
            libc::MAP_SHARED
        };
        // SAFETY: a fresh mapping of `len` bytes of an open file; checked for failure.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is page-aligned, `len` bytes long and lives as long as `self`;
        // AtomicU64 has the layout of u64 and every access is atomic.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<AtomicU64>(), self.len / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mmap returned.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// How a file region's barrier works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    Msync,
    Clwb,
    Pwrite,
}

/// Group commit of one region's barriers. `flush` queues byte ranges; a fence takes a ticket;
/// the first fencing thread becomes the leader, takes every queued range and syncs them (one
/// system call sequence for the whole group), then publishes the highest ticket it covered.
/// A fence returns once a sync that started after its ticket was drawn has completed, so a
/// range flushed by one thread is never declared durable while another thread still writes
/// it back. A failed sync poisons the region: every later fence fails (the page cache may have
/// dropped the dirty state, so a retry could report success for lost data).
/// The leader's sync of the byte ranges it took.
type SyncRanges<'a> = dyn Fn(&[(usize, usize)]) -> std::io::Result<()> + 'a;

#[derive(Default)]
struct Group {
    state: Mutex<GroupState>,
    done: Condvar,
    /// Writers that announced a barrier and have not drawn their ticket yet.
    arriving: AtomicU64,
    /// The commit window is on (see [`COMMIT_WINDOW_NS_MAX`]).
    window: bool,
    /// Duration of the last sync, which bounds the window.
    last_sync_ns: AtomicU64,
    /// Copies of `synced` and `busy`, for followers that poll before they sleep.
    synced_hint: AtomicU64,
    busy_hint: AtomicBool,
}

/// Polls a follower makes (spinning, then yielding the CPU) before it sleeps on the condition
/// variable: a sync on tmpfs or a fast device takes microseconds, less than a sleep and wake-up.
const FOLLOWER_POLLS_MAX: u32 = 256;
/// Commit window: before it syncs, a leader waits for writers that announced a barrier (they
/// hold their locks and are between their store and their fence, microseconds away) to draw
/// their tickets, so that they join this sync instead of each starting the next one alone. At
/// most this long, and at most half the last sync's duration (waiting longer than a sync
/// takes cannot pay).
pub const COMMIT_WINDOW_NS_MAX: u64 = 200_000;
const FOLLOWER_SPINS: u32 = 32;

#[derive(Default)]
struct GroupState {
    /// Byte ranges flushed and not yet taken by a leader (adjacent ones merged).
    pending: Vec<(usize, usize)>,
    /// Tickets drawn so far / covered by a completed sync.
    drawn: u64,
    synced: u64,
    busy: bool,
    failed: Option<String>,
    /// Syncs issued (one per group), the tickets they covered, and their time.
    syncs: u64,
    covered: u64,
    sync_ns: u64,
}

impl Group {
    fn flush(&self, off: usize, len: usize) {
        let mut st = self.state.lock();
        let end = off + len;
        if let Some(last) = st.pending.last_mut() {
            if off <= last.1 && end >= last.0 {
                *last = (last.0.min(off), last.1.max(end));
                return;
            }
        }
        st.pending.push((off, end));
    }

    /// Waits until everything flushed before the call is synced by `sync` (run by a leader).
    fn fence(&self, sync: &SyncRanges<'_>, announced: bool) -> std::io::Result<()> {
        let mut st = self.state.lock();
        st.drawn += 1;
        let mine = st.drawn;
        if announced {
            self.arriving.fetch_sub(1, Ordering::AcqRel);
        }
        loop {
            if let Some(e) = &st.failed {
                return Err(std::io::Error::other(format!(
                    "an earlier persistence barrier failed ({e}); reopen the database"
                )));
            }
            if st.synced >= mine {
                return Ok(());
            }
            if st.busy {
                drop(st);
                for i in 0..FOLLOWER_POLLS_MAX {
                    if self.synced_hint.load(Ordering::Acquire) >= mine
                        || !self.busy_hint.load(Ordering::Acquire)
                    {
                        break;
                    }
                    if i < FOLLOWER_SPINS {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                st = self.state.lock();
                if st.busy && st.synced < mine {
                    // Checked under the lock the leader takes to publish: no lost wake-up.
                    self.done.wait(&mut st);
                }
                continue;
            }
            st.busy = true;
            self.busy_hint.store(true, Ordering::Release);
            if self.window && self.arriving.load(Ordering::Acquire) > 0 {
                drop(st);
                let bound = COMMIT_WINDOW_NS_MAX.min(self.last_sync_ns.load(Ordering::Relaxed) / 2);
                let t0 = std::time::Instant::now();
                let mut i = 0u32;
                while self.arriving.load(Ordering::Acquire) > 0
                    && (t0.elapsed().as_nanos() as u64) < bound
                {
                    if i < FOLLOWER_SPINS {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                    i += 1;
                }
                st = self.state.lock();
            }
            st.syncs += 1;
            let target = st.drawn;
            let first = st.synced;
            let mut ranges = std::mem::take(&mut st.pending);
            drop(st);
            ranges.sort_unstable();
            let t0 = std::time::Instant::now();
            let r = sync(&ranges);
            let ns = t0.elapsed().as_nanos() as u64;
            self.last_sync_ns.store(ns, Ordering::Relaxed);
            st = self.state.lock();
            st.busy = false;
            st.sync_ns += ns;
            st.covered += target - first.min(target);
            match r {
                Ok(()) => st.synced = st.synced.max(target),
                Err(e) => st.failed = Some(e.to_string()),
            }
            self.synced_hint.store(st.synced, Ordering::Release);
            self.busy_hint.store(false, Ordering::Release);
            self.done.notify_all();
        }
    }
}

struct FileRegion {
    path: PathBuf,
    map: Mapping,
    file: std::fs::File,
    how: How,
    sync: bool,
    group: Group,
}

impl FileRegion {
    /// The leader's work for the msync and pwrite back ends.
    fn sync_ranges(&self, ranges: &[(usize, usize)]) -> std::io::Result<()> {
        if ranges.is_empty() && self.how != How::Pwrite {
            return Ok(());
        }
        match self.how {
            How::Msync => {
                for &(lo, hi) in ranges {
                    let lo = lo / PAGE_BYTES * PAGE_BYTES;
                    let hi = hi.min(self.map.len);
                    // SAFETY: [lo, hi) lies inside the mapping and lo is page-aligned.
                    let rc =
                        unsafe { libc::msync(self.map.ptr.add(lo).cast(), hi - lo, libc::MS_SYNC) };
                    if rc != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            }
            // The ranges were written by `flush`; one fdatasync covers the whole group's.
            How::Pwrite => self.file.sync_data(),
            How::Clwb => Ok(()),
        }
    }
}

impl FileRegion {
    fn fence_as(&self, announced: bool) -> Result<()> {
        if !self.sync {
            return Ok(());
        }
        match self.how {
            How::Msync | How::Pwrite => {
                let what = if self.how == How::Msync {
                    "msync"
                } else {
                    "pwrite+fdatasync"
                };
                self.group
                    .fence(&|r| self.sync_ranges(r), announced)
                    .map_err(|e| Error::io(what, &self.path, e))
            }
            How::Clwb => {
                sfence();
                Ok(())
            }
        }
    }
}

impl Persist for FileRegion {
    fn words(&self) -> &[AtomicU64] {
        self.map.words()
    }

    fn flush(&self, off: usize, len: usize) {
        if !self.sync || len == 0 {
            return;
        }
        match self.how {
            How::Msync => self.group.flush(off, len),
            How::Pwrite => {
                use std::os::unix::fs::FileExt;
                let hi = (off + len).min(self.map.len);
                // SAFETY: [off, hi) lies inside the mapping; the caller stored these words
                // (atomically) before the flush and stores no more to them before its fence.
                let bytes = unsafe { std::slice::from_raw_parts(self.map.ptr.add(off), hi - off) };
                if let Err(e) = self.file.write_all_at(bytes, off as u64) {
                    // The next fence reports it (and every later one: the region is poisoned).
                    self.group.state.lock().failed = Some(format!("pwrite: {e}"));
                }
            }
            How::Clwb => {
                let end = (off + len).min(self.map.len);
                let mut line = off / LINE_BYTES * LINE_BYTES;
                while line < end {
                    // SAFETY: `line` is inside the mapping.
                    unsafe { clwb(self.map.ptr.add(line)) };
                    line += LINE_BYTES;
                }
            }
        }
    }

    fn fence(&self) -> Result<()> {
        self.fence_as(false)
    }

    fn fence_announced(&self) -> Result<()> {
        self.fence_as(true)
    }

    fn syncs(&self) -> u64 {
        self.group.state.lock().syncs
    }

    fn sync_profile(&self) -> (u64, u64) {
        let st = self.group.state.lock();
        (st.covered, st.sync_ns)
    }

    fn announce(&self) {
        if self.sync && self.how != How::Clwb {
            self.group.arriving.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn withdraw(&self) {
        if self.sync && self.how != How::Clwb {
            self.group.arriving.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn discard(&self, off: usize, len: usize) {
        if self.how != How::Pwrite {
            return;
        }
        let lo = off.div_ceil(PAGE_BYTES) * PAGE_BYTES;
        let hi = ((off + len) / PAGE_BYTES * PAGE_BYTES).min(self.map.len);
        if lo < hi {
            // SAFETY: [lo, hi) is page-aligned and inside the private mapping; its contents
            // were written to the file, so dropping the private copy re-reads the same bytes.
            unsafe { libc::madvise(self.map.ptr.add(lo).cast(), hi - lo, libc::MADV_DONTNEED) };
        }
    }
}

#[cfg(target_arch = "x86_64")]
unsafe fn clwb(p: *const u8) {
    // SAFETY: the caller passes an address inside a live mapping; clwb only writes back.
    unsafe { std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags)) };
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn clwb(_p: *const u8) {}

fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no operands and no memory effects beyond ordering.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// The media image of every region at a simulated crash, by region name.
pub type Image = BTreeMap<String, Vec<u64>>;

/// Which back end the crash simulator models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimModel {
    /// `clwb`/`msync`: any stored, unfenced word may reach the media (cache eviction, page
    /// write-back) or not.
    Mapped,
    /// `Write`: in the log, a stored word reaches the media only once flushed (handed to
    /// `pwrite`); until its fence completes it may or may not. Levels as `Mapped`.
    Write,
}

/// The crash-simulation back end (see the module doc). Deterministic for a given seed and a
/// single-threaded caller.
#[derive(Clone)]
pub struct SimStorage {
    shared: Arc<SimShared>,
}

struct SimShared {
    model: SimModel,
    regions: Mutex<BTreeMap<String, Arc<SimRegion>>>,
    fences: AtomicU64,
    crash_at_fence: u64,
    rng: Mutex<u64>,
    crashed: AtomicBool,
    image: Mutex<Option<Image>>,
}

struct SimRegion {
    view: Box<[AtomicU64]>,
    shadow: Mutex<Vec<u64>>,
    pending_lines: Mutex<Vec<usize>>,
    /// Opened as the recovery log (the `Write` model treats it differently).
    log: AtomicBool,
}

impl SimStorage {
    /// Empty media; crashes at fence number `crash_at_fence` (1-based; 0 never), tearing
    /// unfenced words with a generator seeded by `seed`.
    pub fn new(crash_at_fence: u64, seed: u64) -> SimStorage {
        SimStorage::from_image(Image::new(), crash_at_fence, seed)
    }

    /// Media holding `image` (a previous crash's), as after a restart.
    pub fn from_image(image: Image, crash_at_fence: u64, seed: u64) -> SimStorage {
        SimStorage::with_model(image, crash_at_fence, seed, SimModel::Mapped)
    }

    /// As `from_image`, modelling the back end `model`.
    pub fn with_model(image: Image, crash_at_fence: u64, seed: u64, model: SimModel) -> SimStorage {
        let regions = image
            .into_iter()
            .map(|(name, words)| {
                let view: Box<[AtomicU64]> = words.iter().map(|w| AtomicU64::new(*w)).collect();
                let region = SimRegion {
                    view,
                    shadow: Mutex::new(words),
                    pending_lines: Mutex::new(Vec::new()),
                    log: AtomicBool::new(false),
                };
                (name, Arc::new(region))
            })
            .collect();
        SimStorage {
            shared: Arc::new(SimShared {
                model,
                regions: Mutex::new(regions),
                fences: AtomicU64::new(0),
                crash_at_fence,
                rng: Mutex::new(seed ^ 0x9E37_79B9_7F4A_7C15),
                crashed: AtomicBool::new(false),
                image: Mutex::new(None),
            }),
        }
    }

    /// True once the crash fence has been reached.
    pub fn crashed(&self) -> bool {
        self.shared.crashed.load(Ordering::Acquire)
    }

    /// Fences issued so far.
    pub fn fences(&self) -> u64 {
        self.shared.fences.load(Ordering::Relaxed)
    }

    /// The media image captured at the crash, if it happened.
    pub fn crash_image(&self) -> Option<Image> {
        self.shared.image.lock().clone()
    }

    /// The media as it would be after a crash right now (fenced data plus a random subset of
    /// unfenced words).
    pub fn image_now(&self) -> Image {
        self.shared.capture()
    }
}

impl SimShared {
    fn next_bit(&self) -> bool {
        let mut s = self.rng.lock();
        // splitmix64
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) & 1 == 1
    }

    fn capture(&self) -> Image {
        let regions = self.regions.lock();
        let mut image = Image::new();
        for (name, r) in regions.iter() {
            let mut img = r.shadow.lock().clone();
            // Under the Write model only flushed log lines were handed to the file.
            let handed =
                (self.model == SimModel::Write && r.log.load(Ordering::Acquire)).then(|| {
                    let mut lines = r.pending_lines.lock().clone();
                    lines.sort_unstable();
                    lines
                });
            for (i, w) in img.iter_mut().enumerate() {
                let v = r.view[i].load(Ordering::Acquire);
                if v == *w {
                    continue;
                }
                if let Some(lines) = &handed {
                    if lines.binary_search(&(i * 8 / LINE_BYTES)).is_err() {
                        continue;
                    }
                }
                if self.next_bit() {
                    *w = v;
                }
            }
            image.insert(name.clone(), img);
        }
        image
    }

    fn on_fence(&self) {
        let n = self.fences.fetch_add(1, Ordering::AcqRel) + 1;
        if n == self.crash_at_fence && !self.crashed.load(Ordering::Acquire) {
            let image = self.capture();
            *self.image.lock() = Some(image);
            self.crashed.store(true, Ordering::Release);
        }
    }
}

struct SimHandle {
    shared: Arc<SimShared>,
    region: Arc<SimRegion>,
}

impl Storage for SimStorage {
    fn open_region(
        &self,
        name: &str,
        len_bytes: usize,
        create: bool,
        kind: RegionKind,
    ) -> Result<Option<Box<dyn Persist>>> {
        assert!(len_bytes > 0 && len_bytes.is_multiple_of(PAGE_BYTES));
        let mut regions = self.shared.regions.lock();
        let region = match regions.get(name) {
            Some(r) => {
                if r.view.len() * 8 != len_bytes {
                    return Err(Error::corruption(
                        name,
                        0,
                        format!("region is {} bytes, expected {len_bytes}", r.view.len() * 8),
                    ));
                }
                r.clone()
            }
            None if !create => return Ok(None),
            None => {
                let words = len_bytes / 8;
                let r = Arc::new(SimRegion {
                    view: (0..words).map(|_| AtomicU64::new(0)).collect(),
                    shadow: Mutex::new(vec![0; words]),
                    pending_lines: Mutex::new(Vec::new()),
                    log: AtomicBool::new(false),
                });
                regions.insert(name.to_string(), r.clone());
                r
            }
        };
        region.log.store(kind == RegionKind::Log, Ordering::Release);
        Ok(Some(Box::new(SimHandle {
            shared: self.shared.clone(),
            region,
        })))
    }

    fn location(&self) -> PathBuf {
        PathBuf::from("<simulated media>")
    }

    fn list_regions(&self) -> Result<Vec<String>> {
        Ok(self.shared.regions.lock().keys().cloned().collect())
    }

    /// Removal is a metadata operation: it reaches the media at once (the crash image taken
    /// at a later barrier lacks the region).
    fn remove_region(&self, name: &str) -> Result<()> {
        self.shared.regions.lock().remove(name);
        Ok(())
    }
}

impl Persist for SimHandle {
    fn words(&self) -> &[AtomicU64] {
        &self.region.view
    }

    fn flush(&self, off: usize, len: usize) {
        if len == 0 {
            return;
        }
        let mut pending = self.region.pending_lines.lock();
        let end = (off + len).min(self.region.view.len() * 8);
        let mut line = off / LINE_BYTES;
        while line * LINE_BYTES < end {
            pending.push(line);
            line += 1;
        }
    }

    fn fence(&self) -> Result<()> {
        // The crash, if it is this fence, happens before the barrier completes: the lines
        // flushed since the last fence may or may not have reached the media.
        self.shared.on_fence();
        let lines = std::mem::take(&mut *self.region.pending_lines.lock());
        let mut shadow = self.region.shadow.lock();
        for line in lines {
            let first = line * LINE_BYTES / 8;
            for i in first..(first + LINE_BYTES / 8).min(shadow.len()) {
                shadow[i] = self.region.view[i].load(Ordering::Acquire);
            }
        }
        Ok(())
    }
}

/// A region plus the counters Plush reports (lines flushed, 256-byte blocks touched, fences).
pub struct Region {
    name: String,
    inner: Box<dyn Persist>,
    pub(crate) lines_flushed: AtomicU64,
    pub(crate) blocks_flushed: AtomicU64,
    pub(crate) fences: AtomicU64,
}

impl Region {
    pub(crate) fn new(name: &str, inner: Box<dyn Persist>) -> Region {
        Region {
            name: name.to_string(),
            inner,
            lines_flushed: AtomicU64::new(0),
            blocks_flushed: AtomicU64::new(0),
            fences: AtomicU64::new(0),
        }
    }

    /// The region's file name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Word `i` of the region (panics past the end: callers index from validated geometry).
    #[inline]
    pub(crate) fn word(&self, i: usize) -> &AtomicU64 {
        &self.inner.words()[i]
    }

    /// Flushes `words` words starting at word `first`.
    pub(crate) fn flush_words(&self, first: usize, words: usize) {
        if words == 0 {
            return;
        }
        let (off, len) = (first * 8, words * 8);
        let lines = (off + len).div_ceil(LINE_BYTES) - off / LINE_BYTES;
        let blocks = (off + len).div_ceil(BLOCK_BYTES) - off / BLOCK_BYTES;
        self.lines_flushed
            .fetch_add(lines as u64, Ordering::Relaxed);
        self.blocks_flushed
            .fetch_add(blocks as u64, Ordering::Relaxed);
        self.inner.flush(off, len);
    }

    pub(crate) fn fence(&self) -> Result<()> {
        self.fences.fetch_add(1, Ordering::Relaxed);
        self.inner.fence()
    }

    /// See [`Persist::syncs`].
    pub(crate) fn syncs(&self) -> u64 {
        self.inner.syncs()
    }

    /// See [`Persist::announce`].
    pub(crate) fn announce(&self) {
        self.inner.announce();
    }

    /// See [`Persist::fence_announced`].
    pub(crate) fn fence_announced(&self) -> Result<()> {
        self.fences.fetch_add(1, Ordering::Relaxed);
        self.inner.fence_announced()
    }

    /// See [`Persist::withdraw`].
    pub(crate) fn withdraw(&self) {
        self.inner.withdraw();
    }

    /// See [`Persist::sync_profile`].
    pub(crate) fn sync_profile(&self) -> (u64, u64) {
        self.inner.sync_profile()
    }

    /// See [`Persist::discard`] (words, not bytes).
    pub(crate) fn discard_words(&self, first: usize, words: usize) {
        self.inner.discard(first * 8, words * 8);
    }
}
