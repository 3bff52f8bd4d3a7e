//! The user iterator: a merging iterator over a captured `SuperVersion`, bounded to [lower,
//! upper), that reads separated values when it lands on them and reads ahead on long scans.
//!
//! A `DbIterator` is used by one thread at a time and may move between threads (`Send`). It pins
//! its `SuperVersion`, so the files it reads stay alive until it is dropped.

use super::{DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::iter::DbIter;
use crate::options::ReadOptions;
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
        if !self.valid() || !self.inner.value_is_blob() {
            return;
        }
        let timed = self.db.opts.blob_prefetch_depth > 0;
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
        self.ahead = None;
        self.nexts = 0;
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
        self.settle();
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
        self.settle();
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
