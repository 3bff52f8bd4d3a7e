//! [`DeviceEnv`]: the engine on a simulated SSD. File contents live in an inner [`Env`] (normally
//! a [`super::MemEnv`]); every byte that would reach the device is mapped onto device extents and
//! served by an [`attune_io::ssd::Ssd`], so a run reports honest device time, flash pages
//! programmed and the I/O trace the rule checker reads.
//!
//! The model of the operating system between the engine and the device (docs/ssd-profile.md,
//! "Attune on the simulated SSD"):
//! - **Writes** go through a page cache with writeback: `append`/`flush` only dirty the cache;
//!   whenever a whole `write_bytes` piece (at a file offset that is a multiple of `write_bytes`)
//!   is dirty it is written to the device, and `sync` (or closing the file) writes the dirty tail
//!   rounded out to whole 4 KiB OS pages (so a later sync rewrites the partly filled last page, as
//!   Linux does).
//! - **Allocation** is delayed to writeback, as ext4/xfs do: a file's next extent is taken from a
//!   bump pointer when its bytes are first written back. [`DeviceLayout`] sets the alignment of
//!   extents and how much each reserves. The file-system default (4 KiB blocks, exactly what is
//!   needed) interleaves files that are written back at the same time; a tuned layout reserves
//!   stripe-aligned, stripe-multiple extents.
//! - **Flash programming**: a device write is charged for every flash page it touches
//!   ([`attune_io::check::pages_touched`]), because a partial page is programmed whole; the SSD
//!   model then buffers and programs that many bytes. The same count is reported as "flash pages
//!   written" beside the minimum (the bytes written rounded up to pages).
//! - **Reads** bypass any page cache (the engine's block cache is the only cache) and are
//!   synchronous: the caller waits for the device. `prefetch` hints issue asynchronous device
//!   reads into a bounded buffer of prefetched 4 KiB device blocks; a later read whose blocks
//!   are all there waits only until they arrive. A [`DevicePrefetcher`] (readahead, TinFetch)
//!   sees every demand read's device address, as a block-layer prefetcher would, and may issue
//!   more prefetches.
//! - **Time**: one simulated clock. Every I/O of every thread is submitted at the clock and the
//!   caller waits for its completion (prefetches excepted), so the clock is the device time of the
//!   whole run with the CPU taken as free. `now_micros` returns it, so the engine's own timers
//!   (slow-read detection) see device time.
//!
//! Thread safety: all device state sits behind one mutex; the inner environment does its own
//! locking. Deterministic for a single-threaded caller (background threads interleave their I/O
//! with the caller's in scheduling order).

use super::{Env, FileLock, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use attune_io::check::{pages_touched, TraceIo};
use attune_io::prefetch::{Access, PrefetchRange, Prefetcher};
use attune_io::ssd::{IoRequest, Ssd, SsdParams};
use attune_workload::trace::IoKind;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The operating system's page (writeback and sync granularity).
pub const OS_PAGE_BYTES: u64 = 4096;
/// [`DeviceLayout::compaction_readahead_bytes`] reads ahead at least this much: the largest
/// request of the table iterator's own read-ahead, so the tuned read-ahead holds no more
/// memory than the default's largest request, only shaped to the device.
const COMPACTION_READAHEAD_MIN_BYTES: u64 = 1 << 20;
/// Prefetched device blocks are tracked in units of this.
const BLOCK: u64 = 4096;

/// Where files go on the device and how they are written back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLayout {
    /// Device offset alignment of every extent (a multiple of 4096).
    pub align_bytes: u64,
    /// Extents reserve a multiple of this many bytes (a multiple of 4096).
    pub extent_bytes: u64,
    /// Writeback issues dirty data in pieces of this size at file offsets that are multiples of
    /// it; also the largest device write (a multiple of 4096).
    pub write_bytes: u64,
}

impl Default for DeviceLayout {
    /// What a file system does untold: 4 KiB blocks, allocated as needed, and 128 KiB writeback
    /// requests (Linux's default `max_sectors_kb`).
    fn default() -> Self {
        Self {
            align_bytes: OS_PAGE_BYTES,
            extent_bytes: OS_PAGE_BYTES,
            write_bytes: 128 << 10,
        }
    }
}

impl DeviceLayout {
    /// The layout a device profile asks for: extents aligned to the stripe (or, without one, the
    /// chunk, then the flash page) and reserved in 1 MiB multiples of it; writeback in pieces
    /// of the desirable write size, raised to a multiple of the alignment. Parameters the
    /// profile did not find are left at the file-system default.
    pub fn from_learned(l: &attune_io::profile::Learned) -> Self {
        let d = Self::default();
        let found = [l.stripe.value, l.chunk.value, l.page.value]
            .into_iter()
            .flatten()
            .map(u64::from)
            .find(|&v| v >= OS_PAGE_BYTES && v % OS_PAGE_BYTES == 0);
        let align = found.unwrap_or(d.align_bytes);
        let write = l
            .desirable_write
            .value
            .map(u64::from)
            .filter(|&v| v >= OS_PAGE_BYTES)
            .unwrap_or(d.write_bytes)
            .max(align)
            .div_ceil(align)
            * align;
        Self {
            align_bytes: align,
            extent_bytes: match found {
                Some(a) => (1u64 << 20).div_ceil(a) * a,
                None => d.extent_bytes,
            },
            write_bytes: write,
        }
    }

    /// Sets the engine sizes a device profile asks for, beyond where files go (the options
    /// `block_size` and `target_file_size`, passed apart: the env layer sits below the options):
    /// the table block size becomes the flash page (when one was found between 4 KiB and 64 KiB: a block
    /// then spans at most two pages, and larger blocks compress better and index fewer
    /// entries), and table files are cut at a multiple of this layout's alignment (so a
    /// compaction's output fills whole stripes). Options the profile says nothing about are
    /// left as they are. Returns what it changed, for reports.
    pub fn tune_sizes(
        &self,
        l: &attune_io::profile::Learned,
        block_size: &mut usize,
        target_file_size: &mut u64,
    ) -> Vec<String> {
        let mut changed = Vec::new();
        if let Some(page) = l
            .page
            .value
            .map(|p| p as usize)
            .filter(|&p| (4096..=65536).contains(&p))
        {
            if *block_size != page {
                changed.push(format!("block_size {block_size} -> {page}"));
                *block_size = page;
            }
        }
        let t = target_file_size.div_ceil(self.align_bytes) * self.align_bytes;
        if t != *target_file_size {
            changed.push(format!("target_file_size {target_file_size} -> {t}"));
            *target_file_size = t;
        }
        changed
    }

    /// The table block size of one block per learned chunk, at most 64 KiB: the lever
    /// `tune_sizes` does not pull. A larger block indexes fewer entries and gives the
    /// compressor longer runs, so a fill writes fewer bytes, but a point read that misses the
    /// block cache reads the whole block. Capped at 64 KiB because a 128 KiB block (the
    /// 128 KiB-chunk device) halved fillrandom and cut readrandom to 0.37x on the simulated
    /// SSD. `None` when no chunk of at least 4 KiB was learned.
    pub fn chunk_block_size(l: &attune_io::profile::Learned) -> Option<usize> {
        l.chunk
            .value
            .map(|c| (c as usize).min(65_536))
            .filter(|&c| c >= 4096)
    }

    /// The read-ahead of a compaction's input tables (`Options::compaction_readahead_bytes`):
    /// the smallest whole number of learned stripes (else chunks, else flash pages: the unit
    /// the layout aligns files to) that reaches 1 MiB, the largest request the table
    /// iterator's own read-ahead makes. Each request then starts on a stripe boundary (tables
    /// start on one under [`DeviceLayout::from_learned`]) and spans every chip of its stripes
    /// in parallel, and one request is always in flight ahead of the merge. `None` when the
    /// profile found none of the three.
    pub fn compaction_readahead_bytes(l: &attune_io::profile::Learned) -> Option<u64> {
        let unit = [l.stripe.value, l.chunk.value, l.page.value]
            .into_iter()
            .flatten()
            .map(u64::from)
            .find(|&v| v >= OS_PAGE_BYTES && v % OS_PAGE_BYTES == 0)?;
        Some(COMPACTION_READAHEAD_MIN_BYTES.div_ceil(unit) * unit)
    }

    /// Checks the three sizes; the error names the one that is wrong.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("align_bytes", self.align_bytes),
            ("extent_bytes", self.extent_bytes),
            ("write_bytes", self.write_bytes),
        ] {
            if v == 0 || v % OS_PAGE_BYTES != 0 || v > 1 << 30 {
                return Err(Error::InvalidArgument(format!(
                    "device layout {name} {v}: must be a positive multiple of 4096 up to 1 GiB"
                )));
            }
        }
        Ok(())
    }
}

/// The kinds of engine file whose device writes are counted apart (by file name:
/// `NNNNNN.log`, `NNNNNN.sst`, `NNNNNN.vlog`, `MANIFEST-NNNNNN`, anything else).
pub const FILE_KINDS: [&str; 5] = ["wal", "table", "vlog", "manifest", "other"];

/// The index into [`FILE_KINDS`] of a file's name.
pub fn file_kind(path: &Path) -> usize {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(".log") {
        0
    } else if name.ends_with(".sst") {
        1
    } else if name.ends_with(".vlog") {
        2
    } else if name.starts_with("MANIFEST-") {
        3
    } else {
        4
    }
}

/// Device writes of one kind of file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindWrites {
    /// Device write requests and the bytes they carried.
    pub writes: u64,
    pub write_bytes: u64,
    /// Flash pages the writes programmed, and the least those bytes need.
    pub flash_pages: u64,
    pub min_flash_pages: u64,
}

/// Counters of a [`DeviceEnv`] run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceStats {
    /// The simulated clock, nanoseconds.
    pub clock_ns: u64,
    /// Device write requests and the bytes they carried.
    pub writes: u64,
    pub write_bytes: u64,
    /// Flash pages the writes programmed (every page a write touches).
    pub flash_pages: u64,
    /// The least pages those bytes need (bytes rounded up to pages, per write).
    pub min_flash_pages: u64,
    /// Demand device reads and their bytes.
    pub reads: u64,
    pub read_bytes: u64,
    /// Prefetch device reads and their bytes.
    pub prefetches: u64,
    pub prefetch_bytes: u64,
    /// Demand reads served wholly from prefetched blocks, and how many of those still waited.
    pub prefetch_hits: u64,
    pub prefetch_late: u64,
    /// The writes split by kind of file, in the order of [`FILE_KINDS`].
    pub by_kind: [KindWrites; 5],
    /// Prefetched bytes a demand read used (each 4 KiB block counted once); the rest of
    /// `prefetch_bytes` was wasted, or is still waiting in the buffer.
    pub prefetch_used_bytes: u64,
    /// What the clock is made of, nanoseconds: advanced by device writes (host transfer and
    /// waits for the device's write buffer), by those of them that waited for the buffer
    /// (`stall_ns` is part of `write_ns`), by demand reads, and by demand reads that waited
    /// only for prefetched blocks. `write_ns + read_ns + prefetch_wait_ns == clock_ns`.
    pub write_ns: u64,
    pub stall_ns: u64,
    pub read_ns: u64,
    pub prefetch_wait_ns: u64,
    /// The part of `read_ns + prefetch_wait_ns` whose slowest device read touched a chip in a
    /// garbage-collection period, and how many demand reads that was.
    pub gc_wait_ns: u64,
    pub gc_waits: u64,
}

impl DeviceStats {
    /// Flash pages written over the minimum.
    pub fn write_amplification(&self) -> f64 {
        if self.min_flash_pages == 0 {
            1.0
        } else {
            self.flash_pages as f64 / self.min_flash_pages as f64
        }
    }
}

/// A device-level prefetcher: sees demand reads by device address (see the module docs).
pub type DevicePrefetcher = Box<dyn Prefetcher>;

#[derive(Default)]
struct FileMap {
    /// (file offset, device offset, length), sorted, covering `[0, mapped)`.
    extents: Vec<(u64, u64, u64)>,
    mapped: u64,
}

impl FileMap {
    /// Device pieces of `[off, off + len)` that are mapped.
    fn pieces(&self, off: u64, len: u64, out: &mut Vec<(u64, u64)>) {
        let end = off + len;
        let start = self.extents.partition_point(|e| e.0 + e.2 <= off);
        for &(fo, dev, l) in &self.extents[start..] {
            if fo >= end {
                break;
            }
            let a = off.max(fo);
            let b = end.min(fo + l);
            if a < b {
                out.push((dev + (a - fo), b - a));
            }
        }
    }
}

struct Device {
    ssd: Ssd,
    layout: DeviceLayout,
    page: u64,
    clock: u64,
    bump: u64,
    files: HashMap<PathBuf, FileMap>,
    /// Prefetched device block -> (arrival time, used by a demand read, its read touched a
    /// chip in a garbage-collection period); FIFO-bounded.
    buffer: HashMap<u64, (u64, bool, bool)>,
    order: VecDeque<u64>,
    buffer_blocks: usize,
    prefetcher: Option<DevicePrefetcher>,
    fetched_since: u64,
    stats: DeviceStats,
    trace: Option<Vec<TraceIo>>,
    /// File numbers of the trace.
    names: HashMap<PathBuf, u32>,
}

impl Device {
    fn file(&mut self, path: &Path) -> &mut FileMap {
        self.files.entry(path.to_path_buf()).or_default()
    }

    /// Maps the file up to `end`, allocating as the layout says.
    fn map_to(&mut self, path: &Path, end: u64) {
        let lay = self.layout;
        let mapped = self.file(path).mapped;
        if end <= mapped {
            return;
        }
        let len = (end - mapped).div_ceil(lay.extent_bytes) * lay.extent_bytes;
        let dev = self.bump.div_ceil(lay.align_bytes) * lay.align_bytes;
        self.bump = dev + len;
        let f = self.file(path);
        match f.extents.last_mut() {
            Some(last) if last.1 + last.2 == dev && last.0 + last.2 == mapped => last.2 += len,
            _ => f.extents.push((mapped, dev, len)),
        }
        f.mapped = mapped + len;
    }

    /// Writes file bytes `[a, b)` (already in the inner env) to the device.
    fn write(&mut self, path: &Path, a: u64, b: u64) {
        if a >= b {
            return;
        }
        self.map_to(path, b);
        let mut pieces = Vec::new();
        self.files[path].pieces(a, b - a, &mut pieces);
        for (dev, len) in pieces {
            let mut pos = dev;
            while pos < dev + len {
                let n = (dev + len - pos).min(self.layout.write_bytes);
                self.write_device(path, pos, n);
                pos += n;
            }
        }
    }

    fn write_device(&mut self, path: &Path, dev: u64, len: u64) {
        let pages = pages_touched(dev, len, self.page);
        let first = dev / self.page * self.page;
        let c = self.ssd.submit(IoRequest {
            time_ns: self.clock,
            offset: first,
            size: u32::try_from(pages * self.page).unwrap_or(u32::MAX),
            kind: IoKind::Write,
        });
        let waited = c.finish_ns.saturating_sub(self.clock);
        self.stats.write_ns += waited;
        if c.stalled {
            self.stats.stall_ns += waited;
        }
        self.clock = self.clock.max(c.finish_ns);
        self.stats.writes += 1;
        self.stats.write_bytes += len;
        self.stats.flash_pages += pages;
        self.stats.min_flash_pages += len.div_ceil(self.page);
        let k = &mut self.stats.by_kind[file_kind(path)];
        k.writes += 1;
        k.write_bytes += len;
        k.flash_pages += pages;
        k.min_flash_pages += len.div_ceil(self.page);
        // Rewritten blocks are no longer what was prefetched.
        for blk in dev / BLOCK..(dev + len).div_ceil(BLOCK) {
            self.buffer.remove(&blk);
        }
        self.record(path, dev, len, true);
    }

    fn record(&mut self, path: &Path, dev: u64, len: u64, write: bool) {
        if self.trace.is_none() {
            return;
        }
        let next = self.names.len() as u32 + 1;
        let file = *self.names.entry(path.to_path_buf()).or_insert(next);
        if let Some(t) = &mut self.trace {
            t.push(TraceIo {
                write,
                offset: dev,
                size: len,
                file,
            });
        }
    }

    /// Submits a device read at the clock: (completion time, whether it touched a chip in a
    /// garbage-collection period).
    fn submit_read(&mut self, dev: u64, len: u64) -> (u64, bool) {
        let c = self.ssd.submit(IoRequest {
            time_ns: self.clock,
            offset: dev,
            size: u32::try_from(len).unwrap_or(u32::MAX),
            kind: IoKind::Read,
        });
        (c.finish_ns, c.gc_pages > 0)
    }

    /// A demand read of file bytes `[off, off + len)`: waits for the device.
    fn read(&mut self, path: &Path, off: u64, len: u64) {
        let mut pieces = Vec::new();
        if let Some(f) = self.files.get(path) {
            f.pieces(off, len, &mut pieces);
        }
        let start = self.clock;
        let mut done = start;
        // Whether a demand read went to the device, and whether the slowest wait touched a
        // chip in a garbage-collection period.
        let (mut demand, mut done_gc) = (false, false);
        for (dev, n) in pieces {
            let (b0, b1) = (dev / BLOCK, (dev + n).div_ceil(BLOCK));
            let blocks = b1 - b0;
            let ready = (b0..b1)
                .map(|b| self.buffer.get(&b).map(|e| (e.0, e.2)))
                .try_fold((0u64, false), |m, r| {
                    r.map(|r| if r.0 > m.0 { r } else { m })
                });
            let mut a = Access {
                time_ns: start,
                offset: dev,
                size: n,
                write: false,
                blocks,
                fetched_prev_blocks: std::mem::take(&mut self.fetched_since),
                ..Access::default()
            };
            match ready {
                Some((r, gc)) => {
                    self.stats.prefetch_hits += 1;
                    for b in b0..b1 {
                        if let Some(e) = self.buffer.get_mut(&b) {
                            if !e.1 {
                                e.1 = true;
                                self.stats.prefetch_used_bytes += BLOCK;
                            }
                        }
                    }
                    a.hit_blocks = blocks;
                    a.useful_blocks = blocks;
                    if r > start {
                        self.stats.prefetch_late += 1;
                        a.late_blocks = blocks;
                    }
                    if r > done {
                        (done, done_gc) = (r, gc);
                    }
                }
                None => {
                    self.stats.reads += 1;
                    self.stats.read_bytes += n;
                    demand = true;
                    let (r, gc) = self.submit_read(dev, n);
                    if r > done {
                        (done, done_gc) = (r, gc);
                    }
                    self.record(path, dev, n, false);
                }
            }
            if let Some(mut p) = self.prefetcher.take() {
                let mut out: Vec<PrefetchRange> = Vec::new();
                p.access(&a, &mut out);
                self.prefetcher = Some(p);
                for r in out {
                    self.prefetch_device(r.offset, r.len);
                }
            }
        }
        let waited = done.saturating_sub(self.clock);
        if demand {
            self.stats.read_ns += waited;
        } else {
            self.stats.prefetch_wait_ns += waited;
        }
        if done_gc && waited > 0 {
            self.stats.gc_wait_ns += waited;
            self.stats.gc_waits += 1;
        }
        self.clock = self.clock.max(done);
    }

    /// Starts reading device bytes `[dev, dev + len)` into the prefetch buffer (blocks already
    /// there are not read again).
    fn prefetch_device(&mut self, dev: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (b0, b1) = (dev / BLOCK, (dev + len).div_ceil(BLOCK));
        let mut b = b0;
        while b < b1 {
            if self.buffer.contains_key(&b) {
                b += 1;
                continue;
            }
            let mut e = b;
            while e < b1 && !self.buffer.contains_key(&e) {
                e += 1;
            }
            let (finish, gc) = self.submit_read(b * BLOCK, (e - b) * BLOCK);
            self.stats.prefetches += 1;
            self.stats.prefetch_bytes += (e - b) * BLOCK;
            self.fetched_since += e - b;
            for blk in b..e {
                self.buffer.insert(blk, (finish, false, gc));
                self.order.push_back(blk);
            }
            while self.order.len() > self.buffer_blocks {
                if let Some(old) = self.order.pop_front() {
                    self.buffer.remove(&old);
                }
            }
            b = e;
        }
    }

    fn prefetch_file(&mut self, path: &Path, off: u64, len: u64) {
        let mut pieces = Vec::new();
        if let Some(f) = self.files.get(path) {
            f.pieces(off, len, &mut pieces);
        }
        for (dev, n) in pieces {
            self.prefetch_device(dev, n);
        }
    }
}

/// An [`Env`] whose files live on a simulated SSD (see the module documentation).
pub struct DeviceEnv {
    inner: Arc<dyn Env>,
    dev: Arc<Mutex<Device>>,
}

impl DeviceEnv {
    /// Files in `inner`, timing by a fresh `Ssd::new(params, seed)`, placed by `layout`.
    pub fn new(
        inner: Arc<dyn Env>,
        params: SsdParams,
        seed: u64,
        layout: DeviceLayout,
    ) -> Result<Self> {
        layout.validate()?;
        let page = u64::from(params.page_bytes);
        let ssd = Ssd::new(params, seed)
            .map_err(|e| Error::InvalidArgument(format!("simulated SSD: {e}")))?;
        Ok(Self {
            inner,
            dev: Arc::new(Mutex::new(Device {
                ssd,
                layout,
                page,
                clock: 0,
                bump: 0,
                files: HashMap::new(),
                buffer: HashMap::new(),
                order: VecDeque::new(),
                buffer_blocks: (64 << 20) / BLOCK as usize,
                prefetcher: None,
                fetched_since: 0,
                stats: DeviceStats::default(),
                trace: None,
                names: HashMap::new(),
            })),
        })
    }

    /// Installs (or removes) the block-level prefetcher.
    pub fn set_prefetcher(&self, p: Option<DevicePrefetcher>) {
        self.dev.lock().prefetcher = p;
    }

    /// Bounds the prefetch buffer (default 64 MiB).
    pub fn set_prefetch_buffer_bytes(&self, bytes: u64) {
        self.dev.lock().buffer_blocks = (bytes / BLOCK).max(1) as usize;
    }

    /// Starts (or stops and returns) recording every device I/O.
    pub fn set_recording(&self, on: bool) -> Vec<TraceIo> {
        let mut d = self.dev.lock();
        let old = d.trace.take().unwrap_or_default();
        if on {
            d.trace = Some(Vec::new());
        }
        old
    }

    /// Counters so far.
    pub fn stats(&self) -> DeviceStats {
        let d = self.dev.lock();
        DeviceStats {
            clock_ns: d.clock,
            ..d.stats
        }
    }

    /// The SSD's own counters (flushes, garbage collections, stalls).
    pub fn ssd_stats(&self) -> attune_io::ssd::SsdStats {
        self.dev.lock().ssd.stats()
    }

    /// The layout in use.
    pub fn layout(&self) -> DeviceLayout {
        self.dev.lock().layout
    }

    /// The device extents of `path`: (file offset, device offset, length).
    pub fn extents(&self, path: &Path) -> Vec<(u64, u64, u64)> {
        self.dev
            .lock()
            .files
            .get(path)
            .map(|f| f.extents.clone())
            .unwrap_or_default()
    }

    fn writable(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        let start = inner.len();
        Box::new(DeviceWritable {
            inner,
            path: path.to_path_buf(),
            dev: Arc::clone(&self.dev),
            // An appendable file continues after its last whole OS page.
            clean: start / OS_PAGE_BYTES * OS_PAGE_BYTES,
            written: start,
        })
    }
}

struct DeviceWritable {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    dev: Arc<Mutex<Device>>,
    /// File bytes before this are on the device (a multiple of the OS page).
    clean: u64,
    /// File bytes before this have reached the device (the last page may be partial).
    written: u64,
}

impl DeviceWritable {
    /// Writes back every whole `write_bytes` piece that is dirty.
    fn writeback(&mut self) {
        let len = self.inner.len();
        let mut d = self.dev.lock();
        let w = d.layout.write_bytes;
        let upto = len / w * w;
        if upto > self.clean {
            d.write(&self.path, self.clean, upto);
            self.clean = upto;
            self.written = self.written.max(upto);
        }
    }

    /// Writes back everything dirty, the last partial OS page included.
    fn write_tail(&mut self) {
        let len = self.inner.len();
        let mut d = self.dev.lock();
        if len > self.written {
            let w = d.layout.write_bytes;
            // Pieces end at multiples of write_bytes, then the page-rounded tail.
            let end = len.div_ceil(OS_PAGE_BYTES) * OS_PAGE_BYTES;
            let mut a = self.clean;
            while a < end {
                let b = ((a / w + 1) * w).min(end);
                d.write(&self.path, a, b);
                a = b;
            }
            self.clean = len / OS_PAGE_BYTES * OS_PAGE_BYTES;
            self.written = len;
        }
    }
}

impl WritableFile for DeviceWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()?;
        self.writeback();
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        self.inner.sync()?;
        self.writeback();
        self.write_tail();
        Ok(())
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl Drop for DeviceWritable {
    fn drop(&mut self) {
        // Closing a file leaves its dirty pages to writeback: they reach the device.
        self.writeback();
        self.write_tail();
    }
}

struct DeviceReadable {
    inner: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    dev: Arc<Mutex<Device>>,
}

impl RandomAccessFile for DeviceReadable {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_exact_at(buf, offset)?;
        self.dev.lock().read(&self.path, offset, buf.len() as u64);
        Ok(())
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn prefetch(&self, offset: u64, len: u64) {
        // The page cache reads ahead only up to the end of the file, not into the rest of its
        // extent (a tuned layout reserves whole MiBs).
        let len = len.min(self.inner.size().saturating_sub(offset));
        self.dev.lock().prefetch_file(&self.path, offset, len);
    }
    fn read_exact_at_probed(&self, buf: &mut [u8], offset: u64) -> Result<Option<bool>> {
        self.read_exact_at(buf, offset)?;
        Ok(Some(false))
    }
    fn resident_bytes(&self, _offset: u64, _len: u64) -> Option<u64> {
        // Reads bypass any page cache here: every byte comes from the device.
        Some(0)
    }
}

impl Env for DeviceEnv {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let f = self.inner.new_writable(path)?;
        // A new file (or a truncated one) starts unmapped.
        self.dev.lock().files.remove(path);
        Ok(self.writable(path, f))
    }
    fn new_appendable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let f = self.inner.new_appendable(path)?;
        Ok(self.writable(path, f))
    }
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(DeviceReadable {
            inner: self.inner.open_random(path)?,
            path: path.to_path_buf(),
            dev: Arc::clone(&self.dev),
        }))
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let v = self.inner.read_all(path)?;
        let mut d = self.dev.lock();
        let w = d.layout.write_bytes;
        let mut a = 0u64;
        while a < v.len() as u64 {
            let n = w.min(v.len() as u64 - a);
            d.read(path, a, n);
            a += n;
        }
        Ok(v)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list_dir(dir)
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        self.inner.remove_file(path)?;
        // The blocks are trimmed; the bump allocator does not reuse them.
        self.dev.lock().files.remove(path);
        Ok(())
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)?;
        let mut d = self.dev.lock();
        if let Some(f) = d.files.remove(from) {
            d.files.insert(to.to_path_buf(), f);
        }
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
    fn lock_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock_shared(path)
    }
    fn now_micros(&self) -> u64 {
        self.dev.lock().clock / 1000
    }
    fn now_unix_millis(&self) -> u64 {
        self.inner.now_unix_millis()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::env::MemEnv;

    fn params() -> SsdParams {
        SsdParams {
            chunk_bytes: 64 << 10,
            page_bytes: 16 << 10,
            stripe_chips: 4,
            ..SsdParams::default()
        }
    }

    fn env(layout: DeviceLayout) -> DeviceEnv {
        DeviceEnv::new(Arc::new(MemEnv::new()), params(), 1, layout).unwrap()
    }

    fn tuned() -> DeviceLayout {
        DeviceLayout {
            align_bytes: 256 << 10,
            extent_bytes: 1 << 20,
            write_bytes: 256 << 10,
        }
    }

    #[test]
    fn writeback_pieces_and_sync_tail() {
        let e = env(DeviceLayout::default());
        e.create_dir_all(Path::new("/d")).unwrap();
        let p = Path::new("/d/f");
        let mut f = e.new_writable(p).unwrap();
        f.append(&vec![7u8; 300 << 10]).unwrap();
        f.flush().unwrap();
        // Two whole 128 KiB pieces written back, 44 KiB still dirty.
        let s = e.stats();
        assert_eq!((s.writes, s.write_bytes), (2, 256 << 10));
        f.append(&[1u8; 100]).unwrap();
        f.sync().unwrap();
        let s = e.stats();
        // The tail: 44 KiB + 100 B rounded out to 48 KiB.
        assert_eq!((s.writes, s.write_bytes), (3, (256 + 48) << 10));
        // Sync again after 10 more bytes: the last partial page is written again.
        f.append(&[2u8; 10]).unwrap();
        f.sync().unwrap();
        assert_eq!(e.stats().write_bytes, (256 + 48 + 4) << 10);
        drop(f);
        assert_eq!(e.stats().writes, 4);
        assert!(e.stats().clock_ns > 0);
    }

    #[test]
    fn interleaved_files_are_fragmented_by_default_and_aligned_when_tuned() {
        for (layout, aligned) in [(DeviceLayout::default(), false), (tuned(), true)] {
            let e = env(layout);
            e.create_dir_all(Path::new("/d")).unwrap();
            let mut a = e.new_writable(Path::new("/d/a")).unwrap();
            let mut b = e.new_writable(Path::new("/d/b")).unwrap();
            b.append(&[1u8; 4096]).unwrap();
            b.sync().unwrap();
            for _ in 0..8 {
                a.append(&vec![0u8; 256 << 10]).unwrap();
                a.flush().unwrap();
                b.append(&[1u8; 4096]).unwrap();
                b.sync().unwrap();
            }
            drop((a, b));
            let ext = e.extents(Path::new("/d/a"));
            let all_aligned = ext.iter().all(|&(_, dev, _)| dev % (256 << 10) == 0);
            assert_eq!(all_aligned, aligned, "{layout:?}: {ext:?}");
            let s = e.stats();
            if aligned {
                // The big file's writes are whole stripes: every page is full except b's.
                assert_eq!(s.flash_pages - s.min_flash_pages, 0);
            } else {
                assert!(s.flash_pages > s.min_flash_pages);
            }
        }
    }

    #[test]
    fn reads_wait_and_prefetched_reads_are_served_from_the_buffer() {
        let e = env(tuned());
        e.create_dir_all(Path::new("/d")).unwrap();
        let p = Path::new("/d/f");
        let mut f = e.new_writable(p).unwrap();
        f.append(&vec![3u8; 1 << 20]).unwrap();
        f.sync().unwrap();
        drop(f);
        let r = e.open_random(p).unwrap();
        let mut buf = vec![0u8; 4096];
        let t0 = e.stats().clock_ns;
        r.read_exact_at(&mut buf, 8192).unwrap();
        let t1 = e.stats().clock_ns;
        assert!(t1 > t0);
        assert_eq!(e.stats().reads, 1);
        r.prefetch(65536, 65536);
        assert_eq!(e.stats().prefetches, 1);
        r.read_exact_at(&mut buf, 65536 + 4096).unwrap();
        let s = e.stats();
        assert_eq!((s.reads, s.prefetch_hits), (1, 1));
        assert_eq!(buf, vec![3u8; 4096]);
    }

    #[test]
    fn writes_are_counted_per_kind_of_file() {
        let e = env(DeviceLayout::default());
        e.create_dir_all(Path::new("/d")).unwrap();
        for (name, bytes) in [
            ("000001.log", 10_000usize),
            ("000002.sst", 200_000),
            ("MANIFEST-000003", 100),
        ] {
            let mut f = e.new_writable(&Path::new("/d").join(name)).unwrap();
            f.append(&vec![1u8; bytes]).unwrap();
            f.sync().unwrap();
        }
        let s = e.stats();
        let k = s.by_kind;
        assert_eq!(FILE_KINDS[file_kind(Path::new("/d/000009.vlog"))], "vlog");
        assert_eq!((k[0].write_bytes, k[1].write_bytes), (12 << 10, 196 << 10));
        assert_eq!((k[2].writes, k[3].writes, k[4].writes), (0, 1, 0));
        let sum = |f: fn(&KindWrites) -> u64| k.iter().map(f).sum::<u64>();
        assert_eq!(sum(|k| k.writes), s.writes);
        assert_eq!(sum(|k| k.flash_pages), s.flash_pages);
        assert_eq!(sum(|k| k.min_flash_pages), s.min_flash_pages);
    }

    #[test]
    fn options_from_profile_set_block_and_file_sizes() {
        use attune_io::profile::{Finding, Learned};
        let f = |v: Option<u32>| Finding {
            value: v,
            confidence: 1.0,
            reason: String::new(),
        };
        let l = Learned {
            desirable_write: f(Some(256 << 10)),
            stripe: f(Some(256 << 10)),
            chunk: f(Some(64 << 10)),
            page: f(Some(16 << 10)),
            hot_offset: f(Some(32 << 10)),
        };
        let (mut block, mut target) = (4096usize, 3u64 << 20 | 4096);
        let changed = tuned().tune_sizes(&l, &mut block, &mut target);
        assert_eq!(block, 16 << 10);
        assert_eq!(target, (3 << 20) + (256 << 10));
        assert_eq!(changed.len(), 2, "{changed:?}");
        assert_eq!(DeviceLayout::chunk_block_size(&l), Some(64 << 10));
        // Nothing learned: nothing changes.
        let none = Learned {
            desirable_write: f(None),
            stripe: f(None),
            chunk: f(None),
            page: f(None),
            hot_offset: f(None),
        };
        let (mut block, mut target) = (4096usize, 64u64 << 20);
        assert!(DeviceLayout::default()
            .tune_sizes(&none, &mut block, &mut target)
            .is_empty());
        assert_eq!((block, target), (4096, 64 << 20));
        assert_eq!(DeviceLayout::chunk_block_size(&none), None);
        let huge = Learned {
            chunk: f(Some(1 << 20)),
            ..none
        };
        assert_eq!(DeviceLayout::chunk_block_size(&huge), Some(64 << 10));
        let tiny = Learned {
            chunk: f(Some(2048)),
            ..huge
        };
        assert_eq!(DeviceLayout::chunk_block_size(&tiny), None);
        // Compaction read-ahead: whole learned stripes reaching 1 MiB, else chunks, else pages.
        let ra = |stripe: Option<u32>, chunk: Option<u32>, page: Option<u32>| {
            DeviceLayout::compaction_readahead_bytes(&Learned {
                desirable_write: f(None),
                stripe: f(stripe),
                chunk: f(chunk),
                page: f(page),
                hot_offset: f(None),
            })
        };
        assert_eq!(DeviceLayout::compaction_readahead_bytes(&l), Some(1 << 20));
        assert_eq!(
            ra(Some(384 << 10), Some(64 << 10), None),
            Some(3 * (384 << 10))
        );
        assert_eq!(ra(None, Some(1 << 20), None), Some(1 << 20));
        assert_eq!(ra(Some(2 << 20), None, None), Some(2 << 20));
        assert_eq!(ra(None, None, Some(16 << 10)), Some(1 << 20));
        assert_eq!(ra(None, None, None), None);
        assert_eq!(ra(None, Some(2048), None), None);
    }

    #[test]
    fn layout_from_profile_and_bad_layouts() {
        use attune_io::profile::{Finding, Learned};
        let f = |v: Option<u32>| Finding {
            value: v,
            confidence: 1.0,
            reason: String::new(),
        };
        let l = Learned {
            desirable_write: f(Some(256 << 10)),
            stripe: f(Some(256 << 10)),
            chunk: f(Some(64 << 10)),
            page: f(Some(16 << 10)),
            hot_offset: f(Some(32 << 10)),
        };
        assert_eq!(DeviceLayout::from_learned(&l), tuned());
        let none = Learned {
            desirable_write: f(None),
            stripe: f(None),
            chunk: f(None),
            page: f(None),
            hot_offset: f(None),
        };
        assert_eq!(DeviceLayout::from_learned(&none), DeviceLayout::default());
        let bad = DeviceLayout {
            write_bytes: 1000,
            ..DeviceLayout::default()
        };
        let err = DeviceEnv::new(Arc::new(MemEnv::new()), params(), 1, bad)
            .err()
            .unwrap();
        assert!(err.to_string().contains("write_bytes"), "{err}");
    }
}
