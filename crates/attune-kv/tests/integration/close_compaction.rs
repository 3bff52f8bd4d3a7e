//! `close` and a running compaction: with `finish_compaction_on_close` (the default) the
//! compaction runs to its end and its output is installed, so the next open starts with the work
//! done; with it off the compaction stops and the inputs stay where they were.
//!
//! The compaction is held at a known point by an environment that blocks the creation of its
//! output table until the test has seen the close begin, so nothing depends on timing.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_kv::env::{Env, FileLock, MemEnv, RandomAccessFile, WritableFile};
use attune_kv::{Error, LearnedIndex, Options, DB};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::Arc;

/// Counts table files created; the `hold_at`-th waits until `release` is called.
#[derive(Default)]
struct Gate {
    state: Mutex<(u32, bool, bool)>, // (tables created, holding one, released)
    cv: Condvar,
}

struct GateEnv {
    inner: MemEnv,
    gate: Arc<Gate>,
    hold_at: u32,
}

impl Gate {
    fn wait_until_holding(&self) {
        let mut s = self.state.lock();
        while !s.1 {
            self.cv.wait(&mut s);
        }
    }
    fn release(&self) {
        let mut s = self.state.lock();
        s.2 = true;
        self.cv.notify_all();
    }
}

impl Env for GateEnv {
    fn create_dir_all(&self, d: &Path) -> attune_kv::Result<()> {
        self.inner.create_dir_all(d)
    }
    fn new_writable(&self, p: &Path) -> attune_kv::Result<Box<dyn WritableFile>> {
        if p.extension().is_some_and(|x| x == "sst") {
            let mut s = self.gate.state.lock();
            s.0 += 1;
            if s.0 == self.hold_at {
                s.1 = true;
                self.gate.cv.notify_all();
                while !s.2 {
                    self.gate.cv.wait(&mut s);
                }
            }
        }
        self.inner.new_writable(p)
    }
    fn new_appendable(&self, p: &Path) -> attune_kv::Result<Box<dyn WritableFile>> {
        self.inner.new_appendable(p)
    }
    fn open_random(&self, p: &Path) -> attune_kv::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_random(p)
    }
    fn read_all(&self, p: &Path) -> attune_kv::Result<Vec<u8>> {
        self.inner.read_all(p)
    }
    fn file_size(&self, p: &Path) -> attune_kv::Result<u64> {
        self.inner.file_size(p)
    }
    fn exists(&self, p: &Path) -> bool {
        self.inner.exists(p)
    }
    fn list_dir(&self, d: &Path) -> attune_kv::Result<Vec<String>> {
        self.inner.list_dir(d)
    }
    fn remove_file(&self, p: &Path) -> attune_kv::Result<()> {
        self.inner.remove_file(p)
    }
    fn rename(&self, a: &Path, b: &Path) -> attune_kv::Result<()> {
        self.inner.rename(a, b)
    }
    fn sync_dir(&self, d: &Path) -> attune_kv::Result<()> {
        self.inner.sync_dir(d)
    }
    fn lock(&self, p: &Path) -> attune_kv::Result<Box<dyn FileLock>> {
        self.inner.lock(p)
    }
    fn lock_shared(&self, p: &Path) -> attune_kv::Result<Box<dyn FileLock>> {
        self.inner.lock_shared(p)
    }
    fn now_micros(&self) -> u64 {
        self.inner.now_micros()
    }
    fn now_unix_millis(&self) -> u64 {
        self.inner.now_unix_millis()
    }
}

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
    let env = Arc::new(GateEnv {
        inner: mem.clone(),
        gate: gate.clone(),
        // The flushes create tables 1..=TRIGGER; the compaction's first output is the next.
        hold_at: TRIGGER + 1,
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
