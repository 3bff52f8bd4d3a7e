//! EV-LFU with remembered frequencies and frequency admission (`ev-lfu-hist`, not in the
//! source). EV-LFU and LFU forget a key's count when it leaves the cache, so under a steady
//! skewed workload the cache keeps churning between popular keys and the one-off tail keys
//! every request brings; the static oracle that keeps the most used keys (docs/evstore.md,
//! "What limits it") does not. This policy keeps, for every key seen (cached or not), a value
//! that each access raises by a weight, and:
//!
//! * evicts the cached key of lowest value (ties to the least recently used), and
//! * admits a missed key into a full cache only if its value is above that victim's; otherwise
//!   the row is served and not cached (TinyLFU's rule, with exact counts instead of a sketch).
//!
//! The weight of an access is `aggHit + 1` (group-aware: an access from a request whose other
//! keys hit counts more, as in `ev-lfu-sum`) or `1` (`-flat`: plain access counts, a "perfect
//! LFU" with admission; it shows how much of the gain is the memory of counts and how much the
//! group weighting). Values are halved every `window × capacity` accesses (`-wN`; default no
//! halving: the calibrated workload is stationary, chosen on a validation seed), which lets a
//! changing workload's old favourites go.
//!
//! Memory: the exact history holds one entry per remembered key that is *not* cached (a cached
//! key's value is its item metadata, as LFU's count is); when full, a sweep drops the lowest
//! values (the smallest threshold that frees a quarter of the entries), and the key that found
//! no room is forgotten. `-sN` keeps every key's value in a count-min sketch instead (4 rows of
//! 16-bit counters, conservative update). Either is charged to the cache budget by default
//! ([`HistSize`]): the history gets a share of the bytes and the rows the rest, so the policy
//! holds fewer rows than a baseline of the same budget; `-free` sizes it per cached item
//! instead and charges nothing (what the first measurements did). O(log n) per update (an
//! ordered set of the cached keys).
//! Thread-safety: owned by one thread (`Send`).

use super::sketch::{mix, ROWS, SEEDS};
use super::{map, FreqOrder, Map, Policy};

/// Bytes of one exact history entry: a hash-table bucket of a `u64` key and a `u64` value plus
/// its control byte (the table is allocated once, at its final size).
pub const ENTRY_BYTES: usize = 17;
/// Bytes of one sketch column: [`ROWS`] 16-bit counters.
pub const COLUMN_BYTES: usize = ROWS * 2;

/// A count-min sketch of 16-bit counters (conservative update, saturating), the compact form of
/// the history (`-sN`; 4 rows).
struct Sketch16 {
    counters: Vec<u16>,
    mask: usize,
}

impl Sketch16 {
    /// `width` counters per row (rounded up to a power of two, at least 16).
    fn new(width: usize) -> Self {
        let width = width.max(16).next_power_of_two();
        Sketch16 {
            counters: vec![0; width * ROWS],
            mask: width - 1,
        }
    }
    fn bytes(&self) -> usize {
        self.counters.len() * 2
    }
    fn slot(&self, key: u64, row: usize) -> usize {
        row * (self.mask + 1) + (mix(key, SEEDS[row]) as usize & self.mask)
    }
    fn estimate(&self, key: u64) -> u64 {
        (0..ROWS)
            .map(|r| u64::from(self.counters[self.slot(key, r)]))
            .min()
            .unwrap_or(0)
    }
    /// Adds `w` to `key`'s counters (only those at the minimum grow); returns the new estimate.
    fn add(&mut self, key: u64, w: u64) -> u64 {
        let est = self.estimate(key);
        let new = (est + w).min(u64::from(u16::MAX));
        for r in 0..ROWS {
            let s = self.slot(key, r);
            if u64::from(self.counters[s]) < new {
                self.counters[s] = new as u16;
            }
        }
        new
    }
    fn halve(&mut self) {
        for c in &mut self.counters {
            *c >>= 1;
        }
    }
}

/// Bytes of one compact history entry: a 16-bit fingerprint and a 16-bit saturating value.
pub const COMPACT_ENTRY_BYTES: usize = 4;
/// Entries of one compact bucket (one 32-byte half cache line).
const BUCKET_SLOTS: usize = 8;

/// The compact history (`-c`): buckets of [`BUCKET_SLOTS`] 32-bit slots, each a key's 16-bit
/// fingerprint (high half; never 0, so 0 is an empty slot) and its value (low half, saturating
/// at `u16::MAX`). A key lives only in the bucket its hash names (the bucket count need not be
/// a power of two: multiply-shift reduction), so the table's bytes are exactly what is charged.
/// A full bucket makes room by pressure aging: the newcomer replaces the bucket's lowest entry
/// if that is not above the newcomer's value; otherwise the lowest loses one and the newcomer
/// is forgotten, so a bucket of stale values drains under the pressure of new keys. Two keys
/// of one bucket with the same fingerprint share a slot (a false match: the chance is about
/// 8 / 65,535 per lookup of an unremembered key).
///
/// The table is resizable by *ways* (`-auto`): every bucket keeps `ways` of its eight slots, so
/// changing the ways keeps each key in its bucket (no rehash, which fingerprints could not do)
/// and shrinking keeps each bucket's highest values; the slots are re-laid out and the
/// allocation follows, so the bytes are always `buckets × ways × 4`.
struct FpTable {
    slots: Vec<u32>,
    buckets: usize,
    /// Slots per bucket (0 to [`BUCKET_SLOTS`]; 0 remembers nothing).
    ways: usize,
    len: usize,
}

impl FpTable {
    /// A table of `buckets` buckets (at least one).
    fn new(buckets: usize) -> Self {
        let buckets = buckets.max(1);
        FpTable {
            slots: vec![0; buckets * BUCKET_SLOTS],
            buckets,
            ways: BUCKET_SLOTS,
            len: 0,
        }
    }
    /// Keeps `ways` slots per bucket (at most [`BUCKET_SLOTS`]): each bucket keeps its highest
    /// values, and the allocation is `buckets × ways` slots.
    fn set_ways(&mut self, ways: usize) {
        let ways = ways.min(BUCKET_SLOTS);
        if ways == self.ways {
            return;
        }
        let mut slots = vec![0u32; self.buckets * ways];
        let mut keep = [0u32; BUCKET_SLOTS];
        for b in 0..self.buckets {
            let old = &self.slots[b * self.ways..(b + 1) * self.ways];
            let n = old.len();
            keep[..n].copy_from_slice(old);
            keep[..n].sort_unstable_by_key(|x| std::cmp::Reverse(*x & 0xFFFF));
            let m = n.min(ways);
            slots[b * ways..b * ways + m].copy_from_slice(&keep[..m]);
        }
        slots.shrink_to_fit();
        self.slots = slots;
        self.ways = ways;
        self.len = self.slots.iter().filter(|&&x| x != 0).count();
    }
    fn bytes(&self) -> usize {
        self.slots.len() * COMPACT_ENTRY_BYTES
    }
    fn entries(&self) -> usize {
        self.slots.len()
    }
    /// The first slot of `key`'s bucket and its fingerprint.
    fn locate(&self, key: u64) -> (usize, u32) {
        let h = mix(key, SEEDS[0]);
        let b = ((u128::from(h) * self.buckets as u128) >> 64) as usize;
        let fp = ((h as u32) >> 16).max(1);
        (b * self.ways, fp)
    }
    /// Removes `key` and returns its value.
    fn take(&mut self, key: u64) -> Option<u64> {
        let (s, fp) = self.locate(key);
        let bucket = &mut self.slots[s..s + self.ways];
        let slot = bucket.iter_mut().find(|x| **x >> 16 == fp)?;
        let v = u64::from(*slot & 0xFFFF);
        *slot = 0;
        self.len -= 1;
        Some(v)
    }
    /// Remembers `key` at value `v` (see the type's doc for a full bucket).
    fn put(&mut self, key: u64, v: u64) {
        let (s, fp) = self.locate(key);
        let v16 = v.min(u64::from(u16::MAX)) as u32;
        let entry = (fp << 16) | v16.max(1);
        let bucket = &mut self.slots[s..s + self.ways];
        if let Some(slot) = bucket.iter_mut().find(|x| **x >> 16 == fp) {
            *slot = entry;
            return;
        }
        if let Some(slot) = bucket.iter_mut().find(|x| **x == 0) {
            *slot = entry;
            self.len += 1;
            return;
        }
        let Some(low) = bucket.iter_mut().min_by_key(|x| **x & 0xFFFF) else {
            return;
        };
        if *low & 0xFFFF <= v16 {
            *low = entry;
        } else {
            *low -= 1;
        }
    }
    /// Halves every value, emptying the slots that reach 0.
    fn halve(&mut self) {
        for x in &mut self.slots {
            if *x != 0 {
                let v = (*x & 0xFFFF) >> 1;
                *x = if v == 0 { 0 } else { (*x & 0xFFFF_0000) | v };
            }
        }
        self.len = self.slots.iter().filter(|&&x| x != 0).count();
    }
}

/// Uncharged exact history entries per cached item (`-free`).
pub const HISTORY_PER_ITEM: usize = 16;
/// Uncharged exact history entries at least (small caches still need to count their candidates).
pub const HISTORY_MIN: usize = 1024;
/// Default share of the budget charged to the history, in percent.
pub const DEFAULT_SHARE_PCT: u32 = 10;

/// The form of a charged history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistForm {
    /// An exact map of uncached keys ([`ENTRY_BYTES`] an entry).
    Exact,
    /// A count-min sketch over every key (`-s`; [`COLUMN_BYTES`] a column).
    Sketch,
    /// Fingerprints and 16-bit values of uncached keys (`-c`; [`COMPACT_ENTRY_BYTES`] an entry).
    Compact,
    /// The compact form sized by need (`-c-auto`): the share named is the most it may take;
    /// [`EvLfuHistAuto`] moves bytes between it and the rows, as its controller decides.
    Adaptive(AutoCfg),
}

/// What a miniature's hit is worth to the controller of [`EvLfuHistAuto`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoCredit {
    /// Every hit counts 1: the individual hit rate (`-auto` alone).
    Hits,
    /// A hit counts only if every other key of its request hit in the main cache (`-perfect`):
    /// the perfect hits the split would make with the rest of the request as it is.
    Perfect,
    /// A hit counts `2^-m`, `m` the request's other keys that missed in the main cache
    /// (`-half`): between the two, less noisy than `Perfect`.
    Half,
}

/// Largest sampling rate 1/R of the miniatures (the default; `-rN` sets another).
pub const AUTO_RATE_MAX: u32 = 64;

/// How [`EvLfuHistAuto`] chooses its split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoCfg {
    /// What a miniature's hit is worth.
    pub credit: AutoCredit,
    /// Choose among all nine splits of 0–8 ways ([`AUTO_WAYS_FINE`], `-fine`) rather than
    /// [`AUTO_WAYS`].
    pub fine: bool,
    /// Largest sampling rate R (1–64; `-rN`): smaller R, larger miniatures.
    pub rate_max: u32,
    /// Admit every miss while the history has 0 ways (`-open`): with nothing remembered the
    /// admission test only compares a newcomer's one access with the victim's count, so the
    /// form becomes LFU (group-weighted counts) instead of rejecting newcomers LFU would cache.
    pub open: bool,
    /// Start with no history and move only on evidence (`-steady`): the counters keep 7/8 of their value at every choice
    /// instead of 1/2 (about eight periods of memory instead of two), and the split changes
    /// only to one whose credit is above the current split's by more than [`STEADY_MARGIN`]
    /// (ties and noise keep it where it is: a move costs rows or remembered values).
    pub steady: bool,
}

/// How much more credit a split needs than the current one to be moved to under `-steady`
/// (a fraction: 1/1000; the miniatures' splits differ by 0.1–0.7 % where a move pays).
pub const STEADY_MARGIN: f64 = 1e-3;

impl AutoCfg {
    /// The controller `-c-auto` alone names: individual hits, five splits, R ≤ 64, admission
    /// test kept at 0 ways.
    pub const fn individual() -> Self {
        AutoCfg {
            credit: AutoCredit::Hits,
            fine: false,
            rate_max: AUTO_RATE_MAX,
            open: false,
            steady: false,
        }
    }
}

/// How the history is sized and whether the cache budget pays for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistSize {
    /// `pct` % of the budget's bytes hold the history in the form `form`; the rows get the rest.
    Charged { pct: u32, form: HistForm },
    /// Uncharged: `per_item` exact entries per cached item, or (`sketch > 0`) a sketch of
    /// `sketch` columns per cached item.
    Free { per_item: u32, sketch: u32 },
}

impl HistSize {
    /// The rows left to cache and the history's form for a budget of `rows` rows of `row_bytes`
    /// bytes.
    pub fn split(&self, rows: usize, row_bytes: usize) -> HistPlan {
        let plan = HistPlan {
            rows,
            entries: 0,
            width: 0,
            buckets: 0,
            ways: 0,
        };
        match *self {
            HistSize::Free { sketch, .. } if sketch > 0 => HistPlan {
                width: rows.saturating_mul(sketch as usize).max(16),
                ..plan
            },
            HistSize::Free { per_item, .. } => HistPlan {
                entries: rows.saturating_mul(per_item as usize).max(HISTORY_MIN),
                ..plan
            },
            HistSize::Charged { pct, form } => {
                let share = (rows as u128 * row_bytes as u128 * u128::from(pct.min(100)) / 100)
                    .min(usize::MAX as u128) as usize;
                let (unit, plan) = match form {
                    HistForm::Sketch => {
                        let w = prev_pow2(share / COLUMN_BYTES).max(16);
                        (w * COLUMN_BYTES, HistPlan { width: w, ..plan })
                    }
                    HistForm::Exact => {
                        // A table of b buckets holds b · 7/8 entries.
                        let b = prev_pow2(share / ENTRY_BYTES).max(8);
                        let entries = b / 8 * 7;
                        (b * ENTRY_BYTES, HistPlan { entries, ..plan })
                    }
                    HistForm::Compact => {
                        // Any bucket count: the share is used to within one bucket.
                        let b = (share / (COMPACT_ENTRY_BYTES * BUCKET_SLOTS)).max(1);
                        let bytes = b * COMPACT_ENTRY_BYTES * BUCKET_SLOTS;
                        (bytes, HistPlan { buckets: b, ..plan })
                    }
                    HistForm::Adaptive(_) => {
                        // Buckets for the largest share; the ways it starts at are charged.
                        let b = (share / (COMPACT_ENTRY_BYTES * BUCKET_SLOTS)).max(1);
                        let bytes = b * COMPACT_ENTRY_BYTES * START_WAYS;
                        let plan = HistPlan {
                            buckets: b,
                            ways: START_WAYS,
                            ..plan
                        };
                        (bytes, plan)
                    }
                };
                let charged = unit.div_ceil(row_bytes.max(1));
                HistPlan {
                    rows: rows.saturating_sub(charged),
                    ..plan
                }
            }
        }
    }
}

/// What [`HistSize::split`] gives a budget: the rows to cache and the history's size, in exact
/// entries, sketch columns or compact buckets (at most one of the three is not 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistPlan {
    /// Rows left to cache.
    pub rows: usize,
    /// Exact history entries.
    pub entries: usize,
    /// Sketch columns.
    pub width: usize,
    /// Compact history buckets (of eight 4-byte entries).
    pub buckets: usize,
    /// Slots kept per compact bucket when the history is sized by need (0 otherwise: all eight).
    pub ways: usize,
}

impl HistPlan {
    /// The policy this plan describes.
    fn build(&self, n: u32, group: bool, window: u32, lru: u32) -> EvLfuHist {
        let p = EvLfuHist::with_history(self.rows, n, group, window, self.entries);
        let p = if lru > 0 { p.windowed(lru) } else { p };
        if self.width > 0 {
            p.sketched(self.width)
        } else if self.buckets > 0 {
            p.compact(self.buckets)
        } else {
            p
        }
    }
}

/// What `ev-lfu-hist` is: remembered (group-weighted unless `group` is false) access values
/// with frequency admission, and how its history is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistSpec {
    /// Highest score (the number of tables, N).
    pub n: u32,
    /// Group-weighted access values (false: plain counts, `-flat`).
    pub group: bool,
    /// Multiples of the capacity between halvings of the remembered values; 0: never.
    pub window: u32,
    /// The history's form and whether the budget pays for it.
    pub size: HistSize,
    /// Percent of the rows in an LRU admission window (0: none).
    pub lru: u32,
}

impl HistSpec {
    /// The policy for a budget of `capacity` rows of `row_bytes` bytes each; a charged history
    /// takes its share of the bytes from the rows.
    pub fn build(&self, capacity: usize, row_bytes: usize) -> Box<dyn Policy> {
        let plan = self.size.split(capacity, row_bytes);
        if let HistSize::Charged {
            form: HistForm::Adaptive(cfg),
            ..
        } = self.size
        {
            return Box::new(EvLfuHistAuto::new(self, cfg, &plan, capacity, row_bytes));
        }
        let p = plan.build(self.n, self.group, self.window, self.lru);
        if matches!(
            self.size,
            HistSize::Charged {
                form: HistForm::Exact,
                ..
            }
        ) {
            Box::new(p.preallocated())
        } else {
            Box::new(p)
        }
    }
}

/// The policy's name as `attune bench embed --policies` parses it.
impl std::fmt::Display for HistSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ev-lfu-hist")?;
        if !self.group {
            f.write_str("-flat")?;
        }
        if self.window > 0 {
            write!(f, "-w{}", self.window)?;
        }
        if self.lru > 0 {
            write!(f, "-lru{}", self.lru)?;
        }
        match self.size {
            HistSize::Charged { pct, form } => {
                if pct != DEFAULT_SHARE_PCT {
                    write!(f, "-m{pct}")?;
                }
                match form {
                    HistForm::Exact => {}
                    HistForm::Sketch => f.write_str("-s")?,
                    HistForm::Compact => f.write_str("-c")?,
                    HistForm::Adaptive(cfg) => {
                        f.write_str("-c-auto")?;
                        match cfg.credit {
                            AutoCredit::Hits => {}
                            AutoCredit::Perfect => f.write_str("-perfect")?,
                            AutoCredit::Half => f.write_str("-half")?,
                        }
                        if cfg.fine {
                            f.write_str("-fine")?;
                        }
                        if cfg.rate_max != AUTO_RATE_MAX {
                            write!(f, "-r{}", cfg.rate_max)?;
                        }
                        if cfg.steady {
                            f.write_str("-steady")?;
                        }
                        if cfg.open {
                            f.write_str("-open")?;
                        }
                    }
                }
            }
            HistSize::Free { per_item, sketch } => {
                f.write_str("-free")?;
                if per_item as usize != HISTORY_PER_ITEM {
                    write!(f, "-h{per_item}")?;
                }
                if sketch > 0 {
                    write!(f, "-s{sketch}")?;
                }
            }
        }
        Ok(())
    }
}

fn prev_pow2(x: usize) -> usize {
    if x == 0 {
        0
    } else {
        1 << (usize::BITS - 1 - x.leading_zeros())
    }
}

/// See the module doc.
pub struct EvLfuHist {
    cap: usize,
    max_score: u32,
    group: bool,
    /// Accesses between halvings (0: never).
    window: u64,
    accesses: u64,
    clock: u64,
    cached: FreqOrder,
    /// Exact values of remembered keys that are not cached.
    history: Map<u64>,
    /// The admission window (`-lruP`): the most recent misses, admitted without a test, in LRU
    /// order (value 0, stamp = last use); their values (exact mode) in `recent_values`.
    recent: FreqOrder,
    recent_values: Map<u64>,
    recent_cap: usize,
    history_max: usize,
    sketch: Option<Sketch16>,
    /// The compact history (`-c`), in place of the exact map.
    compact: Option<FpTable>,
    /// Admit every miss while nothing can be remembered (see [`AutoCfg::open`]).
    open: bool,
    /// Misses served without being cached.
    pub rejected: u64,
    /// Halvings run.
    pub halvings: u64,
    /// Sweeps of a full exact history.
    pub sweeps: u64,
}

impl EvLfuHist {
    /// An empty policy of `cap` items over `max_score` tables with an uncharged exact history of
    /// 16 entries per item; `group` weighs accesses by aggHit + 1; `window` (in multiples of
    /// `cap` accesses, 0 = never) sets the halving.
    pub fn new(cap: usize, max_score: u32, group: bool, window: u32) -> Self {
        let entries = cap.saturating_mul(HISTORY_PER_ITEM).max(HISTORY_MIN);
        Self::with_history(cap, max_score, group, window, entries)
    }

    /// [`EvLfuHist::new`] with room for `entries` remembered uncached keys.
    pub fn with_history(
        cap: usize,
        max_score: u32,
        group: bool,
        window: u32,
        entries: usize,
    ) -> Self {
        EvLfuHist {
            cap,
            max_score,
            group,
            window: u64::from(window) * cap as u64,
            accesses: 0,
            clock: 0,
            cached: FreqOrder::default(),
            history: map(),
            recent: FreqOrder::default(),
            recent_values: map(),
            recent_cap: 0,
            history_max: entries,
            sketch: None,
            compact: None,
            open: false,
            rejected: 0,
            halvings: 0,
            sweeps: 0,
        }
    }

    /// Gives `pct` % of the rows to an LRU admission window in front of the frequency-ordered
    /// cache (W-TinyLFU's window): every miss enters it, and the key it pushes out faces the
    /// admission test instead of the miss itself.
    pub fn windowed(mut self, pct: u32) -> Self {
        self.recent_cap = (self.cap as u128 * u128::from(pct.min(100)) / 100) as usize;
        self.cap -= self.recent_cap;
        self
    }

    /// Allocates the exact history at its final size (so its bytes are what is charged).
    pub fn preallocated(mut self) -> Self {
        self.history.reserve(self.history_max.min(1 << 28));
        self
    }

    /// Keeps every key's value in a count-min sketch of `width` 16-bit counters per row instead
    /// of an exact map.
    pub fn sketched(mut self, width: usize) -> Self {
        self.history = map();
        self.history_max = 0;
        self.sketch = Some(Sketch16::new(width));
        self
    }

    /// Keeps uncached keys' values in a compact table of `buckets` buckets of eight 4-byte
    /// entries instead of an exact map.
    pub fn compact(mut self, buckets: usize) -> Self {
        self.history = map();
        self.compact = Some(FpTable::new(buckets));
        self.history_max = self.compact.as_ref().map_or(0, FpTable::entries);
        self
    }

    /// Admits every miss while the history remembers nothing (0 ways): see [`AutoCfg::open`].
    fn opened(mut self, open: bool) -> Self {
        self.open = open;
        self
    }

    /// Whether a miss must pass the admission test: always, unless the policy is `open` and its
    /// history has no room (then LFU's rule: the victim leaves).
    fn tests_admission(&self) -> bool {
        !(self.open && self.history_max == 0 && self.sketch.is_none())
    }

    /// Resizes a compact history to `ways` slots per bucket and the cache to `cap` rows (the
    /// lowest-valued rows leave, reported in `evicted` and remembered).
    fn resize(&mut self, ways: usize, cap: usize, evicted: &mut Vec<(u64, u32)>) {
        if let Some(t) = &mut self.compact {
            t.set_ways(ways);
            self.history_max = t.entries();
        }
        self.cap = cap;
        while self.cached.len() > self.cap {
            let Some((k, v)) = self.cached.pop_first() else {
                break;
            };
            evicted.push((k, self.capped(v)));
            self.remember(k, v);
        }
    }

    /// Bytes of the history (the exact map's allocation, the sketch's counters or the compact
    /// table's slots).
    pub fn history_bytes(&self) -> usize {
        if let Some(t) = &self.compact {
            return t.bytes();
        }
        match &self.sketch {
            Some(sk) => sk.bytes(),
            // A table holds 7/8 of its buckets.
            None => (self.history.capacity() * 8).div_ceil(7) * ENTRY_BYTES,
        }
    }

    fn weight(&self, agg: u32) -> u64 {
        if self.group {
            u64::from(agg.min(self.max_score)) + 1
        } else {
            1
        }
    }

    /// Halves every value (cached keys re-ordered), dropping remembered zeros.
    fn halve(&mut self) {
        self.halvings += 1;
        if let Some(sk) = &mut self.sketch {
            sk.halve();
            let keys: Vec<u64> = self.cached.keys().collect();
            for k in keys {
                let v = sk.estimate(k).max(1);
                let stamp = self.clock;
                self.cached.set(k, v, stamp);
            }
            return;
        }
        if let Some(t) = &mut self.compact {
            t.halve();
        }
        self.history.retain(|_, v| {
            *v /= 2;
            *v > 0
        });
        for v in self.recent_values.values_mut() {
            *v = (*v / 2).max(1);
        }
        let keys: Vec<(u64, u64)> = self
            .cached
            .keys()
            .filter_map(|k| self.cached.value(k).map(|v| (k, v)))
            .collect();
        for (k, v) in keys {
            let stamp = self.clock;
            self.cached.set(k, (v / 2).max(1), stamp);
        }
    }

    /// Makes room in a full exact history: drops every entry at or below the smallest value
    /// threshold that frees a quarter of the entries (all of them if none does below 64).
    fn sweep(&mut self) {
        self.sweeps += 1;
        let mut counts = [0usize; 65];
        for &v in self.history.values() {
            counts[v.min(64) as usize] += 1;
        }
        let want = self.history.len().div_ceil(4);
        let mut freed = 0;
        let mut t = 64;
        for (v, &c) in counts.iter().enumerate() {
            freed += c;
            if freed >= want {
                t = v as u64;
                break;
            }
        }
        self.history.retain(|_, v| *v > t);
    }

    /// Remembers an uncached key's value (exact history only).
    fn remember(&mut self, key: u64, v: u64) {
        if self.sketch.is_some() || self.history_max == 0 {
            return;
        }
        if let Some(t) = &mut self.compact {
            t.put(key, v);
            return;
        }
        if self.history.len() >= self.history_max {
            self.sweep();
        }
        if self.history.len() < self.history_max {
            self.history.insert(key, v);
        }
    }

    /// Counts one access (and runs a due halving).
    fn tick(&mut self) {
        self.accesses += 1;
        if self.window > 0 && self.accesses.is_multiple_of(self.window) {
            self.halve();
        }
    }

    fn capped(&self, v: u64) -> u32 {
        v.min(u64::from(self.max_score)) as u32
    }
}

impl EvLfuHist {
    /// Offers `key` (value `v`, not resident) to the frequency-ordered cache: it enters if there
    /// is room or its value is above the victim's, which then leaves; otherwise it is
    /// remembered. `resident`: the key was in the window (so its leaving is an eviction).
    fn offer(&mut self, key: u64, v: u64, resident: bool, evicted: &mut Vec<(u64, u32)>) {
        if self.cached.len() >= self.cap {
            let victim = self.cached.first().and_then(|k| self.cached.value(k));
            let test = self.tests_admission();
            if self.cap == 0 || (test && victim.is_some_and(|vv| v <= vv)) {
                self.rejected += 1;
                if resident {
                    evicted.push((key, self.capped(v)));
                }
                self.remember(key, v);
                return;
            }
            if let Some((k, vv)) = self.cached.pop_first() {
                evicted.push((k, self.capped(vv)));
                self.remember(k, vv);
            }
        }
        self.cached.set(key, v.max(1), self.clock);
    }
}

impl Policy for EvLfuHist {
    fn contains(&self, key: u64) -> bool {
        self.cached.contains(key) || self.recent.contains(key)
    }
    fn on_hit(&mut self, key: u64, agg: u32) {
        self.tick();
        let w = self.weight(agg);
        self.clock += 1;
        if self.recent.contains(key) {
            let v = match &mut self.sketch {
                Some(sk) => sk.add(key, w),
                None => self.recent_values.get(&key).copied().unwrap_or(0) + w,
            };
            self.recent_values.insert(key, v);
            self.recent.set(key, 0, self.clock);
            return;
        }
        let v = match &mut self.sketch {
            Some(sk) => sk.add(key, w),
            None => self.cached.value(key).unwrap_or(0).saturating_add(w),
        };
        self.cached.set(key, v.max(1), self.clock);
    }
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap + self.recent_cap == 0 {
            return;
        }
        self.tick();
        let w = self.weight(agg);
        let v = match &mut self.sketch {
            Some(sk) => sk.add(key, w),
            None => match &mut self.compact {
                Some(t) => t.take(key),
                None => self.history.remove(&key),
            }
            .unwrap_or(0)
            .saturating_add(w),
        };
        self.clock += 1;
        if self.recent_cap == 0 {
            self.offer(key, v, false, evicted);
            return;
        }
        self.recent.set(key, 0, self.clock);
        self.recent_values.insert(key, v);
        if self.recent.len() > self.recent_cap {
            if let Some((k, _)) = self.recent.pop_first() {
                let kv = self.recent_values.remove(&k).unwrap_or(1);
                self.offer(k, kv, true, evicted);
            }
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        if self.recent.remove(key).is_some() {
            let v = self.recent_values.remove(&key).unwrap_or(1);
            self.remember(key, v);
            return true;
        }
        match self.cached.remove(key) {
            Some(v) => {
                self.remember(key, v);
                true
            }
            None => false,
        }
    }
    fn len(&self) -> usize {
        self.cached.len() + self.recent.len()
    }
    fn capacity(&self) -> usize {
        self.cap + self.recent_cap
    }
    fn score(&self, key: u64) -> u32 {
        match self.cached.value(key) {
            Some(v) => self.capped(v),
            None => self.recent_values.get(&key).map_or(0, |&v| self.capped(v)),
        }
    }
}

/// Slots per bucket an adaptive history starts at (half its largest share).
pub const START_WAYS: usize = 4;
/// The splits an adaptive history chooses from, in slots per bucket (eighths of its largest
/// share).
pub const AUTO_WAYS: [usize; 5] = [0, 1, 2, 4, 8];
/// The splits of `-fine`: every number of slots per bucket.
pub const AUTO_WAYS_FINE: [usize; 9] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
/// Main-cache accesses between two choices of the split.
pub const AUTO_PERIOD: u64 = 1 << 18;
/// Rows a miniature cache aims at (the sampling rate is the budget over this, 1 to the
/// configured largest rate).
const MINI_ROWS: usize = 512;

/// One miniature simulation of a split: the policy on a hash sample of the keys, scaled down.
struct Mini {
    ways: usize,
    policy: EvLfuHist,
    /// Credited hits since the last choice, halved at every choice (older periods weigh less).
    hits: f64,
}

/// `ev-lfu-hist-c-auto`: the compact history sized by need. The table's buckets are fixed for
/// the largest share (`-mP`) and it keeps 0, 1, 2, 4 or 8 of each bucket's slots
/// ([`AUTO_WAYS`]; every count from 0 to 8 with `-fine`); the rows get the rest of the budget.
/// Which split pays is measured, not guessed: one miniature simulation per split runs the same
/// policy on a hash sample of the keys (rate 1/R, R = budget / 512 rows, clamped to 1 and the
/// largest rate, 64 unless `-rN`) with R-times smaller rows and buckets (the
/// miniature-simulation method of Waldspurger et al., 2017), fed with the real requests'
/// aggHit. Every [`AUTO_PERIOD`] accesses the main cache moves to the split whose miniature had
/// the most credited hits ([`AutoCredit`]: every hit, or only hits whose request's other keys
/// hit in the main cache, or hits weighted by 2^-misses of the others; counters halved every
/// period; ties to the smaller history). Shrinking the history keeps each bucket's highest
/// values; growing it evicts the lowest-valued rows. The miniatures' keys are controller
/// metadata and are not charged (about (splits)/R of the cache's per-key metadata); `-c` with a
/// fixed `-mP` is the same policy with this switched off.
/// Thread-safety: owned by one thread (`Send`).
pub struct EvLfuHistAuto {
    main: EvLfuHist,
    cfg: AutoCfg,
    /// Tables per request (N).
    n: u32,
    budget_rows: usize,
    row_bytes: usize,
    buckets: usize,
    ways: usize,
    minis: Vec<Mini>,
    /// Sampling rate 1/`rate`.
    rate: u64,
    accesses: u64,
    scratch: Vec<(u64, u32)>,
    /// Evictions a resize made, reported with the next miss.
    pending: Vec<(u64, u32)>,
    /// Times the split changed.
    pub resizes: u64,
}

impl EvLfuHistAuto {
    /// Rows left for a history of `ways` slots per bucket.
    fn rows_for(budget_rows: usize, row_bytes: usize, buckets: usize, ways: usize) -> usize {
        let bytes = buckets * ways * COMPACT_ENTRY_BYTES;
        budget_rows.saturating_sub(bytes.div_ceil(row_bytes.max(1)))
    }

    /// The policy `spec` describes for `budget_rows` rows of `row_bytes` bytes, its controller
    /// `cfg`; `plan` is its split at [`START_WAYS`].
    fn new(
        spec: &HistSpec,
        cfg: AutoCfg,
        plan: &HistPlan,
        budget_rows: usize,
        row_bytes: usize,
    ) -> Self {
        let build = |rows: usize, buckets: usize, ways: usize| {
            let p = EvLfuHist::with_history(rows, spec.n, spec.group, spec.window, 0);
            let mut p = if spec.lru > 0 {
                p.windowed(spec.lru)
            } else {
                p
            };
            p = p.compact(buckets).opened(cfg.open);
            let cap = p.cap;
            p.resize(ways, cap, &mut Vec::new());
            p
        };
        let buckets = plan.buckets;
        // `-steady` starts with no history (the rows get its bytes) and grows it on evidence.
        let (main, ways) = if cfg.steady {
            let rows = Self::rows_for(budget_rows, row_bytes, buckets, 0);
            (build(rows, buckets, 0), 0)
        } else {
            (build(plan.rows, buckets, plan.ways), plan.ways)
        };
        let rate = (budget_rows / MINI_ROWS).clamp(1, cfg.rate_max.clamp(1, 64) as usize);
        let splits: &[usize] = if cfg.fine {
            &AUTO_WAYS_FINE
        } else {
            &AUTO_WAYS
        };
        let minis = splits
            .iter()
            .map(|&w| {
                let rows = Self::rows_for(budget_rows, row_bytes, buckets, w) / rate;
                Mini {
                    ways: w,
                    policy: build(rows, (buckets / rate).max(1), w),
                    hits: 0.0,
                }
            })
            .collect();
        EvLfuHistAuto {
            main,
            cfg,
            n: spec.n,
            budget_rows,
            row_bytes,
            buckets,
            ways,
            minis,
            rate: rate as u64,
            accesses: 0,
            scratch: Vec::new(),
            pending: Vec::new(),
            resizes: 0,
        }
    }

    /// Slots per bucket the history keeps now.
    pub fn ways(&self) -> usize {
        self.ways
    }

    /// Bytes of the history now (what is charged).
    pub fn history_bytes(&self) -> usize {
        self.main.history_bytes()
    }

    /// What a miniature's hit of a key is worth when its request had `agg` hits in the main
    /// cache, `hit` whether this key was one of them.
    fn credit(&self, agg: u32, hit: bool) -> f64 {
        let others_hit = agg.saturating_sub(u32::from(hit));
        let others_missed = self.n.saturating_sub(1).saturating_sub(others_hit);
        match self.cfg.credit {
            AutoCredit::Hits => 1.0,
            AutoCredit::Perfect => f64::from(u8::from(others_missed == 0)),
            AutoCredit::Half => 0.5f64.powi(others_missed.min(64) as i32),
        }
    }

    /// Feeds a sampled key to the miniatures and, at the end of a period, chooses the split.
    /// `hit`: the key hit in the main cache (its request's `agg` counts it).
    fn observe(&mut self, key: u64, agg: u32, hit: bool) {
        self.accesses += 1;
        if mix(key, SEEDS[1]).is_multiple_of(self.rate) {
            let credit = self.credit(agg, hit);
            for m in &mut self.minis {
                if m.policy.contains(key) {
                    m.policy.on_hit(key, agg);
                    m.hits += credit;
                } else {
                    self.scratch.clear();
                    m.policy.on_miss(key, agg, &mut self.scratch);
                }
            }
        }
        if self.accesses.is_multiple_of(AUTO_PERIOD) {
            let best = self.choose();
            let keep = if self.cfg.steady { 0.875 } else { 0.5 };
            for m in &mut self.minis {
                m.hits *= keep;
            }
            if best != self.ways {
                self.set_ways(best);
            }
        }
    }

    /// The split to move to at the end of a period: the miniature with the most credit (ties
    /// to the smaller history); under `-steady` only if it beats the current split's by more
    /// than [`STEADY_MARGIN`], otherwise the current split.
    fn choose(&self) -> usize {
        let best = self.minis.iter().fold(None::<&Mini>, |b, m| match b {
            Some(b) if b.hits >= m.hits => Some(b),
            _ => Some(m),
        });
        let Some(best) = best else {
            return self.ways;
        };
        if !self.cfg.steady {
            return best.ways;
        }
        let current = self
            .minis
            .iter()
            .find(|m| m.ways == self.ways)
            .map_or(0.0, |m| m.hits);
        if best.hits > current * (1.0 + STEADY_MARGIN) {
            best.ways
        } else {
            self.ways
        }
    }

    /// Moves the main cache to `ways` slots per bucket (and the rows that leaves).
    fn set_ways(&mut self, ways: usize) {
        self.resizes += 1;
        self.ways = ways;
        let rows = Self::rows_for(self.budget_rows, self.row_bytes, self.buckets, ways);
        let rows = rows.saturating_sub(self.main.recent_cap);
        self.main.resize(ways, rows, &mut self.pending);
    }
}

impl Policy for EvLfuHistAuto {
    fn contains(&self, key: u64) -> bool {
        self.main.contains(key)
    }
    fn on_hit(&mut self, key: u64, agg: u32) {
        self.main.on_hit(key, agg);
        self.observe(key, agg, true);
    }
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        evicted.append(&mut self.pending);
        self.main.on_miss(key, agg, evicted);
        self.observe(key, agg, false);
    }
    fn remove(&mut self, key: u64) -> bool {
        self.main.remove(key)
    }
    fn len(&self) -> usize {
        self.main.len()
    }
    fn capacity(&self) -> usize {
        self.main.capacity()
    }
    fn score(&self, key: u64) -> u32 {
        self.main.score(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key used often before it was evicted comes back ahead of keys seen once; a one-off key
    /// does not displace a key used more.
    #[test]
    fn remembered_counts_admit_and_keep_the_most_used() {
        let mut p = EvLfuHist::new(2, 4, false, 0);
        let mut ev = Vec::new();
        for _ in 0..3 {
            p.access(1, &mut ev);
        }
        p.access(2, &mut ev);
        assert!(p.contains(1) && p.contains(2));
        // 3 (value 1) does not displace 2 (value 1): ties keep the cached key.
        assert!(!p.access(3, &mut ev));
        assert!(!p.contains(3) && p.rejected == 1);
        // A second access gives 3 value 2 > 2's value 1: it enters, 2 leaves.
        assert!(!p.access(3, &mut ev));
        assert!(p.contains(3) && !p.contains(2));
        assert_eq!(ev, [(2, 1)]);
        // 2 remembers its count: two more accesses bring it back ahead of 3 (value 2).
        p.access(2, &mut ev);
        assert!(!p.contains(2), "value 2 does not beat 3's 2");
        p.access(2, &mut ev);
        assert!(p.contains(2) && p.contains(1) && !p.contains(3));
    }

    /// Group weights: an access from a request whose other keys hit counts aggHit + 1.
    #[test]
    fn group_weights_count_agg_plus_one() {
        let mut p = EvLfuHist::new(4, 3, true, 0);
        let mut ev = Vec::new();
        p.on_miss(7, 2, &mut ev);
        assert_eq!(p.cached.value(7), Some(3));
        p.on_hit(7, 3);
        assert_eq!(p.cached.value(7), Some(7));
        assert_eq!(p.score(7), 3, "scores are capped at N");
    }

    /// The sketched history admits and keeps as the exact one does on a small stream.
    #[test]
    fn sketched_history_admits_the_more_used() {
        let mut p = EvLfuHist::new(2, 4, false, 0).sketched(4);
        admits_the_more_used(&mut p);
    }

    /// Two rows: 1 used three times, 2 once; 3 is refused on its first access (one use does
    /// not beat 2's) and admitted over 2 on its second, while 1 stays.
    fn admits_the_more_used(p: &mut EvLfuHist) -> Vec<(u64, u32)> {
        let mut ev = Vec::new();
        for _ in 0..3 {
            p.access(1, &mut ev);
        }
        p.access(2, &mut ev);
        assert!(!p.access(3, &mut ev) && !p.contains(3));
        assert!(!p.access(3, &mut ev) && p.contains(3) && !p.contains(2));
        assert!(p.contains(1));
        ev
    }

    /// A charged history takes its bytes from the rows: rows + history fit the budget, and the
    /// share named is what it gets (a power of two at most the share).
    #[test]
    fn charged_history_fits_the_budget() {
        for form in [HistForm::Exact, HistForm::Sketch, HistForm::Compact] {
            for (rows, pct) in [(16_882usize, 10u32), (16_882, 5), (1000, 2), (5, 10)] {
                let plan = HistSize::Charged { pct, form }.split(rows, 144);
                let p = plan.build(26, true, 0, 0);
                let p = if form == HistForm::Exact {
                    p.preallocated()
                } else {
                    p
                };
                let (left, hist) = (plan.rows, p.history_bytes());
                assert!(left < rows, "{rows} {pct} {form:?}: something is charged");
                assert!(
                    left * 144 + hist <= rows * 144,
                    "{rows} {pct} {form:?}: {left} rows + {hist} B over the budget"
                );
                if rows > 1000 {
                    let share = rows * 144 * pct as usize / 100;
                    assert!(hist <= share && hist * 2 > share, "{hist} of {share}");
                    assert_eq!(left, rows - hist.div_ceil(144));
                    if form == HistForm::Compact {
                        // Any bucket count: the share to within one 32-byte bucket.
                        assert!(share - hist < 32, "{hist} of {share}");
                        assert_eq!(p.history_max, hist / COMPACT_ENTRY_BYTES);
                    }
                }
            }
        }
        let free = HistSize::Free {
            per_item: 16,
            sketch: 0,
        };
        let plan = |rows| {
            let p = free.split(rows, 144);
            (p.rows, p.entries, p.width, p.buckets)
        };
        assert_eq!(plan(10), (10, HISTORY_MIN, 0, 0));
        assert_eq!(plan(100), (100, 1600, 0, 0));
    }

    /// The exact history holds only keys that are not cached; a full one sweeps its lowest
    /// values and stays within its entries.
    #[test]
    fn exact_history_remembers_uncached_keys_within_its_room() {
        let mut p = EvLfuHist::with_history(2, 4, false, 0, 8);
        let mut ev = Vec::new();
        for _ in 0..5 {
            p.access(1, &mut ev);
            p.access(2, &mut ev);
        }
        assert!(p.history.is_empty(), "cached keys are not in the history");
        for k in 100..140u64 {
            p.access(k, &mut ev); // each rejected, remembered at value 1
            assert!(p.history.len() <= 8);
            assert!(!p.history.contains_key(&1) && !p.history.contains_key(&2));
        }
        assert!(p.sweeps > 0 && p.contains(1) && p.contains(2));
        // A key seen more often survives the sweeps of keys seen once.
        for _ in 0..3 {
            p.access(7, &mut ev);
        }
        for k in 200..240u64 {
            p.access(k, &mut ev);
        }
        assert_eq!(p.history.get(&7), Some(&3));
    }

    /// The compact history admits and keeps as the exact one does on a small stream, and holds
    /// only uncached keys.
    #[test]
    fn compact_history_admits_the_more_used() {
        let mut p = EvLfuHist::with_history(2, 4, false, 0, 0).compact(4);
        let mut ev = admits_the_more_used(&mut p);
        let t = p.compact.as_ref().map_or(0, |t| t.len);
        assert_eq!(t, 1, "only 2 (evicted) is remembered");
        // 2 remembers its count: two more accesses bring it back ahead of 3.
        p.access(2, &mut ev);
        assert!(!p.contains(2));
        p.access(2, &mut ev);
        assert!(p.contains(2) && !p.contains(3));
        assert_eq!(p.history_bytes(), 4 * 8 * COMPACT_ENTRY_BYTES);
    }

    /// A full compact bucket: a newcomer not below the lowest entry replaces it; one below it
    /// is forgotten and the lowest loses one, so pressure drains stale values.
    #[test]
    fn compact_bucket_replaces_the_lowest_or_ages_it() {
        let mut t = FpTable::new(1);
        for k in 0..8u64 {
            t.put(k, 5 + k);
        }
        assert_eq!(t.len, 8);
        t.put(100, 1); // below the lowest (key 0 at 5): forgotten, key 0 ages to 4
        assert_eq!((t.take(100), t.len), (None, 8));
        t.put(101, 4); // equal to the lowest (4): replaces key 0
        assert_eq!(t.take(0), None);
        assert_eq!(t.take(101), Some(4));
        assert_eq!(t.take(7), Some(12));
        assert_eq!(t.len, 6);
        t.put(7, 1_000_000); // saturates at 16 bits
        assert_eq!(t.take(7), Some(u64::from(u16::MAX)));
        t.put(1, 6);
        t.halve();
        assert_eq!(t.take(1), Some(3));
    }

    /// With a window, a miss is cached at once (in the window) and the key the window pushes
    /// out faces the test: a one-off key leaves as an eviction, a reused one displaces the
    /// frequency side's victim.
    #[test]
    fn window_admits_every_miss_and_tests_what_it_pushes_out() {
        let mut p = EvLfuHist::with_history(4, 4, false, 0, 64).windowed(25);
        assert_eq!((p.capacity(), p.recent_cap), (4, 1));
        let mut ev = Vec::new();
        for k in [1, 1, 2, 2, 3, 3] {
            p.access(k, &mut ev);
        }
        assert!(p.contains(1) && p.contains(2) && p.contains(3) && ev.is_empty());
        p.access(9, &mut ev); // 3 (value 2) leaves the window and fills the last main slot
        assert!(p.contains(9) && p.contains(3) && p.len() == 4);
        p.access(8, &mut ev); // 9 (value 1) leaves the window and loses to the victim (2)
        assert!(p.contains(8) && !p.contains(9));
        assert_eq!(ev, [(9, 1)]);
        p.access(9, &mut ev);
        p.access(9, &mut ev);
        p.access(9, &mut ev); // 9 at 4 in the window
        ev.clear();
        p.access(7, &mut ev); // 9 leaves the window and displaces a value-2 key
        assert!(p.contains(9) && p.contains(7));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].1, 2);
    }

    /// Halving every window lets a stale favourite go; the history stays bounded.
    #[test]
    fn halving_ages_values_and_bounds_the_history() {
        let mut p = EvLfuHist::new(1, 1, false, 4);
        let mut ev = Vec::new();
        for _ in 0..3 {
            p.access(1, &mut ev); // value 3, then a halving at access 4 below
        }
        p.access(2, &mut ev); // access 4: halving (1 → 1, 2 → 0 dropped), 2 rejected
        assert_eq!(p.halvings, 1);
        assert!(p.contains(1));
        let mut q = EvLfuHist::new(1, 1, false, 0);
        for k in 0..(HISTORY_MIN as u64 * 3) {
            q.access(k, &mut ev);
        }
        assert!(q.history.len() <= HISTORY_MIN);
    }

    /// Resizing by ways keeps each bucket's highest values, allocates exactly the ways kept,
    /// and at 0 ways remembers nothing; growing back makes room again.
    #[test]
    fn compact_ways_keep_the_highest_and_charge_the_bytes() {
        let mut t = FpTable::new(3);
        for k in 0..200u64 {
            t.put(k, 1 + k % 50);
        }
        assert_eq!(t.len, 24);
        let mut best: Vec<Vec<u32>> = t
            .slots
            .chunks(BUCKET_SLOTS)
            .map(|c| c.iter().map(|x| x & 0xFFFF).collect())
            .collect();
        for v in &mut best {
            v.sort_unstable_by(|a, b| b.cmp(a));
        }
        t.set_ways(2);
        assert_eq!((t.bytes(), t.slots.capacity(), t.len), (3 * 2 * 4, 6, 6));
        for (b, want) in best.iter().enumerate() {
            let kept: Vec<u32> = t.slots[b * 2..b * 2 + 2]
                .iter()
                .map(|x| x & 0xFFFF)
                .collect();
            assert_eq!(kept, want[..2], "bucket {b}");
        }
        t.set_ways(0);
        assert_eq!((t.bytes(), t.len), (0, 0));
        t.put(5, 9);
        assert_eq!(t.take(5), None);
        t.set_ways(8);
        t.put(5, 9);
        assert_eq!((t.take(5), t.bytes()), (Some(9), 3 * 8 * 4));
    }

    /// A history that helps nothing (the hot keys fit the cache) is sized down to nothing by
    /// the miniatures, and the rows get its bytes; rows and history always fit the budget.
    #[test]
    fn adaptive_history_gives_a_useless_history_back_to_the_rows() {
        let spec = HistSpec {
            n: 1,
            group: false,
            window: 0,
            size: HistSize::Charged {
                pct: 10,
                form: HistForm::Adaptive(AutoCfg::individual()),
            },
            lru: 0,
        };
        let plan = spec.size.split(2048, 144);
        assert_eq!(plan.ways, START_WAYS);
        let mut p = EvLfuHistAuto::new(&spec, AutoCfg::individual(), &plan, 2048, 144);
        assert_eq!(p.ways(), START_WAYS);
        assert!(p.capacity() * 144 + p.history_bytes() <= 2048 * 144);
        assert!(p.capacity() < 2048);
        let mut ev = Vec::new();
        for i in 0..AUTO_PERIOD {
            p.access(i % 500, &mut ev);
        }
        assert_eq!((p.ways(), p.history_bytes(), p.capacity()), (0, 0, 2048));
        assert_eq!(p.resizes, 1);
        assert!((0..500).all(|k| p.contains(k)));
        // The name: `-auto` needs the compact form, and round-trips.
        use super::super::PolicyKind;
        assert!(PolicyKind::parse("ev-lfu-hist-auto", 26).is_err());
        assert!(PolicyKind::parse("ev-lfu-hist-c-auto-free", 26).is_err());
        let spec = match PolicyKind::parse("ev-lfu-hist-c-m20-auto", 26) {
            Ok(PolicyKind::EvHist(h)) => h,
            _ => panic!("ev-lfu-hist-c-m20-auto does not parse"),
        };
        assert_eq!(spec.to_string(), "ev-lfu-hist-m20-c-auto");
        let name = "ev-lfu-hist-c-auto-half-fine-r16-open";
        let spec = match PolicyKind::parse(name, 26) {
            Ok(PolicyKind::EvHist(h)) => h,
            _ => panic!("{name} does not parse"),
        };
        assert_eq!(spec.to_string(), name);
        for bad in [
            "ev-lfu-hist-c-open",
            "ev-lfu-hist-c-auto-r0",
            "ev-lfu-hist-c-auto-r65",
        ] {
            assert!(PolicyKind::parse(bad, 26).is_err(), "{bad} parsed");
        }
    }

    /// At 0 ways nothing is remembered, so the admission test only compares a newcomer's one
    /// access with the victim's count: the default form serves the newcomer uncached, `-open`
    /// caches it in the place of the lowest-valued row (LFU's rule).
    #[test]
    fn open_form_admits_every_miss_when_nothing_is_remembered() {
        for open in [false, true] {
            let mut p = EvLfuHist::with_history(2, 1, false, 0, 0)
                .compact(4)
                .opened(open);
            p.resize(0, 2, &mut Vec::new());
            let mut ev = Vec::new();
            for k in [1, 1, 2, 2, 3] {
                p.access(k, &mut ev);
            }
            assert_eq!(p.contains(3), open, "open = {open}");
            assert_eq!(p.rejected, u64::from(!open));
            // With ways the test applies again, open or not.
            p.resize(8, 2, &mut Vec::new());
            let before = p.rejected;
            p.access(4, &mut ev);
            assert!(!p.contains(4));
            assert_eq!(p.rejected, before + 1);
        }
    }

    /// The controller's credit for a miniature's hit: 1 for every hit, 1 only when the rest of
    /// the request hit in the main cache (`-perfect`), or 2^-m for m other misses (`-half`).
    #[test]
    fn controller_credits_hits_by_the_rest_of_their_request() {
        let auto = |credit| {
            let cfg = AutoCfg {
                credit,
                ..AutoCfg::individual()
            };
            let spec = HistSpec {
                n: 4,
                group: true,
                window: 0,
                size: HistSize::Charged {
                    pct: 10,
                    form: HistForm::Adaptive(cfg),
                },
                lru: 0,
            };
            let plan = spec.size.split(2048, 144);
            EvLfuHistAuto::new(&spec, cfg, &plan, 2048, 144)
        };
        let hits = auto(AutoCredit::Hits);
        let perfect = auto(AutoCredit::Perfect);
        let half = auto(AutoCredit::Half);
        // (agg, this key hit in the main cache) -> credit, for N = 4.
        for (agg, hit, p, h) in [
            (4, true, 1.0, 1.0),   // a perfect request
            (3, false, 1.0, 1.0),  // the one miss of a request: the others all hit
            (3, true, 0.0, 0.5),   // one other key missed
            (1, false, 0.0, 0.25), // two others missed
            (0, false, 0.0, 0.125),
        ] {
            assert_eq!(hits.credit(agg, hit), 1.0);
            assert_eq!(perfect.credit(agg, hit), p, "agg {agg} hit {hit}");
            assert_eq!(half.credit(agg, hit), h, "agg {agg} hit {hit}");
        }
    }
}
