//! The external sort's variable-length records: lines ended by `\n`, ordered byte by byte on
//! the whole line (`LC_ALL=C sort`'s order; a line that is a prefix of another sorts first).
//! Format and limits: docs/formats/sort-records.md; design: docs/data-pipes.md.
//!
//! The shape is the fixed-record sort's (`sort.rs`), with an index in place of moving records:
//! 1. **Runs.** The input moves through a read pipe into one of two DRAM buffers of `S` bytes
//!    while the other is sorted (double buffering). The buffer's lines are indexed (16 bytes
//!    per line: the first 8 bytes of the line as a big-endian integer, its offset and length);
//!    the index is cut into cache runs of about `run_bytes` of lines, each sorted by one core
//!    (comparing the 8-byte prefixes, and the lines only where those are equal), then merged
//!    4 ways at a time in memory, index to index, until at most 4 are left; the last merge
//!    gathers the lines into write blocks that go to the run's file as soon as each is full
//!    (early spilling). A line cut by the buffer's end is carried into the next buffer's
//!    first line; a buffer holding more lines than the index has room for (very short lines)
//!    spills more than one run.
//! 2. **Merges.** Spilled runs are merged as in `sort.rs`; each input reads blocks into the
//!    upper half of buffers of two blocks, and a line cut by a block's end is copied just below
//!    the next block, so every line is whole in memory (this is why a line may be at most one
//!    block long).
//!
//! Defined behaviour at the edges: an empty input gives an empty output; a last line without
//! `\n` is sorted as if it had one and the output has it (as GNU sort does); a line longer than
//! a block (`block_bytes`, default 1,024,000 bytes with its `\n`) is refused with `BadInput`
//! naming its offset and length, before anything is published.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::locator::{BytesGuard, Locator};
use crate::mechanism::Mechanism;
use crate::merge::MergeSelect;
use crate::runtime::{Pipe, PipeOptions, Runtime, Transfer};
use crate::sort::{
    align_up, default_run_bytes, merge_passes, open_file, process_cpu_seconds, publish, stage,
    ChunkReader, Progress, RecordFormat, SortOptions, SortReport, Staged, UNIT_BYTES,
};

/// Bytes of index per line: prefix (8), offset (4), length (4).
const ENTRY_BYTES: u64 = 16;
/// An entry whose offset has this bit addresses the side arena (lines cut by a buffer's end
/// and a last line without `\n`), not the buffer. Buffers stay below 2 GiB.
const SIDE: u32 = 1 << 31;
/// Index entries per input byte budgeted: one entry per 64 bytes of buffer, twice (the index
/// and its merge target): half a byte of index per byte of buffer. Buffers of shorter lines
/// spill one run per full index.
const INDEX_BYTES_PER_ENTRY_BUDGET: u64 = 64;

/// A line of a buffer: its first 8 bytes as a big-endian integer (zero-padded), where it is
/// and how long it is without its `\n`.
#[derive(Clone, Copy, Debug)]
struct Entry {
    prefix: u64,
    off: u32,
    len: u32,
}

fn prefix(line: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = line.len().min(8);
    b[..n].copy_from_slice(&line[..n]);
    u64::from_be_bytes(b)
}

/// The bytes the entries point into: the input buffer and the side arena.
#[derive(Clone, Copy)]
struct Arena<'a> {
    data: &'a [u8],
    side: &'a [u8],
}

impl<'a> Arena<'a> {
    #[inline]
    fn line(&self, e: &Entry) -> &'a [u8] {
        let (buf, off) = if e.off & SIDE != 0 {
            (self.side, (e.off & !SIDE) as usize)
        } else {
            (self.data, e.off as usize)
        };
        &buf[off..off + e.len as usize]
    }

    #[inline]
    fn less(&self, a: &Entry, b: &Entry) -> std::cmp::Ordering {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| self.line(a).cmp(self.line(b)))
    }
}

/// Merges sorted entry runs, calling `emit` with each entry in order (ties by run: stable).
fn merge_entries(
    arena: Arena<'_>,
    parts: &[&[Entry]],
    mut emit: impl FnMut(&Entry) -> Result<()>,
) -> Result<()> {
    let mut heap: BinaryHeap<Reverse<(u64, &[u8], usize)>> = parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.first().map(|e| Reverse((e.prefix, arena.line(e), i))))
        .collect();
    let mut pos = vec![0usize; parts.len()];
    while let Some(mut top) = heap.peek_mut() {
        let s = top.0 .2;
        emit(&parts[s][pos[s]])?;
        pos[s] += 1;
        match parts[s].get(pos[s]) {
            Some(e) => top.0 = (e.prefix, arena.line(e), s),
            None => {
                PeekMut::pop(top);
            }
        }
    }
    Ok(())
}

/// Writes a byte stream to a file through two library-owned blocks: one fills while the other
/// is written (`early`), or each write is waited for. Every write is padded to whole O_DIRECT
/// units; only the last one is short, and the caller keeps the true length.
struct BlockWriter<'a> {
    blocks: &'a [Locator],
    pipes: Vec<Pipe>,
    pending: [Option<Transfer>; 2],
    guard: Option<BytesGuard<'a>>,
    cur: usize,
    pos: usize,
    file_off: u64,
    early: bool,
}

impl<'a> BlockWriter<'a> {
    fn new(rt: &Runtime, blocks: &'a [Locator], dst: &Locator, early: bool) -> Result<Self> {
        let pipes = blocks
            .iter()
            .map(|b| rt.pipe(b, dst, PipeOptions::default()))
            .collect::<Result<_>>()?;
        Ok(BlockWriter {
            blocks,
            pipes,
            pending: [None, None],
            guard: None,
            cur: 0,
            pos: 0,
            file_off: 0,
            early,
        })
    }

    fn put(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let g = match &mut self.guard {
                Some(g) => g,
                None => self.guard.insert(self.blocks[self.cur].bytes()?),
            };
            let n = (g.len() - self.pos).min(data.len());
            g[self.pos..self.pos + n].copy_from_slice(&data[..n]);
            self.pos += n;
            data = &data[n..];
            if self.pos == g.len() {
                self.flush_block()?;
            }
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        self.guard = None;
        if self.pos == 0 {
            return Ok(());
        }
        let t = self.pipes[self.cur].transfer(0, self.file_off, align_up(self.pos as u64))?;
        self.file_off += self.pos as u64;
        self.pos = 0;
        if self.early {
            self.pending[self.cur] = Some(t);
        } else {
            t.wait()?;
        }
        self.cur ^= 1;
        if let Some(t) = self.pending[self.cur].take() {
            t.wait()?;
        }
        Ok(())
    }

    /// Writes what is left; returns the bytes written.
    fn finish(mut self) -> Result<u64> {
        self.flush_block()?;
        for t in self.pending.iter_mut().filter_map(Option::take) {
            t.wait()?;
        }
        Ok(self.file_off)
    }
}

/// Sorts the lines of `input` into `output` (see the module doc); called by `sort_file`.
pub(crate) fn sort_lines(
    input: &Path,
    output: &Path,
    opts: &SortOptions,
    progress: Option<Progress<'_>>,
) -> Result<SortReport> {
    let t0 = Instant::now();
    let cpu0 = process_cpu_seconds();
    if opts.merge_select != MergeSelect::Heap {
        return Err(Error::InvalidArgument(format!(
            "merge_select {} is for fixed records; lines are merged with a heap",
            opts.merge_select.name()
        )));
    }
    let rt = Runtime::new(opts.runtime.clone())?;
    let direct = opts.direct_io && rt.report().mechanism != Mechanism::Mmap;
    let (src, src_direct) = open_file(input, direct, false)?;
    let total = src.len()?;
    let m = opts.memory_bytes_max;
    // Sizes: a block bounds the longest line; a merge holds four blocks per input (two
    // buffers of carry room + block) and two for the output; phase 1 holds two write blocks,
    // the carried line and a side arena of two lines (a block each), the input buffers and
    // half a byte of index per buffer byte.
    let mut block = (opts.block_bytes / UNIT_BYTES).max(1) * UNIT_BYTES;
    let phase2_need = |b: u64| (4 * opts.fan_in as u64 + 2) * b;
    while phase2_need(block) > m && block > UNIT_BYTES {
        block -= UNIT_BYTES;
    }
    let line_max = block;
    let bufs = if opts.double_buffering { 2.0 } else { 1.0 };
    let index_share = 2.0 * ENTRY_BYTES as f64 / INDEX_BYTES_PER_ENTRY_BUDGET as f64;
    let s_raw = (m.saturating_sub(5 * block) as f64 / (bufs + index_share)) as u64;
    let s = (s_raw.min(u64::from(SIDE) - UNIT_BYTES) / UNIT_BYTES) * UNIT_BYTES;
    if s == 0 || phase2_need(block) > m {
        return Err(Error::InvalidArgument(format!(
            "memory limit {m} bytes is too small for lines (at least {} bytes)",
            phase2_need(UNIT_BYTES).max(6 * UNIT_BYTES)
        )));
    }
    let entries_max = (s / INDEX_BYTES_PER_ENTRY_BUDGET).max(1) as usize;
    let run_bytes = opts.run_bytes.unwrap_or_else(default_run_bytes).max(1);
    let Staged {
        out_dir,
        temp_out,
        staging,
        cleanup,
    } = stage(output, opts)?;
    let mut report = SortReport {
        format: RecordFormat::Lines.name().into(),
        bytes: total,
        mechanism: rt.report().mechanism.name().into(),
        run_bytes,
        spill_run_bytes: s.min(total.max(1)),
        block_bytes: block,
        fan_in: opts.fan_in,
        merge_select: MergeSelect::Heap.name().into(),
        direct_io: src_direct,
        ..Default::default()
    };
    let cancelled = || {
        opts.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    };
    let too_long = |off: u64, len: u64| Error::BadInput {
        path: input.to_path_buf(),
        reason: format!(
            "the line at byte {off} is {len} bytes long with its newline (or longer); the \
             longest line this sort takes is one block, {line_max} bytes: raise block_bytes \
             (and memory_bytes_max, which must hold {} blocks)",
            4 * opts.fan_in + 2
        ),
    };

    // ---- Phase 1: sorted runs.
    let single = total <= s;
    let mut runs: Vec<(PathBuf, u64)> = Vec::new();
    let mut input_reader = ChunkReader::new(&rt, &src, input, src_direct, s, total, opts)?;
    let out_blocks: Vec<Locator> = (0..2)
        .map(|_| Locator::dram(block))
        .collect::<Result<_>>()?;
    let chunks = input_reader.chunks.clone();
    let mut index: Vec<Entry> = Vec::with_capacity(entries_max.min(total as usize + 1));
    let mut scratch: Vec<Entry> = Vec::new();
    // The line cut by the previous buffer's end, and where it started in the input.
    let mut carry: Vec<u8> = Vec::new();
    let mut carry_off = 0u64;
    let mut side: Vec<u8> = Vec::new();
    let mut out_len = total;
    let mut lines = 0u64;
    for (i, &(off, len)) in chunks.iter().enumerate() {
        if cancelled() {
            return Err(Error::Cancelled {
                bytes_done: report.bytes_read,
            });
        }
        let last_chunk = i + 1 == chunks.len();
        report.bytes_read += input_reader.fill(i)?;
        let guard = input_reader.buffer(i).bytes()?;
        let data = &guard[..len as usize];
        side.clear();
        index.clear();
        let side_entry = |side: &[u8], line: &[u8]| Entry {
            prefix: prefix(line),
            off: SIDE | side.len() as u32,
            len: line.len() as u32,
        };
        let mut side_entries: Vec<Entry> = Vec::new();
        // The carried line ends at this buffer's first `\n`.
        let mut begin = 0usize;
        if !carry.is_empty() {
            match memchr::memchr(b'\n', data) {
                Some(p) => {
                    if (carry.len() + p + 1) as u64 > line_max {
                        return Err(too_long(carry_off, (carry.len() + p + 1) as u64));
                    }
                    carry.extend_from_slice(&data[..p]);
                    begin = p + 1;
                    side_entries.push(side_entry(&side, &carry));
                    side.extend_from_slice(&carry);
                    carry.clear();
                }
                None => {
                    if (carry.len() + data.len()) as u64 >= line_max {
                        return Err(too_long(carry_off, (carry.len() + data.len()) as u64 + 1));
                    }
                    carry.extend_from_slice(data);
                    begin = data.len();
                }
            }
        }
        let end = memchr::memrchr(b'\n', &data[begin..]).map_or(begin, |p| begin + p + 1);
        let tail = &data[end..];
        if !tail.is_empty() || (last_chunk && !carry.is_empty()) {
            if carry.is_empty() {
                carry_off = off + end as u64;
            }
            if (carry.len() + tail.len()) as u64 >= line_max {
                return Err(too_long(carry_off, (carry.len() + tail.len()) as u64 + 1));
            }
            carry.extend_from_slice(tail);
            if last_chunk {
                // The last line has no `\n`: sorted as if it had one, written with it.
                side_entries.push(side_entry(&side, &carry));
                side.extend_from_slice(&carry);
                carry.clear();
                out_len = total + 1;
            }
        }
        // Index the whole lines of data[begin..end]; a full index spills a run.
        let mut start = begin;
        let body = &data[..end];
        let mut spill_now = |index: &mut Vec<Entry>,
                             scratch: &mut Vec<Entry>,
                             side: &[u8],
                             side_entries: &mut Vec<Entry>,
                             final_of_chunk: bool|
         -> Result<()> {
            index.append(side_entries);
            if index.is_empty() {
                return Ok(());
            }
            lines += index.len() as u64;
            let to_output = single && final_of_chunk && runs.is_empty() && last_chunk;
            let run_path = if to_output {
                temp_out.clone()
            } else {
                staging.join(format!("run-0-{}", runs.len()))
            };
            let (dst, _) = open_file(&run_path, direct, true)?;
            let arena = Arena { data, side };
            let (bounds, in_scratch) =
                sort_index(arena, index, scratch, run_bytes, opts.fan_in, opts.threads);
            let sorted: &[Entry] = if in_scratch { scratch } else { index };
            let parts: Vec<&[Entry]> = bounds.windows(2).map(|w| &sorted[w[0]..w[1]]).collect();
            let mut w = BlockWriter::new(&rt, &out_blocks, &dst, opts.early_spill)?;
            merge_entries(arena, &parts, |e| {
                w.put(arena.line(e))?;
                w.put(b"\n")
            })?;
            let written = w.finish()?;
            report.bytes_written += written;
            runs.push((run_path, written));
            index.clear();
            Ok(())
        };
        for p in memchr::memchr_iter(b'\n', &body[begin..]) {
            let nl = begin + p;
            let line_len = nl - start;
            if line_len as u64 >= line_max {
                return Err(too_long(off + start as u64, line_len as u64 + 1));
            }
            index.push(Entry {
                prefix: prefix(&body[start..nl]),
                off: start as u32,
                len: line_len as u32,
            });
            start = nl + 1;
            if index.len() == entries_max {
                spill_now(&mut index, &mut scratch, &[], &mut Vec::new(), false)?;
            }
        }
        spill_now(&mut index, &mut scratch, &side, &mut side_entries, true)?;
        drop(guard);
        input_reader.done(i)?;
        if let Some(p) = progress {
            p("runs", off + len, total);
        }
    }
    drop((index, scratch, input_reader));
    if runs.is_empty() {
        // An empty input: an empty output.
        crate::locator::Locator::file(
            &temp_out,
            crate::locator::FileOptions {
                create: true,
                truncate: true,
                ..Default::default()
            },
        )?;
    }
    let single_run = runs.len() == 1 && runs[0].0 == temp_out;
    if runs.len() == 1 && !single_run {
        // One run spilled to the staging directory (a long line spanning every buffer): copied
        // to the output by a merge of one (a rename could cross file systems).
        let (rd, wr) = merge_lines(&rt, &runs, &temp_out, block, direct)?;
        report.bytes_read += rd;
        report.bytes_written += wr;
        let _ = std::fs::remove_file(&runs[0].0);
        runs[0].0 = temp_out.clone();
    }
    report.records = lines;
    report.spilled_runs = if single_run || runs.is_empty() {
        0
    } else {
        runs.len() as u64
    };
    report.run_seconds = t0.elapsed().as_secs_f64();
    report.run_cpu_seconds = process_cpu_seconds() - cpu0;

    // ---- Phase 2: k-way merges until one run is left.
    let merge_group =
        |group: &[(PathBuf, u64)], out: &Path| merge_lines(&rt, group, out, block, direct);
    merge_passes(
        runs,
        opts,
        block,
        4,
        &temp_out,
        &staging,
        &mut report,
        progress,
        &merge_group,
    )?;
    let t2 = Instant::now();
    report.output_bytes = out_len;
    publish(&temp_out, output, &out_dir, out_len, cleanup)?;
    report.publish_seconds = t2.elapsed().as_secs_f64();
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Sorts `index` as cache runs of about `run_bytes` of lines (one core per run), then merges
/// them `fan_in` at a time between `index` and `scratch` until at most `fan_in` are left.
/// Returns the runs' boundaries and whether they are in `scratch`.
fn sort_index(
    arena: Arena<'_>,
    index: &mut [Entry],
    scratch: &mut Vec<Entry>,
    run_bytes: u64,
    fan_in: usize,
    threads: usize,
) -> (Vec<usize>, bool) {
    // Cache runs: consecutive lines of about `run_bytes` (each line counted with its entry).
    let mut bounds = vec![0usize];
    let mut acc = 0u64;
    for (i, e) in index.iter().enumerate() {
        acc += u64::from(e.len) + 1 + ENTRY_BYTES;
        if acc >= run_bytes {
            bounds.push(i + 1);
            acc = 0;
        }
    }
    if *bounds.last().unwrap_or(&0) != index.len() {
        bounds.push(index.len());
    }
    let threads = threads.max(1);
    {
        let mut slices: Vec<&mut [Entry]> = Vec::with_capacity(bounds.len());
        let mut rest: &mut [Entry] = index;
        for w in bounds.windows(2) {
            let (a, b) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            slices.push(a);
            rest = b;
        }
        let per = slices.len().div_ceil(threads).max(1);
        std::thread::scope(|sc| {
            for group in slices.chunks_mut(per) {
                sc.spawn(move || {
                    for run in group.iter_mut() {
                        run.sort_unstable_by(|a, b| arena.less(a, b));
                    }
                });
            }
        });
    }
    scratch.clear();
    scratch.resize(
        index.len(),
        Entry {
            prefix: 0,
            off: 0,
            len: 0,
        },
    );
    let mut in_scratch = false;
    while bounds.len() - 1 > fan_in {
        let (src, dst): (&[Entry], &mut [Entry]) = if in_scratch {
            (scratch.as_slice(), &mut *index)
        } else {
            (&*index, scratch.as_mut_slice())
        };
        // Groups of `fan_in` runs, each merged into the same span of the other array.
        let n_runs = bounds.len() - 1;
        let mut new_bounds = vec![0usize];
        let mut jobs: Vec<(Vec<&[Entry]>, &mut [Entry])> = Vec::new();
        let mut rest: &mut [Entry] = dst;
        for g in (0..n_runs).step_by(fan_in) {
            let g_end = (g + fan_in).min(n_runs);
            let (lo, hi) = (bounds[g], bounds[g_end]);
            let parts: Vec<&[Entry]> = (g..g_end).map(|j| &src[bounds[j]..bounds[j + 1]]).collect();
            let (a, b) = std::mem::take(&mut rest).split_at_mut(hi - lo);
            rest = b;
            jobs.push((parts, a));
            new_bounds.push(hi);
        }
        let per = jobs.len().div_ceil(threads).max(1);
        std::thread::scope(|sc| {
            for batch in jobs.chunks_mut(per) {
                sc.spawn(move || {
                    for (parts, out) in batch.iter_mut() {
                        let mut o = 0usize;
                        let _ = merge_entries(arena, parts, |e| {
                            out[o] = *e;
                            o += 1;
                            Ok(())
                        });
                    }
                });
            }
        });
        bounds = new_bounds;
        in_scratch = !in_scratch;
    }
    (bounds, in_scratch)
}

/// One input of an on-disk merge of lines: two buffers of `carry room + block`; a block is
/// read into the upper part, and the unfinished line of the other buffer is copied just below
/// it, so the current line is always whole in one buffer.
struct LineReader {
    pipes: Vec<Pipe>,
    bufs: Vec<Locator>,
    pending: [Option<Transfer>; 2],
    lens: [u64; 2],
    cur: usize,
    pos: usize,
    end: usize,
    next_off: u64,
    file_len: u64,
    room: usize,
    path: PathBuf,
    done: bool,
}

impl LineReader {
    fn start(&mut self, k: usize) -> Result<()> {
        if self.next_off >= self.file_len {
            self.lens[k] = 0;
            return Ok(());
        }
        let len =
            (self.file_len - self.next_off).min((self.bufs[k].len()? as usize - self.room) as u64);
        // The run's file is padded to whole units (see `align_up`).
        self.pending[k] =
            Some(self.pipes[k].transfer(self.next_off, self.room as u64, align_up(len))?);
        self.lens[k] = len;
        self.next_off += len;
        Ok(())
    }

    /// Moves to the other buffer, carrying the unfinished line; false when the run is over.
    fn advance(&mut self) -> Result<bool> {
        let other = self.cur ^ 1;
        let Some(t) = self.pending[other].take() else {
            if self.pos < self.end {
                return Err(Error::BadInput {
                    path: self.path.clone(),
                    reason: format!(
                        "a spilled run ends inside a line ({} bytes without a newline)",
                        self.end - self.pos
                    ),
                });
            }
            self.done = true;
            return Ok(false);
        };
        t.wait()?;
        let carry = self.end - self.pos;
        if carry > self.room {
            return Err(Error::BadInput {
                path: self.path.clone(),
                reason: format!("a line of a spilled run is longer than {} bytes", self.room),
            });
        }
        if carry > 0 {
            let src = self.bufs[self.cur].bytes()?;
            let mut dst = self.bufs[other].bytes()?;
            dst[self.room - carry..self.room].copy_from_slice(&src[self.pos..self.end]);
        }
        let old = self.cur;
        self.cur = other;
        self.pos = self.room - carry;
        self.end = self.room + self.lens[other] as usize;
        self.start(old)?;
        Ok(true)
    }
}

/// Merges the line runs of `group` into `out`; returns (bytes read, bytes written).
fn merge_lines(
    rt: &Runtime,
    group: &[(PathBuf, u64)],
    out: &Path,
    block: u64,
    direct: bool,
) -> Result<(u64, u64)> {
    let room = block as usize;
    let mut readers = Vec::new();
    for (p, len) in group {
        let (f, _) = open_file(p, direct, false)?;
        let bufs: Vec<Locator> = (0..2)
            .map(|_| Locator::dram(2 * block))
            .collect::<Result<_>>()?;
        let pipes = bufs
            .iter()
            .map(|b| rt.pipe(&f, b, PipeOptions::default()))
            .collect::<Result<_>>()?;
        let mut r = LineReader {
            pipes,
            bufs,
            pending: [None, None],
            lens: [0; 2],
            cur: 1,
            pos: room,
            end: room,
            next_off: 0,
            file_len: *len,
            room,
            path: p.clone(),
            done: false,
        };
        // The first block goes to buffer 0; `advance` from the empty buffer 1 moves to it and
        // starts the second block into buffer 1.
        r.start(0)?;
        r.advance()?;
        readers.push(r);
    }
    let (dst, _) = open_file(out, direct, true)?;
    let oblocks: Vec<Locator> = (0..2)
        .map(|_| Locator::dram(block))
        .collect::<Result<_>>()?;
    let mut w = BlockWriter::new(rt, &oblocks, &dst, true)?;
    loop {
        // Every reader's current line is whole (or the reader is done).
        for r in readers.iter_mut() {
            while !r.done {
                let whole = {
                    let g = r.bufs[r.cur].bytes()?;
                    memchr::memchr(b'\n', &g[r.pos..r.end]).is_some()
                };
                if whole || !r.advance()? {
                    break;
                }
            }
        }
        if readers.iter().all(|r| r.done) {
            break;
        }
        // Merge until a reader's next line is not whole in its buffer.
        let mut pos: Vec<usize> = readers.iter().map(|r| r.pos).collect();
        {
            let guards: Vec<Option<BytesGuard<'_>>> = readers
                .iter()
                .map(|r| {
                    if r.done {
                        Ok(None)
                    } else {
                        r.bufs[r.cur].bytes().map(Some)
                    }
                })
                .collect::<Result<_>>()?;
            let line_at = |i: usize, p: usize| -> Option<&[u8]> {
                let g = guards[i].as_ref()?;
                let e = readers[i].end;
                memchr::memchr(b'\n', &g[p..e]).map(|n| &g[p..p + n])
            };
            let mut heap: BinaryHeap<Reverse<(u64, &[u8], usize)>> = (0..readers.len())
                .filter_map(|i| line_at(i, pos[i]).map(|l| Reverse((prefix(l), l, i))))
                .collect();
            while let Some(mut top) = heap.peek_mut() {
                let (_, line, i) = top.0;
                w.put(line)?;
                w.put(b"\n")?;
                pos[i] += line.len() + 1;
                match line_at(i, pos[i]) {
                    Some(l) => top.0 = (prefix(l), l, i),
                    None => {
                        PeekMut::pop(top);
                        break;
                    }
                }
            }
        }
        for (r, p) in readers.iter_mut().zip(pos) {
            r.pos = p;
        }
    }
    let written = w.finish()?;
    let read = group.iter().map(|g| g.1).sum();
    Ok((read, written))
}
