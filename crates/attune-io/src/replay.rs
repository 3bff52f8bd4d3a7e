//! Trace-driven simulation of one device: every I/O of a trace submitted to one [`Ssd`] in time
//! order, with the outcome and (for reads) Heimdall's raw features as the device would have seen
//! them at submission. This is the data the Heimdall trainer labels.
//!
//! Thread-safety: pure function over owned values.

use attune_workload::trace::{BlockRecord, IoKind};

use crate::error::Result;
use crate::features::{FeatureTracker, HEIMDALL_FEATURES, LIVE_FEATURES};
use crate::ssd::{IoRequest, Ssd, SsdParams, SsdStats};

/// The outcome of one I/O in a replay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplayRow {
    /// Arrival time in nanoseconds.
    pub timestamp_ns: u64,
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub size: u32,
    /// Read or write.
    pub kind: IoKind,
    /// Latency in nanoseconds.
    pub latency_ns: u64,
    /// Outstanding I/Os at arrival.
    pub queue_len: u32,
    /// Pages served by chips in a garbage-collection busy period (ground truth of "busy").
    pub gc_pages: u32,
    /// Heimdall's raw features at submission (meaningful for every I/O, used for reads).
    pub features: [f32; HEIMDALL_FEATURES],
    /// The live (in-flight) features at submission ([`FeatureTracker::live`]).
    pub live: [f32; LIVE_FEATURES],
}

/// A replay's rows and the device's counters.
#[derive(Clone, Debug)]
pub struct Replay {
    /// One row per I/O, in submission order.
    pub rows: Vec<ReplayRow>,
    /// The device's counters at the end.
    pub stats: SsdStats,
}

/// Replays `records` (sorted by time) on a fresh device.
pub fn replay(records: &[BlockRecord], params: &SsdParams, seed: u64) -> Result<Replay> {
    let mut ssd = Ssd::new(params.clone(), seed)?;
    let mut tracker = FeatureTracker::new();
    let mut rows = Vec::with_capacity(records.len());
    for r in records {
        let now = r.timestamp_ns.max(ssd.now_ns());
        tracker.observe(now);
        let live = tracker.live(now);
        let c = ssd.submit(IoRequest {
            time_ns: r.timestamp_ns,
            offset: r.offset,
            size: r.size,
            kind: r.kind,
        });
        let features = tracker.heimdall(r.size, c.queue_len);
        match r.kind {
            IoKind::Read => tracker.record(c.finish_ns, c.latency_ns(), c.queue_len, r.size),
            IoKind::Write => tracker.record_write(c.finish_ns),
        }
        rows.push(ReplayRow {
            timestamp_ns: c.submit_ns,
            offset: r.offset,
            size: r.size,
            kind: r.kind,
            latency_ns: c.latency_ns(),
            queue_len: c.queue_len,
            gc_pages: c.gc_pages,
            features,
            live,
        });
    }
    Ok(Replay {
        rows,
        stats: ssd.stats(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_is_deterministic_and_sees_busy_periods() {
        let recs: Vec<BlockRecord> = (0..3000u64)
            .map(|i| BlockRecord {
                timestamp_ns: i * 20_000,
                offset: (i * 2_654_435_761) % (1 << 34),
                size: if i % 4 == 0 { 4096 } else { 131_072 },
                kind: if i % 4 == 0 {
                    IoKind::Read
                } else {
                    IoKind::Write
                },
                latency_ns: 0,
            })
            .collect();
        let p = SsdParams {
            gc_every_bytes: 16 << 20,
            ..SsdParams::default()
        };
        let a = replay(&recs, &p, 5).unwrap();
        let b = replay(&recs, &p, 5).unwrap();
        assert_eq!(a.rows, b.rows);
        assert!(a.stats.gc_periods > 0, "{:?}", a.stats);
        assert!(a.rows.iter().any(|r| r.gc_pages > 0));
        let bad = SsdParams {
            channels: 0,
            ..SsdParams::default()
        };
        assert!(replay(&recs, &bad, 1)
            .unwrap_err()
            .to_string()
            .contains("`channels`"));
    }
}
