//! Bindings for the Plush hash table: `HashDB`. Same lifecycle as `DB`: `close()` (idempotent),
//! a context manager, `ClosedError` after close, `ForkedError` in a forked child (whose `close`
//! only marks the handle closed: the mapping and the directory lock are the parent's). Engine
//! calls release the GIL.
//!
//! Keys and values are bytes (keys up to 4 KiB, values up to 1 MiB) or ints in [0, 2**64)
//! (their 8 little-endian bytes): 8-byte keys with 8-byte values live in the buckets, the rest
//! in the payload log.

use crate::errors::{attune_error, plush_error as to_py};
use attune_kv::env::fork;
use attune_plush::{Backend, Migration, Options, Partitioning, Plush};
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyString};
use std::sync::Arc;

/// A key or value: an int in [0, 2**64) (its 8 little-endian bytes), or bytes of any length up
/// to the engine's limits (checked by the engine, which names the argument) given as
/// `attune.DB` takes them.
fn bytes_arg(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    const ACCEPTED: &str = "bytes, an int in [0, 2**64), str (stored as UTF-8), bytearray, \
                            memoryview or another bytes-like object";
    // `True` is an int to Python, but as a key it is a mistake far more often than the key
    // 1; refused as options refuse it.
    if v.is_instance_of::<PyBool>() {
        return Err(crate::kv::type_error(
            v,
            what,
            &format!("{ACCEPTED}, not a bool"),
        ));
    }
    if v.is_instance_of::<PyInt>() {
        return v
            .extract::<u64>()
            .map(|x| x.to_le_bytes().to_vec())
            .map_err(|_| {
                attune_error(
                    v.py(),
                    "InvalidArgumentError",
                    format!("{what} {v} is not in [0, 2**64)"),
                )
            });
    }
    // Everything else as `attune.DB` takes it (str as UTF-8, bytes-like objects), and the same
    // error class (`InvalidArgumentTypeError`) for anything else.
    crate::kv::as_bytes(v, what)
        .map(|b| b.into_owned())
        .map_err(|_| crate::kv::type_error(v, what, ACCEPTED))
}

/// What to do about a writable open refused by a permission: a database that is there to read
/// can be opened read-only (said for Python and for the CLI, whose read verbs do so).
fn permission_hint(dir: &std::path::Path) -> String {
    if dir.join("manifest.plush").exists() {
        "this process may not write the database: open it read-only to read it \
         (HashDB(path, read_only=True); `attune hash-db get`, `scan`, `stats` and `verify` \
         open it read-only)"
            .into()
    } else {
        crate::errors::permission_hint(dir, "manifest.plush")
    }
}

fn options_from_kwargs(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options::default();
    let Some(kw) = kwargs else {
        return Ok(o);
    };
    for (k, v) in kw.iter() {
        let key: String = k.extract()?;
        let py = v.py();
        let bad = |msg: String| attune_error(py, "InvalidArgumentError", msg);
        // A non-negative int that fits `limit` (values are shown as Python writes them, so
        // that "16" reads as the string it is).
        let int_upto = |v: &Bound<'_, PyAny>, limit: u64| -> PyResult<u64> {
            if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
                return Err(bad(format!(
                    "option {key}={} must be a non-negative int, not {}",
                    v.repr()?,
                    v.get_type().name()?
                )));
            }
            match v.extract::<u64>() {
                Ok(n) if n <= limit => Ok(n),
                // The type's bound is not the option's range (which the options' check
                // names for values that fit), so it is not quoted as one.
                Ok(_) => Err(bad(format!("option {key}={v} is too large"))),
                Err(_) if v.lt(0)? => Err(bad(format!(
                    "option {key}={v} is negative; it must be a non-negative int"
                ))),
                Err(_) => Err(bad(format!("option {key}={v} is too large"))),
            }
        };
        let uint = |v: &Bound<'_, PyAny>| -> PyResult<usize> {
            int_upto(v, usize::MAX as u64).map(|n| n as usize)
        };
        let uint32 = |v: &Bound<'_, PyAny>| -> PyResult<u32> {
            int_upto(v, u32::MAX as u64).map(|n| n as u32)
        };
        // A boolean: True/False (or the ints 0 and 1).
        let flag = |v: &Bound<'_, PyAny>| -> PyResult<bool> {
            if let Ok(b) = v.downcast::<PyBool>() {
                return Ok(b.is_true());
            }
            match v.extract::<i64>() {
                Ok(0) if v.is_instance_of::<PyInt>() => Ok(false),
                Ok(1) if v.is_instance_of::<PyInt>() => Ok(true),
                _ => Err(bad(format!(
                    "option {key}={} must be True or False, not {}",
                    v.repr()?,
                    v.get_type().name()?
                ))),
            }
        };
        let text = |v: &Bound<'_, PyAny>| -> PyResult<String> {
            match v.downcast::<PyString>() {
                Ok(s) => Ok(s.to_cow()?.into_owned()),
                Err(_) => Err(bad(format!(
                    "option {key} must be a str, not {}",
                    v.get_type().name()?
                ))),
            }
        };
        // A byte count: an int, or a size string like "1MiB" (the kv engine's parser).
        let size = |v: &Bound<'_, PyAny>| -> PyResult<usize> {
            match v.downcast::<PyString>() {
                Ok(s) => {
                    let t = s.to_cow()?;
                    attune_kv::parse_size(&t)
                        .ok()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(|| {
                            bad(format!(
                                "option {key}={t:?} is not a size (bytes as an int, or a \
                                 string like \"1MiB\", \"64KiB\", \"2GiB\")"
                            ))
                        })
                }
                Err(_) => uint(v),
            }
        };
        match key.as_str() {
            "create_if_missing" => o.create_if_missing = flag(&v)?,
            "sync" => o.sync = flag(&v)?,
            "dram_entries_log2" => o.dram_entries_log2 = uint32(&v)?,
            "fanout_log2" => o.fanout_log2 = uint32(&v)?,
            "log_partitions" => o.log_partitions = uint(&v)?,
            "log_chunk_bytes" => o.log_chunk_bytes = size(&v)?,
            "log_chunks" => o.log_chunks = uint(&v)?,
            "dram_filter_levels" => o.dram_filter_levels = uint(&v)?,
            "levels_max" => o.levels_max = uint(&v)?,
            "backend" => {
                o.backend = Backend::parse(&text(&v)?).map_err(to_py)?;
            }
            "migration" => {
                o.migration = Migration::parse(&text(&v)?).map_err(to_py)?;
            }
            "payload_segment_bytes" => o.payload_segment_bytes = size(&v)?,
            "payload_gc" => o.payload_gc = flag(&v)?,
            "group_commit_window" => o.group_commit_window = flag(&v)?,
            "log_syncs_in_flight_max" => o.log_syncs_in_flight_max = uint(&v)?,
            "log_direct_io" => o.log_direct_io = flag(&v)?,
            "log_group_gather" => o.log_group_gather = flag(&v)?,
            "log_pack_groups" => o.log_pack_groups = flag(&v)?,
            "elide_tmpfs_syncs" => o.elide_tmpfs_syncs = flag(&v)?,
            "read_only" => o.read_only = flag(&v)?,
            "recovery_log" => o.recovery_log = flag(&v)?,
            "preallocate_levels" => o.preallocate_levels = uint(&v)?,
            "partitioning" => {
                o.partitioning = Partitioning::parse(&text(&v)?).map_err(to_py)?;
            }
            "significant_key_bits" => o.significant_key_bits = uint32(&v)?,
            _ => {
                return Err(bad(format!(
                    "unknown HashDB option {key:?}; known: {}",
                    OPTION_NAMES.join(", ")
                )))
            }
        }
    }
    // A small DRAM level with the default partition count: fewer partitions, not an error
    // about an option the caller did not give.
    if !kw.contains("log_partitions")? {
        o.log_partitions = o.log_partitions.min(1usize << o.dram_entries_log2.min(63));
    }
    Ok(o)
}

/// The options `HashDB(path, **options)` accepts.
const OPTION_NAMES: [&str; 24] = [
    "create_if_missing",
    "sync",
    "dram_entries_log2",
    "fanout_log2",
    "log_partitions",
    "log_chunk_bytes",
    "log_chunks",
    "dram_filter_levels",
    "levels_max",
    "backend",
    "migration",
    "payload_segment_bytes",
    "payload_gc",
    "group_commit_window",
    "log_syncs_in_flight_max",
    "log_direct_io",
    "log_group_gather",
    "log_pack_groups",
    "elide_tmpfs_syncs",
    "read_only",
    "recovery_log",
    "preallocate_levels",
    "partitioning",
    "significant_key_bits",
];

/// A Plush hash database of byte keys and values. `HashDB(path, **options)`.
#[pyclass(module = "attune._native")]
pub struct HashDB {
    db: parking_lot::RwLock<Option<Arc<Plush>>>,
    path: String,
    fork_generation: u64,
}

impl HashDB {
    /// The value of `key`, or None (the engine call releases the GIL).
    fn lookup(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
        let k = bytes_arg(key, "key")?;
        let db = self.handle(py)?;
        py.allow_threads(move || db.get_bytes(&k)).map_err(to_py)
    }

    fn handle(&self, py: Python<'_>) -> PyResult<Arc<Plush>> {
        if fork::generation() != self.fork_generation {
            return Err(attune_error(
                py,
                "ForkedError",
                format!(
                    "hash database {} was opened in a parent process: a handle cannot cross \
                     fork(); open it in this process (after the parent closes it), or use the \
                     multiprocessing 'spawn' start method",
                    self.path
                ),
            ));
        }
        self.db.read().clone().ok_or_else(|| {
            attune_error(
                py,
                "ClosedError",
                format!(
                    "hash database {} is closed; open it again with attune.HashDB(path)",
                    self.path
                ),
            )
        })
    }
}

#[pymethods]
impl HashDB {
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let path = crate::kv::path_arg(path)?;
        let opts = options_from_kwargs(options)?;
        let generation = fork::generation();
        let p = path.clone();
        let writable = !opts.read_only;
        let db = py
            .allow_threads(move || Plush::open(&p, opts))
            .map_err(|e| match &e {
                attune_plush::Error::Io {
                    path: f, source, ..
                } if writable && source.kind() == std::io::ErrorKind::PermissionDenied => {
                    crate::errors::attune_error_at(
                        py,
                        "StorageIOError",
                        format!("{e}; {}", permission_hint(&path)),
                        f,
                    )
                }
                _ => to_py(e),
            })?;
        Ok(HashDB {
            db: parking_lot::RwLock::new(Some(Arc::new(db))),
            path: path.display().to_string(),
            fork_generation: generation,
        })
    }

    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (bytes_arg(key, "key")?, bytes_arg(value, "value")?);
        let db = self.handle(py)?;
        py.allow_threads(move || db.put_bytes(&k, &v))
            .map_err(to_py)
    }

    /// The value as bytes, or `default` (None) when the key is absent.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        Ok(match self.lookup(py, key)? {
            Some(v) => PyBytes::new(py, &v).into_any().unbind(),
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// The value as an int (it must be 8 bytes), or `default` (None) when the key is absent.
    #[pyo3(signature = (key, default=None))]
    fn get_int(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        let Some(v) = self.lookup(py, key)? else {
            return Ok(default.unwrap_or_else(|| py.None()));
        };
        let x = <[u8; 8]>::try_from(v.as_slice())
            .map(u64::from_le_bytes)
            .map_err(|_| {
                attune_error(
                    py,
                    "InvalidArgumentError",
                    format!("the value is {} bytes, not 8; read it with get()", v.len()),
                )
            })?;
        Ok(x.into_pyobject(py)?.into_any().unbind())
    }

    /// `h[key]`: the value as bytes; `KeyError` when the key is absent (as `DB`).
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        match self.lookup(py, key)? {
            Some(v) => Ok(PyBytes::new(py, &v)),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// `h[key] = value`: `put`.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value)
    }

    /// `del h[key]`: `delete`, a blind write, so a missing key is not an error (as `DB`).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.lookup(py, key)?.is_some())
    }

    /// A hash table keeps no key order and no exact count, so there is no iteration (without
    /// this, Python would walk `h[0]`, `h[1]`, ... through `__getitem__`).
    fn __iter__(&self) -> PyResult<PyObject> {
        Err(PyTypeError::new_err(
            "attune.HashDB has no iteration: read keys with get() or h[key]; a database \
             created with partitioning='range' scans integer keys in order with scan()",
        ))
    }

    /// Up to `limit` live records with integer keys at or above `start`, ascending, as
    /// (int key, bytes value) pairs (range-partitioned databases only; partitioned by hash,
    /// `InvalidArgumentError`).
    #[pyo3(signature = (start = None, limit = None))]
    fn scan<'py>(
        &self,
        py: Python<'py>,
        start: Option<&Bound<'py, PyAny>>,
        limit: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<(u64, Bound<'py, PyBytes>)>> {
        let bad = |msg: String| attune_error(py, "InvalidArgumentError", msg);
        let start = match start {
            None => 0,
            Some(v) if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() => v
                .extract::<u64>()
                .map_err(|_| bad(format!("scan start {v} is not in [0, 2**64)")))?,
            Some(v) => {
                return Err(bad(format!(
                    "scan start must be an int key in [0, 2**64), not {}",
                    v.get_type().name()?
                )))
            }
        };
        let limit = match limit {
            None => usize::MAX,
            Some(v) if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() => v
                .extract::<usize>()
                .map_err(|_| bad(format!("scan limit {v} must be a non-negative int")))?,
            Some(v) => {
                return Err(bad(format!(
                    "scan limit must be a non-negative int, not {}",
                    v.get_type().name()?
                )))
            }
        };
        let db = self.handle(py)?;
        let rows = py
            .allow_threads(move || db.scan_bytes(start, limit))
            .map_err(to_py)?;
        Ok(rows
            .into_iter()
            .map(|(k, v)| (k, PyBytes::new(py, &v)))
            .collect())
    }

    /// No exact count either: a key can sit shadowed on several levels, so counting would walk
    /// them all. `stats()` reports the records each level holds.
    /// Always true, as for any object: without it Python's truth test would call `__len__`,
    /// which refuses, and `if db:` would raise.
    fn __bool__(&self) -> bool {
        true
    }

    fn __len__(&self) -> PyResult<usize> {
        Err(PyTypeError::new_err(
            "attune.HashDB has no len(): a key can sit shadowed on several levels, so an exact \
             count would walk every level; stats() gives the records each level holds",
        ))
    }

    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = bytes_arg(key, "key")?;
        let db = self.handle(py)?;
        py.allow_threads(move || db.delete_bytes(&k)).map_err(to_py)
    }

    /// Collects payload-log garbage now (sealed segments at least half garbage, or every
    /// sealed segment with `all=True`); returns the segments collected. A damaged segment is
    /// kept whole and, after the others, raises `CorruptionError` naming it.
    #[pyo3(signature = (all = false))]
    fn collect_garbage(&self, py: Python<'_>, all: bool) -> PyResult<usize> {
        let db = self.handle(py)?;
        py.allow_threads(move || db.collect_garbage(all))
            .map_err(to_py)
    }

    /// Migrates the DRAM level into the first persistent level (the recovery log then holds
    /// nothing live).
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.handle(py)?;
        py.allow_threads(move || db.checkpoint()).map_err(to_py)
    }

    /// Checks the files' lengths, every level entry (with its checksum) and log chunk, and
    /// every payload record a record of the DRAM level or of a level points to. Returns
    /// {"levels", "entries_checked", "records" (on the persistent levels), "dram_records"
    /// (acknowledged, in the recovery log, not yet migrated), "log_chunks_in_use",
    /// "log_entries", "payload_records" (pointers whose record was read and checked),
    /// "payload_dangling" (pointers into collected segments: shadowed versions, not a
    /// problem), "records_not_checksummed" (level records in files written before level
    /// entries carried checksums; 0 for a database created by this build), "ok" (True: the
    /// shape of `attune hash-db verify --json`)}; damage found, or a pointer into a payload
    /// segment that is missing without having been collected, raises `CorruptionError`
    /// naming the file and the byte offset.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle(py)?;
        let r = py.allow_threads(move || db.verify()).map_err(to_py)?;
        let d = crate::stats::to_dict(py, &r)?;
        d.set_item("ok", true)?;
        Ok(d)
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let db = self.handle(py)?;
        let s = py.allow_threads(move || db.stats());
        crate::stats::to_dict(py, &s)
    }

    #[getter]
    fn path(&self) -> String {
        self.path.clone()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.db.read().is_none()
    }

    /// Closes the database now (the lock is released). A second call does nothing; in a forked
    /// child it only marks this handle closed (the mapping and the lock are the parent's).
    /// Without the recovery log (`recovery_log=False`) the close first migrates the DRAM level
    /// (a checkpoint); its failure is raised here.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.db.write().take();
        if let Some(db) = taken {
            if fork::generation() != self.fork_generation {
                std::mem::forget(db);
                return Ok(());
            }
            return py.allow_threads(move || match Arc::try_unwrap(db) {
                Ok(db) => db.close().map_err(to_py),
                Err(shared) => {
                    drop(shared);
                    Ok(())
                }
            });
        }
        Ok(())
    }

    /// A closed handle raises `ClosedError` here (as `DB` does).
    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.borrow().handle(slf.py())?;
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
        format!("attune.HashDB({:?}, {state})", self.path)
    }
}

impl Drop for HashDB {
    fn drop(&mut self) {
        if fork::generation() != self.fork_generation {
            // A forked child must not unlock or unmap the parent's files.
            if let Some(db) = self.db.get_mut().take() {
                std::mem::forget(db);
            }
        }
    }
}

/// Adds `HashDB` and `HASH_DB_OPTION_NAMES` to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<HashDB>()?;
    m.add("HASH_DB_OPTION_NAMES", OPTION_NAMES.to_vec())?;
    Ok(())
}
