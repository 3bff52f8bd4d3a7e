//! Fuzz target `io_model`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::io_model` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::io_model(data);
});
