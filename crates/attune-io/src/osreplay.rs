//! Replays a program's file I/O (system calls, e.g. from an strace log) on the simulated SSD
//! through a model of the operating system's page cache, so that a program we cannot run on
//! the simulator (SQLite) is measured on it all the same.
//!
//! The model (docs/ssd-profile.md, "The SQLite study"):
//! - **Files** sit in one contiguous device region each, at the device offset the caller gives
//!   (`OsLayout::bases`); a file offset `o` is device offset `base + o`.
//! - **Writes** dirty 4 KiB OS pages and reach the device only at `fsync` of their file (or at
//!   the end of the run): the dirty pages are sorted, merged into runs of consecutive pages,
//!   and each run is cut into requests of at most `write_bytes` (Linux's `max_sectors_kb`)
//!   and, when `split_bytes` is set, at every device offset that is a multiple of it (the
//!   barrier the chapter adds so that writeback never crosses a stripe boundary). A request
//!   is charged every flash page it touches ([`crate::check::pages_touched`]).
//! - **Reads** go to the device and are waited for (no OS page cache for reads: the program's
//!   own buffer pool is the cache, as with `O_DIRECT`).
//! - **Time** is one clock: each request is submitted at it and waited for; CPU is free.
//! - **Marks** split the run into phases; each phase reports its own device time and counts.
//!
//! Deterministic: the same ops, parameters and seed give the same result.

use std::collections::{BTreeSet, HashMap};

use crate::check::pages_touched;
use crate::error::{invalid, Result};
use crate::ssd::{IoRequest, Ssd, SsdParams};
use attune_workload::trace::IoKind;

/// The OS page (dirty-tracking and writeback unit).
pub const OS_PAGE_BYTES: u64 = 4096;

/// What one replayed call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OsOpKind {
    /// `pread`/`read` of `size` bytes at `offset`.
    Read,
    /// `pwrite`/`write` of `size` bytes at `offset` (into the page cache).
    Write,
    /// `fsync`/`fdatasync` of the file.
    Sync,
    /// The start of a new phase (file, offset and size are ignored).
    Mark,
}

/// One replayed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OsOp {
    pub kind: OsOpKind,
    /// File number (an index into `OsLayout::bases`).
    pub file: u32,
    pub offset: u64,
    pub size: u64,
}

/// Where files sit on the device and how writeback cuts requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsLayout {
    /// Device offset of each file's first byte.
    pub bases: Vec<u64>,
    /// Largest writeback request (a multiple of 4096). Default 128 KiB.
    pub write_bytes: u64,
    /// Writeback requests never cross a device offset that is a multiple of this; 0 = off.
    pub split_bytes: u64,
}

/// Counters of one phase (or of one file within it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OsCounts {
    /// Device time the phase took, nanoseconds.
    pub device_ns: u64,
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    /// Flash pages the writes programmed, and the least those bytes need.
    pub flash_pages: u64,
    pub min_flash_pages: u64,
    /// Calls of the program in this phase.
    pub calls_read: u64,
    pub calls_write: u64,
    pub calls_sync: u64,
}

/// Result of a replay: one entry per phase (the first starts at the first op; every `Mark`
/// starts another), plus flash pages per file over the whole run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OsReplay {
    pub phases: Vec<OsCounts>,
    /// (flash pages, minimum) per file.
    pub file_pages: Vec<(u64, u64)>,
}

struct State {
    ssd: Ssd,
    page: u64,
    clock: u64,
    dirty: HashMap<u32, BTreeSet<u64>>,
    cur: OsCounts,
    file_pages: Vec<(u64, u64)>,
}

impl State {
    fn submit(&mut self, offset: u64, size: u64, kind: IoKind) -> Result<()> {
        let size = u32::try_from(size)
            .map_err(|_| invalid("size", size, "one I/O must be under 4 GiB"))?;
        let c = self.ssd.submit(IoRequest {
            time_ns: self.clock,
            offset,
            size,
            kind,
        });
        self.clock = self.clock.max(c.finish_ns);
        Ok(())
    }

    fn writeback(&mut self, file: u32, lay: &OsLayout) -> Result<()> {
        let Some(pages) = self.dirty.remove(&file) else {
            return Ok(());
        };
        let base = lay.bases[file as usize];
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for p in pages {
            match runs.last_mut() {
                Some((a, n)) if *a + *n == p => *n += 1,
                _ => runs.push((p, 1)),
            }
        }
        for (first, n) in runs {
            let mut dev = base + first * OS_PAGE_BYTES;
            let end = dev + n * OS_PAGE_BYTES;
            while dev < end {
                let mut stop = end.min(dev + lay.write_bytes);
                if let Some(k) = dev.checked_div(lay.split_bytes) {
                    stop = stop.min((k + 1) * lay.split_bytes);
                }
                let len = stop - dev;
                let touched = pages_touched(dev, len, self.page);
                let first_page = dev / self.page * self.page;
                self.submit(first_page, touched * self.page, IoKind::Write)?;
                let min = len.div_ceil(self.page);
                self.cur.writes += 1;
                self.cur.write_bytes += len;
                self.cur.flash_pages += touched;
                self.cur.min_flash_pages += min;
                let fp = &mut self.file_pages[file as usize];
                fp.0 += touched;
                fp.1 += min;
                dev = stop;
            }
        }
        Ok(())
    }
}

/// Replays `ops` on a fresh `Ssd::new(params, seed)` (see the module documentation). Fails,
/// naming the op, when a file number has no base or an offset does not fit the device.
pub fn replay_os(ops: &[OsOp], params: &SsdParams, seed: u64, lay: &OsLayout) -> Result<OsReplay> {
    if lay.write_bytes == 0 || !lay.write_bytes.is_multiple_of(OS_PAGE_BYTES) {
        return Err(invalid(
            "write_bytes",
            lay.write_bytes,
            "must be a positive multiple of 4096",
        ));
    }
    let ssd = Ssd::new(params.clone(), seed)?;
    let cap = params.capacity_bytes;
    let mut st = State {
        ssd,
        page: u64::from(params.page_bytes),
        clock: 0,
        dirty: HashMap::new(),
        cur: OsCounts::default(),
        file_pages: vec![(0, 0); lay.bases.len()],
    };
    let mut phases = Vec::new();
    let mut phase_start = 0u64;
    for (i, op) in ops.iter().enumerate() {
        if op.kind == OsOpKind::Mark {
            st.cur.device_ns = st.clock - phase_start;
            phases.push(std::mem::take(&mut st.cur));
            phase_start = st.clock;
            continue;
        }
        let Some(&base) = lay.bases.get(op.file as usize) else {
            return Err(invalid(
                "file",
                op.file,
                format!(
                    "op {i}: no place on the device ({} files placed)",
                    lay.bases.len()
                ),
            ));
        };
        if base.saturating_add(op.offset).saturating_add(op.size) > cap {
            return Err(invalid(
                "offset",
                op.offset,
                format!(
                    "op {i}: {} bytes of file {} at device offset {base} run past the device's \
                     {cap} bytes",
                    op.size, op.file
                ),
            ));
        }
        match op.kind {
            OsOpKind::Read => {
                st.cur.calls_read += 1;
                if op.size > 0 {
                    st.cur.reads += 1;
                    st.cur.read_bytes += op.size;
                    st.submit(base + op.offset, op.size, IoKind::Read)?;
                }
            }
            OsOpKind::Write => {
                st.cur.calls_write += 1;
                if op.size > 0 {
                    let set = st.dirty.entry(op.file).or_default();
                    let last = (op.offset + op.size - 1) / OS_PAGE_BYTES;
                    set.extend(op.offset / OS_PAGE_BYTES..=last);
                }
            }
            OsOpKind::Sync => {
                st.cur.calls_sync += 1;
                st.writeback(op.file, lay)?;
            }
            OsOpKind::Mark => {}
        }
    }
    // The end of the run: the OS writes back whatever is still dirty.
    let mut left: Vec<u32> = st.dirty.keys().copied().collect();
    left.sort_unstable();
    for f in left {
        st.writeback(f, lay)?;
    }
    st.cur.device_ns = st.clock - phase_start;
    phases.push(st.cur);
    Ok(OsReplay {
        phases,
        file_pages: st.file_pages,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn params() -> SsdParams {
        SsdParams {
            chunk_bytes: 64 << 10,
            page_bytes: 16 << 10,
            stripe_chips: 4,
            ..SsdParams::default()
        }
    }

    fn op(kind: OsOpKind, file: u32, offset: u64, size: u64) -> OsOp {
        OsOp {
            kind,
            file,
            offset,
            size,
        }
    }

    fn layout(bases: Vec<u64>, split: u64) -> OsLayout {
        OsLayout {
            bases,
            write_bytes: 128 << 10,
            split_bytes: split,
        }
    }

    #[test]
    fn writes_reach_the_device_at_fsync_in_merged_runs() {
        use OsOpKind::*;
        // Two 24-byte headers and two 4 KiB pages, contiguous: one run of 3 OS pages.
        let ops = [
            op(Write, 0, 0, 24),
            op(Write, 0, 24, 4096),
            op(Write, 0, 4120, 24),
            op(Write, 0, 4144, 4096),
            op(Mark, 0, 0, 0),
            op(Sync, 0, 0, 0),
        ];
        let r = replay_os(&ops, &params(), 1, &layout(vec![0], 0)).unwrap();
        assert_eq!(r.phases.len(), 2);
        assert_eq!((r.phases[0].writes, r.phases[0].calls_write), (0, 4));
        let p = r.phases[1];
        assert_eq!((p.writes, p.write_bytes), (1, 3 * 4096));
        assert_eq!((p.flash_pages, p.min_flash_pages), (1, 1));
        assert!(p.device_ns > 0);
    }

    #[test]
    fn a_run_across_a_page_costs_an_extra_page_and_splitting_at_stripes_cuts_requests() {
        use OsOpKind::*;
        // 64 KiB written at file offset 0 of a file placed 8 KiB into a flash page.
        let ops = [op(Write, 0, 0, 65536), op(Sync, 0, 0, 0)];
        let r = replay_os(&ops, &params(), 1, &layout(vec![8192], 0)).unwrap();
        assert_eq!(
            (r.phases[0].flash_pages, r.phases[0].min_flash_pages),
            (5, 4)
        );
        // Placed 32 KiB before a 256 KiB stripe boundary and split there: two requests.
        let base = (256 << 10) - (32 << 10);
        let r = replay_os(&ops, &params(), 1, &layout(vec![base], 256 << 10)).unwrap();
        assert_eq!(r.phases[0].writes, 2);
        let r = replay_os(&ops, &params(), 1, &layout(vec![base], 0)).unwrap();
        assert_eq!(r.phases[0].writes, 1);
        assert_eq!(r.file_pages, vec![(4, 4)]);
    }

    #[test]
    fn reads_are_timed_and_unsynced_writes_are_written_at_the_end() {
        use OsOpKind::*;
        let ops = [op(Read, 1, 0, 65536), op(Write, 0, 0, 100)];
        let r = replay_os(&ops, &params(), 1, &layout(vec![0, 1 << 30], 0)).unwrap();
        let p = r.phases[0];
        assert_eq!((p.reads, p.read_bytes, p.writes), (1, 65536, 1));
        assert_eq!(r.file_pages, vec![(1, 1), (0, 0)]);
    }

    #[test]
    fn bad_files_offsets_and_layouts_are_named() {
        use OsOpKind::*;
        let e = replay_os(&[op(Read, 3, 0, 1)], &params(), 1, &layout(vec![0], 0));
        assert!(e.unwrap_err().to_string().contains("`file` = 3"));
        let far = [op(Write, 0, 1 << 41, 10)];
        let e = replay_os(&far, &params(), 1, &layout(vec![0], 0));
        assert!(e.unwrap_err().to_string().contains("past the device"));
        let mut l = layout(vec![0], 0);
        l.write_bytes = 100;
        let e = replay_os(&[], &params(), 1, &l);
        assert!(e.unwrap_err().to_string().contains("write_bytes"));
    }
}
