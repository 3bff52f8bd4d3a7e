//! attune-pipes's integration tests, one module per subject, linked into one test binary (each
//! binary of its own would link the whole crate again). Run one subject with
//! `cargo test --release -p attune-pipes --test integration <module>::`.

mod pipes;
mod sort;
mod sort_lines;
