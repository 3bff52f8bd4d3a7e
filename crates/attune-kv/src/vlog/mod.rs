//! The value log (WiscKey's vLog): values at or above `min_blob_size` are appended to value-log
//! segment files (`NNNNNN.vlog`) and the LSM tree stores a fixed-size [`BlobPointer`] instead.
//! Format: docs/formats/vlog.md.
//!
//! A segment is a 16-byte header followed by records `crc32c u32 ‖ key_len u32 ‖ value_len u32 ‖
//! key ‖ value`, the CRC covering everything after it. A pointer names (segment, offset of the
//! record, record length), so a read is one positioned read of exactly the record, checked against
//! its CRC and against the key the LSM tree holds for it: a damaged or misdirected pointer is a
//! corruption error naming segment and offset, never wrong data.
//!
//! Thread safety: [`VlogWriter`] is owned by the group-commit leader (behind a mutex);
//! [`BlobFile`] is shared by all readers. A segment file is deleted when it has been marked
//! obsolete (after garbage collection) and the last reader holding it lets go.

use crate::error::{Error, Result};
use std::path::Path;

mod reader;
mod scan;
mod writer;

pub use reader::BlobFile;
pub use scan::{damaged_in_middle, record_at, SegmentScanner};
pub use writer::VlogWriter;

/// Encoded size of a [`BlobPointer`]: file u64 ‖ offset u64 ‖ record length u32.
pub const BLOB_POINTER_BYTES: usize = 20;
/// Bytes before a record's key.
pub const RECORD_HEADER_BYTES: usize = 12;
/// Bytes of a segment header: magic ‖ version u32 ‖ CRC-32C of the first 12 bytes.
pub const SEGMENT_HEADER_BYTES: u64 = 16;
const SEGMENT_MAGIC: &[u8; 8] = b"ATTUNVLG";
const SEGMENT_VERSION: u32 = 1;
/// A record never exceeds this (a 64 KiB key plus a value under 4 GiB); larger lengths read from
/// disk are corruption, and no buffer is ever sized from an unchecked length.
const MAX_RECORD_BYTES: u64 = RECORD_HEADER_BYTES as u64 + (64 << 10) + (4 << 30);

/// Where a separated value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlobPointer {
    /// Segment file number.
    pub file: u64,
    /// Offset of the record (its CRC) in the segment.
    pub offset: u64,
    /// Length of the whole record (header, key and value).
    pub len: u32,
}

impl BlobPointer {
    pub fn encode(&self) -> [u8; BLOB_POINTER_BYTES] {
        let mut b = [0u8; BLOB_POINTER_BYTES];
        b[..8].copy_from_slice(&self.file.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Decodes a pointer; `None` unless exactly 20 bytes describing a plausible record.
    pub fn decode(b: &[u8]) -> Option<BlobPointer> {
        if b.len() != BLOB_POINTER_BYTES {
            return None;
        }
        let p = BlobPointer {
            file: u64::from_le_bytes(b[..8].try_into().ok()?),
            offset: u64::from_le_bytes(b[8..16].try_into().ok()?),
            len: u32::from_le_bytes(b[16..].try_into().ok()?),
        };
        (p.offset >= SEGMENT_HEADER_BYTES && p.len as usize >= RECORD_HEADER_BYTES).then_some(p)
    }

    /// Bytes of the value (the record minus header and key).
    pub fn end(&self) -> u64 {
        self.offset + u64::from(self.len)
    }
}

/// Appends one record to `dst`; returns its length.
pub fn encode_record(dst: &mut Vec<u8>, key: &[u8], value: &[u8]) -> usize {
    let start = dst.len();
    dst.extend_from_slice(&[0; 4]);
    dst.extend_from_slice(&(key.len() as u32).to_le_bytes());
    dst.extend_from_slice(&(value.len() as u32).to_le_bytes());
    dst.extend_from_slice(key);
    dst.extend_from_slice(value);
    let crc = crc32c::crc32c(&dst[start + 4..]);
    dst[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    dst.len() - start
}

/// The lengths a record header announces: (key length, value length, total record length).
fn header_lengths(h: &[u8]) -> Option<(usize, usize, u64)> {
    let k = u32::from_le_bytes(h.get(4..8)?.try_into().ok()?) as usize;
    let v = u32::from_le_bytes(h.get(8..12)?.try_into().ok()?) as usize;
    let total = RECORD_HEADER_BYTES as u64 + k as u64 + v as u64;
    (total <= MAX_RECORD_BYTES).then_some((k, v, total))
}

/// Checks a whole record and splits it into (key, value).
pub fn decode_record(rec: &[u8]) -> std::result::Result<(&[u8], &[u8]), &'static str> {
    let (k, v, total) = header_lengths(rec).ok_or("record header is truncated or too large")?;
    if total != rec.len() as u64 {
        return Err("record length does not match its header");
    }
    let crc = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
    if crc32c::crc32c(&rec[4..]) != crc {
        return Err("record checksum mismatch");
    }
    let body = &rec[RECORD_HEADER_BYTES..];
    Ok((&body[..k], &body[k..k + v]))
}

fn segment_header() -> [u8; SEGMENT_HEADER_BYTES as usize] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
    h[..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&h[..12]);
    h[12..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a segment header; the error says what is wrong.
pub fn check_segment_header(path: &Path, h: &[u8]) -> Result<()> {
    if h.len() < SEGMENT_HEADER_BYTES as usize || &h[..8] != SEGMENT_MAGIC {
        return Err(Error::corruption(
            path,
            0,
            "not a value-log segment (bad magic)",
        ));
    }
    let crc = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    if crc32c::crc32c(&h[..12]) != crc {
        return Err(Error::corruption(
            path,
            0,
            "value-log header checksum mismatch",
        ));
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if version != SEGMENT_VERSION {
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: SEGMENT_VERSION,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Env;
    use crate::env::MemEnv;
    use std::sync::Arc;

    #[test]
    fn pointer_round_trips_and_rejects_bad_lengths() {
        let p = BlobPointer {
            file: 7,
            offset: 16,
            len: 40,
        };
        assert_eq!(BlobPointer::decode(&p.encode()), Some(p));
        assert_eq!(BlobPointer::decode(&p.encode()[..19]), None);
        let mut bad = p.encode();
        bad[8] = 3; // offset inside the header
        assert_eq!(BlobPointer::decode(&bad), None);
    }

    #[test]
    fn written_records_read_back_and_damage_is_named() {
        let mem = Arc::new(MemEnv::new());
        let env: Arc<dyn Env> = mem.clone();
        let dir = Path::new("/db");
        env.create_dir_all(dir).unwrap();
        let mut w = VlogWriter::create(env.as_ref(), dir, 5).unwrap();
        let p1 = w.add(b"k1", &[7u8; 1000]);
        let p2 = w.add(b"k2", b"second");
        w.sync().unwrap();
        let f = BlobFile::new(env.clone(), dir, 5);
        assert_eq!(f.read(&p1, b"k1").unwrap(), vec![7u8; 1000]);
        assert_eq!(f.read(&p2, b"k2").unwrap(), b"second");
        let err = f.read(&p2, b"k1").unwrap_err().to_string();
        assert!(err.contains("another key"), "{err}");
        let data = env.read_all(f.path()).unwrap();
        let recs: Vec<_> = SegmentScanner::new(f.path(), &data).unwrap().collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].0, p2.offset);
        // Flip a value byte of the first record: the read names segment and offset.
        assert!(mem.corrupt_byte(f.path(), p1.offset as usize + 100, 0xff));
        let f = BlobFile::new(env.clone(), dir, 5);
        let err = f.read(&p1, b"k1").unwrap_err();
        assert!(matches!(err, Error::Corruption { offset, .. } if offset == p1.offset));
        let data = env.read_all(f.path()).unwrap();
        let mut s = SegmentScanner::new(f.path(), &data).unwrap();
        assert!(s.next().is_none());
        assert_eq!(s.valid_len(), SEGMENT_HEADER_BYTES);
        assert_eq!(s.stop_reason, Some("record checksum mismatch"));
    }

    #[test]
    fn zeros_reserved_past_the_last_record_read_as_a_torn_tail() {
        // A mapped segment left open by a crash: whole records, then reserved zeros.
        let mut data = segment_header().to_vec();
        encode_record(&mut data, b"k1", &[5u8; 300]);
        let end = data.len() as u64;
        data.resize(data.len() + 8192, 0);
        let path = Path::new("/db/000004.vlog");
        let mut scan = SegmentScanner::new(path, &data).unwrap();
        assert_eq!(scan.by_ref().count(), 1);
        assert_eq!(scan.valid_len(), end);
        assert!(
            !damaged_in_middle(&data, end),
            "zeros are a tail, not damage"
        );
    }

    #[test]
    fn missing_segment_is_corruption() {
        let env: Arc<dyn Env> = Arc::new(MemEnv::new());
        let f = BlobFile::new(env, Path::new("/db"), 9);
        let p = BlobPointer {
            file: 9,
            offset: 16,
            len: 20,
        };
        let err = f.read(&p, b"k").unwrap_err().to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
