//! GGML weight types: ids as stored in GGUF, block geometry, which activation format each one is
//! multiplied with (the pairing llama.cpp uses, see `../shared/DESIGN.md` "Numerics"), and its
//! scalar kernels. Code that is not a kernel reaches a type through its row of [`TYPES`], never by
//! its name.

pub use super::block::{ActFormat, QK32, QK_K};
use super::entry::{RowKernels as R, TypeKernels};
use super::{batch, scalar};
use core::fmt;

/// A tensor element type as stored in a GGUF file (the subset lmboot runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GgmlType {
    F32,
    F16,
    Bf16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    IQ4NL,
}

/// Everything lmboot knows of a weight type: one row of [`TYPES`].
#[derive(Debug, Clone, Copy)]
pub struct TypeInfo {
    pub ty: GgmlType,
    /// The GGUF type id.
    pub id: u32,
    /// Name as llama.cpp prints it.
    pub name: &'static str,
    /// Elements and bytes per block.
    pub block_elems: usize,
    pub block_bytes: usize,
    /// The activation format llama.cpp pairs with it (the format its kernels take).
    pub act: ActFormat,
    /// Byte offsets of the f16 scale fields in a block (empty for float types).
    pub scales: &'static [usize],
    /// Whole blocks (`w`) to floats (`out`, as many values as `w` holds): the scalar
    /// dequantization.
    pub dequantize: fn(&[u8], &mut [f32]),
    /// The scalar kernels (`scalar.rs`): the reference every set's entry computes bit for bit,
    /// and what a set without an entry runs.
    pub kernels: TypeKernels,
}

/// Number of weight types lmboot runs.
pub const N_TYPES: usize = 14;

/// A row: the activation format is the one its kernels take.
const fn info(
    ty: GgmlType,
    id: u32,
    name: &'static str,
    (block_elems, block_bytes): (usize, usize),
    scales: &'static [usize],
    dequantize: fn(&[u8], &mut [f32]),
    kernels: TypeKernels,
) -> TypeInfo {
    let act = match kernels {
        TypeKernels::F32(_) => ActFormat::F32,
        TypeKernels::F16(_) => ActFormat::F16,
        TypeKernels::Bf16(_) => ActFormat::Bf16,
        TypeKernels::Q8_0(_) => ActFormat::Q8_0,
        TypeKernels::Q8_1(_) => ActFormat::Q8_1,
        TypeKernels::Q8K(_) => ActFormat::Q8K,
    };
    TypeInfo {
        ty,
        id,
        name,
        block_elems,
        block_bytes,
        act,
        scales,
        dequantize,
        kernels,
    }
}

/// The weight types, one row each, in [`GgmlType`]'s order (indexed by [`GgmlType::index`]): id,
/// name, (elements, bytes) per block, f16 scale offsets, dequantization, scalar kernels (one row
/// and batched).
#[rustfmt::skip]
pub const TYPES: [TypeInfo; N_TYPES] = {
    use scalar::*;
    use GgmlType as G;
    use TypeKernels as T;
    [
        info(G::F32, 0, "F32", (1, 4), &[], dequantize_f32, T::F32(R::dot(vec_dot_f32_f32).mat(batch::mat_f32_f32))),
        info(G::F16, 1, "F16", (1, 2), &[], dequantize_f16, T::F16(R::dot(vec_dot_f16_f16).mat(batch::mat_f16_f16))),
        info(G::Bf16, 30, "BF16", (1, 2), &[], dequantize_bf16, T::Bf16(R::dot(vec_dot_bf16_bf16).mat(batch::mat_bf16_bf16))),
        info(G::Q4_0, 2, "Q4_0", (QK32, 18), &[0], dequantize_32::<Q4_0>, T::Q8_0(R::dot(vec_dot_q4_0_q8_0).mat(mat_q4_0_q8_0))),
        info(G::Q4_1, 3, "Q4_1", (QK32, 20), &[0, 2], dequantize_32::<Q4_1>, T::Q8_1(R::dot(vec_dot_q4_1_q8_1).mat(mat_q4_1_q8_1))),
        info(G::Q5_0, 6, "Q5_0", (QK32, 22), &[0], dequantize_32::<Q5_0>, T::Q8_0(R::dot(vec_dot_q5_0_q8_0).mat(mat_q5_0_q8_0))),
        info(G::Q5_1, 7, "Q5_1", (QK32, 24), &[0, 2], dequantize_32::<Q5_1>, T::Q8_1(R::dot(vec_dot_q5_1_q8_1).mat(mat_q5_1_q8_1))),
        info(G::Q8_0, 8, "Q8_0", (QK32, 34), &[0], dequantize_32::<batch::Q8_0>, T::Q8_0(R::dot(vec_dot_q8_0_q8_0).mat(mat_q8_0_q8_0))),
        info(G::Q2K, 10, "Q2_K", (QK_K, 84), &[80, 82], dequantize_k::<batch::Q2K>, T::Q8K(R::dot(vec_dot_q2_k_q8_k).mat(mat_q2_k_q8_k))),
        info(G::Q3K, 11, "Q3_K", (QK_K, 110), &[108], dequantize_k::<batch::Q3K>, T::Q8K(R::dot(vec_dot_q3_k_q8_k).mat(mat_q3_k_q8_k))),
        info(G::Q4K, 12, "Q4_K", (QK_K, 144), &[0, 2], dequantize_k::<batch::Q4K>, T::Q8K(R::dot(vec_dot_q4_k_q8_k).mat(mat_q4_k_q8_k))),
        info(G::Q5K, 13, "Q5_K", (QK_K, 176), &[0, 2], dequantize_k::<batch::Q5K>, T::Q8K(R::dot(vec_dot_q5_k_q8_k).mat(mat_q5_k_q8_k))),
        info(G::Q6K, 14, "Q6_K", (QK_K, 210), &[208], dequantize_k::<batch::Q6K>, T::Q8K(R::dot(vec_dot_q6_k_q8_k).mat(mat_q6_k_q8_k))),
        info(G::IQ4NL, 20, "IQ4_NL", (QK32, 18), &[0], dequantize_32::<Iq4Nl>, T::Q8_0(R::dot(vec_dot_iq4_nl_q8_0).mat(mat_iq4_nl_q8_0))),
    ]
};

impl GgmlType {
    /// Every supported type, in GGUF id order.
    pub const ALL: [GgmlType; N_TYPES] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::IQ4NL,
        GgmlType::Bf16,
    ];

    /// Its row of [`TYPES`] (and of every kernel set's table).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Its row of [`TYPES`].
    pub fn info(self) -> &'static TypeInfo {
        &TYPES[self.index()]
    }

    /// Map a GGUF type id; `None` for ids lmboot does not run (or that do not exist).
    pub fn from_id(id: u32) -> Option<Self> {
        TYPES.iter().find(|t| t.id == id).map(|t| t.ty)
    }

    /// The GGUF type id.
    pub fn id(self) -> u32 {
        self.info().id
    }

    /// Name as llama.cpp prints it.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Elements per block.
    pub fn block_elems(self) -> usize {
        self.info().block_elems
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        self.info().block_bytes
    }

    /// Bytes of a row of `n` elements, `None` if `n` is not a whole number of blocks or overflows.
    pub fn row_bytes(self, n: u64) -> Option<u64> {
        let be = self.block_elems() as u64;
        if !n.is_multiple_of(be) {
            return None;
        }
        (n / be).checked_mul(self.block_bytes() as u64)
    }

    /// The activation format llama.cpp pairs with this weight type.
    pub fn act_format(self) -> ActFormat {
        self.info().act
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Dequantize a row of `ty` (`w` holds whole blocks) into `out` (as many values as `w` holds):
/// the type's `dequantize` in [`TYPES`].
pub fn dequantize_row(ty: GgmlType, w: &[u8], out: &mut [f32]) {
    (ty.info().dequantize)(w, out)
}

/// `w · x` with the row dequantized to f32 and summed in f64; the exact-as-possible reference.
pub fn vec_dot_f32_ref(ty: GgmlType, w: &[u8], x: &[f32]) -> f32 {
    let be = ty.block_elems().max(32);
    let bytes = ty.row_bytes(be as u64).unwrap_or(0) as usize;
    let mut tmp = [0.0f32; QK_K];
    let mut sum = 0.0f64;
    for (b, xs) in w.chunks_exact(bytes.max(1)).zip(x.chunks_exact(be)) {
        dequantize_row(ty, b, &mut tmp[..be]);
        for (a, v) in tmp[..be].iter().zip(xs) {
            sum += *a as f64 * *v as f64;
        }
    }
    sum as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_the_enums_order_and_ids_are_unique() {
        for (i, t) in TYPES.iter().enumerate() {
            assert_eq!(t.ty.index(), i, "{}", t.name);
            assert_eq!(GgmlType::from_id(t.id), Some(t.ty));
            assert_eq!(t.block_elems % t.act.block_elems(), 0, "{}", t.name);
        }
        assert_eq!(GgmlType::ALL.len(), TYPES.len());
        assert!(GgmlType::ALL.windows(2).all(|w| w[0].id() < w[1].id()));
        assert_eq!(GgmlType::from_id(4), None);
    }
}
