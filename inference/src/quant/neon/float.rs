//! Float kernels: F32 / F16 / BF16 dot products and the attention of one head.
//!
//! The scalar twins keep fixed partial sums (`acc[i & 3]` for the dot products, `acc[i & 7]` for
//! the attention's `q·k`, see [`crate::ops::dot_f32_f16`]) combined in a fixed order; a vector lane
//! is one partial sum, updated with a separate multiply and add, so every lane rounds exactly as its
//! scalar partial sum. Elements past the last whole vector go to their lanes in scalar code.
//!
//! The batched kernels (`mat_*`, prompt batches) convert each weight once per row and keep one
//! 4-lane sum per column: lane l receives the same elements l, l + 4, .. in the same order as the
//! one-row kernel's, so every output is the one-row kernel's, bit for bit.

use super::{f16x4_to_f32, f16x8_high_to_f32, f16x8_low_to_f32, ld_u8};
use crate::quant::batch::MAX_BATCH;
use core::arch::aarch64::*;
use half::{bf16, f16};

#[inline(always)]
fn h(v: u16) -> f32 {
    f16::from_bits(v).to_f32()
}

/// Four lanes out to an array (for the scalar tail).
#[target_feature(enable = "neon")]
#[inline]
fn lanes(v: float32x4_t) -> [f32; 4] {
    let mut out = [0.0f32; 4];
    // SAFETY: `out` holds four f32.
    unsafe { vst1q_f32(out.as_mut_ptr(), v) };
    out
}

#[target_feature(enable = "neon")]
fn f32_f32(w: &[u8], x: &[f32]) -> f32 {
    let n = (w.len() / 4).min(x.len());
    let (pw, px) = (w.as_ptr(), x.as_ptr());
    let mut acc = vdupq_n_f32(0.0);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: elements i..i + 8 lie in both `w` (4 bytes each) and `x` (i + 8 ≤ n).
        let (w0, w1, x0, x1) = unsafe {
            (
                vreinterpretq_f32_u8(ld_u8(pw.add(4 * i))),
                vreinterpretq_f32_u8(ld_u8(pw.add(4 * i + 16))),
                vld1q_f32(px.add(i)),
                vld1q_f32(px.add(i + 4)),
            )
        };
        acc = vaddq_f32(acc, vmulq_f32(w0, x0));
        acc = vaddq_f32(acc, vmulq_f32(w1, x1));
        i += 8;
    }
    let mut acc = lanes(acc);
    for j in i..n {
        let b = &w[4 * j..4 * j + 4];
        acc[j & 3] += f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * x[j];
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// F16 weights · f16 activations, or with `BF` BF16 · bf16: eight elements a step into four
/// lanes (lane `i` is the scalar code's `acc[i & 3]`), the tail in the scalar code's order.
#[target_feature(enable = "neon")]
fn half_half<const BF: bool>(w: &[u8], x: &[u16]) -> f32 {
    let n = (w.len() / 2).min(x.len());
    let (pw, px) = (w.as_ptr(), x.as_ptr());
    let mut acc = vdupq_n_f32(0.0);
    let mut i = 0;
    // bf16 → f32 is the 16 bits moved up (exact; `half` does the same for every non-NaN value).
    let lo = |v: uint16x8_t| {
        if BF {
            vreinterpretq_f32_u32(vshll_n_u16::<16>(vget_low_u16(v)))
        } else {
            f16x8_low_to_f32(v)
        }
    };
    let hi = |v: uint16x8_t| {
        if BF {
            vreinterpretq_f32_u32(vshll_high_n_u16::<16>(v))
        } else {
            f16x8_high_to_f32(v)
        }
    };
    while i + 8 <= n {
        // SAFETY: elements i..i + 8 lie in both `w` (2 bytes each) and `x` (i + 8 ≤ n).
        let (wv, xv) = unsafe {
            (
                vreinterpretq_u16_u8(ld_u8(pw.add(2 * i))),
                vld1q_u16(px.add(i)),
            )
        };
        acc = vaddq_f32(acc, vmulq_f32(lo(wv), lo(xv)));
        acc = vaddq_f32(acc, vmulq_f32(hi(wv), hi(xv)));
        i += 8;
    }
    let mut acc = lanes(acc);
    for j in i..n {
        let one = Half::<BF>::one;
        acc[j & 3] += one(u16::from_le_bytes([w[2 * j], w[2 * j + 1]])) * one(x[j]);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// The end of [`crate::ops::dot_f32_f16`] from its eight partial sums in `a` (sums 0..4) and `b`
/// (4..8) after the first `i` elements (a multiple of 8): the remaining elements `q`, `k` go to
/// their partial sums, then the sums are combined in the scalar order.
#[target_feature(enable = "neon")]
#[inline]
fn qk_finish(a: float32x4_t, b: float32x4_t, q: &[f32], k: &[u16]) -> f32 {
    if q.is_empty() || k.is_empty() {
        // ((a0 + b0) + (a1 + b1)) + ((a2 + b2) + (a3 + b3)) with pairwise adds.
        let c = vaddq_f32(a, b);
        return vpadds_f32(vget_low_f32(vpaddq_f32(c, c)));
    }
    let (a, b) = (lanes(a), lanes(b));
    crate::ops::dot_f32_f16_from([a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]], q, k)
}

/// `q · k` (k as f16 bits) with the eight partial sums of [`crate::ops::dot_f32_f16`].
#[target_feature(enable = "neon")]
#[inline]
fn dot_qk(q: &[f32], k: &[u16]) -> f32 {
    let n = q.len().min(k.len());
    let (pq, pk) = (q.as_ptr(), k.as_ptr());
    let (mut a, mut b) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: elements i..i + 8 lie in both slices (i + 8 ≤ n).
        let (q0, q1, kv) = unsafe {
            (
                vld1q_f32(pq.add(i)),
                vld1q_f32(pq.add(i + 4)),
                vld1q_u16(pk.add(i)),
            )
        };
        a = vaddq_f32(a, vmulq_f32(q0, f16x8_low_to_f32(kv)));
        b = vaddq_f32(b, vmulq_f32(q1, f16x8_high_to_f32(kv)));
        i += 8;
    }
    qk_finish(a, b, &q[i..n], &k[i..n])
}

/// `[q · k0, .., q · k3]`, each as [`dot_qk`] computes it (the loads of `q` shared). Every `kj`
/// holds `q.len()` values.
#[target_feature(enable = "neon")]
#[inline]
fn dot_qk4(q: &[f32], k: [&[u16]; 4]) -> [f32; 4] {
    let n = q.len();
    assert!(k.iter().all(|k| k.len() == n));
    let pq = q.as_ptr();
    let pk = k.map(|k| k.as_ptr());
    let mut a = [vdupq_n_f32(0.0); 4];
    let mut b = a;
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: elements i..i + 8 lie in `q` and in every `kj` (all of length n, checked above).
        let (q0, q1) = unsafe { (vld1q_f32(pq.add(i)), vld1q_f32(pq.add(i + 4))) };
        for j in 0..4 {
            // SAFETY: as above.
            let kv = unsafe { vld1q_u16(pk[j].add(i)) };
            a[j] = vaddq_f32(a[j], vmulq_f32(q0, f16x8_low_to_f32(kv)));
            b[j] = vaddq_f32(b[j], vmulq_f32(q1, f16x8_high_to_f32(kv)));
        }
        i += 8;
    }
    if i == n {
        // Per key ((a0 + b0) + (a1 + b1)) + ((a2 + b2) + (a3 + b3)), four keys at once.
        let c: [float32x4_t; 4] = core::array::from_fn(|j| vaddq_f32(a[j], b[j]));
        return lanes(vpaddq_f32(vpaddq_f32(c[0], c[1]), vpaddq_f32(c[2], c[3])));
    }
    core::array::from_fn(|j| qk_finish(a[j], b[j], &q[i..], &k[j][i..]))
}

/// `out = out · x + v` (`RESCALE`: the scalar rescale step) or `out = out + x · v` (the
/// scalar accumulate step) elementwise, `v` as f16 bits.
#[target_feature(enable = "neon")]
#[inline]
fn update<const RESCALE: bool>(out: &mut [f32], x: f32, v: &[u16]) {
    let n = out.len().min(v.len());
    let (po, pv) = (out.as_mut_ptr(), v.as_ptr());
    let step = |o: float32x4_t, v: float32x4_t| {
        if RESCALE {
            vaddq_f32(vmulq_n_f32(o, x), v)
        } else {
            vaddq_f32(o, vmulq_n_f32(v, x))
        }
    };
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: elements i..i + 8 lie in both slices (i + 8 ≤ n); `out` is borrowed mutably.
        unsafe {
            let vv = vld1q_u16(pv.add(i));
            let o0 = step(vld1q_f32(po.add(i)), f16x8_low_to_f32(vv));
            let o1 = step(vld1q_f32(po.add(i + 4)), f16x8_high_to_f32(vv));
            vst1q_f32(po.add(i), o0);
            vst1q_f32(po.add(i + 4), o1);
        }
        i += 8;
    }
    for j in i..n {
        out[j] = if RESCALE {
            out[j] * x + h(v[j])
        } else {
            out[j] + x * h(v[j])
        };
    }
}

/// `out = (((out + w0 · v0) + w1 · v1) + w2 · v2) + w3 · v3` elementwise: four accumulate steps
/// of the scalar loop in their order, `out` loaded and stored once.
#[target_feature(enable = "neon")]
#[inline]
fn add_scaled4(out: &mut [f32], w: [f32; 4], v: [&[u16]; 4]) {
    let n = v.iter().fold(out.len(), |n, v| n.min(v.len()));
    let po = out.as_mut_ptr();
    let pv = v.map(|v| v.as_ptr());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: elements i..i + 8 lie in `out` and every `vj` (i + 8 ≤ n); `out` is borrowed
        // mutably.
        unsafe {
            let mut o0 = vld1q_f32(po.add(i));
            let mut o1 = vld1q_f32(po.add(i + 4));
            for j in 0..4 {
                let vv = vld1q_u16(pv[j].add(i));
                o0 = vaddq_f32(o0, vmulq_n_f32(f16x8_low_to_f32(vv), w[j]));
                o1 = vaddq_f32(o1, vmulq_n_f32(f16x8_high_to_f32(vv), w[j]));
            }
            vst1q_f32(po.add(i), o0);
            vst1q_f32(po.add(i + 4), o1);
        }
        i += 8;
    }
    for e in i..n {
        let mut o = out[e];
        for j in 0..4 {
            o += w[j] * h(v[j][e]);
        }
        out[e] = o;
    }
}

/// The computation of [`crate::ops::attend_head`], position by position in the same order, with
/// SIMD inner loops. Positions go four at a time: their scores first (sharing the loads of `q`),
/// then the scalar softmax bookkeeping in order, then their updates of `out` (fused into one pass
/// when none of the four raises the maximum; one by one otherwise). Each element of `out` sees
/// the same operations in the same order as in the scalar loop.
#[target_feature(enable = "neon")]
fn attend(out: &mut [f32], q: &[f32], head: &crate::ops::Head<'_>) {
    let (keys, values, n, scale) = (head.keys, head.values, head.n, head.scale);
    let hd = q.len();
    out.fill(0.0);
    let mut max = f32::NEG_INFINITY;
    let mut sum = 0.0f32;
    let mut t = 0;
    while t < n {
        let c = (n - t).min(4);
        let row = |j: usize| head.row(t + j)..head.row(t + j) + hd;
        let mut s = [0.0f32; 4];
        if c == 4 {
            s = dot_qk4(q, core::array::from_fn(|j| &keys[row(j)]));
        } else {
            for (j, s) in s.iter_mut().enumerate().take(c) {
                *s = dot_qk(q, &keys[row(j)]);
            }
        }
        let mut v: [&[u16]; 4] = [&[]; 4];
        // Per position: the factor applied to `out` (r when the maximum rises, else the weight w).
        let mut f = [0.0f32; 4];
        let mut rises = [false; 4];
        for j in 0..c {
            v[j] = &values[row(j)];
            let s = s[j] * scale;
            if s > max {
                let r = libm::expf(max - s);
                sum = sum * r + 1.0;
                (f[j], rises[j]) = (r, true);
                max = s;
            } else {
                let w = libm::expf(s - max);
                sum += w;
                f[j] = w;
            }
        }
        if c == 4 && !rises.contains(&true) {
            add_scaled4(out, f, v);
        } else {
            for j in 0..c {
                if rises[j] {
                    update::<true>(out, f[j], v[j]);
                } else {
                    update::<false>(out, f[j], v[j]);
                }
            }
        }
        t += c;
    }
    if sum > 0.0 {
        let inv = 1.0 / sum;
        for o in out.iter_mut() {
            *o *= inv;
        }
    }
}

/// F32 weights · f32 activations (twin of `scalar::vec_dot_f32_f32`).
pub fn vec_dot_f32_f32(w: &[u8], x: &[f32]) -> f32 {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe { f32_f32(w, x) }
}

/// F16 weights · f16 activations (twin of `scalar::vec_dot_f16_f16`).
pub fn vec_dot_f16_f16(w: &[u8], x: &[u16]) -> f32 {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe { half_half::<false>(w, x) }
}

/// BF16 weights · bf16 activations (twin of `scalar::vec_dot_bf16_bf16`).
pub fn vec_dot_bf16_bf16(w: &[u8], x: &[u16]) -> f32 {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe { half_half::<true>(w, x) }
}

/// `q · k` with eight partial sums (twin of [`crate::ops::dot_f32_f16`]).
pub fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe { dot_qk(q, k) }
}

/// One query head over the cached positions of `head` (twin of [`crate::ops::attend_head`]).
pub fn attend_head(out: &mut [f32], q: &[f32], head: &crate::ops::Head<'_>) {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe { attend(out, q, head) }
}

/// f32 to f16 bits, round to nearest even (twin of [`crate::ops::to_f16`]): FCVTN, four at a
/// time (the `float16x4_t` intrinsics are not stable Rust, so one `asm!` line).
pub fn to_f16(out: &mut [u16], x: &[f32]) {
    let n = out.len().min(x.len());
    let (mut o4, mut x4) = (out[..n].chunks_exact_mut(4), x[..n].chunks_exact(4));
    for (o, v) in (&mut o4).zip(&mut x4) {
        let h: u64;
        // SAFETY: `v` holds four f32 (16 bytes) read by the load; the result is a register.
        unsafe {
            core::arch::asm!(
                "ldr {q:q}, [{p}]\nfcvtn {q:v}.4h, {q:v}.4s\nfmov {h}, {q:d}",
                p = in(reg) v.as_ptr(),
                q = out(vreg) _,
                h = out(reg) h,
                options(nostack, readonly, preserves_flags),
            )
        };
        for (k, o) in o.iter_mut().enumerate() {
            *o = (h >> (16 * k)) as u16;
        }
    }
    crate::ops::to_f16(o4.into_remainder(), x4.remainder());
}

// ---------------------------------------------------------------------------------------------
// Batched: each weight converted once per row (CHUNK at a time), then multiplied with every column;
// lane l of a column's sum is the one-row kernel's partial sum `acc[l]`, fed the same elements
// l, l + 4, .. in the same order, so each output is the one-row kernel's, bit for bit.

/// Weight elements converted to f32 at a time (a multiple of 4).
const CHUNK: usize = 64;

/// A float format of the batched kernels: four weights or activations from element `i` as f32,
/// and one of each (the tail), all exact conversions.
trait FloatEl {
    type A: Copy;
    const SIZE: usize;
    fn w4(w: &[u8], i: usize) -> float32x4_t;
    fn a4(a: &[Self::A], i: usize) -> float32x4_t;
    fn w1(w: &[u8], i: usize) -> f32;
    fn a1(a: Self::A) -> f32;
}

/// Sixteen bytes of `b` from `at` (bounds checked).
#[inline(always)]
fn ld16(b: &[u8], at: usize) -> uint8x16_t {
    let b: &[u8; 16] = b[at..at + 16].try_into().unwrap_or(&[0; 16]);
    // SAFETY: `b` holds 16 bytes.
    unsafe { ld_u8(b.as_ptr()) }
}

/// Four u16 of `v` from `at` (bounds checked).
#[inline(always)]
fn ld4_u16(v: &[u16], at: usize) -> uint16x4_t {
    let v: &[u16; 4] = v[at..at + 4].try_into().unwrap_or(&[0; 4]);
    // SAFETY: `v` holds four u16; NEON is part of the aarch64 baseline.
    unsafe { vld1_u16(v.as_ptr()) }
}

/// Eight bytes of `b` from `at` as four u16 (bounds checked).
#[inline(always)]
fn ld8(b: &[u8], at: usize) -> uint16x4_t {
    let b: &[u8; 8] = b[at..at + 8].try_into().unwrap_or(&[0; 8]);
    // SAFETY: `b` holds 8 bytes; NEON is part of the aarch64 baseline.
    unsafe { vreinterpret_u16_u8(vld1_u8(b.as_ptr())) }
}

/// bf16 bits to f32: the 16 bits moved up (exact).
#[inline(always)]
fn bf16x4(v: uint16x4_t) -> float32x4_t {
    // SAFETY: NEON is part of the aarch64 baseline; register operations only.
    unsafe { vreinterpretq_f32_u32(vshll_n_u16::<16>(v)) }
}

struct F32;
impl FloatEl for F32 {
    type A = f32;
    const SIZE: usize = 4;
    #[inline(always)]
    fn w4(w: &[u8], i: usize) -> float32x4_t {
        // SAFETY: NEON is part of the aarch64 baseline; register operations only.
        unsafe { vreinterpretq_f32_u8(ld16(w, 4 * i)) }
    }
    #[inline(always)]
    fn a4(a: &[f32], i: usize) -> float32x4_t {
        let a: &[f32; 4] = a[i..i + 4].try_into().unwrap_or(&[0.0; 4]);
        // SAFETY: `a` holds four f32; NEON is part of the aarch64 baseline.
        unsafe { vld1q_f32(a.as_ptr()) }
    }
    #[inline(always)]
    fn w1(w: &[u8], i: usize) -> f32 {
        f32::from_le_bytes([w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]])
    }
    #[inline(always)]
    fn a1(a: f32) -> f32 {
        a
    }
}

/// F16 elements, or with `BF` BF16 ones: two bytes each, converted to f32 exactly.
struct Half<const BF: bool>;
impl<const BF: bool> Half<BF> {
    #[inline(always)]
    fn four(v: uint16x4_t) -> float32x4_t {
        if BF {
            bf16x4(v)
        } else {
            f16x4_to_f32(v)
        }
    }
    #[inline(always)]
    fn one(v: u16) -> f32 {
        if BF {
            bf16::from_bits(v).to_f32()
        } else {
            h(v)
        }
    }
}
impl<const BF: bool> FloatEl for Half<BF> {
    type A = u16;
    const SIZE: usize = 2;
    #[inline(always)]
    fn w4(w: &[u8], i: usize) -> float32x4_t {
        Self::four(ld8(w, 2 * i))
    }
    #[inline(always)]
    fn a4(a: &[u16], i: usize) -> float32x4_t {
        Self::four(ld4_u16(a, i))
    }
    #[inline(always)]
    fn w1(w: &[u8], i: usize) -> f32 {
        Self::one(u16::from_le_bytes([w[2 * i], w[2 * i + 1]]))
    }
    #[inline(always)]
    fn a1(a: u16) -> f32 {
        Self::one(a)
    }
}
type F16 = Half<false>;
type Bf16 = Half<true>;

/// `v` plus, lane by lane and in order, the products of the converted weights `wf` with the
/// activations `xs` (at most `CHUNK`); a whole chunk as a loop of constant length (unrolled, `wf`
/// in registers).
#[target_feature(enable = "neon")]
#[inline]
fn chunk_dot<E: FloatEl>(
    v: float32x4_t,
    wf: &[float32x4_t; CHUNK / 4],
    xs: &[E::A],
) -> float32x4_t {
    let mut v = v;
    if let Ok(xf) = <&[E::A; CHUNK]>::try_from(xs) {
        for (k, wv) in wf.iter().enumerate() {
            v = vaddq_f32(v, vmulq_f32(*wv, E::a4(xf, 4 * k)));
        }
    } else {
        for (wv, x4) in wf.iter().zip(xs.chunks_exact(4)) {
            v = vaddq_f32(v, vmulq_f32(*wv, E::a4(x4, 0)));
        }
    }
    v
}

/// Row `w` (`n` elements) · the columns `x(c)` (`acc.len()` of them, `n` elements each) into
/// `out`: the vector part into `acc`, then each column's tail and the scalar's final sum.
#[target_feature(enable = "neon")]
#[inline]
fn float_cols<'a, E: FloatEl>(
    w: &[u8],
    n: usize,
    x: impl Fn(usize) -> &'a [E::A],
    acc: &mut [float32x4_t],
    out: &mut [f32],
) where
    E::A: 'a,
{
    let n4 = n / 4 * 4;
    acc.fill(vdupq_n_f32(0.0));
    for start in (0..n4).step_by(CHUNK) {
        let k4 = CHUNK.min(n4 - start) / 4;
        let z = vdupq_n_f32(0.0);
        let wf: [float32x4_t; CHUNK / 4] =
            core::array::from_fn(|k| if k < k4 { E::w4(w, start + 4 * k) } else { z });
        for (c, s) in acc.iter_mut().enumerate() {
            *s = chunk_dot::<E>(*s, &wf, &x(c)[start..start + 4 * k4]);
        }
    }
    for (c, (s, o)) in acc.iter().zip(out).enumerate() {
        let (xc, mut l) = (x(c), lanes(*s));
        for j in n4..n {
            l[j & 3] += E::w1(w, j) * E::a1(xc[j]);
        }
        *o = (l[0] + l[1]) + (l[2] + l[3]);
    }
}

/// Rows of `rb` bytes · `cols` columns of `a` into `out` (`[rows][cols]`), up to [`MAX_BATCH`]
/// columns per pass over a row.
#[target_feature(enable = "neon")]
fn mat_float<E: FloatEl>(w: &[u8], rb: usize, a: &[E::A], cols: usize, out: &mut [f32]) {
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let per = a.len().checked_div(cols).unwrap_or(0);
    if rows * cols != out.len() {
        return;
    }
    let n = per.min(rb / E::SIZE);
    let mut acc = [vdupq_n_f32(0.0); MAX_BATCH];
    for (row, o) in w.chunks_exact(rb).zip(out.chunks_exact_mut(cols)) {
        for (g, o) in o.chunks_mut(MAX_BATCH).enumerate() {
            let x = |c: usize| &a[(g * MAX_BATCH + c) * per..][..n];
            float_cols::<E>(row, n, x, &mut acc[..o.len()], o);
        }
    }
}

/// F32 weights · f32 activations, batched: rows · `cols` columns into `out` as `[rows][cols]`.
pub fn mat_f32_f32(w: &[u8], rb: usize, a: &[f32], cols: usize, out: &mut [f32]) {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe { mat_float::<F32>(w, rb, a, cols, out) }
}

/// F16 weights · f16 activations, batched: rows · `cols` columns into `out` as `[rows][cols]`.
pub fn mat_f16_f16(w: &[u8], rb: usize, a: &[u16], cols: usize, out: &mut [f32]) {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe { mat_float::<F16>(w, rb, a, cols, out) }
}

/// BF16 weights · bf16 activations, batched: rows · `cols` columns into `out` as `[rows][cols]`.
pub fn mat_bf16_bf16(w: &[u8], rb: usize, a: &[u16], cols: usize, out: &mut [f32]) {
    // SAFETY: NEON is part of every aarch64 target this module is built for.
    unsafe { mat_float::<Bf16>(w, rb, a, cols, out) }
}
