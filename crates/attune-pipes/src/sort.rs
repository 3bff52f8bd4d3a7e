//! External sort on pipes: fixed-size records (100 bytes, the first 10 the key: the sort
//! benchmark's format), under a memory limit, output written under a temporary name and renamed.
//! Variable-length records (lines ended by `\n`, [`RecordFormat::Lines`]) take the same shape
//! with an index of the lines in place of moving records: `sort_lines.rs`.
//!
//! Shape (docs/data-pipes.md, "External sort"; the chapter's §4.3):
//! 1. **Runs.** The input moves through a read pipe into one of two DRAM buffers of `S` bytes
//!    while the other is sorted (double buffering). A buffer is sorted as cache runs of
//!    `run_bytes` (default half the last-level cache per core), one per core at a time: an
//!    index of 16-byte entries (80-bit key, 32-bit record number) is sorted and the records
//!    gathered in order into a scratch buffer, all inside that core's share of the cache. The
//!    cache runs are merged 4 ways at a time in memory (between the buffer and the scratch,
//!    groups in parallel) until at most 4 are left; the last 4-way merge streams into write
//!    blocks that go to the staging file as soon as each is full (early spilling: the run's
//!    first block is on its way while the rest is merged).
//! 2. **Merges.** Spilled runs are merged `k` at a time (`merge_fan_in`; by default all of them
//!    in one pass when the memory holds two blocks per run, up to 64), each input
//!    double-buffered through its own read pipe and the output through a write pipe, until one
//!    run is left; the groups of a pass run in parallel, one per thread as far as memory
//!    allows. The last merge writes the output.
//!
//! Memory: `2·S` input, `S` scratch, the cache runs' indexes (16 B per 100 B record of one cache
//! run per thread) and two write blocks in phase 1; `2·(k + 1)` blocks per concurrent merge
//! in phase 2. Both stay under `memory_bytes_max`.
//!
//! Interruption: the output is written to `.NAME.attune-sort-PID.tmp` beside the final name,
//! synced, and renamed over it only when complete; on any error or cancellation the temporary
//! file and the staging directory are removed, so the final name never holds a partial sort.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::locator::{cache_bytes, llc_sharing_cpus, FileOptions, Locator, DIRECT_ALIGN_BYTES};
use crate::mechanism::Mechanism;
use crate::merge::{head, source_of, MergeSelect, Selector, DONE};
use crate::runtime::{Pipe, PipeOptions, Runtime, RuntimeOptions, Transfer};

/// Bytes per record.
pub const RECORD_BYTES: u64 = 100;
/// Bytes of the key at the start of each record.
pub const KEY_BYTES: usize = 10;
/// Block sizes are multiples of this: whole records and whole 4 KiB pages.
pub(crate) const UNIT_BYTES: u64 = 102_400;

/// Options of [`sort_file`].
#[derive(Clone, Debug)]
pub struct SortOptions {
    /// Memory for buffers and indexes, in all. Default 256 MiB.
    pub memory_bytes_max: u64,
    /// Bytes of a cache run (sorted by one core at a time). Default: half the last-level
    /// cache per core (the chapter's choice), else 1 MiB when the kernel does not say.
    pub run_bytes: Option<u64>,
    /// Runs merged at a time in memory (cache runs). Default 4 (the chapter's k).
    pub fan_in: usize,
    /// Spilled runs merged at a time on disk. Default None: every run in one pass when the
    /// memory holds two blocks per run (up to 64 runs), else as many as it holds, so that each
    /// byte crosses the disk as few times as the memory allows (the chapter's 4-way rule is
    /// about merges inside the cache; on disk every extra pass reads and writes everything
    /// again). `Some(k)`: k at a time (k = 4 is the chapter's rule applied to disk too).
    pub merge_fan_in: Option<usize>,
    /// How every merge (in memory and on disk) picks its next record. Default `Heap` (`std`'s
    /// binary heap: 8–21 % less CPU per record than the loser tree at k = 4–64 in the
    /// `pipes merge` benchmark, docs/data-pipes.md); `LoserTree` and `Scan` are the ablations.
    pub merge_select: MergeSelect,
    /// Bytes per I/O block of the merges and of the spill. Default 1,024,000 (≈1 MiB, whole
    /// records and pages). Shrunk to fit the memory limit. With lines, also the longest line
    /// taken (with its `\n`).
    pub block_bytes: u64,
    /// Where spilled runs go (a directory made and removed inside it). Default: the output's.
    pub staging_dir: Option<PathBuf>,
    /// Threads sorting cache runs. Default: the CPUs available.
    pub threads: usize,
    /// Read the next buffer while sorting this one. Default on (off: the ablation).
    pub double_buffering: bool,
    /// Write each spill block while gathering the next. Default on (off: the ablation).
    pub early_spill: bool,
    /// Read and write the input, the runs and the output with O_DIRECT (no page-cache copies:
    /// the device moves the bytes to and from the sort's buffers) where the file system and
    /// the mechanism allow it (not the mmap mechanism; a file system that refuses O_DIRECT
    /// gets buffered I/O). Default on (off: the ablation, everything through the page cache).
    pub direct_io: bool,
    /// The runtime's options (mechanism, queue depth).
    pub runtime: RuntimeOptions,
    /// Set to stop the sort: it ends with `Cancelled` and leaves no output.
    pub cancel: Option<Arc<AtomicBool>>,
    /// The records: fixed 100-byte records (default) or newline-terminated lines of any
    /// length up to `block_bytes` (docs/formats/sort-records.md).
    pub format: RecordFormat,
}

/// What the sort's input is made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecordFormat {
    /// 100-byte records ordered by their first 10 bytes (the sort benchmark's format).
    #[default]
    Fixed,
    /// Lines ended by `\n`, of any length up to the block size, ordered byte by byte on the
    /// whole line (`LC_ALL=C sort`'s order); an unterminated last line gets its `\n`.
    Lines,
}

impl RecordFormat {
    /// The name used by options, reports and benchmarks.
    pub fn name(self) -> &'static str {
        match self {
            RecordFormat::Fixed => "fixed",
            RecordFormat::Lines => "lines",
        }
    }

    /// Parses a name of [`RecordFormat::name`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "fixed" => Some(RecordFormat::Fixed),
            "lines" => Some(RecordFormat::Lines),
            _ => None,
        }
    }
}

impl Default for SortOptions {
    fn default() -> Self {
        SortOptions {
            memory_bytes_max: 256 << 20,
            run_bytes: None,
            fan_in: 4,
            merge_fan_in: None,
            merge_select: MergeSelect::Heap,
            block_bytes: 10 * UNIT_BYTES,
            staging_dir: None,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            double_buffering: true,
            early_spill: true,
            direct_io: true,
            runtime: RuntimeOptions::default(),
            cancel: None,
            format: RecordFormat::Fixed,
        }
    }
}

/// What a sort did.
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SortReport {
    /// `fixed` or `lines`.
    pub format: String,
    /// Records (fixed) or lines sorted.
    pub records: u64,
    /// Bytes of the input.
    pub bytes: u64,
    /// Bytes of the output: the input's, plus one `\n` when the last line had none.
    pub output_bytes: u64,
    pub mechanism: String,
    pub run_bytes: u64,
    pub spill_run_bytes: u64,
    pub block_bytes: u64,
    pub fan_in: usize,
    /// Spilled runs merged at a time on disk.
    pub merge_fan_in: usize,
    /// How merges picked the next record: `loser-tree`, `heap` or `scan`.
    pub merge_select: String,
    /// The runs and the output were read and written with O_DIRECT.
    pub direct_io: bool,
    pub spilled_runs: u64,
    pub merge_passes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub run_seconds: f64,
    pub merge_seconds: f64,
    /// The process's CPU seconds (user + system, every thread) in each phase.
    pub run_cpu_seconds: f64,
    pub merge_cpu_seconds: f64,
    /// The output's fsync, rename and directory sync.
    pub publish_seconds: f64,
    pub seconds: f64,
}

/// User + system CPU seconds of this process so far (every thread).
pub(crate) fn process_cpu_seconds() -> f64 {
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The default cache-run size: half the last-level cache per core, in whole records.
pub fn default_run_bytes() -> u64 {
    let llc = cache_bytes(0, 3)
        .or_else(|| cache_bytes(0, 2))
        .unwrap_or(2 << 20);
    let per_core = llc / llc_sharing_cpus();
    ((per_core / 2) / RECORD_BYTES).max(1) * RECORD_BYTES
}

pub(crate) struct Cleanup {
    pub(crate) temp_out: Option<PathBuf>,
    pub(crate) staging: Option<PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = self.temp_out.take() {
            let _ = std::fs::remove_file(p);
        }
        if let Some(d) = self.staging.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// `n` rounded up to whole O_DIRECT units. Every write of the sort is padded to this (the
/// buffers are whole units), so runs are read back in whole units; the real lengths are kept
/// beside the files and the output is truncated to its length before it is published.
pub(crate) fn align_up(n: u64) -> u64 {
    n.div_ceil(DIRECT_ALIGN_BYTES) * DIRECT_ALIGN_BYTES
}

/// Opens `path` with O_DIRECT when `direct` and the file system takes it, else buffered.
/// Returns the locator and whether it is direct.
pub(crate) fn open_file(path: &Path, direct: bool, write: bool) -> Result<(Locator, bool)> {
    let o = FileOptions {
        create: write,
        truncate: write,
        ..Default::default()
    };
    if direct {
        if let Ok(l) = Locator::file(path, FileOptions { direct: true, ..o }) {
            return Ok((l, true));
        }
    }
    Ok((Locator::file(path, o)?, false))
}

fn key80(rec: &[u8]) -> u128 {
    let mut k = [0u8; 16];
    k[6..16].copy_from_slice(&rec[..KEY_BYTES]);
    u128::from_be_bytes(k)
}

/// Checks the options shared by both record formats.
pub(crate) fn check_options(opts: &SortOptions) -> Result<()> {
    if opts.fan_in < 2 || opts.fan_in > 64 {
        return Err(Error::InvalidArgument(format!(
            "fan-in {} must be 2..=64",
            opts.fan_in
        )));
    }
    if opts.threads == 0 {
        return Err(Error::InvalidArgument("threads must be > 0".into()));
    }
    if let Some(k) = opts.merge_fan_in {
        if !(2..=64).contains(&k) {
            return Err(Error::InvalidArgument(format!(
                "merge fan-in {k} must be 2..=64"
            )));
        }
    }
    Ok(())
}

/// Where a sort writes: the output's directory, the temporary output beside the final name,
/// the staging directory (made here) and the guard that removes both unless published.
pub(crate) struct Staged {
    pub out_dir: PathBuf,
    pub temp_out: PathBuf,
    pub staging: PathBuf,
    pub cleanup: Cleanup,
}

/// Makes the staging directory and names the temporary output (see the module doc).
pub(crate) fn stage(output: &Path, opts: &SortOptions) -> Result<Staged> {
    let out_dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = output
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("output {output:?} names no file")))?
        .to_string_lossy()
        .into_owned();
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let temp_out = out_dir.join(format!(".{name}.attune-sort-{pid}.tmp"));
    let staging = opts
        .staging_dir
        .clone()
        .unwrap_or_else(|| out_dir.clone())
        .join(format!(".attune-sort-{pid}-{nanos}"));
    std::fs::create_dir(&staging).map_err(|e| Error::io("mkdir", &staging, &e))?;
    let cleanup = Cleanup {
        temp_out: Some(temp_out.clone()),
        staging: Some(staging.clone()),
    };
    Ok(Staged {
        out_dir,
        temp_out,
        staging,
        cleanup,
    })
}

/// Progress: (phase, bytes done, bytes in the phase).
pub type Progress<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

/// Sorts the records of `input` into `output` (see the module doc).
pub fn sort_file(
    input: &Path,
    output: &Path,
    opts: &SortOptions,
    progress: Option<Progress<'_>>,
) -> Result<SortReport> {
    let t0 = Instant::now();
    let cpu0 = process_cpu_seconds();
    check_options(opts)?;
    if opts.format == RecordFormat::Lines {
        return crate::sort_lines::sort_lines(input, output, opts, progress);
    }
    let rt = Runtime::new(opts.runtime.clone())?;
    // The mmap mechanism goes through the page cache: no O_DIRECT with it.
    let direct = opts.direct_io && rt.report().mechanism != Mechanism::Mmap;
    let (src, src_direct) = open_file(input, direct, false)?;
    let total = src.len()?;
    if total % RECORD_BYTES != 0 {
        return Err(Error::BadInput {
            path: input.to_path_buf(),
            reason: format!("{total} bytes is not a whole number of {RECORD_BYTES}-byte records"),
        });
    }
    let records = total / RECORD_BYTES;
    if records > u64::from(u32::MAX) * 64 {
        return Err(Error::BadInput {
            path: input.to_path_buf(),
            reason: "too many records".into(),
        });
    }
    let Staged {
        out_dir,
        temp_out,
        staging,
        cleanup,
    } = stage(output, opts)?;

    let m = opts.memory_bytes_max;
    // Phase-1 sizes: 2 write blocks, then S per buffer (+0.32·S of index), S whole units.
    let mut block = (opts.block_bytes / UNIT_BYTES).max(1) * UNIT_BYTES;
    let phase2_need = |b: u64| 2 * (opts.fan_in as u64 + 1) * b;
    while phase2_need(block) > m && block > UNIT_BYTES {
        block -= UNIT_BYTES;
    }
    let bufs = if opts.double_buffering { 2.0 } else { 1.0 };
    // Input buffers, one scratch buffer of the same size, and the per-thread cache-run indexes.
    let s_raw = (m.saturating_sub(2 * block) as f64 / (bufs + 1.05)) as u64;
    let s = (s_raw / UNIT_BYTES) * UNIT_BYTES;
    if s == 0 || phase2_need(block) > m {
        return Err(Error::InvalidArgument(format!(
            "memory limit {m} bytes is too small (at least {} bytes)",
            phase2_need(UNIT_BYTES).max(4 * UNIT_BYTES)
        )));
    }
    let run_bytes = opts
        .run_bytes
        .unwrap_or_else(default_run_bytes)
        .max(RECORD_BYTES);
    let mut report = SortReport {
        format: RecordFormat::Fixed.name().into(),
        records,
        bytes: total,
        mechanism: rt.report().mechanism.name().into(),
        run_bytes,
        spill_run_bytes: s.min(total.max(RECORD_BYTES)),
        block_bytes: block,
        fan_in: opts.fan_in,
        merge_select: opts.merge_select.name().into(),
        direct_io: src_direct,
        ..Default::default()
    };
    let cancelled = || {
        opts.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    };

    // ---- Phase 1: sorted runs.
    let single = total <= s;
    let mut runs: Vec<(PathBuf, u64)> = Vec::new();
    let mut input_reader = ChunkReader::new(&rt, &src, input, src_direct, s, total, opts)?;
    let out_blocks: Vec<Locator> = (0..2)
        .map(|_| Locator::dram(block))
        .collect::<Result<_>>()?;
    let chunks = input_reader.chunks.clone();
    let mut scratch: Vec<u8> = vec![0u8; s.min(total.max(UNIT_BYTES)) as usize];
    for (i, &(_, len)) in chunks.iter().enumerate() {
        if cancelled() {
            return Err(Error::Cancelled {
                bytes_done: report.bytes_read,
            });
        }
        report.bytes_read += input_reader.fill(i)?;
        let run_path = if single {
            temp_out.clone()
        } else {
            staging.join(format!("run-0-{i}"))
        };
        let (dst, _) = open_file(&run_path, direct, true)?;
        let mut guard = input_reader.buffer(i).bytes()?;
        let data = &mut guard[..len as usize];
        let scr = &mut scratch[..len as usize];
        let (in_scratch, width) = sort_chunk(data, scr, run_bytes, opts);
        let runs_buf: &[u8] = if in_scratch { scr } else { data };
        let parts: Vec<&[u8]> = runs_buf.chunks(width).collect();
        report.bytes_written += spill(
            &rt,
            parts,
            &out_blocks,
            &dst,
            opts.early_spill,
            opts.merge_select,
        )?;
        drop(guard);
        input_reader.done(i)?;
        runs.push((run_path, len));
        if let Some(p) = progress {
            p("runs", chunks[..=i].iter().map(|c| c.1).sum(), total);
        }
    }
    drop((scratch, input_reader));
    if total == 0 {
        Locator::file(
            &temp_out,
            FileOptions {
                create: true,
                truncate: true,
                ..Default::default()
            },
        )?;
    }
    report.spilled_runs = if single { 0 } else { runs.len() as u64 };
    report.run_seconds = t0.elapsed().as_secs_f64();
    report.run_cpu_seconds = process_cpu_seconds() - cpu0;

    // ---- Phase 2: k-way merges until one run is left.
    let merge_group = |group: &[(PathBuf, u64)], out: &Path| {
        merge(&rt, group, out, block, opts.merge_select, direct)
    };
    // Two blocks per input and two for the output per merge; at least `fan_in` fit (above).
    merge_passes(
        runs,
        opts,
        block,
        2,
        &temp_out,
        &staging,
        &mut report,
        progress,
        &merge_group,
    )?;
    let t2 = Instant::now();
    report.output_bytes = total;
    publish(&temp_out, output, &out_dir, total, cleanup)?;
    report.publish_seconds = t2.elapsed().as_secs_f64();
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Phase 1's input: the file cut into chunks of `s` bytes, each read into one of one or two
/// library-owned buffers. With double buffering the next chunk's transfer runs while the current
/// one is sorted; without it the next starts when the current one is [`done`](Self::done). With
/// O_DIRECT a chunk is read in whole units and its tail (under one unit, past the last whole unit
/// of the file) with a plain pread after the transfer.
pub(crate) struct ChunkReader<'a> {
    /// (offset, length) of every chunk, in order.
    pub(crate) chunks: Vec<(u64, u64)>,
    bufs: Vec<Locator>,
    pipes: Vec<Pipe>,
    pending: Option<Transfer>,
    tail_file: std::fs::File,
    input: &'a Path,
    direct: bool,
    double_buffering: bool,
}

impl<'a> ChunkReader<'a> {
    /// Buffers of `s` bytes (less for a smaller input) and the first chunk's transfer started.
    pub(crate) fn new(
        rt: &Runtime,
        src: &Locator,
        input: &'a Path,
        direct: bool,
        s: u64,
        total: u64,
        opts: &SortOptions,
    ) -> Result<ChunkReader<'a>> {
        let count = if opts.double_buffering { 2 } else { 1 };
        let bufs: Vec<Locator> = (0..count)
            .map(|_| Locator::dram(s.min(total.max(UNIT_BYTES))))
            .collect::<Result<_>>()?;
        let pipes: Vec<Pipe> = bufs
            .iter()
            .map(|b| rt.pipe(src, b, PipeOptions::default()))
            .collect::<Result<_>>()?;
        let chunks: Vec<(u64, u64)> = (0..total.div_ceil(s.max(1)))
            .map(|i| (i * s, (total - i * s).min(s)))
            .collect();
        let tail_file = std::fs::File::open(input).map_err(|e| Error::io("open", input, &e))?;
        let mut reader = ChunkReader {
            chunks,
            bufs,
            pipes,
            pending: None,
            tail_file,
            input,
            direct,
            double_buffering: opts.double_buffering,
        };
        reader.start(0)?;
        Ok(reader)
    }

    /// The bytes of a chunk that go through the pipe: all of them, or its whole units with
    /// O_DIRECT.
    fn head_len(&self, len: u64) -> u64 {
        if self.direct {
            len / DIRECT_ALIGN_BYTES * DIRECT_ALIGN_BYTES
        } else {
            len
        }
    }

    /// Starts chunk `i`'s transfer into its buffer, if there is such a chunk.
    fn start(&mut self, i: usize) -> Result<()> {
        let Some(&(off, len)) = self.chunks.get(i) else {
            return Ok(());
        };
        self.pending = match self.head_len(len) {
            0 => None,
            n => Some(self.pipes[i % self.pipes.len()].transfer(off, 0, n)?),
        };
        Ok(())
    }

    /// The buffer that holds chunk `i` once [`fill`](Self::fill) returned.
    pub(crate) fn buffer(&self, i: usize) -> &Locator {
        &self.bufs[i % self.bufs.len()]
    }

    /// Waits until chunk `i` is in its buffer (reading an O_DIRECT tail by pread) and, with
    /// double buffering, starts chunk `i + 1`'s transfer. Returns the bytes read.
    pub(crate) fn fill(&mut self, i: usize) -> Result<u64> {
        let mut read = 0;
        if let Some(t) = self.pending.take() {
            read += t.wait()?;
        }
        let (off, len) = self.chunks[i];
        let head = self.head_len(len);
        if head < len {
            use std::os::unix::fs::FileExt;
            let mut g = self.buffer(i).bytes()?;
            self.tail_file
                .read_exact_at(&mut g[head as usize..len as usize], off + head)
                .map_err(|e| Error::io("read", self.input, &e))?;
            read += len - head;
        }
        if self.double_buffering {
            self.start(i + 1)?;
        }
        Ok(read)
    }

    /// Chunk `i`'s buffer is free again: without double buffering, chunk `i + 1`'s transfer
    /// starts now.
    pub(crate) fn done(&mut self, i: usize) -> Result<()> {
        if self.double_buffering {
            Ok(())
        } else {
            self.start(i + 1)
        }
    }
}

/// Merges one group of runs into a file: (bytes read, bytes written).
pub(crate) type MergeGroup<'a> =
    &'a (dyn Fn(&[(PathBuf, u64)], &Path) -> Result<(u64, u64)> + Sync);

/// Phase 2: merges `runs` (path, length) `k` at a time until one is left, the last merge
/// writing `temp_out`. A merge of `k` inputs holds `inputs_blocks` blocks per input and two
/// for the output; groups of a pass run in parallel as far as the memory limit allows.
#[allow(clippy::too_many_arguments)]
pub(crate) fn merge_passes(
    mut runs: Vec<(PathBuf, u64)>,
    opts: &SortOptions,
    block: u64,
    input_blocks: u64,
    temp_out: &Path,
    staging: &Path,
    report: &mut SortReport,
    progress: Option<Progress<'_>>,
    merge_group: MergeGroup<'_>,
) -> Result<()> {
    let (t1, cpu1) = (Instant::now(), process_cpu_seconds());
    let m = opts.memory_bytes_max;
    let cancelled = || {
        opts.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    };
    let k_max = ((m / block).saturating_sub(2) / input_blocks) as usize;
    let k_max = k_max.clamp(opts.fan_in, 64);
    let k = opts
        .merge_fan_in
        .unwrap_or_else(|| runs.len().clamp(opts.fan_in, k_max))
        .min(k_max.max(2));
    report.merge_fan_in = k;
    let merge_need = (input_blocks * k as u64 + 2) * block;
    let mut pass = 0u64;
    while runs.len() > 1 {
        pass += 1;
        let last = runs.len() <= k;
        let mut next = Vec::new();
        let pass_total: u64 = runs.iter().map(|r| r.1).sum();
        let mut pass_done = 0u64;
        // Groups are independent: merge up to `par` of them at once (each with its own blocks).
        let par = opts.threads.clamp(1, (m / merge_need).max(1) as usize);
        let groups: Vec<(usize, &[(PathBuf, u64)])> = runs.chunks(k).enumerate().collect();
        for wave in groups.chunks(par) {
            if cancelled() {
                return Err(Error::Cancelled {
                    bytes_done: report.bytes_written,
                });
            }
            let results: Vec<Result<(PathBuf, u64, u64, u64)>> = std::thread::scope(|sc| {
                let handles: Vec<_> = wave
                    .iter()
                    .map(|&(g, group)| {
                        sc.spawn(move || -> Result<(PathBuf, u64, u64, u64)> {
                            let len: u64 = group.iter().map(|r| r.1).sum();
                            let out_path = if last {
                                temp_out.to_path_buf()
                            } else {
                                staging.join(format!("run-{pass}-{g}"))
                            };
                            if group.len() == 1 {
                                std::fs::rename(&group[0].0, &out_path)
                                    .map_err(|e| Error::io("rename", &out_path, &e))?;
                                return Ok((out_path, len, 0, 0));
                            }
                            let (r, w) = merge_group(group, &out_path)?;
                            for (p, _) in group {
                                let _ = std::fs::remove_file(p);
                            }
                            Ok((out_path, len, r, w))
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(Error::InvalidArgument("a merge thread panicked".into()))
                        })
                    })
                    .collect()
            });
            for r in results {
                let (out_path, len, rd, wr) = r?;
                report.bytes_read += rd;
                report.bytes_written += wr;
                next.push((out_path, len));
                pass_done += len;
            }
            if let Some(p) = progress {
                p(&format!("merge pass {pass}"), pass_done, pass_total);
            }
        }
        runs = next;
    }
    report.merge_passes = pass;
    report.merge_seconds = t1.elapsed().as_secs_f64();
    report.merge_cpu_seconds = process_cpu_seconds() - cpu1;
    if cancelled() {
        return Err(Error::Cancelled {
            bytes_done: report.bytes_written,
        });
    }
    Ok(())
}

/// Publishes the sort: cuts the last write's padding (the file becomes `len` bytes), syncs the
/// temporary file, renames it over `output` and syncs the directory.
pub(crate) fn publish(
    temp_out: &Path,
    output: &Path,
    out_dir: &Path,
    len: u64,
    mut cleanup: Cleanup,
) -> Result<()> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(temp_out)
        .map_err(|e| Error::io("open", temp_out, &e))?;
    f.set_len(len)
        .map_err(|e| Error::io("truncate", temp_out, &e))?;
    f.sync_all().map_err(|e| Error::io("fsync", temp_out, &e))?;
    std::fs::rename(temp_out, output).map_err(|e| Error::io("rename", output, &e))?;
    cleanup.temp_out = None;
    if let Ok(d) = std::fs::File::open(out_dir) {
        let _ = d.sync_all();
    }
    drop(cleanup);
    Ok(())
}

/// Sorts `data`'s records as cache runs of `run_bytes` (index sort + gather, one core per run,
/// the run's bytes staying in that core's share of the cache), then merges them `fan_in` at a
/// time between `data` and `scratch` until at most `fan_in` runs are left. Returns the buffer
/// holding those runs (true: `scratch`) and their width in bytes.
fn sort_chunk(
    data: &mut [u8],
    scratch: &mut [u8],
    run_bytes: u64,
    opts: &SortOptions,
) -> (bool, usize) {
    let rec = RECORD_BYTES as usize;
    let run = ((run_bytes / RECORD_BYTES) as usize).max(1) * rec;
    let n_runs = data.len().div_ceil(run);
    let per = n_runs.div_ceil(opts.threads.max(1)).max(1) * run;
    std::thread::scope(|sc| {
        for (src, dst) in data.chunks(per).zip(scratch.chunks_mut(per)) {
            sc.spawn(move || {
                let mut index: Vec<u128> = Vec::with_capacity(run / rec);
                for (s, d) in src.chunks(run).zip(dst.chunks_mut(run)) {
                    index.clear();
                    index.extend(
                        s.chunks_exact(rec)
                            .enumerate()
                            .map(|(i, r)| key80(r) << 32 | i as u128),
                    );
                    index.sort_unstable();
                    for (j, &e) in index.iter().enumerate() {
                        let r = (e as u32) as usize * rec;
                        d[j * rec..j * rec + rec].copy_from_slice(&s[r..r + rec]);
                    }
                }
            });
        }
    });
    // The sorted cache runs are in `scratch`; merge passes alternate between the two buffers.
    let (mut in_scratch, mut width) = (true, run);
    while data.len().div_ceil(width) > opts.fan_in {
        let span = width * opts.fan_in;
        let (src, dst): (&[u8], &mut [u8]) = if in_scratch {
            (&*scratch, &mut *data)
        } else {
            (&*data, &mut *scratch)
        };
        let groups = dst.len().div_ceil(span);
        let per = groups.div_ceil(opts.threads.max(1)).max(1) * span;
        std::thread::scope(|sc| {
            for (s, d) in src.chunks(per).zip(dst.chunks_mut(per)) {
                sc.spawn(move || {
                    for (s2, d2) in s.chunks(span).zip(d.chunks_mut(span)) {
                        let mut c = MergeCursor::new(s2.chunks(width).collect(), opts.merge_select);
                        c.fill(d2);
                    }
                });
            }
        });
        in_scratch = !in_scratch;
        width = span;
    }
    (in_scratch, width)
}

/// A k-way merge of sorted record slices, emitting into caller-given buffers.
struct MergeCursor<'a> {
    parts: Vec<&'a [u8]>,
    pos: Vec<usize>,
    select: Selector,
}

impl<'a> MergeCursor<'a> {
    fn new(parts: Vec<&'a [u8]>, kind: MergeSelect) -> Self {
        let heads: Vec<u128> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if p.is_empty() {
                    DONE
                } else {
                    head(key80(p), i)
                }
            })
            .collect();
        let pos = vec![0; parts.len()];
        MergeCursor {
            parts,
            pos,
            select: Selector::new(kind, &heads),
        }
    }

    /// Fills `out` (whole records) with the next records; returns the bytes written.
    fn fill(&mut self, out: &mut [u8]) -> usize {
        let rec = RECORD_BYTES as usize;
        let mut o = 0;
        while o + rec <= out.len() {
            let top = self.select.top();
            if top == DONE {
                break;
            }
            let best = source_of(top);
            let part = self.parts[best];
            let p = self.pos[best];
            out[o..o + rec].copy_from_slice(&part[p..p + rec]);
            o += rec;
            let np = p + rec;
            self.pos[best] = np;
            self.select.replace_top(if np < part.len() {
                head(key80(&part[np..np + KEY_BYTES]), best)
            } else {
                DONE
            });
        }
        o
    }
}

/// Merges `parts` (sorted record runs) into `dst` through two write blocks, each written while
/// the next is filled (early spilling), or each waited for (`early` off); returns bytes written.
fn spill(
    rt: &Runtime,
    parts: Vec<&[u8]>,
    blocks: &[Locator],
    dst: &Locator,
    early: bool,
    select: MergeSelect,
) -> Result<u64> {
    let pipes: Vec<Pipe> = blocks
        .iter()
        .map(|b| rt.pipe(b, dst, PipeOptions::default()))
        .collect::<Result<_>>()?;
    let mut cursor = MergeCursor::new(parts, select);
    let mut pending: [Option<Transfer>; 2] = [None, None];
    let mut written = 0u64;
    let mut file_off = 0u64;
    for b in 0usize.. {
        let k = b % 2;
        if let Some(t) = pending[k].take() {
            t.wait()?;
        }
        let len = {
            let mut out = blocks[k].bytes()?;
            cursor.fill(&mut out)
        };
        if len == 0 {
            break;
        }
        // Padded to whole units (the block is whole units; only the last write is short).
        let t = pipes[k].transfer(0, file_off, align_up(len as u64))?;
        file_off += len as u64;
        written += len as u64;
        if early {
            pending[k] = Some(t);
        } else {
            t.wait()?;
        }
    }
    for t in pending.iter_mut().filter_map(Option::take) {
        t.wait()?;
    }
    Ok(written)
}

struct Reader {
    pipes: Vec<Pipe>,
    bufs: Vec<Locator>,
    pending: [Option<Transfer>; 2],
    lens: [u64; 2],
    cur: usize,
    pos: usize,
    next_off: u64,
    file_len: u64,
    done: bool,
}

impl Reader {
    fn start(&mut self, k: usize) -> Result<()> {
        if self.next_off >= self.file_len {
            self.lens[k] = 0;
            return Ok(());
        }
        let len = (self.file_len - self.next_off).min(self.bufs[k].len()?);
        // The run's file is padded to whole units (see `align_up`).
        self.pending[k] = Some(self.pipes[k].transfer(self.next_off, 0, align_up(len))?);
        self.lens[k] = len;
        self.next_off += len;
        Ok(())
    }

    /// Waits for buffer `cur`; returns bytes read (0 when this input is exhausted).
    fn ready(&mut self) -> Result<u64> {
        match self.pending[self.cur].take() {
            Some(t) => t.wait().map(|_| self.lens[self.cur]),
            None => {
                self.done = true;
                Ok(0)
            }
        }
    }
}

/// Merges the runs of `group` into `out`; returns (bytes read, bytes written).
fn merge(
    rt: &Runtime,
    group: &[(PathBuf, u64)],
    out: &Path,
    block: u64,
    select: MergeSelect,
    direct: bool,
) -> Result<(u64, u64)> {
    let mut readers = Vec::new();
    let mut read = 0u64;
    for (p, len) in group {
        let (f, _) = open_file(p, direct, false)?;
        let bufs: Vec<Locator> = (0..2)
            .map(|_| Locator::dram(block))
            .collect::<Result<_>>()?;
        let pipes = bufs
            .iter()
            .map(|b| rt.pipe(&f, b, PipeOptions::default()))
            .collect::<Result<_>>()?;
        let mut r = Reader {
            pipes,
            bufs,
            pending: [None, None],
            lens: [0; 2],
            cur: 0,
            pos: 0,
            next_off: 0,
            file_len: *len,
            done: false,
        };
        r.start(0)?;
        r.start(1)?;
        read += r.ready()?;
        readers.push(r);
    }
    let (dst, _) = open_file(out, direct, true)?;
    let oblocks: Vec<Locator> = (0..2)
        .map(|_| Locator::dram(block))
        .collect::<Result<_>>()?;
    let opipes: Vec<Pipe> = oblocks
        .iter()
        .map(|b| rt.pipe(b, &dst, PipeOptions::default()))
        .collect::<Result<_>>()?;
    let mut opending: [Option<Transfer>; 2] = [None, None];
    let (mut ocur, mut opos, mut file_off, mut written) = (0usize, 0usize, 0u64, 0u64);
    let oblock = block as usize;
    loop {
        // Merge until an input block is exhausted or the output block is full.
        let mut pos: Vec<usize> = readers.iter().map(|r| r.pos).collect();
        let (exhausted, full) = {
            let guards: Vec<Option<crate::locator::BytesGuard<'_>>> = readers
                .iter()
                .map(|r| {
                    if r.done {
                        Ok(None)
                    } else {
                        r.bufs[r.cur].bytes().map(Some)
                    }
                })
                .collect::<Result<_>>()?;
            let ends: Vec<usize> = readers.iter().map(|r| r.lens[r.cur] as usize).collect();
            let mut out = oblocks[ocur].bytes()?;
            // The selector is rebuilt after each block change (O(k) per block, not per record).
            let heads: Vec<u128> = guards
                .iter()
                .zip(&pos)
                .enumerate()
                .map(|(i, (g, &p))| {
                    g.as_ref()
                        .map_or(DONE, |g| head(key80(&g[p..p + KEY_BYTES]), i))
                })
                .collect();
            let mut sel = Selector::new(select, &heads);
            loop {
                if opos == oblock {
                    break (None, true);
                }
                let top = sel.top();
                if top == DONE {
                    break (None, false);
                }
                let best = source_of(top);
                let Some(g) = guards[best].as_ref() else {
                    break (None, false);
                };
                let p = pos[best];
                out[opos..opos + 100].copy_from_slice(&g[p..p + 100]);
                opos += 100;
                pos[best] = p + 100;
                if pos[best] >= ends[best] {
                    break (Some(best), opos == oblock);
                }
                sel.replace_top(head(key80(&g[p + 100..p + 100 + KEY_BYTES]), best));
            }
        };
        for (r, p) in readers.iter_mut().zip(pos) {
            r.pos = p;
        }
        let all_done = readers.iter().all(|r| r.done);
        if full || (opos > 0 && (all_done || exhausted.is_none())) {
            if let Some(t) = opending[ocur].take() {
                t.wait()?;
            }
            // Only the last write is short; it is padded to whole units.
            opending[ocur] = Some(opipes[ocur].transfer(0, file_off, align_up(opos as u64))?);
            file_off += opos as u64;
            written += opos as u64;
            opos = 0;
            ocur ^= 1;
            if let Some(t) = opending[ocur].take() {
                t.wait()?;
            }
        }
        if let Some(k) = exhausted {
            let r = &mut readers[k];
            let old = r.cur;
            r.start(old)?;
            r.cur ^= 1;
            r.pos = 0;
            read += r.ready()?;
            if r.lens[r.cur] == 0 {
                r.done = true;
            }
        }
        if readers.iter().all(|r| r.done) && opos == 0 && exhausted.is_none() {
            break;
        }
    }
    for t in opending.iter_mut().filter_map(Option::take) {
        t.wait()?;
    }
    Ok((read, written))
}
