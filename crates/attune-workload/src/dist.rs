//! Request distributions over `[0, n)`: which item a request touches.
//!
//! Semantics follow YCSB's generators (Cooper et al., SoCC '10; the `site.ycsb.generator`
//! classes) unless stated otherwise:
//!
//! * `uniform` — every item equally likely.
//! * `zipfian:θ` — item `i` has probability ∝ `1/(i+1)^θ`, item 0 hottest. For `θ < 1` we use
//!   Gray et al.'s method ("Quickly generating billion-record synthetic databases", SIGMOD '94),
//!   which YCSB uses; it needs `ζ(n, θ)` and is only valid for `θ < 1`. For `θ >= 1` (and for
//!   `zipfian-ri:θ`, any `θ > 0`) we use rejection-inversion sampling (Hörmann & Derflinger,
//!   "Rejection-inversion to generate variates from monotone discrete distributions", 1996), which
//!   is exact and O(1) per draw for any exponent. `θ = 0` is uniform.
//! * `scrambled:θ` — YCSB's ScrambledZipfian: a zipfian rank over 10^10 items, hashed with
//!   FNV-1a-64 and reduced modulo `n`, so hot items are scattered over the key space.
//! * `hotspot:D:O` — YCSB's Hotspot: a fraction `O` of requests go uniformly to the first
//!   `D·n` items (contiguous), the rest uniformly to the other items.
//! * `exponential[:P[:F]]` — YCSB's Exponential: `P`% of requests fall in the first `F·n` items.
//! * `latest[:θ]` — YCSB's SkewedLatest: `n-1-zipfian(n)`, most requests near the last item.
//! * `sequential` — `0, 1, ..., n-1, 0, ...`.
//!
//! `ζ(n, θ)` is summed exactly for `n <= 10^4` and by Euler–Maclaurin beyond (error < 1e-12
//! relative), so building a sampler over 10^10 items takes milliseconds, not minutes.
//!
//! Thread-safety: a [`Sampler`] is a single-stream value (`Send`); make one per thread with
//! distinct seeds. Invariant: every draw is in `[0, n)`.

use std::fmt;
use std::str::FromStr;

use crate::error::{check_fraction, check_nonneg, check_nonzero, Result, WorkloadError};
use crate::rng::Xoshiro256;

/// YCSB's default zipfian constant (`ZipfianGenerator.ZIPFIAN_CONSTANT`).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Item space of YCSB's scrambled zipfian (`ScrambledZipfianGenerator.ITEM_COUNT`).
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// YCSB's precomputed `ζ(10^10, 0.99)` (`ScrambledZipfianGenerator.ZETAN`); our Euler–Maclaurin
/// sum reproduces it (see the test `zeta_reproduces_ycsb_constant`).
pub const SCRAMBLED_ZETAN_099: f64 = 26.469_028_201_783_02;
/// Terms of `ζ(n, θ)` summed exactly before switching to Euler–Maclaurin. Default 10^4: the first
/// omitted correction term is about `θ^5 / (30240 · m^6)`, far below double precision at m = 10^4,
/// and 10^4 `powf` calls take ~0.2 ms, so samplers (and Wiscer's churn) build quickly.
const ZETA_EXACT_TERMS: u64 = 10_000;
/// YCSB defaults of the exponential generator (`exponential.percentile`, `exponential.frac`).
pub const EXPONENTIAL_PERCENTILE_DEFAULT: f64 = 95.0;
/// See [`EXPONENTIAL_PERCENTILE_DEFAULT`].
pub const EXPONENTIAL_FRAC_DEFAULT: f64 = 0.857_142_857_1;
/// YCSB defaults of the hotspot generator (`hotspotdatafraction`, `hotspotopnfraction`).
pub const HOTSPOT_DATA_DEFAULT: f64 = 0.2;
/// See [`HOTSPOT_DATA_DEFAULT`].
pub const HOTSPOT_OPS_DEFAULT: f64 = 0.8;

/// A request distribution, as named by the user.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestDist {
    /// Uniform over `[0, n)`.
    Uniform,
    /// Zipfian with exponent θ >= 0 (Gray for θ < 1, rejection-inversion for θ >= 1).
    Zipfian(f64),
    /// Zipfian by rejection-inversion regardless of θ.
    ZipfianRejectionInversion(f64),
    /// YCSB scrambled zipfian with exponent θ.
    ScrambledZipfian(f64),
    /// YCSB hotspot: `ops_fraction` of requests on the first `data_fraction` of items.
    Hotspot {
        /// Fraction of items that are hot (contiguous, at the start).
        data_fraction: f64,
        /// Fraction of requests that go to hot items.
        ops_fraction: f64,
    },
    /// YCSB exponential: `percentile`% of requests in the first `frac·n` items.
    Exponential {
        /// Percentage of requests (0, 100).
        percentile: f64,
        /// Fraction of items (0, 1].
        frac: f64,
    },
    /// YCSB skewed-latest with exponent θ.
    Latest(f64),
    /// `0, 1, 2, ...` wrapping at n.
    Sequential,
}

const DIST_NAMES: &str = "uniform, zipfian, zipfian:THETA, zipfian-ri:THETA, scrambled, \
     scrambled:THETA, hotspot, hotspot:DATA_FRACTION:OPS_FRACTION, exponential, \
     exponential:PERCENTILE:FRAC, latest, latest:THETA, sequential";

fn parse_f64(kind: &'static str, given: &str, a: &str) -> Result<f64> {
    a.parse::<f64>().map_err(|e| WorkloadError::BadArguments {
        kind,
        given: given.to_string(),
        reason: format!("`{a}` is not a number ({e})"),
    })
}

impl FromStr for RequestDist {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        let mut parts = lower.split(':');
        let head = parts.next().unwrap_or("");
        let args: Vec<&str> = parts.collect();
        let k = "request distribution";
        let nums = args
            .iter()
            .map(|a| parse_f64(k, s, a))
            .collect::<Result<Vec<f64>>>()?;
        let arity = |max: usize| -> Result<()> {
            if nums.len() > max {
                Err(WorkloadError::BadArguments {
                    kind: k,
                    given: s.to_string(),
                    reason: format!("takes at most {max} argument(s), got {}", nums.len()),
                })
            } else {
                Ok(())
            }
        };
        let theta = |d: f64| nums.first().copied().unwrap_or(d);
        let dist = match head {
            "uniform" => {
                arity(0)?;
                RequestDist::Uniform
            }
            "zipfian" | "zipf" => {
                arity(1)?;
                RequestDist::Zipfian(theta(ZIPFIAN_CONSTANT))
            }
            "zipfian-ri" | "zipf-ri" => {
                arity(1)?;
                RequestDist::ZipfianRejectionInversion(theta(ZIPFIAN_CONSTANT))
            }
            "scrambled" | "scrambled-zipfian" | "scrambledzipfian" => {
                arity(1)?;
                RequestDist::ScrambledZipfian(theta(ZIPFIAN_CONSTANT))
            }
            "hotspot" => {
                if nums.len() == 1 {
                    return Err(WorkloadError::BadArguments {
                        kind: k,
                        given: s.to_string(),
                        reason: "expected hotspot or hotspot:DATA_FRACTION:OPS_FRACTION".into(),
                    });
                }
                arity(2)?;
                RequestDist::Hotspot {
                    data_fraction: nums.first().copied().unwrap_or(HOTSPOT_DATA_DEFAULT),
                    ops_fraction: nums.get(1).copied().unwrap_or(HOTSPOT_OPS_DEFAULT),
                }
            }
            "exponential" => {
                arity(2)?;
                RequestDist::Exponential {
                    percentile: nums
                        .first()
                        .copied()
                        .unwrap_or(EXPONENTIAL_PERCENTILE_DEFAULT),
                    frac: nums.get(1).copied().unwrap_or(EXPONENTIAL_FRAC_DEFAULT),
                }
            }
            "latest" => {
                arity(1)?;
                RequestDist::Latest(theta(ZIPFIAN_CONSTANT))
            }
            "sequential" => {
                arity(0)?;
                RequestDist::Sequential
            }
            _ => {
                return Err(WorkloadError::UnknownName {
                    kind: k,
                    given: s.to_string(),
                    valid: DIST_NAMES,
                })
            }
        };
        dist.validate()?;
        Ok(dist)
    }
}

impl fmt::Display for RequestDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestDist::Uniform => write!(f, "uniform"),
            RequestDist::Zipfian(t) => write!(f, "zipfian:{t}"),
            RequestDist::ZipfianRejectionInversion(t) => write!(f, "zipfian-ri:{t}"),
            RequestDist::ScrambledZipfian(t) => write!(f, "scrambled:{t}"),
            RequestDist::Hotspot {
                data_fraction,
                ops_fraction,
            } => write!(f, "hotspot:{data_fraction}:{ops_fraction}"),
            RequestDist::Exponential { percentile, frac } => {
                write!(f, "exponential:{percentile}:{frac}")
            }
            RequestDist::Latest(t) => write!(f, "latest:{t}"),
            RequestDist::Sequential => write!(f, "sequential"),
        }
    }
}

impl RequestDist {
    /// Checks the parameters (θ >= 0, fractions in range).
    pub fn validate(&self) -> Result<()> {
        match *self {
            RequestDist::Zipfian(t)
            | RequestDist::ScrambledZipfian(t)
            | RequestDist::Latest(t)
            | RequestDist::ZipfianRejectionInversion(t) => check_nonneg("theta", t),
            RequestDist::Hotspot {
                data_fraction,
                ops_fraction,
            } => {
                check_fraction("data_fraction", data_fraction)?;
                check_fraction("ops_fraction", ops_fraction)
            }
            RequestDist::Exponential { percentile, frac } => {
                if !(percentile.is_finite() && percentile > 0.0 && percentile < 100.0) {
                    return Err(WorkloadError::InvalidParameter {
                        name: "percentile",
                        value: percentile.to_string(),
                        reason: "must be in (0, 100)",
                    });
                }
                if !(frac.is_finite() && frac > 0.0 && frac <= 1.0) {
                    return Err(WorkloadError::InvalidParameter {
                        name: "frac",
                        value: frac.to_string(),
                        reason: "must be in (0, 1]",
                    });
                }
                Ok(())
            }
            RequestDist::Uniform | RequestDist::Sequential => Ok(()),
        }
    }

    /// Builds a sampler over `[0, n)` seeded with `seed`.
    pub fn sampler(&self, n: u64, seed: u64) -> Result<Sampler> {
        Sampler::new(self, n, seed)
    }
}

/// `Σ_{i=1}^{n} i^-θ`, exact up to [`ZETA_EXACT_TERMS`] terms, Euler–Maclaurin beyond.
pub fn zeta(n: u64, theta: f64) -> f64 {
    let m = n.min(ZETA_EXACT_TERMS);
    let mut sum = 0.0;
    // Sum small terms first for accuracy.
    for i in (1..=m).rev() {
        sum += (i as f64).powf(-theta);
    }
    if n > m {
        sum += zeta_tail(m, n, theta);
    }
    sum
}

/// `Σ_{i=a+1}^{b} i^-θ` by Euler–Maclaurin (valid for large `a`).
fn zeta_tail(a: u64, b: u64, theta: f64) -> f64 {
    let (a, b) = (a as f64, b as f64);
    let f = |x: f64| x.powf(-theta);
    let f1 = |x: f64| -theta * x.powf(-theta - 1.0);
    let f3 = |x: f64| -theta * (theta + 1.0) * (theta + 2.0) * x.powf(-theta - 3.0);
    let integral = if (theta - 1.0).abs() < 1e-12 {
        (b / a).ln()
    } else {
        (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta)
    };
    // Σ_{i=a}^{b} f(i) = ∫ + (f(a)+f(b))/2 + (f'(b)-f'(a))/12 - (f'''(b)-f'''(a))/720 + ...
    let with_a = integral + (f(a) + f(b)) / 2.0 + (f1(b) - f1(a)) / 12.0 - (f3(b) - f3(a)) / 720.0;
    with_a - f(a)
}

/// Gray et al.'s zipfian generator (YCSB `ZipfianGenerator`), valid for θ in [0, 1).
#[derive(Clone, Debug)]
pub struct GrayZipf {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
    zeta2: f64,
}

impl GrayZipf {
    /// Over `items >= 1` items with θ in [0, 1).
    pub fn new(items: u64, theta: f64) -> Result<Self> {
        Self::with_zetan(items, theta, zeta(items, theta))
    }

    /// As [`GrayZipf::new`] with a precomputed `ζ(items, θ)`.
    pub fn with_zetan(items: u64, theta: f64, zetan: f64) -> Result<Self> {
        check_nonzero("items", items)?;
        if !(theta.is_finite() && (0.0..1.0).contains(&theta)) {
            return Err(WorkloadError::InvalidParameter {
                name: "theta",
                value: theta.to_string(),
                reason: "Gray's zipfian method needs 0 <= theta < 1",
            });
        }
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let mut g = Self {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: 0.0,
            half_pow_theta: 0.5f64.powf(theta),
            zeta2,
        };
        g.eta = g.compute_eta();
        Ok(g)
    }

    fn compute_eta(&self) -> f64 {
        let n = self.items as f64;
        (1.0 - (2.0 / n).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// Grows the item count incrementally (YCSB does this for `latest`): O(new - old) pow calls.
    pub fn grow_to(&mut self, items: u64) {
        if items <= self.items {
            return;
        }
        if items - self.items > ZETA_EXACT_TERMS {
            self.zetan = zeta(items, self.theta);
        } else {
            for i in self.items + 1..=items {
                self.zetan += (i as f64).powf(-self.theta);
            }
        }
        self.items = items;
        self.eta = self.compute_eta();
    }

    /// Item count.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// A draw in `[0, items)` (0 is the hottest).
    #[inline]
    pub fn sample(&self, rng: &mut Xoshiro256) -> u64 {
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 || self.items == 1 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1;
        }
        let r = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.items - 1)
    }
}

/// Rejection-inversion zipfian sampler (Hörmann & Derflinger 1996), any exponent > 0.
#[derive(Clone, Debug)]
pub struct RejectionInversionZipf {
    items: u64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl RejectionInversionZipf {
    /// Over `items >= 1` items with exponent > 0.
    pub fn new(items: u64, exponent: f64) -> Result<Self> {
        check_nonzero("items", items)?;
        if !(exponent.is_finite() && exponent > 0.0) {
            return Err(WorkloadError::InvalidParameter {
                name: "theta",
                value: exponent.to_string(),
                reason: "rejection-inversion needs theta > 0 (theta = 0 is uniform)",
            });
        }
        let mut z = Self {
            items,
            exponent,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(items as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        Ok(z)
    }

    /// Item count.
    pub fn items(&self) -> u64 {
        self.items
    }

    #[inline]
    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    /// `H(x) = ∫ h`, written with `expm1` so that exponent 1 needs no special case.
    #[inline]
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    #[inline]
    fn h_integral_inverse(&self, x: f64) -> f64 {
        let mut t = x * (1.0 - self.exponent);
        if t < -1.0 {
            t = -1.0;
        }
        (helper1(t) * x).exp()
    }

    /// A draw in `[0, items)` (0 is the hottest). Expected < 1.1 iterations.
    #[inline]
    pub fn sample(&self, rng: &mut Xoshiro256) -> u64 {
        // Bounded loop: acceptance probability is > 0.9 for every exponent, so 64 rounds fail
        // with probability < 1e-64; the fallback keeps the bound explicit.
        for _ in 0..64 {
            let u = self.h_integral_n + rng.next_f64() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let mut k = (x + 0.5) as u64;
            k = k.clamp(1, self.items);
            let kf = k as f64;
            if kf - x <= self.s || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k - 1;
            }
        }
        0
    }
}

/// `log1p(x)/x`, continuous at 0.
#[inline]
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `expm1(x)/x`, continuous at 0.
#[inline]
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// A zipfian over `items` choosing the method by θ: uniform for 0, Gray below 1, RI otherwise.
#[derive(Clone, Debug)]
pub enum Zipf {
    /// θ = 0.
    Uniform(u64),
    /// 0 < θ < 1.
    Gray(GrayZipf),
    /// θ >= 1 (or forced).
    RejectionInversion(RejectionInversionZipf),
}

impl Zipf {
    /// Chooses the method for θ as described in the module doc.
    pub fn new(items: u64, theta: f64) -> Result<Self> {
        check_nonzero("items", items)?;
        check_nonneg("theta", theta)?;
        Ok(if theta == 0.0 {
            Zipf::Uniform(items)
        } else if theta < 1.0 {
            Zipf::Gray(GrayZipf::new(items, theta)?)
        } else {
            Zipf::RejectionInversion(RejectionInversionZipf::new(items, theta)?)
        })
    }

    /// A draw in `[0, items)`, 0 hottest.
    #[inline]
    pub fn sample(&self, rng: &mut Xoshiro256) -> u64 {
        match self {
            Zipf::Uniform(n) => rng.below(*n),
            Zipf::Gray(g) => g.sample(rng),
            Zipf::RejectionInversion(r) => r.sample(rng),
        }
    }
}

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 little-endian bytes, then `Math.abs`.
#[inline]
pub fn fnvhash64(val: u64) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET;
    let mut v = val;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(PRIME);
        v >>= 8;
    }
    // Java's Math.abs on a long: wraps for Long.MIN_VALUE.
    (h as i64).wrapping_abs() as u64
}

#[derive(Clone, Debug)]
enum Kind {
    Uniform,
    Zipf(Zipf),
    Scrambled(Zipf),
    Hotspot { hot: u64, cold: u64, ops: f64 },
    Exponential { gamma: f64 },
    Latest(Zipf),
    Sequential { next: u64 },
}

/// A seeded sampler of one request distribution over `[0, n)`.
#[derive(Clone, Debug)]
pub struct Sampler {
    n: u64,
    kind: Kind,
    rng: Xoshiro256,
}

impl Sampler {
    /// Builds the sampler; validates parameters first.
    pub fn new(dist: &RequestDist, n: u64, seed: u64) -> Result<Self> {
        check_nonzero("n", n)?;
        dist.validate()?;
        let kind = match *dist {
            RequestDist::Uniform => Kind::Uniform,
            RequestDist::Zipfian(t) => Kind::Zipf(Zipf::new(n, t)?),
            RequestDist::ZipfianRejectionInversion(t) => {
                if t == 0.0 {
                    Kind::Uniform
                } else {
                    Kind::Zipf(Zipf::RejectionInversion(RejectionInversionZipf::new(n, t)?))
                }
            }
            RequestDist::ScrambledZipfian(t) => Kind::Scrambled(scrambled_zipf(t)?),
            RequestDist::Hotspot {
                data_fraction,
                ops_fraction,
            } => {
                let hot = ((n as f64) * data_fraction) as u64;
                Kind::Hotspot {
                    hot: hot.min(n),
                    cold: n - hot.min(n),
                    ops: ops_fraction,
                }
            }
            RequestDist::Exponential { percentile, frac } => Kind::Exponential {
                gamma: -(1.0 - percentile / 100.0).ln() / (n as f64 * frac),
            },
            RequestDist::Latest(t) => Kind::Latest(Zipf::new(n, t)?),
            RequestDist::Sequential => Kind::Sequential { next: 0 },
        };
        Ok(Self {
            n,
            kind,
            rng: Xoshiro256::new(seed, 0xd157),
        })
    }

    /// Domain size.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The next item in `[0, n)`.
    #[inline]
    pub fn next_item(&mut self) -> u64 {
        let n = self.n;
        match &mut self.kind {
            Kind::Uniform => self.rng.below(n),
            Kind::Zipf(z) => z.sample(&mut self.rng),
            Kind::Scrambled(z) => fnvhash64(z.sample(&mut self.rng)) % n,
            Kind::Hotspot { hot, cold, ops } => {
                let to_hot = self.rng.next_f64() < *ops;
                if (to_hot && *hot > 0) || *cold == 0 {
                    self.rng.below(*hot)
                } else {
                    *hot + self.rng.below(*cold)
                }
            }
            Kind::Exponential { gamma } => {
                // Resample values beyond the domain, as YCSB's core workload does.
                for _ in 0..1024 {
                    let x = -self.rng.next_f64_open0().ln() / *gamma;
                    if x < n as f64 {
                        return x as u64;
                    }
                }
                n - 1
            }
            Kind::Latest(z) => n - 1 - z.sample(&mut self.rng),
            Kind::Sequential { next } => {
                let v = *next;
                *next = if v + 1 >= n { 0 } else { v + 1 };
                v
            }
        }
    }

    /// An iterator of `count` draws.
    pub fn take_items(self, count: u64) -> Requests {
        Requests {
            sampler: self,
            left: count,
        }
    }
}

/// The scrambled zipfian's underlying rank sampler over 10^10 items.
pub(crate) fn scrambled_zipf(theta: f64) -> Result<Zipf> {
    if theta == ZIPFIAN_CONSTANT {
        Ok(Zipf::Gray(GrayZipf::with_zetan(
            SCRAMBLED_ITEM_COUNT,
            theta,
            SCRAMBLED_ZETAN_099,
        )?))
    } else {
        Zipf::new(SCRAMBLED_ITEM_COUNT, theta)
    }
}

/// A finite stream of request items.
#[derive(Clone, Debug)]
pub struct Requests {
    sampler: Sampler,
    left: u64,
}

impl Iterator for Requests {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(self.sampler.next_item())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = usize::try_from(self.left).unwrap_or(usize::MAX);
        (r, Some(r))
    }
}

/// Least-squares slope of `log(frequency)` against `log(rank)` over ranks `1..=top`; the fitted
/// zipf exponent is its negation. `counts` need not be sorted. Used by tests and the CLI.
pub fn fit_zipf_theta(counts: &[u64], top: usize) -> Option<f64> {
    let mut sorted: Vec<u64> = counts.iter().copied().filter(|&c| c > 0).collect();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.truncate(top);
    if sorted.len() < 3 {
        return None;
    }
    let pts: Vec<(f64, f64)> = sorted
        .iter()
        .enumerate()
        .map(|(r, &c)| (((r + 1) as f64).ln(), (c as f64).ln()))
        .collect();
    let m = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / m;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / m;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    Some(-sxy / sxx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(dist: &str, n: u64, draws: u64, seed: u64) -> Vec<u64> {
        let mut c = vec![0u64; n as usize];
        let d: RequestDist = dist.parse().unwrap();
        for x in d.sampler(n, seed).unwrap().take_items(draws) {
            c[x as usize] += 1;
        }
        c
    }

    #[test]
    fn zeta_reproduces_ycsb_constant() {
        let z = zeta(SCRAMBLED_ITEM_COUNT, 0.99);
        assert!(
            (z - SCRAMBLED_ZETAN_099).abs() / SCRAMBLED_ZETAN_099 < 1e-9,
            "{z}"
        );
    }

    #[test]
    fn zeta_euler_maclaurin_matches_exact_sum() {
        for &theta in &[0.5, 0.99, 1.0, 1.5] {
            let n = 3_000_000u64;
            let exact: f64 = (1..=n).rev().map(|i| (i as f64).powf(-theta)).sum();
            let em = zeta(n, theta);
            assert!(
                (exact - em).abs() / exact < 1e-12,
                "theta {theta}: {exact} vs {em}"
            );
        }
    }

    #[test]
    fn fitted_zipf_theta_matches_requested_theta() {
        let seed = 11;
        println!("seed {seed}");
        for &(name, theta) in &[
            ("zipfian:0.5", 0.5),
            ("zipfian:0.99", 0.99),
            ("zipfian:1.0", 1.0),
            ("zipfian:1.5", 1.5),
            ("zipfian:2.5", 2.5),
            ("zipfian-ri:0.8", 0.8),
        ] {
            let c = counts(name, 100_000, 2_000_000, seed);
            let top = if theta > 2.0 { 12 } else { 100 };
            let fit = fit_zipf_theta(&c, top).unwrap();
            assert!((fit - theta).abs() < 0.05, "{name}: fitted {fit}");
            // Rank 0 is the hottest item.
            assert_eq!(
                c.iter().enumerate().max_by_key(|p| p.1).unwrap().0,
                0,
                "{name}"
            );
        }
    }

    #[test]
    fn rejection_inversion_matches_exact_pmf_for_small_n() {
        let n = 10u64;
        let theta = 1.2;
        let draws = 1_000_000u64;
        let c = counts("zipfian:1.2", n, draws, 3);
        let z: f64 = (1..=n).map(|i| (i as f64).powf(-theta)).sum();
        for (i, &ci) in c.iter().enumerate() {
            let p = ((i + 1) as f64).powf(-theta) / z;
            let expect = p * draws as f64;
            let sd = (expect * (1.0 - p)).sqrt();
            assert!(
                (ci as f64 - expect).abs() < 5.0 * sd,
                "item {i}: {ci} vs {expect}"
            );
        }
    }

    #[test]
    fn zipf_theta_zero_is_uniform() {
        let c = counts("zipfian:0", 10, 100_000, 1);
        assert!(c.iter().all(|&x| (9_000..11_000).contains(&x)), "{c:?}");
    }

    #[test]
    fn hotspot_puts_the_requested_share_on_the_hot_set() {
        let n = 1000u64;
        let c = counts("hotspot:0.2:0.8", n, 500_000, 5);
        let hot: u64 = c[..200].iter().sum();
        let share = hot as f64 / 500_000.0;
        assert!((share - 0.8).abs() < 0.005, "{share}");
        assert!(c[200..].iter().all(|&x| x > 0));
    }

    #[test]
    fn scrambled_zipfian_scatters_hot_items() {
        let n = 10_000u64;
        let c = counts("scrambled", n, 1_000_000, 5);
        let mut idx: Vec<usize> = (0..n as usize).collect();
        idx.sort_by_key(|&i| std::cmp::Reverse(c[i]));
        // The 10 hottest items are not clustered at the start of the key space.
        assert!(idx[..10].iter().any(|&i| i > 1000), "{:?}", &idx[..10]);
        // Still skewed: top 1% of items get a large share.
        let top: u64 = idx[..100].iter().map(|&i| c[i]).sum();
        // Zipf 0.99 over 10^10 ranks: the 100 hottest ranks carry ~20% of the mass.
        assert!(top as f64 / 1_000_000.0 > 0.15);
        // YCSB's hot item: rank 0 hashes to fnvhash64(0) % n.
        assert_eq!(idx[0] as u64, fnvhash64(0) % n);
    }

    #[test]
    fn exponential_puts_percentile_in_fraction() {
        let n = 10_000u64;
        let c = counts("exponential:95:0.5", n, 200_000, 5);
        let head: u64 = c[..5000].iter().sum();
        // Truncation at n renormalises slightly above 95%.
        let share = head as f64 / 200_000.0;
        assert!((0.94..0.97).contains(&share), "{share}");
    }

    #[test]
    fn latest_prefers_the_end() {
        let c = counts("latest", 1000, 100_000, 5);
        assert!(c[999] > c[0] * 50);
        assert_eq!(c.iter().enumerate().max_by_key(|p| p.1).unwrap().0, 999);
    }

    #[test]
    fn sequential_wraps() {
        let d: RequestDist = "sequential".parse().unwrap();
        let v: Vec<u64> = d.sampler(3, 0).unwrap().take_items(7).collect();
        assert_eq!(v, vec![0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        for name in [
            "uniform",
            "zipfian",
            "zipfian:1.3",
            "scrambled",
            "hotspot",
            "latest",
        ] {
            let d: RequestDist = name.parse().unwrap();
            let a: Vec<u64> = d.sampler(1000, 1).unwrap().take_items(100).collect();
            let b: Vec<u64> = d.sampler(1000, 1).unwrap().take_items(100).collect();
            let c: Vec<u64> = d.sampler(1000, 2).unwrap().take_items(100).collect();
            assert_eq!(a, b, "{name}");
            assert_ne!(a, c, "{name}");
        }
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!("zipfian:-0.1".parse::<RequestDist>().is_err());
        assert!("zipfian:nan".parse::<RequestDist>().is_err());
        assert!("hotspot:0.2".parse::<RequestDist>().is_err());
        assert!("hotspot:1.2:0.5".parse::<RequestDist>().is_err());
        assert!("exponential:100".parse::<RequestDist>().is_err());
        assert!("uniform:3".parse::<RequestDist>().is_err());
        let e = "pareto".parse::<RequestDist>().unwrap_err().to_string();
        assert!(e.contains("zipfian") && e.contains("hotspot"), "{e}");
        assert!(RequestDist::Uniform.sampler(0, 1).is_err());
        assert!(GrayZipf::new(10, 1.0).is_err());
    }

    #[test]
    fn single_item_domains_always_return_zero() {
        for name in [
            "uniform",
            "zipfian",
            "zipfian:2",
            "scrambled",
            "hotspot",
            "latest",
        ] {
            let d: RequestDist = name.parse().unwrap();
            assert!(
                d.sampler(1, 3).unwrap().take_items(100).all(|x| x == 0),
                "{name}"
            );
        }
    }
}
