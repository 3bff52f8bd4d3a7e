//! # attune-kv
//!
//! Attune's LSM key-value engine: a write-ahead log with group commit, a concurrent skiplist
//! memtable, sorted tables with checksummed (optionally LZ4/Zstd-compressed) blocks, per-file Bloom
//! filters and a position-addressable layout, leveled compaction in background threads, a manifest
//! of version edits, crash recovery, snapshots, bidirectional iterators and a resizable sharded
//! LRU block cache. Every file operation goes through [`env::Env`].
//!
//! ```no_run
//! use attune_kv::{DB, Options, ReadOptions};
//! let db = DB::open("/tmp/attune-example", Options::default())?;
//! db.put(b"hello", b"world")?;
//! assert_eq!(db.get(b"hello")?, Some(b"world".to_vec()));
//! let mut it = db.iter(&ReadOptions::default())?;
//! it.seek_to_first();
//! while it.valid() {
//!     println!("{:?} = {:?}", it.key(), it.value());
//!     it.next();
//! }
//! # Ok::<(), attune_kv::Error>(())
//! ```
//!
//! Design: `docs/kv.md`. Byte formats: `docs/formats/{wal,sstable,manifest}.md`.
//!
//! Layout, bottom up (`tests/integration/layering.rs` checks that imports only point down): `error`,
//! `options`, `util`, `env` (the file-system seam, public); `key`, `iter`, `wal/`, `vlog/`,
//! `batch`; `block/` (block contents, framing, read and checksum), `memtable/`, `index/`
//! (learned models); `cache/` (one sharded mechanism with LRU and S3-FIFO shards, the compressed
//! tier, adaptive sizing, hot keys); `table/` (reads every block through `table/source.rs`);
//! `version/` (versions, manifest, compaction picking, learning); `db/` (open and recovery,
//! write path, read path, iterator, value-log lifecycle and GC, background work, stats). Only
//! the API below is public; `internals` is for the fuzzers, the stress tool and decoder tests.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod batch;
mod block;
mod cache;
mod db;
pub mod env;
mod error;
mod index;
mod iter;
mod key;
mod memtable;
mod merge;
mod options;
mod table;
mod util;
mod version;
mod vlog;
mod wal;

pub use batch::{WriteBatch, MAX_KEY_BYTES, MAX_VALUE_BYTES};
pub use cache::compressed::CompressedCacheStats;
pub use cache::hotkeys::HotKeyStats;
pub use cache::sizing::{
    CacheTierStats, Controller as CacheSizingController, CostsSource, RoundBrief, TierWindow,
};
pub use cache::CacheStats;
pub use db::{
    repair, repair_with_env, BlobFileStats, CheckpointReport, DbIterator, GcReport, IngestReport,
    IngestedFile, LevelCompactionStats, PrefetchStats, RepairReport, RepairedFile, Snapshot, Stats,
    Transaction, VerifyReport, DB, LOST_DIR,
};
pub use db::{CatchUp, SECONDARY_MAX_PASSES};
pub use error::{Error, Result};
pub use index::learned::LearnStats;
pub use merge::{builtin as builtin_merge_operator, MergeOperator};
pub use options::{
    parse_size, BlockCachePolicy, CacheLayout, CacheMissCosts, CacheSizing, CompactionFilter,
    Compression, FilterDecision, LearnedBenefit, LearnedIndex, Options, PrefetchSwitches,
    Prefetcher, ReadOptions, WriteOptions, OPTION_NAMES,
};
pub use table::{ExternalTableInfo, TableWriter};

/// What the fuzz targets (through `attune-stress`), the stress tool, the decoder tests and the
/// lookup-step example need of the engine's internals: the on-disk encoders and decoders, the
/// table and log readers, and the per-step lookup timing. Not an API: these items change with the
/// engine, and nothing else may use them.
#[doc(hidden)]
pub mod internals {
    pub use crate::block::format::{read_block, BlockHandle};
    pub use crate::block::{Block, BlockBuilder, BlockIter};
    pub use crate::cache::BlockCache;
    pub use crate::index::learned::{LevelModel, TIMING_SAMPLE};
    pub use crate::iter::InternalIterator;
    pub use crate::key::{make_internal_key, ValueKind, MAX_SEQUENCE};
    pub use crate::table::bloom::{bloom_hash, build as build_bloom, Bloom};
    pub use crate::table::footer::{Footer, FOOTER_BYTES, TABLE_FORMAT_VERSION};
    pub use crate::table::{Table, TableIter, TableProperties};
    pub use crate::util::coding::{put_fixed32, put_varint64, Reader};
    pub use crate::util::steps;
    pub use crate::version::{FileMeta, VersionEdit, VersionSet};
    pub use crate::vlog::{
        damaged_in_middle, decode_record, encode_record, record_at, BlobFile, BlobPointer,
        SegmentScanner, VlogWriter, BLOB_POINTER_BYTES, SEGMENT_HEADER_BYTES,
    };
    pub use crate::wal::{LogReader, LogWriter};
}
