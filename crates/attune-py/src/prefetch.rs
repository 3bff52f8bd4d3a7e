//! Python bindings for block prefetching (`attune_io::prefetch`): the evaluator over every
//! method, TinFetch's training samples, synthetic traces and quantised suffix predictions. The
//! typed front is `python/attune/io/prefetch.py`. Traces cross as the four columns of
//! `io_read_trace`; errors go through `io::io_error` (`InvalidArgumentError` for unknown methods
//! and bad parameters, `CorruptionError` for damaged weight files).
//!
//! Thread-safety: plain functions; evaluations release the GIL while they run.

use attune_io::model::QuantizedMlp;
use attune_io::prefetch::{self, baselines::Predicted, tinfetch, EvalConfig, Metrics};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::io::{io_error, to_records, Columns};

fn metrics_dict<'py>(py: Python<'py>, m: &Metrics) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("method", &m.method)?;
    d.set_item("accesses", m.accesses)?;
    d.set_item("demand_blocks", m.demand_blocks)?;
    d.set_item("hit_blocks", m.hit_blocks)?;
    d.set_item("late_blocks", m.late_blocks)?;
    d.set_item("prefetched_blocks", m.prefetched_blocks)?;
    d.set_item("useful_blocks", m.useful_blocks)?;
    d.set_item("decisions", m.decisions)?;
    d.set_item("hit_rate", m.hit_rate())?;
    d.set_item("accuracy", m.accuracy())?;
    d.set_item("timeliness", m.timeliness())?;
    d.set_item("bandwidth_load", m.bandwidth_load())?;
    d.set_item("score", m.score())?;
    Ok(d)
}

/// `io_prefetch_eval(columns, methods, model=None, measure_from=0, delay_ms=20.0,
/// reads_only=False, predictions=None, predictions_name="lstm")`: one metrics dict per method.
/// `predictions` (one byte offset per access, negative = none) adds an externally predicted
/// method.
#[pyfunction]
#[pyo3(signature = (columns, methods, model=None, measure_from=0, delay_ms=20.0,
    reads_only=false, predictions=None, predictions_name="lstm"))]
#[allow(clippy::too_many_arguments)]
fn io_prefetch_eval<'py>(
    py: Python<'py>,
    columns: Columns,
    methods: Vec<String>,
    model: Option<&[u8]>,
    measure_from: usize,
    delay_ms: f64,
    reads_only: bool,
    predictions: Option<Vec<i64>>,
    predictions_name: &str,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let trace = to_records(py, columns)?;
    if !(delay_ms.is_finite() && (0.0..=1e6).contains(&delay_ms)) {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            format!("delay_ms = {delay_ms}: must be in 0..=1000000"),
        ));
    }
    let q = match model {
        Some(b) => Some(QuantizedMlp::from_bytes(b).map_err(io_error)?),
        None => None,
    };
    let mut ps = Vec::new();
    for name in &methods {
        ps.push(prefetch::build(name, q.as_ref()).map_err(io_error)?);
    }
    if let Some(p) = predictions {
        if p.len() != trace.len() {
            return Err(crate::errors::attune_error(
                py,
                "InvalidArgumentError",
                format!("{} predictions for {} accesses", p.len(), trace.len()),
            ));
        }
        let v = p.into_iter().map(|x| u64::try_from(x).ok()).collect();
        ps.push(Box::new(Predicted::new(predictions_name, v)));
    }
    let cfg = EvalConfig {
        delay_ns: (delay_ms * 1e6) as u64,
        measure_from,
        reads_only,
    };
    let ms: Vec<Metrics> = py.allow_threads(|| {
        ps.iter_mut()
            .map(|p| prefetch::evaluate(&trace, p.as_mut(), &cfg))
            .collect()
    });
    ms.iter().map(|m| metrics_dict(py, m)).collect()
}

/// `io_prefetch_samples(offsets, sizes, padding="repeat")`: TinFetch's training samples as
/// `(inputs, targets)`: little-endian f32 bytes, `n × 10` and `n` (suffixes in 1 KiB units).
#[pyfunction]
#[pyo3(signature = (offsets, sizes, padding="repeat"))]
fn io_prefetch_samples<'py>(
    py: Python<'py>,
    offsets: Vec<u64>,
    sizes: Vec<u64>,
    padding: &str,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    if offsets.len() != sizes.len() {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            "offsets and sizes must have equal lengths",
        ));
    }
    let padding = match padding {
        "repeat" => tinfetch::Padding::RepeatOldest,
        "zero" => tinfetch::Padding::Zero,
        other => {
            return Err(crate::errors::attune_error(
                py,
                "InvalidArgumentError",
                format!("padding {other:?}: valid are \"repeat\" and \"zero\""),
            ))
        }
    };
    let cfg = prefetch::TinFetchConfig {
        padding,
        ..Default::default()
    };
    let pairs: Vec<(u64, u64)> = offsets.into_iter().zip(sizes).collect();
    let (x, y) = py.allow_threads(|| tinfetch::training_samples(&pairs, &cfg));
    let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let yb: Vec<u8> = y.iter().flat_map(|v| v.to_le_bytes()).collect();
    Ok((PyBytes::new(py, &xb), PyBytes::new(py, &yb)))
}

/// `io_prefetch_predict(model, inputs, n)`: the quantised model's predicted suffix (1 KiB units)
/// for `n` rows of 10 inputs (little-endian f32 bytes).
#[pyfunction]
fn io_prefetch_predict(
    py: Python<'_>,
    model: &[u8],
    inputs: &[u8],
    n: usize,
) -> PyResult<Vec<u32>> {
    let m = QuantizedMlp::from_bytes(model).map_err(io_error)?;
    let k = tinfetch::HISTORY;
    if m.kind() != attune_io::model::InputKind::TinFetch || inputs.len() != n * k * 4 {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            format!(
                "need a TinFetch model and {n} rows × {k} inputs × 4 bytes ({} given)",
                inputs.len()
            ),
        ));
    }
    let x: Vec<f32> = inputs
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(x.chunks_exact(k)
        .map(|row| {
            let mut a = [0f32; tinfetch::HISTORY];
            a.copy_from_slice(row);
            tinfetch::TinFetch::predict(&m, &a)
        })
        .collect())
}

/// `io_prefetch_synth(kind, n, jobs=8, seed=0)`: a synthetic trace's columns (`n` at most
/// `attune_io::prefetch::synth::MAX_IOS`, checked before allocating).
#[pyfunction]
#[pyo3(signature = (kind, n, jobs=8, seed=0))]
fn io_prefetch_synth(kind: &str, n: usize, jobs: usize, seed: u64) -> PyResult<Columns> {
    let v = prefetch::synth::generate(kind, n, jobs, seed).map_err(io_error)?;
    Ok((
        v.iter().map(|r| r.timestamp_ns).collect(),
        v.iter().map(|r| r.offset).collect(),
        v.iter().map(|r| r.size).collect(),
        v.iter()
            .map(|r| r.kind == attune_workload::trace::IoKind::Read)
            .collect(),
    ))
}

/// Adds the prefetching functions to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(io_prefetch_eval, m)?)?;
    m.add_function(wrap_pyfunction!(io_prefetch_samples, m)?)?;
    m.add_function(wrap_pyfunction!(io_prefetch_predict, m)?)?;
    m.add_function(wrap_pyfunction!(io_prefetch_synth, m)?)?;
    Ok(())
}
