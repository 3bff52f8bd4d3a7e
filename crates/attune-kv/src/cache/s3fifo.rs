//! A sharded, byte-charged S3-FIFO cache that holds values: the engine block cache's
//! scan-resistant replacement policy (option `block_cache_policy=s3fifo`). The policy is
//! `attune_cache::policy::S3Fifo` (the one S3-FIFO, shared with the cache simulator), unbounded
//! per shard; this file adapts it to `ShardPolicy` and holds its tests in the sharded cache.
//!
//! S3-FIFO (Yang et al., SOSP '23) keeps three FIFO queues per shard:
//! - **small**: new entries land here (about 10 % of the shard's bytes). An entry leaving
//!   small that was read at least once since it arrived moves to main; one never read leaves
//!   the cache and its key goes to the ghost.
//! - **main**: entries evicted from its head with a 2-bit frequency (0..=3): a non-zero
//!   frequency is decremented and the entry goes back to the tail; zero leaves the cache.
//! - **ghost**: keys only (no values, no charge) of entries that left small unread, as many as
//!   main holds entries (at least 16). A miss whose key is in the ghost is inserted straight
//!   into main.
//!
//! A one-pass scan therefore flows through small and never displaces the entries in main,
//! which is what an LRU cannot do (docs/symbiosis.md, "S3-FIFO in the engine").
//!
//! Sharding and the budget are `cache::Sharded`'s, shared with the LRU: 16 independent
//! mutexes, one byte budget for all of them (an atomic total); an insert evicts from its own
//! shard first and from the others only if its own ran empty; shrinking evicts before it
//! returns. A shard knows no capacity of its own, so small's share is a tenth of the bytes the
//! shard holds (the next eviction takes small's head while small holds at least that).
//!
//! Thread safety: every method takes `&self`; a call locks one shard at a time (a hit also
//! locks its shard, to raise the frequency). Invariants: once every call in flight has
//! returned, the total charge is at most the capacity set last (an entry larger than the whole
//! capacity is not admitted); per shard, the used bytes are the sum of its entries' charges and
//! small's bytes the sum over the entries in small; every cached key is in exactly one of
//! small and main, exactly once (`S3Fifo::check_invariants`).

use crate::cache::sharded::{block_key, Charged, Key, ShardPolicy, Sharded};
use attune_cache::policy::{BlockKey, S3Fifo};

/// An S3-FIFO shard: `attune_cache`'s S3-FIFO, unbounded (the [`Sharded`] budget decides
/// evictions). A replaced entry keeps its place and frequency.
impl<V: Charged + Clone + Send> ShardPolicy for S3Fifo<BlockKey, V> {
    type Value = V;

    fn new() -> Self {
        S3Fifo::unbounded()
    }

    #[inline]
    fn get(&mut self, k: &Key) -> Option<&V> {
        S3Fifo::get(self, &block_key(k))
    }

    fn put(&mut self, k: Key, value: V, charge: usize) -> Option<usize> {
        self.insert(block_key(&k), value, charge as u64)
            .map(|(_, c)| c as usize)
    }

    fn evict_one(&mut self) -> Option<usize> {
        S3Fifo::evict_one(self).map(|(_, _, c)| c as usize)
    }

    /// Removes every entry of `file`. Ghost keys of the file stay until they age out (file
    /// numbers are never reused, so they can never match again).
    fn erase_file(&mut self, file: u64) -> usize {
        self.erase_if(|k| k.file == file) as usize
    }

    fn usage(&self) -> usize {
        self.used_bytes() as usize
    }

    /// Main's head first, then small's: only an approximation of recency (S3-FIFO keeps
    /// none); adaptive sizing, the caller that reads it, refuses S3-FIFO.
    fn eviction_order(&self) -> Vec<(Key, usize)> {
        self.iter_main_first()
            .map(|(k, _, c)| ((k.file, k.unit), c as usize))
            .collect()
    }
}

/// A sharded, byte-charged S3-FIFO with one budget for all shards (see the module doc).
pub(crate) type ShardedS3Fifo<V> = Sharded<S3Fifo<BlockKey, V>>;

/// Test support on top of the shared mechanism.
#[cfg(test)]
impl<V: Charged + Clone + Send> ShardedS3Fifo<V> {
    /// Checks every shard's invariants (test support): the policy's own, and the total matches
    /// the shards.
    fn check_invariants(&self) -> std::result::Result<(), String> {
        let (shards, total) = self.parts();
        let mut sum = 0u64;
        for (i, s) in shards.iter().enumerate() {
            let s = s.lock();
            s.check_invariants()
                .map_err(|e| format!("shard {i}: {e}"))?;
            sum += s.used_bytes();
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
        assert_eq!(s.in_main(&block_key(&keys[0])), Some(true));
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
