//! NEON kernels (aarch64): SIMD twins of the scalar reference kernels in [`super::scalar`], of the
//! activation quantizers in [`super::act`] and of the attention in [`crate::ops`], returning
//! bit-identical results (`to_bits()` equal) for every input without NaNs (the tests cover zeros,
//! subnormals, infinities, the largest f16 scales and the extreme int8 values).
//!
//! How equality is kept:
//! - Integer sums are exact in any order, so each block's (or super-block's) integer dot product is
//!   computed with SIMD, widening before any partial sum could leave its lane type (each reduction
//!   below states its bound), and the float work per block is done in exactly the scalar order: one
//!   rounding per scalar operation, multiply and add kept apart (never FMA; Rust never fuses them
//!   either), and the running sum `sumf` added block by block in order. The four-row kernels keep one
//!   row per lane, so each lane is the scalar loop of its row.
//! - Float dot products reproduce the scalar code's fixed partial sums: `acc[i & 3]` is one 4-lane
//!   vector; the attention's `q·k` keeps `acc[i & 7]` as two vectors.
//! - f16 → f32 uses FCVTL (base ARMv8-A, exact); quantization rounds with the same
//!   `x + 1.5·2^23` trick as `nearest_int`, so even out-of-range values give the same bytes.
//!
//! Two integer flavours share the code through `const DP: bool`: the plain one (SMULL/SMLAL,
//! SADDLP/SADALP; every ARMv8-A core, Cortex-A53/A72) and SDOT (FEAT_DotProd, Cortex-A76 and later;
//! issued through `asm!` since `vdotq_s32` is unstable). `runs_on_dotprod` decides
//! from ID_AA64ISAR0_EL1.DP. The SDOT kernels are compiled without `#[target_feature]`: the compiler
//! never emits a dot-product instruction on its own, so on a core without it the only effect is the
//! illegal-instruction trap of that one `asm!` instruction.
//!
//! Layout: `q32` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: one row two blocks per step, or four rows sharing
//! the activation loads), `kquant` (Q2_K..Q6_K: one row, four rows sharing the activation loads,
//! or a batch of columns per decoded block), `float` (F32/F16/BF16 dot products, attention), `quantize` (Q8_0, Q8_1, Q8_K
//! activations). The module is compiled on aarch64 only; the `cfg(target_arch)` that selects it
//! lives in [`super`], the dispatch module.

mod float;
mod kquant;
mod q32;
mod quantize;

pub use float::{
    attend_head, dot_f32_f16, mat_bf16_bf16, mat_f16_f16, mat_f32_f32, to_f16, vec_dot_bf16_bf16,
    vec_dot_f16_f16, vec_dot_f32_f32,
};
pub use kquant::{
    mat_q2_k_q8_k, mat_q2_k_q8_k_dp, mat_q3_k_q8_k, mat_q3_k_q8_k_dp, mat_q4_k_q8_k,
    mat_q4_k_q8_k_dp, mat_q5_k_q8_k, mat_q5_k_q8_k_dp, mat_q6_k_q8_k, mat_q6_k_q8_k_dp,
    vec_dot_q2_k_q8_k, vec_dot_q2_k_q8_k_dp, vec_dot_q2_k_q8_k_x4, vec_dot_q2_k_q8_k_x4_dp,
    vec_dot_q3_k_q8_k, vec_dot_q3_k_q8_k_dp, vec_dot_q3_k_q8_k_x4, vec_dot_q3_k_q8_k_x4_dp,
    vec_dot_q4_k_q8_k, vec_dot_q4_k_q8_k_dp, vec_dot_q4_k_q8_k_x4, vec_dot_q4_k_q8_k_x4_dp,
    vec_dot_q5_k_q8_k, vec_dot_q5_k_q8_k_dp, vec_dot_q5_k_q8_k_x4, vec_dot_q5_k_q8_k_x4_dp,
    vec_dot_q6_k_q8_k, vec_dot_q6_k_q8_k_dp, vec_dot_q6_k_q8_k_x4, vec_dot_q6_k_q8_k_x4_dp,
};
pub use q32::{
    mat_iq4_nl_q8_0, mat_iq4_nl_q8_0_dp, vec_dot_iq4_nl_q8_0, vec_dot_iq4_nl_q8_0_dp,
    vec_dot_iq4_nl_q8_0_x4, vec_dot_iq4_nl_q8_0_x4_dp,
};
pub use q32::{
    mat_q4_0_q8_0, mat_q4_0_q8_0_dp, mat_q4_1_q8_1, mat_q4_1_q8_1_dp, mat_q5_0_q8_0,
    mat_q5_0_q8_0_dp, mat_q5_1_q8_1, mat_q5_1_q8_1_dp, mat_q8_0_q8_0, mat_q8_0_q8_0_dp,
    vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_dp, vec_dot_q4_0_q8_0_x4, vec_dot_q4_0_q8_0_x4_dp,
    vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_dp, vec_dot_q4_1_q8_1_x4, vec_dot_q4_1_q8_1_x4_dp,
    vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_dp, vec_dot_q5_0_q8_0_x4, vec_dot_q5_0_q8_0_x4_dp,
    vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_dp, vec_dot_q5_1_q8_1_x4, vec_dot_q5_1_q8_1_x4_dp,
    vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_dp, vec_dot_q8_0_q8_0_x4, vec_dot_q8_0_q8_0_x4_dp,
};
pub use quantize::{quantize_q8_0, quantize_q8_1, quantize_q8_k};

use super::scalar::with_q32;
use super::table::{with_floats, with_k_quants};
use super::{Features, GgmlType, Kernels, RowKernels, TypeKernels};
use core::arch::aarch64::*;
use core::arch::asm;

/// The NEON set (every ARMv8-A core: Cortex-A53, A72): SMULL/SMLAL integer dot products; every
/// entry is a NEON twin of the scalar one.
pub const KERNELS: Kernels = {
    let set = Kernels {
        name: "neon",
        quantize_q8_0,
        quantize_q8_1,
        quantize_q8_k,
        dot_f32_f16,
        attend_head,
        to_f16,
        ..Kernels::SCALAR
    };
    let set = with_k_quants!(
        with_q32!(with_floats!(set, self, batched), self, self),
        self,
        x4
    );
    let iq4_nl = RowKernels::dot(vec_dot_iq4_nl_q8_0)
        .x4(vec_dot_iq4_nl_q8_0_x4)
        .mat(mat_iq4_nl_q8_0);
    set.with(GgmlType::IQ4NL, TypeKernels::Q8_0(iq4_nl))
};

/// NEON with SDOT (FEAT_DotProd: Cortex-A55, A76 and later): [`KERNELS`] with the integer dot
/// products through SDOT. Only for cores whose ID_AA64ISAR0_EL1.DP is at least 1.
pub const KERNELS_DOTPROD: Kernels = {
    let set = Kernels {
        name: "neon-dotprod",
        ..KERNELS
    };
    let set = with_k_quants!(with_q32!(set, dp, dp), dp, x4);
    let iq4_nl = RowKernels::dot(vec_dot_iq4_nl_q8_0_dp)
        .x4(vec_dot_iq4_nl_q8_0_x4_dp)
        .mat(mat_iq4_nl_q8_0_dp);
    set.with(GgmlType::IQ4NL, TypeKernels::Q8_0(iq4_nl))
};

/// The SDOT kernels under the names every set gives its kernels (for [`KERNELS_DOTPROD`]).
mod dp {
    pub use super::kquant::{
        mat_q2_k_q8_k_dp as mat_q2_k_q8_k, mat_q3_k_q8_k_dp as mat_q3_k_q8_k,
        mat_q4_k_q8_k_dp as mat_q4_k_q8_k, mat_q5_k_q8_k_dp as mat_q5_k_q8_k,
        mat_q6_k_q8_k_dp as mat_q6_k_q8_k, vec_dot_q2_k_q8_k_dp as vec_dot_q2_k_q8_k,
        vec_dot_q3_k_q8_k_dp as vec_dot_q3_k_q8_k, vec_dot_q4_k_q8_k_dp as vec_dot_q4_k_q8_k,
        vec_dot_q5_k_q8_k_dp as vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k_dp as vec_dot_q6_k_q8_k,
    };
    // The K-quants' four-row kernels.
    pub use super::kquant::{
        vec_dot_q2_k_q8_k_x4_dp as vec_dot_q2_k_q8_k_x4,
        vec_dot_q3_k_q8_k_x4_dp as vec_dot_q3_k_q8_k_x4,
        vec_dot_q4_k_q8_k_x4_dp as vec_dot_q4_k_q8_k_x4,
        vec_dot_q5_k_q8_k_x4_dp as vec_dot_q5_k_q8_k_x4,
        vec_dot_q6_k_q8_k_x4_dp as vec_dot_q6_k_q8_k_x4,
    };
    // The 32-wide types: one row, four rows, batched.
    pub use super::q32::mat_q8_0_q8_0_dp as mat_q8_0_q8_0;
    pub use super::q32::vec_dot_q8_0_q8_0_dp as vec_dot_q8_0_q8_0;
    pub use super::q32::vec_dot_q8_0_q8_0_x4_dp as vec_dot_q8_0_q8_0_x4;
    pub use super::q32::{mat_q4_0_q8_0_dp as mat_q4_0_q8_0, mat_q4_1_q8_1_dp as mat_q4_1_q8_1};
    pub use super::q32::{mat_q5_0_q8_0_dp as mat_q5_0_q8_0, mat_q5_1_q8_1_dp as mat_q5_1_q8_1};
    pub use super::q32::{
        vec_dot_q4_0_q8_0_dp as vec_dot_q4_0_q8_0, vec_dot_q4_1_q8_1_dp as vec_dot_q4_1_q8_1,
    };
    pub use super::q32::{
        vec_dot_q4_0_q8_0_x4_dp as vec_dot_q4_0_q8_0_x4,
        vec_dot_q4_1_q8_1_x4_dp as vec_dot_q4_1_q8_1_x4,
    };
    pub use super::q32::{
        vec_dot_q5_0_q8_0_dp as vec_dot_q5_0_q8_0, vec_dot_q5_1_q8_1_dp as vec_dot_q5_1_q8_1,
    };
    pub use super::q32::{
        vec_dot_q5_0_q8_0_x4_dp as vec_dot_q5_0_q8_0_x4,
        vec_dot_q5_1_q8_1_x4_dp as vec_dot_q5_1_q8_1_x4,
    };
}

/// ID_AA64ISAR0_EL1 of the running core (at EL0 under Linux the kernel emulates the read, as
/// qemu-user does; at EL1 it is a plain register read).
pub fn read_id_aa64isar0() -> u64 {
    let v: u64;
    // SAFETY: reading an ID register has no side effects and touches no memory.
    unsafe {
        asm!("mrs {v}, ID_AA64ISAR0_EL1", v = out(reg) v, options(nomem, nostack, preserves_flags));
    }
    v
}

/// Whether a CPU with `f` runs [`KERNELS`] (every aarch64 core).
pub fn runs_on(f: &Features) -> bool {
    f.neon
}

/// Whether a CPU with `f` runs [`KERNELS_DOTPROD`]: SDOT (ID_AA64ISAR0_EL1.DP at least 1).
pub fn runs_on_dotprod(f: &Features) -> bool {
    f.neon && f.dotprod
}

/// `acc + dot(a, b)` per group of four bytes (SDOT). Only for the dot-product kernel set.
#[inline(always)]
fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: SDOT reads two vector registers and updates a third; no memory, no flags. It is
    // reached only through `Kernels::NEON_DOTPROD`, which `Kernels::best` selects only when
    // ID_AA64ISAR0_EL1.DP says the core has it (elsewhere the instruction traps as undefined).
    unsafe {
        asm!(
            ".arch_extension dotprod",
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// `acc + dot(w, group L of a)` per group of four bytes: SDOT by element, lane `r` of the result
/// adds the four products of `w`'s group `r` with `a`'s group `L`. Only for the dot-product set.
#[inline(always)]
fn sdot_lane<const L: i32>(acc: int32x4_t, w: int8x16_t, a: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: as `sdot`: registers only, reached only through `Kernels::NEON_DOTPROD`.
    unsafe {
        asm!(
            ".arch_extension dotprod",
            "sdot {acc:v}.4s, {w:v}.16b, {a:v}.4b[{l}]",
            acc = inout(vreg) acc,
            w = in(vreg) w,
            a = in(vreg) a,
            l = const L,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// Four rows' 32-byte blocks (`w[r]`) interleaved for [`sdot_lane`]: vector `g` holds bytes
/// `4g..4g + 4` of row 0, row 1, row 2 and row 3 (a 4×4 transpose of 32-bit groups per half).
#[target_feature(enable = "neon")]
#[inline]
fn interleave4(w: [[int8x16_t; 2]; 4]) -> [int8x16_t; 8] {
    let mut out = [vdupq_n_s8(0); 8];
    for h in 0..2 {
        let v = w.map(|r| vreinterpretq_s32_s8(r[h]));
        let t0 = vtrn1q_s32(v[0], v[1]);
        let t1 = vtrn2q_s32(v[0], v[1]);
        let t2 = vtrn1q_s32(v[2], v[3]);
        let t3 = vtrn2q_s32(v[2], v[3]);
        let q = |x: int32x4_t| vreinterpretq_s64_s32(x);
        let b = |x: int64x2_t| vreinterpretq_s8_s64(x);
        out[4 * h] = b(vtrn1q_s64(q(t0), q(t2)));
        out[4 * h + 1] = b(vtrn1q_s64(q(t1), q(t3)));
        out[4 * h + 2] = b(vtrn2q_s64(q(t0), q(t2)));
        out[4 * h + 3] = b(vtrn2q_s64(q(t1), q(t3)));
    }
    out
}

/// `[Σ w0·a, Σ w1·a, Σ w2·a, Σ w3·a]` over 32 elements from [`interleave4`]'s vectors: eight SDOT
/// by element, no reduction.
#[target_feature(enable = "neon")]
#[inline]
fn sums4_lanes(wi: &[int8x16_t; 8], a: [int8x16_t; 2]) -> int32x4_t {
    let z = vdupq_n_s32(0);
    let s = sdot_lane::<0>(z, wi[0], a[0]);
    let s = sdot_lane::<1>(s, wi[1], a[0]);
    let s = sdot_lane::<2>(s, wi[2], a[0]);
    let s = sdot_lane::<3>(s, wi[3], a[0]);
    let s = sdot_lane::<0>(s, wi[4], a[1]);
    let s = sdot_lane::<1>(s, wi[5], a[1]);
    let s = sdot_lane::<2>(s, wi[6], a[1]);
    sdot_lane::<3>(s, wi[7], a[1])
}

/// Four f16 values (bits) to f32, exactly (FCVTL).
#[inline(always)]
fn f16x4_to_f32(x: uint16x4_t) -> float32x4_t {
    let out: float32x4_t;
    // SAFETY: FCVTL (half to single) is base ARMv8-A floating point; registers only.
    unsafe {
        asm!(
            "fcvtl {o:v}.4s, {i:v}.4h",
            i = in(vreg) x,
            o = lateout(vreg) out,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

/// The upper four f16 values (bits) of `x` to f32, exactly (FCVTL2).
#[inline(always)]
fn f16x8_high_to_f32(x: uint16x8_t) -> float32x4_t {
    let out: float32x4_t;
    // SAFETY: as `f16x4_to_f32`.
    unsafe {
        asm!(
            "fcvtl2 {o:v}.4s, {i:v}.8h",
            i = in(vreg) x,
            o = lateout(vreg) out,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

/// The lower four f16 values (bits) of `x` to f32, exactly.
#[target_feature(enable = "neon")]
#[inline]
fn f16x8_low_to_f32(x: uint16x8_t) -> float32x4_t {
    f16x4_to_f32(vget_low_u16(x))
}

/// One f16 (bits) to f32, exactly (FCVT; the same value as `half::f16::to_f32`, which the scalar
/// kernels use).
#[inline(always)]
fn f16_to_f32(bits: u16) -> f32 {
    let out: f32;
    // SAFETY: FMOV and FCVT (half to single, base ARMv8-A floating point); registers only.
    unsafe {
        asm!(
            "fmov {o:s}, {w:w}",
            "fcvt {o:s}, {o:h}",
            w = in(reg) u32::from(bits),
            o = out(vreg) out,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    out
}

/// The little-endian f16 at `b[at..at + 2]` as f32 (exact).
#[inline(always)]
fn f16_le(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

/// Sixteen bytes at `p`.
///
/// # Safety
/// `p..p + 16` must be readable.
#[inline(always)]
unsafe fn ld_u8(p: *const u8) -> uint8x16_t {
    // SAFETY: the caller guarantees 16 readable bytes; LD1 has no alignment requirement.
    unsafe { vld1q_u8(p) }
}

/// Sixteen signed bytes at `p`.
///
/// # Safety
/// `p..p + 16` must be readable.
#[inline(always)]
unsafe fn ld_i8(p: *const i8) -> int8x16_t {
    // SAFETY: the caller guarantees 16 readable bytes; LD1 has no alignment requirement.
    unsafe { vld1q_s8(p) }
}

/// A little-endian `u16` at `p` (any alignment).
///
/// # Safety
/// `p..p + 2` must be readable.
#[inline(always)]
unsafe fn rd_u16(p: *const u8) -> u16 {
    // SAFETY: the caller guarantees 2 readable bytes; `read_unaligned` needs no alignment.
    u16::from_le(unsafe { (p as *const u16).read_unaligned() })
}

/// A little-endian `u32` at `p` (any alignment).
///
/// # Safety
/// `p..p + 4` must be readable.
#[inline(always)]
unsafe fn rd_u32(p: *const u8) -> u32 {
    // SAFETY: the caller guarantees 4 readable bytes; `read_unaligned` needs no alignment.
    u32::from_le(unsafe { (p as *const u32).read_unaligned() })
}

/// `$name::<L>(v, p)`: `v` with its lane `L` loaded from `*p` (`$bytes` bytes, any alignment),
/// and `p` advanced by `$bytes` (LD1 single lane, post-indexed: one instruction for a gather the
/// compiler would do in three); `$at::<L>(v, p)` the same load from `p`, which stays; `$size` is
/// the lane's size letter.
macro_rules! ld1_lane {
    ($(#[$doc:meta])* $name:ident, $at:ident, $vec:ty, $size:literal, $bytes:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        #[doc = concat!("`*p..*p + ", $bytes, "` must be readable.")]
        #[inline(always)]
        unsafe fn $name<const L: i32>(v: $vec, p: &mut *const u8) -> $vec {
            let mut v = v;
            // SAFETY: reads the bytes at `*p` (readable: caller) into one lane; LD1 needs no
            // alignment.
            unsafe {
                asm!(
                    concat!("ld1 {{{v:v}.", $size, "}}[{l}], [{p}], #", $bytes),
                    v = inout(vreg) v,
                    p = inout(reg) *p,
                    l = const L,
                    options(readonly, nostack, preserves_flags)
                );
            }
            v
        }

        $(#[$doc])*
        /// (`p` stays.)
        ///
        /// # Safety
        #[doc = concat!("`p..p + ", $bytes, "` must be readable.")]
        #[inline(always)]
        unsafe fn $at<const L: i32>(v: $vec, p: *const u8) -> $vec {
            let mut v = v;
            // SAFETY: as above, without the write-back.
            unsafe {
                asm!(
                    concat!("ld1 {{{v:v}.", $size, "}}[{l}], [{p}]"),
                    v = inout(vreg) v,
                    p = in(reg) p,
                    l = const L,
                    options(pure, readonly, nostack, preserves_flags)
                );
            }
            v
        }
    };
}
ld1_lane!(
    /// A 32-bit lane (4 bytes).
    ld1_lane_s, ld1_lane_s_at, uint32x4_t, "s", 4
);
ld1_lane!(
    /// A 16-bit lane (2 bytes).
    ld1_lane_h, ld1_lane_h_at, uint16x4_t, "h", 2
);

/// Nibbles of 16 bytes: low (elements 0..16) and high (16..32), as unsigned 0..15.
#[inline(always)]
fn nibbles(q: uint8x16_t) -> [uint8x16_t; 2] {
    // SAFETY: NEON is part of the aarch64 baseline; register operations only.
    unsafe { [vandq_u8(q, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(q)] }
}

/// `sum(w[k] * a[k])` over 32 pairs, as eight i16 lanes of four products each: valid when every
/// |w| ≤ 63 (4 · 63 · 128 < 2^15).
#[target_feature(enable = "neon")]
#[inline]
fn prod_i16(w: [int8x16_t; 2], a: [int8x16_t; 2]) -> int16x8_t {
    let p = vmull_s8(vget_low_s8(w[0]), vget_low_s8(a[0]));
    let p = vmlal_high_s8(p, w[0], a[0]);
    let p = vmlal_s8(p, vget_low_s8(w[1]), vget_low_s8(a[1]));
    vmlal_high_s8(p, w[1], a[1])
}

/// `sum(w[k] * a[k])` over 32 pairs of any int8 values, as four i32 lanes (each 16-bit product is
/// widened before it is added to another).
#[target_feature(enable = "neon")]
#[inline]
fn prod_i32(w: [int8x16_t; 2], a: [int8x16_t; 2]) -> int32x4_t {
    let s = vpaddlq_s16(vmull_s8(vget_low_s8(w[0]), vget_low_s8(a[0])));
    let s = vpadalq_s16(s, vmull_high_s8(w[0], a[0]));
    let s = vpadalq_s16(s, vmull_s8(vget_low_s8(w[1]), vget_low_s8(a[1])));
    vpadalq_s16(s, vmull_high_s8(w[1], a[1]))
}

/// `sum(w[k] * a[k])` over 32 pairs with SDOT, as four i32 lanes.
#[target_feature(enable = "neon")]
#[inline]
fn prod_dp(w: [int8x16_t; 2], a: [int8x16_t; 2]) -> int32x4_t {
    sdot(sdot(vdupq_n_s32(0), w[0], a[0]), w[1], a[1])
}

/// The four sums `[Σ w0·a0, Σ w1·a1, Σ w2·a2, Σ w3·a3]` of four 32-element dot products, exact.
/// `maxw` (a constant after inlining) bounds every |w| (the activations are any int8): it decides
/// how long partial sums may stay in i16 lanes.
#[target_feature(enable = "neon")]
#[inline]
fn sums4<const DP: bool>(maxw: i32, w: [[int8x16_t; 2]; 4], a: [[int8x16_t; 2]; 4]) -> int32x4_t {
    if DP || maxw > 31 {
        let q: [int32x4_t; 4] = core::array::from_fn(|r| {
            if DP {
                prod_dp(w[r], a[r])
            } else {
                prod_i32(w[r], a[r])
            }
        });
        vpaddq_s32(vpaddq_s32(q[0], q[1]), vpaddq_s32(q[2], q[3]))
    } else {
        // Four products per lane, then eight: 8 · 31 · 128 < 2^15.
        let p: [int16x8_t; 4] = core::array::from_fn(|r| prod_i16(w[r], a[r]));
        let x01 = vpaddq_s16(p[0], p[1]);
        let x23 = vpaddq_s16(p[2], p[3]);
        if maxw <= 15 {
            // Sixteen per lane: 16 · 15 · 128 < 2^15 (and 16 · 8 · 128 = 2^14 for Q4_0's -8..7).
            vpaddlq_s16(vpaddq_s16(x01, x23))
        } else {
            vpaddq_s32(vpaddlq_s16(x01), vpaddlq_s16(x23))
        }
    }
}

/// One 32-element dot product, exact (`maxw` as in [`sums4`]).
#[target_feature(enable = "neon")]
#[inline]
fn sum1<const DP: bool>(maxw: i32, w: [int8x16_t; 2], a: [int8x16_t; 2]) -> i32 {
    if DP {
        vaddvq_s32(prod_dp(w, a))
    } else if maxw > 63 {
        vaddvq_s32(prod_i32(w, a))
    } else {
        vaddlvq_s16(prod_i16(w, a))
    }
}

/// Four zeroed vectors for a group's SDOT accumulators (`w`, `a`: its weights and activations),
/// by 64-bit MOVIs (which in-order cores such as Cortex-A55 issue at half the cost of the
/// 128-bit MOVI the compiler writes for a zero vector). `w` and `a` are not read: they make each
/// call's zeros its own, in the loop and in every row and column (hoisted out of a loop, or
/// shared by the rows of one activation, the zeros would be copied for each SDOT by 128-bit
/// MOVs).
#[inline(always)]
fn zeros4(w: int8x16_t, a: int8x16_t) -> [int32x4_t; 4] {
    let (z0, z1, z2, z3);
    // SAFETY: MOVIs on registers only: no memory, no flags.
    unsafe {
        asm!(
            "movi {0:d}, #0\n movi {1:d}, #0\n movi {2:d}, #0\n movi {3:d}, #0 // {4:v} {5:v}",
            out(vreg) z0,
            out(vreg) z1,
            out(vreg) z2,
            out(vreg) z3,
            in(vreg) w,
            in(vreg) a,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    [z0, z1, z2, z3]
}

/// `[Σ w0·a0, .., Σ w3·a3]` for four 16-element groups, exact; every |w| ≤ `maxw` ≤ 63.
#[target_feature(enable = "neon")]
#[inline]
fn sums4x16<const DP: bool>(maxw: i32, w: [int8x16_t; 4], a: [int8x16_t; 4]) -> int32x4_t {
    debug_assert!(maxw <= 63);
    if DP {
        let z = zeros4(w[0], a[0]);
        let q: [int32x4_t; 4] = core::array::from_fn(|k| sdot(z[k], w[k], a[k]));
        vpaddq_s32(vpaddq_s32(q[0], q[1]), vpaddq_s32(q[2], q[3]))
    } else {
        // Two products per lane, then four: 4 · 63 · 128 < 2^15.
        let p: [int16x8_t; 4] = core::array::from_fn(|k| {
            vmlal_high_s8(vmull_s8(vget_low_s8(w[k]), vget_low_s8(a[k])), w[k], a[k])
        });
        let x01 = vpaddq_s16(p[0], p[1]);
        let x23 = vpaddq_s16(p[2], p[3]);
        if maxw <= 31 {
            // Eight per lane: 8 · 31 · 128 < 2^15.
            vpaddlq_s16(vpaddq_s16(x01, x23))
        } else {
            vpaddq_s32(vpaddlq_s16(x01), vpaddlq_s16(x23))
        }
    }
}

#[cfg(test)]
mod tests;
