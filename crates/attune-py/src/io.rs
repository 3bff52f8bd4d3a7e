//! Python bindings for the device crate (`attune-io`): trace reading, trace-driven simulation of
//! one SSD, replica routing, and Heimdall/LinnOS weight files with quantised inference. The typed
//! front is `python/attune/io/`. Traces cross as four columns (timestamps in ns, offsets, sizes,
//! read flags); errors go through `errors.rs` (`InvalidArgumentError` for bad parameters,
//! `CorruptionError` for malformed traces and damaged weight files).
//!
//! Thread-safety: plain functions; simulations release the GIL while they run.

use attune_io::clock::WriteClock;
use attune_io::model::{InputKind, MlpFile, QuantizedMlp};
use attune_io::route::{self, Policy};
use attune_io::ssd::SsdParams;
use attune_io::trace::{self, TraceFormat};
use attune_io::{replay, IoError};
use attune_workload::trace::{BlockRecord, IoKind};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::raise;

/// Maps an attune-io error to its Python exception.
pub fn io_error(e: IoError) -> PyErr {
    let msg = e.to_string();
    let (class, offset) = match &e {
        IoError::InvalidParameter { .. } => ("InvalidArgumentError", None),
        IoError::MalformedTrace { line, .. } => ("CorruptionError", Some(*line)),
        IoError::CorruptModel { offset, .. } => ("CorruptionError", Some(*offset)),
        IoError::UnsupportedModelVersion { .. } => ("UnsupportedVersionError", None),
        IoError::Workload(_) => ("CorruptionError", None),
        IoError::Io(_) => ("StorageIOError", None),
        _ => ("Error", None),
    };
    Python::with_gil(|py| raise(py, class, msg, None, offset))
}

pub(crate) type Columns = (Vec<u64>, Vec<u64>, Vec<u32>, Vec<bool>);
/// [`Columns`] of a trace read from a file, and how many records the time sort moved.
type SortedColumns = (Vec<u64>, Vec<u64>, Vec<u32>, Vec<bool>, u64);

pub(crate) fn to_records(py: Python<'_>, c: Columns) -> PyResult<Vec<BlockRecord>> {
    let (ts, off, size, read) = c;
    if off.len() != ts.len() || size.len() != ts.len() || read.len() != ts.len() {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            "trace columns must have equal lengths",
        ));
    }
    Ok((0..ts.len())
        .map(|i| BlockRecord {
            timestamp_ns: ts[i],
            offset: off[i],
            size: size[i],
            kind: if read[i] { IoKind::Read } else { IoKind::Write },
            latency_ns: 0,
        })
        .collect())
}

pub(crate) fn params_from(params: Option<&Bound<'_, PyDict>>) -> PyResult<SsdParams> {
    let mut settings: Vec<(String, String)> = Vec::new();
    if let Some(d) = params {
        for (k, v) in d.iter() {
            settings.push((k.extract()?, v.str()?.to_string()));
        }
    }
    SsdParams::from_settings(settings.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(io_error)
}

/// `io_read_trace(data, format=None)`: the trace's columns `(timestamp_ns, offset, size, is_read)`
/// from decompressed bytes, sorted by time, and how many records the sort moved; the format is
/// sniffed when not given.
#[pyfunction]
#[pyo3(signature = (data, format=None))]
fn io_read_trace(py: Python<'_>, data: &[u8], format: Option<&str>) -> PyResult<SortedColumns> {
    let f = match format {
        Some(name) => TraceFormat::parse(name).map_err(io_error)?,
        None => TraceFormat::sniff(data),
    };
    let (v, moved) = py
        .allow_threads(|| trace::read_trace_reordered(data, f))
        .map_err(io_error)?;
    Ok((
        v.iter().map(|r| r.timestamp_ns).collect(),
        v.iter().map(|r| r.offset).collect(),
        v.iter().map(|r| r.size).collect(),
        v.iter().map(|r| r.kind == IoKind::Read).collect(),
        moved,
    ))
}

/// `io_ssd_params(params=None)`: every SSD parameter (defaults overridden by `params`) as text,
/// validated.
#[pyfunction]
#[pyo3(signature = (params=None))]
fn io_ssd_params(params: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, String)>> {
    let p = params_from(params)?;
    Ok(p.to_pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect())
}

/// `io_replay(columns, params=None, seed=0)`: one trace on one simulated SSD. Returns a dict of
/// columns (`latency_ns`, `queue_len`, `gc_pages`, `features` flat row-major n × 11, `live` n × 3)
/// and `stats`.
#[pyfunction]
#[pyo3(signature = (columns, params=None, seed=0))]
fn io_replay<'py>(
    py: Python<'py>,
    columns: Columns,
    params: Option<&Bound<'py, PyDict>>,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let recs = to_records(py, columns)?;
    let p = params_from(params)?;
    let r = py
        .allow_threads(|| replay::replay(&recs, &p, seed))
        .map_err(io_error)?;
    let d = PyDict::new(py);
    d.set_item(
        "latency_ns",
        r.rows.iter().map(|x| x.latency_ns).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "queue_len",
        r.rows.iter().map(|x| x.queue_len).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "gc_pages",
        r.rows.iter().map(|x| x.gc_pages).collect::<Vec<_>>(),
    )?;
    let feats: Vec<f32> = r.rows.iter().flat_map(|x| x.features).collect();
    d.set_item("features", PyBytes::new(py, &f32_bytes(&feats)))?;
    let live: Vec<f32> = r.rows.iter().flat_map(|x| x.live).collect();
    d.set_item("live", PyBytes::new(py, &f32_bytes(&live)))?;
    d.set_item("stats", stats_dict(py, &r.stats)?)?;
    Ok(d)
}

/// Replays a trace against a real file (O_DIRECT unless `direct` is false); per-I/O issue time,
/// latency and bytes.
#[pyfunction]
#[pyo3(signature = (columns, path, file_bytes, pace=false, speed=1.0, direct=true, overwrite=false))]
#[allow(clippy::too_many_arguments)] // one per keyword of attune.io.replay_direct
fn io_replay_direct<'py>(
    py: Python<'py>,
    columns: Columns,
    path: std::path::PathBuf,
    file_bytes: u64,
    pace: bool,
    speed: f64,
    direct: bool,
    overwrite: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let recs = to_records(py, columns)?;
    let o = attune_io::direct::DirectOptions {
        path,
        file_bytes,
        pace,
        speed,
        direct,
        overwrite,
    };
    let (rows, memory_backed) = py
        .allow_threads(|| {
            let rows = attune_io::direct::replay_direct(&recs, &o)?;
            Ok::<_, IoError>((rows, attune_io::direct::memory_backed(&o.path)?))
        })
        .map_err(io_error)?;
    let d = PyDict::new(py);
    d.set_item("memory_backed", memory_backed)?;
    d.set_item(
        "issue_ns",
        rows.iter().map(|r| r.issue_ns).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "latency_ns",
        rows.iter().map(|r| r.latency_ns).collect::<Vec<_>>(),
    )?;
    d.set_item("bytes", rows.iter().map(|r| r.bytes).collect::<Vec<_>>())?;
    Ok(d)
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn stats_dict<'py>(py: Python<'py>, s: &attune_io::ssd::SsdStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("reads", s.reads)?;
    d.set_item("writes", s.writes)?;
    d.set_item("flushes", s.flushes)?;
    d.set_item("gc_periods", s.gc_periods)?;
    d.set_item("gc_reads", s.gc_reads)?;
    d.set_item("stalled_writes", s.stalled_writes)?;
    d.set_item("hot_reads", s.hot_reads)?;
    Ok(d)
}

fn models_from(blobs: &[Vec<u8>]) -> PyResult<Vec<QuantizedMlp>> {
    blobs
        .iter()
        .map(|b| QuantizedMlp::from_bytes(b).map_err(io_error))
        .collect()
}

/// `io_route(traces, policy, params=None, seed=0, timeout_ns=0, models=None, tie=0.0,
/// slow_factor=10.0, probe_models=None, probe_reads_us=0.0, probe_read_size=4096)`: 2 or 3 replicas, trace `i` issued at device `i`, reads
/// routed by `policy` (`baseline`, `random`, `hedging`, `c3`, `model`, `model-home`, `model-rank`
/// with `tie` the logit margin within which replicas count as tied, `model-cost` with
/// `slow_factor` the cost multiplier of a replica predicted slow, `model-expect` with
/// `slow_factor` the slow-to-fast latency ratio that weighs the slow probability, `oracle`).
/// Returns a dict with
/// `read_latency_ns`, `home`, `redirected`, `hedged`, `inferences`, `device_stats`. With
/// `probe_models` (one weight file per replica) it also has `probe`: columns of one row per read
/// and replica (`read`, `replica`, `margin` in logits, `c3`, `queue_len`, `history_age_us`,
/// `would_us`, `would_meet_gc`, `chosen`, and `busy_for_us`: how long the replica's busy period
/// had been under way). `probe_reads_us` > 0 sends a probe read of `probe_read_size` bytes to a
/// replica with no read completed or in flight for that long (`route::ProbeReads`; not with
/// `probe_models`); the dict's `probes` counts them. `write_clock` = `(flush_bytes,
/// gc_every_bytes, delay_us, busy_us)` turns on the write clock (`attune_io::clock`; C3 and the
/// model policies avoid a replica it predicts busy; not with `probe_models`).
/// `clock_anchor_us` > 0 anchors the clock at completed reads at least that slow instead of
/// assuming a known phase; `aged_bytes` (one per replica) ages each replica before the window
/// (`route::ClockPhase`); `clock_anchor_writes` also counts the writes sent while the anchoring
/// read was outstanding; `clock_anchor_gate` re-anchors only once a collection is due
/// (`ClockState::gated`); `clock_vote` votes the phase instead of anchoring it
/// (`clock::PhaseVote`). `hedge_delay_us` > 0 sends a backup read to another replica for a
/// risky read unanswered after that long (`route::RiskyHedge`: the chosen replica's clock has no
/// phase or its vote is split, or its model margin is above `-hedge_margin` logits when
/// `hedge_margin` is given; `hedge_every_read` hedges every read); `hedged` counts the backups.
/// `clock_vote_half_life` > 0 halves the voted candidates' scores every that many completed
/// reads (`PhaseVote::half_life`).
#[pyfunction]
#[pyo3(signature = (traces, policy, params=None, seed=0, timeout_ns=0, models=None, tie=0.0, slow_factor=10.0, probe_models=None, probe_reads_us=0.0, probe_read_size=4096, write_clock=None, clock_anchor_us=0.0, aged_bytes=None, clock_anchor_writes=false, clock_anchor_gate=false, clock_vote=false, hedge_delay_us=0.0, hedge_margin=None, hedge_every_read=false, clock_vote_half_life=0))]
#[allow(clippy::too_many_arguments)]
fn io_route<'py>(
    py: Python<'py>,
    traces: Vec<Columns>,
    policy: &str,
    params: Option<&Bound<'py, PyDict>>,
    seed: u64,
    timeout_ns: u64,
    models: Option<Vec<Vec<u8>>>,
    tie: f64,
    slow_factor: f64,
    probe_models: Option<Vec<Vec<u8>>>,
    probe_reads_us: f64,
    probe_read_size: u32,
    write_clock: Option<(u64, u64, f64, f64)>,
    clock_anchor_us: f64,
    aged_bytes: Option<Vec<u64>>,
    clock_anchor_writes: bool,
    clock_anchor_gate: bool,
    clock_vote: bool,
    hedge_delay_us: f64,
    hedge_margin: Option<f64>,
    hedge_every_read: bool,
    clock_vote_half_life: u32,
) -> PyResult<Bound<'py, PyDict>> {
    if !(hedge_delay_us.is_finite() && (0.0..1e12).contains(&hedge_delay_us)) {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            format!("hedge_delay_us must be a number of µs in [0, 1e12), got {hedge_delay_us}"),
        ));
    }
    if let Some(m) = hedge_margin {
        if !(m.is_finite() && (0.0..1e6).contains(&m)) {
            return Err(crate::errors::attune_error(
                py,
                "InvalidArgumentError",
                format!("hedge_margin must be a finite logit margin >= 0 (or None), got {m}"),
            ));
        }
    }
    if hedge_delay_us > 0.0 && probe_models.is_some() {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            "hedge_delay_us and probe_models cannot be combined".to_string(),
        ));
    }
    let hedge = route::RiskyHedge {
        delay_ns: (hedge_delay_us * 1e3).round() as u64,
        margin_q: hedge_margin.map_or(-1, |m| (m * 1024.0).round() as i64),
        every_read: hedge_every_read,
    };
    if !(clock_anchor_us.is_finite() && (0.0..1e12).contains(&clock_anchor_us)) {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            format!("clock_anchor_us must be a number of µs in [0, 1e12), got {clock_anchor_us}"),
        ));
    }
    let phase = route::ClockPhase {
        anchor_ns: (clock_anchor_us * 1e3) as u64,
        aged_bytes: aged_bytes.unwrap_or_default(),
        anchor_writes: clock_anchor_writes,
        anchor_gate: clock_anchor_gate,
        vote: clock_vote,
        vote_half_life: clock_vote_half_life,
    };
    let clock = match write_clock {
        Some(c) => clock_from(py, c)?,
        None => WriteClock::OFF,
    };
    if clock.is_on() && probe_models.is_some() {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            "write_clock and probe_models cannot be combined".to_string(),
        ));
    }
    if !(probe_reads_us >= 0.0 && probe_reads_us.is_finite()) {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            format!("probe_reads_us must be a finite number of µs >= 0, got {probe_reads_us}"),
        ));
    }
    if probe_reads_us > 0.0 && probe_models.is_some() {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            "probe_reads_us and probe_models cannot be combined".to_string(),
        ));
    }
    let probe_reads = route::ProbeReads {
        stale_ns: (probe_reads_us * 1e3).round() as u64,
        size: probe_read_size,
    };
    if !(tie >= 0.0 && tie.is_finite()) {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            format!("tie must be a finite logit margin >= 0, got {tie}"),
        ));
    }
    let recs = traces
        .into_iter()
        .map(|c| to_records(py, c))
        .collect::<PyResult<Vec<_>>>()?;
    let p = params_from(params)?;
    let pol = match policy {
        "baseline" => Policy::AlwaysAdmit,
        "random" => Policy::Random,
        "hedging" => Policy::Hedging { timeout_ns },
        "c3" => Policy::C3,
        "model" | "model-home" => Policy::Model {
            models: models_from(&models.unwrap_or_default())?,
            home_when_all_decline: policy == "model-home",
        },
        "model-rank" => Policy::ModelRank {
            models: models_from(&models.unwrap_or_default())?,
            tie_q: (tie * 1024.0).round() as i64,
        },
        "model-cost" => Policy::ModelCost {
            models: models_from(&models.unwrap_or_default())?,
            slow_factor,
        },
        "model-expect" => Policy::ModelExpect {
            models: models_from(&models.unwrap_or_default())?,
            slow_factor,
        },
        "oracle" => Policy::Oracle,
        other => {
            return Err(crate::errors::attune_error(
                py,
                "InvalidArgumentError",
                format!(
                    "unknown policy {other:?}; valid: baseline, random, hedging, c3, model, \
                     model-home, model-rank, model-cost, model-expect, oracle"
                ),
            ))
        }
    };
    let probes = probe_models.map(|m| models_from(&m)).transpose()?;
    let (r, rows) = py
        .allow_threads(|| match &probes {
            Some(pm) => route::probe(&recs, &p, &pol, pm, seed),
            None => route::simulate_with(
                &recs,
                &p,
                &pol,
                &route::RouteSettings {
                    seed,
                    probes: probe_reads,
                    clock,
                    phase,
                    hedge,
                },
            )
            .map(|r| (r, Vec::new())),
        })
        .map_err(io_error)?;
    let d = PyDict::new(py);
    if probes.is_some() {
        let c = PyDict::new(py);
        c.set_item("read", rows.iter().map(|r| r.read).collect::<Vec<_>>())?;
        c.set_item(
            "replica",
            rows.iter().map(|r| r.replica).collect::<Vec<_>>(),
        )?;
        c.set_item(
            "margin",
            rows.iter()
                .map(|r| r.margin_q as f64 / 1024.0)
                .collect::<Vec<_>>(),
        )?;
        c.set_item("c3", rows.iter().map(|r| r.c3).collect::<Vec<_>>())?;
        c.set_item(
            "queue_len",
            rows.iter().map(|r| r.queue_len).collect::<Vec<_>>(),
        )?;
        c.set_item(
            "history_age_us",
            rows.iter()
                .map(|r| r.history_age_ns as f64 / 1e3)
                .collect::<Vec<_>>(),
        )?;
        c.set_item(
            "would_us",
            rows.iter()
                .map(|r| r.would_ns as f64 / 1e3)
                .collect::<Vec<_>>(),
        )?;
        c.set_item(
            "would_meet_gc",
            rows.iter().map(|r| r.would_meet_gc).collect::<Vec<_>>(),
        )?;
        c.set_item("chosen", rows.iter().map(|r| r.chosen).collect::<Vec<_>>())?;
        c.set_item(
            "busy_for_us",
            rows.iter()
                .map(|r| r.busy_for_ns as f64 / 1e3)
                .collect::<Vec<_>>(),
        )?;
        d.set_item("probe", c)?;
    }
    d.set_item("read_latency_ns", r.read_latency_ns)?;
    d.set_item("home", r.home)?;
    d.set_item("redirected", r.redirected)?;
    d.set_item("hedged", r.hedged)?;
    d.set_item("inferences", r.inferences)?;
    d.set_item("probes", r.probes)?;
    d.set_item("probe_gc_reads", r.probe_gc_reads)?;
    d.set_item("device_probes", r.device_probes)?;
    let stats = r
        .device_stats
        .iter()
        .map(|s| stats_dict(py, s))
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("device_stats", stats)?;
    Ok(d)
}

/// A write clock from `(flush_bytes, gc_every_bytes, delay_us, busy_us)`; the error names the
/// bad field.
fn clock_from(py: Python<'_>, c: (u64, u64, f64, f64)) -> PyResult<WriteClock> {
    let (flush_bytes, gc_every_bytes, delay_us, busy_us) = c;
    for (name, v) in [("delay_us", delay_us), ("busy_us", busy_us)] {
        if !(0.0..1e12).contains(&v) {
            return Err(crate::errors::attune_error(
                py,
                "InvalidArgumentError",
                format!("write_clock {name} must be a number of µs in [0, 1e12), got {v}"),
            ));
        }
    }
    let w = WriteClock {
        flush_bytes,
        gc_every_bytes,
        delay_ns: (delay_us * 1e3).round() as u64,
        busy_ns: (busy_us * 1e3).round() as u64,
    };
    if flush_bytes == 0 {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            "write_clock flush_bytes must be positive (pass None for no clock)".to_string(),
        ));
    }
    w.validate().map_err(io_error)?;
    Ok(w)
}

/// `io_write_clock_flags(trace, write_clock)`: for every I/O of the trace (columns), whether the
/// write clock `(flush_bytes, gc_every_bytes, delay_us, busy_us)` predicts the device busy when
/// it arrives, from the writes before it (`attune_io::clock::busy_flags`).
#[pyfunction]
fn io_write_clock_flags(
    py: Python<'_>,
    trace: Columns,
    write_clock: (u64, u64, f64, f64),
) -> PyResult<Vec<bool>> {
    let c = clock_from(py, write_clock)?;
    let (ts, _off, size, read) = trace;
    let writes: Vec<bool> = read.iter().map(|r| !r).collect();
    attune_io::clock::busy_flags(&c, &ts, &size, &writes).map_err(io_error)
}

/// `io_model_info(data)`: checks a weight file and describes it (`kind`, `joint`, `dims`,
/// `threshold`); raises `CorruptionError` naming the byte offset when it is damaged.
#[pyfunction]
fn io_model_info<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let f = MlpFile::decode(data).map_err(io_error)?;
    QuantizedMlp::new(&f).map_err(io_error)?;
    let d = PyDict::new(py);
    d.set_item(
        "kind",
        match f.kind {
            InputKind::Heimdall => "heimdall",
            InputKind::HeimdallLive => "heimdall-live",
            InputKind::LinnOs => "linnos",
            InputKind::TinFetch => "tinfetch",
        },
    )?;
    d.set_item("joint", f.joint)?;
    d.set_item("dims", f.dims)?;
    d.set_item("threshold", f.threshold)?;
    Ok(d)
}

/// `io_model_scores(data, features, n)`: the quantised model's slow probability for `n` rows of
/// raw features (little-endian f32 bytes, row-major, `n × inputs`).
#[pyfunction]
fn io_model_scores(py: Python<'_>, data: &[u8], features: &[u8], n: usize) -> PyResult<Vec<f64>> {
    let m = QuantizedMlp::from_bytes(data).map_err(io_error)?;
    let k = m.inputs();
    if features.len() != n * k * 4 {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            format!(
                "features: {} bytes, expected {n} rows × {k} inputs × 4",
                features.len()
            ),
        ));
    }
    let x: Vec<f32> = features
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Ok(py.allow_threads(|| x.chunks_exact(k.max(1)).map(|row| m.score(row)).collect()))
}

/// Adds the device functions to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(io_read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(io_ssd_params, m)?)?;
    m.add_function(wrap_pyfunction!(io_replay, m)?)?;
    m.add_function(wrap_pyfunction!(io_replay_direct, m)?)?;
    m.add_function(wrap_pyfunction!(io_route, m)?)?;
    m.add_function(wrap_pyfunction!(io_model_info, m)?)?;
    m.add_function(wrap_pyfunction!(io_write_clock_flags, m)?)?;
    m.add_function(wrap_pyfunction!(io_model_scores, m)?)?;
    Ok(())
}
