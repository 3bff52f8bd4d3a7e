//! The write path: the writer queue, group commit (one leader appends the group to the WAL and
//! inserts it into the memtable with the state mutex released), and the memtable switch.
//!
//! Called from any user thread through `DB::write` and from garbage collection (moves). The
//! leader is the only thread writing the WAL at a time. Invariants: a sync write is fsynced
//! before it is acknowledged and never joins a group led by a non-sync write; a failed WAL write
//! makes every later write fail until the database is reopened.

use super::background::QueueHead;
use super::{DbInner, GcEntry, PendingWrite, Precondition, State};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::{split_expiry, ValueKind, EXPIRY_BYTES};
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::util::filename::{self};
use crate::version::VersionEdit;
use crate::wal::LogWriter;
use parking_lot::MutexGuard;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Largest group-commit batch in bytes: 1 MiB, LevelDB's choice; a small leading write only waits
/// for 128 KiB more so that small writes keep low latency.
pub(super) const GROUP_BYTES_MAX: usize = 1 << 20;
pub(super) const GROUP_SMALL_LEAD_EXTRA: usize = 128 << 10;

impl DbInner {
    pub(super) fn write(&self, batch: WriteBatch, wo: WriteOptions) -> Result<()> {
        self.writable("a write")?;
        self.check_merges(&batch)?;
        self.write_inner(batch, wo.sync, None, None)
    }

    /// Checks a batch's merge operands against the database's operator, before anything is
    /// written: without an operator, or with an operand it does not take, the whole batch is
    /// refused.
    pub(super) fn check_merges(&self, batch: &WriteBatch) -> Result<()> {
        if !batch.has_merges() {
            return Ok(());
        }
        let Some(op) = &self.opts.merge_operator else {
            return Err(Error::InvalidArgument(
                "merge: this database has no merge_operator; open it with one (add, append, \
                 append:<delimiter>, max, or a Rust MergeOperator)"
                    .into(),
            ));
        };
        for (kind, _, v) in batch.iter().flatten() {
            if kind == ValueKind::Merge {
                op.check_operand(v)?;
            }
        }
        Ok(())
    }

    /// Queues `batch` and writes it in a group. A garbage-collection move (`gc`) or a
    /// conditional write (`check`) leads a group of its own: what it checks must not change
    /// between the check and its write, and no write is in flight while the leader works.
    pub(super) fn write_inner(
        &self,
        batch: WriteBatch,
        sync: bool,
        gc: Option<Vec<GcEntry>>,
        check: Option<Precondition>,
    ) -> Result<()> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(Error::Closed("database is closed".into()));
        }
        let mut st = self.state.lock();
        let id = st.next_writer_id;
        st.next_writer_id += 1;
        st.writers.push_back(PendingWrite {
            id,
            batch: Some(batch),
            sync,
            gc,
            check,
        });
        let head = loop {
            if let Some(r) = st.finished.remove(&id) {
                return r;
            }
            if let Some(head) = QueueHead::taken(&st, id) {
                break head;
            }
            self.write_cv.wait(&mut st);
        };
        // This thread leads a group.
        let room = self.make_room_for_write(&mut st, &head, false);
        if let Err(e) = room {
            st.writers.pop_front();
            self.write_cv.notify_all();
            return Err(e);
        }
        let gc = st.writers.front_mut().and_then(|w| w.gc.take());
        let check = st.writers.front_mut().and_then(|w| w.check.take());
        let started = self.env.now_micros();
        let (group, mut batch, sync) = if gc.is_some() || check.is_some() {
            let lead = st
                .writers
                .front_mut()
                .map(|w| (w.id, w.batch.take(), w.sync));
            let (lid, b, s) = lead.unwrap_or((id, None, false));
            (vec![lid], b.unwrap_or_default(), s)
        } else {
            build_group(&mut st.writers)
        };
        let mut refused = None;
        if let Some(entries) = &gc {
            // Nothing else writes now: whatever still points at the old records is exactly
            // what must move.
            let sv = self.sv.read().clone();
            match MutexGuard::unlocked(&mut st, || self.gc_batch(&sv, entries)) {
                Ok(b) => batch = b,
                Err(e) => refused = Some(e),
            }
        }
        if let Some(c) = &check {
            // As for a move: this thread leads and no other write is in flight, so what the
            // check reads stays true until the batch is in the memtable.
            let sv = self.sv.read().clone();
            if let Err(e) = MutexGuard::unlocked(&mut st, || self.check_precondition(&sv, c)) {
                refused = Some(e);
            }
        }
        let min_blob = self.opts.min_blob_size as usize;
        let separate = self.opts.enable_blob_files
            && batch.iter().any(|i| {
                matches!(i, Some((ValueKind::Value, _, v)) if v.len() >= min_blob)
                    || matches!(i, Some((ValueKind::ExpiringValue, _, v))
                        if v.len() >= min_blob + EXPIRY_BYTES)
            });
        let mut fatal = false;
        let mut result = match refused {
            Some(e) => Err(e),
            None if separate => {
                // A failed segment switch (file, directory or manifest I/O) is fatal like any
                // failed log write: the database then refuses writes until it is reopened.
                let r = self.ensure_vlog(&mut st, &head);
                fatal = r.is_err();
                r
            }
            None => Ok(()),
        };
        let count = batch.len() as u64;
        let first_seq = self.last_sequence.load(Ordering::Acquire) + 1;
        batch.set_sequence(first_seq);
        if result.is_ok() {
            let mem = st.mem.clone();
            let r = MutexGuard::unlocked(&mut st, || {
                self.write_group(&batch, first_seq, sync, &mem, separate, gc.is_some())
            });
            if let Err((e, f)) = r {
                result = Err(e);
                fatal = f;
            }
        }
        match &result {
            Ok(()) => {
                if count > 0 {
                    self.last_sequence
                        .store(first_seq + count - 1, Ordering::Release);
                }
            }
            Err(e) => {
                if fatal && st.bg_error.is_none() {
                    st.bg_error = Some(e.duplicate());
                }
            }
        }
        if gc.is_some() {
            let pause = self.env.now_micros().saturating_sub(started);
            st.gc.max_pause_micros = st.gc.max_pause_micros.max(pause);
        }
        for gid in &group {
            if *gid != id {
                let r = match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                };
                st.finished.insert(*gid, r);
            }
        }
        for _ in 0..group.len() {
            st.writers.pop_front();
        }
        self.write_cv.notify_all();
        result
    }

    /// Fsyncs the previous WAL if it is still pending.
    pub(super) fn sync_imm_wal(&self) -> Result<()> {
        let mut g = self.imm_wal.lock();
        if let Some(w) = g.as_mut() {
            // The values its records point at must be durable before the records are.
            self.sync_vlog()?;
            w.sync()?;
            self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
        }
        *g = None;
        Ok(())
    }

    /// Writes one group: large values to the value log, then the WAL record, then the memtable.
    /// An error carries whether it is fatal: after a failed append or fsync of the WAL or the
    /// value log the tail is unknown and the database refuses writes until it is reopened; a
    /// malformed batch is not fatal.
    pub(super) fn write_group(
        &self,
        batch: &WriteBatch,
        first_seq: u64,
        sync: bool,
        mem: &MemTable,
        separate: bool,
        is_gc: bool,
    ) -> std::result::Result<(), (Error, bool)> {
        if sync {
            // A failed fsync leaves durability unknown: like the WAL's, it is fatal.
            self.sync_vlog().map_err(|e| (e, true))?;
            self.sync_imm_wal().map_err(|e| (e, true))?;
        }
        // Key and value bytes the user asked to store, counted in the pass that already walks
        // the original batch (a collection's moves are not user writes).
        let mut user_bytes = 0u64;
        let separated;
        let mut blob_bytes = 0u64;
        let batch = if separate {
            let min_blob = self.opts.min_blob_size as usize;
            let mut vlog = self.vlog.lock();
            let w = vlog
                .as_mut()
                .ok_or_else(|| (Error::Closed("no value log".into()), false))?;
            let mut out = WriteBatch::new();
            for item in batch.iter() {
                let (kind, k, v) =
                    item.ok_or_else(|| (Error::InvalidArgument("malformed batch".into()), false))?;
                user_bytes += (k.len() + v.len()) as u64;
                match kind {
                    ValueKind::Value if v.len() >= min_blob => {
                        let p = w.add(k, v);
                        blob_bytes += u64::from(p.len);
                        out.put_blob_index(k, &p.encode());
                    }
                    ValueKind::Value => out.put(k, v).map_err(|e| (e, false))?,
                    ValueKind::Deletion => out.delete(k).map_err(|e| (e, false))?,
                    // Operands stay inline: a read combines them without value-log reads.
                    ValueKind::Merge => out.merge(k, v).map_err(|e| (e, false))?,
                    ValueKind::RangeDeletion => out.delete_range(k, v).map_err(|e| (e, false))?,
                    ValueKind::BlobIndex => out.put_blob_index(k, v),
                    ValueKind::ExpiringValue | ValueKind::ExpiringBlobIndex => {
                        // The batch iterator checked the prefix.
                        let (at, payload) = split_expiry(kind, v).unwrap_or((Some(0), v));
                        let at = at.unwrap_or(0);
                        if kind == ValueKind::ExpiringValue && payload.len() >= min_blob {
                            let p = w.add(k, payload);
                            blob_bytes += u64::from(p.len);
                            out.put_blob_index_expiring(k, &p.encode(), at);
                        } else if kind == ValueKind::ExpiringValue {
                            out.put_with_expiry(k, payload, at)
                                .map_err(|e| (e, false))?;
                        } else {
                            out.put_blob_index_expiring(k, payload, at);
                        }
                    }
                }
            }
            // A failed append leaves the segment's tail unknown: fatal, like a failed WAL append
            // (the WAL never saw this group; reopening seals the segment at its last whole
            // record).
            w.flush().map_err(|e| (e, true))?;
            if sync {
                w.sync().map_err(|e| (e, true))?;
            }
            out.set_sequence(first_seq);
            separated = out;
            &separated
        } else {
            batch
        };
        {
            let mut wal = self.wal.lock();
            let w = wal
                .as_mut()
                .ok_or_else(|| (Error::Closed("no WAL".into()), true))?;
            w.add_record(batch.encoded()).map_err(|e| (e, true))?;
            if sync {
                w.sync().map_err(|e| (e, true))?;
                self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        for (seq, item) in (first_seq..).zip(batch.iter()) {
            let (kind, k, v) =
                item.ok_or_else(|| (Error::InvalidArgument("malformed batch".into()), true))?;
            mem.add(seq, kind, k, v);
            if let Some(h) = &self.hot {
                // Before the group's sequence is published (write_inner), so no reader that
                // can see this write finds the old value cached.
                if kind == ValueKind::RangeDeletion {
                    h.invalidate_range(k, v, seq);
                } else {
                    h.invalidate(k, seq);
                }
            }
            if !separate {
                user_bytes += (k.len() + v.len()) as u64;
            }
        }
        if is_gc {
            user_bytes = 0;
        }
        let c = &self.counters;
        c.wal_bytes
            .fetch_add(batch.approximate_size() as u64 + 9, Ordering::Relaxed);
        c.user_bytes_written
            .fetch_add(user_bytes, Ordering::Relaxed);
        c.blob_bytes_written
            .fetch_add(blob_bytes, Ordering::Relaxed);
        mem.add_blob_bytes(blob_bytes as usize);
        c.writes.fetch_add(batch.len() as u64, Ordering::Relaxed);
        c.write_groups.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Ensures the memtable has room, switching to a new one (and WAL) or stalling as needed.
    pub(super) fn make_room_for_write(
        &self,
        st: &mut MutexGuard<'_, State>,
        head: &QueueHead,
        mut force: bool,
    ) -> Result<()> {
        let mut allow_delay = !force;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.duplicate());
            }
            if self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Closed("database is closed".into()));
            }
            let l0 = st.versions.current().files[0].len();
            // One estimate of the value log for both of its checks below.
            let vlog = (self.opts.enable_blob_files && !force).then(|| self.vlog_estimate(st));
            let gc_debt = allow_delay && vlog.is_some_and(|est| self.gc_debt(st, est));
            if gc_debt {
                self.work_cv.notify_all(); // the collector may be waiting for its next poll
            }
            if allow_delay && (l0 >= self.opts.l0_slowdown_writes_trigger || gc_debt) {
                // Spread the pain: delay each write by 1 ms rather than stopping for seconds
                // (for too many level-0 files, or for a value log past its space limit).
                let t = self.env.now_micros();
                MutexGuard::unlocked(st, || std::thread::sleep(Duration::from_millis(1)));
                self.counters.slowdowns.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .stall_micros
                    .fetch_add(self.env.now_micros() - t, Ordering::Relaxed);
                allow_delay = false;
                continue;
            }
            // Values sent to the value log count too, as they would in a memtable that kept
            // them (RocksDB's integrated BlobDB): a flush is what tells the value log which of
            // its records are dead, so flushing only on the pointers' memory would let an
            // overwrite-heavy workload grow the log for hundreds of MiB before any garbage is
            // known.
            let full = st.mem.written_bytes() as u64 >= self.opts.write_buffer_size;
            // An early flush for the value log's sake never makes a writer wait.
            let early = !force
                && !full
                && self.opts.enable_blob_files
                && st.imm.is_none()
                && l0 < self.opts.l0_slowdown_writes_trigger
                && vlog.is_some_and(|est| self.garbage_flush_due(st, est));
            if !force && !full && !early {
                return Ok(());
            }
            if st.imm.is_some() || l0 >= self.opts.l0_stop_writes_trigger {
                let t = self.env.now_micros();
                self.work_cv.notify_all();
                self.done_cv.wait_for(st, Duration::from_millis(100));
                self.counters
                    .stall_micros
                    .fetch_add(self.env.now_micros() - t, Ordering::Relaxed);
                continue;
            }
            if st.mem.is_empty() && force {
                return Ok(());
            }
            // Start a new value-log segment with the new memtable once the active one holds
            // half a memtable's worth (RocksDB writes blob files per flush): a sealed segment's
            // garbage is collectable, the active segment's is not.
            if self.opts.enable_blob_files {
                let roll = self.opts.blob_file_size.min(self.opts.write_buffer_size) / 2;
                let active = self.vlog.lock().as_ref().map_or(0, |w| w.len());
                // An early flush seals its values' segment too, so that their garbage, once
                // found, is collectable.
                if active >= roll.max(1) || (early && active > 0) {
                    self.switch_vlog_at_flush(st, head)?;
                }
            }
            // Switch to a new memtable and WAL. Its number was reserved before the manifest's
            // last record (the flush of the previous memtable), which accounts for it; should
            // none have been written since, record one first: recovery replays no log the
            // manifest does not account for.
            let n = st.versions.new_log_number();
            if !st.versions.accounts_for(n) {
                st.versions.log_and_apply(VersionEdit::default())?;
            }
            let f = self.env.new_log_writable(
                &filename::log_path(&self.dir, n),
                self.opts.write_buffer_size,
            )?;
            self.env.sync_dir(&self.dir)?;
            {
                let mut wal = self.wal.lock();
                // The old log's records are all in the memtable being flushed. The flush thread
                // fsyncs it (keeping sync=false writes within the promised interval) so that this
                // writer does not wait for it.
                let old = wal.replace(LogWriter::new(f));
                let mut imm_wal = self.imm_wal.lock();
                if imm_wal.is_some() {
                    // Cannot happen: a switch waits until the previous memtable is flushed,
                    // and the flush syncs its log first.
                    drop(imm_wal);
                    self.sync_imm_wal()?;
                    imm_wal = self.imm_wal.lock();
                }
                *imm_wal = old;
            }
            let old = std::mem::replace(&mut st.mem, Arc::new(MemTable::new(n)));
            st.imm = Some(old);
            // The leader holds the state lock and no group is in flight: every sequence up to
            // here is in `old` (or in tables), none in the new log.
            st.imm_last_sequence = self.last_sequence.load(Ordering::Acquire);
            self.install_super_version(st);
            self.work_cv.notify_all();
            force = false;
        }
    }

    /// Fsyncs the value log and then the WAL (and a pending previous WAL).
    pub(super) fn sync_logs(&self) -> Result<()> {
        // The current log first, then the previous one: a memtable switch between the two
        // turns the log just synced into the previous one, which is synced next (or was by the
        // flush). The other order could sync the previous log, see a switch, and sync only the
        // new log, leaving the writes of the one switched out unsynced — and garbage
        // collection relies on this call covering every write made before it.
        self.sync_vlog()?;
        if let Some(w) = self.wal.lock().as_mut() {
            w.sync()?;
            self.counters.wal_syncs.fetch_add(1, Ordering::Relaxed);
        }
        self.sync_imm_wal()
    }
}

/// Takes the writers at the head of the queue that fit in one group. A sync write never joins a
/// group led by a non-sync write (its durability would be weakened).
pub(super) fn build_group(writers: &mut VecDeque<PendingWrite>) -> (Vec<u64>, WriteBatch, bool) {
    let mut ids = Vec::new();
    let mut merged = WriteBatch::new();
    let Some(lead) = writers.front_mut() else {
        return (ids, merged, false);
    };
    let sync = lead.sync;
    let lead_batch = lead.batch.take().unwrap_or_default();
    let first = lead_batch.approximate_size();
    let max = if first <= GROUP_SMALL_LEAD_EXTRA {
        first + GROUP_SMALL_LEAD_EXTRA
    } else {
        GROUP_BYTES_MAX
    };
    ids.push(lead.id);
    let joinable = writers.get(1).is_some_and(|w| {
        w.batch.is_some() && w.gc.is_none() && w.check.is_none() && (sync || !w.sync)
    });
    if !joinable {
        // Alone: write the leader's batch as it is, without a copy.
        return (ids, lead_batch, sync);
    }
    merged.append(&lead_batch);
    let mut size = first;
    for w in writers.iter_mut().skip(1) {
        if (w.sync && !sync) || w.gc.is_some() || w.check.is_some() {
            break;
        }
        let Some(b) = w.batch.as_ref() else { break };
        if size + b.approximate_size() > max {
            break;
        }
        size += b.approximate_size();
        merged.append(b);
        w.batch = None;
        ids.push(w.id);
    }
    (ids, merged, sync)
}
