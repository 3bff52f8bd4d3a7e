//! A Criteo-like recommendation workload: requests of 13 dense and N ≤ 26 categorical features.
//!
//! Each request looks up one key in each of N embedding tables. Table `t` has Criteo-Kaggle's
//! cardinality of categorical feature `t` (the counts of the DLRM Kaggle preprocessing), multiplied
//! by `scale` (at least [`MIN_ROWS`] rows). Keys are drawn per table from a zipfian of exponent
//! `theta`; the hot ranks are scattered over the table's key space by a keyed permutation.
//!
//! Cross-table correlation comes from latent clusters: a request first draws a cluster `c` from a
//! zipfian over `clusters` (exponent `cluster_theta`); then, for each table, with probability
//! `correlation` the key is one of the cluster's `pool` keys of that table (the pool's i-th key
//! is a fixed zipfian draw seeded by `(seed, t, c, i)`, so cluster keys follow the table's
//! popularity), otherwise an independent zipfian draw. Requests of one cluster therefore share
//! keys across tables, which is what makes group scores meaningful; `correlation = 0` removes it.
//!
//! Two profiles ([`CriteoConfig::profile`]):
//! * `kaggle` (calibrated, [`CriteoConfig::kaggle`]): Criteo-Kaggle's cardinalities are the
//!   numbers of distinct values seen in its [`KAGGLE_SAMPLES`] training samples, so in the real
//!   data every row of a table is touched within one pass. A zipfian over `n` rows touches far
//!   fewer (at θ 1.05, 40 % of C3’s 10.1 M rows in 45.8 M draws), which made the old
//!   generator much more cacheable than the data (97 % individual hits at a 5 % cache). The
//!   calibrated profile therefore draws a table's key, with probability
//!   `tail_t = min(1, −ln(1 − coverage) · n_t / (KAGGLE_SAMPLES · scale))`, uniformly over the
//!   table (the long tail of rare values), and otherwise as below; `coverage` (0.8) is the share of
//!   rows the tail alone is expected to touch within one scaled pass (`KAGGLE_SAMPLES · scale`
//!   requests). Big tables get a large tail (C3 35 %, C12 29 %, C21 25 %, C16 19 %, C4 8 %), small
//!   ones none to speak of. Clicks are biased to Criteo-Kaggle's 25.6 % positive rate.
//! * `zipf` ([`CriteoConfig::new`]): no tail (`coverage` 0); the generator of the first figures.
//!
//! Dense features are lognormal-like non-negative integers (as Criteo's counts). The click label
//! comes from a hidden logistic model: a weight per (table, key) derived by hashing, a weight per
//! cluster and a small term on the dense features, so a model trained on the keys can learn it.
//!
//! Every stream is a pure function of its configuration (including the seed). Memory: O(N).

use crate::dist::Zipf;
use crate::error::{check_fraction, check_nonneg, Result, WorkloadError};
use crate::perm::Permutation;
use crate::rng::{hash3, mix64, unit_f64, Xoshiro256};

/// Criteo-Kaggle's 26 categorical cardinalities (C1..C26, DLRM's Kaggle preprocessing counts).
pub const CRITEO_KAGGLE_CARDINALITIES: [u64; 26] = [
    1460, 583, 10_131_227, 2_202_608, 305, 24, 12_517, 633, 3, 93_145, 5683, 8_351_593, 3194, 27,
    14_992, 5_461_306, 10, 5652, 2173, 4, 7_046_547, 18, 15, 286_181, 105, 142_572,
];
/// Criteo-Kaggle's training samples (lines of `train.txt`): one pass of the data.
pub const KAGGLE_SAMPLES: u64 = 45_840_617;
/// Criteo-Kaggle's share of clicks in its training samples.
pub const KAGGLE_CLICK_RATE: f64 = 0.2562;
/// The generator profiles [`CriteoConfig::profile`] knows.
pub const PROFILES: [&str; 2] = ["kaggle", "zipf"];
/// Criteo's number of dense (integer) features.
pub const DENSE_FEATURES: usize = 13;
/// The fewest rows a scaled table keeps.
pub const MIN_ROWS: u64 = 2;

/// Parameters of the generator; [`CriteoConfig::new`] gives the defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct CriteoConfig {
    /// Number of categorical tables, 1..=26 (the first `tables` of Criteo's 26).
    pub tables: usize,
    /// Multiplier of Criteo-Kaggle's cardinalities, in (0, 1]. Default 0.01.
    pub scale: f64,
    /// Zipf exponent of each table's key popularity. Default 1.05.
    pub theta: f64,
    /// Number of latent clusters. Default 10 000.
    pub clusters: u64,
    /// Zipf exponent of cluster popularity. Default 0.9.
    pub cluster_theta: f64,
    /// Probability that a table's key comes from the cluster's pool. Default 0.8.
    pub correlation: f64,
    /// Keys per cluster and table. Default 4.
    pub pool: u64,
    /// Share of each table's rows a uniform tail is expected to touch within one scaled pass of
    /// Criteo-Kaggle (`KAGGLE_SAMPLES · scale` requests), in [0, 1). 0 (the `zipf` profile)
    /// turns the tail off; the `kaggle` profile uses 0.8.
    pub coverage: f64,
    /// Intercept of the hidden click model's logit. −1.5 (`zipf`); `kaggle` picks the value that
    /// gives Criteo-Kaggle's 25.6 % clicks.
    pub click_logit: f64,
    /// Seed of everything.
    pub seed: u64,
}

/// One request: dense features, one key per table, and the click label.
#[derive(Clone, Debug, PartialEq)]
pub struct CriteoRequest {
    /// The 13 dense features.
    pub dense: [u32; DENSE_FEATURES],
    /// One key per table, each in `[0, cardinality(t))`.
    pub keys: Vec<u64>,
    /// The hidden model's label.
    pub click: bool,
}

impl CriteoConfig {
    /// Defaults for `tables` tables at `scale` with `seed`.
    pub fn new(tables: usize, scale: f64, seed: u64) -> Self {
        CriteoConfig {
            tables,
            scale,
            theta: 1.05,
            clusters: 10_000,
            cluster_theta: 0.9,
            correlation: 0.8,
            pool: 4,
            coverage: 0.0,
            click_logit: -1.5,
            seed,
        }
    }

    /// The calibrated profile: [`CriteoConfig::new`] plus a uniform tail touching 80 % of each
    /// table's rows within one scaled pass of Criteo-Kaggle, and its 25.6 % click rate.
    pub fn kaggle(tables: usize, scale: f64, seed: u64) -> Self {
        CriteoConfig {
            coverage: 0.8,
            click_logit: -0.82,
            ..CriteoConfig::new(tables, scale, seed)
        }
    }

    /// The profile called `name` (one of [`PROFILES`]).
    pub fn profile(name: &str, tables: usize, scale: f64, seed: u64) -> Result<Self> {
        match name {
            "kaggle" => Ok(CriteoConfig::kaggle(tables, scale, seed)),
            "zipf" => Ok(CriteoConfig::new(tables, scale, seed)),
            _ => Err(WorkloadError::InvalidParameter {
                name: "profile",
                value: name.to_string(),
                reason: "must be kaggle or zipf",
            }),
        }
    }

    /// Probability that table `t`'s key comes from the uniform tail, per table.
    pub fn tail_shares(&self) -> Vec<f64> {
        let pass = KAGGLE_SAMPLES as f64 * self.scale;
        self.cardinalities()
            .iter()
            .map(|&n| {
                if self.coverage <= 0.0 {
                    0.0
                } else {
                    (-(1.0 - self.coverage).ln() * n as f64 / pass).min(1.0)
                }
            })
            .collect()
    }

    /// Checks every parameter.
    pub fn validate(&self) -> Result<()> {
        if self.tables == 0 || self.tables > CRITEO_KAGGLE_CARDINALITIES.len() {
            return Err(WorkloadError::InvalidParameter {
                name: "tables",
                value: self.tables.to_string(),
                reason: "must be in 1..=26",
            });
        }
        if !(self.scale.is_finite() && self.scale > 0.0 && self.scale <= 1.0) {
            return Err(WorkloadError::InvalidParameter {
                name: "scale",
                value: format!("{}", self.scale),
                reason: "must be in (0, 1]",
            });
        }
        check_nonneg("theta", self.theta)?;
        check_nonneg("cluster_theta", self.cluster_theta)?;
        check_fraction("correlation", self.correlation)?;
        if !(self.coverage.is_finite() && (0.0..1.0).contains(&self.coverage)) {
            return Err(WorkloadError::InvalidParameter {
                name: "coverage",
                value: format!("{}", self.coverage),
                reason: "must be in [0, 1)",
            });
        }
        if !self.click_logit.is_finite() {
            return Err(WorkloadError::InvalidParameter {
                name: "click_logit",
                value: format!("{}", self.click_logit),
                reason: "must be finite",
            });
        }
        if self.clusters == 0 {
            return Err(WorkloadError::Empty { name: "clusters" });
        }
        if self.pool == 0 {
            return Err(WorkloadError::Empty { name: "pool" });
        }
        Ok(())
    }

    /// The scaled cardinality of each table.
    pub fn cardinalities(&self) -> Vec<u64> {
        CRITEO_KAGGLE_CARDINALITIES[..self.tables.min(26)]
            .iter()
            .map(|&c| ((c as f64 * self.scale).round() as u64).max(MIN_ROWS))
            .collect()
    }

    /// The request stream (infinite; take what you need).
    pub fn stream(&self) -> Result<CriteoStream> {
        self.validate()?;
        let cards = self.cardinalities();
        let mut zipfs = Vec::with_capacity(cards.len());
        let mut perms = Vec::with_capacity(cards.len());
        for (t, &n) in cards.iter().enumerate() {
            zipfs.push(Zipf::new(n, self.theta)?);
            perms.push(Permutation::new(n, hash3(self.seed, 0xC217, t as u64))?);
        }
        Ok(CriteoStream {
            tails: self.tail_shares(),
            cfg: self.clone(),
            cluster_zipf: Zipf::new(self.clusters, self.cluster_theta)?,
            zipfs,
            perms,
            rng: Xoshiro256::new(self.seed, 0xC217_E000),
        })
    }
}

/// The infinite, deterministic request stream of a [`CriteoConfig`].
#[derive(Clone, Debug)]
pub struct CriteoStream {
    cfg: CriteoConfig,
    tails: Vec<f64>,
    cluster_zipf: Zipf,
    zipfs: Vec<Zipf>,
    perms: Vec<Permutation>,
    rng: Xoshiro256,
}

impl CriteoStream {
    /// The scaled cardinality of each table.
    pub fn cardinalities(&self) -> Vec<u64> {
        self.perms.iter().map(|p| p.len()).collect()
    }

    /// The next request's keys only, written into `keys` (length = tables); returns the cluster.
    /// Draws the same random numbers as [`Iterator::next`] would for the keys, but no dense
    /// features or label (so the two are different streams).
    pub fn next_keys(&mut self, keys: &mut [u64]) -> u64 {
        let c = self.cluster_zipf.sample(&mut self.rng);
        for (t, key) in keys.iter_mut().enumerate().take(self.zipfs.len()) {
            // No draw when the tail is off, so the `zipf` profile's stream is unchanged.
            if self.tails[t] > 0.0 && self.rng.next_f64() < self.tails[t] {
                *key = self.rng.below(self.perms[t].len());
                continue;
            }
            let rank = if self.rng.next_f64() < self.cfg.correlation {
                let i = self.rng.below(self.cfg.pool);
                let seed = hash3(self.cfg.seed, (t as u64) << 40 | c, i);
                let mut local = Xoshiro256::new(seed, 0x9001);
                self.zipfs[t].sample(&mut local)
            } else {
                self.zipfs[t].sample(&mut self.rng)
            };
            *key = self.perms[t].apply(rank);
        }
        c
    }
}

impl Iterator for CriteoStream {
    type Item = CriteoRequest;

    fn next(&mut self) -> Option<CriteoRequest> {
        let mut keys = vec![0u64; self.zipfs.len()];
        let c = self.next_keys(&mut keys);
        let mut dense = [0u32; DENSE_FEATURES];
        let mut logit =
            self.cfg.click_logit + 1.5 * (unit_f64(hash3(self.cfg.seed, 0xC1, c)) - 0.5);
        for (j, d) in dense.iter_mut().enumerate() {
            // exp of a roughly normal draw (sum of 3 uniforms), scaled per feature.
            let z = self.rng.next_f64() + self.rng.next_f64() + self.rng.next_f64() - 1.5;
            let v = ((z * 1.5 + (j % 4) as f64).exp() - 1.0).max(0.0);
            *d = v.min(u32::MAX as f64) as u32;
            logit += 0.02 * (1.0 + v).ln() * if j % 2 == 0 { 1.0 } else { -1.0 };
        }
        for (t, &k) in keys.iter().enumerate() {
            let w = unit_f64(mix64(hash3(self.cfg.seed, 0xC2 + t as u64, k))) - 0.5;
            logit += 0.4 * w;
        }
        let p = 1.0 / (1.0 + (-logit).exp());
        let click = self.rng.next_f64() < p;
        Some(CriteoRequest { dense, keys, click })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn deterministic_and_in_range() {
        let cfg = CriteoConfig::new(26, 0.001, 7);
        let a: Vec<_> = cfg.stream().unwrap().take(500).collect();
        let b: Vec<_> = cfg.stream().unwrap().take(500).collect();
        assert_eq!(a, b);
        let cards = cfg.cardinalities();
        assert_eq!(cards.len(), 26);
        assert_eq!(cards[8], MIN_ROWS); // C9 has 3 rows, scaled below 2
        for r in &a {
            for (t, &k) in r.keys.iter().enumerate() {
                assert!(k < cards[t]);
            }
        }
        let other: Vec<_> = CriteoConfig::new(26, 0.001, 8)
            .stream()
            .unwrap()
            .take(500)
            .collect();
        assert_ne!(a, other);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(CriteoConfig::new(0, 0.1, 1).stream().is_err());
        assert!(CriteoConfig::new(27, 0.1, 1).stream().is_err());
        assert!(CriteoConfig::new(26, 0.0, 1).stream().is_err());
        assert!(CriteoConfig::new(26, 1.5, 1).stream().is_err());
        let mut c = CriteoConfig::new(26, 0.1, 1);
        c.correlation = 1.5;
        assert!(c.stream().is_err());
    }

    /// Skewed per table: the hottest key of the biggest table takes far more than 1/n.
    #[test]
    fn tables_are_skewed() {
        let cfg = CriteoConfig::new(26, 0.01, 3);
        let mut s = cfg.stream().unwrap();
        let mut counts: HashMap<u64, u64> = HashMap::new();
        let mut keys = vec![0; 26];
        for _ in 0..20_000 {
            s.next_keys(&mut keys);
            *counts.entry(keys[2]).or_default() += 1;
        }
        let max = *counts.values().max().unwrap();
        assert!(max > 500, "hottest key of C3 seen {max} times in 20k");
    }

    /// Correlation: given the key of table 2, table 11's key is far more predictable with the
    /// clusters on than off.
    #[test]
    fn clusters_correlate_tables() {
        fn pair_concentration(correlation: f64) -> f64 {
            let mut cfg = CriteoConfig::new(26, 0.01, 5);
            cfg.correlation = correlation;
            let mut s = cfg.stream().unwrap();
            let mut keys = vec![0; 26];
            let mut pairs: HashMap<(u64, u64), u64> = HashMap::new();
            for _ in 0..20_000 {
                s.next_keys(&mut keys);
                *pairs.entry((keys[2], keys[11])).or_default() += 1;
            }
            // Fraction of requests whose (C3, C12) pair was seen before.
            pairs.values().map(|&n| n - 1).sum::<u64>() as f64 / 20_000.0
        }
        let on = pair_concentration(0.8);
        let off = pair_concentration(0.0);
        assert!(on > off * 1.5, "repeat pairs on {on} vs off {off}");
    }

    #[test]
    fn clicks_are_neither_all_nor_none() {
        let cfg = CriteoConfig::new(26, 0.001, 9);
        let clicks = cfg.stream().unwrap().take(5000).filter(|r| r.click).count();
        assert!(clicks > 250 && clicks < 4750, "{clicks} clicks in 5000");
    }

    /// The calibrated profile touches at least `coverage` of a big table's rows in one scaled
    /// pass of Criteo-Kaggle, as the real data touches all of them; the zipf profile far fewer.
    #[test]
    fn kaggle_profile_covers_big_tables_in_one_pass() {
        fn touched(cfg: &CriteoConfig, t: usize) -> f64 {
            let n = cfg.cardinalities()[t];
            let pass = (KAGGLE_SAMPLES as f64 * cfg.scale) as usize;
            let mut seen = vec![false; n as usize];
            let mut s = cfg.stream().unwrap();
            let mut keys = vec![0; cfg.tables];
            for _ in 0..pass {
                s.next_keys(&mut keys);
                seen[keys[t] as usize] = true;
            }
            seen.iter().filter(|&&b| b).count() as f64 / n as f64
        }
        let kaggle = CriteoConfig::kaggle(3, 0.001, 4);
        let zipf = CriteoConfig::new(3, 0.001, 4);
        let (k, z) = (touched(&kaggle, 2), touched(&zipf, 2));
        assert!(k >= 0.8, "kaggle touched {k} of C3");
        assert!(z < 0.6, "zipf touched {z} of C3");
        let tails = kaggle.tail_shares();
        assert!(tails[2] > 0.3 && tails[2] < 0.4, "C3 tail {}", tails[2]);
        assert!(tails[0] < 0.001, "C1 tail {}", tails[0]);
        assert!(zipf.tail_shares().iter().all(|&u| u == 0.0));
    }

    #[test]
    fn kaggle_profile_clicks_near_criteo_rate() {
        let cfg = CriteoConfig::kaggle(26, 0.001, 9);
        let n = 20_000;
        let clicks = cfg.stream().unwrap().take(n).filter(|r| r.click).count();
        let rate = clicks as f64 / n as f64;
        assert!((rate - KAGGLE_CLICK_RATE).abs() < 0.02, "click rate {rate}");
    }

    #[test]
    fn profiles_by_name() {
        assert_eq!(
            CriteoConfig::profile("zipf", 26, 0.01, 1).unwrap(),
            CriteoConfig::new(26, 0.01, 1)
        );
        assert_eq!(
            CriteoConfig::profile("kaggle", 26, 0.01, 1)
                .unwrap()
                .coverage,
            0.8
        );
        assert!(CriteoConfig::profile("avazu", 26, 0.01, 1).is_err());
        let mut c = CriteoConfig::kaggle(26, 0.01, 1);
        c.coverage = 1.0;
        assert!(c.stream().is_err());
    }
}
