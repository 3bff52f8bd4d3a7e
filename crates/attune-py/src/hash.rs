//! Python bindings for VIP hashing (`attune-hash`): `attune._native.VipHashMap`, a `u64 → u64`
//! table that learns key popularity, and `attune._native.hash_join`, the PK-FK hash join.
//! The typed front is `python/attune/hash.py`; errors are raised (through `errors.rs`) as
//! `attune.errors.HashError` (an `attune.Error`, re-exported by `attune.hash`), missing keys as
//! `HashKeyError` (also a `KeyError`).
//!
//! Thread-safety: a `VipHashMap` is a `#[pyclass]` guarded by PyO3's borrow checking; batch
//! calls (`get_many`, `insert_many`, `hash_join`) release the GIL while they run.

use attune_hash::{JoinMode, Phase, Schedule, VipConfig, VipMap};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{attune_error as py_error, hash_error};

fn to_u64(py: Python<'_>, what: &str, obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    obj.extract::<u64>().map_err(|_| {
        py_error(
            py,
            "HashError",
            format!("{what} must be an int in [0, 2**64)"),
        )
    })
}

fn to_u64_vec(py: Python<'_>, what: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    obj.extract::<Vec<u64>>().map_err(|_| {
        py_error(
            py,
            "HashError",
            format!("{what} must be a sequence of ints in [0, 2**64)"),
        )
    })
}

fn opt_u64(py: Python<'_>, what: &str, obj: Option<&Bound<'_, PyAny>>, d: u64) -> PyResult<u64> {
    obj.map_or(Ok(d), |o| to_u64(py, what, o))
}

fn opt_f64(py: Python<'_>, what: &str, obj: Option<&Bound<'_, PyAny>>, d: f64) -> PyResult<f64> {
    match obj {
        None => Ok(d),
        Some(o) => o
            .extract::<f64>()
            .map_err(|_| py_error(py, "HashError", format!("{what} must be a number"))),
    }
}

/// "adaptive", "off", or a non-negative int N (learn for the next N fetches).
fn to_schedule(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Schedule> {
    if let Ok(s) = obj.extract::<String>() {
        return match s.as_str() {
            "adaptive" => Ok(Schedule::Adaptive),
            "off" => Ok(Schedule::Off),
            other => Err(py_error(
                py,
                "HashError",
                format!("learning must be 'adaptive', 'off' or an int, not {other:?}"),
            )),
        };
    }
    Ok(Schedule::LearnOnce(to_u64(py, "learning", obj)?))
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Default => "default",
        Phase::Learn => "learn",
        Phase::SenseBaseline => "sense_baseline",
        Phase::SenseCompare => "sense_compare",
    }
}

/// A chained hash table of `u64 → u64` with VIP hashing.
#[pyclass(name = "VipHashMap", module = "attune._native")]
pub struct PyVipHashMap {
    map: VipMap<u64, u64>,
}

#[pymethods]
impl PyVipHashMap {
    /// `learning`: "adaptive" (default), "off", or an int N (learn for the next N fetches).
    #[new]
    #[pyo3(signature = (learning = None, buckets = None, confidence = None, sense_fetches = None,
                        learn_factor = None, default_factor = None))]
    fn new(
        py: Python<'_>,
        learning: Option<&Bound<'_, PyAny>>,
        buckets: Option<&Bound<'_, PyAny>>,
        confidence: Option<&Bound<'_, PyAny>>,
        sense_fetches: Option<&Bound<'_, PyAny>>,
        learn_factor: Option<&Bound<'_, PyAny>>,
        default_factor: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let schedule = match learning {
            None => Schedule::Adaptive,
            Some(obj) => to_schedule(py, obj)?,
        };
        let d = VipConfig::default();
        let config = VipConfig {
            schedule,
            confidence: opt_f64(py, "confidence", confidence, d.confidence)?,
            sense_fetches: opt_u64(py, "sense_fetches", sense_fetches, d.sense_fetches)?,
            learn_factor: opt_f64(py, "learn_factor", learn_factor, d.learn_factor)?,
            default_factor: opt_u64(py, "default_factor", default_factor, d.default_factor)?,
            ..d
        };
        let map = match buckets {
            Some(b) => {
                let b = usize::try_from(to_u64(py, "buckets", b)?).unwrap_or(usize::MAX);
                VipMap::with_buckets(b, config)
            }
            None => VipMap::new(config),
        }
        .map_err(|e| hash_error(py, e))?;
        Ok(PyVipHashMap { map })
    }

    fn __len__(&self) -> usize {
        self.map.len()
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.map.contains_key(&to_u64(py, "key", key)?))
    }

    /// Fetch (learns from the request); raises HashKeyError when absent.
    fn __getitem__(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        let k = to_u64(py, "key", key)?;
        self.map
            .get(&k)
            .copied()
            .ok_or_else(|| py_error(py, "HashKeyError", k.to_string()))
    }

    fn __setitem__(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (k, v) = (to_u64(py, "key", key)?, to_u64(py, "value", value)?);
        self.map.try_insert(k, v).map_err(|e| hash_error(py, e))?;
        Ok(())
    }

    fn __delitem__(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = to_u64(py, "key", key)?;
        self.map
            .remove(&k)
            .map(|_| ())
            .ok_or_else(|| py_error(py, "HashKeyError", k.to_string()))
    }

    /// Fetch (learns from the request); `default` (any object) when absent.
    #[pyo3(signature = (key, default = None))]
    fn get(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
    ) -> PyResult<PyObject> {
        match self.map.get(&to_u64(py, "key", key)?) {
            Some(v) => Ok(v.into_pyobject(py)?.into_any().unbind()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// Read without learning.
    fn peek(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        Ok(self.map.peek(&to_u64(py, "key", key)?).copied())
    }

    /// Insert or replace; returns the previous value or None.
    fn insert(
        &mut self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<Option<u64>> {
        let (k, v) = (to_u64(py, "key", key)?, to_u64(py, "value", value)?);
        self.map.try_insert(k, v).map_err(|e| hash_error(py, e))
    }

    /// Remove; returns the value or None.
    fn remove(&mut self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        Ok(self.map.remove(&to_u64(py, "key", key)?))
    }

    /// Fetch many keys (learning as it goes) with the GIL released; None for absent keys.
    fn get_many(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Vec<Option<u64>>> {
        let keys = to_u64_vec(py, "keys", keys)?;
        let map = &mut self.map;
        Ok(py.allow_threads(|| keys.iter().map(|k| map.get(k).copied()).collect()))
    }

    /// Insert many (key, value) pairs with the GIL released.
    fn insert_many(
        &mut self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let keys = to_u64_vec(py, "keys", keys)?;
        let values = to_u64_vec(py, "values", values)?;
        if keys.len() != values.len() {
            return Err(py_error(
                py,
                "HashError",
                format!("{} keys but {} values", keys.len(), values.len()),
            ));
        }
        let map = &mut self.map;
        py.allow_threads(|| {
            keys.iter()
                .zip(&values)
                .try_for_each(|(&k, &v)| map.try_insert(k, v).map(|_| ()))
        })
        .map_err(|e| hash_error(py, e))
    }

    /// Position of `key` in its chain (1 = head) without learning, or None.
    fn displacement(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
        Ok(self.map.displacement(&to_u64(py, "key", key)?))
    }

    /// Restart the schedule: "adaptive", "off" or an int N (learn for the next N fetches).
    fn set_learning(&mut self, py: Python<'_>, learning: &Bound<'_, PyAny>) -> PyResult<()> {
        self.map.set_schedule(to_schedule(py, learning)?);
        Ok(())
    }

    /// Current phase: "learn", "sense_baseline", "default" or "sense_compare".
    #[getter]
    fn phase(&self) -> &'static str {
        phase_name(self.map.phase())
    }

    #[getter]
    fn buckets(&self) -> usize {
        self.map.buckets()
    }

    #[getter]
    fn load_factor(&self) -> f64 {
        self.map.load_factor()
    }

    /// Operation counters as a dict (hits, misses, avg_displacement, learn_phases, ...).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::stats::vip_stats(py, &self.map.stats())
    }

    fn items(&self) -> Vec<(u64, u64)> {
        self.map.iter().map(|(k, v)| (*k, *v)).collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "VipHashMap(len={}, buckets={}, phase={})",
            self.map.len(),
            self.map.buckets(),
            phase_name(self.map.phase())
        )
    }
}

/// PK-FK hash join: returns the (r_row, s_row) pairs of matches; GIL released.
#[pyfunction]
#[pyo3(signature = (r_keys, s_keys, vip = true))]
fn hash_join(
    py: Python<'_>,
    r_keys: &Bound<'_, PyAny>,
    s_keys: &Bound<'_, PyAny>,
    vip: bool,
) -> PyResult<Vec<(u32, u32)>> {
    let r = to_u64_vec(py, "r_keys", r_keys)?;
    let s = to_u64_vec(py, "s_keys", s_keys)?;
    let mode = if vip {
        JoinMode::Vip
    } else {
        JoinMode::Default
    };
    py.allow_threads(|| attune_hash::hash_join(&r, &s, mode))
        .map_err(|e| hash_error(py, e))
}

/// Adds `VipHashMap` and `hash_join` to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyVipHashMap>()?;
    m.add_function(wrap_pyfunction!(hash_join, m)?)?;
    Ok(())
}
