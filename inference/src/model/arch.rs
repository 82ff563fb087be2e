//! Architectures as recipes: each is a handful of named pieces of the one forward pass (where the
//! norms sit, the feed-forward activation, the attention window, the RoPE layout, biases, scales),
//! so adding a model family is adding an entry to [`RECIPES`], not a branch in the middle of the
//! pass. The pieces are checked against llama.cpp's model code and a float64 reference pass.
#![forbid(unsafe_code)]

pub use crate::ops::RopeLayout;

/// The activation of the gated feed-forward: `hidden = act(gate · x) * (up · x)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `x · sigmoid(x)` (SwiGLU: llama, qwen).
    Silu,
    /// GELU, tanh form (GeGLU: gemma).
    GeluTanh,
}

/// One architecture: the pieces of the forward pass it is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recipe {
    /// `general.architecture` as GGUF writes it.
    pub name: &'static str,
    pub rope: RopeLayout,
    /// Q, K and V projections have biases (`attn_q.bias`, ...).
    pub qkv_bias: bool,
    /// Each query and key head is RMS-normed before RoPE (`attn_q_norm`, `attn_k_norm`).
    pub qk_norm: bool,
    /// The attention and feed-forward outputs are RMS-normed before they join the residual
    /// (`post_attention_norm`, `post_ffw_norm`).
    pub post_norms: bool,
    pub activation: Activation,
    /// Embedding rows are multiplied by sqrt(dim).
    pub embed_scale: bool,
    /// Interleaved sliding-window layers: of every `period` layers all but the last attend over
    /// `attention.sliding_window` positions only, with RoPE base `rope.freq_base_swa`.
    pub swa_period: Option<usize>,
}

/// Llama-2/3, TinyLlama, SmolLM2: pre-norm, SwiGLU, adjacent-pair RoPE, no biases.
const LLAMA: Recipe = Recipe {
    name: "llama",
    rope: RopeLayout::Adjacent,
    qkv_bias: false,
    qk_norm: false,
    post_norms: false,
    activation: Activation::Silu,
    embed_scale: false,
    swa_period: None,
};

/// Every architecture lmboot runs.
pub const RECIPES: &[Recipe] = &[
    LLAMA,
    // Qwen2 / Qwen2.5: llama with Q/K/V biases and NEOX RoPE.
    Recipe {
        name: "qwen2",
        rope: RopeLayout::Neox,
        qkv_bias: true,
        ..LLAMA
    },
    // Qwen3: qwen2 without biases, with per-head Q/K RMSNorm.
    Recipe {
        name: "qwen3",
        rope: RopeLayout::Neox,
        qk_norm: true,
        ..LLAMA
    },
    // Gemma 3: scaled embeddings, Q/K norm, norms before and after attention and FFN, GeGLU,
    // five sliding-window layers to one global layer.
    Recipe {
        name: "gemma3",
        rope: RopeLayout::Neox,
        qk_norm: true,
        post_norms: true,
        activation: Activation::GeluTanh,
        embed_scale: true,
        swa_period: Some(6),
        ..LLAMA
    },
];

/// The recipe of `general.architecture = name`.
pub fn recipe(name: &str) -> Option<&'static Recipe> {
    RECIPES.iter().find(|r| r.name == name)
}

/// The names of [`RECIPES`], for error messages ("llama, qwen2, ...").
pub fn names() -> impl Iterator<Item = &'static str> {
    RECIPES.iter().map(|r| r.name)
}
