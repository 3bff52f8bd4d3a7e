//! Fuzz target `sstable_footer`: arbitrary bytes into the decoder harness
//! `attune_stress::decoders::sstable_footer` (the same function the property tests run).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    attune_stress::decoders::sstable_footer(data);
});
