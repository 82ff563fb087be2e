//! 32-wide weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) · Q8_0 / Q8_1 activations.
//!
//! Per block the scalar twin computes an exact integer `sumi`, then, in this order,
//! Q4_0, Q8_0, IQ4_NL: `sumf += sumi as f32 * (d * y.d)`; Q5_0: `sumf += (d * y.d) * sumi as f32` (the same
//! bits: IEEE multiplication commutes); Q4_1, Q5_1: `sumf += (d * y.d) * sumi as f32 + m * y.s`.
//! The four-row kernels keep row `r`'s `sumf` in lane `r`: every block's float work is one vector
//! operation per scalar operation, and the activations are loaded once for four rows. Their
//! matvec loop ([`pipeline`]) is written for in-order cores (Cortex-A53, A55; measured with
//! llvm-mca, `cargo xtask bench --only mca`): each step loads one block of the four rows and adds
//! the term of the block before (software pipelining, terms still in block order), the four f16
//! scales are one LDR and three LD1 single-lane loads for one FCVTL, and loads are `asm!` LDRs at
//! constant offsets (no LDP pairs, which these cores issue slower than two LDRs, and no byte loads
//! for the f16 and `qh` fields, which the compiler emits under strict alignment). The one-row
//! kernels run the same loop with four consecutive blocks of the row in the places of the four
//! rows, each against its own activation block, and add the four terms to `sumf` one after
//! another; with SDOT, Q8_0 and Q5_0 run a step of the same shape written out in one `asm!`
//! block and scheduled by hand ([`q8_dp_step`], [`q5_dp_step`]). (A matvec over four rows or
//! more never reaches them: see `RowKernels::rows`.)
//! Q8_0 products are summed two to an i16 lane before widening, which holds because the
//! activations never hold -128 (see `BlockQ8_0`).

use super::{
    f16_le, f16x4_to_f32, f16x8_high_to_f32, f16x8_low_to_f32, interleave4, ld1_lane_h_at,
    ld1_lane_s_at, ld_i8, ld_u8, nibbles, prod_i16, sum1, sums4, sums4_lanes,
};
use crate::quant::act::{Act32 as Act, BlockQ8_0, BlockQ8_1};
use crate::quant::scalar::IQ4_NL_VALUES;
use core::arch::aarch64::*;
use core::arch::asm;

/// A 32-element weight block format.
trait Fmt {
    /// Bytes per block.
    const BYTES: usize;
    /// Bound on |w| of the decoded weights (how long products may be summed in i16 lanes).
    const MAXW: i32;
    /// The block stores a min `m` after its scale `d` (Q4_1, Q5_1, paired with Q8_1).
    const MIN: bool;
    /// The step of the one-row SDOT kernel ([`dot1`] with `DP`): the four-row loop's, or one
    /// scheduled by hand.
    const ONE_DP: OneDp = OneDp::Pipeline;
    /// The 32 weights of the `K`th block after the one at `p` as int8: elements 0..16 and 16..32.
    ///
    /// # Safety
    /// `p + K·BYTES..p + (K + 1)·BYTES` must be readable.
    unsafe fn decode<const K: usize>(p: *const u8) -> [int8x16_t; 2];
}

#[target_feature(enable = "neon")]
#[inline]
fn ld_act<A: Act>(y: &A) -> [int8x16_t; 2] {
    let q = y.qs().as_ptr() as *const u8;
    // SAFETY: `qs` holds 32 bytes.
    unsafe { [ld_q::<Q8_0, 0, 0>(q), ld_q::<Q8_0, 16, 0>(q)] }
}

/// The quants of the activation block `K` after the one at `y`, by `asm!` loads at constant
/// offsets from `y` (one pointer for the blocks of a step).
///
/// # Safety
/// Block `K` after `y` must be readable.
#[inline(always)]
unsafe fn ld_act_at<A: Act, const K: usize>(y: *const A) -> [int8x16_t; 2] {
    let (lo, hi): (int8x16_t, int8x16_t);
    // SAFETY: the 32 quants of block `K` after `y` are readable (caller); an LDR needs no
    // alignment on normal memory.
    unsafe {
        asm!(
            "ldr {lo:q}, [{y}, #{a}]",
            "ldr {hi:q}, [{y}, #{b}]",
            lo = out(vreg) lo,
            hi = out(vreg) hi,
            y = in(reg) y,
            a = const K * core::mem::size_of::<A>() + A::QS_AT,
            b = const K * core::mem::size_of::<A>() + A::QS_AT + 16,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    [lo, hi]
}

/// [`ld_act`] through the load intrinsics (the batched tiles: LLVM counts an `asm!` load as
/// costly and would no longer unroll their loop over the columns).
#[target_feature(enable = "neon")]
#[inline]
fn ld_act_tile<A: Act>(y: &A) -> [int8x16_t; 2] {
    let q = y.qs().as_ptr();
    // SAFETY: `qs` holds 32 bytes.
    unsafe { [ld_i8(q), ld_i8(q.add(16))] }
}

/// [`q5_high_mask`]'s TBL indices: element `e` takes byte `e / 8` of `qh`.
const Q5_IDX: [u8; 32] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
];
/// [`q5_high_mask`]'s bit of each element in its byte.
const Q5_BIT: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];

/// The fifth bits of a Q5 block as 0xff (bit set) / 0x00 bytes for elements 0..16 and 16..32:
/// element `e` uses bit `e` of `qh` (lane 0 of `qh`; the other lanes are not read). Given `!qh`,
/// 0xff marks a clear bit.
#[inline(always)]
fn q5_high_mask(qh: uint32x4_t) -> [uint8x16_t; 2] {
    // SAFETY: the constant tables hold 32 and 16 bytes; NEON is part of the aarch64 baseline.
    unsafe {
        let h = vreinterpretq_u8_u32(qh);
        let bit = ld_u8(Q5_BIT.as_ptr());
        [
            vtstq_u8(vqtbl1q_u8(h, ld_u8(Q5_IDX.as_ptr())), bit),
            vtstq_u8(vqtbl1q_u8(h, ld_u8(Q5_IDX.as_ptr().add(16))), bit),
        ]
    }
}

/// The formats of `d` (f16) and 16 bytes of nibbles: Q4_0 (weight = nibble - 8) and, with
/// `NL`, IQ4_NL (weight = `IQ4_NL_VALUES[nibble]`, a TBL lookup).
struct Nib4<const NL: bool>;
impl<const NL: bool> Fmt for Nib4<NL> {
    const BYTES: usize = 18;
    const MAXW: i32 = if NL { 127 } else { 8 };
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn decode<const K: usize>(p: *const u8) -> [int8x16_t; 2] {
        // SAFETY: bytes 2..18 of the `K`th block after `p` are readable (caller), the table holds 16 bytes; NEON
        // is baseline.
        unsafe {
            let [lo, hi] = nibbles(vreinterpretq_u8_s8(ld_q::<Self, 2, K>(p)));
            if NL {
                let values = ld_i8(IQ4_NL_VALUES.as_ptr());
                return [vqtbl1q_s8(values, lo), vqtbl1q_s8(values, hi)];
            }
            let e = vdupq_n_s8(8);
            [
                vsubq_s8(vreinterpretq_s8_u8(lo), e),
                vsubq_s8(vreinterpretq_s8_u8(hi), e),
            ]
        }
    }
}
type Q4_0 = Nib4<false>;
type Iq4Nl = Nib4<true>;

/// Q4_1: `d`, `m` (f16), 16 bytes of nibbles; weight = nibble.
struct Q4_1;
impl Fmt for Q4_1 {
    const BYTES: usize = 20;
    const MAXW: i32 = 15;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn decode<const K: usize>(p: *const u8) -> [int8x16_t; 2] {
        // SAFETY: bytes 4..20 of the `K`th block after `p` are readable (caller); NEON is baseline.
        unsafe {
            let [lo, hi] = nibbles(vreinterpretq_u8_s8(ld_q::<Self, 4, K>(p)));
            [vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi)]
        }
    }
}

/// Q5_0: `d` (f16), `qh` (u32), 16 bytes of nibbles; weight = (nibble | bit << 4) - 16.
struct Q5_0;
impl Fmt for Q5_0 {
    const BYTES: usize = 22;
    const MAXW: i32 = 16;
    const MIN: bool = false;
    const ONE_DP: OneDp = OneDp::Q5;
    #[inline(always)]
    unsafe fn decode<const K: usize>(p: *const u8) -> [int8x16_t; 2] {
        // SAFETY: bytes 2..22 of the `K`th block after `p` are readable (caller); NEON is baseline.
        unsafe {
            // 0xff where the fifth bit is clear: the bits of `!qh`.
            let qh = vmvnq_u32(ld_s::<Self, 2, K>(p));
            let [cl, ch] = q5_high_mask(qh);
            let q = vreinterpretq_u8_s8(ld_q::<Self, 6, K>(p));
            // (n | b << 4) - 16 is n when b is set and n - 16 = n | 0xf0 (two's complement) if
            // not: the high nibble of the clear mask over the low nibble of `q` (BSL), and over
            // `q >> 4` (SRI, shift right and insert), one instruction each.
            [
                vreinterpretq_s8_u8(vbslq_u8(vdupq_n_u8(0xf0), cl, q)),
                vreinterpretq_s8_u8(vsriq_n_u8::<4>(ch, q)),
            ]
        }
    }
}

/// Q5_1: `d`, `m` (f16), `qh` (u32), 16 bytes of nibbles; weight = nibble | bit << 4.
struct Q5_1;
impl Fmt for Q5_1 {
    const BYTES: usize = 24;
    const MAXW: i32 = 31;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn decode<const K: usize>(p: *const u8) -> [int8x16_t; 2] {
        // SAFETY: bytes 4..24 of the `K`th block after `p` are readable (caller); NEON is baseline.
        unsafe {
            let [hl, hh] = q5_high_mask(ld_s::<Self, 4, K>(p));
            let [lo, hi] = nibbles(vreinterpretq_u8_s8(ld_q::<Self, 8, K>(p)));
            let b4 = vdupq_n_u8(0x10);
            [
                vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(hl, b4))),
                vreinterpretq_s8_u8(vorrq_u8(hi, vandq_u8(hh, b4))),
            ]
        }
    }
}

/// Q8_0: `d` (f16), 32 int8 weights.
struct Q8_0;
impl Fmt for Q8_0 {
    const BYTES: usize = 34;
    const MAXW: i32 = 128;
    const MIN: bool = false;
    const ONE_DP: OneDp = OneDp::Q8;
    #[inline(always)]
    unsafe fn decode<const K: usize>(p: *const u8) -> [int8x16_t; 2] {
        // SAFETY: bytes 2..34 of the `K`th block after `p` are readable (caller).
        unsafe { [ld_q::<Self, 2, K>(p), ld_q::<Self, 18, K>(p)] }
    }
}

/// `[y.d, y.s]` of the activation block `K` after the one at `y` (one 8-byte load; `s` follows
/// `d` in Q8_1, the only activation paired with a min).
///
/// # Safety
/// Block `K` after `y` must be readable.
#[inline(always)]
unsafe fn ld_ds<A: Act, const K: usize>(y: *const A) -> float32x2_t {
    let v: float32x2_t;
    // SAFETY: bytes D_AT..D_AT + 8 of block `K` after `y` are readable (caller); an LDR needs no
    // alignment on normal memory.
    unsafe {
        asm!(
            "ldr {v:d}, [{y}, #{o}]",
            v = out(vreg) v,
            y = in(reg) y,
            o = const K * core::mem::size_of::<A>() + A::D_AT,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    v
}

/// Σ w·a over 16 pairs as eight i16 lanes, two products each (one SMULL, one SMLAL2): exact for
/// any int8 `w` when every |a| ≤ 127 (2 · 128 · 127 < 2^15), which every Q8_0 and Q8_1 block
/// holds (see `BlockQ8_0`), and for |w| ≤ 127 whatever `a` is.
#[inline(always)]
fn half(w: int8x16_t, a: int8x16_t) -> int16x8_t {
    // SAFETY: NEON is part of the aarch64 baseline; register operations only.
    unsafe { vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(a)), w, a) }
}

/// Σ w·a over the 32 pairs of a block as four i32 lanes: [`half`]'s two products per i16 lane,
/// then widened pairwise (six instructions, against eight when every product is widened alone);
/// exact under [`half`]'s bound, which the Q8_0 and Q8_1 activations meet.
#[inline(always)]
fn prod_pairs(w: [int8x16_t; 2], a: [int8x16_t; 2]) -> int32x4_t {
    // SAFETY: NEON is part of the aarch64 baseline; register operations only.
    unsafe { vpadalq_s16(vpaddlq_s16(half(w[0], a[0])), half(w[1], a[1])) }
}

/// One row: `w` (whole blocks) · `a`, over as many blocks as both hold. Four blocks per step run
/// through the four-row tiles' pipelined loop ([`pipeline`]: the blocks take the places of the
/// rows, each against its own activation block), and their four terms are added to `sumf` in
/// block order ([`add_lanes`]); the last `nb % 4` blocks go one by one. With SDOT, Q8_0 and Q5_0
/// run their hand-scheduled steps instead ([`dp_run`]), in the same float order.
/// (`inline(always)`, which `#[target_feature]` functions cannot have: each entry point keeps its
/// own loop.)
#[inline(always)]
fn dot1<F: Fmt, A: Act, const DP: bool>(w: &[u8], a: &[A]) -> f32 {
    let nb = (w.len() / F::BYTES).min(a.len());
    let steps = nb / 4;
    let mut sumf = 0.0f32;
    let (x, y) = (w.as_ptr(), a.as_ptr());
    if steps > 0 && DP && F::ONE_DP != OneDp::Pipeline {
        // SAFETY: `w` and `a` hold 4·steps ≤ nb blocks (of Q8_0, Q5_0 for `ONE_DP` Q8, Q5);
        // reached only through the dot-product kernel set.
        sumf = unsafe {
            match F::ONE_DP {
                OneDp::Q8 => dp_run(x, y, steps, |x, y, st| q8_dp_step(x, y, st)),
                _ => {
                    let c = q5_consts();
                    dp_run(x, y, steps, |x, y, st| q5_dp_step(x, y, st, c))
                }
            }
        };
    } else if steps > 0 {
        // SAFETY: `w` and `a` hold 4·steps ≤ nb blocks.
        unsafe {
            pipeline::<F, A, DP, true>([w.as_ptr(); 4], a.as_ptr(), steps, |t| {
                sumf = add_lanes(sumf, t);
            })
        };
    }
    let tail = w[4 * steps * F::BYTES..].chunks_exact(F::BYTES);
    for (b, y) in tail.zip(&a[4 * steps..nb]) {
        // SAFETY: `b` is one whole block; NEON is part of the aarch64 baseline.
        let sumi = unsafe { sum1::<DP>(F::MAXW, F::decode::<0>(b.as_ptr()), ld_act(y)) };
        let d = f16_le(b, 0);
        if F::MIN {
            let m = f16_le(b, 2);
            sumf += (d * y.d()) * sumi as f32 + m * y.s();
        } else {
            sumf += sumi as f32 * (d * y.d());
        }
    }
    sumf
}

/// [`dot1`] out of line, for [`dot4`]'s path that is never taken (inlined, its loop would change
/// how the compiler lays out the four-row loop).
#[inline(never)]
fn dot1_cold<F: Fmt, A: Act, const DP: bool>(w: &[u8], a: &[A]) -> f32 {
    dot1::<F, A, DP>(w, a)
}

/// The step [`dot1`] runs with SDOT.
#[derive(PartialEq, Eq)]
enum OneDp {
    /// The four-row loop's ([`pipeline`]), four blocks in the rows' places.
    Pipeline,
    /// [`q8_dp_step`] (Q8_0 weights).
    Q8,
    /// [`q5_dp_step`] (Q5_0 weights).
    Q5,
}

/// What a hand-scheduled step ([`q8_dp_step`], [`q5_dp_step`]) carries to the next: its four
/// blocks' SDOT accumulators (block k's in `s[k]`), their `d · y.d` and the running `sumf`.
struct DpRun {
    s: [int32x4_t; 4],
    dy: float32x4_t,
    sumf: f32,
}

/// [`dot1`]'s four-block steps with SDOT: `steps` calls of `step` (each adds the step before's
/// terms to `sumf`), then the last step's terms. The first step adds `0 · 0` four times to
/// `sumf = 0`, which leaves it +0, the scalar sum's start.
///
/// # Safety
/// `x` and `y` must hold `4 · steps` blocks of `step`'s formats; SDOT must be available.
#[inline(always)]
unsafe fn dp_run<A: Act>(
    mut x: *const u8,
    mut y: *const A,
    steps: usize,
    mut step: impl FnMut(&mut *const u8, &mut *const A, &mut DpRun),
) -> f32 {
    // SAFETY: NEON is part of the aarch64 baseline; the blocks are readable (caller).
    unsafe {
        let mut st = DpRun {
            s: [vdupq_n_s32(0); 4],
            dy: vdupq_n_f32(0.0),
            sumf: 0.0,
        };
        for _ in 0..steps {
            step(&mut x, &mut y, &mut st);
        }
        let [s0, s1, s2, s3] = st.s.map(|s| vreinterpretq_f32_s32(s));
        add_lanes(st.sumf, term::<Q8_0, true>([s0, s1, s2, s3, st.dy, st.dy]))
    }
}

/// The `asm!` of a hand-scheduled step ([`q8_dp_step`], [`q5_dp_step`]) on weight format `$f`
/// and activations `$a`: `.arch_extension dotprod`, the template lines, then the operands both
/// have (the pointers `$x`, `$y`, the [`DpRun`] `$st` as `s0`..`s3`, `dy`, `sumf`; the scratch
/// `p`, `q`, `h0`..`h3`, `d0`..`d3`; the offsets of blocks 1..4's `d` (`wd1`..`wd3`), of the
/// activation blocks' `d` and quants (`yd0`.., `yq0`..), and the pointers' steps `wstep`,
/// `ystep`), then the step's own (given before the template).
macro_rules! dp_asm {
    ($f:ty, $a:ty, $x:ident, $y:ident, $st:ident, {$($own:tt)*}, [$($line:literal),* $(,)?]) => {{
        let [s0, s1, s2, s3] = &mut $st.s;
        // SAFETY: the loads read the four blocks at `x` and at `y` (readable: the step's caller;
        // an LDR needs no alignment on normal memory), the rest are register operations and two
        // ADDs; no flags.
        unsafe {
            asm!(
                ".arch_extension dotprod",
                $($line,)*
                x = inout(reg) *$x,
                y = inout(reg) *$y,
                s0 = inout(vreg) *s0,
                s1 = inout(vreg) *s1,
                s2 = inout(vreg) *s2,
                s3 = inout(vreg) *s3,
                dy = inout(vreg) $st.dy,
                sumf = inout(vreg) $st.sumf,
                p = out(vreg) _,
                q = out(vreg) _,
                h0 = out(vreg) _,
                h1 = out(vreg) _,
                h2 = out(vreg) _,
                h3 = out(vreg) _,
                d0 = out(vreg) _,
                d1 = out(vreg) _,
                d2 = out(vreg) _,
                d3 = out(vreg) _,
                wd1 = const <$f>::BYTES,
                wd2 = const 2 * <$f>::BYTES,
                wd3 = const 3 * <$f>::BYTES,
                yd0 = const <$a>::D_AT,
                yd1 = const <$a>::D_AT + core::mem::size_of::<$a>(),
                yd2 = const <$a>::D_AT + 2 * core::mem::size_of::<$a>(),
                yd3 = const <$a>::D_AT + 3 * core::mem::size_of::<$a>(),
                yq0 = const <$a>::QS_AT,
                yq1 = const <$a>::QS_AT + core::mem::size_of::<$a>(),
                yq2 = const <$a>::QS_AT + 2 * core::mem::size_of::<$a>(),
                yq3 = const <$a>::QS_AT + 3 * core::mem::size_of::<$a>(),
                wstep = const 4 * <$f>::BYTES,
                ystep = const 4 * core::mem::size_of::<$a>(),
                $($own)*
                options(pure, readonly, nostack, preserves_flags)
            )
        }
    }};
}

/// One step of Q8_0's one-row SDOT loop, scheduled by hand for the in-order cores (Cortex-A55;
/// the compiler gathers the loads first and the SDOTs last, and each stalls on the one
/// before): the step before's four terms (`sumi · (d · y.d)`, the SDOT accumulators reduced
/// by ADDPs) are added to `sumf` lane by lane, in block order, between the loads and SDOTs of
/// blocks 0..4 at `x` (Q8_0) · blocks 0..4 at `y`, and the new `d · y.d` comes last. Each
/// load is paired with a NEON instruction after it (one that ends no earlier, which the cores
/// issue beside it) and used three cycles or more after it; the accumulators are zeroed by
/// 64-bit MOVIs (half the issue of a 128-bit one). Both pointers move on by four blocks.
///
/// # Safety
/// Four Q8_0 blocks at `x` and four activation blocks at `y` must be readable; SDOT must be
/// available.
#[inline(always)]
unsafe fn q8_dp_step<A: Act>(x: &mut *const u8, y: &mut *const A, st: &mut DpRun) {
    dp_asm!(
        Q8_0, A, x, y, st,
        {
            // Scratch beside `dp_asm!`'s (of which `q`, `h2`, `h3` come to hold lanes of the
            // terms, `d1`, `d3` block 3's second halves): the quants.
            w0 = out(vreg) _, w1 = out(vreg) _, w2 = out(vreg) _, w3 = out(vreg) _,
            w4 = out(vreg) _, w5 = out(vreg) _, w6 = out(vreg) _, a0 = out(vreg) _,
            a1 = out(vreg) _, a2 = out(vreg) _, a3 = out(vreg) _, a4 = out(vreg) _,
            a5 = out(vreg) _, a6 = out(vreg) _, wq0 = const 2, wq1 = const 2 + Q8_0::BYTES,
            wq2 = const 2 + 2 * Q8_0::BYTES, wq3 = const 2 + 3 * Q8_0::BYTES,
        },
        [
            "ldr {h0:h}, [{x}]",
            "addp {p:v}.4s, {s0:v}.4s, {s1:v}.4s",
            "ldr {h1:h}, [{x}, #{wd1}]",
            "addp {q:v}.4s, {s2:v}.4s, {s3:v}.4s",
            "ldr {h2:h}, [{x}, #{wd2}]",
            "movi {s0:d}, #0",
            "ldr {h3:h}, [{x}, #{wd3}]",
            "movi {s1:d}, #0",
            "ldr {d0:s}, [{y}, #{yd0}]",
            "addp {p:v}.4s, {p:v}.4s, {q:v}.4s",
            "ldr {d1:s}, [{y}, #{yd1}]",
            "movi {s2:d}, #0",
            "ldr {d2:s}, [{y}, #{yd2}]",
            "zip1 {h0:v}.4h, {h0:v}.4h, {h1:v}.4h",
            "ldr {d3:s}, [{y}, #{yd3}]",
            "scvtf {p:v}.4s, {p:v}.4s",
            "ldr {w0:q}, [{x}, #{wq0}]",
            "zip1 {h1:v}.4h, {h2:v}.4h, {h3:v}.4h",
            "ldr {a0:q}, [{y}, #{yq0}]",
            "movi {s3:d}, #0",
            "ldr {w2:q}, [{x}, #{wq1}]",
            "zip1 {d0:v}.2s, {d0:v}.2s, {d1:v}.2s",
            "ldr {a2:q}, [{y}, #{yq1}]",
            "fmul {p:v}.4s, {p:v}.4s, {dy:v}.4s",
            "ldr {w4:q}, [{x}, #{wq2}]",
            "sdot {s0:v}.4s, {w0:v}.16b, {a0:v}.16b",
            "ldr {a4:q}, [{y}, #{yq2}]",
            "zip1 {d2:v}.2s, {d2:v}.2s, {d3:v}.2s",
            "ldr {w6:q}, [{x}, #{wq3}]",
            "sdot {s1:v}.4s, {w2:v}.16b, {a2:v}.16b",
            "ldr {a6:q}, [{y}, #{yq3}]",
            "fadd {sumf:s}, {sumf:s}, {p:s}",
            "ldr {w1:q}, [{x}, #{wq0} + 16]",
            "mov {q:s}, {p:v}.s[1]",
            "ldr {a1:q}, [{y}, #{yq0} + 16]",
            "sdot {s2:v}.4s, {w4:v}.16b, {a4:v}.16b",
            "ldr {w3:q}, [{x}, #{wq1} + 16]",
            "sdot {s3:v}.4s, {w6:v}.16b, {a6:v}.16b",
            "ldr {a3:q}, [{y}, #{yq1} + 16]",
            "mov {h2:s}, {p:v}.s[2]",
            "ldr {w5:q}, [{x}, #{wq2} + 16]",
            "fadd {sumf:s}, {sumf:s}, {q:s}",
            "ldr {a5:q}, [{y}, #{yq2} + 16]",
            "sdot {s0:v}.4s, {w1:v}.16b, {a1:v}.16b",
            "ldr {d3:q}, [{x}, #{wq3} + 16]",
            "zip1 {h0:v}.2s, {h0:v}.2s, {h1:v}.2s",
            "ldr {d1:q}, [{y}, #{yq3} + 16]",
            "sdot {s1:v}.4s, {w3:v}.16b, {a3:v}.16b",
            "add {x}, {x}, #{wstep}",
            "mov {h3:s}, {p:v}.s[3]",
            "add {y}, {y}, #{ystep}",
            "fadd {sumf:s}, {sumf:s}, {h2:s}",
            "sdot {s2:v}.4s, {w5:v}.16b, {a5:v}.16b",
            "zip1 {d0:v}.2d, {d0:v}.2d, {d2:v}.2d",
            "sdot {s3:v}.4s, {d3:v}.16b, {d1:v}.16b",
            "fcvtl {h0:v}.4s, {h0:v}.4h",
            "fadd {sumf:s}, {sumf:s}, {h3:s}",
            "fmul {dy:v}.4s, {h0:v}.4s, {d0:v}.4s",
        ]
    );
}

/// The constant vectors of [`q5_dp_step`]: [`Q5_IDX`]'s two halves, [`Q5_BIT`], 0xf0 bytes.
#[inline(always)]
fn q5_consts() -> [uint8x16_t; 4] {
    // SAFETY: the tables hold 32 and 16 bytes; NEON is part of the aarch64 baseline.
    unsafe {
        [
            ld_u8(Q5_IDX.as_ptr()),
            ld_u8(Q5_IDX.as_ptr().add(16)),
            ld_u8(Q5_BIT.as_ptr()),
            vdupq_n_u8(0xf0),
        ]
    }
}

/// [`q8_dp_step`] for Q5_0 weights (`c` from [`q5_consts`]): the same fold of the step before,
/// and each block decoded as [`Q5_0::decode`] does (the fifth bits by TBL and CMTST of `!qh`,
/// then BIF and SRI), blocks 0 and 2 in one set of registers, 1 and 3 in another; `!qh` by a
/// 64-bit MVN (only its first four bytes are read).
///
/// # Safety
/// Four Q5_0 blocks at `x` and four activation blocks at `y` must be readable; SDOT must be
/// available.
#[inline(always)]
unsafe fn q5_dp_step<A: Act>(
    x: &mut *const u8,
    y: &mut *const A,
    st: &mut DpRun,
    [i0, i1, bit, f0]: [uint8x16_t; 4],
) {
    dp_asm!(
        Q5_0, A, x, y, st,
        {
            i0 = in(vreg) i0, i1 = in(vreg) i1, bit = in(vreg) bit, f0 = in(vreg) f0,
            // Scratch beside `dp_asm!`'s (of which `q`, `h2`, `h3` come to hold lanes of the
            // terms): blocks 0 and 2 (`qh`, nibbles, the two halves of the weights and of the
            // activations: `ha`, `va`, `la`, `ua`, `aa0`, `aa1`), blocks 1 and 3.
            ha = out(vreg) _, va = out(vreg) _, la = out(vreg) _, ua = out(vreg) _,
            aa0 = out(vreg) _, aa1 = out(vreg) _, hb = out(vreg) _, vb = out(vreg) _,
            lb = out(vreg) _, ub = out(vreg) _, ab0 = out(vreg) _, ab1 = out(vreg) _,
            qh0 = const 2, qh1 = const 2 + Q5_0::BYTES, qh2 = const 2 + 2 * Q5_0::BYTES,
            qh3 = const 2 + 3 * Q5_0::BYTES, qs0 = const 6, qs1 = const 6 + Q5_0::BYTES,
            qs2 = const 6 + 2 * Q5_0::BYTES, qs3 = const 6 + 3 * Q5_0::BYTES,
        },
        [
            "ldr {h0:h}, [{x}]",
            "addp {p:v}.4s, {s0:v}.4s, {s1:v}.4s",
            "ldr {ha:s}, [{x}, #{qh0}]",
            "addp {q:v}.4s, {s2:v}.4s, {s3:v}.4s",
            "ldr {va:q}, [{x}, #{qs0}]",
            "movi {s0:d}, #0",
            "ldr {hb:s}, [{x}, #{qh1}]",
            "movi {s1:d}, #0",
            "ldr {h1:h}, [{x}, #{wd1}]",
            "mvn {ha:v}.8b, {ha:v}.8b",
            "ldr {vb:q}, [{x}, #{qs1}]",
            "addp {p:v}.4s, {p:v}.4s, {q:v}.4s",
            "ldr {h2:h}, [{x}, #{wd2}]",
            "tbl {la:v}.16b, {{ {ha:v}.16b }}, {i0:v}.16b",
            "ldr {h3:h}, [{x}, #{wd3}]",
            "mvn {hb:v}.8b, {hb:v}.8b",
            "ldr {aa0:q}, [{y}, #{yq0}]",
            "tbl {ua:v}.16b, {{ {ha:v}.16b }}, {i1:v}.16b",
            "ldr {aa1:q}, [{y}, #{yq0} + 16]",
            "scvtf {p:v}.4s, {p:v}.4s",
            "ldr {d0:s}, [{y}, #{yd0}]",
            "tbl {lb:v}.16b, {{ {hb:v}.16b }}, {i0:v}.16b",
            "ldr {d1:s}, [{y}, #{yd1}]",
            "cmtst {la:v}.16b, {la:v}.16b, {bit:v}.16b",
            "ldr {d2:s}, [{y}, #{yd2}]",
            "tbl {ub:v}.16b, {{ {hb:v}.16b }}, {i1:v}.16b",
            "ldr {d3:s}, [{y}, #{yd3}]",
            "fmul {p:v}.4s, {p:v}.4s, {dy:v}.4s",
            "ldr {ab0:q}, [{y}, #{yq1}]",
            "cmtst {ua:v}.16b, {ua:v}.16b, {bit:v}.16b",
            "ldr {ab1:q}, [{y}, #{yq1} + 16]",
            "bif {la:v}.16b, {va:v}.16b, {f0:v}.16b",
            "movi {s2:d}, #0",
            "cmtst {lb:v}.16b, {lb:v}.16b, {bit:v}.16b",
            "sri {ua:v}.16b, {va:v}.16b, #4",
            "fadd {sumf:s}, {sumf:s}, {p:s}",
            "sdot {s0:v}.4s, {la:v}.16b, {aa0:v}.16b",
            "cmtst {ub:v}.16b, {ub:v}.16b, {bit:v}.16b",
            "mov {q:s}, {p:v}.s[1]",
            "bif {lb:v}.16b, {vb:v}.16b, {f0:v}.16b",
            "movi {s3:d}, #0",
            "sri {ub:v}.16b, {vb:v}.16b, #4",
            "sdot {s0:v}.4s, {ua:v}.16b, {aa1:v}.16b",
            "sdot {s1:v}.4s, {lb:v}.16b, {ab0:v}.16b",
            "ldr {ha:s}, [{x}, #{qh2}]",
            "fadd {sumf:s}, {sumf:s}, {q:s}",
            "ldr {va:q}, [{x}, #{qs2}]",
            "sdot {s1:v}.4s, {ub:v}.16b, {ab1:v}.16b",
            "ldr {hb:s}, [{x}, #{qh3}]",
            "zip1 {h0:v}.4h, {h0:v}.4h, {h1:v}.4h",
            "ldr {vb:q}, [{x}, #{qs3}]",
            "mvn {ha:v}.8b, {ha:v}.8b",
            "ldr {aa0:q}, [{y}, #{yq2}]",
            "zip1 {h1:v}.4h, {h2:v}.4h, {h3:v}.4h",
            "ldr {aa1:q}, [{y}, #{yq2} + 16]",
            "mvn {hb:v}.8b, {hb:v}.8b",
            "ldr {ab0:q}, [{y}, #{yq3}]",
            "tbl {la:v}.16b, {{ {ha:v}.16b }}, {i0:v}.16b",
            "ldr {ab1:q}, [{y}, #{yq3} + 16]",
            "mov {h2:s}, {p:v}.s[2]",
            "tbl {ua:v}.16b, {{ {ha:v}.16b }}, {i1:v}.16b",
            "tbl {lb:v}.16b, {{ {hb:v}.16b }}, {i0:v}.16b",
            "fadd {sumf:s}, {sumf:s}, {h2:s}",
            "tbl {ub:v}.16b, {{ {hb:v}.16b }}, {i1:v}.16b",
            "cmtst {la:v}.16b, {la:v}.16b, {bit:v}.16b",
            "zip1 {d0:v}.2s, {d0:v}.2s, {d1:v}.2s",
            "cmtst {ua:v}.16b, {ua:v}.16b, {bit:v}.16b",
            "mov {h3:s}, {p:v}.s[3]",
            "cmtst {lb:v}.16b, {lb:v}.16b, {bit:v}.16b",
            "bif {la:v}.16b, {va:v}.16b, {f0:v}.16b",
            "cmtst {ub:v}.16b, {ub:v}.16b, {bit:v}.16b",
            "sri {ua:v}.16b, {va:v}.16b, #4",
            "fadd {sumf:s}, {sumf:s}, {h3:s}",
            "bif {lb:v}.16b, {vb:v}.16b, {f0:v}.16b",
            "sdot {s2:v}.4s, {la:v}.16b, {aa0:v}.16b",
            "sri {ub:v}.16b, {vb:v}.16b, #4",
            "zip1 {d2:v}.2s, {d2:v}.2s, {d3:v}.2s",
            "sdot {s3:v}.4s, {lb:v}.16b, {ab0:v}.16b",
            "zip1 {h0:v}.2s, {h0:v}.2s, {h1:v}.2s",
            "sdot {s2:v}.4s, {ua:v}.16b, {aa1:v}.16b",
            "add {x}, {x}, #{wstep}",
            "zip1 {d0:v}.2d, {d0:v}.2d, {d2:v}.2d",
            "add {y}, {y}, #{ystep}",
            "sdot {s3:v}.4s, {ub:v}.16b, {ab1:v}.16b",
            "fcvtl {h0:v}.4s, {h0:v}.4h",
            "fmul {dy:v}.4s, {h0:v}.4s, {d0:v}.4s",
        ]
    );
}

/// Four rows of `rb` bytes each, consecutive in `w`, · `a`: `out[r]` is what [`dot1`] gives for
/// row `r`.
#[target_feature(enable = "neon")]
fn dot4<F: Fmt, A: Act, const DP: bool>(w: &[u8], rb: usize, a: &[A], out: &mut [f32; 4]) {
    if rb.checked_mul(4).is_none_or(|n| w.len() < n) {
        // Not four whole rows: each row as far as it goes (never reached through `dot_rows`).
        for (r, o) in out.iter_mut().enumerate() {
            let row = w.get(r * rb..).unwrap_or(&[]);
            *o = dot1_cold::<F, A, DP>(&row[..rb.min(row.len())], a);
        }
        return;
    }
    let nb = (rb / F::BYTES).min(a.len());
    let [acc] = tile4::<F, A, DP, 1>(w, rb, [&a[..nb]]);
    // SAFETY: `out` holds four f32.
    unsafe { vst1q_f32(out.as_mut_ptr(), acc) };
}

/// `$name::<F, OFF, K>(p)`: the `$bytes` bytes at `p + OFF + K·F::BYTES` (field `OFF` of the
/// `K`th `F` block after `p`) in lane 0 of a vector (one LDR/LDUR, any
/// alignment: the crate is built with strict alignment, under which the compiler would assemble
/// a 2- or 4-byte field from byte loads; and as `asm!` the compiler does not pair two 16-byte
/// loads into an LDP, which in-order cores such as Cortex-A55 issue slower than two LDRs).
macro_rules! ld_at {
    ($(#[$doc:meta])* $name:ident, $vec:ty, $reg:literal, $bytes:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        #[doc = concat!("`p + OFF + K·F::BYTES` and the ", $bytes, " bytes after it must be readable.")]
        #[inline(always)]
        unsafe fn $name<F: Fmt, const OFF: usize, const K: usize>(p: *const u8) -> $vec {
            let v: $vec;
            // SAFETY: reads the bytes at `p + OFF + K·F::BYTES` (readable: caller); a scalar or 16-byte LDR
            // needs no alignment on normal memory.
            unsafe {
                asm!(
                    concat!("ldr {v:", $reg, "}, [{p}, #{off}]"),
                    v = out(vreg) v,
                    p = in(reg) p,
                    off = const OFF + K * F::BYTES,
                    options(pure, readonly, nostack, preserves_flags)
                );
            }
            v
        }
    };
}
ld_at!(
    /// A 2-byte field (an f16 scale).
    ld_h, uint16x4_t, "h", 2
);
ld_at!(
    /// A 4-byte field (`d`, `m` or Q5's `qh`).
    ld_s, uint32x4_t, "s", 4
);
ld_at!(
    /// Sixteen weight or activation bytes.
    ld_q, int8x16_t, "q", 16
);

/// The scales of four blocks (`p[r]` at each block's start) as f32: `d`, and `m` when the format
/// has one (else zeros). Row 0's f16 field(s) come in with a plain load, rows 1 to 3's into their
/// lanes of the same register (LD1 single lane at each block's start, no zips), for one FCVTL
/// (two and an unzip for `d`, `m`).
///
/// # Safety
/// `p[r]..p[r] + 4` (`+ 2` without a min) must be readable.
#[inline(always)]
unsafe fn scales4<F: Fmt>(p: [*const u8; 4]) -> (float32x4_t, float32x4_t) {
    // SAFETY: 4 (2) readable bytes at each `p[r]` (caller); NEON is part of the aarch64 baseline.
    unsafe {
        if F::MIN {
            let s = ld_s::<F, 0, 0>(p[0]);
            let s = ld1_lane_s_at::<1>(s, p[1]);
            let s = ld1_lane_s_at::<2>(s, p[2]);
            let s = vreinterpretq_u16_u32(ld1_lane_s_at::<3>(s, p[3]));
            // [d0, m0, d1, m1], [d2, m2, d3, m3] → d, m
            let (lo, hi) = (f16x8_low_to_f32(s), f16x8_high_to_f32(s));
            (vuzp1q_f32(lo, hi), vuzp2q_f32(lo, hi))
        } else {
            let h = ld_h::<F, 0, 0>(p[0]);
            let h = ld1_lane_h_at::<1>(h, p[1]);
            let h = ld1_lane_h_at::<2>(h, p[2]);
            (f16x4_to_f32(ld1_lane_h_at::<3>(h, p[3])), vdupq_n_f32(0.0))
        }
    }
}

/// Block `i` of four rows (`p[r]` at row `r`'s block start) · `C` activation columns: lane `r` of
/// each column's `acc` gets row `r`'s term, in [`dot1`]'s float order (the batched tiles).
/// (`inline(always)`, which `#[target_feature]` functions cannot have, as the other steps of the
/// four-row loops: each entry point must come out as one loop.)
///
/// # Safety
/// `p[r]..p[r] + BYTES` must be readable and `i` inside every column.
#[inline(always)]
unsafe fn step4<F: Fmt, A: Act, const DP: bool, const C: usize>(
    p: [*const u8; 4],
    ys: &[&[A]; C],
    i: usize,
    acc: &mut [float32x4_t; C],
) {
    // SAFETY: each `p[r]` is at a whole block (caller); NEON is part of the aarch64 baseline.
    unsafe {
        let (d, m) = scales4::<F>(p);
        let wq = p.map(|q| F::decode::<0>(q));
        // With SDOT and more than one column, the four rows interleaved once for SDOT by
        // element (the row sums land in their lanes with no reduction).
        let wi = if DP && C > 1 {
            interleave4(wq)
        } else {
            [vdupq_n_s8(0); 8]
        };
        for (acc, y) in acc.iter_mut().zip(ys) {
            let y = &y[i];
            let ya = ld_act_tile(y);
            // [sumi of row 0, .., row 3] as f32.
            let sumi = if DP && C > 1 {
                sums4_lanes(&wi, ya)
            } else {
                sums4::<DP>(F::MAXW, wq, [ya; 4])
            };
            let s = vcvtq_f32_s32(sumi);
            *acc = if F::MIN {
                // sumf += (d · y.d) · sumi + m · y.s
                let t = vmulq_f32(vmulq_n_f32(d, y.d()), s);
                vaddq_f32(*acc, vaddq_f32(t, vmulq_n_f32(m, y.s())))
            } else {
                // sumf += sumi · (d · y.d)
                vaddq_f32(*acc, vmulq_f32(s, vmulq_n_f32(d, y.d())))
            };
        }
    }
}

/// [`sums4`] (`Σ w[r]·a[r]`) stopped before its last steps: the four sums are [`sums4_join`] of
/// the parts (the last pairwise adds, left to the next step of the pipelined loop; parts the join
/// does not read are zeros).
#[inline(always)]
fn sums4_parts<const DP: bool>(
    maxw: i32,
    w: [[int8x16_t; 2]; 4],
    a: [[int8x16_t; 2]; 4],
) -> [int32x4_t; 4] {
    // SAFETY: NEON is part of the aarch64 baseline.
    unsafe {
        let z = vdupq_n_s32(0);
        if DP {
            // Each row's four-lane SDOT accumulator, reduced by the join.
            sdot4(w, a)
        } else if maxw > 31 {
            let q: [int32x4_t; 4] = core::array::from_fn(|r| prod_pairs(w[r], a[r]));
            [vpaddq_s32(q[0], q[1]), vpaddq_s32(q[2], q[3]), z, z]
        } else if maxw <= 15 {
            // All of `sums4` (sixteen products per i16 lane).
            [sums4::<DP>(maxw, w, a), z, z, z]
        } else {
            // Four products per lane, then eight: 8 · 31 · 128 < 2^15.
            let p: [int16x8_t; 4] = core::array::from_fn(|r| prod_i16(w[r], a[r]));
            [
                vpaddlq_s16(vpaddq_s16(p[0], p[1])),
                vpaddlq_s16(vpaddq_s16(p[2], p[3])),
                z,
                z,
            ]
        }
    }
}

/// The four sums from [`sums4_parts`]'s parts.
#[inline(always)]
fn sums4_join<const DP: bool>(maxw: i32, p: [int32x4_t; 4]) -> int32x4_t {
    // SAFETY: NEON is part of the aarch64 baseline.
    unsafe {
        if DP {
            vpaddq_s32(vpaddq_s32(p[0], p[1]), vpaddq_s32(p[2], p[3]))
        } else if maxw <= 15 {
            p[0]
        } else {
            vpaddq_s32(p[0], p[1])
        }
    }
}

/// Row `r`'s SDOT accumulator `Σ w[r]·a[r]` (four lanes, each four products of each half), the
/// eight SDOTs in one `asm!` block in the order the in-order cores want: the four rows' first
/// halves, then their second halves, each SDOT four after the one it adds to (the compiler,
/// which takes an `asm!` result as ready the next cycle, would pair each row's two).
#[inline(always)]
fn sdot4(w: [[int8x16_t; 2]; 4], a: [[int8x16_t; 2]; 4]) -> [int32x4_t; 4] {
    // SAFETY: NEON is part of the aarch64 baseline.
    let mut s = [unsafe { vdupq_n_s32(0) }; 4];
    // SAFETY: SDOT on registers only: no memory, no flags. Reached only through the dot-product
    // kernel set (see `sdot`).
    unsafe {
        asm!(
            ".arch_extension dotprod",
            "sdot {s0:v}.4s, {w00:v}.16b, {a00:v}.16b",
            "sdot {s1:v}.4s, {w10:v}.16b, {a10:v}.16b",
            "sdot {s2:v}.4s, {w20:v}.16b, {a20:v}.16b",
            "sdot {s3:v}.4s, {w30:v}.16b, {a30:v}.16b",
            "sdot {s0:v}.4s, {w01:v}.16b, {a01:v}.16b",
            "sdot {s1:v}.4s, {w11:v}.16b, {a11:v}.16b",
            "sdot {s2:v}.4s, {w21:v}.16b, {a21:v}.16b",
            "sdot {s3:v}.4s, {w31:v}.16b, {a31:v}.16b",
            s0 = inout(vreg) s[0],
            s1 = inout(vreg) s[1],
            s2 = inout(vreg) s[2],
            s3 = inout(vreg) s[3],
            w00 = in(vreg) w[0][0],
            w01 = in(vreg) w[0][1],
            w10 = in(vreg) w[1][0],
            w11 = in(vreg) w[1][1],
            w20 = in(vreg) w[2][0],
            w21 = in(vreg) w[2][1],
            w30 = in(vreg) w[3][0],
            w31 = in(vreg) w[3][1],
            // The four rows of a tile share one activation block: the same registers.
            a00 = in(vreg) a[0][0],
            a01 = in(vreg) a[0][1],
            a10 = in(vreg) a[1][0],
            a11 = in(vreg) a[1][1],
            a20 = in(vreg) a[2][0],
            a21 = in(vreg) a[2][1],
            a30 = in(vreg) a[3][0],
            a31 = in(vreg) a[3][1],
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    s
}

/// `p + N·BYTES`, `N` blocks on, added by an `asm!` ADD: the compiler keeps each row's pointer
/// in a register of its own (left to itself it recomputes the four rows' addresses from one base
/// each step, and each row's first load then waits for its ADD; the one-row loop's pointer steps
/// by one ADD of two blocks).
///
/// # Safety
/// `p..p + N·BYTES` must lie in one allocation (the result is inside it or one past its end).
#[inline(always)]
unsafe fn next_block<F: Fmt, const N: usize>(p: *const u8) -> *const u8 {
    // The address as an integer (the ADD reads no memory), `p`'s provenance kept.
    let mut a = p.addr();
    // SAFETY: an integer ADD on a register: no memory, no flags; the result is the address
    // `p.add(N · BYTES)` has, in bounds (caller).
    unsafe {
        asm!(
            "add {a}, {a}, #{n}",
            a = inout(reg) a,
            n = const N * F::BYTES,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    p.with_addr(a)
}

/// One step of [`pipeline`]: with `ONE`, blocks 0..4 at `p[0]` (one row's) · the activation
/// blocks 0..4 at `y`, else one block of each of four rows (`p[r]` at row `r`'s block) · the
/// activation block at `y`. It gives the four exact sums as the parts of [`sums4_parts`] (i32
/// bits; joined and converted by [`term`], off this step's latency chain) and the terms' scale
/// factors `d · y.d` and, for formats with a min, `m · y.s` (else zeros).
///
/// # Safety
/// The blocks read (`p[r]..p[r] + BYTES`, or `p[0]..p[0] + 4·BYTES` with `ONE`; one or four
/// activation blocks at `y`) must be readable.
#[inline(always)]
unsafe fn block4<F: Fmt, A: Act, const DP: bool, const ONE: bool>(
    p: [*const u8; 4],
    y: *const A,
) -> [float32x4_t; 6] {
    // SAFETY: the blocks are readable (caller); NEON is part of the aarch64 baseline.
    unsafe {
        let (w, (d, m), a, (yd, ys)) = if ONE {
            let q = p[0];
            let w = [
                F::decode::<0>(q),
                F::decode::<1>(q),
                F::decode::<2>(q),
                F::decode::<3>(q),
            ];
            let a = [
                ld_act_at::<A, 0>(y),
                ld_act_at::<A, 1>(y),
                ld_act_at::<A, 2>(y),
                ld_act_at::<A, 3>(y),
            ];
            (w, scales_run::<F>(q), a, act_scales4(y))
        } else {
            let y = &*y;
            let yds = (vdupq_n_f32(y.d()), vdupq_n_f32(y.s()));
            (
                p.map(|q| F::decode::<0>(q)),
                scales4::<F>(p),
                [ld_act(y); 4],
                yds,
            )
        };
        let [s0, s1, s2, s3] = sums4_parts::<DP>(F::MAXW, w, a);
        let ms = if F::MIN { vmulq_f32(m, ys) } else { m };
        let f = vreinterpretq_f32_s32;
        [f(s0), f(s1), f(s2), f(s3), vmulq_f32(d, yd), ms]
    }
}

/// The scales of blocks 0..4 at `p` (one row's) as f32: `d`, and `m` when the format has one
/// (else zeros); each block's field(s) in a register of its own (loads at constant offsets),
/// zipped for one FCVTL (two and an unzip for `d`, `m`).
///
/// # Safety
/// `p..p + 4·BYTES` must be readable.
#[inline(always)]
unsafe fn scales_run<F: Fmt>(p: *const u8) -> (float32x4_t, float32x4_t) {
    // SAFETY: the four blocks are readable (caller); NEON is part of the aarch64 baseline.
    unsafe {
        if F::MIN {
            let s = [
                ld_s::<F, 0, 0>(p),
                ld_s::<F, 0, 1>(p),
                ld_s::<F, 0, 2>(p),
                ld_s::<F, 0, 3>(p),
            ];
            // [d0, m0, d1, m1], [d2, m2, d3, m3] → d, m
            let dm01 = vreinterpret_u16_u32(vget_low_u32(vzip1q_u32(s[0], s[1])));
            let dm23 = vreinterpret_u16_u32(vget_low_u32(vzip1q_u32(s[2], s[3])));
            let (lo, hi) = (f16x4_to_f32(dm01), f16x4_to_f32(dm23));
            (vuzp1q_f32(lo, hi), vuzp2q_f32(lo, hi))
        } else {
            let h = [
                ld_h::<F, 0, 0>(p),
                ld_h::<F, 0, 1>(p),
                ld_h::<F, 0, 2>(p),
                ld_h::<F, 0, 3>(p),
            ];
            let d01 = vreinterpret_u32_u16(vzip1_u16(h[0], h[1]));
            let d23 = vreinterpret_u32_u16(vzip1_u16(h[2], h[3]));
            let d = f16x4_to_f32(vreinterpret_u16_u32(vzip1_u32(d01, d23)));
            (d, vdupq_n_f32(0.0))
        }
    }
}

/// `[y.d]` and `[y.s]` of the four activation blocks at `y` (each block's `[d, s]` pair in one
/// 8-byte load, unzipped; for Q8_0, whose `s` is 0, the second word is quants, unused).
///
/// # Safety
/// Four activation blocks at `y` must be readable.
#[inline(always)]
unsafe fn act_scales4<A: Act>(y: *const A) -> (float32x4_t, float32x4_t) {
    // SAFETY: the blocks are readable (caller); NEON is part of the aarch64 baseline.
    unsafe {
        let v01 = vcombine_f32(ld_ds::<A, 0>(y), ld_ds::<A, 1>(y));
        let v23 = vcombine_f32(ld_ds::<A, 2>(y), ld_ds::<A, 3>(y));
        (vuzp1q_f32(v01, v23), vuzp2q_f32(v01, v23))
    }
}

/// The terms of [`block4`]'s `[s0, s1, s2, s3, dy, ms]`, in the scalar order: `sumi · (d · y.d)`,
/// or `(d · y.d) · sumi + m · y.s` with a min.
#[inline(always)]
fn term<F: Fmt, const DP: bool>([s0, s1, s2, s3, dy, ms]: [float32x4_t; 6]) -> float32x4_t {
    // SAFETY: NEON is part of the aarch64 baseline.
    unsafe {
        let i = vreinterpretq_s32_f32;
        let s = vcvtq_f32_s32(sums4_join::<DP>(F::MAXW, [i(s0), i(s1), i(s2), i(s3)]));
        if F::MIN {
            vaddq_f32(vmulq_f32(dy, s), ms)
        } else {
            vmulq_f32(s, dy)
        }
    }
}

/// `sumf` plus the four lanes of `t`, one after another (the blocks' order).
#[inline(always)]
fn add_lanes(sumf: f32, t: float32x4_t) -> f32 {
    // SAFETY: NEON is part of the aarch64 baseline.
    unsafe {
        let s = sumf + vgetq_lane_f32::<0>(t);
        let s = s + vgetq_lane_f32::<1>(t);
        let s = s + vgetq_lane_f32::<2>(t);
        s + vgetq_lane_f32::<3>(t)
    }
}

/// The software-pipelined loop of the one-column four-row tile and of [`dot1`]: `steps` steps of
/// [`block4`], each followed by `fold` of the step before's result, so that on in-order cores
/// (Cortex-A53, A55) the one's latency hides the other's; `fold` still sees the steps in order.
/// With `ONE`, step k takes blocks 4k..4k + 4 of the row at `p[0]` against activation blocks
/// 4k..4k + 4 from `y`; else block k of the four rows at `p[r]` against activation block k.
/// Each pointer moves on after its step's loads (one `asm!` ADD each: see [`next_block`]).
///
/// # Safety
/// `steps` ≥ 1; the rows at `p[r]` and the activations at `y` must hold `steps` blocks (`4 ·
/// steps` with `ONE`).
#[inline(always)]
unsafe fn pipeline<F: Fmt, A: Act, const DP: bool, const ONE: bool>(
    mut p: [*const u8; 4],
    mut y: *const A,
    steps: usize,
    mut fold: impl FnMut(float32x4_t),
) {
    let per = if ONE { 4 } else { 1 };
    // SAFETY: step k reads blocks per·k..per·(k + 1) of the rows and of `y`, all inside (caller);
    // after it each pointer is at block per·(k + 1) ≤ per·steps: inside or one past the end.
    unsafe {
        let step = |p: &mut [*const u8; 4], y: &mut *const A| {
            let t = block4::<F, A, DP, ONE>(*p, *y);
            *p = if ONE {
                [next_block::<F, 4>(p[0]); 4]
            } else {
                p.map(|q| next_block::<F, 1>(q))
            };
            *y = y.add(per);
            t
        };
        let mut pending = step(&mut p, &mut y);
        for _ in 1..steps {
            let next = step(&mut p, &mut y);
            fold(term::<F, DP>(pending));
            pending = next;
        }
        fold(term::<F, DP>(pending));
    }
}

/// Four rows of `rb` bytes each, consecutive in `w` (`4 · rb ≤ w.len()`), · `C` activation
/// columns of equal length (at most `rb / BYTES` blocks): lane `r` of result `t` is what [`dot1`]
/// gives for row `r` and column `t`. Each block of the four rows is decoded once for the `C`
/// columns; every column's float work is that of [`dot1`], lane by lane. With one column (the
/// matvec), the loop is software-pipelined: a step loads block i, computes its integer sums and
/// scale factors ([`block4`]), and adds block i - 1's term ([`add_term`]), so on in-order cores
/// (Cortex-A53, A55) neither block's latency chain stalls the other.
#[inline(always)]
fn tile4<F: Fmt, A: Act, const DP: bool, const C: usize>(
    w: &[u8],
    rb: usize,
    ys: [&[A]; C],
) -> [float32x4_t; C] {
    let nb = ys.iter().map(|y| y.len()).min().unwrap_or(0);
    let nb = nb.min(rb / F::BYTES);
    debug_assert!(rb.checked_mul(4).is_some_and(|n| n <= w.len()));
    let base = w.as_ptr();
    // Row r's block i starts at r·rb + i·BYTES.
    let at = |i: usize| {
        // SAFETY: for i ≤ nb ≤ rb / BYTES, r·rb + i·BYTES ≤ (r + 1)·rb ≤ 4·rb ≤ w.len() (the
        // caller's promise): inside `w` or one past its end.
        unsafe { [0, 1, 2, 3].map(|r| base.add(r * rb + i * F::BYTES)) }
    };
    // SAFETY: NEON is part of the aarch64 baseline.
    let mut acc = [unsafe { vdupq_n_f32(0.0) }; C];
    if C == 1 && nb > 0 {
        let mut acc0 = acc[0];
        // SAFETY: block 0..nb of every row lies inside `w` (see `at`) and in the column.
        unsafe {
            pipeline::<F, A, DP, false>(at(0), ys[0].as_ptr(), nb, |t| {
                acc0 = vaddq_f32(acc0, t);
            })
        };
        acc[0] = acc0;
        return acc;
    }
    for i in 0..nb {
        // SAFETY: block i of every row lies inside `w` (i < nb, see `at`) and in every column.
        unsafe { step4::<F, A, DP, C>(at(i), &ys, i, &mut acc) };
    }
    acc
}

/// Columns per tile of the batched kernel: accumulators for them beside the decoded weights
/// fit the register file.
const TILE: usize = 4;

/// The four lanes of `v`.
#[inline(always)]
fn lanes(v: float32x4_t) -> [f32; 4] {
    let mut l = [0.0f32; 4];
    // SAFETY: `l` holds four f32.
    unsafe { vst1q_f32(l.as_mut_ptr(), v) };
    l
}

/// Rows of `rb` bytes · `cols` columns of `a` into `out` (`[rows][cols]`), four rows at a time
/// ([`tile4`]) through the shared loop ([`crate::quant::batch::by_tiles`]).
#[target_feature(enable = "neon")]
fn mat<F: Fmt, A: Act, const DP: bool>(w: &[u8], rb: usize, a: &[A], cols: usize, out: &mut [f32]) {
    crate::quant::batch::by_tiles(
        w,
        rb,
        a,
        cols,
        out,
        // The closures inherit this function's target features; `by_tiles` hands four whole rows.
        |w4, ys| tile4::<F, A, DP, { TILE }>(w4, rb, ys).map(lanes),
        |w4, y| {
            let [v] = tile4::<F, A, DP, 1>(w4, rb, [y]);
            lanes(v)
        },
        |row, y| dot1::<F, A, DP>(row, y),
    )
}

macro_rules! entries {
    ($(#[$doc:meta])* $one:ident, $one_dp:ident, $four:ident, $four_dp:ident, $mat:ident, $mat_dp:ident,
     $fmt:ty, $act:ty) => {
        $(#[$doc])*
        pub fn $one(w: &[u8], a: &[$act]) -> f32 {
            dot1::<$fmt, $act, false>(w, a)
        }
        $(#[$doc])*
        /// SDOT flavour: only for cores with FEAT_DotProd (`Kernels::NEON_DOTPROD`).
        pub fn $one_dp(w: &[u8], a: &[$act]) -> f32 {
            // SDOT itself is an `asm!` instruction, see `sdot`.
            dot1::<$fmt, $act, true>(w, a)
        }
        $(#[$doc])*
        /// Four rows of `rb` bytes, consecutive in `w`, at once: `out[r]` equals the one-row
        /// kernel on row `r`.
        pub fn $four(w: &[u8], rb: usize, a: &[$act], out: &mut [f32; 4]) {
            // SAFETY: NEON is part of every aarch64 target this module is built for.
            unsafe { dot4::<$fmt, $act, false>(w, rb, a, out) }
        }
        $(#[$doc])*
        /// Four rows at once, SDOT flavour (`Kernels::NEON_DOTPROD` only).
        pub fn $four_dp(w: &[u8], rb: usize, a: &[$act], out: &mut [f32; 4]) {
            // SAFETY: as above (SDOT itself is an `asm!` instruction, see `sdot`).
            unsafe { dot4::<$fmt, $act, true>(w, rb, a, out) }
        }
        $(#[$doc])*
        /// Batched: rows · `cols` columns into `out` as `[rows][cols]`, each output equal to the
        /// one-row kernel's.
        pub fn $mat(w: &[u8], rb: usize, a: &[$act], cols: usize, out: &mut [f32]) {
            // SAFETY: NEON is part of every aarch64 target this module is built for.
            unsafe { mat::<$fmt, $act, false>(w, rb, a, cols, out) }
        }
        $(#[$doc])*
        /// Batched, SDOT flavour (`Kernels::NEON_DOTPROD` only).
        pub fn $mat_dp(w: &[u8], rb: usize, a: &[$act], cols: usize, out: &mut [f32]) {
            // SAFETY: as above (SDOT itself is an `asm!` instruction, see `sdot`).
            unsafe { mat::<$fmt, $act, true>(w, rb, a, cols, out) }
        }
    };
}

entries!(
    /// Q4_0 weights · Q8_0 activations (twin of `scalar::vec_dot_q4_0_q8_0`).
    vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_dp, vec_dot_q4_0_q8_0_x4, vec_dot_q4_0_q8_0_x4_dp, mat_q4_0_q8_0, mat_q4_0_q8_0_dp,
    Q4_0, BlockQ8_0
);
entries!(
    /// Q4_1 weights · Q8_1 activations (twin of `scalar::vec_dot_q4_1_q8_1`).
    vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_dp, vec_dot_q4_1_q8_1_x4, vec_dot_q4_1_q8_1_x4_dp, mat_q4_1_q8_1, mat_q4_1_q8_1_dp,
    Q4_1, BlockQ8_1
);
entries!(
    /// Q5_0 weights · Q8_0 activations (twin of `scalar::vec_dot_q5_0_q8_0`).
    vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_dp, vec_dot_q5_0_q8_0_x4, vec_dot_q5_0_q8_0_x4_dp, mat_q5_0_q8_0, mat_q5_0_q8_0_dp,
    Q5_0, BlockQ8_0
);
entries!(
    /// Q5_1 weights · Q8_1 activations (twin of `scalar::vec_dot_q5_1_q8_1`).
    vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_dp, vec_dot_q5_1_q8_1_x4, vec_dot_q5_1_q8_1_x4_dp, mat_q5_1_q8_1, mat_q5_1_q8_1_dp,
    Q5_1, BlockQ8_1
);
entries!(
    /// Q8_0 weights · Q8_0 activations (twin of `scalar::vec_dot_q8_0_q8_0`).
    vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_dp, vec_dot_q8_0_q8_0_x4, vec_dot_q8_0_q8_0_x4_dp, mat_q8_0_q8_0, mat_q8_0_q8_0_dp,
    Q8_0, BlockQ8_0
);
entries!(
    /// IQ4_NL weights · Q8_0 activations (twin of `scalar::vec_dot_iq4_nl_q8_0`).
    vec_dot_iq4_nl_q8_0, vec_dot_iq4_nl_q8_0_dp, vec_dot_iq4_nl_q8_0_x4, vec_dot_iq4_nl_q8_0_x4_dp, mat_iq4_nl_q8_0, mat_iq4_nl_q8_0_dp,
    Iq4Nl, BlockQ8_0
);
