//! The memtable: an arena skiplist (`skiplist.rs`) of internal keys to values.
//!
//! Thread safety: one writer at a time (the group-commit leader) inserts while any number of
//! readers get and iterate without locks. Entries are never removed; a memtable is dropped as a
//! whole once flushed and no reader holds it (readers hold an `Arc`).

pub mod rangedel;
pub mod skiplist;

use crate::iter::InternalIterator;
use crate::key::{self, make_internal_key, pack_tag, ValueKind, KIND_FOR_SEEK};
use crate::memtable::rangedel::{RangeDelSet, RangeTombstone};
use crate::memtable::skiplist::{node_key, node_value, SkipList};
use crate::vlog::BlobPointer;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Result of a point lookup in a memtable or table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    Found(Vec<u8>),
    /// The value is in the value log.
    Blob(BlobPointer),
    /// A value that reads as absent from the given Unix millisecond on.
    FoundUntil(Vec<u8>, u64),
    /// A separated value that reads as absent from the given Unix millisecond on.
    BlobUntil(BlobPointer, u64),
    Deleted,
    /// The newest entry is a merge operand (this one): the reader collects the operands below
    /// it down to the key's base (`DbInner::read_merged`).
    Merge(Vec<u8>),
    NotFound,
}

impl Lookup {
    /// The answer at Unix time `now_ms`: an expired entry reads as a deletion (it hides every
    /// older version), a live one as a plain value.
    pub fn at(self, now_ms: u64) -> Lookup {
        match self {
            Lookup::FoundUntil(_, at) | Lookup::BlobUntil(_, at) if at <= now_ms => Lookup::Deleted,
            Lookup::FoundUntil(v, _) => Lookup::Found(v),
            Lookup::BlobUntil(p, _) => Lookup::Blob(p),
            r => r,
        }
    }

    /// True when the entry carries an expiry.
    pub fn expires(&self) -> bool {
        matches!(self, Lookup::FoundUntil(..) | Lookup::BlobUntil(..))
    }
}

/// An in-memory sorted buffer of recent writes.
pub struct MemTable {
    list: SkipList,
    entries: AtomicUsize,
    /// Value-log bytes written for this memtable's entries: what it would hold if its values
    /// were not separated (it is flushed by both, see `DbInner::make_room_for_write`).
    blob_bytes: AtomicUsize,
    /// Number of the WAL file whose records this memtable holds.
    pub log_number: u64,
    /// Range tombstones, beside the skiplist (see `rangedel.rs`).
    range_dels: RangeDels,
}

/// A memtable's range tombstones and their fragmented form, rebuilt on the first read after a
/// write (readers share it through an `Arc`).
#[derive(Default)]
struct RangeDels {
    any: AtomicBool,
    bytes: AtomicUsize,
    list: Mutex<(Vec<RangeTombstone>, Option<Arc<RangeDelSet>>)>,
}

/// Runs `f` on the lookup key `user_key ‖ tag(seq, KIND_FOR_SEEK)`, built on the stack when short.
#[inline]
pub fn with_lookup_key<R>(user_key: &[u8], seq: u64, f: impl FnOnce(&[u8]) -> R) -> R {
    const STACK: usize = 120;
    if user_key.len() <= STACK {
        let mut buf = [0u8; STACK + 8];
        buf[..user_key.len()].copy_from_slice(user_key);
        buf[user_key.len()..user_key.len() + 8]
            .copy_from_slice(&pack_tag(seq, KIND_FOR_SEEK).to_le_bytes());
        f(&buf[..user_key.len() + 8])
    } else {
        f(&make_internal_key(user_key, seq, KIND_FOR_SEEK))
    }
}

impl MemTable {
    pub fn new(log_number: u64) -> Self {
        MemTable {
            list: SkipList::new(),
            entries: AtomicUsize::new(0),
            blob_bytes: AtomicUsize::new(0),
            log_number,
            range_dels: RangeDels::default(),
        }
    }

    /// Inserts one entry (a range deletion goes beside the skiplist, `user_key` its begin and
    /// `value` its end). Only the single active writer calls this.
    pub fn add(&self, seq: u64, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        if kind == ValueKind::RangeDeletion {
            let mut l = self.range_dels.list.lock();
            l.0.push(RangeTombstone {
                begin: user_key.to_vec(),
                end: value.to_vec(),
                seq,
            });
            l.1 = None;
            self.range_dels
                .bytes
                .fetch_add(user_key.len() + value.len() + 48, AtomicOrdering::Relaxed);
            self.range_dels.any.store(true, AtomicOrdering::Release);
            self.entries.fetch_add(1, AtomicOrdering::Relaxed);
            return;
        }
        self.list
            .insert_parts(user_key, &pack_tag(seq, kind).to_le_bytes(), value);
        self.entries.fetch_add(1, AtomicOrdering::Relaxed);
    }

    /// The newest version of `user_key` visible at `seq`.
    pub fn get(&self, user_key: &[u8], seq: u64) -> Lookup {
        let n = with_lookup_key(user_key, seq, |k| self.list.seek(k));
        if n.is_null() {
            return Lookup::NotFound;
        }
        let k = node_key(n);
        if key::user_key(k) != user_key {
            return Lookup::NotFound;
        }
        // Pointers and expiries are validated before they enter a memtable; a bad pointer reads
        // as a pointer to a segment that cannot exist, which the value read reports as
        // corruption.
        let bad = BlobPointer {
            file: u64::MAX,
            offset: 0,
            len: 0,
        };
        let v = node_value(n);
        match key::kind(k) {
            Some(ValueKind::Value) => Lookup::Found(v.to_vec()),
            Some(ValueKind::Merge) => Lookup::Merge(v.to_vec()),
            Some(ValueKind::BlobIndex) => Lookup::Blob(BlobPointer::decode(v).unwrap_or(bad)),
            Some(kind @ (ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex)) => {
                let (at, payload) = key::split_expiry(kind, v).unwrap_or((Some(0), &[]));
                let at = at.unwrap_or(0);
                if kind == ValueKind::ExpiringValue {
                    Lookup::FoundUntil(payload.to_vec(), at)
                } else {
                    Lookup::BlobUntil(BlobPointer::decode(payload).unwrap_or(bad), at)
                }
            }
            _ => Lookup::Deleted,
        }
    }

    pub fn approximate_memory_usage(&self) -> usize {
        self.list.memory_bytes() + self.range_dels.bytes.load(AtomicOrdering::Relaxed)
    }

    /// The memtable's range tombstones, fragmented; None when it has none (one atomic load).
    pub fn range_dels(&self) -> Option<Arc<RangeDelSet>> {
        if !self.range_dels.any.load(AtomicOrdering::Acquire) {
            return None;
        }
        let mut l = self.range_dels.list.lock();
        if l.1.is_none() {
            l.1 = Some(Arc::new(RangeDelSet::new(l.0.iter().cloned())));
        }
        l.1.clone()
    }

    /// The sequence of the newest entry of `user_key` at or below `seq` (a range deletion
    /// decides by it whether that entry is covered).
    pub fn newest_seq(&self, user_key: &[u8], seq: u64) -> Option<u64> {
        let n = with_lookup_key(user_key, seq, |k| self.list.seek(k));
        if n.is_null() {
            return None;
        }
        let k = node_key(n);
        (key::user_key(k) == user_key).then(|| key::sequence(k))
    }

    /// Counts `n` value-log bytes written for entries of this memtable.
    pub fn add_blob_bytes(&self, n: usize) {
        self.blob_bytes.fetch_add(n, AtomicOrdering::Relaxed);
    }

    /// Value-log bytes written for entries of this memtable.
    pub fn blob_bytes(&self) -> usize {
        self.blob_bytes.load(AtomicOrdering::Relaxed)
    }

    /// The memtable's memory plus the value-log bytes its entries point at: the bytes of
    /// writes it holds, separated or not.
    pub fn written_bytes(&self) -> usize {
        self.approximate_memory_usage() + self.blob_bytes.load(AtomicOrdering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.entries.load(AtomicOrdering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An iterator over a memtable that keeps the memtable alive.
pub struct MemTableIter {
    node: *mut u8,
    mem: Arc<MemTable>,
}

// SAFETY: `node` points into the arena of `mem`, which this iterator keeps alive; nodes are
// immutable once published, so the iterator can move between threads.
unsafe impl Send for MemTableIter {}

impl MemTableIter {
    pub fn new(mem: Arc<MemTable>) -> Self {
        MemTableIter {
            node: std::ptr::null_mut(),
            mem,
        }
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        !self.node.is_null()
    }
    fn seek_to_first(&mut self) {
        self.node = self.mem.list.first();
    }
    fn seek_to_last(&mut self) {
        self.node = self.mem.list.find_last();
    }
    fn seek(&mut self, target: &[u8]) {
        self.node = self.mem.list.seek(target);
    }
    fn next(&mut self) {
        if !self.node.is_null() {
            self.node = self.mem.list.successor(self.node);
        }
    }
    fn prev(&mut self) {
        if !self.node.is_null() {
            self.node = self.mem.list.find_less_than(node_key(self.node));
        }
    }
    fn key(&self) -> &[u8] {
        if self.node.is_null() {
            &[]
        } else {
            node_key(self.node)
        }
    }
    fn value(&self) -> &[u8] {
        if self.node.is_null() {
            &[]
        } else {
            node_value(self.node)
        }
    }
    fn status(&self) -> crate::error::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_sees_the_newest_version_at_or_below_the_snapshot() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(2, ValueKind::Value, b"k", b"v2");
        m.add(3, ValueKind::Deletion, b"k", b"");
        assert_eq!(m.get(b"k", 1), Lookup::Found(b"v1".to_vec()));
        assert_eq!(m.get(b"k", 2), Lookup::Found(b"v2".to_vec()));
        assert_eq!(m.get(b"k", 3), Lookup::Deleted);
        assert_eq!(m.get(b"j", 3), Lookup::NotFound);
        assert_eq!(m.get(b"kk", 3), Lookup::NotFound);
    }

    #[test]
    fn iterator_walks_both_directions_in_internal_order() {
        let m = Arc::new(MemTable::new(1));
        m.add(1, ValueKind::Value, b"b", b"1");
        m.add(2, ValueKind::Value, b"a", b"2");
        m.add(3, ValueKind::Value, b"b", b"3");
        let mut it = MemTableIter::new(m);
        it.seek_to_first();
        let mut fwd = Vec::new();
        while it.valid() {
            fwd.push((key::user_key(it.key()).to_vec(), it.value().to_vec()));
            it.next();
        }
        assert_eq!(
            fwd,
            vec![
                (b"a".to_vec(), b"2".to_vec()),
                (b"b".to_vec(), b"3".to_vec()),
                (b"b".to_vec(), b"1".to_vec())
            ]
        );
        it.seek_to_last();
        assert_eq!(it.value(), b"1");
        it.prev();
        assert_eq!(it.value(), b"3");
    }
}
