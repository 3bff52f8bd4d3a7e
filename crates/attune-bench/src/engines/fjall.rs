//! fjall (<https://github.com/fjall-rs/fjall>, MIT/Apache-2.0), a Rust LSM tree with optional
//! key-value separation, linked in from crates.io behind the `fjall` cargo feature (its 70-odd
//! crates stay out of the default build; `make bench-fjall` builds `attune-bench-fjall`). Without the
//! feature the engine is registered but its probe says how to get it, so `--engines ...,fjall`
//! skips it with that message.
//!
//! Settings applied (and reported): block cache of `cache_bytes`; a memtable of
//! `write_buffer_bytes` (`max_memtable_size`) and a write buffer of twice that across
//! partitions; compression none or lz4 (fjall 2 has no zstd or snappy); `background_threads`
//! flush and compaction workers each; one partition `default`. Durability as the other peers:
//! every write reaches the OS before it returns (fjall's default: each write flushes its
//! journal buffer); with `sync` each write is followed by `persist(SyncData)` (an `fdatasync` of
//! the journal), as Plush's log. Spec keys: `kv_separation=on` (values in fjall's value log,
//! `KvSeparationOptions`), with `kv_separation_threshold=SIZE` (values of at least this many
//! bytes are separated; fjall's default 1 KiB, so 1000-byte values need e.g. `512`) and
//! `blob_file_size=SIZE` (the value log's segment target, fjall's default 128 MiB);
//! `bloom_bits=N` (default 10, as the other LSM peers). Separated values are compressed as the
//! partition (`compression`, none by default).
//!
//! Thread-safety: `Keyspace` and `PartitionHandle` are `Send + Sync` handles (clones share one
//! tree); a session borrows them.

use crate::engine::EngineKind;
use crate::options::Compression;

/// The name used in `--engines`.
pub const NAME: &str = "fjall";

/// The registry entry.
pub const KIND: EngineKind = EngineKind {
    name: NAME,
    about: "fjall, a Rust LSM tree with key-value separation (crates.io; cargo feature `fjall`)",
    keys: &[
        "kv_separation",
        "kv_separation_threshold",
        "blob_file_size",
        "bloom_bits",
    ],
    compressions: &[Compression::None, Compression::Lz4],
    probe: imp::probe,
    open: imp::open,
};

#[cfg(not(feature = "fjall"))]
mod imp {
    use std::path::Path;

    use crate::engine::Engine;
    use crate::error::{BenchError, Result};
    use crate::options::Settings;

    fn missing() -> BenchError {
        BenchError::LibraryMissing {
            engine: super::NAME.to_string(),
            detail: "this attune-bench was built without the `fjall` cargo feature \
                     (cargo build --release -p attune-bench --features fjall)"
                .to_string(),
        }
    }

    pub fn probe() -> Result<()> {
        Err(missing())
    }

    pub fn open(_: &Path, _: &Settings) -> Result<Box<dyn Engine>> {
        Err(missing())
    }
}

#[cfg(feature = "fjall")]
mod imp {
    use std::path::Path;

    use fjall::{
        CompressionType, Config, Keyspace, KvSeparationOptions, PartitionCreateOptions,
        PartitionHandle, PersistMode,
    };
    use serde_json::json;

    use super::NAME;
    use crate::engine::{BatchOp, Engine, Session};
    use crate::engines::BLOOM_BITS_DEFAULT;
    use crate::error::{BenchError, Result};
    use crate::options::{parse_size, Compression, Settings};

    fn engine_error(e: fjall::Error) -> BenchError {
        BenchError::Unsupported {
            engine: NAME.to_string(),
            detail: e.to_string(),
        }
    }

    pub fn probe() -> Result<()> {
        Ok(())
    }

    fn flag(s: &Settings, key: &str) -> Result<bool> {
        match s.extra.get(key).map(String::as_str) {
            None | Some("off" | "false" | "0") => Ok(false),
            Some("on" | "true" | "1") => Ok(true),
            Some(v) => Err(BenchError::invalid(
                format!("fjall option {key}"),
                format!("{v:?}: expected on or off"),
            )),
        }
    }

    /// The value-log options of a spec with `kv_separation=on` (fjall's defaults unless the
    /// spec sets them); their keys without it are an error, not silently ignored.
    fn kv_separation_options(s: &Settings) -> Result<Option<KvSeparationOptions>> {
        let threshold = s
            .extra
            .get("kv_separation_threshold")
            .map(|v| {
                parse_size(v)
                    .ok()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        BenchError::invalid(
                            "fjall option kv_separation_threshold",
                            format!("{v:?}: a size from 1 byte to 4 GiB"),
                        )
                    })
            })
            .transpose()?;
        let file = s
            .extra
            .get("blob_file_size")
            .map(|v| {
                parse_size(v).and_then(|n| {
                    if n >= 1 << 20 {
                        Ok(n)
                    } else {
                        Err(BenchError::invalid(
                            "fjall option blob_file_size",
                            format!("{v:?}: at least 1 MiB"),
                        ))
                    }
                })
            })
            .transpose()?;
        if !flag(s, "kv_separation")? {
            if threshold.is_some() || file.is_some() {
                return Err(BenchError::invalid(
                    "fjall options kv_separation_threshold / blob_file_size",
                    "apply with kv_separation=on only",
                ));
            }
            return Ok(None);
        }
        let mut o = KvSeparationOptions::default();
        if let Some(t) = threshold {
            o = o.separation_threshold(t);
        }
        if let Some(f) = file {
            o = o.file_target_size(f);
        }
        Ok(Some(o))
    }

    pub fn open(dir: &Path, s: &Settings) -> Result<Box<dyn Engine>> {
        let kv = kv_separation_options(s)?;
        let kv_separation = kv.is_some();
        let bloom_bits: i32 = match s.extra.get("bloom_bits") {
            None => BLOOM_BITS_DEFAULT,
            Some(v) => v
                .parse()
                .ok()
                .filter(|b| (0..=32).contains(b))
                .ok_or_else(|| {
                    BenchError::invalid("fjall option bloom_bits", format!("{v:?}: 0 to 32"))
                })?,
        };
        let compression = match s.compression {
            Compression::None => CompressionType::None,
            Compression::Lz4 => CompressionType::Lz4,
            other => {
                return Err(BenchError::Unsupported {
                    engine: NAME.to_string(),
                    detail: format!("compression {other:?}: fjall 2 offers none and lz4"),
                })
            }
        };
        let memtable = u32::try_from(s.write_buffer_bytes).unwrap_or(u32::MAX);
        let workers = s.background_threads.max(1);
        let keyspace = Config::new(dir)
            .cache_size(s.cache_bytes)
            .max_write_buffer_size(s.write_buffer_bytes.saturating_mul(2))
            .flush_workers(workers)
            .compaction_workers(workers)
            .open()
            .map_err(engine_error)?;
        let mut popts = PartitionCreateOptions::default()
            .max_memtable_size(memtable)
            .compression(compression)
            .bloom_filter_bits((bloom_bits > 0).then_some(bloom_bits as u8));
        if let Some(o) = kv.clone() {
            popts = popts.with_kv_separation(o);
        }
        let partition = keyspace
            .open_partition("default", popts)
            .map_err(engine_error)?;
        let settings = json!({
            "engine": NAME,
            "version": "2",
            "sync": s.sync,
            "cache_bytes": s.cache_bytes,
            "max_memtable_size": memtable,
            "max_write_buffer_size": s.write_buffer_bytes.saturating_mul(2),
            "compression": format!("{compression:?}").to_lowercase(),
            "bloom_bits": bloom_bits,
            "kv_separation": kv_separation,
            "kv_separation_threshold": kv.as_ref().map(|o| o.separation_threshold),
            "blob_file_size": kv.as_ref().map(|o| o.file_target_size),
            "flush_workers": workers,
            "compaction_workers": workers,
            "persist": if s.sync { "SyncData per write" } else { "Buffer per write (fjall's default)" },
        });
        Ok(Box::new(FjallEngine {
            keyspace,
            partition,
            sync: s.sync,
            settings,
        }))
    }

    struct FjallEngine {
        keyspace: Keyspace,
        partition: PartitionHandle,
        sync: bool,
        settings: serde_json::Value,
    }

    struct FjallSession<'a> {
        e: &'a FjallEngine,
    }

    impl FjallSession<'_> {
        fn durable(&self) -> Result<()> {
            if self.e.sync {
                self.e
                    .keyspace
                    .persist(PersistMode::SyncData)
                    .map_err(engine_error)?;
            }
            Ok(())
        }
    }

    impl Session for FjallSession<'_> {
        fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
            self.e.partition.insert(key, value).map_err(engine_error)?;
            self.durable()
        }

        fn get(&mut self, key: &[u8], value: &mut Vec<u8>) -> Result<bool> {
            value.clear();
            match self.e.partition.get(key).map_err(engine_error)? {
                Some(v) => {
                    value.extend_from_slice(&v);
                    Ok(true)
                }
                None => Ok(false),
            }
        }

        fn delete(&mut self, key: &[u8]) -> Result<()> {
            self.e.partition.remove(key).map_err(engine_error)?;
            self.durable()
        }

        fn write_batch(&mut self, ops: &[BatchOp<'_>]) -> Result<()> {
            let mut b = self.e.keyspace.batch();
            for op in ops {
                match *op {
                    BatchOp::Put(k, v) => b.insert(&self.e.partition, k, v),
                    BatchOp::Delete(k) => b.remove(&self.e.partition, k),
                }
            }
            b.commit().map_err(engine_error)?;
            self.durable()
        }

        fn scan(
            &mut self,
            start: &[u8],
            n: usize,
            visit: &mut dyn FnMut(&[u8], &[u8]),
        ) -> Result<usize> {
            let mut seen = 0;
            for kv in self.e.partition.range(start.to_vec()..).take(n) {
                let (k, v) = kv.map_err(engine_error)?;
                visit(&k, &v);
                seen += 1;
            }
            Ok(seen)
        }
    }

    impl Engine for FjallEngine {
        fn session(&self) -> Result<Box<dyn Session + '_>> {
            Ok(Box::new(FjallSession { e: self }))
        }

        fn settings(&self) -> serde_json::Value {
            self.settings.clone()
        }

        fn flush(&self) -> Result<()> {
            self.keyspace
                .persist(PersistMode::SyncAll)
                .map_err(engine_error)
        }

        fn close(self: Box<Self>) -> Result<()> {
            self.keyspace
                .persist(PersistMode::SyncAll)
                .map_err(engine_error)
        }
    }
}
