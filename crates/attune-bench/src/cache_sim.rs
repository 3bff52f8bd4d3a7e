//! `attune-bench cache-sim`: trace-driven evaluation of Symbiosis and the replacement policies.
//!
//! Modes (`--mode`, comma-separated or `all`):
//! * `sweep` — for each access pattern × M/D_u × α × cost set: the steady L_e of Symbiosis's
//!   adopted split against static M_a = minimum, M/2, M and the best of the 9 static splits found
//!   by exhaustive simulation; the simulator's error at the adopted size; ghost memory.
//! * `overhead` — ns per recorded access outside and during a round; ghost bytes vs M.
//! * `sampling` — GhostSim error against exact simulation for R = 1/2 … 1/256, with and without
//!   grouping (G = 32 vs 1).
//! * `reset` — a data-size increase with the reset policy on and off: L_e during the round.
//! * `dynamic` — two-phase workloads (paper §5.2.2): data size up and down, hotspot mirrored,
//!   skew changed; steady L_e per phase for Symbiosis and static min / M, and convergence time.
//! * `policies` — LRU vs S3-FIFO miss ratios on the same traces (plus one with scans).
//! * `replay` — miss counts of LRU and S3-FIFO on a trace file of block ids (one per line) for
//!   `--cache-blocks` sizes, one row each (the Python cross-check against libCacheSim reads them
//!   with `--json`).
//!
//! The "real" caches are the crate's [`TwoTier`] model (LRU application tier over an LRU page
//! cache without read-ahead), so the sweep measures Symbiosis's sampling, pipelining and decision
//! logic, not a kernel. Rows go to `--out` / `--json` ([`crate::output`]) with `command` and
//! `machine`; per-cell summaries go to stderr when progress is on. Bad flags exit with status 2.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::output::{Fail, Sink};

use attune_cache::calibrate::{calibrate, Calibration};
use attune_cache::{
    BlockAccess, BlockLayout, ClosedLoop, GhostConfig, GhostSim, HitCounts, MissCosts, PolicyKind,
    SecondTier, Symbiosis, SymbiosisConfig, TierHit, TwoTier,
};
use attune_workload::{RequestDist, Sampler};

const MIB: u64 = 1 << 20;
const BLOCK_BYTES: u32 = 4096;
const KEYS_PER_BLOCK: u64 = 16;
const BLOCKS_PER_FILE: u64 = 16_384;

type Res<T> = std::result::Result<T, String>;

#[derive(Clone, Debug)]
struct Args {
    modes: Vec<String>,
    memory: u64,
    app_min: u64,
    patterns: Vec<String>,
    ratios: Vec<f64>,
    alphas: Vec<f64>,
    costs: Vec<String>,
    accesses: u64,
    sample_inv: u32,
    group: u32,
    layout: String,
    policy: PolicyKind,
    seed: u64,
    threads: usize,
    calibrate_dir: String,
    hit_ns: f64,
    trace: Option<String>,
    cache_blocks: Vec<u64>,
}

fn usage() -> &'static str {
    "usage: attune-bench cache-sim [--mode sweep,overhead,sampling,reset,dynamic,policies|all]\n\
     [--memory-mib 256] [--app-min-mib M/128] [--patterns uniform,zipf,hot30,hot20,hot10]\n\
     [--ratios 0.2,0.4,0.6,0.8,1.0] [--alphas 0.5,0.25] [--costs calibrated,CA_NS:CK_NS,...]\n\
     [--accesses 6000000] [--sample-inv 16] [--group 32] [--layout kernel|user]\n\
     [--policy lru|s3fifo] [--seed 1] [--threads 2] [--out FILE] [--json] [--calibrate-dir .]\n\
     [--hit-ns 1000] [--trace FILE --cache-blocks 64,256,1024] (mode replay)"
}

fn parse_list<T: std::str::FromStr>(flag: &str, v: &str) -> Res<Vec<T>> {
    v.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim()
                .parse::<T>()
                .map_err(|_| format!("{flag}: cannot parse `{s}`"))
        })
        .collect()
}

/// `None` for `--help`.
fn parse_args(argv: Vec<String>) -> Res<Option<Args>> {
    let mut a = Args {
        modes: vec!["sweep".into()],
        memory: 256 * MIB,
        app_min: 0,
        patterns: ["uniform", "zipf", "hot30", "hot20", "hot10"]
            .map(String::from)
            .to_vec(),
        ratios: vec![0.2, 0.4, 0.6, 0.8, 1.0],
        alphas: vec![0.5, 0.25],
        costs: vec!["calibrated".into()],
        accesses: 6_000_000,
        sample_inv: 16,
        group: 32,
        layout: "kernel".into(),
        policy: PolicyKind::Lru,
        seed: 1,
        threads: 2,
        calibrate_dir: ".".into(),
        hit_ns: 1000.0,
        trace: None,
        cache_blocks: vec![64, 256, 1024],
    };
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{}", usage());
            return Ok(None);
        }
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| {
            v.parse::<f64>()
                .map_err(|_| format!("{flag}: bad number `{v}`"))
        };
        match flag.as_str() {
            "--mode" => {
                a.modes = if v == "all" {
                    [
                        "sweep", "overhead", "sampling", "reset", "dynamic", "policies",
                    ]
                    .map(String::from)
                    .to_vec()
                } else {
                    parse_list(&flag, &v)?
                }
            }
            "--memory-mib" => a.memory = (num(&v)? * MIB as f64) as u64,
            "--app-min-mib" => a.app_min = (num(&v)? * MIB as f64) as u64,
            "--patterns" => a.patterns = parse_list(&flag, &v)?,
            "--ratios" => a.ratios = parse_list(&flag, &v)?,
            "--alphas" => a.alphas = parse_list(&flag, &v)?,
            "--costs" => a.costs = parse_list(&flag, &v)?,
            "--accesses" => a.accesses = num(&v)? as u64,
            "--sample-inv" => a.sample_inv = num(&v)? as u32,
            "--group" => a.group = num(&v)? as u32,
            "--layout" => a.layout = v,
            "--policy" => a.policy = PolicyKind::parse(&v).map_err(|e| e.to_string())?,
            "--seed" => a.seed = num(&v)? as u64,
            "--threads" => a.threads = (num(&v)? as usize).max(1),
            "--calibrate-dir" => a.calibrate_dir = v,
            "--hit-ns" => a.hit_ns = num(&v)?,
            "--trace" => a.trace = Some(v),
            "--cache-blocks" => a.cache_blocks = parse_list(&flag, &v)?,
            _ => return Err(format!("unknown flag {flag}\n{}", usage())),
        }
    }
    if a.memory < 16 * MIB {
        return Err("--memory-mib must be >= 16".into());
    }
    if a.app_min == 0 {
        a.app_min = a.memory / 128;
    }
    if a.app_min > a.memory {
        return Err("--app-min-mib exceeds --memory-mib".into());
    }
    if a.ratios.iter().any(|&r| !(r > 0.0 && r <= 4.0)) {
        return Err("--ratios must lie in (0, 4]".into());
    }
    if a.alphas.iter().any(|&x| !(x > 0.0 && x <= 1.0)) {
        return Err("--alphas must lie in (0, 1]".into());
    }
    if !matches!(a.layout.as_str(), "kernel" | "user") {
        return Err("--layout must be kernel or user".into());
    }
    if !(a.hit_ns >= 0.0 && a.hit_ns.is_finite()) {
        return Err("--hit-ns must be finite and >= 0".into());
    }
    if a.accesses < 100_000 {
        return Err("--accesses must be >= 100000".into());
    }
    if a.sample_inv == 0 || a.group == 0 {
        return Err("--sample-inv and --group must be >= 1".into());
    }
    for p in &a.patterns {
        pattern(p)?;
    }
    Ok(Some(a))
}

fn pattern(name: &str) -> Res<RequestDist> {
    Ok(match name {
        "uniform" => RequestDist::Uniform,
        "zipf" => RequestDist::ScrambledZipfian(0.99),
        "hot30" => hotspot(0.3, 0.7),
        "hot20" => hotspot(0.2, 0.8),
        "hot10" => hotspot(0.1, 0.9),
        _ => {
            return Err(format!(
                "unknown pattern `{name}` (uniform, zipf, hot30, hot20, hot10)"
            ))
        }
    })
}

fn hotspot(d: f64, o: f64) -> RequestDist {
    RequestDist::Hotspot {
        data_fraction: d,
        ops_fraction: o,
    }
}

fn second_tier(a: &Args) -> SecondTier {
    if a.layout == "user" {
        SecondTier::Blocks
    } else {
        SecondTier::kernel_default()
    }
}

/// The real tier has no read-ahead: the modelled allowance is GhostSim's, not the system's.
fn real_tier(a: &Args) -> SecondTier {
    match second_tier(a) {
        SecondTier::Pages { page_bytes, .. } => SecondTier::Pages {
            page_bytes,
            readahead_allowance: 0.0,
        },
        t => t,
    }
}

/// A seeded block stream over a layout.
struct Stream {
    s: Sampler,
}

impl Stream {
    fn new(dist: &RequestDist, blocks: u64, seed: u64) -> Res<Self> {
        Sampler::new(dist, blocks * KEYS_PER_BLOCK, seed)
            .map(|s| Self { s })
            .map_err(|e| e.to_string())
    }
    #[inline]
    fn next(&mut self) -> u64 {
        self.s.next_item() / KEYS_PER_BLOCK
    }
}

// ----- output ------------------------------------------------------------------------------

// One struct per mode's row; `f64` fields that are NaN or infinite are written as null.

#[derive(Serialize)]
struct SweepRow {
    bench: &'static str,
    pattern: String,
    m_over_du: f64,
    alpha: f64,
    costs: String,
    cost_method: String,
    ca_ns: f64,
    ck_ns: f64,
    memory_bytes: u64,
    app_min_bytes: u64,
    d_u_bytes: u64,
    d_c_bytes: u64,
    layout: String,
    policy: String,
    sample_inv: u64,
    group_blocks: u64,
    accesses: u64,
    measured_from: u64,
    le_symbiosis_ns: f64,
    ma_symbiosis_bytes: u64,
    h_a_symbiosis: f64,
    h_k_symbiosis: f64,
    le_static_min_ns: f64,
    le_static_half_ns: f64,
    le_static_full_ns: f64,
    le_best_static_ns: f64,
    ma_best_static_bytes: u64,
    candidates_bytes: Vec<u64>,
    le_static_ns: Vec<f64>,
    hit_ns: f64,
    best_over_symbiosis: f64,
    worse_end_over_symbiosis: f64,
    half_over_symbiosis: f64,
    predicted_le_at_adopted_ns: f64,
    sim_error_rel: f64,
    rounds: u64,
    adoptions: u64,
    restarts: u64,
    reverts: u64,
    last_change_at_access: u64,
    ghost_bytes_peak: u64,
    ghost_fraction_of_m: f64,
}

#[derive(Serialize)]
struct OverheadRow {
    bench: &'static str,
    pattern: String,
    m_over_du: f64,
    memory_bytes: u64,
    sample_inv: u64,
    accesses: u64,
    tracker_ns_per_access: f64,
    ghost_ns_per_access: f64,
    round_ns_per_access: f64,
    two_tier_model_ns_per_access: f64,
    rounds_completed: u64,
    ghost_bytes_peak: u64,
    ghost_fraction_of_m: f64,
}

#[derive(Serialize)]
struct SamplingRow {
    bench: &'static str,
    pattern: String,
    m_over_du: f64,
    alpha: f64,
    memory_bytes: u64,
    sample_inv: u64,
    group_blocks: u64,
    max_abs_err_h_a: f64,
    max_abs_err_h_k: f64,
    mean_rel_err_le: f64,
    chosen_exact_le_over_best: f64,
    ghost_bytes_peak: u64,
    round_accesses: u64,
}

#[derive(Serialize)]
struct ResetRow {
    bench: &'static str,
    pattern: String,
    memory_bytes: u64,
    alpha: f64,
    change: String,
    reset_policy: bool,
    ma_phase1_bytes: u64,
    le_until_round_end_ns: f64,
    accesses_until_round_end: u64,
    le_after_ns: f64,
    ma_final_bytes: u64,
}

#[derive(Serialize)]
struct PoliciesRow {
    bench: &'static str,
    trace: String,
    cache_over_data: f64,
    data_bytes: u64,
    accesses: u64,
    miss_ratio_lru: f64,
    miss_ratio_s3fifo: f64,
}

#[derive(Serialize)]
struct DynamicRow {
    bench: &'static str,
    scenario: String,
    memory_bytes: u64,
    alpha: f64,
    ca_ns: f64,
    ck_ns: f64,
    accesses_per_phase: u64,
    phase1_le_symbiosis_ns: f64,
    phase1_le_static_min_ns: f64,
    phase1_le_static_full_ns: f64,
    phase1_ma_bytes: u64,
    phase2_le_symbiosis_ns: f64,
    phase2_le_static_min_ns: f64,
    phase2_le_static_full_ns: f64,
    phase2_ma_bytes: u64,
    phase2_first_round_end_after_accesses: Option<u64>,
    rounds: u64,
    reverts: u64,
}

/// One row of `--mode replay`: misses of one policy at one cache size.
#[derive(Serialize)]
struct ReplayRow {
    policy: &'static str,
    cache_blocks: u64,
    accesses: usize,
    misses: u64,
}

/// A progress note on stderr, when progress is on.
macro_rules! note {
    ($out:expr, $($arg:tt)*) => {
        $out.note(format_args!($($arg)*))
    };
}

/// Where the rows go; shared by the sweep's threads.
struct Out<'a> {
    sink: &'a Sink,
    err: Mutex<Option<String>>,
}

impl<'a> Out<'a> {
    fn new(sink: &'a Sink) -> Self {
        Self {
            sink,
            err: Mutex::new(None),
        }
    }
    /// Writes a row; the first write error is kept and reported when the mode ends.
    fn emit<T: Serialize>(&self, row: T) {
        if let Err(e) = self.sink.row(&row) {
            if let Ok(mut g) = self.err.lock() {
                g.get_or_insert(e);
            }
        }
    }
    /// A progress note on stderr (when progress is on).
    fn note(&self, text: std::fmt::Arguments<'_>) {
        if self.sink.progress() {
            eprintln!("{text}");
        }
    }
    fn check(&self) -> Res<()> {
        match self.err.lock().ok().and_then(|mut g| g.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

// ----- costs -------------------------------------------------------------------------------

/// A 4 KiB block whose LZ4 ratio is near `alpha`: a random prefix, then a repeated pattern.
fn block_with_ratio(alpha: f64, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut best = (f64::INFINITY, Vec::new());
    for step in 0..=40 {
        let frac = step as f64 / 40.0;
        let n = (frac * BLOCK_BYTES as f64) as usize;
        let mut b = Vec::with_capacity(BLOCK_BYTES as usize);
        for i in 0..BLOCK_BYTES as usize {
            if i < n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.push(x as u8);
            } else {
                b.push(b"attune-cache-sim"[i % 16]);
            }
        }
        let r = lz4_flex::block::compress(&b).len() as f64 / BLOCK_BYTES as f64;
        if (r - alpha).abs() < best.0 {
            best = ((r - alpha).abs(), b);
        }
    }
    best.1
}

fn calibrate_for(alpha: f64, dir: &str) -> Res<Calibration> {
    let block = block_with_ratio(alpha, 7);
    let compressed = lz4_flex::block::compress(&block);
    let mut out = vec![0u8; BLOCK_BYTES as usize];
    let read = compressed.len().div_ceil(4096) * 4096;
    calibrate(std::path::Path::new(dir), 256 * MIB, read, 301, || {
        lz4_flex::block::decompress_into(&compressed, &mut out).unwrap_or(0)
    })
    .map_err(|e| e.to_string())
}

/// Resolves one `--costs` entry for `alpha`: (label, costs, method).
fn costs_for(spec: &str, alpha: f64, dir: &str, out: &Out) -> Res<(String, MissCosts, String)> {
    if spec == "calibrated" {
        let c = calibrate_for(alpha, dir)?;
        let note = format!(
            "{}{}",
            c.device_method.name(),
            if c.device_suspect { ",suspect" } else { "" }
        );
        note!(
            out,
            "calibrated alpha {alpha}: cached read {:.0} ns, lz4 decompress {:.0} ns, device \
             read {:.0} ns ({note}) -> C_a {:.0} ns, C_k {:.0} ns",
            c.cached_read_ns,
            c.decompress_ns,
            c.device_read_ns,
            c.app_miss_ns,
            c.second_miss_ns
        );
        return Ok((
            "calibrated".into(),
            MissCosts {
                app_miss_ns: c.app_miss_ns,
                second_miss_ns: c.second_miss_ns,
            },
            note,
        ));
    }
    let (a, k) = spec
        .split_once(':')
        .ok_or_else(|| format!("--costs entry `{spec}` is not calibrated or CA_NS:CK_NS"))?;
    let a: f64 = a.parse().map_err(|_| format!("bad C_a in `{spec}`"))?;
    let k: f64 = k.parse().map_err(|_| format!("bad C_k in `{spec}`"))?;
    if !(a > 0.0 && k > 0.0) {
        return Err(format!("costs in `{spec}` must be positive"));
    }
    Ok((
        spec.to_string(),
        MissCosts {
            app_miss_ns: a,
            second_miss_ns: k,
        },
        "flag".into(),
    ))
}

// ----- sweep -------------------------------------------------------------------------------

struct Cell {
    pattern: String,
    ratio: f64,
    alpha: f64,
    cost_label: String,
    costs: MissCosts,
    cost_method: String,
}

fn sym_config(a: &Args, costs: MissCosts) -> SymbiosisConfig {
    let mut g = GhostConfig::new(a.memory, a.app_min, second_tier(a));
    g.sample_inv_rate = a.sample_inv;
    g.group_blocks = a.group;
    SymbiosisConfig::new(g, costs)
}

fn layout_for(a: &Args, ratio: f64, alpha: f64) -> Res<BlockLayout> {
    let blocks = ((a.memory as f64 / ratio) / f64::from(BLOCK_BYTES)).ceil() as u64;
    BlockLayout::new(blocks, BLOCK_BYTES, alpha, BLOCKS_PER_FILE, a.seed).map_err(|e| e.to_string())
}

/// Latency ratio `(num + hit) / (den + hit)`: L_e counts only miss costs, so the per-access cost
/// of an application hit (`--hit-ns`) is added before comparing, as a request pays both.
fn ratio(num: f64, den: f64, hit_ns: f64) -> f64 {
    let (n, d) = (num + hit_ns, den + hit_ns);
    if n < 1e-9 && d < 1e-9 {
        1.0
    } else {
        n / d.max(1e-9)
    }
}

fn run_cell(a: &Args, cell: &Cell, out: &Out) -> Res<SweepRow> {
    let dist = pattern(&cell.pattern)?;
    let layout = layout_for(a, cell.ratio, cell.alpha)?;
    let cfg = sym_config(a, cell.costs);
    let cands = cfg.ghost.candidates();
    let n = a.accesses;
    let measure_from = n - n / 3;
    let c = cell.costs;
    let le = |h: &HitCounts| h.expected_latency(c.app_miss_ns, c.second_miss_ns);

    // Exhaustive static splits, one pass.
    let mut statics: Vec<TwoTier> = cands
        .iter()
        .map(|&m_a| TwoTier::new(a.memory, m_a, a.policy, real_tier(a)))
        .collect();
    let mut counts = vec![HitCounts::default(); statics.len()];
    let mut st = Stream::new(&dist, layout.blocks(), a.seed)?;
    for i in 0..n {
        let r = layout.block(st.next());
        for (t, h) in statics.iter_mut().zip(counts.iter_mut()) {
            let x = t.access(
                r.file,
                r.offset,
                r.compressed_len.into(),
                r.uncompressed_len.into(),
            );
            if i >= measure_from {
                h.add(x);
            }
        }
    }
    drop(statics);
    let static_le: Vec<f64> = counts.iter().map(le).collect();

    // Symbiosis, same trace.
    let real = TwoTier::new(a.memory, 0, a.policy, real_tier(a));
    let mut cl = ClosedLoop::new(real, Symbiosis::new(cfg).map_err(|e| e.to_string())?);
    let mut st = Stream::new(&dist, layout.blocks(), a.seed)?;
    let mut sym_counts = HitCounts::default();
    let mut last_change = 0u64;
    let mut prev_target = cl.sym.app_target_bytes();
    for i in 0..n {
        let r = layout.block(st.next());
        let h = cl.step(&r);
        if cl.sym.app_target_bytes() != prev_target {
            prev_target = cl.sym.app_target_bytes();
            last_change = i;
        }
        if i >= measure_from {
            sym_counts.add(h);
        }
    }
    let sym_le = le(&sym_counts);
    let target = cl.sym.app_target_bytes();
    let (best_i, best_le) = static_le
        .iter()
        .copied()
        .enumerate()
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .unwrap_or((0, f64::NAN));
    let half_i = cands.iter().position(|&m| m >= a.memory / 2).unwrap_or(0);
    let last = cands.len() - 1;
    let worse_of_ends = static_le[0].max(static_le[last]);
    // Prediction at the final size from the last round, and its error against the measured L_e.
    let last_round = cl.sym.rounds().last();
    let predicted = last_round
        .and_then(|r| r.candidates.iter().find(|(p, _)| p.app_bytes == target))
        .map_or(f64::NAN, |(_, l)| *l);
    let ghost_peak = cl
        .sym
        .rounds()
        .iter()
        .map(|r| r.ghost_bytes_peak)
        .max()
        .unwrap_or(0);
    let stats = cl.sym.stats();
    note!(
        out,
        "{:<7} M/D_u {:.1} alpha {:.2} {:<12} sym {:>7.0} (M_a {:>4} MiB) best {:>7.0} ({:>4} \
         MiB) min {:>7.0} half {:>7.0} full {:>7.0}  sym/best {:.3}",
        cell.pattern,
        cell.ratio,
        cell.alpha,
        cell.cost_label,
        sym_le,
        target / MIB,
        best_le,
        cands[best_i] / MIB,
        static_le[0],
        static_le[half_i],
        static_le[last],
        ratio(best_le, sym_le, a.hit_ns),
    );
    Ok(SweepRow {
        bench: "cache-sweep",
        pattern: cell.pattern.to_string(),
        m_over_du: cell.ratio,
        alpha: cell.alpha,
        costs: cell.cost_label.to_string(),
        cost_method: cell.cost_method.to_string(),
        ca_ns: c.app_miss_ns,
        ck_ns: c.second_miss_ns,
        memory_bytes: a.memory,
        app_min_bytes: a.app_min,
        d_u_bytes: layout.uncompressed_bytes(),
        d_c_bytes: layout.compressed_bytes(),
        layout: a.layout.to_string(),
        policy: a.policy.name().to_string(),
        sample_inv: u64::from(a.sample_inv),
        group_blocks: u64::from(a.group),
        accesses: n,
        measured_from: measure_from,
        le_symbiosis_ns: sym_le,
        ma_symbiosis_bytes: target,
        h_a_symbiosis: sym_counts.h_a(),
        h_k_symbiosis: sym_counts.h_k(),
        le_static_min_ns: static_le[0],
        le_static_half_ns: static_le[half_i],
        le_static_full_ns: static_le[last],
        le_best_static_ns: best_le,
        ma_best_static_bytes: cands[best_i],
        candidates_bytes: cands.clone(),
        le_static_ns: static_le.clone(),
        hit_ns: a.hit_ns,
        best_over_symbiosis: ratio(best_le, sym_le, a.hit_ns),
        worse_end_over_symbiosis: ratio(worse_of_ends, sym_le, a.hit_ns),
        half_over_symbiosis: ratio(static_le[half_i], sym_le, a.hit_ns),
        predicted_le_at_adopted_ns: predicted,
        sim_error_rel: (predicted - sym_le).abs() / sym_le.max(1e-9),
        rounds: u64::from(stats.rounds),
        adoptions: u64::from(stats.adoptions),
        restarts: u64::from(stats.restarts),
        reverts: u64::from(stats.reverts),
        last_change_at_access: last_change,
        ghost_bytes_peak: ghost_peak as u64,
        ghost_fraction_of_m: ghost_peak as f64 / a.memory as f64,
    })
}

fn cost_sets(a: &Args, out: &Out) -> Res<Vec<(f64, String, MissCosts, String)>> {
    let mut v = Vec::new();
    for &alpha in &a.alphas {
        for spec in &a.costs {
            let (label, c, m) = costs_for(spec, alpha, &a.calibrate_dir, out)?;
            v.push((alpha, label, c, m));
        }
    }
    Ok(v)
}

fn sweep(a: &Args, out: &Out) -> Res<()> {
    let mut cells = Vec::new();
    for (alpha, label, costs, method) in cost_sets(a, out)? {
        for p in &a.patterns {
            for &ratio in &a.ratios {
                cells.push(Cell {
                    pattern: p.clone(),
                    ratio,
                    alpha,
                    cost_label: label.clone(),
                    costs,
                    cost_method: method.clone(),
                });
            }
        }
    }
    let next = AtomicUsize::new(0);
    let err: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..a.threads.min(cells.len()).max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(cell) = cells.get(i) else { break };
                match run_cell(a, cell, out) {
                    Ok(row) => out.emit(row),
                    Err(e) => {
                        if let Ok(mut g) = err.lock() {
                            *g = Some(e);
                        }
                        break;
                    }
                }
            });
        }
    });
    match err.into_inner() {
        Ok(Some(e)) => Err(e),
        _ => Ok(()),
    }
}

// ----- overhead ----------------------------------------------------------------------------

fn accesses_of(
    layout: &BlockLayout,
    dist: &RequestDist,
    a: &Args,
    n: usize,
) -> Res<Vec<BlockAccess>> {
    let mut st = Stream::new(dist, layout.blocks(), a.seed)?;
    let mut real = TwoTier::new(a.memory, a.memory / 2, PolicyKind::Lru, real_tier(a));
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let r = layout.block(st.next());
        let h = real.access(
            r.file,
            r.offset,
            r.compressed_len.into(),
            r.uncompressed_len.into(),
        );
        v.push(BlockAccess {
            file: r.file,
            block_no: r.block_no,
            offset: r.offset,
            compressed_len: r.compressed_len,
            uncompressed_len: r.uncompressed_len,
            app_hit: h == TierHit::App,
            second_hit: (h != TierHit::App).then_some(h == TierHit::Second),
            latency_ns: None,
        });
    }
    Ok(v)
}

/// This thread's CPU time in ns: on a shared machine it excludes time spent waiting for a core.
fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

fn overhead(a: &Args, out: &Out) -> Res<()> {
    let costs = MissCosts {
        app_miss_ns: 3000.0,
        second_miss_ns: 16000.0,
    };
    for p in &a.patterns {
        let dist = pattern(p)?;
        let layout = layout_for(a, 0.4, 0.5)?;
        let n = 4_000_000usize;
        let acc = accesses_of(&layout, &dist, a, n)?;
        // Outside rounds: the Tracker alone (Sim-off).
        let mut cfg = sym_config(a, costs);
        cfg.simulate = false;
        let mut sym = Symbiosis::new(cfg).map_err(|e| e.to_string())?;
        let t = thread_cpu_ns();
        for x in &acc {
            std::hint::black_box(sym.record(x));
        }
        let tracker_ns = (thread_cpu_ns() - t) / n as f64;
        // During rounds: GhostSim fed every access (restarted whenever a round finishes).
        let g = sym_config(a, costs).ghost;
        let mut ghost = GhostSim::new(g.clone()).map_err(|e| e.to_string())?;
        let mut peak = 0usize;
        let mut rounds = 0u64;
        let t = thread_cpu_ns();
        for x in &acc {
            ghost.record(x);
            if ghost.is_done() {
                peak = peak.max(ghost.peak_metadata_bytes());
                rounds += 1;
                ghost = GhostSim::new(g.clone()).map_err(|e| e.to_string())?;
            }
        }
        let ghost_ns = (thread_cpu_ns() - t) / n as f64;
        peak = peak.max(ghost.peak_metadata_bytes());
        // The modelled engine's own block access, for scale.
        let mut real = TwoTier::new(a.memory, a.memory / 2, PolicyKind::Lru, real_tier(a));
        let t = thread_cpu_ns();
        for x in &acc {
            std::hint::black_box(real.access(
                x.file,
                x.offset,
                x.compressed_len.into(),
                x.uncompressed_len.into(),
            ));
        }
        let model_ns = (thread_cpu_ns() - t) / n as f64;
        note!(
            out,
            "{p:<7} tracker {tracker_ns:.1} ns/access, +ghost {ghost_ns:.1} ns/access, two-tier \
             model {model_ns:.1} ns/access, ghost peak {} KiB = {:.4} % of M",
            peak / 1024,
            100.0 * peak as f64 / a.memory as f64
        );
        out.emit(OverheadRow {
            bench: "cache-overhead",
            pattern: p.to_string(),
            m_over_du: 0.4,
            memory_bytes: a.memory,
            sample_inv: u64::from(a.sample_inv),
            accesses: n as u64,
            tracker_ns_per_access: tracker_ns,
            ghost_ns_per_access: ghost_ns,
            round_ns_per_access: tracker_ns + ghost_ns,
            two_tier_model_ns_per_access: model_ns,
            rounds_completed: rounds,
            ghost_bytes_peak: peak as u64,
            ghost_fraction_of_m: peak as f64 / a.memory as f64,
        });
    }
    Ok(())
}

// ----- sampling ablation -------------------------------------------------------------------

fn sampling(a: &Args, out: &Out) -> Res<()> {
    let costs = MissCosts {
        app_miss_ns: 3000.0,
        second_miss_ns: 16000.0,
    };
    for p in &a.patterns {
        let dist = pattern(p)?;
        let ratio = 0.4;
        let alpha = 0.25;
        let layout = layout_for(a, ratio, alpha)?;
        let g0 = sym_config(a, costs).ghost;
        let cands = g0.candidates();
        // Exact per-candidate ratios (second half of the trace).
        let mut tiers: Vec<TwoTier> = cands
            .iter()
            .map(|&m| TwoTier::new(a.memory, m, PolicyKind::Lru, real_tier(a)))
            .collect();
        let mut exact = vec![HitCounts::default(); tiers.len()];
        let mut st = Stream::new(&dist, layout.blocks(), a.seed ^ 99)?;
        let n = a.accesses;
        for i in 0..n {
            let r = layout.block(st.next());
            for (t, h) in tiers.iter_mut().zip(exact.iter_mut()) {
                let x = t.access(
                    r.file,
                    r.offset,
                    r.compressed_len.into(),
                    r.uncompressed_len.into(),
                );
                if i >= n / 2 {
                    h.add(x);
                }
            }
        }
        drop(tiers);
        let le = |h: &HitCounts| h.expected_latency(costs.app_miss_ns, costs.second_miss_ns);
        let best_exact = exact.iter().map(le).fold(f64::INFINITY, f64::min);
        for &group in &[32u32, 1] {
            for inv in [2u32, 4, 8, 16, 32, 64, 128, 256] {
                let mut g = g0.clone();
                g.sample_inv_rate = inv;
                g.group_blocks = group;
                let mut ghost = GhostSim::new(g).map_err(|e| e.to_string())?;
                let mut st = Stream::new(&dist, layout.blocks(), a.seed)?;
                let mut fed = 0u64;
                while !ghost.is_done() && fed < 400_000_000 {
                    let r = layout.block(st.next());
                    ghost.record(&BlockAccess {
                        file: r.file,
                        block_no: r.block_no,
                        offset: r.offset,
                        compressed_len: r.compressed_len,
                        uncompressed_len: r.uncompressed_len,
                        app_hit: false,
                        second_hit: None,
                        latency_ns: None,
                    });
                    fed += 1;
                }
                let preds = ghost.predictions();
                let mut d_ha = 0.0f64;
                let mut d_hk = 0.0f64;
                let mut d_le = 0.0f64;
                for (pr, e) in preds.iter().zip(&exact) {
                    d_ha = d_ha.max((pr.h_a - e.h_a()).abs());
                    if e.accesses > e.app_hits {
                        d_hk = d_hk.max((pr.h_k - e.h_k()).abs());
                    }
                    let lp = pr.expected_latency(costs.app_miss_ns, costs.second_miss_ns);
                    d_le += (lp - le(e)).abs() / le(e).max(1e-9) / preds.len() as f64;
                }
                let chosen = preds
                    .iter()
                    .enumerate()
                    .min_by(|x, y| {
                        let lx =
                            x.1.expected_latency(costs.app_miss_ns, costs.second_miss_ns);
                        let ly =
                            y.1.expected_latency(costs.app_miss_ns, costs.second_miss_ns);
                        lx.total_cmp(&ly)
                    })
                    .map_or(0, |(i, _)| i);
                let regret = le(&exact[chosen]) / best_exact.max(1e-9);
                note!(
                    out,
                    "{p:<7} G {group:>2} R 1/{inv:<3} max|dH_a| {d_ha:.3} max|dH_k| {d_hk:.3} \
                     mean|dL_e|/L_e {d_le:.3} chosen/best {regret:.3} ghost {} KiB, {} accesses",
                    ghost.peak_metadata_bytes() / 1024,
                    fed
                );
                out.emit(SamplingRow {
                    bench: "cache-sampling",
                    pattern: p.to_string(),
                    m_over_du: ratio,
                    alpha,
                    memory_bytes: a.memory,
                    sample_inv: u64::from(inv),
                    group_blocks: u64::from(group),
                    max_abs_err_h_a: d_ha,
                    max_abs_err_h_k: d_hk,
                    mean_rel_err_le: d_le,
                    chosen_exact_le_over_best: regret,
                    ghost_bytes_peak: ghost.peak_metadata_bytes() as u64,
                    round_accesses: fed,
                });
            }
        }
    }
    Ok(())
}

// ----- reset-policy ablation ---------------------------------------------------------------

fn reset_ablation(a: &Args, out: &Out) -> Res<()> {
    let costs = MissCosts {
        app_miss_ns: 3000.0,
        second_miss_ns: 16000.0,
    };
    let alpha = 0.25;
    // Phase 1 reads D_u = M/2; phase 2 reads D_u = 3M (the data set grew).
    let layout = layout_for(a, 1.0 / 3.0, alpha)?;
    for p in &a.patterns {
        let dist = pattern(p)?;
        for reset in [true, false] {
            let mut cfg = sym_config(a, costs);
            cfg.reset_policy = reset;
            let real = TwoTier::new(a.memory, 0, a.policy, real_tier(a));
            let mut cl = ClosedLoop::new(real, Symbiosis::new(cfg).map_err(|e| e.to_string())?);
            let mut small = Stream::new(&dist, layout.blocks() / 6, a.seed)?;
            for _ in 0..a.accesses {
                cl.step(&layout.block(small.next()));
            }
            let rounds_before = cl.sym.rounds().len();
            let ma_phase1 = cl.sym.app_target_bytes();
            let mut big = Stream::new(&dist, layout.blocks(), a.seed + 1)?;
            let mut during = HitCounts::default();
            let mut after = HitCounts::default();
            let mut done_at = None;
            for i in 0..2 * a.accesses {
                let h = cl.step(&layout.block(big.next()));
                if done_at.is_none() && cl.sym.rounds().len() > rounds_before {
                    done_at = Some(i);
                }
                if done_at.is_none() {
                    during.add(h);
                } else if i >= a.accesses {
                    after.add(h);
                }
            }
            let le = |h: &HitCounts| h.expected_latency(costs.app_miss_ns, costs.second_miss_ns);
            note!(
                out,
                "{p:<7} reset {reset:<5} phase-1 M_a {:>4} MiB; L_e until the round ends {:.0} \
                 ns over {} accesses; after {:.0} ns (M_a {} MiB)",
                ma_phase1 / MIB,
                le(&during),
                during.accesses,
                le(&after),
                cl.sym.app_target_bytes() / MIB
            );
            out.emit(ResetRow {
                bench: "cache-reset",
                pattern: p.to_string(),
                memory_bytes: a.memory,
                alpha,
                change: "D_u 0.5M -> 3M".to_string(),
                reset_policy: reset,
                ma_phase1_bytes: ma_phase1,
                le_until_round_end_ns: le(&during),
                accesses_until_round_end: during.accesses,
                le_after_ns: le(&after),
                ma_final_bytes: cl.sym.app_target_bytes(),
            });
        }
    }
    Ok(())
}

// ----- policies ----------------------------------------------------------------------------

fn policies(a: &Args, out: &Out) -> Res<()> {
    let mut traces: Vec<(String, RequestDist, bool)> = a
        .patterns
        .iter()
        .map(|p| pattern(p).map(|d| (p.clone(), d, false)))
        .collect::<Res<_>>()?;
    traces.push((
        "zipf+scan".into(),
        RequestDist::ScrambledZipfian(0.99),
        true,
    ));
    let blocks = 4 * a.memory / u64::from(BLOCK_BYTES);
    let n = a.accesses;
    for (name, dist, scans) in traces {
        for frac in [0.05, 0.1, 0.2, 0.4] {
            let cap = (frac * (blocks * u64::from(BLOCK_BYTES)) as f64) as u64;
            let mut res = Vec::new();
            for kind in [PolicyKind::Lru, PolicyKind::S3Fifo] {
                let mut c = kind.build(cap);
                let mut st = Stream::new(&dist, blocks, a.seed)?;
                let mut x = a.seed | 1;
                let (mut acc, mut miss) = (0u64, 0u64);
                let mut i = 0u64;
                while i < n {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // With scans: 1 % of requests start a scan of 16..=512 sequential blocks.
                    let run = if scans && x.is_multiple_of(100) {
                        16 + (x >> 8) % 497
                    } else {
                        1
                    };
                    let b0 = st.next();
                    for j in 0..run {
                        let key = attune_cache::BlockKey {
                            file: 0,
                            unit: (b0 + j) % blocks,
                        };
                        let hit = c.access(key, u64::from(BLOCK_BYTES));
                        if i >= n / 2 {
                            acc += 1;
                            miss += (!hit) as u64;
                        }
                        i += 1;
                    }
                }
                res.push(miss as f64 / acc.max(1) as f64);
            }
            note!(
                out,
                "{name:<9} cache {:.2} of data: miss ratio lru {:.4} s3fifo {:.4}",
                frac,
                res[0],
                res[1]
            );
            out.emit(PoliciesRow {
                bench: "cache-policies",
                trace: name.to_string(),
                cache_over_data: frac,
                data_bytes: blocks * u64::from(BLOCK_BYTES),
                accesses: n,
                miss_ratio_lru: res[0],
                miss_ratio_s3fifo: res[1],
            });
        }
    }
    Ok(())
}

fn replay(a: &Args, out: &Out) -> Res<()> {
    let path = a.trace.as_deref().ok_or("mode replay needs --trace FILE")?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let ids: Vec<u64> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            l.trim()
                .parse::<u64>()
                .map_err(|_| format!("{path}:{}: not a block id: `{l}`", i + 1))
        })
        .collect::<Res<_>>()?;
    for kind in [PolicyKind::Lru, PolicyKind::S3Fifo] {
        for &blocks in &a.cache_blocks {
            let mut c = kind.build(blocks * u64::from(BLOCK_BYTES));
            let mut misses = 0u64;
            for &id in &ids {
                let key = attune_cache::BlockKey { file: 0, unit: id };
                misses += (!c.access(key, u64::from(BLOCK_BYTES))) as u64;
            }
            let row = ReplayRow {
                policy: kind.name(),
                cache_blocks: blocks,
                accesses: ids.len(),
                misses,
            };
            if out.sink.human() {
                println!("{} {blocks} blocks: {misses} misses", row.policy);
            }
            out.sink.row(&row)?;
        }
    }
    Ok(())
}

/// One phase of a dynamic scenario: a pattern over the first `fraction` of the blocks,
/// optionally mirrored to the tail.
#[derive(Clone, Copy)]
struct Phase {
    pattern: &'static str,
    fraction: f64,
    mirror: bool,
}

fn dynamic(a: &Args, out: &Out) -> Res<()> {
    let costs = MissCosts {
        app_miss_ns: 3000.0,
        second_miss_ns: 16000.0,
    };
    let alpha = 0.25;
    // The layout holds the largest phase: D_u = 2M.
    let layout = layout_for(a, 0.5, alpha)?;
    let p = |pattern, fraction, mirror| Phase {
        pattern,
        fraction,
        mirror,
    };
    let scenarios: Vec<(&str, Phase, Phase)> = vec![
        (
            "hot20:1.0->2.0",
            p("hot20", 0.5, false),
            p("hot20", 1.0, false),
        ),
        (
            "hot20:2.0->1.0",
            p("hot20", 1.0, false),
            p("hot20", 0.5, false),
        ),
        (
            "uniform:1.0->2.0",
            p("uniform", 0.5, false),
            p("uniform", 1.0, false),
        ),
        (
            "uniform:2.0->1.0",
            p("uniform", 1.0, false),
            p("uniform", 0.5, false),
        ),
        ("2g:mirror", p("hot20", 1.0, false), p("hot20", 1.0, true)),
        (
            "2g:uniform->hot10",
            p("uniform", 1.0, false),
            p("hot10", 1.0, false),
        ),
        (
            "2g:hot10->uniform",
            p("hot10", 1.0, false),
            p("uniform", 1.0, false),
        ),
    ];
    let n = a.accesses;
    for (name, p1, p2) in scenarios {
        let real = TwoTier::new(a.memory, 0, a.policy, real_tier(a));
        let cfg = sym_config(a, costs);
        let mut cl = ClosedLoop::new(real, Symbiosis::new(cfg).map_err(|e| e.to_string())?);
        let mut st_min = TwoTier::new(a.memory, a.app_min, a.policy, real_tier(a));
        let mut st_full = TwoTier::new(a.memory, a.memory, a.policy, real_tier(a));
        let mut res = Vec::new();
        let mut converged = Vec::new();
        for (k, ph) in [p1, p2].iter().enumerate() {
            let blocks = ((layout.blocks() as f64) * ph.fraction) as u64;
            let mut st = Stream::new(&pattern(ph.pattern)?, blocks.max(1), a.seed + k as u64)?;
            let mut c = [HitCounts::default(); 3];
            let rounds_before = cl.sym.rounds().len();
            let mut last_round_end = None;
            for i in 0..n {
                let mut b = st.next();
                if ph.mirror {
                    b = blocks - 1 - b.min(blocks - 1);
                }
                let r = layout.block(b);
                let (o, cz, u) = (r.offset, r.compressed_len.into(), r.uncompressed_len.into());
                let h = [
                    cl.step(&r),
                    st_min.access(r.file, o, cz, u),
                    st_full.access(r.file, o, cz, u),
                ];
                if cl.sym.rounds().len() > rounds_before {
                    last_round_end.get_or_insert(i);
                }
                if i >= n - n / 3 {
                    for (x, y) in c.iter_mut().zip(h) {
                        x.add(y);
                    }
                }
            }
            let le: Vec<f64> = c
                .iter()
                .map(|h| h.expected_latency(costs.app_miss_ns, costs.second_miss_ns))
                .collect();
            res.push((le, cl.sym.app_target_bytes()));
            converged.push(last_round_end);
        }
        let conv = |x: Option<u64>| x.map_or("null".to_string(), |v| v.to_string());
        note!(
            out,
            "{name:<18} phase1 sym {:>6.0} (M_a {:>3} MiB) min {:>6.0} M {:>6.0} | phase2 sym {:>6.0} \
             (M_a {:>3} MiB) min {:>6.0} M {:>6.0} | round done {} accesses after the change",
            res[0].0[0],
            res[0].1 / MIB,
            res[0].0[1],
            res[0].0[2],
            res[1].0[0],
            res[1].1 / MIB,
            res[1].0[1],
            res[1].0[2],
            conv(converged[1]),
        );
        out.emit(DynamicRow {
            bench: "cache-dynamic",
            scenario: name.to_string(),
            memory_bytes: a.memory,
            alpha,
            ca_ns: costs.app_miss_ns,
            ck_ns: costs.second_miss_ns,
            accesses_per_phase: n,
            phase1_le_symbiosis_ns: res[0].0[0],
            phase1_le_static_min_ns: res[0].0[1],
            phase1_le_static_full_ns: res[0].0[2],
            phase1_ma_bytes: res[0].1,
            phase2_le_symbiosis_ns: res[1].0[0],
            phase2_le_static_min_ns: res[1].0[1],
            phase2_le_static_full_ns: res[1].0[2],
            phase2_ma_bytes: res[1].1,
            phase2_first_round_end_after_accesses: converged[1],
            rounds: cl.sym.rounds().len() as u64,
            reverts: u64::from(cl.sym.stats().reverts),
        });
    }
    Ok(())
}

/// Runs `attune-bench cache-sim ARGS`.
pub fn run(argv: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let Some(a) = parse_args(argv).map_err(Fail::Usage)? else {
        return Ok(());
    };
    let out = Out::new(sink);
    for m in &a.modes {
        match m.as_str() {
            "sweep" => sweep(&a, &out)?,
            "overhead" => overhead(&a, &out)?,
            "sampling" => sampling(&a, &out)?,
            "reset" => reset_ablation(&a, &out)?,
            "policies" => policies(&a, &out)?,
            "dynamic" => dynamic(&a, &out)?,
            // A trace that cannot be read is a bad argument, like a bad flag.
            "replay" => replay(&a, &out).map_err(Fail::Usage)?,
            _ => return Err(Fail::Usage(format!("unknown mode `{m}`\n{}", usage()))),
        }
        out.check()?;
    }
    Ok(())
}
