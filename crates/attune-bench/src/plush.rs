//! `attune-bench plush`: Plush (attune-plush) against Attune's LSM, RocksDB and LMDB on 8-byte
//! keys and values, PiBench-style: a preload, then per thread count the insert-only phase (new
//! keys), and per request distribution a lookup-only and a 50 % mixed phase (lookups and
//! overwrites of existing keys). Every engine runs the same streams, in this process, one after
//! the other, at the same durability:
//!
//! - `--sync` off (the default): every acknowledged write survives a *process* crash. Plush:
//!   stores to shared mappings (page cache); RocksDB and Attune: WAL written, not synced; LMDB:
//!   `MDB_NOSYNC`.
//! - `--sync` on: every acknowledged write survives a power loss. Plush: a `pwrite` +
//!   `fdatasync` per log entry, concurrent threads' entries sharing one (group commit; or an
//!   msync, or clwb + sfence, with `--backend msync|clwb`); RocksDB and Attune: WAL fsync per
//!   write (their writers group too); LMDB: a synced commit per write.
//!
//! Plush's rows add its write amplification against the chapter's model 3·log_f(N)+1 and its
//! DRAM use (anonymous resident memory of the process, sampled during the preload).
//!
//! Keys: attune-workload samplers draw item numbers; an item's key is a bijective mix of its
//! number (8 bytes, big-endian for the byte-keyed engines), so that hot items spread.
//! `--key-bytes` / `--value-bytes` other than 8 widen them (the mixed number, then filler
//! derived from it); Plush then stores the records out of place in its payload log.
//!
//! The `scan100` phase (8-byte keys only) reads the 100 records from a sampled key on, in key
//! order: the peers' iterators over big-endian keys, and Plush variants created with
//! `partitioning=range` (`plush:partitioning=range`); a Plush partitioned by hash has no key
//! order and sits that phase out.

use crate::engine::{find, Engine, Session};
use crate::options::{parse_count, parse_size, EngineSpec, Settings};
use crate::output::{Fail, Sink};
use attune_plush::{Backend, Migration, Options, Partitioning, Plush};
use attune_workload::{RequestDist, Sampler};
use clap::Parser;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "attune-bench plush",
    no_binary_name = true,
    about = "Plush against Attune's LSM, RocksDB, LevelDB and LMDB: 8 B (or --key-bytes/--value-bytes) records, inserts after a \
             preload, lookups and 50 % mixed, uniform and zipfian, 1 and 2 threads"
)]
struct Args {
    /// Engines in order: plush, attune, rocksdb, lmdb (a missing peer library is skipped);
    /// `plush:dram_filter_levels=0` (also `dram_entries_log2`, `log_partitions`, `backend`,
    /// `migration=inline|background`) runs a Plush variant under that name, and a peer takes
    /// its own keys as in `kv micro` (`rocksdb:table=plain`, `fjall:kv_separation=on`).
    #[arg(long, default_value = "plush,attune,rocksdb,lmdb")]
    engines: String,
    /// Records loaded before the phases (e.g. 2M).
    #[arg(long, default_value = "2M")]
    preload: String,
    /// Operations per thread and phase.
    #[arg(long, default_value = "500K")]
    operations: String,
    /// Thread counts, comma-separated.
    #[arg(long, default_value = "1,2")]
    threads: String,
    /// Request distributions of the lookup and mixed phases (attune-workload syntax).
    #[arg(long, default_value = "uniform,zipfian:0.99")]
    dists: String,
    /// Phases: insert, lookup, mixed50, scan100 (range scans of 100 records from a sampled key;
    /// Plush variants partitioned by hash skip it).
    #[arg(long, default_value = "insert,lookup,mixed50")]
    workloads: String,
    /// Durable across power loss (see the module doc); default: across a process crash.
    #[arg(long)]
    sync: bool,
    /// Plush: log2 of the DRAM level's directory entries (capacity 256 records each).
    #[arg(long, default_value_t = 12)]
    dram_entries_log2: u32,
    /// Plush: log partitions.
    #[arg(long, default_value_t = 64)]
    log_partitions: usize,
    /// Plush: persistent levels with a DRAM copy of their filters.
    #[arg(long, default_value_t = 2)]
    dram_filter_levels: usize,
    /// Plush: write (pwrite + group-committed fdatasync), msync or clwb.
    #[arg(long, default_value = "write")]
    backend: String,
    /// LSM peers' block cache.
    #[arg(long, default_value = "64MiB")]
    cache_size: String,
    /// LSM peers' write buffer.
    #[arg(long, default_value = "64MiB")]
    write_buffer_size: String,
    /// Where the databases go (default: a fresh directory under the temp dir, removed after).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Run the timed phases this many times, engines interleaved (reports use the median).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Time every insert and report latency percentiles (p50, p99, p99.9, max) per phase.
    #[arg(long)]
    latency: bool,
    /// Bytes per key (at least 8).
    #[arg(long, default_value_t = 8)]
    key_bytes: usize,
    /// Bytes per value (at least 8).
    #[arg(long, default_value_t = 8)]
    value_bytes: usize,
}

#[derive(Serialize)]
struct Row<'a> {
    bench: &'static str,
    engine: &'a str,
    workload: &'a str,
    dist: &'a str,
    threads: usize,
    records: u64,
    operations: u64,
    seconds: f64,
    cpu_seconds: f64,
    /// `cpu_seconds` split into user and system (kernel) time.
    cpu_user_seconds: f64,
    cpu_sys_seconds: f64,
    ops_per_sec: f64,
    ops_per_sec_per_thread: f64,
    ops_per_cpu_sec: f64,
    durability: &'static str,
    found: u64,
    key_bytes: usize,
    value_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_us: Option<Latency>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plush: Option<PlushRow>,
}

/// Insert latency percentiles of one phase, merged over its threads, in microseconds.
#[derive(Serialize, Clone, Copy)]
struct Latency {
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

impl Latency {
    fn of(mut ns: Vec<u64>) -> Option<Latency> {
        if ns.is_empty() {
            return None;
        }
        ns.sort_unstable();
        let at = |q: f64| ns[((ns.len() as f64 * q) as usize).min(ns.len() - 1)] as f64 / 1e3;
        Some(Latency {
            p50: at(0.5),
            p99: at(0.99),
            p999: at(0.999),
            max: at(1.0),
        })
    }
}

#[derive(Serialize, Clone)]
struct PlushRow {
    levels: usize,
    migrations_background: u64,
    migrations_inline: u64,
    write_amplification: f64,
    write_amplification_model: f64,
    dram_bytes_reserved: u64,
    rss_anon_bytes: u64,
    dram_entries_log2: u32,
    migrations: Vec<u64>,
    fences: u64,
    log_syncs: u64,
    log_sync_barriers: u64,
    log_sync_us: u64,
    /// Log syncs and the barriers they covered during this phase alone, and their ratio
    /// (writers per sync: the group size).
    phase_log_syncs: u64,
    phase_log_sync_barriers: u64,
    phase_writers_per_sync: f64,
    /// Distinct 4 KiB log pages per sync in this phase (pages each `fdatasync` writes back).
    phase_log_pages_per_sync: f64,
    payload_appends: u64,
    payload_bytes: u64,
    payload_gc_runs: u64,
}

/// A key of item `i`: a bijection of u64 (murmur3's finaliser), so hot items spread.
fn key_of(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    z = (z ^ (z >> 33)).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    z ^ (z >> 33)
}

/// One engine, as the phases see it.
enum Target {
    Plush(Box<Plush>),
    Peer(Box<dyn Engine>),
}

/// A per-thread handle, with the record sizes and buffers to build keys and values in.
struct Handle<'a> {
    inner: Inner<'a>,
    sizes: (usize, usize),
    key: Vec<u8>,
    value: Vec<u8>,
}

enum Inner<'a> {
    Plush(&'a Plush),
    Peer(Box<dyn Session + 'a>, Vec<u8>),
}

/// Fills `out` with `len` bytes: `x` big-endian, then filler derived from it.
fn widen(out: &mut Vec<u8>, x: u64, len: usize) {
    out.clear();
    out.extend_from_slice(&x.to_be_bytes());
    let mut f = x ^ 0xA5A5_A5A5_A5A5_A5A5;
    while out.len() < len {
        f = f.rotate_left(9).wrapping_add(0x9E37_79B9_7F4A_7C15);
        out.extend_from_slice(&f.to_le_bytes());
    }
    out.truncate(len);
}

impl Handle<'_> {
    fn words(&self) -> bool {
        self.sizes == (8, 8)
    }

    fn put(&mut self, k: u64, v: u64) -> Result<(), String> {
        if self.words() {
            return match &mut self.inner {
                Inner::Plush(p) => p.put(k, v).map_err(|e| e.to_string()),
                Inner::Peer(s, _) => s
                    .put(&k.to_be_bytes(), &v.to_le_bytes())
                    .map_err(|e| e.to_string()),
            };
        }
        widen(&mut self.key, k, self.sizes.0);
        widen(&mut self.value, v, self.sizes.1);
        match &mut self.inner {
            Inner::Plush(p) => p.put_bytes(&self.key, &self.value),
            Inner::Peer(s, _) => return s.put(&self.key, &self.value).map_err(|e| e.to_string()),
        }
        .map_err(|e| e.to_string())
    }

    /// Reads up to `n` records from key `k` on, in key order; returns how many it read.
    fn scan(&mut self, k: u64, n: usize) -> Result<usize, String> {
        if !self.words() {
            return Err("scan100 runs on 8-byte keys and values only".into());
        }
        match &mut self.inner {
            Inner::Plush(p) => p.scan(k, n).map(|r| r.len()).map_err(|e| e.to_string()),
            Inner::Peer(s, _) => s
                .scan(&k.to_be_bytes(), n, &mut |_, _| {})
                .map_err(|e| e.to_string()),
        }
    }

    fn get(&mut self, k: u64) -> Result<bool, String> {
        if self.words() {
            return match &mut self.inner {
                Inner::Plush(p) => Ok(p.get(k).map_err(|e| e.to_string())?.is_some()),
                Inner::Peer(s, buf) => s.get(&k.to_be_bytes(), buf).map_err(|e| e.to_string()),
            };
        }
        widen(&mut self.key, k, self.sizes.0);
        match &mut self.inner {
            Inner::Plush(p) => Ok(p.get_bytes(&self.key).map_err(|e| e.to_string())?.is_some()),
            Inner::Peer(s, buf) => s.get(&self.key, buf).map_err(|e| e.to_string()),
        }
    }
}

impl Target {
    fn handle(&self, sizes: (usize, usize)) -> Result<Handle<'_>, String> {
        let inner = match self {
            Target::Plush(p) => Inner::Plush(p),
            Target::Peer(e) => Inner::Peer(e.session().map_err(|e| e.to_string())?, Vec::new()),
        };
        Ok(Handle {
            inner,
            sizes,
            key: Vec::new(),
            value: Vec::new(),
        })
    }
}

/// CPU time of the process (every thread), user and system.
#[derive(Clone, Copy)]
struct Cpu {
    user: f64,
    sys: f64,
}

impl Cpu {
    fn total(self) -> f64 {
        self.user + self.sys
    }
}

impl std::ops::Sub for Cpu {
    type Output = Cpu;
    fn sub(self, o: Cpu) -> Cpu {
        Cpu {
            user: self.user - o.user,
            sys: self.sys - o.sys,
        }
    }
}

fn cpu_seconds() -> Cpu {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Cpu {
        user: t(ru.ru_utime),
        sys: t(ru.ru_stime),
    }
}

fn rss_anon_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Applies `plush:key=value;key=value` (keys `dram_filter_levels`, `dram_entries_log2`,
/// `log_partitions`, `log_chunks`, `backend`, `migration`, `group_commit_window`,
/// `log_syncs_in_flight_max`, `log_direct_io`, `log_group_gather`, `log_pack_groups`,
/// `elide_tmpfs_syncs`,
/// `recovery_log`, `preallocate_levels`, `partitioning`, `significant_key_bits`) to
/// `opts`:
/// ablations run as their own engine entries.
fn plush_spec(entry: &str, opts: &mut Options) -> Result<(), String> {
    let Some((_, pairs)) = entry.split_once(':') else {
        return Ok(());
    };
    for pair in pairs.split(';').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("{entry}: {pair:?} is not key=value"))?;
        let num = || {
            v.parse::<usize>()
                .map_err(|_| format!("{entry}: {k}={v} is not a number"))
        };
        match k {
            "dram_filter_levels" => opts.dram_filter_levels = num()?,
            "dram_entries_log2" => opts.dram_entries_log2 = num()? as u32,
            "log_partitions" => opts.log_partitions = num()?,
            "log_chunks" => opts.log_chunks = num()?,
            "backend" => opts.backend = Backend::parse(v).map_err(|e| e.to_string())?,
            "migration" => opts.migration = Migration::parse(v).map_err(|e| e.to_string())?,
            "group_commit_window" => opts.group_commit_window = v == "on" || v == "true",
            "log_syncs_in_flight_max" => opts.log_syncs_in_flight_max = num()?,
            "log_direct_io" => opts.log_direct_io = v == "on" || v == "true",
            "log_group_gather" => opts.log_group_gather = v == "on" || v == "true",
            "log_pack_groups" => opts.log_pack_groups = v == "on" || v == "true",
            "elide_tmpfs_syncs" => opts.elide_tmpfs_syncs = v == "on" || v == "true",
            "recovery_log" => {
                opts.recovery_log = match v {
                    "on" | "true" => true,
                    "off" | "false" => false,
                    _ => return Err(format!("{entry}: recovery_log={v} is not on or off")),
                }
            }
            "preallocate_levels" => opts.preallocate_levels = num()?,
            "partitioning" => {
                opts.partitioning = Partitioning::parse(v).map_err(|e| e.to_string())?
            }
            "significant_key_bits" => opts.significant_key_bits = num()? as u32,
            _ => {
                return Err(format!(
                    "{entry}: unknown key {k} (dram_filter_levels, dram_entries_log2, \
                     log_partitions, log_chunks, backend, migration, group_commit_window, \
                     log_syncs_in_flight_max, log_direct_io, log_group_gather, log_pack_groups, \
                     elide_tmpfs_syncs, recovery_log, preallocate_levels, partitioning, significant_key_bits)"
                ))
            }
        }
    }
    Ok(())
}

/// Runs the `attune-bench plush` subcommand with `argv` (after the subcommand name).
pub fn run(argv: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let args = match Args::try_parse_from(&argv) {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            print!("{e}");
            return Ok(());
        }
        Err(e) => return Err(Fail::Usage(e.to_string())),
    };
    let usage = |m: String| Fail::Usage(m);
    let preload = parse_count("--preload", &args.preload).map_err(|e| usage(e.to_string()))?;
    let ops = parse_count("--operations", &args.operations).map_err(|e| usage(e.to_string()))?;
    let threads: Vec<usize> = args
        .threads
        .split(',')
        .map(|t| t.trim().parse::<usize>().ok().filter(|n| *n >= 1))
        .collect::<Option<_>>()
        .ok_or_else(|| usage(format!("--threads {:?}: positive integers", args.threads)))?;
    let dists: Vec<(String, RequestDist)> = args
        .dists
        .split(',')
        .map(|d| Ok((d.trim().to_string(), d.trim().parse::<RequestDist>()?)))
        .collect::<Result<_, attune_workload::WorkloadError>>()
        .map_err(|e| usage(e.to_string()))?;
    let workloads: Vec<&str> = args.workloads.split(',').map(str::trim).collect();
    if let Some(w) = workloads
        .iter()
        .find(|w| !["insert", "lookup", "mixed50", "scan100"].contains(w))
    {
        return Err(usage(format!(
            "--workloads: unknown {w:?} (insert, lookup, mixed50, scan100)"
        )));
    }
    if workloads.contains(&"scan100") && (args.key_bytes, args.value_bytes) != (8, 8) {
        return Err(usage(
            "--workloads scan100 runs on 8-byte keys and values only".into(),
        ));
    }
    let backend = Backend::parse(&args.backend).map_err(|e| usage(e.to_string()))?;
    if args.key_bytes < 8 || args.value_bytes < 8 {
        return Err(usage(format!(
            "--key-bytes {} / --value-bytes {}: at least 8 each",
            args.key_bytes, args.value_bytes
        )));
    }
    let sizes = (args.key_bytes, args.value_bytes);
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("attune-bench-plush-{}", std::process::id())),
    };
    let settings = Settings {
        cache_bytes: parse_size(&args.cache_size).map_err(|e| usage(e.to_string()))?,
        write_buffer_bytes: parse_size(&args.write_buffer_size)
            .map_err(|e| usage(e.to_string()))?,
        sync: args.sync,
        threads: threads.iter().copied().max().unwrap_or(1),
        ..Settings::default()
    };
    let durability = if args.sync {
        "power-loss"
    } else {
        "process-crash"
    };
    // Every engine is opened and preloaded first; the timed phases then run engine after
    // engine, `--repeat` times, so that a disturbance of the machine hits all of them alike.
    let mut targets: Vec<(&str, Target, PathBuf)> = Vec::new();
    for engine in args.engines.split(',').map(str::trim) {
        let dir = base.join(engine.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let target = match engine.split(':').next().unwrap_or("") {
            "plush" => {
                let mut opts = Options {
                    dram_entries_log2: args.dram_entries_log2,
                    log_partitions: args.log_partitions,
                    dram_filter_levels: args.dram_filter_levels,
                    sync: args.sync,
                    backend,
                    ..Options::default()
                };
                plush_spec(engine, &mut opts).map_err(usage)?;
                Target::Plush(Box::new(
                    Plush::open(&dir, opts).map_err(|e| e.to_string())?,
                ))
            }
            name => {
                // A peer's own keys (`rocksdb:table=plain`, `fjall:kv_separation=on`) as in
                // every other subcommand's `--engines`.
                let spec = EngineSpec::parse(engine).map_err(|e| usage(e.to_string()))?;
                let kind = find(name).map_err(|e| usage(e.to_string()))?;
                if let Err(e) = (kind.probe)() {
                    eprintln!("attune-bench plush: skipping {name}: {e}");
                    continue;
                }
                let s = spec
                    .resolve(&settings, kind.keys)
                    .map_err(|e| usage(e.to_string()))?;
                Target::Peer((kind.open)(&dir, &s).map_err(|e| e.to_string())?)
            }
        };
        targets.push((engine, target, dir));
    }
    let ctx = |i: usize| Ctx {
        engine: targets[i].0,
        durability,
        sink,
        target: &targets[i].1,
        latency: args.latency,
        sizes,
        mark: std::sync::Mutex::new((0, 0, 0)),
    };
    let mut records = Vec::with_capacity(targets.len());
    for i in 0..targets.len() {
        records.push(ctx(i).preload(preload)?);
    }
    for _ in 0..args.repeat.max(1) {
        for &t in &threads {
            if workloads.contains(&"insert") {
                for (i, n) in records.iter_mut().enumerate() {
                    ctx(i).phase("insert", "-", t, *n, ops, None)?;
                    *n += ops * t as u64;
                }
            }
            for (dname, dist) in &dists {
                for w in workloads.iter().filter(|w| **w != "insert") {
                    for (i, n) in records.iter().enumerate() {
                        let hashed = matches!(&targets[i].1, Target::Plush(p)
                            if p.options().partitioning == Partitioning::Hash);
                        if *w == "scan100" && hashed {
                            continue;
                        }
                        ctx(i).phase(w, dname, t, *n, ops, Some((dist, args.seed)))?;
                    }
                }
            }
        }
    }
    for (_, target, dir) in targets {
        match target {
            Target::Plush(p) => drop(p),
            Target::Peer(e) => e.close().map_err(|e| e.to_string())?,
        }
        if args.dir.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&base);
    }
    Ok(())
}

struct Ctx<'a> {
    engine: &'a str,
    durability: &'static str,
    sink: &'a Sink,
    target: &'a Target,
    latency: bool,
    sizes: (usize, usize),
    /// Plush's (log syncs, barriers covered, pages synced) when the phase started.
    mark: std::sync::Mutex<(u64, u64, u64)>,
}

impl Ctx<'_> {
    /// Remembers Plush's sync counters at the start of a phase.
    fn start_phase(&self) {
        if let Target::Plush(p) = self.target {
            let s = p.stats();
            *self.mark.lock().unwrap_or_else(|e| e.into_inner()) =
                (s.log_syncs, s.log_sync_barriers, s.log_sync_pages);
        }
    }

    fn plush_row(&self) -> Option<PlushRow> {
        let Target::Plush(p) = self.target else {
            return None;
        };
        let s = p.stats();
        let (syncs0, barriers0, pages0) = *self.mark.lock().unwrap_or_else(|e| e.into_inner());
        let (syncs, barriers) = (s.log_syncs - syncs0, s.log_sync_barriers - barriers0);
        Some(PlushRow {
            levels: s.levels,
            migrations_background: s.migrations_background,
            migrations_inline: s.migrations_inline,
            write_amplification: s.write_amplification,
            write_amplification_model: s.write_amplification_model,
            dram_bytes_reserved: s.dram_bytes,
            rss_anon_bytes: rss_anon_bytes(),
            dram_entries_log2: s.dram_entries_log2,
            migrations: s.migrations,
            fences: s.fences,
            log_syncs: s.log_syncs,
            log_sync_barriers: s.log_sync_barriers,
            log_sync_us: s.log_sync_us,
            phase_log_syncs: syncs,
            phase_log_sync_barriers: barriers,
            phase_writers_per_sync: barriers as f64 / syncs.max(1) as f64,
            phase_log_pages_per_sync: (s.log_sync_pages - pages0) as f64 / syncs.max(1) as f64,
            payload_appends: s.payload_appends,
            payload_bytes: s.payload_bytes,
            payload_gc_runs: s.payload_gc_runs,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(
        &self,
        workload: &str,
        dist: &str,
        threads: usize,
        records: u64,
        operations: u64,
        seconds: f64,
        cpu: Cpu,
        found: u64,
        latency_us: Option<Latency>,
    ) -> Result<(), Fail> {
        let ops_per_sec = operations as f64 / seconds;
        if self.sink.human() {
            let tail = latency_us.map_or(String::new(), |l| {
                format!(" p99.9 {:.0} us max {:.0} us", l.p999, l.max)
            });
            println!(
                "{:8} {:8} {:14} threads={} records={:<9} {:>10.0} ops/s ({:.0} per thread){}",
                self.engine,
                workload,
                dist,
                threads,
                records,
                ops_per_sec,
                ops_per_sec / threads as f64,
                tail
            );
        }
        self.sink.row(&Row {
            bench: "plush",
            engine: self.engine,
            workload,
            dist,
            threads,
            records,
            operations,
            seconds,
            cpu_seconds: cpu.total(),
            cpu_user_seconds: cpu.user,
            cpu_sys_seconds: cpu.sys,
            ops_per_sec,
            ops_per_sec_per_thread: ops_per_sec / threads as f64,
            ops_per_cpu_sec: operations as f64 / cpu.total().max(1e-9),
            durability: self.durability,
            found,
            key_bytes: self.sizes.0,
            value_bytes: self.sizes.1,
            latency_us,
            plush: self.plush_row(),
        })?;
        Ok(())
    }

    /// Loads items 0..n in one thread, sampling Plush's DRAM use ten times on the way.
    fn preload(&self, n: u64) -> Result<u64, Fail> {
        let mut h = self.target.handle(self.sizes)?;
        self.start_phase();
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let step = (n / 10).max(1);
        for i in 0..n {
            h.put(key_of(i), i)?;
            if matches!(self.target, Target::Plush(_)) && (i + 1) % step == 0 {
                let cpu = Cpu {
                    user: 1.0,
                    sys: 0.0,
                };
                self.emit("dram", "-", 1, i + 1, 0, 1.0, cpu, 0, None)?;
            }
        }
        self.emit(
            "preload",
            "-",
            1,
            0,
            n,
            t0.elapsed().as_secs_f64(),
            cpu_seconds() - c0,
            0,
            None,
        )?;
        Ok(n)
    }

    /// One timed phase on `threads` threads, each running `ops` operations.
    fn phase(
        &self,
        workload: &str,
        dist_name: &str,
        threads: usize,
        records: u64,
        ops: u64,
        dist: Option<(&RequestDist, u64)>,
    ) -> Result<(), Fail> {
        self.start_phase();
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let timed = self.latency && dist.is_none();
        let results: Vec<Result<(u64, Vec<u64>), String>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || -> Result<(u64, Vec<u64>), String> {
                        let mut h = self.target.handle(self.sizes)?;
                        let mut found = 0;
                        let mut lat = Vec::new();
                        match dist {
                            None if timed => {
                                lat.reserve(ops as usize);
                                let first = records + t as u64 * ops;
                                for i in first..first + ops {
                                    let t0 = Instant::now();
                                    h.put(key_of(i), i)?;
                                    lat.push(t0.elapsed().as_nanos() as u64);
                                }
                            }
                            None => {
                                let first = records + t as u64 * ops;
                                for i in first..first + ops {
                                    h.put(key_of(i), i)?;
                                }
                            }
                            Some((d, seed)) => {
                                let seed = seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9);
                                let mut sampler =
                                    Sampler::new(d, records, seed).map_err(|e| e.to_string())?;
                                let mut coin = seed | 1;
                                for i in 0..ops {
                                    let item = sampler.next_item();
                                    coin ^= coin << 13;
                                    coin ^= coin >> 7;
                                    coin ^= coin << 17;
                                    if workload == "scan100" {
                                        found += h.scan(key_of(item), 100)? as u64;
                                    } else if workload == "mixed50" && coin & 1 == 0 {
                                        h.put(key_of(item), i)?;
                                    } else {
                                        found += h.get(key_of(item))? as u64;
                                    }
                                }
                            }
                        }
                        Ok((found, lat))
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a client thread panicked".into()))
                })
                .collect()
        });
        let seconds = t0.elapsed().as_secs_f64();
        let mut found = 0;
        let mut lat = Vec::new();
        for r in results {
            let (f, l) = r?;
            found += f;
            lat.extend(l);
        }
        self.emit(
            workload,
            dist_name,
            threads,
            records,
            ops * threads as u64,
            seconds,
            cpu_seconds() - c0,
            found,
            Latency::of(lat),
        )
    }
}
