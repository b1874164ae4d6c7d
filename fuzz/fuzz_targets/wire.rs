#![no_main]
//! Fuzz target `wire`: see `exact_cache_fuzz_oracle::wire` for what it asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exact_cache_fuzz_oracle::wire(data);
});
