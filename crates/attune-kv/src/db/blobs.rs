//! The value log's lifecycle inside the database: the active segment, the pre-created spare,
//! sealing full segments and syncing them before the WAL records that point into them.
//!
//! Called with the state mutex held (by the group-commit leader and by flush). Invariant: a WAL
//! record that points into a segment is never durable before the segment bytes it names.

use super::background::QueueHead;
use super::{DbInner, State};
use crate::error::{Error, Result};
use crate::version::VersionEdit;
use crate::vlog::{BlobFile, VlogWriter};
use parking_lot::MutexGuard;
use std::sync::Arc;

impl DbInner {
    /// Makes sure an active value-log segment with room exists, sealing a full
    /// one and recording the switch in the manifest. Called by the group leader.
    /// Seals the active segment and starts the next one; the memtable switch calls this.
    pub(super) fn switch_vlog_at_flush(
        &self,
        st: &mut MutexGuard<'_, State>,
        _head: &QueueHead,
    ) -> Result<()> {
        self.switch_vlog(st, true)
    }

    pub(super) fn ensure_vlog(
        &self,
        st: &mut MutexGuard<'_, State>,
        _head: &QueueHead,
    ) -> Result<()> {
        self.switch_vlog(st, false)
    }

    /// Switches the active segment out when its known garbage is at least `min_ratio` of its
    /// length (and not zero), so that an on-demand collection can reclaim it; the caller then
    /// seals it (`seal_segments`). Returns whether it switched.
    pub(super) fn switch_vlog_with_garbage(
        &self,
        st: &mut MutexGuard<'_, State>,
        _head: &QueueHead,
        min_ratio: f64,
    ) -> Result<bool> {
        let Some((n, len)) = self.vlog.lock().as_ref().map(|w| (w.number, w.len())) else {
            return Ok(false);
        };
        let garbage = st.versions.blob_files.get(&n).map_or(0, |m| {
            super::gc::garbage_estimate(st, n, m.garbage, len.max(m.size))
        });
        if garbage == 0 || (garbage as f64) < min_ratio * len as f64 {
            return Ok(false);
        }
        self.switch_vlog(st, true)?;
        Ok(true)
    }

    /// `ensure_vlog`, or with `force` a switch whether or not the active segment is full.
    fn switch_vlog(&self, st: &mut MutexGuard<'_, State>, force: bool) -> Result<()> {
        let mut vlog = self.vlog.lock();
        let full = force
            || vlog
                .as_ref()
                .is_none_or(|w| w.len() >= self.opts.blob_file_size);
        if !full {
            if self.spare_wanted(vlog.as_ref()) {
                self.work_cv.notify_all(); // the flush thread creates it (under the state lock)
            }
            return Ok(());
        }
        let mut edit = VersionEdit::default();
        if let Some(old) = vlog.take() {
            // Sealed in the background (fsync, then the manifest's seal record); until then
            // every value-log sync covers it, and a crash leaves it unsealed, which recovery
            // seals at its last whole record like the active segment.
            self.vlog_sealing.lock().push(old);
            self.work_cv.notify_all();
        }
        if let Some(w) = self.vlog_spare.lock().take() {
            // Already listed in the manifest and visible to readers.
            *vlog = Some(w);
            return Ok(());
        }
        let n = st.versions.new_file_number();
        let w =
            VlogWriter::create_sized(self.env.as_ref(), &self.dir, n, self.opts.blob_file_size)?;
        self.env.sync_dir(&self.dir)?;
        edit.blob_files_added.push(n);
        st.versions.log_and_apply(edit)?;
        self.add_blob_reader(st, n);
        *vlog = Some(w);
        drop(vlog);
        self.install_super_version(st);
        Ok(())
    }

    /// Makes segment `n` readable (in the next super version installed).
    pub(super) fn add_blob_reader(&self, st: &mut State, n: u64) {
        let mut blobs = (*st.blobs).clone();
        blobs.insert(n, Arc::new(BlobFile::new(self.env.clone(), &self.dir, n)));
        st.blobs = Arc::new(blobs);
    }

    /// Whether the flush thread should create the next segment: the active one is three
    /// quarters full and no spare exists. Takes `vlog_spare`; the caller may hold `vlog`.
    pub(super) fn spare_wanted(&self, active: Option<&VlogWriter>) -> bool {
        active.is_some_and(|w| w.len() >= self.opts.blob_file_size / 4 * 3)
            && self.vlog_spare.lock().is_none()
    }

    /// Creates the next value-log segment ahead of the switch (flush thread): the file and
    /// its directory entry without the state lock, then its manifest record.
    pub(super) fn create_spare_segment(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let n = st.versions.new_file_number();
        let w = MutexGuard::unlocked(st, || {
            let w = VlogWriter::create_sized(
                self.env.as_ref(),
                &self.dir,
                n,
                self.opts.blob_file_size,
            )?;
            self.env.sync_dir(&self.dir)?;
            Ok::<_, Error>(w)
        })?;
        let mut edit = VersionEdit::default();
        edit.blob_files_added.push(n);
        st.versions.log_and_apply(edit)?;
        self.add_blob_reader(st, n);
        self.install_super_version(st);
        *self.vlog_spare.lock() = Some(w);
        Ok(())
    }

    /// At close: an unused spare segment leaves the manifest and the directory (a crash
    /// before this leaves it listed and empty; recovery seals it at its header).
    pub(super) fn drop_spare_segment(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        let Some(w) = self.vlog_spare.lock().take() else {
            return Ok(());
        };
        let n = w.number;
        drop(w);
        let mut edit = VersionEdit::default();
        edit.blob_files_deleted.push(n);
        st.versions.log_and_apply(edit)?;
        let mut blobs = (*st.blobs).clone();
        if let Some(f) = blobs.remove(&n) {
            f.mark_obsolete(); // deleted when the last reader lets go
        }
        st.blobs = Arc::new(blobs);
        self.install_super_version(st);
        Ok(())
    }

    /// Fsyncs the active value-log segment (a no-op when nothing was appended since the last).
    /// The fsync itself runs without the value-log lock, so the group leader keeps appending
    /// meanwhile (an fsync of a second of writes can take 100 ms).
    pub(super) fn sync_vlog(&self) -> Result<()> {
        let pending = match self.vlog.lock().as_mut() {
            Some(v) => v.begin_sync()?.map(|(h, upto)| (h, upto, v.number)),
            None => None,
        };
        if let Some((handle, upto, number)) = pending {
            let r = handle();
            let mut vlog = self.vlog.lock();
            if let Some(v) = vlog.as_mut().filter(|v| v.number == number) {
                v.finish_sync(upto, r.is_ok());
            } else {
                // Switched out while the fsync ran (the switch moves it under the `vlog` lock).
                drop(vlog);
                let mut sealing = self.vlog_sealing.lock();
                if let Some(w) = sealing.iter_mut().find(|w| w.number == number) {
                    w.finish_sync(upto, r.is_ok());
                }
            }
            r?;
        }
        // Segments waiting to be sealed hold values that WAL records name, like the active one.
        // They are synced *after* the active one: a segment switched out while its fsync ran
        // (after this call began) is then still covered; syncing them first would miss it.
        for w in self.vlog_sealing.lock().iter_mut() {
            w.sync()?;
        }
        Ok(())
    }

    /// Seals the segments the leader switched out: fsyncs each (without the state lock), then
    /// records its final length in the manifest, then closes it (which cuts off the space a
    /// mapped segment reserved past its end). Run by the flush thread and at shutdown.
    pub(super) fn seal_segments(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        loop {
            let synced = MutexGuard::unlocked(st, || {
                let mut sealing = self.vlog_sealing.lock();
                match sealing.first_mut() {
                    Some(w) => w.sync().map(|()| Some((w.number, w.len()))),
                    None => Ok(None),
                }
            })?;
            let Some((n, len)) = synced else {
                return Ok(());
            };
            let mut edit = VersionEdit::default();
            edit.blob_files_sealed.push((n, len));
            st.versions.log_and_apply(edit)?;
            let done = {
                let mut sealing = self.vlog_sealing.lock();
                let at = sealing.iter().position(|w| w.number == n);
                at.map(|i| sealing.remove(i))
            };
            MutexGuard::unlocked(st, || drop(done));
        }
    }
}
