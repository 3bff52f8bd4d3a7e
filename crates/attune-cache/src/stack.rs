//! Byte-weighted LRU stack distances in O(log n) per access, and the miss-ratio curve they give.
//!
//! Mattson's stack property: an LRU cache of `C` bytes hits an access exactly when the bytes of
//! the distinct blocks touched since the previous access to the same block, plus the block
//! itself, are at most `C`. [`StackDistance`] computes that byte distance with a Fenwick tree
//! indexed by access time: position `t` holds the charge of the block whose latest access was at
//! time `t` (zero otherwise), so the bytes above a block in the recency stack are a prefix-sum
//! difference. A hash map gives each block's latest time. Times are renumbered (compacted) when
//! the array fills, so memory stays proportional to the resident blocks.
//!
//! The structure is itself an LRU of `limit_bytes`: blocks beyond the limit are forgotten and
//! their next access reads as a cold miss, which is exact for every capacity up to the limit.
//! One pass therefore yields hit counts for every candidate cache size (Symbiosis §4.2.2).
//!
//! Thread-safety: single owner, `Send`. Invariants: `tree` sums equal the charges of resident
//! blocks; `resident_bytes <= limit_bytes` after each access; each resident block has exactly one
//! live slot.

use crate::policy::{fast_map, fingerprint, BlockKey, FastMap};

/// Fewest time slots kept. Default 64 (768 B of slots): small enough that a ghost sampled at
/// R = 1/64 of a 32 MiB budget (about 250 blocks) stays a few KiB, large enough that a tiny
/// ghost does not renumber every few accesses.
const SLOTS_MIN: usize = 64;

/// Outcome of one access to a [`StackDistance`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distance {
    /// Bytes of the block and of the distinct blocks accessed since its previous access.
    Bytes(u64),
    /// First access, or the block was forgotten beyond the limit: a miss at every size.
    Cold,
}

impl Distance {
    /// Whether an LRU cache of `capacity_bytes` would hit this access.
    #[inline]
    pub fn hits_within(self, capacity_bytes: u64) -> bool {
        matches!(self, Distance::Bytes(d) if d <= capacity_bytes)
    }
}

/// Fenwick tree + last-access map computing byte stack distances.
///
/// Memory per remembered block (the target: ghost memory <= 0.2 % of M): a fingerprint
/// (8 B) and a charge (4 B) per time slot, 8 B of tree per slot, with at most twice as many
/// slots as live blocks after a renumbering, plus one `(u64, u32)` map entry — about 60 B,
/// half of the previous layout's 16-byte keys and 8-byte charges in padded 32-byte slots.
#[derive(Debug)]
pub struct StackDistance {
    /// Fenwick tree over 1-based time positions.
    tree: Vec<i64>,
    /// `keys[t]`: fingerprint of the block accessed at time `t` (index 0 unused).
    keys: Vec<u64>,
    /// `charges[t]`: its charge while that access is the block's latest, else 0 (dead slot).
    charges: Vec<u32>,
    last: FastMap<u64, u32>,
    /// Next time to assign (1-based).
    now: usize,
    /// Oldest position that may still be live.
    oldest: usize,
    resident_bytes: u64,
    limit_bytes: u64,
    /// Blocks forgotten beyond the limit since creation (or the last clear).
    forgotten: u64,
}

impl StackDistance {
    /// An empty stack that remembers up to `limit_bytes` of most recent blocks.
    pub fn new(limit_bytes: u64) -> Self {
        let mut s = Self {
            tree: Vec::new(),
            keys: Vec::new(),
            charges: Vec::new(),
            last: fast_map(),
            now: 1,
            oldest: 1,
            resident_bytes: 0,
            limit_bytes,
            forgotten: 0,
        };
        s.reset_arrays(SLOTS_MIN);
        s
    }

    fn reset_arrays(&mut self, slots: usize) {
        self.tree = vec![0; slots + 1];
        self.keys = vec![0; slots + 1];
        self.charges = vec![0; slots + 1];
    }

    /// The byte limit.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Bytes of resident (remembered) blocks.
    pub fn resident_bytes(&self) -> u64 {
        self.resident_bytes
    }

    /// Blocks forgotten beyond the limit so far: while 0, every block ever accessed is
    /// remembered and a [`Distance::Cold`] is exactly a first access.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Remembered blocks.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Heap bytes held (hashbrown: one control byte plus one slot per bucket).
    pub fn metadata_bytes(&self) -> usize {
        self.tree.capacity() * 8
            + self.keys.capacity() * 8
            + self.charges.capacity() * 4
            + self.last.capacity() * (std::mem::size_of::<(u64, u32)>() + 1)
    }

    #[inline]
    fn add(&mut self, pos: usize, delta: i64) {
        let mut i = pos;
        while i < self.tree.len() {
            self.tree[i] += delta;
            i += i & i.wrapping_neg();
        }
    }

    #[inline]
    fn prefix(&self, pos: usize) -> i64 {
        let mut i = pos;
        let mut s = 0;
        while i > 0 {
            s += self.tree[i];
            i -= i & i.wrapping_neg();
        }
        s
    }

    /// Records an access to `key` charged `charge` bytes (clamped to 1..=u32::MAX) and returns
    /// its stack distance.
    pub fn access(&mut self, key: BlockKey, charge: u64) -> Distance {
        if self.now >= self.keys.len() {
            self.compact();
        }
        let charge = charge.clamp(1, u64::from(u32::MAX));
        let fp = fingerprint(&key);
        let dist = match self.last.get(&fp).copied() {
            Some(t) => {
                let t = t as usize;
                let above = self.prefix(self.now - 1) - self.prefix(t);
                let old = u64::from(self.charges[t]);
                self.add(t, -(old as i64));
                self.charges[t] = 0;
                self.resident_bytes -= old;
                Distance::Bytes(above.max(0) as u64 + charge)
            }
            None => Distance::Cold,
        };
        let t = self.now;
        self.now += 1;
        self.keys[t] = fp;
        self.charges[t] = charge as u32;
        self.add(t, charge as i64);
        self.last.insert(fp, t as u32);
        self.resident_bytes += charge;
        self.evict_beyond_limit();
        dist
    }

    fn evict_beyond_limit(&mut self) {
        while self.resident_bytes > self.limit_bytes && self.oldest < self.now {
            let t = self.oldest;
            self.oldest += 1;
            let c = self.charges[t];
            if c != 0 {
                self.charges[t] = 0;
                self.add(t, -i64::from(c));
                self.resident_bytes -= u64::from(c);
                self.last.remove(&self.keys[t]);
                self.forgotten += 1;
            }
        }
    }

    /// Renumbers live accesses 1..=n in time order and rebuilds the tree (O(n)).
    fn compact(&mut self) {
        let live: Vec<(u64, u32)> = (self.oldest..self.now)
            .filter(|&t| self.charges[t] != 0)
            .map(|t| (self.keys[t], self.charges[t]))
            .collect();
        let slots = (2 * live.len()).max(SLOTS_MIN);
        self.reset_arrays(slots);
        for (i, &(fp, c)) in live.iter().enumerate() {
            let t = i + 1;
            self.keys[t] = fp;
            self.charges[t] = c;
            self.tree[t] = i64::from(c);
            self.last.insert(fp, t as u32);
        }
        // O(n) Fenwick build: push each node's sum to its parent.
        for i in 1..self.tree.len() {
            let parent = i + (i & i.wrapping_neg());
            if parent < self.tree.len() {
                self.tree[parent] += self.tree[i];
            }
        }
        self.oldest = 1;
        self.now = live.len() + 1;
        // The map was sized for the peak; give back what the live set does not need.
        self.last.shrink_to_fit();
    }

    /// Forgets everything and returns the memory (a cleared stack holds no heap at all).
    pub fn clear_and_free(&mut self) {
        self.last = fast_map();
        self.tree = Vec::new();
        self.keys = Vec::new();
        self.charges = Vec::new();
        self.now = 1;
        self.oldest = 1;
        self.resident_bytes = 0;
        self.forgotten = 0;
    }
}

/// Histogram of byte stack distances in equal-width buckets: the miss-ratio curve of LRU.
#[derive(Clone, Debug)]
pub struct DistanceHistogram {
    bucket_bytes: u64,
    buckets: Vec<u64>,
    cold: u64,
    total: u64,
}

impl DistanceHistogram {
    /// `buckets` buckets of `bucket_bytes` each (bucket `b` holds distances in
    /// `(b·w, (b+1)·w]`); larger distances count as cold.
    pub fn new(bucket_bytes: u64, buckets: usize) -> Self {
        Self {
            bucket_bytes: bucket_bytes.max(1),
            buckets: vec![0; buckets.max(1)],
            cold: 0,
            total: 0,
        }
    }

    /// Adds one distance.
    #[inline]
    pub fn record(&mut self, d: Distance) {
        self.total += 1;
        match d {
            Distance::Bytes(b) => {
                let i = (b.saturating_sub(1) / self.bucket_bytes) as usize;
                match self.buckets.get_mut(i) {
                    Some(c) => *c += 1,
                    None => self.cold += 1,
                }
            }
            Distance::Cold => self.cold += 1,
        }
    }

    /// Accesses recorded.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// `(cache bytes, miss ratio)` at every bucket edge, from 0 to the histogram's span, with
    /// sizes multiplied by `scale` (1/R for a sampled histogram).
    pub fn curve(&self, scale: f64) -> Vec<(u64, f64)> {
        let mut out = Vec::with_capacity(self.buckets.len() + 1);
        if self.total == 0 {
            return out;
        }
        out.push((0, 1.0));
        let mut hits = 0u64;
        for (i, &c) in self.buckets.iter().enumerate() {
            hits += c;
            let size = ((i as u64 + 1) * self.bucket_bytes) as f64 * scale;
            out.push((size as u64, 1.0 - hits as f64 / self.total as f64));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Lru, ReplacementPolicy};

    fn k(u: u64) -> BlockKey {
        BlockKey { file: 3, unit: u }
    }

    #[test]
    fn distance_counts_distinct_bytes_since_last_access() {
        let mut s = StackDistance::new(1 << 20);
        assert_eq!(s.access(k(1), 10), Distance::Cold);
        assert_eq!(s.access(k(2), 20), Distance::Cold);
        assert_eq!(s.access(k(2), 20), Distance::Bytes(20));
        assert_eq!(s.access(k(3), 5), Distance::Cold);
        assert_eq!(s.access(k(2), 20), Distance::Bytes(25));
        assert_eq!(s.access(k(1), 10), Distance::Bytes(35));
    }

    #[test]
    fn limit_forgets_oldest_and_compaction_keeps_distances() {
        // Tiny limit forces eviction; many accesses force several compactions.
        let mut s = StackDistance::new(100);
        for round in 0..2000u64 {
            for u in 0..10 {
                let d = s.access(k(u), 10);
                if round > 0 {
                    assert_eq!(d, Distance::Bytes(100));
                }
            }
        }
        assert_eq!(s.access(k(99), 10), Distance::Cold);
        assert_eq!(s.access(k(0), 10), Distance::Cold); // pushed out by 99
        assert!(s.resident_bytes() <= 100);
    }

    /// The reading the whole design rests on: one stack pass predicts every LRU size exactly.
    #[test]
    fn stack_distance_equals_separate_lru_simulations_at_every_candidate_size() {
        let seed = 0x51ac_u64;
        println!("seed {seed}");
        let mut x = seed;
        let total = 8u64 << 20;
        let sizes: Vec<u64> = (0..=8).map(|i| i * total / 8).collect();
        let mut lrus: Vec<Lru> = sizes.iter().map(|&c| Lru::new(c)).collect();
        let mut hits = vec![0u64; sizes.len()];
        let mut stack_hits = vec![0u64; sizes.len()];
        let mut stack = StackDistance::new(total);
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Skewed: square a uniform draw; variable charges 1..16 KiB per block.
            let r = ((x >> 11) as f64) / ((1u64 << 53) as f64);
            let u = (r * r * 6000.0) as u64;
            let charge = 1024 + (u * 7919 % 16) * 1024;
            let d = stack.access(k(u), charge);
            for (i, lru) in lrus.iter_mut().enumerate() {
                hits[i] += lru.access(k(u), charge) as u64;
                stack_hits[i] += d.hits_within(sizes[i]) as u64;
            }
        }
        assert_eq!(hits, stack_hits);
        assert!(hits[4] > 0 && hits[4] < hits[8]);
    }

    #[test]
    fn histogram_curve_is_monotone_and_ends_at_cold_share() {
        let mut h = DistanceHistogram::new(10, 4);
        for d in [5, 15, 25, 35, 45] {
            h.record(Distance::Bytes(d));
        }
        h.record(Distance::Cold);
        let c = h.curve(2.0);
        assert_eq!(c.first(), Some(&(0, 1.0)));
        assert_eq!(c.last().map(|p| p.0), Some(80));
        assert!((c[4].1 - 2.0 / 6.0).abs() < 1e-12);
        assert!(c.windows(2).all(|w| w[1].1 <= w[0].1));
    }
}
