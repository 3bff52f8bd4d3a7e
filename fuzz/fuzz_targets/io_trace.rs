//! Fuzz target `io_trace`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::io_trace` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::io_trace(data);
});
