//! Attune's own engine (crate `attune-kv`), linked in directly.
//!
//! Settings applied (and reported): block cache of `cache_bytes`, `write_buffer_size`, compression
//! none/lz4/zstd (Attune does not ship Snappy), `sync` per write; every other key of the engine
//! spec (`attune:key=value;...`) is an `attune.DB` option with the same name (docs/kv.md), e.g.
//! `attune:bloom_bits_per_key=0;block_size=16KiB`. The engine's full effective options land in
//! `settings`. `background_threads` is recorded but Attune always runs one flush and one
//! compaction thread.
//!
//! Learned indexes (docs/learned-index.md): `compact` is `compact_range` over the whole key space,
//! `learn` is `DB::learn_all` (none when `learned_index=off`), and `stats` reports the learned
//! counters after each phase (`learned`, `model_bytes`, `model_bytes_per_level`, ...), so a row
//! says how many lookups the models served and what learning cost.
//!
//! Thread-safety: `attune_kv::DB` is `Send + Sync`; a session is a borrowed handle.

use std::path::Path;

use attune_kv::LearnedIndex;
use attune_kv::{Options, ReadOptions, WriteBatch, WriteOptions, DB};
use serde_json::json;

use crate::engine::{BatchOp, Engine, EngineKind, RecordFn, Session};
use crate::error::{BenchError, Result};
use crate::options::{Compression, Settings};

const NAME: &str = "attune";

/// The registry entry.
pub const KIND: EngineKind = EngineKind {
    name: NAME,
    about: "Attune's LSM engine (attune-kv), linked in; keys are attune.DB option names",
    keys: attune_kv::OPTION_NAMES,
    compressions: &[Compression::None, Compression::Lz4, Compression::Zstd],
    probe,
    open,
};

fn probe() -> Result<()> {
    Ok(())
}

fn engine_error(e: attune_kv::Error) -> BenchError {
    BenchError::Unsupported {
        engine: NAME.to_string(),
        detail: e.to_string(),
    }
}

fn open(dir: &Path, s: &Settings) -> Result<Box<dyn Engine>> {
    let mut o = Options {
        block_cache_size: s.cache_bytes,
        write_buffer_size: s.write_buffer_bytes,
        ..Options::default()
    };
    o.compression = match s.compression {
        Compression::None => attune_kv::Compression::None,
        Compression::Lz4 => attune_kv::Compression::Lz4,
        Compression::Zstd => attune_kv::Compression::Zstd,
        Compression::Snappy => {
            return Err(BenchError::Unsupported {
                engine: NAME.to_string(),
                detail: "compression snappy: Attune offers none, lz4 and zstd".to_string(),
            })
        }
    };
    for (k, v) in &s.extra {
        o.set(k, v)
            .map_err(|e| BenchError::invalid(format!("attune option {k}"), e.to_string()))?;
    }
    let db = DB::open(dir, o).map_err(engine_error)?;
    let mut options = serde_json::Map::new();
    for (k, v) in db.options().describe() {
        options.insert(k.to_string(), json!(v));
    }
    let settings = json!({
        "engine": NAME,
        "version": env!("CARGO_PKG_VERSION"),
        "sync": s.sync,
        "options": options,
        "flush_threads": 1,
        "compaction_threads": 1,
    });
    Ok(Box::new(AttuneEngine {
        db,
        sync: s.sync,
        settings,
    }))
}

struct AttuneEngine {
    db: DB,
    sync: bool,
    settings: serde_json::Value,
}

struct AttuneSession<'a> {
    db: &'a DB,
    wo: WriteOptions,
    ro: ReadOptions,
}

impl Session for AttuneSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.put_opt(key, value, self.wo).map_err(engine_error)
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        value.clear();
        match self.db.get_opt(key, &self.ro).map_err(engine_error)? {
            Some(v) => {
                value.extend_from_slice(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.db.delete_opt(key, self.wo).map_err(engine_error)
    }

    fn write_batch(&mut self, ops: &[BatchOp<'_>]) -> Result<()> {
        let mut b = WriteBatch::new();
        for op in ops {
            match *op {
                BatchOp::Put(k, v) => b.put(k, v),
                BatchOp::Delete(k) => b.delete(k),
            }
            .map_err(engine_error)?;
        }
        self.db.write(b, self.wo).map_err(engine_error)
    }

    fn scan(
        &mut self,
        start: &[u8],
        n: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let mut it = self.db.iter(&self.ro).map_err(engine_error)?;
        if start.is_empty() {
            it.seek_to_first();
        } else {
            it.seek(start);
        }
        let mut seen = 0;
        while seen < n && it.valid() {
            visit(it.key(), it.value());
            seen += 1;
            // A scan of n records stops on the n-th: stepping past it would read one more
            // separated value from the value log.
            if seen < n {
                it.next();
            }
        }
        it.status().map_err(engine_error)?;
        Ok(seen)
    }
}

impl Engine for AttuneEngine {
    fn ingest_sorted(
        &self,
        scratch: &Path,
        records: u64,
        records_per_file: u64,
        record: &mut RecordFn<'_>,
    ) -> Result<bool> {
        let opts = self.db.options();
        let mut paths = Vec::new();
        let (mut k, mut v) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < records {
            let path = scratch.join(format!("ingest-{}.sst", paths.len()));
            let mut w = attune_kv::TableWriter::create(&path, opts).map_err(engine_error)?;
            let end = (i + records_per_file.max(1)).min(records);
            while i < end {
                k.clear();
                v.clear();
                record(i, &mut k, &mut v);
                w.put(&k, &v).map_err(engine_error)?;
                i += 1;
            }
            w.finish().map_err(engine_error)?;
            paths.push(path);
        }
        self.db.ingest(&paths, true).map_err(engine_error)?;
        Ok(true)
    }

    fn session(&self) -> Result<Box<dyn Session + '_>> {
        Ok(Box::new(AttuneSession {
            db: &self.db,
            wo: WriteOptions { sync: self.sync },
            ro: ReadOptions::default(),
        }))
    }

    fn settings(&self) -> serde_json::Value {
        let mut s = self.settings.clone();
        let st = self.db.stats();
        s["write_amp"] = json!(st.write_amplification);
        s["level_files"] = json!(st.level_files);
        if let Some(t) = &st.cache_tiers {
            // The cache budget's split and what the sizing controller saw.
            s["cache_tiers"] = json!({
                "layout": t.layout,
                "sizing": t.sizing,
                "budget_bytes": t.budget_bytes,
                "app_bytes": t.app_bytes,
                "start_app_bytes": t.start_app_bytes,
                "second_extra_bytes": t.second_extra_bytes,
                "h_a": t.h_a,
                "h_k": t.h_k,
                "app_miss_ns": t.app_miss_ns,
                "second_miss_ns": t.second_miss_ns,
                "costs_source": t.costs_source,
                "le_model_ns": t.le_model_ns,
                "le_measured_ns": t.le_measured_ns,
                "le_predicted_ns": t.le_predicted_ns,
                "state": t.state,
                "rounds": t.rounds,
                "adoptions": t.adoptions,
                "reverts": t.reverts,
                "ghost_bytes_peak": t.ghost_bytes_peak,
                "last_round": t.last_round,
                "last_round_measured_le_ns": t.last_round_measured_le_ns,
                "accesses_recorded": t.accesses_recorded,
                "accesses_dropped": t.accesses_dropped,
                "timeline": t.timeline.iter().map(|w| json!({
                    "ms": w.ms,
                    "accesses": w.accesses,
                    "app_bytes": w.app_bytes,
                    "h_a": w.h_a,
                    "h_k": w.h_k,
                    "le_model_ns": w.le_model_ns,
                    "le_measured_ns": if w.le_measured_ns.is_finite() {
                        json!(w.le_measured_ns)
                    } else {
                        json!(null)
                    },
                    "state": w.state,
                })).collect::<Vec<_>>(),
            });
        }
        let h = &st.hot_key_cache;
        if h.capacity_bytes > 0 {
            s["hot_key_cache"] = json!({
                "hits": h.hits,
                "misses": h.misses,
                "bytes": h.bytes,
                "entries": h.entries,
                "admissions": h.admissions,
                "evictions": h.evictions,
                "rejected": h.rejected,
            });
        }
        s
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(engine_error)
    }

    fn compact(&self) -> Result<bool> {
        self.db.compact_range(None, None).map_err(engine_error)?;
        Ok(true)
    }

    fn learn(&self) -> Result<Option<u64>> {
        if self.db.options().learned_index == LearnedIndex::Off {
            return Ok(None);
        }
        self.db.learn_all().map(Some).map_err(engine_error)
    }

    fn stats(&self) -> serde_json::Value {
        let st = self.db.stats();
        let l = &st.learned;
        let share = if l.total_lookups > 0 {
            l.learned_lookups as f64 / l.total_lookups as f64
        } else {
            0.0
        };
        let mut out = json!({
            "learned_mode": l.mode,
            "learned_delta": l.delta,
            "total_lookups": l.total_lookups,
            "learned_lookups": l.learned_lookups,
            "learned_share": share,
            "files_registered": l.files_registered,
            "files_learned": l.files_learned,
            "files_loaded": l.files_loaded,
            "files_skipped": l.files_skipped,
            "files_bootstrap": l.files_bootstrap,
            "files_rejudged": l.files_rejudged,
            "files_breakeven": l.files_breakeven,
            "level_models_learned": l.level_models_learned,
            "files_short_lived": l.files_short_lived,
            "files_unlearnable": l.files_unlearnable,
            "models_rejected": l.models_rejected,
            "analyzer_state_loaded": l.state_loaded,
            "learn_ns_total": l.learn_ns_total,
            "learn_queue_len": l.queue_len,
            "benefit_realized_ns": l.benefit_realized_ns,
            "benefit_predicted_ns": l.benefit_predicted_ns,
            "benefit_predicted_realized_ns": l.benefit_predicted_realized_ns,
            "benefit_calibration": l.benefit_calibration,
            "train_ns_per_record": l.train_ns_per_record,
            "hindsight_files": l.hindsight.files,
            "hindsight_learn_ns": l.hindsight.learn_ns(),
            "hindsight_saved_ns": l.hindsight.saved_ns(),
            "hindsight_frontier": l.hindsight.frontier().iter()
                .map(|p| [p.loss_ns, p.learn_ns]).collect::<Vec<_>>(),
            "analyzer_levels": l.levels.iter().map(|v| json!({
                "level": v.level,
                "retired_files": v.retired_files,
                "lookups_per_file": v.lookups_per_file,
                "baseline_ns": v.baseline_ns,
                "model_ns": v.model_ns,
            })).collect::<Vec<_>>(),
            "model_bytes": st.model_bytes,
            "model_bytes_per_level": st.model_bytes_per_level,
            "model_segments": st.model_segments,
            "files_with_models": st.files_with_models,
            "level_models": st.level_models,
            "level_model_bytes": st.level_model_bytes,
            "fixed_layout_files": st.fixed_layout_files.len(),
            "level_files": st.level_files,
            "live_sst_bytes": st.live_sst_bytes,
            "gets": st.gets,
            "block_cache_hits": st.block_cache.hits,
            "block_cache_misses": st.block_cache.misses,
        });
        // The write side of a phase: what flushes and compactions ran beside it, and how long
        // its writers waited (for room in the memtable or at the level-0 triggers).
        out["flushes"] = json!(st.flushes);
        out["compactions"] = json!(st
            .level_compactions
            .iter()
            .map(|c| c.compactions)
            .sum::<u64>());
        out["compaction_bytes_written"] = json!(st.compaction_bytes_written);
        // Level 0's own counters count intra-L0 merges (`l0_intra_compaction`).
        out["intra_l0_compactions"] =
            json!(st.level_compactions.first().map_or(0, |c| c.compactions));
        out["stall_micros"] = json!(st.stall_micros);
        out["slowdowns"] = json!(st.slowdowns);
        out["files_deferred_io"] = json!(l.files_deferred_io);
        out["deferred_io_bytes"] = json!(l.deferred_io_bytes);
        out["learn_io_ns_per_byte"] = json!(l.io_ns_per_byte);
        // The hot-key cache (`hot_key_cache_bytes`; all zero when it is off): whether it paid
        // for the memory it took from the budget.
        let h = &st.hot_key_cache;
        out["hot_key_cache"] = json!({
            "capacity_bytes": h.capacity_bytes,
            "bytes": h.bytes,
            "entries": h.entries,
            "hits": h.hits,
            "misses": h.misses,
            "admissions": h.admissions,
            "evictions": h.evictions,
            "invalidations": h.invalidations,
        });
        out["value_log"] = json!({
            "bytes": st.blob_bytes,
            "garbage_bytes": st.blob_garbage_bytes,
            "segments": st.blob_files.len(),
            "gc_runs": st.gc_runs,
            "gc_segments_collected": st.gc_segments_collected,
            "gc_bytes_rewritten": st.gc_bytes_rewritten,
            "gc_bytes_reclaimed": st.gc_bytes_reclaimed,
        });
        out
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.db.close().map_err(engine_error)
    }
}
