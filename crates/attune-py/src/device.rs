//! Python bindings of the device profiler and rule checker (`attune_io::profile`,
//! `attune_io::check`). The typed front is `python/attune/device/`; errors go through
//! `io::io_error` (`InvalidArgumentError` for bad parameters and knobs).
//!
//! Thread-safety: plain functions; a simulated profile holds the GIL only to report progress.

use attune_io::check::{self, RuleParams, TraceIo};
use attune_io::profile::{
    self, Finding, Learned, LocationGuess, LocationProfile, ProfileConfig, SizeProfile,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::io::{io_error, params_from};

fn config_from(config: Option<&Bound<'_, PyDict>>) -> PyResult<ProfileConfig> {
    let mut c = ProfileConfig::default();
    if let Some(d) = config {
        for (k, v) in d.iter() {
            let name: String = k.extract()?;
            match name.as_str() {
                "file_bytes" => c.file_bytes = v.extract()?,
                "min_write" => c.min_write = v.extract()?,
                "max_write" => c.max_write = v.extract()?,
                "read_bytes" => c.read_bytes = v.extract()?,
                "offset_unit" => c.offset_unit = v.extract()?,
                "min_guess" => c.min_guess = v.extract()?,
                "max_guess" => c.max_guess = v.extract()?,
                "samples_per_group" => c.samples_per_group = v.extract()?,
                "seed" => c.seed = v.extract()?,
                "rel_threshold" => c.rel_threshold = v.extract()?,
                "size_rel_threshold" => c.size_rel_threshold = v.extract()?,
                "t_threshold" => c.t_threshold = v.extract()?,
                other => {
                    return Err(crate::errors::attune_error(
                        d.py(),
                        "InvalidArgumentError",
                        format!(
                            "unknown profile setting `{other}`; valid: file_bytes, min_write, \
                             max_write, read_bytes, offset_unit, min_guess, max_guess, \
                             samples_per_group, seed, rel_threshold, size_rel_threshold, \
                             t_threshold"
                        ),
                    ))
                }
            }
        }
    }
    c.validate().map_err(io_error)?;
    Ok(c)
}

fn finding<'py>(py: Python<'py>, f: &Finding) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("value", f.value)?;
    d.set_item("confidence", f.confidence)?;
    d.set_item("reason", &f.reason)?;
    Ok(d)
}

fn learned<'py>(py: Python<'py>, l: &Learned) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("desirable_write", finding(py, &l.desirable_write)?)?;
    d.set_item("stripe", finding(py, &l.stripe)?)?;
    d.set_item("chunk", finding(py, &l.chunk)?)?;
    d.set_item("page", finding(py, &l.page)?)?;
    d.set_item("hot_offset", finding(py, &l.hot_offset)?)?;
    Ok(d)
}

/// `device_profile_config(config=None, orders=True)`: the profile settings (defaults
/// overridden), validated; with `orders` also the shared random orders (`read_order`,
/// `sampled_chunks`), which a caller checking sizes first can leave out.
#[pyfunction]
#[pyo3(signature = (config=None, orders=true))]
fn device_profile_config<'py>(
    py: Python<'py>,
    config: Option<&Bound<'py, PyDict>>,
    orders: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let c = config_from(config)?;
    let d = PyDict::new(py);
    d.set_item("file_bytes", c.file_bytes)?;
    d.set_item("min_write", c.min_write)?;
    d.set_item("max_write", c.max_write)?;
    d.set_item("read_bytes", c.read_bytes)?;
    d.set_item("offset_unit", c.offset_unit)?;
    d.set_item("min_guess", c.min_guess)?;
    d.set_item("max_guess", c.max_guess)?;
    d.set_item("samples_per_group", c.samples_per_group)?;
    d.set_item("seed", c.seed)?;
    d.set_item("rel_threshold", c.rel_threshold)?;
    d.set_item("size_rel_threshold", c.size_rel_threshold)?;
    d.set_item("t_threshold", c.t_threshold)?;
    d.set_item("write_sizes", c.write_sizes())?;
    d.set_item("guesses", c.guesses())?;
    if orders {
        d.set_item("read_order", c.read_order())?;
        let chunks = PyDict::new(py);
        for g in c.guesses() {
            chunks.set_item(g, c.sampled_chunks(g))?;
        }
        d.set_item("sampled_chunks", chunks)?;
    }
    Ok(d)
}

/// `device_profile_simulated(params=None, config=None, seed=0, progress=None)`: Experiments 1
/// and 2 on a simulated SSD, then the rule. Returns `sizes`, `size_latencies_ns`, `guesses`
/// (list of `(guess, offset_unit, per-group latencies)`), `learned`, `expected`, `ios`,
/// `device_ns`.
#[pyfunction]
#[pyo3(signature = (params=None, config=None, seed=0, progress=None))]
fn device_profile_simulated<'py>(
    py: Python<'py>,
    params: Option<&Bound<'py, PyDict>>,
    config: Option<&Bound<'py, PyDict>>,
    seed: u64,
    progress: Option<PyObject>,
) -> PyResult<Bound<'py, PyDict>> {
    let p = params_from(params)?;
    let c = config_from(config)?;
    let mut err: Option<PyErr> = None;
    let mut report = |done: u64, total: u64| {
        if let (Some(cb), None) = (&progress, &err) {
            if let Err(e) = cb.call1(py, (done, total)) {
                err = Some(e);
            }
        }
    };
    let run = profile::profile_simulated(&p, &c, seed, &mut report).map_err(io_error)?;
    if let Some(e) = err {
        return Err(e);
    }
    let d = PyDict::new(py);
    d.set_item("sizes", &run.sizes.sizes)?;
    d.set_item("size_latencies_ns", &run.sizes.latencies_ns)?;
    let guesses: Vec<(u32, u32, Vec<Vec<f64>>)> = run
        .locations
        .guesses
        .iter()
        .map(|g| (g.guess, g.offset_unit, g.latencies_ns.clone()))
        .collect();
    d.set_item("guesses", guesses)?;
    d.set_item("learned", learned(py, &run.learned)?)?;
    let (stripe, chunk, page, hot) = profile::expected(&p, &c);
    let e = PyDict::new(py);
    // In the write-fragment model the desirable write size is the stripe: a file written with
    // stripe-sized requests has no fragments, every smaller size has some.
    e.set_item("desirable_write", stripe)?;
    e.set_item("stripe", stripe)?;
    e.set_item("chunk", chunk)?;
    e.set_item("page", page)?;
    e.set_item("hot_offset", hot)?;
    d.set_item("expected", e)?;
    d.set_item("ios", run.ios)?;
    d.set_item("device_ns", run.device_ns)?;
    Ok(d)
}

/// `device_analyze(sizes, size_latencies_ns, guesses, config=None)`: the rule over measured
/// profiles (what a real-disk run feeds it). `guesses` is a list of `(guess, offset_unit,
/// per-group latencies)`.
#[pyfunction]
#[pyo3(signature = (sizes, size_latencies_ns, guesses, config=None))]
fn device_analyze<'py>(
    py: Python<'py>,
    sizes: Vec<u32>,
    size_latencies_ns: Vec<Vec<f64>>,
    guesses: Vec<(u32, u32, Vec<Vec<f64>>)>,
    config: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let c = config_from(config)?;
    let sp = SizeProfile {
        sizes,
        latencies_ns: size_latencies_ns,
    };
    let lp = LocationProfile {
        guesses: guesses
            .into_iter()
            .filter(|g| !g.2.is_empty())
            .map(|(guess, offset_unit, latencies_ns)| LocationGuess {
                guess,
                offset_unit,
                latencies_ns,
            })
            .collect(),
    };
    learned(py, &profile::analyze(&sp, &lp, &c))
}

/// `device_check(file, offset, size, write, params)`: rules 1–5 over a trace given as columns;
/// `params` maps `desirable_write`, `stripe`, `chunk`, `page`, `hot_offset` to bytes or None.
#[pyfunction]
fn device_check<'py>(
    py: Python<'py>,
    file: Vec<u32>,
    offset: Vec<u64>,
    size: Vec<u64>,
    write: Vec<bool>,
    params: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let n = file.len();
    if offset.len() != n || size.len() != n || write.len() != n {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            "trace columns must have equal lengths",
        ));
    }
    let get = |k: &str| -> PyResult<Option<u64>> {
        match params.get_item(k)? {
            Some(v) if !v.is_none() => Ok(Some(v.extract()?)),
            _ => Ok(None),
        }
    };
    let rp = RuleParams {
        desirable_write: get("desirable_write")?,
        stripe: get("stripe")?,
        chunk: get("chunk")?,
        page: get("page")?,
        hot_offset: get("hot_offset")?,
    };
    let ios: Vec<TraceIo> = (0..n)
        .map(|i| TraceIo {
            file: file[i],
            offset: offset[i],
            size: size[i],
            write: write[i],
        })
        .collect();
    let r = py.allow_threads(|| check::check(&ios, &rp));
    let d = PyDict::new(py);
    let v = &r.violations;
    d.set_item("rule", v.iter().map(|x| x.rule).collect::<Vec<_>>())?;
    d.set_item("index", v.iter().map(|x| x.index).collect::<Vec<_>>())?;
    d.set_item("file", v.iter().map(|x| x.io.file).collect::<Vec<_>>())?;
    d.set_item("offset", v.iter().map(|x| x.io.offset).collect::<Vec<_>>())?;
    d.set_item("size", v.iter().map(|x| x.io.size).collect::<Vec<_>>())?;
    d.set_item("write", v.iter().map(|x| x.io.write).collect::<Vec<_>>())?;
    d.set_item(
        "extra_pages",
        v.iter().map(|x| x.extra_pages).collect::<Vec<_>>(),
    )?;
    d.set_item("counts", r.counts.to_vec())?;
    d.set_item(
        "unchecked",
        r.unchecked
            .iter()
            .map(|(k, why)| (*k, why.to_string()))
            .collect::<Vec<_>>(),
    )?;
    d.set_item("reads", r.reads)?;
    d.set_item("writes", r.writes)?;
    d.set_item("write_bytes", r.write_bytes)?;
    d.set_item("flash_pages", r.flash_pages)?;
    d.set_item("min_flash_pages", r.min_flash_pages)?;
    d.set_item("extra_pages_total", r.extra_pages())?;
    d.set_item("write_amplification", r.write_amplification(rp.page))?;
    Ok(d)
}

/// Adds the device functions to the module.
/// `device_replay_os(kind, file, offset, size, bases, params=None, seed=0, write_bytes=131072,
/// split_bytes=0)`: a program's calls (kind 0 read, 1 write, 2 fsync, 3 phase mark) replayed on
/// the simulated SSD through the page-cache model of `attune_io::osreplay`. Returns `phases`
/// (one dict of counters per phase) and `file_pages` ((flash pages, minimum) per file).
#[pyfunction]
#[pyo3(signature = (kind, file, offset, size, bases, params=None, seed=0, write_bytes=131072,
                    split_bytes=0))]
#[allow(clippy::too_many_arguments)]
fn device_replay_os<'py>(
    py: Python<'py>,
    kind: Vec<u8>,
    file: Vec<u32>,
    offset: Vec<u64>,
    size: Vec<u64>,
    bases: Vec<u64>,
    params: Option<&Bound<'py, PyDict>>,
    seed: u64,
    write_bytes: u64,
    split_bytes: u64,
) -> PyResult<Bound<'py, PyDict>> {
    use attune_io::osreplay::{replay_os, OsLayout, OsOp, OsOpKind};
    let n = kind.len();
    if file.len() != n || offset.len() != n || size.len() != n {
        return Err(crate::errors::attune_error(
            py,
            "InvalidArgumentError",
            format!(
                "replay columns differ in length: kind {n}, file {}, offset {}, size {}",
                file.len(),
                offset.len(),
                size.len()
            ),
        ));
    }
    let mut ops = Vec::with_capacity(n);
    for i in 0..n {
        let k = match kind[i] {
            0 => OsOpKind::Read,
            1 => OsOpKind::Write,
            2 => OsOpKind::Sync,
            3 => OsOpKind::Mark,
            other => {
                return Err(crate::errors::attune_error(
                    py,
                    "InvalidArgumentError",
                    format!("replay op {i}: kind {other} (0 read, 1 write, 2 fsync, 3 mark)"),
                ))
            }
        };
        ops.push(OsOp {
            kind: k,
            file: file[i],
            offset: offset[i],
            size: size[i],
        });
    }
    let p = params_from(params)?;
    let lay = OsLayout {
        bases,
        write_bytes,
        split_bytes,
    };
    let r = py
        .allow_threads(|| replay_os(&ops, &p, seed, &lay))
        .map_err(io_error)?;
    let phases = pyo3::types::PyList::empty(py);
    for c in &r.phases {
        let d = PyDict::new(py);
        d.set_item("device_ns", c.device_ns)?;
        d.set_item("reads", c.reads)?;
        d.set_item("read_bytes", c.read_bytes)?;
        d.set_item("writes", c.writes)?;
        d.set_item("write_bytes", c.write_bytes)?;
        d.set_item("flash_pages", c.flash_pages)?;
        d.set_item("min_flash_pages", c.min_flash_pages)?;
        d.set_item("calls_read", c.calls_read)?;
        d.set_item("calls_write", c.calls_write)?;
        d.set_item("calls_sync", c.calls_sync)?;
        phases.append(d)?;
    }
    let d = PyDict::new(py);
    d.set_item("phases", phases)?;
    d.set_item("file_pages", r.file_pages)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(device_replay_os, m)?)?;
    m.add_function(wrap_pyfunction!(device_profile_config, m)?)?;
    m.add_function(wrap_pyfunction!(device_profile_simulated, m)?)?;
    m.add_function(wrap_pyfunction!(device_analyze, m)?)?;
    m.add_function(wrap_pyfunction!(device_check, m)?)?;
    Ok(())
}
