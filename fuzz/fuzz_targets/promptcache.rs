//! Fuzz target: see `fuzz/bodies/promptcache.rs`.
#![no_main]

#[path = "../bodies/mod.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::promptcache::run(data));
