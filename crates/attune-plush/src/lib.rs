//! # attune-plush
//!
//! Plush, a crash-consistent log-structured hash table for write-heavy point workloads
//! (Vogel, *Adaptive Storage Structures*, ch. 3). Records (8-byte keys, 8-byte values) enter a
//! DRAM level of hash-table directory entries after one append to a partitioned recovery log;
//! a full entry migrates to the next, persistent level by rehashing with `log2(fanout)` more
//! bits, recursively, like an LSM tree that never sorts. Each directory entry holds a packed
//! size/epoch word, a partitioned Bloom filter and `fanout` unsorted 256-byte buckets.
//!
//! ```
//! use attune_plush::{Options, Plush};
//! let dir = tempfile::tempdir().unwrap();
//! let opts = Options { dram_entries_log2: 8, log_partitions: 4, log_chunk_bytes: 1 << 20,
//!                      ..Options::default() };
//! let db = Plush::open(dir.path(), opts.clone()).unwrap();
//! db.put(42, 7).unwrap();
//! db.delete(43).unwrap();
//! assert_eq!(db.get(42).unwrap(), Some(7));
//! drop(db);
//! let db = Plush::open(dir.path(), opts).unwrap(); // recovers from the log
//! assert_eq!(db.get(42).unwrap(), Some(7));
//! ```
//!
//! - Design note: `docs/plush.md`; byte layouts: `docs/formats/plush.md`.
//! - Persistence back ends ([`persist`]): msync on ordinary files, clwb + sfence on a mapping,
//!   and a crash simulator that tears unfenced 8-byte words.

pub mod db;
pub mod error;
pub mod layout;
pub mod level;
pub mod log;
pub mod payload;
pub mod persist;

pub use db::{
    write_amplification_model, Migration, Options, Partitioning, Plush, Stats, VerifyReport,
};
pub use error::{Error, Result};
pub use layout::TOMBSTONE;
pub use persist::{Backend, GroupCommit, Image, RegionKind, SimModel, SimStorage, Storage};
