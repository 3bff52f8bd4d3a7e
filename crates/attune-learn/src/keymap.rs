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
//! Thread-safety: immutable after construction (`Send + Sync`).

/// Longest stored prefix. Default 64 KiB: keys longer than that are rare and a longer prefix
/// would only make the persisted model large; a longer common prefix is simply truncated (still
/// order-preserving, since the prefix is compared as given).
pub const PREFIX_LEN_MAX: usize = 64 * 1024;

/// Order-preserving byte-string → `u64` mapping (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct KeyMapper {
    prefix: Vec<u8>,
}

impl KeyMapper {
    /// The identity mapping for 8-byte big-endian integer keys (empty prefix).
    pub fn identity() -> Self {
        Self { prefix: Vec::new() }
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
        }
    }

    /// A mapper with an explicit prefix (used by the decoder). Longer prefixes are an error the
    /// caller reports; this function truncates to [`PREFIX_LEN_MAX`].
    pub fn with_prefix(prefix: &[u8]) -> Self {
        let len = prefix.len().min(PREFIX_LEN_MAX);
        Self {
            prefix: prefix[..len].to_vec(),
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
                return be_padded(tail);
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
        std::mem::size_of::<Self>() + self.prefix.len()
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

    proptest! {
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
