//! Checking an I/O trace against a device's learned parameters: the chapter's five rules.
//!
//! 1. Writes are multiples of the smallest desirable write size.
//! 2. Reads of at least a chunk start at a hot location (`offset mod chunk = hot`).
//! 3. Writes start on a stripe boundary.
//! 4. Writes of at least a chunk start on a chunk boundary.
//! 5. Writes touch no more flash pages than their size needs (`ceil(size / page)`).
//!
//! Each violation names the I/O (index, file, offset, size) and, for writes, the flash pages it
//! programs beyond the minimum. The totals give flash pages written, the write amplification
//! (flash bytes programmed / bytes written, a partial page costing a whole page) and the wear
//! saved by fixing every violation. A rule whose parameter is unknown is reported as not
//! checkable, with the parameter it needs, rather than silently passing.
//!
//! Offsets are taken as given: file offsets for a per-file trace (which assumes each file's
//! extents start on stripe boundaries, as the chapter's analysis does), device offsets for a
//! block trace.
//!
//! Thread-safety: pure functions over plain data.

use std::collections::BTreeMap;

/// One I/O of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceIo {
    /// A caller's file number (0 for a block trace).
    pub file: u32,
    /// Byte offset.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
    /// Write (true) or read.
    pub write: bool,
}

/// The device parameters the rules use; `None` is "unknown".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleParams {
    /// Smallest desirable write size (rule 1).
    pub desirable_write: Option<u64>,
    /// Stripe size (rule 3).
    pub stripe: Option<u64>,
    /// Chunk size (rules 2 and 4).
    pub chunk: Option<u64>,
    /// Flash page size (rule 5 and the page estimates).
    pub page: Option<u64>,
    /// Hot-location offset inside a chunk (rule 2).
    pub hot_offset: Option<u64>,
}

/// One rule broken by one I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Rule number, 1..=5.
    pub rule: u8,
    /// Index of the I/O in the trace.
    pub index: usize,
    /// The I/O.
    pub io: TraceIo,
    /// Flash pages this write programs beyond `ceil(size / page)` (0 for reads, or when the page
    /// is unknown).
    pub extra_pages: u64,
}

/// The result of checking one trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckReport {
    /// Every violation, in trace order, rule order within one I/O.
    pub violations: Vec<Violation>,
    /// Violations per rule (index 0 = rule 1).
    pub counts: [u64; 5],
    /// Rules that could not be checked, with the parameter each needs.
    pub unchecked: Vec<(u8, &'static str)>,
    /// I/Os checked: reads, writes.
    pub reads: u64,
    /// See `reads`.
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Flash pages the writes program (each touched page counts once per write); 0 when the page
    /// is unknown.
    pub flash_pages: u64,
    /// Pages the writes would need if each were page-aligned (`ceil(size / page)`).
    pub min_flash_pages: u64,
}

impl CheckReport {
    /// Flash bytes programmed / bytes written (NaN-free: 0 when nothing was written or the page
    /// is unknown).
    pub fn write_amplification(&self, page: Option<u64>) -> f64 {
        match page {
            Some(p) if self.write_bytes > 0 => {
                (self.flash_pages * p) as f64 / self.write_bytes as f64
            }
            _ => 0.0,
        }
    }

    /// Extra flash pages, summed over the violations of rule 5 (the wear fixing them saves).
    pub fn extra_pages(&self) -> u64 {
        self.flash_pages - self.min_flash_pages
    }

    /// Violations per file, for reports.
    pub fn per_file(&self) -> BTreeMap<u32, [u64; 5]> {
        let mut m: BTreeMap<u32, [u64; 5]> = BTreeMap::new();
        for v in &self.violations {
            m.entry(v.io.file).or_default()[usize::from(v.rule - 1)] += 1;
        }
        m
    }
}

/// Pages of `page` bytes that the byte range `[offset, offset + size)` touches.
pub fn pages_touched(offset: u64, size: u64, page: u64) -> u64 {
    if size == 0 {
        return 0;
    }
    (offset + size).div_ceil(page) - offset / page
}

/// Applies rules 1–5 to `ios` (parameters of 0 count as unknown).
pub fn check(ios: &[TraceIo], p: &RuleParams) -> CheckReport {
    let known = |v: Option<u64>| v.filter(|&x| x > 0);
    let (d, s, c, pg) = (
        known(p.desirable_write),
        known(p.stripe),
        known(p.chunk),
        known(p.page),
    );
    let hot = p.hot_offset;
    let mut r = CheckReport::default();
    if d.is_none() {
        r.unchecked.push((1, "desirable write size"));
    }
    if c.is_none() || hot.is_none() {
        r.unchecked.push((2, "chunk size and hot-location offset"));
    }
    if s.is_none() {
        r.unchecked.push((3, "stripe size"));
    }
    if c.is_none() {
        r.unchecked.push((4, "chunk size"));
    }
    if pg.is_none() {
        r.unchecked.push((5, "flash page size"));
    }
    for (index, io) in ios.iter().enumerate() {
        if io.size == 0 {
            continue;
        }
        let mut add = |rule: u8, extra_pages: u64| {
            r.counts[usize::from(rule - 1)] += 1;
            r.violations.push(Violation {
                rule,
                index,
                io: *io,
                extra_pages,
            });
        };
        if !io.write {
            r.reads += 1;
            if let (Some(c), Some(h)) = (c, hot) {
                if io.size >= c && io.offset % c != h % c {
                    add(2, 0);
                }
            }
            continue;
        }
        r.writes += 1;
        r.write_bytes += io.size;
        let (touched, minimum) = match pg {
            Some(pg) => (pages_touched(io.offset, io.size, pg), io.size.div_ceil(pg)),
            None => (0, 0),
        };
        r.flash_pages += touched;
        r.min_flash_pages += minimum;
        if d.is_some_and(|d| !io.size.is_multiple_of(d)) {
            add(1, 0);
        }
        if s.is_some_and(|s| !io.offset.is_multiple_of(s)) {
            add(3, 0);
        }
        if c.is_some_and(|c| io.size >= c && !io.offset.is_multiple_of(c)) {
            add(4, 0);
        }
        if pg.is_some() && touched > minimum {
            add(5, touched - minimum);
        }
    }
    r
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use attune_workload::rng::Xoshiro256;

    const K: u64 = 1024;

    fn w(offset: u64, size: u64) -> TraceIo {
        TraceIo {
            file: 0,
            offset,
            size,
            write: true,
        }
    }

    fn params() -> RuleParams {
        RuleParams {
            desirable_write: Some(64 * K),
            stripe: Some(64 * K),
            chunk: Some(16 * K),
            page: Some(4 * K),
            hot_offset: Some(8 * K),
        }
    }

    #[test]
    fn planted_violations_are_all_found_and_nothing_else() {
        // A clean trace (stripe-aligned 64 KiB writes, chunk-sized reads at the hot offset) with
        // violations planted at known places, each breaking exactly the rules listed.
        let mut rng = Xoshiro256::new(3, 9);
        let mut ios = Vec::new();
        let mut planted: Vec<(usize, Vec<u8>)> = Vec::new();
        for i in 0..2000u64 {
            let base = rng.below(1 << 14) * 64 * K;
            let kind = rng.below(8);
            let (io, rules) = match kind {
                0 => (w(base + 24, 24), vec![1, 3]), // a small header write inside one page
                1 => (w(base + 4090, 24), vec![1, 3, 5]), // ... straddling two pages
                2 => (w(base + 16 * K + 512, 64 * K), vec![3, 4, 5]), // unaligned 64 KiB
                3 => (
                    TraceIo {
                        file: 1,
                        offset: base,
                        size: 16 * K,
                        write: false,
                    },
                    vec![2],
                ), // a chunk read off the hot offset
                4 => (
                    TraceIo {
                        file: 1,
                        offset: base + 8 * K,
                        size: 16 * K,
                        write: false,
                    },
                    vec![],
                ),
                5 => (
                    TraceIo {
                        file: 1,
                        offset: base + 100,
                        size: 100,
                        write: false,
                    },
                    vec![],
                ), // small reads are not rule 2's business
                _ => (w(base, 64 * K * (1 + i % 3)), vec![]),
            };
            if !rules.is_empty() {
                planted.push((ios.len(), rules));
            }
            ios.push(io);
        }
        let r = check(&ios, &params());
        let mut found: Vec<(usize, Vec<u8>)> = Vec::new();
        for v in &r.violations {
            match found.last_mut() {
                Some((i, rules)) if *i == v.index => rules.push(v.rule),
                _ => found.push((v.index, vec![v.rule])),
            }
        }
        assert_eq!(found, planted);
        assert!(r.unchecked.is_empty());
        let straddles = ios.iter().filter(|io| io.offset % (64 * K) == 4090).count() as u64;
        let unaligned = ios
            .iter()
            .filter(|io| io.size == 64 * K && io.offset % K == 512)
            .count();
        // A straddling 24-byte write programs 2 pages instead of 1; an unaligned 64 KiB write 17
        // instead of 16.
        assert_eq!(r.extra_pages(), straddles + unaligned as u64);
    }

    #[test]
    fn unknown_parameters_make_rules_uncheckable() {
        let r = check(&[w(24, 24)], &RuleParams::default());
        let rules: Vec<u8> = r.unchecked.iter().map(|u| u.0).collect();
        assert_eq!(rules, vec![1, 2, 3, 4, 5]);
        assert!(r.violations.is_empty());
        let p = RuleParams {
            page: Some(4 * K),
            ..RuleParams::default()
        };
        let r = check(&[w(4090, 24), w(0, 4 * K)], &p);
        assert_eq!(r.counts, [0, 0, 0, 0, 1]);
        assert_eq!(r.flash_pages, 3);
        assert!((r.write_amplification(p.page) - 12.0 * 1024.0 / 4120.0).abs() < 1e-9);
    }

    #[test]
    fn pages_touched_counts_partial_pages() {
        assert_eq!(pages_touched(0, 4096, 4096), 1);
        assert_eq!(pages_touched(1, 4096, 4096), 2);
        assert_eq!(pages_touched(4095, 2, 4096), 2);
        assert_eq!(pages_touched(0, 0, 4096), 0);
    }
}
