//! AVX2 twins for the PC runner (x86-64): the 32-wide formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) ·
//! Q8_0 / Q8_1 activations, one row and batched, bit for bit the scalar kernels' results; the
//! K-quants · Q8_K and the Q8_K quantizer in `kquant`.
//!
//! Per block the integer sum is exact whatever the instructions: the unsigned weight codes (the
//! nibbles, with the fifth bit for Q5) go through `vpmaddubsw` against the int8 activations (a
//! pair of products is at most 2 · 31 · 128, far inside i16) and `vpmaddwd` to eight i32 lanes;
//! the formats with an offset (Q4_0: code − 8, Q5_0: code − 16) subtract offset · Σ a, with Σ a
//! from the same two instructions against ones; signed weights (Q8_0's bytes, IQ4_NL's values
//! looked up with `vpshufb`) are widened to i16 and multiplied with `vpmaddwd`. No sign trick, so an activation of −128 is exact too. Then the
//! scalar code's float expression for the block, in scalar f32 operations (no FMA), added to the
//! row's sum in block order: the same bits as `scalar::vec_dot_*`.
//!
//! The set is chosen at run time from CPUID (AVX2, and the OS saving the YMM registers), in
//! `core` so the crate stays `no_std`; [`available`] is what `Kernels::available` consults.

use super::act::{Act32 as Act, BlockQ8_0, BlockQ8_1};
use super::scalar::with_q32;
use super::scalar::IQ4_NL_VALUES;
use super::table::with_k_quants;
use super::{Features, GgmlType, Kernels, RowKernels, TypeKernels};
use core::arch::x86_64::*;

mod kquant;

pub use kquant::{
    mat_q2_k_q8_k, mat_q3_k_q8_k, mat_q4_k_q8_k, mat_q5_k_q8_k, mat_q6_k_q8_k, quantize_q8_k,
    vec_dot_q2_k_q8_k, vec_dot_q3_k_q8_k, vec_dot_q4_k_q8_k, vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k,
};

/// The AVX2 set: the 32-wide types (one row, four rows, batched) and the K-quants (one row and
/// batched), the Q8_K quantizer and the attention; the float types and the other quantizers are
/// the scalar set's. Only for CPUs with AVX2 ([`available`]).
pub const KERNELS: Kernels = {
    let set = Kernels {
        name: "avx2",
        quantize_q8_k,
        dot_f32_f16,
        attend_head,
        to_f16,
        ..Kernels::SCALAR
    };
    let set = with_k_quants!(with_q32!(set, self, self), self);
    let iq4_nl = RowKernels::dot(vec_dot_iq4_nl_q8_0)
        .x4(vec_dot_iq4_nl_q8_0_x4)
        .mat(mat_iq4_nl_q8_0);
    set.with(GgmlType::IQ4NL, TypeKernels::Q8_0(iq4_nl))
};

/// Whether a CPU with `f` runs [`KERNELS`].
pub fn runs_on(f: &Features) -> bool {
    f.avx2
}

/// Whether this CPU runs this set: CPUID leaf 7 EBX bit 5 (AVX2), leaf 1 ECX bits 27 (OSXSAVE),
/// 28 (AVX) and 29 (F16C, for the block scales), with XCR0 enabling the XMM and YMM state.
pub fn available() -> bool {
    let (l1, l7) = (__cpuid(1), __cpuid_count(7, 0));
    let osxsave_avx = l1.ecx & (7 << 27) == 7 << 27;
    // SAFETY: XGETBV is available when CPUID says OSXSAVE (checked first).
    osxsave_avx && unsafe { xcr0() } & 6 == 6 && l7.ebx & (1 << 5) != 0
}

/// The OS's enabled-state mask XCR0.
///
/// # Safety
/// Only where CPUID reports OSXSAVE (XGETBV faults otherwise).
#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    // SAFETY: the caller checked OSXSAVE.
    unsafe { _xgetbv(0) }
}

/// The block's scale `d` and (for formats with one) min `m`, f16 to f32 with F16C (exact, as
/// every f16 is an f32).
#[target_feature(enable = "avx2,f16c")]
#[inline]
fn scales(b: &[u8]) -> (f32, f32) {
    let dm = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(dm as i32));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_shuffle_ps::<1>(v, v)))
}

/// A 32-element weight block format.
trait Fmt {
    const BYTES: usize;
    /// The block stores a min `m` after `d` (Q4_1, Q5_1: paired with Q8_1).
    const MIN: bool;
    /// Weight = code − `OFFSET` (Q4_0: 8, Q5_0: 16).
    const OFFSET: i32;
    /// The weights are signed bytes (Q8_0, IQ4_NL), not codes.
    const SIGNED: bool;
    /// The block's 32 weight codes (or signed weights), element order.
    ///
    /// # Safety
    /// `b` holds one whole block; AVX2 is available.
    unsafe fn codes(b: &[u8]) -> __m256i;
}

/// 16 bytes of nibbles as 32 codes: low nibbles (elements 0..16), then high (16..32).
#[target_feature(enable = "avx2")]
#[inline]
fn nibbles(qs: &[u8]) -> __m256i {
    // SAFETY: `qs[..16]` is 16 readable bytes (indexing checks it); unaligned load.
    let q = unsafe { _mm_loadu_si128(qs[..16].as_ptr().cast()) };
    let m = _mm_set1_epi8(0x0f);
    let lo = _mm_and_si128(q, m);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(q), m);
    _mm256_set_m128i(hi, lo)
}

/// The fifth bits of a Q5 block as 0x10 bytes: element `e` takes bit `e` of `qh`.
#[target_feature(enable = "avx2")]
#[inline]
fn fifth_bits(qh: u32) -> __m256i {
    // Byte e of the broadcast holds bits 8·(e/8) .. of qh; pick byte e/8 into lane e, test bit e%8.
    let v = _mm256_set1_epi32(qh as i32);
    let idx = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0,
    );
    let spread = _mm256_shuffle_epi8(v, idx);
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// The 4- and 5-bit formats: `d` (f16), then `m` (f16) when `MIN`, then the fifth bits `qh`
/// (u32) when `HIGH`, then 16 bytes of nibbles; weight = code − `OFF`.
struct Nibbles<const BYTES: usize, const MIN: bool, const HIGH: bool, const OFF: i32>;
impl<const BYTES: usize, const MIN: bool, const HIGH: bool, const OFF: i32> Fmt
    for Nibbles<BYTES, MIN, HIGH, OFF>
{
    const BYTES: usize = BYTES;
    const MIN: bool = MIN;
    const OFFSET: i32 = OFF;
    const SIGNED: bool = false;
    #[inline(always)]
    unsafe fn codes(b: &[u8]) -> __m256i {
        let at = if MIN { 4 } else { 2 };
        let qs = at + if HIGH { 4 } else { 0 };
        // SAFETY: AVX2 is available (the caller's promise); `b` is one whole block.
        unsafe {
            let n = nibbles(&b[qs..qs + 16]);
            if HIGH {
                let qh = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                _mm256_or_si256(n, fifth_bits(qh))
            } else {
                n
            }
        }
    }
}
type Q4_0 = Nibbles<18, false, false, 8>;
type Q4_1 = Nibbles<20, true, false, 0>;
type Q5_0 = Nibbles<22, false, true, 16>;
type Q5_1 = Nibbles<24, true, true, 0>;

/// The formats with signed weights after `d` (f16): Q8_0 (32 int8) and, with `NL`, IQ4_NL (16
/// bytes of nibbles, weight = `IQ4_NL_VALUES[nibble]`: `vpshufb` on the table in both halves).
struct Signed<const NL: bool>;
impl<const NL: bool> Fmt for Signed<NL> {
    const BYTES: usize = if NL { 18 } else { 34 };
    const MIN: bool = false;
    const OFFSET: i32 = 0;
    const SIGNED: bool = true;
    #[inline(always)]
    unsafe fn codes(b: &[u8]) -> __m256i {
        // SAFETY: bytes 2..BYTES are in the block, the table holds 16 bytes (unaligned loads);
        // AVX2 is available (the caller's promise).
        unsafe {
            if NL {
                let t = _mm_loadu_si128(IQ4_NL_VALUES.as_ptr().cast());
                _mm256_shuffle_epi8(_mm256_set_m128i(t, t), nibbles(&b[2..18]))
            } else {
                _mm256_loadu_si256(b[2..34].as_ptr().cast())
            }
        }
    }
}
type Q8_0 = Signed<false>;
type Iq4Nl = Signed<true>;

#[target_feature(enable = "avx2")]
#[inline]
fn hsum(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// The exact integer sum of one block: weights `w` (codes, or Q8_0's signed bytes) · `a`.
#[target_feature(enable = "avx2")]
#[inline]
fn sumi<F: Fmt>(w: __m256i, a: &[i8; 32]) -> i32 {
    // SAFETY: `a` holds 32 bytes; unaligned load.
    let a = unsafe { _mm256_loadu_si256(a.as_ptr().cast()) };
    hsum(partial::<F>(w, a, act_sums::<F>(a)))
}

/// The partial sums of the activations `a` in eight i32 lanes, for the formats with an offset
/// (unused otherwise).
#[target_feature(enable = "avx2")]
#[inline]
fn act_sums<F: Fmt>(a: __m256i) -> __m256i {
    if F::OFFSET == 0 {
        return a;
    }
    _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(1), a),
        _mm256_set1_epi16(1),
    )
}

/// The block's term from its scale `d` and min `m`: the scalar twins' expressions, operation for
/// operation.
#[inline(always)]
fn term<F: Fmt, A: Act>((d, m): (f32, f32), y: &A, sumi: i32) -> f32 {
    if F::MIN {
        (d * y.d()) * sumi as f32 + m * y.s()
    } else {
        sumi as f32 * (d * y.d())
    }
}

/// One row: `w` (whole blocks) · `a`, over as many blocks as both hold.
#[target_feature(enable = "avx2,f16c")]
fn dot1<F: Fmt, A: Act>(w: &[u8], a: &[A]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(F::BYTES).zip(a) {
        // SAFETY: `b` is one whole block; AVX2 is enabled for this function.
        let s = sumi::<F>(unsafe { F::codes(b) }, y.qs());
        sumf += term::<F, A>(scales(b), y, s);
    }
    sumf
}

/// The eight i32 partial sums of one block, weights `w` (codes, or Q8_0's signed bytes) · `a`;
/// `sa`: the partial sums of `a` (for the formats with an offset).
#[target_feature(enable = "avx2")]
#[inline]
fn partial<F: Fmt>(w: __m256i, a: __m256i, sa: __m256i) -> __m256i {
    if F::SIGNED {
        let lo = _mm256_madd_epi16(
            _mm256_cvtepi8_epi16(_mm256_castsi256_si128(w)),
            _mm256_cvtepi8_epi16(_mm256_castsi256_si128(a)),
        );
        let hi = _mm256_madd_epi16(
            _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(w)),
            _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(a)),
        );
        return _mm256_add_epi32(lo, hi);
    }
    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
    if F::OFFSET == 0 {
        return p;
    }
    _mm256_sub_epi32(p, _mm256_mullo_epi32(sa, _mm256_set1_epi32(F::OFFSET)))
}

/// `[Σ s0, Σ s1, Σ s2, Σ s3]`, each over its eight lanes.
#[target_feature(enable = "avx2")]
#[inline]
fn sums4(s: [__m256i; 4]) -> __m128i {
    let h = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
}

/// Four rows of `rb` bytes, consecutive in `w` (`4 · rb ≤ w.len()`), · `C` columns: lane `r`
/// of result `t` is [`dot1`] of row `r` and column `t`, bit for bit (each lane does the scalar
/// float expression's operations in order). Each block of the four rows is decoded once for the
/// `C` columns.
#[target_feature(enable = "avx2,f16c")]
#[inline]
fn tile4<F: Fmt, A: Act, const C: usize>(w: &[u8], rb: usize, ys: [&[A]; C]) -> [__m128; C] {
    let nb = ys
        .iter()
        .map(|y| y.len())
        .min()
        .unwrap_or(0)
        .min(rb / F::BYTES);
    let mut acc = [_mm_setzero_ps(); C];
    // [d0, m0, .., d3, m3] → [d0..d3 | m0..m3]
    let split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    if rb.checked_mul(4).is_none_or(|n| n > w.len()) {
        return acc;
    }
    let base = w.as_ptr();
    for i in 0..nb {
        let at = i * F::BYTES;
        // SAFETY: block i of row r is bytes r·rb + i·BYTES .. r·rb + (i + 1)·BYTES, inside row r
        // (i < nb ≤ rb / BYTES) and so inside `w` (4 · rb ≤ w.len(), checked above).
        let b: [&[u8]; 4] = unsafe {
            [
                core::slice::from_raw_parts(base.add(at), F::BYTES),
                core::slice::from_raw_parts(base.add(rb + at), F::BYTES),
                core::slice::from_raw_parts(base.add(2 * rb + at), F::BYTES),
                core::slice::from_raw_parts(base.add(3 * rb + at), F::BYTES),
            ]
        };
        // SAFETY: each `b[r]` is one whole block; AVX2 is enabled for this function.
        let codes = b.map(|b| unsafe { F::codes(b) });
        let head = |r: usize| i32::from_le_bytes([b[r][0], b[r][1], b[r][2], b[r][3]]);
        let dm = _mm_setr_epi32(head(0), head(1), head(2), head(3));
        let dm = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(dm), split);
        let (d, m) = (_mm256_castps256_ps128(dm), _mm256_extractf128_ps::<1>(dm));
        for (acc, y) in acc.iter_mut().zip(&ys) {
            let y = &y[i];
            // SAFETY: `qs` holds 32 bytes; unaligned load.
            let a = unsafe { _mm256_loadu_si256(y.qs().as_ptr().cast()) };
            let sa = act_sums::<F>(a);
            let s = _mm_cvtepi32_ps(sums4(codes.map(|c| partial::<F>(c, a, sa))));
            let t = if F::MIN {
                // (d · y.d) · sumi + m · y.s
                let dy = _mm_mul_ps(d, _mm_set1_ps(y.d()));
                _mm_add_ps(_mm_mul_ps(dy, s), _mm_mul_ps(m, _mm_set1_ps(y.s())))
            } else {
                // sumi · (d · y.d)
                _mm_mul_ps(s, _mm_mul_ps(d, _mm_set1_ps(y.d())))
            };
            *acc = _mm_add_ps(*acc, t);
        }
    }
    acc
}

/// Columns per tile of the batched kernel: accumulators for them beside the decoded weights
/// fit the register file.
const TILE: usize = 4;

/// The four lanes of `v`.
#[inline(always)]
fn lanes(v: __m128) -> [f32; 4] {
    // SAFETY: `__m128` and `[f32; 4]` have the same size, and every bit pattern is an f32.
    unsafe { core::mem::transmute::<__m128, [f32; 4]>(v) }
}

/// Four rows of `rb` bytes, consecutive in `w`, · `a` (the `Kernels::dot_rows` four-row entry).
#[target_feature(enable = "avx2,f16c")]
fn dot4<F: Fmt, A: Act>(w: &[u8], rb: usize, a: &[A], out: &mut [f32; 4]) {
    if rb.checked_mul(4).is_none_or(|n| w.len() < n) {
        // Not four whole rows: each row as far as it goes (never reached through `dot_rows`).
        for (r, o) in out.iter_mut().enumerate() {
            let row = w.get(r * rb..).unwrap_or(&[]);
            *o = dot1::<F, A>(&row[..rb.min(row.len())], a);
        }
        return;
    }
    let [v] = tile4::<F, A, 1>(w, rb, [a]);
    *out = lanes(v);
}

/// Rows of `rb` bytes · `cols` columns of `a` into `out` (`[rows][cols]`), four rows at a time
/// ([`tile4`]) through the shared loop ([`crate::quant::batch::by_tiles`]).
#[target_feature(enable = "avx2,f16c")]
fn mat<F: Fmt, A: Act>(w: &[u8], rb: usize, a: &[A], cols: usize, out: &mut [f32]) {
    crate::quant::batch::by_tiles(
        w,
        rb,
        a,
        cols,
        out,
        // The closures inherit this function's target features; `by_tiles` hands four whole rows.
        |w4, ys| tile4::<F, A, { TILE }>(w4, rb, ys).map(lanes),
        |w4, y| {
            let [v] = tile4::<F, A, 1>(w4, rb, [y]);
            lanes(v)
        },
        |row, y| dot1::<F, A>(row, y),
    )
}

macro_rules! entries {
    ($(#[$doc:meta])* $one:ident, $four:ident, $mat:ident, $fmt:ty, $act:ty) => {
        $(#[$doc])*
        pub fn $one(w: &[u8], a: &[$act]) -> f32 {
            // SAFETY: the AVX2 set is only handed out when `available()` says the CPU runs it.
            unsafe { dot1::<$fmt, $act>(w, a) }
        }
        $(#[$doc])*
        /// Four rows of `rb` bytes, consecutive in `w`, at once.
        pub fn $four(w: &[u8], rb: usize, a: &[$act], out: &mut [f32; 4]) {
            // SAFETY: as above.
            unsafe { dot4::<$fmt, $act>(w, rb, a, out) }
        }
        $(#[$doc])*
        /// Batched: rows · `cols` columns into `out` as `[rows][cols]`.
        pub fn $mat(w: &[u8], rb: usize, a: &[$act], cols: usize, out: &mut [f32]) {
            // SAFETY: as above.
            unsafe { mat::<$fmt, $act>(w, rb, a, cols, out) }
        }
    };
}

entries!(
    /// Q4_0 weights · Q8_0 activations (twin of `scalar::vec_dot_q4_0_q8_0`).
    vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_x4, mat_q4_0_q8_0, Q4_0, BlockQ8_0
);
entries!(
    /// Q4_1 weights · Q8_1 activations (twin of `scalar::vec_dot_q4_1_q8_1`).
    vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_x4, mat_q4_1_q8_1, Q4_1, BlockQ8_1
);
entries!(
    /// Q5_0 weights · Q8_0 activations (twin of `scalar::vec_dot_q5_0_q8_0`).
    vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_x4, mat_q5_0_q8_0, Q5_0, BlockQ8_0
);
entries!(
    /// Q5_1 weights · Q8_1 activations (twin of `scalar::vec_dot_q5_1_q8_1`).
    vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_x4, mat_q5_1_q8_1, Q5_1, BlockQ8_1
);
entries!(
    /// Q8_0 weights · Q8_0 activations (twin of `scalar::vec_dot_q8_0_q8_0`).
    vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_x4, mat_q8_0_q8_0, Q8_0, BlockQ8_0
);
entries!(
    /// IQ4_NL weights · Q8_0 activations (twin of `scalar::vec_dot_iq4_nl_q8_0`).
    vec_dot_iq4_nl_q8_0, vec_dot_iq4_nl_q8_0_x4, mat_iq4_nl_q8_0, Iq4Nl, BlockQ8_0
);

// ---------------------------------------------------------------------------------------------
// The attention over the f16 KV cache (twins of `ops::dot_f32_f16` and `ops::attend_head`).

/// Eight f16 values (bits) at `k` as f32, exactly (F16C).
#[target_feature(enable = "avx2,f16c")]
#[inline]
fn h8(k: &[u16]) -> __m256 {
    // SAFETY: `k[..8]` is 16 readable bytes (indexing checks it); unaligned load.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(k[..8].as_ptr().cast()) })
}

#[target_feature(enable = "avx2,f16c")]
fn dot_f16(q: &[f32], k: &[u16]) -> f32 {
    let n = q.len().min(k.len());
    let whole = n / 8 * 8;
    // Lane i is the scalar code's acc[i % 8]: one multiply, one add per element, in order.
    let mut acc = _mm256_setzero_ps();
    for i in (0..whole).step_by(8) {
        // SAFETY: `q[i..i + 8]` is in bounds (i + 8 ≤ whole ≤ q.len()); unaligned load.
        let a = unsafe { _mm256_loadu_ps(q[i..i + 8].as_ptr()) };
        acc = _mm256_add_ps(acc, _mm256_mul_ps(a, h8(&k[i..])));
    }
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds eight f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
    for i in whole..n {
        lanes[i & 7] += q[i] * half::f16::from_bits(k[i]).to_f32();
    }
    // ((acc0 + acc4) + (acc1 + acc5)) + ((acc2 + acc6) + (acc3 + acc7))
    let c: [f32; 4] = core::array::from_fn(|j| lanes[j] + lanes[j + 4]);
    (c[0] + c[1]) + (c[2] + c[3])
}

/// `out = out · r + v` (`RESCALE`) or `out = out + w · v`, element by element as the scalar loop
/// does (one multiply, one add).
#[target_feature(enable = "avx2,f16c")]
fn update<const RESCALE: bool>(out: &mut [f32], x: f32, v: &[u16]) {
    let n = out.len().min(v.len());
    let whole = n / 8 * 8;
    let xv = _mm256_set1_ps(x);
    for i in (0..whole).step_by(8) {
        let o = &mut out[i..i + 8];
        // SAFETY: `o` holds eight f32; unaligned load and store.
        unsafe {
            let cur = _mm256_loadu_ps(o.as_ptr());
            let new = if RESCALE {
                _mm256_add_ps(_mm256_mul_ps(cur, xv), h8(&v[i..]))
            } else {
                _mm256_add_ps(cur, _mm256_mul_ps(xv, h8(&v[i..])))
            };
            _mm256_storeu_ps(o.as_mut_ptr(), new);
        }
    }
    for i in whole..n {
        let b = half::f16::from_bits(v[i]).to_f32();
        out[i] = if RESCALE {
            out[i] * x + b
        } else {
            out[i] + x * b
        };
    }
}

/// `q · k` with `k` as f16 bits (twin of `ops::dot_f32_f16`).
pub fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
    // SAFETY: the AVX2 set is only handed out where AVX2 and F16C are available.
    unsafe { dot_f16(q, k) }
}

/// One query head over the cached positions of `head` (twin of `ops::attend_head`): its control
/// flow (`ops::Head::attend`), with the `q · k` product and the two update steps in AVX2.
pub fn attend_head(out: &mut [f32], q: &[f32], head: &crate::ops::Head<'_>) {
    let rescale = |o: &mut [f32], r: f32, v: &[u16]| {
        // SAFETY: the AVX2 set is only handed out where AVX2 and F16C are available.
        unsafe { update::<true>(o, r, v) }
    };
    let accumulate = |o: &mut [f32], w: f32, v: &[u16]| {
        // SAFETY: as above.
        unsafe { update::<false>(o, w, v) }
    };
    head.attend(out, q, dot_f32_f16, rescale, accumulate);
}

/// f32 to f16 bits, round to nearest even (twin of `ops::to_f16`): F16C, eight at a time.
pub fn to_f16(out: &mut [u16], x: &[f32]) {
    // SAFETY: the AVX2 set is only handed out where AVX2 and F16C are available.
    unsafe { cvt_f16(out, x) }
}

#[target_feature(enable = "avx2,f16c")]
fn cvt_f16(out: &mut [u16], x: &[f32]) {
    let n = out.len().min(x.len());
    let (mut o8, mut x8) = (out[..n].chunks_exact_mut(8), x[..n].chunks_exact(8));
    for (o, v) in (&mut o8).zip(&mut x8) {
        // SAFETY: `v` and `o` hold eight f32 and eight u16 (unaligned loads and stores).
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(v.as_ptr()));
            _mm_storeu_si128(o.as_mut_ptr().cast(), h);
        }
    }
    crate::ops::to_f16(o8.into_remainder(), x8.remainder());
}
