//! `delete_range` on the read path: a point lookup finds the key's newest entry as before, then
//! asks the range tombstones of the memtables and the version for the newest one covering the
//! key at the read sequence; the entry is visible only if it is newer. Iterators apply the same
//! test to every entry they pass. A database without range deletions pays one atomic load per
//! memtable and one flag test per read.

use super::{DbInner, SuperVersion, DB};
use crate::batch::WriteBatch;
use crate::error::Result;
use crate::iter::CoverFn;
use crate::memtable::rangedel::RangeDelSet;
use crate::memtable::{with_lookup_key, Lookup};
use crate::options::WriteOptions;
use std::sync::Arc;

impl DB {
    /// Deletes every key in `[begin, end)` as of now, atomically, with one write (a range
    /// tombstone; see docs/kv.md, "Range deletions"). `begin == end` deletes nothing;
    /// `begin > end` is an invalid argument.
    pub fn delete_range(&self, begin: &[u8], end: &[u8]) -> Result<()> {
        self.delete_range_opt(begin, end, WriteOptions::default())
    }

    pub fn delete_range_opt(&self, begin: &[u8], end: &[u8], wo: WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range(begin, end)?;
        if b.is_empty() {
            return Ok(());
        }
        self.write(b, wo)
    }
}

impl DbInner {
    /// The range tombstones a reader of `sv` must apply (empty when there are none).
    pub(super) fn range_del_sets(&self, sv: &SuperVersion) -> Result<Vec<Arc<RangeDelSet>>> {
        let mut sets = Vec::new();
        sets.extend(sv.mem.range_dels());
        if let Some(imm) = &sv.imm {
            sets.extend(imm.range_dels());
        }
        sets.extend(sv.version.range_dels(&self.tables)?);
        Ok(sets)
    }

    /// `r`, the newest entry of `key` at or below `seq`, or `Deleted` when a range tombstone
    /// at or below `seq` newer than that entry covers the key.
    pub(super) fn apply_range_dels(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        seq: u64,
        r: Lookup,
    ) -> Result<Lookup> {
        if matches!(r, Lookup::NotFound | Lookup::Deleted) {
            return Ok(r);
        }
        // No set gathered into a vector: this runs for every read that finds a value.
        let mut t = sv.mem.range_dels().and_then(|s| s.max_covering(key, seq));
        if let Some(imm) = &sv.imm {
            t = t.max(imm.range_dels().and_then(|s| s.max_covering(key, seq)));
        }
        if let Some(s) = sv.version.range_dels(&self.tables)? {
            t = t.max(s.max_covering(key, seq));
        }
        let Some(t) = t else {
            return Ok(r);
        };
        let mut newest = sv.mem.newest_seq(key, seq);
        if newest.is_none() {
            newest = sv.imm.as_ref().and_then(|m| m.newest_seq(key, seq));
        }
        if newest.is_none() {
            newest = with_lookup_key(key, seq, |k| sv.version.newest_seq(k, &self.tables))?;
        }
        Ok(match newest {
            Some(s) if s > t => r,
            _ => Lookup::Deleted,
        })
    }

    /// The test an iterator at `seq` over `sv` applies to each entry; None without range
    /// tombstones.
    pub(super) fn cover_fn(&self, sv: &SuperVersion, seq: u64) -> Result<Option<CoverFn>> {
        let sets = self.range_del_sets(sv)?;
        if sets.is_empty() {
            return Ok(None);
        }
        let set = if sets.len() == 1 {
            sets[0].clone()
        } else {
            Arc::new(RangeDelSet::new(
                sets.iter().flat_map(|s| s.tombstones().iter().cloned()),
            ))
        };
        Ok(Some(Box::new(move |uk: &[u8], entry_seq: u64| {
            set.covers(uk, entry_seq, seq)
        })))
    }
}
