//! The record log used by the WAL and the manifest (format: docs/formats/wal.md).
//!
//! A log is a sequence of fragments:
//!
//! ```text
//! crc32c: fixed32 (over type byte + payload) | length: fixed32 | type: u8 | payload: length bytes
//! ```
//!
//! The checksum covers the length, the type and the payload. A record larger than
//! [`MAX_FRAGMENT_BYTES`] is split into FIRST, MIDDLE…, LAST fragments; a small one is a single
//! FULL fragment. Recovery reads records until the end. A damaged fragment (short header, length
//! past the end, checksum mismatch) followed by no valid fragment is a torn write from a crash and
//! is dropped with everything after it; a damaged fragment followed by a valid one cannot be a torn
//! write, so it is reported as corruption with the file and offset: a flipped byte in the middle of
//! a log never silently drops later writes. (A flipped byte in the very last record is
//! indistinguishable from a torn write; see docs/formats/wal.md.)

use crate::util::coding::decode_fixed32;

mod reader;
mod writer;

pub use reader::LogReader;
pub use writer::LogWriter;

/// Bytes of a fragment header.
pub const HEADER_BYTES: usize = 9;
/// Largest fragment payload: 4 MiB keeps a reader's per-fragment allocation bounded.
pub const MAX_FRAGMENT_BYTES: usize = 4 << 20;

const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;

fn fragment_crc(len: u32, kind: u8, payload: &[u8]) -> u32 {
    let mut head = [0u8; 5];
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4] = kind;
    crc32c::crc32c_append(crc32c::crc32c(&head), payload)
}

/// Whether a fragment with a valid checksum starts anywhere in `data` at or after `from`.
fn valid_fragment_after(data: &[u8], from: usize) -> bool {
    (from..data.len().saturating_sub(HEADER_BYTES - 1)).any(|p| {
        let rest = &data[p..];
        let crc = decode_fixed32(rest).unwrap_or(0);
        let len = decode_fixed32(&rest[4..]).unwrap_or(u32::MAX) as usize;
        let kind = rest[8];
        (FULL..=LAST).contains(&kind)
            && len <= MAX_FRAGMENT_BYTES
            && HEADER_BYTES + len <= rest.len()
            && fragment_crc(len as u32, kind, &rest[HEADER_BYTES..HEADER_BYTES + len]) == crc
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{Env, MemEnv};
    use crate::error::{Error, Result};
    use std::path::Path;

    fn write_log(records: &[Vec<u8>]) -> Vec<u8> {
        let env = MemEnv::new();
        let p = Path::new("/log");
        let mut w = LogWriter::new(env.new_writable(p).unwrap());
        for r in records {
            w.add_record(r).unwrap();
        }
        env.read_all(p).unwrap()
    }

    fn read_all(data: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut r = LogReader::new(data, Path::new("/log"));
        let mut out = Vec::new();
        while let Some((_, rec)) = r.next_record()? {
            out.push(rec);
        }
        Ok(out)
    }

    #[test]
    fn records_round_trip_including_fragmented_ones() {
        let recs = vec![
            b"a".to_vec(),
            vec![7u8; MAX_FRAGMENT_BYTES * 2 + 5],
            vec![],
            b"z".to_vec(),
        ];
        assert_eq!(read_all(&write_log(&recs)).unwrap(), recs);
    }

    #[test]
    fn torn_last_record_is_dropped() {
        let recs = vec![b"first".to_vec(), b"second record".to_vec()];
        let data = write_log(&recs);
        for cut in 1..(HEADER_BYTES + 13) {
            let got = read_all(&data[..data.len() - cut]).unwrap();
            assert_eq!(got, vec![b"first".to_vec()], "cut {cut}");
        }
    }

    #[test]
    fn flipped_byte_in_the_middle_is_corruption_with_offset() {
        let recs = vec![b"first".to_vec(), b"second".to_vec(), b"third".to_vec()];
        let mut data = write_log(&recs);
        let second_payload = HEADER_BYTES + 5 + HEADER_BYTES + 1;
        data[second_payload] ^= 0x40;
        let err = read_all(&data).unwrap_err();
        match err {
            Error::Corruption { offset, .. } => assert_eq!(offset, (HEADER_BYTES + 5) as u64),
            e => panic!("unexpected {e}"),
        }
    }

    #[test]
    fn damaged_length_in_the_middle_is_corruption_not_a_torn_tail() {
        let recs = vec![b"first".to_vec(), b"second".to_vec(), b"third".to_vec()];
        let mut data = write_log(&recs);
        data[HEADER_BYTES + 5 + 5] = 0x7f; // length of the second fragment now points past the end
        assert!(matches!(read_all(&data), Err(Error::Corruption { .. })));
    }

    #[test]
    fn zero_filled_tail_is_a_torn_write() {
        let mut data = write_log(&[b"only".to_vec()]);
        data.extend_from_slice(&[0u8; 100]);
        assert_eq!(read_all(&data).unwrap(), vec![b"only".to_vec()]);
    }
}
