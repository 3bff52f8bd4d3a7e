//! Merge counters: a few keys (`m000`…, outside the oracle's `k…` keys, so ranges, scans and
//! ingests never touch them) that only ever receive `add` merge operands of 1 to 3. The
//! expected state is three sums per counter since the last verified value (`base`): issued
//! (every merge begun), acknowledged, and acknowledged with `sync`.
//!
//! A read of a counter while the workers run must lie between its base plus what was
//! acknowledged before the read and its base plus what was issued after it. After a crash the
//! recovered value must lie between the base plus what had to survive (everything acknowledged
//! for a process kill or a clean close; what was acknowledged with `sync` for a machine crash)
//! and the base plus everything issued: no acknowledged merge lost, none applied twice.
//!
//! Thread safety: atomics only; workers add while readers load.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counter keys: 16, so that each takes many merges per cycle (operands pile up across
/// flushes, compactions fold them).
pub const COUNTERS: u32 = 16;

/// The key of counter `c`.
pub fn counter_key(c: u32) -> Vec<u8> {
    format!("m{c:03}").into_bytes()
}

/// The first key past the oracle's keys and before the counters' (bounds of full scans).
pub const COUNTERS_START: &[u8] = b"m";

/// The expected state of the counters.
pub struct CounterOracle {
    base: Vec<AtomicU64>,
    issued: Vec<AtomicU64>,
    acked: Vec<AtomicU64>,
    synced: Vec<AtomicU64>,
}

impl Default for CounterOracle {
    fn default() -> Self {
        let v = || (0..COUNTERS).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        CounterOracle {
            base: v(),
            issued: v(),
            acked: v(),
            synced: v(),
        }
    }
}

impl CounterOracle {
    /// A merge of `n` to counter `c` begins (before the engine sees it).
    pub fn issue(&self, c: u32, n: u64) {
        self.issued[c as usize].fetch_add(n, Ordering::SeqCst);
    }

    /// The merge of `n` to counter `c` ended: acknowledged (`ok`), with `sync` or not.
    pub fn finish(&self, c: u32, n: u64, ok: bool, sync: bool) {
        if ok {
            self.acked[c as usize].fetch_add(n, Ordering::SeqCst);
            if sync {
                self.synced[c as usize].fetch_add(n, Ordering::SeqCst);
            }
        }
    }

    /// The least value a read of counter `c` may return now.
    pub fn lower_now(&self, c: u32) -> u64 {
        self.base[c as usize].load(Ordering::SeqCst) + self.acked[c as usize].load(Ordering::SeqCst)
    }

    /// The largest value a read of counter `c` may return now.
    pub fn upper_now(&self, c: u32) -> u64 {
        self.base[c as usize].load(Ordering::SeqCst)
            + self.issued[c as usize].load(Ordering::SeqCst)
    }

    /// Checks recovered counter values; `all_acked_durable`: a process kill or a clean close
    /// (every acknowledged merge must be there), else a machine crash (the synced ones must).
    pub fn verify(&self, read: &[u64], all_acked_durable: bool) -> Result<(), String> {
        for (c, &v) in read.iter().enumerate() {
            let base = self.base[c].load(Ordering::SeqCst);
            let must = if all_acked_durable {
                self.acked[c].load(Ordering::SeqCst)
            } else {
                self.synced[c].load(Ordering::SeqCst)
            };
            let lo = base + must;
            let hi = base + self.issued[c].load(Ordering::SeqCst);
            if v < lo || v > hi {
                return Err(format!(
                    "merge counter {c}: recovered {v}, expected between {lo} (base {base} plus \
                     the merges that had to survive) and {hi} (every merge issued)"
                ));
            }
        }
        Ok(())
    }

    /// Starts over from recovered values.
    pub fn rebase(&self, read: &[u64]) {
        for (c, &v) in read.iter().enumerate() {
            self.base[c].store(v, Ordering::SeqCst);
            self.issued[c].store(0, Ordering::SeqCst);
            self.acked[c].store(0, Ordering::SeqCst);
            self.synced[c].store(0, Ordering::SeqCst);
        }
    }
}

/// A counter's value as stored: 8 little-endian bytes, absent = 0.
pub fn decode(v: Option<&[u8]>) -> Result<u64, String> {
    match v {
        None => Ok(0),
        Some(b) => b
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| format!("a merge counter holds {} bytes, not 8", b.len())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_acknowledged_merge_or_a_doubled_one_is_caught() {
        let o = CounterOracle::default();
        o.issue(0, 2);
        o.finish(0, 2, true, false);
        o.issue(0, 3);
        let mut read = vec![0u64; COUNTERS as usize];
        read[0] = 2;
        assert!(o.verify(&read, true).is_ok());
        read[0] = 5; // the in-flight merge landed
        assert!(o.verify(&read, true).is_ok());
        read[0] = 1;
        assert!(o.verify(&read, true).is_err());
        read[0] = 6;
        assert!(o.verify(&read, true).is_err());
        read[0] = 0; // a machine crash may lose the unsynced one
        assert!(o.verify(&read, false).is_ok());
        o.rebase(&read);
        assert_eq!(o.lower_now(0), 0);
    }
}
