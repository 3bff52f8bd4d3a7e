//! Fuzz target `plush_log_entry`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::plush_log_entry` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::plush_log_entry(data);
});
