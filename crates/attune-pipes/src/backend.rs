//! Backends that execute file requests: io_uring and pread/pwrite threads. Both are owned by the
//! runtime's one scheduler thread; the mmap and memcpy mechanisms run inline in that thread.
//! The scheduler pushes io_uring requests one by one; it hands the thread pool whole transfers
//! ([`Job`]s), whose requests the workers take themselves.
//!
//! A request carries raw pointers into memory that the scheduler keeps alive (it holds the
//! transfer, hence the pipe, hence the locators, until the request's completion is reaped, or
//! for the thread pool until the end of the request's job is reported).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;

use io_uring::{opcode, types, IoUring};

/// Slots of fixed files in a ring (a sparse table, filled on attach).
pub(crate) const REGISTER_SLOTS: u32 = 64;

/// Slots of registered buffers in a ring (a sparse table, filled on attach). A memory registered
/// block by block takes one slot per block, so the table is larger than the file table; the
/// kernel allows 16384 and an empty slot costs a pointer.
pub(crate) const BUFFER_SLOTS: u32 = 1024;

/// Direction of a file request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

/// One request: `len` bytes between `ptr` and the file at `off`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Req {
    pub dir: Dir,
    pub fd: i32,
    pub fixed_file: Option<u32>,
    pub buf_index: Option<u16>,
    pub off: u64,
    pub ptr: *mut u8,
    pub len: u32,
}

// SAFETY: the pointer stays valid while the request is in flight (see the module doc).
unsafe impl Send for Req {}

/// A completion: the token and the result (bytes, or -errno).
pub(crate) type Done = (u64, i64);

pub(crate) enum Backend {
    Uring(Box<UringBackend>),
    Threads(ThreadBackend),
}

impl Backend {
    /// Queues one request; false if the backend has no room. The thread pool takes no single
    /// requests (see [`ThreadBackend::submit`]): false.
    pub(crate) fn push(&mut self, token: u64, req: Req) -> bool {
        match self {
            Backend::Uring(u) => u.push(token, req),
            Backend::Threads(_) => false,
        }
    }

    /// Submits what was pushed and waits until at least one completion, which it returns (the
    /// thread pool: until a job ended, or a command came).
    pub(crate) fn wait(&mut self, out: &mut Vec<Done>) {
        match self {
            Backend::Uring(u) => u.wait(out),
            Backend::Threads(t) => t.wait(out),
        }
    }

    /// Submits what was pushed without waiting.
    pub(crate) fn flush(&mut self) {
        match self {
            Backend::Uring(u) => u.submit(),
            Backend::Threads(_) => {}
        }
    }
}

pub(crate) struct UringBackend {
    pub(crate) ring: IoUring,
    /// Whether a kernel thread polls the submission queue (SQPOLL), and if it was asked for and
    /// refused, why.
    pub(crate) sqpoll: Result<bool, String>,
    pub(crate) buffers_sparse: Result<(), String>,
    pub(crate) files_sparse: Result<(), String>,
    /// Requests per `io_uring_enter` at most (0: no limit).
    submit_batch: u32,
}

impl UringBackend {
    /// A ring of `entries` (rounded up to a power of two); with `sqpoll_idle_ms`, a kernel thread
    /// polls its submission queue and sleeps after that many idle milliseconds (the kernel may
    /// refuse: the ring is then a plain one and `sqpoll` says why). A request goes to the kernel
    /// once `submit_batch` of them are queued (0: only when the scheduler flushes or waits).
    pub(crate) fn new(
        entries: u32,
        sqpoll_idle_ms: Option<u32>,
        submit_batch: u32,
    ) -> Result<UringBackend, String> {
        let entries = entries.next_power_of_two().max(8);
        let mut sqpoll = Ok(false);
        let mut ring = None;
        if let Some(idle) = sqpoll_idle_ms {
            match IoUring::builder().setup_sqpoll(idle).build(entries) {
                Ok(r) => {
                    ring = Some(r);
                    sqpoll = Ok(true);
                }
                Err(e) => sqpoll = Err(format!("SQPOLL refused: {e}")),
            }
        }
        // Completions are reaped only by the scheduler when it waits, so the kernel need not
        // interrupt it to run completion work (COOP_TASKRUN, Linux 5.19); older kernels refuse
        // the flag and get a plain ring.
        let ring = match ring {
            Some(r) => r,
            None => match IoUring::builder().setup_coop_taskrun().build(entries) {
                Ok(r) => r,
                Err(_) => IoUring::new(entries).map_err(|e| e.to_string())?,
            },
        };
        let buffers_sparse = ring
            .submitter()
            .register_buffers_sparse(BUFFER_SLOTS)
            .map_err(|e| format!("registering buffers: {e}"));
        let files_sparse = ring
            .submitter()
            .register_files_sparse(REGISTER_SLOTS)
            .map_err(|e| format!("registering files: {e}"));
        Ok(UringBackend {
            ring,
            sqpoll,
            buffers_sparse,
            files_sparse,
            submit_batch,
        })
    }

    fn push(&mut self, token: u64, r: Req) -> bool {
        let entry = match (r.dir, r.fixed_file, r.buf_index) {
            (Dir::Read, Some(f), Some(b)) => {
                opcode::ReadFixed::new(types::Fixed(f), r.ptr, r.len, b)
                    .offset(r.off)
                    .build()
            }
            (Dir::Read, None, Some(b)) => opcode::ReadFixed::new(types::Fd(r.fd), r.ptr, r.len, b)
                .offset(r.off)
                .build(),
            (Dir::Read, Some(f), None) => opcode::Read::new(types::Fixed(f), r.ptr, r.len)
                .offset(r.off)
                .build(),
            (Dir::Read, None, None) => opcode::Read::new(types::Fd(r.fd), r.ptr, r.len)
                .offset(r.off)
                .build(),
            (Dir::Write, Some(f), Some(b)) => {
                opcode::WriteFixed::new(types::Fixed(f), r.ptr, r.len, b)
                    .offset(r.off)
                    .build()
            }
            (Dir::Write, None, Some(b)) => {
                opcode::WriteFixed::new(types::Fd(r.fd), r.ptr, r.len, b)
                    .offset(r.off)
                    .build()
            }
            (Dir::Write, Some(f), None) => opcode::Write::new(types::Fixed(f), r.ptr, r.len)
                .offset(r.off)
                .build(),
            (Dir::Write, None, None) => opcode::Write::new(types::Fd(r.fd), r.ptr, r.len)
                .offset(r.off)
                .build(),
        };
        let entry = entry.user_data(token);
        // SAFETY: the buffer and the file stay alive until this token's completion is reaped
        // (the scheduler holds the transfer that owns them), and the ring is drained before it
        // is dropped.
        unsafe {
            if self.ring.submission().push(&entry).is_err() {
                self.submit();
                if self.ring.submission().push(&entry).is_err() {
                    return false;
                }
            }
        }
        if self.submit_batch > 0 && self.ring.submission().len() >= self.submit_batch as usize {
            self.submit();
        }
        true
    }

    /// Hands every queued request to the kernel; with none queued, no system call (the ring
    /// enters the kernel whenever asked, and after one request per push there is often none
    /// left for the scheduler's flush).
    pub(crate) fn submit(&mut self) {
        if !self.ring.submission().is_empty() {
            let _ = self.ring.submit();
        }
    }

    fn wait(&mut self, out: &mut Vec<Done>) {
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => break,
                Err(_) => break,
            }
        }
        for cqe in self.ring.completion() {
            out.push((cqe.user_data(), i64::from(cqe.result())));
        }
    }
}

/// One transfer handed to the thread pool whole: its requests are numbered `0..count`, and a
/// worker takes the next one by moving the job's cursor (one atomic add), so no other thread
/// stands between two requests of a worker. What a request is, whether the job may start one
/// more now, and what its result means are the owner's ([`JobWork`]); the job only counts.
///
/// The end of a job is reported exactly once, by the worker that sees it last: nothing left to
/// start (the cursor is past the end, or the owner stopped it) and no request of it running. A
/// worker counts itself in `running` before it looks at the cursor or the stop, so a job seen
/// ended (stop or end first, then `running` at zero) can start no request afterwards.
pub(crate) struct Job {
    /// Reported to the scheduler when the job ends.
    token: u64,
    count: usize,
    /// The next request to start; past `count` once every request was started.
    cursor: AtomicUsize,
    /// Workers inside the job: running one of its requests or trying to start one.
    running: AtomicUsize,
    /// The end was reported.
    ended: AtomicBool,
    work: Arc<dyn JobWork>,
}

/// What a job's owner says about its requests (called by the workers, any thread).
pub(crate) trait JobWork: Send + Sync {
    /// No more requests may start (the transfer was cancelled, or one of its requests failed).
    fn stopped(&self) -> bool;
    /// Takes one of the pipe's request slots (its queue depth); false if all are taken.
    fn try_begin(&self) -> bool;
    /// Whether a slot is free now (a hint for choosing a job; `try_begin` decides).
    fn has_slot(&self) -> bool;
    /// Gives back a slot taken by `try_begin` for a request that did not start.
    fn abandon(&self);
    /// Request `k` of the job (its slot taken).
    fn request(&self, k: usize) -> Req;
    /// The result of one pread/pwrite of `req`: bytes or -errno. Returns the rest of the request
    /// to run next after a short transfer, or None once the request is over (its slot given
    /// back).
    fn finish(&self, req: &Req, res: i64) -> Option<Req>;
}

impl Job {
    pub(crate) fn new(token: u64, count: usize, work: Arc<dyn JobWork>) -> Job {
        Job {
            token,
            count,
            cursor: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            ended: AtomicBool::new(false),
            work,
        }
    }

    /// Nothing is left to start, ever.
    fn spent(&self) -> bool {
        self.work.stopped() || self.cursor.load(Ordering::SeqCst) >= self.count
    }

    /// Worth trying now: requests left and a slot free.
    fn takes_work(&self) -> bool {
        !self.spent() && self.work.has_slot()
    }

    /// Starts the next request: its number and the request, or None (nothing to start now). The
    /// caller is counted in `running` and must call `leave` after.
    fn claim(&self) -> Option<(usize, Req)> {
        if self.spent() || !self.work.try_begin() {
            return None;
        }
        let k = self.cursor.fetch_add(1, Ordering::SeqCst);
        if k >= self.count {
            self.work.abandon();
            return None;
        }
        Some((k, self.work.request(k)))
    }

    /// The caller leaves the job; true if it must report the job's end (once per job).
    fn leave(&self) -> bool {
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.spent()
            && self.running.load(Ordering::SeqCst) == 0
            && !self.ended.swap(true, Ordering::SeqCst)
    }
}

struct Sleep {
    /// Workers waiting in `work`.
    sleeping: usize,
    closed: bool,
}

struct Completions {
    /// Tokens of ended jobs (result 0: the job's owner holds the outcome).
    done: Vec<Done>,
    /// The scheduler sleeps in `wait`.
    waiting: bool,
    /// The scheduler has a command to read: `wait` returns even with nothing done.
    kicked: bool,
}

/// Runs one request; the result is bytes or -errno.
type Runner = fn(&Req) -> i64;

pub(crate) struct PoolShared {
    /// Jobs that may still have requests to start, oldest first. Read-locked by a worker
    /// looking for a job (64 workers finishing a transfer together look at once, and a plain
    /// lock made them sleep on each other); write-locked to add or remove one.
    jobs: RwLock<VecDeque<Arc<Job>>>,
    /// Moves after each job added: a worker that read it before finding no job sleeps only if
    /// it has not moved since (under `sleep`), so no job is added unseen.
    added: AtomicU64,
    sleep: Mutex<Sleep>,
    /// Signals workers: a job came, or the pool closed.
    work: Condvar,
    completions: Mutex<Completions>,
    /// Signals the scheduler: a job ended, or a command came.
    done: Condvar,
    /// `run_req` (pread/pwrite); tests put a stand-in here that they can hold.
    run: Runner,
}

impl PoolShared {
    /// Wakes the scheduler out of `wait` (a command is waiting in its channel).
    pub(crate) fn kick(&self) {
        let mut c = relock(&self.completions);
        c.kicked = true;
        if std::mem::take(&mut c.waiting) {
            self.done.notify_one();
        }
    }
}

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// pread/pwrite threads that pull requests from the transfers themselves. The scheduler hands a
/// whole transfer over once ([`ThreadBackend::submit`]); each worker takes the next request of
/// the job it is on with one atomic add on the job's cursor and runs it, then the next, as
/// each of fio's `psync` jobs loops on its own: no thread hands a request to another, so a
/// request costs a worker no wake-up while any job has requests left. A worker changes job
/// (reading the job list under a shared lock) only when its job has nothing left to start or
/// its pipe's queue depth is reached, and sleeps only when no job has a request it may start. The scheduler
/// hears from the pool once per transfer, when its last request is over. A started request
/// runs to completion, also on shutdown (the scheduler keeps its memory alive until the job's
/// end is reported); a job's requests not started when it is stopped never start.
pub(crate) struct ThreadBackend {
    shared: Arc<PoolShared>,
    threads: Vec<JoinHandle<()>>,
}

impl ThreadBackend {
    /// `threads` workers.
    pub(crate) fn new(threads: u32) -> Result<ThreadBackend, String> {
        ThreadBackend::with_runner(threads, run_req)
    }

    fn with_runner(threads: u32, run: Runner) -> Result<ThreadBackend, String> {
        let n = threads.max(1) as usize;
        let shared = Arc::new(PoolShared {
            jobs: RwLock::new(VecDeque::new()),
            added: AtomicU64::new(0),
            sleep: Mutex::new(Sleep {
                sleeping: 0,
                closed: false,
            }),
            work: Condvar::new(),
            completions: Mutex::new(Completions {
                done: Vec::new(),
                waiting: false,
                kicked: false,
            }),
            done: Condvar::new(),
            run,
        });
        let mut b = ThreadBackend {
            shared,
            threads: Vec::new(),
        };
        for i in 0..n {
            let sh = Arc::clone(&b.shared);
            let h = std::thread::Builder::new()
                .name(format!("attune-pipes-io-{i}"))
                .spawn(move || io_thread(&sh))
                .map_err(|e| e.to_string());
            match h {
                Ok(h) => b.threads.push(h),
                Err(e) => {
                    b.stop();
                    return Err(e);
                }
            }
        }
        Ok(b)
    }

    /// The handle that wakes the scheduler out of `wait` (see [`PoolShared::kick`]).
    pub(crate) fn waker(&self) -> Arc<PoolShared> {
        Arc::clone(&self.shared)
    }

    /// Hands a job (of at least one request) to the workers, waking as many sleeping ones as
    /// it has requests.
    pub(crate) fn submit(&mut self, job: Arc<Job>) {
        let count = job.count;
        self.shared
            .jobs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(job);
        self.shared.added.fetch_add(1, Ordering::SeqCst);
        let sleeping = relock(&self.shared.sleep).sleeping;
        for _ in 0..sleeping.min(count) {
            self.shared.work.notify_one();
        }
    }

    /// Waits until a job ended or the scheduler was kicked; appends the ended jobs' tokens.
    fn wait(&mut self, out: &mut Vec<Done>) {
        let mut c = relock(&self.shared.completions);
        while c.done.is_empty() && !c.kicked {
            c.waiting = true;
            c = self.shared.done.wait(c).unwrap_or_else(|e| e.into_inner());
        }
        c.waiting = false;
        c.kicked = false;
        out.append(&mut c.done);
    }

    fn stop(&mut self) {
        relock(&self.shared.sleep).closed = true;
        self.shared.work.notify_all();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for ThreadBackend {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs one request with pread/pwrite; the result is bytes or -errno.
fn run_req(r: &Req) -> i64 {
    loop {
        // SAFETY: see the module doc: the memory and the descriptor outlive the request.
        let n = unsafe {
            match r.dir {
                Dir::Read => libc::pread(r.fd, r.ptr.cast(), r.len as usize, r.off as i64),
                Dir::Write => libc::pwrite(r.fd, r.ptr.cast(), r.len as usize, r.off as i64),
            }
        };
        if n < 0 {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            if errno == libc::EINTR {
                continue;
            }
            return -i64::from(errno);
        }
        return n as i64;
    }
}

/// Reports a job's end to the scheduler, waking it if it sleeps.
fn report(shared: &PoolShared, token: u64) {
    let mut c = relock(&shared.completions);
    c.done.push((token, 0));
    if std::mem::take(&mut c.waiting) {
        shared.done.notify_one();
    }
}

/// Runs requests of `job` while it has any this worker may start.
fn drain_job(shared: &PoolShared, job: &Job) {
    loop {
        job.running.fetch_add(1, Ordering::SeqCst);
        let claimed = job.claim();
        if let Some((_, mut req)) = claimed {
            while let Some(rest) = job.work.finish(&req, (shared.run)(&req)) {
                req = rest;
            }
        }
        if job.leave() {
            report(shared, job.token);
        }
        if claimed.is_none() {
            return;
        }
    }
}

fn io_thread(shared: &PoolShared) {
    loop {
        let added = shared.added.load(Ordering::SeqCst);
        // The first job with work is this worker's until it has none for it.
        let (job, spent) = {
            let jobs = shared.jobs.read().unwrap_or_else(|e| e.into_inner());
            (
                jobs.iter().find(|j| j.takes_work()).cloned(),
                jobs.iter().any(|j| j.spent()),
            )
        };
        if let Some(job) = job {
            drain_job(shared, &job);
            continue;
        }
        if spent {
            // Jobs with nothing left to start leave the list; one that no worker is inside
            // (stopped before any took it) is ended here.
            let mut jobs = shared.jobs.write().unwrap_or_else(|e| e.into_inner());
            let mut i = 0;
            while i < jobs.len() {
                if !jobs[i].spent() {
                    i += 1;
                    continue;
                }
                if let Some(job) = jobs.remove(i) {
                    job.running.fetch_add(1, Ordering::SeqCst);
                    if job.leave() {
                        report(shared, job.token);
                    }
                }
            }
            continue;
        }
        let mut st = relock(&shared.sleep);
        if st.closed {
            return;
        }
        if shared.added.load(Ordering::SeqCst) != added {
            continue;
        }
        st.sleeping += 1;
        st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
        st.sleeping -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    fn file(blocks: usize, block: usize) -> std::fs::File {
        let p = std::env::temp_dir().join(format!(
            "attune-pipes-backend-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
            .unwrap();
        std::fs::remove_file(&p).unwrap();
        for i in 0..blocks {
            f.write_all(&vec![(i % 251) as u8; block]).unwrap();
        }
        f
    }

    /// Requests at offsets from `HELD` on wait in `gated` until their gate opens (one gate per
    /// offset, so that tests running in parallel do not share one).
    const HELD: u64 = 1 << 62;
    static GATES: Mutex<Option<HashMap<u64, (bool, usize)>>> = Mutex::new(None);
    static GATES_CV: Condvar = Condvar::new();

    /// A stand-in for pread: a held request waits for its gate; any other completes at once
    /// with its length, touching no memory.
    fn gated(r: &Req) -> i64 {
        if r.off >= HELD {
            let mut g = relock(&GATES);
            g.get_or_insert_with(HashMap::new)
                .entry(r.off)
                .or_default()
                .1 += 1;
            GATES_CV.notify_all();
            while !g.as_ref().and_then(|m| m.get(&r.off)).is_some_and(|e| e.0) {
                g = GATES_CV.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
        i64::from(r.len)
    }

    /// `submit_batch` bounds how many requests wait in the submission queue: with 1 each push
    /// reaches the kernel at once (fio's default pattern), with 4 every fourth, with 0 none
    /// until the scheduler flushes or waits. Every request completes with its bytes either way.
    #[test]
    fn submit_batch_bounds_the_requests_left_in_the_submission_queue() {
        let f = file(8, 4096);
        for (batch, queued_after_each) in [
            (1u32, [0usize, 0, 0, 0, 0, 0]),
            (4, [1, 2, 3, 0, 1, 2]),
            (0, [1, 2, 3, 4, 5, 6]),
        ] {
            let Ok(mut u) = UringBackend::new(8, None, batch) else {
                eprintln!("io_uring unavailable here: skipped");
                return;
            };
            let mut bufs = vec![vec![0u8; 4096]; 6];
            for (i, buf) in bufs.iter_mut().enumerate() {
                let req = Req {
                    dir: Dir::Read,
                    fd: f.as_raw_fd(),
                    fixed_file: None,
                    buf_index: None,
                    off: i as u64 * 4096,
                    ptr: buf.as_mut_ptr(),
                    len: 4096,
                };
                assert!(u.push(i as u64, req));
                assert_eq!(
                    u.ring.submission().len(),
                    queued_after_each[i],
                    "submit_batch {batch}, after push {i}"
                );
            }
            let mut done = Vec::new();
            while done.len() < 6 {
                u.wait(&mut done);
            }
            done.sort_unstable();
            let want: Vec<Done> = (0..6).map(|t| (t, 4096)).collect();
            assert_eq!(done, want, "submit_batch {batch}");
            for (i, buf) in bufs.iter().enumerate() {
                assert!(buf.iter().all(|&b| b == (i % 251) as u8));
            }
        }
    }

    fn open_gate(off: u64) {
        relock(&GATES)
            .get_or_insert_with(HashMap::new)
            .entry(off)
            .or_default()
            .0 = true;
        GATES_CV.notify_all();
    }

    /// Waits until `n` requests at `off` have started.
    fn gate_started(off: u64, n: usize) {
        let mut g = relock(&GATES);
        while g.as_ref().and_then(|m| m.get(&off)).map_or(0, |e| e.1) < n {
            g = GATES_CV.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A job's owner as the runtime's, with what the tests check: requests started and finished
    /// per number, slots taken at most.
    struct TestWork {
        fd: i32,
        base: *mut u8,
        block: u32,
        /// The file offset of each request.
        offs: Vec<u64>,
        depth: u64,
        slots: AtomicU64,
        slots_max: AtomicU64,
        stop: AtomicBool,
        started: Mutex<Vec<u32>>,
        finished: Mutex<Vec<u32>>,
    }

    // SAFETY: `base` points into buffers the test keeps alive until the jobs ended.
    unsafe impl Send for TestWork {}
    unsafe impl Sync for TestWork {}

    impl TestWork {
        fn new(offs: Vec<u64>, depth: u64) -> TestWork {
            let n = offs.len();
            TestWork {
                fd: -1,
                base: std::ptr::null_mut(),
                block: 1,
                offs,
                depth,
                slots: AtomicU64::new(0),
                slots_max: AtomicU64::new(0),
                stop: AtomicBool::new(false),
                started: Mutex::new(vec![0; n]),
                finished: Mutex::new(vec![0; n]),
            }
        }

        fn finished(&self) -> Vec<u32> {
            relock(&self.finished).clone()
        }

        fn started(&self) -> Vec<u32> {
            relock(&self.started).clone()
        }
    }

    impl JobWork for TestWork {
        fn stopped(&self) -> bool {
            self.stop.load(Ordering::SeqCst)
        }
        fn try_begin(&self) -> bool {
            let r = self
                .slots
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < self.depth).then_some(n + 1)
                });
            if let Ok(n) = r {
                self.slots_max.fetch_max(n + 1, Ordering::SeqCst);
            }
            r.is_ok()
        }
        fn has_slot(&self) -> bool {
            self.slots.load(Ordering::SeqCst) < self.depth
        }
        fn abandon(&self) {
            self.slots.fetch_sub(1, Ordering::SeqCst);
        }
        fn request(&self, k: usize) -> Req {
            relock(&self.started)[k] += 1;
            Req {
                dir: Dir::Read,
                fd: self.fd,
                fixed_file: None,
                buf_index: None,
                off: self.offs[k],
                ptr: self.base.wrapping_add(k * self.block as usize),
                len: self.block,
            }
        }
        fn finish(&self, req: &Req, res: i64) -> Option<Req> {
            assert_eq!(res, i64::from(req.len), "request at {}", req.off);
            let k = self.offs.iter().position(|&o| o == req.off).unwrap();
            relock(&self.finished)[k] += 1;
            self.slots.fetch_sub(1, Ordering::SeqCst);
            None
        }
    }

    fn submit(b: &mut ThreadBackend, token: u64, w: &Arc<TestWork>) {
        let work: Arc<dyn JobWork> = Arc::clone(w) as Arc<dyn JobWork>;
        b.submit(Arc::new(Job::new(token, w.offs.len(), work)));
    }

    /// Runs `f` on another thread and fails instead of hanging if it does not return in a minute.
    fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the pool left a job's end unreported")
    }

    /// Waits for `n` job ends; their tokens.
    fn ends(b: &mut ThreadBackend, n: usize) -> Vec<u64> {
        let mut done = Vec::new();
        while done.len() < n {
            b.wait(&mut done);
        }
        assert!(done.iter().all(|d| d.1 == 0));
        done.iter().map(|d| d.0).collect()
    }

    /// Several jobs of real reads: every request of every job runs exactly once into its own
    /// block, and each job's end is reported once.
    #[test]
    fn pool_runs_every_request_of_every_job_once() {
        const BLOCK: usize = 512;
        const N: usize = 300;
        let f = file(N, BLOCK);
        let mut bufs = vec![vec![0u8; BLOCK * N]; 3];
        let mut b = ThreadBackend::new(4).unwrap();
        let works: Vec<Arc<TestWork>> = bufs
            .iter_mut()
            .map(|buf| {
                let mut w = TestWork::new((0..N).map(|i| (i * BLOCK) as u64).collect(), 64);
                w.fd = f.as_raw_fd();
                w.base = buf.as_mut_ptr();
                w.block = BLOCK as u32;
                Arc::new(w)
            })
            .collect();
        for (t, w) in works.iter().enumerate() {
            submit(&mut b, t as u64, w);
        }
        let mut tokens = ends(&mut b, 3);
        tokens.sort_unstable();
        assert_eq!(tokens, vec![0, 1, 2]);
        for w in &works {
            assert_eq!(w.started(), vec![1; N]);
            assert_eq!(w.finished(), vec![1; N]);
        }
        for buf in &bufs {
            for (i, blk) in buf.chunks(BLOCK).enumerate() {
                assert!(blk.iter().all(|&x| x == (i % 251) as u8), "block {i}");
            }
        }
    }

    /// A pipe's queue depth holds with more workers than it: no worker runs a request without
    /// a slot, and every request still runs.
    #[test]
    fn pool_keeps_a_jobs_requests_within_its_depth() {
        let mut b = ThreadBackend::with_runner(8, gated).unwrap();
        let w = Arc::new(TestWork::new((0..5000).collect(), 2));
        let w2 = Arc::clone(&w);
        within_a_minute(move || {
            submit(&mut b, 7, &w2);
            assert_eq!(ends(&mut b, 1), vec![7]);
        });
        assert!(w.slots_max.load(Ordering::SeqCst) <= 2);
        assert_eq!(w.finished(), vec![1; 5000]);
    }

    /// One worker stuck in a slow request: the other takes every later request of the job, and
    /// the job's end waits for the stuck one (its memory stays in use until then).
    #[test]
    fn pool_idle_worker_takes_the_next_request_while_one_is_stuck() {
        const STUCK: u64 = HELD + 1;
        let mut b = ThreadBackend::with_runner(2, gated).unwrap();
        let w = Arc::new(TestWork::new(vec![STUCK, 1, 2, 3, 4], 64));
        submit(&mut b, 1, &w);
        gate_started(STUCK, 1);
        let w2 = Arc::clone(&w);
        within_a_minute(move || {
            while w2.finished()[1..] != [1, 1, 1, 1] {
                std::thread::yield_now();
            }
        });
        assert_eq!(w.finished()[0], 0);
        let mut done = Vec::new();
        {
            let c = relock(&b.shared.completions);
            assert!(c.done.is_empty(), "ended with a request running");
        }
        open_gate(STUCK);
        let b = within_a_minute(move || {
            while done.is_empty() {
                b.wait(&mut done);
            }
            assert_eq!(done, vec![(1, 0)]);
            b
        });
        assert_eq!(w.finished(), vec![1; 5]);
        drop(b);
    }

    /// A stopped job starts nothing more: the two requests running finish, the job ends after
    /// them, and the other 98 never start.
    #[test]
    fn pool_stopped_job_starts_nothing_more_and_ends_after_its_running_requests() {
        const STUCK: u64 = HELD + 2;
        let mut b = ThreadBackend::with_runner(2, gated).unwrap();
        let mut offs = vec![STUCK, STUCK + 1];
        offs.extend(0..98);
        let w = Arc::new(TestWork::new(offs, 64));
        submit(&mut b, 5, &w);
        gate_started(STUCK, 1);
        gate_started(STUCK + 1, 1);
        w.stop.store(true, Ordering::SeqCst);
        open_gate(STUCK);
        open_gate(STUCK + 1);
        let b = within_a_minute(move || {
            assert_eq!(ends(&mut b, 1), vec![5]);
            b
        });
        let started = w.started();
        assert_eq!(&started[..2], &[1, 1]);
        assert!(started[2..].iter().all(|&n| n == 0), "{started:?}");
        assert_eq!(&w.finished()[..2], &[1, 1]);
        drop(b);
    }

    /// A job stopped before any worker took it (its transfer cancelled while the only worker is
    /// busy) still has its end reported, or the scheduler would wait for it for ever.
    #[test]
    fn pool_reports_the_end_of_a_job_stopped_before_any_worker_took_it() {
        const STUCK: u64 = HELD + 4;
        let mut b = ThreadBackend::with_runner(1, gated).unwrap();
        let busy = Arc::new(TestWork::new(vec![STUCK], 64));
        submit(&mut b, 1, &busy);
        gate_started(STUCK, 1);
        let never = Arc::new(TestWork::new((0..10).collect(), 64));
        submit(&mut b, 2, &never);
        never.stop.store(true, Ordering::SeqCst);
        open_gate(STUCK);
        let b = within_a_minute(move || {
            let mut tokens = ends(&mut b, 2);
            tokens.sort_unstable();
            assert_eq!(tokens, vec![1, 2]);
            b
        });
        assert_eq!(never.started(), vec![0; 10]);
        drop(b);
    }

    /// Dropping the pool runs the jobs handed to it to their end before the workers exit, so
    /// memory freed after the drop is never written to afterwards.
    #[test]
    fn pool_drop_runs_submitted_jobs_to_their_end() {
        const BLOCK: usize = 4096;
        const N: usize = 64;
        let f = file(N, BLOCK);
        let mut bufs = vec![vec![0xEEu8; BLOCK * N]; 2];
        {
            let mut b = ThreadBackend::new(2).unwrap();
            for (t, buf) in bufs.iter_mut().enumerate() {
                let mut w = TestWork::new((0..N).map(|i| (i * BLOCK) as u64).collect(), 64);
                w.fd = f.as_raw_fd();
                w.base = buf.as_mut_ptr();
                w.block = BLOCK as u32;
                submit(&mut b, t as u64, &Arc::new(w));
            }
        }
        for buf in &bufs {
            for (i, blk) in buf.chunks(BLOCK).enumerate() {
                assert!(blk.iter().all(|&x| x == (i % 251) as u8), "block {i}");
            }
        }
    }

    /// A kick wakes the scheduler out of `wait` with nothing ended (a command is waiting).
    #[test]
    fn pool_kick_wakes_the_waiting_scheduler() {
        let mut b = ThreadBackend::new(1).unwrap();
        let waker = b.waker();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let mut done = Vec::new();
            b.wait(&mut done);
            let _ = tx.send(done.len());
        });
        loop {
            waker.kick();
            if let Ok(n) = rx.recv_timeout(Duration::from_millis(10)) {
                assert_eq!(n, 0);
                break;
            }
        }
        t.join().unwrap();
    }

    /// Many workers and many small jobs, the scheduler waiting for ends and handing out more as
    /// the runtime does: every job's end is reported (a lost wake-up hangs, and the watchdog
    /// turns that into a failure).
    #[test]
    fn pool_reports_every_end_under_contention() {
        const JOBS: u64 = 20_000;
        within_a_minute(|| {
            let mut b = ThreadBackend::with_runner(64, gated).unwrap();
            let (mut submitted, mut ended) = (0u64, 0u64);
            let mut done = Vec::new();
            while ended < JOBS {
                while submitted < JOBS && submitted - ended < 4 {
                    let n = 1 + submitted % 3;
                    submit(
                        &mut b,
                        submitted,
                        &Arc::new(TestWork::new((0..n).collect(), 2)),
                    );
                    submitted += 1;
                }
                done.clear();
                b.wait(&mut done);
                ended += done.len() as u64;
            }
            assert_eq!(ended, JOBS);
        });
    }
}
