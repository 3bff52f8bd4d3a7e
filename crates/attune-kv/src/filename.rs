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
    Temp,
}

pub fn log_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.log"))
}
pub fn table_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.sst"))
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

/// Classifies a directory entry; None for names the engine does not own.
pub fn parse(name: &str) -> Option<FileKind> {
    match name {
        "CURRENT" => return Some(FileKind::Current),
        "LOCK" => return Some(FileKind::Lock),
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
}
