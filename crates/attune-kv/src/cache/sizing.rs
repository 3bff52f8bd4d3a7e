//! Online sizing of the block cache against the compressed tier (Symbiosis; design and
//! numbers in docs/symbiosis.md). The engine-independent machinery (ghosts, stack distances,
//! Tracker, guard, reset) is `attune_cache`; this module wires it into the read path.
//!
//! * [`Tiers`] (`cache/tiers.rs`) sit on the hot path: the block source (`table/source.rs`)
//!   reads every data block through the uncompressed [`BlockCache`], then the second tier — the
//!   OS page cache (user/kernel layout: a buffered or mapped read whose page-cache residency is
//!   probed with `mincore`/`preadv2(RWF_NOWAIT)`) or the in-process compressed cache backed by
//!   `O_DIRECT` reads (user/user layout) — and reports each read to the tiers, which append one
//!   [`BlockAccess`] to a sharded, bounded log. Nothing in this module reads a block.
//! * [`Controller`] runs on its own background thread (`attune-cache`): it drains the log into
//!   `attune_cache::Symbiosis` (whose ghost simulation samples groups of blocks by key space),
//!   applies the M_a it answers with `BlockCache::set_capacity` (and the compressed cache gets the
//!   rest of the budget, shrinking first so the sum never exceeds it), returns freed heap to the
//!   OS (`malloc_trim`, glibc) so the kernel can use it for the page cache, measures the miss
//!   costs C_a and C_k (a probe at first use, then re-measured from live reads when they drift),
//!   and reports [`CacheTierStats`]. In the user layout it also reports the compressed cache's
//!   bytes and evictions to the controller once per batch (the round's exact footprint), and
//!   warm-starts each new round's ghosts from both caches' sampled contents, oldest first.
//!   It counts its own CPU time (`CacheTierStats::controller_cpu_ns`), and has a measurement
//!   mode, [`Controller::set_simulation_only`]: never resize, and run or hold rounds on demand
//!   (the overhead benchmark compares segments of reads with and without simulation).
//!
//! Reads made with `fill_cache = false` (compaction inputs, scans that ask for it) still go
//! through both tiers but are neither inserted nor recorded: they bypass the caches, so they are
//! not part of the workload the caches and their ghosts serve.
//!
//! Sampling groups are formed in byte space in the kernel layout: the block number handed to the
//! ghosts is `offset / block_size`, so a group of G = 32 covers 32 target-size blocks of the file
//! (more than 32 blocks when they are compressed), which keeps neighbours that share pages
//! together. In the user layout every block is its own sampling unit (its offset, G = 1).
//!
//! Thread safety: `Tiers` are shared by all readers (atomics and short shard locks); the
//! `Controller` state sits behind one mutex taken by the background thread and by `stats()`.
//! Invariants: in the user layout, block cache capacity + compressed cache capacity equals the
//! cache budget after every resize (and never exceeds it during one); the access log holds at
//! most `LOG_SHARDS × LOG_SHARD_ENTRIES_MAX` records (further accesses are counted as dropped).

use crate::cache::compressed::CompressedCacheStats;
use crate::cache::tiers::Tiers;
use crate::cache::BlockCache;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::options::{
    CacheLayout, CacheMissCosts, CacheSizing, Compression, Options, CACHE_MISS_COSTS_FALLBACK,
};
use attune_cache::{
    BlockAccess, GhostConfig, MissCosts, SecondTier, State, Symbiosis, SymbiosisConfig,
};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Smallest block cache (the paper's minimum M_a). Default 1 MiB: index-free data blocks of a
/// few hundred hot keys, and 64 KiB per shard of the 16-shard cache.
pub const APP_MIN_BYTES: u64 = 1 << 20;
/// Pause between pumps of the background thread. Default 5 ms: short against the 65 ms windows
/// of the Tracker at 1 M reads/s, long enough that the thread costs nothing when idle.
const PUMP_INTERVAL: Duration = Duration::from_millis(5);
/// Accesses between checks of the live miss costs. Default 2^18 (four Tracker windows).
const RECOST_ACCESSES: u64 = 1 << 18;
/// How often the kernel tier's room under a cgroup limit is re-measured
/// (`cache_room_measured`). Default 1 s: one read of /proc/self/status, and the process's own
/// memory moves with memtable fills and flushes, which take seconds.
const ROOM_INTERVAL: Duration = Duration::from_secs(1);
/// Timed reads of each kind a live cost estimate needs. Default 512 (the mean is then within a
/// few percent on this machine's latency spread).
const RECOST_SAMPLES_MIN: u64 = 512;
/// Margin by which the tables must fit the page cache's room at M_a = M for the start prior
/// ([`Controller::start_from_tables`]). Default 10 %: the tables' index and filter pages, the
/// manifest and the WAL share the page cache, and the process's own memory moves by a few MiB
/// between open and the first reads (the margin of `attune_cache`'s `M_a = M needs room` rule).
const START_FIT_MARGIN: f64 = 0.10;
/// Relative change of C_a or C_k that replaces the costs (drift). Default 25 %: well above the
/// noise of 512-sample means, so costs do not flap and restart rounds.
const RECOST_CHANGE: f64 = 0.25;
/// Probe file for the first calibration. Default 16 MiB: enough distinct blocks that the device
/// reads do not hit a device cache; written and removed in the database directory.
const PROBE_BYTES: u64 = 16 << 20;
/// Reads per probe measurement. Default 128 (the median is stable; the probe takes ~10 ms).
const PROBE_REPS: usize = 128;
/// Buckets per octave of the miss-latency histograms. Default 16: a median read off a bucket is
/// within 2^(1/16) − 1 ≈ 4.4 % of the true one, well under the 25 % drift threshold.
const LAT_BUCKETS_PER_OCTAVE: f64 = 16.0;
/// Buckets of a miss-latency histogram: 16 per octave up to 2^32 ns (4.3 s). Default 512.
const LAT_BUCKETS: usize = 512;

/// A log-scale histogram of miss latencies, read by its median. Medians, not means: on a
/// loaded machine a read that is preempted costs milliseconds, and a few of them raised the
/// mean time of a compressed-cache hit to 2–10× its median in the engine sweep (48 µs against
/// about 6 µs), which made decompression look expensive and the controller grow M_a.
#[derive(Clone)]
struct LatHist {
    counts: Vec<u64>,
    n: u64,
}

impl LatHist {
    fn new() -> Self {
        LatHist {
            counts: vec![0; LAT_BUCKETS],
            n: 0,
        }
    }
    fn add(&mut self, ns: u64) {
        let b = ((ns.max(1) as f64).log2() * LAT_BUCKETS_PER_OCTAVE) as usize;
        self.counts[b.min(LAT_BUCKETS - 1)] += 1;
        self.n += 1;
    }
    /// The median (geometric middle of its bucket), or None when empty.
    fn median(&self) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let half = self.n.div_ceil(2);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= half {
                return Some(2f64.powf((b as f64 + 0.5) / LAT_BUCKETS_PER_OCTAVE));
            }
        }
        None
    }
    fn clear(&mut self) {
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.n = 0;
    }
}

/// Blocks per sampling group in the user layout. Default 1: per-block sampling (see `build`).
const USER_GROUP_BLOCKS: u32 = 1;
/// Timeline entries kept for stats. Default 512 windows.
const TIMELINE_STATS_MAX: usize = 512;

/// Where the miss costs in use came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostsSource {
    /// `cache_miss_costs=C_A:C_K`.
    Fixed,
    /// Not measured (yet): the paper's figures.
    Fallback,
    /// Probe file at first use (`attune_cache::calibrate`).
    Probe,
    /// Means of this database's own timed reads per tier (drift correction).
    Live,
}

impl CostsSource {
    pub fn name(self) -> &'static str {
        match self {
            CostsSource::Fixed => "fixed",
            CostsSource::Fallback => "fallback",
            CostsSource::Probe => "probe",
            CostsSource::Live => "live",
        }
    }
}

/// One window of the controller's timeline.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TierWindow {
    /// Milliseconds from open to the moment the controller closed the window.
    pub ms: u64,
    /// Block reads recorded before the window ended.
    pub accesses: u64,
    /// M_a at the window's end.
    pub app_bytes: u64,
    pub h_a: f64,
    pub h_k: f64,
    /// L_e from the window's hit ratios and the miss costs (the Tracker's measure), ns.
    pub le_model_ns: f64,
    /// Measured mean time per block read (misses timed, hits counted as 0), ns; NaN if the
    /// window timed nothing.
    pub le_measured_ns: f64,
    /// Controller state name.
    pub state: &'static str,
}

/// One finished simulation round, for convergence measurements (`CacheTierStats::round_log`).
#[derive(Clone, Debug, PartialEq)]
pub struct RoundBrief {
    /// Block reads recorded between the round's start and its end.
    pub accesses: u64,
    /// Sampled block reads the ghosts saw, and those of the initial warm-up.
    pub samples: u64,
    pub warmup_samples: u64,
    /// Passes over the candidates (1: all nine side by side).
    pub passes: u32,
    /// Whether a measurement window ended early (ranking settled).
    pub stopped_early: bool,
    pub adopted: bool,
    /// The compressed tier's exact footprint the round used (it evicted nothing during the
    /// round), bytes; `None` when not known (it evicted, or the kernel layout).
    pub second_footprint_bytes: Option<u64>,
    /// M_a of the candidates predicted from that footprint (no evictions), bytes.
    pub fit_app_bytes: Vec<u64>,
    /// Sampled blocks the round was warm-started with from the live caches, if it was.
    pub warm_started: Option<u64>,
    /// M_a of candidates not adopted because the growing footprint would overflow them soon.
    pub overflow_app_bytes: Vec<u64>,
    /// The round's estimated uncompressed footprint, bytes, when known
    /// (`RoundReport::app_footprint_bytes`).
    pub app_footprint_bytes: Option<u64>,
    /// M_a of candidates without a second tier not adopted because that footprint does not
    /// fit them with a margin (`attune_cache::tracker::APP_FIT_MARGIN`).
    pub app_fit_excluded: Vec<u64>,
}

/// Rounds kept in `CacheTierStats::round_log`. Default 16: a dynamic run has a handful.
const ROUND_LOG_MAX: usize = 16;

/// What `DB::stats()` reports about the cache budget (`Stats::cache_tiers`).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CacheTierStats {
    pub layout: &'static str,
    /// `adaptive` or the static M_a in bytes.
    pub sizing: String,
    /// Cache budget M (memory_budget minus the memtables), bytes.
    pub budget_bytes: u64,
    /// M_a: block cache capacity now.
    pub app_bytes: u64,
    /// M_a the controller started at: the minimum, or M when the start prior found that the
    /// tables fit the page cache's room at M_a = M (`cache_start_prior`).
    pub start_app_bytes: u64,
    /// M − M_a: the compressed tier's share (the page cache's in the kernel layout).
    pub second_bytes: u64,
    /// Kernel layout under a cgroup: the page cache's memory beyond M − M_a that the model
    /// counts (the cgroup limit minus memory_budget); 0 otherwise.
    pub second_extra_bytes: u64,
    /// Compressed cache counters (user layout).
    pub compressed: Option<CompressedCacheStats>,
    /// Real reads since open by where they were served.
    pub app_hits: u64,
    pub second_hits: u64,
    pub device_reads: u64,
    /// Misses whose tier could not be probed (classified by latency in the Tracker).
    pub unknown_reads: u64,
    /// Nanoseconds spent in second-tier hits and in device reads since open (their means are
    /// the live C_a and C_a + C_k).
    pub second_ns: u64,
    pub device_ns: u64,
    /// Medians of those reads' times since open (what live re-costing uses), ns.
    pub second_hit_ns_median: Option<f64>,
    pub device_read_ns_median: Option<f64>,
    /// Observed H_a and H_k since open.
    pub h_a: f64,
    pub h_k: f64,
    /// Miss costs in use and their source.
    pub app_miss_ns: f64,
    pub second_miss_ns: f64,
    pub costs_source: &'static str,
    /// L_e of the last complete window from its hit ratios and the costs, ns.
    pub le_model_ns: Option<f64>,
    /// L_e measured since open: time spent in block misses per block read, ns.
    pub le_measured_ns: f64,
    /// L_e the last simulation round predicted for the M_a in use, ns.
    pub le_predicted_ns: Option<f64>,
    /// Controller state name (`adapting`, `settling`, `stable`, `paused`).
    pub state: &'static str,
    pub rounds: u32,
    pub adoptions: u32,
    pub reverts: u32,
    pub restarts: u32,
    /// Ghost metadata now (0 outside rounds), bytes.
    pub ghost_bytes: usize,
    /// Largest ghost metadata of any round, bytes.
    pub ghost_bytes_peak: usize,
    /// Thread CPU time the controller spent feeding logged accesses to Symbiosis (its pumps,
    /// on whichever thread ran them) since open, ns: where the simulation's cost lands.
    pub controller_cpu_ns: u64,
    /// Block reads recorded by the controller, and those dropped because its log was full.
    pub accesses_recorded: u64,
    pub accesses_dropped: u64,
    /// Miss ratio of an LRU block cache of each size (bytes, ratio), from the last round.
    pub mrc: Vec<(u64, f64)>,
    /// The last round's candidates: (M_a bytes, predicted H_a, predicted H_k, predicted L_e ns).
    pub last_round: Vec<(u64, f64, f64, f64)>,
    /// L_e measured when the last round ended (what the guard compared against), ns.
    pub last_round_measured_le_ns: Option<f64>,
    /// The last rounds (at most 16), oldest first.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub round_log: Vec<RoundBrief>,
    /// Recent windows, oldest first.
    pub timeline: Vec<TierWindow>,
}

fn state_name(s: State) -> &'static str {
    match s {
        State::Settling => "settling",
        State::Stable => "stable",
        State::Adapting => "adapting",
        State::Paused => "paused",
    }
}

struct Ctl {
    sym: Symbiosis,
    buf: Vec<BlockAccess>,
    costs_source: CostsSource,
    /// Probe calibration still to do (auto costs on a real file system).
    probe_dir: Option<PathBuf>,
    compression: Compression,
    /// Counter values at the last live-cost check: (second n, second ns, device n, device ns).
    recost_at: u64,
    /// Latencies of second-tier hits and device reads: since the last live-cost check, and
    /// since open (for stats).
    lat_second: LatHist,
    lat_device: LatHist,
    lat_second_all: LatHist,
    lat_device_all: LatHist,
    /// Miss nanoseconds and accesses of the window in progress.
    window_ns: (u64, u64),
    timeline: VecDeque<TierWindow>,
    /// Simulation-only mode ([`Controller::set_simulation_only`]): never resize, and while
    /// rounds are not held keep one running back to back.
    sim_only: bool,
    /// When the kernel tier's room was last measured.
    room_at: Option<Instant>,
}

/// The background half (see the module doc).
pub struct Controller {
    tiers: Arc<Tiers>,
    cache: Arc<BlockCache>,
    budget_bytes: u64,
    /// What the kernel tier has beyond M − M_a (see `GhostConfig::second_extra_bytes`), as last
    /// set.
    second_extra_bytes: AtomicU64,
    /// The cgroup limit whose room is measured (kernel layout, `cache_room_measured`), or None.
    room_limit: Option<u64>,
    /// Whether [`Controller::start_from_tables`] may start at M_a = M (adaptive, kernel layout
    /// on a real file system, `cache_start_prior`).
    start_prior: bool,
    /// M_a the controller started at, bytes (after the start prior, if it moved it).
    start_app_bytes: AtomicU64,
    adaptive: bool,
    sizing: CacheSizing,
    opened: Instant,
    ctl: Mutex<Ctl>,
    /// Thread CPU time spent in [`Controller::pump`] since open, ns.
    pump_cpu_ns: AtomicU64,
}

/// The kernel tier's room beyond M − M_a under a cgroup `limit` when the process holds `other`
/// bytes outside the block cache and the cache budget is `m`: `limit − other − m`, floored at 0.
fn room_extra(limit: u64, other: u64, m: u64) -> u64 {
    limit.saturating_sub(other).saturating_sub(m)
}

/// Whether tables of `table_bytes` fit the page cache's `room` at M_a = M with
/// [`START_FIT_MARGIN`] to spare (the start prior's test); an empty database never does.
fn tables_fit_room(table_bytes: u64, room: u64) -> bool {
    table_bytes > 0 && table_bytes as f64 * (1.0 + START_FIT_MARGIN) <= room as f64
}

/// Builds the block cache for `opts`: a plain one without a cache budget (`None` controller),
/// else one wired to [`Tiers`] plus its [`Controller`].
pub(crate) fn build(
    opts: &Options,
    env: &Arc<dyn Env>,
    dir: &Path,
) -> Result<(Arc<BlockCache>, Option<Arc<Controller>>)> {
    let Some(sizing) = opts.cache_sizing.filter(|_| opts.memory_budget > 0) else {
        return Ok((
            Arc::new(BlockCache::with_policy(
                opts.block_cache_size,
                opts.block_cache_policy,
            )),
            None,
        ));
    };
    let budget = opts.block_cache_size;
    let app_min = APP_MIN_BYTES.min(budget / 2);
    let tier = match opts.cache_layout {
        CacheLayout::Kernel => SecondTier::kernel_default(),
        CacheLayout::User => SecondTier::Blocks,
    };
    let mut ghost = GhostConfig::new(budget, app_min, tier);
    let mut room_limit = None;
    ghost.sample_inv_rate = opts.cache_sample_inv;
    if opts.cache_layout == CacheLayout::Kernel && env.is_os_filesystem() {
        // memory_budget bounds the engine's own memory; a cgroup limit above it leaves the rest
        // to the page cache, which is the kernel tier. Modelling the page cache as M − M_a
        // alone predicted 3-8x too many device reads in a 96 MiB cgroup with a 64 MiB budget
        // (docs/symbiosis.md). Without a cgroup limit the page cache's share of the machine is
        // unknown (other processes use it too), so the paper's model stays.
        let limit = crate::env::cgroup_memory_limit_bytes().unwrap_or(0);
        ghost.second_extra_bytes = limit.saturating_sub(opts.memory_budget);
        // That start counts the memtables as full; with `cache_room_measured` the controller
        // then measures what the process really holds (`Controller::measure_room`).
        room_limit = Some(limit).filter(|&l| l > 0 && opts.cache_room_measured);
    }
    let start_prior = opts.cache_start_prior
        && sizing == CacheSizing::Adaptive
        && opts.cache_layout == CacheLayout::Kernel
        && env.is_os_filesystem();
    if opts.cache_layout == CacheLayout::User {
        // The compressed cache holds whole blocks: no two blocks share a unit of it, so the
        // misalignment that needs groups of G blocks in the page-cache model does not exist, and
        // groups only add variance (a sampled group drags 31 neighbours with it). At M = 32 MiB
        // and R = 1/64, G = 32 leaves 4 sampled groups inside M; G = 1 leaves 128 blocks.
        ghost.group_blocks = USER_GROUP_BLOCKS;
    }
    let (costs, costs_source) = match opts.cache_miss_costs {
        CacheMissCosts::Fixed(a, k) => ((a, k), CostsSource::Fixed),
        CacheMissCosts::Auto => (CACHE_MISS_COSTS_FALLBACK, CostsSource::Fallback),
    };
    let mut cfg = SymbiosisConfig::new(
        ghost,
        MissCosts {
            app_miss_ns: costs.0,
            second_miss_ns: costs.1,
        },
    );
    if let CacheSizing::Static(b) = sizing {
        // A fixed split: track H_a, H_k and L_e, never simulate or resize.
        cfg.initial_app_bytes = Some(b.max(app_min));
        cfg.simulate = false;
        cfg.reset_policy = false;
    }
    // The probe writes a file beside the tables: not in a read-only open.
    let probe_dir = (opts.cache_miss_costs == CacheMissCosts::Auto
        && env.is_os_filesystem()
        && !opts.read_only)
        .then(|| dir.to_path_buf());
    let mut ctl = Controller::new(cfg, env.clone(), opts, sizing, costs_source, probe_dir)?;
    ctl.room_limit = room_limit;
    ctl.start_prior = start_prior;
    let ctl = Arc::new(ctl);
    Ok((ctl.cache.clone(), Some(ctl)))
}

impl Controller {
    /// A controller over a fresh block cache and second tier.
    pub fn new(
        cfg: SymbiosisConfig,
        env: Arc<dyn Env>,
        opts: &Options,
        sizing: CacheSizing,
        costs_source: CostsSource,
        probe_dir: Option<PathBuf>,
    ) -> Result<Controller> {
        let budget = cfg.ghost.memory_bytes;
        let second_extra_bytes = cfg.ghost.second_extra_bytes;
        let sym = Symbiosis::new(cfg)
            .map_err(|e| Error::InvalidArgument(format!("cache sizing: {e}")))?;
        let app = sym.app_target_bytes();
        let tiers = Arc::new(Tiers::new(
            opts.cache_layout,
            opts.block_size as u64,
            env,
            budget - app,
        ));
        let cache = Arc::new(BlockCache::with_tiers(
            app,
            opts.block_cache_policy,
            tiers.clone(),
        ));
        Ok(Controller {
            tiers,
            cache,
            budget_bytes: budget,
            second_extra_bytes: AtomicU64::new(second_extra_bytes),
            room_limit: None,
            start_prior: false,
            start_app_bytes: AtomicU64::new(app),
            adaptive: sizing == CacheSizing::Adaptive,
            sizing,
            opened: Instant::now(),
            ctl: Mutex::new(Ctl {
                sym,
                buf: Vec::new(),
                costs_source,
                probe_dir,
                compression: opts.compression,
                recost_at: RECOST_ACCESSES,
                lat_second: LatHist::new(),
                lat_device: LatHist::new(),
                lat_second_all: LatHist::new(),
                lat_device_all: LatHist::new(),
                window_ns: (0, 0),
                timeline: VecDeque::new(),
                sim_only: false,
                room_at: None,
            }),
            pump_cpu_ns: AtomicU64::new(0),
        })
    }

    /// The block cache this controller sizes.
    pub fn cache(&self) -> &Arc<BlockCache> {
        &self.cache
    }

    /// The start prior (kernel layout, `cache_start_prior`), called by `DB::open` once the
    /// tables are known and before any read: when the tables' bytes (`table_bytes`, what the
    /// page cache would hold of them) fit with [`START_FIT_MARGIN`] in the room the page cache
    /// has at M_a = M, every block-cache miss at any split is a page-cache hit once touched, so
    /// M_a = M has the fewest misses at the same cost per miss: it dominates every other split,
    /// and the controller starts there instead of at the minimum. The round at open still runs
    /// and may move it. Without a cgroup limit the room at M_a = M is 0 (the paper's model) and
    /// the start stays at the minimum, as it does for an empty database. Returns whether the
    /// start moved.
    ///
    /// Why: the round at open on a cold page cache needs 0.1–0.3 M block reads before it can
    /// adopt anything (its warm-up waits until first references die out, and a hotspot's cold
    /// part keeps bringing new blocks), and a block cache held at the minimum all that time
    /// lost 33–46 % of the throughput in the kernel-layout sweep's hot10 cells.
    pub fn start_from_tables(&self, table_bytes: u64) -> bool {
        if !self.start_prior || table_bytes == 0 {
            return false;
        }
        let room = match self.room_limit {
            Some(limit) => {
                // What the page cache has beyond M − M_a now: the process holds little yet
                // (empty memtables), which is what a read-only phase keeps.
                let Some(anon) = crate::env::process_anon_bytes() else {
                    return false;
                };
                let other = anon.saturating_sub(self.cache.stats().usage_bytes);
                let room = room_extra(limit, other, self.budget_bytes);
                // The round at open has seen no access: it is rebuilt with the measured room
                // rather than the budget-based one (which counts the memtables as full).
                self.ctl.lock().sym.set_second_extra_bytes(room);
                self.second_extra_bytes.store(room, Ordering::Relaxed);
                room
            }
            None => self.second_extra_bytes.load(Ordering::Relaxed),
        };
        if !tables_fit_room(table_bytes, room) {
            return false;
        }
        let moved = self.ctl.lock().sym.set_start_app_bytes(self.budget_bytes);
        if moved {
            self.apply(self.budget_bytes);
            self.start_app_bytes
                .store(self.budget_bytes, Ordering::Relaxed);
        }
        moved
    }

    /// The background loop: pump every [`PUMP_INTERVAL`] until `stop` is set.
    pub fn run(&self, stop: &AtomicBool) {
        while !stop.load(Ordering::Acquire) {
            self.maybe_probe_costs();
            self.pump();
            std::thread::sleep(PUMP_INTERVAL);
        }
    }

    /// Simulation-only mode, a measurement hook (the overhead benchmark,
    /// `attune-bench cache-kv overhead --mode alternating`): from this call on the controller never
    /// resizes (rounds are reported, not adopted; no reset policy; [`Controller::resize`]
    /// still sets the split by hand). With `rounds` true a simulation round runs at all times
    /// (one starts now if none runs, and another as soon as one ends); with `rounds` false
    /// the running round is held: accesses update the Tracker's windows exactly as before but
    /// skip the round, which resumes where it stopped at the next `true`. So segments of
    /// reads with and without simulation can be compared on one warm database whose only
    /// difference is the simulation work. Call [`Controller::pump`] first to settle which
    /// mode the accesses already logged are fed under.
    pub fn set_simulation_only(&self, rounds: bool) {
        let mut g = self.ctl.lock();
        g.sim_only = true;
        g.sym.set_adopt(false);
        g.sym.hold_round(!rounds);
        if rounds && g.sym.state() != State::Adapting {
            let _ = g.sym.request_round();
        }
    }

    /// Feeds every logged access to the controller and applies what it decides. Returns the
    /// number of accesses fed. Deterministic given the log's contents (tests call it directly).
    pub fn pump(&self) -> usize {
        let cpu_before = crate::env::thread_cpu_ns();
        let n = self.pump_inner();
        let cpu = crate::env::thread_cpu_ns().saturating_sub(cpu_before);
        self.pump_cpu_ns.fetch_add(cpu, Ordering::Relaxed);
        n
    }

    fn pump_inner(&self) -> usize {
        let mut g = self.ctl.lock();
        let ctl = &mut *g;
        self.tiers.log.drain_into(&mut ctl.buf);
        // After the drain: every drained access has been served (a block is inserted before
        // its access is logged), so this report covers the batch fed below.
        if let Some(cc) = &self.tiers.compressed {
            let st = cc.stats();
            ctl.sym.note_second_tier(st.usage_bytes, st.evictions);
        }
        let n = ctl.buf.len();
        let mut buf = std::mem::take(&mut ctl.buf);
        for a in buf.drain(..) {
            ctl.window_ns.0 += a.latency_ns.filter(|_| !a.app_hit).unwrap_or(0);
            ctl.window_ns.1 += 1;
            if let (false, Some(ns), Some(second)) = (a.app_hit, a.latency_ns, a.second_hit) {
                if second {
                    ctl.lat_second.add(ns);
                    ctl.lat_second_all.add(ns);
                } else {
                    ctl.lat_device.add(ns);
                    ctl.lat_device_all.add(ns);
                }
            }
            let windows_before = ctl.sym.windows();
            let decided = ctl.sym.record(&a);
            if ctl.sim_only && ctl.sym.state() != State::Adapting && !ctl.sym.round_held() {
                let _ = ctl.sym.request_round();
            }
            if ctl.sym.round_wants_warm_start() {
                self.warm_start(ctl);
            }
            if ctl.sym.windows() != windows_before {
                self.close_window(ctl);
            }
            if let (Some(m_a), true) = (decided, self.adaptive) {
                self.apply(m_a);
            }
        }
        ctl.buf = buf;
        self.maybe_recost(ctl);
        self.measure_room(ctl);
        n
    }

    /// Kernel layout under a cgroup limit (`cache_room_measured`): the page cache holds what the
    /// limit leaves of the process's own memory, so a candidate M_a gets
    /// `limit − (anonymous memory outside the block cache) − M_a`, i.e. a second-tier room of
    /// M − M_a plus `limit − other − M`. The budget-based start (`limit − memory_budget`)
    /// counts the memtables as full; after a load they are mostly empty and that memory is
    /// page cache too (in a 96 MiB cgroup with a 64 MiB budget, at M/D_u = 0.2, the minimum
    /// split's page cache served 97 % of its misses where the budget-based round predicted 86 %). Re-measured every
    /// [`ROOM_INTERVAL`]; takes effect at the next round.
    fn measure_room(&self, ctl: &mut Ctl) {
        let Some(limit) = self.room_limit else {
            return;
        };
        if ctl.room_at.is_some_and(|t| t.elapsed() < ROOM_INTERVAL) {
            return;
        }
        ctl.room_at = Some(Instant::now());
        let Some(anon) = crate::env::process_anon_bytes() else {
            return;
        };
        let other = anon.saturating_sub(self.cache.stats().usage_bytes);
        let extra = room_extra(limit, other, self.budget_bytes);
        ctl.sym.set_second_extra_bytes(extra);
        self.second_extra_bytes.store(extra, Ordering::Relaxed);
    }

    /// Warm-starts the round that has just started from the live caches: the sampled blocks
    /// of the compressed cache (user layout) and of the block cache, oldest first
    /// (`Symbiosis::warm_start_round`). The OS page cache cannot be listed: in the kernel
    /// layout only the application ghost is warm-started. A compressed-only block is sized in
    /// the application ghost at the block cache's mean charge (its uncompressed size is not
    /// known without decompressing it); block-cache blocks at their own charge.
    fn warm_start(&self, ctl: &mut Ctl) {
        let sym = &ctl.sym;
        let keep = |k: &(u64, u64)| sym.round_samples(k.0, self.tiers.sample_unit(k.1));
        let app_order = self.cache.recency_order(keep);
        let second_order = self
            .tiers
            .compressed
            .as_ref()
            .map_or_else(Vec::new, |cc| cc.recency_order(keep));
        let mean_app = if app_order.is_empty() {
            self.tiers.block_bytes
        } else {
            app_order.iter().map(|e| e.1 as u64).sum::<u64>() / app_order.len() as u64
        };
        let access =
            |(file, offset): (u64, u64), compressed: usize, uncompressed: u64| BlockAccess {
                file,
                block_no: self.tiers.sample_unit(offset),
                offset,
                compressed_len: u32::try_from(compressed).unwrap_or(u32::MAX),
                uncompressed_len: u32::try_from(uncompressed).unwrap_or(u32::MAX),
                app_hit: false,
                second_hit: None,
                latency_ns: None,
            };
        let second: Vec<BlockAccess> = second_order
            .into_iter()
            .map(|(k, c)| access(k, c, mean_app))
            .collect();
        let app: Vec<BlockAccess> = app_order
            .into_iter()
            .map(|(k, c)| access(k, 0, c as u64))
            .collect();
        ctl.sym.warm_start_round(&second, &app);
    }

    fn close_window(&self, ctl: &mut Ctl) {
        let (ns, n) = std::mem::take(&mut ctl.window_ns);
        let Some(w) = ctl.sym.timeline().last().copied() else {
            return;
        };
        ctl.timeline.push_back(TierWindow {
            ms: u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX),
            accesses: w.accesses,
            app_bytes: w.app_bytes,
            h_a: w.h_a,
            h_k: w.h_k,
            le_model_ns: w.le_ns,
            le_measured_ns: if n == 0 {
                f64::NAN
            } else {
                ns as f64 / n as f64
            },
            state: state_name(w.state),
        });
        if ctl.timeline.len() > TIMELINE_STATS_MAX {
            ctl.timeline.pop_front();
        }
    }

    /// Sets M_a by hand (a static split changed at run time; an adaptive controller may move it
    /// again at its next decision). The second tier gets the rest of the budget.
    pub fn resize(&self, app_bytes: u64) {
        self.apply(app_bytes);
    }

    /// The cache budget M, bytes.
    pub fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }

    /// Resizes both tiers to M_a = `app_bytes` (the second tier gets the rest of the budget).
    fn apply(&self, app_bytes: u64) {
        let app = app_bytes.min(self.budget_bytes);
        let before = self.cache.stats().capacity_bytes;
        match &self.tiers.compressed {
            Some(cc) if app > before => {
                cc.set_capacity(self.budget_bytes - app);
                self.cache.set_capacity(app);
            }
            Some(cc) => {
                self.cache.set_capacity(app);
                cc.set_capacity(self.budget_bytes - app);
            }
            None => self.cache.set_capacity(app),
        }
        if app < before {
            release_free_heap();
        }
    }

    fn maybe_probe_costs(&self) {
        let (dir, compression, block) = {
            let g = self.ctl.lock();
            let Some(dir) = g.probe_dir.clone() else {
                return;
            };
            if g.sym.stats().windows == 0 {
                // Calibrate once a first Tracker window (65 536 block reads) is complete, so a
                // short-lived open (`attune kv get`) never pays for the probe.
                return;
            }
            (dir, g.compression, self.tiers.block_bytes as usize)
        };
        let sample = synthetic_block(block);
        let packed = compress(compression, &sample);
        let stored = packed.len().max(512);
        let result =
            attune_cache::calibrate::calibrate(&dir, PROBE_BYTES, stored, PROBE_REPS, || {
                decompress(compression, &packed, sample.len())
            });
        let mut g = self.ctl.lock();
        g.probe_dir = None;
        if let Ok(c) = result {
            let costs = MissCosts {
                app_miss_ns: c.app_miss_ns,
                second_miss_ns: c.second_miss_ns,
            };
            if g.sym.set_miss_costs(costs).is_ok() && g.costs_source == CostsSource::Fallback {
                g.costs_source = CostsSource::Probe;
                // The round under way ranks candidates with the old costs: simulate again.
                let _ = g.sym.request_round();
            }
        }
        // A failed probe (full disk, read-only directory) keeps the fallback costs; live
        // re-costing below still corrects them once reads of both kinds were timed.
    }

    /// Replaces C_a / C_k by the means of live timed reads when they drifted (auto costs only).
    fn maybe_recost(&self, ctl: &mut Ctl) {
        if ctl.costs_source == CostsSource::Fixed {
            return;
        }
        let acc = ctl.sym.stats().accesses;
        if acc < ctl.recost_at {
            return;
        }
        ctl.recost_at = acc + RECOST_ACCESSES;
        if ctl.lat_second.n < RECOST_SAMPLES_MIN || ctl.lat_device.n < RECOST_SAMPLES_MIN {
            return; // keep accumulating
        }
        let (Some(second), Some(device)) = (ctl.lat_second.median(), ctl.lat_device.median())
        else {
            return;
        };
        ctl.lat_second.clear();
        ctl.lat_device.clear();
        let c_a = second;
        let c_k = device - c_a;
        if !(c_a > 0.0 && c_k > 0.0) {
            return;
        }
        let cur = ctl.sym.config().costs;
        let drift = |new: f64, old: f64| (new - old).abs() > RECOST_CHANGE * old;
        if drift(c_a, cur.app_miss_ns) || drift(c_k, cur.second_miss_ns) {
            let costs = MissCosts {
                app_miss_ns: c_a,
                second_miss_ns: c_k,
            };
            if ctl.sym.set_miss_costs(costs).is_ok() {
                ctl.costs_source = CostsSource::Live;
                // New costs move L_e and may move the best split: simulate again (a no-op while
                // a round runs; that round finishes with the new costs).
                let _ = ctl.sym.request_round();
            }
        }
    }

    /// A snapshot for `DB::stats()`. Feeds the logged accesses first, so that what the
    /// controller derives from them (latency medians, windows) covers every access the
    /// counters already count: the controller thread pumps on its own schedule, and a
    /// snapshot taken between its pumps reported second-tier hits with no hit latency (a
    /// clean-clone test run saw `second_hit_ns_median` None after thousands of hits).
    pub fn stats(&self) -> CacheTierStats {
        self.pump();
        let g = self.ctl.lock();
        let s = g.sym.stats();
        let c = &self.tiers.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (ah, sh, dr, ur) = (
            load(&c.app_hits),
            load(&c.second_hits),
            load(&c.device_reads),
            load(&c.unknown_reads),
        );
        let total = ah + sh + dr + ur;
        let miss_ns = load(&c.second_ns) + load(&c.device_ns) + load(&c.unknown_ns);
        let app_bytes = self.cache.stats().capacity_bytes;
        let costs = g.sym.config().costs;
        let rounds = g.sym.rounds();
        let le_predicted_ns = rounds.last().and_then(|r| {
            r.candidates
                .iter()
                .find(|(p, _)| p.app_bytes == app_bytes)
                .map(|(_, le)| *le)
        });
        let timeline: Vec<TierWindow> = g.timeline.iter().copied().collect();
        CacheTierStats {
            layout: match self.tiers.layout {
                CacheLayout::Kernel => "kernel",
                CacheLayout::User => "user",
            },
            sizing: self.sizing.describe(),
            budget_bytes: self.budget_bytes,
            app_bytes,
            start_app_bytes: self.start_app_bytes.load(Ordering::Relaxed),
            second_bytes: self.budget_bytes.saturating_sub(app_bytes),
            second_extra_bytes: self.second_extra_bytes.load(Ordering::Relaxed),
            compressed: self.tiers.compressed_stats(),
            app_hits: ah,
            second_hits: sh,
            device_reads: dr,
            unknown_reads: ur,
            second_ns: load(&c.second_ns),
            device_ns: load(&c.device_ns),
            second_hit_ns_median: g.lat_second_all.median(),
            device_read_ns_median: g.lat_device_all.median(),
            h_a: if total == 0 {
                0.0
            } else {
                ah as f64 / total as f64
            },
            h_k: if sh + dr == 0 {
                0.0
            } else {
                sh as f64 / (sh + dr) as f64
            },
            app_miss_ns: costs.app_miss_ns,
            second_miss_ns: costs.second_miss_ns,
            costs_source: g.costs_source.name(),
            le_model_ns: timeline.last().map(|w| w.le_model_ns),
            le_measured_ns: if total == 0 {
                0.0
            } else {
                miss_ns as f64 / total as f64
            },
            le_predicted_ns,
            state: state_name(s.state),
            rounds: s.rounds,
            adoptions: s.adoptions,
            reverts: s.reverts,
            restarts: s.restarts,
            ghost_bytes: s.ghost_bytes,
            ghost_bytes_peak: rounds.iter().map(|r| r.ghost_bytes_peak).max().unwrap_or(0),
            controller_cpu_ns: self.pump_cpu_ns.load(Ordering::Relaxed),
            accesses_recorded: s.accesses,
            accesses_dropped: self.tiers.log.dropped.load(Ordering::Relaxed),
            mrc: g.sym.mrc().to_vec(),
            last_round: rounds.last().map_or_else(Vec::new, |r| {
                r.candidates
                    .iter()
                    .map(|(p, le)| (p.app_bytes, p.h_a, p.h_k, *le))
                    .collect()
            }),
            last_round_measured_le_ns: rounds.last().map(|r| r.measured_le_ns),
            round_log: rounds[rounds.len().saturating_sub(ROUND_LOG_MAX)..]
                .iter()
                .map(|r| RoundBrief {
                    accesses: r.accesses,
                    samples: r.samples,
                    warmup_samples: r.warmup_samples,
                    passes: r.passes,
                    stopped_early: r.stopped_early,
                    adopted: r.adopted,
                    second_footprint_bytes: r.second_footprint_bytes,
                    fit_app_bytes: r
                        .candidates
                        .iter()
                        .filter(|c| c.0.second_fits)
                        .map(|c| c.0.app_bytes)
                        .collect(),
                    warm_started: r.warm_started,
                    overflow_app_bytes: r.overflow_app_bytes.clone(),
                    app_footprint_bytes: r.app_footprint_bytes,
                    app_fit_excluded: r.app_fit_excluded.clone(),
                })
                .collect(),
            timeline,
        }
    }
}

/// Returns freed heap pages to the OS so that the page cache can use them. The engine uses the
/// system allocator; glibc keeps freed memory in its arenas until `malloc_trim`. Other C
/// libraries (musl) return large frees by themselves and have nothing to purge.
fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free arena memory; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A block-sized buffer that compresses about 2:1 (half repeated text, half pseudo-random).
fn synthetic_block(len: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..len)
        .map(|i| {
            if (i / 64) % 2 == 0 {
                b"attune-cache-probe-"[i % 19]
            } else {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            }
        })
        .collect()
}

fn compress(c: Compression, data: &[u8]) -> Vec<u8> {
    match c {
        Compression::None => data.to_vec(),
        Compression::Lz4 => lz4_flex::block::compress(data),
        Compression::Zstd => {
            crate::util::zstd_ctx::compress(data, 3).unwrap_or_else(|_| data.to_vec())
        }
    }
}

fn decompress(c: Compression, packed: &[u8], len: usize) -> usize {
    let out = match c {
        Compression::None => Ok(packed.to_vec()),
        Compression::Lz4 => lz4_flex::block::decompress(packed, len).map_err(|_| ()),
        Compression::Zstd => crate::util::zstd_ctx::decompress(packed, len).map_err(|_| ()),
    };
    out.map_or(0, |v| std::hint::black_box(v).len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::MemEnv;
    use crate::DB;

    /// A user-layout database of `n` keys (about 2:1 compressible values) with adaptive sizing,
    /// R = 1 and short Tracker windows' worth of data.
    fn small_db(n: u64) -> DB {
        let mut o = Options::default();
        for (k, v) in [
            ("memory_budget", "8MiB"),
            ("enable_blob_files", "false"),
            ("cache_miss_costs", "3000:16000"),
            ("cache_sample_inv", "1"),
            ("wal_sync_interval_ms", "0"),
            ("cache_layout", "user"),
            ("cache_sizing", "adaptive"),
        ] {
            o.set(k, v).unwrap();
        }
        let env: Arc<dyn Env> = Arc::new(MemEnv::new());
        let db = DB::open_with_env(env, Path::new("/db"), o).unwrap();
        for i in 0..n {
            let mut v = format!("value-{i:08}-").repeat(40).into_bytes();
            v.truncate(400);
            db.put(format!("key{i:08}").as_bytes(), &v).unwrap();
        }
        db.compact_range(None, None).unwrap();
        db
    }

    fn read_keys(db: &DB, n: u64, reads: u64, salt: u64) {
        for r in 0..reads {
            let i = (r.wrapping_mul(7919) ^ salt) % n;
            assert!(db.get(format!("key{i:08}").as_bytes()).unwrap().is_some());
        }
    }

    #[test]
    fn simulation_only_runs_rounds_back_to_back_never_resizes_and_holds_between() {
        let n = 8000;
        let db = small_db(n);
        let c = db.cache_sizing().unwrap().clone();
        c.pump();
        c.set_simulation_only(false);
        c.resize(2 << 20);
        let before = c.stats();
        // Held: the Tracker counts the reads, no round finishes however long they run.
        read_keys(&db, n, 300_000, 1);
        c.pump();
        let held = c.stats();
        assert!(held.accesses_recorded > before.accesses_recorded + 250_000);
        assert_eq!(held.rounds, before.rounds, "a held round never finishes");
        assert_eq!(held.state, "adapting");
        // Running: rounds finish, each is followed by another, and none is adopted.
        c.set_simulation_only(true);
        read_keys(&db, n, 600_000, 2);
        c.pump();
        let ran = c.stats();
        println!("rounds held {} ran {}", held.rounds, ran.rounds);
        assert!(ran.rounds >= before.rounds + 2, "rounds {}", ran.rounds);
        assert_eq!(ran.state, "adapting", "a new round follows each");
        assert_eq!(ran.adoptions, 0);
        assert!(
            ran.round_log.iter().all(|r| !r.adopted),
            "{:?}",
            ran.round_log
        );
        assert_eq!(ran.app_bytes, 2 << 20, "the split set by hand stays");
        assert!(ran.controller_cpu_ns > 0);
        // Held again: the round keeps its state.
        c.set_simulation_only(false);
        read_keys(&db, n, 300_000, 3);
        c.pump();
        let again = c.stats();
        assert_eq!(again.rounds, ran.rounds);
        assert_eq!(again.app_bytes, 2 << 20);
    }

    #[test]
    fn latency_median_ignores_preempted_reads_that_dominate_the_mean() {
        // 97 % of second-tier hits take ~6 µs, 3 % were preempted for 1.5 ms: the mean is
        // 51 µs, the median stays within one bucket (4.4 %) of 6 µs.
        let mut h = LatHist::new();
        assert_eq!(h.median(), None);
        let mut sum = 0u64;
        for i in 0..10_000u64 {
            let ns = if i % 100 < 3 {
                1_500_000
            } else {
                5_900 + i % 200
            };
            sum += ns;
            h.add(ns);
        }
        let mean = sum as f64 / 10_000.0;
        let med = h.median().unwrap();
        assert!(mean > 40_000.0, "mean {mean}");
        assert!((med / 6_000.0 - 1.0).abs() < 0.05, "median {med}");
        h.clear();
        assert_eq!(h.median(), None);
        h.add(0);
        h.add(u64::MAX);
        assert!(h.median().is_some(), "extremes land in the end buckets");
    }

    /// The measured room: the limit less what the process holds outside the block cache, less
    /// M; floored at 0 when the process alone fills the limit.
    #[test]
    fn kernel_room_beyond_m_is_the_limit_less_other_memory_less_m() {
        let mib = 1u64 << 20;
        // 96 MiB cgroup, 14 MiB outside the block cache (empty memtables), M = 32 MiB: the
        // page cache gets 82 MiB − M_a, i.e. 50 MiB beyond M − M_a.
        assert_eq!(room_extra(96 * mib, 14 * mib, 32 * mib), 50 * mib);
        // Full memtables (32 MiB) plus 14 MiB: 18 MiB beyond.
        assert_eq!(room_extra(96 * mib, 46 * mib, 32 * mib), 18 * mib);
        assert_eq!(room_extra(96 * mib, 90 * mib, 32 * mib), 0);
    }

    /// The start prior: tables that fit the room at M_a = M with 10 % to spare start the block
    /// cache at M; larger tables, a room of 0 (no cgroup) and an empty database do not.
    #[test]
    fn start_prior_needs_the_tables_to_fit_the_room_with_a_margin() {
        let mib = 1u64 << 20;
        // M/D_u 0.6 in a 96 MiB cgroup: ~27 MiB of tables, ~50 MiB of room.
        assert!(tables_fit_room(27 * mib, 50 * mib));
        // M/D_u 0.2: ~78 MiB of tables do not fit.
        assert!(!tables_fit_room(78 * mib, 50 * mib));
        // Within the margin: 46 MiB × 1.1 > 50 MiB.
        assert!(!tables_fit_room(46 * mib, 50 * mib));
        assert!(tables_fit_room(45 * mib, 50 * mib));
        assert!(
            !tables_fit_room(mib, 0),
            "no cgroup: the paper's M − M_a alone"
        );
        assert!(
            !tables_fit_room(0, 50 * mib),
            "an empty database starts at the minimum"
        );
    }
}
