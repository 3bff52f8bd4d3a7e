//! Byte-charged S3-FIFO (Yang et al., SOSP '23) over keys `K` holding values `V`: the
//! simulator's (`S3Fifo<BlockKey, ()>`, [`S3Fifo::new`]) and the engine block cache's S3-FIFO
//! shards (`S3Fifo<BlockKey, V>`, [`S3Fifo::unbounded`], evicted by the caller through
//! [`S3Fifo::evict_one`]).
//!
//! Three FIFO queues:
//! - **small**: new entries land here. An entry leaving small that was hit at least once since
//!   it arrived moves to main; one never hit leaves the cache and its key goes to the ghost.
//! - **main**: evicts from its head with a 2-bit frequency (0..=3): a non-zero frequency is
//!   decremented and the entry goes back to the tail; zero leaves the cache.
//! - **ghost**: keys only of entries that left small unhit, as many as main holds entries (at
//!   least [`GHOST_MIN`]). A miss whose key is in the ghost is inserted straight into main.
//!
//! A one-pass scan therefore flows through small and never displaces the entries in main.
//!
//! Small's share is [`S3FIFO_SMALL_FRACTION`], the paper's 10 %: of the capacity for a bounded
//! cache (the next eviction takes small's head while small holds more than that share), of the
//! bytes held for an unbounded one, whose owner evicts and whose capacity the policy does not
//! know (small's head while small holds at least a tenth of the bytes).
//!
//! Choices where the paper leaves room: promotion from small needs one hit since insertion
//! (frequency >= 1); replacing a resident entry keeps its queue and frequency.
//!
//! Invariants ([`S3Fifo::check_invariants`]): the used bytes are the sum of the entries'
//! charges, small's bytes the sum over small; every resident key is in exactly one of small and
//! main, exactly once.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use super::{BlockKey, PolicyKey};

/// Share of the capacity given to S3-FIFO's small (probationary) queue. Default 10 %, the value
/// the S3-FIFO paper recommends and evaluates.
pub const S3FIFO_SMALL_FRACTION: f64 = 0.10;

/// Small's share of the bytes held, as a divisor, for an unbounded cache (1 / 10 = 10 %).
const SMALL_DIV: u64 = 10;

/// Frequency saturates here (two bits, as in the S3-FIFO paper): an entry hit often survives up
/// to three more passes of main without a hit.
const FREQ_MAX: u8 = 3;

/// The ghost holds at least this many keys, so that a cache whose main is still empty (a cold
/// start) can already recognise a key it just evicted.
pub const GHOST_MIN: usize = 16;

/// A fast multiplicative hasher for the maps (keys are trusted, engine-chosen numbers, so no
/// hash-flooding defence is needed). A key hashes as its integer fields in order.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(23) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type KeyMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

#[derive(Clone, Copy, Debug)]
struct Entry<V> {
    value: V,
    charge: u64,
    freq: u8,
    in_main: bool,
}

/// S3-FIFO (see the module doc). Single-owner (`&mut self`); wrap in a lock to share.
#[derive(Debug)]
pub struct S3Fifo<K = BlockKey, V = ()> {
    map: KeyMap<K, Entry<V>>,
    small: VecDeque<K>,
    main: VecDeque<K>,
    /// Ghost FIFO of (key, sequence); `ghost_map` holds the live ones (a key re-added later gets
    /// a new sequence, so its older queue slot is stale and skipped).
    ghost: VecDeque<(K, u64)>,
    ghost_map: KeyMap<K, u64>,
    ghost_seq: u64,
    small_used: u64,
    main_used: u64,
    /// `None`: unbounded (the owner evicts; small's share is of the bytes held).
    capacity: Option<u64>,
}

impl S3Fifo<BlockKey, ()> {
    /// An empty simulator S3-FIFO of `capacity_bytes` (no values).
    pub fn new(capacity_bytes: u64) -> Self {
        Self::with_capacity_bytes(capacity_bytes)
    }
}

impl<K: PolicyKey, V> S3Fifo<K, V> {
    fn empty(capacity: Option<u64>) -> Self {
        Self {
            map: KeyMap::default(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghost: VecDeque::new(),
            ghost_map: KeyMap::default(),
            ghost_seq: 0,
            small_used: 0,
            main_used: 0,
            capacity,
        }
    }

    /// An empty S3-FIFO that evicts by itself to stay within `capacity_bytes`.
    pub fn with_capacity_bytes(capacity_bytes: u64) -> Self {
        Self::empty(Some(capacity_bytes))
    }

    /// An empty S3-FIFO without a capacity: it never evicts by itself; the owner evicts with
    /// [`S3Fifo::evict_one`] (the engine's sharded cache, whose budget spans all shards).
    pub fn unbounded() -> Self {
        Self::empty(None)
    }

    fn ghost_insert(&mut self, key: K) {
        self.ghost_seq += 1;
        self.ghost.push_back((key, self.ghost_seq));
        self.ghost_map.insert(key, self.ghost_seq);
        let limit = self.main.len().max(GHOST_MIN);
        while self.ghost_map.len() > limit {
            let Some((k, seq)) = self.ghost.pop_front() else {
                break;
            };
            if self.ghost_map.get(&k) == Some(&seq) {
                self.ghost_map.remove(&k);
            }
        }
        // Stale slots (keys that left the ghost for main) are dropped lazily; bound the queue.
        if self.ghost.len() > 4 * limit + 64 {
            let live = &self.ghost_map;
            self.ghost.retain(|(k, s)| live.get(k) == Some(s));
        }
    }

    /// Whether small holds more than its share (see the module doc).
    #[inline]
    fn small_over_share(&self) -> bool {
        match self.capacity {
            Some(c) => self.small_used > (c as f64 * S3FIFO_SMALL_FRACTION) as u64,
            None => self.small_used.saturating_mul(SMALL_DIV) >= self.used_bytes(),
        }
    }

    /// Evicts one entry and returns it (key, value, charge), or `None` when empty. Takes small's
    /// head while small is over its share (or main is empty), else main's. Ends: each pass moves
    /// an entry from small to main (once per entry) or lowers a main entry's frequency (at most
    /// `FREQ_MAX` times per entry) or evicts.
    pub fn evict_one(&mut self) -> Option<(K, V, u64)> {
        loop {
            if !self.small.is_empty() && (self.main.is_empty() || self.small_over_share()) {
                let k = self.small.pop_front()?;
                let Some(e) = self.map.get_mut(&k) else {
                    continue; // not reached: small lists only resident keys
                };
                self.small_used -= e.charge;
                if e.freq >= 1 {
                    e.freq = 0;
                    e.in_main = true;
                    self.main_used += e.charge;
                    self.main.push_back(k);
                    continue;
                }
                let e = self.map.remove(&k)?;
                self.ghost_insert(k);
                return Some((k, e.value, e.charge));
            }
            let k = self.main.pop_front()?;
            let Some(e) = self.map.get_mut(&k) else {
                continue; // not reached: main lists only resident keys
            };
            if e.freq > 0 {
                e.freq -= 1;
                self.main.push_back(k);
                continue;
            }
            let e = self.map.remove(&k)?;
            self.main_used -= e.charge;
            return Some((k, e.value, e.charge));
        }
    }

    /// Evicts while the charge exceeds the capacity (a no-op when unbounded).
    fn evict_to_fit(&mut self) {
        while self.used_bytes() > self.capacity_bytes() {
            if self.evict_one().is_none() {
                break;
            }
        }
    }

    /// The value of `key` (a hit: its frequency rises).
    #[inline]
    pub fn get(&mut self, key: &K) -> Option<&V> {
        let e = self.map.get_mut(key)?;
        e.freq = (e.freq + 1).min(FREQ_MAX);
        Some(&e.value)
    }

    /// The value of `key`, without changing any state.
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|e| &e.value)
    }

    /// Whether `key` is resident, without changing any state.
    pub fn contains_key(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    /// Whether resident `key` is in main (`Some(false)`: in small).
    pub fn in_main(&self, key: &K) -> Option<bool> {
        self.map.get(key).map(|e| e.in_main)
    }

    /// Inserts `key` charged `charge` bytes: into main if its key is in the ghost, else into
    /// small. A resident `key` has its value and charge replaced and keeps its queue and
    /// frequency; returns the replaced value and charge. A bounded cache then evicts to fit and
    /// does not admit an entry larger than its capacity (the value is dropped); an unbounded one
    /// leaves evicting to its owner.
    pub fn insert(&mut self, key: K, value: V, charge: u64) -> Option<(V, u64)> {
        if let Some(e) = self.map.get_mut(&key) {
            let old = e.charge;
            let old_value = std::mem::replace(&mut e.value, value);
            e.charge = charge;
            if e.in_main {
                self.main_used = self.main_used - old + charge;
            } else {
                self.small_used = self.small_used - old + charge;
            }
            self.evict_to_fit();
            return Some((old_value, old));
        }
        if charge > self.capacity_bytes() {
            return None;
        }
        let in_main = self.ghost_map.remove(&key).is_some();
        self.map.insert(
            key,
            Entry {
                value,
                charge,
                freq: 0,
                in_main,
            },
        );
        if in_main {
            self.main.push_back(key);
            self.main_used += charge;
        } else {
            self.small.push_back(key);
            self.small_used += charge;
        }
        self.evict_to_fit();
        None
    }

    /// Removes every entry whose key passes `erase`; returns the bytes freed. Their ghost keys
    /// stay until they age out.
    pub fn erase_if(&mut self, mut erase: impl FnMut(&K) -> bool) -> u64 {
        let before = self.used_bytes();
        let (mut small_freed, mut main_freed) = (0, 0);
        self.map.retain(|k, e| {
            if !erase(k) {
                return true;
            }
            if e.in_main {
                main_freed += e.charge;
            } else {
                small_freed += e.charge;
            }
            false
        });
        let map = &self.map;
        self.small.retain(|k| map.contains_key(k));
        self.main.retain(|k| map.contains_key(k));
        self.small_used -= small_freed;
        self.main_used -= main_freed;
        before - self.used_bytes()
    }

    /// The entries (key, value, charge), main's head first, then small's: only an
    /// approximation of an eviction order (S3-FIFO keeps no recency).
    pub fn iter_main_first(&self) -> impl Iterator<Item = (&K, &V, u64)> + '_ {
        self.main
            .iter()
            .chain(self.small.iter())
            .filter_map(|k| self.map.get(k).map(|e| (k, &e.value, e.charge)))
    }

    /// Changes the capacity (bounded from then on); shrinking evicts at once.
    pub fn set_capacity_bytes(&mut self, capacity_bytes: u64) {
        self.capacity = Some(capacity_bytes);
        self.evict_to_fit();
    }

    /// Capacity in bytes (`u64::MAX` for an unbounded cache).
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity.unwrap_or(u64::MAX)
    }

    /// Bytes charged by resident entries.
    #[inline]
    pub fn used_bytes(&self) -> u64 {
        self.small_used + self.main_used
    }

    /// Resident entries.
    pub fn entries(&self) -> usize {
        self.map.len()
    }

    /// Approximate bytes of metadata this instance holds (maps and queues, values included).
    pub fn metadata_size(&self) -> usize {
        let key = std::mem::size_of::<K>();
        self.map.capacity() * (key + std::mem::size_of::<Entry<V>>() + 1)
            + (self.small.capacity() + self.main.capacity()) * key
            + self.ghost.capacity() * (key + 8)
            + self.ghost_map.capacity() * (key + 9)
    }

    /// Checks the invariants (test support): the byte counts match the entries, and each
    /// resident key is queued exactly once, in the queue its entry names.
    pub fn check_invariants(&self) -> Result<(), String> {
        let sum = |q: &VecDeque<K>| -> u64 {
            q.iter()
                .filter_map(|k| self.map.get(k))
                .map(|e| e.charge)
                .sum()
        };
        if sum(&self.small) != self.small_used || sum(&self.main) != self.main_used {
            return Err("small/main bytes out of step with the entries".into());
        }
        if self.small.len() + self.main.len() != self.map.len() {
            return Err(format!(
                "queues list {} + {} keys for {} entries",
                self.small.len(),
                self.main.len(),
                self.map.len()
            ));
        }
        let wrong = |q: &VecDeque<K>, main: bool| {
            q.iter()
                .any(|k| self.map.get(k).is_none_or(|e| e.in_main != main))
        };
        if wrong(&self.small, false) || wrong(&self.main, true) {
            return Err("a queued key is missing or in the wrong queue".into());
        }
        Ok(())
    }
}

impl<K: PolicyKey> S3Fifo<K, ()> {
    /// Hit-or-insert with a charge (the simulator's access): a resident `key` counts a hit and is
    /// recharged, a missing one is inserted; then evicts to fit. Returns whether it hit.
    pub fn access_key(&mut self, key: K, charge: u64) -> bool {
        if let Some(e) = self.map.get_mut(&key) {
            e.freq = (e.freq + 1).min(FREQ_MAX);
            if e.charge != charge {
                self.insert(key, (), charge);
            }
            return true;
        }
        self.insert(key, (), charge);
        false
    }
}
