//! The per-device history an admission model sees: queue length now (all I/Os), and the queue
//! lengths, latencies and throughputs of the last **reads** that **completed before** the decision.
//!
//! Only completions at or before the decision time are visible (a deployable model cannot see
//! the future), so a tracker keeps the pending I/Os in a time-ordered heap and moves them into
//! the history as the clock passes their finish time. History entries are in completion order,
//! newest first; before enough I/Os have completed the missing entries are zero.
//!
//! Heimdall's raw features (11 for one I/O, `10 + P` for a joint group of P reads):
//! `[size_1 .. size_P (bytes), queue_len, q_1, q_2, q_3, lat_1, lat_2, lat_3 (µs),
//!  thpt_1, thpt_2, thpt_3 (bytes/µs)]`, where index 1 is the most recent completion.
//! LinnOS's 31 digitised inputs are built from the same history ([`linnos_inputs`]).
//!
//! The history goes stale: when a device enters a busy period its reads stop completing, so the
//! newest completion can be milliseconds old and still look fast. The *live* features
//! ([`FeatureTracker::live`]) say what the router knows about the reads still in flight at the
//! decision: `[oldest_inflight, since_done, inflight_reads]`, the age of the oldest read
//! submitted and not yet completed (0 when none), the time since the newest read completion (0
//! before the first), and how many reads are outstanding. Ages are in µs, capped at
//! [`LIVE_AGE_CAP_US`] and taken as `ln(1 + µs)`: a read 300 µs old and one 3 ms old must differ
//! as much after min-max scaling as one 3 ms and one 30 ms old (linear scaling over 0..100 ms
//! would squeeze every age that matters into a few quantisation steps). A `HeimdallLive` model takes Heimdall's features followed by these 3
//! (`13 + P` inputs, [`HEIMDALL_LIVE_FEATURES`] for one read).
//!
//! Thread-safety: a tracker is a single-owner value.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Completions kept in the history (LinnOS uses 4, Heimdall 3).
pub const HISTORY: usize = 4;
/// Heimdall's history depth.
pub const HEIMDALL_DEPTH: usize = 3;
/// Raw features of a Heimdall model deciding for one I/O.
pub const HEIMDALL_FEATURES: usize = 11;
/// Inputs of the LinnOS model: 3 digits of the queue length, 3 of each of 4 past queue lengths,
/// 4 of each of 4 past latencies (µs).
pub const LINNOS_FEATURES: usize = 31;
/// The live features appended to Heimdall's ([`FeatureTracker::live`]).
pub const LIVE_FEATURES: usize = 3;
/// Raw features of a `HeimdallLive` model deciding for one I/O.
pub const HEIMDALL_LIVE_FEATURES: usize = HEIMDALL_FEATURES + LIVE_FEATURES;
/// Cap of the live features' ages, in µs (100 ms: longer than any busy period of the device
/// model; a history older than that says nothing more).
pub const LIVE_AGE_CAP_US: f32 = 100_000.0;
/// Largest joint-inference group.
pub const JOINT_MAX: usize = 9;

/// One completed I/O as the history keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Done {
    /// Queue length it saw at submission.
    pub queue_len: f32,
    /// Latency in microseconds.
    pub latency_us: f32,
    /// Bytes per microsecond.
    pub thpt: f32,
}

/// A submitted I/O: (finish ns, sequence, queue length, latency ns, size, is a read).
type Pending = (u64, u64, u32, u64, u32, bool);

/// The history of one device (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct FeatureTracker {
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    history: [Done; HISTORY],
    ewma_latency_us: f32,
    ewma_queue_len: f32,
    last_read_done_ns: u64,
}

/// Weight of a new completion in the running averages (C3's EWMA). 0.1: about the last ten
/// completions matter.
pub const EWMA_ALPHA: f32 = 0.1;

impl FeatureTracker {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a read submitted to the device: it enters the history once the clock passes
    /// `finish_ns`.
    pub fn record(&mut self, finish_ns: u64, latency_ns: u64, queue_len: u32, size: u32) {
        self.seq += 1;
        let p = (finish_ns, self.seq, queue_len, latency_ns, size, true);
        self.pending.push(Reverse(p));
    }

    /// Records a write: it counts as pending until `finish_ns` but never enters the history
    /// (a write is acknowledged from the buffer; its latency says little about the flash).
    pub fn record_write(&mut self, finish_ns: u64) {
        self.seq += 1;
        self.pending
            .push(Reverse((finish_ns, self.seq, 0, 0, 0, false)));
    }

    /// Moves every I/O finished at or before `now_ns` into the history.
    pub fn observe(&mut self, now_ns: u64) {
        while let Some(Reverse((finish, _, q, lat, size, read))) = self.pending.peek().copied() {
            if finish > now_ns {
                break;
            }
            self.pending.pop();
            if !read {
                continue;
            }
            self.last_read_done_ns = finish;
            let latency_us = (lat as f32 / 1e3).max(1e-3);
            if self.ewma_latency_us == 0.0 {
                self.ewma_latency_us = latency_us;
                self.ewma_queue_len = q as f32;
            } else {
                self.ewma_latency_us += EWMA_ALPHA * (latency_us - self.ewma_latency_us);
                self.ewma_queue_len += EWMA_ALPHA * (q as f32 - self.ewma_queue_len);
            }
            self.history.rotate_right(1);
            self.history[0] = Done {
                queue_len: q as f32,
                latency_us,
                thpt: size as f32 / latency_us,
            };
        }
    }

    /// The history, newest first.
    pub fn history(&self) -> &[Done; HISTORY] {
        &self.history
    }

    /// Running average of completed latencies in µs (0 before the first completion).
    pub fn ewma_latency_us(&self) -> f32 {
        self.ewma_latency_us
    }

    /// Running average of the queue lengths completed I/Os saw.
    pub fn ewma_queue_len(&self) -> f32 {
        self.ewma_queue_len
    }

    /// When the newest read in the history completed (0 before the first): how old the history
    /// is.
    pub fn last_read_done_ns(&self) -> u64 {
        self.last_read_done_ns
    }

    /// Reads submitted and not yet seen to complete (call [`FeatureTracker::observe`] first).
    pub fn reads_in_flight(&self) -> usize {
        self.pending.iter().filter(|Reverse(p)| p.5).count()
    }

    /// I/Os submitted but not yet seen to complete.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The live features at `now_ns` (call [`FeatureTracker::observe`] with `now_ns` first):
    /// `[ln(1 + oldest in-flight read's age µs), ln(1 + µs since the newest read completion),
    /// reads in flight]`.
    /// The scan over the in-flight I/Os is linear; a device driver would keep the submission
    /// order instead.
    pub fn live(&self, now_ns: u64) -> [f32; LIVE_FEATURES] {
        let mut oldest = u64::MAX;
        let mut reads = 0u32;
        for Reverse((finish, _, _, lat, _, read)) in self.pending.iter() {
            if *read && *finish > now_ns {
                reads += 1;
                oldest = oldest.min(finish.saturating_sub(*lat));
            }
        }
        let age_us = |since: u64| {
            let us = (now_ns.saturating_sub(since) as f32 / 1e3).min(LIVE_AGE_CAP_US);
            (1.0 + us).ln()
        };
        [
            if reads == 0 { 0.0 } else { age_us(oldest) },
            if self.last_read_done_ns == 0 {
                0.0
            } else {
                age_us(self.last_read_done_ns)
            },
            reads as f32,
        ]
    }

    /// Heimdall's features followed by the live ones ([`HEIMDALL_LIVE_FEATURES`]).
    pub fn heimdall_live(
        &self,
        size: u32,
        queue_len: u32,
        now_ns: u64,
    ) -> [f32; HEIMDALL_LIVE_FEATURES] {
        let mut f = [0f32; HEIMDALL_LIVE_FEATURES];
        f[..HEIMDALL_FEATURES].copy_from_slice(&self.heimdall(size, queue_len));
        f[HEIMDALL_FEATURES..].copy_from_slice(&self.live(now_ns));
        f
    }

    /// Heimdall's 11 raw features for an I/O of `size` bytes seeing `queue_len`.
    pub fn heimdall(&self, size: u32, queue_len: u32) -> [f32; HEIMDALL_FEATURES] {
        let h = &self.history;
        let mut f = [0f32; HEIMDALL_FEATURES];
        f[0] = size as f32;
        f[1] = queue_len as f32;
        for i in 0..HEIMDALL_DEPTH {
            f[2 + i] = h[i].queue_len;
            f[5 + i] = h[i].latency_us;
            f[8 + i] = h[i].thpt;
        }
        f
    }
}

/// Writes the `digits` least significant decimal digits of `v` (capped at 10^digits - 1), most
/// significant first.
fn digits(out: &mut [f32], v: u64, n: usize) {
    let cap = 10u64.pow(n as u32) - 1;
    let mut v = v.min(cap);
    for i in (0..n).rev() {
        out[i] = (v % 10) as f32;
        v /= 10;
    }
}

/// LinnOS's 31 digitised inputs: the current queue length (3 digits), the last 4 queue lengths
/// (3 digits each) and the last 4 latencies in µs (4 digits each).
pub fn linnos_inputs(t: &FeatureTracker, queue_len: u32) -> [f32; LINNOS_FEATURES] {
    let mut f = [0f32; LINNOS_FEATURES];
    digits(&mut f[0..3], u64::from(queue_len), 3);
    let h = t.history();
    for i in 0..HISTORY {
        digits(&mut f[3 + 3 * i..6 + 3 * i], h[i].queue_len as u64, 3);
        digits(&mut f[15 + 4 * i..19 + 4 * i], h[i].latency_us as u64, 4);
    }
    f
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_finished_ios_enter_the_history() {
        let mut t = FeatureTracker::new();
        t.record(100, 50_000, 2, 4096);
        t.record(300, 20_000, 1, 8192);
        t.observe(200);
        let f = t.heimdall(4096, 3);
        assert_eq!(f[1], 3.0);
        assert_eq!(f[2], 2.0);
        assert_eq!(f[5], 50.0);
        assert_eq!(f[6], 0.0);
        t.observe(300);
        let f = t.heimdall(4096, 0);
        assert_eq!(f[5], 20.0);
        assert_eq!(f[6], 50.0);
        assert!((f[8] - 8192.0 / 20.0).abs() < 1e-3);
        assert_eq!(t.pending(), 0);
    }

    #[test]
    fn live_features_see_the_reads_in_flight() {
        let mut t = FeatureTracker::new();
        assert_eq!(t.live(0), [0.0, 0.0, 0.0]);
        // Read A: submitted at 1000, done at 5000. Read B: submitted at 2000, done at 90_000.
        t.record(5_000, 4_000, 0, 4096);
        t.record(90_000, 88_000, 1, 4096);
        t.record_write(95_000);
        let ln = |us: f32| (1.0 + us).ln();
        t.observe(3_000);
        assert_eq!(t.live(3_000), [ln(2.0), 0.0, 2.0]);
        t.observe(10_000);
        // A completed at 5000; B (submitted 2000) is the oldest in flight; the write is no read.
        assert_eq!(t.live(10_000), [ln(8.0), ln(5.0), 1.0]);
        t.observe(100_000);
        assert_eq!(t.live(100_000), [0.0, ln(10.0), 0.0]);
        let f = t.heimdall_live(4096, 3, 100_000);
        assert_eq!(&f[..HEIMDALL_FEATURES], &t.heimdall(4096, 3));
        assert_eq!(&f[HEIMDALL_FEATURES..], &[0.0, ln(10.0), 0.0]);
        assert_eq!(t.live(u64::MAX)[1], ln(LIVE_AGE_CAP_US));
    }

    #[test]
    fn linnos_digits() {
        let mut t = FeatureTracker::new();
        t.record(1, 1_234_000, 56, 4096);
        t.observe(1);
        let f = linnos_inputs(&t, 7);
        assert_eq!(&f[0..3], &[0.0, 0.0, 7.0]);
        assert_eq!(&f[3..6], &[0.0, 5.0, 6.0]);
        assert_eq!(&f[15..19], &[1.0, 2.0, 3.0, 4.0]);
        t.record(2, 99_999_000, 5000, 4096);
        t.observe(2);
        let f = linnos_inputs(&t, 0);
        assert_eq!(&f[3..6], &[9.0, 9.0, 9.0]);
        assert_eq!(&f[15..19], &[9.0, 9.0, 9.0, 9.0]);
    }
}
