//! LMDB through its C API (`lmdb.h`), loaded at run time from `liblmdb.so`.
//!
//! LMDB is a copy-on-write B+tree read through `mmap`: it has no block cache and no write buffer,
//! so `cache_bytes` and `write_buffer_bytes` cannot be applied; the settings say so and the OS page
//! cache plays the cache's part (use `--memory-limit` to bound it). Each put/delete is its own
//! write transaction (one commit per write, as in the other engines' autocommit); `sync = false`
//! opens the environment with `MDB_NOSYNC`. Compression is not supported (only `none`).
//! Settings applied: map size `map_size` (default 64 GiB of address space, sparse on disk),
//! `MDB_NOTLS` (read transactions are per session, not per thread), `MDB_NORDAHEAD`.
//!
//! Thread-safety: the environment is thread-safe; each session owns a reusable read transaction;
//! LMDB serialises write transactions itself.

use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::path::Path;
use std::ptr;
use std::sync::OnceLock;

use serde_json::json;

use super::{c_api, c_message, c_path, load_once};
use crate::engine::{BatchOp, Engine, EngineKind, Session};
use crate::error::{BenchError, Result};
use crate::options::{parse_size, Compression, Settings};

const NAME: &str = "lmdb";
const LIBS: &[&str] = &["liblmdb.so", "liblmdb.so.0"];
/// Map size when none is given: 64 GiB of address space; the file grows only as data is written.
const MAP_BYTES_DEFAULT: u64 = 64 << 30;

const MDB_NOSYNC: c_uint = 0x10000;
const MDB_RDONLY: c_uint = 0x20000;
const MDB_NOTLS: c_uint = 0x20_0000;
const MDB_NORDAHEAD: c_uint = 0x80_0000;
const MDB_NOTFOUND: c_int = -30798;
const MDB_FIRST: c_int = 0;
const MDB_NEXT: c_int = 8;
const MDB_SET_RANGE: c_int = 17;

/// The registry entry.
pub const KIND: EngineKind = EngineKind {
    name: NAME,
    about: "LMDB via its C API (liblmdb), mmap'd copy-on-write B+tree, one commit per write",
    keys: &["map_size"],
    compressions: &[Compression::None],
    probe,
    open,
};

/// `MDB_val`.
#[repr(C)]
struct Val {
    size: usize,
    data: *mut c_void,
}

impl Val {
    fn of(bytes: &[u8]) -> Val {
        Val {
            size: bytes.len(),
            data: bytes.as_ptr().cast_mut().cast(),
        }
    }
    fn empty() -> Val {
        Val {
            size: 0,
            data: ptr::null_mut(),
        }
    }
    /// # Safety
    /// `self` was filled by LMDB and its transaction is still live.
    unsafe fn bytes(&self) -> &[u8] {
        if self.data.is_null() {
            return &[];
        }
        // SAFETY: LMDB guarantees `size` bytes at `data` while the transaction lives.
        unsafe { std::slice::from_raw_parts(self.data.cast::<u8>(), self.size) }
    }
}

type Opaque = c_void;

c_api! {
    /// The subset of `lmdb.h` the harness uses.
    Api {
        mdb_env_create: fn(*mut *mut Opaque) -> c_int;
        mdb_env_set_mapsize: fn(*mut Opaque, usize) -> c_int;
        mdb_env_open: fn(*mut Opaque, *const c_char, c_uint, u32) -> c_int;
        mdb_env_close: fn(*mut Opaque);
        mdb_env_sync: fn(*mut Opaque, c_int) -> c_int;
        mdb_txn_begin: fn(*mut Opaque, *mut Opaque, c_uint, *mut *mut Opaque) -> c_int;
        mdb_txn_commit: fn(*mut Opaque) -> c_int;
        mdb_txn_abort: fn(*mut Opaque);
        mdb_txn_reset: fn(*mut Opaque);
        mdb_txn_renew: fn(*mut Opaque) -> c_int;
        mdb_dbi_open: fn(*mut Opaque, *const c_char, c_uint, *mut c_uint) -> c_int;
        mdb_put: fn(*mut Opaque, c_uint, *mut Val, *mut Val, c_uint) -> c_int;
        mdb_get: fn(*mut Opaque, c_uint, *mut Val, *mut Val) -> c_int;
        mdb_del: fn(*mut Opaque, c_uint, *mut Val, *mut Val) -> c_int;
        mdb_cursor_open: fn(*mut Opaque, c_uint, *mut *mut Opaque) -> c_int;
        mdb_cursor_close: fn(*mut Opaque);
        mdb_cursor_get: fn(*mut Opaque, *mut Val, *mut Val, c_int) -> c_int;
        mdb_strerror: fn(c_int) -> *const c_char;
    }
}

static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();

fn api() -> Result<&'static Api> {
    load_once(&API, NAME, || Api::load(NAME, LIBS))
}

fn probe() -> Result<()> {
    api().map(|_| ())
}

fn check(api: &Api, op: &'static str, rc: c_int) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: mdb_strerror returns a static string.
    let detail = unsafe { c_message((api.mdb_strerror)(rc)) };
    Err(BenchError::Engine {
        engine: NAME.to_string(),
        op,
        detail,
    })
}

struct Lmdb {
    api: &'static Api,
    env: *mut Opaque,
    dbi: c_uint,
    settings: serde_json::Value,
}

// SAFETY: MDB_env is thread-safe; transactions are per session and never shared.
unsafe impl Send for Lmdb {}
// SAFETY: as above.
unsafe impl Sync for Lmdb {}

fn open(dir: &Path, s: &Settings) -> Result<Box<dyn Engine>> {
    let api = api()?;
    if s.compression != Compression::None {
        return Err(BenchError::Unsupported {
            engine: NAME.to_string(),
            detail: format!(
                "compression {}: LMDB stores data uncompressed",
                s.compression.name()
            ),
        });
    }
    let map_bytes = match s.extra.get("map_size") {
        Some(v) => parse_size(v)?,
        None => MAP_BYTES_DEFAULT,
    };
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io("create", dir, e))?;
    let path = c_path(NAME, dir)?;
    let mut flags = MDB_NOTLS | MDB_NORDAHEAD;
    if !s.sync {
        flags |= MDB_NOSYNC;
    }
    // SAFETY: the environment is closed on every failure path after creation.
    unsafe {
        let mut env = ptr::null_mut();
        check(api, "env_create", (api.mdb_env_create)(&mut env))?;
        let fail = |rc: c_int, op: &'static str| -> Result<()> {
            if rc != 0 {
                (api.mdb_env_close)(env);
            }
            check(api, op, rc)
        };
        fail(
            (api.mdb_env_set_mapsize)(env, map_bytes as usize),
            "set_mapsize",
        )?;
        fail(
            (api.mdb_env_open)(env, path.as_ptr(), flags, 0o644),
            "env_open",
        )?;
        let mut txn = ptr::null_mut();
        fail(
            (api.mdb_txn_begin)(env, ptr::null_mut(), 0, &mut txn),
            "txn_begin",
        )?;
        let mut dbi: c_uint = 0;
        let rc = (api.mdb_dbi_open)(txn, ptr::null(), 0, &mut dbi);
        if rc != 0 {
            (api.mdb_txn_abort)(txn);
        } else {
            fail((api.mdb_txn_commit)(txn), "txn_commit")?;
        }
        fail(rc, "dbi_open")?;
        let settings = json!({
            "library": "liblmdb (C API, dlopen)",
            "block_cache": "none (mmap; the OS page cache caches pages)",
            "block_cache_bytes": 0,
            "write_buffer": "none (copy-on-write B+tree)",
            "map_size": map_bytes,
            "flags": format!("MDB_NOTLS|MDB_NORDAHEAD{}", if s.sync { "" } else { "|MDB_NOSYNC" }),
            "commit": "one write transaction per put/delete, one per batch",
            "compression": "none",
            "sync": s.sync,
        });
        Ok(Box::new(Lmdb {
            api,
            env,
            dbi,
            settings,
        }))
    }
}

impl Engine for Lmdb {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        let api = self.api;
        let mut rtxn = ptr::null_mut();
        // SAFETY: a read-only transaction, reset right away and renewed per read.
        unsafe {
            check(
                api,
                "txn_begin",
                (api.mdb_txn_begin)(self.env, ptr::null_mut(), MDB_RDONLY, &mut rtxn),
            )?;
            (api.mdb_txn_reset)(rtxn);
        }
        Ok(Box::new(LmdbSession { db: self, rtxn }))
    }

    fn settings(&self) -> serde_json::Value {
        self.settings.clone()
    }

    fn flush(&self) -> Result<()> {
        // SAFETY: valid environment.
        check(self.api, "env_sync", unsafe {
            (self.api.mdb_env_sync)(self.env, 1)
        })
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.flush()?;
        drop(self);
        Ok(())
    }
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        // SAFETY: sessions (and their transactions) are gone; closed once.
        unsafe { (self.api.mdb_env_close)(self.env) };
    }
}

struct LmdbSession<'a> {
    db: &'a Lmdb,
    rtxn: *mut Opaque,
}

impl Drop for LmdbSession<'_> {
    fn drop(&mut self) {
        // SAFETY: the read transaction is reset (not active); abort frees it.
        unsafe { (self.db.api.mdb_txn_abort)(self.rtxn) };
    }
}

impl Lmdb {
    /// Runs `f` inside one write transaction, committing on success and aborting on error.
    fn write(&self, op: &'static str, f: impl FnOnce(*mut Opaque) -> c_int) -> Result<()> {
        let api = self.api;
        let mut txn = ptr::null_mut();
        // SAFETY: the transaction is committed or aborted before returning.
        unsafe {
            check(
                api,
                "txn_begin",
                (api.mdb_txn_begin)(self.env, ptr::null_mut(), 0, &mut txn),
            )?;
            let rc = f(txn);
            if rc != 0 {
                (api.mdb_txn_abort)(txn);
                return check(api, op, rc);
            }
            check(api, "txn_commit", (api.mdb_txn_commit)(txn))
        }
    }

    fn put_in(&self, txn: *mut Opaque, key: &[u8], value: &[u8]) -> c_int {
        let (mut k, mut v) = (Val::of(key), Val::of(value));
        // SAFETY: LMDB copies key and value into the map.
        unsafe { (self.api.mdb_put)(txn, self.dbi, &mut k, &mut v, 0) }
    }

    /// Deletes `key`; an absent key is success.
    fn del_in(&self, txn: *mut Opaque, key: &[u8]) -> c_int {
        let mut k = Val::of(key);
        // SAFETY: a null data pointer deletes every value of the key.
        match unsafe { (self.api.mdb_del)(txn, self.dbi, &mut k, ptr::null_mut()) } {
            MDB_NOTFOUND => 0,
            rc => rc,
        }
    }
}

impl Session for LmdbSession<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let db = self.db;
        db.write("put", |txn| db.put_in(txn, key, value))
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        let db = self.db;
        db.write("delete", |txn| db.del_in(txn, key))
    }

    fn write_batch(&mut self, ops: &[BatchOp<'_>]) -> Result<()> {
        let db = self.db;
        db.write("write_batch", |txn| {
            for op in ops {
                let rc = match *op {
                    BatchOp::Put(k, v) => db.put_in(txn, k, v),
                    BatchOp::Delete(k) => db.del_in(txn, k),
                };
                if rc != 0 {
                    return rc;
                }
            }
            0
        })
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        let api = self.db.api;
        value.clear();
        let mut k = Val::of(key);
        let mut v = Val::empty();
        // SAFETY: the value is copied before the transaction is reset.
        unsafe {
            check(api, "txn_renew", (api.mdb_txn_renew)(self.rtxn))?;
            let rc = (api.mdb_get)(self.rtxn, self.db.dbi, &mut k, &mut v);
            if rc == 0 {
                value.extend_from_slice(v.bytes());
            }
            (api.mdb_txn_reset)(self.rtxn);
            if rc == MDB_NOTFOUND {
                return Ok(false);
            }
            check(api, "get", rc)?;
        }
        Ok(true)
    }

    fn scan(
        &mut self,
        start: &[u8],
        n: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let api = self.db.api;
        let mut count = 0;
        // SAFETY: key/value slices are used while the read transaction is live; the cursor is
        // closed and the transaction reset before returning.
        unsafe {
            check(api, "txn_renew", (api.mdb_txn_renew)(self.rtxn))?;
            let mut cur = ptr::null_mut();
            let rc = (api.mdb_cursor_open)(self.rtxn, self.db.dbi, &mut cur);
            if rc != 0 {
                (api.mdb_txn_reset)(self.rtxn);
                return check(api, "cursor_open", rc).map(|_| 0);
            }
            let mut k = Val::of(start);
            let mut v = Val::empty();
            let first = if start.is_empty() {
                MDB_FIRST
            } else {
                MDB_SET_RANGE
            };
            let mut rc = (api.mdb_cursor_get)(cur, &mut k, &mut v, first);
            while rc == 0 && count < n {
                visit(k.bytes(), v.bytes());
                count += 1;
                if count < n {
                    rc = (api.mdb_cursor_get)(cur, &mut k, &mut v, MDB_NEXT);
                }
            }
            (api.mdb_cursor_close)(cur);
            (api.mdb_txn_reset)(self.rtxn);
            if rc != 0 && rc != MDB_NOTFOUND {
                return check(api, "scan", rc).map(|_| count);
            }
        }
        Ok(count)
    }
}
