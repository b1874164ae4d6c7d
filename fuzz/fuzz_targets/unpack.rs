#![no_main]
//! Fuzz target `unpack`: see `exact_cache_fuzz_oracle::unpack` for what it asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exact_cache_fuzz_oracle::unpack(data);
});
