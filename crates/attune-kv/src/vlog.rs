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

use crate::env::{Env, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::filename;
use parking_lot::RwLock;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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

/// Walks the records of a segment image from the start. Stops at the end of the valid prefix:
/// a torn or damaged tail ends the walk (`valid_len` then tells where); it is the caller's call
/// whether that is corruption (a sealed segment) or a crash's torn tail (the active one).
pub struct SegmentScanner<'a> {
    data: &'a [u8],
    pos: usize,
    /// Why the walk stopped early, if it did.
    pub stop_reason: Option<&'static str>,
}

impl<'a> SegmentScanner<'a> {
    pub fn new(path: &Path, data: &'a [u8]) -> Result<Self> {
        check_segment_header(path, data)?;
        Ok(SegmentScanner {
            data,
            pos: SEGMENT_HEADER_BYTES as usize,
            stop_reason: None,
        })
    }

    /// Offset just past the last good record returned.
    pub fn valid_len(&self) -> u64 {
        self.pos as u64
    }

    /// After the walk over a sealed segment: corruption unless every byte was a good record.
    pub fn check_complete(&self, path: &Path) -> Result<()> {
        if self.pos == self.data.len() {
            return Ok(());
        }
        Err(Error::corruption(
            path,
            self.valid_len(),
            format!(
                "sealed value-log segment is damaged: {}",
                self.stop_reason.unwrap_or("damaged record")
            ),
        ))
    }
}

impl<'a> Iterator for SegmentScanner<'a> {
    /// (pointer offset, record length, key, value)
    type Item = (u64, u32, &'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.data[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let Some((_, _, total)) = header_lengths(rest) else {
            self.stop_reason = Some("truncated or oversized record header");
            return None;
        };
        if total > rest.len() as u64 {
            self.stop_reason = Some("record extends past the end of the segment");
            return None;
        }
        let rec = &rest[..total as usize];
        match decode_record(rec) {
            Ok((k, v)) => {
                let off = self.pos as u64;
                self.pos += total as usize;
                Some((off, total as u32, k, v))
            }
            Err(why) => {
                self.stop_reason = Some(why);
                None
            }
        }
    }
}

/// Whether the bytes at `at` (where a scan stopped) are a damaged record *followed by a valid
/// one*: damage in the middle of the log, which recovery must report, rather than a tail torn by
/// a crash, which recovery cuts off (the same distinction the WAL reader makes).
pub fn damaged_in_middle(data: &[u8], at: u64) -> bool {
    let Some(rest) = data.get(at as usize..) else {
        return false;
    };
    let Some((_, _, total)) = header_lengths(rest) else {
        return false;
    };
    record_at(data, at + total)
}

/// Whether a whole, valid record starts at `at`.
pub fn record_at(data: &[u8], at: u64) -> bool {
    let Some(rest) = data.get(at as usize..) else {
        return false;
    };
    match header_lengths(rest) {
        Some((_, _, n)) if n <= rest.len() as u64 => decode_record(&rest[..n as usize]).is_ok(),
        _ => false,
    }
}

/// The active segment being appended to.
pub struct VlogWriter {
    pub number: u64,
    file: Box<dyn WritableFile>,
    offset: u64,
    buf: Vec<u8>,
    /// Length known durable (nothing to do for a sync below it).
    synced: u64,
    /// A failed append or fsync sticks: after a failed append the tail is unknown, and after a
    /// failed fsync the kernel may have dropped the pages it covered, so a later "successful"
    /// fsync would not bring them back.
    failed: bool,
}

impl VlogWriter {
    /// Creates segment `number` and writes its header (not yet synced).
    pub fn create(env: &dyn Env, dir: &Path, number: u64) -> Result<VlogWriter> {
        Self::create_sized(env, dir, number, 0)
    }

    /// As [`VlogWriter::create`], for a segment expected to reach `expected_bytes` (the
    /// environment may reserve space by that; 0: unknown).
    pub fn create_sized(
        env: &dyn Env,
        dir: &Path,
        number: u64,
        expected_bytes: u64,
    ) -> Result<VlogWriter> {
        let path = filename::blob_path(dir, number);
        let mut file = env.new_log_writable(&path, expected_bytes)?;
        file.append(&segment_header())?;
        file.flush()?;
        Ok(VlogWriter {
            number,
            file,
            offset: SEGMENT_HEADER_BYTES,
            buf: Vec::new(),
            synced: 0,
            failed: false,
        })
    }

    /// Stages a record; it reaches the file at the next [`VlogWriter::flush`].
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> BlobPointer {
        let len = encode_record(&mut self.buf, key, value);
        let p = BlobPointer {
            file: self.number,
            offset: self.offset,
            len: len as u32,
        };
        self.offset += len as u64;
        p
    }

    /// Hands staged records to the OS (readable, and safe from a process crash).
    pub fn flush(&mut self) -> Result<()> {
        self.check_failed()?;
        let r = if self.buf.is_empty() {
            Ok(())
        } else {
            self.file.append(&self.buf)
        };
        if let Err(e) = r.and_then(|()| self.file.flush()) {
            self.failed = true;
            return Err(e);
        }
        self.buf.clear();
        Ok(())
    }

    fn check_failed(&self) -> Result<()> {
        if self.failed {
            return Err(Error::Closed(format!(
                "an earlier write or fsync of value-log segment {:06}.vlog failed; reopen the \
                 database",
                self.number
            )));
        }
        Ok(())
    }

    pub fn sync(&mut self) -> Result<()> {
        self.check_failed()?;
        if self.synced == self.offset {
            return Ok(());
        }
        self.flush()?;
        if let Err(e) = self.file.sync() {
            self.failed = true;
            return Err(e);
        }
        self.synced = self.offset;
        Ok(())
    }

    /// First half of a sync that lets writers go on: hands staged records to the OS and returns
    /// a handle that fsyncs them without this writer's lock, with the length it will cover
    /// (None: nothing to sync, or the file has no such handle and was synced here).
    pub fn begin_sync(&mut self) -> Result<Option<(crate::env::SyncHandle, u64)>> {
        self.check_failed()?;
        if self.synced == self.offset {
            return Ok(None);
        }
        self.flush()?;
        match self.file.sync_handle() {
            Some(h) => Ok(Some((h, self.offset))),
            None => self.sync().map(|()| None),
        }
    }

    /// Second half: records the outcome of the handle's fsync covering `upto` bytes.
    pub fn finish_sync(&mut self, upto: u64, ok: bool) {
        if ok {
            self.synced = self.synced.max(upto);
        } else {
            self.failed = true;
        }
    }

    /// Segment length including staged records.
    pub fn len(&self) -> u64 {
        self.offset
    }

    pub fn is_empty(&self) -> bool {
        self.offset == SEGMENT_HEADER_BYTES
    }
}

/// A segment as readers see it. Reopened when a pointer reaches past what the current handle
/// maps (the active segment grows); deleted on drop once marked obsolete.
pub struct BlobFile {
    pub number: u64,
    path: PathBuf,
    env: Arc<dyn Env>,
    reader: RwLock<Option<Arc<dyn RandomAccessFile>>>,
    obsolete: AtomicBool,
}

impl BlobFile {
    pub fn new(env: Arc<dyn Env>, dir: &Path, number: u64) -> BlobFile {
        BlobFile {
            number,
            path: filename::blob_path(dir, number),
            env,
            reader: RwLock::new(None),
            obsolete: AtomicBool::new(false),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes the file when the last holder drops it.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    fn reader_covering(&self, end: u64) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(r) = self.reader.read().as_ref().filter(|r| r.size() >= end) {
            return Ok(r.clone());
        }
        let mut g = self.reader.write();
        if let Some(r) = g.as_ref().filter(|r| r.size() >= end) {
            return Ok(r.clone());
        }
        if !self.env.exists(&self.path) {
            return Err(Error::corruption(
                &self.path,
                0,
                "a value pointer names this value-log segment, which is missing",
            ));
        }
        let r = self.env.open_random(&self.path)?;
        *g = Some(r.clone());
        Ok(r)
    }

    /// Reads the value `p` points at, checking the record's CRC and that it belongs to `key`.
    pub fn read(&self, p: &BlobPointer, key: &[u8]) -> Result<Vec<u8>> {
        let r = self.reader_covering(p.end())?;
        if r.size() < p.end() {
            return Err(Error::corruption(
                &self.path,
                p.offset,
                format!(
                    "value pointer reaches byte {} but the segment has {} bytes",
                    p.end(),
                    r.size()
                ),
            ));
        }
        let mut buf = vec![0u8; p.len as usize];
        r.read_exact_at(&mut buf, p.offset)?;
        let (k, v) =
            decode_record(&buf).map_err(|why| Error::corruption(&self.path, p.offset, why))?;
        if k != key {
            return Err(Error::corruption(
                &self.path,
                p.offset,
                "value-log record belongs to another key (misdirected pointer)",
            ));
        }
        let (start, len) = (RECORD_HEADER_BYTES + k.len(), v.len());
        buf.copy_within(start..start + len, 0);
        buf.truncate(len);
        Ok(buf)
    }

    /// Hints the OS to start reading the record `p` points at.
    pub fn prefetch(&self, p: &BlobPointer) {
        if let Ok(r) = self.reader_covering(p.end()) {
            r.prefetch(p.offset, u64::from(p.len));
        }
    }

    /// Reads the whole segment (garbage collection and recovery scans).
    pub fn read_all(&self) -> Result<Vec<u8>> {
        self.env.read_all(&self.path)
    }

    /// Reads a sealed segment's `size` valid bytes (the manifest's length); a shorter file is
    /// corruption.
    pub fn read_sealed(&self, size: u64) -> Result<Vec<u8>> {
        let mut data = self.read_all()?;
        if (data.len() as u64) < size {
            return Err(Error::corruption(
                &self.path,
                data.len() as u64,
                format!(
                    "sealed value-log segment has {} bytes, the manifest says {size}",
                    data.len()
                ),
            ));
        }
        data.truncate(size as usize);
        Ok(data)
    }
}

impl Drop for BlobFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            let _ = self.env.remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::MemEnv;

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
