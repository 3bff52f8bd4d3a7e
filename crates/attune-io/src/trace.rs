//! Block-trace readers: the MSR-Cambridge cut format, the CloudPhysics CSV and Attune's own
//! formats (CSV and binary, from attune-workload), all into [`BlockRecord`]s.
//!
//! * **MSR** (`msr`): one I/O per line, `timestamp_ms device offset_bytes size_bytes op`,
//!   space-separated, `op` 1 = read, 0 = write (the cut published with the Heimdall artifact).
//!   Timestamps are fractional milliseconds. The same reader takes the form the MSR-Cambridge
//!   traces are published in (SNIA IOTTA, files such as `hm_0.csv`): comma-separated
//!   `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, the timestamp and response
//!   time in 100 ns ticks (Windows file time), `Type` `Read` or `Write`, offset and size in bytes,
//!   with or without that header line. The first data line decides the form of the file.
//! * **CloudPhysics** (`cloudphysics`): CSV with the header `version,time,op,size,lbn`; `op` a SCSI
//!   opcode in hex (`28`/`88` read, `2a`/`8a` write), `size` in bytes, `lbn` in 512-byte sectors.
//!   The unit of `time` is undocumented: we read it as **seconds** (the sample's 113,872 I/Os span
//!   7,200 ticks and up to 2,500 I/Os share one tick, which is implausible at millisecond
//!   resolution); the I/Os sharing a tick are spread evenly over that second, in file order. The
//!   unit is a parameter (`time_unit_ns`).
//! * **Attune CSV** (`attune-csv`) and **Attune binary** (`attune`): attune-workload's block-trace
//!   formats (`docs/formats/block-trace.md`).
//!
//! Timestamps are rebased so the first I/O is at 0, and the records are sorted by time (a stable
//! sort: I/Os with equal timestamps keep their file order), because the simulator and the router
//! serve arrivals in time order and real traces hold a few late records;
//! [`read_trace_reordered`] also says how many records changed position. Text readers report the
//! 1-based line number of the first malformed line; blank lines and `#` comments are skipped.
//!
//! Thread-safety: pure functions.

use std::io::BufRead;

use attune_workload::trace::{self as wtrace, BinaryTraceReader, BlockRecord, IoKind};

use crate::error::{invalid, IoError, Result};

/// A trace format this module reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// MSR-Cambridge cut format.
    Msr,
    /// CloudPhysics CSV.
    CloudPhysics,
    /// Attune's CSV block-trace format.
    AttuneCsv,
    /// Attune's binary block-trace format.
    Attune,
}

impl TraceFormat {
    /// Parses a format name (`msr`, `cloudphysics`, `attune-csv`, `attune`).
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "msr" => Ok(Self::Msr),
            "cloudphysics" => Ok(Self::CloudPhysics),
            "attune-csv" => Ok(Self::AttuneCsv),
            "attune" => Ok(Self::Attune),
            other => Err(invalid(
                "format",
                other,
                "unknown trace format; valid: msr, cloudphysics, attune-csv, attune",
            )),
        }
    }

    /// Guesses the format of `data` from its first bytes (binary magic, CloudPhysics header,
    /// Attune CSV header, else MSR).
    pub fn sniff(data: &[u8]) -> Self {
        if data.starts_with(&wtrace::MAGIC) {
            Self::Attune
        } else if data.starts_with(b"version,time,op,size,lbn") {
            Self::CloudPhysics
        } else if data.starts_with(wtrace::CSV_HEADER.as_bytes()) {
            Self::AttuneCsv
        } else {
            Self::Msr
        }
    }
}

/// Default unit of CloudPhysics `time`: one second.
pub const CLOUDPHYSICS_TIME_UNIT_NS: u64 = 1_000_000_000;

/// Reads a whole trace held in memory (decompressed), in the given format, sorted by time.
pub fn read_trace(data: &[u8], format: TraceFormat) -> Result<Vec<BlockRecord>> {
    read_trace_reordered(data, format).map(|(v, _)| v)
}

/// [`read_trace`], and the number of records whose position the time sort changed (0 for a
/// trace already in time order).
pub fn read_trace_reordered(data: &[u8], format: TraceFormat) -> Result<(Vec<BlockRecord>, u64)> {
    let mut out = match format {
        TraceFormat::Msr => read_msr(data)?,
        TraceFormat::CloudPhysics => read_cloudphysics(data, CLOUDPHYSICS_TIME_UNIT_NS)?,
        TraceFormat::AttuneCsv => {
            let mut v = Vec::new();
            for r in wtrace::read_csv(data) {
                v.push(r?);
            }
            v
        }
        TraceFormat::Attune => {
            let mut v = Vec::new();
            for r in BinaryTraceReader::new(data)? {
                v.push(r?);
            }
            v
        }
    };
    rebase(&mut out);
    let moved = sort_by_time(&mut out);
    Ok((out, moved))
}

/// Stable sort by timestamp; returns how many records changed position.
fn sort_by_time(v: &mut Vec<BlockRecord>) -> u64 {
    if v.windows(2).all(|w| w[0].timestamp_ns <= w[1].timestamp_ns) {
        return 0;
    }
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by_key(|&i| v[i].timestamp_ns);
    let moved = idx.iter().enumerate().filter(|(k, &i)| *k != i).count() as u64;
    *v = idx.iter().map(|&i| v[i]).collect();
    moved
}

fn rebase(v: &mut [BlockRecord]) {
    if let Some(t0) = v.iter().map(|r| r.timestamp_ns).min() {
        for r in v.iter_mut() {
            r.timestamp_ns -= t0;
        }
    }
}

fn lines(data: &[u8]) -> impl Iterator<Item = (u64, std::io::Result<String>)> + '_ {
    data.lines().enumerate().map(|(i, l)| (i as u64 + 1, l))
}

/// Parses an unsigned trace field; the reason names what is wrong with it (negative, too large
/// for `T`, or not an integer at all).
fn uint_field<T: std::str::FromStr>(
    what: &str,
    s: &str,
    limit: &str,
) -> std::result::Result<T, String> {
    s.parse().map_err(|_| {
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if s.strip_prefix('-').is_some_and(digits) {
            format!("{what} `{s}` is negative")
        } else if digits(s.strip_prefix('+').unwrap_or(s)) {
            format!("{what} `{s}` is too large (at most {limit})")
        } else {
            format!("{what} `{s}` is not a non-negative integer")
        }
    })
}

/// The SNIA form's header line.
const MSR_CSV_HEADER: &str = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime";

/// Reads the MSR-Cambridge cut format, or the comma-separated form the traces are published in.
pub fn read_msr(data: &[u8]) -> Result<Vec<BlockRecord>> {
    let mut out = Vec::new();
    let mut csv: Option<bool> = None;
    for (line_no, line) in lines(data) {
        let bad = |reason: String| IoError::MalformedTrace {
            format: "msr",
            line: line_no,
            reason,
        };
        let line = line.map_err(|e| bad(format!("not text: {e}")))?;
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if csv.is_none() && l.eq_ignore_ascii_case(MSR_CSV_HEADER) {
            csv = Some(true);
            continue;
        }
        if *csv.get_or_insert_with(|| l.contains(',')) {
            out.push(msr_csv_record(l).map_err(bad)?);
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 5 {
            return Err(bad(format!(
                "expected 5 fields `timestamp_ms device offset size op`, got {} (or, in the \
                 comma-separated form, `{MSR_CSV_HEADER}` on every line)",
                f.len()
            )));
        }
        let ms: f64 = f[0]
            .parse()
            .map_err(|_| bad(format!("timestamp `{}` is not a number", f[0])))?;
        if !ms.is_finite() || !(0.0..1e13).contains(&ms) {
            return Err(bad(format!("timestamp `{}` is out of range", f[0])));
        }
        let offset: u64 = uint_field("offset", f[2], "2^64 - 1").map_err(bad)?;
        let size: u32 = uint_field("size", f[3], "2^32 - 1").map_err(bad)?;
        let kind = match f[4] {
            "1" => IoKind::Read,
            "0" => IoKind::Write,
            other => {
                return Err(bad(format!(
                    "op `{other}` is neither 1 (read) nor 0 (write)"
                )))
            }
        };
        out.push(BlockRecord {
            timestamp_ns: (ms * 1e6).round() as u64,
            offset,
            size,
            kind,
            latency_ns: 0,
        });
    }
    Ok(out)
}

/// One line of the SNIA form: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`,
/// times in 100 ns ticks.
fn msr_csv_record(l: &str) -> std::result::Result<BlockRecord, String> {
    let f: Vec<&str> = l.split(',').map(str::trim).collect();
    if f.len() != 7 {
        return Err(format!(
            "expected 7 comma-separated fields `{MSR_CSV_HEADER}`, got {} (the first data line \
             had commas, so the file is read in that form)",
            f.len()
        ));
    }
    let ticks = |what: &str, s: &str| -> std::result::Result<u64, String> {
        let t: u64 = uint_field(what, s, "2^64 - 1")?;
        t.checked_mul(100).ok_or_else(|| {
            format!("{what} `{s}` is out of range (100 ns ticks beyond 2^64 - 1 ns)")
        })
    };
    let kind = match f[3].to_ascii_lowercase().as_str() {
        "read" => IoKind::Read,
        "write" => IoKind::Write,
        _ => return Err(format!("type `{}` is neither Read nor Write", f[3])),
    };
    Ok(BlockRecord {
        timestamp_ns: ticks("timestamp", f[0])?,
        offset: uint_field("offset", f[4], "2^64 - 1")?,
        size: uint_field("size", f[5], "2^32 - 1")?,
        kind,
        latency_ns: ticks("response time", f[6])?,
    })
}

/// Reads the CloudPhysics CSV; `time_unit_ns` is the length of one `time` tick.
pub fn read_cloudphysics(data: &[u8], time_unit_ns: u64) -> Result<Vec<BlockRecord>> {
    if time_unit_ns == 0 {
        return Err(invalid("time_unit_ns", 0, "must be at least 1"));
    }
    let mut raw: Vec<(u64, BlockRecord)> = Vec::new();
    for (line_no, line) in lines(data) {
        let bad = |reason: String| IoError::MalformedTrace {
            format: "cloudphysics",
            line: line_no,
            reason,
        };
        let line = line.map_err(|e| bad(format!("not text: {e}")))?;
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || (line_no == 1 && l.starts_with("version,")) {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != 5 {
            return Err(bad(format!(
                "expected 5 fields `version,time,op,size,lbn`, got {}",
                f.len()
            )));
        }
        let tick: u64 = uint_field("time", f[1], "2^64 - 1").map_err(bad)?;
        let kind = match f[2].to_ascii_lowercase().as_str() {
            "28" | "88" | "a8" | "08" => IoKind::Read,
            "2a" | "8a" | "aa" | "0a" => IoKind::Write,
            other => {
                return Err(bad(format!(
                    "op `{other}` is not a SCSI read or write opcode"
                )))
            }
        };
        let size: u32 = uint_field("size", f[3], "2^32 - 1").map_err(bad)?;
        let lbn: u64 = uint_field("lbn", f[4], "2^64 - 1").map_err(bad)?;
        let offset = lbn
            .checked_mul(512)
            .ok_or_else(|| bad(format!("lbn `{lbn}` overflows a byte offset")))?;
        if tick.checked_mul(time_unit_ns).is_none() {
            return Err(bad(format!("time `{tick}` overflows nanoseconds")));
        }
        raw.push((
            tick,
            BlockRecord {
                timestamp_ns: 0,
                offset,
                size,
                kind,
                latency_ns: 0,
            },
        ));
    }
    // Spread the I/Os of each tick evenly over the tick, in file order.
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let tick = raw[i].0;
        let mut j = i;
        while j < raw.len() && raw[j].0 == tick {
            j += 1;
        }
        let n = (j - i) as u64;
        for (k, (_, r)) in raw[i..j].iter().enumerate() {
            let mut r = *r;
            r.timestamp_ns = tick * time_unit_ns + time_unit_ns * k as u64 / n;
            out.push(r);
        }
        i = j;
    }
    out.sort_by_key(|r| r.timestamp_ns);
    Ok(out)
}

/// Re-rates a trace: inter-arrival times multiplied by `1 / rate` (rate 2 = twice as intense).
/// A timestamp that would exceed 2^64 - 1 ns is an error naming it (the trace is left unchanged).
pub fn rerate(v: &mut [BlockRecord], rate: f64) -> Result<()> {
    if !rate.is_finite() || rate <= 0.0 {
        return Err(invalid("rate", rate, "must be a positive number"));
    }
    // 2^64 as f64; any rounded value below it fits a u64.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    if let Some(r) = v
        .iter()
        .find(|r| (r.timestamp_ns as f64 / rate).round() >= LIMIT)
    {
        return Err(invalid(
            "rate",
            rate,
            format!(
                "timestamp {} ns would exceed 2^64 - 1 ns after re-rating",
                r.timestamp_ns
            ),
        ));
    }
    for r in v.iter_mut() {
        r.timestamp_ns = (r.timestamp_ns as f64 / rate).round() as u64;
    }
    Ok(())
}

/// Resizes a trace: every I/O's size multiplied by `factor` (at least 1 byte). A size that
/// would exceed 2^32 - 1 bytes is an error naming the first such I/O (the trace is left
/// unchanged).
pub fn resize(v: &mut [BlockRecord], factor: f64) -> Result<()> {
    if !factor.is_finite() || factor <= 0.0 {
        return Err(invalid("factor", factor, "must be a positive number"));
    }
    let scaled = |size: u32| (f64::from(size) * factor).round();
    if let Some((i, r)) = v
        .iter()
        .enumerate()
        .find(|(_, r)| scaled(r.size) > f64::from(u32::MAX))
    {
        return Err(invalid(
            "factor",
            factor,
            format!(
                "I/O {i} of {} bytes would exceed 2^32 - 1 bytes after resizing",
                r.size
            ),
        ));
    }
    for r in v.iter_mut() {
        r.size = scaled(r.size).max(1.0) as u32;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Valid inputs of every format, the seeds of [`decoding_damaged_traces_never_panics`] and of
    /// the `io_trace` fuzz target.
    pub(crate) fn seed_traces() -> Vec<(TraceFormat, Vec<u8>)> {
        let recs: Vec<BlockRecord> = (0..20u64)
            .map(|i| BlockRecord {
                timestamp_ns: i * 1000,
                offset: i * 4096,
                size: 4096,
                kind: if i % 3 == 0 {
                    IoKind::Write
                } else {
                    IoKind::Read
                },
                latency_ns: 0,
            })
            .collect();
        let mut w = attune_workload::trace::BinaryTraceWriter::new(Vec::new()).unwrap();
        for r in &recs {
            w.write(r).unwrap();
        }
        let bin = w.finish().unwrap();
        let csv = attune_workload::trace::write_csv(recs.iter().copied(), Vec::new()).unwrap();
        vec![
            (
                TraceFormat::Msr,
                b"0.000 0 200626176 4096 0\n223.412 0 3159347200 36864 1\n".to_vec(),
            ),
            (
                TraceFormat::CloudPhysics,
                b"version,time,op,size,lbn\n1,10,2a,512,8\n1,10,28,4096,9\n".to_vec(),
            ),
            (TraceFormat::AttuneCsv, csv),
            (TraceFormat::Attune, bin),
        ]
    }

    #[test]
    fn decoding_damaged_traces_never_panics() {
        // Random byte overwrites, truncations and arbitrary bytes in every format: each read
        // returns records or an error, never a panic (the same property the `io_trace` fuzz
        // target checks without a bound).
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (format, seed) in seed_traces() {
            assert!(read_trace(&seed, format).is_ok(), "{format:?} seed");
            for round in 0..1500 {
                let mut d = seed.clone();
                for _ in 0..(round % 5 + 1) {
                    let i = (next() % d.len() as u64) as usize;
                    d[i] = (next() >> 32) as u8;
                }
                if round % 3 == 0 {
                    d.truncate((next() % (d.len() as u64 + 1)) as usize);
                }
                let _ = read_trace(&d, format);
                let _ = read_trace(&d, TraceFormat::sniff(&d));
            }
        }
    }

    #[test]
    fn out_of_order_records_are_sorted_stably_and_counted() {
        // Timestamps 5, 3, 4, 3 ms: sorted to 3, 3, 4, 5 with the two 3 ms I/Os in file order.
        let t = b"5 0 0 4096 1\n3 0 8192 4096 1\n4 0 4096 4096 0\n3 0 12288 4096 0\n";
        let (v, moved) = read_trace_reordered(t, TraceFormat::Msr).unwrap();
        let ts: Vec<u64> = v.iter().map(|r| r.timestamp_ns).collect();
        assert_eq!(ts, vec![0, 0, 1_000_000, 2_000_000]);
        let off: Vec<u64> = v.iter().map(|r| r.offset).collect();
        assert_eq!(off, vec![8192, 12288, 4096, 0]);
        assert_eq!(moved, 3);
        let (_, moved) =
            read_trace_reordered(b"1 0 0 4096 1\n1 0 1 4096 1\n", TraceFormat::Msr).unwrap();
        assert_eq!(moved, 0);
    }

    #[test]
    fn resize_refuses_a_size_beyond_32_bits() {
        let mut v = read_trace(b"0 0 0 4096 1\n1 0 0 16777216 1\n", TraceFormat::Msr).unwrap();
        let e = resize(&mut v, 1024.0).unwrap_err().to_string();
        assert!(e.contains("I/O 1 of 16777216 bytes"), "{e}");
        assert_eq!(v[1].size, 16_777_216, "left unchanged");
        resize(&mut v, 255.0).unwrap();
        assert_eq!(v[1].size, 16_777_216 * 255);
    }

    #[test]
    fn rerate_refuses_a_timestamp_beyond_64_bits() {
        let t = b"0 0 0 4096 1\n50000000000 0 4096 4096 1\n";
        let mut v = read_trace(t, TraceFormat::Msr).unwrap();
        let e = rerate(&mut v, 0.001).unwrap_err().to_string();
        assert!(e.contains("2^64 - 1 ns"), "{e}");
        assert_eq!(v[1].timestamp_ns, 50_000_000_000_000_000);
    }

    #[test]
    fn msr_lines_parse() {
        let t = b"0.000 0 200626176 4096 0\n\n223.412 0 3159347200 36864 1\n";
        let v = read_trace(t, TraceFormat::Msr).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].timestamp_ns, 223_412_000);
        assert_eq!(v[1].kind, IoKind::Read);
        assert_eq!(v[1].size, 36_864);
    }

    /// The form the MSR-Cambridge traces are published in was refused as "expected 5 fields".
    #[test]
    fn msr_comma_separated_lines_parse_with_or_without_the_header() {
        let body = "128166372003061629,hm,1,Read,3154152960,4096,1307\n\
                    128166372016382155,hm,1,Write,3154157056,16384,51232\n";
        for t in [body.to_string(), format!("{MSR_CSV_HEADER}\n{body}")] {
            let v = read_trace(t.as_bytes(), TraceFormat::sniff(t.as_bytes())).unwrap();
            assert_eq!(v.len(), 2);
            assert_eq!(v[0].timestamp_ns, 0, "rebased");
            assert_eq!(v[1].timestamp_ns, 1_332_052_600);
            assert_eq!((v[0].kind, v[1].kind), (IoKind::Read, IoKind::Write));
            assert_eq!((v[1].offset, v[1].size), (3_154_157_056, 16_384));
            assert_eq!((v[0].latency_ns, v[1].latency_ns), (130_700, 5_123_200));
        }
        let e = read_msr(b"1,hm,1,Read,0,4096\n").unwrap_err().to_string();
        assert!(
            e.contains("line 1") && e.contains("7 comma-separated"),
            "{e}"
        );
        let e = read_msr(b"1,hm,1,Trim,0,4096,1\n").unwrap_err().to_string();
        assert!(e.contains("type `Trim`"), "{e}");
        let e = read_msr(b"1,hm,1,Read,0,4096,1\n0.1 0 0 4096 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        let e = read_msr(b"99999999999999999999,hm,1,Read,0,4096,1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("timestamp") && e.contains("too large"), "{e}");
        let e = read_msr(b"999999999999999999,hm,1,Read,0,4096,1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("out of range"), "{e}");
    }

    #[test]
    fn a_malformed_msr_line_names_its_number() {
        let t = b"0.000 0 200626176 4096 0\n1.0 0 12 4096 7\n";
        let e = read_msr(t).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("op `7`"), "{e}");
        let e = read_msr(b"1 2 3\n").unwrap_err().to_string();
        assert!(
            e.contains("line 1") && e.contains("expected 5 fields"),
            "{e}"
        );
        let e = read_msr(b"x 0 1 2 1\n").unwrap_err().to_string();
        assert!(e.contains("timestamp"), "{e}");
        let e = read_msr(b"1 0 1 99999999999 1\n").unwrap_err().to_string();
        assert!(e.contains("size") && e.contains("too large"), "{e}");
    }

    #[test]
    fn a_negative_field_is_called_negative() {
        let e = read_msr(b"1 0 -4096 4096 1\n").unwrap_err().to_string();
        assert!(e.contains("offset `-4096` is negative"), "{e}");
        let e = read_msr(b"1 0 4096 4k 1\n").unwrap_err().to_string();
        assert!(e.contains("size `4k` is not a non-negative integer"), "{e}");
        let e = read_cloudphysics(b"1,10,28,512,-8\n", 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("lbn `-8` is negative"), "{e}");
    }

    #[test]
    fn cloudphysics_spreads_a_tick() {
        let t = b"version,time,op,size,lbn\n1,10,2a,512,8\n1,10,28,4096,9\n1,11,28,512,1\n";
        let v = read_trace(t, TraceFormat::sniff(t)).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].timestamp_ns, 0);
        assert_eq!(v[1].timestamp_ns, 500_000_000);
        assert_eq!(v[1].kind, IoKind::Read);
        assert_eq!(v[1].offset, 9 * 512);
        assert_eq!(v[2].timestamp_ns, 1_000_000_000);
    }

    #[test]
    fn a_malformed_cloudphysics_line_names_its_number() {
        let t = b"version,time,op,size,lbn\n1,10,2a,512,8\n1,10,ff,512,8\n";
        let e = read_cloudphysics(t, 1).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("opcode"), "{e}");
        let e = read_cloudphysics(b"1,10,2a,512\n", 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn attune_formats_round_trip() {
        let recs: Vec<BlockRecord> = (0..10)
            .map(|i| BlockRecord {
                timestamp_ns: i * 1000,
                offset: i * 4096,
                size: 4096,
                kind: if i % 2 == 0 {
                    IoKind::Read
                } else {
                    IoKind::Write
                },
                latency_ns: 0,
            })
            .collect();
        let bin = wtrace::write_binary(recs.clone(), Vec::new()).unwrap();
        assert_eq!(TraceFormat::sniff(&bin), TraceFormat::Attune);
        assert_eq!(read_trace(&bin, TraceFormat::Attune).unwrap(), recs);
        let csv = wtrace::write_csv(recs.clone(), Vec::new()).unwrap();
        assert_eq!(read_trace(&csv, TraceFormat::sniff(&csv)).unwrap(), recs);
        let e = read_trace(&bin[..bin.len() - 3], TraceFormat::Attune).unwrap_err();
        assert!(e.to_string().contains("block trace"), "{e}");
    }

    #[test]
    fn rerate_and_resize() {
        let mut v = read_msr(b"0 0 0 4096 1\n10 0 0 4096 1\n").unwrap();
        rerate(&mut v, 2.0).unwrap();
        assert_eq!(v[1].timestamp_ns, 5_000_000);
        resize(&mut v, 2.0).unwrap();
        assert_eq!(v[0].size, 8192);
        assert!(rerate(&mut v, 0.0)
            .unwrap_err()
            .to_string()
            .contains("`rate`"));
    }

    #[test]
    fn real_samples_parse_when_present() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/traces");
        let msr = dir.join("msr-rw_20_80-105.trace");
        if let Ok(data) = std::fs::read(msr) {
            let v = read_trace(&data, TraceFormat::sniff(&data)).unwrap();
            assert_eq!(v.len(), 10_000);
            assert_eq!(v.iter().filter(|r| r.kind == IoKind::Read).count(), 2_020);
        }
    }
}
