//! What the subjects share: a small database's options and a scratch directory.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_plush::Options;

/// A small database: a DRAM level of 64 entries, fanout 4, four log partitions of four 64 KiB
/// chunks; the rest default.
pub fn small() -> Options {
    Options {
        dram_entries_log2: 6,
        fanout_log2: 2,
        log_partitions: 4,
        log_chunk_bytes: 64 << 10,
        log_chunks: 4,
        ..Options::default()
    }
}

/// The crash tests' geometry: a DRAM level of 4 entries, fanout 4, two log partitions of four
/// 8 KiB chunks, so that a few hundred keys migrate through several levels and wrap the log.
pub fn tiny() -> Options {
    Options {
        dram_entries_log2: 2,
        fanout_log2: 2,
        log_partitions: 2,
        log_chunk_bytes: 8192,
        log_chunks: 4,
        ..Options::default()
    }
}

/// A directory on tmpfs where there is one (a barrier per upsert on a disk is a device flush,
/// which the benchmarks measure; the tests check behaviour).
pub fn scratch() -> tempfile::TempDir {
    match std::path::Path::new("/dev/shm").is_dir() {
        true => tempfile::tempdir_in("/dev/shm").unwrap(),
        false => tempfile::tempdir().unwrap(),
    }
}
