//! The geometry Plush shares between its DRAM level and its persistent levels: hashing, entry
//! placement, the packed size/epoch word and the partitioned Bloom filter. Byte layouts are in
//! `docs/formats/plush.md`.
//!
//! Thread safety: pure functions and plain values.

use std::sync::atomic::AtomicU64;

/// Records per bucket (16 × (8-byte key, 8-byte value) = 256 bytes, one PMem block).
pub const SLOTS_PER_BUCKET: usize = 16;
/// Words of one bucket: 16 keys, then 16 values.
pub const BUCKET_WORDS: usize = 2 * SLOTS_PER_BUCKET;
/// Words of one bucket's Bloom-filter partition (128 bits).
pub const FILTER_WORDS_PER_BUCKET: usize = 2;
/// The value that marks a deleted key (a tombstone); `put` refuses it as a value.
pub const TOMBSTONE: u64 = u64::MAX;
/// Bits of the size field in the packed meta word (the rest holds the epoch).
const SIZE_BITS: u32 = 16;
/// Largest epoch the formats carry (40 bits, the recovery log's epoch field).
pub const EPOCH_MAX: u64 = (1 << 40) - 1;

/// Where keys land, for one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// log2 of the DRAM level's (and the first persistent level's) directory entries.
    pub dram_entries_log2: u32,
    /// log2 of the fanout: buckets per entry, and the growth of each level after the first.
    pub fanout_log2: u32,
}

impl Geometry {
    /// Buckets per directory entry (the fanout).
    pub fn buckets(self) -> usize {
        1 << self.fanout_log2
    }

    /// Records one directory entry holds.
    pub fn entry_capacity(self) -> usize {
        self.buckets() * SLOTS_PER_BUCKET
    }

    /// Directory entries of level `level` (0 is DRAM, 1 the first persistent level).
    pub fn entries(self, level: usize) -> usize {
        let extra = level.saturating_sub(1) as u32 * self.fanout_log2;
        1 << (self.dram_entries_log2 + extra)
    }

    /// Hash bits level `level` uses for placement.
    pub fn placement_bits(self, level: usize) -> u32 {
        self.dram_entries_log2 + level.saturating_sub(1) as u32 * self.fanout_log2
    }

    /// The directory entry of hash `h` on level `level`. Level 1 uses the DRAM level's index;
    /// each later level appends `fanout_log2` more hash bits below its parent's index, so the
    /// children of entry `i` are `i * fanout .. (i + 1) * fanout`.
    #[inline]
    pub fn entry_of(self, h: u64, level: usize) -> usize {
        let mut idx = (h & ((1 << self.dram_entries_log2) - 1)) as usize;
        let f = self.fanout_log2;
        let mut shift = self.dram_entries_log2;
        for _ in 1..level.max(1) {
            let digit = ((h >> shift) & ((1 << f) - 1)) as usize;
            idx = (idx << f) | digit;
            shift += f;
        }
        idx
    }

    /// The placement word of a range-partitioned key `k` (already shifted so that its
    /// significant bits are the top ones): `entry_of` reads the low `dram_entries_log2` bits
    /// as level 1's index and each next `fanout_log2` bits as a child digit, so the key's top
    /// bits go to the bottom of the word, one digit at a time, keeping each digit's bit order.
    /// An entry then holds one contiguous key range, and its children split it in order.
    #[inline]
    pub fn range_place(self, k: u64) -> u64 {
        let (d, f) = (self.dram_entries_log2, self.fanout_log2);
        let mut p = k >> (64 - d);
        let mut used = d;
        while used + f <= 64 {
            p |= ((k >> (64 - used - f)) & ((1 << f) - 1)) << used;
            used += f;
        }
        p
    }

    /// The child (0..fanout) of a level-`level` entry that hash `h` goes to on `level + 1`.
    #[inline]
    pub fn child_of(self, h: u64, level: usize) -> usize {
        if level == 0 {
            return 0;
        }
        let shift = self.placement_bits(level);
        ((h >> shift) & ((1 << self.fanout_log2) - 1)) as usize
    }
}

/// The placement hash of an 8-byte key: murmur3's 64-bit finaliser over the key xor a constant
/// (a bijection, so distinct keys never share a hash).
#[inline]
pub fn hash_key(key: u64) -> u64 {
    let mut z = key ^ 0x5851_F42D_4C95_7F2D;
    z = (z ^ (z >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    z = (z ^ (z >> 33)).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    z ^ (z >> 33)
}

/// The two filter words a key sets: three bits of 128, drawn from a second mix of the hash (so
/// that they stay independent of the placement bits at every level).
#[inline]
pub fn filter_mask(h: u64) -> [u64; 2] {
    let mut g = (h ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    g ^= g >> 31;
    let mut mask = [0u64; 2];
    for i in 0..3 {
        let bit = (g >> (i * 7)) & 127;
        mask[(bit >> 6) as usize] |= 1 << (bit & 63);
    }
    mask
}

/// Packs an entry's epoch and size into its one meta word (so that both change atomically).
#[inline]
pub fn pack_meta(epoch: u64, size: usize) -> u64 {
    debug_assert!(size < (1 << SIZE_BITS));
    (epoch << SIZE_BITS) | size as u64
}

/// Unpacks a meta word into (epoch, size).
#[inline]
pub fn unpack_meta(meta: u64) -> (u64, usize) {
    (meta >> SIZE_BITS, (meta & ((1 << SIZE_BITS) - 1)) as usize)
}

/// `n` zeroed atomic words, allocated with calloc so that untouched pages cost no memory.
pub fn zeroed_words(n: usize) -> Box<[AtomicU64]> {
    let v: Vec<u64> = vec![0; n];
    let b = v.into_boxed_slice();
    let len = b.len();
    let ptr = Box::into_raw(b) as *mut u64;
    // SAFETY: AtomicU64 has the size and alignment of u64; the allocation is reinterpreted, not
    // copied, and its length is unchanged.
    unsafe {
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            ptr.cast::<AtomicU64>(),
            len,
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn children_of_an_entry_are_contiguous() {
        let g = Geometry {
            dram_entries_log2: 4,
            fanout_log2: 2,
        };
        for k in 0..10_000u64 {
            let h = hash_key(k);
            for level in 1..6 {
                let parent = g.entry_of(h, level);
                let child = g.entry_of(h, level + 1);
                assert_eq!(child, parent * g.buckets() + g.child_of(h, level));
                assert!(child < g.entries(level + 1));
            }
            assert_eq!(g.entry_of(h, 0), g.entry_of(h, 1));
        }
    }

    #[test]
    fn range_placement_keeps_key_order_at_every_level() {
        let geo = Geometry {
            dram_entries_log2: 6,
            fanout_log2: 3,
        };
        let mut keys: Vec<u64> = (0..2000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        keys.sort_unstable();
        for level in 0..=20 {
            let idx: Vec<usize> = keys
                .iter()
                .map(|&k| geo.entry_of(geo.range_place(k), level))
                .collect();
            assert!(idx.windows(2).all(|w| w[0] <= w[1]), "level {level}");
            let bits = geo.placement_bits(level);
            for (&k, &i) in keys.iter().zip(&idx) {
                assert_eq!(i as u64, k >> (64 - bits), "key {k:#x} level {level}");
            }
        }
    }

    #[test]
    fn meta_round_trips() {
        let m = pack_meta(EPOCH_MAX, 256);
        assert_eq!(unpack_meta(m), (EPOCH_MAX, 256));
    }

    #[test]
    fn filter_mask_sets_one_to_three_bits() {
        for k in 0..1000 {
            let m = filter_mask(hash_key(k));
            let bits = m[0].count_ones() + m[1].count_ones();
            assert!((1..=3).contains(&bits));
        }
    }
}
