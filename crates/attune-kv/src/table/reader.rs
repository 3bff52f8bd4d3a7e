//! Reads a table: footer, index and filter are loaded at open and pinned; data blocks go through
//! the shared block cache. Thread safety: a `Table` is shared by all readers (`Arc<Table>`).

use super::block::{Block, BlockIter};
use super::bloom::{self, Bloom};
use super::format::{read_block, BlockHandle, Footer, FOOTER_BYTES};
use crate::cache::BlockCache;
use crate::coding::{put_varint64, Reader};
use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, ValueKind};
use crate::memtable::Lookup;
use crate::vlog::BlobPointer;
use std::path::PathBuf;
use std::sync::Arc;

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
}

const PROPERTIES_VERSION: u64 = 2;

impl TableProperties {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [
            PROPERTIES_VERSION,
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
        Ok(Table {
            file,
            path,
            number,
            index,
            filter,
            props,
            cache,
        })
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

    /// Reads a data block through the cache.
    pub fn block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        if let Some(t) = self.cache.tiers() {
            let f = self.file.as_ref();
            return t.block(&self.cache, f, &self.path, self.number, handle, fill_cache);
        }
        if let Some(b) = self.cache.get(self.number, handle.offset) {
            return Ok(b);
        }
        let data = read_block(self.file.as_ref(), handle, &self.path)?;
        let b = Arc::new(Block::new(data, self.path.clone(), handle.offset)?);
        if fill_cache {
            self.cache.insert(self.number, handle.offset, b.clone());
        }
        Ok(b)
    }

    /// Point lookup of the newest entry of `lookup`'s user key at or below its sequence.
    pub fn get(&self, lookup: &[u8]) -> Result<Lookup> {
        let uk = key::user_key(lookup);
        if let Some(f) = &self.filter {
            if !f.may_contain(bloom::bloom_hash(uk)) {
                return Ok(Lookup::NotFound);
            }
        }
        let bi = self.index.lower_bound(lookup)?;
        if bi >= self.index.len() {
            return Ok(Lookup::NotFound);
        }
        let (h, _) = self.index_entry(bi)?;
        let blk = self.block(h, true)?;
        let i = blk.lower_bound(lookup)?;
        match blk.entry(i) {
            Some((k, v)) if key::user_key(k) == uk => match key::kind(k) {
                Some(ValueKind::Value) => Ok(Lookup::Found(v.to_vec())),
                Some(ValueKind::Deletion) => Ok(Lookup::Deleted),
                Some(ValueKind::BlobIndex) => {
                    BlobPointer::decode(v).map(Lookup::Blob).ok_or_else(|| {
                        Error::corruption(self.path.as_path(), h.offset, "malformed value pointer")
                    })
                }
                None => Err(Error::corruption(
                    self.path.as_path(),
                    h.offset,
                    "unknown entry kind",
                )),
            },
            _ => Ok(Lookup::NotFound),
        }
    }

    /// The entry at ordinal `pos` of the file (0-based), for position-predicting indexes.
    pub fn entry_at(&self, pos: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if pos >= self.props.num_entries {
            return Ok(None);
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
        let (h, first) = self.index_entry(lo)?;
        // A damaged index may claim its first block starts after `pos`.
        let Some(within) = pos.checked_sub(first) else {
            return Err(Error::corruption(
                self.path.as_path(),
                h.offset,
                format!("index entry {lo} starts at ordinal {first}, past ordinal {pos}"),
            ));
        };
        let blk = self.block(h, true)?;
        Ok(blk
            .entry(usize::try_from(within).unwrap_or(usize::MAX))
            .map(|(k, v)| (k.to_vec(), v.to_vec())))
    }

    /// Reads and checks every block; returns the number of entries seen.
    pub fn verify(&self) -> Result<u64> {
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
                let (k, _) = blk.entry(j).ok_or_else(|| {
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

/// A two-level iterator: the pinned index picks blocks, a block iterator walks them.
pub struct TableIter {
    table: Arc<Table>,
    index: BlockIter,
    data: Option<BlockIter>,
    error: Option<Error>,
    fill_cache: bool,
}

impl TableIter {
    pub fn new(table: Arc<Table>, fill_cache: bool) -> Self {
        let index = BlockIter::new(table.index.clone());
        TableIter {
            table,
            index,
            data: None,
            error: None,
            fill_cache,
        }
    }

    fn load_block(&mut self) {
        self.data = None;
        if !self.index.valid() {
            return;
        }
        match decode_index_value(self.index.value()) {
            Some((h, _)) => match self.table.block(h, self.fill_cache) {
                Ok(b) => self.data = Some(BlockIter::new(b)),
                Err(e) => self.error = Some(e),
            },
            None => {
                self.error = Some(Error::corruption(
                    self.table.path.as_path(),
                    0,
                    "malformed index entry",
                ))
            }
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

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }
    fn seek_to_first(&mut self) {
        self.error = None;
        self.index.seek_to_first();
        self.load_block();
        if let Some(d) = &mut self.data {
            d.seek_to_first();
        }
        self.skip_forward();
    }
    fn seek_to_last(&mut self) {
        self.error = None;
        self.index.seek_to_last();
        self.load_block();
        if let Some(d) = &mut self.data {
            d.seek_to_last();
        }
        self.skip_backward();
    }
    fn seek(&mut self, target: &[u8]) {
        self.error = None;
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
