//! What the subjects share: opening a database on an in-memory file system, and reading all of
//! it back.

use attune_kv::env::{Env, MemEnv};
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
