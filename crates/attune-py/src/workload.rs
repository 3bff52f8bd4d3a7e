//! Python access to `attune-workload` (module functions and stream classes in `attune._native`).
//!
//! Bindings only: every generator lives in the engine crate. Streams are chunked (`take(k)`
//! returns a list of up to `k` items with the GIL released while generating) so Python never
//! materialises more than the caller asks for. Errors from the crate and from the checks here are
//! raised as `attune.errors.WorkloadError` (an `attune.Error` and a `ValueError`; see
//! `errors.rs`). Thread-safety: each stream object is used under the GIL by one caller at a
//! time (PyO3 borrow checking); generation state never escapes the object.

use crate::errors::workload_error;
use attune_workload::criteo::{CriteoConfig, DENSE_FEATURES};
use attune_workload::keys::{encode_key16, KeySet, LoadOrder};
use attune_workload::mixgraph::{MixGraphConfig, MixGraphRun};
use attune_workload::perm::Permutation;
use attune_workload::trace::{
    read_csv, write_csv, Arrival, BinaryTraceReader, BinaryTraceWriter, BlockRecord, Combine,
    IoKind, Pattern, StreamSpec, TraceGen, MAGIC,
};
use attune_workload::wiscer::{KeyOrder, KeyPattern, WiscerConfig, WiscerLoad, WiscerRun};
use attune_workload::ycsb::{CoreWorkload, YcsbConfig, YcsbLoad, YcsbRun};
use attune_workload::{Op, RequestDist, Sampler, WorkloadError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

/// Largest chunk one call may return. Default 2^24 items: bounds the memory of one call
/// (about 0.5 GiB of Python ints at the limit) while keeping per-call overhead negligible.
const CHUNK_ITEMS_MAX: u64 = 1 << 24;

fn to_py(e: WorkloadError) -> PyErr {
    workload_error(e)
}

fn check_chunk(count: u64) -> PyResult<()> {
    if count > CHUNK_ITEMS_MAX {
        return Err(workload_error(format!(
            "count {count} exceeds the per-call limit {CHUNK_ITEMS_MAX}; iterate in chunks"
        )));
    }
    Ok(())
}

/// Keys `start .. start+count` of key set `name` (n keys, seed) in load order `order`
/// (`sequential` or `random[:SEED]`), as ints or as 16-byte big-endian strings.
#[pyfunction]
#[pyo3(signature = (name, n, seed=0, order="sequential", start=0, count=None, as_bytes=false))]
#[allow(clippy::too_many_arguments)]
fn workload_keys(
    py: Python<'_>,
    name: &str,
    n: u64,
    seed: u64,
    order: &str,
    start: u64,
    count: Option<u64>,
    as_bytes: bool,
) -> PyResult<PyObject> {
    let set = KeySet::from_name(name, n, seed).map_err(to_py)?;
    let order: LoadOrder = order.parse().map_err(to_py)?;
    let start = start.min(n);
    let count = count.unwrap_or(n - start).min(n - start);
    check_chunk(count)?;
    let perm = match order {
        LoadOrder::Sequential => None,
        LoadOrder::Random(s) => Some(Permutation::new(n, s).map_err(to_py)?),
    };
    let keys: Vec<u64> = py.allow_threads(|| {
        (start..start + count)
            .map(|j| set.key_at(perm.as_ref().map_or(j, |p| p.apply(j))))
            .collect()
    });
    if as_bytes {
        let items: Vec<Bound<'_, PyBytes>> = keys
            .iter()
            .map(|&k| PyBytes::new(py, &encode_key16(k)))
            .collect();
        Ok(PyList::new(py, items)?.into_any().unbind())
    } else {
        Ok(PyList::new(py, keys)?.into_any().unbind())
    }
}

/// A seeded stream of request items over `[0, n)`.
#[pyclass(module = "attune._native")]
struct RequestStream {
    sampler: Sampler,
    left: u64,
}

#[pymethods]
impl RequestStream {
    #[new]
    #[pyo3(signature = (dist, n, count, seed=0))]
    fn new(dist: &str, n: u64, count: u64, seed: u64) -> PyResult<Self> {
        let d: RequestDist = dist.parse().map_err(to_py)?;
        Ok(Self {
            sampler: d.sampler(n, seed).map_err(to_py)?,
            left: count,
        })
    }

    /// Up to `k` next items (fewer at the end; empty when exhausted).
    fn take(&mut self, py: Python<'_>, k: u64) -> PyResult<Vec<u64>> {
        check_chunk(k)?;
        let k = k.min(self.left);
        self.left -= k;
        let sampler = &mut self.sampler;
        Ok(py.allow_threads(|| (0..k).map(|_| sampler.next_item()).collect()))
    }

    /// Items not yet returned.
    fn remaining(&self) -> u64 {
        self.left
    }
}

enum Source {
    YcsbLoad(YcsbLoad),
    YcsbRun(Box<YcsbRun>),
    Wiscer(Box<WiscerRun>),
    WiscerLoad(Box<WiscerLoad>),
    MixGraph(Box<MixGraphRun>),
}

impl Iterator for Source {
    type Item = Op;
    fn next(&mut self) -> Option<Op> {
        match self {
            Source::YcsbLoad(i) => i.next(),
            Source::YcsbRun(i) => i.next(),
            Source::Wiscer(i) => i.next(),
            Source::WiscerLoad(i) => i.next(),
            Source::MixGraph(i) => i.next(),
        }
    }
}

/// A stream of operations as `(op, key, n)` tuples: `n` is the value length for writes, the
/// record count for scans and 0 for reads and deletes.
#[pyclass(module = "attune._native")]
struct OpStream {
    source: Source,
}

fn op_tuple(op: Op) -> (&'static str, u64, u64) {
    match op {
        Op::Read { key } => ("read", key, 0),
        Op::Update { key, value_len } => ("update", key, u64::from(value_len)),
        Op::Insert { key, value_len } => ("insert", key, u64::from(value_len)),
        Op::Scan { start, len } => ("scan", start, u64::from(len)),
        Op::ReadModifyWrite { key, value_len } => ("rmw", key, u64::from(value_len)),
        Op::Delete { key } => ("delete", key, 0),
    }
}

#[pymethods]
impl OpStream {
    /// Up to `k` next operations as tuples.
    fn take(&mut self, py: Python<'_>, k: u64) -> PyResult<Vec<(&'static str, u64, u64)>> {
        check_chunk(k)?;
        let source = &mut self.source;
        let ops: Vec<Op> = py.allow_threads(|| source.take(k as usize).collect());
        Ok(ops.into_iter().map(op_tuple).collect())
    }
}

/// A YCSB core-workload stream (`phase` = "load" or "run").
#[pyfunction]
#[pyo3(signature = (letter, records, operations, seed=0, phase="run", insert_order="hashed",
    field_count=10, field_length=100, request_distribution=None))]
#[allow(clippy::too_many_arguments)]
fn workload_ycsb(
    letter: &str,
    records: u64,
    operations: u64,
    seed: u64,
    phase: &str,
    insert_order: &str,
    field_count: u32,
    field_length: u32,
    request_distribution: Option<&str>,
) -> PyResult<OpStream> {
    let w: CoreWorkload = letter.parse().map_err(to_py)?;
    let mut cfg = YcsbConfig::core(w, records, operations, seed);
    cfg.insert_order = match insert_order {
        "hashed" => attune_workload::ycsb::InsertOrder::Hashed,
        "ordered" => attune_workload::ycsb::InsertOrder::Ordered,
        other => {
            return Err(workload_error(format!(
                "unknown insert_order `{other}`; valid: hashed, ordered"
            )))
        }
    };
    cfg.field_count = field_count;
    cfg.field_length = field_length;
    if let Some(d) = request_distribution {
        cfg.request_distribution = d.parse().map_err(to_py)?;
    }
    let source = match phase {
        "load" => Source::YcsbLoad(cfg.load().map_err(to_py)?),
        "run" => Source::YcsbRun(Box::new(cfg.run().map_err(to_py)?)),
        other => {
            return Err(workload_error(format!(
                "unknown phase `{other}`; valid: load, run"
            )))
        }
    };
    Ok(OpStream { source })
}

/// A Wiscer stream: `phase="load"` gives the initial inserts, `"run"` the operations.
#[pyfunction]
#[pyo3(signature = (zipf, initial_size, operations, seed=0, fetch=1.0, insert=0.0, delete=0.0,
    dist_shift_freq=0, dist_shift_prct=0.0, key_pattern="random", key_order="random",
    phase="run"))]
#[allow(clippy::too_many_arguments)]
fn workload_wiscer(
    py: Python<'_>,
    zipf: f64,
    initial_size: u64,
    operations: u64,
    seed: u64,
    fetch: f64,
    insert: f64,
    delete: f64,
    dist_shift_freq: u64,
    dist_shift_prct: f64,
    key_pattern: &str,
    key_order: &str,
    phase: &str,
) -> PyResult<OpStream> {
    let key_pattern: KeyPattern = key_pattern.parse().map_err(to_py)?;
    let key_order: KeyOrder = key_order.parse().map_err(to_py)?;
    let cfg = WiscerConfig {
        zipf,
        initial_size,
        operation_count: operations,
        fetch_proportion: fetch,
        insert_proportion: insert,
        delete_proportion: delete,
        dist_shift_freq,
        dist_shift_prct,
        key_pattern,
        key_order,
        seed,
    };
    let source = match phase {
        "load" => Source::WiscerLoad(Box::new(cfg.load().map_err(to_py)?)),
        "run" => Source::Wiscer(Box::new(py.allow_threads(|| cfg.run()).map_err(to_py)?)),
        other => {
            return Err(workload_error(format!(
                "unknown phase `{other}`; valid: load, run"
            )))
        }
    };
    Ok(OpStream { source })
}

/// A db_bench mix_graph stream: the FAST '20 example parameters, with optional overrides of the
/// key-range model (`keyrange=(num_ranges, a, b, c, d)`), the power key model
/// (`key_dist=(a, b)`) and the get/put/seek ratios (`mix=(get, put, seek)`).
#[pyfunction]
#[pyo3(signature = (num, operations, seed=0, keyrange=None, key_dist=None, mix=None))]
fn workload_mixgraph(
    num: u64,
    operations: u64,
    seed: u64,
    keyrange: Option<(u64, f64, f64, f64, f64)>,
    key_dist: Option<(f64, f64)>,
    mix: Option<(f64, f64, f64)>,
) -> PyResult<OpStream> {
    let mut cfg = MixGraphConfig::fast20_example(num, operations, seed);
    if let Some((n, a, b, c, d)) = keyrange {
        cfg.keyrange_num = n;
        cfg.keyrange_dist_a = a;
        cfg.keyrange_dist_b = b;
        cfg.keyrange_dist_c = c;
        cfg.keyrange_dist_d = d;
    }
    if let Some((a, b)) = key_dist {
        cfg.key_dist_a = a;
        cfg.key_dist_b = b;
    }
    if let Some((g, p, s)) = mix {
        cfg.get_ratio = g;
        cfg.put_ratio = p;
        cfg.seek_ratio = s;
    }
    Ok(OpStream {
        source: Source::MixGraph(Box::new(cfg.run().map_err(to_py)?)),
    })
}

type RecordTuple = (u64, u64, u32, &'static str, u64);

fn record_tuple(r: BlockRecord) -> RecordTuple {
    let op = match r.kind {
        IoKind::Read => "R",
        IoKind::Write => "W",
    };
    (r.timestamp_ns, r.offset, r.size, op, r.latency_ns)
}

/// Writes a synthetic block trace to `path` (`fmt` = "bin" or "csv"); returns the record count.
/// Each entry of `patterns` ("seq", "seq:RUN_LEN", "stride:BYTES", "random") is one stream over
/// its own `range_bytes`-sized region; streams are mixed with equal weights or interleaved
/// (`combine` = "mixture" or "interleave:BURST").
#[pyfunction]
#[pyo3(signature = (path, patterns, count, seed=0, fmt="bin", size=4096, range_bytes=1<<30,
    write_fraction=0.0, combine="mixture", mean_gap_ns=1000.0))]
#[allow(clippy::too_many_arguments)]
fn workload_trace_write(
    py: Python<'_>,
    path: &str,
    patterns: Vec<String>,
    count: u64,
    seed: u64,
    fmt: &str,
    size: u32,
    range_bytes: u64,
    write_fraction: f64,
    combine: &str,
    mean_gap_ns: f64,
) -> PyResult<u64> {
    let mut streams = Vec::with_capacity(patterns.len());
    for (i, p) in patterns.iter().enumerate() {
        let pattern: Pattern = p.parse().map_err(to_py)?;
        let start = (i as u64).checked_mul(range_bytes).ok_or_else(|| {
            workload_error("range_bytes times the number of patterns overflows u64")
        })?;
        streams.push(StreamSpec {
            pattern,
            start,
            range_bytes,
            size,
            write_fraction,
            weight: 1.0,
        });
    }
    let combine = match combine.split_once(':') {
        None if combine == "mixture" => Combine::Mixture,
        Some(("interleave", b)) => Combine::Interleave {
            burst: b
                .parse()
                .map_err(|e| workload_error(format!("burst `{b}`: {e}")))?,
        },
        None if combine == "interleave" => Combine::Interleave { burst: 1 },
        _ => {
            return Err(workload_error(format!(
                "unknown combine `{combine}`; valid: mixture, interleave, interleave:BURST"
            )))
        }
    };
    let gen = TraceGen::new(
        streams,
        combine,
        Arrival::Exponential(mean_gap_ns),
        count,
        seed,
    )
    .map_err(to_py)?;
    if fmt != "bin" && fmt != "csv" {
        return Err(workload_error(format!(
            "unknown fmt `{fmt}`; valid: bin, csv"
        )));
    }
    let file = std::fs::File::create(path)
        .map_err(|e| workload_error(format!("cannot create {path}: {e}")))?;
    let w = std::io::BufWriter::new(file);
    py.allow_threads(|| {
        if fmt == "csv" {
            write_csv(gen, w).map(|_| ())
        } else {
            let mut tw = BinaryTraceWriter::new(w)?;
            for r in gen {
                tw.write(&r)?;
            }
            tw.finish().map(|_| ())
        }
    })
    .map_err(to_py)?;
    Ok(count)
}

enum TraceSource {
    Bin(BinaryTraceReader<std::io::BufReader<std::fs::File>>),
    Csv(Box<dyn Iterator<Item = attune_workload::Result<BlockRecord>> + Send + Sync>),
}

/// Streams records from a trace file (binary if it starts with the magic, else CSV) as
/// `(timestamp_ns, offset, size, "R"|"W", latency_ns)` tuples.
#[pyclass(module = "attune._native")]
struct TraceReader {
    source: TraceSource,
    failed: bool,
}

#[pymethods]
impl TraceReader {
    #[new]
    fn new(path: &str) -> PyResult<Self> {
        use std::io::Read;
        let open = || {
            std::fs::File::open(path)
                .map_err(|e| workload_error(format!("cannot open {path}: {e}")))
        };
        let mut head = [0u8; 8];
        let n = open()?
            .read(&mut head)
            .map_err(|e| workload_error(format!("cannot read {path}: {e}")))?;
        let source = if n == 8 && head == MAGIC {
            let r = std::io::BufReader::new(open()?);
            TraceSource::Bin(BinaryTraceReader::new(r).map_err(to_py)?)
        } else {
            let r = std::io::BufReader::new(open()?);
            TraceSource::Csv(Box::new(read_csv(r)))
        };
        Ok(Self {
            source,
            failed: false,
        })
    }

    /// Up to `k` next records; raises on corrupt input (with the byte offset or line number).
    fn take(&mut self, py: Python<'_>, k: u64) -> PyResult<Vec<RecordTuple>> {
        check_chunk(k)?;
        if self.failed {
            return Ok(Vec::new());
        }
        let source = &mut self.source;
        let got: attune_workload::Result<Vec<BlockRecord>> = py.allow_threads(|| match source {
            TraceSource::Bin(r) => r.take(k as usize).collect(),
            TraceSource::Csv(r) => r.take(k as usize).collect(),
        });
        match got {
            Ok(v) => Ok(v.into_iter().map(record_tuple).collect()),
            Err(e) => {
                self.failed = true;
                Err(to_py(e))
            }
        }
    }
}

/// Requests `0 .. count` of the Criteo-like generator, as little-endian byte buffers the Python
/// side wraps with numpy: `(keys u64 [count, tables], dense u32 [count, 13], clicks u8 [count],
/// cardinalities)`. Generated with the GIL released.
#[pyfunction]
#[pyo3(signature = (tables, scale, count, seed=0, theta=1.05, clusters=10_000, cluster_theta=0.9,
                    correlation=0.8, pool=4, profile="zipf", coverage=None, click_logit=None))]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::type_complexity)]
fn workload_criteo<'py>(
    py: Python<'py>,
    tables: usize,
    scale: f64,
    count: u64,
    seed: u64,
    theta: f64,
    clusters: u64,
    cluster_theta: f64,
    correlation: f64,
    pool: u64,
    profile: &str,
    coverage: Option<f64>,
    click_logit: Option<f64>,
) -> PyResult<(
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Vec<u64>,
)> {
    check_chunk(count)?;
    let base = CriteoConfig::profile(profile, tables, scale, seed).map_err(to_py)?;
    let cfg = CriteoConfig {
        tables,
        scale,
        theta,
        clusters,
        cluster_theta,
        correlation,
        pool,
        coverage: coverage.unwrap_or(base.coverage),
        click_logit: click_logit.unwrap_or(base.click_logit),
        seed,
    };
    let stream = cfg.stream().map_err(to_py)?;
    let cards = stream.cardinalities();
    let (keys, dense, clicks) = py.allow_threads(move || {
        let n = count as usize;
        let mut keys = Vec::with_capacity(n * tables * 8);
        let mut dense = Vec::with_capacity(n * DENSE_FEATURES * 4);
        let mut clicks = Vec::with_capacity(n);
        for r in stream.take(n) {
            for k in r.keys {
                keys.extend_from_slice(&k.to_le_bytes());
            }
            for d in r.dense {
                dense.extend_from_slice(&d.to_le_bytes());
            }
            clicks.push(u8::from(r.click));
        }
        (keys, dense, clicks)
    });
    Ok((
        PyBytes::new(py, &keys),
        PyBytes::new(py, &dense),
        PyBytes::new(py, &clicks),
        cards,
    ))
}

/// Registers the workload functions and classes on `attune._native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(workload_criteo, m)?)?;
    m.add_function(wrap_pyfunction!(workload_trace_write, m)?)?;
    m.add_function(wrap_pyfunction!(workload_mixgraph, m)?)?;
    m.add_class::<TraceReader>()?;
    m.add_function(wrap_pyfunction!(workload_keys, m)?)?;
    m.add_function(wrap_pyfunction!(workload_ycsb, m)?)?;
    m.add_function(wrap_pyfunction!(workload_wiscer, m)?)?;
    m.add_class::<RequestStream>()?;
    m.add_class::<OpStream>()?;
    Ok(())
}
