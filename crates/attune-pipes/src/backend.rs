//! Backends that execute file requests: io_uring and pread/pwrite threads. Both are owned by the
//! runtime's one scheduler thread; the mmap and memcpy mechanisms run inline in that thread.
//!
//! A request carries raw pointers into memory that the scheduler keeps alive (it holds the
//! transfer, hence the pipe, hence the locators, until the request's completion is reaped).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
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
    /// Queues one request; false if the backend has no room (never for threads).
    pub(crate) fn push(&mut self, token: u64, req: Req) -> bool {
        match self {
            Backend::Uring(u) => u.push(token, req),
            Backend::Threads(t) => {
                t.push(token, req);
                true
            }
        }
    }

    /// Submits what was pushed and waits until at least one completion, which it returns.
    pub(crate) fn wait(&mut self, out: &mut Vec<Done>) {
        match self {
            Backend::Uring(u) => u.wait(out),
            Backend::Threads(t) => t.wait(out),
        }
    }

    /// Submits what was pushed without waiting.
    pub(crate) fn flush(&mut self) {
        match self {
            Backend::Uring(u) => {
                let _ = u.ring.submit();
            }
            Backend::Threads(t) => t.flush(),
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
}

impl UringBackend {
    /// A ring of `entries` (rounded up to a power of two); with `sqpoll_idle_ms`, a kernel thread
    /// polls its submission queue and sleeps after that many idle milliseconds (the kernel may
    /// refuse: the ring is then a plain one and `sqpoll` says why).
    pub(crate) fn new(entries: u32, sqpoll_idle_ms: Option<u32>) -> Result<UringBackend, String> {
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
                let _ = self.ring.submit();
                return self.ring.submission().push(&entry).is_ok();
            }
        }
        true
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

/// Bytes of small requests the thread pool may keep queued beyond the running ones (see
/// `thread_slack`): 1 MiB, 256 requests of 4 KiB. A bound on what a cancelled transfer still
/// reads (queued requests run to completion) and on nothing else: a queued request holds no
/// memory of its own.
pub(crate) const QUEUED_BYTES_MAX: u64 = 1 << 20;

/// Requests the thread pool keeps queued beyond the `threads` running ones, so that a thread
/// that finishes takes the next request at once instead of waiting for the scheduler: as many
/// as it runs (at least 8) and, for requests of `block_bytes` small enough, up to
/// [`QUEUED_BYTES_MAX`] of them, at most 16 per thread (of at least 8).
///
/// Why deep for small blocks: a worker whose queue runs dry, with nothing to take from the
/// others, sleeps until the scheduler refills the queues, and the scheduler refills only after
/// it has been woken for a batch of completions and got a core. At 4 KiB a request takes a few
/// tens of microseconds of CPU, so with one request queued per worker (the old rule) every
/// third to second request found its worker asleep: 1.35-1.5 context switches per request
/// against fio psync's 1.0 (the pread's own sleep). With 1 MiB queued: 1.04-1.16. Large blocks
/// keep the old rule: there the wake-up is small next to the request, and a cancelled
/// transfer would otherwise read many MiB more.
pub(crate) fn thread_slack(threads: u32, block_bytes: u64) -> u32 {
    let base = threads.max(8);
    let small = QUEUED_BYTES_MAX / block_bytes.max(1);
    let small = u32::try_from(small).unwrap_or(u32::MAX).min(16 * base);
    base.max(small)
}

/// One worker's queue. The scheduler appends a batch under one lock and signals the worker only
/// when it sleeps; the worker takes one request per lock, so that what it has not started stays
/// where an idle worker can take it (see `steal`).
struct Lane {
    state: Mutex<LaneState>,
    work: Condvar,
    /// Requests queued in this lane plus the one its worker runs: the scheduler hands a batch to
    /// the least loaded lanes, and an idle worker takes from a lane with work queued behind the
    /// running request (`load >= 2`). A hint read without the lock; the queue is the truth.
    load: AtomicUsize,
}

#[derive(Default)]
struct LaneState {
    queue: VecDeque<(u64, Req)>,
    closed: bool,
    /// The worker sleeps in `work` for requests.
    sleeping: bool,
}

struct Completions {
    done: Vec<Done>,
    /// The scheduler sleeps in `wait` for completions.
    waiting: bool,
}

/// Runs one request; the result is bytes or -errno.
type Runner = fn(&Req) -> i64;

struct Shared {
    lanes: Vec<Lane>,
    completions: Mutex<Completions>,
    /// Signals completions to the scheduler.
    done: Condvar,
    /// Requests handed to workers and not yet reported (queued, running or finished unreported).
    outstanding: AtomicUsize,
    /// Wake the sleeping scheduler once this few requests (or fewer) are outstanding.
    low_water: usize,
    /// `run_req` (pread/pwrite); tests put a stand-in here that they can hold.
    run: Runner,
    /// Called by a worker with its finished requests before it reports them: nothing in
    /// production; tests pause a report here to order it against the scheduler.
    before_report: fn(&[Done]),
}

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// pread/pwrite threads, each with its own queue (the layout of fio's `psync` jobs: no queue
/// that every worker locks per request). `push` only stages a request; `flush` (or `wait`) hands
/// the staged requests to the least loaded workers, one lock and at most one wake-up per worker
/// per batch. A worker takes its own queue's requests one at a time and, when its queue is empty,
/// takes the oldest request queued behind a busy worker before it sleeps, so no worker idles
/// while another holds requests it has not started. Completions are reported in batches; the
/// scheduler is woken once the outstanding requests fall to the low-water mark (or a worker runs
/// dry), so one wake-up of the scheduler serves several requests. Every request handed to a
/// worker runs to completion, also on shutdown (the scheduler keeps its memory alive until the
/// completion is reaped).
pub(crate) struct ThreadBackend {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    staged: Vec<(u64, Req)>,
    /// Scratch of `flush`: each lane's load, and the batch handed to it.
    loads: Vec<usize>,
    batches: Vec<Vec<(u64, Req)>>,
}

impl ThreadBackend {
    /// `threads` workers for requests of about `block_bytes` (which sets the low-water mark
    /// of completions, half the queued slack: see `thread_slack`).
    pub(crate) fn new(threads: u32, block_bytes: u64) -> Result<ThreadBackend, String> {
        ThreadBackend::with_runner(threads, block_bytes, run_req, |_| {})
    }

    fn with_runner(
        threads: u32,
        block_bytes: u64,
        run: Runner,
        before_report: fn(&[Done]),
    ) -> Result<ThreadBackend, String> {
        let n = threads.max(1) as usize;
        let shared = Arc::new(Shared {
            lanes: (0..n)
                .map(|_| Lane {
                    state: Mutex::new(LaneState::default()),
                    work: Condvar::new(),
                    load: AtomicUsize::new(0),
                })
                .collect(),
            completions: Mutex::new(Completions {
                done: Vec::new(),
                waiting: false,
            }),
            done: Condvar::new(),
            outstanding: AtomicUsize::new(0),
            low_water: n + (thread_slack(n as u32, block_bytes) / 2) as usize,
            run,
            before_report,
        });
        let mut b = ThreadBackend {
            shared,
            threads: Vec::new(),
            staged: Vec::new(),
            loads: vec![0; n],
            batches: vec![Vec::new(); n],
        };
        for i in 0..n {
            let sh = Arc::clone(&b.shared);
            let h = std::thread::Builder::new()
                .name(format!("attune-pipes-io-{i}"))
                .spawn(move || io_thread(&sh, i))
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

    fn push(&mut self, token: u64, req: Req) {
        self.staged.push((token, req));
    }

    /// Hands the staged requests to the workers, each to the least loaded lane (ties to the
    /// lowest index).
    pub(crate) fn flush(&mut self) {
        if self.staged.is_empty() {
            return;
        }
        let n = self.shared.lanes.len();
        for (load, lane) in self.loads.iter_mut().zip(&self.shared.lanes) {
            *load = lane.load.load(Ordering::Relaxed);
        }
        for (token, req) in self.staged.drain(..) {
            let lane = (0..n).min_by_key(|&i| (self.loads[i], i)).unwrap_or(0);
            self.loads[lane] += 1;
            self.batches[lane].push((token, req));
        }
        for (lane, batch) in self.shared.lanes.iter().zip(&mut self.batches) {
            if batch.is_empty() {
                continue;
            }
            // Counted before a worker can see them, so that no count goes below zero.
            self.shared
                .outstanding
                .fetch_add(batch.len(), Ordering::SeqCst);
            lane.load.fetch_add(batch.len(), Ordering::Relaxed);
            let wake = {
                let mut st = relock(&lane.state);
                st.queue.extend(batch.drain(..));
                std::mem::take(&mut st.sleeping)
            };
            if wake {
                lane.work.notify_one();
            }
        }
    }

    fn wait(&mut self, out: &mut Vec<Done>) {
        self.flush();
        let mut c = relock(&self.shared.completions);
        while c.done.is_empty() {
            c.waiting = true;
            c = self.shared.done.wait(c).unwrap_or_else(|e| e.into_inner());
        }
        c.waiting = false;
        out.append(&mut c.done);
    }

    fn stop(&mut self) {
        self.flush();
        for lane in &self.shared.lanes {
            relock(&lane.state).closed = true;
            lane.work.notify_one();
        }
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

/// Reports finished requests in one batch; wakes the scheduler if it sleeps and few requests
/// remain outstanding (it never sleeps with none outstanding, so the mark is always reached).
fn report(shared: &Shared, finished: &mut Vec<Done>) {
    if finished.is_empty() {
        return;
    }
    let k = finished.len();
    (shared.before_report)(finished);
    let wake = {
        let mut c = relock(&shared.completions);
        // Counted under the lock: the scheduler adds to the count only before it takes this lock
        // to sleep, so the reports it sleeps through see the count fall in lock order, and the
        // one that reaches the mark wakes it. A count taken before the lock can be stale: a
        // worker preempted between the two would see a high count, the others report the rest
        // and the scheduler reaps them and sleeps again, and the late report wakes no one.
        let left = shared.outstanding.fetch_sub(k, Ordering::SeqCst) - k;
        c.done.append(finished);
        if c.waiting && left <= shared.low_water {
            c.waiting = false;
            true
        } else {
            false
        }
    };
    if wake {
        shared.done.notify_one();
    }
}

/// Completions a worker reports at most in one batch while its queue still holds work.
const REPORT_BATCH: usize = 8;

/// Takes the oldest request queued in another lane behind the request its worker runs, trying
/// the lanes after `me` in turn (each lane visited at most once), and moves its count to `me`.
fn steal(shared: &Shared, me: usize) -> Option<(u64, Req)> {
    let n = shared.lanes.len();
    for k in 1..n {
        let victim = &shared.lanes[(me + k) % n];
        if victim.load.load(Ordering::Relaxed) < 2 {
            continue;
        }
        let item = relock(&victim.state).queue.pop_front();
        if let Some(item) = item {
            shared.lanes[me].load.fetch_add(1, Ordering::Relaxed);
            victim.load.fetch_sub(1, Ordering::Relaxed);
            return Some(item);
        }
    }
    None
}

fn io_thread(shared: &Shared, me: usize) {
    let lane = &shared.lanes[me];
    let mut finished: Vec<Done> = Vec::with_capacity(REPORT_BATCH);
    loop {
        let own = relock(&lane.state).queue.pop_front();
        if let Some((token, r)) = own.or_else(|| steal(shared, me)) {
            let res = (shared.run)(&r);
            finished.push((token, res));
            let left = lane.load.fetch_sub(1, Ordering::Relaxed) - 1;
            if left == 0 || finished.len() >= REPORT_BATCH {
                report(shared, &mut finished);
            }
            continue;
        }
        // Nothing queued here or behind a busy worker: report first (the scheduler may wait
        // for exactly these), then sleep until the scheduler hands this lane work or closes it.
        report(shared, &mut finished);
        let mut st = relock(&lane.state);
        if !st.queue.is_empty() {
            continue;
        }
        if st.closed {
            return;
        }
        st.sleeping = true;
        while st.sleeping && st.queue.is_empty() && !st.closed {
            st = lane.work.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.sleeping = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    fn file(blocks: usize, block: usize) -> std::fs::File {
        let mut f = tempfile_in_tmp();
        for i in 0..blocks {
            f.write_all(&vec![(i % 251) as u8; block]).unwrap();
        }
        f
    }

    fn tempfile_in_tmp() -> std::fs::File {
        let p = std::env::temp_dir().join(format!(
            "attune-pipes-backend-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
            .unwrap();
        std::fs::remove_file(&p).unwrap();
        f
    }

    fn req(f: &std::fs::File, off: u64, buf: &mut [u8]) -> Req {
        Req {
            dir: Dir::Read,
            fd: f.as_raw_fd(),
            fixed_file: None,
            buf_index: None,
            off,
            ptr: buf.as_mut_ptr(),
            len: buf.len() as u32,
        }
    }

    /// The pool keeps 1 MiB of small requests queued (16 per thread of at least 8 at most),
    /// and for large ones as many as it runs (at least 8), as before.
    #[test]
    fn thread_slack_queues_a_mebibyte_of_small_requests_and_one_per_worker_of_large() {
        assert_eq!(thread_slack(1, 4096), 128);
        assert_eq!(thread_slack(4, 4096), 128);
        assert_eq!(thread_slack(16, 4096), 256);
        assert_eq!(thread_slack(64, 4096), 256);
        assert_eq!(thread_slack(16, 64 << 10), 16);
        assert_eq!(thread_slack(64, 64 << 10), 64);
        for threads in [1, 4, 16, 64] {
            assert_eq!(thread_slack(threads, 1 << 20), threads.max(8));
            assert_eq!(thread_slack(threads, 128 << 10), threads.max(8));
            let queued = u64::from(thread_slack(threads, 4096)) * 4096;
            assert!(
                queued <= QUEUED_BYTES_MAX,
                "{threads} threads queue {queued} B"
            );
        }
    }

    /// Every request handed to the workers completes exactly once with its own result, whatever
    /// the order of completion; pushes are only staged until a flush or a wait.
    #[test]
    fn threads_complete_every_request_once_in_batches() {
        const BLOCK: usize = 512;
        const N: usize = 200;
        let f = file(N, BLOCK);
        let mut bufs = vec![vec![0u8; BLOCK]; N];
        let mut b = ThreadBackend::new(4, 512).unwrap();
        let mut done = Vec::new();
        for (i, buf) in bufs.iter_mut().enumerate() {
            b.push(i as u64, req(&f, (i * BLOCK) as u64, buf));
            if i % 7 == 6 {
                b.flush();
            }
        }
        // One past the end: a short read of 0 bytes, reported, not dropped.
        let mut extra = vec![0u8; BLOCK];
        b.push(N as u64, req(&f, (N * BLOCK) as u64, &mut extra));
        while done.len() < N + 1 {
            b.wait(&mut done);
        }
        let mut tokens: Vec<u64> = done.iter().map(|d| d.0).collect();
        tokens.sort_unstable();
        assert_eq!(tokens, (0..=N as u64).collect::<Vec<_>>());
        for &(t, res) in &done {
            let want = if t == N as u64 { 0 } else { BLOCK as i64 };
            assert_eq!(res, want, "token {t}");
        }
        for (i, buf) in bufs.iter().enumerate() {
            assert!(buf.iter().all(|&x| x == (i % 251) as u8), "block {i}");
        }
        assert_eq!(b.shared.outstanding.load(Ordering::SeqCst), 0);
        for lane in &b.shared.lanes {
            assert_eq!(lane.load.load(Ordering::Relaxed), 0);
        }
    }

    /// Many workers reporting small batches while the scheduler reaps and refills at the
    /// low-water mark, as the runtime does: every request completes and the scheduler is never
    /// left asleep with completions waiting. (With the count taken before the completions lock,
    /// a worker preempted between the two left the scheduler asleep for good; the watchdog turns
    /// that hang into a failure.)
    #[test]
    fn threads_scheduler_is_woken_for_every_completion_under_contention() {
        const THREADS: u32 = 64;
        const TOTAL: u64 = 200_000;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut b = ThreadBackend::with_runner(THREADS, 4096, gated, |_| {}).unwrap();
            let limit = u64::from(THREADS + thread_slack(THREADS, 4096));
            let (mut issued, mut reaped) = (0u64, 0u64);
            let mut done = Vec::new();
            while reaped < TOTAL {
                while issued < TOTAL && issued - reaped < limit {
                    b.push(
                        issued,
                        Req {
                            dir: Dir::Read,
                            fd: -1,
                            fixed_file: None,
                            buf_index: None,
                            off: issued,
                            ptr: std::ptr::null_mut(),
                            len: 1,
                        },
                    );
                    issued += 1;
                }
                done.clear();
                b.wait(&mut done);
                reaped += done.len() as u64;
            }
            let _ = tx.send(reaped);
        });
        let reaped = rx.recv_timeout(std::time::Duration::from_secs(120));
        assert_eq!(reaped, Ok(TOTAL), "the scheduler was left asleep");
    }

    /// The gate `gated` holds requests at `HELD_OFF` behind: open, and whether one has started.
    static GATE: Mutex<(bool, bool)> = Mutex::new((false, false));
    static GATE_CV: Condvar = Condvar::new();
    const HELD_OFF: u64 = u64::MAX;

    /// A stand-in for pread: a request at `HELD_OFF` waits until the gate opens; any other
    /// completes at once with its length, touching no memory.
    fn gated(r: &Req) -> i64 {
        if r.off == HELD_OFF {
            let mut g = relock(&GATE);
            g.1 = true;
            GATE_CV.notify_all();
            while !g.0 {
                g = GATE_CV.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
        i64::from(r.len)
    }

    fn open_gate() {
        relock(&GATE).0 = true;
        GATE_CV.notify_all();
    }

    /// A request queued behind a worker stuck in a slow request is taken by an idle worker and
    /// completes before the slow one: no worker idles while another holds requests it has not
    /// started. (A watchdog opens the gate after a minute, so the test fails instead of hanging
    /// if the queued request waits for the stuck worker.)
    #[test]
    fn threads_idle_worker_takes_requests_queued_behind_a_stuck_one() {
        let held = |off: u64| Req {
            dir: Dir::Read,
            fd: -1,
            fixed_file: None,
            buf_index: None,
            off,
            ptr: std::ptr::null_mut(),
            len: 1,
        };
        let mut b = ThreadBackend::with_runner(2, 128 << 10, gated, |_| {}).unwrap();
        // The stuck request goes to lane 0 (both empty, ties to the lowest index).
        b.push(0, held(HELD_OFF));
        b.flush();
        {
            let mut g = relock(&GATE);
            while !g.1 {
                g = GATE_CV.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
        // Lane loads (1, 0): tokens 1 and 3 go to lane 1, token 2 to lane 0 behind the stuck one.
        for t in 1..=3 {
            b.push(t, held(t));
        }
        b.flush();
        let watchdog = std::thread::spawn(|| {
            std::thread::sleep(std::time::Duration::from_secs(60));
            open_gate();
        });
        let mut done = Vec::new();
        while done.len() < 3 {
            b.wait(&mut done);
        }
        let mut first: Vec<u64> = done.iter().map(|d| d.0).collect();
        first.sort_unstable();
        open_gate();
        while done.len() < 4 {
            b.wait(&mut done);
        }
        assert_eq!(first, vec![1, 2, 3], "completions in order: {done:?}");
        assert!(done.iter().all(|&(t, res)| res == 1 || t == 0));
        drop(b);
        drop(watchdog);
    }

    /// Dropping the backend runs every staged and queued request before the workers exit, so
    /// memory the caller frees after the drop is never written to afterwards.
    #[test]
    fn threads_drop_finishes_staged_requests() {
        const BLOCK: usize = 4096;
        const N: usize = 64;
        let f = file(N, BLOCK);
        let mut bufs = vec![vec![0xEEu8; BLOCK]; N];
        {
            let mut b = ThreadBackend::new(2, 128 << 10).unwrap();
            for (i, buf) in bufs.iter_mut().enumerate() {
                b.push(i as u64, req(&f, (i * BLOCK) as u64, buf));
            }
            b.flush();
            // Half more, staged only.
            let mut more = vec![vec![0xEEu8; BLOCK]; N / 2];
            for (i, buf) in more.iter_mut().enumerate() {
                b.push((N + i) as u64, req(&f, (i * BLOCK) as u64, buf));
            }
            drop(b);
            for (i, buf) in more.iter().enumerate() {
                assert!(
                    buf.iter().all(|&x| x == (i % 251) as u8),
                    "staged block {i}"
                );
            }
        }
        for (i, buf) in bufs.iter().enumerate() {
            assert!(buf.iter().all(|&x| x == (i % 251) as u8), "block {i}");
        }
    }

    /// A second gate for `late_report`, apart from `GATE` (tests run in parallel):
    /// (held requests may run, held requests started, the late report paused, it may go on).
    static GATE2: Mutex<(bool, usize, bool, bool)> = Mutex::new((false, 0, false, false));
    static GATE2_CV: Condvar = Condvar::new();
    /// The request whose report `pause_late_report` holds.
    const LATE: u64 = 2;

    fn gated2(r: &Req) -> i64 {
        if r.off == HELD_OFF {
            let mut g = relock(&GATE2);
            g.1 += 1;
            GATE2_CV.notify_all();
            while !g.0 {
                g = GATE2_CV.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
        i64::from(r.len)
    }

    fn pause_late_report(done: &[Done]) {
        if done.iter().any(|d| d.0 == LATE) {
            let mut g = relock(&GATE2);
            g.2 = true;
            GATE2_CV.notify_all();
            while !g.3 {
                g = GATE2_CV.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
    }

    fn gate2_until(what: impl Fn(&(bool, usize, bool, bool)) -> bool) {
        let mut g = relock(&GATE2);
        while !what(&g) {
            g = GATE2_CV.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn gate2_set(how: impl Fn(&mut (bool, usize, bool, bool))) {
        how(&mut relock(&GATE2));
        GATE2_CV.notify_all();
    }

    /// A worker held up before its report while the other worker reports everything else and
    /// the scheduler reaps it all and sleeps again: the late report must still wake the
    /// scheduler. (With the outstanding count taken before the completions lock, the late
    /// report carried the count from before the others' reports, above the low-water mark, and
    /// the scheduler slept for good; a watchdog turns that hang into a failure.)
    #[test]
    fn threads_a_late_report_still_wakes_the_scheduler() {
        let req = |off: u64| Req {
            dir: Dir::Read,
            fd: -1,
            fixed_file: None,
            buf_index: None,
            off,
            ptr: std::ptr::null_mut(),
            len: 1,
        };
        // Two workers: low-water mark 2 + 8 / 2 = 6 outstanding.
        let mut b = ThreadBackend::with_runner(2, 128 << 10, gated2, pause_late_report).unwrap();
        // Token 0 holds worker A (lane 0); worker B sleeps with nothing to do.
        b.push(0, req(HELD_OFF));
        b.flush();
        gate2_until(|g| g.1 == 1);
        while !relock(&b.shared.lanes[1].state).sleeping {
            std::thread::yield_now();
        }
        // Loads (1, 0): tokens 1, 3, .., 15 go to lane 1, tokens 2, 4, .., 16 to lane 0 behind
        // the held request (lane 0 is filled first). Worker B runs its eight, then takes token 2
        // (the oldest in lane 0) and reports it alone with 9 outstanding: that report pauses.
        for t in 1..=16 {
            b.push(t, req(t));
        }
        b.flush();
        gate2_until(|g| g.2);
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::clone(&b.shared);
        let reaped = Arc::new(AtomicUsize::new(0));
        let reaped_by_scheduler = Arc::clone(&reaped);
        let scheduler = std::thread::spawn(move || {
            let mut done = Vec::new();
            while done.len() < 17 {
                b.wait(&mut done);
                reaped_by_scheduler.store(done.len(), Ordering::SeqCst);
            }
            let _ = tx.send(done.len());
            drop(b);
        });
        // Worker A finishes everything else; the scheduler reaps it and sleeps for the last one.
        gate2_set(|g| g.0 = true);
        loop {
            let c = relock(&shared.completions);
            if c.waiting && reaped.load(Ordering::SeqCst) == 16 {
                break;
            }
            drop(c);
            std::thread::yield_now();
        }
        gate2_set(|g| g.3 = true);
        let got = rx.recv_timeout(std::time::Duration::from_secs(60));
        assert_eq!(got, Ok(17), "the scheduler slept through the late report");
        let _ = scheduler.join();
    }
}
