//! EV-LFU with remembered frequencies and frequency admission (`ev-lfu-hist`, not in the
//! source). EV-LFU and LFU forget a key's count when it leaves the cache, so under a steady
//! skewed workload the cache keeps churning between popular keys and the one-off tail keys
//! every request brings; the static oracle that keeps the most used keys (docs/evstore.md,
//! "What limits it") does not. This policy keeps, for every key seen (cached or not), a value
//! that each access raises by a weight, and:
//!
//! * evicts the cached key of lowest value (ties to the least recently used), and
//! * admits a missed key into a full cache only if its value is above that victim's; otherwise
//!   the row is served and not cached (TinyLFU's rule, with exact counts instead of a sketch).
//!
//! The weight of an access is `aggHit + 1` (group-aware: an access from a request whose other
//! keys hit counts more, as in `ev-lfu-sum`) or `1` (`-flat`: plain access counts, a "perfect
//! LFU" with admission; it shows how much of the gain is the memory of counts and how much the
//! group weighting). Values are halved every `window × capacity` accesses (`-wN`; default no
//! halving: the calibrated workload is stationary, chosen on a validation seed), which lets a
//! changing workload's old favourites go.
//!
//! Memory: the exact history holds one entry per distinct key seen, at most `history_max` (16 ×
//! the capacity by default, `-hN` for N, and at least 1024); when full, a halving runs and drops
//! keys whose value reaches 0, and a new key that still finds no room is counted as value 0 (it
//! can enter only an empty slot). At about 20 bytes an entry, 16 entries per cached item cost
//! more than the item's fp32 row (144 bytes at dim 36), memory the cache budget does not count.
//! `-sN` keeps the history in a count-min sketch instead (4 rows of N 16-bit counters per
//! cached item, conservative update: 8·N bytes per item). O(log n) per update (an ordered set of
//! the cached keys).
//! Thread-safety: owned by one thread (`Send`).

use super::sketch::{mix, ROWS, SEEDS};
use super::{map, FreqOrder, Map, Policy};

/// A count-min sketch of 16-bit counters (conservative update, saturating), the compact form of
/// the history (`-sN`: N counters per row per cached item; 4 rows).
struct Sketch16 {
    counters: Vec<u16>,
    mask: usize,
}

impl Sketch16 {
    fn new(width: usize) -> Self {
        let width = width.max(16).next_power_of_two();
        Sketch16 {
            counters: vec![0; width * ROWS],
            mask: width - 1,
        }
    }
    fn slot(&self, key: u64, row: usize) -> usize {
        row * (self.mask + 1) + (mix(key, SEEDS[row]) as usize & self.mask)
    }
    fn estimate(&self, key: u64) -> u64 {
        (0..ROWS)
            .map(|r| u64::from(self.counters[self.slot(key, r)]))
            .min()
            .unwrap_or(0)
    }
    /// Adds `w` to `key`'s counters (only those at the minimum grow); returns the new estimate.
    fn add(&mut self, key: u64, w: u64) -> u64 {
        let est = self.estimate(key);
        let new = (est + w).min(u64::from(u16::MAX));
        for r in 0..ROWS {
            let s = self.slot(key, r);
            if u64::from(self.counters[s]) < new {
                self.counters[s] = new as u16;
            }
        }
        new
    }
    fn halve(&mut self) {
        for c in &mut self.counters {
            *c >>= 1;
        }
    }
}

/// History entries per cached item at most.
pub const HISTORY_PER_ITEM: usize = 16;
/// History entries at least (small caches still need to count their candidates).
pub const HISTORY_MIN: usize = 1024;

/// See the module doc.
pub struct EvLfuHist {
    cap: usize,
    max_score: u32,
    group: bool,
    /// Accesses between halvings (0: never).
    window: u64,
    accesses: u64,
    clock: u64,
    cached: FreqOrder,
    history: Map<u64>,
    history_max: usize,
    sketch: Option<Sketch16>,
    /// Misses served without being cached.
    pub rejected: u64,
    /// Halvings run.
    pub halvings: u64,
}

impl EvLfuHist {
    /// An empty policy of `cap` items over `max_score` tables; `group` weighs accesses by
    /// aggHit + 1; `window` (in multiples of `cap` accesses, 0 = never) sets the halving.
    pub fn new(cap: usize, max_score: u32, group: bool, window: u32) -> Self {
        Self::with_history(cap, max_score, group, window, HISTORY_PER_ITEM)
    }

    /// [`EvLfuHist::new`] with `per_item` history entries per cached item.
    pub fn with_history(
        cap: usize,
        max_score: u32,
        group: bool,
        window: u32,
        per_item: usize,
    ) -> Self {
        EvLfuHist {
            cap,
            max_score,
            group,
            window: u64::from(window) * cap as u64,
            accesses: 0,
            clock: 0,
            cached: FreqOrder::default(),
            history: map(),
            history_max: cap.saturating_mul(per_item).max(HISTORY_MIN),
            sketch: None,
            rejected: 0,
            halvings: 0,
        }
    }

    /// Keeps the history in a count-min sketch of `per_item` 16-bit counters per row per cached
    /// item instead of an exact map.
    pub fn sketched(mut self, per_item: usize) -> Self {
        self.sketch = Some(Sketch16::new(self.cap.saturating_mul(per_item.max(1))));
        self
    }

    fn weight(&self, agg: u32) -> u64 {
        if self.group {
            u64::from(agg.min(self.max_score)) + 1
        } else {
            1
        }
    }

    /// Halves every remembered value (cached keys re-ordered), dropping uncached zeros.
    fn halve(&mut self) {
        self.halvings += 1;
        if let Some(sk) = &mut self.sketch {
            sk.halve();
            let keys: Vec<u64> = self.cached.keys().collect();
            for k in keys {
                let v = sk.estimate(k).max(1);
                let stamp = self.clock;
                self.cached.set(k, v, stamp);
            }
            return;
        }
        let cached = &self.cached;
        self.history.retain(|k, v| {
            *v /= 2;
            *v > 0 || cached.contains(*k)
        });
        let keys: Vec<u64> = self.history.keys().copied().collect();
        for k in keys {
            if let Some(old) = self.cached.value(k) {
                let v = self.history.get(&k).copied().unwrap_or(0);
                if v != old {
                    let stamp = self.clock;
                    self.cached.set(k, v, stamp);
                }
            }
        }
    }

    /// Counts one access of `key`; returns its new value.
    fn count(&mut self, key: u64, agg: u32) -> u64 {
        self.accesses += 1;
        if self.window > 0 && self.accesses.is_multiple_of(self.window) {
            self.halve();
        }
        let w = self.weight(agg);
        if let Some(sk) = &mut self.sketch {
            return sk.add(key, w);
        }
        if !self.history.contains_key(&key) && self.history.len() >= self.history_max {
            self.halve();
            if self.history.len() >= self.history_max {
                return 0;
            }
        }
        let v = self.history.entry(key).or_insert(0);
        *v = v.saturating_add(w);
        *v
    }

    fn capped(&self, v: u64) -> u32 {
        v.min(u64::from(self.max_score)) as u32
    }
}

impl Policy for EvLfuHist {
    fn contains(&self, key: u64) -> bool {
        self.cached.contains(key)
    }
    fn on_hit(&mut self, key: u64, agg: u32) {
        let v = self.count(key, agg);
        self.clock += 1;
        let v = v.max(1);
        self.cached.set(key, v, self.clock);
    }
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 {
            return;
        }
        let v = self.count(key, agg);
        self.clock += 1;
        if self.cached.len() >= self.cap {
            let victim = self.cached.first().and_then(|k| self.cached.value(k));
            if victim.is_some_and(|vv| v <= vv) {
                self.rejected += 1;
                return;
            }
            if let Some((k, vv)) = self.cached.pop_first() {
                evicted.push((k, self.capped(vv)));
            }
        }
        self.cached.set(key, v.max(1), self.clock);
    }
    fn remove(&mut self, key: u64) -> bool {
        self.cached.remove(key).is_some()
    }
    fn len(&self) -> usize {
        self.cached.len()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn score(&self, key: u64) -> u32 {
        self.cached.value(key).map_or(0, |v| self.capped(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key used often before it was evicted comes back ahead of keys seen once; a one-off key
    /// does not displace a key used more.
    #[test]
    fn remembered_counts_admit_and_keep_the_most_used() {
        let mut p = EvLfuHist::new(2, 4, false, 0);
        let mut ev = Vec::new();
        for _ in 0..3 {
            p.access(1, &mut ev);
        }
        p.access(2, &mut ev);
        assert!(p.contains(1) && p.contains(2));
        // 3 (value 1) does not displace 2 (value 1): ties keep the cached key.
        assert!(!p.access(3, &mut ev));
        assert!(!p.contains(3) && p.rejected == 1);
        // A second access gives 3 value 2 > 2's value 1: it enters, 2 leaves.
        assert!(!p.access(3, &mut ev));
        assert!(p.contains(3) && !p.contains(2));
        assert_eq!(ev, [(2, 1)]);
        // 2 remembers its count: two more accesses bring it back ahead of 3 (value 2).
        p.access(2, &mut ev);
        assert!(!p.contains(2), "value 2 does not beat 3's 2");
        p.access(2, &mut ev);
        assert!(p.contains(2) && p.contains(1) && !p.contains(3));
    }

    /// Group weights: an access from a request whose other keys hit counts aggHit + 1.
    #[test]
    fn group_weights_count_agg_plus_one() {
        let mut p = EvLfuHist::new(4, 3, true, 0);
        let mut ev = Vec::new();
        p.on_miss(7, 2, &mut ev);
        assert_eq!(p.cached.value(7), Some(3));
        p.on_hit(7, 3);
        assert_eq!(p.cached.value(7), Some(7));
        assert_eq!(p.score(7), 3, "scores are capped at N");
    }

    /// The sketched history admits and keeps as the exact one does on a small stream.
    #[test]
    fn sketched_history_admits_the_more_used() {
        let mut p = EvLfuHist::new(2, 4, false, 0).sketched(4);
        let mut ev = Vec::new();
        for _ in 0..3 {
            p.access(1, &mut ev);
        }
        p.access(2, &mut ev);
        assert!(!p.access(3, &mut ev) && !p.contains(3));
        assert!(!p.access(3, &mut ev) && p.contains(3) && !p.contains(2));
        assert!(p.contains(1));
    }

    /// Halving every window lets a stale favourite go; the history stays bounded.
    #[test]
    fn halving_ages_values_and_bounds_the_history() {
        let mut p = EvLfuHist::new(1, 1, false, 4);
        let mut ev = Vec::new();
        for _ in 0..3 {
            p.access(1, &mut ev); // value 3, then a halving at access 4 below
        }
        p.access(2, &mut ev); // access 4: halving (1 → 1, 2 → 0 dropped), 2 rejected
        assert_eq!(p.halvings, 1);
        assert!(p.contains(1));
        let mut q = EvLfuHist::new(1, 1, false, 0);
        for k in 0..(HISTORY_MIN as u64 * 3) {
            q.access(k, &mut ev);
        }
        assert!(q.history.len() <= HISTORY_MIN);
    }
}
