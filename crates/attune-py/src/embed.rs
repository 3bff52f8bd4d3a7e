//! Python access to `attune-embed`: the store class `EmbedStore`, the bulk loader and the
//! hit-rate simulators.
//!
//! Arrays cross as little-endian bytes (the abi3 build has no buffer protocol): keys as int64 or
//! uint64, values as float32; `python/attune/embed.py` wraps them in numpy arrays. A lookup's
//! result is returned as a `bytearray` (one copy) so the numpy view over it is writable.
//! Lookups and loads run with the GIL released; the store sits behind a mutex, so concurrent
//! lookups from several Python threads are serialised, never racing.

use crate::errors::embed_error;
use attune_embed::policy::{Policy, PolicyKind};
use attune_embed::{Backend, EmbedStore, GroupSim, StoreOptions};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict};
use std::path::PathBuf;

fn invalid(msg: impl Into<String>) -> PyErr {
    embed_error(attune_embed::EmbedError::InvalidArgument(msg.into()))
}

fn u64s(b: &[u8], what: &str) -> PyResult<Vec<u64>> {
    if !b.len().is_multiple_of(8) {
        return Err(invalid(format!(
            "{what}: {} bytes is not a whole number of 8-byte keys",
            b.len()
        )));
    }
    Ok(b.chunks_exact(8)
        .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// `EmbedStore(path, tables, cache_bytes, policy, precisions, l1_share, l3_share, backend)`.
#[pyclass(module = "attune._native", name = "EmbedStore")]
pub struct EmbedStoreNative {
    inner: Mutex<Option<EmbedStore>>,
}

impl EmbedStoreNative {
    fn with<T>(&self, f: impl FnOnce(&mut EmbedStore) -> PyResult<T>) -> PyResult<T> {
        let mut g = self.inner.lock();
        match g.as_mut() {
            Some(s) => f(s),
            None => Python::with_gil(|py| {
                Err(crate::errors::attune_error(
                    py,
                    "ClosedError",
                    "the embedding store is closed",
                ))
            }),
        }
    }
}

#[pymethods]
impl EmbedStoreNative {
    #[new]
    #[pyo3(signature = (path, tables, cache_bytes=0, policy="ev-lfu", precisions=vec![32], l1_share=0.5,
                        l3_share=0.0, backend="file"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        tables: Vec<String>,
        cache_bytes: u64,
        policy: &str,
        precisions: Vec<u32>,
        l1_share: f64,
        l3_share: f64,
        backend: &str,
    ) -> PyResult<Self> {
        let backend = Backend::parse(backend).map_err(embed_error)?;
        let opts = StoreOptions {
            backend,
            cache_bytes,
            policy: policy.to_string(),
            precisions,
            l1_share,
            l3_share,
        };
        let store = py
            .allow_threads(|| EmbedStore::open(&path, &tables, &opts))
            .map_err(embed_error)?;
        Ok(EmbedStoreNative {
            inner: Mutex::new(Some(store)),
        })
    }

    /// Looks up `keys` (little-endian 8-byte keys, `batch × N`); returns `batch × N × dim`
    /// float32 values as a bytearray.
    fn lookup<'py>(&self, py: Python<'py>, keys: &[u8]) -> PyResult<Bound<'py, PyByteArray>> {
        let keys = u64s(keys, "keys")?;
        let out = py.allow_threads(|| {
            self.with(|s| {
                let mut out = vec![0f32; keys.len() * s.dim()];
                s.lookup(&keys, &mut out).map_err(embed_error)?;
                Ok(out)
            })
        })?;
        let bytes: Vec<u8> = out.iter().flat_map(|v| v.to_le_bytes()).collect();
        Ok(PyByteArray::new(py, &bytes))
    }

    /// Sets table index `table`'s surrogate mapping (little-endian u64 per row, u64::MAX for
    /// none).
    fn set_surrogates(&self, py: Python<'_>, table: usize, map: &[u8]) -> PyResult<()> {
        let map = u64s(map, "surrogates")?;
        py.allow_threads(|| self.with(|s| s.set_surrogates(table, map).map_err(embed_error)))
    }

    /// Capacity of EVProx's L3 in mappings (0: off).
    fn l3_capacity(&self) -> PyResult<usize> {
        self.with(|s| Ok(s.l3_capacity()))
    }

    /// Counters since open, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.with(|s| Ok(s.stats()))?;
        let d = PyDict::new(py);
        d.set_item("requests", st.requests)?;
        d.set_item("keys", st.keys)?;
        d.set_item("l1_hits", st.l1_hits)?;
        d.set_item("l2_hits", st.l2_hits)?;
        d.set_item("misses", st.misses)?;
        d.set_item("perfect_l1", st.perfect_l1)?;
        d.set_item("perfect", st.perfect)?;
        d.set_item("clipped", st.clipped)?;
        d.set_item("demotions", st.demotions)?;
        d.set_item("promotions", st.promotions)?;
        d.set_item("l3_hits", st.l3_hits)?;
        d.set_item("perfect_approx", st.perfect_approx)?;
        d.set_item("l3_inserts", st.l3_inserts)?;
        Ok(d)
    }

    /// `(tables, dim, rows, policy, l1_capacity, l2_capacity)`.
    #[allow(clippy::type_complexity)]
    fn info(&self) -> PyResult<(Vec<String>, usize, Vec<u64>, String, usize, usize)> {
        self.with(|s| {
            let (c1, c2) = s.capacities();
            Ok((s.tables().to_vec(), s.dim(), s.rows(), s.policy(), c1, c2))
        })
    }

    /// The back end: `file` or `kv`.
    fn backend(&self) -> PyResult<String> {
        self.with(|s| Ok(s.backend().name().to_string()))
    }

    /// Advises the kernel to drop the flat files' cached pages (a no-op on the kv back end).
    fn drop_page_cache(&self) -> PyResult<()> {
        self.with(|s| {
            s.drop_page_cache();
            Ok(())
        })
    }

    /// Closes the store (idempotent); later calls raise ClosedError.
    fn close(&self) {
        self.inner.lock().take();
    }
}

/// Writes table `name` in `dir` from little-endian float32 `values` of `dim` columns, replacing
/// any previous version atomically, on `backend` (`file` or `kv`).
#[pyfunction]
#[pyo3(signature = (dir, name, dim, values, backend="file"))]
fn embed_load_table(
    py: Python<'_>,
    dir: PathBuf,
    name: &str,
    dim: usize,
    values: &[u8],
    backend: &str,
) -> PyResult<()> {
    let backend = Backend::parse(backend).map_err(embed_error)?;
    if !values.len().is_multiple_of(4) {
        return Err(invalid(format!(
            "values: {} bytes is not a whole number of float32",
            values.len()
        )));
    }
    let v: Vec<f32> = values
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    py.allow_threads(|| attune_embed::store::load_table(&dir, backend, name, dim, &v))
        .map_err(embed_error)
}

/// Opens table `name` in `dir` and checks its data checksum; returns `(rows, dim)`.
#[pyfunction]
#[pyo3(signature = (dir, name, backend="file"))]
fn embed_verify_table(
    py: Python<'_>,
    dir: PathBuf,
    name: &str,
    backend: &str,
) -> PyResult<(u64, usize)> {
    let backend = Backend::parse(backend).map_err(embed_error)?;
    py.allow_threads(|| attune_embed::store::verify_table(&dir, backend, name))
        .map_err(embed_error)
}

/// Names of the tables in `dir` on `backend`.
#[pyfunction]
#[pyo3(signature = (dir, backend="file"))]
fn embed_list_tables(dir: PathBuf, backend: &str) -> PyResult<Vec<String>> {
    let backend = Backend::parse(backend).map_err(embed_error)?;
    attune_embed::store::list_tables_on(&dir, backend).map_err(embed_error)
}

/// Simulates `policy` with `capacity` items on grouped requests (`keys`: little-endian u64,
/// `requests × tables`); the first `warmup` requests are not counted. Returns
/// `(requests, keys, hits, perfect)`.
#[pyfunction]
#[pyo3(signature = (policy, capacity, tables, keys, warmup=0))]
fn embed_simulate(
    py: Python<'_>,
    policy: &str,
    capacity: usize,
    tables: usize,
    keys: &[u8],
    warmup: usize,
) -> PyResult<(u64, u64, u64, u64)> {
    if tables == 0 {
        return Err(invalid("tables must be at least 1"));
    }
    let keys = u64s(keys, "keys")?;
    if !keys.len().is_multiple_of(tables) {
        return Err(invalid(format!(
            "{} keys is not a whole number of requests of {tables}",
            keys.len()
        )));
    }
    let kind = PolicyKind::parse(policy, tables).map_err(embed_error)?;
    Ok(py.allow_threads(|| {
        let mut sim = GroupSim::new(&kind, capacity);
        for (i, req) in keys.chunks_exact(tables).enumerate() {
            if i == warmup {
                sim.reset_stats();
            }
            sim.request(req);
        }
        let s = sim.stats;
        (s.requests, s.keys, s.hits, s.perfect)
    }))
}

/// Single-key accesses of a baseline policy over a flat stream (no groups): the hit count.
/// Used to cross-check the baselines against other simulators.
#[pyfunction]
fn embed_access_stream(
    py: Python<'_>,
    policy: &str,
    capacity: usize,
    keys: &[u8],
) -> PyResult<u64> {
    let keys = u64s(keys, "keys")?;
    let kind = PolicyKind::parse(policy, 1).map_err(embed_error)?;
    Ok(py.allow_threads(|| {
        let mut p: Box<dyn Policy> = kind.build(capacity);
        let mut ev = Vec::new();
        let mut hits = 0u64;
        for &k in &keys {
            ev.clear();
            hits += u64::from(p.access(k, &mut ev));
        }
        hits
    }))
}

/// Registers the embed functions and classes on `attune._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EmbedStoreNative>()?;
    m.add_function(wrap_pyfunction!(embed_load_table, m)?)?;
    m.add_function(wrap_pyfunction!(embed_verify_table, m)?)?;
    m.add_function(wrap_pyfunction!(embed_list_tables, m)?)?;
    m.add_function(wrap_pyfunction!(embed_simulate, m)?)?;
    m.add_function(wrap_pyfunction!(embed_access_stream, m)?)?;
    Ok(())
}
