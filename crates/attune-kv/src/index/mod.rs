//! Indexes over a table's records: the learned models (per table and per level) that predict a
//! record's position, beside the block index that every table carries.

pub mod learned;
