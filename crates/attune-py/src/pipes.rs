//! Python bindings for Data Pipes (`attune-pipes`): `PipeRuntime`, `Locator`, `Pipe`,
//! `PipeTransfer` and `pipes_sort`. The typed front is `python/attune/pipes.py` (futures,
//! defaults, docs). Errors go through `errors.rs` (`pipes_error`).
//!
//! Thread-safety: every class is `Send + Sync` on the Rust side (`frozen` pyclasses); calls that
//! wait (`transfer_blocking`, `PipeTransfer.wait`, `pipes_sort`) release the GIL, and the sort
//! checks for Ctrl-C at each progress step and cancels itself (no output left behind).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use attune_pipes::sort::{sort_file, RecordFormat, SortOptions};
use attune_pipes::{
    DramOptions, FileOptions, Locator, MechanismChoice, MergeSelect, Pipe, PipeOptions, Runtime,
    RuntimeOptions, Transfer,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::pipes_error;
use crate::stats;

/// A Python int argument as an unsigned Rust integer. PyO3's own conversion of a negative or
/// too large int raises a bare `OverflowError` that names no argument; this raises
/// `InvalidArgumentError` naming it and the accepted range. (The parameters are `i64` on the
/// Rust side so that PyO3 still raises its `TypeError` naming the argument for a non-int.)
fn uint<T: TryFrom<i64> + Bounded>(name: &str, v: i64) -> PyResult<T> {
    T::try_from(v).map_err(|_| {
        let why = if v < 0 { "is negative" } else { "is too large" };
        pipes_error(attune_pipes::Error::InvalidArgument(format!(
            "{name}={v} {why}: it must be an int in 0..={}",
            T::MAX_TEXT
        )))
    })
}

fn uint_opt<T: TryFrom<i64> + Bounded>(name: &str, v: Option<i64>) -> PyResult<Option<T>> {
    v.map(|v| uint(name, v)).transpose()
}

/// The largest value of an unsigned argument type, for error messages.
trait Bounded {
    const MAX_TEXT: &'static str;
}
impl Bounded for u32 {
    const MAX_TEXT: &'static str = "4294967295";
}
impl Bounded for u64 {
    const MAX_TEXT: &'static str = "9223372036854775807";
}
impl Bounded for usize {
    const MAX_TEXT: &'static str = "9223372036854775807";
}

fn mechanism(s: &str) -> PyResult<MechanismChoice> {
    s.parse::<MechanismChoice>().map_err(pipes_error)
}

/// The Data Pipes runtime (one scheduler thread and its mechanism).
#[pyclass(module = "attune._native", name = "PipeRuntime", frozen)]
pub struct PyRuntime {
    rt: Runtime,
}

#[pymethods]
impl PyRuntime {
    #[new]
    #[pyo3(signature = (mechanism="auto", queue_depth=32, block_bytes=131072, register_buffers=true, fixed_files=true, register_per_block=true, sqpoll_idle_ms=None, submit_batch=1))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        mechanism: &str,
        queue_depth: i64,
        block_bytes: i64,
        register_buffers: bool,
        fixed_files: bool,
        register_per_block: bool,
        sqpoll_idle_ms: Option<i64>,
        submit_batch: i64,
    ) -> PyResult<Self> {
        let opts = RuntimeOptions {
            mechanism: self::mechanism(mechanism)?,
            queue_depth: uint("queue_depth", queue_depth)?,
            block_bytes: uint("block_bytes", block_bytes)?,
            register_buffers,
            fixed_files,
            register_per_block,
            sqpoll_idle_ms: uint_opt("sqpoll_idle_ms", sqpoll_idle_ms)?,
            submit_batch: uint("submit_batch", submit_batch)?,
        };
        let rt = py
            .allow_threads(|| Runtime::new(opts))
            .map_err(pipes_error)?;
        Ok(PyRuntime { rt })
    }

    /// What the runtime chose: mechanism, fallbacks (with the kernel's reasons), registration.
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats::to_dict(py, self.rt.report())
    }

    /// Declares a pipe from `src` to `dst`.
    #[pyo3(signature = (src, dst, block_bytes=None, queue_depth=None))]
    fn pipe(
        &self,
        src: &PyLocator,
        dst: &PyLocator,
        block_bytes: Option<i64>,
        queue_depth: Option<i64>,
    ) -> PyResult<PyPipe> {
        let opts = PipeOptions {
            block_bytes: uint_opt("block_bytes", block_bytes)?,
            queue_depth: uint_opt("queue_depth", queue_depth)?,
        };
        let p = self
            .rt
            .pipe(&src.loc, &dst.loc, opts)
            .map_err(pipes_error)?;
        Ok(PyPipe { pipe: p })
    }
}

/// A resource locator: DRAM, a core-cache-sized buffer, a pmem mapping or a file.
#[pyclass(module = "attune._native", name = "Locator", frozen)]
pub struct PyLocator {
    loc: Locator,
}

#[pymethods]
impl PyLocator {
    #[staticmethod]
    #[pyo3(signature = (nbytes, huge_pages=true))]
    fn dram(nbytes: i64, huge_pages: bool) -> PyResult<Self> {
        let nbytes = uint("nbytes", nbytes)?;
        Ok(PyLocator {
            loc: Locator::dram_with(nbytes, DramOptions { huge_pages }).map_err(pipes_error)?,
        })
    }

    #[staticmethod]
    #[pyo3(signature = (core=0, nbytes=None))]
    fn core_cache(core: i64, nbytes: Option<i64>) -> PyResult<Self> {
        let (core, nbytes) = (uint("core", core)?, uint_opt("nbytes", nbytes)?);
        Ok(PyLocator {
            loc: Locator::core_cache(core, nbytes).map_err(pipes_error)?,
        })
    }

    #[staticmethod]
    fn pmem(path: PathBuf, nbytes: i64) -> PyResult<Self> {
        let nbytes = uint("nbytes", nbytes)?;
        Ok(PyLocator {
            loc: Locator::pmem(path, nbytes).map_err(pipes_error)?,
        })
    }

    #[staticmethod]
    #[pyo3(signature = (path, direct=false, write=false, create=false, truncate=false))]
    fn file(
        path: PathBuf,
        direct: bool,
        write: bool,
        create: bool,
        truncate: bool,
    ) -> PyResult<Self> {
        let opts = FileOptions {
            direct,
            write,
            create,
            truncate,
        };
        Ok(PyLocator {
            loc: Locator::file(path, opts).map_err(pipes_error)?,
        })
    }

    /// `dram`, `core_cache`, `pmem`, `file` or `direct_file`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.loc.kind().name()
    }

    /// Whether this memory was mapped for transparent huge pages (`dram(n, huge_pages=True)`
    /// from 2 MiB on, where the kernel takes the advice).
    #[getter]
    fn huge_pages(&self) -> bool {
        self.loc.huge_pages()
    }

    /// Size in bytes (a file's current length).
    fn size(&self) -> PyResult<u64> {
        self.loc.len().map_err(pipes_error)
    }

    /// Copies `length` bytes at `offset` out of a memory locator.
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: i64,
        length: i64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let (offset, length) = (uint("offset", offset)?, uint("length", length)?);
        let g = self.loc.bytes().map_err(pipes_error)?;
        let (s, e) = range(&self.loc, offset, length, g.len())?;
        Ok(PyBytes::new(py, &g[s..e]))
    }

    /// Copies `data` into a memory locator at `offset`.
    fn write(&self, offset: i64, data: &[u8]) -> PyResult<()> {
        let offset = uint("offset", offset)?;
        let mut g = self.loc.bytes().map_err(pipes_error)?;
        let (s, e) = range(&self.loc, offset, data.len() as u64, g.len())?;
        g[s..e].copy_from_slice(data);
        Ok(())
    }

    /// Flushes a file (fdatasync) or a pmem mapping (msync).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| self.loc.sync()).map_err(pipes_error)
    }

    fn __repr__(&self) -> String {
        format!("Locator({})", self.loc.describe())
    }
}

fn range(loc: &Locator, offset: u64, length: u64, size: usize) -> PyResult<(usize, usize)> {
    let end = offset.checked_add(length).filter(|&e| e <= size as u64);
    match end {
        Some(e) => Ok((offset as usize, e as usize)),
        None => Err(pipes_error(attune_pipes::Error::OutOfRange {
            what: loc.describe(),
            offset,
            len: length,
            size: size as u64,
        })),
    }
}

fn offsets(src_offset: i64, dst_offset: i64, length: i64) -> PyResult<(u64, u64, u64)> {
    Ok((
        uint("src_offset", src_offset)?,
        uint("dst_offset", dst_offset)?,
        uint("length", length)?,
    ))
}

/// A declared pipe between two locators.
#[pyclass(module = "attune._native", name = "Pipe", frozen)]
pub struct PyPipe {
    pipe: Pipe,
}

#[pymethods]
impl PyPipe {
    /// Starts an asynchronous transfer; returns its handle.
    fn transfer(&self, src_offset: i64, dst_offset: i64, length: i64) -> PyResult<PyTransfer> {
        let (src_offset, dst_offset, length) = offsets(src_offset, dst_offset, length)?;
        let t = self
            .pipe
            .transfer(src_offset, dst_offset, length)
            .map_err(pipes_error)?;
        Ok(PyTransfer { t })
    }

    /// Moves and waits (GIL released); returns the bytes moved.
    fn transfer_blocking(
        &self,
        py: Python<'_>,
        src_offset: i64,
        dst_offset: i64,
        length: i64,
    ) -> PyResult<u64> {
        let (src_offset, dst_offset, length) = offsets(src_offset, dst_offset, length)?;
        py.allow_threads(|| self.pipe.transfer_blocking(src_offset, dst_offset, length))
            .map_err(pipes_error)
    }

    /// Mechanism, registration, bytes moved, requests in flight.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats::to_dict(py, &self.pipe.state())
    }

    /// An eventfd, readable when a transfer of this pipe ended (for select/poll/epoll).
    fn fileno(&self) -> i32 {
        self.pipe.ready_fd()
    }
}

/// An asynchronous transfer.
#[pyclass(module = "attune._native", name = "PipeTransfer", frozen)]
pub struct PyTransfer {
    t: Transfer,
}

#[pymethods]
impl PyTransfer {
    fn done(&self) -> bool {
        self.t.is_done()
    }

    /// Waits (GIL released) at most `timeout` seconds (None: no limit); the bytes moved, or
    /// None on timeout; raises the transfer's error.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<u64>> {
        // A negative or NaN timeout polls; one too large for a Duration (inf) waits unbounded.
        let limit = timeout.map(|s| Duration::try_from_secs_f64(s.max(0.0)).ok());
        let r = py.allow_threads(|| match limit {
            None | Some(None) => Some(self.t.wait()),
            Some(Some(d)) => self.t.wait_timeout(d),
        });
        match r {
            None => Ok(None),
            Some(r) => r.map(Some).map_err(pipes_error),
        }
    }

    fn cancel(&self) {
        self.t.cancel();
    }

    #[getter]
    fn bytes_done(&self) -> u64 {
        self.t.bytes_done()
    }
}

/// The external sort (see `attune.pipes.sort`).
#[pyfunction]
#[pyo3(signature = (input, output, memory_bytes=268435456, run_bytes=None, fan_in=4, merge_fan_in=None, merge_select="heap", block_bytes=None, staging_dir=None, threads=None, double_buffering=true, early_spill=true, direct_io=true, mechanism="auto", progress=None, record_format="fixed"))]
#[allow(clippy::too_many_arguments)]
fn pipes_sort<'py>(
    py: Python<'py>,
    input: PathBuf,
    output: PathBuf,
    memory_bytes: i64,
    run_bytes: Option<i64>,
    fan_in: i64,
    merge_fan_in: Option<i64>,
    merge_select: &str,
    block_bytes: Option<i64>,
    staging_dir: Option<PathBuf>,
    threads: Option<i64>,
    double_buffering: bool,
    early_spill: bool,
    direct_io: bool,
    mechanism: &str,
    progress: Option<PyObject>,
    record_format: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let memory_bytes: u64 = uint("memory_bytes", memory_bytes)?;
    let run_bytes: Option<u64> = uint_opt("run_bytes", run_bytes)?;
    let fan_in: usize = uint("fan_in", fan_in)?;
    let merge_fan_in: Option<usize> = uint_opt("merge_fan_in", merge_fan_in)?;
    let block_bytes: Option<u64> = uint_opt("block_bytes", block_bytes)?;
    let threads: Option<usize> = uint_opt("threads", threads)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let d = SortOptions::default();
    let opts = SortOptions {
        memory_bytes_max: memory_bytes,
        run_bytes,
        fan_in,
        merge_fan_in,
        merge_select: MergeSelect::parse(merge_select).ok_or_else(|| {
            pipes_error(attune_pipes::Error::InvalidArgument(format!(
                "merge_select {merge_select:?} must be one of loser-tree, heap, scan"
            )))
        })?,
        block_bytes: block_bytes.unwrap_or(d.block_bytes),
        staging_dir,
        threads: threads.unwrap_or(d.threads),
        double_buffering,
        early_spill,
        direct_io,
        runtime: RuntimeOptions {
            mechanism: self::mechanism(mechanism)?,
            ..Default::default()
        },
        cancel: Some(Arc::clone(&cancel)),
        format: RecordFormat::parse(record_format).ok_or_else(|| {
            pipes_error(attune_pipes::Error::InvalidArgument(format!(
                "record_format {record_format:?} must be fixed or lines"
            )))
        })?,
    };
    let interrupted: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
    let report = py.allow_threads(|| {
        let cb = |phase: &str, done: u64, total: u64| {
            Python::with_gil(|py| {
                let mut err = py.check_signals().err();
                if err.is_none() {
                    if let Some(p) = progress.as_ref() {
                        err = p.call1(py, (phase, done, total)).err();
                    }
                }
                if let Some(e) = err {
                    cancel.store(true, Ordering::SeqCst);
                    if let Ok(mut slot) = interrupted.lock() {
                        slot.get_or_insert(e);
                    }
                }
            })
        };
        sort_file(&input, &output, &opts, Some(&cb))
    });
    if let Some(e) = interrupted.into_inner().ok().flatten() {
        return Err(e);
    }
    let report = report.map_err(pipes_error)?;
    stats::to_dict(py, &report)
}

/// Writes `records` sort-benchmark records of `seed` to `path` (attune-workload's `records`);
/// returns the bytes written.
#[pyfunction]
#[pyo3(signature = (path, records, seed=1))]
fn pipes_gen_records(py: Python<'_>, path: PathBuf, records: i64, seed: i64) -> PyResult<u64> {
    let (records, seed): (u64, u64) = (uint("records", records)?, uint("seed", seed)?);
    use std::os::unix::fs::FileExt;
    py.allow_threads(|| -> std::io::Result<u64> {
        let f = std::fs::File::create(&path)?;
        let per = 100_000u64;
        let mut buf = vec![0u8; (per * 100) as usize];
        let mut i = 0;
        while i < records {
            let k = (records - i).min(per);
            let n = (k * 100) as usize;
            attune_workload::records::fill(seed, i, &mut buf[..n]);
            f.write_all_at(&buf[..n], i * 100)?;
            i += k;
        }
        f.sync_all()?;
        Ok(records * 100)
    })
    .map_err(|e| {
        pipes_error(attune_pipes::Error::Io {
            op: "write",
            path: path.clone(),
            offset: 0,
            errno: attune_pipes::Errno(e.raw_os_error().unwrap_or(libc_eio())),
        })
    })
}

/// Writes `lines` lines of `seed` (attune-workload's `records::line`: `min_bytes..=max_bytes`
/// printable characters and `\n`) to `path`; returns the bytes written.
#[pyfunction]
#[pyo3(signature = (path, lines, min_bytes=10, max_bytes=200, seed=1))]
fn pipes_gen_lines(
    py: Python<'_>,
    path: PathBuf,
    lines: i64,
    min_bytes: i64,
    max_bytes: i64,
    seed: i64,
) -> PyResult<u64> {
    let lines: u64 = uint("lines", lines)?;
    let (min_bytes, max_bytes): (usize, usize) =
        (uint("min_bytes", min_bytes)?, uint("max_bytes", max_bytes)?);
    let seed: u64 = uint("seed", seed)?;
    if min_bytes > max_bytes {
        return Err(pipes_error(attune_pipes::Error::InvalidArgument(format!(
            "min_bytes {min_bytes} is above max_bytes {max_bytes}"
        ))));
    }
    use std::io::Write;
    py.allow_threads(|| -> std::io::Result<u64> {
        let mut f = std::fs::File::create(&path)?;
        let per = 100_000u64;
        let mut buf = Vec::new();
        let (mut i, mut bytes) = (0u64, 0u64);
        while i < lines {
            let k = (lines - i).min(per);
            buf.clear();
            attune_workload::records::fill_lines(seed, i, k, min_bytes, max_bytes, &mut buf);
            f.write_all(&buf)?;
            bytes += buf.len() as u64;
            i += k;
        }
        f.sync_all()?;
        Ok(bytes)
    })
    .map_err(|e| {
        pipes_error(attune_pipes::Error::Io {
            op: "write",
            path: path.clone(),
            offset: 0,
            errno: attune_pipes::Errno(e.raw_os_error().unwrap_or(libc_eio())),
        })
    })
}

fn libc_eio() -> i32 {
    5
}

/// Adds the pipes classes and functions to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRuntime>()?;
    m.add_class::<PyLocator>()?;
    m.add_class::<PyPipe>()?;
    m.add_class::<PyTransfer>()?;
    m.add_function(wrap_pyfunction!(pipes_sort, m)?)?;
    m.add_function(wrap_pyfunction!(pipes_gen_records, m)?)?;
    m.add_function(wrap_pyfunction!(pipes_gen_lines, m)?)?;
    Ok(())
}
