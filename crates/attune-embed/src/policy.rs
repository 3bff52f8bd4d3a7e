//! Replacement policies over grouped requests: the baselines (LRU, LFU, CLOCK, ARC) and EVCache's
//! group-score policy EV-LFU.
//!
//! A request is a group of keys (one per table). [`request`] runs the one protocol every policy
//! shares: the aggregate hit count `aggHit` is computed once, before any state changes; then
//! every hit is updated (`on_hit(key, aggHit)`), then every miss is inserted
//! (`on_miss(key, aggHit)`). Baselines ignore `aggHit`. A key's hit is decided at the start of
//! its request, which is also what the store serves (hit values are copied before any
//! insertion). [`Policy::access`] is the single-key interface used to cross-check the baselines
//! against other simulators on flattened key streams.
//!
//! Keys are `u64`; the store tags them with the table index ([`tag`]). Capacity is in items;
//! capacity 0 caches nothing. Thread-safety: a policy is owned by one thread (`Send`).

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use crate::error::{EmbedError, Result};
use crate::lists::Lists;

mod baseline;
mod cacheus;
mod clockpro;
mod ev;
mod evhist;
mod evloss;
mod evsum;
mod freq;
mod sketch;

pub use freq::FreqOrder;
pub use sketch::FreqSketch;

pub use baseline::{Car, LeCar, Lirs};
pub use cacheus::Cacheus;
pub use clockpro::ClockPro;
pub use ev::{EvArc, EvCar};
pub use evhist::{
    AutoCfg, AutoCredit, EvLfuHist, EvLfuHistAuto, HistForm, HistPlan, HistSize, HistSpec,
};
pub use evloss::EvLoss;
pub use evsum::EvLfuSum;

type Map<V> = HashMap<u64, V, foldhash::fast::FixedState>;

fn map<V>() -> Map<V> {
    HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0x5EED))
}

/// The key of row `key` of table `table` in a cache shared by all tables.
#[inline]
pub fn tag(table: usize, key: u64) -> u64 {
    ((table as u64) << 40) | key
}

/// Largest row index [`tag`] keeps apart from the table bits: 2^40 − 1.
pub const MAX_ROW: u64 = (1 << 40) - 1;

/// A replacement policy. See the module doc for the protocol.
pub trait Policy: Send {
    /// Whether `key` is cached (ghost entries are not).
    fn contains(&self, key: u64) -> bool;
    /// A hit on a cached key.
    fn on_hit(&mut self, key: u64, agg: u32);
    /// Inserts a key that is not cached, evicting as needed; evicted keys are appended to
    /// `evicted`. With capacity 0 nothing is inserted.
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>);
    /// Removes `key` if cached (moving it to another tier); returns whether it was.
    fn remove(&mut self, key: u64) -> bool;
    /// Items cached.
    fn len(&self) -> usize;
    /// Whether nothing is cached.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Capacity in items.
    fn capacity(&self) -> usize;
    /// The key's group score (0 for policies without one, and for keys not cached).
    fn score(&self, _key: u64) -> u32 {
        0
    }
    /// Single-key access: a hit updates, a miss inserts. Returns whether it hit.
    fn access(&mut self, key: u64, evicted: &mut Vec<(u64, u32)>) -> bool {
        if self.contains(key) {
            self.on_hit(key, 0);
            true
        } else {
            self.on_miss(key, 0, evicted);
            false
        }
    }
}

/// Runs one grouped request; `hits[i]` says whether `keys[i]` hit. Returns `aggHit`.
pub fn request(
    p: &mut dyn Policy,
    keys: &[u64],
    hits: &mut [bool],
    evicted: &mut Vec<(u64, u32)>,
) -> u32 {
    let mut agg = 0u32;
    for (k, h) in keys.iter().zip(hits.iter_mut()) {
        *h = p.contains(*k);
        agg += u32::from(*h);
    }
    for (k, _) in keys.iter().zip(hits.iter()).filter(|(_, h)| **h) {
        p.on_hit(*k, agg);
    }
    for (k, _) in keys.iter().zip(hits.iter()).filter(|(_, h)| !**h) {
        p.on_miss(*k, agg, evicted);
    }
    agg
}

/// The tie-break among keys of equal group score (EV-LFU, EV-ARC's F-list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieBreak {
    /// Evict the least recently *inserted* into its score (a hit that does not raise the score
    /// leaves the key in place). The EV-LFU prose's rule (l. 582); `-inserted` variants.
    Inserted,
    /// Evict the least recently *used* (every hit moves the key to the back of its score). The
    /// listing's `funcEvict` and EV-ARC's F-list (l. 651, 727); the default: it measures better.
    Used,
}

/// The score a missed key enters EV-LFU with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissScore {
    /// Its request's aggHit (the source, l. 520).
    Agg,
    /// Half its request's aggHit, rounded down (`-misshalf`).
    Half,
    /// Zero: only hits raise a score, so a key seen once sits with the least valued (`-miss0`).
    Zero,
}

/// Which policy, with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyKind {
    /// Least recently used.
    Lru,
    /// Least frequently used (in-cache frequency, ties to the least recently used).
    Lfu,
    /// CLOCK (second chance).
    Clock,
    /// ARC (Megiddo & Modha, FAST '03).
    Arc,
    /// CAR: CLOCK with adaptive replacement (Bansal & Modha, FAST '04).
    Car,
    /// LIRS (Jiang & Zhang, SIGMETRICS '02).
    Lirs,
    /// LeCaR (Vietri et al., HotStorage '18): LRU and LFU experts weighted by regret.
    LeCar,
    /// CLOCK-Pro (Jiang, Chen & Zhang, USENIX ATC '05).
    ClockPro,
    /// ClockLIRS: LIRS on a clock, CLOCK-Pro's ring with LIRS's fixed allocation.
    ClockLirs,
    /// Cacheus (Rodriguez et al., FAST '21): SR-LRU and CR-LFU experts, adaptive learning rate.
    Cacheus,
    /// EV-LFU: group scores in place of frequencies.
    EvLfu(EvConfig),
    /// EV-ARC: ARC whose frequency list is EV-LFU's score sets.
    EvArc(EvConfig),
    /// EV-CAR: CAR whose frequency clock holds group scores (scores capped at the value).
    EvCar(u32),
    /// EV-Loss: evicts the key whose loss costs the fewest expected perfect requests (N, aging).
    EvLoss(u32, bool),
    /// EV-CLOCK-Pro: CLOCK-Pro counting reuses only from requests with at most T other keys
    /// missing (N, T).
    EvClockPro(u32, u32),
    /// EV-LFU-hist: remembered access values with frequency admission ([`HistSpec`]).
    EvHist(HistSpec),
    /// A baseline with non-resident (ghost) entries — ARC, CAR, CLOCK-Pro, ClockLIRS, each
    /// keeping at most one ghost per resident row — whose ghosts are charged to the budget at
    /// the given bytes per entry: it caches `⌊c · row / (row + bytes)⌋` rows of a `c`-row
    /// budget, so rows and the most ghosts it can hold fit the budget (`-charged`: this
    /// implementation's [`GHOST_ENTRY_BYTES`]; `-gB`: B bytes).
    GhostsCharged(Box<PolicyKind>, u32),
}

/// Bytes one ghost entry costs in this crate's ARC, CAR and CLOCK-Pro: a list node (key,
/// links, list, policy word) and a bucket of the key → node map (key, node id, control byte) at
/// the map's 7/8 load.
pub const GHOST_ENTRY_BYTES: u32 =
    (crate::lists::NODE_BYTES + ((std::mem::size_of::<(u64, u32)>() + 1) * 8).div_ceil(7)) as u32;

/// EVCache parameters (EV-LFU, EV-ARC).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvConfig {
    /// Highest score (the number of tables, N).
    pub max_score: u32,
    /// Flush when perfect pages (score == max) reach this fraction of the capacity. Default 0.9
    /// for EV-LFU and 0.95 for EV-ARC (the listings); the prose's 0.2 is an option. `None` turns
    /// flushing off.
    pub flush_threshold: Option<f64>,
    /// Fraction of the perfect pages evicted by one flush. Default 0.1.
    pub flush_rate: f64,
    /// Tie-break within a score.
    pub tie_break: TieBreak,
    /// EV-LFU only: score decay. Every `capacity` insertions an epoch passes and a key's score
    /// counts halved per epoch since it was last set (`score >> age`), so keys inserted with a
    /// high aggHit and never hit again stop outranking live ones. Off by default (the source
    /// has no decay); the suffix `-decay` turns it on.
    pub decay: bool,
    /// EV-LFU only: the score a missed key is inserted with. The source's aggHit by default.
    pub miss_score: MissScore,
    /// EV-LFU only: TinyLFU admission. A missed key enters a full cache only if a frequency
    /// sketch ([`FreqSketch`]) has seen it more often than the key it would evict; otherwise it
    /// is served but not cached. Off by default (the source admits every miss); `-tinylfu`.
    pub admission: bool,
    /// EV-LFU only: accumulate `aggHit + 1` per hit instead of keeping the maximum
    /// ([`EvLfuSum`]; `-sum`). Off by default (the source's scores are max-based).
    pub accumulate: bool,
}

impl EvConfig {
    /// EV-LFU's defaults for `max_score` tables.
    pub fn new(max_score: u32) -> Self {
        EvConfig {
            max_score,
            flush_threshold: Some(0.9),
            flush_rate: 0.1,
            tie_break: TieBreak::Used,
            decay: false,
            miss_score: MissScore::Agg,
            admission: false,
            accumulate: false,
        }
    }

    /// EV-ARC's defaults (perfect-page capacity 0.95).
    pub fn arc(max_score: u32) -> Self {
        EvConfig {
            flush_threshold: Some(0.95),
            ..EvConfig::new(max_score)
        }
    }

    /// Applies a name suffix (`inserted`, `noflush`, `prose`).
    fn with(self, opt: &str) -> Option<Self> {
        Some(match opt {
            "inserted" => EvConfig {
                tie_break: TieBreak::Inserted,
                ..self
            },
            "used" => EvConfig {
                tie_break: TieBreak::Used,
                ..self
            },
            "noflush" => EvConfig {
                flush_threshold: None,
                ..self
            },
            "prose" => EvConfig {
                flush_threshold: Some(0.2),
                ..self
            },
            "decay" => EvConfig {
                decay: true,
                ..self
            },
            "miss0" => EvConfig {
                miss_score: MissScore::Zero,
                ..self
            },
            "misshalf" => EvConfig {
                miss_score: MissScore::Half,
                ..self
            },
            "tinylfu" => EvConfig {
                admission: true,
                ..self
            },
            "sum" => EvConfig {
                accumulate: true,
                ..self
            },
            _ => return None,
        })
    }

    fn suffix(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.tie_break == TieBreak::Inserted {
            f.write_str("-inserted")?;
        }
        match self.flush_threshold {
            None => f.write_str("-noflush")?,
            Some(t) if (t - 0.2).abs() < 1e-12 => f.write_str("-prose")?,
            _ => {}
        }
        if self.decay {
            f.write_str("-decay")?;
        }
        match self.miss_score {
            MissScore::Agg => {}
            MissScore::Half => f.write_str("-misshalf")?,
            MissScore::Zero => f.write_str("-miss0")?,
        }
        if self.admission {
            f.write_str("-tinylfu")?;
        }
        if self.accumulate {
            f.write_str("-sum")?;
        }
        Ok(())
    }
}

/// Bytes of one cached row that [`PolicyKind::build`] assumes: 36 fp32 values.
pub const DEFAULT_ROW_BYTES: usize = 36 * 4;

/// The baselines: the policies without group scores.
pub const BASELINES: &[&str] = &[
    "lru",
    "lfu",
    "clock",
    "arc",
    "car",
    "lirs",
    "lecar",
    "clockpro",
    "clocklirs",
    "cacheus",
];

/// Every policy name [`PolicyKind::parse`] accepts (EV-LFU and EV-ARC also take the suffixes
/// `-inserted`, `-noflush`, `-prose` in any order; EV-LFU also `-decay`, `-miss0`, `-misshalf`
/// `-tinylfu` and `-sum`; `ev-lfu-hist` and `-flat` also `-wN`, halving every N × capacity
/// accesses, `-mP`, P % of the budget charged to the history (default 10), `-s`, the history in
/// a sketch, `-c`, the history in a compact fingerprint table (`-c-auto`: sized by need, `-mP`
/// its largest share; its controller takes `-perfect` or `-half`, `-fine`, `-rN`, `-steady` and
/// `-open`, see [`AutoCfg`]), `-lruP`, P % of the rows in an
/// LRU admission window, and `-free`, an uncharged history of `-hN` entries (default 16) or
/// `-sN` sketch columns per cached item; `arc`, `car`, `clockpro` and `clocklirs` take
/// `-charged` or `-gB`, their ghosts charged to the budget).
pub const POLICY_NAMES: &str = "lru, lfu, clock, arc, car, lirs, lecar, clockpro, clocklirs, cacheus, ev-lfu, ev-lfu-inserted, \
ev-lfu-noflush, ev-lfu-prose, ev-lfu-decay, ev-lfu-miss0, ev-lfu-misshalf, ev-lfu-tinylfu, \
ev-lfu-miss0-tinylfu, ev-lfu-sum, ev-lfu-miss0-sum, ev-arc, ev-arc-inserted, ev-arc-noflush, ev-car, \
ev-loss, ev-loss-noaging, ev-clockpro, ev-clockpro-t1, ev-clockpro-t4, ev-lfu-hist, \
ev-lfu-hist-flat, ev-lfu-hist-s, ev-lfu-hist-c, ev-lfu-hist-c-auto, ev-lfu-hist-c-auto-half-fine-r16-open, \
ev-lfu-hist-c-auto-perfect-steady-open, ev-lfu-hist-m5, ev-lfu-hist-lru1, ev-lfu-hist-free, \
ev-lfu-hist-free-s4, clockpro-charged, clockpro-g8, arc-charged, car-charged, clocklirs-charged";

/// `arc`, `car`, `clockpro` or `clocklirs` followed by `-charged` or `-gB` (1 ≤ B ≤ 1024): the
/// base name and the bytes charged per ghost.
fn ghosts_charged(name: &str) -> Option<(&str, u32)> {
    let (base, opt) = name.rsplit_once('-')?;
    if !matches!(
        base,
        "arc" | "car" | "clockpro" | "clock-pro" | "clocklirs" | "clock-lirs"
    ) {
        return None;
    }
    match opt {
        "charged" => Some((base, GHOST_ENTRY_BYTES)),
        g => g
            .strip_prefix('g')
            .and_then(|b| b.parse::<u32>().ok())
            .filter(|b| (1..=1024).contains(b))
            .map(|b| (base, b)),
    }
}

impl PolicyKind {
    /// Parses a policy name for a cache over `tables` tables (EV policies cap scores at it).
    pub fn parse(name: &str, tables: usize) -> Result<Self> {
        let n = tables.min(u32::MAX as usize) as u32;
        let lower = name.to_ascii_lowercase();
        let unknown = || {
            EmbedError::InvalidArgument(format!("unknown policy `{name}`; valid: {POLICY_NAMES}"))
        };
        let ev = |base: EvConfig, rest: &str| -> Result<EvConfig> {
            rest.split('-')
                .filter(|s| !s.is_empty())
                .try_fold(base, |c, o| c.with(o))
                .ok_or_else(unknown)
        };
        Ok(match lower.as_str() {
            "lru" => PolicyKind::Lru,
            "lfu" => PolicyKind::Lfu,
            "clock" => PolicyKind::Clock,
            "arc" => PolicyKind::Arc,
            "car" => PolicyKind::Car,
            "lirs" => PolicyKind::Lirs,
            "lecar" => PolicyKind::LeCar,
            "clockpro" | "clock-pro" => PolicyKind::ClockPro,
            "clocklirs" | "clock-lirs" => PolicyKind::ClockLirs,
            "cacheus" => PolicyKind::Cacheus,
            "ev-car" | "evcar" => PolicyKind::EvCar(n),
            "ev-loss" => PolicyKind::EvLoss(n, true),
            "ev-loss-noaging" => PolicyKind::EvLoss(n, false),
            "ev-clockpro" => PolicyKind::EvClockPro(n, 2),
            "evlfu" => PolicyKind::EvLfu(EvConfig::new(n)),
            "evarc" => PolicyKind::EvArc(EvConfig::arc(n)),
            s => {
                if let Some((base, bytes)) = ghosts_charged(s) {
                    let base = Self::parse(base, tables)?;
                    PolicyKind::GhostsCharged(Box::new(base), bytes)
                } else if let Some(rest) = s.strip_prefix("ev-lfu-hist") {
                    let (mut group, mut window, mut free) = (true, 0u32, false);
                    let (mut pct, mut per_item, mut sketch) = (None, None, None);
                    let (mut lru, mut compact, mut auto) = (0u32, false, false);
                    // The controller's options (only with `-auto`).
                    let mut cfg = evhist::AutoCfg::individual();
                    let mut controller = false;
                    for o in rest.split('-').filter(|o| !o.is_empty()) {
                        if let Some(l) = o.strip_prefix("lru") {
                            match l.parse::<u32>() {
                                Ok(l) if (1..=90).contains(&l) => lru = l,
                                _ => return Err(unknown()),
                            }
                            continue;
                        }
                        let num = |p: char| o.strip_prefix(p).and_then(|w| w.parse::<u32>().ok());
                        let before = cfg;
                        match (o, num('r')) {
                            ("perfect", _) => cfg.credit = evhist::AutoCredit::Perfect,
                            ("half", _) => cfg.credit = evhist::AutoCredit::Half,
                            ("fine", _) => cfg.fine = true,
                            ("open", _) => cfg.open = true,
                            ("steady", _) => cfg.steady = true,
                            (_, Some(r)) if (1..=64).contains(&r) => cfg.rate_max = r,
                            _ => {}
                        }
                        if cfg != before || o == "perfect" || o == "half" {
                            controller = true;
                            continue;
                        }
                        match (o, num('w'), num('h'), num('s'), num('m')) {
                            ("flat", ..) => group = false,
                            ("free", ..) => free = true,
                            ("c", ..) => compact = true,
                            ("auto", ..) => auto = true,
                            ("s", ..) => sketch = Some(0),
                            (_, Some(w), ..) => window = w,
                            (_, _, Some(h), ..) if h > 0 => per_item = Some(h),
                            (_, _, _, Some(k), _) if k > 0 => sketch = Some(k),
                            (_, _, _, _, Some(m)) if (1..=90).contains(&m) => pct = Some(m),
                            _ => return Err(unknown()),
                        }
                    }
                    if controller && !auto {
                        return Err(unknown()); // the controller's options need -auto
                    }
                    let size = match (free, pct, per_item, sketch) {
                        (true, None, h, s) if s != Some(0) && !compact && !auto => HistSize::Free {
                            per_item: h.unwrap_or(evhist::HISTORY_PER_ITEM as u32),
                            sketch: s.unwrap_or(0),
                        },
                        (false, m, None, s) if s.is_none_or(|k| k == 0) => HistSize::Charged {
                            pct: m.unwrap_or(evhist::DEFAULT_SHARE_PCT),
                            form: match (s.is_some(), compact) {
                                (false, true) if auto => HistForm::Adaptive(cfg),
                                _ if auto => return Err(unknown()), // -auto needs -c
                                (false, false) => HistForm::Exact,
                                (true, false) => HistForm::Sketch,
                                (false, true) => HistForm::Compact,
                                (true, true) => return Err(unknown()),
                            },
                        },
                        _ => return Err(unknown()), // -hN, -sN only with -free; -mP, -s without
                    };
                    PolicyKind::EvHist(HistSpec {
                        n,
                        group,
                        window,
                        size,
                        lru,
                    })
                } else if let Some(rest) = s.strip_prefix("ev-lfu") {
                    let c = ev(EvConfig::new(n), rest)?;
                    if c.accumulate && (c.decay || c.admission) {
                        return Err(unknown()); // `-sum` has its own ordering
                    }
                    PolicyKind::EvLfu(c)
                } else if let Some(t) = s
                    .strip_prefix("ev-clockpro-t")
                    .and_then(|t| t.parse::<u32>().ok())
                {
                    PolicyKind::EvClockPro(n, t)
                } else if let Some(rest) = s.strip_prefix("ev-arc") {
                    let c = ev(EvConfig::arc(n), rest)?;
                    if c.decay || c.admission || c.accumulate || c.miss_score != MissScore::Agg {
                        return Err(unknown()); // EV-LFU-only options
                    }
                    PolicyKind::EvArc(c)
                } else {
                    return Err(unknown());
                }
            }
        })
    }

    /// A policy for a budget of `capacity` rows of [`DEFAULT_ROW_BYTES`] (an fp32 row at dim 36).
    pub fn build(&self, capacity: usize) -> Box<dyn Policy> {
        self.build_for(capacity, DEFAULT_ROW_BYTES)
    }

    /// A policy for a budget of `capacity` rows of `row_bytes` bytes each. Every policy caches
    /// `capacity` rows except `ev-lfu-hist`, whose charged history takes its share of the bytes
    /// from the rows.
    pub fn build_for(&self, capacity: usize, row_bytes: usize) -> Box<dyn Policy> {
        match self {
            PolicyKind::Lru => Box::new(Lru::new(capacity)),
            PolicyKind::Lfu => Box::new(Lfu::new(capacity)),
            PolicyKind::Clock => Box::new(Clock::new(capacity)),
            PolicyKind::Arc => Box::new(Arc::new(capacity)),
            PolicyKind::Car => Box::new(Car::new(capacity)),
            PolicyKind::Lirs => Box::new(Lirs::new(capacity)),
            PolicyKind::LeCar => Box::new(LeCar::new(capacity)),
            PolicyKind::ClockPro => Box::new(ClockPro::new(capacity)),
            PolicyKind::ClockLirs => Box::new(ClockPro::lirs(capacity)),
            PolicyKind::Cacheus => Box::new(Cacheus::new(capacity)),
            PolicyKind::EvLfu(c) if c.accumulate => Box::new(EvLfuSum::new(capacity, *c)),
            PolicyKind::EvLfu(c) => Box::new(EvLfu::new(capacity, *c)),
            PolicyKind::EvArc(c) => Box::new(EvArc::new(capacity, *c)),
            PolicyKind::EvCar(n) => Box::new(EvCar::new(capacity, *n)),
            PolicyKind::EvLoss(n, aging) => Box::new(EvLoss::new(capacity, *n, *aging)),
            PolicyKind::EvClockPro(n, t) => Box::new(ClockPro::grouped(capacity, *n, *t)),
            PolicyKind::EvHist(h) => h.build(capacity, row_bytes),
            PolicyKind::GhostsCharged(base, bytes) => {
                let row = row_bytes.max(1) as u128;
                let rows = capacity as u128 * row / (row + u128::from(*bytes));
                base.build_for(rows as usize, row_bytes)
            }
        }
    }

    /// Whether this baseline runs in the same memory as a policy charged for its history: it
    /// keeps no ghosts (LRU, LFU, CLOCK) or its ghosts are charged ([`PolicyKind::GhostsCharged`]).
    pub fn is_equal_memory_baseline(&self) -> bool {
        matches!(
            self,
            PolicyKind::Lru | PolicyKind::Lfu | PolicyKind::Clock | PolicyKind::GhostsCharged(..)
        )
    }

    /// Whether this is a baseline (no group scores).
    pub fn is_baseline(&self) -> bool {
        !matches!(
            self,
            PolicyKind::EvLfu(_)
                | PolicyKind::EvArc(_)
                | PolicyKind::EvCar(_)
                | PolicyKind::EvLoss(..)
                | PolicyKind::EvClockPro(..)
                | PolicyKind::EvHist(_)
        )
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyKind::Lru => f.write_str("lru"),
            PolicyKind::Lfu => f.write_str("lfu"),
            PolicyKind::Clock => f.write_str("clock"),
            PolicyKind::Arc => f.write_str("arc"),
            PolicyKind::Car => f.write_str("car"),
            PolicyKind::Lirs => f.write_str("lirs"),
            PolicyKind::LeCar => f.write_str("lecar"),
            PolicyKind::ClockPro => f.write_str("clockpro"),
            PolicyKind::ClockLirs => f.write_str("clocklirs"),
            PolicyKind::Cacheus => f.write_str("cacheus"),
            PolicyKind::EvCar(_) => f.write_str("ev-car"),
            PolicyKind::EvLoss(_, true) => f.write_str("ev-loss"),
            PolicyKind::EvLoss(_, false) => f.write_str("ev-loss-noaging"),
            PolicyKind::EvClockPro(_, 2) => f.write_str("ev-clockpro"),
            PolicyKind::EvClockPro(_, t) => write!(f, "ev-clockpro-t{t}"),
            PolicyKind::EvHist(h) => h.fmt(f),
            PolicyKind::GhostsCharged(base, bytes) if *bytes == GHOST_ENTRY_BYTES => {
                write!(f, "{base}-charged")
            }
            PolicyKind::GhostsCharged(base, bytes) => write!(f, "{base}-g{bytes}"),
            PolicyKind::EvLfu(c) => {
                f.write_str("ev-lfu")?;
                c.suffix(f)
            }
            PolicyKind::EvArc(c) => {
                f.write_str("ev-arc")?;
                let d = EvConfig::arc(c.max_score);
                // EV-ARC's default threshold is not a suffix.
                let c = if c.flush_threshold == d.flush_threshold {
                    EvConfig {
                        flush_threshold: Some(0.9),
                        ..*c
                    }
                } else {
                    *c
                };
                c.suffix(f)
            }
        }
    }
}

impl FromStr for TieBreak {
    type Err = EmbedError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "inserted" => Ok(TieBreak::Inserted),
            "used" => Ok(TieBreak::Used),
            _ => Err(EmbedError::InvalidArgument(format!(
                "unknown tie-break `{s}`; valid: inserted, used"
            ))),
        }
    }
}

/// LRU over one list.
pub struct Lru {
    cap: usize,
    lists: Lists,
    ids: Map<u32>,
}

impl Lru {
    /// An empty LRU of `cap` items.
    pub fn new(cap: usize) -> Self {
        Lru {
            cap,
            lists: Lists::new(1),
            ids: map(),
        }
    }
}

impl Policy for Lru {
    fn contains(&self, key: u64) -> bool {
        self.ids.contains_key(&key)
    }
    fn on_hit(&mut self, key: u64, _agg: u32) {
        if let Some(&id) = self.ids.get(&key) {
            self.lists.move_back(id, 0);
        }
    }
    fn on_miss(&mut self, key: u64, _agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 {
            return;
        }
        if self.ids.len() >= self.cap {
            if let Some(v) = self.lists.pop_front(0) {
                self.ids.remove(&v);
                evicted.push((v, 0));
            }
        }
        let id = self.lists.push_back(0, key);
        self.ids.insert(key, id);
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.ids.remove(&key) {
            Some(id) => {
                self.lists.remove(id);
                true
            }
            None => false,
        }
    }
    fn len(&self) -> usize {
        self.ids.len()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
}

/// LFU: evicts the lowest in-cache frequency; among equals, the least recently used.
pub struct Lfu {
    cap: usize,
    clock: u64,
    freq: FreqOrder,
}

impl Lfu {
    /// An empty LFU of `cap` items.
    pub fn new(cap: usize) -> Self {
        Lfu {
            cap,
            clock: 0,
            freq: FreqOrder::default(),
        }
    }
}

impl Policy for Lfu {
    fn contains(&self, key: u64) -> bool {
        self.freq.contains(key)
    }
    fn on_hit(&mut self, key: u64, _agg: u32) {
        self.clock += 1;
        self.freq.add(key, 1, self.clock);
    }
    fn on_miss(&mut self, key: u64, _agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 {
            return;
        }
        self.clock += 1;
        if self.freq.len() >= self.cap {
            if let Some((v, _)) = self.freq.pop_first() {
                evicted.push((v, 0));
            }
        }
        self.freq.set(key, 1, self.clock);
    }
    fn remove(&mut self, key: u64) -> bool {
        self.freq.remove(key).is_some()
    }
    fn len(&self) -> usize {
        self.freq.len()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
}

/// CLOCK: a ring of slots with a reference bit; the hand clears set bits and evicts the first
/// clear one.
pub struct Clock {
    cap: usize,
    keys: Vec<u64>,
    refbit: Vec<bool>,
    hand: usize,
    slot: Map<usize>,
}

impl Clock {
    /// An empty CLOCK of `cap` items.
    pub fn new(cap: usize) -> Self {
        Clock {
            cap,
            keys: Vec::with_capacity(cap.min(1 << 24)),
            refbit: Vec::with_capacity(cap.min(1 << 24)),
            hand: 0,
            slot: map(),
        }
    }
}

/// Marks a CLOCK slot freed by `remove`.
const FREE_SLOT: u64 = u64::MAX;

impl Policy for Clock {
    fn contains(&self, key: u64) -> bool {
        self.slot.contains_key(&key)
    }
    fn on_hit(&mut self, key: u64, _agg: u32) {
        if let Some(&s) = self.slot.get(&key) {
            self.refbit[s] = true;
        }
    }
    fn on_miss(&mut self, key: u64, _agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 {
            return;
        }
        if self.keys.len() < self.cap {
            self.slot.insert(key, self.keys.len());
            self.keys.push(key);
            self.refbit.push(false);
            return;
        }
        loop {
            let h = self.hand;
            self.hand = (self.hand + 1) % self.cap;
            if self.keys[h] == FREE_SLOT {
                self.keys[h] = key;
                self.refbit[h] = false;
                self.slot.insert(key, h);
                return;
            }
            if self.refbit[h] {
                self.refbit[h] = false;
            } else {
                let v = self.keys[h];
                self.slot.remove(&v);
                evicted.push((v, 0));
                self.keys[h] = key;
                self.slot.insert(key, h);
                return;
            }
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.slot.remove(&key) {
            Some(s) => {
                self.keys[s] = FREE_SLOT;
                self.refbit[s] = false;
                true
            }
            None => false,
        }
    }
    fn len(&self) -> usize {
        self.slot.len()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
}

const T1: usize = 0;
const T2: usize = 1;
const B1: usize = 2;
const B2: usize = 3;

/// ARC: recency list T1, frequency list T2, their ghosts B1 and B2, adaptive target `p`.
pub struct Arc {
    cap: usize,
    p: f64,
    lists: Lists,
    ids: Map<u32>,
}

impl Arc {
    /// An empty ARC of `cap` items.
    pub fn new(cap: usize) -> Self {
        Arc {
            cap,
            p: 0.0,
            lists: Lists::new(4),
            ids: map(),
        }
    }

    fn drop_front(&mut self, l: usize) {
        if let Some(v) = self.lists.pop_front(l) {
            self.ids.remove(&v);
        }
    }

    fn replace(&mut self, in_b2: bool, evicted: &mut Vec<(u64, u32)>) {
        let t1 = self.lists.len(T1);
        let from_t1 = t1 >= 1 && ((t1 as f64) > self.p || (in_b2 && (t1 as f64) == self.p.floor()));
        let (from, to) = if from_t1 || self.lists.len(T2) == 0 {
            (T1, B1)
        } else {
            (T2, B2)
        };
        if let Some(id) = self.lists.front(from) {
            evicted.push((self.lists.key(id), 0));
            self.lists.move_back(id, to);
        }
    }

    fn cached(&self) -> usize {
        self.lists.len(T1) + self.lists.len(T2)
    }
}

impl Policy for Arc {
    fn contains(&self, key: u64) -> bool {
        self.ids
            .get(&key)
            .is_some_and(|&id| self.lists.list_of(id) <= T2)
    }
    fn on_hit(&mut self, key: u64, _agg: u32) {
        if let Some(&id) = self.ids.get(&key) {
            if self.lists.list_of(id) <= T2 {
                self.lists.move_back(id, T2);
            }
        }
    }
    fn on_miss(&mut self, key: u64, _agg: u32, evicted: &mut Vec<(u64, u32)>) {
        let c = self.cap;
        if c == 0 {
            return;
        }
        if let Some(&id) = self.ids.get(&key) {
            let (b1, b2) = (self.lists.len(B1) as f64, self.lists.len(B2) as f64);
            let in_b2 = self.lists.list_of(id) == B2;
            if in_b2 {
                self.p = (self.p - (b1 / b2).max(1.0)).max(0.0);
            } else {
                self.p = (self.p + (b2 / b1).max(1.0)).min(c as f64);
            }
            if self.cached() >= c {
                self.replace(in_b2, evicted);
            }
            self.lists.move_back(id, T2);
            return;
        }
        let l1 = self.lists.len(T1) + self.lists.len(B1);
        let total = l1 + self.lists.len(T2) + self.lists.len(B2);
        if l1 >= c {
            if self.lists.len(T1) < c {
                self.drop_front(B1);
                self.replace(false, evicted);
            } else if let Some(v) = self.lists.pop_front(T1) {
                self.ids.remove(&v);
                evicted.push((v, 0));
            }
        } else if total >= c {
            if total >= 2 * c {
                self.drop_front(B2);
            }
            if self.cached() >= c {
                self.replace(false, evicted);
            }
        }
        let id = self.lists.push_back(T1, key);
        self.ids.insert(key, id);
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.ids.get(&key) {
            Some(&id) if self.lists.list_of(id) <= T2 => {
                self.lists.remove(id);
                self.ids.remove(&key);
                true
            }
            _ => false,
        }
    }
    fn len(&self) -> usize {
        self.cached()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
}

/// EV-LFU: one list per group score `0..=max`; evicts the front of the lowest non-empty score;
/// flushes the oldest perfect pages (score == max) when they fill `flush_threshold` of the cache.
///
/// Decisions where the source is silent or contradicts itself (`docs/evstore.md`):
/// * the perfect-page count is exact: it is the length of the max-score list, so it drops when a
///   perfect page is flushed or evicted (the listing increments it and never decrements);
/// * a flush *is* an eviction: it runs only when an insertion needs room, replaces the ordinary
///   eviction, and removes `max(1, ⌊rate · perfect⌋)` perfect pages from the cache;
/// * the tie-break is configurable ([`TieBreak`]), least recently inserted by default.
pub struct EvLfu {
    cap: usize,
    cfg: EvConfig,
    lists: Lists,
    ids: Map<u32>,
    flushes: u64,
    /// Decay: insertions so far and the current epoch (one per `cap` insertions). A key's
    /// `aux` word holds the epoch its score was last set in; lists stay ordered by it.
    insertions: u64,
    epoch: u32,
    /// TinyLFU admission: the frequency sketch, and the misses it kept out.
    sketch: Option<FreqSketch>,
    rejected: u64,
}

impl EvLfu {
    /// An empty EV-LFU of `cap` items.
    pub fn new(cap: usize, cfg: EvConfig) -> Self {
        let cfg = EvConfig {
            max_score: cfg.max_score.max(1),
            ..cfg
        };
        EvLfu {
            cap,
            cfg,
            lists: Lists::new(cfg.max_score as usize + 1),
            ids: map(),
            flushes: 0,
            insertions: 0,
            epoch: 0,
            sketch: cfg.admission.then(|| FreqSketch::new(cap)),
            rejected: 0,
        }
    }

    /// The score of `id` in list `s` now: `s`, halved per epoch since it was set with decay.
    #[inline]
    fn effective(&self, id: u32, s: usize) -> usize {
        if !self.cfg.decay {
            return s;
        }
        let age = self.epoch.wrapping_sub(self.lists.aux(id)).min(31);
        s >> age
    }

    /// Cached items at the maximum score.
    pub fn perfect_pages(&self) -> usize {
        self.lists.len(self.cfg.max_score as usize)
    }

    /// Flushes run so far.
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    /// Admissions refused by the TinyLFU sketch so far.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Whether the next eviction is a flush.
    fn flush_due(&self) -> bool {
        let perfect = self.lists.len(self.cfg.max_score as usize);
        self.cfg
            .flush_threshold
            .is_some_and(|t| perfect > 0 && perfect as f64 >= t * self.cap as f64)
    }

    /// The ordinary victim: the list holding it and its effective score.
    fn victim(&self) -> Option<(usize, usize)> {
        let max = self.cfg.max_score as usize;
        if self.cfg.decay {
            // Each list is ordered by the epoch its scores were set in, so its front holds its
            // lowest effective score: the victim is the lowest of the N + 1 fronts (ties to
            // the one whose score was set longest ago, then to the lower stored score).
            let mut best: Option<(usize, u32, usize)> = None;
            for s in 0..=max {
                if let Some(id) = self.lists.front(s) {
                    let e = self.effective(id, s);
                    let age = self.epoch.wrapping_sub(self.lists.aux(id));
                    if best.is_none_or(|(be, bage, _)| e < be || (e == be && age > bage)) {
                        best = Some((e, age, s));
                    }
                }
            }
            return best.map(|(e, _, s)| (s, e));
        }
        (0..=max).find(|&s| self.lists.len(s) > 0).map(|s| (s, s))
    }

    fn make_room(&mut self, evicted: &mut Vec<(u64, u32)>) {
        let max = self.cfg.max_score as usize;
        if self.flush_due() {
            let perfect = self.lists.len(max);
            let n = ((self.cfg.flush_rate * perfect as f64) as usize).max(1);
            for _ in 0..n {
                if let Some(v) = self.lists.pop_front(max) {
                    self.ids.remove(&v);
                    evicted.push((v, 0)); // a flushed page leaves with score 0
                }
            }
            self.flushes += 1;
            return;
        }
        if let Some((s, e)) = self.victim() {
            if let Some(v) = self.lists.pop_front(s) {
                self.ids.remove(&v);
                evicted.push((v, e as u32));
            }
        }
    }
}

impl Policy for EvLfu {
    fn contains(&self, key: u64) -> bool {
        self.ids.contains_key(&key)
    }
    fn on_hit(&mut self, key: u64, agg: u32) {
        if let Some(sk) = &mut self.sketch {
            sk.increment(key);
        }
        if let Some(&id) = self.ids.get(&key) {
            let s = agg.min(self.cfg.max_score) as usize;
            let list = self.lists.list_of(id);
            let cur = self.effective(id, list);
            if s > cur || (self.cfg.decay && cur < list) {
                self.lists.move_back(id, s.max(cur));
                self.lists.set_aux(id, self.epoch);
            } else if self.cfg.tie_break == TieBreak::Used {
                self.lists.move_back(id, cur);
                self.lists.set_aux(id, self.epoch);
            }
        }
    }
    fn on_miss(&mut self, key: u64, agg: u32, evicted: &mut Vec<(u64, u32)>) {
        if self.cap == 0 {
            return;
        }
        if let Some(sk) = &mut self.sketch {
            sk.increment(key);
        }
        if self.ids.len() >= self.cap {
            if let (Some(sk), false) = (&self.sketch, self.flush_due()) {
                // TinyLFU: the candidate must have been seen more often than the victim.
                let victim = self
                    .victim()
                    .and_then(|(s, _)| self.lists.front(s))
                    .map(|id| self.lists.key(id));
                if victim.is_some_and(|v| sk.estimate(key) <= sk.estimate(v)) {
                    self.rejected += 1;
                    return;
                }
            }
            self.make_room(evicted);
        }
        let agg = agg.min(self.cfg.max_score);
        let s = match self.cfg.miss_score {
            MissScore::Agg => agg,
            MissScore::Half => agg / 2,
            MissScore::Zero => 0,
        } as usize;
        let id = self.lists.push_back(s, key);
        self.lists.set_aux(id, self.epoch);
        self.ids.insert(key, id);
        self.insertions += 1;
        if self.cfg.decay && self.insertions.is_multiple_of(self.cap as u64) {
            self.epoch = self.epoch.wrapping_add(1);
        }
    }
    fn remove(&mut self, key: u64) -> bool {
        match self.ids.remove(&key) {
            Some(id) => {
                self.lists.remove(id);
                true
            }
            None => false,
        }
    }
    fn len(&self) -> usize {
        self.ids.len()
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn score(&self, key: u64) -> u32 {
        self.ids
            .get(&key)
            .map_or(0, |&id| self.effective(id, self.lists.list_of(id)) as u32)
    }
}

/// Test helper: how many of `keys`, accessed in order, hit.
#[cfg(test)]
pub(crate) fn test_hits(p: &mut dyn Policy, keys: impl IntoIterator<Item = u64>) -> usize {
    let mut ev = Vec::new();
    keys.into_iter().filter(|&k| p.access(k, &mut ev)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks(ev: &[(u64, u32)]) -> Vec<u64> {
        ev.iter().map(|e| e.0).collect()
    }

    fn run(p: &mut dyn Policy, keys: &[u64]) -> Vec<bool> {
        let mut ev = Vec::new();
        keys.iter().map(|&k| p.access(k, &mut ev)).collect()
    }

    #[test]
    fn lru_basics() {
        let mut p = Lru::new(2);
        assert_eq!(
            run(&mut p, &[1, 2, 1, 3, 2, 1]),
            [false, false, true, false, false, false]
        );
    }

    #[test]
    fn lfu_keeps_frequent() {
        let mut p = Lfu::new(2);
        assert_eq!(
            run(&mut p, &[1, 1, 2, 3, 1, 3]),
            [false, true, false, false, true, true]
        );
    }

    #[test]
    fn clock_second_chance() {
        let mut p = Clock::new(2);
        // 1 gets its bit set, so 3 evicts 2 (hand clears 1, moves to 2).
        assert_eq!(
            run(&mut p, &[1, 2, 1, 3, 1, 2]),
            [false, false, true, false, true, false]
        );
    }

    #[test]
    fn arc_is_scan_resistant() {
        let mut p = Arc::new(4);
        let mut keys = vec![1, 2, 1, 2];
        keys.extend(100..120);
        keys.extend([1, 2]);
        let hits = run(&mut p, &keys);
        assert!(
            hits[hits.len() - 2] && hits[hits.len() - 1],
            "frequent keys survive a scan"
        );
        assert!(p.len() <= 4);
    }

    /// A baseline whose ghosts are charged caches fewer rows: its rows and as many ghosts as it
    /// can hold (one per row) fit the budget; only ghost-keeping baselines take the suffix.
    #[test]
    fn charged_ghosts_take_their_bytes_from_the_rows() {
        assert_eq!(
            GHOST_ENTRY_BYTES, 44,
            "node 24 B + map bucket 17 B at 7/8 load"
        );
        for (name, bytes) in [
            ("clockpro-charged", 44usize),
            ("arc-g8", 8),
            ("car-charged", 44),
        ] {
            let kind = PolicyKind::parse(name, 26).unwrap();
            assert_eq!(kind.to_string(), name);
            assert!(kind.is_baseline() && kind.is_equal_memory_baseline());
            for cap in [1usize, 100, 16_882] {
                let rows = kind.build_for(cap, 144).capacity();
                assert!(rows * (144 + bytes) <= cap * 144, "{name} {cap}: {rows}");
                assert!(
                    (rows + 1) * (144 + bytes) > cap * 144,
                    "{name} {cap}: {rows}"
                );
            }
        }
        assert!(!PolicyKind::ClockPro.is_equal_memory_baseline());
        for bad in [
            "lru-charged",
            "clockpro-g0",
            "clockpro-g",
            "ev-lfu-charged",
            "arc-gx",
        ] {
            assert!(PolicyKind::parse(bad, 26).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_policy_respects_capacity_and_remove() {
        for name in POLICY_NAMES.split(", ") {
            let kind = PolicyKind::parse(name, 3).unwrap();
            assert_eq!(kind.to_string(), name);
            let mut p = kind.build(5);
            let mut ev = Vec::new();
            let mut hits = [false; 3];
            for i in 0..200u64 {
                let keys = [i % 7, 100 + i % 11, 200 + (i * 7) % 13];
                request(p.as_mut(), &keys, &mut hits, &mut ev);
                assert!(p.len() <= 5, "{name}");
            }
            let cached: Vec<u64> = (0..300).filter(|&k| p.contains(k)).collect();
            assert_eq!(cached.len(), p.len(), "{name}");
            assert!(p.remove(cached[0]));
            assert!(!p.contains(cached[0]));
            assert!(!p.remove(cached[0]));
            let mut z = kind.build(0);
            request(z.as_mut(), &[1, 2, 3], &mut hits, &mut ev);
            assert_eq!(z.len(), 0);
        }
        assert!(PolicyKind::parse("nope", 3).is_err());
    }

    #[test]
    fn ev_lfu_scores_are_max_of_agg_and_capped() {
        let mut p = EvLfu::new(10, EvConfig::new(3));
        let mut ev = Vec::new();
        let mut hits = [false; 3];
        request(&mut p, &[1, 2, 3], &mut hits, &mut ev);
        assert_eq!(p.score(1), 0); // inserted with aggHit 0
        request(&mut p, &[1, 2, 4], &mut hits, &mut ev);
        assert_eq!(hits, [true, true, false]);
        assert_eq!((p.score(1), p.score(2), p.score(4)), (2, 2, 2));
        assert_eq!(p.score(3), 0);
        request(&mut p, &[1, 3, 5], &mut hits, &mut ev);
        // aggHit 2 does not lower a score of 2 and raises 3's to 2.
        assert_eq!((p.score(1), p.score(3), p.score(5)), (2, 2, 2));
        request(&mut p, &[1, 2, 4], &mut hits, &mut ev);
        assert_eq!(p.score(1), 3);
        assert_eq!(p.perfect_pages(), 3);
    }

    #[test]
    fn ev_lfu_evicts_lowest_score_oldest_inserted() {
        let mut p = EvLfu::new(
            3,
            EvConfig {
                flush_threshold: None,
                ..EvConfig::new(2)
            },
        );
        let mut ev = Vec::new();
        let mut hits = [false; 2];
        request(&mut p, &[1, 2], &mut hits, &mut ev); // both score 0
        request(&mut p, &[1, 3], &mut hits, &mut ev); // 1 -> 1, 3 inserted at 1
        assert_eq!((p.score(1), p.score(2), p.score(3)), (1, 0, 1));
        request(&mut p, &[4, 5], &mut hits, &mut ev); // evicts 2 (score 0), then 4 (score 0)
        assert_eq!(ks(&ev), vec![2, 4]);
        assert!(p.contains(1) && p.contains(3) && p.contains(5));
    }

    #[test]
    fn ev_lfu_tie_break_inserted_vs_used() {
        for (tb, victim) in [(TieBreak::Inserted, 1), (TieBreak::Used, 2)] {
            let cfg = EvConfig {
                flush_threshold: None,
                tie_break: tb,
                ..EvConfig::new(1)
            };
            let mut p = EvLfu::new(2, cfg);
            let mut ev = Vec::new();
            let mut hits = [false; 1];
            request(&mut p, &[1], &mut hits, &mut ev); // 1 at score 0
            request(&mut p, &[2], &mut hits, &mut ev); // 2 at score 0
            p.on_hit(1, 0); // used again without a higher score
            request(&mut p, &[3], &mut hits, &mut ev);
            assert_eq!(ks(&ev), vec![victim], "{tb:?}");
        }
    }

    #[test]
    fn ev_lfu_flush_replaces_eviction_and_count_is_exact() {
        let mut p = EvLfu::new(10, EvConfig::new(1));
        let mut ev = Vec::new();
        let mut hits = [false; 1];
        // Ten keys, each hit once alone: aggHit 1 == max, all perfect.
        for k in 0..10 {
            request(&mut p, &[k], &mut hits, &mut ev);
            request(&mut p, &[k], &mut hits, &mut ev);
        }
        assert_eq!(p.perfect_pages(), 10);
        request(&mut p, &[99], &mut hits, &mut ev);
        // 10 >= 0.9 * 10: flush max(1, 0.1 * 10) = 1 oldest perfect page, key 0.
        assert_eq!(ks(&ev), vec![0]);
        assert_eq!(p.flushes(), 1);
        assert_eq!(p.perfect_pages(), 9);
        assert_eq!(p.len(), 10);
        // 9 perfect pages still reach 0.9 * 10: the next insertion flushes again (key 1).
        request(&mut p, &[100], &mut hits, &mut ev);
        assert_eq!(ks(&ev), vec![0, 1]);
        assert_eq!((p.flushes(), p.perfect_pages()), (2, 8));
        // Below the threshold a plain eviction takes the lowest score, oldest first (99).
        request(&mut p, &[101], &mut hits, &mut ev);
        assert_eq!(ks(&ev), vec![0, 1, 99]);
        assert_eq!(p.flushes(), 2);
    }

    #[test]
    fn ev_lfu_missed_keys_can_enter_below_agg() {
        for (opt, want) in [("", 2), ("-misshalf", 1), ("-miss0", 0)] {
            let kind = PolicyKind::parse(&format!("ev-lfu{opt}"), 3).unwrap();
            assert_eq!(kind.to_string(), format!("ev-lfu{opt}"));
            let mut p = kind.build(10);
            let mut ev = Vec::new();
            let mut hits = [false; 3];
            request(p.as_mut(), &[1, 2, 3], &mut hits, &mut ev);
            request(p.as_mut(), &[1, 2, 4], &mut hits, &mut ev);
            assert_eq!((p.score(1), p.score(4)), (2, want), "{opt}");
        }
        assert!(PolicyKind::parse("ev-arc-miss0", 3).is_err());
        assert!(PolicyKind::parse("ev-lfu-sum-tinylfu", 3).is_err());
    }

    #[test]
    fn ev_lfu_tinylfu_admits_only_keys_seen_more_than_the_victim() {
        let mut p = EvLfu::new(
            2,
            EvConfig {
                admission: true,
                ..EvConfig::new(1)
            },
        );
        let mut ev = Vec::new();
        p.on_miss(1, 0, &mut ev); // room: admitted without a check
        p.on_miss(2, 0, &mut ev);
        for _ in 0..3 {
            p.on_hit(2, 0); // 2 is the most recently used; 1 is the victim (seen once)
        }
        p.on_miss(3, 0, &mut ev); // seen once, no more than the victim: refused
        assert!(!p.contains(3) && ev.is_empty());
        assert_eq!(p.rejected(), 1);
        p.on_miss(3, 0, &mut ev); // seen twice now: admitted, evicting 1
        assert!(p.contains(3));
        assert_eq!(ks(&ev), [1]);
    }

    /// With decay, a key inserted with a high score and never hit again loses to a key that
    /// keeps being hit at a lower score once an epoch (one capacity of insertions) has passed.
    #[test]
    fn ev_lfu_decay_lets_stale_high_scores_go() {
        let cfg = EvConfig {
            decay: true,
            flush_threshold: None,
            ..EvConfig::new(4)
        };
        let mut p = EvLfu::new(4, cfg);
        let mut ev = Vec::new();
        p.on_miss(100, 4, &mut ev); // stale: score 4, never hit again
        p.on_miss(1, 2, &mut ev);
        p.on_miss(2, 2, &mut ev);
        p.on_miss(3, 2, &mut ev); // 4 insertions: epoch 1, 100 now counts 2, 1-3 count 1
        assert_eq!(p.score(100), 2);
        assert_eq!(p.score(1), 1);
        p.on_hit(1, 2); // refreshed to 2 in epoch 1
        p.on_hit(2, 2);
        p.on_hit(3, 2);
        assert_eq!(p.score(1), 2);
        p.on_miss(5, 3, &mut ev);
        assert_eq!(
            ks(&ev),
            [100],
            "the stale key goes (a tie goes to the score set longest ago)"
        );
        // Without decay the stale key would stay and 1 (lowest score, least recently used) go.
        let mut q = EvLfu::new(
            4,
            EvConfig {
                decay: false,
                ..cfg
            },
        );
        let mut ev = Vec::new();
        for (k, a) in [(100, 4), (1, 2), (2, 2), (3, 2)] {
            q.on_miss(k, a, &mut ev);
        }
        q.on_miss(5, 3, &mut ev);
        assert_eq!(ks(&ev), [1]);
        assert_eq!(
            PolicyKind::parse("ev-lfu-decay", 4).unwrap().to_string(),
            "ev-lfu-decay"
        );
    }

    /// 6 tables; a request picks a latent cluster (skewed), each table's key is the cluster's
    /// key with probability 3/4, otherwise a skewed draw from the table's own keys.
    fn pinned_stream(requests: usize) -> Vec<[u64; 6]> {
        let mut x = 0x1234_5678_9ABC_DEF1u64;
        let mut next = move || {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        };
        (0..requests)
            .map(|_| {
                let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
                let cluster = (u * u * u * 400.0) as u64;
                let mut r = [0u64; 6];
                for (t, k) in r.iter_mut().enumerate() {
                    let v = next();
                    *k = if v % 4 != 0 {
                        (cluster * (t as u64 + 3)) % (50 + 40 * t as u64)
                    } else {
                        let w = ((v >> 11) as f64 / (1u64 << 53) as f64).powi(2);
                        (w * (50.0 + 40.0 * t as f64) * 3.0) as u64
                    };
                }
                r
            })
            .collect()
    }

    /// Pins every policy's individual and perfect hits on one seeded, correlated grouped
    /// stream, so that sharing code between policies cannot change a result unnoticed.
    /// `PIN_PRINT=1` prints the current counts (to update `policy/pinned_hits.txt` after an
    /// intended change).
    #[test]
    fn every_policy_hits_as_pinned() {
        let reqs = pinned_stream(20_000);
        let mut got = Vec::new();
        for name in POLICY_NAMES.split(", ") {
            for cap in [40, 200] {
                let kind = PolicyKind::parse(name, 6).unwrap();
                let mut sim = crate::sim::GroupSim::new(&kind, cap);
                for r in &reqs {
                    sim.request(r);
                }
                got.push(format!(
                    "{name} {cap} {} {}",
                    sim.stats.hits, sim.stats.perfect
                ));
            }
        }
        let got = got.join("\n");
        if std::env::var_os("PIN_PRINT").is_some() {
            println!("{got}");
        }
        let want = include_str!("policy/pinned_hits.txt").trim();
        for (g, w) in got.lines().zip(want.lines()) {
            assert_eq!(g, w, "hit counts changed");
        }
        assert_eq!(got.lines().count(), want.lines().count());
    }
}
