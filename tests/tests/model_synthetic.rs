//! The forward pass of both architectures against an independent float64 implementation, on tiny
//! random models written as GGUF files (F32 weights, so the only rounding is f32 arithmetic and the
//! f16 KV cache). This covers `qwen2` (biases, NEOX RoPE) without a real qwen2 model, and the
//! loader's errors for unsupported architectures, missing tensors, bad shapes and bad numbers.

mod common;

use common::synth::{GgufWriter, Meta};
use inference::model::{Model, ModelError, RunState};
use inference::parallel::SingleThread;
use inference::{Gguf, Kernels, SliceStorage};

const DIM: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HD: usize = DIM / HEADS;
const FFN: usize = 96;
const VOCAB: usize = 40;
const LAYERS: usize = 2;
const BASE: f64 = 10000.0;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * scale).collect()
    }
}

fn model_file(arch: &str, tied: bool) -> GgufWriter {
    let mut r = Rng(0x5eed_0000 + arch.len() as u64);
    let mut w = GgufWriter::default();
    w.meta("general.architecture", Meta::Str(arch.into()))
        .meta(&format!("{arch}.block_count"), Meta::U32(LAYERS as u32))
        .meta(&format!("{arch}.embedding_length"), Meta::U32(DIM as u32))
        .meta(
            &format!("{arch}.feed_forward_length"),
            Meta::U32(FFN as u32),
        )
        .meta(
            &format!("{arch}.attention.head_count"),
            Meta::U32(HEADS as u32),
        )
        .meta(
            &format!("{arch}.attention.head_count_kv"),
            Meta::U32(KV_HEADS as u32),
        )
        .meta(&format!("{arch}.context_length"), Meta::U32(64))
        .meta(&format!("{arch}.rope.freq_base"), Meta::F32(BASE as f32))
        .meta(
            &format!("{arch}.attention.layer_norm_rms_epsilon"),
            Meta::F32(1e-5),
        );
    let d = DIM as u64;
    let kv = (KV_HEADS * HD) as u64;
    w.tensor(
        "token_embd.weight",
        &[d, VOCAB as u64],
        r.vec(DIM * VOCAB, 1.0),
    );
    w.tensor(
        "output_norm.weight",
        &[d],
        r.vec(DIM, 0.5).iter().map(|v| 1.0 + v).collect(),
    );
    if !tied {
        w.tensor("output.weight", &[d, VOCAB as u64], r.vec(DIM * VOCAB, 0.3));
    }
    for l in 0..LAYERS {
        let n = |s: &str| format!("blk.{l}.{s}");
        w.tensor(
            &n("attn_norm.weight"),
            &[d],
            r.vec(DIM, 0.5).iter().map(|v| 1.0 + v).collect(),
        );
        w.tensor(&n("attn_q.weight"), &[d, d], r.vec(DIM * DIM, 0.25));
        w.tensor(
            &n("attn_k.weight"),
            &[d, kv],
            r.vec(DIM * kv as usize, 0.25),
        );
        w.tensor(
            &n("attn_v.weight"),
            &[d, kv],
            r.vec(DIM * kv as usize, 0.25),
        );
        if arch == "qwen2" {
            w.tensor(&n("attn_q.bias"), &[d], r.vec(DIM, 0.5));
            w.tensor(&n("attn_k.bias"), &[kv], r.vec(kv as usize, 0.5));
            w.tensor(&n("attn_v.bias"), &[kv], r.vec(kv as usize, 0.5));
        }
        w.tensor(&n("attn_output.weight"), &[d, d], r.vec(DIM * DIM, 0.2));
        w.tensor(
            &n("ffn_norm.weight"),
            &[d],
            r.vec(DIM, 0.5).iter().map(|v| 1.0 + v).collect(),
        );
        w.tensor(
            &n("ffn_gate.weight"),
            &[d, FFN as u64],
            r.vec(DIM * FFN, 0.25),
        );
        w.tensor(
            &n("ffn_up.weight"),
            &[d, FFN as u64],
            r.vec(DIM * FFN, 0.25),
        );
        w.tensor(
            &n("ffn_down.weight"),
            &[FFN as u64, d],
            r.vec(DIM * FFN, 0.2),
        );
    }
    w
}

/// A straightforward float64 llama / qwen2 forward pass over the same file.
struct Reference {
    t: std::collections::HashMap<String, Vec<f64>>,
    neox: bool,
    biases: bool,
    tied: bool,
    k: Vec<Vec<Vec<f64>>>, // [layer][pos][kv]
    v: Vec<Vec<Vec<f64>>>,
}

impl Reference {
    fn new(g: &Gguf, bytes: &[u8], neox: bool) -> Self {
        let mut t = std::collections::HashMap::new();
        for ti in &g.tensors {
            let s = ti.offset as usize;
            let v: Vec<f64> = bytes[s..s + ti.size as usize]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect();
            t.insert(ti.name.clone(), v);
        }
        let tied = !t.contains_key("output.weight");
        let biases = t.contains_key("blk.0.attn_q.bias");
        Self {
            t,
            neox,
            biases,
            tied,
            k: vec![vec![]; LAYERS],
            v: vec![vec![]; LAYERS],
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
        let s = 1.0 / (ms + 1e-5).sqrt();
        x.iter().zip(self.w(n)).map(|(v, g)| v * s * g).collect()
    }
    fn rope(&self, x: &mut [f64], pos: usize) {
        for head in x.chunks_exact_mut(HD) {
            for i in 0..HD / 2 {
                let th = pos as f64 * BASE.powf(-2.0 * i as f64 / HD as f64);
                let (a_i, b_i) = if self.neox {
                    (i, i + HD / 2)
                } else {
                    (2 * i, 2 * i + 1)
                };
                let (a, b) = (head[a_i], head[b_i]);
                head[a_i] = a * th.cos() - b * th.sin();
                head[b_i] = a * th.sin() + b * th.cos();
            }
        }
    }
    fn forward(&mut self, token: usize, pos: usize) -> Vec<f64> {
        let mut x = self.w("token_embd.weight")[token * DIM..(token + 1) * DIM].to_vec();
        for l in 0..LAYERS {
            let n = |s: &str| format!("blk.{l}.{s}");
            let xb = self.norm(&x, &n("attn_norm.weight"));
            let mut q = self.mv(&n("attn_q.weight"), &xb);
            let mut k = self.mv(&n("attn_k.weight"), &xb);
            let mut v = self.mv(&n("attn_v.weight"), &xb);
            if self.biases {
                for (a, b) in q.iter_mut().zip(self.w(&n("attn_q.bias"))) {
                    *a += b;
                }
                for (a, b) in k.iter_mut().zip(self.w(&n("attn_k.bias"))) {
                    *a += b;
                }
                for (a, b) in v.iter_mut().zip(self.w(&n("attn_v.bias"))) {
                    *a += b;
                }
            }
            self.rope(&mut q, pos);
            self.rope(&mut k, pos);
            self.k[l].push(k);
            self.v[l].push(v);
            let mut att = vec![0.0; DIM];
            for h in 0..HEADS {
                let kvh = h / (HEADS / KV_HEADS);
                let qh = &q[h * HD..(h + 1) * HD];
                let scores: Vec<f64> = self.k[l]
                    .iter()
                    .map(|k| {
                        qh.iter()
                            .zip(&k[kvh * HD..(kvh + 1) * HD])
                            .map(|(a, b)| a * b)
                            .sum::<f64>()
                            / (HD as f64).sqrt()
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for (t, w) in e.iter().enumerate() {
                    for i in 0..HD {
                        att[h * HD + i] += w / z * self.v[l][t][kvh * HD + i];
                    }
                }
            }
            let o = self.mv(&n("attn_output.weight"), &att);
            for (a, b) in x.iter_mut().zip(&o) {
                *a += b;
            }
            let xb = self.norm(&x, &n("ffn_norm.weight"));
            let g = self.mv(&n("ffn_gate.weight"), &xb);
            let u = self.mv(&n("ffn_up.weight"), &xb);
            let hdn: Vec<f64> = g
                .iter()
                .zip(&u)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let dn = self.mv(&n("ffn_down.weight"), &hdn);
            for (a, b) in x.iter_mut().zip(&dn) {
                *a += b;
            }
        }
        let xb = self.norm(&x, "output_norm.weight");
        self.mv(
            if self.tied {
                "token_embd.weight"
            } else {
                "output.weight"
            },
            &xb,
        )
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

/// Max |ours - reference| over the logits, and the KL of ours from the reference, over 6 tokens.
fn compare(arch: &str, tied: bool, neox_reference: bool) -> (f64, f64) {
    let bytes = model_file(arch, tied).bytes();
    let src = SliceStorage::new(&bytes);
    let g = Gguf::open(&src).unwrap();
    let model = Model::load(&g, &src).unwrap();
    let mut st = RunState::new(&model, 16, 1).unwrap();
    let mut reference = Reference::new(&g, &bytes, neox_reference);
    let (mut worst, mut worst_kl) = (0f64, 0f64);
    for (pos, &tok) in [3usize, 17, 5, 39, 0, 22].iter().enumerate() {
        model
            .forward(
                &mut st,
                &src,
                &SingleThread,
                &Kernels::SCALAR,
                tok as u32,
                true,
            )
            .unwrap();
        let want = reference.forward(tok, pos);
        for (a, b) in st.logits.iter().zip(&want) {
            worst = worst.max((*a as f64 - b).abs());
        }
        worst_kl = worst_kl.max(kl(&want, &st.logits));
    }
    (worst, worst_kl)
}

#[test]
fn llama_matches_float64_reference() {
    for tied in [false, true] {
        let (diff, kl) = compare("llama", tied, false);
        eprintln!("llama (tied {tied}): max |logit diff| {diff:.2e}, max KL {kl:.2e}");
        assert!(
            diff < 2e-2 && kl < 1e-4,
            "llama tied={tied}: diff {diff}, KL {kl}"
        );
    }
}

#[test]
fn qwen2_matches_float64_reference() {
    let (diff, kl) = compare("qwen2", false, true);
    eprintln!("qwen2: max |logit diff| {diff:.2e}, max KL {kl:.2e}");
    assert!(diff < 2e-2 && kl < 1e-4, "qwen2: diff {diff}, KL {kl}");
    // The test can tell the layouts apart: the reference with adjacent pairs disagrees badly.
    let (wrong, _) = compare("qwen2", false, false);
    assert!(
        wrong > 50.0 * diff.max(1e-3),
        "RoPE layout not detected: {wrong} vs {diff}"
    );
}

/// A 45-token prompt fed in batches of 1, 7 and 32: bit for bit the same logits and K/V cache
/// (qwen2: biases and NEOX RoPE; llama with its own output head).
#[test]
fn batched_prompts_are_bit_identical() {
    for (arch, tied) in [("qwen2", false), ("llama", false)] {
        let bytes = model_file(arch, tied).bytes();
        let src = SliceStorage::new(&bytes);
        let g = Gguf::open(&src).unwrap();
        let model = Model::load(&g, &src).unwrap();
        let prompt: Vec<u32> = (0..45u32).map(|i| (i * 7 + 3) % VOCAB as u32).collect();
        let run = |batch: usize| {
            let mut st = RunState::with_batch(&model, 64, 1, batch).unwrap();
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
                "{arch}: batch {batch} differs from one token at a time"
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

    let mut w = model_file("llama", false);
    w.remove_tensor("blk.1.ffn_up.weight");
    let e = load_err(&w);
    assert!(
        e.to_string().contains("blk.1.ffn_up.weight") && e.to_string().contains("missing"),
        "{e}"
    );

    let mut w = model_file("qwen2", false);
    w.remove_tensor("blk.0.attn_k.bias");
    assert!(load_err(&w).to_string().contains("blk.0.attn_k.bias"));

    let mut w = model_file("llama", false);
    w.remove_tensor("blk.0.attn_q.weight").tensor(
        "blk.0.attn_q.weight",
        &[DIM as u64, 32],
        vec![0.0; DIM * 32],
    );
    let e = load_err(&w);
    assert!(
        matches!(&e, ModelError::BadShape { tensor, .. } if tensor == "blk.0.attn_q.weight"),
        "{e:?}"
    );

    let mut w = model_file("llama", false);
    w.tensor_data("blk.1.ffn_norm.weight")[7] = f32::NAN;
    let e = load_err(&w);
    assert!(
        matches!(&e, ModelError::NonFinite { tensor, index: 7 } if tensor == "blk.1.ffn_norm.weight"),
        "{e:?}"
    );

    let mut w = model_file("llama", false);
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
