//! Appends records to a log, splitting large ones into fragments (format: `mod.rs`).
//!
//! Thread safety: a `LogWriter` has one owner (the WAL's group-commit leader, or the manifest
//! writer under the state mutex). Invariant: the first failed append or sync sticks, and every
//! later call fails with it: the tail of the file is then unknown.

use super::*;
use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::util::coding::put_fixed32;

/// Appends records to a log file.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    scratch: Vec<u8>,
    /// The first failed append or sync: every later call fails with it. After a failed append
    /// the tail is unknown; after a failed fsync the kernel may have dropped the pages it
    /// covered, and a later "successful" fsync would not bring them back.
    failed: Option<Error>,
}

impl LogWriter {
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        LogWriter {
            file,
            scratch: Vec::new(),
            failed: None,
        }
    }

    /// Appends one record and hands it to the OS (survives a process crash once this returns).
    pub fn add_record(&mut self, record: &[u8]) -> Result<()> {
        let r = self.add_record_inner(record);
        self.remember(r)
    }

    fn remember(&mut self, r: Result<()>) -> Result<()> {
        if let (Err(e), None) = (&r, &self.failed) {
            self.failed = Some(e.duplicate());
        }
        r
    }

    fn add_record_inner(&mut self, record: &[u8]) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(e.duplicate());
        }
        let mut chunks = record.chunks(MAX_FRAGMENT_BYTES).peekable();
        let mut first = true;
        if record.is_empty() {
            self.emit(FULL, &[])?;
        }
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            let kind = match (first, last) {
                (true, true) => FULL,
                (true, false) => FIRST,
                (false, true) => LAST,
                (false, false) => MIDDLE,
            };
            self.emit(kind, chunk)?;
            first = false;
        }
        self.file.flush()
    }

    fn emit(&mut self, kind: u8, payload: &[u8]) -> Result<()> {
        self.scratch.clear();
        put_fixed32(
            &mut self.scratch,
            fragment_crc(payload.len() as u32, kind, payload),
        );
        put_fixed32(&mut self.scratch, payload.len() as u32);
        self.scratch.push(kind);
        self.file.append(&self.scratch)?;
        self.file.append(payload)
    }

    pub fn sync(&mut self) -> Result<()> {
        let r = match &self.failed {
            Some(e) => Err(e.duplicate()),
            None => self.file.sync(),
        };
        self.remember(r)
    }

    pub fn len(&self) -> u64 {
        self.file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }
}
