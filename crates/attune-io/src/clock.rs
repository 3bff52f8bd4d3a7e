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
//! device. It assumes it has seen every write since the device was empty (the simulated devices
//! start empty); a router joining a device mid-life would have to find the phase first.
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
    fill: u64,
    flushed: u64,
    busy_from_ns: u64,
    busy_until_ns: u64,
}

impl ClockState {
    /// Counts a write of `size` bytes sent at `time_ns`.
    pub fn write(&mut self, c: &WriteClock, time_ns: u64, size: u64) {
        if !c.is_on() {
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
        time_ns >= self.busy_from_ns && time_ns < self.busy_until_ns
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
