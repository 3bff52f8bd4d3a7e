//! Optimistic transactions and conditional writes.
//!
//! A [`Transaction`] reads from a snapshot taken when it begins (plus its own writes) and buffers
//! its writes. `commit` hands the buffered writes to the write path as one batch with a
//! precondition: none of the keys it wrote (or read with `get_for_update`) has a write newer
//! than its snapshot. The group-commit leader checks the precondition while no other write is
//! in flight (the conditional write leads a group of its own), so the check and the write are
//! atomic with respect to every other writer; a failed check writes nothing and returns
//! [`Error::Conflict`]. This is snapshot isolation as RocksDB's optimistic transactions give it:
//! write-write conflicts are caught; a key only read with `get` is not checked (use
//! `get_for_update` for a key whose value the writes depend on).
//!
//! The check finds a key's newest sequence by a seek over every memtable and table of the
//! current view. The transaction holds its snapshot until it ends, so compaction keeps every
//! entry newer than it (a deletion included). Value-log garbage collection rewrites the pointers
//! of the records it moves at new sequences: a transaction whose key was moved meanwhile sees a
//! conflict it could have been spared (rare, and safe).
//!
//! [`DB::write_if`] is the other conditional write: a batch applied only if each listed key
//! holds the expected value (or is absent), checked the same way.

use super::{DbInner, Snapshot, SuperVersion, DB};
use crate::batch::{check_key, check_value, WriteBatch};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, make_internal_key, KIND_FOR_SEEK, MAX_SEQUENCE};
use crate::memtable::Lookup;
use crate::options::{ReadOptions, WriteOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What a conditional write requires of the database when its turn to write comes.
pub(super) enum Precondition {
    /// No key in `keys` has a write with a sequence above `seq`.
    UnchangedSince { seq: u64, keys: Vec<Vec<u8>> },
    /// Each key holds the given value (`None`: it is absent or deleted).
    Values(Vec<(Vec<u8>, Option<Vec<u8>>)>),
}

/// A key for an error message: UTF-8 text as it is, anything else in hex (first 64 bytes).
fn show_key(k: &[u8]) -> String {
    let k = &k[..k.len().min(64)];
    match std::str::from_utf8(k) {
        Ok(s) if !s.chars().any(char::is_control) => format!("{s:?}"),
        _ => {
            let hex: String = k.iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
        }
    }
}

impl DbInner {
    /// Checks `c` against the current view. Called by the group-commit leader, so nothing
    /// writes between this check and the write that follows it.
    pub(super) fn check_precondition(&self, sv: &SuperVersion, c: &Precondition) -> Result<()> {
        match c {
            Precondition::UnchangedSince { seq, keys } => {
                for k in keys {
                    if let Some(newest) = self.newest_sequence(sv, k)? {
                        if newest > *seq {
                            return Err(Error::Conflict(format!(
                                "key {} was written (sequence {newest}) after this \
                                 transaction's snapshot (sequence {seq})",
                                show_key(k)
                            )));
                        }
                    }
                }
            }
            Precondition::Values(expected) => {
                for (k, want) in expected {
                    let have = match self.lookup(sv, k, MAX_SEQUENCE)? {
                        Lookup::Found(v) => Some(v),
                        Lookup::Blob(p) => Some(self.read_blob(&sv.blobs, k, &p)?),
                        Lookup::Merge(_) => Some(self.read_merged(sv, k, MAX_SEQUENCE)?),
                        // `lookup` answers expiring entries as values or deletions.
                        _ => None,
                    };
                    if have != *want {
                        return Err(Error::Conflict(format!(
                            "key {} {} but the write expected it {}",
                            show_key(k),
                            if have.is_some() {
                                "holds another value"
                            } else {
                                "is absent"
                            },
                            if want.is_some() {
                                "to hold a given value"
                            } else {
                                "to be absent"
                            }
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The sequence of the newest entry of `key` (a put or a deletion) in `sv`, if it has one.
    fn newest_sequence(&self, sv: &SuperVersion, key: &[u8]) -> Result<Option<u64>> {
        let (mut it, error) = self.merged_iter(sv, false);
        if let Some(e) = error {
            return Err(e);
        }
        it.seek(&make_internal_key(key, MAX_SEQUENCE, KIND_FOR_SEEK));
        it.status()?;
        Ok((it.valid() && key::user_key(it.key()) == key).then(|| key::sequence(it.key())))
    }
}

/// An optimistic transaction: reads at a snapshot (and its own writes), buffered writes, and a
/// commit that fails with [`Error::Conflict`] if another write reached one of its keys first.
/// Dropping it without `commit` discards its writes.
pub struct Transaction {
    db: Arc<DbInner>,
    snapshot: Snapshot,
    /// Keys read with `get_for_update`: checked at commit like the written ones.
    locked: BTreeSet<Vec<u8>>,
    /// Buffered writes in key order.
    writes: BTreeMap<Vec<u8>, TxnWrite>,
}

/// A transaction's buffered write of one key.
enum TxnWrite {
    Put(Vec<u8>),
    Delete,
    /// Merge operands (oldest first) over the key's value at the snapshot (`base: None`) or
    /// over this transaction's own earlier put (`Some(Some(v))`) or delete (`Some(None)`).
    Merge {
        base: Option<Option<Vec<u8>>>,
        operands: Vec<Vec<u8>>,
    },
}

impl Transaction {
    /// The sequence of the snapshot this transaction reads.
    pub fn snapshot_sequence(&self) -> u64 {
        self.snapshot.sequence()
    }

    /// The value of `key` as this transaction sees it: its own write if it made one, else the
    /// database at its snapshot. Not checked at commit (see `get_for_update`).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (base, operands) = match self.writes.get(key) {
            Some(TxnWrite::Put(v)) => return Ok(Some(v.clone())),
            Some(TxnWrite::Delete) => return Ok(None),
            Some(TxnWrite::Merge { base, operands }) => (base.clone(), &operands[..]),
            None => (None, &[][..]),
        };
        let base = match base {
            Some(b) => b,
            None => {
                self.db.usable()?;
                self.db.get(
                    key,
                    &ReadOptions {
                        snapshot: Some(self.snapshot.sequence()),
                        ..ReadOptions::default()
                    },
                )?
            }
        };
        if operands.is_empty() {
            return Ok(base);
        }
        let op = self.merge_operator(key)?;
        let ops: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
        op.full_merge(key, base.as_deref(), &ops).map(Some)
    }

    fn merge_operator(&self, key: &[u8]) -> Result<&Arc<dyn crate::merge::MergeOperator>> {
        self.db
            .opts
            .merge_operator
            .as_ref()
            .ok_or_else(|| crate::merge::no_operator(key))
    }

    /// Buffers a merge operand; later reads in this transaction see it applied. At commit it
    /// is written as a merge (checked for conflicts like a put).
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(operand)?;
        match &self.db.opts.merge_operator {
            Some(op) => op.check_operand(operand)?,
            None => {
                return Err(Error::InvalidArgument(
                    "merge: this database has no merge_operator".into(),
                ))
            }
        }
        let w = match self.writes.remove(key) {
            None => TxnWrite::Merge {
                base: None,
                operands: vec![operand.to_vec()],
            },
            Some(TxnWrite::Put(v)) => TxnWrite::Merge {
                base: Some(Some(v)),
                operands: vec![operand.to_vec()],
            },
            Some(TxnWrite::Delete) => TxnWrite::Merge {
                base: Some(None),
                operands: vec![operand.to_vec()],
            },
            Some(TxnWrite::Merge { base, mut operands }) => {
                operands.push(operand.to_vec());
                TxnWrite::Merge { base, operands }
            }
        };
        self.writes.insert(key.to_vec(), w);
        Ok(())
    }

    /// Like `get`, and the commit fails if another write reaches `key` after the snapshot.
    pub fn get_for_update(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        let v = self.get(key)?;
        self.locked.insert(key.to_vec());
        Ok(v)
    }

    /// Buffers a put; later reads in this transaction see it.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(value)?;
        self.writes
            .insert(key.to_vec(), TxnWrite::Put(value.to_vec()));
        Ok(())
    }

    /// Buffers a delete.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        check_key(key)?;
        self.writes.insert(key.to_vec(), TxnWrite::Delete);
        Ok(())
    }

    /// Number of buffered writes.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Writes the buffered changes atomically, or returns [`Error::Conflict`] and writes
    /// nothing if a key written or read for update has changed since the snapshot.
    pub fn commit(self, wo: WriteOptions) -> Result<()> {
        self.db.writable("a transaction commit")?;
        let mut batch = WriteBatch::new();
        for (k, w) in &self.writes {
            match w {
                TxnWrite::Put(v) => batch.put(k, v)?,
                TxnWrite::Delete => batch.delete(k)?,
                TxnWrite::Merge { base, operands } => {
                    match base {
                        Some(Some(v)) => batch.put(k, v)?,
                        Some(None) => batch.delete(k)?,
                        None => {}
                    }
                    for o in operands {
                        batch.merge(k, o)?;
                    }
                }
            }
        }
        let mut keys: BTreeSet<Vec<u8>> = self.locked;
        keys.extend(self.writes.into_keys());
        if keys.is_empty() {
            return Ok(());
        }
        let check = Precondition::UnchangedSince {
            seq: self.snapshot.sequence(),
            keys: keys.into_iter().collect(),
        };
        // The snapshot lives until the write is done: compaction keeps what the check reads.
        let r = self.db.write_inner(batch, wo.sync, None, Some(check));
        drop(self.snapshot);
        r
    }

    /// Discards the buffered writes (the same as dropping the transaction).
    pub fn rollback(self) {}
}

impl DB {
    /// Begins an optimistic transaction at a snapshot of the current state.
    pub fn transaction(&self) -> Result<Transaction> {
        self.inner.writable("a transaction")?;
        Ok(Transaction {
            db: self.inner.clone(),
            snapshot: self.snapshot()?,
            locked: BTreeSet::new(),
            writes: BTreeMap::new(),
        })
    }

    /// Applies `batch` atomically if each key in `expected` holds the given value (`None`:
    /// absent) when the batch's turn to write comes; otherwise writes nothing and returns
    /// [`Error::Conflict`]. With one key this is compare-and-set.
    pub fn write_if(
        &self,
        batch: WriteBatch,
        expected: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        wo: WriteOptions,
    ) -> Result<()> {
        self.inner.writable("a conditional write")?;
        for (k, v) in &expected {
            check_key(k)?;
            if let Some(v) = v {
                check_value(v)?;
            }
        }
        let check = (!expected.is_empty()).then_some(Precondition::Values(expected));
        self.inner.write_inner(batch, wo.sync, None, check)
    }
}
