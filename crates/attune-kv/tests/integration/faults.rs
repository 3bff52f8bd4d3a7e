//! I/O faults: disk full or a failing fsync fails the write that hit it, the handle then refuses
//! writes (the log tail is unknown), and every write acknowledged before the fault is readable
//! after reopening.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::open_mem;
use attune_kv::env::{FaultKind, MemEnv};
use attune_kv::{Options, WriteOptions};
use std::path::Path;

fn options() -> Options {
    Options {
        write_buffer_size: 16 << 10,
        wal_sync_interval_ms: 0,
        ..Options::default()
    }
}

fn run(kind: FaultKind, after: u64) {
    let env = MemEnv::new();
    let _dir = Path::new("/db");
    let db = open_mem(&env, options()).unwrap();
    env.fail_after(kind, after);
    let mut acked = Vec::new();
    let mut failed = false;
    for i in 0..5000u32 {
        let k = format!("key{i:05}").into_bytes();
        match db.put_opt(&k, &[b'v'; 64], WriteOptions { sync: i % 2 == 0 }) {
            Ok(()) => {
                assert!(
                    !failed,
                    "{kind:?}/{after}: a write succeeded after a failed one"
                );
                acked.push(k);
            }
            Err(e) => {
                assert!(e.to_string().contains("error"), "{e}");
                failed = true;
            }
        }
    }
    assert!(failed, "{kind:?}/{after}: the fault never fired");
    drop(db);
    env.clear_faults();
    let db = open_mem(&env, options()).unwrap_or_else(|e| panic!("{kind:?}/{after}: reopen: {e}"));
    for k in &acked {
        assert!(
            db.get(k).unwrap().is_some(),
            "{kind:?}/{after}: acknowledged {k:?} lost"
        );
    }
    db.put(b"after", b"reopen").unwrap();
}

#[test]
fn disk_full_fails_the_write_and_keeps_acknowledged_data() {
    for after in [0, 1, 7, 100, 400, 1500] {
        run(FaultKind::Write, after);
    }
}

#[test]
fn failing_fsync_fails_the_write_and_keeps_acknowledged_data() {
    for after in [0, 3, 50, 300] {
        run(FaultKind::Sync, after);
    }
}
