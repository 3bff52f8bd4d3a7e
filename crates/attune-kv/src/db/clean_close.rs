//! The clean-close record: the file `CLOSED`, written by a writable handle's `close()` once the
//! write-ahead log is synced, saying how far the history goes (the last sequence number) and in
//! which log it ends. `close()` does not flush the memtable (as in RocksDB), so after a clean
//! close the newest writes live only in the log; recovery otherwise takes any damage to the
//! log's tail for a write a crash cut short, and would drop those writes without a word. With
//! the record, an open that recovers less than it names fails with `Corruption` naming the log,
//! and changes nothing.
//!
//! The record is deleted by the next writable open once recovery has put everything it names
//! into tables (best effort, not synced): a stale record, whether its deletion did not reach the
//! disk or a build without this check opened the database, names a sequence at or below what
//! any later recovery finds (sequence numbers only grow, and a writable open records the
//! recovered ones in the manifest before it deletes the record), so it can never fail an open.
//! A crash while the database is open leaves no record, and recovery keeps its usual rule (a
//! torn tail is a write that was never acknowledged as synced). Format: `docs/formats/kv.md`.

use crate::env::{write_file_atomic, Env};
use crate::error::{Error, Result};
use crate::util::filename;
use std::path::Path;

const MAGIC: &[u8; 8] = b"ATKVCLOS";
/// magic, last sequence (u64 LE), log number (u64 LE), crc32c of the first 24 bytes (u32 LE).
const LEN: usize = 28;

/// What a clean close recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CleanClose {
    /// The last sequence number written before the close; every write up to it was in a synced
    /// log (or in tables) when the record was written.
    pub last_sequence: u64,
    /// The write-ahead log the history ended in.
    pub log_number: u64,
}

impl CleanClose {
    fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[..8].copy_from_slice(MAGIC);
        b[8..16].copy_from_slice(&self.last_sequence.to_le_bytes());
        b[16..24].copy_from_slice(&self.log_number.to_le_bytes());
        let crc = crc32c::crc32c(&b[..24]);
        b[24..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<CleanClose> {
        if b.len() != LEN || &b[..8] != MAGIC {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        let crc = u32::from_le_bytes(b[24..28].try_into().unwrap_or_default());
        (crc == crc32c::crc32c(&b[..24])).then(|| CleanClose {
            last_sequence: word(8),
            log_number: word(16),
        })
    }

    /// Writes the record durably (temp file, sync, rename, directory sync).
    pub fn write(&self, env: &dyn Env, dir: &Path) -> Result<()> {
        write_file_atomic(env, &filename::clean_close_path(dir), &self.encode())
    }

    /// The record in `dir`, if one is there; a damaged one fails naming the file.
    pub fn read(env: &dyn Env, dir: &Path) -> Result<Option<CleanClose>> {
        let path = filename::clean_close_path(dir);
        if !env.exists(&path) {
            return Ok(None);
        }
        let data = env.read_all(&path)?;
        match CleanClose::decode(&data) {
            Some(c) => Ok(Some(c)),
            None => Err(Error::corruption(
                &path,
                0,
                format!(
                    "the clean-close record is damaged ({} bytes, expected {LEN} with a valid \
                     checksum); it only records where the write-ahead log ended at the last \
                     clean close: delete the file to open the database without that check",
                    data.len()
                ),
            )),
        }
    }

    /// Fails when recovery found less than the clean close recorded: `recovered` is the last
    /// sequence recovered from the manifest and the logs.
    pub fn check(&self, dir: &Path, recovered: u64) -> Result<()> {
        if recovered >= self.last_sequence {
            return Ok(());
        }
        let log = filename::log_path(dir, self.log_number);
        let name = log
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        Err(Error::corruption(
            &log,
            0,
            format!(
                "the database was closed cleanly after write {} (recorded in CLOSED), but its \
                 write-ahead logs hold writes only up to {recovered}: the log {name} is damaged, \
                 cut short or missing, and the newest {} writes are not in it; nothing was \
                 changed: restore the log from a backup, or accept the loss with \
                 attune.repair(path) (CLI: attune kv repair)",
                self.last_sequence,
                self.last_sequence - recovered
            ),
        ))
    }

    /// Removes the record (best effort: a stale one is harmless, see the module note).
    pub fn remove(env: &dyn Env, dir: &Path) {
        let _ = env.remove_file(&filename::clean_close_path(dir));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_a_flipped_byte_is_refused() {
        let c = CleanClose {
            last_sequence: 12_345,
            log_number: 7,
        };
        let b = c.encode();
        assert_eq!(CleanClose::decode(&b), Some(c));
        for i in 0..LEN {
            let mut d = b;
            d[i] ^= 0x10;
            assert_eq!(CleanClose::decode(&d), None, "byte {i}");
        }
        assert_eq!(CleanClose::decode(&b[..LEN - 1]), None);
    }

    #[test]
    fn recovering_less_than_recorded_names_the_log() {
        let c = CleanClose {
            last_sequence: 500,
            log_number: 9,
        };
        assert!(c.check(Path::new("/db"), 500).is_ok());
        assert!(c.check(Path::new("/db"), 600).is_ok());
        let e = c.check(Path::new("/db"), 100).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("000009.log") && s.contains("400 writes"), "{s}");
    }
}
