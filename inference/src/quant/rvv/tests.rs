//! What is specific to RVV: V detection (the ISA string, AT_HWCAP) and the choice of kernel set.
//! Every RVV kernel against its scalar twin, and every f16 scale through the vector conversion, is
//! checked by the shared harness (`quant::kernel_tests`). Run under qemu-user at several vector
//! lengths:
//!
//! ```text
//! QEMU_CPU="rv64,v=true,vlen=128,elen=64" cargo test -p inference --target riscv64gc-unknown-linux-gnu
//! QEMU_CPU="rv64,v=true,vlen=256,elen=64" cargo test -p inference --target riscv64gc-unknown-linux-gnu
//! QEMU_CPU="rv64,v=false" cargo test -p inference --target riscv64gc-unknown-linux-gnu
//! ```
//!
//! The last one has no V: the kernel tests report that they are skipped (the hart would trap on the
//! first vector instruction) and the selection test checks that the scalar set is chosen. Adding
//! `,rvv_ta_all_1s=true,rvv_ma_all_1s=true` to a V CPU makes QEMU overwrite tail and masked-off
//! lanes with ones, as hardware may under `ta` / `ma`: the kernels must still agree.
//! No tolerance anywhere: every comparison is exact.

extern crate std;

use super::*;

/// Records what the hart reports (as the kernel does at boot from the device tree) and returns it:
/// `false` means the RVV kernels must not run. Every test records the same answer, so none races
/// another.
/// (On a T-Head CPU model the V of AT_HWCAP is XTheadVector: recorded as such, and `false` here.)
pub(crate) fn record_v() -> bool {
    crate::quant::testgen::record_riscv_vector().rvv
}

/// VLEN in bits (vlenb · 8); only on harts with V.
fn vlen() -> usize {
    let b: usize;
    // SAFETY: reads the read-only CSR vlenb; the caller checked that the hart has V.
    unsafe {
        core::arch::asm!(".option push", ".option arch, +v", "csrr {b}, vlenb", ".option pop",
            b = out(reg) b, options(nomem, nostack));
    }
    b * 8
}

#[test]
fn isa_string_decides_v() {
    // QEMU virt's riscv,isa, with and without V.
    assert!(isa_has_v(
        "rv64imafdcvh_zicbom_zicboz_zicntr_zicsr_zifencei_zihintntl_zihintpause_zihpm_zawrs_zfa_zca_zcd_zba_zbb_zbc_zbs_zve32f_zve64d_zve64f_zvl128b_sstc_svadu"
    ));
    assert!(!isa_has_v("rv64imafdch_zicsr_zifencei_zihpm_sstc"));
    assert!(isa_has_v("rv64imafdcv"));
    assert!(isa_has_v("RV64IMAFDCV_ZICSR"));
    assert!(isa_has_v("rv64gcv"));
    assert!(!isa_has_v("rv64gc"));
    assert!(!isa_has_v("rv64gc_zve64d_zvl128b"), "Zve* is not full V");
    assert!(
        !isa_has_v("rv64imafdc_xtheadvector"),
        "vendor vector extensions are not RVV 1.0"
    );
    // With versions (as in ELF attributes): `p` between digits is not the P extension.
    assert!(isa_has_v("rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0_v1p0"));
    assert!(isa_has_v("rv64i2p1m2p0a2p1f2p2d2p2c2p0v1p0_zicsr2p0"));
    assert!(!isa_has_v("rv64i2p1m2p0a2p1f2p2d2p2c2p0_zvl128b1p0"));
    assert!(!isa_has_v(""));
    assert!(!isa_has_v("v"));
    assert!(!isa_has_v("arm64v"));
    // Linux AT_HWCAP: one bit per letter.
    assert!(hwcap_has_v(1 << 21));
    assert!(hwcap_has_v(0x20_112d)); // qemu-user rv64 with v=true: acdfimv
    assert!(!hwcap_has_v(0x112d)); // v=false: acdfim
}

#[test]
fn kernel_set_follows_v() {
    // The decision as a function of the answer, and on this hart: what AT_HWCAP says (every
    // test records the same answer, so no test races another), and what qemu-user's CPU model
    // has.
    let on = |rvv| crate::quant::Features {
        rvv,
        ..Default::default()
    };
    let v = record_v();
    assert_eq!(crate::quant::features().rvv, v);
    crate::quant::testgen::check_set_choice("rvv", on, true, v);
    match std::env::var("QEMU_CPU") {
        Ok(cpu) if cpu.contains("v=true") => assert!(v, "QEMU_CPU={cpu} but AT_HWCAP has no V"),
        Ok(cpu) if cpu.contains("v=false") => assert!(!v, "QEMU_CPU={cpu} but AT_HWCAP has V"),
        _ => {}
    }
    if crate::quant::testgen::qemu_cpu_is_thead() {
        std::println!(
            "kernel_set_follows_v: a T-Head CPU model: its V is XTheadVector, RVV 1.0 traps: best = {}",
            crate::quant::Kernels::best().name
        );
    } else if v {
        std::println!(
            "kernel_set_follows_v: V present, VLEN {}: best = rvv",
            vlen()
        );
    } else {
        std::println!("kernel_set_follows_v: no V in AT_HWCAP: best = scalar");
    }
}

/// The K-quant decoders' scalar f16 conversion (`kquant::f16_at`) gives `half`'s value for every
/// f16 (NaN for NaN): it runs on any riscv64 hart, with or without a vector unit.
#[test]
fn f16_at_matches_half_for_every_f16() {
    for h in 0..=u16::MAX {
        let want = half::f16::from_bits(h).to_f32();
        let got = f16_at(&h.to_le_bytes(), 0);
        if want.is_nan() {
            assert!(got.is_nan(), "{h:#06x}: {got:e} is not NaN");
        } else {
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{h:#06x}: {got:e} != {want:e}"
            );
        }
    }
}
