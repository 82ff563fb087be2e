//! The code each fuzz target runs, shared by the fuzz binaries (`fuzz/fuzz_targets/`) and the
//! regression test that replays saved crash inputs (`tests/tests/fuzz_regressions.rs`): one module
//! per target, each with `run(data)` and `MAX_ALLOC`, the most one run may allocate at its peak
//! ([`peak`] counts every allocation and fails the run above it).
#![allow(dead_code)]

pub mod bytes;
pub mod peak;
pub mod vocab;

pub mod chat;
pub mod config;
pub mod fat;
pub mod fdt;
pub mod gguf;
pub mod json;
pub mod promptcache;
pub mod ring;
pub mod sdregs;
pub mod tokenizer;

/// A target's body: one run over one input.
pub type Body = fn(&[u8]);

/// Every target: its name (as `cargo fuzz run` and `fuzz/regressions/` know it) and its body.
pub const TARGETS: [(&str, Body); 10] = [
    ("gguf", gguf::run),
    ("fat", fat::run),
    ("tokenizer", tokenizer::run),
    ("config", config::run),
    ("ring", ring::run),
    ("fdt", fdt::run),
    ("promptcache", promptcache::run),
    ("sdregs", sdregs::run),
    ("chat", chat::run),
    ("json", json::run),
];
