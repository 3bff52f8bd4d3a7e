//! The table footer: the handles of the meta blocks, the format version, a checksum and the
//! magic number, in the last 64 bytes of every table file. Byte layout: docs/formats/sstable.md.

use crate::block::format::BlockHandle;
use crate::error::{Error, Result};
use crate::util::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64};
use std::path::Path;

/// "ATTUNSST" as a little-endian u64.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"ATTUNSST");
/// Table format versions this build reads. Version 2 adds the range-deletion block (named by
/// the properties); a table without range deletions is still written as version 1.
pub const TABLE_FORMAT_VERSION: u32 = 2;
/// Fixed footer size at the end of every table file.
pub const FOOTER_BYTES: usize = 64;

/// The footer: handles of the meta blocks, version, checksum and magic.
#[derive(Clone, Copy, Debug, Default)]
pub struct Footer {
    pub filter: BlockHandle,
    pub index: BlockHandle,
    pub properties: BlockHandle,
}

impl Footer {
    /// The footer of a version-1 table.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_version(1)
    }

    /// The footer naming table format `version`.
    pub fn encode_version(&self, version: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_BYTES);
        for h in [self.filter, self.index, self.properties] {
            put_fixed64(&mut out, h.offset);
            put_fixed64(&mut out, h.size);
        }
        put_fixed32(&mut out, version);
        let crc = crc32c::crc32c(&out);
        put_fixed32(&mut out, crc);
        put_fixed64(&mut out, TABLE_MAGIC);
        debug_assert_eq!(out.len(), FOOTER_BYTES);
        out
    }

    pub fn decode(buf: &[u8], path: &Path, offset: u64) -> Result<Footer> {
        let bad = |d: &str| Error::corruption(path, offset, d.to_string());
        if buf.len() != FOOTER_BYTES {
            return Err(bad("short footer"));
        }
        if decode_fixed64(&buf[56..]) != Some(TABLE_MAGIC) {
            return Err(bad("bad magic number (not an Attune table, or damaged)"));
        }
        if decode_fixed32(&buf[52..]) != Some(crc32c::crc32c(&buf[..52])) {
            return Err(bad("footer checksum mismatch"));
        }
        let version = decode_fixed32(&buf[48..]).unwrap_or(0);
        if version == 0 || version > TABLE_FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: TABLE_FORMAT_VERSION,
            });
        }
        let h = |i: usize| BlockHandle {
            offset: decode_fixed64(&buf[16 * i..]).unwrap_or(0),
            size: decode_fixed64(&buf[16 * i + 8..]).unwrap_or(0),
        };
        Ok(Footer {
            filter: h(0),
            index: h(1),
            properties: h(2),
        })
    }
}
