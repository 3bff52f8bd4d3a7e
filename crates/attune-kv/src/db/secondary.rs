//! Secondary instances: a handle that reads a database another process writes (RocksDB's
//! `OpenAsSecondary`), and catches up with that writer when asked ([`DB::try_catch_up`]).
//!
//! A secondary takes no lock and writes nothing (it is a read-only open: `ReadOnlyEnv`, no
//! background thread). It keeps a [`Follower`]: its own copy of the version set, the offset in
//! the manifest up to which records are applied, and per write-ahead log the offset up to which
//! records are replayed into its memtable. A catch-up is passes of three steps, repeated until
//! one pass sees the manifest unchanged at its end:
//!
//! 1. apply the manifest's whole records since the last pass (a whole new manifest when CURRENT
//!    names another one); a torn tail ends the step and is read next time;
//! 2. open every table of the resulting version (the table cache keeps them open, so a table the
//!    writer deletes later stays readable through its descriptor or map);
//! 3. replay the logs the manifest does not account for, from where the last pass stopped (a new
//!    memtable when the manifest's log number moved: a flush put the old one in a table).
//!
//! Then every value-log segment the version lists is opened (or reopened when it grew), and the
//! new state is published: sequence first, then the super-version, so that no reader pairs the
//! new version with the old sequence (the writer's compactions may have dropped versions of keys
//! older than its newest). A file the manifest names but the directory lacks means the writer
//! moved on while the pass ran: the next pass reads the newer manifest. After
//! [`MAX_PASSES`] such passes the catch-up fails and leaves the last published state as it was.
//!
//! Invariants: readers see the writer's state at one moment (tables and logs of one manifest
//! state, the logs read to a record boundary); only whole records of the manifest and the logs
//! are applied. Thread safety: catch-ups are serialised by the follower's mutex; readers never
//! wait for one.

use super::{BlobSet, DbInner, DB};
use crate::batch::WriteBatch;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::util::filename::{self, FileKind};
use crate::version::{TableCache, VersionSet};
use crate::vlog::BlobFile;
use crate::wal::LogReader;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Passes a catch-up (or a secondary open) makes before it gives up on a writer that keeps
/// removing the files it is about to read.
pub const MAX_PASSES: u32 = 16;

/// What a catch-up advanced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// The last sequence readers saw before the catch-up.
    pub sequence_before: u64,
    /// The last sequence readers see now.
    pub sequence_after: u64,
    /// Manifest records applied.
    pub manifest_records: u64,
    /// Write-ahead-log records (write batches) replayed.
    pub wal_records: u64,
    /// Passes it took (more than one when the writer removed files while it read).
    pub passes: u32,
}

/// Why a pass stopped early: the writer moved on (a file it names is gone).
enum Pass {
    Done,
    MovedOn(String),
}

/// A secondary's view of the writer: see the module documentation.
pub(crate) struct Follower {
    env: Arc<dyn Env>,
    dir: PathBuf,
    versions: VersionSet,
    /// Offset of the first manifest byte not applied (0: none read yet).
    manifest_offset: u64,
    /// Per log (numbers at or above the manifest's log number), the offset of the first byte
    /// not replayed.
    logs: BTreeMap<u64, u64>,
    mem: Arc<MemTable>,
    /// The manifest log number `mem` was rebuilt for (None before the first pass).
    mem_log_number: Option<u64>,
    max_seq: u64,
    /// Tables this follower opened, to close those no live version lists.
    opened: HashSet<u64>,
    /// Counters of the catch-up in progress.
    manifest_records: u64,
    wal_records: u64,
    passes: u32,
}

impl Follower {
    /// Follows the writer of `dir` up to now: the state a secondary opens with. Returns the
    /// follower and the value-log segments, opened.
    pub(crate) fn start(
        env: Arc<dyn Env>,
        dir: &Path,
        tables: &TableCache,
    ) -> Result<(Follower, BlobSet)> {
        let mut f = Follower {
            versions: VersionSet::new(env.clone(), dir.to_path_buf()),
            env,
            dir: dir.to_path_buf(),
            manifest_offset: 0,
            logs: BTreeMap::new(),
            mem: Arc::new(MemTable::new(0)),
            mem_log_number: None,
            max_seq: 0,
            opened: HashSet::new(),
            manifest_records: 0,
            wal_records: 0,
            passes: 0,
        };
        let blobs = f.advance(tables, &Arc::new(BTreeMap::new()))?;
        Ok((f, blobs))
    }

    pub(crate) fn versions(&self) -> &VersionSet {
        &self.versions
    }

    pub(crate) fn mem(&self) -> Arc<MemTable> {
        self.mem.clone()
    }

    pub(crate) fn max_seq(&self) -> u64 {
        self.max_seq
    }

    /// Passes until one ends with the manifest unchanged; returns the segments to publish.
    fn advance(&mut self, tables: &TableCache, old_blobs: &BlobSet) -> Result<BlobSet> {
        let mut why = String::new();
        for pass in 1..=MAX_PASSES {
            self.passes = pass;
            match self.pass(tables)? {
                Pass::MovedOn(w) => {
                    why = w;
                    continue;
                }
                Pass::Done => {}
            }
            // The logs were read against this manifest state: if the manifest is still where
            // the pass left it, no log the pass read was retired meanwhile.
            match self.follow_manifest()? {
                (Pass::Done, 0) => {}
                (Pass::Done, _) => continue,
                (Pass::MovedOn(w), _) => {
                    why = w;
                    continue;
                }
            }
            match self.open_blobs(old_blobs)? {
                (Pass::Done, Some(b)) => return Ok(b),
                (Pass::MovedOn(w), _) => why = w,
                (Pass::Done, None) => unreachable!("a finished pass returns the segments"),
            }
        }
        Err(Error::io(
            "catch up with the writer of",
            &self.dir,
            std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                format!(
                    "the writer removed files this secondary was about to read in {MAX_PASSES} \
                     passes in a row (last: {why}); the last state stays readable: call \
                     try_catch_up() again"
                ),
            ),
        ))
    }

    /// One pass: manifest, tables, logs.
    fn pass(&mut self, tables: &TableCache) -> Result<Pass> {
        if let (p @ Pass::MovedOn(_), _) = self.follow_manifest()? {
            return Ok(p);
        }
        if let p @ Pass::MovedOn(_) = self.open_tables(tables)? {
            return Ok(p);
        }
        self.replay_logs()
    }

    /// Applies the manifest's new whole records; also returns how many it applied.
    fn follow_manifest(&mut self) -> Result<(Pass, u64)> {
        let cur_path = filename::current_path(&self.dir);
        let cur = match self.env.read_all(&cur_path) {
            Ok(c) => c,
            Err(_) if !self.env.exists(&cur_path) => {
                return Err(Error::NotADatabase {
                    path: self.dir.clone(),
                    detail: "no CURRENT file (no database here, or it was removed)".into(),
                })
            }
            Err(e) => return Err(e),
        };
        let number = std::str::from_utf8(&cur)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .and_then(filename::parse)
            .and_then(|k| match k {
                FileKind::Manifest(n) => Some(n),
                _ => None,
            })
            .ok_or_else(|| Error::corruption(&cur_path, 0, "CURRENT does not name a manifest"))?;
        let mpath = self.dir.join(filename::manifest_name(number));
        if number != self.versions.manifest_number || self.manifest_offset == 0 {
            // A new manifest describes the whole state in its first record: start over.
            self.versions = VersionSet::new(self.env.clone(), self.dir.clone());
            self.manifest_offset = 0;
        }
        let data = match self.env.read_all(&mpath) {
            Ok(d) => d,
            Err(_) if !self.env.exists(&mpath) => {
                return Ok((
                    Pass::MovedOn(format!(
                        "manifest {} was replaced",
                        filename::manifest_name(number)
                    )),
                    0,
                ))
            }
            Err(e) => return Err(e),
        };
        if data.len() as u64 <= self.manifest_offset {
            return Ok((Pass::Done, 0));
        }
        let applied =
            match self
                .versions
                .follow_manifest(number, &mpath, &data, self.manifest_offset)?
            {
                Some((end, records)) => {
                    self.manifest_offset = end;
                    records
                }
                None => {
                    return Ok((
                        Pass::MovedOn("the manifest CURRENT names has no whole record yet".into()),
                        0,
                    ))
                }
            };
        self.manifest_records += applied;
        Ok((Pass::Done, applied))
    }

    /// Opens every table of the current version (kept open by the table cache).
    fn open_tables(&mut self, tables: &TableCache) -> Result<Pass> {
        let v = self.versions.current();
        for f in v.files.iter().flatten() {
            if self.opened.contains(&f.number) {
                continue;
            }
            let path = filename::table_path(&self.dir, f.number);
            match tables.get(f.number) {
                Ok(_) => {
                    self.opened.insert(f.number);
                }
                Err(_) if !self.env.exists(&path) => {
                    return Ok(Pass::MovedOn(format!(
                        "table {} was removed",
                        path.file_name().unwrap_or_default().to_string_lossy()
                    )))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Pass::Done)
    }

    /// Replays the write-ahead logs from where the last pass stopped.
    fn replay_logs(&mut self) -> Result<Pass> {
        let log_number = self.versions.log_number;
        if self.mem_log_number != Some(log_number) {
            // A flush moved the log number: the tables now hold what the old memtable had.
            self.mem = Arc::new(MemTable::new(log_number));
            self.mem_log_number = Some(log_number);
            self.logs.clear();
            self.max_seq = self.versions.last_sequence;
        }
        self.max_seq = self.max_seq.max(self.versions.last_sequence);
        let mut numbers: Vec<u64> = self
            .env
            .list_dir(&self.dir)?
            .iter()
            .filter_map(|n| match filename::parse(n) {
                Some(FileKind::Log(n)) if n >= log_number => Some(n),
                _ => None,
            })
            .collect();
        numbers.sort_unstable();
        for n in numbers {
            let path = filename::log_path(&self.dir, n);
            let from = self.logs.get(&n).copied().unwrap_or(0);
            let data = match self.env.read_from(&path, from) {
                Ok(d) => d,
                Err(_) if !self.env.exists(&path) => {
                    return Ok(Pass::MovedOn(format!(
                        "log {} was removed",
                        path.file_name().unwrap_or_default().to_string_lossy()
                    )))
                }
                Err(e) => return Err(e),
            };
            let mut reader = LogReader::new(&data, &path);
            let mut end = from;
            // A record being written is a torn tail: the reader stops before it and the next
            // catch-up starts there.
            while let Some((off, rec)) = reader.next_record()? {
                let off = from + off;
                let (seq, batch) = WriteBatch::decode_logged(&rec, &path, off)?;
                for (s, (kind, k, v)) in (seq..).zip(batch.entries_checked(&path, off)?) {
                    self.mem.add(s, kind, k, v);
                }
                if !batch.is_empty() {
                    self.max_seq = self.max_seq.max(seq + batch.len() as u64 - 1);
                }
                self.wal_records += 1;
                end = from + reader.offset();
            }
            self.logs.insert(n, end);
        }
        Ok(Pass::Done)
    }

    /// Opens the value-log segments the version lists: kept from `old` where the open handle
    /// covers a sealed segment's length, reopened where it may not (a segment opened while it
    /// was active and sealed since), opened anew otherwise.
    fn open_blobs(&mut self, old: &BlobSet) -> Result<(Pass, Option<BlobSet>)> {
        let mut set = BTreeMap::new();
        for (&n, meta) in &self.versions.blob_files {
            let f = match old.get(&n) {
                Some(f) if meta.sealed && f.open_size().is_some_and(|s| s >= meta.size) => {
                    set.insert(n, f.clone());
                    continue;
                }
                Some(f) => f.clone(),
                None => Arc::new(BlobFile::new(self.env.clone(), &self.dir, n)),
            };
            match f.open_now() {
                Ok(()) => {}
                Err(_) if !self.env.exists(f.path()) => {
                    return Ok((
                        Pass::MovedOn(format!(
                            "value-log segment {} was removed",
                            f.path().file_name().unwrap_or_default().to_string_lossy()
                        )),
                        None,
                    ))
                }
                Err(e) => return Err(e),
            }
            set.insert(n, f);
        }
        Ok((Pass::Done, Some(Arc::new(set))))
    }
}

impl DB {
    /// Whether this handle is a secondary instance (opened with `secondary`).
    pub fn is_secondary(&self) -> bool {
        self.inner.secondary.is_some()
    }

    /// Catches a secondary instance up with the writer: applies the manifest records written
    /// since the last catch-up (a whole new manifest when the writer started one), opens the
    /// new tables, replays the write-ahead-log records written since (across a switch of the
    /// log), and publishes the result at once. Reads before it returns see the previous state;
    /// reads after it see the writer's state at one moment during the call. Records the writer
    /// is still writing are left for the next call. Fails with `InvalidArgument` on a handle
    /// that is not a secondary; when the writer removes the files it is reading
    /// [`MAX_PASSES`] times in a row, fails and keeps the previous state (call it again).
    pub fn try_catch_up(&self) -> Result<CatchUp> {
        self.inner.usable()?;
        let Some(follower) = &self.inner.secondary else {
            return Err(Error::InvalidArgument(
                "try_catch_up: this handle is not a secondary instance; open with secondary=true"
                    .into(),
            ));
        };
        let mut f = follower.lock();
        f.manifest_records = 0;
        f.wal_records = 0;
        let before = self.inner.last_sequence.load(Ordering::Acquire);
        let old_blobs = self.inner.state.lock().blobs.clone();
        let blobs = f.advance(&self.inner.tables, &old_blobs)?;
        self.inner.publish(&mut f, blobs);
        let after = self.inner.last_sequence.load(Ordering::Acquire);
        Ok(CatchUp {
            sequence_before: before,
            sequence_after: after,
            manifest_records: f.manifest_records,
            wal_records: f.wal_records,
            passes: f.passes,
        })
    }
}

impl DbInner {
    /// Publishes what `f` followed: the version, the memtable, the segments, the sequence.
    fn publish(&self, f: &mut Follower, blobs: BlobSet) {
        let mut st = self.state.lock();
        st.versions.adopt(f.versions());
        st.mem = f.mem();
        st.imm = None;
        st.blobs = blobs;
        st.imm_last_sequence = f.max_seq();
        // Sequence first: a reader that takes the new super-version then finds the new
        // sequence too (one that takes the old super-version reads its state at any sequence).
        let seq = f.max_seq().max(self.last_sequence.load(Ordering::Acquire));
        self.last_sequence.store(seq, Ordering::Release);
        self.install_super_version(&st);
        let live = st.versions.live_files();
        drop(st);
        f.opened.retain(|n| {
            let keep = live.contains(n);
            if !keep {
                self.tables.evict(*n);
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::MemEnv;
    use crate::options::Options;
    use crate::version::VersionEdit;
    use crate::wal::LogWriter;

    fn opts(secondary: bool) -> Options {
        Options {
            secondary,
            wal_sync_interval_ms: 0,
            ..Options::default()
        }
    }

    fn open(env: &MemEnv, secondary: bool) -> DB {
        DB::open_with_env(Arc::new(env.clone()), Path::new("/db"), opts(secondary)).unwrap()
    }

    /// One record as the log writer frames it.
    fn framed(record: &[u8]) -> Vec<u8> {
        let scratch = MemEnv::new();
        let p = Path::new("/r");
        let mut w = LogWriter::new(scratch.new_writable(p).unwrap());
        w.add_record(record).unwrap();
        drop(w);
        scratch.read_all(p).unwrap()
    }

    fn newest(env: &MemEnv, pick: fn(FileKind) -> Option<u64>, name: fn(u64) -> String) -> PathBuf {
        let n = env
            .list_dir(Path::new("/db"))
            .unwrap()
            .iter()
            .filter_map(|f| filename::parse(f).and_then(pick))
            .max()
            .unwrap();
        Path::new("/db").join(name(n))
    }

    fn append(env: &MemEnv, path: &Path, bytes: &[u8]) {
        let mut f = env.new_appendable(path).unwrap();
        f.append(bytes).unwrap();
        f.flush().unwrap();
    }

    #[test]
    fn a_log_record_being_written_is_read_once_it_is_whole() {
        let env = MemEnv::new();
        let w = open(&env, false);
        w.put(b"a", b"1").unwrap();
        let seq = w.inner.last_sequence.load(Ordering::Acquire);
        drop(w);
        // The writer is (as if) in the middle of appending its next record to the log.
        let log = newest(
            &env,
            |k| match k {
                FileKind::Log(n) => Some(n),
                _ => None,
            },
            |n| format!("{n:06}.log"),
        );
        let mut b = WriteBatch::new();
        b.put(b"b", b"2").unwrap();
        b.set_sequence(seq + 1);
        let rec = framed(b.encoded());
        let (head, tail) = rec.split_at(rec.len() / 2);
        append(&env, &log, head);
        let s = open(&env, true);
        assert_eq!(s.get(b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(s.get(b"b").unwrap(), None);
        let c = s.try_catch_up().unwrap();
        assert_eq!((c.sequence_before, c.sequence_after), (seq, seq));
        append(&env, &log, tail);
        let c = s.try_catch_up().unwrap();
        assert_eq!((c.sequence_after, c.wal_records), (seq + 1, 1));
        assert_eq!(s.get(b"b").unwrap(), Some(b"2".to_vec()));
    }

    #[test]
    fn a_manifest_record_being_written_is_applied_once_it_is_whole() {
        let env = MemEnv::new();
        let w = open(&env, false);
        w.put(b"a", b"1").unwrap();
        w.flush().unwrap();
        drop(w);
        let manifest = newest(
            &env,
            |k| match k {
                FileKind::Manifest(n) => Some(n),
                _ => None,
            },
            filename::manifest_name,
        );
        let ikey = crate::key::make_internal_key(b"pointer", 1, crate::key::ValueKind::Value);
        let edit = VersionEdit {
            compact_pointers: vec![(3, ikey.clone())],
            ..Default::default()
        };
        let rec = framed(&edit.encode());
        let (head, tail) = rec.split_at(rec.len() - 3);
        append(&env, &manifest, head);
        let s = open(&env, true);
        let pointer = |s: &DB| s.inner.state.lock().versions.compact_pointers[3].clone();
        assert!(pointer(&s).is_empty());
        assert_eq!(s.try_catch_up().unwrap().manifest_records, 0);
        append(&env, &manifest, tail);
        assert_eq!(s.try_catch_up().unwrap().manifest_records, 1);
        assert_eq!(pointer(&s), ikey);
        assert_eq!(s.get(b"a").unwrap(), Some(b"1".to_vec()));
    }
}
