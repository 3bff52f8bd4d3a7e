//! The memtable: a concurrent skiplist (crossbeam-skiplist) of internal keys to values.
//!
//! Thread safety: one writer at a time (the group-commit leader) inserts while any number of
//! readers get and iterate without locks. Entries are never removed; a memtable is dropped as a
//! whole once flushed and no reader holds it (readers hold an `Arc`).

use crate::iter::InternalIterator;
use crate::key::{self, compare_internal, make_internal_key, ValueKind, KIND_FOR_SEEK};
use crossbeam_skiplist::{map::Entry, SkipMap};
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Estimated bytes of skiplist node overhead per entry (node, tower, allocation headers).
const ENTRY_OVERHEAD_BYTES: usize = 80;

/// A borrowed internal key with the internal-key ordering.
#[repr(transparent)]
pub struct IKeyRef([u8]);

impl IKeyRef {
    pub fn new(b: &[u8]) -> &IKeyRef {
        // SAFETY: IKeyRef is repr(transparent) over [u8], so the layouts are identical.
        unsafe { &*(b as *const [u8] as *const IKeyRef) }
    }
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl PartialEq for IKeyRef {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for IKeyRef {}
impl PartialOrd for IKeyRef {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for IKeyRef {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

/// An owned internal key.
pub struct IKey(Box<[u8]>);

impl Borrow<IKeyRef> for IKey {
    fn borrow(&self) -> &IKeyRef {
        IKeyRef::new(&self.0)
    }
}
impl PartialEq for IKey {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for IKey {}
impl PartialOrd for IKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for IKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

/// Result of a point lookup in a memtable or table.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    Found(Vec<u8>),
    Deleted,
    NotFound,
}

/// An in-memory sorted buffer of recent writes.
pub struct MemTable {
    map: SkipMap<IKey, Box<[u8]>>,
    bytes: AtomicUsize,
    entries: AtomicUsize,
    /// Number of the WAL file whose records this memtable holds.
    pub log_number: u64,
    largest_seq: AtomicU64,
}

impl MemTable {
    pub fn new(log_number: u64) -> Self {
        MemTable {
            map: SkipMap::new(),
            bytes: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            log_number,
            largest_seq: AtomicU64::new(0),
        }
    }

    /// Inserts one entry. Only the single active writer calls this.
    pub fn add(&self, seq: u64, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let ikey = make_internal_key(user_key, seq, kind);
        self.bytes.fetch_add(ikey.len() + value.len() + ENTRY_OVERHEAD_BYTES, AtomicOrdering::Relaxed);
        self.entries.fetch_add(1, AtomicOrdering::Relaxed);
        self.largest_seq.fetch_max(seq, AtomicOrdering::Relaxed);
        self.map.insert(IKey(ikey.into_boxed_slice()), value.to_vec().into_boxed_slice());
    }

    /// The newest version of `user_key` visible at `seq`.
    pub fn get(&self, user_key: &[u8], seq: u64) -> Lookup {
        let lookup = make_internal_key(user_key, seq, KIND_FOR_SEEK);
        match self.map.lower_bound(Bound::Included(IKeyRef::new(&lookup))) {
            Some(e) if key::user_key(&e.key().0) == user_key => match key::kind(&e.key().0) {
                Some(ValueKind::Value) => Lookup::Found(e.value().to_vec()),
                _ => Lookup::Deleted,
            },
            _ => Lookup::NotFound,
        }
    }

    pub fn approximate_memory_usage(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.entries.load(AtomicOrdering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn largest_sequence(&self) -> u64 {
        self.largest_seq.load(AtomicOrdering::Relaxed)
    }
}

/// An iterator over a memtable that keeps the memtable alive.
pub struct MemTableIter {
    // Declared before `mem` so it is dropped first: it borrows from `mem`'s map.
    cur: Option<Entry<'static, IKey, Box<[u8]>>>,
    mem: Arc<MemTable>,
}

impl MemTableIter {
    pub fn new(mem: Arc<MemTable>) -> Self {
        MemTableIter { cur: None, mem }
    }

    fn extend(e: Option<Entry<'_, IKey, Box<[u8]>>>) -> Option<Entry<'static, IKey, Box<[u8]>>> {
        // SAFETY: the entry borrows the skiplist inside `self.mem`, an Arc we hold for at least as
        // long as the entry (field order guarantees the entry is dropped first), and memtables
        // never remove nodes, so the node outlives the entry.
        e.map(|e| unsafe { std::mem::transmute::<Entry<'_, _, _>, Entry<'static, _, _>>(e) })
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }
    fn seek_to_first(&mut self) {
        self.cur = Self::extend(self.mem.map.front());
    }
    fn seek_to_last(&mut self) {
        self.cur = Self::extend(self.mem.map.back());
    }
    fn seek(&mut self, target: &[u8]) {
        self.cur = Self::extend(self.mem.map.lower_bound(Bound::Included(IKeyRef::new(target))));
    }
    fn next(&mut self) {
        self.cur = Self::extend(self.cur.as_ref().and_then(|e| e.next()));
    }
    fn prev(&mut self) {
        self.cur = Self::extend(self.cur.as_ref().and_then(|e| e.prev()));
    }
    fn key(&self) -> &[u8] {
        self.cur.as_ref().map(|e| &e.key().0[..]).unwrap_or(&[])
    }
    fn value(&self) -> &[u8] {
        self.cur.as_ref().map(|e| &e.value()[..]).unwrap_or(&[])
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
        assert_eq!(fwd, vec![(b"a".to_vec(), b"2".to_vec()), (b"b".to_vec(), b"3".to_vec()), (b"b".to_vec(), b"1".to_vec())]);
        it.seek_to_last();
        assert_eq!(it.value(), b"1");
        it.prev();
        assert_eq!(it.value(), b"3");
    }
}
