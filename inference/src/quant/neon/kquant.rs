//! K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) · Q8_K activations.
//!
//! The scalar twins sum a whole super-block in i32 (`isum`, and `summs` for the mins) and then do a
//! few float operations per super-block. Here the integer part is SIMD: groups of 16 or 32
//! products are summed exactly (`sums4`, `sums4x16`), multiplied by their integer scales in i32
//! lanes and summed across lanes; the float part is the scalar expression, verbatim. Weights are
//! decoded to the scalar's signed values (Q3_K -4..3, Q6_K -32..31), so nothing relies on the
//! activations' `bsums` beyond what the scalar code uses them for (Q2_K, Q4_K, Q5_K mins).
//!
//! Each type is a `KBlock`: `decode` turns a super-block into vectors of weights and integer
//! scales once, `term` multiplies it with one activation block. The one-row kernel (`row`) is
//! decode then term per block; the batched one (`mat`, prompt batches) decodes each block once and
//! takes one term per column, so both give the same bits. Q4_K and Q5_K share a decoded form
//! (`K45Dec`: eight sub-blocks of 32 with scales and mins), Q2_K, Q3_K and Q6_K another (`G16Dec`:
//! sixteen groups of 16 with one scale each; Q2_K adds its mins).

use super::{f16_le, ldq, ldq_i8, nibbles, rd_u32, sums4, sums4x16};
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

/// A Q4_K or Q5_K block: `d`, `dmin`, the scales and mins (bytes 0..8, 8..16), the 256 weights
/// (0..15, or 0..31 with Q5_K's fifth bits) as four groups of 32 per half.
struct K45Dec {
    d: f32,
    dmin: f32,
    scm: uint8x16_t,
    wq: [[[int8x16_t; 2]; 4]; 2],
}

/// A Q4_K / Q5_K block decoded: the head (`d`, `dmin`, scales and mins), the nibbles at
/// `b[qs..qs + 128]` and, for Q5_K, the fifth bits `qh` (bit 2j, 2j + 1 of byte l: element l of
/// sub-block 2j, 2j + 1).
#[inline(always)]
fn k45_decode<const N: usize>(b: &[u8; N], qs: usize, qh: Option<[uint8x16_t; 2]>) -> K45Dec {
    let sc: &[u8; 12] = b[4..16].try_into().unwrap_or(&[0; 12]);
    // SAFETY: NEON is part of the aarch64 baseline; register operations only.
    let wq = [0, 1].map(|h| unsafe {
        // Bit k of qh moved to bit 4, inserted above the nibble.
        let put = |n: uint8x16_t, part: usize, k: usize| match qh {
            Some(qh) => {
                let up = vshlq_u8(qh[part], vdupq_n_s8(4 - k as i8));
                vreinterpretq_s8_u8(vbslq_u8(vdupq_n_u8(0x10), up, n))
            }
            None => vreinterpretq_s8_u8(n),
        };
        // Sub-blocks 4h..4h+4: the low and high nibbles of 32 bytes each, twice.
        let mut wq = [[vdupq_n_s8(0); 2]; 4];
        for jj in 0..2 {
            let j = 2 * h + jj;
            let [la, ha] = nibbles(ldq(b, qs + 32 * j));
            let [lb, hb] = nibbles(ldq(b, qs + 32 * j + 16));
            wq[2 * jj] = [put(la, 0, 2 * j), put(lb, 1, 2 * j)];
            wq[2 * jj + 1] = [put(ha, 0, 2 * j + 1), put(hb, 1, 2 * j + 1)];
        }
        wq
    });
    K45Dec {
        d: f16_le(b, 0),
        dmin: f16_le(b, 2),
        scm: k4_scales_mins(sc),
        wq,
    }
}

/// A Q4_K / Q5_K block's term (every weight ≤ `maxw`): `d · isum − dmin · summs` as the scalar.
#[inline(always)]
fn k45_term<const DP: bool>(maxw: i32, x: &K45Dec, y: &BlockQ8K) -> f32 {
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
            let g = sums4::<DP>(maxw, x.wq[h], aq);
            iv = vmlaq_s32(iv, g, s[h]);
        }
        let isum = vaddvq_s32(iv);
        d * isum as f32 - dmin * summs as f32
    }
}

/// Q4_K: `d`, `dmin` (f16), 12 bytes of scales and mins, 128 bytes of nibbles.
struct Q4K;

impl KBlock for Q4K {
    const BYTES: usize = 144;
    type Dec = K45Dec;
    #[inline(always)]
    unsafe fn decode(b: &[u8]) -> K45Dec {
        let bb: &[u8; 144] = b.try_into().unwrap_or(&[0; 144]);
        k45_decode(bb, 16, None)
    }
    #[inline(always)]
    fn term<const DP: bool>(x: &K45Dec, y: &BlockQ8K) -> f32 {
        k45_term::<DP>(15, x, y)
    }
}

/// Q5_K: `d`, `dmin` (f16), 12 bytes of scales and mins, 32 bytes of fifth bits, 128 of nibbles.
struct Q5K;

impl KBlock for Q5K {
    const BYTES: usize = 176;
    type Dec = K45Dec;
    #[inline(always)]
    unsafe fn decode(b: &[u8]) -> K45Dec {
        let bb: &[u8; 176] = b.try_into().unwrap_or(&[0; 176]);
        k45_decode(bb, 48, Some([ldq(bb, 16), ldq(bb, 32)]))
    }
    #[inline(always)]
    fn term<const DP: bool>(x: &K45Dec, y: &BlockQ8K) -> f32 {
        k45_term::<DP>(31, x, y)
    }
}

/// A block of sixteen groups of 16 with one integer scale each (Q2_K, Q3_K, Q6_K): `d`, the
/// scales widened to i32, the weights; group 4i + k is `wq[i][k]`, its scale lane k of `s[i]`.
struct G16Dec {
    d: f32,
    s: [int32x4_t; 4],
    wq: [[int8x16_t; 4]; 4],
}

/// `Σ_g scale[g] · Σ w·a` over the sixteen groups of `x` (every |w| ≤ `maxw` ≤ 63), exact.
#[inline(always)]
fn g16_isum<const DP: bool>(maxw: i32, x: &G16Dec, y: &BlockQ8K) -> i32 {
    // SAFETY: NEON is part of the aarch64 baseline.
    unsafe {
        let mut iv = vdupq_n_s32(0);
        for i in 0..4 {
            let aq: [int8x16_t; 4] = core::array::from_fn(|k| ldq_i8(&y.qs, 64 * i + 16 * k));
            let g = sums4x16::<DP>(maxw, x.wq[i], aq);
            iv = vmlaq_s32(iv, g, x.s[i]);
        }
        vaddvq_s32(iv)
    }
}

/// The term of a block without mins (Q3_K, Q6_K): `(d · y.d) · isum` as the scalar.
#[inline(always)]
fn g16_term<const DP: bool>(maxw: i32, x: &G16Dec, y: &BlockQ8K) -> f32 {
    let d = x.d * y.d;
    d * g16_isum::<DP>(maxw, x, y) as f32
}

/// Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed scales, `d` (f16).
struct Q6K;

impl KBlock for Q6K {
    const BYTES: usize = 210;
    type Dec = G16Dec;
    #[inline(always)]
    unsafe fn decode(b: &[u8]) -> G16Dec {
        // SAFETY: NEON is part of the aarch64 baseline; `b` holds 210 bytes.
        unsafe {
            let m4 = vdupq_n_u8(0x0f);
            let m30 = vdupq_n_u8(0x30);
            let c32 = vdupq_n_s8(32);
            let d = f16_le(b, 208);
            let bb: &[u8; 210] = b.try_into().unwrap_or(&[0; 210]);
            let s = widen_i8(vreinterpretq_s8_u8(ldq(bb, 192)));
            let h = [0, 1].map(|n| {
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
                [[w1[0], w1[1], w2[0], w2[1]], [w3[0], w3[1], w4[0], w4[1]]]
            });
            let wq = [h[0][0], h[0][1], h[1][0], h[1][1]];
            G16Dec { d, s, wq }
        }
    }
    #[inline(always)]
    fn term<const DP: bool>(x: &G16Dec, y: &BlockQ8K) -> f32 {
        g16_term::<DP>(32, x, y)
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

/// The 2-bit values (0..3) of groups 4i..4i + 4 of a Q2_K / Q3_K block whose 64 bytes of pairs
/// start at `b[at]`, each with its plane (0..8; Q3_K's mask bit). Group 4i + t is plane
/// 4·(i / 2) + 2·(i % 2) + t / 2 of bytes 32·(i / 2) + 16·(t % 2) .. +16.
#[inline(always)]
fn planes2<const N: usize>(b: &[u8; N], at: usize, i: usize) -> [(uint8x16_t, usize); 4] {
    let (half, pair) = (i / 2, i % 2);
    let q = [ldq(b, at + 32 * half), ldq(b, at + 32 * half + 16)];
    core::array::from_fn(|t| {
        let sh = 2 * pair + t / 2;
        // SAFETY: NEON is part of the aarch64 baseline; register operations only.
        let v = unsafe { vandq_u8(vshlq_u8(q[t % 2], vdupq_n_s8(-2 * sh as i8)), vdupq_n_u8(3)) };
        (v, 4 * half + sh)
    })
}

/// Q3_K: 32 bytes of high-bit masks, 64 of 2-bit pairs, 12 of scales, `d` (f16).
struct Q3K;

impl KBlock for Q3K {
    const BYTES: usize = 110;
    type Dec = G16Dec;
    #[inline(always)]
    unsafe fn decode(b: &[u8]) -> G16Dec {
        let bb: &[u8; 110] = b.try_into().unwrap_or(&[0; 110]);
        let sc: &[u8; 12] = bb[96..108].try_into().unwrap_or(&[0; 12]);
        // SAFETY: NEON is part of the aarch64 baseline.
        let s = unsafe { widen_i8(q3k_scales(sc)) };
        let hm = [ldq(bb, 0), ldq(bb, 16)];
        let wq = core::array::from_fn(|i| {
            let p = planes2(bb, 32, i);
            core::array::from_fn(|t| {
                let (low, k) = p[t];
                // SAFETY: NEON is part of the aarch64 baseline; register operations only.
                unsafe {
                    // Minus 4 where mask bit k is clear.
                    let hb = vshlq_u8(hm[t % 2], vdupq_n_s8(2 - k as i8));
                    let m4 = vbicq_u8(vdupq_n_u8(4), hb);
                    vsubq_s8(vreinterpretq_s8_u8(low), vreinterpretq_s8_u8(m4))
                }
            })
        });
        G16Dec {
            d: f16_le(bb, 108),
            s,
            wq,
        }
    }
    #[inline(always)]
    fn term<const DP: bool>(x: &G16Dec, y: &BlockQ8K) -> f32 {
        g16_term::<DP>(4, x, y)
    }
}

/// Q2_K: 16 bytes of scales (low nibble) and mins (high nibble), 64 of 2-bit values, `d`, `dmin`.
struct Q2K;

/// A Q2_K block: `d`, the scales and weights, `dmin` and the sixteen mins as i16.
struct Q2KDec {
    g: G16Dec,
    dmin: f32,
    mn: [int16x8_t; 2],
}

impl KBlock for Q2K {
    const BYTES: usize = 84;
    type Dec = Q2KDec;
    #[inline(always)]
    unsafe fn decode(b: &[u8]) -> Q2KDec {
        let bb: &[u8; 84] = b.try_into().unwrap_or(&[0; 84]);
        let sc = ldq(bb, 0);
        let wq = core::array::from_fn(|i| {
            planes2(bb, 16, i).map(|(v, _)| {
                // SAFETY: NEON is part of the aarch64 baseline; register operations only.
                unsafe { vreinterpretq_s8_u8(v) }
            })
        });
        // SAFETY: NEON is part of the aarch64 baseline; register operations only.
        let (s, mn) = unsafe {
            let m = vshrq_n_u8::<4>(sc);
            let mn = [vmovl_u8(vget_low_u8(m)), vmovl_high_u8(m)].map(|v| vreinterpretq_s16_u16(v));
            (widen_u8(vandq_u8(sc, vdupq_n_u8(0x0f))), mn)
        };
        let (d, dmin) = (f16_le(bb, 80), f16_le(bb, 82));
        Q2KDec {
            g: G16Dec { d, s, wq },
            dmin,
            mn,
        }
    }
    #[inline(always)]
    fn term<const DP: bool>(x: &Q2KDec, y: &BlockQ8K) -> f32 {
        // SAFETY: NEON is part of the aarch64 baseline; `bsums` holds sixteen i16.
        let summs = unsafe {
            // summs = Σ bsums[g] · (sc[g] >> 4), exact in i32.
            let (b0, b1) = (
                vld1q_s16(y.bsums.as_ptr()),
                vld1q_s16(y.bsums.as_ptr().add(8)),
            );
            let [mn, mn2] = x.mn;
            let t = vmull_s16(vget_low_s16(b0), vget_low_s16(mn));
            let t = vmlal_high_s16(t, b0, mn);
            let t = vmlal_s16(t, vget_low_s16(b1), vget_low_s16(mn2));
            vaddvq_s32(vmlal_high_s16(t, b1, mn2))
        };
        let isum = g16_isum::<DP>(3, &x.g, y);
        (y.d * x.g.d) * isum as f32 - (y.d * x.dmin) * summs as f32
    }
}

macro_rules! entries {
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
    vec_dot_q2_k_q8_k, vec_dot_q2_k_q8_k_dp, mat_q2_k_q8_k, mat_q2_k_q8_k_dp, Q2K
);
entries!(
    /// Q3_K weights · Q8_K activations (twin of `scalar::vec_dot_q3_k_q8_k`).
    vec_dot_q3_k_q8_k, vec_dot_q3_k_q8_k_dp, mat_q3_k_q8_k, mat_q3_k_q8_k_dp, Q3K
);
entries!(
    /// Q4_K weights · Q8_K activations (twin of `scalar::vec_dot_q4_k_q8_k`).
    vec_dot_q4_k_q8_k, vec_dot_q4_k_q8_k_dp, mat_q4_k_q8_k, mat_q4_k_q8_k_dp, Q4K
);
entries!(
    /// Q5_K weights · Q8_K activations (twin of `scalar::vec_dot_q5_k_q8_k`).
    vec_dot_q5_k_q8_k, vec_dot_q5_k_q8_k_dp, mat_q5_k_q8_k, mat_q5_k_q8_k_dp, Q5K
);
entries!(
    /// Q6_K weights · Q8_K activations (twin of `scalar::vec_dot_q6_k_q8_k`).
    vec_dot_q6_k_q8_k, vec_dot_q6_k_q8_k_dp, mat_q6_k_q8_k, mat_q6_k_q8_k_dp, Q6K
);
