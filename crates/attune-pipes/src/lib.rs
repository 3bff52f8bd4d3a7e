//! # attune-pipes
//!
//! Data Pipes: declarative data movement between memory and storage. Declare where data lives
//! ([`Locator`]: DRAM, a core-cache-sized buffer, a mapped file standing in for persistent
//! memory, a file buffered or O_DIRECT), connect two locators with a [`Pipe`], and move byte
//! ranges with it, blocking ([`Pipe::transfer_blocking`]) or asynchronously ([`Pipe::transfer`]
//! returns a [`Transfer`] to poll, wait on or cancel; [`Pipe::ready_fd`] is an eventfd for
//! epoll). The [`Runtime`] chooses the mechanism (io_uring with registered buffers and fixed
//! files, else pread/pwrite threads, else mmap copies; memcpy between memories), reports every
//! fallback, and rejects a declared path it cannot serve. [`sort`] is an external sort built on
//! pipes. Design: `docs/data-pipes.md`.
//!
//! ```
//! use attune_pipes::{FileOptions, Locator, PipeOptions, Runtime, RuntimeOptions};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("data");
//! std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
//! let rt = Runtime::new(RuntimeOptions::default()).unwrap();
//! let file = Locator::file(&path, FileOptions::default()).unwrap();
//! let dram = Locator::dram(1 << 20).unwrap();
//! let pipe = rt.pipe(&file, &dram, PipeOptions::default()).unwrap();
//! let t = pipe.transfer(0, 0, 1 << 20).unwrap(); // asynchronous
//! assert_eq!(t.wait().unwrap(), 1 << 20);
//! assert!(dram.bytes().unwrap().iter().all(|&b| b == 7));
//! println!("moved by {}", pipe.state().mechanism);
//! ```
//!
//! Safety: memory is owned by the library (or registered with the kernel), never borrowed from
//! the caller; a request in flight keeps its memory alive; see [`locator`] and [`runtime`].

// Tests may unwrap: a failed unwrap is a failed test. Library code never does (workspace lint).
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod backend;
pub mod chain;
pub mod error;
pub mod locator;
pub mod mechanism;
pub mod merge;
pub mod runtime;
pub mod sort;
mod sort_lines;

pub use chain::Chain;
pub use error::{Errno, Error, Result};
pub use locator::{BytesGuard, DramOptions, FileOptions, Locator, LocatorKind};
pub use mechanism::{Mechanism, MechanismChoice};
pub use merge::MergeSelect;
pub use runtime::{
    requests_in_flight, Pipe, PipeOptions, PipeState, Runtime, RuntimeOptions, RuntimeReport,
    Transfer,
};
