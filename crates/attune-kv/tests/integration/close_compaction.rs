//! `close` and a running compaction: with `finish_compaction_on_close` (the default) the
//! compaction runs to its end and its output is installed, so the next open starts with the work
//! done; with it off the compaction stops and the inputs stay where they were.
//!
//! The compaction is held at a known point by an environment that blocks the creation of its
//! output table until the test has seen the close begin, so nothing depends on timing.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use crate::support::{Gate, GateEnv, Held};
use attune_kv::env::{Env, MemEnv};
use attune_kv::{Error, LearnedIndex, Options, DB};
use std::path::Path;
use std::sync::Arc;

const TRIGGER: u32 = 4;
/// Keys per flushed table; every table holds all of them, so the L0 tables overlap and the
/// compaction merges 4 × 3000 entries (more than one 4096-entry stretch between its checks).
const KEYS: u32 = 3000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Writes `TRIGGER` overlapping L0 tables, closes while their compaction is held, and returns
/// the level file counts a read-only open then sees.
fn close_during_compaction(finish: bool) -> Vec<usize> {
    let mem = MemEnv::new();
    let gate = Arc::new(Gate::default());
    // The flushes create tables 1..=TRIGGER; the compaction's first output is the next.
    gate.arm(TRIGGER + 1);
    let env = Arc::new(GateEnv {
        inner: mem.clone(),
        gate: gate.clone(),
        held: Held::Create("sst"),
    });
    let opts = Options {
        write_buffer_size: 64 << 20,
        wal_sync_interval_ms: 0,
        l0_compaction_trigger: TRIGGER as usize,
        learned_index: LearnedIndex::Off,
        finish_compaction_on_close: finish,
        ..Options::default()
    };
    let db = DB::open_with_env(env as Arc<dyn Env>, Path::new("/db"), opts).unwrap();
    for round in 0..TRIGGER {
        for i in 0..KEYS {
            db.put(&key(i), format!("v{round}-{i}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
    gate.wait_until_holding();
    let db = Arc::new(db);
    let closer = {
        let db = db.clone();
        std::thread::spawn(move || db.close())
    };
    // The close has begun once the handle refuses reads (it sets the flag before it waits).
    while !matches!(db.get(&key(0)), Err(Error::Closed(_))) {
        std::thread::yield_now();
    }
    gate.release();
    closer.join().unwrap().unwrap();
    drop(db);
    // A read-only open runs no background work: it shows what the close left.
    let ro = DB::open_with_env(
        Arc::new(mem) as Arc<dyn Env>,
        Path::new("/db"),
        Options {
            read_only: true,
            learned_index: LearnedIndex::Off,
            ..Options::default()
        },
    )
    .unwrap();
    for i in (0..KEYS).step_by(97) {
        let want = format!("v{}-{i}", TRIGGER - 1).into_bytes();
        assert_eq!(ro.get(&key(i)).unwrap(), Some(want));
    }
    ro.stats().level_files
}

#[test]
fn close_finishes_the_running_compaction_by_default() {
    assert!(Options::default().finish_compaction_on_close);
    let levels = close_during_compaction(true);
    assert_eq!(
        levels[0], 0,
        "L0 still holds the compaction's inputs: {levels:?}"
    );
    assert!(levels[1] >= 1, "no output installed in L1: {levels:?}");
}

#[test]
fn close_stops_the_running_compaction_when_asked() {
    let levels = close_during_compaction(false);
    assert_eq!(levels[0], TRIGGER as usize, "{levels:?}");
    assert_eq!(levels[1], 0, "{levels:?}");
}

#[test]
fn the_option_parses_and_is_described() {
    let mut o = Options::default();
    o.set("finish_compaction_on_close", "false").unwrap();
    assert!(!o.finish_compaction_on_close);
    assert!(o
        .describe()
        .iter()
        .any(|(k, v)| *k == "finish_compaction_on_close" && v == "false"));
    let e = o.set("finish_compaction_on_close", "maybe").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(e.to_string().contains("finish_compaction_on_close"), "{e}");
}
