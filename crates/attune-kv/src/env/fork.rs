//! Knowing whether this process is a fork of the one that opened a database.
//!
//! `fork()` copies the parent's memory (an open `DB` included) but only the calling thread: the
//! child has the parent's file descriptors, its file lock and its write-ahead log mapping, and
//! none of its background threads. A write in the child would land in a memtable no thread
//! flushes, or in a log the parent is appending to; closing would join threads that do not exist.
//! So every handle remembers the *fork generation* it was opened in and refuses to work in
//! another.
//!
//! The generation is a counter that a `pthread_atfork` child handler bumps in every forked child
//! (Python's `os.fork` and `multiprocessing`'s "fork" start method both call `fork(3)`, which runs
//! the handlers). Reading it is one relaxed atomic load, cheap enough for every operation; calling
//! `getpid()` instead would cost a system call per `get`.
//!
//! Thread safety: any thread. What stays true: the counter only grows, and it differs from the
//! value read in the parent in every process created by `fork(3)` after [`generation`] was first
//! called.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTER: Once = Once::new();

extern "C" fn in_child() {
    // Async-signal-safe: a single atomic add.
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The current fork generation; the first call registers the fork handler.
pub fn generation() -> u64 {
    REGISTER.call_once(|| {
        // SAFETY: `in_child` is an `extern "C"` function with no arguments that only performs an
        // atomic add, which is allowed in a child of a multi-threaded process before exec.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        // ENOMEM is the only documented failure; without the handler a fork goes unnoticed,
        // which is the behaviour of every engine that does not check, not a corruption.
        debug_assert_eq!(rc, 0, "pthread_atfork failed");
    });
    GENERATION.load(Ordering::Relaxed)
}

/// The generation without registering (for hot paths of a handle whose open registered it).
#[inline]
pub fn current() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}
