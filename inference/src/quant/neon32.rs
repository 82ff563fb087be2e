//! AArch32 NEON kernels (32-bit Arm, ARMv7-A with NEON and VFPv4: Cortex-A7 on the Raspberry Pi 2
//! and the Allwinner H3): SIMD twins of the scalar reference kernels in [`super::scalar`] and of
//! the activation quantizers in [`super::act`], returning bit-identical results (`to_bits()` equal)
//! for every input without NaNs.
//!
//! `core::arch::arm`'s NEON intrinsics are unstable, so every kernel is one `asm!` block that runs
//! the whole loop (the 32-wide dot products) or one block's vector work (the quantizers), as the
//! RVV set does. The crate must be built with NEON and 32 double registers enabled (`.cargo/config.toml`
//! for `armv7-unknown-linux-gnueabihf`; `-C target-feature=+neon,+d32,+vfp4` with
//! `-C target-cpu=cortex-a7` for the bare-metal `armv7a-none-eabi`): the `asm!` blocks name and
//! clobber q registers, which needs those features. Stable Rust hides Arm target features from
//! `cfg`, so the module is selected by `target_arch = "arm"` alone.
//!
//! Which kernels are NEON, which scalar:
//! - NEON: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 · Q8_0/Q8_1, one row and four rows (`q32`: the whole
//!   loop in one `asm!`); Q4_K and Q6_K · Q8_K (`kquant`: the integer sums of each super-block
//!   in one `asm!`, the scales and float work in Rust as the scalar code); the Q8_0 and Q8_1
//!   activation quantizers (`quantize`).
//! - Scalar (the `Kernels::SCALAR` entries): Q2_K, Q3_K, Q5_K, the Q8_K quantizer, the float dot
//!   products (F32, F16, BF16, `dot_f32_f16`), the attention, `to_f16`.
//! - Batches: the types above with NEON kernels column by column through them
//!   (`None`: `Kernels::dot_rows_batch`'s fallback), the others through the scalar batched kernels.
//!
//! How equality with the scalar code is kept:
//! - Integer sums are exact in any order: each block's 32 products are formed with VMULL.S8 /
//!   VMLAL.S8 into i16 lanes (each kernel states how many products a lane may hold) and widened
//!   with VPADDL/VPADAL.S16 before they could overflow; the lanes are then added with VPADD (AArch32
//!   has no add-across-vector).
//! - Every float operation is a VFP instruction on S registers, one per scalar operation, in the
//!   scalar order and form (VMUL and VADD kept apart, never VMLA/VFMA). This matters beyond order:
//!   AArch32 NEON float arithmetic always flushes subnormals to zero and uses the default NaN,
//!   whereas VFP follows FPSCR (IEEE under Linux and after boot), as the compiled scalar code does.
//!   The only NEON float instruction in the dot products is VCVT.F32.S32 of block sums
//!   (|sum| < 2^24: exact, and never subnormal).
//! - f16 → f32 is VCVTB/VCVTT.F32.F16 (VFPv4's half-precision conversion, exact), the same value as
//!   `half` gives when FPSCR.AHP is 0 (IEEE half precision); [`available`] also checks that.
//! - The quantizers find the block's largest |x| and form `x · id + 1.5·2^23` with NEON, then keep
//!   the low byte, as `nearest_int` does; the scale and its f16 rounding are the scalar Rust
//!   expressions. NEON's flush of subnormals can change those results only in a block whose
//!   largest |x| is below 2^-100 (see `quantize`): such a block is quantized by the scalar code.
//!
//! Which core has NEON: [`mvfr1_has_neon`] (MVFR1, read by the kernel at boot) and
//! [`hwcap_has_neon`] (Linux `AT_HWCAP`) decide, `quant::set_features` records the answer once at
//! boot, and `Kernels::best()` / `Kernels::available()` follow it ([`runs_on`]; nothing recorded:
//! the scalar set).

mod kquant;
mod q32;
mod quantize;

pub use kquant::{vec_dot_q4_k_q8_k, vec_dot_q6_k_q8_k};
pub use q32::{
    vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_x4, vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_x4,
    vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_x4, vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_x4,
    vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_x4,
};
pub use quantize::{quantize_q8_0, quantize_q8_1};

use super::{Features, GgmlType, Kernels, RowKernels, TypeKernels};

/// Whether a CPU with `f` runs [`KERNELS`]: the cores have NEON (the boot code records it from
/// MVFR1, [`mvfr1_has_neon`]; tests under Linux from `AT_HWCAP`, [`hwcap_has_neon`]), and only
/// while FPSCR gives IEEE half precision ([`fpscr_is_ieee`]), which the f16 conversions of the
/// kernels need.
pub fn runs_on(f: &Features) -> bool {
    f.neon && fpscr_is_ieee(read_fpscr())
}

/// FPSCR of the running core (user mode may read it).
pub fn read_fpscr() -> u32 {
    let v: u32;
    // SAFETY: VMRS of FPSCR reads a register and touches no memory; every core this crate is
    // built for has VFP (the build enables it).
    unsafe {
        core::arch::asm!("vmrs {v}, fpscr", v = out(reg) v, options(nomem, nostack, preserves_flags));
    }
    v
}

/// Whether FPSCR `fpscr` converts half precision the IEEE way: AHP (bit 26) clear. (Flush-to-zero
/// and rounding mode govern the scalar code's VFP arithmetic exactly as the kernels', so they need
/// not be checked.)
pub fn fpscr_is_ieee(fpscr: u32) -> bool {
    fpscr & (1 << 26) == 0
}

/// Whether MVFR1 (`mvfr1`, read with `vmrs` at PL1) announces what the kernels use: NEON loads and
/// stores (SIMDLS, bits 11:8), integer (SIMDInt, 15:12) and single-precision (SIMDSP, 19:16)
/// operations, and VFP half-precision conversion (FPHP, 27:24). Cortex-A7 reads 0x1111_1111;
/// Cortex-A8 (no VCVTB) 0x0001_1111.
pub fn mvfr1_has_neon(mvfr1: u32) -> bool {
    [8, 12, 16, 24].iter().all(|&s| (mvfr1 >> s) & 0xf >= 1)
}

/// Whether Linux's `AT_HWCAP` announces NEON (bit 12), VFPv4 (bit 16: the half-precision
/// conversions) and 32 double registers (VFPD32, bit 19).
pub fn hwcap_has_neon(hwcap: u32) -> bool {
    const NEEDED: u32 = 1 << 12 | 1 << 16 | 1 << 19;
    hwcap & NEEDED == NEEDED
}

/// The AArch32 NEON set, named `neon` like the aarch64 one (a board's `kernels = neon` means the
/// same on both): the 32-wide dot products (one row and four rows), Q4_K, Q6_K and the Q8_0 / Q8_1
/// quantizers are NEON, the rest is the scalar set's. Only for cores with NEON: take it from
/// `Kernels::best()` / `Kernels::available()`, which consult [`runs_on`].
pub const KERNELS: Kernels = {
    use GgmlType as G;
    use TypeKernels as T;
    type R<A> = RowKernels<A>;
    // Batches of the types with NEON kernels go column by column through them (one row and four
    // rows; `Kernels::dot_rows_batch`'s fallback: the rows stay in the cache); the other types
    // keep the scalar kernels, whose batched ones decode each block once for all columns.
    Kernels {
        name: "neon",
        quantize_q8_0,
        quantize_q8_1,
        ..Kernels::SCALAR
    }
    .with(
        G::Q4_0,
        T::Q8_0(R::dot(vec_dot_q4_0_q8_0).x4(vec_dot_q4_0_q8_0_x4)),
    )
    .with(
        G::Q4_1,
        T::Q8_1(R::dot(vec_dot_q4_1_q8_1).x4(vec_dot_q4_1_q8_1_x4)),
    )
    .with(
        G::Q5_0,
        T::Q8_0(R::dot(vec_dot_q5_0_q8_0).x4(vec_dot_q5_0_q8_0_x4)),
    )
    .with(
        G::Q5_1,
        T::Q8_1(R::dot(vec_dot_q5_1_q8_1).x4(vec_dot_q5_1_q8_1_x4)),
    )
    .with(
        G::Q8_0,
        T::Q8_0(R::dot(vec_dot_q8_0_q8_0).x4(vec_dot_q8_0_q8_0_x4)),
    )
    .with(G::Q4K, T::Q8K(R::dot(vec_dot_q4_k_q8_k)))
    .with(G::Q6K, T::Q8K(R::dot(vec_dot_q6_k_q8_k)))
};

#[cfg(test)]
pub(crate) mod tests;
