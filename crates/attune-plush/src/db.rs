//! The engine: open and recovery, upsert / lookup / delete, migration, statistics, verify.
//!
//! Thread safety: `Plush` is `Send + Sync`; any number of threads may call any method. Upserts
//! lock their DRAM entry (and, for the log append, their log partition); lookups take no lock.
//! With background migration ([`Migration::Background`]) one migration thread empties DRAM
//! entries that filled past three quarters, under the same entry lock an inline migration takes
//! (the DRAM entry's lock covers its whole subtree in the persistent levels), so an upsert only
//! migrates itself when it finds its entry entirely full.

use crate::error::{Error, Result};
use crate::layout::{filter_mask, hash_key, Geometry, EPOCH_MAX, SLOTS_PER_BUCKET, TOMBSTONE};
use crate::level::{
    collect_newest, level_file_bytes, level_file_name, search, search_meta, DramLevel, Level,
    FORMAT_VERSION,
};
use crate::log::{
    LogEntry, Partition, Recovered, Suspect, NEWEST_KEPT, RESTORE_HINT, TORN_TAIL_MAX,
};
use crate::payload::{
    bucket_key, fits_inline, is_pointer, PayloadLog, KEY_BYTES_MAX, SEGMENT_BYTES_MAX,
    SEGMENT_HEADER_BYTES, VALUE_BYTES_MAX,
};
use crate::persist::{
    Backend, FileStorage, GroupCommit, Region, RegionKind, Storage, SYNCS_IN_FLIGHT_LIMIT,
};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

const MANIFEST: &str = "manifest.plush";
const MANIFEST_MAGIC: u64 = u64::from_le_bytes(*b"PLUSHDB\0");
/// Manifest version of a database whose recovery log is packed ([`Options::log_pack_groups`]):
/// a DRAM entry's log entries may lie in any partition, ordered by log-wide sequence numbers.
/// A build that knows only [`FORMAT_VERSION`] (3, every entry in its key's partition) would
/// replay such a log partition by partition and could bring back an overwritten version, so
/// it must refuse it; a database logged by key hash keeps version 3.
const MANIFEST_VERSION_PACKED: u64 = 4;
/// Shift of the manifest version word's range-partitioning field: bits 8..16 hold
/// `significant_key_bits` of a range-partitioned database (0: partitioned by hash). A build
/// that does not know range partitioning reads such a version as unknown and refuses it
/// (placing keys by hash would find none of them).
const RANGE_BITS_SHIFT: u32 = 8;
/// Log entries a packed log appends to one partition before it moves to the next: one 4 KiB
/// page of 32-byte entries, so that the entries of one group commit share a page.
pub const LOG_PACK_RUN_ENTRIES: u64 = 4096 / crate::log::ENTRY_BYTES as u64;
/// A packed log records its acknowledged tail (`log::record_acked`) at the append whose entry
/// fills a multiple of this many of its chunk's slots, the end of each run included (it
/// divides [`LOG_PACK_RUN_ENTRIES`]). Each record adds the chunk header's page to one later
/// sync; 16 bounds that at one page per 16 appends while leaving, after a crash, at most the
/// newest 15 entries of a partition's chunk without a record (damage there reads as a torn
/// tail).
pub const LOG_ACK_RECORD_EVERY: u64 = 16;
const _: () = assert!(LOG_PACK_RUN_ENTRIES.is_multiple_of(LOG_ACK_RECORD_EVERY));
/// Deepest level the placement hash can address with the defaults (16 + 11 × 4 bits = 60).
const LEVELS_LIMIT: usize = 12;
/// Largest recovery log (every partition's chunks): 1 TiB. The log holds only the records the
/// DRAM level has not migrated, at most 2^24 entries × 256 records × 32 bytes = 128 GiB at the
/// largest DRAM level (the default log is 1.9 GiB); a larger one is a typo in a size, and a
/// file of it exceeds what most file systems allow (ext4: 16 TiB).
const LOG_BYTES_MAX: u64 = 1 << 40;

/// How to open a database. The geometry fields (`dram_entries_log2`, `fanout_log2`,
/// `log_partitions`, `log_chunk_bytes`, `log_chunks`) apply when the database is created;
/// later opens read them from its manifest.
#[derive(Clone, Debug)]
pub struct Options {
    /// Create the database when the directory holds none. Default true.
    pub create_if_missing: bool,
    /// log2 of the DRAM level's directory entries (and the first persistent level's). Default
    /// 16 (the chapter's), 256 MiB of DRAM at most (pages are touched as records arrive).
    pub dram_entries_log2: u32,
    /// log2 of the fanout (buckets per entry, growth per level). Default 4 (fanout 16).
    pub fanout_log2: u32,
    /// Recovery-log partitions (power of two, at most the DRAM entries). Default 64.
    pub log_partitions: usize,
    /// Bytes per log chunk (multiple of 4096). Default 5 MiB.
    pub log_chunk_bytes: usize,
    /// Chunks per log partition (at least 3; together they must hold more than the DRAM level's
    /// share of the partition plus two chunks). Default 6.
    pub log_chunks: usize,
    /// Persistent levels whose filters get a DRAM copy (lookups then read no filter from the
    /// files). Default 2 (the chapter's); 0 switches the copy off.
    pub dram_filter_levels: usize,
    /// Deepest persistent level. Default 8.
    pub levels_max: usize,
    /// True: every acknowledged upsert survives a power loss (a persistence barrier per log
    /// entry and per migration step). False: it survives a process crash (stores reach the
    /// page cache at once), not a power loss. Default true.
    pub sync: bool,
    /// Who migrates a full DRAM entry. Default `Background`: a migration thread, so that
    /// upserts do not pay for migrations (the chapter's tail-latency weakness); `Inline`: the
    /// upsert that finds its entry full (the chapter's design).
    pub migration: Migration,
    /// How barriers reach the files (`Write`, `Msync` or `Clwb`). Default `Write`: log appends
    /// are `pwrite` + group-committed `fdatasync` (see [`crate::persist`]).
    pub backend: Backend,
    /// Bytes of one payload-log segment file (multiple of 4096, at most 2 GiB; fixed at
    /// creation). Default 64 MiB: large enough that creating one (two barriers) is rare, small
    /// enough that collecting one copies little.
    pub payload_segment_bytes: usize,
    /// Collect payload-log garbage automatically: when a segment fills, every sealed segment
    /// at least half garbage (by the shadowed records migrations met) is collected. Default
    /// true; false leaves collection to [`Plush::collect_garbage`].
    pub payload_gc: bool,
    /// Group commit waits for writers already on their way to the barrier before it syncs
    /// (at most 200 µs and half the last sync's time; see `persist::COMMIT_WINDOW_NS_MAX`).
    /// Default false: measured on and off in one run (figure `plush-power-loss`), waiting never
    /// paid.
    pub group_commit_window: bool,
    /// Log syncs that may be in flight at once (1 to 64; see
    /// [`crate::persist::GroupCommit::syncs_in_flight_max`]). Default 4: a writer that finds a
    /// sync in flight starts the next group's at once instead of waiting for it, which the
    /// kernel and the device serve together; 1 is the classic one-sync-at-a-time group commit
    /// (the ablation in figure `plush-power-loss`).
    pub log_syncs_in_flight_max: usize,
    /// The `write` back end's group-commit leader writes the log's pages with `O_DIRECT`
    /// (see [`crate::persist::GroupCommit::direct`]). Default false (the exact ranges through
    /// the page cache): measured on and off in figure `plush-power-loss`, direct writes were
    /// level at one and two writers and slower at four and eight (each direct write waits for
    /// the device while the leader holds the group's lock).
    pub log_direct_io: bool,
    /// Group size adapted to the sync's duration (see
    /// [`crate::persist::GroupCommit::gather`]): while log syncs take a device flush's time,
    /// one is in flight at a time and its leader waits, bounded by half a sync, for the
    /// writers the last syncs released, so that one `fdatasync` covers them all. While syncs
    /// are fast (tmpfs), `log_syncs_in_flight_max` applies unchanged. Default true: measured
    /// on and off in one run in figure `plush-power-loss`.
    pub log_group_gather: bool,
    /// Pack the recovery log by time instead of by key: consecutive appends go to the same
    /// partition, [`LOG_PACK_RUN_ENTRIES`] (one 4 KiB page) at a time, round-robin over the
    /// partitions, so that one group commit's entries share one page (one page written back
    /// per `fdatasync`, where logging by key hash spreads a group of n writers over up to n
    /// pages). Sequence numbers are log-wide, and recovery merges the partitions per DRAM
    /// entry by them. Applies when the database is created (recorded as manifest version 4,
    /// which older builds refuse); later opens read it from the manifest. Compaction can then
    /// skip reading a dead chunk only when it is older than every DRAM entry's epoch (the
    /// smallest over the whole level, not over the partition's share). Default true: measured
    /// on and off in one run in figures `plush-log-pack-cpu` and `plush-power-loss-cpu`
    /// (pages per sync 7.5 → 1.1 at 8 writers; per CPU second a modest, noisy gain at 2–8
    /// writers, level on tmpfs).
    pub log_pack_groups: bool,
    /// On tmpfs, skip the `fdatasync`s and `msync`s of the `Write` and `Msync` back ends and
    /// map the log shared (see [`crate::persist`]): tmpfs has no medium below the page cache,
    /// so those calls write nothing and an acknowledged upsert is exactly as durable without
    /// them (it survives a process crash; nothing on tmpfs survives a power loss). Other file
    /// systems and the `Clwb` back end are unaffected. Default true; false keeps the calls
    /// (the ablation in figure `plush-power-loss-tmpfs`).
    pub elide_tmpfs_syncs: bool,
    /// Open for reading only: nothing in the directory is written, created or removed (files
    /// are mapped private, the recovery log is replayed into DRAM only), no migration thread
    /// runs, and every change fails with [`Error::ReadOnly`]. Any number of read-only opens
    /// may share a database (a shared lock on `LOCK`); a writable open excludes them, as
    /// `attune.DB`'s. A directory without a database is refused, whatever
    /// `create_if_missing` says. Default false.
    pub read_only: bool,
    /// Log every upsert to the recovery log before it is acknowledged (the chapter's design).
    /// Default true. False is the chapter's no-log ablation (`-logs`), for bulk loads: an
    /// upsert goes to the DRAM level only, so a record survives a crash only once its DRAM
    /// entry has migrated (a migration's barriers make level 1 durable as with the log);
    /// after a crash each DRAM entry holds what its last migration moved, and nothing newer.
    /// A clean close (drop) checkpoints the DRAM level first; an open that replays records
    /// logged earlier checkpoints them at once, so that a later crash cannot bring back
    /// versions that unlogged upserts replaced. `Stats::recovery_log` reports the mode.
    pub recovery_log: bool,
    /// Persistent levels (1, 2, …) whose files are created and whose whole range is allocated
    /// (`posix_fallocate`) at a writable open (the chapter's preallocation "up to the second
    /// PMem level"). Default 1: with the default geometry level 1 takes about 280 MiB of disk
    /// (on tmpfs: of memory) from the first open, and level 2 would add 4 GiB more. 0 is the
    /// ablation: a level's file is created when the first migration reaches it, and each
    /// entry's blocks are allocated at the first migration into the entry (as levels past this
    /// count always are).
    pub preallocate_levels: usize,
    /// How keys are placed in directory entries (fixed at creation, recorded in the manifest).
    /// Default [`Partitioning::Hash`] (the chapter's default, immune to key skew);
    /// [`Partitioning::Range`] places 8-byte integer keys by their high bits, so that
    /// [`Plush::scan`] can return keys in order (the chapter's §3.6.6). An open that leaves
    /// this at the default takes the stored mode; giving the other mode is an error.
    pub partitioning: Partitioning,
    /// Range partitioning only: the key bits that count (keys are below `2^bits`, and level 1
    /// partitions by the top `dram_entries_log2` of them). Default 64. Integer keys that use
    /// only the low bits (small counters) would all land in DRAM entry 0 with 64; set this to
    /// the bit width of the largest key instead. Upserts of a key at or above `2^bits` are
    /// refused. Fixed at creation.
    pub significant_key_bits: u32,
}

/// How keys are placed in directory entries (see [`Options::partitioning`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partitioning {
    /// By a hash of the key: uniform load whatever the keys, no ordered scans.
    Hash,
    /// By the key's high significant bits (u64 order): an entry and all its descendants hold
    /// one contiguous key range, so scans visit few entries; skewed keys load entries
    /// unevenly.
    Range,
}

impl Partitioning {
    /// Parses `hash` or `range`.
    pub fn parse(s: &str) -> Result<Partitioning> {
        match s {
            "hash" => Ok(Partitioning::Hash),
            "range" => Ok(Partitioning::Range),
            _ => Err(Error::InvalidArgument(format!(
                "partitioning {s:?}: expected hash or range"
            ))),
        }
    }

    /// `hash` or `range`.
    pub fn name(self) -> &'static str {
        match self {
            Partitioning::Hash => "hash",
            Partitioning::Range => "range",
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            dram_entries_log2: 16,
            fanout_log2: 4,
            log_partitions: 64,
            log_chunk_bytes: 5 << 20,
            log_chunks: 6,
            dram_filter_levels: 2,
            levels_max: 8,
            sync: true,
            backend: Backend::Write,
            migration: Migration::Background,
            payload_segment_bytes: 64 << 20,
            payload_gc: true,
            group_commit_window: false,
            log_syncs_in_flight_max: 4,
            log_direct_io: false,
            log_group_gather: true,
            log_pack_groups: true,
            elide_tmpfs_syncs: true,
            read_only: false,
            recovery_log: true,
            preallocate_levels: 1,
            partitioning: Partitioning::Hash,
            significant_key_bits: 64,
        }
    }
}

/// Who migrates DRAM entries (see [`Options::migration`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// The upsert that finds its DRAM entry full, before it appends.
    Inline,
    /// A migration thread, for entries filled past [`BACKGROUND_FILL`] of their capacity; an
    /// upsert still migrates inline when its entry is full (the thread fell behind).
    Background,
    /// As `Background`, but queued entries are migrated only when the caller runs
    /// [`Plush::migrate_queued`] (deterministic, for the crash simulator).
    Manual,
}

impl Migration {
    /// Parses `inline` or `background`.
    pub fn parse(s: &str) -> Result<Migration> {
        match s {
            "inline" => Ok(Migration::Inline),
            "background" => Ok(Migration::Background),
            _ => Err(Error::InvalidArgument(format!(
                "migration {s:?}: expected inline or background"
            ))),
        }
    }
}

/// Fill (numerator over 4 of an entry's capacity) at which an entry is queued for the
/// migration thread: three quarters leaves a quarter of the entry to absorb upserts while the
/// thread catches up.
pub const BACKGROUND_FILL: usize = 3;

impl Options {
    fn geometry(&self) -> Geometry {
        Geometry {
            dram_entries_log2: self.dram_entries_log2,
            fanout_log2: self.fanout_log2,
        }
    }

    /// The group-commit settings of the log's barriers.
    pub fn group_commit(&self) -> GroupCommit {
        GroupCommit {
            window: self.group_commit_window,
            syncs_in_flight_max: self.log_syncs_in_flight_max,
            direct: self.log_direct_io,
            gather: self.log_group_gather,
        }
    }

    /// Bytes of the recovery log file (every partition's chunks); `None` past 2^64.
    fn log_bytes(&self) -> Option<u64> {
        (self.log_partitions as u64)
            .checked_mul(self.log_chunks as u64)?
            .checked_mul(self.log_chunk_bytes as u64)
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if !(1..=SYNCS_IN_FLIGHT_LIMIT).contains(&self.log_syncs_in_flight_max) {
            return bad(format!(
                "log_syncs_in_flight_max {} not in 1..={SYNCS_IN_FLIGHT_LIMIT}",
                self.log_syncs_in_flight_max
            ));
        }
        if !(1..=24).contains(&self.dram_entries_log2) {
            return bad(format!(
                "dram_entries_log2 {} not in 1..=24",
                self.dram_entries_log2
            ));
        }
        if !(1..=4).contains(&self.fanout_log2) {
            return bad(format!("fanout_log2 {} not in 1..=4", self.fanout_log2));
        }
        let p = self.log_partitions;
        if !p.is_power_of_two() || p > 1 << self.dram_entries_log2 {
            return bad(format!(
                "log_partitions {p} must be a power of two and at most the DRAM entries"
            ));
        }
        if self.log_chunk_bytes < 8192 || !self.log_chunk_bytes.is_multiple_of(4096) {
            return bad(format!(
                "log_chunk_bytes {} must be a multiple of 4096, at least 8192",
                self.log_chunk_bytes
            ));
        }
        let log_bytes = self.log_bytes();
        if log_bytes.is_none_or(|b| b > LOG_BYTES_MAX) {
            return bad(format!(
                "log_partitions {p} × log_chunks {} × log_chunk_bytes {} = {} is more than \
                 the recovery log's limit of {} GiB (the default log is {:.1} GiB; it needs \
                 to hold the DRAM level's records only, see log_chunks)",
                self.log_chunks,
                self.log_chunk_bytes,
                log_bytes.map_or("more than 2**64 bytes".into(), |b| format!(
                    "{} GiB",
                    b >> 30
                )),
                LOG_BYTES_MAX >> 30,
                Options::default().log_bytes().unwrap_or(0) as f64 / (1u64 << 30) as f64,
            ));
        }
        let geo = self.geometry();
        let share = geo.entries(0) / p * geo.entry_capacity();
        let per_chunk = (self.log_chunk_bytes - crate::log::CHUNK_HEADER_BYTES) / 32;
        if self.log_chunks < 3 || (self.log_chunks - 2) * per_chunk < share {
            return bad(format!(
                "log_chunks {} × {} entries cannot hold the {share} records the DRAM level keeps \
                 per partition plus two chunks",
                self.log_chunks, per_chunk
            ));
        }
        let seg = self.payload_segment_bytes;
        if !seg.is_multiple_of(4096) || !(8192..=SEGMENT_BYTES_MAX).contains(&seg) {
            return bad(format!(
                "payload_segment_bytes {seg} must be a multiple of 4096 in \
                 8192..={SEGMENT_BYTES_MAX}"
            ));
        }
        if !(1..=64).contains(&self.significant_key_bits) {
            return bad(format!(
                "significant_key_bits {} not in 1..=64",
                self.significant_key_bits
            ));
        }
        let deepest = (64 - self.dram_entries_log2) / self.fanout_log2 + 1;
        if self.levels_max == 0 || self.levels_max > (deepest as usize).min(LEVELS_LIMIT) {
            return bad(format!(
                "levels_max {} not in 1..={}",
                self.levels_max,
                (deepest as usize).min(LEVELS_LIMIT)
            ));
        }
        // Above `levels_max` (but within the format's limit) it means "every level": a default
        // of 2 stays valid with `levels_max` 1.
        if self.dram_filter_levels > LEVELS_LIMIT {
            return bad(format!(
                "dram_filter_levels {} not in 0..={LEVELS_LIMIT}",
                self.dram_filter_levels
            ));
        }
        if self.preallocate_levels > self.levels_max {
            return bad(format!(
                "preallocate_levels {} above levels_max {} (each level is 16x the one above: \
                 1 allocates about 280 MiB at the default geometry, 2 about 4.4 GiB more)",
                self.preallocate_levels, self.levels_max
            ));
        }
        Ok(())
    }
}

/// Counters and sizes of an open database (a snapshot).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    /// Whether upserts are logged (`Options::recovery_log`). False: a crash loses every
    /// record whose DRAM entry has not migrated since it was written.
    pub recovery_log: bool,
    /// Persistent levels whose files this open allocated whole (`preallocate_levels`). A
    /// read-only open allocates nothing and reports 0, whatever a writable open allocated
    /// before (the stat describes this session, as `puts` does, not the files).
    pub levels_preallocated: usize,
    /// `hash` or `range` (`Options::partitioning`).
    pub partitioning: &'static str,
    /// Range partitioning's significant key bits, as stored at creation; 0 when partitioned
    /// by hash (the option's default of 64 then means nothing), in every open mode.
    pub significant_key_bits: u32,
    pub puts: u64,
    /// DRAM migrations done by the migration thread (or `migrate_queued`), and by upserts.
    pub migrations_background: u64,
    pub migrations_inline: u64,
    pub deletes: u64,
    pub gets: u64,
    /// Migrations out of each level (index 0: DRAM).
    pub migrations: Vec<u64>,
    /// Persistent levels that exist.
    pub levels: usize,
    /// Records found in the recovery log at open and put back into the DRAM level.
    pub recovered_records: u64,
    pub log_appends: u64,
    pub log_compactions_read: u64,
    pub log_compactions_skipped_read: u64,
    pub log_entries_copied: u64,
    /// Cache lines flushed per persistent level (index 0: level 1).
    pub level_lines_flushed: Vec<u64>,
    /// 256-byte media blocks flushed per persistent level.
    pub level_blocks_flushed: Vec<u64>,
    pub log_lines_flushed: u64,
    pub fences: u64,
    /// Barriers of the log that reached the device (`Write`/`Msync`): fewer than the log's
    /// fences when concurrent upserts shared one (group commit).
    pub log_syncs: u64,
    /// Log barriers those syncs covered (writers per sync = this / `log_syncs`), and the
    /// microseconds the syncs took.
    pub log_sync_barriers: u64,
    pub log_sync_us: u64,
    /// Distinct 4 KiB log pages those syncs wrote back (pages per sync = this / `log_syncs`).
    pub log_sync_pages: u64,
    /// Media bytes written (flushed lines × 64) per byte of user records (16 per upsert).
    pub write_amplification: f64,
    /// The chapter's model for it: 3 · log_f(N / dram capacity… ) + 1 (see docs/plush.md).
    pub write_amplification_model: f64,
    /// DRAM reserved: the DRAM level, its locks and the filter copies.
    pub dram_bytes: u64,
    pub dram_entries_log2: u32,
    pub fanout_log2: u32,
    pub log_partitions: usize,
    /// Payload log: records appended, their bytes, segments and bytes held, bytes known to be
    /// garbage (shadowed versions migrations met), collections run, records they moved, bytes
    /// they freed, dangling pointers migrations dropped.
    pub payload_appends: u64,
    pub payload_bytes_appended: u64,
    pub payload_segments: u64,
    pub payload_bytes: u64,
    pub payload_garbage_bytes: u64,
    pub payload_gc_runs: u64,
    pub payload_gc_records_moved: u64,
    pub payload_gc_bytes_freed: u64,
    pub payload_dangling_dropped: u64,
}

/// What `verify` checked.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VerifyReport {
    pub levels: usize,
    pub entries_checked: u64,
    /// Records (every version, tombstones included) on the persistent levels.
    pub records: u64,
    /// Records in the DRAM level: acknowledged, durable in the recovery log, not yet migrated.
    pub dram_records: u64,
    pub log_chunks_in_use: u64,
    pub log_entries: u64,
    /// Records (on the levels and in the DRAM level) pointing into the payload log whose
    /// record was read and checked, and those whose segment was collected (shadowed versions
    /// a migration has not dropped yet: not a problem; a pointer into a segment that is missing
    /// without having been collected fails `verify`).
    pub payload_records: u64,
    pub payload_dangling: u64,
    /// Level records whose value sits in the bucket (8-byte key and value) in a level file
    /// written before level files carried record checksums: `verify` checks only their
    /// structure (the key hashes to its entry and is in its filter). Zero for level files of
    /// the current version, whose entries carry checksums (formats/plush.md).
    pub records_not_checksummed: u64,
}

/// What reading one log partition found that only the whole log can judge.
struct LogFindings {
    partition: usize,
    suspects: Vec<Suspect>,
    /// The partition's newest sequence numbers, newest first (at most `NEWEST_KEPT`).
    newest: Vec<u64>,
    chunks_in_use: usize,
    entries: usize,
}

/// A Plush hash table: the engine plus, with background migration, its migration thread.
pub struct Plush {
    core: Arc<Core>,
    migrator: Option<std::thread::JoinHandle<()>>,
}

/// Entries queued for the migration thread (each at most once: bounded by the DRAM entries).
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    wake: parking_lot::Condvar,
}

#[derive(Default)]
struct QueueState {
    entries: std::collections::VecDeque<usize>,
    stop: bool,
}

/// The engine state shared with the migration thread.
struct Core {
    storage: Box<dyn Storage>,
    opts: Options,
    geo: Geometry,
    dram: DramLevel,
    levels: Box<[OnceLock<Level>]>,
    level_create: Mutex<()>,
    logs: Box<[Mutex<Partition>]>,
    log_region: Option<Arc<Region>>,
    /// Appends drawn so far by a packed log (which partition the next one goes to).
    log_pack_cursor: AtomicU64,
    payload: PayloadLog,
    puts: AtomicU64,
    deletes: AtomicU64,
    gets: AtomicU64,
    migrations: Box<[AtomicU64]>,
    migrations_background: AtomicU64,
    migrations_inline: AtomicU64,
    /// Per DRAM entry: queued for background migration and not yet taken.
    queued: Box<[std::sync::atomic::AtomicBool]>,
    queue: Queue,
    recovered: u64,
    /// Range partitioning: `64 - significant_key_bits` (keys shift left by it before
    /// placement); `None`: placement by hash.
    range_shift: Option<u32>,
    _lock: Option<DirLock>,
}

struct DirLock(std::fs::File);

impl Drop for DirLock {
    fn drop(&mut self) {
        use std::os::unix::io::AsRawFd;
        // SAFETY: unlocking a descriptor this struct owns.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// A read-only open's shared lock: beside other readers, not beside a writer. A directory
/// without `LOCK` (never opened writable by this build) is read without one, since a
/// read-only open creates nothing.
fn lock_dir_shared(dir: &Path) -> Result<Option<DirLock>> {
    use std::os::unix::io::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    // SAFETY: flock on a descriptor we own.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    if rc != 0 {
        return Err(Error::Locked {
            path: dir.to_path_buf(),
        });
    }
    Ok(Some(DirLock(f)))
}

fn lock_dir(dir: &Path) -> Result<DirLock> {
    use std::os::unix::io::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io("open", &path, e))?;
    // SAFETY: flock on a descriptor we own.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(Error::Locked {
            path: dir.to_path_buf(),
        });
    }
    // A failed creation removes the lock file (`undo_creation`): a lock taken on the file it
    // removed would exclude nobody, so the lock counts only while `LOCK` is still this file.
    {
        use std::os::unix::fs::MetadataExt;
        let held = f.metadata().map_err(|e| Error::io("stat", &path, e))?;
        let named = std::fs::metadata(&path).ok();
        if named.is_none_or(|m| (m.dev(), m.ino()) != (held.dev(), held.ino())) {
            return Err(Error::Locked {
                path: dir.to_path_buf(),
            });
        }
    }
    Ok(DirLock(f))
}

/// The recovery log's file (every partition).
pub const LOG_FILE: &str = "log.plush";
/// The lock file (`flock`ed: exclusive by a writer, shared by readers).
const LOCK_FILE: &str = "LOCK";

/// Takes back what a failed creation of a database in `dir` wrote, so that the directory is
/// as before (a failed creation used to leave a manifest whose geometry no open could use):
/// the manifest and every Plush file (there were none before; see `refuse_foreign_files`),
/// the lock file when `lock_made`, and the directories in `made_dirs` (topmost first) when
/// they are empty. Best effort: what cannot be removed stays, and the open's own error is
/// what the caller hears of.
fn undo_creation(dir: &Path, made_dirs: &[PathBuf], lock_made: bool) {
    let names = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for n in names {
        let base = n
            .strip_suffix(crate::persist::CLEARING_SUFFIX)
            .unwrap_or(&n);
        if base == MANIFEST || is_plush_file(base) {
            let _ = std::fs::remove_file(dir.join(&n));
        }
    }
    if lock_made {
        let _ = std::fs::remove_file(dir.join(LOCK_FILE));
    }
    for d in made_dirs.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
}

impl Plush {
    /// Opens (or creates) the database in directory `path`, with files mapped by
    /// `opts.backend`.
    pub fn open(path: &Path, opts: Options) -> Result<Plush> {
        Ok(Plush::start(Core::open(path, opts)?))
    }

    /// Opens (or creates) the database on `storage` (the file back ends, or the crash
    /// simulator).
    pub fn open_with(storage: Box<dyn Storage>, opts: Options) -> Result<Plush> {
        Ok(Plush::start(Core::open_with(storage, opts)?))
    }

    fn start(core: Core) -> Plush {
        let core = Arc::new(core);
        let background = core.opts.migration == Migration::Background && !core.opts.read_only;
        let migrator = background.then(|| {
            let c = core.clone();
            std::thread::Builder::new()
                .name("plush-migrate".into())
                .spawn(move || c.migration_thread())
        });
        // A thread that cannot be spawned leaves migration inline (upserts migrate full
        // entries themselves).
        let migrator = migrator.and_then(|r| r.ok());
        Plush { core, migrator }
    }

    /// Inserts or overwrites `key` (the same key as the 8 bytes `key.to_le_bytes()` in
    /// [`Plush::put_bytes`]). A value whose top 16 bits are all ones (the tombstone and
    /// pointer space) is stored out of place in the payload log.
    pub fn put(&self, key: u64, value: u64) -> Result<()> {
        self.core.writable("put")?;
        self.core.put(key, value)
    }

    /// Deletes `key` (writes a tombstone).
    pub fn delete(&self, key: u64) -> Result<()> {
        self.core.writable("delete")?;
        self.core.delete(key)
    }

    /// The value of `key`, or `None` when it is absent or deleted. A key written with
    /// [`Plush::put_bytes`] and a value that is not 8 bytes is an `InvalidArgument` error.
    pub fn get(&self, key: u64) -> Result<Option<u64>> {
        self.core.get(key)
    }

    /// Inserts or overwrites a key of up to [`KEY_BYTES_MAX`] bytes with a value of up to
    /// [`VALUE_BYTES_MAX`] bytes. An 8-byte key with an 8-byte value is stored in its bucket;
    /// anything else is appended to the payload log, and the bucket holds the key's bucket key
    /// and a pointer to the record.
    pub fn put_bytes(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.core.writable("put")?;
        self.core.put_bytes(key, value)
    }

    /// The value of a key of any length, or `None`.
    pub fn get_bytes(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.core.get_bytes(key)
    }

    /// Deletes a key of any length (writes a tombstone under its bucket key).
    pub fn delete_bytes(&self, key: &[u8]) -> Result<()> {
        self.core.writable("delete")?;
        self.core.check_key(key)?;
        self.core.delete(bucket_key(key))
    }

    /// Up to `limit` live records with keys at or above `start`, in ascending key order
    /// (range-partitioned databases only; partitioned by hash, an `InvalidArgument` error).
    /// Records stored with a value that is not 8 bytes are an `InvalidArgument` error, as in
    /// [`Plush::get`]; read them with [`Plush::scan_bytes`]. Not a snapshot: each key's value
    /// is one that was its newest at some moment of the scan.
    pub fn scan(&self, start: u64, limit: usize) -> Result<Vec<(u64, u64)>> {
        let raw = self.core.scan_raw(start, limit)?;
        if raw.iter().all(|(_, v)| !is_pointer(*v)) {
            return Ok(raw);
        }
        self.core
            .scan_bytes(start, limit)?
            .into_iter()
            .map(|(k, v)| match <[u8; 8]>::try_from(v.as_slice()) {
                Ok(b) => Ok((k, u64::from_le_bytes(b))),
                Err(_) => Err(Error::InvalidArgument(format!(
                    "key {k:#x} holds a {}-byte value; scan it with scan_bytes",
                    v.len()
                ))),
            })
            .collect()
    }

    /// [`Plush::scan`] with values of any length.
    pub fn scan_bytes(&self, start: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>> {
        self.core.scan_bytes(start, limit)
    }

    /// Collects payload-log garbage now: every sealed segment at least half garbage, or with
    /// `all`, every sealed segment (its live records are copied forward, then it is removed).
    /// Returns the segments removed.
    pub fn collect_garbage(&self, all: bool) -> Result<usize> {
        self.core.writable("collect_garbage")?;
        self.core.collect_garbage(all)
    }

    /// Migrates every non-empty DRAM entry into level 1 (a checkpoint: the recovery log then
    /// holds nothing live).
    pub fn checkpoint(&self) -> Result<()> {
        self.core.writable("checkpoint")?;
        self.core.checkpoint()
    }

    /// Migrates the entries queued for background migration, in this thread (with
    /// [`Migration::Manual`]; with `Background` the thread does it). Returns how many.
    pub fn migrate_queued(&self) -> Result<usize> {
        self.core.writable("migrate_queued")?;
        let mut n = 0;
        while let Some(d) = self.core.next_queued(false) {
            n += self.core.migrate_queued_entry(d)? as usize;
        }
        Ok(n)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.core.stats()
    }

    /// Checks every level entry (size within capacity, every key placed where its hash says,
    /// every key in its bucket's filter) and every log chunk; the first problem is an error.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.core.verify()
    }

    /// Where the database lives.
    pub fn location(&self) -> PathBuf {
        self.core.storage.location()
    }

    /// The effective options (geometry from the manifest).
    pub fn options(&self) -> &Options {
        &self.core.opts
    }
}

impl Plush {
    /// Closes the database: stops the migration thread and, without the recovery log
    /// (`recovery_log` off), checkpoints the DRAM level so that nothing acknowledged is lost;
    /// that checkpoint's error is returned here (a drop ignores it).
    pub fn close(mut self) -> Result<()> {
        self.stop_migrator();
        self.core.checkpoint_unlogged()?;
        self.core.record_clean_close()
    }

    fn stop_migrator(&mut self) {
        if let Some(h) = self.migrator.take() {
            self.core.queue.state.lock().stop = true;
            self.core.queue.wake.notify_all();
            let _ = h.join();
        }
    }
}

impl Drop for Plush {
    fn drop(&mut self) {
        self.stop_migrator();
        if self.core.checkpoint_unlogged().is_ok() {
            let _ = self.core.record_clean_close();
        }
    }
}

impl Core {
    /// The migration thread: takes queued DRAM entries until told to stop. Queued entries left
    /// at the stop stay in the DRAM level (their records are in the recovery log).
    fn migration_thread(&self) {
        while let Some(d) = self.next_queued(true) {
            // An error leaves the entry to its next upsert, which migrates inline and reports
            // the error to its caller.
            let _ = self.migrate_queued_entry(d);
        }
    }

    /// The next queued entry; waits for one when `wait` (returns `None` at the stop).
    fn next_queued(&self, wait: bool) -> Option<usize> {
        let mut st = self.queue.state.lock();
        loop {
            if st.stop {
                return None;
            }
            if let Some(d) = st.entries.pop_front() {
                self.queued[d].store(false, Ordering::Release);
                return Some(d);
            }
            if !wait {
                return None;
            }
            self.queue.wake.wait(&mut st);
        }
    }

    /// Migrates queued entry `d` if it is still filled past the mark (an inline migration may
    /// have emptied it meanwhile). Returns whether it migrated.
    fn migrate_queued_entry(&self, d: usize) -> Result<bool> {
        let _guard = self.dram.locks[d].lock();
        if self.dram.meta_of(d).1 < self.background_mark() {
            return Ok(false);
        }
        self.migrate_dram(d)?;
        self.migrations_background.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    fn background_mark(&self) -> usize {
        (self.geo.entry_capacity() * BACKGROUND_FILL / 4).max(1)
    }

    /// Queues `d` for the migration thread unless it is queued already.
    fn enqueue(&self, d: usize) {
        if self.queued[d].swap(true, Ordering::AcqRel) {
            return;
        }
        self.queue.state.lock().entries.push_back(d);
        self.queue.wake.notify_one();
    }

    /// Opens (or creates) the database in directory `path`.
    fn open(path: &Path, opts: Options) -> Result<Core> {
        if path.as_os_str().is_empty() {
            return Err(Error::InvalidArgument(
                "path is empty; give a directory (an existing database or a new path)".into(),
            ));
        }
        // The geometry of an existing database is the manifest's: options are validated after
        // the stored geometry replaced the defaults (`read_or_write_manifest`), so that a
        // message names the geometry in force.
        if !path.join(MANIFEST).is_file() {
            opts.validate()?;
        }
        if opts.read_only {
            return Core::open_read_only(path, opts);
        }
        // What a creation that fails must take back: the directories it made (the topmost
        // first) and, when it made it, the lock file.
        let mut made_dirs: Vec<PathBuf> = path
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
            .map(Path::to_path_buf)
            .collect();
        made_dirs.reverse();
        if !path.exists() {
            if !opts.create_if_missing {
                return Err(Error::NotADatabase {
                    path: path.to_path_buf(),
                    detail: "the directory does not exist (create_if_missing is off)".into(),
                });
            }
            std::fs::create_dir_all(path).map_err(|e| Error::io("create_dir", path, e))?;
        } else if !path.is_dir() {
            return Err(Error::NotADatabase {
                path: path.to_path_buf(),
                detail: "not a directory".into(),
            });
        }
        let storage = FileStorage::with_group(path, opts.backend, opts.sync, opts.group_commit())?
            .elide_tmpfs_syncs(opts.elide_tmpfs_syncs);
        if !path.join(MANIFEST).exists() {
            // Refused before the lock file is created: nothing is written into a directory
            // that is not (or no longer) a whole database.
            refuse_foreign_files(&storage)?;
            if !opts.create_if_missing {
                return Err(Error::NotADatabase {
                    path: path.to_path_buf(),
                    detail: format!("no {MANIFEST} (create_if_missing is off)"),
                });
            }
        }
        let lock_existed = path.join(LOCK_FILE).exists();
        // Refused by the lock: another opener is there, and what is in the directory is its.
        let lock = lock_dir(path)?;
        // Decided under the lock: only its holder creates a manifest, so another process's
        // creation is never taken for this one's.
        let new = !path.join(MANIFEST).exists();
        match Core::open_with(Box::new(storage), opts) {
            Ok(mut db) => {
                db._lock = Some(lock);
                Ok(db)
            }
            Err(e) => {
                if new {
                    // Every Plush file in the directory is this open's: a directory with
                    // others and no manifest is refused before anything is written. The
                    // lock is held until its file is gone (see `lock_dir`).
                    undo_creation(path, &made_dirs, !lock_existed);
                    drop(lock);
                }
                Err(e)
            }
        }
    }

    /// See [`Options::read_only`].
    fn open_read_only(path: &Path, opts: Options) -> Result<Core> {
        if let Err(e) = std::fs::metadata(path) {
            // A directory on the way that this user may not search: not "does not exist".
            if e.kind() == std::io::ErrorKind::PermissionDenied {
                return Err(Error::io("stat", path, e));
            }
        }
        if !path.is_dir() {
            let what = if path.exists() {
                "not a directory"
            } else {
                "the directory does not exist"
            };
            return Err(Error::NotADatabase {
                path: path.to_path_buf(),
                detail: format!("{what} (a read-only open creates nothing)"),
            });
        }
        let storage = FileStorage::with_group(path, opts.backend, false, opts.group_commit())?
            .into_read_only();
        if !path.join(MANIFEST).exists() {
            refuse_foreign_files(&storage)?;
            return Err(Error::NotADatabase {
                path: path.to_path_buf(),
                detail: format!("no {MANIFEST} (a read-only open creates nothing)"),
            });
        }
        let lock = lock_dir_shared(path)?;
        let mut db = Core::open_with(Box::new(storage), opts)?;
        db._lock = lock;
        Ok(db)
    }

    /// Refuses a change on a read-only handle.
    fn writable(&self, op: &'static str) -> Result<()> {
        if self.opts.read_only {
            return Err(Error::ReadOnly {
                path: self.storage.location(),
                op,
            });
        }
        Ok(())
    }

    fn open_with(storage: Box<dyn Storage>, mut opts: Options) -> Result<Core> {
        read_or_write_manifest(storage.as_ref(), &mut opts)?;
        opts.validate()?;
        let geo = opts.geometry();
        let dram = DramLevel::new(geo);
        let levels: Box<[OnceLock<Level>]> =
            (0..opts.levels_max).map(|_| OnceLock::new()).collect();
        let (recorded_levels, _) = recorded_files(storage.as_ref())?;
        for num in 1..=opts.levels_max {
            let name = level_file_name(num);
            let len = level_file_bytes(geo, num);
            if num <= recorded_levels {
                check_recorded(storage.as_ref(), &name, len)?;
            }
            let Some(r) = storage.open_region(&name, len, false, RegionKind::Level)? else {
                break;
            };
            let armed = r.words()[0].load(Ordering::Acquire) != 0;
            if num <= recorded_levels && !armed {
                return Err(Error::corruption(
                    storage.location().join(&name),
                    0,
                    format!("{name} has a zeroed header, but {MANIFEST} records its creation"),
                ));
            }
            if opts.read_only && !armed {
                // A creation a crash cut short holds no record (the header is armed before
                // any migration reaches the level); a writable open arms it, a read-only one
                // cannot store into its read-only mapping and reads it as absent.
                break;
            }
            let level = Level::open(
                Region::new(&storage.location().join(&name).to_string_lossy(), r),
                geo,
                num,
                num <= opts.dram_filter_levels,
            )?;
            let _ = levels[num - 1].set(level);
        }
        let checked_from = recorded_payload_number(storage.as_ref(), MANIFEST_PAYLOAD_FROM_WORD)?;
        let highest = recorded_payload_number(storage.as_ref(), MANIFEST_PAYLOAD_HIGHEST_WORD)?;
        let payload = PayloadLog::open(
            storage.as_ref(),
            opts.payload_segment_bytes,
            checked_from.unwrap_or(0),
            highest.unwrap_or(0),
        )?;
        if checked_from.is_none() && !opts.read_only {
            // A new database, or one whose collections removed segment files: from here on
            // every segment number leaves a file.
            let next = payload.next_number();
            record_payload_number(storage.as_ref(), MANIFEST_PAYLOAD_FROM_WORD, next)?;
            if next > 1 {
                record_payload_created(storage.as_ref(), next - 1)?;
                payload.recorded_highest(next - 1);
            }
        }
        let mut db = Core {
            payload,
            storage,
            geo,
            dram,
            levels,
            level_create: Mutex::new(()),
            logs: Box::new([]),
            log_region: None,
            log_pack_cursor: AtomicU64::new(0),
            puts: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            gets: AtomicU64::new(0),
            migrations: (0..=opts.levels_max).map(|_| AtomicU64::new(0)).collect(),
            migrations_background: AtomicU64::new(0),
            migrations_inline: AtomicU64::new(0),
            queued: (0..geo.entries(0))
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
            queue: Queue::default(),
            recovered: 0,
            range_shift: (opts.partitioning == Partitioning::Range)
                .then(|| 64 - opts.significant_key_bits),
            _lock: None,
            opts,
        };
        db.recover()?;
        if !db.opts.read_only && clean_close(db.storage.as_ref())?.is_some() {
            // From here on the log may change: the record of the clean close goes first.
            clear_clean_close(db.storage.as_ref())?;
        }
        // A crash inside a log compaction can leave a partition without a free chunk; the
        // next compaction could then not start. Migrating the DRAM level makes every log
        // entry dead, so that compaction may clear its oldest chunk first.
        if !db.opts.read_only && db.logs.iter().any(|p| p.lock().free_chunks() == 0) {
            db.checkpoint()?;
        }
        // Without the log, records replayed from an earlier logged session are migrated at
        // once: an unlogged upsert that replaced one of them must not be undone by a later
        // crash replaying the old version.
        if !db.opts.read_only && !db.opts.recovery_log && db.recovered > 0 {
            db.checkpoint()?;
        }
        if !db.opts.read_only {
            db.check_room_to_preallocate()?;
            for num in 1..=db.opts.preallocate_levels.min(db.opts.levels_max) {
                // Out of space: the I/O error names the level file, as any allocation's does.
                db.level(num)?.reserve_all()?;
            }
        }
        Ok(db)
    }

    /// Refuses, before allocating anything, a preallocation whose level files need more blocks
    /// than the file system has free: a full disk would fail the open half way and keep what
    /// it allocated, and every other process on the disk would feel it.
    fn check_room_to_preallocate(&self) -> Result<()> {
        let Some(free) = self.storage.free_bytes() else {
            return Ok(());
        };
        let n = self.opts.preallocate_levels.min(self.opts.levels_max);
        let mut need = 0u64;
        for num in 1..=n {
            self.level(num)?; // creates the (sparse) file
            need += self
                .storage
                .unallocated_bytes(&level_file_name(num))?
                .unwrap_or(0);
        }
        if need > free {
            let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
            return Err(Error::io(
                "preallocate",
                self.storage.location(),
                std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    format!(
                        "preallocate_levels={n} needs {:.1} GiB more for the level files, the \
                         file system has {:.1} GiB free; open with a lower preallocate_levels \
                         (0 allocates each entry when a migration first reaches it)",
                        gib(need),
                        gib(free)
                    ),
                ),
            ));
        }
        Ok(())
    }

    /// Reads every log partition and puts the records the first persistent level does not
    /// cover back into the DRAM level; sets every DRAM epoch. Writes nothing but fresh chunk
    /// headers, so a recovery that crashes can simply run again.
    fn recover(&mut self) -> Result<()> {
        let parts = self.opts.log_partitions;
        let bytes = self.opts.log_chunk_bytes * self.opts.log_chunks * parts;
        let (_, log_recorded) = recorded_files(self.storage.as_ref())?;
        if log_recorded {
            check_recorded(self.storage.as_ref(), LOG_FILE, bytes)?;
        }
        // A log file that does not exist yet is created zeroed: no chunk is in use, and
        // recovery need not read a header. A file that exists but is not recorded (a crash
        // while the first open armed its chunks) is read like any other.
        let new = self.storage.region_len(LOG_FILE)?.is_none();
        let r = self
            .storage
            .open_region(LOG_FILE, bytes, true, RegionKind::Log)?
            .ok_or_else(|| Error::io("open", LOG_FILE, std::io::ErrorKind::NotFound.into()))?;
        // Named by its full path: corruption found in it names the file, as the others do.
        let log_path = self.storage.location().join(LOG_FILE);
        let log = Arc::new(Region::new(&log_path.to_string_lossy(), r));
        self.log_region = Some(log.clone());
        let regions: Vec<usize> = (0..parts).collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(parts);
        let per = parts.div_ceil(threads);
        let (chunk_bytes, chunks) = (self.opts.log_chunk_bytes, self.opts.log_chunks);
        // Level 1's epochs, each checked against its entry's slot once, in directory order:
        // recovery compares every log entry against its DRAM entry's.
        let l1_epochs: Vec<u64> = (0..self.geo.entries(0))
            .map(|d| self.level1_epoch(d))
            .collect::<Result<_>>()?;
        let l1 = l1_epochs.as_slice();
        let this = &*self;
        // Read every partition in parallel, keeping the entries the first level does not
        // cover, then replay them per DRAM entry in sequence order (a packed log spreads an
        // entry's versions over partitions; a log by key hash keeps each entry's in one
        // partition, where its sequence numbers already order them), the DRAM entries split
        // among the threads.
        type Read = Vec<(usize, Partition, Vec<(usize, LogEntry)>, LogFindings)>;
        let log_file = log_path.as_path();
        let mut results: Vec<Result<Read>> = Vec::new();
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            let mut rest = regions;
            while !rest.is_empty() {
                let take = per.min(rest.len());
                let group: Vec<usize> = rest.drain(..take).collect();
                let log = log.clone();
                handles.push(s.spawn(move || -> Result<Read> {
                    let mut out = Vec::new();
                    for p in group {
                        let rec = if new {
                            Partition::create(log.clone(), p, chunk_bytes, chunks)?
                        } else {
                            Partition::recover(log.clone(), p, chunk_bytes, chunks)?
                        };
                        let findings = this.check_partition(p, &rec, log_file, Some(l1))?;
                        let mut live = Vec::new();
                        for e in rec.entries {
                            let d = this.geo.entry_of(this.place(e.key), 0);
                            if e.epoch > l1[d] {
                                live.push((d, e));
                            }
                        }
                        out.push((p, rec.partition, live, findings));
                    }
                    Ok(out)
                }));
            }
            for h in handles {
                results.push(h.join().unwrap_or_else(|_| {
                    Err(Error::InvalidArgument("a recovery thread panicked".into()))
                }));
            }
        });
        let mut logs: Vec<Option<Partition>> = (0..parts).map(|_| None).collect();
        let mut shards: Vec<Vec<(usize, LogEntry)>> = (0..threads).map(|_| Vec::new()).collect();
        let mut findings = Vec::new();
        let mut next_seq = 1;
        for r in results {
            for (i, p, live, f) in r? {
                next_seq = p.next_seq().max(next_seq);
                for (d, e) in live {
                    shards[d % threads].push((d, e));
                }
                logs[i] = Some(p);
                findings.push(f);
            }
        }
        let clean = clean_close(self.storage.as_ref())?;
        let torn = self.judge_log(&findings, clean, log_file)?;
        if !self.opts.read_only {
            // Torn tails are zeroed, so that the next session finds the end of each chunk's
            // data there (and a clean close can vouch for every entry below it).
            for (p, s) in &torn {
                if let Some(part) = logs[*p].as_mut() {
                    part.clear_torn(s.chunk, s.slot, s.last_slot)?;
                }
            }
        }
        let log_path = log_file;
        let replayed: Vec<Result<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = shards
                .into_iter()
                .map(|mut shard| {
                    s.spawn(move || {
                        shard.sort_unstable_by_key(|(d, e)| (*d, e.seq));
                        this.replay(shard.iter().map(|(_, e)| e), log_path, l1)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::InvalidArgument("a recovery thread panicked".into()))
                    })
                })
                .collect()
        });
        for n in replayed {
            self.recovered += n?;
        }
        let seq = Arc::new(AtomicU64::new(next_seq));
        self.logs = logs
            .into_iter()
            .map(|p| {
                p.map(|mut p| {
                    p.share_seq(seq.clone());
                    Mutex::new(p)
                })
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::InvalidArgument("a log partition was not recovered".into()))?
            .into_boxed_slice();
        if !log_recorded && !self.opts.read_only {
            record_files(self.storage.as_ref(), 0, true)?;
        }
        // Entries without a recovered record start at the epoch after their level-1 twin's.
        for (d, l1) in l1_epochs.iter().enumerate() {
            let (epoch, size) = self.dram.meta_of(d);
            if size == 0 {
                self.dram.reset(d, l1 + 1, 0);
            } else {
                debug_assert!(epoch > *l1);
            }
        }
        Ok(())
    }

    /// What one partition's recovery leaves for the whole log to judge, after checking its
    /// chunks whose header does not decode: such a chunk is free only when every entry its
    /// body still holds was migrated (level 1's checked epoch covers it) or copied to another
    /// chunk of the partition (its sequence number is there); otherwise the header is damage
    /// and the chunk the only copy of those records.
    /// `l1`: level 1's checked epochs, when the caller read them already.
    fn check_partition(
        &self,
        p: usize,
        rec: &Recovered,
        log: &Path,
        l1: Option<&[u64]>,
    ) -> Result<LogFindings> {
        for o in &rec.orphans {
            let mut lost = Vec::new();
            for e in &o.entries {
                if rec.entries.binary_search_by_key(&e.seq, |x| x.seq).is_ok() {
                    continue;
                }
                let d = self.geo.entry_of(self.place(e.key), 0);
                let epoch = match l1 {
                    Some(l1) => l1[d],
                    None => self.level1_epoch(d)?,
                };
                if e.epoch > epoch {
                    lost.push(e);
                }
            }
            if let Some(first) = lost.first() {
                return Err(Error::corruption(
                    log,
                    o.offset,
                    format!(
                        "log partition {p} chunk {}: the chunk header does not check, yet the \
                         chunk holds {} records that were neither migrated nor copied to \
                         another chunk (the first: key {:#x}, sequence number {}): a damaged \
                         header, not a free chunk{RESTORE_HINT}",
                        o.chunk,
                        lost.len(),
                        first.key,
                        first.seq
                    ),
                ));
            }
        }
        Ok(LogFindings {
            partition: p,
            suspects: rec.suspects.clone(),
            newest: rec
                .entries
                .iter()
                .rev()
                .take(NEWEST_KEPT)
                .map(|e| e.seq)
                .collect(),
            chunks_in_use: rec.partition.chunks_in_use(),
            entries: rec.entries.len(),
        })
    }

    /// Tells torn tails from damage, with every partition's findings in view; returns the
    /// torn tails (partition, slot). A crash tears only appends whose barrier had not
    /// completed; a writer stores and flushes its entry under its partition's lock before the
    /// next entry of that partition draws its sequence number, and a barrier covers every
    /// store flushed before it. So when an entry is torn, every entry with a later sequence
    /// number than the valid one after it in its chunk was still waiting for its barrier too:
    /// at most one per writer, `TORN_TAIL_MAX` in all. More is damage. After a clean close
    /// (manifest word 12) nothing was in flight: every invalid entry below a chunk's end is
    /// damage, and the log's newest sequence number must be the one recorded.
    fn judge_log(
        &self,
        findings: &[LogFindings],
        clean: Option<u32>,
        log: &Path,
    ) -> Result<Vec<(usize, Suspect)>> {
        let mut clean = clean;
        if let Some(next) = clean {
            let newest = findings.iter().filter_map(|f| f.newest.first()).max();
            let have = newest.map_or(1, |s| s + 1);
            // Compared in the record's 32 bits, as a signed distance.
            let ahead = (have as u32).wrapping_sub(next) as i32;
            if ahead < 0 {
                return Err(Error::corruption(
                    log,
                    0,
                    format!(
                        "the log's newest entries are gone: {MANIFEST} records a clean close \
                         before sequence number {next}, the newest valid entry is {}{RESTORE_HINT}",
                        have - 1
                    ),
                ));
            }
            if ahead > 0 {
                // Entries appended after the record: a build that does not know it wrote
                // them (and did not clear it). The crash rules apply.
                clean = None;
            }
        }
        let mut torn = Vec::new();
        for f in findings {
            for s in &f.suspects {
                let (p, c, n) = (f.partition, s.chunk, s.slot);
                if clean.is_some() {
                    return Err(Error::corruption(
                        log,
                        s.offset,
                        format!(
                            "log partition {p} chunk {c}: entry {n} is damaged (the database \
                             was closed cleanly: no append was cut short){RESTORE_HINT}"
                        ),
                    ));
                }
                if s.copy_target {
                    // A compaction's copy: its source chunk still holds the entry.
                    torn.push((p, s.clone()));
                    continue;
                }
                if let Some(z) = s.after.iter().min() {
                    let newer_in = |f: &LogFindings| f.newest.iter().filter(|q| *q >= z).count();
                    let newer = s.after.len()
                        + if self.opts.log_pack_groups {
                            findings.iter().map(newer_in).sum::<usize>()
                        } else {
                            newer_in(f)
                        };
                    if newer > TORN_TAIL_MAX {
                        return Err(Error::corruption(
                            log,
                            s.offset,
                            format!(
                                "log partition {p} chunk {c}: entry {n} is damaged and more \
                                 than {TORN_TAIL_MAX} valid entries of the log are newer than \
                                 the one after it (a crash tears only the last appends, one \
                                 per writer){RESTORE_HINT}"
                            ),
                        ));
                    }
                }
                torn.push((p, s.clone()));
            }
        }
        Ok(torn)
    }

    /// The placement word of `key` ([`Geometry::entry_of`] reads a level's entry from it):
    /// its hash, or with range partitioning its significant bits, top down.
    #[inline]
    fn place(&self, key: u64) -> u64 {
        match self.range_shift {
            None => hash_key(key),
            Some(shift) => self.geo.range_place(key << shift),
        }
    }

    /// The filter bits of `key` (placement word `h`): drawn from the key's hash in both modes,
    /// so that they stay independent of the placement bits.
    #[inline]
    fn mask_of(&self, key: u64, h: u64) -> [u64; 2] {
        match self.range_shift {
            None => filter_mask(h),
            Some(_) => filter_mask(hash_key(key)),
        }
    }

    /// Refuses a key longer than [`KEY_BYTES_MAX`], and with range partitioning one that is
    /// not 8 bytes (an integer key, little-endian as [`Plush::put`] stores it).
    fn check_key(&self, key: &[u8]) -> Result<()> {
        check_key(key)?;
        if self.range_shift.is_some() && key.len() != 8 {
            return Err(Error::InvalidArgument(format!(
                "key is {} bytes; a range-partitioned hash database places 8-byte integer keys \
                 only",
                key.len()
            )));
        }
        Ok(())
    }

    /// Up to `limit` live records with keys at or above `start`, ascending (values as stored
    /// in buckets: inline values or payload pointers). Each DRAM entry's subtree is read under
    /// its lock, so every record returned was its key's newest version at one moment of the
    /// scan; the scan as a whole is not a snapshot.
    fn scan_raw(&self, start: u64, limit: usize) -> Result<Vec<(u64, u64)>> {
        let Some(shift) = self.range_shift else {
            return Err(Error::InvalidArgument(
                "scan needs key order: this hash database is partitioned by hash; create it \
                 with partitioning = range to scan"
                    .into(),
            ));
        };
        let mut out = Vec::with_capacity(limit.min(1 << 16));
        if limit == 0 || (shift > 0 && start >> (64 - shift) != 0) {
            return Ok(out);
        }
        let p = self.place(start);
        let first = self.geo.entry_of(p, 0);
        let cap = self.geo.entry_capacity();
        let mut recs = Vec::with_capacity(cap);
        let mut found: Vec<(u64, usize, u64)> = Vec::new();
        for d in first..self.geo.entries(0) {
            let _guard = self.dram.locks[d].lock();
            found.clear();
            // Keys below `start` (only in the first entry) are dropped before the sort; every
            // version of a kept key stays, so the newest still wins.
            let floor = if d == first { start } else { 0 };
            collect_newest(&self.dram.entry(d), cap, &mut recs);
            found.extend(
                recs.iter()
                    .filter(|r| r.0 >= floor)
                    .map(|&(k, v)| (k, 0, v)),
            );
            for num in 1..=self.opts.levels_max {
                let Some(level) = self.levels[num - 1].get() else {
                    break;
                };
                // Entry d's descendants on this level, from the start key's on.
                let span = 1usize << (self.geo.placement_bits(num) - self.geo.dram_entries_log2);
                let mut lo = d * span;
                if d == first {
                    lo = lo.max(self.geo.entry_of(p, num));
                }
                for i in lo..(d + 1) * span {
                    let meta = level.meta_word(i);
                    if crate::layout::unpack_meta(meta).1 == 0 {
                        // Empty, unless its size word was damaged to 0 (no slot vouches).
                        level.check_meta(i, meta)?;
                        continue;
                    }
                    // Under the DRAM entry's lock the entry cannot change: a failed check is
                    // damage (`check_entry` names it), never a race.
                    if !level.check_entry(i, meta)? {
                        return Err(Error::corruption(
                            level.region.name(),
                            0,
                            format!("entry {i} changed under its DRAM entry's lock"),
                        ));
                    }
                    collect_newest(&level.entry(i), cap, &mut recs);
                    found.extend(
                        recs.iter()
                            .filter(|r| r.0 >= floor)
                            .map(|&(k, v)| (k, num, v)),
                    );
                }
            }
            // Newest level first for each key; then drop older versions and tombstones.
            found.sort_unstable_by_key(|&(k, num, _)| (k, num));
            let mut last = None;
            for &(k, _, v) in &found {
                if last == Some(k) {
                    continue;
                }
                last = Some(k);
                if v != TOMBSTONE {
                    out.push((k, v));
                    if out.len() == limit {
                        return Ok(out);
                    }
                }
            }
        }
        Ok(out)
    }

    /// [`Core::scan_raw`] with payload pointers followed: (key, value bytes).
    fn scan_bytes(&self, start: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>> {
        let raw = self.scan_raw(start, limit)?;
        let mut out = Vec::with_capacity(raw.len());
        for (k, v) in raw {
            if !is_pointer(v) {
                out.push((k, v.to_le_bytes().to_vec()));
            } else if let Some(value) = self.resolve(k, &k.to_le_bytes())? {
                // A key overwritten or deleted since the scan read it is the only way to
                // miss here; it is left out, as a scan that ran a moment later would.
                out.push((k, value));
            }
        }
        Ok(out)
    }

    /// Level 1's epoch of entry `d` (0 without level 1), once its meta word checks: which log
    /// entries recovery skips as migrated rests on it.
    fn level1_epoch(&self, d: usize) -> Result<u64> {
        self.levels[0].get().map_or(Ok(0), |l| l.epoch_checked(d))
    }

    /// Puts recovered log entries (each DRAM entry's in sequence order) back into the DRAM
    /// level: those whose epoch is above their level-1 entry's (≥ there means migrated).
    fn replay<'e>(
        &self,
        entries: impl Iterator<Item = &'e LogEntry>,
        file: &Path,
        l1_epochs: &[u64],
    ) -> Result<u64> {
        let mut n = 0;
        for e in entries {
            let h = self.place(e.key);
            let d = self.geo.entry_of(h, 0);
            let l1 = l1_epochs[d];
            if e.epoch <= l1 {
                continue;
            }
            let (epoch, size) = self.dram.meta_of(d);
            if size >= self.geo.entry_capacity() {
                return Err(Error::corruption(
                    file,
                    0,
                    format!("more unmigrated records for DRAM entry {d} than an entry holds"),
                ));
            }
            let epoch = if size == 0 {
                e.epoch
            } else {
                epoch.max(e.epoch)
            };
            self.dram
                .append(d, e.key, e.value, self.mask_of(e.key, h), epoch);
            n += 1;
        }
        Ok(n)
    }

    fn put(&self, key: u64, value: u64) -> Result<()> {
        if !fits_inline(value) {
            return self.put_bytes(&key.to_le_bytes(), &value.to_le_bytes());
        }
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.upsert(key, value)
    }

    fn put_bytes(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check_key(key)?;
        let room = self.opts.payload_segment_bytes - SEGMENT_HEADER_BYTES;
        if value.len() > VALUE_BYTES_MAX
            || crate::payload::record_bytes(key.len(), value.len()) > room
        {
            return Err(Error::InvalidArgument(format!(
                "value is {} bytes; the largest value is {} bytes (and a key of {} bytes with \
                 its value must fit a payload segment of {} bytes)",
                value.len(),
                VALUE_BYTES_MAX,
                key.len(),
                self.opts.payload_segment_bytes
            )));
        }
        if let (Ok(k), Ok(v)) = (<[u8; 8]>::try_from(key), <[u8; 8]>::try_from(value)) {
            let v = u64::from_le_bytes(v);
            if fits_inline(v) {
                self.puts.fetch_add(1, Ordering::Relaxed);
                return self.upsert(u64::from_le_bytes(k), v);
            }
        }
        self.puts.fetch_add(1, Ordering::Relaxed);
        // Payload first, then its barrier (outside every lock, so concurrent appenders share
        // it), and only then the pointer in the recovery log and the DRAM level.
        let (ptr, pending, sealed) = self.payload.append(self.storage.as_ref(), key, value)?;
        if self.opts.sync {
            pending.segment().region.fence()?;
        }
        self.upsert(bucket_key(key), ptr)?;
        // The pointer is in the table: a collection may take its segment from now on.
        drop(pending);
        if sealed && self.opts.payload_gc {
            self.collect_garbage(false)?;
        }
        Ok(())
    }

    fn get_bytes(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_key(key)?;
        self.resolve(bucket_key(key), key)
    }

    /// The value stored under bucket key `bk` for the full key `key`: follows a pointer and
    /// checks the record's key (a different key with the same bucket key reads as absent).
    fn resolve(&self, bk: u64, key: &[u8]) -> Result<Option<Vec<u8>>> {
        for locked in [false, true] {
            let h = self.place(bk);
            let v = if locked {
                let _g = self.dram.locks[self.geo.entry_of(h, 0)].lock();
                self.lookup(bk, h, self.mask_of(bk, h))?.flatten()
            } else {
                self.get_raw(bk)?
            };
            let Some(v) = v else {
                return Ok(None);
            };
            if !is_pointer(v) {
                return Ok((key.len() == 8).then(|| v.to_le_bytes().to_vec()));
            }
            match self.payload.read_value(v, key)? {
                Some(value) => return Ok(value),
                // Collected between the lookup and the read: the lookup under the lock sees
                // the pointer the collection wrote.
                None if !locked => continue,
                None => {
                    let (seg, off) = crate::payload::decode_pointer(v);
                    return Err(Error::corruption(
                        self.storage
                            .location()
                            .join(crate::payload::segment_file_name(seg)),
                        off as u64,
                        format!(
                            "the newest version of a key points into payload segment {seg}, \
                             which is missing or cut short; restore the file from a backup"
                        ),
                    ));
                }
            }
        }
        Ok(None)
    }

    /// Collects sealed payload segments (see [`Plush::collect_garbage`]).
    fn collect_garbage(&self, all: bool) -> Result<usize> {
        let Some(_gc) = self.payload.gc_lock.try_lock() else {
            return Ok(0);
        };
        let segs = if all {
            self.payload.sealed_segments()
        } else {
            self.payload.gc_candidates(0.5)
        };
        let mut n = 0;
        let mut damaged = None;
        for num in segs {
            // A segment whose appends have not all published their pointers would look
            // unreferenced where they have not: leave it to a later collection.
            if !self.payload.segment(num).is_some_and(|s| s.settled()) {
                continue;
            }
            // A damaged segment is kept whole (its records past the damage may be live); the
            // others are still collected, and the damage is reported after them.
            let records = match self.payload.scan(num) {
                Ok(r) => r,
                Err(e) => {
                    damaged.get_or_insert(e);
                    continue;
                }
            };
            let mut moved_into = Vec::new();
            for (off, key, value, _) in records {
                let ptr = crate::payload::encode_pointer(num, off);
                let bk = bucket_key(&key);
                let h = self.place(bk);
                let d = self.geo.entry_of(h, 0);
                let _g = self.dram.locks[d].lock();
                if self.lookup(bk, h, self.mask_of(bk, h))?.flatten() != Some(ptr) {
                    continue;
                }
                moved_into.push(d);
                let (new, pending, _) = self.payload.append(self.storage.as_ref(), &key, &value)?;
                if self.opts.sync {
                    pending.segment().region.fence()?;
                }
                self.upsert_locked(d, h, bk, new)?;
                drop(pending);
                self.payload
                    .gc_records_moved
                    .fetch_add(1, Ordering::Relaxed);
            }
            // Without the recovery log the new pointers are only in the DRAM level, and the old
            // ones may be on level 1: migrate the entries that took new pointers first, or a
            // crash would leave level 1 pointing into the removed segment.
            if !self.opts.recovery_log {
                moved_into.sort_unstable();
                moved_into.dedup();
                for d in moved_into {
                    let _g = self.dram.locks[d].lock();
                    if self.dram.meta_of(d).1 > 0 {
                        self.migrate_dram(d)?;
                    }
                }
            }
            // Every live record has a durable newer pointer: the segment holds nothing live.
            let freed = self.payload.remove(self.storage.as_ref(), num)?;
            self.payload
                .gc_bytes_freed
                .fetch_add(freed, Ordering::Relaxed);
            self.payload.gc_runs.fetch_add(1, Ordering::Relaxed);
            n += 1;
        }
        match damaged {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    fn delete(&self, key: u64) -> Result<()> {
        self.deletes.fetch_add(1, Ordering::Relaxed);
        self.upsert(key, TOMBSTONE)
    }

    fn upsert(&self, key: u64, value: u64) -> Result<()> {
        if let Some(shift) = self.range_shift {
            if shift > 0 && key >> (64 - shift) != 0 {
                return Err(Error::InvalidArgument(format!(
                    "key {key:#x} does not fit the {} significant key bits this \
                     range-partitioned database was created with",
                    64 - shift
                )));
            }
        }
        let h = self.place(key);
        let d = self.geo.entry_of(h, 0);
        let _guard = self.dram.locks[d].lock();
        self.upsert_locked(d, h, key, value)
    }

    /// The upsert of `key` (hash `h`, DRAM entry `d`, whose lock the caller holds).
    fn upsert_locked(&self, d: usize, h: u64, key: u64, value: u64) -> Result<()> {
        let (mut epoch, size) = self.dram.meta_of(d);
        if size >= self.geo.entry_capacity() {
            self.migrate_dram(d)?;
            self.migrations_inline.fetch_add(1, Ordering::Relaxed);
            epoch += 1;
        }
        if epoch > EPOCH_MAX {
            return Err(Error::Full(format!("DRAM entry {d} ran out of epochs")));
        }
        if !self.opts.recovery_log {
            self.dram.append(d, key, value, self.mask_of(key, h), epoch);
            if self.opts.migration != Migration::Inline
                && self.dram.meta_of(d).1 >= self.background_mark()
            {
                self.enqueue(d);
            }
            return Ok(());
        }
        let parts = self.opts.log_partitions;
        let log = self
            .log_region
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("the recovery log is not open".into()))?;
        log.announce();
        let append = |p: usize| {
            self.logs[p].lock().append(
                key,
                value,
                epoch,
                &|k| self.dram.meta_of(self.geo.entry_of(self.place(k), 0)).0,
                &|| self.partition_epoch_min(p),
            )
        };
        let appended = if self.opts.log_pack_groups {
            // The partition of the current run; a partition without room (its live entries
            // are spread by time, not bounded by key) passes the entry to the next one.
            let n = self.log_pack_cursor.fetch_add(1, Ordering::Relaxed);
            let run = n / LOG_PACK_RUN_ENTRIES;
            let mut r = Err(Error::Full(String::new()));
            for i in 0..parts {
                r = append((run as usize).wrapping_add(i) & (parts - 1));
                if !matches!(r, Err(Error::Full(_))) {
                    break;
                }
            }
            r
        } else {
            append(d & (parts - 1))
        };
        // The barrier outside the partition's lock (still under the DRAM entry's, which orders
        // the key's versions): writers of one partition share it like those of different ones.
        let appended = match appended {
            Ok(a) => a,
            Err(e) => {
                log.withdraw();
                return Err(e);
            }
        };
        // Whether this append's acknowledgement is recorded in its chunk's header (see
        // `log::record_acked`). Packed, the append whose entry ends a multiple of
        // `LOG_ACK_RECORD_EVERY` slots records it: the chunk's earlier entries lie before it,
        // so the record covers them, and the syncs write the chunk's first page once per that
        // many appends, not once per group. By the slot, not by the append's number: writers
        // that drew consecutive numbers take the partition's lock in any order, and the one
        // that drew the run's last number may not write its last slot. By key hash, every
        // append records it.
        let record =
            !self.opts.log_pack_groups || appended.slots().is_multiple_of(LOG_ACK_RECORD_EVERY);
        if self.opts.sync {
            log.fence_announced()?;
            if record {
                // Acknowledged: the chunk's header records it (durable with a later barrier).
                crate::log::record_acked(log, &appended);
            }
        } else {
            log.withdraw();
        }
        self.dram.append(d, key, value, self.mask_of(key, h), epoch);
        if self.opts.migration != Migration::Inline
            && self.dram.meta_of(d).1 >= self.background_mark()
        {
            self.enqueue(d);
        }
        Ok(())
    }

    /// The smallest DRAM epoch of the entries whose log entries partition `p` may hold: its
    /// share of the DRAM level, or (packed) the whole level.
    fn partition_epoch_min(&self, p: usize) -> u64 {
        let step = self.opts.log_partitions;
        if self.opts.log_pack_groups {
            return (0..self.geo.entries(0))
                .map(|d| self.dram.meta_of(d).0)
                .min()
                .unwrap_or(0);
        }
        (p..self.geo.entries(0))
            .step_by(step)
            .map(|d| self.dram.meta_of(d).0)
            .min()
            .unwrap_or(0)
    }

    fn get(&self, key: u64) -> Result<Option<u64>> {
        let kb = key.to_le_bytes();
        let v = match self.get_raw(key)? {
            Some(v) if is_pointer(v) => self.resolve(key, &kb)?,
            other => return Ok(other),
        };
        match v {
            None => Ok(None),
            Some(v) => <[u8; 8]>::try_from(v.as_slice())
                .map(|b| Some(u64::from_le_bytes(b)))
                .map_err(|_| {
                    Error::InvalidArgument(format!(
                        "key {key:#x} holds a {}-byte value; read it with get_bytes",
                        v.len()
                    ))
                }),
        }
    }

    /// The newest bucket value of `key` (a value or a pointer), `None` if absent or deleted.
    fn get_raw(&self, key: u64) -> Result<Option<u64>> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        let h = self.place(key);
        let mask = self.mask_of(key, h);
        Ok(match self.lookup(key, h, mask)? {
            Some(v) => v,
            None => {
                // The entries kept changing under the optimistic reads: search under the lock
                // of the DRAM entry whose subtree holds the key.
                let _guard = self.dram.locks[self.geo.entry_of(h, 0)].lock();
                self.lookup(key, h, mask)?.flatten()
            }
        })
    }

    /// `Some(result)`, or `None` when an optimistic read gave up. A record found on a
    /// persistent level is returned only after its entry's records match their checksum, and
    /// an entry whose filter admitted the key without holding it is checked too.
    fn lookup(&self, key: u64, h: u64, mask: [u64; 2]) -> Result<Option<Option<u64>>> {
        let cap = self.geo.entry_capacity();
        let d = self.geo.entry_of(h, 0);
        match search(&self.dram.entry(d), key, mask, cap) {
            None => return Ok(None),
            Some(Some(v)) => return Ok(Some((v != TOMBSTONE).then_some(v))),
            Some(None) => {}
        }
        for num in 1..=self.opts.levels_max {
            let Some(level) = self.levels[num - 1].get() else {
                break;
            };
            let i = self.geo.entry_of(h, num);
            match search_meta(&level.entry(i), key, mask, cap) {
                None => return Ok(None),
                Some((Some(v), meta, _)) => {
                    if !level.check_entry(i, meta)? {
                        return Ok(None);
                    }
                    return Ok(Some((v != TOMBSTONE).then_some(v)));
                }
                Some((None, meta, true)) => {
                    // A filter admitted the key but no slot holds it: a false positive, or a
                    // damaged key (which would otherwise read as absent).
                    if !level.check_entry(i, meta)? {
                        return Ok(None);
                    }
                }
                Some((None, meta, false)) => {
                    // Nothing admitted the key: still, a size or epoch word that no checksum
                    // slot vouches for is damage (a size damaged to 0 hides every record), and
                    // so is a filter word that lost a bit of the records below the size (it
                    // hides their keys). Checked once per meta word of the entry.
                    let ok = if crate::layout::unpack_meta(meta).1 == 0 {
                        level.check_meta(i, meta)?
                    } else {
                        level.check_entry(i, meta)?
                    };
                    if !ok {
                        return Ok(None);
                    }
                }
            }
        }
        Ok(Some(None))
    }

    fn level(&self, num: usize) -> Result<&Level> {
        if num > self.opts.levels_max {
            let hint = match self.range_shift {
                Some(shift) => format!(
                    " (range partitioning: more keys share one key range than an entry of the \
                     deepest level holds; keys of {} significant bits, dense in their low bits, \
                     need significant_key_bits set to their width at creation)",
                    64 - shift
                ),
                None => String::new(),
            };
            return Err(Error::Full(format!(
                "level {} would exceed levels_max {}{hint}",
                num, self.opts.levels_max
            )));
        }
        if let Some(l) = self.levels[num - 1].get() {
            return Ok(l);
        }
        let _g = self.level_create.lock();
        if let Some(l) = self.levels[num - 1].get() {
            return Ok(l);
        }
        let name = level_file_name(num);
        let r = self
            .storage
            .open_region(
                &name,
                level_file_bytes(self.geo, num),
                true,
                RegionKind::Level,
            )?
            .ok_or_else(|| Error::io("create", &name, std::io::ErrorKind::NotFound.into()))?;
        let level = Level::open(
            Region::new(&self.storage.location().join(&name).to_string_lossy(), r),
            self.geo,
            num,
            num <= self.opts.dram_filter_levels,
        )?;
        record_files(self.storage.as_ref(), num, true)?;
        let _ = self.levels[num - 1].set(level);
        self.levels[num - 1]
            .get()
            .ok_or_else(|| Error::InvalidArgument("level creation raced".into()))
    }

    /// Migrates DRAM entry `d` (its lock held) into level 1, then empties it under the next
    /// epoch. Persist order (Listing 3.2): records and filters, barrier; size and epoch,
    /// barrier; only then the source is cleared.
    fn migrate_dram(&self, d: usize) -> Result<()> {
        let (epoch, _) = self.dram.meta_of(d);
        let mut recs = Vec::with_capacity(self.geo.entry_capacity());
        collect_newest(&self.dram.entry(d), self.geo.entry_capacity(), &mut recs);
        self.account_shadowed(&self.dram.entry(d), &mut recs)?;
        self.migrate_records(&recs, epoch, 0, d)?;
        self.dram.reset(d, epoch + 1, 0);
        self.migrations[0].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Migrates entry `i` of persistent level `num` into level `num + 1` and clears it.
    fn migrate_level(&self, num: usize, i: usize) -> Result<()> {
        let level = self.level(num)?;
        let meta = level.meta_word(i);
        // Under the DRAM entry's lock the entry cannot change: a meta word no slot vouches
        // for is damage, and migrating it would carry the damage down.
        level.check_meta(i, meta)?;
        let (epoch, _) = crate::layout::unpack_meta(meta);
        let mut recs = Vec::with_capacity(self.geo.entry_capacity());
        collect_newest(&level.entry(i), self.geo.entry_capacity(), &mut recs);
        self.account_shadowed(&level.entry(i), &mut recs)?;
        // The cleared entry's checksum slot, durable before its meta word says size 0 (a
        // fence of this level's file: the migration's fences are the next level's).
        level.prepare_clear(i);
        self.migrate_records(&recs, epoch, num, i)?;
        if level.meta_checked {
            level.region.fence()?;
        }
        level.clear(i);
        level.region.fence()?;
        self.migrations[num].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Payload bookkeeping of a migration: pointers among the entry's records that
    /// `collect_newest` dropped (shadowed versions) count as garbage of their segments, and
    /// kept pointers into segments that are gone are dropped when they are shadowed (a
    /// collection always wrote a newer pointer, in a lower level or the DRAM level). A kept
    /// pointer into a gone segment that is still its key's newest version is a lost record:
    /// corruption, and the migration stops rather than drop the key. The caller holds the
    /// DRAM entry's lock that the records' keys map to.
    fn account_shadowed<E: crate::level::EntryView>(
        &self,
        e: &E,
        recs: &mut Vec<(u64, u64)>,
    ) -> Result<()> {
        if self.payload.is_empty() && !self.payload.has_gaps() {
            return Ok(());
        }
        let kept: std::collections::HashSet<u64> = recs
            .iter()
            .map(|r| r.1)
            .filter(|v| is_pointer(*v))
            .collect();
        let size = crate::layout::unpack_meta(e.meta().load(Ordering::Acquire))
            .1
            .min(self.geo.entry_capacity());
        for idx in 0..size {
            let v = e
                .value(idx / SLOTS_PER_BUCKET, idx % SLOTS_PER_BUCKET)
                .load(Ordering::Relaxed);
            if is_pointer(v) && !kept.contains(&v) {
                self.payload.add_garbage(v);
            }
        }
        if !self.payload.has_gaps() {
            return Ok(());
        }
        let before = recs.len();
        let mut out = Vec::with_capacity(recs.len());
        for &(k, v) in recs.iter() {
            if is_pointer(v)
                && !self
                    .payload
                    .has_segment(crate::payload::decode_pointer(v).0)
            {
                self.check_shadowed(k, v)?;
                continue;
            }
            out.push((k, v));
        }
        *recs = out;
        self.payload
            .dangling_dropped
            .fetch_add((before - recs.len()) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// For pointer `v` of bucket key `k` into a payload segment that is gone: Ok when a newer
    /// version of the key shadows it (the segment was collected after moving the key's live
    /// record), corruption naming the segment when it is still the key's newest version (the
    /// segment was lost). The caller holds the key's DRAM entry lock.
    fn check_shadowed(&self, k: u64, v: u64) -> Result<()> {
        let h = self.place(k);
        if self.lookup(k, h, self.mask_of(k, h))?.flatten() != Some(v) {
            return Ok(());
        }
        let (seg, off) = crate::payload::decode_pointer(v);
        Err(Error::corruption(
            self.storage
                .location()
                .join(crate::payload::segment_file_name(seg)),
            off as u64,
            format!(
                "the newest version of key {k:#x} points into payload segment {seg}, which is \
                 missing (a collection would have moved it first); restore the file from a backup"
            ),
        ))
    }

    /// Moves `recs` (newest version of each key, newest first) of entry `parent` on level
    /// `from` into its children on level `from + 1`, migrating a child first when the records
    /// would not fit (recursion bounded by `levels_max`).
    fn migrate_records(
        &self,
        recs: &[(u64, u64)],
        epoch: u64,
        from: usize,
        parent: usize,
    ) -> Result<()> {
        let to = from + 1;
        let level = self.level(to)?;
        let fanout = if from == 0 { 1 } else { self.geo.buckets() };
        let child_index = |j: usize| {
            if from == 0 {
                parent
            } else {
                parent * fanout + j
            }
        };
        // Group by child, oldest first (the bucket order), so that later appends shadow.
        let mut groups: Vec<Vec<(u64, u64)>> = vec![Vec::new(); fanout];
        for &(k, v) in recs.iter().rev() {
            groups[self.geo.child_of(self.place(k), from)].push((k, v));
        }
        let cap = self.geo.entry_capacity();
        for j in 0..fanout {
            let size = level.meta_of(child_index(j)).1;
            if size > cap {
                return Err(Error::corruption(
                    level.region.name(),
                    0,
                    format!(
                        "entry {} claims {size} records; an entry holds {cap}",
                        child_index(j)
                    ),
                ));
            }
        }
        for (j, g) in groups.iter().enumerate() {
            if !g.is_empty() && level.meta_of(child_index(j)).1 + g.len() > cap {
                self.migrate_level(to, child_index(j))?;
            }
        }
        let deeper = to < self.opts.levels_max && self.levels[to].get().is_some();
        let mut sizes = Vec::with_capacity(fanout);
        let mut masks = Vec::with_capacity(cap);
        for (j, g) in groups.iter_mut().enumerate() {
            let c = child_index(j);
            let size = level.meta_of(c).1;
            if !deeper && size == 0 {
                // Nothing older can be below: a tombstone has nothing left to shadow.
                g.retain(|(_, v)| *v != TOMBSTONE);
            }
            if g.is_empty() && from != 0 {
                continue;
            }
            level.reserve_entry(c)?;
            masks.clear();
            masks.extend(g.iter().map(|(k, _)| filter_mask(hash_key(*k))));
            let new_size = level.write_tail(c, g, &masks, epoch)?;
            debug_assert!(new_size <= cap && new_size >= size);
            sizes.push((c, new_size));
        }
        level.region.fence()?;
        // Level 1's epoch must advance even when nothing was written: recovery compares it.
        for (c, size) in sizes {
            level.publish(c, epoch, size);
        }
        level.region.fence()?;
        Ok(())
    }

    /// Records a clean close in the manifest (word 12) once every append is durable, so that
    /// the next open knows nothing was in flight: any invalid log entry below a chunk's end is
    /// then damage, not a torn tail, and the newest entry must be there. A session with `sync`
    /// off makes the whole log durable first (one `fdatasync`), so it records it too. A second
    /// call (close, then drop) writes the same word again.
    fn record_clean_close(&self) -> Result<()> {
        if self.opts.read_only {
            return Ok(());
        }
        let (Some(log), Some(first)) = (&self.log_region, self.logs.first()) else {
            return Ok(());
        };
        if !self.opts.sync {
            // Nothing of this session was made durable as it went: the record vouches for the
            // log, and the log for the levels it no longer holds and the payload records its
            // pointers name, so all of them (and the files' names) must be on the media first.
            for level in self.levels.iter().filter_map(OnceLock::get) {
                level.region.sync_all()?;
            }
            self.payload.sync_all()?;
            self.storage.sync_location()?;
        }
        log.sync_all()?;
        let next = first.lock().next_seq();
        set_manifest_word(self.storage.as_ref(), MANIFEST_CLEAN_WORD, next as u32)
    }

    /// Without the recovery log, the DRAM level is the only copy of unmigrated records: a
    /// clean close migrates them. With the log (or read-only), nothing to do.
    fn checkpoint_unlogged(&self) -> Result<()> {
        if self.opts.recovery_log || self.opts.read_only {
            return Ok(());
        }
        self.checkpoint()
    }

    fn checkpoint(&self) -> Result<()> {
        for d in 0..self.geo.entries(0) {
            let _g = self.dram.locks[d].lock();
            if self.dram.meta_of(d).1 > 0 {
                self.migrate_dram(d)?;
            }
        }
        Ok(())
    }

    fn stats(&self) -> Stats {
        let mut s = Stats {
            puts: self.puts.load(Ordering::Relaxed),
            migrations_background: self.migrations_background.load(Ordering::Relaxed),
            migrations_inline: self.migrations_inline.load(Ordering::Relaxed),
            deletes: self.deletes.load(Ordering::Relaxed),
            gets: self.gets.load(Ordering::Relaxed),
            migrations: self
                .migrations
                .iter()
                .map(|m| m.load(Ordering::Relaxed))
                .collect(),
            recovered_records: self.recovered,
            dram_bytes: self.dram.bytes() as u64,
            dram_entries_log2: self.geo.dram_entries_log2,
            fanout_log2: self.geo.fanout_log2,
            log_partitions: self.opts.log_partitions,
            recovery_log: self.opts.recovery_log,
            partitioning: self.opts.partitioning.name(),
            significant_key_bits: self.range_shift.map_or(0, |s| 64 - s),
            ..Stats::default()
        };
        let pc = self.payload.counters();
        s.payload_appends = pc.appends;
        s.payload_bytes_appended = pc.bytes_appended;
        s.payload_segments = pc.segments;
        s.payload_bytes = pc.bytes;
        s.payload_garbage_bytes = pc.garbage_bytes;
        s.payload_gc_runs = pc.gc_runs;
        s.payload_gc_records_moved = pc.gc_records_moved;
        s.payload_gc_bytes_freed = pc.gc_bytes_freed;
        s.payload_dangling_dropped = pc.dangling_dropped;
        for l in self.levels.iter().filter_map(|l| l.get()) {
            s.levels += 1;
            s.levels_preallocated += l.is_preallocated() as usize;
            s.level_lines_flushed
                .push(l.region.lines_flushed.load(Ordering::Relaxed));
            s.level_blocks_flushed
                .push(l.region.blocks_flushed.load(Ordering::Relaxed));
            s.fences += l.region.fences.load(Ordering::Relaxed);
            s.dram_bytes += l.dram_bytes() as u64;
        }
        for p in self.logs.iter() {
            let p = p.lock();
            s.log_appends += p.counters.appends;
            s.log_compactions_read += p.counters.compactions_read;
            s.log_compactions_skipped_read += p.counters.compactions_skipped_read;
            s.log_entries_copied += p.counters.entries_copied;
        }
        if let Some(r) = &self.log_region {
            s.log_lines_flushed += r.lines_flushed.load(Ordering::Relaxed);
            s.fences += r.fences.load(Ordering::Relaxed);
            s.log_syncs = r.syncs();
            let (covered, ns, pages) = r.sync_profile();
            s.log_sync_barriers = covered;
            s.log_sync_us = ns / 1000;
            s.log_sync_pages = pages;
        }
        let upserts = s.puts + s.deletes;
        if upserts > 0 {
            // Per upsert: one 32-byte log entry (the write-combining buffer merges sequential
            // entries, so count bytes, not lines) plus the lines the levels flushed.
            let level_bytes: u64 = s.level_lines_flushed.iter().sum::<u64>() * 64;
            let log_bytes = s.log_appends * crate::log::ENTRY_BYTES as u64;
            s.write_amplification = (level_bytes + log_bytes) as f64 / (upserts as f64 * 16.0);
            s.write_amplification_model = write_amplification_model(self.geo, upserts);
        }
        s
    }

    /// Checks the payload record that `v`, the value of bucket key `k` (found `at`), points at:
    /// it reads and belongs to the key, or its segment is gone and a newer version shadows it
    /// (see [`Core::check_shadowed`]). The caller holds the key's DRAM entry lock.
    fn verify_pointer(&self, k: u64, v: u64, at: &str, rep: &mut VerifyReport) -> Result<()> {
        let off = crate::payload::decode_pointer(v).1;
        match self.payload.read(v)? {
            None => {
                self.check_shadowed(k, v)?;
                rep.payload_dangling += 1;
            }
            Some((key, _)) if bucket_key(&key) == k => rep.payload_records += 1,
            Some(_) => {
                return Err(Error::corruption(
                    self.storage.location(),
                    off as u64,
                    format!("{at}: key {k:#x} points at a payload record of another key"),
                ))
            }
        }
        Ok(())
    }

    fn verify(&self) -> Result<VerifyReport> {
        let mut rep = VerifyReport::default();
        let cap = self.geo.entry_capacity();
        // The files the manifest records still have their geometry's length (a file cut or
        // deleted under an open handle).
        let storage = self.storage.as_ref();
        let (levels, log) = recorded_files(storage)?;
        for num in 1..=levels.min(self.opts.levels_max) {
            check_recorded(
                storage,
                &level_file_name(num),
                level_file_bytes(self.geo, num),
            )?;
        }
        if log {
            let bytes = self.opts.log_chunk_bytes * self.opts.log_chunks * self.opts.log_partitions;
            check_recorded(storage, LOG_FILE, bytes)?;
        }
        for d in 0..self.geo.entries(0) {
            let _lock = self.dram.locks[d].lock();
            let size = self.dram.meta_of(d).1.min(cap);
            rep.dram_records += size as u64;
            let e = self.dram.entry(d);
            use crate::level::EntryView;
            for idx in 0..size {
                let (b, j) = (idx / SLOTS_PER_BUCKET, idx % SLOTS_PER_BUCKET);
                let v = e.value(b, j).load(Ordering::Relaxed);
                if is_pointer(v) {
                    let k = e.key(b, j).load(Ordering::Relaxed);
                    self.verify_pointer(k, v, "the DRAM level", &mut rep)?;
                }
            }
        }
        for level in self.levels.iter().filter_map(|l| l.get()) {
            rep.levels += 1;
            for i in 0..level.entries {
                let d = i >> (self.geo.placement_bits(level.num) - self.geo.dram_entries_log2);
                let _lock = self.dram.locks[d & (self.geo.entries(0) - 1)].lock();
                let (_, size) = level.meta_of(i);
                rep.entries_checked += 1;
                if size > cap {
                    return Err(Error::corruption(
                        level.region.name(),
                        level.dir_offset(i),
                        format!("entry {i} claims {size} records; an entry holds {cap}"),
                    ));
                }
                level.verify_entry(i, level.meta_word(i))?;
                let e = level.entry(i);
                use crate::level::EntryView;
                for idx in 0..size {
                    let (b, j) = (idx / SLOTS_PER_BUCKET, idx % SLOTS_PER_BUCKET);
                    let k = e.key(b, j).load(Ordering::Relaxed);
                    let h = self.place(k);
                    if self.geo.entry_of(h, level.num) != i {
                        return Err(Error::corruption(
                            level.region.name(),
                            level.key_offset(i, idx),
                            format!(
                                "entry {i} slot {idx} holds key {k:#x}, which hashes elsewhere"
                            ),
                        ));
                    }
                    let m = self.mask_of(k, h);
                    let f = [
                        e.filter(b, 0).load(Ordering::Relaxed),
                        e.filter(b, 1).load(Ordering::Relaxed),
                    ];
                    // `verify_entry` checked the filter words already; this names the key.
                    if let Some(w) = (0..2).find(|&w| f[w] & m[w] != m[w]) {
                        return Err(Error::corruption(
                            level.region.name(),
                            level.filter_offset(i, b, w),
                            format!("entry {i} bucket {b}: filter word {w} misses key {k:#x}"),
                        ));
                    }
                    rep.records += 1;
                    let v = e.value(b, j).load(Ordering::Relaxed);
                    if !is_pointer(v) {
                        if !level.checked {
                            rep.records_not_checksummed += 1;
                        }
                    } else {
                        let at = format!("{} entry {i} slot {idx}", level.region.name());
                        self.verify_pointer(k, v, &at, &mut rep)?;
                    }
                }
            }
        }
        self.verify_log(&mut rep)?;
        Ok(rep)
    }
}

impl Core {
    /// Reads the log again as recovery does, under every partition's lock (appends wait),
    /// and applies recovery's rules: damaged chunk headers, damaged entries, the clean-close
    /// record. So `verify` checks everything recovery would trust at the next open.
    fn verify_log(&self, rep: &mut VerifyReport) -> Result<()> {
        let Some(log) = &self.log_region else {
            return Ok(());
        };
        let log_path = self.storage.location().join(LOG_FILE);
        let guards: Vec<_> = self.logs.iter().map(|p| p.lock()).collect();
        let (chunk_bytes, chunks) = (self.opts.log_chunk_bytes, self.opts.log_chunks);
        let mut findings = Vec::with_capacity(guards.len());
        for p in 0..guards.len() {
            let rec = Partition::scan(log.clone(), p, chunk_bytes, chunks)?;
            findings.push(self.check_partition(p, &rec, &log_path, None)?);
        }
        let clean = clean_close(self.storage.as_ref())?;
        // A read-only session keeps the torn tails its open accepted; a writable one zeroed
        // them. Either way the same judgement holds.
        self.judge_log(&findings, clean, &log_path)?;
        drop(guards);
        for f in &findings {
            rep.log_chunks_in_use += f.chunks_in_use as u64;
            rep.log_entries += f.entries as u64;
        }
        Ok(())
    }
}

/// The chapter's write-amplification model, 3 · log_f(N) + 1, with N counted in units of the
/// DRAM level's capacity (levels below that hold nothing on the media; see docs/plush.md).
pub fn write_amplification_model(geo: Geometry, records: u64) -> f64 {
    let dram = (geo.entries(0) * geo.entry_capacity()) as f64;
    let f = geo.buckets() as f64;
    let levels = if (records as f64) <= dram {
        1.0
    } else {
        1.0 + ((records as f64) / dram).ln() / f.ln()
    };
    3.0 * levels + 1.0
}

/// Word of the manifest recording which files exist: low 32 bits `levels << 1 | log`, high 32
/// bits their CRC-32C (so that 0, as in manifests written before it, reads as "not recorded").
const MANIFEST_FILES_WORD: usize = 9;

/// A CRC-checked word of the manifest (`what` names it in a corruption error): the low 32
/// bits, whose CRC-32C the high 32 bits hold; `None` when the word is 0 (not recorded, as in
/// manifests written before it) or there is no manifest.
fn manifest_word(storage: &dyn Storage, word: usize, what: &str) -> Result<Option<u32>> {
    let Some(r) = storage.open_region(MANIFEST, 4096, false, RegionKind::Level)? else {
        return Ok(None);
    };
    let w = r.words()[word].load(Ordering::Acquire);
    if w == 0 {
        return Ok(None);
    }
    let low = w as u32;
    if (w >> 32) as u32 != crc32c::crc32c(&low.to_le_bytes()) {
        return Err(Error::corruption(
            storage.location().join(MANIFEST),
            (word * 8) as u64,
            format!("the record of {what} {w:#x} does not check"),
        ));
    }
    Ok(Some(low))
}

/// Stores `low` with its CRC-32C in manifest word `word` (flushed, fenced).
fn set_manifest_word(storage: &dyn Storage, word: usize, low: u32) -> Result<()> {
    let r = storage
        .open_region(MANIFEST, 4096, false, RegionKind::Level)?
        .ok_or_else(|| Error::io("open", MANIFEST, std::io::ErrorKind::NotFound.into()))?;
    let region = Region::new(&storage.location().join(MANIFEST).to_string_lossy(), r);
    let w = (crc32c::crc32c(&low.to_le_bytes()) as u64) << 32 | low as u64;
    region.word(word).store(w, Ordering::Release);
    region.flush_words(word, 1);
    // Durable also with `sync` off: these records are rare, and a clean close of such a
    // session vouches for the log with one.
    region.sync_all()
}

/// The files the manifest says were created: (levels, log). (0, false) when nothing is
/// recorded (a new database, or one written before the record existed).
fn recorded_files(storage: &dyn Storage) -> Result<(usize, bool)> {
    Ok(
        manifest_word(storage, MANIFEST_FILES_WORD, "created files")?
            .map_or((0, false), |low| ((low >> 1) as usize, low & 1 == 1)),
    )
}

/// Records in the manifest that levels up to `levels` and (when `log`) the recovery log were
/// created, after their files were: from then on an open refuses the database when one of
/// them is missing or short, instead of recreating it empty.
fn record_files(storage: &dyn Storage, levels: usize, log: bool) -> Result<()> {
    let (have_levels, have_log) = recorded_files(storage)?;
    let (levels, log) = (levels.max(have_levels), log || have_log);
    if (levels, log) == (have_levels, have_log) {
        return Ok(());
    }
    set_manifest_word(
        storage,
        MANIFEST_FILES_WORD,
        (levels as u32) << 1 | u32::from(log),
    )
}

/// Manifest word 12: the clean-close record. Low 32 bits: the low 32 bits of the log's next
/// sequence number when a writable session that synced its appends closed; high 32 bits
/// their CRC-32C. 0: not closed cleanly since the last writable open (which clears it before
/// anything else is written), or a manifest written before the word existed.
const MANIFEST_CLEAN_WORD: usize = 12;

/// The clean-close record: the next sequence number it vouches for, or `None`.
fn clean_close(storage: &dyn Storage) -> Result<Option<u32>> {
    manifest_word(storage, MANIFEST_CLEAN_WORD, "a clean close")
}

/// Clears the clean-close record (flushed, fenced), before a writable session writes.
fn clear_clean_close(storage: &dyn Storage) -> Result<()> {
    let r = storage
        .open_region(MANIFEST, 4096, false, RegionKind::Level)?
        .ok_or_else(|| Error::io("open", MANIFEST, std::io::ErrorKind::NotFound.into()))?;
    let region = Region::new(&storage.location().join(MANIFEST).to_string_lossy(), r);
    region.word(MANIFEST_CLEAN_WORD).store(0, Ordering::Release);
    region.flush_words(MANIFEST_CLEAN_WORD, 1);
    // Durable also with `sync` off, before the session writes: a record that outlived the
    // clear would vouch for a log this session changed.
    region.sync_all()
}

/// Words of the manifest recording payload segment numbers, each with the low 32 bits the
/// number and the high 32 bits its CRC-32C (0, as in manifests written before them: not
/// recorded): the first number whose file every later number keeps (a collected segment's
/// file is cut to 0 bytes, not removed), and the highest number created.
const MANIFEST_PAYLOAD_FROM_WORD: usize = 10;
const MANIFEST_PAYLOAD_HIGHEST_WORD: usize = 11;

/// A payload-number word of the manifest; `None` when not recorded.
fn recorded_payload_number(storage: &dyn Storage, word: usize) -> Result<Option<u32>> {
    manifest_word(storage, word, "payload segment numbers")
}

/// Records payload segment number `n` in manifest word `word` (flushed, fenced).
fn record_payload_number(storage: &dyn Storage, word: usize, n: u32) -> Result<()> {
    set_manifest_word(storage, word, n)
}

/// Records that payload segment `n` was created (after its header was armed), so that its
/// number is never given again and its file is required, even when it is the newest.
pub(crate) fn record_payload_created(storage: &dyn Storage, n: u32) -> Result<()> {
    record_payload_number(storage, MANIFEST_PAYLOAD_HIGHEST_WORD, n)
}

/// A file the manifest records must exist with its geometry's length.
fn check_recorded(storage: &dyn Storage, name: &str, len: usize) -> Result<()> {
    match storage.region_len(name)? {
        None => Err(Error::corruption(
            storage.location().join(name),
            0,
            format!("{name} is missing, but {MANIFEST} records that it was created"),
        )),
        Some(have) if have != len as u64 => Err(Error::corruption(
            storage.location().join(name),
            have,
            format!("{name} is {have} bytes; the manifest's geometry says {len}"),
        )),
        Some(_) => Ok(()),
    }
}

/// Before a manifest is created: the directory may hold only the lock file. Plush's own files
/// without a manifest are a damaged database (creating a manifest with default geometry over
/// them would make them unreadable); anything else is some other program's directory. Both are
/// refused before anything is written.
fn refuse_foreign_files(storage: &dyn Storage) -> Result<()> {
    let mut names = storage.list_regions()?;
    names.retain(|n| n != LOCK_FILE);
    names.sort();
    let ours: Vec<&String> = names.iter().filter(|n| is_plush_file(n)).collect();
    if !ours.is_empty() {
        return Err(Error::corruption(
            storage.location().join(MANIFEST),
            0,
            format!(
                "{MANIFEST} is missing, but the directory holds Plush files ({}); \
                 restore the manifest from a backup (opening never recreates it over existing files)",
                ours.iter().take(4).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    if let Some(first) = names.first() {
        return Err(Error::NotADatabase {
            path: storage.location(),
            detail: format!(
                "the directory is not empty (it holds {first:?}{}) and has no {MANIFEST}",
                if names.len() > 1 { " and more" } else { "" }
            ),
        });
    }
    Ok(())
}

fn is_plush_file(name: &str) -> bool {
    name == LOG_FILE
        || (name.ends_with(".plush")
            && (name.starts_with("level-") || name.starts_with("payload-")))
}

/// Plush's own files in the directory other than the manifest, sorted.
fn plush_files(storage: &dyn Storage) -> Result<Vec<String>> {
    let mut names = storage.list_regions()?;
    names.retain(|n| is_plush_file(n));
    names.sort();
    Ok(names)
}

/// The first few of `names`, for a message.
fn some_names(names: &[String]) -> String {
    let mut s = names.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 4 {
        s.push_str(&format!(" and {} more", names.len() - 4));
    }
    s
}

/// A manifest that cannot be the start of a creation a crash cut short: shorter than its
/// header (only an empty one, alone in the directory, is that), or unarmed beside other Plush
/// files (the manifest is armed before any other file is created). Either way the geometry is
/// lost, and writing a default one over it would make the other files unreadable.
fn refuse_lost_manifest(storage: &dyn Storage, len: u64, what: &str) -> Result<()> {
    let ours = plush_files(storage)?;
    if ours.is_empty() && len == 0 {
        return Ok(());
    }
    let beside = if ours.is_empty() {
        String::new()
    } else {
        format!(
            ", and the directory holds Plush files ({})",
            some_names(&ours)
        )
    };
    Err(Error::corruption(
        storage.location().join(MANIFEST),
        len.min(8),
        format!(
            "{MANIFEST} {what}{beside}: the database's geometry is lost; restore {MANIFEST} \
             from a backup (opening never rewrites it with default geometry)"
        ),
    ))
}

/// Geometry options that differ both from their default and from the value the database was
/// created with are a mistake the caller should hear of; options left at their defaults take
/// the stored values.
fn refuse_geometry_mismatch(storage: &dyn Storage, opts: &Options, stored: &Options) -> Result<()> {
    let d = Options::default();
    let fields: [(&str, u64, u64, u64); 6] = [
        (
            "dram_entries_log2",
            opts.dram_entries_log2.into(),
            stored.dram_entries_log2.into(),
            d.dram_entries_log2.into(),
        ),
        (
            "fanout_log2",
            opts.fanout_log2.into(),
            stored.fanout_log2.into(),
            d.fanout_log2.into(),
        ),
        (
            "log_partitions",
            opts.log_partitions as u64,
            stored.log_partitions as u64,
            d.log_partitions as u64,
        ),
        (
            "log_chunk_bytes",
            opts.log_chunk_bytes as u64,
            stored.log_chunk_bytes as u64,
            d.log_chunk_bytes as u64,
        ),
        (
            "log_chunks",
            opts.log_chunks as u64,
            stored.log_chunks as u64,
            d.log_chunks as u64,
        ),
        (
            "payload_segment_bytes",
            opts.payload_segment_bytes as u64,
            stored.payload_segment_bytes as u64,
            d.payload_segment_bytes as u64,
        ),
    ];
    for (name, given, have, default) in fields {
        if given != have && given != default {
            return Err(Error::InvalidArgument(format!(
                "{name} = {given} was given, but the hash database at {} was created with \
                 {name} = {have}; the geometry is fixed at creation (leave {name} out to open \
                 it with the stored value)",
                storage.location().display()
            )));
        }
    }
    if opts.partitioning != stored.partitioning && opts.partitioning != d.partitioning {
        return Err(Error::InvalidArgument(format!(
            "partitioning = {} was given, but the hash database at {} was created with \
             partitioning = {}; the partitioning is fixed at creation (leave it out)",
            opts.partitioning.name(),
            storage.location().display(),
            stored.partitioning.name()
        )));
    }
    if stored.partitioning == Partitioning::Range
        && opts.significant_key_bits != stored.significant_key_bits
        && opts.significant_key_bits != d.significant_key_bits
    {
        return Err(Error::InvalidArgument(format!(
            "significant_key_bits = {} was given, but the range-partitioned hash database at \
             {} was created with significant_key_bits = {}; it is fixed at creation (leave it \
             out)",
            opts.significant_key_bits,
            storage.location().display(),
            stored.significant_key_bits
        )));
    }
    if opts.log_pack_groups != stored.log_pack_groups && opts.log_pack_groups != d.log_pack_groups {
        return Err(Error::InvalidArgument(format!(
            "log_pack_groups = {} was given, but the hash database at {} was created with \
             log_pack_groups = {}; the log layout is fixed at creation (leave it out)",
            opts.log_pack_groups,
            storage.location().display(),
            stored.log_pack_groups
        )));
    }
    Ok(())
}

fn read_or_write_manifest(storage: &dyn Storage, opts: &mut Options) -> Result<()> {
    if let Some(len) = storage.region_len(MANIFEST)? {
        if len < 4096 {
            refuse_lost_manifest(
                storage,
                len,
                &format!("is {len} bytes, shorter than its 4096-byte header"),
            )?;
        }
    }
    let existing = storage.open_region(MANIFEST, 4096, false, RegionKind::Level)?;
    let region = match existing {
        Some(r) => Region::new(&storage.location().join(MANIFEST).to_string_lossy(), r),
        None => {
            refuse_foreign_files(storage)?;
            opts.validate()?;
            if !opts.create_if_missing {
                return Err(Error::NotADatabase {
                    path: storage.location(),
                    detail: format!("no {MANIFEST} (create_if_missing is off)"),
                });
            }
            check_room_to_create(storage, opts)?;
            let r = storage
                .open_region(MANIFEST, 4096, true, RegionKind::Level)?
                .ok_or_else(|| {
                    Error::io("create", MANIFEST, std::io::ErrorKind::NotFound.into())
                })?;
            Region::new(&storage.location().join(MANIFEST).to_string_lossy(), r)
        }
    };
    let fields = |o: &Options| {
        let base = if o.log_pack_groups {
            MANIFEST_VERSION_PACKED
        } else {
            FORMAT_VERSION
        };
        [
            match o.partitioning {
                Partitioning::Hash => base,
                Partitioning::Range => base | (o.significant_key_bits as u64) << RANGE_BITS_SHIFT,
            },
            o.dram_entries_log2 as u64,
            o.fanout_log2 as u64,
            o.log_partitions as u64,
            o.log_chunk_bytes as u64,
            o.log_chunks as u64,
            o.payload_segment_bytes as u64,
        ]
    };
    let check = |f: &[u64]| {
        let mut buf = Vec::with_capacity(48);
        for x in f {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        crc32c::crc32c(&buf) as u64
    };
    let magic = region.word(0).load(Ordering::Acquire);
    if magic == 0 {
        // New, or a creation a crash cut short (the magic is armed last, and before any other
        // file is created).
        refuse_lost_manifest(
            storage,
            0,
            "has a zero magic word (its creation never finished)",
        )?;
        if opts.read_only {
            // Its mapping is read only, and a read-only open creates nothing.
            return Err(Error::NotADatabase {
                path: storage.location(),
                detail: format!(
                    "{MANIFEST} has a zero magic word: the database's creation never finished \
                     (a writable open finishes it; a read-only open creates nothing)"
                ),
            });
        }
        opts.validate()?;
        check_room_to_create(storage, opts)?;
        region.reserve_words(0, 4096 / 8)?;
        let f = fields(opts);
        for (i, x) in f.iter().enumerate() {
            region.word(1 + i).store(*x, Ordering::Release);
        }
        region.word(8).store(check(&f), Ordering::Release);
        region.flush_words(1, 8);
        region.fence()?;
        region.word(0).store(MANIFEST_MAGIC, Ordering::Release);
        region.flush_words(0, 1);
        region.fence()?;
        return Ok(());
    }
    if magic != MANIFEST_MAGIC {
        // A file of this name and size is a Plush manifest: a wrong magic word is damage.
        return Err(Error::corruption(
            storage.location().join(MANIFEST),
            0,
            format!(
                "{MANIFEST} has magic {magic:#x}, not {MANIFEST_MAGIC:#x} (PLUSHDB): the \
                 manifest is damaged; restore it from a backup"
            ),
        ));
    }
    // The checksum first: a damaged version word is damage, not a newer format (a newer
    // build writes its version under a checksum that holds).
    let version = region.word(1).load(Ordering::Acquire);
    let f: Vec<u64> = (1..8)
        .map(|i| region.word(i).load(Ordering::Acquire))
        .collect();
    if region.word(8).load(Ordering::Acquire) != check(&f) {
        return Err(Error::corruption(
            storage.location().join(MANIFEST),
            64,
            "manifest checksum mismatch: the manifest is damaged; restore it from a backup",
        ));
    }
    let known = |v: u64| v == FORMAT_VERSION || v == MANIFEST_VERSION_PACKED;
    let range_bits = version >> RANGE_BITS_SHIFT;
    let version = version & ((1 << RANGE_BITS_SHIFT) - 1);
    if !known(version) || range_bits > 64 {
        return Err(Error::UnsupportedVersion {
            path: storage.location(),
            found: region.word(1).load(Ordering::Acquire) as u32,
            supported: MANIFEST_VERSION_PACKED as u32,
        });
    }
    let stored = Options {
        log_pack_groups: version == MANIFEST_VERSION_PACKED,
        dram_entries_log2: f[1] as u32,
        fanout_log2: f[2] as u32,
        log_partitions: f[3] as usize,
        log_chunk_bytes: f[4] as usize,
        log_chunks: f[5] as usize,
        payload_segment_bytes: f[6] as usize,
        partitioning: if range_bits == 0 {
            Partitioning::Hash
        } else {
            Partitioning::Range
        },
        significant_key_bits: if range_bits == 0 {
            opts.significant_key_bits
        } else {
            range_bits as u32
        },
        ..opts.clone()
    };
    refuse_geometry_mismatch(storage, opts, &stored)?;
    *opts = stored;
    Ok(())
}

/// Refuses, before the manifest is written, a database the file system cannot hold: the
/// recovery log fills its whole file as it is used, and `preallocate_levels` allocates its
/// levels at this open. (Deeper levels and payload segments grow with the data; a full file
/// system then fails the write that needed the space.)
fn check_room_to_create(storage: &dyn Storage, opts: &Options) -> Result<()> {
    let Some(free) = storage.free_bytes() else {
        return Ok(());
    };
    let log = opts.log_bytes().unwrap_or(u64::MAX);
    let levels: u64 = (1..=opts.preallocate_levels.min(opts.levels_max))
        .map(|n| level_file_bytes(opts.geometry(), n) as u64)
        .sum();
    let need = log.saturating_add(levels).saturating_add(4096);
    if need <= free {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    Err(Error::io(
        "create",
        storage.location(),
        std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!(
                "a new database with these options needs {:.2} GiB: {:.2} GiB of recovery log \
                 (log_partitions × log_chunks × log_chunk_bytes, filled as it is used) and \
                 {:.2} GiB for preallocate_levels={}; the file system has {:.2} GiB free. \
                 Nothing was created; free space, or choose a smaller log_chunks or \
                 log_chunk_bytes, or preallocate_levels=0",
                gib(need),
                gib(log),
                gib(levels),
                opts.preallocate_levels,
                gib(free)
            ),
        ),
    ))
}

/// Refuses a key longer than [`KEY_BYTES_MAX`].
fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > KEY_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "key is {} bytes; the longest key is {KEY_BYTES_MAX} bytes",
            key.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report
mod tests {
    use super::*;

    /// Regression (found by `attune-stress --engine hash`): a collection that ran between a
    /// put's payload append and its upsert found the record unreferenced and removed its
    /// segment; the put then published a dangling pointer (the acknowledged value lost, an
    /// older version of the key back).
    #[test]
    fn a_collection_leaves_a_segment_with_an_unpublished_append() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            dram_entries_log2: 4,
            fanout_log2: 2,
            log_partitions: 4,
            log_chunk_bytes: 64 << 10,
            log_chunks: 4,
            payload_segment_bytes: 8192,
            payload_gc: false,
            migration: Migration::Inline,
            sync: false,
            ..Options::default()
        };
        let db = Plush::open(dir.path(), opts).unwrap();
        let core = &db.core;
        let (key, value) = (b"in-flight key", vec![7u8; 100]);
        // The put's first half: its record is in the payload log, its pointer not in the table.
        let (ptr, pending, _) = core
            .payload
            .append(core.storage.as_ref(), key, &value)
            .unwrap();
        let seg = crate::payload::decode_pointer(ptr).0;
        for i in 0..200u32 {
            db.put_bytes(&i.to_le_bytes(), &[1u8; 100]).unwrap();
        }
        assert!(core.payload.sealed_segments().contains(&seg));
        core.collect_garbage(true).unwrap();
        assert!(core.payload.has_segment(seg), "collected under an append");
        // The second half, then the segment is the collection's.
        core.upsert(bucket_key(key), ptr).unwrap();
        drop(pending);
        assert_eq!(db.get_bytes(key).unwrap(), Some(value.clone()));
        assert!(core.collect_garbage(true).unwrap() > 0);
        assert!(!core.payload.has_segment(seg));
        assert_eq!(db.get_bytes(key).unwrap(), Some(value));
    }

    /// The mappings of files under `dir` in this process: (perms, VmFlags, path) from
    /// `/proc/self/smaps`.
    fn mappings_under(dir: &Path) -> Vec<(String, String, String)> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut out: Vec<(String, String, String)> = Vec::new();
        let mut current: Option<usize> = None;
        for line in smaps.lines() {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                if let Some(i) = current.take() {
                    out[i].1 = flags.trim().to_string();
                }
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let is_header = fields.len() >= 6 && fields[0].contains('-') && fields[1].len() == 4;
            if is_header && Path::new(fields[5]).starts_with(dir) {
                out.push((fields[1].to_string(), String::new(), fields[5..].join(" ")));
                current = Some(out.len() - 1);
            }
        }
        out
    }

    /// A read-only open maps nothing writable that the kernel charges to the commit limit: a
    /// default-geometry level 3 (74 GB, sparse) is mapped read only, and opens however the
    /// machine's overcommit is set (a private writable mapping of it is refused with ENOMEM
    /// where RAM and swap are smaller under the default heuristic, and is charged in full
    /// under strict accounting). Only the recovery log, which recovery may store into in
    /// memory, is writable, private and unreserved.
    #[test]
    fn a_read_only_open_maps_a_huge_level_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            preallocate_levels: 0,
            ..Options::default()
        };
        let db = Plush::open(dir.path(), opts).unwrap();
        db.put(1, 2).unwrap();
        db.put_bytes(b"a key longer than eight bytes", b"value")
            .unwrap();
        for num in 1..=3 {
            db.core.level(num).unwrap();
        }
        drop(db);
        let level3 = dir.path().join(level_file_name(3));
        assert!(std::fs::metadata(&level3).unwrap().len() > 64 << 30);

        let ro = Options {
            read_only: true,
            ..Options::default()
        };
        let db = Plush::open(dir.path(), ro).unwrap();
        assert_eq!(db.get(1).unwrap(), Some(2));
        let maps = mappings_under(dir.path());
        let names = |m: &[(String, String, String)]| {
            m.iter()
                .map(|(p, _, n)| format!("{p} {n}"))
                .collect::<Vec<_>>()
        };
        let level3_maps: Vec<_> = maps
            .iter()
            .filter(|(_, _, n)| Path::new(n) == level3)
            .collect();
        assert_eq!(level3_maps.len(), 1, "{:?}", names(&maps));
        for (perms, flags, name) in &maps {
            let writable = perms.as_bytes()[1] == b'w';
            if name.ends_with(LOG_FILE) {
                assert!(
                    flags.split_whitespace().any(|f| f == "nr"),
                    "the log is mapped without MAP_NORESERVE: {perms} {flags} {name}"
                );
            } else {
                assert!(!writable, "{name} is mapped writable ({perms}, {flags})");
            }
        }
        assert!(
            maps.iter().any(|(_, _, n)| n.contains("payload-")),
            "{:?}",
            names(&maps)
        );
        drop(db);
        // Nothing was written: a writable open still finds the same database.
        let db = Plush::open(dir.path(), Options::default()).unwrap();
        assert_eq!(db.get(1).unwrap(), Some(2));
        assert_eq!(
            db.get_bytes(b"a key longer than eight bytes").unwrap(),
            Some(b"value".to_vec())
        );
    }
}
