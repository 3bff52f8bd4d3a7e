//! The database: open/recover, the write path (WAL + memtable with group commit), the read path
//! (memtable → immutable memtable → levels), background flush and compaction, snapshots, stats.
//!
//! Thread safety: `DB` is `Send + Sync`; call it from any number of threads. Internally one state
//! mutex guards the version set, the memtable switch, the writer queue and snapshots; readers do
//! not take it (they clone an `Arc<SuperVersion>` under a read lock). Only the group-commit leader
//! writes the WAL and inserts into the memtable, with the state mutex released.
//!
//! Durability: a write with `sync = true` is fsynced before it is acknowledged; with `sync = false`
//! it reaches the OS before it is acknowledged (survives a process crash) and is fsynced within
//! `wal_sync_interval_ms`. After any crash the database recovers to a prefix of the acknowledged
//! history. A failed WAL write makes the database refuse further writes until it is reopened
//! (the log's tail is then unknown), and earlier acknowledged writes stay readable.
//!
//! One file per concept:
//!
//! - `mod.rs` (this file): the `DB` handle and its API, the shared state (`DbInner`, `State`,
//!   `SuperVersion`), snapshots and shutdown.
//! - `open.rs`: open and recovery (lock, manifest, WAL replay, value-log segments, the new WAL).
//! - `clean_close.rs`: the record a clean close leaves, which the next open checks recovery by.
//! - `write.rs`: the write path: the writer queue, group commit, the WAL and the memtable switch.
//! - `read.rs`: the read path: memtables, then the version's levels, then the value log.
//! - `iter.rs`: the user iterator over a captured `SuperVersion`.
//! - `blobs.rs`: the value log's lifecycle: the active and spare segments, sealing, syncing.
//! - `gc.rs`: value-log garbage collection: picking segments, moving live records, deleting.
//! - `ingest.rs`: bulk ingest of external tables (`DB::ingest`).
//! - `background.rs`: the background threads: flush, compaction, WAL sync and learning.
//! - `stats.rs`: the public statistics types and their assembly.

mod background;
mod blobs;
mod checkpoint;
mod clean_close;
mod gc;
mod ingest;
mod iter;
mod open;
mod prefetch;
mod ranges;
mod read;
mod repair;
mod secondary;
mod stats;
mod txn;
mod write;

pub use checkpoint::CheckpointReport;
pub use gc::GcReport;
use gc::GcStats;
pub use ingest::{IngestReport, IngestedFile};
pub use iter::DbIterator;
pub use prefetch::PrefetchStats;
pub use repair::{repair, repair_with_env, RepairReport, RepairedFile, LOST_DIR};
pub use secondary::{CatchUp, MAX_PASSES as SECONDARY_MAX_PASSES};
pub use stats::{BlobFileStats, LevelCompactionStats, Stats, VerifyReport};
use txn::Precondition;
pub use txn::Transaction;

use crate::batch::WriteBatch;
use crate::cache::hotkeys::HotKeyCache;
use crate::cache::BlockCache;
use crate::env::{Env, FileLock};
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::util::filename::{self};
use crate::version::{TableCache, Version, VersionSet, NUM_LEVELS};
use crate::vlog::{BlobFile, BlobPointer, SegmentScanner, VlogWriter};
use crate::wal::LogWriter;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Value-log segments readers may touch, by number.
type BlobSet = Arc<BTreeMap<u64, Arc<BlobFile>>>;

/// What a reader needs: the memtables, the version and the value-log segments, captured together.
pub(crate) struct SuperVersion {
    mem: Arc<MemTable>,
    imm: Option<Arc<MemTable>>,
    version: Arc<Version>,
    blobs: BlobSet,
}

/// A live value-log record that garbage collection moves: (key, value, where it was).
type GcEntry = (Vec<u8>, Vec<u8>, BlobPointer);

struct PendingWrite {
    id: u64,
    batch: Option<WriteBatch>,
    sync: bool,
    /// Set for a garbage-collection move: rewritten only where the key still points at the old
    /// record when this write leads its group.
    gc: Option<Vec<GcEntry>>,
    /// Set for a conditional write (a transaction's commit, a compare-and-set): checked by the
    /// leader with no other write in flight, and the batch is written only if it holds.
    check: Option<Precondition>,
}

struct State {
    versions: VersionSet,
    mem: Arc<MemTable>,
    imm: Option<Arc<MemTable>>,
    /// The last sequence `imm` holds (the database's last sequence when it was switched out):
    /// the flush records exactly this in the manifest, so that recovery knows the log after it
    /// begins at the next sequence (see `recover_logs`).
    imm_last_sequence: u64,
    writers: VecDeque<PendingWrite>,
    finished: HashMap<u64, Result<()>>,
    next_writer_id: u64,
    snapshots: BTreeMap<u64, usize>,
    bg_error: Option<Error>,
    pending_outputs: HashSet<u64>,
    compaction_running: bool,
    /// Background threads removing obsolete files outside this mutex (see
    /// `take_obsolete_files`); `flush` waits for them so that it returns with the flushed
    /// memtable's log gone, as it did when the removal held the mutex.
    removals_running: usize,
    level_stats: [LevelCompactionStats; NUM_LEVELS],
    flush_count: u64,
    flush_bytes: u64,
    /// Readers' handles of the live value-log segments.
    blobs: BlobSet,
    /// Segments emptied by garbage collection; dropped from the manifest once no snapshot can
    /// read them and the tables hold the moves.
    blob_pending_deletion: Vec<gc::PendingDeletion>,
    /// Value-log bytes per segment that flushes found shadowed by a newer version (kept in
    /// memory only: an estimate that lets collection start before compaction confirms it).
    blob_shadowed: HashMap<u64, u64>,
    /// The share of the last flushed memtable's value-log bytes that its flush found shadowing
    /// older records: applied to the memtables not yet flushed, whose garbage no flush has
    /// found yet, to estimate the value log's space amplification before the flush.
    shadow_share: f64,
    /// Segments the background collector scanned and left, with their garbage estimate then.
    gc_skip: HashMap<u64, u64>,
    gc_running: bool,
    gc: GcStats,
}

#[derive(Default)]
struct Counters {
    user_bytes_written: AtomicU64,
    wal_bytes: AtomicU64,
    wal_syncs: AtomicU64,
    writes: AtomicU64,
    write_groups: AtomicU64,
    stall_micros: AtomicU64,
    slowdowns: AtomicU64,
    gets: AtomicU64,
    gets_found: AtomicU64,
    blob_bytes_written: AtomicU64,
    blob_reads: AtomicU64,
    blob_prefetches: AtomicU64,
    merge_operands_read: AtomicU64,
}

pub(crate) struct DbInner {
    env: Arc<dyn Env>,
    /// Compaction's and value-log collection's I/O (the env, or pipes: `pipes_bulk_io`).
    bulk: crate::env::BulkIo,
    dir: PathBuf,
    opts: Options,
    state: Mutex<State>,
    /// Writers wait here for their turn or result.
    write_cv: Condvar,
    /// Background threads wait here for work.
    work_cv: Condvar,
    /// Foreground threads wait here for background progress.
    done_cv: Condvar,
    sv: RwLock<Arc<SuperVersion>>,
    wal: Mutex<Option<LogWriter>>,
    /// The active value-log segment; appended to only by the group-commit leader.
    vlog: Mutex<Option<VlogWriter>>,
    /// Full segments switched out by the leader and not yet sealed: the flush thread fsyncs
    /// each and records its seal in the manifest (`seal_segments`), so that no writer waits for
    /// the fsync of a segment's unsynced tail. Every sync of the value log fsyncs these first.
    /// Lock order: state, then `vlog`, then this.
    vlog_sealing: Mutex<Vec<VlogWriter>>,
    /// The next segment, created (and listed in the manifest) by the flush thread once the
    /// active one is three quarters full, so that the switch costs the leader no file creation
    /// and no manifest or directory fsync. Lock order: state, `vlog`, then this.
    vlog_spare: Mutex<Option<VlogWriter>>,
    /// The previous WAL (of the immutable memtable) until it is fsynced: by the flush thread, or
    /// first by a sync write, so that a synced write never survives a crash that loses an earlier
    /// write of the previous log (the prefix guarantee across log files).
    imm_wal: Mutex<Option<LogWriter>>,
    last_sequence: AtomicU64,
    tables: Arc<TableCache>,
    cache: Arc<BlockCache>,
    /// Adaptive cache sizing (Symbiosis), when `memory_budget` is set.
    cache_sizing: Option<Arc<crate::cache::sizing::Controller>>,
    counters: Counters,
    shutting_down: AtomicBool,
    /// Values of hot keys for latest-state gets (`hot_key_cache_bytes`; None when off).
    hot: Option<HotKeyCache>,
    /// `prefetcher = tinfetch`'s shared state (None for the other settings).
    prefetch: Option<prefetch::ScanPrefetch>,
    /// The directory lock, released by `close` even while iterators or snapshots still hold
    /// this state (they fail with `Error::Closed` from then on).
    lock: Mutex<Option<Box<dyn FileLock>>>,
    /// The fork generation and process that opened the database (`env::fork`): a forked child
    /// must not use the handle.
    fork_generation: u64,
    opener_pid: u32,
    /// A secondary instance's view of the writer (`secondary.rs`); None for other opens.
    secondary: Option<Mutex<secondary::Follower>>,
}

/// An open database. Closing happens on `close()` or drop.
pub struct DB {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// A consistent read view; reads through `ReadOptions { snapshot: Some(s.sequence()) }`.
pub struct Snapshot {
    inner: Arc<DbInner>,
    seq: u64,
}

impl Snapshot {
    pub fn sequence(&self) -> u64 {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if self.inner.same_process().is_err() {
            return; // the parent's lock may be held by a thread that does not exist here
        }
        let mut st = self.inner.state.lock();
        if let Some(c) = st.snapshots.get_mut(&self.seq) {
            *c -= 1;
            if *c == 0 {
                st.snapshots.remove(&self.seq);
            }
        }
        if !st.blob_pending_deletion.is_empty() && !self.inner.shutting_down.load(Ordering::Acquire)
        {
            // A failure leaves the segments listed; the next collection retries. Never after
            // close: the directory may belong to a new opener by then.
            let _ = self.inner.finalize_blob_deletions(&mut st);
        }
    }
}

impl DB {
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(key, value, WriteOptions::default())
    }

    /// Ok while the handle may be used: not closed, and in the process that opened it (a forked
    /// child gets `Error::Forked`; see `env::fork`).
    pub fn check_usable(&self) -> Result<()> {
        self.inner.usable()
    }

    /// Whether `close` has run (or begun).
    pub fn is_closed(&self) -> bool {
        self.inner.shutting_down.load(Ordering::Acquire)
    }

    pub fn put_opt(&self, key: &[u8], value: &[u8], wo: WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value)?;
        self.write(b, wo)
    }

    /// Puts `key` with a time to live: from `ttl` after now on (by this database's wall
    /// clock, [`DB::now_unix_millis`]), reads, iterators and snapshots see it as deleted, and
    /// compaction drops it. A zero `ttl` is refused.
    pub fn put_ttl(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: std::time::Duration,
        wo: WriteOptions,
    ) -> Result<()> {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 {
            return Err(Error::InvalidArgument(format!(
                "ttl must be at least one millisecond, got {ttl:?}"
            )));
        }
        let mut b = WriteBatch::new();
        b.put_with_expiry(key, value, self.now_unix_millis().saturating_add(ms))?;
        self.write(b, wo)
    }

    /// The wall clock expiries are stamped and read against, in Unix milliseconds (the
    /// environment's; the system clock on a real file system).
    pub fn now_unix_millis(&self) -> u64 {
        self.inner.env.now_unix_millis()
    }

    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(key, WriteOptions::default())
    }

    pub fn delete_opt(&self, key: &[u8], wo: WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key)?;
        self.write(b, wo)
    }

    /// Adds `operand` to `key`: a read then sees the database's merge operator applied to the
    /// key's older value (or its absence) and every operand since (see
    /// [`Options::merge_operator`]). Refused without an operator, and for an operand the
    /// operator does not take (`add`: 8 bytes).
    pub fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        self.merge_opt(key, operand, WriteOptions::default())
    }

    pub fn merge_opt(&self, key: &[u8], operand: &[u8], wo: WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.merge(key, operand)?;
        self.write(b, wo)
    }

    /// Applies a batch atomically.
    pub fn write(&self, batch: WriteBatch, wo: WriteOptions) -> Result<()> {
        self.inner.write(batch, wo)
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// Reads `key` as of `ro.snapshot` (the latest state when None). A key over
    /// [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES), which no write accepts, is an invalid argument.
    pub fn get_opt(&self, key: &[u8], ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        self.inner.usable()?;
        crate::batch::check_key(key)?;
        self.inner.get(key, ro)
    }

    /// Reads many keys at one state: all of them as of `ro.snapshot`, or as of one moment
    /// when None (unlike a loop of `get`s, which a concurrent writer can split). Keys are
    /// looked up in sorted order, so neighbouring keys share the blocks they read, and
    /// separated values are read in value-log order; the answers come back in the order asked
    /// (a key asked twice is answered twice). Any key over
    /// [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES) is an invalid argument and nothing is read.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        ro: &ReadOptions,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.usable()?;
        for k in keys {
            crate::batch::check_key(k.as_ref())?;
        }
        self.inner.multi_get(keys, ro)
    }

    /// A snapshot of the current state.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.inner.usable()?;
        let mut st = self.inner.state.lock();
        let seq = self.inner.last_sequence.load(Ordering::Acquire);
        *st.snapshots.entry(seq).or_insert(0) += 1;
        Ok(Snapshot {
            inner: self.inner.clone(),
            seq,
        })
    }

    /// An iterator over the user view; position it with a seek before use. After `close` (or
    /// in a forked child) every positioning leaves it invalid with the error in `status`.
    pub fn iter(&self, ro: &ReadOptions) -> Result<DbIterator> {
        self.inner.usable()?;
        Ok(DbInner::iter(&self.inner, ro))
    }

    /// Flushes the memtable to an L0 table and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.writable("flush")?;
        self.inner.flush()
    }

    /// Compacts every file overlapping [begin, end] (None = unbounded) down to the last level
    /// that holds data, waiting for the result.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.writable("compaction")?;
        self.inner.flush()?;
        self.inner.compact_range(begin, end)
    }

    /// Garbage-collects the value log: flushes the memtable (so that the garbage its
    /// overwrites and deletes make is known), then rewrites and removes every sealed segment
    /// with at least `blob_gc_garbage_ratio` of dead records.
    pub fn gc(&self) -> Result<GcReport> {
        self.gc_with_ratio(self.inner.opts.blob_gc_garbage_ratio)
    }

    /// Like [`DB::gc`] with an explicit dead share a segment needs (0..=1; 0 collects every
    /// sealed segment with any dead record).
    pub fn gc_with_ratio(&self, min_garbage_ratio: f64) -> Result<GcReport> {
        if !(0.0..=1.0).contains(&min_garbage_ratio) {
            return Err(Error::InvalidArgument(format!(
                "garbage ratio {min_garbage_ratio} outside 0..=1"
            )));
        }
        self.inner.writable("garbage collection")?;
        if self.inner.opts.enable_blob_files {
            self.inner.flush()?;
        }
        self.inner.gc(min_garbage_ratio)
    }

    /// The adaptive cache-sizing controller, when `memory_budget` is set.
    pub fn cache_sizing(&self) -> Option<&Arc<crate::cache::sizing::Controller>> {
        self.inner.cache_sizing.as_ref()
    }

    /// Changes the block cache capacity while running.
    pub fn set_block_cache_capacity(&self, bytes: u64) {
        self.inner.cache.set_capacity(bytes);
    }

    /// Statistics; they stay readable after `close` (the last values). In a forked child they
    /// are all zero: the engine's locks there may be held by threads that do not exist (see
    /// [`DB::check_usable`]).
    pub fn stats(&self) -> Stats {
        if self.inner.same_process().is_err() {
            return Stats::default();
        }
        self.inner.stats()
    }

    /// The effective options.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// What moves compaction's and value-log collection's bytes: "env", or the Data Pipes
    /// mechanism (`pipes_bulk_io`: "io_uring", "threads").
    pub fn bulk_io(&self) -> &'static str {
        self.inner.bulk.mechanism()
    }

    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Checks every checksum of every live table and value-log segment (the active segment up to
    /// its current end), and every value pointer in the tables: it ends inside its segment (a
    /// cut segment otherwise shows only when the value is read) and the record it names is
    /// whole, its checksum holds and it belongs to the key. A pointer past where the walk of an
    /// unsealed segment stopped is read and checked on its own, so a damaged record there is an
    /// error naming the segment and the record's offset, not the end of the walk.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.inner.usable()?;
        let sv = self.inner.sv.read().clone();
        let mut r = VerifyReport::default();
        // Read after `sv` was taken: every pointer in its tables was written before.
        // Per segment: its length, and the end of the records the walk below checked.
        let mut sizes: HashMap<u64, (u64, u64)> = HashMap::new();
        let metas = self.inner.state.lock().versions.blob_files.clone();
        for (n, f) in sv.blobs.iter() {
            r.blob_segments += 1;
            let Some(size) = metas.get(n).filter(|m| m.sealed).map(|m| m.size) else {
                // The active segment may end in a record being written right now: the walk
                // stops there, and pointers past it are checked one by one below.
                let data = f.read_all()?;
                let mut scan = SegmentScanner::new(f.path(), &data)?;
                r.blob_records += scan.by_ref().count() as u64;
                sizes.insert(*n, (data.len() as u64, scan.valid_len()));
                continue;
            };
            sizes.insert(*n, (size, size));
            if size < crate::vlog::SEGMENT_HEADER_BYTES {
                continue; // sealed empty at recovery: created just before a crash, never written
            }
            let data = f.read_sealed(size)?;
            let mut scan = SegmentScanner::new(f.path(), &data)?;
            r.blob_records += scan.by_ref().count() as u64;
            scan.check_complete(f.path())?;
        }
        for f in sv.version.files.iter().flatten() {
            let t = self.inner.tables.get(f.number)?;
            let table_path = filename::table_path(&self.inner.dir, f.number);
            r.table_entries += t.verify_entries(&mut |ikey, value, block_offset| {
                let kind = crate::key::kind(ikey);
                let Some(value) = kind.and_then(|k| crate::key::blob_payload(k, value)) else {
                    return Ok(());
                };
                let p = BlobPointer::decode(value).ok_or_else(|| {
                    Error::corruption(&table_path, block_offset, "malformed value pointer")
                })?;
                // A segment no longer live only serves versions that newer ones shadow.
                match sizes.get(&p.file) {
                    Some(&(size, _)) if p.end() > size => Err(Error::corruption(
                        &table_path,
                        block_offset,
                        format!(
                            "a value pointer reaches byte {} of {}, which has {size} bytes (the \
                             segment was cut; the values past its end are lost)",
                            p.end(),
                            filename::blob_path(&self.inner.dir, p.file).display()
                        ),
                    )),
                    Some(&(_, checked)) if p.end() > checked => match sv.blobs.get(&p.file) {
                        Some(f) => f.read(&p, crate::key::user_key(ikey)).map(|_| ()),
                        None => Ok(()),
                    },
                    _ => Ok(()),
                }
            })?;
            r.tables += 1;
        }
        Ok(r)
    }

    /// Learns a model for every live table that has none, now, in the calling thread (the
    /// "offline" learning of Bourbon's evaluation; the background learner does the same file
    /// by file). Returns the number of tables with a model afterwards. Fails when
    /// `learned_index` is off.
    pub fn learn_all(&self) -> Result<u64> {
        self.inner
            .writable("learning models (model files are written beside the tables)")?;
        let inner = &self.inner;
        let Some(l) = inner.tables.learning().cloned() else {
            return Err(Error::InvalidArgument(
                "learned_index is off: open the database with learned_index=analyzer, always or \
                 offline"
                    .into(),
            ));
        };
        let v = inner.sv.read().version.clone();
        let mut with_model = 0;
        for f in v.files.iter().flatten() {
            let t = inner.tables.get(f.number)?;
            let fs = l.file_stats(f.number);
            if l.learn_table(inner.env.as_ref(), &inner.dir, &t, fs.as_deref())? {
                with_model += 1;
            }
        }
        if inner.opts.learned_level {
            for level in 1..NUM_LEVELS {
                let files = &v.files[level];
                if files.len() < 2 || v.level_models[level].get().is_some() {
                    continue;
                }
                let tables = files
                    .iter()
                    .map(|f| inner.tables.get(f.number))
                    .collect::<Result<Vec<_>>>()?;
                crate::version::learn::learn_level(
                    inner.env.as_ref(),
                    &inner.dir,
                    &v,
                    level,
                    &tables,
                    l.delta,
                )?;
            }
        }
        Ok(with_model)
    }

    /// Stops background work, syncs the WAL and releases the lock. Iterators and snapshots
    /// still alive fail with `Error::Closed` from then on; a second call does nothing. In a
    /// forked child it only marks the handle closed: the files and the lock are the parent's.
    pub fn close(&self) -> Result<()> {
        if self.inner.same_process().is_err() {
            self.abandon_in_child();
            return Ok(());
        }
        let r = self.shutdown();
        self.inner.drop_writers();
        // Released even when a final sync failed: the handle is unusable either way, and a new
        // open recovers from whatever reached the disk.
        self.inner.lock.lock().take();
        // Snapshots and iterators may keep the engine's state alive; not its cached blocks.
        self.inner.cache.set_capacity(0);
        r
    }

    /// In a forked child: never join the parent's threads (they do not exist here) nor let the
    /// engine's state drop (its destructors would touch the parent's files): both are leaked,
    /// which costs the child memory it already had, nothing else.
    fn abandon_in_child(&self) {
        self.inner.shutting_down.store(true, Ordering::Release);
        std::mem::forget(self.inner.clone());
        if let Some(mut t) = self.threads.try_lock() {
            std::mem::forget(std::mem::take(&mut *t));
        }
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.shutting_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if self.inner.opts.read_only {
            for t in self.threads.lock().drain(..) {
                let _ = t.join();
            }
            return Ok(());
        }
        {
            let _st = self.inner.state.lock();
            self.inner.work_cv.notify_all();
            self.inner.done_cv.notify_all();
            self.inner.write_cv.notify_all();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        if let Some(l) = self.inner.tables.learning() {
            // A cache of statistics: failing to write it costs a bootstrap after reopen.
            let _ = l.save_state(self.inner.env.as_ref(), &self.inner.dir);
        }
        self.inner.sync_imm_wal()?;
        {
            let mut st = self.inner.state.lock();
            if st.bg_error.is_none() {
                self.inner.seal_segments(&mut st)?;
                self.inner.drop_spare_segment(&mut st)?;
                self.inner.delete_files_dead_at_close(&mut st);
            }
        }
        if let Some(v) = self.inner.vlog.lock().as_mut() {
            v.sync()?;
        }
        let (log_number, healthy) = {
            let st = self.inner.state.lock();
            (st.mem.log_number, st.bg_error.is_none())
        };
        let mut wal = self.inner.wal.lock();
        if let Some(w) = wal.as_mut() {
            w.sync()?;
            if healthy {
                // Every write up to here is in a synced log or in tables: the next open checks
                // that it recovers them all.
                clean_close::CleanClose {
                    last_sequence: self.inner.last_sequence.load(Ordering::Acquire),
                    log_number,
                }
                .write(self.inner.env.as_ref(), &self.inner.dir)?;
            }
        }
        Ok(())
    }
}

impl Drop for DB {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl DbInner {
    /// Lets go of the WAL and value-log writers at close, before the directory lock: dropping
    /// a writer cuts its file's reserved zeros off, which must not happen after another
    /// instance (here or in another process) has opened the directory and mapped the file.
    /// Iterators and snapshots that outlive the close keep the rest of the state, not these;
    /// writes find them gone and fail with `Error::Closed`.
    fn drop_writers(&self) {
        let wal = self.wal.lock().take();
        let imm_wal = self.imm_wal.lock().take();
        let vlog = self.vlog.lock().take();
        let sealing = std::mem::take(&mut *self.vlog_sealing.lock());
        let spare = self.vlog_spare.lock().take();
        drop((wal, imm_wal, vlog, sealing, spare));
    }

    /// `Error::Forked` in a process forked from the opener (checked before any lock is taken:
    /// a lock held at the fork by one of the parent's threads is held forever in the child).
    #[inline]
    fn same_process(&self) -> Result<()> {
        if crate::env::fork::current() != self.fork_generation {
            return Err(Error::Forked {
                path: self.dir.clone(),
                opener_pid: self.opener_pid,
                pid: std::process::id(),
            });
        }
        Ok(())
    }

    /// Ok while the handle may be read: the opener's process, not closed.
    #[inline]
    fn usable(&self) -> Result<()> {
        self.same_process()?;
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed(format!(
                "{} was closed; open it again to use it",
                self.dir.display()
            )));
        }
        Ok(())
    }

    /// Ok while the handle may be changed: usable and not opened read-only.
    fn writable(&self, op: &'static str) -> Result<()> {
        self.usable()?;
        if self.opts.read_only {
            return Err(Error::ReadOnly {
                path: self.dir.clone(),
                op,
            });
        }
        Ok(())
    }

    fn install_super_version(&self, st: &State) {
        let sv = Arc::new(SuperVersion {
            mem: st.mem.clone(),
            imm: st.imm.clone(),
            version: st.versions.current(),
            blobs: st.blobs.clone(),
        });
        *self.sv.write() = sv;
        self.tables.sync_learning(&st.versions.current());
    }
}

// DB is shared across threads and iterators move between them (Python hands them around).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    const fn send<T: Send>() {}
    send_sync::<DB>();
    send::<DbIterator>();
};
