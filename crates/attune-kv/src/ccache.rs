//! The in-process compressed block cache of the user/user cache layout: blocks exactly as they
//! sit on disk (body + trailer, checksum verified when first read), charged by their length plus
//! a fixed per-entry overhead, in a sharded, resizable LRU. It is the second tier that the OS
//! page cache is in the user/kernel layout; `symbiosis` sizes it as the budget minus the block
//! cache.
//!
//! Thread safety: independent shard mutexes, like `cache::BlockCache`. Invariant: after any call
//! returns, each shard's usage is at most its capacity (an entry larger than a shard is not
//! admitted), so the total is at most the capacity set last.

use lru::LruCache;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::cache::{shard_of, Key, SHARDS};

/// Bytes charged per entry beyond its data: the map slot, list links and the `Arc` header,
/// rounded up. Default 64, as `Block::charge` does for the uncompressed cache.
pub const ENTRY_OVERHEAD_BYTES: usize = 64;

struct Shard {
    lru: LruCache<Key, Arc<[u8]>>,
    usage: usize,
    capacity: usize,
}

impl Shard {
    fn evict(&mut self) -> u64 {
        let mut n = 0;
        while self.usage > self.capacity {
            match self.lru.pop_lru() {
                Some((_, b)) => {
                    self.usage -= b.len() + ENTRY_OVERHEAD_BYTES;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }
}

/// Counters of the compressed cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompressedCacheStats {
    pub capacity_bytes: u64,
    pub usage_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

/// A sharded, resizable LRU of raw (on-disk) blocks.
pub struct CompressedCache {
    shards: Vec<Mutex<Shard>>,
    capacity: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl CompressedCache {
    pub fn new(capacity_bytes: u64) -> Self {
        let per = (capacity_bytes / SHARDS as u64) as usize;
        CompressedCache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        lru: LruCache::unbounded(),
                        usage: 0,
                        capacity: per,
                    })
                })
                .collect(),
            capacity: AtomicU64::new(capacity_bytes),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    pub fn get(&self, file: u64, offset: u64) -> Option<Arc<[u8]>> {
        let k = (file, offset);
        let got = self.shards[shard_of(&k)].lock().lru.get(&k).cloned();
        let c = if got.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        c.fetch_add(1, Ordering::Relaxed);
        got
    }

    pub fn insert(&self, file: u64, offset: u64, raw: Arc<[u8]>) {
        let k = (file, offset);
        let charge = raw.len() + ENTRY_OVERHEAD_BYTES;
        let mut s = self.shards[shard_of(&k)].lock();
        if charge > s.capacity {
            return;
        }
        if let Some(old) = s.lru.put(k, raw) {
            s.usage -= old.len() + ENTRY_OVERHEAD_BYTES;
        }
        s.usage += charge;
        let ev = s.evict();
        drop(s);
        self.evictions.fetch_add(ev, Ordering::Relaxed);
    }

    /// Changes the capacity; shrinking evicts before returning.
    pub fn set_capacity(&self, capacity_bytes: u64) {
        self.capacity.store(capacity_bytes, Ordering::Relaxed);
        let per = (capacity_bytes / SHARDS as u64) as usize;
        let mut ev = 0;
        for s in &self.shards {
            let mut s = s.lock();
            s.capacity = per;
            ev += s.evict();
        }
        self.evictions.fetch_add(ev, Ordering::Relaxed);
    }

    /// Drops every block of one file.
    pub fn erase_file(&self, file: u64) {
        for s in &self.shards {
            let mut s = s.lock();
            let keys: Vec<Key> = s
                .lru
                .iter()
                .filter(|(k, _)| k.0 == file)
                .map(|(k, _)| *k)
                .collect();
            for k in keys {
                if let Some(b) = s.lru.pop(&k) {
                    s.usage -= b.len() + ENTRY_OVERHEAD_BYTES;
                }
            }
        }
    }

    pub fn stats(&self) -> CompressedCacheStats {
        CompressedCacheStats {
            capacity_bytes: self.capacity.load(Ordering::Relaxed),
            usage_bytes: self.shards.iter().map(|s| s.lock().usage as u64).sum(),
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
