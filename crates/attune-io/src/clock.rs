//! The write clock: a host-side prediction of when a replica's garbage collection starts, from
//! the writes the host itself sent to it.
//!
//! A flash device buffers writes and flushes them when its buffer fills; after enough flushed
//! bytes it collects garbage, and reads behind the collection wait 10–60×. A router on the host
//! knows every byte it wrote to each replica, so it can keep the same count the device keeps
//! and predict a busy period *before* any read shows it (a history of completed reads sees a
//! busy period only when its first read completes, 1–6 ms in). The clock is a model of the
//! device, not a view of it: it counts `fill` (bytes written since its last predicted flush)
//! and `flushed` (bytes flushed since its last predicted collection); when `fill` reaches
//! `flush_bytes` it predicts a flush of `fill` bytes, and when `flushed` reaches
//! `gc_every_bytes` a busy period over `[t + delay_ns, t + delay_ns + busy_ns)`.
//!
//! Its four numbers are estimated from what the host sees (the writes it sent and the latencies
//! of the reads that came back; `attune.io.heimdall.fit_write_clock`), never read from the
//! device.
//!
//! **Phase.** A clock with a *known phase* ([`ClockState::default`]) assumes it has seen every
//! write since the device was empty. A router that joins a device mid-life does not know how far
//! the device is towards its next collection; an *anchored* clock
//! ([`ClockState::unknown_phase`]) starts with no phase and predicts nothing until it observes a
//! busy period from a completed read (a read whose latency is at least the anchor latency, see
//! [`ClockState::observe_slow_read`]). It then sets its counts to zero (the device has just
//! started a collection, so its flushed count is zero; the buffer's fill is unknown and taken
//! as zero) and predicts the observed period to last `busy_ns` from the read's submission. Each
//! later slow read outside the predicted period re-anchors the count, correcting the drift an
//! unseen buffer fill or a misfitted parameter adds.
//!
//! Thread-safety: plain values, single owner.

use crate::error::{invalid, Result};

/// The clock's parameters; `flush_bytes` 0 turns it off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteClock {
    /// Written bytes that make the device flush (its write buffer's flush threshold).
    pub flush_bytes: u64,
    /// Flushed bytes between two garbage collections.
    pub gc_every_bytes: u64,
    /// From the write that completes the count to the start of the busy period (the flush's
    /// duration), nanoseconds.
    pub delay_ns: u64,
    /// How long a busy period lasts, nanoseconds.
    pub busy_ns: u64,
}

impl WriteClock {
    /// No clock.
    pub const OFF: Self = Self {
        flush_bytes: 0,
        gc_every_bytes: 0,
        delay_ns: 0,
        busy_ns: 0,
    };

    /// Whether the clock is on.
    pub fn is_on(&self) -> bool {
        self.flush_bytes > 0
    }

    /// Checks the parameters when the clock is on (each error names the parameter).
    pub fn validate(&self) -> Result<()> {
        if !self.is_on() {
            return Ok(());
        }
        if self.gc_every_bytes == 0 {
            return Err(invalid("gc_every_bytes", 0, "must be positive"));
        }
        if self.busy_ns == 0 {
            return Err(invalid("busy_us", 0, "must be positive"));
        }
        Ok(())
    }
}

/// One replica's count (see the module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct ClockState {
    /// Anchored mode: re-anchor at every observed busy period.
    anchoring: bool,
    /// Anchored mode and no busy period observed yet: predicts nothing, counts nothing.
    no_phase: bool,
    /// Anchored mode: a slow read re-anchors only once the count has reached half of
    /// `gc_every_bytes` ([`ClockState::gated`]).
    gate: bool,
    fill: u64,
    flushed: u64,
    busy_from_ns: u64,
    busy_until_ns: u64,
}

impl ClockState {
    /// An anchored clock: no phase until the first observed busy period (module docs).
    pub fn unknown_phase() -> Self {
        Self {
            anchoring: true,
            no_phase: true,
            ..Self::default()
        }
    }

    /// An anchored clock that re-anchors only when a collection is plausible: a slow read
    /// outside the predicted period while the count towards the next collection (`flushed` +
    /// `fill`) is below half of `gc_every_bytes` is taken for the tail of the last collection
    /// (a read queued behind it) or for queueing, not for a new one, and changes nothing. Without
    /// the gate such a read restarts the count and predicts a whole busy period that never comes.
    /// The count errs by at most about a buffer's worth (the unseen fill), a quarter of the
    /// period on the fitted clocks, so half leaves room on both sides.
    pub fn gated(self) -> Self {
        Self { gate: true, ..self }
    }

    /// A known-phase clock of a device that had `bytes` written and flushed before it started
    /// counting (as `Ssd::age` leaves it: the buffer empty, the collection count at `bytes %
    /// gc_every_bytes`). The reference for an anchored clock: the phase it has to find.
    pub fn told(c: &WriteClock, bytes: u64) -> Self {
        Self {
            flushed: if c.is_on() {
                bytes % c.gc_every_bytes.max(1)
            } else {
                0
            },
            ..Self::default()
        }
    }

    /// Whether the clock has a phase (a known-phase clock always has one).
    pub fn has_phase(&self) -> bool {
        !self.no_phase
    }

    /// An anchored clock learns that a read submitted at `submitted_ns` met a busy period (its
    /// latency reached the anchor latency; the caller passes only reads that have completed).
    /// Outside the predicted busy period this anchors the count there; a known-phase clock
    /// ignores it.
    /// Returns whether it anchored (the caller may then count the writes it sent since
    /// `submitted_ns` again with [`ClockState::write`], see [`ClockState::anchor_and_count`]).
    pub fn observe_slow_read(&mut self, c: &WriteClock, submitted_ns: u64) -> bool {
        if !self.anchoring || !c.is_on() {
            return false;
        }
        if !self.no_phase && self.busy_at(submitted_ns) {
            return false;
        }
        if self.gate
            && !self.no_phase
            && self.flushed.saturating_add(self.fill) < c.gc_every_bytes / 2
        {
            return false;
        }
        self.no_phase = false;
        self.fill = 0;
        self.flushed = 0;
        self.busy_from_ns = submitted_ns;
        self.busy_until_ns = submitted_ns.saturating_add(c.busy_ns);
        true
    }

    /// [`ClockState::observe_slow_read`], then, when it anchored, counts `later_writes` (time,
    /// bytes) from the anchor on: the writes the host sent at or after `submitted_ns` while the
    /// read was outstanding. Without them the new count starts at the read's *completion* and
    /// lags the device by the bytes written meanwhile, so every later prediction comes late.
    pub fn anchor_and_count(
        &mut self,
        c: &WriteClock,
        submitted_ns: u64,
        later_writes: impl IntoIterator<Item = (u64, u64)>,
    ) {
        if self.observe_slow_read(c, submitted_ns) {
            for (t, size) in later_writes {
                if t >= submitted_ns {
                    self.write(c, t, size);
                }
            }
        }
    }

    /// Counts a write of `size` bytes sent at `time_ns`.
    pub fn write(&mut self, c: &WriteClock, time_ns: u64, size: u64) {
        if !c.is_on() || self.no_phase {
            return;
        }
        self.fill = self.fill.saturating_add(size);
        if self.fill < c.flush_bytes {
            return;
        }
        self.flushed = self.flushed.saturating_add(self.fill);
        self.fill = 0;
        if self.flushed >= c.gc_every_bytes {
            self.flushed = 0;
            self.busy_from_ns = time_ns.saturating_add(c.delay_ns);
            self.busy_until_ns = self.busy_from_ns.saturating_add(c.busy_ns);
        }
    }

    /// Whether the clock predicts the device busy at `time_ns`.
    pub fn busy_at(&self, time_ns: u64) -> bool {
        !self.no_phase && time_ns >= self.busy_from_ns && time_ns < self.busy_until_ns
    }
}

/// How many candidate phases a [`PhaseVote`] keeps.
pub const VOTE_CANDIDATES: usize = 64;
/// A candidate's score stays within `±VOTE_SCORE_CAP`: large enough to keep a window's evidence
/// (several busy periods of dozens of reads each), bounded so that a count that drifts in a long
/// run can still be overtaken within a few busy periods. Chosen on the validation windows (caps
/// of 4, 8, 16, 64 and none tried; 64 and none were best and equal).
pub const VOTE_SCORE_CAP: i32 = 64;

#[derive(Clone, Copy, Debug, Default)]
struct Candidate {
    state: ClockState,
    prev_from_ns: u64,
    prev_until_ns: u64,
    score: i32,
}

impl Candidate {
    fn busy_at(&self, t: u64) -> bool {
        self.state.busy_at(t) || (t >= self.prev_from_ns && t < self.prev_until_ns)
    }
}

/// A clock for an unknown phase that votes instead of anchoring: it runs
/// [`VOTE_CANDIDATES`] known-phase clocks side by side, one per candidate phase (each number of
/// flushes already counted towards the next collection × a grid of buffer fills), and scores
/// each against every completed read: +1 when a slow read falls in the candidate's predicted
/// busy period, −1 when a slow read falls outside it or a fast read inside it. It predicts busy
/// when most of the best-scoring candidates do and the best score is positive (at least one
/// slow read explained). Unlike an anchor it uses the fast reads too (they rule out phases that
/// would have collected already), a single slow read from queueing cannot move it far, and the
/// start of a busy period is not assumed to be the first slow read's submission.
#[derive(Clone, Debug, Default)]
pub struct PhaseVote {
    cands: Vec<Candidate>,
    /// Every this many observations all scores are halved (0: never; [`PhaseVote::half_life`]).
    half_life: u32,
    seen: u32,
}

impl PhaseVote {
    /// Candidates spread over the phases of `c` (none when the clock is off).
    pub fn new(c: &WriteClock) -> Self {
        let mut cands = Vec::new();
        if c.is_on() {
            let flush = c.flush_bytes.max(1);
            let slots = c
                .gc_every_bytes
                .div_ceil(flush)
                .clamp(1, VOTE_CANDIDATES as u64);
            let fills = (VOTE_CANDIDATES as u64 / slots).max(1);
            for i in 0..slots {
                for j in 0..fills {
                    cands.push(Candidate {
                        state: ClockState {
                            flushed: i * flush,
                            fill: j * flush / fills,
                            ..ClockState::default()
                        },
                        ..Candidate::default()
                    });
                }
            }
        }
        Self {
            cands,
            half_life: 0,
            seen: 0,
        }
    }

    /// Weighs recent evidence more: every `observations` completed reads, every score is
    /// halved (rounded towards zero), so a read `k · observations` reads old counts `2^-k`.
    /// 0 (the default) keeps every read's weight.
    pub fn half_life(self, observations: u32) -> Self {
        Self {
            half_life: observations,
            ..self
        }
    }

    /// Counts a write of `size` bytes sent at `time_ns` on every candidate.
    pub fn write(&mut self, c: &WriteClock, time_ns: u64, size: u64) {
        for k in &mut self.cands {
            let before = (k.state.busy_from_ns, k.state.busy_until_ns);
            k.state.write(c, time_ns, size);
            if (k.state.busy_from_ns, k.state.busy_until_ns) != before {
                (k.prev_from_ns, k.prev_until_ns) = before;
            }
        }
    }

    /// A completed read submitted at `submitted_ns` was slow (at least the anchor latency) or
    /// fast.
    pub fn observe(&mut self, submitted_ns: u64, slow: bool) {
        for k in &mut self.cands {
            let delta = match (slow, k.busy_at(submitted_ns)) {
                (true, true) => 1,
                (true, false) | (false, true) => -1,
                (false, false) => 0,
            };
            k.score = (k.score + delta).clamp(-VOTE_SCORE_CAP, VOTE_SCORE_CAP);
        }
        if self.half_life > 0 {
            self.seen += 1;
            if self.seen >= self.half_life {
                self.seen = 0;
                for k in &mut self.cands {
                    k.score /= 2;
                }
            }
        }
    }

    /// Whether the vote is unsure about `time_ns`: it has no phase yet (no slow read
    /// explained), or its best-scoring candidates disagree on whether the device is busy then.
    /// What a router may hedge ([`crate::route::RiskyHedge`]); an empty vote (clock off) is
    /// never unsure.
    pub fn unsure_at(&self, time_ns: u64) -> bool {
        let Some(best) = self.cands.iter().map(|k| k.score).max() else {
            return false;
        };
        if best <= 0 {
            return true;
        }
        let (mut busy, mut all) = (0usize, 0usize);
        for k in self.cands.iter().filter(|k| k.score == best) {
            all += 1;
            busy += usize::from(k.busy_at(time_ns));
        }
        busy > 0 && busy < all
    }

    /// Whether the vote predicts the device busy at `time_ns`.
    pub fn busy_at(&self, time_ns: u64) -> bool {
        let Some(best) = self.cands.iter().map(|k| k.score).max() else {
            return false;
        };
        if best <= 0 {
            return false;
        }
        let (mut busy, mut all) = (0usize, 0usize);
        for k in self.cands.iter().filter(|k| k.score == best) {
            all += 1;
            busy += usize::from(k.busy_at(time_ns));
        }
        2 * busy > all
    }
}

/// For every I/O of a trace in time order (`times_ns`, `sizes`, `is_write`), whether the clock
/// predicts the device busy when it arrives (after counting the writes before it). What the
/// router sees, for fitting the clock on training data.
pub fn busy_flags(
    c: &WriteClock,
    times_ns: &[u64],
    sizes: &[u32],
    is_write: &[bool],
) -> Result<Vec<bool>> {
    c.validate()?;
    if sizes.len() != times_ns.len() || is_write.len() != times_ns.len() {
        return Err(invalid(
            "columns",
            format!("{}/{}/{}", times_ns.len(), sizes.len(), is_write.len()),
            "times, sizes and kinds must have the same length",
        ));
    }
    let mut s = ClockState::default();
    let mut out = Vec::with_capacity(times_ns.len());
    for ((&t, &size), &w) in times_ns.iter().zip(sizes).zip(is_write) {
        out.push(s.busy_at(t));
        if w {
            s.write(c, t, u64::from(size));
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const C: WriteClock = WriteClock {
        flush_bytes: 4 << 20,
        gc_every_bytes: 16 << 20,
        delay_ns: 5_000_000,
        busy_ns: 100_000_000,
    };

    #[test]
    fn the_fourth_flush_predicts_a_busy_period_after_the_delay() {
        let mut s = ClockState::default();
        for i in 0..15u64 {
            s.write(&C, i, 1 << 20);
        }
        assert!(!s.busy_at(20_000_000));
        s.write(&C, 1_000, 1 << 20); // the 16th MiB: the fourth flush
        assert!(!s.busy_at(1_000 + 4_999_999));
        assert!(s.busy_at(1_000 + 5_000_000));
        assert!(s.busy_at(1_000 + 104_999_999));
        assert!(!s.busy_at(1_000 + 105_000_000));
    }

    #[test]
    fn an_anchored_clock_predicts_nothing_until_it_sees_a_busy_period_then_counts_from_it() {
        let mut s = ClockState::unknown_phase();
        assert!(!s.has_phase());
        for i in 0..40u64 {
            s.write(&C, i, 1 << 20);
        }
        assert!((0..400u64).all(|t| !s.busy_at(t * 1_000_000)));
        // A slow read submitted at 1 s: the device collects from then on.
        s.observe_slow_read(&C, 1_000_000_000);
        assert!(s.has_phase());
        assert!(s.busy_at(1_000_000_000) && s.busy_at(1_099_999_999));
        assert!(!s.busy_at(1_100_000_000));
        // Another slow read inside the predicted period does not move it.
        s.observe_slow_read(&C, 1_050_000_000);
        assert!(s.busy_at(1_000_000_000));
        // 16 MiB written after the anchor: the next collection is predicted 5 ms after the last.
        for i in 0..15u64 {
            s.write(&C, 1_200_000_000 + i, 1 << 20);
        }
        assert!(!s.busy_at(1_300_000_000));
        s.write(&C, 1_300_000_000, 1 << 20);
        assert!(s.busy_at(1_305_000_000));
        // A slow read outside the prediction re-anchors (drift correction).
        s.observe_slow_read(&C, 2_000_000_000);
        assert!(s.busy_at(2_000_000_000) && !s.busy_at(1_305_000_000));
        // A known-phase clock ignores observations.
        let mut k = ClockState::default();
        k.observe_slow_read(&C, 5);
        assert!(!k.busy_at(5));
    }

    #[test]
    fn anchoring_can_count_the_writes_sent_while_the_slow_read_was_outstanding() {
        // 15 MiB written after a slow read's submission, before it completed.
        let later: Vec<(u64, u64)> = (0..15u64).map(|i| (1_000 + i, 1 << 20)).collect();
        let mut counted = ClockState::unknown_phase();
        counted.anchor_and_count(&C, 1_000, later.iter().copied().chain([(999, 1 << 20)]));
        let mut plain = ClockState::unknown_phase();
        plain.observe_slow_read(&C, 1_000);
        // One more MiB completes the count for the clock that counted them (the write before
        // the submission is not counted), not for the other.
        counted.write(&C, 2_000_000_000, 1 << 20);
        plain.write(&C, 2_000_000_000, 1 << 20);
        assert!(counted.busy_at(2_005_000_000));
        assert!(!plain.busy_at(2_005_000_000));
        // Inside the predicted period nothing re-anchors, so nothing is counted twice.
        let mut s = ClockState::unknown_phase();
        s.anchor_and_count(&C, 1_000, []);
        s.anchor_and_count(&C, 2_000, later.iter().copied());
        s.write(&C, 3_000, 1 << 20);
        // Counted twice, the 16th MiB would predict a period until 105.003 ms.
        assert!(s.busy_at(100_000_999) && !s.busy_at(100_002_000));
    }

    #[test]
    fn a_gated_clock_reanchors_only_when_a_collection_is_due() {
        let mut s = ClockState::unknown_phase().gated();
        s.observe_slow_read(&C, 1_000_000_000);
        // Just after the predicted period, 4 MiB into the count: the last period's tail.
        for i in 0..4u64 {
            s.write(&C, 1_050_000_000 + i, 1 << 20);
        }
        assert!(!s.observe_slow_read(&C, 1_100_000_001));
        assert!(!s.busy_at(1_100_000_001));
        // Half way (8 MiB): a slow read outside the prediction re-anchors.
        for i in 0..4u64 {
            s.write(&C, 1_200_000_000 + i, 1 << 20);
        }
        assert!(s.observe_slow_read(&C, 1_300_000_000));
        assert!(s.busy_at(1_300_000_000));
        // Ungated, the tail re-anchors.
        let mut u = ClockState::unknown_phase();
        u.observe_slow_read(&C, 1_000_000_000);
        assert!(u.observe_slow_read(&C, 1_100_000_001));
    }

    #[test]
    fn a_told_clock_starts_from_the_aged_count() {
        let mut s = ClockState::told(&C, (16 << 20) * 3 + (12 << 20));
        for i in 0..3u64 {
            s.write(&C, i, 1 << 20);
        }
        assert!(!s.busy_at(10_000_000));
        s.write(&C, 3, 1 << 20); // 4 MiB more: the 16th
        assert!(s.busy_at(3 + 5_000_000));
    }

    #[test]
    fn a_vote_finds_the_phase_from_fast_and_slow_reads() {
        // The device has 2 flushes (8 MiB) counted and an empty buffer: its collection comes
        // with the 8th MiB written. Reads every MiB say fast before and slow after.
        // No flush delay: the collection starts at the write that completes the count.
        let c = WriteClock { delay_ns: 0, ..C };
        let mut v = PhaseVote::new(&c);
        assert_eq!(v.cands.len(), VOTE_CANDIDATES);
        let ms = 1_000_000u64;
        for i in 0..7u64 {
            v.write(&c, i * ms, 1 << 20);
            v.observe(i * ms + 1, false);
        }
        assert!(!v.busy_at(7 * ms), "no slow read yet: no prediction");
        v.write(&c, 7 * ms, 1 << 20);
        v.observe(7 * ms + 1, true);
        v.observe(8 * ms, true);
        assert!(v.busy_at(9 * ms));
        // 16 MiB later the next collection is predicted without another slow read.
        for i in 0..16u64 {
            assert!(!v.busy_at(200 * ms + i * ms), "{i}");
            v.write(&c, 200 * ms + i * ms, 1 << 20);
        }
        assert!(v.busy_at(216 * ms));
        assert!(!PhaseVote::new(&WriteClock::OFF).busy_at(0));
        assert!(!PhaseVote::new(&WriteClock::OFF).unsure_at(0));
    }

    #[test]
    fn a_half_life_lets_new_evidence_overturn_old() {
        // Two candidates' worth of evidence: 40 slow reads at 8 ms support the phases that
        // collected in the first 8 MiB; then the device is seen fast at 50 ms (inside those
        // phases' predicted period) 30 times. Without decay the old evidence still wins; with a
        // half-life of 10 reads it has faded and no phase is left with a positive score.
        let c = WriteClock { delay_ns: 0, ..C };
        let ms = 1_000_000u64;
        let run = |half_life: u32| {
            let mut v = PhaseVote::new(&c).half_life(half_life);
            for i in 0..8u64 {
                v.write(&c, i * ms, 1 << 20);
            }
            for _ in 0..40 {
                v.observe(8 * ms, true);
            }
            for _ in 0..30 {
                v.observe(50 * ms, false);
            }
            v.busy_at(60 * ms)
        };
        assert!(run(0));
        assert!(!run(10));
    }

    #[test]
    fn a_vote_is_unsure_before_its_first_slow_read_and_where_its_best_disagree() {
        let c = WriteClock { delay_ns: 0, ..C };
        let ms = 1_000_000u64;
        let mut v = PhaseVote::new(&c);
        assert!(v.unsure_at(0), "no phase yet");
        // 8 MiB written, then a slow read: the candidates that collected on any of the 8
        // writes explain it (their busy periods, 100 ms, all cover it) and tie.
        for i in 0..8u64 {
            v.write(&c, i * ms, 1 << 20);
        }
        v.observe(8 * ms, true);
        assert!(
            v.busy_at(9 * ms) && !v.unsure_at(9 * ms),
            "all the best agree"
        );
        // 100.5 ms later only the candidates that collected last are still busy.
        assert!(v.unsure_at(100 * ms + ms / 2));
        // Long after every predicted period: all agree it is not busy.
        assert!(!v.unsure_at(150 * ms) && !v.busy_at(150 * ms));
    }

    #[test]
    fn an_off_clock_never_predicts() {
        let mut s = ClockState::default();
        for i in 0..100u64 {
            s.write(&WriteClock::OFF, i, 1 << 24);
        }
        assert!((0..200u64).all(|t| !s.busy_at(t * 1_000_000)));
    }

    #[test]
    fn flags_see_only_earlier_writes_and_bad_input_is_named() {
        let times: Vec<u64> = (0..40).map(|i| i * 1_000_000).collect();
        let sizes = vec![1u32 << 20; 40];
        let kinds: Vec<bool> = (0..40).map(|i| i < 16).collect();
        let f = busy_flags(&C, &times, &sizes, &kinds).unwrap();
        // The 16th write (index 15, at 15 ms) completes the count: busy from 20 ms.
        assert!(!f[19] && f[20] && f[39]);
        let e = busy_flags(&C, &times, &sizes[..3], &kinds).unwrap_err();
        assert!(e.to_string().contains("columns"), "{e}");
        let bad = WriteClock { busy_ns: 0, ..C };
        let e = busy_flags(&bad, &times, &sizes, &kinds).unwrap_err();
        assert!(e.to_string().contains("busy_us"), "{e}");
    }
}
