//! Reads the records of a log image held in memory (format: `mod.rs`).
//!
//! Called by recovery (the WAL and the manifest) on the opening thread. Invariant: a damaged
//! fragment followed by no valid fragment is a torn tail and ends the log; one followed by a valid
//! fragment is corruption, reported with the file and offset.

use super::*;
use crate::error::{Error, Result};
use crate::util::coding::decode_fixed32;
use std::path::{Path, PathBuf};

/// Reads the records of a log held in memory.
pub struct LogReader<'a> {
    data: &'a [u8],
    pos: usize,
    path: PathBuf,
    /// Bytes dropped at the end as a torn write.
    pub torn_tail_bytes: u64,
}

impl<'a> LogReader<'a> {
    pub fn new(data: &'a [u8], path: &Path) -> Self {
        LogReader {
            data,
            pos: 0,
            path: path.to_path_buf(),
            torn_tail_bytes: 0,
        }
    }

    /// Offset of the next fragment.
    pub fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn torn(&mut self, at: usize) -> Result<Option<(u64, Vec<u8>)>> {
        self.torn_tail_bytes = (self.data.len() - at) as u64;
        self.pos = self.data.len();
        Ok(None)
    }

    /// The next record and its starting offset; `Ok(None)` at the end (including a torn tail).
    pub fn next_record(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        let start = self.pos;
        let mut record: Vec<u8> = Vec::new();
        let mut in_fragmented = false;
        loop {
            let at = self.pos;
            let rest = &self.data[at..];
            if rest.is_empty() {
                if in_fragmented {
                    return self.torn(start);
                }
                return Ok(None);
            }
            if rest.len() < HEADER_BYTES {
                return self.torn(start);
            }
            let crc = decode_fixed32(rest).unwrap_or(0);
            let len = decode_fixed32(&rest[4..]).unwrap_or(0) as usize;
            let kind = rest[8];
            let body_end = HEADER_BYTES.saturating_add(len);
            let intact = len <= MAX_FRAGMENT_BYTES
                && body_end <= rest.len()
                && fragment_crc(len as u32, kind, &rest[HEADER_BYTES..body_end]) == crc;
            if !intact {
                if valid_fragment_after(self.data, at + 1) {
                    return Err(self.corrupt(at, "damaged fragment followed by valid data".into()));
                }
                return self.torn(start);
            }
            let payload = &rest[HEADER_BYTES..body_end];
            self.pos = at + body_end;
            match (kind, in_fragmented) {
                (FULL, false) => return Ok(Some((start as u64, payload.to_vec()))),
                (FIRST, false) => {
                    record.extend_from_slice(payload);
                    in_fragmented = true;
                }
                (MIDDLE, true) => record.extend_from_slice(payload),
                (LAST, true) => {
                    record.extend_from_slice(payload);
                    return Ok(Some((start as u64, record)));
                }
                _ => return Err(self.corrupt(at, format!("unexpected fragment type {kind}"))),
            }
        }
    }

    fn corrupt(&self, at: usize, detail: String) -> Error {
        Error::corruption(&self.path, at as u64, detail)
    }
}
