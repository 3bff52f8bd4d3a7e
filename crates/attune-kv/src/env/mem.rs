//! An in-memory [`Env`] that models what a machine crash keeps and can inject I/O faults.
//!
//! Model: every file has `data` and a `synced` length. `WritableFile::sync` advances `synced`;
//! `sync_dir` makes the current set of names in that directory durable. [`MemEnv::crash`] drops
//! every unsynced byte and every name change not made durable by `sync_dir`, which is what a power
//! failure may do on a real file system. Faults ([`MemEnv::fail_after`]) turn the n-th matching
//! operation and all later ones into errors (ENOSPC for writes, EIO for syncs), until cleared.
//!
//! Thread safety: all state sits behind one mutex; fine for tests, not meant to be fast.

use super::{Env, FileLock, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(Default)]
struct MemFile {
    data: Vec<u8>,
    synced: usize,
}

type FileRef = Arc<Mutex<MemFile>>;

/// Which operations an injected fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `append` fails with ENOSPC ("no space left on device").
    Write,
    /// `sync` and `sync_dir` fail with EIO.
    Sync,
}

#[derive(Default)]
struct State {
    live: HashMap<PathBuf, FileRef>,
    durable: HashMap<PathBuf, FileRef>,
    dirs: HashSet<PathBuf>,
    locks: HashSet<PathBuf>,
    /// (kind, operations left before the fault fires).
    faults: Vec<(FaultKind, u64)>,
    faults_fired: u64,
    /// Set by `power_off`: every mutating operation fails, as if the machine had stopped.
    dead: bool,
}

impl State {
    fn check_alive(&self, path: &Path) -> Result<()> {
        if self.dead {
            return Err(Error::io(
                "write",
                path,
                std::io::Error::other("machine is powered off"),
            ));
        }
        Ok(())
    }

    fn check_fault(&mut self, kind: FaultKind, path: &Path) -> Result<()> {
        self.check_alive(path)?;
        for (k, left) in self.faults.iter_mut() {
            if *k == kind {
                if *left == 0 {
                    self.faults_fired += 1;
                    let (errno, op) = match kind {
                        FaultKind::Write => (libc::ENOSPC, "write"),
                        FaultKind::Sync => (libc::EIO, "fsync"),
                    };
                    return Err(Error::io(
                        op,
                        path,
                        std::io::Error::from_raw_os_error(errno),
                    ));
                }
                *left -= 1;
            }
        }
        Ok(())
    }
}

/// In-memory environment for tests; cheap to clone (shared state).
#[derive(Clone)]
pub struct MemEnv {
    state: Arc<Mutex<State>>,
    start: Instant,
}

impl Default for MemEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl MemEnv {
    pub fn new() -> Self {
        MemEnv {
            state: Arc::new(Mutex::new(State::default())),
            start: Instant::now(),
        }
    }

    /// Stops the machine: from now on every mutating operation fails, so threads of a database
    /// still running cannot change what a crash leaves behind. `crash` powers it back on.
    pub fn power_off(&self) {
        self.state.lock().dead = true;
    }

    /// Simulates a machine crash: unsynced bytes and non-durable names are lost, locks released,
    /// and the machine is powered on again.
    pub fn crash(&self) {
        let mut st = self.state.lock();
        st.dead = false;
        st.live = st.durable.clone();
        for f in st.live.values() {
            let mut f = f.lock();
            let keep = f.synced;
            f.data.truncate(keep);
        }
        st.locks.clear();
    }

    /// After `ops_before` more operations of `kind`, every further one fails.
    pub fn fail_after(&self, kind: FaultKind, ops_before: u64) {
        self.state.lock().faults.push((kind, ops_before));
    }

    /// Removes all injected faults.
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// How many operations failed because of injected faults.
    pub fn faults_fired(&self) -> u64 {
        self.state.lock().faults_fired
    }

    /// Overwrites one byte of a file in place (for corruption tests).
    pub fn corrupt_byte(&self, path: &Path, offset: usize, xor: u8) -> bool {
        let st = self.state.lock();
        match st.live.get(path) {
            Some(f) => {
                let mut f = f.lock();
                match f.data.get_mut(offset) {
                    Some(b) => {
                        *b ^= xor;
                        true
                    }
                    None => false,
                }
            }
            None => false,
        }
    }

    fn not_found(op: &'static str, path: &Path) -> Error {
        Error::io(op, path, std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

struct MemWritable {
    file: FileRef,
    path: PathBuf,
    env: MemEnv,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.env
            .state
            .lock()
            .check_fault(FaultKind::Write, &self.path)?;
        self.file.lock().data.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        self.env
            .state
            .lock()
            .check_fault(FaultKind::Sync, &self.path)?;
        let mut f = self.file.lock();
        f.synced = f.data.len();
        Ok(())
    }
    fn len(&self) -> u64 {
        self.file.lock().data.len() as u64
    }
}

struct MemRandom {
    file: FileRef,
    path: PathBuf,
    size: u64,
}

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let f = self.file.lock();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(buf.len());
        match f.data.get(start..end) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(Error::corruption(
                &self.path,
                offset,
                format!(
                    "read of {} bytes past end of file (size {})",
                    buf.len(),
                    f.data.len()
                ),
            )),
        }
    }
    fn size(&self) -> u64 {
        self.size
    }
}

struct MemLock {
    path: PathBuf,
    state: Arc<Mutex<State>>,
}
impl FileLock for MemLock {}
impl Drop for MemLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

impl Env for MemEnv {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.state.lock().dirs.insert(dir.to_path_buf());
        Ok(())
    }
    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file: FileRef = Arc::new(Mutex::new(MemFile::default()));
        let mut st = self.state.lock();
        st.check_alive(path)?;
        st.live.insert(path.to_path_buf(), file.clone());
        drop(st);
        Ok(Box::new(MemWritable {
            file,
            path: path.to_path_buf(),
            env: self.clone(),
        }))
    }
    fn new_appendable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = {
            let mut st = self.state.lock();
            st.check_alive(path)?;
            st.live.entry(path.to_path_buf()).or_default().clone()
        };
        Ok(Box::new(MemWritable {
            file,
            path: path.to_path_buf(),
            env: self.clone(),
        }))
    }
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let st = self.state.lock();
        let file = st
            .live
            .get(path)
            .ok_or_else(|| Self::not_found("open", path))?
            .clone();
        let size = file.lock().data.len() as u64;
        Ok(Arc::new(MemRandom {
            file,
            path: path.to_path_buf(),
            size,
        }))
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let st = self.state.lock();
        let f = st
            .live
            .get(path)
            .ok_or_else(|| Self::not_found("read", path))?;
        let data = f.lock().data.clone();
        Ok(data)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        let st = self.state.lock();
        let f = st
            .live
            .get(path)
            .ok_or_else(|| Self::not_found("stat", path))?;
        let n = f.lock().data.len() as u64;
        Ok(n)
    }
    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.live.contains_key(path) || st.dirs.contains(path)
    }
    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let st = self.state.lock();
        Ok(st
            .live
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect())
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(path)?;
        st.live
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| Self::not_found("unlink", path))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(from)?;
        let f = st
            .live
            .remove(from)
            .ok_or_else(|| Self::not_found("rename", from))?;
        st.live.insert(to.to_path_buf(), f);
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.check_fault(FaultKind::Sync, dir)?;
        st.durable.retain(|p, _| p.parent() != Some(dir));
        let entries: Vec<(PathBuf, FileRef)> = st
            .live
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, f)| (p.clone(), f.clone()))
            .collect();
        st.durable.extend(entries);
        Ok(())
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut st = self.state.lock();
        if !st.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: path.parent().unwrap_or(path).to_path_buf(),
            });
        }
        Ok(Box::new(MemLock {
            path: path.to_path_buf(),
            state: self.state.clone(),
        }))
    }
    fn now_micros(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_drops_unsynced_bytes_and_undurable_names() {
        let env = MemEnv::new();
        let dir = Path::new("/db");
        env.create_dir_all(dir).unwrap();
        let mut a = env.new_writable(&dir.join("a")).unwrap();
        a.append(b"hello").unwrap();
        a.sync().unwrap();
        env.sync_dir(dir).unwrap();
        a.append(b" world").unwrap();
        let mut b = env.new_writable(&dir.join("b")).unwrap();
        b.append(b"x").unwrap();
        b.sync().unwrap(); // synced data, but the name was never made durable
        env.crash();
        assert_eq!(env.read_all(&dir.join("a")).unwrap(), b"hello");
        assert!(!env.exists(&dir.join("b")));
    }

    #[test]
    fn injected_write_fault_fires_after_n_operations() {
        let env = MemEnv::new();
        let mut f = env.new_writable(Path::new("/f")).unwrap();
        env.fail_after(FaultKind::Write, 1);
        f.append(b"ok").unwrap();
        let err = f.append(b"fails").unwrap_err();
        assert!(err.to_string().contains("No space left"), "{err}");
        assert_eq!(env.faults_fired(), 1);
    }

    #[test]
    fn second_lock_is_refused_until_the_first_is_dropped() {
        let env = MemEnv::new();
        let l = env.lock(Path::new("/db/LOCK")).unwrap();
        assert!(matches!(
            env.lock(Path::new("/db/LOCK")),
            Err(Error::Locked { .. })
        ));
        drop(l);
        env.lock(Path::new("/db/LOCK")).unwrap();
    }
}
