//! The embedding store: N tables on disk behind one or two in-memory cache tiers (EVMix).
//!
//! A lookup takes a batch of requests, each one key per table, and fills `[batch, N, dim]` fp32
//! values. Per request, the store runs the grouped-request protocol of [`crate::policy`]:
//! `aggHit` counts the keys found in memory (L1 or L2) before any update; hit values are decoded
//! first; then misses are read from the table files with `pread` and inserted.
//!
//! Tiers are exclusive (a key is in at most one): with two tiers, misses enter L1, L1 evictions
//! are re-encoded into L2 (demotion, keeping their group score), an L2 hit is moved back to L1
//! (promotion), and L2 evictions leave memory. So L1 holds the keys that are hit or inserted
//! with high group scores, L2 the ones L1 let go, at lower precision.
//!
//! EVProx (L3, optional, [`crate::prox`]): with `l3_share > 0` and a table's surrogate mapping
//! set ([`EmbedStore::set_surrogates`]), a key missing from L1 and L2 whose mapping is in L3 and
//! whose surrogate is resident is served with the surrogate's row (an *approximate* hit: no disk
//! read, no insertion, no policy update). Keys that leave memory queue their mapping into L3,
//! applied after each lookup call. aggHit counts L1 and L2 only, so group scores and the policy
//! see the same requests with L3 on or off.
//!
//! The whole batch is validated (table count, key ranges) before any state changes, so an error
//! leaves the cache and the statistics untouched. Thread-safety: `&mut self` for lookups (the
//! Python binding holds it under a mutex with the GIL released).

use std::path::{Path, PathBuf};

use crate::codec::Precision;
use crate::error::{EmbedError, Result};
use crate::kvtable::KvTables;
use crate::policy::{tag, Policy, PolicyKind, MAX_ROW};
use crate::prox::{ProxCache, ENTRY_BYTES};
use crate::table::TableFile;
use std::collections::HashMap;

/// Where a store's rows live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backend {
    /// One flat file per table (`<dir>/<name>.emb`), rows read with `pread`.
    #[default]
    File,
    /// One Attune-DB (`attune-kv`) database at `<dir>` holding every table; a request's misses
    /// read with one `multi_get`.
    Kv,
}

impl Backend {
    /// Parses `file` or `kv`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "file" => Ok(Backend::File),
            "kv" => Ok(Backend::Kv),
            _ => Err(EmbedError::InvalidArgument(format!(
                "unknown backend `{s}`; use file or kv"
            ))),
        }
    }

    /// `file` or `kv`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::File => "file",
            Backend::Kv => "kv",
        }
    }
}

/// The tables of an open store, on one back end.
enum Source {
    File(Vec<TableFile>),
    Kv(KvTables),
}

impl Source {
    /// Reads row `keys[t]` of table `t` into `out[t·dim..]` for every `t` in `miss`.
    fn read_request(
        &mut self,
        keys: &[u64],
        miss: &[usize],
        dim: usize,
        out: &mut [f32],
        io: &mut Vec<u8>,
    ) -> Result<()> {
        match self {
            Source::File(files) => {
                for &t in miss {
                    files[t].read_row(keys[t], &mut out[t * dim..(t + 1) * dim], io)?;
                }
                Ok(())
            }
            Source::Kv(kv) => kv.read_request(keys, miss, out),
        }
    }
}

/// Loads table `name` (row-major `rows × dim` values) into the store at `dir` on `backend`,
/// atomically replacing any previous version.
pub fn load_table(
    dir: &Path,
    backend: Backend,
    name: &str,
    dim: usize,
    values: &[f32],
) -> Result<()> {
    match backend {
        Backend::File => TableFile::write(dir, name, dim, values),
        Backend::Kv => crate::kvtable::write(dir, name, dim, values),
    }
}

/// Opens table `name` of the store at `dir` on `backend`, re-reads it whole and checks its
/// checksum; returns `(rows, dim)`.
pub fn verify_table(dir: &Path, backend: Backend, name: &str) -> Result<(u64, usize)> {
    match backend {
        Backend::File => {
            let t = TableFile::open(dir, name)?;
            t.verify()?;
            Ok((t.rows(), t.dim()))
        }
        Backend::Kv => crate::kvtable::verify_table(dir, name),
    }
}

/// Names of the tables of the store at `dir` on `backend`, sorted.
pub fn list_tables_on(dir: &Path, backend: Backend) -> Result<Vec<String>> {
    match backend {
        Backend::File => list_tables(dir),
        Backend::Kv => crate::kvtable::list_tables(dir),
    }
}

type SlotMap = HashMap<u64, u32, foldhash::fast::FixedState>;

/// Options of [`EmbedStore::open`].
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Memory for cached rows, in bytes, over all tiers (encoded sizes). 0 caches nothing.
    pub cache_bytes: u64,
    /// Replacement policy (the same in every tier).
    pub policy: String,
    /// Precision of L1, then optionally of L2 (bits: 32, 16, 8 or 4). Default `[32]`.
    pub precisions: Vec<u32>,
    /// Share of `cache_bytes` given to L1 when there are two tiers. Default 0.5 (the source's
    /// best mix, 50/50).
    pub l1_share: f64,
    /// Share of `cache_bytes` given to EVProx's L3 key → surrogate map, in [0, 0.5]. Default 0
    /// (off); the source's best is 0.04 and bounds it by 0.05.
    pub l3_share: f64,
    /// Where the rows live. Default [`Backend::File`].
    pub backend: Backend,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cache_bytes: 0,
            policy: "ev-lfu".into(),
            precisions: vec![32],
            l1_share: 0.5,
            l3_share: 0.0,
            backend: Backend::File,
        }
    }
}

/// Counters of a store since it was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmbedStats {
    /// Requests served.
    pub requests: u64,
    /// Keys looked up (requests × tables).
    pub keys: u64,
    /// Keys found in L1.
    pub l1_hits: u64,
    /// Keys found in L2.
    pub l2_hits: u64,
    /// Keys read from the table files (not found in L1 or L2 nor served by a surrogate).
    pub misses: u64,
    /// Requests whose every key was in L1.
    pub perfect_l1: u64,
    /// Requests whose every key was in memory (L1 or L2).
    pub perfect: u64,
    /// Values clipped to [−1, 1] by a lower-precision codec.
    pub clipped: u64,
    /// Rows demoted from L1 to L2.
    pub demotions: u64,
    /// Rows promoted from L2 to L1.
    pub promotions: u64,
    /// Keys served with a resident surrogate's row (EVProx).
    pub l3_hits: u64,
    /// Requests whose every key was served from memory, surrogates included.
    pub perfect_approx: u64,
    /// Mappings inserted into L3.
    pub l3_inserts: u64,
}

/// One cache tier: a policy plus encoded rows in fixed slots.
struct Tier {
    precision: Precision,
    policy: Box<dyn Policy>,
    row_bytes: usize,
    slots: SlotMap,
    free: Vec<u32>,
    data: Vec<u8>,
}

impl Tier {
    fn new(kind: &PolicyKind, precision: Precision, bytes: u64, dim: usize) -> Self {
        let row_bytes = precision.row_bytes(dim);
        let cap = (bytes / row_bytes as u64) as usize;
        Tier {
            precision,
            policy: kind.build_for(cap, row_bytes),
            row_bytes,
            slots: SlotMap::with_hasher(foldhash::fast::FixedState::with_seed(0x51075)),
            free: Vec::new(),
            data: Vec::new(),
        }
    }

    fn row(&self, key: u64) -> Option<&[u8]> {
        let &s = self.slots.get(&key)?;
        Some(self.slot_row(s))
    }

    #[inline]
    fn slot_row(&self, s: u32) -> &[u8] {
        let at = s as usize * self.row_bytes;
        &self.data[at..at + self.row_bytes]
    }

    fn release(&mut self, key: u64) {
        if let Some(s) = self.slots.remove(&key) {
            self.free.push(s);
        }
    }

    /// Stores `values` for `key` (which the policy has just admitted); returns clipped count.
    fn store(&mut self, key: u64, values: &[f32]) -> u32 {
        let s = match self.free.pop() {
            Some(s) => s,
            None => {
                let s = (self.data.len() / self.row_bytes) as u32;
                self.data.resize(self.data.len() + self.row_bytes, 0);
                s
            }
        };
        self.slots.insert(key, s);
        let at = s as usize * self.row_bytes;
        self.precision
            .encode(values, &mut self.data[at..at + self.row_bytes])
    }
}

/// N embedding tables of one dimension, cached in memory.
pub struct EmbedStore {
    dir: PathBuf,
    names: Vec<String>,
    source: Source,
    backend: Backend,
    /// Rows of each table.
    table_rows: Vec<u64>,
    dim: usize,
    l1: Tier,
    l2: Option<Tier>,
    policy: PolicyKind,
    stats: EmbedStats,
    l3: ProxCache,
    /// Per table: the offline surrogate of each row ([`NO_SURROGATE`] for none), if set.
    surrogates: Vec<Option<Vec<u64>>>,
    // Scratch, kept to avoid per-request allocation.
    hits: Vec<(u8, u32)>,
    evicted: Vec<(u64, u32)>,
    evicted2: Vec<(u64, u32)>,
    row: Vec<f32>,
    io: Vec<u8>,
    miss: Vec<usize>,
}

const MISS: u8 = 0;
const IN_L1: u8 = 1;
const IN_L2: u8 = 2;
const PROX_L1: u8 = 3;
const PROX_L2: u8 = 4;

/// A row without a surrogate in [`EmbedStore::set_surrogates`]'s mapping.
pub const NO_SURROGATE: u64 = u64::MAX;

impl EmbedStore {
    /// Opens tables `names` (in lookup order) in `dir`. Every table must exist and share one
    /// dimension.
    pub fn open(dir: &Path, names: &[String], opts: &StoreOptions) -> Result<Self> {
        if names.is_empty() {
            return Err(EmbedError::InvalidArgument(
                "a store needs at least one table".into(),
            ));
        }
        if names.len() > (1 << 23) {
            return Err(EmbedError::InvalidArgument("too many tables".into()));
        }
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(EmbedError::InvalidArgument(format!(
                    "table `{n}` is listed twice"
                )));
            }
        }
        let (source, dims_rows): (Source, Vec<(usize, u64)>) = match opts.backend {
            Backend::File => {
                let mut tables = Vec::with_capacity(names.len());
                for n in names {
                    let path = dir.join(crate::table::file_name(n));
                    if crate::table::check_name(n).is_ok() && !path.exists() {
                        return Err(EmbedError::UnknownTable {
                            name: n.clone(),
                            known: list_tables(dir).unwrap_or_default().join(", "),
                        });
                    }
                    tables.push(TableFile::open(dir, n)?);
                }
                let dr = tables.iter().map(|t| (t.dim(), t.rows())).collect();
                (Source::File(tables), dr)
            }
            Backend::Kv => {
                let kv = KvTables::open(dir, names)?;
                let dr = kv.metas().iter().map(|m| (m.dim, m.rows)).collect();
                (Source::Kv(kv), dr)
            }
        };
        for (n, &(_, rows)) in names.iter().zip(&dims_rows) {
            if rows > MAX_ROW + 1 {
                return Err(EmbedError::InvalidArgument(format!(
                    "table `{n}` has {rows} rows; at most 2^40 are supported"
                )));
            }
        }
        let dim = dims_rows[0].0;
        if let Some((i, &(d, _))) = dims_rows.iter().enumerate().find(|(_, t)| t.0 != dim) {
            return Err(EmbedError::InvalidArgument(format!(
                "table `{}` has dim {d} but `{}` has dim {dim}; a store's tables share one dim",
                names[i], names[0]
            )));
        }
        let policy = PolicyKind::parse(&opts.policy, names.len())?;
        let precs: Vec<Precision> = opts
            .precisions
            .iter()
            .map(|&b| {
                Precision::from_bits(b).ok_or_else(|| {
                    EmbedError::InvalidArgument(format!(
                        "precision {b} bits is not one of 32, 16, 8, 4"
                    ))
                })
            })
            .collect::<Result<_>>()?;
        if precs.is_empty() || precs.len() > 2 {
            return Err(EmbedError::InvalidArgument(format!(
                "precisions must list 1 or 2 tiers, got {}",
                precs.len()
            )));
        }
        if !(opts.l1_share.is_finite() && opts.l1_share > 0.0 && opts.l1_share <= 1.0) {
            return Err(EmbedError::InvalidArgument(format!(
                "l1_share {} must be in (0, 1]",
                opts.l1_share
            )));
        }
        if !(opts.l3_share.is_finite() && (0.0..=0.5).contains(&opts.l3_share)) {
            return Err(EmbedError::InvalidArgument(format!(
                "l3_share {} must be in [0, 0.5]",
                opts.l3_share
            )));
        }
        let l3_bytes = (opts.cache_bytes as f64 * opts.l3_share) as u64;
        let rows_bytes = opts.cache_bytes - l3_bytes;
        let (l1_bytes, l2_bytes) = if precs.len() == 2 {
            let l1 = (rows_bytes as f64 * opts.l1_share) as u64;
            (l1, rows_bytes - l1)
        } else {
            (rows_bytes, 0)
        };
        let l1 = Tier::new(&policy, precs[0], l1_bytes, dim);
        let l2 = precs.get(1).map(|&p| Tier::new(&policy, p, l2_bytes, dim));
        Ok(EmbedStore {
            dir: dir.to_path_buf(),
            names: names.to_vec(),
            source,
            backend: opts.backend,
            table_rows: dims_rows.iter().map(|&(_, r)| r).collect(),
            dim,
            l1,
            l2,
            policy,
            stats: EmbedStats::default(),
            l3: ProxCache::new((l3_bytes / ENTRY_BYTES) as usize),
            surrogates: vec![None; names.len()],
            hits: vec![(MISS, 0); names.len()],
            evicted: Vec::new(),
            evicted2: Vec::new(),
            row: vec![0.0; dim],
            io: Vec::new(),
            miss: Vec::with_capacity(names.len()),
        })
    }

    /// Values per row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The table names, in lookup order.
    pub fn tables(&self) -> &[String] {
        &self.names
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Rows of each table.
    pub fn rows(&self) -> Vec<u64> {
        self.table_rows.clone()
    }

    /// The back end the rows are read from.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Advises the kernel to drop the cached pages of the flat files (`POSIX_FADV_DONTNEED`),
    /// so the reads that follow measure the device. The kv back end's files are dropped by the
    /// caller (the database's directory). Best effort.
    pub fn drop_page_cache(&self) {
        if let Source::File(files) = &self.source {
            for f in files {
                f.drop_page_cache();
            }
        }
    }

    /// The policy's name.
    pub fn policy(&self) -> String {
        self.policy.to_string()
    }

    /// Capacity in rows of L1 and L2.
    pub fn capacities(&self) -> (usize, usize) {
        (
            self.l1.policy.capacity(),
            self.l2.as_ref().map_or(0, |t| t.policy.capacity()),
        )
    }

    /// Counters since open.
    pub fn stats(&self) -> EmbedStats {
        let mut st = self.stats.clone();
        st.l3_inserts = self.l3.inserts;
        st
    }

    /// Capacity of EVProx's L3 in mappings (0: off).
    pub fn l3_capacity(&self) -> usize {
        self.l3.capacity()
    }

    /// Sets table `table`'s offline surrogate mapping: `map[k]` is the surrogate row of row `k`
    /// (same table), or [`NO_SURROGATE`]. Replaces the previous mapping (a remap); mappings
    /// already cached in L3 stay until evicted.
    pub fn set_surrogates(&mut self, table: usize, map: Vec<u64>) -> Result<()> {
        let Some(&rows) = self.table_rows.get(table) else {
            return Err(EmbedError::InvalidArgument(format!(
                "table index {table} out of range (the store has {} tables)",
                self.table_rows.len()
            )));
        };
        if map.len() as u64 != rows {
            return Err(EmbedError::InvalidArgument(format!(
                "surrogates of table `{}` must hold one entry per row ({rows}), got {}",
                self.names[table],
                map.len()
            )));
        }
        if let Some((k, &s)) = map
            .iter()
            .enumerate()
            .find(|(_, &s)| s != NO_SURROGATE && s >= rows)
        {
            return Err(EmbedError::KeyOutOfRange {
                table: self.names[table].clone(),
                key: s,
                rows,
                request: k,
            });
        }
        self.surrogates[table] = Some(map);
        Ok(())
    }

    /// Queues the mapping of `key` (tagged), which just left memory, into L3.
    fn left_memory(&mut self, key: u64) {
        if self.l3.capacity() == 0 {
            return;
        }
        let (t, k) = ((key >> 40) as usize, key & MAX_ROW);
        if let Some(Some(map)) = self.surrogates.get(t) {
            if let Some(&s) = map.get(k as usize) {
                if s != NO_SURROGATE {
                    self.l3.queue(key, tag(t, s));
                }
            }
        }
    }

    /// Checks a batch of `keys` (`batch × N`, row-major) without changing anything.
    pub fn validate(&self, keys: &[u64]) -> Result<()> {
        let n = self.table_rows.len();
        if !keys.len().is_multiple_of(n) {
            return Err(EmbedError::InvalidArgument(format!(
                "a batch must hold {n} keys per request (one per table); got {} keys",
                keys.len()
            )));
        }
        for (r, req) in keys.chunks_exact(n).enumerate() {
            for (t, (&rows, &k)) in self.table_rows.iter().zip(req).enumerate() {
                if k >= rows {
                    return Err(EmbedError::KeyOutOfRange {
                        table: self.names[t].clone(),
                        key: k,
                        rows,
                        request: r,
                    });
                }
            }
        }
        Ok(())
    }

    /// Looks up a batch: `keys` is `batch × N` row-major, `out` receives `batch × N × dim`
    /// values.
    pub fn lookup(&mut self, keys: &[u64], out: &mut [f32]) -> Result<()> {
        self.validate(keys)?;
        let n = self.table_rows.len();
        if out.len() != keys.len() * self.dim {
            return Err(EmbedError::InvalidArgument(format!(
                "output holds {} values, the batch needs {}",
                out.len(),
                keys.len() * self.dim
            )));
        }
        for (req, o) in keys.chunks_exact(n).zip(out.chunks_exact_mut(n * self.dim)) {
            self.request(req, o)?;
        }
        // EVProx's insertions, batched after the lookups that caused them.
        self.l3.apply_pending();
        Ok(())
    }

    fn request(&mut self, keys: &[u64], out: &mut [f32]) -> Result<()> {
        let dim = self.dim;
        let mut agg = 0u32;
        let mut in_l1 = 0usize;
        // One probe per key: a tier's slot map holds exactly its policy's resident keys, so the
        // slot found here both decides the hit and locates the row.
        for (t, &k) in keys.iter().enumerate() {
            let key = tag(t, k);
            self.hits[t] = if let Some(&s) = self.l1.slots.get(&key) {
                in_l1 += 1;
                (IN_L1, s)
            } else if let Some(&s) = self.l2.as_ref().and_then(|l2| l2.slots.get(&key)) {
                (IN_L2, s)
            } else {
                (MISS, 0)
            };
            agg += u32::from(self.hits[t].0 != MISS);
        }
        let mut approx = 0usize;
        if self.l3.capacity() > 0 && (agg as usize) < keys.len() {
            for (t, &k) in keys.iter().enumerate() {
                if self.hits[t].0 != MISS {
                    continue;
                }
                let Some(sur) = self.l3.get(tag(t, k)) else {
                    continue;
                };
                if let Some(&s) = self.l1.slots.get(&sur) {
                    self.hits[t] = (PROX_L1, s);
                } else if let Some(&s) = self.l2.as_ref().and_then(|l2| l2.slots.get(&sur)) {
                    self.hits[t] = (PROX_L2, s);
                } else {
                    continue;
                }
                approx += 1;
            }
        }
        let st = &mut self.stats;
        st.requests += 1;
        st.keys += keys.len() as u64;
        st.l1_hits += in_l1 as u64;
        st.l2_hits += (agg as usize - in_l1) as u64;
        st.misses += (keys.len() - agg as usize - approx) as u64;
        st.perfect_l1 += u64::from(in_l1 == keys.len());
        st.perfect += u64::from(agg as usize == keys.len());
        st.l3_hits += approx as u64;
        st.perfect_approx += u64::from(agg as usize + approx == keys.len());

        // Hits: decode, then update. No insertion has happened yet in this request, so the
        // slots found above are current.
        for (t, &k) in keys.iter().enumerate() {
            let (w, slot) = self.hits[t];
            if w == MISS {
                continue;
            }
            let key = tag(t, k);
            let o = &mut out[t * dim..(t + 1) * dim];
            if w == PROX_L1 {
                self.l1.precision.decode(self.l1.slot_row(slot), o);
            } else if w == PROX_L2 {
                if let Some(l2) = self.l2.as_ref() {
                    l2.precision.decode(l2.slot_row(slot), o);
                }
            } else if w == IN_L1 {
                self.l1.precision.decode(self.l1.slot_row(slot), o);
                self.l1.policy.on_hit(key, agg);
            } else if let Some(l2) = self.l2.as_mut() {
                l2.precision.decode(l2.slot_row(slot), o);
                l2.policy.remove(key);
                l2.release(key);
                self.stats.promotions += 1;
                // Promotion is an insertion into L1 (below, with the misses).
            }
        }
        if in_l1 + approx == keys.len() {
            return Ok(());
        }
        // Misses: read together (one multi_get on the kv back end), before any insertion.
        self.miss.clear();
        self.miss
            .extend((0..keys.len()).filter(|&t| self.hits[t].0 == MISS));
        if !self.miss.is_empty() {
            self.source
                .read_request(keys, &self.miss, dim, out, &mut self.io)?;
        }
        // Misses and promotions: insert into L1, demote L1's evictions.
        for (t, &k) in keys.iter().enumerate() {
            if matches!(self.hits[t].0, IN_L1 | PROX_L1 | PROX_L2) {
                continue;
            }
            let key = tag(t, k);
            let o = &mut out[t * dim..(t + 1) * dim];
            self.evicted.clear();
            self.l1.policy.on_miss(key, agg, &mut self.evicted);
            for i in 0..self.evicted.len() {
                let (v, score) = self.evicted[i];
                self.demote(v, score);
            }
            if self.l1.policy.contains(key) {
                self.stats.clipped += u64::from(self.l1.store(key, o));
            } else if let Some(l2) = self.l2.as_mut() {
                // L1 holds nothing (capacity 0): the row goes straight to L2.
                self.evicted2.clear();
                l2.policy.on_miss(key, agg, &mut self.evicted2);
                for &(v, _) in &self.evicted2 {
                    l2.release(v);
                }
                if l2.policy.contains(key) {
                    self.stats.clipped += u64::from(l2.store(key, o));
                }
                for i in 0..self.evicted2.len() {
                    self.left_memory(self.evicted2[i].0);
                }
            }
        }
        Ok(())
    }

    /// Moves L1's evicted `key` (group score `score` when it left) into L2, or drops it
    /// without an L2.
    fn demote(&mut self, key: u64, score: u32) {
        let Some(l2) = self.l2.as_mut() else {
            self.l1.release(key);
            self.left_memory(key);
            return;
        };
        if let Some(r) = self.l1.row(key) {
            self.l1.precision.decode(r, &mut self.row);
        }
        self.l1.release(key);
        self.evicted2.clear();
        l2.policy.on_miss(key, score, &mut self.evicted2);
        for &(v, _) in &self.evicted2 {
            l2.release(v);
        }
        if l2.policy.contains(key) {
            self.stats.clipped += u64::from(l2.store(key, &self.row));
            self.stats.demotions += 1;
        } else {
            self.left_memory(key);
        }
        for i in 0..self.evicted2.len() {
            self.left_memory(self.evicted2[i].0);
        }
    }
}

/// Names of the tables in `dir` (files `<name>.emb`), sorted.
pub fn list_tables(dir: &Path) -> Result<Vec<String>> {
    let rd = std::fs::read_dir(dir).map_err(crate::error::io_err(dir))?;
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let f = e.file_name().into_string().ok()?;
            let n = f.strip_suffix(".emb")?;
            (!n.starts_with('.')).then(|| n.to_string())
        })
        .collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(t: usize, k: u64, j: usize) -> f32 {
        ((t * 1000 + k as usize * 10 + j) % 97) as f32 / 97.0 - 0.5
    }

    const BACKENDS: [Backend; 2] = [Backend::File, Backend::Kv];

    fn make(dir: &Path, b: Backend, tables: usize, rows: u64, dim: usize) -> Vec<String> {
        (0..tables)
            .map(|t| {
                let name = format!("C{}", t + 1);
                let v: Vec<f32> = (0..rows)
                    .flat_map(|k| (0..dim).map(move |j| value(t, k, j)))
                    .collect();
                load_table(dir, b, &name, dim, &v).unwrap();
                name
            })
            .collect()
    }

    fn opts(b: Backend, cache_bytes: u64, policy: &str, precisions: Vec<u32>) -> StoreOptions {
        StoreOptions {
            backend: b,
            cache_bytes,
            policy: policy.into(),
            precisions,
            l1_share: 0.5,
            l3_share: 0.0,
        }
    }

    #[test]
    fn lookups_return_the_rows_at_every_policy_and_precision() {
        for b in BACKENDS {
            let d = tempfile::tempdir().unwrap();
            let names = make(d.path(), b, 3, 50, 4);
            for policy in [
                "lru", "lfu", "clock", "arc", "car", "lirs", "lecar", "ev-lfu", "ev-arc", "ev-car",
            ] {
                for (precs, tol) in [
                    (vec![32], 0.0),
                    (vec![16], 1e-4),
                    (vec![8], 5e-3),
                    (vec![8, 4], 0.26),
                ] {
                    let mut s = EmbedStore::open(
                        d.path(),
                        &names,
                        &opts(b, 40 * 16, policy, precs.clone()),
                    )
                    .unwrap();
                    let mut out = vec![0f32; 2 * 3 * 4];
                    for i in 0..300u64 {
                        let keys = [i % 50, (i * 7) % 50, (i * i) % 50, (i + 1) % 50, 3, 4];
                        s.lookup(&keys, &mut out).unwrap();
                        for (n, &k) in keys.iter().enumerate() {
                            for j in 0..4 {
                                let want = value(n % 3, k, j);
                                let got = out[n * 4 + j];
                                assert!((want - got).abs() <= tol, "{policy} {precs:?}");
                            }
                        }
                    }
                    let st = s.stats();
                    assert_eq!(st.requests, 600);
                    assert_eq!(st.l1_hits + st.l2_hits + st.misses, st.keys);
                    assert!(st.l1_hits > 0, "{policy} {precs:?} {st:?}");
                    if precs.len() == 2 {
                        assert!(st.demotions > 0 && st.l2_hits > 0, "{policy} {st:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn store_hits_equal_the_simulator_for_every_policy() {
        for b in BACKENDS {
            let d = tempfile::tempdir().unwrap();
            let names = make(d.path(), b, 3, 60, 2);
            for name in crate::policy::POLICY_NAMES.split(", ") {
                let kind = PolicyKind::parse(name, 3).unwrap();
                let mut s =
                    EmbedStore::open(d.path(), &names, &opts(b, 25 * 8, name, vec![32])).unwrap();
                let mut sim = crate::GroupSim::with_row_bytes(&kind, 25, 8);
                let mut out = vec![0f32; 6];
                let mut x = 99u64;
                for _ in 0..3000 {
                    let mut keys = [0u64; 3];
                    for k in keys.iter_mut() {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        // Skewed: squares of uniform draws favour small keys.
                        let u = (x >> 40) as f64 / (1u64 << 24) as f64;
                        *k = ((u * u) * 60.0) as u64;
                    }
                    s.lookup(&keys, &mut out).unwrap();
                    sim.request(&keys);
                }
                let st = s.stats();
                assert_eq!(st.l1_hits, sim.stats.hits, "{name}");
                assert_eq!(st.perfect, sim.stats.perfect, "{name}");
            }
        }
    }

    #[test]
    fn no_cache_reads_everything_from_disk() {
        for b in BACKENDS {
            let d = tempfile::tempdir().unwrap();
            let names = make(d.path(), b, 2, 10, 3);
            let mut s = EmbedStore::open(d.path(), &names, &opts(b, 0, "lru", vec![32])).unwrap();
            let mut out = vec![0f32; 6];
            s.lookup(&[1, 2], &mut out).unwrap();
            s.lookup(&[1, 2], &mut out).unwrap();
            assert_eq!(s.stats().misses, 4);
            assert_eq!(s.stats().perfect, 0);
        }
    }

    #[test]
    fn bad_batches_change_nothing() {
        for b in BACKENDS {
            let d = tempfile::tempdir().unwrap();
            let names = make(d.path(), b, 2, 10, 3);
            let mut s =
                EmbedStore::open(d.path(), &names, &opts(b, 1000, "ev-lfu", vec![32])).unwrap();
            let mut out = vec![0f32; 12];
            let e = s.lookup(&[1, 2, 3, 10], &mut out).unwrap_err();
            assert!(
                e.to_string()
                    .contains("key 10 out of range for table `C2` (10 rows) at request 1"),
                "{e}"
            );
            let e = s.lookup(&[1, 2, 3], &mut out).unwrap_err();
            assert!(e.to_string().contains("2 keys per request"), "{e}");
            assert_eq!(s.stats(), EmbedStats::default());
        }
    }

    #[test]
    fn open_errors_are_clear() {
        for b in BACKENDS {
            let d = tempfile::tempdir().unwrap();
            let mut names = make(d.path(), b, 2, 10, 3);
            let e = EmbedStore::open(d.path(), &["C9".to_string()], &opts(b, 0, "lru", vec![32]))
                .err()
                .unwrap();
            assert!(
                e.to_string()
                    .contains("unknown table `C9`; the store holds: C1, C2"),
                "{e}"
            );
            load_table(d.path(), b, "wide", 5, &[0.0; 10]).unwrap();
            names.push("wide".into());
            let e = EmbedStore::open(d.path(), &names, &opts(b, 0, "lru", vec![32]))
                .err()
                .unwrap();
            assert!(e.to_string().contains("dim 5"), "{e}");
            names.pop();
            for (o, msg) in [
                (opts(b, 10, "fifo", vec![32]), "unknown policy"),
                (opts(b, 10, "lru", vec![12]), "precision 12"),
                (opts(b, 10, "lru", vec![32, 8, 4]), "1 or 2 tiers"),
            ] {
                let e = EmbedStore::open(d.path(), &names, &o).err().unwrap();
                assert!(e.to_string().contains(msg), "{e}");
            }
        }
    }

    #[test]
    fn evprox_serves_a_resident_surrogate_and_falls_back_to_disk() {
        for b in BACKENDS {
            let d = tempfile::tempdir().unwrap();
            let names = make(d.path(), b, 1, 20, 2);
            // 128 bytes: half to L3 (2 mappings of 32 B), 64 B of rows = 8 fp32 rows of dim 2.
            let mut o = opts(b, 128, "lru", vec![32]);
            o.l3_share = 0.5;
            let mut s = EmbedStore::open(d.path(), &names, &o).unwrap();
            assert_eq!(s.capacities(), (8, 0));
            assert_eq!(s.l3_capacity(), 2);
            let map: Vec<u64> = (0..20)
                .map(|k| if k == 5 { NO_SURROGATE } else { 5 })
                .collect();
            s.set_surrogates(0, map).unwrap();
            let mut out = [0f32; 2];
            for k in 0..=8 {
                s.lookup(&[k], &mut out).unwrap(); // 8 evicts 0 (LRU): 0 → 5 enters L3
            }
            assert_eq!(s.stats().l3_inserts, 1);
            let misses = s.stats().misses;
            s.lookup(&[0], &mut out).unwrap();
            assert_eq!(
                out,
                [value(0, 5, 0), value(0, 5, 1)],
                "row 5 served for key 0"
            );
            let st = s.stats();
            assert_eq!(
                (st.l3_hits, st.misses, st.perfect, st.perfect_approx),
                (1, misses, 0, 1)
            );
            // Push 5 out of memory: the mapping is useless now, key 0 is read from disk.
            for k in 10..=17 {
                s.lookup(&[k], &mut out).unwrap();
            }
            let misses = s.stats().misses;
            s.lookup(&[0], &mut out).unwrap();
            assert_eq!(out, [value(0, 0, 0), value(0, 0, 1)]);
            assert_eq!(s.stats().misses, misses + 1);
            assert_eq!(s.stats().l3_hits, 1);
        }
    }

    #[test]
    fn evprox_off_changes_nothing_and_bad_mappings_are_rejected() {
        for b in BACKENDS {
            let d = tempfile::tempdir().unwrap();
            let names = make(d.path(), b, 2, 10, 2);
            let mut s =
                EmbedStore::open(d.path(), &names, &opts(b, 64, "ev-lfu", vec![32])).unwrap();
            assert_eq!(s.l3_capacity(), 0);
            s.set_surrogates(0, vec![1; 10]).unwrap();
            let mut out = [0f32; 4];
            for i in 0..50u64 {
                s.lookup(&[i % 10, (i * 3) % 10], &mut out).unwrap();
            }
            assert_eq!(s.stats().l3_hits + s.stats().l3_inserts, 0);
            let e = s.set_surrogates(0, vec![1; 9]).unwrap_err();
            assert!(
                e.to_string().contains("one entry per row (10), got 9"),
                "{e}"
            );
            let e = s.set_surrogates(1, vec![10; 10]).unwrap_err();
            assert!(e.to_string().contains("key 10 out of range"), "{e}");
            let e = s.set_surrogates(2, vec![]).unwrap_err();
            assert!(e.to_string().contains("table index 2"), "{e}");
            let mut o = opts(b, 64, "lru", vec![32]);
            o.l3_share = 0.6;
            assert!(EmbedStore::open(d.path(), &names, &o).is_err());
        }
    }
}
