//! Replays a block trace against a real file with `O_DIRECT` and records every I/O's latency:
//! what the machine's own disk does with the trace (the simulated SSD's counterpart).
//!
//! The file is the device: offsets wrap modulo its size, and every I/O is aligned to
//! [`ALIGN`] (offset rounded down, size rounded up; `O_DIRECT` needs it), then clipped to the
//! file. Before the replay the file is filled with real data (written with `O_DIRECT`, 1 MiB at a
//! time) unless it already has the size: a sparse file would answer reads of holes without
//! touching the disk. I/Os run one at a time from one thread, in trace order (queue depth 1);
//! with `pace` each waits for its trace timestamp (scaled by `speed`), else they run back to
//! back. Latency is the wall time of the `pread`/`pwrite` call alone.
//!
//! Errors: a file that cannot be opened, created or filled (for example a file system without
//! `O_DIRECT`, such as tmpfs before Linux 6.6) is [`IoError::Io`] naming the path; bad options
//! are [`IoError::InvalidParameter`]. [`memory_backed`] tells a caller that the file is in
//! memory (tmpfs, ramfs), where the latencies are not a disk's.
//!
//! Thread-safety: a pure function of its inputs and the file; the caller owns the file.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use attune_workload::trace::{BlockRecord, IoKind};

use crate::error::{invalid, IoError, Result};

/// Alignment of every direct I/O (offset, size and buffer address).
pub const ALIGN: u64 = 4096;
/// Largest single I/O the replayer issues (larger trace I/Os are clipped to it).
pub const IO_MAX: u64 = 16 << 20;
const FILL_CHUNK: usize = 1 << 20;
/// `statfs` `f_type` of tmpfs (`linux/magic.h`).
const TMPFS_MAGIC: u32 = 0x0102_1994;
/// `statfs` `f_type` of ramfs (`linux/magic.h`; `libc` does not export it).
const RAMFS_MAGIC: u32 = 0x8584_58f6;

/// How to replay.
#[derive(Clone, Debug)]
pub struct DirectOptions {
    /// The file standing in for the device (created when missing).
    pub path: PathBuf,
    /// Its size in bytes (a multiple of [`ALIGN`], at least 1 MiB).
    pub file_bytes: u64,
    /// Honour the trace's timestamps (else back to back).
    pub pace: bool,
    /// Time scale with `pace`: 2.0 replays twice as fast.
    pub speed: f64,
    /// Use `O_DIRECT` (off: through the page cache, for comparison).
    pub direct: bool,
    /// Use `path` although it exists and is not empty. The replay writes into the file (the
    /// trace's writes, and a fill pattern when its size differs), so without this an existing
    /// non-empty file is refused: it may be someone's data.
    pub overwrite: bool,
}

/// One replayed I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectRow {
    /// Issue time since the replay started, nanoseconds.
    pub issue_ns: u64,
    /// Wall time of the system call, nanoseconds.
    pub latency_ns: u64,
    /// Bytes transferred (after alignment and clipping).
    pub bytes: u64,
    /// A read (else a write).
    pub is_read: bool,
}

/// Opens the file as the options say.
fn open(path: &Path, direct: bool, create: bool) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true).create(create);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> IoError {
    IoError::Io(std::io::Error::new(
        e.kind(),
        format!("{what} {}: {e}", path.display()),
    ))
}

/// An [`ALIGN`]-aligned window of `len` bytes inside `buf` (over-allocated by [`ALIGN`]).
fn aligned(buf: &mut [u8], len: usize) -> &mut [u8] {
    let off = buf.as_ptr().align_offset(ALIGN as usize);
    &mut buf[off..off + len]
}

/// Where an I/O of the trace lands in a file of `file_bytes`: (offset, bytes), aligned.
pub fn place(offset: u64, size: u32, file_bytes: u64) -> (u64, u64) {
    let bytes = u64::from(size.max(1))
        .div_ceil(ALIGN)
        .saturating_mul(ALIGN)
        .min(IO_MAX)
        .min(file_bytes);
    let room = file_bytes - bytes;
    let off = if room == 0 {
        0
    } else {
        (offset % (room + ALIGN)) / ALIGN * ALIGN
    };
    (off.min(room / ALIGN * ALIGN), bytes)
}

/// Whether `path` (a file or directory) lives on a memory-backed file system (tmpfs or ramfs,
/// by `statfs`'s `f_type`): there a replay measures memory copies, not a disk, whether or not
/// the kernel accepts `O_DIRECT` (Linux 6.6 and later do on tmpfs). A path that cannot be
/// examined is [`IoError::Io`] naming it.
pub fn memory_backed(path: &Path) -> Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        invalid(
            "path",
            path.display(),
            "must not contain a NUL byte".to_string(),
        )
    })?;
    let mut s = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `s` a buffer of the size statfs writes.
    let rc = unsafe { libc::statfs(c.as_ptr(), s.as_mut_ptr()) };
    if rc != 0 {
        return Err(io_err(
            path,
            "cannot examine the file system of",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: statfs returned 0, so it filled the buffer (which was zeroed besides).
    let s = unsafe { s.assume_init() };
    // f_type's width differs between targets; the magic numbers are 32 bits.
    let f_type = s.f_type as u32;
    Ok(f_type == TMPFS_MAGIC || f_type == RAMFS_MAGIC)
}

/// Slowest pacing factor: a thousandth of the trace's rate (the range of re-rating; a slower
/// one turns a second of trace into hours of sleeping).
pub const SPEED_MIN: f64 = 1e-3;
/// Fastest pacing factor.
pub const SPEED_MAX: f64 = 1e3;

/// Replays `trace` on the file (see the module documentation).
pub fn replay_direct(trace: &[BlockRecord], o: &DirectOptions) -> Result<Vec<DirectRow>> {
    if o.file_bytes < (1 << 20) || !o.file_bytes.is_multiple_of(ALIGN) {
        return Err(invalid(
            "file_bytes",
            o.file_bytes,
            format!("must be at least 1 MiB and a multiple of {ALIGN}"),
        ));
    }
    if !(SPEED_MIN..=SPEED_MAX).contains(&o.speed) {
        return Err(invalid(
            "speed",
            o.speed,
            format!("must be a finite factor in [{SPEED_MIN}, {SPEED_MAX}]"),
        ));
    }
    let have = std::fs::metadata(&o.path).map(|m| m.len()).unwrap_or(0);
    if have > 0 && !o.overwrite {
        return Err(invalid(
            "path",
            o.path.display(),
            format!(
                "exists and holds {have} bytes, which the replay would overwrite (its writes and \
                 a fill pattern): name a new file, or pass overwrite (--overwrite) to use this one"
            ),
        ));
    }
    let file = open(&o.path, o.direct, true).map_err(|e| io_err(&o.path, "cannot open", e))?;
    let mut buf = vec![0u8; IO_MAX as usize + ALIGN as usize];
    if have != o.file_bytes {
        file.set_len(o.file_bytes)
            .map_err(|e| io_err(&o.path, "cannot size", e))?;
        let chunk = aligned(&mut buf, FILL_CHUNK);
        for (i, b) in chunk.iter_mut().enumerate() {
            *b = (i.wrapping_mul(2_654_435_761) >> 13) as u8;
        }
        let mut pos = 0u64;
        while pos < o.file_bytes {
            let n = (o.file_bytes - pos).min(FILL_CHUNK as u64) as usize;
            file.write_all_at(&chunk[..n], pos)
                .map_err(|e| io_err(&o.path, "cannot fill", e))?;
            pos += n as u64;
        }
        file.sync_all()
            .map_err(|e| io_err(&o.path, "cannot sync", e))?;
    }
    let t0_trace = trace.first().map_or(0, |r| r.timestamp_ns);
    let mut rows = Vec::with_capacity(trace.len());
    let start = Instant::now();
    for r in trace {
        if o.pace {
            let due = (r.timestamp_ns.saturating_sub(t0_trace) as f64 / o.speed) as u64;
            let now = start.elapsed().as_nanos() as u64;
            if due > now {
                std::thread::sleep(Duration::from_nanos(due - now));
            }
        }
        let (off, bytes) = place(r.offset, r.size, o.file_bytes);
        let io = aligned(&mut buf, bytes as usize);
        let issue = start.elapsed();
        let t = Instant::now();
        let res = match r.kind {
            IoKind::Read => file.read_exact_at(io, off),
            IoKind::Write => file.write_all_at(io, off),
        };
        let latency = t.elapsed();
        res.map_err(|e| io_err(&o.path, "I/O failed on", e))?;
        rows.push(DirectRow {
            issue_ns: issue.as_nanos() as u64,
            latency_ns: latency.as_nanos() as u64,
            bytes,
            is_read: r.kind == IoKind::Read,
        });
    }
    Ok(rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_aligned_and_inside_the_file() {
        let f = 8 << 20;
        for (off, size) in [
            (0u64, 1u32),
            (12_345, 4096),
            (u64::MAX - 5, 70_000),
            (f, 1 << 30),
        ] {
            let (o, b) = place(off, size, f);
            assert_eq!(o % ALIGN, 0);
            assert_eq!(b % ALIGN, 0);
            assert!(b >= ALIGN && o + b <= f, "{off} {size} -> {o} {b}");
        }
        assert_eq!(place(8192, 4096, f), (8192, 4096));
    }

    #[test]
    fn memory_backed_file_systems_are_recognised() {
        // The expectation comes from the mount table, not from this machine's layout.
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let fs_of = |dir: &str| {
            mounts
                .lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split(' ').collect();
                    (f.len() > 2 && f[1] == dir).then(|| f[2].to_string())
                })
                .next_back()
        };
        assert!(!memory_backed(Path::new("/proc")).unwrap());
        if let Some(fs) = fs_of("/dev/shm") {
            let want = fs == "tmpfs" || fs == "ramfs";
            assert_eq!(memory_backed(Path::new("/dev/shm")).unwrap(), want, "{fs}");
        }
        let e = memory_backed(Path::new("/no/such/dir")).unwrap_err();
        assert!(e.to_string().contains("/no/such/dir"), "{e}");
    }

    #[test]
    fn replays_every_io_against_a_file() {
        let dir = std::env::temp_dir().join(format!("attune-io-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let trace: Vec<BlockRecord> = (0..64u64)
            .map(|i| BlockRecord {
                timestamp_ns: i * 1000,
                offset: i * 12_288,
                size: 4096 * (1 + (i % 3) as u32),
                kind: if i % 4 == 0 {
                    IoKind::Write
                } else {
                    IoKind::Read
                },
                latency_ns: 0,
            })
            .collect();
        // Buffered I/O: the test must pass on file systems without O_DIRECT (tmpfs).
        let o = DirectOptions {
            path: dir.join("dev"),
            file_bytes: 2 << 20,
            pace: false,
            speed: 1.0,
            direct: false,
            overwrite: false,
        };
        let rows = replay_direct(&trace, &o).unwrap();
        assert_eq!(rows.len(), 64);
        assert_eq!(std::fs::metadata(&o.path).unwrap().len(), 2 << 20);
        assert!(rows.iter().all(|r| r.bytes % ALIGN == 0));
        assert_eq!(rows.iter().filter(|r| r.is_read).count(), 48);
        // A second replay would write into the file: refused unless asked for, and the
        // file left as it was.
        let before = std::fs::read(&o.path).unwrap();
        let e = replay_direct(&trace, &o).unwrap_err();
        assert!(e.to_string().contains("overwrite"), "{e}");
        assert_eq!(std::fs::read(&o.path).unwrap(), before);
        let again = DirectOptions {
            overwrite: true,
            ..o.clone()
        };
        assert_eq!(replay_direct(&trace, &again).unwrap().len(), 64);
        let bad = DirectOptions {
            file_bytes: 1000,
            ..o.clone()
        };
        let e = replay_direct(&trace, &bad).unwrap_err();
        assert!(e.to_string().contains("`file_bytes`"));
        for speed in [1e-9, 0.0, f64::NAN, 1e4] {
            let slow = DirectOptions {
                speed,
                pace: true,
                ..o.clone()
            };
            let e = replay_direct(&trace, &slow).unwrap_err().to_string();
            assert!(e.contains("`speed`") && e.contains("[0.001, 1000]"), "{e}");
        }
        let missing = DirectOptions {
            path: dir.join("no/such/dir/dev"),
            ..o
        };
        let e = replay_direct(&trace, &missing).unwrap_err();
        assert!(e.to_string().contains("no/such/dir"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
