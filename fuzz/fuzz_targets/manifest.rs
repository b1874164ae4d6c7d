#![no_main]
//! Fuzz target `manifest`: see `exact_cache_fuzz_oracle::manifest` for what it asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exact_cache_fuzz_oracle::manifest(data);
});
