//! attune-stress's integration tests, one module per subject, linked into one test binary (each
//! binary of its own would link the whole crate again). Run one subject with
//! `cargo test --release -p attune-stress --test integration <module>::`.

mod decoders;
mod stress;
