//! The expected-state oracle: for every key, the ordered history of writes since the last
//! verified recovery, each pending, acknowledged (with or without `sync`) or failed, and from it
//! the set of values a read or a recovery may return.
//!
//! Rules (the engine's promise, docs/RELIABILITY.md):
//! - Live: a read returns the newest acknowledged write or a later failed one (a failed write may
//!   have reached the log).
//! - After a machine crash: a write is *durable* when it was acknowledged with `sync`, or
//!   acknowledged before an acknowledged `sync` write was issued. Each key must hold its newest
//!   durable write or a later one; a batch is all or nothing; and the recovered state is a
//!   prefix: if a write is present, every write acknowledged before it was issued is present.
//! - After a process crash (SIGKILL) or a clean close: every acknowledged write is durable.
//! - After a process crash of an engine that keeps unlogged writes in memory until it migrates
//!   them (HashDB with `recovery_log` off, [`Lost::Unmigrated`]): a write is durable once a
//!   checkpoint issued after its acknowledgement has returned. Each key must hold its newest
//!   durable write or a later one (so never a value no write stored, and never a value from
//!   before its newest durable delete); no prefix rule holds, since each DRAM entry migrates on
//!   its own.
//!
//! Keys are locked one mutex each; a writer holds the locks of all its keys (taken in key
//! order) from before it issues the write until its outcome is recorded, so the history of a key
//! is in the order the engine applied its writes.
//!
//! Thread safety: `Oracle` is `Sync`; the per-key mutexes are the key locks.

use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// State of one write in a key's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// What the last verified recovery found (durable by definition).
    Base,
    Pending,
    Acked {
        ack: u64,
        sync: bool,
    },
    /// The engine returned an error: it may or may not be applied.
    Failed,
}

/// One write of one key: `op` names the write (and thus the value); `put` false is a delete.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub op: u64,
    pub put: bool,
    pub state: State,
}

/// The history of one key since the last recovery; `entries[0]` is the base.
#[derive(Clone, Debug)]
pub struct KeyHist {
    pub entries: Vec<Entry>,
}

/// Cross-key facts about one write.
#[derive(Clone, Debug)]
pub struct WriteInfo {
    pub keys: Vec<u32>,
    /// The acknowledgement counter when the write was issued: every write with a smaller
    /// acknowledgement number was acknowledged before this one was issued.
    pub issue_mark: u64,
}

/// What a verification saw.
#[derive(Clone, Debug, Default)]
pub struct VerifyStats {
    pub keys_checked: u64,
    pub keys_present: u64,
    pub writes_lost_allowed: u64,
    pub inflight_recovered: u64,
}

pub struct Oracle {
    keys: Vec<Mutex<KeyHist>>,
    writes: Mutex<HashMap<u64, WriteInfo>>,
    ack_counter: AtomicU64,
    /// Every write acknowledged with a number below this is durable against a machine crash.
    durable_mark: AtomicU64,
    /// Every write acknowledged with a number below this was migrated by a returned checkpoint
    /// (durable without a recovery log).
    checkpoint_mark: AtomicU64,
    /// Checkpoints begun and not yet returned: id -> the acknowledgement counter at the start.
    checkpoints: Mutex<HashMap<u64, u64>>,
    /// The merge counters' expected state (kept beside the keys', checked on its own).
    pub counters: crate::counters::CounterOracle,
}

/// What a crash may have lost, for [`Oracle::verify_after`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// Nothing acknowledged (a process crash or a clean close of a logging engine).
    Nothing,
    /// Acknowledged writes not made durable by a `sync` write (a machine crash).
    Unsynced,
    /// Acknowledged writes that no returned checkpoint migrated (a process crash of HashDB
    /// with `recovery_log` off: a record survives once its DRAM entry has migrated).
    Unmigrated,
}

/// Where a recovered key's value sits in its history: candidate entry indices.
#[derive(Clone, Debug)]
struct Found {
    /// Candidate indices (a present value has one; "absent" may match several deletes).
    lo: usize,
    hi: usize,
}

impl Oracle {
    /// An oracle for `key_count` keys, all absent.
    pub fn new(key_count: u32) -> Oracle {
        let base = || KeyHist {
            entries: vec![Entry {
                op: 0,
                put: false,
                state: State::Base,
            }],
        };
        Oracle {
            keys: (0..key_count).map(|_| Mutex::new(base())).collect(),
            writes: Mutex::new(HashMap::new()),
            ack_counter: AtomicU64::new(1),
            durable_mark: AtomicU64::new(0),
            checkpoint_mark: AtomicU64::new(0),
            checkpoints: Mutex::new(HashMap::new()),
            counters: Default::default(),
        }
    }

    pub fn key_count(&self) -> u32 {
        self.keys.len() as u32
    }

    /// Locks the given keys (sorted, unique) in order.
    pub fn lock(&self, keys: &[u32]) -> Vec<MutexGuard<'_, KeyHist>> {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        keys.iter().map(|&k| self.keys[k as usize].lock()).collect()
    }

    /// Records the issue of write `op` of `items` (key, put) whose keys are locked in `guards`
    /// (same order). Returns the issue mark.
    pub fn issue(&self, guards: &mut [MutexGuard<'_, KeyHist>], op: u64, items: &[(u32, bool)]) {
        let issue_mark = self.ack_counter.load(Ordering::SeqCst);
        for (g, &(_, put)) in guards.iter_mut().zip(items) {
            g.entries.push(Entry {
                op,
                put,
                state: State::Pending,
            });
        }
        self.writes.lock().insert(
            op,
            WriteInfo {
                keys: items.iter().map(|&(k, _)| k).collect(),
                issue_mark,
            },
        );
    }

    /// Records the outcome of write `op`; keys still locked in `guards`.
    pub fn finish(&self, guards: &mut [MutexGuard<'_, KeyHist>], op: u64, ok: bool, sync: bool) {
        let state = if ok {
            let ack = self.ack_counter.fetch_add(1, Ordering::SeqCst);
            if sync {
                let mark = self.writes.lock().get(&op).map_or(0, |w| w.issue_mark);
                self.durable_mark.fetch_max(mark, Ordering::SeqCst);
            }
            State::Acked { ack, sync }
        } else {
            State::Failed
        };
        for g in guards.iter_mut() {
            if let Some(e) = g.entries.iter_mut().rev().find(|e| e.op == op) {
                e.state = state;
            }
        }
    }

    /// Records the start of checkpoint `id`: every write acknowledged so far is migrated by it.
    pub fn checkpoint_begin(&self, id: u64) {
        let mark = self.ack_counter.load(Ordering::SeqCst);
        self.checkpoints.lock().insert(id, mark);
    }

    /// Records that checkpoint `id` returned: the writes acknowledged before it began are
    /// durable without the recovery log. An unknown id is an error (a malformed stream).
    pub fn checkpoint_done(&self, id: u64) -> Result<(), String> {
        let mark = self
            .checkpoints
            .lock()
            .remove(&id)
            .ok_or_else(|| format!("checkpoint {id} returned but never began"))?;
        self.checkpoint_mark.fetch_max(mark, Ordering::SeqCst);
        Ok(())
    }

    /// Values a read may return now (keys locked by the caller): the newest acknowledged (or
    /// base) entry and every failed one after it, as (op, put).
    pub fn allowed_live(h: &KeyHist) -> Vec<(u64, bool)> {
        let from = h
            .entries
            .iter()
            .rposition(|e| matches!(e.state, State::Base | State::Acked { .. }))
            .unwrap_or(0);
        h.entries[from..]
            .iter()
            .filter(|e| !matches!(e.state, State::Pending))
            .map(|e| (e.op, e.put))
            .collect()
    }

    /// Checks the recovered `read` (op of the value found per key, None for absent) against the
    /// histories. `all_acked_durable`: process crash or clean close (every acknowledged write
    /// must survive); else a machine crash. Returns the first violation found.
    pub fn verify(
        &self,
        read: &[Option<u64>],
        all_acked_durable: bool,
        stats: &mut VerifyStats,
    ) -> Result<(), String> {
        let lost = if all_acked_durable {
            Lost::Nothing
        } else {
            Lost::Unsynced
        };
        self.verify_after(read, lost, stats)
    }

    /// Checks the recovered `read` against the histories for a crash that may have lost what
    /// `lost` says. Returns the first violation found.
    pub fn verify_after(
        &self,
        read: &[Option<u64>],
        lost: Lost,
        stats: &mut VerifyStats,
    ) -> Result<(), String> {
        let all_acked_durable = lost == Lost::Nothing;
        let durable_mark = self.durable_mark.load(Ordering::SeqCst);
        let checkpoint_mark = self.checkpoint_mark.load(Ordering::SeqCst);
        let hists: Vec<MutexGuard<'_, KeyHist>> = self.keys.iter().map(|k| k.lock()).collect();
        let writes = self.writes.lock();
        let mut found: Vec<Found> = Vec::with_capacity(hists.len());
        for (k, h) in hists.iter().enumerate() {
            stats.keys_checked += 1;
            let durable = |e: &Entry| match (e.state, lost) {
                (State::Base, _) => true,
                (State::Acked { .. }, Lost::Nothing) => true,
                (State::Acked { ack, sync }, Lost::Unsynced) => sync || ack < durable_mark,
                (State::Acked { ack, .. }, Lost::Unmigrated) => ack < checkpoint_mark,
                _ => false,
            };
            let floor = h.entries.iter().rposition(durable).unwrap_or(0);
            let got = read.get(k).copied().flatten();
            let matches: Vec<usize> = (floor..h.entries.len())
                .filter(|&i| {
                    let e = &h.entries[i];
                    match got {
                        Some(op) => e.put && e.op == op,
                        None => !e.put,
                    }
                })
                .collect();
            let (Some(&lo), Some(&hi)) = (matches.first(), matches.last()) else {
                let want = &h.entries[floor];
                return Err(format!(
                    "key {k}: recovered {} but the newest durable write is {} {} (history {:?})",
                    got.map_or("absent".to_string(), |op| format!("the value of op {op}")),
                    if want.put {
                        "put by op"
                    } else {
                        "delete by op"
                    },
                    want.op,
                    h.entries
                ));
            };
            if got.is_some() {
                stats.keys_present += 1;
            }
            let last_acked = h
                .entries
                .iter()
                .rposition(|e| matches!(e.state, State::Acked { .. }));
            if last_acked.is_some_and(|a| a > hi) {
                stats.writes_lost_allowed += 1;
            }
            if h.entries[lo..=hi]
                .iter()
                .all(|e| matches!(e.state, State::Pending | State::Failed))
            {
                stats.inflight_recovered += 1;
            }
            found.push(Found { lo, hi });
        }
        // Batches are all or nothing.
        for (op, w) in writes.iter().filter(|(_, w)| w.keys.len() > 1) {
            let mut applied = None;
            let mut applied_key = 0;
            for &k in &w.keys {
                let h = &hists[k as usize];
                let Some(idx) = h.entries.iter().position(|e| e.op == *op) else {
                    continue;
                };
                let f = &found[k as usize];
                // A later write recovered at this key shows the batch was applied only if the
                // batch reached the log: an acknowledged one did, and sits before every later
                // write to the key. A failed batch may never have reached it (a failed log
                // switch fails the write and the next write goes on), so at a key where a
                // later write came back it is undecided; only its own value decides.
                let reached = matches!(h.entries[idx].state, State::Acked { .. });
                let here = if (f.lo == idx && f.hi == idx) || (f.lo >= idx && reached) {
                    Some(true)
                } else if f.hi < idx {
                    Some(false)
                } else {
                    None
                };
                match (applied, here) {
                    (Some(a), Some(b)) if a != b => {
                        return Err(format!(
                            "batch op {op} ({:?}): applied at key {applied_key} = {a} but at \
                             key {k} = {b} (keys {:?})",
                            h.entries[idx].state, w.keys
                        ));
                    }
                    (None, Some(b)) => {
                        applied = Some(b);
                        applied_key = k;
                    }
                    _ => {}
                }
            }
        }
        if all_acked_durable {
            return Ok(()); // every acknowledged write is at or below each key's floor
        }
        if lost == Lost::Unmigrated {
            return Ok(()); // entries migrate independently: no prefix to check
        }
        // Prefix: every write acknowledged before a recovered write was issued is recovered.
        let mut need = 0u64;
        let mut need_op = 0u64;
        for (k, h) in hists.iter().enumerate() {
            let f = &found[k];
            if f.lo == f.hi {
                let e = &h.entries[f.lo];
                if let Some(w) = writes.get(&e.op).filter(|_| e.state != State::Base) {
                    if w.issue_mark > need {
                        need = w.issue_mark;
                        need_op = e.op;
                    }
                }
            }
        }
        for (k, h) in hists.iter().enumerate() {
            let last_needed = h
                .entries
                .iter()
                .rposition(|e| matches!(e.state, State::Acked { ack, .. } if ack < need));
            if let Some(i) = last_needed.filter(|&i| found[k].hi < i) {
                return Err(format!(
                    "not a prefix: op {need_op} was recovered but key {k} lost op {}, \
                     acknowledged before op {need_op} was issued",
                    h.entries[i].op
                ));
            }
        }
        Ok(())
    }

    /// After a verified recovery: the recovered values become each key's base; histories and
    /// write records are dropped.
    pub fn rebase(&self, read: &[Option<u64>]) {
        let mut writes = self.writes.lock();
        for (k, m) in self.keys.iter().enumerate() {
            let got = read.get(k).copied().flatten();
            m.lock().entries = vec![Entry {
                op: got.unwrap_or(0),
                put: got.is_some(),
                state: State::Base,
            }];
        }
        writes.clear();
        self.checkpoints.lock().clear();
        self.durable_mark
            .store(self.ack_counter.load(Ordering::SeqCst), Ordering::SeqCst);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report
mod tests {
    use super::*;

    fn write(o: &Oracle, op: u64, items: &[(u32, bool)], ok: bool, sync: bool) {
        let keys: Vec<u32> = items.iter().map(|&(k, _)| k).collect();
        let mut g = o.lock(&keys);
        o.issue(&mut g, op, items);
        o.finish(&mut g, op, ok, sync);
    }

    #[test]
    fn lost_sync_write_is_a_violation() {
        let o = Oracle::new(2);
        write(&o, 1, &[(0, true)], true, true);
        let mut s = VerifyStats::default();
        assert!(o.verify(&[None, None], false, &mut s).is_err());
        assert!(o.verify(&[Some(1), None], false, &mut s).is_ok());
    }

    #[test]
    fn unsynced_suffix_may_be_lost_but_not_a_middle() {
        let o = Oracle::new(3);
        write(&o, 1, &[(0, true)], true, false);
        write(&o, 2, &[(1, true)], true, false);
        write(&o, 3, &[(2, true)], true, false);
        let mut s = VerifyStats::default();
        assert!(o.verify(&[Some(1), None, None], false, &mut s).is_ok());
        assert!(o.verify(&[None, None, None], false, &mut s).is_ok());
        let hole = o.verify(&[Some(1), None, Some(3)], false, &mut s);
        assert!(hole.unwrap_err().contains("not a prefix"));
        // After a process crash every acknowledged write must be there.
        assert!(o.verify(&[Some(1), Some(2), None], true, &mut s).is_err());
    }

    #[test]
    fn half_a_batch_is_a_violation_and_resurrection_too() {
        let o = Oracle::new(2);
        write(&o, 1, &[(0, true)], true, true);
        write(&o, 2, &[(0, false)], true, true); // delete, synced
        write(&o, 3, &[(0, true), (1, true)], false, false); // failed batch
        let mut s = VerifyStats::default();
        assert!(o.verify(&[Some(3), Some(3)], false, &mut s).is_ok());
        assert!(o.verify(&[None, None], false, &mut s).is_ok());
        assert!(o.verify(&[Some(3), None], false, &mut s).is_err());
        let r = o.verify(&[Some(1), None], false, &mut s);
        assert!(
            r.unwrap_err().contains("newest durable"),
            "resurrected delete"
        );
    }

    /// Regression (seed 20262023, a cycle with injected faults): a batch failed without
    /// reaching the log and a later write to one of its keys succeeded. That key's later value
    /// says nothing about the batch; only the batch's own value at a key does.
    #[test]
    fn a_failed_batch_overwritten_at_one_key_is_not_half_applied() {
        let o = Oracle::new(2);
        write(&o, 1, &[(0, true), (1, true)], true, true);
        write(&o, 2, &[(0, true), (1, true)], false, false); // failed batch
        write(&o, 3, &[(0, true)], true, false);
        let mut s = VerifyStats::default();
        assert!(o.verify(&[Some(3), Some(1)], false, &mut s).is_ok());
        assert!(o.verify(&[Some(3), Some(2)], false, &mut s).is_ok());
        // Its own value at one key and the value before it at the other is half a batch.
        let half = o.verify(&[Some(2), Some(1)], false, &mut s);
        assert!(half.unwrap_err().contains("batch op 2"));
        // Acknowledged, the batch precedes the later write in the log: the same reads are
        // half a batch.
        let o = Oracle::new(2);
        write(&o, 1, &[(0, true), (1, true)], true, true);
        write(&o, 2, &[(0, true), (1, true)], true, false);
        write(&o, 3, &[(0, true)], true, false);
        assert!(o.verify(&[Some(3), Some(1)], false, &mut s).is_err());
    }

    /// Without the recovery log, only what a returned checkpoint migrated must survive: a
    /// newer write may be lost, but a value no write stored, a put from before a checkpointed
    /// delete, or the loss of a checkpointed put is a violation.
    #[test]
    fn unlogged_crash_keeps_checkpointed_writes_and_resurrects_nothing() {
        let unmigrated = Lost::Unmigrated;
        let mut s = VerifyStats::default();
        let o = Oracle::new(3);
        write(&o, 1, &[(0, true)], true, false);
        write(&o, 2, &[(1, true)], true, true);
        o.checkpoint_begin(100);
        o.checkpoint_done(100).unwrap();
        write(&o, 4, &[(1, false)], true, false);
        o.checkpoint_begin(101);
        // Acknowledged while the checkpoint runs: it may not have migrated them.
        write(&o, 3, &[(0, true)], true, true);
        write(&o, 5, &[(2, true)], true, false);
        o.checkpoint_done(101).unwrap();
        for ok in [
            [Some(1), None, None],
            [Some(3), None, Some(5)],
            [Some(1), None, Some(5)],
        ] {
            assert!(o.verify_after(&ok, unmigrated, &mut s).is_ok(), "{ok:?}");
        }
        // Key 1's put from before its checkpointed delete came back.
        let r = o.verify_after(&[Some(1), Some(2), None], unmigrated, &mut s);
        assert!(r.unwrap_err().contains("key 1"));
        // A value no write to key 0 stored.
        let r = o.verify_after(&[Some(4), None, None], unmigrated, &mut s);
        assert!(r.unwrap_err().contains("key 0"));
        // Key 0's checkpointed put was lost.
        let r = o.verify_after(&[None, None, None], unmigrated, &mut s);
        assert!(r.unwrap_err().contains("key 0"));
        // The same reads after a logged process crash lose acknowledged writes.
        assert!(o.verify(&[Some(1), None, None], true, &mut s).is_err());
        // A checkpoint that never began is a malformed stream.
        assert!(o.checkpoint_done(7).is_err());
    }

    /// An unfinished checkpoint (the kill landed inside it) makes nothing durable.
    #[test]
    fn an_unfinished_checkpoint_makes_nothing_durable_without_the_log() {
        let o = Oracle::new(1);
        write(&o, 1, &[(0, true)], true, true);
        o.checkpoint_begin(9);
        let mut s = VerifyStats::default();
        assert!(o.verify_after(&[None], Lost::Unmigrated, &mut s).is_ok());
        o.checkpoint_done(9).unwrap();
        assert!(o.verify_after(&[None], Lost::Unmigrated, &mut s).is_err());
    }
}
