//! Weight formats and the kernels that multiply them with activations.
//!
//! - [`types`]: GGUF type ids, block geometry, the activation format each weight type pairs with;
//! - [`act`]: activation blocks (Q8_0, Q8_1, Q8_K) and their quantization;
//! - [`scalar`]: the reference kernels (dequantize, dot products);
//! - [`Kernels`]: the dispatch table the model calls through. `Kernels::SCALAR` is the portable set;
//!   architecture sets (NEON, RVV) replace entries with SIMD twins of the scalar functions and are
//!   chosen at run time from the CPU's features. This module is the only place in `inference` where
//!   `cfg(target_arch)` may appear.

pub mod act;
pub mod scalar;
pub mod types;

pub use act::{ActBuf, ActLenError, Acts, BlockQ8K, BlockQ8_0, BlockQ8_1};
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

/// A set of kernels, one per weight type. Every entry of an architecture set computes what the
/// scalar entry computes (integers exactly; floats within the tolerance its test states).
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
    };

    /// The set called `name` (`scalar`, `neon`, `neon-dotprod`, `rvv`) if this CPU runs it.
    pub fn by_name(name: &str) -> Option<Kernels> {
        Self::available().into_iter().flatten().find(|k| k.name == name)
    }

    /// Every set this CPU runs, scalar first.
    pub fn available() -> [Option<Kernels>; 3] {
        [Some(Kernels::SCALAR), None, None]
    }

    /// The fastest set this CPU runs. Only the scalar set exists so far; NEON and RVV sets join here.
    pub fn best() -> Kernels {
        Kernels::SCALAR
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
        }
        match (ty, acts) {
            (GgmlType::F32, Acts::F32(a)) => rows!(self.f32_f32, a),
            (GgmlType::F16, Acts::F16(a)) => rows!(self.f16_f16, a),
            (GgmlType::Bf16, Acts::Bf16(a)) => rows!(self.bf16_bf16, a),
            (GgmlType::Q4_0, Acts::Q8_0(a)) => rows!(self.q4_0_q8_0, a),
            (GgmlType::Q5_0, Acts::Q8_0(a)) => rows!(self.q5_0_q8_0, a),
            (GgmlType::Q8_0, Acts::Q8_0(a)) => rows!(self.q8_0_q8_0, a),
            (GgmlType::Q4_1, Acts::Q8_1(a)) => rows!(self.q4_1_q8_1, a),
            (GgmlType::Q5_1, Acts::Q8_1(a)) => rows!(self.q5_1_q8_1, a),
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
}
