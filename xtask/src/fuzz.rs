//! `cargo xtask fuzz --seconds N [--target T]`: seed each fuzz target's corpus from real data (the
//! model's header, the quant and vocab fixtures, a mkfs.fat image, the tokenizer test strings, a
//! config, device trees QEMU dumps and the Pi's, and what the repository's own writers produce:
//! ring traffic, a prompt-cache file, the SD simulator's registers, chat keystrokes, JSON as
//! tokens, written by `tests/tests/fuzz_seeds.rs`), run it under libFuzzer (cargo-fuzz, nightly)
//! for N seconds, and copy any crash into `fuzz/regressions/<target>/`, which `cargo test`
//! replays.

use crate::{ensure_model, shared_dir, workspace_root};
use std::fs;
use std::path::Path;
use std::process::Command;

/// Every fuzz target, as `fuzz/Cargo.toml` and `fuzz/bodies/mod.rs` name them.
pub const TARGETS: [&str; 10] = [
    "gguf",
    "fat",
    "tokenizer",
    "config",
    "ring",
    "fdt",
    "promptcache",
    "sdregs",
    "chat",
    "json",
];

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
        "fat" => fat_seed(&dir)?,
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
        "fdt" => fdt_seeds(&dir)?,
        "ring" | "promptcache" | "sdregs" | "chat" | "json" => written_seeds()?,
        other => return Err(format!("unknown fuzz target {other}")),
    }
    Ok(())
}

/// A small FAT32 volume (1 MiB, the fat target's card size, 512-byte clusters; `mkfs.fat`) with
/// a short-named file, a long-named one over ten clusters and a directory holding a file, its
/// trailing zeros cut: the fat target reads zeros past its input.
fn fat_seed(dir: &Path) -> Result<(), String> {
    let img = std::env::temp_dir().join(format!("lmboot-fuzz-{}.img", std::process::id()));
    let _ = fs::remove_file(&img);
    let ok = Command::new("mkfs.fat")
        .args(["-F", "32", "-C", "-s", "1", "-S", "512", "--invariant"])
        .arg(&img)
        .arg("1024")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    let bytes = fs::read(&img);
    let _ = fs::remove_file(&img);
    let mut v = match (ok, bytes) {
        (true, Ok(b)) => b,
        _ => return Err("mkfs.fat failed (run `cargo xtask setup`)".into()),
    };
    add_files(&mut v)?;
    let used = v.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    v.truncate(used.div_ceil(512) * 512);
    write(dir, "mkfs-fat32.img", &v)
}

/// Put the seed's files on an empty FAT32 volume of one-sector clusters, by hand: mtools and the
/// `fatfs` crate both take a volume this small for FAT12 (they go by the cluster count, the
/// kernel's reader by the boot sector's FAT32 fields) and will not write it.
fn add_files(v: &mut [u8]) -> Result<(), String> {
    let u16_at = |v: &[u8], o: usize| u16::from_le_bytes([v[o], v[o + 1]]) as usize;
    let u32_at = |v: &[u8], o: usize| u32::from_le_bytes([v[o], v[o + 1], v[o + 2], v[o + 3]]);
    if u16_at(v, 11) != 512 || v[13] != 1 {
        return Err("fat seed: mkfs.fat made other than 512-byte clusters".into());
    }
    let (reserved, fats, fat_sectors) = (u16_at(v, 14), v[16] as usize, u32_at(v, 36) as usize);
    let data = (reserved + fats * fat_sectors) * 512;
    let cluster = |c: u32| data + (c as usize - 2) * 512;
    let link = |v: &mut [u8], c: u32, next: u32| {
        for f in 0..fats {
            let at = (reserved + f * fat_sectors) * 512 + 4 * c as usize;
            v[at..at + 4].copy_from_slice(&next.to_le_bytes());
        }
    };
    // Clusters: 3 the short file, 4..=13 the long one, 14 the directory, 15 its file.
    let long = [7u8; 5000];
    let files: [(&[u8], u32, u32); 3] = [
        (b"prompt = hi\n", 3, 3),
        (&long, 4, 13),
        (b"n = 8\n", 15, 15),
    ];
    for (content, first, last) in files {
        for c in first..=last {
            link(v, c, if c == last { 0x0FFF_FFFF } else { c + 1 });
            let off = (c - first) as usize * 512;
            let part = &content[off.min(content.len())..(off + 512).min(content.len())];
            v[cluster(c)..cluster(c) + part.len()].copy_from_slice(part);
        }
    }
    link(v, 14, 0x0FFF_FFFF);
    let entry = |name: &[u8; 11], attr: u8, c: u32, size: u32| {
        let mut e = [0u8; 32];
        e[..11].copy_from_slice(name);
        e[11] = attr;
        e[20..22].copy_from_slice(&((c >> 16) as u16).to_le_bytes());
        e[26..28].copy_from_slice(&(c as u16).to_le_bytes());
        e[28..32].copy_from_slice(&size.to_le_bytes());
        e
    };
    let short = *b"A-LONG~1GGU";
    let mut root = vec![entry(b"LMBOOT  TXT", 0x20, 3, 12)];
    root.extend(lfn("a-long-file-name.gguf", &short));
    root.push(entry(&short, 0x20, 4, long.len() as u32));
    root.push(entry(b"A          ", 0x10, 14, 0));
    let sub = [
        entry(b".          ", 0x10, 14, 0),
        entry(b"..         ", 0x10, 0, 0),
        entry(b"LMBOOT  TXT", 0x20, 15, 6),
    ];
    // The root directory is cluster 2 (mkfs.fat), empty but for a possible label.
    let root_at = cluster(u32_at(v, 44));
    let free = (0..16).find(|i| v[root_at + 32 * i] == 0).unwrap_or(16);
    for (i, e) in root.iter().enumerate().take(16 - free) {
        let at = root_at + 32 * (free + i);
        v[at..at + 32].copy_from_slice(e);
    }
    for (i, e) in sub.iter().enumerate() {
        v[cluster(14) + 32 * i..cluster(14) + 32 * (i + 1)].copy_from_slice(e);
    }
    Ok(())
}

/// The long-name entries for `name` (before its short entry `short`), last part first.
fn lfn(name: &str, short: &[u8; 11]) -> Vec<[u8; 32]> {
    let sum = short
        .iter()
        .fold(0u8, |s, &c| s.rotate_right(1).wrapping_add(c));
    let mut units: Vec<u16> = name.encode_utf16().collect();
    units.push(0);
    while !units.len().is_multiple_of(13) {
        units.push(0xFFFF);
    }
    let parts = units.len() / 13;
    (0..parts)
        .rev()
        .map(|p| {
            let mut e = [0u8; 32];
            e[0] = (p + 1) as u8 | if p + 1 == parts { 0x40 } else { 0 };
            e[11] = 0x0F;
            e[13] = sum;
            let slots = (1..11)
                .step_by(2)
                .chain((14..26).step_by(2))
                .chain((28..32).step_by(2));
            for (slot, &u) in slots.zip(&units[13 * p..13 * p + 13]) {
                e[slot..slot + 2].copy_from_slice(&u.to_le_bytes());
            }
            e
        })
        .collect()
}

/// Device trees: QEMU's `virt` machines' (dumped by QEMU itself, packed), and the Pi's from the
/// cache when `cargo xtask setup` has fetched them.
fn fdt_seeds(dir: &Path) -> Result<(), String> {
    let machines = [
        (
            "qemu-system-aarch64",
            &["-cpu", "cortex-a72", "-m", "1G"][..],
        ),
        ("qemu-system-riscv64", &["-m", "512M", "-smp", "2"][..]),
    ];
    let mut made = 0;
    for (qemu, args) in machines {
        let tmp = std::env::temp_dir().join(format!("lmboot-fuzz-{}.dtb", std::process::id()));
        let _ = fs::remove_file(&tmp);
        let _ = Command::new(qemu)
            .arg("-machine")
            .arg(format!("virt,dumpdtb={}", tmp.display()))
            .args(args)
            .args(["-nic", "none", "-display", "none"])
            .output();
        if let Ok(b) = fs::read(&tmp) {
            write(dir, &format!("{qemu}-virt.dtb"), &pack(b))?;
            made += 1;
        }
        let _ = fs::remove_file(&tmp);
    }
    for (name, _) in crate::dtb::DTBS {
        if let Ok(b) = crate::dtb::read(name) {
            write(dir, name, &b)?;
            made += 1;
        }
    }
    if made == 0 {
        return Err("no device tree to seed the fdt target (QEMU missing?)".into());
    }
    Ok(())
}

/// A device tree cut to the end of its last block, its total size made so (QEMU's `virt` trees
/// are padded to 1 MiB, which would make every run of the target walk past the tree).
fn pack(mut b: Vec<u8>) -> Vec<u8> {
    let word = |b: &[u8], i: usize| {
        b.get(4 * i..4 * i + 4)
            .map_or(0, |w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]) as usize)
    };
    // Header words: 2 structure offset, 3 strings offset, 8 strings size, 9 structure size.
    let end = (word(&b, 2) + word(&b, 9)).max(word(&b, 3) + word(&b, 8));
    if end >= 40 && end <= b.len() {
        b.truncate(end.div_ceil(8) * 8);
        let total = (b.len() as u32).to_be_bytes();
        b[4..8].copy_from_slice(&total);
    }
    b
}

/// The seeds `tests/tests/fuzz_seeds.rs` makes with the repository's own writers, for every
/// target it knows, into `fuzz/corpus/`.
fn written_seeds() -> Result<(), String> {
    let corpus = workspace_root().join("fuzz").join("corpus");
    let out = Command::new("cargo")
        .current_dir(workspace_root())
        .args(["test", "-p", "lmboot-tests", "--test", "fuzz_seeds"])
        .env("LMBOOT_FUZZ_SEEDS", &corpus)
        .output()
        .map_err(|e| format!("cargo test: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "writing the fuzz seeds failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// The largest input libFuzzer makes for `target`: room for its seeds, no more (longer inputs
/// only slow every run down).
pub fn max_len(target: &str) -> usize {
    match target {
        // The seed volume's used part is about 40 KiB; the rest of the card reads as zeros.
        "fat" => 48 << 10,
        "gguf" => 64 << 10,
        // The Pi 4's tree is 27 KiB.
        "fdt" => 32 << 10,
        // Many frames (the seeds' are a few hundred bytes each).
        "ring" => 4 << 10,
        "sdregs" => 97,
        "promptcache" => 1 << 11,
        // 512 tokens.
        "json" => 1 << 10,
        _ => 1 << 12,
    }
}

/// Targets built without libFuzzer's comparison tracing. The json, chat and tokenizer targets'
/// hot loops (the JSON automaton over every token of the vocabulary, the line editor and the
/// tokenizers over every byte) compare bytes against a grammar or a vocabulary, not against the
/// input's magic numbers; tracing each comparison took 60% of the json target's time (12 k runs
/// per CPU second, 34 k without). The fdt and ring targets start from seeds that carry their
/// magic numbers (real device trees; frames the body builds itself, CRC included), and tracing
/// took 78% and 63% of their time (perf): from the same corpus over 60 s, fdt went from 16 k to
/// 75 k runs per second and reached 214 edges against 207 (and found a sum overflow in
/// `RamBlocks::total` the traced campaigns had missed), ring from 12 k to 46 k at the same 890.
pub const NO_TRACE_COMPARES: [&str; 5] = ["json", "chat", "tokenizer", "fdt", "ring"];

/// Run `target` for `seconds`; returns the number of executions reported, and copies crashes.
pub fn run(target: &str, seconds: u64) -> Result<u64, String> {
    seed(target)?;
    let max_len = max_len(target);
    let fuzz = workspace_root().join("fuzz");
    // Crashes of earlier runs were copied to fuzz/regressions/ then; only this run's count.
    let artifacts = fuzz.join("artifacts").join(target);
    let _ = fs::remove_dir_all(&artifacts);
    let mut args = vec![
        "+nightly",
        "fuzz",
        "run",
        // No AddressSanitizer: every parser fuzzed is safe Rust (`forbid(unsafe_code)` in
        // fat, fdt, ram, ring; none in the rest of the parsing paths), so an out-of-bounds
        // read is already a bounds-check panic, and ASan's shadow memory only halved the
        // executions per second. Overflow checks stay on (debug assertions).
        "--sanitizer=none",
        "--debug-assertions",
    ];
    if NO_TRACE_COMPARES.contains(&target) {
        // Built apart, so that switching targets does not rebuild every dependency.
        args.extend([
            "--no-trace-compares",
            "--target-dir",
            "target/no-trace-compares",
        ]);
    }
    let limits = [
        format!("-max_total_time={seconds}"),
        format!("-max_len={max_len}"),
        "-print_final_stats=1".to_string(),
    ];
    let out = Command::new("cargo")
        .current_dir(&fuzz)
        .args(args)
        .args([target, "--"])
        .args(limits)
        .output()
        .map_err(|e| format!("cargo fuzz: {e} (install with `cargo install cargo-fuzz`)"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let execs = err
        .lines()
        .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    // Keep crashes as regression inputs.
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
