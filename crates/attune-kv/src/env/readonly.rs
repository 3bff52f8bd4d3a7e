//! An [`Env`] that refuses every change: the environment of a database opened `read_only`.
//!
//! The engine skips its writing steps itself when read-only (no WAL, no recovery tables, no
//! manifest edit, no background threads); this wrapper is the guarantee behind that: a path the
//! engine forgot fails with [`Error::ReadOnly`] instead of writing to a disk that may be full,
//! mounted read-only, or shared with other read-only openers. Best-effort clean-ups (removing a
//! damaged cache file) fail quietly, as they do on any file-system error.
//!
//! Thread safety: as the wrapped environment's.

use super::{Env, FileLock, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// Wraps an environment; reads pass through, changes fail.
pub struct ReadOnlyEnv {
    inner: Arc<dyn Env>,
}

impl ReadOnlyEnv {
    pub fn new(inner: Arc<dyn Env>) -> Self {
        ReadOnlyEnv { inner }
    }
}

fn refuse<T>(path: &Path, op: &'static str) -> Result<T> {
    Err(Error::ReadOnly {
        path: path.to_path_buf(),
        op,
    })
}

impl Env for ReadOnlyEnv {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        refuse(dir, "creating a directory")
    }
    fn open_random_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_random_direct(path)
    }
    fn is_os_filesystem(&self) -> bool {
        self.inner.is_os_filesystem()
    }
    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        refuse(path, "creating a file")
    }
    fn new_log_writable(&self, path: &Path, _expected: u64) -> Result<Box<dyn WritableFile>> {
        refuse(path, "creating a log")
    }
    fn new_appendable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        refuse(path, "appending to a file")
    }
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_random(path)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn read_from(&self, path: &Path, offset: u64) -> Result<Vec<u8>> {
        self.inner.read_from(path, offset)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list_dir(dir)
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        refuse(path, "removing a file")
    }
    fn rename(&self, from: &Path, _to: &Path) -> Result<()> {
        refuse(from, "renaming a file")
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        refuse(dir, "syncing a directory")
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock_shared(path)
    }
    fn lock_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock_shared(path)
    }
    fn now_micros(&self) -> u64 {
        self.inner.now_micros()
    }
    fn now_unix_millis(&self) -> u64 {
        self.inner.now_unix_millis()
    }
}
