//! K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) · Q8_K activations.
//!
//! The scalar twins sum a whole super-block in i32 (`isum`, and `summs` for the mins) and then do a
//! few float operations per super-block. Here the integer part is SIMD: groups of 16 or 32
//! products are summed exactly (`sums4`, `sums4x16`), multiplied by their integer scales in i32
//! lanes and summed across lanes; the float part is the scalar expression, verbatim. Weights are
//! decoded to the scalar's signed values (Q3_K -4..3, Q6_K -32..31), so nothing relies on the
//! activations' `bsums` beyond what the scalar code uses them for (Q2_K, Q4_K, Q5_K mins).

use super::{f16_le, ld_u8, ldq, ldq_i8, nibbles, rd_u32, sums4, sums4x16};
use crate::quant::act::BlockQ8K;
use core::arch::aarch64::*;

/// `v` (bytes) widened to four i32 vectors (bytes 0..4, 4..8, 8..12, 12..16), unsigned.
#[target_feature(enable = "neon")]
#[inline]
fn widen_u8(v: uint8x16_t) -> [int32x4_t; 4] {
    let lo = vmovl_u8(vget_low_u8(v));
    let hi = vmovl_high_u8(v);
    [
        vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo))),
        vreinterpretq_s32_u32(vmovl_high_u16(lo)),
        vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi))),
        vreinterpretq_s32_u32(vmovl_high_u16(hi)),
    ]
}

/// `v` (signed bytes) widened to four i32 vectors.
#[target_feature(enable = "neon")]
#[inline]
fn widen_i8(v: int8x16_t) -> [int32x4_t; 4] {
    let lo = vmovl_s8(vget_low_s8(v));
    let hi = vmovl_high_s8(v);
    [
        vmovl_s16(vget_low_s16(lo)),
        vmovl_high_s16(lo),
        vmovl_s16(vget_low_s16(hi)),
        vmovl_high_s16(hi),
    ]
}

/// The eight 6-bit scales and mins of a Q4_K / Q5_K block (12 bytes at `sc`), as
/// [`crate::quant::scalar::scale_min_k4`] unpacks them, in bytes 0..8 and 8..16.
#[inline(always)]
fn k4_scales_mins(sc: &[u8; 12]) -> uint8x16_t {
    // SAFETY: `sc` holds 12 bytes.
    let (u0, u1, u2) = unsafe {
        (
            rd_u32(sc.as_ptr()),
            rd_u32(sc.as_ptr().add(4)),
            rd_u32(sc.as_ptr().add(8)),
        )
    };
    // Sub-blocks 0..4: the low six bits of bytes 0..4 (scales) and 4..8 (mins). Sub-blocks 4..8:
    // the nibbles of bytes 8..12, with the top two bits of bytes 0..4 (scales) / 4..8 (mins) above.
    let sc_lo = u0 & 0x3f3f_3f3f;
    let mn_lo = u1 & 0x3f3f_3f3f;
    let sc_hi = (u2 & 0x0f0f_0f0f) | ((u0 >> 2) & 0x3030_3030);
    let mn_hi = ((u2 >> 4) & 0x0f0f_0f0f) | ((u1 >> 2) & 0x3030_3030);
    // SAFETY: NEON is part of the aarch64 baseline; register operations only.
    unsafe {
        vcombine_u8(
            vcreate_u8(sc_lo as u64 | (sc_hi as u64) << 32),
            vcreate_u8(mn_lo as u64 | (mn_hi as u64) << 32),
        )
    }
}

/// `Σ_k mins[k] · (bsums[2k] + bsums[2k + 1])` in i32 (mins in bytes 8..16 of `scm`).
#[target_feature(enable = "neon")]
#[inline]
fn k4_summs(scm: uint8x16_t, bsums: &[i16; 16]) -> i32 {
    // SAFETY: `bsums` holds sixteen i16.
    let (b0, b1) = unsafe { (vld1q_s16(bsums.as_ptr()), vld1q_s16(bsums.as_ptr().add(8))) };
    let m = widen_u8(scm);
    let s = vmulq_s32(vpaddlq_s16(b0), m[2]);
    vaddvq_s32(vmlaq_s32(s, vpaddlq_s16(b1), m[3]))
}

/// A K-quant block decoded once (weights as int8 vectors, integer scales), then multiplied with
/// any number of activation blocks: the one-row kernel is `decode` then `term` per block, the
/// batched kernel `decode` then `term` per column.
trait KBlock {
    const BYTES: usize;
    type Dec;
    /// # Safety
    /// `b` holds one whole block.
    unsafe fn decode(b: &[u8]) -> Self::Dec;
    /// The block's term for activations `y`: the scalar twin's float expression, verbatim.
    fn term<const DP: bool>(x: &Self::Dec, y: &BlockQ8K) -> f32;
}

/// One row: `w` (whole blocks) · `a`.
#[target_feature(enable = "neon")]
fn row<K: KBlock, const DP: bool>(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(K::BYTES).zip(a) {
        // SAFETY: `b` is one whole block.
        let x = unsafe { K::decode(b) };
        sumf += K::term::<DP>(&x, y);
    }
    sumf
}

/// Rows of `rb` bytes · `cols` columns of `a` into `out` (`[rows][cols]`): each block decoded
/// once for all columns.
#[target_feature(enable = "neon")]
fn mat<K: KBlock, const DP: bool>(
    w: &[u8],
    rb: usize,
    a: &[BlockQ8K],
    cols: usize,
    out: &mut [f32],
) {
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let per = a.len().checked_div(cols).unwrap_or(0);
    if rows * cols != out.len() {
        return;
    }
    for (row, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(cols)) {
        o.fill(0.0);
        for (i, b) in row.chunks_exact(K::BYTES).take(per).enumerate() {
            // SAFETY: `b` is one whole block.
            let x = unsafe { K::decode(b) };
            for (c, sumf) in o.iter_mut().enumerate() {
                *sumf += K::term::<DP>(&x, &a[c * per + i]);
            }
        }
    }
}

/// Q4_K: `d`, `dmin` (f16), 12 bytes of scales and mins, 128 bytes of nibbles.
struct Q4K;

/// A Q4_K block: `d`, `dmin`, the scales and mins (bytes 0..8, 8..16), the 256 weights as four
/// groups of 32 per half.
struct Q4KDec {
    d: f32,
    dmin: f32,
    scm: uint8x16_t,
    wq: [[[int8x16_t; 2]; 4]; 2],
}

impl KBlock for Q4K {
    const BYTES: usize = 144;
    type Dec = Q4KDec;
    #[inline(always)]
    unsafe fn decode(b: &[u8]) -> Q4KDec {
        let (d, dmin) = (f16_le(b, 0), f16_le(b, 2));
        let sc: &[u8; 12] = b[4..16].try_into().unwrap_or(&[0; 12]);
        let scm = k4_scales_mins(sc);
        // SAFETY: NEON is part of the aarch64 baseline; `b` holds 144 bytes.
        let wq = [0, 1].map(|h| unsafe {
            // Sub-blocks 4h..4h+4: the low and high nibbles of 32 bytes each, twice.
            let q = 16 + 64 * h;
            let ld = |o: usize| ld_u8(b[q + o..q + o + 16].as_ptr());
            let [l0, h0] = nibbles(ld(0));
            let [l1, h1] = nibbles(ld(16));
            let [l2, h2] = nibbles(ld(32));
            let [l3, h3] = nibbles(ld(48));
            let r = vreinterpretq_s8_u8;
            [
                [r(l0), r(l1)],
                [r(h0), r(h1)],
                [r(l2), r(l3)],
                [r(h2), r(h3)],
            ]
        });
        Q4KDec { d, dmin, scm, wq }
    }
    #[inline(always)]
    fn term<const DP: bool>(x: &Q4KDec, y: &BlockQ8K) -> f32 {
        // SAFETY: NEON is part of the aarch64 baseline.
        unsafe {
            let (d, dmin) = (x.d * y.d, x.dmin * y.d);
            let summs = k4_summs(x.scm, &y.bsums);
            let s = widen_u8(x.scm);
            let mut iv = vdupq_n_s32(0);
            for h in 0..2 {
                let xo = 128 * h;
                let aq: [[int8x16_t; 2]; 4] = core::array::from_fn(|k| {
                    [ldq_i8(&y.qs, xo + 32 * k), ldq_i8(&y.qs, xo + 32 * k + 16)]
                });
                let g = sums4::<DP>(15, x.wq[h], aq);
                iv = vmlaq_s32(iv, g, s[h]);
            }
            let isum = vaddvq_s32(iv);
            d * isum as f32 - dmin * summs as f32
        }
    }
}

/// Q5_K: `d`, `dmin` (f16), 12 bytes of scales and mins, 32 bytes of fifth bits, 128 of nibbles.
#[target_feature(enable = "neon")]
fn q5_k<const DP: bool>(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    let b4 = vdupq_n_u8(0x10);
    for (b, y) in w.chunks_exact(176).zip(a) {
        let Ok(b) = <&[u8; 176]>::try_from(b) else {
            break;
        };
        let (d, dmin) = (f16_le(b, 0) * y.d, f16_le(b, 2) * y.d);
        let Ok(sc) = <&[u8; 12]>::try_from(&b[4..16]) else {
            break;
        };
        let scm = k4_scales_mins(sc);
        let summs = k4_summs(scm, &y.bsums);
        let s = widen_u8(scm);
        // Fifth bits of element l (0..32) of sub-block 2j (bit 2j) and 2j + 1 (bit 2j + 1).
        let qh = [ldq(b, 16), ldq(b, 32)];
        let mut iv = vdupq_n_s32(0);
        for h in 0..2 {
            let mut wq = [[vdupq_n_s8(0); 2]; 4];
            for jj in 0..2 {
                let j = 2 * h + jj;
                let q = 48 + 32 * j;
                let [la, ha] = nibbles(ldq(b, q));
                let [lb, hb] = nibbles(ldq(b, q + 16));
                // Bit k of qh moved to bit 4, inserted above the nibble.
                let up = |v: uint8x16_t, k: usize| vshlq_u8(v, vdupq_n_s8(4 - k as i8));
                let put = |n: uint8x16_t, v: uint8x16_t, k: usize| {
                    vreinterpretq_s8_u8(vbslq_u8(b4, up(v, k), n))
                };
                wq[2 * jj] = [put(la, qh[0], 2 * j), put(lb, qh[1], 2 * j)];
                wq[2 * jj + 1] = [put(ha, qh[0], 2 * j + 1), put(hb, qh[1], 2 * j + 1)];
            }
            let x = 128 * h;
            let aq: [[int8x16_t; 2]; 4] = core::array::from_fn(|k| {
                [ldq_i8(&y.qs, x + 32 * k), ldq_i8(&y.qs, x + 32 * k + 16)]
            });
            let g = sums4::<DP>(31, wq, aq);
            iv = vmlaq_s32(iv, g, s[h]);
        }
        let isum = vaddvq_s32(iv);
        sumf += d * isum as f32 - dmin * summs as f32;
    }
    sumf
}

/// Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed scales, `d` (f16).
struct Q6K;

/// A Q6_K block: `d`, the sixteen scales widened to i32, the 256 weights (-32..31) as sixteen
/// groups of 16, in the order the sums take them.
struct Q6KDec {
    d: f32,
    s: [int32x4_t; 4],
    wq: [[int8x16_t; 8]; 2],
}

impl KBlock for Q6K {
    const BYTES: usize = 210;
    type Dec = Q6KDec;
    #[inline(always)]
    unsafe fn decode(b: &[u8]) -> Q6KDec {
        // SAFETY: NEON is part of the aarch64 baseline; `b` holds 210 bytes.
        unsafe {
            let m4 = vdupq_n_u8(0x0f);
            let m30 = vdupq_n_u8(0x30);
            let c32 = vdupq_n_s8(32);
            let d = f16_le(b, 208);
            let bb: &[u8; 210] = b.try_into().unwrap_or(&[0; 210]);
            let s = widen_i8(vreinterpretq_s8_u8(ldq(bb, 192)));
            let wq = [0, 1].map(|n| {
                let ql: [uint8x16_t; 4] = core::array::from_fn(|k| ldq(bb, 64 * n + 16 * k));
                let qh = [ldq(bb, 128 + 32 * n), ldq(bb, 128 + 32 * n + 16)];
                // value = (low nibble | two high bits << 4) - 32; group g of 16 uses scale g.
                let v = |lo: uint8x16_t, hi: uint8x16_t| {
                    vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(hi, m30))), c32)
                };
                let w1 = [0, 1].map(|k| v(vandq_u8(ql[k], m4), vshlq_n_u8::<4>(qh[k])));
                let w2 = [0, 1].map(|k| v(vandq_u8(ql[k + 2], m4), vshlq_n_u8::<2>(qh[k])));
                let w3 = [0, 1].map(|k| v(vshrq_n_u8::<4>(ql[k]), qh[k]));
                let w4 = [0, 1].map(|k| v(vshrq_n_u8::<4>(ql[k + 2]), vshrq_n_u8::<2>(qh[k])));
                [w1[0], w1[1], w2[0], w2[1], w3[0], w3[1], w4[0], w4[1]]
            });
            Q6KDec { d, s, wq }
        }
    }
    #[inline(always)]
    fn term<const DP: bool>(x: &Q6KDec, y: &BlockQ8K) -> f32 {
        // SAFETY: NEON is part of the aarch64 baseline.
        unsafe {
            let d = x.d * y.d;
            let mut iv = vdupq_n_s32(0);
            for n in 0..2 {
                let xo = 128 * n;
                let aq: [int8x16_t; 8] = core::array::from_fn(|k| ldq_i8(&y.qs, xo + 16 * k));
                let w = &x.wq[n];
                let ga = sums4x16::<DP>(32, [w[0], w[1], w[2], w[3]], [aq[0], aq[1], aq[2], aq[3]]);
                let gb = sums4x16::<DP>(32, [w[4], w[5], w[6], w[7]], [aq[4], aq[5], aq[6], aq[7]]);
                iv = vmlaq_s32(iv, ga, x.s[2 * n]);
                iv = vmlaq_s32(iv, gb, x.s[2 * n + 1]);
            }
            let isum = vaddvq_s32(iv);
            d * isum as f32
        }
    }
}

/// The sixteen signed 6-bit scales of a Q3_K block (as [`crate::quant::scalar::q3k_scales`]).
#[inline(always)]
fn q3k_scales(sc: &[u8; 12]) -> int8x16_t {
    // SAFETY: `sc` holds 12 bytes.
    let (a0, a1, a2) = unsafe {
        (
            rd_u32(sc.as_ptr()),
            rd_u32(sc.as_ptr().add(4)),
            rd_u32(sc.as_ptr().add(8)),
        )
    };
    // Low nibbles from bytes 0..8 (scales 0..8) or their high nibbles (8..16); the two high bits
    // of scale j are bits 2(j/4), 2(j/4)+1 of byte 8 + j%4, moved to bits 4, 5.
    let s0 = (a0 & 0x0f0f_0f0f) | ((a2 << 4) & 0x3030_3030);
    let s1 = (a1 & 0x0f0f_0f0f) | ((a2 << 2) & 0x3030_3030);
    let s2 = ((a0 >> 4) & 0x0f0f_0f0f) | (a2 & 0x3030_3030);
    let s3 = ((a1 >> 4) & 0x0f0f_0f0f) | ((a2 >> 2) & 0x3030_3030);
    // SAFETY: NEON is part of the aarch64 baseline; register operations only.
    unsafe {
        let v = vcombine_u8(
            vcreate_u8(s0 as u64 | (s1 as u64) << 32),
            vcreate_u8(s2 as u64 | (s3 as u64) << 32),
        );
        vsubq_s8(vreinterpretq_s8_u8(v), vdupq_n_s8(32))
    }
}

/// Q3_K: 32 bytes of high-bit masks, 64 of 2-bit pairs, 12 of scales, `d` (f16).
#[target_feature(enable = "neon")]
fn q3_k<const DP: bool>(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    let m3 = vdupq_n_u8(3);
    let four = vdupq_n_u8(4);
    for (b, y) in w.chunks_exact(110).zip(a) {
        let Ok(b) = <&[u8; 110]>::try_from(b) else {
            break;
        };
        let Ok(sc) = <&[u8; 12]>::try_from(&b[96..108]) else {
            break;
        };
        let s = widen_i8(q3k_scales(sc));
        let d = f16_le(b, 108) * y.d;
        let hm = [ldq(b, 0), ldq(b, 16)];
        let mut iv = vdupq_n_s32(0);
        for half in 0..2 {
            let q = [ldq(b, 32 + 32 * half), ldq(b, 48 + 32 * half)];
            for pair in 0..2 {
                // Groups 8·half + 4·pair .. +4: shifts 2·sh for sh = 2·pair, 2·pair + 1, parts 0, 1.
                let mut wq = [vdupq_n_s8(0); 4];
                for t in 0..4 {
                    let (sh, part) = (2 * pair + t / 2, t % 2);
                    let k = 4 * half + sh;
                    let low = vandq_u8(vshlq_u8(q[part], vdupq_n_s8(-2 * sh as i8)), m3);
                    // Minus 4 where mask bit k is clear.
                    let hb = vshlq_u8(hm[part], vdupq_n_s8(2 - k as i8));
                    wq[t] = vsubq_s8(
                        vreinterpretq_s8_u8(low),
                        vreinterpretq_s8_u8(vbicq_u8(four, hb)),
                    );
                }
                let x = 128 * half + 64 * pair;
                let aq: [int8x16_t; 4] = core::array::from_fn(|k| ldq_i8(&y.qs, x + 16 * k));
                let g = sums4x16::<DP>(4, wq, aq);
                iv = vmlaq_s32(iv, g, s[2 * half + pair]);
            }
        }
        let isum = vaddvq_s32(iv);
        sumf += d * isum as f32;
    }
    sumf
}

/// Q2_K: 16 bytes of scales (low nibble) and mins (high nibble), 64 of 2-bit values, `d`, `dmin`.
#[target_feature(enable = "neon")]
fn q2_k<const DP: bool>(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    let m3 = vdupq_n_u8(3);
    for (b, y) in w.chunks_exact(84).zip(a) {
        let Ok(b) = <&[u8; 84]>::try_from(b) else {
            break;
        };
        let (d, dmin) = (f16_le(b, 80), f16_le(b, 82));
        let sc = ldq(b, 0);
        // summs = Σ bsums[g] · (sc[g] >> 4), exact in i32.
        let mn = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8::<4>(sc))));
        let mn2 = vreinterpretq_s16_u16(vmovl_high_u8(vshrq_n_u8::<4>(sc)));
        // SAFETY: `bsums` holds sixteen i16.
        let (b0, b1) = unsafe {
            (
                vld1q_s16(y.bsums.as_ptr()),
                vld1q_s16(y.bsums.as_ptr().add(8)),
            )
        };
        let t = vmull_s16(vget_low_s16(b0), vget_low_s16(mn));
        let t = vmlal_high_s16(t, b0, mn);
        let t = vmlal_s16(t, vget_low_s16(b1), vget_low_s16(mn2));
        let summs = vaddvq_s32(vmlal_high_s16(t, b1, mn2));
        let s = widen_u8(vandq_u8(sc, vdupq_n_u8(0x0f)));
        let mut iv = vdupq_n_s32(0);
        for half in 0..2 {
            let q = [ldq(b, 16 + 32 * half), ldq(b, 32 + 32 * half)];
            for pair in 0..2 {
                // Groups 8·half + 4·pair .. +4: shifts 2·sh for sh = 2·pair, 2·pair + 1, parts 0, 1.
                let wq: [int8x16_t; 4] = core::array::from_fn(|t| {
                    let sh = 2 * pair + t / 2;
                    let v = vshlq_u8(q[t % 2], vdupq_n_s8(-2 * sh as i8));
                    vreinterpretq_s8_u8(vandq_u8(v, m3))
                });
                let x = 128 * half + 64 * pair;
                let aq: [int8x16_t; 4] = core::array::from_fn(|k| ldq_i8(&y.qs, x + 16 * k));
                let g = sums4x16::<DP>(3, wq, aq);
                iv = vmlaq_s32(iv, g, s[2 * half + pair]);
            }
        }
        let isum = vaddvq_s32(iv);
        sumf += (y.d * d) * isum as f32 - (y.d * dmin) * summs as f32;
    }
    sumf
}

macro_rules! entries {
    ($(#[$doc:meta])* $name:ident, $name_dp:ident, $imp:ident) => {
        $(#[$doc])*
        pub fn $name(w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: NEON is part of every aarch64 target this module is built for.
            unsafe { $imp::<false>(w, a) }
        }
        $(#[$doc])*
        /// SDOT flavour: only for cores with FEAT_DotProd (`Kernels::NEON_DOTPROD`).
        pub fn $name_dp(w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: as above (SDOT itself is an `asm!` instruction, see `sdot`).
            unsafe { $imp::<true>(w, a) }
        }
    };
    ($(#[$doc:meta])* $name:ident, $name_dp:ident, $mat:ident, $mat_dp:ident, $k:ident) => {
        $(#[$doc])*
        pub fn $name(w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: NEON is part of every aarch64 target this module is built for.
            unsafe { row::<$k, false>(w, a) }
        }
        $(#[$doc])*
        /// SDOT flavour: only for cores with FEAT_DotProd (`Kernels::NEON_DOTPROD`).
        pub fn $name_dp(w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: as above (SDOT itself is an `asm!` instruction, see `sdot`).
            unsafe { row::<$k, true>(w, a) }
        }
        $(#[$doc])*
        /// Batched: rows · `cols` columns into `out` as `[rows][cols]`.
        pub fn $mat(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
            // SAFETY: NEON is part of every aarch64 target this module is built for.
            unsafe { mat::<$k, false>(w, rb, a, cols, out) }
        }
        $(#[$doc])*
        /// Batched, SDOT flavour (`Kernels::NEON_DOTPROD` only).
        pub fn $mat_dp(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
            // SAFETY: as above.
            unsafe { mat::<$k, true>(w, rb, a, cols, out) }
        }
    };
}

entries!(
    /// Q2_K weights · Q8_K activations (twin of `scalar::vec_dot_q2_k_q8_k`).
    vec_dot_q2_k_q8_k, vec_dot_q2_k_q8_k_dp, q2_k
);
entries!(
    /// Q3_K weights · Q8_K activations (twin of `scalar::vec_dot_q3_k_q8_k`).
    vec_dot_q3_k_q8_k, vec_dot_q3_k_q8_k_dp, q3_k
);
entries!(
    /// Q4_K weights · Q8_K activations (twin of `scalar::vec_dot_q4_k_q8_k`).
    vec_dot_q4_k_q8_k, vec_dot_q4_k_q8_k_dp, mat_q4_k_q8_k, mat_q4_k_q8_k_dp, Q4K
);
entries!(
    /// Q5_K weights · Q8_K activations (twin of `scalar::vec_dot_q5_k_q8_k`).
    vec_dot_q5_k_q8_k, vec_dot_q5_k_q8_k_dp, q5_k
);
entries!(
    /// Q6_K weights · Q8_K activations (twin of `scalar::vec_dot_q6_k_q8_k`).
    vec_dot_q6_k_q8_k, vec_dot_q6_k_q8_k_dp, mat_q6_k_q8_k, mat_q6_k_q8_k_dp, Q6K
);
