//! Range tombstones across a version: the tables' tombstones gathered into one fragmented set
//! (on the first read that needs it, then shared by every reader of the version), and the
//! sequence of a key's newest entry, which decides whether a covering tombstone hides it.
//!
//! Tables keep their point-key bounds: a tombstone does not widen its file's range, so the
//! level invariants and file picking are unchanged. In exchange a reader asks every table's
//! tombstones, not only those of the files whose range holds the key; the set is built once
//! per version, and only for a database whose manifest says it holds range deletions.

use super::{find_file, FileMeta, TableCache, Version, NUM_LEVELS};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key;
use crate::memtable::rangedel::{RangeDelSet, RangeTombstone};
use crate::table::TableIter;
use std::sync::{Arc, OnceLock};

/// Where a version keeps its gathered tombstones (see [`Version::range_dels`]).
#[derive(Default)]
pub struct RangeDelSlot(OnceLock<Arc<RangeDelSet>>);

impl std::fmt::Debug for RangeDelSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.get() {
            Some(s) => write!(f, "{} range tombstones", s.tombstones().len()),
            None => f.write_str("-"),
        }
    }
}

impl Version {
    /// The range tombstones of every table of this version; None when the database never
    /// held one (no table is opened then). Opens the tables not yet open.
    pub fn range_dels(&self, tables: &TableCache) -> Result<Option<Arc<RangeDelSet>>> {
        if !self.range_deletions {
            return Ok(None);
        }
        if let Some(s) = self.range_dels.0.get() {
            return Ok((!s.is_empty()).then(|| s.clone()));
        }
        let mut all = Vec::new();
        for files in &self.files {
            for f in files {
                all.extend_from_slice(tables.table_of(f)?.range_tombstones());
            }
        }
        let s = self
            .range_dels
            .0
            .get_or_init(|| Arc::new(RangeDelSet::new(all)))
            .clone();
        Ok((!s.is_empty()).then_some(s))
    }

    /// The sequence of the newest entry of `user_key` in the tables at or below the sequence
    /// of `lookup` (an internal lookup key), searching as [`Version::get`] does: level 0
    /// newest file first, then one file per level.
    pub fn newest_seq(&self, lookup: &[u8], tables: &TableCache) -> Result<Option<u64>> {
        let uk = key::user_key(lookup);
        let found = |t: &Arc<crate::table::Table>| -> Result<Option<u64>> {
            let mut it = TableIter::new(t.clone(), true);
            it.seek(lookup);
            it.status()?;
            Ok((it.valid() && key::user_key(it.key()) == uk).then(|| key::sequence(it.key())))
        };
        for f in &self.files[0] {
            if f.contains_user_key(uk) {
                if let Some(s) = found(tables.table_of(f)?)? {
                    return Ok(Some(s));
                }
            }
        }
        for level in 1..NUM_LEVELS {
            let files = &self.files[level];
            if let Some(f) = files.get(find_file(files, lookup)) {
                if uk >= f.smallest_user() {
                    if let Some(s) = found(tables.table_of(f)?)? {
                        return Ok(Some(s));
                    }
                }
            }
        }
        Ok(None)
    }
}

/// Adds the tombstones of `ranges` to `b` and finishes it as table `number`. A table of
/// tombstones only gets the bounds of its tombstones (level 0 tolerates any overlap).
pub(crate) fn finish_with_tombstones(
    number: u64,
    mut b: crate::table::TableBuilder,
    ranges: Option<&RangeDelSet>,
) -> Result<FileMeta> {
    let Some(ranges) = ranges else {
        return FileMeta::finish(number, b);
    };
    for t in ranges.tombstones() {
        b.add_range_tombstone(t.clone());
    }
    let bounds = (b.num_entries() == 0).then(|| span(ranges.tombstones()));
    let mut f = FileMeta::finish(number, b)?;
    if let Some((smallest, largest)) = bounds {
        f.smallest = smallest;
        f.largest = largest;
    }
    Ok(f)
}

/// Internal keys spanning the user keys of `ts` (begin of the first to end of the last).
pub(crate) fn span(ts: &[RangeTombstone]) -> (Vec<u8>, Vec<u8>) {
    let lo = ts
        .iter()
        .map(|t| &t.begin)
        .min()
        .cloned()
        .unwrap_or_default();
    let hi = ts.iter().map(|t| &t.end).max().cloned().unwrap_or_default();
    (
        key::make_internal_key(&lo, key::MAX_SEQUENCE, key::KIND_FOR_SEEK),
        key::make_internal_key(&hi, 0, key::ValueKind::Deletion),
    )
}

/// The range tombstones of a compaction's inputs, and which of them its output keeps.
pub(crate) struct CompactionRanges {
    set: RangeDelSet,
    /// Tombstones the output keeps.
    kept: Vec<RangeTombstone>,
    smallest_snapshot: u64,
}

impl CompactionRanges {
    /// Gathers the inputs' tombstones. A tombstone is dropped once every snapshot sees it (the
    /// entries it covers are then dropped by this compaction) and no file outside the inputs,
    /// at any level, overlaps its range (no covered entry is left anywhere else).
    pub(crate) fn new(
        version: &Version,
        inputs: &[Vec<Arc<FileMeta>>; 2],
        tables: &TableCache,
        smallest_snapshot: u64,
    ) -> Result<CompactionRanges> {
        let mut all = Vec::new();
        if version.range_deletions {
            for f in inputs.iter().flatten() {
                all.extend_from_slice(tables.table_of(f)?.range_tombstones());
            }
        }
        let set = RangeDelSet::new(all);
        let inputs: std::collections::HashSet<u64> =
            inputs.iter().flatten().map(|f| f.number).collect();
        let kept = set
            .tombstones()
            .iter()
            .filter(|t| {
                t.seq > smallest_snapshot
                    || version.files.iter().flatten().any(|f| {
                        !inputs.contains(&f.number)
                            && t.overlaps(f.smallest_user(), f.largest_user())
                    })
            })
            .cloned()
            .collect();
        Ok(CompactionRanges {
            set,
            kept,
            smallest_snapshot,
        })
    }

    /// Whether a tombstone every snapshot sees covers the entry (`key`, `seq`): no reader can
    /// see the entry, so the output drops it.
    pub(crate) fn covers(&self, key: &[u8], seq: u64) -> bool {
        !self.set.is_empty() && self.set.covers(key, seq, self.smallest_snapshot)
    }

    /// The tombstones the output keeps.
    pub(crate) fn kept(&self) -> &[RangeTombstone] {
        &self.kept
    }
}
