//! An in-memory [`Env`] that models what a machine crash keeps and injects I/O faults, every
//! random choice drawn from a seed so that a failure replays.
//!
//! Data model: every file has `data` and a `synced` length. `WritableFile::sync` advances
//! `synced`. Name model: every directory keeps the set of names made durable by its last
//! `sync_dir` and the ordered list of name operations since then (create, unlink, rename, mkdir).
//! A directory created by `create_dir_all` is itself a name in its parent directory.
//!
//! Crashes:
//! - [`MemEnv::crash`] is the harshest clean crash: every unsynced byte and every name operation
//!   not made durable by `sync_dir` is lost.
//! - [`MemEnv::crash_torn`] is a crash as a disk and a journaling file system may leave it,
//!   chosen from a seed: per directory a *prefix* of the pending name operations survives
//!   (metadata journals commit in order); per file the unsynced tail is torn at sector granularity
//!   ([`SECTOR_BYTES`]): a prefix of whole sectors survives and, sometimes, the next sector holds
//!   garbage. Synced bytes are never touched (a sector write is atomic, so rewriting a partly
//!   synced sector keeps its synced bytes).
//!
//! Faults: a [`FaultPlan`] names which operations fail and how (ENOSPC, EIO), each decision a pure
//! function of the plan's seed, the operation kind and how many operations of that kind came
//! before, so a single-threaded history replays exactly (several threads replay the same
//! decisions per operation count, in whatever order the scheduler runs them). An ENOSPC append
//! may first write a seeded prefix of its bytes, as `write(2)` can. With
//! [`FaultPlan::sync_failure_loses_data`], a failed sync models Linux after a writeback error: the
//! bytes it was meant to make durable are lost at the next crash even if a later sync succeeds.
//! [`MemEnv::fail_after`] is the older, simpler switch: the n-th matching operation and every
//! later one fail until [`MemEnv::clear_faults`].
//!
//! [`MemEnv::power_off`] freezes the disk: every later mutating operation fails, so the threads
//! of a database still running cannot change what the next crash leaves behind.
//!
//! Thread safety: all state sits behind one mutex (file contents behind one more each); fine for
//! tests, not meant to be fast. Lock order: state, then a file.

use super::{Env, FileLock, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// The unit a torn write keeps or loses: 512 bytes, the atomic write unit of most disks. (4Kn
/// drives write 4096 atomically; tearing at 512 is the harsher test.)
pub const SECTOR_BYTES: usize = 512;

#[derive(Default)]
struct MemFile {
    data: Vec<u8>,
    synced: usize,
    /// Ranges a failed sync dropped (only with `sync_failure_loses_data`): zeros after a crash.
    lost: Vec<Range<usize>>,
}

type FileRef = Arc<Mutex<MemFile>>;

/// Which operations an injected fault hits ([`MemEnv::fail_after`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `append` fails with ENOSPC ("no space left on device").
    Write,
    /// `sync` and `sync_dir` fail with EIO.
    Sync,
}

/// An operation a [`FaultPlan`] rule can make fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultOp {
    /// `WritableFile::append`.
    Append,
    /// `WritableFile::sync`.
    Sync,
    /// `Env::sync_dir`.
    SyncDir,
    /// `Env::new_writable` and `Env::new_appendable`.
    Create,
    /// `Env::rename`.
    Rename,
    /// `Env::remove_file`.
    Remove,
    /// `RandomAccessFile::read_exact_at` and `Env::read_all`.
    Read,
}

impl FaultOp {
    /// Every kind, for reports.
    pub const ALL: [FaultOp; 7] = [
        FaultOp::Append,
        FaultOp::Sync,
        FaultOp::SyncDir,
        FaultOp::Create,
        FaultOp::Rename,
        FaultOp::Remove,
        FaultOp::Read,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultOp::Append => "append",
            FaultOp::Sync => "fsync",
            FaultOp::SyncDir => "fsync_dir",
            FaultOp::Create => "create",
            FaultOp::Rename => "rename",
            FaultOp::Remove => "unlink",
            FaultOp::Read => "read",
        }
    }
}

/// The error an injected fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// ENOSPC, "No space left on device".
    NoSpace,
    /// EIO, "Input/output error".
    Io,
}

impl FaultError {
    fn errno(self) -> i32 {
        match self {
            FaultError::NoSpace => libc::ENOSPC,
            FaultError::Io => libc::EIO,
        }
    }
}

/// When a rule fires, counted in operations of the rule's kind since the plan was installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Only the n-th operation (0-based) fails.
    Once(u64),
    /// The n-th operation and every later one fail.
    From(u64),
    /// Each operation fails with this probability in parts per million, decided by the seed.
    Random { per_million: u32 },
}

/// One fault rule: which operation, what error, when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultRule {
    pub op: FaultOp,
    pub error: FaultError,
    pub trigger: Trigger,
}

/// A deterministic schedule of injected faults.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    /// Seeds every random decision (random triggers, partial-append lengths).
    pub seed: u64,
    pub rules: Vec<FaultRule>,
    /// An append failing with ENOSPC first writes a seeded prefix of its bytes (possibly none),
    /// as a short `write(2)` would.
    pub partial_appends: bool,
    /// A failed `sync` loses the file's unsynced bytes at the next crash even if a later sync
    /// succeeds (Linux marks the dirty pages clean after a writeback error).
    pub sync_failure_loses_data: bool,
}

impl FaultPlan {
    pub fn new(seed: u64) -> Self {
        FaultPlan {
            seed,
            ..Default::default()
        }
    }

    /// Adds a rule (builder style).
    pub fn with(mut self, op: FaultOp, error: FaultError, trigger: Trigger) -> Self {
        self.rules.push(FaultRule { op, error, trigger });
        self
    }
}

/// SplitMix64: a well-mixed 64-bit hash, so a fault decision depends only on its inputs.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A small deterministic generator for crash shapes (no dependency; tests need no quality
/// beyond "every shape is reachable").
struct SeqRng(u64);

impl SeqRng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        mix(self.0)
    }
    /// Uniform-enough value in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// What a crash did, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Files left after the crash.
    pub files: usize,
    /// Unsynced bytes lost (including torn-off tails).
    pub bytes_dropped: u64,
    /// Files whose unsynced tail was kept in part (a torn write).
    pub torn_files: usize,
    /// Sectors filled with garbage.
    pub garbage_sectors: usize,
    /// Name operations kept / reverted (not made durable by `sync_dir`).
    pub dir_ops_kept: usize,
    pub dir_ops_reverted: usize,
    /// Byte ranges zeroed because a failed sync had dropped them.
    pub lost_ranges_zeroed: usize,
}

/// A name operation not yet made durable by `sync_dir` of its directory.
#[derive(Clone)]
enum DirOp {
    Link(PathBuf, FileRef),
    Unlink(PathBuf),
    Rename(PathBuf, PathBuf),
    MkDir(PathBuf),
}

#[derive(Default)]
struct PlanState {
    plan: FaultPlan,
    /// Operations of each kind seen since the plan was installed.
    counts: HashMap<FaultOp, u64>,
}

#[derive(Default)]
struct State {
    live: HashMap<PathBuf, FileRef>,
    durable: HashMap<PathBuf, FileRef>,
    /// Live directories (created by `create_dir_all`) and the durable ones.
    dirs: HashSet<PathBuf>,
    durable_dirs: HashSet<PathBuf>,
    /// Per directory: name operations since its last `sync_dir`, in order.
    pending: HashMap<PathBuf, Vec<DirOp>>,
    locks: HashSet<PathBuf>,
    /// Shared (read-only) lock holders per path.
    shared_locks: HashMap<PathBuf, usize>,
    /// (kind, operations left before the fault fires) for `fail_after`.
    faults: Vec<(FaultKind, u64)>,
    plan: Option<PlanState>,
    faults_fired: u64,
    fired_by_op: BTreeMap<FaultOp, u64>,
    /// Set by `power_off`: every mutating operation fails, as if the machine had stopped.
    dead: bool,
}

fn parent_of(p: &Path) -> PathBuf {
    p.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn io_err(op: &'static str, path: &Path, errno: i32) -> Error {
    Error::io(op, path, std::io::Error::from_raw_os_error(errno))
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

    fn fire(&mut self, op: FaultOp, path: &Path, error: FaultError) -> Error {
        self.faults_fired += 1;
        *self.fired_by_op.entry(op).or_insert(0) += 1;
        io_err(op.name(), path, error.errno())
    }

    /// Whether the plan fails this operation; counts it either way. Returns the error and a
    /// seeded value for the caller's choices (partial-append length).
    fn plan_decision(&mut self, op: FaultOp) -> Option<(FaultError, u64)> {
        let ps = self.plan.as_mut()?;
        let n = {
            let c = ps.counts.entry(op).or_insert(0);
            *c += 1;
            *c - 1
        };
        let seed = ps.plan.seed;
        for (i, r) in ps.plan.rules.iter().enumerate().filter(|(_, r)| r.op == op) {
            let h = mix(seed ^ mix((op as u64) << 56 ^ (i as u64) << 48 ^ n));
            let hit = match r.trigger {
                Trigger::Once(k) => n == k,
                Trigger::From(k) => n >= k,
                Trigger::Random { per_million } => h % 1_000_000 < u64::from(per_million),
            };
            if hit {
                return Some((r.error, mix(h)));
            }
        }
        None
    }

    /// Checks power, the plan and the `fail_after` faults for one operation.
    fn check(&mut self, op: FaultOp, path: &Path) -> Result<()> {
        self.check_alive(path)?;
        if let Some((e, _)) = self.plan_decision(op) {
            return Err(self.fire(op, path, e));
        }
        self.check_legacy(op, path)
    }

    fn check_legacy(&mut self, op: FaultOp, path: &Path) -> Result<()> {
        let kind = match op {
            FaultOp::Append => FaultKind::Write,
            FaultOp::Sync | FaultOp::SyncDir => FaultKind::Sync,
            _ => return Ok(()),
        };
        let mut fired = None;
        for (k, left) in self.faults.iter_mut() {
            if *k == kind {
                if *left == 0 {
                    fired = Some(match kind {
                        FaultKind::Write => FaultError::NoSpace,
                        FaultKind::Sync => FaultError::Io,
                    });
                    break;
                }
                *left -= 1;
            }
        }
        match fired {
            Some(e) => Err(self.fire(op, path, e)),
            None => Ok(()),
        }
    }

    fn record(&mut self, dir: PathBuf, op: DirOp) {
        self.pending.entry(dir).or_default().push(op);
    }

    /// Whether a directory exists after a crash that kept `dirs`: known to this env and kept,
    /// or never created here (a pre-existing directory, always durable).
    fn dir_survives(&self, dirs: &HashSet<PathBuf>, d: &Path) -> bool {
        let mut cur = Some(d);
        while let Some(c) = cur {
            if self.dirs.contains(c) && !dirs.contains(c) {
                return false;
            }
            cur = c.parent();
        }
        true
    }
}

/// In-memory environment for tests; cheap to clone (shared state).
#[derive(Clone)]
pub struct MemEnv {
    state: Arc<Mutex<State>>,
    start: Instant,
    /// A wall clock set by tests (Unix milliseconds); 0 reads the system's.
    wall_ms: Arc<std::sync::atomic::AtomicU64>,
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
            wall_ms: Default::default(),
        }
    }

    /// Sets the wall clock every clone reads (Unix milliseconds); 0 returns to the system's.
    /// Tests move time with it instead of sleeping.
    pub fn set_unix_millis(&self, ms: u64) {
        self.wall_ms.store(ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// Stops the machine: from now on every mutating operation fails, so threads of a database
    /// still running cannot change what a crash leaves behind. A crash powers it back on.
    pub fn power_off(&self) {
        self.state.lock().dead = true;
    }

    /// Simulates a machine crash losing everything not durable: unsynced bytes and name changes
    /// not made durable by `sync_dir`. Releases locks and powers the machine on again.
    pub fn crash(&self) -> CrashReport {
        self.crash_inner(None)
    }

    /// Simulates a machine crash whose shape comes from `seed`: per directory a prefix of the
    /// pending name operations survives, per file a sector-granular prefix of the unsynced bytes
    /// survives, sometimes followed by one garbage sector (see the module doc).
    pub fn crash_torn(&self, seed: u64) -> CrashReport {
        self.crash_inner(Some(SeqRng(mix(seed))))
    }

    fn crash_inner(&self, mut rng: Option<SeqRng>) -> CrashReport {
        let mut st = self.state.lock();
        let mut report = CrashReport::default();
        let mut names = st.durable.clone();
        let mut dirs = st.durable_dirs.clone();
        // Pending name operations, directories in a fixed order so a seed replays.
        let mut pending: Vec<(PathBuf, Vec<DirOp>)> = st.pending.drain().collect();
        pending.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, ops) in &pending {
            let keep = match rng.as_mut() {
                Some(r) => r.below(ops.len() as u64 + 1) as usize,
                None => 0,
            };
            report.dir_ops_kept += keep;
            report.dir_ops_reverted += ops.len() - keep;
            for op in &ops[..keep] {
                match op {
                    DirOp::Link(p, f) => {
                        names.insert(p.clone(), f.clone());
                    }
                    DirOp::Unlink(p) => {
                        names.remove(p);
                    }
                    DirOp::Rename(from, to) => {
                        if let Some(f) = names.remove(from) {
                            names.insert(to.clone(), f);
                        }
                    }
                    DirOp::MkDir(d) => {
                        dirs.insert(d.clone());
                    }
                }
            }
        }
        // Files in a directory that did not survive are gone with it.
        let gone: Vec<PathBuf> = names
            .keys()
            .filter(|p| !st.dir_survives(&dirs, &parent_of(p)))
            .cloned()
            .collect();
        for p in gone {
            names.remove(&p);
        }
        let dirs: HashSet<PathBuf> = dirs
            .iter()
            .filter(|d| st.dir_survives(&dirs, d))
            .cloned()
            .collect();
        // File contents, in path order so a seed replays; a file linked twice is cut once.
        let mut files: Vec<(&PathBuf, &FileRef)> = names.iter().collect();
        files.sort_by(|a, b| a.0.cmp(b.0));
        let mut seen = HashSet::new();
        for (_, f) in files {
            if seen.insert(Arc::as_ptr(f) as usize) {
                let mut f = f.lock();
                crash_file(&mut f, rng.as_mut(), &mut report);
            }
        }
        report.files = names.len();
        st.live = names.clone();
        st.durable = names;
        st.dirs = dirs.clone();
        st.durable_dirs = dirs;
        st.locks.clear();
        st.shared_locks.clear();
        st.dead = false;
        report
    }

    /// After `ops_before` more operations of `kind`, every further one fails.
    pub fn fail_after(&self, kind: FaultKind, ops_before: u64) {
        self.state.lock().faults.push((kind, ops_before));
    }

    /// Installs a fault plan (replacing any previous one); its operation counts start at zero.
    pub fn set_fault_plan(&self, plan: FaultPlan) {
        self.state.lock().plan = Some(PlanState {
            plan,
            counts: HashMap::new(),
        });
    }

    /// Removes all injected faults (the plan and `fail_after` faults).
    pub fn clear_faults(&self) {
        let mut st = self.state.lock();
        st.faults.clear();
        st.plan = None;
    }

    /// How many operations failed because of injected faults.
    pub fn faults_fired(&self) -> u64 {
        self.state.lock().faults_fired
    }

    /// Injected faults per operation kind.
    pub fn faults_fired_by_op(&self) -> BTreeMap<FaultOp, u64> {
        self.state.lock().fired_by_op.clone()
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

/// Cuts one file as a crash leaves it (see the module doc).
fn crash_file(f: &mut MemFile, rng: Option<&mut SeqRng>, report: &mut CrashReport) {
    let len = f.data.len();
    let synced = f.synced.min(len);
    let mut keep = synced;
    if let Some(r) = rng {
        if len > synced {
            // Candidate cut points: the synced length, every sector boundary after it, the end.
            let first = (synced / SECTOR_BYTES + 1) * SECTOR_BYTES;
            let boundaries = if first < len {
                (len - 1 - first) / SECTOR_BYTES + 1
            } else {
                0
            };
            keep = match r.below(4) {
                0 => synced,
                1 => len,
                _ if boundaries > 0 => first + r.below(boundaries as u64) as usize * SECTOR_BYTES,
                _ => synced,
            };
            if keep > synced {
                report.torn_files += usize::from(keep < len);
            }
            if keep < len && r.chance(4) {
                // The sector after the cut was being written: it holds garbage.
                let end = ((keep / SECTOR_BYTES + 1) * SECTOR_BYTES).min(len);
                for b in &mut f.data[keep..end] {
                    *b = r.next() as u8;
                }
                report.garbage_sectors += 1;
                report.bytes_dropped += (len - end) as u64;
                keep = end;
                f.data.truncate(keep);
                f.synced = keep;
                zero_lost(f, report);
                return;
            }
        }
    }
    report.bytes_dropped += (len - keep) as u64;
    f.data.truncate(keep);
    f.synced = keep;
    zero_lost(f, report);
}

fn zero_lost(f: &mut MemFile, report: &mut CrashReport) {
    let lost = std::mem::take(&mut f.lost);
    for r in lost {
        let end = r.end.min(f.data.len());
        if r.start < end {
            f.data[r.start..end].fill(0);
            report.lost_ranges_zeroed += 1;
        }
    }
}

struct MemWritable {
    file: FileRef,
    path: PathBuf,
    env: MemEnv,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut st = self.env.state.lock();
        st.check_alive(&self.path)?;
        if let Some((e, h)) = st.plan_decision(FaultOp::Append) {
            let partial = st.plan.as_ref().is_some_and(|p| p.plan.partial_appends);
            if partial && e == FaultError::NoSpace && !data.is_empty() {
                let n = (h % data.len() as u64) as usize;
                self.file.lock().data.extend_from_slice(&data[..n]);
            }
            return Err(st.fire(FaultOp::Append, &self.path, e));
        }
        st.check_legacy(FaultOp::Append, &self.path)?;
        self.file.lock().data.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        let mut st = self.env.state.lock();
        if let Err(e) = st.check(FaultOp::Sync, &self.path) {
            let loses = st
                .plan
                .as_ref()
                .is_some_and(|p| p.plan.sync_failure_loses_data);
            if loses && !st.dead {
                let mut f = self.file.lock();
                let (from, to) = (f.synced, f.data.len());
                if from < to {
                    f.lost.push(from..to);
                }
            }
            return Err(e);
        }
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
    state: Arc<Mutex<State>>,
}

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.state.lock().check_read(&self.path)?;
        let f = self.file.lock();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(buf.len());
        match f.data.get(start..end) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(super::read_past_end(
                &self.path,
                offset,
                buf.len(),
                f.data.len(),
            )),
        }
    }
    fn size(&self) -> u64 {
        self.size
    }
}

impl State {
    /// Reads work on a powered-off machine (nothing changes) but may hit a planned fault.
    fn check_read(&mut self, path: &Path) -> Result<()> {
        match self.plan_decision(FaultOp::Read) {
            Some((e, _)) => Err(self.fire(FaultOp::Read, path, e)),
            None => Ok(()),
        }
    }
}

struct MemLock {
    path: PathBuf,
    state: Arc<Mutex<State>>,
    shared: bool,
}
impl FileLock for MemLock {}
impl Drop for MemLock {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        if !self.shared {
            st.locks.remove(&self.path);
        } else if let Some(n) = st.shared_locks.get_mut(&self.path) {
            *n -= 1;
            if *n == 0 {
                st.shared_locks.remove(&self.path);
            }
        }
    }
}

impl MemEnv {
    fn create(&self, path: &Path, truncate: bool) -> Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.check(FaultOp::Create, path)?;
        let file = match st.live.get(path) {
            Some(f) if !truncate => f.clone(),
            _ => {
                let f: FileRef = Arc::new(Mutex::new(MemFile::default()));
                st.live.insert(path.to_path_buf(), f.clone());
                st.record(parent_of(path), DirOp::Link(path.to_path_buf(), f.clone()));
                f
            }
        };
        drop(st);
        Ok(Box::new(MemWritable {
            file,
            path: path.to_path_buf(),
            env: self.clone(),
        }))
    }
}

impl Env for MemEnv {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.check_alive(dir)?;
        let mut missing: Vec<PathBuf> = dir
            .ancestors()
            .filter(|d| !d.as_os_str().is_empty() && d.parent().is_some())
            .filter(|d| !st.dirs.contains(*d))
            .map(Path::to_path_buf)
            .collect();
        missing.reverse();
        for d in missing {
            st.dirs.insert(d.clone());
            st.record(parent_of(&d), DirOp::MkDir(d));
        }
        Ok(())
    }
    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path, true)
    }
    fn new_appendable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path, false)
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
            state: self.state.clone(),
        }))
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let mut st = self.state.lock();
        let f = st
            .live
            .get(path)
            .ok_or_else(|| Self::not_found("read", path))?
            .clone();
        st.check_read(path)?;
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
        st.check(FaultOp::Remove, path)?;
        st.live
            .remove(path)
            .ok_or_else(|| Self::not_found("unlink", path))?;
        st.record(parent_of(path), DirOp::Unlink(path.to_path_buf()));
        Ok(())
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.check(FaultOp::Rename, from)?;
        let f = st
            .live
            .remove(from)
            .ok_or_else(|| Self::not_found("rename", from))?;
        st.live.insert(to.to_path_buf(), f.clone());
        let (pf, pt) = (parent_of(from), parent_of(to));
        if pf == pt {
            st.record(pf, DirOp::Rename(from.to_path_buf(), to.to_path_buf()));
        } else {
            st.record(pf, DirOp::Unlink(from.to_path_buf()));
            st.record(pt, DirOp::Link(to.to_path_buf(), f));
        }
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        // "." is how a caller names the parent of a relative top-level path ("").
        let dir = if dir == Path::new(".") {
            Path::new("")
        } else {
            dir
        };
        let mut st = self.state.lock();
        st.check(FaultOp::SyncDir, dir)?;
        st.durable.retain(|p, _| p.parent() != Some(dir));
        let entries: Vec<(PathBuf, FileRef)> = st
            .live
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, f)| (p.clone(), f.clone()))
            .collect();
        st.durable.extend(entries);
        st.durable_dirs.retain(|d| d.parent() != Some(dir));
        let subdirs: Vec<PathBuf> = st
            .dirs
            .iter()
            .filter(|d| d.parent() == Some(dir))
            .cloned()
            .collect();
        st.durable_dirs.extend(subdirs);
        st.pending.remove(dir);
        Ok(())
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut st = self.state.lock();
        if st.shared_locks.contains_key(path) || !st.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: path.parent().unwrap_or(path).to_path_buf(),
            });
        }
        Ok(Box::new(MemLock {
            path: path.to_path_buf(),
            state: self.state.clone(),
            shared: false,
        }))
    }
    fn lock_shared(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut st = self.state.lock();
        if st.locks.contains(path) {
            return Err(Error::Locked {
                path: path.parent().unwrap_or(path).to_path_buf(),
            });
        }
        *st.shared_locks.entry(path.to_path_buf()).or_insert(0) += 1;
        Ok(Box::new(MemLock {
            path: path.to_path_buf(),
            state: self.state.clone(),
            shared: true,
        }))
    }
    fn now_micros(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }
    fn now_unix_millis(&self) -> u64 {
        match self.wall_ms.load(std::sync::atomic::Ordering::SeqCst) {
            0 => super::system_unix_millis(),
            ms => ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(env: &MemEnv, p: &str, data: &[u8], sync: bool) -> Box<dyn WritableFile> {
        let mut f = env.new_writable(Path::new(p)).unwrap();
        f.append(data).unwrap();
        if sync {
            f.sync().unwrap();
        }
        f
    }

    #[test]
    fn crash_drops_unsynced_bytes_and_undurable_names() {
        let env = MemEnv::new();
        let dir = Path::new("/db");
        env.create_dir_all(dir).unwrap();
        env.sync_dir(Path::new("/")).unwrap();
        let mut a = env.new_writable(&dir.join("a")).unwrap();
        a.append(b"hello").unwrap();
        a.sync().unwrap();
        env.sync_dir(dir).unwrap();
        a.append(b" world").unwrap();
        let mut b = env.new_writable(&dir.join("b")).unwrap();
        b.append(b"x").unwrap();
        b.sync().unwrap(); // synced data, but the name was never made durable
        let r = env.crash();
        assert_eq!(env.read_all(&dir.join("a")).unwrap(), b"hello");
        assert!(!env.exists(&dir.join("b")));
        assert_eq!(r.bytes_dropped, 6);
        assert_eq!(r.dir_ops_reverted, 1);
    }

    #[test]
    fn unsynced_delete_and_rename_revert_on_crash() {
        let env = MemEnv::new();
        env.create_dir_all(Path::new("/d")).unwrap();
        env.sync_dir(Path::new("/")).unwrap();
        drop(write(&env, "/d/old", b"old", true));
        drop(write(&env, "/d/tmp", b"new", true));
        env.sync_dir(Path::new("/d")).unwrap();
        env.remove_file(Path::new("/d/old")).unwrap();
        env.rename(Path::new("/d/tmp"), Path::new("/d/cur"))
            .unwrap();
        env.crash();
        assert_eq!(env.read_all(Path::new("/d/old")).unwrap(), b"old");
        assert_eq!(env.read_all(Path::new("/d/tmp")).unwrap(), b"new");
        assert!(!env.exists(Path::new("/d/cur")));
    }

    #[test]
    fn directory_not_made_durable_is_lost_with_its_files() {
        let env = MemEnv::new();
        env.create_dir_all(Path::new("/a/db")).unwrap();
        drop(write(&env, "/a/db/f", b"data", true));
        env.sync_dir(Path::new("/a/db")).unwrap();
        env.crash();
        assert!(
            !env.exists(Path::new("/a/db/f")),
            "parent dirs never synced"
        );
        assert!(!env.exists(Path::new("/a")));

        env.create_dir_all(Path::new("/a/db")).unwrap();
        env.sync_dir(Path::new("/")).unwrap();
        env.sync_dir(Path::new("/a")).unwrap();
        drop(write(&env, "/a/db/f", b"data", true));
        env.sync_dir(Path::new("/a/db")).unwrap();
        env.crash();
        assert_eq!(env.read_all(Path::new("/a/db/f")).unwrap(), b"data");
    }

    #[test]
    fn torn_crash_keeps_a_sector_prefix_and_never_synced_bytes() {
        let mut shapes = HashSet::new();
        for seed in 0..200u64 {
            let env = MemEnv::new();
            let mut f = write(&env, "/f", &[1u8; 700], true);
            f.append(&[2u8; 3000]).unwrap();
            env.sync_dir(Path::new("/")).unwrap();
            let r = env.crash_torn(seed);
            let data = env.read_all(Path::new("/f")).unwrap();
            assert!(data.len() >= 700, "seed {seed}: synced bytes lost");
            assert!(
                data[..700].iter().all(|&b| b == 1),
                "seed {seed}: synced bytes changed"
            );
            let twos = data[700..].iter().take_while(|&&b| b == 2).count();
            let end_of_twos = 700 + twos;
            assert!(
                end_of_twos == 700 || end_of_twos == 3700 || end_of_twos % SECTOR_BYTES == 0,
                "seed {seed}: kept prefix ends at {end_of_twos}, not a sector boundary"
            );
            let garbage = data.len() - end_of_twos;
            assert!(
                garbage <= SECTOR_BYTES,
                "seed {seed}: {garbage} garbage bytes"
            );
            assert_eq!(r.garbage_sectors > 0, garbage > 0 || r.garbage_sectors > 0);
            shapes.insert((end_of_twos, garbage > 0));
            // The same seed on the same history gives the same shape.
            let env2 = MemEnv::new();
            let mut f2 = write(&env2, "/f", &[1u8; 700], true);
            f2.append(&[2u8; 3000]).unwrap();
            env2.sync_dir(Path::new("/")).unwrap();
            assert_eq!(
                env2.crash_torn(seed),
                r,
                "seed {seed}: crash does not replay"
            );
            assert_eq!(env2.read_all(Path::new("/f")).unwrap(), data);
        }
        assert!(shapes.len() >= 8, "too few torn shapes: {shapes:?}");
    }

    #[test]
    fn torn_crash_keeps_a_prefix_of_name_operations() {
        for seed in 0..50u64 {
            let env = MemEnv::new();
            env.sync_dir(Path::new("/")).unwrap();
            for i in 0..6 {
                drop(write(&env, &format!("/f{i}"), b"x", true));
            }
            let r = env.crash_torn(seed);
            let kept: Vec<bool> = (0..6)
                .map(|i| env.exists(Path::new(&format!("/f{i}"))))
                .collect();
            let n = kept.iter().take_while(|&&k| k).count();
            assert!(
                kept[n..].iter().all(|&k| !k),
                "seed {seed}: not a prefix: {kept:?}"
            );
            assert_eq!(r.dir_ops_kept, n);
        }
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
    fn plan_once_fails_exactly_one_operation_then_recovers() {
        let env = MemEnv::new();
        env.set_fault_plan(FaultPlan::new(1).with(FaultOp::Sync, FaultError::Io, Trigger::Once(2)));
        let mut f = env.new_writable(Path::new("/f")).unwrap();
        let results: Vec<bool> = (0..5).map(|_| f.sync().is_ok()).collect();
        assert_eq!(results, [true, true, false, true, true]);
        assert_eq!(env.faults_fired_by_op().get(&FaultOp::Sync), Some(&1));
    }

    #[test]
    fn random_plan_replays_from_its_seed() {
        let run = |seed: u64| -> Vec<bool> {
            let env = MemEnv::new();
            let plan = FaultPlan::new(seed).with(
                FaultOp::Append,
                FaultError::NoSpace,
                Trigger::Random {
                    per_million: 200_000,
                },
            );
            env.set_fault_plan(plan);
            let mut f = env.new_writable(Path::new("/f")).unwrap();
            (0..200).map(|_| f.append(b"abc").is_ok()).collect()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let fails = run(7).iter().filter(|ok| !**ok).count();
        assert!((10..80).contains(&fails), "{fails} of 200 failed at 20 %");
    }

    #[test]
    fn partial_append_writes_a_prefix_then_fails() {
        let mut saw_partial = false;
        for seed in 0..20 {
            let env = MemEnv::new();
            let mut plan =
                FaultPlan::new(seed).with(FaultOp::Append, FaultError::NoSpace, Trigger::Once(1));
            plan.partial_appends = true;
            env.set_fault_plan(plan);
            let mut f = env.new_writable(Path::new("/f")).unwrap();
            f.append(b"0123").unwrap();
            assert!(f.append(b"456789").is_err());
            let n = f.len();
            assert!((4..10).contains(&n), "seed {seed}: {n}");
            saw_partial |= n > 4;
        }
        assert!(saw_partial);
    }

    #[test]
    fn failed_sync_can_lose_the_data_it_covered() {
        let env = MemEnv::new();
        let mut plan = FaultPlan::new(0).with(FaultOp::Sync, FaultError::Io, Trigger::Once(1));
        plan.sync_failure_loses_data = true;
        env.set_fault_plan(plan);
        env.sync_dir(Path::new("/")).unwrap();
        let mut f = write(&env, "/f", b"aa", true);
        f.append(b"bb").unwrap();
        assert!(f.sync().is_err());
        f.append(b"cc").unwrap();
        f.sync().unwrap(); // "succeeds", but bb was dropped by the failed writeback
        env.sync_dir(Path::new("/")).unwrap();
        env.crash();
        assert_eq!(env.read_all(Path::new("/f")).unwrap(), b"aa\0\0cc");
    }

    #[test]
    fn powered_off_machine_refuses_writes_but_reads() {
        let env = MemEnv::new();
        let mut f = write(&env, "/f", b"x", true);
        env.power_off();
        assert!(f.append(b"y").is_err());
        assert!(f.sync().is_err());
        assert!(env.new_writable(Path::new("/g")).is_err());
        assert_eq!(env.read_all(Path::new("/f")).unwrap(), b"x");
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
