//! Fuzz target: see `fuzz/bodies/json.rs`.
#![no_main]

#[path = "../bodies/mod.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::json::run(data));
