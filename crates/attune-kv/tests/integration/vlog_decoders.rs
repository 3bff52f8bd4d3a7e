//! The value-log decoders take arbitrary bytes without panicking: segment scans of random and
//! mutated segment images stop at the first bad record, record and pointer decoding return an
//! error, and version edits with value-log fields round-trip.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_kv::env::{Env, MemEnv};
use attune_kv::internals::VersionEdit;
use attune_kv::internals::VlogWriter;
use attune_kv::internals::{decode_record, encode_record, BlobPointer, SegmentScanner};
use proptest::prelude::*;
use std::path::Path;

fn valid_segment() -> Vec<u8> {
    let env = MemEnv::new();
    let dir = Path::new("/d");
    env.create_dir_all(dir).unwrap();
    let mut w = VlogWriter::create(&env, dir, 3).unwrap();
    for i in 0..6u8 {
        w.add(&[b'k', i], &vec![i; 50 * i as usize]);
    }
    w.sync().unwrap();
    env.read_all(&dir.join("000003.vlog")).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn segment_scan_never_panics_on_mutations(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
        extra in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut seg = valid_segment();
        for (at, x) in flips {
            let n = seg.len();
            seg[at % n] ^= x;
        }
        seg.truncate(cut % (seg.len() + 1));
        seg.extend_from_slice(&extra);
        if let Ok(scan) = SegmentScanner::new(Path::new("/s"), &seg) {
            let mut last = 0;
            for (off, len, _, _) in scan {
                prop_assert!(off >= last);
                last = off + u64::from(len);
                prop_assert!(last <= seg.len() as u64);
            }
        }
    }

    #[test]
    fn record_and_pointer_decoding_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_record(&bytes);
        let _ = BlobPointer::decode(&bytes);
        let _ = VersionEdit::decode(&bytes);
    }

    #[test]
    fn records_round_trip(key in proptest::collection::vec(any::<u8>(), 0..40),
                          value in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut buf = Vec::new();
        let n = encode_record(&mut buf, &key, &value);
        prop_assert_eq!(n, buf.len());
        let (k, v) = decode_record(&buf).unwrap();
        prop_assert_eq!(k, &key[..]);
        prop_assert_eq!(v, &value[..]);
    }
}

#[test]
fn version_edits_with_value_log_fields_round_trip() {
    let e = VersionEdit {
        blob_files_added: vec![5, 9],
        blob_files_sealed: vec![(5, 4096)],
        blob_garbage: vec![(5, 100), (9, 7)],
        blob_files_deleted: vec![2],
        ..Default::default()
    };
    assert_eq!(VersionEdit::decode(&e.encode()), Some(e));
}
