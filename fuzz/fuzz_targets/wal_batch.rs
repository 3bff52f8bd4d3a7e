//! Fuzz target `wal_batch`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::wal_batch` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::wal_batch(data);
});
