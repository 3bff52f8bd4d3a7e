//! Order-preserving mapping of byte-string keys of any length to `u64`, so that the integer
//! models of this crate can index files of arbitrary keys (Bourbon supports integer keys only;
//! Dai 2025 §2.3.5 "possible improvements").
//!
//! The mapper of a file stores the longest common prefix `P` of the file's keys (for a sorted
//! file, the common prefix of its first and last key) and maps a key `k` to:
//!
//! * `0` if `k < P·anything` (k is a proper prefix of `P`, or differs from `P` with a smaller
//!   byte), `u64::MAX` if `k` differs from `P` with a larger byte;
//! * otherwise the 8 bytes of `k` after `P`, big-endian, zero-padded on the right.
//!
//! Invariant (tested): the map is **monotone**: `a <= b` (bytewise, memcmp order) implies
//! `map(a) <= map(b)`. It is not injective: keys that agree on the 8 bytes after the prefix
//! (and keys that differ only by trailing zero bytes) collapse to one value. The models handle
//! that: positions of keys with equal mapped values form one contiguous run and
//! [`crate::PlrModel::predict`] returns a range covering the whole run, so every key is still
//! found; only speed degrades, which [`crate::Quality`] reports.
//!
//! **Radix mapping** (beyond 8 bytes; [`KeyMapper::for_keys`]): keys drawn from a small alphabet
//! per position — decimal or hexadecimal digits, as in YCSB's `user1234…` keys — waste most of the
//! 256 values of each byte, so 8 raw bytes distinguish few keys. When the file's keys use at most
//! a few symbols per position, the mapper instead keeps, for each of the first positions after
//! the prefix, the set `A_i` of byte values seen there, and maps a key to the mixed-radix number
//! with digit `c_i` in base `r_i = |A_i| + 1`: `c_i = 0` when the key has ended, `1 + rank` of
//! its byte in `A_i` when the byte is a member. A byte that is not a member maps to the digit of
//! the largest member below it (0 if none) and every later digit to its maximum, which places
//! the key after all keys that share the smaller symbol and before those with the next one, so
//! the map stays monotone for every key, seen or not. As many positions are used as the product
//! of radices fits in 64 bits; the radix form is chosen when that covers every position the
//! file's keys have or more than 8 (otherwise the plain 8 bytes distinguish at least as much).
//! Digits packed densely also make the mapped keys far more linear than raw ASCII bytes, which
//! is what keeps decimal keys learnable.
//!
//! Thread-safety: immutable after construction (`Send + Sync`).

/// Longest stored prefix. Default 64 KiB: keys longer than that are rare and a longer prefix
/// would only make the persisted model large; a longer common prefix is simply truncated (still
/// order-preserving, since the prefix is compared as given).
pub const PREFIX_LEN_MAX: usize = 64 * 1024;

/// Most positions a radix mapper examines. Default 24: more than 64 bits' worth for any alphabet
/// of at least 6 symbols; bounds the alphabet scan and the persisted size (32 bytes each).
pub const RADIX_POSITIONS_MAX: usize = 24;

/// Per-position alphabets of a radix mapping (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RadixAlphabet {
    /// 256-bit membership set per position.
    sets: Vec<[u64; 4]>,
    /// Radix per position (`|A_i| + 1`).
    radix: Vec<u64>,
    /// Per position, the members below each 64-bit word of its set (derived from `sets`): a
    /// digit then needs one population count instead of up to four.
    below: Vec<[u16; 4]>,
}

impl RadixAlphabet {
    /// The alphabet from per-position sets, keeping the longest prefix of positions whose
    /// radix product fits in 64 bits. None when it covers neither every given position nor more
    /// than 8 (then the plain 8 bytes distinguish at least as much), or a set is empty.
    pub fn from_sets(sets: &[[u64; 4]]) -> Option<Self> {
        let mut product: u128 = 1;
        let mut kept = Vec::new();
        let mut radix = Vec::new();
        for set in sets.iter().take(RADIX_POSITIONS_MAX) {
            let members: u32 = set.iter().map(|w| w.count_ones()).sum();
            if members == 0 {
                break;
            }
            let r = u64::from(members) + 1;
            product *= u128::from(r);
            if product > u128::from(u64::MAX) + 1 {
                break;
            }
            kept.push(*set);
            radix.push(r);
        }
        let useful = !kept.is_empty() && (kept.len() == sets.len() || kept.len() > 8);
        let below = kept
            .iter()
            .map(|set| {
                let mut acc = [0u16; 4];
                for w in 1..4 {
                    acc[w] = acc[w - 1] + set[w - 1].count_ones() as u16;
                }
                acc
            })
            .collect();
        useful.then_some(Self {
            sets: kept,
            radix,
            below,
        })
    }

    /// The per-position sets (persisted form).
    pub fn sets(&self) -> &[[u64; 4]] {
        &self.sets
    }

    #[inline]
    fn digit(&self, i: usize, b: u8) -> (u64, bool) {
        let set = &self.sets[i];
        let (w, bit) = ((b >> 6) as usize, b & 63);
        let below = u32::from(self.below[i][w]) + (set[w] & ((1u64 << bit) - 1)).count_ones();
        let member = set[w] >> bit & 1 == 1;
        if member {
            (u64::from(below) + 1, true)
        } else {
            (u64::from(below), false)
        }
    }

    /// Mixed-radix value of `tail` (the key after the prefix).
    #[inline]
    fn map(&self, tail: &[u8]) -> u64 {
        let mut v: u64 = 0;
        let mut saturate = false;
        for (i, &r) in self.radix.iter().enumerate() {
            let d = if saturate {
                r - 1
            } else if let Some(&b) = tail.get(i) {
                let (d, member) = self.digit(i, b);
                saturate = !member;
                d
            } else {
                0
            };
            // The product of radices fits in 2^64, so v * r + d <= 2^64 - 1.
            v = v.wrapping_mul(r).wrapping_add(d);
        }
        v
    }

    fn size_bytes(&self) -> usize {
        self.sets.len() * (32 + 8 + 8) + std::mem::size_of::<Self>()
    }
}

/// Order-preserving byte-string → `u64` mapping (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct KeyMapper {
    prefix: Vec<u8>,
    radix: Option<RadixAlphabet>,
}

impl KeyMapper {
    /// The identity mapping for 8-byte big-endian integer keys (empty prefix).
    pub fn identity() -> Self {
        Self {
            prefix: Vec::new(),
            radix: None,
        }
    }

    /// The mapper for a sorted file whose smallest key is `first` and largest key is `last`:
    /// strips their longest common prefix (at most [`PREFIX_LEN_MAX`] bytes).
    pub fn for_range(first: &[u8], last: &[u8]) -> Self {
        let lcp = first
            .iter()
            .zip(last)
            .take(PREFIX_LEN_MAX)
            .take_while(|(a, b)| a == b)
            .count();
        Self {
            prefix: first[..lcp].to_vec(),
            radix: None,
        }
    }

    /// The mapper for a sorted file with smallest key `first`, largest `last` and all its keys
    /// in `keys`: strips the common prefix and, when the keys use small alphabets per position,
    /// switches to the radix mapping (see the module doc).
    pub fn for_keys<'a>(first: &[u8], last: &[u8], keys: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut m = Self::for_range(first, last);
        let p = m.prefix.len();
        let mut sets = vec![[0u64; 4]; RADIX_POSITIONS_MAX];
        let mut used = 0;
        for k in keys {
            let tail = k.get(p..).unwrap_or(&[]);
            for (i, &b) in tail.iter().take(RADIX_POSITIONS_MAX).enumerate() {
                sets[i][(b >> 6) as usize] |= 1u64 << (b & 63);
            }
            used = used.max(tail.len().min(RADIX_POSITIONS_MAX));
        }
        sets.truncate(used);
        m.radix = RadixAlphabet::from_sets(&sets);
        m
    }

    /// The radix alphabet, when the radix mapping is in use.
    pub fn radix(&self) -> Option<&RadixAlphabet> {
        self.radix.as_ref()
    }

    /// A mapper from its persisted parts (used by the decoder).
    pub fn from_parts(prefix: &[u8], radix: Option<RadixAlphabet>) -> Self {
        let mut m = Self::with_prefix(prefix);
        m.radix = radix;
        m
    }

    /// A mapper with an explicit prefix (used by the decoder). Longer prefixes are an error the
    /// caller reports; this function truncates to [`PREFIX_LEN_MAX`].
    pub fn with_prefix(prefix: &[u8]) -> Self {
        let len = prefix.len().min(PREFIX_LEN_MAX);
        Self {
            prefix: prefix[..len].to_vec(),
            radix: None,
        }
    }

    /// The stripped prefix.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// Maps `key` to its `u64` (monotone; see the module doc).
    #[inline]
    pub fn map(&self, key: &[u8]) -> u64 {
        let p = self.prefix.len();
        if key.len() >= p {
            let (head, tail) = key.split_at(p);
            if head == self.prefix.as_slice() {
                return match &self.radix {
                    Some(r) => r.map(tail),
                    None => be_padded(tail),
                };
            }
        }
        // Differs from the prefix (or is a proper prefix of it): compare to decide the side.
        let common = key.len().min(p);
        match key[..common].cmp(&self.prefix[..common]) {
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Greater => u64::MAX,
            // Equal on `common` bytes and the key is shorter than the prefix: it sorts first.
            std::cmp::Ordering::Equal => 0,
        }
    }

    /// Bytes this mapper occupies in memory (prefix plus the struct).
    pub fn size_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.prefix.len()
            + self.radix.as_ref().map_or(0, RadixAlphabet::size_bytes)
    }
}

/// The first 8 bytes of `tail` as a big-endian `u64`, zero-padded on the right.
#[inline]
fn be_padded(tail: &[u8]) -> u64 {
    let mut be = [0u8; 8];
    let n = tail.len().min(8);
    be[..n].copy_from_slice(&tail[..n]);
    u64::from_be_bytes(be)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integer_keys_map_to_themselves_under_the_identity() {
        let m = KeyMapper::identity();
        for k in [0u64, 1, 255, 256, 1 << 40, u64::MAX] {
            assert_eq!(m.map(&k.to_be_bytes()), k);
        }
    }

    #[test]
    fn common_prefix_is_stripped_and_next_eight_bytes_are_used() {
        let m = KeyMapper::for_range(b"user:000000001:a", b"user:000000999:z");
        assert_eq!(m.prefix(), b"user:000000");
        assert_eq!(
            m.map(b"user:000000001:a"),
            u64::from_be_bytes(*b"001:a\0\0\0")
        );
    }

    #[test]
    fn keys_outside_the_prefix_map_to_the_ends() {
        let m = KeyMapper::for_range(b"mmm1", b"mmm9");
        assert_eq!(m.map(b"aaa"), 0);
        assert_eq!(m.map(b"mm"), 0);
        assert_eq!(m.map(b""), 0);
        assert_eq!(m.map(b"zzz"), u64::MAX);
        assert_eq!(m.map(b"mmn"), u64::MAX);
    }

    #[test]
    fn long_prefix_is_capped() {
        let a = vec![7u8; PREFIX_LEN_MAX + 100];
        let mut b = a.clone();
        b.push(1);
        let m = KeyMapper::for_range(&a, &b);
        assert_eq!(m.prefix().len(), PREFIX_LEN_MAX);
        assert!(m.map(&a) <= m.map(&b));
    }

    fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
        // Small alphabets with 0x00 and 0xFF make shared prefixes and edge bytes common.
        prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0xfe, 0xff]), 0..14)
    }

    #[test]
    fn decimal_keys_get_the_radix_mapping_and_stay_distinct() {
        let keys: Vec<Vec<u8>> = (0..2000u64)
            .map(|i| {
                let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000_000;
                format!("user{h}").into_bytes()
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let m = KeyMapper::for_keys(
            &keys[0],
            &keys[keys.len() - 1],
            keys.iter().map(Vec::as_slice),
        );
        assert!(
            m.radix().is_some(),
            "decimal digits should use the radix form"
        );
        let mapped: Vec<u64> = keys.iter().map(|k| m.map(k)).collect();
        // Up to 15 digits: every position is inside the radix, so the map is injective.
        assert!(
            mapped.windows(2).all(|w| w[0] < w[1]),
            "distinct and increasing"
        );
        // Random full-width binary keys: whichever form is chosen stays injective here.
        let bin: Vec<Vec<u8>> = (0..2000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes().to_vec())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mb = KeyMapper::for_keys(&bin[0], &bin[1999], bin.iter().map(Vec::as_slice));
        let mapped: Vec<u64> = bin.iter().map(|k| mb.map(k)).collect();
        assert!(mapped.windows(2).all(|w| w[0] < w[1]));
    }

    fn digit_key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(b"0159".to_vec()), 0..22)
    }

    fn any_probe() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop::sample::select(vec![0u8, b'0', b'1', b'3', b'5', b'9', 0xff]),
            0..24,
        )
    }

    proptest! {
        #[test]
        fn radix_mapping_is_monotone_for_seen_and_unseen_keys(
            mut keys in prop::collection::vec(digit_key(), 1..60),
            probes in prop::collection::vec(any_probe(), 0..40),
        ) {
            keys.sort();
            let m = KeyMapper::for_keys(
                &keys[0],
                &keys[keys.len() - 1],
                keys.iter().map(Vec::as_slice),
            );
            let mut all = keys.clone();
            all.extend(probes);
            all.sort();
            for w in all.windows(2) {
                prop_assert!(m.map(&w[0]) <= m.map(&w[1]), "{:?} {:?}", w[0], w[1]);
            }
        }

        #[test]
        fn mapping_is_monotone(mut keys in prop::collection::vec(key_strategy(), 1..40)) {
            keys.sort();
            let m = KeyMapper::for_range(&keys[0], &keys[keys.len() - 1]);
            // Monotone over the file's keys and over arbitrary probes around them.
            let mut probes = keys.clone();
            probes.push(Vec::new());
            probes.push(vec![0xff; 20]);
            probes.sort();
            for w in probes.windows(2) {
                prop_assert!(m.map(&w[0]) <= m.map(&w[1]), "{:?} {:?}", w[0], w[1]);
            }
        }
    }
}
