//! The runtime: one scheduler thread that owns the mechanism (an io_uring ring or a pool of
//! pread/pwrite threads) and moves every pipe's transfers in blocks, at most `queue_depth`
//! requests in flight per pipe and in all.
//!
//! Threads: `Runtime`, `Pipe` and `Transfer` are `Send + Sync`; any thread may start transfers,
//! wait on them or cancel them. What stays true:
//! * a transfer holds its pipe, hence both locators, until its last request completed: dropping a
//!   `Transfer`, a `Pipe`, a `Locator` or the `Runtime` never frees memory a request still uses;
//! * dropping the last user handle of the runtime (its `Runtime`s and `Pipe`s) cancels what is
//!   queued and returns only when nothing of it is in flight (transfers already submitted keep
//!   their memory alive until then);
//! * a cancelled transfer issues no new request and completes once its requests in flight have.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::backend::{
    Backend, Dir, Done, Job, JobWork, PoolShared, Req, ThreadBackend, UringBackend, BUFFER_SLOTS,
    REGISTER_SLOTS,
};
use crate::error::{Error, Result};
use crate::locator::{FileMap, FileRes, Locator, DIRECT_ALIGN_BYTES};
use crate::mechanism::{choose, registrable, Mechanism, MechanismChoice, Probe};

/// Requests in flight in every runtime of the process (the stress test's witness).
static REQUESTS_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// Requests issued and not yet completed, across every runtime of the process.
pub fn requests_in_flight() -> u64 {
    REQUESTS_IN_FLIGHT.load(Ordering::SeqCst)
}

/// Options of a runtime.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// Which mechanism moves data between files and memory. Default: `Auto`.
    pub mechanism: MechanismChoice,
    /// Requests in flight at most, in all (the ring's size; the thread pool's size, capped at
    /// 64 threads). Default 32: fio's usual depth for NVMe, and deep enough for the sort.
    pub queue_depth: u32,
    /// Default block size of a pipe (bytes per request). Default 128 KiB, the kernel's default
    /// max request size on most NVMe devices; a power of two, 512 B to 64 MiB.
    pub block_bytes: u64,
    /// Register pipes' memory with io_uring (fixed buffers). Default on; off for comparisons.
    pub register_buffers: bool,
    /// Register pipes' files with io_uring (fixed files). Default on.
    pub fixed_files: bool,
    /// Register a pipe's memory block by block, one registered buffer per `block_bytes` piece
    /// (as fio registers one buffer per queue slot), instead of the whole memory as one buffer.
    /// Default on. Used when the memory holds 2 to [`PIECES_MAX`] whole blocks and that many
    /// consecutive slots are free; otherwise the whole memory is one buffer. A request that
    /// straddles two pieces goes unregistered.
    pub register_per_block: bool,
    /// A kernel thread polls the ring's submission queue (io_uring SQPOLL), so issuing a request
    /// needs no system call while the thread is awake; it sleeps after this many idle
    /// milliseconds. Default None (off): the thread spins a core, which pays on a machine with
    /// cores to spare and costs on a shared one. Refused by the kernel: a plain ring, reported.
    pub sqpoll_idle_ms: Option<u32>,
    /// io_uring: at most this many requests per `io_uring_enter` (fio's `iodepth_batch_submit`).
    /// Default 1, fio's default: a request goes to the kernel as soon as it is ready, so the
    /// device receives requests one by one as slots free up. 0: every ready request in one
    /// call, which spends fewer system calls per request but hands the device bursts (on the
    /// virtual disk measured in docs/data-pipes.md, 4 KiB random reads at depth 16 were about
    /// 0.75× as fast that way, for fio as for the pipe).
    pub submit_batch: u32,
}

/// Most registered pieces one memory takes (the rest of the slot table stays for other pipes).
pub const PIECES_MAX: u64 = 256;

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            mechanism: MechanismChoice::Auto,
            queue_depth: 32,
            block_bytes: 128 * 1024,
            register_buffers: true,
            fixed_files: true,
            register_per_block: true,
            sqpoll_idle_ms: None,
            submit_batch: 1,
        }
    }
}

/// What the runtime chose and why.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RuntimeReport {
    /// The mechanism of file pipes.
    pub mechanism: Mechanism,
    /// Fallbacks taken while choosing it, with the kernel's reasons.
    pub fallbacks: Vec<String>,
    pub queue_depth: u32,
    pub block_bytes: u64,
    /// Why registered buffers / fixed files are unavailable on this ring (None: available).
    pub registered_buffers_refused: Option<String>,
    pub fixed_files_refused: Option<String>,
    /// Whether a kernel thread polls the submission queue (SQPOLL).
    pub sqpoll: bool,
    /// Why SQPOLL, asked for, is off (None: not asked for, or on).
    pub sqpoll_refused: Option<String>,
    /// io_uring requests per `io_uring_enter` at most (0: every ready request at once).
    pub submit_batch: u32,
}

/// A pipe's visible state.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PipeState {
    pub source: String,
    pub destination: String,
    pub mechanism: String,
    pub block_bytes: u64,
    pub queue_depth: u32,
    /// Whether the memory side is a registered io_uring buffer, and if not why.
    pub registered_buffer: bool,
    pub registered_buffer_refused: Option<String>,
    /// Registered buffers the memory side spans: 1 when registered whole, one per block when
    /// registered block by block, 0 when not registered.
    pub registered_pieces: u32,
    /// Whether the file side is an io_uring fixed file.
    pub fixed_file: bool,
    pub bytes_moved: u64,
    pub requests_done: u64,
    pub requests_in_flight: u64,
    pub bytes_in_flight: u64,
    pub transfers_done: u64,
    pub transfers_failed: u64,
    pub transfers_cancelled: u64,
}

#[derive(Default)]
struct PipeStats {
    bytes_moved: AtomicU64,
    requests_done: AtomicU64,
    requests_in_flight: AtomicU64,
    bytes_in_flight: AtomicU64,
    transfers_done: AtomicU64,
    transfers_failed: AtomicU64,
    transfers_cancelled: AtomicU64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Copy,
}

struct Registration {
    /// The first slot of the memory's registered buffers.
    buf_index: Option<u16>,
    /// Slots from `buf_index` on, and the bytes each covers (0: one buffer, the whole memory).
    buf_count: u16,
    buf_piece_bytes: u64,
    buf_refused: Option<String>,
    fixed_file: Option<u32>,
}

pub(crate) struct PipeInner {
    src: Locator,
    dst: Locator,
    kind: Kind,
    mechanism: Mechanism,
    block_bytes: u64,
    queue_depth: u32,
    reg: Registration,
    stats: PipeStats,
    eventfd: i32,
    rt: Arc<RtInner>,
}

impl Drop for PipeInner {
    fn drop(&mut self) {
        // SAFETY: our own eventfd.
        unsafe {
            libc::close(self.eventfd);
        }
        let mut rel = self.rt.releases.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = self.mem_loc().memory() {
            if self.reg.buf_index.is_some() {
                rel.push(Release::Buffer(m.id));
            }
        }
        if let Some(f) = self.file_loc().and_then(|l| l.file_res()) {
            if self.reg.fixed_file.is_some() {
                rel.push(Release::File(f.id));
            }
        }
    }
}

impl PipeInner {
    fn mem_loc(&self) -> &Locator {
        match self.kind {
            Kind::Read => &self.dst,
            _ => &self.src,
        }
    }

    fn file_loc(&self) -> Option<&Locator> {
        match self.kind {
            Kind::Read => Some(&self.src),
            Kind::Write => Some(&self.dst),
            Kind::Copy => None,
        }
    }
}

enum Release {
    Buffer(u64),
    File(u64),
}

/// One block of a transfer: `len` bytes from source offset `src` to destination offset `dst`.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    src: u64,
    dst: u64,
    len: u64,
}

struct TransferShared {
    result: Mutex<Option<Result<u64>>>,
    cv: Condvar,
    cancel: AtomicBool,
    bytes_done: AtomicU64,
}

/// An asynchronous transfer: poll it, wait for it, cancel it. Dropping it does not cancel it.
#[derive(Clone)]
pub struct Transfer {
    shared: Arc<TransferShared>,
}

impl Transfer {
    /// True once the transfer finished (done, failed or cancelled).
    pub fn is_done(&self) -> bool {
        self.lock().is_some()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Result<u64>>> {
        self.shared.result.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the end; the bytes moved or the first error.
    pub fn wait(&self) -> Result<u64> {
        let mut r = self.lock();
        loop {
            if let Some(r) = r.as_ref() {
                return r.clone();
            }
            r = self.shared.cv.wait(r).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits at most `timeout`; None if still running.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<u64>> {
        let r = self.lock();
        let (r, _) = self
            .shared
            .cv
            .wait_timeout_while(r, timeout, |r| r.is_none())
            .unwrap_or_else(|p| p.into_inner());
        r.clone()
    }

    /// The result if done, without waiting.
    pub fn poll(&self) -> Option<Result<u64>> {
        self.lock().clone()
    }

    /// Asks the runtime to stop: no new request is issued; the result becomes `Cancelled`
    /// once those in flight completed (or the transfer's own result if it already ended).
    pub fn cancel(&self) {
        self.shared.cancel.store(true, Ordering::SeqCst);
    }

    /// Bytes completed so far.
    pub fn bytes_done(&self) -> u64 {
        self.shared.bytes_done.load(Ordering::Relaxed)
    }
}

enum Cmd {
    Attach {
        pipe: Arc<PipeInner>,
        reply: SyncSender<Registration>,
    },
    Submit {
        id: u64,
        pipe: Arc<PipeInner>,
        chunks: VecDeque<Chunk>,
        shared: Arc<TransferShared>,
    },
    Shutdown,
}

struct RtInner {
    tx: SyncSender<Cmd>,
    /// The thread pool's handle that wakes the scheduler when a command is sent (the scheduler
    /// of a thread pool sleeps until a transfer ends, not after every request).
    pool: Option<Arc<PoolShared>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    report: RuntimeReport,
    releases: Mutex<Vec<Release>>,
    next_id: AtomicU64,
    /// User handles alive (`Runtime`s and `Pipe`s); the last one to go shuts the runtime down
    /// and waits until nothing is in flight.
    users: AtomicU64,
    /// Set by the scheduler when it has stopped with nothing in flight.
    drained: (Mutex<bool>, Condvar),
}

impl RtInner {
    /// Sends a command to the scheduler and wakes it.
    fn send(&self, cmd: Cmd) -> std::result::Result<(), ()> {
        self.tx.send(cmd).map_err(|_| ())?;
        if let Some(p) = &self.pool {
            p.kick();
        }
        Ok(())
    }
}

/// A user's share of the runtime: the last one dropped drains it (see the module doc).
struct UserHandle(Arc<RtInner>);

impl UserHandle {
    fn new(rt: &Arc<RtInner>) -> UserHandle {
        rt.users.fetch_add(1, Ordering::SeqCst);
        UserHandle(Arc::clone(rt))
    }
}

impl Clone for UserHandle {
    fn clone(&self) -> Self {
        UserHandle::new(&self.0)
    }
}

impl Drop for UserHandle {
    fn drop(&mut self) {
        if self.0.users.fetch_sub(1, Ordering::SeqCst) != 1 {
            return;
        }
        // The last user handle: no one can start a transfer any more. Cancel what is queued and
        // wait until every request in flight has completed, so that when this returns no request
        // of this runtime is in the kernel or in a pread thread.
        if self.0.send(Cmd::Shutdown).is_err() {
            return;
        }
        let (lock, cv) = &self.0.drained;
        let mut done = lock.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            done = cv.wait(done).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for RtInner {
    fn drop(&mut self) {
        let h = self
            .thread
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let Some(h) = h else { return };
        if h.thread().id() == std::thread::current().id() {
            // The last handle went away inside the scheduler (a transfer held the last pipe):
            // dropping `tx` disconnects the channel, which the scheduler takes as shutdown,
            // and it finishes what is in flight before it returns. It cannot join itself.
            return;
        }
        let _ = self.send(Cmd::Shutdown);
        let _ = h.join();
    }
}

/// The Data Pipes runtime: create it once, connect locators with [`Runtime::pipe`].
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RtInner>,
    _user: UserHandle,
}

/// Options of one pipe (defaults: the runtime's).
#[derive(Clone, Copy, Debug, Default)]
pub struct PipeOptions {
    /// Bytes per request.
    pub block_bytes: Option<u64>,
    /// Requests of this pipe in flight at most (≤ the runtime's depth).
    pub queue_depth: Option<u32>,
}

impl Runtime {
    /// Sets up the mechanism (probing the kernel) and starts the scheduler thread.
    pub fn new(opts: RuntimeOptions) -> Result<Runtime> {
        if opts.queue_depth == 0 || opts.queue_depth > 4096 {
            return Err(Error::InvalidArgument(format!(
                "queue depth {} must be 1..=4096",
                opts.queue_depth
            )));
        }
        check_block(opts.block_bytes)?;
        let wants = |m: Mechanism| match opts.mechanism {
            MechanismChoice::Auto => true,
            MechanismChoice::Only(m2) => m2 == m,
        };
        let mut uring = None;
        let mut probe = Probe {
            io_uring: Err("not tried".into()),
            threads: Err("not tried".into()),
        };
        if wants(Mechanism::IoUring) {
            match UringBackend::new(opts.queue_depth, opts.sqpoll_idle_ms, opts.submit_batch) {
                Ok(u) => {
                    probe.io_uring = Ok(());
                    uring = Some(u);
                }
                Err(e) => probe.io_uring = Err(e),
            }
        }
        let mut threads = None;
        if uring.is_none() && wants(Mechanism::Threads) {
            match ThreadBackend::new(opts.queue_depth.min(64)) {
                Ok(t) => {
                    probe.threads = Ok(());
                    threads = Some(t);
                }
                Err(e) => probe.threads = Err(e),
            }
        }
        let (mechanism, fallbacks) = choose(opts.mechanism, &probe)?;
        let mut report = RuntimeReport {
            mechanism,
            fallbacks,
            queue_depth: opts.queue_depth,
            block_bytes: opts.block_bytes,
            registered_buffers_refused: None,
            fixed_files_refused: None,
            sqpoll: false,
            sqpoll_refused: None,
            submit_batch: opts.submit_batch,
        };
        let backend = match mechanism {
            Mechanism::IoUring => {
                let u = uring.ok_or_else(|| Error::InvalidArgument("no ring".into()))?;
                report.registered_buffers_refused = if !opts.register_buffers {
                    Some("switched off".into())
                } else {
                    u.buffers_sparse.clone().err()
                };
                match &u.sqpoll {
                    Ok(on) => report.sqpoll = *on,
                    Err(e) => report.sqpoll_refused = Some(e.clone()),
                }
                report.fixed_files_refused = if !opts.fixed_files {
                    Some("switched off".into())
                } else {
                    u.files_sparse.clone().err()
                };
                Some(Backend::Uring(Box::new(u)))
            }
            Mechanism::Threads => threads.map(Backend::Threads),
            _ => None,
        };
        let pool = match &backend {
            Some(Backend::Threads(t)) => Some(t.waker()),
            _ => None,
        };
        let (tx, rx) = sync_channel::<Cmd>(1024);
        let sched = Scheduler {
            backend,
            queue_depth: opts.queue_depth,
            reg_buffers: report.registered_buffers_refused.is_none(),
            reg_files: report.fixed_files_refused.is_none(),
            reg_per_block: opts.register_per_block,
            buffer_slots: HashMap::new(),
            file_slots: HashMap::new(),
            actives: HashMap::new(),
            order: VecDeque::new(),
            ops: HashMap::new(),
            next_token: 1,
            in_flight: 0,
            jobs: 0,
            closing: false,
        };
        let inner = Arc::new(RtInner {
            tx,
            pool,
            thread: Mutex::new(None),
            report,
            releases: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            users: AtomicU64::new(0),
            drained: (Mutex::new(false), Condvar::new()),
        });
        let weak = Arc::downgrade(&inner);
        let h = std::thread::Builder::new()
            .name("attune-pipes-scheduler".into())
            .spawn(move || sched.run(rx, weak))
            .map_err(|e| Error::Unsupported {
                path: "runtime".into(),
                reason: format!("cannot start the scheduler thread: {e}"),
            })?;
        *inner.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
        let user = UserHandle::new(&inner);
        Ok(Runtime { inner, _user: user })
    }

    /// What the runtime chose.
    pub fn report(&self) -> &RuntimeReport {
        &self.inner.report
    }

    /// Declares a pipe from `src` to `dst`; rejects a path the runtime cannot serve.
    pub fn pipe(&self, src: &Locator, dst: &Locator, opts: PipeOptions) -> Result<Pipe> {
        let rep = &self.inner.report;
        let path = format!("{} -> {}", src.describe(), dst.describe());
        let kind = match (src.memory().is_some(), dst.memory().is_some()) {
            (true, true) => Kind::Copy,
            (false, true) => Kind::Read,
            (true, false) => Kind::Write,
            (false, false) => {
                return Err(Error::Unsupported {
                    path,
                    reason: "file to file has no direct mechanism here; compose two pipes \
                             through a memory locator (Pipe::then)"
                        .into(),
                })
            }
        };
        let mechanism = if kind == Kind::Copy {
            Mechanism::Memcpy
        } else {
            rep.mechanism
        };
        if let Some(f) = src.file_res().or(dst.file_res()) {
            if mechanism == Mechanism::Mmap && f.direct {
                return Err(Error::Unsupported {
                    path,
                    reason: "the mmap mechanism cannot serve an O_DIRECT file (a mapping goes \
                             through the page cache); use io_uring or threads"
                        .into(),
                });
            }
            if kind == Kind::Write && !f.writable {
                return Err(Error::Unsupported {
                    path,
                    reason: "the destination file was opened read-only (FileOptions::write)".into(),
                });
            }
        }
        let block_bytes = opts.block_bytes.unwrap_or(rep.block_bytes);
        check_block(block_bytes)?;
        let queue_depth = opts.queue_depth.unwrap_or(rep.queue_depth);
        if queue_depth == 0 || queue_depth > rep.queue_depth {
            return Err(Error::InvalidArgument(format!(
                "pipe queue depth {queue_depth} must be 1..={} (the runtime's)",
                rep.queue_depth
            )));
        }
        // SAFETY: plain eventfd creation.
        let eventfd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if eventfd < 0 {
            return Err(Error::last_os("eventfd", Path::new("eventfd"), 0));
        }
        let pipe = Arc::new(PipeInner {
            src: src.clone(),
            dst: dst.clone(),
            kind,
            mechanism,
            block_bytes,
            queue_depth,
            reg: Registration {
                buf_index: None,
                buf_count: 0,
                buf_piece_bytes: 0,
                buf_refused: None,
                fixed_file: None,
            },
            stats: PipeStats::default(),
            eventfd,
            rt: Arc::clone(&self.inner),
        });
        if mechanism != Mechanism::IoUring {
            return Ok(Pipe {
                inner: pipe,
                _user: UserHandle::new(&self.inner),
            });
        }
        let (rtx, rrx) = sync_channel(1);
        self.send(Cmd::Attach {
            pipe: Arc::clone(&pipe),
            reply: rtx,
        })?;
        let reg = rrx.recv().map_err(|_| shut_down())?;
        // The scheduler dropped its clone before replying, so we hold the only reference.
        let mut pipe = pipe;
        let p =
            Arc::get_mut(&mut pipe).ok_or_else(|| Error::InvalidArgument("pipe shared".into()))?;
        p.reg = reg;
        Ok(Pipe {
            inner: pipe,
            _user: UserHandle::new(&self.inner),
        })
    }

    fn send(&self, cmd: Cmd) -> Result<()> {
        self.inner.send(cmd).map_err(|_| shut_down())
    }
}

fn shut_down() -> Error {
    Error::Unsupported {
        path: "runtime".into(),
        reason: "the runtime has shut down".into(),
    }
}

fn check_block(b: u64) -> Result<()> {
    if !b.is_power_of_two() || !(512..=64 << 20).contains(&b) {
        return Err(Error::InvalidArgument(format!(
            "block size {b} must be a power of two from 512 B to 64 MiB"
        )));
    }
    Ok(())
}

/// A declared, unidirectional path from one locator to another.
#[derive(Clone)]
pub struct Pipe {
    inner: Arc<PipeInner>,
    _user: UserHandle,
}

impl Pipe {
    /// Starts moving `len` bytes from `src_off` of the source to `dst_off` of the destination.
    pub fn transfer(&self, src_off: u64, dst_off: u64, len: u64) -> Result<Transfer> {
        self.transfer_segments(&[(src_off, dst_off, len)])
    }

    /// Moves and waits (the blocking flavour).
    pub fn transfer_blocking(&self, src_off: u64, dst_off: u64, len: u64) -> Result<u64> {
        self.transfer(src_off, dst_off, len)?.wait()
    }

    /// Starts one transfer of several `(src_off, dst_off, len)` segments (e.g. random blocks).
    pub fn transfer_segments(&self, segments: &[(u64, u64, u64)]) -> Result<Transfer> {
        let p = &self.inner;
        let mut chunks = VecDeque::new();
        let src_len = if p.kind == Kind::Read {
            Some(p.src.len()?)
        } else {
            None
        };
        for &(s, d, len) in segments {
            if len == 0 {
                return Err(Error::InvalidArgument("a transfer of 0 bytes".into()));
            }
            self.check_side(&p.src, s, len, true, src_len)?;
            self.check_side(&p.dst, d, len, false, None)?;
            let mut off = 0;
            while off < len {
                let n = (len - off).min(p.block_bytes);
                chunks.push_back(Chunk {
                    src: s + off,
                    dst: d + off,
                    len: n,
                });
                off += n;
            }
        }
        let mems: Vec<&Locator> = [&p.src, &p.dst]
            .into_iter()
            .filter(|l| l.memory().is_some())
            .collect();
        for (i, l) in mems.iter().enumerate() {
            if let Some(m) = l.memory() {
                if let Err(e) = m.begin_transfer(&l.describe()) {
                    for l2 in &mems[..i] {
                        if let Some(m2) = l2.memory() {
                            m2.end_transfer();
                        }
                    }
                    return Err(e);
                }
            }
        }
        let shared = Arc::new(TransferShared {
            result: Mutex::new(None),
            cv: Condvar::new(),
            cancel: AtomicBool::new(false),
            bytes_done: AtomicU64::new(0),
        });
        let id = p.rt.next_id.fetch_add(1, Ordering::Relaxed);
        let cmd = Cmd::Submit {
            id,
            pipe: Arc::clone(p),
            chunks,
            shared: Arc::clone(&shared),
        };
        if p.rt.send(cmd).is_err() {
            for l in &mems {
                if let Some(m) = l.memory() {
                    m.end_transfer();
                }
            }
            return Err(shut_down());
        }
        Ok(Transfer { shared })
    }

    fn check_side(
        &self,
        l: &Locator,
        off: u64,
        len: u64,
        is_src: bool,
        file_len: Option<u64>,
    ) -> Result<()> {
        let end = off.checked_add(len).ok_or_else(|| Error::OutOfRange {
            what: l.describe(),
            offset: off,
            len,
            size: u64::MAX,
        })?;
        if let Some(m) = l.memory() {
            let size = m.len() as u64;
            if end > size {
                return Err(Error::OutOfRange {
                    what: l.describe(),
                    offset: off,
                    len,
                    size,
                });
            }
            let direct = self
                .inner
                .file_loc()
                .and_then(|f| f.file_res())
                .is_some_and(|f| f.direct);
            if direct && !off.is_multiple_of(DIRECT_ALIGN_BYTES) {
                return Err(Error::Misaligned {
                    path: self
                        .inner
                        .file_loc()
                        .and_then(|f| f.path())
                        .unwrap_or_default(),
                    what: format!("memory offset {off} of {}", l.describe()),
                    align: DIRECT_ALIGN_BYTES,
                });
            }
            return Ok(());
        }
        let Some(f) = l.file_res() else { return Ok(()) };
        if let (true, Some(fl)) = (is_src, file_len) {
            if end > fl {
                return Err(Error::ShortFile {
                    path: f.path.clone(),
                    offset: off,
                    len,
                    file_len: fl,
                });
            }
        }
        if f.direct
            && (!off.is_multiple_of(DIRECT_ALIGN_BYTES) || !len.is_multiple_of(DIRECT_ALIGN_BYTES))
        {
            return Err(Error::Misaligned {
                path: f.path.clone(),
                what: format!("file offset {off} / length {len}"),
                align: DIRECT_ALIGN_BYTES,
            });
        }
        Ok(())
    }

    /// The pipe's state: mechanism, registration, bytes moved, requests in flight.
    pub fn state(&self) -> PipeState {
        let p = &self.inner;
        let s = &p.stats;
        PipeState {
            source: p.src.describe(),
            destination: p.dst.describe(),
            mechanism: p.mechanism.name().into(),
            block_bytes: p.block_bytes,
            queue_depth: p.queue_depth,
            registered_buffer: p.reg.buf_index.is_some(),
            registered_buffer_refused: p.reg.buf_refused.clone(),
            registered_pieces: u32::from(p.reg.buf_count),
            fixed_file: p.reg.fixed_file.is_some(),
            bytes_moved: s.bytes_moved.load(Ordering::Relaxed),
            requests_done: s.requests_done.load(Ordering::Relaxed),
            requests_in_flight: s.requests_in_flight.load(Ordering::Relaxed),
            bytes_in_flight: s.bytes_in_flight.load(Ordering::Relaxed),
            transfers_done: s.transfers_done.load(Ordering::Relaxed),
            transfers_failed: s.transfers_failed.load(Ordering::Relaxed),
            transfers_cancelled: s.transfers_cancelled.load(Ordering::Relaxed),
        }
    }

    /// The mechanism this pipe uses.
    pub fn mechanism(&self) -> Mechanism {
        self.inner.mechanism
    }

    /// An eventfd that becomes readable each time one of this pipe's transfers ends (the
    /// OS-level flavour: wait on it with epoll/poll/select, then `poll` the transfers). Reading
    /// it returns and clears the count of transfers ended since the last read.
    pub fn ready_fd(&self) -> i32 {
        self.inner.eventfd
    }

    /// The source locator.
    pub fn source(&self) -> &Locator {
        &self.inner.src
    }

    /// The destination locator.
    pub fn destination(&self) -> &Locator {
        &self.inner.dst
    }
}

struct Active {
    pipe: Arc<PipeInner>,
    chunks: VecDeque<Chunk>,
    shared: Arc<TransferShared>,
    in_flight: u32,
    bytes: u64,
    error: Option<Error>,
    /// The thread pool moves this transfer (its chunks are in the job, and `in_flight` is 1
    /// until the job's end is reported).
    job: Option<Arc<ThreadJob>>,
}

impl Active {
    /// Blocks not yet moved.
    fn unfinished(&self) -> bool {
        !self.chunks.is_empty() || self.job.as_ref().is_some_and(|j| !j.all_done())
    }
}

/// A transfer handed to the thread pool whole: the workers take its blocks in order through the
/// job's cursor and account each one here and in the pipe's counters, as the scheduler does for
/// a request it issued (see `Scheduler::complete`).
struct ThreadJob {
    pipe: Arc<PipeInner>,
    shared: Arc<TransferShared>,
    chunks: Vec<Chunk>,
    /// Blocks moved whole.
    chunks_done: AtomicU64,
    bytes: AtomicU64,
    /// A request failed: no more start.
    failed: AtomicBool,
    /// The first failure.
    error: Mutex<Option<Error>>,
}

impl ThreadJob {
    fn all_done(&self) -> bool {
        self.chunks_done.load(Ordering::SeqCst) == self.chunks.len() as u64
    }

    fn fail(&self, e: Error) {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        self.failed.store(true, Ordering::SeqCst);
    }

    /// Ends a request (its slot given back) with `rest` bytes of it not moved.
    fn end_request(&self, rest: u64) {
        let st = &self.pipe.stats;
        st.bytes_in_flight.fetch_sub(rest, Ordering::Relaxed);
        st.requests_in_flight.fetch_sub(1, Ordering::SeqCst);
        REQUESTS_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

impl JobWork for ThreadJob {
    fn stopped(&self) -> bool {
        self.failed.load(Ordering::SeqCst) || self.shared.cancel.load(Ordering::SeqCst)
    }

    fn try_begin(&self) -> bool {
        let depth = u64::from(self.pipe.queue_depth);
        let taken = self.pipe.stats.requests_in_flight.fetch_update(
            Ordering::SeqCst,
            Ordering::SeqCst,
            |n| (n < depth).then_some(n + 1),
        );
        if taken.is_ok() {
            REQUESTS_IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        }
        taken.is_ok()
    }

    fn has_slot(&self) -> bool {
        self.pipe.stats.requests_in_flight.load(Ordering::Relaxed)
            < u64::from(self.pipe.queue_depth)
    }

    fn abandon(&self) {
        self.end_request(0);
    }

    fn request(&self, k: usize) -> Req {
        let c = self.chunks[k];
        self.pipe
            .stats
            .bytes_in_flight
            .fetch_add(c.len, Ordering::Relaxed);
        make_req(&self.pipe, c)
    }

    fn finish(&self, req: &Req, res: i64) -> Option<Req> {
        let p = &self.pipe;
        p.stats.requests_done.fetch_add(1, Ordering::Relaxed);
        let len = u64::from(req.len);
        match request_outcome(p, req.off, len, res) {
            Err(e) => {
                self.fail(e);
                self.end_request(len);
                None
            }
            Ok(n) => {
                self.bytes.fetch_add(n, Ordering::Relaxed);
                self.shared.bytes_done.fetch_add(n, Ordering::Relaxed);
                p.stats.bytes_moved.fetch_add(n, Ordering::Relaxed);
                p.stats.bytes_in_flight.fetch_sub(n, Ordering::Relaxed);
                if n < len {
                    return Some(Req {
                        off: req.off + n,
                        ptr: req.ptr.wrapping_add(n as usize),
                        len: (len - n) as u32,
                        ..*req
                    });
                }
                self.chunks_done.fetch_add(1, Ordering::SeqCst);
                self.end_request(0);
                None
            }
        }
    }
}

/// What one system call on `len` bytes at file offset `file_off` of pipe `p` gave: the bytes
/// moved (at most `len`, at least 1), or the error naming the request (a read that meets the
/// file's end is `ShortFile`).
fn request_outcome(p: &PipeInner, file_off: u64, len: u64, res: i64) -> Result<u64> {
    let (path, op_name) = match p.kind {
        Kind::Read => (p.src.path(), "read"),
        Kind::Write => (p.dst.path(), "write"),
        Kind::Copy => (None, "memcpy"),
    };
    let path = path.unwrap_or_default();
    if res < 0 {
        let errno = i32::try_from(-res).unwrap_or(libc::EIO);
        return Err(Error::from_errno(op_name, &path, file_off, errno));
    }
    if res == 0 {
        return Err(match p.kind {
            Kind::Read => Error::ShortFile {
                path,
                offset: file_off,
                len,
                file_len: p.src.len().unwrap_or(file_off),
            },
            _ => Error::from_errno(op_name, &path, file_off, libc::EIO),
        });
    }
    Ok((res as u64).min(len))
}

struct OpSlot {
    id: u64,
    chunk: Chunk,
}

/// A memory registered with the ring: `count` slots from `first`, `piece_bytes` each (0: one
/// slot, the whole memory).
struct BufferReg {
    first: u16,
    count: u16,
    piece_bytes: u64,
    /// Kept alive while registered.
    _loc: Locator,
    /// Pipes using the registration.
    users: u32,
}

struct Scheduler {
    backend: Option<Backend>,
    queue_depth: u32,
    reg_buffers: bool,
    reg_files: bool,
    reg_per_block: bool,
    /// memory id -> its registered buffers
    buffer_slots: HashMap<u64, BufferReg>,
    file_slots: HashMap<u64, (u32, Locator, u32)>,
    actives: HashMap<u64, Active>,
    order: VecDeque<u64>,
    ops: HashMap<u64, OpSlot>,
    next_token: u64,
    /// Requests issued and not reaped (io_uring, and inline copies while they run).
    in_flight: u32,
    /// Transfers handed to the thread pool whose end is not reported yet.
    jobs: u32,
    /// Shutting down: a late transfer is not handed to the thread pool (it is cancelled before
    /// it starts, and the pool's workers may already be gone).
    closing: bool,
}

impl Scheduler {
    fn run(mut self, rx: Receiver<Cmd>, rt: std::sync::Weak<RtInner>) {
        let mut shutdown = false;
        let mut done: Vec<Done> = Vec::new();
        loop {
            // Intake: block only when nothing is queued or in flight.
            if !shutdown && self.in_flight == 0 && self.jobs == 0 && self.order.is_empty() {
                match rx.recv() {
                    Ok(cmd) => shutdown |= self.handle(cmd),
                    Err(_) => shutdown = true,
                }
            }
            loop {
                match rx.try_recv() {
                    Ok(cmd) => shutdown |= self.handle(cmd),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        shutdown = true;
                        break;
                    }
                }
            }
            if let Some(rt) = rt.upgrade() {
                let rel: Vec<Release> =
                    std::mem::take(&mut *rt.releases.lock().unwrap_or_else(|p| p.into_inner()));
                for r in rel {
                    self.release(r);
                }
            }
            if shutdown {
                self.closing = true;
                for a in self.actives.values() {
                    a.shared.cancel.store(true, Ordering::SeqCst);
                }
            }
            self.issue();
            self.finish_ready();
            if self.in_flight > 0 || self.jobs > 0 {
                done.clear();
                if let Some(b) = self.backend.as_mut() {
                    b.wait(&mut done);
                }
                let pool = matches!(self.backend, Some(Backend::Threads(_)));
                for &(token, res) in &done {
                    if pool {
                        self.job_ended(token);
                    } else {
                        self.complete(token, res);
                    }
                }
                self.finish_ready();
            }
            if shutdown && self.in_flight == 0 && self.jobs == 0 {
                self.finish_ready();
                if self.actives.is_empty() {
                    // Late submissions after shutdown (from clones still alive) are cancelled.
                    while let Ok(cmd) = rx.try_recv() {
                        self.handle(cmd);
                        for a in self.actives.values() {
                            a.shared.cancel.store(true, Ordering::SeqCst);
                        }
                        self.finish_ready();
                    }
                    break;
                }
            }
        }
        // The ring (and its registrations) goes before the locators kept in the slot tables.
        self.backend = None;
        self.buffer_slots.clear();
        self.file_slots.clear();
        if let Some(rt) = rt.upgrade() {
            let (lock, cv) = &rt.drained;
            *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
            cv.notify_all();
        }
    }

    /// Handles one command; true on shutdown.
    fn handle(&mut self, cmd: Cmd) -> bool {
        match cmd {
            Cmd::Shutdown => return true,
            Cmd::Attach { pipe, reply } => {
                let reg = self.attach(&pipe);
                drop(pipe);
                let _ = reply.send(reg);
            }
            Cmd::Submit {
                id,
                pipe,
                mut chunks,
                shared,
            } => {
                let mut job = None;
                if let Some(Backend::Threads(t)) = self.backend.as_mut() {
                    if pipe.mechanism == Mechanism::Threads && !chunks.is_empty() && !self.closing {
                        let j = Arc::new(ThreadJob {
                            pipe: Arc::clone(&pipe),
                            shared: Arc::clone(&shared),
                            chunks: std::mem::take(&mut chunks).into(),
                            chunks_done: AtomicU64::new(0),
                            bytes: AtomicU64::new(0),
                            failed: AtomicBool::new(false),
                            error: Mutex::new(None),
                        });
                        let count = j.chunks.len();
                        let work: Arc<dyn JobWork> = Arc::clone(&j) as Arc<dyn JobWork>;
                        t.submit(Arc::new(Job::new(id, count, work)));
                        self.jobs += 1;
                        job = Some(j);
                    }
                }
                self.actives.insert(
                    id,
                    Active {
                        pipe,
                        chunks,
                        shared,
                        in_flight: u32::from(job.is_some()),
                        bytes: 0,
                        error: None,
                        job,
                    },
                );
                self.order.push_back(id);
            }
        }
        false
    }

    fn attach(&mut self, pipe: &PipeInner) -> Registration {
        let mut reg = Registration {
            buf_index: None,
            buf_count: 0,
            buf_piece_bytes: 0,
            buf_refused: None,
            fixed_file: None,
        };
        let Some(Backend::Uring(u)) = self.backend.as_ref() else {
            return reg;
        };
        let mem_loc = pipe.mem_loc();
        if let Some(m) = mem_loc.memory() {
            if !self.reg_buffers {
                reg.buf_refused = Some("registered buffers unavailable on this ring".into());
            } else if let Some(e) = self.buffer_slots.get_mut(&m.id) {
                e.users += 1;
                reg.buf_index = Some(e.first);
                reg.buf_count = e.count;
                reg.buf_piece_bytes = e.piece_bytes;
            } else {
                let mut used = vec![false; BUFFER_SLOTS as usize];
                for e in self.buffer_slots.values() {
                    for s in e.first..e.first + e.count {
                        used[usize::from(s)] = true;
                    }
                }
                let len = m.len() as u64;
                let block = pipe.block_bytes;
                let pieces = len / block;
                let per_block = self.reg_per_block && (2..=PIECES_MAX).contains(&pieces);
                let (count, piece_bytes) = if per_block {
                    (pieces as usize, block)
                } else {
                    (1, 0)
                };
                let run = free_run(&used, count)
                    .map(|s| (s, count, piece_bytes))
                    .or_else(|| free_run(&used, 1).map(|s| (s, 1, 0)));
                let slots_free = usize::from(run.is_some());
                let big = if run.is_some_and(|r| r.1 > 1) {
                    block
                } else {
                    len
                };
                match (registrable(big, slots_free), run) {
                    (Err(e), _) => reg.buf_refused = Some(e),
                    (Ok(()), None) => {
                        reg.buf_refused = Some("every registered-buffer slot is in use".into())
                    }
                    (Ok(()), Some((first, count, piece_bytes))) => {
                        let iovs: Vec<libc::iovec> = if count == 1 {
                            vec![libc::iovec {
                                iov_base: m.ptr().cast(),
                                iov_len: m.len(),
                            }]
                        } else {
                            (0..count)
                                .map(|k| libc::iovec {
                                    iov_base: m.ptr().wrapping_add(k * piece_bytes as usize).cast(),
                                    iov_len: piece_bytes as usize,
                                })
                                .collect()
                        };
                        // SAFETY: the memory stays alive while registered: the slot table
                        // holds its locator until the slots are cleared or the ring dropped;
                        // every piece lies inside the memory (count × piece ≤ its length).
                        let r = unsafe {
                            u.ring
                                .submitter()
                                .register_buffers_update(first as u32, &iovs, None)
                        };
                        match r {
                            Ok(()) => {
                                let (first, count) = (first as u16, count as u16);
                                self.buffer_slots.insert(
                                    m.id,
                                    BufferReg {
                                        first,
                                        count,
                                        piece_bytes,
                                        _loc: mem_loc.clone(),
                                        users: 1,
                                    },
                                );
                                reg.buf_index = Some(first);
                                reg.buf_count = count;
                                reg.buf_piece_bytes = piece_bytes;
                            }
                            Err(e) => reg.buf_refused = Some(format!("the kernel refused: {e}")),
                        }
                    }
                }
            }
        }
        if let Some(fl) = pipe.file_loc() {
            if let Some(f) = fl.file_res() {
                if self.reg_files {
                    if let Some(e) = self.file_slots.get_mut(&f.id) {
                        e.2 += 1;
                        reg.fixed_file = Some(e.0);
                    } else {
                        let used: Vec<u32> = self.file_slots.values().map(|e| e.0).collect();
                        if let Some(slot) = (0..REGISTER_SLOTS).find(|s| !used.contains(s)) {
                            if u.ring
                                .submitter()
                                .register_files_update(slot, &[f.fd()])
                                .is_ok()
                            {
                                self.file_slots.insert(f.id, (slot, fl.clone(), 1));
                                reg.fixed_file = Some(slot);
                            }
                        }
                    }
                }
            }
        }
        reg
    }

    fn release(&mut self, r: Release) {
        let Some(Backend::Uring(u)) = self.backend.as_ref() else {
            return;
        };
        match r {
            Release::Buffer(id) => {
                if let Some(e) = self.buffer_slots.get_mut(&id) {
                    e.users -= 1;
                    if e.users == 0 {
                        let none = libc::iovec {
                            iov_base: std::ptr::null_mut(),
                            iov_len: 0,
                        };
                        let iovs = vec![none; usize::from(e.count)];
                        // SAFETY: clearing slots; requests in flight hold the kernel's own
                        // reference to the old buffers, and our locator lives until they end.
                        let _ = unsafe {
                            u.ring.submitter().register_buffers_update(
                                u32::from(e.first),
                                &iovs,
                                None,
                            )
                        };
                        self.buffer_slots.remove(&id);
                    }
                }
            }
            Release::File(id) => {
                if let Some(e) = self.file_slots.get_mut(&id) {
                    e.2 -= 1;
                    if e.2 == 0 {
                        let _ = u.ring.submitter().register_files_update(e.0, &[-1]);
                        self.file_slots.remove(&id);
                    }
                }
            }
        }
    }

    /// Issues requests while the depth allows: transfers in submission order.
    fn issue(&mut self) {
        // Transfers of the thread pool have no chunks here: the workers take them.
        let ids: Vec<u64> = self.order.iter().copied().collect();
        for id in ids {
            loop {
                if self.in_flight >= self.queue_depth {
                    if let Some(b) = self.backend.as_mut() {
                        b.flush();
                    }
                    return;
                }
                let Some(a) = self.actives.get_mut(&id) else {
                    break;
                };
                if a.error.is_some() || a.shared.cancel.load(Ordering::Relaxed) {
                    break;
                }
                if a.pipe.stats.requests_in_flight.load(Ordering::Relaxed)
                    >= u64::from(a.pipe.queue_depth)
                {
                    break;
                }
                let Some(chunk) = a.chunks.pop_front() else {
                    break;
                };
                let pipe = Arc::clone(&a.pipe);
                match pipe.mechanism {
                    Mechanism::Memcpy | Mechanism::Mmap => {
                        let res = inline_copy(&pipe, chunk);
                        self.account_issue(id, &pipe, chunk);
                        let token = self.token(id, chunk);
                        self.complete(token, res);
                    }
                    Mechanism::IoUring | Mechanism::Threads => {
                        let req = make_req(&pipe, chunk);
                        let token = self.token(id, chunk);
                        let pushed = self
                            .backend
                            .as_mut()
                            .map(|b| b.push(token, req))
                            .unwrap_or(false);
                        if !pushed {
                            self.ops.remove(&token);
                            if let Some(a) = self.actives.get_mut(&id) {
                                a.chunks.push_front(chunk);
                            }
                            if let Some(b) = self.backend.as_mut() {
                                b.flush();
                            }
                            return;
                        }
                        self.account_issue(id, &pipe, chunk);
                    }
                }
            }
        }
        if let Some(b) = self.backend.as_mut() {
            b.flush();
        }
    }

    fn token(&mut self, id: u64, chunk: Chunk) -> u64 {
        let t = self.next_token;
        self.next_token += 1;
        self.ops.insert(t, OpSlot { id, chunk });
        t
    }

    fn account_issue(&mut self, id: u64, pipe: &PipeInner, chunk: Chunk) {
        self.in_flight += 1;
        REQUESTS_IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        pipe.stats
            .requests_in_flight
            .fetch_add(1, Ordering::Relaxed);
        pipe.stats
            .bytes_in_flight
            .fetch_add(chunk.len, Ordering::Relaxed);
        if let Some(a) = self.actives.get_mut(&id) {
            a.in_flight += 1;
        }
    }

    /// The thread pool reported the end of transfer `id`'s job: nothing of it runs any more.
    fn job_ended(&mut self, id: u64) {
        let Some(a) = self.actives.get_mut(&id) else {
            return;
        };
        let Some(j) = a.job.as_ref() else {
            return;
        };
        self.jobs -= 1;
        a.in_flight = 0;
        a.bytes = j.bytes.load(Ordering::SeqCst);
        if let Some(e) = j.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            a.error.get_or_insert(e);
        }
    }

    fn complete(&mut self, token: u64, res: i64) {
        let Some(op) = self.ops.remove(&token) else {
            return;
        };
        self.in_flight -= 1;
        REQUESTS_IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        let Some(a) = self.actives.get_mut(&op.id) else {
            return;
        };
        a.in_flight -= 1;
        let c = op.chunk;
        let st = &a.pipe.stats;
        st.requests_in_flight.fetch_sub(1, Ordering::Relaxed);
        st.bytes_in_flight.fetch_sub(c.len, Ordering::Relaxed);
        st.requests_done.fetch_add(1, Ordering::Relaxed);
        let file_off = match a.pipe.kind {
            Kind::Write => c.dst,
            Kind::Read | Kind::Copy => c.src,
        };
        let n = match request_outcome(&a.pipe, file_off, c.len, res) {
            Ok(n) => n,
            Err(e) => {
                a.error.get_or_insert(e);
                return;
            }
        };
        a.bytes += n;
        a.shared.bytes_done.fetch_add(n, Ordering::Relaxed);
        st.bytes_moved.fetch_add(n, Ordering::Relaxed);
        if n < c.len {
            a.chunks.push_front(Chunk {
                src: c.src + n,
                dst: c.dst + n,
                len: c.len - n,
            });
        }
    }

    /// Ends every transfer with nothing in flight that is complete, failed or cancelled.
    fn finish_ready(&mut self) {
        let mut i = 0;
        while i < self.order.len() {
            let id = self.order[i];
            let ready = match self.actives.get(&id) {
                Some(a) => {
                    a.in_flight == 0
                        && (!a.unfinished()
                            || a.error.is_some()
                            || a.shared.cancel.load(Ordering::SeqCst))
                }
                None => true,
            };
            if !ready {
                i += 1;
                continue;
            }
            self.order.remove(i);
            let Some(a) = self.actives.remove(&id) else {
                continue;
            };
            let st = &a.pipe.stats;
            let result = if let Some(e) = a.error {
                st.transfers_failed.fetch_add(1, Ordering::Relaxed);
                Err(e)
            } else if a.unfinished() {
                st.transfers_cancelled.fetch_add(1, Ordering::Relaxed);
                Err(Error::Cancelled {
                    bytes_done: a.bytes,
                })
            } else {
                st.transfers_done.fetch_add(1, Ordering::Relaxed);
                Ok(a.bytes)
            };
            for l in [&a.pipe.src, &a.pipe.dst] {
                if let Some(m) = l.memory() {
                    m.end_transfer();
                }
            }
            // The eventfd first: whoever sees the result also sees the count include it.
            let one: u64 = 1;
            // SAFETY: writing 8 bytes to our eventfd.
            unsafe {
                libc::write(a.pipe.eventfd, (&one as *const u64).cast(), 8);
            }
            *a.shared.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
            a.shared.cv.notify_all();
        }
    }
}

fn make_req(p: &PipeInner, c: Chunk) -> Req {
    let (dir, file_off, mem_off) = match p.kind {
        Kind::Read => (Dir::Read, c.src, c.dst),
        _ => (Dir::Write, c.dst, c.src),
    };
    let mem = p.mem_loc().memory();
    let base = mem.map_or(std::ptr::null_mut(), |m| m.ptr());
    let fd = p
        .file_loc()
        .and_then(|l| l.file_res())
        .map_or(-1, |f| f.fd());
    Req {
        dir,
        fd,
        fixed_file: p.reg.fixed_file,
        buf_index: buffer_of(&p.reg, mem_off, c.len),
        off: file_off,
        // SAFETY (of the later use): mem_off + len is within the memory (checked at submit).
        ptr: base.wrapping_add(mem_off as usize),
        len: c.len as u32,
    }
}

/// The registered buffer holding memory bytes `off..off + len`: the whole-memory buffer, or the
/// piece holding them all (None when they straddle two pieces: the request goes unregistered).
fn buffer_of(reg: &Registration, off: u64, len: u64) -> Option<u16> {
    let first = reg.buf_index?;
    if reg.buf_piece_bytes == 0 {
        return Some(first);
    }
    let k = off / reg.buf_piece_bytes;
    let fits = off + len <= (k + 1) * reg.buf_piece_bytes && k < u64::from(reg.buf_count);
    fits.then(|| first + k as u16)
}

/// The first of `count` consecutive free slots.
fn free_run(used: &[bool], count: usize) -> Option<usize> {
    let mut run = 0;
    for (i, &u) in used.iter().enumerate() {
        run = if u { 0 } else { run + 1 };
        if run == count {
            return Some(i + 1 - count);
        }
    }
    None
}

/// memcpy between memories, or between memory and a file's shared mapping. Returns bytes or
/// -errno, like a system call.
fn inline_copy(p: &PipeInner, c: Chunk) -> i64 {
    let len = c.len as usize;
    match p.kind {
        Kind::Copy => {
            let (Some(s), Some(d)) = (p.src.memory(), p.dst.memory()) else {
                return -i64::from(libc::EINVAL);
            };
            // SAFETY: ranges checked at submit; `copy` allows overlap (same locator).
            unsafe {
                std::ptr::copy(
                    s.ptr().add(c.src as usize),
                    d.ptr().add(c.dst as usize),
                    len,
                )
            };
            c.len as i64
        }
        Kind::Read | Kind::Write => {
            let Some(f) = p.file_loc().and_then(|l| l.file_res()) else {
                return -i64::from(libc::EINVAL);
            };
            let Some(m) = p.mem_loc().memory() else {
                return -i64::from(libc::EINVAL);
            };
            let write = p.kind == Kind::Write;
            let (file_off, mem_off) = if write {
                (c.dst, c.src)
            } else {
                (c.src, c.dst)
            };
            if write {
                // Reserve the blocks first: a full disk is ENOSPC here, never SIGBUS later.
                // SAFETY: fd open for writing.
                let rc = unsafe { libc::posix_fallocate(f.fd(), file_off as i64, len as i64) };
                if rc != 0 {
                    return -i64::from(rc);
                }
            }
            let mut map = f.map.lock().unwrap_or_else(|p| p.into_inner());
            let end = (file_off + c.len) as usize;
            if map.as_ref().is_none_or(|m| m.len < end) {
                *map = None;
                match map_file(f, end, write) {
                    Ok(m) => *map = Some(m),
                    Err(e) => return -i64::from(e),
                }
            }
            let Some(fm) = map.as_ref() else {
                return -i64::from(libc::EINVAL);
            };
            // SAFETY: the mapping covers `end` bytes of a file at least that long (reads checked
            // at submit, writes fallocated above); the memory range was checked at submit.
            unsafe {
                let fp = fm.ptr.add(file_off as usize);
                let mp = m.ptr().add(mem_off as usize);
                if write {
                    std::ptr::copy_nonoverlapping(mp, fp, len);
                } else {
                    std::ptr::copy_nonoverlapping(fp, mp, len);
                }
            }
            c.len as i64
        }
    }
}

fn map_file(f: &FileRes, end: usize, write: bool) -> std::result::Result<FileMap, i32> {
    let file_len = f.len().map_err(|_| libc::EIO)? as usize;
    // Writes grow the file block by block: map ahead (geometrically, 64 MiB at least) so that
    // the mapping is not remade for every block. Only bytes below the file's end are touched.
    let ahead = if write {
        end.saturating_mul(2).max(64 << 20)
    } else {
        end
    };
    let len = ahead.max(file_len).max(1);
    let prot = if write || f.writable {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_READ
    };
    // SAFETY: a fresh shared mapping of an open file.
    let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, f.fd(), 0) };
    if ptr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    Ok(FileMap {
        ptr: ptr.cast(),
        len,
    })
}
