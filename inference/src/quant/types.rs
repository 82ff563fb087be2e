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

impl GgmlType {
    /// Every supported type, in GGUF id order.
    pub const ALL: [GgmlType; 13] = [
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

    /// Map a GGUF type id; `None` for ids lmboot does not run (or that do not exist).
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            10 => GgmlType::Q2K,
            11 => GgmlType::Q3K,
            12 => GgmlType::Q4K,
            13 => GgmlType::Q5K,
            14 => GgmlType::Q6K,
            30 => GgmlType::Bf16,
            _ => return None,
        })
    }

    /// The GGUF type id.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q2K => 10,
            GgmlType::Q3K => 11,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
            GgmlType::Bf16 => 30,
        }
    }

    /// Name as llama.cpp prints it.
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::Bf16 => "BF16",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q2K => "Q2_K",
            GgmlType::Q3K => "Q3_K",
            GgmlType::Q4K => "Q4_K",
            GgmlType::Q5K => "Q5_K",
            GgmlType::Q6K => "Q6_K",
        }
    }

    /// Elements per block.
    pub fn block_elems(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16 => 1,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 => {
                QK32
            }
            GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::Bf16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q8_0 => 34,
            GgmlType::Q2K => 84,
            GgmlType::Q3K => 110,
            GgmlType::Q4K => 144,
            GgmlType::Q5K => 176,
            GgmlType::Q6K => 210,
        }
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
        match self {
            GgmlType::F32 => ActFormat::F32,
            GgmlType::F16 => ActFormat::F16,
            GgmlType::Bf16 => ActFormat::Bf16,
            GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => ActFormat::Q8_0,
            GgmlType::Q4_1 | GgmlType::Q5_1 => ActFormat::Q8_1,
            GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => {
                ActFormat::Q8K
            }
        }
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
