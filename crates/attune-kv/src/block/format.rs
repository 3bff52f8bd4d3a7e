//! Block framing: block handles, block trailers (compression type + CRC32C), reading, checksum
//! checks and decompression. Byte layout: docs/formats/sstable.md.

use crate::env::{RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::options::Compression;
use crate::util::coding::{decode_fixed32, put_varint64, Reader};
use std::path::Path;

/// Trailer after every block: compression type (1) + CRC32C (4).
pub const TRAILER_BYTES: usize = 5;
/// Largest block a reader accepts: one record of the largest value (4 GiB - 1) plus slack. Lengths
/// are also bounded by the file size, and a compressed block's length is covered by its CRC.
pub const MAX_BLOCK_BYTES: u64 = (4 << 30) + (1 << 20);

const TYPE_NONE: u8 = 0;
const TYPE_LZ4: u8 = 1;
const TYPE_ZSTD: u8 = 2;

/// Where a block sits in its file (size excludes the trailer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }
    pub fn decode_from(r: &mut Reader<'_>) -> Option<BlockHandle> {
        Some(BlockHandle {
            offset: r.varint64()?,
            size: r.varint64()?,
        })
    }
}

/// Compresses (when it saves at least 1/8) and writes a block with its trailer.
pub fn write_block(
    file: &mut dyn WritableFile,
    contents: &[u8],
    compression: Compression,
    zstd_level: i32,
    offset: u64,
) -> Result<BlockHandle> {
    let mut compressed: Option<(u8, Vec<u8>)> = None;
    if compression != Compression::None && !contents.is_empty() {
        let mut out = Vec::with_capacity(contents.len() / 2 + 16);
        put_varint64(&mut out, contents.len() as u64);
        let ok = match compression {
            Compression::Lz4 => {
                out.extend_from_slice(&lz4_flex::block::compress(contents));
                Some(TYPE_LZ4)
            }
            Compression::Zstd => match crate::util::zstd_ctx::compress(contents, zstd_level) {
                Ok(z) => {
                    out.extend_from_slice(&z);
                    Some(TYPE_ZSTD)
                }
                Err(_) => None, // fall back to storing the block uncompressed
            },
            Compression::None => None,
        };
        if let Some(t) = ok {
            if out.len() < contents.len() - contents.len() / 8 {
                compressed = Some((t, out));
            }
        }
    }
    let (kind, body): (u8, &[u8]) = match &compressed {
        Some((t, b)) => (*t, b),
        None => (TYPE_NONE, contents),
    };
    let crc = crc32c::crc32c_append(crc32c::crc32c(body), &[kind]);
    file.append(body)?;
    let mut trailer = [0u8; TRAILER_BYTES];
    trailer[0] = kind;
    trailer[1..].copy_from_slice(&crc.to_le_bytes());
    file.append(&trailer)?;
    Ok(BlockHandle {
        offset,
        size: body.len() as u64,
    })
}

/// Reads, verifies and decompresses a block.
/// The parts of a block inside `file` (a memory-mapped table): contents, compression type and
/// stored checksum, without copying. None when the handle points past the file.
pub fn block_in_place(file: &[u8], handle: BlockHandle) -> Option<(&[u8], u8, u32)> {
    let start = usize::try_from(handle.offset).ok()?;
    let n = usize::try_from(handle.size).ok()?;
    let end = start.checked_add(n)?.checked_add(TRAILER_BYTES)?;
    let all = file.get(start..end)?;
    let stored = decode_fixed32(&all[n + 1..])?;
    Some((&all[..n], all[n], stored))
}

/// Whether `contents` + `kind` match the stored block checksum.
pub fn block_checksum_ok(contents: &[u8], kind: u8, stored: u32) -> bool {
    crc32c::crc32c_append(crc32c::crc32c(contents), &[kind]) == stored
}

/// The compression type of blocks stored as they are.
pub const BLOCK_TYPE_NONE: u8 = TYPE_NONE;

pub fn read_block(
    file: &dyn RandomAccessFile,
    handle: BlockHandle,
    path: &Path,
) -> Result<Vec<u8>> {
    let (raw, _) = read_raw_block(file, handle, path, false)?;
    uncompress_block(raw, handle, path)
}

/// Reads a block as stored (body + trailer) and verifies its checksum; with `probe`, also says
/// whether the bytes were in the page cache (see `RandomAccessFile::read_exact_at_probed`).
/// The result is what a compressed block cache stores and what [`uncompress_block`] takes.
pub fn read_raw_block(
    file: &dyn RandomAccessFile,
    handle: BlockHandle,
    path: &Path,
    probe: bool,
) -> Result<(Vec<u8>, Option<bool>)> {
    let bad = |d: String| Error::corruption(path, handle.offset, d);
    let total = handle
        .size
        .checked_add(TRAILER_BYTES as u64)
        .filter(|&t| t <= MAX_BLOCK_BYTES && handle.offset.saturating_add(t) <= file.size())
        .ok_or_else(|| {
            bad(format!(
                "block handle (size {}) points past the file",
                handle.size
            ))
        })?;
    let mut buf = vec![0u8; total as usize];
    let cached = if probe {
        file.read_exact_at_probed(&mut buf, handle.offset)?
    } else {
        file.read_exact_at(&mut buf, handle.offset)?;
        None
    };
    let n = handle.size as usize;
    let kind = buf[n];
    let stored = decode_fixed32(&buf[n + 1..]).unwrap_or(0);
    if crc32c::crc32c_append(crc32c::crc32c(&buf[..n]), &[kind]) != stored {
        return Err(bad("block checksum mismatch".into()));
    }
    Ok((buf, cached))
}

/// Decompresses a block read by [`read_raw_block`] (body + trailer, checksum already verified).
pub fn uncompress_block(mut buf: Vec<u8>, handle: BlockHandle, path: &Path) -> Result<Vec<u8>> {
    let n = raw_body_len(&buf, handle, path)?;
    match decompress_body(&buf[..n], buf[n], handle, path)? {
        Some(out) => Ok(out),
        None => {
            buf.truncate(n);
            Ok(buf)
        }
    }
}

/// Like [`uncompress_block`] for a raw block that stays where it is (a compressed-cache entry).
pub fn uncompress_block_ref(buf: &[u8], handle: BlockHandle, path: &Path) -> Result<Vec<u8>> {
    let n = raw_body_len(buf, handle, path)?;
    Ok(decompress_body(&buf[..n], buf[n], handle, path)?.unwrap_or_else(|| buf[..n].to_vec()))
}

fn raw_body_len(buf: &[u8], handle: BlockHandle, path: &Path) -> Result<usize> {
    usize::try_from(handle.size)
        .ok()
        .filter(|&n| n.checked_add(TRAILER_BYTES) == Some(buf.len()))
        .ok_or_else(|| {
            Error::corruption(
                path,
                handle.offset,
                format!(
                    "raw block of {} bytes for a handle of {}",
                    buf.len(),
                    handle.size
                ),
            )
        })
}

/// The decompressed body, or `None` when the block is stored uncompressed.
fn decompress_body(
    body: &[u8],
    kind: u8,
    handle: BlockHandle,
    path: &Path,
) -> Result<Option<Vec<u8>>> {
    let bad = |d: String| Error::corruption(path, handle.offset, d);
    match kind {
        TYPE_NONE => Ok(None),
        TYPE_LZ4 | TYPE_ZSTD => {
            let mut r = Reader::new(body);
            let raw = r.varint64().filter(|&r| r <= MAX_BLOCK_BYTES);
            let raw = raw.ok_or_else(|| bad("bad uncompressed length".into()))? as usize;
            let body = &body[r.pos()..];
            let out = if kind == TYPE_LZ4 {
                lz4_flex::block::decompress(body, raw).map_err(|e| bad(format!("lz4: {e}")))?
            } else {
                crate::util::zstd_ctx::decompress(body, raw)
                    .map_err(|e| bad(format!("zstd: {e}")))?
            };
            if out.len() != raw {
                return Err(bad("decompressed length mismatch".into()));
            }
            Ok(Some(out))
        }
        t => Err(bad(format!("unknown block compression type {t}"))),
    }
}
