//! `attune-bench pipes io|sort`: Data Pipes against `fio` and external sorts against their peers.
//!
//! `pipes io`: reads of one file into memory, per mechanism (io_uring, threads, mmap), block
//! size and queue depth, each point beside `fio` with the same settings (io_uring ↔ fio's
//! `io_uring` engine with fixed buffers and registered files at `iodepth=QD`; threads ↔ `psync`
//! with `numjobs=QD`; mmap ↔ `mmap`, queue depth 1), same file, same duration, interleaved.
//! One row per (tool, mechanism, pattern, block, depth): MiB/s and IOPS.
//!
//! `pipes sort`: one input of sort-benchmark records (attune-workload's `records`), sorted by
//! each engine at the same memory limit: `pipes` (attune-pipes' external sort; `pipes:KEY=off`
//! for its ablations `double_buffering`, `early_spill`, `direct_io`; `pipes:merge_fan_in=K`,
//! `pipes:merge_select=loser-tree|heap|scan` for the merge's width and its selection of the next record),
//! `plain` (a straightforward pread/pwrite
//! sort: memory-sized runs sorted by one thread, one merge of every run through a binary heap),
//! `gnu-sort` (`LC_ALL=C sort -S LIMIT --parallel=CPUS`) and `duckdb` (ORDER BY to Parquet with
//! `memory_limit`, through `--python`). Before each run the input is dropped from the page
//! cache (`posix_fadvise(DONTNEED)`), or with `--drop-caches` the whole page cache (`sync;
//! echo 3 > /proc/sys/vm/drop_caches`, root only; an error otherwise), so that every engine and
//! repeat starts cold. Each engine's time ends with an fsync of its output. Outputs of `pipes` and `plain` are checked (sorted, same
//! size); one row per engine and repeat. `--lines N` sorts N lines instead (attune-workload's
//! `records::line`, `--line-bytes MIN-MAX` printable characters each, 10-200 by default): the
//! pipes sort with `RecordFormat::Lines`, `plain` reading and merging lines with buffered I/O,
//! GNU sort and DuckDB as they are; outputs of `pipes`, `plain` and `gnu-sort` are checked (lines
//! in byte order, same size).
//!
//! `pipes merge`: the sort's k-way merge alone, in memory (no I/O): k sorted runs of records
//! merged into one buffer by each way of picking the next record (`loser-tree`, `heap`, `scan`;
//! see attune-pipes' `merge` module), interleaved; the output's order is checked.

use std::collections::BinaryHeap;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use attune_pipes::merge::{self, Selector};
use attune_pipes::sort::{sort_file, RecordFormat, SortOptions};
use attune_pipes::MergeSelect;
use attune_pipes::{
    DramOptions, FileOptions, Locator, Mechanism, MechanismChoice, PipeOptions, Runtime,
    RuntimeOptions,
};
use attune_workload::records;
use attune_workload::rng::SplitMix64;
use serde::Serialize;

use crate::options::{parse_count, parse_size};
use crate::output::{Fail, Sink};
use crate::rundir::RunDir;

const USAGE: &str = "usage: attune-bench pipes io [--file PATH] [--file-size SIZE] \
[--mechanisms io_uring,threads,mmap] [--block-sizes 4KiB,64KiB,1MiB] [--queue-depths 1,4,16,64] \
[--pattern randread|read] [--direct on|off] [--registration per-block|whole|off] \
[--sqpoll-idle-ms MS] [--submit-batch N] [--seed S] [--huge-pages on|off|both] \
[--seconds S] [--repeat N] [--no-fio] [--out FILE] [--json]\n\
       attune-bench pipes sort [--records N | --lines N [--line-bytes MIN-MAX]] [--memory SIZE] \
[--engines pipes,plain,gnu-sort,duckdb] [--dir DIR] [--drop-caches] [--repeat N] [--python PATH] [--seed S] [--out FILE] [--json]\n\
       attune-bench pipes merge [--records N] [--runs 2,4,8,16,50,64] [--selects loser-tree,heap,scan] \
[--repeat N] [--seed S] [--out FILE] [--json]\n\
       attune-bench pipes compact [--records N] [--value-bytes SIZE] [--blob-bytes SIZE] \
[--blob-every K] [--repeat N] [--dir DIR] [--out FILE] [--json]";

/// Runs `attune-bench pipes ARGS`.
pub fn run(args: Vec<String>, sink: &Sink) -> Result<(), Fail> {
    match args.first().map(String::as_str) {
        Some("io") => io(&args[1..], sink),
        Some("sort") => sort(&args[1..], sink),
        Some("merge") => merge_bench(&args[1..], sink),
        Some("compact") => crate::pipes_compact::run(&args[1..], sink),
        Some("--help") | Some("-h") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(Fail::Usage(format!("unknown mode `{other}`\n{USAGE}"))),
    }
}

fn list<T>(text: &str, f: impl Fn(&str) -> Result<T, Fail>) -> Result<Vec<T>, Fail> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| f(s.trim()))
        .collect()
}

fn usage<E: std::fmt::Display>(e: E) -> Fail {
    Fail::Usage(e.to_string())
}

#[derive(Serialize)]
struct IoRow {
    bench: &'static str,
    tool: String,
    mechanism: String,
    pattern: String,
    direct: bool,
    block_bytes: u64,
    queue_depth: u32,
    file_bytes: u64,
    /// Which of the `--repeat` runs of this point (tools alternate within each).
    repeat: u32,
    bytes: u64,
    seconds: f64,
    mib_per_s: f64,
    iops: f64,
    registered_buffer: bool,
    fixed_file: bool,
    /// How the memory was registered: `per-block` (one buffer per queue slot, as fio does),
    /// `whole` (one buffer) or `off` (fio: `fixedbufs=0`, `registerfiles=0`).
    registration: String,
    /// io_uring's submission-queue polling thread (ours: `sqpoll_idle_ms`; fio:
    /// `sqthread_poll=1`): on or off.
    sqpoll: bool,
    /// Seed of the random offsets (ours: SplitMix64; fio: `randrepeat=1`, `randseed`): both
    /// tools draw uniform block-aligned offsets, a fresh sequence per repeat.
    seed: u64,
    /// Requests the block device completed during the measurement (/sys/dev/block/*/stat;
    /// absent where unreadable): with `device_ms_per_request` it tells a tool that keeps the
    /// device's queue full from one that leaves it idle between requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    device_requests: Option<u64>,
    /// Milliseconds the device spent per read request on average (its read ticks over reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    device_ms_per_request: Option<f64>,
    /// The machine's 1-minute load average when the run started (`/proc/loadavg`): the machine
    /// is shared, and a run under heavier load is less comparable.
    #[serde(skip_serializing_if = "Option::is_none")]
    loadavg_1m: Option<f64>,
    /// The memory read into was mapped for huge pages (pipes: `Locator::huge_pages`; fio's
    /// `mem=malloc` buffers never are).
    huge_pages: bool,
    /// io_uring requests per `io_uring_enter` at most (ours: `submit_batch`; fio:
    /// `iodepth_batch_submit`, whose 0 means the whole depth as ours means every ready one).
    submit_batch: u32,
}

/// The read counters of the block device holding `path`: (reads completed, read ticks in ms).
fn device_reads(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let text = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    let f: Vec<u64> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    Some((*f.first()?, *f.get(3)?))
}

fn io(args: &[String], sink: &Sink) -> Result<(), Fail> {
    let mut file: Option<PathBuf> = None;
    let mut file_size = 1u64 << 30;
    let mut mechs = "io_uring,threads,mmap".to_string();
    let mut blocks = "4KiB,64KiB,1MiB".to_string();
    let mut depths = "1,4,16,64".to_string();
    let mut pattern = "randread".to_string();
    let mut direct = true;
    let mut seconds = 2.0f64;
    let mut fio = true;
    let mut repeat = 1u32;
    let mut registration = "per-block".to_string();
    let mut seed = 42u64;
    let mut sqpoll_idle_ms: Option<u32> = None;
    let mut submit_batch = RuntimeOptions::default().submit_batch;
    let mut huge_pages = "on".to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| Fail::Usage(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--file" => file = Some(PathBuf::from(val()?)),
            "--file-size" => file_size = parse_size(&val()?).map_err(usage)?,
            "--mechanisms" => mechs = val()?,
            "--block-sizes" => blocks = val()?,
            "--queue-depths" => depths = val()?,
            "--pattern" => pattern = val()?,
            "--direct" => direct = matches!(val()?.as_str(), "on" | "true" | "1"),
            "--seconds" => seconds = val()?.parse().map_err(usage)?,
            "--no-fio" => fio = false,
            "--repeat" => repeat = val()?.parse::<u32>().map_err(usage)?.max(1),
            "--registration" => registration = val()?,
            "--seed" => seed = val()?.parse().map_err(usage)?,
            "--sqpoll-idle-ms" => sqpoll_idle_ms = Some(val()?.parse().map_err(usage)?),
            "--huge-pages" => huge_pages = val()?,
            "--submit-batch" => submit_batch = val()?.parse().map_err(usage)?,
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(Fail::Usage(format!("unknown option {other}\n{USAGE}"))),
        }
    }
    // The pipe's memory on huge pages (attune-pipes' default), on small pages, or both, each
    // as its own tool in the same interleaved runs: `pipes:huge_pages=off` is the ablation.
    let pipe_tools: &[&str] = match huge_pages.as_str() {
        "on" => &["pipes"],
        "off" => &["pipes:huge_pages=off"],
        "both" => &["pipes", "pipes:huge_pages=off"],
        other => {
            return Err(Fail::Usage(format!(
                "--huge-pages {other}: on, off or both"
            )))
        }
    };
    if !matches!(registration.as_str(), "per-block" | "whole" | "off") {
        return Err(Fail::Usage(format!(
            "--registration {registration}: per-block, whole or off"
        )));
    }
    if pattern != "randread" && pattern != "read" {
        return Err(Fail::Usage(format!(
            "--pattern {pattern}: randread or read"
        )));
    }
    let mechs: Vec<Mechanism> = list(&mechs, |s| {
        match s.parse::<MechanismChoice>().map_err(usage)? {
            MechanismChoice::Only(m) => Ok(m),
            MechanismChoice::Auto => {
                Err(Fail::Usage("name the mechanisms (auto is not one)".into()))
            }
        }
    })?;
    let blocks = list(&blocks, |s| parse_size(s).map_err(usage))?;
    let depths = list(&depths, |s| s.parse::<u32>().map_err(usage))?;
    let tmp;
    let path = match file {
        Some(p) => p,
        None => {
            tmp = disk_scratch("pipes-io")?;
            tmp.path().join("data")
        }
    };
    ensure_file(&path, file_size)?;
    let fio_ok = fio
        && Command::new("fio")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if fio && !fio_ok {
        eprintln!(
            "attune-bench pipes: fio not found (Debian package `fio`); measuring pipes alone"
        );
    }
    // The file is read once before the grid, so that every point (ours and fio's) starts from
    // the same cache state below the guest (a virtual disk's host cache fills as it is read).
    if sink.progress() {
        eprintln!(
            "pipes io: reading {} once to warm the layers below",
            path.display()
        );
    }
    warm(&path, file_size)?;
    let mut point = 0usize;
    for &m in &mechs {
        for &bs in &blocks {
            for &qd in &depths {
                let qd = if m == Mechanism::Mmap { 1 } else { qd };
                let dir = direct && m != Mechanism::Mmap;
                if sink.progress() {
                    eprintln!("pipes io: {m} {pattern} bs={bs} qd={qd} direct={dir}");
                }
                for r in 0..repeat {
                    // Rotate which tool goes first, so none always follows another.
                    let mut tools: Vec<&str> = pipe_tools.to_vec();
                    tools.push("fio");
                    let n = tools.len();
                    tools.rotate_left(point % n);
                    point += 1;
                    let how = Setting {
                        m,
                        pattern: &pattern,
                        direct: dir,
                        bs,
                        qd,
                        seconds,
                        registration: &registration,
                        seed: seed + u64::from(r),
                        sqpoll_idle_ms,
                        huge_pages: true,
                        submit_batch,
                    };
                    for tool in tools {
                        let how = Setting {
                            huge_pages: tool != "pipes:huge_pages=off",
                            ..how
                        };
                        let load = crate::machine::loadavg_1m();
                        let before = device_reads(&path);
                        let mut row = if tool != "fio" {
                            let mut row = measure_pipes(&path, file_size, &how)?;
                            row.tool = tool.into();
                            row
                        } else if fio_ok {
                            measure_fio(&path, file_size, &how)?
                        } else {
                            continue;
                        };
                        row.repeat = r;
                        row.registration = if m == Mechanism::IoUring {
                            registration.clone()
                        } else {
                            "n/a".into()
                        };
                        row.seed = how.seed;
                        row.loadavg_1m = load;
                        if tool == "fio" {
                            row.sqpoll = m == Mechanism::IoUring && sqpoll_idle_ms.is_some();
                        }
                        if let (Some(a), Some(b)) = (before, device_reads(&path)) {
                            let n = b.0.saturating_sub(a.0);
                            row.device_requests = Some(n);
                            if n > 0 {
                                row.device_ms_per_request =
                                    Some(b.1.saturating_sub(a.1) as f64 / n as f64);
                            }
                        }
                        sink.row(&row)?;
                        if sink.human() {
                            println!(
                                "{:8} {:8} bs={:>8} qd={:>2} {:>9.1} MiB/s {:>9.0} IOPS",
                                tool,
                                m.name(),
                                bs,
                                qd,
                                row.mib_per_s,
                                row.iops
                            );
                        }
                    }
                }
                if m == Mechanism::Mmap {
                    break; // mmap copies are synchronous: one point per block size
                }
            }
        }
    }
    Ok(())
}

/// A scratch directory on a real disk (`TMPDIR`, else `/var/tmp`: `/tmp` may be memory).
fn disk_scratch(tag: &str) -> Result<RunDir, Fail> {
    let base = std::env::var_os("TMPDIR").map_or_else(|| PathBuf::from("/var/tmp"), PathBuf::from);
    RunDir::fresh_in(&base, tag)
}

/// Makes `path` `size` bytes of records (kept if it already has that size).
fn ensure_file(path: &Path, size: u64) -> Result<(), Fail> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == size) {
        return Ok(());
    }
    let f = std::fs::File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?;
    let chunk = 10 << 20; // 10 MB: whole records
    let mut buf = vec![0u8; chunk];
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(chunk as u64) as usize;
        records::fill(7, off / 100, &mut buf[..n - n % 100]);
        f.write_all_at(&buf[..n], off)
            .map_err(|e| format!("write {}: {e}", path.display()))?;
        off += n as u64;
    }
    f.sync_all()
        .map_err(|e| format!("fsync {}: {e}", path.display()))?;
    Ok(())
}

/// Reads the whole file once (O_DIRECT where possible, so the guest's page cache stays cold).
fn warm(path: &Path, size: u64) -> Result<(), Fail> {
    let e = |e: attune_pipes::Error| Fail::Run(e.to_string());
    let rt = Runtime::new(RuntimeOptions {
        block_bytes: 1 << 20,
        ..Default::default()
    })
    .map_err(e)?;
    let src = Locator::file(
        path,
        FileOptions {
            direct: true,
            ..Default::default()
        },
    )
    .or_else(|_| Locator::file(path, FileOptions::default()))
    .map_err(e)?;
    let mem = Locator::dram(32 << 20).map_err(e)?;
    let pipe = rt.pipe(&src, &mem, PipeOptions::default()).map_err(e)?;
    let whole = size / (32 << 20) * (32 << 20);
    let mut off = 0;
    while off < whole {
        pipe.transfer_blocking(off, 0, 32 << 20).map_err(e)?;
        off += 32 << 20;
    }
    drop_cache(path);
    Ok(())
}

fn drop_cache(path: &Path) {
    if let Ok(f) = std::fs::File::open(path) {
        // SAFETY: advisory call on an open descriptor.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
}

/// One point of the grid, as both tools run it.
#[derive(Clone, Copy)]
struct Setting<'a> {
    m: Mechanism,
    pattern: &'a str,
    direct: bool,
    bs: u64,
    qd: u32,
    seconds: f64,
    registration: &'a str,
    seed: u64,
    sqpoll_idle_ms: Option<u32>,
    /// The pipe's memory asked for huge pages (`DramOptions::huge_pages`).
    huge_pages: bool,
    submit_batch: u32,
}

fn measure_pipes(path: &Path, size: u64, how: &Setting) -> Result<IoRow, Fail> {
    let Setting {
        m,
        pattern,
        direct,
        bs,
        qd,
        seconds,
        ..
    } = *how;
    let e = |e: attune_pipes::Error| Fail::Run(e.to_string());
    let rt = Runtime::new(RuntimeOptions {
        mechanism: MechanismChoice::Only(m),
        queue_depth: qd.max(1),
        block_bytes: bs,
        register_buffers: how.registration != "off",
        fixed_files: how.registration != "off",
        register_per_block: how.registration == "per-block",
        sqpoll_idle_ms: how.sqpoll_idle_ms,
        submit_batch: how.submit_batch,
    })
    .map_err(e)?;
    let src = Locator::file(
        path,
        FileOptions {
            direct,
            ..Default::default()
        },
    )
    .map_err(e)?;
    let blocks_in_file = size / bs;
    // Segments per transfer: at least two per queue slot, and up to 16 MiB or 128 segments
    // (whichever is fewer), so that a transfer ends well within the measured time and the tail
    // after the deadline is short.
    let batch = ((16u64 << 20) / bs)
        .min(128)
        .max(2 * u64::from(qd.max(1)))
        .min(blocks_in_file.max(1));
    // Every segment of the two transfers kept pending reads into its own block of memory, as
    // each of fio's requests owns its buffer until it completes: two requests in flight into
    // the same memory would make the layers below (here a virtual disk whose host copies into
    // guest memory) write the same pages at once, which is no fair comparison. The memory is
    // two batches of blocks, 2 to 256 blocks, so it is still registered one buffer per block.
    let mem = Locator::dram_with(
        2 * batch * bs,
        DramOptions {
            huge_pages: how.huge_pages,
        },
    )
    .map_err(e)?;
    let pipe = rt.pipe(&src, &mem, PipeOptions::default()).map_err(e)?;
    let mut rng = SplitMix64::new(how.seed);
    let mut next_seq = 0u64;
    let mut half = 0u64;
    let mut make = |rng: &mut SplitMix64| -> Vec<(u64, u64, u64)> {
        half ^= 1;
        (0..batch)
            .map(|i| {
                let b = if pattern == "randread" {
                    rng.next_u64() % blocks_in_file
                } else {
                    let b = next_seq % blocks_in_file;
                    next_seq += 1;
                    b
                };
                (b * bs, (half * batch + i) * bs, bs)
            })
            .collect()
    };
    drop_cache(path);
    let deadline = Duration::from_secs_f64(seconds);
    let t0 = Instant::now();
    let mut bytes = 0u64;
    let mut pending = std::collections::VecDeque::new();
    pending.push_back(pipe.transfer_segments(&make(&mut rng)).map_err(e)?);
    pending.push_back(pipe.transfer_segments(&make(&mut rng)).map_err(e)?);
    while let Some(t) = pending.pop_front() {
        bytes += t.wait().map_err(e)?;
        if t0.elapsed() < deadline {
            pending.push_back(pipe.transfer_segments(&make(&mut rng)).map_err(e)?);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let st = pipe.state();
    Ok(IoRow {
        bench: "pipes-io",
        tool: "pipes".into(),
        mechanism: m.name().into(),
        pattern: pattern.into(),
        direct,
        block_bytes: bs,
        queue_depth: qd,
        file_bytes: size,
        repeat: 0,
        bytes,
        seconds: secs,
        mib_per_s: bytes as f64 / secs / (1 << 20) as f64,
        iops: (bytes / bs) as f64 / secs,
        registered_buffer: st.registered_buffer,
        fixed_file: st.fixed_file,
        registration: String::new(),
        sqpoll: rt.report().sqpoll,
        seed: 0,
        device_requests: None,
        device_ms_per_request: None,
        loadavg_1m: None,
        huge_pages: mem.huge_pages(),
        submit_batch: how.submit_batch,
    })
}

fn measure_fio(path: &Path, size: u64, how: &Setting) -> Result<IoRow, Fail> {
    let Setting {
        m,
        pattern,
        direct,
        bs,
        qd,
        seconds,
        ..
    } = *how;
    let mut cmd = Command::new("fio");
    cmd.arg("--name=pipes")
        .arg(format!("--filename={}", path.display()));
    cmd.arg(format!("--rw={pattern}"))
        .arg(format!("--bs={bs}"))
        .arg(format!("--size={size}"));
    cmd.arg(format!("--direct={}", u8::from(direct)))
        .arg("--time_based");
    cmd.arg(format!("--runtime={}ms", (seconds * 1000.0) as u64));
    cmd.arg("--output-format=json")
        .arg("--randrepeat=1")
        .arg(format!("--randseed={}", how.seed))
        .arg("--norandommap");
    match m {
        Mechanism::IoUring => {
            cmd.arg("--ioengine=io_uring")
                .arg(format!("--iodepth={qd}"));
            let reg = u8::from(how.registration != "off");
            cmd.arg(format!("--fixedbufs={reg}"))
                .arg(format!("--registerfiles={reg}"));
            if how.sqpoll_idle_ms.is_some() {
                cmd.arg("--sqthread_poll=1");
            }
            cmd.arg(format!("--iodepth_batch_submit={}", how.submit_batch));
        }
        Mechanism::Threads => {
            cmd.arg("--ioengine=psync")
                .arg(format!("--numjobs={qd}"))
                .arg("--thread");
            cmd.arg("--group_reporting");
        }
        _ => {
            cmd.arg("--ioengine=mmap");
        }
    }
    drop_cache(path);
    let out = cmd.output().map_err(|e| format!("fio: {e}"))?;
    if !out.status.success() {
        return Err(Fail::Run(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find('{').unwrap_or(0);
    let v: serde_json::Value =
        serde_json::from_str(&text[start..]).map_err(|e| format!("fio JSON: {e}"))?;
    let job = &v["jobs"][0]["read"];
    let bw = job["bw_bytes"].as_f64().unwrap_or(0.0);
    let iops = job["iops"].as_f64().unwrap_or(0.0);
    let secs = job["runtime"].as_f64().unwrap_or(0.0) / 1000.0;
    Ok(IoRow {
        bench: "pipes-io",
        tool: "fio".into(),
        mechanism: m.name().into(),
        pattern: pattern.into(),
        direct,
        block_bytes: bs,
        queue_depth: qd,
        file_bytes: size,
        repeat: 0,
        bytes: job["io_bytes"].as_u64().unwrap_or(0),
        seconds: secs,
        mib_per_s: bw / (1 << 20) as f64,
        iops,
        registered_buffer: m == Mechanism::IoUring && how.registration != "off",
        fixed_file: m == Mechanism::IoUring && how.registration != "off",
        registration: String::new(),
        sqpoll: false,
        seed: 0,
        device_requests: None,
        device_ms_per_request: None,
        loadavg_1m: None,
        huge_pages: false,
        submit_batch: how.submit_batch,
    })
}

#[derive(Serialize)]
struct SortRow {
    bench: &'static str,
    engine: String,
    /// `fixed` (100-byte records) or `lines`.
    format: &'static str,
    /// Records, or lines with `--lines`.
    records: u64,
    /// Characters per line without its newline (min, max), with `--lines`.
    #[serde(skip_serializing_if = "Option::is_none")]
    line_bytes: Option<(usize, usize)>,
    bytes: u64,
    memory_bytes: u64,
    repeat: u32,
    seconds: f64,
    mib_per_s: f64,
    /// User + system CPU seconds of the sort (this process's for in-process engines, the
    /// child's for GNU sort and DuckDB): steadier than wall time on a shared machine.
    cpu_seconds: f64,
    /// The whole page cache was dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`) before
    /// this run, not just the input's pages (`posix_fadvise(DONTNEED)`).
    drop_caches: bool,
    /// `seconds` includes an fsync of the output.
    output_synced: bool,
    checked: bool,
    /// The straightforward sort's phases (the pipes sort's are in `report`).
    #[serde(skip_serializing_if = "Option::is_none")]
    phases: Option<PlainPhases>,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<attune_pipes::sort::SortReport>,
}

/// Wall and CPU seconds of the straightforward sort's two phases.
#[derive(Serialize)]
struct PlainPhases {
    runs: usize,
    run_seconds: f64,
    run_cpu_seconds: f64,
    merge_seconds: f64,
    merge_cpu_seconds: f64,
}

/// `sync; echo 3 > /proc/sys/vm/drop_caches`: every engine starts with a cold page cache.
fn drop_page_cache() -> Result<(), Fail> {
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        Fail::Run(format!(
            "--drop-caches: cannot write /proc/sys/vm/drop_caches ({e}); it needs root \
             (without --drop-caches only the input's pages are dropped, with posix_fadvise)"
        ))
    })
}

/// fsync of `path` (an engine's output).
fn sync_file(path: &Path) -> Result<(), Fail> {
    std::fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| Fail::Run(format!("fsync {}: {e}", path.display())))
}

#[derive(Serialize)]
struct MergeRow {
    bench: &'static str,
    engine: String,
    runs: usize,
    records: u64,
    repeat: u32,
    seconds: f64,
    mrecords_per_s: f64,
    /// CPU seconds of the merging thread: unlike wall time, not stretched while other work
    /// holds the core.
    cpu_seconds: f64,
    mrecords_per_cpu_s: f64,
}

/// CPU seconds of the calling thread so far.
fn thread_cpu_seconds() -> f64 {
    // SAFETY: a zeroed timespec is a valid out-parameter.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is valid and writable.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// `pipes merge`: the sort's k-way merge in memory alone (no I/O): `--records` records (100 B,
/// 10-byte keys) cut into k equal runs, each sorted, then merged into one buffer by each
/// selection (`loser-tree`, `heap`, `scan`), interleaved; one row per (selection, k, repeat).
fn merge_bench(args: &[String], sink: &Sink) -> Result<(), Fail> {
    let mut n = 4_000_000u64;
    let mut ks = "2,4,8,16,50,64".to_string();
    let mut selects = "loser-tree,heap,scan".to_string();
    let mut repeat = 3u32;
    let mut seed = 1u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| Fail::Usage(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--records" => n = parse_count("--records", &val()?).map_err(usage)?,
            "--runs" => ks = val()?,
            "--selects" => selects = val()?,
            "--repeat" => repeat = val()?.parse().map_err(usage)?,
            "--seed" => seed = val()?.parse().map_err(usage)?,
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(Fail::Usage(format!("unknown option {other}\n{USAGE}"))),
        }
    }
    let ks: Vec<usize> = ks
        .split(',')
        .map(|s| s.parse::<usize>().map_err(usage))
        .collect::<Result<_, _>>()?;
    if ks.iter().any(|&k| k == 0 || k as u64 > n.max(1)) {
        return Err(Fail::Usage("--runs: each k must be 1..=records".into()));
    }
    let selects: Vec<MergeSelect> = selects
        .split(',')
        .map(|s| {
            MergeSelect::parse(s).ok_or_else(|| {
                Fail::Usage(format!(
                    "unknown selection `{s}`; valid: loser-tree, heap, scan"
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    let mut data = vec![0u8; (n * 100) as usize];
    records::fill(seed, 0, &mut data);
    let key = |r: &[u8]| {
        let mut k = [0u8; 16];
        k[6..16].copy_from_slice(&r[..10]);
        u128::from_be_bytes(k)
    };
    // Touched before the first timing, so no selection pays the output's page faults.
    let mut out = vec![1u8; data.len()];
    for &k in &ks {
        // k runs, each sorted by key (record order inside equal keys kept).
        let per = (n as usize).div_ceil(k) * 100;
        let mut sorted = Vec::with_capacity(data.len());
        for run in data.chunks(per) {
            let mut recs: Vec<&[u8]> = run.chunks_exact(100).collect();
            recs.sort_by(|a, b| a[..10].cmp(&b[..10]));
            for r in recs {
                sorted.extend_from_slice(r);
            }
        }
        let runs: Vec<&[u8]> = sorted.chunks(per).collect();
        for r in 0..repeat {
            for &sel in &selects {
                let t0 = Instant::now();
                let c0 = thread_cpu_seconds();
                let heads: Vec<u128> = runs
                    .iter()
                    .enumerate()
                    .map(|(i, p)| merge::head(key(p), i))
                    .collect();
                let mut pos = vec![0usize; runs.len()];
                let mut s = Selector::new(sel, &heads);
                let mut o = 0usize;
                loop {
                    let top = s.top();
                    if top == merge::DONE {
                        break;
                    }
                    let i = merge::source_of(top);
                    let p = pos[i];
                    out[o..o + 100].copy_from_slice(&runs[i][p..p + 100]);
                    o += 100;
                    pos[i] = p + 100;
                    s.replace_top(if p + 100 < runs[i].len() {
                        merge::head(key(&runs[i][p + 100..]), i)
                    } else {
                        merge::DONE
                    });
                }
                let secs = t0.elapsed().as_secs_f64();
                let cpu = thread_cpu_seconds() - c0;
                if o != out.len()
                    || out
                        .chunks_exact(100)
                        .zip(out.chunks_exact(100).skip(1))
                        .any(|(a, b)| a[..10] > b[..10])
                {
                    return Err(Fail::Run(format!(
                        "{}: merge of {k} runs out of order",
                        sel.name()
                    )));
                }
                let row = MergeRow {
                    bench: "pipes-merge",
                    engine: sel.name().into(),
                    runs: k,
                    records: n,
                    repeat: r,
                    seconds: secs,
                    mrecords_per_s: n as f64 / secs / 1e6,
                    cpu_seconds: cpu,
                    mrecords_per_cpu_s: n as f64 / cpu.max(1e-9) / 1e6,
                };
                sink.row(&row)?;
                if sink.human() {
                    println!(
                        "{:12} k={k:3} {secs:8.3} s {:8.2} M records/s",
                        sel.name(),
                        row.mrecords_per_s
                    );
                }
            }
        }
    }
    Ok(())
}

fn sort(args: &[String], sink: &Sink) -> Result<(), Fail> {
    let mut n = 10_000_000u64;
    let mut memory = 256u64 << 20;
    let mut engines = "pipes,plain,gnu-sort,duckdb".to_string();
    let mut dir: Option<PathBuf> = None;
    let mut repeat = 1u32;
    let mut python = "python3".to_string();
    let mut seed = 1u64;
    let mut drop_caches = false;
    let mut lines: Option<u64> = None;
    let mut line_bytes = (10usize, 200usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| Fail::Usage(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--records" => n = parse_count("--records", &val()?).map_err(usage)?,
            "--memory" => memory = parse_size(&val()?).map_err(usage)?,
            "--engines" => engines = val()?,
            "--dir" => dir = Some(PathBuf::from(val()?)),
            "--repeat" => repeat = val()?.parse().map_err(usage)?,
            "--python" => python = val()?,
            "--seed" => seed = val()?.parse().map_err(usage)?,
            "--drop-caches" => drop_caches = true,
            "--lines" => lines = Some(parse_count("--lines", &val()?).map_err(usage)?),
            "--line-bytes" => {
                let v = val()?;
                let (lo, hi) = v.split_once('-').unwrap_or((&v, &v));
                line_bytes = match (lo.parse(), hi.parse()) {
                    (Ok(lo), Ok(hi)) if lo <= hi => (lo, hi),
                    _ => {
                        return Err(Fail::Usage(format!(
                            "--line-bytes {v}: expected MIN-MAX with MIN <= MAX"
                        )))
                    }
                };
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(Fail::Usage(format!("unknown option {other}\n{USAGE}"))),
        }
    }
    if let Some(l) = lines {
        n = l;
    }
    if drop_caches {
        // Fail before generating gigabytes of input when the page cache cannot be dropped.
        drop_page_cache()?;
    }
    let engines: Vec<String> = engines
        .split(',')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    for e in &engines {
        let base = e.split(':').next().unwrap_or("");
        if !["pipes", "plain", "gnu-sort", "duckdb"].contains(&base) {
            return Err(Fail::Usage(format!("unknown sort engine `{e}`; valid: pipes, pipes:double_buffering=off, pipes:early_spill=off, pipes:direct_io=off, pipes:merge_fan_in=K, pipes:merge_select=heap|scan, plain, gnu-sort, duckdb")));
        }
    }
    // The input stays in `--dir` for reruns; the runs, outputs and temporary files of the
    // engines go to a directory of this process inside it, removed on exit, on error and on
    // SIGINT/SIGTERM (without `--dir`, the input goes there too).
    let tmp = match &dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
            RunDir::fresh_in(d, "pipes-sort")?
        }
        None => disk_scratch("pipes-sort")?,
    };
    crate::runner::interrupt::remove_on_signal(tmp.path());
    let work = tmp.path().to_path_buf();
    let input = match lines {
        Some(_) => dir
            .as_ref()
            .unwrap_or(&work)
            .join(format!("input-{}-{}.lines", line_bytes.0, line_bytes.1)),
        None => dir.as_ref().unwrap_or(&work).join("input.records"),
    };
    if sink.progress() {
        eprintln!(
            "pipes sort: generating {n} {}",
            if lines.is_some() { "lines" } else { "records" }
        );
    }
    let bytes = match lines {
        Some(_) => ensure_lines(&input, n, line_bytes, seed)?,
        None => {
            ensure_records(&input, n, seed)?;
            n * 100
        }
    };
    for r in 0..repeat {
        for e in &engines {
            let out = work.join(format!("out-{}", e.replace([':', '='], "_")));
            let _ = std::fs::remove_file(&out);
            if drop_caches {
                drop_page_cache()?;
            } else {
                drop_cache(&input);
            }
            if sink.progress() {
                eprintln!("pipes sort: {e} (repeat {r})");
            }
            let t0 = Instant::now();
            let cpu0 = cpu_seconds();
            let mut report = None;
            let mut phases = None;
            let mut checked = false;
            match e.split(':').next().unwrap_or("") {
                "pipes" => {
                    let mut o = SortOptions {
                        memory_bytes_max: memory,
                        staging_dir: Some(work.clone()),
                        format: if lines.is_some() {
                            RecordFormat::Lines
                        } else {
                            RecordFormat::Fixed
                        },
                        ..Default::default()
                    };
                    if let Some((_, kv)) = e.split_once(':') {
                        for item in kv.split(';') {
                            match item {
                                "double_buffering=off" => o.double_buffering = false,
                                "early_spill=off" => o.early_spill = false,
                                "direct_io=off" => o.direct_io = false,
                                kv if kv.starts_with("merge_select=") => {
                                    let v = &kv["merge_select=".len()..];
                                    o.merge_select = MergeSelect::parse(v).ok_or_else(|| {
                                        Fail::Usage(format!(
                                            "unknown merge_select `{v}`; valid: loser-tree, heap, scan"
                                        ))
                                    })?;
                                }
                                kv if kv.starts_with("merge_fan_in=") => {
                                    let k = kv["merge_fan_in=".len()..].parse().map_err(usage)?;
                                    o.merge_fan_in = Some(k);
                                }
                                other => {
                                    return Err(Fail::Usage(format!("unknown pipes key `{other}`")))
                                }
                            }
                        }
                    }
                    report = Some(sort_file(&input, &out, &o, None).map_err(|e| e.to_string())?);
                }
                "plain" if lines.is_some() => {
                    phases = Some(plain_sort_lines(&input, &out, memory, &work)?)
                }
                "plain" => phases = Some(plain_sort(&input, &out, memory, &work)?),
                "gnu-sort" => {
                    let st = Command::new("sort")
                        .env("LC_ALL", "C")
                        .arg("-S")
                        .arg(format!("{}K", memory >> 10))
                        .arg(format!(
                            "--parallel={}",
                            std::thread::available_parallelism().map_or(1, |n| n.get())
                        ))
                        .arg("-T")
                        .arg(&work)
                        .arg("-o")
                        .arg(&out)
                        .arg(&input)
                        .status()
                        .map_err(|e| format!("sort: {e}"))?;
                    if !st.success() {
                        return Err(Fail::Run(format!("GNU sort failed: {st}")));
                    }
                }
                _ => {
                    let script = format!(
                        "import duckdb\ncon = duckdb.connect()\ncon.execute(\"SET memory_limit='{}MB'\")\n\
                         con.execute(\"SET threads={}\")\ncon.execute(\"SET temp_directory='{}'\")\n\
                         con.execute(\"SET preserve_insertion_order=false\")\n\
                         con.execute(\"COPY (SELECT line FROM read_csv('{}', columns={{'line': 'VARCHAR'}}, \
                         header=false, delim='\\x01', quote='', escape='', auto_detect=false) ORDER BY line) \
                         TO '{}' (FORMAT parquet)\")\n",
                        memory >> 20,
                        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
                        work.join("duckdb-tmp").display(),
                        input.display(),
                        out.display(),
                    );
                    let o = Command::new(&python)
                        .arg("-c")
                        .arg(&script)
                        .output()
                        .map_err(|e| format!("{python}: {e}"))?;
                    if !o.status.success() {
                        return Err(Fail::Run(format!(
                            "duckdb failed: {}",
                            String::from_utf8_lossy(&o.stderr)
                        )));
                    }
                }
            }
            // Every engine's time ends with its output on disk (the pipes sort syncs its own;
            // the others' outputs may still be in the page cache).
            sync_file(&out)?;
            let secs = t0.elapsed().as_secs_f64();
            let cpu = cpu_seconds() - cpu0;
            if e.starts_with("pipes") || e == "plain" || e == "gnu-sort" {
                if lines.is_some() {
                    check_sorted_lines(&out, bytes)?;
                } else {
                    check_sorted(&out, n * 100)?;
                }
                checked = true;
            }
            let row = SortRow {
                bench: "pipes-sort",
                engine: e.clone(),
                format: if lines.is_some() { "lines" } else { "fixed" },
                records: n,
                line_bytes: lines.map(|_| line_bytes),
                bytes,
                memory_bytes: memory,
                repeat: r,
                seconds: secs,
                mib_per_s: bytes as f64 / secs / (1 << 20) as f64,
                cpu_seconds: cpu,
                drop_caches,
                output_synced: true,
                checked,
                phases,
                report,
            };
            sink.row(&row)?;
            if sink.human() {
                println!("{e:28} {secs:8.2} s {:8.1} MiB/s", row.mib_per_s);
            }
            let _ = std::fs::remove_file(&out);
        }
    }
    Ok(())
}

/// CPU seconds (user + system) of this process and of its waited-for children so far.
fn cpu_seconds() -> f64 {
    let mut total = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: a zeroed rusage is a valid out-parameter.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is valid and writable.
        if unsafe { libc::getrusage(who, &mut ru) } == 0 {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            total += tv(ru.ru_utime) + tv(ru.ru_stime);
        }
    }
    total
}

fn ensure_records(path: &Path, n: u64, seed: u64) -> Result<(), Fail> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == n * 100) {
        return Ok(());
    }
    let f = std::fs::File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?;
    let per = 100_000u64;
    let mut buf = vec![0u8; (per * 100) as usize];
    let mut i = 0;
    while i < n {
        let k = (n - i).min(per);
        records::fill(seed, i, &mut buf[..(k * 100) as usize]);
        f.write_all_at(&buf[..(k * 100) as usize], i * 100)
            .map_err(|e| format!("write: {e}"))?;
        i += k;
    }
    f.sync_all().map_err(|e| format!("fsync: {e}"))?;
    Ok(())
}

/// Writes `n` lines of `seed` (attune-workload's `records::line`) unless `path` holds them;
/// returns the file's bytes.
fn ensure_lines(path: &Path, n: u64, (lo, hi): (usize, usize), seed: u64) -> Result<u64, Fail> {
    let mut want = 0u64;
    let mut buf = Vec::new();
    let per = 100_000u64;
    let mut i = 0;
    // The size is a function of (n, lengths, seed): computed first, so an existing file of
    // that size is taken as it is.
    while i < n {
        let k = (n - i).min(per);
        buf.clear();
        records::fill_lines(seed, i, k, lo, hi, &mut buf);
        want += buf.len() as u64;
        i += k;
    }
    if std::fs::metadata(path).is_ok_and(|m| m.len() == want) {
        return Ok(want);
    }
    let mut f = BufWriter::with_capacity(
        4 << 20,
        std::fs::File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?,
    );
    let mut i = 0;
    while i < n {
        let k = (n - i).min(per);
        buf.clear();
        records::fill_lines(seed, i, k, lo, hi, &mut buf);
        f.write_all(&buf).map_err(|e| format!("write: {e}"))?;
        i += k;
    }
    let f = f.into_inner().map_err(|e| format!("write: {e}"))?;
    f.sync_all().map_err(|e| format!("fsync: {e}"))?;
    Ok(want)
}

/// The output has `size` bytes and its lines are in byte order.
fn check_sorted_lines(path: &Path, size: u64) -> Result<(), Fail> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    if len != size {
        return Err(Fail::Run(format!(
            "{}: {len} bytes, expected {size}",
            path.display()
        )));
    }
    let mut r = BufReader::with_capacity(
        1 << 20,
        std::fs::File::open(path).map_err(|e| e.to_string())?,
    );
    let (mut prev, mut line) = (Vec::new(), Vec::new());
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).map_err(|e| e.to_string())? == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if line < prev {
            return Err(Fail::Run(format!("{} is not sorted", path.display())));
        }
        std::mem::swap(&mut prev, &mut line);
    }
}

/// The straightforward external sort of lines: read lines with buffered reads into one buffer
/// until it and an index of 8 bytes per line fill 90 % of the memory, sort the index with one
/// thread, write the run with buffered writes, then merge every run at once through a binary
/// heap of lines with buffered reads and writes.
fn plain_sort_lines(
    input: &Path,
    output: &Path,
    memory: u64,
    dir: &Path,
) -> Result<PlainPhases, Fail> {
    let (t0, cpu0) = (Instant::now(), cpu_seconds());
    let budget = (memory * 9 / 10) as usize;
    let mut r = BufReader::with_capacity(
        1 << 20,
        std::fs::File::open(input).map_err(|e| e.to_string())?,
    );
    let mut runs = Vec::new();
    let mut data: Vec<u8> = Vec::with_capacity(budget / 2);
    let mut index: Vec<(u32, u32)> = Vec::new();
    let mut eof = false;
    while !eof {
        data.clear();
        index.clear();
        while data.len() + 8 * index.len() < budget.saturating_sub(1 << 20) {
            let start = data.len();
            if r.read_until(b'\n', &mut data).map_err(|e| e.to_string())? == 0 {
                eof = true;
                break;
            }
            if data.last() != Some(&b'\n') {
                data.push(b'\n');
            }
            index.push((start as u32, (data.len() - start - 1) as u32));
        }
        if index.is_empty() {
            break;
        }
        let line = |&(o, l): &(u32, u32)| &data[o as usize..(o + l) as usize];
        index.sort_unstable_by(|a, b| line(a).cmp(line(b)));
        let p = dir.join(format!("plain-run-{}", runs.len()));
        let mut w = BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(&p).map_err(|e| e.to_string())?,
        );
        for e in &index {
            w.write_all(&data[e.0 as usize..(e.0 + e.1 + 1) as usize])
                .map_err(|e| e.to_string())?;
        }
        w.flush().map_err(|e| e.to_string())?;
        runs.push(p);
    }
    drop((data, index));
    let (t1, cpu1) = (Instant::now(), cpu_seconds());
    let per_run_buf = ((memory / 10) / (runs.len() as u64 + 1)).clamp(64 << 10, 4 << 20) as usize;
    let mut readers: Vec<BufReader<std::fs::File>> = runs
        .iter()
        .map(|p| std::fs::File::open(p).map(|f| BufReader::with_capacity(per_run_buf, f)))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut out = BufWriter::with_capacity(
        per_run_buf,
        std::fs::File::create(output).map_err(|e| e.to_string())?,
    );
    // Heads without their newline: a line sorts before every longer line it starts.
    let next = |rd: &mut BufReader<std::fs::File>, l: &mut Vec<u8>| -> Result<bool, Fail> {
        l.clear();
        let n = rd.read_until(b'\n', l).map_err(|e| e.to_string())?;
        if l.last() == Some(&b'\n') {
            l.pop();
        }
        Ok(n > 0)
    };
    let mut heap = BinaryHeap::new();
    for (i, rd) in readers.iter_mut().enumerate() {
        let mut l = Vec::new();
        if next(rd, &mut l)? {
            heap.push(std::cmp::Reverse((l, i)));
        }
    }
    while let Some(std::cmp::Reverse((mut l, i))) = heap.pop() {
        out.write_all(&l).map_err(|e| e.to_string())?;
        out.write_all(b"\n").map_err(|e| e.to_string())?;
        if next(&mut readers[i], &mut l)? {
            heap.push(std::cmp::Reverse((l, i)));
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    for p in &runs {
        let _ = std::fs::remove_file(p);
    }
    Ok(PlainPhases {
        runs: runs.len(),
        run_seconds: (t1 - t0).as_secs_f64(),
        run_cpu_seconds: cpu1 - cpu0,
        merge_seconds: t1.elapsed().as_secs_f64(),
        merge_cpu_seconds: cpu_seconds() - cpu1,
    })
}

fn check_sorted(path: &Path, size: u64) -> Result<(), Fail> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    if len != size {
        return Err(Fail::Run(format!(
            "{}: {len} bytes, expected {size}",
            path.display()
        )));
    }
    let mut r = BufReader::with_capacity(
        1 << 20,
        std::fs::File::open(path).map_err(|e| e.to_string())?,
    );
    let mut prev = [0u8; 10];
    let mut rec = [0u8; 100];
    let mut first = true;
    while r.read_exact(&mut rec).is_ok() {
        if !first && rec[..10] < prev[..] {
            return Err(Fail::Run(format!("{} is not sorted", path.display())));
        }
        prev.copy_from_slice(&rec[..10]);
        first = false;
    }
    Ok(())
}

/// The straightforward external sort: read memory-sized runs with pread, sort them with one
/// thread, write them with pwrite, then merge every run at once through a binary heap with
/// buffered reads and writes.
fn plain_sort(input: &Path, output: &Path, memory: u64, dir: &Path) -> Result<PlainPhases, Fail> {
    let (t0, cpu0) = (Instant::now(), cpu_seconds());
    let f = std::fs::File::open(input).map_err(|e| e.to_string())?;
    let total = f.metadata().map_err(|e| e.to_string())?.len();
    let run_records = ((memory * 9 / 10) / 100).max(1);
    let mut runs = Vec::new();
    let mut off = 0u64;
    let mut buf: Vec<[u8; 100]> = Vec::new();
    while off < total {
        let n = ((total - off) / 100).min(run_records) as usize;
        buf.resize(n, [0u8; 100]);
        // SAFETY: [u8; 100] has alignment 1 and no padding: the Vec is n*100 plain bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), n * 100) };
        f.read_exact_at(bytes, off).map_err(|e| e.to_string())?;
        buf.sort_unstable_by(|a, b| a[..10].cmp(&b[..10]));
        let p = dir.join(format!("plain-run-{}", runs.len()));
        let w = std::fs::File::create(&p).map_err(|e| e.to_string())?;
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n * 100) };
        w.write_all_at(bytes, 0).map_err(|e| e.to_string())?;
        runs.push(p);
        off += n as u64 * 100;
    }
    drop(buf);
    let (t1, cpu1) = (Instant::now(), cpu_seconds());
    let per_run_buf = ((memory / 10) / (runs.len() as u64 + 1)).clamp(64 << 10, 4 << 20) as usize;
    let mut readers: Vec<BufReader<std::fs::File>> = runs
        .iter()
        .map(|p| std::fs::File::open(p).map(|f| BufReader::with_capacity(per_run_buf, f)))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut out = BufWriter::with_capacity(
        per_run_buf,
        std::fs::File::create(output).map_err(|e| e.to_string())?,
    );
    let mut heap = BinaryHeap::new();
    for (i, r) in readers.iter_mut().enumerate() {
        let mut rec = [0u8; 100];
        if r.read_exact(&mut rec).is_ok() {
            heap.push(std::cmp::Reverse((rec, i)));
        }
    }
    while let Some(std::cmp::Reverse((rec, i))) = heap.pop() {
        out.write_all(&rec).map_err(|e| e.to_string())?;
        let mut next = [0u8; 100];
        if readers[i].read_exact(&mut next).is_ok() {
            heap.push(std::cmp::Reverse((next, i)));
        }
    }
    out.flush().map_err(|e| e.to_string())?;
    for p in &runs {
        let _ = std::fs::remove_file(p);
    }
    Ok(PlainPhases {
        runs: runs.len(),
        run_seconds: (t1 - t0).as_secs_f64(),
        run_cpu_seconds: cpu1 - cpu0,
        merge_seconds: t1.elapsed().as_secs_f64(),
        merge_cpu_seconds: cpu_seconds() - cpu1,
    })
}
