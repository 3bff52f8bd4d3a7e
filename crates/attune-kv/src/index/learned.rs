//! Learned indexes inside the engine (Bourbon, Dai 2025 ch. 2; design: docs/learned-index.md).
//!
//! A table gets a model — attune-learn's Greedy-PLR over its user keys (keys of any length go
//! through the order-preserving key mapping) — after it has lived `learned_wait_ms` and the
//! cost-benefit [`Analyzer`] chose it (mode `analyzer`), or always (mode `always`). A lookup in a
//! table with a model asks the model for a window of record positions (±δ), fetches the block that
//! holds the window (never a second one unless the window crosses a block boundary) and searches
//! only the window; without a model it searches the index block and then the block (the baseline
//! path). Both paths return the same answer for every key (tests/integration/learned.rs checks it).
//!
//! Models are persisted beside their table as `NNNNNN.atlm` (docs/formats/learned-model.md),
//! written after learning, loaded when the table is opened, checked (checksum, structure, record
//! count) and rebuilt when damaged. They are a cache: deleting one costs a relearn, never data.
//! Training, persistence and loading need tables and versions, so they live above both, in
//! `crate::version::learn`; this module holds the models and the analyzer's state.
//!
//! Thread-safety: [`Learning`] is shared (`Arc`) by the table cache, every table and the learning
//! thread. Foreground lookups touch only atomics: striped counters, and sampled timings on the
//! table's [`FileStats`]; registration and the learning queue take short mutexes.

use crate::env::Env;
use crate::error::{Error, Result};
use crate::options::{LearnedIndex as Mode, Options};
use crate::util::filename;
use attune_learn::{Analyzer, AnalyzerConfig, FileStats, LearnedIndex, LookupPath, LookupResult};
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One lookup in this many is timed for the analyzer (all are counted). Default 16: two clock
/// reads cost about 40 ns, a few percent of an in-memory lookup; timing one in 16 keeps the
/// analyzer's means unbiased at a sixteenth of that.
pub const TIMING_SAMPLE: u64 = 16;

/// How one internal lookup is measured (see [`Learning::count`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample {
    /// Counted only.
    Untimed,
    /// Timed on the path the table offers (its model if it has one).
    Timed,
    /// Timed on the baseline path although the table has a model: the control sample.
    Control,
}

/// Device-read cost of a training pass, per byte of the table not in the OS page cache,
/// before any is measured. Default 12 ns: a 4 KiB page in about 50 µs, a random read from a
/// shared or virtual SSD (table mappings are advised `MADV_RANDOM`, so a pass over a cold mapped
/// table faults its pages in one at a time); the first cold training measured 12.6 ns in a
/// 256 MiB cgroup here (docs/learned-index.md). Each training that reads at least
/// `IO_MEASURE_MIN_BYTES` from the device measures the real price (its wall time beyond its CPU
/// time, per byte read), and the learner prices later tables by the running mean
/// (`IO_MEASURE_WEIGHT`; both in `crate::version::learn`). Neither counts what those reads
/// evict, so both err toward learning.
pub const LEARN_IO_NS_PER_BYTE: f64 = 12.0;

/// Counter slots; threads spread over them so that readers do not share a cache line.
const STRIPES: usize = 16;

#[repr(align(64))]
#[derive(Default)]
struct Slot {
    total: AtomicU64,
    model: AtomicU64,
}

thread_local! {
    static TICK: Cell<u64> = const { Cell::new(0) };
    static STRIPE: usize = {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        (NEXT.fetch_add(1, Ordering::Relaxed) as usize) % STRIPES
    };
}

/// A table's model, with the table's block geometry next to it for the lookup path.
pub struct TableModel {
    pub index: LearnedIndex,
    pub layout: TableLayout,
}

/// A table's block geometry, derived from its index block once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableLayout {
    /// Records per data block when every block but the last holds the same number (fixed-size
    /// records make that so): a position's block is then one division away.
    pub per_block: Option<u64>,
    /// Set when the table's records all have one size, sit uncompressed, and its blocks are
    /// equally spaced: a position's byte offset is then arithmetic (Bourbon's LoadChunk: no
    /// index entry, no offset array is read).
    pub fixed: Option<FixedLayout>,
}

/// A model over every record of a sorted level (Bourbon's level learning, for read-mostly
/// use): one Greedy-PLR over the user keys of the level's files in key order. A lookup asks it
/// for a window of level ordinals, which names the file (no search of the level's file list)
/// and the window inside it. It belongs to one exact set of files: a version change that
/// touches the level gives the level a new, empty slot ([`crate::version::LevelSlot`]).
pub struct LevelModel {
    pub index: LearnedIndex,
    /// `starts[i]` is the level ordinal of file `i`'s first record; the last entry is the
    /// level's record count (so `starts.len()` is the number of files plus one).
    pub starts: Vec<u64>,
}

/// First bytes of a level model file (docs/formats/learned-model.md, "Level model files").
const LEVEL_MAGIC: &[u8; 4] = b"ATLV";
const LEVEL_FORMAT_VERSION: u8 = 1;

impl LevelModel {
    pub fn bytes(&self) -> usize {
        self.index.size_bytes() + self.starts.len() * 8
    }

    /// The level model file's bytes: a checksummed header naming the level and its files, then
    /// the model in the ATLM format.
    pub fn encode(&self, level: usize, numbers: &[u64]) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + 16 * numbers.len());
        out.extend_from_slice(LEVEL_MAGIC);
        out.push(LEVEL_FORMAT_VERSION);
        out.push(u8::try_from(level).unwrap_or(u8::MAX));
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&(numbers.len() as u32).to_le_bytes());
        for n in numbers.iter().chain(&self.starts) {
            out.extend_from_slice(&n.to_le_bytes());
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&self.index.encode());
        out
    }

    /// Parses a level model file: (level, file numbers, model). Every field is checked; a
    /// damaged file is an error naming what is wrong.
    pub fn decode(b: &[u8], path: &Path) -> Result<(usize, Vec<u64>, LevelModel)> {
        let bad = |what: String| Error::corruption(path, 0, format!("level model: {what}"));
        if b.len() < 16 || &b[..4] != LEVEL_MAGIC {
            return Err(bad("not a level model file (magic ATLV)".into()));
        }
        if b[4] != LEVEL_FORMAT_VERSION {
            return Err(bad(format!("format version {} (this build reads 1)", b[4])));
        }
        let level = usize::from(b[5]);
        let count = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize;
        let words = count.checked_mul(2).and_then(|w| w.checked_add(1));
        let header = words
            .and_then(|w| w.checked_mul(8))
            .and_then(|w| w.checked_add(12))
            .filter(|&h| h.checked_add(4).is_some_and(|end| end <= b.len()))
            .ok_or_else(|| bad(format!("{count} files do not fit in {} bytes", b.len())))?;
        let want = u32::from_le_bytes([b[header], b[header + 1], b[header + 2], b[header + 3]]);
        if crc32c::crc32c(&b[..header]) != want {
            return Err(bad("header checksum mismatch".into()));
        }
        let word = |i: usize| {
            let o = 12 + 8 * i;
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(w)
        };
        let numbers: Vec<u64> = (0..count).map(word).collect();
        let starts: Vec<u64> = (count..2 * count + 1).map(word).collect();
        if starts.first() != Some(&0) || starts.windows(2).any(|w| w[1] < w[0]) {
            return Err(bad("file start ordinals are not increasing from 0".into()));
        }
        let index = LearnedIndex::decode(&b[header + 4..]).map_err(|e| bad(e.to_string()))?;
        if Some(&index.model().len()) != starts.last() {
            return Err(bad(
                "model and file ordinals disagree on the record count".into()
            ));
        }
        Ok((level, numbers, LevelModel { index, starts }))
    }
}

/// Byte geometry of a fixed-layout table (see [`TableLayout::fixed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedLayout {
    /// File offset of the first data block.
    pub first_offset: u64,
    /// Distance between the starts of consecutive data blocks (contents + trailer).
    pub block_stride: u64,
    /// Contents size of every data block but the last.
    pub block_size: u64,
    /// Contents size of the last data block.
    pub last_block_size: u64,
    /// Bytes per record: the two length varints, the internal key and the value.
    pub record_size: usize,
    /// Bytes of the two length varints before each key.
    pub header: usize,
    /// Internal-key length.
    pub key_len: usize,
    /// Per data block, the first 8 bytes of its index key's user key (zero-padded, big-endian):
    /// block `b` holds only keys below a lookup whose prefix is above `fences[b]`. A window
    /// that crosses blocks picks its block from these 8 bytes per block, contiguous, instead of
    /// decoding index entries (an offset read and varints per probe, scattered over the index
    /// block). 8 bytes per 4 KiB block: 0.2 % of the table.
    pub fences: Vec<u64>,
}

/// The fence of a user key: its first 8 bytes, zero-padded, as a big-endian number. For user
/// keys `a`, `b`: `fence(a) < fence(b)` implies `a < b`.
#[inline]
pub fn fence(user_key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = user_key.len().min(8);
    b[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(b)
}

impl TableModel {
    /// Memory of the model and of the block fences it searches with.
    pub fn bytes(&self) -> usize {
        let fences = self.layout.fixed.as_ref().map_or(0, |f| 8 * f.fences.len());
        self.index.size_bytes() + fences
    }
}

/// Counters published in `stats()`.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LearnStats {
    pub mode: String,
    pub delta: u32,
    /// Internal table lookups that reached the index (past the Bloom filter).
    pub total_lookups: u64,
    /// Of those, the ones a model served.
    pub learned_lookups: u64,
    pub files_registered: u64,
    pub files_learned: u64,
    pub files_loaded: u64,
    pub files_skipped: u64,
    /// Files learned without an estimate (the level had no statistics yet, or always mode).
    pub files_bootstrap: u64,
    /// Judgements of skipped files made again once they outlived their first judgement.
    pub files_rejudged: u64,
    /// Skipped files learned once the lookups they served reached break-even.
    pub files_breakeven: u64,
    /// Chosen tables put back because their training would have read more from the device
    /// than their choice pays for (`learned_io_cost`), and the bytes it would have read.
    pub files_deferred_io: u64,
    pub deferred_io_bytes: u64,
    /// The price of a byte a training reads from the device, ns (measured; see
    /// `learned_io_cost`).
    pub io_ns_per_byte: f64,
    /// Level models the background learner built after a level settled (`learned_level`).
    pub level_models_learned: u64,
    pub files_short_lived: u64,
    /// Models built but not installed: the keys collapse under the mapping, so the model would
    /// not beat the index (the file keeps the baseline path).
    pub files_unlearnable: u64,
    /// Persisted models rejected at load (damaged or for another file), then relearned; a
    /// damaged analyzer state counts here too.
    pub models_rejected: u64,
    /// The analyzer started from the statistics of an earlier open (`ANALYZER`).
    pub state_loaded: bool,
    pub learn_ns_total: u64,
    pub queue_len: u64,
    /// What the models of retired files saved, in lookup ns (the analyzer's accounting).
    pub benefit_realized_ns: f64,
    /// Of the retired files learned on an estimate: the estimated benefit, and what they saved.
    pub benefit_predicted_ns: f64,
    pub benefit_predicted_realized_ns: f64,
    /// The factor the analyzer scales estimated benefits by (1 with calibration off).
    pub benefit_calibration: f64,
    /// Measured training time per record (the cost side of the analyzer).
    pub train_ns_per_record: f64,
    /// Per-level statistics behind the analyzer's decisions (the benefit side).
    #[cfg_attr(feature = "serde", serde(skip))]
    pub levels: Vec<attune_learn::LevelSummary>,
    /// What each model trained since open cost and saved (retired and live files): the least
    /// learning any analyzer could have done at a given loss of lookup time.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub hindsight: attune_learn::Hindsight,
}

/// Engine-wide learned-index state (see the module doc).
pub struct Learning {
    pub mode: Mode,
    pub delta: u32,
    /// One timed lookup in this many of a learned table is a control (0: none; analyzer mode
    /// only, `Options::learned_control_sample`).
    control: u64,
    /// Whether a training's device reads count in its cost (`Options::learned_io_cost`).
    pub(crate) io_cost: bool,
    /// Measured device-read cost of training passes, ns per byte not in the page cache (f64
    /// bits; see [`LEARN_IO_NS_PER_BYTE`] for the starting value).
    pub(crate) io_ns_per_byte: AtomicU64,
    pub(crate) analyzer: Analyzer,
    epoch: Instant,
    slots: [Slot; STRIPES],
    /// Registered live files: number → (level, statistics handle).
    files: Mutex<HashMap<u64, (usize, Arc<FileStats>)>>,
    pub(crate) unlearnable: AtomicU64,
    pub(crate) rejected: AtomicU64,
    /// Level models the background learner built (online level learning).
    levels_learned: AtomicU64,
    /// Whether the analyzer started from statistics persisted by an earlier open.
    state_loaded: AtomicBool,
}

impl Learning {
    /// The state for `opts`, or `None` when learned indexes are off.
    pub fn new(opts: &Options) -> Result<Option<Arc<Learning>>> {
        if opts.learned_index == Mode::Off {
            return Ok(None);
        }
        let wait_ns = opts.learned_wait_ms.saturating_mul(1_000_000);
        let cfg = AnalyzerConfig {
            wait_ns,
            min_lifetime_ns: wait_ns,
            always_learn: opts.learned_index == Mode::Always,
            benefit: opts.learned_benefit,
            calibrate: opts.learned_calibrate,
            breakeven: opts.learned_breakeven,
            ..AnalyzerConfig::default()
        };
        let analyzer =
            Analyzer::new(cfg).map_err(|e| Error::InvalidArgument(format!("analyzer: {e}")))?;
        Ok(Some(Arc::new(Learning {
            mode: opts.learned_index,
            delta: opts.learned_delta,
            control: if opts.learned_index == Mode::Analyzer {
                opts.learned_control_sample
            } else {
                0
            },
            io_cost: opts.learned_io_cost,
            io_ns_per_byte: AtomicU64::new(LEARN_IO_NS_PER_BYTE.to_bits()),
            analyzer,
            epoch: Instant::now(),
            slots: Default::default(),
            files: Mutex::new(HashMap::new()),
            unlearnable: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            levels_learned: AtomicU64::new(0),
            state_loaded: AtomicBool::new(false),
        })))
    }

    /// Counts a level model the background learner built.
    pub(crate) fn level_learned(&self) {
        self.levels_learned.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Brings the registered files in line with `live` (number, level, bytes, records): new
    /// files are registered with the analyzer, files gone from the version are retired.
    /// Returns the handles of the newly registered files for attaching to open tables.
    pub fn sync_files(&self, live: &[(u64, usize, u64, u64)]) -> Vec<(u64, Arc<FileStats>)> {
        let now = self.now_ns();
        let mut files = self.files.lock();
        let mut added = Vec::new();
        let keep: std::collections::HashSet<u64> = live.iter().map(|f| f.0).collect();
        files.retain(|n, _| {
            let k = keep.contains(n);
            if !k {
                self.analyzer.retire(*n, now);
            }
            k
        });
        for &(n, level, bytes, records) in live {
            if files.contains_key(&n) {
                continue;
            }
            if let Some(fs) = self.analyzer.register(n, level, bytes, records, now) {
                files.insert(n, (level, fs.clone()));
                added.push((n, fs));
            }
        }
        added
    }

    /// Starts the analyzer from the statistics an earlier open saved (`ANALYZER`), so that it
    /// does not go back to the always-learn bootstrap. A damaged file is removed and counted in
    /// `models_rejected`; the analyzer then bootstraps as on a new database.
    pub fn load_state(&self, env: &dyn Env, dir: &Path) {
        let path = filename::analyzer_state_path(dir);
        if !env.exists(&path) {
            return;
        }
        match read_file(env, &path).map(|b| self.analyzer.restore_state(&b)) {
            Ok(Ok(())) => self.state_loaded.store(true, Ordering::Relaxed),
            _ => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                let _ = env.remove_file(&path);
            }
        }
    }

    /// Saves the analyzer's statistics as `ANALYZER` (atomically; at close).
    pub fn save_state(&self, env: &dyn Env, dir: &Path) -> Result<()> {
        let path = filename::analyzer_state_path(dir);
        crate::env::write_file_atomic(env, &path, &self.analyzer.encode_state())
    }

    /// The statistics handle of a registered file.
    pub fn file_stats(&self, number: u64) -> Option<Arc<FileStats>> {
        self.files.lock().get(&number).map(|(_, fs)| fs.clone())
    }

    /// Records one internal lookup of a table that has a model (`model`) or not, and says how
    /// to measure it (call before the lookup; then [`Learning::record_timed`] with the time).
    /// In analyzer mode one timed lookup in `learned_control_sample` of a learned table is a
    /// control: the caller takes the baseline path.
    #[inline]
    pub fn count(&self, model: bool) -> Sample {
        let v = TICK.with(|t| {
            let v = t.get().wrapping_add(1);
            t.set(v);
            v
        });
        let sample = if !v.is_multiple_of(TIMING_SAMPLE) {
            Sample::Untimed
        } else if model && self.control != 0 && (v / TIMING_SAMPLE).is_multiple_of(self.control) {
            Sample::Control
        } else {
            Sample::Timed
        };
        let stripe = STRIPE.with(|s| *s);
        let slot = &self.slots[stripe];
        slot.total.fetch_add(1, Ordering::Relaxed);
        if model && sample != Sample::Control {
            slot.model.fetch_add(1, Ordering::Relaxed);
        }
        sample
    }

    /// Records one internal lookup a level model served (never timed, never a control).
    #[inline]
    pub fn count_served_by_model(&self) {
        let slot = &self.slots[STRIPE.with(|s| *s)];
        slot.total.fetch_add(1, Ordering::Relaxed);
        slot.model.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a timed lookup (or a control) on the file's statistics, weighted for the
    /// untimed ones.
    #[inline]
    pub fn record_timed(fs: &FileStats, found: bool, sample: Sample, model: bool, nanos: u64) {
        let result = if found {
            LookupResult::Positive
        } else {
            LookupResult::Negative
        };
        if sample == Sample::Control {
            fs.record_control(result, nanos, TIMING_SAMPLE);
            return;
        }
        let path = if model {
            LookupPath::Model
        } else {
            LookupPath::Baseline
        };
        fs.record_weighted(result, path, nanos, TIMING_SAMPLE);
    }

    pub fn stats(&self) -> LearnStats {
        let a = self.analyzer.stats();
        let (mut total, mut model) = (0, 0);
        for s in &self.slots {
            total += s.total.load(Ordering::Relaxed);
            model += s.model.load(Ordering::Relaxed);
        }
        LearnStats {
            mode: self.mode.name().to_string(),
            delta: self.delta,
            total_lookups: total,
            learned_lookups: model,
            files_registered: a.files_registered,
            files_learned: a.files_learned,
            files_loaded: a.files_loaded,
            files_skipped: a.files_skipped,
            files_bootstrap: a.files_bootstrap,
            files_rejudged: a.files_rejudged,
            files_breakeven: a.files_breakeven,
            files_deferred_io: a.files_deferred_io,
            deferred_io_bytes: a.deferred_io_bytes,
            io_ns_per_byte: self.io_ns_per_byte(),
            level_models_learned: self.levels_learned.load(Ordering::Relaxed),
            files_short_lived: a.files_short_lived,
            files_unlearnable: self.unlearnable.load(Ordering::Relaxed),
            models_rejected: self.rejected.load(Ordering::Relaxed),
            state_loaded: self.state_loaded.load(Ordering::Relaxed),
            learn_ns_total: a.learn_ns_total,
            queue_len: a.queue_len,
            benefit_realized_ns: a.benefit_realized_ns,
            benefit_predicted_ns: a.benefit_predicted_ns,
            benefit_predicted_realized_ns: a.benefit_predicted_realized_ns,
            benefit_calibration: a.benefit_calibration,
            train_ns_per_record: self.analyzer.train_ns_per_record(),
            levels: self.analyzer.level_summaries(),
            hindsight: self.analyzer.hindsight(),
        }
    }
}

/// The bytes of the file at `path`.
pub(crate) fn read_file(env: &dyn Env, path: &Path) -> Result<Vec<u8>> {
    let f = env.open_random(path)?;
    let mut buf = vec![0u8; usize::try_from(f.size()).unwrap_or(0)];
    f.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use attune_learn::KeyMapper;

    #[test]
    fn a_smaller_fence_means_a_smaller_key() {
        let keys: [&[u8]; 9] = [
            b"",
            b"\0",
            b"ab",
            b"ab\0",
            b"ab\0\0\0\0\0\0z",
            b"abcdefgh",
            b"abcdefgh\xff",
            b"abcdefgi",
            b"user:0000123",
        ];
        for a in keys {
            for b in keys {
                if fence(a) < fence(b) {
                    assert!(a < b, "{a:?} {b:?}");
                }
                if a <= b {
                    assert!(fence(a) <= fence(b), "{a:?} {b:?}");
                }
            }
        }
    }

    fn level_model() -> LevelModel {
        let keys: Vec<[u8; 8]> = (0..5_000u64).map(|i| (i * 3).to_be_bytes()).collect();
        let mut b = LearnedIndex::builder_with_mapper(
            KeyMapper::for_keys(&keys[0], &keys[4_999], keys.iter().map(|k| &k[..])),
            8,
        )
        .unwrap();
        for k in &keys {
            b.push(k).unwrap();
        }
        LevelModel {
            index: b.finish(),
            starts: vec![0, 2_000, 5_000],
        }
    }

    #[test]
    fn level_model_file_round_trips_and_every_damage_is_an_error() {
        let m = level_model();
        let bytes = m.encode(2, &[7, 9]);
        let p = Path::new("LEVEL-2.atlm");
        let (level, numbers, back) = LevelModel::decode(&bytes, p).unwrap();
        assert_eq!((level, numbers), (2, vec![7, 9]));
        assert_eq!(back.starts, m.starts);
        for k in [0u64, 300, 14_997] {
            let key = k.to_be_bytes();
            assert_eq!(back.index.predict(&key), m.index.predict(&key));
        }
        for cut in 0..bytes.len() {
            assert!(
                LevelModel::decode(&bytes[..cut], p).is_err(),
                "truncated at {cut}"
            );
        }
        for i in 0..bytes.len() {
            let mut d = bytes.clone();
            d[i] ^= 0x40;
            assert!(LevelModel::decode(&d, p).is_err(), "byte {i} flipped");
        }
        let mut huge = bytes.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = LevelModel::decode(&huge, p).err().unwrap().to_string();
        assert!(e.contains("do not fit"), "{e}");
    }
}
