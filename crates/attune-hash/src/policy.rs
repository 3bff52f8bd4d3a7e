//! The VIP policy: configuration, the schedule of learn+adapt / sense / default phases, and the
//! sensing statistics (Algorithms 4 and 5 of the VIP hashing chapter, seed 004 §3.5).
//!
//! A table running [`Schedule::Adaptive`] cycles through
//!
//! ```text
//!   Learn (N_L fetches) ─▶ SenseBaseline (N_S) ─▶ Default (N_D) ─▶ SenseCompare (N_S) ─┐
//!        ▲                                            ▲                               │
//!        └──────────── distribution changed ──────────┴──────── unchanged ────────────┘
//! ```
//!
//! with `N_L = learn_factor · buckets`, `N_D = default_factor · N_L`, `N_S = sense_fetches`,
//! recomputed from the bucket count each time a phase starts (so a rehash updates them).
//! Only fetches advance the schedule; inserts and removes do not.
//!
//! Thread-safety: plain values; the table that owns them is single-threaded (`&mut self`).

use crate::HashError;

/// Default `N_L / buckets`: 1.5, the highest load factor the table allows, so that a learn
/// phase sees about one sample per key (the chapter's §3.5.3.2).
pub const LEARN_FACTOR_DEFAULT: f64 = 1.5;
/// Default `N_D / N_L`: 60. Learning is at most ~4x slower than a plain fetch, so spending
/// 1/61 of the fetches learning caps the overhead near 5% (§3.5.3.1).
pub const DEFAULT_FACTOR_DEFAULT: u64 = 60;
/// Default `N_S`: 1000 fetches per sense phase; chains are short, so 1000 samples give a
/// tight interval for the mean displacement (§3.5.3.3).
pub const SENSE_FETCHES_DEFAULT: u64 = 1000;
/// Default confidence level `c` of the sensing interval: 0.95 (§3.5.3.3).
pub const CONFIDENCE_DEFAULT: f64 = 0.95;
/// Default lowest load factor before halving the bucket array: 0.5 (§3.2.1.1).
pub const LOAD_FACTOR_MIN_DEFAULT: f64 = 0.5;
/// Default highest load factor before doubling the bucket array: 1.5 (§3.2.1.1).
pub const LOAD_FACTOR_MAX_DEFAULT: f64 = 1.5;

/// When the table learns key popularity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// Never learn: a plain chained hash table (the baseline of every benchmark).
    Off,
    /// Full VIP hashing: learn at the start, then sense periodically and re-learn only when
    /// the displacement distribution has moved.
    Adaptive,
    /// Learn for the next `n` fetches, then run as a plain table (the PK-FK join probe, whose
    /// budget is known from the relation sizes).
    LearnOnce(u64),
}

/// Tuning of a [`crate::VipMap`]. `Default` gives the chapter's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VipConfig {
    /// When to learn (default [`Schedule::Adaptive`]).
    pub schedule: Schedule,
    /// `N_L = learn_factor · buckets` (default [`LEARN_FACTOR_DEFAULT`]).
    pub learn_factor: f64,
    /// `N_D = default_factor · N_L` (default [`DEFAULT_FACTOR_DEFAULT`]).
    pub default_factor: u64,
    /// `N_S`, fetches per sense phase (default [`SENSE_FETCHES_DEFAULT`]; at least 2).
    pub sense_fetches: u64,
    /// Confidence `c` of the sensing interval, in (0, 1) (default [`CONFIDENCE_DEFAULT`]).
    pub confidence: f64,
    /// Halve the buckets when `len < load_factor_min · buckets` after a remove (default 0.5;
    /// 0 never shrinks).
    pub load_factor_min: f64,
    /// Double the buckets when `len > load_factor_max · buckets` after an insert (default 1.5).
    pub load_factor_max: f64,
    /// At the end of a learn phase, move the requested entries to the front of the node arena,
    /// most requested first, when they are a concentrated hot set (default true; see
    /// `VipMap`'s `gather_hot_nodes`). Chain order is unchanged; hot entries share cache lines.
    pub gather_hot: bool,
}

impl Default for VipConfig {
    fn default() -> Self {
        VipConfig {
            schedule: Schedule::Adaptive,
            learn_factor: LEARN_FACTOR_DEFAULT,
            default_factor: DEFAULT_FACTOR_DEFAULT,
            sense_fetches: SENSE_FETCHES_DEFAULT,
            confidence: CONFIDENCE_DEFAULT,
            load_factor_min: LOAD_FACTOR_MIN_DEFAULT,
            load_factor_max: LOAD_FACTOR_MAX_DEFAULT,
            gather_hot: true,
        }
    }
}

impl VipConfig {
    /// The chapter's configuration with learning switched off (plain chained hashing).
    pub fn chained() -> Self {
        VipConfig {
            schedule: Schedule::Off,
            ..VipConfig::default()
        }
    }

    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<(), HashError> {
        fn bad(field: &'static str, value: impl ToString, reason: &'static str) -> HashError {
            HashError::InvalidConfig {
                field,
                value: value.to_string(),
                reason,
            }
        }
        if !(self.learn_factor.is_finite() && self.learn_factor > 0.0 && self.learn_factor <= 1e6) {
            return Err(bad(
                "learn_factor",
                self.learn_factor,
                "must be in (0, 1e6]",
            ));
        }
        if self.default_factor > 1_000_000 {
            return Err(bad(
                "default_factor",
                self.default_factor,
                "must be at most 1e6",
            ));
        }
        if self.sense_fetches < 2 {
            return Err(bad(
                "sense_fetches",
                self.sense_fetches,
                "must be at least 2",
            ));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(bad("confidence", self.confidence, "must be in (0, 1)"));
        }
        if !(self.load_factor_max.is_finite()
            && self.load_factor_max >= 0.25
            && self.load_factor_max <= 64.0)
        {
            return Err(bad(
                "load_factor_max",
                self.load_factor_max,
                "must be in [0.25, 64]",
            ));
        }
        if !(self.load_factor_min >= 0.0 && 2.0 * self.load_factor_min <= self.load_factor_max) {
            return Err(bad(
                "load_factor_min",
                self.load_factor_min,
                "must be in [0, load_factor_max / 2] so that a resize cannot oscillate",
            ));
        }
        Ok(())
    }

    /// `N_L` for a table of `buckets` buckets (at least 1).
    pub fn learn_fetches(&self, buckets: usize) -> u64 {
        ((self.learn_factor * buckets as f64).ceil() as u64).max(1)
    }

    /// `N_D` for a table of `buckets` buckets (at least 1).
    pub fn default_fetches(&self, buckets: usize) -> u64 {
        self.learn_fetches(buckets)
            .saturating_mul(self.default_factor)
            .max(1)
    }
}

/// The phase a table is in; see the module doc for the cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Plain chained lookups; no extra work.
    Default,
    /// Counting requests in the mirrored table and moving hot entries forward.
    Learn,
    /// Measuring the displacement distribution right after learning (γ_B).
    SenseBaseline,
    /// Measuring it again after a default phase (γ_C) to decide whether to re-learn.
    SenseCompare,
}

/// The sensing statistic γ = (u, w): mean displacement of successful fetches and the
/// half-width of its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gamma {
    /// Estimated mean displacement `u` (1 = found at the chain head).
    pub mean: f64,
    /// Half-width `w = sqrt(-2 · v · ln(1 - c) / n)` of the interval around `u`.
    pub half_width: f64,
    /// Successful fetches it was estimated from.
    pub samples: u64,
}

impl Gamma {
    /// Algorithm 4's estimate from `count` successful fetches with displacement sum `sum` and
    /// sum of squares `sum_sq`; `None` with fewer than two samples (no variance estimate).
    pub fn estimate(count: u64, sum: u64, sum_sq: u64, confidence: f64) -> Option<Gamma> {
        if count < 2 {
            return None;
        }
        let n = count as f64;
        let (s, s2) = (sum as f64, sum_sq as f64);
        let mean = s / n;
        // Sample variance; clamp the rounding error that can make it slightly negative.
        let var = (s2 / (n - 1.0) - s * s / (n * (n - 1.0))).max(0.0);
        let half_width = (-2.0 * var * (1.0 - confidence).ln() / n).sqrt();
        Some(Gamma {
            mean,
            half_width,
            samples: count,
        })
    }

    /// Algorithm 5: the distributions differ iff the two intervals are disjoint.
    pub fn differs_from(&self, other: &Gamma) -> bool {
        (self.mean - other.mean).abs() > self.half_width + other.half_width
    }
}

/// Running sums of one sense phase (24 bytes, as in the chapter).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SenseAcc {
    pub count: u64,
    pub sum: u64,
    pub sum_sq: u64,
}

impl SenseAcc {
    #[inline(always)]
    pub fn add(&mut self, d: u64) {
        self.count += 1;
        self.sum += d;
        self.sum_sq += d * d;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_the_chapters_and_valid() {
        let c = VipConfig::default();
        assert!(c.validate().is_ok());
        assert_eq!(c.learn_fetches(1 << 20), 1_572_864);
        assert_eq!(c.default_fetches(1 << 20), 60 * 1_572_864);
        assert_eq!(c.sense_fetches, 1000);
    }

    #[test]
    fn out_of_range_config_fields_are_rejected() {
        let bad = [
            VipConfig {
                confidence: 1.0,
                ..VipConfig::default()
            },
            VipConfig {
                confidence: f64::NAN,
                ..VipConfig::default()
            },
            VipConfig {
                sense_fetches: 1,
                ..VipConfig::default()
            },
            VipConfig {
                learn_factor: 0.0,
                ..VipConfig::default()
            },
            VipConfig {
                load_factor_min: 1.0,
                load_factor_max: 1.5,
                ..VipConfig::default()
            },
            VipConfig {
                load_factor_max: f64::INFINITY,
                ..VipConfig::default()
            },
        ];
        for c in bad {
            assert!(
                matches!(c.validate(), Err(HashError::InvalidConfig { .. })),
                "{c:?}"
            );
        }
    }

    #[test]
    fn gamma_uses_the_gaussian_tail_bound_width() {
        // Displacements 1,1,2,2: mean 1.5, sample variance 1/3.
        let g = Gamma::estimate(4, 6, 10, 0.95).expect("enough samples");
        assert!((g.mean - 1.5).abs() < 1e-12);
        let want = (-2.0 * (1.0 / 3.0) * 0.05f64.ln() / 4.0).sqrt();
        assert!((g.half_width - want).abs() < 1e-12);
        assert_eq!(Gamma::estimate(1, 1, 1, 0.95), None);
    }

    #[test]
    fn disjoint_intervals_mean_a_changed_distribution() {
        let a = Gamma {
            mean: 1.10,
            half_width: 0.02,
            samples: 1000,
        };
        let b = Gamma {
            mean: 1.20,
            half_width: 0.03,
            samples: 1000,
        };
        let c = Gamma {
            mean: 1.13,
            half_width: 0.02,
            samples: 1000,
        };
        assert!(a.differs_from(&b) && b.differs_from(&a));
        assert!(!a.differs_from(&c));
    }
}
