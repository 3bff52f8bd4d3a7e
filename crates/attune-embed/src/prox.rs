//! EVProx (L3): a bounded key → surrogate-key cache with CLOCK second chance.
//!
//! A key that is not in L1 or L2 may be served with the row of a *surrogate*: a key of the same
//! table whose embedding is among its nearest neighbours and which is popular, so likely cached.
//! The offline step (`attune.embed.surrogates`, docs/evstore.md) gives every key of a table one
//! candidate surrogate (the most accessed of its top-10 nearest neighbours); that full mapping is
//! the source's "mapping file". L3 caches a bounded part of it in memory: it is filled with keys
//! that leave L1/L2 (the source's "downgraded keys"), queued and inserted in a batch after the
//! lookup that evicted them, and it evicts with CLOCK second chance (a reference bit set by a
//! surrogate hit). It stores keys only, never values: a surrogate hit needs the surrogate's row
//! to be resident in L1 or L2.
//!
//! Budget: [`ENTRY_BYTES`] per entry (two tagged keys, the slot index and the hash-map entry's
//! share), counted against the store's `cache_bytes`. Capacity 0 turns L3 off.
//! Thread-safety: owned by one [`crate::EmbedStore`], `&mut self` throughout.

use std::collections::HashMap;

/// Bytes charged per cached mapping: key and surrogate (8 + 8), the slot's reference bit and
/// index padding (8) and about 8 bytes of hash-map entry overhead.
pub const ENTRY_BYTES: u64 = 32;

/// Keys queued for insertion before a batch is forced (bounds the queue).
pub const PENDING_MAX: usize = 4096;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    surrogate: u64,
    referenced: bool,
}

/// The L3 cache of (tagged) key → (tagged) surrogate mappings.
#[derive(Debug)]
pub struct ProxCache {
    capacity: usize,
    entries: Vec<Entry>,
    index: HashMap<u64, u32, foldhash::fast::FixedState>,
    hand: usize,
    pending: Vec<(u64, u64)>,
    /// Mappings inserted so far.
    pub inserts: u64,
    /// Mappings evicted by the clock.
    pub evictions: u64,
}

impl ProxCache {
    /// An L3 holding at most `capacity` mappings (0: off).
    pub fn new(capacity: usize) -> Self {
        ProxCache {
            capacity,
            entries: Vec::new(),
            index: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0x9_0C5)),
            hand: 0,
            pending: Vec::new(),
            inserts: 0,
            evictions: 0,
        }
    }

    /// Most mappings held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Mappings held now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no mapping is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The surrogate of `key`, if cached; sets its reference bit (a use).
    pub fn get(&mut self, key: u64) -> Option<u64> {
        let &i = self.index.get(&key)?;
        let e = &mut self.entries[i as usize];
        e.referenced = true;
        Some(e.surrogate)
    }

    /// Whether `key` has a cached mapping (no reference bit change).
    pub fn contains(&self, key: u64) -> bool {
        self.index.contains_key(&key)
    }

    /// Queues `key → surrogate` for the next [`ProxCache::apply_pending`]; applies the queue at
    /// once when it reaches [`PENDING_MAX`].
    pub fn queue(&mut self, key: u64, surrogate: u64) {
        if self.capacity == 0 || key == surrogate {
            return;
        }
        self.pending.push((key, surrogate));
        if self.pending.len() >= PENDING_MAX {
            self.apply_pending();
        }
    }

    /// Inserts every queued mapping, in queue order.
    pub fn apply_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for &(k, s) in &pending {
            self.insert(k, s);
        }
        self.pending = pending;
        self.pending.clear();
    }

    /// Inserts (or refreshes) `key → surrogate`, evicting by CLOCK second chance when full.
    pub fn insert(&mut self, key: u64, surrogate: u64) {
        if self.capacity == 0 {
            return;
        }
        if let Some(&i) = self.index.get(&key) {
            self.entries[i as usize].surrogate = surrogate;
            return;
        }
        self.inserts += 1;
        let e = Entry {
            key,
            surrogate,
            referenced: false,
        };
        if self.entries.len() < self.capacity {
            self.index.insert(key, self.entries.len() as u32);
            self.entries.push(e);
            return;
        }
        // Every entry is passed at most twice: the first pass clears reference bits.
        loop {
            let h = self.hand;
            self.hand = (self.hand + 1) % self.entries.len();
            if self.entries[h].referenced {
                self.entries[h].referenced = false;
                continue;
            }
            self.index.remove(&self.entries[h].key);
            self.entries[h] = e;
            self.index.insert(key, h as u32);
            self.evictions += 1;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_gives_referenced_mappings_a_second_chance() {
        let mut p = ProxCache::new(3);
        for k in 1..=3 {
            p.insert(k, k + 100);
        }
        assert_eq!(p.get(1), Some(101)); // 1 referenced
        p.insert(4, 104); // hand passes 1 (clears it), evicts 2
        assert!(p.contains(1) && !p.contains(2) && p.contains(3) && p.contains(4));
        p.insert(5, 105); // evicts 3
        assert!(!p.contains(3));
        p.insert(6, 106); // 1 lost its bit: evicted now
        assert!(!p.contains(1));
        assert_eq!(p.len(), 3);
        assert_eq!(p.evictions, 3);
    }

    #[test]
    fn queued_mappings_wait_for_the_batch() {
        let mut p = ProxCache::new(10);
        p.queue(1, 2);
        p.queue(3, 3); // a key is never its own surrogate
        assert!(!p.contains(1));
        p.apply_pending();
        assert_eq!(p.get(1), Some(2));
        assert!(!p.contains(3));
        let mut off = ProxCache::new(0);
        off.queue(1, 2);
        off.apply_pending();
        assert!(off.is_empty());
    }

    #[test]
    fn the_queue_is_bounded() {
        let mut p = ProxCache::new(PENDING_MAX * 2);
        for k in 0..PENDING_MAX as u64 {
            p.queue(k, k + 1);
        }
        assert_eq!(p.len(), PENDING_MAX, "a full queue is applied at once");
    }
}
