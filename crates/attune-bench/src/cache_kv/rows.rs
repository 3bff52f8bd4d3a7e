//! The rows `attune-bench cache-kv` writes, one `#[derive(Serialize)]` struct per row kind and
//! one per nested object. Field names, nesting and value types are what the results files
//! (`benches/results/cache-kv-*.jsonl`), the scripts under `benches/cache/` and the page
//! generator read: rename nothing here without them. [`crate::output::Sink::row`] adds
//! `command` and `machine` after each row's fields, so no row has fields of those names.
//!
//! Conventions kept from the rows' first shape: a non-finite `f64` is written as `null` (serde
//! JSON's rule), an absent optional value is `null` rather than a missing key, except for
//! [`Spread`]'s `min` / `max`, which an empty sample leaves out.

use attune_kv::{CacheTierStats, RoundBrief};
use serde::Serialize;

/// A measured span of reads, per read (`Span::row`); `measured` in every mode's rows.
#[derive(Serialize, Clone, Copy, Debug)]
pub(super) struct Measured {
    pub reads: u64,
    pub wall_ns_per_read: f64,
    pub cpu_ns_per_read: f64,
    pub process_cpu_ns_per_read: f64,
    pub block_reads_per_read: f64,
    pub device_reads_per_read: f64,
    pub h_a: f64,
    pub h_k: f64,
    /// Mean time of a second-tier hit, ns.
    pub second_hit_ns: f64,
    pub le_ns: f64,
    pub latency_ns: f64,
}

/// One finished simulation round of the controller (`round_log`).
#[derive(Serialize, Clone, Debug)]
pub(super) struct Round {
    accesses: u64,
    samples: u64,
    warmup_samples: u64,
    passes: u32,
    stopped_early: bool,
    adopted: bool,
    second_footprint_bytes: Option<u64>,
    fit_app_bytes: Vec<u64>,
    warm_started: Option<u64>,
    overflow_app_bytes: Vec<u64>,
    app_footprint_bytes: Option<u64>,
    app_fit_excluded: Vec<u64>,
}

impl From<&RoundBrief> for Round {
    fn from(r: &RoundBrief) -> Round {
        Round {
            accesses: r.accesses,
            samples: r.samples,
            warmup_samples: r.warmup_samples,
            passes: r.passes,
            stopped_early: r.stopped_early,
            adopted: r.adopted,
            second_footprint_bytes: r.second_footprint_bytes,
            fit_app_bytes: r.fit_app_bytes.clone(),
            warm_started: r.warm_started,
            overflow_app_bytes: r.overflow_app_bytes.clone(),
            app_footprint_bytes: r.app_footprint_bytes,
            app_fit_excluded: r.app_fit_excluded.clone(),
        }
    }
}

/// The controller's finished rounds, oldest first.
pub(super) fn round_log(t: &CacheTierStats) -> Vec<Round> {
    t.round_log.iter().map(Round::from).collect()
}

/// A candidate of the last round: (M_a bytes, predicted H_a, H_k, L_e ns), written as an array.
pub(super) type Candidate = (u64, f64, f64, f64);

/// A controller window in the adaptive-only sweep row, written as an array:
/// `[ms, app_bytes, h_a, h_k, le_model_ns, state]`.
pub(super) type WindowTuple = (u64, u64, f64, f64, f64, &'static str);

/// `sweep --adaptive-only`: one row per cell, the adaptive configuration alone.
#[derive(Serialize)]
pub(super) struct AdaptiveRow<'a> {
    pub bench: &'static str,
    pub pattern: &'a str,
    pub ratio: f64,
    pub compression: &'a str,
    pub c_a_ns: f64,
    pub c_k_ns: f64,
    pub warmup_reads: u64,
    pub measured: Measured,
    pub final_app_bytes: u64,
    pub rounds: u32,
    pub adoptions: u32,
    pub reverts: u32,
    pub ghost_bytes_peak: usize,
    pub last_round: &'a [Candidate],
    pub last_round_measured_le_ns: Option<f64>,
    pub timeline: Vec<WindowTuple>,
}

/// The compressed tier's counters in a sweep configuration.
#[derive(Serialize)]
pub(super) struct CompressedCache {
    pub capacity_bytes: u64,
    pub usage_bytes: u64,
    pub evictions: u64,
}

/// One configuration (sizing) of a sweep cell.
#[derive(Serialize)]
pub(super) struct SweepConfig<'a> {
    pub sizing: &'a str,
    pub final_app_bytes: u64,
    pub rounds: u32,
    pub adoptions: u32,
    pub reverts: u32,
    pub state: &'static str,
    pub warmup_reads: u64,
    pub ghost_bytes_peak: usize,
    pub le_predicted_ns: Option<f64>,
    pub last_round: &'a [Candidate],
    pub last_round_measured_le_ns: Option<f64>,
    pub round_log: Vec<Round>,
    pub compressed_cache: Option<CompressedCache>,
    pub measured: Measured,
}

/// `sweep`: one row per cell (pattern × ratio × compression), every configuration in it.
#[derive(Serialize)]
pub(super) struct SweepRow<'a> {
    pub bench: &'static str,
    pub env: &'a str,
    pub pattern: &'a str,
    pub ratio: f64,
    pub compression: &'a str,
    pub alpha: f64,
    pub keys: u64,
    pub memory_bytes: u64,
    pub sample_inv: u32,
    pub c_a_ns: f64,
    pub c_k_ns: f64,
    pub configs: Vec<SweepConfig<'a>>,
    pub adaptive_over_best_static: f64,
    pub worse_end_over_adaptive: f64,
    pub m_over_adaptive: f64,
    pub min_over_adaptive: f64,
    pub half_over_adaptive: f64,
    pub le_adaptive_ns: f64,
    pub le_best_static_ns: f64,
}

/// Per-read latency percentiles of one part of a dynamic run, ns.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Percentiles {
    pub n: usize,
    pub p50: u32,
    pub p95: u32,
    pub p99: u32,
}

/// A controller window in the dynamic row's timeline.
#[derive(Serialize, Clone, Debug)]
pub(super) struct Window {
    pub ms: u64,
    pub accesses: u64,
    pub app_bytes: u64,
    pub h_a: f64,
    pub h_k: f64,
    pub le_model_ns: f64,
    /// `null` when the window timed nothing.
    pub le_measured_ns: Option<f64>,
    pub state: &'static str,
}

/// The dynamic row's timeline: the windows (in the `--timeline` file), or a note that says
/// how many there were (in the results row).
#[derive(Serialize, Clone, Debug)]
#[serde(untagged)]
pub(super) enum Timeline {
    Windows(Vec<Window>),
    Summary(String),
}

/// The controller's counters at the end of a dynamic run.
#[derive(Serialize, Clone, Debug)]
pub(super) struct Controller {
    pub rounds: u32,
    pub adoptions: u32,
    pub reverts: u32,
    pub restarts: u32,
    pub ghost_bytes_peak: usize,
    pub last_round: Vec<Candidate>,
    pub le_predicted_ns: Option<f64>,
    pub round_log: Vec<Round>,
}

/// `dynamic`: one row per sizing.
#[derive(Serialize, Clone, Debug)]
pub(super) struct DynamicRow {
    pub bench: &'static str,
    pub env: String,
    pub sizing: String,
    pub scenario: String,
    pub ratio: f64,
    pub compression: String,
    pub alpha: f64,
    pub memory_bytes: u64,
    pub sample_inv: u32,
    pub c_a_ns: f64,
    pub c_k_ns: f64,
    pub phase_reads: u64,
    pub switch_ms: u64,
    pub converged_ms: Option<u64>,
    pub switch_accesses: u64,
    pub converged_accesses: Option<u64>,
    pub final_app_bytes: u64,
    pub latency_phase1: Option<Percentiles>,
    pub latency_adapting: Option<Percentiles>,
    pub latency_phase2_after: Option<Percentiles>,
    pub controller: Vec<Controller>,
    pub timeline: Timeline,
}

/// A candidate as the first round predicted it (`ablation`'s `predicted`).
#[derive(Serialize)]
pub(super) struct Predicted {
    pub app_bytes: u64,
    pub h_a: f64,
    pub h_k: f64,
    pub le_ns: f64,
}

/// A candidate measured statically (`ablation`'s `measured`).
#[derive(Serialize)]
pub(super) struct MeasuredCandidate {
    pub app_bytes: u64,
    pub h_a: f64,
    pub h_k: f64,
    pub le_ns: f64,
    pub measured: Measured,
}

/// `ablation`: one row per 1/R.
#[derive(Serialize)]
pub(super) struct AblationRow<'a> {
    pub bench: &'static str,
    pub env: &'a str,
    pub pattern: &'a str,
    pub ratio: f64,
    pub compression: &'a str,
    pub alpha: f64,
    pub memory_bytes: u64,
    pub c_a_ns: f64,
    pub c_k_ns: f64,
    pub sample_inv: u32,
    pub round_reads: u64,
    pub round_log: Vec<Round>,
    pub ghost_bytes_peak: usize,
    pub predicted: Vec<Predicted>,
    pub measured: &'a [MeasuredCandidate],
    pub mean_abs_err_h_a: f64,
    pub mean_abs_err_h_k: f64,
    pub mean_rel_err_le: f64,
    pub chosen_app_bytes: Option<u64>,
    pub chosen_over_best_measured_le: Option<f64>,
}

/// The adaptive run's segments during its first round, summed (`overhead` first-round mode).
#[derive(Serialize, Clone, Copy, Debug)]
pub(super) struct InRound {
    pub reads: u64,
    pub cpu_ns_per_read: f64,
    pub process_cpu_ns_per_read: f64,
    pub block_reads_per_read: f64,
}

/// A measured segment outside a round (`overhead` first-round mode).
#[derive(Serialize, Clone, Copy, Debug)]
pub(super) struct Segment {
    pub reads: u64,
    pub cpu_ns_per_read: f64,
    pub process_cpu_ns_per_read: f64,
    pub h_a: f64,
    pub h_k: f64,
}

/// One repeat of the first-round overhead measurement.
#[derive(Serialize, Clone, Copy, Debug)]
pub(super) struct OverheadRepeat {
    pub rep: u32,
    pub settled_app_bytes: u64,
    pub ghost_bytes_peak: usize,
    pub ghost_peak_fraction_of_m: f64,
    pub adaptive_in_round: InRound,
    pub adaptive_outside: Segment,
    pub static_same_split: Segment,
}

/// Medians over the repeats of process CPU per read, ns.
#[derive(Serialize)]
pub(super) struct MedianCpu {
    #[serde(rename = "static")]
    pub fixed: f64,
    pub adaptive_in_round: f64,
    pub adaptive_outside: f64,
}

/// `overhead --mode first-round`: one row, the repeats in it.
#[derive(Serialize)]
pub(super) struct OverheadRow<'a> {
    pub bench: &'static str,
    pub env: &'a str,
    pub pattern: &'a str,
    pub ratio: f64,
    pub compression: &'a str,
    pub memory_bytes: u64,
    pub sample_inv: u32,
    pub repeats: Vec<OverheadRepeat>,
    pub median_process_cpu_ns_per_read: MedianCpu,
    pub overhead_in_round: f64,
    pub overhead_outside: f64,
}

/// Median, 10th / 90th percentiles, extremes and size of a sample. An empty sample has `null`
/// quantiles and no `min` / `max`.
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Spread {
    pub median: Option<f64>,
    pub p10: Option<f64>,
    pub p90: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    pub n: usize,
}

/// A per-read cost per segment kind.
#[derive(Serialize, Clone, Copy, Debug)]
pub(super) struct PerKind {
    #[serde(rename = "A")]
    pub a: Spread,
    #[serde(rename = "A2")]
    pub a2: Spread,
    #[serde(rename = "B")]
    pub b: Spread,
}

/// One cost (process, reader or controller CPU) of the alternating measurement.
#[derive(Serialize, Clone, Copy, Debug)]
pub(super) struct Metric {
    pub per_read_ns: PerKind,
    pub overhead_b_vs_a: Spread,
    pub noise_a2_vs_a: Spread,
    pub extra_ns_per_read_b_minus_a: Spread,
    pub extra_ns_per_read_a2_minus_a: Spread,
    pub pooled_overhead: f64,
    pub pooled_noise: f64,
}

/// One segment of the alternating measurement.
#[derive(Serialize, Clone, Copy, Debug)]
pub(super) struct AbSegment {
    pub cycle: u32,
    pub kind: &'static str,
    pub reads: u64,
    pub process_cpu_ns_per_read: f64,
    pub reader_cpu_ns_per_read: f64,
    pub controller_cpu_ns_per_read: f64,
    pub block_reads_per_read: f64,
    pub h_a: f64,
    pub rounds_finished: u32,
    pub state_end: &'static str,
}

/// `overhead --mode alternating`: one row.
#[derive(Serialize)]
pub(super) struct OverheadAbRow<'a> {
    pub bench: &'static str,
    pub env: &'a str,
    pub pattern: &'a str,
    pub ratio: f64,
    pub compression: &'a str,
    pub memory_bytes: u64,
    pub sample_inv: u32,
    pub settled_app_bytes: u64,
    pub cycles: u32,
    pub segment_reads: u64,
    pub loadavg_1m_start: Option<f64>,
    pub process_cpu: Metric,
    pub reader_cpu: Metric,
    pub controller_cpu: Metric,
    pub rounds_finished: u32,
    pub ghost_bytes_peak: usize,
    pub round_log: Vec<Round>,
    pub segments: Vec<AbSegment>,
}
