//! Backends that execute file requests: io_uring and pread/pwrite threads. Both are owned by the
//! runtime's one scheduler thread; the mmap and memcpy mechanisms run inline in that thread.
//!
//! A request carries raw pointers into memory that the scheduler keeps alive (it holds the
//! transfer, hence the pipe, hence the locators, until the request's completion is reaped).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use io_uring::{opcode, types, IoUring};

/// Slots of registered buffers and of fixed files in a ring (sparse tables, filled on attach).
pub(crate) const REGISTER_SLOTS: u32 = 64;

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
    pub(crate) buffers_sparse: Result<(), String>,
    pub(crate) files_sparse: Result<(), String>,
}

impl UringBackend {
    pub(crate) fn new(entries: u32) -> Result<UringBackend, String> {
        let ring = IoUring::new(entries.next_power_of_two().max(8)).map_err(|e| e.to_string())?;
        let buffers_sparse = ring
            .submitter()
            .register_buffers_sparse(REGISTER_SLOTS)
            .map_err(|e| format!("registering buffers: {e}"));
        let files_sparse = ring
            .submitter()
            .register_files_sparse(REGISTER_SLOTS)
            .map_err(|e| format!("registering files: {e}"));
        Ok(UringBackend {
            ring,
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

struct Shared {
    queue: Mutex<(VecDeque<(u64, Req)>, bool)>,
    cv: Condvar,
    stop: AtomicBool,
}

pub(crate) struct ThreadBackend {
    shared: Arc<Shared>,
    done_rx: Receiver<Done>,
    threads: Vec<JoinHandle<()>>,
}

impl ThreadBackend {
    pub(crate) fn new(threads: u32) -> Result<ThreadBackend, String> {
        let shared = Arc::new(Shared {
            queue: Mutex::new((VecDeque::new(), false)),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let (tx, done_rx) = channel::<Done>();
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let sh = Arc::clone(&shared);
            let tx: Sender<Done> = tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("attune-pipes-io-{i}"))
                .spawn(move || io_thread(&sh, &tx))
                .map_err(|e| e.to_string());
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    let mut b = ThreadBackend {
                        shared,
                        done_rx,
                        threads: handles,
                    };
                    b.stop();
                    return Err(e);
                }
            }
        }
        Ok(ThreadBackend {
            shared,
            done_rx,
            threads: handles,
        })
    }

    fn push(&mut self, token: u64, req: Req) {
        let mut q = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.0.push_back((token, req));
        self.shared.cv.notify_one();
    }

    fn wait(&mut self, out: &mut Vec<Done>) {
        if let Ok(d) = self.done_rx.recv() {
            out.push(d);
        }
        while let Ok(d) = self.done_rx.try_recv() {
            out.push(d);
        }
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let mut q = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            q.1 = true;
        }
        self.shared.cv.notify_all();
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

fn io_thread(shared: &Shared, tx: &Sender<Done>) {
    loop {
        let item = {
            let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(item) = q.0.pop_front() {
                    break Some(item);
                }
                if q.1 {
                    break None;
                }
                q = shared.cv.wait(q).unwrap_or_else(|p| p.into_inner());
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
        if tx.send((token, res)).is_err() {
            return;
        }
    }
}
