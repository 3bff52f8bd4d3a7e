//! The payload log: keys and values that do not fit a bucket's two 8-byte words live out of
//! place, in append-only segment files `payload-NNNNNN.plush`; the bucket holds the key's
//! 8-byte bucket key (the key itself when it is 8 bytes, else a 64-bit hash of it) and a
//! pointer to the record (chapter 3, §3.4.3). Format: `docs/formats/plush.md`.
//!
//! An upsert of such a record appends it here, fences the segment (a persistence barrier),
//! and only then appends the pointer to the recovery log and the DRAM level, so a pointer that
//! recovery can find always points at a durable record. Records carry a checksum anyway, so a
//! damaged one is reported as corruption rather than returned.
//!
//! One segment is active at a time; an appender stores and flushes its record under the
//! active segment's mutex and fences after releasing it (concurrent appenders share a barrier).
//! Because the stores and flushes are ordered by the mutex, a segment's durable records always
//! form a prefix of it: a scan from the start that stops at the first invalid record never
//! skips an acknowledged one. After a restart the first append resumes the newest segment
//! (the highest number ever given, when its file is live) at the end of its valid records, when
//! every byte after them is zero: nothing was torn there, so appending keeps the prefix
//! property. A segment with anything else after its valid records (a record a crash tore, or
//! damage) is sealed as it is and the append starts a new segment: a torn tail is never
//! overwritten. Until that first append the newest segment counts as active (no collection
//! takes it), so that resuming it cannot race a collection of it; an open that appends no
//! payload record costs no scan and no new segment.
//!
//! Segment numbers are never reused, so a pointer names its segment's "epoch": a pointer whose
//! segment was garbage collected is dangling, and is dropped by the migration that meets it
//! (it is always shadowed by the newer pointer the collection wrote). A collected segment
//! leaves its file behind, cut to 0 bytes, so that a segment file lost any other way is told
//! apart: from the number the manifest records on (numbers below it were collected by builds
//! that removed the file), every number up to the highest created must have a file, full or
//! empty, or the open fails. A pointer into a segment that is gone is dropped only when a
//! newer version of its key shadows it; as its key's newest version it is an error. A collection moves a segment's records only up to the end of its
//! valid records; a damaged record with valid ones after it keeps the segment (an error).
//!
//! Thread safety: `PayloadLog` is shared by all threads; appends serialise on the active
//! segment's mutex, reads take a read lock on the segment table only to clone an `Arc`.

use crate::error::{Error, Result};
use crate::persist::{Region, RegionKind, Storage};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of a segment header.
pub const SEGMENT_HEADER_BYTES: usize = 64;
/// Bytes of a record header (key length, value length, checksum, magic).
pub const RECORD_HEADER_BYTES: usize = 16;
/// Longest key `put_bytes` accepts.
pub const KEY_BYTES_MAX: usize = 4096;
/// Longest value `put_bytes` accepts.
pub const VALUE_BYTES_MAX: usize = 1 << 20;
/// Largest segment number (20 bits in a pointer; the all-ones one would spell the tombstone).
pub const SEGMENT_MAX: u32 = (1 << 20) - 2;
/// Largest segment (28 bits of 8-byte units in a pointer).
pub const SEGMENT_BYTES_MAX: usize = 1 << 31;
const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"PLSHPAYL");
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"PLRC");
const SEGMENT_VERSION: u64 = 1;
/// Values whose top 16 bits are all ones are pointers (or the tombstone, all ones).
const POINTER_TAG: u64 = 0xFFFF << 48;
const OFFSET_BITS: u32 = 28;

/// True when `v` (a bucket value) is a pointer into the payload log.
#[inline]
pub fn is_pointer(v: u64) -> bool {
    v & POINTER_TAG == POINTER_TAG && v != crate::layout::TOMBSTONE
}

/// True when an 8-byte value can be stored in the bucket itself (it does not look like a
/// pointer or the tombstone).
#[inline]
pub fn fits_inline(v: u64) -> bool {
    v & POINTER_TAG != POINTER_TAG
}

/// The pointer to the record at byte `offset` of segment `segment`.
pub fn encode_pointer(segment: u32, offset: usize) -> u64 {
    debug_assert!(segment <= SEGMENT_MAX && offset.is_multiple_of(8) && offset < SEGMENT_BYTES_MAX);
    POINTER_TAG | (segment as u64) << OFFSET_BITS | (offset / 8) as u64
}

/// (segment, byte offset) of a pointer.
pub fn decode_pointer(p: u64) -> (u32, usize) {
    let seg = ((p & !POINTER_TAG) >> OFFSET_BITS) as u32;
    let off = (p & ((1 << OFFSET_BITS) - 1)) as usize * 8;
    (seg, off)
}

/// The 8-byte bucket key of a key: the key itself (little-endian) when it is 8 bytes long,
/// else a 64-bit xxh3 hash of it (seeded with its length, so that no two lengths agree by
/// construction).
pub fn bucket_key(key: &[u8]) -> u64 {
    match <[u8; 8]>::try_from(key) {
        Ok(k) => u64::from_le_bytes(k),
        Err(_) => xxhash_rust::xxh3::xxh3_64_with_seed(key, 0x504C_5553_4800 | key.len() as u64),
    }
}

/// File name of segment `n`.
pub fn segment_file_name(n: u32) -> String {
    format!("payload-{n:06}.plush")
}

fn parse_segment_file_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("payload-")?.strip_suffix(".plush")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Bytes a record of this key and value occupies (8-byte aligned).
pub fn record_bytes(key_len: usize, value_len: usize) -> usize {
    (RECORD_HEADER_BYTES + key_len + value_len).div_ceil(8) * 8
}

fn record_check(segment: u32, offset: usize, key: &[u8], value: &[u8]) -> u32 {
    let mut c = crc32c::crc32c(&segment.to_le_bytes());
    c = crc32c::crc32c_append(c, &(offset as u64).to_le_bytes());
    c = crc32c::crc32c_append(c, &(key.len() as u32).to_le_bytes());
    c = crc32c::crc32c_append(c, &(value.len() as u32).to_le_bytes());
    c = crc32c::crc32c_append(c, key);
    crc32c::crc32c_append(c, value)
}

/// Encodes a record for byte `offset` of segment `segment` (padded to 8 bytes).
pub fn encode_record(segment: u32, offset: usize, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(record_bytes(key.len(), value.len()));
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(&record_check(segment, offset, key, value).to_le_bytes());
    out.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out.resize(record_bytes(key.len(), value.len()), 0);
    out
}

/// Why a record could not be decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum RecordError {
    /// No record starts here (zero or foreign header): the end of a segment's records.
    NoRecord,
    /// The lengths run past the segment or the limits.
    BadLength,
    /// The checksum does not match (a torn or damaged record).
    BadChecksum,
}

/// Decodes the record at byte `offset` of segment `segment` from `bytes` (the segment from
/// that offset on): (key, value, bytes occupied).
pub fn decode_record(
    segment: u32,
    offset: usize,
    bytes: &[u8],
) -> std::result::Result<(Vec<u8>, Vec<u8>, usize), RecordError> {
    let word = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?))
    };
    let (Some(klen), Some(vlen), Some(check), Some(magic)) = (word(0), word(4), word(8), word(12))
    else {
        return Err(RecordError::NoRecord);
    };
    if magic != RECORD_MAGIC {
        return Err(RecordError::NoRecord);
    }
    let (klen, vlen) = (klen as usize, vlen as usize);
    if klen > KEY_BYTES_MAX || vlen > VALUE_BYTES_MAX {
        return Err(RecordError::BadLength);
    }
    let body = RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + klen + vlen;
    let Some(b) = bytes.get(body) else {
        return Err(RecordError::BadLength);
    };
    let (key, value) = b.split_at(klen);
    if record_check(segment, offset, key, value) != check {
        return Err(RecordError::BadChecksum);
    }
    Ok((key.to_vec(), value.to_vec(), record_bytes(klen, vlen)))
}

/// One segment file.
pub struct Segment {
    pub num: u32,
    pub(crate) region: Region,
    bytes: usize,
    /// Bytes appended (the capacity for a segment from before the last open, whose length is
    /// unknown until a collection scans it).
    written: AtomicU64,
    /// Bytes of records known to be unreachable (shadowed versions met by migrations).
    garbage: AtomicU64,
    sealed: AtomicBool,
    /// Appends whose pointer is not yet in the table (taken under the active-segment lock in
    /// [`PayloadLog::append`], released by the [`Pending`] it returns after the upsert). A
    /// collection skips a segment with any: it would find the record unreferenced, remove the
    /// segment, and the upsert would then publish a dangling pointer (an acknowledged write
    /// lost, and an older version of the key back).
    pending: AtomicU64,
}

/// An append whose pointer the caller is publishing; dropping it (after the upsert, or on its
/// error) lets collections take the segment.
pub struct Pending(Arc<Segment>);

impl Pending {
    pub fn segment(&self) -> &Arc<Segment> {
        &self.0
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::Release);
    }
}

impl Segment {
    /// True when every append into the segment has published its pointer (or failed).
    pub fn settled(&self) -> bool {
        self.pending.load(Ordering::Acquire) == 0
    }

    /// Copies `len` bytes from byte `off` (8-byte aligned) out of the mapping.
    fn read(&self, off: usize, len: usize) -> Vec<u8> {
        let end = (off + len).min(self.bytes);
        let words = self.region.words();
        let (first, last) = (off / 8, end.div_ceil(8).max(off / 8));
        let mut out = Vec::with_capacity((last - first) * 8);
        for w in &words[first..last] {
            out.extend_from_slice(&w.load(Ordering::Acquire).to_le_bytes());
        }
        out.truncate(end.saturating_sub(off));
        out
    }

    /// True when every byte from `off` (8-byte aligned) to the segment's end is zero.
    fn zero_from(&self, off: usize) -> bool {
        (off / 8..self.bytes / 8).all(|w| self.region.word(w).load(Ordering::Acquire) == 0)
    }

    /// True when a valid record starts at some 8-byte aligned offset past `off`.
    fn valid_record_after(&self, off: usize) -> bool {
        let magic = u64::from(RECORD_MAGIC) << 32;
        (off / 8 + 1..self.bytes / 8).any(|w| {
            // The magic is the high half of a record's second word.
            self.region.word(w).load(Ordering::Acquire) & (0xFFFF_FFFF << 32) == magic
                && w >= 1
                && self.record_at((w - 1) * 8).is_ok()
        })
    }

    /// The record at `off`: (key, value, bytes occupied).
    pub fn record_at(
        &self,
        off: usize,
    ) -> std::result::Result<(Vec<u8>, Vec<u8>, usize), RecordError> {
        if off < SEGMENT_HEADER_BYTES || off + RECORD_HEADER_BYTES > self.bytes {
            return Err(RecordError::BadLength);
        }
        // The header's first word: key length (low half), value length (high half).
        let lens = self.region.word(off / 8).load(Ordering::Acquire);
        let (klen, vlen) = ((lens & 0xFFFF_FFFF) as usize, (lens >> 32) as usize);
        let len = RECORD_HEADER_BYTES + klen.min(KEY_BYTES_MAX + 1) + vlen.min(VALUE_BYTES_MAX + 1);
        decode_record(self.num, off, &self.read(off, len))
    }

    /// The value of the record at `off` when its key is `key`, `Ok(None)` when the record
    /// holds another key. The lookup path: the record's lines are prefetched once its length
    /// is known, the key is compared in place (no copy), and only the value is copied out, once.
    /// The checksum is checked on every read; a record whose stored key differs is decoded in
    /// full, so that a damaged key reads as a bad checksum, never as an absent key.
    pub fn value_at(
        &self,
        off: usize,
        key: &[u8],
    ) -> std::result::Result<Option<Vec<u8>>, RecordError> {
        if off < SEGMENT_HEADER_BYTES || off + RECORD_HEADER_BYTES > self.bytes {
            return Err(RecordError::BadLength);
        }
        let words = self.region.words();
        let w0 = off / 8;
        let lens = words[w0].load(Ordering::Acquire);
        let (klen, vlen) = ((lens & 0xFFFF_FFFF) as usize, (lens >> 32) as usize);
        let end = off + RECORD_HEADER_BYTES + klen + vlen;
        if klen != key.len() || vlen > VALUE_BYTES_MAX || end > self.bytes {
            return self.other_key(off);
        }
        prefetch_lines(&words[w0..end.div_ceil(8)]);
        let second = words[w0 + 1].load(Ordering::Acquire);
        if (second >> 32) as u32 != RECORD_MAGIC {
            return Err(RecordError::NoRecord);
        }
        let check = second as u32;
        // The key, word by word against the caller's (zero padding past its end).
        let kw = (off + RECORD_HEADER_BYTES) / 8;
        for (i, chunk) in key.chunks(8).enumerate() {
            let stored = words[kw + i].load(Ordering::Acquire).to_le_bytes();
            if stored[..chunk.len()] != *chunk {
                return self.other_key(off);
            }
        }
        // The value: the words from the one holding its first byte, copied once.
        let vstart = off + RECORD_HEADER_BYTES + klen;
        let skip = vstart % 8;
        let mut value = Vec::with_capacity(skip + vlen + 8);
        for w in &words[vstart / 8..end.div_ceil(8)] {
            value.extend_from_slice(&w.load(Ordering::Acquire).to_le_bytes());
        }
        if skip > 0 {
            value.drain(..skip);
        }
        value.truncate(vlen);
        if record_check(self.num, off, key, &value) != check {
            return Err(RecordError::BadChecksum);
        }
        Ok(Some(value))
    }

    /// The slow path of [`Segment::value_at`] for a record whose key is not the caller's: the
    /// whole record is decoded (its checksum checked) and reads as another key's.
    #[cold]
    fn other_key(&self, off: usize) -> std::result::Result<Option<Vec<u8>>, RecordError> {
        self.record_at(off).map(|_| None)
    }

    fn store(&self, off: usize, bytes: &[u8]) {
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.region
                .word(off / 8 + i)
                .store(u64::from_le_bytes(w), Ordering::Release);
        }
    }
}

/// Asks the CPU to start loading the cache lines of `words` (a record about to be read: its
/// lines arrive in parallel instead of one miss after another).
#[inline]
fn prefetch_lines(words: &[AtomicU64]) {
    #[cfg(target_arch = "x86_64")]
    for line in words.chunks(8) {
        // SAFETY: a prefetch is a hint; the address is inside a live mapping.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = words;
}

/// A record a segment scan found: (offset, key, value, bytes occupied).
pub type ScannedRecord = (usize, Vec<u8>, Vec<u8>, usize);

/// Counters of the payload log.
#[derive(Clone, Copy, Debug, Default)]
pub struct PayloadCounters {
    pub appends: u64,
    pub bytes_appended: u64,
    pub segments: u64,
    pub bytes: u64,
    pub garbage_bytes: u64,
    pub gc_runs: u64,
    pub gc_records_moved: u64,
    pub gc_bytes_freed: u64,
    pub dangling_dropped: u64,
}

struct Active {
    seg: Option<Arc<Segment>>,
    tail: usize,
    next: u32,
    /// The newest segment of an earlier session, not yet resumed or sealed (see the module
    /// docs): the first append scans it and appends after its records, or seals it.
    resume: Option<Arc<Segment>>,
}

/// The payload log of one database.
pub struct PayloadLog {
    /// The database directory (error messages name files in it).
    dir: PathBuf,
    segment_bytes: usize,
    segments: RwLock<BTreeMap<u32, Arc<Segment>>>,
    active: Mutex<Active>,
    /// `Active::next`, stored after each change under `active`'s lock, so that readers of the
    /// number (every migration asks whether the log has gaps) do not take that lock.
    next_number: AtomicU32,
    /// The highest segment number the manifest records as created (word 11; 0: none). No
    /// collection takes that segment, so an open that finds its file empty knows it was cut
    /// outside Plush, not collected.
    highest_recorded: AtomicU32,
    /// One collection at a time.
    pub(crate) gc_lock: Mutex<()>,
    appends: AtomicU64,
    bytes_appended: AtomicU64,
    pub(crate) gc_runs: AtomicU64,
    pub(crate) gc_records_moved: AtomicU64,
    pub(crate) gc_bytes_freed: AtomicU64,
    pub(crate) dangling_dropped: AtomicU64,
}

impl PayloadLog {
    /// Makes every segment's stores durable, also with barriers off (see
    /// [`crate::persist::Persist::sync_all`]): the clean close of a `sync=False` session.
    pub fn sync_all(&self) -> Result<()> {
        let segments: Vec<Arc<Segment>> = self.segments.read().values().cloned().collect();
        for s in segments {
            s.region.sync_all()?;
        }
        Ok(())
    }

    /// Opens the segments `storage` holds. A segment whose header was never armed (its
    /// creation was cut short, so nothing points into it) is emptied like a collected one. An
    /// empty file is a collected segment. `checked_from` and `highest` are the manifest's
    /// records (0 when there is none): every number from `checked_from` up to the highest
    /// segment file or `highest`, whichever is larger, must have a file, full or empty; a
    /// missing one is corruption naming it. Numbers up to `highest` are never given again.
    pub fn open(
        storage: &dyn Storage,
        segment_bytes: usize,
        checked_from: u32,
        highest: u32,
    ) -> Result<PayloadLog> {
        let dir = storage.location();
        let mut segments = BTreeMap::new();
        let mut collected = BTreeSet::new();
        let mut next = 1;
        let listed = storage.list_regions()?;
        for n in &listed {
            // An empty replacement a crash left before it was renamed over its segment.
            if n.strip_suffix(crate::persist::CLEARING_SUFFIX)
                .is_some_and(|seg| parse_segment_file_name(seg).is_some())
            {
                storage.remove_region(n)?;
            }
        }
        let mut names: Vec<(u32, String)> = listed
            .into_iter()
            .filter_map(|n| parse_segment_file_name(&n).map(|s| (s, n)))
            .collect();
        names.sort();
        for (num, name) in names {
            next = next.max(num.saturating_add(1));
            match storage.region_len(&name)? {
                Some(0) if num == highest => {
                    return Err(Error::corruption(
                        dir.join(&name),
                        0,
                        format!(
                            "payload segment file is 0 bytes, but segment {num} is the newest \
                             the manifest records as created, which no collection takes: it \
                             was truncated, and the keys whose newest version is in it cannot \
                             be read. Restore the file from a backup; the open changes nothing \
                             until then"
                        ),
                    ));
                }
                Some(0) => {
                    collected.insert(num);
                    continue;
                }
                // A segment file gets its whole length in one step at its creation, so a
                // shorter one was cut outside Plush: extending it would change a damaged file
                // and hide the damage until a read meets it.
                Some(have) if have < segment_bytes as u64 => {
                    return Err(Error::corruption(
                        dir.join(&name),
                        have,
                        format!(
                            "payload segment file is {have} bytes, the database's segments are \
                             {segment_bytes}: it was truncated (a segment never shrinks except \
                             to 0 bytes when collected). Restore the file from a backup; the \
                             open changes nothing until then"
                        ),
                    ));
                }
                _ => {}
            }
            let Some(r) = storage.open_region(&name, segment_bytes, false, RegionKind::Payload)?
            else {
                continue;
            };
            let region = Region::new(&name, r);
            let w = |i| region.word(i).load(Ordering::Acquire);
            if w(0) == 0 {
                // A creation cut short arms nothing and writes no record; a segment the
                // manifest records as created (recorded after its magic's barrier) or one with
                // a record after its header was armed, and a zero magic is damage: emptying it
                // would destroy its records.
                let first_record = SEGMENT_HEADER_BYTES / 8;
                if num <= highest || (first_record..first_record + 2).any(|i| w(i) != 0) {
                    return Err(Error::corruption(
                        dir.join(&name),
                        0,
                        format!(
                            "payload segment {num}'s header magic word is 0, but the segment {}: \
                             the header was damaged (the open changes nothing). Restore the file \
                             from a backup",
                            if num <= highest {
                                "is recorded as created in the manifest"
                            } else {
                                "holds records"
                            }
                        ),
                    ));
                }
                drop(region);
                storage.clear_region(&name)?;
                collected.insert(num);
                continue;
            }
            let check = header_check(w(1), w(2), w(3));
            if w(0) != SEGMENT_MAGIC
                || w(1) != SEGMENT_VERSION
                || w(2) != num as u64
                || w(3) != segment_bytes as u64
                || w(4) != check
            {
                return Err(Error::corruption(
                    dir.join(&name),
                    0,
                    format!(
                        "payload segment header does not check (magic {:#x}, version {}, \
                         number {}, bytes {})",
                        w(0),
                        w(1),
                        w(2),
                        w(3)
                    ),
                ));
            }
            segments.insert(
                num,
                Arc::new(Segment {
                    num,
                    region,
                    bytes: segment_bytes,
                    written: AtomicU64::new(segment_bytes as u64),
                    garbage: AtomicU64::new(0),
                    sealed: AtomicBool::new(true),
                    pending: AtomicU64::new(0),
                }),
            );
        }
        next = next.max(highest.saturating_add(1));
        if checked_from > 0 {
            if let Some(lost) =
                (checked_from..next).find(|n| !segments.contains_key(n) && !collected.contains(n))
            {
                return Err(Error::corruption(
                    dir.join(segment_file_name(lost)),
                    0,
                    format!(
                        "payload segment {lost} is missing (a collected segment leaves an empty \
                         file; segment numbers are never reused): the keys whose newest version \
                         is in it cannot be read. Restore the file from a backup"
                    ),
                ));
            }
        }
        // Only the highest number ever given can be resumed: a lower live one may be older
        // than a collected one, and the manifest's highest may name a segment that is gone.
        let resume = segments.get(&(next - 1)).cloned();
        if let Some(seg) = &resume {
            seg.sealed.store(false, Ordering::Release);
        }
        Ok(PayloadLog {
            dir,
            segment_bytes,
            segments: RwLock::new(segments),
            active: Mutex::new(Active {
                seg: None,
                tail: 0,
                next,
                resume,
            }),
            next_number: AtomicU32::new(next),
            highest_recorded: AtomicU32::new(highest),
            gc_lock: Mutex::new(()),
            appends: AtomicU64::new(0),
            bytes_appended: AtomicU64::new(0),
            gc_runs: AtomicU64::new(0),
            gc_records_moved: AtomicU64::new(0),
            gc_bytes_freed: AtomicU64::new(0),
            dangling_dropped: AtomicU64::new(0),
        })
    }

    /// The number the next segment will get: every number below it has been used.
    pub fn next_number(&self) -> u32 {
        self.next_number.load(Ordering::Acquire)
    }

    /// True when a pointer can point into a segment that is gone (some segment number below
    /// the next is not a live segment); false for a log with only live segments.
    pub fn has_gaps(&self) -> bool {
        let next = self.next_number();
        self.segments.read().len() as u64 != u64::from(next.saturating_sub(1))
    }

    /// Creates segment `num` (header armed last: fields, barrier, magic, barrier).
    fn create(&self, storage: &dyn Storage, num: u32) -> Result<Arc<Segment>> {
        let name = segment_file_name(num);
        let r = storage
            .open_region(&name, self.segment_bytes, true, RegionKind::Payload)?
            .ok_or_else(|| Error::io("create", &name, std::io::ErrorKind::NotFound.into()))?;
        let region = Region::new(&name, r);
        // Allocated whole before the first store (see `Persist::reserve`): a full file system
        // fails this append with an I/O error instead of a SIGBUS at a later one.
        region.reserve_words(0, self.segment_bytes / 8)?;
        let fields = [SEGMENT_VERSION, num as u64, self.segment_bytes as u64];
        for (i, f) in fields.iter().enumerate() {
            region.word(1 + i).store(*f, Ordering::Release);
        }
        region.word(4).store(
            header_check(fields[0], fields[1], fields[2]),
            Ordering::Release,
        );
        region.flush_words(1, 4);
        region.fence()?;
        region.word(0).store(SEGMENT_MAGIC, Ordering::Release);
        region.flush_words(0, 1);
        region.fence()?;
        crate::db::record_payload_created(storage, num)?;
        self.recorded_highest(num);
        Ok(Arc::new(Segment {
            num,
            region,
            bytes: self.segment_bytes,
            written: AtomicU64::new(SEGMENT_HEADER_BYTES as u64),
            garbage: AtomicU64::new(0),
            sealed: AtomicBool::new(false),
            pending: AtomicU64::new(0),
        }))
    }

    /// Appends a record and returns its pointer and segment; the caller fences the segment
    /// (`seg.region.fence()`) before it publishes the pointer. The second value is true when
    /// this append sealed a segment (a collection may be due).
    pub fn append(
        &self,
        storage: &dyn Storage,
        key: &[u8],
        value: &[u8],
    ) -> Result<(u64, Pending, bool)> {
        let len = record_bytes(key.len(), value.len());
        let mut a = self.active.lock();
        if let Some(seg) = a.resume.take() {
            match self.resume_tail(&seg) {
                Ok(Some(tail)) => {
                    a.seg = Some(seg);
                    a.tail = tail;
                }
                Ok(None) => seg.sealed.store(true, Ordering::Release),
                Err(e) => {
                    seg.sealed.store(true, Ordering::Release);
                    return Err(e);
                }
            }
        }
        let mut sealed = false;
        let fits = a.seg.is_some() && a.tail + len <= self.segment_bytes;
        if !fits {
            if a.next > SEGMENT_MAX {
                return Err(Error::Full(format!(
                    "the payload log used its {SEGMENT_MAX} segment numbers"
                )));
            }
            let seg = self.create(storage, a.next)?;
            if let Some(old) = a.seg.take() {
                old.sealed.store(true, Ordering::Release);
                // Its records were all handed to the file under this mutex: the private copy
                // (the `Write` back end's) may go.
                old.region.discard_words(0, self.segment_bytes / 8);
                sealed = true;
            }
            self.segments.write().insert(a.next, seg.clone());
            a.next += 1;
            self.next_number.store(a.next, Ordering::Release);
            a.seg = Some(seg);
            a.tail = SEGMENT_HEADER_BYTES;
        }
        let (seg, off) = match &a.seg {
            Some(s) => (s.clone(), a.tail),
            None => return Err(Error::InvalidArgument("no active payload segment".into())),
        };
        seg.pending.fetch_add(1, Ordering::Relaxed);
        let seg = Pending(seg);
        let seg_ref = seg.segment();
        seg_ref.store(off, &encode_record(seg_ref.num, off, key, value));
        seg_ref.region.flush_words(off / 8, len / 8);
        a.tail += len;
        seg_ref.written.store(a.tail as u64, Ordering::Release);
        let ptr = encode_pointer(seg_ref.num, off);
        drop(a);
        self.appends.fetch_add(1, Ordering::Relaxed);
        self.bytes_appended.fetch_add(len as u64, Ordering::Relaxed);
        Ok((ptr, seg, sealed))
    }

    /// Where appends to `seg`, the newest segment of an earlier session, may continue: the
    /// end of its valid records when every byte after them is zero; `None` when something is
    /// there (a torn record or damage, which is never overwritten). Allocates the segment's
    /// blocks first, as a creation does (allocated ones cost nothing more).
    fn resume_tail(&self, seg: &Segment) -> Result<Option<usize>> {
        seg.region.reserve_words(0, self.segment_bytes / 8)?;
        let mut off = SEGMENT_HEADER_BYTES;
        while let Ok((_, _, len)) = seg.record_at(off) {
            off += len;
        }
        // Records are 8-byte aligned. Holes and unwritten extents read as zero without
        // being read.
        let end = self.segment_bytes / 8;
        let mut w = off / 8;
        while let Some((lo, hi)) = seg.region.data_run_words(w, end) {
            if (lo..hi).any(|i| seg.region.word(i).load(Ordering::Acquire) != 0) {
                return Ok(None);
            }
            w = hi;
        }
        seg.written.store(off as u64, Ordering::Release);
        Ok(Some(off))
    }

    /// The segment `num`, if it exists.
    pub fn segment(&self, num: u32) -> Option<Arc<Segment>> {
        self.segments.read().get(&num).cloned()
    }

    /// True when segment `num` exists (a pointer into a removed one dangles).
    pub fn has_segment(&self, num: u32) -> bool {
        self.segments.read().contains_key(&num)
    }

    /// True when no segment exists (no bucket value can be a live pointer).
    pub fn is_empty(&self) -> bool {
        self.segments.read().is_empty()
    }

    /// Reads the record a pointer points at: `Ok(None)` when its segment no longer exists.
    pub fn read(&self, ptr: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let (num, off) = decode_pointer(ptr);
        let Some(seg) = self.segment(num) else {
            return Ok(None);
        };
        match seg.record_at(off) {
            Ok((k, v, _)) => Ok(Some((k, v))),
            Err(e) => Err(Error::corruption(
                self.dir.join(seg.region.name()),
                off as u64,
                format!("payload record unreadable ({e:?}) though a pointer names it"),
            )),
        }
    }

    /// The value the record at `ptr` holds for `key`: `Ok(None)` when its segment no longer
    /// exists, `Ok(Some(None))` when the record holds another key.
    pub fn read_value(&self, ptr: u64, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        let (num, off) = decode_pointer(ptr);
        let Some(seg) = self.segment(num) else {
            return Ok(None);
        };
        match seg.value_at(off, key) {
            Ok(v) => Ok(Some(v)),
            Err(e) => Err(Error::corruption(
                self.dir.join(seg.region.name()),
                off as u64,
                format!("payload record unreadable ({e:?}) though a pointer names it"),
            )),
        }
    }

    /// Counts the record at `ptr` as garbage (a migration dropped a shadowed pointer to it).
    pub fn add_garbage(&self, ptr: u64) {
        let (num, off) = decode_pointer(ptr);
        if let Some(seg) = self.segment(num) {
            if let Ok((_, _, len)) = seg.record_at(off) {
                seg.garbage.fetch_add(len as u64, Ordering::Relaxed);
            }
        }
    }

    /// Sealed segments in which at least `ratio` of the written bytes are known garbage,
    /// most garbage first.
    pub fn gc_candidates(&self, ratio: f64) -> Vec<u32> {
        let mut c: Vec<(u64, u32)> = self
            .segments
            .read()
            .values()
            .filter(|s| self.collectable(s))
            .filter_map(|s| {
                let g = s.garbage.load(Ordering::Relaxed);
                let w = s.written.load(Ordering::Relaxed).max(1);
                (g as f64 >= ratio * w as f64).then_some((g, s.num))
            })
            .collect();
        c.sort_unstable_by(|a, b| b.cmp(a));
        c.into_iter().map(|(_, n)| n).collect()
    }

    /// Every sealed segment a collection may take, oldest first.
    pub fn sealed_segments(&self) -> Vec<u32> {
        self.segments
            .read()
            .values()
            .filter(|s| self.collectable(s))
            .map(|s| s.num)
            .collect()
    }

    /// Notes that the manifest now records segment `n` as the highest created.
    pub fn recorded_highest(&self, n: u32) {
        self.highest_recorded.fetch_max(n, Ordering::AcqRel);
    }

    /// Sealed, and not the newest segment the manifest records (see `highest_recorded`: a
    /// crash can leave a newer segment armed but unrecorded, which seals the recorded one).
    fn collectable(&self, s: &Segment) -> bool {
        s.sealed.load(Ordering::Acquire) && s.num != self.highest_recorded.load(Ordering::Acquire)
    }

    /// The records of a segment, in order, up to the first invalid one (the end of its
    /// durable prefix): (offset, key, value, bytes). The prefix must end the segment's data:
    /// nothing but zeros after it, or bytes in which no valid record starts (a record torn by
    /// a crash, the last append of the segment active then). A valid record after an invalid
    /// one is damage: corruption naming the segment and the offset, for the caller to keep it.
    pub fn scan(&self, num: u32) -> Result<Vec<ScannedRecord>> {
        let Some(seg) = self.segment(num) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut off = SEGMENT_HEADER_BYTES;
        let stop = loop {
            match seg.record_at(off) {
                Ok((k, v, len)) => {
                    out.push((off, k, v, len));
                    off += len;
                }
                Err(e) => break e,
            }
        };
        if !seg.zero_from(off) && seg.valid_record_after(off) {
            return Err(Error::corruption(
                self.dir.join(segment_file_name(num)),
                off as u64,
                format!(
                    "payload record unreadable ({stop:?}) with valid records after it: the \
                     segment is damaged, and is kept (its other records stay readable)"
                ),
            ));
        }
        seg.written.store(off as u64, Ordering::Relaxed);
        Ok(out)
    }

    /// Marks segment `num` collected (after a collection moved its live records): its file is
    /// cut to 0 bytes, which keeps the number's record (see [`PayloadLog::open`]).
    pub fn remove(&self, storage: &dyn Storage, num: u32) -> Result<u64> {
        let seg = self.segments.write().remove(&num);
        let freed = seg.map_or(0, |s| s.written.load(Ordering::Relaxed));
        storage.clear_region(&segment_file_name(num))?;
        Ok(freed)
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> PayloadCounters {
        let segs = self.segments.read();
        PayloadCounters {
            appends: self.appends.load(Ordering::Relaxed),
            bytes_appended: self.bytes_appended.load(Ordering::Relaxed),
            segments: segs.len() as u64,
            bytes: segs
                .values()
                .map(|s| s.written.load(Ordering::Relaxed))
                .sum(),
            garbage_bytes: segs
                .values()
                .map(|s| s.garbage.load(Ordering::Relaxed))
                .sum(),
            gc_runs: self.gc_runs.load(Ordering::Relaxed),
            gc_records_moved: self.gc_records_moved.load(Ordering::Relaxed),
            gc_bytes_freed: self.gc_bytes_freed.load(Ordering::Relaxed),
            dangling_dropped: self.dangling_dropped.load(Ordering::Relaxed),
        }
    }
}

fn header_check(version: u64, num: u64, bytes: u64) -> u64 {
    let mut buf = [0u8; 24];
    buf[..8].copy_from_slice(&version.to_le_bytes());
    buf[8..16].copy_from_slice(&num.to_le_bytes());
    buf[16..].copy_from_slice(&bytes.to_le_bytes());
    crc32c::crc32c(&buf) as u64
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pointers_round_trip_and_never_spell_the_tombstone() {
        for (s, o) in [
            (1u32, 64usize),
            (SEGMENT_MAX, SEGMENT_BYTES_MAX - 8),
            (77, 4096),
        ] {
            let p = encode_pointer(s, o);
            assert!(is_pointer(p) && !fits_inline(p));
            assert_eq!(decode_pointer(p), (s, o));
            assert_ne!(p, crate::layout::TOMBSTONE);
        }
        assert!(fits_inline(0xFFFE_FFFF_FFFF_FFFF));
        assert!(!is_pointer(crate::layout::TOMBSTONE));
    }

    #[test]
    fn a_record_round_trips_and_rejects_damage_and_the_wrong_place() {
        let r = encode_record(3, 64, b"key", b"a value");
        assert_eq!(r.len() % 8, 0);
        let (k, v, n) = decode_record(3, 64, &r).unwrap();
        assert_eq!(
            (k.as_slice(), v.as_slice(), n),
            (&b"key"[..], &b"a value"[..], r.len())
        );
        assert_eq!(decode_record(3, 72, &r), Err(RecordError::BadChecksum));
        assert_eq!(decode_record(4, 64, &r), Err(RecordError::BadChecksum));
        for i in 0..RECORD_HEADER_BYTES + 3 + 7 {
            let mut x = r.clone();
            x[i] ^= 0x10;
            assert!(decode_record(3, 64, &x).is_err(), "byte {i}");
        }
        assert_eq!(decode_record(3, 64, &[0u8; 32]), Err(RecordError::NoRecord));
        assert_eq!(decode_record(3, 64, &r[..20]), Err(RecordError::BadLength));
    }

    #[test]
    fn the_format_doc_example_encodes_as_drawn() {
        let r = encode_record(1, 64, b"k", b"vv");
        assert_eq!(
            r,
            [
                1, 0, 0, 0, 2, 0, 0, 0, 0xe9, 0x32, 0x01, 0xc0, b'P', b'L', b'R', b'C', b'k', b'v',
                b'v', 0, 0, 0, 0, 0
            ]
        );
    }

    #[test]
    fn eight_byte_keys_are_their_own_bucket_key() {
        assert_eq!(bucket_key(&7u64.to_le_bytes()), 7);
        assert_ne!(bucket_key(b"abc"), bucket_key(b"abcd"));
        assert_ne!(bucket_key(b""), 0);
        assert_eq!(parse_segment_file_name("payload-000012.plush"), Some(12));
        assert_eq!(parse_segment_file_name("payload-12.plush"), None);
        assert_eq!(
            parse_segment_file_name(&segment_file_name(SEGMENT_MAX)),
            Some(SEGMENT_MAX)
        );
    }
}
