//! Synthetic block layouts and the closed loop "real caches + Symbiosis" used by the tests and
//! `attune-bench cache-sim`.
//!
//! A [`BlockLayout`] lays `blocks` fixed-size uncompressed blocks out as compressed blocks of
//! length `α·U·jitter` (jitter uniform in [0.75, 1.25], seeded) packed back to back in files of
//! `blocks_per_file` blocks, so blocks straddle 4 KiB pages exactly as SSTable blocks do.
//! [`ClosedLoop`] plays the engine: it reads a block through a [`TwoTier`], reports the outcome to
//! [`Symbiosis`], and applies the returned M_a.
//!
//! Thread-safety: `BlockLayout` is immutable after construction (`Sync`); `ClosedLoop` has one
//! owner. Invariant: offsets of a file's blocks are increasing and non-overlapping.

use crate::access::BlockAccess;
use crate::error::{bad, Result};
use crate::ghost::mix64;
use crate::tracker::Symbiosis;
use crate::twotier::{TierHit, TwoTier};

/// A block's address and lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRef {
    /// File number.
    pub file: u64,
    /// Ordinal in the file.
    pub block_no: u64,
    /// Compressed offset in the file.
    pub offset: u64,
    /// Compressed length.
    pub compressed_len: u32,
    /// Uncompressed length.
    pub uncompressed_len: u32,
}

impl BlockRef {
    /// An access to this block, served as `app_hit` / `second_hit` say (no latency).
    pub fn access(&self, app_hit: bool, second_hit: Option<bool>) -> BlockAccess {
        BlockAccess {
            file: self.file,
            block_no: self.block_no,
            offset: self.offset,
            compressed_len: self.compressed_len,
            uncompressed_len: self.uncompressed_len,
            app_hit,
            second_hit,
            latency_ns: None,
        }
    }
}

/// Synthetic SSTable-like placement of blocks (see the module doc).
#[derive(Clone, Debug)]
pub struct BlockLayout {
    offsets: Vec<u64>,
    lens: Vec<u32>,
    uncompressed: u32,
    blocks_per_file: u64,
    compressed_total: u64,
}

impl BlockLayout {
    /// Lays out `blocks` blocks of `uncompressed` bytes at compression ratio `alpha`.
    pub fn new(
        blocks: u64,
        uncompressed: u32,
        alpha: f64,
        blocks_per_file: u64,
        seed: u64,
    ) -> Result<Self> {
        if blocks == 0 || blocks > 1 << 32 {
            return Err(bad("blocks", blocks, "must be in 1..=2^32"));
        }
        if uncompressed < 64 {
            return Err(bad("uncompressed", uncompressed, "must be >= 64 bytes"));
        }
        if !(alpha > 0.0 && alpha <= 1.0) {
            return Err(bad("alpha", alpha, "must be in (0, 1]"));
        }
        if blocks_per_file == 0 {
            return Err(bad("blocks_per_file", 0, "must be >= 1"));
        }
        let mut offsets = Vec::with_capacity(blocks as usize);
        let mut lens = Vec::with_capacity(blocks as usize);
        let mut off = 0u64;
        let mut total = 0u64;
        for b in 0..blocks {
            if b % blocks_per_file == 0 {
                off = 0;
            }
            let j = 0.75 + 0.5 * ((mix64(seed ^ b) >> 11) as f64 / (1u64 << 53) as f64);
            let len = ((f64::from(uncompressed) * alpha * j) as u32).clamp(16, uncompressed);
            offsets.push(off);
            lens.push(len);
            off += u64::from(len);
            total += u64::from(len);
        }
        Ok(Self {
            offsets,
            lens,
            uncompressed,
            blocks_per_file,
            compressed_total: total,
        })
    }

    /// Number of blocks.
    pub fn blocks(&self) -> u64 {
        self.lens.len() as u64
    }

    /// D_u, bytes.
    pub fn uncompressed_bytes(&self) -> u64 {
        self.blocks() * u64::from(self.uncompressed)
    }

    /// D_c, bytes.
    pub fn compressed_bytes(&self) -> u64 {
        self.compressed_total
    }

    /// Address of block `b` (taken modulo the block count).
    #[inline]
    pub fn block(&self, b: u64) -> BlockRef {
        let b = b % self.blocks();
        BlockRef {
            file: b / self.blocks_per_file,
            block_no: b % self.blocks_per_file,
            offset: self.offsets[b as usize],
            compressed_len: self.lens[b as usize],
            uncompressed_len: self.uncompressed,
        }
    }
}

/// The engine stand-in: real two-tier caches driven by a Symbiosis controller.
pub struct ClosedLoop {
    /// The "real" caches.
    pub real: TwoTier,
    /// The controller.
    pub sym: Symbiosis,
}

impl ClosedLoop {
    /// Starts with the controller's initial M_a applied to `real`.
    pub fn new(mut real: TwoTier, sym: Symbiosis) -> Self {
        real.set_app_bytes(sym.app_target_bytes());
        Self { real, sym }
    }

    /// Reads `r` through the real caches, reports it, applies any new M_a.
    #[inline]
    pub fn step(&mut self, r: &BlockRef) -> TierHit {
        let hit = self.real.access(
            r.file,
            r.offset,
            u64::from(r.compressed_len),
            u64::from(r.uncompressed_len),
        );
        let a = r.access(
            hit == TierHit::App,
            (hit != TierHit::App).then_some(hit == TierHit::Second),
        );
        if let Some(m_a) = self.sym.record(&a) {
            self.real.set_app_bytes(m_a);
        }
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_packs_blocks_per_file_at_the_requested_ratio() {
        let l = BlockLayout::new(10_000, 4096, 0.5, 1000, 3).unwrap();
        assert_eq!(l.uncompressed_bytes(), 10_000 * 4096);
        let a = l.compressed_bytes() as f64 / l.uncompressed_bytes() as f64;
        assert!((a - 0.5).abs() < 0.02, "alpha {a}");
        let (x, y) = (l.block(1000), l.block(1001));
        assert_eq!((x.file, x.block_no, x.offset), (1, 0, 0));
        assert_eq!(y.offset, u64::from(x.compressed_len));
        assert!(BlockLayout::new(0, 4096, 0.5, 1, 1).is_err());
        assert!(BlockLayout::new(10, 4096, 1.5, 1, 1).is_err());
    }
}
