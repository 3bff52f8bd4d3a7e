//! The Attune-DB back end: every table of a store in one `attune-kv` database.
//!
//! Layout (`docs/formats/embed-kv.md`): one database per store directory. Keys:
//!
//! ```text
//! 0x00 "meta/" name      → table record (24 bytes, below)
//! 0x00 "next"            → next table id, u32 BE
//! 0x00 "drop/" id u32 BE → (empty) rows of a replaced table, still to delete
//! 0x01 id u32 BE row u64 BE → the row: dim × f32 LE
//! ```
//!
//! Table record: id u32, dim u32, rows u64, data crc32c u32 (of the rows' bytes in row order),
//! record crc32c u32 (of the 20 bytes before it), all little-endian.
//!
//! Rows are big-endian after a per-table id, so one table's rows are adjacent in key order and a
//! request's misses, looked up together with `multi_get`, share blocks when their keys are close.
//!
//! A bulk load does not go through the write path (log, memtable, flush): it writes the rows,
//! already in key order, into sorted table files with `attune_kv::TableWriter` in a scratch
//! directory inside the store (`load.tmp/`, which the database ignores) and adds them with one
//! `DB::ingest`, which is atomic (all files or none after a crash).
//!
//! Crash safety of a bulk load: a load ingests its rows under a fresh id (the value of `next`),
//! then commits in **one synced batch** the table record pointing at that id, `next + 1`, and a
//! `drop/` marker for the replaced id. Readers find rows only through the record, so a load
//! killed before the commit leaves the old table (its rows under an id no record names, cleared
//! by the next load, which reuses that id); a load killed after it leaves the new table. The
//! replaced rows are deleted after the commit with one range deletion; a crash before it leaves
//! the `drop/` marker, and the next load finishes the job. A crash while the table files are
//! written leaves files in `load.tmp/`, which the next load removes.

use std::path::{Path, PathBuf};

use attune_kv::{Options, ReadOptions, TableWriter, WriteBatch, WriteOptions, DB};

use crate::error::{EmbedError, Result};
use crate::table::{check_name, MAX_DIM};

const META: &[u8] = b"\x00meta/";
const NEXT: &[u8] = b"\x00next";
const DROP: &[u8] = b"\x00drop/";
const ROW: u8 = 0x01;
/// Bytes of rows per table file a bulk load ingests. 64 MiB: a table of a few million rows
/// becomes a few dozen files, each small enough for compaction to move or merge alone.
const LOAD_FILE_BYTES: usize = 64 << 20;
/// The scratch directory (inside the store's directory) where a load writes its table files
/// before ingesting them. The database ignores names it does not know; the ingest refuses files
/// directly in the database directory.
const LOAD_DIR: &str = "load.tmp";
/// Block cache of a store's read-only handle. 1 MiB, not the database's 32 MiB default: the
/// store's own tiers are the row cache (`cache_bytes`), and a large block cache would hold rows
/// the store's budget does not count. The 1 MiB keeps index and recently read blocks.
pub const STORE_BLOCK_CACHE_BYTES: u64 = 1 << 20;

/// A table's record in the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvTableMeta {
    /// Id that prefixes its rows.
    pub id: u32,
    /// Values per row.
    pub dim: usize,
    /// Number of rows.
    pub rows: u64,
    /// crc32c of the rows' bytes, in row order.
    pub data_crc: u32,
}

/// Maps an attune-kv error on the database at `path` to the store's error classes.
pub(crate) fn kv_err(path: &Path) -> impl FnOnce(attune_kv::Error) -> EmbedError + '_ {
    move |e| match e {
        attune_kv::Error::Corruption {
            file,
            offset,
            detail,
        } => EmbedError::Corruption {
            path: file,
            offset,
            reason: detail,
        },
        attune_kv::Error::Io { path, source, .. } => EmbedError::Io { path, source },
        other => EmbedError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(other.to_string()),
        },
    }
}

fn meta_key(name: &str) -> Vec<u8> {
    [META, name.as_bytes()].concat()
}

/// The key of row `row` of the table with id `id`.
pub fn row_key(id: u32, row: u64) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[0] = ROW;
    k[1..5].copy_from_slice(&id.to_be_bytes());
    k[5..13].copy_from_slice(&row.to_be_bytes());
    k
}

fn encode_meta(m: &KvTableMeta) -> [u8; 24] {
    let mut v = [0u8; 24];
    v[0..4].copy_from_slice(&m.id.to_le_bytes());
    v[4..8].copy_from_slice(&(m.dim as u32).to_le_bytes());
    v[8..16].copy_from_slice(&m.rows.to_le_bytes());
    v[16..20].copy_from_slice(&m.data_crc.to_le_bytes());
    let c = crc32c::crc32c(&v[0..20]);
    v[20..24].copy_from_slice(&c.to_le_bytes());
    v
}

fn u32_le(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn decode_meta(path: &Path, name: &str, v: &[u8]) -> Result<KvTableMeta> {
    let corrupt = |reason: String| EmbedError::Corruption {
        path: path.to_path_buf(),
        offset: 0,
        reason: format!("record of table `{name}`: {reason}"),
    };
    if v.len() != 24 {
        return Err(corrupt(format!("{} bytes, want 24", v.len())));
    }
    if crc32c::crc32c(&v[0..20]) != u32_le(&v[20..24]) {
        return Err(corrupt("checksum mismatch".into()));
    }
    let dim = u32_le(&v[4..8]);
    if dim == 0 || dim > MAX_DIM {
        return Err(corrupt(format!("dim {dim} out of range")));
    }
    let mut r = [0u8; 8];
    r.copy_from_slice(&v[8..16]);
    Ok(KvTableMeta {
        id: u32_le(&v[0..4]),
        dim: dim as usize,
        rows: u64::from_le_bytes(r),
        data_crc: u32_le(&v[16..20]),
    })
}

fn db_options(create: bool, read_only: bool) -> Options {
    let mut o = Options {
        create_if_missing: create,
        read_only,
        ..Options::default()
    };
    if read_only {
        o.block_cache_size = STORE_BLOCK_CACHE_BYTES;
        // Reads with pread, as the flat file: mapped pages escape `posix_fadvise(DONTNEED)`,
        // so a cold measurement would not be cold, and they are memory the budget ignores.
        o.mmap_reads = false;
    }
    o
}

/// Opens the database at `dir` for reading (a shared lock: several stores may read it).
pub fn open_read(dir: &Path) -> Result<DB> {
    if !dir.join("CURRENT").exists() {
        return Err(EmbedError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no Attune-DB embedding store here (load a table with backend \"kv\" first)",
            ),
        });
    }
    DB::open(dir, db_options(false, true)).map_err(kv_err(dir))
}

/// The record of table `name`, or None.
pub fn meta(db: &DB, dir: &Path, name: &str) -> Result<Option<KvTableMeta>> {
    match db.get(&meta_key(name)).map_err(kv_err(dir))? {
        None => Ok(None),
        Some(v) => decode_meta(dir, name, &v).map(Some),
    }
}

/// Names of the tables in the database, sorted.
pub fn list(db: &DB, dir: &Path) -> Result<Vec<String>> {
    let mut it = db.iter(&ReadOptions::default()).map_err(kv_err(dir))?;
    it.seek(META);
    let mut names = Vec::new();
    while it.valid() && it.key().starts_with(META) {
        names.push(String::from_utf8_lossy(&it.key()[META.len()..]).into_owned());
        it.next();
    }
    it.status().map_err(kv_err(dir))?;
    Ok(names)
}

/// Names of the tables of the store at `dir` (empty when there is no database).
pub fn list_tables(dir: &Path) -> Result<Vec<String>> {
    if !dir.join("CURRENT").exists() {
        return Ok(Vec::new());
    }
    let db = open_read(dir)?;
    list(&db, dir)
}

/// The smallest key past every row of table id `id`.
fn rows_end(id: u32) -> Vec<u8> {
    match id.checked_add(1) {
        Some(n) => [&[ROW][..], &n.to_be_bytes()].concat(),
        None => vec![ROW + 1],
    }
}

/// Whether any row of table id `id` is in the database.
fn has_rows(db: &DB, dir: &Path, id: u32) -> Result<bool> {
    let start = row_key(id, 0);
    let mut it = db.iter(&ReadOptions::default()).map_err(kv_err(dir))?;
    it.seek(&start);
    let found = it.valid() && it.key().len() == 13 && it.key()[..5] == start[..5];
    it.status().map_err(kv_err(dir))?;
    Ok(found)
}

/// Deletes every row of table id `id` with one range deletion (and `extra` in the same batch).
fn delete_rows(db: &DB, dir: &Path, id: u32, extra: Option<&[u8]>) -> Result<()> {
    let mut batch = WriteBatch::new();
    batch
        .delete_range(&row_key(id, 0), &rows_end(id))
        .map_err(kv_err(dir))?;
    if let Some(k) = extra {
        batch.delete(k).map_err(kv_err(dir))?;
    }
    db.write(batch, WriteOptions::default())
        .map_err(kv_err(dir))
}

/// Finishes the deletions a crashed load left (`drop/` markers).
fn finish_drops(db: &DB, dir: &Path) -> Result<()> {
    let mut ids = Vec::new();
    {
        let mut it = db.iter(&ReadOptions::default()).map_err(kv_err(dir))?;
        it.seek(DROP);
        while it.valid() && it.key().starts_with(DROP) {
            let k = &it.key()[DROP.len()..];
            if k.len() == 4 {
                ids.push(u32::from_be_bytes([k[0], k[1], k[2], k[3]]));
            }
            it.next();
        }
        it.status().map_err(kv_err(dir))?;
    }
    for id in ids {
        delete_rows(db, dir, id, Some(&[DROP, &id.to_be_bytes()[..]].concat()))?;
    }
    Ok(())
}

/// Loads table `name` (`values`: row-major `rows × dim`) into the database at `dir` (created if
/// missing), atomically replacing any previous version (see the module note). Checks inputs
/// as [`crate::TableFile::write`] does. Needs the database's write lock: no store may have it
/// open meanwhile.
pub fn write(dir: &Path, name: &str, dim: usize, values: &[f32]) -> Result<()> {
    crate::table::check_values(name, dim, values)?;
    std::fs::create_dir_all(dir).map_err(crate::error::io_err(dir))?;
    let db = DB::open(dir, db_options(true, false)).map_err(kv_err(dir))?;
    // Flushed at the end so the rows sit in sorted tables, not only in the log: a store opened
    // later would otherwise replay the whole load into memory (and serve it from there).
    let r = load(&db, dir, name, dim, values).and_then(|()| db.flush().map_err(kv_err(dir)));
    let c = db.close().map_err(kv_err(dir));
    r.and(c)
}

fn load(db: &DB, dir: &Path, name: &str, dim: usize, values: &[f32]) -> Result<()> {
    finish_drops(db, dir)?;
    let id = match db.get(NEXT).map_err(kv_err(dir))? {
        None => 0,
        Some(v) if v.len() == 4 => u32::from_be_bytes([v[0], v[1], v[2], v[3]]),
        Some(v) => {
            return Err(EmbedError::Corruption {
                path: dir.to_path_buf(),
                offset: 0,
                reason: format!("next table id record of {} bytes, want 4", v.len()),
            })
        }
    };
    let Some(next) = id.checked_add(1) else {
        return Err(EmbedError::InvalidArgument(format!(
            "{}: table ids exhausted",
            dir.display()
        )));
    };
    // Rows of a load that crashed before its commit, under this same id (checked first: a range
    // deletion in the database makes every later ingest rewrite its files).
    if has_rows(db, dir, id)? {
        delete_rows(db, dir, id, None)?;
    }
    let old = meta(db, dir, name)?;
    let crc = ingest_rows(db, dir, id, dim, values)?;
    let m = KvTableMeta {
        id,
        dim,
        rows: (values.len() / dim) as u64,
        data_crc: crc,
    };
    // The commit: one synced batch (the log is sequential, so syncing it also makes the rows
    // written before it durable).
    let mut commit = WriteBatch::new();
    commit
        .put(&meta_key(name), &encode_meta(&m))
        .map_err(kv_err(dir))?;
    commit.put(NEXT, &next.to_be_bytes()).map_err(kv_err(dir))?;
    if let Some(o) = old {
        commit
            .put(&[DROP, &o.id.to_be_bytes()[..]].concat(), b"")
            .map_err(kv_err(dir))?;
    }
    db.write(commit, WriteOptions { sync: true })
        .map_err(kv_err(dir))?;
    finish_drops(db, dir)
}

/// Writes the rows of `values` under table id `id` into sorted table files in the scratch
/// directory and ingests them with one atomic `DB::ingest`; returns the rows' crc32c.
fn ingest_rows(db: &DB, dir: &Path, id: u32, dim: usize, values: &[f32]) -> Result<u32> {
    let scratch = dir.join(LOAD_DIR);
    // A crashed load's files; their rows never reached the database.
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch).map_err(crate::error::io_err(&scratch))?;
    }
    std::fs::create_dir_all(&scratch).map_err(crate::error::io_err(&scratch))?;
    let r = write_files(dir, &scratch, id, dim, values).and_then(|(crc, files)| {
        if !files.is_empty() {
            db.ingest(&files, true).map_err(kv_err(dir))?;
        }
        Ok(crc)
    });
    let c = std::fs::remove_dir_all(&scratch).map_err(crate::error::io_err(&scratch));
    let crc = r?;
    c?;
    Ok(crc)
}

/// Writes the table files of a load (rows in key order, `LOAD_FILE_BYTES` of rows per file).
fn write_files(
    dir: &Path,
    scratch: &Path,
    id: u32,
    dim: usize,
    values: &[f32],
) -> Result<(u32, Vec<PathBuf>)> {
    let row_bytes = dim * 4;
    let per_file = (LOAD_FILE_BYTES / row_bytes).max(1);
    let opts = Options::default();
    let mut crc = 0u32;
    let mut buf = vec![0u8; row_bytes];
    let mut files = Vec::new();
    for (f, chunk) in values.chunks(per_file * dim).enumerate() {
        let path = scratch.join(format!("{f:06}.sst"));
        let mut w = TableWriter::create(&path, &opts).map_err(kv_err(dir))?;
        for (i, row) in chunk.chunks_exact(dim).enumerate() {
            for (o, v) in buf.chunks_exact_mut(4).zip(row) {
                o.copy_from_slice(&v.to_le_bytes());
            }
            crc = crc32c::crc32c_append(crc, &buf);
            let k = (f * per_file + i) as u64;
            w.put(&row_key(id, k), &buf).map_err(kv_err(dir))?;
        }
        w.finish().map_err(kv_err(dir))?;
        files.push(path);
    }
    Ok((crc, files))
}

/// The tables of one store in an open database.
pub struct KvTables {
    dir: PathBuf,
    db: DB,
    metas: Vec<KvTableMeta>,
    keys: Vec<[u8; 13]>,
    which: Vec<usize>,
}

impl KvTables {
    /// Opens the tables `names` of the database at `dir` (read-only, shared).
    pub fn open(dir: &Path, names: &[String]) -> Result<Self> {
        let db = open_read(dir)?;
        let mut metas = Vec::with_capacity(names.len());
        for n in names {
            check_name(n)?;
            match meta(&db, dir, n)? {
                Some(m) => metas.push(m),
                None => {
                    return Err(EmbedError::UnknownTable {
                        name: n.clone(),
                        known: list(&db, dir)?.join(", "),
                    })
                }
            }
        }
        Ok(KvTables {
            dir: dir.to_path_buf(),
            db,
            metas,
            keys: Vec::new(),
            which: Vec::new(),
        })
    }

    /// The tables' records, in lookup order.
    pub fn metas(&self) -> &[KvTableMeta] {
        &self.metas
    }

    fn row_corrupt(&self, t: usize, key: u64, reason: String) -> EmbedError {
        EmbedError::Corruption {
            path: self.dir.clone(),
            offset: 0,
            reason: format!(
                "row {key} of table #{t} (id {}): {reason}",
                self.metas[t].id
            ),
        }
    }

    /// Reads row `keys[t]` of table `t` for each `t` in `miss` into `out[t·dim..]`, with one
    /// `multi_get`. Keys are in range (the store validated the batch).
    pub fn read_request(&mut self, keys: &[u64], miss: &[usize], out: &mut [f32]) -> Result<()> {
        self.keys.clear();
        self.which.clear();
        for &t in miss {
            self.keys.push(row_key(self.metas[t].id, keys[t]));
            self.which.push(t);
        }
        let got = self
            .db
            .multi_get(&self.keys, &ReadOptions::default())
            .map_err(kv_err(&self.dir))?;
        for (i, v) in got.into_iter().enumerate() {
            let t = self.which[i];
            let dim = self.metas[t].dim;
            let Some(v) = v else {
                return Err(self.row_corrupt(t, keys[t], "missing".into()));
            };
            if v.len() != dim * 4 {
                return Err(self.row_corrupt(
                    t,
                    keys[t],
                    format!("{} bytes, want {}", v.len(), dim * 4),
                ));
            }
            for (o, s) in out[t * dim..(t + 1) * dim]
                .iter_mut()
                .zip(v.chunks_exact(4))
            {
                *o = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
            }
        }
        Ok(())
    }

    /// Scans every row of table `t` and checks the count, the sizes and the data checksum.
    pub fn verify(&self, t: usize) -> Result<()> {
        verify_meta(&self.db, &self.dir, &self.metas[t])
    }
}

fn verify_meta(db: &DB, dir: &Path, m: &KvTableMeta) -> Result<()> {
    let start = row_key(m.id, 0);
    let mut it = db.iter(&ReadOptions::default()).map_err(kv_err(dir))?;
    it.seek(&start);
    let mut crc = 0u32;
    let mut n = 0u64;
    let bad = |reason: String| EmbedError::Corruption {
        path: dir.to_path_buf(),
        offset: 0,
        reason: format!("table id {}: {reason}", m.id),
    };
    while it.valid() && it.key().len() == 13 && it.key()[..5] == start[..5] {
        if it.key() != row_key(m.id, n) {
            return Err(bad(format!("row {n} missing")));
        }
        if n >= m.rows {
            return Err(bad(format!("rows past the {} recorded", m.rows)));
        }
        if it.value().len() != m.dim * 4 {
            return Err(bad(format!("row {n} has {} bytes", it.value().len())));
        }
        crc = crc32c::crc32c_append(crc, it.value());
        n += 1;
        it.next();
    }
    it.status().map_err(kv_err(dir))?;
    if n != m.rows {
        return Err(bad(format!("{n} rows, the record says {}", m.rows)));
    }
    if crc != m.data_crc {
        return Err(bad("data checksum mismatch".into()));
    }
    Ok(())
}

/// Opens table `name` of the database at `dir` and checks it; returns `(rows, dim)`.
pub fn verify_table(dir: &Path, name: &str) -> Result<(u64, usize)> {
    let t = KvTables::open(dir, &[name.to_string()])?;
    t.verify(0)?;
    Ok((t.metas[0].rows, t.metas[0].dim))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize, dim: usize, base: f32) -> Vec<f32> {
        (0..n * dim).map(|i| base + i as f32 * 1e-3).collect()
    }

    fn count_rows(dir: &Path) -> usize {
        let db = open_read(dir).unwrap();
        let mut it = db.iter(&ReadOptions::default()).unwrap();
        it.seek(&[ROW]);
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        n
    }

    #[test]
    fn write_read_verify_and_reload_deletes_the_old_rows() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "C1", 4, &rows(10, 4, 0.0)).unwrap();
        write(d.path(), "C2", 4, &rows(3, 4, 0.5)).unwrap();
        assert_eq!(verify_table(d.path(), "C1").unwrap(), (10, 4));
        let mut t = KvTables::open(d.path(), &["C2".into(), "C1".into()]).unwrap();
        let mut out = [0f32; 8];
        t.read_request(&[2, 7], &[0, 1], &mut out).unwrap();
        assert_eq!(out[..4], rows(3, 4, 0.5)[8..12]);
        assert_eq!(out[4..], rows(10, 4, 0.0)[28..32]);
        drop(t);
        write(d.path(), "C1", 4, &rows(6, 4, 0.25)).unwrap();
        assert_eq!(verify_table(d.path(), "C1").unwrap(), (6, 4));
        assert_eq!(count_rows(d.path()), 9, "the replaced rows are gone");
        assert_eq!(list_tables(d.path()).unwrap(), ["C1", "C2"]);
    }

    #[test]
    fn a_crashed_loads_leftovers_are_ignored_then_cleared() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "T", 2, &rows(4, 2, 0.0)).unwrap();
        {
            // What a load killed before its commit leaves: rows under the next id (1), and a
            // drop marker of an earlier replaced id whose deletion was cut short.
            let db = DB::open(d.path(), db_options(false, false)).unwrap();
            for k in 0..50u64 {
                db.put(&row_key(1, k), &[0u8; 8]).unwrap();
            }
            db.put(&row_key(7, 0), &[0u8; 8]).unwrap();
            db.put(&[DROP, &7u32.to_be_bytes()[..]].concat(), b"")
                .unwrap();
            db.close().unwrap();
        }
        assert_eq!(
            verify_table(d.path(), "T").unwrap(),
            (4, 2),
            "the old table"
        );
        write(d.path(), "T", 2, &rows(3, 2, 0.0)).unwrap();
        assert_eq!(verify_table(d.path(), "T").unwrap(), (3, 2));
        assert_eq!(count_rows(d.path()), 3);
    }

    /// A load killed while writing its table files leaves them in the scratch directory; the
    /// next load removes them and its own, and the database never saw their rows.
    #[test]
    fn a_crashed_loads_scratch_files_are_removed_and_loads_are_ingested() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "T", 2, &rows(4, 2, 0.0)).unwrap();
        let scratch = d.path().join(LOAD_DIR);
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::write(scratch.join("000000.sst"), b"half a table").unwrap();
        assert_eq!(verify_table(d.path(), "T").unwrap(), (4, 2));
        write(d.path(), "T", 2, &rows(5, 2, 1.0)).unwrap();
        assert!(!scratch.exists());
        assert_eq!(verify_table(d.path(), "T").unwrap(), (5, 2));
        assert_eq!(count_rows(d.path()), 5);
        let db = open_read(d.path()).unwrap();
        let m = meta(&db, d.path(), "T").unwrap().unwrap();
        let mut t = KvTables::open(d.path(), &["T".into()]).unwrap();
        let mut out = [0f32; 2];
        t.read_request(&[4], &[0], &mut out).unwrap();
        assert_eq!(out[..], rows(5, 2, 1.0)[8..10]);
        assert_eq!(m.rows, 5);
    }

    #[test]
    fn damage_and_bad_inputs_are_reported() {
        let d = tempfile::tempdir().unwrap();
        assert!(write(d.path(), "x", 3, &[0.0; 4]).is_err());
        let e = write(d.path(), "x", 2, &[0.0, 1.0, f32::INFINITY, 0.0]).unwrap_err();
        assert!(e.to_string().contains("row 1, column 0"), "{e}");
        write(d.path(), "T", 2, &rows(4, 2, 0.0)).unwrap();
        let e = KvTables::open(d.path(), &["U".into()]).err().unwrap();
        assert!(
            e.to_string()
                .contains("unknown table `U`; the store holds: T"),
            "{e}"
        );
        {
            let db = DB::open(d.path(), db_options(false, false)).unwrap();
            db.put(&row_key(0, 2), &[0u8; 5]).unwrap();
            db.close().unwrap();
        }
        let e = verify_table(d.path(), "T").unwrap_err();
        assert!(matches!(e, EmbedError::Corruption { .. }), "{e}");
        let mut t = KvTables::open(d.path(), &["T".into()]).unwrap();
        let mut out = [0f32; 2];
        let e = t.read_request(&[2], &[0], &mut out).unwrap_err();
        assert!(e.to_string().contains("5 bytes, want 8"), "{e}");
        drop(t);
        {
            let db = DB::open(d.path(), db_options(false, false)).unwrap();
            db.delete(&row_key(0, 1)).unwrap();
            db.close().unwrap();
        }
        let e = verify_table(d.path(), "T").unwrap_err();
        assert!(e.to_string().contains("row 1 missing"), "{e}");
    }
}
