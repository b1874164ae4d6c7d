#![no_main]
//! Fuzz target `manifest`: see `exact_cache::fuzzing::manifest` for what it asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exact_cache::fuzzing::manifest(data);
});
