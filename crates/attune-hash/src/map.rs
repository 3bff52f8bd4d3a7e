//! [`VipMap`]: a chained hash table that can learn key popularity on the fly (VIP hashing).
//!
//! # Layout
//!
//! ```text
//!   buckets: Vec<u32>            nodes: Vec<Node { key, value, next: u32 }>   (the arena)
//!   ┌────┬────┬────┬────┐        ┌─────────┬─────────┬─────────┬─────────┐
//!   │ 2  │NIL │ 0  │ 3  │ ─────▶ │ k0 v0 ─▶1│ k1 v1 NIL│ k2 v2 NIL│ k3 v3 NIL│
//!   └────┴────┴────┴────┘        └─────────┴─────────┴─────────┴─────────┘
//!   counts: Vec<u32> (only while learning; counts[i] belongs to nodes[i])
//! ```
//!
//! * The bucket array has a power-of-two length; a key lives in bucket `hash & (len - 1)`.
//! * Entries live in one `Vec` arena and chain through `u32` indices (`NIL = u32::MAX`): one
//!   allocation for the whole table instead of one `Box` per entry, 24-byte nodes for
//!   `u64 → u64`, and no allocator call on insert except when the arena grows.
//! * The arena is always dense: remove `swap_remove`s the node and re-points the single link
//!   that referenced the moved last node. There is no free list and no tombstone.
//! * Insert puts a new key at the head of its chain (the chapter's choice; it is what makes a
//!   table built in increasing-popularity order the "VIP configuration").
//! * Load factor `len / buckets` stays within `[load_factor_min, load_factor_max]` (default
//!   [0.5, 1.5]): an insert past the maximum doubles the buckets, a remove below the minimum
//!   halves them. A rehash re-links nodes **preserving their relative order** within every new
//!   chain, so a learned popularity order survives growth and shrinkage.
//!
//! # Learning (Algorithm 3) and sensing (Algorithms 4–5)
//!
//! The request-count table mirrors the arena (`counts[i]` counts `nodes[i]`), so walking a chain
//! walks its counters at the same indices. During a learn phase a fetch tracks the least-counted
//! entry before the target and, if the target's count now exceeds it, swaps the two entries'
//! keys, values and counts (at most one swap per fetch; links stay in place). The count table is
//! allocated when a learn phase starts and freed when it ends. See [`crate::policy`] for the
//! schedule and the sensing statistics.
//!
//! Thread-safety: `VipMap` is `Send`/`Sync` when its contents are, and has no interior
//! mutability; [`VipMap::get`] takes `&mut self` because learning rearranges chains. Use
//! [`VipMap::peek`] for a read that never learns.
//!
//! Invariants (checked by `check_invariants` in tests): every node is reachable from exactly the
//! bucket its hash selects; `len == nodes.len()`; while learning, `counts.len() == nodes.len()`.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

use crate::hasher::Fmix64Build;
use crate::policy::{Gamma, Phase, Schedule, SenseAcc, VipConfig};
use crate::HashError;

/// End-of-chain marker in `buckets` and `Node::next`.
const NIL: u32 = u32::MAX;
/// Fewest buckets a table ever has (default 16: small tables stay one or two cache lines).
pub const MIN_BUCKETS: usize = 16;
/// Most buckets a table may have: 2^31 (indices stay within `u32`).
pub const MAX_BUCKETS: usize = 1 << 31;
/// Fewest entries for which the end of a learn phase gathers the hot entries at the front of
/// the arena (default 65536: 1.5 MiB of `u64 → u64` nodes; smaller tables sit in L2, where
/// gathering buys nothing).
pub const GATHER_MIN_ENTRIES: usize = 1 << 16;
/// Most entries a table may hold: node indices are `u32` and `u32::MAX` is `NIL`.
pub const MAX_ENTRIES: usize = (u32::MAX - 1) as usize;

#[derive(Debug, Clone)]
struct Node<K, V> {
    key: K,
    value: V,
    next: u32,
}

/// Counters a table keeps about its own operation (cheap: a few adds per fetch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VipStats {
    /// Successful fetches.
    pub hits: u64,
    /// Fetches of absent keys.
    pub misses: u64,
    /// Sum over successful fetches of the displacement (1 = found at the chain head).
    pub hit_displacement: u64,
    /// Learn phases started (the first one included).
    pub learn_phases: u64,
    /// Learn phases started because sensing saw the distribution move.
    pub relearns: u64,
    /// Comparisons of γ_C with γ_B made.
    pub sense_checks: u64,
    /// Fetches served in learn phases.
    pub learn_fetches: u64,
    /// Entry swaps made by learning.
    pub swaps: u64,
    /// Bucket-array resizes.
    pub rehashes: u64,
    /// Learn phases that ended by gathering the hot entries at the arena front.
    pub gathers: u64,
}

impl VipStats {
    /// Mean displacement of successful fetches (0 when there were none).
    pub fn avg_displacement(&self) -> f64 {
        if self.hits == 0 {
            0.0
        } else {
            self.hit_displacement as f64 / self.hits as f64
        }
    }
}

/// A chained hash table with VIP hashing. `VipMap<u64, u64>` is the chapter's 8-byte key/value
/// table hashed by one `fmix64`; any `K: Hash + Eq` works through the same code.
///
/// ```
/// use attune_hash::{VipConfig, VipMap};
/// let mut m: VipMap<u64, u64> = VipMap::new(VipConfig::default()).unwrap();
/// m.insert(7, 70);
/// assert_eq!(m.get(&7), Some(&70));
/// assert_eq!(m.remove(&7), Some(70));
/// ```
#[derive(Debug, Clone)]
pub struct VipMap<K, V, S = Fmix64Build> {
    buckets: Vec<u32>,
    mask: u64,
    nodes: Vec<Node<K, V>>,
    counts: Vec<u32>,
    hasher: S,
    config: VipConfig,
    phase: Phase,
    /// Fetches left in the current phase; the phase ends when it reaches zero.
    countdown: u64,
    sense: SenseAcc,
    baseline: Option<Gamma>,
    last_gamma: Option<Gamma>,
    stats: VipStats,
}

impl<K: Hash + Eq, V> VipMap<K, V, Fmix64Build> {
    /// An empty table with [`MIN_BUCKETS`] buckets and the `fmix64` hasher.
    pub fn new(config: VipConfig) -> Result<Self, HashError> {
        Self::with_buckets_and_hasher(MIN_BUCKETS, config, Fmix64Build)
    }

    /// An empty table sized so that `capacity` entries fit at load factor at most 1.
    pub fn with_capacity(capacity: usize, config: VipConfig) -> Result<Self, HashError> {
        let buckets = capacity
            .checked_next_power_of_two()
            .unwrap_or(MAX_BUCKETS)
            .clamp(MIN_BUCKETS, MAX_BUCKETS);
        Self::with_buckets_and_hasher(buckets, config, Fmix64Build)
    }

    /// An empty table with exactly `buckets` buckets (a power of two in
    /// `[MIN_BUCKETS, MAX_BUCKETS]`); used to run at a chosen load factor.
    pub fn with_buckets(buckets: usize, config: VipConfig) -> Result<Self, HashError> {
        Self::with_buckets_and_hasher(buckets, config, Fmix64Build)
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> VipMap<K, V, S> {
    /// An empty table with [`MIN_BUCKETS`] buckets and the given hasher.
    pub fn with_hasher(config: VipConfig, hasher: S) -> Result<Self, HashError> {
        Self::with_buckets_and_hasher(MIN_BUCKETS, config, hasher)
    }

    /// An empty table with `buckets` buckets (power of two, within bounds) and `hasher`.
    pub fn with_buckets_and_hasher(
        buckets: usize,
        config: VipConfig,
        hasher: S,
    ) -> Result<Self, HashError> {
        config.validate()?;
        if !buckets.is_power_of_two() || !(MIN_BUCKETS..=MAX_BUCKETS).contains(&buckets) {
            return Err(HashError::InvalidConfig {
                field: "buckets",
                value: buckets.to_string(),
                reason: "must be a power of two in [16, 2^31]",
            });
        }
        let mut map = VipMap {
            buckets: vec![NIL; buckets],
            mask: (buckets - 1) as u64,
            nodes: Vec::new(),
            counts: Vec::new(),
            hasher,
            config,
            phase: Phase::Default,
            countdown: u64::MAX,
            sense: SenseAcc::default(),
            baseline: None,
            last_gamma: None,
            stats: VipStats::default(),
        };
        map.restart_schedule();
        Ok(map)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Number of buckets (a power of two).
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// `len / buckets`.
    pub fn load_factor(&self) -> f64 {
        self.nodes.len() as f64 / self.buckets.len() as f64
    }

    /// The configuration in force.
    pub fn config(&self) -> &VipConfig {
        &self.config
    }

    /// The current phase of the VIP schedule.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Operation counters.
    pub fn stats(&self) -> VipStats {
        self.stats
    }

    /// Zeroes the operation counters (the schedule is untouched).
    pub fn reset_stats(&mut self) {
        self.stats = VipStats::default();
    }

    /// The baseline γ_B measured after the last learn phase, if any.
    pub fn baseline_gamma(&self) -> Option<Gamma> {
        self.baseline
    }

    /// The most recent γ measured by a sense phase, if any.
    pub fn last_gamma(&self) -> Option<Gamma> {
        self.last_gamma
    }

    /// Switches gathering hot entries at the end of a learn phase on or off
    /// ([`VipConfig::gather_hot`]).
    pub fn set_gather_hot(&mut self, on: bool) {
        self.config.gather_hot = on;
    }

    /// Replaces the schedule and starts it afresh (a new `Adaptive` schedule learns first).
    pub fn set_schedule(&mut self, schedule: Schedule) {
        self.config.schedule = schedule;
        self.restart_schedule();
    }

    /// Approximate heap bytes held (buckets, arena and, while learning, the count table).
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * 4
            + self.nodes.capacity() * std::mem::size_of::<Node<K, V>>()
            + self.counts.capacity() * 4
    }

    #[inline(always)]
    fn bucket_of<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        (self.hasher.hash_one(key) & self.mask) as usize
    }

    // ----- fetch -------------------------------------------------------------------------

    /// Fetches `key`, learning from the request if the schedule says so.
    #[inline]
    pub fn get<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let idx = self.fetch(key)?;
        self.nodes.get(idx as usize).map(|n| &n.value)
    }

    /// Fetches `key` mutably, learning from the request if the schedule says so.
    #[inline]
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let idx = self.fetch(key)?;
        self.nodes.get_mut(idx as usize).map(|n| &mut n.value)
    }

    /// Reads `key` without learning, sensing or counting (a plain chain walk).
    pub fn peek<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.locate(key).map(|(i, _)| &self.nodes[i as usize].value)
    }

    /// Reads `key` mutably without learning, sensing or counting (a plain chain walk).
    pub fn peek_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (i, _) = self.locate(key)?;
        self.nodes.get_mut(i as usize).map(|n| &mut n.value)
    }

    /// Whether `key` is present (no learning).
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.locate(key).is_some()
    }

    /// Position of `key` in its chain (1 = head), without learning.
    pub fn displacement<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.locate(key).map(|(_, d)| d as usize)
    }

    fn locate<Q>(&self, key: &Q) -> Option<(u32, u64)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut i = self.buckets[self.bucket_of(key)];
        let mut d = 1u64;
        while i != NIL {
            let n = &self.nodes[i as usize];
            if n.key.borrow() == key {
                return Some((i, d));
            }
            i = n.next;
            d += 1;
        }
        None
    }

    /// One fetch: advances the schedule and dispatches to the phase's chain walk.
    #[inline]
    fn fetch<Q>(&mut self, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.countdown == 0 {
            self.end_phase();
        }
        self.countdown -= 1;
        let found = match self.phase {
            Phase::Default => self.locate(key),
            Phase::Learn => self.fetch_learn(key),
            Phase::SenseBaseline | Phase::SenseCompare => {
                let r = self.locate(key);
                if let Some((_, d)) = r {
                    self.sense.add(d);
                }
                r
            }
        };
        match found {
            Some((i, d)) => {
                self.stats.hits += 1;
                self.stats.hit_displacement += d;
                Some(i)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Algorithm 3: walk the chain and its counters together, remember the least-requested
    /// entry before the target, count the hit, and swap once if the target now has more.
    /// Returns the index where the target ends up and its displacement *before* the swap.
    fn fetch_learn<Q>(&mut self, key: &Q) -> Option<(u32, u64)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.stats.learn_fetches += 1;
        let head = self.buckets[self.bucket_of(key)];
        let mut i = head;
        let mut min = head;
        let mut d = 1u64;
        while i != NIL {
            let n = &self.nodes[i as usize];
            if n.key.borrow() == key {
                break;
            }
            if self.counts[i as usize] < self.counts[min as usize] {
                min = i;
            }
            i = n.next;
            d += 1;
        }
        if i == NIL {
            return None;
        }
        let (t, m) = (i as usize, min as usize);
        self.counts[t] = self.counts[t].saturating_add(1);
        if self.counts[t] > self.counts[m] {
            self.swap_contents(t, m);
            self.stats.swaps += 1;
            return Some((min, d));
        }
        Some((i, d))
    }

    /// Swaps the key, value and request count of two nodes, leaving the links in place.
    fn swap_contents(&mut self, a: usize, b: usize) {
        let (next_a, next_b) = (self.nodes[a].next, self.nodes[b].next);
        self.nodes.swap(a, b);
        self.nodes[a].next = next_a;
        self.nodes[b].next = next_b;
        self.counts.swap(a, b);
    }

    // ----- schedule ----------------------------------------------------------------------

    fn restart_schedule(&mut self) {
        self.baseline = None;
        self.sense = SenseAcc::default();
        match self.config.schedule {
            Schedule::Off => self.enter_default_forever(),
            Schedule::Adaptive => self.enter_learn(self.config.learn_fetches(self.buckets())),
            Schedule::LearnOnce(n) if n > 0 => self.enter_learn(n),
            Schedule::LearnOnce(_) => self.enter_default_forever(),
        }
    }

    fn enter_default_forever(&mut self) {
        self.free_counts();
        self.phase = Phase::Default;
        self.countdown = u64::MAX;
    }

    fn enter_learn(&mut self, fetches: u64) {
        self.stats.learn_phases += 1;
        self.counts.clear();
        self.counts.resize(self.nodes.len(), 0);
        self.phase = Phase::Learn;
        self.countdown = fetches;
    }

    fn enter_sense(&mut self, phase: Phase) {
        self.free_counts();
        self.sense = SenseAcc::default();
        self.phase = phase;
        self.countdown = self.config.sense_fetches;
    }

    fn enter_default(&mut self) {
        self.phase = Phase::Default;
        self.countdown = self.config.default_fetches(self.buckets());
    }

    /// Frees the count table: after learning it is dead weight in memory and cache.
    fn free_counts(&mut self) {
        self.counts = Vec::new();
    }

    #[cold]
    #[inline(never)]
    fn end_phase(&mut self) {
        let adaptive = self.config.schedule == Schedule::Adaptive;
        if self.phase == Phase::Learn && self.config.gather_hot {
            self.gather_hot_nodes();
        }
        match self.phase {
            Phase::Learn if adaptive => self.enter_sense(Phase::SenseBaseline),
            Phase::Learn => self.enter_default_forever(),
            Phase::SenseBaseline => {
                let g = self.sensed_gamma();
                self.baseline = g;
                self.enter_default();
            }
            Phase::Default if adaptive => self.enter_sense(Phase::SenseCompare),
            Phase::Default => self.countdown = u64::MAX,
            Phase::SenseCompare => {
                let current = self.sensed_gamma();
                self.stats.sense_checks += u64::from(current.is_some());
                match (self.baseline, current) {
                    (Some(b), Some(c)) if b.differs_from(&c) => {
                        self.stats.relearns += 1;
                        self.enter_learn(self.config.learn_fetches(self.buckets()));
                    }
                    // No baseline yet (too few hits after learning): adopt this one.
                    (None, Some(c)) => {
                        self.baseline = Some(c);
                        self.enter_default();
                    }
                    _ => self.enter_default(),
                }
            }
        }
    }

    /// Moves the entries requested during the learn phase to the front of the arena, the most
    /// requested first (by powers of two of their counts), so that the hot set occupies few
    /// cache lines and pages instead of one line per hot entry scattered over the whole arena
    /// — the locality a table built in increasing popularity order has for free. Chain order
    /// is untouched: nodes change slots and every link is re-pointed.
    ///
    /// Runs only when at most half of the entries were requested (a concentrated hot set;
    /// flat popularity requests most keys in a learn phase of `1.5 · buckets` fetches, and
    /// there is nothing to gather) and the table has at least [`GATHER_MIN_ENTRIES`].
    /// Cost: sequential passes that swap nodes between the two ends of a shrinking prefix
    /// (cache-friendly), one relink pass; measured in docs/vip-hashing.md.
    fn gather_hot_nodes(&mut self) {
        let n = self.nodes.len();
        if n < GATHER_MIN_ENTRIES || self.counts.len() != n {
            return;
        }
        let requested = self.counts.iter().filter(|&&c| c > 0).count();
        if requested == 0 || requested * 2 > n {
            return;
        }
        self.stats.gathers += 1;
        // origin[s] = the slot the node now in slot s occupied before gathering.
        let mut origin: Vec<u32> = (0..n as u32).collect();
        let mut end = n;
        let mut threshold = 1u32;
        loop {
            // Partition slots [0, end) so that counts >= threshold come first.
            let (mut lo, mut hi) = (0usize, end);
            loop {
                while lo < hi && self.counts[lo] >= threshold {
                    lo += 1;
                }
                while lo < hi && self.counts[hi - 1] < threshold {
                    hi -= 1;
                }
                if hi - lo < 2 {
                    break;
                }
                self.nodes.swap(lo, hi - 1);
                self.counts.swap(lo, hi - 1);
                origin.swap(lo, hi - 1);
                lo += 1;
                hi -= 1;
            }
            end = lo;
            if end < 2 || threshold > u32::MAX / 2 {
                break;
            }
            threshold *= 2;
        }
        // new_slot[original index] = current slot; re-point every link.
        let mut new_slot = vec![0u32; n];
        for (slot, &o) in origin.iter().enumerate() {
            new_slot[o as usize] = slot as u32;
        }
        drop(origin);
        for b in self.buckets.iter_mut().filter(|b| **b != NIL) {
            *b = new_slot[*b as usize];
        }
        for node in self.nodes.iter_mut().filter(|n| n.next != NIL) {
            node.next = new_slot[node.next as usize];
        }
    }

    fn sensed_gamma(&mut self) -> Option<Gamma> {
        let s = self.sense;
        let g = Gamma::estimate(s.count, s.sum, s.sum_sq, self.config.confidence);
        if g.is_some() {
            self.last_gamma = g;
        }
        g
    }

    // ----- insert / remove -----------------------------------------------------------------

    /// Inserts or replaces; returns the previous value. Errors only when the table already
    /// holds [`MAX_ENTRIES`] entries.
    pub fn try_insert(&mut self, key: K, value: V) -> Result<Option<V>, HashError> {
        let b = self.bucket_of(&key);
        let mut i = self.buckets[b];
        while i != NIL {
            let n = &mut self.nodes[i as usize];
            if n.key == key {
                return Ok(Some(std::mem::replace(&mut n.value, value)));
            }
            i = n.next;
        }
        if self.nodes.len() >= MAX_ENTRIES {
            return Err(HashError::CapacityExceeded {
                entries: MAX_ENTRIES,
            });
        }
        let idx = self.nodes.len() as u32;
        self.nodes.push(Node {
            key,
            value,
            next: self.buckets[b],
        });
        self.buckets[b] = idx;
        if self.phase == Phase::Learn {
            self.counts.push(0);
        }
        if self.nodes.len() as f64 > self.config.load_factor_max * self.buckets.len() as f64
            && self.buckets.len() < MAX_BUCKETS
        {
            self.resize(self.buckets.len() * 2);
        }
        Ok(None)
    }

    /// Inserts or replaces; returns the previous value.
    ///
    /// # Panics
    /// When the table already holds [`MAX_ENTRIES`] (about 4.3 billion) entries, like `Vec`
    /// panics on capacity overflow; use [`VipMap::try_insert`] to get an error instead.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.try_insert(key, value) {
            Ok(old) => old,
            Err(e) => panic!("{e}"),
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let b = self.bucket_of(key);
        let mut prev = NIL;
        let mut i = self.buckets[b];
        while i != NIL {
            let n = &self.nodes[i as usize];
            if n.key.borrow() == key {
                break;
            }
            prev = i;
            i = n.next;
        }
        if i == NIL {
            return None;
        }
        let next = self.nodes[i as usize].next;
        self.set_link(b, prev, next);
        let last = (self.nodes.len() - 1) as u32;
        if i != last {
            // The last node moves into slot i: re-point the one link that referenced it.
            let lb = self.bucket_of(&self.nodes[last as usize].key);
            let mut p = NIL;
            let mut j = self.buckets[lb];
            while j != last {
                p = j;
                j = self.nodes[j as usize].next;
            }
            self.set_link(lb, p, i);
        }
        let node = self.nodes.swap_remove(i as usize);
        if self.phase == Phase::Learn {
            self.counts.swap_remove(i as usize);
        }
        if (self.nodes.len() as f64) < self.config.load_factor_min * self.buckets.len() as f64
            && self.buckets.len() > MIN_BUCKETS
        {
            self.resize(self.buckets.len() / 2);
        }
        Some(node.value)
    }

    /// Sets the link after `prev` in bucket `b` (the bucket head when `prev == NIL`).
    fn set_link(&mut self, b: usize, prev: u32, to: u32) {
        if prev == NIL {
            self.buckets[b] = to;
        } else {
            self.nodes[prev as usize].next = to;
        }
    }

    /// Rebuilds the chains over `new_len` buckets. Old buckets are visited in order and each
    /// node is appended at the tail of its new chain, so nodes that shared a chain keep their
    /// relative order. The arena is not moved; the count table (indexed by node) stays valid.
    fn resize(&mut self, new_len: usize) {
        self.stats.rehashes += 1;
        let old = std::mem::replace(&mut self.buckets, vec![NIL; new_len]);
        self.mask = (new_len - 1) as u64;
        let mut tails = vec![NIL; new_len];
        for head in old {
            let mut i = head;
            while i != NIL {
                let next = self.nodes[i as usize].next;
                let b = self.bucket_of(&self.nodes[i as usize].key);
                self.nodes[i as usize].next = NIL;
                let t = tails[b];
                self.set_link(b, t, i);
                tails[b] = i;
                i = next;
            }
        }
    }

    /// Reserves arena room for `additional` more entries (buckets grow only by load factor).
    pub fn reserve(&mut self, additional: usize) {
        self.nodes.reserve(additional.min(MAX_ENTRIES));
    }

    /// Removes every entry (keeps the bucket count and the schedule position).
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.counts.clear();
        self.buckets.iter_mut().for_each(|b| *b = NIL);
    }

    // ----- inspection ------------------------------------------------------------------------

    /// All entries, in arena order (not chain order).
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.nodes.iter().map(|n| (&n.key, &n.value))
    }

    /// All values, mutably, in arena order (no learning; keys and chain order stay as they are).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.nodes.iter_mut().map(|n| &mut n.value)
    }

    /// Keys of bucket `b` from head to tail (empty when `b` is out of range).
    pub fn chain(&self, b: usize) -> Vec<&K> {
        let mut out = Vec::new();
        let mut i = self.buckets.get(b).copied().unwrap_or(NIL);
        while i != NIL && out.len() <= self.nodes.len() {
            let n = &self.nodes[i as usize];
            out.push(&n.key);
            i = n.next;
        }
        out
    }

    /// The bucket `key` hashes to.
    pub fn bucket_index<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        self.bucket_of(key)
    }

    /// Checks the structural invariants; returns a description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        if !self.buckets.len().is_power_of_two() || self.mask != (self.buckets.len() - 1) as u64 {
            return Err("bucket count is not a power of two matching the mask".into());
        }
        let mut seen = vec![false; self.nodes.len()];
        for (b, &head) in self.buckets.iter().enumerate() {
            let mut i = head;
            while i != NIL {
                let slot = seen.get_mut(i as usize).ok_or("link out of range")?;
                if *slot {
                    return Err(format!("node {i} linked twice"));
                }
                *slot = true;
                let n = &self.nodes[i as usize];
                if self.bucket_of(&n.key) != b {
                    return Err(format!("node {i} is in bucket {b}, hashes elsewhere"));
                }
                i = n.next;
            }
        }
        if let Some(i) = seen.iter().position(|s| !s) {
            return Err(format!("node {i} is unreachable"));
        }
        if self.phase == Phase::Learn && self.counts.len() != self.nodes.len() {
            return Err("count table does not mirror the arena".into());
        }
        if self.phase != Phase::Learn && self.counts.capacity() != 0 {
            return Err("count table not freed outside learning".into());
        }
        Ok(())
    }
}
