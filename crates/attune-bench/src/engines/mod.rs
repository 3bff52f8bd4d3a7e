//! The engines the harness drives, one file each, and the shared `dlopen` helper they use.
//!
//! Peers are reached through their C APIs, bound by hand and loaded at run time with
//! `libloading`, so a machine without a peer's library still builds and runs the others.
//!
//! Where Attune's own engine plugs in: add `pub mod attune;` below and `engines::attune::KIND,`
//! at the top of `ENGINES` in `src/engine.rs`. `attune.rs` defines `pub const KIND: EngineKind`
//! whose `open` builds an `attune_kv` database from `Settings` (see docs/bench.md).
//!
//! Thread-safety: each loaded API table is a process-wide `'static` of plain function pointers.

pub mod attune;
pub mod fjall;
pub mod leveldb;
pub mod lmdb;
pub mod rocksdb;
pub mod wiredtiger;

use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::path::Path;

use crate::error::{BenchError, Result};

/// Bloom filter bits per key the LSM peers (RocksDB, LevelDB, db_bench) get unless a spec says
/// otherwise (`rocksdb:bloom_bits=0` turns it off): 10, Attune's own default, so point reads
/// compare engines configured alike rather than a filtered engine against unfiltered ones.
pub const BLOOM_BITS_DEFAULT: i32 = 10;

/// Declares a table of C functions resolved from a shared library at run time.
macro_rules! c_api {
    ($(#[$m:meta])* $name:ident { $( $f:ident : fn($($a:ty),* $(,)?) $(-> $r:ty)? ; )* }) => {
        $(#[$m])*
        #[allow(non_snake_case, dead_code)]
        struct $name {
            $( $f: unsafe extern "C" fn($($a),*) $(-> $r)?, )*
            _lib: libloading::Library,
        }
        impl $name {
            /// Loads the first library of `candidates` that opens and resolves every symbol.
            fn load(engine: &str, candidates: &[&str]) -> $crate::error::Result<Self> {
                let lib = $crate::engines::open_first(engine, candidates)?;
                // SAFETY: each symbol is declared with the signature of the installed C header.
                unsafe {
                    Ok($name {
                        $( $f: *lib
                            .get::<unsafe extern "C" fn($($a),*) $(-> $r)?>(
                                concat!(stringify!($f), "\0").as_bytes())
                            .map_err(|e| $crate::error::BenchError::LibraryMissing {
                                engine: engine.to_string(),
                                detail: format!("symbol {}: {e}", stringify!($f)),
                            })?, )*
                        _lib: lib,
                    })
                }
            }
        }
    };
}
pub(crate) use c_api;

/// Opens the first library in `candidates` that `dlopen` accepts.
pub(crate) fn open_first(engine: &str, candidates: &[&str]) -> Result<libloading::Library> {
    let mut last = String::new();
    for name in candidates {
        // SAFETY: loading a system shared library runs its initialisers; these are the peers'
        // own libraries installed by the distribution.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => return Ok(lib),
            Err(e) => last = e.to_string(),
        }
    }
    Err(BenchError::LibraryMissing {
        engine: engine.to_string(),
        detail: format!("tried {}: {last}", candidates.join(", ")),
    })
}

/// A NUL-terminated copy of a path for C.
pub(crate) fn c_path(engine: &str, path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| BenchError::Unsupported {
        engine: engine.to_string(),
        detail: format!("path {} contains a NUL byte", path.display()),
    })
}

/// A NUL-terminated copy of a configuration string.
pub(crate) fn c_string(engine: &str, text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| BenchError::Unsupported {
        engine: engine.to_string(),
        detail: format!("configuration `{text}` contains a NUL byte"),
    })
}

/// Copies a C error string (not freed here).
///
/// # Safety
/// `p` is null or points to a NUL-terminated string.
pub(crate) unsafe fn c_message(p: *const c_char) -> String {
    if p.is_null() {
        return "unknown error".to_string();
    }
    // SAFETY: caller guarantees a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Loads an API table once per process and hands out the same `'static` table afterwards.
pub(crate) fn load_once<T>(
    cell: &'static std::sync::OnceLock<std::result::Result<T, String>>,
    engine: &str,
    load: impl FnOnce() -> Result<T>,
) -> Result<&'static T> {
    cell.get_or_init(|| {
        load().map_err(|e| match e {
            BenchError::LibraryMissing { detail, .. } => detail,
            other => other.to_string(),
        })
    })
    .as_ref()
    .map_err(|detail| BenchError::LibraryMissing {
        engine: engine.to_string(),
        detail: detail.clone(),
    })
}
