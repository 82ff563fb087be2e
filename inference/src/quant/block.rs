//! The block sizes and activation formats every part of `quant` shares: the leaf the type table,
//! the activations and the kernels all build on.

/// Elements per K-quant super-block.
pub const QK_K: usize = 256;
/// Elements per block of the 32-wide formats.
pub const QK32: usize = 32;

/// The format activations are quantized to before a dot product with a weight row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActFormat {
    /// Plain f32 (F32 weights).
    F32,
    /// f16 values (F16 weights), as ggml's `vec_dot_f16`.
    F16,
    /// bf16 values (BF16 weights), as ggml's `vec_dot_bf16`.
    Bf16,
    /// 32 int8 values with an f16 scale (Q4_0, Q5_0, Q8_0, IQ4_NL weights).
    Q8_0,
    /// 32 int8 values with an f16 scale and an f16 scaled sum (the 32-wide weights with a min).
    Q8_1,
    /// 256 int8 values with an f32 scale and 16-element sums (K-quants).
    Q8K,
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
