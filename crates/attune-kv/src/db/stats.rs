//! The public statistics types (`Stats`, per-level compaction counters, value-log segment
//! sizes, the verify report) and their assembly from the engine's counters.
//!
//! `DB::stats` may be called from any thread at any time; it reads counters and takes the state
//! mutex briefly. The numbers are a consistent-enough snapshot, not a transaction.

use super::DbInner;
use crate::cache::hotkeys::{HotKeyCache, HotKeyStats};
use crate::cache::CacheStats;
use crate::index::learned::LearnStats;
use crate::version::NUM_LEVELS;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

#[derive(Default, Clone, Copy, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LevelCompactionStats {
    pub compactions: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub trivial_moves: u64,
    /// Compactions that rewrote tables of this level because their earliest expiring entry had
    /// passed (`expiry_compaction_interval_ms`), with no level over its size.
    pub expiry_compactions: u64,
}

/// Bytes of one value-log segment by status, for stats.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BlobFileStats {
    pub number: u64,
    pub size: u64,
    pub garbage: u64,
    pub sealed: bool,
}

/// What [`DB::verify`] checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct VerifyReport {
    /// Live table files, and the entries in them (every version and tombstone).
    pub tables: u64,
    pub table_entries: u64,
    /// Value-log segments, and the records in them (live or not).
    pub blob_segments: u64,
    pub blob_records: u64,
}

/// Engine statistics (see `docs/kv.md` for each field).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    pub last_sequence: u64,
    pub level_files: Vec<usize>,
    pub level_bytes: Vec<u64>,
    pub level_compactions: Vec<LevelCompactionStats>,
    pub memtable_bytes: u64,
    pub immutable_memtable: bool,
    pub flushes: u64,
    pub flush_bytes_written: u64,
    pub compaction_bytes_read: u64,
    pub compaction_bytes_written: u64,
    pub user_bytes_written: u64,
    pub wal_bytes_written: u64,
    pub wal_syncs: u64,
    pub writes: u64,
    pub write_groups: u64,
    pub write_amplification: f64,
    pub stall_micros: u64,
    pub slowdowns: u64,
    pub gets: u64,
    pub gets_found: u64,
    pub block_cache: CacheStats,
    /// The cache budget's split and the sizing controller (None without `memory_budget`).
    pub cache_tiers: Option<crate::cache::sizing::CacheTierStats>,
    pub live_sst_bytes: u64,
    pub num_snapshots: usize,
    pub table_pinned_bytes: u64,
    /// Value-log segments (size 0 = the active one, whose length is `blob_active_bytes`).
    pub blob_files: Vec<BlobFileStats>,
    /// Bytes of all value-log segments.
    pub blob_bytes: u64,
    /// Bytes known to be garbage and not yet collected: found by compaction, or by a flush
    /// whose newer versions shadow them.
    pub blob_garbage_bytes: u64,
    /// `blob_bytes - blob_garbage_bytes`.
    pub blob_live_bytes: u64,
    /// `blob_bytes / blob_live_bytes` (1.0 without a value log).
    pub blob_space_amp: f64,
    /// Value bytes appended to the value log by writes (garbage collection included).
    pub blob_bytes_written: u64,
    pub blob_reads: u64,
    pub blob_prefetches: u64,
    /// Merge operands point reads combined (`get`, `multi_get`): what compaction saves by
    /// folding operands into values.
    pub merge_operands_read: u64,
    /// `prefetcher = tinfetch`'s hints and block prefetches (zero for the other settings).
    pub prefetch: super::prefetch::PrefetchStats,
    pub gc_runs: u64,
    pub gc_segments_collected: u64,
    pub gc_records_rewritten: u64,
    pub gc_bytes_rewritten: u64,
    pub gc_bytes_reclaimed: u64,
    /// Longest time one garbage-collection write held the writer queue.
    pub gc_max_pause_micros: u64,
    /// Table files whose records all have one size and sit uncompressed (key + pointer), so a
    /// record's position gives its byte offset.
    pub fixed_layout_files: Vec<u64>,
    /// Learned indexes (docs/learned-index.md): counters of the analyzer and the lookup paths
    /// (`mode` is "off" and the rest zero when they are off).
    pub learned: LearnStats,
    /// Bytes of the live tables' models per level.
    pub model_bytes_per_level: Vec<u64>,
    /// Bytes of all live tables' models.
    pub model_bytes: u64,
    /// Segments of all live tables' models.
    pub model_segments: u64,
    /// Live tables that have a model.
    pub files_with_models: u64,
    /// Levels that have a level model (option `learned_level`), and those models' bytes (not
    /// included in `model_bytes`, which counts the tables' models).
    pub level_models: u64,
    pub level_model_bytes: u64,
    /// Hot-key cache counters (all zero when `hot_key_cache_bytes` is 0).
    pub hot_key_cache: HotKeyStats,
}

impl DbInner {
    pub(super) fn stats(&self) -> Stats {
        // Table readers may have to be opened (file I/O): do it before taking the state mutex.
        let v = self.sv.read().version.clone();
        let mut pinned = 0u64;
        let mut fixed_layout_files = Vec::new();
        let mut model_bytes_per_level = vec![0u64; NUM_LEVELS];
        let (mut model_segments, mut files_with_models) = (0u64, 0u64);
        for (level, files) in v.files.iter().enumerate() {
            for f in files {
                if let Ok(t) = self.tables.get(f.number) {
                    pinned += t.pinned_bytes() as u64;
                    if t.properties().fixed_layout() {
                        fixed_layout_files.push(f.number);
                    }
                    if let Some(m) = t.model() {
                        model_bytes_per_level[level] += m.bytes() as u64;
                        model_segments += m.index.model().segment_count() as u64;
                        files_with_models += 1;
                    }
                }
            }
        }
        let (mut level_models, mut level_model_bytes) = (0u64, 0u64);
        for m in v.level_models.iter().filter_map(|s| s.get()) {
            level_models += 1;
            level_model_bytes += m.bytes() as u64;
        }
        let learned = self.tables.learning().map_or_else(
            || LearnStats {
                mode: "off".into(),
                ..LearnStats::default()
            },
            |l| l.stats(),
        );
        let mut open_lens: HashMap<u64, u64> = self
            .vlog_sealing
            .lock()
            .iter()
            .map(|w| (w.number, w.len()))
            .collect();
        if let Some(w) = self.vlog.lock().as_ref() {
            open_lens.insert(w.number, w.len());
        }
        if let Some(w) = self.vlog_spare.lock().as_ref() {
            open_lens.insert(w.number, w.len()); // its file is reserved space, not records
        }
        let st = self.state.lock();
        let c = &self.counters;
        let user = c.user_bytes_written.load(Ordering::Relaxed);
        let comp_w: u64 = st.level_stats.iter().map(|s| s.bytes_written).sum();
        let comp_r: u64 = st.level_stats.iter().map(|s| s.bytes_read).sum();
        let blob_files: Vec<BlobFileStats> = st
            .versions
            .blob_files
            .iter()
            .map(|(n, m)| {
                // An unsealed segment no writer holds (a read-only open, or one a crash left
                // for the next writable open to seal) counts at its file's length.
                let size = open_lens.get(n).copied().unwrap_or_else(|| {
                    if m.sealed {
                        m.size
                    } else {
                        self.env
                            .file_size(&crate::util::filename::blob_path(&self.dir, *n))
                            .unwrap_or(m.size)
                    }
                });
                BlobFileStats {
                    number: *n,
                    size,
                    garbage: super::gc::garbage_estimate(&st, *n, m.garbage, size),
                    sealed: m.sealed,
                }
            })
            .collect();
        let blob_bytes: u64 = blob_files.iter().map(|b| b.size).sum();
        let blob_garbage: u64 = blob_files.iter().map(|b| b.garbage.min(b.size)).sum();
        let blob_written = c.blob_bytes_written.load(Ordering::Relaxed);
        Stats {
            last_sequence: self.last_sequence.load(Ordering::Acquire),
            level_files: v.files.iter().map(Vec::len).collect(),
            level_bytes: (0..NUM_LEVELS).map(|l| v.level_bytes(l)).collect(),
            level_compactions: st.level_stats.to_vec(),
            memtable_bytes: st.mem.approximate_memory_usage() as u64
                + st.imm
                    .as_ref()
                    .map_or(0, |m| m.approximate_memory_usage() as u64),
            immutable_memtable: st.imm.is_some(),
            flushes: st.flush_count,
            flush_bytes_written: st.flush_bytes,
            compaction_bytes_read: comp_r,
            compaction_bytes_written: comp_w,
            user_bytes_written: user,
            wal_bytes_written: c.wal_bytes.load(Ordering::Relaxed),
            wal_syncs: c.wal_syncs.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            write_groups: c.write_groups.load(Ordering::Relaxed),
            write_amplification: if user == 0 {
                0.0
            } else {
                (st.flush_bytes + comp_w + blob_written) as f64 / user as f64
            },
            stall_micros: c.stall_micros.load(Ordering::Relaxed),
            slowdowns: c.slowdowns.load(Ordering::Relaxed),
            gets: c.gets.load(Ordering::Relaxed),
            gets_found: c.gets_found.load(Ordering::Relaxed),
            block_cache: self.cache.stats(),
            cache_tiers: self.cache_sizing.as_ref().map(|c| c.stats()),
            live_sst_bytes: (0..NUM_LEVELS).map(|l| v.level_bytes(l)).sum(),
            num_snapshots: st.snapshots.values().sum(),
            table_pinned_bytes: pinned,
            blob_bytes,
            blob_garbage_bytes: blob_garbage,
            blob_live_bytes: blob_bytes - blob_garbage,
            blob_space_amp: if blob_bytes == blob_garbage {
                1.0
            } else {
                blob_bytes as f64 / (blob_bytes - blob_garbage) as f64
            },
            blob_files,
            blob_bytes_written: blob_written,
            blob_reads: c.blob_reads.load(Ordering::Relaxed),
            blob_prefetches: c.blob_prefetches.load(Ordering::Relaxed),
            merge_operands_read: c.merge_operands_read.load(Ordering::Relaxed),
            prefetch: self
                .prefetch
                .as_ref()
                .map(|p| p.stats())
                .unwrap_or_default(),
            gc_runs: st.gc.runs,
            gc_segments_collected: st.gc.segments,
            gc_records_rewritten: st.gc.records_rewritten,
            gc_bytes_rewritten: st.gc.bytes_rewritten,
            gc_bytes_reclaimed: st.gc.bytes_reclaimed,
            gc_max_pause_micros: st.gc.max_pause_micros,
            fixed_layout_files,
            learned,
            model_bytes: model_bytes_per_level.iter().sum(),
            model_bytes_per_level,
            model_segments,
            files_with_models,
            level_models,
            level_model_bytes,
            hot_key_cache: self
                .hot
                .as_ref()
                .map(HotKeyCache::stats)
                .unwrap_or_default(),
        }
    }
}
