//! The levels of the hash table: the DRAM level 0 (volatile, rebuilt from the recovery log) and
//! the persistent levels 1.. (one mapped file each). Both share one directory-entry shape: a
//! meta word (epoch and size, packed so that both change atomically), a partitioned Bloom filter
//! (one 128-bit partition per bucket) and `fanout` buckets of 16 × (8-byte key, 8-byte value)
//! filled front to back. Format of a level file: `docs/formats/plush.md`.
//!
//! Concurrency: writers of an entry hold the lock of the DRAM entry whose subtree it is in (a
//! level-`n` entry only ever receives records from its parent, so the DRAM lock covers every
//! descendant). Readers take no lock: they read the meta word, search, and re-read it (a
//! seqlock), retrying when it changed; after `RETRIES_MAX` they fall back to the lock.

use crate::error::{Error, Result};
use crate::layout::{
    filter_mask, hash_key, pack_meta, unpack_meta, zeroed_words, Geometry, BUCKET_WORDS,
    FILTER_WORDS_PER_BUCKET, SLOTS_PER_BUCKET,
};
use crate::persist::Region;
use parking_lot::Mutex;
use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Optimistic attempts a lookup makes on one entry before it takes the lock.
pub const RETRIES_MAX: usize = 64;
/// Bytes of a level file's header.
pub const LEVEL_HEADER_BYTES: usize = 4096;
const LEVEL_MAGIC: u64 = u64::from_le_bytes(*b"PLSHLEVL");
/// Version of the log and manifest formats, and of level files without record checksums.
pub const FORMAT_VERSION: u64 = 3;
/// Version of a level file whose directory entries carry record checksums (two size-tagged
/// crc32c slots in words 1 and 2 of each entry; see `docs/formats/plush.md`). Files of
/// [`FORMAT_VERSION`] still open, unchecked.
pub const LEVEL_VERSION_CHECKED: u64 = 4;
/// Version of a level file whose checksum slots also carry a check of the meta word they were
/// written for (size in bits 48–63, 16 check bits of the meta word in bits 32–47, the records'
/// crc32c in bits 0–31), and whose clears write a slot too: a damaged size or epoch no longer
/// reads as fewer records or as records already migrated. New level files get this version;
/// files of [`LEVEL_VERSION_CHECKED`] keep opening with its rules.
pub const LEVEL_VERSION_META: u64 = 5;

/// One directory entry, as the shared search code sees it.
pub trait EntryView {
    fn meta(&self) -> &AtomicU64;
    fn filter(&self, bucket: usize, word: usize) -> &AtomicU64;
    fn key(&self, bucket: usize, slot: usize) -> &AtomicU64;
    fn value(&self, bucket: usize, slot: usize) -> &AtomicU64;
}

/// Searches one entry for `key` back to front (newest first), skipping buckets whose filter
/// partition rules the key out. `None`: the entry kept changing (take the lock and retry).
#[inline]
pub fn search<E: EntryView>(
    e: &E,
    key: u64,
    mask: [u64; 2],
    capacity: usize,
) -> Option<Option<u64>> {
    search_meta(e, key, mask, capacity).map(|(v, _, _)| v)
}

/// [`search`], also returning the meta word the result was read under and whether some
/// bucket's filter admitted the key (a miss after that is a filter false positive, or a
/// damaged key: the caller checks the entry then too).
#[inline]
pub fn search_meta<E: EntryView>(
    e: &E,
    key: u64,
    mask: [u64; 2],
    capacity: usize,
) -> Option<(Option<u64>, u64, bool)> {
    for _ in 0..RETRIES_MAX {
        let m1 = e.meta().load(Ordering::Acquire);
        let size = unpack_meta(m1).1.min(capacity);
        let mut found = None;
        let mut probed = false;
        if size > 0 {
            let last = (size - 1) / SLOTS_PER_BUCKET;
            'buckets: for b in (0..=last).rev() {
                let f0 = e.filter(b, 0).load(Ordering::Relaxed);
                let f1 = e.filter(b, 1).load(Ordering::Relaxed);
                if f0 & mask[0] != mask[0] || f1 & mask[1] != mask[1] {
                    continue;
                }
                probed = true;
                let n = if b == last {
                    size - b * SLOTS_PER_BUCKET
                } else {
                    SLOTS_PER_BUCKET
                };
                for j in (0..n).rev() {
                    if e.key(b, j).load(Ordering::Relaxed) == key {
                        found = Some(e.value(b, j).load(Ordering::Relaxed));
                        break 'buckets;
                    }
                }
            }
        }
        fence(Ordering::Acquire);
        if e.meta().load(Ordering::Relaxed) == m1 {
            return Some((found, m1, probed));
        }
    }
    None
}

/// Reads an entry's records newest first, keeping only the newest version of each key.
pub fn collect_newest<E: EntryView>(e: &E, capacity: usize, out: &mut Vec<(u64, u64)>) {
    out.clear();
    let size = unpack_meta(e.meta().load(Ordering::Acquire))
        .1
        .min(capacity);
    let mut seen = SmallSet::default();
    for idx in (0..size).rev() {
        let (b, j) = (idx / SLOTS_PER_BUCKET, idx % SLOTS_PER_BUCKET);
        let k = e.key(b, j).load(Ordering::Relaxed);
        if seen.insert(k) {
            out.push((k, e.value(b, j).load(Ordering::Relaxed)));
        }
    }
}

/// An open-addressing set for the ≤ 256 keys of one entry (the migration's duplicate check).
struct SmallSet {
    keys: [u64; 1024],
    used: [u64; 16],
}

impl Default for SmallSet {
    fn default() -> Self {
        SmallSet {
            keys: [0; 1024],
            used: [0; 16],
        }
    }
}

impl SmallSet {
    /// Inserts `k`; false if it was there.
    fn insert(&mut self, k: u64) -> bool {
        let mut i = (crate::layout::hash_key(k) >> 40) as usize & 1023;
        loop {
            if self.used[i / 64] & (1 << (i % 64)) == 0 {
                self.used[i / 64] |= 1 << (i % 64);
                self.keys[i] = k;
                return true;
            }
            if self.keys[i] == k {
                return false;
            }
            i = (i + 1) & 1023;
        }
    }
}

/// The DRAM level: directory entries with their buckets, and one lock per entry.
pub struct DramLevel {
    pub(crate) geo: Geometry,
    meta: Box<[AtomicU64]>,
    filters: Box<[AtomicU64]>,
    slots: Box<[AtomicU64]>,
    pub(crate) locks: Box<[Mutex<()>]>,
}

/// One DRAM entry.
pub struct DramEntry<'a> {
    level: &'a DramLevel,
    idx: usize,
}

impl EntryView for DramEntry<'_> {
    #[inline]
    fn meta(&self) -> &AtomicU64 {
        &self.level.meta[self.idx]
    }
    #[inline]
    fn filter(&self, bucket: usize, word: usize) -> &AtomicU64 {
        let b = self.idx * self.level.geo.buckets() + bucket;
        &self.level.filters[b * FILTER_WORDS_PER_BUCKET + word]
    }
    #[inline]
    fn key(&self, bucket: usize, slot: usize) -> &AtomicU64 {
        let b = self.idx * self.level.geo.buckets() + bucket;
        &self.level.slots[b * BUCKET_WORDS + slot]
    }
    #[inline]
    fn value(&self, bucket: usize, slot: usize) -> &AtomicU64 {
        let b = self.idx * self.level.geo.buckets() + bucket;
        &self.level.slots[b * BUCKET_WORDS + SLOTS_PER_BUCKET + slot]
    }
}

impl DramLevel {
    /// An empty DRAM level (memory is touched only where records land).
    pub fn new(geo: Geometry) -> DramLevel {
        let entries = geo.entries(0);
        let buckets = entries * geo.buckets();
        DramLevel {
            geo,
            meta: zeroed_words(entries),
            filters: zeroed_words(buckets * FILTER_WORDS_PER_BUCKET),
            slots: zeroed_words(buckets * BUCKET_WORDS),
            locks: (0..entries).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Entry `idx`.
    #[inline]
    pub fn entry(&self, idx: usize) -> DramEntry<'_> {
        DramEntry { level: self, idx }
    }

    /// Bytes of DRAM the level reserves (pages are touched as records arrive).
    pub fn bytes(&self) -> usize {
        (self.meta.len() + self.filters.len() + self.slots.len()) * 8
            + self.locks.len() * std::mem::size_of::<Mutex<()>>()
    }

    /// Epoch and size of entry `idx`.
    #[inline]
    pub fn meta_of(&self, idx: usize) -> (u64, usize) {
        unpack_meta(self.meta[idx].load(Ordering::Acquire))
    }

    /// Appends a record to entry `idx` (caller holds its lock, or is recovery; the entry has
    /// room) and publishes it under `epoch`.
    pub fn append(&self, idx: usize, key: u64, value: u64, mask: [u64; 2], epoch: u64) {
        let e = self.entry(idx);
        let size = unpack_meta(e.meta().load(Ordering::Relaxed)).1;
        debug_assert!(size < self.geo.entry_capacity());
        let (b, j) = (size / SLOTS_PER_BUCKET, size % SLOTS_PER_BUCKET);
        e.key(b, j).store(key, Ordering::Relaxed);
        e.value(b, j).store(value, Ordering::Relaxed);
        set_filter(e.filter(b, 0), mask[0], j == 0);
        set_filter(e.filter(b, 1), mask[1], j == 0);
        e.meta()
            .store(pack_meta(epoch, size + 1), Ordering::Release);
    }

    /// Sets entry `idx`'s epoch and size (recovery, and the clear after a migration). The
    /// filters stay: a bucket's partition is reset when its first record is written.
    pub fn reset(&self, idx: usize, epoch: u64, size: usize) {
        self.meta[idx].store(pack_meta(epoch, size), Ordering::Release);
    }
}

/// A persistent level: one region holding a header, the directory and the buckets.
pub struct Level {
    pub(crate) num: usize,
    pub(crate) entries: usize,
    geo: Geometry,
    pub(crate) region: Region,
    dir_words: usize,
    bucket_base: usize,
    /// DRAM copy of the filters (levels up to `dram_filter_levels`).
    dram_filters: Option<Box<[AtomicU64]>>,
    /// The file carries record checksums ([`LEVEL_VERSION_CHECKED`]).
    pub(crate) checked: bool,
    /// Its checksum slots also check the meta word ([`LEVEL_VERSION_META`]).
    pub(crate) meta_checked: bool,
    /// Per entry, the meta word whose records this process last found matching their checksum
    /// (0: none), so a lookup hashes an entry's records once per change, not once per lookup
    /// (as the LSM checks a block once per load). Publishing or clearing the entry resets it.
    /// Zeroed lazily: untouched entries cost no memory.
    verified: Box<[AtomicU64]>,
    /// The whole file was allocated at open ([`Level::reserve_all`], option
    /// `preallocate_levels`): a migration then allocates nothing.
    preallocated: std::sync::atomic::AtomicBool,
}

/// One entry of a persistent level.
pub struct LevelEntry<'a> {
    level: &'a Level,
    idx: usize,
}

impl EntryView for LevelEntry<'_> {
    #[inline]
    fn meta(&self) -> &AtomicU64 {
        self.level.region.word(self.level.dir_word(self.idx))
    }
    #[inline]
    fn filter(&self, bucket: usize, word: usize) -> &AtomicU64 {
        match &self.level.dram_filters {
            Some(f) => &f[(self.idx * self.level.geo.buckets() + bucket) * 2 + word],
            None => self
                .level
                .region
                .word(self.level.filter_word(self.idx, bucket) + word),
        }
    }
    #[inline]
    fn key(&self, bucket: usize, slot: usize) -> &AtomicU64 {
        self.level
            .region
            .word(self.level.bucket_word(self.idx, bucket) + slot)
    }
    #[inline]
    fn value(&self, bucket: usize, slot: usize) -> &AtomicU64 {
        let w = self.level.bucket_word(self.idx, bucket) + SLOTS_PER_BUCKET + slot;
        self.level.region.word(w)
    }
}

/// Words of one directory entry: the meta line (8 words) and the filter, in whole lines.
fn dir_words(geo: Geometry) -> usize {
    (8 + geo.buckets() * FILTER_WORDS_PER_BUCKET).div_ceil(8) * 8
}

/// Bytes of level `num`'s file.
pub fn level_file_bytes(geo: Geometry, num: usize) -> usize {
    let entries = geo.entries(num);
    let words = LEVEL_HEADER_BYTES / 8 + entries * (dir_words(geo) + geo.buckets() * BUCKET_WORDS);
    (words * 8).div_ceil(4096) * 4096
}

/// Name of level `num`'s file.
pub fn level_file_name(num: usize) -> String {
    format!("level-{num:02}.plush")
}

fn header_words(geo: Geometry, num: usize, version: u64) -> [u64; 7] {
    let mut w = [
        LEVEL_MAGIC,
        version,
        num as u64,
        geo.placement_bits(num) as u64,
        geo.fanout_log2 as u64,
        geo.dram_entries_log2 as u64,
        0,
    ];
    let mut buf = Vec::with_capacity(40);
    for x in &w[1..6] {
        buf.extend_from_slice(&x.to_le_bytes());
    }
    w[6] = crc32c::crc32c(&buf) as u64;
    w
}

impl Level {
    /// Opens level `num` over `region`: checks an armed header, or arms a new one (a header
    /// without its magic word is a creation a crash cut short; no data was written after it).
    pub fn open(region: Region, geo: Geometry, num: usize, dram_filters: bool) -> Result<Level> {
        let magic = region.word(0).load(Ordering::Acquire);
        let version = match region.word(1).load(Ordering::Acquire) {
            v @ (FORMAT_VERSION | LEVEL_VERSION_CHECKED) if magic != 0 => v,
            _ => LEVEL_VERSION_META,
        };
        let want = header_words(geo, num, version);
        if magic == 0 {
            region.reserve_words(0, LEVEL_HEADER_BYTES / 8)?;
            for (i, w) in want.iter().enumerate().skip(1) {
                region.word(i).store(*w, Ordering::Release);
            }
            region.flush_words(1, 6);
            region.fence()?;
            region.word(0).store(LEVEL_MAGIC, Ordering::Release);
            region.flush_words(0, 1);
            region.fence()?;
        } else {
            for (i, w) in want.iter().enumerate() {
                let have = region.word(i).load(Ordering::Acquire);
                if have != *w {
                    return Err(Error::corruption(
                        region.name(),
                        (i * 8) as u64,
                        format!(
                            "level header word {i} is {have:#x}, expected {w:#x} (magic, \
                             version, level, placement bits, fanout, DRAM bits, checksum)"
                        ),
                    ));
                }
            }
        }
        let entries = geo.entries(num);
        let dw = dir_words(geo);
        let mut level = Level {
            num,
            entries,
            geo,
            dir_words: dw,
            bucket_base: LEVEL_HEADER_BYTES / 8 + entries * dw,
            region,
            dram_filters: None,
            checked: version >= LEVEL_VERSION_CHECKED,
            meta_checked: version >= LEVEL_VERSION_META,
            verified: zeroed_words(entries),
            preallocated: std::sync::atomic::AtomicBool::new(false),
        };
        if dram_filters {
            let f = zeroed_words(entries * geo.buckets() * 2);
            for i in 0..entries {
                let meta = level.region.word(level.dir_word(i)).load(Ordering::Relaxed);
                if unpack_meta(meta).1 == 0 {
                    continue;
                }
                for b in 0..geo.buckets() {
                    for w in 0..2 {
                        let v = level.region.word(level.filter_word(i, b) + w);
                        f[(i * geo.buckets() + b) * 2 + w]
                            .store(v.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                }
            }
            level.dram_filters = Some(f);
        }
        Ok(level)
    }

    #[inline]
    fn dir_word(&self, idx: usize) -> usize {
        LEVEL_HEADER_BYTES / 8 + idx * self.dir_words
    }

    #[inline]
    fn filter_word(&self, idx: usize, bucket: usize) -> usize {
        self.dir_word(idx) + 8 + bucket * FILTER_WORDS_PER_BUCKET
    }

    #[inline]
    fn bucket_word(&self, idx: usize, bucket: usize) -> usize {
        self.bucket_base + (idx * self.geo.buckets() + bucket) * BUCKET_WORDS
    }

    /// Allocates the file blocks of entry `idx` (directory word, filters, buckets) before a
    /// migration first stores into them (see [`crate::persist::Persist::reserve`]).
    pub fn reserve_entry(&self, idx: usize) -> Result<()> {
        if self.preallocated.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.region
            .reserve_words(self.dir_word(idx), self.dir_words)?;
        self.region
            .reserve_words(self.bucket_word(idx, 0), self.geo.buckets() * BUCKET_WORDS)
    }

    /// Allocates the file blocks of every entry at once (the chapter's preallocation, option
    /// `preallocate_levels`); later migrations into this level then allocate nothing.
    pub fn reserve_all(&self) -> Result<()> {
        let words = self.region.len_words();
        self.region.reserve_words(0, words)?;
        self.preallocated.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Whether [`Level::reserve_all`] allocated the file.
    pub fn is_preallocated(&self) -> bool {
        self.preallocated.load(Ordering::Relaxed)
    }

    /// Entry `idx`.
    #[inline]
    pub fn entry(&self, idx: usize) -> LevelEntry<'_> {
        LevelEntry { level: self, idx }
    }

    /// Epoch and size of entry `idx`.
    #[inline]
    pub fn meta_of(&self, idx: usize) -> (u64, usize) {
        unpack_meta(self.region.word(self.dir_word(idx)).load(Ordering::Acquire))
    }

    /// Entry `idx`'s packed meta word.
    #[inline]
    pub fn meta_word(&self, idx: usize) -> u64 {
        self.region.word(self.dir_word(idx)).load(Ordering::Acquire)
    }

    /// Bytes of DRAM the filter copy and the record of checked entries take (the latter at
    /// most: its pages are touched only where entries were checked).
    pub fn dram_bytes(&self) -> usize {
        self.dram_filters.as_ref().map_or(0, |f| f.len() * 8) + self.verified.len() * 8
    }

    /// Writes `recs` after the current records of entry `idx` (not yet visible: the size is
    /// unchanged) and flushes them, the filter partitions they touched and the checksum slot
    /// for the meta word `epoch << 16 | new size` that [`Level::publish`] will write. Returns
    /// the new size. In a file of [`LEVEL_VERSION_META`] the slot is written even when `recs`
    /// is empty (a new epoch needs its slot too); a current meta word that no slot vouches
    /// for is corruption (nothing is written then).
    pub fn write_tail(
        &self,
        idx: usize,
        recs: &[(u64, u64)],
        masks: &[[u64; 2]],
        epoch: u64,
    ) -> Result<usize> {
        let meta = self.meta_word(idx);
        let size = unpack_meta(meta).1;
        if recs.is_empty() && !self.meta_checked {
            return Ok(size);
        }
        let dw = self.dir_word(idx);
        let slots = [self.region.word(dw + 1), self.region.word(dw + 2)];
        let tags = slots.map(|s| s.load(Ordering::Relaxed));
        // The crc the new records continue: that of the slot vouching for the current size.
        let old = if size == 0 {
            Some(0)
        } else if self.meta_checked {
            tags.iter()
                .find(|t| slot_matches_meta(**t, meta))
                .map(|t| *t as u32)
        } else {
            tags.iter()
                .find(|t| slot_size(**t) == size)
                .map(|t| *t as u32)
        };
        let old = match old {
            Some(c) => c,
            None if !self.checked => 0,
            None => return Err(self.no_slot(idx, meta, tags)),
        };
        if self.meta_checked && !self.meta_ok(meta, tags) {
            return Err(self.no_slot(idx, meta, tags));
        }
        let e = self.entry(idx);
        let mut pos = size;
        for (i, (k, v)) in recs.iter().enumerate() {
            let (b, j) = (pos / SLOTS_PER_BUCKET, pos % SLOTS_PER_BUCKET);
            e.key(b, j).store(*k, Ordering::Relaxed);
            e.value(b, j).store(*v, Ordering::Relaxed);
            let fw = self.filter_word(idx, b);
            for w in 0..2 {
                set_filter(self.region.word(fw + w), masks[i][w], j == 0);
                if let Some(f) = &self.dram_filters {
                    set_filter(
                        &f[(idx * self.geo.buckets() + b) * 2 + w],
                        masks[i][w],
                        j == 0,
                    );
                }
            }
            pos += 1;
        }
        if self.checked {
            let crc = (size..pos).fold(old, |c, i| {
                let (b, j) = (i / SLOTS_PER_BUCKET, i % SLOTS_PER_BUCKET);
                record_crc(
                    c,
                    e.key(b, j).load(Ordering::Relaxed),
                    e.value(b, j).load(Ordering::Relaxed),
                )
            });
            let new_meta = pack_meta(epoch, pos);
            if self.meta_checked {
                // Into the slot that does not vouch for the current meta word, which stays
                // intact until the meta word moves on: either word a crash leaves has its slot.
                if new_meta != meta {
                    let target = spare_slot(meta, tags);
                    slots[target].store(make_slot(new_meta, crc), Ordering::Relaxed);
                    self.region.flush_words(dw + 1 + target, 1);
                }
            } else {
                // The slot for the new size; the slot tagged with the current size stays
                // intact until the meta word moves on, so either size a crash leaves has its
                // checksum.
                let target = if slot_size(tags[0]) == pos
                    || (slot_size(tags[1]) != pos && slot_size(tags[0]) != size)
                {
                    0
                } else {
                    1
                };
                slots[target].store(((pos as u64) << 32) | crc as u64, Ordering::Relaxed);
                self.region.flush_words(dw + 1 + target, 1);
            }
        }
        if pos > size {
            let (b0, b1) = (size / SLOTS_PER_BUCKET, (pos - 1) / SLOTS_PER_BUCKET);
            self.region
                .flush_words(self.bucket_word(idx, b0), (b1 - b0 + 1) * BUCKET_WORDS);
            self.region.flush_words(
                self.filter_word(idx, b0),
                (b1 - b0 + 1) * FILTER_WORDS_PER_BUCKET,
            );
        }
        Ok(pos)
    }

    /// Before entry `idx` is cleared ([`Level::clear`]): writes and flushes the checksum slot
    /// of its cleared meta word (its epoch, size 0) into the slot that does not vouch for the
    /// current one, so that a cleared entry is told from one whose size word was damaged to
    /// 0. The caller fences this region before the clear. Nothing in older versions.
    pub fn prepare_clear(&self, idx: usize) {
        if !self.meta_checked {
            return;
        }
        let meta = self.meta_word(idx);
        let cleared = pack_meta(unpack_meta(meta).0, 0);
        if cleared == meta {
            return;
        }
        let dw = self.dir_word(idx);
        let tags = [1, 2].map(|w| self.region.word(dw + w).load(Ordering::Relaxed));
        let target = spare_slot(meta, tags);
        self.region
            .word(dw + 1 + target)
            .store(make_slot(cleared, 0), Ordering::Relaxed);
        self.region.flush_words(dw + 1 + target, 1);
    }

    /// Whether a slot vouches for `meta` (both slots given), in a file of
    /// [`LEVEL_VERSION_META`]: a meta word of 0 (an entry never published, or whose first
    /// migration a crash cut short) needs one slot still 0; any other, a slot written for it.
    fn meta_ok(&self, meta: u64, tags: [u64; 2]) -> bool {
        if meta == 0 {
            return tags.contains(&0);
        }
        tags.iter().any(|t| slot_matches_meta(*t, meta))
    }

    fn no_slot(&self, idx: usize, meta: u64, tags: [u64; 2]) -> Error {
        let (epoch, size) = unpack_meta(meta);
        Error::corruption(
            self.region.name(),
            (self.dir_word(idx) * 8) as u64,
            format!(
                "directory entry {idx} of {}: no checksum slot vouches for its meta word \
                 {meta:#x} (epoch {epoch}, size {size}; slots {:#x}, {:#x}): a damaged size or \
                 epoch",
                level_file_name(self.num),
                tags[0],
                tags[1]
            ),
        )
    }

    /// Checks entry `idx`'s meta word `meta` (read by the caller) against its checksum slots,
    /// without hashing its records: cheap enough for every lookup that visits the entry and
    /// for recovery's reading of every level-1 epoch. `Ok(false)`: the entry changed meanwhile
    /// (retry). Files older than [`LEVEL_VERSION_META`] always pass.
    pub fn check_meta(&self, idx: usize, meta: u64) -> Result<bool> {
        if !self.meta_checked || (meta != 0 && self.verified[idx].load(Ordering::Relaxed) == meta) {
            return Ok(true);
        }
        let dw = self.dir_word(idx);
        let tags = [1, 2].map(|w| self.region.word(dw + w).load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        if self.region.word(dw).load(Ordering::Relaxed) != meta {
            return Ok(false);
        }
        if self.meta_ok(meta, tags) {
            Ok(true)
        } else {
            Err(self.no_slot(idx, meta, tags))
        }
    }

    /// Entry `idx`'s epoch once its meta word checks ([`Level::check_meta`]); recovery trusts
    /// nothing else to tell which log entries were migrated.
    pub fn epoch_checked(&self, idx: usize) -> Result<u64> {
        loop {
            let meta = self.meta_word(idx);
            if self.check_meta(idx, meta)? {
                return Ok(unpack_meta(meta).0);
            }
        }
    }

    /// Checks entry `idx`'s records against its checksum slot for the size in `meta` (the
    /// meta word a search read), and its filter words against its records
    /// ([`Level::verify_entry`]), once per meta word: this process remembers the meta word it
    /// last checked. `Ok(false)`: the entry changed meanwhile (retry). Version-3 files check
    /// the filters only; an empty entry checks its meta word ([`Level::check_meta`]).
    pub fn check_entry(&self, idx: usize, meta: u64) -> Result<bool> {
        if self.verified[idx].load(Ordering::Relaxed) == meta {
            return Ok(true);
        }
        self.verify_entry(idx, meta)
    }

    /// [`Level::check_entry`] without the memory of earlier checks: the records are read and
    /// hashed (what `verify` does), and every filter word of the buckets below the size (the
    /// file's, and the DRAM copy's where there is one) must hold the bits of the records below
    /// it. A filter word is always a superset of those bits, at every crash point: a migration
    /// only adds bits to the bucket the size ends in, and overwrites buckets past the size,
    /// before it publishes the size that covers them (`docs/plush.md`, "Filter checks"). So a
    /// missing bit is damage, and it would hide a key from every lookup.
    pub fn verify_entry(&self, idx: usize, meta: u64) -> Result<bool> {
        let size = unpack_meta(meta).1;
        if size == 0 {
            if !self.meta_checked {
                return Ok(true);
            }
            self.verified[idx].store(0, Ordering::Relaxed);
            return self.check_meta(idx, meta);
        }
        let dw = self.dir_word(idx);
        let cap = self.geo.entry_capacity();
        let n = size.min(cap);
        let tags = [1, 2].map(|w| self.region.word(dw + w).load(Ordering::Relaxed));
        let e = self.entry(idx);
        let mut crc = 0u32;
        // The first filter word lacking bits: (bucket, word, missing bits, in the DRAM copy).
        let mut lacking: Option<(usize, usize, u64, bool)> = None;
        for b in 0..n.div_ceil(SLOTS_PER_BUCKET) {
            let mut need = [0u64; 2];
            for j in 0..SLOTS_PER_BUCKET.min(n - b * SLOTS_PER_BUCKET) {
                let k = e.key(b, j).load(Ordering::Relaxed);
                if self.checked {
                    crc = record_crc(crc, k, e.value(b, j).load(Ordering::Relaxed));
                }
                let m = filter_mask(hash_key(k));
                need = [need[0] | m[0], need[1] | m[1]];
            }
            if lacking.is_some() {
                continue;
            }
            let fw = self.filter_word(idx, b);
            for (w, need) in need.iter().enumerate() {
                let file = self.region.word(fw + w).load(Ordering::Relaxed);
                let copy = self.dram_filters.as_ref().map_or(file, |f| {
                    f[(idx * self.geo.buckets() + b) * 2 + w].load(Ordering::Relaxed)
                });
                if lacking_bits(*need, file) != 0 {
                    lacking = Some((b, w, lacking_bits(*need, file), false));
                } else if lacking_bits(*need, copy) != 0 {
                    lacking = Some((b, w, lacking_bits(*need, copy), true));
                } else {
                    continue;
                }
                break;
            }
        }
        fence(Ordering::Acquire);
        if self.region.word(dw).load(Ordering::Relaxed) != meta {
            return Ok(false);
        }
        let offset = (dw * 8) as u64;
        if self.checked {
            let slot = if self.meta_checked {
                tags.iter().find(|t| slot_matches_meta(**t, meta))
            } else {
                tags.iter().find(|t| slot_size(**t) == size)
            };
            match slot {
                Some(t) if *t as u32 == crc && size <= cap => {}
                Some(t) => {
                    return Err(Error::corruption(
                        self.region.name(),
                        offset,
                        format!(
                            "directory entry {idx} of {}: its {size} records have crc32c \
                             {crc:#010x}, the entry's checksum slot says {:#010x}",
                            level_file_name(self.num),
                            *t as u32
                        ),
                    ))
                }
                None if self.meta_checked => return Err(self.no_slot(idx, meta, tags)),
                None => {
                    return Err(Error::corruption(
                        self.region.name(),
                        offset,
                        format!(
                            "directory entry {idx} of {}: no checksum slot is tagged with its \
                             size {size} (slots {:#x}, {:#x})",
                            level_file_name(self.num),
                            tags[0],
                            tags[1]
                        ),
                    ))
                }
            }
        }
        if let Some((b, w, missing, copy)) = lacking {
            let which = if copy {
                "its DRAM copy of filter word"
            } else {
                "filter word"
            };
            return Err(Error::corruption(
                self.region.name(),
                self.filter_offset(idx, b, w),
                format!(
                    "directory entry {idx} of {}, bucket {b}: {which} {w} lacks bits \
                     {missing:#018x} that the bucket's records set (a damaged filter, which \
                     would hide their keys from lookups)",
                    level_file_name(self.num)
                ),
            ));
        }
        self.verified[idx].store(meta, Ordering::Relaxed);
        Ok(true)
    }

    /// Byte offset in the file of entry `idx`'s directory entry (its meta word).
    pub fn dir_offset(&self, idx: usize) -> u64 {
        (self.dir_word(idx) * 8) as u64
    }

    /// Byte offset in the file of word `word` (0 or 1) of bucket `bucket`'s filter in entry
    /// `idx`.
    pub fn filter_offset(&self, idx: usize, bucket: usize, word: usize) -> u64 {
        ((self.filter_word(idx, bucket) + word) * 8) as u64
    }

    /// Byte offset in the file of the key of record `record` of entry `idx`.
    pub fn key_offset(&self, idx: usize, record: usize) -> u64 {
        let (b, j) = (record / SLOTS_PER_BUCKET, record % SLOTS_PER_BUCKET);
        ((self.bucket_word(idx, b) + j) * 8) as u64
    }

    /// Publishes entry `idx`'s new size and epoch (flushed; the caller fences).
    pub fn publish(&self, idx: usize, epoch: u64, size: usize) {
        let w = self.dir_word(idx);
        self.verified[idx].store(0, Ordering::Relaxed);
        self.region
            .word(w)
            .store(pack_meta(epoch, size), Ordering::Release);
        self.region.flush_words(w, 1);
        // Again after: a check that read the old meta word may have stored it meanwhile.
        self.verified[idx].store(0, Ordering::Relaxed);
    }

    /// Empties entry `idx` after its records reached the next level: size 0, epoch kept
    /// (flushed; the caller fences). One word: the filters stay, since a bucket's partition is
    /// reset when its first record is written and lookups never read past the size.
    pub fn clear(&self, idx: usize) {
        let w = self.dir_word(idx);
        let (epoch, _) = self.meta_of(idx);
        self.verified[idx].store(0, Ordering::Relaxed);
        self.region
            .word(w)
            .store(pack_meta(epoch, 0), Ordering::Release);
        self.region.flush_words(w, 1);
        self.verified[idx].store(0, Ordering::Relaxed);
    }
}

/// The size a checksum slot is tagged with (version 4).
#[inline]
fn slot_size(slot: u64) -> usize {
    (slot >> 32) as usize
}

/// The 16 bits of a meta word's check a version-5 slot carries: bit 15 set (so that no slot
/// is ever 0, which marks an unwritten slot), bits 0–14 the low bits of the crc32c of its 8
/// little-endian bytes (every error of up to two bits changes them; test
/// `meta_check_catches_every_one_and_two_bit_error`).
#[inline]
fn meta_check(meta: u64) -> u64 {
    0x8000 | (crc32c::crc32c(&meta.to_le_bytes()) & 0x7fff) as u64
}

/// A version-5 checksum slot for meta word `meta` and records crc `crc`.
#[inline]
fn make_slot(meta: u64, crc: u32) -> u64 {
    (unpack_meta(meta).1 as u64) << 48 | meta_check(meta) << 32 | crc as u64
}

/// Which of slots `tags` a migration may overwrite while meta word `meta` is current: the one
/// that does not vouch for it (for a meta word of 0, the one that is not 0, so that a zero
/// slot keeps vouching for it).
#[inline]
fn spare_slot(meta: u64, tags: [u64; 2]) -> usize {
    if meta == 0 {
        usize::from(tags[0] == 0)
    } else {
        usize::from(slot_matches_meta(tags[0], meta))
    }
}

/// Whether version-5 slot `slot` was written for meta word `meta`.
#[inline]
fn slot_matches_meta(slot: u64, meta: u64) -> bool {
    slot >> 48 == unpack_meta(meta).1 as u64 && (slot >> 32) & 0xffff == meta_check(meta)
}

/// The bits of `need` (what a bucket's records below the size set in one filter word) that
/// filter word `word` lacks: anything but 0 is damage, since at every crash point the word
/// holds at least those bits (it may hold more).
#[inline]
fn lacking_bits(need: u64, word: u64) -> u64 {
    need & !word
}

/// Continues crc32c `crc` over one record (key, then value, little-endian).
#[inline]
fn record_crc(crc: u32, key: u64, value: u64) -> u32 {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&key.to_le_bytes());
    b[8..].copy_from_slice(&value.to_le_bytes());
    crc32c::crc32c_append(crc, &b)
}

/// Adds `mask` to a filter word, or replaces the word when the bucket is being started (its
/// old bits belong to records that were migrated away).
#[inline]
fn set_filter(word: &AtomicU64, mask: u64, fresh_bucket: bool) {
    if fresh_bucket {
        word.store(mask, Ordering::Relaxed);
    } else {
        word.fetch_or(mask, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The version-5 worked example of `docs/formats/plush.md`.
    #[test]
    fn the_format_doc_slot_example_encodes_as_written() {
        let mut crc = record_crc(0, 1, 8);
        assert_eq!(crc, 0xF247_93CE);
        crc = record_crc(crc, 2, 15);
        assert_eq!(crc, 0x2E82_33F7);
        assert_eq!(make_slot(pack_meta(3, 2), crc), 0x0002_831E_2E82_33F7);
    }

    /// The filter-check example of `docs/formats/plush.md`.
    #[test]
    fn the_format_doc_filter_example_checks_as_written() {
        let [a, b] = [1u64, 2].map(|k| filter_mask(hash_key(k)));
        assert_eq!(a, [1 << 6, 1 << 48 | 1 << 57]);
        assert_eq!(b, [1 << 35, 1 << 49 | 1 << 57]);
        let need = [a[0] | b[0], a[1] | b[1]];
        assert_eq!(need, [0x0000_0008_0000_0040, 0x0203_0000_0000_0000]);
        // More bits (a crash's) pass; a cleared one fails and names it.
        assert_eq!(lacking_bits(need[0], need[0] | 1 << 20), 0);
        assert_eq!(lacking_bits(need[1], need[1] | 1), 0);
        assert_eq!(lacking_bits(need[0], 0x40), 1 << 35);
        assert_eq!(lacking_bits(need[1], 0), need[1]);
    }

    /// A damaged meta word must not find a slot written for the original: every one- and
    /// two-bit error of a meta word changes its check bits (the crc is linear, so this holds
    /// for every meta word once it holds for one).
    #[test]
    fn meta_check_catches_every_one_and_two_bit_error() {
        for meta in [pack_meta(1, 4), pack_meta(12_345, 0), pack_meta(7, 256)] {
            let slot = make_slot(meta, 0xdead_beef);
            assert!(slot_matches_meta(slot, meta));
            for i in 0..64 {
                assert!(!slot_matches_meta(slot, meta ^ 1 << i), "bit {i}");
                for j in 0..i {
                    let bad = meta ^ 1 << i ^ 1 << j;
                    assert!(!slot_matches_meta(slot, bad), "bits {i}, {j}");
                }
            }
        }
    }
}
