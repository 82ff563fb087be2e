//! Fuzz target: see `fuzz/bodies/chat.rs`.
#![no_main]

#[path = "../bodies/mod.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::chat::run(data));
