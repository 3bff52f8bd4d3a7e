//! Scenario tests across modules: GhostSim against exact per-size simulation, adaptation to
//! analytically known optima, the guard, the reset policy, restarts and pausing.
//! Every trace is seeded; each test prints its seed.

use attune_workload::{RequestDist, Sampler};

use crate::access::SecondTier;
use crate::ghost::{GhostConfig, GhostSim};
use crate::policy::PolicyKind;
use crate::synth::{BlockLayout, ClosedLoop};
use crate::tracker::{MissCosts, RoundTrigger, State, Symbiosis, SymbiosisConfig};
use crate::twotier::{HitCounts, TwoTier};

const KEYS_PER_BLOCK: u64 = 16;
const MIB: u64 = 1 << 20;

fn costs() -> MissCosts {
    MissCosts {
        app_miss_ns: 3_000.0,
        second_miss_ns: 20_000.0,
    }
}

fn page_tier() -> SecondTier {
    SecondTier::Pages {
        page_bytes: 4096,
        readahead_allowance: 0.0,
    }
}

fn blocks_stream(dist: &RequestDist, blocks: u64, seed: u64) -> impl FnMut() -> u64 {
    let mut s = Sampler::new(dist, blocks * KEYS_PER_BLOCK, seed).unwrap();
    move || s.next_item() / KEYS_PER_BLOCK
}

/// Exact per-candidate (H_a, H_k) from separate two-tier simulations, measured over the second
/// half of `n` accesses.
fn exact(
    layout: &BlockLayout,
    dist: &RequestDist,
    seed: u64,
    n: u64,
    cfg: &GhostConfig,
) -> Vec<HitCounts> {
    let mut tiers: Vec<TwoTier> = cfg
        .candidates()
        .iter()
        .map(|&c| TwoTier::new(cfg.memory_bytes, c, PolicyKind::Lru, cfg.second_tier))
        .collect();
    let mut counts = vec![HitCounts::default(); tiers.len()];
    let mut next = blocks_stream(dist, layout.blocks(), seed);
    for step in 0..n {
        let r = layout.block(next());
        for (t, c) in tiers.iter_mut().zip(counts.iter_mut()) {
            let h = t.access(
                r.file,
                r.offset,
                u64::from(r.compressed_len),
                u64::from(r.uncompressed_len),
            );
            if step >= n / 2 {
                c.add(h);
            }
        }
    }
    counts
}

/// Runs one GhostSim round over the stream (the ghost only needs the block addresses).
fn ghost_round(layout: &BlockLayout, dist: &RequestDist, seed: u64, cfg: &GhostConfig) -> GhostSim {
    let mut g = GhostSim::new(cfg.clone()).unwrap();
    let mut next = blocks_stream(dist, layout.blocks(), seed);
    let mut steps = 0u64;
    while !g.is_done() {
        let r = layout.block(next());
        g.record(&r.access(false, None));
        steps += 1;
        assert!(steps < 200_000_000, "round did not finish");
    }
    g
}

/// Stated accuracy of the sampled, pipelined GhostSim (R = 1/16, G = 32) against exact
/// simulation, on a 256 MiB data set with M = 128 MiB, α = 0.5, C_a = 3 µs, C_k = 20 µs:
/// per-candidate |ΔH_a| <= 0.08, |ΔH_k| <= 0.15, and the candidate GhostSim ranks best is within
/// 10 % of the exact best L_e. The hit-ratio error is sampling variance: about 128 of 2048 groups
/// are sampled, so the sampled share of a hot region is off by ~10-20 %; it matches what R = 1/64
/// gives on the paper's 1 GB data sets (docs/symbiosis.md has the ablation over R).
///
/// `side_by_side` lifts the ghost memory budget so that all nine candidates run in one pass
/// (at R = 1/16 the default budget of 0.18 % of M admits only one at a time): the same bounds
/// hold for both modes.
fn check_ghost_accuracy(dist: RequestDist, seed: u64, side_by_side: bool) {
    println!("seed {seed} dist {dist} side_by_side {side_by_side}");
    let layout = BlockLayout::new(65_536, 4096, 0.5, 8192, seed).unwrap();
    let mut cfg = GhostConfig::new(128 * MIB, MIB, page_tier());
    cfg.sample_inv_rate = 16;
    cfg.seed = seed;
    cfg.ghost_bytes_max = if side_by_side { u64::MAX } else { 0 };
    let g = ghost_round(&layout, &dist, seed, &cfg);
    assert_eq!(g.passes(), if side_by_side { 1 } else { 9 });
    let pred = g.predictions();
    let exact = exact(&layout, &dist, seed ^ 1, 1_500_000, &cfg);
    let c = costs();
    let mut worst = (0.0f64, 0.0f64);
    for (p, e) in pred.iter().zip(&exact) {
        let (le_p, le_e) = (
            p.expected_latency(c.app_miss_ns, c.second_miss_ns),
            e.expected_latency(c.app_miss_ns, c.second_miss_ns),
        );
        println!(
            "M_a {:>4} MiB  H_a {:.3}/{:.3}  H_k {:.3}/{:.3}  L_e {:>7.0}/{:>7.0}",
            p.app_bytes / MIB,
            p.h_a,
            e.h_a(),
            p.h_k,
            e.h_k(),
            le_p,
            le_e
        );
        worst.0 = worst.0.max((p.h_a - e.h_a()).abs());
        if e.accesses - e.app_hits > 1000 && p.second_samples > 100 {
            worst.1 = worst.1.max((p.h_k - e.h_k()).abs());
        }
    }
    println!("worst |dH_a| {:.3} |dH_k| {:.3}", worst.0, worst.1);
    assert!(worst.0 <= 0.08, "H_a error {}", worst.0);
    assert!(worst.1 <= 0.15, "H_k error {}", worst.1);
    let le = |h: &HitCounts| h.expected_latency(c.app_miss_ns, c.second_miss_ns);
    let best_exact = exact.iter().map(le).fold(f64::INFINITY, f64::min);
    let chosen = pred
        .iter()
        .enumerate()
        .min_by(|a, b| {
            let la = a.1.expected_latency(c.app_miss_ns, c.second_miss_ns);
            let lb = b.1.expected_latency(c.app_miss_ns, c.second_miss_ns);
            la.total_cmp(&lb)
        })
        .map(|(i, _)| i)
        .unwrap();
    let chosen_exact = le(&exact[chosen]);
    println!("chosen {chosen}: exact L_e {chosen_exact:.0} vs best {best_exact:.0}");
    assert!(chosen_exact <= best_exact * 1.10 + 1.0);
}

#[test]
fn sampled_ghost_agrees_with_exact_simulation_uniform() {
    check_ghost_accuracy(RequestDist::Uniform, 11, false);
    check_ghost_accuracy(RequestDist::Uniform, 11, true);
}

#[test]
fn sampled_ghost_agrees_with_exact_simulation_zipf_099() {
    check_ghost_accuracy(RequestDist::ScrambledZipfian(0.99), 12, false);
    check_ghost_accuracy(RequestDist::ScrambledZipfian(0.99), 12, true);
}

#[test]
fn sampled_ghost_agrees_with_exact_simulation_hotspot_20_80() {
    let hot = RequestDist::Hotspot {
        data_fraction: 0.2,
        ops_fraction: 0.8,
    };
    check_ghost_accuracy(hot.clone(), 13, false);
    check_ghost_accuracy(hot, 13, true);
}

/// With sampling off (R = 1) the only approximation left is the second-tier ghosts' start from
/// a larger candidate's contents with a short warm-up (one pass after another, or all side by
/// side from the first candidate's): the error must be small in both modes.
#[test]
fn unsampled_pipelined_ghost_matches_exact_simulation_hotspot() {
    let seed = 21;
    println!("seed {seed}");
    let dist = RequestDist::Hotspot {
        data_fraction: 0.2,
        ops_fraction: 0.8,
    };
    let layout = BlockLayout::new(16_384, 4096, 0.5, 4096, seed).unwrap();
    let mut cfg = GhostConfig::new(32 * MIB, MIB, page_tier());
    cfg.sample_inv_rate = 1;
    cfg.candidate_samples = 40_000;
    cfg.candidate_warmup_samples = 10_000;
    let exact = exact(&layout, &dist, seed ^ 1, 1_000_000, &cfg);
    for budget in [0, u64::MAX] {
        cfg.ghost_bytes_max = budget;
        let g = ghost_round(&layout, &dist, seed, &cfg);
        println!("ghost budget {budget}: {} passes", g.passes());
        check_unsampled(&g, &exact);
    }
}

fn check_unsampled(g: &GhostSim, exact: &[HitCounts]) {
    let mut worst = (0.0f64, 0.0f64);
    for (p, e) in g.predictions().iter().zip(exact) {
        println!(
            "M_a {:>3} MiB  H_a {:.3}/{:.3}  H_k {:.3}/{:.3}",
            p.app_bytes / MIB,
            p.h_a,
            e.h_a(),
            p.h_k,
            e.h_k()
        );
        worst.0 = worst.0.max((p.h_a - e.h_a()).abs());
        worst.1 = worst.1.max((p.h_k - e.h_k()).abs());
    }
    println!("worst |dH_a| {:.3} |dH_k| {:.3}", worst.0, worst.1);
    assert!(worst.0 <= 0.02 && worst.1 <= 0.04, "{worst:?}");
}

/// Controller settings for small closed-loop scenarios: R = 1/4 so that the small data sets still
/// have enough sampled groups, short windows.
fn loop_config(memory: u64, costs: MissCosts) -> SymbiosisConfig {
    let mut g = GhostConfig::new(memory, memory / 64, page_tier());
    g.sample_inv_rate = 4;
    let mut c = SymbiosisConfig::new(g, costs);
    c.window_accesses = 8192;
    c
}

fn closed_loop(cfg: SymbiosisConfig) -> ClosedLoop {
    let m = cfg.ghost.memory_bytes;
    let real = TwoTier::new(m, 0, PolicyKind::Lru, cfg.ghost.second_tier);
    ClosedLoop::new(real, Symbiosis::new(cfg).unwrap())
}

/// The paper's uniform model (§3.2.1): H_a = M_a/D_u, H_k = (M − M_a)/(α·D_u), both capped at 1.
/// L_e is concave between the end points M_k = 0 and M_k = min(M, α·D_u), so the best candidate
/// must be M or a grid neighbour of the kernel end point; that is checked. Returns the candidates
/// whose modelled L_e is within 1 % of the best.
fn analytic_best(cands: &[u64], m: u64, d_u: u64, alpha: f64, c: MissCosts) -> Vec<u64> {
    let le = |a: f64| {
        let h_a = (a / d_u as f64).min(1.0);
        let h_k = ((m as f64 - a) / (alpha * d_u as f64)).min(1.0);
        crate::expected_latency(h_a, h_k, c.app_miss_ns, c.second_miss_ns)
    };
    let kernel_end = m as f64 - (m as f64).min(alpha * d_u as f64);
    let below = cands
        .iter()
        .copied()
        .filter(|&a| a as f64 <= kernel_end)
        .max();
    let above = cands
        .iter()
        .copied()
        .filter(|&a| a as f64 >= kernel_end)
        .min();
    let best = cands
        .iter()
        .copied()
        .min_by(|&a, &b| le(a as f64).total_cmp(&le(b as f64)))
        .unwrap();
    let best_le = le(best as f64);
    println!(
        "analytic: best {} MiB L_e {best_le:.0}, kernel end {kernel_end:.0}",
        best / MIB
    );
    let near_end = |a: u64| a == m || Some(a) == below || Some(a) == above;
    assert!(cands
        .iter()
        .any(|&a| near_end(a) && le(a as f64) <= best_le + 1e-6));
    cands
        .iter()
        .copied()
        .filter(|&a| le(a as f64) <= best_le * 1.01 + 1e-6)
        .collect()
}

fn check_uniform_adaptation(d_u_over_m: f64, alpha: f64, costs: MissCosts, seed: u64) {
    println!("seed {seed} D_u/M {d_u_over_m} alpha {alpha} costs {costs:?}");
    let m = 32 * MIB;
    let blocks = (d_u_over_m * m as f64 / 4096.0) as u64;
    let layout = BlockLayout::new(blocks, 4096, alpha, 4096, seed).unwrap();
    let cfg = loop_config(m, costs);
    let cands = cfg.ghost.candidates();
    let want = analytic_best(&cands, m, layout.uncompressed_bytes(), alpha, costs);
    let mut cl = closed_loop(cfg);
    let mut next = blocks_stream(&RequestDist::Uniform, blocks, seed);
    for _ in 0..1_500_000 {
        cl.step(&layout.block(next()));
    }
    let reports = cl.sym.rounds();
    assert!(!reports.is_empty(), "no round finished");
    for r in reports {
        let best = r.best().unwrap();
        println!(
            "round {} adopted {} best {} MiB pred {:.0} measured {:.0}",
            r.index,
            r.adopted,
            best.0.app_bytes / MIB,
            best.1,
            r.measured_le_ns
        );
    }
    let got = cl.sym.app_target_bytes();
    assert!(want.contains(&got), "adopted {got}, analytic best {want:?}");
}

#[test]
fn adaptation_picks_all_application_when_data_fits_uncompressed() {
    check_uniform_adaptation(0.8, 0.5, costs(), 31);
}

/// D_u = 1.75M, α = 0.25: near the kernel end point M_k = α·D_u (M_a = 0.56M) every block stays in
/// memory compressed and the application cache still gets half of M (candidate M_a = M/2).
#[test]
fn adaptation_picks_the_kernel_end_point_when_compressed_data_just_fits() {
    check_uniform_adaptation(1.75, 0.25, costs(), 32);
}

#[test]
fn adaptation_picks_all_application_when_decompression_dominates() {
    let c = MissCosts {
        app_miss_ns: 10_000.0,
        second_miss_ns: 5_000.0,
    };
    check_uniform_adaptation(1.25, 0.5, c, 33);
}

/// §4.2.4: an unmodelled effect (here: an extra cache in front that serves everything) makes the
/// real L_e far lower than any prediction; the guard must reject every candidate. Without the
/// guard the same rounds adopt a size.
#[test]
fn guard_rejects_predictions_worse_than_the_measured_latency() {
    let seed = 41;
    println!("seed {seed}");
    let m = 32 * MIB;
    let c = MissCosts {
        app_miss_ns: 10_000.0,
        second_miss_ns: 5_000.0,
    };
    let blocks = (1.25 * m as f64 / 4096.0) as u64;
    let layout = BlockLayout::new(blocks, 4096, 0.5, 4096, seed).unwrap();
    for guard in [true, false] {
        let mut cfg = loop_config(m, c);
        cfg.guard = guard;
        let min = cfg.ghost.app_min_bytes;
        let mut sym = Symbiosis::new(cfg).unwrap();
        // The unmodelled real system: ten times the memory, all of it uncompressed.
        let mut real = TwoTier::new(10 * m, 10 * m, PolicyKind::Lru, page_tier());
        let mut next = blocks_stream(&RequestDist::Uniform, blocks, seed);
        for _ in 0..1_000_000 {
            let r = layout.block(next());
            let h = real.access(r.file, r.offset, r.compressed_len.into(), 4096);
            sym.record(&r.access(h == crate::TierHit::App, Some(h == crate::TierHit::Second)));
        }
        let first = &sym.rounds()[0];
        println!(
            "guard {guard}: best {:?} measured {}",
            first.best(),
            first.measured_le_ns
        );
        if guard {
            assert!(sym.rounds().iter().all(|r| !r.adopted));
            assert_eq!(sym.app_target_bytes(), min);
        } else {
            assert!(first.adopted);
            assert_eq!(sym.app_target_bytes(), m);
        }
    }
}

/// An engine may move the start before the first access (clamped to [minimum, M]); once an
/// access is recorded the start is the Tracker's own and the call changes nothing.
#[test]
fn start_moves_only_before_the_first_access() {
    let m = 32 * MIB;
    let mut sym = Symbiosis::new(loop_config(m, costs())).unwrap();
    let min = sym.config().ghost.app_min_bytes;
    assert_eq!(sym.app_target_bytes(), min);
    assert!(sym.set_start_app_bytes(2 * m), "moving to M");
    assert_eq!(sym.app_target_bytes(), m, "clamped to M");
    assert!(!sym.set_start_app_bytes(m), "already there");
    assert!(sym.set_start_app_bytes(0));
    assert_eq!(sym.app_target_bytes(), min, "clamped to the minimum");
    let layout = BlockLayout::new(1024, 4096, 0.25, 4096, 7).unwrap();
    sym.record(&layout.block(0).access(false, Some(false)));
    assert!(!sym.set_start_app_bytes(m), "too late after an access");
    assert_eq!(sym.app_target_bytes(), min);
}

/// §4.2.1: when L_e rises (the data set grew), the round starts from the minimum M_a; with the
/// reset policy off it keeps the old, now harmful, size while it simulates.
#[test]
fn reset_policy_drops_to_the_minimum_when_latency_rises() {
    let seed = 51;
    println!("seed {seed}");
    let m = 32 * MIB;
    let blocks = 4 * m / 4096;
    let layout = BlockLayout::new(blocks, 4096, 0.25, 4096, seed).unwrap();
    for reset in [true, false] {
        let mut cfg = loop_config(m, costs());
        cfg.reset_policy = reset;
        let min = cfg.ghost.app_min_bytes;
        let mut cl = closed_loop(cfg);
        // Phase 1: only the first half of M (uncompressed) is read: all of M goes to the app.
        let mut small = blocks_stream(&RequestDist::Uniform, blocks / 8, seed);
        for _ in 0..1_000_000 {
            cl.step(&layout.block(small()));
        }
        let phase1 = cl.sym.app_target_bytes();
        assert!(
            phase1 >= layout.uncompressed_bytes() / 8,
            "phase 1 M_a {phase1}"
        );
        assert_eq!(cl.sym.state(), State::Stable);
        // Phase 2: the whole data set (4·M uncompressed, M compressed).
        let mut big = blocks_stream(&RequestDist::Uniform, blocks, seed + 1);
        let mut target_at_trigger = None;
        for _ in 0..2_000_000 {
            let was = cl.sym.state();
            cl.step(&layout.block(big()));
            if was == State::Stable && cl.sym.state() == State::Adapting {
                target_at_trigger = Some(cl.sym.app_target_bytes());
            }
        }
        let at = target_at_trigger.expect("no round started after the change");
        println!("reset {reset}: M_a at trigger {} MiB", at / MIB);
        let r = cl
            .sym
            .rounds()
            .iter()
            .find(|r| r.trigger == RoundTrigger::Change)
            .unwrap();
        assert_eq!(r.reset, reset);
        assert_eq!(at, if reset { min } else { phase1 });
        // Either way the round ends where compressed data just fits (M_a = M − α·D_u = 0):
        // the minimum, since the device is slow.
        assert_eq!(cl.sym.app_target_bytes(), min);
    }
}

/// §4.2.5: a workload that changes faster than a round restarts it, then pauses simulation; once
/// the workload holds still, a new round runs to completion.
#[test]
fn workload_that_keeps_changing_pauses_then_resumes() {
    let seed = 61;
    println!("seed {seed}");
    let m = 32 * MIB;
    let blocks = 4 * m / 4096;
    let layout = BlockLayout::new(blocks, 4096, 0.25, 4096, seed).unwrap();
    let cfg = loop_config(m, costs());
    let window = cfg.window_accesses;
    let mut cl = closed_loop(cfg);
    let mut small = blocks_stream(&RequestDist::Uniform, blocks / 16, seed);
    let mut big = blocks_stream(&RequestDist::Uniform, blocks, seed + 1);
    let mut saw_pause = false;
    for i in 0..3_000_000u64 {
        // Alternate every 4 windows.
        let b = if (i / (4 * window)).is_multiple_of(2) {
            small()
        } else {
            big()
        };
        cl.step(&layout.block(b));
        saw_pause |= cl.sym.state() == State::Paused;
    }
    let s = cl.sym.stats();
    println!("{s:?}");
    assert!(saw_pause && s.pauses >= 1 && s.restarts >= 3);
    let finished_while_flapping = cl.sym.rounds().len();
    // Hold still.
    for _ in 0..3_000_000 {
        cl.step(&layout.block(big()));
    }
    let after = &cl.sym.rounds()[finished_while_flapping..];
    assert!(
        after.iter().any(|r| r.trigger == RoundTrigger::Resume),
        "no resumed round finished: {:?}",
        cl.sym.stats()
    );
}

/// The miss-ratio curve from a sampled round tracks exact LRU miss ratios.
#[test]
fn mrc_from_the_ghost_tracks_exact_lru() {
    let seed = 71;
    println!("seed {seed}");
    let dist = RequestDist::ScrambledZipfian(0.99);
    let layout = BlockLayout::new(65_536, 4096, 0.5, 8192, seed).unwrap();
    let mut cfg = GhostConfig::new(64 * MIB, MIB, page_tier());
    cfg.sample_inv_rate = 8;
    let g = ghost_round(&layout, &dist, seed, &cfg);
    let curve = g.mrc();
    assert_eq!(curve.len(), cfg.mrc_points + 1);
    for &(size, miss) in curve.iter().step_by(16).skip(1) {
        let mut lru = crate::Lru::new(size);
        let mut next = blocks_stream(&dist, layout.blocks(), seed ^ 7);
        let mut c = (0u64, 0u64);
        for i in 0..600_000 {
            let r = layout.block(next());
            let hit = crate::ReplacementPolicy::access(
                &mut lru,
                crate::BlockKey {
                    file: r.file,
                    unit: r.offset,
                },
                4096,
            );
            if i >= 300_000 {
                c.0 += 1;
                c.1 += (!hit) as u64;
            }
        }
        let exact = c.1 as f64 / c.0 as f64;
        println!("{:>4} MiB: ghost {miss:.3} exact {exact:.3}", size / MIB);
        assert!((miss - exact).abs() < 0.06);
    }
}

/// Beyond the paper: an adoption whose settled L_e is worse than before is rolled back. The real
/// application cache here holds only a quarter of its nominal size (unmodelled per-entry
/// overhead), so growing it, which the ghost predicts to pay, really hurts.
#[test]
fn adoption_that_makes_latency_worse_is_rolled_back() {
    let seed = 81;
    println!("seed {seed}");
    let m = 32 * MIB;
    let c = MissCosts {
        app_miss_ns: 10_000.0,
        second_miss_ns: 5_000.0,
    };
    let blocks = (1.25 * m as f64 / 4096.0) as u64;
    let layout = BlockLayout::new(blocks, 4096, 0.5, 4096, seed).unwrap();
    for revert in [true, false] {
        let mut cfg = loop_config(m, c);
        if !revert {
            cfg.revert_tolerance = None;
        }
        let min = cfg.ghost.app_min_bytes;
        let mut sym = Symbiosis::new(cfg).unwrap();
        let mut real = TwoTier::new(m, 0, PolicyKind::Lru, page_tier());
        real.set_split(min / 4, m - min);
        let mut next = blocks_stream(&RequestDist::Uniform, blocks, seed);
        for _ in 0..1_500_000 {
            let r = layout.block(next());
            let h = real.access(r.file, r.offset, r.compressed_len.into(), 4096);
            let a = r.access(h == crate::TierHit::App, Some(h == crate::TierHit::Second));
            if let Some(m_a) = sym.record(&a) {
                real.set_split(m_a / 4, m - m_a);
            }
        }
        let first = &sym.rounds()[0];
        println!("revert {revert}: {:?} -> {:?}", first.adopted, sym.stats());
        assert!(first.adopted, "the ghost should predict a gain");
        if revert {
            assert!(first.reverted);
            assert_eq!(sym.app_target_bytes(), min);
            assert!(sym.stats().reverts >= 1);
        } else {
            assert!(!first.reverted);
            assert_eq!(sym.app_target_bytes(), m);
        }
    }
}

/// A controller over a 32 MiB two-tier loop whose uniform working set is 1.25 M, and a feed that
/// runs n accesses through the real tiers, resizing them as the controller decides.
fn uniform_loop(seed: u64) -> (Symbiosis, impl FnMut(&mut Symbiosis, u64)) {
    let m = 32 * MIB;
    let blocks = (1.25 * m as f64 / 4096.0) as u64;
    let layout = BlockLayout::new(blocks, 4096, 0.5, 4096, seed).unwrap();
    let sym = Symbiosis::new(loop_config(m, costs())).unwrap();
    let mut real = TwoTier::new(m, sym.app_target_bytes(), PolicyKind::Lru, page_tier());
    let mut next = blocks_stream(&RequestDist::Uniform, blocks, seed);
    let feed = move |sym: &mut Symbiosis, n: u64| {
        for _ in 0..n {
            let r = layout.block(next());
            let h = real.access(r.file, r.offset, r.compressed_len.into(), 4096);
            if let Some(m_a) =
                sym.record(&r.access(h == crate::TierHit::App, Some(h == crate::TierHit::Second)))
            {
                real.set_app_bytes(m_a);
            }
        }
    };
    (sym, feed)
}

/// The engine re-calibrated its miss costs: a requested round runs once the controller is out
/// of its round, and a request during a round changes nothing.
#[test]
fn requested_round_runs_after_the_current_one_only() {
    let seed = 71;
    println!("seed {seed}");
    let (mut sym, mut feed) = uniform_loop(seed);
    assert_eq!(sym.state(), State::Adapting);
    sym.request_round().unwrap();
    assert_eq!(sym.state(), State::Adapting);
    while sym.rounds().is_empty() {
        feed(&mut sym, 10_000);
    }
    assert_ne!(sym.state(), State::Adapting);
    sym.request_round().unwrap();
    assert_eq!(sym.state(), State::Adapting);
    let mut fed = 0;
    while sym.rounds().len() < 2 && fed < 4_000_000 {
        feed(&mut sym, 10_000);
        fed += 10_000;
    }
    assert_eq!(sym.rounds().len(), 2, "the requested round finished");
}

/// The memory target: a round's ghosts at the paper's R = 1/64 stay under 0.2 % of M, at
/// the small budget the engine benchmarks use (32 MiB, where fixed costs weigh most) and with
/// per-block sampling (the user layout's G = 1, which samples the most distinct blocks).
#[test]
fn ghost_memory_stays_under_two_per_mille_of_m_at_r_1_64() {
    let seed = 0x6057_u64;
    println!("seed {seed:#x}");
    for (tier, g, alpha) in [
        (SecondTier::Blocks, 1, 0.25),
        (SecondTier::Blocks, 1, 0.5),
        (SecondTier::kernel_default(), 32, 0.5),
    ] {
        let m = 32 * MIB;
        let layout = BlockLayout::new(5 * m / 4096, 4096, alpha, 16_384, seed).unwrap();
        let mut cfg = GhostConfig::new(m, MIB, tier);
        cfg.sample_inv_rate = 64;
        cfg.group_blocks = g;
        let mut sim = GhostSim::new(cfg).unwrap();
        let mut next = blocks_stream(&RequestDist::Uniform, layout.blocks(), seed);
        while !sim.is_done() {
            let r = layout.block(next());
            sim.record(&r.access(false, Some(false)));
        }
        let peak = sim.peak_metadata_bytes();
        let share = peak as f64 / m as f64;
        println!(
            "{tier:?} G={g} alpha={alpha}: ghost peak {peak} B = {:.3} % of M",
            share * 100.0
        );
        assert!(share <= 0.002, "{tier:?} G={g}: {peak} B is {share} of M");
        sim.free();
        assert_eq!(sim.metadata_bytes(), 0, "freed after the round");
    }
}

/// The adopted candidate misses its prediction (the real second tier holds 10 % less than the
/// ghost believes, so compressed data that "just fits" at the best candidate overflows in
/// reality); the runner-up, one step smaller, really fits. With the confirmation step the
/// controller tries the runner-up and keeps it; without it, it stays at the adopted size.
#[test]
fn adoption_that_misses_its_prediction_tries_the_runner_up_and_keeps_the_better() {
    let seed = 0xc0f1_u64;
    println!("seed {seed:#x}");
    let m = 32 * MIB;
    // C_k small enough that the overflow at the adopted size does not trip the roll-back rule
    // (its L_e stays below the pre-round one), large enough to miss the prediction by > 15 %.
    let c = MissCosts {
        app_miss_ns: 2_000.0,
        second_miss_ns: 8_000.0,
    };
    // D_u = 46 MiB at α = 0.25: D_c = 11.5 MiB fits the ghost's M − 20 MiB = 12 MiB, not the
    // real 0.9 × 12 = 10.8 MiB; at 16 MiB both fit.
    let blocks = 46 * MIB / 4096;
    let layout = BlockLayout::new(blocks, 4096, 0.25, 4096, seed).unwrap();
    let mut finals = Vec::new();
    for confirm in [true, false] {
        let mut g = GhostConfig::new(m, MIB, SecondTier::Blocks);
        g.sample_inv_rate = 2;
        g.group_blocks = 1;
        let mut cfg = SymbiosisConfig::new(g, c);
        cfg.window_accesses = 16_384;
        if !confirm {
            cfg.confirm_tolerance = None;
        }
        let mut sym = Symbiosis::new(cfg).unwrap();
        let real_second = |m_a: u64| (m - m_a) * 9 / 10;
        let mut real = TwoTier::new(m, 0, PolicyKind::Lru, SecondTier::Blocks);
        real.set_split(MIB, real_second(MIB));
        let mut next = blocks_stream(&RequestDist::Uniform, blocks, seed);
        for _ in 0..3_000_000 {
            let r = layout.block(next());
            let h = real.access(r.file, r.offset, r.compressed_len.into(), 4096);
            let a = r.access(h == crate::TierHit::App, Some(h == crate::TierHit::Second));
            if let Some(m_a) = sym.record(&a) {
                real.set_split(m_a, real_second(m_a));
            }
        }
        let first = &sym.rounds()[0];
        let best = first.best().map(|b| b.0.app_bytes);
        println!(
            "confirm {confirm}: best {best:?}, kept {} (tried {}), {:?}",
            sym.app_target_bytes(),
            first.runner_up_tried,
            sym.stats()
        );
        assert!(first.adopted && !first.reverted, "{first:?}");
        assert_eq!(best, Some(20 * MIB), "the ghost ranks the fit point first");
        assert_eq!(first.runner_up_tried, confirm);
        finals.push(sym.app_target_bytes());
    }
    assert_eq!(finals, vec![16 * MIB, 20 * MIB]);
}

/// One round in three modes on the same trace: side-by-side passes (the default budget) with
/// early stopping, the same with full windows, and the paper's pipeline of one candidate per
/// pass (`ghost_bytes_max = 0`). Returns (samples, warm-up samples, passes, index of the best
/// predicted L_e, peak ghost bytes) each.
fn three_modes(
    layout: &BlockLayout,
    dist: &RequestDist,
    seed: u64,
    cfg: &GhostConfig,
) -> [(u64, u64, u32, usize, usize); 3] {
    let c = costs();
    let early = Some(crate::ghost::EarlyStop {
        app_miss_ns: c.app_miss_ns,
        second_miss_ns: c.second_miss_ns,
    });
    let mut out = [(0, 0, 0, 0, 0); 3];
    let modes = [
        (cfg.ghost_bytes_max, early),
        (cfg.ghost_bytes_max, None),
        (0, None),
    ];
    for (k, (budget, stop)) in modes.into_iter().enumerate() {
        let mut cfg = cfg.clone();
        cfg.ghost_bytes_max = budget;
        cfg.early_stop = stop;
        let g = ghost_round(layout, dist, seed, &cfg);
        let preds = g.predictions();
        let best = (0..preds.len())
            .min_by(|&a, &b| {
                let la = preds[a].expected_latency(c.app_miss_ns, c.second_miss_ns);
                let lb = preds[b].expected_latency(c.app_miss_ns, c.second_miss_ns);
                la.total_cmp(&lb)
            })
            .unwrap_or(0);
        for p in &preds {
            println!(
                "  budget {budget:>7} early {}: M_a {:>4} MiB H_a {:.3} H_k {:.3} L_e {:>7.0}",
                stop.is_some(),
                p.app_bytes / MIB,
                p.h_a,
                p.h_k,
                p.expected_latency(c.app_miss_ns, c.second_miss_ns)
            );
        }
        out[k] = (
            g.samples(),
            g.warmup_samples(),
            g.passes(),
            best,
            g.peak_metadata_bytes(),
        );
        println!(
            "  budget {budget:>7} early {}: {:?}",
            stop.is_some(),
            out[k]
        );
    }
    out
}

/// The convergence target: a round simulates its candidates side by side, so after the
/// warm-up it needs one pass of 1024 + 4096 samples where the paper's pipeline needs nine
/// (4096 + 8 × 5120), and it picks the same split; early stopping ends a one-pass window once
/// the ranking is settled (at >= 1024 measured samples) and still picks the same split.
/// Scenarios: the accuracy scenarios above (kernel layout, M = 128 MiB, at the paper's
/// R = 1/64: at R = 1/16 one ghost alone exceeds 0.2 % of M and rounds fall back to the
/// pipeline) and the engine's user layout at R = 1/64, M = 32 MiB with LZ4-like and
/// Zstd-like compression (α 0.5 and 0.25), where the ghost budget is
/// tightest.
#[test]
fn side_by_side_round_needs_one_pass_and_picks_the_pipelines_split() {
    let dists = [
        RequestDist::Uniform,
        RequestDist::ScrambledZipfian(0.99),
        RequestDist::Hotspot {
            data_fraction: 0.2,
            ops_fraction: 0.8,
        },
    ];
    for (s, dist) in dists.iter().enumerate() {
        let seed = 31 + s as u64;
        println!("seed {seed} dist {dist} kernel layout R=1/64");
        let layout = BlockLayout::new(65_536, 4096, 0.5, 8192, seed).unwrap();
        let mut cfg = GhostConfig::new(128 * MIB, MIB, page_tier());
        cfg.sample_inv_rate = 64;
        cfg.seed = seed;
        let [early, par, seq] = three_modes(&layout, dist, seed, &cfg);
        assert_eq!(early.3, seq.3, "same split chosen with early stopping");
        assert!(early.0 - early.1 <= par.0 - par.1 && early.0 - early.1 >= 1024 + 1024);
        assert_eq!(par.2, 1, "one pass");
        assert_eq!(seq.2, 9, "nine passes");
        assert_eq!(par.0 - par.1, 1024 + 4096);
        assert_eq!(seq.0 - seq.1, 4096 + 8 * 5120);
        assert_eq!(par.3, seq.3, "same split chosen");
        assert!(
            par.4 as f64 <= 0.002 * (128 * MIB) as f64,
            "ghost peak {}",
            par.4
        );
        for alpha in [0.5, 0.25] {
            println!("seed {seed} dist {dist} user layout R=1/64 alpha {alpha}");
            let m = 32 * MIB;
            let layout = BlockLayout::new(2 * m / 4096, 4096, alpha, 16_384, seed).unwrap();
            let mut cfg = GhostConfig::new(m, MIB, SecondTier::Blocks);
            cfg.sample_inv_rate = 64;
            cfg.group_blocks = 1;
            cfg.seed = seed;
            let [early, par, seq] = three_modes(&layout, dist, seed, &cfg);
            assert_eq!(early.3, seq.3, "same split chosen with early stopping");
            assert!(early.0 - early.1 <= par.0 - par.1);
            assert!(par.2 <= 2, "at most two passes, got {}", par.2);
            assert!(par.0 - par.1 <= 2 * 5120, "{par:?}");
            assert_eq!(par.3, seq.3, "same split chosen");
            assert!(par.4 as f64 <= 0.002 * m as f64, "ghost peak {}", par.4);
        }
    }
}

/// The kernel tier under a cgroup limit above the engine's budget: `second_extra_bytes` gives
/// every candidate's page-cache ghost that much more room. A uniform 128 MiB data set (64 MiB
/// compressed) with M = 32 MiB: the tiers sharing M alone miss in the page cache most of the
/// time; with 96 MiB more for the page cache every compressed page fits and the predicted H_k
/// of the mid candidate is close to 1.
#[test]
fn extra_page_cache_room_raises_the_predicted_second_tier_hits() {
    let seed = 7;
    println!("seed {seed}");
    let layout = BlockLayout::new(32_768, 4096, 0.5, 8192, seed).unwrap();
    let mut cfg = GhostConfig::new(32 * MIB, MIB, page_tier());
    cfg.sample_inv_rate = 16;
    cfg.seed = seed;
    let h_k = |extra: u64| {
        let mut c = cfg.clone();
        c.second_extra_bytes = extra;
        let g = ghost_round(&layout, &RequestDist::Uniform, seed, &c);
        g.predictions()[4].h_k
    };
    let (without, with) = (h_k(0), h_k(96 * MIB));
    println!("H_k at M_a = M/2: {without:.3} without, {with:.3} with 96 MiB more");
    assert!(without < 0.6, "{without}");
    assert!(with > 0.9, "{with}");
}

/// Ghost sampling seed of the fit-point tests: one whose per-block sample at R = 1/64 holds more
/// than R of the compressed bytes (the tests assert that it does: the plain ghost predicts
/// H_k < 0.97 at M/2). Seeds 16–24 all do on this layout; 1–15 do not.
const FIT_GHOST_SEED: u64 = 16;

/// The engine sweep's LZ4/hot30/1.0 cell in miniature: D_u = 1.03·M (the engine's 33 MB of
/// values and per-entry charges at M = 32 MiB) at α ≈ 0.5, so that the compressed data needs
/// `margin` less than the second tier of M_a = M/2 (the engine's cell: 16 676 545 B against
/// 16 777 216 B, 0.6 %). Returns the layout.
fn fit_point_layout(seed: u64, margin: f64) -> BlockLayout {
    let m = 32 * MIB;
    let blocks = m / 4096 * 103 / 100;
    let probe = BlockLayout::new(blocks, 4096, 0.5, 1024, seed).unwrap();
    let want = (m / 2) as f64 * (1.0 - margin);
    let alpha = 0.5 * want / probe.compressed_bytes() as f64;
    BlockLayout::new(blocks, 4096, alpha, 1024, seed).unwrap()
}

fn hot30() -> RequestDist {
    RequestDist::Hotspot {
        data_fraction: 0.3,
        ops_fraction: 0.7,
    }
}

/// Engine-like miss costs of the LZ4 cell (C_a 1.5 µs, C_k 43 µs).
fn lz4_cell_costs() -> MissCosts {
    MissCosts {
        app_miss_ns: 1_500.0,
        second_miss_ns: 43_000.0,
    }
}

/// At a fit point the per-block sample (R = 1/64, ~128 of 8192 blocks) puts more or less than
/// R of the compressed bytes into a ghost of capacity R·(M − M_a), so the ghost evicts where the
/// real tier does not (the seed is one where the sample is heavy: the ghost predicts H_k < 0.97
/// at M/2). Told the exact footprint, as the engine's compressed cache knows it when it has not
/// evicted, the round predicts M/2 with no evictions, agrees with exact simulation there, and
/// leaves the candidates that do not fit to the ghost.
#[test]
fn known_second_tier_footprint_resolves_the_fit_point_sampling_cannot() {
    let seed = 0x0f17_u64;
    println!("seed {seed:#x}");
    let m = 32 * MIB;
    let layout = fit_point_layout(seed, 0.006);
    let footprint = layout.compressed_bytes();
    let margin = 1.0 - footprint as f64 / (m / 2) as f64;
    println!("D_c {footprint} B, margin at M/2 {:.3} %", margin * 100.0);
    assert!((0.004..0.008).contains(&margin), "margin {margin}");
    let mut cfg = GhostConfig::new(m, MIB, SecondTier::Blocks);
    cfg.group_blocks = 1;
    cfg.seed = FIT_GHOST_SEED;
    cfg.app_scale = true;
    let c = lz4_cell_costs();
    cfg.early_stop = Some(crate::ghost::EarlyStop {
        app_miss_ns: c.app_miss_ns,
        second_miss_ns: c.second_miss_ns,
    });
    let dist = hot30();
    let mut g = ghost_round(&layout, &dist, seed, &cfg);
    let half = g
        .candidates()
        .iter()
        .position(|&a| a == m / 2)
        .expect("M/2 is a candidate");
    let plain = g.predictions();
    g.set_second_footprint(Some(footprint));
    let told = g.predictions();
    let ex = exact(&layout, &dist, seed, 2_000_000, &cfg);
    println!("application sampling scale {:?}", g.app_sampling_scale());
    let (mut err_plain, mut err_told) = (0.0f64, 0.0f64);
    for (i, (p, t)) in plain.iter().zip(&told).enumerate() {
        err_plain = err_plain.max((p.h_a - ex[i].h_a()).abs());
        err_told = err_told.max((t.h_a - ex[i].h_a()).abs());
        println!(
            "M_a {:>2} MiB: exact H_a {:.3} H_k {:.3}, ghost {:.3} {:.3}, told {:.3} {:.3} \
             (fits {}), L_e {:.0} -> {:.0}",
            p.app_bytes / MIB,
            ex[i].h_a(),
            ex[i].h_k(),
            p.h_a,
            p.h_k,
            t.h_a,
            t.h_k,
            t.second_fits,
            p.expected_latency(c.app_miss_ns, c.second_miss_ns),
            t.expected_latency(c.app_miss_ns, c.second_miss_ns),
        );
        let fits = m - p.app_bytes >= footprint;
        assert_eq!(t.second_fits, fits, "candidate {i}");
        if !fits {
            assert_eq!(
                (p.h_k, p.second_samples),
                (t.h_k, t.second_samples),
                "a candidate that does not fit keeps the ghost's second-tier prediction"
            );
        } else {
            assert!((t.h_k - ex[i].h_k()).abs() < 0.01, "candidate {i}: {t:?}");
        }
    }
    println!("worst |dH_a|: ghost {err_plain:.3}, told (scaled) {err_told:.3}");
    assert!(
        err_told <= err_plain + 0.005,
        "the scale must not worsen H_a"
    );
    assert!(
        ex[half].h_k() > 0.999,
        "the real tier holds everything at M/2"
    );
    assert!(
        plain[half].h_k < 0.97,
        "this seed's sample is heavy: {:?}",
        plain[half]
    );
    let best = |p: &[crate::ghost::CandidatePrediction]| {
        p.iter()
            .min_by(|a, b| {
                let la = a.expected_latency(c.app_miss_ns, c.second_miss_ns);
                let lb = b.expected_latency(c.app_miss_ns, c.second_miss_ns);
                la.total_cmp(&lb)
            })
            .map(|p| p.app_bytes)
    };
    let exact_best = cfg
        .candidates()
        .iter()
        .zip(&ex)
        .min_by(|a, b| {
            let la = a.1.expected_latency(c.app_miss_ns, c.second_miss_ns);
            let lb = b.1.expected_latency(c.app_miss_ns, c.second_miss_ns);
            la.total_cmp(&lb)
        })
        .map(|x| *x.0);
    println!(
        "best: exact {:?} MiB, ghost {:?}, told {:?}",
        exact_best.map(|b| b / MIB),
        best(&plain).map(|b| b / MIB),
        best(&told).map(|b| b / MIB)
    );
    assert_eq!(exact_best, Some(m / 2));
    assert_ne!(
        best(&plain),
        Some(m / 2),
        "without the footprint the round misses it"
    );
    assert_eq!(best(&told), Some(m / 2));
}

/// The same cell in a closed loop: the "engine" reports its second tier's bytes and evictions
/// (an LRU that holds everything read so far evicts once that exceeds its capacity). With the
/// reports the controller adopts M/2; without them (as before), a smaller split. A round whose
/// tier evicted during it gets no footprint.
#[test]
fn controller_told_its_second_tier_footprint_adopts_the_fit_point() {
    let seed = 0x0f17_u64;
    println!("seed {seed:#x}");
    let m = 32 * MIB;
    let layout = fit_point_layout(seed, 0.006);
    let dist = hot30();
    let mut finals = Vec::new();
    for report in [true, false] {
        let mut g = GhostConfig::new(m, MIB, SecondTier::Blocks);
        g.group_blocks = 1;
        g.seed = FIT_GHOST_SEED;
        let mut cfg = SymbiosisConfig::new(g, lz4_cell_costs());
        cfg.window_accesses = 16_384;
        let mut cl = closed_loop(cfg);
        let mut held = std::collections::HashSet::new();
        let (mut held_bytes, mut evictions) = (0u64, 0u64);
        let mut next = blocks_stream(&dist, layout.blocks(), seed);
        for step in 0..3_000_000u64 {
            let b = next();
            let r = layout.block(b);
            if cl.step(&r) == crate::TierHit::Miss && held.insert(b) {
                held_bytes += u64::from(r.compressed_len);
                if held_bytes > m - cl.real.app_bytes() {
                    evictions += 1;
                }
            }
            if report && step % 4096 == 4095 {
                cl.sym.note_second_tier(held_bytes, evictions);
            }
        }
        let r0 = &cl.sym.rounds()[0];
        println!(
            "report {report}: footprint {:?}, adopted {} MiB -> kept {} MiB, rounds {}",
            r0.second_footprint_bytes,
            r0.app_bytes_after / MIB,
            cl.sym.app_target_bytes() / MIB,
            cl.sym.rounds().len()
        );
        assert_eq!(evictions, 0, "the data fits every split up to M/2");
        assert_eq!(r0.second_footprint_bytes.is_some(), report);
        finals.push(cl.sym.app_target_bytes());
    }
    assert_eq!(finals[0], m / 2);
    assert_ne!(finals[1], m / 2);
}

/// Evictions during a round withdraw the footprint: the tier no longer holds everything.
#[test]
fn second_tier_that_evicted_during_the_round_gives_no_footprint() {
    let seed = 0x0f17_u64;
    println!("seed {seed:#x}");
    let m = 32 * MIB;
    let layout = fit_point_layout(seed, 0.006);
    let mut g = GhostConfig::new(m, MIB, SecondTier::Blocks);
    g.group_blocks = 1;
    let mut sym = Symbiosis::new(SymbiosisConfig::new(g, lz4_cell_costs())).unwrap();
    let mut next = blocks_stream(&hot30(), layout.blocks(), seed);
    let mut step = 0u64;
    while sym.rounds().is_empty() {
        let r = layout.block(next());
        sym.record(&r.access(false, Some(true)));
        step += 1;
        if step.is_multiple_of(4096) {
            // One eviction once the round is under way.
            sym.note_second_tier(layout.compressed_bytes(), u64::from(step > 100_000));
        }
        assert!(step < 20_000_000, "round did not finish");
    }
    let r0 = &sym.rounds()[0];
    assert_eq!(r0.second_footprint_bytes, None, "{r0:?}");
    assert!(r0.candidates.iter().all(|c| !c.0.second_fits));
}

/// What LRU caches of `app_bytes` (uncompressed) and `second_bytes` (compressed, fed by
/// application misses) hold after `prefix` accesses, oldest first — the engine's live caches
/// that a round is warm-started from. Computed exactly by replaying the prefix.
fn live_caches(
    layout: &BlockLayout,
    dist: &RequestDist,
    seed: u64,
    prefix: u64,
    app_bytes: u64,
    second_bytes: u64,
) -> (Vec<crate::BlockAccess>, Vec<crate::BlockAccess>) {
    let mut real = TwoTier::new(
        app_bytes + second_bytes,
        app_bytes,
        PolicyKind::Lru,
        SecondTier::Blocks,
    );
    let mut next = blocks_stream(dist, layout.blocks(), seed);
    let mut last_any = std::collections::HashMap::new();
    let mut last_miss = std::collections::HashMap::new();
    for t in 0..prefix {
        let b = next();
        let r = layout.block(b);
        let h = real.access(
            r.file,
            r.offset,
            r.compressed_len.into(),
            r.uncompressed_len.into(),
        );
        last_any.insert(b, t);
        if h != crate::TierHit::App {
            last_miss.insert(b, t);
        }
    }
    // Newest first until the capacity is used: an LRU's contents.
    let resident =
        |last: &std::collections::HashMap<u64, u64>, cap: u64, size: &dyn Fn(u64) -> u64| {
            let mut v: Vec<(u64, u64)> = last.iter().map(|(&b, &t)| (t, b)).collect();
            v.sort_unstable_by(|a, b| b.cmp(a));
            let mut used = 0;
            let mut out = Vec::new();
            for (_, b) in v {
                used += size(b);
                if used > cap {
                    break;
                }
                out.push(layout.block(b).access(false, None));
            }
            out.reverse();
            out
        };
    let app = resident(&last_any, app_bytes, &|b| {
        u64::from(layout.block(b).uncompressed_len)
    });
    let second = resident(&last_miss, second_bytes, &|b| {
        u64::from(layout.block(b).compressed_len)
    });
    (second, app)
}

/// A round warm-started from the live caches (the engine hands over their sampled contents)
/// ends its initial warm-up at the first check, 1024 sampled accesses, where the cold round
/// needs several times more, and predicts the same best split with hit ratios close to the
/// cold round's.
#[test]
fn warm_started_round_skips_the_warm_up_and_predicts_alike() {
    let seed = 0x3a11_u64;
    println!("seed {seed:#x}");
    let m = 32 * MIB;
    let layout = BlockLayout::new(2 * m / 4096, 4096, 0.25, 1024, seed).unwrap();
    let dist = RequestDist::Hotspot {
        data_fraction: 0.2,
        ops_fraction: 0.8,
    };
    let mut cfg = GhostConfig::new(m, MIB, SecondTier::Blocks);
    cfg.group_blocks = 1;
    cfg.sample_inv_rate = 16;
    cfg.ghost_bytes_max = u64::MAX;
    let c = costs();
    let prefix = 1_000_000;
    let (second, app) = live_caches(&layout, &dist, seed, prefix, MIB, m - MIB);
    let mut rounds = Vec::new();
    for warm in [false, true] {
        let mut g = GhostSim::new(cfg.clone()).unwrap();
        assert!(g.wants_warm_start());
        let fed = if warm { g.warm_start(&second, &app) } else { 0 };
        assert!(!warm || !g.wants_warm_start(), "taken once");
        // The stream continues where the caches were filled.
        let mut next = blocks_stream(&dist, layout.blocks(), seed);
        for _ in 0..prefix {
            next();
        }
        while !g.is_done() {
            g.record(&layout.block(next()).access(false, None));
        }
        let p = g.predictions();
        let best = (0..p.len())
            .min_by(|&a, &b| {
                let la = p[a].expected_latency(c.app_miss_ns, c.second_miss_ns);
                let lb = p[b].expected_latency(c.app_miss_ns, c.second_miss_ns);
                la.total_cmp(&lb)
            })
            .unwrap();
        println!(
            "warm {warm}: fed {fed}, warm-up {} samples, total {}, best {} MiB, H_k {:?}",
            g.warmup_samples(),
            g.samples(),
            p[best].app_bytes / MIB,
            p.iter()
                .map(|x| (x.h_k * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>()
        );
        assert_eq!(g.warm_started(), warm.then_some(fed));
        rounds.push((g.warmup_samples(), best, p));
    }
    let (cold, warm) = (&rounds[0], &rounds[1]);
    assert!(
        warm.0 == 1024,
        "warm-started warm-up ends at the first check: {}",
        warm.0
    );
    assert!(cold.0 >= 3 * warm.0, "cold warm-up {}", cold.0);
    assert_eq!(cold.1, warm.1, "same best split");
    for (a, b) in cold.2.iter().zip(&warm.2) {
        assert!(
            (a.h_a - b.h_a).abs() < 0.05 && (a.h_k - b.h_k).abs() < 0.05,
            "{a:?} {b:?}"
        );
    }
}

/// The engine sweep's Zstd/hot10/0.6 cell, as the controller sees it: the engine's second
/// tier has evicted nothing, but what it holds keeps growing while the round measures (a
/// hotspot's cold blocks are still being read for the first time). Here the reports grow by
/// 2 bytes per access from the end of the warm-up on. A candidate whose room holds the round's
/// footprint but not its growth over one more round's length is not adopted; candidates with
/// more room, or whose room is below the footprint (left to their ghosts), are not affected.
#[test]
fn candidate_that_the_growing_footprint_would_overflow_is_not_adopted() {
    let seed = 0x6107_u64;
    println!("seed {seed:#x}");
    let m = 32 * MIB;
    let layout = fit_point_layout(seed, 0.006);
    let dist = hot30();
    let mut g = GhostConfig::new(m, MIB, SecondTier::Blocks);
    g.group_blocks = 1;
    g.seed = FIT_GHOST_SEED;
    let mut sym = Symbiosis::new(SymbiosisConfig::new(g, lz4_cell_costs())).unwrap();
    // Before the round measures, the tier holds 15.5 MiB; then it grows by 2 B per access.
    let base = 31 * MIB / 2;
    let mut next = blocks_stream(&dist, layout.blocks(), seed);
    let (mut step, mut measuring_from) = (0u64, None);
    while sym.rounds().is_empty() {
        let r = layout.block(next());
        sym.record(&r.access(false, Some(true)));
        step += 1;
        let measuring = !matches!(
            sym.stats().round_progress,
            Some(crate::ghost::RoundProgress::Warmup)
        );
        if measuring && measuring_from.is_none() {
            measuring_from = Some(step);
        }
        if step.is_multiple_of(1024) {
            let grown = measuring_from.map_or(0, |s0| 2 * (step - s0));
            sym.note_second_tier(base + grown, 0);
        }
        assert!(step < 20_000_000, "round did not finish");
    }
    let r0 = &sym.rounds()[0];
    let f = r0.second_footprint_bytes.expect("no evictions");
    let measured = step - measuring_from.unwrap();
    let growth = 2.0 * r0.accesses as f64;
    println!(
        "footprint {f} B after {measured} measured of {} round accesses, projected growth \
         {growth:.0} B, overflow {:?}, adopted {} MiB",
        r0.accesses,
        r0.overflow_app_bytes,
        r0.app_bytes_after / MIB
    );
    let want: Vec<u64> = r0
        .candidates
        .iter()
        .map(|c| c.0.app_bytes)
        .filter(|&a| {
            let room = m - a;
            room >= f && ((room - f) as f64) < growth
        })
        .collect();
    assert_eq!(
        want,
        vec![16 * MIB],
        "the test's numbers put only M/2 in the band"
    );
    assert_eq!(r0.overflow_app_bytes, want);
    assert_ne!(
        r0.app_bytes_after,
        16 * MIB,
        "M/2 would be the best fit, but it is not adopted"
    );
}

/// A deterministic stream of accesses to `blocks` blocks of one file, every one an application
/// miss served by the second tier (constant L_e: the Tracker never restarts a round).
fn flat_access(b: u64) -> crate::BlockAccess {
    crate::BlockAccess {
        file: 1,
        block_no: b,
        offset: b * 2048,
        compressed_len: 2048,
        uncompressed_len: 4096,
        app_hit: false,
        second_hit: Some(true),
        latency_ns: None,
    }
}

#[test]
fn held_round_ignores_accesses_and_resumes_with_the_same_predictions() {
    let seed = 0x5eed_0707u64;
    println!("seed {seed:#x}");
    let cfg = loop_config(4 * MIB, costs());
    let mut plain = Symbiosis::new(cfg.clone()).unwrap();
    let mut held = Symbiosis::new(cfg).unwrap();
    let mut next = blocks_stream(&hot30(), 4096, seed);
    let mut other = blocks_stream(&RequestDist::Uniform, 4096, seed ^ 1);
    let mut steps = 0u64;
    while plain.rounds().is_empty() && steps < 2_000_000 {
        if steps == 20_000 {
            // 30 000 accesses to other blocks that only the held controller records.
            held.hold_round(true);
            assert!(held.round_held());
            for _ in 0..30_000 {
                held.record(&flat_access(8192 + other()));
            }
            held.hold_round(false);
        }
        let a = flat_access(next());
        plain.record(&a);
        held.record(&a);
        steps += 1;
    }
    let (p, h) = (&plain.rounds()[0], &held.rounds()[0]);
    println!("round of {} accesses, {} samples", p.accesses, p.samples);
    assert_eq!(held.rounds().len(), 1);
    assert_eq!(h.samples, p.samples, "the held accesses reached the round");
    assert_eq!(h.accesses, p.accesses + 30_000, "the Tracker counted them");
    assert_eq!(h.candidates, p.candidates, "same predictions");
    assert_eq!(held.stats().accesses, plain.stats().accesses + 30_000);
}

#[test]
fn observe_only_controller_reports_rounds_but_never_moves_m_a() {
    // The scenario of `adaptation_picks_all_application_when_data_fits_uncompressed`: an
    // adopting controller leaves the minimum; an observing one predicts the same and stays.
    let seed = 21u64;
    println!("seed {seed}");
    let m = 32 * MIB;
    let blocks = (0.5 * m as f64 / 4096.0) as u64;
    let layout = BlockLayout::new(blocks, 4096, 0.5, 4096, seed).unwrap();
    let run = |adopt: bool| {
        let mut cfg = loop_config(m, costs());
        cfg.adopt = adopt;
        let mut cl = closed_loop(cfg);
        let mut next = blocks_stream(&RequestDist::Uniform, blocks, seed);
        for _ in 0..1_000_000 {
            cl.step(&layout.block(next()));
        }
        cl
    };
    let (adopting, observing) = (run(true), run(false));
    let min = observing.sym.config().ghost.app_min_bytes;
    assert!(
        adopting.sym.app_target_bytes() > min,
        "the adopting run moved"
    );
    let first = |cl: &ClosedLoop| cl.sym.rounds()[0].candidates.clone();
    assert_eq!(first(&adopting), first(&observing), "same first round");
    assert!(!observing.sym.rounds().is_empty());
    assert!(observing
        .sym
        .rounds()
        .iter()
        .all(|r| !r.adopted && !r.reset));
    assert_eq!(observing.sym.app_target_bytes(), min);
    assert_eq!(observing.sym.stats().adoptions, 0);
}

/// The engine sweep's Zstd M/D_u 1.0 cells in miniature: D_u = 1.03·M (the data does not quite fit
/// M_a = M), α ≈ 0.22 (the compressed data, 7.5 MB, fits the second tier of M_a = 24 MiB),
/// hot10, Zstd-like costs (C_a 2 µs, C_k 45 µs), R = 1/64, per-block sampling.
fn app_fit_point() -> (BlockLayout, RequestDist, MissCosts, u64) {
    let seed = 0xa9f1_u64;
    let m = 32 * MIB;
    let layout = BlockLayout::new(m / 4096 * 103 / 100, 4096, 0.218, 1024, seed).unwrap();
    let dist = RequestDist::Hotspot {
        data_fraction: 0.1,
        ops_fraction: 0.9,
    };
    let costs = MissCosts {
        app_miss_ns: 2_000.0,
        second_miss_ns: 45_000.0,
    };
    (layout, dist, costs, seed)
}

/// Over 40 ghost seeds (each a different per-block sample of the same data and stream), the
/// exact best split is 24 MiB and M_a = M costs 2.5× as much. Sampling puts R·(0.91 … 1.25) of
/// the data into the ghost, so a ghost of R·M_a stands for a different share of the data than
/// M_a does; told the exact compressed footprint, the round scales its application thresholds
/// by the realised share (`GhostSim::app_sampling_scale`). Its choices must be better on
/// average (exact L_e of the best over that of the choice) and pick M no more often; its H_a
/// must be no further from the exact one on average.
#[test]
fn realised_sampling_share_resolves_the_application_fit_point() {
    let (layout, dist, c, seed) = app_fit_point();
    println!("seed {seed:#x}, ghost seeds 0..40");
    let m = 32 * MIB;
    let mut base = GhostConfig::new(m, MIB, SecondTier::Blocks);
    base.group_blocks = 1;
    base.app_scale = true;
    base.early_stop = Some(crate::ghost::EarlyStop {
        app_miss_ns: c.app_miss_ns,
        second_miss_ns: c.second_miss_ns,
    });
    let cands = base.candidates();
    let ex = exact(&layout, &dist, seed, 2_000_000, &base);
    let ex_le: Vec<f64> = ex
        .iter()
        .map(|e| e.expected_latency(c.app_miss_ns, c.second_miss_ns))
        .collect();
    let best_le = ex_le.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(ex_le[6], best_le, "24 MiB is the exact best: {ex_le:?}");
    assert!(ex_le[8] > 2.0 * best_le, "M_a = M is much worse: {ex_le:?}");
    let choice = |p: &[crate::ghost::CandidatePrediction]| {
        (0..p.len())
            .min_by(|&a, &b| {
                let l = |i: usize| p[i].expected_latency(c.app_miss_ns, c.second_miss_ns);
                l(a).total_cmp(&l(b))
            })
            .unwrap()
    };
    let (mut q_plain, mut q_told, mut m_plain, mut m_told) = (0.0, 0.0, 0, 0);
    let (mut err_plain, mut err_told) = (0.0, 0.0);
    for gs in 0..40u64 {
        let mut cfg = base.clone();
        cfg.seed = gs;
        let mut g = ghost_round(&layout, &dist, seed, &cfg);
        let plain = g.predictions();
        g.set_second_footprint(Some(layout.compressed_bytes()));
        let told = g.predictions();
        let (a, b) = (choice(&plain), choice(&told));
        println!(
            "ghost seed {gs}: scale {:.3}, choice {} -> {} MiB, H_a(M) {:.4} -> {:.4} \
             (exact {:.4})",
            g.app_sampling_scale().unwrap(),
            cands[a] / MIB,
            cands[b] / MIB,
            plain[8].h_a,
            told[8].h_a,
            ex[8].h_a()
        );
        q_plain += best_le / ex_le[a] / 40.0;
        q_told += best_le / ex_le[b] / 40.0;
        m_plain += usize::from(a == 8);
        m_told += usize::from(b == 8);
        for i in 0..cands.len() {
            err_plain += (plain[i].h_a - ex[i].h_a()).abs() / 360.0;
            err_told += (told[i].h_a - ex[i].h_a()).abs() / 360.0;
        }
    }
    println!(
        "mean best/chosen (exact L_e): ghost {q_plain:.3}, scaled {q_told:.3}; M chosen \
         {m_plain} -> {m_told} of 40; mean |H_a - exact| {err_plain:.4} -> {err_told:.4}"
    );
    assert!(q_told >= q_plain + 0.05, "{q_plain} -> {q_told}");
    assert!(m_told <= m_plain, "{m_plain} -> {m_told}");
    assert!(err_told <= err_plain, "{err_plain} -> {err_told}");
}

/// A candidate without any second tier (M_a = M, no extra room) predicts H_k = 0 even when
/// its measurement window sampled no application miss (it used to read H_k = 1 then: an H_a
/// just under 1 gave L_e ≈ 0).
#[test]
fn candidate_without_second_tier_never_predicts_second_tier_hits() {
    let (layout, dist, _, seed) = app_fit_point();
    println!("seed {seed:#x}");
    let mut cfg = GhostConfig::new(32 * MIB, MIB, SecondTier::Blocks);
    cfg.group_blocks = 1;
    // Ghost seed 1: the window of M_a = M sampled no application miss.
    cfg.seed = 1;
    cfg.early_stop = Some(crate::ghost::EarlyStop {
        app_miss_ns: 2_000.0,
        second_miss_ns: 45_000.0,
    });
    let g = ghost_round(&layout, &dist, seed, &cfg);
    let p = g.predictions();
    let last = p.last().unwrap();
    println!("{last:?}");
    assert_eq!(last.app_bytes, 32 * MIB);
    assert_eq!(
        last.second_samples, 0,
        "this seed's window sampled no miss at M"
    );
    assert!(last.h_a < 1.0);
    assert_eq!(last.h_k, 0.0);
    assert!(p[..p.len() - 1].iter().all(|x| x.h_k > 0.0));
}

/// Runs the controller in a closed loop over `layout` with the "engine" reporting its second
/// tier (every block read so far, evicting once that exceeds its share), as
/// `controller_told_its_second_tier_footprint_adopts_the_fit_point` does; returns the first
/// round's report.
fn first_round_told(
    layout: &BlockLayout,
    dist: &RequestDist,
    costs: MissCosts,
    seed: u64,
    ghost_seed: u64,
) -> crate::tracker::RoundReport {
    let m = 32 * MIB;
    let mut g = GhostConfig::new(m, MIB, SecondTier::Blocks);
    g.group_blocks = 1;
    g.seed = ghost_seed;
    let mut cfg = SymbiosisConfig::new(g, costs);
    cfg.window_accesses = 16_384;
    let mut cl = closed_loop(cfg);
    let mut held = std::collections::HashSet::new();
    let (mut held_bytes, mut evictions) = (0u64, 0u64);
    let mut next = blocks_stream(dist, layout.blocks(), seed);
    let mut step = 0u64;
    while cl.sym.rounds().is_empty() {
        let b = next();
        let r = layout.block(b);
        if cl.step(&r) == crate::TierHit::Miss && held.insert(b) {
            held_bytes += u64::from(r.compressed_len);
            if held_bytes > m - cl.real.app_bytes() {
                evictions += 1;
            }
        }
        if step % 4096 == 4095 {
            cl.sym.note_second_tier(held_bytes, evictions);
        }
        step += 1;
        assert!(step < 20_000_000, "no round finished");
    }
    cl.sym.rounds()[0].clone()
}

/// At the application tier's fit point (D_u = 1.03·M) M_a = M has no second tier and the data
/// does not fit it: the round estimates the uncompressed footprint from the exact compressed
/// one and leaves M out of the adoption; with D_u = 0.8·M the data fits M with room to spare
/// and M stays adoptable.
#[test]
fn all_of_m_without_room_for_the_footprint_is_not_adopted() {
    let (layout, dist, costs, seed) = app_fit_point();
    println!("seed {seed:#x}");
    let m = 32 * MIB;
    let d_u = layout.uncompressed_bytes();
    for ghost_seed in [2u64, 6, 12] {
        let r = first_round_told(&layout, &dist, costs, seed, ghost_seed);
        let f = r
            .app_footprint_bytes
            .expect("footprint known: the tier never evicted");
        println!(
            "ghost seed {ghost_seed}: footprint estimate {f} B (D_u {d_u}), excluded {:?}, \
             kept {} MiB, best predicted {} MiB",
            r.app_fit_excluded,
            r.app_bytes_after / MIB,
            r.best().unwrap().0.app_bytes / MIB
        );
        assert!(
            (f as f64 / d_u as f64 - 1.0).abs() < 0.10,
            "estimate {f} vs {d_u}"
        );
        assert_eq!(r.app_fit_excluded, vec![m]);
        assert_ne!(r.app_bytes_after, m);
    }
    let small = BlockLayout::new(m / 4096 * 8 / 10, 4096, 0.218, 1024, seed).unwrap();
    let r = first_round_told(&small, &dist, costs, seed, 2);
    println!(
        "D_u 0.8 M: footprint estimate {:?}, excluded {:?}, kept {} MiB",
        r.app_footprint_bytes,
        r.app_fit_excluded,
        r.app_bytes_after / MIB
    );
    assert!(r.app_footprint_bytes.is_some());
    assert!(r.app_fit_excluded.is_empty());
}

/// A measured page-cache room (`Symbiosis::set_second_extra_bytes`) reaches the next round, never
/// the running one: the running round's ghosts were sized for the room it started with, and its
/// adoption rules must use that same room. Without a round it applies at once.
#[test]
fn measured_second_tier_room_applies_at_open_or_from_the_next_round() {
    let seed = 73;
    println!("seed {seed}");
    let (mut sym, mut feed) = uniform_loop(seed);
    // Before the first access the round at open is rebuilt with the value at once.
    sym.set_second_extra_bytes(2 * MIB);
    assert_eq!(sym.config().ghost.second_extra_bytes, 2 * MIB);
    sym.set_second_extra_bytes(0);
    assert_eq!(sym.config().ghost.second_extra_bytes, 0);
    // Once the round at open has simulated accesses, the value waits.
    feed(&mut sym, 10_000);
    assert_eq!(sym.state(), State::Adapting);
    sym.set_second_extra_bytes(8 * MIB);
    assert_eq!(sym.config().ghost.second_extra_bytes, 0);
    let mut fed = 10_000;
    while sym.rounds().is_empty() && fed < 4_000_000 {
        feed(&mut sym, 10_000);
        fed += 10_000;
    }
    assert_eq!(sym.rounds().len(), 1, "the round at open finished");
    assert_eq!(sym.config().ghost.second_extra_bytes, 0);
    // The next round starts with it.
    sym.request_round().unwrap();
    assert_eq!(sym.state(), State::Adapting);
    assert_eq!(sym.config().ghost.second_extra_bytes, 8 * MIB);
    // A value set while this round runs waits again.
    sym.set_second_extra_bytes(4 * MIB);
    assert_eq!(sym.config().ghost.second_extra_bytes, 8 * MIB);
}
