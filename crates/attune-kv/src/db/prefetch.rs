//! `prefetcher = tinfetch`: the engine's scan read-ahead combined with the TinFetch block
//! prefetcher (docs/tinfetch.md, "In the engine").
//!
//! Two sources of prefetches, each for what it can see:
//! - **Pointer hints.** A forward scan knows the value pointers it will read next: a second
//!   iterator runs ahead over the keys. How far ahead comes from the lengths of the last
//!   [`HISTORY_SCANS`] scans: standing at position `pos` of a scan, the values at the positions
//!   the median of the recent scans longer than `pos` reaches are hinted (each is read with
//!   probability at least one half), from the first read on, topped up when half of the window is
//!   used. Hinted values near each other in one segment (gaps up to [`MERGE_GAP`]) are merged into
//!   one read of at most [`MERGE_MAX`] bytes: a scan over values written in key order becomes a
//!   few large reads, one over scattered values many parallel small ones.
//! - **Block streams.** Value reads no hint covered (the first value of a scan, point reads,
//!   reads of other iterators) are what a block-layer prefetcher sees: they feed
//!   [`attune_io::prefetch::TinFetch`] by (segment, offset): readahead when a read continues the
//!   previous one of its stream, the network (with `prefetch_model`) otherwise. Its prefetches
//!   are tracked per 4 KiB block, so its feedback counts only hits on its own blocks: when they go
//!   unused its adaptive pause stops the network (backing off up to 64 epochs).
//!
//! The last [`TRACKED_BLOCKS`] prefetched blocks are remembered with their source and whether a
//! value read used them: blocks still waiting are not prefetched twice, a read whose blocks the
//! hints fetched is not shown to the block prefetcher, and the statistics report the bytes each
//! source fetched and the bytes a value read then used (the rest was wasted).
//!
//! Every part can be switched off ([`PrefetchSwitches`]). With few recorded scans (fewer than
//! [`MIN_HISTORY`]) or `history` off, the hint depth is the fixed rule's: `blob_prefetch_depth`
//! values once a scan has made two steps.
//!
//! Thread safety: one mutex around the shared state; iterators take it once per refill and value
//! reads once per read.

use crate::error::{Error, Result};
use crate::options::PrefetchSwitches;
use crate::vlog::{BlobFile, BlobPointer};
use attune_io::model::{InputKind, QuantizedMlp};
use attune_io::prefetch::{Access, PrefetchRange, Prefetcher as _, TinFetch, TinFetchConfig};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

/// Scan lengths remembered.
pub(crate) const HISTORY_SCANS: usize = 64;
/// Scans recorded before the history decides the hint depth.
pub(crate) const MIN_HISTORY: usize = 8;
/// Most values hinted ahead of a scan's position.
pub(crate) const HINT_MAX: u32 = 128;
/// Hinted values at most this far apart in a segment are read as one range.
pub(crate) const MERGE_GAP: u64 = 4 << 10;
/// Largest merged read.
pub(crate) const MERGE_MAX: u64 = 1 << 20;
/// Prefetched 4 KiB blocks remembered (the last 4 MiB).
pub(crate) const TRACKED_BLOCKS: usize = 1024;
const BLOCK: u64 = 4096;
/// The block prefetcher's network pauses while fewer than this many percent of the blocks it
/// fetched are read: its reads compete with the hints' for the device.
pub(crate) const PAUSE_YIELD_PCT: u8 = 25;
/// A scan's hints are topped up once this many more values are due (or half the window is used).
pub(crate) const REFILL_MIN: u32 = 8;
/// With `cap_hints`, most values hinted ahead of a scan's position (hints in flight).
pub(crate) const HINTS_IN_FLIGHT: u32 = 32;
/// With `block_throttle`, the block prefetcher's yield is judged every this many fetched blocks.
pub(crate) const BLOCK_WINDOW: u64 = 128;
/// Block-stream reads the block prefetcher's output is dropped for after a poor window; doubled
/// while windows stay poor, up to [`BLOCK_PAUSE_MAX`].
pub(crate) const BLOCK_PAUSE_MIN: u32 = 16;
pub(crate) const BLOCK_PAUSE_MAX: u32 = 1024;
/// A segment's offsets sit at `file << FILE_SHIFT` in the block prefetcher's address space, so
/// each segment is its own set of 8 MiB prefixes.
const FILE_SHIFT: u32 = 40;

/// Counters of `prefetcher = tinfetch` (all zero for the other settings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PrefetchStats {
    /// Values hinted, the reads they were merged into, and those reads' bytes.
    pub hint_values: u64,
    pub hint_reads: u64,
    pub hint_bytes: u64,
    /// Hinted bytes a value read then used.
    pub hint_used_bytes: u64,
    /// Value reads wholly covered by hints.
    pub hint_hits: u64,
    /// Value reads the block prefetcher saw (no hint covered them).
    pub block_stream_reads: u64,
    /// Block-prefetcher reads and their bytes (blocks already prefetched are not counted).
    pub block_reads: u64,
    pub block_bytes: u64,
    /// Block-prefetched bytes a value read then used.
    pub block_used_bytes: u64,
    /// Network inferences the block prefetcher ran.
    pub inferences: u64,
    /// Hint ranges found already in the page cache, so not asked for (`skip_resident`).
    pub hint_resident: u64,
    /// Block-prefetcher ranges dropped: in the page cache already, or while its reads were
    /// paused for going unused (`block_throttle`).
    pub block_resident: u64,
    /// Value reads no hint covered that the page cache served (`skip_resident`): not shown to
    /// the block prefetcher.
    pub block_stream_cached: u64,
    pub block_paused: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Src {
    Hint,
    Block,
    /// Covered by a hint, found in the page cache: nothing was read.
    Cached,
}

struct State {
    lengths: VecDeque<u32>,
    /// The last scan's value reads went to the device (slow).
    device_reads: bool,
    tin: Option<TinFetch>,
    /// (segment, 4 KiB block) -> (source, a read used it); FIFO-bounded by `order`.
    blocks: HashMap<(u64, u64), (Src, bool)>,
    order: VecDeque<(u64, u64)>,
    /// Blocks the block prefetcher fetched since the last read it saw.
    fetched_since: u64,
    /// `block_throttle`: blocks the block prefetcher fetched and blocks of it read, this window.
    win_fetched: u64,
    win_used: u64,
    /// Block-stream reads whose prefetches are still to be dropped, and the current pause.
    pause_left: u32,
    pause_len: u32,
    stats: PrefetchStats,
}

/// The shared state of `prefetcher = tinfetch` (one per open database).
pub(crate) struct ScanPrefetch {
    pub(crate) switches: PrefetchSwitches,
    /// The fixed rule's depth: before the history decides, or with `history` off.
    pub(crate) cold_depth: u32,
    st: Mutex<State>,
}

/// Reads a TinFetch weight file; the error names the file and what is wrong with it.
pub(crate) fn load_model(path: &str) -> Result<QuantizedMlp> {
    // A file the caller named that is not there is a bad argument; one that exists but cannot
    // be read is an I/O error (as `attune.io.prefetch.load_model` reports them).
    let bytes = std::fs::read(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::InvalidArgument(format!("prefetch_model {path:?}: no such file: {e}"))
        } else {
            Error::io("reading the prefetch model", path, e)
        }
    })?;
    let m = QuantizedMlp::from_bytes(&bytes).map_err(|e| match e {
        // The position is the one the weight-file reader found; the message says it once.
        attune_io::IoError::CorruptModel { offset, reason } => Error::corruption(
            Path::new(path),
            offset,
            format!("not a usable TinFetch weight file: {reason}"),
        ),
        attune_io::IoError::UnsupportedModelVersion { found, supported } => {
            Error::UnsupportedVersion {
                path: path.into(),
                found: u32::from(found),
                supported: u32::from(supported),
            }
        }
        other => Error::corruption(
            Path::new(path),
            0,
            format!("not a usable TinFetch weight file: {other}"),
        ),
    })?;
    if m.kind() != InputKind::TinFetch {
        return Err(Error::InvalidArgument(format!(
            "prefetch_model {path:?} is a {:?} model, not a TinFetch one (input kind 3)",
            m.kind()
        )));
    }
    Ok(m)
}

impl ScanPrefetch {
    pub(crate) fn new(
        switches: PrefetchSwitches,
        cold_depth: usize,
        model: Option<QuantizedMlp>,
    ) -> Result<Self> {
        let tin = if switches.block_streams {
            let cfg = TinFetchConfig {
                network: model.is_some(),
                adaptive: switches.throttle,
                pause_yield_pct: PAUSE_YIELD_PCT,
                // The engine keeps the depth and pause rules its benchmark was measured with
                // (one depth for every stream, up to 512 KiB; the pause judged by the yield of
                // every prefetch): the per-stream and network-only rules are tuned on block
                // traces, and the engine throttles the block prefetcher by its own feedback.
                stream_depth: false,
                depth_max: 4,
                network_yield: false,
                ..TinFetchConfig::default()
            };
            Some(
                TinFetch::new(cfg, model)
                    .map_err(|e| Error::InvalidArgument(format!("prefetcher=tinfetch: {e}")))?,
            )
        } else {
            None
        };
        Ok(Self {
            switches,
            cold_depth: u32::try_from(cold_depth).unwrap_or(HINT_MAX).min(HINT_MAX),
            st: Mutex::new(State {
                lengths: VecDeque::with_capacity(HISTORY_SCANS),
                device_reads: false,
                tin,
                blocks: HashMap::new(),
                order: VecDeque::new(),
                fetched_since: 0,
                win_fetched: 0,
                win_used: 0,
                pause_left: 0,
                pause_len: 0,
                stats: PrefetchStats::default(),
            }),
        })
    }

    pub(crate) fn stats(&self) -> PrefetchStats {
        let st = self.st.lock();
        PrefetchStats {
            inferences: st.tin.as_ref().map_or(0, |t| t.inferences),
            ..st.stats
        }
    }

    /// The recent scan lengths, sorted (empty while fewer than [`MIN_HISTORY`] are known or
    /// with `history` off), and whether recent value reads went to the device.
    pub(crate) fn snapshot(&self) -> (Vec<u32>, bool) {
        let st = self.st.lock();
        let mut v: Vec<u32> = if self.switches.history && st.lengths.len() >= MIN_HISTORY {
            st.lengths.iter().copied().collect()
        } else {
            Vec::new()
        };
        v.sort_unstable();
        (v, st.device_reads)
    }

    /// Records a finished scan: the values it read and whether any read went to the device.
    pub(crate) fn record_scan(&self, len: u32, device: bool) {
        let mut st = self.st.lock();
        if st.lengths.len() == HISTORY_SCANS {
            st.lengths.pop_front();
        }
        st.lengths.push_back(len);
        st.device_reads = device;
    }

    /// Notes `key` as prefetched by `src`; false when it is prefetched and not yet used (a
    /// used block is prefetched again: the reader's cache may have let it go).
    fn remember(st: &mut State, key: (u64, u64), src: Src) -> bool {
        match st.blocks.get_mut(&key) {
            Some((_, false)) => return false,
            Some(e) => {
                *e = (src, false);
                return true;
            }
            None => {}
        }
        st.blocks.insert(key, (src, false));
        st.order.push_back(key);
        while st.order.len() > TRACKED_BLOCKS {
            if let Some(old) = st.order.pop_front() {
                st.blocks.remove(&old);
            }
        }
        true
    }

    /// Issues hints for `ptrs` (in scan order): merged into ranges unless `merge` is off.
    pub(crate) fn hint(&self, blobs: &BTreeMap<u64, Arc<BlobFile>>, ptrs: &[BlobPointer]) {
        if ptrs.is_empty() {
            return;
        }
        // (file, start, end, first scan position): merged ranges are issued in the order the
        // scan needs them (a device serves a queue of reads roughly in order).
        let mut ranges: Vec<(u64, u64, u64, usize)> = Vec::with_capacity(ptrs.len());
        if self.switches.merge {
            let mut order: Vec<usize> = (0..ptrs.len()).collect();
            order.sort_unstable_by_key(|&i| (ptrs[i].file, ptrs[i].offset));
            for i in order {
                let p = &ptrs[i];
                let end = p.end();
                match ranges.last_mut() {
                    Some((f, a, b, first))
                        if *f == p.file
                            && p.offset <= b.saturating_add(MERGE_GAP)
                            && end.max(*b) - *a <= MERGE_MAX =>
                    {
                        *b = end.max(*b);
                        *first = (*first).min(i);
                    }
                    _ => ranges.push((p.file, p.offset, end, i)),
                }
            }
            ranges.sort_unstable_by_key(|r| r.3);
        } else {
            ranges.extend(
                ptrs.iter()
                    .enumerate()
                    .map(|(i, p)| (p.file, p.offset, p.end(), i)),
            );
        }
        let mut st = self.st.lock();
        st.stats.hint_values += ptrs.len() as u64;
        for (file, a, b, _) in ranges {
            let Some(f) = blobs.get(&file) else { continue };
            let mut fresh = 0u64;
            for blk in a / BLOCK..b.div_ceil(BLOCK) {
                if Self::remember(&mut st, (file, blk), Src::Hint) {
                    fresh += 1;
                }
            }
            if fresh == 0 {
                continue;
            }
            if self.switches.skip_resident && f.cached(a, b - a) == Some(true) {
                for blk in a / BLOCK..b.div_ceil(BLOCK) {
                    if let Some(e) = st.blocks.get_mut(&(file, blk)) {
                        e.0 = Src::Cached;
                    }
                }
                st.stats.hint_resident += 1;
                continue;
            }
            f.prefetch_range(a, b - a);
            st.stats.hint_reads += 1;
            st.stats.hint_bytes += fresh * BLOCK;
        }
    }

    /// A value read of `p` is about to happen: feedback for both sources, and the block
    /// prefetcher's turn when no hint covered it.
    pub(crate) fn on_read(&self, blobs: &BTreeMap<u64, Arc<BlobFile>>, p: &BlobPointer) {
        let mut st = self.st.lock();
        let (b0, b1) = (p.offset / BLOCK, p.end().div_ceil(BLOCK));
        let (mut hinted, mut block_hits) = (0u64, 0u64);
        for blk in b0..b1 {
            let Some((src, used)) = st.blocks.get_mut(&(p.file, blk)) else {
                continue;
            };
            let (src, first) = (*src, !*used);
            *used = true;
            let fresh = if first { BLOCK } else { 0 };
            match src {
                Src::Hint => {
                    hinted += 1;
                    st.stats.hint_used_bytes += fresh;
                }
                Src::Block => {
                    block_hits += 1;
                    st.stats.block_used_bytes += fresh;
                    if first {
                        st.win_used += 1;
                    }
                }
                Src::Cached => hinted += 1,
            }
        }
        let blocks = b1 - b0;
        if hinted == blocks {
            st.stats.hint_hits += 1;
            return;
        }
        if st.tin.is_none() {
            return;
        }
        // A read the page cache serves never reaches a block-layer prefetcher: with
        // `skip_resident` it is not shown to this one either.
        if self.switches.skip_resident
            && blobs
                .get(&p.file)
                .and_then(|f| f.cached(p.offset, u64::from(p.len)))
                == Some(true)
        {
            st.stats.block_stream_cached += 1;
            return;
        }
        let fetched_prev = std::mem::take(&mut st.fetched_since);
        let Some(tin) = st.tin.as_mut() else { return };
        let a = Access {
            time_ns: 0,
            offset: (p.file << FILE_SHIFT) + p.offset,
            size: u64::from(p.len).max(1),
            write: false,
            blocks,
            hit_blocks: block_hits,
            useful_blocks: block_hits,
            late_blocks: 0,
            fetched_prev_blocks: fetched_prev,
        };
        let mut out: Vec<PrefetchRange> = Vec::new();
        tin.access(&a, &mut out);
        st.stats.block_stream_reads += 1;
        if st.pause_left > 0 {
            st.pause_left -= 1;
            st.stats.block_paused += out.len() as u64;
            out.clear();
        }
        for r in out {
            let file = r.offset >> FILE_SHIFT;
            let off = r.offset & ((1u64 << FILE_SHIFT) - 1);
            let Some(f) = blobs.get(&file) else { continue };
            let Some(len) = f.prefetchable(off, r.len) else {
                continue;
            };
            if self.switches.skip_resident && f.cached(off, len) == Some(true) {
                st.stats.block_resident += 1;
                continue;
            }
            // Issue the runs of blocks not already prefetched.
            let (c0, c1) = (off / BLOCK, (off + len).div_ceil(BLOCK));
            let mut b = c0;
            while b < c1 {
                if !Self::remember(&mut st, (file, b), Src::Block) {
                    b += 1;
                    continue;
                }
                let mut e = b + 1;
                while e < c1 && Self::remember(&mut st, (file, e), Src::Block) {
                    e += 1;
                }
                f.prefetch_range(b * BLOCK, (e - b) * BLOCK);
                st.stats.block_reads += 1;
                st.stats.block_bytes += (e - b) * BLOCK;
                st.fetched_since += e - b;
                st.win_fetched += e - b;
                b = e;
            }
        }
        if self.switches.block_throttle && st.win_fetched >= BLOCK_WINDOW {
            let poor = st.win_used * 100 < st.win_fetched * u64::from(PAUSE_YIELD_PCT);
            st.pause_len = if poor {
                (st.pause_len * 2).clamp(BLOCK_PAUSE_MIN, BLOCK_PAUSE_MAX)
            } else {
                0
            };
            st.pause_left = st.pause_len;
            st.win_fetched = 0;
            st.win_used = 0;
        }
    }
}

/// The exclusive end of the scan positions to have hinted when a scan stands at `pos` (0: the
/// value the seek landed on), from the recent scan lengths `sorted`: the median of those longer
/// than `pos`, so every hinted value is read with probability at least one half (at most
/// [`HINT_MAX`] ahead). Without a history (`sorted` empty) the fixed rule: `cold` values once the
/// scan has made two steps; a scan longer than every recent one goes on `cold` values ahead.
pub(crate) fn hint_target(sorted: &[u32], pos: u32, cold: u32) -> u32 {
    let next = pos.saturating_add(1);
    let cap = next.saturating_add(HINT_MAX);
    if sorted.is_empty() {
        return if pos >= 2 {
            next.saturating_add(cold)
        } else {
            next
        };
    }
    let rest = &sorted[sorted.partition_point(|&l| l <= pos)..];
    if rest.is_empty() {
        return next.saturating_add(cold);
    }
    rest[rest.len() / 2].clamp(next, cap)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hint_target_reaches_the_median_of_longer_scans() {
        // No history: the fixed rule.
        assert_eq!(hint_target(&[], 0, 16), 1);
        assert_eq!(hint_target(&[], 1, 16), 2);
        assert_eq!(hint_target(&[], 2, 16), 19);
        // Lengths 1..=100 (YCSB E): at the seek, half of the scans read 51 values or more.
        let all: Vec<u32> = (1..=100).collect();
        assert_eq!(hint_target(&all, 0, 16), 51);
        // Of the scans longer than 60 (61..=100), half read 81 or more.
        assert_eq!(hint_target(&all, 60, 16), 81);
        // Longer than every recent scan: the fixed depth.
        assert_eq!(hint_target(&all, 100, 16), 117);
        // Point seeks only: nothing ahead.
        assert_eq!(hint_target(&[1; 64], 0, 16), 1);
        // Never more than HINT_MAX ahead.
        assert_eq!(hint_target(&[100_000; 64], 0, 16), 1 + HINT_MAX);
    }

    #[test]
    fn missing_and_damaged_models_name_the_file() {
        let err = load_model("/nonexistent/tinfetch.bin").err().unwrap();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(
            err.to_string().contains("/nonexistent/tinfetch.bin"),
            "{err}"
        );
        let dir = std::env::temp_dir().join(format!("attune-pf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // An existing path that cannot be read as a file is an I/O error, not a bad argument.
        let err = load_model(dir.to_str().unwrap()).err().unwrap();
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert!(err.to_string().contains("attune-pf-"), "{err}");
        let bad = dir.join("bad.bin");
        std::fs::write(&bad, b"ATIOMLP1 not really a model").unwrap();
        let err = load_model(bad.to_str().unwrap()).err().unwrap();
        assert!(matches!(err, Error::Corruption { .. }), "{err}");
        assert!(err.to_string().contains("bad.bin"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ranges_already_in_the_page_cache_are_not_asked_for() {
        use crate::env::{Env, PosixEnv};
        let dir = std::env::temp_dir().join(format!("attune-pf-cached-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = BlobFile::new(Arc::new(PosixEnv::new()) as Arc<dyn Env>, &dir, 7);
        std::fs::write(f.path(), vec![3u8; 1 << 20]).unwrap();
        // Read back: every page is in the page cache.
        assert_eq!(std::fs::read(f.path()).unwrap().len(), 1 << 20);
        let blobs: BTreeMap<u64, Arc<BlobFile>> = [(7, Arc::new(f))].into_iter().collect();
        let ptrs = |base: u64| -> Vec<BlobPointer> {
            (0..16)
                .map(|i| BlobPointer {
                    file: 7,
                    offset: base + i * 8192,
                    len: 4200,
                })
                .collect()
        };
        let on = ScanPrefetch::new(PrefetchSwitches::default(), 16, None).unwrap();
        on.hint(&blobs, &ptrs(0));
        let s = on.stats();
        assert_eq!(
            (s.hint_values, s.hint_resident, s.hint_reads),
            (16, 1, 0),
            "{s:?}"
        );
        let off = PrefetchSwitches {
            skip_resident: false,
            ..PrefetchSwitches::default()
        };
        let off = ScanPrefetch::new(off, 16, None).unwrap();
        off.hint(&blobs, &ptrs(0));
        let s = off.stats();
        assert_eq!(
            (s.hint_values, s.hint_resident, s.hint_reads),
            (16, 0, 1),
            "{s:?}"
        );
        // A read that covers hinted-but-cached blocks counts as covered by the hints.
        on.on_read(&blobs, &ptrs(0)[3]);
        assert_eq!(on.stats().hint_hits, 1);
        assert_eq!(on.stats().block_stream_reads, 0);
        // A read no hint covered, served by the page cache: not shown to the block prefetcher
        // (with `skip_resident` off it is).
        let far = BlobPointer {
            file: 7,
            offset: 900_000,
            len: 4200,
        };
        on.on_read(&blobs, &far);
        let s = on.stats();
        assert_eq!(
            (s.block_stream_cached, s.block_stream_reads),
            (1, 0),
            "{s:?}"
        );
        off.on_read(&blobs, &far);
        let s = off.stats();
        assert_eq!(
            (s.block_stream_cached, s.block_stream_reads),
            (0, 1),
            "{s:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn history_is_used_only_once_enough_scans_are_known() {
        let pf = ScanPrefetch::new(PrefetchSwitches::default(), 16, None).unwrap();
        for i in 0..MIN_HISTORY as u32 - 1 {
            pf.record_scan(10 + i, true);
        }
        assert!(pf.snapshot().0.is_empty());
        pf.record_scan(3, true);
        let (v, dev) = pf.snapshot();
        assert_eq!(v.len(), MIN_HISTORY);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        assert!(dev);
        for _ in 0..HISTORY_SCANS {
            pf.record_scan(5, false);
        }
        let (v, dev) = pf.snapshot();
        assert_eq!(v, vec![5; HISTORY_SCANS]);
        assert!(!dev);
        let off = PrefetchSwitches {
            history: false,
            ..PrefetchSwitches::default()
        };
        let pf = ScanPrefetch::new(off, 16, None).unwrap();
        for _ in 0..HISTORY_SCANS {
            pf.record_scan(5, true);
        }
        assert!(pf.snapshot().0.is_empty());
    }
}
