//! What is specific to NEON: the f16 conversions of its own instructions (FCVT, FCVTL, FCVTL2)
//! against `half`, and the choice of kernel set from ID_AA64ISAR0_EL1. Every NEON kernel against its
//! scalar twin is checked by the shared harness (`quant::kernel_tests`) for each set the core runs.
//! Run under qemu-user with `QEMU_CPU=cortex-a53` (plain NEON) and `QEMU_CPU=cortex-a76` (SDOT).

extern crate std;

use super::*;
use crate::quant::kernel_tests::gen::Rng;
use crate::quant::Kernels;
use alloc::vec::Vec;
use core::arch::aarch64::{vcombine_u16, vdup_n_u16, vgetq_lane_f32};
use half::f16;

/// `bits` converted by FCVTL (lane 3) and FCVTL2 (lane 4 of 8).
#[target_feature(enable = "neon")]
fn fcvtl_both(bits: u16) -> (f32, f32) {
    let v = vcombine_u16(vdup_n_u16(bits), vdup_n_u16(bits));
    (
        vgetq_lane_f32::<3>(f16x8_low_to_f32(v)),
        vgetq_lane_f32::<0>(f16x8_high_to_f32(v)),
    )
}

/// The f16 → f32 conversions the kernels use (FCVT, FCVTL, FCVTL2) against `half`, for every f16
/// that is not a NaN; and f32 → f16 → f32 rounding (FCVT) against `half` on every f16 rounding
/// boundary (midpoints, ties to even) and its neighbours.
#[test]
fn f16_conversions_match_half() {
    let finite = |b: u16| b & 0x7c00 != 0x7c00 || b & 0x03ff == 0;
    for bits in 0..=u16::MAX {
        if !finite(bits) {
            continue;
        }
        let want = f16::from_bits(bits).to_f32().to_bits();
        assert_eq!(f16_to_f32(bits).to_bits(), want, "fcvt {bits:#06x}");
        // SAFETY: NEON is part of the aarch64 baseline.
        let (lo, hi) = unsafe { fcvtl_both(bits) };
        assert_eq!(lo.to_bits(), want, "fcvtl {bits:#06x}");
        assert_eq!(hi.to_bits(), want, "fcvtl2 {bits:#06x}");
    }
    let hw = quantize::fpcr_is_ieee();
    assert!(hw, "FPCR is not IEEE: the FCVT rounding path is not tested");
    let mut rng = Rng(0x16);
    for bits in 0..0x7c00u16 {
        let lo = f16::from_bits(bits).to_f32();
        let hi = f16::from_bits(bits + 1).to_f32();
        let mid = (lo + hi) / 2.0;
        for x in [
            lo,
            mid,
            hi,
            f32::from_bits(mid.to_bits() - 1),
            f32::from_bits(mid.to_bits() + 1),
        ] {
            for x in [x, -x, x * rng.unit()] {
                let want = f16::from_f32(x).to_f32().to_bits();
                assert_eq!(quantize::f16_round(x, true).to_bits(), want, "round {x:e}");
                assert_eq!(quantize::f16_round(x, false).to_bits(), want, "round {x:e}");
            }
        }
    }
    for x in [
        65520.0f32,
        65519.99,
        1.0e10,
        f32::INFINITY,
        f32::MAX,
        1.0e-30,
        f32::MIN_POSITIVE,
    ] {
        for x in [x, -x] {
            let want = f16::from_f32(x).to_f32().to_bits();
            assert_eq!(quantize::f16_round(x, true).to_bits(), want, "round {x:e}");
        }
    }
}

#[test]
fn kernel_set_follows_id_aa64isar0_dp() {
    use crate::quant::Features;
    // The decision as a function of the register value.
    let best = |isar0| Kernels::best_on(&Features::aarch64(isar0)).name;
    assert_eq!(best(0), "neon");
    assert_eq!(best(1 << 44), "neon-dotprod");
    assert_eq!(best(2 << 44), "neon-dotprod");
    // Other fields set, DP clear (Cortex-A53's value: AES, SHA1, SHA2, CRC32).
    assert_eq!(best(0x11120), "neon");
    assert_eq!(best(!(0xf << 44)), "neon");
    // Cortex-A76: DP = 1 among others.
    assert_eq!(best(0x1000_1021_1120), "neon-dotprod");
    let names = |isar0| {
        let f = Features::aarch64(isar0);
        Kernels::available_on(&f)
            .map(|k| k.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(names(0), ["scalar", "neon"]);
    assert_eq!(names(1 << 44), ["scalar", "neon", "neon-dotprod"]);

    // This core: what the register says, and what qemu-user's CPU model has.
    let isar0 = read_id_aa64isar0();
    let best = Kernels::best();
    assert_eq!(best.name, Kernels::best_on(&Features::aarch64(isar0)).name);
    let available: Vec<&str> = Kernels::available().map(|k| k.name).collect();
    assert_eq!(available.first(), Some(&"scalar"));
    assert_eq!(available.last(), Some(&best.name));
    match std::env::var("QEMU_CPU").as_deref() {
        Ok("cortex-a53") | Ok("cortex-a57") | Ok("cortex-a72") => {
            assert_eq!(best.name, "neon", "ID_AA64ISAR0_EL1 = {isar0:#x}");
            assert_eq!(available, ["scalar", "neon"]);
        }
        Ok("cortex-a76") | Ok("cortex-a55") | Ok("neoverse-n1") | Ok("max") => {
            assert_eq!(best.name, "neon-dotprod", "ID_AA64ISAR0_EL1 = {isar0:#x}");
            assert_eq!(available, ["scalar", "neon", "neon-dotprod"]);
        }
        _ => {}
    }
    // The scalar set stays selectable.
    assert_eq!(Kernels::SCALAR.name, "scalar");
    assert!(Kernels::by_name("scalar").is_some());
    assert!(Kernels::by_name("neon").is_some());
}
