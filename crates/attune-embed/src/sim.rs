//! Hit-rate simulation of a policy over grouped requests, without values: what the benchmark and
//! `attune embed simulate` run.

use crate::policy::{request, tag, Policy, PolicyKind};

/// Individual and perfect hits of one simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Requests.
    pub requests: u64,
    /// Keys (requests × tables).
    pub keys: u64,
    /// Keys found in the cache at the start of their request.
    pub hits: u64,
    /// Requests whose every key was found.
    pub perfect: u64,
}

impl SimStats {
    /// Individual hit rate.
    pub fn hit_rate(&self) -> f64 {
        self.hits as f64 / self.keys.max(1) as f64
    }
    /// Perfect-hit rate.
    pub fn perfect_rate(&self) -> f64 {
        self.perfect as f64 / self.requests.max(1) as f64
    }
}

/// A policy fed grouped requests of untagged per-table keys.
pub struct GroupSim {
    policy: Box<dyn Policy>,
    hits: Vec<bool>,
    tagged: Vec<u64>,
    evicted: Vec<(u64, u32)>,
    /// Counters; reset with [`GroupSim::reset_stats`] after a warm-up.
    pub stats: SimStats,
}

impl GroupSim {
    /// A simulation of `kind` with a budget of `capacity` rows of
    /// [`crate::policy::DEFAULT_ROW_BYTES`] (what a charged history is taken from).
    pub fn new(kind: &PolicyKind, capacity: usize) -> Self {
        Self::with_row_bytes(kind, capacity, crate::policy::DEFAULT_ROW_BYTES)
    }

    /// A simulation of `kind` with a budget of `capacity` rows of `row_bytes` bytes each.
    pub fn with_row_bytes(kind: &PolicyKind, capacity: usize, row_bytes: usize) -> Self {
        GroupSim {
            policy: kind.build_for(capacity, row_bytes),
            hits: Vec::new(),
            tagged: Vec::new(),
            evicted: Vec::new(),
            stats: SimStats::default(),
        }
    }

    /// One request: `keys[t]` is the key of table `t`.
    pub fn request(&mut self, keys: &[u64]) {
        self.tagged.clear();
        self.tagged
            .extend(keys.iter().enumerate().map(|(t, &k)| tag(t, k)));
        self.hits.resize(keys.len(), false);
        self.evicted.clear();
        let agg = request(
            self.policy.as_mut(),
            &self.tagged,
            &mut self.hits,
            &mut self.evicted,
        );
        self.stats.requests += 1;
        self.stats.keys += keys.len() as u64;
        self.stats.hits += u64::from(agg);
        self.stats.perfect += u64::from(agg as usize == keys.len());
    }

    /// Zeroes the counters (the cache keeps its contents).
    pub fn reset_stats(&mut self) {
        self.stats = SimStats::default();
    }
}
