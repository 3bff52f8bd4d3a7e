//! Persistence back ends: how bytes Plush stores into a mapped region become durable.
//!
//! Plush addresses each persistent file (one per level, one per recovery-log partition) as a
//! region of 8-byte atomic words. It stores with ordinary atomic stores, then asks the back end
//! to `flush` the cache lines it wrote and to `fence` (a persistence barrier: after it returns,
//! every line flushed before it is durable). The back ends implement [`Persist`]:
//!
//! - [`Backend::Write`] (the default): the recovery log is a `MAP_PRIVATE` mapping of its file,
//!   so stores stay in process memory; `flush` queues the byte range, and `fence` is a
//!   leader-written group commit (the `Group` below): one fencing thread, the leader, takes every
//!   range queued by concurrent writers, `pwrite`s them into the file and makes them durable
//!   with one `fdatasync`, while the others wait for it. With [`GroupCommit::direct`] the
//!   leader writes the whole 4 KiB pages around the ranges with `O_DIRECT` instead: the bytes
//!   go from the private mapping to the device without dirtying the page cache, so the
//!   `fdatasync` has no page writeback to do; but the write itself then waits for the device
//!   under the group's lock (measured: level at 1–2 writers, slower at 4–8; off by default). No page faults on the append path, no
//!   write-protect faults after a write-back. The level files are mapped shared and synced like
//!   `Msync` (a barrier there is per migration, not per upsert).
//! - [`Backend::Msync`]: a `MAP_SHARED` mapping of an ordinary file. `flush` records the dirty
//!   page range; `fence` makes it durable with one `msync(MS_SYNC)` over the union of the pages
//!   flushed since the last fence (grouped: a migration that flushes hundreds of lines pays one
//!   sync; concurrent fences on one file share one sync as in `Write`). Cost: one page
//!   write-back per barrier, i.e. one device flush per acknowledged upsert on a disk (the same
//!   price as RocksDB's `sync=true`); on tmpfs an msync is a no-op.
//! - [`Backend::Clwb`]: the same mapping, with `clwb` per flushed line and `sfence` per fence,
//!   the persistence barrier of the chapter. Durable across power loss only on a DAX mapping of
//!   persistent memory; on tmpfs or the page cache it measures the instruction cost only.
//!   Available where the CPU has `clwb` (checked with `cpuid`).
//! - [`SimStorage`]: a crash simulator whose barriers run through the same group commit. Each
//!   region is a DRAM "cache" view plus a shadow media
//!   image that receives only lines flushed before a fence. At a chosen fence it captures the
//!   crash image: the shadow, with every word that differs from the view (stored but not yet
//!   fenced) independently either reaching the media or not, which tears unflushed data at
//!   8-byte granularity, exactly what a power failure may do on PMem. With
//!   [`SimModel::Write`] it models the `Write` back end instead: a store to the log that was
//!   never flushed sits in private memory and never reaches the media; a flushed, unfenced one
//!   may have been handed to `pwrite` by a leader and may or may not have been written back,
//!   word by word (devices
//!   promise no more than sector atomicity, and not all of them that).
//!
//! With durability off ([`crate::Options::sync`] false) the file back ends skip both calls
//! (`Write` then maps the log shared, like `Msync`): stores to a shared mapping reach the page
//! cache at once and survive a process crash, not a power loss.
//!
//! On tmpfs the page cache is the file: there is no medium below it for `fdatasync` or
//! `msync` to write to, and a power loss takes the files whatever was synced. There the
//! `Write` and `Msync` back ends skip their barriers as with durability off (the log mapped
//! shared, no `pwrite`, no sync), which keeps exactly the durability the system calls gave and
//! none of their cost ([`FileStorage::elide_tmpfs_syncs`], on by default in
//! [`crate::Options::elide_tmpfs_syncs`]). `Clwb` is left as it is: on tmpfs it is the
//! instruction-cost measurement of the persistent-memory path.
//!
//! Thread safety: regions are shared by all threads; word access is atomic, `flush`/`fence`
//! may be called concurrently.

use crate::error::{Error, Result};
use parking_lot::Condvar;
use parking_lot::Mutex;
use parking_lot::RwLock;
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
    /// The region as atomic 8-byte words: the same slice (address and length) for the whole
    /// life of the value ([`Region`] keeps it, to index words without a call through the
    /// trait object).
    fn words(&self) -> &[AtomicU64];
    /// Starts writing back the cache lines covering `[off, off + len)` bytes.
    fn flush(&self, off: usize, len: usize);
    /// Persistence barrier: every line flushed before this call is durable when it returns.
    fn fence(&self) -> Result<()>;
    /// Makes every store so far durable, flushed or not, and also where barriers are off
    /// (durability off): what a clean close does once. Default: a barrier (the back end
    /// flushes every store it is handed).
    fn sync_all(&self) -> Result<()> {
        self.fence()
    }
    /// Allocates the file blocks under `[off, off + len)` bytes before they are first stored
    /// to through the mapping: a store into an unallocated page of a full file system kills
    /// the process with SIGBUS, while this returns an I/O error (ENOSPC) the caller can
    /// report. Allocated ranges cost nothing more. Default: nothing to allocate.
    fn reserve(&self, _off: usize, _len: usize) -> Result<()> {
        Ok(())
    }
    /// Hint: `[off, off + len)` was made durable and will not be stored to for a while, so a
    /// private copy of it may be dropped (the `Write` back end's log). Default: nothing.
    fn discard(&self, _off: usize, _len: usize) {}
    /// The first run `[lo, hi)` of bytes at or after `off` that may be non-zero; `None` when
    /// every byte from `off` to the end reads as zero. Bytes outside the runs read as zero (a
    /// file's holes and unwritten extents); a run may hold zeros too. Lets recovery skip the
    /// never-written part of a log chunk without reading it. Default: everything from `off`
    /// is one run.
    fn data_run(&self, off: usize) -> Option<(usize, usize)> {
        let len = self.words().len() * 8;
        (off < len).then_some((off, len))
    }
    /// Sync system-call sequences issued so far (a group commit issues one per group).
    fn syncs(&self) -> u64 {
        0
    }
    /// (barriers the syncs covered, nanoseconds spent in syncs, distinct 4 KiB pages the
    /// syncs' groups handed to the device) so far.
    fn sync_profile(&self) -> (u64, u64, u64) {
        (0, 0, 0)
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
    /// A payload-log segment: appended like the log, read in place by lookups like a level.
    Payload,
}

impl RegionKind {
    /// Written by appends (the `Write` back end's `pwrite` path): the log and payload segments.
    fn appended(self) -> bool {
        self != RegionKind::Level
    }
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
    /// Length in bytes of region `name`; `None` when it does not exist.
    fn region_len(&self, name: &str) -> Result<Option<u64>>;
    /// Removes region `name` (durably: a file back end syncs the directory). Handles opened
    /// before stay usable until dropped.
    fn remove_region(&self, name: &str) -> Result<()>;
    /// Replaces region `name` by an empty one of the same name, atomically and durably.
    /// Handles opened before stay usable until dropped (a file back end renames a new empty
    /// file over the old one, whose mapping lives on). Nothing for a read-only opener.
    fn clear_region(&self, name: &str) -> Result<()>;
    /// Makes the names of the regions created so far durable (a file back end syncs the
    /// directory), also where barriers are off: a clean close of a `sync=False` session.
    /// Default: nothing to do (a simulator has no directory).
    fn sync_location(&self) -> Result<()> {
        Ok(())
    }
    /// Bytes the file system can still allocate; `None` where that is not known (a simulator).
    fn free_bytes(&self) -> Option<u64> {
        None
    }
    /// Bytes of region `name` not yet backed by allocated blocks; `None` where unknown.
    fn unallocated_bytes(&self, _name: &str) -> Result<Option<u64>> {
        Ok(None)
    }
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
    group: GroupCommit,
    read_only: bool,
    elide_tmpfs_syncs: bool,
}

impl FileStorage {
    /// Files in `dir`, made durable by `backend` when `sync` is set.
    pub fn new(dir: &Path, backend: Backend, sync: bool) -> Result<FileStorage> {
        FileStorage::with_group(dir, backend, sync, GroupCommit::default())
    }

    /// As `new`, with the group-commit settings `group`.
    pub fn with_group(
        dir: &Path,
        backend: Backend,
        sync: bool,
        group: GroupCommit,
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
            group,
            read_only: false,
            elide_tmpfs_syncs: false,
        })
    }

    /// On: a file on tmpfs gets the `Write` and `Msync` back ends' barriers skipped (the log
    /// mapped shared; see the module docs): on tmpfs an `fdatasync` or `msync` has nothing to
    /// write, so the durability is the same without them. Clwb regions are unaffected. Off
    /// (the default of `FileStorage`): every back end issues its calls everywhere.
    pub fn elide_tmpfs_syncs(mut self, on: bool) -> FileStorage {
        self.elide_tmpfs_syncs = on;
        self
    }

    /// The same files, read-only: each is opened for reading; level and payload files are
    /// mapped read only (`PROT_READ`: no commit charge, however large), the recovery log
    /// private without a commit charge (`MAP_NORESERVE`), so that a store (recovery replays
    /// the log into DRAM and may arm a chunk header in memory) stays in process memory and
    /// nothing reaches a file; a region that does not exist is created in memory only
    /// (zeros, private), flushes, barriers and allocations do nothing, and no file is
    /// removed.
    pub fn into_read_only(mut self) -> FileStorage {
        self.read_only = true;
        self.sync = false;
        self
    }

    fn open_read_only(
        &self,
        name: &str,
        len_bytes: usize,
        create: bool,
        kind: RegionKind,
    ) -> Result<Option<Box<dyn Persist>>> {
        let path = self.dir.join(name);
        let mut missing = false;
        let file = match OpenOptions::new().read(true).open(&path) {
            Ok(f) => {
                let have = f.metadata().map_err(|e| Error::io("stat", &path, e))?.len();
                if have != len_bytes as u64 {
                    // Mapped past its end a read would be a SIGBUS; a writable open extends
                    // a short file (a creation cut short), a read-only one cannot.
                    return Err(Error::corruption(
                        &path,
                        have,
                        format!(
                            "file is {have} bytes, its geometry says {len_bytes} (a writable \
                             open extends a file whose creation was cut short)"
                        ),
                    ));
                }
                f
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create {
                    return Ok(None);
                }
                missing = true;
                // In memory only: a private mapping of /dev/zero.
                OpenOptions::new()
                    .read(true)
                    .open("/dev/zero")
                    .map_err(|e| Error::io("open", "/dev/zero", e))?
            }
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        // Nothing stores into a level or payload file of a read-only opener: mapped read
        // only, they take no commit charge however large (a default level 3 is 74 GB, which
        // a writable private mapping could not get on most machines). Recovery may store
        // into the log (arming a chunk header in memory), and into a file that does not
        // exist: those stay private, without a charge.
        let mode = if kind == RegionKind::Log || missing {
            MapMode::PrivateNoReserve
        } else {
            MapMode::ReadOnly
        };
        let map =
            Mapping::new(&file, len_bytes, mode).map_err(|e| map_error(&path, len_bytes, e))?;
        Ok(Some(Box::new(FileRegion {
            path,
            map,
            file,
            direct: None,
            how: How::Msync,
            sync: false,
            read_only: true,
            group: Group::new(self.group),
        })))
    }
}

impl Storage for FileStorage {
    fn free_bytes(&self) -> Option<u64> {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::ffi::CString::new(self.dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs is plain data; all zeros is a valid value.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a struct statvfs fills; the result is checked.
        let rc = unsafe { libc::statvfs(dir.as_ptr(), &mut st) };
        (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
    }

    fn unallocated_bytes(&self, name: &str) -> Result<Option<u64>> {
        use std::os::unix::fs::MetadataExt;
        let path = self.dir.join(name);
        match std::fs::metadata(&path) {
            Ok(m) => Ok(Some(m.len().saturating_sub(m.blocks() * 512))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("stat", &path, e)),
        }
    }

    fn open_region(
        &self,
        name: &str,
        len_bytes: usize,
        create: bool,
        kind: RegionKind,
    ) -> Result<Option<Box<dyn Persist>>> {
        assert!(len_bytes > 0 && len_bytes.is_multiple_of(PAGE_BYTES));
        if self.read_only {
            return self.open_read_only(name, len_bytes, create, kind);
        }
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
        // Barriers that would write nothing (tmpfs) are skipped, as with durability off.
        let sync = self.sync
            && !(self.elide_tmpfs_syncs && self.backend != Backend::Clwb && on_tmpfs(&file));
        let written = sync && self.backend == Backend::Write && kind.appended();
        let mode = if written {
            MapMode::Private
        } else {
            MapMode::Shared
        };
        let map =
            Mapping::new(&file, len_bytes, mode).map_err(|e| map_error(&path, len_bytes, e))?;
        if kind.appended() {
            // Recovery reads a few words at the head of every chunk of a mostly sparse file:
            // readahead would fault in (and zero) dozens of pages around each for nothing.
            // A hint; nothing depends on it taking effect.
            // SAFETY: the range is exactly the mapping just made.
            unsafe { libc::madvise(map.ptr.cast(), map.len, libc::MADV_RANDOM) };
        }
        let how = match self.backend {
            _ if written => How::Pwrite,
            Backend::Clwb => How::Clwb,
            Backend::Write | Backend::Msync => How::Msync,
        };
        // A file system without O_DIRECT (EINVAL) keeps the buffered path, and so does
        // tmpfs, where the page cache is the file and there is no writeback to skip.
        let direct = if written && self.group.direct && !on_tmpfs(&file) {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
                .ok()
        } else {
            None
        };
        Ok(Some(Box::new(FileRegion {
            path,
            map,
            file,
            direct,
            how,
            sync,
            read_only: false,
            group: Group::new(self.group),
        })))
    }

    fn location(&self) -> PathBuf {
        self.dir.clone()
    }

    fn region_len(&self, name: &str) -> Result<Option<u64>> {
        let path = self.dir.join(name);
        match std::fs::metadata(&path) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("stat", &path, e)),
        }
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
        if self.read_only {
            return Ok(());
        }
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

    fn sync_location(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        sync_dir(&self.dir)
    }

    fn clear_region(&self, name: &str) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        // Not a truncation: a reader still mapping the old file would fault (SIGBUS) past
        // the new end. A crash before the rename leaves the temporary file (removed by the
        // next clear of the same name, and ignored by opens) and the old region.
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!("{name}{CLEARING_SUFFIX}"));
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| Error::io("create", &tmp, e))?;
        if self.sync {
            file.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
        }
        std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
        if self.sync {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

/// Suffix of the temporary file [`Storage::clear_region`] renames over a region.
pub const CLEARING_SUFFIX: &str = ".clearing";

/// The error of a refused `mmap` of `len` bytes of `path`, saying what to do about it.
fn map_error(path: &Path, len: usize, e: std::io::Error) -> Error {
    let hint = match e.raw_os_error() {
        Some(libc::ENOMEM) => format!(
            "; the kernel refused a mapping of {:.1} GiB: check the address-space limit \
             (`ulimit -v`), vm.max_map_count, and, for a writable open, \
             vm.overcommit_memory (mode 2 charges mapped files to the commit limit); a \
             read-only open maps level and payload files read only and needs no commit charge",
            len as f64 / (1u64 << 30) as f64
        ),
        _ => String::new(),
    };
    Error::io(
        "mmap",
        path,
        std::io::Error::new(e.kind(), format!("{e}{hint}")),
    )
}

/// True when `file` lives on tmpfs.
fn on_tmpfs(file: &std::fs::File) -> bool {
    use std::os::unix::io::AsRawFd;
    const TMPFS_MAGIC: libc::c_long = 0x0102_1994;
    // SAFETY: statfs is plain data; all zeros is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs fills `st` for an open descriptor; the result is checked.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    rc == 0 && st.f_type as libc::c_long == TMPFS_MAGIC
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

/// How a file is mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MapMode {
    /// Shared, readable and writable: stores reach the file (through the page cache).
    Shared,
    /// Private, readable and writable: stores stay in process memory (the `Write` back end's
    /// log, whose bytes reach the file by `pwrite`). The kernel charges the whole length to
    /// the commit limit, as it may have to give every page a private copy.
    Private,
    /// Private and writable without a commit charge (`MAP_NORESERVE`): a read-only opener's
    /// recovery log, which recovery may store a few words into, in memory only. Under
    /// `vm.overcommit_memory=2` the kernel charges it anyway.
    PrivateNoReserve,
    /// Read only (`PROT_READ`, shared): no store is possible and nothing is charged, however
    /// large the file (a read-only opener's level and payload files).
    ReadOnly,
}

impl Mapping {
    /// A mapping of the first `len` bytes of `file`, as `mode` says.
    fn new(file: &std::fs::File, len: usize, mode: MapMode) -> std::io::Result<Mapping> {
        use std::os::unix::io::AsRawFd;
        let (prot, flags) = match mode {
            MapMode::Shared => (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED),
            MapMode::Private => (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE),
            MapMode::PrivateNoReserve => (
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_NORESERVE,
            ),
            MapMode::ReadOnly => (libc::PROT_READ, libc::MAP_SHARED),
        };
        // SAFETY: a fresh mapping of `len` bytes of an open file; checked for failure.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, file.as_raw_fd(), 0) };
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

/// How concurrent barriers of one region share their syncs (see [`Group`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupCommit {
    /// A leader waits for writers already on their way to the barrier before it syncs (see
    /// [`COMMIT_WINDOW_NS_MAX`]).
    pub window: bool,
    /// Syncs of one region that may be in flight at once (at least 1). 1 is the classic group
    /// commit: writers that arrive during a sync wait for it to end and form the next group.
    /// More lets such writers start the next group's sync at once, while the earlier one is
    /// still in the device (a device that serves several cache flushes together, as most
    /// SSDs and virtual disks do, then completes more writes per second).
    pub syncs_in_flight_max: usize,
    /// The `Write` back end's leader writes the log's pages with `O_DIRECT` (whole 4 KiB
    /// pages around the queued ranges, straight from the private mapping); false (the
    /// default), tmpfs, or a file system that refuses `O_DIRECT` writes the exact ranges
    /// through the page cache.
    pub direct: bool,
    /// Group size adapted to the sync's duration. While syncs are slow (their running mean
    /// at least [`GATHER_SYNC_NS_MIN`]: a device flush, not tmpfs), one sync at a time is in
    /// flight and its leader gathers before it syncs: it waits, at most the mean sync
    /// time and [`GATHER_NS_MAX`], until every writer the earlier syncs released has drawn
    /// its next ticket, so that one sync covers them all instead of the writers splitting
    /// into groups that alternate. While syncs are fast, `syncs_in_flight_max` applies and
    /// nobody waits (a wait would cost more than the sync).
    pub gather: bool,
}

impl Default for GroupCommit {
    fn default() -> Self {
        GroupCommit {
            window: false,
            syncs_in_flight_max: 1,
            direct: false,
            gather: false,
        }
    }
}

/// Group commit of one region's barriers, leader-written. A writer stores its words and calls
/// `flush`, which only queues the byte range; its fence draws a ticket. A fencing writer whose
/// ticket no sync has taken yet becomes a leader (when fewer than `syncs_in_flight_max` syncs
/// are in flight): under the group's lock it takes every queued range and hands them to the
/// device in one pass (`write`: the `pwrite`s of the whole group), then, with the lock
/// released, issues one barrier for them (`sync`: one `fdatasync` or `msync` sequence), and
/// wakes the writers of its group. Everyone else waits. Syncs complete in the order they
/// started: a ticket counts as durable only when the sync that took it and every earlier one
/// have returned, so a fence never returns before its own bytes and every byte flushed before
/// them are durable. A failed write or sync poisons the region: every later fence fails (the
/// page cache may have dropped the dirty state, so a retry could report success for lost data).
struct Group {
    state: Mutex<GroupState>,
    done: Condvar,
    cfg: GroupCommit,
    /// Writers that announced a barrier and have not drawn their ticket yet.
    arriving: AtomicU64,
    /// Duration of the last sync, which bounds the window.
    last_sync_ns: AtomicU64,
    /// Running mean of the syncs' durations (weight 1/8 per sync), which switches gathering
    /// on and bounds its wait.
    sync_mean_ns: AtomicU64,
    /// A gathering leader waits here for the writers it expects, at most this long.
    gathered: Condvar,
    gather_ns_max: u64,
    /// Copies of `synced` and of "a leader could start", for followers that poll before
    /// they sleep.
    synced_hint: AtomicU64,
    slot_hint: AtomicBool,
}

/// The leader's hand-off of the ranges it took (under the group's lock) and its barrier over
/// them (lock released).
type Ranges<'a> = dyn Fn(&[(usize, usize)]) -> std::io::Result<()> + 'a;

/// Polls a follower makes (spinning, then yielding the CPU) before it sleeps on the condition
/// variable: a sync on tmpfs or a fast device takes microseconds, less than a sleep and wake-up.
/// None when the last sync took longer than `FOLLOWER_YIELD_NS_MAX` (a device flush).
const FOLLOWER_POLLS_MAX: u32 = 256;
/// Commit window: before it syncs, a leader waits for writers that announced a barrier (they
/// hold their locks and are between their store and their fence, microseconds away) to draw
/// their tickets, so that they join this sync instead of each starting the next one alone. At
/// most this long, and at most half the last sync's duration (waiting longer than a sync
/// takes cannot pay).
pub const COMMIT_WINDOW_NS_MAX: u64 = 200_000;
const FOLLOWER_SPINS: u32 = 32;
/// A follower stops polling and sleeps after a yield that took longer than this (another task
/// ran) or after polling this long in all (RocksDB's write thread uses 3 µs and 100 µs).
const FOLLOWER_SLOW_YIELD_NS: u64 = 3_000;
const FOLLOWER_YIELD_NS_MAX: u64 = 100_000;
/// Bound on `syncs_in_flight_max` (every waiting writer could lead one; more gains nothing).
pub const SYNCS_IN_FLIGHT_LIMIT: usize = 64;
/// Mean sync time from which a gathering group commit waits for writers (see
/// [`GroupCommit::gather`]): a writer's own work between two barriers takes a few µs, a sync
/// on tmpfs about as long, a device flush 100 µs and more.
pub const GATHER_SYNC_NS_MIN: u64 = 40_000;
/// Longest a gathering leader waits (and at most the mean sync time: waiting for a writer
/// pays while it costs less than the extra sync that writer would otherwise lead): a writer
/// that has not come back by then is busy elsewhere or gone (or waits for a CPU on an
/// oversubscribed machine), and the group goes without it.
pub const GATHER_NS_MAX: u64 = 4_000_000;

#[derive(Default)]
struct GroupState {
    /// Byte ranges flushed and not yet taken by a leader (adjacent ones merged).
    pending: Vec<(usize, usize)>,
    /// Tickets drawn so far / taken by a leader / known durable.
    drawn: u64,
    taken: u64,
    synced: u64,
    /// Syncs in flight; syncs started and completed (in start order); finished syncs that
    /// wait for an earlier one, by start number, with the ticket each covers.
    in_flight: usize,
    started: u64,
    completed: u64,
    finished: BTreeMap<u64, u64>,
    failed: Option<String>,
    /// Gathering: writers that syncs released and that have not drawn a ticket since (they
    /// are expected back), and whether a leader is gathering now (nobody else leads then).
    returning: u64,
    gathering: bool,
    /// Gathers that ended because the time bound ran out.
    gather_timeouts: u64,
    /// Syncs issued (one per group), the tickets they covered, and their time.
    syncs: u64,
    covered: u64,
    sync_ns: u64,
    /// Distinct 4 KiB pages of the ranges the groups took (pages each sync writes back).
    pages: u64,
}

impl Group {
    fn new(cfg: GroupCommit) -> Group {
        Group {
            state: Mutex::new(GroupState::default()),
            done: Condvar::new(),
            cfg: GroupCommit {
                syncs_in_flight_max: cfg.syncs_in_flight_max.clamp(1, SYNCS_IN_FLIGHT_LIMIT),
                ..cfg
            },
            arriving: AtomicU64::new(0),
            last_sync_ns: AtomicU64::new(0),
            sync_mean_ns: AtomicU64::new(0),
            gathered: Condvar::new(),
            gather_ns_max: GATHER_NS_MAX,
            synced_hint: AtomicU64::new(0),
            slot_hint: AtomicBool::new(true),
        }
    }

    fn flush(&self, off: usize, len: usize) {
        let mut st = self.state.lock();
        let end = off + len;
        // Merged into one of the last two ranges it touches: a writer's entry and then its
        // chunk's acknowledged-tail word alternate between two places of the log, and each
        // range is one `pwrite` of the leader.
        let n = st.pending.len();
        for r in st.pending[n.saturating_sub(2)..].iter_mut().rev() {
            if off <= r.1 && end >= r.0 {
                *r = (r.0.min(off), r.1.max(end));
                return;
            }
        }
        st.pending.push((off, end));
    }

    fn publish(&self, st: &GroupState) {
        self.synced_hint.store(st.synced, Ordering::Release);
        self.slot_hint
            .store(self.may_lead_more(st), Ordering::Release);
    }

    /// Gathering is on and the syncs are slow enough for a wait to pay.
    fn gathers(&self) -> bool {
        self.cfg.gather && self.sync_mean_ns.load(Ordering::Relaxed) >= GATHER_SYNC_NS_MIN
    }

    /// Another sync may start now: a slot is free and no leader is gathering.
    fn may_lead_more(&self, st: &GroupState) -> bool {
        let max = if self.gathers() {
            1
        } else {
            self.cfg.syncs_in_flight_max
        };
        st.in_flight < max && !st.gathering
    }

    /// A gathering leader (lock held on entry and exit) waits until the writers that earlier
    /// syncs released have drawn their next tickets, bounded by the mean sync time and
    /// [`GATHER_NS_MAX`].
    fn gather(&self, st: &mut parking_lot::MutexGuard<'_, GroupState>) {
        let bound = self
            .gather_ns_max
            .min(self.sync_mean_ns.load(Ordering::Relaxed));
        let deadline = std::time::Instant::now() + std::time::Duration::from_nanos(bound);
        st.gathering = true;
        self.publish(st);
        while st.returning > 0 && st.failed.is_none() {
            if self.gathered.wait_until(st, deadline).timed_out() {
                if st.returning > 0 {
                    // They are not coming soon: expect nobody until the next release.
                    st.returning = 0;
                    st.gather_timeouts += 1;
                }
                break;
            }
        }
        st.gathering = false;
    }

    /// Waits until everything flushed before the call is durable: leads a sync (`write` under
    /// the lock, then `sync`) or waits for one.
    fn fence(&self, write: &Ranges<'_>, sync: &Ranges<'_>, announced: bool) -> std::io::Result<()> {
        let mut st = self.state.lock();
        st.drawn += 1;
        let mine = st.drawn;
        if announced {
            self.arriving.fetch_sub(1, Ordering::AcqRel);
        }
        if st.returning > 0 {
            st.returning -= 1;
            if st.returning == 0 && st.gathering {
                self.gathered.notify_one();
            }
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
            let can_lead = st.taken < mine && self.may_lead_more(&st);
            if !can_lead {
                let taken = st.taken >= mine;
                drop(st);
                let t0 = std::time::Instant::now();
                // Poll only where syncs are short (tmpfs, a fast device): behind a device
                // flush of 100 µs or more, polling burns the CPU the leader and the other
                // writers need, and a sleep costs less than the wait.
                let polls = if self.last_sync_ns.load(Ordering::Relaxed) > FOLLOWER_YIELD_NS_MAX {
                    0
                } else {
                    FOLLOWER_POLLS_MAX
                };
                for i in 0..polls {
                    if self.synced_hint.load(Ordering::Acquire) >= mine
                        || (!taken && self.slot_hint.load(Ordering::Acquire))
                    {
                        break;
                    }
                    if i < FOLLOWER_SPINS {
                        std::hint::spin_loop();
                        continue;
                    }
                    let y0 = std::time::Instant::now();
                    std::thread::yield_now();
                    // A slow yield means other tasks wanted the CPU (an oversubscribed
                    // machine): polling only delays them and the leader, so sleep instead.
                    if y0.elapsed().as_nanos() as u64 > FOLLOWER_SLOW_YIELD_NS
                        || t0.elapsed().as_nanos() as u64 > FOLLOWER_YIELD_NS_MAX
                    {
                        break;
                    }
                }
                st = self.state.lock();
                let still = st.failed.is_none()
                    && st.synced < mine
                    && (st.taken >= mine || !self.may_lead_more(&st));
                if still {
                    // Checked under the lock a leader takes to publish: no lost wake-up.
                    self.done.wait(&mut st);
                }
                continue;
            }
            if self.gathers() && st.returning > 0 {
                // The lock was released while gathering: look again (a sync in flight may
                // have made this ticket durable meanwhile).
                self.gather(&mut st);
                continue;
            }
            st.in_flight += 1;
            self.publish(&st);
            if self.cfg.window && self.arriving.load(Ordering::Acquire) > 0 {
                drop(st);
                self.wait_for_arrivals();
                st = self.state.lock();
            }
            let target = st.drawn;
            st.covered += target - st.taken;
            st.taken = target;
            st.syncs += 1;
            let n = st.started;
            st.started += 1;
            let mut ranges = std::mem::take(&mut st.pending);
            ranges.sort_unstable();
            st.pages += page_runs(&ranges, usize::MAX)
                .iter()
                .map(|&(lo, hi)| ((hi - lo) / PAGE_BYTES) as u64)
                .sum::<u64>();
            // Handed to the device under the lock: a later leader's barrier then covers them
            // too, and `discard` never drops a page a leader is still copying.
            let r = match write(&ranges) {
                Err(e) => Err(e),
                Ok(()) => {
                    drop(st);
                    let t0 = std::time::Instant::now();
                    let r = sync(&ranges);
                    let ns = t0.elapsed().as_nanos() as u64;
                    self.last_sync_ns.store(ns, Ordering::Relaxed);
                    let mean = self.sync_mean_ns.load(Ordering::Relaxed);
                    let mean = if mean == 0 { ns } else { (mean * 7 + ns) / 8 };
                    self.sync_mean_ns.store(mean, Ordering::Relaxed);
                    st = self.state.lock();
                    st.sync_ns += ns;
                    r
                }
            };
            st.in_flight -= 1;
            match r {
                Ok(()) => {
                    st.finished.insert(n, target);
                    loop {
                        let next = st.completed;
                        let Some(t) = st.finished.remove(&next) else {
                            break;
                        };
                        if t > st.synced {
                            // The writers of these tickets come back for their next barrier.
                            st.returning += t - st.synced;
                            st.synced = t;
                        }
                        st.completed += 1;
                    }
                }
                Err(e) => st.failed = Some(e.to_string()),
            }
            self.publish(&st);
            self.done.notify_all();
        }
    }

    fn wait_for_arrivals(&self) {
        let bound = COMMIT_WINDOW_NS_MAX.min(self.last_sync_ns.load(Ordering::Relaxed) / 2);
        let t0 = std::time::Instant::now();
        let mut i = 0u32;
        while self.arriving.load(Ordering::Acquire) > 0 && (t0.elapsed().as_nanos() as u64) < bound
        {
            if i < FOLLOWER_SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            i += 1;
        }
    }
}

struct FileRegion {
    path: PathBuf,
    map: Mapping,
    file: std::fs::File,
    /// The same file opened with `O_DIRECT` (the `Write` back end's log, when the file
    /// system takes it): the leader writes whole pages through it.
    direct: Option<std::fs::File>,
    how: How,
    sync: bool,
    /// Opened by a read-only storage: a private mapping whose stores never reach the file.
    read_only: bool,
    group: Group,
}

/// `ranges` (sorted by start) widened to whole pages, clipped to `len`, overlapping and
/// adjacent ones merged.
fn page_runs(ranges: &[(usize, usize)], len: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &(lo, hi) in ranges {
        let hi = hi.min(len);
        if lo >= hi {
            continue;
        }
        let (lo, hi) = (
            lo / PAGE_BYTES * PAGE_BYTES,
            hi.div_ceil(PAGE_BYTES) * PAGE_BYTES,
        );
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

impl FileRegion {
    /// The leader's hand-off, under the group's lock: the pwrite back end writes each range of
    /// the group from the private mapping into the file (one `pwrite` per run of adjacent
    /// entries); the msync back end has nothing to hand off (the mapping is the page cache).
    fn write_ranges(&self, ranges: &[(usize, usize)]) -> std::io::Result<()> {
        if self.how != How::Pwrite {
            return Ok(());
        }
        use std::os::unix::fs::FileExt;
        if let Some(direct) = &self.direct {
            for (lo, hi) in page_runs(ranges, self.map.len) {
                // SAFETY: [lo, hi) is page-aligned and inside the page-aligned mapping. The
                // pages hold the flushed words (stored before their flush) and possibly words
                // other writers are storing now: those are unflushed, and a torn or early
                // copy of them is what a crash may leave anyway (an entry carries its own
                // check; its writer's own barrier writes it again).
                let bytes = unsafe { std::slice::from_raw_parts(self.map.ptr.add(lo), hi - lo) };
                direct.write_all_at(bytes, lo as u64).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("pwrite (O_DIRECT): {e}"))
                })?;
            }
            return Ok(());
        }
        for &(lo, hi) in ranges {
            let hi = hi.min(self.map.len);
            if lo >= hi {
                continue;
            }
            // SAFETY: [lo, hi) lies inside the mapping; the writers stored these words
            // (atomically) before their flush and store no more to them before their fence.
            let bytes = unsafe { std::slice::from_raw_parts(self.map.ptr.add(lo), hi - lo) };
            self.file
                .write_all_at(bytes, lo as u64)
                .map_err(|e| std::io::Error::new(e.kind(), format!("pwrite: {e}")))?;
        }
        Ok(())
    }

    /// The leader's barrier, lock released.
    fn sync_ranges(&self, ranges: &[(usize, usize)]) -> std::io::Result<()> {
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
            // Everything written to the file before this call, the group's ranges and every
            // earlier leader's, becomes durable with one fdatasync.
            How::Pwrite => self.file.sync_data(),
            How::Clwb => Ok(()),
        }
    }

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
                    .fence(
                        &|r| self.write_ranges(r),
                        &|r| self.sync_ranges(r),
                        announced,
                    )
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

    fn reserve(&self, off: usize, len: usize) -> Result<()> {
        use std::os::unix::io::AsRawFd;
        if self.read_only {
            return Ok(());
        }
        let start = off / PAGE_BYTES * PAGE_BYTES;
        let end = (off + len).div_ceil(PAGE_BYTES) * PAGE_BYTES;
        let end = end.min(self.map.len);
        if end <= start {
            return Ok(());
        }
        // posix_fallocate allocates without changing the length (the file already has its
        // full length) and, where the file system cannot fallocate, glibc writes a zero into
        // every block that reads as a hole, which keeps what is there.
        // SAFETY: a descriptor this region owns; the range lies inside the file.
        let rc = unsafe {
            libc::posix_fallocate(
                self.file.as_raw_fd(),
                start as libc::off_t,
                (end - start) as libc::off_t,
            )
        };
        if rc != 0 {
            return Err(Error::io(
                "fallocate",
                &self.path,
                std::io::Error::from_raw_os_error(rc),
            ));
        }
        Ok(())
    }

    fn flush(&self, off: usize, len: usize) {
        if !self.sync || len == 0 {
            return;
        }
        match self.how {
            How::Msync | How::Pwrite => self.group.flush(off, len),
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

    fn sync_all(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        if self.sync {
            return self.fence_as(false);
        }
        // Barriers are off (durability off, or tmpfs): the mapping is shared (`Pwrite` needs
        // `sync`), so the stores are in the file's pages, and `fdatasync` writes them back
        // (on a DAX mapping it also writes back the CPU caches of the dirty ranges).
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn syncs(&self) -> u64 {
        self.group.state.lock().syncs
    }

    fn sync_profile(&self) -> (u64, u64, u64) {
        let st = self.group.state.lock();
        (st.covered, st.sync_ns, st.pages)
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

    /// `lseek(SEEK_DATA)` then `lseek(SEEK_HOLE)`: the file system's own record of which
    /// blocks hold data (ext4 and tmpfs also count a page-cache page of an unwritten extent as
    /// data). Offsets are positional results; the file position they move is never used (all
    /// I/O here is `pread`/`pwrite`). Where the calls fail other than with `ENXIO` (no data
    /// past `off`), or a file system reports the whole file as data, everything is a run.
    fn data_run(&self, off: usize) -> Option<(usize, usize)> {
        use std::os::unix::io::AsRawFd;
        let len = self.map.len;
        if off >= len {
            return None;
        }
        let fd = self.file.as_raw_fd();
        // SAFETY: lseek on a descriptor this region owns; the result is checked.
        let lo = unsafe { libc::lseek(fd, off as libc::off_t, libc::SEEK_DATA) };
        if lo < 0 {
            let e = std::io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::ENXIO) {
                None
            } else {
                Some((off, len))
            };
        }
        let lo = (lo as usize).max(off);
        if lo >= len {
            return None;
        }
        // SAFETY: as above.
        let hi = unsafe { libc::lseek(fd, lo as libc::off_t, libc::SEEK_HOLE) };
        let hi = if hi < 0 { len } else { (hi as usize).min(len) };
        Some(if hi > lo { (lo, hi) } else { (lo, len) })
    }

    fn discard(&self, off: usize, len: usize) {
        if self.how != How::Pwrite {
            return;
        }
        let lo = off.div_ceil(PAGE_BYTES) * PAGE_BYTES;
        let hi = ((off + len) / PAGE_BYTES * PAGE_BYTES).min(self.map.len);
        if lo >= hi {
            return;
        }
        // Ranges in [lo, hi) that no leader has written yet are written now (the next
        // leader's fdatasync covers them); under the group's lock, so no leader is copying
        // from these pages while they are dropped.
        let mut st = self.group.state.lock();
        let (mine, rest): (Vec<_>, Vec<_>) =
            st.pending.iter().partition(|&&(a, b)| a < hi && b > lo);
        if !mine.is_empty() {
            if let Err(e) = self.write_ranges(&mine) {
                // Every later fence reports it (the region is poisoned).
                st.failed = Some(e.to_string());
                return;
            }
            st.pending = rest;
        }
        // SAFETY: [lo, hi) is page-aligned and inside the private mapping; its contents
        // were written to the file, so dropping the private copy re-reads the same bytes.
        unsafe { libc::madvise(self.map.ptr.add(lo).cast(), hi - lo, libc::MADV_DONTNEED) };
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

const SIM_LOCATION: &str = "<simulated media>";

/// The media image of every region at a simulated crash, by region name.
pub type Image = BTreeMap<String, Vec<u64>>;

/// Which back end the crash simulator models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimModel {
    /// `clwb`/`msync`: any stored, unfenced word may reach the media (cache eviction, page
    /// write-back) or not.
    Mapped,
    /// `Write`: in the log, a stored word reaches the media only once a flush hands its
    /// 4 KiB page to the leader's `O_DIRECT` write (its cache line, with
    /// [`GroupCommit::direct`] off); until the fence completes it may or may not. Levels as
    /// `Mapped`.
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
    group: GroupCommit,
    /// Barriers completing (read) against the crash image being taken (write).
    media: RwLock<()>,
    regions: Mutex<BTreeMap<String, Arc<SimRegion>>>,
    fences: AtomicU64,
    crash_at_fence: AtomicU64,
    /// (fence, writers): that fence's barrier does not complete before `writers` more
    /// barriers of its region are waiting (see [`SimStorage::hold_barrier`]).
    hold: Mutex<Option<(u64, u64)>>,
    /// Times a barrier gives up the CPU before it completes (see [`SimStorage::sync_yields`]).
    yields: AtomicU64,
    /// Microseconds a barrier sleeps before it completes (see [`SimStorage::sync_sleep_us`]).
    sleep_us: AtomicU64,
    rng: Mutex<u64>,
    crashed: AtomicBool,
    image: Mutex<Option<Image>>,
    /// Bytes the simulated file system may still allocate (`None`: unlimited; see
    /// [`SimStorage::limit_space`]).
    space: Mutex<Option<u64>>,
    /// Flushes that covered a page no `reserve` allocated while space was limited: each
    /// would have been a SIGBUS on a full file system.
    unreserved: AtomicU64,
}

struct SimRegion {
    view: Box<[AtomicU64]>,
    shadow: Mutex<Vec<u64>>,
    pending_lines: Mutex<Vec<usize>>,
    /// Barriers go through the file back ends' group commit, so that concurrent writers in
    /// the simulator share syncs exactly as on files (one simulated fence per group).
    group: Group,
    /// Opened as the recovery log (the `Write` model treats it differently).
    log: AtomicBool,
    /// Pages allocated by `reserve` (a region restored from an image is allocated whole).
    reserved: Mutex<Vec<bool>>,
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
        SimStorage::with_group(image, crash_at_fence, seed, model, GroupCommit::default())
    }

    /// As `with_model`, with the group-commit settings `group` for every region.
    pub fn with_group(
        image: Image,
        crash_at_fence: u64,
        seed: u64,
        model: SimModel,
        group: GroupCommit,
    ) -> SimStorage {
        let regions = image
            .into_iter()
            .map(|(name, words)| {
                let view: Box<[AtomicU64]> = words.iter().map(|w| AtomicU64::new(*w)).collect();
                let pages = (words.len() * 8).div_ceil(PAGE_BYTES);
                let region = SimRegion {
                    reserved: Mutex::new(vec![true; pages]),
                    view,
                    shadow: Mutex::new(words),
                    pending_lines: Mutex::new(Vec::new()),
                    group: Group::new(group),
                    log: AtomicBool::new(false),
                };
                (name, Arc::new(region))
            })
            .collect();
        SimStorage {
            shared: Arc::new(SimShared {
                model,
                group,
                media: RwLock::new(()),
                regions: Mutex::new(regions),
                fences: AtomicU64::new(0),
                crash_at_fence: AtomicU64::new(crash_at_fence),
                hold: Mutex::new(None),
                yields: AtomicU64::new(0),
                sleep_us: AtomicU64::new(0),
                rng: Mutex::new(seed ^ 0x9E37_79B9_7F4A_7C15),
                crashed: AtomicBool::new(false),
                image: Mutex::new(None),
                space: Mutex::new(None),
                unreserved: AtomicU64::new(0),
            }),
        }
    }

    /// Limits the bytes that `reserve` may still allocate (`None`: unlimited): a full file
    /// system. While limited, a flush of a page that no `reserve` allocated is counted
    /// ([`SimStorage::unreserved_flushes`]).
    pub fn limit_space(&self, bytes: Option<u64>) {
        *self.shared.space.lock() = bytes;
    }

    /// Bytes `reserve` may still allocate (`None`: unlimited).
    pub fn space_left(&self) -> Option<u64> {
        *self.shared.space.lock()
    }

    /// Flushes of unallocated pages while space was limited (each a SIGBUS on real files).
    pub fn unreserved_flushes(&self) -> u64 {
        self.shared.unreserved.load(Ordering::Acquire)
    }

    /// Moves the crash to fence number `n` (1-based, counted from the start; 0 never).
    pub fn crash_at(&self, n: u64) {
        self.shared.crash_at_fence.store(n, Ordering::Release);
    }

    /// Holds fence number `n` in flight until `writers` more writers wait for a barrier of the
    /// same region: they then form one group, the next barrier. Deterministic group commit
    /// for tests (with one sync in flight at a time; the writers must not wait for a lock the
    /// held fence's caller holds).
    pub fn hold_barrier(&self, n: u64, writers: u64) {
        *self.shared.hold.lock() = Some((n, writers));
    }

    /// Every barrier gives up the CPU `n` times before it completes, as a device flush
    /// would, so that concurrent writers reach the barrier meanwhile and form groups.
    pub fn sync_yields(&self, n: u64) {
        self.shared.yields.store(n, Ordering::Release);
    }

    /// Every barrier sleeps `us` microseconds before it completes, as a slow device flush
    /// would: syncs then take long enough for a gathering group commit
    /// ([`GroupCommit::gather`]) to wait for writers.
    pub fn sync_sleep_us(&self, us: u64) {
        self.shared.sleep_us.store(us, Ordering::Release);
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

    /// Counts a fence and crashes if it is the chosen one; returns its number.
    fn on_fence(&self) -> u64 {
        let n = self.fences.fetch_add(1, Ordering::AcqRel) + 1;
        if n == self.crash_at_fence.load(Ordering::Acquire) && !self.crashed.load(Ordering::Acquire)
        {
            // One instant for every region: no barrier completes while the image is taken,
            // and a writer whose barrier completes after it sees `crashed` already set (it
            // cannot count a write the image lacks as acknowledged).
            let _media = self.media.write();
            self.crashed.store(true, Ordering::Release);
            let image = self.capture();
            *self.image.lock() = Some(image);
        }
        n
    }
}

struct SimHandle {
    shared: Arc<SimShared>,
    region: Arc<SimRegion>,
}

impl SimHandle {
    /// Bytes a flush hands to the media: a cache line, or under the `Write` model a log page
    /// (its leader writes whole pages with `O_DIRECT`, carrying any word stored in them).
    fn granule(&self) -> usize {
        if self.shared.model == SimModel::Write
            && self.shared.group.direct
            && self.region.log.load(Ordering::Acquire)
        {
            PAGE_BYTES
        } else {
            LINE_BYTES
        }
    }
}

impl Storage for SimStorage {
    fn free_bytes(&self) -> Option<u64> {
        self.space_left()
    }

    fn unallocated_bytes(&self, name: &str) -> Result<Option<u64>> {
        Ok(self
            .shared
            .regions
            .lock()
            .get(name)
            .map(|r| r.reserved.lock().iter().filter(|x| !**x).count() as u64 * PAGE_BYTES as u64))
    }

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
                    reserved: Mutex::new(vec![false; len_bytes / PAGE_BYTES]),
                    view: (0..words).map(|_| AtomicU64::new(0)).collect(),
                    shadow: Mutex::new(vec![0; words]),
                    pending_lines: Mutex::new(Vec::new()),
                    group: Group::new(self.shared.group),
                    log: AtomicBool::new(false),
                });
                regions.insert(name.to_string(), r.clone());
                r
            }
        };
        region.log.store(kind.appended(), Ordering::Release);
        Ok(Some(Box::new(SimHandle {
            shared: self.shared.clone(),
            region,
        })))
    }

    fn location(&self) -> PathBuf {
        PathBuf::from(SIM_LOCATION)
    }

    fn list_regions(&self) -> Result<Vec<String>> {
        Ok(self.shared.regions.lock().keys().cloned().collect())
    }

    fn region_len(&self, name: &str) -> Result<Option<u64>> {
        Ok(self
            .shared
            .regions
            .lock()
            .get(name)
            .map(|r| r.view.len() as u64 * 8))
    }

    /// Removal is a metadata operation: it reaches the media at once (the crash image taken
    /// at a later barrier lacks the region).
    fn remove_region(&self, name: &str) -> Result<()> {
        self.shared.regions.lock().remove(name);
        Ok(())
    }

    /// Like removal, a metadata operation that reaches the media at once.
    fn clear_region(&self, name: &str) -> Result<()> {
        let empty = Arc::new(SimRegion {
            reserved: Mutex::new(Vec::new()),
            view: Box::new([]),
            shadow: Mutex::new(Vec::new()),
            pending_lines: Mutex::new(Vec::new()),
            group: Group::new(self.shared.group),
            log: AtomicBool::new(false),
        });
        self.shared.regions.lock().insert(name.to_string(), empty);
        Ok(())
    }
}

impl Persist for SimHandle {
    fn words(&self) -> &[AtomicU64] {
        &self.region.view
    }

    /// Models a file system that reports every page of zeros as a hole (the most any file
    /// system may skip), so the crash tests run recovery's hole skipping over every image.
    fn data_run(&self, off: usize) -> Option<(usize, usize)> {
        let view = &self.region.view;
        let page_words = PAGE_BYTES / 8;
        let zero = |p: usize| {
            view[p * page_words..((p + 1) * page_words).min(view.len())]
                .iter()
                .all(|w| w.load(Ordering::Acquire) == 0)
        };
        let pages = (view.len() * 8).div_ceil(PAGE_BYTES);
        let first = (off / PAGE_BYTES..pages).find(|p| !zero(*p))?;
        let end = (first..pages).find(|p| zero(*p)).unwrap_or(pages);
        Some((
            (first * PAGE_BYTES).max(off),
            (end * PAGE_BYTES).min(view.len() * 8),
        ))
    }

    fn reserve(&self, off: usize, len: usize) -> Result<()> {
        let mut reserved = self.region.reserved.lock();
        let pages = off / PAGE_BYTES..(off + len).div_ceil(PAGE_BYTES).min(reserved.len());
        let missing = reserved[pages.clone()].iter().filter(|r| !**r).count() as u64;
        let mut space = self.shared.space.lock();
        if let Some(left) = space.as_mut() {
            let need = missing * PAGE_BYTES as u64;
            if need > *left {
                return Err(Error::io(
                    "fallocate",
                    SIM_LOCATION,
                    std::io::Error::from_raw_os_error(libc::ENOSPC),
                ));
            }
            *left -= need;
        }
        reserved[pages].iter_mut().for_each(|r| *r = true);
        Ok(())
    }

    fn flush(&self, off: usize, len: usize) {
        if len == 0 {
            return;
        }
        if self.shared.space.lock().is_some() {
            let reserved = self.region.reserved.lock();
            let pages = off / PAGE_BYTES..(off + len).div_ceil(PAGE_BYTES).min(reserved.len());
            if reserved[pages].iter().any(|r| !*r) {
                self.shared.unreserved.fetch_add(1, Ordering::AcqRel);
            }
        }
        let mut pending = self.region.pending_lines.lock();
        let g = self.granule();
        let end = ((off + len).div_ceil(g) * g).min(self.region.view.len() * 8);
        let mut line = off / g * g / LINE_BYTES;
        while line * LINE_BYTES < end {
            pending.push(line);
            line += 1;
        }
        drop(pending);
        self.region.group.flush(off, len);
    }

    fn fence(&self) -> Result<()> {
        // The leader's barrier is the simulated fence. The crash, if it is this fence, happens
        // before the barrier completes: every line flushed and not yet made durable (this
        // group's and any later writer's) may or may not have reached the media.
        let sync = |ranges: &[(usize, usize)]| -> std::io::Result<()> {
            let n = self.shared.on_fence();
            for _ in 0..self.shared.yields.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            let sleep_us = self.shared.sleep_us.load(Ordering::Acquire);
            if sleep_us > 0 {
                std::thread::sleep(std::time::Duration::from_micros(sleep_us));
            }
            let hold = *self.shared.hold.lock();
            if let Some((_, writers)) = hold.filter(|h| h.0 == n) {
                let group = &self.region.group;
                while {
                    let st = group.state.lock();
                    st.drawn - st.taken < writers
                } {
                    std::thread::yield_now();
                }
            }
            let mut lines = Vec::new();
            let g = self.granule();
            for &(lo, hi) in ranges {
                let hi = (hi.div_ceil(g) * g).min(self.region.view.len() * 8);
                lines.extend(lo / g * g / LINE_BYTES..hi.div_ceil(LINE_BYTES));
            }
            let _media = self.shared.media.read();
            let mut shadow = self.region.shadow.lock();
            for &line in &lines {
                let first = line * LINE_BYTES / 8;
                for i in first..(first + LINE_BYTES / 8).min(shadow.len()) {
                    shadow[i] = self.region.view[i].load(Ordering::Acquire);
                }
            }
            drop(shadow);
            lines.sort_unstable();
            self.region
                .pending_lines
                .lock()
                .retain(|l| lines.binary_search(l).is_err());
            Ok(())
        };
        self.region
            .group
            .fence(&|_| Ok(()), &sync, false)
            .map_err(|e| Error::io("simulated fence", Path::new(SIM_LOCATION), e))
    }

    fn syncs(&self) -> u64 {
        self.region.group.state.lock().syncs
    }

    fn sync_profile(&self) -> (u64, u64, u64) {
        let st = self.region.group.state.lock();
        (st.covered, st.sync_ns, st.pages)
    }
}

/// A region plus the counters Plush reports (lines flushed, 256-byte blocks touched, fences).
pub struct Region {
    name: String,
    /// `inner.words()`, taken once: every word access of a lookup indexes it directly.
    words: *const AtomicU64,
    words_len: usize,
    inner: Box<dyn Persist>,
    pub(crate) lines_flushed: AtomicU64,
    pub(crate) blocks_flushed: AtomicU64,
    pub(crate) fences: AtomicU64,
}

// SAFETY: the only non-Send/Sync fields are the pointer and length of `inner.words()`, shared
// atomics owned by `inner` (which is Send + Sync) for as long as `self` lives.
unsafe impl Send for Region {}
// SAFETY: as above; the words are only ever accessed atomically.
unsafe impl Sync for Region {}

impl Region {
    pub(crate) fn new(name: &str, inner: Box<dyn Persist>) -> Region {
        let w = inner.words();
        Region {
            name: name.to_string(),
            words: w.as_ptr(),
            words_len: w.len(),
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

    /// The region's length in words.
    pub(crate) fn len_words(&self) -> usize {
        self.words_len
    }

    /// The region's words.
    #[inline]
    pub(crate) fn words(&self) -> &[AtomicU64] {
        // SAFETY: `inner.words()` returns the same slice for `inner`'s whole life (the
        // `Persist` contract: a mapping or a boxed view that never moves), and `inner` lives
        // as long as `self`.
        unsafe { std::slice::from_raw_parts(self.words, self.words_len) }
    }

    /// Word `i` of the region (panics past the end: callers index from validated geometry).
    #[inline]
    pub(crate) fn word(&self, i: usize) -> &AtomicU64 {
        &self.words()[i]
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

    /// See [`Persist::sync_all`].
    pub(crate) fn sync_all(&self) -> Result<()> {
        self.fences.fetch_add(1, Ordering::Relaxed);
        self.inner.sync_all()
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
    pub(crate) fn sync_profile(&self) -> (u64, u64, u64) {
        self.inner.sync_profile()
    }

    /// See [`Persist::reserve`] (words, not bytes).
    pub(crate) fn reserve_words(&self, first: usize, words: usize) -> Result<()> {
        if words == 0 {
            return Ok(());
        }
        self.inner.reserve(first * 8, words * 8)
    }

    /// See [`Persist::discard`] (words, not bytes).
    pub(crate) fn discard_words(&self, first: usize, words: usize) {
        self.inner.discard(first * 8, words * 8);
    }

    /// See [`Persist::data_run`] (words, not bytes): the first run of words at or after word
    /// `first` and below word `end` that may be non-zero.
    pub(crate) fn data_run_words(&self, first: usize, end: usize) -> Option<(usize, usize)> {
        if first >= end {
            return None;
        }
        let (lo, hi) = self.inner.data_run(first * 8)?;
        let (lo, hi) = ((lo / 8).max(first), hi.div_ceil(8).min(end));
        (lo < hi).then_some((lo, hi))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    type Log = Arc<Mutex<Vec<Vec<(usize, usize)>>>>;

    /// Waits (yielding) until `cond` holds on the group's state: the threads under test move
    /// on their own; the test only observes where they are.
    fn until(g: &Group, cond: impl Fn(&GroupState) -> bool) {
        while !cond(&g.state.lock()) {
            std::thread::yield_now();
        }
    }

    fn writer(g: &Arc<Group>, log: &Log, off: usize) -> std::thread::JoinHandle<()> {
        let (g, log) = (g.clone(), log.clone());
        std::thread::spawn(move || {
            g.flush(off, 32);
            let sync = |r: &[(usize, usize)]| {
                log.lock().push(r.to_vec());
                Ok(())
            };
            g.fence(&|_| Ok(()), &sync, false).unwrap();
        })
    }

    #[test]
    fn direct_writes_cover_whole_pages_merged_and_clipped() {
        assert_eq!(page_runs(&[], 1 << 20), vec![]);
        assert_eq!(page_runs(&[(64, 96)], 1 << 20), vec![(0, 4096)]);
        // Two entries of one page, a third on the next page, a fourth further on.
        assert_eq!(
            page_runs(
                &[(0, 32), (4000, 4128), (4160, 4192), (20_000, 20_032)],
                1 << 20
            ),
            vec![(0, 8192), (16_384, 20_480)]
        );
        // Clipped to the region; an empty range is skipped.
        assert_eq!(
            page_runs(&[(8190, 9000), (9000, 9000)], 8192),
            vec![(4096, 8192)]
        );
    }

    /// Starts a writer that leads the first sync (bytes 0..32) and is held inside it until the
    /// returned sender sends; after its barrier it runs `then`. Returns once the sync began.
    fn leader_held_in_sync(
        g: &Arc<Group>,
        log: &Log,
        then: impl FnOnce(&Group) + Send + 'static,
    ) -> (std::thread::JoinHandle<()>, mpsc::Sender<()>) {
        let (in_sync, wait_in_sync) = mpsc::channel();
        let (release, wait_release) = mpsc::channel::<()>();
        let leader = {
            let (g, log) = (g.clone(), log.clone());
            std::thread::spawn(move || {
                g.flush(0, 32);
                let sync = |r: &[(usize, usize)]| {
                    log.lock().push(r.to_vec());
                    in_sync.send(()).unwrap();
                    wait_release.recv().unwrap();
                    Ok(())
                };
                g.fence(&|_| Ok(()), &sync, false).unwrap();
                then(&g);
            })
        };
        wait_in_sync.recv().unwrap();
        (leader, release)
    }

    #[test]
    fn writers_arriving_during_a_sync_form_the_next_group() {
        let g = Arc::new(Group::new(GroupCommit::default()));
        let log: Log = Arc::default();
        let (leader, release) = leader_held_in_sync(&g, &log, |_| {});
        let followers = [writer(&g, &log, 4096), writer(&g, &log, 4128)];
        until(&g, |st| st.drawn == 3);
        // Both drew their tickets while the first sync was in flight: neither may start one.
        assert_eq!(g.state.lock().syncs, 1);
        release.send(()).unwrap();
        leader.join().unwrap();
        for f in followers {
            f.join().unwrap();
        }
        let st = g.state.lock();
        assert_eq!((st.syncs, st.covered, st.synced), (2, 3, 3));
        // The second leader took both followers' ranges (adjacent ones merged) in one pass.
        assert_eq!(*log.lock(), vec![vec![(0, 32)], vec![(4096, 4160)]]);
    }

    #[test]
    fn a_later_sync_that_returns_first_releases_nobody_before_the_earlier_one() {
        let g = Arc::new(Group::new(GroupCommit {
            window: false,
            syncs_in_flight_max: 2,
            direct: false,
            gather: false,
        }));
        let log: Log = Arc::default();
        let (first, release) = leader_held_in_sync(&g, &log, |_| {});
        // A second leader starts its own sync while the first is in flight, and it returns.
        let second = writer(&g, &log, 8192);
        until(&g, |st| st.finished.len() == 1);
        {
            let st = g.state.lock();
            assert_eq!((st.syncs, st.synced, st.completed), (2, 0, 0));
        }
        release.send(()).unwrap();
        first.join().unwrap();
        second.join().unwrap();
        let st = g.state.lock();
        assert_eq!((st.synced, st.completed, st.in_flight), (2, 2, 0));
        assert!(st.finished.is_empty());
    }

    /// Slow syncs, gathering on: the writers that a sync released are waited for, so the
    /// next sync covers them with the writers that queued meanwhile (instead of the two
    /// halves alternating). The time bound is lifted so that the test does not race it.
    #[test]
    fn a_gathering_leader_waits_for_the_writers_the_last_sync_released() {
        let mut g = Group::new(GroupCommit {
            window: false,
            syncs_in_flight_max: 4,
            direct: false,
            gather: true,
        });
        g.gather_ns_max = u64::MAX / 4;
        g.sync_mean_ns.store(u64::MAX / 4, Ordering::Relaxed);
        let g = Arc::new(g);
        let log: Log = Arc::default();
        let (again, wait_again) = mpsc::channel::<()>();
        let (first, release) = leader_held_in_sync(&g, &log, move |g| {
            // Its next barrier comes later, as the writer's next upsert would.
            wait_again.recv().unwrap();
            g.flush(64, 32);
            g.fence(&|_| Ok(()), &|_| Ok(()), false).unwrap();
        });
        // Slow syncs: one in flight, so these two wait although slots are free.
        let followers = [writer(&g, &log, 4096), writer(&g, &log, 4128)];
        until(&g, |st| st.drawn == 3);
        assert_eq!(g.state.lock().syncs, 1);
        release.send(()).unwrap();
        // A follower leads and gathers: it waits for the released writer.
        until(&g, |st| st.gathering && st.returning == 1);
        assert_eq!(g.state.lock().syncs, 1);
        again.send(()).unwrap();
        first.join().unwrap();
        for f in followers {
            f.join().unwrap();
        }
        let st = g.state.lock();
        assert_eq!((st.syncs, st.covered, st.synced), (2, 4, 4));
        assert_eq!(st.gather_timeouts, 0);
        assert_eq!(log.lock()[1], vec![(64, 96), (4096, 4160)]);
    }

    #[test]
    fn a_failed_sync_fails_every_later_barrier() {
        let g = Group::new(GroupCommit::default());
        g.flush(0, 8);
        let bad = |_: &[(usize, usize)]| Err(std::io::Error::other("device gone"));
        assert!(g.fence(&|_| Ok(()), &bad, false).is_err());
        g.flush(8, 8);
        let e = g.fence(&|_| Ok(()), &|_| Ok(()), false).unwrap_err();
        assert!(e.to_string().contains("device gone"), "{e}");
    }

    /// A log region on tmpfs with `elide_tmpfs_syncs` on: no pwrite, no sync, and the stores
    /// are in the file at once (the log is mapped shared); off, the same region syncs. Where
    /// the machine has no tmpfs at /dev/shm, nothing to check.
    #[test]
    fn tmpfs_barriers_are_skipped_and_the_stores_are_in_the_file() {
        let Ok(dir) = tempfile::tempdir_in("/dev/shm") else {
            return;
        };
        if !on_tmpfs(&std::fs::File::open(dir.path()).unwrap()) {
            return;
        }
        for elide in [true, false] {
            let storage = FileStorage::new(dir.path(), Backend::Write, true)
                .unwrap()
                .elide_tmpfs_syncs(elide);
            let name = format!("log-{elide}");
            let r = storage
                .open_region(&name, 2 * PAGE_BYTES, true, RegionKind::Log)
                .unwrap()
                .unwrap();
            r.words()[3].store(0x1234_5678_9abc_def0, Ordering::Release);
            r.flush(24, 8);
            r.fence().unwrap();
            assert_eq!(r.syncs(), u64::from(!elide), "elide {elide}");
            let bytes = std::fs::read(dir.path().join(&name)).unwrap();
            assert_eq!(bytes[24..32], 0x1234_5678_9abc_def0u64.to_le_bytes());
        }
    }

    #[test]
    fn discarding_log_pages_first_writes_what_no_leader_wrote_yet() {
        let dir = tempfile::tempdir().unwrap();
        let storage = FileStorage::new(dir.path(), Backend::Write, true).unwrap();
        let r = storage
            .open_region("log", 3 * PAGE_BYTES, true, RegionKind::Log)
            .unwrap()
            .unwrap();
        for i in 0..PAGE_BYTES / 8 {
            r.words()[PAGE_BYTES / 8 + i].store(i as u64 + 1, Ordering::Release);
        }
        // Queued, not written: only a leader (or the discard) writes the group's ranges.
        r.flush(PAGE_BYTES, PAGE_BYTES);
        r.discard(PAGE_BYTES, PAGE_BYTES);
        for i in 0..PAGE_BYTES / 8 {
            assert_eq!(
                r.words()[PAGE_BYTES / 8 + i].load(Ordering::Acquire),
                i as u64 + 1
            );
        }
        r.fence().unwrap();
        assert_eq!(r.syncs(), 1);
    }
}
