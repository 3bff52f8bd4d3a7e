//! Byte-charged replacement policies, each implemented once: [`Lru`] and [`S3Fifo`], generic over
//! a key (`K`: [`PolicyKey`]) and a value (`V`).
//!
//! Two users:
//! - The simulator's *real* cache tiers and GhostSim's ghost second tier, behind
//!   [`ReplacementPolicy`]: `Lru<Fingerprint, ()>` and `S3Fifo<BlockKey, ()>`, bounded (they
//!   evict by themselves). An access either hits (the entry is promoted as the policy says) or
//!   misses (the entry is inserted and entries are evicted until the charge fits); an entry whose
//!   charge alone exceeds the capacity is not kept.
//! - The engine's block cache (crate `attune-kv`): one unbounded `Lru<BlockKey, V>` or
//!   `S3Fifo<BlockKey, V>` per shard of its sharded cache, holding the blocks; the sharded cache
//!   owns the byte budget across shards and evicts through `pop_lru` / `evict_one`. Its keys are
//!   (file number, block offset): [`BlockKey`] with `unit` the offset.
//!
//! Thread-safety: single-owner (`&mut self`), `Send` when `K` and `V` are; wrap in a lock to
//! share. Invariants (checked by the tests): a bounded cache has `used() <= capacity()` after
//! every call; `len()` counts the resident entries; LRU keeps exactly the longest most-recent
//! prefix of its recency stack whose charges fit, which is what makes stack distances
//! ([`crate::stack`]) predict it exactly.

mod lru;
mod s3fifo;

pub use lru::Lru;
pub use s3fifo::{KeyHasher, S3Fifo, GHOST_MIN, S3FIFO_SMALL_FRACTION};

use std::collections::HashMap;

use crate::error::{CacheError, Result};
use crate::ghost::mix64;

/// Hash state for every map in this crate: fast and deterministic (no per-process random seed),
/// so simulations replay exactly.
pub(crate) type FastState = foldhash::fast::FixedState;

/// A map with [`FastState`].
pub(crate) type FastMap<K, V> = HashMap<K, V, FastState>;

/// Creates an empty [`FastMap`].
pub(crate) fn fast_map<K, V>() -> FastMap<K, V> {
    HashMap::with_hasher(FastState::with_seed(0x5eed_ca11))
}

/// Names a cached unit: a block of a file (by offset) or a page of a file (by page number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey {
    /// The engine's file number.
    pub file: u64,
    /// Byte offset of the block, or page number, within the file.
    pub unit: u64,
}

/// A key of a replacement policy: compared exactly, hashed by [`PolicyKey::hash64`] for the LRU's
/// index (which uses its low bits) and by [`std::hash::Hash`] for S3-FIFO's maps.
pub trait PolicyKey: Copy + Eq + std::hash::Hash + std::fmt::Debug {
    /// A well-mixed 64-bit hash.
    fn hash64(&self) -> u64;
}

impl PolicyKey for BlockKey {
    #[inline]
    fn hash64(&self) -> u64 {
        fingerprint(self)
    }
}

/// A block's 64-bit [`fingerprint`], the key the simulator's LRU and the stack-distance ghost
/// store instead of the 16-byte [`BlockKey`] (ghost memory stays within 0.2 % of M), as two
/// halves so that an LRU node needs only 4-byte alignment (20 bytes). Two of n resident blocks
/// share one with probability about n²/2^65 (under 10^-9 for 10^5 blocks); a shared fingerprint
/// would count one block's access as the other's, i.e. one mis-counted hit, never an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    lo: u32,
    hi: u32,
}

impl Fingerprint {
    /// The fingerprint of `key`.
    #[inline]
    pub fn of(key: &BlockKey) -> Self {
        let fp = fingerprint(key);
        Self {
            lo: fp as u32,
            hi: (fp >> 32) as u32,
        }
    }
}

impl PolicyKey for Fingerprint {
    #[inline]
    fn hash64(&self) -> u64 {
        u64::from(self.lo) | (u64::from(self.hi) << 32)
    }
}

/// A byte-charged cache replacement policy.
pub trait ReplacementPolicy: Send {
    /// Looks `key` up; on a hit promotes it and returns `true`, on a miss inserts it with
    /// `charge` bytes (evicting as needed) and returns `false`.
    fn access(&mut self, key: BlockKey, charge: u64) -> bool;
    /// Whether `key` is resident, without changing any state.
    fn contains(&self, key: &BlockKey) -> bool;
    /// Changes the capacity; shrinking evicts at once.
    fn set_capacity(&mut self, capacity_bytes: u64);
    /// Capacity in bytes.
    fn capacity(&self) -> u64;
    /// Bytes charged by resident entries.
    fn used(&self) -> u64;
    /// Resident entries.
    fn len(&self) -> usize;
    /// Whether no entry is resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Short name (`lru`, `s3fifo`).
    fn name(&self) -> &'static str;
    /// Approximate bytes of metadata this instance holds (maps, lists, queues).
    fn metadata_bytes(&self) -> usize;
}

/// Which policy to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyKind {
    /// Least recently used.
    Lru,
    /// S3-FIFO (Yang et al., SOSP '23): small probationary FIFO, main FIFO with reinsertion, ghost.
    S3Fifo,
}

impl PolicyKind {
    /// Parses `lru` or `s3fifo` (case-insensitive).
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "lru" => Ok(Self::Lru),
            "s3fifo" | "s3-fifo" => Ok(Self::S3Fifo),
            _ => Err(CacheError::UnknownPolicy(s.to_string())),
        }
    }

    /// Builds an empty cache of this kind.
    pub fn build(self, capacity_bytes: u64) -> Box<dyn ReplacementPolicy> {
        match self {
            Self::Lru => Box::new(Lru::new(capacity_bytes)),
            Self::S3Fifo => Box::new(S3Fifo::new(capacity_bytes)),
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lru => "lru",
            Self::S3Fifo => "s3fifo",
        }
    }
}

/// End of a linked list.
const NIL: u32 = u32::MAX;

/// A block's 64-bit fingerprint (see [`Fingerprint`]).
#[inline]
pub(crate) fn fingerprint(key: &BlockKey) -> u64 {
    mix64(mix64(key.file) ^ key.unit)
}

impl ReplacementPolicy for Lru<Fingerprint, ()> {
    fn access(&mut self, key: BlockKey, charge: u64) -> bool {
        self.access_key(Fingerprint::of(&key), charge)
    }

    fn contains(&self, key: &BlockKey) -> bool {
        self.contains_key(&Fingerprint::of(key))
    }

    fn set_capacity(&mut self, capacity_bytes: u64) {
        self.set_capacity_bytes(capacity_bytes);
    }

    fn capacity(&self) -> u64 {
        self.capacity_bytes()
    }

    fn used(&self) -> u64 {
        self.used_bytes()
    }

    fn len(&self) -> usize {
        self.entries()
    }

    fn name(&self) -> &'static str {
        "lru"
    }

    fn metadata_bytes(&self) -> usize {
        self.metadata_size()
    }
}

impl ReplacementPolicy for S3Fifo<BlockKey, ()> {
    fn access(&mut self, key: BlockKey, charge: u64) -> bool {
        self.access_key(key, charge)
    }

    fn contains(&self, key: &BlockKey) -> bool {
        self.contains_key(key)
    }

    fn set_capacity(&mut self, capacity_bytes: u64) {
        self.set_capacity_bytes(capacity_bytes);
    }

    fn capacity(&self) -> u64 {
        self.capacity_bytes()
    }

    fn used(&self) -> u64 {
        self.used_bytes()
    }

    fn len(&self) -> usize {
        self.entries()
    }

    fn name(&self) -> &'static str {
        "s3fifo"
    }

    fn metadata_bytes(&self) -> usize {
        self.metadata_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    fn k(u: u64) -> BlockKey {
        BlockKey { file: 1, unit: u }
    }

    #[test]
    fn lru_evicts_least_recent_first() {
        let mut c = Lru::new(3);
        for u in 0..3 {
            assert!(!c.access(k(u), 1));
        }
        assert!(c.access(k(0), 1)); // 0 becomes most recent; 1 is now the oldest
        assert!(!c.access(k(3), 1));
        assert!(!c.contains(&k(1)));
        assert!(c.contains(&k(0)) && c.contains(&k(2)) && c.contains(&k(3)));
        assert_eq!(c.used(), 3);
    }

    #[test]
    fn lru_shrink_evicts_and_oversized_entry_is_not_kept() {
        let mut c = Lru::new(10);
        for u in 0..5 {
            c.access(k(u), 2);
        }
        c.set_capacity(4);
        assert_eq!(c.len(), 2);
        assert!(c.contains(&k(4)) && c.contains(&k(3)));
        assert!(!c.access(k(9), 5));
        assert!(!c.contains(&k(9)));
        assert!(c.used() <= c.capacity());
    }

    /// The open-addressing index (linear probing, backward-shift deletion, growth) against a
    /// naive LRU oracle: same hit or miss on every access of a random trace with churn.
    #[test]
    fn lru_index_matches_a_naive_lru_under_churn() {
        let seed = 29u64;
        println!("seed {seed}");
        let mut x = seed;
        for cap in [1u64, 7, 64, 500] {
            let mut lru = Lru::new(cap * 3);
            let mut oracle: VecDeque<(u64, u64)> = VecDeque::new();
            for _ in 0..30_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 33) % (cap * 3);
                let c = 1 + (x >> 20) % 5;
                let pos = oracle.iter().position(|e| e.0 == u);
                let hit = pos.is_some();
                if let Some(p) = pos {
                    oracle.remove(p);
                }
                oracle.push_front((u, c));
                while oracle.iter().map(|e| e.1).sum::<u64>() > cap * 3 {
                    oracle.pop_back();
                }
                assert_eq!(lru.access(k(u), c), hit, "cap {cap} key {u}");
                assert_eq!(lru.len(), oracle.len());
            }
            for u in 0..cap * 3 {
                assert_eq!(lru.contains(&k(u)), oracle.iter().any(|e| e.0 == u));
            }
        }
    }

    /// GhostSim's parallel passes start each candidate from a truncated copy of a larger ghost
    /// instead of shrinking that ghost in place: the two must behave identically afterwards.
    #[test]
    fn truncated_copy_behaves_exactly_like_an_in_place_shrink() {
        let seed = 23u64;
        println!("seed {seed}");
        let mut x = seed;
        let mut step = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x
        };
        let mut big = Lru::new(5_000);
        for _ in 0..20_000 {
            let r = step();
            big.access(k((r >> 33) % 700), 1 + (r >> 20) % 40);
        }
        for cap in [0, 1, 37, 1_000, 4_999, 5_000, 9_000] {
            let mut copy = big.truncated_copy(cap);
            let mut shrunk = big.clone_exact();
            shrunk.set_capacity(cap);
            assert_eq!(
                (copy.len(), copy.used()),
                (shrunk.len(), shrunk.used()),
                "cap {cap}"
            );
            for _ in 0..20_000 {
                let r = step();
                let (u, c) = ((r >> 33) % 700, 1 + (r >> 20) % 40);
                assert_eq!(copy.access(k(u), c), shrunk.access(k(u), c), "cap {cap}");
                assert!(copy.used() <= cap);
            }
            assert_eq!((copy.len(), copy.used()), (shrunk.len(), shrunk.used()));
        }
    }

    #[test]
    fn s3fifo_one_hit_scan_does_not_flush_the_hot_set() {
        // A hot set accessed repeatedly, then a long scan of one-hit blocks: LRU loses the hot
        // set, S3-FIFO keeps it in main.
        let mut s3 = S3Fifo::new(100);
        let mut lru = Lru::new(100);
        for _ in 0..5 {
            for u in 0..50 {
                s3.access(k(u), 1);
                lru.access(k(u), 1);
            }
        }
        for u in 1000..1200 {
            s3.access(k(u), 1);
            lru.access(k(u), 1);
        }
        let s3_hot = (0..50).filter(|&u| s3.contains(&k(u))).count();
        let lru_hot = (0..50).filter(|&u| lru.contains(&k(u))).count();
        assert_eq!(lru_hot, 0);
        assert!(s3_hot >= 45, "s3fifo kept {s3_hot} of 50 hot blocks");
        assert!(s3.used() <= s3.capacity());
    }

    #[test]
    fn s3fifo_ghost_hit_goes_to_main() {
        let mut s3 = S3Fifo::new(10);
        s3.access(k(0), 1);
        for u in 1..20 {
            s3.access(k(u), 1);
        }
        assert!(!s3.contains(&k(0)));
        assert!(!s3.access(k(0), 1));
        assert_eq!(s3.in_main(&k(0)), Some(true));
        s3.check_invariants().unwrap();
    }

    #[test]
    fn policies_never_exceed_capacity_on_random_traffic() {
        let seed = 17u64;
        println!("seed {seed}");
        let mut x = seed;
        for kind in [PolicyKind::Lru, PolicyKind::S3Fifo] {
            let mut c = kind.build(1000);
            for step in 0..20_000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 33) % 500;
                let charge = 1 + (x >> 20) % 40;
                c.access(k(u), charge);
                if step % 5000 == 4999 {
                    c.set_capacity(200 + (x >> 40) % 1000);
                }
                assert!(c.used() <= c.capacity(), "{} over capacity", c.name());
            }
        }
    }

    /// The value-holding, unbounded LRU (the engine's shards) against a naive recency list:
    /// get, insert (replacing), remove, pop_lru and erase_if, which move slab slots around.
    #[test]
    fn unbounded_lru_with_values_matches_a_naive_list() {
        let seed = 31u64;
        println!("seed {seed}");
        let mut x = seed;
        let mut lru: Lru<BlockKey, u64> = Lru::unbounded();
        // Most recent first: (key, value, charge).
        let mut oracle: VecDeque<(BlockKey, u64, u64)> = VecDeque::new();
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = BlockKey {
                file: (x >> 60) % 3,
                unit: (x >> 33) % 200,
            };
            let pos = oracle.iter().position(|e| e.0 == key);
            match (x >> 20) % 16 {
                0 => {
                    let want = oracle.pop_back().map(|e| (e.0, e.1, e.2));
                    assert_eq!(lru.pop_lru(), want, "step {step}");
                }
                1 => {
                    let want = pos.and_then(|p| oracle.remove(p)).map(|e| (e.1, e.2));
                    assert_eq!(lru.remove(&key), want, "step {step}");
                }
                2 if step % 7 == 0 => {
                    let freed: u64 = oracle
                        .iter()
                        .filter(|e| e.0.file == key.file)
                        .map(|e| e.2)
                        .sum();
                    oracle.retain(|e| e.0.file != key.file);
                    assert_eq!(lru.erase_if(|k| k.file == key.file), freed, "step {step}");
                }
                3..=8 => {
                    let want = pos.map(|p| oracle[p].1);
                    assert_eq!(lru.get(&key).copied(), want, "step {step}");
                    if let Some(e) = pos.and_then(|p| oracle.remove(p)) {
                        oracle.push_front(e);
                    }
                }
                _ => {
                    let charge = 1 + step % 50;
                    let want = pos.and_then(|p| oracle.remove(p)).map(|e| (e.1, e.2));
                    assert_eq!(lru.insert(key, step, charge), want, "step {step}");
                    oracle.push_front((key, step, charge));
                }
            }
            assert_eq!(lru.entries(), oracle.len());
            assert_eq!(lru.used_bytes(), oracle.iter().map(|e| e.2).sum::<u64>());
            if step % 500 == 0 {
                let got: Vec<_> = lru.iter_lru_first().map(|(k, v, c)| (*k, *v, c)).collect();
                let want: Vec<_> = oracle.iter().rev().copied().collect();
                assert_eq!(got, want, "step {step}");
            }
        }
    }

    /// The value-holding, unbounded S3-FIFO (the engine's shards): the owner evicts; the queues
    /// stay consistent through replacement, eviction and erase_if.
    #[test]
    fn unbounded_s3fifo_with_values_keeps_its_invariants() {
        let seed = 37u64;
        println!("seed {seed}");
        let mut x = seed;
        let mut s3: S3Fifo<BlockKey, u64> = S3Fifo::unbounded();
        for step in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = BlockKey {
                file: (x >> 60) % 3,
                unit: (x >> 33) % 300,
            };
            match (x >> 20) % 10 {
                0 if step % 11 == 0 => {
                    s3.erase_if(|k| k.file == key.file);
                }
                0..=4 => {
                    if s3.get(&key).is_none() {
                        s3.insert(key, step, 1 + step % 40);
                    }
                }
                _ => {
                    s3.insert(key, step, 1 + step % 40);
                }
            }
            while s3.used_bytes() > 2_000 {
                let (k, _, c) = s3.evict_one().unwrap();
                assert!(!s3.contains_key(&k) && c > 0);
            }
            if step % 100 == 0 {
                s3.check_invariants().unwrap();
            }
        }
        assert!(s3.check_invariants().is_ok());
        assert_eq!(s3.capacity_bytes(), u64::MAX);
    }

    #[test]
    fn parse_policy_names() {
        assert_eq!(PolicyKind::parse("LRU").ok(), Some(PolicyKind::Lru));
        assert_eq!(PolicyKind::parse("s3-fifo").ok(), Some(PolicyKind::S3Fifo));
        assert!(PolicyKind::parse("arc").is_err());
    }
}
