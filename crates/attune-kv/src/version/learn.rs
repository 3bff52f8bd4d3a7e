//! Learning tables and levels: training models over a table's keys (attune-learn's Greedy-PLR
//! after the order-preserving key mapping), installing them in tables, persisting them, and
//! loading the persisted ones at open. The models and the analyzer's state live in
//! `crate::index::learned`, below the tables; this module is above both tables and versions
//! because training reads tables and level models describe a version's levels.
//!
//! Called by the learning thread (`learn_round`), by `DB::learn_all`, by the table cache when a
//! table opens (`load_persisted`) and by open (`load_level_models`). Invariant: a model file is a
//! cache; a damaged or stale one is removed and relearned, never trusted.

use crate::env::Env;
use crate::error::{Error, Result};
use crate::index::learned::{read_file, Learning, LevelModel};
use crate::key;
use crate::table::Table;
use crate::util::filename;
use crate::version::{Version, NUM_LEVELS};
use attune_learn::{FileStats, KeyMapper, LearnedIndex};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bytes a training must read from the device for its time to measure the price per byte.
/// Default 1 MiB: a few hundred device reads, enough that scheduling noise is a small share.
pub const IO_MEASURE_MIN_BYTES: u64 = 1 << 20;

/// Weight of a new measurement in the running mean of the price per byte. Default 1/4: the
/// price follows the device and the memory pressure of the last few cold trainings.
pub const IO_MEASURE_WEIGHT: f64 = 0.25;

impl Learning {
    /// Loads the persisted model of `table` if there is a valid one. A damaged or mismatched
    /// model file is removed (it will be relearned).
    pub fn load_persisted(&self, env: &dyn Env, dir: &Path, table: &Table) {
        let path = filename::model_path(dir, table.number());
        if !env.exists(&path) {
            return;
        }
        let ok = read_model(env, &path)
            .ok()
            .and_then(|m| table.install_model(m).ok())
            .unwrap_or(false);
        if ok {
            if let Some(fs) = self.file_stats(table.number()) {
                self.analyzer.mark_loaded(&fs);
            }
        } else {
            self.rejected.fetch_add(1, Ordering::Relaxed);
            let _ = env.remove_file(&path);
        }
    }

    /// One round of the learning thread: polls the analyzer and learns the chosen files whose
    /// tables `open_table` yields, until the queue is empty or `stop()` says so.
    pub fn learn_round(
        &self,
        env: &dyn Env,
        dir: &Path,
        open_table: &dyn Fn(u64) -> Result<Arc<Table>>,
        stop: &dyn Fn() -> bool,
    ) {
        self.analyzer.poll(self.now_ns());
        while !stop() {
            let Some(fs) = self.analyzer.next_to_learn() else {
                return;
            };
            let Ok(table) = open_table(fs.id()) else {
                continue; // deleted meanwhile: nothing to learn
            };
            if table.model().is_some() {
                if !fs.is_learned() {
                    self.analyzer.mark_loaded(&fs);
                }
                continue;
            }
            if !self.admit_io(&table, &fs) {
                continue; // its blocks are on the device: break-even decides (or nothing)
            }
            let _ = self.learn_table(env, dir, &table, Some(&fs));
        }
    }

    /// Whether a training pass over `table` may read what it would read from the device (the
    /// table's bytes not in the OS page cache, priced at the measured
    /// [`Learning::io_ns_per_byte`]); see [`attune_learn::Analyzer::admit_io`]. Analyzer mode
    /// only (`always` learns every table, whatever it costs) and only with `learned_io_cost`
    /// on; a file that cannot tell its residency is admitted.
    fn admit_io(&self, table: &Table, fs: &Arc<FileStats>) -> bool {
        if self.mode != crate::options::LearnedIndex::Analyzer || !self.io_cost {
            return true;
        }
        let Some((size, resident)) = table.residency() else {
            return true;
        };
        let missing = size.saturating_sub(resident);
        let io_ns = missing as f64 * self.io_ns_per_byte();
        self.analyzer.admit_io(fs, io_ns, missing)
    }

    /// The current price of a byte a training reads from the device, in ns.
    pub fn io_ns_per_byte(&self) -> f64 {
        f64::from_bits(self.io_ns_per_byte.load(Ordering::Relaxed))
    }

    /// Folds one training's measurement into the price per byte: `wall_ns` and `cpu_ns` it
    /// took, `missing` bytes it read from the device (starting price:
    /// [`crate::index::learned::LEARN_IO_NS_PER_BYTE`]).
    fn measure_io(&self, wall_ns: u64, cpu_ns: u64, missing: u64) {
        if missing < IO_MEASURE_MIN_BYTES {
            return;
        }
        let sample = wall_ns.saturating_sub(cpu_ns) as f64 / missing as f64;
        let old = self.io_ns_per_byte();
        let new = old + IO_MEASURE_WEIGHT * (sample - old);
        self.io_ns_per_byte.store(new.to_bits(), Ordering::Relaxed);
    }

    /// Learns `table` now: trains, installs and persists its model. Returns whether the table
    /// has a model afterwards (false when the keys collapse under the mapping).
    pub fn learn_table(
        &self,
        env: &dyn Env,
        dir: &Path,
        table: &Arc<Table>,
        fs: Option<&FileStats>,
    ) -> Result<bool> {
        if table.model().is_some() {
            return Ok(true);
        }
        if table.properties().num_entries == 0 {
            return Ok(false); // range tombstones only: no key to learn
        }
        // The cost is the CPU the training takes from other work: thread CPU time, which a
        // loaded machine does not inflate the way wall-clock time does.
        let missing = table
            .residency()
            .map(|(size, res)| size.saturating_sub(res));
        let wall = std::time::Instant::now();
        let t0 = crate::env::thread_cpu_ns();
        let model = train(table, self.delta)?;
        let ns = crate::env::thread_cpu_ns().saturating_sub(t0);
        if let Some(missing) = missing {
            let wall_ns = u64::try_from(wall.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.measure_io(wall_ns, ns, missing);
        }
        let useful = model.quality().is_useful();
        if let Some(fs) = fs {
            self.analyzer.learned(fs, ns);
        }
        if !useful {
            self.unlearnable.fetch_add(1, Ordering::Relaxed);
            if let Some(fs) = fs {
                self.analyzer.unlearnable(fs);
            }
            return Ok(false);
        }
        let bytes = model.encode();
        table.install_model(model)?;
        // The model file is a cache: failing to write it costs a relearn after reopen.
        let _ = write_model(env, dir, table.number(), &bytes);
        Ok(true)
    }
}

/// Trains a model over the user keys of `table`, in file order: one pass over its blocks (not
/// added to the block cache) gathers the keys, the key mapper is chosen from all of them (the
/// radix form for small per-position alphabets such as decimal digits), then Greedy-PLR runs.
pub fn train(table: &Arc<Table>, delta: u32) -> Result<LearnedIndex> {
    train_tables(std::slice::from_ref(table), delta)
}

/// Trains a level model over `tables` (a sorted level's files, in key order). Fails when the
/// files do not hold their records in strictly increasing order or do not match their
/// properties' record counts.
pub fn train_level(tables: &[Arc<Table>], delta: u32) -> Result<LevelModel> {
    let mut starts = Vec::with_capacity(tables.len() + 1);
    let mut n = 0u64;
    for t in tables {
        starts.push(n);
        n += t.properties().num_entries;
    }
    starts.push(n);
    let index = train_tables(tables, delta)?;
    if index.model().len() != n {
        let path = tables.first().map_or(Path::new(""), |t| t.path());
        return Err(Error::corruption(
            path,
            0,
            format!(
                "level model covers {} records, the level's tables say {n}",
                index.model().len()
            ),
        ));
    }
    Ok(LevelModel { index, starts })
}

/// Greedy-PLR over the user keys of `tables`, read in order (see [`train`]).
fn train_tables(tables: &[Arc<Table>], delta: u32) -> Result<LearnedIndex> {
    let path = tables.first().map_or(Path::new(""), |t| t.path());
    let learn_err =
        |e: attune_learn::LearnError| Error::corruption(path, 0, format!("learning keys: {e}"));
    let mut flat: Vec<u8> = Vec::new();
    let mut ends: Vec<usize> = Vec::new();
    for table in tables {
        table.for_each_key(|k| {
            flat.extend_from_slice(key::user_key(k));
            ends.push(flat.len());
        })?;
    }
    let keys = || {
        let starts = std::iter::once(0).chain(ends.iter().copied());
        starts.zip(ends.iter().copied()).map(|(a, b)| &flat[a..b])
    };
    let (Some(first), Some(last)) = (keys().next(), keys().last()) else {
        return Err(Error::corruption(path, 0, "no entries to learn"));
    };
    let mapper = KeyMapper::for_keys(first, last, keys());
    let mut b = LearnedIndex::builder_with_mapper(mapper, delta).map_err(learn_err)?;
    for k in keys() {
        b.push(k).map_err(learn_err)?;
    }
    Ok(b.finish())
}

/// Learns a model over `level` of `v` (whose open tables are `tables`, in the level's order),
/// persists it as `LEVEL-N.atlm` and installs it in `v`'s slot for the level (which every later
/// version that keeps the level's files shares). Returns whether the level has a model
/// afterwards: false when the model is not useful (the file path serves the level).
pub fn learn_level(
    env: &dyn Env,
    dir: &Path,
    v: &Version,
    level: usize,
    tables: &[Arc<Table>],
    delta: u32,
) -> Result<bool> {
    if v.level_models[level].get().is_some() {
        return Ok(true);
    }
    if tables.iter().any(|t| t.properties().num_entries == 0) {
        return Ok(false); // a file of range tombstones only has no keys to place
    }
    let m = train_level(tables, delta)?;
    if !m.index.quality().is_useful() {
        return Ok(false);
    }
    let numbers: Vec<u64> = v.files[level].iter().map(|f| f.number).collect();
    // The file is a cache: failing to write it costs a relearn after reopen.
    let _ = write_level_model(env, dir, level, &numbers, &m);
    Ok(v.set_level_model(level, Arc::new(m)))
}

/// Online level learning (`learned_level` with the background learner; beyond the source, whose
/// level models are learned once over read-only data): remembers since when each level has held
/// its current files, and names the levels of two or more files without a model that have been
/// unchanged for the wait (`learned_wait_ms`, the same T_wait as a table's). A level that a
/// compaction keeps changing is never learned — its model would die young, as a short-lived
/// table's would — and one that settles is learned again after every change, without
/// `learn_all`. Each file set is tried once: a level whose model is not useful is not retrained
/// until its files change.
#[derive(Debug, Default)]
pub struct LevelWatch {
    /// Per level: its file numbers, when they were first seen, whether they were tried.
    seen: Vec<(Vec<u64>, u64, bool)>,
}

impl LevelWatch {
    /// The levels of `v` due for a model at `now_ns` (marked tried).
    pub fn due(&mut self, v: &Version, now_ns: u64, wait_ns: u64) -> Vec<usize> {
        if self.seen.len() < NUM_LEVELS {
            self.seen.resize_with(NUM_LEVELS, Default::default);
        }
        let mut out = Vec::new();
        for level in 1..NUM_LEVELS {
            let files = &v.files[level];
            let slot = &mut self.seen[level];
            if !slot.0.iter().eq(files.iter().map(|f| &f.number)) {
                *slot = (files.iter().map(|f| f.number).collect(), now_ns, false);
            }
            let settled = now_ns.saturating_sub(slot.1) >= wait_ns;
            if files.len() >= 2 && !slot.2 && settled && v.level_models[level].get().is_none() {
                slot.2 = true;
                out.push(level);
            }
        }
        out
    }
}

/// Writes `m`, the model of `level` whose files are `numbers`, as `LEVEL-N.atlm` (atomically).
pub fn write_level_model(
    env: &dyn Env,
    dir: &Path,
    level: usize,
    numbers: &[u64],
    m: &LevelModel,
) -> Result<()> {
    let path = filename::level_model_path(dir, level);
    crate::env::write_file_atomic(env, &path, &m.encode(level, numbers))
}

/// Installs the persisted level models that still describe their level's files in `v`;
/// removes the others (stale after a change of the level, or damaged). Returns how many were
/// installed and how many rejected.
pub fn load_level_models(env: &dyn Env, dir: &Path, v: &Version) -> (u64, u64) {
    let (mut loaded, mut rejected) = (0, 0);
    for level in 1..NUM_LEVELS {
        let path = filename::level_model_path(dir, level);
        if !env.exists(&path) {
            continue;
        }
        let ok = read_file(env, &path)
            .and_then(|b| LevelModel::decode(&b, &path))
            .ok()
            .filter(|(l, numbers, _)| {
                *l == level && numbers.iter().eq(v.files[level].iter().map(|f| &f.number))
            })
            .is_some_and(|(_, _, m)| v.set_level_model(level, Arc::new(m)));
        if ok {
            loaded += 1;
        } else {
            rejected += 1;
            let _ = env.remove_file(&path);
        }
    }
    (loaded, rejected)
}

fn read_model(env: &dyn Env, path: &Path) -> Result<LearnedIndex> {
    let buf = read_file(env, path)?;
    LearnedIndex::decode(&buf).map_err(|e| Error::corruption(path, 0, e.to_string()))
}

/// Writes a table's model file (temp file, then rename) without syncing it. The file is a
/// cache checked at load (checksum, structure, record count), so a crash that leaves it torn
/// or empty costs a relearn, never a wrong answer; an fsync per model, by contrast, held the
/// learning thread for up to seconds per table while other work kept the device busy, and the
/// tables a read phase touched stayed on the baseline path meanwhile.
fn write_model(env: &dyn Env, dir: &Path, number: u64, bytes: &[u8]) -> Result<()> {
    let path = filename::model_path(dir, number);
    let tmp = path.with_extension("tmp");
    let mut f = env.new_writable(&tmp)?;
    f.append(bytes)?;
    f.flush()?;
    drop(f);
    env.rename(&tmp, &path)
}
