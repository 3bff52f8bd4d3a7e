//! External tables: sorted table files built outside a database, for [`crate::DB::ingest`].
//!
//! A [`TableWriter`] writes one file in the ordinary table format (docs/formats/sstable.md:
//! checksummed blocks, Bloom filter, properties, footer) from user keys given in strictly
//! increasing order. Every entry carries sequence number 0: the file belongs to no database's
//! history yet. Ingesting it gives its entries a sequence newer than every write of the database
//! it enters (see `db/ingest.rs`). Values of any size stay inline in the table, whatever the
//! ingesting database's `min_blob_size`: the file is self-contained, and the ingest does not
//! touch the value log.
//!
//! One thread owns a writer. An out-of-order or repeated key is refused with
//! `Error::InvalidArgument` naming its position and leaves the writer usable (the refused entry
//! is not written). `finish` writes the meta blocks, fsyncs the file and its directory, and
//! describes the file; a writer dropped before `finish` removes its partial file.

use super::builder::{TableBuilder, TableBuilderOptions};
use crate::env::{Env, PosixEnv};
use crate::error::{Error, Result};
use crate::key::{make_internal_key, ValueKind};
use crate::options::Options;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Longest key and value: the write path's limits (`crate::batch::MAX_KEY_BYTES`,
/// `MAX_VALUE_BYTES`; the table layer sits below the batch, and `db/ingest.rs` tests that the
/// two agree).
pub const MAX_KEY_BYTES: usize = 64 << 10;
pub const MAX_VALUE_BYTES: u64 = u32::MAX as u64;

/// What [`TableWriter::finish`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ExternalTableInfo {
    pub path: PathBuf,
    /// Smallest and largest user keys.
    pub smallest_key: Vec<u8>,
    pub largest_key: Vec<u8>,
    /// Entries written: puts and deletions.
    pub entries: u64,
    pub deletions: u64,
    pub file_size: u64,
}

/// Writes one sorted external table. See the module documentation.
pub struct TableWriter {
    env: Arc<dyn Env>,
    path: PathBuf,
    builder: Option<TableBuilder>,
    last_key: Option<Vec<u8>>,
    entries: u64,
    deletions: u64,
    smallest: Vec<u8>,
}

impl TableWriter {
    /// Creates (or truncates) the file at `path`; block size, compression and Bloom filter bits
    /// come from `opts` (the other options do not apply to a table).
    pub fn create(path: impl AsRef<Path>, opts: &Options) -> Result<TableWriter> {
        Self::create_with_env(Arc::new(PosixEnv::new()), path.as_ref(), opts)
    }

    /// [`TableWriter::create`] through `env`.
    pub fn create_with_env(env: Arc<dyn Env>, path: &Path, opts: &Options) -> Result<TableWriter> {
        if path.as_os_str().is_empty() {
            return Err(Error::InvalidArgument(
                "table path is empty; give the path of the file to write".into(),
            ));
        }
        let file = env.new_writable(path)?;
        Ok(TableWriter {
            env,
            path: path.to_path_buf(),
            builder: Some(TableBuilder::new(file, TableBuilderOptions::from(opts))),
            last_key: None,
            entries: 0,
            deletions: 0,
            smallest: Vec::new(),
        })
    }

    /// Adds `key` → `value`; `key` must be greater than every key added before.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if value.len() as u64 > MAX_VALUE_BYTES {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes at position {} exceeds the limit of {MAX_VALUE_BYTES} bytes",
                value.len(),
                self.entries
            )));
        }
        self.add(key, ValueKind::Value, value)
    }

    /// Adds a deletion of `key` (it hides older versions of the key once ingested); `key` must
    /// be greater than every key added before.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.add(key, ValueKind::Deletion, &[])
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn add(&mut self, key: &[u8], kind: ValueKind, value: &[u8]) -> Result<()> {
        let position = self.entries;
        if key.len() > MAX_KEY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "key of {} bytes at position {position} exceeds the limit of {MAX_KEY_BYTES} \
                 bytes",
                key.len()
            )));
        }
        if let Some(last) = &self.last_key {
            if key <= last.as_slice() {
                let what = if key == last.as_slice() {
                    "repeats the previous key"
                } else {
                    "is smaller than the previous key"
                };
                return Err(Error::InvalidArgument(format!(
                    "key {} at position {position} {what} {}; a table's keys must be added in \
                     strictly increasing order",
                    show_key(key),
                    show_key(last)
                )));
            }
        }
        let b = self.builder.as_mut().ok_or_else(finished)?;
        b.add(&make_internal_key(key, 0, kind), value)?;
        if self.entries == 0 {
            self.smallest = key.to_vec();
        }
        self.entries += 1;
        if kind == ValueKind::Deletion {
            self.deletions += 1;
        }
        match &mut self.last_key {
            Some(l) => {
                l.clear();
                l.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        Ok(())
    }

    /// Writes the meta blocks and footer, fsyncs the file and its directory, and describes the
    /// file. A table needs at least one entry: finishing an empty one removes the file and
    /// fails.
    pub fn finish(mut self) -> Result<ExternalTableInfo> {
        let b = self.builder.take().ok_or_else(finished)?;
        if self.entries == 0 {
            drop(b);
            let _ = self.env.remove_file(&self.path);
            return Err(Error::InvalidArgument(format!(
                "table {} has no entries; add at least one before finish",
                self.path.display()
            )));
        }
        let file_size = match b.finish() {
            Ok(n) => n,
            Err(e) => {
                let _ = self.env.remove_file(&self.path);
                return Err(e);
            }
        };
        if let Some(dir) = self.path.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            self.env.sync_dir(dir)?;
        }
        Ok(ExternalTableInfo {
            path: self.path.clone(),
            smallest_key: std::mem::take(&mut self.smallest),
            largest_key: self.last_key.take().unwrap_or_default(),
            entries: self.entries,
            deletions: self.deletions,
            file_size,
        })
    }
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        if let Some(b) = self.builder.take() {
            // Never finished: the partial file is not a table.
            drop(b);
            let _ = self.env.remove_file(&self.path);
        }
    }
}

fn finished() -> Error {
    Error::InvalidArgument("the table writer is already finished".into())
}

pub(crate) use crate::util::show_key;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::MemEnv;

    fn writer(env: &Arc<MemEnv>) -> TableWriter {
        let env: Arc<dyn Env> = env.clone();
        TableWriter::create_with_env(env, Path::new("/ext/a.sst"), &Options::default()).unwrap()
    }

    #[test]
    fn out_of_order_key_is_refused_with_its_position_and_writer_stays_usable() {
        let env = Arc::new(MemEnv::new());
        env.create_dir_all(Path::new("/ext")).unwrap();
        let mut w = writer(&env);
        w.put(b"b", b"1").unwrap();
        let e = w.put(b"a", b"2").unwrap_err().to_string();
        assert!(e.contains("position 1") && e.contains("smaller"), "{e}");
        let e = w.delete(b"b").unwrap_err().to_string();
        assert!(e.contains("repeats"), "{e}");
        w.delete(b"c").unwrap();
        let info = w.finish().unwrap();
        assert_eq!(info.entries, 2);
        assert_eq!(info.deletions, 1);
        assert_eq!(info.smallest_key, b"b");
        assert_eq!(info.largest_key, b"c");
        assert_eq!(
            env.file_size(Path::new("/ext/a.sst")).unwrap(),
            info.file_size
        );
    }

    #[test]
    fn empty_table_is_refused_and_removed() {
        let env = Arc::new(MemEnv::new());
        env.create_dir_all(Path::new("/ext")).unwrap();
        let w = writer(&env);
        assert!(w.finish().is_err());
        assert!(!env.exists(Path::new("/ext/a.sst")));
    }

    #[test]
    fn dropped_writer_removes_its_partial_file() {
        let env = Arc::new(MemEnv::new());
        env.create_dir_all(Path::new("/ext")).unwrap();
        let mut w = writer(&env);
        w.put(b"a", b"1").unwrap();
        drop(w);
        assert!(!env.exists(Path::new("/ext/a.sst")));
    }

    #[test]
    fn keys_are_shown_as_text_or_hex() {
        assert_eq!(show_key(b"user:1"), "\"user:1\"");
        assert_eq!(show_key(&[0, 255]), "0x00ff");
    }
}
