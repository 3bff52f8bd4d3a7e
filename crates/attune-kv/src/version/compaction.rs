//! Leveled compaction: which files to merge (picking) and the merge itself.
//!
//! Picking: each level gets a score — L0 by file count over `l0_compaction_trigger`, deeper levels
//! by bytes over their target (`max_bytes_for_level_base · multiplier^(level-1)`); the highest score
//! at or above 1 is compacted. L0 compactions take every L0 file (they may overlap) plus the L1
//! files they overlap; deeper levels take one file, round-robin after the level's compact pointer,
//! plus its overlap in the next level. A single file with no overlap below is moved, not rewritten.
//!
//! Intra-L0 (`l0_intra_compaction`): when an L0 compaction is due but the L1 files it would take
//! hold at least half as many bytes as L0 (the merge would mostly rewrite L1), every L0 file is
//! merged into one new L0 file instead, while L0 stays within twice L1's target size. L0 files are ordered by file
//! number, newest first, so the output must be newer than every input and older than every
//! later L0 file: the caller picks it only when no flush or ingest is in flight (nothing holds a
//! file number that could land in L0 with newer data) and numbers the output before it unlocks.
//!
//! Merging drops a version when a newer version of the same key is visible to every snapshot, and a
//! tombstone when additionally no deeper level can hold the key. Outputs are cut at
//! `target_file_size`, never between two versions of one user key.

use crate::env::{BulkIo, Env};
use crate::error::Result;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, ValueKind};
use crate::options::{FilterDecision, Options};
use crate::table::{Table, TableBuilder, TableBuilderOptions, TableIter};
use crate::util::filename;
use crate::version::{FileMeta, LevelIter, TableCache, TableOpener, Version, NUM_LEVELS};
use crate::vlog::BlobPointer;
use std::path::Path;
use std::sync::Arc;

/// A chosen compaction.
#[derive(Debug, Clone)]
pub struct Compaction {
    pub level: usize,
    /// inputs[0]: files of `level`; inputs[1]: overlapping files of `level + 1`.
    pub inputs: [Vec<Arc<FileMeta>>; 2],
    pub version: Arc<Version>,
    pub trivial_move: bool,
    /// Rewrites `inputs[0]` into `level` itself (to drop expired entries from the deepest
    /// level, or at level 0 to merge every L0 file into one); `inputs[1]` is empty.
    pub in_place: bool,
}

impl Compaction {
    pub fn output_level(&self) -> usize {
        if self.in_place {
            self.level
        } else {
            self.level + 1
        }
    }
    pub fn input_bytes(&self) -> u64 {
        self.inputs.iter().flatten().map(|f| f.size).sum()
    }
    /// Whether this merges L0 files into one L0 file (see the module documentation).
    pub fn intra_l0(&self) -> bool {
        self.in_place && self.level == 0
    }
}

/// Target size of a level (level >= 1).
pub fn max_bytes_for_level(opts: &Options, level: usize) -> u64 {
    let mut b = opts.max_bytes_for_level_base;
    for _ in 1..level {
        b = b.saturating_mul(opts.level_size_multiplier);
    }
    b
}

/// Scores of every level but the last (for stats and picking).
pub fn level_scores(v: &Version, opts: &Options) -> Vec<f64> {
    (0..NUM_LEVELS - 1)
        .map(|l| {
            if l == 0 {
                v.files[0].len() as f64 / opts.l0_compaction_trigger as f64
            } else {
                v.level_bytes(l) as f64 / max_bytes_for_level(opts, l) as f64
            }
        })
        .collect()
}

fn user_range(files: &[Arc<FileMeta>]) -> (Vec<u8>, Vec<u8>) {
    let lo = files
        .iter()
        .map(|f| f.smallest_user())
        .min()
        .unwrap_or(&[])
        .to_vec();
    let hi = files
        .iter()
        .map(|f| f.largest_user())
        .max()
        .unwrap_or(&[])
        .to_vec();
    (lo, hi)
}

/// Whether a due L0 compaction should merge L0 into itself rather than into L1: the L1 files an
/// L0→L1 would rewrite hold at least half as many bytes as L0 (the merge would write at least
/// 1.5 bytes per byte of L0), and L0 stays within twice L1's target. Only worth it with at
/// least two L0 files.
///
/// Why half: merging L0 now and into L1 at the next trigger writes about 2·|L0| + |new| + |L1|;
/// going down twice writes |L0| + |new| + 2·|L1|, and pushes L1 over its target twice. The two
/// are even at |L1| = |L0| when no key repeats between L0 files; overwrites of the same keys
/// (a skewed update stream) shrink the merged file, moving the break-even below |L0|.
pub fn prefers_intra_l0(v: &Version, opts: &Options) -> bool {
    let l0 = &v.files[0];
    if !opts.l0_intra_compaction || l0.len() < 2 {
        return false;
    }
    let l0_bytes: u64 = l0.iter().map(|f| f.size).sum();
    let (lo, hi) = user_range(l0);
    let l1_bytes: u64 = v
        .overlapping(1, Some(&lo), Some(&hi))
        .iter()
        .map(|f| f.size)
        .sum();
    l1_bytes.saturating_mul(2) >= l0_bytes
        && l0_bytes <= max_bytes_for_level(opts, 1).saturating_mul(2)
}

/// Picks the most urgent compaction, if any level scores >= 1. `intra_l0_safe`: no flush or
/// ingest is in flight, so an intra-L0 merge may be picked (see the module documentation).
pub fn pick(
    v: &Arc<Version>,
    opts: &Options,
    pointers: &[Vec<u8>; NUM_LEVELS],
    intra_l0_safe: bool,
) -> Option<Compaction> {
    let scores = level_scores(v, opts);
    let (level, score) = scores
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.partial_cmp(b.1).unwrap_or(std::cmp::Ordering::Equal))?;
    if *score < 1.0 {
        return None;
    }
    if level == 0 && intra_l0_safe && prefers_intra_l0(v, opts) {
        return Some(Compaction {
            level: 0,
            inputs: [v.files[0].clone(), Vec::new()],
            version: v.clone(),
            trivial_move: false,
            in_place: true,
        });
    }
    let first: Vec<Arc<FileMeta>> = if level == 0 {
        v.files[0].clone()
    } else {
        let files = &v.files[level];
        let ptr = &pointers[level];
        let f = files
            .iter()
            .find(|f| ptr.is_empty() || key::compare_internal(&f.largest, ptr).is_gt())
            .or_else(|| files.first())?;
        vec![f.clone()]
    };
    Some(with_overlap(v, level, first))
}

/// Builds a compaction of `first` (files of `level`) and their overlap in `level + 1`.
pub fn with_overlap(v: &Arc<Version>, level: usize, first: Vec<Arc<FileMeta>>) -> Compaction {
    let (lo, hi) = user_range(&first);
    let below = v.overlapping(level + 1, Some(&lo), Some(&hi));
    let trivial_move = level > 0 && first.len() == 1 && below.is_empty();
    Compaction {
        level,
        inputs: [first, below],
        version: v.clone(),
        trivial_move,
        in_place: false,
    }
}

/// Builds a rewrite of `files` (of `level` >= 1) into `level` itself.
pub fn in_place(v: &Arc<Version>, level: usize, files: Vec<Arc<FileMeta>>) -> Compaction {
    debug_assert!(
        level >= 1,
        "level-0 files overlap: only `pick` merges all of them in place"
    );
    Compaction {
        level,
        inputs: [files, Vec::new()],
        version: v.clone(),
        trivial_move: false,
        in_place: true,
    }
}

/// Result of running a compaction.
pub struct CompactionOutput {
    pub files: Vec<FileMeta>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub entries_dropped: u64,
    /// Entries the compaction filter removed or changed.
    pub entries_filtered: u64,
    /// Bytes of value-log records whose pointers were dropped, per segment.
    pub blob_garbage: std::collections::BTreeMap<u64, u64>,
}

/// Whether no level below `output_level` can hold `uk`.
fn is_base_level_for_key(v: &Version, output_level: usize, uk: &[u8]) -> bool {
    for level in output_level + 1..NUM_LEVELS {
        let files = &v.files[level];
        let i = files.partition_point(|f| f.largest_user() < uk);
        if files.get(i).is_some_and(|f| f.smallest_user() <= uk) {
            return false;
        }
    }
    true
}

/// Reads the separated value a pointer names, checking it belongs to the key (for the
/// compaction filter).
pub type BlobReader<'a> = dyn Fn(&BlobPointer, &[u8]) -> Result<Vec<u8>> + 'a;

/// Merges the inputs into new files of the output level. `new_file` allocates file numbers.
#[allow(clippy::too_many_arguments)] // each argument is a distinct dependency of the merge
pub fn run(
    c: &Compaction,
    env: &dyn Env,
    dir: &Path,
    opts: &Options,
    tables: &Arc<TableCache>,
    bulk: &BulkIo,
    smallest_snapshot: u64,
    new_file: &mut dyn FnMut() -> u64,
    shutting_down: &dyn Fn() -> bool,
    read_blob: &BlobReader<'_>,
    filter_above: u64,
) -> Result<CompactionOutput> {
    // Inputs come from the shared table cache, or (bulk I/O through pipes) from tables opened
    // for this merge on read-ahead files.
    let opener: Option<TableOpener> = match bulk {
        BulkIo::Env => None,
        BulkIo::Pipes(_) => {
            let (bulk, dir, cache) = (
                bulk.clone(),
                dir.to_path_buf(),
                tables.block_cache().clone(),
            );
            Some(Arc::new(move |f: &FileMeta| {
                let path = filename::table_path(&dir, f.number);
                let file = bulk
                    .open_sequential(&path)?
                    .ok_or_else(|| crate::error::Error::InvalidArgument("no pipes".into()))?;
                Ok(Arc::new(Table::open(file, path, f.number, cache.clone())?))
            }))
        }
    };
    let level_iter = |files: &Vec<Arc<FileMeta>>| {
        LevelIter::new(files.clone(), tables.clone(), false)
            .with_opener(opener.clone())
            .with_readahead(opts.compaction_readahead_bytes)
    };
    let now_ms = env.now_unix_millis();
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    if c.level == 0 {
        for f in &c.inputs[0] {
            let t = match &opener {
                Some(open) => open(f)?,
                None => tables.get(f.number)?,
            };
            children.push(Box::new(
                TableIter::new(t, false).with_readahead(opts.compaction_readahead_bytes),
            ));
        }
    } else {
        children.push(Box::new(level_iter(&c.inputs[0])));
    }
    children.push(Box::new(level_iter(&c.inputs[1])));
    let mut it = MergingIterator::new(children);
    it.seek_to_first();
    let ranges =
        super::ranges::CompactionRanges::new(&c.version, &c.inputs, tables, smallest_snapshot)?;

    let out_level = c.output_level();
    let bopts = TableBuilderOptions::from(opts);
    let mut out = CompactionOutput {
        files: Vec::new(),
        bytes_read: c.input_bytes(),
        bytes_written: 0,
        entries_dropped: 0,
        entries_filtered: 0,
        blob_garbage: Default::default(),
    };
    let mut builder: Option<(u64, TableBuilder)> = None;
    let mut current_user_key: Option<Vec<u8>> = None;
    let mut last_seq_for_key = u64::MAX;
    let mut count = 0u64;
    // Merge operands every snapshot sees, held until their key's base shows whether they fold
    // into one value (see `fold_merges`).
    let mut pending: Option<PendingMerge> = None;
    // Adds one entry to the output, starting a file when none is open.
    macro_rules! emit {
        ($k:expr, $v:expr) => {{
            if builder.is_none() {
                let n = new_file();
                let f = bulk.new_writable(env, &filename::table_path(dir, n))?;
                builder = Some((n, TableBuilder::new(f, bopts.clone())));
            }
            if let Some((_, b)) = builder.as_mut() {
                b.add($k, $v)?;
            }
        }};
    }

    while it.valid() {
        count += 1;
        if count.is_multiple_of(4096) && shutting_down() {
            return Err(crate::error::Error::Closed(
                "shutting down during compaction".into(),
            ));
        }
        let ikey = it.key();
        let Some(parsed) = key::parse_internal_key(ikey) else {
            return Err(crate::error::Error::corruption(
                dir,
                0,
                "bad internal key in compaction input",
            ));
        };
        let new_user_key = current_user_key.as_deref() != Some(parsed.user_key);
        let covered = ranges.covers(parsed.user_key, parsed.sequence);
        if let Some(mut p) = pending.take() {
            let fold = if !new_user_key {
                if parsed.kind == ValueKind::Merge
                    && parsed.sequence <= smallest_snapshot
                    && !covered
                {
                    p.operands.push((ikey.to_vec(), it.value().to_vec()));
                    pending = Some(p);
                    it.next();
                    continue;
                }
                merge_base(&parsed, it.value(), covered, now_ms, read_blob)
            } else if is_base_level_for_key(&c.version, out_level, &p.user_key) {
                Some(None) // the bottom of the tree for this key: nothing under the operands
            } else {
                None
            };
            if let Some(base) = &fold {
                last_seq_for_key = p.newest_sequence();
                let (k, v) = fold_merges(opts, &p, base.as_deref(), out_level, filter_above)?;
                out.entries_dropped += p.operands.len() as u64 - 1;
                emit!(&k, &v);
            } else {
                for (k, v) in &p.operands {
                    emit!(k, v);
                }
            }
        }
        if new_user_key {
            // Cut the output only at a user-key boundary; an intra-L0 merge writes one file
            // (its one file number was taken before L0 could grow, see the module docs).
            if !c.intra_l0()
                && builder
                    .as_ref()
                    .is_some_and(|(_, b)| b.file_size_estimate() >= opts.target_file_size)
            {
                if let Some((n, b)) = builder.take() {
                    finish_output(n, b, &mut out)?;
                }
            }
            current_user_key = Some(parsed.user_key.to_vec());
            last_seq_for_key = u64::MAX;
        }
        // An entry past its expiry reads as a deletion in every view, so it becomes one: a
        // tombstone, or nothing where a deletion would be dropped.
        let expired = match key::split_expiry(parsed.kind, it.value()) {
            Some((at, _)) => at.is_some_and(|at| at <= now_ms),
            None => {
                return Err(crate::error::Error::corruption(
                    dir,
                    0,
                    "expiring entry shorter than its expiry in compaction input",
                ))
            }
        };
        // The user's filter sees the newest version of a key here, when no snapshot can see it
        // (its sequence is above every snapshot's: `filter_above`); merge operands only as
        // the values they fold into.
        // A range tombstone that every snapshot sees hides this entry from every reader.
        let mut decision = FilterDecision::Keep;
        if let Some(f) = opts.compaction_filter.as_deref().filter(|_| {
            new_user_key
                && !covered
                && !expired
                && parsed.kind != ValueKind::Deletion
                && parsed.kind != ValueKind::Merge
                && parsed.sequence > filter_above
        }) {
            let payload = key::split_expiry(parsed.kind, it.value()).map_or(&[][..], |(_, p)| p);
            decision = if parsed.kind.is_blob() {
                let p = BlobPointer::decode(payload).ok_or_else(|| {
                    crate::error::Error::corruption(dir, 0, "malformed value pointer in compaction")
                })?;
                // A separated value that cannot be read is left alone: its segment may be
                // gone because a newer version above this compaction replaced the entry (a
                // collection moved it), and real damage is for reads and `verify` to report.
                match read_blob(&p, parsed.user_key) {
                    Ok(v) => f.filter(out_level, parsed.user_key, &v),
                    Err(_) => FilterDecision::Keep,
                }
            } else {
                f.filter(out_level, parsed.user_key, payload)
            };
            if decision != FilterDecision::Keep {
                out.entries_filtered += 1;
            }
        }
        let removed = expired || decision == FilterDecision::Remove;
        let drop = if last_seq_for_key <= smallest_snapshot || covered {
            true // a newer version or a range deletion is visible to every snapshot
        } else {
            (parsed.kind == ValueKind::Deletion || removed)
                && parsed.sequence <= smallest_snapshot
                && is_base_level_for_key(&c.version, out_level, parsed.user_key)
        };
        // An operand hides nothing below it: only a value or a deletion shadows older versions.
        if parsed.kind != ValueKind::Merge {
            last_seq_for_key = parsed.sequence;
        }
        if !drop
            && parsed.kind == ValueKind::Merge
            && parsed.sequence <= smallest_snapshot
            && opts.merge_operator.is_some()
        {
            // Every snapshot sees this operand: hold it until its base shows.
            pending = Some(PendingMerge {
                user_key: parsed.user_key.to_vec(),
                operands: vec![(ikey.to_vec(), it.value().to_vec())],
            });
            it.next();
            continue;
        }
        let rewritten = matches!(decision, FilterDecision::Change(_));
        if drop || removed || rewritten {
            if let Some(p) =
                key::blob_payload(parsed.kind, it.value()).and_then(BlobPointer::decode)
            {
                *out.blob_garbage.entry(p.file).or_default() += u64::from(p.len);
            }
        }
        if drop {
            out.entries_dropped += 1;
        } else {
            if builder.is_none() {
                let n = new_file();
                let f = bulk.new_writable(env, &filename::table_path(dir, n))?;
                builder = Some((n, TableBuilder::new(f, bopts.clone())));
            }
            if let Some((_, b)) = builder.as_mut() {
                if removed {
                    let tombstone = key::make_internal_key(
                        parsed.user_key,
                        parsed.sequence,
                        ValueKind::Deletion,
                    );
                    b.add(&tombstone, &[])?;
                } else if let FilterDecision::Change(v) = &decision {
                    // Same sequence and expiry, stored inline.
                    let at = key::split_expiry(parsed.kind, it.value()).and_then(|(at, _)| at);
                    let (kind, value) = match at {
                        Some(at) => {
                            let mut e = at.to_le_bytes().to_vec();
                            e.extend_from_slice(v);
                            (ValueKind::ExpiringValue, e)
                        }
                        None => (ValueKind::Value, v.clone()),
                    };
                    b.add(
                        &key::make_internal_key(parsed.user_key, parsed.sequence, kind),
                        &value,
                    )?;
                } else {
                    b.add(ikey, it.value())?;
                }
            }
        }
        it.next();
    }
    it.status()?;
    if let Some(p) = pending.take() {
        if is_base_level_for_key(&c.version, out_level, &p.user_key) {
            let (k, v) = fold_merges(opts, &p, None, out_level, filter_above)?;
            out.entries_dropped += p.operands.len() as u64 - 1;
            emit!(&k, &v);
        } else {
            for (k, v) in &p.operands {
                emit!(k, v);
            }
        }
    }
    let kept = ranges.kept();
    if builder.is_none() && !kept.is_empty() {
        let n = new_file();
        let f = bulk.new_writable(env, &filename::table_path(dir, n))?;
        builder = Some((n, TableBuilder::new(f, bopts.clone())));
    }
    if let Some((n, mut b)) = builder.take() {
        for t in kept {
            b.add_range_tombstone(t.clone());
        }
        let empty = b.num_entries() == 0;
        let mut f = FileMeta::finish(n, b)?;
        if empty {
            // Tombstones only: the bounds of the inputs' last key, which no other file of the
            // output level holds and no other output of this compaction reached.
            let last = c
                .inputs
                .iter()
                .flatten()
                .map(|f| &f.largest)
                .max_by(|a, b| key::compare_internal(a, b));
            f.smallest = last.cloned().unwrap_or_default();
            f.largest = f.smallest.clone();
        }
        out.bytes_written += f.size;
        out.files.push(f);
    }
    Ok(out)
}

/// Merge operands of one key, newest first, with no snapshot between them (all at or below
/// the smallest snapshot).
struct PendingMerge {
    user_key: Vec<u8>,
    /// (internal key, operand), newest first.
    operands: Vec<(Vec<u8>, Vec<u8>)>,
}

impl PendingMerge {
    fn newest_sequence(&self) -> u64 {
        self.operands.first().map_or(0, |(k, _)| key::sequence(k))
    }
}

/// What the entry under a run of merge operands makes of them: `Some(Some(v))` a base value,
/// `Some(None)` no base (a deletion, an expired or range-deleted entry), `None` they cannot
/// fold here (a base that will expire, which the folded value could not follow; an operand a
/// snapshot separates; a separated base that cannot be read).
fn merge_base(
    parsed: &key::ParsedKey<'_>,
    value: &[u8],
    covered: bool,
    now_ms: u64,
    read_blob: &BlobReader<'_>,
) -> Option<Option<Vec<u8>>> {
    if covered || parsed.kind == ValueKind::Deletion {
        return Some(None);
    }
    let (at, payload) = key::split_expiry(parsed.kind, value)?;
    match at {
        Some(at) if at <= now_ms => return Some(None),
        Some(_) => return None,
        None => {}
    }
    match parsed.kind {
        ValueKind::Value => Some(Some(payload.to_vec())),
        ValueKind::BlobIndex => {
            let p = BlobPointer::decode(payload)?;
            read_blob(&p, parsed.user_key).ok().map(Some)
        }
        _ => None,
    }
}

/// The one entry a run of operands over `base` becomes: the full merge as a value at the
/// newest operand's sequence, or what the compaction filter makes of it (a tombstone when it
/// removes the key). The base and every older version are then shadowed for every snapshot.
fn fold_merges(
    opts: &Options,
    p: &PendingMerge,
    base: Option<&[u8]>,
    out_level: usize,
    filter_above: u64,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let seq = p.newest_sequence();
    let op = opts
        .merge_operator
        .as_ref()
        .ok_or_else(|| crate::merge::no_operator(&p.user_key))?;
    let ops: Vec<&[u8]> = p.operands.iter().rev().map(|(_, v)| v.as_slice()).collect();
    let mut v = op.full_merge(&p.user_key, base, &ops)?;
    if let Some(f) = opts
        .compaction_filter
        .as_deref()
        .filter(|_| seq > filter_above)
    {
        match f.filter(out_level, &p.user_key, &v) {
            FilterDecision::Keep => {}
            FilterDecision::Change(nv) => v = nv,
            FilterDecision::Remove => {
                return Ok((
                    key::make_internal_key(&p.user_key, seq, ValueKind::Deletion),
                    Vec::new(),
                ))
            }
        }
    }
    Ok((
        key::make_internal_key(&p.user_key, seq, ValueKind::Value),
        v,
    ))
}

fn finish_output(number: u64, b: TableBuilder, out: &mut CompactionOutput) -> Result<()> {
    let f = FileMeta::finish(number, b)?;
    out.bytes_written += f.size;
    out.files.push(f);
    Ok(())
}
