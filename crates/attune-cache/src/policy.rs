//! Byte-charged replacement policies: [`Lru`] and [`S3Fifo`] behind [`ReplacementPolicy`].
//!
//! These are the *real* cache tiers of the simulator and the ghost second tier of GhostSim: each
//! entry is a key plus a charge in bytes, and the cache holds at most `capacity` bytes. An access
//! either hits (the entry is promoted as the policy says) or misses (the entry is inserted and
//! entries are evicted until the charge fits). An entry whose charge alone exceeds the capacity is
//! not kept.
//!
//! Thread-safety: single-owner (`&mut self`), `Send`; wrap in a lock to share.
//! Invariants (checked by the tests): `used() <= capacity()` after every call; `len()` counts the
//! resident entries; LRU keeps exactly the longest most-recent prefix of its recency stack whose
//! charges fit, which is what makes stack distances ([`crate::stack`]) predict it exactly.

use std::collections::{HashMap, VecDeque};

use crate::error::{CacheError, Result};
use crate::ghost::mix64;

/// Hash state for every map in this crate: fast and deterministic (no per-process random seed),
/// so simulations replay exactly.
pub(crate) type FastState = foldhash::fast::FixedState;

/// A map with [`FastState`].
pub(crate) type FastMap<K, V> = HashMap<K, V, FastState>;

/// Creates an empty [`FastMap`].
pub(crate) fn fast_map<K, V>() -> FastMap<K, V> {
    HashMap::with_hasher(FastState::with_seed(0x5eed_ca11))
}

/// Names a cached unit: a block of a file (by offset) or a page of a file (by page number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey {
    /// The engine's file number.
    pub file: u64,
    /// Byte offset of the block, or page number, within the file.
    pub unit: u64,
}

/// A byte-charged cache replacement policy.
pub trait ReplacementPolicy: Send {
    /// Looks `key` up; on a hit promotes it and returns `true`, on a miss inserts it with
    /// `charge` bytes (evicting as needed) and returns `false`.
    fn access(&mut self, key: BlockKey, charge: u64) -> bool;
    /// Whether `key` is resident, without changing any state.
    fn contains(&self, key: &BlockKey) -> bool;
    /// Changes the capacity; shrinking evicts at once.
    fn set_capacity(&mut self, capacity_bytes: u64);
    /// Capacity in bytes.
    fn capacity(&self) -> u64;
    /// Bytes charged by resident entries.
    fn used(&self) -> u64;
    /// Resident entries.
    fn len(&self) -> usize;
    /// Whether no entry is resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Short name (`lru`, `s3fifo`).
    fn name(&self) -> &'static str;
    /// Approximate bytes of metadata this instance holds (maps, lists, queues).
    fn metadata_bytes(&self) -> usize;
}

/// Which policy to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyKind {
    /// Least recently used.
    Lru,
    /// S3-FIFO (Yang et al., SOSP '23): small probationary FIFO, main FIFO with reinsertion, ghost.
    S3Fifo,
}

impl PolicyKind {
    /// Parses `lru` or `s3fifo` (case-insensitive).
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "lru" => Ok(Self::Lru),
            "s3fifo" | "s3-fifo" => Ok(Self::S3Fifo),
            _ => Err(CacheError::UnknownPolicy(s.to_string())),
        }
    }

    /// Builds an empty cache of this kind.
    pub fn build(self, capacity_bytes: u64) -> Box<dyn ReplacementPolicy> {
        match self {
            Self::Lru => Box::new(Lru::new(capacity_bytes)),
            Self::S3Fifo => Box::new(S3Fifo::new(capacity_bytes)),
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lru => "lru",
            Self::S3Fifo => "s3fifo",
        }
    }
}

const NIL: u32 = u32::MAX;

/// A block's 64-bit fingerprint, what the LRU and the stack-distance ghost store instead of the
/// 16-byte [`BlockKey`] (issue 7: ghost memory <= 0.2 % of M). Two of n resident blocks share
/// one with probability about n²/2^65 (under 10^-9 for 10^5 blocks); a shared fingerprint would
/// count one block's access as the other's, i.e. one mis-counted hit, never an error.
#[inline]
pub(crate) fn fingerprint(key: &BlockKey) -> u64 {
    mix64(mix64(key.file) ^ key.unit)
}

/// 20 bytes: fingerprint (as two halves, so that the node needs only 4-byte alignment), charge
/// (clamped to u32: blocks are far below 4 GiB), links.
#[derive(Clone, Copy, Debug)]
struct Node {
    fp_lo: u32,
    fp_hi: u32,
    charge: u32,
    prev: u32,
    next: u32,
}

impl Node {
    #[inline]
    fn fp(&self) -> u64 {
        u64::from(self.fp_lo) | (u64::from(self.fp_hi) << 32)
    }
}

/// An empty slot of the index.
const EMPTY: u32 = u32::MAX;

/// Byte-charged LRU: a slab of doubly linked nodes (head = most recent) and an open-addressing
/// index of slab positions (linear probing on the fingerprint, deletion by backward shift, so
/// churn leaves no tombstones and the index never grows at a steady size; load at most 3/4).
/// About 28-33 B per entry (20 B node, 5.3-10.7 B of index), where a map from fingerprint to
/// position with 24-byte nodes took 45-60 (issue 7: GhostSim keeps one per candidate side by
/// side, within 0.2 % of M; a `hashbrown` table of positions doubled under churn, since its
/// tombstones force a resize once the table is more than half full).
#[derive(Debug)]
pub struct Lru {
    /// Slab positions, `EMPTY` or a position; its length is 0 or a power of two.
    index: Vec<u32>,
    index_len: usize,
    nodes: Vec<Node>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    used: u64,
    capacity: u64,
}

impl Lru {
    /// An empty LRU of `capacity_bytes`.
    pub fn new(capacity_bytes: u64) -> Self {
        Self {
            index: Vec::new(),
            index_len: 0,
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            used: 0,
            capacity: capacity_bytes,
        }
    }

    /// Index slots for `entries` at a load of at most 3/4 (a power of two, at least 8).
    fn index_slots_for(entries: usize) -> usize {
        (entries + entries / 3 + 1).next_power_of_two().max(8)
    }

    /// Home slot of a fingerprint (fingerprints are mixed hashes: low bits suffice).
    #[inline]
    fn home(&self, fp: u64) -> usize {
        (fp as usize) & (self.index.len() - 1)
    }

    /// Index slot holding the node with fingerprint `fp`.
    #[inline]
    fn find_slot(&self, fp: u64) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let mask = self.index.len() - 1;
        let mut p = self.home(fp);
        loop {
            let i = self.index[p];
            if i == EMPTY {
                return None;
            }
            if self.nodes[i as usize].fp() == fp {
                return Some(p);
            }
            p = (p + 1) & mask;
        }
    }

    /// Slab position of the node with fingerprint `fp`.
    #[inline]
    fn find(&self, fp: u64) -> Option<u32> {
        self.find_slot(fp).map(|p| self.index[p])
    }

    /// Removes `fp` from the index (backward-shift deletion); returns its slab position.
    fn unindex(&mut self, fp: u64) -> Option<u32> {
        let mut p = self.find_slot(fp)?;
        let found = self.index[p];
        let mask = self.index.len() - 1;
        let mut j = p;
        loop {
            j = (j + 1) & mask;
            let i = self.index[j];
            if i == EMPTY {
                break;
            }
            let k = self.home(self.nodes[i as usize].fp());
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
        self.index_len -= 1;
        Some(found)
    }

    /// Indexes slab position `i` (its node already holds its fingerprint, which is not
    /// indexed yet).
    fn reindex(&mut self, i: u32) {
        if (self.index_len + 1) * 4 > self.index.len() * 3 {
            let slots = Self::index_slots_for((self.index_len + 1) * 2);
            let old = std::mem::replace(&mut self.index, vec![EMPTY; slots]);
            self.index_len = 0;
            for j in old.into_iter().filter(|&j| j != EMPTY) {
                self.place(j);
            }
        }
        self.place(i);
    }

    /// Stores slab position `i` in the first empty slot from its home (room is guaranteed).
    fn place(&mut self, i: u32) {
        let mask = self.index.len() - 1;
        let mut p = self.home(self.nodes[i as usize].fp());
        while self.index[p] != EMPTY {
            p = (p + 1) & mask;
        }
        self.index[p] = i;
        self.index_len += 1;
    }

    fn unlink(&mut self, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
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

    fn evict_to_fit(&mut self) {
        while self.used > self.capacity && self.tail != NIL {
            let t = self.tail;
            self.unlink(t);
            let n = self.nodes[t as usize];
            self.used -= u64::from(n.charge);
            self.unindex(n.fp());
            self.free.push(t);
        }
    }

    /// Removes `key` if resident; returns its charge.
    pub fn remove(&mut self, key: &BlockKey) -> Option<u64> {
        let i = self.unindex(fingerprint(key))?;
        self.unlink(i);
        let c = u64::from(self.nodes[i as usize].charge);
        self.used -= c;
        self.free.push(i);
        Some(c)
    }

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
            let node = self.nodes[i as usize];
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
            index_len: 0,
            nodes: Vec::with_capacity(room),
            free: Vec::new(),
            head: if n == 0 { NIL } else { 0 },
            tail: if n == 0 { NIL } else { (n - 1) as u32 },
            used,
            capacity: capacity_bytes,
        };
        let mut i = self.head;
        for k in 0..n {
            let node = self.nodes[i as usize];
            copy.nodes.push(Node {
                prev: if k == 0 { NIL } else { (k - 1) as u32 },
                next: if k + 1 == n { NIL } else { (k + 1) as u32 },
                ..node
            });
            copy.reindex(k as u32);
            i = node.next;
        }
        copy
    }

    /// Test helper: becomes an exact copy of `other` (same slab, same order).
    #[cfg(test)]
    fn clone_from_lru(&mut self, other: &Lru) {
        self.index = other.index.clone();
        self.index_len = other.index_len;
        self.nodes = other.nodes.clone();
        self.free = other.free.clone();
        self.head = other.head;
        self.tail = other.tail;
        self.used = other.used;
        self.capacity = other.capacity;
    }

    /// Drops every entry and returns the memory to the allocator.
    pub fn clear_and_free(&mut self) {
        self.index = Vec::new();
        self.index_len = 0;
        self.nodes = Vec::new();
        self.free = Vec::new();
        self.head = NIL;
        self.tail = NIL;
        self.used = 0;
    }
}

impl ReplacementPolicy for Lru {
    fn access(&mut self, key: BlockKey, charge: u64) -> bool {
        let charge32 = u32::try_from(charge).unwrap_or(u32::MAX);
        let charge = u64::from(charge32);
        let fp = fingerprint(&key);
        if let Some(i) = self.find(fp) {
            if self.head != i {
                self.unlink(i);
                self.push_front(i);
            }
            let old = u64::from(self.nodes[i as usize].charge);
            if old != charge {
                // A block rewritten with a new size: recharge it.
                self.used = self.used - old + charge;
                self.nodes[i as usize].charge = charge32;
                self.evict_to_fit();
            }
            return true;
        }
        let node = Node {
            fp_lo: fp as u32,
            fp_hi: (fp >> 32) as u32,
            charge: charge32,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.reindex(i);
        self.push_front(i);
        self.used += charge;
        self.evict_to_fit();
        false
    }

    fn contains(&self, key: &BlockKey) -> bool {
        self.find(fingerprint(key)).is_some()
    }

    fn set_capacity(&mut self, capacity_bytes: u64) {
        self.capacity = capacity_bytes;
        self.evict_to_fit();
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn len(&self) -> usize {
        self.index_len
    }

    fn name(&self) -> &'static str {
        "lru"
    }

    fn metadata_bytes(&self) -> usize {
        self.index.capacity() * 4
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.free.capacity() * 4
    }
}

/// Share of the capacity given to S3-FIFO's small (probationary) queue. Default 10 %, the value
/// the S3-FIFO paper recommends and evaluates.
pub const S3FIFO_SMALL_FRACTION: f64 = 0.10;

/// Frequency saturates here (two bits, as in the S3-FIFO paper).
const S3FIFO_FREQ_MAX: u8 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    Small,
    Main,
}

#[derive(Clone, Copy, Debug)]
struct S3Entry {
    charge: u64,
    freq: u8,
    queue: Queue,
}

/// S3-FIFO: new entries enter a small FIFO; on eviction from it an entry that was hit since
/// insertion moves to the main FIFO, others leave a key in the ghost FIFO. A miss whose key is in
/// the ghost goes straight to main. Main evicts from its tail, reinserting (with frequency
/// decremented) entries that were hit. Scan-resistant: one-hit blocks never reach main.
///
/// Choice where the paper leaves room: promotion from small needs one hit since insertion
/// (frequency >= 1); the ghost holds as many keys as main holds entries.
#[derive(Debug)]
pub struct S3Fifo {
    map: FastMap<BlockKey, S3Entry>,
    small: VecDeque<BlockKey>,
    main: VecDeque<BlockKey>,
    ghost: VecDeque<(BlockKey, u64)>,
    ghost_map: FastMap<BlockKey, u64>,
    ghost_seq: u64,
    small_used: u64,
    main_used: u64,
    capacity: u64,
}

impl S3Fifo {
    /// An empty S3-FIFO of `capacity_bytes`.
    pub fn new(capacity_bytes: u64) -> Self {
        Self {
            map: fast_map(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost: VecDeque::new(),
            ghost_map: fast_map(),
            ghost_seq: 0,
            small_used: 0,
            main_used: 0,
            capacity: capacity_bytes,
        }
    }

    fn small_target(&self) -> u64 {
        (self.capacity as f64 * S3FIFO_SMALL_FRACTION) as u64
    }

    fn ghost_insert(&mut self, key: BlockKey) {
        self.ghost_seq += 1;
        self.ghost.push_back((key, self.ghost_seq));
        self.ghost_map.insert(key, self.ghost_seq);
        let limit = self.main.len().max(16);
        while self.ghost_map.len() > limit {
            let Some((k, seq)) = self.ghost.pop_front() else {
                break;
            };
            if self.ghost_map.get(&k) == Some(&seq) {
                self.ghost_map.remove(&k);
            }
        }
        // Stale records (keys re-inserted later) are dropped lazily; bound the queue.
        if self.ghost.len() > 4 * limit + 64 {
            let map = &self.ghost_map;
            self.ghost.retain(|(k, s)| map.get(k) == Some(s));
        }
    }

    fn evict_small(&mut self) {
        let Some(k) = self.small.pop_front() else {
            return;
        };
        let Some(e) = self.map.get_mut(&k) else {
            return;
        };
        self.small_used -= e.charge;
        if e.freq >= 1 {
            e.freq = 0;
            e.queue = Queue::Main;
            self.main_used += e.charge;
            self.main.push_back(k);
        } else {
            self.map.remove(&k);
            self.ghost_insert(k);
        }
    }

    fn evict_main(&mut self) {
        // Each reinsertion lowers a frequency, so this loop ends within 4 passes of main.
        while let Some(k) = self.main.pop_front() {
            let Some(e) = self.map.get_mut(&k) else {
                continue;
            };
            if e.freq > 0 {
                e.freq -= 1;
                self.main.push_back(k);
            } else {
                self.main_used -= e.charge;
                self.map.remove(&k);
                return;
            }
        }
    }

    fn evict_to_fit(&mut self) {
        while self.small_used + self.main_used > self.capacity {
            if self.small_used > self.small_target() || self.main.is_empty() {
                if self.small.is_empty() {
                    break;
                }
                self.evict_small();
            } else {
                self.evict_main();
            }
        }
    }
}

impl ReplacementPolicy for S3Fifo {
    fn access(&mut self, key: BlockKey, charge: u64) -> bool {
        if let Some(e) = self.map.get_mut(&key) {
            e.freq = (e.freq + 1).min(S3FIFO_FREQ_MAX);
            if e.charge != charge {
                let old = e.charge;
                e.charge = charge;
                match e.queue {
                    Queue::Small => self.small_used = self.small_used - old + charge,
                    Queue::Main => self.main_used = self.main_used - old + charge,
                }
                self.evict_to_fit();
            }
            return true;
        }
        if charge > self.capacity {
            return false;
        }
        let to_main = self.ghost_map.remove(&key).is_some();
        let queue = if to_main { Queue::Main } else { Queue::Small };
        self.map.insert(
            key,
            S3Entry {
                charge,
                freq: 0,
                queue,
            },
        );
        if to_main {
            self.main.push_back(key);
            self.main_used += charge;
        } else {
            self.small.push_back(key);
            self.small_used += charge;
        }
        self.evict_to_fit();
        false
    }

    fn contains(&self, key: &BlockKey) -> bool {
        self.map.contains_key(key)
    }

    fn set_capacity(&mut self, capacity_bytes: u64) {
        self.capacity = capacity_bytes;
        self.evict_to_fit();
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn used(&self) -> u64 {
        self.small_used + self.main_used
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn name(&self) -> &'static str {
        "s3fifo"
    }

    fn metadata_bytes(&self) -> usize {
        let key = std::mem::size_of::<BlockKey>();
        self.map.capacity() * (key + std::mem::size_of::<S3Entry>() + 1)
            + (self.small.capacity() + self.main.capacity()) * key
            + self.ghost.capacity() * (key + 8)
            + self.ghost_map.capacity() * (key + 9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(u: u64) -> BlockKey {
        BlockKey { file: 1, unit: u }
    }

    #[test]
    fn lru_evicts_least_recent_first() {
        let mut c = Lru::new(3);
        for u in 0..3 {
            assert!(!c.access(k(u), 1));
        }
        assert!(c.access(k(0), 1)); // 0 becomes most recent; 1 is now the oldest
        assert!(!c.access(k(3), 1));
        assert!(!c.contains(&k(1)));
        assert!(c.contains(&k(0)) && c.contains(&k(2)) && c.contains(&k(3)));
        assert_eq!(c.used(), 3);
    }

    #[test]
    fn lru_shrink_evicts_and_oversized_entry_is_not_kept() {
        let mut c = Lru::new(10);
        for u in 0..5 {
            c.access(k(u), 2);
        }
        c.set_capacity(4);
        assert_eq!(c.len(), 2);
        assert!(c.contains(&k(4)) && c.contains(&k(3)));
        assert!(!c.access(k(9), 5));
        assert!(!c.contains(&k(9)));
        assert!(c.used() <= c.capacity());
    }

    /// The open-addressing index (linear probing, backward-shift deletion, growth) against a
    /// naive LRU oracle: same hit or miss on every access of a random trace with churn.
    #[test]
    fn lru_index_matches_a_naive_lru_under_churn() {
        let seed = 29u64;
        println!("seed {seed}");
        let mut x = seed;
        for cap in [1u64, 7, 64, 500] {
            let mut lru = Lru::new(cap * 3);
            let mut oracle: VecDeque<(u64, u64)> = VecDeque::new();
            for _ in 0..30_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 33) % (cap * 3);
                let c = 1 + (x >> 20) % 5;
                let pos = oracle.iter().position(|e| e.0 == u);
                let hit = pos.is_some();
                if let Some(p) = pos {
                    oracle.remove(p);
                }
                oracle.push_front((u, c));
                while oracle.iter().map(|e| e.1).sum::<u64>() > cap * 3 {
                    oracle.pop_back();
                }
                assert_eq!(lru.access(k(u), c), hit, "cap {cap} key {u}");
                assert_eq!(lru.len(), oracle.len());
            }
            for u in 0..cap * 3 {
                assert_eq!(lru.contains(&k(u)), oracle.iter().any(|e| e.0 == u));
            }
        }
    }

    /// GhostSim's parallel passes start each candidate from a truncated copy of a larger ghost
    /// instead of shrinking that ghost in place: the two must behave identically afterwards.
    #[test]
    fn truncated_copy_behaves_exactly_like_an_in_place_shrink() {
        let seed = 23u64;
        println!("seed {seed}");
        let mut x = seed;
        let mut step = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x
        };
        let mut big = Lru::new(5_000);
        for _ in 0..20_000 {
            let r = step();
            big.access(k((r >> 33) % 700), 1 + (r >> 20) % 40);
        }
        for cap in [0, 1, 37, 1_000, 4_999, 5_000, 9_000] {
            let mut copy = big.truncated_copy(cap);
            let mut shrunk = Lru::new(5_000);
            shrunk.clone_from_lru(&big);
            shrunk.set_capacity(cap);
            assert_eq!(
                (copy.len(), copy.used()),
                (shrunk.len(), shrunk.used()),
                "cap {cap}"
            );
            for _ in 0..20_000 {
                let r = step();
                let (u, c) = ((r >> 33) % 700, 1 + (r >> 20) % 40);
                assert_eq!(copy.access(k(u), c), shrunk.access(k(u), c), "cap {cap}");
                assert!(copy.used() <= cap);
            }
            assert_eq!((copy.len(), copy.used()), (shrunk.len(), shrunk.used()));
        }
    }

    #[test]
    fn s3fifo_one_hit_scan_does_not_flush_the_hot_set() {
        // A hot set accessed repeatedly, then a long scan of one-hit blocks: LRU loses the hot
        // set, S3-FIFO keeps it in main.
        let mut s3 = S3Fifo::new(100);
        let mut lru = Lru::new(100);
        for _ in 0..5 {
            for u in 0..50 {
                s3.access(k(u), 1);
                lru.access(k(u), 1);
            }
        }
        for u in 1000..1200 {
            s3.access(k(u), 1);
            lru.access(k(u), 1);
        }
        let s3_hot = (0..50).filter(|&u| s3.contains(&k(u))).count();
        let lru_hot = (0..50).filter(|&u| lru.contains(&k(u))).count();
        assert_eq!(lru_hot, 0);
        assert!(s3_hot >= 45, "s3fifo kept {s3_hot} of 50 hot blocks");
        assert!(s3.used() <= s3.capacity());
    }

    #[test]
    fn s3fifo_ghost_hit_goes_to_main() {
        let mut s3 = S3Fifo::new(10);
        s3.access(k(0), 1);
        for u in 1..20 {
            s3.access(k(u), 1);
        }
        assert!(!s3.contains(&k(0)));
        assert!(!s3.access(k(0), 1));
        assert_eq!(s3.map.get(&k(0)).map(|e| e.queue), Some(Queue::Main));
    }

    #[test]
    fn policies_never_exceed_capacity_on_random_traffic() {
        let seed = 17u64;
        println!("seed {seed}");
        let mut x = seed;
        for kind in [PolicyKind::Lru, PolicyKind::S3Fifo] {
            let mut c = kind.build(1000);
            for step in 0..20_000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 33) % 500;
                let charge = 1 + (x >> 20) % 40;
                c.access(k(u), charge);
                if step % 5000 == 4999 {
                    c.set_capacity(200 + (x >> 40) % 1000);
                }
                assert!(c.used() <= c.capacity(), "{} over capacity", c.name());
            }
        }
    }

    #[test]
    fn parse_policy_names() {
        assert_eq!(PolicyKind::parse("LRU").ok(), Some(PolicyKind::Lru));
        assert_eq!(PolicyKind::parse("s3-fifo").ok(), Some(PolicyKind::S3Fifo));
        assert!(PolicyKind::parse("arc").is_err());
    }
}
