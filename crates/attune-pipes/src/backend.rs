//! Backends that execute file requests: io_uring and pread/pwrite threads. Both are owned by the
//! runtime's one scheduler thread; the mmap and memcpy mechanisms run inline in that thread.
//!
//! A request carries raw pointers into memory that the scheduler keeps alive (it holds the
//! transfer, hence the pipe, hence the locators, until the request's completion is reaped).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
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
        if let Backend::Uring(u) = self {
            let _ = u.ring.submit();
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

/// Requests the thread pool keeps queued beyond the `threads` running ones, so that a thread
/// that finishes takes the next request at once instead of waiting for the scheduler.
pub(crate) fn thread_slack(threads: u32) -> u32 {
    threads.max(8)
}

struct Pool {
    queue: VecDeque<(u64, Req)>,
    done: Vec<Done>,
    closed: bool,
    /// The scheduler sleeps in `wait` for completions.
    waiting: bool,
    /// Wake the sleeping scheduler once this few requests (or fewer) are queued.
    low_water: usize,
}

struct Shared {
    pool: Mutex<Pool>,
    /// Signals queued work (or shutdown) to the I/O threads.
    work: Condvar,
    /// Signals completions to the scheduler.
    done: Condvar,
}

/// pread/pwrite threads. Completions are batched: the scheduler sleeps until the queue runs low
/// (or empties), so one wake-up of the scheduler serves several requests, and a thread never
/// waits for the scheduler between two requests while the queue holds work.
pub(crate) struct ThreadBackend {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl ThreadBackend {
    pub(crate) fn new(threads: u32) -> Result<ThreadBackend, String> {
        let shared = Arc::new(Shared {
            pool: Mutex::new(Pool {
                queue: VecDeque::new(),
                done: Vec::new(),
                closed: false,
                waiting: false,
                low_water: (thread_slack(threads.max(1)) / 2) as usize,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let mut b = ThreadBackend {
            shared,
            threads: Vec::new(),
        };
        for i in 0..threads.max(1) {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.shared.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&mut self, token: u64, req: Req) {
        self.lock().queue.push_back((token, req));
        self.shared.work.notify_one();
    }

    fn wait(&mut self, out: &mut Vec<Done>) {
        let mut p = self.lock();
        while p.done.is_empty() {
            p.waiting = true;
            p = self.shared.done.wait(p).unwrap_or_else(|e| e.into_inner());
        }
        p.waiting = false;
        out.append(&mut p.done);
    }

    fn stop(&mut self) {
        self.lock().closed = true;
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

fn io_thread(shared: &Shared) {
    let mut finished: Option<Done> = None;
    loop {
        let item = {
            let mut p = shared.pool.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(d) = finished.take() {
                p.done.push(d);
                if p.waiting && p.queue.len() <= p.low_water {
                    p.waiting = false;
                    shared.done.notify_one();
                }
            }
            loop {
                if let Some(item) = p.queue.pop_front() {
                    break Some(item);
                }
                if p.closed {
                    break None;
                }
                p = shared.work.wait(p).unwrap_or_else(|e| e.into_inner());
            }
        };
        let Some((token, r)) = item else { return };
        let res = loop {
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
                break -i64::from(errno);
            }
            break n as i64;
        };
        finished = Some((token, res));
    }
}
