//! Small pieces every layer uses: byte coding, file names, Zstd contexts and the per-step lookup
//! timing. Nothing here knows about tables, logs or the database.

pub mod coding;
pub mod filename;
pub mod steps;
pub(crate) mod zstd_ctx;
