//! Micro-measurement of the miss costs C_a and C_k that L_e weighs (Symbiosis §3.1 "Miss Cost";
//! the paper calibrates offline, Attune at open and again on drift).
//!
//! * C_a — an application miss served by the second tier: a `pread` of a block-sized range that
//!   is in the page cache, plus decompressing one block (the caller passes the decompressor, so
//!   the crate stays codec-free).
//! * C_k — the extra cost of a device read: an `O_DIRECT` `pread` of the same size at a random
//!   aligned offset of a probe file, minus the cached `pread`. Where `O_DIRECT` is refused
//!   (tmpfs, some overlay file systems) the fallback drops the probe file's pages with
//!   `posix_fadvise(POSIX_FADV_DONTNEED)` before each buffered read; the method used is
//!   reported, and [`Calibration::device_suspect`] flags a device read that is not clearly
//!   slower than a cached one (then the caller should prefer configured costs).
//!
//! Medians over repetitions, so a preempted sample on a shared machine does not skew the result.
//! Thread-safety: free functions; each call owns its file handles. Invariant: every returned cost
//! is finite and >= 1 ns.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{CacheError, Result};

/// Alignment of `O_DIRECT` buffers, offsets and lengths. 4 KiB covers the logical block size of
/// common NVMe and SATA devices.
pub const DIRECT_ALIGN: usize = 4096;

/// How the device read was forced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceReadMethod {
    /// `O_DIRECT` reads bypassing the page cache.
    Direct,
    /// Buffered reads after `POSIX_FADV_DONTNEED` on the probe file.
    DropThenBuffered,
}

impl DeviceReadMethod {
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Direct => "o_direct",
            Self::DropThenBuffered => "fadvise_dontneed",
        }
    }
}

/// Measured costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// Median cached `pread` of one block, ns.
    pub cached_read_ns: f64,
    /// Median decompression of one block, ns.
    pub decompress_ns: f64,
    /// Median device read of one block, ns.
    pub device_read_ns: f64,
    /// How the device read was forced.
    pub device_method: DeviceReadMethod,
    /// C_a = cached read + decompression, ns.
    pub app_miss_ns: f64,
    /// C_k = device read − cached read, ns (at least 1).
    pub second_miss_ns: f64,
    /// The device read was under twice the cached read: probably served from a cache.
    pub device_suspect: bool,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::CalibrationIo {
        path: path.to_path_buf(),
        source,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 1.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2].max(1.0)
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Writes a probe file of `bytes` pseudo-random bytes in `dir` and syncs it. Returns its path.
pub fn write_probe_file(dir: &Path, bytes: u64, seed: u64) -> Result<PathBuf> {
    if bytes < (16 * DIRECT_ALIGN) as u64 {
        return Err(CacheError::CalibrationInput(
            "probe file must be at least 64 KiB",
        ));
    }
    let path = dir.join(format!("attune-cache-probe-{}.bin", std::process::id()));
    let mut f = File::create(&path).map_err(io_err(&path))?;
    let mut x = seed | 1;
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        for w in chunk.chunks_mut(8) {
            let v = xorshift(&mut x).to_le_bytes();
            w.copy_from_slice(&v[..w.len()]);
        }
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).map_err(io_err(&path))?;
        left -= n as u64;
    }
    f.sync_all().map_err(io_err(&path))?;
    Ok(path)
}

/// Median time of `reps` reads of `len` bytes at offset 0 of `path` after one warming read.
pub fn measure_cached_read_ns(path: &Path, len: usize, reps: usize) -> Result<f64> {
    if len == 0 || reps == 0 {
        return Err(CacheError::CalibrationInput(
            "read length and repetitions must be > 0",
        ));
    }
    let f = File::open(path).map_err(io_err(path))?;
    let mut buf = vec![0u8; len];
    f.read_at(&mut buf, 0).map_err(io_err(path))?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        let n = f.read_at(&mut buf, 0).map_err(io_err(path))?;
        t.push(s.elapsed().as_nanos() as f64);
        std::hint::black_box(n);
    }
    Ok(median(t))
}

/// Median time of `reps` calls of `decompress` (which should decompress one block and return
/// its output length, so the work is not optimised away).
pub fn measure_decompress_ns(reps: usize, mut decompress: impl FnMut() -> usize) -> f64 {
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let s = Instant::now();
        std::hint::black_box(decompress());
        t.push(s.elapsed().as_nanos() as f64);
    }
    median(t)
}

fn drop_cache(f: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fadvise only reads its integer arguments; the descriptor is open for the
    // duration of the call. A failure only means the read below may hit the cache, which the
    // `device_suspect` flag reports.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// Median time of `reps` device reads of `len` bytes (rounded up to [`DIRECT_ALIGN`]) at random
/// aligned offsets of `path`.
pub fn measure_device_read_ns(
    path: &Path,
    len: usize,
    reps: usize,
    seed: u64,
) -> Result<(f64, DeviceReadMethod)> {
    if len == 0 || reps == 0 {
        return Err(CacheError::CalibrationInput(
            "read length and repetitions must be > 0",
        ));
    }
    let len = len.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
    let size = std::fs::metadata(path).map_err(io_err(path))?.len();
    let slots = size / DIRECT_ALIGN as u64;
    if slots < (len / DIRECT_ALIGN) as u64 + 2 {
        return Err(CacheError::CalibrationInput(
            "probe file too small for the read length",
        ));
    }
    let mut raw = vec![0u8; len + DIRECT_ALIGN];
    let start = raw.as_ptr().align_offset(DIRECT_ALIGN).min(DIRECT_ALIGN);
    let buf = &mut raw[start..start + len];
    let direct = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path);
    let mut x = seed | 1;
    let max_slot = slots - (len / DIRECT_ALIGN) as u64;
    let mut pick = || (xorshift(&mut x) % max_slot) * DIRECT_ALIGN as u64;
    if let Ok(f) = direct {
        let mut t = Vec::with_capacity(reps);
        let mut ok = true;
        for _ in 0..reps {
            let off = pick();
            let s = Instant::now();
            if f.read_at(buf, off).is_err() {
                ok = false;
                break;
            }
            t.push(s.elapsed().as_nanos() as f64);
        }
        if ok {
            return Ok((median(t), DeviceReadMethod::Direct));
        }
    }
    let f = File::open(path).map_err(io_err(path))?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        drop_cache(&f);
        let off = pick();
        let s = Instant::now();
        f.read_at(buf, off).map_err(io_err(path))?;
        t.push(s.elapsed().as_nanos() as f64);
    }
    Ok((median(t), DeviceReadMethod::DropThenBuffered))
}

/// Full calibration: writes a probe file of `probe_bytes` in `dir`, measures, deletes it.
/// `block_bytes` is the compressed block size read per miss; `decompress` decompresses one block.
pub fn calibrate(
    dir: &Path,
    probe_bytes: u64,
    block_bytes: usize,
    reps: usize,
    decompress: impl FnMut() -> usize,
) -> Result<Calibration> {
    let path = write_probe_file(dir, probe_bytes, 0x00ca_11b7)?;
    let result = (|| {
        let cached = measure_cached_read_ns(&path, block_bytes, reps)?;
        let (device, method) = measure_device_read_ns(&path, block_bytes, reps, 0x0de7)?;
        let dec = measure_decompress_ns(reps, decompress);
        Ok(Calibration {
            cached_read_ns: cached,
            decompress_ns: dec,
            device_read_ns: device,
            device_method: method,
            app_miss_ns: cached + dec,
            second_miss_ns: (device - cached).max(1.0),
            device_suspect: device < 2.0 * cached,
        })
    })();
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_returns_positive_costs_and_cleans_up() {
        let dir = std::env::temp_dir();
        let c = calibrate(&dir, 4 << 20, 4096, 64, || std::hint::black_box(4096)).unwrap();
        assert!(c.app_miss_ns >= 1.0 && c.app_miss_ns.is_finite());
        assert!(c.second_miss_ns >= 1.0 && c.second_miss_ns.is_finite());
        let probe = dir.join(format!("attune-cache-probe-{}.bin", std::process::id()));
        assert!(!probe.exists());
    }

    #[test]
    fn tiny_probe_and_zero_lengths_are_rejected() {
        let dir = std::env::temp_dir();
        assert!(write_probe_file(&dir, 100, 1).is_err());
        assert!(measure_cached_read_ns(Path::new("/nonexistent/x"), 4096, 1).is_err());
        assert!(measure_device_read_ns(Path::new("/nonexistent/x"), 0, 1, 1).is_err());
    }
}
