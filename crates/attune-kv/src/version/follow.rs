//! Following a manifest another process is appending to (a secondary instance, `db/secondary.rs`).
//!
//! Called by the catch-up of a secondary under its own mutex, never on a version set that writes.
//! Invariant: only whole records are applied; a record being written (a torn tail) ends the pass,
//! and the next pass starts at the first byte not applied.

use super::{ManifestReplay, VersionSet};
use crate::error::Result;
use crate::wal::LogReader;
use std::path::Path;

impl VersionSet {
    /// Applies the whole records of the manifest image `data` (file `number`, at `path`) from
    /// byte `from` on, and returns the offset after the last one applied and how many it applied. `from == 0` starts
    /// from an empty state (a manifest read from its start describes everything). Returns
    /// `Ok(None)` when the manifest has no complete first record yet (a writer creating it).
    pub(crate) fn follow_manifest(
        &mut self,
        number: u64,
        path: &Path,
        data: &[u8],
        from: u64,
    ) -> Result<Option<(u64, u64)>> {
        let start = usize::try_from(from).unwrap_or(usize::MAX).min(data.len());
        let mut reader = LogReader::new(&data[start..], path);
        let fresh = from == 0;
        let mut replay = if fresh {
            ManifestReplay::empty()
        } else {
            ManifestReplay::continuing(self)
        };
        let mut end = start as u64;
        let mut records = 0;
        // A damaged record followed by whole ones is damage (an error); a torn tail is a record
        // the writer has not finished: the loop ends with `end` at the last whole record.
        while let Some((off, rec)) = reader.next_record()? {
            replay.apply(&self.dir, path, off + start as u64, &rec)?;
            end = start as u64 + reader.offset();
            records += 1;
        }
        if fresh && end == 0 {
            return Ok(None);
        }
        if records == 0 {
            return Ok(Some((end, 0)));
        }
        replay.finish(self, path)?;
        self.manifest_number = number;
        Ok(Some((end, records)))
    }

    /// Takes over `other`'s state (a secondary's catch-up publishing what it followed).
    pub(crate) fn adopt(&mut self, other: &VersionSet) {
        self.log_number = other.log_number;
        self.next_file_number = other.next_file_number;
        self.recorded_next_file_number = other.recorded_next_file_number;
        self.last_sequence = other.last_sequence;
        self.blob_files = other.blob_files.clone();
        self.compact_pointers = other.compact_pointers.clone();
        self.manifest_number = other.manifest_number;
        self.install((*other.current).clone());
    }
}
