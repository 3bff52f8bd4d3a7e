//! Writes a table from entries added in internal-key order.

use super::bloom;
use super::footer::Footer;
use super::reader::TableProperties;
use crate::block::format::{write_block, BlockHandle};
use crate::block::BlockBuilder;
use crate::env::WritableFile;
use crate::error::Result;
use crate::key::{self, compare_internal};
use crate::memtable::rangedel::RangeTombstone;
use crate::options::{Compression, Options};
use crate::util::coding::put_varint64;
use std::cmp::Ordering;

/// The subset of options a table builder needs.
#[derive(Clone, Debug)]
pub struct TableBuilderOptions {
    pub block_size: usize,
    pub bloom_bits_per_key: u32,
    pub compression: Compression,
    pub zstd_level: i32,
}

impl From<&Options> for TableBuilderOptions {
    fn from(o: &Options) -> Self {
        TableBuilderOptions {
            block_size: o.block_size,
            bloom_bits_per_key: o.bloom_bits_per_key,
            compression: o.compression,
            zstd_level: o.zstd_level,
        }
    }
}

/// Streams a table to a file.
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    opts: TableBuilderOptions,
    data: BlockBuilder,
    index: BlockBuilder,
    hashes: Vec<u64>,
    offset: u64,
    props: TableProperties,
    block_first_ordinal: u64,
    last_key: Vec<u8>,
    smallest_key: Vec<u8>,
    last_user_hash_key: Vec<u8>,
    key_len: Option<usize>,
    value_len: Option<usize>,
    /// Whether every entry of the open data block is a value pointer.
    block_all_blob: bool,
    /// Range tombstones for the range-deletion block.
    range_dels: Vec<RangeTombstone>,
}

impl TableBuilder {
    pub fn new(file: Box<dyn WritableFile>, opts: TableBuilderOptions) -> Self {
        TableBuilder {
            file,
            opts,
            data: BlockBuilder::default(),
            index: BlockBuilder::default(),
            hashes: Vec::new(),
            offset: 0,
            props: TableProperties {
                smallest_seq: u64::MAX,
                ..Default::default()
            },
            block_first_ordinal: 0,
            last_key: Vec::new(),
            smallest_key: Vec::new(),
            last_user_hash_key: Vec::new(),
            key_len: None,
            value_len: None,
            block_all_blob: true,
            range_dels: Vec::new(),
        }
    }

    /// Adds a range tombstone (any order; written to the range-deletion block at `finish`).
    pub fn add_range_tombstone(&mut self, t: RangeTombstone) {
        self.props.smallest_seq = self.props.smallest_seq.min(t.seq);
        self.props.largest_seq = self.props.largest_seq.max(t.seq);
        self.range_dels.push(t);
    }

    /// Adds an entry; keys must arrive in strictly increasing internal-key order.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        assert!(
            self.props.num_entries == 0 || compare_internal(&self.last_key, ikey) == Ordering::Less,
            "table keys must be added in increasing order"
        );
        if self.props.num_entries == 0 {
            self.smallest_key = ikey.to_vec();
            self.key_len = Some(ikey.len());
            self.value_len = Some(value.len());
        } else {
            if self.key_len != Some(ikey.len()) {
                self.key_len = None;
            }
            if self.value_len != Some(value.len()) {
                self.value_len = None;
            }
        }
        let uk = key::user_key(ikey);
        if self.opts.bloom_bits_per_key > 0
            && (self.hashes.is_empty() || uk != self.last_user_hash_key)
        {
            self.hashes.push(bloom::bloom_hash(uk));
            self.last_user_hash_key.clear();
            self.last_user_hash_key.extend_from_slice(uk);
        }
        let seq = key::sequence(ikey);
        self.props.smallest_seq = self.props.smallest_seq.min(seq);
        self.props.largest_seq = self.props.largest_seq.max(seq);
        match key::kind(ikey) {
            Some(key::ValueKind::Deletion) => self.props.num_deletions += 1,
            Some(key::ValueKind::BlobIndex | key::ValueKind::ExpiringBlobIndex) => {
                self.props.num_blob_entries += 1
            }
            _ => {}
        }
        if let Some((Some(at), _)) = key::kind(ikey).and_then(|k| key::split_expiry(k, value)) {
            if self.props.earliest_expiry == 0 || at < self.props.earliest_expiry {
                self.props.earliest_expiry = at.max(1);
            }
        }
        if key::kind(ikey) != Some(key::ValueKind::BlobIndex) {
            self.block_all_blob = false;
        }
        self.props.raw_key_bytes += ikey.len() as u64;
        self.props.raw_value_bytes += value.len() as u64;
        self.data.add(ikey, value);
        self.props.num_entries += 1;
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        if self.data.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let n = self.data.len() as u64;
        let contents = self.data.finish();
        // Blocks of value pointers stay uncompressed: pointers compress poorly, and a fixed
        // layout lets a record's offset follow from its position.
        let c = if self.block_all_blob {
            Compression::None
        } else {
            self.opts.compression
        };
        self.block_all_blob = true;
        let h = self.write(&contents, c)?;
        if h.size != contents.len() as u64 {
            self.props.compressed_data_blocks += 1;
        }
        let mut v = Vec::with_capacity(24);
        h.encode_to(&mut v);
        put_varint64(&mut v, self.block_first_ordinal);
        self.index.add(&self.last_key, &v);
        self.block_first_ordinal += n;
        self.props.num_data_blocks += 1;
        Ok(())
    }

    fn write(&mut self, contents: &[u8], c: Compression) -> Result<BlockHandle> {
        let h = write_block(
            self.file.as_mut(),
            contents,
            c,
            self.opts.zstd_level,
            self.offset,
        )?;
        self.offset += h.size + crate::block::format::TRAILER_BYTES as u64;
        Ok(h)
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Bytes written so far plus the open block (used to cut compaction outputs).
    pub fn file_size_estimate(&self) -> u64 {
        self.offset + self.data.estimated_size() as u64
    }

    pub fn smallest_key(&self) -> &[u8] {
        &self.smallest_key
    }
    pub fn largest_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Writes the meta blocks and footer, syncs, and returns the file size.
    pub fn finish(mut self) -> Result<u64> {
        self.flush_data_block()?;
        let filter_contents = if self.opts.bloom_bits_per_key > 0 {
            bloom::build(&self.hashes, self.opts.bloom_bits_per_key)
        } else {
            Vec::new()
        };
        let filter = self.write(&filter_contents, Compression::None)?;
        self.props.fixed_key_len = self.key_len.unwrap_or(0) as u64;
        self.props.fixed_value_len_plus1 = self.value_len.map_or(0, |v| v as u64 + 1);
        if self.props.num_entries == 0 && self.range_dels.is_empty() {
            self.props.smallest_seq = 0;
        }
        let mut version = 1;
        if !self.range_dels.is_empty() {
            // Internal-key order: begin ascending, newest first.
            let mut ts = std::mem::take(&mut self.range_dels);
            ts.sort_by(|a, b| {
                a.begin
                    .cmp(&b.begin)
                    .then(b.seq.cmp(&a.seq))
                    .then(a.end.cmp(&b.end))
            });
            ts.dedup_by(|a, b| a.begin == b.begin && a.seq == b.seq);
            let mut block = BlockBuilder::default();
            for t in &ts {
                let k = key::make_internal_key(&t.begin, t.seq, key::ValueKind::RangeDeletion);
                block.add(&k, &t.end);
            }
            let contents = block.finish();
            self.props.range_del_block = self.write(&contents, Compression::None)?;
            self.props.num_range_deletions = ts.len() as u64;
            version = 2;
        }
        let properties = self.write(&self.props.encode(), Compression::None)?;
        let index_contents = self.index.finish();
        let index = self.write(&index_contents, Compression::None)?;
        let footer = Footer {
            filter,
            index,
            properties,
        }
        .encode_version(version);
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.sync()?;
        Ok(self.offset)
    }
}
