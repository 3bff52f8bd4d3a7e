//! Composition: a pipe from a pipe. `first` moves data into a memory locator and `second` moves
//! it on; the chain moves a range through the staging memory in two halves, so that one half is
//! filled while the other drains (double buffering). File to file goes this way.

use crate::error::{Error, Result};
use crate::runtime::{Pipe, Transfer};

/// Two pipes joined at a memory locator (the first's destination, the second's source).
pub struct Chain {
    first: Pipe,
    second: Pipe,
    half_bytes: u64,
}

impl Chain {
    /// Joins `first` and `second`; their shared locator must be memory of at least 2 blocks.
    pub fn new(first: Pipe, second: Pipe) -> Result<Chain> {
        let mid = first.destination();
        if mid.memory().is_none() {
            return Err(Error::Unsupported {
                path: "chain".into(),
                reason: "the staging locator must be memory".into(),
            });
        }
        if !std::sync::Arc::ptr_eq(&mid.0, &second.source().0) {
            return Err(Error::InvalidArgument(
                "the second pipe must start at the first pipe's destination".into(),
            ));
        }
        let size = mid.len()?;
        let half_bytes = (size / 2) & !4095;
        if half_bytes == 0 {
            return Err(Error::InvalidArgument(format!(
                "staging memory of {size} bytes is too small to double-buffer (8 KiB at least)"
            )));
        }
        Ok(Chain {
            first,
            second,
            half_bytes,
        })
    }

    /// Moves `len` bytes from `src_off` of the first source to `dst_off` of the last destination
    /// (blocking; the two legs overlap).
    pub fn transfer_blocking(&self, src_off: u64, dst_off: u64, len: u64) -> Result<u64> {
        let mut pending: [Option<Transfer>; 2] = [None, None];
        let mut off = 0u64;
        let mut i = 0usize;
        while off < len {
            let n = (len - off).min(self.half_bytes);
            let half = (i % 2) as u64 * self.half_bytes;
            if let Some(t) = pending[i % 2].take() {
                t.wait()?;
            }
            self.first.transfer(src_off + off, half, n)?.wait()?;
            pending[i % 2] = Some(self.second.transfer(half, dst_off + off, n)?);
            off += n;
            i += 1;
        }
        for t in pending.iter().flatten() {
            t.wait()?;
        }
        Ok(len)
    }
}
