//! Fuzz target `vlog_segment`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::vlog_segment` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::vlog_segment(data);
});
