//! What an engine tells attune-cache about one block read, and how the second tier is laid out.
//!
//! Thread-safety: plain `Copy` data. Invariant: `compressed_len > 0` and `uncompressed_len > 0`
//! for a block that exists; a zero length is treated as one byte rather than rejected, because
//! the hot path never returns errors.

/// One block read by the engine, reported after the engine looked it up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockAccess {
    /// Engine file number (SSTable number).
    pub file: u64,
    /// Ordinal of the block within its file (index entry number); groups of contiguous blocks
    /// are sampled together by this number.
    pub block_no: u64,
    /// Byte offset of the compressed block in the file.
    pub offset: u64,
    /// Compressed (on-disk) length in bytes: what the second tier holds.
    pub compressed_len: u32,
    /// Uncompressed length in bytes: what the application cache is charged.
    pub uncompressed_len: u32,
    /// Whether the application (uncompressed) cache had the block.
    pub app_hit: bool,
    /// On an application miss: whether the second tier (compressed cache or OS page cache)
    /// had it. `None` when unknown; then `latency_ns` is compared with the calibrated costs.
    pub second_hit: Option<bool>,
    /// Measured time to obtain the block, if the engine timed it.
    pub latency_ns: Option<u64>,
}

impl BlockAccess {
    /// Compressed length, at least one byte.
    #[inline]
    pub fn compressed_bytes(&self) -> u64 {
        u64::from(self.compressed_len.max(1))
    }

    /// Uncompressed length, at least one byte.
    #[inline]
    pub fn uncompressed_bytes(&self) -> u64 {
        u64::from(self.uncompressed_len.max(1))
    }
}

/// Page size of the OS page cache model. Default 4 KiB: the x86-64 and arm64 base page.
pub const PAGE_BYTES_DEFAULT: u32 = 4096;

/// Extra modelled kernel-cache capacity that stands in for read-ahead (Symbiosis §4.2.3: "slightly
/// increases the size of our modeled kernel cache"; the paper gives no number). Default 5 %:
/// enough to move the simulated curve toward one that prefetches neighbours, small enough not to
/// change a decision on its own; `attune-bench cache-sim` measures its effect.
pub const READAHEAD_ALLOWANCE_DEFAULT: f64 = 0.05;

/// How the second (compressed) tier caches data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SecondTier {
    /// user/kernel layout: the OS page cache holds file pages; a block read touches every page
    /// its compressed byte range overlaps (misalignment) and hits only if all are cached.
    Pages {
        /// Page size in bytes.
        page_bytes: u32,
        /// Fractional capacity bonus for read-ahead (see [`READAHEAD_ALLOWANCE_DEFAULT`]).
        readahead_allowance: f64,
    },
    /// user/user layout: an in-process compressed block cache charged by compressed length.
    Blocks,
}

impl SecondTier {
    /// The page-cache model with default page size and read-ahead allowance.
    pub fn kernel_default() -> Self {
        Self::Pages {
            page_bytes: PAGE_BYTES_DEFAULT,
            readahead_allowance: READAHEAD_ALLOWANCE_DEFAULT,
        }
    }

    /// Capacity multiplier for the modelled tier (1 + read-ahead allowance).
    pub fn capacity_factor(&self) -> f64 {
        match *self {
            Self::Pages {
                readahead_allowance,
                ..
            } => 1.0 + readahead_allowance,
            Self::Blocks => 1.0,
        }
    }
}
