//! The user iterator: a merging iterator over a captured `SuperVersion`, bounded to [lower,
//! upper), that reads separated values when it lands on them and reads ahead on long scans.
//!
//! A `DbIterator` is used by one thread at a time and may move between threads (`Send`). It pins
//! its `SuperVersion`, so the files it reads stay alive until it is dropped.

use super::{DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::iter::DbIter;
use crate::options::{Prefetcher, ReadOptions};
use crate::vlog::BlobPointer;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl DbInner {
    pub(super) fn iter(self: &Arc<Self>, ro: &ReadOptions) -> DbIterator {
        let sv = self.sv.read().clone();
        let seq = ro
            .snapshot
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire));
        let fill = !ro.fill_cache_off;
        let (inner, error) = self.internal_iter(&sv, seq, fill);
        DbIterator {
            inner,
            db: self.clone(),
            sv,
            seq,
            error,
            lower: None,
            upper: None,
            blob_value: Vec::new(),
            on_blob: false,
            ahead: None,
            nexts: 0,
            slow_reads: 0,
            scan: None,
        }
    }
}

/// A user-facing iterator with optional bounds [lower, upper). Values kept in the value log are
/// read when the iterator lands on them. A forward scan (two `next` calls in a row) whose value
/// reads go to the device (one took over 30 µs) also starts the OS reading the next
/// `blob_prefetch_depth` separated values, found by a second iterator running ahead over the
/// keys (WiscKey's parallel range-query reads); scans served by the page cache skip it.
pub struct DbIterator {
    inner: DbIter,
    db: Arc<DbInner>,
    sv: Arc<SuperVersion>,
    seq: u64,
    error: Option<Error>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// The current value when it came from the value log.
    blob_value: Vec<u8>,
    on_blob: bool,
    /// The read-ahead iterator, `blob_prefetch_depth` entries in front of `inner`.
    ahead: Option<DbIter>,
    /// Consecutive `next` calls (a scan is detected at two).
    nexts: u32,
    /// Value reads slow enough to have gone to the device; read-ahead starts after the first
    /// (values already in the page cache gain nothing from it and pay its system calls).
    slow_reads: u32,
    /// `prefetcher = tinfetch`: the forward scan in progress.
    scan: Option<TinScan>,
}

/// A forward scan under `prefetcher = tinfetch` (see `db/prefetch.rs`).
struct TinScan {
    /// Recent scan lengths, sorted, taken at the seek (empty: the fixed rule).
    lengths: Vec<u32>,
    /// Recent value reads went to the device.
    device: bool,
    /// Position of the current entry (0: where the seek landed).
    pos: u32,
    /// Positions below this are hinted or read; the read-ahead iterator stands here.
    hinted: u32,
    /// Entries the scan has landed on so far.
    values: u32,
    /// The iterator's slow value reads before the scan began.
    slow_before: u32,
}

/// A value-log read slower than this went to the device, not the page cache.
pub(super) const SLOW_BLOB_READ_MICROS: u64 = 30;

impl DbIterator {
    /// Restricts the iterator to keys in [lower, upper).
    pub fn set_bounds(&mut self, lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) {
        self.lower = lower;
        self.upper = upper;
    }

    pub fn valid(&self) -> bool {
        if self.error.is_some() || !self.inner.valid() {
            return false;
        }
        let k = self.inner.key();
        !(self.lower.as_deref().is_some_and(|l| k < l)
            || self.upper.as_deref().is_some_and(|u| k >= u))
    }

    /// Reads the current value from the value log if it lives there.
    fn settle(&mut self) {
        self.on_blob = false;
        if let Some(sc) = self.scan.as_mut() {
            if self.error.is_none() && self.inner.valid() {
                sc.values = sc.values.saturating_add(1);
            }
        }
        if !self.valid() || !self.inner.value_is_blob() {
            return;
        }
        let timed = match self.db.opts.prefetcher {
            Prefetcher::Off => false,
            Prefetcher::Fixed => self.db.opts.blob_prefetch_depth > 0,
            Prefetcher::TinFetch => true,
        };

        let t0 = if timed { self.db.env.now_micros() } else { 0 };
        let r = match BlobPointer::decode(self.inner.value()) {
            Some(p) => self.db.read_blob(&self.sv.blobs, self.inner.key(), &p),
            None => Err(Error::corruption(
                "<iterator>",
                0,
                "malformed value pointer met during iteration",
            )),
        };
        if timed && self.db.env.now_micros().saturating_sub(t0) >= SLOW_BLOB_READ_MICROS {
            self.slow_reads = self.slow_reads.saturating_add(1);
        }
        match r {
            Ok(v) => {
                self.blob_value = v;
                self.on_blob = true;
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// False (with the error kept for `status`) once the database is closed or this is a
    /// forked child: every positioning checks, so a closed database is never read.
    fn alive(&mut self) -> bool {
        if self.error.is_some() {
            return false;
        }
        match self.db.usable() {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                self.on_blob = false;
                self.ahead = None;
                false
            }
        }
    }

    /// Any positioning other than `next` ends a scan.
    fn reset_scan(&mut self) {
        self.finish_tin_scan();
        self.ahead = None;
        self.nexts = 0;
    }

    /// Records the scan in progress (`prefetcher = tinfetch`) in the database's history.
    fn finish_tin_scan(&mut self) {
        if let (Some(sc), Some(pf)) = (self.scan.take(), self.db.prefetch.as_ref()) {
            if sc.values > 0 {
                pf.record_scan(sc.values, self.slow_reads > sc.slow_before);
            }
        }
    }

    /// Reads the entry a seek landed on and starts a forward scan there (`prefetcher =
    /// tinfetch`): the first hints go out beside that demand read, or with `first_read_first`
    /// just after it, so that it does not queue behind them.
    fn start_and_settle(&mut self) {
        let after = self
            .db
            .prefetch
            .as_ref()
            .is_some_and(|pf| pf.switches.first_read_first);
        if !after {
            self.start_tin_scan(self.slow_reads, 0);
            self.settle();
            return;
        }
        let slow_before = self.slow_reads;
        self.settle();
        let landed = self.error.is_none() && self.inner.valid();
        self.start_tin_scan(slow_before, u32::from(landed));
    }

    /// Starts a forward scan at the entry a seek landed on (`prefetcher = tinfetch`), `values`
    /// of them read already.
    fn start_tin_scan(&mut self, slow_before: u32, values: u32) {
        if let Some(pf) = self.db.prefetch.as_ref() {
            let (lengths, device) = pf.snapshot();
            self.scan = Some(TinScan {
                lengths,
                device,
                pos: 0,
                hinted: 1,
                values,
                slow_before,
            });
            self.advance_tin();
        }
    }

    /// Keeps the hints of a `prefetcher = tinfetch` scan as far ahead as its history says,
    /// refilled (merged) once half of the window is used.
    fn advance_tin(&mut self) {
        let Some(pf) = self.db.prefetch.as_ref() else {
            return;
        };
        let Some(sc) = self.scan.as_ref() else {
            return;
        };
        if self.sv.blobs.is_empty()
            || !self.inner.valid()
            || !(sc.device || self.slow_reads > sc.slow_before)
        {
            return;
        }
        let mut target = super::prefetch::hint_target(&sc.lengths, sc.pos, pf.cold_depth);
        if pf.switches.cap_hints {
            target = target.min(
                sc.pos
                    .saturating_add(1)
                    .saturating_add(super::prefetch::HINTS_IN_FLIGHT),
            );
        }
        let (pos, hinted) = (sc.pos, sc.hinted.max(sc.pos + 1));
        let window = target.saturating_sub(pos + 1);
        let left = hinted - (pos + 1);
        let due = target.saturating_sub(hinted);
        if due == 0 || (due < super::prefetch::REFILL_MIN && left > window / 2) {
            return;
        }
        let mut a = match self.ahead.take() {
            Some(a) => a,
            None => {
                let (mut a, err) = self.db.internal_iter(&self.sv, self.seq, false);
                if err.is_some() {
                    return; // the main iterator reports it
                }
                a.seek(self.inner.key());
                if a.valid() {
                    a.next();
                }
                a
            }
        };
        let mut ptrs = Vec::new();
        let mut at = hinted;
        while at < target && self.ahead_in_bounds(&a) {
            if a.value_is_blob() {
                if let Some(p) = BlobPointer::decode(a.value()) {
                    ptrs.push(p);
                }
            }
            a.next();
            at += 1;
        }
        self.ahead = Some(a);
        if let Some(sc) = self.scan.as_mut() {
            sc.hinted = at;
        }
        self.db
            .counters
            .blob_prefetches
            .fetch_add(ptrs.len() as u64, Ordering::Relaxed);
        pf.hint(&self.sv.blobs, &ptrs);
    }

    fn prefetch_at(&self, it: &DbIter) {
        if !it.value_is_blob() {
            return;
        }
        if let Some(p) = BlobPointer::decode(it.value()) {
            if let Some(f) = self.sv.blobs.get(&p.file) {
                f.prefetch(&p);
                self.db
                    .counters
                    .blob_prefetches
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn ahead_in_bounds(&self, it: &DbIter) -> bool {
        it.valid() && self.upper.as_deref().is_none_or(|u| it.key() < u)
    }

    /// Keeps the read-ahead iterator `blob_prefetch_depth` entries in front during a scan.
    fn advance_ahead(&mut self) {
        if self.db.opts.prefetcher != Prefetcher::Fixed {
            return;
        }
        let depth = self.db.opts.blob_prefetch_depth;
        if depth == 0
            || self.slow_reads == 0
            || self.sv.blobs.is_empty()
            || self.nexts < 2
            || !self.inner.valid()
        {
            return;
        }
        match self.ahead.take() {
            None => {
                let (mut a, err) = self.db.internal_iter(&self.sv, self.seq, false);
                if err.is_some() {
                    return; // the main iterator reports it
                }
                a.seek(self.inner.key());
                if a.valid() {
                    a.next();
                }
                for _ in 0..depth {
                    if !self.ahead_in_bounds(&a) {
                        break;
                    }
                    self.prefetch_at(&a);
                    a.next();
                }
                self.ahead = Some(a);
            }
            Some(mut a) => {
                if self.ahead_in_bounds(&a) {
                    self.prefetch_at(&a);
                    a.next();
                }
                self.ahead = Some(a);
            }
        }
    }

    pub fn seek_to_first(&mut self) {
        if !self.alive() {
            return;
        }
        self.reset_scan();
        match self.lower.clone() {
            Some(l) => self.inner.seek(&l),
            None => self.inner.seek_to_first(),
        }
        self.start_and_settle();
    }

    pub fn seek_to_last(&mut self) {
        if !self.alive() {
            return;
        }
        self.reset_scan();
        match self.upper.clone() {
            Some(u) => {
                self.inner.seek(&u);
                if self.inner.valid() {
                    self.inner.prev();
                } else if self.inner.status().is_ok() {
                    self.inner.seek_to_last();
                }
            }
            None => self.inner.seek_to_last(),
        }
        self.settle();
    }

    pub fn seek(&mut self, key: &[u8]) {
        if !self.alive() {
            return;
        }
        self.reset_scan();
        match &self.lower {
            Some(l) if key < &l[..] => {
                let l = l.clone();
                self.inner.seek(&l)
            }
            _ => self.inner.seek(key),
        }
        self.start_and_settle();
    }

    pub fn seek_for_prev(&mut self, key: &[u8]) {
        if !self.alive() {
            return;
        }
        match &self.upper {
            Some(u) if key >= &u[..] => self.seek_to_last(),
            _ => {
                self.reset_scan();
                self.inner.seek_for_prev(key);
                self.settle();
            }
        }
    }

    pub fn next(&mut self) {
        if !self.alive() {
            return;
        }
        self.inner.next();
        self.nexts = self.nexts.saturating_add(1);
        self.advance_ahead();
        if let Some(sc) = self.scan.as_mut() {
            sc.pos = sc.pos.saturating_add(1);
            self.advance_tin();
        }
        self.settle();
    }

    pub fn prev(&mut self) {
        if !self.alive() {
            return;
        }
        self.reset_scan();
        self.inner.prev();
        self.settle();
    }

    pub fn key(&self) -> &[u8] {
        self.inner.key()
    }

    pub fn value(&self) -> &[u8] {
        if self.on_blob {
            &self.blob_value
        } else {
            self.inner.value()
        }
    }

    pub fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        self.inner.status()
    }
}

impl Drop for DbIterator {
    fn drop(&mut self) {
        self.finish_tin_scan();
    }
}
