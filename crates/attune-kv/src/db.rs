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

use crate::batch::WriteBatch;
use crate::cache::{BlockCache, CacheStats};
use crate::compaction::{self, Compaction};
use crate::env::{Env, FileLock, PosixEnv, ReadOnlyEnv};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::hotkeys::{HotKeyCache, HotKeyStats};
use crate::iter::{DbIter, InternalIterator, MergingIterator};
use crate::key::ValueKind;
use crate::learned::{LearnStats, Learning};
use crate::log::{LogReader, LogWriter};
use crate::memtable::{with_lookup_key, Lookup, MemTable, MemTableIter};
use crate::options::{LearnedIndex as LearnedMode, Options, ReadOptions, WriteOptions};
use crate::steps::{self, Step};
use crate::table::{TableBuilder, TableBuilderOptions, TableIter};
use crate::version::{
    FileMeta, LevelIter, TableCache, Version, VersionEdit, VersionSet, NUM_LEVELS,
};
use crate::vlog::{BlobFile, BlobPointer, SegmentScanner, VlogWriter};
use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Largest group-commit batch in bytes: 1 MiB, LevelDB's choice; a small leading write only waits
/// for 128 KiB more so that small writes keep low latency.
const GROUP_BYTES_MAX: usize = 1 << 20;
const GROUP_SMALL_LEAD_EXTRA: usize = 128 << 10;

/// Live records a garbage-collection round moves, per write: at most this many bytes, so that
/// the writer queue is held for a bounded time (about a millisecond of appends).
const GC_CHUNK_BYTES: usize = 1 << 20;
/// How often the learning thread asks the analyzer for due files. Default 10 ms: a fifth of
/// T_wait, so a file is learned at most 10 ms after its wait ends; an idle poll costs microseconds.
const LEARN_POLL: Duration = Duration::from_millis(10);

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
}

/// Outcome of one garbage-collection call.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GcReport {
    pub segments_collected: u64,
    pub records_rewritten: u64,
    pub bytes_rewritten: u64,
    /// Bytes of segments scheduled for deletion (deleted once no snapshot needs them).
    pub bytes_reclaimed: u64,
}

#[derive(Default)]
struct GcStats {
    runs: u64,
    segments: u64,
    records_rewritten: u64,
    bytes_rewritten: u64,
    bytes_reclaimed: u64,
    max_pause_micros: u64,
}

#[derive(Default, Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LevelCompactionStats {
    pub compactions: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub trivial_moves: u64,
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
    level_stats: [LevelCompactionStats; NUM_LEVELS],
    flush_count: u64,
    flush_bytes: u64,
    /// Readers' handles of the live value-log segments.
    blobs: BlobSet,
    /// Segments emptied by garbage collection, with the sequence after which no reader needs
    /// them; dropped from the manifest once no snapshot is older.
    blob_pending_deletion: Vec<(u64, u64)>,
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
}

pub(crate) struct DbInner {
    env: Arc<dyn Env>,
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
    cache_sizing: Option<Arc<crate::symbiosis::Controller>>,
    counters: Counters,
    shutting_down: AtomicBool,
    /// Values of hot keys for latest-state gets (`hot_key_cache_bytes`; None when off).
    hot: Option<HotKeyCache>,
    /// The directory lock, released by `close` even while iterators or snapshots still hold
    /// this state (they fail with `Error::Closed` from then on).
    lock: Mutex<Option<Box<dyn FileLock>>>,
    /// The fork generation and process that opened the database (`env::fork`): a forked child
    /// must not use the handle.
    fork_generation: u64,
    opener_pid: u32,
}

/// Bytes of one value-log segment by status, for stats.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BlobFileStats {
    pub number: u64,
    pub size: u64,
    pub garbage: u64,
    pub sealed: bool,
}

/// What [`DB::verify`] checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VerifyReport {
    /// Live table files, and the entries in them (every version and tombstone).
    pub tables: u64,
    pub table_entries: u64,
    /// Value-log segments, and the records in them (live or not).
    pub blob_segments: u64,
    pub blob_records: u64,
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

/// Engine statistics (see `docs/kv.md` for each field).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    pub last_sequence: u64,
    pub level_files: Vec<usize>,
    pub level_bytes: Vec<u64>,
    pub level_compactions: Vec<LevelCompactionStats>,
    pub memtable_bytes: u64,
    pub immutable_memtable: bool,
    pub flushes: u64,
    pub flush_bytes_written: u64,
    pub compaction_bytes_read: u64,
    pub compaction_bytes_written: u64,
    pub user_bytes_written: u64,
    pub wal_bytes_written: u64,
    pub wal_syncs: u64,
    pub writes: u64,
    pub write_groups: u64,
    pub write_amplification: f64,
    pub stall_micros: u64,
    pub slowdowns: u64,
    pub gets: u64,
    pub gets_found: u64,
    pub block_cache: CacheStats,
    /// The cache budget's split and the sizing controller (None without `memory_budget`).
    pub cache_tiers: Option<crate::symbiosis::CacheTierStats>,
    pub live_sst_bytes: u64,
    pub num_snapshots: usize,
    pub table_pinned_bytes: u64,
    /// Value-log segments (size 0 = the active one, whose length is `blob_active_bytes`).
    pub blob_files: Vec<BlobFileStats>,
    /// Bytes of all value-log segments.
    pub blob_bytes: u64,
    /// Bytes known to be garbage (found by flush and compaction) and not yet collected.
    pub blob_garbage_bytes: u64,
    /// `blob_bytes - blob_garbage_bytes`.
    pub blob_live_bytes: u64,
    /// `blob_bytes / blob_live_bytes` (1.0 without a value log).
    pub blob_space_amp: f64,
    /// Value bytes appended to the value log by writes (garbage collection included).
    pub blob_bytes_written: u64,
    pub blob_reads: u64,
    pub blob_prefetches: u64,
    pub gc_runs: u64,
    pub gc_segments_collected: u64,
    pub gc_records_rewritten: u64,
    pub gc_bytes_rewritten: u64,
    pub gc_bytes_reclaimed: u64,
    /// Longest time one garbage-collection write held the writer queue.
    pub gc_max_pause_micros: u64,
    /// Table files whose records all have one size and sit uncompressed (key + pointer), so a
    /// record's position gives its byte offset.
    pub fixed_layout_files: Vec<u64>,
    /// Learned indexes (docs/learned-index.md): counters of the analyzer and the lookup paths
    /// (`mode` is "off" and the rest zero when they are off).
    pub learned: LearnStats,
    /// Bytes of the live tables' models per level.
    pub model_bytes_per_level: Vec<u64>,
    /// Bytes of all live tables' models.
    pub model_bytes: u64,
    /// Segments of all live tables' models.
    pub model_segments: u64,
    /// Live tables that have a model.
    pub files_with_models: u64,
    /// Levels that have a level model (option `learned_level`), and those models' bytes (not
    /// included in `model_bytes`, which counts the tables' models).
    pub level_models: u64,
    pub level_model_bytes: u64,
    /// Hot-key cache counters (all zero when `hot_key_cache_bytes` is 0).
    pub hot_key_cache: HotKeyStats,
}

impl DB {
    /// Opens (or creates) the database in `path` on the real file system.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<DB> {
        let memory = crate::env::memory_limit_bytes();
        let env = PosixEnv::new()
            .with_mmap_reads(opts.mmap_reads)
            .with_mmap_limit(opts.mmap_reads_limit.bytes(memory))
            .with_mmap_logs(opts.mmap_logs);
        Self::open_with_env(Arc::new(env), path.as_ref(), opts)
    }

    /// Opens with a given environment (tests use `MemEnv`).
    pub fn open_with_env(env: Arc<dyn Env>, dir: &Path, opts: Options) -> Result<DB> {
        if dir.as_os_str().is_empty() {
            // Checked before anything touches the file system: an empty path would put LOCK
            // and the database's files in the working directory.
            return Err(Error::InvalidArgument(
                "path is empty; give a directory (an existing database or a new path)".into(),
            ));
        }
        let opts = opts.sanitized()?;
        let fork_generation = crate::env::fork::generation();
        let read_only = opts.read_only;
        // Read-only: every change the engine might still attempt fails instead of writing.
        let env: Arc<dyn Env> = if read_only {
            Arc::new(ReadOnlyEnv::new(env))
        } else {
            env
        };
        let dir = dir.to_path_buf();
        let current = filename::current_path(&dir);
        refuse_non_directory(env.as_ref(), &dir)?;
        if !env.exists(&dir) {
            if read_only {
                return Err(Error::NotADatabase {
                    path: dir,
                    detail: "directory does not exist (a read-only open creates nothing)".into(),
                });
            }
            if !opts.create_if_missing {
                return Err(Error::NotADatabase {
                    path: dir,
                    detail: "directory does not exist (create_if_missing is off)".into(),
                });
            }
            crate::env::create_dir_all_durable(env.as_ref(), &dir).map_err(|e| match e {
                Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotADirectory => {
                    // The deepest ancestor that exists is the file in the way.
                    let file = dir.ancestors().skip(1).find(|a| env.exists(a));
                    Error::NotADatabase {
                        path: dir.clone(),
                        detail: format!(
                            "cannot create it: {} is a file, not a directory; give a path \
                             inside a directory",
                            file.unwrap_or(&dir).display()
                        ),
                    }
                }
                e => e,
            })?;
        }
        let lock_path = filename::lock_path(&dir);
        let lock_existed = env.exists(&lock_path);
        let lock = match env.lock(&lock_path) {
            Ok(l) => Some(l),
            Err(Error::Io { source, .. })
                if read_only && source.kind() == std::io::ErrorKind::NotFound =>
            {
                if !env.exists(&current) {
                    return Err(Error::NotADatabase {
                        path: dir,
                        detail: "no database here (a read-only open creates nothing)".into(),
                    });
                }
                // A copy made without its LOCK file: read it without a lock, since a read-only
                // open creates nothing (a writable open recreates the file).
                None
            }
            Err(e) => return Err(e),
        };
        let exists = env.exists(&current);
        if exists && opts.error_if_exists {
            return Err(Error::AlreadyExists { path: dir });
        }
        if !exists {
            if let Err(e) = check_creatable(env.as_ref(), &dir, &opts) {
                // Leave a directory that is not ours as it was: no LOCK file of ours in it.
                drop(lock);
                if !lock_existed && !read_only {
                    let _ = env.remove_file(&lock_path);
                }
                return Err(e);
            }
        }
        let (cache, cache_sizing) = crate::symbiosis::build(&opts, &env, &dir)?;
        let tables = Arc::new(
            TableCache::new(env.clone(), dir.clone(), cache.clone())
                .with_learning(Learning::new(&opts)?)
                // With a memory budget the block cache is what the budget accounts (and what
                // cache sizing resizes), so every block read goes through it.
                .with_in_place_reads(opts.memory_budget == 0),
        );
        let mut versions = VersionSet::new(env.clone(), dir.clone());
        if exists {
            if let Err(e) = versions.recover() {
                // Another engine's directory fails as a damaged manifest: say what it is.
                return Err(match foreign_engine_in(env.as_ref(), &dir) {
                    Some(what) => foreign_database_error(&dir, &what),
                    None => e,
                });
            }
        } else {
            versions.create_new()?;
        }
        if let Some(l) = tables.learning() {
            l.load_state(env.as_ref(), &dir);
        }
        {
            let present: HashSet<String> = env.list_dir(&dir)?.into_iter().collect();
            let v = versions.current();
            for f in v.files.iter().flatten() {
                let p = filename::table_path(&dir, f.number);
                let name = p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default()
                    .to_string();
                if !present.contains(&name) {
                    return Err(Error::corruption(
                        dir.join(filename::manifest_name(versions.manifest_number)),
                        0,
                        format!("the manifest lists table {name}, which is missing"),
                    ));
                }
            }
        }
        if opts.paranoid_checks {
            let v = versions.current();
            for f in v.files.iter().flatten() {
                tables.get(f.number)?.verify()?;
            }
        }
        // Before anything is changed on disk: a log the manifest does not account for fails.
        let logs = logs_to_replay(env.as_ref(), &dir, &versions)?;
        let mut edit = VersionEdit::default();
        let blob_valid = recover_blob_files(env.as_ref(), &dir, &versions, &mut edit, read_only)
            .map_err(recovery_hint)?;
        let (max_seq, replayed) = recover_logs(
            &env,
            &dir,
            &opts,
            &mut versions,
            &mut edit,
            &blob_valid,
            logs,
        )
        .map_err(recovery_hint)?;
        let (mem, wal_file) = if read_only {
            // Nothing is written: the replayed logs stay in memory as the memtable, and the
            // manifest keeps naming them, so the next writable open replays them again.
            versions.last_sequence = max_seq;
            let log_number = versions.log_number;
            let mem = replayed.unwrap_or_else(|| MemTable::new(log_number));
            (Arc::new(mem), None)
        } else {
            let (log_number, wal) =
                start_new_log(env.as_ref(), &dir, &opts, &mut versions, edit, max_seq)
                    .map_err(recovery_hint)?;
            (Arc::new(MemTable::new(log_number)), Some(wal))
        };
        let blobs: BlobSet = Arc::new(
            versions
                .blob_files
                .keys()
                .map(|&n| (n, Arc::new(BlobFile::new(env.clone(), &dir, n))))
                .collect(),
        );
        let sv = Arc::new(SuperVersion {
            mem: mem.clone(),
            imm: None,
            version: versions.current(),
            blobs: blobs.clone(),
        });
        let hot = HotKeyCache::new(opts.hot_key_cache_bytes);
        let inner = Arc::new(DbInner {
            env,
            dir,
            opts,
            state: Mutex::new(State {
                versions,
                mem,
                imm: None,
                imm_last_sequence: max_seq,
                writers: VecDeque::new(),
                finished: HashMap::new(),
                next_writer_id: 0,
                snapshots: BTreeMap::new(),
                bg_error: None,
                pending_outputs: HashSet::new(),
                compaction_running: false,
                level_stats: Default::default(),
                flush_count: 0,
                flush_bytes: 0,
                blobs,
                blob_pending_deletion: Vec::new(),
                gc_running: false,
                gc: GcStats::default(),
            }),
            write_cv: Condvar::new(),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            sv: RwLock::new(sv),
            wal: Mutex::new(wal_file.map(LogWriter::new)),
            vlog: Mutex::new(None),
            vlog_sealing: Mutex::new(Vec::new()),
            vlog_spare: Mutex::new(None),
            imm_wal: Mutex::new(None),
            last_sequence: AtomicU64::new(max_seq),
            tables,
            cache,
            cache_sizing,
            counters: Counters::default(),
            shutting_down: AtomicBool::new(false),
            hot,
            lock: Mutex::new(lock),
            fork_generation,
            opener_pid: std::process::id(),
        });
        {
            let mut st = inner.state.lock();
            if !read_only {
                inner.delete_obsolete_files(&mut st);
            }
            let v = st.versions.current();
            inner.tables.sync_learning(&v);
            if inner.opts.learned_level && inner.tables.learning().is_some() {
                crate::learned::load_level_models(inner.env.as_ref(), &inner.dir, &v);
            }
        }
        let mut threads = Vec::new();
        let spawn = |name: &str, f: fn(&DbInner)| {
            let i = inner.clone();
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || f(&i))
                .map_err(|e| Error::io("spawn thread", PathBuf::from(name), e))
        };
        // A read-only open changes nothing, so it runs none of the threads that write.
        if !read_only {
            threads.push(spawn("attune-flush", DbInner::flush_loop)?);
            threads.push(spawn("attune-compact", DbInner::compaction_loop)?);
            threads.push(spawn("attune-gc", DbInner::gc_loop)?);
        }
        if !read_only
            && inner
                .tables
                .learning()
                .is_some_and(|l| l.mode != LearnedMode::Offline)
        {
            threads.push(spawn("attune-learn", DbInner::learn_loop)?);
        }
        if !read_only && inner.opts.wal_sync_interval_ms > 0 {
            threads.push(spawn("attune-walsync", DbInner::wal_sync_loop)?);
        }
        if inner.cache_sizing.is_some() {
            threads.push(spawn("attune-cache", |i| {
                if let Some(c) = &i.cache_sizing {
                    c.run(&i.shutting_down);
                }
            })?);
        }
        let db = DB {
            inner,
            threads: Mutex::new(threads),
        };
        db.inner.work_cv.notify_all();
        Ok(db)
    }

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

    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(key, WriteOptions::default())
    }

    pub fn delete_opt(&self, key: &[u8], wo: WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key)?;
        self.write(b, wo)
    }

    /// Applies a batch atomically.
    pub fn write(&self, batch: WriteBatch, wo: WriteOptions) -> Result<()> {
        self.inner.write(batch, wo)
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    pub fn get_opt(&self, key: &[u8], ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        self.inner.usable()?;
        self.inner.get(key, ro)
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

    /// Garbage-collects the value log: every sealed segment with at least
    /// `blob_gc_garbage_ratio` of dead records is rewritten and removed.
    pub fn gc(&self) -> Result<GcReport> {
        self.inner.writable("garbage collection")?;
        self.inner.gc(self.inner.opts.blob_gc_garbage_ratio)
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
        self.inner.gc(min_garbage_ratio)
    }

    /// The adaptive cache-sizing controller, when `memory_budget` is set.
    pub fn cache_sizing(&self) -> Option<&Arc<crate::symbiosis::Controller>> {
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

    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Checks every checksum of every live table and value-log segment (the active segment up to
    /// its current end), and that every value pointer in the tables ends inside its segment (a
    /// cut segment otherwise shows only when the value is read).
    pub fn verify(&self) -> Result<VerifyReport> {
        self.inner.usable()?;
        let sv = self.inner.sv.read().clone();
        let mut r = VerifyReport::default();
        // Read after `sv` was taken: every pointer in its tables was written before.
        let mut sizes: HashMap<u64, u64> = HashMap::new();
        let metas = self.inner.state.lock().versions.blob_files.clone();
        for (n, f) in sv.blobs.iter() {
            r.blob_segments += 1;
            let Some(size) = metas.get(n).filter(|m| m.sealed).map(|m| m.size) else {
                // The active segment may end in a record being written right now.
                let data = f.read_all()?;
                sizes.insert(*n, data.len() as u64);
                r.blob_records += SegmentScanner::new(f.path(), &data)?.count() as u64;
                continue;
            };
            sizes.insert(*n, size);
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
                if crate::key::kind(ikey) != Some(ValueKind::BlobIndex) {
                    return Ok(());
                }
                let p = BlobPointer::decode(value).ok_or_else(|| {
                    Error::corruption(&table_path, block_offset, "malformed value pointer")
                })?;
                // A segment no longer live only serves versions that newer ones shadow.
                match sizes.get(&p.file) {
                    Some(&size) if p.end() > size => Err(Error::corruption(
                        &table_path,
                        block_offset,
                        format!(
                            "a value pointer reaches byte {} of {}, which has {size} bytes (the \
                             segment was cut; the values past its end are lost)",
                            p.end(),
                            filename::blob_path(&self.inner.dir, p.file).display()
                        ),
                    )),
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
                let m = crate::learned::train_level(&tables, l.delta)?;
                if m.index.quality().is_useful() {
                    let numbers: Vec<u64> = files.iter().map(|f| f.number).collect();
                    // The file is a cache: failing to write it costs a relearn after reopen.
                    let _ = crate::learned::write_level_model(
                        inner.env.as_ref(),
                        &inner.dir,
                        level,
                        &numbers,
                        &m,
                    );
                    v.set_level_model(level, Arc::new(m));
                }
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
            }
        }
        if let Some(v) = self.inner.vlog.lock().as_mut() {
            v.sync()?;
        }
        let mut wal = self.inner.wal.lock();
        if let Some(w) = wal.as_mut() {
            w.sync()?;
        }
        Ok(())
    }
}

impl Drop for DB {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// The last step of a writable open: the manifest edit that retires the replayed logs (naming
/// the tables recovery wrote) and drops the value-log segments a crash left empty, then the new
/// WAL, created only once the manifest accounts for its number (recovery replays no other
/// log). Returns the new log's number and file. Once the edit was attempted the recovered
/// tables stay, even when it failed: its record may have reached the disk and name them (the
/// next open removes the ones it does not).
fn start_new_log(
    env: &dyn Env,
    dir: &Path,
    opts: &Options,
    versions: &mut VersionSet,
    mut edit: VersionEdit,
    max_seq: u64,
) -> Result<(u64, Box<dyn crate::env::WritableFile>)> {
    // Segments the crash left without a record (a spare made ahead, one created just before the
    // crash) leave the manifest in the edit that retires the replayed logs: no table names them
    // (a pointer reaches a table only once its value is durable), and replay stopped at any
    // logged pointer into them.
    let empty: Vec<u64> = edit
        .blob_files_sealed
        .iter()
        .filter(|&&(_, len)| len <= crate::vlog::SEGMENT_HEADER_BYTES)
        .map(|&(n, _)| n)
        .collect();
    edit.blob_files_deleted.extend(&empty);
    let log_number = versions.new_log_number();
    edit.log_number = Some(log_number);
    edit.last_sequence = Some(max_seq);
    versions.last_sequence = max_seq;
    versions.log_and_apply(edit)?;
    // A crash before the log exists leaves none, which is right: the edit holds everything
    // replayed.
    assert!(
        versions.accounts_for(log_number),
        "the manifest covers the new WAL"
    );
    let log_path = filename::log_path(dir, log_number);
    // The WAL is an append-only log like a value-log segment: through a memory map where the
    // environment offers one (`mmap_logs`), so a write group costs no system call.
    let wal_file = env
        .new_log_writable(&log_path, opts.write_buffer_size)
        .and_then(|f| env.sync_dir(dir).map(|()| f));
    let wal_file = match wal_file {
        Ok(f) => f,
        Err(e) => {
            // Empty, or not there at all: a full disk should not keep a preallocated log.
            let _ = env.remove_file(&log_path);
            return Err(e);
        }
    };
    for n in empty {
        // Best effort: a file the manifest no longer lists is removed at the next open.
        let _ = env.remove_file(&filename::blob_path(dir, n));
    }
    Ok((log_number, wal_file))
}

/// Says what to do next when recovery failed for want of space: the data is intact, and a
/// read-only open reads it without writing.
fn recovery_hint(e: Error) -> Error {
    match e {
        Error::Io { path, source, .. } if source.raw_os_error() == Some(libc::ENOSPC) => {
            Error::Io {
                op: "recovery (the disk is full: free space and reopen, or open with \
                     read_only=True to read the data without writing; a writable open also \
                     reserves write_buffer_size for its log, which mmap_logs=False does not)",
                path,
                source,
            }
        }
        e => e,
    }
}

/// Whether a directory without CURRENT may become a new database: it holds nothing but what an
/// interrupted creation leaves, and the options allow creating.
fn check_creatable(env: &dyn Env, dir: &Path, opts: &Options) -> Result<()> {
    // A creation interrupted by a crash leaves only a manifest and maybe CURRENT's temp
    // file (CURRENT is written last, and nothing was acknowledged before it): start over.
    let others: Vec<String> = env
        .list_dir(dir)?
        .into_iter()
        .filter(|n| {
            !matches!(
                filename::parse(n),
                Some(FileKind::Lock | FileKind::Manifest(_) | FileKind::Temp)
            )
        })
        .collect();
    if let Some(what) = filename::foreign_engine(&others, &[]) {
        return Err(foreign_database_error(dir, &what));
    }
    if !others.is_empty() {
        let shown: Vec<&str> = others.iter().take(3).map(String::as_str).collect();
        return Err(Error::NotADatabase {
            path: dir.to_path_buf(),
            detail: format!(
                "directory is not empty and has no CURRENT file (found {}); \
                 open an empty or new directory",
                shown.join(", ")
            ),
        });
    }
    if !opts.create_if_missing || opts.read_only {
        return Err(Error::NotADatabase {
            path: dir.to_path_buf(),
            detail: if opts.read_only {
                "no database here (a read-only open creates nothing)".into()
            } else {
                "no database here (create_if_missing is off)".into()
            },
        });
    }
    Ok(())
}

/// Describes another engine's database in `dir` (see [`filename::foreign_engine`]), reading the
/// start of the manifest CURRENT names. Only called once opening has failed, so an Attune
/// database pays nothing for it.
fn foreign_engine_in(env: &dyn Env, dir: &Path) -> Option<String> {
    let names = env.list_dir(dir).ok()?;
    let head = env
        .read_all(&filename::current_path(dir))
        .ok()
        .and_then(|c| String::from_utf8(c).ok())
        .filter(|c| matches!(filename::parse(c.trim_end()), Some(FileKind::Manifest(_))))
        .and_then(|c| env.read_all(&dir.join(c.trim_end())).ok())
        .unwrap_or_default();
    filename::foreign_engine(&names, &head)
}

fn foreign_database_error(dir: &Path, what: &str) -> Error {
    Error::NotADatabase {
        path: dir.to_path_buf(),
        detail: format!(
            "this is {what}, not an Attune one; Attune cannot read it (open it with that \
             engine, or give Attune a new directory)"
        ),
    }
}

/// Refuses a `dir` that exists but is not a directory (a regular file, say) with a clear
/// error, before the lock file inside it fails with an I/O error.
fn refuse_non_directory(env: &dyn Env, dir: &Path) -> Result<()> {
    if !env.exists(dir) {
        return Ok(());
    }
    match env.list_dir(dir) {
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotADirectory => {
            Err(Error::NotADatabase {
                path: dir.to_path_buf(),
                detail: "it is a file, not a directory; give the directory of a database (or a \
                         path to create one in)"
                    .into(),
            })
        }
        _ => Ok(()),
    }
}

/// The WAL files recovery replays, in order, each with whether the manifest accounts for it:
/// those at or above the manifest's log number (the older ones are in tables). Every WAL this
/// build creates is numbered below the next file number of the manifest record durable at its
/// creation (`VersionSet::new_log_number`), so a log at or above the recorded one was copied in
/// or left by another program: [`replay_logs`] fails the open naming it ([`stray_log`]) and
/// leaves it in place. Replaying it would mix foreign writes into the history (even a log whose
/// sequences happen to continue this database's may come from a copy of it), and deleting it
/// (as an obsolete log would be) could destroy someone's data. (A build older than this rule
/// numbered its newest WAL past the record; such a database, left by a crash, opens once with
/// that build; the error says so.)
fn logs_to_replay(env: &dyn Env, dir: &Path, versions: &VersionSet) -> Result<Vec<(u64, bool)>> {
    let mut logs = Vec::new();
    for name in env.list_dir(dir)? {
        let Some(FileKind::Log(n)) = filename::parse(&name) else {
            continue;
        };
        let accounted = versions.accounts_for(n);
        if !accounted || n >= versions.log_number {
            logs.push((n, accounted));
        }
    }
    logs.sort_unstable();
    Ok(logs)
}

/// The error for a log the manifest does not account for and whose records do not continue the
/// recovered history: left in place, not replayed.
fn stray_log(dir: &Path, n: u64, versions: &VersionSet, why: &str) -> Error {
    let path = filename::log_path(dir, n);
    let name = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    Error::corruption(
        &path,
        0,
        format!(
            "write-ahead log {name} is not one this database wrote: its number is not below the \
             next file number {} that {} records, and {why}; it was left in place and not \
             replayed; move it out of the directory, then open again",
            versions.recorded_next_file_number,
            filename::manifest_name(versions.manifest_number)
        ),
    )
}

/// Replays WAL files not yet covered by tables into L0 tables recorded in `edit`.
/// Returns the largest sequence seen and, for a read-only open (which writes no table), the
/// replayed records as one memtable. When writing a table fails, the tables this call wrote
/// are removed before the error returns (no partial file is left on a full disk).
fn recover_logs(
    env: &Arc<dyn Env>,
    dir: &Path,
    opts: &Options,
    versions: &mut VersionSet,
    edit: &mut VersionEdit,
    blob_valid: &HashMap<u64, u64>,
    logs: Vec<(u64, bool)>,
) -> Result<(u64, Option<MemTable>)> {
    let written_before = edit.new_files.len();
    let r = replay_logs(env, dir, opts, versions, edit, blob_valid, logs);
    if r.is_err() {
        for (_, f) in edit.new_files.drain(written_before..) {
            let _ = env.remove_file(&filename::table_path(dir, f.number));
        }
    }
    r
}

/// See [`recover_logs`]; `logs` are (number, accounted for by the manifest) in order.
fn replay_logs(
    env: &Arc<dyn Env>,
    dir: &Path,
    opts: &Options,
    versions: &mut VersionSet,
    edit: &mut VersionEdit,
    blob_valid: &HashMap<u64, u64>,
    logs: Vec<(u64, bool)>,
) -> Result<(u64, Option<MemTable>)> {
    let mut max_seq = versions.last_sequence;
    let mut mem = MemTable::new(0);
    let mut garbage = BTreeMap::new();
    // Sequence the next record must not exceed. A larger one means an earlier log lost its
    // unsynced tail in a machine crash while a later log kept part of its own: replaying on
    // would leave a hole, so recovery stops there. Nothing acknowledged as synced is dropped (a
    // sync write first fsyncs every earlier log). Recovery also stops at a write whose value
    // did not reach the value log (below). It starts from the manifest's last sequence, which
    // the flush that named `log_number` set to exactly what the tables hold: the first log's
    // first record is the next one, so an earlier log that lost *every* record is a hole too.
    // (A manifest written before that rule may hold a larger last sequence: the check is then
    // looser, never wrong.)
    let mut next_seq_max = versions.last_sequence.saturating_add(1);
    let mut stopped = false;
    for (n, accounted) in logs {
        if stopped {
            if !accounted {
                return Err(stray_log(dir, n, versions, "recovery stopped before it"));
            }
            continue; // later logs are not part of the recovered prefix
        }
        let path = filename::log_path(dir, n);
        let data = env.read_all(&path)?;
        let mut reader = LogReader::new(&data, &path);
        let mut first = true;
        while let Some((off, rec)) = reader.next_record()? {
            let (seq, batch) = WriteBatch::decode(&rec)
                .ok_or_else(|| Error::corruption(&path, off, "malformed write batch in WAL"))?;
            if first && !accounted {
                let why = if seq == next_seq_max {
                    "its sequences continue this database's (a copy of one of its logs, or the \
                     newest log of a build older than this check, left by a crash: then open \
                     the database once with that build)"
                        .to_string()
                } else {
                    format!(
                        "its first sequence {seq} does not continue the history (next is \
                         {next_seq_max})"
                    )
                };
                return Err(stray_log(dir, n, versions, &why));
            }
            first = false;
            if seq > next_seq_max {
                stopped = true;
                break;
            }
            next_seq_max = next_seq_max.max(seq + batch.len() as u64);
            let mut items = Vec::with_capacity(batch.len());
            for item in batch.iter() {
                let (kind, k, v) =
                    item.ok_or_else(|| Error::corruption(&path, off, "malformed batch entry"))?;
                if kind == ValueKind::BlobIndex {
                    let p = BlobPointer::decode(v).ok_or_else(|| {
                        Error::corruption(&path, off, "malformed value pointer in WAL")
                    })?;
                    // A pointer into a listed segment past its valid end: the WAL reached the
                    // disk but the value did not (a crash before the value log was synced), so
                    // the recovered history ends here. A pointer into a segment the manifest no
                    // longer lists is superseded: garbage collection moved the value (and logged
                    // the move after this record) before it dropped the segment.
                    if blob_valid.get(&p.file).is_some_and(|&len| p.end() > len) {
                        stopped = true;
                    }
                }
                items.push((kind, k, v));
            }
            if stopped {
                break;
            }
            let mut s = seq;
            for (kind, k, v) in items {
                mem.add(s, kind, k, v);
                s += 1;
            }
            if !batch.is_empty() {
                max_seq = max_seq.max(s - 1);
            }
            if !opts.read_only && mem.approximate_memory_usage() as u64 > opts.write_buffer_size {
                let m = std::mem::replace(&mut mem, MemTable::new(0));
                if let Some(f) = write_level0(
                    env.as_ref(),
                    dir,
                    opts,
                    versions.new_file_number(),
                    Arc::new(m),
                    crate::key::MAX_SEQUENCE,
                    &mut garbage,
                )? {
                    edit.add_file(0, f);
                }
            }
        }
    }
    if opts.read_only {
        return Ok((max_seq, Some(mem)));
    }
    if !mem.is_empty() {
        if let Some(f) = write_level0(
            env.as_ref(),
            dir,
            opts,
            versions.new_file_number(),
            Arc::new(mem),
            crate::key::MAX_SEQUENCE,
            &mut garbage,
        )? {
            edit.add_file(0, f);
        }
    }
    edit.blob_garbage.extend(garbage);
    if !edit.new_files.is_empty() {
        env.sync_dir(dir)?;
    }
    Ok((max_seq, None))
}

/// Checks the value-log segments against the manifest: removes segments it does not list (left
/// by a collection or a switch that a crash interrupted), fails if a listed one is missing, and
/// seals the segment that was active at the crash at the end of its last whole record (recorded
/// in `edit`). Returns each segment's valid length, against which WAL pointers are checked.
fn recover_blob_files(
    env: &dyn Env,
    dir: &Path,
    versions: &VersionSet,
    edit: &mut VersionEdit,
    read_only: bool,
) -> Result<HashMap<u64, u64>> {
    let present: HashSet<u64> = env
        .list_dir(dir)?
        .iter()
        .filter_map(|n| match filename::parse(n) {
            Some(FileKind::Blob(n)) => Some(n),
            _ => None,
        })
        .collect();
    for n in &present {
        if !versions.blob_files.contains_key(n) && !read_only {
            env.remove_file(&filename::blob_path(dir, *n))?;
        }
    }
    let mut valid = HashMap::new();
    for (&n, m) in &versions.blob_files {
        let path = filename::blob_path(dir, n);
        if !present.contains(&n) {
            return Err(Error::corruption(
                dir.join(filename::manifest_name(versions.manifest_number)),
                0,
                format!("the manifest lists value-log segment {n:06}.vlog, which is missing"),
            ));
        }
        if m.sealed {
            valid.insert(n, m.size);
            continue;
        }
        let data = env.read_all(&path)?;
        let len = match SegmentScanner::new(&path, &data) {
            Ok(mut scan) => {
                for _ in scan.by_ref() {}
                if crate::vlog::damaged_in_middle(&data, scan.valid_len()) {
                    return Err(Error::corruption(
                        &path,
                        scan.valid_len(),
                        format!(
                            "value-log record damaged ({}) with valid records after it",
                            scan.stop_reason.unwrap_or("bad record")
                        ),
                    ));
                }
                scan.valid_len()
            }
            // Its header never reached the disk (created just before the crash, never
            // fsynced: no durable pointer can name it) — unless whole records follow, which
            // makes it damage rather than a torn write.
            Err(e) => {
                let h = crate::vlog::SEGMENT_HEADER_BYTES;
                if crate::vlog::record_at(&data, h) {
                    return Err(e);
                }
                0
            }
        };
        if len > 0 && !read_only {
            // What the scan read may have survived the crash without being durable (the
            // header of a spare made ahead, the tail of the active segment): make it durable
            // before the manifest seals the segment at this length, or a second crash could
            // leave a sealed segment shorter than its recorded length.
            env.new_appendable(&path)?.sync()?;
        }
        valid.insert(n, len);
        edit.blob_files_sealed.push((n, len));
    }
    Ok(valid)
}

/// Writes a memtable to table file `number`; None when it is empty. Versions shadowed by a newer
/// version of the same key that every snapshot sees (`<= smallest_snapshot`) are dropped, as in
/// compaction; tombstones are kept (older levels may hold the key).
fn write_level0(
    env: &dyn Env,
    dir: &Path,
    opts: &Options,
    number: u64,
    mem: Arc<MemTable>,
    smallest_snapshot: u64,
    blob_garbage: &mut BTreeMap<u64, u64>,
) -> Result<Option<FileMeta>> {
    let mut it = MemTableIter::new(mem);
    it.seek_to_first();
    if !it.valid() {
        return Ok(None);
    }
    let path = filename::table_path(dir, number);
    let r = build_level0(
        env,
        &path,
        number,
        opts,
        &mut it,
        smallest_snapshot,
        blob_garbage,
    );
    if r.is_err() {
        // A partial table (a full disk, an I/O error) is named by no manifest: remove it now
        // rather than leave it filling the disk until the next successful open.
        let _ = env.remove_file(&path);
    }
    r.map(Some)
}

/// Writes the memtable entries under `it` as table `number` at `path`.
fn build_level0(
    env: &dyn Env,
    path: &Path,
    number: u64,
    opts: &Options,
    it: &mut MemTableIter,
    smallest_snapshot: u64,
    blob_garbage: &mut BTreeMap<u64, u64>,
) -> Result<FileMeta> {
    let mut b = TableBuilder::new(env.new_writable(path)?, TableBuilderOptions::from(opts));
    let mut last_user_key: Vec<u8> = Vec::new();
    let mut last_seq_for_key = u64::MAX;
    let mut first = true;
    while it.valid() {
        let ikey = it.key();
        let uk = crate::key::user_key(ikey);
        if first || uk != last_user_key.as_slice() {
            last_user_key.clear();
            last_user_key.extend_from_slice(uk);
            last_seq_for_key = u64::MAX;
            first = false;
        }
        if last_seq_for_key > smallest_snapshot {
            b.add(ikey, it.value())?;
        } else if crate::key::kind(ikey) == Some(ValueKind::BlobIndex) {
            if let Some(p) = BlobPointer::decode(it.value()) {
                *blob_garbage.entry(p.file).or_default() += u64::from(p.len);
            }
        }
        last_seq_for_key = crate::key::sequence(ikey);
        it.next();
    }
    assert!(
        b.num_entries() > 0,
        "the newest version of the first key is always kept"
    );
    let smallest = b.smallest_key().to_vec();
    let largest = b.largest_key().to_vec();
    let num_entries = b.num_entries();
    let size = b.finish()?;
    Ok(FileMeta {
        number,
        size,
        smallest,
        largest,
        num_entries,
        table: Default::default(),
    })
}

impl DbInner {
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

    fn write(&self, batch: WriteBatch, wo: WriteOptions) -> Result<()> {
        self.writable("a write")?;
        self.write_inner(batch, wo.sync, None)
    }

    fn write_inner(&self, batch: WriteBatch, sync: bool, gc: Option<Vec<GcEntry>>) -> Result<()> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed("database is closed".into()));
        }
        let mut st = self.state.lock();
        let id = st.next_writer_id;
        st.next_writer_id += 1;
        st.writers.push_back(PendingWrite {
            id,
            batch: Some(batch),
            sync,
            gc,
        });
        loop {
            if let Some(r) = st.finished.remove(&id) {
                return r;
            }
            if st.writers.front().map(|w| w.id) == Some(id) {
                break;
            }
            self.write_cv.wait(&mut st);
        }
        // This thread leads a group.
        let room = self.make_room_for_write(&mut st, false);
        if let Err(e) = room {
            st.writers.pop_front();
            self.write_cv.notify_all();
            return Err(e);
        }
        let gc = st.writers.front_mut().and_then(|w| w.gc.take());
        let started = self.env.now_micros();
        let (group, mut batch, sync) = if gc.is_some() {
            let lead = st
                .writers
                .front_mut()
                .map(|w| (w.id, w.batch.take(), w.sync));
            let (lid, b, s) = lead.unwrap_or((id, None, false));
            (vec![lid], b.unwrap_or_default(), s)
        } else {
            build_group(&mut st.writers)
        };
        let mut gc_failed = None;
        if let Some(entries) = &gc {
            // Nothing else writes now: whatever still points at the old records is exactly
            // what must move.
            let sv = self.sv.read().clone();
            match MutexGuard::unlocked(&mut st, || self.gc_batch(&sv, entries)) {
                Ok(b) => batch = b,
                Err(e) => gc_failed = Some(e),
            }
        }
        let min_blob = self.opts.min_blob_size as usize;
        let separate = self.opts.enable_blob_files
            && batch
                .iter()
                .any(|i| matches!(i, Some((ValueKind::Value, _, v)) if v.len() >= min_blob));
        let mut fatal = false;
        let mut result = match gc_failed {
            Some(e) => Err(e),
            None if separate => {
                // A failed segment switch (file, directory or manifest I/O) is fatal like any
                // failed log write: the database then refuses writes until it is reopened.
                let r = self.ensure_vlog(&mut st);
                fatal = r.is_err();
                r
            }
            None => Ok(()),
        };
        let count = batch.len() as u64;
        let first_seq = self.last_sequence.load(Ordering::Acquire) + 1;
        batch.set_sequence(first_seq);
        if result.is_ok() {
            let mem = st.mem.clone();
            let r = MutexGuard::unlocked(&mut st, || {
                self.write_group(&batch, first_seq, sync, &mem, separate, gc.is_some())
            });
            if let Err((e, f)) = r {
                result = Err(e);
                fatal = f;
            }
        }
        match &result {
            Ok(()) => {
                if count > 0 {
                    self.last_sequence
                        .store(first_seq + count - 1, Ordering::Release);
                }
            }
            Err(e) => {
                if fatal && st.bg_error.is_none() {
                    st.bg_error = Some(e.duplicate());
                }
            }
        }
        if gc.is_some() {
            let pause = self.env.now_micros().saturating_sub(started);
            st.gc.max_pause_micros = st.gc.max_pause_micros.max(pause);
        }
        for gid in &group {
            if *gid != id {
                let r = match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                };
                st.finished.insert(*gid, r);
            }
        }
        for _ in 0..group.len() {
            st.writers.pop_front();
        }
        self.write_cv.notify_all();
        result
    }

    /// The moves of a collection that are still needed: entries whose key still points at the
    /// record being moved.
    fn gc_batch(&self, sv: &SuperVersion, entries: &[GcEntry]) -> Result<WriteBatch> {
        let mut b = WriteBatch::new();
        for (k, v, p) in entries {
            if self.current_pointer(sv, k)? == Some(*p) {
                b.put(k, v)?;
            }
        }
        Ok(b)
    }

    /// Makes sure an active value-log segment with room exists, sealing a full
    /// one and recording the switch in the manifest. Called by the group leader.
    fn ensure_vlog(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let mut vlog = self.vlog.lock();
        let full = vlog
            .as_ref()
            .is_none_or(|w| w.len() >= self.opts.blob_file_size);
        if !full {
            if self.spare_wanted(vlog.as_ref()) {
                self.work_cv.notify_all(); // the flush thread creates it (under the state lock)
            }
            return Ok(());
        }
        let mut edit = VersionEdit::default();
        if let Some(old) = vlog.take() {
            // Sealed in the background (fsync, then the manifest's seal record); until then
            // every value-log sync covers it, and a crash leaves it unsealed, which recovery
            // seals at its last whole record like the active segment.
            self.vlog_sealing.lock().push(old);
            self.work_cv.notify_all();
        }
        if let Some(w) = self.vlog_spare.lock().take() {
            // Already listed in the manifest and visible to readers.
            *vlog = Some(w);
            return Ok(());
        }
        let n = st.versions.new_file_number();
        let w =
            VlogWriter::create_sized(self.env.as_ref(), &self.dir, n, self.opts.blob_file_size)?;
        self.env.sync_dir(&self.dir)?;
        edit.blob_files_added.push(n);
        st.versions.log_and_apply(edit)?;
        self.add_blob_reader(st, n);
        *vlog = Some(w);
        drop(vlog);
        self.install_super_version(st);
        Ok(())
    }

    /// Makes segment `n` readable (in the next super version installed).
    fn add_blob_reader(&self, st: &mut State, n: u64) {
        let mut blobs = (*st.blobs).clone();
        blobs.insert(n, Arc::new(BlobFile::new(self.env.clone(), &self.dir, n)));
        st.blobs = Arc::new(blobs);
    }

    /// Whether the flush thread should create the next segment: the active one is three
    /// quarters full and no spare exists. Takes `vlog_spare`; the caller may hold `vlog`.
    fn spare_wanted(&self, active: Option<&VlogWriter>) -> bool {
        active.is_some_and(|w| w.len() >= self.opts.blob_file_size / 4 * 3)
            && self.vlog_spare.lock().is_none()
    }

    /// Creates the next value-log segment ahead of the switch (flush thread): the file and
    /// its directory entry without the state lock, then its manifest record.
    fn create_spare_segment(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let n = st.versions.new_file_number();
        let w = MutexGuard::unlocked(st, || {
            let w = VlogWriter::create_sized(
                self.env.as_ref(),
                &self.dir,
                n,
                self.opts.blob_file_size,
            )?;
            self.env.sync_dir(&self.dir)?;
            Ok::<_, Error>(w)
        })?;
        let mut edit = VersionEdit::default();
        edit.blob_files_added.push(n);
        st.versions.log_and_apply(edit)?;
        self.add_blob_reader(st, n);
        self.install_super_version(st);
        *self.vlog_spare.lock() = Some(w);
        Ok(())
    }

    /// At close: an unused spare segment leaves the manifest and the directory (a crash
    /// before this leaves it listed and empty; recovery seals it at its header).
    fn drop_spare_segment(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let Some(w) = self.vlog_spare.lock().take() else {
            return Ok(());
        };
        let n = w.number;
        drop(w);
        let mut edit = VersionEdit::default();
        edit.blob_files_deleted.push(n);
        st.versions.log_and_apply(edit)?;
        let mut blobs = (*st.blobs).clone();
        if let Some(f) = blobs.remove(&n) {
            f.mark_obsolete(); // deleted when the last reader lets go
        }
        st.blobs = Arc::new(blobs);
        self.install_super_version(st);
        Ok(())
    }

    /// Fsyncs the active value-log segment (a no-op when nothing was appended since the last).
    /// The fsync itself runs without the value-log lock, so the group leader keeps appending
    /// meanwhile (an fsync of a second of writes can take 100 ms).
    fn sync_vlog(&self) -> Result<()> {
        let pending = match self.vlog.lock().as_mut() {
            Some(v) => v.begin_sync()?.map(|(h, upto)| (h, upto, v.number)),
            None => None,
        };
        if let Some((handle, upto, number)) = pending {
            let r = handle();
            let mut vlog = self.vlog.lock();
            if let Some(v) = vlog.as_mut().filter(|v| v.number == number) {
                v.finish_sync(upto, r.is_ok());
            } else {
                // Switched out while the fsync ran (the switch moves it under the `vlog` lock).
                drop(vlog);
                let mut sealing = self.vlog_sealing.lock();
                if let Some(w) = sealing.iter_mut().find(|w| w.number == number) {
                    w.finish_sync(upto, r.is_ok());
                }
            }
            r?;
        }
        // Segments waiting to be sealed hold values that WAL records name, like the active one.
        // They are synced *after* the active one: a segment switched out while its fsync ran
        // (after this call began) is then still covered; syncing them first would miss it.
        for w in self.vlog_sealing.lock().iter_mut() {
            w.sync()?;
        }
        Ok(())
    }

    /// Seals the segments the leader switched out: fsyncs each (without the state lock), then
    /// records its final length in the manifest, then closes it (which cuts off the space a
    /// mapped segment reserved past its end). Run by the flush thread and at shutdown.
    fn seal_segments(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        loop {
            let synced = MutexGuard::unlocked(st, || {
                let mut sealing = self.vlog_sealing.lock();
                match sealing.first_mut() {
                    Some(w) => w.sync().map(|()| Some((w.number, w.len()))),
                    None => Ok(None),
                }
            })?;
            let Some((n, len)) = synced else {
                return Ok(());
            };
            let mut edit = VersionEdit::default();
            edit.blob_files_sealed.push((n, len));
            st.versions.log_and_apply(edit)?;
            let done = {
                let mut sealing = self.vlog_sealing.lock();
                let at = sealing.iter().position(|w| w.number == n);
                at.map(|i| sealing.remove(i))
            };
            MutexGuard::unlocked(st, || drop(done));
        }
    }

    /// Fsyncs the previous WAL if it is still pending.
    fn sync_imm_wal(&self) -> Result<()> {
        let mut g = self.imm_wal.lock();
        if let Some(w) = g.as_mut() {
            // The values its records point at must be durable before the records are.
            self.sync_vlog()?;
            w.sync()?;
            self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
        }
        *g = None;
        Ok(())
    }

    /// Writes one group: large values to the value log, then the WAL record, then the memtable.
    /// An error carries whether it is fatal: after a failed append or fsync of the WAL or the
    /// value log the tail is unknown and the database refuses writes until it is reopened; a
    /// malformed batch is not fatal.
    fn write_group(
        &self,
        batch: &WriteBatch,
        first_seq: u64,
        sync: bool,
        mem: &MemTable,
        separate: bool,
        is_gc: bool,
    ) -> std::result::Result<(), (Error, bool)> {
        if sync {
            // A failed fsync leaves durability unknown: like the WAL's, it is fatal.
            self.sync_vlog().map_err(|e| (e, true))?;
            self.sync_imm_wal().map_err(|e| (e, true))?;
        }
        // Key and value bytes the user asked to store, counted in the pass that already walks
        // the original batch (a collection's moves are not user writes).
        let mut user_bytes = 0u64;
        let separated;
        let mut blob_bytes = 0u64;
        let batch = if separate {
            let min_blob = self.opts.min_blob_size as usize;
            let mut vlog = self.vlog.lock();
            let w = vlog
                .as_mut()
                .ok_or_else(|| (Error::Closed("no value log".into()), false))?;
            let mut out = WriteBatch::new();
            for item in batch.iter() {
                let (kind, k, v) =
                    item.ok_or_else(|| (Error::InvalidArgument("malformed batch".into()), false))?;
                user_bytes += (k.len() + v.len()) as u64;
                match kind {
                    ValueKind::Value if v.len() >= min_blob => {
                        let p = w.add(k, v);
                        blob_bytes += u64::from(p.len);
                        out.put_blob_index(k, &p.encode());
                    }
                    ValueKind::Value => out.put(k, v).map_err(|e| (e, false))?,
                    ValueKind::Deletion => out.delete(k).map_err(|e| (e, false))?,
                    ValueKind::BlobIndex => out.put_blob_index(k, v),
                }
            }
            // A failed append leaves the segment's tail unknown: fatal, like a failed WAL append
            // (the WAL never saw this group; reopening seals the segment at its last whole
            // record).
            w.flush().map_err(|e| (e, true))?;
            if sync {
                w.sync().map_err(|e| (e, true))?;
            }
            out.set_sequence(first_seq);
            separated = out;
            &separated
        } else {
            batch
        };
        {
            let mut wal = self.wal.lock();
            let w = wal
                .as_mut()
                .ok_or_else(|| (Error::Closed("no WAL".into()), true))?;
            w.add_record(batch.encoded()).map_err(|e| (e, true))?;
            if sync {
                w.sync().map_err(|e| (e, true))?;
                self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        for (seq, item) in (first_seq..).zip(batch.iter()) {
            let (kind, k, v) =
                item.ok_or_else(|| (Error::InvalidArgument("malformed batch".into()), true))?;
            mem.add(seq, kind, k, v);
            if let Some(h) = &self.hot {
                // Before the group's sequence is published (write_inner), so no reader that
                // can see this write finds the old value cached.
                h.invalidate(k, seq);
            }
            if !separate {
                user_bytes += (k.len() + v.len()) as u64;
            }
        }
        if is_gc {
            user_bytes = 0;
        }
        let c = &self.counters;
        c.wal_bytes
            .fetch_add(batch.approximate_size() as u64 + 9, Ordering::Relaxed);
        c.user_bytes_written
            .fetch_add(user_bytes, Ordering::Relaxed);
        c.blob_bytes_written
            .fetch_add(blob_bytes, Ordering::Relaxed);
        c.writes.fetch_add(batch.len() as u64, Ordering::Relaxed);
        c.write_groups.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Ensures the memtable has room, switching to a new one (and WAL) or stalling as needed.
    fn make_room_for_write(&self, st: &mut MutexGuard<'_, State>, mut force: bool) -> Result<()> {
        let mut allow_delay = !force;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed("database is closed".into()));
            }
            let l0 = st.versions.current().files[0].len();
            if allow_delay && l0 >= self.opts.l0_slowdown_writes_trigger {
                // Spread the pain: delay each write by 1 ms rather than stopping for seconds.
                let t = self.env.now_micros();
                MutexGuard::unlocked(st, || std::thread::sleep(Duration::from_millis(1)));
                self.counters.slowdowns.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .stall_micros
                    .fetch_add(self.env.now_micros() - t, Ordering::Relaxed);
                allow_delay = false;
                continue;
            }
            if !force && (st.mem.approximate_memory_usage() as u64) < self.opts.write_buffer_size {
                return Ok(());
            }
            if st.imm.is_some() || l0 >= self.opts.l0_stop_writes_trigger {
                let t = self.env.now_micros();
                self.work_cv.notify_all();
                self.done_cv.wait_for(st, Duration::from_millis(100));
                self.counters
                    .stall_micros
                    .fetch_add(self.env.now_micros() - t, Ordering::Relaxed);
                continue;
            }
            if st.mem.is_empty() && force {
                return Ok(());
            }
            // Switch to a new memtable and WAL. Its number was reserved before the manifest's
            // last record (the flush of the previous memtable), which accounts for it; should
            // none have been written since, record one first: recovery replays no log the
            // manifest does not account for.
            let n = st.versions.new_log_number();
            if !st.versions.accounts_for(n) {
                st.versions.log_and_apply(VersionEdit::default())?;
            }
            let f = self.env.new_log_writable(
                &filename::log_path(&self.dir, n),
                self.opts.write_buffer_size,
            )?;
            self.env.sync_dir(&self.dir)?;
            {
                let mut wal = self.wal.lock();
                // The old log's records are all in the memtable being flushed. The flush thread
                // fsyncs it (keeping sync=false writes within the promised interval) so that this
                // writer does not wait for it.
                let old = wal.replace(LogWriter::new(f));
                let mut imm_wal = self.imm_wal.lock();
                if imm_wal.is_some() {
                    // Cannot happen: a switch waits until the previous memtable is flushed,
                    // and the flush syncs its log first.
                    drop(imm_wal);
                    self.sync_imm_wal()?;
                    imm_wal = self.imm_wal.lock();
                }
                *imm_wal = old;
            }
            let old = std::mem::replace(&mut st.mem, Arc::new(MemTable::new(n)));
            st.imm = Some(old);
            // The leader holds the state lock and no group is in flight: every sequence up to
            // here is in `old` (or in tables), none in the new log.
            st.imm_last_sequence = self.last_sequence.load(Ordering::Acquire);
            self.install_super_version(st);
            self.work_cv.notify_all();
            force = false;
        }
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

    /// The learning thread (Bourbon's learner): every few milliseconds asks the analyzer which
    /// files are due and learns them, lowest priority, never holding the state mutex.
    fn learn_loop(&self) {
        let Some(learning) = self.tables.learning().cloned() else {
            return;
        };
        let stop = || self.shutting_down.load(Ordering::Acquire);
        let open = |n: u64| -> Result<Arc<crate::table::Table>> {
            if let Some(t) = self.tables.get_if_open(n) {
                return Ok(t);
            }
            // Holding a version that lists the file keeps it from being deleted while it opens.
            let v = self.sv.read().version.clone();
            if !v.files.iter().flatten().any(|f| f.number == n) {
                return Err(Error::InvalidArgument(format!("table {n} is gone")));
            }
            self.tables.get(n)
        };
        while !stop() {
            std::thread::sleep(LEARN_POLL);
            learning.learn_round(self.env.as_ref(), &self.dir, &open, &stop);
        }
    }

    fn get(&self, key: &[u8], ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        // The hot-key cache answers latest-state reads only (hotkeys.rs has the rules).
        let hot = self.hot.as_ref().filter(|_| ro.snapshot.is_none());
        if let Some(v) = hot.and_then(|h| h.get(key)) {
            self.counters.gets.fetch_add(1, Ordering::Relaxed);
            self.counters.gets_found.fetch_add(1, Ordering::Relaxed);
            return Ok(Some(v));
        }
        steps::start();
        let sv = self.sv.read().clone();
        let seq = ro
            .snapshot
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire));
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        let v = match self.lookup(&sv, key, seq)? {
            Lookup::Found(v) => v,
            Lookup::Blob(p) => self.read_blob(&sv.blobs, key, &p)?,
            _ => {
                steps::mark(Step::Value);
                return Ok(None);
            }
        };
        self.counters.gets_found.fetch_add(1, Ordering::Relaxed);
        if let Some(h) = hot {
            h.offer(key, &v, seq);
        }
        steps::mark(Step::Value);
        Ok(Some(v))
    }

    fn read_blob(&self, blobs: &BlobSet, key: &[u8], p: &BlobPointer) -> Result<Vec<u8>> {
        self.counters.blob_reads.fetch_add(1, Ordering::Relaxed);
        match blobs.get(&p.file) {
            Some(f) => f.read(p, key),
            None => Err(Error::corruption(
                filename::blob_path(&self.dir, p.file),
                p.offset,
                "a value pointer names this value-log segment, which is not live (missing)",
            )),
        }
    }

    /// The newest entry of `key` at or below `seq`: memtable, immutable memtable, then levels.
    fn lookup(&self, sv: &SuperVersion, key: &[u8], seq: u64) -> Result<Lookup> {
        let mut r = sv.mem.get(key, seq);
        if r == Lookup::NotFound {
            if let Some(imm) = &sv.imm {
                r = imm.get(key, seq);
            }
        }
        steps::mark(Step::Memtable);
        if r == Lookup::NotFound {
            r = with_lookup_key(key, seq, |k| sv.version.get(k, &self.tables))?;
        }
        Ok(r)
    }

    /// The value-log record `key`'s newest version points at, if it has one.
    fn current_pointer(&self, sv: &SuperVersion, key: &[u8]) -> Result<Option<BlobPointer>> {
        Ok(match self.lookup(sv, key, crate::key::MAX_SEQUENCE)? {
            Lookup::Blob(p) => Some(p),
            _ => None,
        })
    }

    fn iter(self: &Arc<Self>, ro: &ReadOptions) -> DbIterator {
        let sv = self.sv.read().clone();
        let seq = ro
            .snapshot
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire));
        let fill = !ro.fill_cache_off;
        let (inner, error) = self.internal_iter(&sv, seq, fill);
        DbIterator {
            inner,
            db: self.clone(),
            sv,
            seq,
            error,
            lower: None,
            upper: None,
            blob_value: Vec::new(),
            on_blob: false,
            ahead: None,
            nexts: 0,
            slow_reads: 0,
        }
    }

    /// The user view over one super version at `seq`; a table that cannot be opened is
    /// returned as the error (the iterator then reports it).
    fn internal_iter(&self, sv: &SuperVersion, seq: u64, fill: bool) -> (DbIter, Option<Error>) {
        let mut children: Vec<Box<dyn InternalIterator>> =
            vec![Box::new(MemTableIter::new(sv.mem.clone()))];
        if let Some(imm) = &sv.imm {
            children.push(Box::new(MemTableIter::new(imm.clone())));
        }
        let mut error = None;
        for f in &sv.version.files[0] {
            match self.tables.get(f.number) {
                Ok(t) => children.push(Box::new(TableIter::new(t, fill))),
                Err(e) => error = Some(e),
            }
        }
        for level in 1..NUM_LEVELS {
            if !sv.version.files[level].is_empty() {
                children.push(Box::new(LevelIter::new(
                    sv.version.files[level].clone(),
                    self.tables.clone(),
                    fill,
                )));
            }
        }
        (
            DbIter::new(Box::new(MergingIterator::new(children)), seq),
            error,
        )
    }

    fn flush(&self) -> Result<()> {
        let mut st = self.state.lock();
        // Take the writer queue's head so no group is in flight while switching.
        let id = st.next_writer_id;
        st.next_writer_id += 1;
        st.writers.push_back(PendingWrite {
            id,
            batch: None,
            sync: false,
            gc: None,
        });
        while st.writers.front().map(|w| w.id) != Some(id) {
            self.write_cv.wait(&mut st);
        }
        let r = self.make_room_for_write(&mut st, true);
        st.writers.pop_front();
        self.write_cv.notify_all();
        r?;
        while st.imm.is_some()
            && st.bg_error.is_none()
            && !self.shutting_down.load(Ordering::Acquire)
        {
            self.done_cv.wait_for(&mut st, Duration::from_millis(100));
        }
        match &st.bg_error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    fn smallest_snapshot(&self, st: &State) -> u64 {
        st.snapshots
            .keys()
            .next()
            .copied()
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire))
    }

    fn flush_loop(&self) {
        let mut st = self.state.lock();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            let seal = !self.vlog_sealing.lock().is_empty();
            let spare = !seal && self.spare_wanted(self.vlog.lock().as_ref());
            if st.bg_error.is_none() && (seal || spare) {
                // A failed fsync leaves the segment's durability unknown, and a failed manifest
                // write its contents: stop writing, as the leader would.
                let r = if seal {
                    self.seal_segments(&mut st)
                } else {
                    self.create_spare_segment(&mut st)
                };
                if let Err(e) = r {
                    if !self.shutting_down.load(Ordering::Acquire) && st.bg_error.is_none() {
                        st.bg_error = Some(e);
                    }
                }
                continue;
            }
            let Some(imm) = st.imm.clone().filter(|_| st.bg_error.is_none()) else {
                self.work_cv.wait(&mut st);
                continue;
            };
            let number = st.versions.new_file_number();
            st.pending_outputs.insert(number);
            let smallest_snapshot = self.smallest_snapshot(&st);
            let mut garbage = BTreeMap::new();
            let r = MutexGuard::unlocked(&mut st, || {
                self.sync_imm_wal()?;
                // The table makes pointers durable: the values they name must be durable first.
                self.sync_vlog()?;
                let f = write_level0(
                    self.env.as_ref(),
                    &self.dir,
                    &self.opts,
                    number,
                    imm.clone(),
                    smallest_snapshot,
                    &mut garbage,
                )?;
                self.env.sync_dir(&self.dir)?;
                Ok::<_, Error>(f)
            });
            let r = r.and_then(|f| {
                let mut edit = VersionEdit::default();
                edit.blob_garbage.extend(garbage);
                let bytes = f.as_ref().map_or(0, |f| f.size);
                if let Some(f) = f {
                    edit.add_file(0, f);
                }
                edit.log_number = Some(st.mem.log_number);
                // Exactly what the tables now hold, not the database's last sequence: writes
                // already in the new log must not be counted, or recovery could not tell that
                // the log before a later one lost every record (see `recover_logs`).
                edit.last_sequence = Some(st.imm_last_sequence.max(st.versions.last_sequence));
                st.versions.log_and_apply(edit)?;
                st.flush_count += 1;
                st.flush_bytes += bytes;
                Ok(())
            });
            if r.is_ok() {
                // On error keep the table: a failed manifest sync may still have written the
                // edit naming it, so only reopening may decide that it is garbage.
                st.pending_outputs.remove(&number);
            }
            match r {
                Ok(()) => {
                    st.imm = None;
                    self.install_super_version(&st);
                    self.delete_obsolete_files(&mut st);
                }
                Err(e) => {
                    if !self.shutting_down.load(Ordering::Acquire) && st.bg_error.is_none() {
                        st.bg_error = Some(e);
                    }
                }
            }
            self.done_cv.notify_all();
            self.work_cv.notify_all();
        }
    }

    fn compaction_loop(&self) {
        let mut st = self.state.lock();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            if st.bg_error.is_some() || st.compaction_running {
                self.work_cv.wait(&mut st);
                continue;
            }
            let picked = compaction::pick(
                &st.versions.current(),
                &self.opts,
                &st.versions.compact_pointers,
            );
            let Some(c) = picked else {
                self.work_cv.wait(&mut st);
                continue;
            };
            st.compaction_running = true;
            let r = self.run_compaction(&mut st, c);
            st.compaction_running = false;
            if let Err(e) = r {
                if !self.shutting_down.load(Ordering::Acquire) && st.bg_error.is_none() {
                    st.bg_error = Some(e);
                }
            }
            self.done_cv.notify_all();
            self.work_cv.notify_all();
        }
    }

    /// Runs one compaction; called with `compaction_running` set by the caller.
    fn run_compaction(&self, st: &mut MutexGuard<'_, State>, c: Compaction) -> Result<()> {
        let level = c.level;
        let mut edit = VersionEdit::default();
        if let Some(last) = c.inputs[0]
            .iter()
            .map(|f| f.largest.clone())
            .max_by(|a, b| crate::key::compare_internal(a, b))
        {
            edit.compact_pointers.push((level, last));
        }
        if c.trivial_move {
            let f = &c.inputs[0][0];
            edit.delete_file(level, f.number);
            edit.add_file(level + 1, (**f).clone());
            st.versions.log_and_apply(edit)?;
            st.level_stats[level + 1].trivial_moves += 1;
            drop(c);
            self.install_super_version(st);
            return Ok(());
        }
        let smallest_snapshot = self.smallest_snapshot(st);
        let mut allocated: Vec<u64> = Vec::new();
        let out = MutexGuard::unlocked(st, || {
            let mut new_file = || {
                let mut s = self.state.lock();
                let n = s.versions.new_file_number();
                s.pending_outputs.insert(n);
                allocated.push(n);
                n
            };
            let shutting = || self.shutting_down.load(Ordering::Acquire);
            let r = compaction::run(
                &c,
                self.env.as_ref(),
                &self.dir,
                &self.opts,
                &self.tables,
                smallest_snapshot,
                &mut new_file,
                &shutting,
            );
            if r.is_ok() {
                self.env.sync_dir(&self.dir)?;
            }
            r
        });
        let r = out.and_then(|out| {
            for (which, files) in c.inputs.iter().enumerate() {
                for f in files {
                    edit.delete_file(level + which, f.number);
                }
            }
            for f in &out.files {
                edit.add_file(level + 1, f.clone());
            }
            edit.blob_garbage
                .extend(out.blob_garbage.iter().map(|(n, b)| (*n, *b)));
            st.versions.log_and_apply(edit)?;
            let s = &mut st.level_stats[level + 1];
            s.compactions += 1;
            s.bytes_read += out.bytes_read;
            s.bytes_written += out.bytes_written;
            Ok(())
        });
        if r.is_ok() {
            // On error keep the outputs (see flush_loop): the edit may be in the manifest.
            for n in allocated {
                st.pending_outputs.remove(&n);
            }
        }
        // The compaction pins its input version; release it so its files can be deleted now.
        drop(c);
        self.install_super_version(st);
        self.delete_obsolete_files(st);
        r
    }

    fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let mut st = self.state.lock();
        // Find the deepest level with overlapping data; compact each level into the next.
        let v = st.versions.current();
        let deepest = (0..NUM_LEVELS)
            .rev()
            .find(|&l| !v.overlapping(l, begin, end).is_empty());
        drop(v); // do not pin this version (and its files) while compacting
        let Some(deepest) = deepest else {
            return Ok(());
        };
        for level in 0..deepest.max(1) {
            while st.compaction_running {
                self.done_cv.wait_for(&mut st, Duration::from_millis(100));
            }
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            let v = st.versions.current();
            let mut first = v.overlapping(level, begin, end);
            if first.is_empty() {
                continue;
            }
            if level == 0 {
                // L0 files overlap each other: leaving an older one behind while its newer
                // neighbour moves down would let the older version shadow the newer one.
                first = v.files[0].clone();
            }
            let c = compaction::with_overlap(&v, level, first);
            drop(v);
            st.compaction_running = true;
            let r = self.run_compaction(&mut st, c);
            st.compaction_running = false;
            self.work_cv.notify_all();
            self.done_cv.notify_all();
            r?;
        }
        Ok(())
    }

    fn wal_sync_loop(&self) {
        let interval = Duration::from_millis(self.opts.wal_sync_interval_ms);
        let mut st = self.state.lock();
        loop {
            // Checked before waiting too: a shutdown that notified while this thread was syncing
            // (not waiting) would otherwise make `close` wait out a whole interval.
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            self.done_cv.wait_for(&mut st, interval);
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            let r = MutexGuard::unlocked(&mut st, || self.sync_logs());
            // A failed fsync may have dropped the pages it covered (Linux marks them clean), so
            // no later fsync can make those writes durable: stop accepting writes.
            if let Err(e) = r {
                if !self.shutting_down.load(Ordering::Acquire) && st.bg_error.is_none() {
                    st.bg_error = Some(e);
                }
            }
        }
    }

    fn delete_obsolete_files(&self, st: &mut MutexGuard<'_, State>) {
        let Ok(names) = self.env.list_dir(&self.dir) else {
            return;
        };
        let live = st.versions.live_files();
        let log_keep = st.imm.as_ref().map_or(st.versions.log_number, |m| {
            m.log_number.min(st.versions.log_number)
        });
        for name in names {
            let Some(kind) = filename::parse(&name) else {
                continue;
            };
            let delete = match kind {
                FileKind::Log(n) => n < log_keep && n < st.mem.log_number,
                FileKind::Table(n) | FileKind::Model(n) => {
                    !live.contains(&n) && !st.pending_outputs.contains(&n)
                }
                FileKind::Manifest(n) => n < st.versions.manifest_number,
                FileKind::Temp => true,
                // Checked against the level's files when loaded; a stale one is removed then.
                FileKind::LevelModel(_) => false,
                // Segments leave through garbage collection only (deleted when their last
                // reader lets go); at open, unlisted ones are removed.
                FileKind::Blob(_) => false,
                FileKind::Current | FileKind::Lock => false,
            };
            if delete {
                if let FileKind::Table(n) = kind {
                    self.tables.evict(n);
                }
                let _ = self.env.remove_file(&self.dir.join(&name));
            }
        }
    }

    /// Fsyncs the value log and then the WAL (and a pending previous WAL).
    fn sync_logs(&self) -> Result<()> {
        // The current log first, then the previous one: a memtable switch between the two
        // turns the log just synced into the previous one, which is synced next (or was by the
        // flush). The other order could sync the previous log, see a switch, and sync only the
        // new log, leaving the writes of the one switched out unsynced — and garbage
        // collection relies on this call covering every write made before it.
        self.sync_vlog()?;
        if let Some(w) = self.wal.lock().as_mut() {
            w.sync()?;
            self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
        }
        self.sync_imm_wal()
    }

    /// Collects segment `n` if at least `min_ratio` of it is dead: moves its live records to
    /// the active segment through ordinary (conditional) writes, makes them durable, then
    /// schedules the segment's deletion. Returns (records moved, bytes moved, bytes freed), or
    /// None when the segment was skipped. Crash-safe at every step: until the moves are durable
    /// every pointer still names the old segment, which stays until the manifest drops it.
    fn gc_segment(&self, n: u64, min_ratio: f64) -> Result<Option<(u64, u64, u64)>> {
        let (file, meta) = {
            let st = self.state.lock();
            if st.blob_pending_deletion.iter().any(|(p, _)| *p == n) {
                return Ok(None);
            }
            (
                st.blobs.get(&n).cloned(),
                st.versions.blob_files.get(&n).copied(),
            )
        };
        let (Some(file), Some(meta)) = (file, meta) else {
            return Ok(None);
        };
        if !meta.sealed {
            return Ok(None);
        }
        let header = crate::vlog::SEGMENT_HEADER_BYTES;
        if meta.size < header {
            return Ok(None);
        }
        let data = file.read_sealed(meta.size)?;
        let mut scan = SegmentScanner::new(file.path(), &data)?;
        let sv = self.sv.read().clone();
        let mut live: Vec<GcEntry> = Vec::new();
        let mut live_bytes = 0u64;
        for (off, len, k, _) in scan.by_ref() {
            let p = BlobPointer {
                file: n,
                offset: off,
                len,
            };
            if self.current_pointer(&sv, k)? == Some(p) {
                live.push((k.to_vec(), Vec::new(), p));
                live_bytes += u64::from(len);
            }
        }
        drop(sv);
        scan.check_complete(file.path())?;
        let total = meta.size - header;
        let dead = total.saturating_sub(live_bytes);
        if total == 0 || (dead as f64) < min_ratio * total as f64 || (dead == 0 && total > 0) {
            // Not worth moving; remember what the scan learned about its garbage.
            if dead > meta.garbage {
                let mut edit = VersionEdit::default();
                edit.blob_garbage.push((n, dead - meta.garbage));
                self.state.lock().versions.log_and_apply(edit)?;
            }
            return Ok(None);
        }
        let (mut moved_records, mut moved_bytes) = (0u64, 0u64);
        let mut chunk: Vec<GcEntry> = Vec::new();
        let mut chunk_bytes = 0usize;
        let last = live.len();
        for (i, (k, _, p)) in live.into_iter().enumerate() {
            let rec = &data[p.offset as usize..p.end() as usize];
            let (_, v) = crate::vlog::decode_record(rec)
                .map_err(|why| Error::corruption(file.path(), p.offset, why))?;
            chunk_bytes += p.len as usize;
            moved_records += 1;
            moved_bytes += u64::from(p.len);
            chunk.push((k, v.to_vec(), p));
            if chunk_bytes >= GC_CHUNK_BYTES || i + 1 == last {
                self.write_inner(WriteBatch::new(), false, Some(std::mem::take(&mut chunk)))?;
                chunk_bytes = 0;
            }
        }
        // The moved values and their pointers must be durable before the segment can go.
        self.sync_logs()?;
        let mut st = self.state.lock();
        let seq = self.last_sequence.load(Ordering::Acquire);
        let mut edit = VersionEdit::default();
        edit.blob_garbage.push((n, meta.size));
        st.versions.log_and_apply(edit)?;
        st.blob_pending_deletion.push((n, seq));
        self.finalize_blob_deletions(&mut st)?;
        Ok(Some((moved_records, moved_bytes, meta.size)))
    }

    /// Drops collected segments that no snapshot can read any more from the manifest; each file
    /// is deleted when the last reader holding it lets go.
    fn finalize_blob_deletions(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let oldest = st.snapshots.keys().next().copied();
        let (ready, wait): (Vec<_>, Vec<_>) = st
            .blob_pending_deletion
            .iter()
            .partition(|(_, seq)| oldest.is_none_or(|o| o >= *seq));
        if ready.is_empty() {
            return Ok(());
        }
        let edit = VersionEdit {
            blob_files_deleted: ready.iter().map(|(n, _)| *n).collect(),
            ..Default::default()
        };
        st.versions.log_and_apply(edit)?;
        let mut blobs = (*st.blobs).clone();
        for (n, _) in &ready {
            if let Some(f) = blobs.remove(n) {
                f.mark_obsolete();
            }
        }
        st.blobs = Arc::new(blobs);
        st.blob_pending_deletion = wait;
        self.install_super_version(st);
        Ok(())
    }

    /// The sealed segment most worth collecting when the value log's space amplification is
    /// above `blob_gc_space_amp`.
    fn pick_gc_segment(&self, st: &State, skip: &HashSet<u64>) -> Option<u64> {
        let threshold = self.opts.blob_gc_space_amp;
        if threshold == 0.0 {
            return None;
        }
        let (total, garbage) = st
            .versions
            .blob_files
            .values()
            .fold((0u64, 0u64), |(t, g), m| {
                (t + m.size, g + m.garbage.min(m.size))
            });
        if total == 0 || (total as f64) <= threshold * (total - garbage).max(1) as f64 {
            return None;
        }
        st.versions
            .blob_files
            .iter()
            .filter(|(n, m)| {
                m.sealed
                    && m.size > 0
                    && !skip.contains(n)
                    && !st.blob_pending_deletion.iter().any(|(p, _)| p == *n)
                    && m.garbage.min(m.size) as f64
                        >= self.opts.blob_gc_garbage_ratio * m.size as f64
            })
            .max_by(|a, b| {
                let ra = a.1.garbage.min(a.1.size) as f64 / a.1.size as f64;
                let rb = b.1.garbage.min(b.1.size) as f64 / b.1.size as f64;
                ra.total_cmp(&rb)
            })
            .map(|(n, _)| *n)
    }

    fn record_gc(&self, st: &mut State, r: &(u64, u64, u64)) {
        st.gc.segments += 1;
        st.gc.records_rewritten += r.0;
        st.gc.bytes_rewritten += r.1;
        st.gc.bytes_reclaimed += r.2;
    }

    /// Background collection: runs when flushes and compactions report new garbage.
    fn gc_loop(&self) {
        let mut skip: HashSet<u64> = HashSet::new();
        let mut st = self.state.lock();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            let pick = if st.bg_error.is_none() && !st.gc_running {
                self.pick_gc_segment(&st, &skip)
            } else {
                None
            };
            let Some(n) = pick else {
                self.work_cv.wait_for(&mut st, Duration::from_secs(1));
                continue;
            };
            st.gc_running = true;
            let ratio = self.opts.blob_gc_garbage_ratio;
            let r = MutexGuard::unlocked(&mut st, || self.gc_segment(n, ratio));
            st.gc_running = false;
            st.gc.runs += 1;
            match r {
                Ok(Some(done)) => self.record_gc(&mut st, &done),
                // Skipped, damaged or out of space: leave the segment as it is (nothing is
                // lost) and do not retry it in this session; `verify` and `gc` report it.
                Ok(None) | Err(_) => {
                    skip.insert(n);
                }
            }
            self.done_cv.notify_all();
        }
    }

    /// On-demand collection of every sealed segment at least `min_ratio` dead.
    fn gc(&self, min_ratio: f64) -> Result<GcReport> {
        let mut st = self.state.lock();
        while st.gc_running {
            self.done_cv.wait_for(&mut st, Duration::from_millis(50));
        }
        if let Some(e) = &st.bg_error {
            return Err(e.duplicate());
        }
        st.gc_running = true;
        let mut order: Vec<(u64, f64)> = st
            .versions
            .blob_files
            .iter()
            .filter(|(_, m)| m.sealed)
            .map(|(n, m)| (*n, m.garbage as f64 / m.size.max(1) as f64))
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1));
        let r = MutexGuard::unlocked(&mut st, || {
            let mut report = GcReport::default();
            let mut done = Vec::new();
            for (n, _) in order {
                if let Some(d) = self.gc_segment(n, min_ratio)? {
                    report.segments_collected += 1;
                    report.records_rewritten += d.0;
                    report.bytes_rewritten += d.1;
                    report.bytes_reclaimed += d.2;
                    done.push(d);
                }
            }
            Ok::<_, Error>((report, done))
        });
        st.gc_running = false;
        st.gc.runs += 1;
        self.done_cv.notify_all();
        let (report, done) = r?;
        for d in &done {
            self.record_gc(&mut st, d);
        }
        Ok(report)
    }

    fn stats(&self) -> Stats {
        // Table readers may have to be opened (file I/O): do it before taking the state mutex.
        let v = self.sv.read().version.clone();
        let mut pinned = 0u64;
        let mut fixed_layout_files = Vec::new();
        let mut model_bytes_per_level = vec![0u64; NUM_LEVELS];
        let (mut model_segments, mut files_with_models) = (0u64, 0u64);
        for (level, files) in v.files.iter().enumerate() {
            for f in files {
                if let Ok(t) = self.tables.get(f.number) {
                    pinned += t.pinned_bytes() as u64;
                    if t.properties().fixed_layout() {
                        fixed_layout_files.push(f.number);
                    }
                    if let Some(m) = t.model() {
                        model_bytes_per_level[level] += m.bytes() as u64;
                        model_segments += m.index.model().segment_count() as u64;
                        files_with_models += 1;
                    }
                }
            }
        }
        let (mut level_models, mut level_model_bytes) = (0u64, 0u64);
        for m in v.level_models.iter().filter_map(|s| s.get()) {
            level_models += 1;
            level_model_bytes += m.bytes() as u64;
        }
        let learned = self.tables.learning().map_or_else(
            || LearnStats {
                mode: "off".into(),
                ..LearnStats::default()
            },
            |l| l.stats(),
        );
        let mut open_lens: HashMap<u64, u64> = self
            .vlog_sealing
            .lock()
            .iter()
            .map(|w| (w.number, w.len()))
            .collect();
        if let Some(w) = self.vlog.lock().as_ref() {
            open_lens.insert(w.number, w.len());
        }
        let st = self.state.lock();
        let c = &self.counters;
        let user = c.user_bytes_written.load(Ordering::Relaxed);
        let comp_w: u64 = st.level_stats.iter().map(|s| s.bytes_written).sum();
        let comp_r: u64 = st.level_stats.iter().map(|s| s.bytes_read).sum();
        let blob_files: Vec<BlobFileStats> = st
            .versions
            .blob_files
            .iter()
            .map(|(n, m)| BlobFileStats {
                number: *n,
                size: open_lens.get(n).copied().unwrap_or(m.size),
                garbage: m.garbage,
                sealed: m.sealed,
            })
            .collect();
        let blob_bytes: u64 = blob_files.iter().map(|b| b.size).sum();
        let blob_garbage: u64 = blob_files.iter().map(|b| b.garbage.min(b.size)).sum();
        let blob_written = c.blob_bytes_written.load(Ordering::Relaxed);
        Stats {
            last_sequence: self.last_sequence.load(Ordering::Acquire),
            level_files: v.files.iter().map(Vec::len).collect(),
            level_bytes: (0..NUM_LEVELS).map(|l| v.level_bytes(l)).collect(),
            level_compactions: st.level_stats.to_vec(),
            memtable_bytes: st.mem.approximate_memory_usage() as u64
                + st.imm
                    .as_ref()
                    .map_or(0, |m| m.approximate_memory_usage() as u64),
            immutable_memtable: st.imm.is_some(),
            flushes: st.flush_count,
            flush_bytes_written: st.flush_bytes,
            compaction_bytes_read: comp_r,
            compaction_bytes_written: comp_w,
            user_bytes_written: user,
            wal_bytes_written: c.wal_bytes.load(Ordering::Relaxed),
            wal_syncs: c.wal_syncs.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            write_groups: c.write_groups.load(Ordering::Relaxed),
            write_amplification: if user == 0 {
                0.0
            } else {
                (st.flush_bytes + comp_w + blob_written) as f64 / user as f64
            },
            stall_micros: c.stall_micros.load(Ordering::Relaxed),
            slowdowns: c.slowdowns.load(Ordering::Relaxed),
            gets: c.gets.load(Ordering::Relaxed),
            gets_found: c.gets_found.load(Ordering::Relaxed),
            block_cache: self.cache.stats(),
            cache_tiers: self.cache_sizing.as_ref().map(|c| c.stats()),
            live_sst_bytes: (0..NUM_LEVELS).map(|l| v.level_bytes(l)).sum(),
            num_snapshots: st.snapshots.values().sum(),
            table_pinned_bytes: pinned,
            blob_bytes,
            blob_garbage_bytes: blob_garbage,
            blob_live_bytes: blob_bytes - blob_garbage,
            blob_space_amp: if blob_bytes == blob_garbage {
                1.0
            } else {
                blob_bytes as f64 / (blob_bytes - blob_garbage) as f64
            },
            blob_files,
            blob_bytes_written: blob_written,
            blob_reads: c.blob_reads.load(Ordering::Relaxed),
            blob_prefetches: c.blob_prefetches.load(Ordering::Relaxed),
            gc_runs: st.gc.runs,
            gc_segments_collected: st.gc.segments,
            gc_records_rewritten: st.gc.records_rewritten,
            gc_bytes_rewritten: st.gc.bytes_rewritten,
            gc_bytes_reclaimed: st.gc.bytes_reclaimed,
            gc_max_pause_micros: st.gc.max_pause_micros,
            fixed_layout_files,
            learned,
            model_bytes: model_bytes_per_level.iter().sum(),
            model_bytes_per_level,
            model_segments,
            files_with_models,
            level_models,
            level_model_bytes,
            hot_key_cache: self
                .hot
                .as_ref()
                .map(HotKeyCache::stats)
                .unwrap_or_default(),
        }
    }
}

/// Takes the writers at the head of the queue that fit in one group. A sync write never joins a
/// group led by a non-sync write (its durability would be weakened).
fn build_group(writers: &mut VecDeque<PendingWrite>) -> (Vec<u64>, WriteBatch, bool) {
    let mut ids = Vec::new();
    let mut merged = WriteBatch::new();
    let Some(lead) = writers.front_mut() else {
        return (ids, merged, false);
    };
    let sync = lead.sync;
    let lead_batch = lead.batch.take().unwrap_or_default();
    let first = lead_batch.approximate_size();
    let max = if first <= GROUP_SMALL_LEAD_EXTRA {
        first + GROUP_SMALL_LEAD_EXTRA
    } else {
        GROUP_BYTES_MAX
    };
    ids.push(lead.id);
    let joinable = writers
        .get(1)
        .is_some_and(|w| w.batch.is_some() && w.gc.is_none() && (sync || !w.sync));
    if !joinable {
        // Alone: write the leader's batch as it is, without a copy.
        return (ids, lead_batch, sync);
    }
    merged.append(&lead_batch);
    let mut size = first;
    for w in writers.iter_mut().skip(1) {
        if (w.sync && !sync) || w.gc.is_some() {
            break;
        }
        let Some(b) = w.batch.as_ref() else { break };
        if size + b.approximate_size() > max {
            break;
        }
        size += b.approximate_size();
        merged.append(b);
        w.batch = None;
        ids.push(w.id);
    }
    (ids, merged, sync)
}

/// A user-facing iterator with optional bounds [lower, upper). Values kept in the value log are
/// read when the iterator lands on them. A forward scan (two `next` calls in a row) whose value
/// reads go to the device (one took over 30 µs) also starts the OS reading the next
/// `blob_prefetch_depth` separated values, found by a second iterator running ahead over the
/// keys (WiscKey's parallel range-query reads); scans served by the page cache skip it.
pub struct DbIterator {
    inner: DbIter,
    db: Arc<DbInner>,
    sv: Arc<SuperVersion>,
    seq: u64,
    error: Option<Error>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// The current value when it came from the value log.
    blob_value: Vec<u8>,
    on_blob: bool,
    /// The read-ahead iterator, `blob_prefetch_depth` entries in front of `inner`.
    ahead: Option<DbIter>,
    /// Consecutive `next` calls (a scan is detected at two).
    nexts: u32,
    /// Value reads slow enough to have gone to the device; read-ahead starts after the first
    /// (values already in the page cache gain nothing from it and pay its system calls).
    slow_reads: u32,
}

/// A value-log read slower than this went to the device, not the page cache.
const SLOW_BLOB_READ_MICROS: u64 = 30;

impl DbIterator {
    /// Restricts the iterator to keys in [lower, upper).
    pub fn set_bounds(&mut self, lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) {
        self.lower = lower;
        self.upper = upper;
    }

    pub fn valid(&self) -> bool {
        if self.error.is_some() || !self.inner.valid() {
            return false;
        }
        let k = self.inner.key();
        !(self.lower.as_deref().is_some_and(|l| k < l)
            || self.upper.as_deref().is_some_and(|u| k >= u))
    }

    /// Reads the current value from the value log if it lives there.
    fn settle(&mut self) {
        self.on_blob = false;
        if !self.valid() || !self.inner.value_is_blob() {
            return;
        }
        let timed = self.db.opts.blob_prefetch_depth > 0;
        let t0 = if timed { self.db.env.now_micros() } else { 0 };
        let r = match BlobPointer::decode(self.inner.value()) {
            Some(p) => self.db.read_blob(&self.sv.blobs, self.inner.key(), &p),
            None => Err(Error::corruption(
                "<iterator>",
                0,
                "malformed value pointer met during iteration",
            )),
        };
        if timed && self.db.env.now_micros().saturating_sub(t0) >= SLOW_BLOB_READ_MICROS {
            self.slow_reads = self.slow_reads.saturating_add(1);
        }
        match r {
            Ok(v) => {
                self.blob_value = v;
                self.on_blob = true;
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// False (with the error kept for `status`) once the database is closed or this is a
    /// forked child: every positioning checks, so a closed database is never read.
    fn alive(&mut self) -> bool {
        if self.error.is_some() {
            return false;
        }
        match self.db.usable() {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                self.on_blob = false;
                self.ahead = None;
                false
            }
        }
    }

    /// Any positioning other than `next` ends a scan.
    fn reset_scan(&mut self) {
        self.ahead = None;
        self.nexts = 0;
    }

    fn prefetch_at(&self, it: &DbIter) {
        if !it.value_is_blob() {
            return;
        }
        if let Some(p) = BlobPointer::decode(it.value()) {
            if let Some(f) = self.sv.blobs.get(&p.file) {
                f.prefetch(&p);
                self.db
                    .counters
                    .blob_prefetches
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn ahead_in_bounds(&self, it: &DbIter) -> bool {
        it.valid() && self.upper.as_deref().is_none_or(|u| it.key() < u)
    }

    /// Keeps the read-ahead iterator `blob_prefetch_depth` entries in front during a scan.
    fn advance_ahead(&mut self) {
        let depth = self.db.opts.blob_prefetch_depth;
        if depth == 0
            || self.slow_reads == 0
            || self.sv.blobs.is_empty()
            || self.nexts < 2
            || !self.inner.valid()
        {
            return;
        }
        match self.ahead.take() {
            None => {
                let (mut a, err) = self.db.internal_iter(&self.sv, self.seq, false);
                if err.is_some() {
                    return; // the main iterator reports it
                }
                a.seek(self.inner.key());
                if a.valid() {
                    a.next();
                }
                for _ in 0..depth {
                    if !self.ahead_in_bounds(&a) {
                        break;
                    }
                    self.prefetch_at(&a);
                    a.next();
                }
                self.ahead = Some(a);
            }
            Some(mut a) => {
                if self.ahead_in_bounds(&a) {
                    self.prefetch_at(&a);
                    a.next();
                }
                self.ahead = Some(a);
            }
        }
    }

    pub fn seek_to_first(&mut self) {
        if !self.alive() {
            return;
        }
        self.reset_scan();
        match self.lower.clone() {
            Some(l) => self.inner.seek(&l),
            None => self.inner.seek_to_first(),
        }
        self.settle();
    }

    pub fn seek_to_last(&mut self) {
        if !self.alive() {
            return;
        }
        self.reset_scan();
        match self.upper.clone() {
            Some(u) => {
                self.inner.seek(&u);
                if self.inner.valid() {
                    self.inner.prev();
                } else if self.inner.status().is_ok() {
                    self.inner.seek_to_last();
                }
            }
            None => self.inner.seek_to_last(),
        }
        self.settle();
    }

    pub fn seek(&mut self, key: &[u8]) {
        if !self.alive() {
            return;
        }
        self.reset_scan();
        match &self.lower {
            Some(l) if key < &l[..] => {
                let l = l.clone();
                self.inner.seek(&l)
            }
            _ => self.inner.seek(key),
        }
        self.settle();
    }

    pub fn seek_for_prev(&mut self, key: &[u8]) {
        if !self.alive() {
            return;
        }
        match &self.upper {
            Some(u) if key >= &u[..] => self.seek_to_last(),
            _ => {
                self.reset_scan();
                self.inner.seek_for_prev(key);
                self.settle();
            }
        }
    }

    pub fn next(&mut self) {
        if !self.alive() {
            return;
        }
        self.inner.next();
        self.nexts = self.nexts.saturating_add(1);
        self.advance_ahead();
        self.settle();
    }

    pub fn prev(&mut self) {
        if !self.alive() {
            return;
        }
        self.reset_scan();
        self.inner.prev();
        self.settle();
    }

    pub fn key(&self) -> &[u8] {
        self.inner.key()
    }

    pub fn value(&self) -> &[u8] {
        if self.on_blob {
            &self.blob_value
        } else {
            self.inner.value()
        }
    }

    pub fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        self.inner.status()
    }
}

// DB is shared across threads and iterators move between them (Python hands them around).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    const fn send<T: Send>() {}
    send_sync::<DB>();
    send::<DbIterator>();
};
