//! Byte-charged LRU over keys `K` holding values `V`: the simulator's and the ghosts' LRU
//! (`Lru<Fingerprint, ()>`, [`Lru::new`]) and the engine block cache's LRU shards
//! (`Lru<BlockKey, V>`, [`Lru::unbounded`], evicted by the caller through [`Lru::pop_lru`]).
//!
//! Layout: a dense slab of doubly linked nodes (head = most recent) and an open-addressing index
//! of slab positions (linear probing on [`PolicyKey::hash64`], deletion by backward shift, so
//! churn leaves no tombstones and the index never grows at a steady size; load at most 3/4). A
//! removed node's slot is refilled by the last node (swap-remove), so the slab needs no free
//! list and every value in it is live. For the simulator a node is 20 bytes (fingerprint as two
//! halves, charge, links) and an entry costs about 25-31 B with the index; a table of positions
//! with tombstones (a `hashbrown` map) doubled under churn, since its tombstones force a resize
//! once it is more than half full. Every operation is constant time except
//! [`Lru::erase_if`] and the iterators (linear).
//!
//! Charges are kept as `u32` (clamped): cached units are far below 4 GiB.

use super::{Fingerprint, PolicyKey, NIL};

/// An empty slot of the index.
const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node<K, V> {
    key: K,
    value: V,
    charge: u32,
    prev: u32,
    next: u32,
}

/// Byte-charged LRU (see the module doc). Single-owner (`&mut self`); wrap in a lock to share.
/// Invariants: `used()` is the sum of the resident charges; a bounded LRU ([`Lru::new`],
/// [`Lru::with_capacity_bytes`]) keeps `used() <= capacity()` after every call and holds exactly
/// the longest most-recent prefix of its recency stack whose charges fit, which is what makes
/// stack distances ([`crate::stack`]) predict it exactly.
#[derive(Debug)]
pub struct Lru<K = Fingerprint, V = ()> {
    /// Slab positions, `EMPTY` or a position; its length is 0 or a power of two.
    index: Vec<u32>,
    nodes: Vec<Node<K, V>>,
    head: u32,
    tail: u32,
    used: u64,
    capacity: u64,
}

impl Lru<Fingerprint, ()> {
    /// An empty simulator LRU of `capacity_bytes` (keys are block fingerprints, no values).
    pub fn new(capacity_bytes: u64) -> Self {
        Self::with_capacity_bytes(capacity_bytes)
    }
}

impl<K: PolicyKey, V> Lru<K, V> {
    /// An empty LRU that evicts by itself to stay within `capacity_bytes`.
    pub fn with_capacity_bytes(capacity_bytes: u64) -> Self {
        Self {
            index: Vec::new(),
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
            used: 0,
            capacity: capacity_bytes,
        }
    }

    /// An empty LRU without a capacity: it never evicts by itself; the owner evicts with
    /// [`Lru::pop_lru`] (the engine's sharded cache, whose budget spans all shards).
    pub fn unbounded() -> Self {
        Self::with_capacity_bytes(u64::MAX)
    }

    /// Index slots for `entries` at a load of at most 3/4 (a power of two, at least 8).
    fn index_slots_for(entries: usize) -> usize {
        (entries + entries / 3 + 1).next_power_of_two().max(8)
    }

    /// Home slot of a hash (hashes are mixed: low bits suffice).
    #[inline]
    fn home(&self, h: u64) -> usize {
        (h as usize) & (self.index.len() - 1)
    }

    /// Index slot holding the node of `key`.
    #[inline]
    fn find_slot(&self, key: &K) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let mask = self.index.len() - 1;
        let mut p = self.home(key.hash64());
        loop {
            let i = self.index[p];
            if i == EMPTY {
                return None;
            }
            if self.nodes[i as usize].key == *key {
                return Some(p);
            }
            p = (p + 1) & mask;
        }
    }

    /// Slab position of the node of `key`.
    #[inline]
    fn find(&self, key: &K) -> Option<u32> {
        self.find_slot(key).map(|p| self.index[p])
    }

    /// Removes `key` from the index (backward-shift deletion); returns its slab position.
    fn unindex(&mut self, key: &K) -> Option<u32> {
        let mut p = self.find_slot(key)?;
        let found = self.index[p];
        let mask = self.index.len() - 1;
        let mut j = p;
        loop {
            j = (j + 1) & mask;
            let i = self.index[j];
            if i == EMPTY {
                break;
            }
            let k = self.home(self.nodes[i as usize].key.hash64());
            // Move slot j back into the hole at p unless its home lies cyclically in (p, j].
            let home_between = if p <= j {
                p < k && k <= j
            } else {
                p < k || k <= j
            };
            if !home_between {
                self.index[p] = i;
                p = j;
            }
        }
        self.index[p] = EMPTY;
        Some(found)
    }

    /// Indexes slab position `i` (its node is in the slab and not indexed yet).
    fn reindex(&mut self, i: u32) {
        // The slab already counts node `i`: the index holds `nodes.len() - 1` positions.
        let indexed = self.nodes.len() - 1;
        if (indexed + 1) * 4 > self.index.len() * 3 {
            let slots = Self::index_slots_for((indexed + 1) * 2);
            let old = std::mem::replace(&mut self.index, vec![EMPTY; slots]);
            for j in old.into_iter().filter(|&j| j != EMPTY) {
                self.place(j);
            }
        }
        self.place(i);
    }

    /// Stores slab position `i` in the first empty slot from its home (room is guaranteed).
    fn place(&mut self, i: u32) {
        let mask = self.index.len() - 1;
        let mut p = self.home(self.nodes[i as usize].key.hash64());
        while self.index[p] != EMPTY {
            p = (p + 1) & mask;
        }
        self.index[p] = i;
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = (self.nodes[i as usize].prev, self.nodes[i as usize].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, i: u32) {
        self.nodes[i as usize].prev = NIL;
        self.nodes[i as usize].next = self.head;
        if self.head != NIL {
            self.nodes[self.head as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// Takes out node `i`, already unlinked and unindexed: the last node moves into its slot
    /// (its links and index slot follow). Returns the node.
    fn take(&mut self, i: u32) -> Node<K, V> {
        let last = (self.nodes.len() - 1) as u32;
        let node = self.nodes.swap_remove(i as usize);
        if i != last {
            let (prev, next) = (self.nodes[i as usize].prev, self.nodes[i as usize].next);
            if prev == NIL {
                self.head = i;
            } else {
                self.nodes[prev as usize].next = i;
            }
            if next == NIL {
                self.tail = i;
            } else {
                self.nodes[next as usize].prev = i;
            }
            let mask = self.index.len() - 1;
            let mut p = self.home(self.nodes[i as usize].key.hash64());
            while self.index[p] != last {
                p = (p + 1) & mask;
            }
            self.index[p] = i;
        }
        self.used -= u64::from(node.charge);
        node
    }

    /// Removes the node at slab position `i`.
    fn remove_at(&mut self, i: u32) -> Node<K, V> {
        self.unlink(i);
        let key = self.nodes[i as usize].key;
        self.unindex(&key);
        self.take(i)
    }

    /// Evicts least recent entries while the charge exceeds the capacity.
    fn evict_to_fit(&mut self) {
        while self.used > self.capacity && self.tail != NIL {
            self.remove_at(self.tail);
        }
    }

    /// The value of `key`, promoted to most recent (a hit).
    #[inline]
    pub fn get(&mut self, key: &K) -> Option<&V> {
        let i = self.find(key)?;
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
        Some(&self.nodes[i as usize].value)
    }

    /// The value of `key`, without changing any state.
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.find(key).map(|i| &self.nodes[i as usize].value)
    }

    /// Whether `key` is resident, without changing any state.
    pub fn contains_key(&self, key: &K) -> bool {
        self.find(key).is_some()
    }

    /// Inserts `key` as the most recent entry, charged `charge` bytes; a resident `key` has its
    /// value and charge replaced (and is promoted). Returns the replaced value and charge. A
    /// bounded LRU then evicts to fit (an entry larger than the capacity is not kept); an
    /// unbounded one leaves evicting to its owner.
    pub fn insert(&mut self, key: K, value: V, charge: u64) -> Option<(V, u64)> {
        let charge32 = u32::try_from(charge).unwrap_or(u32::MAX);
        if let Some(i) = self.find(&key) {
            if self.head != i {
                self.unlink(i);
                self.push_front(i);
            }
            let node = &mut self.nodes[i as usize];
            let old_value = std::mem::replace(&mut node.value, value);
            let old = u64::from(std::mem::replace(&mut node.charge, charge32));
            self.used = self.used - old + u64::from(charge32);
            self.evict_to_fit();
            return Some((old_value, old));
        }
        self.nodes.push(Node {
            key,
            value,
            charge: charge32,
            prev: NIL,
            next: NIL,
        });
        let i = (self.nodes.len() - 1) as u32;
        self.reindex(i);
        self.push_front(i);
        self.used += u64::from(charge32);
        self.evict_to_fit();
        None
    }

    /// Removes and returns the least recent entry (key, value, charge).
    pub fn pop_lru(&mut self) -> Option<(K, V, u64)> {
        if self.tail == NIL {
            return None;
        }
        let n = self.remove_at(self.tail);
        Some((n.key, n.value, u64::from(n.charge)))
    }

    /// Removes `key` if resident; returns its value and charge.
    pub fn remove(&mut self, key: &K) -> Option<(V, u64)> {
        let i = self.find(key)?;
        let n = self.remove_at(i);
        Some((n.value, u64::from(n.charge)))
    }

    /// Removes every entry whose key passes `erase`; returns the bytes freed.
    pub fn erase_if(&mut self, mut erase: impl FnMut(&K) -> bool) -> u64 {
        let before = self.used;
        let mut i = self.head;
        while i != NIL {
            let next = self.nodes[i as usize].next;
            if erase(&self.nodes[i as usize].key) {
                // `take` may move the last node into slot `i`, and `next` may be that node.
                let last = (self.nodes.len() - 1) as u32;
                self.remove_at(i);
                i = if next == last { i } else { next };
            } else {
                i = next;
            }
        }
        before - self.used
    }

    /// The entries (key, value, charge), least recent (next to be evicted) first.
    pub fn iter_lru_first(&self) -> impl Iterator<Item = (&K, &V, u64)> + '_ {
        let mut i = self.tail;
        std::iter::from_fn(move || {
            if i == NIL {
                return None;
            }
            let n = &self.nodes[i as usize];
            i = n.prev;
            Some((&n.key, &n.value, u64::from(n.charge)))
        })
    }

    /// Changes the capacity; shrinking evicts at once.
    pub fn set_capacity_bytes(&mut self, capacity_bytes: u64) {
        self.capacity = capacity_bytes;
        self.evict_to_fit();
    }

    /// Capacity in bytes (`u64::MAX` for an unbounded LRU).
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Bytes charged by resident entries.
    pub fn used_bytes(&self) -> u64 {
        self.used
    }

    /// Resident entries.
    pub fn entries(&self) -> usize {
        self.nodes.len()
    }

    /// Drops every entry and returns the memory to the allocator.
    pub fn clear_and_free(&mut self) {
        self.index = Vec::new();
        self.nodes = Vec::new();
        self.head = NIL;
        self.tail = NIL;
        self.used = 0;
    }

    /// Approximate bytes of metadata this instance holds (index and slab, values included).
    pub fn metadata_size(&self) -> usize {
        self.index.capacity() * 4 + self.nodes.capacity() * std::mem::size_of::<Node<K, V>>()
    }

    /// Hit-or-insert with a charge (the simulator's access): a resident `key` is promoted and
    /// recharged, a missing one inserted with `V::default()`; then evicts to fit. Returns whether
    /// it hit.
    pub fn access_key(&mut self, key: K, charge: u64) -> bool
    where
        V: Default,
    {
        let charge32 = u32::try_from(charge).unwrap_or(u32::MAX);
        if let Some(i) = self.find(&key) {
            if self.head != i {
                self.unlink(i);
                self.push_front(i);
            }
            let old = u64::from(self.nodes[i as usize].charge);
            if old != u64::from(charge32) {
                // A block rewritten with a new size: recharge it.
                self.used = self.used - old + u64::from(charge32);
                self.nodes[i as usize].charge = charge32;
                self.evict_to_fit();
            }
            return true;
        }
        self.insert(key, V::default(), charge);
        false
    }
}

impl<K: PolicyKey, V: Clone> Lru<K, V> {
    /// A new LRU of `capacity_bytes` holding exactly what this one would hold after
    /// `set_capacity(capacity_bytes)`: the longest most-recent prefix of the recency list whose
    /// charges fit, in the same order. Its index and slab are sized for that prefix plus an
    /// eighth (and 8) entries of headroom, so a copy that keeps about as many entries as it
    /// starts with does not reallocate (GhostSim counts a copy's memory when it is made).
    pub fn truncated_copy(&self, capacity_bytes: u64) -> Self {
        let mut n = 0usize;
        let mut used = 0u64;
        let mut i = self.head;
        while i != NIL {
            let node = &self.nodes[i as usize];
            if used + u64::from(node.charge) > capacity_bytes {
                break;
            }
            used += u64::from(node.charge);
            n += 1;
            i = node.next;
        }
        let room = n + n / 8 + 8;
        let mut copy = Self {
            index: vec![EMPTY; Self::index_slots_for(room)],
            nodes: Vec::with_capacity(room),
            head: if n == 0 { NIL } else { 0 },
            tail: if n == 0 { NIL } else { (n - 1) as u32 },
            used,
            capacity: capacity_bytes,
        };
        let mut i = self.head;
        for k in 0..n {
            let node = &self.nodes[i as usize];
            copy.nodes.push(Node {
                key: node.key,
                value: node.value.clone(),
                charge: node.charge,
                prev: if k == 0 { NIL } else { (k - 1) as u32 },
                next: if k + 1 == n { NIL } else { (k + 1) as u32 },
            });
            copy.reindex(k as u32);
            i = node.next;
        }
        copy
    }

    /// An exact copy (same slab, same order).
    pub fn clone_exact(&self) -> Self {
        Self {
            index: self.index.clone(),
            nodes: self.nodes.clone(),
            head: self.head,
            tail: self.tail,
            used: self.used,
            capacity: self.capacity,
        }
    }
}
