//! The one place engine errors become Python exceptions, for every crate the module exposes
//! (attune-kv, attune-hash, attune-embed, attune-io, attune-pipes, attune-plush, attune-workload;
//! attune-io's mapping is `io::io_error`).
//!
//! The exception classes are plain Python classes in `attune.errors` (so that they pickle
//! across `multiprocessing` and keep `.path` / `.offset`). `attune/__init__.py` hands them to
//! `_native._register_errors(...)` once, at import; this module keeps them and raises them by
//! name. Nothing in Rust imports the `attune` package. Before registration (a broken install,
//! or `attune._native` loaded on its own) each class falls back to the nearest builtin
//! exception, so that an error is never lost.
//!
//! Thread-safety: the registry is written once under the GIL and read under the GIL.

use attune_hash::HashError;
use attune_kv as kv;
use attune_plush as plush;
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyType};
use std::collections::HashMap;

/// Names of the classes `_register_errors` must be given (those of `attune.errors`).
pub const CLASS_NAMES: [&str; 15] = [
    "Error",
    "CorruptionError",
    "StorageIOError",
    "LockedError",
    "NotADatabaseError",
    "AlreadyExistsError",
    "UnsupportedVersionError",
    "InvalidArgumentError",
    "ClosedError",
    "ForkedError",
    "FullError",
    "ReadOnlyError",
    "HashError",
    "HashKeyError",
    "WorkloadError",
];

static CLASSES: GILOnceCell<HashMap<String, Py<PyType>>> = GILOnceCell::new();

/// `_native._register_errors(**classes)`: the exception classes of `attune.errors`, by name.
/// Called once by `attune/__init__.py`; every name of `CLASS_NAMES` must be given, each an
/// exception class. A second call is ignored (the first registration stays).
#[pyfunction]
#[pyo3(signature = (**classes))]
fn _register_errors(py: Python<'_>, classes: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    let mut map = HashMap::new();
    if let Some(classes) = classes {
        for (name, cls) in classes.iter() {
            let cls = cls.downcast_into::<PyType>()?;
            map.insert(name.extract::<String>()?, cls.unbind());
        }
    }
    if let Some(missing) = CLASS_NAMES.iter().find(|n| !map.contains_key(**n)) {
        return Err(PyValueError::new_err(format!(
            "_register_errors: missing the class {missing}"
        )));
    }
    let _ = CLASSES.set(py, map);
    Ok(())
}

/// An instance of the registered class `class` built from `(msg, path, offset)`; the nearest
/// builtin exception when the classes were not registered.
pub fn raise(
    py: Python<'_>,
    class: &str,
    msg: String,
    path: Option<String>,
    offset: Option<u64>,
) -> PyErr {
    let registered = CLASSES.get(py).and_then(|m| m.get(class));
    if let Some(cls) = registered {
        if let Ok(e) = cls.bind(py).call1((msg.clone(), path, offset)) {
            return PyErr::from_value(e);
        }
    }
    match class {
        "HashKeyError" => PyKeyError::new_err(msg),
        "InvalidArgumentTypeError" => PyTypeError::new_err(msg),
        "InvalidArgumentError" | "HashError" | "WorkloadError" => PyValueError::new_err(msg),
        _ => PyRuntimeError::new_err(format!("{class}: {msg}")),
    }
}

/// `attune.errors.<class>(msg)` with its `path` set.
pub fn attune_error_at(
    py: Python<'_>,
    class: &str,
    msg: impl Into<String>,
    path: &std::path::Path,
) -> PyErr {
    raise(
        py,
        class,
        msg.into(),
        Some(path.display().to_string()),
        None,
    )
}

/// `attune.errors.<class>(msg)`.
pub fn attune_error(py: Python<'_>, class: &str, msg: impl Into<String>) -> PyErr {
    raise(py, class, msg.into(), None, None)
}

/// Maps an engine (attune-kv) error to its Python exception.
pub fn to_py(e: kv::Error) -> PyErr {
    let msg = e.to_string();
    let path = |p: &std::path::Path| Some(p.display().to_string());
    let (class, file, offset) = match &e {
        kv::Error::Corruption { file, offset, .. } => {
            ("CorruptionError", path(file), Some(*offset))
        }
        kv::Error::Io { path: p, .. } => ("StorageIOError", path(p), None),
        kv::Error::Locked { path: p } => ("LockedError", path(p), None),
        kv::Error::NotADatabase { path: p, .. } => ("NotADatabaseError", path(p), None),
        kv::Error::AlreadyExists { path: p } => ("AlreadyExistsError", path(p), None),
        kv::Error::UnsupportedVersion { path: p, .. } => ("UnsupportedVersionError", path(p), None),
        kv::Error::InvalidArgument(_) => ("InvalidArgumentError", None, None),
        kv::Error::Closed(_) => ("ClosedError", None, None),
        kv::Error::Forked { path: p, .. } => ("ForkedError", path(p), None),
        kv::Error::ReadOnly { path: p, .. } => ("ReadOnlyError", path(p), None),
        kv::Error::Conflict(_) => ("ConflictError", None, None),
        _ => ("Error", None, None),
    };
    Python::with_gil(|py| raise(py, class, msg, file, offset))
}

/// What to do about a writable open of the database in `dir` refused by a permission: a
/// database that is there to read (`marker`, its manifest-like file, is visible) can be opened
/// read-only; otherwise this user cannot reach or create the directory at all.
pub fn permission_hint(dir: &std::path::Path, marker: &str) -> String {
    if dir.join(marker).exists() {
        "this process may not write the database: open with read_only=True to read it".into()
    } else {
        format!(
            "this user may not create or reach {}: check the permissions of that directory \
             and of its parents",
            dir.display()
        )
    }
}

/// Maps a Plush error to its `attune.errors` class.
pub fn plush_error(e: plush::Error) -> PyErr {
    let msg = e.to_string();
    let path = |p: &std::path::Path| Some(p.display().to_string());
    let (class, file, offset) = match &e {
        plush::Error::Corruption { file, offset, .. } => {
            ("CorruptionError", path(file), Some(*offset))
        }
        plush::Error::Io { path: p, .. } => ("StorageIOError", path(p), None),
        plush::Error::Locked { path: p } => ("LockedError", path(p), None),
        plush::Error::ReadOnly { path: p, .. } => ("ReadOnlyError", path(p), None),
        plush::Error::NotADatabase { path: p, .. } => ("NotADatabaseError", path(p), None),
        plush::Error::UnsupportedVersion { path: p, .. } => {
            ("UnsupportedVersionError", path(p), None)
        }
        plush::Error::InvalidArgument(_) => ("InvalidArgumentError", None, None),
        plush::Error::Full(_) => ("FullError", None, None),
        _ => ("Error", None, None),
    };
    Python::with_gil(|py| raise(py, class, msg, file, offset))
}

/// `attune.errors.HashError` for an attune-hash error.
pub fn hash_error(py: Python<'_>, e: HashError) -> PyErr {
    attune_error(py, "HashError", e.to_string())
}

/// `attune.errors.WorkloadError` for an attune-workload error (or a message about the bindings'
/// own checks of workload arguments).
pub fn workload_error(e: impl std::fmt::Display) -> PyErr {
    Python::with_gil(|py| attune_error(py, "WorkloadError", e.to_string()))
}

/// Maps a Data Pipes (attune-pipes) error to its Python exception: files that are short, full
/// or failing are `StorageIOError` (with the path and offset), bad locators, ranges, alignment,
/// options and paths the runtime cannot serve `InvalidArgumentError`, a cancelled transfer or
/// sort and busy memory `Error`.
pub fn pipes_error(e: attune_pipes::Error) -> PyErr {
    use attune_pipes::Error as E;
    let msg = e.to_string();
    let path = |p: &std::path::Path| Some(p.display().to_string());
    let (class, file, offset) = match &e {
        E::ShortFile {
            path: p, offset, ..
        }
        | E::NoSpace {
            path: p, offset, ..
        }
        | E::Io {
            path: p, offset, ..
        } => ("StorageIOError", path(p), Some(*offset)),
        E::BadInput { path: p, .. } => ("InvalidArgumentError", path(p), None),
        E::Misaligned { path: p, .. } => ("InvalidArgumentError", path(p), None),
        E::BadLocator { .. }
        | E::OutOfRange { .. }
        | E::Unsupported { .. }
        | E::InvalidArgument(_) => ("InvalidArgumentError", None, None),
        _ => ("Error", None, None),
    };
    Python::with_gil(|py| raise(py, class, msg, file, offset))
}

/// Maps an attune-embed error to its Python exception: bad arguments, unknown tables and keys
/// out of range are `InvalidArgumentError` (a `ValueError`), damaged table files
/// `CorruptionError` (with path and offset), OS errors `StorageIOError` (with path).
pub fn embed_error(e: attune_embed::EmbedError) -> PyErr {
    use attune_embed::EmbedError as E;
    let msg = e.to_string();
    let (class, file, offset) = match &e {
        E::Corruption { path, offset, .. } => (
            "CorruptionError",
            Some(path.display().to_string()),
            Some(*offset),
        ),
        E::Io { path, .. } => ("StorageIOError", Some(path.display().to_string()), None),
        _ => ("InvalidArgumentError", None, None),
    };
    Python::with_gil(|py| raise(py, class, msg, file, offset))
}

/// Adds `_register_errors` to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_register_errors, m)?)?;
    Ok(())
}
