//! A deterministic discrete-event model of one flash SSD.
//!
//! The device has `channels × chips_per_channel` flash chips. Logical bytes are striped over the
//! chips in `chunk_bytes` pieces, `stripe_chips` chips per stripe; a flash page holds `page_bytes`
//! and the mapping unit (the smallest transfer) is `mapping_bytes`. A read touches every page its
//! byte range covers: each page waits for its chip, reads the array (`read_page_us`), then waits
//! for its channel and transfers its bytes (`channel_mb_per_s`); the read completes when its last
//! page has crossed the channel, plus a fixed `controller_us`. Service time is therefore
//! proportional to the size of the I/O and to the contention on its chips and channels.
//!
//! Writes land in a DRAM write buffer (`write_buffer_bytes`) at host speed. When the buffer is
//! `flush_threshold` full a flush programs the buffered pages round-robin over all chips
//! (`program_page_us` per page), which occupies those chips and delays reads behind them; a write
//! that finds the buffer full waits for the flush. Every `gc_every_bytes` of flushed data starts a
//! garbage-collection busy period of `gc_duration_us` on a `gc_chip_fraction` of the chips, drawn
//! by the seeded RNG: page reads on those chips take `read_page_us` times an inflation factor drawn
//! uniformly from `[gc_read_inflation_min, gc_read_inflation_max]` (10–60× by default). Reads below
//! `hot_bytes` are hot locations served from the controller's SLC cache in `hot_read_us`. At most
//! `queue_depth_max` I/Os are outstanding; the next one waits for the earliest completion.
//!
//! Events (flush completions, garbage-collection ends) are kept in a time-ordered queue and
//! applied before each arrival, so a run is a pure function of the parameters, the seed and the
//! request sequence. Requests must be submitted in non-decreasing time; an earlier timestamp is
//! treated as "now" (documented in `docs/ssd-sim.md`).
//!
//! Thread-safety: an [`Ssd`] is a single-owner value (`Send`); simulate devices in parallel by
//! giving each thread its own.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use attune_workload::rng::Xoshiro256;
use attune_workload::trace::IoKind;

use crate::error::{invalid, Result};

/// The configurable parameters of a simulated SSD. Defaults model a mid-range NVMe drive.
#[derive(Clone, Debug, PartialEq)]
pub struct SsdParams {
    /// Flash channels. Default 8.
    pub channels: u32,
    /// Chips per channel. Default 4 (32 chips).
    pub chips_per_channel: u32,
    /// Flash page size in bytes. Default 16 KiB.
    pub page_bytes: u32,
    /// Mapping granularity in bytes: transfers are rounded up to it. Default 4 KiB.
    pub mapping_bytes: u32,
    /// Contiguous logical bytes on one chip before the stripe moves on. Default 64 KiB.
    pub chunk_bytes: u32,
    /// Chips one stripe spans (divides the chip count); 0 means all chips. Default 0.
    pub stripe_chips: u32,
    /// Logical capacity in bytes; offsets wrap modulo it. Default 1 TiB.
    pub capacity_bytes: u64,
    /// Array read time of one page in microseconds. Default 60.
    pub read_page_us: f64,
    /// Program time of one page in microseconds. Default 600.
    pub program_page_us: f64,
    /// Channel transfer rate in MB/s (10^6 bytes). Default 800.
    pub channel_mb_per_s: f64,
    /// Host-to-buffer transfer rate of writes in MB/s. Default 2000.
    pub host_mb_per_s: f64,
    /// Fixed controller time per I/O in microseconds. Default 8.
    pub controller_us: f64,
    /// DRAM write buffer in bytes. Default 8 MiB.
    pub write_buffer_bytes: u64,
    /// Buffer fill fraction that starts a flush, in (0, 1]. Default 0.5.
    pub flush_threshold: f64,
    /// Flushed bytes between garbage-collection periods. Default 16 MiB.
    pub gc_every_bytes: u64,
    /// Length of one garbage-collection busy period in microseconds. Default 100,000.
    pub gc_duration_us: f64,
    /// Fraction of the chips a busy period occupies, in (0, 1]. Default 0.5.
    pub gc_chip_fraction: f64,
    /// Smallest read inflation during garbage collection. Default 10.
    pub gc_read_inflation_min: f64,
    /// Largest read inflation during garbage collection. Default 60.
    pub gc_read_inflation_max: f64,
    /// Offsets below this are hot locations read from the SLC cache. Default 0 (none).
    pub hot_bytes: u64,
    /// Read time of a hot location in microseconds. Default 15.
    pub hot_read_us: f64,
    /// Largest number of outstanding I/Os. Default 64.
    pub queue_depth_max: u32,
    /// Mapping-entry fetch time in microseconds charged per extra write fragment of a stripe a
    /// read touches (a stripe written by `k` partial writes since it was last overwritten whole
    /// costs `(k - 1) × map_fetch_us`). Default 0: the write layout is not tracked.
    pub map_fetch_us: f64,
}

impl Default for SsdParams {
    fn default() -> Self {
        Self {
            channels: 8,
            chips_per_channel: 4,
            page_bytes: 16 * 1024,
            mapping_bytes: 4096,
            chunk_bytes: 64 * 1024,
            stripe_chips: 0,
            capacity_bytes: 1 << 40,
            read_page_us: 60.0,
            program_page_us: 600.0,
            channel_mb_per_s: 800.0,
            host_mb_per_s: 2000.0,
            controller_us: 8.0,
            write_buffer_bytes: 8 << 20,
            flush_threshold: 0.5,
            gc_every_bytes: 16 << 20,
            gc_duration_us: 100_000.0,
            gc_chip_fraction: 0.5,
            gc_read_inflation_min: 10.0,
            gc_read_inflation_max: 60.0,
            hot_bytes: 0,
            hot_read_us: 15.0,
            queue_depth_max: 64,
            map_fetch_us: 0.0,
        }
    }
}

/// Names of every parameter, in declaration order (for `--set NAME=VALUE` and documentation).
pub const PARAM_NAMES: [&str; 23] = [
    "channels",
    "chips_per_channel",
    "page_bytes",
    "mapping_bytes",
    "chunk_bytes",
    "stripe_chips",
    "capacity_bytes",
    "read_page_us",
    "program_page_us",
    "channel_mb_per_s",
    "host_mb_per_s",
    "controller_us",
    "write_buffer_bytes",
    "flush_threshold",
    "gc_every_bytes",
    "gc_duration_us",
    "gc_chip_fraction",
    "gc_read_inflation_min",
    "gc_read_inflation_max",
    "hot_bytes",
    "hot_read_us",
    "queue_depth_max",
    "map_fetch_us",
];

fn check_range(name: &'static str, v: f64, lo: f64, hi: f64) -> Result<()> {
    if !v.is_finite() || v < lo || v > hi {
        // A huge value is shown in exponent form, not as hundreds of digits.
        let shown = if v.abs() >= 1e9 {
            format!("{v:e}")
        } else {
            v.to_string()
        };
        return Err(invalid(
            name,
            shown,
            format!("must be a number in [{lo}, {hi}]"),
        ));
    }
    Ok(())
}

fn check_count(name: &'static str, v: u64, lo: u64, hi: u64) -> Result<()> {
    if v < lo || v > hi {
        return Err(invalid(name, v, format!("must be in [{lo}, {hi}]")));
    }
    Ok(())
}

impl SsdParams {
    /// Total chips.
    pub fn chips(&self) -> u32 {
        self.channels * self.chips_per_channel
    }

    /// Chips one stripe spans (`stripe_chips`, or all chips when it is 0).
    pub fn stripe(&self) -> u32 {
        if self.stripe_chips == 0 {
            self.chips()
        } else {
            self.stripe_chips
        }
    }

    /// Bytes of one stripe: `chunk_bytes × stripe()` (the unit of layout decisions that the
    /// write-fragment model and the profiler's Experiment 1 see).
    pub fn stripe_bytes(&self) -> u64 {
        u64::from(self.chunk_bytes) * u64::from(self.stripe())
    }

    /// The offset inside a chunk where chunk-sized reads are fastest (the hot-location pattern is
    /// `chunk_bytes × i + hot_offset()`), among the offsets that are multiples of the mapping
    /// unit; `None` when offset 0 is among the fastest (one chip, or every split ties).
    ///
    /// A chunk-sized read at a page-aligned offset `o = n_b·P` reads `n_a = C/P − n_b` pages
    /// from chip a and `n_b` from the next chip b. On two channels or more the two chips
    /// transfer in parallel and the even split (half a chunk) wins, also when the page is the
    /// whole chunk (two partial pages). On one channel the transfers (`T` per page) queue: chip
    /// b's wait behind chip a's, so the read takes `max(n_a·R + (n_b+1)·T, n_b·R + T)` when
    /// `R ≥ T` (`R` = `read_page_us`), which is in general not smallest at half a chunk; when
    /// `R ≤ T` the channel is the bottleneck and every split takes `R + C/P·T`: no offset is
    /// hot. On one channel an unaligned offset reads one page more and is never faster than the
    /// aligned offset below it. See [`SsdParams::hot_offset_on`].
    pub fn hot_offset(&self) -> Option<u32> {
        self.hot_offset_on(self.mapping_bytes)
    }

    /// [`SsdParams::hot_offset`] over the offsets `0, step, 2·step, …` below the chunk (the
    /// profiler's offset groups when `step` is its offset unit; the step is raised to
    /// `chunk_bytes / 2^16` on larger chunks): the offset whose chunk-sized
    /// read on an idle device is fastest, the smallest on a tie, computed with the device's own
    /// timing model ([`Ssd::idle_read_ns`]); `None` when offset 0 is among the fastest.
    pub fn hot_offset_on(&self, step: u32) -> Option<u32> {
        if self.chips() < 2 || step == 0 || self.validate().is_err() {
            return None;
        }
        // A limit on the loop: at most 2^16 offsets (a coarser step on a huge chunk).
        let step = step.max(self.chunk_bytes >> 16);
        let lat: Vec<u64> = (0..self.chunk_bytes / step)
            .map(|i| Ssd::idle_read_ns(self, i * step, self.chunk_bytes))
            .collect();
        let best = (0..lat.len()).min_by_key(|&i| (lat[i], i))?;
        (lat[best] < lat[0]).then(|| best as u32 * step)
    }

    /// Checks every parameter; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        check_count("channels", self.channels.into(), 1, 256)?;
        check_count("chips_per_channel", self.chips_per_channel.into(), 1, 256)?;
        let pow2 = |name: &'static str, v: u32, lo: u32, hi: u32| -> Result<()> {
            if !v.is_power_of_two() || v < lo || v > hi {
                return Err(invalid(
                    name,
                    v,
                    format!("must be a power of two in [{lo}, {hi}]"),
                ));
            }
            Ok(())
        };
        pow2("page_bytes", self.page_bytes, 512, 1 << 20)?;
        pow2("mapping_bytes", self.mapping_bytes, 512, 1 << 20)?;
        if self.mapping_bytes > self.page_bytes {
            return Err(invalid(
                "mapping_bytes",
                self.mapping_bytes,
                format!("must not exceed page_bytes ({})", self.page_bytes),
            ));
        }
        pow2("chunk_bytes", self.chunk_bytes, 512, 1 << 30)?;
        if self.chunk_bytes < self.page_bytes {
            return Err(invalid(
                "chunk_bytes",
                self.chunk_bytes,
                format!(
                    "must be at least page_bytes ({}); raise chunk_bytes with page_bytes",
                    self.page_bytes
                ),
            ));
        }
        let chips = self.chips();
        let stripe = self.stripe_chips;
        if stripe != 0 && (stripe > chips || !chips.is_multiple_of(stripe)) {
            return Err(invalid(
                "stripe_chips",
                self.stripe_chips,
                format!(
                    "must be 0 (all chips) or divide the chip count \
                     channels × chips_per_channel = {chips}"
                ),
            ));
        }
        check_count("capacity_bytes", self.capacity_bytes, 1 << 20, 1 << 50)?;
        check_range("read_page_us", self.read_page_us, 0.01, 1e5)?;
        check_range("program_page_us", self.program_page_us, 0.01, 1e6)?;
        check_range("channel_mb_per_s", self.channel_mb_per_s, 1.0, 1e6)?;
        check_range("host_mb_per_s", self.host_mb_per_s, 1.0, 1e6)?;
        check_range("controller_us", self.controller_us, 0.0, 1e5)?;
        check_count("write_buffer_bytes", self.write_buffer_bytes, 4096, 1 << 36)?;
        if !(self.flush_threshold > 0.0 && self.flush_threshold <= 1.0) {
            return Err(invalid(
                "flush_threshold",
                self.flush_threshold,
                "must be a number in (0, 1]",
            ));
        }
        check_count("gc_every_bytes", self.gc_every_bytes, 4096, 1 << 50)?;
        check_range("gc_duration_us", self.gc_duration_us, 0.0, 1e8)?;
        if !(self.gc_chip_fraction > 0.0 && self.gc_chip_fraction <= 1.0) {
            return Err(invalid(
                "gc_chip_fraction",
                self.gc_chip_fraction,
                "must be a number in (0, 1]",
            ));
        }
        check_range(
            "gc_read_inflation_min",
            self.gc_read_inflation_min,
            1.0,
            1e4,
        )?;
        check_range(
            "gc_read_inflation_max",
            self.gc_read_inflation_max,
            1.0,
            1e4,
        )?;
        if self.gc_read_inflation_max < self.gc_read_inflation_min {
            // Blame the bound that moved from its default (the one the caller set): raising the
            // minimum above the default maximum is the minimum's fault, and vice versa.
            let max_moved = self.gc_read_inflation_max != Self::default().gc_read_inflation_max;
            return Err(if max_moved {
                invalid(
                    "gc_read_inflation_max",
                    self.gc_read_inflation_max,
                    format!(
                        "must be at least gc_read_inflation_min ({})",
                        self.gc_read_inflation_min
                    ),
                )
            } else {
                invalid(
                    "gc_read_inflation_min",
                    self.gc_read_inflation_min,
                    format!(
                        "must be at most gc_read_inflation_max ({}); set both to move the range",
                        self.gc_read_inflation_max
                    ),
                )
            });
        }
        check_count("hot_bytes", self.hot_bytes, 0, self.capacity_bytes)?;
        check_range("hot_read_us", self.hot_read_us, 0.01, 1e5)?;
        check_count("queue_depth_max", self.queue_depth_max.into(), 1, 65_536)?;
        check_range("map_fetch_us", self.map_fetch_us, 0.0, 1e5)?;
        Ok(())
    }

    /// Sets one parameter by name from its text value (`"channels"`, `"16"`); the error names it.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        fn int<T: std::str::FromStr>(n: &'static str, v: &str) -> Result<T> {
            v.trim().replace('_', "").parse::<T>().map_err(|_| {
                let digits = v.trim().replace('_', "");
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    invalid(n, v, "is too large for this parameter")
                } else {
                    invalid(n, v, "must be a non-negative integer")
                }
            })
        }
        fn num(n: &'static str, v: &str) -> Result<f64> {
            v.trim()
                .parse::<f64>()
                .map_err(|_| invalid(n, v, "must be a number"))
        }
        let Some(&n) = PARAM_NAMES.iter().find(|p| **p == name) else {
            return Err(invalid(
                "name",
                name,
                format!("unknown SSD parameter; valid: {}", PARAM_NAMES.join(", ")),
            ));
        };
        match n {
            "channels" => self.channels = int(n, value)?,
            "chips_per_channel" => self.chips_per_channel = int(n, value)?,
            "page_bytes" => self.page_bytes = int(n, value)?,
            "mapping_bytes" => self.mapping_bytes = int(n, value)?,
            "chunk_bytes" => self.chunk_bytes = int(n, value)?,
            "stripe_chips" => self.stripe_chips = int(n, value)?,
            "capacity_bytes" => self.capacity_bytes = int(n, value)?,
            "read_page_us" => self.read_page_us = num(n, value)?,
            "program_page_us" => self.program_page_us = num(n, value)?,
            "channel_mb_per_s" => self.channel_mb_per_s = num(n, value)?,
            "host_mb_per_s" => self.host_mb_per_s = num(n, value)?,
            "controller_us" => self.controller_us = num(n, value)?,
            "write_buffer_bytes" => self.write_buffer_bytes = int(n, value)?,
            "flush_threshold" => self.flush_threshold = num(n, value)?,
            "gc_every_bytes" => self.gc_every_bytes = int(n, value)?,
            "gc_duration_us" => self.gc_duration_us = num(n, value)?,
            "gc_chip_fraction" => self.gc_chip_fraction = num(n, value)?,
            "gc_read_inflation_min" => self.gc_read_inflation_min = num(n, value)?,
            "gc_read_inflation_max" => self.gc_read_inflation_max = num(n, value)?,
            "hot_bytes" => self.hot_bytes = int(n, value)?,
            "hot_read_us" => self.hot_read_us = num(n, value)?,
            "queue_depth_max" => self.queue_depth_max = int(n, value)?,
            _ => self.map_fetch_us = num(n, value)?,
        }
        Ok(())
    }

    /// The defaults with `(name, value text)` settings applied ([`SsdParams::set`]) and
    /// validated. A `mapping_bytes` that is not set follows `page_bytes`: it is
    /// `min(4096, page_bytes)`, so a page below the default mapping unit (2 KiB, 1 KiB, 512 B)
    /// needs no second setting; a `mapping_bytes` that is set is kept as given.
    pub fn from_settings<'a>(
        settings: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        let mut p = Self::default();
        let mut mapping_set = false;
        for (name, value) in settings {
            p.set(name, value)?;
            mapping_set |= name == "mapping_bytes";
        }
        if !mapping_set {
            p.mapping_bytes = Self::default().mapping_bytes.min(p.page_bytes);
        }
        p.validate()?;
        Ok(p)
    }

    /// Every parameter as (name, value text), in [`PARAM_NAMES`] order.
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let v: [String; 23] = [
            self.channels.to_string(),
            self.chips_per_channel.to_string(),
            self.page_bytes.to_string(),
            self.mapping_bytes.to_string(),
            self.chunk_bytes.to_string(),
            self.stripe_chips.to_string(),
            self.capacity_bytes.to_string(),
            self.read_page_us.to_string(),
            self.program_page_us.to_string(),
            self.channel_mb_per_s.to_string(),
            self.host_mb_per_s.to_string(),
            self.controller_us.to_string(),
            self.write_buffer_bytes.to_string(),
            self.flush_threshold.to_string(),
            self.gc_every_bytes.to_string(),
            self.gc_duration_us.to_string(),
            self.gc_chip_fraction.to_string(),
            self.gc_read_inflation_min.to_string(),
            self.gc_read_inflation_max.to_string(),
            self.hot_bytes.to_string(),
            self.hot_read_us.to_string(),
            self.queue_depth_max.to_string(),
            self.map_fetch_us.to_string(),
        ];
        PARAM_NAMES.iter().copied().zip(v).collect()
    }
}

/// One I/O handed to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRequest {
    /// Arrival time in nanoseconds.
    pub time_ns: u64,
    /// Byte offset.
    pub offset: u64,
    /// Bytes (0 is served as one mapping unit).
    pub size: u32,
    /// Read or write.
    pub kind: IoKind,
}

/// What the device did with one I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoCompletion {
    /// Arrival time (after clamping to the device clock) in nanoseconds.
    pub submit_ns: u64,
    /// Completion time in nanoseconds.
    pub finish_ns: u64,
    /// I/Os outstanding when this one arrived (not counting itself).
    pub queue_len: u32,
    /// Pages of this read served by chips in a garbage-collection busy period (ground truth).
    pub gc_pages: u32,
    /// A write that waited for the buffer to drain.
    pub stalled: bool,
}

impl IoCompletion {
    /// Latency in nanoseconds.
    pub fn latency_ns(&self) -> u64 {
        self.finish_ns - self.submit_ns
    }
}

/// Counters of one device since it was built.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SsdStats {
    /// Reads served.
    pub reads: u64,
    /// Writes served.
    pub writes: u64,
    /// Flushes started.
    pub flushes: u64,
    /// Garbage-collection busy periods started.
    pub gc_periods: u64,
    /// Reads that touched a chip in a busy period.
    pub gc_reads: u64,
    /// Writes that waited for the buffer.
    pub stalled_writes: u64,
    /// Reads served from hot locations.
    pub hot_reads: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A flush of this many bytes completes.
    FlushDone(u64),
    /// The busy period of every chip whose `gc_until` has passed ends.
    GcEnd,
}

/// One simulated SSD (see the module documentation). `Clone` copies the whole state (the routing
/// oracle serves a read on a copy to learn what it would cost).
#[derive(Clone, Debug)]
pub struct Ssd {
    p: SsdParams,
    rng: Xoshiro256,
    now: f64,
    chip_free: Vec<f64>,
    channel_free: Vec<f64>,
    gc_until: Vec<f64>,
    gc_factor: Vec<f64>,
    events: BinaryHeap<Reverse<(u64, Event)>>,
    outstanding: BinaryHeap<Reverse<u64>>,
    buffer_used: u64,
    flushing: bool,
    flush_chip: u32,
    flushed_since_gc: u64,
    stats: SsdStats,
    ns_per_byte_channel: f64,
    ns_per_byte_host: f64,
    /// Stripe index -> partial writes since it was last overwritten whole (only with
    /// `map_fetch_us > 0`).
    fragments: std::collections::HashMap<u64, u32>,
}

impl Ssd {
    /// A fresh, idle device; fails if a parameter is invalid (the error names it).
    pub fn new(params: SsdParams, seed: u64) -> Result<Self> {
        params.validate()?;
        let chips = params.chips() as usize;
        Ok(Self {
            rng: Xoshiro256::new(seed, 0x55d5_5d00),
            now: 0.0,
            chip_free: vec![0.0; chips],
            channel_free: vec![0.0; params.channels as usize],
            gc_until: vec![0.0; chips],
            gc_factor: vec![1.0; chips],
            events: BinaryHeap::new(),
            outstanding: BinaryHeap::new(),
            buffer_used: 0,
            flushing: false,
            flush_chip: 0,
            flushed_since_gc: 0,
            stats: SsdStats::default(),
            ns_per_byte_channel: 1e3 / params.channel_mb_per_s,
            ns_per_byte_host: 1e3 / params.host_mb_per_s,
            fragments: std::collections::HashMap::new(),
            p: params,
        })
    }

    /// Latency in nanoseconds of one read of `size` bytes at `offset_in_chunk` past a chunk
    /// boundary (above the hot locations) on a fresh, idle device with `params`: the timing
    /// model of [`Ssd::submit`] with nothing queued, which is what the profiler's reads at
    /// queue depth 1 see. `params` must be valid.
    pub fn idle_read_ns(params: &SsdParams, offset_in_chunk: u32, size: u32) -> u64 {
        let Ok(mut ssd) = Ssd::new(params.clone(), 0) else {
            return 0;
        };
        let chunk = u64::from(params.chunk_bytes);
        let base = params.hot_bytes.div_ceil(chunk) * chunk;
        ssd.submit(IoRequest {
            time_ns: 0,
            offset: base + u64::from(offset_in_chunk),
            size,
            kind: IoKind::Read,
        })
        .latency_ns()
    }

    /// Ages a fresh device as if `bytes` had been written and flushed before time 0: its count
    /// towards the next garbage collection starts at `bytes % gc_every_bytes` (the write buffer
    /// starts empty). A device joined mid-life, whose collection phase a router cannot know.
    pub fn age(&mut self, bytes: u64) {
        self.flushed_since_gc = bytes % self.p.gc_every_bytes;
    }

    /// The parameters.
    pub fn params(&self) -> &SsdParams {
        &self.p
    }

    /// Counters so far.
    pub fn stats(&self) -> SsdStats {
        self.stats
    }

    /// The device clock in nanoseconds (the latest arrival seen).
    pub fn now_ns(&self) -> u64 {
        self.now as u64
    }

    /// I/Os still outstanding at `time_ns` (the queue length a new arrival would see). Read-only:
    /// it does not advance the device.
    pub fn queue_len_at(&self, time_ns: u64) -> u32 {
        let t = time_ns.max(self.now as u64);
        self.outstanding.iter().filter(|r| r.0 > t).count() as u32
    }

    /// Whether `chip` is in a garbage-collection busy period at `time_ns` (ground truth, for tests
    /// and the profiler's validation).
    pub fn chip_busy_at(&self, chip: usize, time_ns: u64) -> bool {
        self.gc_until.get(chip).is_some_and(|&u| u > time_ns as f64)
    }

    /// When the busy period under way at `time_ns` on any chip began (ground truth; `None` when no
    /// chip is busy). Busy periods that internal events due by `time_ns` would start count only
    /// once the device has been advanced past them (by a submission).
    pub fn busy_since(&self, time_ns: u64) -> Option<u64> {
        let t = time_ns as f64;
        self.gc_until
            .iter()
            .filter(|&&u| u > t)
            .map(|&u| (u - self.p.gc_duration_us * 1e3).max(0.0) as u64)
            .min()
    }

    fn chip_of(&self, byte: u64) -> usize {
        let chunk = byte / u64::from(self.p.chunk_bytes);
        let stripe = u64::from(self.p.stripe());
        let groups = u64::from(self.p.chips() / self.p.stripe());
        let group = (chunk / stripe) % groups;
        (group * stripe + chunk % stripe) as usize
    }

    fn channel_of(&self, chip: usize) -> usize {
        chip % self.p.channels as usize
    }

    fn schedule(&mut self, at: f64, e: Event) {
        self.events.push(Reverse((at.ceil() as u64, e)));
    }

    /// Applies every internal event due at or before `t`.
    fn advance(&mut self, t: f64) {
        while let Some(Reverse((at, e))) = self.events.peek().copied() {
            if at as f64 > t {
                break;
            }
            self.events.pop();
            match e {
                Event::FlushDone(bytes) => self.flush_done(at as f64, bytes),
                Event::GcEnd => {}
            }
        }
    }

    fn flush_done(&mut self, at: f64, bytes: u64) {
        self.buffer_used = self.buffer_used.saturating_sub(bytes);
        self.flushing = false;
        self.flushed_since_gc += bytes;
        if self.flushed_since_gc >= self.p.gc_every_bytes {
            self.flushed_since_gc = 0;
            self.start_gc(at);
        }
        self.maybe_flush(at);
    }

    fn start_gc(&mut self, at: f64) {
        let chips = self.p.chips() as usize;
        let n = ((chips as f64 * self.p.gc_chip_fraction).round() as usize).clamp(1, chips);
        let first = self.rng.below(chips as u64) as usize;
        let span = self.p.gc_read_inflation_max - self.p.gc_read_inflation_min;
        let factor = self.p.gc_read_inflation_min + span * self.rng.next_f64();
        let until = at + self.p.gc_duration_us * 1e3;
        for i in 0..n {
            let c = (first + i) % chips;
            self.gc_until[c] = until;
            self.gc_factor[c] = factor;
        }
        self.stats.gc_periods += 1;
        self.schedule(until, Event::GcEnd);
    }

    fn maybe_flush(&mut self, at: f64) {
        let threshold = (self.p.write_buffer_bytes as f64 * self.p.flush_threshold) as u64;
        if self.flushing || self.buffer_used == 0 || self.buffer_used < threshold.max(1) {
            return;
        }
        let bytes = self.buffer_used;
        let pages = bytes.div_ceil(u64::from(self.p.page_bytes));
        let chips = self.p.chips();
        let page_ns = self.p.program_page_us * 1e3;
        let xfer_ns = f64::from(self.p.page_bytes) * self.ns_per_byte_channel;
        let mut done = at;
        for _ in 0..pages {
            let chip = self.flush_chip as usize;
            self.flush_chip = (self.flush_chip + 1) % chips;
            let ch = self.channel_of(chip);
            let x0 = at.max(self.channel_free[ch]);
            self.channel_free[ch] = x0 + xfer_ns;
            let p0 = self.channel_free[ch].max(self.chip_free[chip]);
            self.chip_free[chip] = p0 + page_ns;
            done = done.max(self.chip_free[chip]);
        }
        self.flushing = true;
        self.stats.flushes += 1;
        self.schedule(done, Event::FlushDone(bytes));
    }

    /// Serves one I/O and returns when it completes. Requests are expected in time order; an
    /// earlier time is served as arriving now.
    pub fn submit(&mut self, req: IoRequest) -> IoCompletion {
        let mut t = (req.time_ns as f64).max(self.now);
        self.now = t;
        self.advance(t);
        while self.outstanding.peek().is_some_and(|r| r.0 as f64 <= t) {
            self.outstanding.pop();
        }
        let queue_len = self.outstanding.len() as u32;
        if queue_len >= self.p.queue_depth_max {
            if let Some(Reverse(first)) = self.outstanding.pop() {
                t = t.max(first as f64);
                self.advance(t);
            }
        }
        let unit = u64::from(self.p.mapping_bytes);
        let size = u64::from(req.size.max(1)).div_ceil(unit) * unit;
        let offset = req.offset % self.p.capacity_bytes;
        let (finish, gc_pages, stalled) = match req.kind {
            IoKind::Read => {
                let t = t + self.map_fetch_ns(offset, size);
                self.read(t, offset, size)
            }
            IoKind::Write => {
                self.note_layout(offset, u64::from(req.size.max(1)));
                self.write(t, size)
            }
        };
        let finish = finish + self.p.controller_us * 1e3;
        let finish_ns = (finish.ceil() as u64).max(req.time_ns.max(self.now as u64) + 1);
        self.outstanding.push(Reverse(finish_ns));
        IoCompletion {
            submit_ns: self.now as u64,
            finish_ns,
            queue_len,
            gc_pages,
            stalled,
        }
    }

    /// Records which stripes a write covers whole and which it only touches (the write-fragment
    /// model; off when `map_fetch_us` is 0).
    fn note_layout(&mut self, offset: u64, size: u64) {
        if self.p.map_fetch_us <= 0.0 {
            return;
        }
        let sb = self.p.stripe_bytes();
        let cap = u32::try_from(sb / 512).unwrap_or(u32::MAX).max(1);
        let end = offset + size;
        for s in offset / sb..end.div_ceil(sb) {
            if offset <= s * sb && end >= (s + 1) * sb {
                self.fragments.remove(&s);
            } else {
                let f = self.fragments.entry(s).or_insert(0);
                *f = (*f + 1).min(cap);
            }
        }
    }

    /// Translation time of a read: `map_fetch_us` per extra fragment of every stripe it touches.
    fn map_fetch_ns(&self, offset: u64, size: u64) -> f64 {
        if self.p.map_fetch_us <= 0.0 || self.fragments.is_empty() {
            return 0.0;
        }
        let sb = self.p.stripe_bytes();
        let extra: u64 = (offset / sb..(offset + size).div_ceil(sb))
            .map(|s| u64::from(self.fragments.get(&s).copied().unwrap_or(1).max(1) - 1))
            .sum();
        extra as f64 * self.p.map_fetch_us * 1e3
    }

    fn read(&mut self, t: f64, offset: u64, size: u64) -> (f64, u32, bool) {
        self.stats.reads += 1;
        if offset + size <= self.p.hot_bytes {
            self.stats.hot_reads += 1;
            let xfer = size as f64 * self.ns_per_byte_host;
            return (t + self.p.hot_read_us * 1e3 + xfer, 0, false);
        }
        let page = u64::from(self.p.page_bytes);
        let mut finish = t;
        let mut gc_pages = 0u32;
        let mut pos = offset;
        let end = offset + size;
        while pos < end {
            let page_end = (pos / page + 1) * page;
            let bytes = page_end.min(end) - pos;
            let chip = self.chip_of(pos);
            let ch = self.channel_of(chip);
            let mut array_ns = self.p.read_page_us * 1e3;
            let start = t.max(self.chip_free[chip]);
            if self.gc_until[chip] > start {
                array_ns *= self.gc_factor[chip];
                gc_pages += 1;
            }
            let ready = start + array_ns;
            self.chip_free[chip] = ready;
            let x0 = ready.max(self.channel_free[ch]);
            self.channel_free[ch] = x0 + bytes as f64 * self.ns_per_byte_channel;
            finish = finish.max(self.channel_free[ch]);
            pos = page_end;
        }
        if gc_pages > 0 {
            self.stats.gc_reads += 1;
        }
        (finish, gc_pages, false)
    }

    fn write(&mut self, t: f64, size: u64) -> (f64, u32, bool) {
        self.stats.writes += 1;
        let mut t = t;
        let mut stalled = false;
        // A limit on the wait loop: each round completes one flush or starts one.
        for _ in 0..1024 {
            if self.buffer_used == 0 || self.buffer_used + size <= self.p.write_buffer_bytes {
                break;
            }
            stalled = true;
            if !self.flushing {
                let saved = self.p.flush_threshold;
                self.p.flush_threshold = f64::MIN_POSITIVE;
                self.maybe_flush(t);
                self.p.flush_threshold = saved;
            }
            match self
                .events
                .iter()
                .filter_map(|Reverse((at, e))| match e {
                    Event::FlushDone(_) => Some(*at),
                    Event::GcEnd => None,
                })
                .min()
            {
                Some(at) => {
                    t = t.max(at as f64);
                    self.advance(t);
                }
                None => break,
            }
        }
        if stalled {
            self.stats.stalled_writes += 1;
        }
        self.buffer_used += size;
        let done = t + size as f64 * self.ns_per_byte_host;
        self.maybe_flush(t);
        (done, 0, stalled)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn read(t: u64, offset: u64, size: u32) -> IoRequest {
        IoRequest {
            time_ns: t,
            offset,
            size,
            kind: IoKind::Read,
        }
    }

    fn write(t: u64, offset: u64, size: u32) -> IoRequest {
        IoRequest {
            time_ns: t,
            offset,
            size,
            kind: IoKind::Write,
        }
    }

    #[test]
    fn set_messages_say_what_is_wrong() {
        let mut p = SsdParams::default();
        let e = p.set("chunk_bytes", "99999999999999999999999").unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        p.set("map_fetch_us", "1e300").unwrap();
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("1e300") && e.len() < 200, "{e}");
        let mut p = SsdParams::default();
        p.set("gc_chip_fraction", "2").unwrap();
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("(0, 1]"), "{e}");
    }

    #[test]
    fn defaults_are_valid() {
        SsdParams::default().validate().unwrap();
    }

    #[test]
    fn a_bad_parameter_is_named() {
        let p = SsdParams {
            stripe_chips: 5,
            ..SsdParams::default()
        };
        let e = Ssd::new(p, 1).unwrap_err().to_string();
        assert!(e.contains("`stripe_chips`"), "{e}");
        let p = SsdParams {
            gc_read_inflation_max: 5.0,
            ..SsdParams::default()
        };
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("gc_read_inflation_max"), "{e}");
        let mut p = SsdParams::default();
        let e = p.set("chanels", "3").unwrap_err().to_string();
        assert!(e.contains("unknown SSD parameter"), "{e}");
        let e = p.set("channels", "x").unwrap_err().to_string();
        assert!(e.contains("`channels`"), "{e}");
        p.set("page_bytes", "3000").unwrap();
        assert!(p.validate().unwrap_err().to_string().contains("page_bytes"));
    }

    #[test]
    fn an_inverted_inflation_range_blames_the_bound_that_was_set() {
        let mut p = SsdParams::default();
        p.set("gc_read_inflation_min", "100").unwrap();
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("`gc_read_inflation_min` = 100"), "{e}");
        let mut p = SsdParams::default();
        p.set("gc_read_inflation_max", "5").unwrap();
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("`gc_read_inflation_max` = 5"), "{e}");
    }

    /// A page below the default mapping unit needs no second setting: the unset mapping unit
    /// follows the page down; one that is set is kept (and a bad one still names itself).
    #[test]
    fn an_unset_mapping_unit_follows_a_small_page() {
        let p =
            SsdParams::from_settings([("page_bytes", "2048"), ("chunk_bytes", "8192")]).unwrap();
        assert_eq!((p.page_bytes, p.mapping_bytes), (2048, 2048));
        let p = SsdParams::from_settings([("page_bytes", "65536")]).unwrap();
        assert_eq!(p.mapping_bytes, 4096);
        let p =
            SsdParams::from_settings([("page_bytes", "8192"), ("mapping_bytes", "1024")]).unwrap();
        assert_eq!(p.mapping_bytes, 1024);
        let e = SsdParams::from_settings([("page_bytes", "2048"), ("mapping_bytes", "4096")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("mapping_bytes"), "{e}");
    }

    #[test]
    fn every_parameter_has_a_bad_value_whose_error_names_it() {
        let bad = [
            "0",
            "3",
            "-1",
            "nan",
            "inf",
            "1e300",
            "99999999999999999999",
            "x",
        ];
        for name in PARAM_NAMES {
            let mut rejected = 0;
            for v in bad {
                let mut p = SsdParams::default();
                if let Err(e) = p.set(name, v).and_then(|()| p.validate()) {
                    let e = e.to_string();
                    assert!(e.contains(&format!("`{name}`")), "{name}={v}: {e}");
                    rejected += 1;
                }
            }
            assert!(rejected >= 2, "{name}: only {rejected} bad values rejected");
        }
    }

    #[test]
    fn set_and_pairs_round_trip() {
        let mut p = SsdParams::default();
        p.set("gc_duration_us", "1234.5").unwrap();
        let mut q = SsdParams::default();
        for (n, v) in p.to_pairs() {
            q.set(n, &v).unwrap();
        }
        assert_eq!(p, q);
    }

    #[test]
    fn an_idle_read_costs_array_transfer_and_controller() {
        let mut ssd = Ssd::new(SsdParams::default(), 1).unwrap();
        let c = ssd.submit(read(1000, 0, 4096));
        // 60 µs array + 4096 B at 800 MB/s (5.12 µs) + 8 µs controller.
        assert_eq!(c.latency_ns(), 73_120);
        assert_eq!(c.queue_len, 0);
    }

    #[test]
    fn service_time_grows_with_size() {
        let mut ssd = Ssd::new(SsdParams::default(), 1).unwrap();
        let small = ssd.submit(read(0, 0, 4096)).latency_ns();
        let mut ssd = Ssd::new(SsdParams::default(), 1).unwrap();
        // 1 MiB = 64 pages over 16 chips on 8 channels: transfers queue on the channels.
        let big = ssd.submit(read(0, 0, 1 << 20)).latency_ns();
        assert!(big > 4 * small, "{big} vs {small}");
    }

    #[test]
    fn reads_on_one_chip_queue() {
        let mut ssd = Ssd::new(SsdParams::default(), 1).unwrap();
        let a = ssd.submit(read(0, 0, 4096));
        let b = ssd.submit(read(0, 4096, 4096));
        assert_eq!(b.queue_len, 1);
        assert!(b.latency_ns() >= a.latency_ns() + 60_000);
    }

    #[test]
    fn reads_of_stripes_written_in_pieces_pay_for_their_mapping_entries() {
        let p = SsdParams {
            chunk_bytes: 16 << 10,
            stripe_chips: 4,
            map_fetch_us: 10.0,
            ..SsdParams::default()
        };
        // Stripe 64 KiB: one written by 16 KiB writes (4 fragments), one written whole.
        let mut ssd = Ssd::new(p, 1).unwrap();
        for i in 0..4 {
            ssd.submit(write(0, i * (16 << 10), 16 << 10));
        }
        ssd.submit(write(0, 64 << 10, 64 << 10));
        let t = 10_000_000_000;
        let pieces = ssd.submit(read(t, 0, 64 << 10)).latency_ns();
        let whole = ssd.submit(read(2 * t, 64 << 10, 64 << 10)).latency_ns();
        assert_eq!(pieces - whole, 30_000, "3 extra fragments × 10 µs");
        // Off by default: the same writes cost nothing extra.
        let mut ssd = Ssd::new(SsdParams::default(), 1).unwrap();
        for i in 0..4 {
            ssd.submit(write(0, i * (16 << 10), 16 << 10));
        }
        let a = ssd.submit(read(t, 0, 64 << 10)).latency_ns();
        let b = ssd.submit(read(2 * t, 1 << 30, 64 << 10)).latency_ns();
        assert_eq!(a, b);
    }

    #[test]
    fn hot_locations_read_faster() {
        let p = SsdParams {
            hot_bytes: 1 << 20,
            ..SsdParams::default()
        };
        let mut ssd = Ssd::new(p, 1).unwrap();
        let hot = ssd.submit(read(0, 0, 4096)).latency_ns();
        let cold = ssd.submit(read(10_000_000, 2 << 20, 4096)).latency_ns();
        assert!(hot * 2 < cold, "{hot} vs {cold}");
    }

    fn write_heavy(ssd: &mut Ssd, n: u64) -> u64 {
        let mut t = 0;
        for i in 0..n {
            t = i * 20_000;
            ssd.submit(write(t, i * 131_072, 131_072));
        }
        t
    }

    #[test]
    fn writes_flush_and_start_busy_periods_that_inflate_reads() {
        let p = SsdParams {
            gc_every_bytes: 4 << 20,
            ..SsdParams::default()
        };
        let mut ssd = Ssd::new(p, 7).unwrap();
        let t = write_heavy(&mut ssd, 200);
        let s = ssd.stats();
        assert!(s.flushes >= 2, "{s:?}");
        assert!(s.gc_periods >= 1, "{s:?}");
        // Find a chip in a busy period and read from it: 10-60× the array time.
        let t = t + 1;
        let busy = (0..32).find(|&c| ssd.chip_busy_at(c, t + 100_000_000));
        if let Some(chip) = busy {
            // chunk `chip` of the first stripe lives on that chip.
            let c = ssd.submit(read(t + 100_000_000, chip as u64 * 65_536, 4096));
            assert!(c.gc_pages == 1);
            assert!(c.latency_ns() > 600_000, "{}", c.latency_ns());
        }
    }

    #[test]
    fn same_seed_same_run() {
        let run = |seed| {
            let p = SsdParams {
                gc_every_bytes: 4 << 20,
                ..SsdParams::default()
            };
            let mut ssd = Ssd::new(p, seed).unwrap();
            let mut out = Vec::new();
            for i in 0..400u64 {
                let kind = if i % 3 == 0 {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                let c = ssd.submit(IoRequest {
                    time_ns: i * 15_000,
                    offset: (i * 7919 % 1000) * 65_536,
                    size: 65_536,
                    kind,
                });
                out.push(c);
            }
            out
        };
        assert_eq!(run(3), run(3));
    }

    #[test]
    fn a_full_buffer_stalls_writes() {
        let p = SsdParams {
            write_buffer_bytes: 1 << 20,
            ..SsdParams::default()
        };
        let mut ssd = Ssd::new(p, 1).unwrap();
        let mut stalled = false;
        for i in 0..64 {
            stalled |= ssd.submit(write(i, i * 131_072, 131_072)).stalled;
        }
        assert!(stalled);
        assert!(ssd.stats().stalled_writes > 0);
    }

    #[test]
    fn the_queue_depth_is_bounded() {
        let p = SsdParams {
            queue_depth_max: 2,
            ..SsdParams::default()
        };
        let mut ssd = Ssd::new(p, 1).unwrap();
        for _ in 0..3 {
            ssd.submit(read(0, 0, 4096));
        }
        let c = ssd.submit(read(0, 0, 4096));
        assert_eq!(c.queue_len, 2);
        assert!(ssd.queue_len_at(0) <= 3);
    }
}
