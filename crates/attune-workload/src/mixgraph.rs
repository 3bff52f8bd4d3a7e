//! RocksDB `db_bench --benchmarks=mixgraph` streams: production-like key-range hotness, value
//! sizes and scan lengths from Cao et al., "Characterizing, Modeling, and Benchmarking RocksDB
//! Key-Value Workloads at Facebook" (FAST '20), as used by Symbiosis (Dai 2025 §3.5.3 / FAST '24
//! §5.3) to produce "complex and realistic" workloads.
//!
//! The model, with db_bench's parameter names:
//!
//! * The key space of `num` keys is cut into `keyrange_num` equal ranges. Range number `x`
//!   (1..=keyrange_num) has hotness `f(x) = a·e^(b·x) + c·e^(d·x)` (`keyrange_dist_a..d`, the
//!   two-term exponential fit). Hotness is turned into integer shares by scaling with
//!   `floor(1/f_min) + 1` like db_bench, then the ranges are shuffled so the hot ranges are not all
//!   at one end. A request picks a range with probability ∝ its share.
//! * Inside a range, a key is chosen by the power model `F(x) = a·x^b` (`key_dist_a/b`): a uniform
//!   `u` is inverted to a seed `ceil((u/a)^(1/b))` and the seed is hashed to an offset, so hot keys
//!   are scattered in the range. With `key_dist_a = 0` or `key_dist_b = 0` the offset is uniform.
//! * Value sizes (puts) and scan lengths (seeks) follow generalized Pareto distributions
//!   (`value_theta/k/sigma`, `iter_theta/k/sigma`), inverted from a uniform; value sizes below 10
//!   become 10 and sizes above `value_size_max` wrap modulo it, scan lengths wrap modulo
//!   `scan_len_max` — db_bench's clamping.
//! * The query mix is `mix_get_ratio` / `mix_put_ratio` / `mix_seek_ratio`.
//!
//! Differences from db_bench (deliberate, documented in docs/workload.md): db_bench seeds its
//! per-key `Random64` (mt19937_64) with the power-model seed and shuffles ranges with a generator
//! seeded by the share total; we use SplitMix64 of (seed, value) and a Fisher–Yates shuffle from
//! the stream seed, so different seeds give different hot ranges. db_bench derives the query type
//! from the same random number as the key; we draw it independently. The QPS sine model
//! (`sine_a..d`) shapes time, not the stream, and is not modelled.
//!
//! Thread-safety: a [`MixGraphRun`] is one stream (`Send`). Memory: O(keyrange_num).

use crate::error::{check_nonzero, check_proportions, Result, WorkloadError};
use crate::op::Op;
use crate::rng::{hash3, Xoshiro256};

/// db_bench's default `mix_max_value_size`.
pub const VALUE_SIZE_MAX_DEFAULT: u32 = 1024;
/// db_bench's default `mix_max_scan_len`.
pub const SCAN_LEN_MAX_DEFAULT: u32 = 10_000;

/// mix_graph parameters (db_bench flag names).
#[derive(Clone, Debug)]
pub struct MixGraphConfig {
    /// `num`: keys in the key space.
    pub num: u64,
    /// `reads` (used as the operation count).
    pub operation_count: u64,
    /// `keyrange_num`.
    pub keyrange_num: u64,
    /// `keyrange_dist_a`.
    pub keyrange_dist_a: f64,
    /// `keyrange_dist_b`.
    pub keyrange_dist_b: f64,
    /// `keyrange_dist_c`.
    pub keyrange_dist_c: f64,
    /// `keyrange_dist_d`.
    pub keyrange_dist_d: f64,
    /// `key_dist_a`.
    pub key_dist_a: f64,
    /// `key_dist_b`.
    pub key_dist_b: f64,
    /// `value_theta`.
    pub value_theta: f64,
    /// `value_k`.
    pub value_k: f64,
    /// `value_sigma`.
    pub value_sigma: f64,
    /// `mix_max_value_size`.
    pub value_size_max: u32,
    /// `iter_theta`.
    pub iter_theta: f64,
    /// `iter_k`.
    pub iter_k: f64,
    /// `iter_sigma`.
    pub iter_sigma: f64,
    /// `mix_max_scan_len`.
    pub scan_len_max: u32,
    /// `mix_get_ratio`.
    pub get_ratio: f64,
    /// `mix_put_ratio`.
    pub put_ratio: f64,
    /// `mix_seek_ratio`.
    pub seek_ratio: f64,
    /// Stream seed.
    pub seed: u64,
}

impl MixGraphConfig {
    /// The example command of RocksDB PR #5953 / the RocksDB wiki page on workload generation
    /// (the "last example" of Cao et al. that Symbiosis runs): 30 key ranges with
    /// `a=14.18, b=-2.917, c=0.0164, d=-0.08082`, power key model `0.002312, 0.3467`,
    /// value GPD `k=0.2615, sigma=25.45`, scan GPD `k=2.517, sigma=14.236`, 85/14/1 get/put/seek.
    pub fn fast20_example(num: u64, operation_count: u64, seed: u64) -> Self {
        Self {
            num,
            operation_count,
            keyrange_num: 30,
            keyrange_dist_a: 14.18,
            keyrange_dist_b: -2.917,
            keyrange_dist_c: 0.0164,
            keyrange_dist_d: -0.08082,
            key_dist_a: 0.002312,
            key_dist_b: 0.3467,
            value_theta: 0.0,
            value_k: 0.2615,
            value_sigma: 25.45,
            value_size_max: VALUE_SIZE_MAX_DEFAULT,
            iter_theta: 0.0,
            iter_k: 2.517,
            iter_sigma: 14.236,
            scan_len_max: SCAN_LEN_MAX_DEFAULT,
            get_ratio: 0.85,
            put_ratio: 0.14,
            seek_ratio: 0.01,
            seed,
        }
    }

    /// Checks the parameters; the range shares must not all be zero.
    pub fn validate(&self) -> Result<()> {
        check_nonzero("num", self.num)?;
        check_nonzero("keyrange_num", self.keyrange_num)?;
        if self.keyrange_num > self.num || self.keyrange_num > 1 << 20 {
            return Err(WorkloadError::InvalidParameter {
                name: "keyrange_num",
                value: self.keyrange_num.to_string(),
                reason: "must be <= num and <= 2^20",
            });
        }
        check_proportions(&[
            ("get_ratio", self.get_ratio),
            ("put_ratio", self.put_ratio),
            ("seek_ratio", self.seek_ratio),
        ])?;
        for (name, v) in [
            ("keyrange_dist_a", self.keyrange_dist_a),
            ("keyrange_dist_b", self.keyrange_dist_b),
            ("keyrange_dist_c", self.keyrange_dist_c),
            ("keyrange_dist_d", self.keyrange_dist_d),
            ("key_dist_a", self.key_dist_a),
            ("key_dist_b", self.key_dist_b),
            ("value_theta", self.value_theta),
            ("value_k", self.value_k),
            ("value_sigma", self.value_sigma),
            ("iter_theta", self.iter_theta),
            ("iter_k", self.iter_k),
            ("iter_sigma", self.iter_sigma),
        ] {
            if !v.is_finite() {
                return Err(WorkloadError::InvalidParameter {
                    name,
                    value: v.to_string(),
                    reason: "must be finite",
                });
            }
        }
        if self.value_sigma < 0.0 || self.iter_sigma < 0.0 {
            return Err(WorkloadError::InvalidParameter {
                name: "value_sigma/iter_sigma",
                value: format!("{}/{}", self.value_sigma, self.iter_sigma),
                reason: "GPD scale must be >= 0",
            });
        }
        check_nonzero("value_size_max", u64::from(self.value_size_max))?;
        check_nonzero("scan_len_max", u64::from(self.scan_len_max))?;
        Ok(())
    }

    /// Range hotness `f(x)` for range number `x` (1-based), before shuffling.
    pub fn range_hotness(&self, x: u64) -> f64 {
        let x = x as f64;
        self.keyrange_dist_a * (self.keyrange_dist_b * x).exp()
            + self.keyrange_dist_c * (self.keyrange_dist_d * x).exp()
    }

    /// Builds the stream.
    pub fn run(&self) -> Result<MixGraphRun> {
        self.validate()?;
        MixGraphRun::new(self.clone())
    }
}

/// Inverse CDF of the generalized Pareto distribution at `u` (db_bench's `ParetoCdfInversion`).
pub fn pareto_inverse(u: f64, theta: f64, k: f64, sigma: f64) -> f64 {
    if k == 0.0 {
        theta - sigma * u.ln()
    } else {
        theta + sigma * (u.powf(-k) - 1.0) / k
    }
}

/// The mix_graph operation stream.
#[derive(Clone, Debug)]
pub struct MixGraphRun {
    cfg: MixGraphConfig,
    rng: Xoshiro256,
    /// Cumulative integer shares of the shuffled ranges (`starts[i]` = first share of range i).
    starts: Vec<u64>,
    /// Range number (0-based position in key space) of each shuffled entry.
    range_ids: Vec<u64>,
    share_total: u64,
    range_keys: u64,
    left: u64,
}

impl MixGraphRun {
    fn new(cfg: MixGraphConfig) -> Result<Self> {
        let n = cfg.keyrange_num;
        // db_bench walks x from keyrange_num down to 1; the first non-negligible hotness sets
        // the amplification so that every non-zero range gets an integer share >= 1.
        let mut amplify = 0.0f64;
        let mut shares = Vec::new();
        for x in (1..=n).rev() {
            let mut p = cfg.range_hotness(x);
            if p < 1e-16 {
                p = 0.0;
            }
            if amplify == 0.0 && p > 0.0 {
                amplify = (1.0 / p).floor() + 1.0;
            }
            let share = if p > 0.0 { (amplify * p).floor() } else { 0.0 };
            if !share.is_finite() || share > 1e15 {
                return Err(WorkloadError::InvalidParameter {
                    name: "keyrange_dist_a..d",
                    value: format!("share {share} for range {x}"),
                    reason: "hotness spread too wide (shares overflow)",
                });
            }
            shares.push(share as u64);
        }
        // Range ids in key-space order: db_bench's vector index after the shuffle is the range's
        // position; we shuffle (Fisher–Yates) which hotness lands at which position.
        let mut rng = Xoshiro256::new(cfg.seed, 0x3196);
        let mut order: Vec<u64> = (0..n).collect();
        for i in (1..order.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        let mut starts = Vec::with_capacity(order.len());
        let mut range_ids = Vec::with_capacity(order.len());
        let mut total = 0u64;
        for (pos, &src) in order.iter().enumerate() {
            starts.push(total);
            range_ids.push(pos as u64);
            total += shares.get(src as usize).copied().unwrap_or(0);
        }
        if total == 0 {
            return Err(WorkloadError::InvalidParameter {
                name: "keyrange_dist_a..d",
                value: format!(
                    "{}, {}, {}, {}",
                    cfg.keyrange_dist_a,
                    cfg.keyrange_dist_b,
                    cfg.keyrange_dist_c,
                    cfg.keyrange_dist_d
                ),
                reason: "every key range has zero hotness",
            });
        }
        // Ranges with a zero share are never chosen; drop them from the search table.
        let mut s2 = Vec::new();
        let mut r2 = Vec::new();
        for (i, &st) in starts.iter().enumerate() {
            let next = starts.get(i + 1).copied().unwrap_or(total);
            if next > st {
                s2.push(st);
                r2.push(range_ids[i]);
            }
        }
        Ok(Self {
            range_keys: cfg.num / cfg.keyrange_num,
            left: cfg.operation_count,
            rng: Xoshiro256::new(cfg.seed, 0x3197),
            starts: s2,
            range_ids: r2,
            share_total: total,
            cfg,
        })
    }

    /// Share of requests each key range (in key-space order) receives under the model.
    pub fn range_probabilities(&self) -> Vec<f64> {
        let mut p = vec![0.0; self.cfg.keyrange_num as usize];
        for (i, &st) in self.starts.iter().enumerate() {
            let next = self.starts.get(i + 1).copied().unwrap_or(self.share_total);
            if let Some(slot) = p.get_mut(self.range_ids[i] as usize) {
                *slot = (next - st) as f64 / self.share_total as f64;
            }
        }
        p
    }

    /// Number of keys in each range (`num / keyrange_num`, as db_bench).
    pub fn range_keys(&self) -> u64 {
        self.range_keys
    }

    fn next_key(&mut self) -> u64 {
        let pick = self.rng.below(self.share_total);
        let idx = self
            .starts
            .partition_point(|&s| s <= pick)
            .saturating_sub(1);
        let range = self.range_ids.get(idx).copied().unwrap_or(0);
        let size = self.range_keys.max(1);
        let offset = if self.cfg.key_dist_a == 0.0 || self.cfg.key_dist_b == 0.0 {
            self.rng.below(size)
        } else {
            let u = self.rng.below(size) as f64 / size as f64;
            let seed = (u / self.cfg.key_dist_a)
                .powf(1.0 / self.cfg.key_dist_b)
                .ceil();
            let seed = if seed.is_finite() {
                seed as u64
            } else {
                u64::MAX
            };
            hash3(self.cfg.seed, 0x6e7, seed) % size
        };
        (range * size + offset).min(self.cfg.num - 1)
    }

    fn value_len(&mut self) -> u32 {
        let u = self.rng.next_f64_open0();
        let v = pareto_inverse(
            u,
            self.cfg.value_theta,
            self.cfg.value_k,
            self.cfg.value_sigma,
        )
        .ceil();
        let v = if v.is_finite() && v > 0.0 {
            v.min(1e18) as u64
        } else {
            0
        };
        let max = u64::from(self.cfg.value_size_max);
        if v < 10 {
            10.min(max) as u32
        } else if v > max {
            (v % max).max(1) as u32
        } else {
            v as u32
        }
    }

    fn scan_len(&mut self) -> u32 {
        let u = self.rng.next_f64_open0();
        let v = pareto_inverse(u, self.cfg.iter_theta, self.cfg.iter_k, self.cfg.iter_sigma).ceil();
        let v = if v.is_finite() && v > 0.0 {
            v.min(1e18) as u64
        } else {
            0
        };
        (v % u64::from(self.cfg.scan_len_max)) as u32
    }
}

impl Iterator for MixGraphRun {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let u = self.rng.next_f64();
        let key = self.next_key();
        let op = if u < self.cfg.get_ratio {
            Op::Read { key }
        } else if u < self.cfg.get_ratio + self.cfg.put_ratio {
            Op::Update {
                key,
                value_len: self.value_len(),
            }
        } else {
            Op::Scan {
                start: key,
                len: self.scan_len(),
            }
        };
        Some(op)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = usize::try_from(self.left).unwrap_or(usize::MAX);
        (r, Some(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast20_example_puts_over_70_percent_on_one_thirtieth_of_the_keys() {
        // Symbiosis (FAST '24 §5.3) describes this workload as "over 70% of requests access
        // 1/30 of the data".
        let cfg = MixGraphConfig::fast20_example(3_000_000, 200_000, 9);
        println!("seed 9");
        let run = cfg.run().unwrap();
        let model = run.range_probabilities();
        let size = run.range_keys();
        let mut counts = vec![0u64; 30];
        for op in run {
            counts[(op.key() / size).min(29) as usize] += 1;
        }
        let hottest = counts.iter().copied().max().unwrap() as f64 / 200_000.0;
        assert!(hottest > 0.7, "{hottest}");
        for (r, &c) in counts.iter().enumerate() {
            let got = c as f64 / 200_000.0;
            assert!(
                (got - model[r]).abs() < 0.01,
                "range {r}: {got} vs {}",
                model[r]
            );
        }
    }

    #[test]
    fn query_mix_and_value_sizes_follow_the_parameters() {
        let cfg = MixGraphConfig::fast20_example(1_000_000, 300_000, 3);
        let (mut g, mut p, mut s) = (0u64, 0u64, 0u64);
        let mut vsum = 0u64;
        for op in cfg.run().unwrap() {
            match op {
                Op::Read { .. } => g += 1,
                Op::Update { value_len, .. } => {
                    p += 1;
                    assert!((10..=1024).contains(&value_len));
                    vsum += u64::from(value_len);
                }
                Op::Scan { len, .. } => {
                    s += 1;
                    assert!(len < SCAN_LEN_MAX_DEFAULT);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        let t = 300_000.0;
        assert!((g as f64 / t - 0.85).abs() < 0.01);
        assert!((p as f64 / t - 0.14).abs() < 0.01);
        assert!((s as f64 / t - 0.01).abs() < 0.005);
        // GPD(k=0.2615, sigma=25.45) has mean sigma/(1-k) = 34.5; clamping below at 10 raises it
        // a little.
        let mean = vsum as f64 / p as f64;
        assert!((34.0..40.0).contains(&mean), "{mean}");
    }

    #[test]
    fn power_model_makes_some_keys_hot_within_a_range() {
        let mut cfg = MixGraphConfig::fast20_example(100_000, 200_000, 4);
        cfg.keyrange_num = 1;
        cfg.keyrange_dist_a = 0.0;
        cfg.keyrange_dist_b = 0.0;
        cfg.keyrange_dist_c = 1.0;
        cfg.keyrange_dist_d = 0.0;
        let mut counts = vec![0u64; 100_000];
        for op in cfg.run().unwrap() {
            counts[op.key() as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = counts[..1000].iter().sum();
        // Uniform would give 1%; the power model concentrates far more on the top 1% of keys.
        assert!(top as f64 / 200_000.0 > 0.05, "{top}");
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let a: Vec<Op> = MixGraphConfig::fast20_example(10_000, 100, 1)
            .run()
            .unwrap()
            .collect();
        let b: Vec<Op> = MixGraphConfig::fast20_example(10_000, 100, 1)
            .run()
            .unwrap()
            .collect();
        let c: Vec<Op> = MixGraphConfig::fast20_example(10_000, 100, 2)
            .run()
            .unwrap()
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let mut cfg = MixGraphConfig::fast20_example(1000, 10, 1);
        cfg.get_ratio = 0.9;
        assert!(cfg.run().is_err());
        let mut cfg = MixGraphConfig::fast20_example(1000, 10, 1);
        cfg.keyrange_dist_a = 0.0;
        cfg.keyrange_dist_c = 0.0;
        assert!(cfg.run().is_err());
        let mut cfg = MixGraphConfig::fast20_example(1000, 10, 1);
        cfg.keyrange_num = 0;
        assert!(cfg.run().is_err());
        let mut cfg = MixGraphConfig::fast20_example(1000, 10, 1);
        cfg.value_k = f64::NAN;
        assert!(cfg.run().is_err());
    }
}
