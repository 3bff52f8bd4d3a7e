//! A two-tier cache model: an uncompressed application tier (any [`ReplacementPolicy`]) over a
//! compressed second tier (LRU of pages or of compressed blocks), sharing `memory_bytes`.
//!
//! It is the "real system" of the simulator and the exact (unsampled, one instance per size)
//! reference that GhostSim's sampled, pipelined estimate is tested against.
//!
//! Thread-safety: single owner, `Send`. Invariants: `app.capacity() + second capacity ==
//! memory_bytes` (the second tier without any read-ahead allowance: the real tier has no bonus);
//! an application hit never touches the second tier (its recency is not refreshed, as in the
//! kernel where a block in the application cache causes no page access).

use crate::access::SecondTier;
use crate::policy::{BlockKey, Lru, PolicyKind, ReplacementPolicy};

/// Outcome of one access to a [`TwoTier`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierHit {
    /// Uncompressed tier hit.
    App,
    /// Second tier hit (decompression and, for pages, a kernel crossing).
    Second,
    /// Device read.
    Miss,
}

/// Touches a block's pages (or the block) in a second-tier LRU; `true` if all were resident.
pub(crate) fn second_tier_access(
    lru: &mut Lru,
    tier: SecondTier,
    file: u64,
    offset: u64,
    compressed_bytes: u64,
) -> bool {
    match tier {
        SecondTier::Pages { page_bytes, .. } => {
            let page = u64::from(page_bytes.max(1));
            let first = offset / page;
            // Saturating: an offset near u64::MAX from a confused caller must not panic.
            let last = offset.saturating_add(compressed_bytes.max(1) - 1) / page;
            let all = (first..=last).all(|p| lru.contains(&BlockKey { file, unit: p }));
            for p in first..=last {
                lru.access(BlockKey { file, unit: p }, page);
            }
            all
        }
        SecondTier::Blocks => lru.access(BlockKey { file, unit: offset }, compressed_bytes),
    }
}

/// The modelled pair of caches.
pub struct TwoTier {
    app: Box<dyn ReplacementPolicy>,
    second: Lru,
    tier: SecondTier,
    memory_bytes: u64,
}

impl TwoTier {
    /// Application tier of `app_bytes` (clamped to `memory_bytes`) with `policy`; the second tier
    /// gets the rest.
    pub fn new(memory_bytes: u64, app_bytes: u64, policy: PolicyKind, tier: SecondTier) -> Self {
        let a = app_bytes.min(memory_bytes);
        Self {
            app: policy.build(a),
            second: Lru::new(memory_bytes - a),
            tier,
            memory_bytes,
        }
    }

    /// Moves the split: the application tier gets `app_bytes`, the second tier the rest.
    pub fn set_app_bytes(&mut self, app_bytes: u64) {
        let a = app_bytes.min(self.memory_bytes);
        // Shrink first so that the sum never exceeds the budget.
        if a < self.app.capacity() {
            self.app.set_capacity(a);
            self.second.set_capacity(self.memory_bytes - a);
        } else {
            self.second.set_capacity(self.memory_bytes - a);
            self.app.set_capacity(a);
        }
    }

    /// Sets both capacities independently (models an engine whose tiers do not add up to the
    /// budget, e.g. per-entry overhead in the application cache). `app_bytes()` reports the
    /// application capacity given here.
    pub fn set_split(&mut self, app_bytes: u64, second_bytes: u64) {
        self.app.set_capacity(app_bytes);
        self.second.set_capacity(second_bytes);
    }

    /// Application tier capacity.
    pub fn app_bytes(&self) -> u64 {
        self.app.capacity()
    }

    /// Reads a block through both tiers.
    pub fn access(
        &mut self,
        file: u64,
        offset: u64,
        compressed: u64,
        uncompressed: u64,
    ) -> TierHit {
        if self
            .app
            .access(BlockKey { file, unit: offset }, uncompressed)
        {
            return TierHit::App;
        }
        if second_tier_access(&mut self.second, self.tier, file, offset, compressed) {
            TierHit::Second
        } else {
            TierHit::Miss
        }
    }
}

/// Hit counts over a span of accesses, and the expected latency they imply.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HitCounts {
    /// Accesses.
    pub accesses: u64,
    /// Application tier hits.
    pub app_hits: u64,
    /// Second tier hits (among application misses).
    pub second_hits: u64,
}

impl HitCounts {
    /// Adds one outcome.
    #[inline]
    pub fn add(&mut self, h: TierHit) {
        self.accesses += 1;
        match h {
            TierHit::App => self.app_hits += 1,
            TierHit::Second => self.second_hits += 1,
            TierHit::Miss => {}
        }
    }

    /// H_a: application hit ratio (1 when empty).
    pub fn h_a(&self) -> f64 {
        if self.accesses == 0 {
            1.0
        } else {
            self.app_hits as f64 / self.accesses as f64
        }
    }

    /// H_k: second-tier hit ratio among application misses (1 when there were none).
    pub fn h_k(&self) -> f64 {
        let misses = self.accesses - self.app_hits;
        if misses == 0 {
            1.0
        } else {
            self.second_hits as f64 / misses as f64
        }
    }

    /// L_e = (1 − H_a)·(C_a + (1 − H_k)·C_k).
    pub fn expected_latency(&self, app_miss_ns: f64, second_miss_ns: f64) -> f64 {
        expected_latency(self.h_a(), self.h_k(), app_miss_ns, second_miss_ns)
    }
}

/// The Symbiosis cost model: L_e = (1 − H_a)·(C_a + (1 − H_k)·C_k) (§3.2 of the paper).
#[inline]
pub fn expected_latency(h_a: f64, h_k: f64, app_miss_ns: f64, second_miss_ns: f64) -> f64 {
    (1.0 - h_a) * (app_miss_ns + (1.0 - h_k) * second_miss_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misaligned_block_needs_every_page_it_spans() {
        let tier = SecondTier::Pages {
            page_bytes: 4096,
            readahead_allowance: 0.0,
        };
        let mut lru = Lru::new(1 << 20);
        // Block A covers pages 0-1; block B covers page 1-2: reading B after A misses on page 2.
        assert!(!second_tier_access(&mut lru, tier, 1, 1000, 4000));
        assert!(!second_tier_access(&mut lru, tier, 1, 5000, 4000));
        // A block inside already-read pages hits without having been read itself.
        assert!(second_tier_access(&mut lru, tier, 1, 100, 500));
    }

    #[test]
    fn extreme_offsets_and_zero_lengths_do_not_panic() {
        let mut t = TwoTier::new(
            1 << 20,
            1 << 19,
            PolicyKind::Lru,
            SecondTier::kernel_default(),
        );
        assert_eq!(t.access(1, u64::MAX - 10, 4096, 8192), TierHit::Miss);
        assert_eq!(t.access(1, 0, 0, 0), TierHit::Miss);
        assert_eq!(t.access(1, 0, 0, 0), TierHit::App);
    }

    #[test]
    fn resizing_keeps_the_budget() {
        let mut t = TwoTier::new(1000, 100, PolicyKind::Lru, SecondTier::Blocks);
        for o in 0..100 {
            t.access(1, o * 10, 5, 10);
        }
        t.set_app_bytes(900);
        assert_eq!(t.app_bytes(), 900);
        assert_eq!(t.second.capacity(), 100);
        assert!(t.second.used() <= 100);
        t.set_app_bytes(5000);
        assert_eq!(t.app_bytes(), 1000);
    }

    #[test]
    fn expected_latency_matches_the_formula() {
        let c = HitCounts {
            accesses: 100,
            app_hits: 50,
            second_hits: 25,
        };
        // (1 - 0.5) * (2 + 0.5 * 10) = 3.5
        assert!((c.expected_latency(2.0, 10.0) - 3.5).abs() < 1e-12);
    }
}
