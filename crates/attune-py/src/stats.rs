//! The one conversion of engine statistics and reports to Python: every struct that derives
//! `serde::Serialize` (attune-kv's `Stats`, `VerifyReport`, `GcReport` and what they nest, and
//! attune-hash's `VipStats`, behind each crate's `serde` feature) becomes nested dicts, lists and
//! tuples through [`to_py`] (`pythonize`), so a field added to an engine appears in Python without
//! an edit here.
//!
//! The dict `DB.stats()` returns predates the derive and keeps its shape: [`kv_stats`] applies
//! the few differences after the generic step, each listed there with its reason (two renamed
//! keys, values derived from several fields, and the hindsight summary, which the engine keeps
//! as methods). Callable under the GIL from any thread.

use crate::errors::attune_error;
use attune_hash::VipStats;
use attune_kv as kv;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde::Serialize;

/// Any `Serialize` value as a Python object: structs and maps become dicts, sequences lists,
/// tuples tuples, `None` None, numbers int or float (NaN stays NaN).
pub fn to_py<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, value)
        .map_err(|e| attune_error(py, "Error", format!("converting statistics: {e}")))
}

/// [`to_py`] for a value that serializes as a struct: the dict.
pub fn to_dict<'py, T: Serialize>(py: Python<'py>, value: &T) -> PyResult<Bound<'py, PyDict>> {
    Ok(to_py(py, value)?.downcast_into::<PyDict>()?)
}

/// Moves `d[from]` to `d[to]`.
fn rename(d: &Bound<'_, PyDict>, from: &str, to: &str) -> PyResult<()> {
    if let Some(v) = d.get_item(from)? {
        d.del_item(from)?;
        d.set_item(to, v)?;
    }
    Ok(())
}

fn ratio(num: f64, den: f64, empty: f64) -> f64 {
    if den == 0.0 {
        empty
    } else {
        num / den
    }
}

/// `DB.stats()`: the generic conversion of `s`, then the dict's established shape.
pub fn kv_stats<'py>(
    py: Python<'py>,
    s: &kv::Stats,
    o: &kv::Options,
) -> PyResult<Bound<'py, PyDict>> {
    let d = to_dict(py, s)?;
    // The established short name.
    rename(&d, "write_amplification", "write_amp")?;
    // (SST + value-log bytes) / live bytes.
    let total = (s.live_sst_bytes + s.blob_bytes) as f64;
    let live = (s.live_sst_bytes + s.blob_live_bytes) as f64;
    d.set_item("space_amp", ratio(total, live, 1.0))?;
    let c = &s.block_cache;
    let lookups = (c.hits + c.misses) as f64;
    let cache = d
        .get_item("block_cache")?
        .map(|v| v.downcast_into::<PyDict>());
    if let Some(cache) = cache.transpose()? {
        cache.set_item("hit_rate", ratio(c.hits as f64, lookups, 0.0))?;
    }
    // The learned-index counters: lookups also at the top level, the analyzer's state flag under
    // its longer name, the model totals of the tables beside them, and the hindsight summary.
    let l = &s.learned;
    d.set_item("learned_lookups", l.learned_lookups)?;
    d.set_item("total_lookups", l.total_lookups)?;
    let learned = d.get_item("learned")?.map(|v| v.downcast_into::<PyDict>());
    if let Some(ld) = learned.transpose()? {
        rename(&ld, "state_loaded", "analyzer_state_loaded")?;
        ld.set_item("files_with_models", s.files_with_models)?;
        ld.set_item("model_segments", s.model_segments)?;
        ld.set_item("model_bytes_per_level", &s.model_bytes_per_level)?;
        let h = &l.hindsight;
        ld.set_item("hindsight_files", h.files)?;
        ld.set_item("hindsight_learn_ns", h.learn_ns())?;
        ld.set_item("hindsight_saved_ns", h.saved_ns())?;
        let frontier: Vec<(f64, f64)> = h
            .frontier()
            .iter()
            .map(|p| (p.loss_ns, p.learn_ns))
            .collect();
        ld.set_item("hindsight_frontier", frontier)?;
    }
    let tiers = d
        .get_item("cache_tiers")?
        .map(|v| v.downcast_into::<PyDict>().ok());
    if let Some(Some(t)) = tiers {
        // `compressed_cache` is present only with the user layout.
        match t.get_item("compressed")? {
            Some(v) if !v.is_none() => t.set_item("compressed_cache", v)?,
            _ => {}
        }
        t.del_item("compressed")?;
        // The last round's candidates as named fields.
        let cands = PyList::empty(py);
        if let Some(r) = &s.cache_tiers {
            for &(app_bytes, h_a, h_k, le_ns) in &r.last_round {
                let e = PyDict::new(py);
                e.set_item("app_bytes", app_bytes)?;
                e.set_item("h_a", h_a)?;
                e.set_item("h_k", h_k)?;
                e.set_item("le_ns", le_ns)?;
                cands.append(e)?;
            }
        }
        t.set_item("last_round", cands)?;
    }
    // The effective options, as text.
    let opts = PyDict::new(py);
    for (k, v) in o.describe() {
        opts.set_item(k, v)?;
    }
    d.set_item("options", opts)?;
    Ok(d)
}

/// `DB.verify()`: the report plus the sums `files` and `entries`.
pub fn verify_report<'py>(py: Python<'py>, r: &kv::VerifyReport) -> PyResult<Bound<'py, PyDict>> {
    let d = to_dict(py, r)?;
    d.set_item("files", r.tables + r.blob_segments)?;
    d.set_item("entries", r.table_entries + r.blob_records)?;
    Ok(d)
}

/// `VipHashMap.stats()`: the counters plus `avg_displacement` (a method of `VipStats`).
pub fn vip_stats<'py>(py: Python<'py>, s: &VipStats) -> PyResult<Bound<'py, PyDict>> {
    let d = to_dict(py, s)?;
    d.set_item("avg_displacement", s.avg_displacement())?;
    Ok(d)
}
