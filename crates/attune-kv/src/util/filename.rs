//! File names inside a database directory.
//!
//! ```text
//! CURRENT            name of the live manifest, replaced atomically
//! LOCK               advisory lock held by the opener
//! MANIFEST-NNNNNN    log of version edits
//! NNNNNN.log         write-ahead log
//! NNNNNN.sst         table
//! NNNNNN.vlog        value-log segment
//! NNNNNN.atlm        learned model of table NNNNNN (a cache: rebuilt when absent or damaged)
//! LEVEL-N.atlm       level model of sorted level N (a cache: dropped when the level changed)
//! ANALYZER           the learned-index analyzer's statistics (a cache: written at close)
//! ```

use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Current,
    Lock,
    Manifest(u64),
    Log(u64),
    Table(u64),
    Blob(u64),
    Model(u64),
    LevelModel(usize),
    /// The clean-close record (`CLOSED`).
    CleanClose,
    Temp,
}

pub fn log_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.log"))
}
pub fn table_name(n: u64) -> String {
    format!("{n:06}.sst")
}
pub fn table_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(table_name(n))
}
pub fn blob_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.vlog"))
}
pub fn model_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.atlm"))
}
pub fn analyzer_state_path(dir: &Path) -> PathBuf {
    dir.join("ANALYZER")
}
pub fn level_model_path(dir: &Path, level: usize) -> PathBuf {
    dir.join(format!("LEVEL-{level}.atlm"))
}
pub fn manifest_name(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}
pub fn current_path(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}
/// Name of the directory, inside the database, that receives what repair could not fully read
/// and the tables an open keeps rather than deleting (see `db/open.rs`).
pub const LOST_DIR: &str = "lost";

pub fn clean_close_path(dir: &Path) -> PathBuf {
    dir.join("CLOSED")
}

/// Classifies a directory entry; None for names the engine does not own.
pub fn parse(name: &str) -> Option<FileKind> {
    match name {
        "CURRENT" => return Some(FileKind::Current),
        "LOCK" => return Some(FileKind::Lock),
        "CLOSED" => return Some(FileKind::CleanClose),
        _ => {}
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(FileKind::Manifest);
    }
    if name.ends_with(".tmp") {
        return Some(FileKind::Temp);
    }
    if let Some(n) = name.strip_suffix(".log") {
        return n.parse().ok().map(FileKind::Log);
    }
    if let Some(n) = name.strip_suffix(".sst") {
        return n.parse().ok().map(FileKind::Table);
    }
    if let Some(n) = name.strip_suffix(".vlog") {
        return n.parse().ok().map(FileKind::Blob);
    }
    if let Some(n) = name
        .strip_prefix("LEVEL-")
        .and_then(|n| n.strip_suffix(".atlm"))
    {
        return n.parse().ok().map(FileKind::LevelModel);
    }
    if let Some(n) = name.strip_suffix(".atlm") {
        return n.parse().ok().map(FileKind::Model);
    }
    None
}

/// Names another engine's database in a directory Attune cannot read, with the evidence, or
/// None. RocksDB writes `IDENTITY` and `OPTIONS-NNNNNN`; LevelDB names its tables `NNNNNN.ldb`.
/// Both also write `CURRENT`, `LOG` and `MANIFEST-NNNNNN`, the manifest in LevelDB's record
/// format: a 7-byte header (crc32c u32, length u16, type u8), then in LevelDB's first record tag 1
/// and the comparator's name (`leveldb.BytewiseComparator`). `manifest_head` is the start of the
/// manifest CURRENT names (empty if none). An Attune fragment header has a u32 length below
/// 4 MiB, so its byte 7 is always 0 and never looks like LevelDB's tag.
pub fn foreign_engine(names: &[String], manifest_head: &[u8]) -> Option<String> {
    let numbered = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let found = |pred: &dyn Fn(&str) -> bool| -> Vec<&str> {
        let mut v: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| pred(n))
            .collect();
        v.sort_unstable();
        v.truncate(3);
        v
    };
    let rocksdb = found(&|n| n == "IDENTITY" || n.strip_prefix("OPTIONS-").is_some_and(numbered));
    if !rocksdb.is_empty() {
        return Some(format!("a RocksDB database ({} found)", rocksdb.join(", ")));
    }
    let ldb = found(&|n| n.strip_suffix(".ldb").is_some_and(numbered));
    if !ldb.is_empty() {
        return Some(format!("a LevelDB database ({} found)", ldb.join(", ")));
    }
    let comparator = match manifest_head {
        [_, _, _, _, _, _, 1..=4, 1, len, rest @ ..] => rest
            .get(..usize::from(*len))
            .filter(|name| !name.is_empty() && name.iter().all(u8::is_ascii_graphic))
            .and_then(|name| std::str::from_utf8(name).ok()),
        _ => None,
    };
    comparator.map(|c| {
        format!("a LevelDB database (its manifest is in LevelDB's format, comparator {c})")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let d = Path::new("/d");
        assert_eq!(parse("000007.log"), Some(FileKind::Log(7)));
        assert_eq!(
            parse(table_path(d, 12).file_name().unwrap().to_str().unwrap()),
            Some(FileKind::Table(12))
        );
        assert_eq!(parse(&manifest_name(3)), Some(FileKind::Manifest(3)));
        assert_eq!(parse("000012.atlm"), Some(FileKind::Model(12)));
        assert_eq!(parse("LEVEL-3.atlm"), Some(FileKind::LevelModel(3)));
        assert_eq!(parse("LEVEL-x.atlm"), None);
        assert_eq!(parse("notes.txt"), None);
    }

    #[test]
    fn foreign_engines_are_named_from_their_files() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let rocks = names(&[
            "CURRENT",
            "IDENTITY",
            "LOG",
            "MANIFEST-000005",
            "OPTIONS-000007",
        ]);
        let d = foreign_engine(&rocks, b"").unwrap();
        assert!(d.contains("RocksDB") && d.contains("OPTIONS-000007"), "{d}");
        let d = foreign_engine(&names(&["CURRENT", "000005.ldb"]), b"").unwrap();
        assert!(d.contains("LevelDB") && d.contains("000005.ldb"), "{d}");
        // LevelDB 1.23's first manifest record: header, tag 1, the comparator's name.
        let mut head = vec![0x56, 0xf9, 0xb8, 0xf8, 0x1c, 0x00, 0x01, 0x01, 0x1a];
        head.extend_from_slice(b"leveldb.BytewiseComparator");
        let d = foreign_engine(&names(&["CURRENT", "LOG"]), &head).unwrap();
        assert!(
            d.contains("LevelDB") && d.contains("leveldb.BytewiseComparator"),
            "{d}"
        );
        // Attune's own first record: a u32 length, so byte 7 is 0.
        let attune = [0x12, 0x34, 0x56, 0x78, 0x0c, 0, 0, 0, 1, 1, 1, 2, 0];
        assert_eq!(
            foreign_engine(&names(&["CURRENT", "000003.log"]), &attune),
            None
        );
        assert_eq!(foreign_engine(&names(&["OPTIONS-x", "a.ldb"]), b""), None);
    }
}
