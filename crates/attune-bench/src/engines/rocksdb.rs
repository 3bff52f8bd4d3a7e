//! RocksDB through its C API (`rocksdb/c.h`), loaded at run time from `librocksdb.so`.
//!
//! Settings applied (and reported): LRU block cache of `cache_bytes` in a block-based table with
//! 4 KiB blocks and a Bloom filter of `bloom_bits` bits per key (default 10, as Attune's),
//! `write_buffer_size`, compression,
//! `max_background_jobs = background_threads`, WAL on; `sync` sets `WriteOptions::sync`.
//! Reads use pinned gets (no copy inside RocksDB), as db_bench does.
//!
//! `table=plain` opens RocksDB with PlainTable instead, the table format RocksDB designs for
//! pure-memory or very low-latency media such as tmpfs: what its documentation requires is set
//! with it, `allow_mmap_reads` (tables are read through a mapping, no block cache) and a prefix
//! extractor (`prefix_bytes`, default 8: a fixed prefix that, for 8-byte keys or keys whose
//! first 8 bytes are unique, as the `plush` subcommand's are, makes the hash index exact);
//! keys of variable length, `bloom_bits` bits per prefix, hash table ratio 0.75 and index
//! sparseness 16 (PlainTableOptions' defaults). The binding follows the 7.8 `c.h` signature of
//! `rocksdb_options_set_plain_table_factory` (four parameters), like every other binding here.
//! A PlainTable database with a prefix extractor seeks within a prefix only, so its scans are
//! refused (an `Unsupported` error): it is a point-workload peer.
//!
//! Thread-safety: the `rocksdb_t` handle is thread-safe; each [`Session`] owns its read/write
//! options and write batch. Invariant: every C object created is destroyed exactly once.

use std::os::raw::{c_char, c_int, c_uchar, c_void};
use std::path::Path;
use std::ptr;
use std::sync::OnceLock;

use serde_json::json;

use super::{c_api, c_message, c_path, load_once};
use crate::engine::{BatchOp, Engine, EngineKind, RecordFn, Session};
use crate::error::{BenchError, Result};
use crate::options::{parse_size, Compression, Settings};

const NAME: &str = "rocksdb";
/// Library names tried in order (Debian's librocksdb-dev 7.8 ships `librocksdb.so.7.8`).
const LIBS: &[&str] = &[
    "librocksdb.so",
    "librocksdb.so.7.8",
    "librocksdb.so.8",
    "librocksdb.so.7",
];
/// Block size when the spec sets none: 4 KiB, RocksDB's and db_bench's default.
const BLOCK_BYTES_DEFAULT: u64 = 4096;

/// The registry entry.
pub const KIND: EngineKind = EngineKind {
    name: NAME,
    about: "RocksDB via its C API (librocksdb), LRU block cache, leveled compaction",
    keys: &[
        "block_size",
        "bloom_bits",
        "enable_blob_files",
        "min_blob_size",
        "blob_file_size",
        "enable_blob_gc",
        "blob_gc_age_cutoff",
        "blob_gc_force_threshold",
        "table",
        "prefix_bytes",
    ],
    compressions: Compression::ALL,
    probe,
    open,
};

type Db = c_void;
type Opaque = c_void;

c_api! {
    /// The subset of `rocksdb/c.h` the harness uses.
    Api {
        rocksdb_options_create: fn() -> *mut Opaque;
        rocksdb_options_destroy: fn(*mut Opaque);
        rocksdb_options_set_create_if_missing: fn(*mut Opaque, c_uchar);
        rocksdb_options_set_compression: fn(*mut Opaque, c_int);
        rocksdb_options_set_write_buffer_size: fn(*mut Opaque, usize);
        rocksdb_options_set_max_background_jobs: fn(*mut Opaque, c_int);
        rocksdb_options_set_enable_blob_files: fn(*mut Opaque, c_uchar);
        rocksdb_options_set_min_blob_size: fn(*mut Opaque, u64);
        rocksdb_options_set_blob_file_size: fn(*mut Opaque, u64);
        rocksdb_options_set_enable_blob_gc: fn(*mut Opaque, c_uchar);
        rocksdb_options_set_blob_gc_age_cutoff: fn(*mut Opaque, f64);
        rocksdb_options_set_blob_gc_force_threshold: fn(*mut Opaque, f64);
        rocksdb_options_set_block_based_table_factory: fn(*mut Opaque, *mut Opaque);
        rocksdb_options_set_plain_table_factory: fn(*mut Opaque, u32, c_int, f64, usize);
        rocksdb_options_set_allow_mmap_reads: fn(*mut Opaque, c_uchar);
        rocksdb_options_set_prefix_extractor: fn(*mut Opaque, *mut Opaque);
        rocksdb_slicetransform_create_fixed_prefix: fn(usize) -> *mut Opaque;
        rocksdb_block_based_options_create: fn() -> *mut Opaque;
        rocksdb_block_based_options_destroy: fn(*mut Opaque);
        rocksdb_block_based_options_set_block_cache: fn(*mut Opaque, *mut Opaque);
        rocksdb_block_based_options_set_block_size: fn(*mut Opaque, usize);
        rocksdb_block_based_options_set_filter_policy: fn(*mut Opaque, *mut Opaque);
        rocksdb_filterpolicy_create_bloom: fn(f64) -> *mut Opaque;
        rocksdb_cache_create_lru: fn(usize) -> *mut Opaque;
        rocksdb_cache_destroy: fn(*mut Opaque);
        rocksdb_open: fn(*const Opaque, *const c_char, *mut *mut c_char) -> *mut Db;
        rocksdb_close: fn(*mut Db);
        rocksdb_free: fn(*mut c_void);
        rocksdb_writeoptions_create: fn() -> *mut Opaque;
        rocksdb_writeoptions_destroy: fn(*mut Opaque);
        rocksdb_writeoptions_set_sync: fn(*mut Opaque, c_uchar);
        rocksdb_readoptions_create: fn() -> *mut Opaque;
        rocksdb_readoptions_destroy: fn(*mut Opaque);
        rocksdb_put: fn(*mut Db, *const Opaque, *const c_char, usize, *const c_char, usize,
            *mut *mut c_char);
        rocksdb_delete: fn(*mut Db, *const Opaque, *const c_char, usize, *mut *mut c_char);
        rocksdb_get_pinned: fn(*mut Db, *const Opaque, *const c_char, usize, *mut *mut c_char)
            -> *mut Opaque;
        rocksdb_pinnableslice_value: fn(*const Opaque, *mut usize) -> *const c_char;
        rocksdb_pinnableslice_destroy: fn(*mut Opaque);
        rocksdb_writebatch_create: fn() -> *mut Opaque;
        rocksdb_writebatch_destroy: fn(*mut Opaque);
        rocksdb_writebatch_clear: fn(*mut Opaque);
        rocksdb_writebatch_put: fn(*mut Opaque, *const c_char, usize, *const c_char, usize);
        rocksdb_writebatch_delete: fn(*mut Opaque, *const c_char, usize);
        rocksdb_write: fn(*mut Db, *const Opaque, *mut Opaque, *mut *mut c_char);
        rocksdb_create_iterator: fn(*mut Db, *const Opaque) -> *mut Opaque;
        rocksdb_iter_destroy: fn(*mut Opaque);
        rocksdb_iter_seek: fn(*mut Opaque, *const c_char, usize);
        rocksdb_iter_seek_to_first: fn(*mut Opaque);
        rocksdb_iter_valid: fn(*const Opaque) -> c_uchar;
        rocksdb_iter_next: fn(*mut Opaque);
        rocksdb_iter_key: fn(*const Opaque, *mut usize) -> *const c_char;
        rocksdb_iter_value: fn(*const Opaque, *mut usize) -> *const c_char;
        rocksdb_iter_get_error: fn(*const Opaque, *mut *mut c_char);
        rocksdb_flushoptions_create: fn() -> *mut Opaque;
        rocksdb_flushoptions_destroy: fn(*mut Opaque);
        rocksdb_flushoptions_set_wait: fn(*mut Opaque, c_uchar);
        rocksdb_flush: fn(*mut Db, *const Opaque, *mut *mut c_char);
        rocksdb_compact_range: fn(*mut Db, *const c_char, usize, *const c_char, usize);
        rocksdb_envoptions_create: fn() -> *mut Opaque;
        rocksdb_envoptions_destroy: fn(*mut Opaque);
        rocksdb_sstfilewriter_create: fn(*const Opaque, *const Opaque) -> *mut Opaque;
        rocksdb_sstfilewriter_open: fn(*mut Opaque, *const c_char, *mut *mut c_char);
        rocksdb_sstfilewriter_put: fn(*mut Opaque, *const c_char, usize, *const c_char, usize,
            *mut *mut c_char);
        rocksdb_sstfilewriter_finish: fn(*mut Opaque, *mut *mut c_char);
        rocksdb_sstfilewriter_destroy: fn(*mut Opaque);
        rocksdb_ingestexternalfileoptions_create: fn() -> *mut Opaque;
        rocksdb_ingestexternalfileoptions_set_move_files: fn(*mut Opaque, c_uchar);
        rocksdb_ingestexternalfileoptions_destroy: fn(*mut Opaque);
        rocksdb_ingest_external_file: fn(*mut Db, *const *const c_char, usize, *const Opaque,
            *mut *mut c_char);
    }
}

static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();

fn api() -> Result<&'static Api> {
    load_once(&API, NAME, || Api::load(NAME, LIBS))
}

fn probe() -> Result<()> {
    api().map(|_| ())
}

/// Turns a RocksDB `errptr` into an error, freeing it.
fn check(api: &Api, op: &'static str, err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: RocksDB sets errptr to a malloc'd NUL-terminated string; freed once here.
    let detail = unsafe { c_message(err) };
    unsafe { (api.rocksdb_free)(err.cast()) };
    Err(BenchError::Engine {
        engine: NAME.to_string(),
        op,
        detail,
    })
}

/// An open RocksDB.
struct RocksDb {
    api: &'static Api,
    db: *mut Db,
    options: *mut Opaque,
    table: *mut Opaque,
    cache: *mut Opaque,
    settings: serde_json::Value,
    sync: bool,
    /// PlainTable with a prefix extractor (`table=plain`): point operations only.
    plain: bool,
}

// SAFETY: rocksdb_t is documented thread-safe; the option objects are only read after open.
unsafe impl Send for RocksDb {}
// SAFETY: as above.
unsafe impl Sync for RocksDb {}

fn compression_code(c: Compression) -> c_int {
    // Values of rocksdb_*_compression in c.h.
    match c {
        Compression::None => 0,
        Compression::Snappy => 1,
        Compression::Lz4 => 4,
        Compression::Zstd => 7,
    }
}

/// RocksDB's integrated BlobDB, when `enable_blob_files` is set: values of `min_blob_size`
/// bytes or more go to blob files, and (with `enable_blob_gc`) compaction relocates the live
/// blobs of the oldest `blob_gc_age_cutoff` share of files. Defaults are RocksDB's own, except
/// `min_blob_size`, which defaults to Attune's 1 KiB so both separate the same values.
struct BlobSettings {
    min_size: u64,
    file_size: u64,
    gc: bool,
    age_cutoff: f64,
    force_threshold: f64,
}

impl BlobSettings {
    fn parse(s: &Settings) -> Result<Option<BlobSettings>> {
        let flag = |key: &str, default: bool| -> Result<bool> {
            match s.extra.get(key).map(String::as_str) {
                None => Ok(default),
                Some("1" | "true") => Ok(true),
                Some("0" | "false") => Ok(false),
                Some(v) => Err(BenchError::invalid(
                    format!("rocksdb {key}"),
                    format!("`{v}` is not 0, 1, true or false"),
                )),
            }
        };
        let share = |key: &str, default: f64| -> Result<f64> {
            match s.extra.get(key) {
                None => Ok(default),
                Some(v) => match v.parse::<f64>() {
                    Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
                    _ => Err(BenchError::invalid(
                        format!("rocksdb {key}"),
                        format!("`{v}` is not a number from 0 to 1"),
                    )),
                },
            }
        };
        if !flag("enable_blob_files", false)? {
            return Ok(None);
        }
        let size = |key: &str, default: u64| -> Result<u64> {
            s.extra.get(key).map_or(Ok(default), |v| parse_size(v))
        };
        Ok(Some(BlobSettings {
            min_size: size("min_blob_size", 1024)?,
            file_size: size("blob_file_size", 256 << 20)?,
            gc: flag("enable_blob_gc", false)?,
            age_cutoff: share("blob_gc_age_cutoff", 0.25)?,
            force_threshold: share("blob_gc_force_threshold", 1.0)?,
        }))
    }
}

/// The table format of a spec: `block` (default) or `plain` with its prefix length in bytes.
fn plain_prefix_bytes(s: &Settings) -> Result<Option<usize>> {
    let plain = match s.extra.get("table").map(String::as_str) {
        None | Some("block") => false,
        Some("plain") => true,
        Some(v) => {
            return Err(BenchError::invalid(
                "rocksdb table",
                format!("`{v}` is not block or plain"),
            ))
        }
    };
    let prefix = match s.extra.get("prefix_bytes") {
        None => 8,
        Some(v) => v.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(|| {
            BenchError::invalid(
                "rocksdb prefix_bytes",
                format!("`{v}` is not a positive number of bytes"),
            )
        })?,
    };
    if !plain && s.extra.contains_key("prefix_bytes") {
        return Err(BenchError::invalid(
            "rocksdb prefix_bytes",
            "applies to table=plain only",
        ));
    }
    Ok(plain.then_some(prefix))
}

fn open(dir: &Path, s: &Settings) -> Result<Box<dyn Engine>> {
    let api = api()?;
    let plain = plain_prefix_bytes(s)?;
    let block_bytes = match s.extra.get("block_size") {
        Some(v) => parse_size(v)?,
        None => BLOCK_BYTES_DEFAULT,
    };
    let bloom_bits: f64 = match s.extra.get("bloom_bits") {
        Some(v) => v.parse().map_err(|_| {
            BenchError::invalid("rocksdb bloom_bits", format!("`{v}` is not a number"))
        })?,
        None => f64::from(super::BLOOM_BITS_DEFAULT),
    };
    let blob = BlobSettings::parse(s)?;
    let path = c_path(NAME, dir)?;
    // SAFETY: plain calls into the C API with objects created here; on failure every object is
    // destroyed before returning.
    unsafe {
        let options = (api.rocksdb_options_create)();
        (api.rocksdb_options_set_create_if_missing)(options, 1);
        (api.rocksdb_options_set_compression)(options, compression_code(s.compression));
        (api.rocksdb_options_set_write_buffer_size)(options, s.write_buffer_bytes as usize);
        (api.rocksdb_options_set_max_background_jobs)(options, s.background_threads as c_int);
        if let Some(b) = &blob {
            (api.rocksdb_options_set_enable_blob_files)(options, 1);
            (api.rocksdb_options_set_min_blob_size)(options, b.min_size);
            (api.rocksdb_options_set_blob_file_size)(options, b.file_size);
            (api.rocksdb_options_set_enable_blob_gc)(options, u8::from(b.gc));
            (api.rocksdb_options_set_blob_gc_age_cutoff)(options, b.age_cutoff);
            (api.rocksdb_options_set_blob_gc_force_threshold)(options, b.force_threshold);
        }
        let table = (api.rocksdb_block_based_options_create)();
        let cache = (api.rocksdb_cache_create_lru)(s.cache_bytes as usize);
        (api.rocksdb_block_based_options_set_block_cache)(table, cache);
        (api.rocksdb_block_based_options_set_block_size)(table, block_bytes as usize);
        if bloom_bits > 0.0 {
            let policy = (api.rocksdb_filterpolicy_create_bloom)(bloom_bits);
            (api.rocksdb_block_based_options_set_filter_policy)(table, policy);
        }
        if let Some(prefix) = plain {
            // PlainTable (variable-length keys), read through mmap, hashed by a fixed prefix;
            // the prefix extractor's ownership passes to the options.
            let bloom = bloom_bits.round().clamp(0.0, 64.0) as c_int;
            (api.rocksdb_options_set_plain_table_factory)(options, 0, bloom, 0.75, 16);
            (api.rocksdb_options_set_allow_mmap_reads)(options, 1);
            let st = (api.rocksdb_slicetransform_create_fixed_prefix)(prefix);
            (api.rocksdb_options_set_prefix_extractor)(options, st);
        } else {
            (api.rocksdb_options_set_block_based_table_factory)(options, table);
        }
        let mut err: *mut c_char = ptr::null_mut();
        let db = (api.rocksdb_open)(options, path.as_ptr(), &mut err);
        if let Err(e) = check(api, "open", err) {
            (api.rocksdb_options_destroy)(options);
            (api.rocksdb_block_based_options_destroy)(table);
            (api.rocksdb_cache_destroy)(cache);
            return Err(e);
        }
        let mut settings = json!({
            "library": "librocksdb (C API, dlopen)",
            "block_cache": "LRU",
            "block_cache_bytes": s.cache_bytes,
            "write_buffer_size": s.write_buffer_bytes,
            "max_write_buffer_number": 2,
            "block_size": block_bytes,
            "bloom_bits_per_key": bloom_bits,
            "compression": s.compression.name(),
            "max_background_jobs": s.background_threads,
            "wal": true,
            "sync": s.sync,
            "compaction_style": "level",
        });
        if let Some(prefix) = plain {
            settings["table"] = json!({
                "format": "PlainTable",
                "allow_mmap_reads": true,
                "prefix_extractor": format!("fixed:{prefix}"),
                "user_key_len": "variable",
                "bloom_bits_per_key": bloom_bits.round(),
                "hash_table_ratio": 0.75,
                "index_sparseness": 16,
            });
            settings["block_cache"] = json!("unused (PlainTable reads through mmap)");
        }
        if let Some(b) = &blob {
            settings["blob_files"] = json!({
                "min_blob_size": b.min_size,
                "blob_file_size": b.file_size,
                "enable_blob_gc": b.gc,
                "blob_gc_age_cutoff": b.age_cutoff,
                "blob_gc_force_threshold": b.force_threshold,
            });
        }
        Ok(Box::new(RocksDb {
            api,
            db,
            options,
            table,
            cache,
            settings,
            sync: s.sync,
            plain: plain.is_some(),
        }))
    }
}

impl Engine for RocksDb {
    fn ingest_sorted(
        &self,
        scratch: &Path,
        records: u64,
        records_per_file: u64,
        record: &mut RecordFn<'_>,
    ) -> Result<bool> {
        let api = self.api;
        let mut paths = Vec::new();
        let (mut k, mut v) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < records {
            let path = c_path(NAME, &scratch.join(format!("ingest-{}.sst", paths.len())))?;
            // SAFETY: a writer made from this database's options, destroyed on every path.
            unsafe {
                let env = (api.rocksdb_envoptions_create)();
                let w = (api.rocksdb_sstfilewriter_create)(env, self.options);
                let mut err: *mut c_char = ptr::null_mut();
                (api.rocksdb_sstfilewriter_open)(w, path.as_ptr(), &mut err);
                let mut r = check(api, "sst writer open", err);
                let end = (i + records_per_file.max(1)).min(records);
                while r.is_ok() && i < end {
                    k.clear();
                    v.clear();
                    record(i, &mut k, &mut v);
                    let mut err: *mut c_char = ptr::null_mut();
                    (api.rocksdb_sstfilewriter_put)(
                        w,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                        &mut err,
                    );
                    r = check(api, "sst writer put", err);
                    i += 1;
                }
                if r.is_ok() {
                    let mut err: *mut c_char = ptr::null_mut();
                    (api.rocksdb_sstfilewriter_finish)(w, &mut err);
                    r = check(api, "sst writer finish", err);
                }
                (api.rocksdb_sstfilewriter_destroy)(w);
                (api.rocksdb_envoptions_destroy)(env);
                r?;
            }
            paths.push(path);
        }
        let ptrs: Vec<*const c_char> = paths.iter().map(|p| p.as_ptr()).collect();
        // SAFETY: `ptrs` point into `paths`, alive for the call; options destroyed after it.
        unsafe {
            let o = (api.rocksdb_ingestexternalfileoptions_create)();
            (api.rocksdb_ingestexternalfileoptions_set_move_files)(o, 1);
            let mut err: *mut c_char = ptr::null_mut();
            (api.rocksdb_ingest_external_file)(self.db, ptrs.as_ptr(), ptrs.len(), o, &mut err);
            (api.rocksdb_ingestexternalfileoptions_destroy)(o);
            check(api, "ingest external file", err)?;
        }
        Ok(true)
    }

    fn session(&self) -> Result<Box<dyn Session + '_>> {
        let api = self.api;
        // SAFETY: creating option objects and a batch; destroyed in Drop.
        unsafe {
            let write = (api.rocksdb_writeoptions_create)();
            (api.rocksdb_writeoptions_set_sync)(write, u8::from(self.sync));
            let read = (api.rocksdb_readoptions_create)();
            let batch = (api.rocksdb_writebatch_create)();
            Ok(Box::new(RocksSession {
                db: self,
                write,
                read,
                batch,
            }))
        }
    }

    fn settings(&self) -> serde_json::Value {
        self.settings.clone()
    }

    fn flush(&self) -> Result<()> {
        let api = self.api;
        // SAFETY: valid db handle; options destroyed after use.
        unsafe {
            let fo = (api.rocksdb_flushoptions_create)();
            (api.rocksdb_flushoptions_set_wait)(fo, 1);
            let mut err = ptr::null_mut();
            (api.rocksdb_flush)(self.db, fo, &mut err);
            (api.rocksdb_flushoptions_destroy)(fo);
            check(api, "flush", err)
        }
    }

    fn compact(&self) -> Result<bool> {
        self.flush()?;
        // SAFETY: valid db handle; null bounds mean the whole key space (waits for the result).
        unsafe {
            (self.api.rocksdb_compact_range)(self.db, ptr::null(), 0, ptr::null(), 0);
        }
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}

impl Drop for RocksDb {
    fn drop(&mut self) {
        let api = self.api;
        // SAFETY: every session borrowed `self` and is gone; each object is destroyed once.
        unsafe {
            (api.rocksdb_close)(self.db);
            (api.rocksdb_options_destroy)(self.options);
            (api.rocksdb_block_based_options_destroy)(self.table);
            (api.rocksdb_cache_destroy)(self.cache);
        }
    }
}

struct RocksSession<'a> {
    db: &'a RocksDb,
    write: *mut Opaque,
    read: *mut Opaque,
    batch: *mut Opaque,
}

impl Drop for RocksSession<'_> {
    fn drop(&mut self) {
        let api = self.db.api;
        // SAFETY: created in `session`, destroyed once.
        unsafe {
            (api.rocksdb_writeoptions_destroy)(self.write);
            (api.rocksdb_readoptions_destroy)(self.read);
            (api.rocksdb_writebatch_destroy)(self.batch);
        }
    }
}

impl Session for RocksSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let api = self.db.api;
        let mut err = ptr::null_mut();
        // SAFETY: pointers and lengths describe live slices.
        unsafe {
            (api.rocksdb_put)(
                self.db.db,
                self.write,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            );
        }
        check(api, "put", err)
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        let api = self.db.api;
        value.clear();
        let mut err = ptr::null_mut();
        // SAFETY: the pinnable slice is read before it is destroyed.
        unsafe {
            let ps = (api.rocksdb_get_pinned)(
                self.db.db,
                self.read,
                key.as_ptr().cast(),
                key.len(),
                &mut err,
            );
            check(api, "get", err)?;
            if ps.is_null() {
                return Ok(false);
            }
            let mut len = 0usize;
            let p = (api.rocksdb_pinnableslice_value)(ps, &mut len);
            if !p.is_null() {
                value.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
            }
            (api.rocksdb_pinnableslice_destroy)(ps);
        }
        Ok(true)
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        let api = self.db.api;
        let mut err = ptr::null_mut();
        // SAFETY: live slice.
        unsafe {
            (api.rocksdb_delete)(
                self.db.db,
                self.write,
                key.as_ptr().cast(),
                key.len(),
                &mut err,
            )
        };
        check(api, "delete", err)
    }

    fn write_batch(&mut self, ops: &[BatchOp<'_>]) -> Result<()> {
        let api = self.db.api;
        let mut err = ptr::null_mut();
        // SAFETY: the batch copies the data it is given.
        unsafe {
            (api.rocksdb_writebatch_clear)(self.batch);
            for op in ops {
                match *op {
                    BatchOp::Put(k, v) => (api.rocksdb_writebatch_put)(
                        self.batch,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    ),
                    BatchOp::Delete(k) => {
                        (api.rocksdb_writebatch_delete)(self.batch, k.as_ptr().cast(), k.len())
                    }
                }
            }
            (api.rocksdb_write)(self.db.db, self.write, self.batch, &mut err);
        }
        check(api, "write_batch", err)
    }

    fn scan(
        &mut self,
        start: &[u8],
        n: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let api = self.db.api;
        if self.db.plain {
            return Err(BenchError::Unsupported {
                engine: NAME.to_string(),
                detail: "scans of a PlainTable database with a prefix extractor stay within one \
                         prefix; table=plain is for point workloads"
                    .to_string(),
            });
        }
        let mut count = 0;
        // SAFETY: key/value pointers are valid until the iterator moves; copied out via `visit`.
        unsafe {
            let it = (api.rocksdb_create_iterator)(self.db.db, self.read);
            if start.is_empty() {
                (api.rocksdb_iter_seek_to_first)(it);
            } else {
                (api.rocksdb_iter_seek)(it, start.as_ptr().cast(), start.len());
            }
            while count < n && (api.rocksdb_iter_valid)(it) != 0 {
                let (mut kl, mut vl) = (0usize, 0usize);
                let k = (api.rocksdb_iter_key)(it, &mut kl);
                let v = (api.rocksdb_iter_value)(it, &mut vl);
                visit(
                    std::slice::from_raw_parts(k.cast::<u8>(), kl),
                    std::slice::from_raw_parts(v.cast::<u8>(), vl),
                );
                count += 1;
                // A scan of n records stops on the n-th: no step past it.
                if count < n {
                    (api.rocksdb_iter_next)(it);
                }
            }
            let mut err = ptr::null_mut();
            (api.rocksdb_iter_get_error)(it, &mut err);
            (api.rocksdb_iter_destroy)(it);
            check(api, "scan", err)?;
        }
        Ok(count)
    }
}
