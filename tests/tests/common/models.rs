//! Tiny random models of every architecture written as GGUF files (F32 weights): their shapes,
//! the pieces each recipe switches on, and the writer, shared by the tests that run them.

use super::synth::{GgufWriter, Meta};

/// A tiny model of one architecture: its shape and the pieces its recipe switches on.
#[derive(Clone)]
pub struct Spec {
    pub arch: &'static str,
    pub dim: usize,
    pub heads: usize,
    pub kv_heads: usize,
    /// Head width (`attention.key_length` when not dim / heads).
    pub hd: usize,
    pub ffn: usize,
    pub layers: usize,
    pub tied: bool,
    pub eps: f32,
    pub neox: bool,
    pub biases: bool,
    pub qk_norm: bool,
    pub post_norms: bool,
    pub gelu: bool,
    pub embed_scale: bool,
    /// (window, period, local RoPE base): gemma3's sliding-window layers.
    pub swa: Option<(usize, usize, f64)>,
    /// Llama 3 RoPE factors: written as `rope_freqs.weight`, or (`false`) as `rope.scaling.*` keys.
    pub llama3: Option<bool>,
}

pub const VOCAB: usize = 40;

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * scale).collect()
    }
}
pub const BASE: f64 = 10000.0;
/// Llama 3 scaling of the synthetic models: factor 8, low/high frequency factors 1 and 4, an
/// original context of 64 (so that the 16-wide heads have frequencies in all three bands).
pub const L3: (f64, f64, f64, f64) = (8.0, 1.0, 4.0, 64.0);

pub const LLAMA: Spec = Spec {
    arch: "llama",
    dim: 64,
    heads: 4,
    kv_heads: 2,
    hd: 16,
    ffn: 96,
    layers: 2,
    tied: false,
    eps: 1e-5,
    neox: false,
    biases: false,
    qk_norm: false,
    post_norms: false,
    gelu: false,
    embed_scale: false,
    swa: None,
    llama3: None,
};
pub const QWEN2: Spec = Spec {
    arch: "qwen2",
    neox: true,
    biases: true,
    ..LLAMA
};
pub const QWEN3: Spec = Spec {
    arch: "qwen3",
    neox: true,
    qk_norm: true,
    tied: true,
    eps: 1e-6,
    ..LLAMA
};
/// Seven layers: five sliding-window layers (window 5), a global one, and a window layer again;
/// heads wider than dim / heads, as on Gemma-3-270M.
pub const GEMMA3: Spec = Spec {
    arch: "gemma3",
    dim: 48,
    hd: 16,
    heads: 4,
    kv_heads: 1,
    layers: 7,
    tied: true,
    eps: 1e-6,
    neox: true,
    qk_norm: true,
    post_norms: true,
    gelu: true,
    embed_scale: true,
    swa: Some((5, 6, 10000.0)),
    ..LLAMA
};

/// Llama 3's per-frequency RoPE divisors (the converter's formula), for `hd`-wide heads.
pub fn llama3_factors(hd: usize) -> Vec<f64> {
    let (factor, low, high, ctx) = L3;
    (0..hd / 2)
        .map(|i| {
            let wavelen = 2.0 * std::f64::consts::PI / BASE.powf(-2.0 * i as f64 / hd as f64);
            if wavelen < ctx / high {
                1.0
            } else if wavelen > ctx / low {
                factor
            } else {
                let smooth = (ctx / wavelen - low) / (high - low);
                1.0 / ((1.0 - smooth) / factor + smooth)
            }
        })
        .collect()
}

pub fn norm_vec(r: &mut Rng, n: usize) -> Vec<f32> {
    r.vec(n, 0.5).iter().map(|v| 1.0 + v).collect()
}

pub fn meta(w: &mut GgufWriter, sp: &Spec) {
    let a = sp.arch;
    let k = |s: &str| format!("{a}.{s}");
    w.meta("general.architecture", Meta::Str(a.into()));
    for (key, v) in [
        ("block_count", sp.layers),
        ("embedding_length", sp.dim),
        ("feed_forward_length", sp.ffn),
        ("attention.head_count", sp.heads),
        ("attention.head_count_kv", sp.kv_heads),
        ("context_length", 256),
    ] {
        w.meta(&k(key), Meta::U32(v as u32));
    }
    if sp.hd != sp.dim / sp.heads {
        w.meta(&k("attention.key_length"), Meta::U32(sp.hd as u32));
        w.meta(&k("attention.value_length"), Meta::U32(sp.hd as u32));
    }
    w.meta(&k("rope.freq_base"), Meta::F32(BASE as f32))
        .meta(&k("attention.layer_norm_rms_epsilon"), Meta::F32(sp.eps));
    if let Some((window, _, base)) = sp.swa {
        w.meta(&k("attention.sliding_window"), Meta::U32(window as u32));
        w.meta(&k("rope.freq_base_swa"), Meta::F32(base as f32));
    }
    if sp.llama3 == Some(false) {
        let (f, lo, hi, ctx) = L3;
        w.meta(&k("rope.scaling.type"), Meta::Str("llama3".into()))
            .meta(&k("rope.scaling.factor"), Meta::F32(f as f32))
            .meta(&k("rope.scaling.low_freq_factor"), Meta::F32(lo as f32))
            .meta(&k("rope.scaling.high_freq_factor"), Meta::F32(hi as f32))
            .meta(
                &k("rope.scaling.original_context_length"),
                Meta::U32(ctx as u32),
            );
    }
}

pub fn model_file(sp: &Spec) -> GgufWriter {
    model_file_vocab(sp, VOCAB)
}

/// [`model_file`] with `vocab` rows of embedding and output (for a model given a tokenizer).
pub fn model_file_vocab(sp: &Spec, vocab: usize) -> GgufWriter {
    let mut r = Rng(0x5eed_0000 + sp.arch.len() as u64);
    let mut w = GgufWriter::default();
    meta(&mut w, sp);
    let (d, f, v) = (sp.dim as u64, sp.ffn as u64, vocab as u64);
    let (q, kv, hd) = (
        (sp.heads * sp.hd) as u64,
        (sp.kv_heads * sp.hd) as u64,
        sp.hd as u64,
    );
    let m = |r: &mut Rng, cols: u64, rows: u64, s| r.vec((cols * rows) as usize, s);
    w.tensor("token_embd.weight", &[d, v], m(&mut r, d, v, 1.0));
    w.tensor("output_norm.weight", &[d], norm_vec(&mut r, sp.dim));
    if !sp.tied {
        w.tensor("output.weight", &[d, v], m(&mut r, d, v, 0.3));
    }
    if sp.llama3 == Some(true) {
        let fr = llama3_factors(sp.hd).iter().map(|&x| x as f32).collect();
        w.tensor("rope_freqs.weight", &[hd / 2], fr);
    }
    for l in 0..sp.layers {
        let n = |s: &str| format!("blk.{l}.{s}");
        w.tensor(&n("attn_norm.weight"), &[d], norm_vec(&mut r, sp.dim));
        w.tensor(&n("attn_q.weight"), &[d, q], m(&mut r, d, q, 0.25));
        w.tensor(&n("attn_k.weight"), &[d, kv], m(&mut r, d, kv, 0.25));
        w.tensor(&n("attn_v.weight"), &[d, kv], m(&mut r, d, kv, 0.25));
        if sp.biases {
            w.tensor(&n("attn_q.bias"), &[q], r.vec(q as usize, 0.5));
            w.tensor(&n("attn_k.bias"), &[kv], r.vec(kv as usize, 0.5));
            w.tensor(&n("attn_v.bias"), &[kv], r.vec(kv as usize, 0.5));
        }
        if sp.qk_norm {
            w.tensor(&n("attn_q_norm.weight"), &[hd], norm_vec(&mut r, sp.hd));
            w.tensor(&n("attn_k_norm.weight"), &[hd], norm_vec(&mut r, sp.hd));
        }
        w.tensor(&n("attn_output.weight"), &[q, d], m(&mut r, q, d, 0.2));
        w.tensor(&n("ffn_norm.weight"), &[d], norm_vec(&mut r, sp.dim));
        w.tensor(&n("ffn_gate.weight"), &[d, f], m(&mut r, d, f, 0.25));
        w.tensor(&n("ffn_up.weight"), &[d, f], m(&mut r, d, f, 0.25));
        w.tensor(&n("ffn_down.weight"), &[f, d], m(&mut r, f, d, 0.2));
        if sp.post_norms {
            w.tensor(
                &n("post_attention_norm.weight"),
                &[d],
                norm_vec(&mut r, sp.dim),
            );
            w.tensor(&n("post_ffw_norm.weight"), &[d], norm_vec(&mut r, sp.dim));
        }
    }
    w
}
