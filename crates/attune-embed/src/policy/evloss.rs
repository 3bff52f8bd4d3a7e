//! EV-Loss (`ev-loss`, not in the source): evicts the key whose loss would cost the fewest
//! **perfect** requests. A request is perfect only if all its N keys hit, so keeping key `k`
//! turns a future request into a perfect one only if that request's other keys hit as well.
//! Each access of `k` adds the chance that its request's other keys would have been there too,
//! estimated from what they were now: with `m` of them missing, `q^m`, where `q` (½) is the
//! chance that one missing key is cached by the time the request comes back. So a key of a
//! request one key short of perfect gains ½, a key of a request missing five others 1/32, and a
//! key only ever used by requests with one-off tail keys earns almost nothing however often it
//! is used, while LFU would keep it.
//!
//! Values age as in LFU with dynamic aging (Arlitt et al.): a key's priority is `L + value`,
//! set at its last access, where `L` is the priority of the last victim, so keys that stop
//! being used fall behind the ones still earning (`-noaging`: priority = value). Eviction takes the lowest priority, ties to the least recently used;
//! O(log n) per update ([`FreqOrder`]). Fixed point: 1.0 = 2^16.
//! Thread-safety: owned by one thread (`Send`).

use super::{map, FreqOrder, Map, Policy};

/// 1.0 in the fixed-point values.
const ONE: u64 = 1 << 16;

/// EV-Loss. See the module doc.
pub struct EvLoss {
    cap: usize,
    max_score: u32,
    clock: u64,
    /// Priority of the last victim (dynamic aging).
    floor: u64,
    aging: bool,
    /// Priorities: `L` at the last update plus the value earned.
    freq: FreqOrder,
    /// Value earned by each cached key.
    earned: Map<u64>,
}

impl EvLoss {
    /// An empty EV-Loss of `cap` items over requests of `max_score` keys; `aging` adds the last
    /// victim's priority to every update (off: plain accumulated values).
    pub fn new(cap: usize, max_score: u32, aging: bool) -> Self {
        EvLoss {
            cap,
            max_score: max_score.max(1),
            clock: 0,
            floor: 0,
            aging,
            freq: FreqOrder::default(),
            earned: map(),
        }
    }

    /// `q^m` with `m` other keys of the request missing.
    #[inline]
    fn gain(m: u32) -> u64 {
        ONE >> m.min(16)
    }

    fn base(&self) -> u64 {
        if self.aging {
            self.floor
        } else {
            0
        }
    }
}

impl Policy for EvLoss {
    fn contains(&self, key: u64) -> bool {
        self.freq.contains(key)
    }
    fn on_hit(&mut self, key: u64, agg: u32) {
        self.clock += 1;
        // The key hit: the other keys missing are all the request's misses.
        let m = self.max_score.saturating_sub(agg);
        let g = Self::gain(m);
        if let Some(e) = self.earned.get_mut(&key) {
            *e += g;
            let v = *e + self.base();
            self.freq.set(key, v, self.clock);
        }
    }
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 {
            return;
        }
        self.clock += 1;
        if self.freq.len() >= self.cap {
            if let Some((v, p)) = self.freq.pop_first() {
                self.floor = self.floor.max(p);
                self.earned.remove(&v);
                evicted.push((v, 0));
            }
        }
        // The key missed: the other keys missing are the request's misses but this one.
        let m = self.max_score.saturating_sub(agg).saturating_sub(1);
        let g = Self::gain(m);
        self.earned.insert(key, g);
        self.freq.set(key, self.base() + g, self.clock);
    }
    fn remove(&mut self, key: u64) -> bool {
        self.earned.remove(&key);
        self.freq.remove(key).is_some()
    }
    fn len(&self) -> usize {
        self.freq.len()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn score(&self, key: u64) -> u32 {
        // Expected perfect requests earned, as a whole number (capped at N).
        self.earned
            .get(&key)
            .map_or(0, |&e| ((e / ONE) as u32).min(self.max_score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::request;

    /// A key used by near-perfect requests outlasts one used as often by requests that miss
    /// several other keys.
    #[test]
    fn loss_keeps_keys_of_near_perfect_requests() {
        let mut p = EvLoss::new(6, 3, true);
        let mut ev = Vec::new();
        let mut hits = [false; 3];
        // 1, 2, 3 together: after the first request they are perfect.
        for _ in 0..3 {
            request(&mut p, &[1, 2, 3], &mut hits, &mut ev);
        }
        // 10 is used as often, but always with two fresh keys.
        for i in 0..3u64 {
            request(&mut p, &[10, 100 + 2 * i, 101 + 2 * i], &mut hits, &mut ev);
        }
        assert!(p.contains(1) && p.contains(2) && p.contains(3));
        assert!(
            p.earned[&1] > p.earned[&10],
            "{} {}",
            p.earned[&1],
            p.earned[&10]
        );
        assert!(p.len() <= 6);
    }
}
