#![no_main]
//! Fuzz target `unpack`: see `exact_cache::fuzzing::unpack` for what it asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exact_cache::fuzzing::unpack(data);
});
