//! attune-plush's integration tests, one module per subject, linked into one test binary (each
//! binary of its own would link the whole crate again). Run one subject with
//! `cargo test --release -p attune-plush --test integration <module>::`.

mod ablations;
mod crash;
mod damage;
mod files;
mod filter_damage;
mod full_disk;
mod group_crash;
mod kill;
mod level_v3;
mod payload;
mod range;
mod read_only;
mod silent_damage;
mod support;
