//! The one cache mechanism: a cache split into `SHARDS` independently locked shards under one
//! byte budget, over a per-shard replacement policy (`ShardPolicy`). The policies themselves
//! live once, in `attune_cache::policy` (`Lru`, `S3Fifo`, unbounded: this mechanism evicts);
//! this file adapts the LRU to `ShardPolicy`, `s3fifo.rs` the S3-FIFO. The block cache (LRU or
//! S3-FIFO shards) and the compressed tier (LRU shards) are both built on it.
//!
//! Thread safety: each shard is its own mutex; the budget and the usage are atomics. A lookup
//! locks one shard. Invariant: the charged bytes of all shards never exceed the capacity after an
//! insert or a resize returns (evictions happen before).

use attune_cache::policy::{BlockKey, Lru};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
/// Number of shards (a power of two). 16 keeps contention low on small machines without leaving
/// shards too small to be fair at a few MiB of capacity.
pub(crate) const SHARDS: usize = 16;

pub(crate) type Key = (u64, u64);

/// What a sharded cache charges an entry, bytes.
pub(crate) trait Charged {
    fn charge(&self) -> usize;
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

/// The cache's key as the policies' key: (file number, block offset) is `BlockKey { file, unit }`.
#[inline]
pub(crate) fn block_key(k: &Key) -> BlockKey {
    BlockKey {
        file: k.0,
        unit: k.1,
    }
}

/// An LRU shard: `attune_cache`'s LRU, unbounded (the [`Sharded`] budget decides evictions).
impl<V: Charged + Clone + Send> ShardPolicy for Lru<BlockKey, V> {
    type Value = V;

    fn new() -> Self {
        Lru::unbounded()
    }

    #[inline]
    fn get(&mut self, k: &Key) -> Option<&V> {
        Lru::get(self, &block_key(k))
    }

    fn put(&mut self, k: Key, v: V, charge: usize) -> Option<usize> {
        self.insert(block_key(&k), v, charge as u64)
            .map(|(_, c)| c as usize)
    }

    fn evict_one(&mut self) -> Option<usize> {
        self.pop_lru().map(|(_, _, c)| c as usize)
    }

    fn usage(&self) -> usize {
        self.used_bytes() as usize
    }

    fn erase_file(&mut self, file: u64) -> usize {
        self.erase_if(|k| k.file == file) as usize
    }

    fn eviction_order(&self) -> Vec<(Key, usize)> {
        self.iter_lru_first()
            .map(|(k, _, c)| ((k.file, k.unit), c as usize))
            .collect()
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
pub(crate) type ShardedLru<V> = Sharded<Lru<BlockKey, V>>;

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

    /// Bytes charged, from the atomic total (equal to the sum of the shards' usage once the
    /// calls in flight return). Not that sum: taken one shard lock at a time while inserts run,
    /// it can count an insert's block and miss the evictions it made in shards already summed,
    /// so a descheduled reader of the stats saw the cache over its capacity by any number of
    /// blocks. The total exceeds the capacity by at most the charges of the inserts in flight.
    pub(crate) fn usage(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The shards and the total (test support: invariant checks of a policy's shards).
    #[cfg(test)]
    pub(crate) fn parts(&self) -> (&[Mutex<S>], u64) {
        (&self.shards, self.total.load(Ordering::Relaxed))
    }
}

/// The shard of a (file, offset) key; shared with the compressed cache.
pub(crate) fn shard_of(k: &Key) -> usize {
    let h = (k.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k.1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (h >> 60) as usize % SHARDS
}
