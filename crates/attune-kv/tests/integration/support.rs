//! What the subjects share: opening a database on an in-memory file system, and reading all of
//! it back.

use attune_kv::env::{Env, FileLock, MemEnv, RandomAccessFile, WritableFile};
use attune_kv::{DbIterator, Options, ReadOptions, Result, DB};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Opens (or creates) the database at `/db` on `env`.
pub fn open_mem(env: &MemEnv, opts: Options) -> Result<DB> {
    open_mem_at(env, "/db", opts)
}

/// Opens (or creates) the database at `dir` on `env`.
pub fn open_mem_at(env: &MemEnv, dir: &str, opts: Options) -> Result<DB> {
    DB::open_with_env(Arc::new(env.clone()) as Arc<dyn Env>, Path::new(dir), opts)
}

/// Every key and its value, in order; the iterator must end without an error.
#[allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report
pub fn contents(db: &DB) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(&ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut m = BTreeMap::new();
    while it.valid() {
        m.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    m
}

/// How many entries `it` yields from the first on; the iterator must end without an error.
#[allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report
pub fn count_from_first(it: &mut DbIterator) -> usize {
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().unwrap();
    n
}

/// The file operation a [`GateEnv`] holds: creating, or removing, a file with this extension.
#[derive(Clone, Copy)]
pub enum Held {
    Create(&'static str),
    Remove(&'static str),
}

/// Holds one file operation at a known point until the test releases it, so that a test of
/// what runs meanwhile depends on no timing: once armed with `hold_at = n`, the n-th matching
/// operation from then on waits in `pass` until `release`.
#[derive(Default)]
pub struct Gate {
    state: parking_lot::Mutex<GateState>,
    cv: parking_lot::Condvar,
}

#[derive(Default)]
struct GateState {
    hold_at: Option<u32>,
    seen: u32,
    holding: bool,
    released: bool,
}

impl Gate {
    pub fn arm(&self, hold_at: u32) {
        let mut s = self.state.lock();
        s.hold_at = Some(hold_at);
        s.seen = 0;
    }
    pub fn wait_until_holding(&self) {
        let mut s = self.state.lock();
        while !s.holding {
            self.cv.wait(&mut s);
        }
    }
    pub fn release(&self) {
        self.state.lock().released = true;
        self.cv.notify_all();
    }
    fn pass(&self) {
        let mut s = self.state.lock();
        let Some(hold_at) = s.hold_at else { return };
        s.seen += 1;
        if s.seen == hold_at {
            s.holding = true;
            self.cv.notify_all();
            while !s.released {
                self.cv.wait(&mut s);
            }
        }
    }
}

/// An in-memory file system whose `held` operation passes through `gate`.
pub struct GateEnv {
    pub inner: MemEnv,
    pub gate: Arc<Gate>,
    pub held: Held,
}

impl GateEnv {
    fn check(&self, op: Held, p: &Path) {
        let ext = p.extension().and_then(|x| x.to_str());
        let hit = match (op, self.held) {
            (Held::Create(_), Held::Create(e)) | (Held::Remove(_), Held::Remove(e)) => {
                ext == Some(e)
            }
            _ => false,
        };
        if hit {
            self.gate.pass();
        }
    }
}

impl Env for GateEnv {
    fn create_dir_all(&self, d: &Path) -> Result<()> {
        self.inner.create_dir_all(d)
    }
    fn new_writable(&self, p: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(Held::Create(""), p);
        self.inner.new_writable(p)
    }
    fn new_appendable(&self, p: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.new_appendable(p)
    }
    fn open_random(&self, p: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_random(p)
    }
    fn read_all(&self, p: &Path) -> Result<Vec<u8>> {
        self.inner.read_all(p)
    }
    fn file_size(&self, p: &Path) -> Result<u64> {
        self.inner.file_size(p)
    }
    fn exists(&self, p: &Path) -> bool {
        self.inner.exists(p)
    }
    fn list_dir(&self, d: &Path) -> Result<Vec<String>> {
        self.inner.list_dir(d)
    }
    fn remove_file(&self, p: &Path) -> Result<()> {
        self.check(Held::Remove(""), p);
        self.inner.remove_file(p)
    }
    fn rename(&self, a: &Path, b: &Path) -> Result<()> {
        self.inner.rename(a, b)
    }
    fn sync_dir(&self, d: &Path) -> Result<()> {
        self.inner.sync_dir(d)
    }
    fn lock(&self, p: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(p)
    }
    fn lock_shared(&self, p: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock_shared(p)
    }
    fn now_micros(&self) -> u64 {
        self.inner.now_micros()
    }
    fn now_unix_millis(&self) -> u64 {
        self.inner.now_unix_millis()
    }
}
