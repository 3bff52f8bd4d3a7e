//! A keyed pseudo-random permutation of `[0, n)`, computable by index, in O(1) memory.
//!
//! Construction: a balanced Feistel network over the smallest even bit width `2h` with
//! `2^(2h) >= n` (4 rounds keyed by SplitMix64 of the seed), restricted to `[0, n)` by cycle
//! walking: apply the network until the value lands below `n`. Because the network is a bijection
//! on `[0, 2^(2h))` and `2^(2h) < 4n`, the expected number of network applications per index is
//! below 4 and the result is a bijection on `[0, n)` (Black & Rogaway, "Ciphers with arbitrary
//! finite domains", 2002).
//!
//! Used for "random load order" (key `perm(j)` is loaded j-th) without materialising a shuffled
//! array. Thread-safety: immutable after construction, `Sync`.

use crate::error::{check_nonzero, Result};
use crate::rng::mix64;

/// Number of Feistel rounds. Default 4: four rounds of a strong round function give a
/// pseudo-random permutation (Luby-Rackoff); more rounds only cost time.
const ROUNDS: usize = 4;

/// A keyed bijection on `[0, n)`.
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    half_mask: u64,
    keys: [u64; ROUNDS],
}

impl Permutation {
    /// Builds the permutation of `[0, n)` for `seed`. `n` must be at least 1.
    pub fn new(n: u64, seed: u64) -> Result<Self> {
        check_nonzero("n", n)?;
        // Smallest total width 2h with 2^(2h) >= n, at least 2 bits.
        let bits = 64 - (n - 1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let half_mask = if half_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << half_bits) - 1
        };
        let mut keys = [0u64; ROUNDS];
        for (r, k) in keys.iter_mut().enumerate() {
            *k = mix64(seed ^ mix64(0xfe15_7e1a_0000_0000 | r as u64));
        }
        Ok(Self {
            n,
            half_bits,
            half_mask,
            keys,
        })
    }

    /// Domain size.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Always false (a permutation has at least one element).
    pub fn is_empty(&self) -> bool {
        false
    }

    #[inline]
    fn network(&self, x: u64) -> u64 {
        let mut l = (x >> self.half_bits) & self.half_mask;
        let mut r = x & self.half_mask;
        for &k in &self.keys {
            let f = mix64(r ^ k) & self.half_mask;
            let nl = r;
            r = l ^ f;
            l = nl;
        }
        (l << self.half_bits) | r
    }

    /// The image of `i`; an `i >= n` is first reduced modulo `n`, so the result is always in
    /// `[0, n)` and the walk always terminates.
    #[inline]
    pub fn apply(&self, i: u64) -> u64 {
        if self.n == 1 {
            return 0;
        }
        let i = if i >= self.n { i % self.n } else { i };
        let mut x = self.network(i);
        // Cycle walking: terminates because the network is a bijection and i is in [0, n).
        while x >= self.n {
            x = self.network(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_bijection_for_awkward_sizes() {
        for &n in &[1u64, 2, 3, 5, 17, 100, 1000, 4097, 65_536, 100_003] {
            let p = Permutation::new(n, 99).unwrap();
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let y = p.apply(i);
                assert!(y < n);
                assert!(!seen[y as usize], "n={n}: {y} hit twice");
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn different_seeds_give_different_orders() {
        let a = Permutation::new(1000, 1).unwrap();
        let b = Permutation::new(1000, 2).unwrap();
        let same = (0..1000).filter(|&i| a.apply(i) == b.apply(i)).count();
        assert!(same < 20, "{same} fixed agreements");
    }

    #[test]
    fn looks_shuffled_not_monotone() {
        let p = Permutation::new(10_000, 5).unwrap();
        let ascents = (0..9_999).filter(|&i| p.apply(i + 1) > p.apply(i)).count();
        // A random permutation has about half ascents.
        assert!((4_500..5_500).contains(&ascents), "{ascents}");
    }

    #[test]
    fn zero_size_is_an_error() {
        assert!(Permutation::new(0, 1).is_err());
    }
}
