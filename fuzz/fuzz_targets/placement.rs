#![no_main]
//! Fuzz target `placement`: see `exact_cache_fuzz_oracle::placement` for what it asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exact_cache_fuzz_oracle::placement(data);
});
