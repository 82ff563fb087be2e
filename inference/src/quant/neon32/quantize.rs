//! Activation quantization: twins of [`crate::quant::act::quantize_q8_0`] and `quantize_q8_1`,
//! byte for byte. Per block of 32: one `asm!` for the largest |x| (NEON VABS/VMAX, exact: a
//! maximum does not depend on the order it is taken in), the scale in Rust with the scalar code's
//! expressions, one `asm!` for the 32 values (`x · id + 1.5·2^23`, the low byte of its bits, as
//! `nearest_int` does; with the block's sum for Q8_1).
//!
//! NEON float arithmetic flushes subnormals to zero and returns the default NaN; IEEE (the scalar
//! code) does neither. It gives the scalar bytes all the same when the block's largest |x| is at
//! least 2^-112 and no value is NaN, which the NEON maximum tells (NaN if any value is, and below
//! 2^-112 when every normal value is): then every subnormal `x` has `|x · id|` < 127 · 2^-14, which
//! rounds to 0 flushed or not; `id` is never subnormal (`id = 1 / d` ≥ 127 / f32::MAX); a subnormal
//! product rounds to 0 either way; and `x · id + 1.5·2^23` adds normal numbers. Other blocks (all
//! tiny, or with a NaN) are quantized by the scalar code.

use crate::quant::act::{self, BlockQ8_0, BlockQ8_1};
use crate::quant::types::QK32;
use core::arch::asm;
use half::f16;

/// Smallest largest-|x| of a block the NEON arithmetic quantizes exactly (2^-112, see above).
const TINY: f32 = f32::from_bits(0x0780_0000);

/// The 32 floats at `{p}` into q8..q15.
#[rustfmt::skip]
macro_rules! load32 {
    () => {
        concat!(
            "vld1.32 {{d16-d19}}, [{p}]!\n",
            "vld1.32 {{d20-d23}}, [{p}]!\n",
            "vld1.32 {{d24-d27}}, [{p}]!\n",
            "vld1.32 {{d28-d31}}, [{p}]\n",
        )
    };
}

/// The largest |x| of `xb[..32]` with NEON: exact when it is at least [`TINY`] and no value is
/// NaN; NaN when a value is; below [`TINY`] otherwise.
fn amax32(xb: &[f32]) -> f32 {
    assert!(xb.len() >= QK32);
    let bits: u32;
    // SAFETY: reads the 32 floats of `xb` (checked above; VLD1.32 needs no more alignment than
    // an f32's); registers only written, all declared.
    unsafe {
        asm!(
            load32!(),
            "vabs.f32 q8, q8",
            "vabs.f32 q9, q9",
            "vabs.f32 q10, q10",
            "vabs.f32 q11, q11",
            "vabs.f32 q12, q12",
            "vabs.f32 q13, q13",
            "vabs.f32 q14, q14",
            "vabs.f32 q15, q15",
            "vmax.f32 q8, q8, q9",
            "vmax.f32 q10, q10, q11",
            "vmax.f32 q12, q12, q13",
            "vmax.f32 q14, q14, q15",
            "vmax.f32 q8, q8, q10",
            "vmax.f32 q12, q12, q14",
            "vmax.f32 q8, q8, q12",
            "vpmax.f32 d16, d16, d17",
            "vpmax.f32 d16, d16, d16",
            "vmov.32 {m}, d16[0]",
            p = inout(reg) xb.as_ptr() => _,
            m = out(reg) bits,
            out("q8") _, out("q9") _, out("q10") _, out("q11") _,
            out("q12") _, out("q13") _, out("q14") _, out("q15") _,
            options(readonly, nostack, preserves_flags)
        );
    }
    f32::from_bits(bits)
}

/// `nearest_int(x · id) as i8` for `xb[..32]` into `qs`, and their sum.
fn round32(xb: &[f32], id: f32, qs: &mut [i8; QK32]) -> i32 {
    assert!(xb.len() >= QK32);
    let sum: i32;
    // SAFETY: reads the 32 floats of `xb` (checked above), writes the 32 bytes of `qs` (VST1.8:
    // no alignment); registers only written otherwise, all declared.
    unsafe {
        asm!(
            load32!(),
            "vdup.32 q0, {id}",
            // 1.5 · 2^23 = 0x4b40_0000 in every lane.
            "vmov.i32 q1, #0x4b000000",
            "vorr.i32 q1, #0x00400000",
            "vmul.f32 q8, q8, q0",
            "vmul.f32 q9, q9, q0",
            "vmul.f32 q10, q10, q0",
            "vmul.f32 q11, q11, q0",
            "vmul.f32 q12, q12, q0",
            "vmul.f32 q13, q13, q0",
            "vmul.f32 q14, q14, q0",
            "vmul.f32 q15, q15, q0",
            "vadd.f32 q8, q8, q1",
            "vadd.f32 q9, q9, q1",
            "vadd.f32 q10, q10, q1",
            "vadd.f32 q11, q11, q1",
            "vadd.f32 q12, q12, q1",
            "vadd.f32 q13, q13, q1",
            "vadd.f32 q14, q14, q1",
            "vadd.f32 q15, q15, q1",
            // The low byte of each lane's bits: nearest_int's low byte.
            "vmovn.i32 d4, q8",
            "vmovn.i32 d5, q9",
            "vmovn.i32 d6, q10",
            "vmovn.i32 d7, q11",
            "vmovn.i16 d16, q2",
            "vmovn.i16 d17, q3",
            "vmovn.i32 d4, q12",
            "vmovn.i32 d5, q13",
            "vmovn.i32 d6, q14",
            "vmovn.i32 d7, q15",
            "vmovn.i16 d18, q2",
            "vmovn.i16 d19, q3",
            "vst1.8 {{d16-d19}}, [{q}]",
            // The sum of the 32 int8 (exact in i16 lanes: 4 · 128 per lane, then i32).
            "vpaddl.s8 q10, q8",
            "vpadal.s8 q10, q9",
            "vpaddl.s16 q10, q10",
            "vpadd.i32 d20, d20, d21",
            "vpadd.i32 d20, d20, d20",
            "vmov.32 {s}, d20[0]",
            p = inout(reg) xb.as_ptr() => _,
            id = in(reg) id.to_bits(),
            q = in(reg) qs.as_mut_ptr(),
            s = lateout(reg) sum,
            out("q0") _, out("q1") _, out("q2") _, out("q3") _,
            out("q8") _, out("q9") _, out("q10") _, out("q11") _,
            out("q12") _, out("q13") _, out("q14") _, out("q15") _,
            options(nostack, preserves_flags)
        );
    }
    sum
}

#[inline(always)]
fn f16_round(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// Quantize `x` (length a multiple of 32) to Q8_0 blocks (twin of `act::quantize_q8_0`).
pub fn quantize_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK32).zip(out.iter_mut()) {
        let amax = amax32(xb);
        if amax.is_nan() || amax < TINY {
            act::quantize_q8_0(xb, core::slice::from_mut(y));
            continue;
        }
        let d = amax / 127.0;
        let id = 1.0 / d;
        y.d = f16_round(d);
        round32(xb, id, &mut y.qs);
    }
}

/// Quantize `x` (length a multiple of 32) to Q8_1 blocks (twin of `act::quantize_q8_1`).
pub fn quantize_q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK32).zip(out.iter_mut()) {
        let amax = amax32(xb);
        if amax.is_nan() || amax < TINY {
            act::quantize_q8_1(xb, core::slice::from_mut(y));
            continue;
        }
        let d = amax / 127.0;
        let id = 1.0 / d;
        y.d = f16_round(d);
        let sum = round32(xb, id, &mut y.qs);
        y.s = f16_round(sum as f32 * d);
    }
}
