//! EV-LFU with accumulated group scores (`ev-lfu-sum`, not in the source): each key's value is
//! the sum over its hits of `aggHit + 1`, so it counts both how often a key is used (LFU) and how
//! close to perfect the requests using it were (EV-LFU). A missed key enters with the weight its
//! [`MissScore`] gives (`1` with `-miss0`). Eviction takes the lowest value, ties to the least
//! recently used. O(log n) per update (an ordered set), not EV-LFU's O(1) score lists.
//! Thread-safety: owned by one thread (`Send`).

use super::{EvConfig, FreqOrder, MissScore, Policy};

/// EV-LFU-sum. See the module doc.
pub struct EvLfuSum {
    cap: usize,
    cfg: EvConfig,
    clock: u64,
    freq: FreqOrder,
}

impl EvLfuSum {
    /// An empty EV-LFU-sum of `cap` items.
    pub fn new(cap: usize, cfg: EvConfig) -> Self {
        EvLfuSum {
            cap,
            cfg,
            clock: 0,
            freq: FreqOrder::default(),
        }
    }

    fn weight(&self, agg: u32) -> u64 {
        u64::from(agg.min(self.cfg.max_score)) + 1
    }

    fn capped(&self, v: u64) -> u32 {
        v.min(u64::from(self.cfg.max_score)) as u32
    }
}

impl Policy for EvLfuSum {
    fn contains(&self, key: u64) -> bool {
        self.freq.contains(key)
    }
    fn on_hit(&mut self, key: u64, agg: u32) {
        self.clock += 1;
        let w = self.weight(agg);
        self.freq.add(key, w, self.clock);
    }
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 {
            return;
        }
        self.clock += 1;
        if self.freq.len() >= self.cap {
            if let Some((k, v)) = self.freq.pop_first() {
                evicted.push((k, self.capped(v)));
            }
        }
        let agg = agg.min(self.cfg.max_score);
        let w = match self.cfg.miss_score {
            MissScore::Agg => self.weight(agg),
            MissScore::Half => self.weight(agg / 2),
            MissScore::Zero => 1,
        };
        self.freq.set(key, w, self.clock);
    }
    fn remove(&mut self, key: u64) -> bool {
        self.freq.remove(key).is_some()
    }
    fn len(&self) -> usize {
        self.freq.len()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn score(&self, key: u64) -> u32 {
        self.freq.value(key).map_or(0, |v| self.capped(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::request;

    /// A key hit in near-perfect requests outlasts one hit as often in poor requests; a key seen
    /// once goes first.
    #[test]
    fn sum_weighs_frequency_by_group_score() {
        let cfg = EvConfig {
            miss_score: MissScore::Zero,
            ..EvConfig::new(2)
        };
        let mut p = EvLfuSum::new(3, cfg);
        let mut ev = Vec::new();
        let mut hits = [false; 2];
        request(&mut p, &[1, 2], &mut hits, &mut ev); // 1, 2 enter at 1
        request(&mut p, &[1, 2], &mut hits, &mut ev); // both hit, agg 2: 1 + 3 = 4
        request(&mut p, &[3, 1], &mut hits, &mut ev); // 1 hit with agg 1: 6; 3 enters at 1
        assert_eq!(ev, []);
        p.on_miss(4, 2, &mut ev); // evicts 3 (value 1)
        assert_eq!(ev, [(3, 1)]);
        p.on_miss(5, 0, &mut ev); // evicts 4 (value 1, older than nothing else at 1)
        assert_eq!(ev[1].0, 4);
        assert!(p.contains(1) && p.contains(2) && p.contains(5));
    }
}
