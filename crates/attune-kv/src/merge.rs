//! Merge operators: read-modify-write without the read. `DB::merge(key, operand)` stores an
//! operand (entry kind `Merge`); a read of the key collects the operands down to the key's base
//! (a value, a deletion or nothing) and applies the database's operator, and compaction folds
//! the operands into one value once their base is in the same compaction (see docs/kv.md,
//! "Merge operator").
//!
//! Built-ins, named as the `merge_operator` option takes them:
//!
//! - `add`: operands and base are 8-byte little-endian unsigned integers (u64), summed with
//!   wrapping arithmetic (so a two's-complement i64 operand subtracts); a missing base is 0. An
//!   operand of another length is refused by `merge()`; a base of another length (a `put` of
//!   something else) makes the read fail with an error naming the key.
//! - `append` or `append:<delimiter>`: concatenation, oldest first, with the delimiter between
//!   pieces; a missing base is no piece at all.
//! - `max`: the bytewise largest of the base and the operands; a missing base is no candidate.
//!
//! Operators are called from any reading thread and from compaction: they must be pure
//! functions of their arguments (`Send + Sync`, no callbacks into the database).

use crate::error::{Error, Result};
use std::sync::Arc;

/// Bytes of an `add` operand or base.
pub const ADD_OPERAND_BYTES: usize = 8;

/// A user-defined merge operator, as RocksDB's `MergeOperator`.
pub trait MergeOperator: Send + Sync {
    /// The name recorded in the database: a reopen must give the same operator (the built-ins
    /// are found again by name when no operator is given).
    fn name(&self) -> &str;

    /// The value of `key` given its base (None: absent or deleted) and its operands, oldest
    /// first (never empty). An error fails the read or compaction that asked.
    fn full_merge(&self, key: &[u8], base: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>>;

    /// Folds adjacent operands (oldest first, at least two) into one operand, or None when
    /// they cannot be combined without the base. Compaction uses it where the base is out of
    /// reach. The default combines nothing.
    fn partial_merge(&self, _key: &[u8], _operands: &[&[u8]]) -> Option<Vec<u8>> {
        None
    }

    /// Checks one operand when it is written (`merge()` refuses it with this error).
    fn check_operand(&self, _operand: &[u8]) -> Result<()> {
        Ok(())
    }
}

impl std::fmt::Debug for dyn MergeOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MergeOperator({})", self.name())
    }
}

/// The built-in operator named `name` (`add`, `append`, `append:<delimiter>`, `max`).
pub fn builtin(name: &str) -> Result<Arc<dyn MergeOperator>> {
    match name {
        "add" => Ok(Arc::new(AddOperator)),
        "max" => Ok(Arc::new(MaxOperator)),
        "append" => Ok(Arc::new(AppendOperator::new(""))),
        _ => match name.strip_prefix("append:") {
            Some(d) => Ok(Arc::new(AppendOperator::new(d))),
            None => Err(Error::InvalidArgument(format!(
                "option merge_operator: unknown operator {name:?}; built in: add, append, \
                 append:<delimiter>, max"
            ))),
        },
    }
}

/// `add`: wrapping sum of 8-byte little-endian integers.
#[derive(Debug, Clone, Copy)]
pub struct AddOperator;

fn add_word(key: &[u8], what: &str, b: &[u8]) -> Result<u64> {
    let a: [u8; ADD_OPERAND_BYTES] = b.try_into().map_err(|_| {
        Error::InvalidArgument(format!(
            "merge_operator add: {what} of key {} is {} bytes, not an 8-byte little-endian \
             integer",
            crate::util::show_key(key),
            b.len()
        ))
    })?;
    Ok(u64::from_le_bytes(a))
}

impl MergeOperator for AddOperator {
    fn name(&self) -> &str {
        "add"
    }
    fn full_merge(&self, key: &[u8], base: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>> {
        let mut sum = match base {
            Some(b) => add_word(key, "the base value", b)?,
            None => 0,
        };
        for op in operands {
            sum = sum.wrapping_add(add_word(key, "an operand", op)?);
        }
        Ok(sum.to_le_bytes().to_vec())
    }
    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        self.full_merge(key, None, operands).ok()
    }
    fn check_operand(&self, operand: &[u8]) -> Result<()> {
        if operand.len() != ADD_OPERAND_BYTES {
            return Err(Error::InvalidArgument(format!(
                "operand: merge_operator add takes 8-byte little-endian integers, got {} bytes",
                operand.len()
            )));
        }
        Ok(())
    }
}

/// `append`: the pieces joined by a delimiter, oldest first.
#[derive(Debug, Clone)]
pub struct AppendOperator {
    delimiter: Vec<u8>,
    name: String,
}

impl AppendOperator {
    pub fn new(delimiter: &str) -> Self {
        AppendOperator {
            delimiter: delimiter.as_bytes().to_vec(),
            name: if delimiter.is_empty() {
                "append".into()
            } else {
                format!("append:{delimiter}")
            },
        }
    }

    fn join<'a>(&self, pieces: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, p) in pieces.enumerate() {
            if i > 0 {
                out.extend_from_slice(&self.delimiter);
            }
            out.extend_from_slice(p);
        }
        out
    }
}

impl MergeOperator for AppendOperator {
    fn name(&self) -> &str {
        &self.name
    }
    fn full_merge(&self, _key: &[u8], base: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>> {
        Ok(self.join(base.into_iter().chain(operands.iter().copied())))
    }
    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(self.join(operands.iter().copied()))
    }
}

/// `max`: the bytewise largest piece.
#[derive(Debug, Clone, Copy)]
pub struct MaxOperator;

impl MergeOperator for MaxOperator {
    fn name(&self) -> &str {
        "max"
    }
    fn full_merge(&self, _key: &[u8], base: Option<&[u8]>, operands: &[&[u8]]) -> Result<Vec<u8>> {
        let m = base.into_iter().chain(operands.iter().copied()).max();
        Ok(m.unwrap_or_default().to_vec())
    }
    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        operands.iter().max().map(|m| m.to_vec())
    }
}

/// The error for merge entries met with no operator configured.
pub(crate) fn no_operator(key: &[u8]) -> Error {
    Error::InvalidArgument(format!(
        "key {} holds merge operands but the database has no merge_operator; open it with the \
         operator that wrote them",
        crate::util::show_key(key)
    ))
}

/// Applies `op` to operands collected newest first (as a read meets them).
pub(crate) fn apply_newest_first(
    op: &dyn MergeOperator,
    key: &[u8],
    base: Option<&[u8]>,
    newest_first: &[Vec<u8>],
) -> Result<Vec<u8>> {
    let ops: Vec<&[u8]> = newest_first.iter().rev().map(Vec::as_slice).collect();
    op.full_merge(key, base, &ops)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn le(x: u64) -> Vec<u8> {
        x.to_le_bytes().to_vec()
    }

    #[test]
    fn add_sums_with_wrapping_and_refuses_short_operands() {
        let op = builtin("add").unwrap();
        let r = op
            .full_merge(b"k", Some(&le(5)), &[&le(2), &le(u64::MAX)])
            .unwrap();
        assert_eq!(r, le(6));
        assert_eq!(op.full_merge(b"k", None, &[&le(3)]).unwrap(), le(3));
        assert!(op.check_operand(b"1234567").is_err());
        let e = op.full_merge(b"k", Some(b"xy"), &[&le(1)]).unwrap_err();
        assert!(e.to_string().contains("base value"), "{e}");
    }

    #[test]
    fn append_joins_oldest_first_with_its_delimiter() {
        let op = builtin("append:,").unwrap();
        assert_eq!(op.name(), "append:,");
        assert_eq!(
            op.full_merge(b"k", Some(b"a"), &[b"b", b"c"]).unwrap(),
            b"a,b,c"
        );
        assert_eq!(op.full_merge(b"k", None, &[b"b"]).unwrap(), b"b");
        assert_eq!(op.partial_merge(b"k", &[b"b", b"c"]).unwrap(), b"b,c");
        let plain = builtin("append").unwrap();
        assert_eq!(plain.full_merge(b"k", Some(b"a"), &[b"b"]).unwrap(), b"ab");
    }

    #[test]
    fn max_takes_the_bytewise_largest() {
        let op = builtin("max").unwrap();
        assert_eq!(
            op.full_merge(b"k", Some(b"m"), &[b"a", b"z"]).unwrap(),
            b"z"
        );
        assert_eq!(op.full_merge(b"k", None, &[b"b", b"a"]).unwrap(), b"b");
    }

    #[test]
    fn unknown_names_are_refused_naming_the_option() {
        let e = builtin("sum").err().unwrap();
        assert!(e.to_string().contains("merge_operator"), "{e}");
    }
}
