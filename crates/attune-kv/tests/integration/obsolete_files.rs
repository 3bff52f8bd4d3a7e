//! Obsolete files are removed with the state mutex released: unlinking a flushed memtable's
//! 64 MiB log (or a compaction's input tables) makes the file system free and, with online
//! discard, trim its blocks, tens of milliseconds during which every writer used to wait.
//!
//! An environment holds the removal of a log at a known point until the test releases it, so
//! nothing depends on timing: a write made meanwhile must complete, and `flush` still returns
//! only after the log is gone.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_kv::env::{Env, FileLock, MemEnv, RandomAccessFile, WritableFile};
use attune_kv::{LearnedIndex, Options, DB};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// Once armed, the first removal of a log waits until `release`.
#[derive(Default)]
struct Gate {
    state: Mutex<(bool, bool, bool)>, // (armed, holding one, released)
    cv: Condvar,
}

impl Gate {
    fn arm(&self) {
        self.state.lock().0 = true;
    }
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

struct GateEnv {
    inner: MemEnv,
    gate: Arc<Gate>,
}

impl Env for GateEnv {
    fn create_dir_all(&self, d: &Path) -> attune_kv::Result<()> {
        self.inner.create_dir_all(d)
    }
    fn new_writable(&self, p: &Path) -> attune_kv::Result<Box<dyn WritableFile>> {
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
        if p.extension().is_some_and(|x| x == "log") {
            let mut s = self.gate.state.lock();
            if s.0 && !s.1 {
                s.1 = true;
                self.gate.cv.notify_all();
                while !s.2 {
                    self.gate.cv.wait(&mut s);
                }
            }
        }
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
    gate.arm();
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
