//! Key sets: sorted, unique `u64` keys computable by index (`key_at(i)` for `i` in `0..n`).
//!
//! The sets reproduce the synthetic data sets of Bourbon's evaluation (linear, seg-1%, seg-10%,
//! normal; Dai 2025 §2.4) and SOSD's synthetic sets (lognormal, uniform dense, uniform sparse),
//! plus a clustered "map-like" set with the shape of OpenStreetMap cell ids. See docs/workload.md
//! for the exact formulas and the choices made where the sources are silent.
//!
//! Every set except `osm` is O(1) memory and O(1) time per `key_at`; `osm` keeps one `u64` per
//! cluster of 64 keys (n/8 bytes) because its heavy-tailed cluster gaps are a prefix sum.
//! Load orders: [`LoadOrder::Sequential`] is ascending; [`LoadOrder::Random`] visits the keys in a
//! keyed pseudo-random order (a Feistel permutation of indices, [`crate::perm`]), still streaming.
//!
//! Thread-safety: a [`KeySet`] is immutable after construction (`Send + Sync`); iterators own
//! their cursor. Invariants: `key_at` is strictly increasing in `i`; a set's keys depend only on
//! (kind, n, seed).

use std::fmt;
use std::str::FromStr;

use crate::error::{check_nonzero, Result, WorkloadError};
use crate::perm::Permutation;
use crate::rng::{hash3, mix64, Xoshiro256};

/// Keys per cluster in the map-like set. Default 64: about the number of OSM cell ids that share a
/// level-13 S2 prefix in dense urban areas, and small enough that the cluster table is n/8 bytes.
pub const OSM_CLUSTER_KEYS: u64 = 64;
/// Largest intra-cluster stride of the map-like set, as a power of two (strides are log-uniform
/// in `1..=2^12`). Default 12: keeps clusters dense relative to the gaps between them.
const OSM_STRIDE_LOG2_MAX: u64 = 12;
/// Pareto tail index of the gaps between map-like clusters. Default 1.1: heavy-tailed (infinite
/// variance), like the gaps between populated regions in cell-id space.
const OSM_GAP_ALPHA: f64 = 1.1;
/// Largest map-like set. Default 2^34 keys: its cluster table is then 2 GiB; larger requests are
/// an error rather than an allocation failure.
pub const OSM_KEYS_MAX: u64 = 1 << 34;
/// Default standard deviation of the log-normal set (SOSD uses lognormal(0, 2)).
pub const LOGNORMAL_SIGMA_DEFAULT: f64 = 2.0;

/// Which key set.
#[derive(Clone, Debug, PartialEq)]
pub enum KeySetKind {
    /// Consecutive keys `0, 1, 2, ...`.
    Linear,
    /// Runs of `segment` consecutive keys separated by gaps of `gap` missing keys
    /// (seg-1%: segment 100; seg-10%: segment 10; the default gap equals the segment).
    Segmented {
        /// Keys per consecutive run.
        segment: u64,
        /// Missing keys between runs.
        gap: u64,
    },
    /// Unique integers shaped like samples of N(0, 1), scaled by n per standard deviation.
    Normal,
    /// Unique integers shaped like samples of lognormal(0, sigma), scaled by 64n (plus rank).
    Lognormal {
        /// Standard deviation of the underlying normal.
        sigma: f64,
    },
    /// Uniform over a dense range: one key in each pair `{2i, 2i+1}`.
    UniformDense,
    /// Uniform over `[0, 2^bits)` (one key per stratum of width `2^bits / n`); `bits` is 64 by
    /// default, 32 for SOSD's `uspr32`.
    UniformSparse {
        /// Width of the key space in bits (1..=64).
        bits: u32,
    },
    /// Clustered, heavy-tailed gaps: the shape of OpenStreetMap cell ids.
    Osm,
}

const KEYSET_NAMES: &str =
    "linear, seg1 (seg-1%), seg10 (seg-10%), seg1:GAP, seg10:GAP, seg:SEGMENT:GAP, normal, \
     lognormal, lognormal:SIGMA, uniform-dense, uniform-sparse, uniform-sparse:BITS, \
     osm (map-like)";

impl FromStr for KeySetKind {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        let mut parts = lower.split(':');
        let head = parts.next().unwrap_or("");
        let args: Vec<&str> = parts.collect();
        let bad = |reason: String| WorkloadError::BadArguments {
            kind: "key set",
            given: s.to_string(),
            reason,
        };
        let num = |a: &str| -> Result<u64> {
            a.parse::<u64>()
                .map_err(|e| bad(format!("`{a}` is not an unsigned integer ({e})")))
        };
        let no_args = |k: KeySetKind| {
            if args.is_empty() {
                Ok(k)
            } else {
                Err(bad("takes no arguments".into()))
            }
        };
        match head {
            "linear" => no_args(KeySetKind::Linear),
            "seg1" | "seg-1%" | "seg-1" | "segmented-1%" | "seg10" | "seg-10%" | "seg-10"
            | "segmented-10%" => {
                let segment = if head.contains("10") { 10 } else { 100 };
                let gap = match args.as_slice() {
                    [] => segment,
                    [g] => num(g)?,
                    _ => return Err(bad("expected at most one argument (GAP)".into())),
                };
                Ok(KeySetKind::Segmented { segment, gap })
            }
            "seg" => match args.as_slice() {
                [seg, gap] => {
                    let segment = num(seg)?;
                    if segment == 0 {
                        return Err(bad("SEGMENT must be >= 1".into()));
                    }
                    Ok(KeySetKind::Segmented {
                        segment,
                        gap: num(gap)?,
                    })
                }
                _ => Err(bad("expected seg:SEGMENT:GAP".into())),
            },
            "normal" => no_args(KeySetKind::Normal),
            "lognormal" => match args.as_slice() {
                [] => Ok(KeySetKind::Lognormal {
                    sigma: LOGNORMAL_SIGMA_DEFAULT,
                }),
                [sg] => {
                    let sigma: f64 = sg
                        .parse()
                        .map_err(|e| bad(format!("`{sg}` is not a number ({e})")))?;
                    if !(sigma.is_finite() && sigma > 0.0 && sigma <= 8.0) {
                        return Err(bad("SIGMA must be in (0, 8]".into()));
                    }
                    Ok(KeySetKind::Lognormal { sigma })
                }
                _ => Err(bad("expected at most one argument (SIGMA)".into())),
            },
            "uniform-dense" | "uniform_dense" | "udense" => no_args(KeySetKind::UniformDense),
            "uniform-sparse" | "uniform_sparse" | "usparse" => match args.as_slice() {
                [] => Ok(KeySetKind::UniformSparse { bits: 64 }),
                [b] => {
                    let bits = num(b)?;
                    if !(1..=64).contains(&bits) {
                        return Err(bad("BITS must be in 1..=64".into()));
                    }
                    Ok(KeySetKind::UniformSparse { bits: bits as u32 })
                }
                _ => Err(bad("expected at most one argument (BITS)".into())),
            },
            "osm" | "map-like" | "maplike" => no_args(KeySetKind::Osm),
            _ => Err(WorkloadError::UnknownName {
                kind: "key set",
                given: s.to_string(),
                valid: KEYSET_NAMES,
            }),
        }
    }
}

impl fmt::Display for KeySetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySetKind::Linear => write!(f, "linear"),
            KeySetKind::Segmented { segment, gap } => write!(f, "seg:{segment}:{gap}"),
            KeySetKind::Normal => write!(f, "normal"),
            KeySetKind::Lognormal { sigma } => write!(f, "lognormal:{sigma}"),
            KeySetKind::UniformDense => write!(f, "uniform-dense"),
            KeySetKind::UniformSparse { bits } => write!(f, "uniform-sparse:{bits}"),
            KeySetKind::Osm => write!(f, "osm"),
        }
    }
}

/// Inverse of the standard normal CDF: P. J. Acklam's rational approximation refined by one
/// Halley step (about 1e-15 relative error). `p` must be in (0, 1).
pub fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_671_010_114_147,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.02425;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    };
    // One Halley step on Φ(x) - p (Acklam's refinement) brings the raw approximation (error up
    // to ~1e-5 near the region boundaries, which would break monotonicity of the key sets) to
    // full double precision.
    let e = 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// Parameters of the quantile-based sets (normal, lognormal): key_at(i) lies in the integer cell
/// `[K(i), K(i+1))`, where `g(i)` is the distribution's quantile function at `i/n` (clamped away
/// from 0 and 1). Normal: `K(i) = floor(n * (g(i) - g(0)))`, cells at least 2 wide. Lognormal:
/// `K(i) = floor(64n * (g(i) - g(0))) + i`; the `+ i` makes every cell at least one integer wide.
/// So keys are unique and ascending by construction.
#[derive(Clone, Debug)]
struct Quantile {
    n: u64,
    scale: f64,
    g0: f64,
    sigma: Option<f64>,
}

impl Quantile {
    #[inline]
    fn g(&self, i: u64) -> f64 {
        let n = self.n as f64;
        let p = (i as f64 / n).clamp(0.25 / n, 1.0 - 0.25 / n);
        let z = inverse_normal_cdf(p);
        match self.sigma {
            None => z,
            Some(s) => (s * z).exp(),
        }
    }

    #[inline]
    fn cell_start(&self, i: u64) -> u64 {
        let v = (self.scale * (self.g(i) - self.g0)).max(0.0);
        match self.sigma {
            // Normal: cells are at least sqrt(2π) > 2 units wide at scale n, so the floors are
            // strictly increasing without help.
            None => v as u64,
            // Lognormal: the lower tail is flat (cells narrower than one unit), so add i.
            Some(_) => (v as u64).saturating_add(i),
        }
    }
}

#[derive(Clone, Debug)]
enum Inner {
    Linear,
    Segmented { segment: u64, gap: u64 },
    Quantile(Quantile),
    UniformDense,
    UniformSparse { width: u64 },
    Osm { base: Vec<u64> },
}

/// An indexable, sorted, unique key set of `n` keys.
#[derive(Clone, Debug)]
pub struct KeySet {
    kind: KeySetKind,
    n: u64,
    seed: u64,
    inner: Inner,
}

/// Order in which a key set is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadOrder {
    /// Ascending key order.
    Sequential,
    /// A keyed pseudo-random permutation of the keys (the `u64` is the permutation seed).
    Random(u64),
}

impl FromStr for LoadOrder {
    type Err = WorkloadError;

    /// Parses `sequential` / `ordered` / `sorted`, or `random` (seed 0) / `random:SEED`.
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.split_once(':') {
            None if matches!(lower.as_str(), "sequential" | "ordered" | "sorted") => {
                Ok(LoadOrder::Sequential)
            }
            None if lower == "random" => Ok(LoadOrder::Random(0)),
            Some(("random", seed)) => {
                seed.parse()
                    .map(LoadOrder::Random)
                    .map_err(|e| WorkloadError::BadArguments {
                        kind: "load order",
                        given: s.to_string(),
                        reason: format!("seed `{seed}` is not an unsigned integer ({e})"),
                    })
            }
            _ => Err(WorkloadError::UnknownName {
                kind: "load order",
                given: s.to_string(),
                valid: "sequential, random, random:SEED",
            }),
        }
    }
}

/// Encodes a key as 16 bytes: the 8-byte big-endian `u64` followed by 8 zero bytes. The encoding
/// preserves order under byte-wise comparison (memcmp), like Bourbon's 16-byte integer keys.
#[inline]
pub fn encode_key16(key: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&key.to_be_bytes());
    out
}

/// Decodes [`encode_key16`]; `None` if the padding is not zero.
pub fn decode_key16(bytes: &[u8; 16]) -> Option<u64> {
    if bytes[8..].iter().any(|&b| b != 0) {
        return None;
    }
    let mut be = [0u8; 8];
    be.copy_from_slice(&bytes[..8]);
    Some(u64::from_be_bytes(be))
}

impl KeySet {
    /// Builds a key set of `n >= 1` keys. O(1) work except `osm` (O(n/64)).
    pub fn new(kind: KeySetKind, n: u64, seed: u64) -> Result<Self> {
        check_nonzero("n", n)?;
        let too_many = |reason: &'static str| WorkloadError::InvalidParameter {
            name: "n",
            value: n.to_string(),
            reason,
        };
        let inner = match &kind {
            KeySetKind::Linear => Inner::Linear,
            KeySetKind::Segmented { segment, gap } => {
                if *segment == 0 {
                    return Err(WorkloadError::Empty { name: "segment" });
                }
                let segs = (n - 1) / segment;
                segs.checked_mul(*gap)
                    .and_then(|g| g.checked_add(n))
                    .ok_or_else(|| too_many("segmented keys would overflow u64"))?;
                Inner::Segmented {
                    segment: *segment,
                    gap: *gap,
                }
            }
            KeySetKind::Normal | KeySetKind::Lognormal { .. } => {
                if n > 1 << 32 {
                    return Err(too_many("normal/lognormal sets support n <= 2^32"));
                }
                let sigma = match kind {
                    KeySetKind::Lognormal { sigma } => {
                        crate::error::check_nonneg("sigma", sigma)?;
                        Some(sigma)
                    }
                    _ => None,
                };
                let mut q = Quantile {
                    n,
                    scale: if sigma.is_some() {
                        64.0 * n as f64
                    } else {
                        n as f64
                    },
                    g0: 0.0,
                    sigma,
                };
                q.g0 = q.g(0);
                let span = q.scale * (q.g(n) - q.g0) + n as f64;
                if !(span.is_finite() && span < 9.0e18) {
                    return Err(too_many("key span would overflow u64 for this n and sigma"));
                }
                Inner::Quantile(q)
            }
            KeySetKind::UniformDense => {
                if n > u64::MAX / 2 {
                    return Err(too_many("uniform-dense supports n <= 2^63"));
                }
                Inner::UniformDense
            }
            KeySetKind::UniformSparse { bits } => {
                let space = 1u128 << *bits;
                if u128::from(n) > space {
                    return Err(too_many("uniform-sparse needs n <= 2^bits"));
                }
                // Stratum width floor(2^bits / n) >= 1.
                let width = (space / u128::from(n)) as u64;
                Inner::UniformSparse { width }
            }
            KeySetKind::Osm => Inner::Osm {
                base: osm_cluster_bases(n, seed)?,
            },
        };
        Ok(Self {
            kind,
            n,
            seed,
            inner,
        })
    }

    /// Parses a key-set name and builds it (see [`KeySetKind::from_str`]).
    pub fn from_name(name: &str, n: u64, seed: u64) -> Result<Self> {
        Self::new(name.parse()?, n, seed)
    }

    /// The kind of this set.
    pub fn kind(&self) -> &KeySetKind {
        &self.kind
    }

    /// Number of keys.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Always false: sets have at least one key.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The `i`-th smallest key, or `None` if `i >= len()`.
    pub fn get(&self, i: u64) -> Option<u64> {
        (i < self.n).then(|| self.key_at(i))
    }

    /// The `i`-th smallest key. `i` must be `< len()`; larger indices are reduced modulo `len()`
    /// (never a panic, never a key outside the set).
    #[inline]
    pub fn key_at(&self, i: u64) -> u64 {
        let i = if i >= self.n { i % self.n } else { i };
        match &self.inner {
            Inner::Linear => i,
            Inner::Segmented { segment, gap } => i + (i / segment) * gap,
            Inner::Quantile(q) => {
                let lo = q.cell_start(i);
                let hi = q.cell_start(i + 1).max(lo + 1);
                lo + hash3(self.seed, 0x9a, i) % (hi - lo)
            }
            Inner::UniformDense => 2 * i + (hash3(self.seed, 0xd5, i) & 1),
            Inner::UniformSparse { width } => {
                i * width + (((hash3(self.seed, 0x5a, i) as u128 * *width as u128) >> 64) as u64)
            }
            Inner::Osm { base } => {
                let c = i / OSM_CLUSTER_KEYS;
                let j = i % OSM_CLUSTER_KEYS;
                let stride = osm_stride(self.seed, c);
                let b = base.get(c as usize).copied().unwrap_or(0);
                b + j * stride + hash3(self.seed, 0x05, i) % stride
            }
        }
    }

    /// Ascending iterator over all keys (streaming; for quantile sets it reuses the previous
    /// cell boundary so each key costs one quantile evaluation).
    pub fn iter(&self) -> KeyIter<'_> {
        KeyIter {
            set: self,
            next: 0,
            end: self.n,
            carry: None,
        }
    }

    /// Iterator over all keys in the given load order.
    pub fn load_iter(&self, order: LoadOrder) -> Result<LoadIter<'_>> {
        let perm = match order {
            LoadOrder::Sequential => None,
            LoadOrder::Random(seed) => Some(Permutation::new(self.n, seed)?),
        };
        Ok(LoadIter {
            set: self,
            perm,
            next: 0,
        })
    }
}

/// Ascending iterator over a [`KeySet`].
#[derive(Debug)]
pub struct KeyIter<'a> {
    set: &'a KeySet,
    next: u64,
    end: u64,
    carry: Option<u64>,
}

impl Iterator for KeyIter<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.next >= self.end {
            return None;
        }
        let i = self.next;
        self.next += 1;
        if let Inner::Quantile(q) = &self.set.inner {
            let lo = match self.carry {
                Some(c) => c,
                None => q.cell_start(i),
            };
            let hi = q.cell_start(i + 1).max(lo + 1);
            self.carry = Some(hi);
            return Some(lo + hash3(self.set.seed, 0x9a, i) % (hi - lo));
        }
        Some(self.set.key_at(i))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = usize::try_from(self.end - self.next).unwrap_or(usize::MAX);
        (r, Some(r))
    }
}

/// Iterator over a [`KeySet`] in a [`LoadOrder`].
#[derive(Debug)]
pub struct LoadIter<'a> {
    set: &'a KeySet,
    perm: Option<Permutation>,
    next: u64,
}

impl Iterator for LoadIter<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.next >= self.set.n {
            return None;
        }
        let j = self.next;
        self.next += 1;
        let i = match &self.perm {
            None => j,
            Some(p) => p.apply(j),
        };
        Some(self.set.key_at(i))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let r = usize::try_from(self.set.n - self.next).unwrap_or(usize::MAX);
        (r, Some(r))
    }
}

/// Intra-cluster stride of map-like cluster `c`: log-uniform in `1..=2^OSM_STRIDE_LOG2_MAX`.
#[inline]
fn osm_stride(seed: u64, c: u64) -> u64 {
    1u64 << (hash3(seed, 0x57, c) % (OSM_STRIDE_LOG2_MAX + 1))
}

/// First key of each map-like cluster: a prefix sum of cluster spans and Pareto-distributed gaps,
/// scaled down if needed so that the last key fits in 63 bits.
fn osm_cluster_bases(n: u64, seed: u64) -> Result<Vec<u64>> {
    if n > OSM_KEYS_MAX {
        return Err(WorkloadError::InvalidParameter {
            name: "n",
            value: n.to_string(),
            reason: "the map-like set supports n <= 2^34 (its cluster table is n/8 bytes)",
        });
    }
    let clusters = n.div_ceil(OSM_CLUSTER_KEYS);
    let len = usize::try_from(clusters).map_err(|_| WorkloadError::InvalidParameter {
        name: "n",
        value: n.to_string(),
        reason: "too many keys for the map-like cluster table on this platform",
    })?;
    let span_max = OSM_CLUSTER_KEYS << OSM_STRIDE_LOG2_MAX;
    let mut rng = Xoshiro256::new(seed, 0x05a1);
    // Gap in units of the largest cluster span: Pareto(x_m = 1/8, alpha) so most gaps are small
    // next to a cluster and a few are enormous.
    let mut gaps = Vec::with_capacity(len);
    let mut total = 0.0f64;
    for _ in 0..len {
        let u = rng.next_f64_open0();
        let g = 0.125 * u.powf(-1.0 / OSM_GAP_ALPHA) * span_max as f64;
        let g = g.min(1.0e15);
        total += g + span_max as f64;
        gaps.push(g);
    }
    let budget = 4.0e18;
    let shrink = if total > budget { budget / total } else { 1.0 };
    let mut base = Vec::with_capacity(len);
    let mut at: u64 = mix64(seed) >> 40; // a seed-dependent start below 2^24
    for (c, g) in gaps.iter().enumerate() {
        base.push(at);
        let span = OSM_CLUSTER_KEYS * osm_stride(seed, c as u64);
        at = at
            .checked_add(span)
            .and_then(|a| a.checked_add((g * shrink) as u64 + 1))
            .ok_or(WorkloadError::InvalidParameter {
                name: "n",
                value: n.to_string(),
                reason: "map-like keys would overflow u64",
            })?;
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[&str] = &[
        "linear",
        "seg1",
        "seg10",
        "normal",
        "lognormal",
        "uniform-dense",
        "uniform-sparse",
        "osm",
    ];

    fn assert_sorted_unique(set: &KeySet) {
        let keys: Vec<u64> = set.iter().collect();
        assert_eq!(keys.len() as u64, set.len());
        for w in keys.windows(2) {
            assert!(w[0] < w[1], "{}: {} !< {}", set.kind(), w[0], w[1]);
        }
        for (i, &k) in keys.iter().enumerate().step_by(97) {
            assert_eq!(
                set.key_at(i as u64),
                k,
                "{}: iter and key_at disagree",
                set.kind()
            );
        }
    }

    #[test]
    fn every_set_is_sorted_unique_and_indexable() {
        for name in ALL {
            for &n in &[1u64, 2, 63, 64, 65, 1000, 200_000] {
                let set = KeySet::from_name(name, n, 17).unwrap();
                assert_sorted_unique(&set);
            }
        }
    }

    #[test]
    fn normal_set_stays_unique_at_ten_million() {
        let set = KeySet::from_name("normal", 10_000_000, 3).unwrap();
        assert_sorted_unique(&set);
    }

    #[test]
    fn linear_is_consecutive() {
        let set = KeySet::from_name("linear", 1000, 0).unwrap();
        assert!(set.iter().enumerate().all(|(i, k)| k == i as u64));
    }

    #[test]
    fn seg1_has_a_gap_after_every_100_keys() {
        let set = KeySet::from_name("seg1", 10_000, 0).unwrap();
        let keys: Vec<u64> = set.iter().collect();
        for (i, w) in keys.windows(2).enumerate() {
            let expect_gap = (i + 1) % 100 == 0;
            assert_eq!(w[1] - w[0] > 1, expect_gap, "at {i}");
        }
        let set = KeySet::from_name("seg10:5", 100, 0).unwrap();
        assert_eq!(set.key_at(9), 9);
        assert_eq!(set.key_at(10), 15);
    }

    #[test]
    fn normal_keys_are_bell_shaped() {
        // The middle 68.3% of the keys (one sigma each side) span about 2n key units; a key's
        // position in the key range follows the normal CDF.
        let n = 100_000u64;
        let set = KeySet::from_name("normal", n, 9).unwrap();
        let lo = set.key_at(0) as f64;
        let hi = set.key_at(n - 1) as f64;
        let mid = set.key_at(n / 2) as f64;
        let one_sigma = set.key_at((n as f64 * 0.841_344_7) as u64) as f64 - mid;
        assert!((one_sigma / n as f64 - 1.0).abs() < 0.01, "{one_sigma}");
        assert!(((mid - lo) / (hi - lo) - 0.5).abs() < 0.01);
    }

    #[test]
    fn lognormal_keys_are_right_skewed() {
        let n = 100_000u64;
        let set = KeySet::from_name("lognormal", n, 9).unwrap();
        let median = set.key_at(n / 2) as f64;
        let max = set.key_at(n - 1) as f64;
        // Median of lognormal(0,2) is 1 (times scale n); the max is orders of magnitude higher.
        assert!(max / median > 1000.0);
    }

    #[test]
    fn uniform_sparse_spans_the_64_bit_space() {
        let set = KeySet::from_name("uniform-sparse", 1000, 1).unwrap();
        assert!(set.key_at(999) > u64::MAX / 1000 * 998);
        let mid = set.key_at(500) as f64 / u64::MAX as f64;
        assert!((mid - 0.5).abs() < 0.002);
    }

    #[test]
    fn uniform_sparse_32_bit_stays_in_32_bits() {
        let set = KeySet::from_name("uniform-sparse:32", 100_000, 1).unwrap();
        assert!(set.key_at(99_999) < 1 << 32);
        assert!(set.key_at(99_999) > (1 << 32) / 100_000 * 99_999);
        assert!(KeySet::from_name("uniform-sparse:8", 300, 1).is_err());
        assert!("uniform-sparse:65".parse::<KeySetKind>().is_err());
    }

    #[test]
    fn osm_has_dense_clusters_and_heavy_tailed_gaps() {
        let n = 64 * 2000u64;
        let set = KeySet::from_name("osm", n, 4).unwrap();
        let keys: Vec<u64> = set.iter().collect();
        let mut within = Vec::new();
        let mut between = Vec::new();
        for (i, w) in keys.windows(2).enumerate() {
            let d = (w[1] - w[0]) as f64;
            if (i + 1) % 64 == 0 {
                between.push(d);
            } else {
                within.push(d);
            }
        }
        within.sort_by(f64::total_cmp);
        between.sort_by(f64::total_cmp);
        let med_in = within[within.len() / 2];
        let med_out = between[between.len() / 2];
        let p999_out = between[between.len() * 999 / 1000];
        assert!(med_out > 50.0 * med_in, "{med_out} vs {med_in}");
        assert!(
            p999_out > 100.0 * med_out,
            "tail {p999_out} vs median {med_out}"
        );
    }

    #[test]
    fn same_seed_same_keys_different_seed_different_keys() {
        for name in ["normal", "uniform-sparse", "osm", "uniform-dense"] {
            let a: Vec<u64> = KeySet::from_name(name, 5000, 1).unwrap().iter().collect();
            let b: Vec<u64> = KeySet::from_name(name, 5000, 1).unwrap().iter().collect();
            let c: Vec<u64> = KeySet::from_name(name, 5000, 2).unwrap().iter().collect();
            assert_eq!(a, b, "{name}");
            assert_ne!(a, c, "{name}");
        }
    }

    #[test]
    fn random_load_order_is_a_permutation_of_the_set() {
        let set = KeySet::from_name("seg10", 10_007, 1).unwrap();
        let mut loaded: Vec<u64> = set.load_iter(LoadOrder::Random(5)).unwrap().collect();
        assert_ne!(loaded, set.iter().collect::<Vec<_>>());
        loaded.sort_unstable();
        assert_eq!(loaded, set.iter().collect::<Vec<_>>());
        let seq: Vec<u64> = set.load_iter(LoadOrder::Sequential).unwrap().collect();
        assert_eq!(seq, set.iter().collect::<Vec<_>>());
    }

    #[test]
    fn sixteen_byte_encoding_preserves_order_and_round_trips() {
        let set = KeySet::from_name("uniform-sparse", 1000, 8).unwrap();
        let enc: Vec<[u8; 16]> = set.iter().map(encode_key16).collect();
        assert!(enc.windows(2).all(|w| w[0] < w[1]));
        for (k, e) in set.iter().zip(&enc) {
            assert_eq!(decode_key16(e), Some(k));
        }
        let mut bad = enc[0];
        bad[15] = 1;
        assert_eq!(decode_key16(&bad), None);
    }

    #[test]
    fn bad_names_and_sizes_are_errors_listing_valid_names() {
        let e = "zebra".parse::<KeySetKind>().unwrap_err().to_string();
        assert!(e.contains("linear") && e.contains("osm"), "{e}");
        assert!("seg1:x".parse::<KeySetKind>().is_err());
        assert!("lognormal:-1".parse::<KeySetKind>().is_err());
        assert!("linear:3".parse::<KeySetKind>().is_err());
        assert!(KeySet::from_name("linear", 0, 0).is_err());
        assert!(KeySet::from_name("uniform-dense", u64::MAX, 0).is_err());
        assert!(KeySet::from_name("osm", 1 << 40, 0).is_err());
        assert!(KeySet::from_name("normal", 1 << 33, 0).is_err());
        assert!("sideways".parse::<LoadOrder>().is_err());
        assert_eq!(
            "random:7".parse::<LoadOrder>().unwrap(),
            LoadOrder::Random(7)
        );
    }

    #[test]
    fn out_of_range_index_is_reduced_not_a_panic() {
        let set = KeySet::from_name("osm", 100, 1).unwrap();
        assert_eq!(set.get(100), None);
        assert_eq!(set.key_at(100), set.key_at(0));
    }

    #[test]
    fn inverse_normal_cdf_matches_known_quantiles() {
        assert!(inverse_normal_cdf(0.5).abs() < 1e-12);
        assert!((inverse_normal_cdf(0.975) - 1.959_963_985).abs() < 1e-8);
        assert!((inverse_normal_cdf(0.001) + 3.090_232_306).abs() < 1e-7);
    }
}
