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
pub mod block;
pub mod cache;
pub mod db;
pub mod env;
pub mod error;
pub mod index;
pub mod iter;
pub mod key;
pub mod memtable;
pub mod options;
pub mod table;
pub mod util;
pub mod version;
pub mod vlog;
pub mod wal;

// The module paths from before the folders, kept while dependents move to the new ones.
#[doc(hidden)]
pub mod ccache {
    pub use crate::cache::compressed::*;
}
#[doc(hidden)]
pub mod coding {
    pub use crate::util::coding::*;
}
#[doc(hidden)]
pub mod compaction {
    pub use crate::version::compaction::*;
}
#[doc(hidden)]
pub mod filename {
    pub use crate::util::filename::*;
}
#[doc(hidden)]
pub mod hotkeys {
    pub use crate::cache::hotkeys::*;
}
#[doc(hidden)]
pub mod learned {
    pub use crate::index::learned::*;
}
#[doc(hidden)]
pub mod log {
    pub use crate::wal::*;
}
#[doc(hidden)]
pub mod skiplist {
    pub use crate::memtable::skiplist::*;
}
#[doc(hidden)]
pub mod steps {
    pub use crate::util::steps::*;
}
#[doc(hidden)]
pub mod symbiosis {
    pub use crate::cache::sizing::*;
}

pub use batch::WriteBatch;
pub use db::{DbIterator, Snapshot, Stats, VerifyReport, DB};
pub use error::{Error, Result};
pub use options::{
    BlockCachePolicy, CacheLayout, CacheMissCosts, CacheSizing, Compression, Options, ReadOptions,
    WriteOptions,
};
