//! A handle's life: `close` closes at once whatever snapshots and iterators exist, a forked child
//! cannot use its parent's handle, a read-only open writes nothing (which is how a full disk is
//! read), and recovery on a full disk leaves no partial file behind.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{count_from_first, open_mem};
use attune_kv::env::{Env, FaultError, FaultOp, FaultPlan, MemEnv, Trigger};
use attune_kv::{Error, Options, ReadOptions, DB};
use std::path::Path;
use std::time::Duration;

fn options() -> Options {
    Options {
        write_buffer_size: 1 << 20,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

fn open(env: &MemEnv, opts: Options) -> attune_kv::Result<DB> {
    open_mem(env, opts)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Every file with its size: what a read-only open must leave exactly as it found it.
fn listing(env: &MemEnv) -> Vec<(String, u64)> {
    let mut names = env.list_dir(Path::new("/db")).unwrap();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let size = env.file_size(&Path::new("/db").join(&n)).unwrap_or(0);
            (n, size)
        })
        .collect()
}

#[test]
fn close_with_a_live_iterator_and_snapshot_releases_the_lock_and_fails_them() {
    let env = MemEnv::new();
    let db = open(&env, options()).unwrap();
    for i in 0..100 {
        db.put(&key(i), b"v").unwrap();
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    assert!(it.valid());
    let snap = db.snapshot().unwrap();
    db.close().unwrap();

    // The lock is free although both still exist.
    let again = open(&env, options()).unwrap();
    assert_eq!(again.get(&key(7)).unwrap(), Some(b"v".to_vec()));

    it.next();
    assert!(!it.valid(), "a closed database's iterator must not move on");
    assert!(
        matches!(it.status(), Err(Error::Closed(_))),
        "{:?}",
        it.status()
    );
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..Default::default()
    };
    assert!(matches!(db.get_opt(&key(7), &ro), Err(Error::Closed(_))));
    assert!(matches!(db.put(b"k", b"v"), Err(Error::Closed(_))));
    assert!(matches!(
        db.iter(&ReadOptions::default()),
        Err(Error::Closed(_))
    ));
    assert!(matches!(db.snapshot(), Err(Error::Closed(_))));
    assert!(db.close().is_ok(), "a second close does nothing");
    drop(snap); // after close: must not touch the directory the new handle owns
    drop(it);
    assert_eq!(again.get(&key(99)).unwrap(), Some(b"v".to_vec()));
}

/// Dropping a log writer cuts the zeros reserved past its end off the file. That must happen
/// inside `close`, while the directory is still this handle's: done later (when the last
/// iterator lets go) it would shrink a file another instance has opened and mapped since, whose
/// reads past the new end then fault.
#[test]
fn close_with_a_live_iterator_cuts_the_logs_reserved_space_before_it_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options {
        min_blob_size: 64,
        ..options()
    };
    let db = DB::open(tmp.path(), opts).unwrap();
    for i in 0..200 {
        db.put(&key(i), &[b'a' + (i % 26) as u8; 500]).unwrap();
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    assert!(it.valid());
    db.close().unwrap();
    let mut logs = 0;
    for e in std::fs::read_dir(tmp.path()).unwrap() {
        let path = e.unwrap().path();
        if !path.extension().is_some_and(|x| x == "log" || x == "vlog") {
            continue;
        }
        let data = std::fs::read(&path).unwrap();
        assert!(!data.is_empty(), "{}", path.display());
        let tail = &data[data.len().saturating_sub(64)..];
        assert!(
            tail.iter().any(|&b| b != 0),
            "{} still ends in reserved zeros ({} bytes) after close",
            path.display(),
            data.len()
        );
        logs += 1;
    }
    assert!(
        logs >= 2,
        "expected a WAL and a value-log segment, found {logs}"
    );
    drop(it);
}

#[test]
fn close_does_not_wait_out_the_wal_sync_interval() {
    // An hour-long interval: a close that waited for the sync thread's next tick would hang.
    // Flushes wake that thread (it waits on the background-progress condition), so some closes
    // land while it is syncing, the case that used to miss the shutdown signal.
    let env = MemEnv::new();
    let opts = Options {
        write_buffer_size: 64 << 10,
        wal_sync_interval_ms: 3_600_000,
        ..Options::default()
    };
    for round in 0..20u32 {
        let db = open(&env, opts.clone()).unwrap();
        for i in 0..2_000 {
            db.put(&key(round * 10_000 + i), &[b'x'; 64]).unwrap();
        }
        db.flush().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(db.close().map_err(|e| e.to_string()));
        });
        let r = rx.recv_timeout(Duration::from_secs(120));
        assert!(
            matches!(r, Ok(Ok(()))),
            "round {round}: close hung or failed: {r:?}"
        );
    }
}

#[test]
fn a_forked_child_cannot_use_the_parents_handle() {
    let dir = tempfile::tempdir().unwrap();
    let db = DB::open(dir.path(), options()).unwrap();
    db.put(b"parent-before", b"1").unwrap();
    // SAFETY: the child only calls the engine (whose checks take no lock before refusing) and
    // then `_exit`s without running destructors or atexit handlers.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let put = db.put(b"child", b"x");
        let get = db.get(b"parent-before");
        let it = db.iter(&ReadOptions::default());
        let closed = db.close();
        let code = match (put, get, it, closed) {
            (
                Err(Error::Forked { .. }),
                Err(Error::Forked { .. }),
                Err(Error::Forked { .. }),
                Ok(()),
            ) => 0,
            _ => 1,
        };
        drop(db); // must neither join the parent's threads nor touch its files
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child could use the handle, or its close failed (status {status})"
    );
    db.put(b"parent-after", b"2").unwrap();
    db.close().unwrap();
    let db = DB::open(dir.path(), options()).unwrap();
    assert_eq!(db.get(b"child").unwrap(), None);
    assert_eq!(db.get(b"parent-before").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"parent-after").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn a_read_only_open_replays_the_log_in_memory_and_writes_nothing() {
    let env = MemEnv::new();
    let db = open(&env, options()).unwrap();
    for i in 0..500 {
        db.put(&key(i), &[b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    for i in 500..1_000 {
        db.put(&key(i), &[b'w'; 2_000]).unwrap(); // some in the value log
    }
    db.delete(&key(3)).unwrap();
    db.close().unwrap();
    let before = listing(&env);

    let ro = Options {
        read_only: true,
        ..options()
    };
    let a = open(&env, ro.clone()).unwrap();
    let b = open(&env, ro.clone()).unwrap(); // readers share the database
    assert!(matches!(open(&env, options()), Err(Error::Locked { .. })));
    assert_eq!(a.get(&key(10)).unwrap(), Some(vec![b'v'; 100]));
    assert_eq!(b.get(&key(900)).unwrap(), Some(vec![b'w'; 2_000]));
    assert_eq!(a.get(&key(3)).unwrap(), None);
    let mut it = a.iter(&ReadOptions::default()).unwrap();
    assert_eq!(count_from_first(&mut it), 999);
    assert!(matches!(a.put(b"k", b"v"), Err(Error::ReadOnly { .. })));
    assert!(matches!(a.flush(), Err(Error::ReadOnly { .. })));
    assert!(matches!(
        a.compact_range(None, None),
        Err(Error::ReadOnly { .. })
    ));
    assert!(matches!(a.gc(), Err(Error::ReadOnly { .. })));
    drop(it);
    a.close().unwrap();
    b.close().unwrap();
    assert_eq!(
        listing(&env),
        before,
        "a read-only open changed the directory"
    );

    let w = open(&env, options()).unwrap();
    assert_eq!(w.get(&key(999)).unwrap(), Some(vec![b'w'; 2_000]));
}

#[test]
fn read_only_refuses_a_missing_database_without_creating_it() {
    let env = MemEnv::new();
    let ro = Options {
        read_only: true,
        ..options()
    };
    assert!(matches!(open(&env, ro), Err(Error::NotADatabase { .. })));
    assert!(!env.exists(Path::new("/db")));
}

#[test]
fn recovery_on_a_full_disk_leaves_no_partial_file_and_reads_read_only() {
    let env = MemEnv::new();
    let db = open(&env, options()).unwrap();
    for i in 0..3_000 {
        db.put(&key(i), &[b'v'; 200]).unwrap(); // stays in the WAL: recovery must write a table
    }
    db.close().unwrap();
    let before = listing(&env);

    for after in [0, 1, 5, 50] {
        env.set_fault_plan(FaultPlan::new(7).with(
            FaultOp::Append,
            FaultError::NoSpace,
            Trigger::From(after),
        ));
        let e = match open(&env, options()) {
            Ok(_) => panic!("after {after}: recovery wrote on a full disk"),
            Err(e) => e,
        };
        assert!(e.to_string().contains("read_only"), "after {after}: {e}");
        env.clear_faults();
        let now = listing(&env);
        assert_eq!(
            now, before,
            "after {after}: the failed open left files behind"
        );
    }

    env.set_fault_plan(FaultPlan::new(7).with(
        FaultOp::Append,
        FaultError::NoSpace,
        Trigger::From(0),
    ));
    let ro = open(
        &env,
        Options {
            read_only: true,
            ..options()
        },
    )
    .unwrap();
    assert_eq!(ro.get(&key(2_999)).unwrap(), Some(vec![b'v'; 200]));
    ro.close().unwrap();
    env.clear_faults();

    let db = open(&env, options()).unwrap();
    assert_eq!(db.get(&key(0)).unwrap(), Some(vec![b'v'; 200]));
}

#[test]
fn a_refused_open_leaves_no_lock_file_in_a_directory_that_is_not_ours() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("notes");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), b"not a database").unwrap();
    for read_only in [false, true] {
        let opts = Options {
            read_only,
            ..options()
        };
        let e = DB::open(&dir, opts).err().expect("not a database");
        assert!(
            matches!(e, Error::NotADatabase { .. }),
            "read_only={read_only}: {e}"
        );
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["notes.txt"], "read_only={read_only}");
    }
}

#[test]
fn a_database_copied_without_its_lock_file_opens_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = DB::open(&dir, options()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    std::fs::remove_file(dir.join("LOCK")).unwrap();
    let ro = Options {
        read_only: true,
        ..options()
    };
    let db = DB::open(&dir, ro).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
    assert!(
        !dir.join("LOCK").exists(),
        "a read-only open creates nothing"
    );
    let db = DB::open(&dir, options()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn verify_reports_value_pointers_past_the_end_of_a_cut_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let opts = Options {
        min_blob_size: 1024,
        // Below half of it, the flush does not roll the segment over: it stays active.
        write_buffer_size: 4 << 20,
        ..options()
    };
    let db = DB::open(&dir, opts.clone()).unwrap();
    for i in 0..200 {
        db.put(&key(i), &[b'v'; 3_000]).unwrap();
    }
    db.flush().unwrap();
    assert!(db.verify().unwrap().blob_segments >= 1);
    db.close().unwrap(); // the segment stays active (unsealed) in the manifest
    let segment = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "vlog"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("a value-log segment");
    // 200 records of about 3 KB: cut it inside the records (the file may be preallocated).
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(300_000)
        .unwrap();
    // The tables point past the cut: a writable open refuses to seal the segment there and
    // keeps it as it is.
    let e = DB::open(&dir, opts.clone())
        .err()
        .expect("the open must refuse");
    assert!(
        matches!(&e, Error::Corruption { file, .. } if *file == segment),
        "{e}"
    );
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), 300_000);
    // A read-only open reads what is left, and verify sees the pointers past the end.
    let db = DB::open(
        &dir,
        Options {
            read_only: true,
            ..opts
        },
    )
    .unwrap();
    let e = db
        .verify()
        .expect_err("verify must see the pointers past the end");
    assert!(matches!(e, Error::Corruption { .. }), "{e}");
    assert!(e.to_string().contains("was cut"), "{e}");
}

/// A closed database's directory holds only the files its manifest lists: tables an iterator
/// kept alive through a compaction go at close (the iterator fails with `Closed` from then on),
/// so a copy of a closed database carries no dead files.
#[test]
fn close_removes_tables_only_a_live_iterator_kept() {
    let env = MemEnv::new();
    let opts = || Options {
        write_buffer_size: 64 << 10,
        ..options()
    };
    let db = open(&env, opts()).unwrap();
    for round in 0..3u8 {
        for i in 0..2_000 {
            db.put(&key(i), &[round; 40]).unwrap();
        }
        db.flush().unwrap();
    }
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    assert!(it.valid());
    db.compact_range(None, None).unwrap();
    let tables = |env: &MemEnv| {
        env.list_dir(Path::new("/db"))
            .unwrap()
            .iter()
            .filter(|n| n.ends_with(".sst"))
            .count()
    };
    let listed = |s: &attune_kv::Stats| s.level_files.iter().sum::<usize>();
    assert!(
        tables(&env) > listed(&db.stats()),
        "the iterator kept no replaced table: the test checks nothing"
    );
    db.close().unwrap();
    it.next();
    assert!(matches!(it.status(), Err(Error::Closed(_))));
    let ro = open(
        &env,
        Options {
            read_only: true,
            ..opts()
        },
    )
    .unwrap();
    assert_eq!(tables(&env), listed(&ro.stats()));
    assert_eq!(ro.get(&key(5)).unwrap(), Some(vec![2; 40]));
}
