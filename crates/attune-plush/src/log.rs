//! The recovery log: one file, `log_partitions` partitions side by side (keys hash to one),
//! each a run of fixed-size chunks, each a 64-byte header and then 32-byte RAWL entries.
//! Format: `docs/formats/plush.md`. One file, so that the barriers of concurrent appends to
//! different partitions can share one `fdatasync` (group commit, see [`crate::persist`]).
//!
//! Every upsert appends one entry (key, value, the DRAM entry's epoch, a per-partition sequence
//! number) before it touches the DRAM level, and acknowledges after one persistence barrier. An
//! entry is four 8-byte words, each carrying 63 payload bits and a flag bit equal to the chunk
//! generation's parity: 8-byte stores are atomic, so an entry whose four flags match and whose
//! 28-bit checksum holds was written whole, and one barrier per entry suffices (RAWL).
//!
//! Chunks are in use (valid header with a generation) or free (zero or torn header). One free
//! chunk is always kept as the compaction target. When the current chunk is full and no other
//! chunk is free, the oldest chunk is compacted: its entries that are still live (epoch not
//! below the DRAM epoch of their entry) are copied, in order and with their sequence numbers,
//! to the spare chunk, then the oldest chunk's header is cleared and it becomes the spare. A
//! per-chunk maximum epoch kept in DRAM lets compaction skip reading a chunk that is entirely
//! dead (the normal case when the log is larger than the DRAM level).
//!
//! Recovery reads every valid entry of every in-use chunk up to its first invalid one, sorts by
//! sequence number (copies keep theirs, so a copy and its original collapse) and hands them to
//! the engine, with what only the whole log can judge: each first invalid entry that is not
//! the plain end of its chunk's data ([`Suspect`]: a torn tail or damage) and each chunk whose
//! header does not check but whose body holds entries ([`Orphan`]: a torn arm or clear, or a
//! damaged header). The engine's rules are in `docs/plush.md` ("Damage in the log vs a torn
//! tail").
//!
//! Thread safety: a `Partition` is used under its own mutex (held by the engine).

use crate::error::{Error, Result};
use crate::persist::Region;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Valid entries that may be newer than a torn one: appends whose barrier a crash cut short
/// reach the media in any order, so an unfinished entry can precede finished ones, at most one
/// per writer (writers beyond 64 are not supported by this rule). More than this many valid
/// entries after an invalid one in its chunk, or newer than the valid entry after it anywhere
/// in the log, is damage to the media, not a tear.
pub const TORN_TAIL_MAX: usize = 64;
/// Ends every message about a damaged log: what the caller can do. An open that finds the
/// damage leaves the log's records as they are, and `verify` only reads.
pub const RESTORE_HINT: &str = ". The file is left as it is: restore log.plush from a backup \
                                (its records not yet migrated to a level are only there)";

/// Bytes of a chunk allocated at a time as its tail advances (a multiple of the 4 KiB
/// page): a chunk takes file blocks as it fills, not when it is taken, so a new database's
/// log holds 64 partitions × 64 KiB, not 64 × a whole chunk. One `posix_fallocate` per
/// 2,046 appends of a partition, against one `fdatasync` per append.
pub const RESERVE_STEP_BYTES: usize = 64 << 10;

/// Bytes of a chunk header.
pub const CHUNK_HEADER_BYTES: usize = 64;
/// Bytes of one log entry.
pub const ENTRY_BYTES: usize = 32;
const ENTRY_WORDS: usize = ENTRY_BYTES / 8;
const CHUNK_MAGIC: u64 = u64::from_le_bytes(*b"PLSHCHNK");
const PAYLOAD_MASK: u64 = (1 << 63) - 1;
const CHECK_BITS: u32 = 28;
const SEQ_BITS: u32 = 40;
const TAG_BITS: u32 = 16;
const EPOCH_BITS: u32 = 40;

/// One decoded log entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogEntry {
    pub key: u64,
    pub value: u64,
    pub epoch: u64,
    pub seq: u64,
}

/// Encodes `e` for a chunk of generation `gen` into four words.
pub fn encode_entry(e: &LogEntry, gen: u64) -> [u64; 4] {
    let tag = gen & ((1 << TAG_BITS) - 1);
    let check = entry_check(e, tag);
    let mut bits = BitWriter::default();
    bits.put(e.key, 64);
    bits.put(e.value, 64);
    bits.put(e.epoch, EPOCH_BITS);
    bits.put(e.seq, SEQ_BITS);
    bits.put(tag, TAG_BITS);
    bits.put(check as u64, CHECK_BITS);
    let flag = (gen & 1) << 63;
    let mut words = bits.words;
    for w in &mut words {
        *w |= flag;
    }
    words
}

/// Decodes four words of a chunk of generation `gen`: `None` for a torn, stale or damaged
/// entry (flags, tag or checksum disagree).
pub fn decode_entry(words: [u64; 4], gen: u64) -> Option<LogEntry> {
    let flag = gen & 1;
    if words.iter().any(|w| w >> 63 != flag) {
        return None;
    }
    let mut r = BitReader {
        words: words.map(|w| w & PAYLOAD_MASK),
        pos: 0,
    };
    let key = r.get(64);
    let value = r.get(64);
    let epoch = r.get(EPOCH_BITS);
    let seq = r.get(SEQ_BITS);
    let tag = r.get(TAG_BITS);
    let check = r.get(CHECK_BITS) as u32;
    let e = LogEntry {
        key,
        value,
        epoch,
        seq,
    };
    if tag != gen & ((1 << TAG_BITS) - 1) || check != entry_check(&e, tag) {
        return None;
    }
    Some(e)
}

/// Decodes four words under the generation tag they carry themselves (bits 19–34 of word 3)
/// rather than a chunk's: an entry of any generation, and that tag. Recovery reads the body of
/// a chunk whose header does not check with it, and tells a stale entry past a chunk's tail
/// (an earlier generation's) from a damaged one.
pub fn decode_entry_any(words: [u64; 4]) -> Option<(LogEntry, u64)> {
    let tag = (words[3] >> 19) & ((1 << TAG_BITS) - 1);
    decode_entry(words, tag).map(|e| (e, tag))
}

fn entry_check(e: &LogEntry, tag: u64) -> u32 {
    let mut buf = [0u8; 34];
    buf[0..8].copy_from_slice(&e.key.to_le_bytes());
    buf[8..16].copy_from_slice(&e.value.to_le_bytes());
    buf[16..24].copy_from_slice(&e.epoch.to_le_bytes());
    buf[24..32].copy_from_slice(&e.seq.to_le_bytes());
    buf[32..34].copy_from_slice(&(tag as u16).to_le_bytes());
    crc32c::crc32c(&buf) & ((1 << CHECK_BITS) - 1)
}

/// Packs fields into 63-bit groups (bit 63 of each word is the RAWL flag).
#[derive(Default)]
struct BitWriter {
    words: [u64; 4],
    pos: u32,
}

impl BitWriter {
    /// Appends the low `n` bits of `v` (n ≤ 64), a run of whole bits per word it touches.
    fn put(&mut self, v: u64, n: u32) {
        let mut v = v;
        let mut left = n;
        while left > 0 {
            let (w, b) = ((self.pos / 63) as usize, self.pos % 63);
            let take = (63 - b).min(left);
            self.words[w] |= (v & ((1u64 << take) - 1)) << b;
            v >>= take;
            left -= take;
            self.pos += take;
        }
    }
}

struct BitReader {
    words: [u64; 4],
    pos: u32,
}

impl BitReader {
    /// Takes the next `n` bits (n ≤ 64), a run of whole bits per word it touches.
    fn get(&mut self, n: u32) -> u64 {
        let mut v = 0u64;
        let mut got = 0;
        while got < n {
            let (w, b) = ((self.pos / 63) as usize, self.pos % 63);
            let take = (63 - b).min(n - got);
            v |= ((self.words[w] >> b) & ((1u64 << take) - 1)) << got;
            got += take;
            self.pos += take;
        }
        v
    }
}

/// Decodes a chunk header (8 words): the generation, or `None` for a free (zero, torn or
/// cleared) chunk.
pub fn decode_chunk_header(words: [u64; 8]) -> Option<u64> {
    if words[0] != CHUNK_MAGIC || words[1] == 0 {
        return None;
    }
    (words[2] == header_check(words[1])).then_some(words[1])
}

fn header_check(gen: u64) -> u64 {
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&CHUNK_MAGIC.to_le_bytes());
    buf[8..].copy_from_slice(&gen.to_le_bytes());
    crc32c::crc32c(&buf) as u64
}

/// Word of a chunk header that records how many of the chunk's entries were acknowledged
/// (the acknowledged tail, format in `docs/formats/plush.md`): bits 0–31 the count of slots
/// from slot 0 (saturating), bits 32–47 `gen & 0xFFFF` (the chunk generation it was stored
/// for: a late store meant for an earlier generation of the chunk is told apart), bits 48–63
/// the low 16 bits of the crc32c of the low 6 bytes. 0: not recorded (a chunk just armed, or
/// a file written before the word existed).
pub const ACKED_WORD: usize = 3;
const ACKED_SLOTS_MAX: u64 = u32::MAX as u64;

/// The acknowledged-tail word of a chunk of generation `gen` whose first `slots` entries were
/// acknowledged.
pub fn encode_acked(gen: u64, slots: u64) -> u64 {
    let low = (gen & ((1 << TAG_BITS) - 1)) << 32 | slots.min(ACKED_SLOTS_MAX);
    let check = crc32c::crc32c(&low.to_le_bytes()[..6]) as u64 & 0xFFFF;
    check << 48 | low
}

/// What an acknowledged-tail word says about a chunk of generation `gen`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acked {
    /// Zero, or stored for another generation of the chunk: nothing is known.
    Unknown,
    /// The first this many entries were acknowledged.
    Slots(u64),
    /// Not zero and its check does not hold: damage.
    Damaged,
}

/// Decodes an acknowledged-tail word for a chunk of generation `gen`.
pub fn decode_acked(word: u64, gen: u64) -> Acked {
    if word == 0 {
        return Acked::Unknown;
    }
    let low = word & ((1 << 48) - 1);
    if word >> 48 != crc32c::crc32c(&low.to_le_bytes()[..6]) as u64 & 0xFFFF {
        return Acked::Damaged;
    }
    if low >> 32 != gen & ((1 << TAG_BITS) - 1) {
        return Acked::Unknown;
    }
    Acked::Slots(low & ACKED_SLOTS_MAX)
}

/// Where an append went: enough for [`record_acked`] to note, after the entry's barrier,
/// that the chunk's entries up to and including it were acknowledged.
#[derive(Clone, Copy, Debug)]
pub struct Appended {
    /// First word of the chunk's header in the log region.
    header_word: usize,
    gen: u64,
    /// Slots from 0 up to and including the entry's.
    slots: u64,
}

impl Appended {
    /// How many of the chunk's slots, from 0, the append's entry ends: its slot + 1.
    pub fn slots(&self) -> u64 {
        self.slots
    }
}

/// Records, after the barrier of the append `a` completed, that the first `a.slots` entries
/// of its chunk were acknowledged: raises the chunk header's acknowledged-tail word (never
/// lowers it) and flushes it without a barrier of its own. The next barrier on the log, by
/// any writer, or the close makes it durable. Called outside the partition's lock: the chunk
/// may have been compacted and armed again meanwhile, and a store for an earlier generation
/// then reads as "not recorded" (its tag differs), which only weakens the record.
///
/// Sound because every entry below `a.slots` was stored and flushed before the entry at
/// `a.slots - 1` (under the partition's lock), whose barrier covered them: whenever this word
/// is durable, so are those entries, and an invalid one among them is damage, not a tear.
pub fn record_acked(region: &Region, a: &Appended) {
    let word = region.word(a.header_word + ACKED_WORD);
    let new = encode_acked(a.gen, a.slots);
    let tag = a.gen & ((1 << TAG_BITS) - 1);
    let stored = word.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
        let (cur_tag, cur_slots) = ((cur >> 32) & 0xFFFF, cur & ACKED_SLOTS_MAX);
        // Keep a record of this generation that says as much or more, and one of a later
        // generation (the chunk was armed again): 16-bit tags compared as a signed distance.
        let later = (cur_tag.wrapping_sub(tag) & 0xFFFF) as u16 as i16 > 0;
        let keep = cur != 0 && ((cur_tag == tag && cur_slots >= a.slots) || later);
        (!keep).then_some(new)
    });
    if stored.is_ok() {
        region.flush_words(a.header_word + ACKED_WORD, 1);
    }
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    /// 0 when free.
    gen: u64,
    /// Highest epoch of an entry in the chunk.
    epoch_max: u64,
}

/// Counters of one partition.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogCounters {
    pub appends: u64,
    pub compactions_skipped_read: u64,
    pub compactions_read: u64,
    pub entries_copied: u64,
}

/// How [`Partition::open`] treats the file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Just created: every chunk is free, nothing is read.
    New,
    /// Recovery: read every chunk; arm the first when none is in use.
    Recover,
    /// Read every chunk, write nothing (`verify`).
    Scan,
}

/// One recovery-log partition (a slice of the log file).
pub struct Partition {
    pub(crate) region: Arc<Region>,
    /// Partition number and its first word in the file.
    index: usize,
    base: usize,
    chunk_words: usize,
    chunks: Vec<Chunk>,
    current: usize,
    tail: usize,
    /// The next sequence number, shared by every partition of the log once the engine has
    /// recovered them all (see [`Partition::share_seq`]): sequence numbers then order the
    /// entries of the whole log, which a packed log needs (a DRAM entry's versions may lie
    /// in different partitions).
    next_seq: Arc<AtomicU64>,
    next_gen: u64,
    /// First word of the current chunk that may lie in unallocated file blocks: every word
    /// below it (within the chunk) was allocated by `reserve`.
    reserved_end: usize,
    pub(crate) counters: LogCounters,
}

/// Valid entries of a partition that recovery keeps the sequence numbers of (the newest),
/// enough to tell whether more than [`TORN_TAIL_MAX`] entries of the log are newer than a
/// given one.
pub const NEWEST_KEPT: usize = TORN_TAIL_MAX + 1;

/// The first invalid slot of an in-use chunk, when it is not simply the end of the chunk's
/// data (zeros, or an entry of the chunk's earlier generation) or when valid entries follow
/// it: a torn tail or damage, which only the whole log can tell apart (the engine judges it,
/// see `docs/plush.md`, "Damage in the log vs a torn tail").
#[derive(Clone, Debug)]
pub struct Suspect {
    pub chunk: usize,
    pub slot: usize,
    /// Byte offset of the slot in the file.
    pub offset: u64,
    /// Sequence numbers of the valid entries after it in the chunk (at most `TORN_TAIL_MAX`).
    pub after: Vec<u64>,
    /// The last slot after it that holds a valid entry (`slot` when none does).
    pub last_slot: usize,
    /// The slot holds neither zeros nor an entry of an earlier generation.
    pub damaged: bool,
    /// The chunk shares sequence numbers with an older in-use chunk of the partition: the
    /// target of a compaction a crash interrupted, whose source still holds every entry.
    pub copy_target: bool,
}

/// A chunk whose header does not decode though not all of its checked words are zero (a
/// crash while it was armed or cleared, or a damaged word), with the valid entries its body
/// still holds (each under its own generation tag). It is free when every such entry was
/// migrated or copied to another chunk (what arming and clearing guarantee); otherwise the
/// header is damage and those entries are the only copy.
#[derive(Clone, Debug)]
pub struct Orphan {
    pub chunk: usize,
    /// Byte offset of the chunk header in the file.
    pub offset: u64,
    pub entries: Vec<LogEntry>,
}

/// What recovery found in one partition.
pub struct Recovered {
    pub partition: Partition,
    /// Valid entries, sorted by sequence number, duplicates removed.
    pub entries: Vec<LogEntry>,
    /// Invalid slots for the engine to judge (torn tail or damage).
    pub suspects: Vec<Suspect>,
    /// Chunks that read as free only because their header does not check.
    pub orphans: Vec<Orphan>,
}

impl Partition {
    fn entries_per_chunk(&self) -> usize {
        (self.chunk_words * 8 - CHUNK_HEADER_BYTES) / ENTRY_BYTES
    }

    fn entry_word(&self, chunk: usize, slot: usize) -> usize {
        self.base + chunk * self.chunk_words + CHUNK_HEADER_BYTES / 8 + slot * ENTRY_WORDS
    }

    fn read_header(&self, chunk: usize) -> Option<u64> {
        let (region, base) = (&self.region, self.base + chunk * self.chunk_words);
        let mut w = [0u64; 8];
        for (i, x) in w.iter_mut().enumerate() {
            *x = region.word(base + i).load(Ordering::Acquire);
        }
        decode_chunk_header(w)
    }

    fn read_entry(&self, chunk: usize, slot: usize, gen: u64) -> Option<LogEntry> {
        let base = self.entry_word(chunk, slot);
        let mut w = [0u64; 4];
        for (i, x) in w.iter_mut().enumerate() {
            *x = self.region.word(base + i).load(Ordering::Acquire);
        }
        decode_entry(w, gen)
    }

    /// Valid entries of chunk `c` (generation `gen`) after slot `n`. Reads only the runs the
    /// region says may be non-zero ([`Region::data_run_words`]): the rest of a chunk past its
    /// tail is mostly a hole of the sparse file (allocated 64 KiB ahead of the tail, see
    /// [`RESERVE_STEP_BYTES`]), and a hole reads as zeros, which never decode as an entry
    /// (the flag, tag and checksum of four zero words do not check for any generation; test
    /// `zero_words_never_decode`). So the count is exactly what reading every slot gives, at
    /// the cost of the allocated part only: a reopen no longer faults in 5 MiB per partition.
    ///
    /// `gen`: the chunk's generation, or `None` to take every entry under its own tag (the
    /// body of a chunk whose header does not check). Returns (slot, entry) pairs.
    fn entries_after(
        &self,
        c: usize,
        n: Option<usize>,
        gen: Option<u64>,
    ) -> Vec<(usize, LogEntry)> {
        let per_chunk = self.entries_per_chunk();
        let first_slot_word = self.entry_word(c, 0);
        let end = self.entry_word(c, per_chunk);
        let mut out = Vec::new();
        let mut s = n.map_or(0, |n| n + 1);
        while s < per_chunk {
            let Some((lo, hi)) = self.region.data_run_words(self.entry_word(c, s), end) else {
                break;
            };
            // Every slot overlapping [lo, hi): from the one holding word `lo` to the one
            // holding word `hi - 1`.
            let from = ((lo - first_slot_word) / ENTRY_WORDS).max(s);
            let to = (hi - first_slot_word)
                .div_ceil(ENTRY_WORDS)
                .clamp(from + 1, per_chunk);
            for slot in from..to {
                let e = match gen {
                    Some(g) => self.read_entry(c, slot, g),
                    None => decode_entry_any(self.slot_words(c, slot)).map(|(e, _)| e),
                };
                if let Some(e) = e {
                    out.push((slot, e));
                }
            }
            s = to;
        }
        out
    }

    fn slot_words(&self, chunk: usize, slot: usize) -> [u64; 4] {
        let base = self.entry_word(chunk, slot);
        let mut w = [0u64; 4];
        for (i, x) in w.iter_mut().enumerate() {
            *x = self.region.word(base + i).load(Ordering::Acquire);
        }
        w
    }

    /// Whether slot `slot` of chunk `c` (generation `gen`), which does not decode, is the
    /// plain end of the chunk's data: zeros (never written, or a hole), or a whole entry of an
    /// earlier generation (a reused chunk past its tail). Anything else is a torn or damaged
    /// entry.
    fn is_end(&self, c: usize, slot: usize, gen: u64) -> bool {
        let w = self.slot_words(c, slot);
        w == [0; 4]
            || decode_entry_any(w).is_some_and(|(_, tag)| tag != gen & ((1 << TAG_BITS) - 1))
    }

    /// Zeroes slots `from..=to` of chunk `c` (flushed, fenced): a torn tail that recovery
    /// accepted, so that the next session finds the end of the chunk's data there and a clean
    /// close can vouch for every entry below it.
    pub fn clear_torn(&mut self, c: usize, from: usize, to: usize) -> Result<()> {
        let (first, words) = (self.entry_word(c, from), (to + 1 - from) * ENTRY_WORDS);
        for w in first..first + words {
            self.region.word(w).store(0, Ordering::Release);
        }
        self.region.flush_words(first, words);
        self.region.fence()
    }

    /// A chunk whose header does not decode: `None` when its magic, generation and check words
    /// are all zero (never armed, or cleared), else the entries its body holds, for the engine
    /// to judge (an arm or clear a crash cut short leaves some of those words zero, since a
    /// chunk is armed only over a cleared header, and its body then holds only entries that
    /// were migrated or copied elsewhere). All three non-zero and still not checking is damage
    /// to the media.
    fn check_free_header(&self, chunk: usize) -> Result<Option<Orphan>> {
        let base = self.base + chunk * self.chunk_words;
        let w: Vec<u64> = (0..3)
            .map(|i| self.region.word(base + i).load(Ordering::Acquire))
            .collect();
        if w.iter().all(|x| *x != 0) {
            return Err(Error::corruption(
                self.region.name(),
                (base * 8) as u64,
                format!(
                    "log partition {} chunk {chunk}: the chunk header does not check{RESTORE_HINT}",
                    self.index
                ),
            ));
        }
        if w.iter().all(|x| *x == 0) {
            return Ok(None);
        }
        let entries: Vec<LogEntry> = self
            .entries_after(chunk, None, None)
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        Ok((!entries.is_empty()).then_some(Orphan {
            chunk,
            offset: (base * 8) as u64,
            entries,
        }))
    }

    /// Opens partition `index` of the log file `region`: reads every chunk, returns the valid
    /// entries. A partition with no chunk in use gets its first chunk initialised.
    pub fn recover(
        region: Arc<Region>,
        index: usize,
        chunk_bytes: usize,
        chunks: usize,
    ) -> Result<Recovered> {
        Self::open(region, index, chunk_bytes, chunks, Mode::Recover)
    }

    /// Initialises partition `index` of a log file `region` that was just created (so reads
    /// as zeros): every chunk is known free, so no header is read. Reading them would fault
    /// in (and, on a file system, read ahead and zero) pages of a sparse file for nothing.
    pub fn create(
        region: Arc<Region>,
        index: usize,
        chunk_bytes: usize,
        chunks: usize,
    ) -> Result<Recovered> {
        Self::open(region, index, chunk_bytes, chunks, Mode::New)
    }

    /// Reads partition `index` as recovery does, writing nothing (no chunk is armed): what
    /// `verify` checks the log with.
    pub fn scan(
        region: Arc<Region>,
        index: usize,
        chunk_bytes: usize,
        chunks: usize,
    ) -> Result<Recovered> {
        Self::open(region, index, chunk_bytes, chunks, Mode::Scan)
    }

    fn open(
        region: Arc<Region>,
        index: usize,
        chunk_bytes: usize,
        chunks: usize,
        mode: Mode,
    ) -> Result<Recovered> {
        let chunk_words = chunk_bytes / 8;
        let mut p = Partition {
            region,
            index,
            base: index * chunks * chunk_words,
            chunk_words,
            chunks: vec![
                Chunk {
                    gen: 0,
                    epoch_max: 0,
                };
                chunks
            ],
            current: 0,
            tail: 0,
            next_seq: Arc::new(AtomicU64::new(1)),
            next_gen: 1,
            reserved_end: 0,
            counters: LogCounters::default(),
        };
        let per_chunk = p.entries_per_chunk();
        let mut entries: Vec<(LogEntry, u64)> = Vec::new(); // with the chunk's generation
        let mut suspects = Vec::new();
        let mut orphans = Vec::new();
        let mut newest: Option<(u64, usize, usize)> = None; // (gen, chunk, valid entries)
        for c in 0..if mode == Mode::New { 0 } else { chunks } {
            let Some(gen) = p.read_header(c) else {
                orphans.extend(p.check_free_header(c)?);
                continue;
            };
            let mut n = 0;
            let mut epoch_max = 0;
            while n < per_chunk {
                let Some(e) = p.read_entry(c, n, gen) else {
                    break;
                };
                epoch_max = epoch_max.max(e.epoch);
                p.next_seq.fetch_max(e.seq + 1, Ordering::Relaxed);
                entries.push((e, gen));
                n += 1;
            }
            let acked_at = p.base + c * p.chunk_words + ACKED_WORD;
            match decode_acked(p.region.word(acked_at).load(Ordering::Acquire), gen) {
                Acked::Slots(acked) if (n as u64) < acked => {
                    return Err(Error::corruption(
                        p.region.name(),
                        (p.entry_word(c, n) * 8) as u64,
                        format!(
                            "log partition {index} chunk {c}: entry {n} is damaged, but the \
                             chunk's header records its first {acked} entries as acknowledged \
                             (a crash tears only appends not yet acknowledged){RESTORE_HINT}"
                        ),
                    ));
                }
                Acked::Damaged => {
                    return Err(Error::corruption(
                        p.region.name(),
                        (acked_at * 8) as u64,
                        format!(
                            "log partition {index} chunk {c}: the header's record of \
                             acknowledged entries does not check{RESTORE_HINT}"
                        ),
                    ));
                }
                _ => {}
            }
            if n < per_chunk {
                let after = p.entries_after(c, Some(n), Some(gen));
                if after.len() > TORN_TAIL_MAX {
                    return Err(Error::corruption(
                        p.region.name(),
                        (p.entry_word(c, n) * 8) as u64,
                        format!(
                            "log partition {index} chunk {c}: entry {n} is damaged and {} \
                             valid entries follow it (a crash tears at most the last few){RESTORE_HINT}",
                            after.len()
                        ),
                    ));
                }
                let damaged = !p.is_end(c, n, gen);
                if damaged || !after.is_empty() {
                    suspects.push(Suspect {
                        chunk: c,
                        slot: n,
                        offset: (p.entry_word(c, n) * 8) as u64,
                        after: after.iter().map(|(_, e)| e.seq).collect(),
                        last_slot: after.last().map_or(n, |(s, _)| *s),
                        damaged,
                        copy_target: false,
                    });
                }
            }
            p.chunks[c] = Chunk { gen, epoch_max };
            p.next_gen = p.next_gen.max(gen + 1);
            if newest.is_none_or(|(g, _, _)| gen > g) {
                newest = Some((gen, c, n));
            }
        }
        entries.sort_by_key(|(e, _)| e.seq);
        // A sequence number in two chunks: a compaction copied it and a crash kept the source
        // (its header was not cleared yet). The newer chunk is the compaction's target.
        for w in entries.windows(2) {
            if w[0].0.seq == w[1].0.seq {
                let target = w[0].1.max(w[1].1);
                for s in suspects.iter_mut() {
                    if p.chunks[s.chunk].gen == target {
                        s.copy_target = true;
                    }
                }
            }
        }
        let mut entries: Vec<LogEntry> = entries.into_iter().map(|(e, _)| e).collect();
        entries.dedup_by_key(|e| e.seq);
        match newest {
            Some((_, c, n)) => {
                p.current = c;
                p.tail = n;
                // Not known how far the chunk was allocated: the next append allocates from
                // the chunk's start again (allocated blocks cost nothing more).
                p.reserved_end = p.base + c * p.chunk_words;
            }
            None if mode == Mode::Scan => {}
            None => {
                p.init_chunk(0)?;
                p.current = 0;
                p.tail = 0;
            }
        }
        Ok(Recovered {
            partition: p,
            entries,
            suspects,
            orphans,
        })
    }

    /// The next sequence number this partition would draw (one above its highest entry's).
    pub fn next_seq(&self) -> u64 {
        self.next_seq.load(Ordering::Relaxed)
    }

    /// Draws sequence numbers from `seq` from now on (the log-wide counter, set above every
    /// partition's highest entry).
    pub fn share_seq(&mut self, seq: Arc<AtomicU64>) {
        self.next_seq = seq;
    }

    /// Chunks with a valid header (holding entries, or armed).
    pub fn chunks_in_use(&self) -> usize {
        self.chunks.iter().filter(|c| c.gen != 0).count()
    }

    /// Chunks holding nothing (after recovery, a crash inside a compaction can leave none).
    pub fn free_chunks(&self) -> usize {
        self.chunks.iter().filter(|c| c.gen == 0).count()
    }

    /// The entries of chunk `c` whose DRAM entry has not migrated them.
    fn live_entries(&self, c: usize, dram_epoch: &dyn Fn(u64) -> u64) -> Vec<LogEntry> {
        let gen = self.chunks[c].gen;
        let mut live = Vec::new();
        for slot in 0..self.entries_per_chunk() {
            let Some(e) = self.read_entry(c, slot, gen) else {
                break;
            };
            if e.epoch >= dram_epoch(e.key) {
                live.push(e);
            }
        }
        live
    }

    /// Allocates the file blocks of the current chunk up to (not including) entry slot
    /// `slot_end`, a step at a time, before anything is stored there: no store reaches an
    /// unallocated page (a SIGBUS on a full file system; here `StorageIOError`).
    fn reserve_to(&mut self, slot_end: usize) -> Result<()> {
        let chunk_base = self.base + self.current * self.chunk_words;
        let chunk_end = chunk_base + self.chunk_words;
        let need = self.entry_word(self.current, slot_end).min(chunk_end);
        // `reserved_end` belongs to the chunk last armed or recovered.
        let in_chunk = (chunk_base..=chunk_end).contains(&self.reserved_end);
        let from = if in_chunk {
            self.reserved_end
        } else {
            chunk_base
        };
        if need <= from {
            return Ok(());
        }
        let to = need
            .max(from + RESERVE_STEP_BYTES / 8)
            .div_ceil(RESERVE_STEP_BYTES / 8)
            .saturating_mul(RESERVE_STEP_BYTES / 8)
            .min(chunk_end);
        self.region.reserve_words(from, to - from)?;
        self.reserved_end = to;
        Ok(())
    }

    fn init_chunk(&mut self, c: usize) -> Result<()> {
        let base = self.base + c * self.chunk_words;
        // The chunk's first step is allocated before its header is written, the rest as
        // the tail reaches it (`reserve_to`).
        let first = (RESERVE_STEP_BYTES / 8).min(self.chunk_words);
        self.region.reserve_words(base, first)?;
        let gen = self.next_gen;
        self.next_gen += 1;
        let words = [CHUNK_MAGIC, gen, header_check(gen), 0, 0, 0, 0, 0];
        for (i, w) in words.iter().enumerate() {
            self.region.word(base + i).store(*w, Ordering::Release);
        }
        self.region.flush_words(base, 8);
        self.region.fence()?;
        self.chunks[c] = Chunk { gen, epoch_max: 0 };
        self.reserved_end = base + first;
        Ok(())
    }

    fn clear_chunk(&mut self, c: usize) -> Result<()> {
        let base = self.base + c * self.chunk_words;
        for i in 0..8 {
            self.region.word(base + i).store(0, Ordering::Release);
        }
        self.region.flush_words(base, 8);
        self.region.fence()?;
        self.region.discard_words(base, self.chunk_words);
        self.chunks[c] = Chunk {
            gen: 0,
            epoch_max: 0,
        };
        Ok(())
    }

    /// Stores `e` at the tail; flushes it when `flush` (compaction flushes its copies at once).
    fn write_entry(&mut self, e: &LogEntry, flush: bool) {
        let gen = self.chunks[self.current].gen;
        let base = self.entry_word(self.current, self.tail);
        for (i, w) in encode_entry(e, gen).iter().enumerate() {
            self.region.word(base + i).store(*w, Ordering::Release);
        }
        if flush {
            self.region.flush_words(base, ENTRY_WORDS);
        }
        let c = &mut self.chunks[self.current];
        c.epoch_max = c.epoch_max.max(e.epoch);
        self.tail += 1;
    }

    /// Appends (key, value, epoch) and hands it to the back end (`flush`); the caller makes it
    /// durable with a barrier on the log region after releasing the partition (so that appends
    /// to one partition from several threads can share one barrier). `dram_epoch(key)` is the current DRAM
    /// epoch of the key's entry, and `partition_epoch_min()` the smallest DRAM epoch of the
    /// partition's entries (to skip reading dead chunks during compaction).
    pub fn append(
        &mut self,
        key: u64,
        value: u64,
        epoch: u64,
        dram_epoch: &dyn Fn(u64) -> u64,
        partition_epoch_min: &dyn Fn() -> u64,
    ) -> Result<Appended> {
        if self.tail == self.entries_per_chunk() {
            // The full chunk was handed to the file (its last append flushed; the barrier may
            // still be in flight, which needs no private copy) and is only read from now on.
            let full = self.base + self.current * self.chunk_words;
            self.region.discard_words(full, self.chunk_words);
            self.advance(dram_epoch, partition_epoch_min)?;
        }
        self.reserve_to(self.tail + 1)?;
        let e = LogEntry {
            key,
            value,
            epoch,
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
        };
        self.write_entry(&e, true);
        self.counters.appends += 1;
        Ok(Appended {
            header_word: self.base + self.current * self.chunk_words,
            gen: self.chunks[self.current].gen,
            slots: self.tail as u64,
        })
    }

    fn advance(
        &mut self,
        dram_epoch: &dyn Fn(u64) -> u64,
        partition_epoch_min: &dyn Fn() -> u64,
    ) -> Result<()> {
        let free: Vec<usize> = (0..self.chunks.len())
            .filter(|c| self.chunks[*c].gen == 0)
            .collect();
        if free.len() >= 2 {
            self.init_chunk(free[0])?;
            self.current = free[0];
            self.tail = 0;
            return Ok(());
        }
        for _ in 0..=self.chunks.len() {
            let Some(oldest) = (0..self.chunks.len())
                .filter(|c| self.chunks[*c].gen != 0 && *c != self.current)
                .min_by_key(|c| self.chunks[*c].gen)
            else {
                break;
            };
            let Some(spare) = (0..self.chunks.len()).find(|c| self.chunks[*c].gen == 0) else {
                // No free chunk: a crash inside a compaction (the spare written, its source
                // not yet cleared) leaves a partition so. The source may go once nothing in
                // it is live (an open that finds such a partition checkpoints the DRAM level).
                if self.chunks[oldest].epoch_max < partition_epoch_min()
                    || self.live_entries(oldest, dram_epoch).is_empty()
                {
                    self.clear_chunk(oldest)?;
                    continue;
                }
                break;
            };
            let mut live = Vec::new();
            if self.chunks[oldest].epoch_max >= partition_epoch_min() {
                self.counters.compactions_read += 1;
                live = self.live_entries(oldest, dram_epoch);
            } else {
                self.counters.compactions_skipped_read += 1;
            }
            self.init_chunk(spare)?;
            self.current = spare;
            self.tail = 0;
            self.reserve_to(live.len())?;
            let first = self.entry_word(self.current, 0);
            for e in &live {
                self.write_entry(e, false);
            }
            self.region.flush_words(first, live.len() * ENTRY_WORDS);
            self.counters.entries_copied += live.len() as u64;
            if !live.is_empty() {
                self.region.fence()?;
            }
            self.clear_chunk(oldest)?;
            if self.tail < self.entries_per_chunk() {
                return Ok(());
            }
        }
        Err(Error::Full(format!(
            "recovery log {} partition {} has no room: every chunk holds records the DRAM \
             level has not migrated (raise log_chunks or log_chunk_bytes)",
            self.region.name(),
            self.index
        )))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The bit packing, one bit at a time: the entry format's definition, which the packer
    /// and the reader, a run of bits per word, must match bit for bit.
    fn reference_encode(e: &LogEntry, gen: u64) -> [u64; 4] {
        let tag = gen & ((1 << TAG_BITS) - 1);
        let mut words = [0u64; 4];
        let mut pos = 0u32;
        let fields = [
            (e.key, 64),
            (e.value, 64),
            (e.epoch, EPOCH_BITS),
            (e.seq, SEQ_BITS),
            (tag, TAG_BITS),
            (entry_check(e, tag) as u64, CHECK_BITS),
        ];
        for (v, n) in fields {
            for i in 0..n {
                words[(pos / 63) as usize] |= ((v >> i) & 1) << (pos % 63);
                pos += 1;
            }
        }
        words.map(|w| w | (gen & 1) << 63)
    }

    #[test]
    fn entries_pack_and_unpack_bit_for_bit_as_the_format_defines() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [0, 1, u64::MAX, u64::MAX - 1, 1 << 62, 1 << 63];
        for i in 0..20_000 {
            let pick = |r: u64| match i % 3 {
                0 => edges[(r % edges.len() as u64) as usize],
                _ => r,
            };
            let e = LogEntry {
                key: pick(next()),
                value: pick(next()),
                epoch: pick(next()) & ((1 << EPOCH_BITS) - 1),
                seq: pick(next()) & ((1 << SEQ_BITS) - 1),
            };
            let gen = next() % 1000;
            let words = encode_entry(&e, gen);
            assert_eq!(words, reference_encode(&e, gen), "{e:?} gen {gen}");
            assert_eq!(decode_entry(words, gen), Some(e), "{e:?} gen {gen}");
        }
    }

    /// A `log.plush` region of `bytes` on a fresh simulated storage (crash simulator off).
    fn sim_log_region(bytes: usize) -> Arc<Region> {
        use crate::persist::{RegionKind, SimStorage, Storage};
        let storage = SimStorage::new(0, 1);
        let r = storage
            .open_region("log.plush", bytes, true, RegionKind::Log)
            .unwrap()
            .unwrap();
        Arc::new(Region::new("log.plush", r))
    }

    /// A created partition arms its first chunk like a recovered empty one, without reading a
    /// header: recovery of what it wrote finds its entries, and a damaged header in a file
    /// that already existed is still found by `recover` (which the engine uses for any log
    /// file that existed before the open).
    #[test]
    fn create_skips_headers_and_recover_reads_what_it_wrote() {
        let (chunk_bytes, chunks) = (8192, 3);
        let region = sim_log_region(chunk_bytes * chunks);
        let live = |_: u64| 1;
        {
            let created = Partition::create(region.clone(), 0, chunk_bytes, chunks).unwrap();
            assert!(created.entries.is_empty());
            let mut p = created.partition;
            assert_eq!(p.free_chunks(), chunks - 1);
            for k in 0..5 {
                p.append(k, k + 100, 1, &live, &|| 1).unwrap();
            }
            p.region.fence().unwrap();
        }
        let rec = Partition::recover(region.clone(), 0, chunk_bytes, chunks).unwrap();
        let got: Vec<(u64, u64)> = rec.entries.iter().map(|e| (e.key, e.value)).collect();
        assert_eq!(got, (0..5).map(|k| (k, k + 100)).collect::<Vec<_>>());
        drop(rec);
        // Damage the (free) last chunk's header: magic, generation and check all non-zero.
        let base = 2 * chunk_bytes / 8;
        for (i, w) in [CHUNK_MAGIC, 7, 9].into_iter().enumerate() {
            region.word(base + i).store(w, Ordering::Release);
        }
        let err = Partition::recover(region, 0, chunk_bytes, chunks)
            .err()
            .expect("a damaged chunk header is found");
        assert!(err.to_string().contains("chunk 2"), "{err}");
    }

    /// Regression (found by `attune-stress --engine hash`, a SIGKILL inside a compaction):
    /// recovery can find every chunk in use (the spare written, its source not yet cleared).
    /// A partition so must refuse to drop live entries and, once they are dead (the open then
    /// checkpoints), clear its oldest chunk and go on.
    #[test]
    fn a_partition_without_a_free_chunk_clears_a_dead_oldest_chunk() {
        let (chunk_bytes, chunks) = (8192, 3);
        let region = sim_log_region(chunk_bytes * chunks);
        let mut p = Partition::recover(region.clone(), 0, chunk_bytes, chunks)
            .unwrap()
            .partition;
        let live = |_: u64| 1;
        let per = p.entries_per_chunk() as u64;
        for k in 0..per {
            p.append(k, k, 1, &live, &|| 1).unwrap();
        }
        // The interrupted compaction: two more chunks started, the oldest never cleared.
        p.init_chunk(1).unwrap();
        p.init_chunk(2).unwrap();
        p.region.fence().unwrap();
        let mut p = Partition::recover(region, 0, chunk_bytes, chunks)
            .unwrap()
            .partition;
        assert_eq!(p.free_chunks(), 0);
        for k in 0..per {
            p.append(k, k, 1, &live, &|| 1).unwrap();
        }
        let full = p.append(per, per, 1, &live, &|| 1);
        assert!(matches!(full, Err(Error::Full(_))), "{full:?}");
        // After a checkpoint every entry is below its DRAM entry's epoch.
        let dead = |_: u64| 2;
        p.append(per, per, 2, &dead, &|| 2).unwrap();
        assert!(p.free_chunks() >= 1);
    }

    /// Four zero words (a hole of the log file) never decode, whatever the generation: the
    /// flag matches an even generation and the tag one that is a multiple of 2^16, but the
    /// checksum of an all-zero entry is not zero. Recovery's hole skipping rests on this.
    /// The acknowledged-tail word: round trip, a record of another generation of the chunk
    /// is "unknown", any one flipped bit is damage, and a later store never lowers it.
    #[test]
    fn the_acknowledged_tail_word_round_trips_and_checks() {
        for (gen, slots) in [(1, 1), (5, 163_838), (0x1_0005, 77), (u64::MAX, u64::MAX)] {
            let w = encode_acked(gen, slots);
            let want = slots.min(u32::MAX as u64);
            assert_eq!(decode_acked(w, gen), Acked::Slots(want));
            assert_eq!(decode_acked(w, gen + 1), Acked::Unknown);
            for bit in 0..64 {
                assert_eq!(decode_acked(w ^ 1 << bit, gen), Acked::Damaged, "bit {bit}");
            }
        }
        assert_eq!(decode_acked(0, 3), Acked::Unknown);
        // The worked example of docs/formats/plush.md.
        assert_eq!(encode_acked(5, 640), 0xedaf_0005_0000_0280);
        let region = sim_log_region(8192);
        let at = |gen, slots| Appended {
            header_word: 0,
            gen,
            slots,
        };
        record_acked(&region, &at(4, 10));
        record_acked(&region, &at(4, 9));
        assert_eq!(
            decode_acked(region.word(ACKED_WORD).load(Ordering::Relaxed), 4),
            Acked::Slots(10)
        );
        // A late store for an earlier generation keeps the later generation's record.
        record_acked(&region, &at(5, 2));
        record_acked(&region, &at(4, 11));
        assert_eq!(
            decode_acked(region.word(ACKED_WORD).load(Ordering::Relaxed), 5),
            Acked::Slots(2)
        );
    }

    #[test]
    fn zero_words_never_decode() {
        for gen in [1u64, 2, 1 << 16, 2 << 16, 3 << 16, u64::MAX - 0xffff] {
            assert_eq!(decode_entry([0; 4], gen), None, "generation {gen}");
        }
        let zero = LogEntry {
            key: 0,
            value: 0,
            epoch: 0,
            seq: 0,
        };
        assert_ne!(entry_check(&zero, 0), 0);
    }

    /// `count` valid entries of generation `gen` (keys and sequence numbers from 1,000), as
    /// the words of consecutive slots.
    fn planted_words(count: usize, gen: u64) -> Vec<u64> {
        (0..count as u64)
            .flat_map(|i| {
                let e = LogEntry {
                    key: 1_000 + i,
                    value: i,
                    epoch: 1,
                    seq: 1_000 + i,
                };
                encode_entry(&e, gen)
            })
            .collect()
    }

    /// Appends 10 entries to partition 0 of a new log `name` in `storage`, then puts `planted`
    /// more valid entries far past the tail (past a hole and the allocated step) — through
    /// `pwrite` into `file` when given (damage or a stray write), else through the region —
    /// and recovers.
    fn recover_with_planted(
        storage: &dyn crate::persist::Storage,
        file: Option<&std::path::Path>,
        planted: usize,
    ) -> Result<Recovered> {
        use crate::persist::RegionKind;
        let (chunk_bytes, chunks) = (1 << 20, 3);
        let r = storage
            .open_region("log.plush", chunk_bytes * chunks, true, RegionKind::Log)
            .unwrap()
            .unwrap();
        let region = Arc::new(Region::new("log.plush", r));
        let mut p = Partition::create(region.clone(), 0, chunk_bytes, chunks)
            .unwrap()
            .partition;
        for k in 0..10 {
            p.append(k, k, 1, &|_| 1, &|| 1).unwrap();
        }
        p.region.fence().unwrap();
        let words = planted_words(planted, p.chunks[0].gen);
        let first = p.entry_word(0, p.entries_per_chunk() - 200);
        assert!((first - p.entry_word(0, p.tail)) * 8 > 2 * RESERVE_STEP_BYTES);
        drop(p);
        match file {
            Some(path) => {
                use std::os::unix::fs::FileExt;
                let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
                f.write_all_at(&bytes, first as u64 * 8).unwrap();
            }
            None => {
                for (i, w) in words.iter().enumerate() {
                    region.word(first + i).store(*w, Ordering::Release);
                }
                // The simulator reports the zero pages from the one after the tail's to the
                // planted run as a hole, so recovery skips them (a file system reports the
                // hole it has, if it can).
                let next_page = region_entry(0, 10).div_ceil(512) * 512;
                let run = region.data_run_words(next_page, chunk_bytes / 8);
                assert_eq!(run.map(|r| r.0), Some(first / 512 * 512), "{run:?}");
            }
        }
        Partition::recover(region, 0, chunk_bytes, chunks)
    }

    /// Word of slot `slot` of chunk `c` in partition 0.
    fn region_entry(c: usize, slot: usize) -> usize {
        c * (1 << 20) / 8 + CHUNK_HEADER_BYTES / 8 + slot * ENTRY_WORDS
    }

    /// Recovery skips the holes past a chunk's tail without weakening the damage rule: more
    /// than `TORN_TAIL_MAX` valid entries after the first invalid one are still refused when
    /// they lie far beyond the tail, past a hole, on a real file (ext4 and tmpfs report holes
    /// through `SEEK_DATA`) and in the crash simulator (which reports every page of zeros as
    /// a hole). `TORN_TAIL_MAX` of them are a torn tail, as before.
    #[test]
    fn damage_past_a_hole_beyond_the_tail_is_still_found() {
        use crate::persist::{Backend, FileStorage, SimStorage};
        for planted in [TORN_TAIL_MAX, TORN_TAIL_MAX + 1] {
            let dir = tempfile::tempdir().unwrap();
            let files = FileStorage::new(dir.path(), Backend::Msync, true).unwrap();
            let path = dir.path().join("log.plush");
            let sim = SimStorage::new(0, 1);
            for got in [
                recover_with_planted(&files, Some(&path), planted),
                recover_with_planted(&sim, None, planted),
            ] {
                if planted > TORN_TAIL_MAX {
                    let err = got.err().expect("damage past a hole is found");
                    let want = format!("entry 10 is damaged and {planted} valid entries");
                    assert!(err.to_string().contains(&want), "{err}");
                } else {
                    let keys: Vec<u64> = got.unwrap().entries.iter().map(|e| e.key).collect();
                    assert_eq!(keys, (0..10).collect::<Vec<_>>());
                }
            }
        }
    }

    #[test]
    fn entry_round_trips_and_rejects_the_wrong_generation() {
        let e = LogEntry {
            key: u64::MAX,
            value: 0x0123_4567_89AB_CDEF,
            epoch: (1 << 40) - 1,
            seq: (1 << 40) - 1,
        };
        for gen in [1u64, 2, 65_537] {
            let w = encode_entry(&e, gen);
            assert_eq!(decode_entry(w, gen), Some(e));
            assert_eq!(decode_entry(w, gen + 1), None);
        }
    }

    #[test]
    fn the_format_doc_example_encodes_as_drawn() {
        let e = LogEntry {
            key: 42,
            value: 7,
            epoch: 3,
            seq: 9,
        };
        assert_eq!(
            encode_entry(&e, 5),
            [
                0x8000_0000_0000_002a,
                0x8000_0000_0000_000e,
                0x8000_2400_0000_000c,
                0xa310_ad08_0028_0000
            ]
        );
    }

    #[test]
    fn a_torn_entry_is_rejected() {
        let e = LogEntry {
            key: 7,
            value: 9,
            epoch: 3,
            seq: 11,
        };
        // The slot's previous generation (other parity) under the new entry.
        let old = encode_entry(
            &LogEntry {
                key: 1,
                value: 2,
                epoch: 1,
                seq: 3,
            },
            3,
        );
        let new = encode_entry(&e, 4);
        for mask in 1..15u32 {
            let mut w = [0u64; 4];
            for i in 0..4 {
                w[i] = if mask & (1 << i) != 0 { new[i] } else { old[i] };
            }
            assert_eq!(decode_entry(w, 4), None, "mask {mask}");
        }
    }

    #[test]
    fn a_flipped_bit_is_rejected() {
        let e = LogEntry {
            key: 7,
            value: 9,
            epoch: 3,
            seq: 11,
        };
        let w = encode_entry(&e, 5);
        for bit in 0..252 {
            let mut x = w;
            x[bit / 63] ^= 1 << (bit % 63);
            assert_eq!(decode_entry(x, 5), None, "bit {bit}");
        }
    }
}
