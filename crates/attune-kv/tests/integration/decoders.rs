//! Every decoder of on-disk bytes takes arbitrary input without panicking: random bytes and
//! mutations (flips, truncations, extensions) of valid encodings either decode or return an error.
//! (The cargo-fuzz targets of the reliability work will run the same decoders for longer.)

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_kv::env::{Env, MemEnv};
use attune_kv::internals::Footer;
use attune_kv::internals::InternalIterator;
use attune_kv::internals::{make_internal_key, ValueKind};
use attune_kv::internals::{Block, BlockBuilder, BlockIter};
use attune_kv::internals::{FileMeta, VersionEdit};
use attune_kv::internals::{LogReader, LogWriter};
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn valid_log() -> Vec<u8> {
    let env = MemEnv::new();
    let p = Path::new("/l");
    let mut w = LogWriter::new(env.new_writable(p).unwrap());
    for i in 0..5u8 {
        w.add_record(&vec![i; 10 + i as usize * 7]).unwrap();
    }
    env.read_all(p).unwrap()
}

fn valid_block() -> Vec<u8> {
    let mut b = BlockBuilder::default();
    for i in 0..20u32 {
        b.add(
            &make_internal_key(format!("k{i:04}").as_bytes(), 7, ValueKind::Value),
            b"value",
        );
    }
    b.finish()
}

fn valid_edit() -> Vec<u8> {
    let mut e = VersionEdit {
        log_number: Some(3),
        next_file_number: Some(9),
        ..Default::default()
    };
    e.add_file(
        1,
        FileMeta {
            number: 5,
            size: 100,
            smallest: make_internal_key(b"a", 1, ValueKind::Value),
            largest: make_internal_key(b"z", 2, ValueKind::Value),
            num_entries: 2,
            table: Default::default(),
        },
    );
    e.delete_file(2, 4);
    e.encode()
}

fn mutate(mut data: Vec<u8>, flips: &[(usize, u8)], cut: usize, extra: &[u8]) -> Vec<u8> {
    for &(at, x) in flips {
        if !data.is_empty() {
            let n = data.len();
            data[at % n] ^= x;
        }
    }
    data.truncate(data.len().saturating_sub(cut));
    data.extend_from_slice(extra);
    data
}

fn read_log(data: &[u8]) {
    let mut r = LogReader::new(data, Path::new("/l"));
    for _ in 0..10_000 {
        match r.next_record() {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
    panic!("log reader did not terminate");
}

fn walk_block(data: Vec<u8>) {
    if let Ok(b) = Block::new(data, Arc::new(PathBuf::from("/t")), 0) {
        let b = Arc::new(b);
        let mut it = BlockIter::new(b.clone());
        it.seek_to_first();
        let mut n = 0;
        while it.valid() && n < 10_000 {
            let _ = (it.key(), it.value());
            it.next();
            n += 1;
        }
        it.seek(&make_internal_key(b"k0010", 9, ValueKind::Value));
        it.seek_to_last();
        it.prev();
        for i in 0..b.len().min(50) {
            let _ = b.entry(i);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn log_reader_survives_mutations(flips in prop::collection::vec((any::<usize>(), 1u8..), 0..4),
                                     cut in 0usize..64, extra in prop::collection::vec(any::<u8>(), 0..32)) {
        read_log(&mutate(valid_log(), &flips, cut, &extra));
    }

    #[test]
    fn log_reader_survives_random_bytes(data in prop::collection::vec(any::<u8>(), 0..512)) {
        read_log(&data);
    }

    #[test]
    fn block_decoder_survives_mutations(flips in prop::collection::vec((any::<usize>(), 1u8..), 0..4),
                                        cut in 0usize..16, extra in prop::collection::vec(any::<u8>(), 0..16)) {
        walk_block(mutate(valid_block(), &flips, cut, &extra));
    }

    #[test]
    fn block_decoder_survives_random_bytes(data in prop::collection::vec(any::<u8>(), 0..512)) {
        walk_block(data);
    }

    #[test]
    fn version_edit_decoder_survives_mutations(flips in prop::collection::vec((any::<usize>(), 1u8..), 0..4),
                                               cut in 0usize..16, extra in prop::collection::vec(any::<u8>(), 0..16)) {
        let _ = VersionEdit::decode(&mutate(valid_edit(), &flips, cut, &extra));
    }

    #[test]
    fn footer_decoder_survives_random_bytes(data in prop::collection::vec(any::<u8>(), 64..=64)) {
        let _ = Footer::decode(&data, Path::new("/t"), 0);
    }
}

proptest! {
    // Each case opens a database: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn batch_in_wal_survives_mutations(flips in prop::collection::vec((any::<usize>(), 1u8..), 1..4)) {
        // A damaged batch inside an intact WAL record: recovery must fail cleanly, never panic.
        let env = MemEnv::new();
        let dir = Path::new("/db");
        {
            let db = attune_kv::DB::open_with_env(Arc::new(env.clone()) as Arc<dyn Env>, dir,
                attune_kv::Options { wal_sync_interval_ms: 0, ..Default::default() }).unwrap();
            for i in 0..20u32 {
                db.put(format!("k{i}").as_bytes(), b"v").unwrap();
            }
        }
        let log = env.list_dir(dir).unwrap().into_iter().filter(|n| n.ends_with(".log")).max().unwrap();
        let path = dir.join(&log);
        let data = env.read_all(&path).unwrap();
        if data.is_empty() { return Ok(()); }
        for &(at, x) in &flips {
            env.corrupt_byte(&path, at % data.len(), x);
        }
        let _ = attune_kv::DB::open_with_env(Arc::new(env.clone()) as Arc<dyn Env>, dir, Default::default());
    }
}
