//! A per-file Bloom filter over user keys (double hashing of one 64-bit xxh3 hash).
//! Layout: `bits (ceil(n·bits_per_key/8) bytes, at least 8) | k: u8`.

/// Hash used by the filter.
#[inline]
pub fn bloom_hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}

/// Builds the filter for the given key hashes.
pub fn build(hashes: &[u64], bits_per_key: u32) -> Vec<u8> {
    // k = bits_per_key · ln 2 minimises the false-positive rate.
    let k = ((bits_per_key as f64) * 0.69).round().clamp(1.0, 30.0) as u8;
    let nbits = (hashes.len() as u64 * bits_per_key as u64).max(64);
    let nbytes = nbits.div_ceil(8) as usize;
    let nbits = nbytes as u64 * 8;
    let mut out = vec![0u8; nbytes + 1];
    for &h in hashes {
        let delta = h.rotate_right(33) | 1;
        let mut x = h;
        for _ in 0..k {
            let bit = x % nbits;
            out[(bit / 8) as usize] |= 1 << (bit % 8);
            x = x.wrapping_add(delta);
        }
    }
    out[nbytes] = k;
    out
}

/// A filter read from disk. An empty or malformed filter answers "may contain" for every key.
pub struct Bloom {
    bits: Vec<u8>,
    k: u8,
}

impl Bloom {
    pub fn new(mut data: Vec<u8>) -> Bloom {
        match data.pop() {
            Some(k) if !data.is_empty() && (1..=30).contains(&k) => Bloom { bits: data, k },
            _ => Bloom {
                bits: Vec::new(),
                k: 0,
            },
        }
    }

    pub fn may_contain(&self, hash: u64) -> bool {
        if self.k == 0 {
            return true;
        }
        let nbits = self.bits.len() as u64 * 8;
        let delta = hash.rotate_right(33) | 1;
        let mut x = hash;
        for _ in 0..self.k {
            let bit = x % nbits;
            if self.bits[(bit / 8) as usize] & (1 << (bit % 8)) == 0 {
                return false;
            }
            x = x.wrapping_add(delta);
        }
        true
    }

    pub fn bytes(&self) -> usize {
        self.bits.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let keys: Vec<u64> = (0..10_000u64)
            .map(|i| bloom_hash(&i.to_be_bytes()))
            .collect();
        let f = Bloom::new(build(&keys, 10));
        assert!(keys.iter().all(|&h| f.may_contain(h)));
        let fp = (10_000..110_000u64)
            .filter(|i| f.may_contain(bloom_hash(&i.to_be_bytes())))
            .count();
        let rate = fp as f64 / 100_000.0;
        assert!(rate < 0.02, "false-positive rate {rate}");
    }

    #[test]
    fn malformed_filter_admits_everything() {
        assert!(Bloom::new(vec![]).may_contain(7));
        assert!(Bloom::new(vec![0, 0, 99]).may_contain(7));
    }
}
