//! TinFetch: prefix/suffix stream separation, readahead for contiguous accesses, and a tiny
//! pretrained network (10→128→16→1, integer inference) predicting the next suffix otherwise.
//!
//! **Separation** (§4.3.3): an access's byte offset splits into a prefix (`offset >> 23`, 8 MiB)
//! and a suffix (the offset inside the prefix in 1 KiB units, 0..8192). The 32 most recently used
//! prefixes keep their last [`HISTORY`] suffixes in arrival order (a 32-entry table scanned
//! linearly: cheaper than hashing at this size; least recently used prefix evicted).
//!
//! **Hybrid decision** (§4.3.5): when the access starts where the previous access of its stream
//! ended (the previous 8 MiB prefix counts, for streams crossing a boundary), readahead: prefetch
//! the next 128 KB after it. Otherwise, when the stream holds more than 3 suffixes (this one
//! included), the network predicts the next suffix from the last 10 and TinFetch prefetches 128 KB
//! starting there (clipped to the prefix: the prefetch stays within 8 MiB of the current head
//! position, the chapter's HDD argument). Fewer suffixes: no prefetch.
//!
//! **Features** (the chapter leaves them open): the stream's last 10 suffixes, oldest first
//! ([`inputs_of`]): the 9 older ones relative to the newest (±1024 units) and the newest one
//! absolute (0..8192). A stream with 4–9 suffixes is left-padded by repeating its oldest suffix
//! ([`Padding::RepeatOldest`]: a short history looks like a stream that stood still, not one that
//! jumped from 0); [`Padding::Zero`] is the ablation. The output is the step to the next suffix ÷
//! 1024; the prediction is the newest suffix plus the step.
//!
//! **Adaptive aggressiveness** (§4.3.2): every [`EPOCH`] accesses TinFetch looks at its own
//! feedback: its *yield*, demand blocks hit ÷ blocks its prefetches fetched (halved every epoch,
//! as the feedback lags by the pending delay). A yield below 5 % (`pause_yield_pct`) pauses the
//! network for 4 epochs, doubling while it stays low (up to 64; readahead continues: "very few
//! hits, pause for a while"). The readahead depth ("high hit rate, larger prefetches", made to
//! respond to what a larger prefetch fixes: lateness) is kept **per stream**: a contiguous access
//! that found its stream's prefetched blocks still pending doubles that stream's depth, up to
//! `depth_max` × 128 KB (default 8: 1 MiB). A deeper window costs only at the end of a run: each
//! contiguous access fetches just the blocks newly inside its window, so the depth is how far
//! ahead of the reader they arrive. The ablation (`stream_depth = false`) keeps one depth for all
//! streams, doubled when at least 25 % of the used prefetches were late with a yield of at least
//! 50 %, returned to 128 KB when few (< 5 %) were late or the yield fell below 25 %. Every part
//! can be switched off ([`TinFetchConfig`]).
//!
//! Thread-safety: single-owner value; the model is immutable.

use crate::model::{InputKind, QuantizedMlp, QUANT};

use crate::{IoError, Result};

use super::{Access, PrefetchRange, Prefetcher, BLOCK_BYTES, PREFETCH_BYTES};

/// Suffixes kept per stream, and the network's inputs.
pub const HISTORY: usize = 10;
/// Prefix granularity: 8 MiB.
pub const PREFIX_SHIFT: u32 = 23;
/// Suffix unit: 1 KiB.
pub const SUFFIX_SHIFT: u32 = 10;
/// Suffixes per prefix (8 MiB / 1 KiB = 8192).
pub const SUFFIXES: u32 = 1 << (PREFIX_SHIFT - SUFFIX_SHIFT);
/// Accesses per adaptive epoch.
pub const EPOCH: u64 = 128;
const PAUSE_EPOCHS: u64 = 4;
const PAUSE_EPOCHS_MAX: u64 = 64;
const GROW_LATE: f64 = 0.25;
const GROW_YIELD: f64 = 0.5;
const SHRINK_LATE: f64 = 0.05;
const SHRINK_YIELD: f64 = 0.25;
/// Network prefetch ranges remembered to attribute hits to the network.
pub const NET_RANGES: usize = 64;
/// The deepest readahead a configuration may ask for (8 × 128 KB = `PREFETCH_BYTES_MAX`).
pub const DEPTH_LIMIT: u64 = 8;

/// How a stream with fewer than 10 suffixes fills the missing inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// Repeat the oldest suffix (default).
    RepeatOldest,
    /// Zeros (the ablation).
    Zero,
}

/// Where the prefetched 128 KB sits around the predicted suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Starting at the prediction (default: a stream moves forward).
    Start,
    /// Centred on it (the ablation).
    Centered,
}

/// TinFetch's switches and sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TinFetchConfig {
    /// Prefix streams kept (default 32, the chapter's).
    pub streams: usize,
    /// Smallest stream history that triggers the network (default 4: "more than three").
    pub min_suffixes: usize,
    /// Readahead on contiguous accesses (default on).
    pub readahead: bool,
    /// The network on non-contiguous ones (default on).
    pub network: bool,
    /// Adaptive aggressiveness (default on; off = always 128 KB, never paused).
    pub adaptive: bool,
    /// Padding of short histories.
    pub padding: Padding,
    /// Placement of the prefetch around a prediction.
    pub placement: Placement,
    /// Separate streams by prefix (default on; off = one stream for the whole device, the
    /// ablation of the disentanglement).
    pub separate: bool,
    /// The adaptive pause stops the network while the yield (hits per fetched block) stays
    /// below this many percent (default 5; the engine, whose pointer hints compete for the same
    /// device, uses 25).
    pub pause_yield_pct: u8,
    /// Readahead depth per stream (default on): a contiguous access that found its stream's
    /// prefetched blocks still pending doubles that stream's depth. Off: one depth for every
    /// stream, set each epoch from the share of late prefetches.
    pub stream_depth: bool,
    /// The deepest readahead, in 128 KB prefetches (default 8: 1 MiB; at most [`DEPTH_LIMIT`]).
    pub depth_max: u64,
    /// The pause judges the network by its own yield (default on): hits on the ranges its last
    /// [`NET_RANGES`] predictions fetched ÷ the blocks those predictions fetched. Off: by the
    /// yield of every prefetch, readahead's included.
    pub network_yield: bool,
}

impl Default for TinFetchConfig {
    fn default() -> Self {
        Self {
            streams: 32,
            min_suffixes: 4,
            readahead: true,
            network: true,
            adaptive: true,
            padding: Padding::RepeatOldest,
            placement: Placement::Start,
            separate: true,
            pause_yield_pct: 5,
            stream_depth: true,
            depth_max: DEPTH_LIMIT,
            network_yield: true,
        }
    }
}

impl TinFetchConfig {
    /// Checks the sizes.
    pub fn validate(&self) -> Result<()> {
        if !(1..=1024).contains(&self.streams) {
            return Err(crate::error::invalid(
                "streams",
                self.streams,
                "must be in 1..=1024",
            ));
        }
        if self.pause_yield_pct > 100 {
            return Err(crate::error::invalid(
                "pause_yield_pct",
                self.pause_yield_pct,
                "must be at most 100",
            ));
        }
        if !(1..=DEPTH_LIMIT).contains(&self.depth_max) {
            return Err(crate::error::invalid(
                "depth_max",
                self.depth_max,
                "must be in 1..=8 (128 KB prefetches: at most 1 MiB)",
            ));
        }
        if !(1..=HISTORY).contains(&self.min_suffixes) {
            return Err(crate::error::invalid(
                "min_suffixes",
                self.min_suffixes,
                "must be in 1..=10",
            ));
        }
        Ok(())
    }
}

/// One prefix stream: its last suffixes (ring), where its last access ended, its last use.
#[derive(Clone, Copy, Debug)]
struct Stream {
    prefix: u64,
    suffixes: [u16; HISTORY],
    len: usize,
    head: usize,
    last_end: u64,
    used: u64,
    depth: u64,
}

impl Stream {
    fn push(&mut self, s: u16) {
        self.suffixes[self.head] = s;
        self.head = (self.head + 1) % HISTORY;
        self.len = (self.len + 1).min(HISTORY);
    }

    /// The history oldest first, padded to 10 (raw suffixes).
    fn history(&self, padding: Padding, out: &mut [f32; HISTORY]) {
        let missing = HISTORY - self.len;
        let oldest = (self.head + HISTORY - self.len) % HISTORY;
        let pad = match padding {
            Padding::RepeatOldest if self.len > 0 => f32::from(self.suffixes[oldest]),
            _ => 0.0,
        };
        for (i, x) in out.iter_mut().enumerate() {
            *x = if i < missing {
                pad
            } else {
                f32::from(self.suffixes[(oldest + i - missing) % HISTORY])
            };
        }
    }
}

/// The prefix-stream table (shared by the prefetcher and the training-sample extractor).
#[derive(Clone, Debug)]
pub struct Streams {
    v: Vec<Stream>,
    cap: usize,
    separate: bool,
    tick: u64,
}

/// What the table says about one access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    /// Index of the access's stream in the table.
    pub slot: usize,
    /// The access continues its stream (starts where the last one ended).
    pub contiguous: bool,
    /// Suffixes in the stream after this access.
    pub len: usize,
    /// The prefix.
    pub prefix: u64,
}

impl Streams {
    /// A table of `cap` streams; `separate = false` keeps one stream for everything.
    pub fn new(cap: usize, separate: bool) -> Self {
        Self {
            v: Vec::with_capacity(cap),
            cap: cap.max(1),
            separate,
            tick: 0,
        }
    }

    /// Records an access and reports on its stream.
    pub fn observe(&mut self, offset: u64, end: u64) -> Observed {
        self.tick += 1;
        let prefix = if self.separate {
            offset >> PREFIX_SHIFT
        } else {
            0
        };
        let suffix = ((offset >> SUFFIX_SHIFT) & u64::from(SUFFIXES - 1)) as u16;
        let mut contiguous = false;
        if self.separate && prefix > 0 {
            if let Some(prev) = self.v.iter().find(|s| s.prefix == prefix - 1) {
                contiguous = prev.last_end == offset;
            }
        }
        let slot = match self.v.iter().position(|s| s.prefix == prefix) {
            Some(i) => i,
            None => {
                let fresh = Stream {
                    prefix,
                    suffixes: [0; HISTORY],
                    len: 0,
                    head: 0,
                    last_end: u64::MAX,
                    used: 0,
                    depth: 1,
                };
                if self.v.len() < self.cap {
                    self.v.push(fresh);
                    self.v.len() - 1
                } else {
                    let lru = (0..self.v.len())
                        .min_by_key(|&i| self.v[i].used)
                        .unwrap_or(0);
                    self.v[lru] = fresh;
                    lru
                }
            }
        };
        let s = &mut self.v[slot];
        contiguous |= s.last_end == offset;
        s.push(suffix);
        s.last_end = end;
        s.used = self.tick;
        Observed {
            slot,
            contiguous,
            len: s.len,
            prefix,
        }
    }

    /// The stream's last 10 suffixes, oldest first, padded ([`Streams::features`] turns them
    /// into the network's inputs).
    pub fn history(&self, slot: usize, padding: Padding, out: &mut [f32; HISTORY]) {
        if let Some(s) = self.v.get(slot) {
            s.history(padding, out);
        }
    }

    /// The network inputs of the stream in `slot` (see [`inputs_of`]).
    pub fn features(&self, slot: usize, padding: Padding, out: &mut [f32; HISTORY]) {
        let mut h = [0f32; HISTORY];
        self.history(slot, padding, &mut h);
        inputs_of(&h, out);
    }

    /// The readahead depth of the stream in `slot` (128 KB prefetches).
    pub fn depth(&self, slot: usize) -> u64 {
        self.v.get(slot).map_or(1, |s| s.depth)
    }

    /// Doubles the readahead depth of the stream in `slot`, up to `max`.
    pub fn deepen(&mut self, slot: usize, max: u64) {
        if let Some(s) = self.v.get_mut(slot) {
            s.depth = (s.depth * 2).min(max.max(1));
        }
    }

    /// The prefix of the stream in `slot`.
    pub fn prefix(&self, slot: usize) -> Option<u64> {
        self.v.get(slot).map(|s| s.prefix)
    }
}

/// Reach of the relative inputs and of the predicted step, in suffix units (±1 MiB).
pub const DELTA_RANGE: f32 = 1024.0;

/// The network inputs of a padded history `h` (oldest first): the 9 older suffixes relative to
/// the newest (`h[i] - h[9]`, scaled by the weight file over ±[`DELTA_RANGE`]) and the newest
/// suffix itself (0..8192). Relative inputs make a pattern look the same wherever it sits in
/// its 8 MiB prefix; the absolute one tells the network where the prefix's edges are.
pub fn inputs_of(h: &[f32; HISTORY], out: &mut [f32; HISTORY]) {
    let last = h[HISTORY - 1];
    for i in 0..HISTORY - 1 {
        out[i] = h[i] - last;
    }
    out[HISTORY - 1] = last;
}

/// Training samples: for every access the network would handle (not contiguous, history of at
/// least `min_suffixes`), its 10 inputs and the next suffix its stream receives (samples whose
/// stream is evicted before its next access are dropped). Returns `(inputs, targets)`, inputs
/// row-major `n × 10` ([`inputs_of`]), targets the next suffix minus the newest (1 KiB units).
pub fn training_samples(
    offsets_sizes: &[(u64, u64)],
    cfg: &TinFetchConfig,
) -> (Vec<f32>, Vec<f32>) {
    let mut t = Streams::new(cfg.streams, cfg.separate);
    // Per slot: the pending sample's inputs and the prefix it belongs to.
    let mut pending: Vec<Option<(u64, [f32; HISTORY])>> = vec![None; cfg.streams.max(1)];
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for &(off, size) in offsets_sizes {
        let o = t.observe(off, off.saturating_add(size.max(1)));
        if let Some(slot) = pending.get_mut(o.slot) {
            if let Some((p, x)) = slot.take() {
                if p == o.prefix {
                    let next = ((off >> SUFFIX_SHIFT) & u64::from(SUFFIXES - 1)) as f32;
                    ys.push(next - x[HISTORY - 1]);
                    xs.extend_from_slice(&x);
                }
            }
            if !o.contiguous && o.len >= cfg.min_suffixes {
                let mut x = [0f32; HISTORY];
                t.features(o.slot, cfg.padding, &mut x);
                *slot = Some((o.prefix, x));
            }
        }
    }
    (xs, ys)
}

/// The TinFetch prefetcher.
#[derive(Clone, Debug)]
pub struct TinFetch {
    cfg: TinFetchConfig,
    model: Option<QuantizedMlp>,
    streams: Streams,
    degree: u64,
    paused_until: u64,
    pause_epochs: u64,
    n: u64,
    epoch_requested: u64,
    epoch_hits: u64,
    epoch_blocks: u64,
    epoch_late: u64,
    /// Blocks (first, last) of the network's last predictions (a ring), and the next slot.
    net_ranges: [(u64, u64); NET_RANGES],
    net_head: usize,
    /// The previous access's prefetch came from the network.
    net_last: bool,
    epoch_net_fetched: u64,
    epoch_net_hits: u64,
    /// Network inferences run.
    pub inferences: u64,
    name: String,
}

impl TinFetch {
    /// A prefetcher with `model` (a TinFetch weight file, kind 3); `None` only when the network
    /// is switched off.
    pub fn new(cfg: TinFetchConfig, model: Option<QuantizedMlp>) -> Result<Self> {
        cfg.validate()?;
        match &model {
            Some(m) if m.kind() != InputKind::TinFetch => {
                return Err(IoError::InvalidParameter {
                    name: "model",
                    value: format!("{:?}", m.kind()),
                    reason: "not a TinFetch model (input kind 3)".into(),
                })
            }
            None if cfg.network => {
                return Err(crate::error::invalid(
                    "model",
                    "none",
                    "the network is on but no model was given",
                ))
            }
            _ => {}
        }
        Ok(Self {
            streams: Streams::new(cfg.streams, cfg.separate),
            cfg,
            model,
            degree: 1,
            paused_until: 0,
            pause_epochs: 0,
            n: 0,
            epoch_requested: 0,
            epoch_hits: 0,
            epoch_blocks: 0,
            epoch_late: 0,
            net_ranges: [(u64::MAX, 0); NET_RANGES],
            net_head: 0,
            net_last: false,
            epoch_net_fetched: 0,
            epoch_net_hits: 0,
            inferences: 0,
            name: "tinfetch".into(),
        })
    }

    /// The predicted next suffix (1 KiB units, 0..8192) for a stream's inputs
    /// ([`inputs_of`]): the newest suffix plus the network's step (output × [`DELTA_RANGE`]).
    pub fn predict(model: &QuantizedMlp, x: &[f32; HISTORY]) -> u32 {
        let q = model.logit_q(x);
        let step = q.saturating_mul(DELTA_RANGE as i64) / QUANT;
        let last = x[HISTORY - 1].clamp(0.0, (SUFFIXES - 1) as f32) as i64;
        last.saturating_add(step).clamp(0, i64::from(SUFFIXES - 1)) as u32
    }

    /// Renames the prefetcher (ablation variants report their own name).
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    fn adapt(&mut self, a: &Access) {
        self.epoch_requested += a.fetched_prev_blocks;
        self.epoch_hits += a.hit_blocks;
        self.epoch_blocks += a.blocks;
        self.epoch_late += a.late_blocks;
        if self.cfg.network_yield {
            if self.net_last {
                self.epoch_net_fetched += a.fetched_prev_blocks;
            }
            if a.hit_blocks > 0 {
                let first = a.offset / BLOCK_BYTES;
                let last = (a.end().max(a.offset + 1) - 1) / BLOCK_BYTES;
                if self
                    .net_ranges
                    .iter()
                    .any(|&(f, l)| f <= last && first <= l)
                {
                    self.epoch_net_hits += a.hit_blocks;
                }
            }
        }
        if !self.n.is_multiple_of(EPOCH) {
            return;
        }
        // Hits per fetched block: what the prefetches bought (a reused block counts every time
        // it is hit, as the hit rate does). Halved every epoch, so the last few epochs count:
        // feedback lags by the pending delay, which can exceed one epoch.
        let yield_ = self.epoch_hits as f64 / self.epoch_requested.max(1) as f64;
        let pause_yield = f64::from(self.cfg.pause_yield_pct) / 100.0;
        let (judged, fetched) = if self.cfg.network_yield {
            (
                self.epoch_net_hits as f64 / self.epoch_net_fetched.max(1) as f64,
                self.epoch_net_fetched,
            )
        } else {
            (yield_, self.epoch_requested)
        };
        self.epoch_net_hits /= 2;
        self.epoch_net_fetched /= 2;
        if self.n >= self.paused_until && fetched >= 32 && judged < pause_yield {
            self.pause_epochs = (self.pause_epochs * 2).clamp(PAUSE_EPOCHS, PAUSE_EPOCHS_MAX);
            self.paused_until = self.n + self.pause_epochs * EPOCH;
        } else if self.n >= self.paused_until && judged >= pause_yield {
            self.pause_epochs = 0;
        }
        let late = self.epoch_late as f64 / (self.epoch_late + self.epoch_hits).max(1) as f64;
        if late >= GROW_LATE && yield_ >= GROW_YIELD {
            self.degree = (self.degree * 2).min(self.cfg.depth_max);
        } else if late < SHRINK_LATE || yield_ < SHRINK_YIELD {
            self.degree = 1;
        }
        self.epoch_late /= 2;
        self.epoch_requested /= 2;
        self.epoch_hits /= 2;
        self.epoch_blocks /= 2;
    }
}

impl Prefetcher for TinFetch {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn access(&mut self, a: &Access, out: &mut Vec<PrefetchRange>) {
        self.n += 1;
        if self.cfg.adaptive {
            self.adapt(a);
        }
        let o = self.streams.observe(a.offset, a.end());
        let len = PREFETCH_BYTES;
        self.net_last = false;
        if o.contiguous {
            if self.cfg.adaptive && self.cfg.stream_depth && a.late_blocks > 0 {
                self.streams.deepen(o.slot, self.cfg.depth_max);
            }
            if self.cfg.readahead {
                let depth = if !self.cfg.adaptive {
                    1
                } else if self.cfg.stream_depth {
                    self.streams.depth(o.slot)
                } else {
                    self.degree
                };
                out.push(PrefetchRange {
                    offset: a.end(),
                    len: len * depth,
                });
            }
        } else if self.cfg.network
            && o.len >= self.cfg.min_suffixes
            && !(self.cfg.adaptive && self.n < self.paused_until)
        {
            if let Some(m) = &self.model {
                let mut x = [0f32; HISTORY];
                self.streams.features(o.slot, self.cfg.padding, &mut x);
                self.inferences += 1;
                let s = u64::from(Self::predict(m, &x));
                let base = o.prefix << PREFIX_SHIFT;
                let region_end = base + (1 << PREFIX_SHIFT);
                let mut from = base + (s << SUFFIX_SHIFT);
                if self.cfg.placement == Placement::Centered {
                    from = from.saturating_sub(len / 2).max(base);
                }
                from -= from % BLOCK_BYTES;
                let to = from.saturating_add(len).min(region_end);
                if to > from {
                    out.push(PrefetchRange {
                        offset: from,
                        len: to - from,
                    });
                    self.net_last = true;
                    self.net_ranges[self.net_head] = (from / BLOCK_BYTES, (to - 1) / BLOCK_BYTES);
                    self.net_head = (self.net_head + 1) % NET_RANGES;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_streams_are_separated_by_prefix() {
        let mut t = Streams::new(32, true);
        let a = 100u64 << PREFIX_SHIFT;
        let b = 7u64 << PREFIX_SHIFT;
        let mut last = None;
        for i in 0..6u64 {
            last = Some(t.observe(a + i * 8192, a + i * 8192 + 4096));
            t.observe(b + i * 4096, b + i * 4096 + 4096);
        }
        let o = last.expect("test setup");
        assert_eq!(o.prefix, 100);
        assert_eq!(o.len, 6);
        // Stream b is contiguous inside its own prefix despite the interleaving.
        let ob = t.observe(b + 6 * 4096, b + 7 * 4096);
        assert!(ob.contiguous);
        let mut x = [0f32; HISTORY];
        t.history(o.slot, Padding::RepeatOldest, &mut x);
        assert_eq!(x[..4], [0.0; 4]);
        assert_eq!(x[4..], [0.0, 8.0, 16.0, 24.0, 32.0, 40.0]);
        t.features(o.slot, Padding::RepeatOldest, &mut x);
        assert_eq!(x[4..], [-40.0, -32.0, -24.0, -16.0, -8.0, 40.0]);
    }

    #[test]
    fn short_histories_repeat_the_oldest_suffix_or_zero() {
        let mut t = Streams::new(4, true);
        for s in [5u64, 9, 13, 17] {
            t.observe(s << SUFFIX_SHIFT, (s << SUFFIX_SHIFT) + 1);
        }
        let mut x = [0f32; HISTORY];
        t.history(0, Padding::RepeatOldest, &mut x);
        assert_eq!(x, [5., 5., 5., 5., 5., 5., 5., 9., 13., 17.]);
        t.history(0, Padding::Zero, &mut x);
        assert_eq!(x, [0., 0., 0., 0., 0., 0., 5., 9., 13., 17.]);
    }

    #[test]
    fn the_least_recently_used_prefix_is_evicted() {
        let mut t = Streams::new(2, true);
        t.observe(0, 1);
        t.observe(1 << PREFIX_SHIFT, (1 << PREFIX_SHIFT) + 1);
        t.observe(2, 3); // prefix 0 used again
        let o = t.observe(2 << PREFIX_SHIFT, (2 << PREFIX_SHIFT) + 1);
        assert_eq!(t.prefix(o.slot), Some(2));
        assert_eq!(t.prefix(1 - o.slot), Some(0));
    }

    #[test]
    fn samples_pair_inputs_with_the_streams_next_suffix() {
        let acc: Vec<(u64, u64)> = (0..8u64).map(|i| ((i * 3) << SUFFIX_SHIFT, 1024)).collect();
        let (x, y) = training_samples(&acc, &TinFetchConfig::default());
        // The 4th to 7th accesses (history ≥ 4) make samples; the 8th has no successor.
        assert_eq!(y, vec![3.0; 4]);
        assert_eq!(x.len(), 4 * HISTORY);
        assert_eq!(x[HISTORY - 1], 9.0);
        assert_eq!(x[HISTORY - 2], -3.0);
    }

    fn model_file() -> crate::model::MlpFile {
        let dims = [10u32, 128, 16, 1];
        let mut rng = attune_workload::rng::Xoshiro256::new(5, 1);
        let layers = dims
            .windows(2)
            .map(|w| {
                let n = (w[0] * w[1]) as usize;
                let ws = (0..n)
                    .map(|_| (rng.next_f64() - 0.5) as f32 * 0.2)
                    .collect();
                (ws, vec![0.01; w[1] as usize])
            })
            .collect();
        let mut lo = vec![-DELTA_RANGE; 10];
        let mut hi = vec![DELTA_RANGE; 10];
        lo[9] = 0.0;
        hi[9] = SUFFIXES as f32;
        crate::model::MlpFile {
            kind: InputKind::TinFetch,
            joint: 1,
            dims: dims.to_vec(),
            scale_min: lo,
            scale_max: hi,
            layers,
            threshold: 0.5,
        }
    }

    #[test]
    fn a_weight_file_round_trips_and_predicts_inside_the_prefix() {
        let f = model_file();
        let b = f.encode();
        assert_eq!(crate::model::MlpFile::decode(&b).expect("test setup"), f);
        let m = QuantizedMlp::from_bytes(&b).expect("test setup");
        for last in [0.0, 4000.0, 8191.0] {
            let mut x = [0f32; HISTORY];
            x[HISTORY - 1] = last;
            assert!(TinFetch::predict(&m, &x) < SUFFIXES);
        }
    }

    #[test]
    fn every_flipped_byte_or_truncation_of_a_weight_file_is_an_error() {
        let b = model_file().encode();
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x5a;
            assert!(QuantizedMlp::from_bytes(&d).is_err(), "flip at {i}");
        }
        for n in 0..b.len() {
            assert!(
                QuantizedMlp::from_bytes(&b[..n]).is_err(),
                "truncated to {n}"
            );
        }
    }

    #[test]
    fn a_heimdall_model_is_refused_as_a_prefetch_model() {
        let mut f = model_file();
        f.kind = InputKind::Heimdall;
        f.dims[0] = 11;
        f.scale_min.push(0.0);
        f.scale_max.push(1.0);
        f.layers[0].0.extend(std::iter::repeat_n(0.0, 128));
        let m = QuantizedMlp::new(&f).expect("test setup");
        assert!(TinFetch::new(TinFetchConfig::default(), Some(m)).is_err());
    }

    fn access(offset: u64, size: u64, late_blocks: u64) -> Access {
        Access {
            offset,
            size,
            blocks: size.div_ceil(BLOCK_BYTES),
            late_blocks,
            ..Access::default()
        }
    }

    #[test]
    fn late_prefetches_deepen_only_their_own_streams_readahead() {
        let cfg = TinFetchConfig {
            network: false,
            ..TinFetchConfig::default()
        };
        let mut t = TinFetch::new(cfg, None).expect("test setup");
        let a = 3u64 << PREFIX_SHIFT;
        let b = 9u64 << PREFIX_SHIFT;
        let mut out = Vec::new();
        let mut lens = Vec::new();
        let mut pos = 0;
        for late in [0, 0, 1, 1, 1, 1, 1, 0] {
            out.clear();
            t.access(&access(a + pos, 65536, late), &mut out);
            pos += 65536;
            lens.push(out.first().map_or(0, |r| r.len / PREFETCH_BYTES));
        }
        // The first access starts the stream; late ones double its depth up to 8 × 128 KB.
        assert_eq!(lens, vec![0, 1, 2, 4, 8, 8, 8, 8]);
        // Stream b has seen no late prefetch: its readahead is 128 KB.
        t.access(&access(b, 65536, 0), &mut out);
        out.clear();
        t.access(&access(b + 65536, 65536, 0), &mut out);
        assert_eq!(out[0].len, PREFETCH_BYTES);
        assert_eq!(out[0].offset, b + 2 * 65536);
    }

    #[test]
    fn the_pause_judges_the_network_by_its_own_hits() {
        use attune_workload::trace::{BlockRecord, IoKind};
        // A sequential stream (readahead hits, 7 accesses in 8) interleaved with one that jumps ahead by 256 KiB
        // to 1 MiB at random and never reads a block twice (the network's predictions are
        // hardly ever used).
        let mut rng = attune_workload::rng::Xoshiro256::new(3, 1);
        let seq = 1u64 << 40;
        let (mut rnd, mut pos) = (0u64, seq);
        let trace: Vec<BlockRecord> = (0..4000u64)
            .map(|i| {
                let offset = if i % 8 != 0 {
                    pos += 4096;
                    pos
                } else {
                    rnd += (64 + rng.next_u64() % 192) * 4096;
                    rnd
                };
                BlockRecord {
                    timestamp_ns: i * 100_000_000,
                    offset,
                    size: 4096,
                    kind: IoKind::Read,
                    latency_ns: 0,
                }
            })
            .collect();
        let run = |network_yield| {
            let cfg = TinFetchConfig {
                network_yield,
                ..TinFetchConfig::default()
            };
            let model = QuantizedMlp::new(&model_file()).expect("test setup");
            let mut t = TinFetch::new(cfg, Some(model)).expect("test setup");
            let m = super::super::evaluate(&trace, &mut t, &super::super::EvalConfig::default());
            (t.inferences, m.hit_blocks)
        };
        let (own, own_hits) = run(true);
        let (all, all_hits) = run(false);
        // Judged by every prefetch's hits, readahead's success keeps the useless network on.
        assert!(all > 300, "{all}");
        assert!(own < all / 4, "own {own}, all {all}");
        assert!(own_hits + 20 >= all_hits, "{own_hits} vs {all_hits}");
    }

    #[test]
    fn depth_max_is_checked_and_bounds_the_readahead() {
        for bad in [0, DEPTH_LIMIT + 1] {
            let cfg = TinFetchConfig {
                network: false,
                depth_max: bad,
                ..TinFetchConfig::default()
            };
            assert!(TinFetch::new(cfg, None).is_err(), "depth_max {bad}");
        }
        let cfg = TinFetchConfig {
            network: false,
            depth_max: 2,
            ..TinFetchConfig::default()
        };
        let mut t = TinFetch::new(cfg, None).expect("test setup");
        let mut out = Vec::new();
        for i in 0..6u64 {
            out.clear();
            t.access(&access(i * 4096, 4096, 1), &mut out);
        }
        assert_eq!(out[0].len, 2 * PREFETCH_BYTES);
        // Without the adaptive part the depth stays at 128 KB.
        let cfg = TinFetchConfig {
            network: false,
            adaptive: false,
            ..TinFetchConfig::default()
        };
        let mut t = TinFetch::new(cfg, None).expect("test setup");
        for i in 0..6u64 {
            out.clear();
            t.access(&access(i * 4096, 4096, 1), &mut out);
        }
        assert_eq!(out[0].len, PREFETCH_BYTES);
    }

    #[test]
    fn without_a_model_the_network_must_be_off() {
        assert!(TinFetch::new(TinFetchConfig::default(), None).is_err());
        let cfg = TinFetchConfig {
            network: false,
            ..TinFetchConfig::default()
        };
        let mut t = TinFetch::new(cfg, None).expect("test setup");
        let mut out = Vec::new();
        t.access(
            &Access {
                offset: 0,
                size: 4096,
                blocks: 1,
                ..Access::default()
            },
            &mut out,
        );
        t.access(
            &Access {
                offset: 4096,
                size: 4096,
                blocks: 1,
                ..Access::default()
            },
            &mut out,
        );
        assert_eq!(
            out,
            vec![PrefetchRange {
                offset: 8192,
                len: PREFETCH_BYTES
            }]
        );
    }
}
