//! Fuzz target `bloom_filter`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::bloom_filter` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::bloom_filter(data);
});
