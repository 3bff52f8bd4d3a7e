//! Repair: salvages every readable record of a damaged database into one that opens, after the
//! manner of LevelDB's `RepairDB` and RocksDB's `RepairDB`.
//!
//! Nothing of the old state is trusted: the manifest and `CURRENT` are ignored and every file in
//! the directory is read on its own.
//!
//! - Tables: a table whose every block verifies is read through its iterator; otherwise its
//!   footer and index are read and each data block on its own, keeping the blocks that verify
//!   and counting the entries of the ones that do not (from the index's ordinals).
//! - Write-ahead logs: replayed up to the first damaged record (a torn tail is not damage).
//! - Value-log segments: scanned; a segment whose records all verify (a torn tail allowed) is
//!   kept and named by the new manifest, sealed at its last whole record. A value pointed into a
//!   damaged segment is read and checked on its own and, when it verifies, written inline into
//!   the new tables; the damaged segment then goes to `lost/`.
//!
//! All sources are merged by internal key (user key, then sequence, newest first), so a newer
//! version shadows an older one wherever each was found; the newest version of each key is
//! written into new tables forming the last level. A key whose newest version is a deletion
//! keeps it, and a key whose newest value was lost gets one at that value's sequence: a repair
//! interrupted after removing some old files, run again, must not find an older version in a
//! file not yet removed and bring it back (compaction drops these deletions later). A key whose
//! newest version was in a damaged block or log record is lost with it, and an older version,
//! if one survived elsewhere, reads again: the report says how many records each file lost.
//!
//! Crash safety: the new tables are written under numbers above every file present; every file
//! that lost records (and every old manifest and `CURRENT`) is then hard-linked (or copied) into
//! `lost/`; the new manifest is written and `CURRENT` replaced atomically; only then are the old
//! files removed. A repair interrupted anywhere leaves a directory that repair reads again to
//! the same result (the partial output duplicates records it reads anyway), and user data is
//! never removed before a copy of it is durable elsewhere.

use super::open::foreign_engine_in;
use crate::batch::WriteBatch;
use crate::block::format::{read_block, BlockHandle};
use crate::block::Block;
use crate::env::{create_dir_all_durable, write_file_atomic, Env, PosixEnv};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, ValueKind, EXPIRY_BYTES};
use crate::memtable::rangedel::{RangeDelSet, RangeTombstone};
use crate::memtable::{MemTable, MemTableIter};
use crate::options::Options;
use crate::table::builder::{TableBuilder, TableBuilderOptions};
use crate::table::footer::{Footer, FOOTER_BYTES};
use crate::table::{Table, TableIter};
use crate::util::coding::Reader;
use crate::util::filename::{self, current_path, manifest_name, FileKind};
use crate::version::{FileMeta, VersionEdit, BASE_FORMAT_VERSION, DB_FORMAT_VERSION, NUM_LEVELS};
use crate::vlog::{BlobFile, BlobPointer, SegmentScanner, SEGMENT_HEADER_BYTES};
use crate::wal::{LogReader, LogWriter};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::util::filename::LOST_DIR;

/// What happened to one file of the directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RepairedFile {
    /// File name inside the database directory.
    pub name: String,
    /// `table`, `wal`, `vlog`, `manifest` or `current`.
    pub kind: String,
    /// Records read from the file and carried into the merge (every version, before shadowing).
    pub records_kept: u64,
    /// Records known to be unreadable (damaged table blocks, values in damaged segments that did
    /// not verify); for a log, 1 when its replay stopped at a damaged record.
    pub records_lost: u64,
    /// Bytes of the file not read (damaged blocks, the rest of a log after damage).
    pub bytes_lost: u64,
    /// True when a copy of the file was put into `lost/`.
    pub moved_to_lost: bool,
    /// Why something was lost, when it was.
    pub error: Option<String>,
}

/// What [`repair`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RepairReport {
    /// Every file read, in name order.
    pub files: Vec<RepairedFile>,
    /// Live keys in the repaired database: keys whose newest version is a value that is not
    /// covered by a range deletion and not expired (what an iteration of it yields, at the time
    /// of the repair).
    pub keys: u64,
    /// Keys whose newest version is a deletion: a point deletion, a value covered by a range
    /// deletion, an expired value or a lost value (see `values_lost`). They are written so that
    /// they stay deleted, and are not counted in `keys`.
    pub keys_deleted: u64,
    /// Keys whose newest version was a separated value that no longer verifies (written as
    /// deletions: the key is absent).
    pub values_lost: u64,
    /// Values taken from a damaged segment and written inline into the new tables.
    pub values_inlined: u64,
    /// Tables written.
    pub tables_written: u64,
    /// Value-log segments kept.
    pub segments_kept: u64,
    /// The largest sequence number found: the repaired database continues after it.
    pub last_sequence: u64,
    /// Files copied into `lost/`.
    pub files_moved_to_lost: u64,
}

impl RepairReport {
    /// True when no record was lost: every table, log and segment read whole (the old
    /// manifest and `CURRENT`, always kept in `lost/`, do not count).
    pub fn clean(&self) -> bool {
        self.values_lost == 0
            && self.files.iter().all(|f| {
                matches!(f.kind.as_str(), "manifest" | "current")
                    || (f.records_lost == 0 && f.bytes_lost == 0 && !f.moved_to_lost)
            })
    }
}

/// Repairs the database in `path` on the real file system (see the module docs). The directory
/// must exist and no process may hold the database open.
pub fn repair(path: impl AsRef<Path>, opts: Options) -> Result<RepairReport> {
    repair_with_env(Arc::new(PosixEnv::new()), path.as_ref(), opts)
}

/// [`repair`] through a given environment (tests use `MemEnv` and fault plans).
pub fn repair_with_env(env: Arc<dyn Env>, dir: &Path, opts: Options) -> Result<RepairReport> {
    if dir.as_os_str().is_empty() {
        return Err(Error::InvalidArgument(
            "path is empty; give the directory of the database to repair".into(),
        ));
    }
    let opts = opts.sanitized()?;
    if opts.read_only {
        return Err(Error::InvalidArgument(
            "read_only: repair writes the database; open it without read_only".into(),
        ));
    }
    let names = env.list_dir(dir).map_err(|_| {
        Error::InvalidArgument(format!(
            "path {} is not a directory that exists; give the directory of a database",
            dir.display()
        ))
    })?;
    if !env.exists(dir) {
        return Err(Error::InvalidArgument(format!(
            "path {} does not exist; give the directory of a database",
            dir.display()
        )));
    }
    let ours = names.iter().any(|n| {
        matches!(
            filename::parse(n),
            Some(
                FileKind::Current
                    | FileKind::Manifest(_)
                    | FileKind::Log(_)
                    | FileKind::Table(_)
                    | FileKind::Blob(_)
            )
        )
    });
    if !ours && names.iter().any(|n| n == "manifest.plush") {
        return Err(Error::InvalidArgument(format!(
            "path {} is an Attune hash database (manifest.plush found), not an LSM one: repair \
             works on attune.DB databases; HashDB's open and verify() check its files",
            dir.display()
        )));
    }
    if !ours {
        return Err(Error::InvalidArgument(format!(
            "path {} holds no database files (no CURRENT, manifest, log, table or value-log \
             segment); give the directory of a database",
            dir.display()
        )));
    }
    if let Some(what) = foreign_engine_in(env.as_ref(), dir) {
        return Err(Error::InvalidArgument(format!(
            "path {} holds {what}, not an Attune database; repair only repairs Attune's",
            dir.display()
        )));
    }
    let _lock = env.lock(&filename::lock_path(dir))?;
    Repairer {
        env,
        dir: dir.to_path_buf(),
        opts,
        report: RepairReport::default(),
        range_dels: Vec::new(),
    }
    .run(names)
}

struct Repairer {
    env: Arc<dyn Env>,
    dir: PathBuf,
    opts: Options,
    report: RepairReport,
    /// Range tombstones read from tables and logs; every one is written out again.
    range_dels: Vec<RangeTombstone>,
}

/// A value-log segment as the scan found it.
struct Segment {
    /// Length up to the end of the last whole record.
    valid_len: u64,
    /// True when the segment may be kept (header good, no damage before valid records).
    clean: bool,
    /// Bytes of records the new tables point to.
    live: u64,
    /// Index into `report.files`.
    file: usize,
}

impl Repairer {
    fn file_entry(&mut self, name: &str, kind: &str) -> usize {
        self.report.files.push(RepairedFile {
            name: name.to_string(),
            kind: kind.to_string(),
            ..Default::default()
        });
        self.report.files.len() - 1
    }

    fn run(mut self, mut names: Vec<String>) -> Result<RepairReport> {
        names.sort();
        let mut max_number = 1u64;
        let (mut tables, mut logs, mut blobs, mut manifests, mut caches) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut has_current = false;
        for name in &names {
            match filename::parse(name) {
                Some(FileKind::Table(n)) => tables.push((n, name.clone())),
                Some(FileKind::Log(n)) => logs.push((n, name.clone())),
                Some(FileKind::Blob(n)) => blobs.push((n, name.clone())),
                Some(FileKind::Manifest(n)) => manifests.push((n, name.clone())),
                Some(FileKind::Model(n)) => caches.push((n, name.clone())),
                Some(FileKind::LevelModel(_)) => caches.push((0, name.clone())),
                Some(FileKind::Current) => has_current = true,
                _ if name == "ANALYZER" => caches.push((0, name.clone())),
                _ => {}
            }
        }
        for (n, _) in tables.iter().chain(&logs).chain(&blobs).chain(&manifests) {
            max_number = max_number.max(*n);
        }
        tables.sort();
        logs.sort();
        blobs.sort();

        // Value-log segments first: which may be kept as they are.
        let mut segments: BTreeMap<u64, Segment> = BTreeMap::new();
        for (n, name) in &blobs {
            let file = self.file_entry(name, "vlog");
            let path = self.dir.join(name);
            let data = self.env.read_all(&path)?;
            let seg = match SegmentScanner::new(&path, &data) {
                Ok(mut scan) => {
                    let mut records = 0u64;
                    for _ in scan.by_ref() {
                        records += 1;
                    }
                    let valid_len = scan.valid_len();
                    let clean = !crate::vlog::damaged_in_middle(&data, valid_len);
                    self.report.files[file].records_kept = records;
                    if !clean {
                        self.report.files[file].bytes_lost = data.len() as u64 - valid_len;
                        self.report.files[file].error = Some(format!(
                            "record at byte {valid_len} damaged ({}) with records after it",
                            scan.stop_reason.unwrap_or("bad record")
                        ));
                    }
                    Segment {
                        valid_len,
                        clean,
                        live: 0,
                        file,
                    }
                }
                Err(e) => {
                    self.report.files[file].bytes_lost = data.len() as u64;
                    self.report.files[file].error = Some(e.to_string());
                    Segment {
                        valid_len: 0,
                        clean: false,
                        live: 0,
                        file,
                    }
                }
            };
            segments.insert(*n, seg);
        }

        let cache = Arc::new(crate::cache::BlockCache::new(8 << 20));
        let mut sources: Vec<Box<dyn InternalIterator>> = Vec::new();
        let mut max_seq = 0u64;
        for (n, name) in &tables {
            let file = self.file_entry(name, "table");
            if let Some(src) = self.read_table(*n, name, file, &cache, &mut max_seq)? {
                sources.push(src);
            }
        }
        let wal = Arc::new(MemTable::new(0));
        for (_, name) in &logs {
            let file = self.file_entry(name, "wal");
            self.read_log(name, file, &wal, &mut max_seq)?;
        }
        if let Some(r) = wal.range_dels() {
            self.range_dels.extend_from_slice(r.tombstones());
        }
        // A tombstone may be the newest write: reads must start at or above its sequence.
        max_seq = self
            .range_dels
            .iter()
            .map(|t| t.seq)
            .fold(max_seq, u64::max);
        sources.push(Box::new(MemTableIter::new(wal)));
        self.report.last_sequence = max_seq;

        // Merge and write the newest version of every key.
        let mut next_number = max_number + 1;
        let mut outputs: Vec<FileMeta> = Vec::new();
        let written = self.write_tables(sources, &mut segments, &mut next_number, &mut outputs);
        if let Err(e) = written {
            for f in &outputs {
                let _ = self
                    .env
                    .remove_file(&filename::table_path(&self.dir, f.number));
            }
            return Err(e);
        }
        self.env.sync_dir(&self.dir)?;

        // Copies of everything that lost records, and of the old manifests, into lost/.
        for (n, seg) in &segments {
            if !seg.clean {
                let f = &mut self.report.files[seg.file];
                f.error
                    .get_or_insert_with(|| format!("segment {n:06}.vlog damaged"));
            }
        }
        let to_lost: Vec<usize> = (0..self.report.files.len())
            .filter(|&i| {
                let f = &self.report.files[i];
                f.records_lost > 0 || f.bytes_lost > 0 || f.error.is_some()
            })
            .collect();
        let mut old_meta: Vec<String> = manifests.iter().map(|(_, n)| n.clone()).collect();
        if has_current {
            old_meta.push("CURRENT".to_string());
        }
        if !to_lost.is_empty() || !old_meta.is_empty() {
            let lost = self.dir.join(LOST_DIR);
            create_dir_all_durable(self.env.as_ref(), &lost)?;
            for &i in &to_lost {
                let name = self.report.files[i].name.clone();
                self.preserve(&name)?;
                self.report.files[i].moved_to_lost = true;
                self.report.files_moved_to_lost += 1;
            }
            for name in &old_meta {
                let i = self.file_entry(
                    name,
                    if name == "CURRENT" {
                        "current"
                    } else {
                        "manifest"
                    },
                );
                self.preserve(name)?;
                self.report.files[i].moved_to_lost = true;
                self.report.files_moved_to_lost += 1;
            }
            self.env.sync_dir(&lost)?;
        }

        // The merge operator: the one given, else the last one an old manifest names (read as
        // far as it reads; a damaged one names none).
        let merge_operator = match &self.opts.merge_operator {
            Some(op) => Some(op.name().to_string()),
            None => manifests.iter().rev().find_map(|(_, name)| {
                let path = self.dir.join(name);
                let data = self.env.read_all(&path).ok()?;
                let mut reader = crate::wal::LogReader::new(&data, &path);
                let mut found = None;
                while let Ok(Some((_, rec))) = reader.next_record() {
                    if let Some(n) = VersionEdit::decode(&rec).and_then(|e| e.merge_operator) {
                        found = Some(n);
                    }
                }
                found
            }),
        };
        // The new manifest, then CURRENT.
        let manifest_number = next_number;
        next_number += 1;
        let log_number = next_number;
        next_number += 1;
        let mut edit = VersionEdit {
            format_version: Some(if merge_operator.is_some() {
                crate::version::MERGE_FORMAT_VERSION
            } else if self.range_dels.is_empty() {
                BASE_FORMAT_VERSION
            } else {
                DB_FORMAT_VERSION
            }),
            log_number: Some(log_number),
            next_file_number: Some(next_number),
            last_sequence: Some(max_seq),
            merge_operator,
            ..Default::default()
        };
        for f in &outputs {
            edit.add_file(NUM_LEVELS - 1, f.clone());
        }
        for (n, seg) in &segments {
            if seg.clean {
                edit.blob_files_added.push(*n);
                edit.blob_files_sealed.push((*n, seg.valid_len));
                let garbage = seg
                    .valid_len
                    .saturating_sub(SEGMENT_HEADER_BYTES)
                    .saturating_sub(seg.live);
                if garbage > 0 {
                    edit.blob_garbage.push((*n, garbage));
                }
                self.report.segments_kept += 1;
            }
        }
        let mpath = self.dir.join(manifest_name(manifest_number));
        let mut w = LogWriter::new(self.env.new_writable(&mpath)?);
        w.add_record(&edit.encode())?;
        w.sync()?;
        drop(w);
        write_file_atomic(
            self.env.as_ref(),
            &current_path(&self.dir),
            format!("{}\n", manifest_name(manifest_number)).as_bytes(),
        )?;

        // The old files: their records are in the new tables, or a copy is in lost/.
        for (_, name) in tables.iter().chain(&logs).chain(&manifests).chain(&caches) {
            let _ = self.env.remove_file(&self.dir.join(name));
        }
        for (n, seg) in &segments {
            if !seg.clean {
                let _ = self.env.remove_file(&filename::blob_path(&self.dir, *n));
            }
        }
        // The last clean close's record names writes the repair may have given up: the new
        // manifest is the history now.
        super::clean_close::CleanClose::remove(self.env.as_ref(), &self.dir);
        self.env.sync_dir(&self.dir)?;
        self.report.tables_written = outputs.len() as u64;
        self.report.files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(self.report)
    }

    /// Hard-links (or copies) `name` into `lost/`, under a name not taken there yet.
    fn preserve(&self, name: &str) -> Result<()> {
        let from = self.dir.join(name);
        let to = crate::env::unused_path(&*self.env, &self.dir.join(LOST_DIR), name);
        if !self.env.link_file(&from, &to)? {
            let data = self.env.read_all(&from)?;
            let mut w = self.env.new_writable(&to)?;
            w.append(&data)?;
            w.sync()?;
        }
        Ok(())
    }

    /// A source for table `n`: its iterator when every block verifies, else a memtable of the
    /// entries of the blocks that do (None when nothing is readable).
    fn read_table(
        &mut self,
        n: u64,
        name: &str,
        file: usize,
        cache: &Arc<crate::cache::BlockCache>,
        max_seq: &mut u64,
    ) -> Result<Option<Box<dyn InternalIterator>>> {
        let path = self.dir.join(name);
        let raf = self.env.open_random(&path)?;
        let whole = Table::open(raf.clone(), path.clone(), n, cache.clone()).and_then(|t| {
            let t = Arc::new(t);
            let mut seq = 0u64;
            let count = t.verify_entries(&mut |k, _, _| {
                seq = seq.max(key::sequence(k));
                Ok(())
            })?;
            Ok((t, count, seq))
        });
        match whole {
            Ok((t, count, seq)) => {
                *max_seq = (*max_seq).max(seq);
                self.report.files[file].records_kept = count;
                self.range_dels.extend_from_slice(t.range_tombstones());
                Ok(Some(Box::new(TableIter::new(t, false))))
            }
            Err(e) => {
                // Its range tombstones, if the meta blocks still read.
                if let Ok(t) = Table::open(raf.clone(), path.clone(), n, cache.clone()) {
                    self.range_dels.extend_from_slice(t.range_tombstones());
                }
                self.report.files[file].error = Some(e.to_string());
                let mem = MemTable::new(0);
                let f = &mut self.report.files[file];
                salvage_table(raf.as_ref(), &path, &mem, f, max_seq);
                if mem.is_empty() {
                    return Ok(None);
                }
                Ok(Some(Box::new(MemTableIter::new(Arc::new(mem)))))
            }
        }
    }

    /// Replays log `name` into `mem` up to its first damaged record.
    fn read_log(
        &mut self,
        name: &str,
        file: usize,
        mem: &MemTable,
        max_seq: &mut u64,
    ) -> Result<()> {
        let path = self.dir.join(name);
        let data = self.env.read_all(&path)?;
        let mut reader = LogReader::new(&data, &path);
        let f = &mut self.report.files[file];
        loop {
            let (off, rec) = match reader.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    f.records_lost += 1;
                    f.bytes_lost = data.len() as u64 - reader.offset().min(data.len() as u64);
                    f.error = Some(e.to_string());
                    break;
                }
            };
            let decoded = WriteBatch::decode(&rec).and_then(|(seq, b)| {
                let items: Option<Vec<_>> = b
                    .iter()
                    .map(|i| i.map(|(k, uk, v)| (k, uk.to_vec(), v.to_vec())))
                    .collect();
                Some((seq, items?))
            });
            let Some((seq, items)) = decoded else {
                f.records_lost += 1;
                f.bytes_lost = data.len() as u64 - off;
                f.error = Some(format!("malformed write batch at byte {off}"));
                break;
            };
            for (i, (kind, k, v)) in items.into_iter().enumerate() {
                let s = seq + i as u64;
                mem.add(s, kind, &k, &v);
                *max_seq = (*max_seq).max(s);
                f.records_kept += 1;
            }
        }
        Ok(())
    }

    /// Adds one entry to the table being written, starting a table when none is and finishing
    /// it at the target size.
    fn write_entry(
        &self,
        ikey: &[u8],
        value: &[u8],
        next_number: &mut u64,
        outputs: &mut Vec<FileMeta>,
        builder: &mut Option<(u64, TableBuilder)>,
    ) -> Result<()> {
        if builder.is_none() {
            let n = *next_number;
            *next_number += 1;
            let w = self.env.new_writable(&filename::table_path(&self.dir, n))?;
            *builder = Some((
                n,
                TableBuilder::new(w, TableBuilderOptions::from(&self.opts)),
            ));
        }
        let Some((_, b)) = builder.as_mut() else {
            unreachable!("a builder was just made")
        };
        b.add(ikey, value)?;
        if b.file_size_estimate() >= self.opts.target_file_size {
            if let Some((n, b)) = builder.take() {
                outputs.push(FileMeta::finish(n, b)?);
            }
        }
        Ok(())
    }

    /// Merges `sources` and writes the newest version of every key into new tables.
    fn write_tables(
        &mut self,
        sources: Vec<Box<dyn InternalIterator>>,
        segments: &mut BTreeMap<u64, Segment>,
        next_number: &mut u64,
        outputs: &mut Vec<FileMeta>,
    ) -> Result<()> {
        let mut it = MergingIterator::new(sources);
        it.seek_to_first();
        let mut builder: Option<(u64, TableBuilder)> = None;
        // Every range tombstone goes into the first table (a deletion is never dropped here,
        // see the module docs); a database of tombstones only gets a table of them.
        let ranges = RangeDelSet::new(std::mem::take(&mut self.range_dels));
        if !ranges.is_empty() {
            let n = *next_number;
            *next_number += 1;
            let w = self.env.new_writable(&filename::table_path(&self.dir, n))?;
            let mut b = TableBuilder::new(w, TableBuilderOptions::from(&self.opts));
            for t in ranges.tombstones() {
                b.add_range_tombstone(t.clone());
            }
            builder = Some((n, b));
        }
        let mut last_user: Option<Vec<u8>> = None;
        let mut blob_files: HashMap<u64, BlobFile> = HashMap::new();
        let mut inline_buf = Vec::new();
        // Live keys are counted at this time: an entry expired by now reads as deleted.
        let now_ms = self.env.now_unix_millis();
        while it.valid() {
            let ikey = it.key();
            let uk = key::user_key(ikey);
            if last_user.as_deref() == Some(uk) {
                it.next();
                continue;
            }
            last_user = Some(uk.to_vec());
            let Some(kind) = key::kind(ikey) else {
                it.next();
                continue;
            };
            let mut out_key: Option<Vec<u8>> = None;
            // Deletions are written too, and a lost value becomes one (see the module docs).
            let mut deleted = false;
            let value: &[u8] = match kind {
                ValueKind::Deletion => {
                    deleted = true;
                    &[]
                }
                k if k.is_blob() => {
                    let (expiry, payload) = key::split_expiry(k, it.value()).unwrap_or((None, &[]));
                    let Some(p) = BlobPointer::decode(payload) else {
                        self.report.values_lost += 1;
                        self.report.keys_deleted += 1;
                        let gone =
                            key::make_internal_key(uk, key::sequence(ikey), ValueKind::Deletion);
                        self.write_entry(&gone, &[], next_number, outputs, &mut builder)?;
                        it.next();
                        continue;
                    };
                    let seg = segments.get_mut(&p.file);
                    let bf = blob_files
                        .entry(p.file)
                        .or_insert_with(|| BlobFile::new(self.env.clone(), &self.dir, p.file));
                    let read = match &seg {
                        Some(_) => bf.read(&p, uk),
                        None => Err(Error::corruption(bf.path(), 0, "segment missing")),
                    };
                    match (seg, read) {
                        (Some(s), Ok(_)) if s.clean && p.end() <= s.valid_len => {
                            s.live += u64::from(p.len);
                            it.value()
                        }
                        (_, Ok(v)) => {
                            // A value in a damaged segment that still verifies: inline it.
                            self.report.values_inlined += 1;
                            inline_buf.clear();
                            let kind = match expiry {
                                Some(at) => {
                                    inline_buf.extend_from_slice(&at.to_le_bytes());
                                    ValueKind::ExpiringValue
                                }
                                None => ValueKind::Value,
                            };
                            debug_assert_eq!(inline_buf.len(), expiry.map_or(0, |_| EXPIRY_BYTES));
                            inline_buf.extend_from_slice(&v);
                            out_key = Some(key::make_internal_key(uk, key::sequence(ikey), kind));
                            &inline_buf
                        }
                        (seg, Err(e)) => {
                            self.report.values_lost += 1;
                            if let Some(s) = seg {
                                let f = &mut self.report.files[s.file];
                                f.records_lost += 1;
                                f.error.get_or_insert_with(|| e.to_string());
                            }
                            deleted = true;
                            out_key = Some(key::make_internal_key(
                                uk,
                                key::sequence(ikey),
                                ValueKind::Deletion,
                            ));
                            &[]
                        }
                    }
                }
                _ => it.value(),
            };
            let ikey = out_key.as_deref().unwrap_or(ikey);
            let live = !deleted
                && !ranges.covers(uk, key::sequence(ikey), u64::MAX)
                && key::kind(ikey)
                    .and_then(|k| key::split_expiry(k, value))
                    .is_none_or(|(expiry, _)| expiry.is_none_or(|at| at > now_ms));
            self.write_entry(ikey, value, next_number, outputs, &mut builder)?;
            if live {
                self.report.keys += 1;
            } else {
                self.report.keys_deleted += 1;
            }
            it.next();
        }
        it.status()?;
        if let Some((n, b)) = builder.take() {
            let empty = b.num_entries() == 0;
            let mut f = FileMeta::finish(n, b)?;
            if empty {
                (f.smallest, f.largest) = crate::version::ranges::span(ranges.tombstones());
            }
            outputs.push(f);
        }
        self.range_dels = ranges.tombstones().to_vec();
        Ok(())
    }
}

/// Reads what can be read of a table that does not verify whole: the footer and index, then
/// each data block on its own. Entries go into `mem`; `f` counts what was kept and lost.
fn salvage_table(
    file: &dyn crate::env::RandomAccessFile,
    path: &Path,
    mem: &MemTable,
    f: &mut RepairedFile,
    max_seq: &mut u64,
) {
    let size = file.size();
    let index = (|| -> Result<Block> {
        if size < FOOTER_BYTES as u64 {
            return Err(Error::corruption(path, 0, "too short for a table"));
        }
        let mut fbuf = vec![0u8; FOOTER_BYTES];
        let foff = size - FOOTER_BYTES as u64;
        file.read_exact_at(&mut fbuf, foff)?;
        let footer = Footer::decode(&fbuf, path, foff)?;
        let data = read_block(file, footer.index, path)?;
        Block::new(data, Arc::new(path.to_path_buf()), footer.index.offset)
    })();
    let index = match index {
        Ok(i) => i,
        Err(e) => {
            // Without the index no block can be found: the whole file is lost.
            f.bytes_lost = size;
            f.error = Some(format!("footer or index unreadable: {e}"));
            return;
        }
    };
    let handles: Vec<Option<(BlockHandle, u64)>> = (0..index.len())
        .map(|i| {
            index.entry(i).and_then(|(_, v)| {
                let mut r = Reader::new(v);
                let h = BlockHandle::decode_from(&mut r)?;
                Some((h, r.varint64()?))
            })
        })
        .collect();
    let shared = Arc::new(path.to_path_buf());
    for (i, h) in handles.iter().enumerate() {
        let Some((h, first)) = *h else {
            f.records_lost += 1;
            continue;
        };
        let next_first = handles.get(i + 1).and_then(|x| x.map(|(_, o)| o));
        let block = read_block(file, h, path).and_then(|d| Block::new(d, shared.clone(), h.offset));
        match block {
            Ok(b) => {
                let mut bad = 0u64;
                for j in 0..b.len() {
                    match b.entry(j) {
                        Some((k, v)) => match key::parse_internal_key(k) {
                            Some(pk) => {
                                mem.add(pk.sequence, pk.kind, pk.user_key, v);
                                *max_seq = (*max_seq).max(pk.sequence);
                                f.records_kept += 1;
                            }
                            None => bad += 1,
                        },
                        None => bad += 1,
                    }
                }
                f.records_lost += bad;
            }
            Err(_) => {
                f.bytes_lost += h.size;
                f.records_lost += next_first.map_or(1, |nf| nf.saturating_sub(first).max(1));
            }
        }
    }
}
