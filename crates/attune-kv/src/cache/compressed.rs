//! The in-process compressed block cache of the user/user cache layout: blocks exactly as they
//! sit on disk (body + trailer, checksum verified when first read), charged by their length plus
//! a fixed per-entry overhead, in a sharded, resizable LRU. It is the second tier that the OS
//! page cache is in the user/kernel layout; `sizing` sizes it as the budget minus the block
//! cache.
//!
//! The capacity is one budget for all shards (`cache::ShardedLru`, shared with the block cache).
//!
//! Thread safety: independent shard mutexes, like `cache::BlockCache`, and an atomic total.
//! Invariant: once every call in flight has returned, the total usage is at most the capacity
//! set last (an entry larger than the whole capacity is not admitted).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[cfg(test)]
use crate::cache::sharded::{shard_of, SHARDS};
use crate::cache::sharded::{Charged, ShardedLru};

/// Bytes charged per entry beyond its data: the map slot, list links and the `Arc` header,
/// rounded up. Default 64, as `Block::charge` does for the uncompressed cache.
pub const ENTRY_OVERHEAD_BYTES: usize = 64;

impl Charged for Arc<[u8]> {
    fn charge(&self) -> usize {
        self.len() + ENTRY_OVERHEAD_BYTES
    }
}

/// Counters of the compressed cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CompressedCacheStats {
    pub capacity_bytes: u64,
    pub usage_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

/// A sharded, resizable LRU of raw (on-disk) blocks.
pub struct CompressedCache {
    lru: ShardedLru<Arc<[u8]>>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl CompressedCache {
    pub fn new(capacity_bytes: u64) -> Self {
        CompressedCache {
            lru: ShardedLru::new(capacity_bytes),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    pub fn get(&self, file: u64, offset: u64) -> Option<Arc<[u8]>> {
        let got = self.lru.get(&(file, offset));
        let c = if got.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        c.fetch_add(1, Ordering::Relaxed);
        got
    }

    /// Inserts a block. A block larger than the whole capacity is not admitted and counts as
    /// one eviction (it is not held), so that "no evictions" means "every block inserted since
    /// is held", which the controller relies on (`Symbiosis::note_second_tier`).
    pub fn insert(&self, file: u64, offset: u64, raw: Arc<[u8]>) {
        let ev = self.lru.insert((file, offset), raw).unwrap_or(1);
        self.evictions.fetch_add(ev, Ordering::Relaxed);
    }

    /// Changes the capacity; shrinking evicts before returning.
    pub fn set_capacity(&self, capacity_bytes: u64) {
        let ev = self.lru.set_capacity(capacity_bytes);
        self.evictions.fetch_add(ev, Ordering::Relaxed);
    }

    /// Drops every block of one file.
    pub fn erase_file(&self, file: u64) {
        self.lru.erase_file(file);
    }

    /// The blocks whose key passes `keep` with their charges, oldest first (see
    /// `cache::ShardedLru::recency_order`).
    pub(crate) fn recency_order(
        &self,
        keep: impl Fn(&(u64, u64)) -> bool,
    ) -> Vec<((u64, u64), usize)> {
        self.lru.recency_order(keep)
    }

    pub fn stats(&self) -> CompressedCacheStats {
        CompressedCacheStats {
            capacity_bytes: self.lru.capacity(),
            usage_bytes: self.lru.usage(),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_never_exceeds_capacity_through_inserts_and_shrinks() {
        let c = CompressedCache::new(16 * 32 * 1024);
        for i in 0..2000u64 {
            c.insert(
                i % 3,
                i * 4096,
                Arc::from(vec![7u8; 1000 + (i % 2000) as usize]),
            );
            let s = c.stats();
            assert!(s.usage_bytes <= s.capacity_bytes, "{i}: {s:?}");
        }
        c.set_capacity(16 * 4096);
        let s = c.stats();
        assert!(s.usage_bytes <= 16 * 4096 && s.evictions > 0, "{s:?}");
        c.erase_file(1);
        c.erase_file(0);
        c.erase_file(2);
        assert_eq!(c.stats().usage_bytes, 0);
    }

    /// A data set that fits the capacity but not an equal share per shard: every block stays
    /// (with fixed shares of capacity / 16 the fullest shards evicted).
    #[test]
    fn a_data_set_that_fits_the_total_is_kept_whatever_the_shard_imbalance() {
        let block = 900usize;
        let n = 2000u64;
        let capacity = n * (block + ENTRY_OVERHEAD_BYTES) as u64 + 100;
        let c = CompressedCache::new(capacity);
        let mut per_shard = [0u64; SHARDS];
        for i in 0..n {
            per_shard[shard_of(&(1, i * 4096))] += 1;
            c.insert(1, i * 4096, Arc::from(vec![1u8; block]));
        }
        let share = n / SHARDS as u64;
        assert!(
            per_shard.iter().any(|&b| b > share),
            "the test needs imbalance: {per_shard:?}"
        );
        let s = c.stats();
        assert_eq!(s.evictions, 0, "{s:?}");
        assert!((0..n).all(|i| c.get(1, i * 4096).is_some()));
        // One more block makes room by evicting exactly one old entry.
        c.insert(2, 0, Arc::from(vec![1u8; block]));
        let s = c.stats();
        assert!(
            s.usage_bytes <= s.capacity_bytes && s.evictions == 1,
            "{s:?}"
        );
    }

    #[test]
    fn a_hit_returns_the_stored_bytes() {
        let c = CompressedCache::new(1 << 20);
        assert!(c.get(1, 0).is_none());
        c.insert(1, 0, Arc::from(&b"raw block"[..]));
        assert_eq!(&*c.get(1, 0).unwrap(), b"raw block");
        let s = c.stats();
        assert_eq!((s.hits, s.misses), (1, 1));
    }
}
