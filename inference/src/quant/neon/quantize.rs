//! Activation quantization: twins of [`crate::quant::act::quantize_q8_0`], `quantize_q8_1` and
//! `quantize_q8_k`, byte for byte.
//!
//! The scale comes from the block's largest |x| (a maximum does not depend on the order it is
//! taken in) with the scalar code's float expressions; each value is `nearest_int(x · id)`, done
//! as the scalar does it (`x · id + 1.5·2^23`, then the low mantissa bits), so the bytes agree even
//! where the product is out of `nearest_int`'s range (|x · id| ≥ 2^22, e.g. a tiny block whose
//! scale overflows).

use crate::quant::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::types::{QK32, QK_K};
use core::arch::aarch64::*;
use core::arch::asm;
use half::f16;

/// `nearest_int`'s magic number, 1.5 · 2^23.
const MAGIC: f32 = 12_582_912.0;

/// Whether FPCR asks for IEEE behaviour: round to nearest even, no flush to zero (FZ, FZ16, FIZ)
/// and no alternate handling (AH). Then FCVT rounds to f16 exactly as `half`'s software conversion
/// does. FPCR is 0 under Linux and in QEMU; with any other setting `half` does the rounding.
pub(super) fn fpcr_is_ieee() -> bool {
    let fpcr: u64;
    // SAFETY: reading FPCR has no side effects (allowed at EL0 and EL1).
    unsafe { asm!("mrs {f}, fpcr", f = out(reg) fpcr, options(nomem, nostack, preserves_flags)) };
    // FIZ (bit 0), AH (1), FZ16 (19), RMode (23:22), FZ (24).
    fpcr & (1 | 1 << 1 | 1 << 19 | 3 << 22 | 1 << 24) == 0
}

/// `x` rounded through f16 (to nearest, ties to even), as `half::f16::from_f32(x).to_f32()`: with
/// FCVTN/FCVTL when `hw` ([`f16_round4`]; FPCR is IEEE, see [`fpcr_is_ieee`]), else with `half` itself.
#[inline(always)]
pub(super) fn f16_round(x: f32, hw: bool) -> f32 {
    if !hw {
        return f16::from_f32(x).to_f32();
    }
    // SAFETY: NEON is baseline on every aarch64 target this module is built for.
    unsafe { vgetq_lane_f32::<0>(f16_round4(vdupq_n_f32(x))) }
}

/// `nearest_int(x · s) as i8` for sixteen values: the low byte of `x · s + MAGIC`'s bits is the low
/// byte of `nearest_int` (which only masks and subtracts 2^22 above it).
#[target_feature(enable = "neon")]
#[inline]
fn round16(v: &[float32x4_t], s: f32) -> int8x16_t {
    let m = vdupq_n_f32(MAGIC);
    let r: [uint16x8_t; 4] =
        core::array::from_fn(|k| vreinterpretq_u16_f32(vaddq_f32(vmulq_n_f32(v[k], s), m)));
    let a = vreinterpretq_u8_u16(vuzp1q_u16(r[0], r[1]));
    let b = vreinterpretq_u8_u16(vuzp1q_u16(r[2], r[3]));
    vreinterpretq_s8_u8(vuzp1q_u8(a, b))
}

/// `nearest_int(s · x).min(127) as i8` for sixteen values.
#[target_feature(enable = "neon")]
#[inline]
fn round16_min127(v: &[float32x4_t], s: f32) -> int8x16_t {
    let m = vdupq_n_f32(MAGIC);
    let mask = vdupq_n_s32(0x007f_ffff);
    let half = vdupq_n_s32(0x0040_0000);
    let top = vdupq_n_s32(127);
    let r: [uint16x8_t; 4] = core::array::from_fn(|k| {
        let b = vreinterpretq_s32_f32(vaddq_f32(vmulq_n_f32(v[k], s), m));
        vreinterpretq_u16_s32(vminq_s32(vsubq_s32(vandq_s32(b, mask), half), top))
    });
    let a = vreinterpretq_u8_u16(vuzp1q_u16(r[0], r[1]));
    let b = vreinterpretq_u8_u16(vuzp1q_u16(r[2], r[3]));
    vreinterpretq_s8_u8(vuzp1q_u8(a, b))
}

/// 32 values of `xb` and their largest |x| (`f32::max` from 0, as the scalar fold).
#[target_feature(enable = "neon")]
#[inline]
fn load32(xb: &[f32]) -> ([float32x4_t; 8], f32) {
    assert!(xb.len() >= QK32);
    // SAFETY: `xb` holds at least 32 floats (checked above).
    let v: [float32x4_t; 8] =
        core::array::from_fn(|k| unsafe { vld1q_f32(xb.as_ptr().add(4 * k)) });
    let a = v.map(|x| vabsq_f32(x));
    let m = vmaxnmq_f32(
        vmaxnmq_f32(vmaxnmq_f32(a[0], a[1]), vmaxnmq_f32(a[2], a[3])),
        vmaxnmq_f32(vmaxnmq_f32(a[4], a[5]), vmaxnmq_f32(a[6], a[7])),
    );
    (v, vmaxnmvq_f32(m).max(0.0))
}

/// Q8_0 blocks; `HW`: f16 rounding with FCVT (FPCR is IEEE), else with `half` (chosen once per
/// call, so the block loop has no branch).
#[target_feature(enable = "neon")]
#[inline]
fn q8_0<const HW: bool>(x: &[f32], out: &mut [BlockQ8_0]) {
    for (xb, y) in x.chunks_exact(QK32).zip(out.iter_mut()) {
        block32::<HW>(xb, &mut y.d, &mut y.qs);
    }
}

/// One block of 32 values: `d` (rounded through f16) and `qs` written; returns the unrounded
/// scale and the two vectors of quantized values.
#[inline(always)]
fn block32<const HW: bool>(
    xb: &[f32],
    d_out: &mut f32,
    qs: &mut [i8; QK32],
) -> (f32, [int8x16_t; 2]) {
    // SAFETY: NEON is baseline on every aarch64 target this module is built for.
    let (v, amax) = unsafe { load32(xb) };
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    *d_out = f16_round(d, HW);
    // SAFETY: as above.
    let q = unsafe { [round16(&v[..4], id), round16(&v[4..], id)] };
    // SAFETY: `qs` holds 32 bytes.
    unsafe {
        vst1q_s8(qs.as_mut_ptr(), q[0]);
        vst1q_s8(qs.as_mut_ptr().add(16), q[1]);
    }
    (d, q)
}

/// Q8_1 blocks (`HW` as in [`q8_0`]).
#[target_feature(enable = "neon")]
#[inline]
fn q8_1<const HW: bool>(x: &[f32], out: &mut [BlockQ8_1]) {
    for (xb, y) in x.chunks_exact(QK32).zip(out.iter_mut()) {
        let (d, q) = block32::<HW>(xb, &mut y.d, &mut y.qs);
        // Sixteen int8 fit an i16 sum.
        let sum = vaddlvq_s8(q[0]) as i32 + vaddlvq_s8(q[1]) as i32;
        y.s = f16_round(sum as f32 * d, HW);
    }
}

/// `x` rounded through f16 in each lane (FCVTN, FCVTL: FPCR must be IEEE, see [`fpcr_is_ieee`]).
#[inline(always)]
fn f16_round4(x: float32x4_t) -> float32x4_t {
    let mut v = x;
    // SAFETY: FCVTN/FCVTL (single to half and back) are base ARMv8-A SIMD; registers only.
    unsafe {
        asm!(
            "fcvtn {t:v}.4h, {v:v}.4s",
            "fcvtl {v:v}.4s, {t:v}.4h",
            v = inout(vreg) v,
            t = out(vreg) _,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    v
}

/// Lane `k` (< 4) of `v`.
#[inline(always)]
fn lane(v: float32x4_t, k: usize) -> f32 {
    // SAFETY: NEON is baseline on every aarch64 target this module is built for.
    unsafe {
        match k {
            0 => vgetq_lane_f32::<0>(v),
            1 => vgetq_lane_f32::<1>(v),
            2 => vgetq_lane_f32::<2>(v),
            _ => vgetq_lane_f32::<3>(v),
        }
    }
}

/// Blocks quantized together in the FCVT loops: their scales are found, divided and rounded
/// through f16 as the lanes of one vector (FDIV is not pipelined on in-order cores: one divide
/// serves four blocks), and one block's reductions overlap the others' work.
const GROUP: usize = 4;

/// `GROUP` blocks of 32 values at `x` (`GROUP · 32` floats): the quantized values stored in `qs`,
/// and per block (one lane each) the unrounded scale `d` and the sum of its bytes.
#[inline(always)]
fn group(x: &[f32], qs: [&mut [i8; QK32]; GROUP]) -> (float32x4_t, int32x4_t) {
    assert!(x.len() >= GROUP * QK32);
    // SAFETY: NEON is baseline on every aarch64 target this module is built for; the loads read
    // the GROUP · 32 floats of `x` (checked above) and the stores write the 32 bytes of each `qs`;
    // the empty asm only passes a pointer through.
    unsafe {
        let ld = |p: *const f32, k: usize| vld1q_f32(p.add(4 * k));
        // Each block's 4-lane maximum of |x|.
        let m: [float32x4_t; GROUP] = core::array::from_fn(|b| {
            let a: [float32x4_t; 8] =
                core::array::from_fn(|k| vabsq_f32(ld(x.as_ptr(), 8 * b + k)));
            vmaxnmq_f32(
                vmaxnmq_f32(vmaxnmq_f32(a[0], a[1]), vmaxnmq_f32(a[2], a[3])),
                vmaxnmq_f32(vmaxnmq_f32(a[4], a[5]), vmaxnmq_f32(a[6], a[7])),
            )
        });
        // Lane b: block b's largest |x| (from 0, as the scalar fold), then `d` and `id` as the scalar
        // computes them (`id` = 0 where `d` = 0).
        let amax = vmaxnmq_f32(
            vpmaxnmq_f32(vpmaxnmq_f32(m[0], m[1]), vpmaxnmq_f32(m[2], m[3])),
            vdupq_n_f32(0.0),
        );
        let d = vdivq_f32(amax, vdupq_n_f32(127.0));
        let id = vdivq_f32(vdupq_n_f32(1.0), d);
        let id = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(id), vceqzq_f32(d)));
        // The values again from memory (32 registers do not hold four blocks and the temporaries):
        // the pointer laundered so that the loads are not merged with the ones above.
        let mut p = x.as_ptr();
        asm!("/* {p} */", p = inout(reg) p, options(pure, nomem, nostack, preserves_flags));
        let mut sums = [vdupq_n_s16(0); GROUP];
        for (b, (y, sum)) in qs.into_iter().zip(sums.iter_mut()).enumerate() {
            let v: [float32x4_t; 8] = core::array::from_fn(|k| ld(p, 8 * b + k));
            let q = [round16(&v[..4], lane(id, b)), round16(&v[4..], lane(id, b))];
            vst1q_s8(y.as_mut_ptr(), q[0]);
            vst1q_s8(y.as_mut_ptr().add(16), q[1]);
            // Sixteen int8 fit an i16 sum.
            *sum = vpadalq_s8(vpaddlq_s8(q[0]), q[1]);
        }
        // Lane b: block b's sum (|sum| ≤ 4096 fits every i16 step).
        let s = vpaddq_s16(vpaddq_s16(sums[0], sums[1]), vpaddq_s16(sums[2], sums[3]));
        let s = vpaddq_s16(s, s);
        (d, vmovl_s16(vget_low_s16(s)))
    }
}

/// The FCVT loop over `out`'s blocks: `GROUP` blocks per step through [`group`] (`qs` picks a
/// block's values, `fin` writes the rest from the lanes of the scales and sums), the last ones one
/// at a time through `tail`.
#[inline(always)]
fn by_groups<B>(
    x: &[f32],
    out: &mut [B],
    qs: impl Fn(&mut B) -> &mut [i8; QK32],
    fin: impl Fn(&mut [B], float32x4_t, int32x4_t),
    tail: impl FnOnce(&[f32], &mut [B]),
) {
    let n = out.len().min(x.len() / QK32) / GROUP * GROUP;
    let (x0, x1) = x.split_at(n * QK32);
    let (o0, o1) = out.split_at_mut(n);
    for (xg, yg) in x0
        .chunks_exact(GROUP * QK32)
        .zip(o0.chunks_exact_mut(GROUP))
    {
        let [y0, y1, y2, y3] = yg else { unreachable!() };
        let (d, sum) = group(xg, [qs(y0), qs(y1), qs(y2), qs(y3)]);
        fin(yg, d, sum);
    }
    tail(x1, o1)
}

/// The FCVT loops (the common case) under names of their own (the benchmark's llvm-mca rows).
#[target_feature(enable = "neon")]
#[inline(never)]
fn q8_0_fcvt(x: &[f32], out: &mut [BlockQ8_0]) {
    let fin = |yg: &mut [BlockQ8_0], d, _| {
        let d = f16_round4(d);
        for (b, y) in yg.iter_mut().enumerate() {
            y.d = lane(d, b);
        }
    };
    by_groups(x, out, |y| &mut y.qs, fin, |x, out| q8_0::<true>(x, out))
}

#[target_feature(enable = "neon")]
#[inline(never)]
fn q8_1_fcvt(x: &[f32], out: &mut [BlockQ8_1]) {
    let fin = |yg: &mut [BlockQ8_1], d, sum| {
        // `sum as f32 * d`, then both rounded through f16.
        let s = f16_round4(vmulq_f32(vcvtq_f32_s32(sum), d));
        let d = f16_round4(d);
        for (b, y) in yg.iter_mut().enumerate() {
            y.d = lane(d, b);
            y.s = lane(s, b);
        }
    };
    by_groups(x, out, |y| &mut y.qs, fin, |x, out| q8_1::<true>(x, out))
}

#[target_feature(enable = "neon")]
fn q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
        assert!(xb.len() >= QK_K);
        let ld = |k: usize| {
            // SAFETY: k < 64, so floats 4k..4k + 4 lie in `xb` (256 floats, checked above).
            unsafe { vld1q_f32(xb.as_ptr().add(4 * k)) }
        };
        // The scalar keeps the first value of largest |x|: the largest or the smallest value,
        // unless both reach it (then the first of them, found by a scan).
        let (mut hi, mut lo) = (ld(0), ld(0));
        for k in 1..QK_K / 4 {
            let u = ld(k);
            hi = vmaxnmq_f32(hi, u);
            lo = vminnmq_f32(lo, u);
        }
        let (hi, lo) = (vmaxnmvq_f32(hi), vminnmvq_f32(lo));
        let (pos, neg) = (hi.max(0.0), (-lo).max(0.0));
        let max = if pos > neg {
            hi
        } else if neg > pos {
            lo
        } else if pos > 0.0 {
            let mut first = pos;
            for &u in xb {
                if libm::fabsf(u) == pos {
                    first = u;
                    break;
                }
            }
            first
        } else {
            // Every value is ±0 (or NaN): the scalar's amax stays 0.
            *y = BlockQ8K::default();
            continue;
        };
        let iscale = -127.0 / max;
        for g in 0..QK_K / 16 {
            let v = [ld(4 * g), ld(4 * g + 1), ld(4 * g + 2), ld(4 * g + 3)];
            let q = round16_min127(&v, iscale);
            // SAFETY: `qs` holds 256 bytes; group g is bytes 16g..16g + 16.
            unsafe { vst1q_s8(y.qs.as_mut_ptr().add(16 * g), q) };
            y.bsums[g] = vaddlvq_s8(q);
        }
        y.d = 1.0 / iscale;
    }
}

/// Quantize `x` (length a multiple of 32) to Q8_0 blocks (twin of `act::quantize_q8_0`).
pub fn quantize_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe {
        if fpcr_is_ieee() {
            q8_0_fcvt(x, out)
        } else {
            q8_0::<false>(x, out)
        }
    }
}

/// Quantize `x` (length a multiple of 32) to Q8_1 blocks (twin of `act::quantize_q8_1`).
pub fn quantize_q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe {
        if fpcr_is_ieee() {
            q8_1_fcvt(x, out)
        } else {
            q8_1::<false>(x, out)
        }
    }
}

/// Quantize `x` (length a multiple of 256) to Q8_K blocks (twin of `act::quantize_q8_k`).
pub fn quantize_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe { q8_k(x, out) }
}
