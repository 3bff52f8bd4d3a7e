//! attune-bench's integration tests, one module per subject, linked into one test binary (each
//! binary of its own would link the whole crate again). Run one subject with
//! `cargo test --release -p attune-bench --test integration <module>::`.

mod cache_kv_rows;
mod cli;
mod engines;
mod hash_cli;
