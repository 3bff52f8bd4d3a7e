//! Fuzz target `index_block`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::index_block` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::index_block(data);
});
