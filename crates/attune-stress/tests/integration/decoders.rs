//! The property-test twin of every fuzz target in `fuzz/`: each decoder harness of
//! `attune_stress::decoders` gets random bytes and mutations (bit flips, truncations, appended
//! bytes) of valid encodings and must return without panicking. proptest prints the failing
//! input and its seed; `PROPTEST_CASES=N` runs more.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is the failure report

use attune_stress::decoders::{self, seeds, TARGETS};
use proptest::prelude::*;

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

fn mutated_seed(target: &str) -> impl Strategy<Value = Vec<u8>> {
    let s = seeds(target);
    assert!(!s.is_empty(), "{target} has no seed");
    (
        0..s.len(),
        prop::collection::vec((any::<usize>(), 1u8..), 0..4),
        0usize..32,
        prop::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(move |(i, flips, cut, extra)| mutate(s[i].clone(), &flips, cut, &extra))
}

macro_rules! decoder_props {
    ($($name:ident),*) => {
        mod random_bytes {
            use super::*;
            proptest! {
                #![proptest_config(ProptestConfig::with_cases(1000))]
                $(
                    #[test]
                    fn $name(data in prop::collection::vec(any::<u8>(), 0..600)) {
                        decoders::$name(&data);
                    }
                )*
            }
        }
        mod mutated_valid_encodings {
            use super::*;
            $(
                proptest! {
                    #![proptest_config(ProptestConfig::with_cases(1000))]
                    #[test]
                    fn $name(data in mutated_seed(stringify!($name))) {
                        decoders::$name(&data);
                    }
                }
            )*
        }
    };
}

decoder_props!(
    log_fragments,
    wal_batch,
    sstable_footer,
    block,
    index_block,
    bloom_filter,
    version_edit,
    vlog_segment,
    learned_model,
    level_model,
    plush_log_entry,
    plush_recovery,
    io_model,
    io_trace
);

#[test]
fn every_target_has_a_harness_and_a_seed_that_decodes() {
    for t in TARGETS {
        assert!(decoders::run(t, b""), "{t}: no harness");
        for s in seeds(t) {
            assert!(decoders::run(t, &s));
        }
    }
    assert!(!decoders::run("no_such_target", b""));
}

#[test]
fn seeds_are_valid_encodings() {
    use attune_kv::internals::VersionEdit;
    assert!(attune_kv::WriteBatch::decode(&seeds("wal_batch")[0]).is_some());
    assert!(VersionEdit::decode(&seeds("version_edit")[0]).is_some());
    let lm = &seeds("level_model")[0];
    assert!(attune_kv::internals::LevelModel::decode(lm, std::path::Path::new("/l")).is_ok());
    let log = &seeds("log_fragments")[0];
    let mut r = attune_kv::internals::LogReader::new(log, std::path::Path::new("/l"));
    let mut n = 0;
    while let Ok(Some(_)) = r.next_record() {
        n += 1;
    }
    assert_eq!(n, 4);
    assert!(attune_io::model::MlpFile::decode(&seeds("io_model")[0]).is_ok());
    for t in seeds("io_trace") {
        let f = attune_io::trace::TraceFormat::sniff(&t);
        assert_eq!(attune_io::trace::read_trace(&t, f).unwrap().len(), 2);
    }
}

/// Regression (found by the `index_block` fuzz target): an index whose first block claims to start
/// at an ordinal past the one asked for made `Table::entry_at` subtract with overflow (a panic in
/// debug builds, a wild index in release); it is now a corruption error.
#[test]
fn index_whose_first_ordinal_is_past_the_position_is_corruption_not_a_panic() {
    let crash: &[u8] = &[
        0x0d, 0x06, 0x00, 0x30, 0x30, 0x30, 0x30, 0x41, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x8f, 0x00, 0x0d, 0x03, 0x6b, 0x30, 0x30, 0x30, 0x31, 0x01, 0x05, 0x6b, 0x30, 0x5b,
        0x05, 0x01, 0x32, 0x00, 0x3e, 0x63, 0x00, 0x00, 0x00, 0x5b, 0x00, 0x5a, 0x00, 0xc8, 0x01,
        0x14, 0x00, 0x00, 0x00, 0x00, 0x12, 0x00, 0x00, 0x00, 0x29, 0x00, 0x00, 0x00, 0x03, 0x00,
        0x00, 0x00,
    ];
    decoders::index_block(crash);
    let table = decoders::table_with_index(crash).expect("the table opens");
    // As in the harness: lookups first, which cache the block entry_at then finds.
    for k in [&b"a"[..], b"k0010", b"zz"] {
        let ikey =
            attune_kv::internals::make_internal_key(k, 1, attune_kv::internals::ValueKind::Value);
        let _ = table.get(&ikey);
    }
    let results: Vec<_> = (0..3).map(|p| table.entry_at(p)).collect();
    assert!(
        results
            .iter()
            .any(|r| r.as_ref().is_err_and(|e| e.is_corruption())),
        "no corruption reported: {results:?}"
    );
}

/// The `learned_model` fuzz target's first crash: a checksum-valid model with positions past
/// 2^53 whose f64 rounding crossed the window's bounds (an inverted window). attune-learn now
/// never returns one.
#[test]
fn hostile_learned_model_never_predicts_an_inverted_window() {
    let data = include_bytes!("../regressions/learned_model_inverted_window.bin");
    decoders::learned_model(data);
}
