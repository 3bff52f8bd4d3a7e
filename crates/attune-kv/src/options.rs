//! Options. The names are the same everywhere: Rust fields, Python keywords of `attune.DB`, CLI flags
//! and `attune bench --engines attune:KEY=VALUE` strings ([`Options::set`] parses them).
//! Defaults follow RocksDB's where a RocksDB user would expect them, so side-by-side runs compare
//! like with like.

use crate::error::{Error, Result};
use crate::merge::MergeOperator;
use std::sync::Arc;

/// Block compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "no" | "off" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(Error::InvalidArgument(format!(
                "unknown compression {s:?}; valid: none, lz4, zstd"
            ))),
        }
    }
}

/// Where the compressed tier of the cache lives (docs/symbiosis.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheLayout {
    /// user/kernel: buffered (or memory-mapped) reads; the OS page cache holds compressed blocks
    /// in whatever part of `memory_budget` the block cache leaves free (a cgroup `memory.max`
    /// enforces the total). Today's read path.
    Kernel,
    /// user/user: an in-process compressed block cache plus `O_DIRECT` reads; the budget is split
    /// exactly between the two caches.
    User,
}

impl CacheLayout {
    pub fn name(self) -> &'static str {
        match self {
            CacheLayout::Kernel => "kernel",
            CacheLayout::User => "user",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "kernel" => Ok(CacheLayout::Kernel),
            "user" => Ok(CacheLayout::User),
            _ => Err(Error::InvalidArgument(format!(
                "unknown cache_layout {s:?}; valid: user, kernel"
            ))),
        }
    }
}

/// Replacement policy of the uncompressed block cache (option `block_cache_policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockCachePolicy {
    /// Least recently used (sharded, one budget): the default and the only policy adaptive
    /// sizing can predict.
    Lru,
    /// S3-FIFO (small FIFO, main FIFO with 2-bit frequency reinsertion, ghost): scan-resistant
    /// (`crate::cache::s3fifo`, docs/symbiosis.md "S3-FIFO in the engine").
    S3Fifo,
}

impl BlockCachePolicy {
    pub fn name(self) -> &'static str {
        match self {
            BlockCachePolicy::Lru => "lru",
            BlockCachePolicy::S3Fifo => "s3fifo",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "lru" => Ok(BlockCachePolicy::Lru),
            "s3fifo" | "s3-fifo" => Ok(BlockCachePolicy::S3Fifo),
            _ => Err(Error::InvalidArgument(format!(
                "unknown block_cache_policy {s:?}; valid: lru, s3fifo"
            ))),
        }
    }
}

/// How the uncompressed block cache (M_a) is sized inside the cache budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheSizing {
    /// Symbiosis: ghost simulation picks M_a online.
    Adaptive,
    /// A fixed M_a in bytes; the compressed tier gets the rest of the budget.
    Static(u64),
}

impl CacheSizing {
    pub fn describe(self) -> String {
        match self {
            CacheSizing::Adaptive => "adaptive".to_string(),
            CacheSizing::Static(b) => b.to_string(),
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        if s.eq_ignore_ascii_case("adaptive") {
            return Ok(CacheSizing::Adaptive);
        }
        parse_size(s).map(CacheSizing::Static).map_err(|_| {
            Error::InvalidArgument(format!(
                "cache_sizing {s:?}: expected adaptive or a size such as 64MiB"
            ))
        })
    }
}

/// Per-miss costs the cache-sizing controller uses (C_a, C_k in docs/symbiosis.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CacheMissCosts {
    /// Measured at open with a probe file in the database directory (real file systems only;
    /// other environments use [`CACHE_MISS_COSTS_FALLBACK`]).
    Auto,
    /// Given: (C_a, C_k) in nanoseconds.
    Fixed(f64, f64),
}

/// C_a and C_k (ns) used when costs cannot be measured: the Symbiosis paper's HW1 figures
/// (3 µs decompress + kernel crossing, 16 µs device read on Optane).
pub const CACHE_MISS_COSTS_FALLBACK: (f64, f64) = (3_000.0, 16_000.0);

impl CacheMissCosts {
    pub fn describe(self) -> String {
        match self {
            CacheMissCosts::Auto => "auto".to_string(),
            CacheMissCosts::Fixed(a, k) => format!("{a}:{k}"),
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(CacheMissCosts::Auto);
        }
        let bad = || {
            Error::InvalidArgument(format!(
                "cache_miss_costs {s:?}: expected auto or C_A_NS:C_K_NS such as 3000:16000"
            ))
        };
        let (a, k) = s.split_once(':').ok_or_else(bad)?;
        let a: f64 = a.trim().parse().map_err(|_| bad())?;
        let k: f64 = k.trim().parse().map_err(|_| bad())?;
        if !(a.is_finite() && k.is_finite() && a > 0.0 && k > 0.0) {
            return Err(bad());
        }
        Ok(CacheMissCosts::Fixed(a, k))
    }
}

/// How many bytes of tables may be memory-mapped for reading at once (option
/// `mmap_reads_limit`; docs/kv.md "Reads through a mapping or pread").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmapLimit {
    /// Half the memory the process may use (its cgroup's `memory.max`, else physical memory),
    /// read at open; none when the database's tables at open already exceed that (see
    /// `DB::open`).
    Auto,
    /// At most this many bytes.
    Bytes(u64),
    /// No limit: every table is mapped (LevelDB's behaviour).
    Unlimited,
}

impl MmapLimit {
    pub fn name(self) -> String {
        match self {
            MmapLimit::Auto => "auto".into(),
            MmapLimit::Bytes(b) => b.to_string(),
            MmapLimit::Unlimited => "unlimited".into(),
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(MmapLimit::Auto),
            "unlimited" | "none" => Ok(MmapLimit::Unlimited),
            _ => parse_size(s).map(MmapLimit::Bytes).map_err(|_| {
                Error::InvalidArgument(format!(
                    "bad mmap_reads_limit {s:?}; valid: auto, unlimited, or a size such as 512MiB"
                ))
            }),
        }
    }
    /// The limit in bytes (`Auto` resolved against `memory`, the process's memory limit).
    pub fn bytes(self, memory: Option<u64>) -> u64 {
        match self {
            MmapLimit::Auto => memory.map_or(u64::MAX, |m| m / 2),
            MmapLimit::Bytes(b) => b,
            MmapLimit::Unlimited => u64::MAX,
        }
    }
}

/// The engine's read-ahead of separated values during scans (option `prefetcher`;
/// docs/tinfetch.md "In the engine").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefetcher {
    /// No read-ahead of values.
    Off,
    /// Once a forward scan's value reads go to the device, hint the next `blob_prefetch_depth`
    /// values, one hint per value (the default; WiscKey's parallel range-query reads).
    Fixed,
    /// TinFetch in the engine: the values a scan will probably read (how far, from the lengths
    /// of recent scans) are hinted from the first read on, near ones merged into one read; the
    /// value reads no hint covered feed the TinFetch block prefetcher (readahead for runs, the
    /// network of `prefetch_model` for other streams, paused while its prefetches go unused).
    TinFetch,
}

impl Prefetcher {
    pub fn name(self) -> &'static str {
        match self {
            Prefetcher::Off => "off",
            Prefetcher::Fixed => "fixed",
            Prefetcher::TinFetch => "tinfetch",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "off" | "none" => Ok(Prefetcher::Off),
            "fixed" => Ok(Prefetcher::Fixed),
            "tinfetch" => Ok(Prefetcher::TinFetch),
            _ => Err(Error::InvalidArgument(format!(
                "unknown prefetcher {s:?}; valid: off, fixed, tinfetch"
            ))),
        }
    }
}

/// Switches of `prefetcher = tinfetch`'s parts (Rust only; every one on by default). The
/// benchmark turns them off one at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefetchSwitches {
    /// Hint as far as recent scan lengths say a scan probably reads (off: the fixed depth).
    pub history: bool,
    /// Merge hinted values that sit near each other in a segment into one read (off: one
    /// hint per value).
    pub merge: bool,
    /// Feed the value reads no hint covered to the TinFetch block prefetcher (off: hints only).
    pub block_streams: bool,
    /// Pause the block prefetcher's network while its prefetches go unused (TinFetch's
    /// adaptive aggressiveness; off: never paused).
    pub throttle: bool,
    /// Pause all of the block prefetcher's reads (its readahead as well as its network) while
    /// fewer than a quarter of the blocks it fetched are read, backing off up to 1024 reads
    /// (off: readahead is never paused).
    pub block_throttle: bool,
    /// Skip the prefetch system call for ranges already in the page cache (asked with `mincore`
    /// on mapped segments; files that cannot tell are always hinted). Off: every range is
    /// hinted.
    pub skip_resident: bool,
    /// At most 32 values hinted ahead of a scan's position (off, the default: as far as the
    /// history says, up to 128).
    pub cap_hints: bool,
    /// At a seek, read the value the seek landed on before the first hints go out, so that the
    /// demand read does not queue behind them (off, the default: the hints go out first,
    /// beside it).
    pub first_read_first: bool,
}

impl Default for PrefetchSwitches {
    fn default() -> Self {
        Self {
            history: true,
            merge: true,
            block_streams: true,
            throttle: true,
            block_throttle: true,
            skip_resident: true,
            cap_hints: false,
            first_read_first: false,
        }
    }
}

/// How the cost-benefit analyzer estimates a model's benefit (option `learned_benefit`).
pub use attune_learn::Benefit as LearnedBenefit;

/// Whether and how tables get learned indexes (Bourbon; docs/learned-index.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LearnedIndex {
    /// No models: every lookup searches the index block (the baseline path).
    Off,
    /// The cost-benefit analyzer chooses which tables to learn.
    Analyzer,
    /// Every table that outlives the wait is learned.
    Always,
    /// No background learning: only [`crate::DB::learn_all`] learns (Bourbon's "offline"
    /// learning: learn once after loading, leave tables written later on the baseline path).
    /// Persisted models are still loaded.
    Offline,
}

impl LearnedIndex {
    pub fn name(self) -> &'static str {
        match self {
            LearnedIndex::Off => "off",
            LearnedIndex::Analyzer => "analyzer",
            LearnedIndex::Always => "always",
            LearnedIndex::Offline => "offline",
        }
    }
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "off" | "none" | "false" | "0" => Ok(LearnedIndex::Off),
            "analyzer" | "on" | "true" | "1" => Ok(LearnedIndex::Analyzer),
            "always" => Ok(LearnedIndex::Always),
            "offline" => Ok(LearnedIndex::Offline),
            _ => Err(Error::InvalidArgument(format!(
                "unknown learned_index {s:?}; valid: off, analyzer, always, offline"
            ))),
        }
    }
}

/// What a [`CompactionFilter`] decides for an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterDecision {
    /// Keep the entry as it is.
    Keep,
    /// The key reads as deleted from now on (older versions stay hidden).
    Remove,
    /// Store this value instead, inline in the table (never moved to the value log), with the
    /// entry's sequence and expiry.
    Change(Vec<u8>),
}

/// A user hook into compaction, as RocksDB's `CompactionFilter`: drop or rewrite entries while
/// they are merged anyway (expired sessions, stale cache entries, values to shrink).
///
/// Compaction calls it on the newest version of a key among its inputs when no snapshot can see
/// that entry (it was written after every snapshot that existed when the compaction began), for
/// values of every kind (a separated value is read from
/// the value log for it). It is never called for deletions, nor for expired entries (compaction
/// drops those on its own), and it runs on the compaction thread: it must be fast and must not
/// call back into the database. An entry is filtered when a compaction reaches it, so a
/// decision is not immediate: reads see the entry until then.
pub trait CompactionFilter: Send + Sync {
    /// A name for logs and errors.
    fn name(&self) -> &str;
    /// Decides for one entry; `level` is the level the compaction writes to.
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> FilterDecision;
}

impl std::fmt::Debug for dyn CompactionFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompactionFilter({})", self.name())
    }
}

/// Options given at open.
#[derive(Clone, Debug)]
pub struct Options {
    /// Create the database if the directory has none. Default true.
    pub create_if_missing: bool,
    /// Fail if a database already exists. Default false.
    pub error_if_exists: bool,
    /// One budget for memtables plus block cache, in bytes. When set (non-zero) it overrides
    /// `write_buffer_size` and `block_cache_size`: a quarter goes to each of the two memtables
    /// (active + immutable, capped at 64 MiB each) and the rest (the cache budget) to the block
    /// cache and its compressed tier as `cache_layout` and `cache_sizing` say. Default 0 (off).
    pub memory_budget: u64,
    /// Where the compressed tier lives (needs `memory_budget`). Default kernel: the page cache,
    /// today's read path.
    pub cache_layout: CacheLayout,
    /// How the block cache is sized inside the cache budget. `None` (default): adaptive when
    /// `memory_budget` is set, else the fixed `block_cache_size` with no controller at all, so
    /// that a database opened without a budget behaves exactly as one without adaptive sizing.
    pub cache_sizing: Option<CacheSizing>,
    /// Miss costs for adaptive sizing. Default auto (measured at open).
    pub cache_miss_costs: CacheMissCosts,
    /// Key-space sampling of the ghost simulation: one group of 32 blocks in this many. Default 64
    /// (the paper's R = 1/64 at 1 GiB); small budgets need denser sampling (docs/symbiosis.md).
    pub cache_sample_inv: u32,
    /// Kernel layout under a cgroup memory limit: the page cache's room is measured (the limit
    /// less the process's anonymous memory outside the block cache, re-read every second) rather
    /// than assumed to be the limit less `memory_budget` (which counts the memtables as full).
    /// Default true; false is the budget-based model (which the kernel-layout sweep used).
    pub cache_room_measured: bool,
    /// Kernel layout, adaptive sizing: start the block cache at the whole cache budget instead
    /// of the minimum when the tables found at open fit the page cache's room at that split
    /// (a split that then dominates every other; the round at open still runs). Default true;
    /// false starts at the minimum, as the paper does.
    pub cache_start_prior: bool,
    /// Bytes a memtable may hold before it is switched and flushed. Default 64 MiB (RocksDB's).
    pub write_buffer_size: u64,
    /// Capacity of the uncompressed block cache in bytes; resizable online. Default 32 MiB.
    pub block_cache_size: u64,
    /// Replacement policy of the uncompressed block cache: `lru` (default: the behaviour
    /// before this option, and what adaptive `cache_sizing` predicts) or `s3fifo`
    /// (scan-resistant). The compressed cache stays LRU.
    pub block_cache_policy: BlockCachePolicy,
    /// Target uncompressed size of a data block. Default 4 KiB (RocksDB's).
    pub block_size: usize,
    /// Bloom filter bits per key; 0 disables filters. Default 10 (about 1% false positives).
    pub bloom_bits_per_key: u32,
    /// Block compression. Default LZ4.
    pub compression: Compression,
    /// Zstd level when `compression` is Zstd (set with another compression it is refused: it
    /// would do nothing). Default 3 (zstd's own default).
    pub zstd_level: i32,
    /// Number of L0 files that triggers an L0→L1 compaction. Default 4.
    pub l0_compaction_trigger: usize,
    /// Number of L0 files at which each write is delayed by 1 ms. Default 20.
    pub l0_slowdown_writes_trigger: usize,
    /// Number of L0 files at which writes wait for compaction. Default 36.
    pub l0_stop_writes_trigger: usize,
    /// Target size of L1; each deeper level is `level_size_multiplier` times larger. 256 MiB.
    pub max_bytes_for_level_base: u64,
    /// Size ratio between adjacent levels. Default 10.
    pub level_size_multiplier: u64,
    /// Target size of one compaction output file. Default 64 MiB.
    pub target_file_size: u64,
    /// Read-ahead of a compaction's input tables, in bytes: when above 0, each input table is
    /// read ahead from its first block in requests of exactly this size at file offsets that
    /// are multiples of it, one request ahead of the block being merged (a device profile sets
    /// it to whole stripes: `DeviceLayout::compaction_readahead_bytes`). Default 0: the table
    /// iterator's own read-ahead (64 KiB from the third block, doubling to 1 MiB), the
    /// behaviour before this option.
    pub compaction_readahead_bytes: u64,
    /// Intra-L0 compaction: when an L0 compaction is due and the L1 files it would merge hold
    /// at least half as many bytes as L0 (so an L0→L1 would largely rewrite L1), merge the L0
    /// files into one L0 file instead, as long as L0 stays within twice
    /// `max_bytes_for_level_base`; the next L0→L1 then moves more data per byte of L1 it
    /// rewrites. Default on (docs/kv.md "Intra-L0 compaction" has the measurement); `false`
    /// always compacts L0 into L1.
    pub l0_intra_compaction: bool,
    /// What `close` does with a compaction that is running: `true` (default) lets it finish and
    /// installs its output, so a process that closes soon after a burst of writes (a CLI verb, a
    /// short script, a benchmark phase) does not throw away work the next open would redo;
    /// `false` stops it at once (RocksDB's and LevelDB's behaviour), so `close` never waits
    /// longer than one block of merging. Only the running compaction is finished, never the
    /// ones still to be picked.
    pub finish_compaction_on_close: bool,
    /// Nice increment (0..=19) of the compaction, value-log GC and learning threads over the
    /// process's own priority (Linux: `setpriority` on each thread; elsewhere ignored). On a
    /// machine with fewer free cores than runnable threads, background merging otherwise takes
    /// an equal share of the CPU from the threads serving reads (RocksDB's
    /// `LowerThreadPoolCPUPriority`). The flush and WAL-sync threads keep the process's
    /// priority: writers wait for a flush. Default 0 (off): lowering compaction moves its
    /// debt into later work rather than removing it (docs/kv.md "Background priority").
    pub background_nice: u32,
    /// Interval of background WAL fsync for writes made with sync=false, in ms; 0 never syncs in the
    /// background (the OS writes back on its own). Default 1000.
    pub wal_sync_interval_ms: u64,
    /// How often, in ms, the compaction thread looks for tables of level 1 and below whose
    /// earliest expiring entry has passed and rewrites them where they are, dropping the expired
    /// entries (and their value-log records become garbage), although no level is over its size
    /// and nothing is written: RocksDB's TTL / periodic compaction. 0 turns it off (expired
    /// entries then go when a compaction reaches them, or at `compact()`). Default 10000.
    pub expiry_compaction_interval_ms: u64,
    /// Verify every table file's blocks at open. Default false.
    pub paranoid_checks: bool,
    /// Open for reading only: nothing in the directory is written, created or removed (the
    /// write-ahead log is replayed into memory, not into a table), no background thread runs,
    /// and every change fails with `Error::ReadOnly`. Any number of read-only opens may share a
    /// database (a shared lock); a writable open excludes them. This is how a full disk or a
    /// read-only mount is read, and how several processes read one database. Default false.
    pub read_only: bool,
    /// Open as a secondary instance beside a live writer (another process, or none): no lock
    /// is taken, nothing is written, and [`DB::try_catch_up`](crate::DB::try_catch_up) follows
    /// the writer's manifest and write-ahead log. Implies `read_only`. Default false.
    pub secondary: bool,
    /// Read tables through a read-only memory mapping instead of `pread` (LevelDB's default on
    /// 64-bit systems): a block read that hits the page cache costs a copy, not a system call.
    /// Default true.
    pub mmap_reads: bool,
    /// With `mmap_reads`, how many table bytes may be mapped at once; tables opened beyond it
    /// are read with `pread`. Default `auto`: half the memory the process may use.
    pub mmap_reads_limit: MmapLimit,
    /// Tables read with `pread` because mapping them would pass `mmap_reads_limit` leave their
    /// uncompressed blocks to the page cache instead of also copying them into the block cache
    /// (which then keeps compressed blocks): such tables exist only when the data outgrows the
    /// memory, and a block held twice halves what fits. Ignored with `memory_budget` (the
    /// adaptive sizing models both tiers). Default true; false caches them as RocksDB does.
    pub uncompressed_to_page_cache: bool,
    /// Write the WAL and value-log segments through a shared memory map of space reserved with
    /// `fallocate` (Linux): an append is a memory copy, not a `write` system call, so a write
    /// group costs no system call. Same durability as `write` (the pages are the file's: they
    /// survive a process crash; fsync makes them durable). Default true; ignored where the file
    /// system cannot reserve space.
    pub mmap_logs: bool,
    /// Separate large values into the value log (WiscKey; RocksDB's `enable_blob_files`).
    /// Default true.
    pub enable_blob_files: bool,
    /// Values of at least this many bytes go to the value log; smaller ones stay in the LSM tree.
    /// Default 1 KiB (see docs/vlog.md for the measurement behind it).
    pub min_blob_size: u64,
    /// A value-log segment is sealed and a new one started at this size. Default 256 MiB
    /// (RocksDB's `blob_file_size`).
    pub blob_file_size: u64,
    /// The value log's space limit (its bytes over its live bytes): background garbage
    /// collection starts at three quarters of the way to it, and writes slow down past it
    /// while a segment is worth collecting. 0 turns automatic collection off (`DB::gc` still
    /// works). Default 1.5.
    pub blob_gc_space_amp: f64,
    /// Segments with at least this share of garbage are candidates for automatic collection.
    /// Default 0.25.
    pub blob_gc_garbage_ratio: f64,
    /// How many value-log reads a forward scan starts ahead of the record it returns; 0 turns
    /// prefetching off. Default 16.
    pub blob_prefetch_depth: usize,
    /// The read-ahead of separated values during scans: off, fixed (the default: the next
    /// `blob_prefetch_depth` values) or tinfetch ([`Prefetcher`]).
    pub prefetcher: Prefetcher,
    /// A TinFetch weight file (`attune io prefetch train`) for `prefetcher = tinfetch`'s
    /// network; empty (the default): the network is off, hints and readahead still run. Read at
    /// open: a missing or damaged file fails the open, naming it.
    pub prefetch_model: String,
    /// `prefetcher = tinfetch`'s parts, each switchable (Rust only).
    pub prefetch_switches: PrefetchSwitches,
    /// Compaction's table reads and writes and value-log collection's reads go through Data
    /// Pipes (attune-pipes: io_uring or pread/pwrite threads, double-buffered) instead of the
    /// environment's files (docs/data-pipes.md). Only with files of the operating system; an
    /// in-memory environment keeps its own path. Default false.
    pub pipes_bulk_io: bool,
    /// Accepted for compatibility; tables stay open while live files list them (RocksDB's
    /// default, max_open_files = -1). At least [`MAX_OPEN_FILES_MIN`]. Default 1000.
    pub max_open_files: usize,
    /// Learned indexes for tables: off, analyzer (cost-benefit, the default), always, or offline
    /// (only `learn_all` learns).
    pub learned_index: LearnedIndex,
    /// Error bound δ of the learned models, in records. Default 8 (Bourbon's).
    pub learned_delta: u32,
    /// How long a new table waits before it may be learned, in ms (Bourbon's T_wait).
    /// Default 50.
    pub learned_wait_ms: u64,
    /// How the analyzer estimates a model's benefit: `remaining` (the lookups still to come
    /// once the model exists; Attune's default) or `lifetime` (Bourbon's formula: the level's
    /// lookups per file over a whole life). docs/learned-index.md "Analyzer".
    pub learned_benefit: LearnedBenefit,
    /// Scale the analyzer's benefit estimates by how much the models it chose really saved
    /// (measured at retirement, decayed). Default false: raw estimates, as Bourbon judges
    /// them; measured in docs/learned-index.md "Calibration".
    pub learned_calibrate: bool,
    /// Analyzer mode: a table the analyzer skipped is learned once what a model would have
    /// saved on the lookups it served reaches its training cost (rent or buy), so a table
    /// that is read after a write-only load is learned within its first reads rather than
    /// when its age doubles. Default true; false = the estimate alone decides
    /// (docs/learned-index.md "Break-even").
    pub learned_breakeven: bool,
    /// Analyzer mode: a chosen table whose blocks are not in the OS page cache is learned only
    /// when its choice pays for the device reads of the training pass too; otherwise it waits
    /// for break-even with those reads added to its cost (docs/learned-index.md "Learning
    /// cost under a memory limit"). Default true.
    pub learned_io_cost: bool,
    /// Analyzer mode: of the timed lookups (one in 16) of a table that has a model, one in
    /// this many takes the baseline path as a control, so the model's saving is measured
    /// against the table's own warm baseline; 0 turns the control sample off (savings are
    /// then measured against baselines timed before the table was learned). Default 16: one
    /// lookup in 256 of a learned table gives up its model (docs/learned-index.md "The
    /// control sample").
    pub learned_control_sample: u64,
    /// Level learning (read-mostly use): `learn_all` also builds one model per sorted level
    /// with more than one file, which replaces finding the file in the level. A level's model
    /// is dropped when a flush or compaction changes the level; the background learner
    /// (`analyzer`, `always`) builds a new one once the level has been unchanged for
    /// `learned_wait_ms`. Models persist as `LEVEL-N.atlm`. Default false (Bourbon's default:
    /// file learning).
    pub learned_level: bool,
    /// Bytes of the hot-key cache (value bytes of frequently read keys in VIP hash tables in
    /// front of the read path, `cache/hotkeys.rs`); 0 turns it off. Default 0 (off) until a
    /// benchmark shows a win for a workload (docs/vip-hashing.md).
    pub hot_key_cache_bytes: u64,
    /// Called by compaction on the newest version of each key no snapshot needs as it was
    /// (see [`CompactionFilter`]); None (the default) keeps everything. Not settable by name.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// Combines the operands `merge()` writes (see [`MergeOperator`]): by name one of the
    /// built-ins `add`, `append`, `append:<delimiter>`, `max`, or any Rust implementation. The
    /// database records the operator's name at the first open that gives one; a later open
    /// without it uses the recorded built-in, and one with another operator is refused. Default
    /// None: `merge()` is refused.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Option names given to [`Options::set`] (an alias under the spelling used), so that two
    /// spellings of one option with different values, and options that the others make do
    /// nothing, are refused. Not an option. Default empty.
    pub names_set: Vec<&'static str>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            memory_budget: 0,
            cache_layout: CacheLayout::Kernel,
            cache_sizing: None,
            cache_miss_costs: CacheMissCosts::Auto,
            cache_sample_inv: 64,
            cache_room_measured: true,
            cache_start_prior: true,
            write_buffer_size: 64 << 20,
            block_cache_size: 32 << 20,
            block_cache_policy: BlockCachePolicy::Lru,
            block_size: 4096,
            bloom_bits_per_key: 10,
            compression: Compression::Lz4,
            zstd_level: ZSTD_LEVEL_DEFAULT,
            l0_compaction_trigger: 4,
            l0_slowdown_writes_trigger: 20,
            l0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 256 << 20,
            level_size_multiplier: 10,
            target_file_size: 64 << 20,
            compaction_readahead_bytes: 0,
            l0_intra_compaction: true,
            finish_compaction_on_close: true,
            background_nice: 0,
            wal_sync_interval_ms: 1000,
            expiry_compaction_interval_ms: 10_000,
            paranoid_checks: false,
            read_only: false,
            secondary: false,
            mmap_reads: true,
            mmap_reads_limit: MmapLimit::Auto,
            uncompressed_to_page_cache: true,
            mmap_logs: true,
            max_open_files: 1000,
            enable_blob_files: true,
            min_blob_size: 1024,
            blob_file_size: 256 << 20,
            blob_gc_space_amp: 1.5,
            blob_gc_garbage_ratio: 0.25,
            pipes_bulk_io: false,
            blob_prefetch_depth: 16,
            prefetcher: Prefetcher::Fixed,
            prefetch_model: String::new(),
            prefetch_switches: PrefetchSwitches::default(),
            learned_index: LearnedIndex::Analyzer,
            learned_delta: 8,
            learned_wait_ms: 50,
            learned_benefit: LearnedBenefit::Remaining,
            learned_calibrate: false,
            learned_breakeven: true,
            learned_io_cost: true,
            learned_control_sample: 16,
            learned_level: false,
            hot_key_cache_bytes: 0,
            compaction_filter: None,
            merge_operator: None,
            names_set: Vec::new(),
        }
    }
}

/// Smallest `max_open_files` accepted: 16. The engine keeps up to about ten files open besides
/// tables (LOCK, the WAL and the previous one, the manifest, value-log segments being written and
/// sealed, flush and compaction outputs); a smaller limit could not hold those and a table.
/// (Tables stay open while live, as with RocksDB's -1, so the limit is not otherwise enforced.)
pub const MAX_OPEN_FILES_MIN: usize = 16;

/// Default `zstd_level` (zstd's own default).
const ZSTD_LEVEL_DEFAULT: i32 = 3;

/// Smallest cache budget (memory_budget minus memtables) accepted: 2 MiB, so that the minimum
/// block cache (1 MiB, see `symbiosis::APP_MIN_BYTES`) leaves room for a compressed tier.
pub const CACHE_BUDGET_MIN_BYTES: u64 = 2 << 20;

/// Parses sizes like `4096`, `64KiB`, `64MiB`, `1GiB`, `64MB`, `1g`.
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| Error::InvalidArgument(format!("not a size: {s:?}")))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(Error::InvalidArgument(format!(
                "unknown size unit in {s:?}; use B, KiB, MiB, GiB or TiB"
            )))
        }
    };
    if n.is_nan() || n < 0.0 || !n.is_finite() {
        return Err(Error::InvalidArgument(format!("not a size: {s:?}")));
    }
    Ok((n * mult as f64) as u64)
}

fn parse_bool(key: &str, v: &str) -> Result<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Error::InvalidArgument(format!(
            "option {key}: expected true/false, got {v:?}"
        ))),
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T> {
    v.trim()
        .parse()
        .map_err(|_| Error::InvalidArgument(format!("option {key}: expected a number, got {v:?}")))
}

/// All option names accepted by [`Options::set`].
pub const OPTION_NAMES: &[&str] = &[
    "create_if_missing",
    "error_if_exists",
    "memory_budget",
    "cache_layout",
    "cache_sizing",
    "cache_miss_costs",
    "cache_sample_inv",
    "cache_room_measured",
    "cache_start_prior",
    "write_buffer_size",
    "block_cache_size",
    "cache_size",
    "block_cache_policy",
    "block_size",
    "bloom_bits_per_key",
    "compression",
    "zstd_level",
    "l0_compaction_trigger",
    "l0_slowdown_writes_trigger",
    "l0_stop_writes_trigger",
    "max_bytes_for_level_base",
    "level_size_multiplier",
    "target_file_size",
    "compaction_readahead_bytes",
    "l0_intra_compaction",
    "finish_compaction_on_close",
    "background_nice",
    "wal_sync_interval_ms",
    "expiry_compaction_interval_ms",
    "paranoid_checks",
    "read_only",
    "secondary",
    "mmap_reads",
    "mmap_reads_limit",
    "uncompressed_to_page_cache",
    "mmap_logs",
    "max_open_files",
    "enable_blob_files",
    "min_blob_size",
    "blob_file_size",
    "blob_gc_space_amp",
    "blob_gc_garbage_ratio",
    "blob_prefetch_depth",
    "prefetcher",
    "prefetch_model",
    "pipes_bulk_io",
    "learned_index",
    "learned_delta",
    "learned_wait_ms",
    "learned_benefit",
    "learned_calibrate",
    "learned_breakeven",
    "learned_io_cost",
    "learned_control_sample",
    "learned_level",
    "hot_key_cache_bytes",
    "merge_operator",
];

/// The first of `names` that `set` was called with.
fn first_set(set: &[&'static str], names: &[&'static str]) -> Option<&'static str> {
    names.iter().find(|n| set.contains(n)).copied()
}

impl Options {
    /// Sets one option from its string form (`"block_cache_size"`, `"64MiB"`).
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        // Every refusal names the option, also where a shared parser (sizes, enums) does not.
        self.set_value(key, value).map_err(|e| match e {
            Error::InvalidArgument(m) if !m.contains(key) => {
                Error::InvalidArgument(format!("option {key}: {m}"))
            }
            e => e,
        })?;
        if let Some(&name) = OPTION_NAMES.iter().find(|&&n| n == key) {
            if !self.names_set.contains(&name) {
                self.names_set.push(name);
            }
        }
        Ok(())
    }

    fn set_value(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "create_if_missing" => self.create_if_missing = parse_bool(key, value)?,
            "error_if_exists" => self.error_if_exists = parse_bool(key, value)?,
            "memory_budget" => self.memory_budget = parse_size(value)?,
            "cache_layout" => self.cache_layout = CacheLayout::parse(value)?,
            "cache_sizing" => self.cache_sizing = Some(CacheSizing::parse(value)?),
            "cache_miss_costs" => self.cache_miss_costs = CacheMissCosts::parse(value)?,
            "cache_sample_inv" => self.cache_sample_inv = parse_num(key, value)?,
            "cache_room_measured" => self.cache_room_measured = parse_bool(key, value)?,
            "cache_start_prior" => self.cache_start_prior = parse_bool(key, value)?,
            "write_buffer_size" => self.write_buffer_size = parse_size(value)?,
            "block_cache_size" | "cache_size" => {
                let bytes = parse_size(value)?;
                let other = if key == "cache_size" {
                    "block_cache_size"
                } else {
                    "cache_size"
                };
                if self.names_set.contains(&other) && bytes != self.block_cache_size {
                    return Err(Error::InvalidArgument(format!(
                        "option {key}={value} conflicts with {other}={}: cache_size is another \
                         name for block_cache_size; give only one of them",
                        self.block_cache_size
                    )));
                }
                self.block_cache_size = bytes;
            }
            "block_cache_policy" => self.block_cache_policy = BlockCachePolicy::parse(value)?,
            "block_size" => self.block_size = parse_size(value)? as usize,
            "bloom_bits_per_key" => self.bloom_bits_per_key = parse_num(key, value)?,
            "compression" => self.compression = Compression::parse(value)?,
            "zstd_level" => self.zstd_level = parse_num(key, value)?,
            "l0_compaction_trigger" => self.l0_compaction_trigger = parse_num(key, value)?,
            "l0_slowdown_writes_trigger" => {
                self.l0_slowdown_writes_trigger = parse_num(key, value)?
            }
            "l0_stop_writes_trigger" => self.l0_stop_writes_trigger = parse_num(key, value)?,
            "max_bytes_for_level_base" => self.max_bytes_for_level_base = parse_size(value)?,
            "level_size_multiplier" => self.level_size_multiplier = parse_num(key, value)?,
            "target_file_size" => self.target_file_size = parse_size(value)?,
            "compaction_readahead_bytes" => self.compaction_readahead_bytes = parse_size(value)?,
            "l0_intra_compaction" => self.l0_intra_compaction = parse_bool(key, value)?,
            "finish_compaction_on_close" => {
                self.finish_compaction_on_close = parse_bool(key, value)?
            }
            "background_nice" => self.background_nice = parse_num(key, value)?,
            "wal_sync_interval_ms" => self.wal_sync_interval_ms = parse_num(key, value)?,
            "expiry_compaction_interval_ms" => {
                self.expiry_compaction_interval_ms = parse_num(key, value)?
            }
            "paranoid_checks" => self.paranoid_checks = parse_bool(key, value)?,
            "read_only" => self.read_only = parse_bool(key, value)?,
            "secondary" => self.secondary = parse_bool(key, value)?,
            "mmap_reads" => self.mmap_reads = parse_bool(key, value)?,
            "mmap_reads_limit" => self.mmap_reads_limit = MmapLimit::parse(value)?,
            "uncompressed_to_page_cache" => {
                self.uncompressed_to_page_cache = parse_bool(key, value)?
            }
            "mmap_logs" => self.mmap_logs = parse_bool(key, value)?,
            "max_open_files" => self.max_open_files = parse_num(key, value)?,
            "enable_blob_files" => self.enable_blob_files = parse_bool(key, value)?,
            "min_blob_size" => self.min_blob_size = parse_size(value)?,
            "blob_file_size" => self.blob_file_size = parse_size(value)?,
            "blob_gc_space_amp" => self.blob_gc_space_amp = parse_num(key, value)?,
            "blob_gc_garbage_ratio" => self.blob_gc_garbage_ratio = parse_num(key, value)?,
            "blob_prefetch_depth" => self.blob_prefetch_depth = parse_num(key, value)?,
            "prefetcher" => self.prefetcher = Prefetcher::parse(value)?,
            "prefetch_model" => self.prefetch_model = value.to_string(),
            "pipes_bulk_io" => self.pipes_bulk_io = parse_bool(key, value)?,
            "learned_index" => self.learned_index = LearnedIndex::parse(value)?,
            "learned_delta" => self.learned_delta = parse_num(key, value)?,
            "learned_wait_ms" => self.learned_wait_ms = parse_num(key, value)?,
            "learned_benefit" => {
                self.learned_benefit = LearnedBenefit::parse(value).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "unknown learned_benefit {value:?}; valid: remaining, lifetime"
                    ))
                })?
            }
            "learned_calibrate" => self.learned_calibrate = parse_bool(key, value)?,
            "learned_breakeven" => self.learned_breakeven = parse_bool(key, value)?,
            "learned_io_cost" => self.learned_io_cost = parse_bool(key, value)?,
            "learned_control_sample" => self.learned_control_sample = parse_num(key, value)?,
            "learned_level" => self.learned_level = parse_bool(key, value)?,
            "hot_key_cache_bytes" => self.hot_key_cache_bytes = parse_size(value)?,
            "merge_operator" => self.merge_operator = Some(crate::merge::builtin(value)?),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "unknown option {key:?}; valid options: {}",
                    OPTION_NAMES.join(", ")
                )))
            }
        }
        Ok(())
    }

    /// Checks ranges and applies `memory_budget`.
    pub fn sanitized(&self) -> Result<Options> {
        let mut o = self.clone();
        let bad = |m: String| Err(Error::InvalidArgument(m));
        // A secondary writes nothing: everything a read-only open skips, it skips too.
        o.read_only |= o.secondary;
        if o.memory_budget > 0 {
            let sized = ["block_cache_size", "cache_size", "write_buffer_size"];
            if let Some(name) = first_set(&o.names_set, &sized) {
                // The budget sizes both itself: a value given beside it would be overridden.
                return bad(format!(
                    "{name} cannot be given with memory_budget, which sizes the memtables and \
                     the caches itself: drop {name}, or drop memory_budget and size them yourself \
                     (cache_sizing=SIZE fixes the block cache's share of the budget)"
                ));
            }
            let wb = (o.memory_budget / 4).clamp(64 << 10, 64 << 20);
            o.write_buffer_size = wb;
            o.block_cache_size = o.memory_budget.saturating_sub(2 * wb);
            if o.block_cache_size < CACHE_BUDGET_MIN_BYTES {
                return bad(format!(
                    "memory_budget {} leaves {} bytes for caches after two memtables of {wb}; \
                     need at least {CACHE_BUDGET_MIN_BYTES}",
                    o.memory_budget, o.block_cache_size
                ));
            }
            match o.cache_sizing {
                None => o.cache_sizing = Some(CacheSizing::Adaptive),
                Some(CacheSizing::Static(b)) if b > o.block_cache_size => {
                    return bad(format!(
                        "cache_sizing {b} exceeds the cache budget {} (memory_budget {} minus \
                         two memtables of {wb})",
                        o.block_cache_size, o.memory_budget
                    ));
                }
                Some(_) => {}
            }
            if o.cache_sizing == Some(CacheSizing::Adaptive)
                && o.block_cache_policy != BlockCachePolicy::Lru
            {
                // The Symbiosis ghosts are LRU stack-distance simulations: they predict an LRU
                // block cache's hit ratio at every size, not an S3-FIFO one, so the sizes they
                // picked would rest on the wrong curve.
                return bad(format!(
                    "block_cache_policy={} cannot be used with adaptive cache_sizing (the \
                     default with memory_budget; its ghosts predict an LRU block cache): set a \
                     static cache_sizing such as cache_sizing=16MiB, or block_cache_policy=lru",
                    o.block_cache_policy.name()
                ));
            }
        } else {
            match o.cache_sizing {
                None => {}
                Some(CacheSizing::Static(b)) => {
                    if let Some(name) = first_set(&o.names_set, &["block_cache_size", "cache_size"])
                    {
                        if o.block_cache_size != b {
                            return bad(format!(
                                "cache_sizing={b} and {name}={} disagree: without memory_budget \
                                 both set the block cache's size; give one",
                                o.block_cache_size
                            ));
                        }
                    }
                    o.block_cache_size = b
                }
                Some(CacheSizing::Adaptive) => {
                    return bad("cache_sizing=adaptive needs memory_budget".into());
                }
            }
            if o.cache_layout == CacheLayout::User {
                return bad("cache_layout=user needs memory_budget (the split budget)".into());
            }
        }
        if !(1..=1 << 16).contains(&o.cache_sample_inv) {
            return bad(format!(
                "cache_sample_inv {} outside 1..=65536",
                o.cache_sample_inv
            ));
        }
        if o.write_buffer_size < 4096 {
            return bad(format!(
                "write_buffer_size {} is below 4 KiB",
                o.write_buffer_size
            ));
        }
        if !(256..=(64 << 20)).contains(&o.block_size) {
            return bad(format!("block_size {} outside 256 B..64 MiB", o.block_size));
        }
        if o.bloom_bits_per_key > 64 {
            return bad(format!(
                "bloom_bits_per_key {} above 64",
                o.bloom_bits_per_key
            ));
        }
        if o.l0_compaction_trigger == 0
            || o.l0_slowdown_writes_trigger < o.l0_compaction_trigger
            || o.l0_stop_writes_trigger < o.l0_slowdown_writes_trigger
        {
            return bad(
                "need 0 < l0_compaction_trigger <= l0_slowdown_writes_trigger <= \
                        l0_stop_writes_trigger"
                    .into(),
            );
        }
        if o.level_size_multiplier < 2 {
            return bad("level_size_multiplier must be at least 2".into());
        }
        if o.compaction_readahead_bytes != 0
            && !(4096..=(256 << 20)).contains(&o.compaction_readahead_bytes)
        {
            return bad(format!(
                "compaction_readahead_bytes {} outside 4 KiB..256 MiB (0 = off)",
                o.compaction_readahead_bytes
            ));
        }
        if o.target_file_size < 4096 || o.max_bytes_for_level_base < 4096 {
            return bad("target_file_size and max_bytes_for_level_base must be >= 4 KiB".into());
        }
        if !(1..=22).contains(&o.zstd_level) {
            return bad(format!("zstd_level {} outside 1..=22", o.zstd_level));
        }
        if o.compression != Compression::Zstd
            && (o.zstd_level != ZSTD_LEVEL_DEFAULT || o.names_set.contains(&"zstd_level"))
        {
            return bad(format!(
                "zstd_level {} is set but compression is {}, so it would do nothing; set \
                 compression=zstd or drop zstd_level",
                o.zstd_level,
                o.compression.name()
            ));
        }
        if o.max_open_files < MAX_OPEN_FILES_MIN {
            return bad(format!(
                "max_open_files {} is below {MAX_OPEN_FILES_MIN}, too few for the files the engine \
                 keeps open besides tables (WAL, manifest, value-log segments, flush and \
                 compaction outputs); leave it at its default (1000) or set at least \
                 {MAX_OPEN_FILES_MIN}",
                o.max_open_files
            ));
        }
        if o.blob_file_size < 4096 {
            return bad(format!(
                "blob_file_size {} is below 4 KiB",
                o.blob_file_size
            ));
        }
        if !(o.blob_gc_space_amp == 0.0 || o.blob_gc_space_amp > 1.0)
            || !o.blob_gc_space_amp.is_finite()
        {
            return bad(format!(
                "blob_gc_space_amp {} must be 0 (off) or above 1",
                o.blob_gc_space_amp
            ));
        }
        if !(0.0..=1.0).contains(&o.blob_gc_garbage_ratio) {
            return bad(format!(
                "blob_gc_garbage_ratio {} outside 0..=1",
                o.blob_gc_garbage_ratio
            ));
        }
        if o.blob_prefetch_depth > 1024 {
            return bad(format!(
                "blob_prefetch_depth {} above 1024",
                o.blob_prefetch_depth
            ));
        }
        if !o.prefetch_model.is_empty() && o.prefetcher != Prefetcher::TinFetch {
            return bad(format!(
                "prefetch_model {:?} is set but prefetcher is {}; the model is for prefetcher=tinfetch",
                o.prefetch_model,
                o.prefetcher.name()
            ));
        }
        if !(1..=4096).contains(&o.learned_delta) {
            return bad(format!(
                "learned_delta {} outside 1..=4096",
                o.learned_delta
            ));
        }
        if o.learned_wait_ms > 3_600_000 {
            return bad(format!(
                "learned_wait_ms {} above one hour",
                o.learned_wait_ms
            ));
        }
        if o.background_nice > 19 {
            return bad(format!(
                "background_nice {} outside 0..=19 (0 keeps the process's priority)",
                o.background_nice
            ));
        }
        if o.learned_control_sample > 1 << 20 {
            return bad(format!(
                "learned_control_sample {} above 2^20 (use 0 to turn the control sample off)",
                o.learned_control_sample
            ));
        }
        if o.hot_key_cache_bytes != 0 && o.hot_key_cache_bytes < 16 << 10 {
            return bad(format!(
                "hot_key_cache_bytes {} is below 16 KiB (use 0 to turn the cache off)",
                o.hot_key_cache_bytes
            ));
        }
        Ok(o)
    }

    /// The effective settings as (name, value) strings, for stats and benchmark records.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        vec![
            ("memory_budget", self.memory_budget.to_string()),
            ("cache_layout", self.cache_layout.name().to_string()),
            (
                "cache_sizing",
                self.cache_sizing
                    .map_or_else(|| "off".to_string(), CacheSizing::describe),
            ),
            ("cache_miss_costs", self.cache_miss_costs.describe()),
            ("cache_sample_inv", self.cache_sample_inv.to_string()),
            ("cache_room_measured", self.cache_room_measured.to_string()),
            ("cache_start_prior", self.cache_start_prior.to_string()),
            ("write_buffer_size", self.write_buffer_size.to_string()),
            ("block_cache_size", self.block_cache_size.to_string()),
            (
                "block_cache_policy",
                self.block_cache_policy.name().to_string(),
            ),
            ("block_size", self.block_size.to_string()),
            ("bloom_bits_per_key", self.bloom_bits_per_key.to_string()),
            ("compression", self.compression.name().to_string()),
            ("zstd_level", self.zstd_level.to_string()),
            (
                "l0_compaction_trigger",
                self.l0_compaction_trigger.to_string(),
            ),
            (
                "l0_slowdown_writes_trigger",
                self.l0_slowdown_writes_trigger.to_string(),
            ),
            (
                "l0_stop_writes_trigger",
                self.l0_stop_writes_trigger.to_string(),
            ),
            (
                "max_bytes_for_level_base",
                self.max_bytes_for_level_base.to_string(),
            ),
            (
                "level_size_multiplier",
                self.level_size_multiplier.to_string(),
            ),
            ("target_file_size", self.target_file_size.to_string()),
            (
                "compaction_readahead_bytes",
                self.compaction_readahead_bytes.to_string(),
            ),
            (
                "wal_sync_interval_ms",
                self.wal_sync_interval_ms.to_string(),
            ),
            (
                "expiry_compaction_interval_ms",
                self.expiry_compaction_interval_ms.to_string(),
            ),
            ("l0_intra_compaction", self.l0_intra_compaction.to_string()),
            (
                "finish_compaction_on_close",
                self.finish_compaction_on_close.to_string(),
            ),
            ("background_nice", self.background_nice.to_string()),
            ("paranoid_checks", self.paranoid_checks.to_string()),
            ("read_only", self.read_only.to_string()),
            ("secondary", self.secondary.to_string()),
            ("mmap_reads", self.mmap_reads.to_string()),
            ("mmap_reads_limit", self.mmap_reads_limit.name()),
            (
                "uncompressed_to_page_cache",
                self.uncompressed_to_page_cache.to_string(),
            ),
            ("mmap_logs", self.mmap_logs.to_string()),
            ("max_open_files", self.max_open_files.to_string()),
            ("enable_blob_files", self.enable_blob_files.to_string()),
            ("min_blob_size", self.min_blob_size.to_string()),
            ("blob_file_size", self.blob_file_size.to_string()),
            ("blob_gc_space_amp", self.blob_gc_space_amp.to_string()),
            (
                "blob_gc_garbage_ratio",
                self.blob_gc_garbage_ratio.to_string(),
            ),
            ("blob_prefetch_depth", self.blob_prefetch_depth.to_string()),
            ("prefetcher", self.prefetcher.name().to_string()),
            ("prefetch_model", self.prefetch_model.clone()),
            ("pipes_bulk_io", self.pipes_bulk_io.to_string()),
            ("learned_index", self.learned_index.name().to_string()),
            ("learned_delta", self.learned_delta.to_string()),
            ("learned_wait_ms", self.learned_wait_ms.to_string()),
            ("learned_benefit", self.learned_benefit.name().to_string()),
            ("learned_calibrate", self.learned_calibrate.to_string()),
            ("learned_breakeven", self.learned_breakeven.to_string()),
            ("learned_io_cost", self.learned_io_cost.to_string()),
            (
                "learned_control_sample",
                self.learned_control_sample.to_string(),
            ),
            ("learned_level", self.learned_level.to_string()),
            ("hot_key_cache_bytes", self.hot_key_cache_bytes.to_string()),
            (
                "merge_operator",
                self.merge_operator
                    .as_ref()
                    .map_or_else(String::new, |m| m.name().to_string()),
            ),
        ]
    }
}

/// Options of one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// fsync the WAL before acknowledging. Default false: the write reaches the OS before it is
    /// acknowledged (survives a process crash) and is fsynced within `wal_sync_interval_ms`.
    pub sync: bool,
}

/// Options of one read or iterator.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Read as of this snapshot's sequence number; None reads the latest state.
    pub snapshot: Option<u64>,
    /// Do not insert blocks read by this operation into the block cache (for scans). Default false.
    pub fill_cache_off: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn mmap_reads_limit_parses_auto_unlimited_and_sizes() {
        let mut o = Options::default();
        assert_eq!(o.mmap_reads_limit, MmapLimit::Auto);
        assert_eq!(MmapLimit::Auto.bytes(Some(32 << 20)), 16 << 20);
        assert_eq!(MmapLimit::Auto.bytes(None), u64::MAX);
        o.set("mmap_reads_limit", "64MiB").unwrap();
        assert_eq!(o.mmap_reads_limit.bytes(Some(1)), 64 << 20);
        o.set("mmap_reads_limit", "unlimited").unwrap();
        assert_eq!(o.mmap_reads_limit.bytes(Some(1)), u64::MAX);
        let err = o.set("mmap_reads_limit", "lots").unwrap_err().to_string();
        assert!(err.contains("valid: auto, unlimited"), "{err}");
    }

    #[test]
    fn every_refused_value_names_its_option() {
        for &name in OPTION_NAMES {
            for v in ["lots", "-1", ""] {
                if let Err(e) = Options::default().set(name, v) {
                    assert!(matches!(e, Error::InvalidArgument(_)), "{name}={v}: {e}");
                    assert!(e.to_string().contains(name), "{name}={v}: {e}");
                }
            }
        }
    }

    #[test]
    fn compaction_readahead_parses_sizes_and_refuses_tiny_or_huge_ones() {
        let mut o = Options::default();
        assert_eq!(o.compaction_readahead_bytes, 0, "off by default");
        o.set("compaction_readahead_bytes", "1MiB").unwrap();
        assert_eq!(o.compaction_readahead_bytes, 1 << 20);
        o.sanitized().unwrap();
        for bad in ["1024", "512MiB"] {
            let mut o = Options::default();
            o.set("compaction_readahead_bytes", bad).unwrap();
            let e = o.sanitized().unwrap_err().to_string();
            assert!(e.contains("compaction_readahead_bytes"), "{bad}: {e}");
        }
    }

    #[test]
    fn unknown_option_lists_valid_names() {
        let err = Options::default()
            .set("blok_size", "1")
            .unwrap_err()
            .to_string();
        assert!(err.contains("block_size"), "{err}");
    }

    #[test]
    fn max_open_files_too_small_to_work_is_refused_naming_the_option() {
        for v in ["0", "15"] {
            let mut o = Options::default();
            o.set("max_open_files", v).unwrap();
            let e = o.sanitized().unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            assert!(e.to_string().contains("max_open_files"), "{e}");
        }
        let mut o = Options::default();
        o.set("max_open_files", "16").unwrap();
        assert_eq!(o.sanitized().unwrap().max_open_files, 16);
    }

    #[test]
    fn zstd_level_without_zstd_compression_is_refused() {
        let mut o = Options::default();
        o.set("zstd_level", "3").unwrap();
        let e = o.sanitized().unwrap_err().to_string();
        assert!(
            e.contains("zstd_level") && e.contains("compression is lz4"),
            "{e}"
        );
        o.set("compression", "zstd").unwrap();
        assert_eq!(o.sanitized().unwrap().zstd_level, 3);
        let o = Options {
            compression: Compression::None,
            zstd_level: 9,
            ..Default::default()
        };
        assert!(o.sanitized().is_err(), "a field set in Rust is checked too");
        let o = Options {
            compression: Compression::None,
            ..Default::default()
        };
        assert!(o.sanitized().is_ok(), "the default level is not a choice");
    }

    #[test]
    fn cache_size_and_block_cache_size_with_different_values_are_refused() {
        let mut o = Options::default();
        o.set("cache_size", "64MiB").unwrap();
        let e = o.set("block_cache_size", "8MiB").unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("cache_size") && e.contains("block_cache_size"),
            "{e}"
        );
        assert_eq!(
            o.block_cache_size,
            64 << 20,
            "the refused value is not applied"
        );
        o.set("block_cache_size", "64MiB").unwrap();
        o.set("cache_size", "64MiB").unwrap();
        let mut o = Options::default();
        o.set("cache_size", "1MiB").unwrap();
        o.set("cache_size", "2MiB").unwrap();
        assert_eq!(
            o.block_cache_size,
            2 << 20,
            "one spelling twice: the last wins"
        );
    }

    #[test]
    fn memory_budget_splits_between_memtables_and_cache() {
        let o = Options {
            memory_budget: 256 << 20,
            ..Default::default()
        }
        .sanitized()
        .unwrap();
        assert_eq!(o.write_buffer_size, 64 << 20);
        assert_eq!(o.block_cache_size, 128 << 20);
        assert_eq!(o.cache_sizing, Some(CacheSizing::Adaptive));
    }

    #[test]
    fn block_cache_policy_parses_and_refuses_adaptive_sizing() {
        let mut o = Options::default();
        assert_eq!(o.block_cache_policy, BlockCachePolicy::Lru);
        o.set("block_cache_policy", "S3FIFO").unwrap();
        assert_eq!(o.block_cache_policy, BlockCachePolicy::S3Fifo);
        assert!(o.sanitized().is_ok(), "no budget: a fixed-size cache");
        assert!(o
            .describe()
            .contains(&("block_cache_policy", "s3fifo".to_string())));
        let e = o.set("block_cache_policy", "arc").unwrap_err().to_string();
        assert!(
            e.contains("block_cache_policy") && e.contains("lru, s3fifo"),
            "{e}"
        );
        // A budget defaults to adaptive sizing, which predicts LRU only.
        o.set("memory_budget", "64MiB").unwrap();
        let e = o.sanitized().unwrap_err().to_string();
        assert!(
            e.contains("block_cache_policy=s3fifo") && e.contains("static"),
            "{e}"
        );
        o.set("cache_sizing", "adaptive").unwrap();
        assert!(o.sanitized().is_err());
        o.set("cache_sizing", "8MiB").unwrap();
        assert_eq!(
            o.sanitized().unwrap().block_cache_policy,
            BlockCachePolicy::S3Fifo
        );
        o.set("block_cache_policy", "lru").unwrap();
        o.set("cache_sizing", "adaptive").unwrap();
        assert!(o.sanitized().is_ok());
    }

    #[test]
    fn without_budget_cache_options_keep_todays_behaviour() {
        let o = Options::default().sanitized().unwrap();
        assert_eq!(o.cache_sizing, None);
        assert_eq!(o.block_cache_size, 32 << 20);
        let mut o = Options::default();
        o.set("cache_sizing", "8MiB").unwrap();
        assert_eq!(o.sanitized().unwrap().block_cache_size, 8 << 20);
    }

    #[test]
    fn background_nice_parses_and_out_of_range_names_the_option() {
        assert_eq!(Options::default().background_nice, 0);
        let mut o = Options::default();
        o.set("background_nice", "10").unwrap();
        assert_eq!(o.sanitized().unwrap().background_nice, 10);
        let e = Options::default()
            .set("background_nice", "low")
            .unwrap_err()
            .to_string();
        assert!(e.contains("background_nice"), "{e}");
        let mut o = Options::default();
        o.set("background_nice", "20").unwrap();
        let e = o.sanitized().unwrap_err().to_string();
        assert!(e.contains("background_nice"), "{e}");
    }

    #[test]
    fn cache_options_parse_and_bad_values_are_clear_errors() {
        let mut o = Options::default();
        o.set("memory_budget", "64MiB").unwrap();
        o.set("cache_layout", "user").unwrap();
        o.set("cache_sizing", "adaptive").unwrap();
        o.set("cache_miss_costs", "500:40000").unwrap();
        o.set("cache_sample_inv", "8").unwrap();
        let s = o.sanitized().unwrap();
        assert_eq!(s.cache_layout, CacheLayout::User);
        assert_eq!(s.cache_miss_costs, CacheMissCosts::Fixed(500.0, 40000.0));
        for (k, v) in [
            ("cache_layout", "both"),
            ("cache_sizing", "lots"),
            ("cache_miss_costs", "3000"),
            ("cache_miss_costs", "-1:5"),
            ("cache_sample_inv", "x"),
        ] {
            let e = Options::default().set(k, v).unwrap_err().to_string();
            assert!(e.contains(k), "{k}={v}: {e}");
        }
        let mut o = Options::default();
        o.set("cache_layout", "user").unwrap();
        assert!(o
            .sanitized()
            .unwrap_err()
            .to_string()
            .contains("memory_budget"));
        let mut o = Options::default();
        o.set("cache_sizing", "adaptive").unwrap();
        assert!(o
            .sanitized()
            .unwrap_err()
            .to_string()
            .contains("memory_budget"));
        let mut o = Options::default();
        o.set("memory_budget", "64MiB").unwrap();
        o.set("cache_sizing", "1GiB").unwrap();
        assert!(o
            .sanitized()
            .unwrap_err()
            .to_string()
            .contains("cache budget"));
        let mut o = Options::default();
        o.set("memory_budget", "1MiB").unwrap();
        assert!(o.sanitized().is_err());
    }
}
