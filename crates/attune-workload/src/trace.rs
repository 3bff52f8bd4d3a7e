//! Block-I/O traces: the record type, CSV and binary readers/writers, and synthetic generators.
//!
//! The binary format is specified in `docs/formats/block-trace.md` (magic `ATBTRACE`, version 1,
//! little-endian, 32-byte records in CRC32C-checked chunks, a footer with the record count).
//! Readers treat input as untrusted: every length is bounded, every chunk is checksummed, and
//! corrupt or truncated input is a [`WorkloadError`] naming the byte offset (never a panic).
//! A file whose writer was dropped without [`BinaryTraceWriter::finish`] has no footer and reads
//! as truncated, by design.
//!
//! Synthetic generators ([`TraceGen`]) mix or interleave several streams (sequential runs,
//! strides, uniform random), with fixed or exponential inter-arrival times. Synthetic records
//! carry `latency_ns = 0` (not measured).
//!
//! Thread-safety: readers, writers and generators are single-owner values (`Send`).

use std::io::{BufRead, Read, Write};
use std::str::FromStr;

use crate::error::{check_fraction, check_nonzero, Result, WorkloadError};
use crate::rng::Xoshiro256;

/// File magic.
pub const MAGIC: [u8; 8] = *b"ATBTRACE";
/// Current format version.
pub const VERSION: u16 = 1;
/// Bytes per encoded record.
pub const RECORD_BYTES: usize = 32;
/// Bytes of the file header.
pub const HEADER_BYTES: usize = 20;
/// Records per chunk written. Default 4096 (128 KiB payload): checksums stay cheap and a corrupt
/// chunk loses little.
pub const CHUNK_RECORDS: usize = 4096;
/// Largest record count a reader accepts in one chunk (bounds its allocation to 2 MiB).
pub const CHUNK_RECORDS_MAX: u32 = 65_536;
/// Tag of a data chunk ("CHNK").
pub const TAG_CHUNK: u32 = u32::from_le_bytes(*b"CHNK");
/// Tag of the footer ("TEND").
pub const TAG_END: u32 = u32::from_le_bytes(*b"TEND");
/// CSV header line.
pub const CSV_HEADER: &str = "timestamp_ns,offset,size,op,latency_ns";

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoKind {
    /// A read.
    Read,
    /// A write.
    Write,
}

/// One block I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockRecord {
    /// Issue time in nanoseconds from the trace start.
    pub timestamp_ns: u64,
    /// Byte offset on the device.
    pub offset: u64,
    /// Bytes transferred.
    pub size: u32,
    /// Read or write.
    pub kind: IoKind,
    /// Completion latency in nanoseconds (0 = not measured).
    pub latency_ns: u64,
}

impl BlockRecord {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.timestamp_ns.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.latency_ns.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.push(match self.kind {
            IoKind::Read => 0,
            IoKind::Write => 1,
        });
        out.extend_from_slice(&[0, 0, 0]);
    }

    fn decode(b: &[u8], at: u64) -> Result<Self> {
        let corrupt = |reason: String| WorkloadError::CorruptTrace { offset: at, reason };
        if b.len() != RECORD_BYTES {
            return Err(corrupt(format!("record of {} bytes", b.len())));
        }
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        let mut s = [0u8; 4];
        s.copy_from_slice(&b[24..28]);
        let kind = match b[28] {
            0 => IoKind::Read,
            1 => IoKind::Write,
            other => return Err(corrupt(format!("op byte {other} is neither 0 nor 1"))),
        };
        if b[29..32] != [0, 0, 0] {
            return Err(corrupt("reserved record bytes are not zero".into()));
        }
        Ok(Self {
            timestamp_ns: u64_at(0),
            offset: u64_at(8),
            latency_ns: u64_at(16),
            size: u32::from_le_bytes(s),
            kind,
        })
    }

    /// The CSV line (without newline).
    pub fn to_csv(&self) -> String {
        let op = match self.kind {
            IoKind::Read => 'R',
            IoKind::Write => 'W',
        };
        format!(
            "{},{},{},{},{}",
            self.timestamp_ns, self.offset, self.size, op, self.latency_ns
        )
    }

    /// Parses one CSV line (`line_no` is used in errors).
    pub fn from_csv(line: &str, line_no: u64) -> Result<Self> {
        let bad = |reason: String| WorkloadError::BadCsv {
            line: line_no,
            reason,
        };
        let fields: Vec<&str> = line.trim_end_matches('\r').split(',').collect();
        if fields.len() != 5 {
            return Err(bad(format!("expected 5 fields, got {}", fields.len())));
        }
        let num = |i: usize, name: &str| -> Result<u64> {
            fields[i]
                .trim()
                .parse::<u64>()
                .map_err(|e| bad(format!("{name} `{}`: {e}", fields[i])))
        };
        let size = u32::try_from(num(2, "size")?).map_err(|_| bad("size exceeds 2^32-1".into()))?;
        let kind = match fields[3].trim() {
            "R" | "r" | "read" => IoKind::Read,
            "W" | "w" | "write" => IoKind::Write,
            other => return Err(bad(format!("op `{other}` is not R or W"))),
        };
        Ok(Self {
            timestamp_ns: num(0, "timestamp_ns")?,
            offset: num(1, "offset")?,
            size,
            kind,
            latency_ns: num(4, "latency_ns")?,
        })
    }
}

/// Writes records as CSV with a header line.
pub fn write_csv<W: Write>(records: impl IntoIterator<Item = BlockRecord>, mut w: W) -> Result<W> {
    writeln!(w, "{CSV_HEADER}")?;
    for r in records {
        writeln!(w, "{}", r.to_csv())?;
    }
    w.flush()?;
    Ok(w)
}

/// Streams records from CSV (the header line is optional; blank lines are skipped).
pub fn read_csv<R: BufRead>(r: R) -> impl Iterator<Item = Result<BlockRecord>> {
    r.lines().enumerate().filter_map(|(i, line)| {
        let line_no = i as u64 + 1;
        match line {
            Err(e) => Some(Err(WorkloadError::Io(e))),
            Ok(l) if l.trim().is_empty() => None,
            Ok(l) if line_no == 1 && l.trim() == CSV_HEADER => None,
            Ok(l) => Some(BlockRecord::from_csv(&l, line_no)),
        }
    })
}

/// Writes the binary format; call [`BinaryTraceWriter::finish`] to write the footer.
#[derive(Debug)]
pub struct BinaryTraceWriter<W: Write> {
    w: W,
    buf: Vec<u8>,
    pending: u32,
    total: u64,
}

impl<W: Write> BinaryTraceWriter<W> {
    /// Writes the header.
    pub fn new(mut w: W) -> Result<Self> {
        let mut h = Vec::with_capacity(HEADER_BYTES);
        h.extend_from_slice(&MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes()); // flags
        h.extend_from_slice(&(RECORD_BYTES as u16).to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes()); // reserved
        let crc = crc32c::crc32c(&h);
        h.extend_from_slice(&crc.to_le_bytes());
        w.write_all(&h)?;
        Ok(Self {
            w,
            buf: Vec::with_capacity(8 + CHUNK_RECORDS * RECORD_BYTES + 4),
            pending: 0,
            total: 0,
        })
    }

    /// Appends one record.
    pub fn write(&mut self, r: &BlockRecord) -> Result<()> {
        if self.pending == 0 {
            self.buf.clear();
            self.buf.extend_from_slice(&TAG_CHUNK.to_le_bytes());
            self.buf.extend_from_slice(&0u32.to_le_bytes());
        }
        r.encode(&mut self.buf);
        self.pending += 1;
        self.total += 1;
        if self.pending as usize == CHUNK_RECORDS {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        self.buf[4..8].copy_from_slice(&self.pending.to_le_bytes());
        let crc = crc32c::crc32c(&self.buf);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.w.write_all(&self.buf)?;
        self.pending = 0;
        Ok(())
    }

    /// Flushes the last chunk, writes the footer and returns the inner writer.
    pub fn finish(mut self) -> Result<W> {
        self.flush_chunk()?;
        let mut f = Vec::with_capacity(20);
        f.extend_from_slice(&TAG_END.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&self.total.to_le_bytes());
        let crc = crc32c::crc32c(&f);
        f.extend_from_slice(&crc.to_le_bytes());
        self.w.write_all(&f)?;
        self.w.flush()?;
        Ok(self.w)
    }
}

/// Writes all records to `w` in the binary format, footer included.
pub fn write_binary<W: Write>(records: impl IntoIterator<Item = BlockRecord>, w: W) -> Result<W> {
    let mut tw = BinaryTraceWriter::new(w)?;
    for r in records {
        tw.write(&r)?;
    }
    tw.finish()
}

/// Streaming reader of the binary format. Yields records; the first error ends the stream.
#[derive(Debug)]
pub struct BinaryTraceReader<R: Read> {
    r: R,
    pos: u64,
    chunk: Vec<BlockRecord>,
    next_in_chunk: usize,
    seen: u64,
    done: bool,
}

/// Reads exactly `buf.len()` bytes or reports truncation at the offset where input ended.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8], pos: u64, expecting: &'static str) -> Result<()> {
    let mut got = 0usize;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(WorkloadError::TruncatedTrace {
                    offset: pos + got as u64,
                    expecting,
                })
            }
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WorkloadError::Io(e)),
        }
    }
    Ok(())
}

fn le_u32(b: &[u8]) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[..4]);
    u32::from_le_bytes(x)
}

impl<R: Read> BinaryTraceReader<R> {
    /// Reads and checks the header.
    pub fn new(mut r: R) -> Result<Self> {
        let mut h = [0u8; HEADER_BYTES];
        read_full(&mut r, &mut h, 0, "reading the header")?;
        let corrupt = |offset: u64, reason: String| WorkloadError::CorruptTrace { offset, reason };
        if h[..8] != MAGIC {
            return Err(corrupt(0, "bad magic (not an Attune block trace)".into()));
        }
        let crc = le_u32(&h[16..20]);
        if crc != crc32c::crc32c(&h[..16]) {
            return Err(corrupt(16, "header checksum mismatch".into()));
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if version != VERSION {
            return Err(corrupt(8, format!("unsupported version {version}")));
        }
        let flags = u16::from_le_bytes([h[10], h[11]]);
        if flags != 0 {
            return Err(corrupt(10, format!("unknown flags {flags:#x}")));
        }
        let rs = u16::from_le_bytes([h[12], h[13]]);
        if rs as usize != RECORD_BYTES {
            return Err(corrupt(
                12,
                format!("record size {rs}, expected {RECORD_BYTES}"),
            ));
        }
        Ok(Self {
            r,
            pos: HEADER_BYTES as u64,
            chunk: Vec::new(),
            next_in_chunk: 0,
            seen: 0,
            done: false,
        })
    }

    /// Reads the next chunk into `self.chunk`; `Ok(false)` at a valid footer.
    fn load_chunk(&mut self) -> Result<bool> {
        let start = self.pos;
        let mut head = [0u8; 8];
        read_full(
            &mut self.r,
            &mut head,
            start,
            "reading a chunk header (footer missing)",
        )?;
        let tag = le_u32(&head[0..4]);
        let count = le_u32(&head[4..8]);
        let corrupt = |offset: u64, reason: String| WorkloadError::CorruptTrace { offset, reason };
        if tag == TAG_END {
            let mut rest = [0u8; 12];
            read_full(&mut self.r, &mut rest, start + 8, "reading the footer")?;
            let mut all = [0u8; 16];
            all[..8].copy_from_slice(&head);
            all[8..].copy_from_slice(&rest[..8]);
            if le_u32(&rest[8..12]) != crc32c::crc32c(&all) {
                return Err(corrupt(start, "footer checksum mismatch".into()));
            }
            let mut t = [0u8; 8];
            t.copy_from_slice(&rest[..8]);
            let total = u64::from_le_bytes(t);
            if count != 0 || total != self.seen {
                return Err(corrupt(
                    start,
                    format!("footer says {total} records, read {}", self.seen),
                ));
            }
            let mut extra = [0u8; 1];
            match self.r.read(&mut extra) {
                Ok(0) => {}
                Ok(_) => return Err(corrupt(start + 20, "bytes after the footer".into())),
                Err(e) => return Err(WorkloadError::Io(e)),
            }
            self.pos = start + 20;
            return Ok(false);
        }
        if tag != TAG_CHUNK {
            return Err(corrupt(start, format!("unknown chunk tag {tag:#010x}")));
        }
        if count == 0 || count > CHUNK_RECORDS_MAX {
            return Err(corrupt(
                start + 4,
                format!("chunk record count {count} outside 1..={CHUNK_RECORDS_MAX}"),
            ));
        }
        let payload_len = count as usize * RECORD_BYTES;
        let mut body = vec![0u8; 8 + payload_len + 4];
        body[..8].copy_from_slice(&head);
        read_full(
            &mut self.r,
            &mut body[8..],
            start + 8,
            "reading a chunk payload",
        )?;
        let crc_at = 8 + payload_len;
        if le_u32(&body[crc_at..]) != crc32c::crc32c(&body[..crc_at]) {
            return Err(corrupt(start, "chunk checksum mismatch".into()));
        }
        self.chunk.clear();
        for (i, rec) in body[8..crc_at].chunks_exact(RECORD_BYTES).enumerate() {
            let at = start + 8 + (i * RECORD_BYTES) as u64;
            self.chunk.push(BlockRecord::decode(rec, at)?);
        }
        self.next_in_chunk = 0;
        self.pos = start + body.len() as u64;
        Ok(true)
    }
}

impl<R: Read> Iterator for BinaryTraceReader<R> {
    type Item = Result<BlockRecord>;

    fn next(&mut self) -> Option<Result<BlockRecord>> {
        while !self.done {
            if let Some(r) = self.chunk.get(self.next_in_chunk) {
                self.next_in_chunk += 1;
                self.seen += 1;
                return Some(Ok(*r));
            }
            match self.load_chunk() {
                Ok(true) => {}
                Ok(false) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// Offset pattern of one synthetic stream.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// Consecutive I/Os; after `run_len` I/Os (0 = never) jump to a random aligned offset.
    Sequential {
        /// Records per run (0 = one endless run, wrapping at the end of the range).
        run_len: u64,
    },
    /// Each I/O `stride` bytes after the previous one, wrapping in the range.
    Strided {
        /// Distance between consecutive offsets.
        stride: u64,
    },
    /// Uniform random `size`-aligned offsets.
    Random,
}

impl FromStr for Pattern {
    type Err = WorkloadError;

    /// `seq`, `seq:RUN_LEN`, `stride:BYTES`, `random`.
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        let (head, arg) = match lower.split_once(':') {
            Some((h, a)) => (h.to_string(), Some(a.to_string())),
            None => (lower.clone(), None),
        };
        let num = |a: &str| {
            a.parse::<u64>().map_err(|e| WorkloadError::BadArguments {
                kind: "trace pattern",
                given: s.to_string(),
                reason: format!("`{a}`: {e}"),
            })
        };
        match (head.as_str(), arg.as_deref()) {
            ("seq" | "sequential", None) => Ok(Pattern::Sequential { run_len: 0 }),
            ("seq" | "sequential", Some(a)) => Ok(Pattern::Sequential { run_len: num(a)? }),
            ("stride" | "strided", Some(a)) => Ok(Pattern::Strided { stride: num(a)? }),
            ("random" | "rand", None) => Ok(Pattern::Random),
            _ => Err(WorkloadError::UnknownName {
                kind: "trace pattern",
                given: s.to_string(),
                valid: "seq, seq:RUN_LEN, stride:BYTES, random",
            }),
        }
    }
}

/// One synthetic stream: a pattern over a byte range of the device.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamSpec {
    /// Offset pattern.
    pub pattern: Pattern,
    /// First byte of the range.
    pub start: u64,
    /// Bytes in the range (at least `size`).
    pub range_bytes: u64,
    /// Bytes per I/O (offsets are aligned to it for sequential and random patterns).
    pub size: u32,
    /// Fraction of writes.
    pub write_fraction: f64,
    /// Weight in a mixture (ignored when interleaving).
    pub weight: f64,
}

/// How streams are combined.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Combine {
    /// Each record comes from a stream chosen at random by weight.
    Mixture,
    /// Streams take turns, `burst` records each.
    Interleave {
        /// Records per turn.
        burst: u64,
    },
}

/// Inter-arrival times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    /// A fixed gap in nanoseconds.
    Fixed(u64),
    /// Exponential gaps (Poisson arrivals) with the given mean in nanoseconds.
    Exponential(f64),
}

#[derive(Clone, Debug)]
struct StreamState {
    spec: StreamSpec,
    cursor: u64,
    in_run: u64,
}

/// A synthetic trace generator (an iterator of [`BlockRecord`]).
#[derive(Clone, Debug)]
pub struct TraceGen {
    streams: Vec<StreamState>,
    cum_weights: Vec<f64>,
    combine: Combine,
    arrival: Arrival,
    rng: Xoshiro256,
    now_ns: u64,
    left: u64,
    turn: usize,
    in_turn: u64,
}

impl TraceGen {
    /// Validates the streams and builds a generator of `count` records.
    pub fn new(
        streams: Vec<StreamSpec>,
        combine: Combine,
        arrival: Arrival,
        count: u64,
        seed: u64,
    ) -> Result<Self> {
        check_nonzero("streams", streams.len() as u64)?;
        let mut cum = Vec::with_capacity(streams.len());
        let mut total = 0.0;
        for s in &streams {
            check_nonzero("size", u64::from(s.size))?;
            check_fraction("write_fraction", s.write_fraction)?;
            if s.range_bytes < u64::from(s.size) || s.start.checked_add(s.range_bytes).is_none() {
                return Err(WorkloadError::InvalidParameter {
                    name: "range_bytes",
                    value: s.range_bytes.to_string(),
                    reason: "must be >= size and start + range_bytes must fit in u64",
                });
            }
            if let Pattern::Strided { stride } = s.pattern {
                check_nonzero("stride", stride)?;
            }
            if !(s.weight.is_finite() && s.weight >= 0.0) {
                return Err(WorkloadError::InvalidParameter {
                    name: "weight",
                    value: s.weight.to_string(),
                    reason: "must be a finite number >= 0",
                });
            }
            total += s.weight;
            cum.push(total);
        }
        if combine == Combine::Mixture && total <= 0.0 {
            return Err(WorkloadError::InvalidParameter {
                name: "weight",
                value: total.to_string(),
                reason: "mixture weights must not all be zero",
            });
        }
        if let Combine::Interleave { burst } = combine {
            check_nonzero("burst", burst)?;
        }
        match arrival {
            Arrival::Exponential(m) if !(m.is_finite() && m > 0.0) => {
                return Err(WorkloadError::InvalidParameter {
                    name: "mean_gap_ns",
                    value: m.to_string(),
                    reason: "must be > 0",
                })
            }
            _ => {}
        }
        let mut rng = Xoshiro256::new(seed, 0x7ace);
        let streams = streams
            .into_iter()
            .map(|spec| {
                let slots = spec.range_bytes / u64::from(spec.size);
                let cursor = match spec.pattern {
                    Pattern::Random => 0,
                    _ => rng.below(slots) * u64::from(spec.size),
                };
                StreamState {
                    spec,
                    cursor,
                    in_run: 0,
                }
            })
            .collect();
        Ok(Self {
            streams,
            cum_weights: cum
                .iter()
                .map(|c| c / total.max(f64::MIN_POSITIVE))
                .collect(),
            combine,
            arrival,
            rng,
            now_ns: 0,
            left: count,
            turn: 0,
            in_turn: 0,
        })
    }

    fn pick(&mut self) -> usize {
        match self.combine {
            Combine::Mixture => {
                let u = self.rng.next_f64();
                self.cum_weights
                    .partition_point(|&c| c <= u)
                    .min(self.streams.len() - 1)
            }
            Combine::Interleave { burst } => {
                if self.in_turn == burst {
                    self.in_turn = 0;
                    self.turn = (self.turn + 1) % self.streams.len();
                }
                self.in_turn += 1;
                self.turn
            }
        }
    }
}

impl Iterator for TraceGen {
    type Item = BlockRecord;

    fn next(&mut self) -> Option<BlockRecord> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let i = self.pick();
        let gap = match self.arrival {
            Arrival::Fixed(g) => g,
            Arrival::Exponential(m) => (-self.rng.next_f64_open0().ln() * m) as u64,
        };
        self.now_ns = self.now_ns.saturating_add(gap);
        let rng = &mut self.rng;
        let st = self.streams.get_mut(i)?;
        let size = u64::from(st.spec.size);
        let slots = st.spec.range_bytes / size;
        let rel = match st.spec.pattern {
            Pattern::Random => rng.below(slots) * size,
            Pattern::Sequential { run_len } => {
                if run_len > 0 && st.in_run == run_len {
                    st.in_run = 0;
                    st.cursor = rng.below(slots) * size;
                }
                st.in_run += 1;
                let at = st.cursor;
                st.cursor = if at + 2 * size > slots * size {
                    0
                } else {
                    at + size
                };
                at
            }
            Pattern::Strided { stride } => {
                let at = st.cursor;
                let next = at + stride;
                st.cursor = if next + size > st.spec.range_bytes {
                    next % (st.spec.range_bytes - size + 1)
                } else {
                    next
                };
                at
            }
        };
        let kind = if rng.next_f64() < st.spec.write_fraction {
            IoKind::Write
        } else {
            IoKind::Read
        };
        Some(BlockRecord {
            timestamp_ns: self.now_ns,
            offset: st.spec.start + rel,
            size: st.spec.size,
            kind,
            latency_ns: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: u64) -> Vec<BlockRecord> {
        let streams = vec![
            StreamSpec {
                pattern: Pattern::Sequential { run_len: 8 },
                start: 0,
                range_bytes: 1 << 30,
                size: 4096,
                write_fraction: 0.3,
                weight: 1.0,
            },
            StreamSpec {
                pattern: Pattern::Random,
                start: 1 << 30,
                range_bytes: 1 << 30,
                size: 16384,
                write_fraction: 0.0,
                weight: 1.0,
            },
        ];
        TraceGen::new(
            streams,
            Combine::Mixture,
            Arrival::Exponential(1000.0),
            n,
            3,
        )
        .unwrap()
        .collect()
    }

    fn encode(recs: &[BlockRecord]) -> Vec<u8> {
        write_binary(recs.iter().copied(), Vec::new()).unwrap()
    }

    fn decode(bytes: &[u8]) -> Result<Vec<BlockRecord>> {
        BinaryTraceReader::new(bytes)?.collect()
    }

    #[test]
    fn binary_round_trip_across_chunks() {
        for n in [0u64, 1, 4095, 4096, 4097, 10_000] {
            let recs = sample(n);
            let bytes = encode(&recs);
            assert_eq!(
                bytes.len(),
                20 + (n as usize).div_ceil(4096) * 12 + n as usize * 32 + 20
            );
            assert_eq!(decode(&bytes).unwrap(), recs);
        }
    }

    #[test]
    fn csv_round_trip_and_bad_lines() {
        let recs = sample(100);
        let text = write_csv(recs.iter().copied(), Vec::new()).unwrap();
        let back: Result<Vec<BlockRecord>> = read_csv(&text[..]).collect();
        assert_eq!(back.unwrap(), recs);
        let bad = b"timestamp_ns,offset,size,op,latency_ns\n1,2,3,R,4\n1,2,x,R,4\n";
        let e = read_csv(&bad[..]).collect::<Result<Vec<_>>>().unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        let e = BlockRecord::from_csv("1,2,3,Q,4", 7)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 7") && e.contains('Q'), "{e}");
    }

    #[test]
    fn every_truncation_is_an_error_naming_the_offset() {
        let bytes = encode(&sample(5000));
        for cut in (0..bytes.len()).step_by(997).chain([bytes.len() - 1]) {
            let e = decode(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(e, WorkloadError::TruncatedTrace { offset, .. } if offset == cut as u64),
                "cut {cut}: {e}"
            );
        }
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let bytes = encode(&sample(300));
        for at in (0..bytes.len()).step_by(13) {
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            let e = decode(&b);
            assert!(e.is_err(), "flip at {at} not detected");
        }
        let mut b = bytes.clone();
        b[30] ^= 1; // inside the first record of the first chunk
        let e = decode(&b).unwrap_err().to_string();
        assert!(e.contains("byte 20") && e.contains("checksum"), "{e}");
    }

    #[test]
    fn random_mutations_never_panic_and_rarely_pass() {
        let seed = 0x7ace_f00d_u64;
        println!("seed {seed:#x}");
        let good = encode(&sample(700));
        let mut rng = Xoshiro256::new(seed, 1);
        let mut accepted = 0;
        for _ in 0..2000 {
            let mut b = good.clone();
            match rng.below(4) {
                0 => {
                    let at = rng.below(b.len() as u64) as usize;
                    b[at] = rng.next_u64() as u8;
                }
                1 => {
                    let at = rng.below(b.len() as u64) as usize;
                    b.remove(at);
                }
                2 => {
                    let at = rng.below(b.len() as u64) as usize;
                    b.insert(at, rng.next_u64() as u8);
                }
                _ => {
                    let len = rng.below(64) as usize;
                    b = (0..len).map(|_| rng.next_u64() as u8).collect();
                }
            }
            // Must return, never panic; only a no-op mutation may decode successfully.
            if let Ok(recs) = decode(&b) {
                accepted += 1;
                assert_eq!(b, good, "a mutated file decoded to {} records", recs.len());
            }
        }
        assert!(accepted < 20, "{accepted}");
    }

    #[test]
    fn trailing_garbage_and_wrong_magic_are_errors() {
        let mut bytes = encode(&sample(10));
        bytes.push(0);
        assert!(decode(&bytes)
            .unwrap_err()
            .to_string()
            .contains("after the footer"));
        let e = decode(b"NOTATRACEFILE_______").unwrap_err().to_string();
        assert!(e.contains("magic"), "{e}");
    }

    #[test]
    fn generators_follow_their_patterns() {
        let seq = StreamSpec {
            pattern: Pattern::Sequential { run_len: 0 },
            start: 4096,
            range_bytes: 40960,
            size: 4096,
            write_fraction: 1.0,
            weight: 1.0,
        };
        let stride = StreamSpec {
            pattern: Pattern::Strided { stride: 1 << 20 },
            start: 1 << 40,
            range_bytes: 1 << 30,
            size: 512,
            write_fraction: 0.0,
            weight: 1.0,
        };
        let recs: Vec<BlockRecord> = TraceGen::new(
            vec![seq, stride],
            Combine::Interleave { burst: 2 },
            Arrival::Fixed(10),
            40,
            1,
        )
        .unwrap()
        .collect();
        for (i, pair) in recs.chunks(2).enumerate() {
            let from_seq = i % 2 == 0;
            assert_eq!(pair[0].kind == IoKind::Write, from_seq);
            if from_seq {
                assert!(pair[0].offset >= 4096 && pair[0].offset < 4096 + 40960);
                let d = (pair[1].offset as i64 - pair[0].offset as i64).rem_euclid(40960);
                assert_eq!(d, 4096);
            } else {
                assert_eq!(pair[1].offset - pair[0].offset, 1 << 20);
            }
        }
        assert!(recs
            .windows(2)
            .all(|w| w[1].timestamp_ns == w[0].timestamp_ns + 10));
    }

    #[test]
    fn mixture_weights_and_determinism() {
        let a = sample(20_000);
        let b = sample(20_000);
        assert_eq!(a, b);
        let random_share = a.iter().filter(|r| r.size == 16384).count() as f64 / 20_000.0;
        assert!((random_share - 0.5).abs() < 0.02, "{random_share}");
        let w = a.iter().filter(|r| r.kind == IoKind::Write).count() as f64 / 20_000.0;
        assert!((w - 0.15).abs() < 0.02, "{w}");
    }

    #[test]
    fn worked_example_from_the_format_doc_decodes() {
        // The 84-byte file of docs/formats/block-trace.md (one write record).
        const EXAMPLE: [u8; 84] = [
            0x41, 0x54, 0x42, 0x54, 0x52, 0x41, 0x43, 0x45, 0x01, 0x00, 0x00, 0x00, 0x20, 0x00,
            0x00, 0x00, 0x8d, 0x60, 0x81, 0x52, 0x43, 0x48, 0x4e, 0x4b, 0x01, 0x00, 0x00, 0x00,
            0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x08, 0x4c, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
            0x01, 0x00, 0x00, 0x00, 0x01, 0xa4, 0x20, 0x5b, 0x54, 0x45, 0x4e, 0x44, 0x00, 0x00,
            0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x32, 0x99, 0x1e, 0x3c,
        ];
        let recs = decode(&EXAMPLE).unwrap();
        let want = BlockRecord {
            timestamp_ns: 1000,
            offset: 8192,
            size: 4096,
            kind: IoKind::Write,
            latency_ns: 85_000,
        };
        assert_eq!(recs, vec![want]);
        assert_eq!(encode(&recs), EXAMPLE.to_vec());
    }

    #[test]
    fn bad_generator_parameters_are_errors() {
        let s = StreamSpec {
            pattern: Pattern::Random,
            start: 0,
            range_bytes: 100,
            size: 4096,
            write_fraction: 0.0,
            weight: 1.0,
        };
        assert!(TraceGen::new(vec![s], Combine::Mixture, Arrival::Fixed(1), 1, 0).is_err());
        assert!(TraceGen::new(vec![], Combine::Mixture, Arrival::Fixed(1), 1, 0).is_err());
        assert!("zigzag".parse::<Pattern>().is_err());
        assert_eq!(
            "stride:8".parse::<Pattern>().unwrap(),
            Pattern::Strided { stride: 8 }
        );
    }
}
