//! Errors of the VIP hash table and the hash join. Every fallible public call returns
//! [`HashError`]; nothing in this crate panics on caller input.

/// What went wrong in a table or join operation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HashError {
    /// A configuration field is out of its documented range.
    #[error("invalid VIP hashing configuration: {field} = {value} ({reason})")]
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// Its value, printed.
        value: String,
        /// The allowed range.
        reason: &'static str,
    },
    /// The table would need more entries than its `u32` node indices can address.
    #[error("hash table is full: {entries} entries is the most a table can hold")]
    CapacityExceeded {
        /// The maximum number of entries.
        entries: usize,
    },
    /// The build side of a PK-FK join holds the same primary key twice.
    #[error("duplicate primary key {key} at build rows {first} and {second}")]
    DuplicatePrimaryKey {
        /// The repeated key.
        key: u64,
        /// Row of its first occurrence.
        first: usize,
        /// Row of its second occurrence.
        second: usize,
    },
    /// A join input has more rows than the `u32` row ids of the join output can name.
    #[error("join input has {rows} rows; at most {max} are supported")]
    TooManyRows {
        /// Rows given.
        rows: usize,
        /// Rows allowed.
        max: usize,
    },
}
