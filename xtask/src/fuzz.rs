//! `cargo xtask fuzz --seconds N [--target T]`: seed each fuzz target's corpus from real files (the
//! model's header, the quant and vocab fixtures, mkfs.fat images, the tokenizer test strings, a
//! config), run it under libFuzzer (cargo-fuzz, nightly) for N seconds, and copy any crash into
//! `fuzz/regressions/<target>/`, which `cargo test` replays.

use crate::{ensure_model, shared_dir, workspace_root};
use std::fs;
use std::path::Path;
use std::process::Command;

pub const TARGETS: [&str; 4] = ["gguf", "fat", "tokenizer", "config"];

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    fs::write(dir.join(name), bytes).map_err(|e| format!("{}: {e}", dir.join(name).display()))
}

/// Fill `fuzz/corpus/<target>/` with seeds (idempotent).
pub fn seed(target: &str) -> Result<(), String> {
    let dir = workspace_root().join("fuzz").join("corpus").join(target);
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let shared = shared_dir();
    match target {
        "gguf" => {
            let model = fs::read(ensure_model()?).map_err(|e| e.to_string())?;
            write(&dir, "model-head", &model[..(1 << 16).min(model.len())])?;
            for f in fs::read_dir(shared.join("fixtures/quant"))
                .map_err(|e| e.to_string())?
                .flatten()
            {
                let b = fs::read(f.path()).map_err(|e| e.to_string())?;
                write(
                    &dir,
                    &f.file_name().to_string_lossy(),
                    &b[..(1 << 16).min(b.len())],
                )?;
            }
        }
        "fat" => {
            // A small forced-FAT32 volume with a long-named file and a short one.
            let img = dir.join("mkfs-fat32.img");
            let tmp = std::env::temp_dir().join(format!("lmboot-fuzz-{}", std::process::id()));
            fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
            let _ = fs::remove_file(&img);
            let ok = Command::new("mkfs.fat")
                .args(["-F", "32", "-C", "-s", "1", "-S", "512", "--invariant"])
                .arg(&img)
                .arg("1024")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
            if !ok {
                return Err("mkfs.fat failed (run `cargo xtask setup`)".into());
            }
            fs::write(tmp.join("lmboot.txt"), "prompt = hi\n").map_err(|e| e.to_string())?;
            fs::write(tmp.join("a-long-file-name.gguf"), vec![7u8; 5000])
                .map_err(|e| e.to_string())?;
            for f in ["lmboot.txt", "a-long-file-name.gguf"] {
                let _ = Command::new("mcopy")
                    .arg("-i")
                    .arg(&img)
                    .arg(tmp.join(f))
                    .arg("::/")
                    .env("MTOOLS_SKIP_CHECK", "1")
                    .output();
            }
            let _ = fs::remove_dir_all(&tmp);
        }
        "tokenizer" => {
            for v in ["gpt-2", "llama-spm"] {
                let inp = fs::read_to_string(
                    shared.join(format!("fixtures/vocab/ggml-vocab-{v}.gguf.inp")),
                )
                .map_err(|e| e.to_string())?;
                for (i, s) in inp.split("\n__ggml_vocab_test__\n").enumerate() {
                    let sel = if v == "gpt-2" { 0u8 } else { 1 } | if i % 2 == 0 { 2 } else { 0 };
                    let mut b = vec![sel];
                    b.extend_from_slice(s.as_bytes());
                    write(&dir, &format!("{v}-{i}"), &b)?;
                }
            }
            write(&dir, "chat", b"\x06<|im_start|>user\nHi<|im_end|>\n")?;
        }
        "config" => {
            write(&dir, "full", b"model = /model.gguf\nprompt = Once\\nupon\nn = 32\ntemperature = 0.7\ntop_k = 40\ntop_p = 0.9\nmin_p = 0.05\nctx = 512\ncache = 64M\npage = 256K\ncores = all\nspecial = true\nkernels = auto\n")?;
            write(&dir, "empty", b"")?;
        }
        other => return Err(format!("unknown fuzz target {other}")),
    }
    Ok(())
}

/// Run `target` for `seconds`; returns the number of executions reported, and copies crashes.
pub fn run(target: &str, seconds: u64) -> Result<u64, String> {
    seed(target)?;
    let max_len = match target {
        "fat" => 1 << 20,
        "gguf" => 1 << 16,
        _ => 1 << 12,
    };
    let fuzz = workspace_root().join("fuzz");
    let out = Command::new("cargo")
        .current_dir(&fuzz)
        .args([
            "+nightly",
            "fuzz",
            "run",
            target,
            "--",
            &format!("-max_total_time={seconds}"),
            &format!("-max_len={max_len}"),
            "-print_final_stats=1",
        ])
        .output()
        .map_err(|e| format!("cargo fuzz: {e} (install with `cargo install cargo-fuzz`)"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let execs = err
        .lines()
        .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    // Keep crashes as regression inputs.
    let artifacts = fuzz.join("artifacts").join(target);
    let mut crashes = 0;
    if let Ok(rd) = fs::read_dir(&artifacts) {
        for f in rd.flatten() {
            let dst = fuzz.join("regressions").join(target).join(f.file_name());
            fs::copy(f.path(), &dst).map_err(|e| e.to_string())?;
            crashes += 1;
        }
    }
    if !out.status.success() || crashes > 0 {
        let tail: Vec<&str> = err.lines().rev().take(30).collect();
        return Err(format!("fuzz target {target} failed ({crashes} crash inputs saved to fuzz/regressions/{target}):\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
    }
    Ok(execs)
}
