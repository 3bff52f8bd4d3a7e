//! # attune-hash: VIP hashing
//!
//! A chained hash table that learns which keys are popular while it serves requests and moves
//! them to the front of their chains ("VIP" keys get the front seats), after the VIP hashing
//! chapter of seed 004 (§3). Learning runs only for a small, bounded share of the fetches;
//! between learn phases the table cheaply *senses* the mean chain displacement of its fetches
//! and re-learns only when that has moved.
//!
//! ```
//! use attune_hash::{VipConfig, VipMap};
//! let mut m: VipMap<u64, u64> = VipMap::new(VipConfig::default()).unwrap();
//! for k in 0..1000 {
//!     m.insert(k, k * 2);
//! }
//! for _ in 0..10_000 {
//!     assert_eq!(m.get(&3), Some(&6)); // key 3 is hot: learning moves it to its chain head
//! }
//! assert_eq!(m.displacement(&3), Some(1));
//! ```
//!
//! * [`VipMap`] — the table (generic `K: Hash + Eq`; `VipMap<u64, u64>` is the 8-byte fast
//!   path hashed by one [`fmix64`]). [`VipConfig::chained`] switches learning off.
//! * [`policy`] — the learn / sense / default schedule and the sensing statistic.
//! * [`join`] — the PK-FK hash join (build / probe) with a VIP probe.
//!
//! Design notes, measured numbers and the commands that produced them: `docs/vip-hashing.md`.

pub mod error;
pub mod hasher;
pub mod join;
pub mod map;
pub mod policy;

pub use error::HashError;
pub use hasher::{fmix64, Fmix64Build, Fmix64Hasher};
pub use join::{hash_join, JoinMode, JoinTable};
pub use map::{VipMap, VipStats};
pub use policy::{Gamma, Phase, Schedule, VipConfig};

#[cfg(test)]
mod tests;
