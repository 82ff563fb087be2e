//! Scalar reference kernels: dequantization of every weight type and its dot product with quantized
//! activations, integer inner loops as in ggml-cpu's generic `quants.c`.
//!
//! Each type's functions are named in its row of `types::TYPES`; nothing here dispatches on the type.
//! The dequantization and the batched kernels decode blocks with `batch.rs`'s decoders, so a type
//! is decoded in one place for both.
//!
//! Weight rows are raw little-endian bytes exactly as stored in the GGUF file (no alignment assumed).
//! Every SIMD kernel has a twin here with the same signature and is tested against it.
//! Lengths: a row of `n` elements is `n / block_elems * block_bytes` bytes and its activations hold
//! `n` values; callers check this (see `quant::check_dot_args`). Mismatched lengths never read out of
//! bounds: the loops stop at the shorter side.
#![forbid(unsafe_code)]

use super::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use super::batch::{self, mat, nibbles32, Dec32, KQuant, Nibbles, Pair, With, K, Q32};
pub use super::batch::{q3k_scales, scale_min_k4};

/// The 4- and 5-bit formats (`batch::Nibbles`: bytes, min, fifth bits, offset).
pub(super) type Q4_0 = Nibbles<18, false, false, 8>;
pub(super) type Q4_1 = Nibbles<20, true, false, 0>;
pub(super) type Q5_0 = Nibbles<22, false, true, 16>;
pub(super) type Q5_1 = Nibbles<24, true, true, 0>;

/// IQ4_NL's sixteen weights, indexed by a nibble (llama.cpp's `kvalues_iq4nl`: a non-linear
/// grid, denser near zero).
pub const IQ4_NL_VALUES: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// IQ4_NL: `d` (f16), 16 bytes of nibbles (low: elements 0..16, high: 16..32); weight =
/// `IQ4_NL_VALUES[nibble]`, value `d · weight`.
pub(super) struct Iq4Nl;
impl Q32 for Iq4Nl {
    const BYTES: usize = 18;
    const MIN: bool = false;
    #[inline(always)]
    fn decode(b: &[u8]) -> Dec32 {
        Dec32 {
            d: f16_at(b, 0),
            m: 0.0,
            q: nibbles32(&b[2..18], None, 0).map(|n| IQ4_NL_VALUES[n as usize & 15]),
        }
    }
}

/// One row of a block format through its decoder: the batched kernel's terms for one column,
/// added in block order (the one-row kernel of a type that has no hand-written one).
fn dot<F: Pair>(w: &[u8], a: &[F::Act]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(F::BYTES).zip(a) {
        sumf += F::term(&F::decode(b), y);
    }
    sumf
}
use super::block::{QK32, QK_K};
use half::{bf16, f16};

#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

// ---------------------------------------------------------------------------------------------
// Dequantization: one block of bytes to floats.

/// Whole blocks of a 32-wide format, decoded as the batched kernels decode them: each value
/// `q · d`, or `q · d + m` for the formats with a min.
pub(super) fn dequantize_32<F: Q32>(w: &[u8], out: &mut [f32]) {
    for (b, y) in w.chunks_exact(F::BYTES).zip(out.chunks_exact_mut(QK32)) {
        let x = F::decode(b);
        for (o, &q) in y.iter_mut().zip(&x.q) {
            *o = if F::MIN {
                q as f32 * x.d + x.m
            } else {
                q as f32 * x.d
            };
        }
    }
}

/// Whole K-quant super-blocks, decoded as the batched kernels decode them: element `e` of
/// 16-element group `g` is `(d · scale_g) · q_e`, minus `dmin · min_g` for the types with mins.
pub(super) fn dequantize_k<F: KQuant>(w: &[u8], out: &mut [f32]) {
    for (b, y) in w.chunks_exact(F::BYTES).zip(out.chunks_exact_mut(QK_K)) {
        let x = F::decode(b);
        for (g, y) in y.chunks_exact_mut(16).enumerate() {
            let dl = x.d * x.sc[g] as f32;
            let ml = x.dmin * x.mn[g] as f32;
            for (o, &q) in y.iter_mut().zip(&x.q[g * 16..g * 16 + 16]) {
                *o = if F::MIN {
                    dl * q as f32 - ml
                } else {
                    dl * q as f32
                };
            }
        }
    }
}

/// F32 values.
pub fn dequantize_f32(w: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(w.chunks_exact(4)) {
        *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

/// F16 values.
pub fn dequantize_f16(w: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(w.chunks_exact(2)) {
        *o = f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
    }
}

/// BF16 values.
pub fn dequantize_bf16(w: &[u8], out: &mut [f32]) {
    for (o, b) in out.iter_mut().zip(w.chunks_exact(2)) {
        *o = bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
    }
}

// ---------------------------------------------------------------------------------------------
// Dot products against f32 activations (for checking: dequantize, multiply, sum in f64).

// ---------------------------------------------------------------------------------------------
// Float-activation dot products for float weights (ggml's vec_dot_f32 / _f16 / _bf16).

/// F32 weights · f32 activations.
pub fn vec_dot_f32_f32(w: &[u8], x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 4];
    for (i, (b, v)) in w.chunks_exact(4).zip(x).enumerate() {
        acc[i & 3] += f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * v;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// F16 weights · f16 activations.
pub fn vec_dot_f16_f16(w: &[u8], x: &[u16]) -> f32 {
    let mut acc = [0.0f32; 4];
    for (i, (b, v)) in w.chunks_exact(2).zip(x).enumerate() {
        let a = f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        acc[i & 3] += a * f16::from_bits(*v).to_f32();
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// BF16 weights · bf16 activations.
pub fn vec_dot_bf16_bf16(w: &[u8], x: &[u16]) -> f32 {
    let mut acc = [0.0f32; 4];
    for (i, (b, v)) in w.chunks_exact(2).zip(x).enumerate() {
        let a = bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        acc[i & 3] += a * bf16::from_bits(*v).to_f32();
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

// ---------------------------------------------------------------------------------------------
// 32-wide formats · Q8_0 / Q8_1.

/// Q4_0 weights · Q8_0 activations.
pub fn vec_dot_q4_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(18).zip(a) {
        let d = f16_at(b, 0);
        let qs = &b[2..18];
        let mut sumi = 0i32;
        for j in 0..16 {
            let v0 = (qs[j] & 0x0f) as i32 - 8;
            let v1 = (qs[j] >> 4) as i32 - 8;
            sumi += v0 * y.qs[j] as i32 + v1 * y.qs[j + 16] as i32;
        }
        sumf += sumi as f32 * (d * y.d);
    }
    sumf
}

/// Q4_1 weights · Q8_1 activations.
pub fn vec_dot_q4_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(20).zip(a) {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        let qs = &b[4..20];
        let mut sumi = 0i32;
        for j in 0..16 {
            sumi +=
                (qs[j] & 0x0f) as i32 * y.qs[j] as i32 + (qs[j] >> 4) as i32 * y.qs[j + 16] as i32;
        }
        sumf += (d * y.d) * sumi as f32 + m * y.s;
    }
    sumf
}

/// Q5_0 weights · Q8_0 activations.
pub fn vec_dot_q5_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(22).zip(a) {
        let d = f16_at(b, 0);
        let qh = u32_at(b, 2);
        let qs = &b[6..22];
        let mut sumi = 0i32;
        for j in 0..16 {
            let h0 = (((qh >> j) << 4) & 0x10) as u8;
            let h1 = ((qh >> (j + 12)) & 0x10) as u8;
            let x0 = ((qs[j] & 0x0f) | h0) as i32 - 16;
            let x1 = ((qs[j] >> 4) | h1) as i32 - 16;
            sumi += x0 * y.qs[j] as i32 + x1 * y.qs[j + 16] as i32;
        }
        sumf += (d * y.d) * sumi as f32;
    }
    sumf
}

/// Q5_1 weights · Q8_1 activations.
pub fn vec_dot_q5_1_q8_1(w: &[u8], a: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(24).zip(a) {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        let qh = u32_at(b, 4);
        let qs = &b[8..24];
        let mut sumi = 0i32;
        for j in 0..16 {
            let h0 = (((qh >> j) << 4) & 0x10) as u8;
            let h1 = ((qh >> (j + 12)) & 0x10) as u8;
            let x0 = ((qs[j] & 0x0f) | h0) as i32;
            let x1 = ((qs[j] >> 4) | h1) as i32;
            sumi += x0 * y.qs[j] as i32 + x1 * y.qs[j + 16] as i32;
        }
        sumf += (d * y.d) * sumi as f32 + m * y.s;
    }
    sumf
}

/// Q8_0 weights · Q8_0 activations.
pub fn vec_dot_q8_0_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(34).zip(a) {
        let d = f16_at(b, 0);
        let mut sumi = 0i32;
        for j in 0..QK32 {
            sumi += (b[2 + j] as i8) as i32 * y.qs[j] as i32;
        }
        sumf += sumi as f32 * (d * y.d);
    }
    sumf
}

/// IQ4_NL weights · Q8_0 activations: per block the exact `sumi` of the weights
/// (`IQ4_NL_VALUES[nibble]`) and the activations, then `sumf += sumi as f32 * (d * y.d)` (llama.cpp
/// multiplies `y.d · d` first: the same bits).
pub fn vec_dot_iq4_nl_q8_0(w: &[u8], a: &[BlockQ8_0]) -> f32 {
    dot::<With<Iq4Nl, _>>(w, a)
}

// ---------------------------------------------------------------------------------------------
// K-quants · Q8_K.

/// Q2_K weights · Q8_K activations.
pub fn vec_dot_q2_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(84).zip(a) {
        let sc = &b[0..16];
        let qs = &b[16..80];
        let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
        // The mins, against the 16-element sums of the activations.
        let mut summs = 0i32;
        for j in 0..16 {
            summs += y.bsums[j] as i32 * (sc[j] >> 4) as i32;
        }
        let mut isum = 0i32;
        let mut is = 0;
        let mut q8 = 0;
        for half in 0..2 {
            let q2 = &qs[half * 32..half * 32 + 32];
            for shift in [0u32, 2, 4, 6] {
                for part in 0..2 {
                    let dl = (sc[is] & 0x0f) as i32;
                    is += 1;
                    let mut isuml = 0i32;
                    for l in part * 16..part * 16 + 16 {
                        isuml += y.qs[q8 + l] as i32 * ((q2[l] >> shift) & 3) as i32;
                    }
                    isum += dl * isuml;
                }
                q8 += 32;
            }
        }
        sumf += (y.d * d) * isum as f32 - (y.d * dmin) * summs as f32;
    }
    sumf
}

/// Q3_K weights · Q8_K activations.
pub fn vec_dot_q3_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(110).zip(a) {
        let hm = &b[0..32];
        let qs = &b[32..96];
        let scales = q3k_scales(&b[96..108]);
        let d = f16_at(b, 108) * y.d;
        let mut isum = 0i32;
        let mut is = 0;
        let mut q8 = 0;
        let mut m = 1u8;
        for half in 0..2 {
            let q3 = &qs[half * 32..half * 32 + 32];
            for shift in [0u32, 2, 4, 6] {
                for part in 0..2 {
                    let mut isuml = 0i32;
                    for l in part * 16..part * 16 + 16 {
                        let v = ((q3[l] >> shift) & 3) as i32 - if hm[l] & m != 0 { 0 } else { 4 };
                        isuml += y.qs[q8 + l] as i32 * v;
                    }
                    isum += scales[is] as i32 * isuml;
                    is += 1;
                }
                q8 += 32;
                m <<= 1;
            }
        }
        sumf += d * isum as f32;
    }
    sumf
}

/// Q4_K weights · Q8_K activations.
pub fn vec_dot_q4_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(144).zip(a) {
        let qs = &b[16..144];
        let mut sums = [0i32; 8];
        for j in 0..4 {
            let q = &qs[j * 32..j * 32 + 32];
            let q8 = &y.qs[j * 64..j * 64 + 64];
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                lo += (q[l] & 0x0f) as i32 * q8[l] as i32;
                hi += (q[l] >> 4) as i32 * q8[32 + l] as i32;
            }
            sums[2 * j] = lo;
            sums[2 * j + 1] = hi;
        }
        sumf += q4_k_term(b, y, &sums);
    }
    sumf
}

/// One Q4_K super-block `b` · `y` from the integer sums of its sub-blocks, `sums` = `[lo_0, hi_0,
/// .., lo_3, hi_3]` (`lo_j`: low nibbles of bytes `32j..32j + 32` · `y.qs[64j..64j + 32]`,
/// `hi_j`: their high nibbles · `y.qs[64j + 32..64j + 64]`): the 6-bit scales and mins, the
/// `bsums` term and the float expression (shared with the SIMD twins that form `sums`, and with
/// Q5_K, whose header is the same, its `sums` counting the fifth bits).
#[inline(always)]
pub fn q4_k_term(b: &[u8], y: &BlockQ8K, sums: &[i32; 8]) -> f32 {
    let (d, dmin) = (f16_at(b, 0) * y.d, f16_at(b, 2) * y.d);
    let sc = &b[4..16];
    let mut isum = 0i32;
    let mut summs = 0i32;
    for j in 0..4 {
        let (s1, m1) = scale_min_k4(2 * j, sc);
        let (s2, m2) = scale_min_k4(2 * j + 1, sc);
        summs += m1 as i32 * (y.bsums[4 * j] as i32 + y.bsums[4 * j + 1] as i32);
        summs += m2 as i32 * (y.bsums[4 * j + 2] as i32 + y.bsums[4 * j + 3] as i32);
        isum += s1 as i32 * sums[2 * j] + s2 as i32 * sums[2 * j + 1];
    }
    d * isum as f32 - dmin * summs as f32
}

/// Q5_K weights · Q8_K activations.
pub fn vec_dot_q5_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(176).zip(a) {
        let qh = &b[16..48];
        let qs = &b[48..176];
        let mut sums = [0i32; 8];
        for j in 0..4 {
            let (u1, u2) = (1u8 << (2 * j), 2u8 << (2 * j));
            let q = &qs[j * 32..j * 32 + 32];
            let q8 = &y.qs[j * 64..j * 64 + 64];
            let (mut lo, mut hi) = (0i32, 0i32);
            for l in 0..32 {
                let x0 = ((q[l] & 0x0f) + if qh[l] & u1 != 0 { 16 } else { 0 }) as i32;
                let x1 = ((q[l] >> 4) + if qh[l] & u2 != 0 { 16 } else { 0 }) as i32;
                lo += x0 * q8[l] as i32;
                hi += x1 * q8[32 + l] as i32;
            }
            sums[2 * j] = lo;
            sums[2 * j + 1] = hi;
        }
        // The same header (d, dmin, 6-bit scales and mins) as Q4_K.
        sumf += q4_k_term(b, y, &sums);
    }
    sumf
}

/// Q6_K weights · Q8_K activations.
pub fn vec_dot_q6_k_q8_k(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (b, y) in w.chunks_exact(210).zip(a) {
        let ql = &b[0..128];
        let qh = &b[128..192];
        let sc = &b[192..208];
        let d = f16_at(b, 208) * y.d;
        let mut isum = 0i32;
        for n in 0..2 {
            let ql = &ql[n * 64..n * 64 + 64];
            let qh = &qh[n * 32..n * 32 + 32];
            let sc = &sc[n * 8..n * 8 + 8];
            let q8 = &y.qs[n * 128..n * 128 + 128];
            // Four groups of 32 values, each with two 16-value scales.
            let mut s = [0i32; 8];
            for l in 0..32 {
                let is = l / 16;
                let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i32 - 32;
                let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                s[is] += q1 * q8[l] as i32;
                s[is + 2] += q2 * q8[l + 32] as i32;
                s[is + 4] += q3 * q8[l + 64] as i32;
                s[is + 6] += q4 * q8[l + 96] as i32;
            }
            for k in 0..8 {
                isum += (sc[k] as i8) as i32 * s[k];
            }
        }
        sumf += d * isum as f32;
    }
    sumf
}

// ---------------------------------------------------------------------------------------------
// Batched (`batch.rs`: each weight block decoded once for every column; output `(r, c)` is the
// one-row kernel's for row `r` and column `c`, bit for bit).

/// Q4_0 weights · Q8_0 activations, batched (twin of [`vec_dot_q4_0_q8_0`] per column).
pub fn mat_q4_0_q8_0(w: &[u8], rb: usize, a: &[BlockQ8_0], cols: usize, out: &mut [f32]) {
    mat::<With<Q4_0, _>>(w, rb, a, cols, out)
}
/// Q4_1 weights · Q8_1 activations, batched.
pub fn mat_q4_1_q8_1(w: &[u8], rb: usize, a: &[BlockQ8_1], cols: usize, out: &mut [f32]) {
    mat::<With<Q4_1, _>>(w, rb, a, cols, out)
}
/// Q5_0 weights · Q8_0 activations, batched.
pub fn mat_q5_0_q8_0(w: &[u8], rb: usize, a: &[BlockQ8_0], cols: usize, out: &mut [f32]) {
    mat::<With<Q5_0, _>>(w, rb, a, cols, out)
}
/// Q5_1 weights · Q8_1 activations, batched.
pub fn mat_q5_1_q8_1(w: &[u8], rb: usize, a: &[BlockQ8_1], cols: usize, out: &mut [f32]) {
    mat::<With<Q5_1, _>>(w, rb, a, cols, out)
}
/// Q8_0 weights · Q8_0 activations, batched.
pub fn mat_q8_0_q8_0(w: &[u8], rb: usize, a: &[BlockQ8_0], cols: usize, out: &mut [f32]) {
    mat::<With<batch::Q8_0, _>>(w, rb, a, cols, out)
}
/// IQ4_NL weights · Q8_0 activations, batched.
pub fn mat_iq4_nl_q8_0(w: &[u8], rb: usize, a: &[BlockQ8_0], cols: usize, out: &mut [f32]) {
    mat::<With<Iq4Nl, _>>(w, rb, a, cols, out)
}
/// Q2_K weights · Q8_K activations, batched.
pub fn mat_q2_k_q8_k(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
    mat::<K<batch::Q2K>>(w, rb, a, cols, out)
}
/// Q3_K weights · Q8_K activations, batched.
pub fn mat_q3_k_q8_k(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
    mat::<K<batch::Q3K>>(w, rb, a, cols, out)
}
/// Q4_K weights · Q8_K activations, batched.
pub fn mat_q4_k_q8_k(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
    mat::<K<batch::Q4K>>(w, rb, a, cols, out)
}
/// Q5_K weights · Q8_K activations, batched.
pub fn mat_q5_k_q8_k(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
    mat::<K<batch::Q5K>>(w, rb, a, cols, out)
}
/// Q6_K weights · Q8_K activations, batched.
pub fn mat_q6_k_q8_k(w: &[u8], rb: usize, a: &[BlockQ8K], cols: usize, out: &mut [f32]) {
    mat::<K<batch::Q6K>>(w, rb, a, cols, out)
}

// ---------------------------------------------------------------------------------------------
// The families of kernel names every set gives its twins of the kernels above, to write a set's
// table (`Kernels::with`) as a list of its modules.

/// `$base` (a [`Kernels`]) with the entries of the 32-wide types from the module `$m` (one row
/// and four rows, named as every set names them: `vec_dot_q4_0_q8_0`, `vec_dot_q4_0_q8_0_x4`,
/// ...), batched from the module `$mat` (`mat_q4_0_q8_0`, ...) if one is named (else a batch goes
/// column by column through the one-row kernels).
// (Unused only where no set has the whole family, as on 32-bit Arm.)
#[allow(unused_macros)]
macro_rules! with_q32 {
    ($base:expr, $($m:ident)::+ $(, $($mat:ident)::+)?) => {{
        use $crate::quant::{GgmlType as G, RowKernels as R, TypeKernels as T};
        $base
            .with(G::Q4_0, T::Q8_0(R::dot($($m)::+::vec_dot_q4_0_q8_0)
                .x4($($m)::+::vec_dot_q4_0_q8_0_x4)$(.mat($($mat)::+::mat_q4_0_q8_0))?))
            .with(G::Q4_1, T::Q8_1(R::dot($($m)::+::vec_dot_q4_1_q8_1)
                .x4($($m)::+::vec_dot_q4_1_q8_1_x4)$(.mat($($mat)::+::mat_q4_1_q8_1))?))
            .with(G::Q5_0, T::Q8_0(R::dot($($m)::+::vec_dot_q5_0_q8_0)
                .x4($($m)::+::vec_dot_q5_0_q8_0_x4)$(.mat($($mat)::+::mat_q5_0_q8_0))?))
            .with(G::Q5_1, T::Q8_1(R::dot($($m)::+::vec_dot_q5_1_q8_1)
                .x4($($m)::+::vec_dot_q5_1_q8_1_x4)$(.mat($($mat)::+::mat_q5_1_q8_1))?))
            .with(G::Q8_0, T::Q8_0(R::dot($($m)::+::vec_dot_q8_0_q8_0)
                .x4($($m)::+::vec_dot_q8_0_q8_0_x4)$(.mat($($mat)::+::mat_q8_0_q8_0))?))
    }};
}
#[allow(unused_imports)]
pub(crate) use with_q32;
