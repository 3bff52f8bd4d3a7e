//! Walks the records of a segment image from its start (recovery, verify and garbage collection).
//!
//! Called on the thread that opens, verifies or collects; it reads only the bytes it is given.
//! Invariant: the walk stops at the end of the valid prefix and never yields a record whose
//! checksum fails.

use super::*;
use crate::error::{Error, Result};
use std::path::Path;

/// Walks the records of a segment image from the start. Stops at the end of the valid prefix:
/// a torn or damaged tail ends the walk (`valid_len` then tells where); it is the caller's call
/// whether that is corruption (a sealed segment) or a crash's torn tail (the active one).
pub struct SegmentScanner<'a> {
    data: &'a [u8],
    pos: usize,
    /// Why the walk stopped early, if it did.
    pub stop_reason: Option<&'static str>,
}

impl<'a> SegmentScanner<'a> {
    pub fn new(path: &Path, data: &'a [u8]) -> Result<Self> {
        check_segment_header(path, data)?;
        Ok(SegmentScanner {
            data,
            pos: SEGMENT_HEADER_BYTES as usize,
            stop_reason: None,
        })
    }

    /// Offset just past the last good record returned.
    pub fn valid_len(&self) -> u64 {
        self.pos as u64
    }

    /// After the walk over a sealed segment: corruption unless every byte was a good record.
    pub fn check_complete(&self, path: &Path) -> Result<()> {
        if self.pos == self.data.len() {
            return Ok(());
        }
        Err(Error::corruption(
            path,
            self.valid_len(),
            format!(
                "sealed value-log segment is damaged: {}",
                self.stop_reason.unwrap_or("damaged record")
            ),
        ))
    }
}

impl<'a> Iterator for SegmentScanner<'a> {
    /// (pointer offset, record length, key, value)
    type Item = (u64, u32, &'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.data[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let Some((_, _, total)) = header_lengths(rest) else {
            self.stop_reason = Some("truncated or oversized record header");
            return None;
        };
        if total > rest.len() as u64 {
            self.stop_reason = Some("record extends past the end of the segment");
            return None;
        }
        let rec = &rest[..total as usize];
        match decode_record(rec) {
            Ok((k, v)) => {
                let off = self.pos as u64;
                self.pos += total as usize;
                Some((off, total as u32, k, v))
            }
            Err(why) => {
                self.stop_reason = Some(why);
                None
            }
        }
    }
}

/// Whether the bytes at `at` (where a scan stopped) are a damaged record *followed by a valid
/// one*: damage in the middle of the log, which recovery must report, rather than a tail torn by
/// a crash, which recovery cuts off (the same distinction the WAL reader makes).
pub fn damaged_in_middle(data: &[u8], at: u64) -> bool {
    let Some(rest) = data.get(at as usize..) else {
        return false;
    };
    let Some((_, _, total)) = header_lengths(rest) else {
        return false;
    };
    record_at(data, at + total)
}

/// Whether a whole, valid record starts at `at`.
pub fn record_at(data: &[u8], at: u64) -> bool {
    let Some(rest) = data.get(at as usize..) else {
        return false;
    };
    match header_lengths(rest) {
        Some((_, _, n)) if n <= rest.len() as u64 => decode_record(&rest[..n as usize]).is_ok(),
        _ => false,
    }
}
