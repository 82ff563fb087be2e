//! Scalar reference kernels: dequantization of every weight type and its dot product with quantized
//! activations, integer inner loops as in ggml-cpu's generic `quants.c`.
//!
//! Weight rows are raw little-endian bytes exactly as stored in the GGUF file (no alignment assumed).
//! Every SIMD kernel has a twin here with the same signature and is tested against it.
//! Lengths: a row of `n` elements is `n / block_elems * block_bytes` bytes and its activations hold
//! `n` values; callers check this (see `quant::check_dot_args`). Mismatched lengths never read out of
//! bounds: the loops stop at the shorter side.
#![forbid(unsafe_code)]

use super::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use super::types::{GgmlType, QK32, QK_K};
use half::{bf16, f16};

#[inline(always)]
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The 6-bit scale and min of sub-block `j` (0..8) of a Q4_K / Q5_K block (ggml's `get_scale_min_k4`).
#[inline(always)]
pub fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// The sixteen 6-bit scales of a Q3_K block, minus 32 (signed, -32..31).
#[inline(always)]
pub fn q3k_scales(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for j in 0..16 {
        let low = if j < 8 { s[j] & 0x0f } else { s[j - 8] >> 4 };
        let high = (s[8 + (j % 4)] >> (2 * (j / 4))) & 3;
        out[j] = ((low | (high << 4)) as i8) - 32;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Dequantization: one block of bytes to floats.

/// Dequantize a row of `ty` (`w` holds whole blocks) into `out` (as many values as `w` holds).
pub fn dequantize_row(ty: GgmlType, w: &[u8], out: &mut [f32]) {
    let bb = ty.block_bytes();
    let be = ty.block_elems();
    match ty {
        GgmlType::F32 => {
            for (o, b) in out.iter_mut().zip(w.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, b) in out.iter_mut().zip(w.chunks_exact(2)) {
                *o = f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
            }
        }
        GgmlType::Bf16 => {
            for (o, b) in out.iter_mut().zip(w.chunks_exact(2)) {
                *o = bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
            }
        }
        _ => {
            for (b, o) in w.chunks_exact(bb).zip(out.chunks_exact_mut(be)) {
                dequantize_block(ty, b, o);
            }
        }
    }
}

/// Dequantize one block of a block-quantized type.
pub fn dequantize_block(ty: GgmlType, b: &[u8], y: &mut [f32]) {
    match ty {
        GgmlType::Q4_0 => {
            let d = f16_at(b, 0);
            let qs = &b[2..18];
            for j in 0..16 {
                y[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
                y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
            }
        }
        GgmlType::Q4_1 => {
            let (d, m) = (f16_at(b, 0), f16_at(b, 2));
            let qs = &b[4..20];
            for j in 0..16 {
                y[j] = (qs[j] & 0x0f) as f32 * d + m;
                y[j + 16] = (qs[j] >> 4) as f32 * d + m;
            }
        }
        GgmlType::Q5_0 => {
            let d = f16_at(b, 0);
            let qh = u32_at(b, 2);
            let qs = &b[6..22];
            for j in 0..16 {
                let h0 = (((qh >> j) << 4) & 0x10) as u8;
                let h1 = ((qh >> (j + 12)) & 0x10) as u8;
                y[j] = (((qs[j] & 0x0f) | h0) as i32 - 16) as f32 * d;
                y[j + 16] = (((qs[j] >> 4) | h1) as i32 - 16) as f32 * d;
            }
        }
        GgmlType::Q5_1 => {
            let (d, m) = (f16_at(b, 0), f16_at(b, 2));
            let qh = u32_at(b, 4);
            let qs = &b[8..24];
            for j in 0..16 {
                let h0 = (((qh >> j) << 4) & 0x10) as u8;
                let h1 = ((qh >> (j + 12)) & 0x10) as u8;
                y[j] = ((qs[j] & 0x0f) | h0) as f32 * d + m;
                y[j + 16] = ((qs[j] >> 4) | h1) as f32 * d + m;
            }
        }
        GgmlType::Q8_0 => {
            let d = f16_at(b, 0);
            for j in 0..QK32 {
                y[j] = (b[2 + j] as i8) as f32 * d;
            }
        }
        GgmlType::Q2K => {
            // scales[16] | qs[64] | d | dmin
            let sc = &b[0..16];
            let qs = &b[16..80];
            let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
            let mut out = 0;
            let mut is = 0;
            for half in 0..2 {
                let q = &qs[half * 32..half * 32 + 32];
                for shift in [0u32, 2, 4, 6] {
                    for part in 0..2 {
                        let s = sc[is];
                        is += 1;
                        let dl = d * (s & 0x0f) as f32;
                        let ml = dmin * (s >> 4) as f32;
                        for l in 0..16 {
                            y[out] = dl * ((q[part * 16 + l] >> shift) & 3) as f32 - ml;
                            out += 1;
                        }
                    }
                }
            }
        }
        GgmlType::Q3K => {
            // hmask[32] | qs[64] | scales[12] | d
            let hm = &b[0..32];
            let qs = &b[32..96];
            let scales = q3k_scales(&b[96..108]);
            let d_all = f16_at(b, 108);
            let mut out = 0;
            let mut is = 0;
            let mut m = 1u8;
            for half in 0..2 {
                let q = &qs[half * 32..half * 32 + 32];
                for shift in [0u32, 2, 4, 6] {
                    for part in 0..2 {
                        let dl = d_all * scales[is] as f32;
                        is += 1;
                        for l in part * 16..part * 16 + 16 {
                            let low = ((q[l] >> shift) & 3) as i32;
                            let v = low - if hm[l] & m != 0 { 0 } else { 4 };
                            y[out] = dl * v as f32;
                            out += 1;
                        }
                    }
                    m <<= 1;
                }
            }
        }
        GgmlType::Q4K => {
            // d | dmin | scales[12] | qs[128]
            let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
            let sc = &b[4..16];
            let qs = &b[16..144];
            for j in 0..4 {
                let (s1, m1) = scale_min_k4(2 * j, sc);
                let (s2, m2) = scale_min_k4(2 * j + 1, sc);
                let (d1, m1) = (d * s1 as f32, dmin * m1 as f32);
                let (d2, m2) = (d * s2 as f32, dmin * m2 as f32);
                let q = &qs[j * 32..j * 32 + 32];
                for l in 0..32 {
                    y[j * 64 + l] = d1 * (q[l] & 0x0f) as f32 - m1;
                    y[j * 64 + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
                }
            }
        }
        GgmlType::Q5K => {
            // d | dmin | scales[12] | qh[32] | qs[128]
            let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
            let sc = &b[4..16];
            let qh = &b[16..48];
            let qs = &b[48..176];
            for j in 0..4 {
                let (s1, m1) = scale_min_k4(2 * j, sc);
                let (s2, m2) = scale_min_k4(2 * j + 1, sc);
                let (d1, m1) = (d * s1 as f32, dmin * m1 as f32);
                let (d2, m2) = (d * s2 as f32, dmin * m2 as f32);
                let (u1, u2) = (1u8 << (2 * j), 2u8 << (2 * j));
                let q = &qs[j * 32..j * 32 + 32];
                for l in 0..32 {
                    let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
                    let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
                    y[j * 64 + l] = d1 * ((q[l] & 0x0f) + h1) as f32 - m1;
                    y[j * 64 + 32 + l] = d2 * ((q[l] >> 4) + h2) as f32 - m2;
                }
            }
        }
        GgmlType::Q6K => {
            // ql[128] | qh[64] | scales[16] (i8) | d
            let ql = &b[0..128];
            let qh = &b[128..192];
            let sc = &b[192..208];
            let d = f16_at(b, 208);
            for n in 0..2 {
                let ql = &ql[n * 64..n * 64 + 64];
                let qh = &qh[n * 32..n * 32 + 32];
                let sc = &sc[n * 8..n * 8 + 8];
                let y = &mut y[n * 128..n * 128 + 128];
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i32 - 32;
                    let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                    let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                    let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                    y[l] = d * (sc[is] as i8) as f32 * q1 as f32;
                    y[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
                    y[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
                    y[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
                }
            }
        }
        GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16 => {
            dequantize_row(ty, b, y);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Dot products against f32 activations (for checking: dequantize, multiply, sum in f64).

/// `w · x` with the row dequantized to f32 and summed in f64; the exact-as-possible reference.
pub fn vec_dot_f32_ref(ty: GgmlType, w: &[u8], x: &[f32]) -> f32 {
    let be = ty.block_elems().max(32);
    let bytes = ty.row_bytes(be as u64).unwrap_or(0) as usize;
    let mut tmp = [0.0f32; QK_K];
    let mut sum = 0.0f64;
    for (b, xs) in w.chunks_exact(bytes.max(1)).zip(x.chunks_exact(be)) {
        dequantize_row(ty, b, &mut tmp[..be]);
        for (a, v) in tmp[..be].iter().zip(xs) {
            sum += *a as f64 * *v as f64;
        }
    }
    sum as f32
}

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
