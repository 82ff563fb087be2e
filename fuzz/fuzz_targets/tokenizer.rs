//! Fuzz target: see `fuzz/bodies/tokenizer.rs`.
#![no_main]

#[path = "../bodies/mod.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::tokenizer::run(data));
