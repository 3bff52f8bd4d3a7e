//! The operation type shared by every request stream (YCSB, Wiscer, mix_graph).
//!
//! Keys are `u64`; turn them into bytes with [`crate::keys::encode_key16`] or into YCSB names
//! with [`crate::ycsb::key_name`]. Value lengths are in bytes. Plain data: `Copy + Send + Sync`.

/// One request of a workload stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Point read.
    Read {
        /// Key.
        key: u64,
    },
    /// Overwrite of an existing key.
    Update {
        /// Key.
        key: u64,
        /// Bytes written.
        value_len: u32,
    },
    /// Insert of a new key.
    Insert {
        /// Key.
        key: u64,
        /// Bytes written.
        value_len: u32,
    },
    /// Range scan of `len` records starting at the first key `>= start`.
    Scan {
        /// Start key.
        start: u64,
        /// Number of records.
        len: u32,
    },
    /// Read then write back the same key.
    ReadModifyWrite {
        /// Key.
        key: u64,
        /// Bytes written.
        value_len: u32,
    },
    /// Delete of a key.
    Delete {
        /// Key.
        key: u64,
    },
}

impl Op {
    /// Short lowercase name: read, update, insert, scan, rmw, delete.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Read { .. } => "read",
            Op::Update { .. } => "update",
            Op::Insert { .. } => "insert",
            Op::Scan { .. } => "scan",
            Op::ReadModifyWrite { .. } => "rmw",
            Op::Delete { .. } => "delete",
        }
    }

    /// The key the operation touches (the start key for scans).
    pub fn key(&self) -> u64 {
        match *self {
            Op::Read { key }
            | Op::Update { key, .. }
            | Op::Insert { key, .. }
            | Op::ReadModifyWrite { key, .. }
            | Op::Delete { key } => key,
            Op::Scan { start, .. } => start,
        }
    }
}
