//! K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) · Q8_K activations.
//!
//! The scalar twins sum a whole super-block in i32 (`isum`, and `summs` for the mins) and then do a
//! few float operations per super-block. Here the integer part is SIMD: groups of 16 or 32
//! products are summed exactly (`sums4`, `sums4x16`), multiplied by their integer scales in i32
//! lanes and summed across lanes; the float part is the scalar expression, verbatim ([`term1`],
//! and [`term4`] lane by lane). Weights are decoded to the scalar's signed values (Q3_K -4..3, Q6_K
//! -32..31), so nothing relies on the activations' `bsums` beyond what the scalar code uses them
//! for (Q2_K, Q4_K, Q5_K mins).
//!
//! Each type is a `KBlock` cut in two parts of 128 elements: `head` decodes a block's integer
//! scales (and mins) once, `weights` one part's 128 weights as eight vectors lined up with
//! `y.qs[128p..128p + 128]`, `part` that part's scaled integer sum. The one-row kernel (`row`)
//! takes a block part by part, software-pipelined (block i's integer sums beside block i − 1's
//! float term); the four-row kernel (`row4`) loads each part's activations once
//! for the four rows and does the float work of the four rows in one vector operation per scalar
//! operation (row `r` in lane `r`); the batched one (`mat`, prompt batches) decodes each block
//! once and takes one term per column. All three give the same bits.

use super::{
    f16_to_f32, f16x4_to_f32, f16x8_high_to_f32, f16x8_low_to_f32, ld1_lane_h, ld1_lane_s, nibbles,
    rd_u16, rd_u32, sums4, sums4x16,
};
use crate::quant::act::BlockQ8K;
use core::arch::aarch64::*;

/// `N` readable bytes, loaded sixteen at a time by single LDR Q that LLVM cannot pair into LDP Q:
/// the Cortex-A55 model issues an LDP Q in 6 cycles, two LDR Q in 2 (the A53 model prices them the
/// same). The pairing pass only pairs loads off one base register at adjacent offsets, so loads at
/// an even multiple of 16 go off `even` and the others off `odd`: the same address, through an
/// empty `asm!` that hides it is the same. Offsets stay immediates.
#[derive(Clone, Copy)]
struct Bytes<const N: usize> {
    even: *const u8,
    odd: *const u8,
}

impl<const N: usize> Bytes<N> {
    /// # Safety
    /// `b..b + N` must be readable while the value is used.
    #[inline(always)]
    unsafe fn new(b: *const u8) -> Self {
        // Zero, which LLVM cannot see is zero.
        let mut zero = 0usize;
        // SAFETY: an empty template: no instruction, no memory, `zero` keeps its value.
        unsafe {
            core::arch::asm!("/* {0} */", inout(reg) zero, options(pure, nomem, nostack, preserves_flags))
        };
        Bytes {
            even: b,
            odd: b.wrapping_add(zero),
        }
    }

    /// Bytes `at..at + 16`.
    #[inline(always)]
    fn ld(self, at: usize) -> uint8x16_t {
        assert!(N >= 16 && at <= N - 16);
        let base = if (at / 16).is_multiple_of(2) {
            self.even
        } else {
            self.odd
        };
        // SAFETY: `at..at + 16` is inside the `N` readable bytes (checked above; constant-folded
        // where `at` is constant); LD1 needs no alignment.
        unsafe { vld1q_u8(base.add(at)) }
    }

    /// Bytes `at..at + 16` as signed.
    #[inline(always)]
    fn ld_i8(self, at: usize) -> int8x16_t {
        // SAFETY: NEON is part of the aarch64 baseline; a register reinterpretation.
        unsafe { vreinterpretq_s8_u8(self.ld(at)) }
    }
}

/// Parts of 128 elements per super-block.
const PARTS: usize = 2;

/// `$body` once for each of the literal values of `$i` (a `usize`): written out, so the body
/// sees a constant (array indices and load offsets fold; LLVM leaves some of these loops rolled).
macro_rules! unroll {
    ($i:ident in [$($n:literal),*] $body:block) => {
        $({
            let $i: usize = $n;
            $body
        })*
    };
}

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
///
/// # Safety
/// `sc..sc + 12` must be readable.
#[inline(always)]
unsafe fn k4_scales_mins(sc: *const u8) -> uint8x16_t {
    // SAFETY: the caller guarantees 12 readable bytes.
    let (u0, u1, u2) = unsafe { (rd_u32(sc), rd_u32(sc.add(4)), rd_u32(sc.add(8))) };
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

/// A K-quant block cut into [`PARTS`] parts of 128 elements: its scales decoded once (`head`),
/// each part's weights (`weights`) and scaled integer sum (`part`), the mins' sum (`mins`).
/// Every function that reads a block takes its address `b`; `b..b + BYTES` must be readable.
trait KBlock {
    const BYTES: usize;
    /// Where the f16 `d` is in the block; with `MINS`, `dmin` follows it.
    const D_AT: usize;
    /// The block has mins (`sumf += d · isum − dmin · summs`; without: `sumf += d · isum`).
    const MINS: bool;
    /// The block's integer scales (and mins), as the parts need them.
    type Head;
    /// # Safety
    /// `b..b + BYTES` must be readable.
    unsafe fn head(b: *const u8) -> Self::Head;
    /// Part `p`'s 128 weights as int8, vector `k` lined up with `y.qs[128p + 16k..][..16]`.
    ///
    /// # Safety
    /// `b..b + BYTES` must be readable.
    unsafe fn weights(b: *const u8, p: usize) -> [int8x16_t; 8];
    /// `acc` plus part `p`'s `Σ scale · Σ w·a`, in lanes (exact: the lanes of the sum over the
    /// parts add up to the scalar's `isum`).
    fn part<const DP: bool>(
        acc: int32x4_t,
        h: &Self::Head,
        p: usize,
        w: &[int8x16_t; 8],
        a: &[int8x16_t; 8],
    ) -> int32x4_t;
    /// `Σ min · bsums` in lanes (the scalar's `summs` is their sum; zeros without `MINS`); `bs`
    /// is `bsums` as two vectors.
    fn mins(h: &Self::Head, bs: &[int16x8_t; 2]) -> int32x4_t;
}

/// Part `p` of `y`'s quants, as [`KBlock::weights`] lines them up.
#[inline(always)]
fn acts(y: &BlockQ8K, p: usize) -> [int8x16_t; 8] {
    // Written out: as a loop, LLVM kept it (through the stack).
    let at = 128 * p;
    // SAFETY: `qs` holds 256 bytes.
    let q = unsafe { Bytes::<256>::new(y.qs.as_ptr() as *const u8) };
    [
        q.ld_i8(at),
        q.ld_i8(at + 16),
        q.ld_i8(at + 32),
        q.ld_i8(at + 48),
        q.ld_i8(at + 64),
        q.ld_i8(at + 80),
        q.ld_i8(at + 96),
        q.ld_i8(at + 112),
    ]
}

/// `y.bsums` as two vectors.
#[inline(always)]
fn bsums(y: &BlockQ8K) -> [int16x8_t; 2] {
    // SAFETY: `bsums` holds sixteen i16.
    unsafe {
        [
            vld1q_s16(y.bsums.as_ptr()),
            vld1q_s16(y.bsums.as_ptr().add(8)),
        ]
    }
}

/// The `d` and `dmin` (0 without mins) of the block at `b`, as f32.
///
/// # Safety
/// `b..b + K::BYTES` must be readable.
#[inline(always)]
unsafe fn scales1<K: KBlock>(b: *const u8) -> (f32, f32) {
    // SAFETY: `D_AT + 2` (`+ 4` with mins) ≤ BYTES: readable (caller).
    unsafe {
        let d = f16_to_f32(rd_u16(b.add(K::D_AT)));
        let dmin = if K::MINS {
            f16_to_f32(rd_u16(b.add(K::D_AT + 2)))
        } else {
            0.0
        };
        (d, dmin)
    }
}

/// One block's term: the scalar's float expression, verbatim (`d = x.d · y.d`; Q2_K's
/// `y.d · x.d` is the same product).
#[inline(always)]
fn term1<K: KBlock>(d: f32, dmin: f32, yd: f32, isum: i32, summs: i32) -> f32 {
    let d = d * yd;
    if K::MINS {
        let dmin = dmin * yd;
        d * isum as f32 - dmin * summs as f32
    } else {
        d * isum as f32
    }
}

/// Four rows' block terms at once, row `r` in lane `r`: [`term1`]'s operations, one vector
/// operation each.
#[target_feature(enable = "neon")]
#[inline]
fn term4<K: KBlock>(
    d: float32x4_t,
    dmin: float32x4_t,
    yd: f32,
    isum: int32x4_t,
    summs: int32x4_t,
) -> float32x4_t {
    let d = vmulq_n_f32(d, yd);
    let t = vmulq_f32(d, vcvtq_f32_s32(isum));
    if K::MINS {
        let dmin = vmulq_n_f32(dmin, yd);
        vsubq_f32(t, vmulq_f32(dmin, vcvtq_f32_s32(summs)))
    } else {
        t
    }
}

/// Four vectors' lane sums, vector `r`'s in lane `r`.
#[target_feature(enable = "neon")]
#[inline]
fn lane_sums(v: [int32x4_t; 4]) -> int32x4_t {
    vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]))
}

/// `ldr q` of the sixteen bytes at `$p + $off` (`$off` a constant): an `asm!` load at a constant
/// offset, which the compiler neither pairs into an LDP Q (the Cortex-A55 model issues one in 6
/// cycles) nor rebases.
macro_rules! ldr_q {
    ($p:expr, $off:expr) => {{
        let v: int8x16_t;
        // SAFETY: the caller of the enclosing function makes `$p + $off..+ 16` readable; an LDR
        // needs no alignment on normal memory.
        unsafe {
            core::arch::asm!(
                "ldr {v:q}, [{p}, #{off}]",
                v = out(vreg) v,
                p = in(reg) $p,
                off = const $off,
                options(pure, readonly, nostack, preserves_flags)
            );
        }
        v
    }};
}

/// The f16 value(s) at `$b + $off` (`$reg` "h": one, "s": two) as f32 in the low lanes of the
/// result: one LDR at a constant offset and one FCVTL. Inside an `unsafe` block whose caller
/// makes the bytes readable.
macro_rules! ld_cvt {
    ($b:expr, $reg:literal, $off:expr) => {{
        let v: float32x4_t;
        // (SAFETY: the enclosing block's.) An LDR needs no alignment on normal memory; FCVTL
        // works on registers.
        core::arch::asm!(
            concat!("ldr {v:", $reg, "}, [{b}, #{off}]"),
            "fcvtl {v:v}.4s, {v:v}.4h",
            v = out(vreg) v,
            b = in(reg) $b,
            off = const $off,
            options(pure, readonly, nostack, preserves_flags)
        );
        vget_low_f32(v)
    }};
}

/// Part `p` of the activations whose `qs` start at `q` ([`acts`] by constant-offset loads).
///
/// # Safety
/// `q..q + 256` must be readable.
#[inline(always)]
unsafe fn acts_at(q: *const u8, p: usize) -> [int8x16_t; 8] {
    if p == 0 {
        [
            ldr_q!(q, 0),
            ldr_q!(q, 16),
            ldr_q!(q, 32),
            ldr_q!(q, 48),
            ldr_q!(q, 64),
            ldr_q!(q, 80),
            ldr_q!(q, 96),
            ldr_q!(q, 112),
        ]
    } else {
        [
            ldr_q!(q, 128),
            ldr_q!(q, 144),
            ldr_q!(q, 160),
            ldr_q!(q, 176),
            ldr_q!(q, 192),
            ldr_q!(q, 208),
            ldr_q!(q, 224),
            ldr_q!(q, 240),
        ]
    }
}

/// Where `bsums` lies after `qs` in a [`BlockQ8K`].
const BSUMS_AT: usize =
    core::mem::offset_of!(BlockQ8K, bsums) - core::mem::offset_of!(BlockQ8K, qs);

/// One block of one row (`b` at the block, `y` its activations) without its float tail: the
/// integer lanes of `isum` and `summs` (zeros without mins), and `[d · y.d, dmin · y.d]` (lane 1
/// `0 · y.d` without mins); [`tail1`] adds the term.
///
/// # Safety
/// `b..b + K::BYTES` must be readable.
#[inline(always)]
unsafe fn block1<K: KBlock, const DP: bool>(
    b: *const u8,
    y: &BlockQ8K,
) -> (int32x4_t, int32x4_t, float32x2_t) {
    let q = y.qs.as_ptr() as *const u8;
    // SAFETY: `b` is one whole block (caller), `q` 256 quants; NEON is part of the aarch64
    // baseline. (The loads of `bsums`, which follow `qs`, are below.)
    let parts = unsafe {
        let h = K::head(b);
        // d (and dmin) in lane 0 (1): one load of the f16 field(s), one FCVTL.
        let dm = if K::MINS {
            ld_cvt!(b, "s", K::D_AT)
        } else {
            ld_cvt!(b, "h", K::D_AT)
        };
        let mut iv = vdupq_n_s32(0);
        unroll!(p in [0, 1] {
            let wq = K::weights(b, p);
            iv = K::part::<DP>(iv, &h, p, &wq, &acts_at(q, p));
        });
        (h, iv, vmul_n_f32(dm, y.d))
    };
    let (h, iv, dy) = parts;
    let (b0, b1) = (ldr_q!(q, BSUMS_AT), ldr_q!(q, BSUMS_AT + 16));
    // SAFETY: NEON is part of the aarch64 baseline; a register reinterpretation.
    let bs = unsafe { [vreinterpretq_s16_s8(b0), vreinterpretq_s16_s8(b1)] };
    (iv, K::mins(&h, &bs), dy)
}

/// [`block1`]'s block term, [`term1`]'s float expression: `(d · y.d) · isum − (dmin · y.d) ·
/// summs` (without mins `(d · y.d) · isum`), each product one lane of one multiplication.
#[inline(always)]
fn tail1<K: KBlock>((iv, mn, dy): (int32x4_t, int32x4_t, float32x2_t)) -> f32 {
    // SAFETY: NEON is part of the aarch64 baseline.
    unsafe {
        if K::MINS {
            // [isum, summs]
            let s = vpaddq_s32(iv, mn);
            let s = vget_low_s32(vpaddq_s32(s, s));
            let t = vmul_f32(dy, vcvt_f32_s32(s));
            vget_lane_f32::<0>(t) - vget_lane_f32::<1>(t)
        } else {
            vget_lane_f32::<0>(dy) * vaddvq_s32(iv) as f32
        }
    }
}

/// `p + BYTES`, the next block, added by an `asm!` ADD (the pointer stays one register, ready for
/// the next step's constant-offset loads).
///
/// # Safety
/// `p..p + BYTES` must lie in one allocation.
#[inline(always)]
unsafe fn next_block<K: KBlock>(p: *const u8) -> *const u8 {
    // The address as an integer (the ADD reads no memory), `p`'s provenance kept.
    let mut a = p.addr();
    // SAFETY: an integer ADD on a register: no memory, no flags; the result is the address of
    // `p.add(BYTES)`, in bounds (caller).
    unsafe {
        core::arch::asm!(
            "add {a}, {a}, #{n}",
            a = inout(reg) a,
            n = const K::BYTES,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    p.with_addr(a)
}

/// One row: `w` (whole blocks) · `a`. Software-pipelined for in-order cores (Cortex-A53, A55): a
/// step loads block i and computes its integer sums ([`block1`]), then adds block i − 1's float
/// term ([`tail1`]; terms still added in block order).
#[target_feature(enable = "neon")]
fn row<K: KBlock, const DP: bool>(w: &[u8], a: &[BlockQ8K]) -> f32 {
    let nb = (w.len() / K::BYTES).min(a.len());
    if nb == 0 {
        return 0.0;
    }
    let mut sumf = 0.0f32;
    let mut b = w.as_ptr();
    // SAFETY: block 0 lies in `w` (0 < nb).
    let mut pending = unsafe { block1::<K, DP>(b, &a[0]) };
    // SAFETY: block 1 starts inside `w` or one past its end (1 ≤ nb).
    b = unsafe { next_block::<K>(b) };
    for y in &a[1..nb] {
        // SAFETY: `b` is block i (i < nb) of `w`; block i + 1 starts inside `w` or one past its
        // end.
        let next = unsafe {
            let next = block1::<K, DP>(b, y);
            b = next_block::<K>(b);
            next
        };
        sumf += tail1::<K>(pending);
        pending = next;
    }
    sumf + tail1::<K>(pending)
}

/// Four rows of `rb` bytes each, consecutive in `w`, · `a`: `out[r]` is what [`row`] gives for
/// row `r`. Each part of the activations is loaded once for the four rows, and the float work is
/// one vector operation per scalar operation, row `r` in lane `r`.
#[target_feature(enable = "neon")]
fn row4<K: KBlock, const DP: bool>(w: &[u8], rb: usize, a: &[BlockQ8K], out: &mut [f32; 4]) {
    if rb.checked_mul(4).is_none_or(|n| w.len() < n) {
        // Not four whole rows: each row as far as it goes (never reached through `dot_rows`).
        for (r, o) in out.iter_mut().enumerate() {
            let row_r = w.get(r * rb..).unwrap_or(&[]);
            *o = row::<K, DP>(&row_r[..rb.min(row_r.len())], a);
        }
        return;
    }
    let nb = (rb / K::BYTES).min(a.len());
    let base = w.as_ptr();
    let mut acc = vdupq_n_f32(0.0);
    for (i, y) in a[..nb].iter().enumerate() {
        // SAFETY: block i of row r lies in r·rb + i·BYTES .. r·rb + (i + 1)·BYTES ⊆ r·rb..(r+1)·rb
        // (i < nb ≤ rb / BYTES), inside `w` (4·rb ≤ w.len()).
        let b = unsafe {
            let o = base.add(i * K::BYTES);
            [o, o.add(rb), o.add(2 * rb), o.add(3 * rb)]
        };
        // SAFETY: as above.
        let (h, (d, dmin)) = unsafe {
            let h = [K::head(b[0]), K::head(b[1]), K::head(b[2]), K::head(b[3])];
            (h, scales4::<K>(b))
        };
        let mut iv = [vdupq_n_s32(0); 4];
        unroll!(p in [0, 1] {
            let ap = acts(y, p);
            unroll!(r in [0, 1, 2, 3] {
                // SAFETY: as above.
                let wq = unsafe { K::weights(b[r], p) };
                iv[r] = K::part::<DP>(iv[r], &h[r], p, &wq, &ap);
            });
        });
        let bs = bsums(y);
        let mut mn = [vdupq_n_s32(0); 4];
        unroll!(r in [0, 1, 2, 3] {
            mn[r] = K::mins(&h[r], &bs);
        });
        let t = term4::<K>(d, dmin, y.d, lane_sums(iv), lane_sums(mn));
        // sumf += term, lane by lane.
        acc = vaddq_f32(acc, t);
    }
    // SAFETY: `out` holds four f32.
    unsafe { vst1q_f32(out.as_mut_ptr(), acc) };
}

/// The `d` and `dmin` (zeros without mins) of four blocks as f32, block `r` in lane `r`.
///
/// # Safety
/// `b[r]..b[r] + K::BYTES` must be readable.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn scales4<K: KBlock>(b: [*const u8; 4]) -> (float32x4_t, float32x4_t) {
    // One lane load per block (the loads advance a copy of each pointer).
    let at = |r: usize| b[r].wrapping_add(K::D_AT);
    let mut q = [at(0), at(1), at(2), at(3)];
    // SAFETY: `D_AT + 4` (with mins) or `D_AT + 2` ≤ BYTES: readable (caller).
    unsafe {
        if K::MINS {
            // [d0, dmin0, d1, dmin1], [d2, dmin2, d3, dmin3] → d, dmin
            let mut dm = vdupq_n_u32(0);
            dm = ld1_lane_s::<0>(dm, &mut q[0]);
            dm = ld1_lane_s::<1>(dm, &mut q[1]);
            dm = ld1_lane_s::<2>(dm, &mut q[2]);
            dm = ld1_lane_s::<3>(dm, &mut q[3]);
            let dmh = vreinterpretq_u16_u32(dm);
            let (lo, hi) = (f16x8_low_to_f32(dmh), f16x8_high_to_f32(dmh));
            (vuzp1q_f32(lo, hi), vuzp2q_f32(lo, hi))
        } else {
            let mut dd = vdup_n_u16(0);
            dd = ld1_lane_h::<0>(dd, &mut q[0]);
            dd = ld1_lane_h::<1>(dd, &mut q[1]);
            dd = ld1_lane_h::<2>(dd, &mut q[2]);
            dd = ld1_lane_h::<3>(dd, &mut q[3]);
            (f16x4_to_f32(dd), vdupq_n_f32(0.0))
        }
    }
}

/// A block decoded once for the batched kernel: `d`, `dmin`, the head and both parts' weights.
struct Dec<H> {
    d: f32,
    dmin: f32,
    h: H,
    w: [[int8x16_t; 8]; PARTS],
}

/// Rows of `rb` bytes · `cols` columns of `a` into `out` (`[rows][cols]`): each block decoded
/// once for all columns; each column's term is [`row`]'s.
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
            let b = b.as_ptr();
            // SAFETY: `b` is the start of one whole block.
            let x = unsafe {
                let (d, dmin) = scales1::<K>(b);
                Dec {
                    d,
                    dmin,
                    h: K::head(b),
                    w: [K::weights(b, 0), K::weights(b, 1)],
                }
            };
            for (c, sumf) in o.iter_mut().enumerate() {
                let y = &a[c * per + i];
                let mut iv = vdupq_n_s32(0);
                unroll!(p in [0, 1] {
                    iv = K::part::<DP>(iv, &x.h, p, &x.w[p], &acts(y, p));
                });
                let summs = vaddvq_s32(K::mins(&x.h, &bsums(y)));
                *sumf += term1::<K>(x.d, x.dmin, y.d, vaddvq_s32(iv), summs);
            }
        }
    }
}

/// The head of a Q4_K / Q5_K block: the eight scales and mins as bytes ([`k4_scales_mins`]), one
/// register per row (the four-row kernel holds four heads through the block), widened where used.
struct K45Head {
    scm: uint8x16_t,
}

/// The head of a Q4_K / Q5_K block whose 12 bytes of scales and mins are at `sc`.
///
/// # Safety
/// `sc..sc + 12` must be readable.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn k45_head(sc: *const u8) -> K45Head {
    K45Head {
        // SAFETY: the caller's promise.
        scm: unsafe { k4_scales_mins(sc) },
    }
}

/// Part `p` of a Q4_K / Q5_K block (every weight ≤ `maxw`): `acc + s · [Σ w·a]` over its four
/// sub-blocks of 32.
#[inline(always)]
fn k45_part<const DP: bool>(
    maxw: i32,
    acc: int32x4_t,
    h: &K45Head,
    p: usize,
    w: &[int8x16_t; 8],
    a: &[int8x16_t; 8],
) -> int32x4_t {
    let pair = |v: &[int8x16_t; 8], k: usize| [v[2 * k], v[2 * k + 1]];
    let wk = [pair(w, 0), pair(w, 1), pair(w, 2), pair(w, 3)];
    let ak = [pair(a, 0), pair(a, 1), pair(a, 2), pair(a, 3)];
    // SAFETY: NEON is part of the aarch64 baseline.
    unsafe {
        // Part p's four scales as i32.
        let s16 = vmovl_u8(vget_low_u8(h.scm));
        let s = if p == 0 {
            vmovl_u16(vget_low_u16(s16))
        } else {
            vmovl_high_u16(s16)
        };
        vmlaq_s32(acc, sums4::<DP>(maxw, wk, ak), vreinterpretq_s32_u32(s))
    }
}

/// `Σ_k mins[k] · (bsums[2k] + bsums[2k + 1])` in lanes, the pair sums in i32 (`bsums` may be
/// any i16: the scalar sums in i32 too).
#[inline(always)]
fn k45_mins(h: &K45Head, bs: &[int16x8_t; 2]) -> int32x4_t {
    // SAFETY: NEON is part of the aarch64 baseline; register operations only.
    unsafe {
        let m16 = vmovl_high_u8(h.scm);
        let m0 = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(m16)));
        let m1 = vreinterpretq_s32_u32(vmovl_high_u16(m16));
        vmlaq_s32(vmulq_s32(vpaddlq_s16(bs[0]), m0), vpaddlq_s16(bs[1]), m1)
    }
}

/// Part `p` of a Q4_K / Q5_K block's nibbles at `b[qs..qs + 128]`: sub-blocks 4p..4p + 4, the low
/// and high nibbles of 32 bytes each, twice; with Q5_K's fifth bits `qh` (bit 2j, 2j + 1 of byte
/// l: element l of sub-block 2j, 2j + 1) above them.
#[inline(always)]
fn k45_weights<const N: usize>(
    b: Bytes<N>,
    qs: usize,
    qh: Option<[uint8x16_t; 2]>,
    p: usize,
) -> [int8x16_t; 8] {
    // SAFETY: NEON is part of the aarch64 baseline; register operations only.
    unsafe {
        // Bit k of qh moved to bit 4, inserted above the nibble.
        let put = |n: uint8x16_t, half: usize, k: usize| match qh {
            Some(qh) => {
                let up = vshlq_u8(qh[half], vdupq_n_s8(4 - k as i8));
                vreinterpretq_s8_u8(vbslq_u8(vdupq_n_u8(0x10), up, n))
            }
            None => vreinterpretq_s8_u8(n),
        };
        let mut wq = [vdupq_n_s8(0); 8];
        for jj in 0..2 {
            let j = 2 * p + jj;
            let [la, ha] = nibbles(b.ld(qs + 32 * j));
            let [lb, hb] = nibbles(b.ld(qs + 32 * j + 16));
            wq[4 * jj] = put(la, 0, 2 * j);
            wq[4 * jj + 1] = put(lb, 1, 2 * j);
            wq[4 * jj + 2] = put(ha, 0, 2 * j + 1);
            wq[4 * jj + 3] = put(hb, 1, 2 * j + 1);
        }
        wq
    }
}

/// `KBlock::part` as the function `$f` of the family (`k45_part`, `g16_part`) with the weight
/// bound `$maxw`.
macro_rules! part_item {
    ($f:ident, $maxw:expr, $head:ty) => {
        #[inline(always)]
        fn part<const DP: bool>(
            acc: int32x4_t,
            h: &$head,
            p: usize,
            w: &[int8x16_t; 8],
            a: &[int8x16_t; 8],
        ) -> int32x4_t {
            $f::<DP>($maxw, acc, h, p, w, a)
        }
    };
}

/// The `KBlock` items Q4_K and Q5_K share (the same head: `d`, `dmin`, 12 bytes of scales and
/// mins) beyond `BYTES` and `weights`: `part` with the weight bound `$maxw`, and the mins.
macro_rules! k45_items {
    ($maxw:expr) => {
        const D_AT: usize = 0;
        const MINS: bool = true;
        type Head = K45Head;
        #[inline(always)]
        unsafe fn head(b: *const u8) -> K45Head {
            // SAFETY: bytes 4..16 of the block (caller).
            unsafe { k45_head(b.add(4)) }
        }
        part_item!(k45_part, $maxw, K45Head);
        #[inline(always)]
        fn mins(h: &K45Head, bs: &[int16x8_t; 2]) -> int32x4_t {
            k45_mins(h, bs)
        }
    };
}

/// Q4_K: `d`, `dmin` (f16), 12 bytes of scales and mins, 128 bytes of nibbles.
struct Q4K;

impl KBlock for Q4K {
    const BYTES: usize = 144;
    k45_items!(15);
    #[inline(always)]
    unsafe fn weights(b: *const u8, p: usize) -> [int8x16_t; 8] {
        // SAFETY: the block's 144 bytes are readable (caller).
        k45_weights(unsafe { Bytes::<144>::new(b) }, 16, None, p)
    }
}

/// Q5_K: `d`, `dmin` (f16), 12 bytes of scales and mins, 32 bytes of fifth bits, 128 of nibbles.
struct Q5K;

impl KBlock for Q5K {
    const BYTES: usize = 176;
    k45_items!(31);
    #[inline(always)]
    unsafe fn weights(b: *const u8, p: usize) -> [int8x16_t; 8] {
        // SAFETY: the block's 176 bytes are readable (caller).
        let bb = unsafe { Bytes::<176>::new(b) };
        k45_weights(bb, 48, Some([bb.ld(16), bb.ld(32)]), p)
    }
}

/// The scales of a block of sixteen groups of 16 (Q2_K, Q3_K, Q6_K) widened to i32: group
/// 4i + k's in lane k of `s[i]`; Q2_K's mins as i16 (`mn`, zeros for the others).
struct G16Head {
    s: [int32x4_t; 4],
    mn: [int16x8_t; 2],
}

/// Part `p` of a G16 block (groups 8p..8p + 8, every |w| ≤ `maxw` ≤ 63): `acc + Σ_g scale[g] ·
/// Σ w·a` in lanes, exact.
#[inline(always)]
fn g16_part<const DP: bool>(
    maxw: i32,
    acc: int32x4_t,
    h: &G16Head,
    p: usize,
    w: &[int8x16_t; 8],
    a: &[int8x16_t; 8],
) -> int32x4_t {
    let four = |v: &[int8x16_t; 8], i: usize| [v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]];
    // SAFETY: NEON is part of the aarch64 baseline.
    unsafe {
        let g0 = sums4x16::<DP>(maxw, four(w, 0), four(a, 0));
        let g1 = sums4x16::<DP>(maxw, four(w, 1), four(a, 1));
        vmlaq_s32(vmlaq_s32(acc, g0, h.s[2 * p]), g1, h.s[2 * p + 1])
    }
}

/// A G16 type's `KBlock` items beyond `head` and `weights`: `part` with its weight bound, and
/// (unless `with mins`: Q2_K writes its own) no mins.
macro_rules! g16_items {
    ($maxw:expr, with mins) => {
        part_item!(g16_part, $maxw, G16Head);
    };
    ($maxw:expr) => {
        g16_items!($maxw, with mins);
        #[inline(always)]
        fn mins(_: &G16Head, _: &[int16x8_t; 2]) -> int32x4_t {
            // SAFETY: NEON is part of the aarch64 baseline.
            unsafe { vdupq_n_s32(0) }
        }
    };
}

/// Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed scales, `d` (f16).
struct Q6K;

impl KBlock for Q6K {
    const BYTES: usize = 210;
    const D_AT: usize = 208;
    const MINS: bool = false;
    type Head = G16Head;
    #[inline(always)]
    unsafe fn head(b: *const u8) -> G16Head {
        // SAFETY: the block's 210 bytes are readable (caller); NEON is baseline.
        unsafe {
            let bb = Bytes::<210>::new(b);
            let z = vdupq_n_s16(0);
            G16Head {
                s: widen_i8(bb.ld_i8(192)),
                mn: [z, z],
            }
        }
    }
    #[inline(always)]
    unsafe fn weights(b: *const u8, n: usize) -> [int8x16_t; 8] {
        // SAFETY: the block's 210 bytes are readable (caller); NEON is baseline.
        unsafe {
            let bb = Bytes::<210>::new(b);
            let m4 = vdupq_n_u8(0x0f);
            let m30 = vdupq_n_u8(0x30);
            let c32 = vdupq_n_s8(32);
            let at = 64 * n;
            let ql = [bb.ld(at), bb.ld(at + 16), bb.ld(at + 32), bb.ld(at + 48)];
            let qh = [bb.ld(128 + 32 * n), bb.ld(128 + 32 * n + 16)];
            // value = (low nibble | two high bits << 4) - 32; vector k lines up with
            // y.qs[128n + 16k..]: ql[0..32] low, ql[32..64] low, ql[0..32] high, ql[32..64] high.
            let v = |lo: uint8x16_t, hi: uint8x16_t| {
                vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(hi, m30))), c32)
            };
            let mut wq = [vdupq_n_s8(0); 8];
            for k in 0..2 {
                wq[k] = v(vandq_u8(ql[k], m4), vshlq_n_u8::<4>(qh[k]));
                wq[2 + k] = v(vandq_u8(ql[k + 2], m4), vshlq_n_u8::<2>(qh[k]));
                wq[4 + k] = v(vshrq_n_u8::<4>(ql[k]), qh[k]);
                wq[6 + k] = v(vshrq_n_u8::<4>(ql[k + 2]), vshrq_n_u8::<2>(qh[k]));
            }
            wq
        }
    }
    g16_items!(32);
}

/// The sixteen signed 6-bit scales of a Q3_K block (as [`crate::quant::scalar::q3k_scales`]).
///
/// # Safety
/// `sc..sc + 12` must be readable.
#[inline(always)]
unsafe fn q3k_scales(sc: *const u8) -> int8x16_t {
    // SAFETY: the caller guarantees 12 readable bytes.
    let (a0, a1, a2) = unsafe { (rd_u32(sc), rd_u32(sc.add(4)), rd_u32(sc.add(8))) };
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
fn planes2<const N: usize>(b: Bytes<N>, at: usize, i: usize) -> [(uint8x16_t, usize); 4] {
    let (half, pair) = (i / 2, i % 2);
    let q = [b.ld(at + 32 * half), b.ld(at + 32 * half + 16)];
    let mut out = [(q[0], 0); 4];
    for (t, o) in out.iter_mut().enumerate() {
        let sh = 2 * pair + t / 2;
        // SAFETY: NEON is part of the aarch64 baseline; register operations only.
        let v = unsafe { vandq_u8(vshlq_u8(q[t % 2], vdupq_n_s8(-2 * sh as i8)), vdupq_n_u8(3)) };
        *o = (v, 4 * half + sh);
    }
    out
}

/// Q3_K: 32 bytes of high-bit masks, 64 of 2-bit pairs, 12 of scales, `d` (f16).
struct Q3K;

impl KBlock for Q3K {
    const BYTES: usize = 110;
    const D_AT: usize = 108;
    const MINS: bool = false;
    type Head = G16Head;
    #[inline(always)]
    unsafe fn head(b: *const u8) -> G16Head {
        // SAFETY: bytes 96..108 of the block (caller); NEON is baseline.
        unsafe {
            let z = vdupq_n_s16(0);
            G16Head {
                s: widen_i8(q3k_scales(b.add(96))),
                mn: [z, z],
            }
        }
    }
    #[inline(always)]
    unsafe fn weights(b: *const u8, p: usize) -> [int8x16_t; 8] {
        // SAFETY: the block's 110 bytes are readable (caller).
        let bb = unsafe { Bytes::<110>::new(b) };
        let hm = [bb.ld(0), bb.ld(16)];
        // SAFETY: NEON is part of the aarch64 baseline; register operations only.
        let mut wq = [unsafe { vreinterpretq_s8_u8(hm[0]) }; 8];
        for ii in 0..2 {
            let planes = planes2(bb, 32, 2 * p + ii);
            for (t, (low, k)) in planes.into_iter().enumerate() {
                // SAFETY: NEON is part of the aarch64 baseline; register operations only.
                wq[4 * ii + t] = unsafe {
                    // Minus 4 where mask bit k is clear.
                    let hb = vshlq_u8(hm[t % 2], vdupq_n_s8(2 - k as i8));
                    let m4 = vbicq_u8(vdupq_n_u8(4), hb);
                    vsubq_s8(vreinterpretq_s8_u8(low), vreinterpretq_s8_u8(m4))
                };
            }
        }
        wq
    }
    g16_items!(4);
}

/// Q2_K: 16 bytes of scales (low nibble) and mins (high nibble), 64 of 2-bit values, `d`, `dmin`.
struct Q2K;

impl KBlock for Q2K {
    const BYTES: usize = 84;
    const D_AT: usize = 80;
    const MINS: bool = true;
    type Head = G16Head;
    #[inline(always)]
    unsafe fn head(b: *const u8) -> G16Head {
        // SAFETY: the block's 84 bytes are readable (caller); NEON is baseline.
        unsafe {
            let sc = Bytes::<84>::new(b).ld(0);
            let m = vshrq_n_u8::<4>(sc);
            G16Head {
                s: widen_u8(vandq_u8(sc, vdupq_n_u8(0x0f))),
                mn: [
                    vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m))),
                    vreinterpretq_s16_u16(vmovl_high_u8(m)),
                ],
            }
        }
    }
    #[inline(always)]
    unsafe fn weights(b: *const u8, p: usize) -> [int8x16_t; 8] {
        // SAFETY: the block's 84 bytes are readable (caller).
        let bb = unsafe { Bytes::<84>::new(b) };
        let (a, b2) = (planes2(bb, 16, 2 * p), planes2(bb, 16, 2 * p + 1));
        // SAFETY: NEON is part of the aarch64 baseline; register operations only.
        let s = |v: (uint8x16_t, usize)| unsafe { vreinterpretq_s8_u8(v.0) };
        [
            s(a[0]),
            s(a[1]),
            s(a[2]),
            s(a[3]),
            s(b2[0]),
            s(b2[1]),
            s(b2[2]),
            s(b2[3]),
        ]
    }
    g16_items!(3, with mins);
    #[inline(always)]
    fn mins(h: &G16Head, bs: &[int16x8_t; 2]) -> int32x4_t {
        // summs = Σ bsums[g] · (sc[g] >> 4), exact in i32 lanes.
        // SAFETY: NEON is part of the aarch64 baseline; register operations only.
        unsafe {
            let [mn, mn2] = h.mn;
            let t = vmull_s16(vget_low_s16(bs[0]), vget_low_s16(mn));
            let t = vmlal_high_s16(t, bs[0], mn);
            let t = vmlal_s16(t, vget_low_s16(bs[1]), vget_low_s16(mn2));
            vmlal_high_s16(t, bs[1], mn2)
        }
    }
}

macro_rules! entries {
    ($(#[$doc:meta])* $name:ident, $name_dp:ident, $x4:ident, $x4_dp:ident, $mat:ident, $mat_dp:ident,
     $k:ident) => {
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
        /// Four rows of `rb` bytes, consecutive in `w`, at once: `out[r]` equals the one-row
        /// kernel on row `r`.
        pub fn $x4(w: &[u8], rb: usize, a: &[BlockQ8K], out: &mut [f32; 4]) {
            // SAFETY: NEON is part of every aarch64 target this module is built for.
            unsafe { row4::<$k, false>(w, rb, a, out) }
        }
        $(#[$doc])*
        /// Four rows at once, SDOT flavour (`Kernels::NEON_DOTPROD` only).
        pub fn $x4_dp(w: &[u8], rb: usize, a: &[BlockQ8K], out: &mut [f32; 4]) {
            // SAFETY: as above (SDOT itself is an `asm!` instruction, see `sdot`).
            unsafe { row4::<$k, true>(w, rb, a, out) }
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
    vec_dot_q2_k_q8_k, vec_dot_q2_k_q8_k_dp, vec_dot_q2_k_q8_k_x4, vec_dot_q2_k_q8_k_x4_dp,
    mat_q2_k_q8_k, mat_q2_k_q8_k_dp, Q2K
);
entries!(
    /// Q3_K weights · Q8_K activations (twin of `scalar::vec_dot_q3_k_q8_k`).
    vec_dot_q3_k_q8_k, vec_dot_q3_k_q8_k_dp, vec_dot_q3_k_q8_k_x4, vec_dot_q3_k_q8_k_x4_dp,
    mat_q3_k_q8_k, mat_q3_k_q8_k_dp, Q3K
);
entries!(
    /// Q4_K weights · Q8_K activations (twin of `scalar::vec_dot_q4_k_q8_k`).
    vec_dot_q4_k_q8_k, vec_dot_q4_k_q8_k_dp, vec_dot_q4_k_q8_k_x4, vec_dot_q4_k_q8_k_x4_dp,
    mat_q4_k_q8_k, mat_q4_k_q8_k_dp, Q4K
);
entries!(
    /// Q5_K weights · Q8_K activations (twin of `scalar::vec_dot_q5_k_q8_k`).
    vec_dot_q5_k_q8_k, vec_dot_q5_k_q8_k_dp, vec_dot_q5_k_q8_k_x4, vec_dot_q5_k_q8_k_x4_dp,
    mat_q5_k_q8_k, mat_q5_k_q8_k_dp, Q5K
);
entries!(
    /// Q6_K weights · Q8_K activations (twin of `scalar::vec_dot_q6_k_q8_k`).
    vec_dot_q6_k_q8_k, vec_dot_q6_k_q8_k_dp, vec_dot_q6_k_q8_k_x4, vec_dot_q6_k_q8_k_x4_dp,
    mat_q6_k_q8_k, mat_q6_k_q8_k_dp, Q6K
);
