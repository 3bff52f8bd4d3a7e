//! WiredTiger through its C API (`wiredtiger.h`), loaded at run time from `libwiredtiger.so`.
//!
//! WiredTiger's API is tables of function pointers inside `WT_CONNECTION`, `WT_SESSION` and
//! `WT_CURSOR`; the `#[repr(C)]` structs below mirror the prefix of each struct in the installed
//! header (WiredTiger 3.2.1) up to the last member we call, with slots we never call typed as
//! opaque pointers. We only ever hold pointers to structs WiredTiger allocated, so the members
//! after that prefix need not be declared.
//!
//! Settings applied (and reported): one row-store table `table:bench` with raw byte keys and values
//! (`key_format=u,value_format=u`), `cache_size = cache_bytes + write_buffer_bytes` (WiredTiger's
//! cache holds clean and dirty pages alike, so it gets the whole budget the LSM engines split in
//! two), write-ahead log on, `transaction_sync=(enabled=<sync>,method=fsync)`, a checkpoint every
//! 60 s (MongoDB's default), log files of `write_buffer_bytes` without preallocation (WiredTiger's
//! default 100 MB preallocated files would dominate the space of small databases), compression none or snappy via the packaged snappy extension
//! (Debian's 3.2.1 ships no lz4/zstd extension), default page sizes.
//!
//! Thread-safety: `WT_CONNECTION` is thread-safe; each [`Session`] opens its own `WT_SESSION` and
//! cursor, used by one thread only, as WiredTiger requires.

use std::os::raw::{c_char, c_int, c_void};
use std::path::Path;
use std::ptr;
use std::sync::OnceLock;

use serde_json::json;

use super::{c_api, c_message, c_path, c_string, load_once};
use crate::engine::{BatchOp, Engine, EngineKind, Session};
use crate::error::{BenchError, Result};
use crate::options::{Compression, Settings};

const NAME: &str = "wiredtiger";
const LIBS: &[&str] = &["libwiredtiger.so", "libwiredtiger.so.0"];
/// Where Debian installs the snappy compressor extension.
const SNAPPY_EXTENSIONS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libwiredtiger_snappy.so",
    "/usr/lib/aarch64-linux-gnu/libwiredtiger_snappy.so",
    "/usr/lib/libwiredtiger_snappy.so",
];
const WT_NOTFOUND: c_int = -31803;
const TABLE: &str = "table:bench";
/// Seconds between background checkpoints: MongoDB's default for WiredTiger.
const CHECKPOINT_WAIT_SECS: u32 = 60;

/// The registry entry.
pub const KIND: EngineKind = EngineKind {
    name: NAME,
    about: "WiredTiger via its C API (libwiredtiger), B-tree row store, WAL + checkpoints",
    keys: &["leaf_page_max", "checkpoint_wait"],
    compressions: &[Compression::None, Compression::Snappy],
    probe,
    open,
};

/// `WT_ITEM`.
#[repr(C)]
struct WtItem {
    data: *const c_void,
    size: usize,
    mem: *mut c_void,
    memsize: usize,
    flags: u32,
}

impl WtItem {
    fn of(bytes: &[u8]) -> WtItem {
        WtItem {
            data: bytes.as_ptr().cast(),
            size: bytes.len(),
            mem: ptr::null_mut(),
            memsize: 0,
            flags: 0,
        }
    }
    fn empty() -> WtItem {
        WtItem::of(&[])
    }
    /// # Safety
    /// Filled by WiredTiger and the cursor has not moved since.
    unsafe fn bytes(&self) -> &[u8] {
        if self.data.is_null() {
            return &[];
        }
        // SAFETY: WiredTiger guarantees `size` bytes at `data` until the next cursor operation.
        unsafe { std::slice::from_raw_parts(self.data.cast::<u8>(), self.size) }
    }
}

/// A function-pointer slot we never call (same size as a pointer).
type Slot = *const c_void;

/// Prefix of `struct __wt_cursor`, member for member.
#[repr(C)]
struct WtCursor {
    session: *mut WtSession,
    uri: *const c_char,
    key_format: *const c_char,
    value_format: *const c_char,
    get_key: unsafe extern "C" fn(*mut WtCursor, ...) -> c_int,
    get_value: unsafe extern "C" fn(*mut WtCursor, ...) -> c_int,
    set_key: unsafe extern "C" fn(*mut WtCursor, ...),
    set_value: unsafe extern "C" fn(*mut WtCursor, ...),
    compare: Slot,
    equals: Slot,
    next: unsafe extern "C" fn(*mut WtCursor) -> c_int,
    prev: Slot,
    reset: unsafe extern "C" fn(*mut WtCursor) -> c_int,
    search: unsafe extern "C" fn(*mut WtCursor) -> c_int,
    search_near: unsafe extern "C" fn(*mut WtCursor, *mut c_int) -> c_int,
    insert: unsafe extern "C" fn(*mut WtCursor) -> c_int,
    modify: Slot,
    update: Slot,
    remove: unsafe extern "C" fn(*mut WtCursor) -> c_int,
    reserve: Slot,
    close: unsafe extern "C" fn(*mut WtCursor) -> c_int,
}

type ConfigFn = unsafe extern "C" fn(*mut WtSession, *const c_char) -> c_int;
type NameConfigFn = unsafe extern "C" fn(*mut WtSession, *const c_char, *const c_char) -> c_int;

/// Prefix of `struct __wt_session`, member for member, up to `checkpoint`.
#[repr(C)]
struct WtSession {
    connection: *mut WtConnection,
    app_private: *mut c_void,
    close: ConfigFn,
    reconfigure: Slot,
    strerror: unsafe extern "C" fn(*mut WtSession, c_int) -> *const c_char,
    open_cursor: unsafe extern "C" fn(
        *mut WtSession,
        *const c_char,
        *mut WtCursor,
        *const c_char,
        *mut *mut WtCursor,
    ) -> c_int,
    alter: Slot,
    create: NameConfigFn,
    import: Slot,
    compact: Slot,
    drop: Slot,
    join: Slot,
    log_flush: Slot,
    log_printf: Slot,
    rebalance: Slot,
    rename: Slot,
    reset: Slot,
    salvage: Slot,
    truncate: Slot,
    upgrade: Slot,
    verify: Slot,
    begin_transaction: ConfigFn,
    commit_transaction: ConfigFn,
    prepare_transaction: Slot,
    rollback_transaction: ConfigFn,
    timestamp_transaction: Slot,
    query_timestamp: Slot,
    checkpoint: ConfigFn,
}

/// Prefix of `struct __wt_connection`, member for member, up to `open_session`.
#[repr(C)]
struct WtConnection {
    async_flush: Slot,
    async_new_op: Slot,
    close: unsafe extern "C" fn(*mut WtConnection, *const c_char) -> c_int,
    debug_info: Slot,
    reconfigure: Slot,
    get_home: Slot,
    configure_method: Slot,
    is_new: Slot,
    open_session: unsafe extern "C" fn(
        *mut WtConnection,
        *mut c_void,
        *const c_char,
        *mut *mut WtSession,
    ) -> c_int,
}

c_api! {
    /// The two free functions of `wiredtiger.h` the harness uses.
    Api {
        wiredtiger_open: fn(*const c_char, *mut c_void, *const c_char, *mut *mut WtConnection)
            -> c_int;
        wiredtiger_strerror: fn(c_int) -> *const c_char;
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
    // SAFETY: wiredtiger_strerror returns a static or thread-local string.
    let detail = unsafe { c_message((api.wiredtiger_strerror)(rc)) };
    Err(BenchError::Engine {
        engine: NAME.to_string(),
        op,
        detail: format!("{detail} ({rc})"),
    })
}

struct WiredTiger {
    api: &'static Api,
    conn: *mut WtConnection,
    settings: serde_json::Value,
}

// SAFETY: WT_CONNECTION is thread-safe; sessions are per thread.
unsafe impl Send for WiredTiger {}
// SAFETY: as above.
unsafe impl Sync for WiredTiger {}

fn parse_u32(what: &str, v: &str) -> Result<u32> {
    v.parse()
        .map_err(|_| BenchError::invalid(format!("wiredtiger {what}"), format!("`{v}`")))
}

fn open(dir: &Path, s: &Settings) -> Result<Box<dyn Engine>> {
    let api = api()?;
    let (extension, compressor) = match s.compression {
        Compression::None => (None, "none"),
        Compression::Snappy => {
            let ext = SNAPPY_EXTENSIONS
                .iter()
                .find(|p| Path::new(p).exists())
                .ok_or_else(|| BenchError::Unsupported {
                    engine: NAME.to_string(),
                    detail: "compression snappy: libwiredtiger_snappy.so not found".to_string(),
                })?;
            (Some(*ext), "snappy")
        }
        other => {
            return Err(BenchError::Unsupported {
                engine: NAME.to_string(),
                detail: format!(
                    "compression {}: this WiredTiger build has only the snappy and zlib \
                     extensions",
                    other.name()
                ),
            })
        }
    };
    let checkpoint_wait = match s.extra.get("checkpoint_wait") {
        Some(v) => parse_u32("checkpoint_wait", v)?,
        None => CHECKPOINT_WAIT_SECS,
    };
    let leaf_page_max = match s.extra.get("leaf_page_max") {
        Some(v) => crate::options::parse_size(v)?,
        None => 32 << 10,
    };
    let cache_bytes = s.cache_bytes + s.write_buffer_bytes;
    // WiredTiger refuses caches under 1 MiB.
    let cache_bytes = cache_bytes.max(1 << 20);
    // Log files as large as the LSM engines' write buffer (WiredTiger allows 100 KB..2 GB), not
    // preallocated, so the on-disk footprint compares with a WAL of the same budget.
    let log_file_bytes = s.write_buffer_bytes.clamp(100 << 10, 2 << 30);
    let mut config = format!(
        "create,cache_size={cache_bytes},log=(enabled=true,file_max={log_file_bytes},prealloc=false),\
         transaction_sync=(enabled={},method=fsync),checkpoint=(wait={checkpoint_wait}),\
         session_max={}",
        s.sync,
        s.threads + 16,
    );
    if let Some(ext) = extension {
        config.push_str(&format!(",extensions=[{ext}]"));
    }
    let table_config = format!(
        "key_format=u,value_format=u,block_compressor={},leaf_page_max={leaf_page_max}",
        if compressor == "none" { "" } else { compressor }
    );
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io("create", dir, e))?;
    let home = c_path(NAME, dir)?;
    let cconfig = c_string(NAME, &config)?;
    let ctable = c_string(NAME, &table_config)?;
    let uri = c_string(NAME, TABLE)?;
    // SAFETY: the connection is closed on every failure after it opened.
    unsafe {
        let mut conn = ptr::null_mut();
        check(
            api,
            "open",
            (api.wiredtiger_open)(home.as_ptr(), ptr::null_mut(), cconfig.as_ptr(), &mut conn),
        )?;
        let engine = WiredTiger {
            api,
            conn,
            settings: json!({
                "library": "libwiredtiger (C API, dlopen)",
                "cache_size": cache_bytes,
                "cache_note": "WiredTiger's one cache holds clean and dirty pages: it gets \
                               cache_bytes + write_buffer_bytes",
                "connection_config": config,
                "table_config": table_config,
                "compression": s.compression.name(),
                "wal": true,
                "sync": s.sync,
                "checkpoint_wait_secs": checkpoint_wait,
            }),
        };
        let mut session = ptr::null_mut();
        check(
            api,
            "open_session",
            ((*conn).open_session)(conn, ptr::null_mut(), ptr::null(), &mut session),
        )?;
        let rc = ((*session).create)(session, uri.as_ptr(), ctable.as_ptr());
        ((*session).close)(session, ptr::null());
        check(api, "create table", rc)?;
        Ok(Box::new(engine))
    }
}

impl Engine for WiredTiger {
    fn session(&self) -> Result<Box<dyn Session + '_>> {
        let api = self.api;
        let uri = c_string(NAME, TABLE)?;
        // SAFETY: the session and cursor belong to the returned value and are closed in Drop.
        unsafe {
            let mut session = ptr::null_mut();
            check(
                api,
                "open_session",
                ((*self.conn).open_session)(self.conn, ptr::null_mut(), ptr::null(), &mut session),
            )?;
            let mut cursor = ptr::null_mut();
            let rc = ((*session).open_cursor)(
                session,
                uri.as_ptr(),
                ptr::null_mut(),
                ptr::null(),
                &mut cursor,
            );
            if rc != 0 {
                ((*session).close)(session, ptr::null());
                check(api, "open_cursor", rc)?;
            }
            Ok(Box::new(WtSessionHandle {
                api,
                session,
                cursor,
                _engine: self,
            }))
        }
    }

    fn settings(&self) -> serde_json::Value {
        self.settings.clone()
    }

    fn flush(&self) -> Result<()> {
        let api = self.api;
        // SAFETY: a short-lived session for the checkpoint, closed before returning.
        unsafe {
            let mut session = ptr::null_mut();
            check(
                api,
                "open_session",
                ((*self.conn).open_session)(self.conn, ptr::null_mut(), ptr::null(), &mut session),
            )?;
            let rc = ((*session).checkpoint)(session, ptr::null());
            ((*session).close)(session, ptr::null());
            check(api, "checkpoint", rc)
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        let api = self.api;
        let conn = self.conn;
        std::mem::forget(self);
        // SAFETY: every session borrowed the engine and is closed; the connection closes once.
        check(api, "close", unsafe { ((*conn).close)(conn, ptr::null()) })
    }
}

impl Drop for WiredTiger {
    fn drop(&mut self) {
        // SAFETY: reached only when `close` was not called (error paths); closes once.
        unsafe { ((*self.conn).close)(self.conn, ptr::null()) };
    }
}

struct WtSessionHandle<'a> {
    api: &'static Api,
    session: *mut WtSession,
    cursor: *mut WtCursor,
    _engine: &'a WiredTiger,
}

impl Drop for WtSessionHandle<'_> {
    fn drop(&mut self) {
        // SAFETY: closing the session closes its cursor too.
        unsafe { ((*self.session).close)(self.session, ptr::null()) };
    }
}

impl WtSessionHandle<'_> {
    /// # Safety
    /// The cursor is open and `key`/`value` outlive the following cursor operation.
    unsafe fn insert(&mut self, key: &[u8], value: &[u8]) -> c_int {
        let c = self.cursor;
        let (k, v) = (WtItem::of(key), WtItem::of(value));
        // SAFETY: raw `u` formats take a WT_ITEM pointer; WiredTiger copies on insert.
        unsafe {
            ((*c).set_key)(c, &k as *const WtItem);
            ((*c).set_value)(c, &v as *const WtItem);
            ((*c).insert)(c)
        }
    }

    /// # Safety
    /// The cursor is open.
    unsafe fn remove(&mut self, key: &[u8]) -> c_int {
        let c = self.cursor;
        let k = WtItem::of(key);
        // SAFETY: as in `insert`.
        let rc = unsafe {
            ((*c).set_key)(c, &k as *const WtItem);
            ((*c).remove)(c)
        };
        if rc == WT_NOTFOUND {
            0
        } else {
            rc
        }
    }
}

impl Session for WtSessionHandle<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        // SAFETY: cursor open for the session's life.
        let rc = unsafe { self.insert(key, value) };
        check(self.api, "put", rc)
    }

    fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
        value.clear();
        let c = self.cursor;
        let k = WtItem::of(key);
        let mut v = WtItem::empty();
        // SAFETY: the value is copied before the cursor is reset.
        unsafe {
            ((*c).set_key)(c, &k as *const WtItem);
            let rc = ((*c).search)(c);
            if rc == WT_NOTFOUND {
                ((*c).reset)(c);
                return Ok(false);
            }
            check(self.api, "get", rc)?;
            let rc = ((*c).get_value)(c, &mut v as *mut WtItem);
            if rc == 0 {
                value.extend_from_slice(v.bytes());
            }
            ((*c).reset)(c);
            check(self.api, "get_value", rc)?;
        }
        Ok(true)
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        // SAFETY: cursor open.
        let rc = unsafe { self.remove(key) };
        check(self.api, "delete", rc)
    }

    fn write_batch(&mut self, ops: &[BatchOp<'_>]) -> Result<()> {
        let s = self.session;
        // SAFETY: one explicit transaction around the batch; rolled back on error.
        unsafe {
            check(
                self.api,
                "begin_transaction",
                ((*s).begin_transaction)(s, ptr::null()),
            )?;
            for op in ops {
                let rc = match *op {
                    BatchOp::Put(k, v) => self.insert(k, v),
                    BatchOp::Delete(k) => self.remove(k),
                };
                if rc != 0 {
                    ((*s).rollback_transaction)(s, ptr::null());
                    return check(self.api, "write_batch", rc);
                }
            }
            check(
                self.api,
                "commit_transaction",
                ((*s).commit_transaction)(s, ptr::null()),
            )
        }
    }

    fn scan(
        &mut self,
        start: &[u8],
        n: usize,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize> {
        let c = self.cursor;
        let mut count = 0;
        // SAFETY: key/value items are read before the cursor moves; reset at the end.
        unsafe {
            let mut rc;
            if start.is_empty() {
                ((*c).reset)(c);
                rc = ((*c).next)(c);
            } else {
                let k = WtItem::of(start);
                ((*c).set_key)(c, &k as *const WtItem);
                let mut exact: c_int = 0;
                rc = ((*c).search_near)(c, &mut exact);
                if rc == 0 && exact < 0 {
                    rc = ((*c).next)(c);
                }
            }
            while rc == 0 && count < n {
                let (mut k, mut v) = (WtItem::empty(), WtItem::empty());
                rc = ((*c).get_key)(c, &mut k as *mut WtItem);
                if rc == 0 {
                    rc = ((*c).get_value)(c, &mut v as *mut WtItem);
                }
                if rc != 0 {
                    break;
                }
                visit(k.bytes(), v.bytes());
                count += 1;
                if count < n {
                    rc = ((*c).next)(c);
                }
            }
            ((*c).reset)(c);
            if rc != 0 && rc != WT_NOTFOUND {
                return check(self.api, "scan", rc).map(|_| count);
            }
        }
        Ok(count)
    }
}
