//! The read path: memtable, immutable memtable, then the version's levels, then the value log
//! for separated values, all over one captured `SuperVersion`.
//!
//! Called from any user thread; it takes no database-wide lock (the `SuperVersion` is cloned
//! under a read lock). Invariant: a read at sequence `seq` sees exactly the writes at or below
//! `seq`; a damaged value-log record is a corruption error, never wrong data.

use super::{BlobSet, DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::iter::{BlobResolver, DbIter, InternalIterator, MergingIterator};
use crate::key::MAX_SEQUENCE;
use crate::key::{make_internal_key, parse_internal_key, split_expiry, ValueKind, KIND_FOR_SEEK};
use crate::memtable::{with_lookup_key, Lookup, MemTableIter};
use crate::merge;
use crate::options::ReadOptions;
use crate::table::TableIter;
use crate::util::filename::{self};
use crate::util::steps::{self, Step};
use crate::version::{LevelIter, NUM_LEVELS};
use crate::vlog::BlobPointer;
use std::sync::atomic::Ordering;

/// A key's current value-log record: its pointer, its expiry, and the merge operands above it
/// (newest first; see `DbInner::current_pointer`).
pub(super) type CurrentPointer = (BlobPointer, Option<u64>, Vec<Vec<u8>>);

/// What lies under a key's merge operands (see `DbInner::merge_stack`); the values carry
/// their expiry.
pub(super) enum MergeBase {
    /// No value: a deletion, an expired or range-deleted entry, or nothing at all.
    Absent,
    Value(Vec<u8>),
    Blob(BlobPointer, Option<u64>),
}

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
        // What an offer to the hot-key cache may claim: every write at or below `published`
        // is in the SuperVersion cloned next (a memtable is installed before any write goes
        // into it). The read itself runs at the sequence loaded after the clone, which covers
        // everything the clone holds; offering at that later sequence would let a value that
        // misses a write made between the clone and the load outlive that write's
        // invalidation.
        let published = hot.map(|_| self.last_sequence.load(Ordering::Acquire));
        let sv = self.sv.read().clone();
        #[cfg(test)]
        tests::between_clone_and_sequence();
        let seq = ro
            .snapshot
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire));
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        let r = self.lookup_raw(&sv, key, seq)?;
        // A value with an expiry is never cached: the cache has no clock. Neither is a merge
        // result (its base may expire).
        let cacheable = !r.expires() && !matches!(r, Lookup::Merge(_));
        let v = match r.at(self.env.now_unix_millis()) {
            Lookup::Found(v) => v,
            Lookup::Merge(_) => self.read_merged(&sv, key, seq)?,
            Lookup::Blob(p) => self.read_blob(&sv.blobs, key, &p)?,
            _ => {
                steps::mark(Step::Value);
                return Ok(None);
            }
        };
        self.counters.gets_found.fetch_add(1, Ordering::Relaxed);
        if let (Some(h), Some(published), true) = (hot, published, cacheable) {
            h.offer(key, &v, published);
        }
        steps::mark(Step::Value);
        Ok(Some(v))
    }

    /// `DB::multi_get`: one super version and one sequence for every key; the hot-key cache,
    /// which answers the latest state key by key, is not consulted.
    pub(super) fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        ro: &ReadOptions,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let sv = self.sv.read().clone();
        let seq = ro
            .snapshot
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire));
        // One clock read answers every expiring entry of the call.
        let now = self.env.now_unix_millis();
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| keys[a].as_ref().cmp(keys[b].as_ref()));
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let mut blobs: Vec<(BlobPointer, usize)> = Vec::new();
        let mut prev: Option<(usize, Lookup)> = None;
        for i in order {
            let key = keys[i].as_ref();
            // A key asked again right after itself (sorted order) reuses the first lookup.
            let r = match &prev {
                Some((j, r)) if keys[*j].as_ref() == key => r.clone(),
                _ => self.lookup_raw(&sv, key, seq)?.at(now),
            };
            match &r {
                Lookup::Found(v) => out[i] = Some(v.clone()),
                Lookup::Merge(_) => out[i] = Some(self.read_merged(&sv, key, seq)?),
                Lookup::Blob(p) => blobs.push((*p, i)),
                _ => {}
            }
            prev = Some((i, r));
        }
        blobs.sort_by_key(|(p, _)| (p.file, p.offset));
        for (p, i) in blobs {
            out[i] = Some(self.read_blob(&sv.blobs, keys[i].as_ref(), &p)?);
        }
        let found = out.iter().filter(|v| v.is_some()).count() as u64;
        self.counters
            .gets
            .fetch_add(keys.len() as u64, Ordering::Relaxed);
        self.counters.gets_found.fetch_add(found, Ordering::Relaxed);
        Ok(out)
    }

    pub(super) fn read_blob(
        &self,
        blobs: &BlobSet,
        key: &[u8],
        p: &BlobPointer,
    ) -> Result<Vec<u8>> {
        self.counters.blob_reads.fetch_add(1, Ordering::Relaxed);
        if let Some(pf) = &self.prefetch {
            pf.on_read(blobs, p);
        }
        match blobs.get(&p.file) {
            Some(f) => f.read(p, key),
            None => Err(Error::corruption(
                filename::blob_path(&self.dir, p.file),
                p.offset,
                "a value pointer names this value-log segment, which is not live (missing)",
            )),
        }
    }

    /// The newest entry of `key` at or below `seq`, an expiring one answered at the current
    /// time (a value or a deletion).
    pub(super) fn lookup(&self, sv: &SuperVersion, key: &[u8], seq: u64) -> Result<Lookup> {
        Ok(self
            .lookup_raw(sv, key, seq)?
            .at(self.env.now_unix_millis()))
    }

    /// The newest entry of `key` at or below `seq`: memtable, immutable memtable, then levels.
    /// Expiring entries come back with their expiry.
    pub(super) fn lookup_raw(&self, sv: &SuperVersion, key: &[u8], seq: u64) -> Result<Lookup> {
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
        self.apply_range_dels(sv, key, seq, r)
    }

    /// The value-log record `key`'s newest version points at, if it has one, with that
    /// version's expiry and the merge operands above it (newest first; empty unless the key's
    /// newest entries are operands over a separated base). An expired version still holds its
    /// record: the record becomes garbage when compaction drops the entry, so a clock set back
    /// never finds it gone.
    pub(super) fn current_pointer(
        &self,
        sv: &SuperVersion,
        key: &[u8],
    ) -> Result<Option<CurrentPointer>> {
        Ok(match self.lookup_raw(sv, key, MAX_SEQUENCE)? {
            Lookup::Blob(p) => Some((p, None, Vec::new())),
            Lookup::BlobUntil(p, at) => Some((p, Some(at), Vec::new())),
            Lookup::Merge(_) => match self.merge_stack(sv, key, MAX_SEQUENCE, 0)? {
                (ops, MergeBase::Blob(p, at)) => Some((p, at, ops)),
                _ => None,
            },
            _ => None,
        })
    }

    /// The value of `key` at `seq` when its newest entry there is a merge operand: the
    /// operator applied to the operands below down to the key's base.
    pub(super) fn read_merged(&self, sv: &SuperVersion, key: &[u8], seq: u64) -> Result<Vec<u8>> {
        let op = self
            .opts
            .merge_operator
            .as_ref()
            .ok_or_else(|| merge::no_operator(key))?;
        let (ops, base) = self.merge_stack(sv, key, seq, self.env.now_unix_millis())?;
        self.counters
            .merge_operands_read
            .fetch_add(ops.len() as u64, Ordering::Relaxed);
        let base = match base {
            MergeBase::Absent => None,
            MergeBase::Value(v) => Some(v),
            MergeBase::Blob(p, _) => Some(self.read_blob(&sv.blobs, key, &p)?),
        };
        merge::apply_newest_first(op.as_ref(), key, base.as_deref(), &ops)
    }

    /// The merge operands of `key` visible at `seq` (newest first) and the base below them:
    /// one seek of a merging iterator over every memtable and table, then a walk down the
    /// key's versions until a value, a deletion, a covering range deletion, an entry expired
    /// at `now_ms`, or the key's end.
    pub(super) fn merge_stack(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        seq: u64,
        now_ms: u64,
    ) -> Result<(Vec<Vec<u8>>, MergeBase)> {
        let (mut it, error) = self.merged_iter(sv, true);
        if let Some(e) = error {
            return Err(e);
        }
        let covered = self.cover_fn(sv, seq)?;
        it.seek(&make_internal_key(key, seq, KIND_FOR_SEEK));
        let mut ops = Vec::new();
        let mut base = MergeBase::Absent;
        let bad = |why: &str| Error::corruption("<merge read>", 0, why.to_string());
        while it.valid() {
            let p = parse_internal_key(it.key()).ok_or_else(|| bad("malformed internal key"))?;
            if p.user_key != key {
                break;
            }
            if p.sequence > seq {
                it.next();
                continue;
            }
            if covered.as_ref().is_some_and(|f| f(key, p.sequence)) {
                break;
            }
            let (at, payload) = split_expiry(p.kind, it.value())
                .ok_or_else(|| bad("expiring entry shorter than its expiry"))?;
            if at.is_some_and(|at| at <= now_ms) {
                break;
            }
            match p.kind {
                ValueKind::Merge => ops.push(it.value().to_vec()),
                ValueKind::Deletion | ValueKind::RangeDeletion => break,
                ValueKind::Value | ValueKind::ExpiringValue => {
                    base = MergeBase::Value(payload.to_vec());
                    break;
                }
                ValueKind::BlobIndex | ValueKind::ExpiringBlobIndex => {
                    let ptr = BlobPointer::decode(payload)
                        .ok_or_else(|| bad("malformed value pointer under merge operands"))?;
                    base = MergeBase::Blob(ptr, at);
                    break;
                }
            }
            it.next();
        }
        it.status()?;
        Ok((ops, base))
    }

    /// The user view over one super version at `seq`; a table that cannot be opened is
    /// returned as the error (the iterator then reports it).
    pub(super) fn internal_iter(
        &self,
        sv: &SuperVersion,
        seq: u64,
        fill: bool,
    ) -> (DbIter, Option<Error>) {
        let (merged, mut error) = self.merged_iter(sv, fill);
        let covered = self.cover_fn(sv, seq).unwrap_or_else(|e| {
            error = Some(e);
            None
        });
        let resolve: Option<BlobResolver> = self.opts.merge_operator.as_ref().map(|_| {
            let (blobs, dir) = (sv.blobs.clone(), self.dir.clone());
            Box::new(move |key: &[u8], payload: &[u8]| {
                let p = BlobPointer::decode(payload).ok_or_else(|| {
                    Error::corruption("<iterator>", 0, "malformed value pointer under a merge")
                })?;
                match blobs.get(&p.file) {
                    Some(f) => f.read(&p, key),
                    None => Err(Error::corruption(
                        filename::blob_path(&dir, p.file),
                        p.offset,
                        "a value pointer names this value-log segment, which is not live",
                    )),
                }
            }) as BlobResolver
        });
        (
            DbIter::new(Box::new(merged), seq, self.env.now_unix_millis())
                .with_range_deletions(covered)
                .with_merge(self.opts.merge_operator.clone(), resolve),
            error,
        )
    }

    /// Every entry of one super version, all sequences, merged in internal-key order.
    pub(super) fn merged_iter(
        &self,
        sv: &SuperVersion,
        fill: bool,
    ) -> (MergingIterator, Option<Error>) {
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
        (MergingIterator::new(children), error)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

    use crate::env::{Env, MemEnv};
    use crate::{Options, DB};
    use std::cell::RefCell;
    use std::path::Path;
    use std::sync::Arc;

    type Hook = Box<dyn FnOnce()>;
    thread_local! {
        /// Runs once inside the next `get` on this thread, between cloning the SuperVersion
        /// and loading the read sequence: the window a concurrent writer can land in.
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    pub(super) fn between_clone_and_sequence() {
        if let Some(f) = HOOK.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    #[test]
    fn a_write_between_the_clone_and_the_sequence_load_never_leaves_a_stale_cached_value() {
        let env = MemEnv::new();
        let db = Arc::new(
            DB::open_with_env(
                Arc::new(env) as Arc<dyn Env>,
                Path::new("/db"),
                Options {
                    hot_key_cache_bytes: 1 << 20,
                    ..Options::default()
                },
            )
            .unwrap(),
        );
        db.put(b"k", b"old").unwrap();
        // First read: a miss that leaves a ghost, so the next offer would admit the value.
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"old"[..]));
        // Second read: after it cloned its view (memtable holding "old"), a writer switches
        // the memtable and writes "new" into the next one, publishing a higher sequence.
        let w = db.clone();
        HOOK.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                w.flush().unwrap();
                w.put(b"k", b"new").unwrap();
            }))
        });
        // The read itself may answer from its view (it began before the write)...
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"old"[..]));
        // ...but it must not leave "old" in the cache for reads that begin after the write.
        for _ in 0..3 {
            assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"new"[..]));
        }
        let s = db.stats().hot_key_cache;
        assert!(s.stale_offers >= 1, "{s:?}");
    }
}
