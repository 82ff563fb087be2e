//! Boot tests on QEMU `virt` riscv64 (OpenSBI, S-mode, 4 harts, RVV 1.0 with VLEN 256): the kernel
//! prints exactly what `lmboot-host` prints; a damaged card is a clear error with a non-zero status.

mod common;

use common::boot::{boot, card, generated, host_text};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(600);
const BOARD: &str = "qemu-virt-riscv64";

#[test]
fn riscv_matches_the_pc_runner_with_rvv_on_four_harts() {
    // RVV runs slowly under QEMU (it emulates strided loads and ordered reductions element by
    // element), so few tokens.
    let s = common::boot::once(8);
    let (b, img) = card(BOARD, "riscv-once", &s);
    let want = host_text(b, &common::model_path(), &s);
    let (code, four) = boot(b, &img, None, &[], LIMIT);
    eprintln!("{four}");
    assert_eq!(code, 0, "QEMU exit status");
    assert!(four.contains("cores: 4 working"), "{four}");
    assert_eq!(generated(&four), want);
    assert!(four.contains("kernels rvv"), "{four}");
}

/// A hart without V: the kernel falls back to the scalar set and prints the same (few tokens: the
/// scalar path costs about a billion instructions per token here).
#[test]
fn riscv_without_v_falls_back_to_scalar() {
    let s = common::boot::once(6);
    let (b, img) = card(BOARD, "riscv-novector", &s);
    let want = host_text(b, &common::model_path(), &s);
    let opts = xtask::QemuOpts {
        cpu: Some("rv64,v=false".into()),
        smp: Some(1),
        ..Default::default()
    };
    let (code, scalar) = common::boot::boot_with(b, &img, &opts, LIMIT);
    assert_eq!(code, 0, "{scalar}");
    assert!(scalar.contains("kernels scalar"), "{scalar}");
    assert_eq!(generated(&scalar), want);
}

#[test]
fn riscv_bad_boot_sector_is_a_clear_error() {
    let s = xtask::Settings {
        n: 1,
        ..Default::default()
    };
    let (b, img) = card(BOARD, "riscv-badboot", &s);
    common::boot::break_boot_signature(&img);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    assert_eq!(code, 1, "{uart}");
    assert!(
        uart.contains("error: card: FAT: LBA 2048: boot signature"),
        "{uart}"
    );
}

/// A trap is reported with scause, sepc and stval, and QEMU exits non-zero.
#[test]
fn riscv_traps_are_reported() {
    let s = xtask::Settings {
        selftest: Some("exception".into()),
        n: 1,
        ..Default::default()
    };
    let (b, img) = card(BOARD, "riscv-selftest", &s);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    assert_eq!(code, 2, "{uart}");
    assert!(uart.contains("*** trap: exception 5: scause 0x5"), "{uart}");
    assert!(uart.contains("stval 0x8"), "{uart}");
}
