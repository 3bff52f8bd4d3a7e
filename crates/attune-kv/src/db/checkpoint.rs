//! Checkpoints: a consistent, openable copy of the database in another directory, made while
//! the database stays open for reads and writes.
//!
//! The memtable is flushed first, so the tables hold every write acknowledged before the call.
//! Then, under the state lock, one manifest edit describing the whole state is taken together
//! with the version and the value-log segments it names; holding them keeps their files from
//! being deleted by a compaction or a collection that finishes meanwhile. Tables and sealed
//! segments never change once written: they are hard-linked (copied when the destination is on
//! another file system). A segment still being appended to is copied up to the length written so
//! far (not the space a mapped segment reserves past it):
//! the copy's tail may end inside a record that was being written, which the checkpoint's first
//! open seals at the last whole record, as after a crash; every record the checkpoint's tables
//! point at was written before the tables were. The manifest and `CURRENT` are written last, so
//! a checkpoint interrupted before its end is a directory that does not open as a database.
//!
//! The checkpoint holds the state as of the flush: writes that land while it is being made are
//! not in it (they may be in the copy of the active segment, unreferenced: garbage to its
//! collector). No WAL is copied. Learned-index models are not copied either; the checkpoint
//! learns its own.

use super::{DbInner, DB};
use crate::env::{create_dir_all_durable, write_file_atomic};
use crate::error::{Error, Result};
use crate::util::filename::{self, current_path, manifest_name};
use crate::wal::LogWriter;
use std::path::Path;

/// Bytes copied per read when a file cannot be linked.
const COPY_CHUNK: usize = 1 << 20;

/// What a checkpoint holds and how it was made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CheckpointReport {
    /// Tables and sealed value-log segments hard-linked.
    pub files_linked: u64,
    /// Files copied (active segments, and everything when links are not possible).
    pub files_copied: u64,
    pub bytes_copied: u64,
    /// Writes up to this sequence are in the checkpoint.
    pub sequence: u64,
}

impl DB {
    /// Writes a consistent copy of the database into `dest`, which must not exist or be an
    /// empty directory; `DB::open(dest, ..)` opens it. Files are hard-linked where possible.
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<CheckpointReport> {
        self.inner.writable("checkpoint")?;
        self.inner.checkpoint(dest.as_ref(), false)
    }

    /// [`DB::checkpoint`] that first seals the value-log segment being appended to (when it
    /// holds records), so that every segment in the checkpoint is final: a later checkpoint
    /// holds the same bytes for it, which incremental backups share instead of copying again.
    pub fn checkpoint_sealed(&self, dest: impl AsRef<Path>) -> Result<CheckpointReport> {
        self.inner.writable("checkpoint")?;
        self.inner.checkpoint(dest.as_ref(), true)
    }
}

impl DbInner {
    fn checkpoint(&self, dest: &Path, seal: bool) -> Result<CheckpointReport> {
        let env = self.env.as_ref();
        if dest.as_os_str().is_empty() {
            return Err(Error::InvalidArgument(
                "checkpoint destination is empty; give the path of a new directory".into(),
            ));
        }
        if env.exists(dest) {
            let names = env.list_dir(dest).map_err(|_| {
                Error::InvalidArgument(format!(
                    "checkpoint destination {} exists and is not a directory",
                    dest.display()
                ))
            })?;
            if !names.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "checkpoint destination {} already exists and is not empty; give a new \
                     directory",
                    dest.display()
                )));
            }
        }
        // The destination, or the nearest parent that exists, resolved: inside the database
        // directory (or the directory itself) is refused.
        let resolved = dest
            .ancestors()
            .find_map(|a| std::fs::canonicalize(a).ok().map(|c| (a, c)))
            .map(|(a, c)| c.join(dest.strip_prefix(a).unwrap_or(Path::new(""))));
        let inside = |d: &Path| d.starts_with(&self.dir);
        let inside_resolved = resolved
            .zip(std::fs::canonicalize(&self.dir).ok())
            .is_some_and(|(d, db)| d.starts_with(db));
        if inside(dest) || inside_resolved {
            return Err(Error::InvalidArgument(format!(
                "checkpoint destination {} is the database directory or inside it; give a \
                 directory outside {}",
                dest.display(),
                self.dir.display()
            )));
        }
        create_dir_all_durable(env, dest)?;
        if seal {
            // At the head of the writer queue: no group is between its value-log append and
            // its memtable insert, so the sealed segment's records all have their pointers.
            self.at_writer_queue_head(&mut self.state.lock(), |st, head| {
                let holds_records = self
                    .vlog
                    .lock()
                    .as_ref()
                    .is_some_and(|w| w.len() > crate::vlog::SEGMENT_HEADER_BYTES);
                if holds_records {
                    self.switch_vlog_at_flush(st, head)?;
                }
                Ok(())
            })?;
        }

        // Value-log collection is held off from the flush to the edit: a collection that
        // finished in between would leave its moves in the memtable, which a checkpoint does
        // not copy, and drop their old segment from the edit while the flushed tables still
        // point into it. One already running is waited for; its moves are then flushed.
        {
            let mut st = self.state.lock();
            while st.gc_running {
                self.done_cv
                    .wait_for(&mut st, std::time::Duration::from_millis(50));
            }
            st.gc_running = true;
        }
        let taken = self.flush().map(|()| {
            // The state to copy, with what keeps its files alive until the copy is done.
            let st = self.state.lock();
            (
                st.versions.snapshot_edit(),
                st.versions.current(),
                st.blobs.clone(),
            )
        });
        {
            let mut st = self.state.lock();
            st.gc_running = false;
            self.done_cv.notify_all();
            self.work_cv.notify_all();
        }
        let (mut edit, _version, _blobs) = taken?;
        // How far each segment still open for appends is written (a mapped segment's file is
        // longer: space reserved ahead, zeros). Read after the edit, so every record the
        // checkpoint's tables point at is within it.
        //
        // A segment sealed since the edit has left the writers' lists, and dropping its writer
        // cuts its reserved zeros off: copying up to the file size seen by a map made just
        // before that cut would fault (SIGBUS) on the pages past the new end. Its length then
        // comes from the version, where the seal is recorded before the writer is let go; both
        // are read under the state lock, which the seal holds while it logs.
        let mut written: std::collections::HashMap<u64, u64> = Default::default();
        {
            let st = self.state.lock();
            for w in self.vlog.lock().iter() {
                written.insert(w.number, w.len());
            }
            for w in self.vlog_sealing.lock().iter() {
                written.insert(w.number, w.len());
            }
            for w in self.vlog_spare.lock().iter() {
                written.insert(w.number, w.len());
            }
            for n in &edit.blob_files_added {
                if let Some(m) = st.versions.blob_files.get(n).filter(|m| m.sealed) {
                    written.entry(*n).or_insert(m.size);
                }
            }
        }
        let mut report = CheckpointReport {
            sequence: edit.last_sequence.unwrap_or(0),
            ..Default::default()
        };
        for (_, f) in &edit.new_files {
            let (from, to) = (
                filename::table_path(&self.dir, f.number),
                filename::table_path(dest, f.number),
            );
            self.link_or_copy(&from, &to, &mut report)?;
        }
        for n in &edit.blob_files_added {
            let (from, to) = (
                filename::blob_path(&self.dir, *n),
                filename::blob_path(dest, *n),
            );
            if edit.blob_files_sealed.iter().any(|(s, _)| s == n) {
                self.link_or_copy(&from, &to, &mut report)?;
            } else {
                self.copy_file(&from, &to, written.get(n).copied(), &mut report)?;
            }
        }
        // The manifest takes the next file number, so nothing in the checkpoint shares it.
        let number = edit.next_file_number.unwrap_or(2);
        edit.next_file_number = Some(number + 1);
        let mut w = LogWriter::new(env.new_writable(&dest.join(manifest_name(number)))?);
        w.add_record(&edit.encode())?;
        w.sync()?;
        drop(w);
        write_file_atomic(
            env,
            &current_path(dest),
            format!("{}\n", manifest_name(number)).as_bytes(),
        )?;
        env.sync_dir(dest)?;
        Ok(report)
    }

    fn link_or_copy(&self, from: &Path, to: &Path, report: &mut CheckpointReport) -> Result<()> {
        if self.env.link_file(from, to)? {
            report.files_linked += 1;
            Ok(())
        } else {
            self.copy_file(from, to, None, report)
        }
    }

    /// Copies `from` to `to`, at most `limit` bytes of it when given (also bulk ingest's copy).
    pub(super) fn copy_file(
        &self,
        from: &Path,
        to: &Path,
        limit: Option<u64>,
        report: &mut CheckpointReport,
    ) -> Result<()> {
        let src = self.env.open_random(from)?;
        let size = limit.map_or(src.size(), |l| l.min(src.size()));
        let mut out = self.env.new_writable(to)?;
        let mut buf = vec![0u8; COPY_CHUNK.min(size as usize).max(1)];
        let mut at = 0u64;
        while at < size {
            let n = ((size - at) as usize).min(buf.len());
            src.read_exact_at(&mut buf[..n], at)?;
            out.append(&buf[..n])?;
            at += n as u64;
        }
        out.sync()?;
        report.files_copied += 1;
        report.bytes_copied += size;
        Ok(())
    }
}
