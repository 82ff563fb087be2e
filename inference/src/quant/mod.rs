//! Weight formats and the kernels that multiply them with activations.
//!
//! - [`types`]: GGUF type ids, block geometry, the activation format each weight type pairs with;
//! - [`act`]: activation blocks (Q8_0, Q8_1, Q8_K) and their quantization;
//! - [`scalar`]: the reference kernels (dequantize, dot products);
//! - `neon` (aarch64): bit-identical NEON twins of the dot products, the activation quantizers and
//!   the attention, plain (SMULL/SMLAL) and with SDOT (`Kernels::NEON`, `Kernels::NEON_DOTPROD`);
//! - `neon32` (32-bit Arm, Cortex-A7): `asm!` NEON twins of the 32-wide dot products, Q4_K, Q6_K
//!   and the Q8_0 / Q8_1 quantizers (`Kernels::NEON32`, named `neon` as on aarch64);
//! - [`Kernels`]: the dispatch table the model calls through. `Kernels::SCALAR` is the portable set;
//!   architecture sets (NEON, RVV) replace entries with SIMD twins of the scalar functions and are
//!   chosen at run time from the CPU's features. This module is the only place in `inference` where
//!   `cfg(target_arch)` may appear.

pub mod act;
#[cfg(target_arch = "x86_64")]
pub mod avx2;
pub mod batch;
#[cfg(test)]
#[path = "kernel_tests/batch.rs"]
mod batch_tests;
#[cfg(all(
    test,
    any(
        all(target_arch = "aarch64", target_feature = "neon"),
        target_arch = "arm",
        target_arch = "riscv64",
        target_arch = "x86_64"
    )
))]
mod kernel_tests;
#[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
pub mod neon;
#[cfg(target_arch = "arm")]
pub mod neon32;
#[cfg(target_arch = "riscv64")]
pub mod rvv;
pub mod scalar;
#[cfg(test)]
#[path = "kernel_tests/gen.rs"]
// Some generators serve only the SIMD sets' tests, which do not exist on every target.
#[allow(dead_code)]
mod testgen;
pub mod types;

pub use act::{ActBuf, ActLenError, Acts, BlockQ8K, BlockQ8_0, BlockQ8_1};
pub use batch::{ActsBatch, Mat, MAX_BATCH};
pub use types::{ActFormat, GgmlType, QK32, QK_K};

use core::fmt;

/// A dot product could not be computed: the arguments disagree (a caller bug or a malformed tensor),
/// reported instead of reading out of bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelError {
    /// The activations are in `found` format but `ty` weights need `expected`.
    ActFormat {
        ty: GgmlType,
        expected: ActFormat,
        found: ActFormat,
    },
    /// The row holds `row_bytes` bytes but `n` elements of `ty` need `expected` bytes.
    RowLength {
        ty: GgmlType,
        n: usize,
        row_bytes: usize,
        expected: Option<u64>,
    },
    /// The activations hold `acts` values but the row has `n`.
    ActLength { n: usize, acts: usize },
    /// A batch of `cols` columns with an output of `out` values for `rows` rows (at most
    /// [`MAX_BATCH`] columns, and `rows * cols` outputs).
    Batch {
        cols: usize,
        rows: usize,
        out: usize,
    },
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::ActFormat {
                ty,
                expected,
                found,
            } => {
                write!(
                    f,
                    "{ty} weights need {expected:?} activations, got {found:?}"
                )
            }
            KernelError::RowLength {
                ty,
                n,
                row_bytes,
                expected,
            } => write!(
                f,
                "a {ty} row of {n} elements needs {expected:?} bytes, got {row_bytes}"
            ),
            KernelError::ActLength { n, acts } => {
                write!(f, "row has {n} elements but activations have {acts}")
            }
            KernelError::Batch { cols, rows, out } => write!(
                f,
                "a batch of {cols} columns (at most {MAX_BATCH}) over {rows} rows cannot fill an output of {out}"
            ),
        }
    }
}

/// Check that `rows` whole rows of `n` elements of `ty` can be multiplied with `acts`; returns the
/// bytes per row.
pub fn check_dot_args(
    ty: GgmlType,
    n: usize,
    w_len: usize,
    rows: usize,
    acts: &Acts<'_>,
) -> Result<usize, KernelError> {
    if acts.format() != ty.act_format() {
        return Err(KernelError::ActFormat {
            ty,
            expected: ty.act_format(),
            found: acts.format(),
        });
    }
    if acts.len() != n {
        return Err(KernelError::ActLength {
            n,
            acts: acts.len(),
        });
    }
    let rb = ty.row_bytes(n as u64);
    match rb.and_then(|r| r.checked_mul(rows as u64)) {
        Some(total) if total == w_len as u64 => Ok(rb.unwrap_or(0) as usize),
        _ => Err(KernelError::RowLength {
            ty,
            n,
            row_bytes: w_len,
            expected: rb,
        }),
    }
}

type DotQ8_0 = fn(&[u8], &[BlockQ8_0]) -> f32;
type DotQ8_1 = fn(&[u8], &[BlockQ8_1]) -> f32;
type DotQ8K = fn(&[u8], &[BlockQ8K]) -> f32;
/// Four consecutive rows of `rb` bytes each (`w` holds `4 * rb` bytes) · the activations, into
/// `out`; each `out[r]` equals the one-row kernel on row `r`, bit for bit.
pub type DotX4Q8_0 = fn(&[u8], usize, &[BlockQ8_0], &mut [f32; 4]);
/// As [`DotX4Q8_0`], for Q8_1 activations.
pub type DotX4Q8_1 = fn(&[u8], usize, &[BlockQ8_1], &mut [f32; 4]);
/// For a four-row kernel handed fewer than four whole rows of `rb` bytes: each row as far as it
/// goes through the one-row kernel `one`, and `true`; `false` (and nothing done) when `w` holds
/// four whole rows. (Never the case through [`Kernels::dot_rows`].)
#[cfg(any(target_arch = "arm", target_arch = "riscv64"))]
pub(crate) fn short_rows4<A>(
    w: &[u8],
    rb: usize,
    a: &[A],
    out: &mut [f32; 4],
    one: fn(&[u8], &[A]) -> f32,
) -> bool {
    if rb.checked_mul(4).is_some_and(|n| w.len() >= n) {
        return false;
    }
    for (r, o) in out.iter_mut().enumerate() {
        let row = w.get(r * rb..).unwrap_or(&[]);
        *o = one(&row[..rb.min(row.len())], a);
    }
    true
}

/// One attention head, with the arguments of [`crate::ops::attend_head`].
pub type AttendHead = fn(&mut [f32], &[f32], &crate::ops::Head<'_>);

/// A set of kernels, one per weight type, plus the float operations that have SIMD twins. Every
/// entry of an architecture set computes exactly what the scalar entry computes (`to_bits()`
/// equal; the shared harness in `kernel_tests` checks every set the CPU runs on random, extreme and
/// fixture inputs), so a board prints what the PC runner prints.
#[derive(Clone, Copy)]
pub struct Kernels {
    pub name: &'static str,
    pub f32_f32: fn(&[u8], &[f32]) -> f32,
    pub f16_f16: fn(&[u8], &[u16]) -> f32,
    pub bf16_bf16: fn(&[u8], &[u16]) -> f32,
    pub q4_0_q8_0: DotQ8_0,
    pub q4_1_q8_1: DotQ8_1,
    pub q5_0_q8_0: DotQ8_0,
    pub q5_1_q8_1: DotQ8_1,
    pub q8_0_q8_0: DotQ8_0,
    pub q2_k_q8_k: DotQ8K,
    pub q3_k_q8_k: DotQ8K,
    pub q4_k_q8_k: DotQ8K,
    pub q5_k_q8_k: DotQ8K,
    pub q6_k_q8_k: DotQ8K,
    /// Four-row variants (activations loaded once for four rows), used by [`Kernels::dot_rows`];
    /// `None` where the set has none.
    pub q4_0_q8_0_x4: Option<DotX4Q8_0>,
    pub q4_1_q8_1_x4: Option<DotX4Q8_1>,
    pub q5_0_q8_0_x4: Option<DotX4Q8_0>,
    pub q5_1_q8_1_x4: Option<DotX4Q8_1>,
    pub q8_0_q8_0_x4: Option<DotX4Q8_0>,
    /// Activation quantizers (twins of [`act::quantize_q8_0`], `_q8_1`, `_q8_k`: the same bytes).
    pub quantize_q8_0: fn(&[f32], &mut [BlockQ8_0]),
    pub quantize_q8_1: fn(&[f32], &mut [BlockQ8_1]),
    pub quantize_q8_k: fn(&[f32], &mut [BlockQ8K]),
    /// One query · one f16 key ([`crate::ops::dot_f32_f16`]), the inner loop of the attention.
    pub dot_f32_f16: fn(&[f32], &[u16]) -> f32,
    /// Online-softmax attention of one head over the f16 KV cache ([`crate::ops::attend_head`]).
    pub attend_head: AttendHead,
    /// f32 to f16 bits, round to nearest even ([`crate::ops::to_f16`]): the K and V cache stores.
    pub to_f16: fn(&mut [u16], &[f32]),
    /// Matrix × several columns (prompt batches), one entry per weight type.
    pub mat: MatKernels,
}

/// Batched kernels ([`batch`]): rows · `cols` activation columns, each weight block decoded once;
/// output `(r, c)` equals the one-row kernel on row `r` and column `c`, bit for bit. `None` where
/// a set has no batched kernel of its own: [`Kernels::dot_rows_batch`] then runs the set's
/// one-row kernels column by column over a few rows at a time (the rows stay in the cache, and
/// the weights are still read from the storage once per batch).
#[derive(Clone, Copy, Debug)]
pub struct MatKernels {
    pub f32_f32: Option<Mat<f32>>,
    pub f16_f16: Option<Mat<u16>>,
    pub bf16_bf16: Option<Mat<u16>>,
    pub q4_0_q8_0: Option<Mat<BlockQ8_0>>,
    pub q4_1_q8_1: Option<Mat<BlockQ8_1>>,
    pub q5_0_q8_0: Option<Mat<BlockQ8_0>>,
    pub q5_1_q8_1: Option<Mat<BlockQ8_1>>,
    pub q8_0_q8_0: Option<Mat<BlockQ8_0>>,
    pub q2_k_q8_k: Option<Mat<BlockQ8K>>,
    pub q3_k_q8_k: Option<Mat<BlockQ8K>>,
    pub q4_k_q8_k: Option<Mat<BlockQ8K>>,
    pub q5_k_q8_k: Option<Mat<BlockQ8K>>,
    pub q6_k_q8_k: Option<Mat<BlockQ8K>>,
}

impl MatKernels {
    /// No batched kernels: every type column by column through the one-row kernels.
    pub const NONE: MatKernels = MatKernels {
        f32_f32: None,
        f16_f16: None,
        bf16_bf16: None,
        q4_0_q8_0: None,
        q4_1_q8_1: None,
        q5_0_q8_0: None,
        q5_1_q8_1: None,
        q8_0_q8_0: None,
        q2_k_q8_k: None,
        q3_k_q8_k: None,
        q4_k_q8_k: None,
        q5_k_q8_k: None,
        q6_k_q8_k: None,
    };

    /// The scalar batched kernels (`batch::mat_*`).
    pub const SCALAR: MatKernels = MatKernels {
        f32_f32: Some(batch::mat_f32_f32),
        f16_f16: Some(batch::mat_f16_f16),
        bf16_bf16: Some(batch::mat_bf16_bf16),
        q4_0_q8_0: Some(batch::mat_q4_0_q8_0),
        q4_1_q8_1: Some(batch::mat_q4_1_q8_1),
        q5_0_q8_0: Some(batch::mat_q5_0_q8_0),
        q5_1_q8_1: Some(batch::mat_q5_1_q8_1),
        q8_0_q8_0: Some(batch::mat_q8_0_q8_0),
        q2_k_q8_k: Some(batch::mat_q2_k_q8_k),
        q3_k_q8_k: Some(batch::mat_q3_k_q8_k),
        q4_k_q8_k: Some(batch::mat_q4_k_q8_k),
        q5_k_q8_k: Some(batch::mat_q5_k_q8_k),
        q6_k_q8_k: Some(batch::mat_q6_k_q8_k),
    };
}

impl fmt::Debug for Kernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernels")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Kernels {
    /// The portable scalar reference set.
    pub const SCALAR: Kernels = Kernels {
        name: "scalar",
        f32_f32: scalar::vec_dot_f32_f32,
        f16_f16: scalar::vec_dot_f16_f16,
        bf16_bf16: scalar::vec_dot_bf16_bf16,
        q4_0_q8_0: scalar::vec_dot_q4_0_q8_0,
        q4_1_q8_1: scalar::vec_dot_q4_1_q8_1,
        q5_0_q8_0: scalar::vec_dot_q5_0_q8_0,
        q5_1_q8_1: scalar::vec_dot_q5_1_q8_1,
        q8_0_q8_0: scalar::vec_dot_q8_0_q8_0,
        q2_k_q8_k: scalar::vec_dot_q2_k_q8_k,
        q3_k_q8_k: scalar::vec_dot_q3_k_q8_k,
        q4_k_q8_k: scalar::vec_dot_q4_k_q8_k,
        q5_k_q8_k: scalar::vec_dot_q5_k_q8_k,
        q6_k_q8_k: scalar::vec_dot_q6_k_q8_k,
        q4_0_q8_0_x4: None,
        q4_1_q8_1_x4: None,
        q5_0_q8_0_x4: None,
        q5_1_q8_1_x4: None,
        q8_0_q8_0_x4: None,
        quantize_q8_0: act::quantize_q8_0,
        quantize_q8_1: act::quantize_q8_1,
        quantize_q8_k: act::quantize_q8_k,
        dot_f32_f16: crate::ops::dot_f32_f16,
        attend_head: crate::ops::attend_head,
        to_f16: crate::ops::to_f16,
        mat: MatKernels::SCALAR,
    };

    /// NEON (every ARMv8-A core: Cortex-A53, A72): SMULL/SMLAL integer dot products.
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    pub const NEON: Kernels = Kernels {
        name: "neon",
        f32_f32: neon::vec_dot_f32_f32,
        f16_f16: neon::vec_dot_f16_f16,
        bf16_bf16: neon::vec_dot_bf16_bf16,
        q4_0_q8_0: neon::vec_dot_q4_0_q8_0,
        q4_1_q8_1: neon::vec_dot_q4_1_q8_1,
        q5_0_q8_0: neon::vec_dot_q5_0_q8_0,
        q5_1_q8_1: neon::vec_dot_q5_1_q8_1,
        q8_0_q8_0: neon::vec_dot_q8_0_q8_0,
        q2_k_q8_k: neon::vec_dot_q2_k_q8_k,
        q3_k_q8_k: neon::vec_dot_q3_k_q8_k,
        q4_k_q8_k: neon::vec_dot_q4_k_q8_k,
        q5_k_q8_k: neon::vec_dot_q5_k_q8_k,
        q6_k_q8_k: neon::vec_dot_q6_k_q8_k,
        q4_0_q8_0_x4: Some(neon::vec_dot_q4_0_q8_0_x4),
        q4_1_q8_1_x4: Some(neon::vec_dot_q4_1_q8_1_x4),
        q5_0_q8_0_x4: Some(neon::vec_dot_q5_0_q8_0_x4),
        q5_1_q8_1_x4: Some(neon::vec_dot_q5_1_q8_1_x4),
        q8_0_q8_0_x4: Some(neon::vec_dot_q8_0_q8_0_x4),
        quantize_q8_0: neon::quantize_q8_0,
        quantize_q8_1: neon::quantize_q8_1,
        quantize_q8_k: neon::quantize_q8_k,
        dot_f32_f16: neon::dot_f32_f16,
        attend_head: neon::attend_head,
        to_f16: neon::to_f16,
        mat: MatKernels {
            f32_f32: Some(neon::mat_f32_f32),
            f16_f16: Some(neon::mat_f16_f16),
            bf16_bf16: Some(neon::mat_bf16_bf16),
            q4_0_q8_0: Some(neon::mat_q4_0_q8_0),
            q4_1_q8_1: Some(neon::mat_q4_1_q8_1),
            q5_0_q8_0: Some(neon::mat_q5_0_q8_0),
            q5_1_q8_1: Some(neon::mat_q5_1_q8_1),
            q8_0_q8_0: Some(neon::mat_q8_0_q8_0),
            q2_k_q8_k: Some(neon::mat_q2_k_q8_k),
            q3_k_q8_k: Some(neon::mat_q3_k_q8_k),
            q4_k_q8_k: Some(neon::mat_q4_k_q8_k),
            q5_k_q8_k: Some(neon::mat_q5_k_q8_k),
            q6_k_q8_k: Some(neon::mat_q6_k_q8_k),
        },
    };

    /// NEON with SDOT (FEAT_DotProd: Cortex-A55, A76 and later). Only for cores whose
    /// ID_AA64ISAR0_EL1.DP is at least 1 (elsewhere SDOT traps as an undefined instruction):
    /// take it from [`Kernels::best`], [`Kernels::available`] or [`Kernels::for_aarch64`].
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    pub const NEON_DOTPROD: Kernels = Kernels {
        name: "neon-dotprod",
        q4_0_q8_0: neon::vec_dot_q4_0_q8_0_dp,
        q4_1_q8_1: neon::vec_dot_q4_1_q8_1_dp,
        q5_0_q8_0: neon::vec_dot_q5_0_q8_0_dp,
        q5_1_q8_1: neon::vec_dot_q5_1_q8_1_dp,
        q8_0_q8_0: neon::vec_dot_q8_0_q8_0_dp,
        q2_k_q8_k: neon::vec_dot_q2_k_q8_k_dp,
        q3_k_q8_k: neon::vec_dot_q3_k_q8_k_dp,
        q4_k_q8_k: neon::vec_dot_q4_k_q8_k_dp,
        q5_k_q8_k: neon::vec_dot_q5_k_q8_k_dp,
        q6_k_q8_k: neon::vec_dot_q6_k_q8_k_dp,
        q4_0_q8_0_x4: Some(neon::vec_dot_q4_0_q8_0_x4_dp),
        q4_1_q8_1_x4: Some(neon::vec_dot_q4_1_q8_1_x4_dp),
        q5_0_q8_0_x4: Some(neon::vec_dot_q5_0_q8_0_x4_dp),
        q5_1_q8_1_x4: Some(neon::vec_dot_q5_1_q8_1_x4_dp),
        q8_0_q8_0_x4: Some(neon::vec_dot_q8_0_q8_0_x4_dp),
        mat: MatKernels {
            f32_f32: Some(neon::mat_f32_f32),
            f16_f16: Some(neon::mat_f16_f16),
            bf16_bf16: Some(neon::mat_bf16_bf16),
            q4_0_q8_0: Some(neon::mat_q4_0_q8_0_dp),
            q4_1_q8_1: Some(neon::mat_q4_1_q8_1_dp),
            q5_0_q8_0: Some(neon::mat_q5_0_q8_0_dp),
            q5_1_q8_1: Some(neon::mat_q5_1_q8_1_dp),
            q8_0_q8_0: Some(neon::mat_q8_0_q8_0_dp),
            q2_k_q8_k: Some(neon::mat_q2_k_q8_k_dp),
            q3_k_q8_k: Some(neon::mat_q3_k_q8_k_dp),
            q4_k_q8_k: Some(neon::mat_q4_k_q8_k_dp),
            q5_k_q8_k: Some(neon::mat_q5_k_q8_k_dp),
            q6_k_q8_k: Some(neon::mat_q6_k_q8_k_dp),
        },
        ..Kernels::NEON
    };

    /// AVX2 (x86-64, for the PC runner): the 32-wide types and the K-quants one row and batched,
    /// the Q8_K quantizer; the rest scalar.
    /// Only for CPUs with AVX2 ([`avx2::available`]): take it from [`Kernels::best`] or
    /// [`Kernels::available`].
    #[cfg(target_arch = "x86_64")]
    pub const AVX2: Kernels = Kernels {
        name: "avx2",
        q4_0_q8_0: avx2::vec_dot_q4_0_q8_0,
        q4_1_q8_1: avx2::vec_dot_q4_1_q8_1,
        q5_0_q8_0: avx2::vec_dot_q5_0_q8_0,
        q5_1_q8_1: avx2::vec_dot_q5_1_q8_1,
        q8_0_q8_0: avx2::vec_dot_q8_0_q8_0,
        q2_k_q8_k: avx2::vec_dot_q2_k_q8_k,
        q3_k_q8_k: avx2::vec_dot_q3_k_q8_k,
        q4_k_q8_k: avx2::vec_dot_q4_k_q8_k,
        q5_k_q8_k: avx2::vec_dot_q5_k_q8_k,
        q6_k_q8_k: avx2::vec_dot_q6_k_q8_k,
        q4_0_q8_0_x4: Some(avx2::vec_dot_q4_0_q8_0_x4),
        q4_1_q8_1_x4: Some(avx2::vec_dot_q4_1_q8_1_x4),
        q5_0_q8_0_x4: Some(avx2::vec_dot_q5_0_q8_0_x4),
        q5_1_q8_1_x4: Some(avx2::vec_dot_q5_1_q8_1_x4),
        q8_0_q8_0_x4: Some(avx2::vec_dot_q8_0_q8_0_x4),
        quantize_q8_k: avx2::quantize_q8_k,
        dot_f32_f16: avx2::dot_f32_f16,
        attend_head: avx2::attend_head,
        to_f16: avx2::to_f16,
        mat: MatKernels {
            q4_0_q8_0: Some(avx2::mat_q4_0_q8_0),
            q4_1_q8_1: Some(avx2::mat_q4_1_q8_1),
            q5_0_q8_0: Some(avx2::mat_q5_0_q8_0),
            q5_1_q8_1: Some(avx2::mat_q5_1_q8_1),
            q8_0_q8_0: Some(avx2::mat_q8_0_q8_0),
            q2_k_q8_k: Some(avx2::mat_q2_k_q8_k),
            q3_k_q8_k: Some(avx2::mat_q3_k_q8_k),
            q4_k_q8_k: Some(avx2::mat_q4_k_q8_k),
            q5_k_q8_k: Some(avx2::mat_q5_k_q8_k),
            q6_k_q8_k: Some(avx2::mat_q6_k_q8_k),
            ..MatKernels::SCALAR
        },
        ..Kernels::SCALAR
    };

    /// RVV 1.0 (riscv64 harts with V, any VLEN ≥ 128): `rvv::KERNELS`. Only for harts with V
    /// (elsewhere the first vector instruction traps): take it from [`Kernels::best`] or
    /// [`Kernels::available`], which follow `rvv::set_available` (called at boot).
    #[cfg(target_arch = "riscv64")]
    pub const RVV: Kernels = rvv::KERNELS;

    /// AArch32 NEON (32-bit Arm with NEON and VFPv4: Cortex-A7), `neon32::KERNELS`, named `neon`.
    /// Only for cores with NEON: take it from [`Kernels::best`] or [`Kernels::available`], which
    /// follow `neon32::set_available` (called at boot from MVFR1).
    #[cfg(target_arch = "arm")]
    pub const NEON32: Kernels = neon32::KERNELS;

    /// The sets an aarch64 core whose ID_AA64ISAR0_EL1 reads `isar0` runs, fastest last: NEON,
    /// and NEON with SDOT when the DP field (bits 47:44) is at least 1.
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    pub fn aarch64_sets(isar0: u64) -> [Option<Kernels>; 2] {
        let dotprod = neon::has_dotprod(isar0).then_some(Kernels::NEON_DOTPROD);
        [Some(Kernels::NEON), dotprod]
    }

    /// The fastest set for an aarch64 core whose ID_AA64ISAR0_EL1 reads `isar0`:
    /// [`Kernels::NEON_DOTPROD`] when its DP field is at least 1, [`Kernels::NEON`] otherwise.
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    pub fn for_aarch64(isar0: u64) -> Kernels {
        match Kernels::aarch64_sets(isar0) {
            [_, Some(dp)] => dp,
            _ => Kernels::NEON,
        }
    }

    /// The sets of a CPU that runs `set` only when `on` (a run-time feature), scalar first:
    /// `[scalar, set if on]`.
    #[cfg(any(target_arch = "arm", target_arch = "riscv64"))]
    pub(crate) fn scalar_and(set: Kernels, on: bool) -> [Option<Kernels>; 2] {
        [Some(Kernels::SCALAR), on.then_some(set)]
    }

    /// `set` when `on`, else the scalar set.
    #[cfg(any(target_arch = "arm", target_arch = "riscv64"))]
    pub(crate) fn set_or_scalar(set: Kernels, on: bool) -> Kernels {
        if on {
            set
        } else {
            Kernels::SCALAR
        }
    }

    /// The set called `name` (`scalar`, `neon` (aarch64 or 32-bit Arm), `neon-dotprod`, `rvv`,
    /// `avx2`) if this CPU runs it.
    pub fn by_name(name: &str) -> Option<Kernels> {
        Self::available()
            .into_iter()
            .flatten()
            .find(|k| k.name == name)
    }

    /// Every set this CPU runs, scalar first, fastest last (on aarch64 the NEON sets, chosen
    /// from ID_AA64ISAR0_EL1; on 32-bit Arm the NEON set once `neon32::set_available` said so).
    pub fn available() -> [Option<Kernels>; 3] {
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        {
            let [neon, dotprod] = Kernels::aarch64_sets(neon::read_id_aa64isar0());
            [Some(Kernels::SCALAR), neon, dotprod]
        }
        #[cfg(target_arch = "riscv64")]
        {
            let [scalar, rvv] = rvv::sets(rvv::available());
            [scalar, rvv, None]
        }
        #[cfg(target_arch = "arm")]
        {
            let [scalar, neon] = neon32::sets(neon32::available());
            [scalar, neon, None]
        }
        #[cfg(target_arch = "x86_64")]
        {
            [
                Some(Kernels::SCALAR),
                avx2::available().then_some(Kernels::AVX2),
                None,
            ]
        }
        #[cfg(not(any(
            all(target_arch = "aarch64", target_feature = "neon"),
            target_arch = "arm",
            target_arch = "riscv64",
            target_arch = "x86_64"
        )))]
        {
            [Some(Kernels::SCALAR), None, None]
        }
    }

    /// The fastest set this CPU runs: on aarch64 NEON, with SDOT when ID_AA64ISAR0_EL1 says the
    /// core has it (`Kernels::for_aarch64`); on riscv64 RVV when the hart has V (`rvv::available`,
    /// recorded at boot); on 32-bit Arm NEON when the core has it (`neon32::available`, recorded
    /// at boot); on x86-64 AVX2 when CPUID says so (the PC runner); the scalar set elsewhere.
    pub fn best() -> Kernels {
        #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
        {
            Kernels::for_aarch64(neon::read_id_aa64isar0())
        }
        #[cfg(target_arch = "riscv64")]
        {
            rvv::best(rvv::available())
        }
        #[cfg(target_arch = "arm")]
        {
            neon32::best(neon32::available())
        }
        #[cfg(target_arch = "x86_64")]
        {
            if avx2::available() {
                Kernels::AVX2
            } else {
                Kernels::SCALAR
            }
        }
        #[cfg(not(any(
            all(target_arch = "aarch64", target_feature = "neon"),
            target_arch = "arm",
            target_arch = "riscv64",
            target_arch = "x86_64"
        )))]
        {
            Kernels::SCALAR
        }
    }

    /// Dot products of `out.len()` consecutive rows of `n` elements of `ty` (packed in `w`) with
    /// `acts`, written to `out`.
    pub fn dot_rows(
        &self,
        ty: GgmlType,
        n: usize,
        w: &[u8],
        acts: &Acts<'_>,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let rb = check_dot_args(ty, n, w.len(), out.len(), acts)?;
        if rb == 0 {
            out.fill(0.0);
            return Ok(());
        }
        macro_rules! rows {
            ($f:expr, $a:expr) => {
                for (o, row) in out.iter_mut().zip(w.chunks_exact(rb)) {
                    *o = $f(row, $a);
                }
            };
            // Four rows at a time where the set has a four-row kernel, the rest one by one.
            ($f:expr, $f4:expr, $a:expr) => {{
                let mut done = 0;
                if let (Some(f4), Some(rb4)) = ($f4, rb.checked_mul(4)) {
                    for (o, w4) in out.chunks_exact_mut(4).zip(w.chunks_exact(rb4)) {
                        if let Ok(o) = <&mut [f32; 4]>::try_from(o) {
                            f4(w4, rb, $a, o);
                            done += 4;
                        }
                    }
                }
                for (o, row) in out[done..].iter_mut().zip(w[done * rb..].chunks_exact(rb)) {
                    *o = $f(row, $a);
                }
            }};
        }
        match (ty, acts) {
            (GgmlType::F32, Acts::F32(a)) => rows!(self.f32_f32, a),
            (GgmlType::F16, Acts::F16(a)) => rows!(self.f16_f16, a),
            (GgmlType::Bf16, Acts::Bf16(a)) => rows!(self.bf16_bf16, a),
            (GgmlType::Q4_0, Acts::Q8_0(a)) => rows!(self.q4_0_q8_0, self.q4_0_q8_0_x4, a),
            (GgmlType::Q5_0, Acts::Q8_0(a)) => rows!(self.q5_0_q8_0, self.q5_0_q8_0_x4, a),
            (GgmlType::Q8_0, Acts::Q8_0(a)) => rows!(self.q8_0_q8_0, self.q8_0_q8_0_x4, a),
            (GgmlType::Q4_1, Acts::Q8_1(a)) => rows!(self.q4_1_q8_1, self.q4_1_q8_1_x4, a),
            (GgmlType::Q5_1, Acts::Q8_1(a)) => rows!(self.q5_1_q8_1, self.q5_1_q8_1_x4, a),
            (GgmlType::Q2K, Acts::Q8K(a)) => rows!(self.q2_k_q8_k, a),
            (GgmlType::Q3K, Acts::Q8K(a)) => rows!(self.q3_k_q8_k, a),
            (GgmlType::Q4K, Acts::Q8K(a)) => rows!(self.q4_k_q8_k, a),
            (GgmlType::Q5K, Acts::Q8K(a)) => rows!(self.q5_k_q8_k, a),
            (GgmlType::Q6K, Acts::Q8K(a)) => rows!(self.q6_k_q8_k, a),
            // check_dot_args accepted the pair, so this arm is unreachable; answer with the error
            // rather than a panic all the same.
            _ => {
                return Err(KernelError::ActFormat {
                    ty,
                    expected: ty.act_format(),
                    found: acts.format(),
                })
            }
        }
        Ok(())
    }

    /// One row's dot product (see [`Kernels::dot_rows`]).
    pub fn dot(
        &self,
        ty: GgmlType,
        n: usize,
        row: &[u8],
        acts: &Acts<'_>,
    ) -> Result<f32, KernelError> {
        let mut out = [0.0f32];
        self.dot_rows(ty, n, row, acts, &mut out)?;
        Ok(out[0])
    }

    /// `out[r * cols + c]` = row `r` of `w` · column `c` of `acts`, for `out.len() / cols` rows of
    /// `n` elements of `ty`: the batched kernel of `ty` (the one-row path for a single column).
    /// Every output equals [`Kernels::dot_rows`] on that column, bit for bit.
    pub fn dot_rows_batch(
        &self,
        ty: GgmlType,
        n: usize,
        w: &[u8],
        acts: &ActsBatch<'_>,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let cols = acts.cols;
        let rows = out.len().checked_div(cols).unwrap_or(0);
        if cols == 0 || cols > MAX_BATCH || rows * cols != out.len() {
            return Err(KernelError::Batch {
                cols,
                rows,
                out: out.len(),
            });
        }
        if cols == 1 {
            return self.dot_rows(ty, n, w, &acts.col(0), out);
        }
        let rb = check_dot_args(ty, n, w.len(), rows, &acts.col(0))?;
        if acts.acts.len() != n * cols {
            return Err(KernelError::ActLength {
                n: n * cols,
                acts: acts.acts.len(),
            });
        }
        if rb == 0 {
            out.fill(0.0);
            return Ok(());
        }
        let m = &self.mat;
        let kernel = match (ty, acts.acts) {
            (GgmlType::F32, Acts::F32(a)) => m.f32_f32.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::F16, Acts::F16(a)) => m.f16_f16.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Bf16, Acts::Bf16(a)) => m.bf16_bf16.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q4_0, Acts::Q8_0(a)) => m.q4_0_q8_0.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q5_0, Acts::Q8_0(a)) => m.q5_0_q8_0.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q8_0, Acts::Q8_0(a)) => m.q8_0_q8_0.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q4_1, Acts::Q8_1(a)) => m.q4_1_q8_1.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q5_1, Acts::Q8_1(a)) => m.q5_1_q8_1.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q2K, Acts::Q8K(a)) => m.q2_k_q8_k.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q3K, Acts::Q8K(a)) => m.q3_k_q8_k.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q4K, Acts::Q8K(a)) => m.q4_k_q8_k.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q5K, Acts::Q8K(a)) => m.q5_k_q8_k.map(|f| f(w, rb, a, cols, out)),
            (GgmlType::Q6K, Acts::Q8K(a)) => m.q6_k_q8_k.map(|f| f(w, rb, a, cols, out)),
            // check_dot_args accepted the pair: unreachable, answered with the error all the same.
            _ => {
                return Err(KernelError::ActFormat {
                    ty,
                    expected: ty.act_format(),
                    found: acts.acts.format(),
                })
            }
        };
        if kernel.is_none() {
            self.by_column(ty, n, w, rb, acts, out)?;
        }
        Ok(())
    }

    /// A batch through the one-row kernels: 256 rows at a time (they stay in the cache), each
    /// column in turn.
    fn by_column(
        &self,
        ty: GgmlType,
        n: usize,
        w: &[u8],
        rb: usize,
        acts: &ActsBatch<'_>,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        const ROWS: usize = 256;
        let cols = acts.cols;
        let mut tmp = [0.0f32; ROWS];
        for (g, rows) in w.chunks(ROWS * rb).enumerate() {
            let k = rows.len() / rb;
            for c in 0..cols {
                self.dot_rows(ty, n, rows, &acts.col(c), &mut tmp[..k])?;
                for (r, v) in tmp[..k].iter().enumerate() {
                    out[(g * ROWS + r) * cols + c] = *v;
                }
            }
        }
        Ok(())
    }
}
