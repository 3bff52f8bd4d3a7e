//! The background threads: flush (immutable memtable to a level-0 table), compaction, the
//! periodic WAL sync and the learning thread, and the removal of obsolete files.
//!
//! Each loop runs on its own thread, started by open and joined by `close`; they take the state
//! mutex for decisions and release it for I/O. Invariant: a file is removed only when no live
//! version, snapshot or pending output names it.

use super::open::write_level0;
use super::{DbInner, PendingWrite, State};
use crate::error::{Error, Result};
use crate::util::filename::{self, FileKind};
use crate::version::compaction::{self, Compaction};
use crate::version::{VersionEdit, NUM_LEVELS};
use parking_lot::MutexGuard;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often the learning thread asks the analyzer for due files. Default 10 ms: a fifth of
/// T_wait, so a file is learned at most 10 ms after its wait ends; an idle poll costs microseconds.
pub(super) const LEARN_POLL: Duration = Duration::from_millis(10);

/// Proof that its holder is at the head of the writer queue: no write group is then between
/// appending its values to the value log and putting their pointers in the memtable. Made only
/// by checking the queue (the group leader, `at_writer_queue_head`); whatever switches the
/// active value-log segment asks for one, because value-log collection takes a record that no
/// memtable or table points at for dead, and a segment switched out beside a group in flight
/// could be collected before that group's pointers land.
pub(super) struct QueueHead(());

impl QueueHead {
    /// The proof for the writer `id`, if its entry is at the head of the queue.
    pub(super) fn taken(st: &State, id: u64) -> Option<QueueHead> {
        (st.writers.front().map(|w| w.id) == Some(id)).then_some(QueueHead(()))
    }
}

impl DbInner {
    /// The learning thread (Bourbon's learner): every few milliseconds asks the analyzer which
    /// files are due and learns them, lowest priority, never holding the state mutex.
    pub(super) fn learn_loop(&self) {
        let Some(learning) = self.tables.learning().cloned() else {
            return;
        };
        let stop = || self.shutting_down.load(Ordering::Acquire);
        let open = |n: u64| -> Result<Arc<crate::table::Table>> {
            if let Some(t) = self.tables.get_if_open(n) {
                return Ok(t);
            }
            // Holding a version that lists the file keeps it from being deleted while it opens.
            let v = self.sv.read().version.clone();
            if !v.files.iter().flatten().any(|f| f.number == n) {
                return Err(Error::InvalidArgument(format!("table {n} is gone")));
            }
            self.tables.get(n)
        };
        // Level models are learned online only where the learner learns on its own (not in
        // `offline` mode, where `learn_all` does).
        let online_levels = self.opts.learned_level
            && self.opts.learned_index != crate::options::LearnedIndex::Offline;
        let wait_ns = self.opts.learned_wait_ms.saturating_mul(1_000_000);
        let mut levels = crate::version::learn::LevelWatch::default();
        while !stop() {
            std::thread::sleep(LEARN_POLL);
            learning.learn_round(self.env.as_ref(), &self.dir, &open, &stop);
            if !online_levels {
                continue;
            }
            // The version held here keeps the level's files from being deleted meanwhile.
            let v = self.sv.read().version.clone();
            for level in levels.due(&v, learning.now_ns(), wait_ns) {
                if stop() {
                    break;
                }
                let tables = v.files[level].iter().map(|f| self.tables.get(f.number));
                let Ok(tables) = tables.collect::<Result<Vec<_>>>() else {
                    continue;
                };
                let (env, dir) = (self.env.as_ref(), &self.dir);
                if let Ok(true) =
                    crate::version::learn::learn_level(env, dir, &v, level, &tables, learning.delta)
                {
                    learning.level_learned();
                }
            }
        }
    }

    pub(super) fn flush(&self) -> Result<()> {
        let mut st = self.switch_memtable()?;
        while (st.imm.is_some() || st.removals_running > 0)
            && st.bg_error.is_none()
            && !self.shutting_down.load(Ordering::Acquire)
        {
            self.done_cv.wait_for(&mut st, Duration::from_millis(100));
        }
        match &st.bg_error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    /// Switches the memtable out for the flush thread (waiting only while a previous one is
    /// still being flushed) and returns without waiting for this flush.
    pub(super) fn switch_memtable(&self) -> Result<MutexGuard<'_, State>> {
        let mut st = self.state.lock();
        self.at_writer_queue_head(&mut st, |st, head| self.make_room_for_write(st, head, true))?;
        Ok(st)
    }

    /// Runs `f` holding the head of the writer queue (no write group is in flight meanwhile),
    /// unless a background error stopped writes.
    pub(super) fn at_writer_queue_head<T>(
        &self,
        st: &mut MutexGuard<'_, State>,
        f: impl FnOnce(&mut MutexGuard<'_, State>, &QueueHead) -> Result<T>,
    ) -> Result<T> {
        let id = st.next_writer_id;
        st.next_writer_id += 1;
        st.writers.push_back(PendingWrite {
            id,
            batch: None,
            sync: false,
            gc: None,
            check: None,
        });
        let head = loop {
            if let Some(head) = QueueHead::taken(st, id) {
                break head;
            }
            self.write_cv.wait(st);
        };
        let r = match &st.bg_error {
            Some(e) => Err(e.duplicate()),
            None => f(st, &head),
        };
        st.writers.pop_front();
        self.write_cv.notify_all();
        r
    }

    pub(super) fn smallest_snapshot(&self, st: &State) -> u64 {
        st.snapshots
            .keys()
            .next()
            .copied()
            .unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire))
    }

    pub(super) fn flush_loop(&self) {
        let mut st = self.state.lock();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            let seal = !self.vlog_sealing.lock().is_empty();
            let spare = !seal && self.spare_wanted(self.vlog.lock().as_ref());
            if st.bg_error.is_none() && (seal || spare) {
                // A failed fsync leaves the segment's durability unknown, and a failed manifest
                // write its contents: stop writing, as the leader would.
                let r = if seal {
                    self.seal_segments(&mut st)
                } else {
                    self.create_spare_segment(&mut st)
                };
                if let Err(e) = r {
                    if !self.shutting_down.load(Ordering::Acquire) && st.bg_error.is_none() {
                        st.bg_error = Some(e);
                    }
                }
                continue;
            }
            let Some(imm) = st.imm.clone().filter(|_| st.bg_error.is_none()) else {
                self.work_cv.wait(&mut st);
                continue;
            };
            let number = st.versions.new_file_number();
            st.pending_outputs.insert(number);
            let smallest_snapshot = self.smallest_snapshot(&st);
            let mut garbage = BTreeMap::new();
            let mut shadowed = BTreeMap::new();
            // The tables before this flush, to find what the flushed entries shadow; only
            // when collection is on and some segment exists to hold garbage.
            let base = (self.opts.blob_gc_space_amp > 0.0 && !st.versions.blob_files.is_empty())
                .then(|| st.versions.current());
            let r = MutexGuard::unlocked(&mut st, || {
                if let Some(base) = &base {
                    shadowed = self.shadowed_by_flush(base, &imm)?;
                }
                self.sync_imm_wal()?;
                // The table makes pointers durable: the values they name must be durable first.
                self.sync_vlog()?;
                let f = write_level0(
                    self.env.as_ref(),
                    &self.dir,
                    &self.opts,
                    number,
                    imm.clone(),
                    smallest_snapshot,
                    &mut garbage,
                )?;
                self.env.sync_dir(&self.dir)?;
                Ok::<_, Error>(f)
            });
            let r = r.and_then(|f| {
                let mut edit = VersionEdit::default();
                let within: u64 = garbage.values().sum();
                edit.blob_garbage.extend(garbage);
                let bytes = f.as_ref().map_or(0, |f| f.size);
                if let Some(f) = f {
                    edit.add_file(0, f);
                }
                if imm.range_dels().is_some() {
                    edit.format_version = Some(crate::version::DB_FORMAT_VERSION);
                }
                edit.log_number = Some(st.mem.log_number);
                // Exactly what the tables now hold, not the database's last sequence: writes
                // already in the new log must not be counted, or recovery could not tell that
                // the log before a later one lost every record (see `recover_logs`).
                edit.last_sequence = Some(st.imm_last_sequence.max(st.versions.last_sequence));
                st.versions.log_and_apply(edit)?;
                st.flush_count += 1;
                st.flush_bytes += bytes;
                if base.is_some() {
                    // Older versions in the tables, and within the memtable itself.
                    let found: u64 = shadowed.values().sum::<u64>() + within;
                    st.shadow_share = (found as f64 / imm.blob_bytes().max(1) as f64).min(1.0);
                }
                for (n, b) in shadowed {
                    if st.versions.blob_files.contains_key(&n) {
                        *st.blob_shadowed.entry(n).or_default() += b;
                    }
                }
                Ok(())
            });
            if r.is_ok() {
                // On error keep the table: a failed manifest sync may still have written the
                // edit naming it, so only reopening may decide that it is garbage.
                st.pending_outputs.remove(&number);
            }
            match r {
                Ok(()) => {
                    st.imm = None;
                    self.install_super_version(&st);
                    let doomed = self.take_obsolete_files(&mut st);
                    if !st.blob_pending_deletion.is_empty()
                        && !self.shutting_down.load(Ordering::Acquire)
                    {
                        // Segments whose moves this flush put into a table; a failure leaves
                        // them listed for the next collection.
                        let _ = self.finalize_blob_deletions(&mut st);
                    }
                    // Writers waiting for room go on now, while the flushed log is removed.
                    self.done_cv.notify_all();
                    self.remove_files_unlocked(&mut st, doomed);
                }
                Err(e) => {
                    if !self.shutting_down.load(Ordering::Acquire) && st.bg_error.is_none() {
                        st.bg_error = Some(e);
                    }
                }
            }
            self.done_cv.notify_all();
            self.work_cv.notify_all();
        }
    }

    pub(super) fn compaction_loop(&self) {
        let mut st = self.state.lock();
        // When the last expiry check ran (`Env::now_micros`; 0: never).
        let mut last_expiry_check = 0u64;
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            if st.bg_error.is_some() || st.compaction_running {
                self.work_cv.wait(&mut st);
                continue;
            }
            // An intra-L0 merge is safe only while no flush or ingest holds a file number that
            // could still land in level 0 (see `compaction`'s module documentation).
            let intra_l0_safe = st.imm.is_none() && st.pending_outputs.is_empty();
            let picked = compaction::pick(
                &st.versions.current(),
                &self.opts,
                &st.versions.compact_pointers,
                intra_l0_safe,
            );
            let interval = self.opts.expiry_compaction_interval_ms;
            let Some(c) = picked else {
                if interval == 0 || self.opts.read_only {
                    self.work_cv.wait(&mut st);
                    continue;
                }
                // At most one expiry check per interval, however often the thread is woken.
                let since = self.env.now_micros().saturating_sub(last_expiry_check) / 1000;
                if last_expiry_check != 0 && since < interval {
                    self.work_cv
                        .wait_for(&mut st, Duration::from_millis(interval - since));
                    continue;
                }
                last_expiry_check = self.env.now_micros().max(1);
                let due = self.env.now_unix_millis();
                let r = match self.pick_expired(&mut st, due) {
                    Ok(Some(c)) => {
                        let level = c.level;
                        let r = self.run_compaction(&mut st, c);
                        if r.is_ok() {
                            st.level_stats[level].expiry_compactions += 1;
                        }
                        r
                    }
                    Ok(None) => {
                        st.compaction_running = false;
                        self.done_cv.notify_all();
                        // The check ran with the mutex released: a shutdown that notified
                        // meanwhile must not wait out the interval.
                        if self.shutting_down.load(Ordering::Acquire) {
                            return;
                        }
                        self.work_cv
                            .wait_for(&mut st, Duration::from_millis(interval));
                        continue;
                    }
                    Err(e) => Err(e),
                };
                st.compaction_running = false;
                if let Err(e) = r {
                    if !self.shutting_down.load(Ordering::Acquire) && st.bg_error.is_none() {
                        st.bg_error = Some(e);
                    }
                }
                self.done_cv.notify_all();
                self.work_cv.notify_all();
                continue;
            };
            st.compaction_running = true;
            let r = self.run_compaction(&mut st, c);
            st.compaction_running = false;
            if let Err(e) = r {
                if !self.shutting_down.load(Ordering::Acquire) && st.bg_error.is_none() {
                    st.bg_error = Some(e);
                }
            }
            self.done_cv.notify_all();
            self.work_cv.notify_all();
        }
    }

    /// Runs one compaction; called with `compaction_running` set by the caller.
    pub(super) fn run_compaction(
        &self,
        st: &mut MutexGuard<'_, State>,
        c: Compaction,
    ) -> Result<()> {
        let level = c.level;
        let mut edit = VersionEdit::default();
        if let Some(last) = c.inputs[0]
            .iter()
            .map(|f| f.largest.clone())
            .max_by(|a, b| crate::key::compare_internal(a, b))
        {
            edit.compact_pointers.push((level, last));
        }
        if c.trivial_move {
            let f = &c.inputs[0][0];
            edit.delete_file(level, f.number);
            edit.add_file(level + 1, (**f).clone());
            st.versions.log_and_apply(edit)?;
            st.level_stats[level + 1].trivial_moves += 1;
            drop(c);
            self.install_super_version(st);
            return Ok(());
        }
        let smallest_snapshot = self.smallest_snapshot(st);
        // The segments the inputs can point at: every live one (collection never deletes a
        // segment a table still names).
        let blobs = st.blobs.clone();
        // Entries above every snapshot may be filtered (a snapshot keeps its view).
        let filter_above = st.snapshots.keys().next_back().copied().unwrap_or(0);
        let mut allocated: Vec<u64> = Vec::new();
        // An intra-L0 output is numbered now, under the mutex held since it was picked: every
        // L0 file flushed or ingested from here on gets a larger number and so reads as newer.
        let mut reserved = None;
        if c.intra_l0() {
            let n = st.versions.new_file_number();
            st.pending_outputs.insert(n);
            allocated.push(n);
            reserved = Some(n);
        }
        let out = MutexGuard::unlocked(st, || {
            let mut new_file = || {
                if let Some(n) = reserved.take() {
                    return n;
                }
                debug_assert!(!c.intra_l0(), "an intra-L0 merge writes one file");
                let mut s = self.state.lock();
                let n = s.versions.new_file_number();
                s.pending_outputs.insert(n);
                allocated.push(n);
                n
            };
            // With `finish_compaction_on_close` a close lets this compaction run to its end
            // (its output is installed below); otherwise it stops at the next check.
            let finish = self.opts.finish_compaction_on_close;
            let shutting = || !finish && self.shutting_down.load(Ordering::Acquire);
            let read_blob =
                |p: &crate::vlog::BlobPointer, key: &[u8]| self.read_blob(&blobs, key, p);
            let r = compaction::run(
                &c,
                self.env.as_ref(),
                &self.dir,
                &self.opts,
                &self.tables,
                &self.bulk,
                smallest_snapshot,
                &mut new_file,
                &shutting,
                &read_blob,
                filter_above,
            );
            if r.is_ok() {
                self.env.sync_dir(&self.dir)?;
            }
            r
        });
        let r = out.and_then(|out| {
            for (which, files) in c.inputs.iter().enumerate() {
                for f in files {
                    edit.delete_file(level + which, f.number);
                }
            }
            for f in &out.files {
                edit.add_file(c.output_level(), f.clone());
            }
            edit.blob_garbage
                .extend(out.blob_garbage.iter().map(|(n, b)| (*n, *b)));
            st.versions.log_and_apply(edit)?;
            let s = &mut st.level_stats[c.output_level()];
            s.compactions += 1;
            s.bytes_read += out.bytes_read;
            s.bytes_written += out.bytes_written;
            Ok(())
        });
        if r.is_ok() {
            // On error keep the outputs (see flush_loop): the edit may be in the manifest.
            for n in allocated {
                st.pending_outputs.remove(&n);
            }
        }
        // The compaction pins its input version; release it so its files can be deleted now.
        drop(c);
        self.install_super_version(st);
        let doomed = self.take_obsolete_files(st);
        // Writers may need the mutex while the inputs are unlinked (see take_obsolete_files).
        self.done_cv.notify_all();
        self.remove_files_unlocked(st, doomed);
        r
    }

    pub(super) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let mut st = self.state.lock();
        // Find the deepest level with overlapping data; compact each level into the next.
        let v = st.versions.current();
        let deepest = (0..NUM_LEVELS)
            .rev()
            .find(|&l| !v.overlapping(l, begin, end).is_empty());
        drop(v); // do not pin this version (and its files) while compacting
        let Some(deepest) = deepest else {
            return Ok(());
        };
        for level in 0..deepest.max(1) {
            while st.compaction_running {
                self.done_cv.wait_for(&mut st, Duration::from_millis(100));
            }
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            let v = st.versions.current();
            let mut first = v.overlapping(level, begin, end);
            if first.is_empty() {
                continue;
            }
            if level == 0 {
                // L0 files overlap each other: leaving an older one behind while its newer
                // neighbour moves down would let the older version shadow the newer one.
                first = v.files[0].clone();
            }
            let c = compaction::with_overlap(&v, level, first);
            drop(v);
            st.compaction_running = true;
            let r = self.run_compaction(&mut st, c);
            st.compaction_running = false;
            self.work_cv.notify_all();
            self.done_cv.notify_all();
            r?;
        }
        // Files of the deepest level holding entries already expired are rewritten where they
        // are: nothing below them would ever merge those entries away.
        while st.compaction_running {
            self.done_cv.wait_for(&mut st, Duration::from_millis(100));
        }
        if let Some(e) = &st.bg_error {
            return Err(e.duplicate());
        }
        let v = st.versions.current();
        let now = self.env.now_unix_millis();
        let deepest = (1..NUM_LEVELS)
            .rev()
            .find(|&l| !v.overlapping(l, begin, end).is_empty());
        let Some(level) = deepest else {
            return Ok(());
        };
        // Held while the tables are opened unlocked: no other compaction changes `v`'s files.
        st.compaction_running = true;
        let files = v.overlapping(level, begin, end);
        let expired = MutexGuard::unlocked(&mut st, || -> Result<Vec<_>> {
            let mut out = Vec::new();
            let mut ranges = false;
            for f in &files {
                let p = self.tables.get(f.number)?.properties().clone();
                ranges |= p.num_range_deletions > 0;
                if p.earliest_expiry != 0 && p.earliest_expiry <= now {
                    out.push(f.clone());
                }
            }
            // Range tombstones there too: the rewrite drops the keys they cover and then
            // them, so the whole range is rewritten.
            Ok(if ranges { files } else { out })
        });
        let r = match expired {
            Ok(expired) if !expired.is_empty() => {
                let c = compaction::in_place(&v, level, expired);
                drop(v);
                self.run_compaction(&mut st, c)
            }
            other => other.map(|_| ()),
        };
        st.compaction_running = false;
        self.work_cv.notify_all();
        self.done_cv.notify_all();
        r
    }

    /// Expiry-driven compaction: the tables of the shallowest level (1 and below) whose earliest
    /// expiring entry is at or before `now`, as one compaction that rewrites them where they
    /// are (their entries become tombstones, or vanish where a deletion would). Level 0 is left
    /// to the file-count trigger: rewriting an L0 file would reorder it among newer ones.
    /// Returns with `compaction_running` set when it found work (the caller runs and clears
    /// it); the tables are opened with the state mutex released while it is set, so no other
    /// compaction changes the version meanwhile.
    fn pick_expired(&self, st: &mut MutexGuard<'_, State>, now: u64) -> Result<Option<Compaction>> {
        let v = st.versions.current();
        if v.files[1..].iter().all(|fs| fs.is_empty()) {
            return Ok(None);
        }
        st.compaction_running = true;
        let found = MutexGuard::unlocked(st, || -> Result<Option<(usize, Vec<_>)>> {
            for level in 1..NUM_LEVELS {
                let mut out = Vec::new();
                for f in &v.files[level] {
                    if self.shutting_down.load(Ordering::Acquire) {
                        return Ok(None);
                    }
                    let e = self.tables.table_of(f)?.properties().earliest_expiry;
                    if e != 0 && e <= now {
                        out.push(f.clone());
                    }
                }
                if !out.is_empty() {
                    return Ok(Some((level, out)));
                }
            }
            Ok(None)
        });
        match found {
            Ok(Some((level, files))) => Ok(Some(compaction::in_place(&v, level, files))),
            Ok(None) => {
                st.compaction_running = false;
                Ok(None)
            }
            Err(e) => {
                st.compaction_running = false;
                Err(e)
            }
        }
    }

    pub(super) fn wal_sync_loop(&self) {
        let interval = Duration::from_millis(self.opts.wal_sync_interval_ms);
        let mut st = self.state.lock();
        loop {
            // Checked before waiting too: a shutdown that notified while this thread was syncing
            // (not waiting) would otherwise make `close` wait out a whole interval.
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            self.done_cv.wait_for(&mut st, interval);
            if self.shutting_down.load(Ordering::Acquire) {
                return;
            }
            let r = MutexGuard::unlocked(&mut st, || self.sync_logs());
            // A failed fsync may have dropped the pages it covered (Linux marks them clean), so
            // no later fsync can make those writes durable: stop accepting writes.
            if let Err(e) = r {
                if !self.shutting_down.load(Ordering::Acquire) && st.bg_error.is_none() {
                    st.bg_error = Some(e);
                }
            }
        }
    }

    pub(super) fn delete_obsolete_files(&self, st: &mut MutexGuard<'_, State>) {
        let doomed = self.take_obsolete_files(st);
        self.remove_files(&doomed);
    }

    /// The obsolete logs, tables, models and manifests, decided under the mutex, for the
    /// caller to remove after releasing it (temporary files are removed at once: their names
    /// are reused, so only the mutex keeps a new one safe). Unlinking a 64 MiB log or table is
    /// not free (the file system frees its blocks, and with online discard trims them, tens
    /// of milliseconds on the benchmark machine), and every writer needs this mutex; the
    /// numbers of the files returned are never reused, so removing them later is safe.
    pub(super) fn take_obsolete_files(&self, st: &mut MutexGuard<'_, State>) -> Vec<PathBuf> {
        let live = st.versions.live_files();
        self.files_not_in(st, &live)
    }

    /// Removes `doomed` with the mutex released, counted in `removals_running` meanwhile.
    pub(super) fn remove_files_unlocked(
        &self,
        st: &mut MutexGuard<'_, State>,
        doomed: Vec<PathBuf>,
    ) {
        if doomed.is_empty() {
            return;
        }
        st.removals_running += 1;
        MutexGuard::unlocked(st, || self.remove_files(&doomed));
        st.removals_running -= 1;
    }

    fn remove_files(&self, doomed: &[PathBuf]) {
        for path in doomed {
            // A file already gone (another thread's removal, or a crash's) is no error.
            let _ = self.env.remove_file(path);
        }
    }

    /// At close: the tables of older versions go too, although snapshots and iterators may
    /// still hold those versions, because from now on they fail with `Closed` before any read
    /// (a read already past that check keeps its open file). A copy of a closed database then
    /// carries no dead files.
    pub(super) fn delete_files_dead_at_close(&self, st: &mut MutexGuard<'_, State>) {
        let live = st.versions.current().file_numbers();
        let doomed = self.files_not_in(st, &live);
        self.remove_files(&doomed);
    }

    fn files_not_in(&self, st: &mut MutexGuard<'_, State>, live: &HashSet<u64>) -> Vec<PathBuf> {
        let mut doomed = Vec::new();
        let Ok(names) = self.env.list_dir(&self.dir) else {
            return doomed;
        };
        let log_keep = st.imm.as_ref().map_or(st.versions.log_number, |m| {
            m.log_number.min(st.versions.log_number)
        });
        for name in names {
            let Some(kind) = filename::parse(&name) else {
                continue;
            };
            let delete = match kind {
                FileKind::Log(n) => n < log_keep && n < st.mem.log_number,
                FileKind::Table(n) | FileKind::Model(n) => {
                    !live.contains(&n) && !st.pending_outputs.contains(&n)
                }
                FileKind::Manifest(n) => n < st.versions.manifest_number,
                FileKind::Temp => true,
                // Checked against the level's files when loaded; a stale one is removed then.
                FileKind::LevelModel(_) => false,
                // Segments leave through garbage collection only (deleted when their last
                // reader lets go); at open, unlisted ones are removed.
                FileKind::Blob(_) => false,
                FileKind::Current | FileKind::Lock => false,
                // Removed by the open that recovered what it names.
                FileKind::CleanClose => false,
            };
            if !delete {
                continue;
            }
            if let FileKind::Table(n) = kind {
                self.tables.evict(n);
            }
            if kind == FileKind::Temp {
                let _ = self.env.remove_file(&self.dir.join(&name));
            } else {
                doomed.push(self.dir.join(&name));
            }
        }
        doomed
    }
}
