//! LevelDB through its C API (`leveldb/c.h`), loaded at run time from `libleveldb.so`.
//!
//! Settings applied (and reported): LRU block cache of `cache_bytes`, `write_buffer_size`,
//! compression none or snappy (LevelDB 1.23's C API has no other), `max_open_files` 1000 (LevelDB's
//! default), 4 KiB blocks, a Bloom filter of `bloom_bits` bits per key (default 10, as
//! Attune's), one background compaction thread (LevelDB has no knob);
//! `sync` sets `WriteOptions::sync`. LevelDB has no explicit memtable flush, so `flush` is a no-op
//! and the write buffer reaches disk through its own compaction or at the next open.
//!
//! Thread-safety: `leveldb_t` is thread-safe; each session owns its options and batch.

use std::os::raw::{c_char, c_int, c_uchar, c_void};
use std::path::Path;
use std::ptr;
use std::sync::OnceLock;

use serde_json::json;

use super::{c_api, c_message, c_path, load_once};
use crate::engine::{BatchOp, Engine, EngineKind, Session};
use crate::error::{BenchError, Result};
use crate::options::{parse_size, Compression, Settings};

const NAME: &str = "leveldb";
const LIBS: &[&str] = &["libleveldb.so", "libleveldb.so.1d", "libleveldb.so.1"];
/// LevelDB's default open-file budget, kept so its table cache behaves as shipped.
const MAX_OPEN_FILES_DEFAULT: c_int = 1000;

/// The registry entry.
pub const KIND: EngineKind = EngineKind {
    name: NAME,
    about: "LevelDB via its C API (libleveldb), LRU block cache, leveled compaction",
    keys: &["block_size", "max_open_files", "bloom_bits"],
    compressions: &[Compression::None, Compression::Snappy],
    probe,
    open,
};

type Opaque = c_void;

c_api! {
    /// The subset of `leveldb/c.h` the harness uses.
    Api {
        leveldb_options_create: fn() -> *mut Opaque;
        leveldb_options_destroy: fn(*mut Opaque);
        leveldb_options_set_create_if_missing: fn(*mut Opaque, c_uchar);
        leveldb_options_set_cache: fn(*mut Opaque, *mut Opaque);
        leveldb_options_set_write_buffer_size: fn(*mut Opaque, usize);
        leveldb_options_set_max_open_files: fn(*mut Opaque, c_int);
        leveldb_options_set_block_size: fn(*mut Opaque, usize);
        leveldb_options_set_compression: fn(*mut Opaque, c_int);
        leveldb_options_set_filter_policy: fn(*mut Opaque, *mut Opaque);
        leveldb_filterpolicy_create_bloom: fn(c_int) -> *mut Opaque;
        leveldb_filterpolicy_destroy: fn(*mut Opaque);
        leveldb_cache_create_lru: fn(usize) -> *mut Opaque;
        leveldb_cache_destroy: fn(*mut Opaque);
        leveldb_open: fn(*const Opaque, *const c_char, *mut *mut c_char) -> *mut Opaque;
        leveldb_close: fn(*mut Opaque);
        leveldb_free: fn(*mut c_void);
        leveldb_writeoptions_create: fn() -> *mut Opaque;
        leveldb_writeoptions_destroy: fn(*mut Opaque);
        leveldb_writeoptions_set_sync: fn(*mut Opaque, c_uchar);
        leveldb_readoptions_create: fn() -> *mut Opaque;
        leveldb_readoptions_destroy: fn(*mut Opaque);
        leveldb_put: fn(*mut Opaque, *const Opaque, *const c_char, usize, *const c_char, usize,
            *mut *mut c_char);
        leveldb_delete: fn(*mut Opaque, *const Opaque, *const c_char, usize, *mut *mut c_char);
        leveldb_get: fn(*mut Opaque, *const Opaque, *const c_char, usize, *mut usize,
            *mut *mut c_char) -> *mut c_char;
        leveldb_writebatch_create: fn() -> *mut Opaque;
        leveldb_writebatch_destroy: fn(*mut Opaque);
        leveldb_writebatch_clear: fn(*mut Opaque);
        leveldb_writebatch_put: fn(*mut Opaque, *const c_char, usize, *const c_char, usize);
        leveldb_writebatch_delete: fn(*mut Opaque, *const c_char, usize);
        leveldb_write: fn(*mut Opaque, *const Opaque, *mut Opaque, *mut *mut c_char);
        leveldb_create_iterator: fn(*mut Opaque, *const Opaque) -> *mut Opaque;
        leveldb_iter_destroy: fn(*mut Opaque);
        leveldb_iter_seek: fn(*mut Opaque, *const c_char, usize);
        leveldb_iter_seek_to_first: fn(*mut Opaque);
        leveldb_iter_valid: fn(*const Opaque) -> c_uchar;
        leveldb_iter_next: fn(*mut Opaque);
        leveldb_iter_key: fn(*const Opaque, *mut usize) -> *const c_char;
        leveldb_iter_value: fn(*const Opaque, *mut usize) -> *const c_char;
        leveldb_iter_get_error: fn(*const Opaque, *mut *mut c_char);
        leveldb_compact_range: fn(*mut Opaque, *const c_char, usize, *const c_char, usize);
    }
}

static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();

fn api() -> Result<&'static Api> {
    load_once(&API, NAME, || Api::load(NAME, LIBS))
}

fn probe() -> Result<()> {
    api().map(|_| ())
}

fn check(api: &Api, op: &'static str, err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: LevelDB sets errptr to a malloc'd NUL-terminated string; freed once here.
    let detail = unsafe { c_message(err) };
    unsafe { (api.leveldb_free)(err.cast()) };
    Err(BenchError::Engine {
        engine: NAME.to_string(),
        op,
        detail,
    })
}

struct LevelDb {
    api: &'static Api,
    db: *mut Opaque,
    options: *mut Opaque,
    cache: *mut Opaque,
    /// The Bloom filter policy (null when off); destroyed after the database.
    filter: *mut Opaque,
    settings: serde_json::Value,
    sync: bool,
}

// SAFETY: leveldb_t is thread-safe; options are read-only after open.
unsafe impl Send for LevelDb {}
// SAFETY: as above.
unsafe impl Sync for LevelDb {}

fn open(dir: &Path, s: &Settings) -> Result<Box<dyn Engine>> {
    let api = api()?;
    let code = match s.compression {
        Compression::None => 0,
        Compression::Snappy => 1,
        other => {
            return Err(BenchError::Unsupported {
                engine: NAME.to_string(),
                detail: format!(
                    "compression {}: LevelDB 1.23's C API offers only none and snappy",
                    other.name()
                ),
            })
        }
    };
    let block_bytes = match s.extra.get("block_size") {
        Some(v) => parse_size(v)?,
        None => 4096,
    };
    let max_open: c_int = match s.extra.get("max_open_files") {
        Some(v) => v.parse().map_err(|_| {
            BenchError::invalid("leveldb max_open_files", format!("`{v}` is not an integer"))
        })?,
        None => MAX_OPEN_FILES_DEFAULT,
    };
    let bloom_bits: c_int = match s.extra.get("bloom_bits") {
        Some(v) => v.parse().ok().filter(|b| *b >= 0).ok_or_else(|| {
            BenchError::invalid(
                "leveldb bloom_bits",
                format!("`{v}` is not a whole number of bits per key (0 turns the filter off)"),
            )
        })?,
        None => super::BLOOM_BITS_DEFAULT,
    };
    let path = c_path(NAME, dir)?;
    // SAFETY: calls into the C API with objects created here; destroyed on failure.
    unsafe {
        let options = (api.leveldb_options_create)();
        (api.leveldb_options_set_create_if_missing)(options, 1);
        let cache = (api.leveldb_cache_create_lru)(s.cache_bytes as usize);
        (api.leveldb_options_set_cache)(options, cache);
        (api.leveldb_options_set_write_buffer_size)(options, s.write_buffer_bytes as usize);
        (api.leveldb_options_set_max_open_files)(options, max_open);
        (api.leveldb_options_set_block_size)(options, block_bytes as usize);
        (api.leveldb_options_set_compression)(options, code);
        // LevelDB keeps a raw pointer to the policy: it lives until after `leveldb_close`.
        let filter = if bloom_bits > 0 {
            let f = (api.leveldb_filterpolicy_create_bloom)(bloom_bits);
            (api.leveldb_options_set_filter_policy)(options, f);
            f
        } else {
            ptr::null_mut()
        };
        let mut err = ptr::null_mut();
        let db = (api.leveldb_open)(options, path.as_ptr(), &mut err);
        if let Err(e) = check(api, "open", err) {
            (api.leveldb_options_destroy)(options);
            (api.leveldb_cache_destroy)(cache);
            if !filter.is_null() {
                (api.leveldb_filterpolicy_destroy)(filter);
            }
            return Err(e);
        }
        let settings = json!({
            "library": "libleveldb (C API, dlopen)",
            "block_cache": "LRU",
            "block_cache_bytes": s.cache_bytes,
            "write_buffer_size": s.write_buffer_bytes,
            "block_size": block_bytes,
            "max_open_files": max_open,
            "bloom_bits_per_key": bloom_bits,
            "compression": s.compression.name(),
            "background_threads": 1,
            "wal": true,
            "sync": s.sync,
        });
        Ok(Box::new(LevelDb {
            api,
            db,
            options,
            cache,
            filter,
            settings,
            sync: s.sync,
        }))
    }
}

impl Engine for LevelDb {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        let api = self.api;
        // SAFETY: objects destroyed in Drop.
        unsafe {
            let write = (api.leveldb_writeoptions_create)();
            (api.leveldb_writeoptions_set_sync)(write, u8::from(self.sync));
            let read = (api.leveldb_readoptions_create)();
            let batch = (api.leveldb_writebatch_create)();
            Ok(Box::new(LevelSession {
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
        Ok(())
    }

    fn compact(&self) -> Result<bool> {
        // SAFETY: valid db handle; null bounds mean the whole key space. LevelDB's
        // CompactRange compacts the memtable first, then every level overlapping the range.
        unsafe {
            (self.api.leveldb_compact_range)(self.db, ptr::null(), 0, ptr::null(), 0);
        }
        Ok(true)
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}

impl Drop for LevelDb {
    fn drop(&mut self) {
        let api = self.api;
        // SAFETY: sessions are gone (they borrow self); each object destroyed once.
        unsafe {
            (api.leveldb_close)(self.db);
            (api.leveldb_options_destroy)(self.options);
            (api.leveldb_cache_destroy)(self.cache);
            if !self.filter.is_null() {
                (api.leveldb_filterpolicy_destroy)(self.filter);
            }
        }
    }
}

struct LevelSession<'a> {
    db: &'a LevelDb,
    write: *mut Opaque,
    read: *mut Opaque,
    batch: *mut Opaque,
}

impl Drop for LevelSession<'_> {
    fn drop(&mut self) {
        let api = self.db.api;
        // SAFETY: created in `session`.
        unsafe {
            (api.leveldb_writeoptions_destroy)(self.write);
            (api.leveldb_readoptions_destroy)(self.read);
            (api.leveldb_writebatch_destroy)(self.batch);
        }
    }
}

impl Session for LevelSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let api = self.db.api;
        let mut err = ptr::null_mut();
        // SAFETY: live slices.
        unsafe {
            (api.leveldb_put)(
                self.db.db,
                self.write,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                &mut err,
            )
        };
        check(api, "put", err)
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        let api = self.db.api;
        value.clear();
        let mut err = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: the returned buffer is malloc'd by LevelDB, copied, then freed.
        unsafe {
            let p = (api.leveldb_get)(
                self.db.db,
                self.read,
                key.as_ptr().cast(),
                key.len(),
                &mut len,
                &mut err,
            );
            check(api, "get", err)?;
            if p.is_null() {
                return Ok(false);
            }
            value.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), len));
            (api.leveldb_free)(p.cast());
        }
        Ok(true)
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        let api = self.db.api;
        let mut err = ptr::null_mut();
        // SAFETY: live slice.
        unsafe {
            (api.leveldb_delete)(
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
        // SAFETY: the batch copies its input.
        unsafe {
            (api.leveldb_writebatch_clear)(self.batch);
            for op in ops {
                match *op {
                    BatchOp::Put(k, v) => (api.leveldb_writebatch_put)(
                        self.batch,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    ),
                    BatchOp::Delete(k) => {
                        (api.leveldb_writebatch_delete)(self.batch, k.as_ptr().cast(), k.len())
                    }
                }
            }
            (api.leveldb_write)(self.db.db, self.write, self.batch, &mut err);
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
        let mut count = 0;
        // SAFETY: pointers valid until the iterator moves.
        unsafe {
            let it = (api.leveldb_create_iterator)(self.db.db, self.read);
            if start.is_empty() {
                (api.leveldb_iter_seek_to_first)(it);
            } else {
                (api.leveldb_iter_seek)(it, start.as_ptr().cast(), start.len());
            }
            while count < n && (api.leveldb_iter_valid)(it) != 0 {
                let (mut kl, mut vl) = (0usize, 0usize);
                let k = (api.leveldb_iter_key)(it, &mut kl);
                let v = (api.leveldb_iter_value)(it, &mut vl);
                visit(
                    std::slice::from_raw_parts(k.cast::<u8>(), kl),
                    std::slice::from_raw_parts(v.cast::<u8>(), vl),
                );
                count += 1;
                // A scan of n records stops on the n-th: no step past it.
                if count < n {
                    (api.leveldb_iter_next)(it);
                }
            }
            let mut err = ptr::null_mut();
            (api.leveldb_iter_get_error)(it, &mut err);
            (api.leveldb_iter_destroy)(it);
            check(api, "scan", err)?;
        }
        Ok(count)
    }
}
