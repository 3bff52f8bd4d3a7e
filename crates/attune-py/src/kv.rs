//! Bindings for the key-value engine: `DB`, `WriteBatch`, `Snapshot`, `Transaction` and the
//! items iterator.
//! Engine calls release the GIL; iteration fetches items in chunks so a Python loop costs one GIL
//! round-trip per chunk, not per item.
//!
//! Lifetimes: `DB.close()` closes the engine at once (lock released, WAL synced), whatever
//! snapshots and iterators exist; those raise `ClosedError` from then on, as plyvel's do. A handle
//! used in a forked child raises `ForkedError` (the engine checks; see `attune_kv::env::fork`).
//! Keys and values are `bytes`, `str` (UTF-8) or any buffer (`bytearray`, `memoryview`, numpy).

use crate::errors::{attune_error, raise, to_py};
use attune_kv::{self as kv, Options, ReadOptions, WriteOptions};
use parking_lot::Mutex;
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};
use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, Weak};

/// Items fetched per GIL release while iterating.
const ITER_CHUNK: usize = 256;

/// `attune.ClosedError(msg)` about the database in `dir`, with `dir` as its `path`.
fn closed_error(py: Python<'_>, dir: &Path, msg: impl Into<String>) -> PyErr {
    raise(
        py,
        "ClosedError",
        msg.into(),
        Some(dir.display().to_string()),
        None,
    )
}

/// `to_py` for an error of the database in `dir`: a `ClosedError` gets `dir` as its `path`
/// (the engine's `Error::Closed` has no path of its own; its message may name it).
fn to_py_in(dir: &Path) -> impl Fn(kv::Error) -> PyErr + '_ {
    move |e| match e {
        kv::Error::Closed(_) => Python::with_gil(|py| closed_error(py, dir, e.to_string())),
        e => to_py(e),
    }
}

/// What an `Items` iterator yields.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Yield {
    Pairs,
    Keys,
    Values,
}

/// The end bound that makes `[prefix, end)` exactly the keys starting with `prefix`: the prefix
/// with its last byte below 0xff incremented and the rest dropped; None (no bound) when every
/// byte is 0xff or the prefix is empty.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// An iteration range `[start, end)`; None is unbounded.
type Range = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The bounds of `items(start, end, prefix)`: a prefix narrows the range to its keys.
fn bounds(
    start: Option<&Bound<'_, PyAny>>,
    end: Option<&Bound<'_, PyAny>>,
    prefix: Option<&Bound<'_, PyAny>>,
) -> PyResult<Range> {
    let (mut start, mut end) = (opt_bytes(start, "start")?, opt_bytes(end, "end")?);
    if let Some(p) = opt_bytes(prefix, "prefix")? {
        if start.as_ref().is_none_or(|s| *s < p) {
            start = Some(p.clone());
        }
        if let Some(pe) = prefix_end(&p) {
            if end.as_ref().is_none_or(|e| *e > pe) {
                end = Some(pe);
            }
        }
    }
    Ok((start, end))
}

/// The keys of a `multi_get` call, as owned byte strings (any iterable of keys).
fn keys_arg(keys: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    let accepted = "an iterable of keys (a list of bytes), not a single key (use get() for one)";
    if keys.downcast::<PyBytes>().is_ok() || keys.downcast::<PyString>().is_ok() {
        return Err(type_error(keys, "keys", accepted));
    }
    let Ok(iter) = keys.try_iter() else {
        return Err(type_error(keys, "keys", accepted));
    };
    let mut out = Vec::new();
    for k in iter {
        out.push(as_bytes(&k?, "key")?.into_owned());
    }
    Ok(out)
}

fn multi_get_impl<'py>(
    py: Python<'py>,
    db: &Arc<kv::DB>,
    keys: Vec<Vec<u8>>,
    seq: Option<u64>,
) -> PyResult<Bound<'py, PyList>> {
    let ro = ReadOptions {
        snapshot: seq,
        ..Default::default()
    };
    // One GIL release for the whole batch; the engine reads every key at one state, in key
    // order, and answers in the caller's order.
    let values = py.allow_threads(|| db.multi_get(&keys, &ro));
    let values = values.map_err(to_py_in(db.path()))?;
    let items: Vec<PyObject> = values
        .into_iter()
        .map(|v| match v {
            Some(v) => PyBytes::new(py, &v).into_any().unbind(),
            None => py.None(),
        })
        .collect();
    PyList::new(py, items)
}

/// `get(key, default)`: the value, or `default` when the key is absent.
fn or_default(
    py: Python<'_>,
    v: Option<Bound<'_, PyBytes>>,
    default: Option<PyObject>,
) -> PyObject {
    match v {
        Some(b) => b.into_any().unbind(),
        None => default.unwrap_or_else(|| py.None()),
    }
}

fn key_error(key: &Bound<'_, PyAny>) -> PyErr {
    PyKeyError::new_err(key.clone().unbind())
}

/// The bytes of a key or value given as `bytes`, `str` (encoded as UTF-8), `bytearray` or any
/// object with the buffer protocol (copied). `what` names the argument in the error.
pub(crate) fn as_bytes<'a>(v: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
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
        Err(_) => Err(type_error(
            v,
            what,
            "bytes, str (stored as UTF-8), bytearray, memoryview or another bytes-like object",
        )),
    }
}

/// A merge operand: an int in [-2**63, 2**64) as its 8 little-endian bytes (two's complement
/// for a negative one, which `add` then subtracts), or bytes as `as_bytes` takes them.
pub(crate) fn operand_arg(v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if v.is_instance_of::<PyInt>() && !v.is_instance_of::<pyo3::types::PyBool>() {
        if let Ok(x) = v.extract::<u64>() {
            return Ok(x.to_le_bytes().to_vec());
        }
        return v
            .extract::<i64>()
            .map(|x| x.to_le_bytes().to_vec())
            .map_err(|_| {
                attune_error(
                    v.py(),
                    "InvalidArgumentError",
                    format!("operand {v} is not in [-2**63, 2**64) (an int is stored as 8 bytes)"),
                )
            });
    }
    as_bytes(v, "operand").map(|b| b.into_owned()).map_err(|_| {
        type_error(
            v,
            "operand",
            "bytes, an int in [-2**63, 2**64) (8 little-endian bytes), str (stored as \
                 UTF-8), bytearray, memoryview or another bytes-like object",
        )
    })
}

/// `attune.InvalidArgumentTypeError` (an `InvalidArgumentError` and a `TypeError`) for the
/// argument `what` given as `v`: names the argument, the type and value given (the value's repr
/// cut to 40 characters) and what is accepted.
pub(crate) fn type_error(v: &Bound<'_, PyAny>, what: &str, accepted: &str) -> PyErr {
    let kind = v
        .get_type()
        .name()
        .map_or_else(|_| "an object".to_string(), |n| n.to_string());
    let given = if v.is_none() {
        "None".to_string()
    } else {
        let r = v.repr().map_or_else(|_| "?".to_string(), |r| r.to_string());
        let r = match r.char_indices().nth(40) {
            Some((i, _)) => format!("{}...", &r[..i]),
            None => r,
        };
        format!("{kind} {r}")
    };
    raise(
        v.py(),
        "InvalidArgumentTypeError",
        format!("{what} must be {accepted}; got {given}"),
        None,
        None,
    )
}

/// A flag argument (`sync`, `reverse`): `True` or `False` only, so that `sync="no"` is not
/// silently true; anything else is an `InvalidArgumentTypeError` naming the argument.
fn flag_arg(v: &Bound<'_, PyAny>, what: &str) -> PyResult<bool> {
    v.extract::<bool>()
        .map_err(|_| type_error(v, what, "True or False"))
}

fn sync_arg(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    flag_arg(v, "sync")
}

fn reverse_arg(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    flag_arg(v, "reverse")
}

fn seal_value_log_arg(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    flag_arg(v, "seal_value_log")
}

fn move_arg(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    flag_arg(v, "move")
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
            return Err(to_py(kv::Error::InvalidArgument(format!(
                "option {key}={i} must not be negative"
            ))));
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
    // A path option (`prefetch_model`) takes a `pathlib.Path` as the database path does.
    if v.hasattr("__fspath__")? {
        if let Ok(s) = v
            .call_method0("__fspath__")
            .and_then(|p| p.extract::<String>())
        {
            return Ok(s);
        }
    }
    Err(attune_error(
        v.py(),
        "InvalidArgumentError",
        format!(
            "option {key}={} must be a bool, a number, a str such as \"64MiB\" or a path",
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

/// A Python callable as the engine's compaction filter (`attune.DB(path, compaction_filter=f)`).
///
/// Compaction calls `f(level, key, value)` on a background thread, taking the GIL for the call.
/// The result decides: `None` or `True` keep the entry, `False` removes it (the key reads as
/// deleted), and a bytes-like object (or a `str`, stored as UTF-8) replaces the value. An
/// exception, or a result of any other type, keeps the entry as it is (nothing is lost) and is
/// counted in `stats()["compaction_filter"]` with the last one named (`last_error`).
///
/// The GIL: every call that may wait for a compaction (`close`, `compact`, writes that stall)
/// releases the GIL, and dropping the handle without `close()` closes the database with the GIL
/// released, so the filter's thread can always take the GIL it waits for. Once the database is
/// closing the filter is not called any more: an entry compacted then is kept.
pub struct PyCompactionFilter {
    callable: Py<PyAny>,
    stats: Arc<FilterStats>,
}

#[derive(Default)]
pub struct FilterStats {
    calls: std::sync::atomic::AtomicU64,
    kept: std::sync::atomic::AtomicU64,
    removed: std::sync::atomic::AtomicU64,
    changed: std::sync::atomic::AtomicU64,
    errors: std::sync::atomic::AtomicU64,
    last_error: Mutex<Option<String>>,
    closing: std::sync::atomic::AtomicBool,
}

impl FilterStats {
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use std::sync::atomic::Ordering::Relaxed;
        let d = PyDict::new(py);
        d.set_item("calls", self.calls.load(Relaxed))?;
        d.set_item("kept", self.kept.load(Relaxed))?;
        d.set_item("removed", self.removed.load(Relaxed))?;
        d.set_item("changed", self.changed.load(Relaxed))?;
        d.set_item("errors", self.errors.load(Relaxed))?;
        d.set_item("last_error", self.last_error.lock().clone())?;
        Ok(d)
    }
}

impl PyCompactionFilter {
    /// Interprets the callable's result (see the type's docs); Err names what was wrong.
    fn decide(r: &Bound<'_, PyAny>) -> Result<kv::FilterDecision, String> {
        if r.is_none() {
            return Ok(kv::FilterDecision::Keep);
        }
        if let Ok(b) = r.downcast::<pyo3::types::PyBool>() {
            return Ok(if b.is_true() {
                kv::FilterDecision::Keep
            } else {
                kv::FilterDecision::Remove
            });
        }
        match as_bytes(r, "compaction_filter result") {
            Ok(v) => Ok(kv::FilterDecision::Change(v.into_owned())),
            Err(_) => Err(format!(
                "compaction_filter returned {}; return None or True (keep), False (remove) or \
                 bytes (the new value)",
                r.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| "an object".into())
            )),
        }
    }
}

impl kv::CompactionFilter for PyCompactionFilter {
    fn name(&self) -> &str {
        "python"
    }

    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> kv::FilterDecision {
        use std::sync::atomic::Ordering::Relaxed;
        let st = &self.stats;
        if st.closing.load(Relaxed) {
            return kv::FilterDecision::Keep;
        }
        st.calls.fetch_add(1, Relaxed);
        let r = Python::with_gil(|py| {
            let out = self
                .callable
                .call1(py, (level, PyBytes::new(py, key), PyBytes::new(py, value)));
            match out {
                Ok(r) => Self::decide(r.bind(py)),
                Err(e) => Err(format!(
                    "compaction_filter raised {}: {} (key {:?}); the entry was kept",
                    e.get_type(py)
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_else(|_| "an exception".into()),
                    e.value(py),
                    String::from_utf8_lossy(key)
                )),
            }
        });
        match r {
            Ok(d) => {
                match d {
                    kv::FilterDecision::Keep => st.kept.fetch_add(1, Relaxed),
                    kv::FilterDecision::Remove => st.removed.fetch_add(1, Relaxed),
                    kv::FilterDecision::Change(_) => st.changed.fetch_add(1, Relaxed),
                };
                d
            }
            Err(msg) => {
                st.errors.fetch_add(1, Relaxed);
                st.kept.fetch_add(1, Relaxed);
                *st.last_error.lock() = Some(msg);
                kv::FilterDecision::Keep
            }
        }
    }
}

/// Keys a conditional batch expects, each with its value (None: absent).
type Expected = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// An atomic group of puts and deletes, optionally conditional: `expect(key, value)` makes
/// `DB.write` apply the batch only if `key` then holds `value` (None: absent).
#[pyclass(module = "attune._native")]
pub struct WriteBatch {
    inner: Mutex<kv::WriteBatch>,
    expected: Mutex<Expected>,
}

#[pymethods]
impl WriteBatch {
    #[new]
    fn new() -> Self {
        WriteBatch {
            inner: Mutex::new(kv::WriteBatch::new()),
            expected: Mutex::new(Vec::new()),
        }
    }
    /// `ttl`: seconds this entry lives, counted from this call (by the system clock).
    #[pyo3(signature = (key, value, ttl=None))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (k, v) = (as_bytes(key, "key")?, as_bytes(value, "value")?);
        match ttl {
            None => self.inner.lock().put(&k, &v),
            Some(t) => {
                let at = attune_kv::env::system_unix_millis().saturating_add(ttl_millis(t)?);
                self.inner.lock().put_with_expiry(&k, &v, at)
            }
        }
        .map_err(to_py)
    }
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = as_bytes(key, "key")?;
        self.inner.lock().delete(&k).map_err(to_py)
    }
    /// Adds a merge operand for `key` (an int is 8 little-endian bytes); `DB.write` checks it
    /// against the database's `merge_operator`.
    fn merge(&self, key: &Bound<'_, PyAny>, operand: &Bound<'_, PyAny>) -> PyResult<()> {
        let (k, o) = (as_bytes(key, "key")?, operand_arg(operand)?);
        self.inner.lock().merge(&k, &o).map_err(to_py)
    }
    /// Deletes every key in `[begin, end)` written before this batch entry.
    fn delete_range(&self, begin: &Bound<'_, PyAny>, end: &Bound<'_, PyAny>) -> PyResult<()> {
        let (b, e) = (as_bytes(begin, "begin")?, as_bytes(end, "end")?);
        self.inner.lock().delete_range(&b, &e).map_err(to_py)
    }
    /// Makes the batch conditional: it is written only if `key` holds `value` (None: absent)
    /// when its turn comes; otherwise `DB.write` raises `ConflictError` and writes nothing.
    #[pyo3(signature = (key, value))]
    fn expect(&self, key: &Bound<'_, PyAny>, value: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let k = as_bytes(key, "key")?.into_owned();
        if k.len() > attune_kv::MAX_KEY_BYTES {
            return Err(to_py(attune_kv::Error::InvalidArgument(format!(
                "key: {} bytes exceeds the limit of {} bytes",
                k.len(),
                attune_kv::MAX_KEY_BYTES
            ))));
        }
        let v = opt_bytes(value, "value")?;
        self.expected.lock().push((k, v));
        Ok(())
    }
    fn clear(&self) {
        self.inner.lock().clear();
        self.expected.lock().clear();
    }
    fn __len__(&self) -> usize {
        self.inner.lock().len()
    }
    /// `attune.WriteBatch(3 operations)`, with the expectations of a conditional batch.
    fn __repr__(&self) -> String {
        let n = self.inner.lock().len();
        let e = self.expected.lock().len();
        let mut out = format!("attune.WriteBatch({})", plural(n, "operation"));
        if e > 0 {
            out.insert_str(out.len() - 1, &format!(", {}", plural(e, "expectation")));
        }
        out
    }
}

/// `1 operation`, `3 operations`.
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The Python repr of a byte string (`b'user:'`), for the reprs of iterators.
fn bytes_repr(py: Python<'_>, b: &[u8]) -> String {
    PyBytes::new(py, b)
        .repr()
        .map_or_else(|_| format!("{b:?}"), |r| r.to_string())
}

/// An optimistic transaction from `DB.transaction()`: reads at a snapshot plus its own writes,
/// buffered writes, and a commit that raises `ConflictError` (writing nothing) if another write
/// reached a key it wrote or read with `get_for_update`. As a context manager it commits when
/// the block ends normally and rolls back when it raises.
#[pyclass(module = "attune._native")]
pub struct Transaction {
    txn: Mutex<Option<kv::Transaction>>,
    db: Weak<kv::DB>,
    /// The database directory (the `path` of its errors).
    dir: std::path::PathBuf,
    sync: bool,
}

impl Transaction {
    /// The engine, while the transaction's database is open and usable.
    fn live_db(&self, py: Python<'_>) -> PyResult<Arc<kv::DB>> {
        let Some(db) = self.db.upgrade() else {
            return Err(closed_error(
                py,
                &self.dir,
                format!(
                    "the database {} of this transaction was closed; nothing was written",
                    self.dir.display()
                ),
            ));
        };
        db.check_usable().map_err(to_py_in(&self.dir))?;
        Ok(db)
    }

    fn ended(&self, py: Python<'_>) -> PyErr {
        closed_error(
            py,
            &self.dir,
            "the transaction has ended (committed or rolled back); begin a new one with \
             db.transaction()",
        )
    }

    fn with<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut kv::Transaction) -> kv::Result<R>,
    ) -> PyResult<R> {
        self.live_db(py)?;
        let mut g = self.txn.lock();
        let t = g.as_mut().ok_or_else(|| self.ended(py))?;
        f(t).map_err(to_py_in(&self.dir))
    }

    fn read<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        for_update: bool,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let k = as_bytes(key, "key")?;
        let v = self.with(py, |t| {
            if for_update {
                t.get_for_update(&k)
            } else {
                t.get(&k)
            }
        })?;
        Ok(v.map(|v| PyBytes::new(py, &v)))
    }
}

#[pymethods]
impl Transaction {
    /// The sequence of the snapshot the transaction reads.
    #[getter]
    fn sequence(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |t| Ok(t.snapshot_sequence()))
    }
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let v = self.read(py, key, false)?;
        Ok(or_default(py, v, default))
    }
    /// Like `get`, and the commit fails if another write reaches `key` first.
    #[pyo3(signature = (key, default=None))]
    fn get_for_update<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let v = self.read(py, key, true)?;
        Ok(or_default(py, v, default))
    }
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.read(py, key, false)?.ok_or_else(|| key_error(key))
    }
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.read(py, key, false)?.is_some())
    }
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (as_bytes(key, "key")?, as_bytes(value, "value")?);
        self.with(py, |t| t.put(&k, &v))
    }
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value)
    }
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = as_bytes(key, "key")?;
        self.with(py, |t| t.delete(&k))
    }
    /// Buffers a merge operand; later reads in the transaction see it applied, and the commit
    /// checks `key` for conflicts as for a put.
    fn merge(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, o) = (as_bytes(key, "key")?, operand_arg(operand)?);
        self.with(py, |t| t.merge(&k, &o))
    }
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key)
    }
    /// Number of buffered writes.
    fn __len__(&self) -> usize {
        self.txn.lock().as_ref().map_or(0, kv::Transaction::len)
    }
    /// `attune.Transaction("/p", sequence=7, 2 buffered writes)`; `ended` once committed or
    /// rolled back, `closed` once its database is.
    fn __repr__(&self) -> String {
        let g = self.txn.lock();
        let open = self.db.upgrade().is_some_and(|d| d.check_usable().is_ok());
        let state = match g.as_ref() {
            Some(_) if !open => "closed".to_string(),
            Some(t) => format!(
                "sequence={}, {}",
                t.snapshot_sequence(),
                plural(t.len(), "buffered write")
            ),
            None => "ended".to_string(),
        };
        format!(
            "attune.Transaction({:?}, {state})",
            self.dir.display().to_string()
        )
    }
    /// Writes the buffered changes atomically; raises `ConflictError` (writing nothing) if a
    /// key was written by someone else after the snapshot. The transaction ends either way.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.live_db(py)?;
        let t = self.txn.lock().take().ok_or_else(|| self.ended(py))?;
        let sync = self.sync;
        py.allow_threads(move || t.commit(WriteOptions { sync }))
            .map_err(to_py_in(&self.dir))
    }
    /// Discards the buffered writes; the transaction ends. A no-op once it has ended.
    fn rollback(&self) {
        self.txn.lock().take();
    }
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// Commits if the block ended normally (a conflict raises here), rolls back if it raised.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _b: PyObject,
        _c: PyObject,
    ) -> PyResult<bool> {
        if !exc_type.is_none() {
            self.rollback();
            return Ok(false);
        }
        if self.txn.lock().is_some() {
            self.commit(py)?;
        }
        Ok(false)
    }
}

/// A consistent read view. Release it with `release()` or a `with` block; closing the database
/// releases it too. A released snapshot keeps only a weak reference to the engine, so it does
/// not keep a database that nothing else uses open (and locked).
#[pyclass(module = "attune._native")]
pub struct Snapshot {
    held: Mutex<Option<(Arc<kv::DB>, kv::Snapshot)>>,
    weak: Weak<kv::DB>,
    /// The database directory (the `path` of its errors).
    dir: std::path::PathBuf,
    seq: u64,
}

#[pymethods]
impl Snapshot {
    #[getter]
    fn sequence(&self) -> u64 {
        self.seq
    }
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let db = self.check(py)?;
        let v = get_impl(py, &db, &as_bytes(key, "key")?, Some(self.seq))?;
        Ok(or_default(py, v, default))
    }
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let keys = keys_arg(keys)?;
        multi_get_impl(py, &self.check(py)?, keys, Some(self.seq))
    }
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let db = self.check(py)?;
        get_impl(py, &db, &as_bytes(key, "key")?, Some(self.seq))?.ok_or_else(|| key_error(key))
    }
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let db = self.check(py)?;
        Ok(get_impl(py, &db, &as_bytes(key, "key")?, Some(self.seq))?.is_some())
    }
    #[pyo3(signature = (start=None, end=None, reverse=false, prefix=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = "reverse_arg")] reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Items> {
        let db = self.check(py)?;
        let (start, end) = bounds(start, end, prefix)?;
        items_impl(&db, start, end, reverse, Some(self.seq), Yield::Pairs)
    }
    #[pyo3(signature = (start=None, end=None, reverse=false, prefix=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = "reverse_arg")] reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Items> {
        let db = self.check(py)?;
        let (start, end) = bounds(start, end, prefix)?;
        items_impl(&db, start, end, reverse, Some(self.seq), Yield::Keys)
    }
    #[pyo3(signature = (start=None, end=None, reverse=false, prefix=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = "reverse_arg")] reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Items> {
        let db = self.check(py)?;
        let (start, end) = bounds(start, end, prefix)?;
        items_impl(&db, start, end, reverse, Some(self.seq), Yield::Values)
    }
    fn __iter__(&self, py: Python<'_>) -> PyResult<Items> {
        let db = self.check(py)?;
        items_impl(&db, None, None, false, Some(self.seq), Yield::Keys)
    }
    /// `attune.Snapshot("/p", sequence=7)`; `released` once released, `closed` once the
    /// database is.
    fn __repr__(&self) -> String {
        let state = if self.held.lock().is_none() {
            ", released"
        } else if self.weak.upgrade().is_none_or(|db| db.is_closed()) {
            ", closed"
        } else {
            ""
        };
        format!(
            "attune.Snapshot({:?}, sequence={}{state})",
            self.dir.display().to_string(),
            self.seq
        )
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
            return Err(closed_error(
                py,
                &self.dir,
                format!("the database {} was closed", self.dir.display()),
            ));
        };
        db.check_usable().map_err(to_py_in(&self.dir))?;
        if self.held.lock().is_none() {
            return Err(closed_error(py, &self.dir, "snapshot was released"));
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
    Ok(r.map_err(to_py_in(db.path()))?
        .map(|v| PyBytes::new(py, &v)))
}

fn items_impl(
    db: &Arc<kv::DB>,
    start: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
    reverse: bool,
    seq: Option<u64>,
    yields: Yield,
) -> PyResult<Items> {
    let mut it = db
        .iter(&ReadOptions {
            snapshot: seq,
            ..Default::default()
        })
        .map_err(to_py_in(db.path()))?;
    let range = (start.clone(), end.clone());
    it.set_bounds(start, end);
    Ok(Items {
        weak: Arc::downgrade(db),
        dir: db.path().to_path_buf(),
        range,
        snapshot: seq,
        yields,
        state: Mutex::new(ItemsState {
            db: Some(db.clone()),
            it: Some(it),
            started: false,
            reverse,
            keys_only: yields == Yield::Keys,
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
    /// Keys only: values (and their value-log reads) are never fetched.
    keys_only: bool,
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
            let value = if self.keys_only {
                Vec::new()
            } else {
                it.value().to_vec()
            };
            self.buf.push((it.key().to_vec(), value));
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
    /// The database directory (the `path` of its errors).
    dir: std::path::PathBuf,
    /// The bounds and the snapshot read, for the repr.
    range: Range,
    snapshot: Option<u64>,
    yields: Yield,
    state: Mutex<ItemsState>,
}

#[pymethods]
impl Items {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// `attune.Items("/p", keys, start=b'a', end=b'b', reverse=True, snapshot=7)`, with
    /// `exhausted` once the last item was returned.
    fn __repr__(&self, py: Python<'_>) -> String {
        let mut out = format!(
            "attune.Items({:?}, {}",
            self.dir.display().to_string(),
            match self.yields {
                Yield::Pairs => "items",
                Yield::Keys => "keys",
                Yield::Values => "values",
            }
        );
        if let Some(s) = &self.range.0 {
            out.push_str(&format!(", start={}", bytes_repr(py, s)));
        }
        if let Some(e) = &self.range.1 {
            out.push_str(&format!(", end={}", bytes_repr(py, e)));
        }
        let st = self.state.lock();
        if st.reverse {
            out.push_str(", reverse=True");
        }
        if let Some(seq) = self.snapshot {
            out.push_str(&format!(", snapshot={seq}"));
        }
        if st.done && st.pos >= st.buf.len() {
            out.push_str(", exhausted");
        } else if self
            .weak
            .upgrade()
            .is_none_or(|d| d.check_usable().is_err())
        {
            out.push_str(", closed");
        }
        out.push(')');
        out
    }
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match self.weak.upgrade() {
            Some(db) => db.check_usable().map_err(to_py_in(&self.dir))?,
            None => {
                return Err(closed_error(
                    py,
                    &self.dir,
                    format!("the database {} was closed", self.dir.display()),
                ))
            }
        }
        let mut st = self.state.lock();
        if st.pos >= st.buf.len() {
            if st.done {
                return Ok(None);
            }
            let inner: &mut ItemsState = &mut st;
            py.allow_threads(|| inner.fill())
                .map_err(to_py_in(&self.dir))?;
            if st.done {
                return Ok(None);
            }
        }
        let pos = st.pos;
        let (k, v) = std::mem::take(&mut st.buf[pos]);
        st.pos += 1;
        Ok(Some(match self.yields {
            Yield::Pairs => {
                PyTuple::new(py, [PyBytes::new(py, &k), PyBytes::new(py, &v)])?.into_any()
            }
            Yield::Keys => PyBytes::new(py, &k).into_any(),
            Yield::Values => PyBytes::new(py, &v).into_any(),
        }))
    }
}

/// A path given as `str`, `bytes` or an `os.PathLike` (the forms `open()` takes).
pub(crate) fn path_arg(v: &Bound<'_, PyAny>) -> PyResult<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let p = if let Ok(b) = v.downcast::<PyBytes>() {
        std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes()))
    } else {
        let fs = v
            .py()
            .import("os")?
            .getattr("fspath")?
            .call1((v,))
            .map_err(|_| type_error(v, "path", "a str, bytes or os.PathLike"))?;
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
    /// `read_only` or `secondary` when opened so (shown by the repr, also once closed).
    mode: Option<&'static str>,
    /// The Python compaction filter's counters, when one was given.
    filter: Option<Arc<FilterStats>>,
}

impl Drop for DB {
    /// Without a Python compaction filter, dropping the handle drops its reference (the engine
    /// closes with its last reference, as before). With one, it closes the database with the GIL
    /// released: a compaction waiting for the GIL inside the filter can then finish, where
    /// joining it while holding the GIL would deadlock.
    fn drop(&mut self) {
        let Some(db) = self.db.get_mut().take() else {
            return;
        };
        match &self.filter {
            Some(f) => {
                f.closing.store(true, std::sync::atomic::Ordering::Relaxed);
                Python::with_gil(|py| {
                    py.allow_threads(move || {
                        let _ = db.close();
                    })
                });
            }
            None => drop(db),
        }
    }
}

impl DB {
    fn handle(&self, py: Python<'_>) -> PyResult<Arc<kv::DB>> {
        let db = self.db.read().clone().ok_or_else(|| {
            closed_error(
                py,
                Path::new(&self.path),
                format!(
                    "database {} is closed; open it again with attune.DB(path)",
                    self.path
                ),
            )
        })?;
        db.check_usable().map_err(self.err())?;
        Ok(db)
    }

    /// `to_py` for this database's errors (a `ClosedError` gets its path).
    fn err(&self) -> impl Fn(kv::Error) -> PyErr + '_ {
        to_py_in(Path::new(&self.path))
    }

    fn write_batch(&self, py: Python<'_>, b: kv::WriteBatch, sync: bool) -> PyResult<()> {
        let db = self.handle(py)?;
        py.allow_threads(move || db.write(b, WriteOptions { sync }))
            .map_err(self.err())
    }
}

/// The error of a failed open. A writable open refused by a permission says what to do: open
/// read-only where there is a database to read, else check the directories' permissions.
fn open_error(py: Python<'_>, e: kv::Error, dir: &Path, writable: bool) -> PyErr {
    match &e {
        kv::Error::Io { path, source, .. }
            if writable && source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            raise(
                py,
                "StorageIOError",
                format!("{e}; {}", crate::errors::permission_hint(dir, "CURRENT")),
                Some(path.display().to_string()),
                None,
            )
        }
        _ => to_py(e),
    }
}

/// A time to live in seconds as whole milliseconds (at least one); anything but a positive
/// finite number is an `InvalidArgumentError` naming `ttl`.
fn ttl_millis(ttl: &Bound<'_, PyAny>) -> PyResult<u64> {
    let bad = |what: String| {
        to_py(attune_kv::Error::InvalidArgument(format!(
            "ttl: must be a positive, finite number of seconds, got {what}"
        )))
    };
    if ttl.is_instance_of::<pyo3::types::PyBool>() {
        return Err(bad(format!("{ttl}")));
    }
    let ttl: f64 = ttl.extract().map_err(|_| {
        let kind = ttl.get_type().name().map_or("?".into(), |n| n.to_string());
        if kind == "int" {
            bad("an int too large for a float".to_string())
        } else {
            bad(format!("a value of type {kind}"))
        }
    })?;
    if !ttl.is_finite() || ttl <= 0.0 {
        return Err(to_py(attune_kv::Error::InvalidArgument(format!(
            "ttl: must be a positive, finite number of seconds, got {ttl}"
        ))));
    }
    // Rounded up, so that a small positive ttl never means "already expired".
    Ok(((ttl * 1000.0).ceil() as u64).max(1))
}

#[pymethods]
impl DB {
    #[new]
    #[pyo3(signature = (path, compaction_filter=None, **options))]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        compaction_filter: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let path = path_arg(path)?;
        let callable = compaction_filter.filter(|f| !f.is_none());
        let mut opts = options_from_kwargs(options)?;
        let mut filter = None;
        if let Some(f) = callable {
            if !f.is_callable() {
                return Err(attune_error(
                    py,
                    "InvalidArgumentError",
                    format!(
                        "compaction_filter must be a callable f(level, key, value), got {}",
                        f.get_type().name()?
                    ),
                ));
            }
            let stats = Arc::new(FilterStats::default());
            opts.compaction_filter = Some(Arc::new(PyCompactionFilter {
                callable: f.clone().unbind(),
                stats: stats.clone(),
            }));
            filter = Some(stats);
        }
        let p = path.clone();
        let writable = !opts.read_only && !opts.secondary;
        let mode = if opts.secondary {
            Some("secondary")
        } else if opts.read_only {
            Some("read_only")
        } else {
            None
        };
        let db = py
            .allow_threads(move || kv::DB::open(&p, opts))
            .map_err(|e| open_error(py, e, &path, writable))?;
        Ok(DB {
            db: parking_lot::RwLock::new(Some(Arc::new(db))),
            path: path.display().to_string(),
            mode,
            filter,
        })
    }

    #[pyo3(signature = (key, value, sync=false, ttl=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = "sync_arg")] sync: bool,
        ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (k, v) = (as_bytes(key, "key")?, as_bytes(value, "value")?);
        let mut b = kv::WriteBatch::new();
        match ttl {
            None => b.put(&k, &v),
            Some(t) => {
                let ms = ttl_millis(t)?;
                let now = self.handle(py)?.now_unix_millis();
                b.put_with_expiry(&k, &v, now.saturating_add(ms))
            }
        }
        .map_err(self.err())?;
        self.write_batch(py, b, sync)
    }

    /// Adds `operand` to `key` with the database's `merge_operator` (`add`: an int or 8
    /// little-endian bytes; `append`, `max`: bytes). A read then sees the operator applied to
    /// the key's older value and every operand since.
    #[pyo3(signature = (key, operand, sync=false))]
    fn merge(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = "sync_arg")] sync: bool,
    ) -> PyResult<()> {
        let (k, o) = (as_bytes(key, "key")?, operand_arg(operand)?);
        let mut b = kv::WriteBatch::new();
        b.merge(&k, &o).map_err(self.err())?;
        self.write_batch(py, b, sync)
    }

    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let v = get_impl(py, &self.handle(py)?, &as_bytes(key, "key")?, None)?;
        Ok(or_default(py, v, default))
    }

    /// The values of `keys` (None where absent), in the order given, read in one pass.
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let keys = keys_arg(keys)?;
        multi_get_impl(py, &self.handle(py)?, keys, None)
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        get_impl(py, &self.handle(py)?, &as_bytes(key, "key")?, None)?.ok_or_else(|| key_error(key))
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, false, None)
    }

    /// `del db[key]` deletes without reading first, so a missing key is not an error (as in
    /// RocksDB and rocksdict: a delete is a blind write).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, false)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(get_impl(py, &self.handle(py)?, &as_bytes(key, "key")?, None)?.is_some())
    }
    /// Always true, as for any object: without it Python's truth test would call `__len__`,
    /// which refuses, and `if db:` would raise.
    fn __bool__(&self) -> bool {
        true
    }
    fn __len__(&self) -> PyResult<usize> {
        Err(PyTypeError::new_err(
            "attune.DB has no len(): a key's versions and tombstones sit on several levels, so \
             an exact count reads every table; count with sum(1 for _ in db.keys()), or see \
             stats() for the entries each level holds",
        ))
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<Items> {
        items_impl(&self.handle(py)?, None, None, false, None, Yield::Keys)
    }

    #[pyo3(signature = (key, sync=false))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = "sync_arg")] sync: bool,
    ) -> PyResult<()> {
        let mut b = kv::WriteBatch::new();
        b.delete(&as_bytes(key, "key")?).map_err(self.err())?;
        self.write_batch(py, b, sync)
    }

    /// Deletes every key in `[begin, end)` with one write (a range tombstone).
    #[pyo3(signature = (begin, end, sync=false))]
    fn delete_range(
        &self,
        py: Python<'_>,
        begin: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = "sync_arg")] sync: bool,
    ) -> PyResult<()> {
        let mut b = kv::WriteBatch::new();
        b.delete_range(&as_bytes(begin, "begin")?, &as_bytes(end, "end")?)
            .map_err(self.err())?;
        if b.is_empty() {
            return Ok(());
        }
        self.write_batch(py, b, sync)
    }

    #[pyo3(signature = (batch, sync=false))]
    fn write(
        &self,
        py: Python<'_>,
        batch: &WriteBatch,
        #[pyo3(from_py_with = "sync_arg")] sync: bool,
    ) -> PyResult<()> {
        let b = batch.inner.lock().clone();
        let expected = batch.expected.lock().clone();
        if expected.is_empty() {
            return self.write_batch(py, b, sync);
        }
        let db = self.handle(py)?;
        py.allow_threads(move || db.write_if(b, expected, WriteOptions { sync }))
            .map_err(self.err())
    }

    /// Sets `key` to `value` (None: deletes it) only if it holds `expected` (None: absent);
    /// True if it did, False if the key held something else (nothing written).
    #[pyo3(signature = (key, expected, value, sync=false))]
    fn compare_and_set(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        expected: Option<&Bound<'_, PyAny>>,
        value: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = "sync_arg")] sync: bool,
    ) -> PyResult<bool> {
        let k = as_bytes(key, "key")?.into_owned();
        let want = opt_bytes(expected, "expected")?;
        let mut b = kv::WriteBatch::new();
        match opt_bytes(value, "value")? {
            Some(v) => b.put(&k, &v),
            None => b.delete(&k),
        }
        .map_err(self.err())?;
        let db = self.handle(py)?;
        match py.allow_threads(move || db.write_if(b, vec![(k, want)], WriteOptions { sync })) {
            Ok(()) => Ok(true),
            Err(kv::Error::Conflict(_)) => Ok(false),
            Err(e) => Err(self.err()(e)),
        }
    }

    /// Begins an optimistic transaction (see `Transaction`); `sync` applies to its commit.
    #[pyo3(signature = (sync=false))]
    fn transaction(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = "sync_arg")] sync: bool,
    ) -> PyResult<Transaction> {
        let db = self.handle(py)?;
        let t = db.transaction().map_err(self.err())?;
        Ok(Transaction {
            txn: Mutex::new(Some(t)),
            db: Arc::downgrade(&db),
            dir: db.path().to_path_buf(),
            sync,
        })
    }

    #[pyo3(signature = (start=None, end=None, reverse=false, prefix=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = "reverse_arg")] reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Items> {
        let (start, end) = bounds(start, end, prefix)?;
        items_impl(&self.handle(py)?, start, end, reverse, None, Yield::Pairs)
    }

    #[pyo3(signature = (start=None, end=None, reverse=false, prefix=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = "reverse_arg")] reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Items> {
        let (start, end) = bounds(start, end, prefix)?;
        items_impl(&self.handle(py)?, start, end, reverse, None, Yield::Keys)
    }

    #[pyo3(signature = (start=None, end=None, reverse=false, prefix=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = "reverse_arg")] reverse: bool,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Items> {
        let (start, end) = bounds(start, end, prefix)?;
        items_impl(&self.handle(py)?, start, end, reverse, None, Yield::Values)
    }

    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let db = self.handle(py)?;
        let s = db.snapshot().map_err(self.err())?;
        let seq = s.sequence();
        Ok(Snapshot {
            weak: Arc::downgrade(&db),
            dir: db.path().to_path_buf(),
            held: Mutex::new(Some((db, s))),
            seq,
        })
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.handle(py)?;
        py.allow_threads(move || db.flush()).map_err(self.err())
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
            .map_err(self.err())
    }

    /// Checks every checksum of every live table and value-log segment:
    /// {"tables", "table_entries", "blob_segments", "blob_records", "files", "entries"}
    /// ("files" and "entries" are the sums).
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle(py)?;
        let r = py.allow_threads(move || db.verify()).map_err(self.err())?;
        crate::stats::verify_report(py, &r)
    }

    /// Catches a secondary instance (`attune.DB(path, secondary=True)`) up with the process
    /// that writes the database: the tables, the value log and the write-ahead log written
    /// since, published at once. Returns {"sequence_before", "sequence_after",
    /// "manifest_records", "wal_records", "passes"}. `InvalidArgumentError` on a handle that is
    /// not a secondary.
    fn try_catch_up<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle(py)?;
        let c = py
            .allow_threads(move || db.try_catch_up())
            .map_err(self.err())?;
        let d = PyDict::new(py);
        d.set_item("sequence_before", c.sequence_before)?;
        d.set_item("sequence_after", c.sequence_after)?;
        d.set_item("manifest_records", c.manifest_records)?;
        d.set_item("wal_records", c.wal_records)?;
        d.set_item("passes", c.passes)?;
        Ok(d)
    }

    /// Whether this handle is a secondary instance (opened with `secondary=True`).
    #[getter]
    fn secondary(&self) -> bool {
        self.db.read().as_ref().is_some_and(|d| d.is_secondary())
    }

    /// Writes a consistent copy of the database into `path` (new, or an empty directory),
    /// hard-linking files where it can, while the database stays open; `attune.DB(path)` opens
    /// it. Returns {"files_linked", "files_copied", "bytes_copied", "sequence"}.
    #[pyo3(signature = (path, seal_value_log=false))]
    fn checkpoint<'py>(
        &self,
        py: Python<'py>,
        path: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = "seal_value_log_arg")] seal_value_log: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let dest = path_arg(path)?;
        let db = self.handle(py)?;
        let r = py
            .allow_threads(move || {
                if seal_value_log {
                    db.checkpoint_sealed(&dest)
                } else {
                    db.checkpoint(&dest)
                }
            })
            .map_err(self.err())?;
        crate::stats::to_dict(py, &r)
    }

    /// Adds the tables at `paths` (written by `attune.TableWriter`; one path or a list) in one
    /// atomic step: their entries shadow every earlier write and earlier snapshots do not see
    /// them. `move=True` removes the sources once ingested. Returns {"files", "sequence",
    /// "entries", "bytes", "memtable_flushed", "sources_removed"}.
    #[pyo3(signature = (paths, r#move=false))]
    #[pyo3(text_signature = "(self, paths, move=False)")]
    fn ingest<'py>(
        &self,
        py: Python<'py>,
        paths: &Bound<'py, PyAny>,
        #[pyo3(from_py_with = "move_arg")] r#move: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let paths = crate::ingest::paths_arg(paths)?;
        let db = self.handle(py)?;
        let r = py
            .allow_threads(move || db.ingest(&paths, r#move))
            .map_err(self.err())?;
        crate::ingest::report_dict(py, &r)
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
            .map_err(self.err())?;
        crate::stats::to_dict(py, &r)
    }

    /// Learns a model for every live table that has none, now (the background learner does this
    /// file by file as the analyzer chooses). Returns the number of tables with a model.
    /// Raises `attune.InvalidArgumentError` when the database was opened with learned_index="off".
    fn learn_all(&self, py: Python<'_>) -> PyResult<u64> {
        let db = self.handle(py)?;
        py.allow_threads(move || db.learn_all()).map_err(self.err())
    }

    fn set_block_cache_capacity(&self, py: Python<'_>, capacity_bytes: u64) -> PyResult<()> {
        self.handle(py)?.set_block_cache_capacity(capacity_bytes);
        Ok(())
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle(py)?;
        let d = db.clone();
        let s = py.allow_threads(move || d.stats());
        let out = crate::stats::kv_stats(py, &s, db.options())?;
        if let Some(f) = &self.filter {
            out.set_item("compaction_filter", f.to_dict(py)?)?;
        }
        Ok(out)
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
        if let (Some(f), true) = (&self.filter, taken.is_some()) {
            f.closing.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(db) = taken {
            py.allow_threads(move || db.close()).map_err(self.err())?;
        }
        Ok(())
    }

    /// `with db:` on a closed database raises `ClosedError`, as `with f:` does on a closed file.
    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        if slf.borrow().closed() {
            let path = slf.borrow().path.clone();
            return Err(closed_error(
                slf.py(),
                Path::new(&path),
                format!("database {path} is closed; open it again with attune.DB(path)"),
            ));
        }
        Ok(slf)
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
        match self.mode {
            Some(m) => format!("attune.DB({:?}, {state}, {m}=True)", self.path),
            None => format!("attune.DB({:?}, {state})", self.path),
        }
    }
}

/// Adds the key-value classes and `OPTION_NAMES` to the native module.
/// Salvages every readable record of the damaged database in `path` into a database that opens
/// (see `attune.repair`). Options are the engine's (table format of the tables it writes).
#[pyfunction]
#[pyo3(signature = (path, **options))]
fn kv_repair<'py>(
    py: Python<'py>,
    path: &Bound<'py, PyAny>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let path = path_arg(path)?;
    let opts = options_from_kwargs(options)?;
    let r = py
        .allow_threads(move || kv::repair(&path, opts))
        .map_err(to_py)?;
    let d = crate::stats::to_dict(py, &r)?;
    d.set_item("clean", r.clean())?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kv_repair, m)?)?;
    m.add_class::<DB>()?;
    m.add_class::<WriteBatch>()?;
    m.add_class::<Snapshot>()?;
    m.add_class::<Transaction>()?;
    m.add_class::<Items>()?;
    m.add("OPTION_NAMES", kv::OPTION_NAMES.to_vec())?;
    Ok(())
}
