//! The native module `attune._native`: thin PyO3 bindings over the engine crates. Bindings only:
//! no engine logic lives here. The typed Python front is `python/attune/`.
use pyo3::prelude::*;

mod device;
mod embed;
mod errors;
mod hash;
mod ingest;
mod io;
mod kv;
mod pipes;
mod plush;
mod prefetch;
mod stats;
mod workload;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    kv::register(m)?;
    ingest::register(m)?;
    hash::register(m)?;
    io::register(m)?;
    device::register(m)?;
    workload::register(m)?;
    pipes::register(m)?;
    plush::register(m)?;
    prefetch::register(m)?;
    embed::register(m)?;
    Ok(())
}
