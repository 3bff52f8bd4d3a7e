//! The block cache: a sharded LRU of uncompressed blocks, charged by bytes, whose capacity can be
//! changed while running (the adaptive cache-sizing work resizes it online).
//!
//! Thread safety: shards are independent mutexes; a lookup locks one shard for a hash-map probe and
//! a list splice. Keys are (file number, block offset); file numbers are never reused, so an entry
//! can never describe another file's bytes. A cache built with [`BlockCache::with_tiers`] also
//! carries the second tier and access log of the adaptive cache sizing (`crate::symbiosis`),
//! which `Table::block` then reads through.

use crate::table::block::Block;
use lru::LruCache;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Number of shards (a power of two). 16 keeps contention low on small machines without leaving
/// shards too small to be fair at a few MiB of capacity.
pub(crate) const SHARDS: usize = 16;

pub(crate) type Key = (u64, u64);

struct Shard {
    lru: LruCache<Key, Arc<Block>>,
    usage: usize,
    capacity: usize,
}

impl Shard {
    fn evict(&mut self) -> u64 {
        let mut n = 0;
        while self.usage > self.capacity {
            match self.lru.pop_lru() {
                Some((_, b)) => {
                    self.usage -= b.charge();
                    n += 1;
                }
                None => break,
            }
        }
        n
    }
}

/// Counters of the cache.
#[derive(Clone, Copy, Debug, Default)]
pub struct CacheStats {
    pub capacity_bytes: u64,
    pub usage_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
}

/// A sharded, resizable LRU cache of blocks.
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    evictions: AtomicU64,
    capacity: AtomicU64,
    tiers: Option<Arc<crate::symbiosis::Tiers>>,
}

/// The shard of a (file, offset) key; shared with the compressed cache.
pub(crate) fn shard_of(k: &Key) -> usize {
    let h = (k.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k.1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (h >> 60) as usize % SHARDS
}

impl BlockCache {
    pub fn new(capacity_bytes: u64) -> Self {
        let per = (capacity_bytes / SHARDS as u64) as usize;
        BlockCache {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        lru: LruCache::unbounded(),
                        usage: 0,
                        capacity: per,
                    })
                })
                .collect(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            capacity: AtomicU64::new(capacity_bytes),
            tiers: None,
        }
    }

    /// A cache whose misses go through `tiers` (the compressed tier and the sizing log).
    pub(crate) fn with_tiers(capacity_bytes: u64, tiers: Arc<crate::symbiosis::Tiers>) -> Self {
        BlockCache {
            tiers: Some(tiers),
            ..Self::new(capacity_bytes)
        }
    }

    /// The second tier and access log, when adaptive sizing is configured.
    pub(crate) fn tiers(&self) -> Option<&Arc<crate::symbiosis::Tiers>> {
        self.tiers.as_ref()
    }

    pub fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        let k = (file, offset);
        let got = self.shards[shard_of(&k)].lock().lru.get(&k).cloned();
        match &got {
            Some(_) => self.hits.fetch_add(1, Ordering::Relaxed),
            None => self.misses.fetch_add(1, Ordering::Relaxed),
        };
        got
    }

    pub fn insert(&self, file: u64, offset: u64, block: Arc<Block>) {
        let k = (file, offset);
        let charge = block.charge();
        let mut s = self.shards[shard_of(&k)].lock();
        if charge > s.capacity {
            return; // would evict everything and still not fit
        }
        if let Some(old) = s.lru.put(k, block) {
            s.usage -= old.charge();
        }
        s.usage += charge;
        let ev = s.evict();
        drop(s);
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.evictions.fetch_add(ev, Ordering::Relaxed);
    }

    /// Changes the capacity; shrinking evicts immediately.
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

    /// Drops every block of one file (after the file is deleted).
    pub fn erase_file(&self, file: u64) {
        if let Some(t) = &self.tiers {
            t.erase_file(file);
        }
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
                    s.usage -= b.charge();
                }
            }
        }
    }

    pub fn stats(&self) -> CacheStats {
        let usage = self.shards.iter().map(|s| s.lock().usage as u64).sum();
        CacheStats {
            capacity_bytes: self.capacity.load(Ordering::Relaxed),
            usage_bytes: usage,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::block::BlockBuilder;
    use std::path::PathBuf;

    fn block(bytes: usize) -> Arc<Block> {
        let mut b = BlockBuilder::default();
        b.add(&[0u8; 9], &vec![1u8; bytes]);
        Arc::new(Block::new(b.finish(), Arc::new(PathBuf::from("t")), 0).unwrap())
    }

    #[test]
    fn usage_stays_within_capacity_and_shrinking_evicts() {
        let c = BlockCache::new(16 * 64 * 1024);
        for i in 0..1000 {
            c.insert(1, i * 4096, block(4000));
        }
        let s = c.stats();
        assert!(s.usage_bytes <= s.capacity_bytes, "{s:?}");
        assert!(s.evictions > 0);
        c.set_capacity(16 * 8 * 1024);
        assert!(c.stats().usage_bytes <= 16 * 8 * 1024);
    }

    #[test]
    fn hits_and_misses_are_counted() {
        let c = BlockCache::new(1 << 20);
        assert!(c.get(1, 0).is_none());
        c.insert(1, 0, block(10));
        assert!(c.get(1, 0).is_some());
        let s = c.stats();
        assert_eq!((s.hits, s.misses), (1, 1));
    }
}
