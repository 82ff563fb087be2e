//! Turns the board description `boards/$LMBOOT_BOARD.toml` into constants (`board.rs` in OUT_DIR)
//! and the architecture's linker script into one with the board's addresses, through the board
//! schema (`boards/src`): an unknown, missing or mistyped key stops the build with the file, the
//! key and its line. Host builds (tests) skip all of this.

use std::env;
use std::fs;
use std::path::PathBuf;

/// Stack bytes per core.
const STACK_SIZE: u64 = 512 * 1024;

fn main() {
    println!("cargo:rerun-if-env-changed=LMBOOT_BOARD");
    println!("cargo:rerun-if-env-changed=LMBOOT_QEMU");
    println!("cargo:rerun-if-changed=build.rs");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os != "none" {
        return;
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().unwrap().to_path_buf();
    let default = match arch.as_str() {
        "aarch64" => "qemu-virt-aarch64",
        "riscv64" => "qemu-virt-riscv64",
        "arm" => "rpi2",
        other => panic!("no default board for architecture {other}"),
    };
    let name = env::var("LMBOOT_BOARD").unwrap_or_else(|_| default.into());
    let path = root.join("boards").join(format!("{name}.toml"));
    println!("cargo:rerun-if-changed={}", path.display());
    let board = boards::load(&path).unwrap_or_else(|e| fail(&e));
    if board.arch.name() != arch {
        let b = board.arch.name();
        fail(&format!(
            "{}: arch = \"{b}\", but the kernel is being built for {arch}",
            path.display()
        ));
    }
    let qemu = env::var("LMBOOT_QEMU").is_ok_and(|v| v == "1");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    fs::write(
        out.join("board.rs"),
        board.kernel_constants(qemu, STACK_SIZE),
    )
    .unwrap();

    let script = root.join("linker").join(format!("{arch}.ld"));
    println!("cargo:rerun-if-changed={}", script.display());
    let body = fs::read_to_string(&script).unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    let ld = format!("{}{body}", board.linker_symbols(STACK_SIZE));
    fs::write(out.join("link.ld"), ld).unwrap();
    println!(
        "cargo:rustc-link-arg-bins=-T{}",
        out.join("link.ld").display()
    );
    println!("cargo:rustc-env=LMBOOT_STACK_SIZE={STACK_SIZE}");
}

/// Stop the build with `message` (the file, the key and its line), without a backtrace.
fn fail(message: &str) -> ! {
    eprintln!("board description: {message}");
    std::process::exit(1)
}
