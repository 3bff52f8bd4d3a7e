//! The Symbiosis controller: Tracker (§4.1.1) plus the round lifecycle (§4.1.2, §4.2.1,
//! §4.2.4, §4.2.5). The engine reports every block access; the controller answers "what M_a now?".
//!
//! ```text
//!            L_e of a window differs > 10 % from the reference
//!   Stable ───────────────────────────────────────────────────► Adapting (GhostSim round)
//!     ▲      (reset policy: M_a := minimum if L_e rose)            │   │ workload changed during
//!     │                                                            │   │ the round: restart;
//!     │ three consecutive windows within 5 %                       │   │ too many restarts:
//!   Settling ◄──── round done: adopt the best candidate if ────────┘   ▼
//!                  predicted L_e <= 0.9 × measured L_e (guard)        Paused ── L_e steady ──►
//!                  else keep M_a; ghost memory freed                          new round
//! ```
//!
//! Beyond the paper: the engine may report its second tier's bytes and evictions
//! ([`Symbiosis::note_second_tier`]) — a round that saw no eviction then predicts the candidates
//! that hold the footprint exactly and does not adopt one whose room the footprint's growth would
//! fill within a round's length, nor M_a = M unless the estimated uncompressed footprint fits
//! it with [`APP_FIT_MARGIN`] to spare — and may warm-start a new round from its live caches
//! ([`Symbiosis::warm_start_round`]). For measurements a controller can observe only
//! ([`SymbiosisConfig::adopt`] false: rounds are reported, never adopted) and hold its round
//! ([`Symbiosis::hold_round`]: accesses skip it), so that simulating is the only difference
//! between two stretches of the same workload.
//!
//! L_e = (1 − H_a)·(C_a + (1 − H_k)·C_k) over windows of `window_accesses` accesses, with C_a
//! (decompression + second-tier read) and C_k (device read) supplied by the caller, usually from
//! [`crate::calibrate`]. The first round starts at once (the paper simulates from start-up).
//!
//! Thread-safety: `Symbiosis` is `Send` but not `Sync`; the engine owns one behind a mutex or
//! feeds it from one thread (for example by batching per-thread access logs). Invariants:
//! `app_target_bytes()` always lies in `[app_min_bytes, memory_bytes]`; a [`GhostSim`] exists
//! exactly in the Adapting state; the timeline holds at most [`TIMELINE_MAX`] windows.

use std::collections::VecDeque;

use crate::access::BlockAccess;
use crate::error::{bad, Result};
use crate::ghost::{CandidatePrediction, EarlyStop, GhostConfig, GhostSim, RoundProgress};
use crate::twotier::{HitCounts, TierHit};

/// Default accesses per Tracker window. 65 536 (≈ 65 ms at 1 M block reads/s): the relative
/// standard error of a hit ratio near 0.5 is then about 0.4 %, far below the 10 % trigger.
pub const WINDOW_ACCESSES_DEFAULT: u64 = 1 << 16;
/// A change of L_e beyond this fraction starts a round (paper: "currently 10 %").
pub const CHANGE_THRESHOLD_DEFAULT: f64 = 0.10;
/// Adopt a candidate only if its predicted L_e is at least this fraction below the measured one
/// (the seeds' README: "use 10 %"; the paper does not state it).
pub const ADOPT_THRESHOLD_DEFAULT: f64 = 0.10;
/// Consecutive windows within this fraction count as settled (warmed caches). Default 5 %, half
/// the change threshold so that settling never looks like a change.
pub const STABLE_TOLERANCE_DEFAULT: f64 = 0.05;
/// Settled means this many consecutive window pairs within the tolerance (three windows): one
/// pair can match by chance while a resized cache is still filling.
const SETTLE_STREAK: u32 = 2;
/// Settling gives up waiting after this many windows and takes the last L_e as the reference.
pub const SETTLE_WINDOWS_MAX_DEFAULT: u32 = 64;
/// Restarts of a round (workload changed during it) before pausing (paper: "stops the
/// simulation as it is unable to finish"; the count is not given). Default 3.
pub const RESTARTS_MAX_DEFAULT: u32 = 3;
/// Steady windows a paused controller waits for before a new round. Default 4.
pub const PAUSE_STEADY_WINDOWS_DEFAULT: u32 = 4;
/// After an adoption settles, roll back if L_e is worse than before the round by more than this
/// fraction. Beyond the paper: the guard protects against pessimistic predictions, this protects
/// against optimistic ones (sampling error). Default 5 %: the settle tolerance, so noise alone
/// does not roll back.
pub const REVERT_TOLERANCE_DEFAULT: f64 = 0.05;
/// After an adoption settles, try the runner-up candidate when the settled L_e exceeds the
/// adopted candidate's prediction by more than this fraction (and the runner-up was predicted
/// below the settled L_e); keep whichever of the two measures lower. Beyond the paper: near the
/// point where compressed data just fits into M − M_a a sampled ghost cannot resolve a 1–2 %
/// overshoot (the engine sweep's Zstd cells), and the measured L_e is the only arbiter. Default
/// 15 %: above the median prediction error at the adopted size in that sweep (9.6 %), so a
/// good adoption is rarely second-guessed.
pub const CONFIRM_TOLERANCE_DEFAULT: f64 = 0.15;
/// Windows kept in the timeline.
pub const TIMELINE_MAX: usize = 4096;
/// How far ahead a round's footprint growth is projected, in round lengths (see
/// `Symbiosis::overflowing_soon`). Default 1: the next round, started by the L_e rise an
/// overflow causes, is the earliest that could correct the choice.
pub const FOOTPRINT_HORIZON_ROUNDS: f64 = 1.0;
/// A candidate with no second tier at all (M_a = M, no extra room) is adopted only if the
/// round's estimated uncompressed footprint ([`GhostSim::app_footprint_estimate`]) fits it with
/// this margin. Beyond the paper (the engine sweep): at M/D_u = 1.0 the ghost, a
/// single LRU over R of the blocks, predicted M_a = M with first-reference misses only, while
/// the engine's block cache (16 shards under one budget, each insert evicting its own shard's
/// tail) measured H_a 0.9964 there, and with no second tier every such miss is a device read:
/// M predicted ~170 ns, measured 1.7–3.4× the best split. Default 10 %: at ~8 000 blocks a
/// shard holds ~500 ± 22 of them, so 10 % is about 4.5 standard deviations of one shard's
/// share; a candidate just below the footprint keeps its second tier and is unaffected.
pub const APP_FIT_MARGIN: f64 = 0.10;
/// Second-tier reports kept; a round's eviction baseline is the oldest. Default 3: a report
/// is taken once per batch of accesses, and the one from two batches back surely predates
/// every access of the batch in which the round starts (see [`Symbiosis::note_second_tier`]).
const SECOND_NOTES: usize = 3;

/// Per-miss costs of the two tiers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MissCosts {
    /// C_a: cost of an application miss served by the second tier (read + decompress), ns.
    pub app_miss_ns: f64,
    /// C_k: extra cost of a second-tier miss (device read), ns.
    pub second_miss_ns: f64,
}

impl MissCosts {
    fn validate(&self) -> Result<()> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !ok(self.app_miss_ns) {
            return Err(bad(
                "app_miss_ns",
                self.app_miss_ns,
                "must be finite and > 0",
            ));
        }
        if !ok(self.second_miss_ns) {
            return Err(bad(
                "second_miss_ns",
                self.second_miss_ns,
                "must be finite and > 0",
            ));
        }
        Ok(())
    }
}

/// Everything the controller needs.
#[derive(Clone, Debug, PartialEq)]
pub struct SymbiosisConfig {
    /// Round parameters (memory budget, candidates, sampling, second-tier model).
    pub ghost: GhostConfig,
    /// Miss costs.
    pub costs: MissCosts,
    /// Accesses per Tracker window.
    pub window_accesses: u64,
    /// Relative L_e change that starts a round.
    pub change_threshold: f64,
    /// Required predicted gain to adopt.
    pub adopt_threshold: f64,
    /// Relative difference of consecutive windows that counts as settled.
    pub stable_tolerance: f64,
    /// Settling gives up after this many windows.
    pub settle_windows_max: u32,
    /// Restarts before pausing.
    pub restarts_max: u32,
    /// Steady windows before a paused controller simulates again.
    pub pause_steady_windows: u32,
    /// Apply the reset policy (M_a := minimum when L_e rose). Off only for ablations.
    pub reset_policy: bool,
    /// Apply the guard (adopt only on a predicted gain). Off only for ablations.
    pub guard: bool,
    /// Starting M_a (`None`: the minimum).
    pub initial_app_bytes: Option<u64>,
    /// Roll an adoption back when its settled L_e exceeds the pre-round L_e by more than this
    /// fraction (`None`: never, as in the paper).
    pub revert_tolerance: Option<f64>,
    /// Run GhostSim rounds. `false` is the paper's "Sim-off" (Figure 11): L_e is tracked and the
    /// reset policy still applies on a rise, but no size is ever simulated or adopted.
    pub simulate: bool,
    /// Try the runner-up when a settled adoption misses its prediction by more than this
    /// fraction (`None`: never, as in the paper); see [`CONFIRM_TOLERANCE_DEFAULT`].
    pub confirm_tolerance: Option<f64>,
    /// Let one-pass rounds end their measurement window once the ranking is settled, judged
    /// with the current miss costs ([`crate::ghost::GhostConfig::early_stop`]). Default on;
    /// off reproduces fixed windows.
    pub early_stop: bool,
    /// Act on rounds: adopt their best candidate and apply the reset policy. Default on;
    /// `false` is observe-only (rounds run and are reported, M_a never moves), which the
    /// engine's overhead benchmark uses so that simulating is the only difference between
    /// the segments it compares.
    pub adopt: bool,
}

impl SymbiosisConfig {
    /// Defaults around a round configuration and costs.
    pub fn new(ghost: GhostConfig, costs: MissCosts) -> Self {
        Self {
            ghost,
            costs,
            window_accesses: WINDOW_ACCESSES_DEFAULT,
            change_threshold: CHANGE_THRESHOLD_DEFAULT,
            adopt_threshold: ADOPT_THRESHOLD_DEFAULT,
            stable_tolerance: STABLE_TOLERANCE_DEFAULT,
            settle_windows_max: SETTLE_WINDOWS_MAX_DEFAULT,
            restarts_max: RESTARTS_MAX_DEFAULT,
            pause_steady_windows: PAUSE_STEADY_WINDOWS_DEFAULT,
            reset_policy: true,
            guard: true,
            initial_app_bytes: None,
            revert_tolerance: Some(REVERT_TOLERANCE_DEFAULT),
            simulate: true,
            confirm_tolerance: Some(CONFIRM_TOLERANCE_DEFAULT),
            early_stop: true,
            adopt: true,
        }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.ghost.validate()?;
        self.costs.validate()?;
        if self.window_accesses == 0 {
            return Err(bad("window_accesses", 0, "must be >= 1"));
        }
        for (name, v) in [
            ("change_threshold", self.change_threshold),
            ("adopt_threshold", self.adopt_threshold),
            ("stable_tolerance", self.stable_tolerance),
        ] {
            if !(0.0..1.0).contains(&v) {
                return Err(bad(name, v, "must be in [0, 1)"));
            }
        }
        if let Some(t) = self.revert_tolerance {
            if !(0.0..1.0).contains(&t) {
                return Err(bad("revert_tolerance", t, "must be in [0, 1)"));
            }
        }
        if let Some(t) = self.confirm_tolerance {
            if !(t > 0.0 && t.is_finite()) {
                return Err(bad("confirm_tolerance", t, "must be finite and > 0"));
            }
        }
        if let Some(a) = self.initial_app_bytes {
            if a < self.ghost.app_min_bytes || a > self.ghost.memory_bytes {
                return Err(bad(
                    "initial_app_bytes",
                    a,
                    "must lie in [app_min_bytes, memory_bytes]",
                ));
            }
        }
        Ok(())
    }
}

/// Controller state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Waiting for the real caches to warm after a change of M_a.
    Settling,
    /// Watching L_e against the reference.
    Stable,
    /// A simulation round is running.
    Adapting,
    /// The workload kept changing during rounds; waiting for it to settle.
    Paused,
}

/// Why a round started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundTrigger {
    /// Start-up.
    Start,
    /// L_e moved beyond the change threshold in Stable.
    Change,
    /// The workload changed during the previous round.
    Restart,
    /// Resumed after a pause.
    Resume,
}

/// What a finished round decided.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundReport {
    /// Round number (from 0).
    pub index: u32,
    /// Why it started.
    pub trigger: RoundTrigger,
    /// Whether the reset policy dropped M_a to the minimum at its start.
    pub reset: bool,
    /// Engine accesses from start to end.
    pub accesses: u64,
    /// Sampled accesses the ghosts saw.
    pub samples: u64,
    /// Of those, the initial warm-up's.
    pub warmup_samples: u64,
    /// Passes over the candidates (1 when all were simulated side by side; see
    /// [`GhostConfig::ghost_bytes_max`]).
    pub passes: u32,
    /// Whether the measurement window ended early ([`GhostConfig::early_stop`]).
    pub stopped_early: bool,
    /// Per candidate: prediction and predicted L_e (ns).
    pub candidates: Vec<(CandidatePrediction, f64)>,
    /// Measured L_e (ns) of the real system when the round ended.
    pub measured_le_ns: f64,
    /// M_a before the decision.
    pub app_bytes_before: u64,
    /// M_a after the decision.
    pub app_bytes_after: u64,
    /// Whether a new size was adopted.
    pub adopted: bool,
    /// Whether the adopted size was rolled back because the settled L_e turned out worse than
    /// before (beyond the paper; see [`REVERT_TOLERANCE_DEFAULT`]).
    pub reverted: bool,
    /// Whether the runner-up candidate was tried after the adoption missed its prediction
    /// (see [`CONFIRM_TOLERANCE_DEFAULT`]); `app_bytes_after` is the size kept.
    pub runner_up_tried: bool,
    /// Largest ghost metadata during the round, bytes.
    pub ghost_bytes_peak: usize,
    /// The second tier's exact footprint the round used (bytes held, no eviction during the
    /// round; see [`Symbiosis::note_second_tier`]), or `None` when it was not known.
    pub second_footprint_bytes: Option<u64>,
    /// Candidates (M_a, bytes) not adopted because their second tier holds the footprint now
    /// but its growth during the round would fill the rest within one round's length (see
    /// [`FOOTPRINT_HORIZON_ROUNDS`]).
    pub overflow_app_bytes: Vec<u64>,
    /// Sampled blocks the round was warm-started with from the live caches
    /// ([`Symbiosis::warm_start_round`]), or `None` when it was not.
    pub warm_started: Option<u64>,
    /// The round's estimated uncompressed footprint ([`GhostSim::app_footprint_estimate`]),
    /// bytes, when known.
    pub app_footprint_bytes: Option<u64>,
    /// Candidates (M_a, bytes) without a second tier that were not adopted because that
    /// footprint does not fit them with [`APP_FIT_MARGIN`] to spare.
    pub app_fit_excluded: Vec<u64>,
}

impl RoundReport {
    /// The candidate with the lowest predicted L_e.
    pub fn best(&self) -> Option<&(CandidatePrediction, f64)> {
        self.candidates.iter().min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// One Tracker window, for timelines and plots.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowRecord {
    /// Engine accesses before the window's end.
    pub accesses: u64,
    /// M_a during the window (at its end).
    pub app_bytes: u64,
    /// Measured H_a.
    pub h_a: f64,
    /// Measured H_k.
    pub h_k: f64,
    /// L_e from the measured hit ratios and the configured costs, ns.
    pub le_ns: f64,
    /// Mean measured latency of accesses that carried one, ns (NaN if none did).
    pub latency_ns_mean: f64,
    /// State at the window's end.
    pub state: State,
}

/// A summary for `stats()`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SymbiosisStats {
    /// Current state.
    pub state: State,
    /// Current target M_a.
    pub app_target_bytes: u64,
    /// Accesses recorded.
    pub accesses: u64,
    /// Completed windows.
    pub windows: u64,
    /// Finished rounds.
    pub rounds: u32,
    /// Rounds whose result was adopted.
    pub adoptions: u32,
    /// Rounds restarted because the workload changed during them.
    pub restarts: u32,
    /// Times the controller paused.
    pub pauses: u32,
    /// Adoptions rolled back.
    pub reverts: u32,
    /// Reference L_e of the Stable state, ns.
    pub reference_le_ns: Option<f64>,
    /// Ghost metadata now, bytes (0 outside rounds).
    pub ghost_bytes: usize,
    /// Progress of a running round.
    pub round_progress: Option<RoundProgress>,
}

/// The online cache sizer (see the module doc).
pub struct Symbiosis {
    cfg: SymbiosisConfig,
    state: State,
    app_target: u64,
    accesses: u64,
    windows: u64,
    window: HitCounts,
    window_latency_sum: f64,
    window_latency_n: u64,
    prev_le: Option<f64>,
    reference_le: Option<f64>,
    settle_count: u32,
    round: Option<GhostSim>,
    round_trigger: RoundTrigger,
    round_reset: bool,
    round_start_accesses: u64,
    round_ref_le: Option<f64>,
    round_index: u32,
    consecutive_restarts: u32,
    restarts: u32,
    pauses: u32,
    adoptions: u32,
    reverts: u32,
    /// Consecutive settled comparisons in the Settling state.
    settle_streak: u32,
    /// After an adoption: (size before, measured L_e before, report index) to check once settled.
    pending_check: Option<(u64, f64, usize)>,
    /// After an adoption: (runner-up size, its predicted L_e, the adopted size's predicted L_e).
    pending_confirm: Option<(u64, f64, f64)>,
    /// While the runner-up is tried: (adopted size, its settled L_e, report index).
    trying_runner_up: Option<(u64, f64, usize)>,
    paused_steady: u32,
    /// The engine's last three reports of its second tier, newest first: (bytes held,
    /// evictions since the tier was created); see [`Symbiosis::note_second_tier`].
    second_notes: [Option<(u64, u64)>; SECOND_NOTES],
    /// Second-tier evictions counted at the start of the running round (a lower bound).
    round_second_evictions: u64,
    /// (accesses, second-tier bytes held) when the running round's warm-up ended.
    round_measure_start: Option<(u64, u64)>,
    /// While true, recorded accesses update the Tracker's windows but not the running round
    /// ([`Symbiosis::hold_round`]).
    round_held: bool,
    reports: Vec<RoundReport>,
    last_mrc: Vec<(u64, f64)>,
    /// A measured `GhostConfig::second_extra_bytes` for the next round
    /// ([`Symbiosis::set_second_extra_bytes`]).
    second_extra_next: Option<u64>,
    timeline: VecDeque<WindowRecord>,
}

/// Relative difference of `x` from `reference`, with a floor so that a zero reference (every
/// access an application hit) does not make any miss look infinite.
fn rel_diff(x: f64, reference: f64, floor: f64) -> f64 {
    (x - reference).abs() / reference.max(floor)
}

impl Symbiosis {
    /// Creates the controller and starts the first round.
    pub fn new(cfg: SymbiosisConfig) -> Result<Self> {
        cfg.validate()?;
        let start = cfg.initial_app_bytes.unwrap_or(cfg.ghost.app_min_bytes);
        let mut s = Self {
            state: State::Adapting,
            app_target: start,
            accesses: 0,
            windows: 0,
            window: HitCounts::default(),
            window_latency_sum: 0.0,
            window_latency_n: 0,
            prev_le: None,
            reference_le: None,
            settle_count: 0,
            round: None,
            round_trigger: RoundTrigger::Start,
            round_reset: false,
            round_start_accesses: 0,
            round_ref_le: None,
            round_index: 0,
            consecutive_restarts: 0,
            restarts: 0,
            pauses: 0,
            adoptions: 0,
            reverts: 0,
            settle_streak: 0,
            pending_check: None,
            pending_confirm: None,
            trying_runner_up: None,
            paused_steady: 0,
            second_notes: [None; SECOND_NOTES],
            round_second_evictions: 0,
            round_measure_start: None,
            round_held: false,
            reports: Vec::new(),
            last_mrc: Vec::new(),
            second_extra_next: None,
            timeline: VecDeque::new(),
            cfg,
        };
        s.start_round(RoundTrigger::Start, false)?;
        Ok(s)
    }

    /// The configuration.
    pub fn config(&self) -> &SymbiosisConfig {
        &self.cfg
    }

    /// The application cache size the engine should use now.
    pub fn app_target_bytes(&self) -> u64 {
        self.app_target
    }

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Moves the starting M_a before any access was recorded, for an engine that knows at
    /// open which split dominates every other (the kernel layout when all its tables fit the
    /// page cache's room at M_a = M: every block-cache miss is then a page-cache hit, so a
    /// larger block cache only removes misses). The round at open still runs and may move
    /// it. `bytes` is clamped to `[app_min_bytes, memory_bytes]`. Returns whether the start
    /// moved; `false` (nothing changed) once an access was recorded.
    pub fn set_start_app_bytes(&mut self, bytes: u64) -> bool {
        if self.accesses > 0 {
            return false;
        }
        let g = &self.cfg.ghost;
        let b = bytes.clamp(g.app_min_bytes, g.memory_bytes);
        let moved = b != self.app_target;
        self.app_target = b;
        moved
    }

    /// Replaces the miss costs (re-calibration on drift). Takes effect from the next window.
    pub fn set_miss_costs(&mut self, costs: MissCosts) -> Result<()> {
        costs.validate()?;
        self.cfg.costs = costs;
        Ok(())
    }

    /// Sets the kernel tier's room beyond M − M_a (`GhostConfig::second_extra_bytes`) as the
    /// engine measured it. A running round keeps the room its ghosts were sized for (and its
    /// adoption rules use it); the value takes effect when the next round starts. Before the
    /// first access the round at open is rebuilt with it (it has simulated nothing yet).
    pub fn set_second_extra_bytes(&mut self, bytes: u64) {
        if self.round.is_some() && self.accesses == 0 {
            self.cfg.ghost.second_extra_bytes = bytes;
            self.second_extra_next = None;
            // A failure here would need a config that validate() rejected.
            let _ = self.start_round(self.round_trigger, false);
        } else if self.round.is_some() {
            self.second_extra_next = Some(bytes);
        } else {
            self.cfg.ghost.second_extra_bytes = bytes;
            self.second_extra_next = None;
        }
    }

    /// Starts a simulation round now, as a change of L_e would: the engine calls it when it
    /// replaced the miss costs (re-calibration), since the reference L_e and the last ranking of
    /// candidates were computed with the old costs. Ignored while a round runs or while paused.
    pub fn request_round(&mut self) -> Result<()> {
        if matches!(self.state, State::Stable | State::Settling) {
            self.start_round(RoundTrigger::Change, false)?;
        }
        Ok(())
    }

    /// Switches adoption (and the reset policy) on or off from now on; see
    /// [`SymbiosisConfig::adopt`].
    pub fn set_adopt(&mut self, adopt: bool) {
        self.cfg.adopt = adopt;
    }

    /// Holds (`true`) or resumes the running round: while held, [`Symbiosis::record`] updates
    /// the Tracker's windows (and may still start, restart or pause rounds on a change of
    /// L_e) but feeds no access to the round, which keeps its state until resumed. A
    /// measurement hook: segments with and without simulation work on one warm database.
    pub fn hold_round(&mut self, hold: bool) {
        self.round_held = hold;
    }

    /// Whether rounds are held ([`Symbiosis::hold_round`]).
    pub fn round_held(&self) -> bool {
        self.round_held
    }

    /// Completed Tracker windows (the cheap part of [`Symbiosis::stats`]).
    pub fn windows(&self) -> u64 {
        self.windows
    }

    /// Reports the real second tier's state: `held_bytes` charged to it now and `evictions`,
    /// the evictions it has made since it was created (monotone; the tier is created empty
    /// with the controller, so the round started at creation counts from 0). The engine calls
    /// it once per batch of accesses it feeds, *after* those accesses have been served (so
    /// the report covers them). When the tier evicted nothing between a round's start and its
    /// end, `held_bytes` bounds from above what the round's blocks need in the second tier,
    /// exactly, and candidates whose share holds it are predicted with no evictions
    /// ([`GhostSim::set_second_footprint`]). Engines that cannot count (the OS page cache)
    /// never call it; rounds then use the sampled ghosts alone, as in the paper.
    pub fn note_second_tier(&mut self, held_bytes: u64, evictions: u64) {
        self.second_notes.rotate_right(1);
        self.second_notes[0] = Some((held_bytes, evictions));
    }

    /// Whether a round has just started and can be warm-started from the live caches
    /// ([`Symbiosis::warm_start_round`]): the engine checks it after each recorded access and
    /// collects its caches' contents only then.
    pub fn round_wants_warm_start(&self) -> bool {
        self.round.as_ref().is_some_and(GhostSim::wants_warm_start)
    }

    /// Whether the running round samples block `block_no` of `file` (false without a round):
    /// lets the engine hand [`Symbiosis::warm_start_round`] only the sampled blocks.
    pub fn round_samples(&self, file: u64, block_no: u64) -> bool {
        self.round
            .as_ref()
            .is_some_and(|r| r.is_sampled(file, block_no))
    }

    /// Warm-starts the round that has just started from the engine's live caches, each
    /// oldest first (see [`GhostSim::warm_start`]). Returns the sampled blocks fed (0 when no
    /// round wants it).
    pub fn warm_start_round(&mut self, second: &[BlockAccess], app: &[BlockAccess]) -> u64 {
        self.round.as_mut().map_or(0, |r| r.warm_start(second, app))
    }

    /// Candidates whose second tier holds the round's exact footprint now but would not for
    /// long: the footprint grew by `g` bytes per access while the round measured (after its
    /// warm-up), and `g ×` [`FOOTPRINT_HORIZON_ROUNDS`] `×` the round's length exceeds the
    /// room left. Their predictions describe a state that ends before another round could
    /// notice (a hotspot's cold blocks are still being read for the first time); adopting one
    /// means an overflow, a rise of L_e and a reset later. Empty without a footprint.
    fn overflowing_soon(&self, footprint: Option<u64>, preds: &[CandidatePrediction]) -> Vec<u64> {
        let (Some(f), Some((acc0, held0))) = (footprint, self.round_measure_start) else {
            return Vec::new();
        };
        let measured = self.accesses.saturating_sub(acc0);
        if measured == 0 {
            return Vec::new();
        }
        let per_access = f.saturating_sub(held0) as f64 / measured as f64;
        let horizon = (self.accesses - self.round_start_accesses) as f64 * FOOTPRINT_HORIZON_ROUNDS;
        let growth = per_access * horizon;
        let g = &self.cfg.ghost;
        preds
            .iter()
            .filter(|p| {
                let room = (g.memory_bytes - p.app_bytes).saturating_add(g.second_extra_bytes);
                room >= f && ((room - f) as f64) < growth
            })
            .map(|p| p.app_bytes)
            .collect()
    }

    /// The exact second-tier footprint of the running round, if the tier has not evicted
    /// since the round started.
    fn second_footprint(&self) -> Option<u64> {
        let (held, ev) = self.second_notes[0]?;
        (ev == self.round_second_evictions).then_some(held)
    }

    fn le_floor(&self) -> f64 {
        (self.cfg.costs.app_miss_ns * 0.01).max(1e-9)
    }

    /// Classifies an access using the engine's flags, else its latency, else as a device read.
    fn classify(&self, a: &BlockAccess) -> TierHit {
        if a.app_hit {
            return TierHit::App;
        }
        let second = a.second_hit.or_else(|| {
            a.latency_ns.map(|l| {
                // Timing fallback (§4.3 "inferred from timing"): halfway between a second-tier
                // hit (C_a) and a device read (C_a + C_k).
                (l as f64) < self.cfg.costs.app_miss_ns + 0.5 * self.cfg.costs.second_miss_ns
            })
        });
        if second == Some(true) {
            TierHit::Second
        } else {
            TierHit::Miss
        }
    }

    /// Records one block access. Returns `Some(new M_a)` when the target changed.
    pub fn record(&mut self, a: &BlockAccess) -> Option<u64> {
        let before = self.app_target;
        self.accesses += 1;
        self.window.add(self.classify(a));
        if let Some(l) = a.latency_ns {
            self.window_latency_sum += l as f64;
            self.window_latency_n += 1;
        }
        if let Some(round) = self.round.as_mut().filter(|_| !self.round_held) {
            round.record(a);
            if self.round_measure_start.is_none() && round.progress() != RoundProgress::Warmup {
                let held = self.second_notes[0].map_or(0, |n| n.0);
                self.round_measure_start = Some((self.accesses, held));
            }
            if round.is_done() {
                self.finish_round();
            }
        }
        if self.window.accesses >= self.cfg.window_accesses {
            self.end_window();
        }
        (self.app_target != before).then_some(self.app_target)
    }

    fn end_window(&mut self) {
        let c = self.cfg.costs;
        let le = self
            .window
            .expected_latency(c.app_miss_ns, c.second_miss_ns);
        let floor = self.le_floor();
        self.windows += 1;
        if self.timeline.len() >= TIMELINE_MAX {
            self.timeline.pop_front();
        }
        self.timeline.push_back(WindowRecord {
            accesses: self.accesses,
            app_bytes: self.app_target,
            h_a: self.window.h_a(),
            h_k: self.window.h_k(),
            le_ns: le,
            latency_ns_mean: if self.window_latency_n == 0 {
                f64::NAN
            } else {
                self.window_latency_sum / self.window_latency_n as f64
            },
            state: self.state,
        });
        self.window = HitCounts::default();
        self.window_latency_sum = 0.0;
        self.window_latency_n = 0;
        let settled = self
            .prev_le
            .is_some_and(|p| rel_diff(le, p, floor) <= self.cfg.stable_tolerance);
        match self.state {
            State::Settling => {
                self.settle_count += 1;
                self.settle_streak = if settled { self.settle_streak + 1 } else { 0 };
                if self.settle_streak >= SETTLE_STREAK
                    || self.settle_count >= self.cfg.settle_windows_max
                {
                    let check = self.pending_check.take();
                    let worse = match (check, self.cfg.revert_tolerance) {
                        (Some((_, before_le, _)), Some(tol)) => {
                            le > before_le * (1.0 + tol) && rel_diff(le, before_le, floor) > tol
                        }
                        _ => false,
                    };
                    if let (true, Some((before, _, idx))) = (worse, check) {
                        self.app_target = before;
                        self.reverts += 1;
                        if let Some(r) = self.reports.get_mut(idx) {
                            r.reverted = true;
                            r.app_bytes_after = before;
                        }
                        // Settle again at the restored size; no check this time.
                        self.pending_confirm = None;
                        self.settle_again();
                        return;
                    }
                    if let Some((adopted, adopted_le, idx)) = self.trying_runner_up.take() {
                        // The runner-up has settled: keep it only if it measured lower.
                        if le > adopted_le {
                            self.app_target = adopted;
                            if let Some(r) = self.reports.get_mut(idx) {
                                r.app_bytes_after = adopted;
                            }
                            self.settle_again();
                            return;
                        }
                    } else if let (Some((runner, runner_le, predicted)), Some(tol), Some(idx)) = (
                        self.pending_confirm.take(),
                        self.cfg.confirm_tolerance,
                        check.map(|c| c.2),
                    ) {
                        if le > predicted * (1.0 + tol)
                            && rel_diff(le, predicted, floor) > tol
                            && runner_le < le
                        {
                            self.trying_runner_up = Some((self.app_target, le, idx));
                            self.app_target = runner;
                            if let Some(r) = self.reports.get_mut(idx) {
                                r.runner_up_tried = true;
                                r.app_bytes_after = runner;
                            }
                            self.settle_again();
                            return;
                        }
                    }
                    self.reference_le = Some(le);
                    self.state = State::Stable;
                }
            }
            State::Stable => {
                if let Some(r) = self.reference_le {
                    if rel_diff(le, r, floor) > self.cfg.change_threshold {
                        self.consecutive_restarts = 0;
                        // A failure here would need a config that validate() rejected.
                        let _ = self.start_round(RoundTrigger::Change, le > r);
                    }
                }
            }
            State::Adapting => match self.round_ref_le {
                None => {
                    if settled {
                        self.round_ref_le = Some(le);
                    }
                }
                Some(r) => {
                    if rel_diff(le, r, floor) > self.cfg.change_threshold {
                        self.restarts += 1;
                        self.consecutive_restarts += 1;
                        if self.consecutive_restarts > self.cfg.restarts_max {
                            self.drop_round();
                            self.pauses += 1;
                            self.paused_steady = 0;
                            self.state = State::Paused;
                        } else {
                            let _ = self.start_round(RoundTrigger::Restart, le > r);
                        }
                    }
                }
            },
            State::Paused => {
                let steady = self
                    .prev_le
                    .is_some_and(|p| rel_diff(le, p, floor) <= self.cfg.change_threshold);
                self.paused_steady = if steady { self.paused_steady + 1 } else { 0 };
                if self.paused_steady >= self.cfg.pause_steady_windows {
                    self.consecutive_restarts = 0;
                    let rose = self.reference_le.is_some_and(|r| le > r * (1.0 + 1e-9));
                    let _ = self.start_round(RoundTrigger::Resume, rose);
                }
            }
        }
        self.prev_le = Some(le);
    }

    /// Stays in Settling at a new size, comparing afresh.
    fn settle_again(&mut self) {
        self.settle_count = 0;
        self.settle_streak = 0;
        self.prev_le = None;
    }

    fn start_round(&mut self, trigger: RoundTrigger, le_rose: bool) -> Result<()> {
        self.drop_round();
        self.pending_confirm = None;
        self.trying_runner_up = None;
        let reset = self.cfg.reset_policy
            && self.cfg.adopt
            && le_rose
            && self.app_target != self.cfg.ghost.app_min_bytes;
        if reset {
            self.app_target = self.cfg.ghost.app_min_bytes;
        }
        if !self.cfg.simulate {
            self.state = State::Settling;
            self.settle_count = 0;
            self.settle_streak = 0;
            self.prev_le = None;
            return Ok(());
        }
        if let Some(b) = self.second_extra_next.take() {
            self.cfg.ghost.second_extra_bytes = b;
        }
        let mut g = self.cfg.ghost.clone();
        g.seed = g.seed.wrapping_add(u64::from(self.round_index));
        if self.cfg.early_stop {
            g.early_stop = Some(EarlyStop {
                app_miss_ns: self.cfg.costs.app_miss_ns,
                second_miss_ns: self.cfg.costs.second_miss_ns,
            });
        }
        self.round = Some(GhostSim::new(g)?);
        // The oldest of three reports predates the batch this round starts in; with fewer,
        // 0 (the tier as created). The counter is monotone, so an older, smaller baseline can
        // only make the round give up the footprint, never claim one wrongly.
        self.round_second_evictions = self.second_notes[SECOND_NOTES - 1].map_or(0, |n| n.1);
        self.round_measure_start = None;
        self.round_trigger = trigger;
        self.round_reset = reset;
        self.round_start_accesses = self.accesses;
        self.round_ref_le = None;
        self.state = State::Adapting;
        // Windows before a reset are not comparable with those after it.
        if reset {
            self.prev_le = None;
        }
        Ok(())
    }

    fn drop_round(&mut self) {
        if let Some(mut r) = self.round.take() {
            r.free();
        }
    }

    fn finish_round(&mut self) {
        let Some(mut round) = self.round.take() else {
            return;
        };
        let c = self.cfg.costs;
        let footprint = self.second_footprint();
        round.set_second_footprint(footprint);
        let preds = round.predictions();
        let candidates: Vec<(CandidatePrediction, f64)> = preds
            .iter()
            .map(|p| (*p, p.expected_latency(c.app_miss_ns, c.second_miss_ns)))
            .collect();
        // The real system's L_e now: the last full window, else the partial one.
        let measured = self.prev_le.unwrap_or_else(|| {
            self.window
                .expected_latency(c.app_miss_ns, c.second_miss_ns)
        });
        let before = self.app_target;
        let overflow = self.overflowing_soon(footprint, &preds);
        let app_footprint = round.app_footprint_estimate();
        let g = &self.cfg.ghost;
        let app_fit_excluded: Vec<u64> = preds
            .iter()
            .filter(|p| {
                let room = (g.memory_bytes - p.app_bytes).saturating_add(g.second_extra_bytes);
                room == 0
                    && app_footprint
                        .is_some_and(|f| (p.app_bytes as f64) < f as f64 * (1.0 + APP_FIT_MARGIN))
            })
            .map(|p| p.app_bytes)
            .collect();
        let adoptable = |c: &&(CandidatePrediction, f64)| {
            !overflow.contains(&c.0.app_bytes) && !app_fit_excluded.contains(&c.0.app_bytes)
        };
        let best = candidates
            .iter()
            .filter(adoptable)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .copied();
        let mut adopted = false;
        let mut confirm = None;
        if let Some((p, le)) = best {
            let gain_ok = !self.cfg.guard || le <= (1.0 - self.cfg.adopt_threshold) * measured;
            if gain_ok && p.app_bytes != before && self.cfg.adopt {
                self.app_target = p.app_bytes;
                adopted = true;
                self.adoptions += 1;
                let runner = candidates
                    .iter()
                    .filter(adoptable)
                    .filter(|c| c.0.app_bytes != p.app_bytes)
                    .min_by(|a, b| a.1.total_cmp(&b.1));
                confirm = runner.map(|r| (r.0.app_bytes, r.1, le));
            }
        }
        self.last_mrc = round.mrc();
        let report = RoundReport {
            index: self.round_index,
            trigger: self.round_trigger,
            reset: self.round_reset,
            accesses: self.accesses - self.round_start_accesses,
            samples: round.samples(),
            warmup_samples: round.warmup_samples(),
            passes: round.passes(),
            stopped_early: round.stopped_early(),
            candidates,
            measured_le_ns: measured,
            app_bytes_before: before,
            app_bytes_after: self.app_target,
            adopted,
            reverted: false,
            runner_up_tried: false,
            ghost_bytes_peak: round.peak_metadata_bytes(),
            second_footprint_bytes: footprint,
            overflow_app_bytes: overflow,
            app_footprint_bytes: app_footprint,
            app_fit_excluded,
            warm_started: round.warm_started(),
        };
        round.free();
        self.reports.push(report);
        self.round_index += 1;
        self.consecutive_restarts = 0;
        self.state = State::Settling;
        self.settle_count = 0;
        self.pending_check = None;
        self.pending_confirm = confirm;
        self.trying_runner_up = None;
        self.settle_streak = 0;
        if adopted {
            // The partial window mixes both sizes: discard it.
            self.window = HitCounts::default();
            self.window_latency_sum = 0.0;
            self.window_latency_n = 0;
            self.prev_le = None;
            self.pending_check = Some((before, measured, self.reports.len() - 1));
        }
    }

    /// Finished rounds, oldest first.
    pub fn rounds(&self) -> &[RoundReport] {
        &self.reports
    }

    /// The application-tier miss-ratio curve of the last finished round (empty before one).
    pub fn mrc(&self) -> &[(u64, f64)] {
        &self.last_mrc
    }

    /// Recent windows, oldest first.
    pub fn timeline(&self) -> impl Iterator<Item = &WindowRecord> {
        self.timeline.iter()
    }

    /// A summary of the controller.
    pub fn stats(&self) -> SymbiosisStats {
        SymbiosisStats {
            state: self.state,
            app_target_bytes: self.app_target,
            accesses: self.accesses,
            windows: self.windows,
            rounds: self.reports.len() as u32,
            adoptions: self.adoptions,
            restarts: self.restarts,
            pauses: self.pauses,
            reverts: self.reverts,
            reference_le_ns: self.reference_le,
            ghost_bytes: self.round.as_ref().map_or(0, |r| r.metadata_bytes()),
            round_progress: self.round.as_ref().map(|r| r.progress()),
        }
    }
}
