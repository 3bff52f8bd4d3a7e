//! Iterators. [`InternalIterator`] walks internal keys (every version); [`MergingIterator`] merges
//! sorted children; [`DbIter`] turns a merged stream into the user's view at one sequence number
//! (newest visible version per key, deletions hidden), forwards and backwards.
//!
//! Thread safety: an iterator belongs to one thread at a time (`Send`, not `Sync`).

use crate::error::{Error, Result};
use crate::key::{
    self, compare_internal, make_internal_key, ValueKind, EXPIRY_BYTES, KIND_FOR_SEEK,
};
use std::cmp::Ordering;

/// A cursor over internal keys in internal-key order.
pub trait InternalIterator: Send {
    fn valid(&self) -> bool;
    fn seek_to_first(&mut self);
    fn seek_to_last(&mut self);
    /// Positions at the first entry >= `target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    fn next(&mut self);
    fn prev(&mut self);
    /// The current internal key; only while `valid()`.
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    /// The first error met, if any (an iterator with an error is not valid).
    fn status(&self) -> Result<()>;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges sorted children into one sorted stream (duplicates across children are all yielded).
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
            direction: Direction::Forward,
        }
    }

    /// A child that stopped on an error stops the merge: yielding the other children's keys
    /// would silently skip the damaged range. Only a child that moved can have failed, so a step
    /// checks the one child it advanced and a seek or direction change checks them all.
    fn failed(c: &dyn InternalIterator) -> bool {
        !c.valid() && c.status().is_err()
    }

    fn find_smallest(&mut self) {
        if self.children.iter().any(|c| Self::failed(c.as_ref())) {
            self.current = None;
            return;
        }
        self.pick_smallest();
    }

    fn find_largest(&mut self) {
        if self.children.iter().any(|c| Self::failed(c.as_ref())) {
            self.current = None;
            return;
        }
        self.pick_largest();
    }

    /// After `cur` alone moved: stop if it failed, else pick with `pick`.
    fn after_step(&mut self, cur: usize, pick: fn(&mut Self)) {
        if Self::failed(self.children[cur].as_ref()) {
            self.current = None;
        } else {
            pick(self);
        }
    }

    fn pick_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() {
                best = match best {
                    Some(b)
                        if compare_internal(self.children[b].key(), c.key())
                            != Ordering::Greater =>
                    {
                        Some(b)
                    }
                    _ => Some(i),
                };
            }
        }
        self.current = best;
    }

    fn pick_largest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate().rev() {
            if c.valid() {
                best = match best {
                    Some(b)
                        if compare_internal(self.children[b].key(), c.key()) != Ordering::Less =>
                    {
                        Some(b)
                    }
                    _ => Some(i),
                };
            }
        }
        self.current = best;
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }
    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_largest();
    }
    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }
    fn next(&mut self) {
        let Some(cur) = self.current else { return };
        let switched = self.direction != Direction::Forward;
        if switched {
            // Move every other child to the first entry after key().
            let k = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&k);
                    if c.valid() && compare_internal(c.key(), &k) == Ordering::Equal {
                        c.next();
                    }
                }
            }
            self.direction = Direction::Forward;
        }
        self.children[cur].next();
        if switched {
            self.find_smallest();
        } else {
            self.after_step(cur, Self::pick_smallest);
        }
    }
    fn prev(&mut self) {
        let Some(cur) = self.current else { return };
        let switched = self.direction != Direction::Reverse;
        if switched {
            // Move every other child to the last entry before key().
            let k = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&k);
                    if c.valid() {
                        c.prev();
                    } else if c.status().is_ok() {
                        c.seek_to_last();
                    }
                }
            }
            self.direction = Direction::Reverse;
        }
        self.children[cur].prev();
        if switched {
            self.find_largest();
        } else {
            self.after_step(cur, Self::pick_largest);
        }
    }
    fn key(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].key(),
            None => &[],
        }
    }
    fn value(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].value(),
            None => &[],
        }
    }
    fn status(&self) -> Result<()> {
        for c in &self.children {
            c.status()?;
        }
        Ok(())
    }
}

/// The user-visible view of an internal stream at sequence `seq`.
pub struct DbIter {
    iter: Box<dyn InternalIterator>,
    seq: u64,
    now_ms: u64,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    saved_kind: ValueKind,
    error: Option<Error>,
    /// Whether a range deletion hides an entry (user key, sequence) at this iterator's
    /// sequence; None when no range deletion can apply.
    covered: Option<CoverFn>,
}

/// See [`DbIter::with_range_deletions`].
pub type CoverFn = Box<dyn Fn(&[u8], u64) -> bool + Send>;

impl DbIter {
    /// The user view of `iter` at sequence `seq`; entries expiring at or before `now_ms` (Unix
    /// milliseconds) read as deletions.
    pub fn new(iter: Box<dyn InternalIterator>, seq: u64, now_ms: u64) -> Self {
        DbIter {
            iter,
            seq,
            now_ms,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            saved_kind: ValueKind::Value,
            error: None,
            covered: None,
        }
    }

    /// Makes every entry for which `covered(user_key, sequence)` holds read as a deletion (a
    /// range deletion at or below the iterator's sequence hides it).
    pub fn with_range_deletions(mut self, covered: Option<CoverFn>) -> Self {
        self.covered = covered;
        self
    }

    /// The kind of the current entry once range deletions are applied.
    fn uncovered_kind(&self, seq: u64, kind: ValueKind) -> ValueKind {
        match &self.covered {
            Some(f) if f(key::user_key(self.iter.key()), seq) => ValueKind::Deletion,
            _ => kind,
        }
    }

    /// Whether the current value is a value-log pointer rather than the value itself.
    pub fn value_is_blob(&self) -> bool {
        let kind = match self.direction {
            Direction::Forward => key::kind(self.iter.key()),
            Direction::Reverse => Some(self.saved_kind),
        };
        kind.is_some_and(ValueKind::is_blob)
    }

    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key.
    pub fn key(&self) -> &[u8] {
        match self.direction {
            Direction::Forward => key::user_key(self.iter.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    pub fn value(&self) -> &[u8] {
        match self.direction {
            Direction::Forward => {
                let v = self.iter.value();
                // The expiry prefix was checked when the entry was chosen.
                match key::kind(self.iter.key()) {
                    Some(k) if k.expires() && v.len() >= EXPIRY_BYTES => &v[EXPIRY_BYTES..],
                    _ => v,
                }
            }
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The kind the current entry counts as: an expiring entry is a deletion once expired. An
    /// expiring entry too short for its expiry stops the iterator with a corruption error.
    fn effective_kind(&mut self, kind: ValueKind) -> Option<ValueKind> {
        if !kind.expires() {
            return Some(kind);
        }
        match key::split_expiry(kind, self.iter.value()) {
            Some((Some(at), _)) if at <= self.now_ms => Some(ValueKind::Deletion),
            Some(_) => Some(kind),
            None => {
                self.error = Some(Error::corruption(
                    "<iterator>",
                    0,
                    "expiring entry shorter than its expiry met during iteration",
                ));
                None
            }
        }
    }

    /// The first error met; an iterator stops (becomes invalid) at an error.
    pub fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        self.iter.status()
    }

    fn parse_current(&mut self) -> Option<(u64, ValueKind)> {
        match key::parse_internal_key(self.iter.key()) {
            Some(p) => Some((p.sequence, p.kind)),
            None => {
                self.error = Some(Error::corruption(
                    "<iterator>",
                    0,
                    "malformed internal key met during iteration",
                ));
                None
            }
        }
    }

    fn find_next_user_entry(&mut self, mut skipping: bool) {
        while self.iter.valid() {
            let Some((seq, kind)) = self.parse_current() else {
                break;
            };
            if seq <= self.seq {
                let Some(kind) = self.effective_kind(kind) else {
                    break;
                };
                let kind = self.uncovered_kind(seq, kind);
                let uk = key::user_key(self.iter.key());
                if kind == ValueKind::Deletion {
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(uk);
                    skipping = true;
                } else if !(skipping && uk <= &self.saved_key[..]) {
                    self.valid = true;
                    self.saved_key.clear();
                    return;
                }
            }
            self.iter.next();
        }
        self.saved_key.clear();
        self.valid = false;
    }

    fn find_prev_user_entry(&mut self) {
        let mut value_kind = ValueKind::Deletion;
        while self.iter.valid() {
            let Some((seq, kind)) = self.parse_current() else {
                break;
            };
            if seq <= self.seq {
                let uk = key::user_key(self.iter.key());
                if value_kind != ValueKind::Deletion && uk < &self.saved_key[..] {
                    break; // a live value of a later key is already saved
                }
                let Some(kind) = self.effective_kind(kind) else {
                    break;
                };
                let kind = self.uncovered_kind(seq, kind);
                value_kind = kind;
                self.saved_kind = kind;
                let uk = key::user_key(self.iter.key());
                if kind == ValueKind::Deletion {
                    self.saved_key.clear();
                    self.saved_value.clear();
                } else {
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(uk);
                    self.saved_value.clear();
                    let v = self.iter.value();
                    let v = if kind.expires() {
                        &v[EXPIRY_BYTES..]
                    } else {
                        v
                    };
                    self.saved_value.extend_from_slice(v);
                }
            }
            self.iter.prev();
        }
        if value_kind == ValueKind::Deletion || self.error.is_some() {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
        }
    }

    pub fn seek_to_first(&mut self) {
        self.direction = Direction::Forward;
        self.saved_value.clear();
        self.iter.seek_to_first();
        self.find_next_user_entry(false);
    }

    pub fn seek_to_last(&mut self) {
        self.direction = Direction::Reverse;
        self.saved_value.clear();
        self.iter.seek_to_last();
        self.find_prev_user_entry();
    }

    /// Positions at the first key >= `target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.direction = Direction::Forward;
        self.saved_value.clear();
        self.saved_key.clear();
        let ikey = make_internal_key(target, self.seq, KIND_FOR_SEEK);
        self.iter.seek(&ikey);
        self.find_next_user_entry(false);
    }

    /// Positions at the last key <= `target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.valid {
            if self.key() != target {
                self.prev();
            }
        } else if self.status().is_ok() {
            self.seek_to_last();
        }
    }

    pub fn next(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // iter is just before the entries of key(); step into them, then skip them.
            if !self.iter.valid() {
                self.iter.seek_to_first();
            } else {
                self.iter.next();
            }
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                return;
            }
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.iter.key()));
            self.iter.next();
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                return;
            }
        }
        self.find_next_user_entry(true);
    }

    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            // iter is at the current entry; move before all entries of this user key.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(key::user_key(self.iter.key()));
            loop {
                self.iter.prev();
                if !self.iter.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.saved_value.clear();
                    return;
                }
                if key::user_key(self.iter.key()) < &self.saved_key[..] {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }
}
