//! The read path: memtable, immutable memtable, then the version's levels, then the value log
//! for separated values, all over one captured `SuperVersion`.
//!
//! Called from any user thread; it takes no database-wide lock (the `SuperVersion` is cloned
//! under a read lock). Invariant: a read at sequence `seq` sees exactly the writes at or below
//! `seq`; a damaged value-log record is a corruption error, never wrong data.

use super::{BlobSet, DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::iter::{DbIter, InternalIterator, MergingIterator};
use crate::memtable::{with_lookup_key, Lookup, MemTableIter};
use crate::options::ReadOptions;
use crate::table::TableIter;
use crate::util::filename::{self};
use crate::util::steps::{self, Step};
use crate::version::{LevelIter, NUM_LEVELS};
use crate::vlog::BlobPointer;
use std::sync::atomic::Ordering;

impl DbInner {
    pub(super) fn get(&self, key: &[u8], ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        // The hot-key cache answers latest-state reads only (cache/hotkeys.rs has the rules).
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

    pub(super) fn read_blob(
        &self,
        blobs: &BlobSet,
        key: &[u8],
        p: &BlobPointer,
    ) -> Result<Vec<u8>> {
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
    pub(super) fn lookup(&self, sv: &SuperVersion, key: &[u8], seq: u64) -> Result<Lookup> {
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
    pub(super) fn current_pointer(
        &self,
        sv: &SuperVersion,
        key: &[u8],
    ) -> Result<Option<BlobPointer>> {
        Ok(match self.lookup(sv, key, crate::key::MAX_SEQUENCE)? {
            Lookup::Blob(p) => Some(p),
            _ => None,
        })
    }

    /// The user view over one super version at `seq`; a table that cannot be opened is
    /// returned as the error (the iterator then reports it).
    pub(super) fn internal_iter(
        &self,
        sv: &SuperVersion,
        seq: u64,
        fill: bool,
    ) -> (DbIter, Option<Error>) {
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
}
