//! Fuzz target: see `fuzz/bodies/sdregs.rs`.
#![no_main]

#[path = "../bodies/mod.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::sdregs::run(data));
