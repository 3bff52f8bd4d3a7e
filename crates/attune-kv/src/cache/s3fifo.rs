//! A sharded, byte-charged S3-FIFO cache that holds values: the engine block cache's
//! scan-resistant replacement policy (option `block_cache_policy=s3fifo`).
//!
//! S3-FIFO (Yang et al., SOSP '23) keeps three FIFO queues per shard:
//! - **small**: new entries land here (about 10 % of the shard's bytes). An entry leaving
//!   small that was read at least once since it arrived moves to main; one never read leaves
//!   the cache and its key goes to the ghost.
//! - **main**: entries evicted from its head with a 2-bit frequency (0..=3): a non-zero
//!   frequency is decremented and the entry goes back to the tail; zero leaves the cache.
//! - **ghost**: keys only (no values, no charge) of entries that left small unread, as many as
//!   main holds entries. A miss whose key is in the ghost is inserted straight into main.
//!
//! A one-pass scan therefore flows through small and never displaces the entries in main,
//! which is what an LRU cannot do (docs/symbiosis.md, "S3-FIFO in the engine").
//!
//! Sharding and the budget are `cache::Sharded`'s, shared with the LRU: 16 independent
//! mutexes, one byte budget for all of them (an atomic total); an insert evicts from its own
//! shard first and from the others only if its own ran empty; shrinking evicts before it
//! returns. This module is the per-shard policy (`cache::ShardPolicy`).
//!
//! Thread safety: every method takes `&self`; a call locks one shard at a time (a hit also
//! locks its shard, to raise the frequency). Invariants: once every call in flight has
//! returned, the total charge is at most the capacity set last (an entry larger than the whole
//! capacity is not admitted); per shard, `usage` is the sum of its entries' charges and
//! `small_bytes` the sum over the entries in small; every cached key is in exactly one of
//! small and main, exactly once.

use crate::cache::sharded::{Charged, Key, ShardPolicy, Sharded};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Largest frequency an entry counts to (a 2-bit counter). 3 is the paper's choice: an entry
/// read often survives up to three more passes of main without a read.
const FREQ_MAX: u8 = 3;

/// Small's share of a shard's bytes is at most 1 / `SMALL_DIV`: 10, the paper's 10 %
/// (also what the simulator's `attune_cache::policy::S3Fifo` uses).
const SMALL_DIV: u64 = 10;

/// The ghost holds at least this many keys per shard, so that a shard whose main is still
/// empty (a cold start) can already recognise a key it just evicted. 16 keys cost 0.5 KiB.
const GHOST_MIN: usize = 16;

/// A fast multiplicative hasher for (file, offset) keys (the map is keyed by trusted,
/// engine-chosen numbers, so no hash-flooding defence is needed).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(23) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

struct Entry<V> {
    value: V,
    charge: usize,
    freq: u8,
    in_main: bool,
}

/// One S3-FIFO shard (the policy; [`Sharded`] adds the locking and the shared budget).
pub(crate) struct Shard<V> {
    map: FastMap<Key, Entry<V>>,
    small: VecDeque<Key>,
    main: VecDeque<Key>,
    small_bytes: usize,
    usage: usize,
    /// Ghost FIFO of (key, sequence); `ghost_map` holds the live ones (a key re-added later
    /// gets a new sequence, so its older queue slot is stale and skipped).
    ghost: VecDeque<(Key, u64)>,
    ghost_map: FastMap<Key, u64>,
    ghost_seq: u64,
}

impl<V> Shard<V> {
    fn ghost_insert(&mut self, k: Key) {
        self.ghost_seq += 1;
        self.ghost.push_back((k, self.ghost_seq));
        self.ghost_map.insert(k, self.ghost_seq);
        let limit = self.main.len().max(GHOST_MIN);
        while self.ghost_map.len() > limit {
            let Some((old, seq)) = self.ghost.pop_front() else {
                break;
            };
            if self.ghost_map.get(&old) == Some(&seq) {
                self.ghost_map.remove(&old);
            }
        }
        // Stale slots (keys that left the ghost for main) are bounded: drop them when they
        // outnumber the live keys.
        if self.ghost.len() > 2 * self.ghost_map.len() + GHOST_MIN {
            let live = &self.ghost_map;
            self.ghost.retain(|(k, s)| live.get(k) == Some(s));
        }
    }

    /// Whether the next eviction takes small's head (small at or above its share, or main
    /// empty) rather than main's.
    fn evict_from_small(&self) -> bool {
        !self.small.is_empty()
            && (self.main.is_empty()
                || (self.small_bytes as u64).saturating_mul(SMALL_DIV) >= self.usage as u64)
    }
}

impl<V: Charged + Clone + Send> ShardPolicy for Shard<V> {
    type Value = V;

    fn new() -> Self {
        Shard {
            map: FastMap::default(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            small_bytes: 0,
            usage: 0,
            ghost: VecDeque::new(),
            ghost_map: FastMap::default(),
            ghost_seq: 0,
        }
    }

    fn get(&mut self, k: &Key) -> Option<&V> {
        let e = self.map.get_mut(k)?;
        e.freq = (e.freq + 1).min(FREQ_MAX);
        Some(&e.value)
    }

    /// Inserts or replaces (a replaced entry keeps its place and frequency). Returns the old
    /// charge when it replaced one.
    fn put(&mut self, k: Key, value: V, charge: usize) -> Option<usize> {
        if let Some(e) = self.map.get_mut(&k) {
            let old = e.charge;
            e.value = value;
            e.charge = charge;
            if !e.in_main {
                self.small_bytes = self.small_bytes - old + charge;
            }
            self.usage = self.usage - old + charge;
            return Some(old);
        }
        let in_main = self.ghost_map.remove(&k).is_some();
        self.map.insert(
            k,
            Entry {
                value,
                charge,
                freq: 0,
                in_main,
            },
        );
        if in_main {
            self.main.push_back(k);
        } else {
            self.small.push_back(k);
            self.small_bytes += charge;
        }
        self.usage += charge;
        None
    }

    /// Evicts one entry and returns its charge, or `None` if the shard is empty. Ends: each
    /// pass moves an entry from small to main (once per entry) or lowers a main entry's
    /// frequency (at most `FREQ_MAX` times per entry) or evicts.
    fn evict_one(&mut self) -> Option<usize> {
        loop {
            if self.evict_from_small() {
                let k = self.small.pop_front()?;
                let Some(e) = self.map.get_mut(&k) else {
                    continue; // not reached: small lists only cached keys
                };
                self.small_bytes -= e.charge;
                if e.freq >= 1 {
                    e.freq = 0;
                    e.in_main = true;
                    self.main.push_back(k);
                    continue;
                }
                let charge = e.charge;
                self.map.remove(&k);
                self.usage -= charge;
                self.ghost_insert(k);
                return Some(charge);
            }
            let k = self.main.pop_front()?;
            let Some(e) = self.map.get_mut(&k) else {
                continue; // not reached: main lists only cached keys
            };
            if e.freq > 0 {
                e.freq -= 1;
                self.main.push_back(k);
                continue;
            }
            let charge = e.charge;
            self.map.remove(&k);
            self.usage -= charge;
            return Some(charge);
        }
    }

    /// Removes every entry of `file`; returns the bytes freed. Ghost keys of the file stay
    /// until they age out (file numbers are never reused, so they can never match again).
    fn erase_file(&mut self, file: u64) -> usize {
        let before = self.usage;
        let mut small_freed = 0;
        self.map.retain(|k, e| {
            if k.0 != file {
                return true;
            }
            if !e.in_main {
                small_freed += e.charge;
            }
            false
        });
        self.small.retain(|k| k.0 != file);
        self.main.retain(|k| k.0 != file);
        self.small_bytes -= small_freed;
        self.usage = self.map.values().map(|e| e.charge).sum();
        before - self.usage
    }

    fn usage(&self) -> usize {
        self.usage
    }

    /// Main's head first, then small's: only an approximation of recency (S3-FIFO keeps
    /// none); adaptive sizing, the caller that reads it, refuses S3-FIFO.
    fn eviction_order(&self) -> Vec<(Key, usize)> {
        self.main
            .iter()
            .chain(self.small.iter())
            .filter_map(|k| self.map.get(k).map(|e| (*k, e.charge)))
            .collect()
    }
}

/// A sharded, byte-charged S3-FIFO with one budget for all shards (see the module doc).
pub(crate) type ShardedS3Fifo<V> = Sharded<Shard<V>>;

/// Test support on top of the shared mechanism.
#[cfg(test)]
impl<V: Charged + Clone + Send> ShardedS3Fifo<V> {
    /// Checks every shard's invariants (test support): `usage` and `small_bytes` match the
    /// entries, each cached key is queued exactly once, and the total matches the shards.
    #[cfg(test)]
    fn check_invariants(&self) -> std::result::Result<(), String> {
        let (shards, total) = self.parts();
        let mut sum = 0u64;
        for (i, s) in shards.iter().enumerate() {
            let s = s.lock();
            let usage: usize = s.map.values().map(|e| e.charge).sum();
            let small: usize = s
                .small
                .iter()
                .filter_map(|k| s.map.get(k))
                .map(|e| e.charge)
                .sum();
            if usage != s.usage || small != s.small_bytes {
                return Err(format!("shard {i}: usage/small_bytes out of step"));
            }
            if s.small.len() + s.main.len() != s.map.len() {
                return Err(format!(
                    "shard {i}: queues list {} + {} keys for {} entries",
                    s.small.len(),
                    s.main.len(),
                    s.map.len()
                ));
            }
            if s.small
                .iter()
                .any(|k| s.map.get(k).is_none_or(|e| e.in_main))
                || s.main
                    .iter()
                    .any(|k| s.map.get(k).is_none_or(|e| !e.in_main))
            {
                return Err(format!(
                    "shard {i}: a queued key is missing or in the wrong queue"
                ));
            }
            sum += s.usage as u64;
        }
        if sum != total {
            return Err(format!("total {total} != sum of shards {sum}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::sharded::{shard_of, ShardedLru};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::sync::Arc;

    /// A test value: only its charge matters.
    #[derive(Clone, Debug, PartialEq)]
    struct Val(usize);

    impl Charged for Val {
        fn charge(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn inserted_entries_are_returned_and_evicted_ones_miss() {
        let c = ShardedS3Fifo::new(100 * 100);
        for i in 0..50u64 {
            assert_eq!(c.insert((1, i), Val(100)), Some(0));
        }
        assert!((0..50u64).all(|i| c.get(&(1, i)) == Some(Val(100))));
        assert_eq!(c.usage(), 5000);
        // 1000 more entries through a 100-entry cache: most of the first ones are gone, and
        // every miss is a key that really was evicted (the usage accounts for the rest).
        let mut evictions = 0;
        for i in 50..1050u64 {
            evictions += c.insert((1, i), Val(100)).unwrap_or(0);
        }
        let resident = (0..1050u64).filter(|&i| c.get(&(1, i)).is_some()).count() as u64;
        assert_eq!(resident + evictions, 1050);
        assert_eq!(resident * 100, c.usage());
        assert!(c.usage() <= c.capacity());
        c.check_invariants().unwrap();
    }

    #[test]
    fn an_entry_larger_than_the_capacity_is_not_admitted() {
        let c = ShardedS3Fifo::new(1000);
        assert_eq!(c.insert((1, 0), Val(1001)), None);
        assert_eq!(c.get(&(1, 0)), None);
        assert_eq!(c.usage(), 0);
    }

    #[test]
    fn replacing_an_entry_recharges_it() {
        let c = ShardedS3Fifo::new(10_000);
        c.insert((1, 0), Val(100));
        c.insert((1, 0), Val(300));
        assert_eq!(c.get(&(1, 0)), Some(Val(300)));
        assert_eq!(c.usage(), 300);
        c.check_invariants().unwrap();
    }

    #[test]
    fn a_key_evicted_unread_from_small_returns_to_main() {
        // One shard's keys only, so that its queues are the whole story.
        let keys: Vec<Key> = (0..100_000u64)
            .map(|o| (1, o))
            .filter(|k| shard_of(k) == 3)
            .take(40)
            .collect();
        let c = ShardedS3Fifo::new(20 * 100);
        for &k in &keys[..21] {
            c.insert(k, Val(100));
        }
        // keys[0] left small unread: a miss now, and its key is in the ghost.
        assert_eq!(c.get(&keys[0]), None);
        c.insert(keys[0], Val(100));
        let s = c.parts().0[3].lock();
        assert!(s.map.get(&keys[0]).is_some_and(|e| e.in_main));
    }

    #[test]
    fn erase_file_drops_only_that_files_entries() {
        let c = ShardedS3Fifo::new(1 << 20);
        for i in 0..200u64 {
            c.insert((1 + i % 2, i), Val(10 + i as usize));
        }
        c.erase_file(1);
        assert!((0..200u64).all(|i| c.get(&(1 + i % 2, i)).is_some() == (i % 2 == 1)));
        let want: u64 = (0..200u64).filter(|i| i % 2 == 1).map(|i| 10 + i).sum();
        assert_eq!(c.usage(), want);
        c.check_invariants().unwrap();
    }

    #[test]
    fn shrinking_evicts_at_once_and_growing_keeps_everything() {
        let c = ShardedS3Fifo::new(1000 * 100);
        for i in 0..1000u64 {
            c.insert((1, i), Val(100));
        }
        assert_eq!(c.usage(), 1000 * 100);
        c.set_capacity(300 * 100);
        assert!(c.usage() <= 300 * 100, "{}", c.usage());
        assert!(
            c.usage() > 290 * 100,
            "shrink evicted more than it must: {}",
            c.usage()
        );
        c.set_capacity(2000 * 100);
        for i in 0..1000u64 {
            c.insert((2, i), Val(100));
        }
        assert!(c.usage() <= 2000 * 100);
        c.check_invariants().unwrap();
    }

    #[test]
    fn usage_stays_within_capacity_under_concurrent_readers_and_a_shrink() {
        let seed: u64 = rand::random();
        println!("seed {seed}");
        let c = Arc::new(ShardedS3Fifo::new(4096 * 64));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ t);
                    for _ in 0..20_000 {
                        let k = (rng.gen_range(0..4u64), rng.gen_range(0..2000u64));
                        if c.get(&k).is_none() {
                            c.insert(k, Val(rng.gen_range(100..4096)));
                        }
                    }
                })
            })
            .collect();
        for cap in [4096 * 48, 4096 * 16, 4096 * 32, 4096 * 8] {
            c.set_capacity(cap);
            std::thread::yield_now();
        }
        for t in threads {
            t.join().unwrap();
        }
        assert!(
            c.usage() <= c.capacity(),
            "usage {} > {}",
            c.usage(),
            c.capacity()
        );
        c.check_invariants().unwrap();
    }

    #[test]
    fn random_operations_keep_the_invariants() {
        let seed: u64 = rand::random();
        println!("seed {seed}");
        let mut rng = StdRng::seed_from_u64(seed);
        let c = ShardedS3Fifo::new(50 * 1000);
        for step in 0..50_000 {
            let k = (rng.gen_range(0..3u64), rng.gen_range(0..300u64));
            match rng.gen_range(0..100) {
                0 => c.erase_file(rng.gen_range(0..3)),
                1 => {
                    c.set_capacity(rng.gen_range(1..100) * 1000);
                }
                2..=49 => {
                    c.get(&k);
                }
                _ => {
                    c.insert(k, Val(rng.gen_range(1..2000)));
                }
            }
            assert!(c.usage() <= c.capacity(), "seed {seed} step {step}");
            if step % 1000 == 0 {
                c.check_invariants()
                    .map_err(|e| format!("seed {seed}: {e}"))
                    .unwrap();
            }
        }
    }

    /// Read-through of `key`: a hit, else insert. Returns whether it hit.
    fn touch(get: &dyn Fn(&Key) -> bool, insert: &dyn Fn(Key), key: Key) -> bool {
        let hit = get(&key);
        if !hit {
            insert(key);
        }
        hit
    }

    /// A hot set of 200 blocks, read three times, then 30 rounds of a one-pass scan chunk of
    /// 300 never-repeated blocks followed by one read of the hot set, through a 400-block
    /// cache. LRU loses the hot set to every chunk; S3-FIFO keeps it in main.
    #[test]
    fn a_one_pass_scan_does_not_evict_the_hot_set_that_lru_loses() {
        let run = |get: &dyn Fn(&Key) -> bool, insert: &dyn Fn(Key)| -> u64 {
            for _ in 0..3 {
                for h in 0..200u64 {
                    touch(get, insert, (1, h));
                }
            }
            let mut hot_hits = 0;
            let mut next_scan = 0u64;
            for _ in 0..30 {
                for _ in 0..300 {
                    touch(get, insert, (2, next_scan));
                    next_scan += 1;
                }
                hot_hits += (0..200u64).filter(|&h| touch(get, insert, (1, h))).count() as u64;
            }
            hot_hits
        };
        let cap = 400 * 100;
        let lru = ShardedLru::new(cap);
        let lru_hits = run(&|k| lru.get(k).is_some(), &|k| {
            lru.insert(k, Val(100));
        });
        let s3 = ShardedS3Fifo::new(cap);
        let s3_hits = run(&|k| s3.get(k).is_some(), &|k| {
            s3.insert(k, Val(100));
        });
        println!("hot hits of 6000: lru {lru_hits}, s3fifo {s3_hits}");
        assert!(s3_hits >= 5700, "s3fifo kept too few hot blocks: {s3_hits}");
        assert!(s3_hits > 2 * lru_hits, "lru {lru_hits} vs s3fifo {s3_hits}");
        s3.check_invariants().unwrap();
    }
}
