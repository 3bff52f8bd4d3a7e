//! Open-path tests: degenerate paths, directories of other engines, files that do not belong to
//! the database, and option combinations that must be refused before anything is written.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_kv::env::{Env, MemEnv};
use attune_kv::{Error, Options, DB};
use std::path::Path;
use std::sync::Arc;

fn options() -> Options {
    Options {
        write_buffer_size: 32 << 10,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

#[test]
fn empty_path_is_refused_before_touching_the_file_system() {
    let env = Arc::new(MemEnv::new());
    let e = DB::open_with_env(env.clone(), Path::new(""), options())
        .err()
        .expect("an empty path must be refused");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("path is empty"), "{e}");
    for name in ["LOCK", "CURRENT", "./LOCK"] {
        assert!(!env.exists(Path::new(name)), "{name} was created");
    }
}

#[test]
fn path_that_is_a_regular_file_is_not_a_database() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("data.bin");
    std::fs::write(&file, b"not a directory").unwrap();
    let e = DB::open(&file, options()).err().expect("must refuse");
    assert!(matches!(e, Error::NotADatabase { .. }), "{e}");
    assert!(e.to_string().contains("is a file, not a directory"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");

    let below = file.join("db");
    let e = DB::open(&below, options()).err().expect("must refuse");
    assert!(matches!(e, Error::NotADatabase { .. }), "{e}");
    assert!(e.to_string().contains("data.bin is a file"), "{e}");
}
