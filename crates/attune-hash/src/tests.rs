//! Scenario tests of the VIP table: agreement with `std::collections::HashMap` under random
//! operation sequences with learning on (across rehashes), convergence of small chains to
//! popularity order, and sensing that fires on a shifted distribution but not on a stable one.
//! Randomized tests print their seed; `ATTUNE_HASH_SEED=<n>` replays one seed.

use std::collections::HashMap;

use crate::{Phase, Schedule, VipConfig, VipMap};

/// SplitMix64: a tiny seeded generator for random operation sequences (the sensing tests and the
/// benchmark draw their zipf streams from attune-workload).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Samples index `i` with probability `weights[i] / sum` (inverse CDF by binary search).
struct Discrete {
    cdf: Vec<f64>,
}

impl Discrete {
    fn new(weights: &[f64]) -> Self {
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Discrete { cdf }
    }
    fn sample(&self, rng: &mut SplitMix) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

fn seeds() -> Vec<u64> {
    match std::env::var("ATTUNE_HASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(s) => vec![s],
        None => (1..=12).collect(),
    }
}

/// A schedule that cycles quickly so that learning, sensing and relearning all happen within a
/// few thousand operations.
fn busy_config() -> VipConfig {
    VipConfig {
        schedule: Schedule::Adaptive,
        learn_factor: 2.0,
        default_factor: 1,
        sense_fetches: 16,
        ..VipConfig::default()
    }
}

#[test]
fn random_operations_agree_with_std_hashmap_while_learning_and_rehashing() {
    for seed in seeds() {
        println!("seed {seed}");
        let mut rng = SplitMix(seed);
        // Even seeds learn on every fetch; odd seeds run a fast-cycling adaptive schedule.
        let always = VipConfig {
            schedule: Schedule::LearnOnce(u64::MAX),
            ..busy_config()
        };
        let config = if seed % 2 == 0 { always } else { busy_config() };
        let mut vip: VipMap<u64, u64> = VipMap::new(config).expect("config");
        let mut model: HashMap<u64, u64> = HashMap::new();
        let mut phases_seen = std::collections::HashSet::new();
        // Three eras: growing (many inserts), churning, shrinking (many removes), so the table
        // doubles and halves several times while learning is active.
        for (era, (p_ins, p_rem)) in [(0.6, 0.1), (0.3, 0.3), (0.05, 0.6)].iter().enumerate() {
            for step in 0..6000 {
                // Keys from a small skewed universe so fetches hit and chains get reordered.
                let key = rng.below(3000).min(rng.below(3000));
                let r = rng.unit();
                if r < *p_ins {
                    let v = rng.next();
                    assert_eq!(vip.insert(key, v), model.insert(key, v), "seed {seed} ins");
                } else if r < p_ins + p_rem {
                    assert_eq!(vip.remove(&key), model.remove(&key), "seed {seed} rem");
                } else {
                    assert_eq!(vip.get(&key), model.get(&key), "seed {seed} get");
                }
                phases_seen.insert(vip.phase());
                assert_eq!(vip.len(), model.len(), "seed {seed} era {era} step {step}");
                if step % 500 == 0 {
                    vip.check_invariants()
                        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                }
            }
        }
        vip.check_invariants()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for (k, v) in &model {
            assert_eq!(vip.peek(k), Some(v), "seed {seed}");
        }
        assert_eq!(vip.iter().count(), model.len());
        let st = vip.stats();
        assert!(
            st.rehashes >= 4,
            "seed {seed}: only {} rehashes",
            st.rehashes
        );
        if seed % 2 == 0 {
            assert!(st.swaps > 100, "seed {seed}: {st:?}");
        } else {
            assert!(st.sense_checks > 0, "seed {seed}: {st:?}");
            assert!(phases_seen.contains(&Phase::Learn) && phases_seen.contains(&Phase::Default));
        }
    }
}

#[test]
fn generic_string_keys_agree_with_std_hashmap() {
    for seed in seeds() {
        println!("seed {seed}");
        let mut rng = SplitMix(seed ^ 0x5555);
        let mut vip: VipMap<String, usize> = VipMap::new(busy_config()).expect("config");
        let mut model: HashMap<String, usize> = HashMap::new();
        for i in 0..8000usize {
            let key = format!("key-{}", rng.below(700));
            match rng.below(3) {
                0 => assert_eq!(vip.insert(key.clone(), i), model.insert(key, i)),
                1 => assert_eq!(vip.remove(key.as_str()), model.remove(&key)),
                _ => assert_eq!(vip.get(key.as_str()), model.get(&key), "seed {seed}"),
            }
        }
        vip.check_invariants()
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(vip.len(), model.len());
    }
}

#[test]
fn learning_sorts_small_chains_into_popularity_order() {
    let seed = 7;
    println!("seed {seed}");
    let mut rng = SplitMix(seed);
    // 24 keys in 16 buckets (load factor 1.5); popularity halves from rank to rank so that
    // counts separate quickly. Keys are inserted in a random order.
    let n = 24usize;
    let mut keys: Vec<u64> = (0..n as u64).map(|i| i * 1_000_003 + 11).collect();
    for i in (1..n).rev() {
        keys.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let popularity: HashMap<u64, usize> = keys.iter().enumerate().map(|(r, &k)| (k, r)).collect();
    let mut insert_order = keys.clone();
    for i in (1..n).rev() {
        insert_order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let config = VipConfig {
        schedule: Schedule::LearnOnce(u64::MAX),
        ..VipConfig::default()
    };
    let mut m: VipMap<u64, u64> = VipMap::with_buckets(16, config).expect("config");
    for &k in &insert_order {
        m.insert(k, k);
    }
    let weights: Vec<f64> = (0..n).map(|r| 0.7f64.powi(r as i32)).collect();
    let dist = Discrete::new(&weights);
    let unsorted_before = (0..16).any(|b| !is_sorted_by_rank(&m.chain(b), &popularity));
    assert!(
        unsorted_before,
        "the random insert order should leave some chain out of order"
    );
    for _ in 0..400_000 {
        let k = keys[dist.sample(&mut rng)];
        assert_eq!(m.get(&k), Some(&k));
    }
    for b in 0..16 {
        let chain = m.chain(b);
        assert!(
            is_sorted_by_rank(&chain, &popularity),
            "bucket {b}: {chain:?}"
        );
    }
    assert!(m.stats().swaps > 0);
    m.check_invariants().expect("invariants");
}

fn is_sorted_by_rank(chain: &[&u64], rank: &HashMap<u64, usize>) -> bool {
    chain.windows(2).all(|w| rank[w[0]] < rank[w[1]])
}

/// A table of 1536 keys in 1024 buckets (load factor 1.5) under the chapter's schedule
/// (N_L = 1536, N_D = 92160, N_S = 1000), fed `fetches` zipf(1) fetches from attune-workload's
/// Wiscer; with `shift_every`, the keys taking half of the requests swap ranks with random less
/// popular keys every that many fetches.
fn run_sensing(seed: u64, fetches: u64, shift_every: Option<u64>) -> VipMap<u64, u64> {
    use attune_workload::wiscer::WiscerConfig;
    println!("seed {seed}");
    let cfg = WiscerConfig {
        zipf: 1.0,
        initial_size: 1536,
        operation_count: fetches,
        dist_shift_freq: shift_every.unwrap_or(0),
        dist_shift_prct: if shift_every.is_some() { 50.0 } else { 0.0 },
        seed,
        ..WiscerConfig::default()
    };
    let mut m: VipMap<u64, u64> = VipMap::with_buckets(1024, VipConfig::default()).expect("config");
    for op in cfg.load().expect("wiscer") {
        m.insert(op.key(), 1);
    }
    for op in cfg.run().expect("wiscer") {
        assert!(m.get(&op.key()).is_some());
    }
    m
}

#[test]
fn sensing_stays_quiet_on_a_stable_distribution() {
    // N_L = 1536, N_D = 92160: 1.5M fetches are about 15 sense checks.
    let m = run_sensing(11, 1_500_000, None);
    let st = m.stats();
    assert!(st.sense_checks >= 10, "{st:?}");
    assert_eq!(st.relearns, 0, "{st:?}");
    assert_eq!(st.learn_phases, 1);
}

#[test]
fn sensing_relearns_after_the_popularity_shifts() {
    let m = run_sensing(11, 1_500_000, Some(400_000));
    assert!(m.stats().learn_phases >= 2);
    let st = m.stats();
    println!("{st:?} {:?} {:?}", m.baseline_gamma(), m.last_gamma());
    assert!(st.relearns >= 1, "{st:?}");
}

#[test]
fn chained_mode_never_learns_or_swaps() {
    let mut m: VipMap<u64, u64> = VipMap::new(VipConfig::chained()).expect("config");
    for k in 0..5000 {
        m.insert(k, k);
    }
    for i in 0..200_000u64 {
        assert_eq!(m.get(&(i % 7)), Some(&(i % 7)));
    }
    let st = m.stats();
    assert_eq!((st.learn_phases, st.swaps, st.learn_fetches), (0, 0, 0));
    assert_eq!(m.phase(), Phase::Default);
}

#[test]
fn count_table_is_freed_after_learning() {
    let config = VipConfig {
        schedule: Schedule::LearnOnce(100),
        ..VipConfig::default()
    };
    let mut m: VipMap<u64, u64> = VipMap::new(config).expect("config");
    for k in 0..1000 {
        m.insert(k, k);
    }
    let during = m.heap_bytes();
    for k in 0..100 {
        m.get(&k);
    }
    m.get(&0);
    assert_eq!(m.phase(), Phase::Default);
    assert!(m.heap_bytes() < during, "{} !< {during}", m.heap_bytes());
    m.check_invariants().expect("invariants");
}

#[test]
fn rehash_preserves_the_learned_order_within_chains() {
    let config = VipConfig {
        schedule: Schedule::LearnOnce(u64::MAX),
        ..VipConfig::default()
    };
    let mut m: VipMap<u64, u64> = VipMap::with_buckets(16, config).expect("config");
    for k in 0..24u64 {
        m.insert(k, k);
    }
    // Make key 0..24 popularity decreasing by fetching key k (24 - k) * 20 times, interleaved.
    for round in 0..480u64 {
        for k in 0..24u64 {
            if round < (24 - k) * 20 {
                m.get(&k);
            }
        }
    }
    let before: Vec<Vec<u64>> = (0..16)
        .map(|b| m.chain(b).into_iter().copied().collect())
        .collect();
    for k in 1000..1020u64 {
        m.insert(k, k); // pushes past load factor 1.5: doubles to 32 buckets
    }
    assert_eq!(m.buckets(), 32);
    for old in before {
        // Each old chain's keys keep their relative order in whichever new chain they land.
        for b in 0..32 {
            let chain: Vec<u64> = m
                .chain(b)
                .into_iter()
                .copied()
                .filter(|k| *k < 1000)
                .collect();
            let sub: Vec<u64> = old.iter().copied().filter(|k| chain.contains(k)).collect();
            let pos: Vec<usize> = sub
                .iter()
                .filter_map(|k| chain.iter().position(|c| c == k))
                .collect();
            assert!(
                pos.windows(2).all(|w| w[0] < w[1]),
                "order lost: {old:?} vs {chain:?}"
            );
        }
    }
}

#[test]
fn with_capacity_accepts_any_capacity() {
    for cap in [0usize, 1, 15, 16, 17, 1000, 1 << 20] {
        let m = VipMap::<u64, u64>::with_capacity(cap, VipConfig::default());
        let m = m.unwrap_or_else(|e| panic!("capacity {cap}: {e}"));
        assert!(m.buckets() >= 16 && m.buckets() >= cap, "capacity {cap}");
    }
}

#[test]
fn bad_bucket_counts_are_rejected() {
    for b in [0usize, 3, 8, 100] {
        assert!(
            VipMap::<u64, u64>::with_buckets(b, VipConfig::default()).is_err(),
            "{b}"
        );
    }
}

#[test]
fn gathering_hot_entries_moves_them_to_the_arena_front_and_keeps_every_chain() {
    let n = crate::map::GATHER_MIN_ENTRIES as u64 + 4000;
    let config = VipConfig {
        schedule: Schedule::LearnOnce(1200),
        ..VipConfig::default()
    };
    let mut m: VipMap<u64, u64> = VipMap::new(config).expect("config");
    for k in 0..n {
        m.insert(k * 7919, k);
    }
    let hot = 4242 * 7919;
    let chains_before: Vec<Vec<u64>> = (0..m.buckets())
        .map(|b| m.chain(b).into_iter().copied().collect())
        .collect();
    // 1100 fetches of one key and one fetch each of 100 others, then the phase ends.
    for i in 0..1100u64 {
        assert_eq!(m.get(&hot), Some(&4242));
        if i < 100 {
            assert_eq!(m.get(&(i * 7919)), Some(&i));
        }
    }
    m.get(&hot);
    assert_eq!(m.phase(), Phase::Default);
    assert_eq!(m.stats().gathers, 1);
    m.check_invariants().expect("invariants");
    let front: Vec<u64> = m.iter().take(101).map(|(k, _)| *k).collect();
    assert_eq!(front[0], hot, "the most requested entry comes first");
    let mut rest = front[1..].to_vec();
    rest.sort_unstable();
    let want: Vec<u64> = (0..100u64).map(|i| i * 7919).collect();
    assert_eq!(rest, want, "then the other requested entries");
    // Learning swapped contents inside chains; gathering must not change any chain again.
    let after: Vec<Vec<u64>> = (0..m.buckets())
        .map(|b| m.chain(b).into_iter().copied().collect())
        .collect();
    for (b, (x, y)) in chains_before.iter().zip(&after).enumerate() {
        let (mut xs, mut ys) = (x.clone(), y.clone());
        xs.sort_unstable();
        ys.sort_unstable();
        assert_eq!(xs, ys, "bucket {b} holds other keys");
    }
    assert_eq!(m.displacement(&hot), Some(1));
    for k in 0..n {
        assert_eq!(m.peek(&(k * 7919)), Some(&k));
    }
    // Later removes and inserts keep working on the renumbered arena.
    for k in (0..n).step_by(3) {
        assert_eq!(m.remove(&(k * 7919)), Some(k));
    }
    m.insert(1, 1);
    m.check_invariants().expect("invariants after removes");
    for k in 0..n {
        let want = (k % 3 != 0).then_some(k);
        assert_eq!(m.peek(&(k * 7919)).copied(), want);
    }
}

#[test]
fn gathering_is_skipped_when_most_entries_were_requested() {
    let n = crate::map::GATHER_MIN_ENTRIES as u64;
    let config = VipConfig {
        schedule: Schedule::LearnOnce(n),
        ..VipConfig::default()
    };
    let mut m: VipMap<u64, u64> = VipMap::new(config).expect("config");
    for k in 0..n {
        m.insert(k, k);
    }
    for k in 0..n {
        m.get(&k);
    }
    m.get(&0);
    assert_eq!(m.stats().gathers, 0);
    m.check_invariants().expect("invariants");
}
