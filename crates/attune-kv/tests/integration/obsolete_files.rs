//! Obsolete files are removed with the state mutex released: unlinking a flushed memtable's
//! 64 MiB log (or a compaction's input tables) makes the file system free and, with online
//! discard, trim its blocks, tens of milliseconds during which every writer used to wait.
//!
//! An environment holds the removal of a log at a known point until the test releases it, so
//! nothing depends on timing: a write made meanwhile must complete, and `flush` still returns
//! only after the log is gone.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{Gate, GateEnv, Held};
use attune_kv::env::{Env, MemEnv};
use attune_kv::{LearnedIndex, Options, DB};
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

fn logs(env: &MemEnv) -> usize {
    let names = env.list_dir(Path::new("/db")).unwrap();
    names.iter().filter(|n| n.ends_with(".log")).count()
}

#[test]
fn a_write_completes_while_the_flushed_log_is_being_removed() {
    let mem = MemEnv::new();
    let gate = Arc::new(Gate::default());
    let env = Arc::new(GateEnv {
        inner: mem.clone(),
        gate: gate.clone(),
        held: Held::Remove("log"),
    });
    let opts = Options {
        wal_sync_interval_ms: 0,
        learned_index: LearnedIndex::Off,
        ..Options::default()
    };
    let db = Arc::new(DB::open_with_env(env as Arc<dyn Env>, Path::new("/db"), opts).unwrap());
    for i in 0..100u32 {
        db.put(format!("k{i:04}").as_bytes(), b"before").unwrap();
    }
    gate.arm(1);
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || db.flush())
    };
    // The flush thread is now inside the removal of the log the flush emptied.
    gate.wait_until_holding();
    let (tx, rx) = mpsc::channel();
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let r = db
                .put(b"during", b"removal")
                .and_then(|()| db.get(b"during"));
            let _ = tx.send(r);
        })
    };
    // A write takes microseconds; a minute means it waits for the removal (without the
    // change it waits for ever, so the gate is released first to let the test end).
    let got = rx.recv_timeout(Duration::from_secs(60));
    let flush_done_while_held = flusher.is_finished();
    gate.release();
    writer.join().unwrap();
    flusher.join().unwrap().unwrap();
    let got = got
        .expect("a write waited for the removal of an obsolete log")
        .unwrap();
    assert_eq!(got.as_deref(), Some(&b"removal"[..]));
    assert!(
        !flush_done_while_held,
        "flush returned before the flushed log was removed"
    );
    // flush returned after the removal: only the live log remains.
    assert_eq!(logs(&mem), 1);
    assert_eq!(db.get(b"k0042").unwrap().as_deref(), Some(&b"before"[..]));
}
