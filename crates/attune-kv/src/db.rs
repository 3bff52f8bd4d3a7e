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
use crate::env::{Env, FileLock, PosixEnv};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::iter::{DbIter, InternalIterator, MergingIterator};
use crate::log::{LogReader, LogWriter};
use crate::memtable::{with_lookup_key, Lookup, MemTable, MemTableIter};
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::table::{TableBuilder, TableBuilderOptions, TableIter};
use crate::version::{
    FileMeta, LevelIter, TableCache, Version, VersionEdit, VersionSet, NUM_LEVELS,
};
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

/// What a reader needs: the memtables and the version, captured together.
pub(crate) struct SuperVersion {
    mem: Arc<MemTable>,
    imm: Option<Arc<MemTable>>,
    version: Arc<Version>,
}

struct PendingWrite {
    id: u64,
    batch: Option<WriteBatch>,
    sync: bool,
}

#[derive(Default, Clone, Copy, Debug)]
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
    /// The previous WAL (of the immutable memtable) until it is fsynced: by the flush thread, or
    /// first by a sync write, so that a synced write never survives a crash that loses an earlier
    /// write of the previous log (the prefix guarantee across log files).
    imm_wal: Mutex<Option<LogWriter>>,
    last_sequence: AtomicU64,
    tables: Arc<TableCache>,
    cache: Arc<BlockCache>,
    counters: Counters,
    shutting_down: AtomicBool,
    _lock: Box<dyn FileLock>,
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
        let mut st = self.inner.state.lock();
        if let Some(c) = st.snapshots.get_mut(&self.seq) {
            *c -= 1;
            if *c == 0 {
                st.snapshots.remove(&self.seq);
            }
        }
    }
}

/// Engine statistics (see `docs/kv.md` for each field).
#[derive(Clone, Debug, Default)]
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
    pub live_sst_bytes: u64,
    pub num_snapshots: usize,
    pub table_pinned_bytes: u64,
}

impl DB {
    /// Opens (or creates) the database in `path` on the real file system.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<DB> {
        let env = PosixEnv::new().with_mmap_reads(opts.mmap_reads);
        Self::open_with_env(Arc::new(env), path.as_ref(), opts)
    }

    /// Opens with a given environment (tests use `MemEnv`).
    pub fn open_with_env(env: Arc<dyn Env>, dir: &Path, opts: Options) -> Result<DB> {
        let opts = opts.sanitized()?;
        let dir = dir.to_path_buf();
        let current = filename::current_path(&dir);
        if !env.exists(&dir) {
            if !opts.create_if_missing {
                return Err(Error::NotADatabase {
                    path: dir,
                    detail: "directory does not exist (create_if_missing is off)".into(),
                });
            }
            crate::env::create_dir_all_durable(env.as_ref(), &dir)?;
        }
        let lock = env.lock(&filename::lock_path(&dir))?;
        let exists = env.exists(&current);
        if exists && opts.error_if_exists {
            return Err(Error::AlreadyExists { path: dir });
        }
        if !exists {
            // A creation interrupted by a crash leaves only a manifest and maybe CURRENT's temp
            // file (CURRENT is written last, and nothing was acknowledged before it): start over.
            let others: Vec<String> = env
                .list_dir(&dir)?
                .into_iter()
                .filter(|n| {
                    !matches!(
                        filename::parse(n),
                        Some(FileKind::Lock | FileKind::Manifest(_) | FileKind::Temp)
                    )
                })
                .collect();
            if !others.is_empty() {
                let shown: Vec<&str> = others.iter().take(3).map(String::as_str).collect();
                return Err(Error::NotADatabase {
                    path: dir,
                    detail: format!(
                        "directory is not empty and has no CURRENT file (found {}); \
                         open an empty or new directory",
                        shown.join(", ")
                    ),
                });
            }
            if !opts.create_if_missing {
                return Err(Error::NotADatabase {
                    path: dir,
                    detail: "no database here (create_if_missing is off)".into(),
                });
            }
        }
        let cache = Arc::new(BlockCache::new(opts.block_cache_size));
        let tables = Arc::new(TableCache::new(env.clone(), dir.clone(), cache.clone()));
        let mut versions = VersionSet::new(env.clone(), dir.clone());
        if exists {
            versions.recover()?;
        } else {
            versions.create_new()?;
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
        let mut edit = VersionEdit::default();
        let max_seq = recover_logs(&env, &dir, &opts, &mut versions, &mut edit)?;
        let log_number = versions.new_file_number();
        let wal_file = env.new_writable(&filename::log_path(&dir, log_number))?;
        env.sync_dir(&dir)?;
        edit.log_number = Some(log_number);
        versions.last_sequence = max_seq;
        edit.last_sequence = Some(max_seq);
        versions.log_and_apply(edit)?;
        let mem = Arc::new(MemTable::new(log_number));
        let sv = Arc::new(SuperVersion {
            mem: mem.clone(),
            imm: None,
            version: versions.current(),
        });
        let inner = Arc::new(DbInner {
            env,
            dir,
            opts,
            state: Mutex::new(State {
                versions,
                mem,
                imm: None,
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
            }),
            write_cv: Condvar::new(),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            sv: RwLock::new(sv),
            wal: Mutex::new(Some(LogWriter::new(wal_file))),
            imm_wal: Mutex::new(None),
            last_sequence: AtomicU64::new(max_seq),
            tables,
            cache,
            counters: Counters::default(),
            shutting_down: AtomicBool::new(false),
            _lock: lock,
        });
        {
            let mut st = inner.state.lock();
            inner.delete_obsolete_files(&mut st);
        }
        let mut threads = Vec::new();
        let spawn = |name: &str, f: fn(&DbInner)| {
            let i = inner.clone();
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || f(&i))
                .map_err(|e| Error::io("spawn thread", PathBuf::from(name), e))
        };
        threads.push(spawn("attune-flush", DbInner::flush_loop)?);
        threads.push(spawn("attune-compact", DbInner::compaction_loop)?);
        if inner.opts.wal_sync_interval_ms > 0 {
            threads.push(spawn("attune-walsync", DbInner::wal_sync_loop)?);
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
        self.inner.get(key, ro)
    }

    /// A snapshot of the current state.
    pub fn snapshot(&self) -> Snapshot {
        let mut st = self.inner.state.lock();
        let seq = self.inner.last_sequence.load(Ordering::Acquire);
        *st.snapshots.entry(seq).or_insert(0) += 1;
        Snapshot {
            inner: self.inner.clone(),
            seq,
        }
    }

    /// An iterator over the user view; position it with a seek before use.
    pub fn iter(&self, ro: &ReadOptions) -> DbIterator {
        self.inner.iter(ro)
    }

    /// Flushes the memtable to an L0 table and waits for it.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Compacts every file overlapping [begin, end] (None = unbounded) down to the last level
    /// that holds data, waiting for the result.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.flush()?;
        self.inner.compact_range(begin, end)
    }

    /// Changes the block cache capacity while running.
    pub fn set_block_cache_capacity(&self, bytes: u64) {
        self.inner.cache.set_capacity(bytes);
    }

    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// The effective options.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Checks every checksum of every live table; returns (files, entries) verified.
    pub fn verify(&self) -> Result<(u64, u64)> {
        let sv = self.inner.sv.read().clone();
        let mut files = 0;
        let mut entries = 0;
        for f in sv.version.files.iter().flatten() {
            entries += self.inner.tables.get(f.number)?.verify()?;
            files += 1;
        }
        Ok((files, entries))
    }

    /// Stops background work, syncs the WAL and releases the lock.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.shutting_down.swap(true, Ordering::AcqRel) {
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
        self.inner.sync_imm_wal()?;
        let mut wal = self.inner.wal.lock();
        if let Some(w) = wal.as_mut() {
            w.sync()?;
        }
        Ok(())
    }
}

impl Drop for DB {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Replays WAL files not yet covered by tables into L0 tables recorded in `edit`.
/// Returns the largest sequence seen.
fn recover_logs(
    env: &Arc<dyn Env>,
    dir: &Path,
    opts: &Options,
    versions: &mut VersionSet,
    edit: &mut VersionEdit,
) -> Result<u64> {
    let mut logs: Vec<u64> = env
        .list_dir(dir)?
        .iter()
        .filter_map(|n| match filename::parse(n) {
            Some(FileKind::Log(n)) if n >= versions.log_number => Some(n),
            _ => None,
        })
        .collect();
    logs.sort_unstable();
    let mut max_seq = versions.last_sequence;
    let mut mem = MemTable::new(0);
    // Sequence the next record must not exceed. A larger one means an earlier log lost its
    // unsynced tail in a machine crash while a later log kept part of its own: replaying on
    // would leave a hole, so recovery stops there. Nothing acknowledged as synced is dropped (a
    // sync write first fsyncs every earlier log).
    let mut next_seq_max: Option<u64> = None;
    let mut hole = false;
    for n in logs {
        versions.next_file_number = versions.next_file_number.max(n + 1);
        if hole {
            continue;
        }
        let path = filename::log_path(dir, n);
        let data = env.read_all(&path)?;
        let mut reader = LogReader::new(&data, &path);
        while let Some((off, rec)) = reader.next_record()? {
            let (seq, batch) = WriteBatch::decode(&rec)
                .ok_or_else(|| Error::corruption(&path, off, "malformed write batch in WAL"))?;
            if next_seq_max.is_some_and(|m| seq > m) {
                hole = true;
                break;
            }
            next_seq_max = Some(next_seq_max.unwrap_or(0).max(seq + batch.len() as u64));
            let mut s = seq;
            for item in batch.iter() {
                let (kind, k, v) =
                    item.ok_or_else(|| Error::corruption(&path, off, "malformed batch entry"))?;
                mem.add(s, kind, k, v);
                s += 1;
            }
            if !batch.is_empty() {
                max_seq = max_seq.max(s - 1);
            }
            if mem.approximate_memory_usage() as u64 > opts.write_buffer_size {
                let m = std::mem::replace(&mut mem, MemTable::new(0));
                if let Some(f) = write_level0(
                    env.as_ref(),
                    dir,
                    opts,
                    versions.new_file_number(),
                    Arc::new(m),
                    crate::key::MAX_SEQUENCE,
                )? {
                    edit.add_file(0, f);
                }
            }
        }
    }
    if !mem.is_empty() {
        if let Some(f) = write_level0(
            env.as_ref(),
            dir,
            opts,
            versions.new_file_number(),
            Arc::new(mem),
            crate::key::MAX_SEQUENCE,
        )? {
            edit.add_file(0, f);
        }
    }
    if !edit.new_files.is_empty() {
        env.sync_dir(dir)?;
    }
    Ok(max_seq)
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
) -> Result<Option<FileMeta>> {
    let mut it = MemTableIter::new(mem);
    it.seek_to_first();
    if !it.valid() {
        return Ok(None);
    }
    let path = filename::table_path(dir, number);
    let mut b = TableBuilder::new(env.new_writable(&path)?, TableBuilderOptions::from(opts));
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
    Ok(Some(FileMeta {
        number,
        size,
        smallest,
        largest,
        num_entries,
    }))
}

impl DbInner {
    fn write(&self, batch: WriteBatch, wo: WriteOptions) -> Result<()> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed("database is closed".into()));
        }
        let mut st = self.state.lock();
        let id = st.next_writer_id;
        st.next_writer_id += 1;
        st.writers.push_back(PendingWrite {
            id,
            batch: Some(batch),
            sync: wo.sync,
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
        let (group, batch, sync) = build_group(&mut st.writers);
        let count = batch.len() as u64;
        let first_seq = self.last_sequence.load(Ordering::Acquire) + 1;
        let mut batch = batch;
        batch.set_sequence(first_seq);
        let mem = st.mem.clone();
        let result =
            MutexGuard::unlocked(&mut st, || self.write_group(&batch, first_seq, sync, &mem));
        match &result {
            Ok(()) => {
                if count > 0 {
                    self.last_sequence
                        .store(first_seq + count - 1, Ordering::Release);
                }
            }
            Err(e) => {
                if st.bg_error.is_none() {
                    st.bg_error = Some(e.duplicate());
                }
            }
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

    /// Fsyncs the previous WAL if it is still pending.
    fn sync_imm_wal(&self) -> Result<()> {
        let mut g = self.imm_wal.lock();
        if let Some(w) = g.as_mut() {
            w.sync()?;
            self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
        }
        *g = None;
        Ok(())
    }

    fn write_group(
        &self,
        batch: &WriteBatch,
        first_seq: u64,
        sync: bool,
        mem: &MemTable,
    ) -> Result<()> {
        if sync {
            self.sync_imm_wal()?;
        }
        {
            let mut wal = self.wal.lock();
            let w = wal.as_mut().ok_or_else(|| Error::Closed("no WAL".into()))?;
            w.add_record(batch.encoded())?;
            if sync {
                w.sync()?;
                self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut user_bytes = 0u64;
        for (seq, item) in (first_seq..).zip(batch.iter()) {
            let (kind, k, v) =
                item.ok_or_else(|| Error::InvalidArgument("malformed batch".into()))?;
            mem.add(seq, kind, k, v);
            user_bytes += (k.len() + v.len()) as u64;
        }
        let c = &self.counters;
        c.wal_bytes
            .fetch_add(batch.approximate_size() as u64 + 9, Ordering::Relaxed);
        c.user_bytes_written
            .fetch_add(user_bytes, Ordering::Relaxed);
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
            // Switch to a new memtable and WAL.
            let n = st.versions.new_file_number();
            let f = self.env.new_writable(&filename::log_path(&self.dir, n))?;
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
        });
        *self.sv.write() = sv;
    }

    fn get(&self, key: &[u8], ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        let sv = self.sv.read().clone();
        let seq = ro
            .snapshot
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire));
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        let mut r = sv.mem.get(key, seq);
        if r == Lookup::NotFound {
            if let Some(imm) = &sv.imm {
                r = imm.get(key, seq);
            }
        }
        if r == Lookup::NotFound {
            r = with_lookup_key(key, seq, |k| sv.version.get(k, &self.tables))?;
        }
        match r {
            Lookup::Found(v) => {
                self.counters.gets_found.fetch_add(1, Ordering::Relaxed);
                Ok(Some(v))
            }
            _ => Ok(None),
        }
    }

    fn iter(&self, ro: &ReadOptions) -> DbIterator {
        let sv = self.sv.read().clone();
        let seq = ro
            .snapshot
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire));
        let fill = !ro.fill_cache_off;
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
        DbIterator {
            inner: DbIter::new(Box::new(MergingIterator::new(children)), seq),
            _sv: sv,
            error,
            lower: None,
            upper: None,
        }
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
            let Some(imm) = st.imm.clone().filter(|_| st.bg_error.is_none()) else {
                self.work_cv.wait(&mut st);
                continue;
            };
            let number = st.versions.new_file_number();
            st.pending_outputs.insert(number);
            let smallest_snapshot = self.smallest_snapshot(&st);
            let r = MutexGuard::unlocked(&mut st, || {
                self.sync_imm_wal()?;
                let f = write_level0(
                    self.env.as_ref(),
                    &self.dir,
                    &self.opts,
                    number,
                    imm.clone(),
                    smallest_snapshot,
                )?;
                self.env.sync_dir(&self.dir)?;
                Ok::<_, Error>(f)
            });
            let r = r.and_then(|f| {
                let mut edit = VersionEdit::default();
                let bytes = f.as_ref().map_or(0, |f| f.size);
                if let Some(f) = f {
                    edit.add_file(0, f);
                }
                edit.log_number = Some(st.mem.log_number);
                edit.last_sequence = Some(self.last_sequence.load(Ordering::Acquire));
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
            self.done_cv.wait_for(&mut st, interval);
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            let r = MutexGuard::unlocked(&mut st, || {
                self.sync_imm_wal()?;
                if let Some(w) = self.wal.lock().as_mut() {
                    w.sync()?;
                    self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, Error>(())
            });
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
                FileKind::Table(n) => !live.contains(&n) && !st.pending_outputs.contains(&n),
                FileKind::Manifest(n) => n < st.versions.manifest_number,
                FileKind::Temp => true,
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

    fn stats(&self) -> Stats {
        // Table readers may have to be opened (file I/O): do it before taking the state mutex.
        let v = self.sv.read().version.clone();
        let mut pinned = 0u64;
        for f in v.files.iter().flatten() {
            if let Ok(t) = self.tables.get(f.number) {
                pinned += t.pinned_bytes() as u64;
            }
        }
        let st = self.state.lock();
        let c = &self.counters;
        let user = c.user_bytes_written.load(Ordering::Relaxed);
        let comp_w: u64 = st.level_stats.iter().map(|s| s.bytes_written).sum();
        let comp_r: u64 = st.level_stats.iter().map(|s| s.bytes_read).sum();
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
                (st.flush_bytes + comp_w) as f64 / user as f64
            },
            stall_micros: c.stall_micros.load(Ordering::Relaxed),
            slowdowns: c.slowdowns.load(Ordering::Relaxed),
            gets: c.gets.load(Ordering::Relaxed),
            gets_found: c.gets_found.load(Ordering::Relaxed),
            block_cache: self.cache.stats(),
            live_sst_bytes: (0..NUM_LEVELS).map(|l| v.level_bytes(l)).sum(),
            num_snapshots: st.snapshots.values().sum(),
            table_pinned_bytes: pinned,
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
        .is_some_and(|w| w.batch.is_some() && (sync || !w.sync));
    if !joinable {
        // Alone: write the leader's batch as it is, without a copy.
        return (ids, lead_batch, sync);
    }
    merged.append(&lead_batch);
    let mut size = first;
    for w in writers.iter_mut().skip(1) {
        if w.sync && !sync {
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

/// A user-facing iterator with optional bounds [lower, upper).
pub struct DbIterator {
    inner: DbIter,
    _sv: Arc<SuperVersion>,
    error: Option<Error>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

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

    pub fn seek_to_first(&mut self) {
        match self.lower.clone() {
            Some(l) => self.inner.seek(&l),
            None => self.inner.seek_to_first(),
        }
    }

    pub fn seek_to_last(&mut self) {
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
    }

    pub fn seek(&mut self, key: &[u8]) {
        match &self.lower {
            Some(l) if key < &l[..] => {
                let l = l.clone();
                self.inner.seek(&l)
            }
            _ => self.inner.seek(key),
        }
    }

    pub fn seek_for_prev(&mut self, key: &[u8]) {
        match &self.upper {
            Some(u) if key >= &u[..] => self.seek_to_last(),
            _ => self.inner.seek_for_prev(key),
        }
    }

    pub fn next(&mut self) {
        self.inner.next();
    }

    pub fn prev(&mut self) {
        self.inner.prev();
    }

    pub fn key(&self) -> &[u8] {
        self.inner.key()
    }

    pub fn value(&self) -> &[u8] {
        self.inner.value()
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
