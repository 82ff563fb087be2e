//! RVV 1.0 kernels (riscv64 harts with the V extension): SIMD twins of the scalar reference kernels
//! in [`super::scalar`] returning bit-identical results (`to_bits()` equal) for every input, at any
//! VLEN ≥ 128 (the code reads the vector length from `vsetvli` and never assumes one).
//!
//! `core::arch::riscv64` has no vector intrinsics on stable Rust, so every kernel is one `asm!` block
//! (wrapped in `.option push` / `.option arch, +v` / `.option pop`, see `rvv_asm!`) that runs the
//! whole loop; the crate itself is compiled without `+v`, so the compiler never emits a vector
//! instruction of its own and a hart without V only ever reaches these kernels through wrongly
//! recorded features (`quant::set_features`).
//!
//! How equality with the scalar code is kept:
//! - Integer sums are exact in any order. Each block's integer dot product is computed with widening
//!   multiply-accumulates whose partial sums provably fit their lanes (each kernel states its bound).
//! - The float work per block is one vector instruction per scalar operation, in the scalar order and
//!   form (multiply and add kept apart, never `vfmacc`), with one block per lane; the running sum is
//!   then `vfredosum`, the *ordered* reduction, which adds the lanes to the running sum one by one in
//!   element order: exactly the scalar `sumf += term` loop.
//! - f16 → f32 is done with integer operations and one exact multiplication by 2^112 (base V has no
//!   half-precision conversion); it gives the same value as `half` for every f16 (subnormals, ±0,
//!   ±inf; NaN stays NaN).
//! - The float dot products keep the scalar code's partial sums: lane `k` of `acc[i & 3]` is a strided
//!   stream of elements `k, k + 4, ...`, summed with `vfredosum` in order.
//!
//! Layout (`q32`, `kquant`, `float`, `quantize`):
//! - `q32` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 · Q8_0/Q8_1, one row or four): up to VLEN/8 blocks per pass,
//!   "transposed": a strided segment load (`vlsseg8e8`, stride = block size) puts byte `j` of every
//!   block into register `j` (element `i` = block `i`), so a block's 32 products land in one lane of
//!   several registers and no horizontal reduction is needed; the per-block float work then runs
//!   with one block per lane. All weight loads are byte loads, so rows may sit at any address.
//!   Batched (`q32::mat`, rows · several activation columns): per row and pass the weights are
//!   decoded once to int8 into a scratch buffer laid out as whole registers (byte `j` of block `i`
//!   at `j · VLENB + i`, the scales as f32 vectors), then each column reloads them with unit-stride
//!   whole-register loads and runs the one-row kernel's integer and float phases, its `vfredosum`
//!   going to that column's output; two rows at a time share each column's activation loads. VLEN ≤ 512 (the scratch's size); longer vectors fall back to
//!   the one-row kernels column by column.
//! - `kquant` (Q2_K..Q6_K · Q8_K): one super-block at a time, 16 or 32 values per vector; products
//!   widened to e16, multiplied by their group's scale into e32 lanes, one reduction per super-block.
//!   Each kernel is a per-block decode (f16 scales, 6-bit scales and mins) and a per-block term;
//!   batched, the decode runs once per row and block and the term once per column (Q6_K also
//!   decodes its 6-bit values once, to int8, or where VLEN ≥ 512 to the values times their scales
//!   as i16, and each column reads them with unit-stride loads). Q6_K where VLEN ≥ 512: 32 values
//!   per vector (e8 mf2), the 16-value scales applied under a mask.
//! - `float`: F32/F16/BF16 dot products and the attention of one head (`q·k` with the scalar code's
//!   eight partial sums as eight lanes; the output updates elementwise).
//! - `quantize`: Q8_0, Q8_1, Q8_K activations (same bytes as `act`).
//!
//! The 32-wide kernels (one row, four, batched) and the quantizers are macro text
//! (`q32::q32_kernels!`, `q32::mat::mat_kernels!`, `quantize::quantizers!`) that takes the `asm!`
//! wrapper as an argument: `rvv_asm` here; `super::xtheadvector` expands the same text with
//! `xtv_asm` for T-Head's RVV 0.7.1. Changing it changes both sets: keep to what both mean alike
//! (the `xtheadvector` module docs list the differences; its tests run under xuantie-qemu).
//!
//! Masked and partial operations that must leave other lanes alone run under `mu` / `tu`; the
//! tests also pass with QEMU's `rvv_ta_all_1s=true,rvv_ma_all_1s=true` (agnostic lanes overwritten).
//!
//! Which hart has V: [`isa_has_v`] (a device tree `riscv,isa` string) and [`hwcap_has_v`] (Linux
//! `AT_HWCAP`) decide, `quant::set_features` records the answer once at boot, and
//! `Kernels::best()` / `Kernels::available()` follow it ([`runs_on`]; nothing recorded: the scalar
//! set). The boot code must also have turned the vector unit on (`sstatus.VS`).

mod float;
mod kquant;
pub(crate) mod q32;
pub(crate) mod quantize;

pub use float::{attend_head, dot_f32_f16, vec_dot_bf16_bf16, vec_dot_f16_f16, vec_dot_f32_f32};
pub use kquant::{
    mat_q2_k_q8_k, mat_q3_k_q8_k, mat_q4_k_q8_k, mat_q5_k_q8_k, mat_q6_k_q8_k, vec_dot_q2_k_q8_k,
    vec_dot_q3_k_q8_k, vec_dot_q4_k_q8_k, vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k,
};
pub use q32::{
    vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_x4, vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_x4,
    vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_x4, vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_x4,
    vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_x4,
};
pub use quantize::{quantize_q8_0, quantize_q8_1, quantize_q8_k};

use super::scalar::with_q32;
use super::table::{with_floats, with_k_quants};
use super::{Features, Kernels};

/// Whether a CPU with `f` runs [`KERNELS`]: the harts have V (the boot code records it from the
/// device tree's ISA string, [`isa_has_v`]; tests under Linux from `AT_HWCAP`, [`hwcap_has_v`])
/// and not T-Head's XTheadVector, whose encodings overlap V's with other meanings (a C906 may
/// well announce `v`; see `super::xtheadvector`).
pub fn runs_on(f: &Features) -> bool {
    f.rvv && !f.xtheadvector
}

/// Whether a device tree `riscv,isa` string (`rv64imafdcv_zicsr_...`, any case, with or without
/// version numbers such as `v1p0`) names the V extension among its single-letter extensions. Zve*
/// subsets (`_zve64d`) and vendor extensions (`_xtheadvector`) do not count: the kernels need V.
/// (With the newer `riscv,isa-extensions` list, V is the entry `"v"`.)
pub fn isa_has_v(isa: &str) -> bool {
    let b = isa.as_bytes();
    match b.get(..4) {
        Some(p) if p.eq_ignore_ascii_case(b"rv64") || p.eq_ignore_ascii_case(b"rv32") => {}
        _ => return false,
    }
    // The base letter (i, e or g) and single-letter extensions, each maybe with a version (`2p1`)
    // and maybe separated by '_'; a multi-letter extension (`z...`, `s...`, `x...`) runs to the
    // next '_'.
    for token in b[4..].split(|&c| c == b'_') {
        let mut prev_digit = false;
        for &c in token {
            match c.to_ascii_lowercase() {
                b's' | b'x' | b'z' => break,
                b'0'..=b'9' => prev_digit = true,
                // `p` between digits separates a version's major and minor numbers.
                b'p' if prev_digit => prev_digit = false,
                b'v' => return true,
                _ => prev_digit = false,
            }
        }
    }
    false
}

/// Whether Linux's `AT_HWCAP` (bit `letter - 'A'` per single-letter extension) announces V.
pub fn hwcap_has_v(hwcap: u64) -> bool {
    hwcap & (1 << (b'V' - b'A')) != 0
}

/// The RVV set: every entry of the table (dot products of all 13 weight types, the four-row
/// variants of the 32-wide ones, the activation quantizers, the attention) is an RVV twin of the
/// scalar one; batched kernels for the 32-wide types and the K-quants (float weights: column by
/// column). Only for harts with V: take it from `Kernels::best()` / `Kernels::available()`,
/// which consult [`runs_on`].
pub const KERNELS: Kernels = {
    let set = Kernels {
        name: "rvv",
        // (f32 → f16 needs Zvfhmin, which RVV 1.0 cores need not have.)
        to_f16: crate::ops::to_f16,
        attend_head,
        dot_f32_f16,
        quantize_q8_0,
        quantize_q8_1,
        quantize_q8_k,
        ..Kernels::SCALAR
    };
    // Float weights: one row; a batch goes column by column.
    with_k_quants!(with_q32!(with_floats!(set, self), self, q32), self)
};

/// VLENB, the bytes of one vector register (CSR 0xc22; only on harts with V).
fn vlenb() -> usize {
    let v: usize;
    // SAFETY: reads a CSR that every hart with V has; reached only on harts with V.
    unsafe { core::arch::asm!("csrr {}, 0xc22", out(reg) v, options(nomem, nostack)) };
    v
}

/// `asm!` with the vector extension enabled for the assembler and every vector register declared
/// clobbered (vl and vtype are not registers the compiler allocates; the crate is built without
/// `+v`, so no compiled code keeps state in them). Usage:
/// `rvv_asm!([template pieces...], [operands...], [options...])`.
#[rustfmt::skip]
macro_rules! rvv_asm {
    ([$($tpl:tt)*], [$($ops:tt)*], [$($opt:tt)*]) => {
        core::arch::asm!(
            ".option push",
            ".option arch, +v",
            $($tpl)*
            ".option pop",
            $($ops)*
            out("v0") _, out("v1") _, out("v2") _, out("v3") _,
            out("v4") _, out("v5") _, out("v6") _, out("v7") _,
            out("v8") _, out("v9") _, out("v10") _, out("v11") _,
            out("v12") _, out("v13") _, out("v14") _, out("v15") _,
            out("v16") _, out("v17") _, out("v18") _, out("v19") _,
            out("v20") _, out("v21") _, out("v22") _, out("v23") _,
            out("v24") _, out("v25") _, out("v26") _, out("v27") _,
            out("v28") _, out("v29") _, out("v30") _, out("v31") _,
            options($($opt)*)
        )
    };
}
pub(crate) use rvv_asm;

// The K-quant and float kernels' text and decoders, which the XTheadVector set instantiates too
// (`kquant::kq_kernels!`, `float::float_kernels!`).
pub(crate) use float::{float_kernels, lane_len, strided_dot};
pub(crate) use kquant::{
    dm_k_kernels, dm_summs, dm_term, f16_at, kmat, kq16_asm, kq16_isum, kq_asm, kq_entries,
    kq_kernels, kq_mat, kq_sum, q2_k_scales, q2k_fns, q2k_part, q3_k_scales, q3k_fns, q3k_part,
    q4_k_scales, q4k_pair, q5k_pair, q6k_dec, q6k_fns, q6k_io, q6k_vals, Q3KScales, Q4KScales,
    Q6KDec,
};

/// f16 bits → f32, exactly as `half::f16::to_f32` (for every non-NaN value; NaN stays NaN), for
/// the e32 lanes of a register group that holds `h << 13` (zero-extended 16-bit `h`; e.g. from
/// `vwmulu.vx dst, h, 8192`), under the current vtype, which must be SEW = 32 and mask-undisturbed
/// (`mu`: a masked op below must leave the other lanes alone). `$bits` (the input, destroyed)
/// and `$out` are register groups, `$out` must not contain v0 (the mask is built there). Operands
/// `{mag}` = 0x0fff_e000, `{big}` = 0x0f7f_e000, `{inf}` = 0x7f80_0000, `{k112}` = 2^112 (f32).
///
/// `(h & 0x7fff) << 13` read as an f32 is the f16's magnitude times 2^-112 (normal or subnormal),
/// so one multiplication by 2^112 (exact: no rounding, no overflow) restores it; exponent 31
/// (inf/NaN) is fixed up by setting all f32 exponent bits; the sign is copied from bit 15.
#[rustfmt::skip]
macro_rules! f16_bits_to_f32 {
    ($bits:literal, $out:literal) => {
        concat!(
            "vand.vx ", $out, ", ", $bits, ", {mag}\n",
            "vmsgtu.vx v0, ", $out, ", {big}\n",
            "vfmul.vf ", $out, ", ", $out, ", {k112}\n",
            "vor.vx ", $out, ", ", $out, ", {inf}, v0.t\n",
            "vsll.vi ", $bits, ", ", $bits, ", 3\n",
            "vfsgnj.vv ", $out, ", ", $out, ", ", $bits, "\n",
        )
    };
}
pub(crate) use f16_bits_to_f32;

/// 2^112 as f32 (see [`f16_bits_to_f32`]).
pub(crate) const K112: f32 = f32::from_bits(0x7780_0000);
/// Mask of an f16 magnitude shifted left by 13.
pub(crate) const MAG: usize = 0x0fff_e000;
/// Largest finite f16 magnitude (0x7bff) shifted left by 13.
pub(crate) const BIG: usize = 0x0f7f_e000;
/// f32 exponent bits.
pub(crate) const INF: usize = 0x7f80_0000;

#[cfg(test)]
pub(crate) mod tests;
