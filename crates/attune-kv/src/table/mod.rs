//! Sorted string tables: immutable files of sorted internal keys. See docs/formats/sstable.md.
//!
//! ```text
//! data block 0 | … | data block n-1 | filter block | properties block | index block | footer (64 B)
//! ```
//!
//! Every block ends with a 5-byte trailer (compression type, CRC32C). The index block maps the last
//! key of each data block to its handle and the ordinal of its first record, so a record can be
//! found by its position in the file as well as by key.

pub mod bloom;
pub mod builder;
pub mod footer;
pub mod reader;
pub(crate) mod source;
pub mod writer;

pub use builder::{TableBuilder, TableBuilderOptions};
pub use reader::{Table, TableIter, TableProperties};
pub use writer::{ExternalTableInfo, TableWriter};
