//! A TinyLFU frequency sketch (Einziger, Friedman & Manes, ACM ToS 2017): a count-min sketch of
//! four rows of 4-bit counters (one byte each here), conservative update, and aging: after
//! `10 × capacity` increments every counter is halved, so the estimate tracks recent popularity.
//! Used for admission: a missed key enters a full cache only if it has been seen more often than
//! the key it would evict. Thread-safety: owned by one thread.

pub(super) const ROWS: usize = 4;
const MAX: u8 = 15;
pub(super) const SEEDS: [u64; ROWS] = [
    0x9E37_79B9_7F4A_7C15,
    0xC2B2_AE3D_27D4_EB4F,
    0x1656_67B1_9E37_79F9,
    0x27D4_EB2F_1656_67C5,
];

/// Count-min sketch with periodic halving.
#[derive(Clone, Debug)]
pub struct FreqSketch {
    counters: Vec<u8>,
    mask: usize,
    added: u64,
    sample: u64,
}

#[inline]
pub(super) fn mix(key: u64, seed: u64) -> u64 {
    // splitmix64's finaliser over the seeded key.
    let mut z = key ^ seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl FreqSketch {
    /// A sketch sized for a cache of `capacity` items: each row has the next power of two at or
    /// above the capacity (at least 16 counters); the sample period is 10 × capacity.
    pub fn new(capacity: usize) -> Self {
        let width = capacity.max(16).next_power_of_two();
        FreqSketch {
            counters: vec![0; width * ROWS],
            mask: width - 1,
            added: 0,
            sample: 10 * capacity.max(1) as u64,
        }
    }

    #[inline]
    fn slot(&self, key: u64, row: usize) -> usize {
        row * (self.mask + 1) + (mix(key, SEEDS[row]) as usize & self.mask)
    }

    /// The estimated count of `key` (never below its true recent count, up to 15).
    pub fn estimate(&self, key: u64) -> u8 {
        (0..ROWS)
            .map(|r| self.counters[self.slot(key, r)])
            .min()
            .unwrap_or(0)
    }

    /// Counts one access to `key` (conservative update: only the minimal counters grow).
    pub fn increment(&mut self, key: u64) {
        let est = self.estimate(key);
        if est < MAX {
            for r in 0..ROWS {
                let s = self.slot(key, r);
                if self.counters[s] == est {
                    self.counters[s] += 1;
                }
            }
        }
        self.added += 1;
        if self.added >= self.sample {
            for c in &mut self.counters {
                *c >>= 1;
            }
            self.added /= 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_ages() {
        let mut s = FreqSketch::new(100);
        for _ in 0..5 {
            s.increment(7);
        }
        s.increment(8);
        assert!(s.estimate(7) >= 5);
        assert!(s.estimate(8) >= 1);
        assert_eq!(s.estimate(12345), 0);
        // Fill the sample period (1000 increments) with another key: counts are halved.
        for _ in 0..994 {
            s.increment(8);
        }
        assert_eq!(s.estimate(7), 2);
        assert_eq!(s.estimate(8), 7, "saturated at 15, then halved");
    }
}
