//! Fuzz target `version_edit`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::version_edit` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::version_edit(data);
});
