//! Read-only opens: they see every record (the level files' and the recovery log's, replayed
//! into DRAM only), refuse every change with `Error::ReadOnly`, write nothing into the
//! directory, share the database with other readers and exclude a writer (and the reverse),
//! as `attune-kv`'s read-only opens do.
#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::small;
use attune_plush::{Error, Options, Plush};
use std::collections::BTreeMap;
use std::path::Path;

fn options() -> Options {
    small()
}

fn read_only() -> Options {
    Options {
        read_only: true,
        ..options()
    }
}

/// Every file's name, length and contents (the directory is small).
fn snapshot(dir: &Path) -> BTreeMap<String, (u64, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = std::fs::read(e.path()).unwrap();
            let n = e.file_name().into_string().unwrap();
            (n, (bytes.len() as u64, bytes))
        })
        .collect()
}

#[test]
fn a_read_only_open_sees_every_record_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Plush::open(
            dir.path(),
            Options {
                sync: false,
                ..options()
            },
        )
        .unwrap();
        for k in 0..5_000u64 {
            db.put(k, k + 1).unwrap();
        }
        db.put_bytes(b"a longer key", b"and a longer value")
            .unwrap();
        db.delete(7).unwrap();
        // Records still in the DRAM level at close live only in the recovery log.
        assert!(db.stats().levels >= 1);
    }
    let before = snapshot(dir.path());
    let db = Plush::open(dir.path(), read_only()).unwrap();
    for k in 0..5_000u64 {
        let want = (k != 7).then_some(k + 1);
        assert_eq!(db.get(k).unwrap(), want, "key {k}");
    }
    assert_eq!(
        db.get_bytes(b"a longer key").unwrap().as_deref(),
        Some(&b"and a longer value"[..])
    );
    db.verify().unwrap();
    for (op, r) in [
        ("put", db.put(1, 2)),
        ("delete", db.delete(1)),
        ("put", db.put_bytes(b"k", b"v")),
        ("checkpoint", db.checkpoint()),
    ] {
        match r {
            Err(Error::ReadOnly { op: o, .. }) => assert_eq!(o, op),
            other => panic!("{op} on a read-only handle: {other:?}"),
        }
    }
    assert!(matches!(
        db.collect_garbage(true),
        Err(Error::ReadOnly { .. })
    ));
    assert_eq!(db.get(1).unwrap(), Some(2));
    drop(db);
    assert!(
        snapshot(dir.path()) == before,
        "a read-only open changed the directory"
    );
}

#[test]
fn readers_share_a_database_and_exclude_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    drop(Plush::open(dir.path(), options()).unwrap());
    let r1 = Plush::open(dir.path(), read_only()).unwrap();
    let r2 = Plush::open(dir.path(), read_only()).unwrap();
    assert!(matches!(
        Plush::open(dir.path(), options()),
        Err(Error::Locked { .. })
    ));
    drop((r1, r2));
    let w = Plush::open(dir.path(), options()).unwrap();
    assert!(matches!(
        Plush::open(dir.path(), read_only()),
        Err(Error::Locked { .. })
    ));
    drop(w);
}

#[test]
fn a_read_only_open_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent");
    let ro = Options {
        create_if_missing: true,
        ..read_only()
    };
    assert!(matches!(
        Plush::open(&missing, ro.clone()),
        Err(Error::NotADatabase { .. })
    ));
    assert!(!missing.exists());
    assert!(matches!(
        Plush::open(dir.path(), ro),
        Err(Error::NotADatabase { .. })
    ));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
