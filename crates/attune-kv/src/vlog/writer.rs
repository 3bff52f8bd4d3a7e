//! The active segment: appends records and syncs them (format: `mod.rs`).
//!
//! Owned by the group-commit leader behind the state mutex. Invariant: a failed append or fsync
//! sticks; after it the segment takes no more records.

use super::*;
use crate::env::{Env, WritableFile};
use crate::error::{Error, Result};
use crate::util::filename;
use std::path::Path;

/// The active segment being appended to.
pub struct VlogWriter {
    pub number: u64,
    file: Box<dyn WritableFile>,
    offset: u64,
    buf: Vec<u8>,
    /// Length known durable (nothing to do for a sync below it).
    synced: u64,
    /// A failed append or fsync sticks: after a failed append the tail is unknown, and after a
    /// failed fsync the kernel may have dropped the pages it covered, so a later "successful"
    /// fsync would not bring them back.
    failed: bool,
}

impl VlogWriter {
    /// Creates segment `number` and writes its header (not yet synced).
    pub fn create(env: &dyn Env, dir: &Path, number: u64) -> Result<VlogWriter> {
        Self::create_sized(env, dir, number, 0)
    }

    /// As [`VlogWriter::create`], for a segment expected to reach `expected_bytes` (the
    /// environment may reserve space by that; 0: unknown).
    pub fn create_sized(
        env: &dyn Env,
        dir: &Path,
        number: u64,
        expected_bytes: u64,
    ) -> Result<VlogWriter> {
        let path = filename::blob_path(dir, number);
        let mut file = env.new_log_writable(&path, expected_bytes)?;
        file.append(&segment_header())?;
        file.flush()?;
        Ok(VlogWriter {
            number,
            file,
            offset: SEGMENT_HEADER_BYTES,
            buf: Vec::new(),
            synced: 0,
            failed: false,
        })
    }

    /// Stages a record; it reaches the file at the next [`VlogWriter::flush`].
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> BlobPointer {
        let len = encode_record(&mut self.buf, key, value);
        let p = BlobPointer {
            file: self.number,
            offset: self.offset,
            len: len as u32,
        };
        self.offset += len as u64;
        p
    }

    /// Hands staged records to the OS (readable, and safe from a process crash).
    pub fn flush(&mut self) -> Result<()> {
        self.check_failed()?;
        let r = if self.buf.is_empty() {
            Ok(())
        } else {
            self.file.append(&self.buf)
        };
        if let Err(e) = r.and_then(|()| self.file.flush()) {
            self.failed = true;
            return Err(e);
        }
        self.buf.clear();
        Ok(())
    }

    fn check_failed(&self) -> Result<()> {
        if self.failed {
            return Err(Error::Closed(format!(
                "an earlier write or fsync of value-log segment {:06}.vlog failed; reopen the \
                 database",
                self.number
            )));
        }
        Ok(())
    }

    pub fn sync(&mut self) -> Result<()> {
        self.check_failed()?;
        if self.synced == self.offset {
            return Ok(());
        }
        self.flush()?;
        if let Err(e) = self.file.sync() {
            self.failed = true;
            return Err(e);
        }
        self.synced = self.offset;
        Ok(())
    }

    /// First half of a sync that lets writers go on: hands staged records to the OS and returns
    /// a handle that fsyncs them without this writer's lock, with the length it will cover
    /// (None: nothing to sync, or the file has no such handle and was synced here).
    pub fn begin_sync(&mut self) -> Result<Option<(crate::env::SyncHandle, u64)>> {
        self.check_failed()?;
        if self.synced == self.offset {
            return Ok(None);
        }
        self.flush()?;
        match self.file.sync_handle() {
            Some(h) => Ok(Some((h, self.offset))),
            None => self.sync().map(|()| None),
        }
    }

    /// Second half: records the outcome of the handle's fsync covering `upto` bytes.
    pub fn finish_sync(&mut self, upto: u64, ok: bool) {
        if ok {
            self.synced = self.synced.max(upto);
        } else {
            self.failed = true;
        }
    }

    /// Segment length including staged records.
    pub fn len(&self) -> u64 {
        self.offset
    }

    pub fn is_empty(&self) -> bool {
        self.offset == SEGMENT_HEADER_BYTES
    }
}
