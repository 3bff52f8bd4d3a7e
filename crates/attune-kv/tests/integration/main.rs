//! attune-kv's integration tests, one module per subject, linked into one test binary (each
//! binary of its own would link the whole crate again). Run one subject with
//! `cargo test --release -p attune-kv --test integration <module>::`.

mod block_cache_policy;
mod cache_sizing;
mod checkpoint;
mod close_compaction;
mod compaction_filter;
mod corruption;
mod decoders;
mod device_env;
mod expiry_compaction;
mod fault_plan;
mod faults;
mod hot_key_cache;
mod ingest;
mod intra_l0;
mod layering;
mod learned;
mod lifecycle;
mod merge;
mod model;
mod multi_get;
mod obsolete_files;
mod open;
mod pipes_bulk_io;
mod prefetcher;
mod range_delete;
mod repair;
mod secondary;
mod support;
mod ttl;
mod txn;
mod vlog;
mod vlog_decoders;
