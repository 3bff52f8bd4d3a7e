//! Parsing of the harness's option values: sizes (`64MiB`, `1GiB`, `4096`), compression names and
//! engine specs (`rocksdb:cache_size=64MiB;compression=zstd`).
//!
//! Thread-safety: pure functions over strings. Invariant: every accepted spec resolves to one
//! registered engine and a [`Settings`] whose values the engine was told about; anything else is an
//! error naming the valid choices, raised before any benchmark work starts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// Parses a byte size: a plain integer, or a number with a suffix `B`, `KiB`, `MiB`, `GiB`, `TiB`
/// (powers of 1024) or `KB`, `MB`, `GB`, `TB` (powers of 1000). Case of the suffix is ignored.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    if digits.is_empty() {
        return Err(BenchError::invalid(
            "size",
            format!("`{text}` does not start with a number"),
        ));
    }
    let n: u64 = digits
        .parse()
        .map_err(|_| BenchError::invalid("size", format!("`{text}` is too large")))?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(BenchError::invalid(
                "size",
                format!(
                    "`{text}`: unknown suffix `{other}` (use B, KiB, MiB, GiB, TiB, KB, MB, GB)"
                ),
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| BenchError::invalid("size", format!("`{text}` overflows 64 bits")))
}

/// Parses a count such as `1000000`, `1M` or `1_000_000` (decimal suffixes K, M, G).
pub fn parse_count(what: &str, text: &str) -> Result<u64> {
    let t: String = text.trim().chars().filter(|c| *c != '_').collect();
    let (digits, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1_000u64),
        Some('m' | 'M') => (&t[..t.len() - 1], 1_000_000),
        Some('g' | 'G') => (&t[..t.len() - 1], 1_000_000_000),
        _ => (t.as_str(), 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| {
            BenchError::invalid(what, format!("`{text}` is not a count (e.g. 1000, 1M)"))
        })
}

/// Block compression applied to stored data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// No compression.
    None,
    /// Snappy (db_bench's default; LevelDB, RocksDB and WiredTiger here support it).
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// Valid names, for error messages.
    pub const NAMES: &'static str = "none, snappy, lz4, zstd";
    /// Every codec, in the order of [`Compression::NAMES`].
    pub const ALL: &'static [Compression] = &[
        Compression::None,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec an engine that offers only `offered` runs when asked for `self`: `self` if
    /// offered; otherwise the nearest offered codec (the fast codecs lz4 and snappy stand in for
    /// each other, zstd falls back to lz4, then snappy), and `none` for an engine that compresses
    /// nothing. The harness warns and records both names when the two differ.
    pub fn closest_in(self, offered: &[Compression]) -> Compression {
        let preference: &[Compression] = match self {
            Compression::None => &[],
            Compression::Snappy => &[Compression::Lz4, Compression::Zstd],
            Compression::Lz4 => &[Compression::Snappy, Compression::Zstd],
            Compression::Zstd => &[Compression::Lz4, Compression::Snappy],
        };
        std::iter::once(self)
            .chain(preference.iter().copied())
            .find(|c| offered.contains(c))
            .unwrap_or(Compression::None)
    }

    /// `names` of `list`, comma-separated.
    pub fn list(list: &[Compression]) -> String {
        list.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
    }

    /// Parses a compression name.
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" | "no" => Ok(Compression::None),
            "snappy" => Ok(Compression::Snappy),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            other => Err(BenchError::invalid(
                "compression",
                format!("`{other}`; valid: {}", Self::NAMES),
            )),
        }
    }

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// The settings every engine gets, the same for all of them unless an engine spec overrides one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Block cache bytes (engines without their own cache record that they rely on the OS).
    pub cache_bytes: u64,
    /// Write buffer (memtable) bytes.
    pub write_buffer_bytes: u64,
    /// Block compression.
    pub compression: Compression,
    /// Whether each write is synced to the device before it returns.
    pub sync: bool,
    /// Client threads driving the engine (each performs the full operation count, as db_bench).
    pub threads: usize,
    /// Background threads the engine may use for flush/compaction where it has the knob.
    pub background_threads: usize,
    /// Engine-specific options from the spec (`name:key=value;...`) not covered above.
    pub extra: BTreeMap<String, String>,
}

/// Keys every engine accepts in a spec; they override the command line's common settings.
pub const COMMON_KEYS: &[&str] = &[
    "cache_size",
    "write_buffer_size",
    "compression",
    "sync",
    "background_threads",
];

impl Default for Settings {
    fn default() -> Self {
        Settings {
            // 8 MiB block cache: db_bench's default `--cache_size`, so runs compare out of the box.
            cache_bytes: 8 << 20,
            // 64 MiB: RocksDB's and db_bench's default write buffer.
            write_buffer_bytes: 64 << 20,
            compression: Compression::None,
            sync: false,
            threads: 1,
            // 2: RocksDB's default max_background_jobs, which db_bench keeps.
            background_threads: 2,
            extra: BTreeMap::new(),
        }
    }
}

/// One `--engines` entry: the text as given, the engine's registered name, and the settings it gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSpec {
    /// The entry exactly as given on the command line (the `engine` field of result rows).
    pub given: String,
    /// The registered engine name (text before `:`).
    pub name: String,
    /// `key=value` pairs after `:`, in order.
    pub pairs: Vec<(String, String)>,
}

impl EngineSpec {
    /// Parses `name` or `name:key=value;key=value`.
    pub fn parse(text: &str) -> Result<Self> {
        let given = text.trim().to_string();
        let (name, rest) = match given.split_once(':') {
            Some((n, r)) => (n.trim(), Some(r)),
            None => (given.as_str(), None),
        };
        if name.is_empty() {
            return Err(BenchError::invalid(
                "engine",
                format!("`{text}` has no engine name"),
            ));
        }
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in rest
            .unwrap_or("")
            .split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                BenchError::invalid(
                    "engine option",
                    format!("`{part}` in `{text}` is not KEY=VALUE"),
                )
            })?;
            let (k, v) = (k.trim().to_string(), v.trim().to_string());
            if k.is_empty() {
                return Err(BenchError::invalid(
                    "engine option",
                    format!("empty key in `{text}`"),
                ));
            }
            if pairs.iter().any(|(pk, _)| *pk == k) {
                return Err(BenchError::invalid(
                    "engine option",
                    format!("`{k}` twice in `{text}`"),
                ));
            }
            pairs.push((k, v));
        }
        Ok(EngineSpec {
            given: given.clone(),
            name: name.to_string(),
            pairs,
        })
    }

    /// Splits a comma-separated `--engines` list. Commas inside an entry's options are not
    /// allowed (use `;` between pairs).
    pub fn parse_list(text: &str) -> Result<Vec<Self>> {
        let specs: Vec<Self> = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Self::parse)
            .collect::<Result<_>>()?;
        if specs.is_empty() {
            return Err(BenchError::invalid("--engines", "no engine given"));
        }
        Ok(specs)
    }

    /// Applies this spec's pairs over `base`: common keys override the shared settings, any other
    /// key must be in `engine_keys` and lands in [`Settings::extra`].
    pub fn resolve(&self, base: &Settings, engine_keys: &[&str]) -> Result<Settings> {
        let mut s = base.clone();
        for (k, v) in &self.pairs {
            match k.as_str() {
                "cache_size" => s.cache_bytes = parse_size(v)?,
                "write_buffer_size" => s.write_buffer_bytes = parse_size(v)?,
                "compression" => s.compression = Compression::parse(v)?,
                "sync" => s.sync = parse_bool(k, v)?,
                "background_threads" => {
                    s.background_threads = parse_count(k, v)? as usize;
                    if s.background_threads == 0 {
                        return Err(BenchError::invalid(k.clone(), "must be at least 1"));
                    }
                }
                other if engine_keys.contains(&other) => {
                    s.extra.insert(other.to_string(), v.clone());
                }
                other => {
                    let mut valid: Vec<&str> = COMMON_KEYS.to_vec();
                    valid.extend_from_slice(engine_keys);
                    return Err(BenchError::invalid(
                        format!("option for engine `{}`", self.name),
                        format!("unknown key `{other}`; valid keys: {}", valid.join(", ")),
                    ));
                }
            }
        }
        Ok(s)
    }
}

/// Parses on/off style booleans.
pub fn parse_bool(what: &str, text: &str) -> Result<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        other => Err(BenchError::invalid(
            what,
            format!("`{other}` is not on/off/true/false/1/0"),
        )),
    }
}

/// Parses the arguments of a small bench verb: `--NAME COUNT` for each `(NAME, value)` of
/// `counts` (positive counts, `1M` style), `--dir PATH` and `--help`. Returns false after
/// printing `usage` for `--help`.
pub fn counts_and_dir(
    args: &[String],
    counts: &mut [(&str, &mut u64)],
    dir: &mut std::path::PathBuf,
    usage: &str,
) -> std::result::Result<bool, crate::output::Fail> {
    use crate::output::Fail;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some((what, v)) = counts.iter_mut().find(|(name, _)| *name == a.as_str()) {
            **v = it
                .next()
                .and_then(|s| parse_count(what, s).ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| Fail::Usage(format!("{what} needs a positive count; {usage}")))?;
            continue;
        }
        match a.as_str() {
            "--dir" => {
                *dir = std::path::PathBuf::from(
                    it.next()
                        .ok_or_else(|| Fail::Usage(format!("--dir needs a path; {usage}")))?,
                )
            }
            "--help" | "-h" => {
                println!("{usage}");
                return Ok(false);
            }
            other => return Err(Fail::Usage(format!("unknown argument {other}; {usage}"))),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_accept_binary_and_decimal_suffixes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("1gib").unwrap(), 1 << 30);
        assert_eq!(parse_size("8M").unwrap(), 8 << 20);
        assert_eq!(parse_size("2MB").unwrap(), 2_000_000);
    }

    #[test]
    fn sizes_reject_garbage_and_overflow() {
        assert!(parse_size("").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("99999999999TiB").is_err());
    }

    #[test]
    fn counts_accept_suffixes_and_underscores() {
        assert_eq!(parse_count("n", "1M").unwrap(), 1_000_000);
        assert_eq!(parse_count("n", "1_000").unwrap(), 1000);
        assert!(parse_count("n", "x").is_err());
    }

    #[test]
    fn closest_codec_keeps_offered_ones_and_substitutes_the_nearest() {
        use Compression::*;
        let leveldb = &[None, Snappy];
        assert_eq!(Lz4.closest_in(leveldb), Snappy);
        assert_eq!(Zstd.closest_in(leveldb), Snappy);
        assert_eq!(Snappy.closest_in(leveldb), Snappy);
        assert_eq!(None.closest_in(leveldb), None);
        let attune = &[None, Lz4, Zstd];
        assert_eq!(Snappy.closest_in(attune), Lz4);
        assert_eq!(Zstd.closest_in(attune), Zstd);
        assert_eq!(Lz4.closest_in(&[None]), None, "LMDB compresses nothing");
        for &c in Compression::ALL {
            assert_eq!(c.closest_in(Compression::ALL), c);
        }
    }

    #[test]
    fn spec_with_options_splits_on_colon_and_semicolon() {
        let s = EngineSpec::parse("rocksdb:cache_size=64MiB;compression=zstd").unwrap();
        assert_eq!(s.name, "rocksdb");
        assert_eq!(s.given, "rocksdb:cache_size=64MiB;compression=zstd");
        assert_eq!(s.pairs.len(), 2);
        let r = s.resolve(&Settings::default(), &[]).unwrap();
        assert_eq!(r.cache_bytes, 64 << 20);
        assert_eq!(r.compression, Compression::Zstd);
    }

    #[test]
    fn spec_list_keeps_each_entry_as_given() {
        let l = EngineSpec::parse_list("attune,attune:learned_index=off,rocksdb").unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!(l[1].given, "attune:learned_index=off");
        let r = l[1]
            .resolve(&Settings::default(), &["learned_index"])
            .unwrap();
        assert_eq!(
            r.extra.get("learned_index").map(String::as_str),
            Some("off")
        );
    }

    #[test]
    fn spec_rejects_unknown_key_listing_valid_ones() {
        let s = EngineSpec::parse("rocksdb:bogus=1").unwrap();
        let e = s
            .resolve(&Settings::default(), &["block_size"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bogus") && e.contains("cache_size") && e.contains("block_size"),
            "{e}"
        );
    }

    #[test]
    fn spec_rejects_malformed_pairs() {
        assert!(EngineSpec::parse("rocksdb:cache_size").is_err());
        assert!(EngineSpec::parse(":a=b").is_err());
        assert!(EngineSpec::parse("x:a=1;a=2").is_err());
        assert!(EngineSpec::parse_list(" , ").is_err());
        let s = EngineSpec::parse("rocksdb:compression=brotli").unwrap();
        assert!(s.resolve(&Settings::default(), &[]).is_err());
    }
}
