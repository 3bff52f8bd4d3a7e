//! Internal keys: `user_key ++ tag`, where `tag = (sequence << 8) | kind` as 8 little-endian bytes.
//! Ordering: user key ascending (bytewise), then tag descending, so the newest version of a key comes
//! first. Every sorted structure (memtable, blocks, files, levels) uses [`compare_internal`].

use std::cmp::Ordering;

/// Largest sequence number (56 bits).
pub const MAX_SEQUENCE: u64 = (1 << 56) - 1;

/// Bytes of the tag that ends every internal key.
pub const TAG_BYTES: usize = 8;

/// Kind of an entry, stored in the low byte of the tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ValueKind {
    Deletion = 0,
    Value = 1,
    /// The value lives in the value log; the entry holds a [`crate::vlog::BlobPointer`].
    BlobIndex = 2,
    /// A value with an expiry: the entry holds `expires_at: fixed64 ‖ value`, where
    /// `expires_at` is Unix time in milliseconds. From that instant on the entry reads as a
    /// deletion.
    ExpiringValue = 3,
    /// A separated value with an expiry: `expires_at: fixed64 ‖ encoded BlobPointer`.
    ExpiringBlobIndex = 4,
    /// A range deletion (`delete_range`): the key is the range's begin, the value its end
    /// (exclusive). Only in write batches, the WAL and tables' range-deletion blocks; never a
    /// point entry (see `memtable/rangedel.rs`).
    RangeDeletion = 5,
    /// A merge operand (`merge`): the value is the operand, always inline. A read combines the
    /// operands above a key's base with the database's merge operator (`merge.rs`); a merge
    /// never hides older versions.
    Merge = 6,
}

impl ValueKind {
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::BlobIndex),
            3 => Some(ValueKind::ExpiringValue),
            4 => Some(ValueKind::ExpiringBlobIndex),
            5 => Some(ValueKind::RangeDeletion),
            6 => Some(ValueKind::Merge),
            _ => None,
        }
    }

    /// True for the kinds whose entry points into the value log.
    #[inline]
    pub fn is_blob(self) -> bool {
        matches!(self, ValueKind::BlobIndex | ValueKind::ExpiringBlobIndex)
    }

    /// True for the kinds whose entry carries an expiry prefix.
    #[inline]
    pub fn expires(self) -> bool {
        matches!(
            self,
            ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex
        )
    }

    /// The kind without its expiry (`Value` or `BlobIndex` for the expiring kinds).
    #[inline]
    pub fn without_expiry(self) -> ValueKind {
        match self {
            ValueKind::ExpiringValue => ValueKind::Value,
            ValueKind::ExpiringBlobIndex => ValueKind::BlobIndex,
            k => k,
        }
    }
}

/// Bytes of the expiry that prefixes the payload of the expiring kinds.
pub const EXPIRY_BYTES: usize = 8;

/// Splits an entry's stored value into (expiry in Unix milliseconds, payload). Kinds without an
/// expiry return `(None, value)`; an expiring entry shorter than its prefix returns `None`
/// (corruption: every writer prefixes it).
#[inline]
pub fn split_expiry(kind: ValueKind, value: &[u8]) -> Option<(Option<u64>, &[u8])> {
    if !kind.expires() {
        return Some((None, value));
    }
    if value.len() < EXPIRY_BYTES {
        return None;
    }
    let mut b = [0u8; EXPIRY_BYTES];
    b.copy_from_slice(&value[..EXPIRY_BYTES]);
    Some((Some(u64::from_le_bytes(b)), &value[EXPIRY_BYTES..]))
}

/// The encoded value pointer of a value-log entry (its expiry stripped), or None for other kinds.
/// An expiring pointer too short to hold its prefix gives an empty slice, which no pointer
/// decodes from: callers report it as corruption.
#[inline]
pub fn blob_payload(kind: ValueKind, value: &[u8]) -> Option<&[u8]> {
    if !kind.is_blob() {
        return None;
    }
    Some(split_expiry(kind, value).map_or(&[][..], |(_, p)| p))
}

/// The kind used when seeking: the highest, so that a lookup key sorts before every entry of the
/// same user key and sequence.
pub const KIND_FOR_SEEK: ValueKind = ValueKind::Merge;

#[inline]
pub fn pack_tag(seq: u64, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE);
    (seq << 8) | kind as u64
}

/// Builds an internal key.
pub fn make_internal_key(user_key: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TAG_BYTES);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&pack_tag(seq, kind).to_le_bytes());
    k
}

/// The user-key part. Callers guarantee `ikey.len() >= 8` (checked when decoding from disk).
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len() - TAG_BYTES]
}

#[inline]
pub fn tag(ikey: &[u8]) -> u64 {
    let n = ikey.len();
    let mut b = [0u8; 8];
    b.copy_from_slice(&ikey[n - TAG_BYTES..]);
    u64::from_le_bytes(b)
}

#[inline]
pub fn sequence(ikey: &[u8]) -> u64 {
    tag(ikey) >> 8
}

/// The kind, or None when the tag holds an unknown kind (corruption).
#[inline]
pub fn kind(ikey: &[u8]) -> Option<ValueKind> {
    ValueKind::from_u8((tag(ikey) & 0xff) as u8)
}

/// Bytewise comparison of two byte strings (the order of user keys), eight bytes at a time.
/// Same result as `a.cmp(b)`, but inlined: for the short keys of an LSM a call into libc's
/// `memcmp` per comparison dominated memtable and block searches in profiles.
#[inline]
pub fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let mut x = [0u8; 8];
        let mut y = [0u8; 8];
        x.copy_from_slice(&a[i..i + 8]);
        y.copy_from_slice(&b[i..i + 8]);
        if x != y {
            return u64::from_be_bytes(x).cmp(&u64::from_be_bytes(y));
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return a[i].cmp(&b[i]);
        }
        i += 1;
    }
    a.len().cmp(&b.len())
}

/// Compares two internal keys.
#[inline]
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match compare_bytes(user_key(a), user_key(b)) {
        Ordering::Equal => tag(b).cmp(&tag(a)),
        o => o,
    }
}

/// A parsed view of an internal key.
#[derive(Debug, Clone, Copy)]
pub struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub sequence: u64,
    pub kind: ValueKind,
}

/// Parses an internal key read from disk; None when too short or of unknown kind.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    if ikey.len() < TAG_BYTES {
        return None;
    }
    let t = tag(ikey);
    Some(ParsedKey {
        user_key: user_key(ikey),
        sequence: t >> 8,
        kind: ValueKind::from_u8((t & 0xff) as u8)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_sort_first_within_a_user_key() {
        let a = make_internal_key(b"k", 10, ValueKind::Value);
        let b = make_internal_key(b"k", 5, ValueKind::Value);
        let c = make_internal_key(b"l", 99, ValueKind::Value);
        assert_eq!(compare_internal(&a, &b), Ordering::Less);
        assert_eq!(compare_internal(&b, &c), Ordering::Less);
        let d = make_internal_key(b"k", 5, ValueKind::Deletion);
        assert_eq!(compare_internal(&b, &d), Ordering::Less);
    }

    #[test]
    fn compare_bytes_agrees_with_slice_order() {
        let samples: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            vec![1],
            vec![255],
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefgi".to_vec(),
            b"abcdefghijklmnopq".to_vec(),
            b"abcdefghijklmnopr".to_vec(),
            b"abcdefghijklmnop".to_vec(),
            vec![0x80; 9],
        ];
        for a in &samples {
            for b in &samples {
                assert_eq!(compare_bytes(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn short_or_unknown_keys_do_not_parse() {
        assert!(parse_internal_key(b"short").is_none());
        let mut k = make_internal_key(b"k", 1, ValueKind::Value);
        let n = k.len();
        k[n - 8] = 7;
        assert!(parse_internal_key(&k).is_none());
    }
}
