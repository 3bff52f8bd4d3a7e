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
//! * `ModelRank { tie_q }`: every replica's model scores the read (one inference per replica, the
//!   joint inference's P = replicas), each score taken as the margin of the quantised logit over
//!   the model's threshold. The candidates are the replicas whose margin is at most
//!   `max(0, best margin) + tie_q`: with `tie_q = 0`, every replica predicted fast, or the least
//!   predicted slow one when all are; among the candidates C3's score picks. The model decides
//!   *which* replicas may serve, C3 which of those is least loaded (`tie_q` → ∞ is C3 itself).
//! * `Oracle`: the read is served on a copy of every replica and goes to the one that answers
//!   first. It sees the future no router can; a lower bound of what per-read routing can reach.
//!
//! **Probe reads** ([`ProbeReads`], off by default, any policy): a replica whose view is stale
//! (no read completed for `stale_ns` and none in flight, e.g. because the router has been
//! avoiding it) is sent a small read of `size` bytes when the next read arrives, at most one per
//! `stale_ns` per replica. A probe is a real read: it occupies the device (queue, chips) like any
//! other, its completion enters the replica's history and its in-flight age the live features,
//! but its latency is no client's. [`RouteResult::probes`] counts them.
//!
//! **The write clock** ([`WriteClock`], off by default; C3 and the model policies): each
//! replica's count of the bytes the host wrote to it predicts its garbage collection
//! ([`crate::clock`]). A replica the clock predicts busy counts as predicted slow: C3 and
//! `ModelRank` choose among the others when there are any (`ModelRank` adds
//! [`CLOCK_MARGIN_Q`] to its margin), `ModelCost` and `Model` take it as a slow prediction.
//!
//! **Backup reads for risky reads** ([`RiskyHedge`], off by default; any policy but `Hedging`):
//! a read the router was unsure about when it routed it, and that has not answered after
//! `delay_ns`, is read again from another replica (the lowest C3 score among the replicas the
//! clock does not predict busy; none when it predicts them all busy); the first answer wins and both reads load their devices, as
//! hedging's do. Unsure means: the write clock of the chosen replica has no phase yet or its
//! voted candidates disagree ([`PhaseVote::unsure_at`]), or, for the model policies, the chosen
//! replica's slow margin is above `-margin_q`. [`RouteResult::hedged`] counts the backups.
//! With `every_read` every read is hedged after `delay_ns` (a reference for the rule).
//!
//! Models see only what a deployed one could: completions before the decision, and (a
//! `HeimdallLive` model) the reads still in flight on each replica ([`crate::features`]). The simulation is deterministic for a given seed.
//!
//! Thread-safety: pure function over owned values.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use attune_workload::rng::Xoshiro256;
use attune_workload::trace::{BlockRecord, IoKind};

use crate::clock::{ClockState, PhaseVote, WriteClock};
use crate::error::{invalid, Result};
use crate::features::{linnos_inputs, FeatureTracker};
use crate::model::{InputKind, QuantizedMlp};
use crate::ssd::{IoRequest, Ssd, SsdParams, SsdStats};

/// A pending backup read: (time, read index, device, home device, record index, time the
/// primary was sent).
type Hedge = (u64, usize, u8, u8, u32, u64);

/// Per replica, completed reads by completion time: (finish, submitted, slow).
type Completions = [BinaryHeap<Reverse<(u64, u64, bool)>>; REPLICAS_MAX];
/// Per replica, slow reads by completion time: (finish, submitted).
type SlowReads = [BinaryHeap<Reverse<(u64, u64)>>; REPLICAS_MAX];

/// Most replicas a simulation takes.
pub const REPLICAS_MAX: usize = 3;

/// What `ModelRank` adds to the margin (logit × 1024) of a replica the write clock predicts
/// busy: 16 logits, more than any tie margin in use, so such a replica is a candidate only
/// when every replica is predicted busy.
pub const CLOCK_MARGIN_Q: i64 = 16 * 1024;

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
    /// Every replica's model scores the read; C3 picks among the least predicted slow.
    ModelRank {
        /// Models in device order (`models.len()` = replicas).
        models: Vec<QuantizedMlp>,
        /// Logit margin (scale 1024) within which replicas count as tied (0: predicted fast).
        tie_q: i64,
    },
    /// Every replica's model scores the read; the lowest expected cost wins (see above).
    ModelCost {
        /// Models in device order (`models.len()` = replicas).
        models: Vec<QuantizedMlp>,
        /// How many times slower a read is on a replica predicted slow (> 1).
        slow_factor: f64,
    },
    /// Every replica's model scores the read; the lowest expected latency wins: C3's score
    /// times `1 + p (slow_factor - 1)`, `p` the model's slow probability (1 where the write clock
    /// predicts the replica busy).
    ModelExpect {
        /// Models in device order (`models.len()` = replicas).
        models: Vec<QuantizedMlp>,
        /// How many times longer a slow read takes than a fast one (measured, > 1).
        slow_factor: f64,
    },
    /// The replica that would answer first (served on copies; a bound, not a router).
    Oracle,
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
            Policy::ModelRank { .. } => "heimdall-rank",
            Policy::ModelCost { .. } => "heimdall-cost",
            Policy::ModelExpect { .. } => "heimdall-expect",
            Policy::Oracle => "oracle",
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
    /// Backup reads sent (by hedging, or for risky reads with [`RiskyHedge`]).
    pub hedged: u64,
    /// Model inferences run.
    pub inferences: u64,
    /// Probe reads sent ([`ProbeReads`]).
    pub probes: u64,
    /// Probe reads that met a garbage-collection busy period (they are in the devices'
    /// `reads` and `gc_reads`; subtract them for the clients' share).
    pub probe_gc_reads: u64,
    /// Probe reads sent to each device (they are in its `reads`; subtract them for the share
    /// of the clients' reads it served).
    pub device_probes: Vec<u64>,
    /// Each device's counters.
    pub device_stats: Vec<SsdStats>,
}

/// What every replica looked like when one read was routed ([`probe`]): one row per read and
/// replica.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProbeRow {
    /// The read's index in [`RouteResult::read_latency_ns`].
    pub read: u32,
    /// The replica.
    pub replica: u8,
    /// The probe model's margin on this replica (logit over threshold, scale 1024).
    pub margin_q: i64,
    /// C3's score of this replica.
    pub c3: f64,
    /// Outstanding I/Os on the device.
    pub queue_len: u32,
    /// Nanoseconds since the newest read in this replica's history completed.
    pub history_age_ns: u64,
    /// The latency this replica would have served the read with (served on a copy).
    pub would_ns: u64,
    /// Whether it would have met a garbage-collection busy period (ground truth).
    pub would_meet_gc: bool,
    /// How long the replica's busy period had been under way at the decision (0: none).
    pub busy_for_ns: u64,
    /// Whether the policy chose this replica.
    pub chosen: bool,
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

/// The read's slow margin on `d` (logit over threshold, scale 1024; > 0: predicted slow).
fn margin(d: &mut Dev, m: &QuantizedMlp, size: u32, t: u64, inferences: &mut u64) -> i64 {
    d.tracker.observe(t.max(d.ssd.now_ns()));
    let q = d.ssd.queue_len_at(t);
    match m.kind() {
        InputKind::Heimdall => {
            *inferences += 1;
            m.margin_q(&d.tracker.heimdall(size, q))
        }
        InputKind::HeimdallLive => {
            *inferences += 1;
            m.margin_q(&d.tracker.heimdall_live(size, q, t.max(d.ssd.now_ns())))
        }
        // A prefetch model is no admission model: admit.
        InputKind::TinFetch => i64::MIN / 2,
        InputKind::LinnOs => {
            // Every page of a read sees the same inputs: one inference decides all of them.
            *inferences += u64::from(size.max(1)).div_ceil(4096);
            m.margin_q(&linnos_inputs(&d.tracker, q))
        }
    }
}

/// Probe reads to replicas whose view is stale (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeReads {
    /// How long a replica may go without a read completed or in flight before it is probed;
    /// 0 turns probing off.
    pub stale_ns: u64,
    /// Bytes a probe reads (at the offset of the read that triggers it, aligned down).
    pub size: u32,
}

impl ProbeReads {
    /// No probe reads.
    pub const OFF: Self = Self {
        stale_ns: 0,
        size: 4096,
    };
}

/// Backup reads for the reads the router is unsure about (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RiskyHedge {
    /// How long a risky read may go unanswered before its backup is sent; 0 turns it off.
    pub delay_ns: u64,
    /// A model policy's read is risky when the chosen replica's slow margin (logit over
    /// threshold, scale 1024) is above `-margin_q`; negative: the model never makes a read risky.
    pub margin_q: i64,
    /// Every read is risky (a reference: what the risk rule saves in backup reads).
    pub every_read: bool,
}

impl RiskyHedge {
    /// No backup reads.
    pub const OFF: Self = Self {
        delay_ns: 0,
        margin_q: -1,
        every_read: false,
    };
}

/// How a routing simulation runs, beyond its traces, device and policy.
#[derive(Clone, Debug)]
pub struct RouteSettings {
    /// Seeds the devices and the random choices.
    pub seed: u64,
    /// Probe reads to stale replicas ([`ProbeReads::OFF`]: none).
    pub probes: ProbeReads,
    /// The host-side write clock ([`WriteClock::OFF`]: none; see the module documentation).
    pub clock: WriteClock,
    /// Where the clock's phase comes from and how old the replicas are.
    pub phase: ClockPhase,
    /// Backup reads for risky reads ([`RiskyHedge::OFF`]: none).
    pub hedge: RiskyHedge,
}

impl RouteSettings {
    /// No probes, no write clock, fresh replicas.
    pub fn seeded(seed: u64) -> Self {
        RouteSettings {
            seed,
            probes: ProbeReads::OFF,
            clock: WriteClock::OFF,
            phase: ClockPhase::default(),
            hedge: RiskyHedge::OFF,
        }
    }
}

/// Simulates `traces.len()` replicas (2 or 3), trace `i` issued by device `i`'s clients.
pub fn simulate(
    traces: &[Vec<BlockRecord>],
    params: &SsdParams,
    policy: &Policy,
    seed: u64,
) -> Result<RouteResult> {
    simulate_with(traces, params, policy, &RouteSettings::seeded(seed))
}

/// [`simulate`] with probe reads, a write clock or aged replicas ([`RouteSettings`]).
pub fn simulate_with(
    traces: &[Vec<BlockRecord>],
    params: &SsdParams,
    policy: &Policy,
    settings: &RouteSettings,
) -> Result<RouteResult> {
    run(traces, params, policy, None, settings).map(|(r, _)| r)
}

/// Where the write clock's phase comes from, and how old the replicas are.
#[derive(Clone, Debug, Default)]
pub struct ClockPhase {
    /// 0: the clock has a known phase (it counts from the start, the replicas start empty).
    /// Positive: the clock is anchored ([`ClockState::unknown_phase`]) at completed reads whose
    /// latency reaches this many nanoseconds.
    pub anchor_ns: u64,
    /// Bytes each replica was written before the window (`Ssd::age`); empty: none. A
    /// known-phase clock (`anchor_ns` 0) counts them ([`ClockState::told`]).
    pub aged_bytes: Vec<u64>,
    /// An anchored clock also counts the writes sent to the replica while the slow read that
    /// anchors it was outstanding ([`ClockState::anchor_and_count`]); false: it counts from the
    /// read's completion.
    pub anchor_writes: bool,
    /// An anchored clock re-anchors only once a collection is due ([`ClockState::gated`]).
    pub anchor_gate: bool,
    /// With `anchor_ns` > 0: the phase is voted ([`PhaseVote`]: every completed read, slow or
    /// fast by `anchor_ns`, scores candidate phases) instead of anchored.
    pub vote: bool,
    /// With `vote`: halve every candidate's score each this many completed reads
    /// ([`PhaseVote::half_life`]); 0: no decay.
    pub vote_half_life: u32,
}

/// [`simulate`], recording for every read what every replica looked like at the decision (one
/// [`ProbeRow`] per read and replica): `probe_models[d]` scores replica `d`, and a copy of each
/// replica serves the read to learn what it would have cost. Probing does not change the
/// simulation (the latencies equal [`simulate`]'s). For studying where the time goes.
pub fn probe(
    traces: &[Vec<BlockRecord>],
    params: &SsdParams,
    policy: &Policy,
    probe_models: &[QuantizedMlp],
    seed: u64,
) -> Result<(RouteResult, Vec<ProbeRow>)> {
    if probe_models.len() != traces.len() {
        return Err(invalid(
            "probe_models",
            probe_models.len(),
            format!("one model per replica is needed ({})", traces.len()),
        ));
    }
    if let Some(m) = probe_models.iter().find(|m| m.joint() != 1) {
        return Err(invalid(
            "probe_models",
            m.joint(),
            "routing decides per read: models must have joint size 1",
        ));
    }
    run(
        traces,
        params,
        policy,
        Some(probe_models),
        &RouteSettings::seeded(seed),
    )
}

fn run(
    traces: &[Vec<BlockRecord>],
    params: &SsdParams,
    policy: &Policy,
    probe_models: Option<&[QuantizedMlp]>,
    settings: &RouteSettings,
) -> Result<(RouteResult, Vec<ProbeRow>)> {
    let RouteSettings {
        seed,
        probes,
        clock,
        ref phase,
        hedge,
    } = *settings;
    clock.validate()?;
    let mut clocks = [ClockState::default(); REPLICAS_MAX];
    // A known-phase clock has seen the writes that aged its replica.
    for (c, &b) in clocks.iter_mut().zip(&phase.aged_bytes) {
        *c = ClockState::told(&clock, b);
    }
    if phase.anchor_ns > 0 {
        clocks = [ClockState::unknown_phase(); REPLICAS_MAX];
        if phase.anchor_gate {
            clocks = [ClockState::unknown_phase().gated(); REPLICAS_MAX];
        }
    }
    if !phase.aged_bytes.is_empty() && phase.aged_bytes.len() != traces.len() {
        return Err(invalid(
            "aged_bytes",
            phase.aged_bytes.len(),
            format!("one count per replica is needed ({})", traces.len()),
        ));
    }
    let voting = phase.vote && phase.anchor_ns > 0 && clock.is_on();
    let mut votes: Vec<PhaseVote> = (0..REPLICAS_MAX)
        .map(|_| {
            if voting {
                PhaseVote::new(&clock).half_life(phase.vote_half_life)
            } else {
                PhaseVote::default()
            }
        })
        .collect();
    // Per replica, the writes (time, bytes) sent since the oldest outstanding slow read was
    // submitted (`anchor_writes`; empty when no slow read is outstanding).
    let mut recent_writes: [Vec<(u64, u64)>; REPLICAS_MAX] = Default::default();
    let mut rows = Vec::new();
    if probes.stale_ns > 0 && probes.size == 0 {
        return Err(invalid("probe_size", 0, "must be positive"));
    }
    // When each replica was last probed.
    let mut probed_at = [0u64; REPLICAS_MAX];
    let n = traces.len();
    if !(2..=REPLICAS_MAX).contains(&n) {
        return Err(invalid("replicas", n, "must be 2 or 3"));
    }
    if let Policy::Model { models, .. }
    | Policy::ModelRank { models, .. }
    | Policy::ModelCost { models, .. }
    | Policy::ModelExpect { models, .. } = policy
    {
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
    if let Policy::ModelCost { slow_factor, .. } | Policy::ModelExpect { slow_factor, .. } = policy
    {
        if !(*slow_factor >= 1.0 && slow_factor.is_finite()) {
            return Err(invalid(
                "slow_factor",
                slow_factor,
                "must be finite and at least 1",
            ));
        }
    }
    if let Policy::Hedging { timeout_ns: 0 } = policy {
        return Err(invalid("timeout_ns", 0, "must be positive"));
    }
    let risky_on = hedge.delay_ns > 0;
    if risky_on && matches!(policy, Policy::Hedging { .. } | Policy::Oracle) {
        return Err(invalid(
            "hedge_delay",
            hedge.delay_ns,
            format!(
                "backup reads for risky reads do not apply to {}",
                policy.name()
            ),
        ));
    }
    let mut devs = Vec::with_capacity(n);
    for i in 0..n {
        devs.push(Dev {
            ssd: Ssd::new(params.clone(), seed.wrapping_add(i as u64 * 0x9e37))?,
            tracker: FeatureTracker::new(),
        });
        if let Some(&b) = phase.aged_bytes.get(i) {
            devs[i].ssd.age(b);
        }
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
    let mut out = RouteResult {
        device_probes: vec![0; traces.len()],
        ..RouteResult::default()
    };
    // Pending backup reads: (time, read index, device, home, record index).
    let mut hedges: BinaryHeap<Reverse<Hedge>> = BinaryHeap::new();
    let mut primary_latency: Vec<u64> = Vec::new();
    // Per replica and with `vote`, every read by completion: (finish, submitted, slow).
    let mut completed: Completions = Default::default();
    // Per replica, the reads slow enough to anchor the clock, by completion: (finish, submitted).
    let mut slow: SlowReads = Default::default();
    // Sends the backup reads due by `until`; their completions are evidence for the clocks.
    let fire = |until: u64,
                hedges: &mut BinaryHeap<Reverse<Hedge>>,
                devs: &mut Vec<Dev>,
                out: &mut RouteResult,
                primary_latency: &[u64],
                completed: &mut Completions,
                slow: &mut SlowReads| {
        while let Some(Reverse((at, idx, dev, home, rec, sent))) = hedges.peek().copied() {
            if at > until {
                break;
            }
            hedges.pop();
            let r = &traces[home as usize][rec as usize];
            let d = dev as usize;
            let backup = devs[d].submit(at, r, IoKind::Read);
            out.read_latency_ns[idx] = primary_latency[idx].min(at - sent + backup);
            out.hedged += 1;
            if phase.anchor_ns > 0 && backup >= phase.anchor_ns {
                slow[d].push(Reverse((at.saturating_add(backup), at)));
            }
            if voting {
                let is_slow = backup >= phase.anchor_ns;
                completed[d].push(Reverse((at.saturating_add(backup), at, is_slow)));
            }
        }
    };
    let timeout = match policy {
        Policy::Hedging { timeout_ns } => *timeout_ns,
        _ => 0,
    };
    let backups_on = timeout > 0 || risky_on;
    for &(t, home, rec) in &order {
        let r = &traces[home as usize][rec as usize];
        let h = home as usize;
        if backups_on {
            fire(
                t,
                &mut hedges,
                &mut devs,
                &mut out,
                &primary_latency,
                &mut completed,
                &mut slow,
            );
        }
        if phase.anchor_ns > 0 {
            // The slow reads completed by now anchor their replica's clock.
            for (d, q) in slow.iter_mut().enumerate().take(n) {
                let mut popped = false;
                while let Some(&Reverse((done, sent))) = q.peek() {
                    if done > t {
                        break;
                    }
                    q.pop();
                    popped = true;
                    if phase.anchor_writes {
                        clocks[d].anchor_and_count(&clock, sent, recent_writes[d].iter().copied());
                    } else {
                        clocks[d].observe_slow_read(&clock, sent);
                    }
                }
                if popped {
                    match q.iter().map(|&Reverse((_, sent))| sent).min() {
                        None => recent_writes[d].clear(),
                        Some(oldest) => recent_writes[d].retain(|&(w, _)| w >= oldest),
                    }
                }
            }
        }
        if voting {
            for (d, q) in completed.iter_mut().enumerate().take(n) {
                while let Some(&Reverse((done, sent, is_slow))) = q.peek() {
                    if done > t {
                        break;
                    }
                    q.pop();
                    votes[d].observe(sent, is_slow);
                }
            }
        }
        if r.kind == IoKind::Write {
            devs[h].submit(t, r, IoKind::Write);
            clocks[h].write(&clock, t, u64::from(r.size));
            if voting {
                votes[h].write(&clock, t, u64::from(r.size));
            }
            if phase.anchor_writes && !slow[h].is_empty() {
                recent_writes[h].push((t, u64::from(r.size)));
            }
            continue;
        }
        // The write clock's prediction per replica (all false when it is off).
        let mut clock_busy = [false; REPLICAS_MAX];
        for (d, b) in clock_busy.iter_mut().enumerate().take(n) {
            *b = if voting {
                votes[d].busy_at(t)
            } else {
                clocks[d].busy_at(t)
            };
        }
        let all_clock_busy = clock_busy[..n].iter().all(|&b| b);
        if probes.stale_ns > 0 {
            for (d, dev) in devs.iter_mut().enumerate() {
                dev.tracker.observe(t.max(dev.ssd.now_ns()));
                let seen = dev.tracker.last_read_done_ns().max(probed_at[d]);
                if dev.tracker.reads_in_flight() == 0 && t.saturating_sub(seen) >= probes.stale_ns {
                    let size = u64::from(probes.size);
                    let probe = BlockRecord {
                        timestamp_ns: t,
                        offset: r.offset / size * size,
                        size: probes.size,
                        kind: IoKind::Read,
                        latency_ns: 0,
                    };
                    let gc_before = dev.ssd.stats().gc_reads;
                    let lat = dev.submit(t, &probe, IoKind::Read);
                    if phase.anchor_ns > 0 && lat >= phase.anchor_ns {
                        slow[d].push(Reverse((t.saturating_add(lat), t)));
                    }
                    if voting {
                        let is_slow = lat >= phase.anchor_ns;
                        completed[d].push(Reverse((t.saturating_add(lat), t, is_slow)));
                    }
                    if dev.ssd.stats().gc_reads > gc_before {
                        out.probe_gc_reads += 1;
                    }
                    probed_at[d] = t.max(1);
                    out.probes += 1;
                    out.device_probes[d] += 1;
                }
            }
        }
        let first_row = rows.len();
        if let Some(pm) = probe_models {
            let mut scratch = 0u64;
            for (d, dev) in devs.iter_mut().enumerate() {
                let margin_q = margin(dev, &pm[d], r.size, t, &mut scratch);
                let c3 = c3_score(dev, t);
                let mut copy = dev.ssd.clone();
                let c = copy.submit(IoRequest {
                    time_ns: t,
                    offset: r.offset,
                    size: r.size,
                    kind: IoKind::Read,
                });
                rows.push(ProbeRow {
                    read: out.read_latency_ns.len() as u32,
                    replica: d as u8,
                    margin_q,
                    c3,
                    queue_len: dev.ssd.queue_len_at(t),
                    history_age_ns: t.saturating_sub(dev.tracker.last_read_done_ns()),
                    would_ns: c.latency_ns(),
                    would_meet_gc: c.gc_pages > 0,
                    busy_for_ns: copy.busy_since(t).map_or(0, |s| t.saturating_sub(s)),
                    chosen: false,
                });
            }
        }
        let target = match policy {
            Policy::AlwaysAdmit | Policy::Hedging { .. } => h,
            Policy::Random => rng.below(n as u64) as usize,
            Policy::C3 => {
                let mut best = (f64::INFINITY, h);
                for k in 0..n {
                    let d = (h + k) % n;
                    if clock_busy[d] && !all_clock_busy {
                        continue;
                    }
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
                        InputKind::HeimdallLive => {
                            out.inferences += 1;
                            let now = t.max(dev.ssd.now_ns());
                            m.predicts_slow(&dev.tracker.heimdall_live(r.size, q, now))
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
                    if !slow && !clock_busy[d] {
                        chosen = d;
                        break;
                    }
                }
                chosen
            }
            Policy::ModelRank { models, tie_q } => {
                let mut m = [0i64; REPLICAS_MAX];
                for k in 0..n {
                    let d = (h + k) % n;
                    m[d] = margin(&mut devs[d], &models[d], r.size, t, &mut out.inferences);
                    if clock_busy[d] {
                        m[d] = m[d].max(0).saturating_add(CLOCK_MARGIN_Q);
                    }
                }
                let best = m[..n].iter().copied().min().unwrap_or(0);
                let limit = best.max(0).saturating_add((*tie_q).max(0));
                let mut chosen = (f64::INFINITY, h);
                for k in 0..n {
                    let d = (h + k) % n;
                    if m[d] <= limit {
                        let s = c3_score(&mut devs[d], t);
                        if s < chosen.0 {
                            chosen = (s, d);
                        }
                    }
                }
                chosen.1
            }
            Policy::ModelCost {
                models,
                slow_factor,
            } => {
                let mut chosen = (f64::INFINITY, f64::INFINITY, h);
                for k in 0..n {
                    let d = (h + k) % n;
                    let m = margin(&mut devs[d], &models[d], r.size, t, &mut out.inferences);
                    let q = f64::from(devs[d].ssd.queue_len_at(t));
                    let slow = m > 0 || clock_busy[d];
                    let cost = (1.0 + q) * if slow { *slow_factor } else { 1.0 };
                    let s = c3_score(&mut devs[d], t);
                    if (cost, s) < (chosen.0, chosen.1) {
                        chosen = (cost, s, d);
                    }
                }
                chosen.2
            }
            Policy::ModelExpect {
                models,
                slow_factor,
            } => {
                let mut chosen = (f64::INFINITY, h);
                for k in 0..n {
                    let d = (h + k) % n;
                    let p = if clock_busy[d] {
                        1.0
                    } else {
                        let m = margin(&mut devs[d], &models[d], r.size, t, &mut out.inferences);
                        models[d].slow_probability(m)
                    };
                    let cost = c3_score(&mut devs[d], t) * (1.0 + p * (slow_factor - 1.0));
                    if cost < chosen.0 {
                        chosen = (cost, d);
                    }
                }
                chosen.1
            }
            Policy::Oracle => {
                let mut best = (u64::MAX, h);
                for k in 0..n {
                    let d = (h + k) % n;
                    let mut copy = devs[d].ssd.clone();
                    let c = copy.submit(IoRequest {
                        time_ns: t,
                        offset: r.offset,
                        size: r.size,
                        kind: IoKind::Read,
                    });
                    if c.latency_ns() < best.0 {
                        best = (c.latency_ns(), d);
                    }
                }
                best.1
            }
        };
        if target != h {
            out.redirected += 1;
        }
        if let Some(row) = rows[first_row..].get_mut(target) {
            row.chosen = true;
        }
        // A risky read's backup replica (decided now, from what the router sees now).
        let backup_to = if risky_on {
            let clock_unsure = if voting {
                votes[target].unsure_at(t)
            } else {
                phase.anchor_ns > 0 && clock.is_on() && !clocks[target].has_phase()
            };
            let model_unsure = hedge.margin_q >= 0 && {
                let models = match policy {
                    Policy::Model { models, .. }
                    | Policy::ModelRank { models, .. }
                    | Policy::ModelCost { models, .. }
                    | Policy::ModelExpect { models, .. } => Some(models),
                    _ => None,
                };
                models.is_some_and(|ms| {
                    let mut scratch = 0u64;
                    margin(&mut devs[target], &ms[target], r.size, t, &mut scratch)
                        > -hedge.margin_q
                })
            };
            if hedge.every_read || clock_unsure || model_unsure {
                let mut best = (f64::INFINITY, usize::MAX);
                for k in 1..n {
                    let d = (target + k) % n;
                    if clock_busy[d] {
                        continue;
                    }
                    let s = c3_score(&mut devs[d], t);
                    if s < best.0 || best.1 == usize::MAX {
                        best = (s, d);
                    }
                }
                (best.1 != usize::MAX).then_some(best.1)
            } else {
                None
            }
        } else {
            None
        };
        let lat = devs[target].submit(t, r, IoKind::Read);
        if phase.anchor_ns > 0 && lat >= phase.anchor_ns {
            slow[target].push(Reverse((t.saturating_add(lat), t)));
        }
        if voting {
            let is_slow = lat >= phase.anchor_ns;
            completed[target].push(Reverse((t.saturating_add(lat), t, is_slow)));
        }
        let idx = out.read_latency_ns.len();
        out.read_latency_ns.push(lat);
        out.home.push(home);
        primary_latency.push(lat);
        if timeout > 0 && lat > timeout {
            hedges.push(Reverse((
                t + timeout,
                idx,
                ((h + 1) % n) as u8,
                home,
                rec,
                t,
            )));
        }
        if let Some(d) = backup_to {
            if lat > hedge.delay_ns {
                let at = t.saturating_add(hedge.delay_ns);
                hedges.push(Reverse((at, idx, d as u8, home, rec, t)));
            }
        }
    }
    if backups_on {
        fire(
            u64::MAX,
            &mut hedges,
            &mut devs,
            &mut out,
            &primary_latency,
            &mut completed,
            &mut slow,
        );
    }
    out.device_stats = devs.iter().map(|d| d.ssd.stats()).collect();
    Ok((out, rows))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn probing(seed: u64, probes: ProbeReads) -> RouteSettings {
        RouteSettings {
            probes,
            ..RouteSettings::seeded(seed)
        }
    }

    fn clocked(seed: u64, clock: WriteClock) -> RouteSettings {
        RouteSettings {
            clock,
            ..RouteSettings::seeded(seed)
        }
    }
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
        let live = QuantizedMlp::new(&crate::model::tests::tiny_live()).unwrap();
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
                models: vec![q.clone(), q.clone()],
                home_when_all_decline: true,
            },
            Policy::ModelRank {
                models: vec![q.clone(), q.clone()],
                tie_q: 0,
            },
            Policy::ModelCost {
                models: vec![q.clone(), q],
                slow_factor: 10.0,
            },
            Policy::ModelCost {
                models: vec![live.clone(), live.clone()],
                slow_factor: 10.0,
            },
            Policy::Model {
                models: vec![live.clone(), live.clone()],
                home_when_all_decline: false,
            },
            Policy::ModelExpect {
                models: vec![live.clone(), live],
                slow_factor: 20.0,
            },
            Policy::Oracle,
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
    fn rank_with_every_replica_tied_is_c3_and_scores_every_replica() {
        let traces = vec![trace(true, 1), trace(false, 2)];
        let q = QuantizedMlp::new(&tiny(1)).unwrap();
        let c3 = simulate(&traces, &params(), &Policy::C3, 4).unwrap();
        let all_tied = Policy::ModelRank {
            models: vec![q.clone(), q.clone()],
            tie_q: i64::MAX,
        };
        let r = simulate(&traces, &params(), &all_tied, 4).unwrap();
        assert_eq!(r.read_latency_ns, c3.read_latency_ns);
        // P = replicas: one inference per replica and read.
        assert_eq!(r.inferences, 2 * r.read_latency_ns.len() as u64);
        let strict = Policy::ModelRank {
            models: vec![q.clone(), q],
            tie_q: 0,
        };
        let s = simulate(&traces, &params(), &strict, 4).unwrap();
        assert_eq!(s.read_latency_ns.len(), c3.read_latency_ns.len());
    }

    #[test]
    fn the_oracle_sends_each_read_where_it_finishes_first() {
        let traces = vec![trace(true, 1), trace(false, 2)];
        let o = simulate(&traces, &params(), &Policy::Oracle, 5).unwrap();
        let base = simulate(&traces, &params(), &Policy::AlwaysAdmit, 5).unwrap();
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
        assert!(o.redirected > 0);
        assert!(mean(&o.read_latency_ns) < mean(&base.read_latency_ns));
        assert_eq!(o.inferences, 0);
    }

    #[test]
    fn probing_changes_nothing_and_records_every_replica() {
        let traces = vec![trace(true, 1), trace(false, 2)];
        let q = QuantizedMlp::new(&tiny(1)).unwrap();
        let pol = Policy::ModelRank {
            models: vec![q.clone(), q.clone()],
            tie_q: 0,
        };
        let plain = simulate(&traces, &params(), &pol, 6).unwrap();
        let (r, rows) = probe(&traces, &params(), &pol, &[q.clone(), q.clone()], 6).unwrap();
        assert_eq!(r.read_latency_ns, plain.read_latency_ns);
        assert_eq!(rows.len(), 2 * r.read_latency_ns.len());
        for (i, pair) in rows.chunks(2).enumerate() {
            assert_eq!(pair.iter().filter(|p| p.chosen).count(), 1);
            let chosen = pair.iter().find(|p| p.chosen).unwrap();
            // The copy served the read exactly as the replica then did.
            assert_eq!(chosen.would_ns, r.read_latency_ns[i]);
        }
        assert!(probe(&traces, &params(), &pol, &[q], 6).is_err());
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
        let q = QuantizedMlp::new(&tiny(1)).unwrap();
        let rank = Policy::ModelRank {
            models: vec![q],
            tie_q: 0,
        };
        let e = simulate(&two, &params(), &rank, 1).unwrap_err();
        assert!(e.to_string().contains("`models`"));
        let q = QuantizedMlp::new(&tiny(1)).unwrap();
        let cost = Policy::ModelCost {
            models: vec![q.clone(), q],
            slow_factor: 0.5,
        };
        let e = simulate(&two, &params(), &cost, 1).unwrap_err();
        assert!(e.to_string().contains("`slow_factor`"));
    }

    #[test]
    fn probe_reads_refresh_stale_replicas_and_serve_no_client() {
        let traces = vec![trace(true, 1), trace(false, 2)];
        let q = QuantizedMlp::new(&crate::model::tests::tiny_live()).unwrap();
        let pol = Policy::ModelCost {
            models: vec![q.clone(), q],
            slow_factor: 10.0,
        };
        let plain = simulate(&traces, &params(), &pol, 3).unwrap();
        let off = simulate_with(&traces, &params(), &pol, &RouteSettings::seeded(3)).unwrap();
        assert_eq!(off.read_latency_ns, plain.read_latency_ns);
        assert_eq!(off.probes, 0);
        let on = ProbeReads {
            stale_ns: 100_000,
            size: 4096,
        };
        let a = simulate_with(&traces, &params(), &pol, &probing(3, on)).unwrap();
        let b = simulate_with(&traces, &params(), &pol, &probing(3, on)).unwrap();
        assert_eq!(a.read_latency_ns, b.read_latency_ns);
        assert_eq!(a.read_latency_ns.len(), plain.read_latency_ns.len());
        assert!(a.probes > 0);
        // Probes are reads the devices served: they count in the devices' reads, not the clients'.
        let served: u64 = a.device_stats.iter().map(|d| d.reads).sum();
        assert_eq!(served, a.read_latency_ns.len() as u64 + a.probes);
        assert_eq!(a.device_probes.iter().sum::<u64>(), a.probes);
        assert!(plain.device_probes.iter().all(|&p| p == 0));
        let gc: u64 = a.device_stats.iter().map(|d| d.gc_reads).sum();
        assert!(a.probe_gc_reads <= gc.min(a.probes));
        // At most one probe per replica per stale interval.
        let span = traces
            .iter()
            .flatten()
            .map(|r| r.timestamp_ns)
            .max()
            .unwrap();
        assert!(a.probes <= 2 * (span / on.stale_ns + 1), "{}", a.probes);
        let bad = ProbeReads {
            stale_ns: 1,
            size: 0,
        };
        let e = simulate_with(&traces, &params(), &pol, &probing(3, bad)).unwrap_err();
        assert!(e.to_string().contains("`probe_size`"), "{e}");
    }

    #[test]
    fn a_replica_the_write_clock_predicts_busy_is_avoided() {
        // Device 0 writes (its clock fires at its first write and stays busy); device 1 never
        // writes. With the clock, C3 and the rank policy send every read after device 0's first
        // write to device 1; without it they do not.
        let traces = vec![trace(true, 1), trace(false, 2)];
        let first_write = traces[0]
            .iter()
            .position(|r| r.kind == IoKind::Write)
            .unwrap();
        let reads_before = traces[0][..first_write]
            .iter()
            .filter(|r| r.kind == IoKind::Read)
            .count() as u64;
        let always = WriteClock {
            flush_bytes: 1,
            gc_every_bytes: 1,
            delay_ns: 0,
            busy_ns: u64::MAX / 4,
        };
        let q = QuantizedMlp::new(&tiny(1)).unwrap();
        for p in [
            Policy::C3,
            Policy::ModelRank {
                models: vec![q.clone(), q],
                tie_q: 0,
            },
        ] {
            let on = simulate_with(&traces, &params(), &p, &clocked(3, always)).unwrap();
            assert!(on.device_stats[0].reads <= reads_before, "{}", p.name());
            let off = simulate(&traces, &params(), &p, 3).unwrap();
            assert!(off.device_stats[0].reads > reads_before, "{}", p.name());
            let bad = WriteClock {
                gc_every_bytes: 0,
                ..always
            };
            let e = simulate_with(&traces, &params(), &p, &clocked(3, bad)).unwrap_err();
            assert!(e.to_string().contains("gc_every_bytes"), "{e}");
        }
    }

    #[test]
    fn expected_latency_with_no_slow_penalty_is_c3() {
        let traces = vec![trace(true, 1), trace(false, 2)];
        let q = QuantizedMlp::new(&tiny(1)).unwrap();
        let flat = Policy::ModelExpect {
            models: vec![q.clone(), q.clone()],
            slow_factor: 1.0,
        };
        let c3 = simulate(&traces, &params(), &Policy::C3, 4).unwrap();
        let e = simulate(&traces, &params(), &flat, 4).unwrap();
        assert_eq!(e.read_latency_ns, c3.read_latency_ns);
        assert!(e.inferences > 0);
        let bad = Policy::ModelExpect {
            models: vec![q.clone(), q],
            slow_factor: 0.5,
        };
        let err = simulate(&traces, &params(), &bad, 4).unwrap_err();
        assert!(err.to_string().contains("slow_factor"), "{err}");
    }

    #[test]
    fn the_anchored_clock_refinements_run_deterministically_and_change_only_the_clock() {
        let traces = vec![trace(true, 1), trace(true, 2)];
        let clock = WriteClock {
            flush_bytes: 4 << 20,
            gc_every_bytes: 16 << 20,
            delay_ns: 0,
            busy_ns: 100_000_000,
        };
        let mut runs = Vec::new();
        for (writes, gate) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut s = clocked(5, clock);
            s.phase = ClockPhase {
                anchor_ns: 1_000_000,
                aged_bytes: vec![3 << 20, 11 << 20],
                anchor_writes: writes,
                anchor_gate: gate,
                vote: false,
                vote_half_life: 0,
            };
            let a = simulate_with(&traces, &params(), &Policy::C3, &s).unwrap();
            let b = simulate_with(&traces, &params(), &Policy::C3, &s).unwrap();
            assert_eq!(a.read_latency_ns, b.read_latency_ns);
            // Without a clock the refinements change nothing.
            s.clock = WriteClock::OFF;
            let off = simulate_with(&traces, &params(), &Policy::C3, &s).unwrap();
            runs.push((a.read_latency_ns, off.read_latency_ns));
        }
        assert!(runs.iter().all(|(_, off)| *off == runs[0].1));
    }

    #[test]
    fn risky_reads_get_backups_that_never_slow_them_and_are_counted() {
        let traces = vec![trace(true, 1), trace(true, 2)];
        let clock = WriteClock {
            flush_bytes: 4 << 20,
            gc_every_bytes: 16 << 20,
            delay_ns: 0,
            busy_ns: 100_000_000,
        };
        let mut s = clocked(6, clock);
        s.phase = ClockPhase {
            anchor_ns: 1_000_000,
            aged_bytes: vec![3 << 20, 11 << 20],
            vote: true,
            ..ClockPhase::default()
        };
        let plain = simulate_with(&traces, &params(), &Policy::C3, &s).unwrap();
        assert_eq!(plain.hedged, 0);
        let delay_ns = 500_000;
        let mut counts = Vec::new();
        for every_read in [false, true] {
            s.hedge = RiskyHedge {
                delay_ns,
                margin_q: -1,
                every_read,
            };
            let a = simulate_with(&traces, &params(), &Policy::C3, &s).unwrap();
            let b = simulate_with(&traces, &params(), &Policy::C3, &s).unwrap();
            assert_eq!(a.read_latency_ns, b.read_latency_ns, "deterministic");
            assert!(a.hedged > 0, "every_read {every_read}");
            // At most one backup per read, and only for reads that took longer than the delay.
            let slow_primaries = plain
                .read_latency_ns
                .iter()
                .filter(|&&l| l > delay_ns)
                .count();
            assert!(a.hedged <= a.read_latency_ns.len() as u64);
            assert!(slow_primaries > 0);
            counts.push(a.hedged);
        }
        // Hedging every read sends at least as many backups as hedging the risky ones.
        assert!(counts[1] >= counts[0], "{counts:?}");
        // Not with hedging or the oracle.
        let e = simulate_with(&traces, &params(), &Policy::Oracle, &s).unwrap_err();
        assert!(e.to_string().contains("hedge_delay"), "{e}");
    }

    #[test]
    fn a_backup_read_is_the_answer_only_when_it_comes_first() {
        // Without a clock and with the model off, `every_read` hedges every read still
        // unanswered after the delay: each read's latency is the primary's or less, and the
        // reads that answered within the delay are the same as without backups until the
        // first backup loads a device.
        let traces = vec![trace(true, 1), trace(false, 2)];
        let base = simulate(&traces, &params(), &Policy::C3, 7).unwrap();
        let mut s = RouteSettings::seeded(7);
        s.hedge = RiskyHedge {
            delay_ns: 2_000_000,
            margin_q: -1,
            every_read: true,
        };
        let h = simulate_with(&traces, &params(), &Policy::C3, &s).unwrap();
        let first = base
            .read_latency_ns
            .iter()
            .position(|&l| l > 2_000_000)
            .unwrap();
        assert_eq!(h.read_latency_ns[..=first].len(), first + 1);
        assert!(h.read_latency_ns[first] <= base.read_latency_ns[first]);
        assert_eq!(h.read_latency_ns[..first], base.read_latency_ns[..first]);
        assert!(h.hedged > 0);
        // The risk rule alone, with no clock and no model, hedges nothing.
        s.hedge.every_read = false;
        let none = simulate_with(&traces, &params(), &Policy::C3, &s).unwrap();
        assert_eq!(none.hedged, 0);
        assert_eq!(none.read_latency_ns, base.read_latency_ns);
    }

    #[test]
    fn three_replicas_run() {
        let traces = vec![trace(true, 1), trace(false, 2), trace(false, 3)];
        let r = simulate(&traces, &params(), &Policy::C3, 1).unwrap();
        assert_eq!(r.device_stats.len(), 3);
    }
}
