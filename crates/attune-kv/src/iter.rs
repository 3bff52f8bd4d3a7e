//! Iterators. [`InternalIterator`] walks internal keys (every version); [`MergingIterator`] merges
//! sorted children; [`DbIter`] turns a merged stream into the user's view at one sequence number
//! (newest visible version per key, deletions hidden), forwards and backwards.
//!
//! Thread safety: an iterator belongs to one thread at a time (`Send`, not `Sync`).

use crate::error::{Error, Result};
use crate::key::{
    self, compare_internal, make_internal_key, ValueKind, EXPIRY_BYTES, KIND_FOR_SEEK,
};
use crate::merge::MergeOperator;
use std::cmp::Ordering;
use std::sync::Arc;

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
    /// The operator that combines merge operands; None: a merge entry stops the iterator
    /// with an error.
    merge: Option<Arc<dyn MergeOperator>>,
    /// Reads a separated base value (user key, encoded pointer) for a merge.
    resolve: Option<BlobResolver>,
    /// Forward: the current entry is a merge result, held in `saved_key` and `saved_value`;
    /// `iter` is already past the operands (at the key's base, or beyond the key).
    merged: bool,
}

/// See [`DbIter::with_range_deletions`].
pub type CoverFn = Box<dyn Fn(&[u8], u64) -> bool + Send>;

/// See [`DbIter::with_merge`].
pub type BlobResolver = Box<dyn Fn(&[u8], &[u8]) -> Result<Vec<u8>> + Send>;

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
            merge: None,
            resolve: None,
            merged: false,
        }
    }

    /// Combines merge operands with `op`, reading separated base values with `resolve`.
    pub fn with_merge(
        mut self,
        op: Option<Arc<dyn MergeOperator>>,
        resolve: Option<BlobResolver>,
    ) -> Self {
        self.merge = op;
        self.resolve = resolve;
        self
    }

    /// The value of `key` from its operands (oldest first) over `base` (kind and stored
    /// payload, expiry stripped; None: absent or deleted).
    fn combine(
        &self,
        key: &[u8],
        base: Option<(ValueKind, &[u8])>,
        oldest_first: &[Vec<u8>],
    ) -> Result<Vec<u8>> {
        let op = self
            .merge
            .as_ref()
            .ok_or_else(|| crate::merge::no_operator(key))?;
        let resolved;
        let base = match base {
            Some((k, payload)) if k.is_blob() => {
                let r = self.resolve.as_ref().ok_or_else(|| {
                    Error::corruption("<iterator>", 0, "separated merge base with no value log")
                })?;
                resolved = r(key, payload)?;
                Some(&resolved[..])
            }
            Some((_, v)) => Some(v),
            None => None,
        };
        let ops: Vec<&[u8]> = oldest_first.iter().map(Vec::as_slice).collect();
        op.full_merge(key, base, &ops)
    }

    /// Forward: `iter` is at the newest visible entry of a key, a merge operand. Collects the
    /// operands below it down to the key's base and leaves the result current (`merged`).
    fn merge_forward(&mut self) {
        let key = key::user_key(self.iter.key()).to_vec();
        let mut ops = vec![self.iter.value().to_vec()];
        let mut base: Option<(ValueKind, Vec<u8>)> = None;
        self.iter.next();
        while self.iter.valid() {
            let Some((seq, kind)) = self.parse_current() else {
                self.valid = false;
                return;
            };
            if key::user_key(self.iter.key()) != key.as_slice() {
                break;
            }
            if seq > self.seq {
                self.iter.next();
                continue;
            }
            let Some(kind) = self.effective_kind(kind) else {
                self.valid = false;
                return;
            };
            match self.uncovered_kind(seq, kind) {
                ValueKind::Merge => {
                    ops.push(self.iter.value().to_vec());
                    self.iter.next();
                }
                ValueKind::Deletion => break,
                k => {
                    let v = self.iter.value();
                    let payload = if k.expires() { &v[EXPIRY_BYTES..] } else { v };
                    base = Some((k, payload.to_vec()));
                    break;
                }
            }
        }
        ops.reverse();
        let base_ref = base.as_ref().map(|(k, v)| (*k, v.as_slice()));
        match self.combine(&key, base_ref, &ops) {
            Ok(v) => {
                self.saved_key = key;
                self.saved_value = v;
                self.merged = true;
                self.valid = true;
            }
            Err(e) => {
                self.error = Some(e);
                self.valid = false;
                self.saved_key.clear();
            }
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
        if self.merged {
            return false;
        }
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
            Direction::Forward if self.merged => &self.saved_key,
            Direction::Forward => key::user_key(self.iter.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    pub fn value(&self) -> &[u8] {
        match self.direction {
            Direction::Forward if self.merged => &self.saved_value,
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
                    if kind == ValueKind::Merge {
                        self.merge_forward();
                        return;
                    }
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
        // Merge operands of the current key met so far (oldest first), over `base`.
        let mut ops: Vec<Vec<u8>> = Vec::new();
        let mut base: Option<(ValueKind, Vec<u8>)> = None;
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
                let older = value_kind;
                value_kind = kind;
                self.saved_kind = kind;
                let uk = key::user_key(self.iter.key());
                if kind == ValueKind::Merge {
                    if older != ValueKind::Merge {
                        // The entry below the first operand is the base (a deletion or
                        // nothing: none).
                        base = (older != ValueKind::Deletion)
                            .then(|| (older, std::mem::take(&mut self.saved_value)));
                        ops.clear();
                    }
                    ops.push(self.iter.value().to_vec());
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(uk);
                } else if kind == ValueKind::Deletion {
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
        if value_kind == ValueKind::Merge && self.error.is_none() {
            let base_ref = base.as_ref().map(|(k, v)| (*k, v.as_slice()));
            match self.combine(&self.saved_key, base_ref, &ops) {
                Ok(v) => {
                    self.saved_value = v;
                    self.saved_kind = ValueKind::Value;
                }
                Err(e) => self.error = Some(e),
            }
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
        self.merged = false;
        self.saved_value.clear();
        self.iter.seek_to_first();
        self.find_next_user_entry(false);
    }

    pub fn seek_to_last(&mut self) {
        self.direction = Direction::Reverse;
        self.merged = false;
        self.saved_value.clear();
        self.iter.seek_to_last();
        self.find_prev_user_entry();
    }

    /// Positions at the first key >= `target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.direction = Direction::Forward;
        self.merged = false;
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
        if self.merged {
            // saved_key holds the key; iter already stands past its operands.
            self.merged = false;
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                return;
            }
        } else if self.direction == Direction::Reverse {
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
        if self.merged {
            // iter stands past the operands of saved_key (or at the end): move before every
            // entry of that key.
            self.merged = false;
            if !self.iter.valid() && self.iter.status().is_ok() {
                self.iter.seek_to_last();
            }
            while self.iter.valid() && key::user_key(self.iter.key()) >= &self.saved_key[..] {
                self.iter.prev();
            }
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                self.saved_value.clear();
                return;
            }
            self.direction = Direction::Reverse;
        } else if self.direction == Direction::Forward {
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
