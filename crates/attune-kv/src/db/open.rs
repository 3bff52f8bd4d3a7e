//! Open and recovery: the directory lock, the manifest, replay of the logs the manifest does not
//! yet account for (into level-0 tables), the value-log segments, and the new WAL.
//!
//! Called by `DB::open` / `DB::open_with_env` on the opening thread, before any background thread
//! exists. Invariants: the database recovers to a prefix of the acknowledged history; a new WAL is
//! created only after the manifest accounts for its number; a read-only open writes nothing.

use super::clean_close::CleanClose;
use super::{BlobSet, Counters, DbInner, GcStats, State, SuperVersion, DB};
use crate::batch::WriteBatch;
use crate::cache::hotkeys::HotKeyCache;
use crate::cache::BlockCache;
use crate::env::{Env, PosixEnv, ReadOnlyEnv};
use crate::error::{Error, Result};
use crate::index::learned::Learning;
use crate::iter::InternalIterator;
use crate::memtable::{MemTable, MemTableIter};
use crate::options::{LearnedIndex as LearnedMode, Options};
use crate::table::{TableBuilder, TableBuilderOptions};
use crate::util::filename::{self, FileKind};
use crate::version::{FileMeta, TableCache, VersionEdit, VersionSet};
use crate::vlog::{BlobFile, BlobPointer, SegmentScanner};
use crate::wal::{LogReader, LogWriter};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

/// Bytes of the table files in `dir` (0 when it cannot be listed: a new database).
fn table_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".sst")))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

impl DB {
    /// Opens (or creates) the database in `path` on the real file system.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<DB> {
        let memory = crate::env::memory_limit_bytes();
        let mut limit = opts.mmap_reads_limit.bytes(memory);
        if opts.mmap_reads_limit == crate::options::MmapLimit::Auto
            && table_bytes(path.as_ref()) > limit
        {
            // Tables that do not fit the limit now are read with pread only: mapping part of
            // them under memory pressure was slower than mapping none (docs/kv.md "Reads
            // through a mapping or pread").
            limit = 0;
        }
        let env = PosixEnv::new()
            .with_mmap_reads(opts.mmap_reads)
            .with_mmap_limit(limit)
            .with_mmap_logs(opts.mmap_logs)
            .with_uncompressed_beyond_limit_uncached(
                opts.uncompressed_to_page_cache && opts.memory_budget == 0,
            );
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
        // Before anything touches the file system: a missing or damaged model fails here.
        let prefetch = match opts.prefetcher {
            crate::options::Prefetcher::TinFetch => {
                let model = if opts.prefetch_model.is_empty() {
                    None
                } else {
                    Some(super::prefetch::load_model(&opts.prefetch_model)?)
                };
                Some(super::prefetch::ScanPrefetch::new(
                    opts.prefetch_switches,
                    opts.blob_prefetch_depth,
                    model,
                )?)
            }
            _ => None,
        };
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
            // A directory on the way that this user may not search hides the database: say
            // so, rather than that it does not exist.
            if env.is_os_filesystem() {
                if let Err(e) = std::fs::metadata(&dir) {
                    if e.kind() == std::io::ErrorKind::PermissionDenied {
                        return Err(Error::io("stat", &dir, e));
                    }
                }
            }
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
        // A secondary takes no lock: it reads beside the writer that holds it.
        let lock = match (!opts.secondary).then(|| env.lock(&lock_path)) {
            None => None,
            Some(Ok(l)) => Some(l),
            Some(Err(Error::Io { source, .. }))
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
            Some(Err(e)) => return Err(e),
        };
        let exists = env.exists(&current);
        if opts.secondary && !exists {
            return Err(Error::NotADatabase {
                path: dir,
                detail: "no database here (a secondary opens an existing database)".into(),
            });
        }
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
        let (cache, cache_sizing) = crate::cache::sizing::build(&opts, &env, &dir)?;
        let tables = Arc::new(
            TableCache::new(env.clone(), dir.clone(), cache.clone())
                .with_learning(Learning::new(&opts)?)
                // With a memory budget the block cache is what the budget accounts (and what
                // cache sizing resizes), so every block read goes through it.
                .with_in_place_reads(opts.memory_budget == 0),
        );
        let mut versions = VersionSet::new(env.clone(), dir.clone());
        // A secondary follows the writer instead of recovering (files may go while it reads).
        let follower = match opts.secondary {
            true => Some(super::secondary::Follower::start(
                env.clone(),
                &dir,
                &tables,
            )?),
            false => None,
        };
        if let Some((f, _)) = &follower {
            versions.adopt(f.versions());
        } else if exists {
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
        // Before the logs replay: a flush during recovery may fold merge operands.
        let mut opts = opts;
        let merge_name =
            resolve_merge_operator(&mut opts, versions.current().merge_operator.as_deref())?;
        if let Some(l) = tables.learning() {
            l.load_state(env.as_ref(), &dir);
        }
        if follower.is_none() {
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
        let logs = match follower {
            Some(_) => Vec::new(),
            None => logs_to_replay(env.as_ref(), &dir, &versions)?,
        };
        // A secondary reads beside a live writer, which has removed the record.
        let clean_close = match follower {
            Some(_) => None,
            None => CleanClose::read(env.as_ref(), &dir)?,
        };
        let mut edit = VersionEdit {
            // Recorded by the first writable open that names an operator.
            merge_operator: merge_name.filter(|_| follower.is_none() && !read_only),
            ..VersionEdit::default()
        };
        if edit.merge_operator.is_some() {
            edit.format_version = Some(crate::version::MERGE_FORMAT_VERSION);
        }
        let blob_valid = match follower {
            Some(_) => HashMap::new(),
            None => {
                recover_blob_files(env.as_ref(), &dir, &versions, &tables, &mut edit, read_only)
                    .map_err(recovery_hint)?
            }
        };
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
        // The dropped record first: when it explains the missing writes, the error names it.
        let closed_after = clean_close.map(|c| c.last_sequence);
        let checked = match (&follower, versions.manifest_tail_dropped) {
            (None, Some(_)) => {
                tables_past_a_dropped_record(env.as_ref(), &dir, &versions, max_seq, closed_after)
            }
            _ => Ok(Vec::new()),
        }
        .and_then(|ahead| {
            clean_close
                .map_or(Ok(()), |c| c.check(&dir, max_seq))
                .map(|()| ahead)
        });
        let ahead = match checked {
            Ok(ahead) => ahead,
            Err(e) => {
                // Nothing changed: the tables replay wrote are not in the manifest.
                for (_, f) in edit.new_files.drain(..) {
                    let _ = env.remove_file(&filename::table_path(&dir, f.number));
                }
                return Err(e);
            }
        };
        if !read_only && !ahead.is_empty() {
            keep_in_lost(env.as_ref(), &dir, &ahead)?;
        }
        let max_seq = follower.as_ref().map_or(max_seq, |(f, _)| f.max_seq());
        let (mem, wal_file) = if read_only {
            // Nothing is written: the replayed logs stay in memory as the memtable, and the
            // manifest keeps naming them, so the next writable open replays them again.
            versions.last_sequence = max_seq;
            let log_number = versions.log_number;
            match &follower {
                Some((f, _)) => (f.mem(), None),
                None => {
                    let mem = replayed.unwrap_or_else(|| MemTable::new(log_number));
                    (Arc::new(mem), None)
                }
            }
        } else {
            let (log_number, wal) =
                start_new_log(env.as_ref(), &dir, &opts, &mut versions, edit, max_seq)
                    .map_err(recovery_hint)?;
            // The manifest now holds everything the record names.
            if clean_close.is_some() {
                CleanClose::remove(env.as_ref(), &dir);
            }
            (Arc::new(MemTable::new(log_number)), Some(wal))
        };
        let (follower, blobs) = match follower {
            Some((f, blobs)) => (Some(Mutex::new(f)), blobs),
            None => (None, {
                let blobs: BlobSet = Arc::new(
                    versions
                        .blob_files
                        .keys()
                        .map(|&n| (n, Arc::new(BlobFile::new(env.clone(), &dir, n))))
                        .collect(),
                );
                blobs
            }),
        };
        let sv = Arc::new(SuperVersion {
            mem: mem.clone(),
            imm: None,
            version: versions.current(),
            blobs: blobs.clone(),
        });
        // A secondary's values change by catch-up, not through the write path that invalidates
        // the hot-key cache: it reads without one.
        let hot = HotKeyCache::new(opts.hot_key_cache_bytes).filter(|_| !opts.secondary);

        let bulk = crate::env::BulkIo::new(opts.pipes_bulk_io && !opts.read_only, env.as_ref())?;
        let inner = Arc::new(DbInner {
            env,
            bulk,
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
                removals_running: 0,
                level_stats: Default::default(),
                flush_count: 0,
                flush_bytes: 0,
                blobs,
                blob_pending_deletion: Vec::new(),
                blob_shadowed: HashMap::new(),
                shadow_share: 0.0,
                gc_skip: HashMap::new(),
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
            prefetch,
            lock: Mutex::new(lock),
            fork_generation,
            opener_pid: std::process::id(),
            secondary: follower,
        });
        {
            let mut st = inner.state.lock();
            if !read_only {
                inner.delete_obsolete_files(&mut st);
            }
            let v = st.versions.current();
            inner.tables.sync_learning(&v);
            if let Some(c) = &inner.cache_sizing {
                // Before any read: the start prior judges the tables found at open.
                c.start_from_tables(
                    (0..crate::version::NUM_LEVELS)
                        .map(|l| v.level_bytes(l))
                        .sum(),
                );
            }
            if inner.opts.learned_level && inner.tables.learning().is_some() {
                crate::version::learn::load_level_models(inner.env.as_ref(), &inner.dir, &v);
            }
        }
        let mut threads = Vec::new();
        // Threads whose work no writer waits for run `background_nice` below the process.
        let lowered = inner.opts.background_nice;
        let spawn_at = |name: &str, nice: u32, f: fn(&DbInner)| {
            let i = inner.clone();
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    lower_thread_priority(nice);
                    f(&i)
                })
                .map_err(|e| Error::io("spawn thread", PathBuf::from(name), e))
        };
        let spawn = |name: &str, f: fn(&DbInner)| spawn_at(name, 0, f);
        // A read-only open changes nothing, so it runs none of the threads that write.
        if !read_only {
            threads.push(spawn("attune-flush", DbInner::flush_loop)?);
            threads.push(spawn_at(
                "attune-compact",
                lowered,
                DbInner::compaction_loop,
            )?);
            threads.push(spawn_at("attune-gc", lowered, DbInner::gc_loop)?);
        }
        if !read_only
            && inner
                .tables
                .learning()
                .is_some_and(|l| l.mode != LearnedMode::Offline)
        {
            threads.push(spawn_at("attune-learn", lowered, DbInner::learn_loop)?);
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
}

/// Raises the calling thread's nice value by `nice` (0 = unchanged) over what it inherited:
/// `setpriority(PRIO_PROCESS, tid)` sets one thread's priority on Linux. Best effort: a refusal
/// (a seccomp filter, say) leaves the thread at the process's priority, which is only slower
/// for readers, never wrong.
fn lower_thread_priority(nice: u32) {
    #[cfg(target_os = "linux")]
    if nice > 0 {
        // SAFETY: plain system calls on the calling thread's own id; no memory is passed.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            // getpriority returns -1 both as a value and as an error; errno tells them apart,
            // and either way the base is clamped into the nice range below.
            *libc::__errno_location() = 0;
            let base = libc::getpriority(libc::PRIO_PROCESS, tid);
            let base = if *libc::__errno_location() != 0 {
                0
            } else {
                base
            };
            let target = (base + nice.min(19) as i32).min(19);
            libc::setpriority(libc::PRIO_PROCESS, tid, target);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// The last step of a writable open: the manifest edit that retires the replayed logs (naming
/// the tables recovery wrote) and drops the value-log segments a crash left empty, then the new
/// WAL, created only once the manifest accounts for its number (recovery replays no other
/// log). Returns the new log's number and file. Once the edit was attempted the recovered
/// tables stay, even when it failed: its record may have reached the disk and name them (the
/// next open removes the ones it does not).
pub(super) fn start_new_log(
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
/// Reconciles the `merge_operator` option with the name the database recorded: without the
/// option a recorded built-in is used; another operator than the recorded one is refused.
/// Returns the name to record (the first open that gives an operator).
fn resolve_merge_operator(opts: &mut Options, recorded: Option<&str>) -> Result<Option<String>> {
    let given = opts.merge_operator.as_ref().map(|m| m.name().to_string());
    match (given, recorded) {
        (None, None) => Ok(None),
        (Some(g), None) => Ok(Some(g)),
        (Some(g), Some(r)) if g == r => Ok(None),
        (Some(g), Some(r)) => Err(Error::InvalidArgument(format!(
            "option merge_operator: this database was written with merge operator {r:?}, not \
             {g:?}; open it with merge_operator={r:?} (its operands mean nothing to another \
             operator)"
        ))),
        (None, Some(r)) => match crate::merge::builtin(r) {
            Ok(op) => {
                opts.merge_operator = Some(op);
                Ok(None)
            }
            Err(_) => Err(Error::InvalidArgument(format!(
                "option merge_operator: this database was written with merge operator {r:?}, \
                 which is not built in; open it with that operator"
            ))),
        },
    }
}

pub(super) fn recovery_hint(e: Error) -> Error {
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
pub(super) fn check_creatable(env: &dyn Env, dir: &Path, opts: &Options) -> Result<()> {
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
    if others.iter().any(|n| n == "manifest.plush") {
        return Err(Error::NotADatabase {
            path: dir.to_path_buf(),
            detail: "this is an Attune hash database (manifest.plush found), not an LSM one: \
                     open it with attune.HashDB (CLI: attune hash-db)"
                .into(),
        });
    }
    if !others.is_empty() {
        let shown: Vec<&str> = others.iter().take(3).map(String::as_str).collect();
        // Tables, logs or value-log segments without CURRENT: a database whose CURRENT was
        // lost (repair rebuilds it from them) or a checkpoint cut short. Never advise deleting
        // what may be the only copy of the data.
        let ours = others.iter().any(|n| {
            matches!(
                filename::parse(n),
                Some(FileKind::Table(_) | FileKind::Log(_) | FileKind::Blob(_))
            )
        });
        let what = if ours {
            "it holds database files: if this is a database that lost CURRENT, \
             attune.repair(path) (CLI: attune kv repair) rebuilds it from them; if it is a \
             checkpoint cut short, take the checkpoint again into a new directory"
        } else {
            "open an empty or new directory"
        };
        return Err(Error::NotADatabase {
            path: dir.to_path_buf(),
            detail: format!(
                "directory is not empty and has no CURRENT file (found {}); {what}",
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
pub(super) fn foreign_engine_in(env: &dyn Env, dir: &Path) -> Option<String> {
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

pub(super) fn foreign_database_error(dir: &Path, what: &str) -> Error {
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
pub(super) fn refuse_non_directory(env: &dyn Env, dir: &Path) -> Result<()> {
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
pub(super) fn logs_to_replay(
    env: &dyn Env,
    dir: &Path,
    versions: &VersionSet,
) -> Result<Vec<(u64, bool)>> {
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
    missing_first_log(dir, versions, &logs)?;
    Ok(logs)
}

/// Fails when the WAL the manifest's log number names is missing although a later log the
/// manifest accounts for is present. That log number names the oldest log whose writes may not
/// all be in tables; a later log exists only once it did, and it is deleted only after a durable
/// manifest record moved the log number past it. So this state is not one a crash leaves: the
/// manifest lost the record that retired that log (a damaged or cut last record, which recovery
/// otherwise takes for a torn write). Replaying the later logs would then skip the writes in
/// between, and the open would delete as unlisted the tables that record added. Nothing is
/// changed on disk; repair rebuilds the manifest from the files.
fn missing_first_log(dir: &Path, versions: &VersionSet, logs: &[(u64, bool)]) -> Result<()> {
    let first = versions.log_number;
    if logs.iter().any(|&(n, _)| n == first) {
        return Ok(());
    }
    let Some(&(later, _)) = logs.iter().find(|&&(n, accounted)| accounted && n > first) else {
        return Ok(());
    };
    let manifest = dir.join(filename::manifest_name(versions.manifest_number));
    let (offset, dropped) = match versions.manifest_tail_dropped {
        Some(off) => (
            off,
            format!("; its last record, from byte {off}, is damaged or cut and was dropped"),
        ),
        None => (0, String::new()),
    };
    Err(Error::corruption(
        &manifest,
        offset,
        format!(
            "the manifest does not describe the files present: it names write-ahead log \
             {first:06}.log as the oldest with unflushed writes, which is missing, while the \
             later {later:06}.log is present{dropped}; nothing was changed or deleted: \
             attune.repair(path) (CLI: attune kv repair) rebuilds the manifest from the files"
        ),
    ))
}

/// Tables the recovered manifest does not list that hold writes past the recovered history,
/// when the manifest's last record was dropped as damaged or cut: that record may have been an
/// ingestion's (the only edit that adds writes no log holds, at new sequence numbers or, for a
/// file placed as it is, at sequence 0). A crash during an ingestion leaves
/// exactly this state, with nothing written after it, so the tables are returned to be kept in
/// `lost/` rather than deleted as unlisted. When the logs hold writes after them (replay stopped
/// at a gap in the sequence numbers), or a clean close recorded a history past the recovered one,
/// the record was durable, so it was damaged, not torn: the open fails naming the manifest, and
/// repair, which lists every table, recovers it all.
fn tables_past_a_dropped_record(
    env: &dyn Env,
    dir: &Path,
    versions: &VersionSet,
    recovered: u64,
    closed_after: Option<u64>,
) -> Result<Vec<(u64, u64, u64)>> {
    let listed = versions.current().file_numbers();
    let mut ahead = Vec::new();
    for name in env.list_dir(dir)? {
        let Some(FileKind::Table(n)) = filename::parse(&name) else {
            continue;
        };
        if listed.contains(&n) {
            continue;
        }
        let path = filename::table_path(dir, n);
        // An unreadable one is a partial output a crash cut short: deleted as before.
        let Ok(t) = env.open_random(&path).and_then(|f| {
            crate::table::Table::open(f, path.clone(), n, Arc::new(BlockCache::new(0)))
        }) else {
            continue;
        };
        let p = t.properties();
        // Sequence 0 throughout: a file an ingestion placed as it was (no other edit writes one).
        if p.num_entries > 0 && (p.largest_seq > recovered || p.largest_seq == 0) {
            ahead.push((n, p.smallest_seq, p.largest_seq));
        }
    }
    let Some(&(n, first, last)) = ahead.iter().find(|&&(_, _, last)| last > recovered) else {
        return Ok(ahead);
    };
    // Evidence that the record was durable: writes after it in the logs, or a clean close that
    // saw the history reach past what was recovered.
    let evidence = match (versions.replay_gap, closed_after) {
        (Some((expected, found)), _) => {
            format!("the logs continue at write {found} where {expected} was next")
        }
        (None, Some(closed)) if closed > recovered => {
            format!("the database was closed cleanly after write {closed}")
        }
        _ => return Ok(ahead),
    };
    let manifest = dir.join(filename::manifest_name(versions.manifest_number));
    let offset = versions.manifest_tail_dropped.unwrap_or(0);
    Err(Error::corruption(
        &manifest,
        offset,
        format!(
            "the manifest's last record, from byte {offset}, is damaged or cut and was dropped, \
             but it had been written: table {n:06}.sst, which no remaining record lists, holds \
             writes {first}..={last} past the recovered history, and {evidence}; nothing was \
             changed or deleted: attune.repair(path) (CLI: attune kv repair) rebuilds the \
             manifest from the files"
        ),
    ))
}

/// Moves `tables` (number, first and last sequence) into `lost/` instead of letting the open
/// delete them as unlisted (see [`tables_past_a_dropped_record`]).
fn keep_in_lost(env: &dyn Env, dir: &Path, tables: &[(u64, u64, u64)]) -> Result<()> {
    let lost = dir.join(filename::LOST_DIR);
    crate::env::create_dir_all_durable(env, &lost)?;
    for &(n, _, _) in tables {
        let from = filename::table_path(dir, n);
        let to = crate::env::unused_path(env, &lost, &filename::table_name(n));
        env.rename(&from, &to)?;
    }
    env.sync_dir(&lost)?;
    env.sync_dir(dir)
}

/// The error for a log the manifest does not account for and whose records do not continue the
/// recovered history: left in place, not replayed.
pub(super) fn stray_log(dir: &Path, n: u64, versions: &VersionSet, why: &str) -> Error {
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
pub(super) fn recover_logs(
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
pub(super) fn replay_logs(
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
            let (seq, batch) = WriteBatch::decode_logged(&rec, &path, off)?;
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
                versions.replay_gap = Some((next_seq_max, seq));
                break;
            }
            next_seq_max = next_seq_max.max(seq + batch.len() as u64);
            let items = batch.entries_checked(&path, off)?;
            for &(kind, _, v) in &items {
                if let Some(v) = crate::key::blob_payload(kind, v) {
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
                flush_replayed(env.as_ref(), dir, opts, versions, edit, &mut garbage, m)?;
            }
        }
    }
    if opts.read_only {
        return Ok((max_seq, Some(mem)));
    }
    if !mem.is_empty() {
        flush_replayed(env.as_ref(), dir, opts, versions, edit, &mut garbage, mem)?;
    }
    edit.blob_garbage.extend(garbage);
    if !edit.new_files.is_empty() {
        env.sync_dir(dir)?;
    }
    Ok((max_seq, None))
}

/// Writes a memtable rebuilt from the WAL as a level-0 table added to `edit`. No snapshot exists
/// during recovery, so versions shadowed by a newer one are dropped, as in a flush.
fn flush_replayed(
    env: &dyn Env,
    dir: &Path,
    opts: &Options,
    versions: &mut VersionSet,
    edit: &mut VersionEdit,
    garbage: &mut BTreeMap<u64, u64>,
    mem: MemTable,
) -> Result<()> {
    let number = versions.new_file_number();
    if mem.range_dels().is_some() {
        // Never below what the edit already records (a merge operator's format).
        let f = edit.format_version.unwrap_or(0);
        edit.format_version = Some(f.max(crate::version::DB_FORMAT_VERSION));
    }
    if let Some(f) = write_level0(
        env,
        dir,
        opts,
        number,
        Arc::new(mem),
        crate::key::MAX_SEQUENCE,
        garbage,
    )? {
        edit.add_file(0, f);
    }
    Ok(())
}

/// Checks the value-log segments against the manifest: removes segments it does not list (left
/// by a collection or a switch that a crash interrupted), fails if a listed one is missing, and
/// seals the segment that was active at the crash at the end of its last whole record (recorded
/// in `edit`). Returns each segment's valid length, against which WAL pointers are checked.
///
/// Only bytes past every record a table points to may be cut as a torn tail: a flush fsyncs
/// the value log before it writes the table, so a bad record below the furthest one a table
/// names is damage, and a writable open fails (naming the segment and offset) and keeps the
/// file. The tables are read for this only when the scan stops before the segment's end.
pub(super) fn recover_blob_files(
    env: &dyn Env,
    dir: &Path,
    versions: &VersionSet,
    tables: &TableCache,
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
                if crate::vlog::record_at(&data, h)
                    || (!read_only && table_referenced_end(dir, versions, tables, n)? > 0)
                {
                    return Err(e);
                }
                0
            }
        };
        if !read_only && len > 0 && len < data.len() as u64 {
            let referenced = table_referenced_end(dir, versions, tables, n)?;
            if referenced > len {
                let why = SegmentScanner::new(&path, &data)
                    .ok()
                    .and_then(|mut scan| {
                        for _ in scan.by_ref() {}
                        scan.stop_reason
                    })
                    .unwrap_or("bad record");
                return Err(Error::corruption(
                    &path,
                    len,
                    format!(
                        "value-log record damaged ({why}) below byte {referenced}, which a table \
                         points to: the values there were durable, so this is not a torn tail \
                         (the file is kept)"
                    ),
                ));
            }
        }
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

/// The end of the furthest record of segment `n` that a live table points to; 0 when none
/// does. Only tables numbered above `n` can: segments and tables draw their numbers from one
/// counter, and a pointer reaches a table only after its segment exists. Reads every entry of
/// those tables, so recovery calls it only when a segment's scan stops before its end.
fn table_referenced_end(
    dir: &Path,
    versions: &VersionSet,
    tables: &TableCache,
    n: u64,
) -> Result<u64> {
    let mut end = 0u64;
    let v = versions.current();
    for f in v.files.iter().flatten().filter(|f| f.number > n) {
        let table_path = filename::table_path(dir, f.number);
        let mut it = crate::table::TableIter::new(tables.get(f.number)?, false);
        it.seek_to_first();
        while it.valid() {
            let kind = crate::key::kind(it.key());
            if let Some(v) = kind.and_then(|k| crate::key::blob_payload(k, it.value())) {
                let p = BlobPointer::decode(v)
                    .ok_or_else(|| Error::corruption(&table_path, 0, "malformed value pointer"))?;
                if p.file == n {
                    end = end.max(p.end());
                }
            }
            it.next();
        }
        it.status()?;
    }
    Ok(end)
}

/// Writes a memtable to table file `number`; None when it is empty. Versions shadowed by a newer
/// version of the same key that every snapshot sees (`<= smallest_snapshot`) are dropped, as in
/// compaction; tombstones are kept (older levels may hold the key).
pub(super) fn write_level0(
    env: &dyn Env,
    dir: &Path,
    opts: &Options,
    number: u64,
    mem: Arc<MemTable>,
    smallest_snapshot: u64,
    blob_garbage: &mut BTreeMap<u64, u64>,
) -> Result<Option<FileMeta>> {
    let ranges = mem.range_dels();
    let mut it = MemTableIter::new(mem);
    it.seek_to_first();
    if !it.valid() && ranges.is_none() {
        return Ok(None);
    }
    let path = filename::table_path(dir, number);
    // Operands fold only where no range tombstone of this memtable could split a run.
    let fold = ranges.is_none();
    let r = build_level0(
        env,
        &path,
        opts,
        &mut it,
        smallest_snapshot,
        fold,
        blob_garbage,
    )
    .and_then(|b| crate::version::ranges::finish_with_tombstones(number, b, ranges.as_deref()));
    if r.is_err() {
        // A partial table (a full disk, an I/O error) is named by no manifest: remove it now
        // rather than leave it filling the disk until the next successful open.
        let _ = env.remove_file(&path);
    }
    r.map(Some)
}

/// Writes the memtable entries under `it` as table `number` at `path`. With `fold`, adjacent
/// merge operands of a key that every snapshot sees are combined into one operand (the
/// operator's `partial_merge`) at the newest one's sequence.
pub(super) fn build_level0(
    env: &dyn Env,
    path: &Path,
    opts: &Options,
    it: &mut MemTableIter,
    smallest_snapshot: u64,
    fold: bool,
    blob_garbage: &mut BTreeMap<u64, u64>,
) -> Result<TableBuilder> {
    use crate::key::ValueKind;
    let mut b = TableBuilder::new(env.new_writable(path)?, TableBuilderOptions::from(opts));
    let mut last_user_key: Vec<u8> = Vec::new();
    let mut last_seq_for_key = u64::MAX;
    let mut first = true;
    let op = opts.merge_operator.as_deref().filter(|_| fold);
    // Operands of `last_user_key` held for folding: (internal key, operand), newest first.
    let mut run: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    while it.valid() {
        let ikey = it.key();
        let uk = crate::key::user_key(ikey);
        let new_key = first || uk != last_user_key.as_slice();
        let kind = crate::key::kind(ikey);
        let foldable = op.is_some()
            && kind == Some(ValueKind::Merge)
            && crate::key::sequence(ikey) <= smallest_snapshot;
        if !run.is_empty() {
            if !new_key && foldable {
                run.push((ikey.to_vec(), it.value().to_vec()));
                it.next();
                continue;
            }
            add_run(&mut b, op, &last_user_key, &mut run)?;
        }
        if new_key {
            last_user_key.clear();
            last_user_key.extend_from_slice(uk);
            last_seq_for_key = u64::MAX;
            first = false;
        }
        if last_seq_for_key > smallest_snapshot && foldable {
            run.push((ikey.to_vec(), it.value().to_vec()));
        } else if last_seq_for_key > smallest_snapshot {
            b.add(ikey, it.value())?;
        } else if let Some(v) =
            crate::key::kind(ikey).and_then(|k| crate::key::blob_payload(k, it.value()))
        {
            if let Some(p) = BlobPointer::decode(v) {
                *blob_garbage.entry(p.file).or_default() += u64::from(p.len);
            }
        }
        // A merge operand shadows nothing: the versions below it are its base.
        if crate::key::kind(ikey) != Some(crate::key::ValueKind::Merge) {
            last_seq_for_key = crate::key::sequence(ikey);
        }
        it.next();
    }
    add_run(&mut b, op, &last_user_key, &mut run)?;
    Ok(b)
}

/// Adds a run of one key's operands (newest first): one operand at the newest one's sequence
/// when the operator combines them, else each as it is. Empties `run`.
fn add_run(
    b: &mut TableBuilder,
    op: Option<&dyn crate::merge::MergeOperator>,
    user_key: &[u8],
    run: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<()> {
    let combined = match (op, run.len()) {
        (Some(op), n) if n >= 2 => {
            let oldest_first: Vec<&[u8]> = run.iter().rev().map(|(_, v)| v.as_slice()).collect();
            op.partial_merge(user_key, &oldest_first)
        }
        _ => None,
    };
    match (combined, run.first()) {
        (Some(v), Some((newest, _))) => b.add(newest, &v)?,
        _ => {
            for (k, v) in run.iter() {
                b.add(k, v)?;
            }
        }
    }
    run.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The thread's own nice value (Linux).
    #[cfg(target_os = "linux")]
    fn thread_nice() -> i32 {
        // SAFETY: plain system calls on the calling thread's own id.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::getpriority(libc::PRIO_PROCESS, tid)
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn lowering_a_thread_raises_its_nice_and_leaves_the_spawner_alone() {
        let before = thread_nice();
        let (base, after) = std::thread::spawn(|| {
            let base = thread_nice();
            super::lower_thread_priority(3);
            (base, thread_nice())
        })
        .join()
        .unwrap();
        assert_eq!(after, (base + 3).min(19));
        assert_eq!(thread_nice(), before);
        let unchanged = std::thread::spawn(|| {
            let base = thread_nice();
            super::lower_thread_priority(0);
            thread_nice() - base
        })
        .join()
        .unwrap();
        assert_eq!(unchanged, 0);
    }
}
