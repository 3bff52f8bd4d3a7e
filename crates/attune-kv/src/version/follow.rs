//! Following a manifest another process is appending to (a secondary instance, `db/secondary.rs`).
//!
//! Called by the catch-up of a secondary under its own mutex, never on a version set that writes.
//! Invariant: only whole records are applied; a record being written (a torn tail) ends the pass,
//! and the next pass starts at the first byte not applied.

use super::{Version, VersionEdit, VersionSet, DB_FORMAT_VERSION};
use crate::error::{Error, Result};
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
        let mut v = if fresh {
            Version::default()
        } else {
            (*self.current).clone()
        };
        let (mut log_number, mut next_file, mut last_seq) = if fresh {
            (None, None, None)
        } else {
            (
                Some(self.log_number),
                Some(self.next_file_number),
                Some(self.last_sequence),
            )
        };
        let mut blob_files = if fresh {
            Default::default()
        } else {
            self.blob_files.clone()
        };
        let mut compact_pointers = if fresh {
            Default::default()
        } else {
            self.compact_pointers.clone()
        };
        let mut saw_version = !fresh;
        let mut end = start as u64;
        let mut records = 0;
        // A damaged record followed by whole ones is damage (an error); a torn tail is a record
        // the writer has not finished: the loop ends with `end` at the last whole record.
        while let Some((off, rec)) = reader.next_record()? {
            let off = off + start as u64;
            let edit = VersionEdit::decode(&rec)
                .ok_or_else(|| Error::corruption(path, off, "malformed version edit"))?;
            if let Some(fv) = edit.format_version {
                if fv > DB_FORMAT_VERSION || fv == 0 {
                    return Err(Error::UnsupportedVersion {
                        path: self.dir.clone(),
                        found: fv,
                        supported: DB_FORMAT_VERSION,
                    });
                }
                saw_version = true;
            }
            v = v.apply(&edit, path)?;
            log_number = edit.log_number.or(log_number);
            next_file = edit.next_file_number.or(next_file);
            last_seq = edit.last_sequence.or(last_seq);
            apply_blob_changes(&mut blob_files, &edit);
            for (l, k) in edit.compact_pointers {
                compact_pointers[l] = k;
            }
            end = start as u64 + reader.offset();
            records += 1;
        }
        if fresh && end == 0 {
            return Ok(None);
        }
        if records == 0 {
            return Ok(Some((end, 0)));
        }
        if !saw_version {
            return Err(Error::corruption(
                path,
                0,
                "manifest has no format version record",
            ));
        }
        let missing = |f: &str| Error::corruption(path, 0, format!("manifest lacks {f}"));
        self.log_number = log_number.ok_or_else(|| missing("a log number"))?;
        self.next_file_number = next_file.ok_or_else(|| missing("a next file number"))?;
        self.recorded_next_file_number = self.next_file_number;
        self.last_sequence = last_seq.ok_or_else(|| missing("a last sequence"))?;
        self.blob_files = blob_files;
        self.compact_pointers = compact_pointers;
        self.manifest_number = number;
        self.install(v);
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

fn apply_blob_changes(
    blob_files: &mut std::collections::BTreeMap<u64, super::BlobFileMeta>,
    e: &VersionEdit,
) {
    super::apply_blob_edit(blob_files, e);
}
