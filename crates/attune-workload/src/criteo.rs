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
            seed,
        }
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
        let mut logit = -1.5 + 1.5 * (unit_f64(hash3(self.cfg.seed, 0xC1, c)) - 0.5);
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
}
