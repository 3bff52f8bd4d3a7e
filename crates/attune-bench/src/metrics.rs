//! Process and file-system measurements around a benchmark phase: I/O bytes from `/proc/self/io`,
//! CPU seconds from `getrusage`, peak RSS from `VmHWM`, on-disk size of a directory, dropping a
//! directory's files from the page cache (the machine: [`crate::machine`]).
//!
//! Thread-safety: every function reads process-wide state and may be called from any thread;
//! counters are process totals (all threads, background compaction included). Invariant: a counter
//! that cannot be read is reported as absent (`None`), never as zero.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::Serialize;

/// Bytes this process caused to be read from / written to the storage layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IoBytes {
    /// `read_bytes` of `/proc/self/io`.
    pub read: u64,
    /// `write_bytes` of `/proc/self/io`: bytes dirtied in the page cache for files (counted when
    /// dirtied, so a WAL deleted before writeback still counts), plus direct I/O. Kept raw (not
    /// minus `cancelled_write_bytes`) to match `ru_oublock`, which is all db_bench rows have.
    pub written: u64,
}

/// Reads `/proc/self/io`; `None` where the kernel does not expose it.
pub fn io_bytes() -> Option<IoBytes> {
    let text = fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
            .and_then(|v| v.trim().parse().ok())
    };
    Some(IoBytes {
        read: field("read_bytes")?,
        written: field("write_bytes")?,
    })
}

/// CPU seconds of the calling thread (0 if the clock cannot be read).
pub fn thread_cpu_seconds() -> f64 {
    attune_kv::env::thread_cpu_ns() as f64 / 1e9
}

/// Seconds the calling thread has spent runnable but waiting for a CPU (the second field of
/// `/proc/thread-self/schedstat`), or `None` where the kernel does not keep the statistic. On a
/// shared machine this is the part of a phase's wall time that other processes took.
pub fn thread_runqueue_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// User plus system CPU seconds of this process (all threads).
pub fn cpu_seconds() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct; on failure it stays zeroed.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    if rc != 0 {
        return 0.0;
    }
    // SAFETY: initialised by getrusage (or zeroed).
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Peak resident set size in bytes (`VmHWM` of `/proc/self/status`).
pub fn peak_rss_bytes() -> Option<u64> {
    let text = fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Bytes allocated on disk by the files under `dir` (`st_blocks * 512`, so sparse files such as
/// LMDB's map count only what they occupy), recursively.
pub fn disk_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    for e in entries.flatten() {
        let Ok(md) = e.metadata() else { continue };
        if md.is_dir() {
            total += disk_bytes(&e.path());
        } else {
            total += md.blocks() * 512;
        }
    }
    total
}

/// Syncs every file under `dir` and asks the kernel to drop its cached pages
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`). Returns how many files were dropped.
pub fn drop_page_cache(dir: &Path) -> usize {
    let mut count = 0;
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(md) = e.metadata() else { continue };
        if md.is_dir() {
            count += drop_page_cache(&path);
            continue;
        }
        let Ok(f) = fs::File::open(&path) else {
            continue;
        };
        let _ = f.sync_all();
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor; DONTNEED over the whole file.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc == 0 {
            count += 1;
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_counters_are_readable_on_linux() {
        assert!(io_bytes().is_some());
        assert!(peak_rss_bytes().unwrap_or(0) > 0);
        let spin: u64 = (0..2_000_000u64).fold(0, |a, b| a.wrapping_add(b * b));
        assert!(spin > 0);
        assert!(cpu_seconds() > 0.0);
        // The run-queue wait of this thread never goes backwards (it may stay 0 on an idle
        // machine); the kernel here keeps schedstat.
        let a = thread_runqueue_seconds().expect("schedstat");
        let b = thread_runqueue_seconds().expect("schedstat");
        assert!(a >= 0.0 && b >= a, "{a} {b}");
    }

    #[test]
    fn disk_bytes_counts_nested_files() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("sub")).unwrap();
        fs::write(d.path().join("sub/a"), vec![1u8; 10_000]).unwrap();
        fs::write(d.path().join("b"), vec![1u8; 5_000]).unwrap();
        let n = disk_bytes(d.path());
        assert!(n >= 15_000, "{n}");
        assert_eq!(drop_page_cache(d.path()), 2);
    }
}
