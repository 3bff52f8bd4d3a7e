//! Fuzz target `log_fragments`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::log_fragments` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::log_fragments(data);
});
