//! Bindings for the key-value engine: `DB`, `WriteBatch`, `Snapshot` and the items iterator.
//! Engine calls release the GIL; iteration fetches items in chunks so a Python loop costs one GIL
//! round-trip per chunk, not per item.
//!
//! Lifetimes: `DB.close()` closes the engine at once (lock released, WAL synced), whatever
//! snapshots and iterators exist; those raise `ClosedError` from then on, as plyvel's do. A handle
//! used in a forked child raises `ForkedError` (the engine checks; see `attune_kv::env::fork`).
//! Keys and values are `bytes`, `str` (UTF-8) or any buffer (`bytearray`, `memoryview`, numpy).

use crate::errors::{attune_error, to_py};
use attune_kv::{self as kv, Options, ReadOptions, WriteOptions};
use parking_lot::Mutex;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};
use std::borrow::Cow;
use std::sync::{Arc, Weak};

/// Items fetched per GIL release while iterating.
const ITER_CHUNK: usize = 256;

/// The bytes of a key or value given as `bytes`, `str` (encoded as UTF-8), `bytearray` or any
/// object with the buffer protocol (copied). `what` names the argument in the error.
fn as_bytes<'a>(v: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = v.downcast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(s) = v.downcast::<PyString>() {
        return Ok(Cow::Owned(s.to_cow()?.as_bytes().to_vec()));
    }
    if let Ok(b) = v.downcast::<PyByteArray>() {
        return Ok(Cow::Owned(b.to_vec()));
    }
    // Anything else that exposes a buffer (memoryview, array.array, numpy arrays); `bytes(x)`
    // is not used because it turns an int n into n zero bytes.
    let py = v.py();
    let copied = py
        .import("builtins")
        .and_then(|b| b.getattr("memoryview"))
        .and_then(|mv| mv.call1((v,)))
        .and_then(|m| m.call_method0("tobytes"))
        .and_then(|b| Ok(b.downcast_into::<PyBytes>()?.as_bytes().to_vec()));
    match copied {
        Ok(b) => Ok(Cow::Owned(b)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be bytes, str (stored as UTF-8) or a bytes-like object such as \
             bytearray or memoryview, not {}",
            v.get_type().name()?
        ))),
    }
}

fn opt_bytes(v: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<u8>>> {
    match v {
        None => Ok(None),
        Some(x) if x.is_none() => Ok(None),
        Some(x) => Ok(Some(as_bytes(x, what)?.into_owned())),
    }
}

fn option_string(key: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = v.extract::<bool>() {
        return Ok(b.to_string());
    }
    if let Ok(i) = v.extract::<i64>() {
        if i < 0 {
            return Err(attune_error(
                v.py(),
                "InvalidArgumentError",
                format!("option {key}={i} must not be negative"),
            ));
        }
        return Ok(i.to_string());
    }
    if let Ok(i) = v.extract::<u64>() {
        return Ok(i.to_string());
    }
    if v.is_instance_of::<PyInt>() {
        return Err(attune_error(
            v.py(),
            "InvalidArgumentError",
            format!("option {key}={v} is too large (at most {})", u64::MAX),
        ));
    }
    if let Ok(f) = v.extract::<f64>() {
        if !f.is_finite() {
            return Err(attune_error(
                v.py(),
                "InvalidArgumentError",
                format!("option {key}={f} must be a finite number"),
            ));
        }
        return Ok(f.to_string());
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(s);
    }
    Err(attune_error(
        v.py(),
        "InvalidArgumentError",
        format!(
            "option {key}={} must be a bool, a number or a str such as \"64MiB\"",
            v.repr()?
        ),
    ))
}

/// Builds engine options from Python keyword arguments.
pub fn options_from_kwargs(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options::default();
    if let Some(kw) = kwargs {
        for (k, v) in kw.iter() {
            let key: String = k.extract()?;
            o.set(&key, &option_string(&key, &v)?).map_err(to_py)?;
        }
    }
    Ok(o)
}

/// An atomic group of puts and deletes.
#[pyclass(module = "attune._native")]
pub struct WriteBatch {
    inner: Mutex<kv::WriteBatch>,
}

#[pymethods]
impl WriteBatch {
    #[new]
    fn new() -> Self {
        WriteBatch {
            inner: Mutex::new(kv::WriteBatch::new()),
        }
    }
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (k, v) = (as_bytes(key, "key")?, as_bytes(value, "value")?);
        self.inner.lock().put(&k, &v).map_err(to_py)
    }
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = as_bytes(key, "key")?;
        self.inner.lock().delete(&k).map_err(to_py)
    }
    fn clear(&self) {
        self.inner.lock().clear()
    }
    fn __len__(&self) -> usize {
        self.inner.lock().len()
    }
}

/// A consistent read view. Release it with `release()` or a `with` block; closing the database
/// releases it too. A released snapshot keeps only a weak reference to the engine, so it does
/// not keep a database that nothing else uses open (and locked).
#[pyclass(module = "attune._native")]
pub struct Snapshot {
    held: Mutex<Option<(Arc<kv::DB>, kv::Snapshot)>>,
    weak: Weak<kv::DB>,
    seq: u64,
}

#[pymethods]
impl Snapshot {
    #[getter]
    fn sequence(&self) -> u64 {
        self.seq
    }
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let db = self.check(py)?;
        get_impl(py, &db, &as_bytes(key, "key")?, Some(self.seq))
    }
    #[pyo3(signature = (start=None, end=None, reverse=false))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Items> {
        let db = self.check(py)?;
        let (start, end) = (opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        items_impl(&db, start, end, reverse, Some(self.seq))
    }
    fn release(&self) {
        // In a forked child the engine's snapshot list is not touched (see kv::Snapshot's drop).
        self.held.lock().take();
    }
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    fn __exit__(&self, _a: PyObject, _b: PyObject, _c: PyObject) {
        self.release();
    }
}

impl Snapshot {
    /// The engine, while the database is usable and the snapshot not released.
    fn check(&self, py: Python<'_>) -> PyResult<Arc<kv::DB>> {
        let Some(db) = self.weak.upgrade() else {
            return Err(attune_error(py, "ClosedError", "the database was closed"));
        };
        db.check_usable().map_err(to_py)?;
        if self.held.lock().is_none() {
            return Err(attune_error(py, "ClosedError", "snapshot was released"));
        }
        Ok(db)
    }
}

fn get_impl<'py>(
    py: Python<'py>,
    db: &Arc<kv::DB>,
    key: &[u8],
    seq: Option<u64>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let ro = ReadOptions {
        snapshot: seq,
        ..Default::default()
    };
    let r = py.allow_threads(|| db.get_opt(key, &ro));
    Ok(r.map_err(to_py)?.map(|v| PyBytes::new(py, &v)))
}

fn items_impl(
    db: &Arc<kv::DB>,
    start: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
    reverse: bool,
    seq: Option<u64>,
) -> PyResult<Items> {
    let mut it = db
        .iter(&ReadOptions {
            snapshot: seq,
            ..Default::default()
        })
        .map_err(to_py)?;
    it.set_bounds(start, end);
    Ok(Items {
        weak: Arc::downgrade(db),
        state: Mutex::new(ItemsState {
            db: Some(db.clone()),
            it: Some(it),
            started: false,
            reverse,
            buf: Vec::new(),
            pos: 0,
            done: false,
        }),
    })
}

struct ItemsState {
    /// The engine and the iterator until the last item was fetched (then dropped, so that an
    /// exhausted iterator does not keep an otherwise unused database open).
    db: Option<Arc<kv::DB>>,
    it: Option<kv::DbIterator>,
    started: bool,
    reverse: bool,
    buf: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
    done: bool,
}

impl ItemsState {
    fn fill(&mut self) -> kv::Result<()> {
        self.buf.clear();
        self.pos = 0;
        let Some(it) = self.it.as_mut() else {
            self.done = true;
            return Ok(());
        };
        if !self.started {
            self.started = true;
            if self.reverse {
                it.seek_to_last();
            } else {
                it.seek_to_first();
            }
        }
        while self.buf.len() < ITER_CHUNK && it.valid() {
            self.buf.push((it.key().to_vec(), it.value().to_vec()));
            if self.reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        if self.buf.is_empty() {
            self.done = true;
            let status = it.status();
            self.it = None;
            self.db = None;
            status?;
        }
        Ok(())
    }
}

/// Iterator of (key, value) pairs in key order (or reverse). After the database is closed it
/// raises `ClosedError`, even for items it had already fetched.
#[pyclass(module = "attune._native")]
pub struct Items {
    weak: Weak<kv::DB>,
    state: Mutex<ItemsState>,
}

#[pymethods]
impl Items {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        match self.weak.upgrade() {
            Some(db) => db.check_usable().map_err(to_py)?,
            None => return Err(attune_error(py, "ClosedError", "the database was closed")),
        }
        let mut st = self.state.lock();
        if st.pos >= st.buf.len() {
            if st.done {
                return Ok(None);
            }
            let inner: &mut ItemsState = &mut st;
            py.allow_threads(|| inner.fill()).map_err(to_py)?;
            if st.done {
                return Ok(None);
            }
        }
        let pos = st.pos;
        let (k, v) = std::mem::take(&mut st.buf[pos]);
        st.pos += 1;
        Ok(Some(PyTuple::new(
            py,
            [PyBytes::new(py, &k), PyBytes::new(py, &v)],
        )?))
    }
}

/// A path given as `str`, `bytes` or an `os.PathLike` (the forms `open()` takes).
fn path_arg(v: &Bound<'_, PyAny>) -> PyResult<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let p = if let Ok(b) = v.downcast::<PyBytes>() {
        std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes()))
    } else {
        let fs = v
            .py()
            .import("os")?
            .getattr("fspath")?
            .call1((v,))
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "path must be a str, bytes or os.PathLike, not {}",
                    v.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })?;
        if let Ok(b) = fs.downcast::<PyBytes>() {
            std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes()))
        } else {
            fs.extract::<std::path::PathBuf>()?
        }
    };
    if p.as_os_str().as_bytes().contains(&0) {
        return Err(attune_error(
            v.py(),
            "InvalidArgumentError",
            "path contains a NUL byte, which no file name can hold",
        ));
    }
    Ok(p)
}

/// An Attune key-value database. `DB(path, **options)`; also a context manager.
#[pyclass(module = "attune._native")]
pub struct DB {
    /// None once closed (the engine's memory is freed when the last snapshot or iterator goes).
    db: parking_lot::RwLock<Option<Arc<kv::DB>>>,
    path: String,
}

impl DB {
    fn handle(&self, py: Python<'_>) -> PyResult<Arc<kv::DB>> {
        let db = self.db.read().clone().ok_or_else(|| {
            attune_error(
                py,
                "ClosedError",
                format!(
                    "database {} is closed; open it again with attune.DB(path)",
                    self.path
                ),
            )
        })?;
        db.check_usable().map_err(to_py)?;
        Ok(db)
    }

    fn write_batch(&self, py: Python<'_>, b: kv::WriteBatch, sync: bool) -> PyResult<()> {
        let db = self.handle(py)?;
        py.allow_threads(move || db.write(b, WriteOptions { sync }))
            .map_err(to_py)
    }
}

#[pymethods]
impl DB {
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let path = path_arg(path)?;
        let opts = options_from_kwargs(options)?;
        let p = path.clone();
        let db = py
            .allow_threads(move || kv::DB::open(&p, opts))
            .map_err(to_py)?;
        Ok(DB {
            db: parking_lot::RwLock::new(Some(Arc::new(db))),
            path: path.display().to_string(),
        })
    }

    #[pyo3(signature = (key, value, sync=false))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let mut b = kv::WriteBatch::new();
        b.put(&as_bytes(key, "key")?, &as_bytes(value, "value")?)
            .map_err(to_py)?;
        self.write_batch(py, b, sync)
    }

    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        get_impl(py, &self.handle(py)?, &as_bytes(key, "key")?, None)
    }

    #[pyo3(signature = (key, sync=false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let mut b = kv::WriteBatch::new();
        b.delete(&as_bytes(key, "key")?).map_err(to_py)?;
        self.write_batch(py, b, sync)
    }

    #[pyo3(signature = (batch, sync=false))]
    fn write(&self, py: Python<'_>, batch: &WriteBatch, sync: bool) -> PyResult<()> {
        let b = batch.inner.lock().clone();
        self.write_batch(py, b, sync)
    }

    #[pyo3(signature = (start=None, end=None, reverse=false))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Items> {
        let (start, end) = (opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        items_impl(&self.handle(py)?, start, end, reverse, None)
    }

    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let db = self.handle(py)?;
        let s = db.snapshot().map_err(to_py)?;
        let seq = s.sequence();
        Ok(Snapshot {
            weak: Arc::downgrade(&db),
            held: Mutex::new(Some((db, s))),
            seq,
        })
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.handle(py)?;
        py.allow_threads(move || db.flush()).map_err(to_py)
    }

    #[pyo3(signature = (start=None, end=None))]
    fn compact(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (start, end) = (opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        let db = self.handle(py)?;
        py.allow_threads(move || db.compact_range(start.as_deref(), end.as_deref()))
            .map_err(to_py)
    }

    /// Checks every checksum of every live table and value-log segment:
    /// {"tables", "table_entries", "blob_segments", "blob_records", "files", "entries"}
    /// ("files" and "entries" are the sums).
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle(py)?;
        let r = py.allow_threads(move || db.verify()).map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("tables", r.tables)?;
        d.set_item("table_entries", r.table_entries)?;
        d.set_item("blob_segments", r.blob_segments)?;
        d.set_item("blob_records", r.blob_records)?;
        d.set_item("files", r.tables + r.blob_segments)?;
        d.set_item("entries", r.table_entries + r.blob_records)?;
        Ok(d)
    }

    /// Garbage-collects the value log: rewrites the live values of every sealed segment with at
    /// least `ratio` (default: the `blob_gc_garbage_ratio` option) of dead bytes and deletes it.
    /// Returns {"segments_collected", "records_rewritten", "bytes_rewritten", "bytes_reclaimed"}.
    #[pyo3(signature = (ratio=None))]
    fn gc<'py>(&self, py: Python<'py>, ratio: Option<f64>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle(py)?;
        let r = py
            .allow_threads(move || match ratio {
                Some(x) => db.gc_with_ratio(x),
                None => db.gc(),
            })
            .map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("segments_collected", r.segments_collected)?;
        d.set_item("records_rewritten", r.records_rewritten)?;
        d.set_item("bytes_rewritten", r.bytes_rewritten)?;
        d.set_item("bytes_reclaimed", r.bytes_reclaimed)?;
        Ok(d)
    }

    /// Learns a model for every live table that has none, now (the background learner does this
    /// file by file as the analyzer chooses). Returns the number of tables with a model.
    /// Raises `attune.InvalidArgumentError` when the database was opened with learned_index="off".
    fn learn_all(&self, py: Python<'_>) -> PyResult<u64> {
        let db = self.handle(py)?;
        py.allow_threads(move || db.learn_all()).map_err(to_py)
    }

    fn set_block_cache_capacity(&self, py: Python<'_>, capacity_bytes: u64) -> PyResult<()> {
        self.handle(py)?.set_block_cache_capacity(capacity_bytes);
        Ok(())
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle(py)?;
        let d = db.clone();
        let s = py.allow_threads(move || d.stats());
        stats_dict(py, &s, db.options())
    }

    #[getter]
    fn path(&self) -> String {
        self.path.clone()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.db.read().is_none()
    }

    /// Closes the database now: background work stops, the WAL is synced, the lock is released.
    /// Snapshots and iterators raise `ClosedError` afterwards. A second call does nothing; in a
    /// forked child it only marks this handle closed (the files are the parent's).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.db.write().take();
        if let Some(db) = taken {
            py.allow_threads(move || db.close()).map_err(to_py)?;
        }
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, py: Python<'_>, _a: PyObject, _b: PyObject, _c: PyObject) -> PyResult<()> {
        self.close(py)
    }

    fn __repr__(&self) -> String {
        let state = if self.db.read().is_some() {
            "open"
        } else {
            "closed"
        };
        format!("attune.DB({:?}, {state})", self.path)
    }
}

fn stats_dict<'py>(py: Python<'py>, s: &kv::Stats, o: &Options) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("last_sequence", s.last_sequence)?;
    d.set_item("level_files", PyList::new(py, &s.level_files)?)?;
    d.set_item("level_bytes", PyList::new(py, &s.level_bytes)?)?;
    let comps = PyList::empty(py);
    for c in &s.level_compactions {
        let e = PyDict::new(py);
        e.set_item("compactions", c.compactions)?;
        e.set_item("bytes_read", c.bytes_read)?;
        e.set_item("bytes_written", c.bytes_written)?;
        e.set_item("trivial_moves", c.trivial_moves)?;
        comps.append(e)?;
    }
    d.set_item("level_compactions", comps)?;
    d.set_item("memtable_bytes", s.memtable_bytes)?;
    d.set_item("immutable_memtable", s.immutable_memtable)?;
    d.set_item("flushes", s.flushes)?;
    d.set_item("flush_bytes_written", s.flush_bytes_written)?;
    d.set_item("compaction_bytes_read", s.compaction_bytes_read)?;
    d.set_item("compaction_bytes_written", s.compaction_bytes_written)?;
    d.set_item("user_bytes_written", s.user_bytes_written)?;
    d.set_item("wal_bytes_written", s.wal_bytes_written)?;
    d.set_item("wal_syncs", s.wal_syncs)?;
    d.set_item("writes", s.writes)?;
    d.set_item("write_groups", s.write_groups)?;
    d.set_item("write_amp", s.write_amplification)?;
    d.set_item("stall_micros", s.stall_micros)?;
    d.set_item("slowdowns", s.slowdowns)?;
    d.set_item("gets", s.gets)?;
    d.set_item("gets_found", s.gets_found)?;
    d.set_item("live_sst_bytes", s.live_sst_bytes)?;
    d.set_item("num_snapshots", s.num_snapshots)?;
    d.set_item("table_pinned_bytes", s.table_pinned_bytes)?;
    let segs = PyList::empty(py);
    for b in &s.blob_files {
        let e = PyDict::new(py);
        e.set_item("number", b.number)?;
        e.set_item("size", b.size)?;
        e.set_item("garbage", b.garbage)?;
        e.set_item("sealed", b.sealed)?;
        segs.append(e)?;
    }
    d.set_item("blob_files", segs)?;
    d.set_item("blob_bytes", s.blob_bytes)?;
    d.set_item("blob_garbage_bytes", s.blob_garbage_bytes)?;
    d.set_item("blob_live_bytes", s.blob_live_bytes)?;
    d.set_item("blob_space_amp", s.blob_space_amp)?;
    d.set_item("blob_bytes_written", s.blob_bytes_written)?;
    d.set_item("blob_reads", s.blob_reads)?;
    d.set_item("blob_prefetches", s.blob_prefetches)?;
    d.set_item("gc_runs", s.gc_runs)?;
    d.set_item("gc_segments_collected", s.gc_segments_collected)?;
    d.set_item("gc_records_rewritten", s.gc_records_rewritten)?;
    d.set_item("gc_bytes_rewritten", s.gc_bytes_rewritten)?;
    d.set_item("gc_bytes_reclaimed", s.gc_bytes_reclaimed)?;
    d.set_item("gc_max_pause_micros", s.gc_max_pause_micros)?;
    d.set_item(
        "fixed_layout_files",
        PyList::new(py, &s.fixed_layout_files)?,
    )?;
    let l = &s.learned;
    let ld = PyDict::new(py);
    ld.set_item("mode", &l.mode)?;
    ld.set_item("delta", l.delta)?;
    ld.set_item("files_registered", l.files_registered)?;
    ld.set_item("files_learned", l.files_learned)?;
    ld.set_item("files_loaded", l.files_loaded)?;
    ld.set_item("files_skipped", l.files_skipped)?;
    ld.set_item("files_bootstrap", l.files_bootstrap)?;
    ld.set_item("files_rejudged", l.files_rejudged)?;
    ld.set_item("files_short_lived", l.files_short_lived)?;
    ld.set_item("files_unlearnable", l.files_unlearnable)?;
    ld.set_item("models_rejected", l.models_rejected)?;
    ld.set_item("analyzer_state_loaded", l.state_loaded)?;
    ld.set_item("learn_ns_total", l.learn_ns_total)?;
    ld.set_item("benefit_realized_ns", l.benefit_realized_ns)?;
    ld.set_item("benefit_calibration", l.benefit_calibration)?;
    ld.set_item("hindsight_files", l.hindsight.files)?;
    ld.set_item("hindsight_learn_ns", l.hindsight.learn_ns())?;
    ld.set_item("hindsight_saved_ns", l.hindsight.saved_ns())?;
    let frontier: Vec<(f64, f64)> = l
        .hindsight
        .frontier()
        .iter()
        .map(|p| (p.loss_ns, p.learn_ns))
        .collect();
    ld.set_item("hindsight_frontier", frontier)?;
    ld.set_item("benefit_predicted_ns", l.benefit_predicted_ns)?;
    ld.set_item(
        "benefit_predicted_realized_ns",
        l.benefit_predicted_realized_ns,
    )?;
    ld.set_item("queue_len", l.queue_len)?;
    ld.set_item("files_with_models", s.files_with_models)?;
    ld.set_item("model_segments", s.model_segments)?;
    ld.set_item(
        "model_bytes_per_level",
        PyList::new(py, &s.model_bytes_per_level)?,
    )?;
    d.set_item("learned", ld)?;
    d.set_item("learned_lookups", l.learned_lookups)?;
    d.set_item("total_lookups", l.total_lookups)?;
    d.set_item("model_bytes", s.model_bytes)?;
    d.set_item("level_models", s.level_models)?;
    d.set_item("level_model_bytes", s.level_model_bytes)?;
    let total = s.live_sst_bytes + s.blob_bytes;
    let live = s.live_sst_bytes + s.blob_live_bytes;
    d.set_item(
        "space_amp",
        if live == 0 {
            1.0
        } else {
            total as f64 / live as f64
        },
    )?;
    let c = PyDict::new(py);
    c.set_item("capacity_bytes", s.block_cache.capacity_bytes)?;
    c.set_item("usage_bytes", s.block_cache.usage_bytes)?;
    c.set_item("hits", s.block_cache.hits)?;
    c.set_item("misses", s.block_cache.misses)?;
    c.set_item("inserts", s.block_cache.inserts)?;
    c.set_item("evictions", s.block_cache.evictions)?;
    let lookups = s.block_cache.hits + s.block_cache.misses;
    c.set_item(
        "hit_rate",
        if lookups == 0 {
            0.0
        } else {
            s.block_cache.hits as f64 / lookups as f64
        },
    )?;
    d.set_item("block_cache", c)?;
    match &s.cache_tiers {
        Some(t) => d.set_item("cache_tiers", tiers_dict(py, t)?)?,
        None => d.set_item("cache_tiers", py.None())?,
    }
    let h = &s.hot_key_cache;
    let hot = PyDict::new(py);
    hot.set_item("capacity_bytes", h.capacity_bytes)?;
    hot.set_item("bytes", h.bytes)?;
    hot.set_item("entries", h.entries)?;
    hot.set_item("ghosts", h.ghosts)?;
    hot.set_item("hits", h.hits)?;
    hot.set_item("misses", h.misses)?;
    hot.set_item("admissions", h.admissions)?;
    hot.set_item("evictions", h.evictions)?;
    hot.set_item("invalidations", h.invalidations)?;
    hot.set_item("stale_offers", h.stale_offers)?;
    hot.set_item("rejected", h.rejected)?;
    d.set_item("hot_key_cache", hot)?;
    let opts = PyDict::new(py);
    for (k, v) in o.describe() {
        opts.set_item(k, v)?;
    }
    d.set_item("options", opts)?;
    Ok(d)
}

/// `stats()["cache_tiers"]`: the cache budget's split and the sizing controller.
fn tiers_dict<'py>(py: Python<'py>, t: &kv::CacheTierStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("layout", t.layout)?;
    d.set_item("sizing", &t.sizing)?;
    d.set_item("budget_bytes", t.budget_bytes)?;
    d.set_item("app_bytes", t.app_bytes)?;
    d.set_item("second_bytes", t.second_bytes)?;
    d.set_item("second_extra_bytes", t.second_extra_bytes)?;
    if let Some(c) = &t.compressed {
        let e = PyDict::new(py);
        e.set_item("capacity_bytes", c.capacity_bytes)?;
        e.set_item("usage_bytes", c.usage_bytes)?;
        e.set_item("hits", c.hits)?;
        e.set_item("misses", c.misses)?;
        e.set_item("evictions", c.evictions)?;
        d.set_item("compressed_cache", e)?;
    }
    d.set_item("app_hits", t.app_hits)?;
    d.set_item("second_hits", t.second_hits)?;
    d.set_item("device_reads", t.device_reads)?;
    d.set_item("unknown_reads", t.unknown_reads)?;
    d.set_item("second_ns", t.second_ns)?;
    d.set_item("device_ns", t.device_ns)?;
    d.set_item("second_hit_ns_median", t.second_hit_ns_median)?;
    d.set_item("device_read_ns_median", t.device_read_ns_median)?;
    d.set_item("h_a", t.h_a)?;
    d.set_item("h_k", t.h_k)?;
    d.set_item("app_miss_ns", t.app_miss_ns)?;
    d.set_item("second_miss_ns", t.second_miss_ns)?;
    d.set_item("costs_source", t.costs_source)?;
    d.set_item("le_model_ns", t.le_model_ns)?;
    d.set_item("le_measured_ns", t.le_measured_ns)?;
    d.set_item("le_predicted_ns", t.le_predicted_ns)?;
    d.set_item("state", t.state)?;
    d.set_item("rounds", t.rounds)?;
    d.set_item("adoptions", t.adoptions)?;
    d.set_item("reverts", t.reverts)?;
    d.set_item("restarts", t.restarts)?;
    d.set_item("ghost_bytes", t.ghost_bytes)?;
    d.set_item("ghost_bytes_peak", t.ghost_bytes_peak)?;
    d.set_item("accesses_recorded", t.accesses_recorded)?;
    d.set_item("accesses_dropped", t.accesses_dropped)?;
    d.set_item("controller_cpu_ns", t.controller_cpu_ns)?;
    let mrc = PyList::empty(py);
    for (bytes, ratio) in &t.mrc {
        mrc.append((*bytes, *ratio))?;
    }
    d.set_item("mrc", mrc)?;
    let cands = PyList::empty(py);
    for &(bytes, h_a, h_k, le) in &t.last_round {
        let e = PyDict::new(py);
        e.set_item("app_bytes", bytes)?;
        e.set_item("h_a", h_a)?;
        e.set_item("h_k", h_k)?;
        e.set_item("le_ns", le)?;
        cands.append(e)?;
    }
    d.set_item("last_round", cands)?;
    d.set_item("last_round_measured_le_ns", t.last_round_measured_le_ns)?;
    let tl = PyList::empty(py);
    for w in &t.timeline {
        let e = PyDict::new(py);
        e.set_item("ms", w.ms)?;
        e.set_item("accesses", w.accesses)?;
        e.set_item("app_bytes", w.app_bytes)?;
        e.set_item("h_a", w.h_a)?;
        e.set_item("h_k", w.h_k)?;
        e.set_item("le_model_ns", w.le_model_ns)?;
        e.set_item("le_measured_ns", w.le_measured_ns)?;
        e.set_item("state", w.state)?;
        tl.append(e)?;
    }
    d.set_item("timeline", tl)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DB>()?;
    m.add_class::<WriteBatch>()?;
    m.add_class::<Snapshot>()?;
    m.add_class::<Items>()?;
    m.add("OPTION_NAMES", kv::OPTION_NAMES.to_vec())?;
    Ok(())
}
