//! K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) · Q8_K activations, one row and batched, and the
//! Q8_K quantizer: bit for bit the scalar kernels' results.
//!
//! The scalar twins sum a whole super-block in i32 (`isum`, and `summs` for the mins) and then do
//! a few float operations per super-block. Those integer sums are exact (far inside i32), so any
//! order of integer additions gives the same `isum` and `summs`; the float part is the scalar
//! expression, verbatim, in scalar f32 operations (no FMA), blocks added in order.
//!
//! A block is decoded once ([`decode`]) to 256 unsigned weight codes (eight vectors of 32
//! elements; weight = code − `OFF`: Q3_K 4, Q6_K 32, else 0), a scale per 16 elements as i16
//! lanes, the mins and `d`, `dmin`; [`term`] multiplies it with one activation block: per 32
//! elements `vpmaddubsw` (codes · activations, a pair at most 2 · 63 · 128, inside i16), minus
//! `OFF` · the pair sums of the activations (`vpmaddubsw` against `OFF`; the difference is the
//! signed pair product, inside i16 too), then `vpmaddwd` with the scales into eight i32 lanes.
//! No sign trick, so an activation of −128 is exact. The one-row kernel is `decode` then `term`
//! per block, the batched one `decode` then `term` per column.

use super::{hsum, scales};
use crate::quant::act::BlockQ8K;
use crate::quant::types::QK_K;
use core::arch::x86_64::*;

/// 32 bytes of `b` from `at` (indexing checks the bounds).
#[target_feature(enable = "avx2")]
#[inline]
fn ld(b: &[u8], at: usize) -> __m256i {
    // SAFETY: `b[at..at + 32]` is 32 readable bytes; unaligned load.
    unsafe { _mm256_loadu_si256(b[at..at + 32].as_ptr().cast()) }
}

/// 16 bytes of `b` from `at`.
#[target_feature(enable = "avx2")]
#[inline]
fn ld16(b: &[u8], at: usize) -> __m128i {
    // SAFETY: `b[at..at + 16]` is 16 readable bytes; unaligned load.
    unsafe { _mm_loadu_si128(b[at..at + 16].as_ptr().cast()) }
}

/// The f16 at byte `at` of `b` as f32 (F16C, exact).
#[target_feature(enable = "avx2,f16c")]
#[inline]
fn f16_at(b: &[u8], at: usize) -> f32 {
    let h = u16::from_le_bytes([b[at], b[at + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
}

/// The u32 at byte `at` of `b`, little-endian.
#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `put` in the bytes of `v` that have bit mask `bit` set, 0 elsewhere.
#[target_feature(enable = "avx2")]
#[inline]
fn bit_set(v: __m256i, bit: u8, put: i8) -> __m256i {
    let m = _mm256_set1_epi8(bit as i8);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(v, m), m);
    _mm256_and_si256(set, _mm256_set1_epi8(put))
}

/// The low and high nibbles of 32 bytes.
#[target_feature(enable = "avx2")]
#[inline]
fn nibbles(q: __m256i) -> [__m256i; 2] {
    let m = _mm256_set1_epi8(0x0f);
    [
        _mm256_and_si256(q, m),
        _mm256_and_si256(_mm256_srli_epi16::<4>(q), m),
    ]
}

/// The four 2-bit planes of 32 bytes (bits 0-1, 2-3, 4-5, 6-7).
#[target_feature(enable = "avx2")]
#[inline]
fn planes(q: __m256i) -> [__m256i; 4] {
    let m = _mm256_set1_epi8(3);
    [
        _mm256_and_si256(q, m),
        _mm256_and_si256(_mm256_srli_epi16::<2>(q), m),
        _mm256_and_si256(_mm256_srli_epi16::<4>(q), m),
        _mm256_and_si256(_mm256_srli_epi16::<6>(q), m),
    ]
}

/// A block as its format lays it out: `d`, `dmin`, the codes of elements 32v .. 32v + 32, the
/// sixteen 16-element groups' scales (signed bytes) and mins (unsigned bytes).
struct Raw {
    d: f32,
    dmin: f32,
    w: [__m256i; 8],
    sc: __m128i,
    mn: __m128i,
}

/// A block decoded for [`term`]: the codes, scales of vector v as sixteen i16 (the low 128 bits
/// the scale of its elements 0..16, the high bits of 16..32), the sixteen mins as i16.
struct Dec {
    d: f32,
    dmin: f32,
    w: [__m256i; 8],
    sc: [__m256i; 8],
    mn: __m256i,
}

/// A K-quant weight format.
trait KFmt {
    const BYTES: usize;
    /// Weight = code − `OFF`.
    const OFF: i8;
    /// The block has mins, against the activations' 16-element sums.
    const MIN: bool;
    /// # Safety
    /// `b` holds one whole block; AVX2 and F16C are available.
    unsafe fn raw(b: &[u8]) -> Raw;
    /// The block's term from the exact sums: the scalar twin's float expression, verbatim.
    fn expr(d: f32, dmin: f32, yd: f32, isum: i32, summs: i32) -> f32;
}

/// `b` (one whole block) decoded: the group scales spread to the i16 lanes [`term`] multiplies.
#[target_feature(enable = "avx2,f16c")]
#[inline]
fn decode<F: KFmt>(b: &[u8]) -> Dec {
    // SAFETY: the caller hands one whole block; AVX2 and F16C are enabled for this function.
    let r = unsafe { F::raw(b) };
    let sc = core::array::from_fn(|v| {
        let g = 0x0101_0101_0101_0101i64 * 2 * v as i64;
        let idx = _mm_set_epi64x(g + 0x0101_0101_0101_0101, g);
        _mm256_cvtepi8_epi16(_mm_shuffle_epi8(r.sc, idx))
    });
    Dec {
        d: r.d,
        dmin: r.dmin,
        w: r.w,
        sc,
        mn: _mm256_cvtepu8_epi16(r.mn),
    }
}

/// The block `x` · activations `y`: exact sums, then the format's float expression.
#[target_feature(enable = "avx2")]
#[inline]
fn term<F: KFmt>(x: &Dec, y: &BlockQ8K) -> f32 {
    let off = _mm256_set1_epi8(F::OFF);
    let mut acc = _mm256_setzero_si256();
    for (v, (w, sc)) in x.w.iter().zip(&x.sc).enumerate() {
        // SAFETY: `y.qs[32v..32v + 32]` is 32 readable bytes (v < 8); unaligned load.
        let a = unsafe { _mm256_loadu_si256(y.qs[32 * v..32 * v + 32].as_ptr().cast()) };
        let mut p = _mm256_maddubs_epi16(*w, a);
        if F::OFF != 0 {
            p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(off, a));
        }
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, *sc));
    }
    let summs = if F::MIN {
        // SAFETY: `bsums` holds sixteen i16 (32 bytes); unaligned load.
        let b = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
        hsum(_mm256_madd_epi16(b, x.mn))
    } else {
        0
    };
    F::expr(x.d, x.dmin, y.d, hsum(acc), summs)
}

/// One row: `w` (whole blocks) · `a`, over as many blocks as both hold.
#[target_feature(enable = "avx2,f16c")]
fn row<F: KFmt>(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(F::BYTES).zip(a) {
        sumf += term::<F>(&decode::<F>(b), y);
    }
    sumf
}

/// Rows of `rb` bytes · `cols` columns of `a` into `out` (`[rows][cols]`): each block decoded
/// once for all columns ([`crate::quant::batch::by_blocks`]).
#[target_feature(enable = "avx2,f16c")]
fn mat<F: KFmt>(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
    // The closures inherit this function's target features; `by_blocks` hands whole blocks.
    crate::quant::batch::by_blocks(
        w,
        rb,
        F::BYTES,
        a,
        cols,
        out,
        |b| decode::<F>(b),
        |x, y| term::<F>(x, y),
    )
}

/// Q4_K (`HIGH` false) and Q5_K (`HIGH` true): `d`, `dmin` (f16), 12 bytes of 6-bit scales and
/// mins, Q5_K's 32 bytes of fifth bits, 128 bytes of nibbles; sub-block j (32 elements) takes
/// the low nibbles of bytes 32·(j/2).. when j is even, the high ones when odd.
struct Q45K<const HIGH: bool>;
impl<const HIGH: bool> KFmt for Q45K<HIGH> {
    const BYTES: usize = if HIGH { 176 } else { 144 };
    const OFF: i8 = 0;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn raw(b: &[u8]) -> Raw {
        // SAFETY: AVX2 and F16C are available (the caller's promise); `b` is one whole block.
        unsafe {
            let (d, dmin) = scales(b);
            let (sc, mn) = k4_groups(u32_at(b, 4), u32_at(b, 8), u32_at(b, 12));
            let qs = if HIGH { 48 } else { 16 };
            let qh = if HIGH {
                ld(b, 16)
            } else {
                _mm256_setzero_si256()
            };
            let mut w = [_mm256_setzero_si256(); 8];
            for j in 0..4 {
                [w[2 * j], w[2 * j + 1]] = nibbles(ld(b, qs + 32 * j));
                if HIGH {
                    w[2 * j] = _mm256_or_si256(w[2 * j], bit_set(qh, 1 << (2 * j), 0x10));
                    w[2 * j + 1] = _mm256_or_si256(w[2 * j + 1], bit_set(qh, 2 << (2 * j), 0x10));
                }
            }
            Raw { d, dmin, w, sc, mn }
        }
    }
    #[inline(always)]
    fn expr(d: f32, dmin: f32, yd: f32, isum: i32, summs: i32) -> f32 {
        // d · y.d · isum − dmin · y.d · summs, as `scalar::vec_dot_q4_k_q8_k`.
        let (d, dmin) = (d * yd, dmin * yd);
        d * isum as f32 - dmin * summs as f32
    }
}

/// The scales and mins of a Q4_K / Q5_K block (its 12 bytes as three u32) per 16-element group
/// (each sub-block's twice), as [`crate::quant::scalar::scale_min_k4`] unpacks them.
#[target_feature(enable = "avx2")]
#[inline]
fn k4_groups(u0: u32, u1: u32, u2: u32) -> (__m128i, __m128i) {
    // Sub-blocks 0..4: the low six bits of bytes 0..4 (scales) and 4..8 (mins). Sub-blocks 4..8:
    // the nibbles of bytes 8..12, with the top two bits of bytes 0..4 (scales) / 4..8 (mins) above.
    let sc_lo = u0 & 0x3f3f_3f3f;
    let mn_lo = u1 & 0x3f3f_3f3f;
    let sc_hi = (u2 & 0x0f0f_0f0f) | ((u0 >> 2) & 0x3030_3030);
    let mn_hi = ((u2 >> 4) & 0x0f0f_0f0f) | ((u1 >> 2) & 0x3030_3030);
    let scm = _mm_set_epi32(mn_hi as i32, mn_lo as i32, sc_hi as i32, sc_lo as i32);
    let twice = _mm_set_epi64x(0x0707_0606_0505_0404, 0x0303_0202_0101_0000);
    let twice_mn = _mm_add_epi8(twice, _mm_set1_epi8(8));
    (
        _mm_shuffle_epi8(scm, twice),
        _mm_shuffle_epi8(scm, twice_mn),
    )
}

/// Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed scales, `d` (f16).
struct Q6K;
impl KFmt for Q6K {
    const BYTES: usize = 210;
    const OFF: i8 = 32;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn raw(b: &[u8]) -> Raw {
        // SAFETY: AVX2 and F16C are available (the caller's promise); `b` is one whole block.
        unsafe {
            let m30 = _mm256_set1_epi8(0x30);
            let hi = |v: __m256i| _mm256_and_si256(v, m30);
            let mut w = [_mm256_setzero_si256(); 8];
            for n in 0..2 {
                // Elements 128n + l, + 32, + 64, + 96 (l < 32): the low nibbles of ql[l],
                // ql[l + 32], then their high nibbles; bits 0-1, 2-3, 4-5, 6-7 of qh[l] above.
                let [l0, h0] = nibbles(ld(b, 64 * n));
                let [l1, h1] = nibbles(ld(b, 64 * n + 32));
                let qh = ld(b, 128 + 32 * n);
                w[4 * n] = _mm256_or_si256(l0, hi(_mm256_slli_epi16::<4>(qh)));
                w[4 * n + 1] = _mm256_or_si256(l1, hi(_mm256_slli_epi16::<2>(qh)));
                w[4 * n + 2] = _mm256_or_si256(h0, hi(qh));
                w[4 * n + 3] = _mm256_or_si256(h1, hi(_mm256_srli_epi16::<2>(qh)));
            }
            let zero = _mm_setzero_si128();
            Raw {
                d: f16_at(b, 208),
                dmin: 0.0,
                w,
                sc: ld16(b, 192),
                mn: zero,
            }
        }
    }
    #[inline(always)]
    fn expr(d: f32, _: f32, yd: f32, isum: i32, _: i32) -> f32 {
        // d · y.d · isum, as `scalar::vec_dot_q6_k_q8_k`.
        let d = d * yd;
        d * isum as f32
    }
}

/// Q2_K: 16 bytes of scales (low nibble) and mins (high nibble), 64 of 2-bit values, `d`,
/// `dmin` (f16); element 128h + 32p + l is plane p of byte 32h + l.
struct Q2K;
impl KFmt for Q2K {
    const BYTES: usize = 84;
    const OFF: i8 = 0;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn raw(b: &[u8]) -> Raw {
        // SAFETY: AVX2 and F16C are available (the caller's promise); `b` is one whole block.
        unsafe {
            let [p0, p1] = [0, 1].map(|h| planes(ld(b, 16 + 32 * h)));
            let w = [p0[0], p0[1], p0[2], p0[3], p1[0], p1[1], p1[2], p1[3]];
            let s = ld16(b, 0);
            let m = _mm_set1_epi8(0x0f);
            let (sc, mn) = (
                _mm_and_si128(s, m),
                _mm_and_si128(_mm_srli_epi16::<4>(s), m),
            );
            let (d, dmin) = scales(&b[80..]);
            Raw { d, dmin, w, sc, mn }
        }
    }
    #[inline(always)]
    fn expr(d: f32, dmin: f32, yd: f32, isum: i32, summs: i32) -> f32 {
        // As `scalar::vec_dot_q2_k_q8_k`.
        (yd * d) * isum as f32 - (yd * dmin) * summs as f32
    }
}

/// Q3_K: 32 bytes of high-bit masks, 64 of 2-bit values, 12 of scales, `d` (f16); element
/// 128h + 32p + l is plane p of byte 32h + l, plus 4 when bit 4h + p of mask byte l is set.
struct Q3K;
impl KFmt for Q3K {
    const BYTES: usize = 110;
    const OFF: i8 = 4;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn raw(b: &[u8]) -> Raw {
        // SAFETY: AVX2 and F16C are available (the caller's promise); `b` is one whole block.
        unsafe {
            let hm = ld(b, 0);
            let mut w = [_mm256_setzero_si256(); 8];
            for h in 0..2 {
                for (p, low) in planes(ld(b, 32 + 32 * h)).into_iter().enumerate() {
                    let k = 4 * h + p;
                    w[k] = _mm256_or_si256(low, bit_set(hm, 1 << k, 4));
                }
            }
            let sc = q3k_scales(u32_at(b, 96), u32_at(b, 100), u32_at(b, 104));
            let zero = _mm_setzero_si128();
            Raw {
                d: f16_at(b, 108),
                dmin: 0.0,
                w,
                sc,
                mn: zero,
            }
        }
    }
    #[inline(always)]
    fn expr(d: f32, _: f32, yd: f32, isum: i32, _: i32) -> f32 {
        // As `scalar::vec_dot_q3_k_q8_k`.
        let d = d * yd;
        d * isum as f32
    }
}

/// The sixteen signed 6-bit scales of a Q3_K block (its 12 bytes as three u32), as
/// [`crate::quant::scalar::q3k_scales`].
#[target_feature(enable = "avx2")]
#[inline]
fn q3k_scales(a0: u32, a1: u32, a2: u32) -> __m128i {
    // Low nibbles from bytes 0..8 (scales 0..8) or their high nibbles (8..16); the two high bits
    // of scale j are bits 2(j/4), 2(j/4)+1 of byte 8 + j%4, moved to bits 4, 5.
    let s0 = (a0 & 0x0f0f_0f0f) | ((a2 << 4) & 0x3030_3030);
    let s1 = (a1 & 0x0f0f_0f0f) | ((a2 << 2) & 0x3030_3030);
    let s2 = ((a0 >> 4) & 0x0f0f_0f0f) | (a2 & 0x3030_3030);
    let s3 = ((a1 >> 4) & 0x0f0f_0f0f) | ((a2 >> 2) & 0x3030_3030);
    let v = _mm_set_epi32(s3 as i32, s2 as i32, s1 as i32, s0 as i32);
    _mm_sub_epi8(v, _mm_set1_epi8(32))
}

// ---------------------------------------------------------------------------------------------
// The Q8_K quantizer (twin of `act::quantize_q8_k`).

/// `|v|`, lane by lane (the sign bit cleared, as `libm::fabsf`).
#[target_feature(enable = "avx2")]
#[inline]
fn abs8(v: __m256) -> __m256 {
    _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff)))
}

/// Eight values of `x` from `at`.
#[target_feature(enable = "avx2")]
#[inline]
fn ld8(x: &[f32], at: usize) -> __m256 {
    // SAFETY: `x[at..at + 8]` is eight readable f32; unaligned load.
    unsafe { _mm256_loadu_ps(x[at..at + 8].as_ptr()) }
}

/// The largest `|v|` of the block and the first value that has it (the scalar loop's `amax` and
/// `max`: NaNs never win a comparison there, nor in `vmaxps` with the running maximum second).
#[target_feature(enable = "avx2")]
#[inline]
fn amax_max(x: &[f32]) -> (f32, f32) {
    let mut m = _mm256_setzero_ps();
    for i in (0..QK_K).step_by(8) {
        m = _mm256_max_ps(abs8(ld8(x, i)), m);
    }
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds eight f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
    let amax = lanes.iter().fold(0.0f32, |a, &v| a.max(v));
    for i in (0..QK_K).step_by(8) {
        let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(abs8(ld8(x, i)), _mm256_set1_ps(amax));
        let mask = _mm256_movemask_ps(eq);
        if mask != 0 {
            return (amax, x[i + mask.trailing_zeros() as usize]);
        }
    }
    (amax, 0.0)
}

/// `nearest_int(iscale · v).min(127)` of eight values, as i32.
#[target_feature(enable = "avx2")]
#[inline]
fn round8(iscale: __m256, v: __m256) -> __m256i {
    // nearest_int: the bits of x + 1.5 · 2^23, mantissa minus 2^22.
    let t = _mm256_add_ps(_mm256_mul_ps(iscale, v), _mm256_set1_ps(12_582_912.0));
    let m = _mm256_and_si256(_mm256_castps_si256(t), _mm256_set1_epi32(0x007f_ffff));
    let q = _mm256_sub_epi32(m, _mm256_set1_epi32(0x0040_0000));
    _mm256_min_epi32(q, _mm256_set1_epi32(127))
}

/// 32 values of `x` from `at` quantized (`as i8` keeps the low byte, as here).
#[target_feature(enable = "avx2")]
#[inline]
fn quant32(x: &[f32], at: usize, iscale: __m256) -> __m256i {
    let low = _mm256_set1_epi32(0xff);
    let q: [__m256i; 4] =
        core::array::from_fn(|k| _mm256_and_si256(round8(iscale, ld8(x, at + 8 * k)), low));
    // The packs interleave 128-bit lanes: dwords [q0 0-3, q1 0-3, q2 0-3, q3 0-3 | q0 4-7, ..].
    let p = _mm256_packus_epi16(
        _mm256_packus_epi32(q[0], q[1]),
        _mm256_packus_epi32(q[2], q[3]),
    );
    _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// The sums of 16 of four vectors of 32 int8: `[s0, s2, s4, s6 | s1, s3, s5, s7]` where vector
/// v holds groups 2v, 2v + 1.
#[target_feature(enable = "avx2")]
#[inline]
fn sums16(q: [__m256i; 4]) -> __m256i {
    // Sums of 4 (`vpmaddubsw` with ones, exact in i16; `vpmaddwd` with ones), then two `vphaddd`.
    let s4 = q.map(|q| {
        let p = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
        _mm256_madd_epi16(p, _mm256_set1_epi16(1))
    });
    _mm256_hadd_epi32(
        _mm256_hadd_epi32(s4[0], s4[1]),
        _mm256_hadd_epi32(s4[2], s4[3]),
    )
}

/// One block of 256 values into `y`.
#[target_feature(enable = "avx2")]
#[inline]
fn quantize_block(x: &[f32], y: &mut BlockQ8K) {
    let (amax, max) = amax_max(x);
    if amax == 0.0 {
        *y = BlockQ8K::default();
        return;
    }
    let iscale = -127.0 / max;
    let q: [__m256i; 8] = core::array::from_fn(|v| quant32(x, 32 * v, _mm256_set1_ps(iscale)));
    for (v, q) in q.iter().enumerate() {
        // SAFETY: `y.qs[32v..32v + 32]` is 32 writable bytes (v < 8); unaligned store.
        unsafe { _mm256_storeu_si256(y.qs[32 * v..32 * v + 32].as_mut_ptr().cast(), *q) };
    }
    for h in 0..2 {
        let mut s = [0i32; 8];
        let v = sums16([q[4 * h], q[4 * h + 1], q[4 * h + 2], q[4 * h + 3]]);
        // SAFETY: `s` holds eight i32; unaligned store.
        unsafe { _mm256_storeu_si256(s.as_mut_ptr().cast(), v) };
        for k in 0..4 {
            y.bsums[8 * h + 2 * k] = s[k] as i16;
            y.bsums[8 * h + 2 * k + 1] = s[k + 4] as i16;
        }
    }
    y.d = 1.0 / iscale;
}

/// `x` (length a multiple of 256) to Q8_K blocks (twin of `act::quantize_q8_k`, the same bytes).
pub fn quantize_q8_k(x: &[f32], out: &mut [BlockQ8K]) {
    #[target_feature(enable = "avx2")]
    fn all(x: &[f32], out: &mut [BlockQ8K]) {
        for (xb, y) in x.chunks_exact(QK_K).zip(out.iter_mut()) {
            quantize_block(xb, y);
        }
    }
    // SAFETY: the AVX2 set is only handed out when `available()` says the CPU runs it.
    unsafe { all(x, out) }
}

macro_rules! entries {
    ($(#[$doc:meta])* $one:ident, $mat:ident, $fmt:ty) => {
        $(#[$doc])*
        pub fn $one(w: &[u8], a: &[BlockQ8K]) -> f32 {
            // SAFETY: the AVX2 set is only handed out when `available()` says the CPU runs it.
            unsafe { row::<$fmt>(w, a) }
        }
        $(#[$doc])*
        /// Batched: rows · `cols` columns into `out` as `[rows][cols]`.
        pub fn $mat(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
            // SAFETY: as above.
            unsafe { mat::<$fmt>(w, rb, a, cols, out) }
        }
    };
}

entries!(
    /// Q2_K weights · Q8_K activations (twin of `scalar::vec_dot_q2_k_q8_k`).
    vec_dot_q2_k_q8_k, mat_q2_k_q8_k, Q2K
);
entries!(
    /// Q3_K weights · Q8_K activations (twin of `scalar::vec_dot_q3_k_q8_k`).
    vec_dot_q3_k_q8_k, mat_q3_k_q8_k, Q3K
);
entries!(
    /// Q4_K weights · Q8_K activations (twin of `scalar::vec_dot_q4_k_q8_k`).
    vec_dot_q4_k_q8_k, mat_q4_k_q8_k, Q45K<false>
);
entries!(
    /// Q5_K weights · Q8_K activations (twin of `scalar::vec_dot_q5_k_q8_k`).
    vec_dot_q5_k_q8_k, mat_q5_k_q8_k, Q45K<true>
);
entries!(
    /// Q6_K weights · Q8_K activations (twin of `scalar::vec_dot_q6_k_q8_k`).
    vec_dot_q6_k_q8_k, mat_q6_k_q8_k, Q6K
);
