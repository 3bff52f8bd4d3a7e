//! `attune-bench device-kv`: Attune on the simulated SSD (`attune_kv::env::DeviceEnv`).
//!
//! Run: `attune-bench device-kv [fillrandom|ycsb-e|all] [--keys N] [--ops N] [--no-gc]
//! [--reps N] [--config DEVICE] [--readahead-stripes N] [--model FILE] [--out FILE] [--json]`.
//! Rows:
//! * `fillrandom/<config>/<case>` for planted SSD configurations: the device is first profiled
//!   (`attune_io::profile`), the learned parameters are mapped to a layout
//!   (`DeviceLayout::from_learned`) and to options (`DeviceLayout::tune_sizes`, the table block
//!   the flash page, or one learned chunk with `DeviceLayout::chunk_block_size`; compaction
//!   read-ahead in whole stripes with `DeviceLayout::compaction_readahead_bytes`), then the
//!   same fillrandom runs as `untuned` (file-system default), `untuned-readahead` (the default
//!   with the tuned read-ahead size), `layout` (the layout alone), `tuned-page-block` (layout
//!   and page block), `tuned-no-readahead` (layout and chunk block) and `tuned` (layout, chunk
//!   block and read-ahead), in a deterministic schedule (`fill_once`): ops per simulated second
//!   and its paired ratio to untuned, what the simulated time is made of, flash pages (per
//!   kind of file too), the minimum, write amplification; then a readrandom on the same
//!   database shows what the block size costs a point read. `--no-gc` turns the device's
//!   garbage-collection periods off in the runs (rows `fillrandom-nogc/...`); `--reps` (default
//!   7), `--config` (one device) and `--readahead-stripes N` (the read-ahead in N units of the
//!   learned alignment instead of the rule) are for quick looks, not the figure.
//! * `ycsb-e/<load order>/<prefetcher>`: YCSB workload E (95 % scans of 1–100 records, 5 %
//!   inserts, zipfian) over 4 KiB values in the value log, with prefetching off, `fixed` (the
//!   engine's read-ahead of the next `blob_prefetch_depth` values of a scan), `readahead` (Linux's
//!   ramp-up at the block layer), `tinfetch-no-network` and, with `--model`, `tinfetch` (TinFetch
//!   at the block layer, its network off and on), then the engine's `prefetcher = tinfetch`
//!   (`engine-tinfetch`, with `--model`) and its ablations (`engine-tinfetch-*`): operations per
//!   simulated second and their ratio to `fixed`, device reads, prefetch hits, bytes and bytes
//!   wasted, and the engine prefetcher's own counters. Prefetched blocks live in a 4 MiB buffer
//!   (at most a tenth of the values), beside a 4 MiB block cache.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use attune_io::model::QuantizedMlp;
use attune_io::prefetch;
use attune_io::profile::{self, ProfileConfig};
use attune_io::ssd::SsdParams;
use attune_kv::env::{DeviceEnv, DeviceLayout, DeviceStats, MemEnv, FILE_KINDS};
use attune_kv::{LearnedIndex, Options, Prefetcher, ReadOptions, DB};
use attune_workload::op::Op;
use attune_workload::rng::Xoshiro256;
use attune_workload::ycsb::{CoreWorkload, InsertOrder, YcsbConfig};

use crate::output::{Fail, Sink};

const USAGE: &str = "usage: attune-bench device-kv [fillrandom|ycsb-e|all|ycsb-e-disk] [--keys N] \
                     [--ops N] [--no-gc] [--model TINFETCH_MODEL] [--dir DIR] [--reps N] \
                     [--config DEVICE] [--readahead-stripes N] \
                     [--out FILE] [--json]";

/// Planted devices of the fillrandom comparison: (name, chunk, page, stripe chips).
const CONFIGS: [(&str, u32, u32, u32); 5] = [
    ("c64k-p16k-s4", 64 << 10, 16 << 10, 4),
    ("c16k-p4k-s4", 16 << 10, 4 << 10, 4),
    ("c32k-p8k-s8", 32 << 10, 8 << 10, 8),
    ("c128k-p16k-s2", 128 << 10, 16 << 10, 2),
    ("c64k-p32k-s4", 64 << 10, 32 << 10, 4),
];

#[derive(Serialize)]
struct FillRow<'a> {
    bench: &'static str,
    kind: &'static str,
    case: String,
    config: &'a str,
    layout: &'static str,
    align_bytes: u64,
    extent_bytes: u64,
    write_bytes: u64,
    keys: u64,
    value_bytes: usize,
    reps: u32,
    device_seconds: f64,
    ops_per_sec: f64,
    ops_per_sec_min: f64,
    ops_per_sec_max: f64,
    /// Median over the repetitions of ops/s ÷ the untuned run's with the same keys and device
    /// seed, and the smallest and largest of those ratios.
    ops_ratio: f64,
    ops_ratio_min: f64,
    ops_ratio_max: f64,
    /// Median of flash pages ÷ the untuned run's, paired the same way, and the same as per
    /// cent fewer pages (`(1 − pages_ratio) · 100`, which two decimals of the ratio hide).
    pages_ratio: f64,
    pages_fewer_pct: f64,
    flash_pages: u64,
    min_flash_pages: u64,
    write_amplification: f64,
    device_writes: u64,
    device_write_mib: f64,
    device_reads: u64,
    ssd_flushes: u64,
    ssd_stalled_writes: u64,
    block_size: usize,
    target_file_size: u64,
    /// `Options::compaction_readahead_bytes` (0: the table iterator's own read-ahead).
    compaction_readahead_bytes: u64,
    /// Flash pages programmed and their minimum, per kind of file (wal, table, vlog,
    /// manifest, other).
    pages_by_kind: std::collections::BTreeMap<&'static str, [u64; 2]>,
    /// The WAL's and the tables' flash pages over their minimum.
    wal_extra_pages: u64,
    table_extra_pages: u64,
    /// The tables' flash pages (all of them).
    table_pages: u64,
    /// readrandom on the database the fill left (`keys / 10` gets of written keys, 8 MiB block
    /// cache): gets per simulated second (median), the median of its paired ratios to
    /// `untuned`, and device reads and KiB read per get.
    readrandom_gets: u64,
    readrandom_gets_per_sec: f64,
    readrandom_ratio: f64,
    readrandom_device_reads_per_get: f64,
    readrandom_kib_per_get: f64,
    /// What the fill's simulated time is made of (medians over the repetitions, seconds):
    /// device writes (of which writes that waited for the device's write buffer), demand
    /// reads, waits for prefetched (read-ahead) blocks, and the part of those two reads'
    /// time whose slowest device read touched a chip in a garbage-collection period.
    time_write_s: f64,
    time_stall_s: f64,
    time_read_s: f64,
    time_prefetch_wait_s: f64,
    time_gc_read_s: f64,
    /// Device reads (demand and read-ahead) and MiB read during the fill.
    fill_device_reads: u64,
    fill_prefetches: u64,
    fill_read_mib: f64,
}

#[derive(Serialize)]
struct ScanRow {
    bench: &'static str,
    kind: &'static str,
    case: String,
    load_order: &'static str,
    prefetcher: String,
    records: u64,
    ops: u64,
    scans: u64,
    records_scanned: u64,
    device_seconds: f64,
    ops_per_sec: f64,
    device_reads: u64,
    prefetch_reads: u64,
    prefetch_mib: f64,
    prefetch_hits: u64,
    prefetch_late: u64,
    /// Prefetched MiB a demand read used, and the rest (wasted).
    prefetch_used_mib: f64,
    prefetch_wasted_mib: f64,
    /// Operations per second over the `fixed` row of the same load order.
    vs_fixed: Option<f64>,
    /// `engine-*` rows (`prefetcher = tinfetch`): MiB the pointer hints read and used, MiB the
    /// block prefetcher (readahead and network) read and used, network inferences.
    hint_mib: f64,
    hint_used_mib: f64,
    block_mib: f64,
    block_used_mib: f64,
    inferences: u64,
}

fn num(it: &mut std::slice::Iter<'_, String>, flag: &str) -> Result<u64, Fail> {
    it.next()
        .and_then(|s| s.parse().ok())
        .filter(|&n: &u64| n > 0)
        .ok_or_else(|| Fail::Usage(format!("{flag} needs a positive integer")))
}

fn kv(e: impl std::fmt::Display) -> Fail {
    Fail::Run(e.to_string())
}

/// Runs `attune-bench device-kv ARGS`.
pub fn run(args: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    let mut what = "all".to_string();
    let mut keys = 200_000u64;
    let mut gc = true;
    let mut ops = 2_000u64;
    let mut model: Option<String> = None;
    let mut dir: Option<String> = None;
    let mut reps: Option<u32> = None;
    let mut config: Option<String> = None;
    let mut readahead_units: Option<u64> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "fillrandom" | "ycsb-e" | "all" | "ycsb-e-disk" => what = a.clone(),
            "--dir" => {
                dir = Some(
                    it.next()
                        .cloned()
                        .ok_or_else(|| Fail::Usage("--dir needs a directory".into()))?,
                )
            }
            "--keys" => keys = num(&mut it, a)?,
            "--reps" => reps = u32::try_from(num(&mut it, a)?.clamp(1, 100)).ok(),
            "--readahead-stripes" => readahead_units = Some(num(&mut it, a)?.min(1024)),
            "--config" => {
                let c = it
                    .next()
                    .cloned()
                    .ok_or_else(|| Fail::Usage("--config needs a device name".into()))?;
                if !CONFIGS.iter().any(|k| k.0 == c) {
                    let names: Vec<&str> = CONFIGS.iter().map(|k| k.0).collect();
                    return Err(Fail::Usage(format!(
                        "unknown device {c}; one of {}",
                        names.join(", ")
                    )));
                }
                config = Some(c);
            }
            "--no-gc" => gc = false,
            "--ops" => ops = num(&mut it, a)?,
            "--model" => {
                model = Some(
                    it.next()
                        .cloned()
                        .ok_or_else(|| Fail::Usage("--model needs a file".into()))?,
                )
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(Fail::Usage(format!("unknown argument {other}; {USAGE}"))),
        }
    }
    let model = match model {
        Some(p) => {
            let b = std::fs::read(&p).map_err(|e| Fail::Usage(format!("{p}: {e}")))?;
            let m = QuantizedMlp::from_bytes(&b).map_err(|e| Fail::Usage(format!("{p}: {e}")))?;
            Some((m, p))
        }
        None => None,
    };
    if what == "ycsb-e-disk" {
        let dir = dir.ok_or_else(|| Fail::Usage(format!("ycsb-e-disk needs --dir; {USAGE}")))?;
        let m = model.as_ref().map(|(_, p)| p.as_str());
        return ycsb_e_disk(keys / 10, ops, reps.unwrap_or(3), Path::new(&dir), m, sink);
    }
    if what != "ycsb-e" {
        let look = Look {
            reps: reps.unwrap_or(REPS),
            only: config.as_deref(),
            readahead_units,
        };
        fillrandom(keys, gc, &look, sink)?;
    }
    if what != "fillrandom" {
        ycsb_e(
            keys / 10,
            ops,
            model.as_ref().map(|(m, p)| (m, p.as_str())),
            sink,
        )?;
    }
    Ok(())
}

fn planted(chunk: u32, page: u32, sc: u32) -> SsdParams {
    SsdParams {
        chunk_bytes: chunk,
        page_bytes: page,
        mapping_bytes: 4096.min(page),
        stripe_chips: sc,
        map_fetch_us: 10.0,
        ..SsdParams::default()
    }
}

/// User bytes (keys and values) between two memtable flushes of the fillrandom runs.
const FLUSH_USER_BYTES: u64 = 4 << 20;

fn fill_opts() -> Options {
    Options {
        // Larger than the flush interval: the memtable never switches by itself (see
        // `fill_once`).
        write_buffer_size: 64 << 20,
        target_file_size: 4 << 20,
        max_bytes_for_level_base: 16 << 20,
        wal_sync_interval_ms: 0,
        block_cache_size: 8 << 20,
        // No background reads of tables that are not part of the workload.
        learned_index: LearnedIndex::Off,
        ..Options::default()
    }
}

/// Repetitions of each fillrandom configuration (each with its own keys and device seed).
const REPS: u32 = 7;

/// Whether no level needs compacting (the engine's own score rule: L0 files against the
/// trigger, every other level's bytes against its target; the last level never).
fn settled(db: &DB, o: &Options) -> bool {
    let s = db.stats();
    if s.level_files.first().copied().unwrap_or(0) >= o.l0_compaction_trigger {
        return false;
    }
    let mut target = o.max_bytes_for_level_base;
    let n = s.level_bytes.len();
    for &b in s.level_bytes.iter().take(n.saturating_sub(1)).skip(1) {
        if b > target {
            return false;
        }
        target = target.saturating_mul(o.level_size_multiplier);
    }
    true
}

/// One fillrandom of `keys` puts on a fresh simulated device.
///
/// The schedule is deterministic: the writer flushes the memtable itself every
/// `FLUSH_USER_BYTES` and then waits until compaction has nothing left to do, so background
/// work never races the writer for the simulated clock and two runs with the same keys submit
/// the same I/O in the same order (the CPU is free in this model: background work keeps up).
fn fill_once(
    p: &SsdParams,
    layout: DeviceLayout,
    opts: &Options,
    keys: u64,
    value_bytes: usize,
    rep: u32,
) -> Result<FillRun, Fail> {
    // The device's seed (its garbage-collection periods) changes with the repetition too, so
    // the median is not one draw of where those periods fall.
    let seed = 11 + u64::from(rep);
    let env =
        Arc::new(DeviceEnv::new(Arc::new(MemEnv::new()), p.clone(), seed, layout).map_err(kv)?);
    let db = DB::open_with_env(env.clone(), Path::new("/db"), opts.clone()).map_err(kv)?;
    let mut rng = Xoshiro256::new(42, u64::from(rep) + 1);
    let mut value = vec![0u8; value_bytes];
    let mut pending = 0u64;
    let mut written = Vec::with_capacity(keys as usize);
    let settle = |db: &DB| -> Result<(), Fail> {
        db.flush().map_err(kv)?;
        // Bounded: a compaction of a few MiB finishes in well under a minute of host time.
        for _ in 0..600_000 {
            if settled(db, opts) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        Err(Fail::Run(
            "compaction did not settle within a minute".into(),
        ))
    };
    for i in 0..keys {
        let k = rng.below(keys.saturating_mul(4));
        // Half random, half zeros: compressible to about half, as db_bench's values are.
        value[..8].copy_from_slice(&i.to_le_bytes());
        for c in value[8..value_bytes / 2].chunks_mut(8) {
            let r = rng.next_u64().to_le_bytes();
            c.copy_from_slice(&r[..c.len()]);
        }
        let key = format!("key{k:012}");
        db.put(key.as_bytes(), &value).map_err(kv)?;
        written.push(k);
        pending += (key.len() + value.len()) as u64;
        if pending >= FLUSH_USER_BYTES {
            settle(&db)?;
            pending = 0;
        }
    }
    settle(&db)?;
    let (fill, ssd) = (env.stats(), env.ssd_stats());
    // readrandom on the same database: gets of keys the fill wrote, in an order of their own,
    // through the 8 MiB block cache (the tables are several times larger), so most gets read
    // a block from the device and a larger block costs its transfer.
    let mut rrng = Xoshiro256::new(43, u64::from(rep) + 1);
    let reads = (keys / 10).max(1);
    for _ in 0..reads {
        let k = written[rrng.below(written.len() as u64) as usize];
        let key = format!("key{k:012}");
        if db.get(key.as_bytes()).map_err(kv)?.is_none() {
            return Err(Fail::Run(format!(
                "readrandom: {key} written but not found"
            )));
        }
    }
    let after = env.stats();
    db.close().map_err(kv)?;
    drop(db);
    Ok(FillRun {
        fill,
        ssd,
        read_ns: after.clock_ns - fill.clock_ns,
        read_device_reads: after.reads - fill.reads,
        read_device_bytes: after.read_bytes - fill.read_bytes,
        reads,
    })
}

/// One fillrandom and the readrandom after it.
#[derive(Clone, Copy)]
struct FillRun {
    /// Device counters at the end of the fill (before the reads).
    fill: DeviceStats,
    ssd: attune_io::ssd::SsdStats,
    /// Simulated time, device reads and bytes read of the readrandom phase.
    read_ns: u64,
    read_device_reads: u64,
    read_device_bytes: u64,
    reads: u64,
}

/// `gc` false turns the device's garbage-collection periods off (zero length) in the runs (not
/// in the profile), so that the comparison shows the layout alone.
/// What a quick look changes in the fillrandom comparison (the figure uses the defaults).
struct Look<'a> {
    /// Repetitions (default 7).
    reps: u32,
    /// Only this planted device.
    only: Option<&'a str>,
    /// Compaction read-ahead of `tuned` and `untuned-readahead` in this many units of the
    /// layout's alignment (the learned stripe) instead of `compaction_readahead_bytes`' rule.
    readahead_units: Option<u64>,
}

fn fillrandom(keys: u64, gc: bool, look: &Look<'_>, sink: &Sink) -> Result<(), Fail> {
    const VALUE: usize = 400;
    for (name, chunk, page, sc) in CONFIGS {
        if look.only.is_some_and(|o| o != name) {
            continue;
        }
        let p = planted(chunk, page, sc);
        let learned = profile::profile_simulated(&p, &ProfileConfig::default(), 7, &mut |_, _| {})
            .map_err(kv)?
            .learned;
        let tuned = DeviceLayout::from_learned(&learned);
        let p = SsdParams {
            gc_duration_us: if gc { p.gc_duration_us } else { 0.0 },
            ..p
        };
        let kind = if gc { "fillrandom" } else { "fillrandom-nogc" };
        let mut tuned_opts = fill_opts();
        tuned.tune_sizes(
            &learned,
            &mut tuned_opts.block_size,
            &mut tuned_opts.target_file_size,
        );
        // `tuned`: the page block of `tune_sizes` replaced by one block per learned chunk
        // (`chunk_block_size`); `tuned-page-block` keeps the page block, so the two levers
        // are each on and off in the rows.
        let mut chunk_opts = tuned_opts.clone();
        if let Some(c) = DeviceLayout::chunk_block_size(&learned) {
            chunk_opts.block_size = c;
        }
        // `tuned`: the chunk block and compaction read-ahead in whole learned stripes
        // (`compaction_readahead_bytes`); `tuned-no-readahead` is the same without the
        // read-ahead, and `untuned-readahead` the default engine with the same read-ahead
        // size (what the read-ahead is worth without the layout).
        let readahead = match look.readahead_units {
            Some(n) => tuned.align_bytes * n,
            None => DeviceLayout::compaction_readahead_bytes(&learned).unwrap_or(0),
        };
        let mut ra_opts = chunk_opts.clone();
        ra_opts.compaction_readahead_bytes = readahead;
        let mut untuned_ra = fill_opts();
        untuned_ra.compaction_readahead_bytes = readahead;
        let cases = [
            ("untuned", DeviceLayout::default(), fill_opts()),
            ("untuned-readahead", DeviceLayout::default(), untuned_ra),
            ("layout", tuned, fill_opts()),
            ("tuned-page-block", tuned, tuned_opts),
            ("tuned-no-readahead", tuned, chunk_opts),
            ("tuned", tuned, ra_opts),
        ];
        // runs[case][rep]: every case runs with the same keys and device seed in a repetition,
        // so the ratios to `untuned` are paired.
        let mut runs: Vec<Vec<FillRun>> = Vec::new();
        for (_, layout, opts) in &cases {
            let mut v = Vec::new();
            for rep in 0..look.reps {
                v.push(fill_once(&p, *layout, opts, keys, VALUE, rep)?);
            }
            runs.push(v);
        }
        let ops = |s: &DeviceStats| keys as f64 / (s.clock_ns as f64 / 1e9);
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        for (ci, (label, layout, opts)) in cases.iter().enumerate() {
            let ratios: Vec<f64> = (0..look.reps as usize)
                .map(|r| ops(&runs[ci][r].fill) / ops(&runs[0][r].fill))
                .collect();
            let page_ratios: Vec<f64> = (0..look.reps as usize)
                .map(|r| runs[ci][r].fill.flash_pages as f64 / runs[0][r].fill.flash_pages as f64)
                .collect();
            let (rlo, rhi) = ratios
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            let mut by_ops = runs[ci].clone();
            by_ops.sort_by(|a, b| ops(&a.fill).total_cmp(&ops(&b.fill)));
            let (lo, hi) = (ops(&by_ops[0].fill), ops(&by_ops[by_ops.len() - 1].fill));
            let mid = by_ops[by_ops.len() / 2];
            let (s, ssd) = (mid.fill, mid.ssd);
            let gets = |r: &FillRun| r.reads as f64 / (r.read_ns.max(1) as f64 / 1e9);
            let read_ratio = median(
                (0..look.reps as usize)
                    .map(|r| gets(&runs[ci][r]) / gets(&runs[0][r]))
                    .collect(),
            );
            let read_gets_per_sec = median(runs[ci].iter().map(gets).collect());
            let read_kib_per_get = median(
                runs[ci]
                    .iter()
                    .map(|r| r.read_device_bytes as f64 / 1024.0 / r.reads as f64)
                    .collect(),
            );
            let read_device_per_get = median(
                runs[ci]
                    .iter()
                    .map(|r| r.read_device_reads as f64 / r.reads as f64)
                    .collect(),
            );
            let secs = s.clock_ns as f64 / 1e9;
            let part = |f: &dyn Fn(&DeviceStats) -> u64| {
                median(runs[ci].iter().map(|r| f(&r.fill) as f64 / 1e9).collect())
            };
            let pages_by_kind = FILE_KINDS
                .iter()
                .zip(s.by_kind.iter())
                .filter(|(_, k)| k.writes > 0)
                .map(|(&n, k)| (n, [k.flash_pages, k.min_flash_pages]))
                .collect();
            let (ops_ratio, pages_ratio) = (median(ratios), median(page_ratios));
            if sink.human() {
                println!(
                    "{kind} {name:<14} {label:<16} {:>8.0} ops/s ({lo:.0}..{hi:.0})  x{ops_ratio:.3} ({rlo:.3}..{rhi:.3})  pages {:>8} (min {:>8}, WA {:.3}, x{pages_ratio:.3})  readrandom x{read_ratio:.3} ({read_kib_per_get:.1} KiB read per get)  {:?}",
                    keys as f64 / secs,
                    s.flash_pages,
                    s.min_flash_pages,
                    s.write_amplification(),
                    pages_by_kind,
                );
                println!(
                    "    time s: write {:.3} (stall {:.3})  read {:.3}  prefetch wait {:.3}  \
                     gc {:.3}  | reads {} prefetches {} {:.1} MiB",
                    part(&|d| d.write_ns),
                    part(&|d| d.stall_ns),
                    part(&|d| d.read_ns),
                    part(&|d| d.prefetch_wait_ns),
                    part(&|d| d.gc_wait_ns),
                    s.reads,
                    s.prefetches,
                    (s.read_bytes + s.prefetch_bytes) as f64 / (1u64 << 20) as f64,
                );
            }
            sink.row(&FillRow {
                bench: "device-kv",
                kind,
                case: format!("{kind}/{name}/{label}"),
                config: name,
                layout: label,
                align_bytes: layout.align_bytes,
                extent_bytes: layout.extent_bytes,
                write_bytes: layout.write_bytes,
                keys,
                value_bytes: VALUE,
                reps: look.reps,
                device_seconds: secs,
                ops_per_sec: keys as f64 / secs,
                ops_per_sec_min: lo,
                ops_per_sec_max: hi,
                ops_ratio,
                ops_ratio_min: rlo,
                ops_ratio_max: rhi,
                pages_ratio,
                pages_fewer_pct: (1.0 - pages_ratio) * 100.0,
                flash_pages: s.flash_pages,
                min_flash_pages: s.min_flash_pages,
                write_amplification: s.write_amplification(),
                device_writes: s.writes,
                device_write_mib: s.write_bytes as f64 / (1u64 << 20) as f64,
                device_reads: s.reads,
                ssd_flushes: ssd.flushes,
                ssd_stalled_writes: ssd.stalled_writes,
                block_size: opts.block_size,
                target_file_size: opts.target_file_size,
                compaction_readahead_bytes: opts.compaction_readahead_bytes,
                pages_by_kind,
                wal_extra_pages: s.by_kind[0].flash_pages - s.by_kind[0].min_flash_pages,
                table_extra_pages: s.by_kind[1].flash_pages - s.by_kind[1].min_flash_pages,
                table_pages: s.by_kind[1].flash_pages,
                readrandom_gets: runs[ci][0].reads,
                readrandom_gets_per_sec: read_gets_per_sec,
                readrandom_ratio: read_ratio,
                readrandom_device_reads_per_get: read_device_per_get,
                readrandom_kib_per_get: read_kib_per_get,
                time_write_s: part(&|d| d.write_ns),
                time_stall_s: part(&|d| d.stall_ns),
                time_read_s: part(&|d| d.read_ns),
                time_prefetch_wait_s: part(&|d| d.prefetch_wait_ns),
                time_gc_read_s: part(&|d| d.gc_wait_ns),
                fill_device_reads: s.reads,
                fill_prefetches: s.prefetches,
                fill_read_mib: (s.read_bytes + s.prefetch_bytes) as f64 / (1u64 << 20) as f64,
            })?;
        }
    }
    Ok(())
}

/// The prefetch buffer of the YCSB E runs.
const PREFETCH_BUFFER_BYTES: u64 = 4 << 20;

/// The engine options of a YCSB E row: `fixed` is the engine's default rule, `engine-*` rows
/// are `prefetcher = tinfetch` (with the model unless `-no-network`, one part switched off by
/// the suffix), every other row turns the engine's read-ahead off (the block layer's
/// prefetcher, if any, runs alone).
fn scan_opts(method: &str, model: Option<&str>) -> Options {
    let mut o = Options {
        write_buffer_size: 8 << 20,
        wal_sync_interval_ms: 0,
        block_cache_size: 4 << 20,
        min_blob_size: 1024,
        blob_prefetch_depth: 16,
        prefetcher: Prefetcher::Off,
        ..Options::default()
    };
    if method == "fixed" {
        o.prefetcher = Prefetcher::Fixed;
    }
    if let Some(variant) = method.strip_prefix("engine-tinfetch") {
        o.prefetcher = Prefetcher::TinFetch;
        if variant != "-no-network" {
            o.prefetch_model = model.unwrap_or_default().to_string();
        }
        let s = &mut o.prefetch_switches;
        match variant {
            "-no-history" => s.history = false,
            "-no-merge" => s.merge = false,
            "-no-throttle" => s.throttle = false,
            "-hints-only" => s.block_streams = false,
            "-no-block-throttle" => s.block_throttle = false,
            "-no-skip-resident" => s.skip_resident = false,
            "-cap-hints" => s.cap_hints = true,
            "-first-read-first" => s.first_read_first = true,
            "-unguarded" => {
                s.block_throttle = false;
                s.skip_resident = false;
            }
            _ => {}
        }
    }
    o
}

/// Engine-level variants (`prefetcher = tinfetch` and its ablations).
const ENGINE_VARIANTS: [&str; 9] = [
    "engine-tinfetch-no-network",
    "engine-tinfetch-no-history",
    "engine-tinfetch-no-merge",
    "engine-tinfetch-no-throttle",
    "engine-tinfetch-hints-only",
    "engine-tinfetch-no-block-throttle",
    "engine-tinfetch-cap-hints",
    "engine-tinfetch-first-read-first",
    "engine-tinfetch-unguarded",
];

fn ycsb_e(
    records: u64,
    ops: u64,
    model: Option<(&QuantizedMlp, &str)>,
    sink: &Sink,
) -> Result<(), Fail> {
    let mut methods = vec!["fixed", "off", "readahead", "tinfetch-no-network"];
    if model.is_some() {
        methods.extend(["tinfetch", "engine-tinfetch"]);
    }
    methods.extend(ENGINE_VARIANTS);
    let (model, model_path) = (model.map(|m| m.0), model.map(|m| m.1));
    let p = planted(64 << 10, 16 << 10, 4);
    for (order, io) in [
        ("ordered", InsertOrder::Ordered),
        ("hashed", InsertOrder::Hashed),
    ] {
        let mut fixed_ops: Option<f64> = None;
        for &method in &methods {
            let mut cfg = YcsbConfig::core(CoreWorkload::E, records, ops, 5);
            cfg.field_count = 1;
            cfg.field_length = 4096;
            cfg.insert_order = io;
            let env = Arc::new(
                DeviceEnv::new(
                    Arc::new(MemEnv::new()),
                    p.clone(),
                    11,
                    DeviceLayout::default(),
                )
                .map_err(kv)?,
            );
            let db =
                DB::open_with_env(env.clone(), Path::new("/db"), scan_opts(method, model_path))
                    .map_err(kv)?;
            let mut value = vec![7u8; 4096];
            for op in cfg.load().map_err(kv)? {
                if let Op::Insert { key, .. } = op {
                    value[..8].copy_from_slice(&key.to_le_bytes());
                    db.put(&key.to_be_bytes(), &value).map_err(kv)?;
                }
            }
            db.flush().map_err(kv)?;
            db.compact_range(None, None).map_err(kv)?;
            // Prefetched blocks are kept in a buffer far smaller than the 4 KiB values (a
            // tenth of them at most), so a run cannot turn into reads from a cached data set.
            env.set_prefetch_buffer_bytes(PREFETCH_BUFFER_BYTES.min(records * 4096 / 10));
            if method == "readahead" || method.starts_with("tinfetch") {
                env.set_prefetcher(Some(prefetch::build(method, model).map_err(kv)?));
            }
            let before = env.stats();
            let pf_before = db.stats().prefetch;
            let (mut scans, mut scanned) = (0u64, 0u64);
            for op in cfg.run().map_err(kv)? {
                match op {
                    Op::Scan { start: key, len } => {
                        scans += 1;
                        let mut it = db.iter(&ReadOptions::default()).map_err(kv)?;
                        it.seek(&key.to_be_bytes());
                        let mut n = 0;
                        while it.valid() && n < len {
                            scanned += 1;
                            n += 1;
                            it.next();
                        }
                    }
                    Op::Insert { key, .. } => {
                        db.put(&key.to_be_bytes(), &value).map_err(kv)?;
                    }
                    _ => {}
                }
            }
            let s = env.stats();
            let pf = db.stats().prefetch;
            db.close().map_err(kv)?;
            let secs = (s.clock_ns - before.clock_ns) as f64 / 1e9;
            let mib = |b: u64| b as f64 / 1048576.0;
            let ops_per_sec = ops as f64 / secs;
            if method == "fixed" {
                fixed_ops = Some(ops_per_sec);
            }
            let prefetched = s.prefetch_bytes - before.prefetch_bytes;
            let used = s.prefetch_used_bytes - before.prefetch_used_bytes;
            if sink.human() {
                println!(
                    "ycsb-e {order:<8} {method:<34} {:>8.0} ops/s ({:.2}x fixed)  reads {:>7}  prefetch {:>6} ({:.0} MiB, {:.0} MiB wasted, hits {})",
                    ops_per_sec,
                    fixed_ops.map_or(f64::NAN, |f| ops_per_sec / f),
                    s.reads - before.reads,
                    s.prefetches - before.prefetches,
                    mib(prefetched),
                    mib(prefetched.saturating_sub(used)),
                    s.prefetch_hits - before.prefetch_hits
                );
            }
            sink.row(&ScanRow {
                bench: "device-kv",
                kind: "ycsb-e",
                case: format!("ycsb-e/{order}/{method}"),
                load_order: order,
                prefetcher: method.to_string(),
                records,
                ops,
                scans,
                records_scanned: scanned,
                device_seconds: secs,
                ops_per_sec,
                device_reads: s.reads - before.reads,
                prefetch_reads: s.prefetches - before.prefetches,
                prefetch_mib: (s.prefetch_bytes - before.prefetch_bytes) as f64 / 1048576.0,
                prefetch_hits: s.prefetch_hits - before.prefetch_hits,
                prefetch_late: s.prefetch_late - before.prefetch_late,
                prefetch_used_mib: mib(used),
                prefetch_wasted_mib: mib(prefetched.saturating_sub(used)),
                vs_fixed: fixed_ops.map(|f| ops_per_sec / f),
                hint_mib: mib(pf.hint_bytes - pf_before.hint_bytes),
                hint_used_mib: mib(pf.hint_used_bytes - pf_before.hint_used_bytes),
                block_mib: mib(pf.block_bytes - pf_before.block_bytes),
                block_used_mib: mib(pf.block_used_bytes - pf_before.block_used_bytes),
                inferences: pf.inferences - pf_before.inferences,
            })?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct DiskRow {
    bench: &'static str,
    kind: &'static str,
    case: String,
    load_order: &'static str,
    prefetcher: String,
    records: u64,
    ops: u64,
    reps: u32,
    seconds: f64,
    ops_per_sec: f64,
    ops_per_sec_min: f64,
    ops_per_sec_max: f64,
    vs_fixed: Option<f64>,
    hint_mib: f64,
    hint_used_mib: f64,
    block_mib: f64,
    block_used_mib: f64,
    hint_resident: u64,
    block_resident: u64,
    block_paused: u64,
    block_stream_reads: u64,
    block_stream_cached: u64,
}

/// Drops the clean pages of every file in `dir` from the page cache (`POSIX_FADV_DONTNEED`,
/// no privileges needed), so a run starts with its data on the disk.
fn drop_cached(dir: &Path) -> Result<(), Fail> {
    use std::os::fd::AsRawFd;
    for e in std::fs::read_dir(dir).map_err(kv)? {
        let p = e.map_err(kv)?.path();
        if !p.is_file() {
            continue;
        }
        let f = std::fs::File::open(&p).map_err(kv)?;
        f.sync_all().map_err(kv)?;
        // SAFETY: fadvise on a descriptor we own; it only drops clean cached pages.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
    Ok(())
}

/// YCSB E on the real file system in `dir`: the same load and operations as [`ycsb_e`], the
/// engine's `prefetcher` off, fixed, and tinfetch with the fixed depth, with its pointer hints
/// alone, and (given a model) whole.
/// Every repetition starts with the database's files dropped from the page cache; within a run
/// the page cache keeps what it read (the zipfian scans re-read hot values), so the numbers are
/// those of a warming cache, on whatever disk holds `dir`. Wall time, median of `--reps` (default 3) repetitions
/// taken in turn over the settings.
fn ycsb_e_disk(
    records: u64,
    ops: u64,
    reps: u32,
    dir: &Path,
    model: Option<&str>,
    sink: &Sink,
) -> Result<(), Fail> {
    let mut methods = vec![
        "fixed",
        "off",
        "engine-tinfetch-no-history",
        "engine-tinfetch-hints-only",
    ];
    if model.is_some() {
        methods.extend([
            "engine-tinfetch",
            "engine-tinfetch-no-block-throttle",
            "engine-tinfetch-no-skip-resident",
            "engine-tinfetch-cap-hints",
            "engine-tinfetch-first-read-first",
            "engine-tinfetch-unguarded",
        ]);
    }
    let db_dir = dir.join(format!("attune-ycsb-e-disk-{}", std::process::id()));
    for (order, io) in [
        ("ordered", InsertOrder::Ordered),
        ("hashed", InsertOrder::Hashed),
    ] {
        let mut cfg = YcsbConfig::core(CoreWorkload::E, records, ops, 5);
        cfg.field_count = 1;
        cfg.field_length = 4096;
        cfg.insert_order = io;
        let _ = std::fs::remove_dir_all(&db_dir);
        let mut value = vec![7u8; 4096];
        {
            let db = DB::open(&db_dir, scan_opts("off", None)).map_err(kv)?;
            for op in cfg.load().map_err(kv)? {
                if let Op::Insert { key, .. } = op {
                    value[..8].copy_from_slice(&key.to_le_bytes());
                    db.put(&key.to_be_bytes(), &value).map_err(kv)?;
                }
            }
            db.flush().map_err(kv)?;
            db.compact_range(None, None).map_err(kv)?;
            db.close().map_err(kv)?;
        }
        let run_ops: Vec<Op> = cfg.run().map_err(kv)?.collect();
        let mut secs: Vec<Vec<f64>> = vec![Vec::new(); methods.len()];
        let mut pf: Vec<attune_kv::PrefetchStats> = vec![Default::default(); methods.len()];
        for _ in 0..reps {
            for (m, &method) in methods.iter().enumerate() {
                drop_cached(&db_dir)?;
                let db = DB::open(&db_dir, scan_opts(method, model)).map_err(kv)?;
                let t0 = std::time::Instant::now();
                for op in &run_ops {
                    match op {
                        Op::Scan { start: key, len } => {
                            let mut it = db.iter(&ReadOptions::default()).map_err(kv)?;
                            it.seek(&key.to_be_bytes());
                            let mut n = 0;
                            while it.valid() && n < *len {
                                n += 1;
                                it.next();
                            }
                        }
                        Op::Insert { key, .. } => {
                            db.put(&key.to_be_bytes(), &value).map_err(kv)?;
                        }
                        _ => {}
                    }
                }
                secs[m].push(t0.elapsed().as_secs_f64());
                pf[m] = db.stats().prefetch;
                db.close().map_err(kv)?;
            }
        }
        let mut fixed_ops: Option<f64> = None;
        for (m, &method) in methods.iter().enumerate() {
            let mut v = secs[m].clone();
            v.sort_by(f64::total_cmp);
            let med = v[v.len() / 2];
            let ops_per_sec = ops as f64 / med;
            if method == "fixed" {
                fixed_ops = Some(ops_per_sec);
            }
            let mib = |b: u64| b as f64 / 1048576.0;
            if sink.human() {
                println!(
                    "ycsb-e-disk {order:<8} {method:<34} {ops_per_sec:>8.0} ops/s ({:.2}x fixed)",
                    fixed_ops.map_or(f64::NAN, |f| ops_per_sec / f)
                );
            }
            sink.row(&DiskRow {
                bench: "device-kv",
                kind: "ycsb-e-disk",
                case: format!("ycsb-e-disk/{order}/{method}"),
                load_order: order,
                prefetcher: method.to_string(),
                records,
                ops,
                reps,
                seconds: med,
                ops_per_sec,
                ops_per_sec_min: ops as f64 / v[v.len() - 1],
                ops_per_sec_max: ops as f64 / v[0],
                vs_fixed: fixed_ops.map(|f| ops_per_sec / f),
                hint_mib: mib(pf[m].hint_bytes),
                hint_used_mib: mib(pf[m].hint_used_bytes),
                block_mib: mib(pf[m].block_bytes),
                block_used_mib: mib(pf[m].block_used_bytes),
                hint_resident: pf[m].hint_resident,
                block_resident: pf[m].block_resident,
                block_paused: pf[m].block_paused,
                block_stream_reads: pf[m].block_stream_reads,
                block_stream_cached: pf[m].block_stream_cached,
            })?;
        }
    }
    let _ = std::fs::remove_dir_all(&db_dir);
    Ok(())
}
