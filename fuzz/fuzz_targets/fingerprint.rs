#![no_main]
//! Fuzz target `fingerprint`: see `exact_cache_fuzz_oracle::fingerprint` for what it asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exact_cache_fuzz_oracle::fingerprint(data);
});
