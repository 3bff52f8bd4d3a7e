//! The block cache: a sharded cache of uncompressed blocks, charged by bytes, whose capacity can
//! be changed while running (the adaptive cache-sizing work resizes it online). Its replacement
//! policy is option `block_cache_policy`: LRU (`ShardedLru`, the default, shared with the
//! compressed cache `ccache`) or S3-FIFO (`crate::cache::s3fifo::ShardedS3Fifo`, scan-resistant).
//! Both are `Sharded`: one mechanism for the shards' locks and the single byte budget, over a
//! per-shard `ShardPolicy`.
//!
//! Thread safety: shards are independent mutexes; a lookup locks one shard for a hash-map probe and
//! a list splice. Keys are (file number, block offset); file numbers are never reused, so an entry
//! can never describe another file's bytes. A cache built with [`BlockCache::with_tiers`] also
//! carries the second tier and access log of the adaptive cache sizing (`crate::cache::sizing`),
//! which `Table::block` then reads through.

pub mod compressed;
pub mod hotkeys;
pub(crate) mod s3fifo;
pub mod sizing;

use crate::block::Block;
use crate::cache::s3fifo::ShardedS3Fifo;
use crate::options::BlockCachePolicy;
use lru::LruCache;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Number of shards (a power of two). 16 keeps contention low on small machines without leaving
/// shards too small to be fair at a few MiB of capacity.
pub(crate) const SHARDS: usize = 16;

pub(crate) type Key = (u64, u64);

/// What a sharded cache charges an entry, bytes.
pub(crate) trait Charged {
    fn charge(&self) -> usize;
}

impl Charged for Arc<Block> {
    fn charge(&self) -> usize {
        Block::charge(self)
    }
}

/// One shard of a [`Sharded`] cache: a replacement policy over its own entries, without
/// locking or the shared budget, which [`Sharded`] adds (one mechanism for every policy).
pub(crate) trait ShardPolicy: Send {
    /// What the cache holds.
    type Value: Charged + Clone;
    /// An empty shard.
    fn new() -> Self;
    /// The entry of `k` (a hit: the policy records it).
    fn get(&mut self, k: &Key) -> Option<&Self::Value>;
    /// Inserts or replaces an entry charged `charge` bytes; returns the replaced charge.
    fn put(&mut self, k: Key, v: Self::Value, charge: usize) -> Option<usize>;
    /// Evicts the entry the policy picks; returns its charge, `None` when the shard is empty.
    fn evict_one(&mut self) -> Option<usize>;
    /// Bytes charged by the shard's entries.
    fn usage(&self) -> usize;
    /// Drops every entry of `file`; returns the bytes freed.
    fn erase_file(&mut self, file: u64) -> usize;
    /// Every entry with its charge, the next to be evicted first.
    fn eviction_order(&self) -> Vec<(Key, usize)>;
}

/// An LRU shard.
pub(crate) struct LruShard<V> {
    lru: LruCache<Key, V>,
    usage: usize,
}

impl<V: Charged + Clone + Send> ShardPolicy for LruShard<V> {
    type Value = V;

    fn new() -> Self {
        LruShard {
            lru: LruCache::unbounded(),
            usage: 0,
        }
    }

    fn get(&mut self, k: &Key) -> Option<&V> {
        self.lru.get(k)
    }

    fn put(&mut self, k: Key, v: V, charge: usize) -> Option<usize> {
        self.usage += charge;
        let old = self.lru.put(k, v).map(|old| old.charge());
        if let Some(c) = old {
            self.usage -= c;
        }
        old
    }

    fn evict_one(&mut self) -> Option<usize> {
        let (_, v) = self.lru.pop_lru()?;
        let c = v.charge();
        self.usage -= c;
        Some(c)
    }

    fn usage(&self) -> usize {
        self.usage
    }

    fn erase_file(&mut self, file: u64) -> usize {
        let keys: Vec<Key> = self
            .lru
            .iter()
            .filter(|(k, _)| k.0 == file)
            .map(|(k, _)| *k)
            .collect();
        let mut freed = 0;
        for k in keys {
            if let Some(v) = self.lru.pop(&k) {
                freed += v.charge();
            }
        }
        self.usage -= freed;
        freed
    }

    fn eviction_order(&self) -> Vec<(Key, usize)> {
        // `iter` runs from the most recent entry; the least recent is evicted first.
        let mut v: Vec<(Key, usize)> = self.lru.iter().map(|(k, v)| (*k, v.charge())).collect();
        v.reverse();
        v
    }
}

/// A sharded, byte-charged cache with one budget for all shards, whatever the shards'
/// replacement policy (the block cache, LRU or S3-FIFO, and the compressed cache, LRU). An
/// insert evicts from its own shard while the total is over the capacity, and from the other
/// shards if its own ran empty. Keys hash uniformly over the shards, so their tails are of
/// about the same age and the union behaves like one cache of the policy, which for LRU is
/// what the Symbiosis ghosts predict. With a fixed share per shard (capacity / 16) a data
/// set that just fits overflowed the shards that hashing gave
/// a few percent more than their share (about 850 Zstd blocks per shard, ±3.4 %): the
/// compressed tier measured H_k 0.969 at M − M_a = 12 MiB where one LRU, the ghost even at
/// R = 1/2, holds 0.992 (docs/symbiosis.md, "The last sub-0.97 cell").
///
/// Thread safety: shard mutexes and an atomic total. Invariant: once every call in flight has
/// returned, the total charge is at most the capacity set last (an entry larger than the whole
/// capacity is not admitted).
pub(crate) struct Sharded<S> {
    shards: Vec<Mutex<S>>,
    capacity: AtomicU64,
    total: AtomicU64,
}

/// The LRU flavour (the block cache's default and the compressed cache).
pub(crate) type ShardedLru<V> = Sharded<LruShard<V>>;

/// Evicts from `shard` while `total` is above `capacity` and, if `floor` is given, the shard's
/// usage is above it. Returns the evictions.
fn evict<S: ShardPolicy>(
    shard: &mut S,
    total: &AtomicU64,
    capacity: u64,
    floor: Option<usize>,
) -> u64 {
    let mut n = 0;
    while total.load(Ordering::Relaxed) > capacity && floor.is_none_or(|f| shard.usage() > f) {
        match shard.evict_one() {
            Some(c) => {
                total.fetch_sub(c as u64, Ordering::Relaxed);
                n += 1;
            }
            None => break,
        }
    }
    n
}

impl<S: ShardPolicy> Sharded<S> {
    pub(crate) fn new(capacity_bytes: u64) -> Self {
        Sharded {
            shards: (0..SHARDS).map(|_| Mutex::new(S::new())).collect(),
            capacity: AtomicU64::new(capacity_bytes),
            total: AtomicU64::new(0),
        }
    }

    pub(crate) fn get(&self, k: &Key) -> Option<S::Value> {
        self.shards[shard_of(k)].lock().get(k).cloned()
    }

    /// Inserts (or replaces) an entry; returns `None` if it is larger than the whole capacity
    /// (not admitted), else the evictions it caused.
    pub(crate) fn insert(&self, k: Key, v: S::Value) -> Option<u64> {
        let charge = v.charge();
        if charge as u64 > self.capacity.load(Ordering::Relaxed) {
            return None; // would evict everything and still not fit
        }
        let home = shard_of(&k);
        let mut s = self.shards[home].lock();
        if let Some(old) = s.put(k, v, charge) {
            self.total.fetch_sub(old as u64, Ordering::Relaxed);
        }
        self.total.fetch_add(charge as u64, Ordering::Relaxed);
        // The capacity as of now, not as of the admission check: a shrink that ran in between
        // evicted before this charge was added, so this insert must evict down to the new
        // capacity itself or the total would stay above it after every call returned.
        let capacity = self.capacity.load(Ordering::Relaxed);
        let mut ev = evict(&mut *s, &self.total, capacity, None);
        drop(s);
        // The own shard ran empty first (it held less than its share): the others give way.
        for i in 1..SHARDS {
            let capacity = self.capacity.load(Ordering::Relaxed);
            if self.total.load(Ordering::Relaxed) <= capacity {
                break;
            }
            let mut other = self.shards[(home + i) % SHARDS].lock();
            ev += evict(&mut *other, &self.total, capacity, None);
        }
        Some(ev)
    }

    /// Changes the capacity; shrinking evicts before returning (first the shards above an
    /// equal share, each down to that share at most, then any shard). Returns the evictions.
    pub(crate) fn set_capacity(&self, capacity_bytes: u64) -> u64 {
        self.capacity.store(capacity_bytes, Ordering::Relaxed);
        let per = (capacity_bytes / SHARDS as u64) as usize;
        let mut ev = 0;
        for floor in [Some(per), None] {
            for s in &self.shards {
                ev += evict(&mut *s.lock(), &self.total, capacity_bytes, floor);
            }
        }
        ev
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Drops every entry of one file.
    pub(crate) fn erase_file(&self, file: u64) {
        for s in &self.shards {
            let freed = s.lock().erase_file(file);
            self.total.fetch_sub(freed as u64, Ordering::Relaxed);
        }
    }

    /// The entries whose key passes `keep`, with their charges, oldest (next to be evicted)
    /// first: each shard's order is the policy's own (exact recency for LRU), and shards are
    /// merged by relative position in their own order (oldest of each shard first, …), since
    /// hashing makes their tails of about the same age. Locks one shard at a time. Used to
    /// warm-start the Symbiosis ghosts.
    pub(crate) fn recency_order(&self, keep: impl Fn(&Key) -> bool) -> Vec<(Key, usize)> {
        let mut all: Vec<(f64, Key, usize)> = Vec::new();
        for s in &self.shards {
            let order = s.lock().eviction_order();
            let n = order.len().max(1) as f64;
            all.extend(
                order
                    .into_iter()
                    .enumerate()
                    .filter(|(_, (k, _))| keep(k))
                    .map(|(j, (k, c))| ((j + 1) as f64 / n, k, c)),
            );
        }
        // Ascending position: the oldest first (a stable sort keeps each shard's order).
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        all.into_iter().map(|(_, k, c)| (k, c)).collect()
    }

    /// Sum of the shards' usage, bytes.
    pub(crate) fn usage(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().usage() as u64).sum()
    }

    /// The shards and the total (test support: invariant checks of a policy's shards).
    #[cfg(test)]
    pub(crate) fn parts(&self) -> (&[Mutex<S>], u64) {
        (&self.shards, self.total.load(Ordering::Relaxed))
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
    tiers: Option<Arc<crate::cache::sizing::Tiers>>,
}

/// The shard of a (file, offset) key; shared with the compressed cache.
pub(crate) fn shard_of(k: &Key) -> usize {
    let h = (k.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k.1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (h >> 60) as usize % SHARDS
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
        tiers: Arc<crate::cache::sizing::Tiers>,
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
    pub(crate) fn tiers(&self) -> Option<&Arc<crate::cache::sizing::Tiers>> {
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
