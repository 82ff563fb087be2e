//! What is specific to the AArch32 NEON set: NEON detection (MVFR1, AT_HWCAP, FPSCR) and the
//! choice of kernel set. Every NEON kernel against its scalar twin, and every f16 scale through
//! VCVTB, is checked by the shared harness (`quant::kernel_tests`). Run under qemu-user:
//!
//! ```text
//! QEMU_CPU=cortex-a7 cargo test --release -p inference --target armv7-unknown-linux-gnueabihf
//! ```
//!
//! Under qemu-arm the set must be there ([`neon_set_runs_under_qemu`]), so a run that silently
//! tests the scalar set alone fails. No tolerance anywhere: every comparison is exact.

extern crate std;

use super::*;
use crate::quant::act::BlockQ8_0;

/// `AT_HWCAP` of this process (a 32-bit word on 32-bit Arm).
fn hwcap() -> u32 {
    crate::quant::testgen::at_hwcap() as u32
}

/// Records what the core reports (as the kernel does at boot from MVFR1) and returns whether the
/// NEON set may run. Every test records the same answer, so none races another.
pub(crate) fn record_neon() -> bool {
    let f = crate::quant::Features {
        neon: hwcap_has_neon(hwcap()),
        ..Default::default()
    };
    crate::quant::set_features(f);
    runs_on(&f)
}

#[test]
fn id_registers_decide_neon() {
    // Cortex-A7 and A15 (NEON, VFPv4), A9 (NEON, VFPv3 with half precision).
    assert!(mvfr1_has_neon(0x1111_1111));
    assert!(mvfr1_has_neon(0x0111_1111));
    // Cortex-A8: NEON but no VFP half-precision conversion; a VFP-only core.
    assert!(!mvfr1_has_neon(0x0001_1111));
    assert!(!mvfr1_has_neon(0x0100_0011));
    assert!(!mvfr1_has_neon(0));
    // Linux AT_HWCAP: NEON (bit 12), VFPv4 (16), VFPD32 (19).
    assert!(hwcap_has_neon(1 << 12 | 1 << 16 | 1 << 19));
    assert!(!hwcap_has_neon(1 << 16 | 1 << 19), "no NEON");
    assert!(!hwcap_has_neon(1 << 12 | 1 << 19), "no VFPv4");
    assert!(!hwcap_has_neon(1 << 12 | 1 << 16), "VFPv4-D16");
    // FPSCR: AHP (bit 26) set means the alternative half precision, whose values differ.
    assert!(fpscr_is_ieee(0));
    assert!(fpscr_is_ieee(1 << 24 | 1 << 25));
    assert!(!fpscr_is_ieee(1 << 26));
}

#[test]
fn kernel_set_follows_neon() {
    let on = |neon| crate::quant::Features {
        neon,
        ..Default::default()
    };
    let neon = record_neon();
    crate::quant::testgen::check_set_choice("neon", on, fpscr_is_ieee(read_fpscr()), neon);
    std::println!(
        "kernel_set_follows_neon: AT_HWCAP {:#x}, FPSCR {:#x}: best = {}",
        hwcap(),
        read_fpscr(),
        Kernels::best().name
    );
}

/// qemu-arm's Cortex-A7 (and every core the kernels are for) has NEON: the set must be chosen, so
/// the shared harness really compares it with the scalar one.
#[test]
fn neon_set_runs_under_qemu() {
    assert!(
        record_neon(),
        "no NEON set: AT_HWCAP {:#x}, FPSCR {:#x} (run with QEMU_CPU=cortex-a7)",
        hwcap(),
        read_fpscr()
    );
    let k = Kernels::by_name("neon").expect("Kernels::by_name(\"neon\")");
    assert_eq!(k.name, "neon");
    assert!(
        k.row::<BlockQ8_0>(crate::quant::GgmlType::Q8_0)
            .is_some_and(|r| r.x4.is_some()),
        "the AArch32 set, not a scalar one"
    );
    std::println!("neon_set_runs_under_qemu: the AArch32 NEON set is available and tested");
}
