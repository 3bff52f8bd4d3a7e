//! A segment as readers see it: positioned reads of one record, checked against its CRC and key.
//!
//! Shared (`Arc`) by every reader thread. Invariant: a segment marked obsolete is deleted when the
//! last reader lets go of it, never before.

use super::*;
use crate::env::{Env, RandomAccessFile};
use crate::error::{Error, Result};
use crate::util::filename;
use parking_lot::RwLock;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A segment as readers see it. Reopened when a pointer reaches past what the current handle
/// maps (the active segment grows); deleted on drop once marked obsolete.
pub struct BlobFile {
    pub number: u64,
    path: PathBuf,
    env: Arc<dyn Env>,
    reader: RwLock<Option<Arc<dyn RandomAccessFile>>>,
    obsolete: AtomicBool,
}

impl BlobFile {
    pub fn new(env: Arc<dyn Env>, dir: &Path, number: u64) -> BlobFile {
        BlobFile {
            number,
            path: filename::blob_path(dir, number),
            env,
            reader: RwLock::new(None),
            obsolete: AtomicBool::new(false),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes the file when the last holder drops it.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    fn reader_covering(&self, end: u64) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(r) = self.reader.read().as_ref().filter(|r| r.size() >= end) {
            return Ok(r.clone());
        }
        let mut g = self.reader.write();
        if let Some(r) = g.as_ref().filter(|r| r.size() >= end) {
            return Ok(r.clone());
        }
        if !self.env.exists(&self.path) {
            return Err(Error::corruption(
                &self.path,
                0,
                "a value pointer names this value-log segment, which is missing",
            ));
        }
        let r = self.env.open_random(&self.path)?;
        *g = Some(r.clone());
        Ok(r)
    }

    /// The size of the open handle (None: not open).
    pub fn open_size(&self) -> Option<u64> {
        self.reader.read().as_ref().map(|r| r.size())
    }

    /// Opens the file now, or reopens it when it grew past the open handle: a secondary
    /// instance holds every segment it may read, so that the writer's removal of one cannot
    /// take it away (an open descriptor or map keeps a removed file's bytes).
    pub fn open_now(&self) -> Result<()> {
        let size = self.env.file_size(&self.path)?;
        let mut g = self.reader.write();
        if g.as_ref().is_some_and(|r| r.size() >= size) {
            return Ok(());
        }
        *g = Some(self.env.open_random(&self.path)?);
        Ok(())
    }

    /// Reads the value `p` points at, checking the record's CRC and that it belongs to `key`.
    pub fn read(&self, p: &BlobPointer, key: &[u8]) -> Result<Vec<u8>> {
        let r = self.reader_covering(p.end())?;
        if r.size() < p.end() {
            return Err(Error::corruption(
                &self.path,
                p.offset,
                format!(
                    "value pointer reaches byte {} but the segment has {} bytes",
                    p.end(),
                    r.size()
                ),
            ));
        }
        let mut buf = vec![0u8; p.len as usize];
        r.read_exact_at(&mut buf, p.offset)?;
        let (k, v) =
            decode_record(&buf).map_err(|why| Error::corruption(&self.path, p.offset, why))?;
        if k != key {
            return Err(Error::corruption(
                &self.path,
                p.offset,
                "value-log record belongs to another key (misdirected pointer)",
            ));
        }
        let (start, len) = (RECORD_HEADER_BYTES + k.len(), v.len());
        buf.copy_within(start..start + len, 0);
        buf.truncate(len);
        Ok(buf)
    }

    /// Hints the OS to start reading the record `p` points at.
    pub fn prefetch(&self, p: &BlobPointer) {
        if let Ok(r) = self.reader_covering(p.end()) {
            r.prefetch(p.offset, u64::from(p.len));
        }
    }

    /// Hints the OS to start reading bytes `[offset, offset + len)` (clipped to the file).
    pub fn prefetch_range(&self, offset: u64, len: u64) {
        if let Some(len) = self.prefetchable(offset, len) {
            if let Ok(r) = self.reader_covering(offset.saturating_add(len)) {
                r.prefetch(offset, len);
            }
        }
    }

    /// Whether `[offset, offset + len)` is already in the page cache (None: cannot tell, e.g.
    /// a file read with `pread` or a simulated device).
    pub fn cached(&self, offset: u64, len: u64) -> Option<bool> {
        self.reader_covering(offset.saturating_add(len))
            .ok()?
            .cached(offset, len)
    }

    /// How much of `[offset, offset + len)` lies inside the file (None: nothing).
    pub fn prefetchable(&self, offset: u64, len: u64) -> Option<u64> {
        let size = self.reader_covering(offset.saturating_add(1)).ok()?.size();
        let len = len.min(size.saturating_sub(offset));
        (len > 0).then_some(len)
    }

    /// Reads the whole segment (garbage collection and recovery scans).
    pub fn read_all(&self) -> Result<Vec<u8>> {
        self.env.read_all(&self.path)
    }

    /// Reads a sealed segment's `size` valid bytes (the manifest's length); a shorter file is
    /// corruption.
    pub fn read_sealed(&self, size: u64) -> Result<Vec<u8>> {
        let mut data = self.read_all()?;
        if (data.len() as u64) < size {
            return Err(Error::corruption(
                &self.path,
                data.len() as u64,
                format!(
                    "sealed value-log segment has {} bytes, the manifest says {size}",
                    data.len()
                ),
            ));
        }
        data.truncate(size as usize);
        Ok(data)
    }
}

impl Drop for BlobFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            let _ = self.env.remove_file(&self.path);
        }
    }
}
