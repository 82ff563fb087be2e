//! Inputs that once crashed a fuzz target (`cargo xtask fuzz` saves them under
//! `fuzz/regressions/<target>/`) are replayed through the same code on every `cargo test`, each
//! within its target's allocation bound (the bodies count allocations with a global allocator).

#[path = "../../fuzz/bodies/mod.rs"]
mod bodies;

use std::path::PathBuf;

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let mut v = vec![];
    for e in std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (every target keeps a regressions folder)",
                dir.display()
            )
        })
        .flatten()
    {
        if e.file_name() != ".keep" {
            let data = std::fs::read(e.path())
                .unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
            v.push((e.path(), data));
        }
    }
    v.sort();
    v
}

#[test]
fn saved_fuzz_inputs_replay_without_panicking() {
    std::env::set_var("LMBOOT_SHARED", xtask::shared_dir());
    let mut n = 0;
    for (target, f) in bodies::TARGETS {
        for (path, data) in inputs(target) {
            eprintln!("replaying {}", path.display());
            f(&data);
            n += 1;
        }
        // Always exercise each body once, so the shared files cannot rot.
        f(b"\x00\x01GGUF\x03\x00\x00\x00");
    }
    eprintln!("{n} saved inputs replayed");
    // In the same test: the allocation counter is global, so no other test may run beside it.
    every_target_has_a_regressions_folder_and_xtask_knows_it();
    the_allocation_bound_catches_a_run_over_it();
}

fn every_target_has_a_regressions_folder_and_xtask_knows_it() {
    let names: Vec<&str> = bodies::TARGETS.iter().map(|t| t.0).collect();
    assert_eq!(
        names,
        xtask::fuzz::TARGETS,
        "fuzz/bodies and xtask list other targets"
    );
    for t in names {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/regressions")
            .join(t);
        assert!(
            dir.join(".keep").exists(),
            "{} lacks its .keep",
            dir.display()
        );
    }
}

fn the_allocation_bound_catches_a_run_over_it() {
    let r = std::panic::catch_unwind(|| bodies::peak::bounded("test", 1000, || vec![0u8; 5000]));
    assert!(
        r.is_err(),
        "a 5000-byte allocation passed a 1000-byte bound"
    );
    let peak = bodies::peak::peak_of(|| drop(vec![0u8; 5000]));
    assert!(
        peak >= 5000,
        "the peak of a 5000-byte allocation was counted as {peak}"
    );
}
