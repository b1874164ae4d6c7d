#![no_main]
//! Fuzz target `placement`: see `exact_cache::fuzzing::placement` for what it asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exact_cache::fuzzing::placement(data);
});
