//! A kernel set as a table: one entry per weight type, indexed as [`super::types::TYPES`], each
//! the type's kernels for its activation format ([`TypeKernels`]); plus the float operations
//! that have SIMD twins. An entry a set leaves `None` is the scalar set's, so a set lacking a
//! kernel falls back to scalar by construction. Dispatch matches on the activation format (six
//! of them), never on the weight type.
//!
//! # Adding a weight type
//!
//! Code that is not a kernel reaches a type only through its row of [`TYPES`], so a new type is
//! written in three places and tested by what already iterates over the table.
//!
//! 1. `types.rs`: a variant of [`super::GgmlType`] (in the same place of the enum as its row),
//!    in [`super::GgmlType::ALL`] (GGUF id order), [`N_TYPES`] one more, and its row of
//!    [`TYPES`]: GGUF id, name, (elements, bytes) per block, offsets of the f16 scale fields,
//!    the dequantization and the scalar kernels (their [`TypeKernels`] variant is the activation
//!    format).
//! 2. `scalar.rs`: a block decoder for `batch.rs`'s generic loops (`batch::Q32` for a 32-wide
//!    type, `batch::KQuant` for a 256-wide one), which gives the dequantization
//!    (`dequantize_32::<F>`, `dequantize_k::<F>`) and the batched kernel (`mat::<With<F, _>>`,
//!    `mat::<K<F>>`); the one-row dot product `vec_dot_<weights>_<activations>` is
//!    `dot::<With<F, _>>` (the decoder's terms, in llama.cpp's float order for the 32-wide
//!    formats: check the type's generic kernel in ggml-cpu's `quants.c`) unless a hand-written
//!    loop is faster. A table of values the SIMD twins share (`IQ4_NL_VALUES`) lives here too.
//! 3. For each set with a kernel of its own: the kernel in that set's files (in the 32-wide
//!    families of NEON and AVX2 a type is one more `Fmt` decoder and an `entries!` line) and its
//!    entry in that set's table: `set.with(GgmlType::X, TypeKernels::..(RowKernels::dot(..)
//!    .x4(..).mat(..)))` after the family macros. A set without one runs the scalar kernels.
//!
//! The kernel harness (`kernel_tests`) checks every set's entry of every type in the table
//! against the scalar one, bit for bit, and that an empty entry is the scalar one. The fixture
//! tests take `<name>.gguf` from the shared fixtures where one exists (the type's name in lower
//! case; a type without one is said to be skipped): a type without a fixture wants a GGUF-level
//! test of known values (`tests/tests/quant_fixtures.rs` writes an IQ4_NL tensor).

use super::act::{Acts, BlockQ8K, BlockQ8_0, BlockQ8_1};
use super::batch::{ActsBatch, MAX_BATCH};
use super::types::{GgmlType, N_TYPES, TYPES};
use super::{act, check_dot_args, AttendHead, KernelError};
use core::fmt;

pub use super::entry::{ActElem, Dot, Dot4, RowKernels, TypeKernels};

/// The scalar kernels of every weight type (the `kernels` of its row of [`TYPES`]):
/// the reference every set's entry computes bit for bit, and what a set without an entry runs.
pub const SCALAR_TYPES: [TypeKernels; N_TYPES] = {
    let mut k = [TYPES[0].kernels; N_TYPES];
    let mut i = 1;
    while i < N_TYPES {
        k[i] = TYPES[i].kernels;
        i += 1;
    }
    k
};

/// `$base` with the float types' one-row entries from the module `$m` (`vec_dot_f32_f32`, ...),
/// and with `batched`, their batched ones too (`mat_f32_f32`, ...).
#[allow(unused_macros)]
macro_rules! with_floats {
    ($base:expr, $($m:ident)::+) => {{
        use $crate::quant::{GgmlType as G, RowKernels as R, TypeKernels as T};
        $base
            .with(G::F32, T::F32(R::dot($($m)::+::vec_dot_f32_f32)))
            .with(G::F16, T::F16(R::dot($($m)::+::vec_dot_f16_f16)))
            .with(G::Bf16, T::Bf16(R::dot($($m)::+::vec_dot_bf16_bf16)))
    }};
    ($base:expr, $($m:ident)::+, batched) => {{
        use $crate::quant::{GgmlType as G, RowKernels as R, TypeKernels as T};
        $base
            .with(G::F32, T::F32(R::dot($($m)::+::vec_dot_f32_f32).mat($($m)::+::mat_f32_f32)))
            .with(G::F16, T::F16(R::dot($($m)::+::vec_dot_f16_f16).mat($($m)::+::mat_f16_f16)))
            .with(G::Bf16, T::Bf16(R::dot($($m)::+::vec_dot_bf16_bf16).mat($($m)::+::mat_bf16_bf16)))
    }};
}
#[allow(unused_imports)]
pub(crate) use with_floats;

/// `$base` with the K-quants' entries (one row and batched) from the module `$m`, and with `x4`,
/// their four-row ones too (`vec_dot_q2_k_q8_k_x4`, ...).
#[allow(unused_macros)]
macro_rules! with_k_quants {
    ($base:expr, $($m:ident)::+) => {{
        use $crate::quant::{GgmlType as G, RowKernels as R, TypeKernels as T};
        $base
            .with(G::Q2K, T::Q8K(R::dot($($m)::+::vec_dot_q2_k_q8_k).mat($($m)::+::mat_q2_k_q8_k)))
            .with(G::Q3K, T::Q8K(R::dot($($m)::+::vec_dot_q3_k_q8_k).mat($($m)::+::mat_q3_k_q8_k)))
            .with(G::Q4K, T::Q8K(R::dot($($m)::+::vec_dot_q4_k_q8_k).mat($($m)::+::mat_q4_k_q8_k)))
            .with(G::Q5K, T::Q8K(R::dot($($m)::+::vec_dot_q5_k_q8_k).mat($($m)::+::mat_q5_k_q8_k)))
            .with(G::Q6K, T::Q8K(R::dot($($m)::+::vec_dot_q6_k_q8_k).mat($($m)::+::mat_q6_k_q8_k)))
    }};
    ($base:expr, $($m:ident)::+, x4) => {{
        use $crate::quant::{GgmlType as G, RowKernels as R, TypeKernels as T};
        $base
            .with(G::Q2K, T::Q8K(R::dot($($m)::+::vec_dot_q2_k_q8_k)
                .x4($($m)::+::vec_dot_q2_k_q8_k_x4).mat($($m)::+::mat_q2_k_q8_k)))
            .with(G::Q3K, T::Q8K(R::dot($($m)::+::vec_dot_q3_k_q8_k)
                .x4($($m)::+::vec_dot_q3_k_q8_k_x4).mat($($m)::+::mat_q3_k_q8_k)))
            .with(G::Q4K, T::Q8K(R::dot($($m)::+::vec_dot_q4_k_q8_k)
                .x4($($m)::+::vec_dot_q4_k_q8_k_x4).mat($($m)::+::mat_q4_k_q8_k)))
            .with(G::Q5K, T::Q8K(R::dot($($m)::+::vec_dot_q5_k_q8_k)
                .x4($($m)::+::vec_dot_q5_k_q8_k_x4).mat($($m)::+::mat_q5_k_q8_k)))
            .with(G::Q6K, T::Q8K(R::dot($($m)::+::vec_dot_q6_k_q8_k)
                .x4($($m)::+::vec_dot_q6_k_q8_k_x4).mat($($m)::+::mat_q6_k_q8_k)))
    }};
}
#[allow(unused_imports)]
pub(crate) use with_k_quants;

/// A set of kernels: one entry per weight type, plus the float operations that have SIMD twins.
/// Every entry of an architecture set computes exactly what the scalar entry computes
/// (`to_bits()` equal; the shared harness in `kernel_tests` checks every set the CPU runs on
/// random, extreme and fixture inputs), so a board prints what the PC runner prints.
#[derive(Clone, Copy)]
pub struct Kernels {
    pub name: &'static str,
    /// Each weight type's kernels, indexed as [`super::types::TYPES`] (`None`: the scalar ones).
    pub types: [Option<TypeKernels>; N_TYPES],
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
        types: [None; N_TYPES],
        quantize_q8_0: act::quantize_q8_0,
        quantize_q8_1: act::quantize_q8_1,
        quantize_q8_k: act::quantize_q8_k,
        dot_f32_f16: crate::ops::dot_f32_f16,
        attend_head: crate::ops::attend_head,
        to_f16: crate::ops::to_f16,
    };

    /// This set with `ty`'s entry set to `k` (to write a set's table as a list of its kernels).
    pub const fn with(self, ty: GgmlType, k: TypeKernels) -> Kernels {
        let mut types = self.types;
        types[ty.index()] = Some(k);
        Kernels { types, ..self }
    }

    /// The kernels this set runs for `ty`: its own, or the scalar ones.
    pub fn of(&self, ty: GgmlType) -> TypeKernels {
        let i = ty.index();
        self.types[i].unwrap_or(SCALAR_TYPES[i])
    }

    /// The kernels this set runs for `ty` with activations of element type `A` (`None` when `ty`
    /// takes another format).
    pub fn row<A: ActElem>(&self, ty: GgmlType) -> Option<RowKernels<A>> {
        A::kernels(self.of(ty))
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
        match (self.of(ty), acts) {
            (TypeKernels::F32(k), Acts::F32(a)) => k.rows(w, rb, a, out),
            (TypeKernels::F16(k), Acts::F16(a)) | (TypeKernels::Bf16(k), Acts::Bf16(a)) => {
                k.rows(w, rb, a, out)
            }
            (TypeKernels::Q8_0(k), Acts::Q8_0(a)) => k.rows(w, rb, a, out),
            (TypeKernels::Q8_1(k), Acts::Q8_1(a)) => k.rows(w, rb, a, out),
            (TypeKernels::Q8K(k), Acts::Q8K(a)) => k.rows(w, rb, a, out),
            // check_dot_args accepted the pair, so this arm is unreachable; answer with the error
            // rather than a panic all the same.
            _ => return Err(format_error(ty, acts)),
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
        let ran = match (self.of(ty), acts.acts) {
            (TypeKernels::F32(k), Acts::F32(a)) => k.batch(w, rb, a, cols, out),
            (TypeKernels::F16(k), Acts::F16(a)) | (TypeKernels::Bf16(k), Acts::Bf16(a)) => {
                k.batch(w, rb, a, cols, out)
            }
            (TypeKernels::Q8_0(k), Acts::Q8_0(a)) => k.batch(w, rb, a, cols, out),
            (TypeKernels::Q8_1(k), Acts::Q8_1(a)) => k.batch(w, rb, a, cols, out),
            (TypeKernels::Q8K(k), Acts::Q8K(a)) => k.batch(w, rb, a, cols, out),
            // check_dot_args accepted the pair: unreachable, answered with the error all the same.
            _ => return Err(format_error(ty, &acts.acts)),
        };
        if !ran {
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

/// `ty` weights were handed activations of another format.
fn format_error(ty: GgmlType, acts: &Acts<'_>) -> KernelError {
    KernelError::ActFormat {
        ty,
        expected: ty.act_format(),
        found: acts.format(),
    }
}
