//! Range tombstones: `delete_range(begin, end)` records one entry that deletes every key in
//! `[begin, end)` written at a lower sequence. A memtable keeps its tombstones beside the
//! skiplist, a table in its range-deletion block (docs/formats/sstable.md); readers gather the
//! tombstones of every source into [`RangeDelSet`]s and ask, for a key and a read sequence, the
//! newest tombstone that covers it.
//!
//! A set is built by *fragmenting* the tombstones: cutting them at every begin and end key into
//! non-overlapping pieces, each holding the sequences of the tombstones that span it (the
//! construction RocksDB's `FragmentedRangeTombstoneList` uses), so a query is two binary
//! searches.

use crate::key::compare_bytes;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// One range deletion: every key `k` with `begin <= k < end` written below `seq` is deleted.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RangeTombstone {
    pub begin: Vec<u8>,
    pub end: Vec<u8>,
    pub seq: u64,
}

impl RangeTombstone {
    /// Whether `[begin, end)` and the user-key interval `[lo, hi]` share a key.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        compare_bytes(lo, &self.end) == Ordering::Less
            && compare_bytes(&self.begin, hi) != Ordering::Greater
    }
}

/// A piece `[begin, end)` of the key space and the sequences (descending) of the tombstones
/// that span it.
#[derive(Clone, Debug)]
struct Fragment {
    begin: Vec<u8>,
    end: Vec<u8>,
    seqs: Vec<u64>,
}

/// Fragmented range tombstones: answers "the newest tombstone covering `k` visible at `seq`".
#[derive(Clone, Debug, Default)]
pub struct RangeDelSet {
    fragments: Vec<Fragment>,
    /// The tombstones the set was built from, sorted and without duplicates (what a flush or
    /// compaction writes out).
    tombstones: Vec<RangeTombstone>,
}

impl RangeDelSet {
    /// Fragments `tombs` (any order, duplicates allowed; empty ranges are ignored).
    pub fn new(tombs: impl IntoIterator<Item = RangeTombstone>) -> RangeDelSet {
        let mut tombstones: Vec<RangeTombstone> = tombs
            .into_iter()
            .filter(|t| compare_bytes(&t.begin, &t.end) == Ordering::Less)
            .collect();
        tombstones.sort();
        tombstones.dedup();
        let mut bounds: Vec<&[u8]> = tombstones
            .iter()
            .flat_map(|t| [t.begin.as_slice(), t.end.as_slice()])
            .collect();
        bounds.sort_unstable_by(|a, b| compare_bytes(a, b));
        bounds.dedup();
        // Sweep the boundaries left to right, keeping the tombstones that span the current
        // piece (by sequence, with a count for equal sequences of different tombstones).
        let mut active: BTreeMap<u64, usize> = BTreeMap::new();
        let mut ends: BTreeMap<&[u8], Vec<u64>> = BTreeMap::new();
        let mut next = 0;
        let mut fragments = Vec::new();
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            if let Some(seqs) = ends.remove(lo) {
                for s in seqs {
                    if let Some(c) = active.get_mut(&s) {
                        *c -= 1;
                        if *c == 0 {
                            active.remove(&s);
                        }
                    }
                }
            }
            while next < tombstones.len() && tombstones[next].begin.as_slice() == lo {
                let t = &tombstones[next];
                *active.entry(t.seq).or_default() += 1;
                ends.entry(t.end.as_slice()).or_default().push(t.seq);
                next += 1;
            }
            if !active.is_empty() {
                fragments.push(Fragment {
                    begin: lo.to_vec(),
                    end: hi.to_vec(),
                    seqs: active.keys().rev().copied().collect(),
                });
            }
        }
        RangeDelSet {
            fragments,
            tombstones,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tombstones.is_empty()
    }

    /// The tombstones, sorted by begin key, then end, then sequence.
    pub fn tombstones(&self) -> &[RangeTombstone] {
        &self.tombstones
    }

    /// The sequence of the newest tombstone at or below `read_seq` that covers `key`.
    pub fn max_covering(&self, key: &[u8], read_seq: u64) -> Option<u64> {
        let i = self
            .fragments
            .partition_point(|f| compare_bytes(&f.begin, key) != Ordering::Greater);
        let f = self.fragments.get(i.checked_sub(1)?)?;
        if compare_bytes(key, &f.end) != Ordering::Less {
            return None;
        }
        // Descending: the first sequence at or below `read_seq`.
        let j = f.seqs.partition_point(|&s| s > read_seq);
        f.seqs.get(j).copied()
    }

    /// Whether an entry of `key` written at `entry_seq` is deleted for a reader at `read_seq`.
    pub fn covers(&self, key: &[u8], entry_seq: u64, read_seq: u64) -> bool {
        self.max_covering(key, read_seq)
            .is_some_and(|t| t > entry_seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(b: &str, e: &str, seq: u64) -> RangeTombstone {
        RangeTombstone {
            begin: b.as_bytes().to_vec(),
            end: e.as_bytes().to_vec(),
            seq,
        }
    }

    /// The answer of a plain scan over the tombstones.
    fn naive(ts: &[RangeTombstone], key: &[u8], read_seq: u64) -> Option<u64> {
        ts.iter()
            .filter(|t| t.begin.as_slice() <= key && key < t.end.as_slice() && t.seq <= read_seq)
            .map(|t| t.seq)
            .max()
    }

    #[test]
    fn overlapping_tombstones_answer_as_a_scan_would() {
        let ts = vec![
            t("b", "f", 10),
            t("d", "k", 5),
            t("a", "c", 20),
            t("e", "e", 30),
            t("d", "k", 5),
            t("j", "m", 7),
        ];
        let s = RangeDelSet::new(ts.clone());
        assert_eq!(s.tombstones().len(), 4); // one duplicate, one empty range
        for k in [
            "", "a", "b", "bb", "c", "d", "e", "f", "j", "k", "l", "m", "z",
        ] {
            for read in [0, 4, 5, 6, 7, 9, 10, 19, 20, 100] {
                assert_eq!(
                    s.max_covering(k.as_bytes(), read),
                    naive(&ts, k.as_bytes(), read),
                    "{k} at {read}"
                );
            }
        }
        assert!(s.covers(b"c", 9, 100));
        assert!(!s.covers(b"c", 10, 100));
        assert!(!s.covers(b"c", 9, 9));
    }

    #[test]
    fn empty_and_inverted_ranges_cover_nothing() {
        let s = RangeDelSet::new(vec![t("b", "b", 3), t("c", "a", 4)]);
        assert!(s.is_empty());
        assert_eq!(s.max_covering(b"b", 10), None);
    }
}
