//! Reads a table: footer, index and filter are loaded at open and pinned; data blocks go through
//! the shared block cache. Thread safety: a `Table` is shared by all readers (`Arc<Table>`).

use super::bloom::{self, Bloom};
use super::footer::{Footer, FOOTER_BYTES};
use super::source;
use crate::block::format::{
    block_checksum_ok, block_in_place, read_block, BlockHandle, BLOCK_TYPE_NONE, TRAILER_BYTES,
};
use crate::block::{Block, BlockIter, BlockView, FixedRecords};
use crate::cache::BlockCache;
use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::index::learned::{fence, FixedLayout, Learning, Sample, TableLayout, TableModel};
use crate::iter::InternalIterator;
use crate::key::{self, ValueKind};
use crate::memtable::rangedel::RangeTombstone;
use crate::memtable::Lookup;
use crate::util::coding::{put_varint64, Reader};
use crate::util::steps::{self, Step};
use crate::vlog::BlobPointer;
use attune_learn::{FileStats, LearnedIndex};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Statistics stored in each table's properties block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableProperties {
    pub num_entries: u64,
    pub num_data_blocks: u64,
    pub num_deletions: u64,
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
    pub smallest_seq: u64,
    pub largest_seq: u64,
    /// Internal-key length when every key in the file has the same length, else 0.
    pub fixed_key_len: u64,
    /// Value length plus one when every value in the file has the same length, else 0.
    pub fixed_value_len_plus1: u64,
    /// Entries whose value is a value-log pointer.
    pub num_blob_entries: u64,
    /// Data blocks stored compressed.
    pub compressed_data_blocks: u64,
    /// The earliest expiry (Unix milliseconds) of the file's expiring entries; 0 when it has
    /// none.
    pub earliest_expiry: u64,
    /// Range tombstones in the range-deletion block.
    pub num_range_deletions: u64,
    /// Where the range-deletion block is (size 0: none).
    pub range_del_block: BlockHandle,
}

/// The newest properties version; a file without expiring entries or range deletions is
/// written as version 2, which readers that predate expiries also read, one with expiries but
/// no range deletions as version 3.
const PROPERTIES_VERSION: u64 = 4;

impl TableProperties {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        let version = if self.num_range_deletions > 0 {
            PROPERTIES_VERSION
        } else if self.earliest_expiry == 0 {
            2
        } else {
            3
        };
        for x in [
            version,
            self.num_entries,
            self.num_data_blocks,
            self.num_deletions,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.smallest_seq,
            self.largest_seq,
            self.fixed_key_len,
            self.fixed_value_len_plus1,
            self.num_blob_entries,
            self.compressed_data_blocks,
        ] {
            put_varint64(&mut v, x);
        }
        if version >= 3 {
            put_varint64(&mut v, self.earliest_expiry);
        }
        if version >= 4 {
            put_varint64(&mut v, self.num_range_deletions);
            put_varint64(&mut v, self.range_del_block.offset);
            put_varint64(&mut v, self.range_del_block.size);
        }
        v
    }
    fn decode(b: &[u8]) -> Option<TableProperties> {
        let mut r = Reader::new(b);
        let version = r.varint64()?;
        if !(1..=PROPERTIES_VERSION).contains(&version) {
            return None;
        }
        let mut p = TableProperties {
            num_entries: r.varint64()?,
            num_data_blocks: r.varint64()?,
            num_deletions: r.varint64()?,
            raw_key_bytes: r.varint64()?,
            raw_value_bytes: r.varint64()?,
            smallest_seq: r.varint64()?,
            largest_seq: r.varint64()?,
            fixed_key_len: r.varint64()?,
            ..Default::default()
        };
        if version >= 2 {
            p.fixed_value_len_plus1 = r.varint64()?;
            p.num_blob_entries = r.varint64()?;
            p.compressed_data_blocks = r.varint64()?;
        }
        if version >= 3 {
            p.earliest_expiry = r.varint64()?;
        }
        if version >= 4 {
            p.num_range_deletions = r.varint64()?;
            p.range_del_block = BlockHandle {
                offset: r.varint64()?,
                size: r.varint64()?,
            };
        }
        Some(p)
    }

    /// Whether every record has the same size and sits uncompressed, so that a record's byte
    /// offset inside its block follows from its position (what a learned index needs).
    pub fn fixed_layout(&self) -> bool {
        self.num_entries > 0
            && self.fixed_key_len > 0
            && self.fixed_value_len_plus1 > 0
            && self.compressed_data_blocks == 0
    }
}

/// An open table file.
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: Arc<PathBuf>,
    number: u64,
    index: Arc<Block>,
    filter: Option<Bloom>,
    props: TableProperties,
    cache: Arc<BlockCache>,
    /// Learned-index state of the engine; None when learned indexes are off.
    learning: Option<Arc<Learning>>,
    /// The table's model, once learned or loaded (never replaced: the file is immutable).
    model: OnceLock<Arc<TableModel>>,
    /// Block geometry the model paths derive from the index once (file and level models).
    layout: OnceLock<TableLayout>,
    /// The analyzer's statistics handle, once the file is registered.
    file_stats: OnceLock<Arc<FileStats>>,
    /// One bit per data block: its checksum and layout were verified in the memory mapping, so
    /// point lookups may use it in place (see [`Table::view_in_place`]).
    verified: Box<[AtomicU64]>,
    /// Point lookups may use uncompressed blocks in place (off when a memory budget makes the
    /// block cache the unit of accounting).
    in_place: bool,
    /// One bit per data block: verified in place *and* found to hold exactly the records the
    /// fixed layout says, so the model path may view it without reading its count first
    /// (see [`Table::fixed_view`]).
    fixed_verified: Box<[AtomicU64]>,
    /// The range tombstones of the range-deletion block (read at open).
    range_dels: Vec<RangeTombstone>,
}

/// Reads and checks the range-deletion block `props` names (none: empty).
fn read_range_dels(
    file: &dyn RandomAccessFile,
    props: &TableProperties,
    path: &Arc<PathBuf>,
) -> Result<Vec<RangeTombstone>> {
    let h = props.range_del_block;
    if props.num_range_deletions == 0 {
        return Ok(Vec::new());
    }
    let bad = |why: &str| Error::corruption(path.as_path(), h.offset, why.to_string());
    let block = Block::new(read_block(file, h, path)?, path.clone(), h.offset)?;
    let mut out = Vec::with_capacity(block.len());
    for i in 0..block.len() {
        let (k, v) = block
            .entry(i)
            .ok_or_else(|| bad("malformed range-deletion block"))?;
        match key::parse_internal_key(k) {
            Some(p) if p.kind == ValueKind::RangeDeletion => {
                if p.user_key >= v {
                    return Err(bad("range deletion whose begin is not below its end"));
                }
                out.push(RangeTombstone {
                    begin: p.user_key.to_vec(),
                    end: v.to_vec(),
                    seq: p.sequence,
                });
            }
            _ => return Err(bad("malformed key in the range-deletion block")),
        }
    }
    if out.len() as u64 != props.num_range_deletions {
        return Err(bad(
            "range-deletion block holds fewer tombstones than the properties count",
        ));
    }
    Ok(out)
}

fn decode_index_value(v: &[u8]) -> Option<(BlockHandle, u64)> {
    let mut r = Reader::new(v);
    let h = BlockHandle::decode_from(&mut r)?;
    Some((h, r.varint64()?))
}

impl Table {
    /// Opens the table stored in `file` (file number `number`).
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        number: u64,
        cache: Arc<BlockCache>,
    ) -> Result<Table> {
        let size = file.size();
        if size < FOOTER_BYTES as u64 {
            return Err(Error::corruption(
                &path,
                0,
                format!("file of {size} bytes is too short for a table"),
            ));
        }
        let mut fbuf = vec![0u8; FOOTER_BYTES];
        let foff = size - FOOTER_BYTES as u64;
        file.read_exact_at(&mut fbuf, foff)?;
        let footer = Footer::decode(&fbuf, &path, foff)?;
        let path = Arc::new(path);
        let index_data = read_block(file.as_ref(), footer.index, &path)?;
        let index = Arc::new(Block::new(index_data, path.clone(), footer.index.offset)?);
        let props_data = read_block(file.as_ref(), footer.properties, &path)?;
        let props = TableProperties::decode(&props_data).ok_or_else(|| {
            Error::corruption(
                path.as_path(),
                footer.properties.offset,
                "malformed properties block",
            )
        })?;
        let filter = if footer.filter.size > 0 {
            Some(Bloom::new(read_block(file.as_ref(), footer.filter, &path)?))
        } else {
            None
        };
        let range_dels = read_range_dels(file.as_ref(), &props, &path)?;
        Ok(Table {
            range_dels,
            file,
            path,
            number,
            filter,
            props,
            cache,
            learning: None,
            model: OnceLock::new(),
            layout: OnceLock::new(),
            file_stats: OnceLock::new(),
            in_place: true,
            verified: (0..index.len().div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            fixed_verified: (0..index.len().div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            index,
        })
    }

    /// The table's range tombstones (sorted by begin key, then newest first).
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.range_dels
    }

    /// Attaches the engine's learned-index state (before the table is shared).
    pub fn with_learning(mut self, learning: Option<Arc<Learning>>) -> Self {
        self.learning = learning;
        self
    }

    /// Whether point lookups may use uncompressed blocks in place in the file's memory mapping
    /// (default true; they still need the file to be mapped).
    pub fn with_in_place_reads(mut self, on: bool) -> Self {
        self.in_place = on;
        self
    }

    /// Attaches the analyzer's statistics handle (first call wins).
    pub fn attach_stats(&self, fs: Arc<FileStats>) {
        let _ = self.file_stats.set(fs);
    }

    /// The table's model, if it has one.
    pub fn model(&self) -> Option<&Arc<TableModel>> {
        self.model.get()
    }

    /// Installs a model for this table after checking that it covers exactly the table's
    /// records. Returns false if the table already had one.
    pub fn install_model(&self, index: LearnedIndex) -> Result<bool> {
        if index.model().len() != self.props.num_entries {
            return Err(Error::corruption(
                self.path.as_path(),
                0,
                format!(
                    "learned model covers {} records, the table has {}",
                    index.model().len(),
                    self.props.num_entries
                ),
            ));
        }
        let layout = self.layout()?.clone();
        Ok(self
            .model
            .set(Arc::new(TableModel { index, layout }))
            .is_ok())
    }

    /// The table's block geometry (computed from the index block on first use).
    fn layout(&self) -> Result<&TableLayout> {
        if let Some(l) = self.layout.get() {
            return Ok(l);
        }
        let per_block = self.uniform_block_records()?;
        let fixed = match per_block {
            Some(k) => self.fixed_geometry(k)?,
            None => None,
        };
        Ok(self.layout.get_or_init(|| TableLayout { per_block, fixed }))
    }

    /// The byte geometry of a fixed-layout table with `per_block` records per block, if its
    /// index confirms it (every block equally spaced and sized, records of one size).
    fn fixed_geometry(&self, per_block: u64) -> Result<Option<FixedLayout>> {
        let p = &self.props;
        if !p.fixed_layout() || p.num_entries == 0 {
            return Ok(None);
        }
        let key_len = usize::try_from(p.fixed_key_len).unwrap_or(usize::MAX);
        let value_len = usize::try_from(p.fixed_value_len_plus1 - 1).unwrap_or(usize::MAX);
        let mut hdr = Vec::new();
        put_varint64(&mut hdr, p.fixed_key_len);
        put_varint64(&mut hdr, p.fixed_value_len_plus1 - 1);
        let Some(record_size) = key_len
            .checked_add(value_len)
            .and_then(|x| x.checked_add(hdr.len()))
        else {
            return Ok(None);
        };
        let blocks = self.index.len();
        let (h0, _) = self.index_entry(0)?;
        let (hl, _) = self.index_entry(blocks - 1)?;
        let stride = if blocks > 1 {
            self.index_entry(1)?.0.offset.wrapping_sub(h0.offset)
        } else {
            h0.size + TRAILER_BYTES as u64
        };
        // Contents of a full block: the records, their offset array and the count.
        let full = per_block
            .checked_mul(record_size as u64 + 4)
            .and_then(|x| x.checked_add(4));
        if blocks > 1 && full != Some(h0.size) {
            return Ok(None);
        }
        let mut fences = Vec::with_capacity(blocks);
        for i in 0..blocks {
            let (h, _) = self.index_entry(i)?;
            let expect = h0.offset + i as u64 * stride;
            if h.offset != expect || (i + 1 < blocks && h.size != h0.size) {
                return Ok(None);
            }
            let k = self.index.entry(i).map(|(k, _)| k).ok_or_else(|| {
                Error::corruption(self.path.as_path(), 0, format!("malformed index entry {i}"))
            })?;
            fences.push(fence(key::user_key(k)));
        }
        Ok(Some(FixedLayout {
            first_offset: h0.offset,
            block_stride: stride,
            block_size: h0.size,
            last_block_size: hl.size,
            record_size,
            header: hdr.len(),
            key_len,
            fences,
        }))
    }

    /// Records per block when every block starts at a multiple of the first block's count.
    fn uniform_block_records(&self) -> Result<Option<u64>> {
        let blocks = self.index.len();
        if blocks <= 1 {
            return Ok(Some(self.props.num_entries.max(1)));
        }
        let k = self.index_entry(1)?.1;
        if k == 0 {
            return Ok(None);
        }
        for i in 2..blocks {
            if self.index_entry(i)?.1 != i as u64 * k {
                return Ok(None);
            }
        }
        Ok(Some(k))
    }

    pub fn properties(&self) -> &TableProperties {
        &self.props
    }
    pub fn number(&self) -> u64 {
        self.number
    }
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
    /// (the file's bytes, how many of them are in the OS page cache), asked without reading
    /// them; `None` when the file cannot tell. A training pass reads every data block, so the
    /// bytes not resident are what it would read from the device.
    pub fn residency(&self) -> Option<(u64, u64)> {
        let size = self.file.size();
        self.file
            .resident_bytes(0, size)
            .map(|r| (size, r.min(size)))
    }
    /// Bytes of pinned index and filter memory.
    pub fn pinned_bytes(&self) -> usize {
        self.index.charge() + self.filter.as_ref().map_or(0, |f| f.bytes())
    }

    fn index_entry(&self, i: usize) -> Result<(BlockHandle, u64)> {
        self.index
            .entry(i)
            .and_then(|(_, v)| decode_index_value(v))
            .ok_or_else(|| {
                Error::corruption(self.path.as_path(), 0, format!("malformed index entry {i}"))
            })
    }

    /// Reads a data block through the block source (cache, compressed tier, device).
    pub fn block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        let file = self.file.as_ref();
        source::read_block(
            &self.cache,
            file,
            &self.path,
            self.number,
            handle,
            fill_cache,
        )
    }

    /// Data block `bi` (handle `h`) for an iterator: in place from the memory mapping when the
    /// table is mapped and the block is stored uncompressed (no copy, no cache insert; the
    /// mapping stays alive as long as the block), else through the block source as
    /// [`Table::block`]. The checksum and layout are verified the first time a block is used
    /// in place and remembered in `verified`, shared with point lookups.
    pub fn block_for_iter(
        &self,
        bi: usize,
        h: BlockHandle,
        fill_cache: bool,
    ) -> Result<Arc<Block>> {
        let Some((body, known)) = self.body_in_place(bi, h)? else {
            return self.block(h, fill_cache);
        };
        let b = Block::mapped(self.file.clone(), body, self.path.clone(), h.offset, !known)?;
        if !known {
            self.mark_verified(bi);
        }
        Ok(Arc::new(b))
    }

    /// The stored body of data block `bi` (handle `h`) inside the mapping, when reads go in
    /// place and the block is stored uncompressed (None otherwise), and whether it was verified
    /// before. Its checksum is checked here the first time; the caller checks its layout and
    /// then calls [`Table::mark_verified`].
    fn body_in_place(&self, bi: usize, h: BlockHandle) -> Result<Option<(&[u8], bool)>> {
        let Some(map) = self.file.mapped().filter(|_| self.in_place) else {
            return Ok(None);
        };
        let bad = |d: String| Error::corruption(self.path.as_path(), h.offset, d);
        let Some((body, kind, stored)) = block_in_place(map, h) else {
            return Err(bad(format!(
                "block handle (size {}) points past the file",
                h.size
            )));
        };
        if kind != BLOCK_TYPE_NONE {
            return Ok(None);
        }
        let bit = 1u64 << (bi % 64);
        let known = self
            .verified
            .get(bi / 64)
            .is_some_and(|w| w.load(Ordering::Acquire) & bit != 0);
        if !known && !block_checksum_ok(body, kind, stored) {
            return Err(bad("block checksum mismatch".into()));
        }
        Ok(Some((body, known)))
    }

    /// Remembers that data block `bi` passed its checksum and layout checks.
    fn mark_verified(&self, bi: usize) {
        if let Some(w) = self.verified.get(bi / 64) {
            w.fetch_or(1u64 << (bi % 64), Ordering::Release);
        }
    }

    /// The Bloom filter's answer for user key `uk` (true without a filter). Starts a lookup's
    /// time in this table for the step timing.
    #[inline]
    fn may_contain(&self, uk: &[u8]) -> bool {
        steps::mark(Step::FindFiles);
        let Some(f) = &self.filter else {
            return true;
        };
        let maybe = f.may_contain(bloom::bloom_hash(uk));
        steps::mark(Step::Filter);
        maybe
    }

    /// Point lookup of the newest entry of `lookup`'s user key at or below its sequence.
    pub fn get(&self, lookup: &[u8]) -> Result<Lookup> {
        let uk = key::user_key(lookup);
        if !self.may_contain(uk) {
            return Ok(Lookup::NotFound);
        }
        let Some(learning) = &self.learning else {
            return self.get_by_index(lookup, uk);
        };
        let model = self.model.get();
        let sample = learning.count(model.is_some());
        let t0 = (sample != Sample::Untimed).then(Instant::now);
        let r = match model.filter(|_| sample != Sample::Control) {
            Some(m) => self.get_by_model(m, lookup, uk),
            None => self.get_by_index(lookup, uk),
        };
        if let (Some(t0), Some(fs)) = (t0, self.file_stats.get()) {
            let found = matches!(&r, Ok(l) if *l != Lookup::NotFound);
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            Learning::record_timed(fs, found, sample, model.is_some(), ns);
        }
        r
    }

    /// The baseline path: binary search of the index block, then of the data block.
    fn get_by_index(&self, lookup: &[u8], uk: &[u8]) -> Result<Lookup> {
        let bi = self.index.lower_bound(lookup)?;
        if bi >= self.index.len() {
            return Ok(Lookup::NotFound);
        }
        let (h, _) = self.index_entry(bi)?;
        steps::mark(Step::Index);
        let r = self.with_block(bi, h, |blk| {
            let i = blk
                .lower_bound_in(lookup, 0, blk.len())
                .map_err(|i| self.malformed(h, i))?;
            self.lookup_result(blk, i, uk, h.offset)
        });
        steps::mark(Step::Block);
        r
    }

    /// The model path (Bourbon's Fig. 2.6b): the model gives a window of positions that holds
    /// the first entry `>= lookup`; only the block(s) under the window are read and only the
    /// window is searched. The index block is consulted for a block's handle, never searched.
    fn get_by_model(&self, m: &TableModel, lookup: &[u8], uk: &[u8]) -> Result<Lookup> {
        let w = m.index.predict(uk);
        steps::mark(Step::Index);
        let r = self.search_window(
            m.layout.per_block,
            m.layout.fixed.as_ref(),
            lookup,
            uk,
            w.lo,
            w.hi,
        );
        steps::mark(Step::Block);
        r
    }

    /// Point lookup when a level model already gave the window `[lo, hi)` of this table's
    /// record ordinals that holds `lookup`'s lower bound (Bourbon's level learning): the Bloom
    /// filter, then only the window is searched, as on the file-model path.
    pub fn get_in_window(&self, lookup: &[u8], lo: u64, hi: u64) -> Result<Lookup> {
        let uk = key::user_key(lookup);
        if !self.may_contain(uk) {
            return Ok(Lookup::NotFound);
        }
        if let Some(l) = &self.learning {
            l.count_served_by_model();
        }
        let TableLayout { per_block, fixed } = self.layout()?;
        let r = self.search_window(*per_block, fixed.as_ref(), lookup, uk, lo, hi);
        steps::mark(Step::Block);
        r
    }

    /// Searches the record ordinals `[lo, hi)` (clamped to the table) for the first entry
    /// `>= lookup` and reads what it says about `uk`.
    fn search_window(
        &self,
        per_block: Option<u64>,
        fixed: Option<&FixedLayout>,
        lookup: &[u8],
        uk: &[u8],
        lo: u64,
        hi: u64,
    ) -> Result<Lookup> {
        let n = self.props.num_entries;
        let (mut pos, hi) = (lo.min(n), hi.min(n));
        if let (Some(f), Some(k)) = (fixed, per_block) {
            if let Some(r) = self.get_fixed(f, k, pos, hi, lookup, uk)? {
                return Ok(r);
            }
        }
        if pos < hi {
            pos = self.skip_blocks_below(per_block, lookup, pos, hi)?;
        }
        while pos < hi {
            let (bi, first) = self.block_of(per_block, pos)?;
            let (h, _) = self.index_entry(bi)?;
            let to = usize::try_from(hi - first).unwrap_or(usize::MAX);
            let from = usize::try_from(pos - first).unwrap_or(usize::MAX);
            let step = self.with_block(bi, h, |blk| {
                let i = blk
                    .lower_bound_in(lookup, from, to)
                    .map_err(|i| self.malformed(h, i))?;
                if i < to.min(blk.len()) {
                    return self.lookup_result(blk, i, uk, h.offset).map(Ok);
                }
                Ok(Err(blk.len() as u64))
            })?;
            let next = match step {
                Ok(found) => return Ok(found),
                Err(len) => first + len,
            };
            if next <= pos {
                return Err(Error::corruption(
                    self.path.as_path(),
                    h.offset,
                    format!("block {bi} holds no record at ordinal {pos}"),
                ));
            }
            pos = next;
        }
        Ok(Lookup::NotFound)
    }

    /// The model path over a fixed-layout table: block handles and record offsets are
    /// arithmetic, so the lookup touches only the keys of the window (LoadChunk), in the one
    /// block the pinned index names when the window crosses blocks. Returns None
    /// when the window's block is not available in place (then the general path runs).
    fn get_fixed(
        &self,
        f: &FixedLayout,
        per_block: u64,
        mut pos: u64,
        hi: u64,
        lookup: &[u8],
        uk: &[u8],
    ) -> Result<Option<Lookup>> {
        let last = self.index.len() as u64 - 1;
        // A window over several blocks: the blocks' fences skip those that hold only smaller
        // keys, so the search starts in the block that holds the lower bound (or, when a fence
        // ties with the lookup's, the first candidate; the loop then moves on if needed). Each
        // block more is another page of the mapping (a TLB miss, and a page fault in a process
        // that has not touched it yet); with 1 KiB records a window of 2 x 8 records spans four
        // or five blocks.
        if pos < hi {
            let want = fence(uk);
            let (mut b, b_last) = (
                (pos / per_block).min(last),
                ((hi - 1) / per_block).min(last),
            );
            while b < b_last && f.fences.get(b as usize).is_some_and(|&x| x < want) {
                b += 1;
            }
            pos = pos.max(b * per_block);
        }
        while pos < hi {
            let bi = (pos / per_block).min(last);
            let first = bi * per_block;
            let (h, records) = self.fixed_handle(f, per_block, bi);
            let Some(v) = self.fixed_view(bi as usize, h, records, f.record_size)? else {
                return Ok(None);
            };
            let from = (pos - first) as usize;
            let to = ((hi - first) as usize).min(v.len());
            v.prefetch_records(from, to, f.record_size, f.header + f.key_len);
            let (mut lo, mut up) = (from.min(to), to);
            while lo < up {
                let mid = lo + (up - lo) / 2;
                let (k, _) = v
                    .fixed_entry(mid, f.record_size, f.header, f.key_len)
                    .ok_or_else(|| self.malformed(h, mid))?;
                if key::compare_internal(k, lookup) == std::cmp::Ordering::Less {
                    lo = mid + 1;
                } else {
                    up = mid;
                }
            }
            if lo < to {
                let e = v
                    .fixed_entry(lo, f.record_size, f.header, f.key_len)
                    .ok_or_else(|| self.malformed(h, lo))?;
                return self.entry_result(Some(e), uk, h.offset).map(Some);
            }
            if v.is_empty() {
                return Err(self.malformed(h, 0));
            }
            pos = first + v.len() as u64;
        }
        Ok(Some(Lookup::NotFound))
    }

    fn malformed(&self, h: BlockHandle, i: usize) -> Error {
        Error::corruption(
            self.path.as_path(),
            h.offset,
            format!("malformed entry {i} in block"),
        )
    }

    /// Runs `f` on data block `bi` (handle `h`): in place from the memory mapping when possible
    /// (no copy, no cache), else through the block cache.
    fn with_block<R>(
        &self,
        bi: usize,
        h: BlockHandle,
        f: impl FnOnce(&BlockView<'_>) -> Result<R>,
    ) -> Result<R> {
        if let Some(v) = self.view_in_place(bi, h)? {
            return f(&v);
        }
        let blk = self.block(h, true)?;
        f(&blk.view())
    }

    /// Data block `bi` used in place, when the table is memory-mapped and the block is stored
    /// uncompressed (LevelDB does the same with mmap reads; the block cache then only holds
    /// blocks that had to be decompressed). The block's checksum and layout are verified the
    /// first time it is used this way and remembered in `verified`: the file is immutable, so a
    /// verified block stays verified, exactly like a block that was checked once on its way into
    /// the cache.
    fn view_in_place(&self, bi: usize, h: BlockHandle) -> Result<Option<BlockView<'_>>> {
        let Some((body, known)) = self.body_in_place(bi, h)? else {
            return Ok(None);
        };
        let bad = |d: String| Error::corruption(self.path.as_path(), h.offset, d);
        let v = BlockView::new(body, !known).map_err(bad)?;
        if !known {
            self.mark_verified(bi);
        }
        Ok(Some(v))
    }

    /// When the window `[pos, hi)` spans several data blocks, consults the (pinned) index block
    /// instead of reading them: a block whose index key (its last key) is below `lookup` holds
    /// only smaller entries, so the window's search can start at the first block whose key is
    /// not (Fig. 2.6b: the index block is used only when the window crosses a block). Returns
    /// the new start of the search, never past the block that holds the lower bound.
    fn skip_blocks_below(
        &self,
        per_block: Option<u64>,
        lookup: &[u8],
        pos: u64,
        hi: u64,
    ) -> Result<u64> {
        let (first_block, _) = self.block_of(per_block, pos)?;
        let (last_block, _) = self.block_of(per_block, hi - 1)?;
        let (mut lo, mut up) = (first_block, last_block);
        while lo < up {
            let mid = lo + (up - lo) / 2;
            let (k, _) = self.index.entry(mid).ok_or_else(|| {
                Error::corruption(
                    self.path.as_path(),
                    0,
                    format!("malformed index entry {mid}"),
                )
            })?;
            if key::compare_internal(k, lookup) == std::cmp::Ordering::Less {
                lo = mid + 1;
            } else {
                up = mid;
            }
        }
        if lo == first_block {
            return Ok(pos);
        }
        Ok(pos.max(self.index_entry(lo)?.1))
    }

    /// Block `bi` of a fixed-layout table, which the index says holds `records` records of
    /// `record` bytes. Once the block has been verified in place and found to match, later views
    /// are built from that geometry without reading the block: the lookup's first memory access
    /// is then the prefetch of its window (Bourbon's LoadChunk), not the block's trailer.
    fn fixed_view(
        &self,
        bi: usize,
        h: BlockHandle,
        records: usize,
        record: usize,
    ) -> Result<Option<BlockView<'_>>> {
        let (word, bit) = (bi / 64, 1u64 << (bi % 64));
        let slot = self.fixed_verified.get(word);
        if slot.is_some_and(|w| w.load(Ordering::Acquire) & bit != 0) {
            let body = self.file.mapped().and_then(|map| {
                let start = usize::try_from(h.offset).ok()?;
                map.get(start..start.checked_add(usize::try_from(h.size).ok()?)?)
            });
            if let Some(v) = body.and_then(|b| BlockView::fixed(b, records, record)) {
                return Ok(Some(v));
            }
        }
        let Some(v) = self.view_in_place(bi, h)? else {
            return Ok(None);
        };
        if !v.is_fixed(records, record) {
            return Err(Error::corruption(
                self.path.as_path(),
                h.offset,
                format!(
                    "fixed-layout block {bi} holds {} records, its index says {records}",
                    v.len()
                ),
            ));
        }
        if let Some(w) = slot {
            w.fetch_or(bit, Ordering::Release);
        }
        Ok(Some(v))
    }

    /// Handle and record count of data block `bi` of a fixed-layout table (arithmetic: no
    /// index entry is read).
    fn fixed_handle(&self, f: &FixedLayout, per_block: u64, bi: u64) -> (BlockHandle, usize) {
        let last = self.index.len() as u64 - 1;
        let h = BlockHandle {
            offset: f.first_offset + bi * f.block_stride,
            size: if bi == last {
                f.last_block_size
            } else {
                f.block_size
            },
        };
        let records = if bi == last {
            self.props.num_entries.saturating_sub(bi * per_block)
        } else {
            per_block
        };
        (h, usize::try_from(records).unwrap_or(usize::MAX))
    }

    /// Data block `h` of a fixed-layout table as an owned block for an iterator, built from the
    /// table's geometry without reading it (see [`Block::mapped_fixed`]). Only for a block that
    /// [`Table::fixed_view`] returned: that verified it in place.
    fn fixed_block(&self, h: BlockHandle, records: usize, f: &FixedLayout) -> Result<Arc<Block>> {
        let body = self.file.mapped().and_then(|map| {
            let start = usize::try_from(h.offset).ok()?;
            map.get(start..start.checked_add(usize::try_from(h.size).ok()?)?)
        });
        let Some(body) = body else {
            return Err(Error::corruption(
                self.path.as_path(),
                h.offset,
                "fixed-layout block is not inside the file's mapping",
            ));
        };
        let geometry = FixedRecords {
            record: f.record_size,
            header: f.header,
            key_len: f.key_len,
        };
        let b = Block::mapped_fixed(
            self.file.clone(),
            body,
            self.path.clone(),
            h.offset,
            records,
            geometry,
        )?;
        Ok(Arc::new(b))
    }

    /// The block holding ordinal `pos` and the ordinal of its first record.
    fn block_of(&self, per_block: Option<u64>, pos: u64) -> Result<(usize, u64)> {
        if let Some(k) = per_block {
            let bi = usize::try_from(pos / k)
                .unwrap_or(usize::MAX)
                .min(self.index.len().saturating_sub(1));
            return Ok((bi, bi as u64 * k));
        }
        // Index entries are in ordinal order: binary search on first ordinals.
        let (mut lo, mut hi) = (0usize, self.index.len());
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.index_entry(mid)?.1 <= pos {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let first = self.index_entry(lo)?.1;
        if first > pos {
            return Err(Error::corruption(
                self.path.as_path(),
                0,
                format!("index entry {lo} starts at ordinal {first}, past ordinal {pos}"),
            ));
        }
        Ok((lo, first))
    }

    /// What entry `i` of `blk` says about user key `uk` (`i` = the lower bound of the lookup).
    fn lookup_result(
        &self,
        blk: &BlockView<'_>,
        i: usize,
        uk: &[u8],
        block_offset: u64,
    ) -> Result<Lookup> {
        self.entry_result(blk.entry(i), uk, block_offset)
    }

    /// What an entry (the lower bound of the lookup, if any) says about user key `uk`.
    fn entry_result(
        &self,
        entry: Option<(&[u8], &[u8])>,
        uk: &[u8],
        block_offset: u64,
    ) -> Result<Lookup> {
        match entry {
            Some((k, v)) if key::user_key(k) == uk => match key::kind(k) {
                Some(ValueKind::Value) => Ok(Lookup::Found(v.to_vec())),
                Some(ValueKind::Merge) => Ok(Lookup::Merge(v.to_vec())),
                Some(ValueKind::Deletion) => Ok(Lookup::Deleted),
                Some(ValueKind::BlobIndex) => {
                    BlobPointer::decode(v).map(Lookup::Blob).ok_or_else(|| {
                        Error::corruption(
                            self.path.as_path(),
                            block_offset,
                            "malformed value pointer",
                        )
                    })
                }
                Some(kind @ (ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex)) => {
                    let bad = |why: &str| Error::corruption(self.path.as_path(), block_offset, why);
                    let (at, payload) = key::split_expiry(kind, v)
                        .ok_or_else(|| bad("entry shorter than its expiry"))?;
                    let at = at.unwrap_or(0);
                    if kind == ValueKind::ExpiringValue {
                        Ok(Lookup::FoundUntil(payload.to_vec(), at))
                    } else {
                        BlobPointer::decode(payload)
                            .map(|p| Lookup::BlobUntil(p, at))
                            .ok_or_else(|| bad("malformed value pointer"))
                    }
                }
                None | Some(ValueKind::RangeDeletion) => Err(Error::corruption(
                    self.path.as_path(),
                    block_offset,
                    "unknown entry kind",
                )),
            },
            _ => Ok(Lookup::NotFound),
        }
    }

    /// Calls `f` with every entry's internal key, in file order (for training models). A
    /// fixed-layout table mapped in place is read block by block straight from the mapping (each
    /// block verified once, as for lookups); any other table through a [`TableIter`] that does
    /// not fill the block cache.
    pub fn for_each_key(self: &Arc<Self>, mut f: impl FnMut(&[u8])) -> Result<()> {
        // Keys already passed to `f` by the in-place walk; the iterator skips them if it has to
        // take over (a block not usable in place), so every key is passed exactly once.
        let mut done = 0u64;
        let layout = self.layout()?;
        if let (Some(fx), Some(k), true) = (layout.fixed.as_ref(), layout.per_block, self.in_place)
        {
            let blocks = self.index.len() as u64;
            for bi in 0..blocks {
                let last = bi + 1 == blocks;
                let h = BlockHandle {
                    offset: fx.first_offset + bi * fx.block_stride,
                    size: if last {
                        fx.last_block_size
                    } else {
                        fx.block_size
                    },
                };
                let records = if last {
                    self.props.num_entries.saturating_sub(bi * k)
                } else {
                    k
                };
                let n = usize::try_from(records).unwrap_or(usize::MAX);
                let Some(v) = self.fixed_view(bi as usize, h, n, fx.record_size)? else {
                    break;
                };
                for i in 0..n {
                    let (key, _) = v
                        .fixed_entry(i, fx.record_size, fx.header, fx.key_len)
                        .ok_or_else(|| self.malformed(h, i))?;
                    f(key);
                }
                done += records;
                if last {
                    return Ok(());
                }
            }
        }
        let mut it = TableIter::new(self.clone(), false);
        it.seek_to_first();
        while it.valid() {
            if done > 0 {
                done -= 1;
            } else {
                f(it.key());
            }
            it.next();
        }
        it.status()
    }

    /// The entry at ordinal `pos` of the file (0-based), for position-predicting indexes.
    pub fn entry_at(&self, pos: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if pos >= self.props.num_entries {
            return Ok(None);
        }
        let (bi, first) = self.block_of(None, pos)?;
        let (h, _) = self.index_entry(bi)?;
        let within = pos - first;
        let blk = self.block(h, true)?;
        Ok(blk
            .entry(usize::try_from(within).unwrap_or(usize::MAX))
            .map(|(k, v)| (k.to_vec(), v.to_vec())))
    }

    /// Reads and checks every block; returns the number of entries seen.
    pub fn verify(&self) -> Result<u64> {
        self.verify_entries(&mut |_, _, _| Ok(()))
    }

    /// [`Table::verify`], also handing every entry (internal key, value, block offset) to
    /// `visit`, whose error stops the check.
    pub fn verify_entries(&self, visit: &mut EntryVisitor<'_>) -> Result<u64> {
        let mut n = 0u64;
        let mut last: Option<Vec<u8>> = None;
        for i in 0..self.index.len() {
            let (h, first) = self.index_entry(i)?;
            if first != n {
                return Err(Error::corruption(
                    self.path.as_path(),
                    h.offset,
                    "ordinal gap in index",
                ));
            }
            let blk = self.block(h, false)?;
            for j in 0..blk.len() {
                let (k, v) = blk.entry(j).ok_or_else(|| {
                    Error::corruption(
                        self.path.as_path(),
                        h.offset,
                        format!("malformed entry {j}"),
                    )
                })?;
                if key::parse_internal_key(k).is_none() {
                    return Err(Error::corruption(
                        self.path.as_path(),
                        h.offset,
                        "bad internal key",
                    ));
                }
                if let Some(l) = &last {
                    if key::compare_internal(l, k) != std::cmp::Ordering::Less {
                        return Err(Error::corruption(
                            self.path.as_path(),
                            h.offset,
                            "keys out of order",
                        ));
                    }
                }
                visit(k, v, h.offset)?;
                last = Some(k.to_vec());
            }
            n += blk.len() as u64;
        }
        if n != self.props.num_entries {
            return Err(Error::corruption(
                self.path.as_path(),
                0,
                format!(
                    "{n} entries found, properties say {}",
                    self.props.num_entries
                ),
            ));
        }
        Ok(n)
    }
}

/// What [`Table::verify_entries`] calls for each entry: (internal key, value, block offset).
pub type EntryVisitor<'a> = dyn FnMut(&[u8], &[u8], u64) -> Result<()> + 'a;

/// A two-level iterator: the pinned index picks blocks, a block iterator walks them.
pub struct TableIter {
    table: Arc<Table>,
    index: BlockIter,
    data: Option<BlockIter>,
    error: Option<Error>,
    fill_cache: bool,
    /// File offset up to which read-ahead was requested (forward iteration).
    readahead_to: u64,
    /// Size of the next read-ahead request.
    readahead_len: u64,
    /// Fixed read-ahead ([`TableIter::with_readahead`]); 0: the ramp-up above.
    readahead_fixed: u64,
    /// Blocks loaded since the iterator was last positioned, counting the one it settled in
    /// (saturating; 0 while positioning): see [`READAHEAD_AFTER_BLOCKS`].
    run_blocks: u8,
    /// Where the index cursor belongs when a learned seek over a fixed-layout table placed
    /// `data` without moving it (the seek then reads no index entry); applied before the
    /// index is next used, i.e. when iteration leaves that block.
    index_at: Option<usize>,
}

/// Read-ahead of a table iterator: it starts at 64 KiB when the iterator enters a region it has
/// not asked for and doubles on each further request up to 1 MiB, so a short range scan reads
/// little and a long scan or a compaction reads the file in large requests, although table
/// mappings are advised random access (see `env::posix`). It begins with the third block an
/// iterator walks after a seek ([`READAHEAD_AFTER_BLOCKS`]): a seek plus a few `next`, the
/// common case, pays no `madvise`, which cost more than the seek itself when the table was
/// cached.
const ITER_READAHEAD_MIN: u64 = 64 << 10;
/// Blocks an iterator must have walked since it was positioned (the one it settled in counts)
/// before it reads ahead: 2, so the third block asks, as RocksDB's auto read-ahead does. A
/// point-like seek whose next entry is in the neighbouring block (older versions of a key,
/// a short scan crossing a boundary) pays nothing.
const READAHEAD_AFTER_BLOCKS: u8 = 2;
const ITER_READAHEAD_MAX: u64 = 1 << 20;

impl TableIter {
    pub fn new(table: Arc<Table>, fill_cache: bool) -> Self {
        let index = BlockIter::new(table.index.clone());
        TableIter {
            table,
            index,
            data: None,
            error: None,
            fill_cache,
            readahead_to: 0,
            readahead_len: ITER_READAHEAD_MIN,
            readahead_fixed: 0,
            run_blocks: 0,
            index_at: None,
        }
    }

    /// Reads ahead in requests of exactly `bytes` at file offsets that are multiples of it,
    /// from the first block loaded, keeping one whole request ahead of the block being read
    /// (a compaction, which reads its inputs through; `Options::compaction_readahead_bytes`).
    /// 0 keeps the ramp-up of [`ITER_READAHEAD_MIN`].
    pub fn with_readahead(mut self, bytes: u64) -> Self {
        self.readahead_fixed = bytes;
        self
    }

    fn load_block(&mut self) {
        self.data = None;
        if !self.index.valid() {
            return;
        }
        match decode_index_value(self.index.value()) {
            Some((h, _)) => {
                if self.readahead_fixed > 0 {
                    self.read_ahead_fixed(h);
                } else if self.run_blocks >= READAHEAD_AFTER_BLOCKS {
                    self.read_ahead(h);
                }
                self.run_blocks = self.run_blocks.saturating_add(1);
                let bi = self.index.position();
                match self.table.block_for_iter(bi, h, self.fill_cache) {
                    Ok(b) => self.data = Some(BlockIter::new(b)),
                    Err(e) => self.error = Some(e),
                }
            }
            None => {
                self.error = Some(Error::corruption(
                    self.table.path.as_path(),
                    0,
                    "malformed index entry",
                ))
            }
        }
    }

    /// Asks for read-ahead when block `h` lies past the region already requested (see
    /// [`ITER_READAHEAD_MIN`]).
    fn read_ahead(&mut self, h: BlockHandle) {
        let end = h.offset.saturating_add(h.size);
        let sequential =
            h.offset <= self.readahead_to && h.offset + ITER_READAHEAD_MAX >= self.readahead_to;
        if !sequential {
            self.readahead_len = ITER_READAHEAD_MIN;
        }
        if end > self.readahead_to || !sequential {
            let start = if sequential {
                self.readahead_to
            } else {
                h.offset
            };
            self.table.file.prefetch(start, self.readahead_len);
            self.readahead_to = start.saturating_add(self.readahead_len).max(end);
            self.readahead_len = (self.readahead_len * 2).min(ITER_READAHEAD_MAX);
        }
    }

    /// Fixed read-ahead (see [`TableIter::with_readahead`]): requests `[k·w, (k+1)·w)` until
    /// the region asked for reaches one whole request past block `h`, restarting at the
    /// request that holds `h` when `h` lies outside that region.
    fn read_ahead_fixed(&mut self, h: BlockHandle) {
        let w = self.readahead_fixed;
        let end = h.offset.saturating_add(h.size);
        let from = self.readahead_to.saturating_sub(w.saturating_mul(2));
        if h.offset < from || end > self.readahead_to {
            self.readahead_to = h.offset / w * w;
        }
        let size = self.table.file.size();
        // Bounded: at most two requests past the block's end, and the block itself (a few
        // requests at most; 64 keeps a corrupt handle's huge size harmless).
        for _ in 0..64 {
            if self.readahead_to >= end.saturating_add(w) || self.readahead_to >= size {
                break;
            }
            self.table.file.prefetch(self.readahead_to, w);
            self.readahead_to = self.readahead_to.saturating_add(w);
        }
    }

    /// Moves to the next (or previous) block until the cursor is on an entry, the index runs
    /// out, or an error stops it.
    fn skip_empty_blocks(&mut self, forward: bool) {
        while self.error.is_none() && !self.data.as_ref().is_some_and(|d| d.valid()) {
            if let Some(Err(e)) = self.data.as_ref().map(|d| d.status()) {
                self.error = Some(e);
                break;
            }
            if let Some(bi) = self.index_at.take() {
                self.index.seek_to_position(bi);
            }
            if !self.index.valid() {
                self.data = None;
                return;
            }
            if forward {
                self.index.next();
            } else {
                self.index.prev();
            }
            self.load_block();
            if let Some(d) = &mut self.data {
                if forward {
                    d.seek_to_first();
                } else {
                    d.seek_to_last();
                }
            }
        }
    }

    fn skip_forward(&mut self) {
        self.skip_empty_blocks(true)
    }

    fn skip_backward(&mut self) {
        self.skip_empty_blocks(false)
    }
}

impl TableIter {
    /// Seek through the table's model: the window of the target's user key holds the first
    /// entry `>= target`, so only the window is searched (across a block boundary when the
    /// window spans one) and the index is positioned by block number, not searched.
    fn seek_by_model(&mut self, m: &TableModel, target: &[u8]) {
        let n = self.table.props.num_entries;
        let w = m.index.predict(key::user_key(target));
        let (lo, hi) = (w.lo.min(n), w.hi.min(n));
        if lo >= n {
            self.index.seek_to_position(self.table.index.len());
            self.data = None;
            return;
        }
        if let (Some(f), Some(k)) = (m.layout.fixed.as_ref(), m.layout.per_block) {
            match self.seek_fixed(f, k, lo, hi, target) {
                Ok(true) => return self.skip_forward(),
                Ok(false) => {}
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
        }
        let (bi, mut first) = match self.table.block_of(m.layout.per_block, lo) {
            Ok(x) => x,
            Err(e) => {
                self.error = Some(e);
                return;
            }
        };
        self.index.seek_to_position(bi);
        self.load_block();
        let mut from = usize::try_from(lo - first).unwrap_or(usize::MAX);
        while let Some(d) = &mut self.data {
            let len = d.block().len();
            let to = usize::try_from(hi - first).unwrap_or(usize::MAX);
            match d.block().lower_bound_in(target, from, to) {
                Ok(i) => d.seek_to_position(i),
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
            // Found inside this block, or the window ends here (then the answer is the first
            // entry after it, which skip_forward reaches): done.
            if d.valid() || hi <= first + len as u64 || len == 0 {
                break;
            }
            // Every windowed entry of this block is smaller: go on in the next block.
            first += len as u64;
            from = 0;
            self.index.next();
            self.load_block();
        }
        self.skip_forward();
    }
}

impl TableIter {
    /// The learned seek over a fixed-layout table (Bourbon's LoadChunk, as on the point-lookup
    /// path): block handles and record offsets are arithmetic, the window's records are
    /// prefetched together and searched without the offset array, and neither the index entry
    /// nor the block's trailer is read (the index cursor is placed lazily, `index_at`).
    /// `Ok(false)` when a block under the window is not available in place (then the general
    /// model seek runs). The window `[lo, hi)` holds the first entry `>= target` or ends
    /// before it; `lo < num_entries`.
    fn seek_fixed(
        &mut self,
        f: &FixedLayout,
        per_block: u64,
        lo: u64,
        hi: u64,
        target: &[u8],
    ) -> Result<bool> {
        let t = self.table.clone();
        let last = t.index.len() as u64 - 1;
        let mut pos = lo;
        // The window spans at most `hi - lo` blocks (each holds at least one record).
        for _ in 0..=hi.saturating_sub(lo) {
            let bi = (pos / per_block).min(last);
            let first = bi * per_block;
            let (h, records) = t.fixed_handle(f, per_block, bi);
            let Some(v) = t.fixed_view(bi as usize, h, records, f.record_size)? else {
                return Ok(false);
            };
            if v.is_empty() || pos < first {
                return Err(t.malformed(h, 0));
            }
            let from = ((pos - first) as usize).min(v.len());
            let to = usize::try_from(hi.saturating_sub(first))
                .unwrap_or(usize::MAX)
                .clamp(from, v.len());
            v.prefetch_records(from, to, f.record_size, f.header + f.key_len);
            let (mut a, mut b) = (from, to);
            while a < b {
                let mid = a + (b - a) / 2;
                let (k, _) = v
                    .fixed_entry(mid, f.record_size, f.header, f.key_len)
                    .ok_or_else(|| t.malformed(h, mid))?;
                if key::compare_internal(k, target) == std::cmp::Ordering::Less {
                    a = mid + 1;
                } else {
                    b = mid;
                }
            }
            // Found in this block, or the window ends here (the answer is then the first
            // entry after it, which skip_forward reaches from the block's end).
            if a < to || hi <= first + v.len() as u64 || bi == last {
                let mut d = BlockIter::new(t.fixed_block(h, records, f)?);
                d.seek_to_position(a);
                self.data = Some(d);
                self.index_at = Some(bi as usize);
                return Ok(true);
            }
            pos = first + v.len() as u64;
        }
        Ok(false)
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }
    fn seek_to_first(&mut self) {
        self.error = None;
        self.index_at = None;
        self.run_blocks = 0;
        self.index.seek_to_first();
        self.load_block();
        if let Some(d) = &mut self.data {
            d.seek_to_first();
        }
        self.skip_forward();
        self.run_blocks = 1;
    }
    fn seek_to_last(&mut self) {
        self.error = None;
        self.index_at = None;
        self.run_blocks = 0;
        self.index.seek_to_last();
        self.load_block();
        if let Some(d) = &mut self.data {
            d.seek_to_last();
        }
        self.skip_backward();
    }
    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        self.index_at = None;
        // Blocks loaded while finding the target (a model's window may span two) are not a
        // scan: no read-ahead until a `next` leaves the block the seek settled in.
        self.run_blocks = 0;
        if let Some(m) = self.table.model.get().cloned() {
            self.seek_by_model(&m, target);
        } else {
            self.index.seek(target);
            if let Err(e) = self.index.status() {
                self.error = Some(e);
                return;
            }
            self.load_block();
            if let Some(d) = &mut self.data {
                d.seek(target);
            }
            self.skip_forward();
        }
        self.run_blocks = 1;
    }
    fn next(&mut self) {
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.skip_forward();
    }
    fn prev(&mut self) {
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.skip_backward();
    }
    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }
    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }
    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        self.index.status()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

    use super::*;
    use crate::env::{Env, MemEnv};
    use crate::options::Options;
    use crate::table::builder::{TableBuilder, TableBuilderOptions};
    use std::path::Path;
    use std::sync::atomic::AtomicUsize;

    /// A file that counts read-ahead hints.
    struct Counting(Arc<dyn RandomAccessFile>, Arc<AtomicUsize>);
    impl RandomAccessFile for Counting {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
            self.0.read_exact_at(buf, offset)
        }
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn prefetch(&self, _offset: u64, _len: u64) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn table(entries: u32) -> (Arc<Table>, Arc<AtomicUsize>) {
        let env = MemEnv::new();
        let path = Path::new("/t.sst");
        let mut b = TableBuilder::new(
            env.new_writable(path).unwrap(),
            TableBuilderOptions::from(&Options::default()),
        );
        for i in 0..entries {
            let k = key::make_internal_key(format!("k{i:06}").as_bytes(), 1, ValueKind::Value);
            b.add(&k, &[7u8; 100]).unwrap();
        }
        b.finish().unwrap();
        let hints = Arc::new(AtomicUsize::new(0));
        let file = Arc::new(Counting(env.open_random(path).unwrap(), hints.clone()));
        let cache = Arc::new(BlockCache::new(1 << 20));
        let t = Table::open(file, path.to_path_buf(), 1, cache).unwrap();
        (Arc::new(t), hints)
    }

    #[test]
    fn read_ahead_starts_with_the_third_block_after_a_seek() {
        let (t, hints) = table(5000);
        let mut it = TableIter::new(t, true);
        // Seeks that stay inside their block ask for nothing.
        for i in (0..5000).step_by(97) {
            let target = key::make_internal_key(format!("k{i:06}").as_bytes(), 1, ValueKind::Value);
            it.seek(&target);
            assert!(it.valid() && it.key() == target.as_slice());
        }
        assert_eq!(hints.load(Ordering::Relaxed), 0);
        // A scan across blocks reads ahead, in growing requests (a handful for ~120 blocks).
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        assert_eq!(n, 5000);
        let h = hints.load(Ordering::Relaxed);
        assert!((1..=16).contains(&h), "{h} read-ahead requests");
    }

    /// Read-ahead hints (offset, length) and the end of the furthest read.
    type Recorded = Arc<parking_lot::Mutex<(Vec<(u64, u64)>, u64)>>;

    /// A file that records read-ahead hints and the end of the furthest read.
    struct Recording(Arc<dyn RandomAccessFile>, Recorded);
    impl RandomAccessFile for Recording {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
            let mut r = self.1.lock();
            r.1 = r.1.max(offset + buf.len() as u64);
            self.0.read_exact_at(buf, offset)
        }
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn prefetch(&self, offset: u64, len: u64) {
            self.1.lock().0.push((offset, len));
        }
    }

    #[test]
    fn fixed_read_ahead_asks_for_whole_aligned_requests_one_ahead_of_the_scan() {
        // Uncompressed, so that 5,000 entries of 100 bytes span several requests.
        let env = MemEnv::new();
        let path = Path::new("/t.sst");
        let o = Options {
            compression: crate::options::Compression::None,
            ..Options::default()
        };
        let mut b = TableBuilder::new(env.new_writable(path).unwrap(), (&o).into());
        for i in 0..5000u32 {
            let k = key::make_internal_key(format!("k{i:06}").as_bytes(), 1, ValueKind::Value);
            b.add(&k, &[7u8; 100]).unwrap();
        }
        b.finish().unwrap();
        let rec = Arc::new(parking_lot::Mutex::new((Vec::new(), 0)));
        let file = Arc::new(Recording(env.open_random(path).unwrap(), rec.clone()));
        let cache = Arc::new(BlockCache::new(1 << 20));
        let t = Arc::new(Table::open(file, PathBuf::from("/t.sst"), 1, cache).unwrap());
        let size = t.file.size();
        // Reads of the open (footer, index, filter) are not the scan's.
        rec.lock().1 = 0;
        const W: u64 = 64 << 10;
        let mut it = TableIter::new(t, false).with_readahead(W);
        it.seek_to_first();
        // The first block asks for its request and the next one.
        assert_eq!(rec.lock().0, vec![(0, W), (W, W)]);
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        assert_eq!(n, 5000);
        // The file in order, each request once, exactly W long at a multiple of W, up to one
        // whole request past the last block read (or the end of the file).
        let (asked, data_end) = rec.lock().clone();
        assert!(size > 4 * W, "the table spans several requests");
        let m = (data_end + W).min(size).div_ceil(W);
        let want: Vec<(u64, u64)> = (0..m).map(|k| (k * W, W)).collect();
        assert_eq!(asked, want);
    }
}
