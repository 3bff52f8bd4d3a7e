//! GhostSim: one simulation round that predicts H_a, H_k and L_e for each candidate split
//! `M_a = i·M/8` (i = 0..=8, floored at a minimum), as in Symbiosis §4.1.2 and §4.2.
//!
//! * **Application ghost** — one [`StackDistance`] of the largest size read by stack distance:
//!   one pass gives the application hits of every candidate (§4.2.2).
//! * **Second-tier ghosts** — one [`Lru`] of pages (or compressed blocks) per candidate,
//!   capacity `(M − M_a)·(1 + read-ahead allowance)`, each fed its own candidate's
//!   application-miss stream (whether an access misses an application cache of size `M_a` is
//!   read off the application ghost's stack distance, so every candidate's stream is known at
//!   once). Candidates run side by side in *passes*: a pass holds as many consecutive candidates
//!   as fit the ghost memory budget [`GhostConfig::ghost_bytes_max`]; each pass starts from
//!   truncated copies of the previous pass's smallest ghost (what it would hold after a shrink)
//!   and feeds them a warm-up before their hits are counted. With a budget of 0 every pass holds
//!   one candidate: the paper's pipeline of one ghost shrunk candidate by candidate (§4.2.2,
//!   §4.2.3). Beyond the paper: one pass instead of nine makes a round about 9× shorter after
//!   its initial warm-up (the convergence target; docs/symbiosis.md "Convergence").
//! * **Sampling** — only blocks whose group `block_no / G` hashes into `1/R` of the space enter
//!   the ghosts, and every capacity is scaled by `R`; contiguous blocks share a group so that
//!   pages shared by misaligned neighbours stay together (misalignment-aware sampling, §4.2.3).
//! * **Memory** — [`GhostSim::free`] drops every structure when a round ends.
//! * **Warm start** (beyond the paper) — [`GhostSim::warm_start`] fills the ghosts from the
//!   engine's live caches, oldest first, before the first sampled access, so that a round after
//!   a workload change does not wait for its ghosts to fill.
//! * **Exact footprint** (beyond the paper) — [`GhostSim::set_second_footprint`]: when the
//!   engine knows exactly what its second tier needs for the round's blocks, candidates whose
//!   tier holds it are predicted with no evictions rather than by a sampled ghost, which cannot
//!   resolve a fit within its sampling error. With it the round also measures the realised
//!   sampling share and reads H_a at thresholds scaled by it
//!   ([`GhostSim::app_sampling_scale`]), and estimates the uncompressed footprint
//!   ([`GhostSim::app_footprint_estimate`]). A candidate with no second tier predicts H_k = 0.
//!
//! Round phases, counted in sampled accesses: a *warm-up* that fills the application ghost and
//! the first candidate's second-tier ghost (ends when each is full or has stopped seeing new
//! blocks, or at a cap), then per pass a second-tier warm-up (skipped when the pass is the first
//! candidate alone, whose ghost the warm-up just filled) and a measurement window. H_a of every
//! candidate comes from all post-warm-up samples; H_k of candidate `i` from its pass's window.
//!
//! Thread-safety: single owner, `Send`. Invariants: candidates are strictly increasing after
//! de-duplication; a pass's ghosts are those of consecutive candidates; ghost capacities only
//! shrink from pass to pass; a pass is admitted only while the ghosts' metadata (application
//! ghost included) stays within `ghost_bytes_max`, except that a pass always holds one candidate.

use crate::access::{BlockAccess, SecondTier};
use crate::error::{bad, Result};
use crate::policy::{BlockKey, Lru, ReplacementPolicy};
use crate::stack::{DistanceHistogram, StackDistance};
use crate::twotier::{expected_latency, second_tier_access};

/// Default sampling rate denominator: R = 1/64, the paper's choice (§4.2.3: "acceptable variance
/// and sufficiency to realize a low-overhead online simulation").
pub const SAMPLE_INV_RATE_DEFAULT: u32 = 64;
/// Default blocks per sampling group: G = 32, the paper's misalignment-aware grouping.
pub const GROUP_BLOCKS_DEFAULT: u32 = 32;
/// Default number of equal ranges of the search space: 8, hence 9 candidates (§4.2.2).
pub const CANDIDATE_STEPS_DEFAULT: u32 = 8;
/// Default sampled accesses measured per candidate. 4096 gives a standard error of about 1 % on a
/// hit ratio near 0.5 while keeping a round near 9·5120·64 ≈ 3 M engine accesses at R = 1/64.
pub const CANDIDATE_SAMPLES_DEFAULT: u64 = 4096;
/// Default sampled accesses that re-warm the second-tier ghost after each shrink. The ghost
/// already holds the larger candidate's contents, so a quarter of a window suffices.
pub const CANDIDATE_WARMUP_SAMPLES_DEFAULT: u64 = 1024;
/// Cap on the round's initial warm-up in sampled accesses (≈ 16 M engine accesses at R = 1/64).
pub const WARMUP_SAMPLES_MAX_DEFAULT: u64 = 1 << 18;
/// The application ghost remembers this multiple of M so that the miss-ratio curve extends past
/// the largest candidate. Default 2: shows what doubling memory would buy.
pub const MRC_SPAN_DEFAULT: f64 = 2.0;
/// Relative step of the application thresholds counted around each candidate's R-scaled size
/// (see [`GhostSim::app_sampling_scale`]): hits are counted at `M_a·R·(1 + k·step)` for
/// `k = −APP_BAND_STEPS ..= APP_BAND_STEPS`. Default 2 %: finer than the ±9 % (one standard
/// error) by which per-block sampling at R = 1/64 over ~8 000 blocks misses R.
const APP_BAND_STEP: f64 = 0.02;
/// Steps each way. Default 12 (±24 %, about 2.7 standard errors at the size above); 9
/// candidates × 25 counters × 8 B = 1.8 KiB, counted in the ghost's metadata.
const APP_BAND_STEPS: i64 = 12;
/// Counters per candidate.
const APP_BANDS: usize = 2 * APP_BAND_STEPS as usize + 1;
/// Points of the miss-ratio curve. Default 128.
pub const MRC_POINTS_DEFAULT: usize = 128;
/// Default ghost memory budget as a fraction of M, within which candidates are simulated side
/// by side. 0.18 %: the target is 0.2 % of M; the tenth left over covers ghosts that grow
/// after their pass was admitted (a truncated copy reserves a quarter more entries than it starts
/// with) and the initial warm-up, which holds one ghost whatever the budget.
pub const GHOST_BYTES_MAX_FRACTION_DEFAULT: f64 = 0.0018;
/// Default floor of a side-by-side measurement window that may end early (see
/// [`GhostConfig::early_stop`]), sampled accesses: a quarter of the full window, so that even a
/// clear ranking rests on about 1000 samples of each candidate.
pub const CANDIDATE_SAMPLES_MIN_DEFAULT: u64 = 1024;
/// The early-stop test runs every this many measured samples. Default 256.
const EARLY_STOP_CHECK_SAMPLES: u64 = 256;
/// Confidence multiplier of the early-stop test. Default 3: samples of one window are
/// autocorrelated (hot blocks recur), so the nominal 99.7 % is a looser bound in reality.
const EARLY_STOP_Z: f64 = 3.0;
/// Two candidates whose mean costs provably differ by less than this fraction of the best are
/// interchangeable: the round may stop without separating them. Default 1 %, a tenth of the
/// adoption guard.
const EARLY_STOP_EQUIVALENT: f64 = 0.01;

/// Miss costs that let a round end its measurement window early once the candidates' ranking
/// is settled (beyond the paper; the convergence target).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EarlyStop {
    /// C_a, ns.
    pub app_miss_ns: f64,
    /// C_k, ns.
    pub second_miss_ns: f64,
}

/// Warm-up is judged over blocks of this many sampled accesses.
const WARM_CHECK_SAMPLES: u64 = 1024;
/// A ghost that has not filled is warm when at most this many of the last check block were new.
const WARM_NEW_MAX: u64 = 10;

/// Parameters of a simulation round.
#[derive(Clone, Debug, PartialEq)]
pub struct GhostConfig {
    /// Total memory M for both tiers, bytes.
    pub memory_bytes: u64,
    /// Smallest application cache (the engine's default minimum), bytes.
    pub app_min_bytes: u64,
    /// Equal ranges of `[0, M]`; candidates are `i·M/steps`, i = 0..=steps.
    pub candidate_steps: u32,
    /// Model of the second tier.
    pub second_tier: SecondTier,
    /// 1/R.
    pub sample_inv_rate: u32,
    /// G, blocks per sampling group (1 = per-block spatial sampling).
    pub group_blocks: u32,
    /// Seeds the group hash.
    pub seed: u64,
    /// Sampled accesses measured per candidate.
    pub candidate_samples: u64,
    /// Sampled accesses of second-tier warm-up after each shrink.
    pub candidate_warmup_samples: u64,
    /// Cap on the initial warm-up, sampled accesses.
    pub warmup_samples_max: u64,
    /// Application ghost span as a multiple of M (for the miss-ratio curve), >= 1.
    pub mrc_span: f64,
    /// Points of the miss-ratio curve.
    pub mrc_points: usize,
    /// Ghost memory within which consecutive candidates are simulated side by side in one pass,
    /// bytes; 0 simulates one candidate per pass (the paper's pipeline). Default
    /// [`GHOST_BYTES_MAX_FRACTION_DEFAULT`] of `memory_bytes`.
    pub ghost_bytes_max: u64,
    /// End a measurement window early, at no fewer than `candidate_samples_min` samples, once
    /// the ranking is settled. A candidate's cost per sampled access is 0 on an application
    /// hit, C_a on a second-tier hit, C_a + C_k otherwise. In a one-pass round every candidate
    /// must be worse than the best by more than 3 standard errors of the paired difference, or
    /// provably within 1 % of it; the first pass of a round of several applies the same test
    /// to its own candidates (a pass of one candidate measures a full window), and a later
    /// pass stops once all its candidates are worse than the best of the earlier passes by 3
    /// standard errors (unpaired). `None` (the default; the Tracker sets
    /// its costs): full windows.
    pub early_stop: Option<EarlyStop>,
    /// Floor of an early-stopped window, sampled accesses.
    pub candidate_samples_min: u64,
    /// Memory the second tier has beyond `memory_bytes − M_a`, bytes: in the kernel layout
    /// under a cgroup limit above the engine's memory budget, the page cache also gets the
    /// difference (the budget bounds the process's own memory, not the page cache's). Default
    /// 0 (the paper's model: the tiers share exactly M).
    pub second_extra_bytes: u64,
    /// Read H_a at thresholds scaled by the realised sampling share when it is known
    /// ([`GhostSim::app_sampling_scale`]). Default off: in the crate tests it brings H_a closer
    /// to exact simulation and improves the choice at the application fit point, but in the
    /// engine sweep it moved Zstd/hot10/0.8 from 20 MiB (1.025× the best split, median of 3)
    /// to 24 MiB (0.966×): its more accurate, higher prediction there no longer triggers the
    /// Tracker's runner-up step, which had been correcting a second-tier misprediction
    /// (the engine sweep). The share is still measured and reported, and it gives
    /// [`GhostSim::app_footprint_estimate`].
    pub app_scale: bool,
}

impl GhostConfig {
    /// Paper defaults for `memory_bytes` and `app_min_bytes`.
    pub fn new(memory_bytes: u64, app_min_bytes: u64, second_tier: SecondTier) -> Self {
        Self {
            memory_bytes,
            app_min_bytes,
            candidate_steps: CANDIDATE_STEPS_DEFAULT,
            second_tier,
            sample_inv_rate: SAMPLE_INV_RATE_DEFAULT,
            group_blocks: GROUP_BLOCKS_DEFAULT,
            seed: 0x5eed,
            candidate_samples: CANDIDATE_SAMPLES_DEFAULT,
            candidate_warmup_samples: CANDIDATE_WARMUP_SAMPLES_DEFAULT,
            warmup_samples_max: WARMUP_SAMPLES_MAX_DEFAULT,
            mrc_span: MRC_SPAN_DEFAULT,
            mrc_points: MRC_POINTS_DEFAULT,
            ghost_bytes_max: (memory_bytes as f64 * GHOST_BYTES_MAX_FRACTION_DEFAULT) as u64,
            early_stop: None,
            candidate_samples_min: CANDIDATE_SAMPLES_MIN_DEFAULT,
            second_extra_bytes: 0,
            app_scale: false,
        }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        if self.memory_bytes == 0 {
            return Err(bad("memory_bytes", 0, "must be positive"));
        }
        if self.app_min_bytes > self.memory_bytes {
            return Err(bad(
                "app_min_bytes",
                self.app_min_bytes,
                "exceeds memory_bytes",
            ));
        }
        if !(1..=1024).contains(&self.candidate_steps) {
            return Err(bad(
                "candidate_steps",
                self.candidate_steps,
                "must be in 1..=1024",
            ));
        }
        if self.sample_inv_rate == 0 {
            return Err(bad("sample_inv_rate", 0, "must be >= 1"));
        }
        if self.group_blocks == 0 {
            return Err(bad("group_blocks", 0, "must be >= 1"));
        }
        if self.candidate_samples == 0 {
            return Err(bad("candidate_samples", 0, "must be >= 1"));
        }
        if let Some(e) = self.early_stop {
            let ok = |x: f64| x.is_finite() && x > 0.0;
            if !ok(e.app_miss_ns) || !ok(e.second_miss_ns) {
                return Err(bad(
                    "early_stop",
                    format!("{e:?}"),
                    "costs must be finite and > 0",
                ));
            }
        }
        if !(self.mrc_span >= 1.0 && self.mrc_span <= 64.0) {
            return Err(bad("mrc_span", self.mrc_span, "must be in [1, 64]"));
        }
        if self.mrc_points == 0 || self.mrc_points > 1 << 16 {
            return Err(bad("mrc_points", self.mrc_points, "must be in 1..=65536"));
        }
        if let SecondTier::Pages {
            page_bytes,
            readahead_allowance,
        } = self.second_tier
        {
            if page_bytes == 0 {
                return Err(bad("page_bytes", 0, "must be positive"));
            }
            if !(0.0..=1.0).contains(&readahead_allowance) {
                return Err(bad(
                    "readahead_allowance",
                    readahead_allowance,
                    "must be in [0, 1]",
                ));
            }
        }
        Ok(())
    }

    /// Candidate application sizes, increasing, de-duplicated, each >= `app_min_bytes`.
    pub fn candidates(&self) -> Vec<u64> {
        let steps = u64::from(self.candidate_steps.max(1));
        let mut v: Vec<u64> = (0..=steps)
            .map(|i| {
                let c = (u128::from(self.memory_bytes) * u128::from(i) / u128::from(steps)) as u64;
                c.max(self.app_min_bytes)
            })
            .collect();
        v.dedup();
        v
    }
}

/// Decides which blocks a round samples: hash of `(file, block_no / G)` below `2^64 / (1/R)`.
#[derive(Clone, Copy, Debug)]
pub struct GroupSampler {
    inv_rate: u64,
    group_blocks: u64,
    seed: u64,
}

impl GroupSampler {
    /// A sampler of rate `1/inv_rate` over groups of `group_blocks`.
    pub fn new(inv_rate: u32, group_blocks: u32, seed: u64) -> Self {
        Self {
            inv_rate: u64::from(inv_rate.max(1)),
            group_blocks: u64::from(group_blocks.max(1)),
            seed,
        }
    }

    /// Whether block `block_no` of `file` is in the sample.
    #[inline]
    pub fn sampled(&self, file: u64, block_no: u64) -> bool {
        if self.inv_rate == 1 {
            return true;
        }
        let g = block_no / self.group_blocks;
        let h = mix64(mix64(file ^ self.seed).wrapping_add(g));
        h.is_multiple_of(self.inv_rate)
    }
}

/// SplitMix64 finaliser: a fast bijective 64-bit mixer.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The prediction for one candidate split.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CandidatePrediction {
    /// Application cache size M_a, bytes.
    pub app_bytes: u64,
    /// Predicted application hit ratio.
    pub h_a: f64,
    /// Predicted second-tier hit ratio among application misses.
    pub h_k: f64,
    /// Sampled application misses its H_k rests on.
    pub second_samples: u64,
    /// Whether H_k came from the exact-footprint rule ([`GhostSim::set_second_footprint`]):
    /// the engine's second tier holds everything the round touched within this candidate's
    /// share, so every re-reference hits and the sampled ghost's capacity is not consulted.
    pub second_fits: bool,
}

impl CandidatePrediction {
    /// Predicted L_e under the given miss costs.
    pub fn expected_latency(&self, app_miss_ns: f64, second_miss_ns: f64) -> f64 {
        expected_latency(self.h_a, self.h_k, app_miss_ns, second_miss_ns)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Warmup,
    PassWarm { left: u64 },
    PassMeasure { left: u64 },
    Done,
}

/// Where a round is, for stats and timelines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundProgress {
    /// Filling the ghosts.
    Warmup,
    /// Simulating candidates `index .. index + width` of `of` (one pass).
    Candidate {
        /// First candidate of the pass.
        index: usize,
        /// Candidates in the pass.
        width: usize,
        /// Number of candidates.
        of: usize,
    },
    /// All candidates simulated.
    Done,
}

/// One simulation round (see the module doc).
pub struct GhostSim {
    cfg: GhostConfig,
    sampler: GroupSampler,
    candidates: Vec<u64>,
    /// Candidate sizes scaled by R (application thresholds).
    app_thresholds: Vec<u64>,
    /// Second-tier ghost capacity per candidate, scaled by R and the read-ahead factor.
    second_caps: Vec<u64>,
    app: StackDistance,
    /// Second-tier ghosts of the pass: `second[j]` belongs to candidate `pass_start + j`.
    second: Vec<Lru>,
    pass_start: usize,
    passes: u32,
    phase: Phase,
    /// Application hits per candidate over post-warm-up samples.
    app_hits: Vec<u64>,
    app_samples: u64,
    /// Per candidate: (application misses, second-tier hits) in its measurement window.
    second_counts: Vec<(u64, u64)>,
    /// Per candidate and band `k` (row-major, [`APP_BANDS`] each), post-warm-up samples whose
    /// distance first fits `threshold·(1 + (k − APP_BAND_STEPS)·APP_BAND_STEP)`; larger ones are
    /// not counted.
    app_band_hits: Vec<u64>,
    /// Compressed bytes of the distinct sampled blocks the application ghost has seen (first
    /// accesses, warm-start included); exact while it has forgotten nothing.
    app_seen_compressed: u64,
    /// Whether [`GhostSim::free`] ran, and the sampling scale it kept for the predictions
    /// (the band counters stay, like the miss-ratio curve, and are no longer counted as
    /// ghost memory).
    freed: bool,
    app_scale_kept: Option<f64>,
    /// Per candidate, over post-warm-up samples: (application misses, of which re-references
    /// seen earlier in the round) — the second tier's hits if it never evicts.
    reuse_counts: Vec<(u64, u64)>,
    /// Unscaled second-tier bytes per candidate: `M − M_a` + the extra room.
    second_bytes: Vec<u64>,
    /// Compressed bytes the second tier needs to hold everything the round touched, when the
    /// engine knows it exactly (see [`GhostSim::set_second_footprint`]).
    second_footprint: Option<u64>,
    mrc: DistanceHistogram,
    samples: u64,
    warm_samples: u64,
    check_app_new: u64,
    check_second_new: u64,
    check_left: u64,
    peak_metadata_bytes: usize,
    /// Early stop: per candidate of the pass, sum of per-sample costs; per pair (j, k), j <= k,
    /// the sum of products (row-major upper triangle); measured samples of the pass.
    cost_sum: Vec<f64>,
    cost_prod: Vec<f64>,
    cost_n: u64,
    stopped_early: bool,
    /// Sampled blocks fed by [`GhostSim::warm_start`] (0: not warm-started).
    warm_started: Option<u64>,
    /// Lowest mean cost (and its standard error) of the passes measured so far.
    best_before: Option<(f64, f64)>,
}

impl GhostSim {
    /// Starts a round.
    pub fn new(cfg: GhostConfig) -> Result<Self> {
        cfg.validate()?;
        let r = 1.0 / f64::from(cfg.sample_inv_rate);
        let candidates = cfg.candidates();
        let app_thresholds: Vec<u64> = candidates
            .iter()
            .map(|&c| (c as f64 * r).round() as u64)
            .collect();
        let factor = cfg.second_tier.capacity_factor();
        let second_bytes: Vec<u64> = candidates
            .iter()
            .map(|&c| (cfg.memory_bytes - c).saturating_add(cfg.second_extra_bytes))
            .collect();
        let second_caps: Vec<u64> = second_bytes
            .iter()
            .map(|&bytes| (bytes as f64 * factor * r).round() as u64)
            .collect();
        let limit = (cfg.memory_bytes as f64 * cfg.mrc_span * r).ceil() as u64;
        let bucket = (limit / cfg.mrc_points as u64).max(1);
        let n = candidates.len();
        Ok(Self {
            sampler: GroupSampler::new(cfg.sample_inv_rate, cfg.group_blocks, cfg.seed),
            app: StackDistance::new(limit.max(1)),
            second: vec![Lru::new(second_caps[0])],
            pass_start: 0,
            passes: 0,
            phase: Phase::Warmup,
            app_hits: vec![0; n],
            app_band_hits: vec![0; n * APP_BANDS],
            app_seen_compressed: 0,
            freed: false,
            app_scale_kept: None,
            app_samples: 0,
            second_counts: vec![(0, 0); n],
            reuse_counts: vec![(0, 0); n],
            second_bytes,
            second_footprint: None,
            mrc: DistanceHistogram::new(bucket, cfg.mrc_points),
            samples: 0,
            warm_samples: 0,
            check_app_new: 0,
            check_second_new: 0,
            check_left: WARM_CHECK_SAMPLES,
            peak_metadata_bytes: 0,
            cost_sum: Vec::new(),
            cost_prod: Vec::new(),
            cost_n: 0,
            stopped_early: false,
            warm_started: None,
            best_before: None,
            candidates,
            app_thresholds,
            second_caps,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GhostConfig {
        &self.cfg
    }

    /// Candidate application sizes.
    pub fn candidates(&self) -> &[u64] {
        &self.candidates
    }

    /// Whether the access is in the sample (cheap; call before [`GhostSim::record`] to skip
    /// building anything for unsampled blocks).
    #[inline]
    pub fn is_sampled(&self, file: u64, block_no: u64) -> bool {
        self.sampler.sampled(file, block_no)
    }

    /// Feeds one access; unsampled ones are ignored. Returns whether it was sampled.
    pub fn record(&mut self, a: &BlockAccess) -> bool {
        if !self.sampler.sampled(a.file, a.block_no) || self.phase == Phase::Done {
            return false;
        }
        self.samples += 1;
        let key = BlockKey {
            file: a.file,
            unit: a.offset,
        };
        let d = self.app.access(key, a.uncompressed_bytes());
        if d == crate::stack::Distance::Cold {
            self.app_seen_compressed += a.compressed_bytes();
        }
        let warming = self.phase == Phase::Warmup;
        let measuring = matches!(self.phase, Phase::PassMeasure { .. });
        if !warming {
            self.app_samples += 1;
            self.mrc.record(d);
            if let crate::stack::Distance::Bytes(bytes) = d {
                self.count_app_bands(bytes);
            }
            let seen = matches!(d, crate::stack::Distance::Bytes(_));
            for ((h, r), &t) in self
                .app_hits
                .iter_mut()
                .zip(self.reuse_counts.iter_mut())
                .zip(&self.app_thresholds)
            {
                let app_hit = d.hits_within(t);
                *h += app_hit as u64;
                if !app_hit {
                    r.0 += 1;
                    r.1 += seen as u64;
                }
            }
        }
        let mut first_second_miss = false;
        let track = measuring && self.stop_costs().is_some();
        let (c_a, c_k) = self.stop_costs().unwrap_or((0.0, 0.0));
        for (j, lru) in self.second.iter_mut().enumerate() {
            let i = self.pass_start + j;
            if d.hits_within(self.app_thresholds[i]) {
                if track {
                    self.cost_sum.push(0.0);
                }
                continue;
            }
            let hit = second_tier_access(
                lru,
                self.cfg.second_tier,
                a.file,
                a.offset,
                a.compressed_bytes(),
            );
            if measuring {
                self.second_counts[i].0 += 1;
                self.second_counts[i].1 += hit as u64;
            }
            if track {
                self.cost_sum.push(if hit { c_a } else { c_a + c_k });
            }
            first_second_miss |= j == 0 && !hit;
        }
        let mut stop = false;
        if track {
            stop = self.add_costs();
        }
        match self.phase {
            Phase::Warmup => {
                self.warm_samples += 1;
                self.check_app_new += matches!(d, crate::stack::Distance::Cold) as u64;
                self.check_second_new += first_second_miss as u64;
                self.check_left -= 1;
                if self.check_left == 0 {
                    self.end_warm_check();
                }
            }
            Phase::PassWarm { left } => {
                self.phase = if left <= 1 {
                    Phase::PassMeasure {
                        left: self.cfg.candidate_samples,
                    }
                } else {
                    Phase::PassWarm { left: left - 1 }
                };
            }
            Phase::PassMeasure { left } => {
                if left <= 1 || stop {
                    self.stopped_early |= stop && left > 1;
                    self.start_pass(self.pass_start + self.second.len());
                } else {
                    self.phase = Phase::PassMeasure { left: left - 1 };
                }
            }
            Phase::Done => {}
        }
        if self.samples.is_multiple_of(4096) {
            self.peak_metadata_bytes = self.peak_metadata_bytes.max(self.metadata_bytes());
        }
        true
    }

    /// Counts one post-warm-up distance into every candidate's threshold bands: band `k` of
    /// candidate `i` gets it when `k` is the first band whose threshold holds it.
    #[inline]
    fn count_app_bands(&mut self, bytes: u64) {
        for (i, &t) in self.app_thresholds.iter().enumerate() {
            if t == 0 {
                continue;
            }
            let k = ((bytes as f64 / t as f64 - 1.0) / APP_BAND_STEP).ceil();
            if k <= APP_BAND_STEPS as f64 {
                let k = (k.max(-(APP_BAND_STEPS as f64)) as i64 + APP_BAND_STEPS) as usize;
                self.app_band_hits[i * APP_BANDS + k] += 1;
            }
        }
    }

    /// The realised sampling share of the data relative to R, when the engine's exact
    /// second-tier footprint is known ([`GhostSim::set_second_footprint`]) and the application
    /// ghost has forgotten nothing: the compressed bytes of the distinct sampled blocks seen
    /// over the footprint, times 1/R. Per-block sampling puts R·(1 ± ~0.09) of ~8 000 blocks
    /// into the sample, so a ghost of R·M_a holds a different share of the data than the real
    /// M_a does; at the application tier's fit point (M/D_u = 1: does the data fit M_a = M?)
    /// that decided whether M_a = M predicted H_a ≈ 1 and was adopted where it thrashed
    /// (the engine sweep). With the scale, [`GhostSim::predictions`] reads H_a at
    /// `M_a·R·scale` from the threshold bands (linear between bands, clamped to ±24 %). It
    /// assumes sampled blocks compress like the rest (the uncompressed share equals the
    /// compressed one). `None` when not known.
    pub fn app_sampling_scale(&self) -> Option<f64> {
        if self.freed {
            return self.app_scale_kept;
        }
        self.app_sampling_scale_live()
    }

    fn app_sampling_scale_live(&self) -> Option<f64> {
        let f = self.second_footprint.filter(|&f| f > 0)?;
        if self.app.forgotten() > 0 || self.app_seen_compressed == 0 || self.app_samples == 0 {
            return None;
        }
        Some(self.app_seen_compressed as f64 / f as f64 * f64::from(self.cfg.sample_inv_rate))
    }

    /// The uncompressed bytes of everything the round touched, estimated when
    /// [`GhostSim::app_sampling_scale`] is known: the application ghost's resident bytes (every
    /// distinct sampled block, uncompressed) times the exact compressed footprint over the
    /// sampled blocks' compressed bytes. `None` when not known.
    pub fn app_footprint_estimate(&self) -> Option<u64> {
        let f = self.second_footprint?;
        self.app_sampling_scale_live()?;
        let est = self.app.resident_bytes() as f64 * f as f64 / self.app_seen_compressed as f64;
        Some(est as u64)
    }

    /// Post-warm-up hits of candidate `i` at its threshold times `scale` (bands interpolated).
    fn app_hits_scaled(&self, i: usize, scale: f64) -> f64 {
        let bands = &self.app_band_hits[i * APP_BANDS..(i + 1) * APP_BANDS];
        let steps = APP_BAND_STEPS as f64;
        let pos = ((scale - 1.0) / APP_BAND_STEP).clamp(-steps, steps) + steps;
        let lo = pos.floor() as usize;
        let hi = (lo + 1).min(APP_BANDS - 1);
        let cum = |k: usize| bands[..=k].iter().sum::<u64>() as f64;
        let w = pos - lo as f64;
        cum(lo) * (1.0 - w) + cum(hi) * w
    }

    /// (C_a, C_k) when early stopping is configured (costs are then tracked in every pass).
    fn stop_costs(&self) -> Option<(f64, f64)> {
        let e = self.cfg.early_stop?;
        Some((e.app_miss_ns, e.second_miss_ns))
    }

    /// Per candidate of the pass: mean cost per sampled access and its standard error (from
    /// the running sums; empty before the first measured sample).
    fn pass_costs(&self) -> Vec<(f64, f64)> {
        let w = self.second.len();
        if self.cost_n == 0 || self.cost_sum.len() != w {
            return Vec::new();
        }
        let n = self.cost_n as f64;
        (0..w)
            .map(|j| {
                let m = self.cost_sum[j] / n;
                let var = (self.cost_prod[Self::pair(w, j, j)] / n - m * m).max(0.0);
                (m, (var / n).sqrt())
            })
            .collect()
    }

    /// Index of pair (j, k) in the row-major upper triangle of a `w`-wide pass.
    fn pair(w: usize, j: usize, k: usize) -> usize {
        let (j, k) = if j <= k { (j, k) } else { (k, j) };
        j * w - j * (j + 1) / 2 + k
    }

    /// Folds the per-candidate costs of one sample (pushed at the end of `cost_sum`) into the
    /// running sums; returns whether the ranking is settled.
    fn add_costs(&mut self) -> bool {
        let w = self.second.len();
        let x: Vec<f64> = self.cost_sum.drain(w..).collect();
        if x.len() != w {
            return false;
        }
        let mut k = 0;
        for j in 0..w {
            self.cost_sum[j] += x[j];
            for xl in &x[j..] {
                self.cost_prod[k] += x[j] * xl;
                k += 1;
            }
        }
        self.cost_n += 1;
        self.cost_n >= self.cfg.candidate_samples_min
            && self.cost_n.is_multiple_of(EARLY_STOP_CHECK_SAMPLES)
            && self.ranking_settled()
    }

    /// The early-stop test of [`GhostConfig::early_stop`] on the running sums. A pass holding
    /// every candidate compares them pairwise on the same samples; so does the first pass of
    /// a round of several (over its own candidates; a pass of one measures a full window), and
    /// a later one stops once each of its candidates is worse than the best of the earlier
    /// passes by more than 3 standard errors of the (unpaired) difference.
    fn ranking_settled(&self) -> bool {
        let w = self.second.len();
        if w < self.candidates.len() {
            match self.best_before {
                Some((best, best_se)) => {
                    return self.pass_costs().iter().all(|&(m, se)| {
                        m - best > EARLY_STOP_Z * (se * se + best_se * best_se).sqrt()
                    })
                }
                // The first pass of several: its own candidates' ranking, paired, as in a
                // one-pass round (it measured a full window before). A pass of
                // one candidate has no ranking to settle: full window.
                None if w < 2 => return false,
                None => {}
            }
        }
        let n = self.cost_n as f64;
        let mean: Vec<f64> = self.cost_sum.iter().map(|s| s / n).collect();
        let Some(b) = (0..w).min_by(|&x, &y| mean[x].total_cmp(&mean[y])) else {
            return true;
        };
        let pair = |j: usize, k: usize| Self::pair(w, j, k);
        let floor = self.cfg.early_stop.map_or(0.0, |e| e.app_miss_ns * 0.01);
        let tol = EARLY_STOP_EQUIVALENT * mean[b].max(floor);
        (0..w).filter(|&j| j != b).all(|j| {
            let d = mean[j] - mean[b];
            let e2 = (self.cost_prod[pair(j, j)] - 2.0 * self.cost_prod[pair(j, b)]
                + self.cost_prod[pair(b, b)])
                / n;
            let var = (e2 - d * d).max(0.0);
            let se = (var / n).sqrt();
            d > EARLY_STOP_Z * se || d + EARLY_STOP_Z * se <= tol
        })
    }

    fn end_warm_check(&mut self) {
        let app_warm = self.app.resident_bytes() * 100 >= self.app.limit_bytes() * 99
            || self.check_app_new <= WARM_NEW_MAX;
        let second_warm = self.second.first().is_none_or(|l| {
            let cap = l.capacity();
            cap == 0 || l.used() * 100 >= cap * 99 || self.check_second_new <= WARM_NEW_MAX
        });
        self.check_app_new = 0;
        self.check_second_new = 0;
        self.check_left = WARM_CHECK_SAMPLES;
        if (app_warm && second_warm) || self.warm_samples >= self.cfg.warmup_samples_max {
            self.start_pass(0);
        }
    }

    /// Starts the pass whose first candidate is `i`: keeps the previous pass's last (smallest)
    /// ghost as candidate `i`'s, shrunk (in place in the pipeline, compacted side by side), and
    /// gives each following candidate a truncated copy of it while the ghosts' metadata stays
    /// within the budget.
    fn start_pass(&mut self, i: usize) {
        self.peak_metadata_bytes = self.peak_metadata_bytes.max(self.metadata_bytes());
        for (m, se) in self.pass_costs() {
            if self.best_before.is_none_or(|(b, _)| m < b) {
                self.best_before = Some((m, se));
            }
        }
        let n = self.candidates.len();
        let Some(mut source) = self.second.pop() else {
            self.phase = Phase::Done;
            return;
        };
        for mut l in self.second.drain(..) {
            l.clear_and_free();
        }
        if i >= n {
            self.second.push(source);
            self.phase = Phase::Done;
            return;
        }
        let budget = usize::try_from(self.cfg.ghost_bytes_max).unwrap_or(usize::MAX);
        // Side by side: compact the source to candidate i's capacity (a shrunk slab keeps its
        // old size), so that more copies fit, if the transient of both fits the budget too.
        let head = (budget > 0).then(|| source.truncated_copy(self.second_caps[i]));
        let transient = self.app.metadata_bytes()
            + source.metadata_bytes()
            + head.as_ref().map_or(0, Lru::metadata_bytes);
        match head {
            Some(h) if transient <= budget => {
                self.peak_metadata_bytes = self.peak_metadata_bytes.max(transient);
                source.clear_and_free();
                source = h;
            }
            _ => source.set_capacity(self.second_caps[i]),
        }
        let mut used = self.app.metadata_bytes() + source.metadata_bytes();
        let mut copies = Vec::new();
        for k in i + 1..n {
            let copy = source.truncated_copy(self.second_caps[k]);
            let bytes = copy.metadata_bytes();
            if used + bytes > budget {
                break;
            }
            used += bytes;
            copies.push(copy);
        }
        self.second.push(source);
        self.second.extend(copies);
        let w = self.second.len();
        self.cost_sum = vec![0.0; w];
        self.cost_prod = vec![0.0; w * (w + 1) / 2];
        self.cost_n = 0;
        let first_alone = i == 0 && self.second.len() == 1;
        self.pass_start = i;
        self.passes += 1;
        self.peak_metadata_bytes = self.peak_metadata_bytes.max(self.metadata_bytes());
        self.phase = if first_alone || self.cfg.candidate_warmup_samples == 0 {
            Phase::PassMeasure {
                left: self.cfg.candidate_samples,
            }
        } else {
            Phase::PassWarm {
                left: self.cfg.candidate_warmup_samples,
            }
        };
    }

    /// Whether [`GhostSim::warm_start`] would still be taken: the round is in its initial
    /// warm-up, has seen no sampled access and was not warm-started.
    pub fn wants_warm_start(&self) -> bool {
        self.phase == Phase::Warmup && self.samples == 0 && self.warm_started.is_none()
    }

    /// Warm-starts the ghosts from the engine's live caches (beyond the paper; the
    /// settle time): `second` is the second tier's contents and `app` the application cache's,
    /// each oldest first. Every LRU resident is more recent than every block that is not
    /// resident, so the union in recency order is the second tier's blocks that the
    /// application cache lacks, then the application cache's blocks: the application ghost is
    /// fed `second` then `app` and the first candidate's second-tier ghost (the only one during
    /// the warm-up) is fed `second`, all through the sampler, with no hit counted. The warm-up
    /// then still runs its checks (at least 1024 sampled accesses), so ghosts that the caches
    /// could not fill keep warming as before. A block's `uncompressed_len` sizes it in the
    /// application ghost and its `compressed_len` in the second-tier ghost. Returns the
    /// sampled blocks fed; ignored (0) unless [`GhostSim::wants_warm_start`].
    pub fn warm_start(&mut self, second: &[BlockAccess], app: &[BlockAccess]) -> u64 {
        if !self.wants_warm_start() {
            return 0;
        }
        let mut fed = 0;
        for a in second.iter().chain(app) {
            if !self.sampler.sampled(a.file, a.block_no) {
                continue;
            }
            let key = BlockKey {
                file: a.file,
                unit: a.offset,
            };
            if self.app.access(key, a.uncompressed_bytes()) == crate::stack::Distance::Cold {
                self.app_seen_compressed += a.compressed_bytes();
            }
            fed += 1;
        }
        if let Some(lru) = self.second.first_mut() {
            for a in second {
                if self.sampler.sampled(a.file, a.block_no) {
                    second_tier_access(
                        lru,
                        self.cfg.second_tier,
                        a.file,
                        a.offset,
                        a.compressed_bytes(),
                    );
                }
            }
        }
        self.warm_started = Some(fed);
        self.peak_metadata_bytes = self.peak_metadata_bytes.max(self.metadata_bytes());
        fed
    }

    /// Sampled blocks fed by [`GhostSim::warm_start`], if the round was warm-started.
    pub fn warm_started(&self) -> Option<u64> {
        self.warm_started
    }

    /// Whether every candidate has been simulated.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Where the round is.
    pub fn progress(&self) -> RoundProgress {
        match self.phase {
            Phase::Warmup => RoundProgress::Warmup,
            Phase::PassWarm { .. } | Phase::PassMeasure { .. } => RoundProgress::Candidate {
                index: self.pass_start,
                width: self.second.len(),
                of: self.candidates.len(),
            },
            Phase::Done => RoundProgress::Done,
        }
    }

    /// Sampled accesses seen this round.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Sampled accesses of the initial warm-up (all of them while it runs).
    pub fn warmup_samples(&self) -> u64 {
        self.warm_samples
    }

    /// Whether a measurement window ended early (see [`GhostConfig::early_stop`]).
    pub fn stopped_early(&self) -> bool {
        self.stopped_early
    }

    /// Passes started so far (1 when every candidate fitted the budget side by side).
    pub fn passes(&self) -> u32 {
        self.passes
    }

    /// Tells the round how many compressed bytes (as the second tier charges them) hold
    /// everything the workload touched during the round, when the engine knows it exactly: its
    /// real second tier evicted nothing during the round and holds this much. `None` (the
    /// default): unknown. Beyond the paper; the engine sweep's LZ4/hot30/1.0 cell.
    ///
    /// A candidate whose second tier (`M − M_a` + extra room) is at least the footprint never
    /// evicts in reality: its misses are first references only. Its sampled ghost cannot tell,
    /// because per-block sampling at R puts a share of the data that is only R ± √(R/n) of it
    /// into a ghost of capacity exactly R times the tier (±9 % at R = 1/64 over ~8 000 blocks):
    /// near the fit point the ghost evicts where the real tier does not. For such a candidate
    /// [`GhostSim::predictions`] reads H_k as the share of its application misses (post
    /// warm-up) that re-reference a block seen earlier in the round — what an LRU that never
    /// evicts would hit. The application ghost remembers `mrc_span·M` uncompressed bytes, so
    /// a re-reference beyond that counts as a miss (pessimistic, as before).
    pub fn set_second_footprint(&mut self, bytes: Option<u64>) {
        self.second_footprint = bytes;
    }

    /// Whether candidate `i`'s second tier holds the whole known footprint.
    fn second_fits(&self, i: usize) -> bool {
        self.second_footprint
            .is_some_and(|f| f > 0 && self.second_bytes[i] >= f)
    }

    /// Predictions for every candidate (meaningful once [`GhostSim::is_done`]).
    pub fn predictions(&self) -> Vec<CandidatePrediction> {
        let scale = self.app_sampling_scale();
        self.candidates
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let h_a = match (self.app_samples, scale.filter(|_| self.cfg.app_scale)) {
                    (0, _) => 0.0,
                    (n, Some(s)) => self.app_hits_scaled(i, s) / n as f64,
                    (n, None) => self.app_hits[i] as f64 / n as f64,
                };
                let fits = self.second_fits(i);
                let (m, h) = if fits {
                    self.reuse_counts[i]
                } else {
                    self.second_counts[i]
                };
                // No second tier at all (M_a = M, no extra room): every application miss
                // reads the device, whatever the window sampled. Without that rule a window
                // that sampled no miss of M_a = M read H_k = 1 next to an H_a just under 1,
                // predicted L_e ≈ 0 and adopted M where the data did not fit (the Zstd
                // M/D_u 1.0 cells' single-run drops in the engine sweep).
                let h_k = if self.second_bytes[i] == 0 {
                    0.0
                } else if m == 0 {
                    1.0
                } else {
                    h as f64 / m as f64
                };
                CandidatePrediction {
                    app_bytes: c,
                    h_a,
                    h_k,
                    second_samples: m,
                    second_fits: fits,
                }
            })
            .collect()
    }

    /// LRU miss-ratio curve of the application tier over the round's post-warm-up samples,
    /// `(cache bytes, miss ratio)` from 0 to `mrc_span·M`.
    pub fn mrc(&self) -> Vec<(u64, f64)> {
        self.mrc.curve(f64::from(self.cfg.sample_inv_rate))
    }

    /// Current heap bytes of the ghosts.
    pub fn metadata_bytes(&self) -> usize {
        self.app.metadata_bytes()
            + self.second.iter().map(Lru::metadata_bytes).sum::<usize>()
            + if self.freed {
                0
            } else {
                self.app_band_hits.capacity() * std::mem::size_of::<u64>()
            }
    }

    /// Largest [`GhostSim::metadata_bytes`] seen this round (sampled every 4096 samples).
    pub fn peak_metadata_bytes(&self) -> usize {
        self.peak_metadata_bytes.max(self.metadata_bytes())
    }

    /// Releases the ghosts' memory; predictions and the curve stay readable.
    pub fn free(&mut self) {
        // The scale needs the ghost's state: keep the verdict, then drop the ghosts.
        self.app_scale_kept = self.app_sampling_scale_live();
        self.freed = true;
        self.app.clear_and_free();
        for l in &mut self.second {
            l.clear_and_free();
        }
        self.second = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_eighths_floored_at_the_minimum() {
        let c = GhostConfig::new(800, 150, SecondTier::Blocks).candidates();
        assert_eq!(c, vec![150, 200, 300, 400, 500, 600, 700, 800]);
        let c = GhostConfig::new(800, 0, SecondTier::Blocks).candidates();
        assert_eq!(c.len(), 9);
    }

    #[test]
    fn bad_configs_are_rejected() {
        let mut g = GhostConfig::new(100, 10, SecondTier::Blocks);
        g.sample_inv_rate = 0;
        assert!(GhostSim::new(g).is_err());
        assert!(GhostConfig::new(100, 200, SecondTier::Blocks)
            .validate()
            .is_err());
        assert!(GhostConfig::new(0, 0, SecondTier::Blocks)
            .validate()
            .is_err());
    }

    #[test]
    fn group_sampling_keeps_contiguous_blocks_together_at_rate_r() {
        let s = GroupSampler::new(64, 32, 9);
        let mut sampled_groups = 0;
        for g in 0..100_000u64 {
            let first = s.sampled(7, g * 32);
            for b in 1..32 {
                assert_eq!(s.sampled(7, g * 32 + b), first);
            }
            sampled_groups += first as u64;
        }
        let rate = sampled_groups as f64 / 100_000.0;
        assert!((rate - 1.0 / 64.0).abs() < 0.002, "rate {rate}");
    }
}
