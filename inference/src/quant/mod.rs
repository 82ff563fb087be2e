//! Weight formats and the kernels that multiply them with activations.
//!
//! - [`types`]: GGUF type ids, block geometry, the activation format each weight type pairs with,
//!   its dequantization and scalar kernels: one row per type, through which everything else
//!   reaches a type;
//! - [`act`]: activation blocks (Q8_0, Q8_1, Q8_K) and their quantization;
//! - [`scalar`]: the reference kernels (dequantize, dot products);
//! - `neon` (aarch64): bit-identical NEON twins of the dot products, the activation quantizers and
//!   the attention, plain (SMULL/SMLAL) and with SDOT (`Kernels::NEON`, `Kernels::NEON_DOTPROD`);
//! - `rvv`, `xtheadvector` (riscv64): RVV 1.0 twins, and T-Head's RVV 0.7.1 ones for the C906
//!   (`Kernels::RVV`, `Kernels::XTHEADVECTOR`; a hart runs one or the other);
//! - `neon32` (32-bit Arm, Cortex-A7): `asm!` NEON twins of the 32-wide dot products, Q4_K, Q6_K
//!   and the Q8_0 / Q8_1 quantizers (`Kernels::NEON32`, named `neon` as on aarch64);
//! - [`Kernels`] (`table.rs`): a set as a table with one entry per weight type, indexed as
//!   [`types::TYPES`]; dispatch by activation format; "Adding a weight type" is in its docs.
//!   `Kernels::SCALAR` is the portable set; architecture sets (NEON, RVV, AVX2) fill entries with
//!   SIMD twins of the scalar functions (an entry left empty is the scalar one) and are chosen at
//!   run time from the CPU's features. This module is the only place in `inference` where
//!   `cfg(target_arch)` may appear.

pub mod act;
#[cfg(target_arch = "x86_64")]
pub mod avx2;
pub mod batch;
#[cfg(test)]
#[path = "kernel_tests/batch.rs"]
mod batch_tests;
mod block;
mod choose;
mod entry;
mod features;
// The generators serve the self-test on every target, and the SIMD sets' tests where they exist.
#[allow(dead_code)]
mod gen;
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
pub mod selfcheck;
mod table;
#[cfg(test)]
#[path = "kernel_tests/gen.rs"]
// Some generators serve only the SIMD sets' tests, which do not exist on every target.
#[allow(dead_code)]
mod testgen;
pub mod types;
#[cfg(target_arch = "riscv64")]
pub mod xtheadvector;

pub use act::{ActBuf, ActLenError, Acts, BlockQ8K, BlockQ8_0, BlockQ8_1};
pub use batch::{ActsBatch, Mat, MAX_BATCH};
pub use types::{dequantize_row, vec_dot_f32_ref, ActFormat, GgmlType, QK32, QK_K};

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

pub use choose::{features, SET_CHOICES, SET_NAMES};
pub use features::{set_features, Features};
pub use table::{ActElem, Dot, Dot4, Kernels, RowKernels, TypeKernels, SCALAR_TYPES};

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

impl Kernels {
    /// NEON (every ARMv8-A core: Cortex-A53, A72): SMULL/SMLAL integer dot products
    /// (`neon::KERNELS`).
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    pub const NEON: Kernels = neon::KERNELS;

    /// NEON with SDOT (FEAT_DotProd: Cortex-A55, A76 and later; `neon::KERNELS_DOTPROD`). Only
    /// for cores whose ID_AA64ISAR0_EL1.DP is at least 1 (elsewhere SDOT traps as an undefined
    /// instruction): take it from [`Kernels::best`] or [`Kernels::available`].
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    pub const NEON_DOTPROD: Kernels = neon::KERNELS_DOTPROD;

    /// AVX2 (x86-64, for the PC runner; `avx2::KERNELS`). Only for CPUs with AVX2
    /// ([`avx2::available`]): take it from [`Kernels::best`] or [`Kernels::available`].
    #[cfg(target_arch = "x86_64")]
    pub const AVX2: Kernels = avx2::KERNELS;

    /// RVV 1.0 (riscv64 harts with V, any VLEN ≥ 128): `rvv::KERNELS`. Only for harts with V
    /// (elsewhere the first vector instruction traps): take it from [`Kernels::best`] or
    /// [`Kernels::available`], which follow the features recorded at boot ([`set_features`]).
    #[cfg(target_arch = "riscv64")]
    pub const RVV: Kernels = rvv::KERNELS;

    /// XTheadVector (T-Head's RVV 0.7.1: the C906 of the Milk-V Duo, VLEN 128):
    /// `xtheadvector::KERNELS`. Only for harts with XTheadVector (RVV 1.0 code traps there, and
    /// this set's code on an RVV 1.0 hart): take it from [`Kernels::best`] or
    /// [`Kernels::available`], which follow the features recorded at boot ([`set_features`]).
    #[cfg(target_arch = "riscv64")]
    pub const XTHEADVECTOR: Kernels = xtheadvector::KERNELS;

    /// AArch32 NEON (32-bit Arm with NEON and VFPv4: Cortex-A7), `neon32::KERNELS`, named `neon`.
    /// Only for cores with NEON: take it from [`Kernels::best`] or [`Kernels::available`], which
    /// follow the features recorded at boot from MVFR1 ([`set_features`]).
    #[cfg(target_arch = "arm")]
    pub const NEON32: Kernels = neon32::KERNELS;
}
