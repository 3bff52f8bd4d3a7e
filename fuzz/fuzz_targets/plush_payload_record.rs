//! Fuzz target `plush_payload_record`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::plush_payload_record` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::plush_payload_record(data);
});
