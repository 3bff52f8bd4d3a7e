//! Fuzz target `plush_recovery`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::plush_recovery` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::plush_recovery(data);
});
