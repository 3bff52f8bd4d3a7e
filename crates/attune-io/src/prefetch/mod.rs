//! Block prefetching: TinFetch (a tiny neural prefetcher over disentangled prefix streams), the
//! heuristic baselines, and the trace-driven evaluator of the TinFetch chapter (§4.4–4.5).
//!
//! * [`eval`]: replays a block trace against one prefetcher with an **unlimited** cache of
//!   prefetched 4 KiB blocks and a **20 ms pending queue** (a prefetched block is usable 20 ms after
//!   it was issued); reports hit rate, accuracy, timeliness, storage bandwidth load and the score
//!   (hit rate ÷ bandwidth load).
//! * [`tinfetch`]: the hybrid prefetcher: 8 MiB prefixes, the 32 most recent prefix streams,
//!   readahead when an access continues its stream, otherwise (more than 3 suffixes seen) a
//!   10→128→16→1 network run in integers predicts the next suffix; adaptive aggressiveness.
//! * [`baselines`]: Linux-style readahead (ramp-up), stride, first-order Markov, Leap's majority
//!   trend, and externally supplied predictions (the learned sequence baseline runs in Python).
//! * [`synth`]: deterministic synthetic traces (interleaved sequential, strided, random, mixed),
//!   the "fio-like" workloads of the evaluation.
//!
//! Units: the cache and every load figure count 4 KiB blocks ([`BLOCK_BYTES`]); TinFetch suffixes
//! count 1 KiB units inside an 8 MiB prefix (0..8192, the chapter's 2^13). Design note:
//! `docs/tinfetch.md`.
//!
//! Thread-safety: every type is a single-owner value; a prefetcher is driven by one evaluator.

pub mod baselines;
pub mod eval;
pub mod synth;
pub mod tinfetch;

pub use eval::{evaluate, EvalConfig, Metrics};
pub use tinfetch::{TinFetch, TinFetchConfig};

/// Cache and load granularity: one 4 KiB block.
pub const BLOCK_BYTES: u64 = 4096;
/// Every method's prefetch size (the chapter's 128 KB), in bytes.
pub const PREFETCH_BYTES: u64 = 128 * 1024;
/// The most one decision may request, in bytes (a bound for adaptive sizes).
pub const PREFETCH_BYTES_MAX: u64 = 1024 * 1024;

/// One demand access as a prefetcher sees it, with the evaluator's feedback on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Issue time, nanoseconds from the trace start.
    pub time_ns: u64,
    /// First byte.
    pub offset: u64,
    /// Bytes (at least 1).
    pub size: u64,
    /// A write (the prefetcher still sees it: the cache is shared by reads and writes).
    pub write: bool,
    /// Blocks this access touched.
    pub blocks: u64,
    /// Of those, blocks served from the cache (prefetched and arrived).
    pub hit_blocks: u64,
    /// Prefetched blocks used for the first time by this access (in time).
    pub useful_blocks: u64,
    /// Blocks this access found prefetched but still pending (late prefetches).
    pub late_blocks: u64,
    /// Blocks the prefetcher's requests after the previous access actually fetched (requests
    /// for cached or pending blocks cost nothing).
    pub fetched_prev_blocks: u64,
}

impl Access {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.size)
    }
}

/// A prefetch request: bytes `[offset, offset + len)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefetchRange {
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

/// A block prefetcher: sees every demand access in order and may request ranges to prefetch.
pub trait Prefetcher: Send {
    /// Short method name for reports (`tinfetch`, `readahead`, ...).
    fn name(&self) -> String;
    /// Observes one access (after the cache served it) and appends prefetch requests to `out`.
    fn access(&mut self, a: &Access, out: &mut Vec<PrefetchRange>);
}

/// The method names [`build`] knows (besides the TinFetch ablations of [`tinfetch_variant`]).
pub const METHODS: [&str; 6] = ["none", "readahead", "stride", "markov", "leap", "tinfetch"];

/// TinFetch's ablation variants, by name.
pub const TINFETCH_VARIANTS: [&str; 10] = [
    "tinfetch",
    "tinfetch-no-network",
    "tinfetch-no-readahead",
    "tinfetch-static",
    "tinfetch-zero-pad",
    "tinfetch-centered",
    "tinfetch-one-stream",
    "tinfetch-global-depth",
    "tinfetch-depth-4",
    "tinfetch-shared-yield",
];

/// The configuration of a TinFetch variant name (`None`: not a TinFetch name).
pub fn tinfetch_variant(name: &str) -> Option<TinFetchConfig> {
    let d = TinFetchConfig::default();
    Some(match name {
        "tinfetch" => d,
        "tinfetch-no-network" => TinFetchConfig {
            network: false,
            ..d
        },
        "tinfetch-no-readahead" => TinFetchConfig {
            readahead: false,
            ..d
        },
        "tinfetch-static" => TinFetchConfig {
            adaptive: false,
            ..d
        },
        "tinfetch-zero-pad" => TinFetchConfig {
            padding: tinfetch::Padding::Zero,
            ..d
        },
        "tinfetch-centered" => TinFetchConfig {
            placement: tinfetch::Placement::Centered,
            ..d
        },
        "tinfetch-one-stream" => TinFetchConfig {
            separate: false,
            ..d
        },
        "tinfetch-global-depth" => TinFetchConfig {
            stream_depth: false,
            ..d
        },
        "tinfetch-depth-4" => TinFetchConfig { depth_max: 4, ..d },
        "tinfetch-shared-yield" => TinFetchConfig {
            network_yield: false,
            ..d
        },
        _ => return None,
    })
}

/// Builds a method by name: a baseline, or a TinFetch variant with `model` (a TinFetch weight
/// file; required unless the variant has no network).
pub fn build(
    name: &str,
    model: Option<&crate::model::QuantizedMlp>,
) -> crate::Result<Box<dyn Prefetcher>> {
    if let Some(cfg) = tinfetch_variant(name) {
        let model = if cfg.network { model.cloned() } else { None };
        return Ok(Box::new(TinFetch::new(cfg, model)?.named(name)));
    }
    by_name(name)
}

/// Builds a heuristic baseline by name.
pub fn by_name(name: &str) -> crate::Result<Box<dyn Prefetcher>> {
    Ok(match name {
        "none" => Box::new(baselines::NoPrefetch),
        "readahead" => Box::new(baselines::Readahead::new()),
        "stride" => Box::new(baselines::Stride::new()),
        "markov" => Box::new(baselines::Markov::new()),
        "leap" => Box::new(baselines::Leap::new()),
        other => {
            return Err(crate::error::invalid(
                "method",
                other,
                "unknown prefetch method; valid: none, readahead, stride, markov, leap, tinfetch, \
                 tinfetch-no-network, tinfetch-no-readahead, tinfetch-static, tinfetch-zero-pad, \
                 tinfetch-centered, tinfetch-one-stream, tinfetch-global-depth, tinfetch-depth-4, \
                 tinfetch-shared-yield",
            ))
        }
    })
}
