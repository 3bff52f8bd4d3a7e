//! The one place engine errors become Python exceptions. The exception classes are plain Python
//! classes in `attune.errors` (so that they pickle across `multiprocessing`); this module looks
//! them up by name and raises them with the engine's message and, where the error has one, the
//! file's `path` and the byte `offset`.

use attune_kv as kv;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// An instance of the Python exception class `module.class` built from `args`, as a `PyErr`;
/// None when the class cannot be found or built (a broken install: callers fall back to a
/// builtin exception).
pub fn instance<'py>(
    py: Python<'py>,
    module: &str,
    class: &str,
    args: impl IntoPyObject<'py, Target = PyTuple>,
) -> Option<PyErr> {
    py.import(module)
        .and_then(|m| m.getattr(class))
        .and_then(|cls| cls.call1(args))
        .ok()
        .map(PyErr::from_value)
}

/// An instance of `module.class(msg, path, offset)` as a `PyErr`; a `RuntimeError` (or, for
/// argument errors, a `ValueError`) when the class cannot be found (a broken install).
pub fn raise(
    py: Python<'_>,
    module: &str,
    class: &str,
    msg: String,
    path: Option<String>,
    offset: Option<u64>,
) -> PyErr {
    match instance(py, module, class, (msg.clone(), path, offset)) {
        Some(e) => e,
        None if class == "InvalidArgumentError" => PyValueError::new_err(msg),
        None => PyRuntimeError::new_err(format!("{class}: {msg}")),
    }
}

/// `attune.errors.<class>(msg)`.
pub fn attune_error(py: Python<'_>, class: &str, msg: impl Into<String>) -> PyErr {
    raise(py, "attune.errors", class, msg.into(), None, None)
}

/// Maps an engine error to its Python exception.
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
        _ => ("Error", None, None),
    };
    Python::with_gil(|py| raise(py, "attune.errors", class, msg, file, offset))
}
