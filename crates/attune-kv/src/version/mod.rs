//! Versions: which table files make up the database at a moment, per level, and the manifest that
//! records every change as a [`VersionEdit`] (format: docs/formats/manifest.md).
//!
//! Invariants: L0 files may overlap and are ordered newest first; in every deeper level files are
//! sorted by key and their user-key ranges are disjoint (a user key never spans two files of one
//! level). A `Version` is immutable and shared (`Arc`); readers and iterators hold the version they
//! started with, and a file is deleted only when no live version lists it.
//!
//! Thread safety: `VersionSet` is owned by the database's state mutex.

pub mod compaction;
mod follow;
pub mod learn;
pub mod ranges;

use crate::cache::BlockCache;
use crate::env::{write_file_atomic, Env};
use crate::error::{Error, Result};
use crate::index::learned::{Learning, LevelModel};
use crate::iter::InternalIterator;
use crate::key::{self, compare_internal};
use crate::memtable::Lookup;
use crate::table::{Table, TableIter};
use crate::util::coding::{put_length_prefixed, put_varint32, put_varint64, Reader};
use crate::util::filename::{self, current_path, manifest_name};
use crate::wal::{LogReader, LogWriter};
use parking_lot::{Mutex, RwLock};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};

/// Number of levels.
pub const NUM_LEVELS: usize = 7;
/// Database format version written into every manifest; readers refuse newer ones.
pub const DB_FORMAT_VERSION: u32 = 2;
/// The format a database without range deletions records (readable by builds that predate
/// them); the first flush holding a range deletion records [`DB_FORMAT_VERSION`].
pub const BASE_FORMAT_VERSION: u32 = 1;
/// The format a database records once it names a merge operator (manifest tag 12; its tables
/// may hold merge operands, entry kind 6): builds that predate merge operators refuse it. It
/// includes format 2 (readers gather range tombstones).
pub const MERGE_FORMAT_VERSION: u32 = 3;
/// The newest database format this build reads.
pub const FORMAT_VERSION_MAX: u32 = MERGE_FORMAT_VERSION;

/// Metadata of one table file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMeta {
    pub number: u64,
    pub size: u64,
    /// Smallest and largest internal keys.
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub num_entries: u64,
    /// The open table, once a lookup opened it: point lookups borrow it from the version they
    /// hold instead of asking the table cache (no lock, no hash, no reference count).
    pub table: TableSlot,
}

/// A table handle cached in a [`FileMeta`] (not part of its identity: every slot compares equal).
#[derive(Clone, Default)]
pub struct TableSlot(OnceLock<Arc<Table>>);

impl PartialEq for TableSlot {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for TableSlot {}
impl std::fmt::Debug for TableSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "open" } else { "-" })
    }
}

impl FileMeta {
    /// Finishes `b`, the table file `number`, and describes it.
    pub(crate) fn finish(number: u64, b: crate::table::TableBuilder) -> Result<FileMeta> {
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

    pub fn smallest_user(&self) -> &[u8] {
        key::user_key(&self.smallest)
    }
    pub fn largest_user(&self) -> &[u8] {
        key::user_key(&self.largest)
    }
    pub fn contains_user_key(&self, uk: &[u8]) -> bool {
        uk >= self.smallest_user() && uk <= self.largest_user()
    }
}

const TAG_FORMAT_VERSION: u32 = 1;
const TAG_LOG_NUMBER: u32 = 2;
const TAG_NEXT_FILE: u32 = 3;
const TAG_LAST_SEQUENCE: u32 = 4;
const TAG_COMPACT_POINTER: u32 = 5;
const TAG_DELETED_FILE: u32 = 6;
const TAG_NEW_FILE: u32 = 7;
const TAG_BLOB_FILE_ADDED: u32 = 8;
const TAG_BLOB_FILE_SEALED: u32 = 9;
const TAG_BLOB_GARBAGE: u32 = 10;
const TAG_BLOB_FILE_DELETED: u32 = 11;
const TAG_MERGE_OPERATOR: u32 = 12;

/// What the manifest knows of a value-log segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlobFileMeta {
    /// Length of the valid records once sealed; 0 while the segment is being appended to.
    pub size: u64,
    /// Bytes of records known to be dead (their LSM entries were dropped by flush/compaction).
    pub garbage: u64,
    pub sealed: bool,
}

/// A change to the set of files (plus counters), appended to the manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionEdit {
    pub format_version: Option<u32>,
    pub log_number: Option<u64>,
    pub next_file_number: Option<u64>,
    pub last_sequence: Option<u64>,
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    pub deleted_files: Vec<(usize, u64)>,
    pub new_files: Vec<(usize, FileMeta)>,
    /// Value-log segments created (active until sealed).
    pub blob_files_added: Vec<u64>,
    /// (segment, valid length): the segment will not grow any more.
    pub blob_files_sealed: Vec<(u64, u64)>,
    /// (segment, bytes): records that became garbage.
    pub blob_garbage: Vec<(u64, u64)>,
    pub blob_files_deleted: Vec<u64>,
    /// The merge operator's name, recorded once (builds without merge operators refuse a
    /// manifest holding it as an unknown field).
    pub merge_operator: Option<String>,
}

impl VersionEdit {
    pub fn add_file(&mut self, level: usize, f: FileMeta) {
        self.new_files.push((level, f));
    }
    pub fn delete_file(&mut self, level: usize, number: u64) {
        self.deleted_files.push((level, number));
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        if let Some(x) = self.format_version {
            put_varint32(&mut v, TAG_FORMAT_VERSION);
            put_varint32(&mut v, x);
        }
        for (tag, val) in [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE, self.next_file_number),
            (TAG_LAST_SEQUENCE, self.last_sequence),
        ] {
            if let Some(x) = val {
                put_varint32(&mut v, tag);
                put_varint64(&mut v, x);
            }
        }
        for (level, k) in &self.compact_pointers {
            put_varint32(&mut v, TAG_COMPACT_POINTER);
            put_varint32(&mut v, *level as u32);
            put_length_prefixed(&mut v, k);
        }
        for (level, n) in &self.deleted_files {
            put_varint32(&mut v, TAG_DELETED_FILE);
            put_varint32(&mut v, *level as u32);
            put_varint64(&mut v, *n);
        }
        for (level, f) in &self.new_files {
            put_varint32(&mut v, TAG_NEW_FILE);
            put_varint32(&mut v, *level as u32);
            put_varint64(&mut v, f.number);
            put_varint64(&mut v, f.size);
            put_length_prefixed(&mut v, &f.smallest);
            put_length_prefixed(&mut v, &f.largest);
            put_varint64(&mut v, f.num_entries);
        }
        for n in &self.blob_files_added {
            put_varint32(&mut v, TAG_BLOB_FILE_ADDED);
            put_varint64(&mut v, *n);
        }
        for (tag, list) in [
            (TAG_BLOB_FILE_SEALED, &self.blob_files_sealed),
            (TAG_BLOB_GARBAGE, &self.blob_garbage),
        ] {
            for (n, x) in list {
                put_varint32(&mut v, tag);
                put_varint64(&mut v, *n);
                put_varint64(&mut v, *x);
            }
        }
        for n in &self.blob_files_deleted {
            put_varint32(&mut v, TAG_BLOB_FILE_DELETED);
            put_varint64(&mut v, *n);
        }
        if let Some(name) = &self.merge_operator {
            put_varint32(&mut v, TAG_MERGE_OPERATOR);
            put_length_prefixed(&mut v, name.as_bytes());
        }
        v
    }

    /// Decodes an edit; `None` on any malformed or unknown field.
    pub fn decode(b: &[u8]) -> Option<VersionEdit> {
        let mut r = Reader::new(b);
        let mut e = VersionEdit::default();
        let level = |r: &mut Reader<'_>| -> Option<usize> {
            let l = r.varint32()? as usize;
            (l < NUM_LEVELS).then_some(l)
        };
        let ikey = |r: &mut Reader<'_>| -> Option<Vec<u8>> {
            let k = r.length_prefixed()?;
            key::parse_internal_key(k)?;
            Some(k.to_vec())
        };
        while !r.is_empty() {
            match r.varint32()? {
                TAG_FORMAT_VERSION => e.format_version = Some(r.varint32()?),
                TAG_LOG_NUMBER => e.log_number = Some(r.varint64()?),
                TAG_NEXT_FILE => e.next_file_number = Some(r.varint64()?),
                TAG_LAST_SEQUENCE => e.last_sequence = Some(r.varint64()?),
                TAG_COMPACT_POINTER => {
                    let l = level(&mut r)?;
                    e.compact_pointers.push((l, ikey(&mut r)?));
                }
                TAG_DELETED_FILE => {
                    let l = level(&mut r)?;
                    e.deleted_files.push((l, r.varint64()?));
                }
                TAG_NEW_FILE => {
                    let l = level(&mut r)?;
                    let number = r.varint64()?;
                    let size = r.varint64()?;
                    let smallest = ikey(&mut r)?;
                    let largest = ikey(&mut r)?;
                    let num_entries = r.varint64()?;
                    e.new_files.push((
                        l,
                        FileMeta {
                            number,
                            size,
                            smallest,
                            largest,
                            num_entries,
                            table: Default::default(),
                        },
                    ));
                }
                TAG_BLOB_FILE_ADDED => e.blob_files_added.push(r.varint64()?),
                TAG_BLOB_FILE_SEALED => e.blob_files_sealed.push((r.varint64()?, r.varint64()?)),
                TAG_BLOB_GARBAGE => e.blob_garbage.push((r.varint64()?, r.varint64()?)),
                TAG_BLOB_FILE_DELETED => e.blob_files_deleted.push(r.varint64()?),
                TAG_MERGE_OPERATOR => {
                    let name = std::str::from_utf8(r.length_prefixed()?).ok()?;
                    e.merge_operator = Some(name.to_string());
                }
                _ => return None,
            }
        }
        Some(e)
    }
}

/// Open table readers, one per live file. Like RocksDB's default (`max_open_files = -1`) a table
/// stays open while a version lists it, so lookups never reopen files; the count is bounded by the
/// number of live files, and a table is evicted when its file is deleted. Lookups take a shared
/// lock only.
pub struct TableCache {
    env: Arc<dyn Env>,
    dir: PathBuf,
    block_cache: Arc<BlockCache>,
    tables: RwLock<HashMap<u64, Arc<Table>>>,
    /// Serialises opens so two readers do not open the same file twice.
    opening: Mutex<()>,
    learning: Option<Arc<Learning>>,
    in_place_reads: bool,
}

impl TableCache {
    pub fn new(env: Arc<dyn Env>, dir: PathBuf, block_cache: Arc<BlockCache>) -> Self {
        TableCache {
            env,
            dir,
            block_cache,
            tables: RwLock::new(HashMap::new()),
            opening: Mutex::new(()),
            learning: None,
            in_place_reads: true,
        }
    }

    /// Whether tables may serve point lookups from uncompressed blocks in place.
    pub fn with_in_place_reads(mut self, on: bool) -> Self {
        self.in_place_reads = on;
        self
    }

    /// Gives every table opened from now on the engine's learned-index state.
    pub fn with_learning(mut self, learning: Option<Arc<Learning>>) -> Self {
        self.learning = learning;
        self
    }

    pub fn learning(&self) -> Option<&Arc<Learning>> {
        self.learning.as_ref()
    }

    /// Registers the files of `v` with the analyzer and retires the ones it no longer lists.
    pub fn sync_learning(&self, v: &Version) {
        let Some(l) = &self.learning else {
            return;
        };
        let live: Vec<(u64, usize, u64, u64)> = v
            .files
            .iter()
            .enumerate()
            .flat_map(|(level, fs)| {
                fs.iter()
                    .map(move |f| (f.number, level, f.size, f.num_entries))
            })
            .collect();
        // No table-cache lock here (this runs under the engine's state mutex, and an open may be
        // doing file I/O): a table opened concurrently attaches its handle itself after it is
        // published (see `get`), so one side or the other always sees the registration.
        for (n, fs) in l.sync_files(&live) {
            if let Some(t) = self.tables.read().get(&n) {
                t.attach_stats(fs);
            }
        }
    }

    /// The table if it is open (no file I/O).
    pub fn get_if_open(&self, number: u64) -> Option<Arc<Table>> {
        self.tables.read().get(&number).cloned()
    }

    /// The table of `f`, borrowed from its metadata once opened.
    pub fn table_of<'a>(&self, f: &'a FileMeta) -> Result<&'a Arc<Table>> {
        if let Some(t) = f.table.0.get() {
            return Ok(t);
        }
        let t = self.get(f.number)?;
        Ok(f.table.0.get_or_init(|| t))
    }

    pub fn get(&self, number: u64) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.read().get(&number) {
            return Ok(t.clone());
        }
        let _guard = self.opening.lock();
        if let Some(t) = self.tables.read().get(&number) {
            return Ok(t.clone());
        }
        let path = filename::table_path(&self.dir, number);
        if !self.env.exists(&path) {
            return Err(Error::corruption(
                &path,
                0,
                "table file listed in the manifest is missing",
            ));
        }
        let file = self.env.open_random(&path)?;
        let t = Table::open(file, path, number, self.block_cache.clone())?
            .with_learning(self.learning.clone())
            .with_in_place_reads(self.in_place_reads);
        if let Some(l) = &self.learning {
            l.load_persisted(self.env.as_ref(), &self.dir, &t);
        }
        let t = Arc::new(t);
        self.tables.write().insert(number, t.clone());
        if let Some(fs) = self.learning.as_ref().and_then(|l| l.file_stats(number)) {
            // Registered while the table was opening (`sync_learning` found it unpublished).
            t.attach_stats(fs);
        }
        Ok(t)
    }

    pub fn evict(&self, number: u64) {
        self.tables.write().remove(&number);
        self.block_cache.erase_file(number);
    }

    pub fn block_cache(&self) -> &Arc<BlockCache> {
        &self.block_cache
    }

    /// Number of open tables.
    pub fn len(&self) -> usize {
        self.tables.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An immutable set of files per level.
#[derive(Clone, Debug, Default)]
pub struct Version {
    pub files: [Vec<Arc<FileMeta>>; NUM_LEVELS],
    /// Per level, the slot of its level model (level learning). Consecutive versions share a
    /// level's slot while its files stay the same; [`Version::apply`] gives every level an edit
    /// touches a new, empty slot, so a model always matches the files of the version it is in.
    pub level_models: [Arc<LevelSlot>; NUM_LEVELS],
    /// The manifest records format 2: some table may hold range tombstones, so reads gather
    /// them (`ranges.rs`). False for every database that never deleted a range.
    pub range_deletions: bool,
    /// The range tombstones of every table, gathered on first use.
    pub range_dels: Arc<ranges::RangeDelSlot>,
    /// The name of the merge operator the database was opened with (recorded at the first
    /// open that gave one; see `merge.rs`).
    pub merge_operator: Option<Arc<str>>,
}

/// Where a level model lives (see [`Version::level_models`]); set at most once.
#[derive(Default)]
pub struct LevelSlot(OnceLock<Arc<LevelModel>>);

impl LevelSlot {
    pub fn get(&self) -> Option<&Arc<LevelModel>> {
        self.0.get()
    }
    /// Installs `m`; false if the slot already had a model.
    pub fn set(&self, m: Arc<LevelModel>) -> bool {
        self.0.set(m).is_ok()
    }
}

impl std::fmt::Debug for LevelSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LevelSlot({})",
            if self.get().is_some() {
                "model"
            } else {
                "empty"
            }
        )
    }
}

/// Index of the first file in a sorted level whose largest key is >= `ikey`.
pub fn find_file(files: &[Arc<FileMeta>], ikey: &[u8]) -> usize {
    files.partition_point(|f| compare_internal(&f.largest, ikey) == Ordering::Less)
}

/// Point lookup in one sorted level through its model: the predicted window of level ordinals
/// names the file (the first file the window reaches whose largest key is `>= lookup`) and the
/// window inside it; that table searches only its part of the window.
fn level_get(
    m: &LevelModel,
    files: &[Arc<FileMeta>],
    lookup: &[u8],
    uk: &[u8],
    tables: &TableCache,
) -> Result<Lookup> {
    let w = m.index.predict(uk);
    crate::util::steps::mark(crate::util::steps::Step::Index);
    let total = m.starts.last().copied().unwrap_or(0);
    let (lo, hi) = (w.lo.min(total), w.hi.min(total));
    let mut j = m.starts.partition_point(|&s| s <= lo).saturating_sub(1);
    while let (Some(f), Some(&start), Some(&end)) =
        (files.get(j), m.starts.get(j), m.starts.get(j + 1))
    {
        if start >= hi && start > lo {
            break;
        }
        if compare_internal(&f.largest, lookup) == Ordering::Less {
            j += 1;
            continue;
        }
        if uk < f.smallest_user() {
            return Ok(Lookup::NotFound);
        }
        let a = lo.max(start) - start;
        let b = hi.min(end).max(lo.max(start)) - start;
        return tables.table_of(f)?.get_in_window(lookup, a, b);
    }
    Ok(Lookup::NotFound)
}

impl Version {
    /// The numbers of the tables this version lists.
    pub fn file_numbers(&self) -> std::collections::HashSet<u64> {
        self.files.iter().flatten().map(|f| f.number).collect()
    }

    /// Point lookup through the levels. `lookup` is an internal key at the read sequence.
    pub fn get(&self, lookup: &[u8], tables: &TableCache) -> Result<Lookup> {
        let uk = key::user_key(lookup);
        for f in &self.files[0] {
            if f.contains_user_key(uk) {
                match tables.table_of(f)?.get(lookup)? {
                    Lookup::NotFound => {}
                    r => return Ok(r),
                }
            }
        }
        for level in 1..NUM_LEVELS {
            let files = &self.files[level];
            if files.is_empty() {
                continue;
            }
            if let Some(m) = self.level_models[level].get() {
                match level_get(m, files, lookup, uk, tables)? {
                    Lookup::NotFound => continue,
                    r => return Ok(r),
                }
            }
            let i = find_file(files, lookup);
            if let Some(f) = files.get(i) {
                if uk >= f.smallest_user() {
                    match tables.table_of(f)?.get(lookup)? {
                        Lookup::NotFound => {}
                        r => return Ok(r),
                    }
                }
            }
        }
        Ok(Lookup::NotFound)
    }

    /// Installs a level model for `level` of this version (and of every later version that
    /// keeps the level's files). Refused when it does not describe exactly the level's files.
    pub fn set_level_model(&self, level: usize, m: Arc<LevelModel>) -> bool {
        let files = &self.files[level];
        let counts_match = m.starts.len() == files.len() + 1
            && files
                .iter()
                .zip(m.starts.windows(2))
                .all(|(f, w)| w[1] - w[0] == f.num_entries);
        level > 0 && counts_match && self.level_models[level].set(m)
    }

    pub fn level_bytes(&self, level: usize) -> u64 {
        self.files[level].iter().map(|f| f.size).sum()
    }

    /// Files of `level` whose user-key range overlaps [begin, end] (None = unbounded).
    pub fn overlapping(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        self.files[level]
            .iter()
            .filter(|f| {
                !(end.is_some_and(|e| f.smallest_user() > e)
                    || begin.is_some_and(|b| f.largest_user() < b))
            })
            .cloned()
            .collect()
    }

    /// Applies an edit, producing the next version; checks the level invariants.
    pub fn apply(&self, edit: &VersionEdit, manifest: &Path) -> Result<Version> {
        let mut v = self.clone();
        v.range_dels = Arc::default();
        v.range_deletions |= edit.format_version.is_some_and(|f| f >= DB_FORMAT_VERSION);
        if let Some(name) = &edit.merge_operator {
            v.merge_operator = Some(name.as_str().into());
        }
        for (level, n) in &edit.deleted_files {
            v.files[*level].retain(|f| f.number != *n);
            v.level_models[*level] = Arc::default();
        }
        for (level, f) in &edit.new_files {
            v.files[*level].push(Arc::new(f.clone()));
            v.level_models[*level] = Arc::default();
        }
        v.files[0].sort_by_key(|f| std::cmp::Reverse(f.number));
        for level in 1..NUM_LEVELS {
            let files = &mut v.files[level];
            files.sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
            for w in files.windows(2) {
                if w[0].largest_user() >= w[1].smallest_user() {
                    return Err(Error::corruption(
                        manifest,
                        0,
                        format!(
                            "files {} and {} overlap in level {level}",
                            w[0].number, w[1].number
                        ),
                    ));
                }
            }
        }
        Ok(v)
    }

    pub fn num_files(&self) -> usize {
        self.files.iter().map(Vec::len).sum()
    }
}

/// Opens a table for one reader instead of the shared cache (compaction through pipes).
pub type TableOpener = Arc<dyn Fn(&FileMeta) -> Result<Arc<Table>> + Send + Sync>;

/// Iterates over the files of one sorted level, opening tables lazily.
pub struct LevelIter {
    files: Vec<Arc<FileMeta>>,
    idx: usize,
    cur: Option<TableIter>,
    tables: Arc<TableCache>,
    opener: Option<TableOpener>,
    error: Option<Error>,
    fill_cache: bool,
    /// Fixed read-ahead of each table (`TableIter::with_readahead`); 0 keeps its own.
    readahead_bytes: u64,
}

impl LevelIter {
    pub fn new(files: Vec<Arc<FileMeta>>, tables: Arc<TableCache>, fill_cache: bool) -> Self {
        let idx = files.len();
        LevelIter {
            files,
            idx,
            cur: None,
            tables,
            opener: None,
            error: None,
            fill_cache,
            readahead_bytes: 0,
        }
    }

    /// Opens the level's tables with `opener` (when given) instead of the table cache.
    pub fn with_opener(mut self, opener: Option<TableOpener>) -> Self {
        self.opener = opener;
        self
    }

    /// Reads each table ahead in fixed requests of `bytes` (see
    /// [`TableIter::with_readahead`]); 0 keeps the table iterator's own read-ahead.
    pub fn with_readahead(mut self, bytes: u64) -> Self {
        self.readahead_bytes = bytes;
        self
    }

    fn open(&mut self, idx: usize) {
        self.idx = idx;
        self.cur = None;
        if let Some(f) = self.files.get(idx) {
            let t = match &self.opener {
                Some(open) => open(f),
                None => self.tables.get(f.number),
            };
            match t {
                Ok(t) => {
                    self.cur = Some(
                        TableIter::new(t, self.fill_cache).with_readahead(self.readahead_bytes),
                    )
                }
                Err(e) => self.error = Some(e),
            }
        }
    }

    fn cur_valid(&self) -> bool {
        self.cur.as_ref().is_some_and(|c| c.valid())
    }

    fn cur_error(&mut self) -> bool {
        if let Some(Err(e)) = self.cur.as_ref().map(|c| c.status()) {
            self.error = Some(e);
            return true;
        }
        false
    }

    fn skip_forward(&mut self) {
        while self.error.is_none() && !self.cur_valid() {
            if self.cur_error() || self.idx + 1 >= self.files.len() {
                self.cur = None;
                self.idx = self.files.len();
                return;
            }
            self.open(self.idx + 1);
            if let Some(c) = &mut self.cur {
                c.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        while self.error.is_none() && !self.cur_valid() {
            if self.cur_error() || self.idx == 0 || self.idx >= self.files.len() {
                self.cur = None;
                self.idx = self.files.len();
                return;
            }
            self.open(self.idx - 1);
            if let Some(c) = &mut self.cur {
                c.seek_to_last();
            }
        }
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.cur_valid()
    }
    fn seek_to_first(&mut self) {
        self.error = None;
        self.open(0);
        if let Some(c) = &mut self.cur {
            c.seek_to_first();
        }
        self.skip_forward();
    }
    fn seek_to_last(&mut self) {
        self.error = None;
        if self.files.is_empty() {
            self.cur = None;
            return;
        }
        self.open(self.files.len() - 1);
        if let Some(c) = &mut self.cur {
            c.seek_to_last();
        }
        self.skip_backward();
    }
    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        let i = find_file(&self.files, target);
        self.open(i);
        if let Some(c) = &mut self.cur {
            c.seek(target);
        }
        self.skip_forward();
    }
    fn next(&mut self) {
        if let Some(c) = &mut self.cur {
            c.next();
        }
        self.skip_forward();
    }
    fn prev(&mut self) {
        if let Some(c) = &mut self.cur {
            c.prev();
        }
        self.skip_backward();
    }
    fn key(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.key())
    }
    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |c| c.value())
    }
    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        match &self.cur {
            Some(c) => c.status(),
            None => Ok(()),
        }
    }
}

/// The current version, the versions still in use, and the manifest.
pub struct VersionSet {
    env: Arc<dyn Env>,
    dir: PathBuf,
    current: Arc<Version>,
    live: Vec<Weak<Version>>,
    pub next_file_number: u64,
    /// The next file number of the last manifest record read or durably written. Every WAL
    /// this database creates has a smaller number (see [`VersionSet::new_log_number`]), so
    /// recovery replays no log at or above it.
    pub recorded_next_file_number: u64,
    /// The number the next WAL takes, allocated one log ahead so that the manifest record
    /// written before that WAL exists already covers it.
    log_number_reserved: Option<u64>,
    pub log_number: u64,
    /// Sequence recorded in the manifest (the DB's live counter may be ahead).
    pub last_sequence: u64,
    pub compact_pointers: [Vec<u8>; NUM_LEVELS],
    manifest: Option<LogWriter>,
    pub manifest_number: u64,
    /// Live value-log segments.
    pub blob_files: std::collections::BTreeMap<u64, BlobFileMeta>,
    /// Offset at which recovery dropped the manifest's last bytes as a torn record (None: it
    /// ended in a whole record).
    pub manifest_tail_dropped: Option<u64>,
    /// Where WAL replay stopped at a gap in the sequence numbers: (the next expected, the one
    /// found). Set by recovery.
    pub replay_gap: Option<(u64, u64)>,
}

impl VersionSet {
    pub fn new(env: Arc<dyn Env>, dir: PathBuf) -> Self {
        VersionSet {
            env,
            dir,
            current: Arc::new(Version::default()),
            live: Vec::new(),
            next_file_number: 2,
            recorded_next_file_number: 0,
            log_number_reserved: None,
            log_number: 0,
            last_sequence: 0,
            compact_pointers: Default::default(),
            manifest: None,
            manifest_number: 0,
            blob_files: Default::default(),
            manifest_tail_dropped: None,
            replay_gap: None,
        }
    }

    /// Applies the value-log part of an edit.
    fn apply_blob_changes(&mut self, e: &VersionEdit) {
        apply_blob_edit(&mut self.blob_files, e);
    }

    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Number for a new WAL: the one reserved at the previous call (the first call allocates
    /// one), reserving the next. Between two switches of the WAL the flush of the older
    /// memtable writes a manifest record, whose next file number then covers the reserved
    /// number, so a WAL normally exists only once the manifest accounts for it, at no extra
    /// manifest write. The caller checks [`VersionSet::accounts_for`] before creating it.
    pub fn new_log_number(&mut self) -> u64 {
        let n = match self.log_number_reserved.take() {
            Some(n) => n,
            None => self.new_file_number(),
        };
        self.log_number_reserved = Some(self.new_file_number());
        n
    }

    /// True when the durable manifest accounts for file number `n` (it is below the recorded
    /// next file number).
    pub fn accounts_for(&self, n: u64) -> bool {
        n < self.recorded_next_file_number
    }

    /// Replays the manifest named by CURRENT.
    pub fn recover(&mut self) -> Result<()> {
        let cur_path = current_path(&self.dir);
        let cur = self.env.read_all(&cur_path)?;
        let name = std::str::from_utf8(&cur)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| matches!(filename::parse(s), Some(filename::FileKind::Manifest(_))))
            .ok_or_else(|| Error::corruption(&cur_path, 0, "CURRENT does not name a manifest"))?;
        let mpath = self.dir.join(name);
        if !self.env.exists(&mpath) {
            return Err(Error::corruption(
                &cur_path,
                0,
                format!("CURRENT names {name}, which is missing"),
            ));
        }
        let data = self.env.read_all(&mpath)?;
        let mut reader = LogReader::new(&data, &mpath);
        let mut replay = ManifestReplay::empty();
        while let Some((off, rec)) = reader.next_record()? {
            replay.apply(&self.dir, &mpath, off, &rec)?;
        }
        self.manifest_tail_dropped =
            (reader.torn_tail_bytes > 0).then(|| data.len() as u64 - reader.torn_tail_bytes);
        replay.finish(self, &mpath)?;
        if let Some(filename::FileKind::Manifest(n)) = filename::parse(name) {
            self.manifest_number = n;
            self.next_file_number = self.next_file_number.max(n + 1);
        }
        Ok(())
    }

    fn install(&mut self, v: Version) {
        let v = Arc::new(v);
        self.live.retain(|w| w.strong_count() > 0);
        self.live.push(Arc::downgrade(&v));
        self.current = v;
    }

    /// One edit that describes the whole current state: the first record of a new manifest
    /// (and of a checkpoint's).
    pub fn snapshot_edit(&self) -> VersionEdit {
        let mut snap = VersionEdit {
            format_version: Some(if self.current.merge_operator.is_some() {
                MERGE_FORMAT_VERSION
            } else if self.current.range_deletions {
                DB_FORMAT_VERSION
            } else {
                BASE_FORMAT_VERSION
            }),
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            merge_operator: self.current.merge_operator.as_deref().map(str::to_string),
            ..Default::default()
        };
        for (l, k) in self.compact_pointers.iter().enumerate() {
            if !k.is_empty() {
                snap.compact_pointers.push((l, k.clone()));
            }
        }
        for (l, files) in self.current.files.iter().enumerate() {
            for f in files {
                snap.add_file(l, (**f).clone());
            }
        }
        for (n, m) in &self.blob_files {
            snap.blob_files_added.push(*n);
            if m.sealed {
                snap.blob_files_sealed.push((*n, m.size));
            }
            if m.garbage > 0 {
                snap.blob_garbage.push((*n, m.garbage));
            }
        }
        snap
    }

    /// Starts a new manifest holding a snapshot of the current state and points CURRENT at it.
    fn write_new_manifest(&mut self) -> Result<()> {
        let number = self.new_file_number();
        let path = self.dir.join(manifest_name(number));
        let mut w = LogWriter::new(self.env.new_writable(&path)?);
        let snap = self.snapshot_edit();
        w.add_record(&snap.encode())?;
        w.sync()?;
        let recorded = self.next_file_number;
        write_file_atomic(
            self.env.as_ref(),
            &current_path(&self.dir),
            format!("{}\n", manifest_name(number)).as_bytes(),
        )?;
        let old = self.manifest_number;
        self.manifest = Some(w);
        self.manifest_number = number;
        self.recorded_next_file_number = recorded;
        if old != 0 && old != number {
            let _ = self.env.remove_file(&self.dir.join(manifest_name(old)));
        }
        Ok(())
    }

    /// Durably records `edit` and installs the resulting version.
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<()> {
        if let Some(n) = edit.log_number {
            assert!(n >= self.log_number, "log number must not go backwards");
        }
        let mpath = self.dir.join(manifest_name(self.manifest_number));
        let v = self.current.apply(&edit, &mpath)?;
        if self.manifest.is_none() {
            // First change after open: start a fresh manifest (never append to one that may end
            // in a torn record).
            self.write_new_manifest()?;
        }
        edit.next_file_number = Some(self.next_file_number);
        if edit.last_sequence.is_none() {
            edit.last_sequence = Some(self.last_sequence);
        }
        let w = self
            .manifest
            .as_mut()
            .ok_or_else(|| Error::Closed("no manifest".into()))?;
        if let Err(e) = w.add_record(&edit.encode()).and_then(|_| w.sync()) {
            // The manifest may now end in a partial record: never append to it again.
            self.manifest = None;
            return Err(e);
        }
        self.recorded_next_file_number = self.next_file_number;
        if let Some(n) = edit.log_number {
            self.log_number = n;
        }
        if let Some(s) = edit.last_sequence {
            self.last_sequence = s;
        }
        for (l, k) in &edit.compact_pointers {
            self.compact_pointers[*l] = k.clone();
        }
        self.apply_blob_changes(&edit);
        self.install(v);
        Ok(())
    }

    /// Creates the first manifest of a new database.
    pub fn create_new(&mut self) -> Result<()> {
        self.log_number = 0;
        self.next_file_number = 2;
        self.last_sequence = 0;
        self.manifest_number = 0;
        self.write_new_manifest()
    }

    /// File numbers referenced by any version still alive.
    pub fn live_files(&mut self) -> std::collections::HashSet<u64> {
        self.live.retain(|w| w.strong_count() > 0);
        let mut out = std::collections::HashSet::new();
        for v in self
            .live
            .iter()
            .filter_map(Weak::upgrade)
            .chain(std::iter::once(self.current.clone()))
        {
            for files in &v.files {
                out.extend(files.iter().map(|f| f.number));
            }
        }
        out
    }
}

/// The state a manifest's records build up, one record at a time: recovery starts it empty,
/// a secondary following a live manifest continues it from what it already applied. One
/// place decides what a record means for both.
pub(super) struct ManifestReplay {
    version: Version,
    log_number: Option<u64>,
    next_file: Option<u64>,
    last_seq: Option<u64>,
    blob_files: std::collections::BTreeMap<u64, BlobFileMeta>,
    compact_pointers: [Vec<u8>; NUM_LEVELS],
    saw_version: bool,
}

impl ManifestReplay {
    /// Nothing applied yet: a manifest read from its first record.
    pub(super) fn empty() -> Self {
        ManifestReplay {
            version: Version::default(),
            log_number: None,
            next_file: None,
            last_seq: None,
            blob_files: Default::default(),
            compact_pointers: Default::default(),
            saw_version: false,
        }
    }

    /// Continues from the state `vs` holds (whose manifest's first records it already applied).
    pub(super) fn continuing(vs: &VersionSet) -> Self {
        ManifestReplay {
            version: (*vs.current).clone(),
            log_number: Some(vs.log_number),
            next_file: Some(vs.next_file_number),
            last_seq: Some(vs.last_sequence),
            blob_files: vs.blob_files.clone(),
            compact_pointers: vs.compact_pointers.clone(),
            saw_version: true,
        }
    }

    /// Applies one record (at byte `off` of the manifest `path`, of the database in `dir`).
    pub(super) fn apply(&mut self, dir: &Path, path: &Path, off: u64, rec: &[u8]) -> Result<()> {
        let edit = VersionEdit::decode(rec)
            .ok_or_else(|| Error::corruption(path, off, "malformed version edit"))?;
        if let Some(fv) = edit.format_version {
            if fv > FORMAT_VERSION_MAX || fv == 0 {
                return Err(Error::UnsupportedVersion {
                    path: dir.to_path_buf(),
                    found: fv,
                    supported: FORMAT_VERSION_MAX,
                });
            }
            self.saw_version = true;
        }
        self.version = self.version.apply(&edit, path)?;
        self.log_number = edit.log_number.or(self.log_number);
        self.next_file = edit.next_file_number.or(self.next_file);
        self.last_seq = edit.last_sequence.or(self.last_seq);
        apply_blob_edit(&mut self.blob_files, &edit);
        for (l, k) in edit.compact_pointers {
            self.compact_pointers[l] = k;
        }
        Ok(())
    }

    /// Checks that the records named everything a database needs and installs the result in
    /// `vs`.
    pub(super) fn finish(self, vs: &mut VersionSet, path: &Path) -> Result<()> {
        if !self.saw_version {
            return Err(Error::corruption(
                path,
                0,
                "manifest has no format version record",
            ));
        }
        let missing = |f: &str| Error::corruption(path, 0, format!("manifest lacks {f}"));
        vs.log_number = self.log_number.ok_or_else(|| missing("a log number"))?;
        vs.next_file_number = self
            .next_file
            .ok_or_else(|| missing("a next file number"))?;
        vs.recorded_next_file_number = vs.next_file_number;
        vs.last_sequence = self.last_seq.ok_or_else(|| missing("a last sequence"))?;
        vs.blob_files = self.blob_files;
        vs.compact_pointers = self.compact_pointers;
        vs.install(self.version);
        Ok(())
    }
}

/// Applies the value-log part of an edit to a map of live segments.
fn apply_blob_edit(
    blob_files: &mut std::collections::BTreeMap<u64, BlobFileMeta>,
    e: &VersionEdit,
) {
    for n in &e.blob_files_added {
        blob_files.entry(*n).or_default();
    }
    for (n, size) in &e.blob_files_sealed {
        if let Some(m) = blob_files.get_mut(n) {
            m.size = *size;
            m.sealed = true;
        }
    }
    for (n, g) in &e.blob_garbage {
        // Garbage of a segment already collected is simply gone with it.
        if let Some(m) = blob_files.get_mut(n) {
            m.garbage = m.garbage.saturating_add(*g);
        }
    }
    for n in &e.blob_files_deleted {
        blob_files.remove(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    fn meta(n: u64, a: &str, b: &str) -> FileMeta {
        FileMeta {
            number: n,
            size: 100,
            smallest: make_internal_key(a.as_bytes(), 1, ValueKind::Value),
            largest: make_internal_key(b.as_bytes(), 1, ValueKind::Value),
            num_entries: 2,
            table: Default::default(),
        }
    }

    #[test]
    fn edit_round_trips() {
        let mut e = VersionEdit {
            format_version: Some(1),
            log_number: Some(3),
            next_file_number: Some(9),
            last_sequence: Some(77),
            ..Default::default()
        };
        e.add_file(2, meta(5, "a", "c"));
        e.delete_file(1, 4);
        e.compact_pointers
            .push((1, make_internal_key(b"m", 3, ValueKind::Value)));
        assert_eq!(VersionEdit::decode(&e.encode()), Some(e));
    }

    #[test]
    fn truncated_or_unknown_edit_is_rejected() {
        let mut e = VersionEdit::default();
        e.add_file(2, meta(5, "a", "c"));
        let b = e.encode();
        assert!(VersionEdit::decode(&b[..b.len() - 1]).is_none());
        assert!(VersionEdit::decode(&[99, 1]).is_none());
        assert!(
            VersionEdit::decode(&[7, 9]).is_none(),
            "level 9 does not exist"
        );
    }

    #[test]
    fn overlapping_files_in_a_sorted_level_are_refused() {
        let mut e = VersionEdit::default();
        e.add_file(1, meta(5, "a", "m"));
        e.add_file(1, meta(6, "k", "z"));
        assert!(Version::default().apply(&e, Path::new("M")).is_err());
    }
}
