//! Bindings for bulk ingest: `TableWriter` (an external sorted table) and the dict that
//! `DB.ingest` returns. The engine's contract is `attune_kv::TableWriter` and `DB::ingest`
//! (docs/kv.md "Bulk ingest"). A writer is used from one thread at a time (a mutex guards it);
//! its calls are short and keep the GIL, `finish` (fsyncs) releases it.

use crate::errors::{attune_error, to_py};
use crate::kv::{as_bytes, options_from_kwargs, path_arg};
use attune_kv as kv;
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

/// Writes one sorted table file for `DB.ingest`: `TableWriter(path, **options)` takes the
/// table options of `DB` (`block_size`, `compression`, `zstd_level`, `bloom_bits_per_key`).
/// Keys must come in strictly increasing order; `put` and `delete` raise
/// `InvalidArgumentError` naming the position of a key out of order. `finish()` fsyncs the file
/// and returns {"path", "smallest_key", "largest_key", "entries", "deletions", "file_size"}.
/// As a context manager it finishes at the end of the block, or removes the file when the
/// block raises.
#[pyclass(module = "attune._native")]
pub struct TableWriter {
    inner: Mutex<Option<kv::TableWriter>>,
    path: String,
}

impl TableWriter {
    fn with<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut kv::TableWriter) -> kv::Result<T>,
    ) -> PyResult<T> {
        let mut g = self.inner.lock();
        let w = g.as_mut().ok_or_else(|| finished(py, &self.path))?;
        f(w).map_err(to_py)
    }
}

fn finished(py: Python<'_>, path: &str) -> PyErr {
    attune_error(
        py,
        "InvalidArgumentError",
        format!("the table writer of {path} is already finished"),
    )
}

#[pymethods]
impl TableWriter {
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let p = path_arg(path)?;
        let opts = options_from_kwargs(options)?;
        let shown = p.display().to_string();
        let w = py
            .allow_threads(|| kv::TableWriter::create(&p, &opts))
            .map_err(to_py)?;
        Ok(TableWriter {
            inner: Mutex::new(Some(w)),
            path: shown,
        })
    }

    /// Adds `key` -> `value` (bytes, str as UTF-8, or bytes-like); `key` must be greater than
    /// every key added before.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (as_bytes(key, "key")?, as_bytes(value, "value")?);
        self.with(py, |w| w.put(&k, &v))
    }

    /// Adds a deletion of `key`: once ingested it hides the key's older versions.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = as_bytes(key, "key")?;
        self.with(py, |w| w.delete(&k))
    }

    /// Writes the index, filter and footer, fsyncs, and describes the file.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let w = self
            .inner
            .lock()
            .take()
            .ok_or_else(|| finished(py, &self.path))?;
        let info = py.allow_threads(move || w.finish()).map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("path", info.path.display().to_string())?;
        d.set_item("smallest_key", PyBytes::new(py, &info.smallest_key))?;
        d.set_item("largest_key", PyBytes::new(py, &info.largest_key))?;
        d.set_item("entries", info.entries)?;
        d.set_item("deletions", info.deletions)?;
        d.set_item("file_size", info.file_size)?;
        Ok(d)
    }

    /// Drops the writer without finishing: the partial file is removed.
    fn abandon(&self) {
        drop(self.inner.lock().take());
    }

    /// Entries added so far.
    #[getter]
    fn entries(&self) -> u64 {
        self.inner.lock().as_ref().map_or(0, |w| w.entries())
    }

    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// True once `finish` or `abandon` ran.
    #[getter]
    fn finished(&self) -> bool {
        self.inner.lock().is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) {
            self.abandon();
        } else if !self.finished() {
            self.finish(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<attune.TableWriter {:?} entries={}{}>",
            self.path,
            self.entries(),
            if self.finished() { " finished" } else { "" }
        )
    }
}

/// `DB.ingest`'s result as a dict: {"files": [{"source", "number", "level", "entries",
/// "file_size", "smallest_key", "largest_key"}], "sequence", "entries", "bytes",
/// "memtable_flushed", "sources_removed"}.
pub fn report_dict<'py>(py: Python<'py>, r: &kv::IngestReport) -> PyResult<Bound<'py, PyDict>> {
    let files = PyList::empty(py);
    for f in &r.files {
        let d = PyDict::new(py);
        d.set_item("source", f.source.display().to_string())?;
        d.set_item("number", f.number)?;
        d.set_item("level", f.level)?;
        d.set_item("entries", f.entries)?;
        d.set_item("file_size", f.file_size)?;
        d.set_item("smallest_key", PyBytes::new(py, &f.smallest_key))?;
        d.set_item("largest_key", PyBytes::new(py, &f.largest_key))?;
        files.append(d)?;
    }
    let d = PyDict::new(py);
    d.set_item("files", files)?;
    d.set_item("sequence", r.sequence)?;
    d.set_item("entries", r.entries)?;
    d.set_item("bytes", r.bytes)?;
    d.set_item("memtable_flushed", r.memtable_flushed)?;
    d.set_item("sources_removed", r.sources_removed)?;
    Ok(d)
}

/// The paths of `DB.ingest`: one path, or a list or tuple of them.
pub fn paths_arg(v: &Bound<'_, PyAny>) -> PyResult<Vec<std::path::PathBuf>> {
    if let Ok(l) = v.downcast::<PyList>() {
        return l.iter().map(|p| path_arg(&p)).collect();
    }
    if let Ok(t) = v.downcast::<PyTuple>() {
        return t.iter().map(|p| path_arg(&p)).collect();
    }
    Ok(vec![path_arg(v)?])
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<TableWriter>()?;
    Ok(())
}
