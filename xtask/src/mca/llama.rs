//! llama.cpp's quant loops for comparison: ggml's CPU sources from the `llama-cpp-python` sdist
//! (pip downloads it into the cache; nothing of it enters the repository), compiled with
//! `clang-19 -O3 -S` for the modelled cores.

use crate::llamacpp::{run, unpack};
use std::path::{Path, PathBuf};
use std::process::Command;

/// ggml inside it.
const GGML: &str = "llama_cpp_python-0.3.36/vendor/llama.cpp/ggml";

/// One compiled C file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// `arch/arm/quants.c` for cortex-a53 (plain NEON).
    ArmA53,
    /// `arch/arm/quants.c` for cortex-a55 (with `__ARM_FEATURE_DOTPROD`).
    ArmA55,
    /// `arch/riscv/quants.c` for rv64gcv.
    Riscv,
    /// `ggml-quants.c` (the reference C code) for cortex-a53: Arm's `quantize_row_q8_K` in
    /// `arch/arm/quants.c` only calls its `quantize_row_q8_K_ref`.
    RefA53,
    /// `ggml-quants.c` for cortex-a55.
    RefA55,
}

impl Unit {
    fn file(self) -> &'static str {
        match self {
            Unit::ArmA53 | Unit::ArmA55 => "src/ggml-cpu/arch/arm/quants.c",
            Unit::Riscv => "src/ggml-cpu/arch/riscv/quants.c",
            Unit::RefA53 | Unit::RefA55 => "src/ggml-quants.c",
        }
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            Unit::ArmA53 | Unit::RefA53 => &["--target=aarch64-linux-gnu", "-mcpu=cortex-a53"],
            Unit::ArmA55 | Unit::RefA55 => &["--target=aarch64-linux-gnu", "-mcpu=cortex-a55"],
            // GNU-style `vsetivli` without policies in its inline asm: let clang pass asm through.
            Unit::Riscv => &[
                "--target=riscv64-linux-gnu",
                "-march=rv64gcv",
                "-fno-integrated-as",
            ],
        }
    }
}

/// Where the unit's assembly goes.
pub fn asm_path(u: Unit, dir: &Path) -> PathBuf {
    dir.join(format!("llama-{u:?}.s").to_lowercase())
}

/// ggml's source tree, downloading and unpacking the sdist first if needed.
fn ggml(dir: &Path) -> Result<PathBuf, String> {
    unpack(dir, GGML, "src/ggml-cpu/arch")
}

/// Compile `u` to assembly (`-O3 -S`, as llama.cpp's release build); its path.
pub fn compile(u: Unit, dir: &Path) -> Result<PathBuf, String> {
    let root = ggml(dir)?;
    let out = asm_path(u, dir);
    eprintln!("xtask: mca: compiling llama.cpp's {} ({u:?})", u.file());
    let mut c = Command::new("clang-19");
    c.args(u.flags())
        .args(["-O3", "-S", "-DNDEBUG", "-DGGML_USE_CPU"])
        .args(["-Iinclude", "-Isrc", "-Isrc/ggml-cpu"])
        .arg(u.file())
        .arg("-o")
        .arg(&out)
        .current_dir(&root);
    run(c, &format!("clang-19 {}", u.file()))?;
    Ok(out)
}
