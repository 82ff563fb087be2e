//! GGML weight types: ids as stored in GGUF, block geometry, and which activation format each one is
//! multiplied with (the pairing llama.cpp uses, see `../shared/DESIGN.md` "Numerics").

use core::fmt;

/// Elements per K-quant super-block.
pub const QK_K: usize = 256;
/// Elements per block of the 32-wide formats.
pub const QK32: usize = 32;

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
}

/// The format activations are quantized to before a dot product with a weight row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActFormat {
    /// Plain f32 (F32 weights).
    F32,
    /// f16 values (F16 weights), as ggml's `vec_dot_f16`.
    F16,
    /// bf16 values (BF16 weights), as ggml's `vec_dot_bf16`.
    Bf16,
    /// 32 int8 values with an f16 scale (Q4_0, Q5_0, Q8_0 weights).
    Q8_0,
    /// 32 int8 values with an f16 scale and an f16 scaled sum (Q4_1, Q5_1 weights).
    Q8_1,
    /// 256 int8 values with an f32 scale and 16-element sums (K-quants).
    Q8K,
}

/// Everything lmboot knows of a weight type that is not a kernel: one row of [`TYPES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeInfo {
    pub ty: GgmlType,
    /// The GGUF type id.
    pub id: u32,
    /// Name as llama.cpp prints it.
    pub name: &'static str,
    /// Elements and bytes per block.
    pub block_elems: usize,
    pub block_bytes: usize,
    /// The activation format llama.cpp pairs with it.
    pub act: ActFormat,
    /// Byte offsets of the f16 scale fields in a block (empty for float types).
    pub scales: &'static [usize],
}

/// Number of weight types lmboot runs.
pub const N_TYPES: usize = 13;

const fn info(
    ty: GgmlType,
    id: u32,
    name: &'static str,
    (block_elems, block_bytes): (usize, usize),
    act: ActFormat,
    scales: &'static [usize],
) -> TypeInfo {
    TypeInfo {
        ty,
        id,
        name,
        block_elems,
        block_bytes,
        act,
        scales,
    }
}

/// The weight types, one row each, in [`GgmlType`]'s order (indexed by [`GgmlType::index`]).
pub const TYPES: [TypeInfo; N_TYPES] = [
    info(GgmlType::F32, 0, "F32", (1, 4), ActFormat::F32, &[]),
    info(GgmlType::F16, 1, "F16", (1, 2), ActFormat::F16, &[]),
    info(GgmlType::Bf16, 30, "BF16", (1, 2), ActFormat::Bf16, &[]),
    info(GgmlType::Q4_0, 2, "Q4_0", (QK32, 18), ActFormat::Q8_0, &[0]),
    info(
        GgmlType::Q4_1,
        3,
        "Q4_1",
        (QK32, 20),
        ActFormat::Q8_1,
        &[0, 2],
    ),
    info(GgmlType::Q5_0, 6, "Q5_0", (QK32, 22), ActFormat::Q8_0, &[0]),
    info(
        GgmlType::Q5_1,
        7,
        "Q5_1",
        (QK32, 24),
        ActFormat::Q8_1,
        &[0, 2],
    ),
    info(GgmlType::Q8_0, 8, "Q8_0", (QK32, 34), ActFormat::Q8_0, &[0]),
    info(
        GgmlType::Q2K,
        10,
        "Q2_K",
        (QK_K, 84),
        ActFormat::Q8K,
        &[80, 82],
    ),
    info(
        GgmlType::Q3K,
        11,
        "Q3_K",
        (QK_K, 110),
        ActFormat::Q8K,
        &[108],
    ),
    info(
        GgmlType::Q4K,
        12,
        "Q4_K",
        (QK_K, 144),
        ActFormat::Q8K,
        &[0, 2],
    ),
    info(
        GgmlType::Q5K,
        13,
        "Q5_K",
        (QK_K, 176),
        ActFormat::Q8K,
        &[0, 2],
    ),
    info(
        GgmlType::Q6K,
        14,
        "Q6_K",
        (QK_K, 210),
        ActFormat::Q8K,
        &[208],
    ),
];

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

impl ActFormat {
    /// Elements per activation block.
    pub fn block_elems(self) -> usize {
        match self {
            ActFormat::F32 | ActFormat::F16 | ActFormat::Bf16 => 1,
            ActFormat::Q8_0 | ActFormat::Q8_1 => QK32,
            ActFormat::Q8K => QK_K,
        }
    }
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
