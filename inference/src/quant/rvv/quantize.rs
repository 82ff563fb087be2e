//! Activation quantization: twins of [`crate::quant::act::quantize_q8_0`], `quantize_q8_1` and
//! `quantize_q8_k`, byte for byte.
//!
//! Per block the scale comes from the largest |x| (`vfredmax` from 0.0: like the scalar `f32::max`
//! fold it ignores NaN, and a maximum does not depend on the order), computed with the scalar
//! code's float operations (`fdiv.s` as Rust's `/`); each value is `nearest_int(x · id)` done the
//! scalar way (`x · id + 1.5·2^23`, then the low bits of the result), so even out-of-range products
//! give the same bytes. Rounding a scale through f16 stays in Rust: the integer bits of the mantissa
//! rounded to 10 bits where the result is a normal f16, `half` elsewhere ([`f16_round`]). Where
//! VLEN ≥ 512 the Q8_0 quantizer takes two blocks per step at e32 m2 (`pair32_vl512`), so one
//! block's reduction and divides overlap the other's.

use super::rvv_asm;
use crate::quant::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::types::{QK32, QK_K};
use half::f16;

/// `nearest_int`'s magic number, 1.5 · 2^23.
pub(crate) const MAGIC: f32 = 12_582_912.0;

/// `x` rounded through f16 (to nearest, ties to even), as `half::f16::from_f32(x).to_f32()`:
/// where the result is a normal f16 (|x| from 2^-14 up to the halfway point between 65504 and
/// 65536), by rounding the f32 mantissa to 10 bits in the integer bits (a carry into the exponent
/// is the right result); elsewhere (zero, subnormal f16, overflow) with `half`.
#[inline(always)]
pub(crate) fn f16_round(x: f32) -> f32 {
    let b = x.to_bits();
    if (b & 0x7fff_ffff).wrapping_sub(0x3880_0000) < 0x477f_f000 - 0x3880_0000 {
        f32::from_bits((b + 0x0fff + (b >> 13 & 1)) & !0x1fff)
    } else {
        f16::from_f32(x).to_f32()
    }
}

/// Quantize two blocks of 32 floats, at `x` and `x + 32`, into `qs0` and `qs1` where VLEN ≥ 512
/// (32 lanes at e32 m2, e16 m1, e8 mf2); returns the two `d = amax / 127`. The blocks are
/// interleaved so that one block's reduction and divides overlap the other's.
///
/// # Safety
/// `x` points to 64 readable f32, `qs0` and `qs1` to 32 writable bytes each; the hart has V with
/// VLEN ≥ 512.
#[inline(always)]
unsafe fn pair32_vl512(x: *const f32, qs0: *mut i8, qs1: *mut i8) -> (f32, f32) {
    let (d0, d1): (f32, f32);
    // SAFETY: reads 64 f32 at `x` and writes 32 bytes at `qs0` and at `qs1` (the caller guarantees
    // all three), V with VLEN ≥ 512 is present (caller); only vector registers, the named scalars
    // and vl/vtype change.
    unsafe {
        rvv_asm!(
            [
                "vsetvli zero, {c32}, e32, m2, ta, ma",
                "vle32.v v8, ({x})",
                "vle32.v v10, ({x1})",
                "vfsgnjx.vv v16, v8, v8",
                "vfsgnjx.vv v18, v10, v10",
                "fmv.w.x {id0}, zero",
                "fmv.w.x {id1}, zero",
                "vmv.s.x v1, zero",
                "vmv.s.x v2, zero",
                // d = amax / 127; id = d != 0 ? 1 / d : 0. In order of issue: block 0's divides
                // start while block 1's reduction runs, block 0's values are scaled while
                // block 1's divides run.
                "vfredmax.vs v1, v16, v1",
                "vfmv.f.s {d0}, v1",
                "fdiv.s {d0}, {d0}, {k127}",
                "vfredmax.vs v2, v18, v2",
                "feq.s {t}, {d0}, {id0}",
                "bnez {t}, 2f",
                "fdiv.s {id0}, {one}, {d0}",
                "2:",
                "vfmv.f.s {d1}, v2",
                "fdiv.s {d1}, {d1}, {k127}",
                "vfmul.vf v8, v8, {id0}",
                "vfadd.vf v8, v8, {magic}",
                "feq.s {t}, {d1}, {id1}",
                "bnez {t}, 3f",
                "fdiv.s {id1}, {one}, {d1}",
                "3:",
                "vfmul.vf v10, v10, {id1}",
                "vfadd.vf v10, v10, {magic}",
                // The low byte of each result's bits is nearest_int's low byte.
                "vsetvli zero, {c32}, e16, m1, ta, ma",
                "vnsrl.wi v16, v8, 0",
                "vnsrl.wi v17, v10, 0",
                "vsetvli zero, {c32}, e8, mf2, ta, ma",
                "vnsrl.wi v8, v16, 0",
                "vnsrl.wi v9, v17, 0",
                "vse8.v v8, ({qs0})",
                "vse8.v v9, ({qs1})",
            ],
            [
                x = in(reg) x,
                x1 = in(reg) x.wrapping_add(QK32),
                qs0 = in(reg) qs0,
                qs1 = in(reg) qs1,
                c32 = in(reg) QK32,
                t = out(reg) _,
                d0 = out(freg) d0,
                d1 = out(freg) d1,
                id0 = out(freg) _,
                id1 = out(freg) _,
                k127 = in(freg) 127.0f32,
                one = in(freg) 1.0f32,
                magic = in(freg) MAGIC,
            ],
            [nostack]
        );
    }
    (d0, d1)
}

/// Quantize `x` (length a multiple of 32) to Q8_0 blocks (twin of `act::quantize_q8_0`): two
/// blocks per step where VLEN ≥ 512, the rest one at a time.
pub fn quantize_q8_0(x: &[f32], out: &mut [BlockQ8_0]) {
    let mut done = 0;
    if super::vlenb() >= 64 {
        for (xp, yp) in x.chunks_exact(2 * QK32).zip(out.chunks_exact_mut(2)) {
            let [y0, y1] = yp else { unreachable!() };
            // SAFETY: `xp` holds 64 f32, `y0.qs` and `y1.qs` 32 bytes each; VLEN ≥ 512 (checked
            // above); reached only on harts with V.
            let (d0, d1) =
                unsafe { pair32_vl512(xp.as_ptr(), y0.qs.as_mut_ptr(), y1.qs.as_mut_ptr()) };
            y0.d = f16_round(d0);
            y1.d = f16_round(d1);
            done += 2;
        }
    }
    q8_0_blocks(x.get(done * QK32..).unwrap_or(&[]), &mut out[done..]);
}

/// The quantizers both vector sets share: `block32` (one block of 32, `$read0` reading element 0
/// of v2 into `{sum}`: `vmv.x.s` on RVV 1.0, `th.vext.x.v` on XTheadVector), `q8_0_blocks` (Q8_0
/// one block at a time), `quantize_q8_1`, `quantize_q8_k`, their `asm!` blocks through `$asm`
/// (`rvv_asm`, `xtv_asm`: the text holds under RVV 0.7.1: masks are made and used at `e32, m8`,
/// no tail is read, narrowing and widening ops never overlap their sources).
#[rustfmt::skip]
macro_rules! quantizers {
    ($asm:ident, $read0:literal) => {
        /// Quantize the 32 floats at `x` into `qs`: returns `d = amax / 127` and the sum of the bytes.
        ///
        /// # Safety
        /// `x` points to 32 readable f32, `qs` to 32 writable bytes; the hart has the set's vector unit.
        #[inline(always)]
        unsafe fn block32(x: *const f32, qs: *mut i8) -> (f32, i32) {
            let d: f32;
            let sum: isize;
            // SAFETY: reads 32 f32 at `x` and writes 32 bytes at `qs` (the caller guarantees both), the vector unit
            // is present (caller); only vector registers, the named scalars and vl/vtype change.
            unsafe {
                $asm!(
                    [
                        "vsetvli zero, {c32}, e32, m8, ta, ma",
                        "vle32.v v8, ({x})",
                        "vfsgnjx.vv v16, v8, v8",
                        "vmv.s.x v1, zero",
                        "vmv.s.x v2, zero",
                        "vfredmax.vs v1, v16, v1",
                        "vfmv.f.s {d}, v1",
                        // d = amax / 127; id = d != 0 ? 1 / d : 0
                        "fdiv.s {d}, {d}, {k127}",
                        "fmv.w.x {id}, zero",
                        "feq.s {t}, {d}, {id}",
                        "bnez {t}, 2f",
                        "fdiv.s {id}, {one}, {d}",
                        "2:",
                        "vfmul.vf v8, v8, {id}",
                        "vfadd.vf v8, v8, {magic}",
                        // The low byte of each result's bits is nearest_int's low byte.
                        "vsetvli zero, {c32}, e16, m4, ta, ma",
                        "vnsrl.wi v16, v8, 0",
                        "vsetvli zero, {c32}, e8, m2, ta, ma",
                        "vnsrl.wi v8, v16, 0",
                        "vse8.v v8, ({qs})",
                        // 32 bytes sum to at most 4096 in magnitude: an e16 reduction is exact.
                        "vwredsum.vs v2, v8, v2",
                        "vsetvli zero, {c32}, e16, m1, ta, ma",
                        $read0,
                    ],
                    [
                        x = in(reg) x,
                        qs = in(reg) qs,
                        c32 = in(reg) QK32,
                        t = out(reg) _,
                        sum = out(reg) sum,
                        d = out(freg) d,
                        id = out(freg) _,
                        k127 = in(freg) 127.0f32,
                        one = in(freg) 1.0f32,
                        magic = in(freg) MAGIC,
                    ],
                    [nostack]
                );
            }
            // (`$read0` may zero-extend the e16 sum: read it as i16.)
            (d, sum as i16 as i32)
        }

        /// Quantize `x` (length a multiple of 32) to Q8_0 blocks one at a time.
        fn q8_0_blocks(x: &[f32], out: &mut [BlockQ8_0]) {
            for (xb, y) in x.chunks_exact(QK32).zip(out.iter_mut()) {
                // SAFETY: `xb` holds 32 f32 and `y.qs` 32 bytes; reached only on harts with the set's
                // vector unit.
                let (d, _) = unsafe { block32(xb.as_ptr(), y.qs.as_mut_ptr()) };
                y.d = f16_round(d);
            }
        }

        /// Quantize `x` (length a multiple of 32) to Q8_1 blocks (twin of `act::quantize_q8_1`).
        pub fn quantize_q8_1(x: &[f32], out: &mut [BlockQ8_1]) {
            for (xb, y) in x.chunks_exact(QK32).zip(out.iter_mut()) {
                // SAFETY: `xb` holds 32 f32 and `y.qs` 32 bytes; reached only on harts with the set's
                // vector unit.
                let (d, sum) = unsafe { block32(xb.as_ptr(), y.qs.as_mut_ptr()) };
                y.d = f16_round(d);
                y.s = f16_round(sum as f32 * d);
            }
        }

        /// Quantize `x` (length a multiple of 256) to Q8_K blocks (twin of `act::quantize_q8_k`).
        pub fn quantize_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
            for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
                // The value of largest |x|, the first one if several (the scalar keeps the first `v` with
                // |v| > the running maximum), or 0 if all are ±0 (or NaN).
                let max: f32;
                // SAFETY: reads the 256 f32 of `xb` (vl ≤ floats left in every step); V present (only
                // reached on harts with V); only vector registers, the named scalars and vl/vtype change.
                unsafe {
                    $asm!(
                        [
                            // amax over the block
                            "mv {p}, {x}",
                            "mv {n}, {c256}",
                            "vsetvli {t}, zero, e32, m1, ta, ma",
                            "vmv.s.x v1, zero",
                            "2:",
                            "vsetvli {vl}, {n}, e32, m8, ta, ma",
                            "vle32.v v8, ({p})",
                            "vfsgnjx.vv v8, v8, v8",
                            "vfredmax.vs v1, v8, v1",
                            "slli {t}, {vl}, 2",
                            "add {p}, {p}, {t}",
                            "sub {n}, {n}, {vl}",
                            "bnez {n}, 2b",
                            "vfmv.f.s {max}, v1",
                            "fmv.w.x {m0}, zero",
                            "feq.s {t}, {max}, {m0}",
                            "bnez {t}, 5f",
                            // the first element with |x| = amax
                            "mv {p}, {x}",
                            "mv {n}, {c256}",
                            "3:",
                            "vsetvli {vl}, {n}, e32, m8, ta, ma",
                            "vle32.v v8, ({p})",
                            "vfsgnjx.vv v16, v8, v8",
                            "vmfeq.vf v0, v16, {max}",
                            "vfirst.m {t}, v0",
                            "bgez {t}, 4f",
                            "slli {t}, {vl}, 2",
                            "add {p}, {p}, {t}",
                            "sub {n}, {n}, {vl}",
                            "bnez {n}, 3b",
                            // (not reached: amax is one of the |x|)
                            "j 5f",
                            "4:",
                            "slli {t}, {t}, 2",
                            "add {p}, {p}, {t}",
                            "flw {max}, 0({p})",
                            "5:",
                        ],
                        [
                            x = in(reg) xb.as_ptr(),
                            c256 = in(reg) QK_K,
                            p = out(reg) _,
                            n = out(reg) _,
                            vl = out(reg) _,
                            t = out(reg) _,
                            max = out(freg) max,
                            m0 = out(freg) _,
                        ],
                        [nostack, readonly]
                    );
                }
                if max == 0.0 {
                    *y = BlockQ8K::default();
                    continue;
                }
                let iscale = -127.0 / max;
                // SAFETY: reads the 256 f32 of `xb`, writes the 256 bytes of `y.qs` and the 16 i16 of
                // `y.bsums` (vl ≤ elements left in every step); the vector unit present (only reached on harts
                // with it).
                unsafe {
                    $asm!(
                        [
                            "mv {p}, {x}",
                            "mv {q}, {qs}",
                            "mv {n}, {c256}",
                            "2:",
                            "vsetvli {vl}, {n}, e32, m8, ta, ma",
                            "vle32.v v8, ({p})",
                            "vfmul.vf v8, v8, {iscale}",
                            "vfadd.vf v8, v8, {magic}",
                            // nearest_int: (bits & 0x7fffff) - 0x400000, then at most 127.
                            "vand.vx v8, v8, {mask}",
                            "vsub.vx v8, v8, {half}",
                            "vmin.vx v8, v8, {c127}",
                            "vsetvli zero, {vl}, e16, m4, ta, ma",
                            "vnsrl.wi v16, v8, 0",
                            "vsetvli zero, {vl}, e8, m2, ta, ma",
                            "vnsrl.wi v8, v16, 0",
                            "vse8.v v8, ({q})",
                            "slli {t}, {vl}, 2",
                            "add {p}, {p}, {t}",
                            "add {q}, {q}, {vl}",
                            "sub {n}, {n}, {vl}",
                            "bnez {n}, 2b",
                            // bsums: byte j of group g in element g of v8 + j (16 groups, stride 16).
                            "vsetvli zero, {c16}, e8, m1, ta, ma",
                            "vlsseg8e8.v v8, ({qs}), {c16}",
                            "addi {q}, {qs}, 8",
                            "vlsseg8e8.v v16, ({q}), {c16}",
                            "vwadd.vv v24, v8, v9",
                            "vwadd.vv v26, v10, v11",
                            "vwadd.vv v28, v12, v13",
                            "vwadd.vv v30, v14, v15",
                            "vwadd.vv v0, v16, v17",
                            "vwadd.vv v2, v18, v19",
                            "vwadd.vv v4, v20, v21",
                            "vwadd.vv v6, v22, v23",
                            "vsetvli zero, {c16}, e16, m2, ta, ma",
                            "vadd.vv v24, v24, v26",
                            "vadd.vv v28, v28, v30",
                            "vadd.vv v0, v0, v2",
                            "vadd.vv v4, v4, v6",
                            "vadd.vv v24, v24, v28",
                            "vadd.vv v0, v0, v4",
                            "vadd.vv v24, v24, v0",
                            "vse16.v v24, ({bsums})",
                        ],
                        [
                            x = in(reg) xb.as_ptr(),
                            qs = in(reg) y.qs.as_mut_ptr(),
                            bsums = in(reg) y.bsums.as_mut_ptr(),
                            c256 = in(reg) QK_K,
                            c16 = in(reg) 16usize,
                            mask = in(reg) 0x007f_ffffusize,
                            half = in(reg) 0x0040_0000usize,
                            c127 = in(reg) 127usize,
                            p = out(reg) _,
                            q = out(reg) _,
                            n = out(reg) _,
                            vl = out(reg) _,
                            t = out(reg) _,
                            iscale = in(freg) iscale,
                            magic = in(freg) MAGIC,
                        ],
                        [nostack]
                    );
                }
                y.d = 1.0 / iscale;
            }
        }
    };
}
pub(crate) use quantizers;

quantizers!(rvv_asm, "vmv.x.s {sum}, v2");
