//! The lmboot kernel binary. On a board (`target_os = "none"`): the boot path in `arch/`, then
//! [`lmboot_main`] brings up the console, heap and block device and hands over to the portable run
//! in the `kernel` library. On the host it only says where to look.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
#[path = "arch/aarch64/mod.rs"]
#[cfg(target_arch = "aarch64")]
mod arch;
#[cfg(target_os = "none")]
#[path = "arch/riscv64/mod.rs"]
#[cfg(target_arch = "riscv64")]
mod arch;
#[cfg(target_os = "none")]
mod board;
#[cfg(target_os = "none")]
#[macro_use]
mod console;
#[cfg(target_os = "none")]
mod dtb;
#[cfg(target_os = "none")]
mod heap;
#[cfg(target_os = "none")]
mod platform;
#[cfg(target_os = "none")]
mod power;
#[cfg(target_os = "none")]
mod sd;
#[cfg(target_os = "none")]
mod smp;
#[cfg(target_os = "none")]
mod sync;
#[cfg(target_os = "none")]
mod virtio;

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("the lmboot kernel runs on a board or in QEMU: try `cargo xtask qemu --board qemu-virt-aarch64`");
    std::process::exit(2);
}
