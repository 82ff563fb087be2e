//! Inputs that once crashed a fuzz target (`cargo xtask fuzz` saves them under
//! `fuzz/regressions/<target>/`) are replayed through the same code on every `cargo test`; plus
//! the seed inputs kept in the repository.

#[path = "../../fuzz/bodies.rs"]
mod bodies;

use std::path::PathBuf;

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let mut v = vec![];
    for e in std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
    {
        if e.file_name() != ".keep" {
            v.push((e.path(), std::fs::read(e.path()).unwrap()));
        }
    }
    v
}

#[test]
fn saved_fuzz_inputs_replay_without_panicking() {
    std::env::set_var("LMBOOT_SHARED", xtask::shared_dir());
    let mut n = 0;
    for (target, f) in [
        ("gguf", bodies::gguf as fn(&[u8])),
        ("fat", bodies::fat),
        ("tokenizer", bodies::tokenizer),
        ("config", bodies::config),
    ] {
        for (path, data) in inputs(target) {
            eprintln!("replaying {}", path.display());
            f(&data);
            n += 1;
        }
        // Always exercise each body once, so the shared file cannot rot.
        f(b"\x00\x01GGUF\x03\x00\x00\x00");
    }
    eprintln!("{n} saved inputs replayed");
}
