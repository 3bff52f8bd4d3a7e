//! The stress driver for the Plush hash table (`attune.HashDB`, `--engine hash`): threads of
//! random upserts, deletes, point reads, checkpoints and payload-log collections against the
//! same [`Oracle`], in `kill` mode (a child process on the real file system, SIGKILLed at a
//! seeded moment; the parent reopens, reads every key back and checks that every acknowledged
//! write survived and no acknowledged delete came back).
//!
//! What a cycle draws from the seed: the durability setting (`sync` true: a barrier per log
//! entry; false: stores reach the page cache, which a process crash keeps), who migrates
//! (inline or the background thread), the persistence back end (`write` or `msync`), the
//! preallocated levels and, in a quarter of the cycles, no recovery log. Without the log a
//! kill loses every write its DRAM entry had not migrated, so the child streams each
//! checkpoint's start and return and the parent demands only what a returned checkpoint made
//! durable ([`crate::oracle::Lost::Unmigrated`]); with it, every acknowledged write. The
//! geometry is fixed per run and small (16 DRAM entries of 4 buckets, fanout 4, 64 KiB log
//! chunks and payload segments) so that a few thousand keys migrate through several levels,
//! roll log chunks and fill payload segments every cycle.
//!
//! Values: a third of the writes (drawn per key and op) store 8 bytes (`op << 24 | key`) in
//! the bucket itself; the rest store the attune-kv driver's self-describing values of 8 B to
//! 12 KiB, which go to the payload log. Either way a value names exactly the write that
//! produced it. Keys are the driver's 8-byte `k0000000` names.
//!
//! Thread safety: workers share the `Plush` and the `Oracle`; counters are atomics.

use crate::oracle::Oracle;
use crate::stress::{
    describe, key_bytes, mix, pick_weighted, stream, value_bytes, value_op, Config, Counters,
    PipeSink, Report, Sink,
};
use attune_plush::{Backend, Migration, Options, Partitioning, Plush};
use parking_lot::Mutex;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Keys must fit the 24 key bits of an inline value.
pub const KEYS_MAX: u32 = 1 << 24;

/// Operations of the HashDB mix (per 1,000): writes dominate so kills land in log appends,
/// migrations and payload appends; checkpoints (migrate every DRAM entry) and explicit
/// collections are frequent enough that kills also land inside them.
const MIX: [(HashOp, u32); 5] = [
    (HashOp::Put, 520),
    (HashOp::Delete, 160),
    (HashOp::Get, 300),
    (HashOp::Checkpoint, 8),
    (HashOp::Collect, 12),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HashOp {
    Put,
    Delete,
    Get,
    Checkpoint,
    Collect,
}

/// Whether write `op` of key `k` stores an inline 8-byte value (a third of them).
fn inline_form(k: u32, op: u64) -> bool {
    mix(op ^ (u64::from(k) << 40) ^ 0x5EED_1E55).is_multiple_of(3)
}

/// The value write `op` stores at key `k`.
pub fn hash_value_bytes(k: u32, op: u64) -> Vec<u8> {
    if inline_form(k, op) {
        (op << 24 | u64::from(k)).to_le_bytes().to_vec()
    } else {
        value_bytes(k, op)
    }
}

/// The op whose write stored `v` at key `k`, if `v` is exactly such a value.
pub fn hash_value_op(k: u32, v: &[u8]) -> Option<u64> {
    if let Ok(b) = <[u8; 8]>::try_from(v) {
        let w = u64::from_le_bytes(b);
        let op = w >> 24;
        if w & 0xFF_FFFF == u64::from(k) && inline_form(k, op) {
            return Some(op);
        }
    }
    value_op(k, v).filter(|&op| !inline_form(k, op))
}

/// The fixed geometry of every run (later opens read it from the manifest anyway).
fn geometry() -> Options {
    Options {
        dram_entries_log2: 4,
        fanout_log2: 2,
        log_partitions: 4,
        log_chunk_bytes: 64 << 10,
        log_chunks: 4,
        payload_segment_bytes: 64 << 10,
        ..Options::default()
    }
}

/// The cycle's durability, migration and back end.
fn options(rng: &mut ChaCha8Rng) -> Options {
    Options {
        sync: rng.gen_bool(0.5),
        migration: if rng.gen_bool(0.5) {
            Migration::Inline
        } else {
            Migration::Background
        },
        backend: if rng.gen_bool(0.5) {
            Backend::Write
        } else {
            Backend::Msync
        },
        log_direct_io: rng.gen_bool(0.5),
        // Drawn last: the draws above keep their values for a given seed and cycle.
        preallocate_levels: rng.gen_range(0..=2),
        // A quarter of the cycles run without the recovery log: a kill then loses what no
        // migration moved, and the parent judges the reopen by what checkpoints made durable.
        recovery_log: rng.gen_range(0..4) != 0,
        ..geometry()
    }
}

/// The run's partitioning, fixed at creation (the first cycle): a quarter of the seeds place
/// keys by range, so that kills land in range-placed migrations and the reopen also checks a
/// full scan. Range runs name key `k` by the integer `k` (8 little-endian bytes) with as many
/// significant bits as the key count needs ([`range_key_bits`]); the `k0000000` names, read as
/// integers, vary in their high bytes' low nibbles only and would pile into a few entries.
pub fn run_partitioning(cfg: &Config) -> Partitioning {
    if stream(cfg.seed, u64::MAX, 1).gen_range(0..4) == 0 {
        Partitioning::Range
    } else {
        Partitioning::Hash
    }
}

/// Significant key bits of a range run over `keys` keys (at least the DRAM level's bits).
pub fn range_key_bits(keys: u32) -> u32 {
    (32 - keys.saturating_sub(1).leading_zeros()).max(geometry().dram_entries_log2)
}

/// The bytes that name key `k`: the driver's `k0000000` name, or in a range run the integer.
fn name(range: bool, k: u32) -> Vec<u8> {
    if range {
        u64::from(k).to_le_bytes().to_vec()
    } else {
        key_bytes(k)
    }
}

/// A cycle's options as the child opens them (drawn from the seed and the cycle).
pub fn cycle_options(cfg: &Config, cycle: u64) -> Options {
    Options {
        partitioning: run_partitioning(cfg),
        significant_key_bits: range_key_bits(cfg.keys),
        ..options(&mut stream(cfg.seed, cycle, 0))
    }
}

/// The options of cycle `cycle`, for a violation's report.
pub fn cycle_shape(cfg: &Config, cycle: u64) -> String {
    shape(&cycle_options(cfg, cycle))
}

fn shape(o: &Options) -> String {
    format!(
        "cycle options: sync {}, migration {:?}, backend {:?}, log O_DIRECT {}, preallocated \
         levels {}, recovery log {}, partitioning {}",
        o.sync,
        o.migration,
        o.backend,
        o.log_direct_io,
        o.preallocate_levels,
        o.recovery_log,
        o.partitioning.name()
    )
}

/// Reads every key back and checks the table's structure ([`Plush::verify`]); returns the op
/// of each key's value. A value no write produced or a failed check is a violation.
pub fn read_back(db: &Plush, keys: u32, report: &mut Report) -> Result<Vec<Option<u64>>, String> {
    let range = db.stats().partitioning == Partitioning::Range.name();
    let mut out = Vec::with_capacity(keys as usize);
    for k in 0..keys {
        let v = db
            .get_bytes(&name(range, k))
            .map_err(|e| format!("get of key {k} after recovery: {e}"))?;
        out.push(match &v {
            None => None,
            Some(v) => Some(hash_value_op(k, v).ok_or_else(|| {
                format!(
                    "key {k} holds a value no write produced: {}",
                    describe(Some(v))
                )
            })?),
        });
    }
    db.verify()
        .map_err(|e| format!("structure check after recovery: {e}"))?;
    if range {
        // The scan returns exactly the keys the point reads found, in order.
        let mut want: Vec<(u64, Vec<u8>)> = Vec::new();
        for (k, op) in out.iter().enumerate() {
            if op.is_some() {
                let v = db
                    .get_bytes(&name(true, k as u32))
                    .map_err(|e| format!("get of key {k} after recovery: {e}"))?;
                want.extend(v.map(|v| (k as u64, v)));
            }
        }
        let got = db
            .scan_bytes(0, usize::MAX)
            .map_err(|e| format!("scan after recovery: {e}"))?;
        if got != want {
            let first = got.iter().zip(&want).position(|(a, b)| a != b);
            return Err(format!(
                "scan after recovery disagrees with the point reads: {} records scanned, {} \
                 read; first difference at position {first:?}",
                got.len(),
                want.len()
            ));
        }
        report.scans_verified += 1;
    }
    report.keys_verified += u64::from(keys);
    Ok(out)
}

/// Opens the database the way the parent does after a kill (the geometry comes from its
/// manifest; durability on, inline migration so that nothing runs behind the check).
pub fn reopen_and_read(
    dir: &Path,
    keys: u32,
    report: &mut Report,
) -> Result<Vec<Option<u64>>, String> {
    let opts = Options {
        create_if_missing: false,
        migration: Migration::Inline,
        ..geometry()
    };
    let db = Plush::open(dir, opts).map_err(|e| format!("open after SIGKILL: {e}"))?;
    read_back(&db, keys, report)
}

struct Shared<'a> {
    db: &'a Plush,
    oracle: &'a Oracle,
    sink: &'a dyn Sink,
    next_op: &'a AtomicU64,
    counters: &'a Counters,
    stop: &'a AtomicBool,
    violation: &'a Mutex<Option<String>>,
    keys: u32,
    sync: bool,
    /// Keys are named by their integers (range partitioning).
    range: bool,
}

impl Shared<'_> {
    fn fail(&self, msg: String) {
        let mut v = self.violation.lock();
        if v.is_none() {
            *v = Some(msg);
        }
        self.stop.store(true, Ordering::SeqCst);
    }
}

struct Worker<'a> {
    sh: &'a Shared<'a>,
    rng: ChaCha8Rng,
}

impl Worker<'_> {
    fn key(&mut self) -> u32 {
        // A hot tenth of the keys takes half the traffic (overwrites and deletes collide).
        if self.rng.gen_bool(0.5) {
            self.rng.gen_range(0..(self.sh.keys / 10).max(1))
        } else {
            self.rng.gen_range(0..self.sh.keys)
        }
    }

    fn run(&mut self) {
        while !self.sh.stop.load(Ordering::Relaxed) {
            self.step();
            self.sh.counters.ops.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn step(&mut self) {
        let sh = self.sh;
        match pick_weighted(&mut self.rng, &MIX) {
            HashOp::Put => {
                let k = self.key();
                self.write(k, true);
            }
            HashOp::Delete => {
                let k = self.key();
                self.write(k, false);
            }
            HashOp::Get => {
                let k = self.key();
                let g = sh.oracle.lock(&[k]);
                let allowed = Oracle::allowed_live(&g[0]);
                match sh.db.get_bytes(&name(sh.range, k)) {
                    Ok(v) => {
                        let ok = match &v {
                            None => allowed.iter().any(|&(_, put)| !put),
                            Some(v) => {
                                hash_value_op(k, v).is_some_and(|op| allowed.contains(&(op, true)))
                            }
                        };
                        if !ok {
                            sh.fail(format!(
                                "get: key {k}: read {} but the oracle allows {allowed:?} (op, put)",
                                describe(v.as_deref())
                            ));
                        }
                        sh.counters.reads.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => sh.fail(format!("get of key {k}: {e}")),
                }
            }
            HashOp::Checkpoint => {
                // Ids share the ops' counter, so that they are unique in the stream.
                let id = sh.next_op.fetch_add(1, Ordering::SeqCst);
                sh.sink.checkpoint_begin(id);
                match sh.db.checkpoint() {
                    Ok(()) => {
                        sh.sink.checkpoint_done(id);
                        sh.counters.flushes.fetch_add(1, Ordering::Relaxed);
                        sh.sink.counted("flushes", 1);
                    }
                    Err(e) => sh.fail(format!("checkpoint: {e}")),
                }
            }
            HashOp::Collect => match sh.db.collect_garbage(self.rng.gen_bool(0.3)) {
                Ok(n) => {
                    sh.counters
                        .gc_segments
                        .fetch_add(n as u64, Ordering::Relaxed);
                    sh.sink.counted("gc_segments", n as u64);
                }
                Err(e) => sh.fail(format!("collect_garbage: {e}")),
            },
        }
    }

    fn write(&mut self, k: u32, put: bool) {
        let sh = self.sh;
        let items = [(k, put)];
        let mut guards = sh.oracle.lock(&[k]);
        let op = sh.next_op.fetch_add(1, Ordering::SeqCst);
        sh.oracle.issue(&mut guards, op, &items);
        sh.sink.issue(op, sh.sync, &items);
        let r = if put {
            sh.db
                .put_bytes(&name(sh.range, k), &hash_value_bytes(k, op))
        } else {
            sh.db.delete_bytes(&name(sh.range, k))
        };
        if let Err(e) = &r {
            // No faults are injected: any error is a violation (the write stays failed).
            sh.fail(format!(
                "{} of key {k}: {e}",
                if put { "put" } else { "delete" }
            ));
            sh.counters.failed.fetch_add(1, Ordering::Relaxed);
        } else {
            sh.counters.acked.fetch_add(1, Ordering::Relaxed);
        }
        sh.oracle.finish(&mut guards, op, r.is_ok(), sh.sync);
        sh.sink.finish(op, r.is_ok());
    }
}

/// The child of `kill` mode for HashDB: opens `dir` with the cycle's options, reads every key
/// (its own oracle starts from what is there; the parent has verified it), prints `R`, then runs
/// the workers, streaming issues and acknowledgements, until killed (or `cfg.duration`).
pub fn run_child(cfg: &Config, dir: &Path, cycle: u64, op_base: u64) -> Result<(), String> {
    let opts = cycle_options(cfg, cycle);
    let what = shape(&opts);
    let db = Plush::open(dir, opts).map_err(|e| format!("child open ({what}): {e}"))?;
    let oracle = Oracle::new(cfg.keys);
    let read = read_back(&db, cfg.keys, &mut Report::default())?;
    oracle.rebase(&read);
    println!("R");
    let sink = PipeSink::stdout();
    let next_op = AtomicU64::new(op_base);
    let counters = Counters::default();
    let stop = AtomicBool::new(false);
    let violation = Mutex::new(None);
    let sh = Shared {
        db: &db,
        oracle: &oracle,
        sink: &sink,
        next_op: &next_op,
        counters: &counters,
        stop: &stop,
        violation: &violation,
        keys: cfg.keys,
        sync: db.options().sync,
        range: db.options().partitioning == Partitioning::Range,
    };
    let limit = cfg.duration;
    std::thread::scope(|s| {
        for t in 0..cfg.threads {
            let sh = &sh;
            s.spawn(move || {
                Worker {
                    sh,
                    rng: stream(cfg.seed, cycle, t as u64 + 1),
                }
                .run();
            });
        }
        let t = Instant::now();
        while !stop.load(Ordering::SeqCst) && t.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::SeqCst);
    });
    match violation.into_inner() {
        Some(v) => Err(format!("{v} ({what})")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_their_write_in_both_forms() {
        let mut inline = 0;
        for k in [0u32, 1, 7, 1999, KEYS_MAX - 1] {
            for op in 1..300u64 {
                let v = hash_value_bytes(k, op);
                inline += usize::from(v.len() == 8 && inline_form(k, op));
                assert_eq!(hash_value_op(k, &v), Some(op), "key {k} op {op}");
                assert_eq!(hash_value_op(k ^ 1, &v), None, "key {k} op {op}");
            }
        }
        assert!(inline > 300, "{inline} inline values");
    }
}
