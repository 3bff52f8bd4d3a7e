//! Blocks: the unit of I/O, caching and checksumming inside a table (docs/formats/sstable.md).
//!
//! Contents (before compression):
//!
//! ```text
//! entry*  | offset: fixed32 × n | n: fixed32
//! entry = key_len: varint | value_len: varint | key | value
//! ```
//!
//! Entries are not prefix-compressed and every entry has an offset, so the i-th record of a block
//! is one array read away: a learned index predicts positions and needs exactly that. Binary search
//! runs over the offsets.

pub mod format;

use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::util::coding::{decode_fixed32, decode_varint64, put_fixed32, put_varint64};
use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

/// Builds the contents of one block.
#[derive(Default)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    offsets: Vec<u32>,
}

impl BlockBuilder {
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        self.offsets.push(self.buf.len() as u32);
        put_varint64(&mut self.buf, key.len() as u64);
        put_varint64(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(key);
        self.buf.extend_from_slice(value);
    }
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.offsets.len() + 4
    }
    pub fn len(&self) -> usize {
        self.offsets.len()
    }
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
    /// Finishes the block, returns its contents and resets the builder.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for &o in &self.offsets {
            put_fixed32(&mut out, o);
        }
        put_fixed32(&mut out, self.offsets.len() as u32);
        self.offsets.clear();
        out
    }
}

/// Checks the layout of block contents: returns (entry count, start of the offset array).
/// With `full`, also checks that every offset is in range and increasing (O(n), done once per
/// block: when it is read into the cache, or the first time it is used in place).
fn check_layout(data: &[u8], full: bool) -> std::result::Result<(usize, usize), String> {
    if data.len() < 4 {
        return Err("block shorter than its entry count".into());
    }
    let n = decode_fixed32(&data[data.len() - 4..]).unwrap_or(0) as usize;
    let offsets_bytes = n.checked_mul(4).ok_or("entry count overflows")?;
    if offsets_bytes + 4 > data.len() {
        return Err(format!(
            "entry count {n} does not fit a block of {} bytes",
            data.len()
        ));
    }
    let offsets_start = data.len() - 4 - offsets_bytes;
    if full {
        let mut prev = 0usize;
        for i in 0..n {
            let o = decode_fixed32(&data[offsets_start + 4 * i..]).unwrap_or(u32::MAX) as usize;
            if o >= offsets_start.max(1) || (i > 0 && o <= prev) {
                return Err(format!(
                    "entry offset {o} of entry {i} is out of order or range"
                ));
            }
            prev = o;
        }
    }
    Ok((n, offsets_start))
}

/// Block contents used in place (borrowed, e.g. from a memory-mapped table whose block checksum
/// was verified): the same reads as [`Block`], without a copy or a cache.
#[derive(Clone, Copy)]
pub struct BlockView<'a> {
    data: &'a [u8],
    n: usize,
    offsets_start: usize,
}

impl<'a> BlockView<'a> {
    /// A view of `data`; `full` checks every offset (see [`check_layout`]). Entry reads are
    /// bounds-checked either way, so a view never reads outside `data`.
    pub fn new(data: &'a [u8], full: bool) -> std::result::Result<Self, String> {
        let (n, offsets_start) = check_layout(data, full)?;
        Ok(BlockView {
            data,
            n,
            offsets_start,
        })
    }

    pub fn len(&self) -> usize {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// A view of a fixed-layout block whose geometry is known from the table's index (`n`
    /// records of `record` bytes, then the offset array and the count), built without reading
    /// the block: for blocks already verified in place. None when that geometry does not
    /// account for exactly `data.len()` bytes.
    pub fn fixed(data: &'a [u8], n: usize, record: usize) -> Option<Self> {
        let offsets_start = n.checked_mul(record)?;
        let size = n.checked_mul(record.checked_add(4)?)?.checked_add(4)?;
        (size == data.len()).then_some(BlockView {
            data,
            n,
            offsets_start,
        })
    }

    /// Whether this (read and checked) view has the geometry [`BlockView::fixed`] would assume.
    pub fn is_fixed(&self, n: usize, record: usize) -> bool {
        Self::fixed(self.data, n, record)
            .is_some_and(|f| f.n == self.n && f.offsets_start == self.offsets_start)
    }

    fn offset(&self, i: usize) -> usize {
        decode_fixed32(&self.data[self.offsets_start + 4 * i..]).unwrap_or(0) as usize
    }

    /// The i-th entry as (key, value); None when the entry's bytes are malformed.
    pub fn entry(&self, i: usize) -> Option<(&'a [u8], &'a [u8])> {
        if i >= self.n {
            return None;
        }
        let region = &self.data[..self.offsets_start];
        let start = self.offset(i);
        let (klen, a) = decode_varint64(region.get(start..)?)?;
        let (vlen, b) = decode_varint64(region.get(start + a..)?)?;
        let kstart = start + a + b;
        let kend = kstart.checked_add(usize::try_from(klen).ok()?)?;
        let vend = kend.checked_add(usize::try_from(vlen).ok()?)?;
        let key = region.get(kstart..kend)?;
        let value = region.get(kend..vend)?;
        if key.len() < crate::key::TAG_BYTES {
            return None;
        }
        Some((key, value))
    }

    /// Entry `i` of a block whose records all take `record` bytes: `header` bytes of length
    /// varints, a `key_len`-byte key, then the value (no offset-array read). Bounds-checked.
    #[inline]
    pub fn fixed_entry(
        &self,
        i: usize,
        record: usize,
        header: usize,
        key_len: usize,
    ) -> Option<(&'a [u8], &'a [u8])> {
        if i >= self.n {
            return None;
        }
        let start = i.checked_mul(record)?;
        let rec = self.data[..self.offsets_start].get(start..start.checked_add(record)?)?;
        let (key, value) = rec.get(header..)?.split_at_checked(key_len)?;
        Some((key, value))
    }

    /// Hints the CPU to load the keys of fixed-size records `[from, to)` (each `record` bytes,
    /// whose first `key_end` bytes hold the length header and the key) into its caches, all at
    /// once: the binary search over a learned window then waits for one memory access instead
    /// of one per probe. Records of up to a cache line are loaded whole; of longer records only
    /// the lines a comparison reads, so a window of 1 KiB records costs one prefetch per record,
    /// not one per 64 bytes of values the search never reads. Only a hint; a no-op off x86-64.
    #[inline]
    pub fn prefetch_records(&self, from: usize, to: usize, record: usize, key_end: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let region = &self.data[..self.offsets_start];
            let start = from.saturating_mul(record).min(region.len());
            let end = to.saturating_mul(record).min(region.len());
            let prefetch = |at: usize| {
                // SAFETY: callers pass `at < end <= region.len()`, so the pointer is inside
                // the block; prefetching never faults and does not change memory.
                unsafe {
                    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                    _mm_prefetch::<_MM_HINT_T0>(region.as_ptr().add(at).cast());
                }
            };
            if record <= 64 {
                let mut at = start & !63;
                while at < end {
                    prefetch(at.max(start));
                    at += 64;
                }
            } else {
                let key_end = key_end.clamp(1, record);
                let mut rec = start;
                while rec < end {
                    let last = (rec + key_end - 1).min(end - 1);
                    let mut at = rec & !63;
                    while at <= last {
                        prefetch(at.max(rec));
                        at += 64;
                    }
                    rec += record;
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (from, to, record, key_end);
    }

    /// Index of the first entry in `[lo, hi)` with key >= target, or `hi` (clamped to `len()`);
    /// `Err(i)` names a malformed entry.
    pub fn lower_bound_in(
        &self,
        target: &[u8],
        lo: usize,
        hi: usize,
    ) -> std::result::Result<usize, usize> {
        let hi = hi.min(self.n);
        let mut lo = lo.min(hi);
        let mut hi = hi;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (k, _) = self.entry(mid).ok_or(mid)?;
            if compare_internal(k, target) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}

/// The bytes of a [`Block`]: a buffer of its own, or a range of a read-only file mapping.
///
/// Invariant: `ptr..ptr + len` stays valid and unchanged while `_owner` lives (a `Vec`'s heap
/// buffer does not move when the `Vec` does; a mapping lives as long as its file handle, and
/// the files mapped are immutable tables).
struct Bytes {
    ptr: *const u8,
    len: usize,
    _owner: Owner,
}

enum Owner {
    Heap(#[allow(dead_code)] Vec<u8>),
    Mapped(#[allow(dead_code)] Arc<dyn RandomAccessFile>),
}

// SAFETY: the bytes are immutable for the value's whole life (see the invariant) and both
// owners are Send + Sync.
unsafe impl Send for Bytes {}
// SAFETY: as above: shared access only ever reads.
unsafe impl Sync for Bytes {}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: valid for `len` bytes while `_owner` lives (the invariant).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// A decoded (uncompressed, checksum-verified) block.
pub struct Block {
    data: Bytes,
    n: usize,
    offsets_start: usize,
    /// Set for a block of a fixed-layout table built by [`Block::mapped_fixed`]: entry `i`
    /// is then read at `i * record` without the offset array (see [`FixedRecords`]).
    fixed: Option<FixedRecords>,
    file: Arc<PathBuf>,
    file_offset: u64,
}

/// The geometry of a block whose records all have one size (a fixed-layout table, see
/// `index::learned::FixedLayout`): `record` bytes each, `header` bytes of length varints, then a
/// `key_len`-byte internal key and the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedRecords {
    pub record: usize,
    pub header: usize,
    pub key_len: usize,
}

impl Block {
    /// Validates the layout of `data` read at `file_offset` of `file`.
    pub fn new(data: Vec<u8>, file: Arc<PathBuf>, file_offset: u64) -> Result<Block> {
        let (n, offsets_start) = check_layout(&data, true)
            .map_err(|d| Error::corruption(file.as_path(), file_offset, d))?;
        let data = Bytes {
            ptr: data.as_ptr(),
            len: data.len(),
            _owner: Owner::Heap(data),
        };
        Ok(Block {
            data,
            n,
            offsets_start,
            fixed: None,
            file,
            file_offset,
        })
    }

    /// A block read in place from `map`'s file mapping: `body` must lie inside
    /// `map.mapped()` (checked) and hold an uncompressed block whose checksum the caller
    /// verified. `full` checks every entry offset, as [`Block::new`] does; false only the
    /// header (a block whose layout was already checked once).
    pub fn mapped(
        map: Arc<dyn RandomAccessFile>,
        body: &[u8],
        file: Arc<PathBuf>,
        file_offset: u64,
        full: bool,
    ) -> Result<Block> {
        Self::in_mapping(map, body, file, file_offset, None, full)
    }

    /// A block of a fixed-layout table read in place from `map`'s mapping whose checksum and
    /// geometry (`n` records of `geometry.record` bytes, see [`BlockView::fixed`]) the caller
    /// verified before: built without reading the block, and its entries are read without the
    /// offset array (a learned seek's first memory access is then its window's records). Fails
    /// when `body` is outside the mapping or that geometry does not account for its bytes.
    pub fn mapped_fixed(
        map: Arc<dyn RandomAccessFile>,
        body: &[u8],
        file: Arc<PathBuf>,
        file_offset: u64,
        n: usize,
        geometry: FixedRecords,
    ) -> Result<Block> {
        Self::in_mapping(map, body, file, file_offset, Some((n, geometry)), true)
    }

    /// [`Block::mapped`] and [`Block::mapped_fixed`]: the layout is read from the block's
    /// header and offsets (`fixed` None) or taken from the table's geometry.
    fn in_mapping(
        map: Arc<dyn RandomAccessFile>,
        body: &[u8],
        file: Arc<PathBuf>,
        file_offset: u64,
        fixed: Option<(usize, FixedRecords)>,
        full: bool,
    ) -> Result<Block> {
        let bad = |d: String| Error::corruption(file.as_path(), file_offset, d);
        let inside = map.mapped().is_some_and(|m| {
            let (a, b) = (m.as_ptr() as usize, body.as_ptr() as usize);
            b >= a && b + body.len() <= a + m.len()
        });
        if !inside {
            return Err(bad("block is not inside the file's mapping".into()));
        }
        let (n, offsets_start, fixed) = match fixed {
            None => {
                let (n, offsets_start) = check_layout(body, full).map_err(bad)?;
                (n, offsets_start, None)
            }
            Some((n, geometry)) => {
                let fits = geometry.header.checked_add(geometry.key_len) <= Some(geometry.record)
                    && geometry.key_len >= crate::key::TAG_BYTES;
                let Some(v) = BlockView::fixed(body, n, geometry.record).filter(|_| fits) else {
                    return Err(bad(
                        "fixed-layout block does not have its table's geometry".into()
                    ));
                };
                (v.n, v.offsets_start, Some(geometry))
            }
        };
        let data = Bytes {
            ptr: body.as_ptr(),
            len: body.len(),
            _owner: Owner::Mapped(map),
        };
        Ok(Block {
            data,
            n,
            offsets_start,
            fixed,
            file,
            file_offset,
        })
    }

    pub fn len(&self) -> usize {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Bytes held in memory (the cache's charge).
    pub fn charge(&self) -> usize {
        self.data.len() + 64
    }

    /// The block as a borrowed view.
    pub fn view(&self) -> BlockView<'_> {
        BlockView {
            data: &self.data,
            n: self.n,
            offsets_start: self.offsets_start,
        }
    }

    /// The i-th entry as (key, value); None when the entry's bytes are malformed.
    #[inline]
    pub fn entry(&self, i: usize) -> Option<(&[u8], &[u8])> {
        match self.fixed {
            None => self.view().entry(i),
            Some(f) => self.view().fixed_entry(i, f.record, f.header, f.key_len),
        }
    }

    fn corruption(&self, i: usize) -> Error {
        Error::corruption(
            self.file.as_path(),
            self.file_offset,
            format!("malformed entry {i} in block"),
        )
    }

    /// Index of the first entry with key >= target, or `len()`.
    pub fn lower_bound(&self, target: &[u8]) -> Result<usize> {
        self.lower_bound_in(target, 0, self.n)
    }

    /// Index of the first entry in `[lo, hi)` with key >= target, or `hi` (clamped to `len()`):
    /// the last-mile search of a learned index, which knows the answer lies in the window.
    pub fn lower_bound_in(&self, target: &[u8], lo: usize, hi: usize) -> Result<usize> {
        self.view()
            .lower_bound_in(target, lo, hi)
            .map_err(|i| self.corruption(i))
    }
}

/// A cursor over one block.
pub struct BlockIter {
    block: Arc<Block>,
    idx: usize,
    key: (usize, usize),
    value: (usize, usize),
    error: Option<Error>,
}

impl BlockIter {
    pub fn new(block: Arc<Block>) -> Self {
        let n = block.n;
        BlockIter {
            block,
            idx: n,
            key: (0, 0),
            value: (0, 0),
            error: None,
        }
    }

    fn load(&mut self, i: usize) {
        self.idx = i;
        if i >= self.block.n {
            self.idx = self.block.n;
            return;
        }
        let base = self.block.data.as_ptr() as usize;
        match self.block.entry(i) {
            Some((k, v)) => {
                self.key = (k.as_ptr() as usize - base, k.len());
                self.value = (v.as_ptr() as usize - base, v.len());
            }
            None => {
                self.error = Some(self.block.corruption(i));
                self.idx = self.block.n;
            }
        }
    }

    /// Position (entry index) of the cursor.
    pub fn position(&self) -> usize {
        self.idx
    }

    pub fn seek_to_position(&mut self, i: usize) {
        self.load(i);
    }
    /// The block under the cursor.
    pub fn block(&self) -> &Block {
        &self.block
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.idx < self.block.n && self.error.is_none()
    }
    fn seek_to_first(&mut self) {
        self.load(0);
    }
    fn seek_to_last(&mut self) {
        if self.block.n == 0 {
            self.idx = 0;
        } else {
            self.load(self.block.n - 1);
        }
    }
    fn seek(&mut self, target: &[u8]) {
        match self.block.lower_bound(target) {
            Ok(i) => self.load(i),
            Err(e) => {
                self.error = Some(e);
                self.idx = self.block.n;
            }
        }
    }
    fn next(&mut self) {
        if self.idx < self.block.n {
            self.load(self.idx + 1);
        }
    }
    fn prev(&mut self) {
        if self.idx == 0 || self.idx >= self.block.n {
            self.idx = self.block.n;
        } else {
            self.load(self.idx - 1);
        }
    }
    fn key(&self) -> &[u8] {
        &self.block.data[self.key.0..self.key.0 + self.key.1]
    }
    fn value(&self) -> &[u8] {
        &self.block.data[self.value.0..self.value.0 + self.value.1]
    }
    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    fn block_of(keys: &[&str]) -> Arc<Block> {
        let mut b = BlockBuilder::default();
        for (i, k) in keys.iter().enumerate() {
            b.add(
                &make_internal_key(k.as_bytes(), 1, ValueKind::Value),
                format!("v{i}").as_bytes(),
            );
        }
        Arc::new(Block::new(b.finish(), Arc::new(PathBuf::from("t")), 0).unwrap())
    }

    #[test]
    fn seek_finds_first_key_at_or_after_target() {
        let blk = block_of(&["b", "d", "f"]);
        let mut it = BlockIter::new(blk);
        it.seek(&make_internal_key(b"c", 5, ValueKind::Value));
        assert_eq!(it.value(), b"v1");
        it.seek(&make_internal_key(b"g", 5, ValueKind::Value));
        assert!(!it.valid());
        it.seek_to_last();
        it.prev();
        assert_eq!(it.value(), b"v1");
    }

    #[test]
    fn worked_example_of_docs_formats_sstable_md() {
        let mut b = BlockBuilder::default();
        b.add(&make_internal_key(b"a", 1, ValueKind::Value), b"1");
        let expect = [
            9, 1, b'a', 1, 1, 0, 0, 0, 0, 0, 0, b'1', 0, 0, 0, 0, 1, 0, 0, 0,
        ];
        assert_eq!(b.finish(), expect);
    }

    #[test]
    fn fixed_view_needs_the_exact_geometry() {
        let mut b = BlockBuilder::default();
        for k in ["a", "b", "c"] {
            b.add(&make_internal_key(k.as_bytes(), 1, ValueKind::Value), b"vv");
        }
        let data = b.finish();
        let record = (data.len() - 4) / 3 - 4;
        let read = BlockView::new(&data, true).unwrap();
        assert!(read.is_fixed(3, record));
        let v = BlockView::fixed(&data, 3, record).unwrap();
        assert_eq!(v.entry(2), read.entry(2));
        assert!(BlockView::fixed(&data, 2, record).is_none());
        assert!(BlockView::fixed(&data, 3, record + 1).is_none());
        assert!(BlockView::fixed(&data, usize::MAX, record).is_none());
        assert!(!read.is_fixed(2, record));
    }

    #[test]
    fn entry_by_position_is_direct() {
        let blk = block_of(&["a", "b", "c"]);
        assert_eq!(blk.entry(2).unwrap().1, b"v2");
        assert!(blk.entry(3).is_none());
    }

    #[test]
    fn garbage_count_is_corruption_not_panic() {
        let data = vec![0xff, 0xff, 0xff, 0x7f];
        assert!(Block::new(data, Arc::new(PathBuf::from("t")), 9).is_err());
        let mut b = BlockBuilder::default();
        b.add(&make_internal_key(b"a", 1, ValueKind::Value), b"v");
        let mut data = b.finish();
        data[0] = 0xff; // key length varint now runs past the entry
        let blk = Block::new(data, Arc::new(PathBuf::from("t")), 0).unwrap();
        let mut it = BlockIter::new(Arc::new(blk));
        it.seek_to_first();
        assert!(!it.valid());
        assert!(it.status().is_err());
    }
}
