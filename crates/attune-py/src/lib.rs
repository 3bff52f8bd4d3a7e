//! The native module `attune._native`: thin PyO3 bindings over the engine crates.
use pyo3::prelude::*;

mod hash;
mod workload;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    hash::register(m)?;
    workload::register(m)?;
    Ok(())
}
