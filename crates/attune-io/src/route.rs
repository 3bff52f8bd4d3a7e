//! Replica routing: two or three simulated SSDs, each with its own trace (its own clients), whose
//! reads may be served by any replica (they all hold the data). Writes go to their own device.
//! A policy picks the replica of every read:
//!
//! * `AlwaysAdmit`: the read's own device (no rerouting; the chapter's "baseline").
//! * `Random`: a replica drawn uniformly (seeded).
//! * `Hedging { timeout_ns }`: the own device; if the read has not completed after `timeout_ns`
//!   (the chapter uses the p98 latency), a backup read goes to the next replica and the first
//!   answer wins. Both reads load their devices.
//! * `C3`: C3's replica score `R - 1/mu + (1 + os + q)^3 / mu` with EWMAs of the response time `R`,
//!   the queue length `q` completions reported, the service time `1/mu` (response over queue
//!   length + 1) and `os` the reads outstanding from this client; the lowest score wins.
//! * `Model`: one admission model per device (Heimdall or LinnOS). The own device's model decides;
//!   a declined read goes to the next replica, whose model decides in turn; the last replica
//!   always admits (the chapter's rule). With `home_when_all_decline` the last replica's model
//!   is asked too, and a read every replica declines stays on its own device: a busy replica is
//!   not handed the reads of another busy one (a variant, off by default). LinnOS models decide per 4 KiB page (a read is declined if any page is
//!   predicted slow), as LinnOS does.
//!
//! Models see only what a deployed one could: completions before the decision
//! ([`crate::features`]). The simulation is deterministic for a given seed.
//!
//! Thread-safety: pure function over owned values.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use attune_workload::rng::Xoshiro256;
use attune_workload::trace::{BlockRecord, IoKind};

use crate::error::{invalid, Result};
use crate::features::{linnos_inputs, FeatureTracker};
use crate::model::{InputKind, QuantizedMlp};
use crate::ssd::{IoRequest, Ssd, SsdParams, SsdStats};

/// A pending backup read: (time, read index, device, home device, record index).
type Hedge = (u64, usize, u8, u8, u32);

/// Most replicas a simulation takes.
pub const REPLICAS_MAX: usize = 3;

/// How reads are routed.
#[derive(Clone, Debug)]
pub enum Policy {
    /// Every read to its own device.
    AlwaysAdmit,
    /// A uniformly random replica.
    Random,
    /// Backup read after a timeout.
    Hedging {
        /// Time after which the backup read is sent.
        timeout_ns: u64,
    },
    /// C3's replica ranking.
    C3,
    /// One admission model per device.
    Model {
        /// Models in device order (`models.len()` = replicas).
        models: Vec<QuantizedMlp>,
        /// Ask every replica's model; a read all of them decline stays home (see above).
        home_when_all_decline: bool,
    },
}

impl Policy {
    /// Short name for reports (`baseline`, `random`, `hedging`, `c3`, `heimdall`, `linnos`).
    pub fn name(&self) -> &'static str {
        match self {
            Policy::AlwaysAdmit => "baseline",
            Policy::Random => "random",
            Policy::Hedging { .. } => "hedging",
            Policy::C3 => "c3",
            Policy::Model {
                models,
                home_when_all_decline,
            } => match (
                models.first().map(QuantizedMlp::kind),
                home_when_all_decline,
            ) {
                (Some(InputKind::LinnOs), _) => "linnos",
                (_, true) => "heimdall-home",
                _ => "heimdall",
            },
        }
    }
}

/// The outcome of a routed simulation.
#[derive(Clone, Debug, Default)]
pub struct RouteResult {
    /// Latency of every read (all devices' traces), in arrival order, nanoseconds.
    pub read_latency_ns: Vec<u64>,
    /// The device whose trace each read came from.
    pub home: Vec<u8>,
    /// Reads served away from their own device.
    pub redirected: u64,
    /// Backup reads sent by hedging.
    pub hedged: u64,
    /// Model inferences run.
    pub inferences: u64,
    /// Each device's counters.
    pub device_stats: Vec<SsdStats>,
}

struct Dev {
    ssd: Ssd,
    tracker: FeatureTracker,
}

impl Dev {
    fn submit(&mut self, time_ns: u64, r: &BlockRecord, kind: IoKind) -> u64 {
        self.tracker.observe(time_ns.max(self.ssd.now_ns()));
        let c = self.ssd.submit(IoRequest {
            time_ns,
            offset: r.offset,
            size: r.size,
            kind,
        });
        match kind {
            IoKind::Read => self
                .tracker
                .record(c.finish_ns, c.latency_ns(), c.queue_len, r.size),
            IoKind::Write => self.tracker.record_write(c.finish_ns),
        }
        c.latency_ns()
    }
}

fn c3_score(d: &mut Dev, t: u64) -> f64 {
    d.tracker.observe(t.max(d.ssd.now_ns()));
    let r = f64::from(d.tracker.ewma_latency_us());
    let q = f64::from(d.tracker.ewma_queue_len());
    let service = r / (1.0 + q);
    let os = d.tracker.pending() as f64;
    r - service + (1.0 + os + q).powi(3) * service
}

/// Simulates `traces.len()` replicas (2 or 3), trace `i` issued by device `i`'s clients.
pub fn simulate(
    traces: &[Vec<BlockRecord>],
    params: &SsdParams,
    policy: &Policy,
    seed: u64,
) -> Result<RouteResult> {
    let n = traces.len();
    if !(2..=REPLICAS_MAX).contains(&n) {
        return Err(invalid("replicas", n, "must be 2 or 3"));
    }
    if let Policy::Model { models, .. } = policy {
        if models.len() != n {
            return Err(invalid(
                "models",
                models.len(),
                format!("one model per replica is needed ({n})"),
            ));
        }
        if let Some(m) = models.iter().find(|m| m.joint() != 1) {
            return Err(invalid(
                "models",
                m.joint(),
                "routing decides per read: models must have joint size 1",
            ));
        }
    }
    if let Policy::Hedging { timeout_ns: 0 } = policy {
        return Err(invalid("timeout_ns", 0, "must be positive"));
    }
    let mut devs = Vec::with_capacity(n);
    for i in 0..n {
        devs.push(Dev {
            ssd: Ssd::new(params.clone(), seed.wrapping_add(i as u64 * 0x9e37))?,
            tracker: FeatureTracker::new(),
        });
    }
    // Merge the traces by time (ties: lower device first).
    let mut order: Vec<(u64, u8, u32)> = Vec::new();
    for (d, t) in traces.iter().enumerate() {
        for (i, r) in t.iter().enumerate() {
            order.push((r.timestamp_ns, d as u8, i as u32));
        }
    }
    order.sort_unstable();
    let mut rng = Xoshiro256::new(seed, 0x7e57);
    let mut out = RouteResult::default();
    // Pending backup reads: (time, read index, device, home, record index).
    let mut hedges: BinaryHeap<Reverse<Hedge>> = BinaryHeap::new();
    let mut primary_latency: Vec<u64> = Vec::new();
    let fire = |until: u64,
                hedges: &mut BinaryHeap<Reverse<Hedge>>,
                devs: &mut Vec<Dev>,
                out: &mut RouteResult,
                primary_latency: &[u64],
                timeout: u64| {
        while let Some(Reverse((at, idx, dev, home, rec))) = hedges.peek().copied() {
            if at > until {
                break;
            }
            hedges.pop();
            let r = &traces[home as usize][rec as usize];
            let backup = devs[dev as usize].submit(at, r, IoKind::Read);
            out.read_latency_ns[idx] = primary_latency[idx].min(timeout + backup);
            out.hedged += 1;
        }
    };
    let timeout = match policy {
        Policy::Hedging { timeout_ns } => *timeout_ns,
        _ => 0,
    };
    for &(t, home, rec) in &order {
        let r = &traces[home as usize][rec as usize];
        let h = home as usize;
        if timeout > 0 {
            fire(
                t,
                &mut hedges,
                &mut devs,
                &mut out,
                &primary_latency,
                timeout,
            );
        }
        if r.kind == IoKind::Write {
            devs[h].submit(t, r, IoKind::Write);
            continue;
        }
        let target = match policy {
            Policy::AlwaysAdmit | Policy::Hedging { .. } => h,
            Policy::Random => rng.below(n as u64) as usize,
            Policy::C3 => {
                let mut best = (f64::INFINITY, h);
                for k in 0..n {
                    let d = (h + k) % n;
                    let s = c3_score(&mut devs[d], t);
                    if s < best.0 {
                        best = (s, d);
                    }
                }
                best.1
            }
            Policy::Model {
                models,
                home_when_all_decline,
            } => {
                let mut chosen = if *home_when_all_decline {
                    h
                } else {
                    (h + n - 1) % n
                };
                let asked = if *home_when_all_decline { n } else { n - 1 };
                for k in 0..asked {
                    let d = (h + k) % n;
                    let dev = &mut devs[d];
                    dev.tracker.observe(t.max(dev.ssd.now_ns()));
                    let q = dev.ssd.queue_len_at(t);
                    let m = &models[d];
                    let slow = match m.kind() {
                        InputKind::Heimdall => {
                            out.inferences += 1;
                            m.predicts_slow(&dev.tracker.heimdall(r.size, q))
                        }
                        // A prefetch model is no admission model: admit.
                        InputKind::TinFetch => false,
                        InputKind::LinnOs => {
                            let x = linnos_inputs(&dev.tracker, q);
                            let pages = u64::from(r.size.max(1)).div_ceil(4096);
                            out.inferences += pages;
                            (0..pages).fold(false, |acc, _| m.predicts_slow(&x) | acc)
                        }
                    };
                    if !slow {
                        chosen = d;
                        break;
                    }
                }
                chosen
            }
        };
        if target != h {
            out.redirected += 1;
        }
        let lat = devs[target].submit(t, r, IoKind::Read);
        let idx = out.read_latency_ns.len();
        out.read_latency_ns.push(lat);
        out.home.push(home);
        primary_latency.push(lat);
        if timeout > 0 && lat > timeout {
            hedges.push(Reverse((t + timeout, idx, ((h + 1) % n) as u8, home, rec)));
        }
    }
    if timeout > 0 {
        fire(
            u64::MAX,
            &mut hedges,
            &mut devs,
            &mut out,
            &primary_latency,
            timeout,
        );
    }
    out.device_stats = devs.iter().map(|d| d.ssd.stats()).collect();
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::tests::tiny;

    fn trace(heavy: bool, seed: u64) -> Vec<BlockRecord> {
        let mut rng = Xoshiro256::new(seed, 1);
        (0..4000u64)
            .map(|i| {
                let write = heavy && rng.below(10) < 7;
                BlockRecord {
                    timestamp_ns: i * 25_000,
                    offset: rng.below(1 << 22) * 4096,
                    size: if write {
                        131_072
                    } else {
                        4096 * (1 + rng.below(4) as u32)
                    },
                    kind: if write { IoKind::Write } else { IoKind::Read },
                    latency_ns: 0,
                }
            })
            .collect()
    }

    fn params() -> SsdParams {
        SsdParams {
            gc_every_bytes: 16 << 20,
            ..SsdParams::default()
        }
    }

    #[test]
    fn every_policy_serves_every_read_deterministically() {
        let traces = vec![trace(true, 1), trace(false, 2)];
        let reads = traces
            .iter()
            .flatten()
            .filter(|r| r.kind == IoKind::Read)
            .count();
        let q = QuantizedMlp::new(&tiny(1)).unwrap();
        let policies = [
            Policy::AlwaysAdmit,
            Policy::Random,
            Policy::Hedging {
                timeout_ns: 500_000,
            },
            Policy::C3,
            Policy::Model {
                models: vec![q.clone(), q.clone()],
                home_when_all_decline: false,
            },
            Policy::Model {
                models: vec![q.clone(), q],
                home_when_all_decline: true,
            },
        ];
        for p in &policies {
            let a = simulate(&traces, &params(), p, 9).unwrap();
            let b = simulate(&traces, &params(), p, 9).unwrap();
            assert_eq!(a.read_latency_ns.len(), reads, "{}", p.name());
            assert_eq!(a.read_latency_ns, b.read_latency_ns, "{}", p.name());
            assert!(a.read_latency_ns.iter().all(|&l| l > 0));
        }
    }

    #[test]
    fn baseline_never_redirects_and_random_does() {
        let traces = vec![trace(true, 1), trace(false, 2)];
        let a = simulate(&traces, &params(), &Policy::AlwaysAdmit, 1).unwrap();
        assert_eq!(a.redirected, 0);
        let r = simulate(&traces, &params(), &Policy::Random, 1).unwrap();
        assert!(r.redirected > 0);
    }

    #[test]
    fn hedging_never_makes_a_read_slower_than_its_primary_and_timeout() {
        let traces = vec![trace(true, 1), trace(false, 2)];
        let h = simulate(
            &traces,
            &params(),
            &Policy::Hedging {
                timeout_ns: 300_000,
            },
            1,
        )
        .unwrap();
        assert!(h.hedged > 0);
    }

    #[test]
    fn bad_setups_are_named() {
        let one = vec![trace(false, 1)];
        let e = simulate(&one, &params(), &Policy::AlwaysAdmit, 1).unwrap_err();
        assert!(e.to_string().contains("`replicas`"));
        let two = vec![trace(false, 1), trace(false, 2)];
        let q = QuantizedMlp::new(&tiny(1)).unwrap();
        let one_model = Policy::Model {
            models: vec![q],
            home_when_all_decline: false,
        };
        let e = simulate(&two, &params(), &one_model, 1).unwrap_err();
        assert!(e.to_string().contains("`models`"));
        let q3 = QuantizedMlp::new(&tiny(3)).unwrap();
        let p = Policy::Model {
            models: vec![q3.clone(), q3],
            home_when_all_decline: false,
        };
        assert!(simulate(&two, &params(), &p, 1).is_err());
    }

    #[test]
    fn three_replicas_run() {
        let traces = vec![trace(true, 1), trace(false, 2), trace(false, 3)];
        let r = simulate(&traces, &params(), &Policy::C3, 1).unwrap();
        assert_eq!(r.device_stats.len(), 3);
    }
}
