//! Bulk ingest: adds sorted tables built by [`crate::TableWriter`] to the database atomically,
//! with RocksDB's `IngestExternalFile` semantics.
//!
//! 1. **Verify** every file before anything changes (no lock held): its footer, every block's
//!    checksum and layout, entries in strictly increasing user-key order, each entry a put or
//!    deletion at sequence 0 (what `TableWriter` writes; a table of a database, whose entries
//!    carry sequences and may point into its value log, is refused), and the files' key ranges
//!    pairwise disjoint. Any failure names the file and nothing is ingested.
//! 2. **Hold the writer queue** (as a flush does): no write is in flight until the ingest ends,
//!    so the sequence it takes is newer than every write before it and older than every write
//!    after it. A memtable that holds anything is flushed first: its entries are older and
//!    must sit below the ingested files, and the manifest's last sequence, which the ingest
//!    sets, must stay what the tables hold (recovery and value-log collection rely on it). The
//!    logs are fsynced, so a crash that keeps the ingest keeps every write before it.
//! 3. **Rewrite** each file into the directory as a new table whose every entry carries the one
//!    sequence `S = last_sequence + 1` (block size and compression of this database), fsync it
//!    and the directory. The sequence is stored in the keys, like any table's, rather than as a
//!    per-file global sequence in the manifest (RocksDB's choice): readers, compaction, repair
//!    and the format stay unchanged, at the cost of one sequential write of the data, which the
//!    verification reads anyway. So `move_files` hard-links only on the sequence-0 path below;
//!    otherwise it removes the source files once the ingest is durable.
//! 4. **One manifest edit** adds every file, each at the deepest level where neither it nor any
//!    level above holds a key in its range (L0 when a compaction is running, whose output could
//!    land there), and records `S` as the last sequence. The edit is the commit point: a crash
//!    before it leaves unreferenced tables, which the next open deletes; after it, all files.
//!
//! Snapshots taken before the ingest read at a sequence below `S` and do not see its entries;
//! every later write shadows them.
//!
//! **Sequence 0.** When the memtables are empty, no table of any level covers a key of any
//! file's range, no snapshot exists and no compaction runs, the files are linked (`move_files`) or
//! copied in unchanged at the last level, keeping sequence 0 (RocksDB does the same for a file
//! it can place at the bottom): no older version exists to shadow and no snapshot to hide them
//! from. The conditions are checked again under the state lock at the edit; if a snapshot, a
//! flush or a compaction intervened, the copies are removed and the ingest rewrites.

use super::background::QueueHead;
use super::{DbInner, DB};
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::key::{self, ValueKind, MAX_SEQUENCE};
use crate::table::writer::show_key;
use crate::table::{Table, TableBuilder, TableBuilderOptions};
use crate::util::filename;
use crate::version::{FileMeta, TableCache, Version, VersionEdit, NUM_LEVELS};
use parking_lot::MutexGuard;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Most files one ingest takes (each is rewritten and named in one manifest edit).
pub const INGEST_FILES_MAX: usize = 4096;

/// What [`DB::ingest`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IngestReport {
    /// The ingested files in key order.
    pub files: Vec<IngestedFile>,
    /// The sequence number every ingested entry carries.
    pub sequence: u64,
    pub entries: u64,
    /// Bytes of the tables written into the database.
    pub bytes: u64,
    /// Whether a memtable overlapping the files was flushed first.
    pub memtable_flushed: bool,
    /// Whether the source files were removed (`move_files`).
    pub sources_removed: bool,
}

/// One ingested file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct IngestedFile {
    pub source: PathBuf,
    /// The table's file number in the database and the level it was placed at.
    pub number: u64,
    pub level: usize,
    pub entries: u64,
    pub file_size: u64,
    pub smallest_key: Vec<u8>,
    pub largest_key: Vec<u8>,
}

/// A verified source file.
struct Source {
    path: PathBuf,
    table: Table,
    smallest: Vec<u8>,
    largest: Vec<u8>,
    /// The first and last internal keys (sequence 0), for a file placed as it is.
    first_ikey: Vec<u8>,
    last_ikey: Vec<u8>,
    entries: u64,
}

impl DB {
    /// Adds the tables at `paths` (written by [`crate::TableWriter`]) to the database in one
    /// atomic step: after a crash either all of them or none are there. Their entries shadow
    /// every earlier write and are invisible to earlier snapshots. The files must not overlap
    /// one another. `move_files` removes the sources once the ingest is durable (they are always
    /// rewritten, see `docs/kv.md` "Bulk ingest"). Errors name the file: a missing or foreign
    /// file, overlapping ranges, or a table of a database are `Error::InvalidArgument`, damage
    /// is `Error::Corruption`; nothing is ingested then.
    pub fn ingest<P: AsRef<Path>>(&self, paths: &[P], move_files: bool) -> Result<IngestReport> {
        self.inner.writable("ingest")?;
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        self.inner.ingest(&paths, move_files)
    }
}

impl DbInner {
    fn ingest(&self, paths: &[PathBuf], move_files: bool) -> Result<IngestReport> {
        if paths.is_empty() {
            return Err(Error::InvalidArgument(
                "ingest: paths is empty; give at least one table file".into(),
            ));
        }
        if paths.len() > INGEST_FILES_MAX {
            return Err(Error::InvalidArgument(format!(
                "ingest: {} files given, at most {INGEST_FILES_MAX} per call",
                paths.len()
            )));
        }
        let mut sources = Vec::with_capacity(paths.len());
        for p in paths {
            if sources.iter().any(|s: &Source| &s.path == p) {
                return Err(Error::InvalidArgument(format!(
                    "ingest: {} is given twice",
                    p.display()
                )));
            }
            sources.push(self.verify_source(p)?);
        }
        sources.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        for w in sources.windows(2) {
            if w[0].largest >= w[1].smallest {
                return Err(Error::InvalidArgument(format!(
                    "ingest: {} (keys {}..{}) and {} (keys {}..{}) overlap; files ingested \
                     together must hold disjoint key ranges",
                    w[0].path.display(),
                    show_key(&w[0].smallest),
                    show_key(&w[0].largest),
                    w[1].path.display(),
                    show_key(&w[1].smallest),
                    show_key(&w[1].largest),
                )));
            }
        }
        let mut report = self.at_writer_queue_head(&mut self.state.lock(), |st, head| {
            self.ingest_locked(st, head, &sources, move_files)
        })?;
        if move_files {
            let removed = sources
                .iter()
                .all(|s| self.env.remove_file(&s.path).is_ok());
            report.sources_removed = removed;
        }
        Ok(report)
    }

    /// Opens and checks one source file; see the module documentation.
    fn verify_source(&self, path: &Path) -> Result<Source> {
        let env = self.env.as_ref();
        if path.as_os_str().is_empty() {
            return Err(Error::InvalidArgument("ingest: a path is empty".into()));
        }
        if !env.exists(path) {
            return Err(Error::InvalidArgument(format!(
                "ingest: {} does not exist",
                path.display()
            )));
        }
        if path.parent().is_some_and(|d| same_dir(d, &self.dir)) {
            return Err(Error::InvalidArgument(format!(
                "ingest: {} is in the database directory; ingest files from elsewhere",
                path.display()
            )));
        }
        let file = env.open_random(path)?;
        if let Some(engine) = foreign_table(file.as_ref()) {
            return Err(Error::InvalidArgument(format!(
                "ingest: {} is a {engine} table, not an Attune one; write it with \
                 attune.TableWriter",
                path.display()
            )));
        }
        // A throwaway cache: verification reads every block once and caches none.
        let table = Table::open(file, path.to_path_buf(), 0, Arc::new(BlockCache::new(0)))?;
        let mut smallest: Option<Vec<u8>> = None;
        let mut largest = Vec::new();
        let (mut first_ikey, mut last_ikey) = (Vec::new(), Vec::new());
        let mut n = 0u64;
        let entries = table.verify_entries(&mut |ikey, _, block_offset| {
            check_entry(path, ikey, block_offset, n, &largest, smallest.is_some())?;
            let uk = key::user_key(ikey);
            if smallest.is_none() {
                smallest = Some(uk.to_vec());
                first_ikey = ikey.to_vec();
            }
            largest.clear();
            largest.extend_from_slice(uk);
            last_ikey.clear();
            last_ikey.extend_from_slice(ikey);
            n += 1;
            Ok(())
        })?;
        let Some(smallest) = smallest else {
            return Err(Error::InvalidArgument(format!(
                "ingest: {} holds no entries",
                path.display()
            )));
        };
        Ok(Source {
            path: path.to_path_buf(),
            table,
            smallest,
            largest,
            first_ikey,
            last_ikey,
            entries,
        })
    }

    fn ingest_locked(
        &self,
        st: &mut MutexGuard<'_, super::State>,
        head: &QueueHead,
        sources: &[Source],
        move_files: bool,
    ) -> Result<IngestReport> {
        let mut report = IngestReport::default();
        // Older entries of the files' keys in a memtable must go below the ingested files, and
        // the manifest's last sequence, which the edit below sets, must be what the tables
        // hold: recovery's hole check and value-log collection (a collected segment goes once
        // the manifest's last sequence covers its moves) rely on it. So a memtable that holds
        // anything is flushed first (RocksDB flushes only an overlapping one; it records the
        // ingest's sequence differently).
        if !st.mem.is_empty() || st.imm.is_some() {
            self.make_room_for_write(st, head, true)?;
            while st.imm.is_some() && st.bg_error.is_none() {
                if self.shutting_down.load(Ordering::Acquire) {
                    return Err(Error::Closed("database is closing".into()));
                }
                self.done_cv.wait_for(st, Duration::from_millis(100));
            }
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            report.memtable_flushed = true;
        }
        // Every write before the ingest must survive whatever crash keeps the ingest.
        MutexGuard::unlocked(st, || self.sync_logs())?;
        if !report.memtable_flushed && untouched(st, &self.tables, sources)? {
            if let Some(files) = self.place_as_is(st, sources, move_files)? {
                report.files = files;
                report.entries = report.files.iter().map(|f| f.entries).sum();
                report.bytes = report.files.iter().map(|f| f.file_size).sum();
                return Ok(report);
            }
        }
        let seq = self.last_sequence.load(Ordering::Acquire) + 1;
        if seq > MAX_SEQUENCE {
            return Err(Error::InvalidArgument(
                "ingest: the database's sequence numbers are exhausted".into(),
            ));
        }
        let numbers: Vec<u64> = sources
            .iter()
            .map(|_| st.versions.new_file_number())
            .collect();
        st.pending_outputs.extend(numbers.iter().copied());
        let written = MutexGuard::unlocked(st, || self.rewrite_all(sources, &numbers, seq));
        let metas = match written {
            Ok(m) => m,
            Err(e) => {
                for n in &numbers {
                    let _ = self.env.remove_file(&filename::table_path(&self.dir, *n));
                    st.pending_outputs.remove(n);
                }
                return Err(e);
            }
        };
        let version = st.versions.current();
        let mut edit = VersionEdit::default();
        for (f, s) in metas.into_iter().zip(sources) {
            let level = if st.compaction_running {
                0
            } else {
                target_level(&version, &s.smallest, &s.largest)
            };
            report.files.push(IngestedFile {
                source: s.path.clone(),
                number: f.number,
                level,
                entries: f.num_entries,
                file_size: f.size,
                smallest_key: s.smallest.clone(),
                largest_key: s.largest.clone(),
            });
            report.entries += f.num_entries;
            report.bytes += f.size;
            edit.add_file(level, f);
        }
        edit.last_sequence = Some(seq);
        // The version first: a reader that already sees the new sequence sees the files.
        self.commit_ingest(st, edit, &numbers)?;
        self.last_sequence.store(seq, Ordering::Release);
        self.work_cv.notify_all();
        report.sequence = seq;
        Ok(report)
    }

    /// Links (`move_files`) or copies every source unchanged into the last level, keeping
    /// sequence 0, when no key of any file exists anywhere else and no snapshot exists (see
    /// the module documentation); `None` when that stopped being true while the files were
    /// placed (a snapshot was taken, a compaction or flush started or changed the levels).
    fn place_as_is(
        &self,
        st: &mut MutexGuard<'_, super::State>,
        sources: &[Source],
        move_files: bool,
    ) -> Result<Option<Vec<IngestedFile>>> {
        let numbers: Vec<u64> = sources
            .iter()
            .map(|_| st.versions.new_file_number())
            .collect();
        st.pending_outputs.extend(numbers.iter().copied());
        let placed = MutexGuard::unlocked(st, || {
            let mut report = super::CheckpointReport::default();
            let mut sizes = Vec::with_capacity(sources.len());
            for (s, &n) in sources.iter().zip(&numbers) {
                let to = filename::table_path(&self.dir, n);
                let linked = move_files && self.env.link_file(&s.path, &to)?;
                if !linked {
                    self.copy_file(&s.path, &to, None, &mut report)?;
                }
                sizes.push(self.env.file_size(&to)?);
            }
            self.env.sync_dir(&self.dir)?;
            Ok::<_, Error>(sizes)
        });
        let unplace = |st: &mut MutexGuard<'_, super::State>| {
            for n in &numbers {
                let _ = self.env.remove_file(&filename::table_path(&self.dir, *n));
                st.pending_outputs.remove(n);
            }
        };
        let sizes = match placed {
            Ok(sizes) => sizes,
            Err(e) => {
                unplace(st);
                return Err(e);
            }
        };
        if !untouched(st, &self.tables, sources)? {
            unplace(st);
            return Ok(None);
        }
        let level = NUM_LEVELS - 1;
        let mut edit = VersionEdit::default();
        let mut files = Vec::with_capacity(sources.len());
        for ((s, &number), &size) in sources.iter().zip(&numbers).zip(&sizes) {
            edit.add_file(
                level,
                FileMeta {
                    number,
                    size,
                    smallest: s.first_ikey.clone(),
                    largest: s.last_ikey.clone(),
                    num_entries: s.entries,
                    table: Default::default(),
                },
            );
            files.push(IngestedFile {
                source: s.path.clone(),
                number,
                level,
                entries: s.entries,
                file_size: size,
                smallest_key: s.smallest.clone(),
                largest_key: s.largest.clone(),
            });
        }
        self.commit_ingest(st, edit, &numbers)?;
        self.work_cv.notify_all();
        Ok(Some(files))
    }

    /// The commit point: logs `edit` naming the tables `numbers`, then publishes them. A failed
    /// manifest write may still have reached the manifest: like a failed flush, it keeps the
    /// tables and refuses writes until a reopen decides.
    fn commit_ingest(
        &self,
        st: &mut MutexGuard<'_, super::State>,
        edit: VersionEdit,
        numbers: &[u64],
    ) -> Result<()> {
        if let Err(e) = st.versions.log_and_apply(edit) {
            if st.bg_error.is_none() {
                st.bg_error = Some(e.duplicate());
            }
            return Err(e);
        }
        for n in numbers {
            st.pending_outputs.remove(n);
        }
        self.install_super_version(st);
        Ok(())
    }

    /// Writes each source as table `numbers[i]` with every entry at `seq`, then syncs the
    /// directory.
    fn rewrite_all(&self, sources: &[Source], numbers: &[u64], seq: u64) -> Result<Vec<FileMeta>> {
        let mut out = Vec::with_capacity(sources.len());
        for (s, &number) in sources.iter().zip(numbers) {
            let path = filename::table_path(&self.dir, number);
            let file = self.env.new_writable(&path)?;
            let mut b = TableBuilder::new(file, TableBuilderOptions::from(&self.opts));
            let mut n = 0u64;
            let mut last = Vec::new();
            let mut ikey = Vec::new();
            s.table.verify_entries(&mut |k, v, block_offset| {
                // The file was verified, but may have changed since: check again.
                check_entry(&s.path, k, block_offset, n, &last, n > 0)?;
                let uk = key::user_key(k);
                let kind = key::kind(k).unwrap_or(ValueKind::Value);
                ikey.clear();
                ikey.extend_from_slice(uk);
                ikey.extend_from_slice(&((seq << 8) | kind as u64).to_le_bytes());
                b.add(&ikey, v)?;
                last.clear();
                last.extend_from_slice(uk);
                n += 1;
                Ok(())
            })?;
            if n != s.entries {
                return Err(Error::corruption(
                    &s.path,
                    0,
                    format!(
                        "changed during the ingest: {n} entries, {} before",
                        s.entries
                    ),
                ));
            }
            out.push(FileMeta::finish(number, b)?);
        }
        self.env.sync_dir(&self.dir)?;
        Ok(out)
    }
}

/// Checks one entry of an external table: a put or deletion at sequence 0 whose user key is
/// greater than the previous one (`last`, when `has_last`).
fn check_entry(
    path: &Path,
    ikey: &[u8],
    block_offset: u64,
    position: u64,
    last: &[u8],
    has_last: bool,
) -> Result<()> {
    let kind = key::kind(ikey);
    if key::sequence(ikey) != 0 || !matches!(kind, Some(ValueKind::Value | ValueKind::Deletion)) {
        return Err(Error::InvalidArgument(format!(
            "ingest: {} is not an external table (entry {position} carries a sequence number \
             or a value-log pointer: it is a table of a database); write it with \
             attune.TableWriter",
            path.display()
        )));
    }
    let uk = key::user_key(ikey);
    if has_last && uk <= last {
        return Err(Error::corruption(
            path,
            block_offset,
            format!(
                "entry {position} (key {}) is not greater than the key before it",
                show_key(uk)
            ),
        ));
    }
    Ok(())
}

/// Whether the files may keep sequence 0: no snapshot (a snapshot taken before the ingest
/// would see sequence 0), no compaction running (its output could land across the files in the
/// last level), empty memtables (whatever they hold, a deletion of a whole range included, is
/// newer than sequence 0), no table of any level whose key range meets any file's, and no
/// range tombstone over any file's range: then no other version of any key exists, and sequence
/// 0 shadows nothing and is shadowed by nothing.
fn untouched(st: &super::State, tables: &TableCache, sources: &[Source]) -> Result<bool> {
    let v = st.versions.current();
    let quiet = st.snapshots.is_empty()
        && !st.compaction_running
        && st.mem.is_empty()
        && st.imm.is_none()
        && sources.iter().all(|s| {
            (0..NUM_LEVELS).all(|l| {
                v.overlapping(l, Some(&s.smallest), Some(&s.largest))
                    .is_empty()
            })
        });
    if !quiet {
        return Ok(false);
    }
    // A range tombstone does not widen its table's bounds, so the check above cannot see one:
    // any tombstone over a file's range (all are newer than sequence 0) would hide its entries.
    Ok(match v.range_dels(tables)? {
        Some(set) => !set
            .tombstones()
            .iter()
            .any(|t| sources.iter().any(|s| t.overlaps(&s.smallest, &s.largest))),
        None => true,
    })
}

/// The deepest level such that neither it nor any level above holds a key in
/// `[smallest, largest]` (0 when L0 does).
fn target_level(v: &Version, smallest: &[u8], largest: &[u8]) -> usize {
    let mut level = 0;
    for l in 0..NUM_LEVELS {
        if !v.overlapping(l, Some(smallest), Some(largest)).is_empty() {
            break;
        }
        level = l;
    }
    level
}

/// Whether two directory paths name the same directory.
fn same_dir(a: &Path, b: &Path) -> bool {
    let a = if a.as_os_str().is_empty() {
        Path::new(".")
    } else {
        a
    };
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Magic numbers in the last 8 bytes of other engines' table files.
const FOREIGN_MAGICS: [(u64, &str); 3] = [
    (0x88e2_41b7_85f4_cff7, "RocksDB"),
    (0x8242_2296_63bf_9564, "RocksDB plain"),
    (0xdb47_7524_8b80_fb57, "LevelDB (or RocksDB legacy)"),
];

/// The engine whose table `file` is, told by its magic number, if it is one we know.
fn foreign_table(file: &dyn crate::env::RandomAccessFile) -> Option<&'static str> {
    let size = file.size();
    if size < 8 {
        return None;
    }
    let mut b = [0u8; 8];
    file.read_exact_at(&mut b, size - 8).ok()?;
    let magic = u64::from_le_bytes(b);
    FOREIGN_MAGICS
        .iter()
        .find(|(m, _)| *m == magic)
        .map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn external_tables_take_the_write_paths_key_and_value_limits() {
        assert_eq!(
            crate::table::writer::MAX_KEY_BYTES,
            crate::batch::MAX_KEY_BYTES
        );
        assert_eq!(
            crate::table::writer::MAX_VALUE_BYTES,
            crate::batch::MAX_VALUE_BYTES
        );
    }
}
