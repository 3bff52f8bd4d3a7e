//! The hot-key cache: value bytes of frequently read keys, kept in VIP hash tables
//! (`attune_hash::VipMap`, docs/vip-hashing.md) in front of the LSM read path.
//!
//! A `get` at the latest state (no snapshot) first asks this cache; on a miss the engine reads
//! the LSM tree as usual and *offers* the value it found. Every key seen by an offer gets an
//! entry in its shard's VIP table keyed by a 64-bit fingerprint of the user key (xxh3): at first
//! a *ghost* (a request counter, no value), promoted to a resident entry (full key and value
//! bytes) once the counter says the key is hot — [`ADMIT_REQUESTS`] requests while the ghost
//! lives. Lookups go through `VipMap::get_mut`, so the tables learn which fingerprints are
//! requested most and move them to the fronts of their chains.
//!
//! Bounds: resident entries are charged `key + value + RESIDENT_OVERHEAD` bytes against three
//! quarters of `hot_key_cache_bytes` and evicted by CLOCK (a hit sets a reference bit; the hand
//! clears bits and stops at the first entry without one); ghosts are charged [`GHOST_BYTES`]
//! each against the remaining quarter and dropped oldest first. A value larger than an eighth
//! of a shard's share is never admitted.
//!
//! Popularity counts: every entry counts its requests (ghosts while they wait, residents on
//! hits), and all counts of a shard are halved every [`AGING_FACTOR`] × its capacity in
//! entries requests (TinyLFU's reset), so they measure recent popularity. When the cache is
//! full, a candidate is admitted only if its count exceeds that of the entry CLOCK would evict
//! (TinyLFU's admission duel); otherwise it stays a ghost and the resident stays put, so keys
//! read a few times do not push out keys that are read all the time.
//!
//! Correctness (the cache never serves a value older than the latest acknowledged write):
//! * Every write path (put, delete, write batch, garbage-collection rewrites of value-log
//!   pointers — all go through the group-commit leader) calls [`HotKeyCache::invalidate`] for
//!   each key of the group *before* the group's sequence is published as the latest. An
//!   invalidation drops the resident value (the entry becomes a ghost that keeps its heat) and
//!   raises its shard's `write_seq` to the write's sequence.
//! * An offer carries the latest sequence published before the reader captured its view of
//!   the tree (every write at or below it is in that view) and is refused if its shard has seen
//!   a write with a higher sequence (`read_seq < write_seq`): a reader whose view misses a write
//!   cannot re-insert the old value after the write's invalidation. Refusals only cost a miss.
//!   (Offering the sequence loaded *after* the view was captured would be wrong: a memtable
//!   switch and a write between the two leave the view without the write but the sequence
//!   past it; `db/read.rs` has the test.)
//! * Reads with an explicit snapshot bypass the cache entirely; the cache is in memory only, so
//!   a reopened database starts empty.
//!
//! Thread-safety: `Send + Sync`; each of [`SHARDS`] shards is a `parking_lot::Mutex` (a VIP
//! fetch reorders chains, so even a hit needs exclusive access to its shard).

use attune_hash::{VipConfig, VipMap};
use parking_lot::Mutex;
use std::collections::VecDeque;
use xxhash_rust::xxh3::xxh3_64;

/// Number of shards (default 16, a power of two): spreads lock contention over 2-core to
/// 32-core machines while each shard's VIP table stays large enough to learn from.
pub const SHARDS: usize = 16;
/// Requests a key needs while its ghost lives before its value is admitted (default 2: a key
/// read once is not cached, the second read within the ghost window admits it).
pub const ADMIT_REQUESTS: u32 = 2;
/// Bytes charged per resident entry on top of its key and value (default 96: a VIP node of a
/// fingerprint and a slot, about 64 bytes, its bucket share and CLOCK queue slot).
pub const RESIDENT_OVERHEAD: usize = 96;
/// Counts of a shard are halved every `AGING_FACTOR × entries` requests to it (default 10,
/// TinyLFU's sample size W = 10 × the cache's entries).
pub const AGING_FACTOR: u64 = 10;
/// Bytes charged per ghost (default 80: a VIP node and its FIFO slot).
pub const GHOST_BYTES: usize = 80;

/// Counters of the hot-key cache (all zero when it is off).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HotKeyStats {
    /// The configured bound (`hot_key_cache_bytes`).
    pub capacity_bytes: u64,
    /// Bytes charged now (resident entries and ghosts).
    pub bytes: u64,
    /// Resident entries (keys with a cached value).
    pub entries: u64,
    /// Ghost entries (keys being counted, no value).
    pub ghosts: u64,
    /// Latest-state gets answered from the cache.
    pub hits: u64,
    /// Latest-state gets the cache could not answer.
    pub misses: u64,
    /// Values admitted.
    pub admissions: u64,
    /// Resident entries evicted for room.
    pub evictions: u64,
    /// Resident values dropped by writes.
    pub invalidations: u64,
    /// Offers refused because a write to the shard overtook the read.
    pub stale_offers: u64,
    /// Admissions refused because the cache was full and the candidate had no more requests
    /// than the entry CLOCK would evict.
    pub rejected: u64,
}

enum Slot {
    Ghost {
        requests: u32,
    },
    Resident {
        key: Box<[u8]>,
        value: Box<[u8]>,
        /// Admission number, so that CLOCK queue slots of dropped entries are recognised.
        generation: u64,
        /// Requests (aged with the shard's other counts).
        count: u32,
        /// Hit since the CLOCK hand last passed.
        referenced: bool,
    },
}

struct Shard {
    map: VipMap<u64, Slot>,
    /// Resident entries in CLOCK order: (fingerprint, generation); stale pairs are skipped.
    clock: VecDeque<(u64, u64)>,
    /// Ghost fingerprints, oldest first; entries that are no longer ghosts are skipped.
    ghost_queue: VecDeque<u64>,
    residents: usize,
    ghosts: usize,
    resident_bytes: usize,
    resident_budget: usize,
    ghost_limit: usize,
    max_entry: usize,
    /// Highest sequence of a write invalidated in this shard.
    write_seq: u64,
    next_generation: u64,
    requests_since_aging: u64,
    stats: HotKeyStats,
}

/// The sharded hot-key cache. Create with [`HotKeyCache::new`]; `None` when the bound is 0.
pub struct HotKeyCache {
    shards: Box<[Mutex<Shard>]>,
    capacity: u64,
}

fn fingerprint(key: &[u8]) -> u64 {
    xxh3_64(key)
}

fn resident_cost(key: &[u8], value: &[u8]) -> usize {
    key.len() + value.len() + RESIDENT_OVERHEAD
}

impl HotKeyCache {
    /// A cache bounded by `capacity_bytes`; `None` when it is 0 (off).
    pub fn new(capacity_bytes: u64) -> Option<HotKeyCache> {
        if capacity_bytes == 0 {
            return None;
        }
        let per_shard = usize::try_from(capacity_bytes / SHARDS as u64).unwrap_or(usize::MAX);
        let resident_budget = per_shard / 4 * 3;
        let shards = (0..SHARDS)
            .map(|_| {
                // The default VipConfig (adaptive learning) is valid, so this never fails.
                let map = VipMap::new(VipConfig::default()).ok()?;
                Some(Mutex::new(Shard {
                    map,
                    clock: VecDeque::new(),
                    ghost_queue: VecDeque::new(),
                    residents: 0,
                    ghosts: 0,
                    resident_bytes: 0,
                    resident_budget,
                    ghost_limit: (per_shard - resident_budget) / GHOST_BYTES,
                    max_entry: resident_budget / 8,
                    write_seq: 0,
                    next_generation: 0,
                    requests_since_aging: 0,
                    stats: HotKeyStats::default(),
                }))
            })
            .collect::<Option<Box<[_]>>>()?;
        Some(HotKeyCache {
            shards,
            capacity: capacity_bytes,
        })
    }

    fn shard(&self, fp: u64) -> &Mutex<Shard> {
        // High bits pick the shard; the VIP table hashes the whole fingerprint again.
        &self.shards[(fp >> 60) as usize % SHARDS]
    }

    /// The cached value of `key` at the latest state, if resident. Counts the request on the
    /// key's ghost otherwise (the admission counter).
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let fp = fingerprint(key);
        let mut sh = self.shard(fp).lock();
        let found = match sh.map.get_mut(&fp) {
            Some(Slot::Resident {
                key: k,
                value,
                count,
                referenced,
                ..
            }) if **k == *key => {
                *count = count.saturating_add(1);
                *referenced = true;
                Some(value.to_vec())
            }
            Some(Slot::Ghost { requests }) => {
                *requests = requests.saturating_add(1);
                None
            }
            _ => None,
        };
        if found.is_some() {
            sh.stats.hits += 1;
        } else {
            sh.stats.misses += 1;
        }
        sh.requests_since_aging += 1;
        if sh.requests_since_aging >= AGING_FACTOR * (sh.residents as u64).max(64) {
            sh.age_counts();
        }
        found
    }

    /// Offers the value `key` had at sequence `read_seq` (read from the LSM tree after a miss).
    /// Creates a ghost for a new key, admits the value of a key whose ghost has counted
    /// [`ADMIT_REQUESTS`] requests, and refuses anything read before the shard's latest write.
    pub fn offer(&self, key: &[u8], value: &[u8], read_seq: u64) {
        let fp = fingerprint(key);
        let mut guard = self.shard(fp).lock();
        let sh = &mut *guard;
        if read_seq < sh.write_seq {
            sh.stats.stale_offers += 1;
            return;
        }
        let cost = resident_cost(key, value);
        match sh.map.peek_mut(&fp) {
            None => {
                if sh.ghost_limit == 0
                    || sh.map.try_insert(fp, Slot::Ghost { requests: 1 }).is_err()
                {
                    return;
                }
                sh.ghosts += 1;
                sh.ghost_queue.push_back(fp);
                sh.trim_ghosts();
            }
            // Admitted meanwhile by another reader, or a fingerprint collision: keep it.
            Some(Slot::Resident { .. }) => {}
            Some(slot) => {
                let requests = match slot {
                    Slot::Ghost { requests } => *requests,
                    Slot::Resident { .. } => 0,
                };
                if requests < ADMIT_REQUESTS || cost > sh.max_entry {
                    return;
                }
                if sh.resident_bytes + cost > sh.resident_budget {
                    // Full: the candidate must out-request the entry CLOCK would evict.
                    if let Some(victim_count) = sh.clock_victim() {
                        if requests <= victim_count {
                            sh.stats.rejected += 1;
                            return;
                        }
                    }
                }
                let Some(slot) = sh.map.peek_mut(&fp) else {
                    return;
                };
                let generation = sh.next_generation;
                *slot = Slot::Resident {
                    key: key.into(),
                    value: value.into(),
                    generation,
                    count: requests,
                    referenced: false,
                };
                sh.next_generation += 1;
                sh.ghosts -= 1;
                sh.residents += 1;
                sh.resident_bytes += cost;
                sh.clock.push_back((fp, generation));
                sh.stats.admissions += 1;
                sh.evict_to_budget();
                sh.compact_queues();
            }
        }
    }

    /// Drops the cached value of `key` (written at sequence `seq`) and refuses offers read
    /// before `seq`. Called for every key of a write group before its sequence is published.
    pub fn invalidate(&self, key: &[u8], seq: u64) {
        let fp = fingerprint(key);
        let mut guard = self.shard(fp).lock();
        let sh = &mut *guard;
        sh.write_seq = sh.write_seq.max(seq);
        sh.demote(fp);
    }

    /// [`HotKeyCache::invalidate`] for every cached key in `[begin, end)` (a range deletion).
    pub fn invalidate_range(&self, begin: &[u8], end: &[u8], seq: u64) {
        for s in self.shards.iter() {
            let mut guard = s.lock();
            let sh = &mut *guard;
            sh.write_seq = sh.write_seq.max(seq);
            let hit: Vec<u64> = sh
                .map
                .iter()
                .filter_map(|(fp, slot)| match slot {
                    Slot::Resident { key, .. } if &key[..] >= begin && &key[..] < end => Some(*fp),
                    _ => None,
                })
                .collect();
            for fp in hit {
                sh.demote(fp);
            }
        }
    }
}

impl Shard {
    /// Turns the resident entry of `fp`, if any, into a ghost.
    fn demote(&mut self, fp: u64) {
        let sh = self;
        let Some(slot) = sh.map.peek_mut(&fp) else {
            return;
        };
        if let Slot::Resident { key, value, .. } = slot {
            let cost = resident_cost(key, value);
            // The key stays hot: one more request re-admits its new value.
            *slot = Slot::Ghost {
                requests: ADMIT_REQUESTS - 1,
            };
            sh.resident_bytes -= cost;
            sh.residents -= 1;
            sh.ghosts += 1;
            sh.ghost_queue.push_back(fp);
            sh.stats.invalidations += 1;
            sh.trim_ghosts();
            sh.compact_queues();
        }
    }
}

impl HotKeyCache {
    /// Sums the shards' counters.
    pub fn stats(&self) -> HotKeyStats {
        let mut t = HotKeyStats {
            capacity_bytes: self.capacity,
            ..HotKeyStats::default()
        };
        for s in self.shards.iter() {
            let sh = s.lock();
            let st = &sh.stats;
            t.bytes += (sh.resident_bytes + sh.ghosts * GHOST_BYTES) as u64;
            t.entries += sh.residents as u64;
            t.ghosts += sh.ghosts as u64;
            t.hits += st.hits;
            t.misses += st.misses;
            t.admissions += st.admissions;
            t.evictions += st.evictions;
            t.invalidations += st.invalidations;
            t.stale_offers += st.stale_offers;
            t.rejected += st.rejected;
        }
        t
    }
}

impl Shard {
    /// Moves the CLOCK hand to the entry it would evict next (dropping stale slots, clearing
    /// reference bits on the way, at most two turns) and returns that entry's count.
    fn clock_victim(&mut self) -> Option<u32> {
        let mut budget = 2 * self.clock.len() + 1;
        while let Some(&(fp, generation)) = self.clock.front() {
            budget = budget.checked_sub(1)?;
            match self.map.peek_mut(&fp) {
                Some(Slot::Resident {
                    generation: g,
                    referenced,
                    count,
                    ..
                }) if *g == generation => {
                    if !*referenced {
                        return Some(*count);
                    }
                    *referenced = false;
                    self.clock.rotate_left(1);
                }
                _ => {
                    self.clock.pop_front();
                }
            }
        }
        None
    }

    /// Halves every count of the shard (TinyLFU's reset: counts follow recent popularity).
    fn age_counts(&mut self) {
        self.requests_since_aging = 0;
        for slot in self.map.values_mut() {
            match slot {
                Slot::Ghost { requests } => *requests /= 2,
                Slot::Resident { count, .. } => *count /= 2,
            }
        }
    }

    /// CLOCK: evicts unreferenced residents (clearing reference bits as the hand passes) until
    /// the resident bytes fit the budget.
    fn evict_to_budget(&mut self) {
        while self.resident_bytes > self.resident_budget {
            let Some((fp, generation)) = self.clock.pop_front() else {
                break;
            };
            match self.map.peek_mut(&fp) {
                Some(Slot::Resident {
                    generation: g,
                    referenced,
                    ..
                }) if *g == generation => {
                    if *referenced {
                        *referenced = false;
                        self.clock.push_back((fp, generation));
                        continue;
                    }
                }
                _ => continue, // a stale queue slot
            }
            if let Some(Slot::Resident { key, value, .. }) = self.map.remove(&fp) {
                self.resident_bytes -= resident_cost(&key, &value);
                self.residents -= 1;
                self.stats.evictions += 1;
            }
        }
    }

    /// Drops the oldest ghosts beyond the ghost limit.
    fn trim_ghosts(&mut self) {
        while self.ghosts > self.ghost_limit {
            let Some(fp) = self.ghost_queue.pop_front() else {
                break;
            };
            if matches!(self.map.peek(&fp), Some(Slot::Ghost { .. })) {
                self.map.remove(&fp);
                self.ghosts -= 1;
            }
        }
    }

    /// Keeps the queues within twice their live entries (stale slots accumulate when entries
    /// change state without reaching the queue's head).
    fn compact_queues(&mut self) {
        if self.clock.len() > 2 * self.residents + 64 {
            let map = &self.map;
            self.clock.retain(|(fp, generation)| match map.peek(fp) {
                Some(Slot::Resident { generation: g, .. }) => g == generation,
                _ => false,
            });
        }
        if self.ghost_queue.len() > 2 * self.ghosts + 64 {
            let map = &self.map;
            let mut seen = std::collections::HashSet::new();
            self.ghost_queue
                .retain(|fp| matches!(map.peek(fp), Some(Slot::Ghost { .. })) && seen.insert(*fp));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_bytes_means_off() {
        assert!(HotKeyCache::new(0).is_none());
    }

    #[test]
    fn second_request_admits_and_third_hits() {
        let c = HotKeyCache::new(1 << 20).unwrap();
        assert_eq!(c.get(b"k"), None);
        c.offer(b"k", b"v1", 5); // ghost
        assert_eq!(c.get(b"k"), None); // counts the second request
        c.offer(b"k", b"v1", 5); // admits
        assert_eq!(c.get(b"k"), Some(b"v1".to_vec()));
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.admissions, s.entries), (1, 2, 1, 1));
    }

    fn admit(c: &HotKeyCache, k: &[u8], v: &[u8], seq: u64) {
        c.get(k);
        c.offer(k, v, seq);
        c.get(k);
        c.offer(k, v, seq);
    }

    #[test]
    fn invalidation_drops_the_value_and_refuses_older_reads() {
        let c = HotKeyCache::new(1 << 20).unwrap();
        admit(&c, b"k", b"old", 10);
        assert_eq!(c.get(b"k"), Some(b"old".to_vec()));
        c.invalidate(b"k", 11);
        assert_eq!(c.get(b"k"), None);
        // A reader that read at 10 (before the write) must not re-insert the old value.
        c.offer(b"k", b"old", 10);
        assert_eq!(c.get(b"k"), None);
        assert_eq!(c.stats().stale_offers, 1);
        // A read at 11 sees the new value; the key kept its heat and is re-admitted.
        c.offer(b"k", b"new", 11);
        assert_eq!(c.get(b"k"), Some(b"new".to_vec()));
    }

    #[test]
    fn resident_bytes_stay_within_the_bound() {
        let cap = 64 << 10;
        let c = HotKeyCache::new(cap).unwrap();
        for i in 0..5000u32 {
            let k = i.to_be_bytes();
            admit(&c, &k, &[7u8; 100], 1);
            let s = c.stats();
            assert!(s.bytes <= cap, "{} > {cap} after {i}", s.bytes);
        }
        let s = c.stats();
        assert!(s.evictions > 0 && s.entries > 0, "{s:?}");
    }

    #[test]
    fn a_value_larger_than_an_eighth_of_a_shard_is_not_admitted() {
        let c = HotKeyCache::new(16 << 10).unwrap();
        admit(&c, b"big", &[1u8; 4096], 1);
        assert_eq!(c.get(b"big"), None);
        assert_eq!(c.stats().admissions, 0);
    }

    #[test]
    fn frequently_hit_entries_survive_a_stream_of_new_keys() {
        let c = HotKeyCache::new(SHARDS as u64 * 4096).unwrap();
        // Fill one key, keep touching it while many others stream through.
        admit(&c, b"hot", b"h", 1);
        for i in 0..20_000u32 {
            assert_eq!(c.get(b"hot"), Some(b"h".to_vec()), "lost at {i}");
            admit(&c, &i.to_be_bytes(), &[0u8; 64], 1);
        }
    }
}
