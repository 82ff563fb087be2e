//! The forward pass of every architecture against an independent float64 implementation, on tiny
//! random models written as GGUF files (F32 weights, so the only rounding is f32 arithmetic and the
//! f16 KV cache): `llama`, `qwen2` (biases, NEOX RoPE), `qwen3` (Q/K head norms), `gemma3`
//! (sliding-window layers, post norms, GeGLU, scaled embeddings) and Llama 3 RoPE factors, each
//! piece shown to matter; and the loader's errors for unsupported architectures, missing tensors,
//! bad shapes and bad numbers.

mod common;

use common::models::*;
use common::synth::{GgufWriter, Meta};
use inference::model::{Model, ModelError, RunState};
use inference::parallel::SingleThread;
use inference::{Gguf, Kernels, SliceStorage};

/// A straightforward float64 forward pass over the same file, written from the architectures'
/// descriptions (llama.cpp's model code), not from lmboot's.
struct Reference {
    t: std::collections::HashMap<String, Vec<f64>>,
    sp: Spec,
    k: Vec<Vec<Vec<f64>>>, // [layer][pos][kv]
    v: Vec<Vec<Vec<f64>>>,
}

fn add(x: &mut [f64], y: &[f64]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

impl Reference {
    fn new(g: &Gguf, bytes: &[u8], sp: &Spec) -> Self {
        let mut t = std::collections::HashMap::new();
        for ti in &g.tensors {
            let s = ti.offset as usize;
            let v: Vec<f64> = bytes[s..s + ti.size as usize]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect();
            t.insert(ti.name.clone(), v);
        }
        Self {
            t,
            sp: sp.clone(),
            k: vec![vec![]; sp.layers],
            v: vec![vec![]; sp.layers],
        }
    }
    fn w(&self, n: &str) -> &[f64] {
        &self.t[n]
    }
    /// out[r] = sum_c W[r][c] x[c] for a GGUF matrix of `rows` rows of `x.len()` columns.
    fn mv(&self, n: &str, x: &[f64]) -> Vec<f64> {
        self.w(n)
            .chunks_exact(x.len())
            .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
            .collect()
    }
    fn norm(&self, x: &[f64], n: &str) -> Vec<f64> {
        let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
        let s = 1.0 / (ms + self.sp.eps as f64).sqrt();
        x.iter().zip(self.w(n)).map(|(v, g)| v * s * g).collect()
    }
    /// Whether layer `l` is a sliding-window layer, and its window.
    fn window(&self, l: usize) -> Option<usize> {
        let (w, period, _) = self.sp.swa?;
        (l % period < period - 1).then_some(w)
    }
    fn rope(&self, x: &mut [f64], pos: usize, l: usize) {
        let hd = self.sp.hd;
        let base = match (self.window(l), self.sp.swa) {
            (Some(_), Some((_, _, b))) => b,
            _ => BASE,
        };
        let factors = self.sp.llama3.map(|_| llama3_factors(hd));
        for head in x.chunks_exact_mut(hd) {
            for i in 0..hd / 2 {
                let f = factors.as_ref().map_or(1.0, |f| f[i]);
                let th = pos as f64 * base.powf(-2.0 * i as f64 / hd as f64) / f;
                let (a_i, b_i) = if self.sp.neox {
                    (i, i + hd / 2)
                } else {
                    (2 * i, 2 * i + 1)
                };
                let (a, b) = (head[a_i], head[b_i]);
                head[a_i] = a * th.cos() - b * th.sin();
                head[b_i] = a * th.sin() + b * th.cos();
            }
        }
    }
    /// Q, K, V of layer `l` for the normed input `xb`, with biases, head norms and RoPE.
    fn qkv(&self, l: usize, xb: &[f64], pos: usize) -> [Vec<f64>; 3] {
        let n = |s: &str| format!("blk.{l}.{s}");
        let mut q = self.mv(&n("attn_q.weight"), xb);
        let mut k = self.mv(&n("attn_k.weight"), xb);
        let mut v = self.mv(&n("attn_v.weight"), xb);
        if self.sp.biases {
            add(&mut q, self.w(&n("attn_q.bias")));
            add(&mut k, self.w(&n("attn_k.bias")));
            add(&mut v, self.w(&n("attn_v.bias")));
        }
        if self.sp.qk_norm {
            let heads = |x: &[f64], w: &str| -> Vec<f64> {
                x.chunks_exact(self.sp.hd)
                    .flat_map(|h| self.norm(h, &n(w)))
                    .collect()
            };
            q = heads(&q, "attn_q_norm.weight");
            k = heads(&k, "attn_k_norm.weight");
        }
        self.rope(&mut q, pos, l);
        self.rope(&mut k, pos, l);
        [q, k, v]
    }
    fn attention(&mut self, l: usize, x: &[f64], pos: usize) -> Vec<f64> {
        let sp = self.sp.clone();
        let hd = sp.hd;
        let xb = self.norm(x, &format!("blk.{l}.attn_norm.weight"));
        let [q, k, v] = self.qkv(l, &xb, pos);
        self.k[l].push(k);
        self.v[l].push(v);
        // Positions this layer sees: all so far, or the last `window`.
        let from = self.window(l).map_or(0, |w| (pos + 1).saturating_sub(w));
        let mut att = vec![0.0; sp.heads * hd];
        for h in 0..sp.heads {
            let kvh = h / (sp.heads / sp.kv_heads);
            let qh = &q[h * hd..(h + 1) * hd];
            let scores: Vec<f64> = (from..=pos)
                .map(|t| {
                    let k = &self.k[l][t][kvh * hd..(kvh + 1) * hd];
                    qh.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() / (hd as f64).sqrt()
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for (j, w) in e.iter().enumerate() {
                for i in 0..hd {
                    att[h * hd + i] += w / z * self.v[l][from + j][kvh * hd + i];
                }
            }
        }
        let o = self.mv(&format!("blk.{l}.attn_output.weight"), &att);
        self.post_norm(o, l, "post_attention_norm.weight")
    }
    fn post_norm(&self, o: Vec<f64>, l: usize, w: &str) -> Vec<f64> {
        if self.sp.post_norms {
            self.norm(&o, &format!("blk.{l}.{w}"))
        } else {
            o
        }
    }
    fn ffn(&self, l: usize, x: &[f64]) -> Vec<f64> {
        let n = |s: &str| format!("blk.{l}.{s}");
        let xb = self.norm(x, &n("ffn_norm.weight"));
        let g = self.mv(&n("ffn_gate.weight"), &xb);
        let u = self.mv(&n("ffn_up.weight"), &xb);
        let act = |g: f64| {
            if self.sp.gelu {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * g * (1.0 + (c * (g + 0.044715 * g * g * g)).tanh())
            } else {
                g / (1.0 + (-g).exp())
            }
        };
        let hdn: Vec<f64> = g.iter().zip(&u).map(|(&g, u)| act(g) * u).collect();
        self.post_norm(
            self.mv(&n("ffn_down.weight"), &hdn),
            l,
            "post_ffw_norm.weight",
        )
    }
    fn forward(&mut self, token: usize, pos: usize) -> Vec<f64> {
        let dim = self.sp.dim;
        let mut x = self.w("token_embd.weight")[token * dim..(token + 1) * dim].to_vec();
        if self.sp.embed_scale {
            x.iter_mut().for_each(|v| *v *= (dim as f64).sqrt());
        }
        for l in 0..self.sp.layers {
            let o = self.attention(l, &x, pos);
            add(&mut x, &o);
            let d = self.ffn(l, &x);
            add(&mut x, &d);
        }
        let xb = self.norm(&x, "output_norm.weight");
        let head = if self.sp.tied {
            "token_embd.weight"
        } else {
            "output.weight"
        };
        self.mv(head, &xb)
    }
}

fn kl(p_logits: &[f64], q_logits: &[f32]) -> f64 {
    let lse = |v: &[f64]| {
        let m = v.iter().cloned().fold(f64::MIN, f64::max);
        m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
    };
    let q: Vec<f64> = q_logits.iter().map(|&v| v as f64).collect();
    let (lp, lq) = (lse(p_logits), lse(&q));
    p_logits
        .iter()
        .zip(&q)
        .map(|(a, b)| (a - lp).exp() * ((a - lp) - (b - lq)))
        .sum()
}

/// The prompt the comparisons feed: 80 tokens, so that the sliding-window rings (window 5 plus
/// one batch of 64) wrap in a 128-position context.
fn prompt() -> Vec<u32> {
    (0..80u32).map(|i| (i * 7 + 3) % VOCAB as u32).collect()
}

/// Max |ours - reference| over the logits, and the max KL of ours from the reference, over the
/// prompt fed one token at a time; `reference` is the spec the float64 side follows.
fn compare(file: &Spec, reference: &Spec) -> (f64, f64) {
    let bytes = model_file(file).bytes();
    let src = SliceStorage::new(&bytes);
    let g = Gguf::open(&src).unwrap();
    let model = Model::load(&g, &src).unwrap();
    let mut st = RunState::new(&model, 128, 1).unwrap();
    let mut r = Reference::new(&g, &bytes, reference);
    let (mut worst, mut worst_kl) = (0f64, 0f64);
    for (pos, &tok) in prompt().iter().enumerate() {
        let k = Kernels::SCALAR;
        model
            .forward(&mut st, &src, &SingleThread, &k, tok, true)
            .unwrap();
        let want = r.forward(tok as usize, pos);
        for (a, b) in st.logits.iter().zip(&want) {
            worst = worst.max((*a as f64 - b).abs());
        }
        worst_kl = worst_kl.max(kl(&want, &st.logits));
    }
    (worst, worst_kl)
}

/// `spec` against the float64 reference; then, for each variant the reference is told (a piece
/// left out), the reference disagrees by far, so the test sees that piece.
fn check(spec: &Spec, variants: &[(&str, Spec)]) {
    let (diff, kl) = compare(spec, spec);
    let a = spec.arch;
    eprintln!("{a}: max |logit diff| {diff:.2e}, max KL {kl:.2e}");
    assert!(diff < 2e-2 && kl < 1e-4, "{a}: diff {diff}, KL {kl}");
    for (what, wrong) in variants {
        let (off, _) = compare(spec, wrong);
        eprintln!("{a} against a reference without {what}: max |logit diff| {off:.2e}");
        assert!(
            off > 20.0 * diff.max(1e-3),
            "{a}: {what} not seen: {off} vs {diff}"
        );
    }
}

#[test]
fn llama_matches_float64_reference() {
    check(&LLAMA, &[]);
    check(
        &Spec {
            tied: true,
            ..LLAMA
        },
        &[],
    );
}

#[test]
fn qwen2_matches_float64_reference() {
    check(
        &QWEN2,
        &[(
            "NEOX RoPE",
            Spec {
                neox: false,
                ..QWEN2
            },
        )],
    );
}

#[test]
fn qwen3_matches_float64_reference() {
    check(
        &QWEN3,
        &[(
            "Q/K head norms",
            Spec {
                qk_norm: false,
                ..QWEN3
            },
        )],
    );
}

#[test]
fn gemma3_matches_float64_reference() {
    check(
        &GEMMA3,
        &[
            (
                "the sliding window",
                Spec {
                    swa: Some((1000, 6, 10000.0)),
                    ..GEMMA3
                },
            ),
            (
                "the local RoPE base",
                Spec {
                    swa: Some((5, 6, BASE * 10.0)),
                    ..GEMMA3
                },
            ),
            (
                "GELU",
                Spec {
                    gelu: false,
                    ..GEMMA3
                },
            ),
            (
                "post norms",
                Spec {
                    post_norms: false,
                    ..GEMMA3
                },
            ),
            (
                "the embedding scale",
                Spec {
                    embed_scale: false,
                    ..GEMMA3
                },
            ),
        ],
    );
}

#[test]
fn llama3_rope_factors_match_float64_reference() {
    for (how, tensor) in [("rope_freqs.weight", true), ("rope.scaling keys", false)] {
        eprintln!("llama 3 RoPE factors from {how}");
        let spec = Spec {
            llama3: Some(tensor),
            ..LLAMA
        };
        check(
            &spec,
            &[(
                "the RoPE factors",
                Spec {
                    llama3: None,
                    ..spec.clone()
                },
            )],
        );
    }
}

/// A 150-token prompt fed in batches of 1, 7 and 32: bit for bit the same logits and K/V cache
/// (qwen2: biases and NEOX RoPE; llama with its own output head; gemma3, whose window rings wrap;
/// qwen3).
#[test]
fn batched_prompts_are_bit_identical() {
    for spec in [QWEN2, LLAMA, GEMMA3, QWEN3] {
        let bytes = model_file(&spec).bytes();
        let src = SliceStorage::new(&bytes);
        let g = Gguf::open(&src).unwrap();
        let model = Model::load(&g, &src).unwrap();
        let prompt: Vec<u32> = (0..150u32).map(|i| (i * 7 + 3) % VOCAB as u32).collect();
        let run = |batch: usize| {
            let mut st = RunState::with_batch(&model, 200, 1, batch).unwrap();
            assert_eq!(RunState::kv_bytes_for(&model, 200), st.kv.bytes() as u64);
            let k = Kernels::best();
            let chunks: Vec<&[u32]> = prompt.chunks(batch).collect();
            for (i, c) in chunks.iter().enumerate() {
                let last = i + 1 == chunks.len();
                model
                    .forward_batch(&mut st, &src, &SingleThread, &k, c, last)
                    .unwrap();
            }
            let logits: Vec<u32> = st.logits.iter().map(|v| v.to_bits()).collect();
            (logits, st.kv.k.clone(), st.kv.v.clone())
        };
        let want = run(1);
        for batch in [7, 32] {
            assert!(
                run(batch) == want,
                "{}: batch {batch} differs from one token at a time",
                spec.arch
            );
        }
    }
}

fn load_err(w: &GgufWriter) -> ModelError {
    let bytes = w.bytes();
    let src = SliceStorage::new(&bytes);
    let g = Gguf::open(&src).unwrap();
    Model::load(&g, &src).unwrap_err()
}

#[test]
fn model_errors_are_clear() {
    let mut w2 = GgufWriter::default();
    w2.meta("general.architecture", Meta::Str("mamba".into()));
    let e = load_err(&w2);
    assert!(
        matches!(&e, ModelError::UnsupportedArch { arch } if arch == "mamba"),
        "{e:?}"
    );
    assert!(e.to_string().contains("mamba"));

    let mut w = model_file(&LLAMA);
    w.remove_tensor("blk.1.ffn_up.weight");
    let e = load_err(&w);
    assert!(
        e.to_string().contains("blk.1.ffn_up.weight") && e.to_string().contains("missing"),
        "{e}"
    );

    let mut w = model_file(&QWEN2);
    w.remove_tensor("blk.0.attn_k.bias");
    assert!(load_err(&w).to_string().contains("blk.0.attn_k.bias"));

    let mut w = model_file(&LLAMA);
    w.remove_tensor("blk.0.attn_q.weight").tensor(
        "blk.0.attn_q.weight",
        &[LLAMA.dim as u64, 32],
        vec![0.0; LLAMA.dim * 32],
    );
    let e = load_err(&w);
    assert!(
        matches!(&e, ModelError::BadShape { tensor, .. } if tensor == "blk.0.attn_q.weight"),
        "{e:?}"
    );

    let mut w = model_file(&QWEN3);
    w.remove_tensor("blk.1.attn_k_norm.weight");
    assert!(load_err(&w)
        .to_string()
        .contains("blk.1.attn_k_norm.weight"));

    let mut g3 = GgufWriter::default();
    meta(
        &mut g3,
        &Spec {
            swa: None,
            ..GEMMA3
        },
    );
    let e = load_err(&g3);
    assert!(
        e.to_string().contains("gemma3.attention.sliding_window"),
        "{e}"
    );

    let mut w = model_file(&LLAMA);
    w.meta("llama.rope.scaling.type", Meta::Str("yarn".into()));
    let e = load_err(&w).to_string();
    assert!(e.contains("rope.scaling.type") && e.contains("yarn"), "{e}");

    let mut w = model_file(&Spec {
        llama3: Some(true),
        ..LLAMA
    });
    w.tensor_data("rope_freqs.weight")[2] = -1.0;
    let e = load_err(&w).to_string();
    assert!(
        e.contains("rope_freqs.weight") && e.contains("positive"),
        "{e}"
    );

    let mut w = model_file(&LLAMA);
    w.tensor_data("blk.1.ffn_norm.weight")[7] = f32::NAN;
    let e = load_err(&w);
    assert!(
        matches!(&e, ModelError::NonFinite { tensor, index: 7 } if tensor == "blk.1.ffn_norm.weight"),
        "{e:?}"
    );

    let mut w = model_file(&LLAMA);
    w.meta("llama.rope.freq_base", Meta::F32(f32::NAN));
    // Duplicate key: the GGUF reader refuses the file itself.
    let bytes = w.bytes();
    assert!(Gguf::open(&SliceStorage::new(&bytes)).is_err());

    let mut w = GgufWriter::default();
    for (k, v) in [
        ("block_count", 2),
        ("embedding_length", 64),
        ("feed_forward_length", 96),
        ("attention.head_count", 5),
        ("context_length", 64),
    ] {
        w.meta(&format!("llama.{k}"), Meta::U32(v));
    }
    w.meta("general.architecture", Meta::Str("llama".into()));
    let e = load_err(&w);
    assert!(
        e.to_string().contains("attention.head_count") && e.to_string().contains("does not divide"),
        "{e}"
    );
}

/// `general.sampling.*` fills the settings the user did not give; a bad value names its key.
#[test]
fn sampling_defaults_come_from_the_model() {
    use inference::sampler::{Given, SamplerConfig};
    let mut w = model_file(&LLAMA);
    w.meta("general.sampling.temp", Meta::F32(0.2))
        .meta("general.sampling.top_p", Meta::F32(0.9))
        .meta("general.sampling.top_k", Meta::U32(20));
    let bytes = w.bytes();
    let g = Gguf::open(&SliceStorage::new(&bytes)).unwrap();
    let mut given = Given::default();
    given.mark("top_p");
    let mut cfg = SamplerConfig {
        top_p: 0.5,
        ..Default::default()
    };
    let taken = cfg.apply_model_defaults(&g, given).unwrap();
    assert_eq!(taken, ["temperature", "top_k"]);
    assert_eq!((cfg.temperature, cfg.top_k, cfg.top_p), (0.2, 20, 0.5));
    // Without the keys nothing changes.
    let plain = model_file(&LLAMA).bytes();
    let g = Gguf::open(&SliceStorage::new(&plain)).unwrap();
    let mut d = SamplerConfig::default();
    assert!(d
        .apply_model_defaults(&g, Given::default())
        .unwrap()
        .is_empty());
    assert_eq!(d, SamplerConfig::default());
    // Out of range, or the wrong type: the key is named.
    for (key, v) in [
        ("general.sampling.temp", Meta::F32(500.0)),
        ("general.sampling.min_p", Meta::Str("low".into())),
    ] {
        let mut w = model_file(&LLAMA);
        w.meta(key, v);
        let bytes = w.bytes();
        let g = Gguf::open(&SliceStorage::new(&bytes)).unwrap();
        let e = SamplerConfig::default()
            .apply_model_defaults(&g, Given::default())
            .unwrap_err();
        assert!(e.contains(key), "{e}");
    }
}
