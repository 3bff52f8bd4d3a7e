//! The block cache: a sharded cache of uncompressed blocks, charged by bytes, whose capacity can
//! be changed while running (the adaptive cache-sizing work resizes it online). Its replacement
//! policy is option `block_cache_policy`: LRU (`sharded::ShardedLru`, the default, shared with
//! the compressed tier) or S3-FIFO (`s3fifo::ShardedS3Fifo`, scan-resistant). Both are
//! `sharded::Sharded`: one mechanism for the shards' locks and the single byte budget, over a
//! per-shard `ShardPolicy`, which is one of the policies of `attune_cache::policy` (each
//! implemented once there, shared with the cache simulator).
//!
//! The folder, bottom up: `sharded.rs` (the mechanism, and the LRU shard: `attune_cache`'s
//! `Lru`), `s3fifo.rs` (the S3-FIFO shard: `attune_cache`'s `S3Fifo`), `compressed.rs` (the
//! compressed tier, LRU shards of stored blocks), `tiers.rs` (the second tier, read counters
//! and access log the sizing watches), this file (the block cache), `sizing.rs` (the controller
//! that resizes the tiers) and `hotkeys.rs` (the hot-key cache in front of the tree,
//! independent of the others). Tables read blocks through `crate::table::source`, the one
//! block-read path.
//!
//! Thread safety: shards are independent mutexes; a lookup locks one shard for a hash-table probe
//! and a list splice. Keys are (file number, block offset), `attune_cache::BlockKey` to the
//! policies; file numbers are never reused, so an entry can never describe another file's bytes.
//! A cache built with [`BlockCache::with_tiers`] also carries the tiers of the adaptive cache
//! sizing (`tiers.rs`), which the block source reads through and reports to.

pub mod compressed;
pub mod hotkeys;
pub(crate) mod s3fifo;
pub(crate) mod sharded;
pub mod sizing;
pub(crate) mod tiers;

use crate::block::Block;
use crate::cache::s3fifo::ShardedS3Fifo;
use crate::cache::sharded::{Charged, Key, ShardedLru};
use crate::options::BlockCachePolicy;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

impl Charged for Arc<Block> {
    fn charge(&self) -> usize {
        Block::charge(self)
    }
}
/// Counters of the cache.
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CacheStats {
    pub capacity_bytes: u64,
    pub usage_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
}

/// The replacement structure behind a [`BlockCache`] (option `block_cache_policy`).
enum Store {
    Lru(ShardedLru<Arc<Block>>),
    S3Fifo(ShardedS3Fifo<Arc<Block>>),
}

impl Store {
    fn new(capacity_bytes: u64, policy: BlockCachePolicy) -> Self {
        match policy {
            BlockCachePolicy::Lru => Store::Lru(ShardedLru::new(capacity_bytes)),
            BlockCachePolicy::S3Fifo => Store::S3Fifo(ShardedS3Fifo::new(capacity_bytes)),
        }
    }
    fn get(&self, k: &Key) -> Option<Arc<Block>> {
        match self {
            Store::Lru(c) => c.get(k),
            Store::S3Fifo(c) => c.get(k),
        }
    }
    fn insert(&self, k: Key, v: Arc<Block>) -> Option<u64> {
        match self {
            Store::Lru(c) => c.insert(k, v),
            Store::S3Fifo(c) => c.insert(k, v),
        }
    }
    fn set_capacity(&self, capacity_bytes: u64) -> u64 {
        match self {
            Store::Lru(c) => c.set_capacity(capacity_bytes),
            Store::S3Fifo(c) => c.set_capacity(capacity_bytes),
        }
    }
    fn capacity(&self) -> u64 {
        match self {
            Store::Lru(c) => c.capacity(),
            Store::S3Fifo(c) => c.capacity(),
        }
    }
    fn erase_file(&self, file: u64) {
        match self {
            Store::Lru(c) => c.erase_file(file),
            Store::S3Fifo(c) => c.erase_file(file),
        }
    }
    fn recency_order(&self, keep: impl Fn(&Key) -> bool) -> Vec<(Key, usize)> {
        match self {
            Store::Lru(c) => c.recency_order(keep),
            Store::S3Fifo(c) => c.recency_order(keep),
        }
    }
    fn usage(&self) -> u64 {
        match self {
            Store::Lru(c) => c.usage(),
            Store::S3Fifo(c) => c.usage(),
        }
    }
}

/// A sharded, resizable cache of blocks (LRU or S3-FIFO, see the module doc).
pub struct BlockCache {
    store: Store,
    policy: BlockCachePolicy,
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    evictions: AtomicU64,
    tiers: Option<Arc<crate::cache::tiers::Tiers>>,
}

impl BlockCache {
    /// An LRU block cache (the default policy).
    pub fn new(capacity_bytes: u64) -> Self {
        Self::with_policy(capacity_bytes, BlockCachePolicy::Lru)
    }

    /// A block cache evicting by `policy`.
    pub fn with_policy(capacity_bytes: u64, policy: BlockCachePolicy) -> Self {
        BlockCache {
            store: Store::new(capacity_bytes, policy),
            policy,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            tiers: None,
        }
    }

    /// A cache whose misses go through `tiers` (the compressed tier and the sizing log).
    pub(crate) fn with_tiers(
        capacity_bytes: u64,
        policy: BlockCachePolicy,
        tiers: Arc<crate::cache::tiers::Tiers>,
    ) -> Self {
        BlockCache {
            tiers: Some(tiers),
            ..Self::with_policy(capacity_bytes, policy)
        }
    }

    /// The replacement policy.
    pub fn policy(&self) -> BlockCachePolicy {
        self.policy
    }

    /// The second tier and access log, when adaptive sizing is configured.
    pub(crate) fn tiers(&self) -> Option<&Arc<crate::cache::tiers::Tiers>> {
        self.tiers.as_ref()
    }

    pub fn get(&self, file: u64, offset: u64) -> Option<Arc<Block>> {
        let got = self.store.get(&(file, offset));
        match &got {
            Some(_) => self.hits.fetch_add(1, Ordering::Relaxed),
            None => self.misses.fetch_add(1, Ordering::Relaxed),
        };
        got
    }

    pub fn insert(&self, file: u64, offset: u64, block: Arc<Block>) {
        let Some(ev) = self.store.insert((file, offset), block) else {
            return;
        };
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.evictions.fetch_add(ev, Ordering::Relaxed);
    }

    /// Changes the capacity; shrinking evicts immediately.
    pub fn set_capacity(&self, capacity_bytes: u64) {
        let ev = self.store.set_capacity(capacity_bytes);
        self.evictions.fetch_add(ev, Ordering::Relaxed);
    }

    /// Drops every block of one file (after the file is deleted).
    pub fn erase_file(&self, file: u64) {
        if let Some(t) = &self.tiers {
            t.erase_file(file);
        }
        self.store.erase_file(file);
    }

    /// Sampled-block view for warm-starting the ghosts: see `ShardedLru::recency_order` (and
    /// `ShardedS3Fifo::recency_order`, an approximation: adaptive sizing refuses S3-FIFO).
    pub(crate) fn recency_order(&self, keep: impl Fn(&Key) -> bool) -> Vec<(Key, usize)> {
        self.store.recency_order(keep)
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            capacity_bytes: self.store.capacity(),
            usage_bytes: self.store.usage(),
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
    use crate::block::BlockBuilder;
    use crate::cache::sharded::{shard_of, SHARDS};
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

    /// A data set that fits the capacity but not an equal share per shard stays whole (with
    /// capacity / 16 per shard the fullest shards evicted), and shrinking evicts no more than
    /// it must.
    #[test]
    fn blocks_that_fit_the_total_stay_whatever_the_shard_imbalance() {
        let b = block(3000);
        let n = 1000u64;
        let capacity = n * b.charge() as u64;
        let c = BlockCache::new(capacity);
        for i in 0..n {
            c.insert(1, i * 4096, b.clone());
        }
        let s = c.stats();
        assert_eq!((s.evictions, s.usage_bytes), (0, capacity), "{s:?}");
        assert!((0..n).all(|i| c.get(1, i * 4096).is_some()));
        c.set_capacity(capacity / 2);
        let s = c.stats();
        assert!(s.usage_bytes <= capacity / 2, "{s:?}");
        assert!(s.usage_bytes + b.charge() as u64 > capacity / 2, "{s:?}");
    }

    #[test]
    fn recency_order_lists_kept_entries_oldest_first() {
        // Within one shard the order is exact: 20 keys of shard 0, the first four re-touched.
        let offs: Vec<u64> = (0..10_000u64)
            .map(|i| i * 4096)
            .filter(|&o| shard_of(&(1, o)) == 0)
            .take(20)
            .collect();
        let c = BlockCache::new(1 << 30);
        for &o in &offs {
            c.insert(1, o, block(100));
        }
        for &o in &offs[..4] {
            assert!(c.get(1, o).is_some());
        }
        let order: Vec<u64> = c.recency_order(|_| true).iter().map(|e| e.0 .1).collect();
        let mut want = offs[4..].to_vec();
        want.extend(&offs[..4]);
        assert_eq!(order, want);
        // Across shards, by relative position: 16 keys per shard, four re-touched in each, so
        // the re-touched ones are exactly the newest quarter of every shard and come last.
        let c = BlockCache::new(1 << 30);
        let mut per_shard = vec![Vec::new(); SHARDS];
        for o in (0..100_000u64).map(|i| i * 4096) {
            let s = shard_of(&(2, o));
            if per_shard[s].len() < 16 {
                per_shard[s].push(o);
            }
        }
        for v in &per_shard {
            for &o in v {
                c.insert(2, o, block(100));
            }
        }
        let touched: Vec<u64> = per_shard.iter().flat_map(|v| v[..4].to_vec()).collect();
        for &o in &touched {
            assert!(c.get(2, o).is_some());
        }
        let order = c.recency_order(|k| k.0 == 2);
        assert_eq!(order.len(), 16 * SHARDS);
        assert!(order
            .iter()
            .all(|(_, charge)| *charge == block(100).charge()));
        let tail: std::collections::HashSet<u64> = order[order.len() - touched.len()..]
            .iter()
            .map(|e| e.0 .1)
            .collect();
        assert!(
            touched.iter().all(|o| tail.contains(o)),
            "re-touched blocks are the newest"
        );
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
