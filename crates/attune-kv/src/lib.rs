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

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod batch;
pub mod cache;
pub mod ccache;
pub mod coding;
pub mod compaction;
pub mod db;
pub mod env;
pub mod error;
pub mod filename;
pub mod hotkeys;
pub mod iter;
pub mod key;
pub mod learned;
pub mod log;
pub mod memtable;
pub mod options;
mod s3fifo;
pub mod skiplist;
pub mod steps;
pub mod symbiosis;
pub mod table;
pub mod version;
pub mod vlog;
mod zstd_ctx;

pub use batch::WriteBatch;
pub use db::{DbIterator, Snapshot, Stats, VerifyReport, DB};
pub use error::{Error, Result};
pub use options::{
    BlockCachePolicy, CacheLayout, CacheMissCosts, CacheSizing, Compression, Options, ReadOptions,
    WriteOptions,
};
