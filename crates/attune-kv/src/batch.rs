//! `WriteBatch`: an ordered group of puts and deletes applied atomically. Its encoding is also the
//! payload of a WAL record (see docs/formats/wal.md):
//!
//! ```text
//! sequence: fixed64 | count: fixed32 | count × ( kind: u8 | key: varint len + bytes
//!                                                 | value: varint len + bytes (not for Deletion) )
//! ```
//!
//! The value of an expiring kind starts with its expiry (fixed64, Unix milliseconds); a range
//! deletion (kind 5) stores its begin key as the key and its end key as the value; a merge
//! operand (kind 6) is stored like a value.

use crate::error::{Error, Result};
use crate::key::{ValueKind, EXPIRY_BYTES};
use crate::util::coding::{put_fixed32, put_fixed64, put_length_prefixed, put_varint64, Reader};
use std::path::Path;

/// Bytes of the batch header (sequence + count).
pub const HEADER_BYTES: usize = 12;
/// Largest key accepted (64 KiB).
pub const MAX_KEY_BYTES: usize = 64 << 10;
/// Largest value accepted (4 GiB - 1).
pub const MAX_VALUE_BYTES: u64 = u32::MAX as u64;

/// One entry of a batch: its kind, key and value (for a range deletion, begin and end).
pub type BatchEntry<'a> = (ValueKind, &'a [u8], &'a [u8]);

/// An atomic group of updates.
#[derive(Clone, Debug)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidArgument(format!(
            "key of {} bytes exceeds the limit of {MAX_KEY_BYTES} bytes",
            key.len()
        )));
    }
    Ok(())
}

/// Checks the bounds of a range deletion: both keys within the key limit, `begin <= end`.
pub(crate) fn check_range(begin: &[u8], end: &[u8]) -> Result<()> {
    for (name, k) in [("begin", begin), ("end", end)] {
        if k.len() > MAX_KEY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "delete_range: {name} key of {} bytes exceeds the limit of {MAX_KEY_BYTES} bytes",
                k.len()
            )));
        }
    }
    if begin > end {
        return Err(Error::InvalidArgument(format!(
            "delete_range: begin {:?} sorts after end {:?}",
            String::from_utf8_lossy(begin),
            String::from_utf8_lossy(end)
        )));
    }
    Ok(())
}

pub(crate) fn check_value(value: &[u8]) -> Result<()> {
    if value.len() as u64 > MAX_VALUE_BYTES {
        return Err(Error::InvalidArgument(format!(
            "value of {} bytes exceeds the limit of {MAX_VALUE_BYTES} bytes",
            value.len()
        )));
    }
    Ok(())
}

impl WriteBatch {
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; HEADER_BYTES],
            count: 0,
        }
    }

    /// Adds a put. Fails for a key over 64 KiB or a value of 4 GiB or more.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(value)?;
        self.rep.push(ValueKind::Value as u8);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, value);
        self.count += 1;
        Ok(())
    }

    /// Adds a put that reads as absent from `expires_at_ms` (Unix time in milliseconds) on.
    /// Fails for a key over 64 KiB or a value of 4 GiB - 8 bytes or more.
    pub fn put_with_expiry(&mut self, key: &[u8], value: &[u8], expires_at_ms: u64) -> Result<()> {
        check_key(key)?;
        check_value(value)?;
        if value.len() as u64 > MAX_VALUE_BYTES - EXPIRY_BYTES as u64 {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes with an expiry exceeds the limit of {} bytes",
                value.len(),
                MAX_VALUE_BYTES - EXPIRY_BYTES as u64
            )));
        }
        self.push_expiring(ValueKind::ExpiringValue, key, value, expires_at_ms);
        Ok(())
    }

    /// One record of an expiring kind: the key, then the stored value (the expiry in Unix
    /// milliseconds, little-endian, before `payload`: a value or a value-log pointer).
    fn push_expiring(&mut self, kind: ValueKind, key: &[u8], payload: &[u8], expires_at_ms: u64) {
        self.rep.push(kind as u8);
        put_length_prefixed(&mut self.rep, key);
        put_varint64(&mut self.rep, (EXPIRY_BYTES + payload.len()) as u64);
        self.rep.extend_from_slice(&expires_at_ms.to_le_bytes());
        self.rep.extend_from_slice(payload);
        self.count += 1;
    }

    /// Adds a merge operand for `key`, combined with the key's older versions by the
    /// database's merge operator when read (`DB::write` checks the operand against it). Fails
    /// for a key over 64 KiB or an operand of 4 GiB or more.
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(operand)?;
        self.rep.push(ValueKind::Merge as u8);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, operand);
        self.count += 1;
        Ok(())
    }

    /// True when the batch holds a merge operand.
    pub(crate) fn has_merges(&self) -> bool {
        self.iter()
            .any(|i| matches!(i, Some((ValueKind::Merge, _, _))))
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        check_key(key)?;
        self.rep.push(ValueKind::Deletion as u8);
        put_length_prefixed(&mut self.rep, key);
        self.count += 1;
        Ok(())
    }

    /// Adds a range deletion: every key in `[begin, end)` written before it is deleted. An
    /// empty range (`begin == end`) adds nothing; `begin > end` is an invalid argument.
    pub fn delete_range(&mut self, begin: &[u8], end: &[u8]) -> Result<()> {
        crate::batch::check_range(begin, end)?;
        if begin == end {
            return Ok(());
        }
        self.rep.push(ValueKind::RangeDeletion as u8);
        put_length_prefixed(&mut self.rep, begin);
        put_length_prefixed(&mut self.rep, end);
        self.count += 1;
        Ok(())
    }

    /// Adds a put whose value was written to the value log; `pointer` is an encoded
    /// [`crate::vlog::BlobPointer`]. Internal: users write values with [`WriteBatch::put`].
    pub(crate) fn put_blob_index(&mut self, key: &[u8], pointer: &[u8]) {
        self.rep.push(ValueKind::BlobIndex as u8);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, pointer);
        self.count += 1;
    }

    /// [`WriteBatch::put_blob_index`] for a value with an expiry.
    pub(crate) fn put_blob_index_expiring(
        &mut self,
        key: &[u8],
        pointer: &[u8],
        expires_at_ms: u64,
    ) {
        self.push_expiring(ValueKind::ExpiringBlobIndex, key, pointer, expires_at_ms);
    }

    pub fn clear(&mut self) {
        self.rep.truncate(HEADER_BYTES);
        self.rep[..HEADER_BYTES].fill(0);
        self.count = 0;
    }

    /// Number of updates.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size in bytes.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    pub(crate) fn set_sequence(&mut self, seq: u64) {
        let mut h = Vec::with_capacity(HEADER_BYTES);
        put_fixed64(&mut h, seq);
        put_fixed32(&mut h, self.count);
        self.rep[..HEADER_BYTES].copy_from_slice(&h);
    }

    /// Appends the updates of `other` (used by group commit).
    pub(crate) fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[HEADER_BYTES..]);
        self.count += other.count;
    }

    pub(crate) fn encoded(&self) -> &[u8] {
        &self.rep
    }

    /// Decodes a batch from a WAL record; returns (first sequence, batch). Public for the fuzz
    /// targets and property tests of the WAL format.
    pub fn decode(data: &[u8]) -> Option<(u64, WriteBatch)> {
        let mut r = Reader::new(data);
        let seq = r.fixed64()?;
        let count = r.fixed32()?;
        let batch = WriteBatch {
            rep: data.to_vec(),
            count,
        };
        // Validate the whole body so that iteration cannot fail later.
        let mut n = 0u32;
        for item in batch.iter() {
            item?;
            n += 1;
        }
        if n != count {
            return None;
        }
        Some((seq, batch))
    }

    /// Iterates over (kind, key, value) in insertion order; `None` marks malformed data.
    /// Decodes a write-ahead-log record found at `off` of `path` into its first sequence and
    /// its batch; a malformed one is corruption naming both.
    pub fn decode_logged(rec: &[u8], path: &Path, off: u64) -> Result<(u64, WriteBatch)> {
        WriteBatch::decode(rec)
            .ok_or_else(|| Error::corruption(path, off, "malformed write batch in WAL"))
    }

    /// Every entry of a batch logged at `off` of `path`, each checked whole.
    pub fn entries_checked(&self, path: &Path, off: u64) -> Result<Vec<BatchEntry<'_>>> {
        self.iter()
            .map(|item| item.ok_or_else(|| Error::corruption(path, off, "malformed batch entry")))
            .collect()
    }

    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            r: Reader::new(&self.rep[HEADER_BYTES..]),
        }
    }
}

/// Iterator over the updates of a batch (see [`WriteBatch::iter`]).
pub struct BatchIter<'a> {
    r: Reader<'a>,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Option<(ValueKind, &'a [u8], &'a [u8])>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.r.is_empty() {
            return None;
        }
        let item = (|| {
            let kind = ValueKind::from_u8(self.r.u8()?)?;
            let key = self.r.length_prefixed()?;
            let value = match kind {
                ValueKind::Deletion => &[][..],
                k => {
                    let v = self.r.length_prefixed()?;
                    // An expiring entry carries its expiry: a shorter one is malformed.
                    if k.expires() && v.len() < EXPIRY_BYTES {
                        return None;
                    }
                    v
                }
            };
            Some((kind, key, value))
        })();
        if item.is_none() {
            // Stop after the first malformed record.
            self.r = Reader::new(&[]);
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiring_record_shorter_than_its_expiry_does_not_decode() {
        let mut b = WriteBatch::new();
        b.put_with_expiry(b"k", b"v", 77).unwrap();
        b.set_sequence(1);
        let (_, d) = WriteBatch::decode(b.encoded()).unwrap();
        let items: Vec<_> = d.iter().map(|x| x.unwrap()).collect();
        let mut want = 77u64.to_le_bytes().to_vec();
        want.push(b'v');
        assert_eq!(
            items,
            vec![(ValueKind::ExpiringValue, &b"k"[..], &want[..])]
        );
        // Value length 9 -> 7: the record ends inside the expiry.
        let mut enc = b.encoded().to_vec();
        let n = enc.len();
        assert_eq!(enc[n - 10], 9);
        enc[n - 10] = 7;
        enc.truncate(n - 2);
        assert!(WriteBatch::decode(&enc).is_none());
    }

    #[test]
    fn batch_round_trips_through_its_encoding() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1").unwrap();
        b.delete(b"b").unwrap();
        b.set_sequence(42);
        let (seq, d) = WriteBatch::decode(b.encoded()).unwrap();
        assert_eq!(seq, 42);
        let items: Vec<_> = d.iter().map(|x| x.unwrap()).collect();
        assert_eq!(
            items,
            vec![
                (ValueKind::Value, &b"a"[..], &b"1"[..]),
                (ValueKind::Deletion, &b"b"[..], &b""[..])
            ]
        );
    }

    #[test]
    fn worked_example_of_docs_formats_wal_md() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1").unwrap();
        b.set_sequence(1);
        assert_eq!(
            b.encoded(),
            &[1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, b'a', 1, b'1'][..]
        );
    }

    #[test]
    fn truncated_batch_does_not_decode() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value").unwrap();
        b.set_sequence(1);
        let enc = b.encoded();
        assert!(WriteBatch::decode(&enc[..enc.len() - 1]).is_none());
    }

    #[test]
    fn oversized_key_is_rejected() {
        let mut b = WriteBatch::new();
        assert!(b.put(&vec![0; MAX_KEY_BYTES + 1], b"").is_err());
    }
}
