//! The block source: the one path by which a table gets a data block. A read tries the block
//! cache, then the compressed tier (when the adaptive cache sizing keeps one), then the device
//! (read, checksum, decompress), and inserts the block into the tiers that missed. When the
//! adaptive sizing is on, the read is timed and reported to its tiers (counters and access log);
//! the sizing controller only reads those, it never reads a block itself.
//!
//! Called from any reader thread: point lookups, iterators, and compaction inputs and
//! `fill_cache = false` scans, which bypass both tiers and are not reported (they are not the
//! workload the caches serve). Invariant: a block is checked (CRC, then its structure) before
//! it is cached or returned. Blocks stored uncompressed in a table that is read with `pread`
//! beyond the mapping limit are returned without being cached (the page cache holds them; see
//! `RandomAccessFile::leave_uncompressed_to_page_cache`).

use crate::block::format::{
    read_raw_block, uncompress_block, uncompress_block_ref, BlockHandle, BLOCK_TYPE_NONE,
};
use crate::block::Block;
use crate::cache::BlockCache;
use crate::env::RandomAccessFile;
use crate::error::Result;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Reads data block `handle` of table `number` (stored in `file` at `path`) through the caches.
pub(crate) fn read_block(
    cache: &BlockCache,
    file: &dyn RandomAccessFile,
    path: &Arc<PathBuf>,
    number: u64,
    handle: BlockHandle,
    fill_cache: bool,
) -> Result<Arc<Block>> {
    let tiers = cache.tiers();
    if let Some(b) = cache.get(number, handle.offset) {
        if let (Some(t), true) = (tiers, fill_cache) {
            t.record_app_hit(number, handle, b.charge());
        }
        return Ok(b);
    }
    let start = tiers.is_some().then(Instant::now);
    // `second_hit`: whether the second tier (compressed cache or page cache) held the block,
    // when known; only probed when the sizing watches (the probe costs a system call).
    // A block stored uncompressed in a file that leaves such blocks to the page cache is not
    // copied into the block cache (without the adaptive sizing, which models both tiers).
    let mut fill_cache = fill_cache;
    let (data, second_hit) = match tiers.and_then(|t| t.compressed()) {
        None => {
            let (raw, cached) = read_raw_block(file, handle, path, tiers.is_some())?;
            if tiers.is_none()
                && raw.get(handle.size as usize) == Some(&BLOCK_TYPE_NONE)
                && file.leave_uncompressed_to_page_cache()
            {
                fill_cache = false;
            }
            (uncompress_block(raw, handle, path)?, cached)
        }
        Some(cc) => match cc.get(number, handle.offset) {
            Some(raw) => (uncompress_block_ref(&raw, handle, path)?, Some(true)),
            None => {
                // The compressed tier measures the device, not the page cache: read around it.
                let direct = tiers.map(|t| t.direct_file(number, path)).transpose()?;
                let f = direct.as_deref().unwrap_or(file);
                let (raw, _) = read_raw_block(f, handle, path, false)?;
                let data = uncompress_block_ref(&raw, handle, path)?;
                if fill_cache {
                    cc.insert(number, handle.offset, Arc::from(raw));
                }
                (data, Some(false))
            }
        },
    };
    let b = Arc::new(Block::new(data, path.clone(), handle.offset)?);
    if fill_cache {
        cache.insert(number, handle.offset, b.clone());
        if let Some(t) = tiers {
            let ns = start.map_or(0, |s| {
                u64::try_from(s.elapsed().as_nanos()).unwrap_or(u64::MAX)
            });
            t.record_read(number, handle, b.charge(), second_hit, ns);
        }
    }
    Ok(b)
}
