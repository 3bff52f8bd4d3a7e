//! Bourbon's cost-benefit analyzer (Dai 2025 §2.3.4): decides which files to learn, and in what
//! order, from measured lookup statistics. Pure and engine-independent: the engine tells it when
//! files appear and disappear, records each internal lookup on the file's [`FileStats`], reports
//! training times, and asks for the next file to learn.
//!
//! The rules, as in the source:
//!
//! * **Wait before learning**: a file becomes a candidate only after it has lived
//!   `wait_ns` (T_wait, default 50 ms); files retired earlier are never learned.
//! * **Cost**: `C = t_rec · records`, where `t_rec` is the measured training time per record
//!   (running average of the engine's reports; a documented default before the first report).
//! * **Benefit**: `B = (T_nb − T_nm)·N_n + (T_pb − T_pm)·N_p`. `T_nb`, `T_pb` are this file's
//!   own baseline-path lookup times during its wait (the level's baseline averages if it served
//!   none); `T_nm`, `T_pm` are the model-path averages of retired files at the same level; `N_n`,
//!   `N_p` are the average negative/positive internal lookups per retired file at the level,
//!   scaled by `f = size / average retired file size at the level`. Files that lived less than
//!   `min_lifetime_ns` do not enter the statistics.
//! * **Bootstrap**: until a level has `min_retired_files` retired files, every waited file of
//!   that level is learned (always-learn, T_wait still applies).
//! * **Order**: chosen files wait in a max-priority queue on `B − C` (bootstrap files first, in
//!   creation order); a file is learned only if `B > C`.
//!
//! Choices where the source is silent (docs/learned-index.md): a term whose model-path time is
//! unknown at the level contributes no benefit (conservative); level statistics are halved when
//! a level has retired `level_window_files` files, so they follow workload changes.
//!
//! Beyond the source ([`Benefit`]): the source counts a file's lifetime lookups, but a model
//! serves only the lookups that come after it exists, which is after the wait and the training.
//! When files live a few times T_wait (the write-heavy case the analyzer exists for), that
//! overstates the benefit by half or more. [`Benefit::Remaining`] (the default) counts only the
//! lookups still to come: the file's own lookup rate so far (shrunk toward its level's) times
//! its expected remaining life (from the lifetimes of the level's retired files) less the
//! training time. A file it skips is judged again each time its age doubles
//! ([`RECHECK_MIN_NS`]): statistics lag behind a change of workload, and a file that outlives
//! what its level predicted has more life left than it seemed. [`Benefit::Lifetime`] keeps the
//! source's formula and its single judgement.
//!
//! Accounting: for every retired file that had a model, the analyzer adds up what the model
//! actually saved (its model-path lookups times the gap between the level's baseline and the
//! file's model-path time) and, for files learned on an estimate, what was predicted, so that
//! `stats()` shows whether learning paid for itself ([`AnalyzerStats`]).
//!
//! Time is injected: every call that needs "now" takes `now_ns` from the caller's clock (the
//! engine's `Env`), so decisions are deterministic in tests.
//!
//! Thread-safety: [`Analyzer`] is `Send + Sync`. [`FileStats::record`] is lock-free (relaxed
//! atomic adds) for the foreground path; registration, retirement, polling and popping take one
//! short internal mutex. Invariants: each file is queued at most once; the queue and the pending
//! list never hold more than the live files (bounded by `files_max`).

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{LearnError, Result};
use crate::hindsight::Hindsight;

/// T_wait in nanoseconds. Default 50 ms: the source's value (its largest per-file learning time
/// was about 40 ms, rounded up; waiting about one learning time is 2-competitive).
pub const WAIT_NS_DEFAULT: u64 = 50_000_000;

/// Retired files a level needs before its statistics are trusted. Default 4: an average of fewer
/// files is dominated by one file's luck; small enough that bootstrap ends within seconds.
pub const MIN_RETIRED_FILES_DEFAULT: u64 = 4;

/// Retired files after which a level's sums are halved. Default 64: statistics then reflect
/// roughly the last 64-128 files of the level.
pub const LEVEL_WINDOW_FILES_DEFAULT: u64 = 64;

/// Pseudo-evidence of the calibration factor (see [`Analyzer::calibration`]), in predicted
/// nanoseconds at a factor of 1. Default 8 ms: about eight tables' predictions (a 1 MiB table's
/// is about 1 ms in the write sweep), so one table's luck moves the factor little and a few
/// dozen retired tables decide it.
pub const CALIBRATION_PRIOR_NS: f64 = 8_000_000.0;

/// Predicted nanoseconds after which the calibration sums are halved. Default 64 ms: the factor
/// follows roughly the last 64-128 tables chosen on an estimate, so it tracks a phase change
/// (the write sweep's phases each learn a few hundred tables).
pub const CALIBRATION_WINDOW_NS: f64 = 64_000_000.0;

/// Bounds of the calibration factor. Default [1/4, 4]: the estimate was off by 1.3-5.9× in
/// either direction in the write sweep; a factor beyond that is more likely noise.
pub const CALIBRATION_RANGE: (f64, f64) = (0.25, 4.0);

/// Control samples a level needs before its warm baseline replaces the cold one (see
/// [`FileStats::record_control`]). Default 8: with one timed lookup in 64 sent down the
/// baseline path, a level collects that within its first few retired learned tables.
pub const CONTROL_MIN_SAMPLES: f64 = 8.0;

/// Pseudo-evidence of a level's learnability (see [`Analyzer::unlearnable`]), in trainings
/// that gave a usable model. Default 2: a level starts out learnable, and one useless model
/// among its first few trainings moves the estimate by a third, not to zero.
pub const LEARNABLE_PRIOR: f64 = 2.0;

/// Trainings of a level after which its learnability counts are halved. Default 32: the
/// estimate follows the level's last 32-64 trainings, so it tracks a change of the level's
/// key distribution within one write phase of the sweep.
pub const LEARNABLE_WINDOW: f64 = 32.0;

/// Training nanoseconds per record assumed before the engine reports a measurement. Default 10:
/// Greedy-PLR's measured cost is about 5-7 ns per `u64` key and 8-13 ns per 16-byte key through
/// the key mapper (thread CPU time, docs/learned-index.md); the engine's iteration adds more.
pub const TRAIN_NS_PER_RECORD_DEFAULT: f64 = 10.0;

/// Timed lookups slower than this are counted but left out of the mean times. Default 1 ms: on
/// a loaded machine such samples are preemptions (a scheduler slice lasts milliseconds), and one
/// of them outweighs a thousand in-memory lookups, so mean baseline and model times would follow
/// the scheduler rather than the index (seen in the write sweep: a level's model path measured
/// slower than its baseline). Far above a device read on an SSD (about 0.1 ms).
pub const TIMING_OUTLIER_NS: u64 = 1_000_000;

/// Weight, in timed lookups, of the level's baseline mean when it is blended with a new file's
/// own (see [`blend`]). Default 16: a file timed a few times during its wait (one lookup in 16 is
/// timed) is judged mostly by its level; one timed a hundred times mostly by itself.
pub const LEVEL_PRIOR_SAMPLES: f64 = 16.0;

/// A new file's baseline lookup time: its own mean over `n` timed lookups, shrunk toward the
/// level's mean as if the level contributed [`LEVEL_PRIOR_SAMPLES`] lookups. The source uses the
/// file's own times; a file timed only a handful of times during its wait (one lookup in 16 is
/// timed) has a noisy mean, and one slow first touch of its pages — which a model would not
/// remove — can make it look worth learning. Either mean alone when the other is unknown.
fn blend(file: Option<f64>, n: f64, level: Option<f64>) -> Option<f64> {
    match (file, level) {
        (Some(f), Some(l)) => Some((f * n + l * LEVEL_PRIOR_SAMPLES) / (n + LEVEL_PRIOR_SAMPLES)),
        (f, l) => f.or(l),
    }
}

/// The (baseline, model-path) lookup times a decision about `file` reads for one kind of
/// lookup. Baseline: the file's own mean blended with its level's. Model path: the level's mean
/// blended with the pooled ratio (below) times that baseline, so a level that timed only a
/// handful of model lookups — one slow first touch of a freshly loaded table's pages made a
/// level's model path look 20 % slower than its baseline in the write sweep — is judged mostly
/// by the model paths of all levels.
fn path_times(
    file: &FileStats,
    lv: &LevelStats,
    levels: &[LevelStats],
    result: LookupResult,
) -> (Option<f64>, Option<f64>) {
    let cold = blend(
        file.mean_ns(result, LookupPath::Baseline),
        file.timed_samples(result, LookupPath::Baseline) as f64,
        lv.mean_ns(result, LookupPath::Baseline),
    );
    // The model will serve the file's later, warm lookups: where the level has a control
    // sample, the baseline they would otherwise have cost is the warm one (the file's own
    // control sample, once learned, blended with the level's).
    let (own, n) = file.control_mean_ns(result);
    let base = match lv.control_mean_ns(result) {
        Some(warm) => blend(own, n, Some(warm)),
        None => own.filter(|_| n >= CONTROL_MIN_SAMPLES).or(cold),
    };
    let pooled = cold
        .zip(pooled_model_ratio(levels, result))
        .map(|(b, r)| b * r);
    let model = blend(
        lv.mean_ns(result, LookupPath::Model),
        lv.timed[slot(result, LookupPath::Model)],
        pooled,
    );
    (base, model)
}

/// What a retired file's model saved: for each kind of lookup, its model-path lookups times
/// the gap between the baseline time and the file's model-path time (its own mean blended with
/// its level's), both as in [`path_times`]. Negative when the model path was slower.
fn realized_ns(file: &FileStats, lv: &LevelStats, levels: &[LevelStats]) -> f64 {
    let mut saved = 0.0;
    for result in [LookupResult::Negative, LookupResult::Positive] {
        let served = file.lookups(result, LookupPath::Model) as f64;
        let (base, level_model) = path_times(file, lv, levels, result);
        let model = blend(
            file.mean_ns(result, LookupPath::Model),
            file.timed_samples(result, LookupPath::Model) as f64,
            level_model,
        );
        if let (Some(b), Some(m)) = (base, model) {
            saved += served * (b - m);
        }
    }
    saved
}

/// What a model would have saved on the lookups `file` served so far (both kinds), weighed by
/// its level's learnability: the rent side of the break-even rule ([`Analyzer::poll`]).
fn served_saving_ns(file: &FileStats, lv: &LevelStats, levels: &[LevelStats]) -> f64 {
    let mut saved = 0.0;
    for result in [LookupResult::Negative, LookupResult::Positive] {
        if let (Some(b), Some(m)) = path_times(file, lv, levels, result) {
            saved += (b - m).max(0.0) * file.lookups_both(result) as f64;
        }
    }
    saved * lv.learnability()
}

/// Model-path time over baseline time for one kind of lookup, pooled (weighted by timed
/// lookups) over the levels that measured both: the prior for every level's model-path time,
/// and the stand-in for a level that has none (no learned file retired there yet, for instance
/// because the analyzer skipped them all — without it such a level would contribute no
/// benefit, learn nothing and so never measure one).
fn pooled_model_ratio(levels: &[LevelStats], result: LookupResult) -> Option<f64> {
    let (m, b) = (
        slot(result, LookupPath::Model),
        slot(result, LookupPath::Baseline),
    );
    let (mut mn, mut mt, mut bn, mut bt) = (0.0, 0.0, 0.0, 0.0);
    for lv in levels {
        if lv.timed[m] > 0.0 && lv.timed[b] > 0.0 {
            mn += lv.nanos[m];
            mt += lv.timed[m];
            bn += lv.nanos[b];
            bt += lv.timed[b];
        }
    }
    (mt > 0.0 && bn > 0.0).then(|| (mn / mt) / (bn / bt))
}

/// Most live files tracked. Default 2^20: far above an LSM's file count; registrations beyond it
/// are refused (the file simply stays on the baseline path).
pub const FILES_MAX_DEFAULT: usize = 1 << 20;

/// Number of levels tracked. Default 16: more than any leveled LSM uses (LevelDB has 7).
pub const LEVELS_MAX: usize = 16;

/// Buckets of the per-level lifetime histogram: bucket 0 holds lives under 2^20 ns (about
/// 1 ms), bucket k lives in [2^(19+k), 2^(20+k)) ns. Default 32: the last bucket starts at
/// about 12 days, beyond any file's life that matters here.
pub(crate) const LIFE_BUCKETS: usize = 32;

/// How much observation time the level's lookup rate is worth when it is blended with a new
/// file's own rate (see [`Benefit::Remaining`]), in ns. Default 50 ms: one source T_wait, so a
/// file judged at the end of its wait counts its own rate and the level's equally.
pub const RATE_PRIOR_NS: f64 = 50_000_000.0;

/// With [`Benefit::Remaining`], a skipped file is judged again once it has lived as long again
/// as when it was skipped (so at 2, 4, 8, ... times its first age), but not sooner than this.
/// Statistics lag behind a change of workload — after a write-only load, a level's retired
/// files lived briefly and served nothing — and a file that outlives what its level predicted
/// is worth more than it looked. Default 10 ms: a few learner polls; the doubling bounds the
/// judgements of a file to about log2(life / T_wait).
pub const RECHECK_MIN_NS: u64 = 10_000_000;

/// How the analyzer estimates the lookups a model would serve (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benefit {
    /// The source's: the level's lookups per retired file over its whole life, scaled by size.
    Lifetime,
    /// The lookups still to come once the model exists (Attune's default).
    Remaining,
}

impl Benefit {
    /// The option's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Benefit::Lifetime => "lifetime",
            Benefit::Remaining => "remaining",
        }
    }

    /// Parses the option's spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "lifetime" | "source" => Some(Benefit::Lifetime),
            "remaining" => Some(Benefit::Remaining),
            _ => None,
        }
    }
}

fn life_bucket(life_ns: u64) -> usize {
    ((64 - (life_ns >> 19).leading_zeros()) as usize).min(LIFE_BUCKETS - 1)
}

/// Analyzer configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalyzerConfig {
    /// T_wait (see [`WAIT_NS_DEFAULT`]).
    pub wait_ns: u64,
    /// Retired files with a shorter life are left out of the statistics. Default: `wait_ns`
    /// (the source filters "very short-lived files" without a number).
    pub min_lifetime_ns: u64,
    /// See [`MIN_RETIRED_FILES_DEFAULT`].
    pub min_retired_files: u64,
    /// See [`LEVEL_WINDOW_FILES_DEFAULT`].
    pub level_window_files: u64,
    /// See [`TRAIN_NS_PER_RECORD_DEFAULT`].
    pub train_ns_per_record_default: f64,
    /// See [`FILES_MAX_DEFAULT`].
    pub files_max: usize,
    /// Skip the cost-benefit test and learn every file that outlives T_wait ("always" mode).
    pub always_learn: bool,
    /// How the benefit is estimated. Default [`Benefit::Remaining`].
    pub benefit: Benefit,
    /// Scale estimated benefits by how much the models chosen on an estimate really saved
    /// (see [`Analyzer::calibration`]). Default false (raw estimates, as the source judges
    /// them): the savings it calibrates against are themselves overstated (docs/learned-index.md
    /// "Calibration"), and calibrated runs learned more, not less.
    pub calibrate: bool,
    /// Learn a skipped file once the lookups it served would have paid for its training had
    /// it had a model (see [`Analyzer::poll`], "break-even"). Default true; false keeps the
    /// estimate's judgement alone.
    pub breakeven: bool,
}

impl Default for AnalyzerConfig {
    fn default() -> Self {
        Self {
            wait_ns: WAIT_NS_DEFAULT,
            min_lifetime_ns: WAIT_NS_DEFAULT,
            min_retired_files: MIN_RETIRED_FILES_DEFAULT,
            level_window_files: LEVEL_WINDOW_FILES_DEFAULT,
            train_ns_per_record_default: TRAIN_NS_PER_RECORD_DEFAULT,
            files_max: FILES_MAX_DEFAULT,
            always_learn: false,
            benefit: Benefit::Remaining,
            calibrate: false,
            breakeven: true,
        }
    }
}

/// Outcome of an internal lookup in one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupResult {
    /// The key was not in the file.
    Negative,
    /// The key was found in the file.
    Positive,
}

/// Which path served an internal lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupPath {
    /// Index block (no model yet, or models off).
    Baseline,
    /// Learned model.
    Model,
}

fn slot(result: LookupResult, path: LookupPath) -> usize {
    (result as usize) * 2 + path as usize
}

/// Per-file statistics handle, shared between the engine's file object and the analyzer.
#[derive(Debug)]
pub struct FileStats {
    id: u64,
    level: usize,
    size_bytes: u64,
    records: u64,
    created_ns: u64,
    /// Per (result, path): lookup count, timed lookups kept for the mean (see
    /// [`TIMING_OUTLIER_NS`]) and their summed nanoseconds.
    counts: [AtomicU64; 4],
    timed: [AtomicU64; 4],
    nanos: [AtomicU64; 4],
    learned: AtomicBool,
    /// Queued for learning (so that a judgement or the break-even scan does not queue it twice).
    chosen: AtomicBool,
    /// The benefit estimated when the file was chosen on an estimate (f64 bits; 0: none).
    predicted_bits: AtomicU64,
    /// Training time of its model (0: not trained here, e.g. loaded from disk).
    train_ns: AtomicU64,
    /// Device-read cost of a training pass, when the engine deferred the file because its
    /// blocks were not in memory (f64 bits; 0: never deferred). See [`Analyzer::admit_io`].
    io_cost_bits: AtomicU64,
    /// Control sample (see [`FileStats::record_control`]): timed lookups of the learned file
    /// sent down the baseline path, and their summed ns, per result (negative, positive).
    control_timed: [AtomicU64; 2],
    control_nanos: [AtomicU64; 2],
}

impl FileStats {
    /// Records one internal lookup (lock-free; call from any thread).
    #[inline]
    pub fn record(&self, result: LookupResult, path: LookupPath, nanos: u64) {
        self.record_weighted(result, path, nanos, 1);
    }

    /// Records `weight` internal lookups of which one was timed at `nanos` (sampled timing: an
    /// engine that times one lookup in `weight` keeps its counts and mean times while reading
    /// the clock `weight` times less often). A time above [`TIMING_OUTLIER_NS`] is counted but
    /// not averaged.
    #[inline]
    pub fn record_weighted(&self, result: LookupResult, path: LookupPath, nanos: u64, weight: u64) {
        let i = slot(result, path);
        self.counts[i].fetch_add(weight, Ordering::Relaxed);
        if nanos <= TIMING_OUTLIER_NS {
            self.timed[i].fetch_add(1, Ordering::Relaxed);
            self.nanos[i].fetch_add(nanos, Ordering::Relaxed);
        }
    }

    /// Records `weight` lookups of a learned file of which one, timed at `nanos`, went down
    /// the baseline path as a control: the lookups count as model-path ones (the file serves
    /// them with its model but for this one), the time as the file's *warm* baseline. A
    /// table's baseline times are otherwise taken while it is young and its pages cold, its
    /// model times later and warm, so their difference credits the model with the warm-up too;
    /// the control sample compares both paths at the same age.
    #[inline]
    pub fn record_control(&self, result: LookupResult, nanos: u64, weight: u64) {
        self.counts[slot(result, LookupPath::Model)].fetch_add(weight, Ordering::Relaxed);
        if nanos <= TIMING_OUTLIER_NS {
            let r = result as usize;
            self.control_timed[r].fetch_add(1, Ordering::Relaxed);
            self.control_nanos[r].fetch_add(nanos, Ordering::Relaxed);
        }
    }

    fn control_mean_ns(&self, result: LookupResult) -> (Option<f64>, f64) {
        let r = result as usize;
        let c = self.control_timed[r].load(Ordering::Relaxed);
        let mean = (c > 0).then(|| self.control_nanos[r].load(Ordering::Relaxed) as f64 / c as f64);
        (mean, c as f64)
    }

    /// The file's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The file's level.
    pub fn level(&self) -> usize {
        self.level
    }

    /// Records in the file.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// True once the engine reported a model for this file.
    pub fn is_learned(&self) -> bool {
        self.learned.load(Ordering::Acquire)
    }

    /// Lookups recorded for (result, path).
    pub fn lookups(&self, result: LookupResult, path: LookupPath) -> u64 {
        self.counts[slot(result, path)].load(Ordering::Relaxed)
    }

    /// Timed lookups behind [`FileStats::mean_ns`].
    fn timed_samples(&self, result: LookupResult, path: LookupPath) -> u64 {
        self.timed[slot(result, path)].load(Ordering::Relaxed)
    }

    fn mean_ns(&self, result: LookupResult, path: LookupPath) -> Option<f64> {
        let i = slot(result, path);
        let c = self.timed[i].load(Ordering::Relaxed);
        (c > 0).then(|| self.nanos[i].load(Ordering::Relaxed) as f64 / c as f64)
    }

    /// Lookups of a kind on both paths.
    fn lookups_both(&self, result: LookupResult) -> u64 {
        self.lookups(result, LookupPath::Baseline) + self.lookups(result, LookupPath::Model)
    }
}

/// Summed statistics of the retired files of one level.
#[derive(Clone, Debug, Default)]
pub(crate) struct LevelStats {
    pub(crate) files: f64,
    pub(crate) size_bytes: f64,
    pub(crate) counts: [f64; 4],
    pub(crate) timed: [f64; 4],
    pub(crate) nanos: [f64; 4],
    /// Control samples of its retired learned files (negative, positive): timed lookups and
    /// their summed ns. Not persisted: after a reopen the level's first retirements refill them.
    pub(crate) control_timed: [f64; 2],
    pub(crate) control_nanos: [f64; 2],
    /// Retired files and their summed lives (ns) per lifetime bucket ([`life_bucket`]).
    pub(crate) life_files: [f64; LIFE_BUCKETS],
    pub(crate) life_ns: [f64; LIFE_BUCKETS],
    /// Tables of the level trained, and how many of those gave no usable model (decayed by
    /// [`LEARNABLE_WINDOW`], not by retirements: a level may train many tables before one
    /// retires).
    pub(crate) trained: f64,
    pub(crate) useless: f64,
}

impl LevelStats {
    fn mean_ns(&self, result: LookupResult, path: LookupPath) -> Option<f64> {
        let i = slot(result, path);
        (self.timed[i] > 0.0).then(|| self.nanos[i] / self.timed[i])
    }

    /// Mean warm baseline time from the control samples, once there are
    /// [`CONTROL_MIN_SAMPLES`] of them.
    fn control_mean_ns(&self, result: LookupResult) -> Option<f64> {
        let r = result as usize;
        (self.control_timed[r] >= CONTROL_MIN_SAMPLES)
            .then(|| self.control_nanos[r] / self.control_timed[r])
    }

    /// Expected share of the level's trainings that give a usable model (Laplace-smoothed
    /// with [`LEARNABLE_PRIOR`] usable ones).
    fn learnability(&self) -> f64 {
        (self.trained - self.useless + LEARNABLE_PRIOR) / (self.trained + LEARNABLE_PRIOR)
    }

    /// Average lookups of a kind (both paths) per retired file.
    fn lookups_per_file(&self, result: LookupResult) -> f64 {
        let c = self.counts[slot(result, LookupPath::Baseline)]
            + self.counts[slot(result, LookupPath::Model)];
        c / self.files.max(1.0)
    }

    /// Mean life of the retired files, in ns.
    fn mean_life_ns(&self) -> Option<f64> {
        let n: f64 = self.life_files.iter().sum();
        (n > 0.0).then(|| self.life_ns.iter().sum::<f64>() / n)
    }

    /// Expected remaining life of a file that has lived `age_ns`: the mean of `life - age` over
    /// the retired files that lived longer (each bucket stands at its mean life). A file older
    /// than every retired file is expected to live as long again as it has (nothing retired
    /// says otherwise, and a level's survivors are its long-lived files). `None` without
    /// retired files.
    fn remaining_life_ns(&self, age_ns: f64) -> Option<f64> {
        let (mut files, mut sum, mut any) = (0.0, 0.0, false);
        for (&n, &life) in self.life_files.iter().zip(&self.life_ns) {
            if n <= 0.0 {
                continue;
            }
            any = true;
            let mean = life / n;
            if mean > age_ns {
                files += n;
                sum += n * (mean - age_ns);
            }
        }
        match (any, files > 0.0) {
            (false, _) => None,
            (true, true) => Some(sum / files),
            (true, false) => Some(age_ns),
        }
    }

    fn halve(&mut self) {
        self.files /= 2.0;
        self.size_bytes /= 2.0;
        let sums = self.counts.iter_mut().chain(self.timed.iter_mut());
        let sums = sums
            .chain(self.control_timed.iter_mut())
            .chain(self.control_nanos.iter_mut());
        let lives = self.life_files.iter_mut().chain(self.life_ns.iter_mut());
        for v in sums.chain(self.nanos.iter_mut()).chain(lives) {
            *v /= 2.0;
        }
    }
}

/// What the analyzer decided for a file that finished its wait.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Decision {
    /// Learn: the level has no statistics yet (always-learn bootstrap) or `always_learn` is set.
    LearnBootstrap,
    /// Learn: the estimated benefit exceeds the cost (both in nanoseconds).
    Learn {
        /// Estimated B_model.
        benefit_ns: f64,
        /// Estimated C_model.
        cost_ns: f64,
    },
    /// Learn a skipped file: the lookups it served would have paid for its model (the
    /// break-even rule, see [`Analyzer::poll`]).
    BreakEven {
        /// What a model would have saved on those lookups.
        saved_ns: f64,
        /// Estimated C_model.
        cost_ns: f64,
    },
    /// Do not learn: the cost is at least the benefit.
    Skip {
        /// Estimated B_model.
        benefit_ns: f64,
        /// Estimated C_model.
        cost_ns: f64,
    },
}

/// Counters for `stats()`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AnalyzerStats {
    /// Files registered.
    pub files_registered: u64,
    /// Files retired before their wait ended (never considered).
    pub files_short_lived: u64,
    /// Files chosen for learning (bootstrap or benefit).
    pub files_chosen: u64,
    /// Of those, the ones chosen without an estimate: the level had no statistics yet
    /// (always-learn bootstrap), or always-learn mode.
    pub files_bootstrap: u64,
    /// Files the cost-benefit test rejected (and did not choose later).
    pub files_skipped: u64,
    /// Judgements of skipped files made again (see [`RECHECK_MIN_NS`]).
    pub files_rejudged: u64,
    /// Skipped files learned because the lookups they served reached break-even (see
    /// [`Analyzer::poll`]).
    pub files_breakeven: u64,
    /// Chosen files put back because a training pass would have read more from the device
    /// than the file's choice could pay for (see [`Analyzer::admit_io`]); they are learned only
    /// by the break-even rule, with that I/O added to their cost.
    pub files_deferred_io: u64,
    /// Bytes a training pass would have read from the device for the deferred files.
    pub deferred_io_bytes: u64,
    /// Files the engine reported as learned.
    pub files_learned: u64,
    /// Files whose persisted model was loaded instead of trained.
    pub files_loaded: u64,
    /// Registrations refused because `files_max` files were live.
    pub files_refused: u64,
    /// Total training nanoseconds reported.
    pub learn_ns_total: u64,
    /// Files waiting in the priority queue.
    pub queue_len: u64,
    /// Lookup time the models of retired files saved, in ns: per file, its model-path lookups
    /// times (baseline time − its model-path time), the baseline blended as in the estimate.
    pub benefit_realized_ns: f64,
    /// Of the retired files learned on an estimate (not bootstrap or always-learn): the
    /// benefit estimated when they were chosen, and what their models saved.
    pub benefit_predicted_ns: f64,
    pub benefit_predicted_realized_ns: f64,
    /// The factor estimated benefits are scaled by when judged (1 with `calibrate` off).
    pub benefit_calibration: f64,
}

/// What the analyzer knows about one level (for `stats()`: why it learns or skips files).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelSummary {
    pub level: usize,
    /// Retired files in the statistics (after halving, so fractional).
    pub retired_files: f64,
    /// Average internal lookups per retired file: negative, positive.
    pub lookups_per_file: [f64; 2],
    /// Mean lookup times on the baseline path: negative, positive (None: none measured).
    pub baseline_ns: [Option<f64>; 2],
    /// Mean lookup times on the model path: negative, positive.
    pub model_ns: [Option<f64>; 2],
}

/// A skipped file's next judgement (see [`RECHECK_MIN_NS`]).
#[derive(Debug)]
struct RecheckEntry {
    due_ns: u64,
    seq: u64,
    file: Arc<FileStats>,
}

impl PartialEq for RecheckEntry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl Eq for RecheckEntry {}
impl PartialOrd for RecheckEntry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for RecheckEntry {
    /// Earliest due first (the heap is a max-heap, so the order is reversed).
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.due_ns, other.seq).cmp(&(self.due_ns, self.seq))
    }
}

#[derive(Debug)]
struct QueueEntry {
    priority: f64,
    seq: u64,
    file: Arc<FileStats>,
}

impl PartialEq for QueueEntry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl Eq for QueueEntry {}
impl PartialOrd for QueueEntry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for QueueEntry {
    /// Higher priority first; among equals, the older registration (smaller seq) first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        self.priority
            .total_cmp(&other.priority)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

#[derive(Debug, Default)]
pub(crate) struct Inner {
    live: HashMap<u64, (Arc<FileStats>, u64)>,
    pending: VecDeque<(Arc<FileStats>, u64)>,
    queue: BinaryHeap<QueueEntry>,
    /// Skipped files waiting to be judged again, earliest first.
    recheck: BinaryHeap<RecheckEntry>,
    /// Skipped files watched by the break-even rule (see [`Analyzer::poll`]).
    skipped: Vec<(Arc<FileStats>, u64)>,
    pub(crate) levels: Vec<LevelStats>,
    seq: u64,
    stats: AnalyzerStats,
    /// Cost and saving of the retired learned files (see [`Hindsight`]).
    hindsight: Hindsight,
    /// Decayed sums behind the calibration factor: estimated benefit of retired tables chosen
    /// on an estimate, and what their models saved.
    pub(crate) calib_predicted_ns: f64,
    pub(crate) calib_realized_ns: f64,
    pub(crate) train_ns: f64,
    pub(crate) train_records: f64,
}

/// The cost-benefit analyzer (see the module doc).
#[derive(Debug)]
pub struct Analyzer {
    cfg: AnalyzerConfig,
    inner: Mutex<Inner>,
}

impl Analyzer {
    /// An analyzer with `cfg`.
    pub fn new(cfg: AnalyzerConfig) -> Result<Self> {
        if !(cfg.train_ns_per_record_default.is_finite() && cfg.train_ns_per_record_default >= 0.0)
        {
            return Err(LearnError::InvalidParameter {
                name: "train_ns_per_record_default",
                value: cfg.train_ns_per_record_default as u64,
                reason: "must be a finite, non-negative number",
            });
        }
        if cfg.files_max == 0 {
            return Err(LearnError::InvalidParameter {
                name: "files_max",
                value: 0,
                reason: "must be at least 1",
            });
        }
        let inner = Inner {
            levels: vec![LevelStats::default(); LEVELS_MAX],
            ..Inner::default()
        };
        Ok(Self {
            cfg,
            inner: Mutex::new(inner),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AnalyzerConfig {
        &self.cfg
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves only statistics behind: keep serving.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new file (created at `now_ns`) and returns its statistics handle, or `None` if
    /// `files_max` files are live (the file then stays on the baseline path). Levels at or beyond
    /// [`LEVELS_MAX`] share the last level's statistics.
    pub fn register(
        &self,
        id: u64,
        level: usize,
        size_bytes: u64,
        records: u64,
        now_ns: u64,
    ) -> Option<Arc<FileStats>> {
        let mut g = self.lock();
        if g.live.len() >= self.cfg.files_max {
            g.stats.files_refused += 1;
            return None;
        }
        let file = Arc::new(FileStats {
            id,
            level: level.min(LEVELS_MAX - 1),
            size_bytes,
            records,
            created_ns: now_ns,
            counts: Default::default(),
            timed: Default::default(),
            nanos: Default::default(),
            learned: AtomicBool::new(false),
            chosen: AtomicBool::new(false),
            predicted_bits: AtomicU64::new(0),
            train_ns: AtomicU64::new(0),
            io_cost_bits: AtomicU64::new(0),
            control_timed: Default::default(),
            control_nanos: Default::default(),
        });
        g.seq += 1;
        let seq = g.seq;
        if let Some((old, _)) = g.live.insert(id, (file.clone(), seq)) {
            // Re-registration of a live id replaces it; the old entry is dropped lazily.
            drop(old);
        }
        g.pending.push_back((file.clone(), seq));
        g.stats.files_registered += 1;
        Some(file)
    }

    /// Retires a file (deleted by compaction at `now_ns`): folds its statistics into its level if
    /// it lived at least `min_lifetime_ns`. Unknown ids are ignored.
    pub fn retire(&self, id: u64, now_ns: u64) {
        let mut g = self.lock();
        let Some((file, _)) = g.live.remove(&id) else {
            return;
        };
        let lived = now_ns.saturating_sub(file.created_ns);
        if lived < self.cfg.wait_ns {
            g.stats.files_short_lived += 1;
        }
        if file.is_learned() {
            let saved = realized_ns(&file, &g.levels[file.level], &g.levels);
            g.stats.benefit_realized_ns += saved;
            let cost = file.train_ns.load(Ordering::Relaxed) as f64;
            g.hindsight.add(cost, saved);
            let predicted = f64::from_bits(file.predicted_bits.load(Ordering::Relaxed));
            if predicted > 0.0 {
                g.stats.benefit_predicted_ns += predicted;
                g.stats.benefit_predicted_realized_ns += saved;
                g.calib_predicted_ns += predicted;
                g.calib_realized_ns += saved.max(0.0);
                if g.calib_predicted_ns > CALIBRATION_WINDOW_NS {
                    g.calib_predicted_ns /= 2.0;
                    g.calib_realized_ns /= 2.0;
                }
            }
        }
        if lived < self.cfg.min_lifetime_ns {
            return;
        }
        let window = self.cfg.level_window_files as f64;
        let lv = &mut g.levels[file.level];
        lv.files += 1.0;
        lv.size_bytes += file.size_bytes as f64;
        let b = life_bucket(lived);
        lv.life_files[b] += 1.0;
        lv.life_ns[b] += lived as f64;
        for r in 0..2 {
            lv.control_timed[r] += file.control_timed[r].load(Ordering::Relaxed) as f64;
            lv.control_nanos[r] += file.control_nanos[r].load(Ordering::Relaxed) as f64;
        }
        for i in 0..4 {
            lv.counts[i] += file.counts[i].load(Ordering::Relaxed) as f64;
            lv.timed[i] += file.timed[i].load(Ordering::Relaxed) as f64;
            lv.nanos[i] += file.nanos[i].load(Ordering::Relaxed) as f64;
        }
        if window >= 1.0 && lv.files >= window {
            lv.halve();
        }
    }

    /// Evaluates every file whose wait ended by `now_ns`, queues the ones to learn, and returns
    /// the decisions made (file id, decision) for observability and tests. With
    /// [`AnalyzerConfig::breakeven`], also queues the skipped files whose served lookups reached
    /// break-even (see `breakeven_locked`).
    pub fn poll(&self, now_ns: u64) -> Vec<(u64, Decision)> {
        let mut g = self.lock();
        let mut due = Vec::new();
        while let Some((file, seq)) = g.pending.front().cloned() {
            if now_ns.saturating_sub(file.created_ns) < self.cfg.wait_ns {
                break; // pending is in registration order; callers' clocks are monotone
            }
            g.pending.pop_front();
            due.push((file, seq, false));
        }
        while g.recheck.peek().is_some_and(|e| e.due_ns <= now_ns) {
            if let Some(e) = g.recheck.pop() {
                due.push((e.file, e.seq, true));
            }
        }
        let mut out = Vec::new();
        for (file, seq, again) in due {
            if g.live.get(&file.id).is_none_or(|(_, s)| *s != seq) {
                continue; // retired (or replaced) since
            }
            if file.is_learned() || file.chosen.load(Ordering::Relaxed) {
                continue; // its persisted model was loaded, or it is queued already
            }
            let d = self.decide(&g, &file, now_ns);
            if again {
                g.stats.files_rejudged += 1;
            }
            let priority = match d {
                Decision::LearnBootstrap => {
                    g.stats.files_bootstrap += 1;
                    f64::INFINITY
                }
                Decision::Learn {
                    benefit_ns,
                    cost_ns,
                } => {
                    // The raw estimate: calibration is measured against it.
                    file.predicted_bits
                        .store(benefit_ns.to_bits(), Ordering::Relaxed);
                    benefit_ns * self.calibration_locked(&g) - cost_ns
                }
                // Not returned by `decide`; handled by the break-even scan below.
                Decision::BreakEven { saved_ns, cost_ns } => saved_ns - cost_ns,
                Decision::Skip { .. } => {
                    if !again {
                        g.stats.files_skipped += 1;
                        if self.cfg.breakeven {
                            g.skipped.push((file.clone(), seq));
                        }
                    }
                    if self.cfg.benefit == Benefit::Remaining {
                        // Judged again once it has lived as long again (see RECHECK_MIN_NS).
                        let age = now_ns.saturating_sub(file.created_ns);
                        let due_ns = now_ns.saturating_add(age.max(RECHECK_MIN_NS));
                        g.recheck.push(RecheckEntry {
                            due_ns,
                            seq,
                            file: file.clone(),
                        });
                    }
                    out.push((file.id, d));
                    continue;
                }
            };
            if again {
                g.stats.files_skipped = g.stats.files_skipped.saturating_sub(1);
            }
            g.stats.files_chosen += 1;
            file.chosen.store(true, Ordering::Relaxed);
            g.queue.push(QueueEntry {
                priority,
                seq,
                file: file.clone(),
            });
            out.push((file.id, d));
        }
        if self.cfg.breakeven && !self.cfg.always_learn {
            self.breakeven_locked(&mut g, &mut out);
        }
        g.stats.queue_len = g.queue.len() as u64;
        out
    }

    /// The break-even rule (beyond the source; on with [`AnalyzerConfig::breakeven`]): a
    /// skipped file is queued as soon as what its model *would have saved* on the lookups it
    /// already served — each lookup's baseline-minus-model time from [`path_times`], weighed by
    /// the level's learnability — reaches its training cost. This is the rent-or-buy rule: a
    /// file that keeps being read is learned after paying at most its training cost once more
    /// in slow lookups, whatever the estimate predicted, so a wrong skip costs at most twice
    /// the optimum. The estimate alone lags a change of workload: after a write-only load the
    /// levels' retired files served no lookups, so every table of the read phase that follows
    /// is skipped and, judged again only when its age doubles, read on the baseline path for
    /// as long as it has lived.
    fn breakeven_locked(&self, g: &mut Inner, out: &mut Vec<(u64, Decision)>) {
        let per_record = if g.train_records > 0.0 {
            g.train_ns / g.train_records
        } else {
            self.cfg.train_ns_per_record_default
        };
        let watched = std::mem::take(&mut g.skipped);
        let mut keep = Vec::with_capacity(watched.len());
        for (file, seq) in watched {
            let live = g.live.get(&file.id).is_some_and(|(_, s)| *s == seq);
            if !live || file.is_learned() || file.chosen.load(Ordering::Relaxed) {
                continue;
            }
            let io_ns = f64::from_bits(file.io_cost_bits.load(Ordering::Relaxed));
            let cost_ns = per_record * file.records as f64 + io_ns;
            let saved_ns = served_saving_ns(&file, &g.levels[file.level], &g.levels);
            if saved_ns <= 0.0 || saved_ns < cost_ns {
                keep.push((file, seq));
                continue;
            }
            g.stats.files_breakeven += 1;
            if io_ns == 0.0 {
                // A deferred file (io_ns > 0) was chosen, never counted as skipped.
                g.stats.files_skipped = g.stats.files_skipped.saturating_sub(1);
            }
            g.stats.files_chosen += 1;
            file.chosen.store(true, Ordering::Relaxed);
            g.queue.push(QueueEntry {
                priority: saved_ns - cost_ns,
                seq,
                file: file.clone(),
            });
            out.push((file.id, Decision::BreakEven { saved_ns, cost_ns }));
        }
        g.skipped = keep;
    }

    /// The decision for `file` at `now_ns` (without queueing it).
    fn decide(&self, g: &Inner, file: &FileStats, now_ns: u64) -> Decision {
        if self.cfg.always_learn {
            return Decision::LearnBootstrap;
        }
        let lv = &g.levels[file.level];
        if lv.files < self.cfg.min_retired_files as f64 {
            return Decision::LearnBootstrap;
        }
        let model_seen = [LookupResult::Negative, LookupResult::Positive]
            .into_iter()
            .any(|r| pooled_model_ratio(&g.levels, r).is_some());
        if !model_seen {
            // No retired file anywhere has shown what a model saves: learn to find out.
            return Decision::LearnBootstrap;
        }
        let (benefit_ns, cost_ns) = self.estimate_locked(g, file, now_ns);
        if benefit_ns * self.calibration_locked(g) > cost_ns {
            Decision::Learn {
                benefit_ns,
                cost_ns,
            }
        } else {
            Decision::Skip {
                benefit_ns,
                cost_ns,
            }
        }
    }

    /// Estimated (B_model, C_model) in nanoseconds for `file` at `now_ns` from the current
    /// statistics.
    pub fn estimate(&self, file: &FileStats, now_ns: u64) -> (f64, f64) {
        let g = self.lock();
        self.estimate_locked(&g, file, now_ns)
    }

    fn estimate_locked(&self, g: &Inner, file: &FileStats, now_ns: u64) -> (f64, f64) {
        let lv = &g.levels[file.level];
        let avg_size = lv.size_bytes / lv.files.max(1.0);
        let f = if avg_size > 0.0 {
            file.size_bytes as f64 / avg_size
        } else {
            1.0
        };
        let per_record = if g.train_records > 0.0 {
            g.train_ns / g.train_records
        } else {
            self.cfg.train_ns_per_record_default
        };
        let cost = per_record * file.records as f64;
        // Lookups of each kind the model would serve.
        let age = now_ns.saturating_sub(file.created_ns) as f64;
        let lookups = |result: LookupResult| -> f64 {
            let lifetime = lv.lookups_per_file(result) * f;
            match self.cfg.benefit {
                Benefit::Lifetime => lifetime,
                Benefit::Remaining => {
                    let (Some(mean_life), Some(rest)) =
                        (lv.mean_life_ns(), lv.remaining_life_ns(age))
                    else {
                        return lifetime;
                    };
                    let prior_rate = lifetime / mean_life.max(1.0);
                    let own = file.lookups_both(result) as f64;
                    let rate = (own + prior_rate * RATE_PRIOR_NS) / (age + RATE_PRIOR_NS);
                    rate * (rest - cost).max(0.0)
                }
            }
        };
        let mut benefit = 0.0;
        for result in [LookupResult::Negative, LookupResult::Positive] {
            let (t_base, t_model) = path_times(file, lv, &g.levels, result);
            if let (Some(b), Some(m)) = (t_base, t_model) {
                benefit += (b - m) * lookups(result);
            }
        }
        // A training that gives no usable model saves nothing (beyond the source, which
        // always gets a model): weigh the benefit by the level's learnability.
        (benefit * lv.learnability(), cost)
    }

    /// Asks, for `file` just taken from the queue, whether its training may pay `io_ns` of
    /// device reads (the bytes of the table not in the OS page cache, priced by the engine),
    /// `io_bytes` of them. Beyond the source, whose cost is CPU only (its tables sit in memory):
    /// under a memory limit a training pass over a table whose blocks were evicted reads the
    /// whole table from the device, and those reads evict the working set of the lookups the
    /// model was meant to speed up.
    ///
    /// Returns true (learn now) when the reads are cheap next to the choice: at most the
    /// training's CPU cost (so a bootstrap choice, made without an estimate, at most doubles
    /// its cost), or covered by the estimated benefit net of the CPU cost. Otherwise the file
    /// is put back: counted in `files_deferred_io` and, with break-even on, watched by the
    /// break-even rule with `io_ns` added to its cost, so it is learned once the lookups it
    /// serves would have paid for the reads too (then this returns true for it). Without
    /// break-even a deferred file stays on the baseline path.
    pub fn admit_io(&self, file: &Arc<FileStats>, io_ns: f64, io_bytes: u64) -> bool {
        // NaN or no reads: nothing to pay.
        if self.cfg.always_learn || io_ns.is_nan() || io_ns <= 0.0 {
            return true;
        }
        if file.io_cost_bits.load(Ordering::Relaxed) != 0 {
            return true; // deferred before and chosen again by break-even, the reads included
        }
        let mut g = self.lock();
        let per_record = if g.train_records > 0.0 {
            g.train_ns / g.train_records
        } else {
            self.cfg.train_ns_per_record_default
        };
        let cpu_ns = per_record * file.records as f64;
        let predicted = f64::from_bits(file.predicted_bits.load(Ordering::Relaxed));
        let net_benefit = predicted * self.calibration_locked(&g) - cpu_ns;
        if io_ns <= cpu_ns.max(net_benefit) {
            return true;
        }
        file.io_cost_bits.store(io_ns.to_bits(), Ordering::Relaxed);
        file.chosen.store(false, Ordering::Relaxed);
        g.stats.files_chosen = g.stats.files_chosen.saturating_sub(1);
        g.stats.files_deferred_io += 1;
        g.stats.deferred_io_bytes += io_bytes;
        if self.cfg.breakeven {
            if let Some((_, seq)) = g.live.get(&file.id).map(|(f, s)| (f.clone(), *s)) {
                g.skipped.push((file.clone(), seq));
            }
        }
        false
    }

    /// The next file to learn (highest `B − C`), skipping files retired since they were queued.
    pub fn next_to_learn(&self) -> Option<Arc<FileStats>> {
        let mut g = self.lock();
        let mut found = None;
        while let Some(e) = g.queue.pop() {
            if g.live.get(&e.file.id).is_some_and(|(_, s)| *s == e.seq) {
                found = Some(e.file);
                break;
            }
        }
        g.stats.queue_len = g.queue.len() as u64;
        found
    }

    /// Reports that `file` was learned in `train_ns` nanoseconds: updates the measured training
    /// cost per record and marks the file (its lookups should now record [`LookupPath::Model`]).
    pub fn learned(&self, file: &FileStats, train_ns: u64) {
        let mut g = self.lock();
        g.train_ns += train_ns as f64;
        g.train_records += file.records as f64;
        g.stats.files_learned += 1;
        g.stats.learn_ns_total += train_ns;
        file.train_ns.store(train_ns, Ordering::Relaxed);
        file.learned.store(true, Ordering::Release);
        let lv = &mut g.levels[file.level];
        lv.trained += 1.0;
        if lv.trained > LEARNABLE_WINDOW * 2.0 {
            lv.trained /= 2.0;
            lv.useless /= 2.0;
        }
    }

    /// Reports that the training [`Analyzer::learned`] just accounted for `file` gave no
    /// usable model (too many segments for its keys, or keys that collapse under the key
    /// mapping): the level's learnability, by which every estimated benefit at the level is
    /// weighed, goes down. Beyond the source: in LevelDB's tree shape the tables that
    /// compactions write above the deepest level hold sparse random samples of the keys, and
    /// about half of them gave no usable model, so the analyzer's estimates came out up to 40×
    /// above what its choices saved (docs/learned-index.md "Learnability").
    pub fn unlearnable(&self, file: &FileStats) {
        let mut g = self.lock();
        let lv = &mut g.levels[file.level];
        lv.useless = (lv.useless + 1.0).min(lv.trained);
    }

    /// The learnability of each level (the share of its trainings expected to give a usable
    /// model), for levels that trained a table.
    pub fn learnability(&self) -> Vec<(usize, f64)> {
        let g = self.lock();
        g.levels
            .iter()
            .enumerate()
            .filter(|(_, lv)| lv.trained > 0.0)
            .map(|(i, lv)| (i, lv.learnability()))
            .collect()
    }

    /// Marks `file` as having a model that needed no training (loaded from disk): its lookups
    /// now count as model lookups, and the training-cost average is left alone.
    pub fn mark_loaded(&self, file: &FileStats) {
        self.lock().stats.files_loaded += 1;
        file.learned.store(true, Ordering::Release);
    }

    /// Counters.
    pub fn stats(&self) -> AnalyzerStats {
        let g = self.lock();
        AnalyzerStats {
            benefit_calibration: self.calibration_locked(&g),
            ..g.stats
        }
    }

    /// The factor estimated benefits are scaled by before they are compared with the cost:
    /// what the models of retired tables chosen on an estimate saved over what was estimated
    /// for them, decayed (see [`CALIBRATION_WINDOW_NS`]), with [`CALIBRATION_PRIOR_NS`] of
    /// pseudo-evidence at 1 and clamped to [`CALIBRATION_RANGE`]; 1 with `calibrate` off.
    ///
    /// Beyond the source, whose estimate is never checked. It corrects a bias of the estimate
    /// (in the write sweep the tables chosen were predicted to save 1.3-5.9× more, or less,
    /// than they did), including the winner's curse of choosing the tables whose noisy
    /// estimates came out high: what decides is what a table with that estimate will save.
    pub fn calibration(&self) -> f64 {
        self.calibration_locked(&self.lock())
    }

    fn calibration_locked(&self, g: &Inner) -> f64 {
        if !self.cfg.calibrate {
            return 1.0;
        }
        let k = (g.calib_realized_ns + CALIBRATION_PRIOR_NS)
            / (g.calib_predicted_ns + CALIBRATION_PRIOR_NS);
        k.clamp(CALIBRATION_RANGE.0, CALIBRATION_RANGE.1)
    }

    /// What each model trained since this analyzer started cost and saved (retired files, and
    /// live files with what they saved so far): the oracle's bound, see [`Hindsight`].
    pub fn hindsight(&self) -> Hindsight {
        let g = self.lock();
        let mut h = g.hindsight.clone();
        for (file, _) in g.live.values().filter(|(f, _)| f.is_learned()) {
            let saved = realized_ns(file, &g.levels[file.level], &g.levels);
            h.add(file.train_ns.load(Ordering::Relaxed) as f64, saved);
        }
        h
    }

    /// The per-level statistics behind the decisions (levels with retired files only).
    pub fn level_summaries(&self) -> Vec<LevelSummary> {
        use LookupResult::{Negative, Positive};
        let g = self.lock();
        let both = |f: &dyn Fn(LookupResult) -> Option<f64>| [f(Negative), f(Positive)];
        g.levels
            .iter()
            .enumerate()
            .filter(|(_, lv)| lv.files > 0.0)
            .map(|(level, lv)| LevelSummary {
                level,
                retired_files: lv.files,
                lookups_per_file: [lv.lookups_per_file(Negative), lv.lookups_per_file(Positive)],
                baseline_ns: both(&|r| lv.mean_ns(r, LookupPath::Baseline)),
                model_ns: both(&|r| lv.mean_ns(r, LookupPath::Model)),
            })
            .collect()
    }

    /// The measured training time per record (the default before the first report).
    pub fn train_ns_per_record(&self) -> f64 {
        let g = self.lock();
        if g.train_records > 0.0 {
            g.train_ns / g.train_records
        } else {
            self.cfg.train_ns_per_record_default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LookupPath::{Baseline, Model};
    use LookupResult::{Negative, Positive};

    const MS: u64 = 1_000_000;

    fn analyzer() -> Analyzer {
        Analyzer::new(AnalyzerConfig::default()).unwrap()
    }

    /// Runs `files` files at `level` through a full life: registered at `t`, `neg`/`pos`
    /// lookups on each path with the given mean times, retired at `t + life`.
    #[allow(clippy::too_many_arguments)]
    fn retire_history(
        a: &Analyzer,
        level: usize,
        files: u64,
        first_id: u64,
        t: u64,
        life: u64,
        lookups: (u64, u64),
        times: (u64, u64, u64, u64),
    ) {
        for i in 0..files {
            let f = a.register(first_id + i, level, 1 << 20, 1000, t).unwrap();
            for _ in 0..lookups.0 {
                f.record(Negative, Baseline, times.0);
                f.record(Negative, Model, times.1);
            }
            for _ in 0..lookups.1 {
                f.record(Positive, Baseline, times.2);
                f.record(Positive, Model, times.3);
            }
            a.retire(first_id + i, t + life);
        }
    }

    #[test]
    fn a_new_files_few_timings_are_shrunk_toward_its_level() {
        assert_eq!(blend(Some(5000.0), 1.0, Some(1000.0)), Some(21000.0 / 17.0));
        assert_eq!(blend(Some(5000.0), 16.0, Some(1000.0)), Some(3000.0));
        assert_eq!(blend(Some(5000.0), 3.0, None), Some(5000.0));
        assert_eq!(blend(None, 0.0, Some(1000.0)), Some(1000.0));
        assert_eq!(blend(None, 0.0, None), None);
    }

    #[test]
    fn preempted_timings_are_counted_but_not_averaged() {
        let a = analyzer();
        let f = a.register(1, 1, 1 << 20, 1000, 0).unwrap();
        for _ in 0..100 {
            f.record_weighted(Positive, Baseline, 500, 16);
        }
        f.record_weighted(Positive, Baseline, 5 * MS, 16);
        assert_eq!(f.lookups(Positive, Baseline), 101 * 16);
        assert_eq!(f.mean_ns(Positive, Baseline), Some(500.0));
    }

    #[test]
    fn file_is_not_considered_before_its_wait() {
        let a = analyzer();
        a.register(1, 2, 1 << 20, 1000, 0).unwrap();
        assert!(a.poll(49 * MS).is_empty());
        assert!(a.next_to_learn().is_none());
        assert_eq!(a.poll(50 * MS), vec![(1, Decision::LearnBootstrap)]);
        assert_eq!(a.next_to_learn().unwrap().id(), 1);
    }

    #[test]
    fn short_lived_file_is_never_learned_and_stays_out_of_statistics() {
        let a = analyzer();
        a.register(1, 1, 1 << 20, 1000, 0).unwrap();
        a.retire(1, 10 * MS);
        assert!(a.poll(100 * MS).is_empty());
        assert!(a.next_to_learn().is_none());
        assert_eq!(a.stats().files_short_lived, 1);
        assert_eq!(a.lock().levels[1].files, 0.0);
    }

    #[test]
    fn bootstrap_learns_everything_until_the_level_has_statistics() {
        let a = analyzer();
        // Three retired files: one short of MIN_RETIRED_FILES_DEFAULT; a model saves nothing.
        retire_history(&a, 3, 3, 100, 0, 1000 * MS, (1, 1), (500, 500, 500, 500));
        a.register(1, 3, 1 << 20, 1000, 0).unwrap();
        assert_eq!(a.poll(1000 * MS), vec![(1, Decision::LearnBootstrap)]);
        // A fourth retired file ends the bootstrap: the next file is judged, and skipped.
        retire_history(&a, 3, 1, 200, 0, 1000 * MS, (1, 1), (500, 500, 500, 500));
        a.register(2, 3, 1 << 20, 1000, 1000 * MS).unwrap();
        let d = a.poll(2000 * MS);
        assert_eq!(d.len(), 1);
        assert!(matches!(d[0].1, Decision::Skip { .. }), "{d:?}");
        assert_eq!(a.stats().files_skipped, 1);
    }

    fn source_analyzer() -> Analyzer {
        let cfg = AnalyzerConfig {
            benefit: Benefit::Lifetime,
            ..AnalyzerConfig::default()
        };
        Analyzer::new(cfg).unwrap()
    }

    #[test]
    fn benefit_and_cost_follow_the_source_formula() {
        let a = source_analyzer();
        // Level 2 history: per file 100 negative and 50 positive lookups (on each path, so 200
        // and 100 lookups per file in total); model times: negative 300 ns, positive 500 ns.
        retire_history(
            &a,
            2,
            4,
            100,
            0,
            1000 * MS,
            (100, 50),
            (900, 300, 2000, 500),
        );
        // New file, twice the level's average size; during its wait it served 16 timed baseline
        // lookups of each kind, at negative 1000 ns and positive 2500 ns. Blended with the
        // level's baseline (900 / 2000 ns, weight 16): 950 and 2250 ns.
        let f = a.register(1, 2, 2 << 20, 1000, 1000 * MS).unwrap();
        for _ in 0..16 {
            f.record(Negative, Baseline, 1000);
            f.record(Positive, Baseline, 2500);
        }
        let (b, c) = a.estimate(&f, 1000 * MS);
        // The level's model times (400 and 200 timed lookups) are blended, weight 16, with the
        // pooled model/baseline ratio (1/3 and 1/4) times the file's baseline: negative
        // (300·400 + 950/3·16) / 416, positive (500·200 + 2250/4·16) / 216.
        let m_n = (300.0 * 400.0 + 950.0 / 3.0 * 16.0) / 416.0;
        let m_p = (500.0 * 200.0 + 2250.0 / 4.0 * 16.0) / 216.0;
        // B = ((950 − T_nm) · 200 + (2250 − T_pm) · 100) · f(=2): 0.2 % under the unblended
        // (130000 + 175000) · 2.
        let want = ((950.0 - m_n) * 200.0 + (2250.0 - m_p) * 100.0) * 2.0;
        assert!((b - want).abs() < 1e-6, "{b} vs {want}");
        // C = default 10 ns/record * 1000 records.
        assert_eq!(c, 10_000.0);
        // After a measured training (30 ms for 1000 records) the cost follows the measurement.
        a.learned(&f, 30 * MS);
        assert_eq!(a.estimate(&f, 1000 * MS).1, 30.0 * MS as f64);
        assert!(f.is_learned());
    }

    #[test]
    fn file_without_own_baseline_lookups_uses_the_level_average() {
        let a = source_analyzer();
        retire_history(&a, 1, 4, 100, 0, 1000 * MS, (10, 0), (800, 200, 0, 0));
        let f = a.register(1, 1, 1 << 20, 1000, 0).unwrap();
        // (800 - 200) * 20 lookups per file * f = 1.
        assert_eq!(a.estimate(&f, 0).0, 12_000.0);
    }

    #[test]
    fn queue_orders_by_benefit_minus_cost() {
        let a = analyzer();
        retire_history(&a, 4, 4, 100, 0, 1000 * MS, (0, 1000), (0, 0, 2000, 1000));
        // Same records (same cost); sizes 1x, 4x, 2x of the level average: benefit scales.
        a.register(1, 4, 1 << 20, 1000, 2000 * MS).unwrap();
        a.register(2, 4, 4 << 20, 1000, 2000 * MS).unwrap();
        a.register(3, 4, 2 << 20, 1000, 2000 * MS).unwrap();
        let d = a.poll(3000 * MS);
        assert!(
            d.iter().all(|(_, d)| matches!(d, Decision::Learn { .. })),
            "{d:?}"
        );
        let order: Vec<u64> = std::iter::from_fn(|| a.next_to_learn().map(|f| f.id())).collect();
        assert_eq!(order, vec![2, 3, 1]);
    }

    #[test]
    fn bootstrap_files_come_first_in_creation_order() {
        let a = analyzer();
        retire_history(&a, 4, 4, 100, 0, 1000 * MS, (0, 1000), (0, 0, 2000, 1000));
        a.register(1, 4, 1 << 20, 1000, 2000 * MS).unwrap(); // judged: Learn
        a.register(2, 0, 1 << 20, 1000, 2000 * MS).unwrap(); // level 0: bootstrap
        a.register(3, 5, 1 << 20, 1000, 2000 * MS).unwrap(); // level 5: bootstrap
        a.poll(3000 * MS);
        let order: Vec<u64> = std::iter::from_fn(|| a.next_to_learn().map(|f| f.id())).collect();
        assert_eq!(order, vec![2, 3, 1]);
    }

    #[test]
    fn file_retired_while_queued_is_not_handed_out() {
        let a = analyzer();
        a.register(1, 0, 1 << 20, 1000, 0).unwrap();
        a.register(2, 0, 1 << 20, 1000, 0).unwrap();
        a.poll(60 * MS);
        a.retire(1, 70 * MS);
        assert_eq!(a.next_to_learn().unwrap().id(), 2);
        assert!(a.next_to_learn().is_none());
    }

    #[test]
    fn always_learn_mode_skips_the_test_but_keeps_the_wait() {
        let cfg = AnalyzerConfig {
            always_learn: true,
            ..AnalyzerConfig::default()
        };
        let a = Analyzer::new(cfg).unwrap();
        retire_history(&a, 1, 8, 100, 0, 1000 * MS, (0, 0), (0, 0, 0, 0));
        a.register(1, 1, 1 << 20, 1000, 1000 * MS).unwrap();
        assert!(a.poll(1040 * MS).is_empty());
        assert_eq!(a.poll(1050 * MS), vec![(1, Decision::LearnBootstrap)]);
    }

    #[test]
    fn registrations_beyond_files_max_are_refused() {
        let cfg = AnalyzerConfig {
            files_max: 2,
            ..AnalyzerConfig::default()
        };
        let a = Analyzer::new(cfg).unwrap();
        assert!(a.register(1, 0, 1, 1, 0).is_some());
        assert!(a.register(2, 0, 1, 1, 0).is_some());
        assert!(a.register(3, 0, 1, 1, 0).is_none());
        assert_eq!(a.stats().files_refused, 1);
    }

    #[test]
    fn level_statistics_are_halved_after_the_window() {
        let cfg = AnalyzerConfig {
            level_window_files: 8,
            ..AnalyzerConfig::default()
        };
        let a = Analyzer::new(cfg).unwrap();
        retire_history(&a, 2, 8, 100, 0, 1000 * MS, (10, 0), (100, 50, 0, 0));
        let lv = a.lock().levels[2].clone();
        assert_eq!(lv.files, 4.0);
        // Averages survive halving.
        assert_eq!(lv.mean_ns(Negative, Baseline), Some(100.0));
        assert_eq!(lv.lookups_per_file(Negative), 20.0);
    }

    #[test]
    fn concurrent_recording_loses_no_lookup() {
        let a = analyzer();
        let f = a.register(1, 0, 1, 1, 0).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                let f = f.clone();
                s.spawn(move || {
                    for _ in 0..10_000 {
                        f.record(Positive, Model, 3);
                    }
                });
            }
        });
        assert_eq!(f.lookups(Positive, Model), 40_000);
        assert_eq!(f.mean_ns(Positive, Model), Some(3.0));
    }

    /// A level's life in two phases, the §2.4.4 situation: while writes churn the level, files
    /// live 200 ms and serve 20 lookups each, so a model (1 ms to train 100k records) cannot pay
    /// for itself and the analyzer skips; when reads dominate, files live long and serve 100k
    /// lookups each, and once the level's (halving) statistics reflect that, it learns again.
    #[test]
    fn write_heavy_churn_is_skipped_and_read_heavy_files_are_learned() {
        let a = analyzer();
        let records = 100_000;
        let mut now = 0u64;
        let mut id = 0u64;
        let mut life = |a: &Analyzer, now: &mut u64, lookups: u64, lived_ms: u64| {
            id += 1;
            let f = a.register(id, 3, 4 << 20, records, *now).unwrap();
            for _ in 0..lookups {
                f.record(Positive, if f.is_learned() { Model } else { Baseline }, 900);
            }
            // Some files of each phase are learned, so model-path times exist at the level.
            a.learned(&f, 1_000_000);
            for _ in 0..lookups {
                f.record(Positive, Model, 300);
            }
            *now += lived_ms * MS;
            a.retire(id, *now);
        };
        // Write-heavy phase: 70 short, lightly used files.
        for _ in 0..70 {
            life(&a, &mut now, 10, 200);
        }
        let f = a.register(10_000, 3, 4 << 20, records, now).unwrap();
        f.record(Positive, Baseline, 900);
        let d = a.poll(now + 60 * MS);
        assert!(matches!(d[0].1, Decision::Skip { .. }), "{d:?}");
        a.retire(10_000, now + 60 * MS);
        // Read-heavy phase: 70 long-lived files with many lookups.
        for _ in 0..70 {
            life(&a, &mut now, 50_000, 60_000);
        }
        a.register(10_001, 3, 4 << 20, records, now).unwrap();
        let d = a.poll(now + 60 * MS);
        assert!(matches!(d[0].1, Decision::Learn { .. }), "{d:?}");
        assert_eq!(a.next_to_learn().unwrap().id(), 10_001);
    }

    #[test]
    fn benefit_is_weighed_by_the_share_of_the_levels_trainings_that_gave_a_model() {
        let a = analyzer();
        let mut now = 0u64;
        for id in 1..=8 {
            let f = a.register(id, 2, 1 << 20, 9000, now).unwrap();
            for _ in 0..5_000 {
                f.record(Positive, Baseline, 2_000);
            }
            a.learned(&f, 900_000);
            for _ in 0..5_000 {
                f.record(Positive, Model, 800);
            }
            now += 10_000 * MS;
            a.retire(id, now);
        }
        let f = a.register(100, 2, 1 << 20, 9000, now).unwrap();
        let (b_all, c) = a.estimate(&f, now + 60 * MS);
        assert!(
            b_all > c,
            "a level whose models all work: learn ({b_all} vs {c})"
        );
        // Eight of the level's next ten trainings give no usable model.
        for id in 200..210 {
            let g = a.register(id, 2, 1 << 20, 9000, now).unwrap();
            a.learned(&g, 900_000);
            if id < 208 {
                a.unlearnable(&g);
            }
            a.retire(id, now);
        }
        // 18 trained, 8 useless, prior 2: (18 - 8 + 2) / (18 + 2) = 0.6.
        assert_eq!(a.learnability(), vec![(2, 0.6)]);
        let (b, _) = a.estimate(&f, now + 60 * MS);
        assert!((b / b_all - 0.6).abs() < 1e-9, "{b} vs {b_all}");
        // Levels that never trained a table are not listed (and count as learnable).
        assert!(a.learnability().iter().all(|(lv, _)| *lv == 2));
    }

    /// The level of the write-heavy sweep (docs/learned-index.md): files live 150 ms and serve
    /// 900 positive lookups evenly over their lives; a model saves 1.1 µs per lookup; training
    /// costs 0.9 ms (9000 records at 100 ns, measured). Over the whole life the model would save
    /// 0.99 ms, more than it costs; but it exists only after the 50 ms wait, so what it can
    /// still save is 600 lookups' worth, 0.65 ms: the source's formula learns, `Remaining` skips.
    fn churned_level(benefit: Benefit) -> (Analyzer, Arc<FileStats>) {
        let a = Analyzer::new(AnalyzerConfig {
            benefit,
            ..AnalyzerConfig::default()
        })
        .unwrap();
        retire_history(&a, 1, 8, 100, 0, 150 * MS, (0, 450), (0, 0, 1500, 400));
        let t = 10_000 * MS;
        let trained = a.register(99, 1, 1 << 20, 9000, t).unwrap();
        a.learned(&trained, 900_000); // 100 ns per record
        a.retire(99, t); // lived 0 ns: leaves the level's statistics alone
        let f = a.register(1, 1, 1 << 20, 9000, t).unwrap();
        for _ in 0..300 {
            f.record(Positive, Baseline, 1500);
        }
        (a, f)
    }

    #[test]
    fn remaining_benefit_counts_only_lookups_after_the_model_exists() {
        let t = 10_000 * MS + 50 * MS;
        let (src, f) = churned_level(Benefit::Lifetime);
        let (b, c) = src.estimate(&f, t);
        assert_eq!(c, 900_000.0);
        assert!((b - 990_000.0).abs() < 1.0, "{b}");
        assert!(matches!(src.poll(t)[..], [(1, Decision::Learn { .. })]));

        let (rem, f) = churned_level(Benefit::Remaining);
        let (b, c) = rem.estimate(&f, t);
        // Rate: (300 own + 900/150 ms × 50 ms prior) / (50 + 50) ms = 6 per ms; window:
        // 150 − 50 ms of life left, less 0.9 ms of training; 1100 ns saved per lookup.
        let want = 1100.0 * 6.0 * (100.0 - 0.9);
        assert!((b - want).abs() < 1.0, "{b} vs {want} ns");
        assert!(b < c);
        assert!(matches!(rem.poll(t)[..], [(1, Decision::Skip { .. })]));
    }

    /// A level whose retired files lived 150 ms and served nothing (a write-only load), with
    /// one learned file that showed the model path (400 vs 1500 ns), and a new file of 9000
    /// records (100 ns per record: 900 µs to learn) that the estimate skips.
    fn after_a_write_only_load(breakeven: bool) -> (Analyzer, Arc<FileStats>, u64) {
        let a = Analyzer::new(AnalyzerConfig {
            breakeven,
            ..AnalyzerConfig::default()
        })
        .unwrap();
        retire_history(&a, 1, 8, 100, 0, 150 * MS, (0, 0), (0, 0, 0, 0));
        retire_history(&a, 2, 4, 200, 0, 150 * MS, (0, 100), (0, 0, 1500, 400));
        let t = 10_000 * MS;
        let trained = a.register(99, 1, 1 << 20, 9000, t).unwrap();
        a.learned(&trained, 900_000);
        a.retire(99, t);
        let f = a.register(1, 1, 1 << 20, 9000, t).unwrap();
        let t = t + 50 * MS;
        assert!(matches!(a.poll(t)[..], [(1, Decision::Skip { .. })]));
        (a, f, t)
    }

    #[test]
    fn a_skipped_file_is_learned_once_its_lookups_would_have_paid_for_its_model() {
        let (a, f, t) = after_a_write_only_load(true);
        // Each baseline lookup would have saved 1100 ns: 818 lookups are 899,800 ns, short
        // of the 900,000 ns the training costs; the 819th pays for it.
        for _ in 0..818 {
            f.record(Positive, Baseline, 1500);
        }
        assert!(a.poll(t + MS).is_empty());
        assert!(a.next_to_learn().is_none());
        f.record(Positive, Baseline, 1500);
        let d = a.poll(t + 2 * MS);
        let [(1, Decision::BreakEven { saved_ns, cost_ns })] = d[..] else {
            panic!("{d:?}");
        };
        assert!((saved_ns - 900_900.0).abs() < 1.0, "{saved_ns}");
        assert_eq!(cost_ns, 900_000.0);
        assert_eq!(a.next_to_learn().unwrap().id(), 1);
        assert_eq!(a.stats().files_breakeven, 1);
        assert_eq!(a.stats().files_skipped, 0);
        // Queued once: neither a later poll nor its re-judgement queues it again.
        assert!(a.poll(t + 1_000 * MS).is_empty());
        assert!(a.next_to_learn().is_none());
    }

    #[test]
    fn a_training_whose_device_reads_its_choice_cannot_pay_waits_for_break_even() {
        let (a, _, t) = after_a_write_only_load(true);
        // Level 3 has no statistics: its files are bootstrap choices (no estimate), and
        // training one of 9000 records costs 900 µs of CPU (100 ns per record, measured).
        a.register(2, 3, 1 << 20, 9000, t).unwrap();
        a.register(3, 3, 1 << 20, 9000, t).unwrap();
        let t = t + 50 * MS;
        let mine =
            |d: Vec<(u64, Decision)>| d.into_iter().filter(|(id, _)| *id != 1).collect::<Vec<_>>();
        assert_eq!(mine(a.poll(t)).len(), 2);
        let cheap = a.next_to_learn().unwrap();
        let cold = a.next_to_learn().unwrap();
        // Reads costing at most the CPU: learned now.
        assert!(a.admit_io(&cheap, 900_000.0, 1 << 18));
        // Reads of 4 ms: put back, counted, not queued again by a poll.
        assert!(!a.admit_io(&cold, 4_000_000.0, 1 << 20));
        let st = a.stats();
        assert_eq!((st.files_deferred_io, st.deferred_io_bytes), (1, 1 << 20));
        assert_eq!(st.files_chosen, 1);
        assert!(mine(a.poll(t + MS)).is_empty());
        assert!(a.next_to_learn().is_none());
        // Its lookups save 1100 ns each (the pooled model ratio 400/1500 of level 2): 4454 of
        // them fall short of the 4.9 ms of training and reads, the 4455th pays for both.
        for _ in 0..4454 {
            cold.record(Positive, Baseline, 1500);
        }
        assert!(mine(a.poll(t + 2 * MS)).is_empty());
        cold.record(Positive, Baseline, 1500);
        let d = mine(a.poll(t + 3 * MS));
        let [(3, Decision::BreakEven { cost_ns, .. })] = d[..] else {
            panic!("{d:?}");
        };
        assert_eq!(cost_ns, 4_900_000.0);
        let again = a.next_to_learn().unwrap();
        assert_eq!(again.id(), 3);
        // Chosen by break-even with the reads counted: admitted whatever they cost now.
        assert!(a.admit_io(&again, 4_000_000.0, 1 << 20));
        assert_eq!(
            a.stats().files_skipped,
            1,
            "the deferred file was never a skipped one"
        );
    }

    #[test]
    fn always_learn_mode_admits_any_device_reads() {
        let a = Analyzer::new(AnalyzerConfig {
            always_learn: true,
            ..AnalyzerConfig::default()
        })
        .unwrap();
        let f = a.register(1, 1, 1 << 20, 1000, 0).unwrap();
        assert!(a.admit_io(&f, 1e12, 1 << 30));
        assert_eq!(a.stats().files_deferred_io, 0);
    }

    #[test]
    fn without_breakeven_a_read_file_waits_for_its_rejudgement() {
        let (a, f, t) = after_a_write_only_load(false);
        for _ in 0..5_000 {
            f.record(Positive, Baseline, 1500);
        }
        assert!(a.poll(t + MS).is_empty());
        assert!(a.next_to_learn().is_none());
        assert_eq!(a.stats().files_breakeven, 0);
    }

    #[test]
    fn a_hot_file_on_a_churned_level_is_still_learned() {
        let (a, f) = churned_level(Benefit::Remaining);
        // Ten times the level's rate during its wait.
        for _ in 0..2700 {
            f.record(Positive, Baseline, 1500);
        }
        let d = a.poll(10_000 * MS + 50 * MS);
        assert!(matches!(d[..], [(1, Decision::Learn { .. })]), "{d:?}");
    }

    #[test]
    fn remaining_life_comes_from_the_lives_of_retired_files() {
        let mut lv = LevelStats::default();
        assert_eq!(lv.remaining_life_ns(0.0), None);
        for life in [100 * MS, 100 * MS, 400 * MS] {
            let b = life_bucket(life);
            lv.life_files[b] += 1.0;
            lv.life_ns[b] += life as f64;
        }
        assert_eq!(lv.mean_life_ns(), Some(200.0 * MS as f64));
        // At 50 ms all three outlive it: (50 + 50 + 350) / 3 ms.
        assert_eq!(
            lv.remaining_life_ns(50.0 * MS as f64),
            Some(150.0 * MS as f64)
        );
        // At 200 ms only the long-lived one does.
        assert_eq!(
            lv.remaining_life_ns(200.0 * MS as f64),
            Some(200.0 * MS as f64)
        );
        // Older than every retired file: as long again as it has lived.
        assert_eq!(
            lv.remaining_life_ns(1000.0 * MS as f64),
            Some(1000.0 * MS as f64)
        );
    }

    #[test]
    fn realized_and_predicted_benefit_are_accounted_at_retirement() {
        let a = analyzer();
        retire_history(&a, 2, 4, 100, 0, 1000 * MS, (0, 1000), (0, 0, 2000, 1000));
        let f = a.register(1, 2, 1 << 20, 1000, 2000 * MS).unwrap();
        for _ in 0..100 {
            f.record(Positive, Baseline, 2000);
        }
        let d = a.poll(2050 * MS);
        let Decision::Learn { benefit_ns, .. } = d[0].1 else {
            panic!("{d:?}");
        };
        a.next_to_learn().unwrap();
        a.learned(&f, 10_000);
        for _ in 0..300 {
            f.record(Positive, Model, 500);
        }
        a.retire(1, 3000 * MS);
        let st = a.stats();
        // 300 model lookups; baseline 2000 ns (own and level agree); model 500 ns over 300
        // timed lookups, blended (weight 16) with the level's 1000 ns.
        let saved = 300.0 * (2000.0 - (500.0 * 300.0 + 1000.0 * 16.0) / 316.0);
        assert_eq!(st.benefit_realized_ns, saved);
        assert_eq!(st.benefit_predicted_realized_ns, saved);
        assert_eq!(st.benefit_predicted_ns, benefit_ns);
        // A file learned without an estimate (bootstrap) adds to the realized total only.
        let g = a.register(2, 7, 1 << 20, 1000, 3000 * MS).unwrap();
        assert_eq!(a.poll(3050 * MS), vec![(2, Decision::LearnBootstrap)]);
        a.learned(&g, 10_000);
        for _ in 0..10 {
            g.record(Positive, Baseline, 900);
            g.record(Positive, Model, 400);
        }
        a.retire(2, 4000 * MS);
        let st = a.stats();
        // Level 7 has no history: its model-path prior is the pooled ratio (level 2: model
        // (1000·4000 + 500·300) / 4300 ns over baseline 2000 ns) times the file's 900 ns
        // baseline, blended with the file's own 400 ns over 10 timed lookups.
        let prior = (1000.0 * 4000.0 + 500.0 * 300.0) / 4300.0 / 2000.0 * 900.0;
        let model = (400.0 * 10.0 + prior * 16.0) / 26.0;
        let total = saved + 10.0 * (900.0 - model);
        assert!((st.benefit_realized_ns - total).abs() < 1e-6, "{st:?}");
        assert_eq!(st.benefit_predicted_ns, benefit_ns);
        // Hindsight holds both models (cost 10,000 ns each) with what they saved; a live
        // learned file counts with what it saved so far, once.
        let h = a.hindsight();
        assert_eq!((h.files, h.learn_ns()), (2, 20_000.0));
        assert!((h.saved_ns() - total).abs() < 1e-6);
        let live = a.register(3, 2, 1 << 20, 1000, 4000 * MS).unwrap();
        a.learned(&live, 5_000);
        assert_eq!(a.hindsight().files, 3);
        assert_eq!(a.hindsight().learn_ns(), 25_000.0);
        a.retire(3, 5000 * MS);
        assert_eq!(a.hindsight().files, 3, "a retired file is counted once");
    }

    /// A learned table's cold first lookups (baseline path, before its model) do not count as
    /// what the model saves: its control sample (warm lookups down the baseline path) does.
    #[test]
    fn savings_compare_the_model_with_the_warm_control_sample() {
        let a = analyzer();
        let f = a.register(1, 3, 1 << 20, 1000, 0).unwrap();
        for _ in 0..10 {
            f.record(Positive, Baseline, 3000); // young, cold pages
        }
        a.learned(&f, 10_000);
        for _ in 0..100 {
            f.record(Positive, Model, 500);
        }
        for _ in 0..16 {
            f.record_control(Positive, 700, 1);
        }
        a.retire(1, 1000 * MS);
        // 116 lookups served while learned, each 700 − 500 ns cheaper than the warm baseline.
        assert_eq!(a.stats().benefit_realized_ns, 116.0 * 200.0);
        assert_eq!(a.lock().levels[3].control_timed[1], 16.0);
        // The level's warm baseline now stands in for a new table's own cold one.
        let g = a.register(2, 3, 1 << 20, 1000, 1000 * MS).unwrap();
        for _ in 0..100 {
            g.record(Positive, Baseline, 3000);
        }
        let inner = a.lock();
        let (base, _) = path_times(&g, &inner.levels[3], &inner.levels, Positive);
        assert_eq!(base, Some(700.0));
    }

    /// Tables chosen on an estimate whose models then saved nothing pull the calibration factor
    /// down, and a table the raw estimate would learn is skipped; with `calibrate` off the
    /// same history learns it.
    #[test]
    fn benefits_are_scaled_by_what_chosen_models_really_saved() {
        let run = |calibrate: bool| {
            let a = Analyzer::new(AnalyzerConfig {
                calibrate,
                ..AnalyzerConfig::default()
            })
            .unwrap();
            retire_history(&a, 2, 4, 100, 0, 1000 * MS, (0, 1000), (0, 0, 2000, 1000));
            let mut t = 2000 * MS;
            for id in 1..=6 {
                let f = a.register(id, 2, 1 << 20, 1000, t).unwrap();
                for _ in 0..400 {
                    f.record(Positive, Baseline, 2000);
                }
                let d = a.poll(t + 50 * MS);
                if matches!(d[0].1, Decision::Learn { .. }) {
                    a.next_to_learn().unwrap();
                    // 2 µs per record: a table costs 2 ms to learn, about half its estimate.
                    a.learned(&f, 2_000_000);
                }
                // Its model serves no lookup: it saves nothing.
                a.retire(id, t + 1000 * MS);
                t += 1000 * MS;
            }
            let st = a.stats();
            let f = a.register(99, 2, 1 << 20, 1000, t).unwrap();
            for _ in 0..400 {
                f.record(Positive, Baseline, 2000);
            }
            (st, a.poll(t + 50 * MS)[0].1)
        };
        let (st, d) = run(true);
        let k = (CALIBRATION_PRIOR_NS / (st.benefit_predicted_ns + CALIBRATION_PRIOR_NS))
            .clamp(CALIBRATION_RANGE.0, CALIBRATION_RANGE.1);
        assert!((st.benefit_calibration - k).abs() < 1e-12, "{st:?}");
        assert_eq!(st.benefit_predicted_realized_ns, 0.0);
        let Decision::Skip {
            benefit_ns,
            cost_ns,
        } = d
        else {
            panic!("calibrated: {d:?} (factor {k})");
        };
        assert!(
            benefit_ns > cost_ns && benefit_ns * k <= cost_ns,
            "{d:?}, factor {k}"
        );
        let (st, d) = run(false);
        assert_eq!(st.benefit_calibration, 1.0);
        assert!(matches!(d, Decision::Learn { .. }), "uncalibrated: {d:?}");
    }

    /// Level 1 never had a learned file retire (say the analyzer skipped them all), so it has
    /// no model-path time of its own: it borrows the model/baseline ratio of the levels that
    /// measured both. With no model-path time anywhere, files are learned to find out.
    #[test]
    fn a_level_without_model_timings_borrows_the_pooled_ratio() {
        let a = source_analyzer();
        retire_history(&a, 1, 4, 100, 0, 1000 * MS, (0, 0), (0, 0, 0, 0));
        for i in 0..4 {
            let f = a.register(200 + i, 1, 1 << 20, 1000, 0).unwrap();
            for _ in 0..50 {
                f.record(Positive, Baseline, 2000);
            }
            a.retire(200 + i, 1000 * MS);
        }
        let f = a.register(1, 1, 1 << 20, 1000, 1000 * MS).unwrap();
        assert_eq!(a.poll(1050 * MS), vec![(1, Decision::LearnBootstrap)]);
        // Level 3 measures the model path at a quarter of the baseline.
        retire_history(&a, 3, 4, 300, 0, 1000 * MS, (0, 10), (0, 0, 1000, 250));
        // Level 1: 25 positive lookups per retired file (200 over 8), baseline 2000 ns, model
        // 2000 × 0.25 = 500 ns borrowed: B = 1500 × 25.
        assert_eq!(a.estimate(&f, 1050 * MS).0, 37_500.0);
    }

    /// After a write-only load, level 0's retired files lived 60 ms and served nothing. A file
    /// of the read-write phase that follows serves 20 lookups per ms: at the end of its wait
    /// its level predicts 10 ms of life left, too little to pay; judged again at 100 ms it has
    /// outlived every retired file, is expected to live as long again, and is learned. The
    /// source's formula judges a file once. (Break-even off: its 1000 lookups of 1000 ns saved
    /// each would pay for the 0.9 ms training at once.)
    #[test]
    fn a_skipped_file_that_outlives_its_level_is_judged_again() {
        for benefit in [Benefit::Remaining, Benefit::Lifetime] {
            let a = Analyzer::new(AnalyzerConfig {
                benefit,
                breakeven: false,
                ..AnalyzerConfig::default()
            })
            .unwrap();
            retire_history(&a, 0, 8, 100, 0, 60 * MS, (0, 1), (0, 0, 1500, 500));
            let t = 1000 * MS;
            let trained = a.register(99, 5, 1 << 20, 9000, t).unwrap();
            a.learned(&trained, 900_000); // 100 ns per record: 0.9 ms per file
            a.retire(99, t);
            let f = a.register(1, 0, 1 << 20, 9000, t).unwrap();
            for _ in 0..1000 {
                f.record(Positive, Baseline, 1500);
            }
            assert!(matches!(
                a.poll(t + 50 * MS)[..],
                [(1, Decision::Skip { .. })]
            ));
            for _ in 0..1000 {
                f.record(Positive, Baseline, 1500);
            }
            assert!(a.poll(t + 99 * MS).is_empty());
            let d = a.poll(t + 100 * MS);
            match benefit {
                Benefit::Remaining => {
                    assert!(matches!(d[..], [(1, Decision::Learn { .. })]), "{d:?}");
                    assert_eq!(a.next_to_learn().unwrap().id(), 1);
                    let st = a.stats();
                    assert_eq!((st.files_skipped, st.files_rejudged), (0, 1));
                }
                Benefit::Lifetime => assert!(d.is_empty(), "{d:?}"),
            }
        }
    }

    #[test]
    fn bad_configuration_is_an_error() {
        let bad = AnalyzerConfig {
            train_ns_per_record_default: f64::NAN,
            ..AnalyzerConfig::default()
        };
        assert!(Analyzer::new(bad).is_err());
    }
}
