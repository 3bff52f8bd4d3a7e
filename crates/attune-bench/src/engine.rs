//! The one interface every measured engine implements, and the registry of engines.
//!
//! An [`Engine`] is an open database shared by all client threads (`Send + Sync`); each thread asks
//! it for a [`Session`] (a per-thread handle: WiredTiger sessions and cursors, LMDB read
//! transactions, RocksDB read/write options) and drives the workload through that. The driver
//! calls, in order: `open` (from the registry), `session` once per thread, operations, then
//! `close`. Settings that an engine was given are reported back by [`Engine::settings`] exactly as
//! the engine applied them, and land in each result row.
//!
//! Adding an engine is one file in `src/engines/` defining a `pub const KIND: EngineKind` plus one
//! line in [`ENGINES`]. Peers are loaded with `dlopen` when opened, so a missing library is a
//! [`BenchError::LibraryMissing`] for that engine only and the binary builds anywhere.

use std::path::Path;

use crate::engines;
use crate::error::{BenchError, Result};
use crate::options::{Compression, Settings};

/// One write in a batch.
#[derive(Debug, Clone, Copy)]
pub enum BatchOp<'a> {
    /// Insert or overwrite.
    Put(&'a [u8], &'a [u8]),
    /// Remove (absent keys are not an error).
    Delete(&'a [u8]),
}

/// Fills record `i`'s key and value (cleared first): the input of [`Engine::ingest_sorted`].
pub type RecordFn<'a> = dyn FnMut(u64, &mut Vec<u8>, &mut Vec<u8>) + 'a;

/// A per-thread handle on an open engine. Not shared between threads.
pub trait Session {
    /// Inserts or overwrites `key`.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Reads `key` into `value` (cleared first); returns whether it was found.
    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool>;
    /// Removes `key`; removing an absent key is not an error.
    fn delete(&mut self, key: &[u8]) -> Result<()>;
    /// Applies `ops` atomically where the engine supports batches; the default applies them one by
    /// one (engines override it when they have a real batch).
    fn write_batch(&mut self, ops: &[BatchOp<'_>]) -> Result<()> {
        for op in ops {
            match *op {
                BatchOp::Put(k, v) => self.put(k, v)?,
                BatchOp::Delete(k) => self.delete(k)?,
            }
        }
        Ok(())
    }
    /// Visits up to `n` entries in key order starting at the first key `>= start` (an empty
    /// `start` means the first key); returns how many were visited. `visit` sees each key/value
    /// pair while it is valid (no copy is made by the driver).
    fn scan(
        &mut self,
        start: &[u8],
        n: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize>;
}

/// An open database.
pub trait Engine: Send + Sync {
    /// A new per-thread session.
    fn session(&self) -> Result<Box<dyn Session + '_>>;
    /// The settings the engine actually runs with, engine-specific names and values included.
    fn settings(&self) -> serde_json::Value;
    /// Makes buffered writes durable and (where the engine has one) flushes the write buffer.
    fn flush(&self) -> Result<()>;
    /// Flushes the write buffer and compacts every table into the bottom level, waiting for
    /// it (db_bench's `compact` step), so a read-only phase sees the data in tables. Returns
    /// `false` when the engine has no such operation (the default).
    fn compact(&self) -> Result<bool> {
        Ok(false)
    }
    /// Learns an index model for every table now ("offline" learning); returns the number of
    /// tables with a model afterwards, or `None` when the engine (or its configuration) has no
    /// learned indexes (the default).
    fn learn(&self) -> Result<Option<u64>> {
        Ok(None)
    }
    /// Engine counters sampled after a phase (before close), e.g. Attune's learned-index
    /// statistics; `null` when the engine reports none (the default).
    fn stats(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// Loads `records` records in key order by building external sorted table files of at most
    /// `records_per_file` records in `scratch` and ingesting them all in one call (Attune's
    /// `TableWriter` + `DB::ingest`, RocksDB's `SstFileWriter` + `IngestExternalFile`, files
    /// moved in). `record(i, key, value)` fills record `i` (buffers cleared first); keys must
    /// increase with `i`. Returns `false` when the engine has no bulk ingest (the default).
    fn ingest_sorted(
        &self,
        _scratch: &Path,
        _records: u64,
        _records_per_file: u64,
        _record: &mut RecordFn<'_>,
    ) -> Result<bool> {
        Ok(false)
    }
    /// Closes the database, waiting for the engine's own shutdown work.
    fn close(self: Box<Self>) -> Result<()>;
}

/// Opens an engine in `dir` (created if missing) with `settings` (already validated).
pub type OpenFn = fn(dir: &Path, settings: &Settings) -> Result<Box<dyn Engine>>;

/// One registered engine.
#[derive(Debug, Clone, Copy)]
pub struct EngineKind {
    /// The name used in `--engines`.
    pub name: &'static str,
    /// One line for `attune-bench engines`.
    pub about: &'static str,
    /// Engine-specific spec keys (beyond [`crate::options::COMMON_KEYS`]).
    pub keys: &'static [&'static str],
    /// The block compression codecs the engine can run with; `--compression` asking for another
    /// runs the engine with [`Compression::closest_in`] this list, with a warning.
    pub compressions: &'static [Compression],
    /// Checks that the engine can run here (library present); the error says why not.
    pub probe: fn() -> Result<()>,
    /// Opens a database.
    pub open: OpenFn,
}

/// Every engine the harness can drive in-process, in the order `attune-bench engines` lists them.
/// The external `db_bench` tool is handled by [`crate::dbbench`], not through this trait.
pub const ENGINES: &[EngineKind] = &[
    engines::attune::KIND,
    engines::rocksdb::KIND,
    engines::leveldb::KIND,
    engines::wiredtiger::KIND,
    engines::lmdb::KIND,
    engines::fjall::KIND,
];

/// Name of the pseudo-engine that runs RocksDB's own `db_bench` tool.
pub const DB_BENCH: &str = "db_bench";

/// Looks an engine up by name; the error lists every valid name.
pub fn find(name: &str) -> Result<&'static EngineKind> {
    ENGINES
        .iter()
        .find(|k| k.name == name)
        .ok_or_else(|| BenchError::UnknownEngine {
            name: name.to_string(),
            valid: valid_names(),
        })
}

/// Comma-separated names of every engine, `db_bench` included.
pub fn valid_names() -> String {
    let mut names: Vec<&str> = ENGINES.iter().map(|k| k.name).collect();
    names.push(DB_BENCH);
    names.join(", ")
}
