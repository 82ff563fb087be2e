//! The forward pass of llama-family models (llama, qwen2), top to bottom, as llama2.c's `run.c`.
//!
//! One token at a time: embedding row → for each layer [RMSNorm → Q, K, V (+ biases) → RoPE → store
//! K, V in the f16 cache → online-softmax attention → output projection → residual → RMSNorm →
//! SwiGLU feed-forward → residual] → final RMSNorm → output head. Every matrix is read from the
//! storage through `matvec`, its rows split across the workers of a [`Parallel`] pool; no
//! allocation happens here (all buffers live in [`RunState`]).

use super::{Config, ModelError, RopeLayout, Weights};
use crate::gguf::{Gguf, TensorInfo};
use crate::kv::KvCache;
use crate::matvec::{matvec, read_row_f32};
use crate::ops::{self, RopeTable};
use crate::parallel::{par_chunks, Parallel, MAX_WORKERS};
use crate::quant::{ActBuf, ActFormat, Acts, Kernels};
use crate::storage::Storage;
use alloc::vec;
use alloc::vec::Vec;

/// A loaded model: hyperparameters and weight views (the weights stay in the storage).
#[derive(Debug, Clone)]
pub struct Model {
    pub config: Config,
    pub weights: Weights,
}

impl Model {
    /// Read the configuration and locate every weight.
    pub fn load<S: Storage + ?Sized>(g: &Gguf, src: &S) -> Result<Model, ModelError> {
        let config = Config::from_gguf(g)?;
        let weights = Weights::from_gguf(g, src, &config)?;
        Ok(Model { config, weights })
    }
}

/// One input vector quantized lazily to each activation format it is multiplied in.
#[derive(Debug)]
struct ActSet {
    bufs: [ActBuf; 6],
    fresh: [bool; 6],
}

fn slot(f: ActFormat) -> usize {
    match f {
        ActFormat::F32 => 0,
        ActFormat::F16 => 1,
        ActFormat::Bf16 => 2,
        ActFormat::Q8_0 => 3,
        ActFormat::Q8_1 => 4,
        ActFormat::Q8K => 5,
    }
}

impl ActSet {
    fn new(n: usize) -> Self {
        Self {
            bufs: core::array::from_fn(|_| ActBuf::with_capacity(n)),
            fresh: [false; 6],
        }
    }
    /// Forget the previous input.
    fn reset(&mut self) {
        self.fresh = [false; 6];
    }
    /// `x` quantized for multiplying with `w` (quantized once per format per input).
    fn for_weight(
        &mut self,
        k: &Kernels,
        w: &TensorInfo,
        x: &[f32],
    ) -> Result<Acts<'_>, ModelError> {
        let f = w.ty.act_format();
        let i = slot(f);
        if !self.fresh[i] {
            self.bufs[i]
                .quantize_with(f, x, (k.quantize_q8_0, k.quantize_q8_1, k.quantize_q8_k))
                .map_err(|e| ModelError::Matvec(alloc::format!("{e:?}")))?;
            self.fresh[i] = true;
        }
        self.bufs[i]
            .acts()
            .ok_or_else(|| ModelError::Matvec("no activations".into()))
    }
    fn bytes(&self) -> usize {
        self.bufs.iter().map(|b| b.reserved_bytes()).sum()
    }
}

/// Every buffer the forward pass uses, allocated once for a context length.
#[derive(Debug)]
pub struct RunState {
    /// Residual stream. `[dim]`
    pub x: Vec<f32>,
    /// Normed input / projection output. `[dim]`
    xb: Vec<f32>,
    /// Attention output, all heads. `[n_head * head_dim]`
    att: Vec<f32>,
    /// Queries. `[n_head * head_dim]`
    q: Vec<f32>,
    /// Keys and values of this position. `[kv_dim]`
    k: Vec<f32>,
    v: Vec<f32>,
    /// Feed-forward gate and up projections. `[ffn_dim]`
    hb: Vec<f32>,
    hb2: Vec<f32>,
    /// Scores over the vocabulary. `[vocab]`
    pub logits: Vec<f32>,
    /// Quantized activations of the current matmul input: one set for `dim`-wide inputs and one for
    /// the feed-forward hidden vector.
    acts_dim: ActSet,
    acts_ffn: ActSet,
    /// One read buffer per worker for rows that are not resident in memory.
    scratch: Vec<Vec<u8>>,
    pub kv: KvCache,
    rope: RopeTable,
    /// Next position to fill (tokens processed so far).
    pub pos: usize,
}

/// Smallest per-worker read buffer: rows are read in chunks of this size when not resident.
pub const SCRATCH_BYTES: usize = 64 * 1024;

impl RunState {
    /// Buffers for `model` with a KV cache of `ctx` positions and `workers` workers.
    pub fn new(model: &Model, ctx: usize, workers: usize) -> Result<RunState, ModelError> {
        let c = &model.config;
        if ctx == 0 || ctx > c.train_ctx {
            return Err(ModelError::BadContext {
                asked: ctx,
                max: c.train_ctx,
            });
        }
        let workers = workers.clamp(1, MAX_WORKERS);
        let scratch_bytes = SCRATCH_BYTES.max(model.weights.max_row_bytes());
        Ok(RunState {
            x: vec![0.0; c.dim],
            xb: vec![0.0; c.dim],
            att: vec![0.0; c.q_dim()],
            q: vec![0.0; c.q_dim()],
            k: vec![0.0; c.kv_dim()],
            v: vec![0.0; c.kv_dim()],
            hb: vec![0.0; c.ffn_dim],
            hb2: vec![0.0; c.ffn_dim],
            logits: vec![0.0; c.vocab],
            acts_dim: ActSet::new(c.dim.max(c.q_dim())),
            acts_ffn: ActSet::new(c.ffn_dim),
            scratch: (0..workers).map(|_| vec![0u8; scratch_bytes]).collect(),
            kv: KvCache::new(c.n_layer, ctx, c.kv_dim()),
            rope: RopeTable::new(ctx, c.rope_dim, c.rope_base, c.rope_scale),
            pos: 0,
        })
    }

    /// Bytes of runtime state: (KV cache, everything else).
    pub fn bytes(&self) -> (usize, usize) {
        let f = |v: &Vec<f32>| v.len() * 4;
        let bufs = f(&self.x)
            + f(&self.xb)
            + f(&self.att)
            + f(&self.q)
            + f(&self.k)
            + f(&self.v)
            + f(&self.hb)
            + f(&self.hb2)
            + f(&self.logits);
        let other = bufs
            + self.acts_dim.bytes()
            + self.acts_ffn.bytes()
            + self.scratch.iter().map(Vec::len).sum::<usize>()
            + self.rope.bytes();
        (self.kv.bytes(), other)
    }

    /// Context positions in the KV cache.
    pub fn ctx(&self) -> usize {
        self.kv.ctx
    }

    /// Forget the conversation (positions restart at 0; the cache is overwritten as it refills).
    pub fn reset(&mut self) {
        self.pos = 0;
    }
}

/// `out = W · x` with W's rows split across the pool's workers.
fn matmul<S, P>(
    k: &Kernels,
    src: &S,
    pool: &P,
    w: &TensorInfo,
    acts: &Acts<'_>,
    out: &mut [f32],
    scratch: &mut [Vec<u8>],
) -> Result<(), ModelError>
where
    S: Storage + Sync + ?Sized,
    P: Parallel + ?Sized,
{
    par_chunks(pool, out, 1, scratch, |rows, part, s| {
        matvec(k, src, w, rows, acts, part, s)
    })?;
    Ok(())
}

/// Matrix `j` of layer `l` in the order one token reads them (0 wq, 1 wk, 2 wv, 3 wo, 4 gate, 5 up,
/// 6 down; `j` past 6 runs on into the next layers), the output head after the last layer (when the
/// logits are wanted), then `None`.
fn matrix_at(w: &super::Weights, l: usize, j: usize, logits: bool) -> Option<&TensorInfo> {
    let (l, j) = (l + j / 7, j % 7);
    match w.layers.get(l) {
        Some(lw) => Some(
            [
                &lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down,
            ][j],
        ),
        None if logits && l == w.layers.len() && j == 0 => Some(&w.output),
        None => None,
    }
}

fn add_bias(x: &mut [f32], b: &Option<Vec<f32>>) {
    if let Some(b) = b {
        ops::add(x, b);
    }
}

impl Model {
    /// Run one token at the next position. With `want_logits`, the scores over the vocabulary are
    /// computed into `st.logits` (prompt tokens before the last skip the output head).
    pub fn forward<S, P>(
        &self,
        st: &mut RunState,
        src: &S,
        pool: &P,
        k: &Kernels,
        token: u32,
        want_logits: bool,
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        let c = &self.config;
        let w = &self.weights;
        let pos = st.pos;
        if pos >= st.kv.ctx {
            return Err(ModelError::ContextFull { ctx: st.kv.ctx });
        }
        if token as usize >= c.vocab {
            return Err(ModelError::TokenOutOfRange {
                token,
                vocab: c.vocab,
            });
        }
        let (hd, kv_dim) = (c.head_dim, c.kv_dim());
        let group = c.n_head / c.n_head_kv;
        let att_scale = 1.0 / libm::sqrtf(hd as f32);
        // Read-ahead: before each matrix, announce the one two further on, so a streaming source
        // reads it while these are computed (the first two are announced here).
        let ahead = |l: usize, j: usize| {
            if let Some(t) = matrix_at(w, l, j, want_logits) {
                src.prefetch(t.offset, t.size);
            }
        };
        ahead(0, 0);
        ahead(0, 1);

        // x = token_embd[token]                                  x: [dim]
        read_row_f32(
            src,
            &w.token_embd,
            token as usize,
            &mut st.x,
            &mut st.scratch[0],
        )?;

        for (l, lw) in w.layers.iter().enumerate() {
            // xb = rmsnorm(x) * attn_norm                        xb: [dim]
            ops::rmsnorm(&mut st.xb, &st.x, &lw.attn_norm, c.norm_eps);
            st.acts_dim.reset();
            // q = wq·xb + bq, k = wk·xb + bk, v = wv·xb + bv      q: [n_head*hd], k, v: [kv_dim]
            ahead(l, 2);
            let a = st.acts_dim.for_weight(k, &lw.wq, &st.xb)?;
            matmul(k, src, pool, &lw.wq, &a, &mut st.q, &mut st.scratch)?;
            ahead(l, 3);
            let a = st.acts_dim.for_weight(k, &lw.wk, &st.xb)?;
            matmul(k, src, pool, &lw.wk, &a, &mut st.k, &mut st.scratch)?;
            ahead(l, 4);
            let a = st.acts_dim.for_weight(k, &lw.wv, &st.xb)?;
            matmul(k, src, pool, &lw.wv, &a, &mut st.v, &mut st.scratch)?;
            add_bias(&mut st.q, &lw.bq);
            add_bias(&mut st.k, &lw.bk);
            add_bias(&mut st.v, &lw.bv);

            // RoPE on q and k at this position
            match c.rope_layout {
                RopeLayout::Adjacent => {
                    st.rope.apply_adjacent(&mut st.q, hd, pos);
                    st.rope.apply_adjacent(&mut st.k, hd, pos);
                }
                RopeLayout::Neox => {
                    st.rope.apply_neox(&mut st.q, hd, pos);
                    st.rope.apply_neox(&mut st.k, hd, pos);
                }
            }

            // K, V of this position into the f16 cache            cache: [layer][pos][kv_dim]
            let (ks, vs) = st.kv.slot_mut(l, pos);
            ops::to_f16(ks, &st.k);
            ops::to_f16(vs, &st.v);

            // att[h] = softmax(q[h]·K[kvh] / sqrt(hd)) · V[kvh]  per head, heads split across workers
            let (keys, values) = (st.kv.keys(l, pos + 1), st.kv.values(l, pos + 1));
            let q = &st.q;
            par_chunks(pool, &mut st.att, hd, &mut st.scratch, |r, part, _| {
                for (i, out) in part.chunks_exact_mut(hd).enumerate() {
                    let h = r.start / hd + i;
                    let kvh = h / group;
                    (k.attend_head)(
                        out,
                        &q[h * hd..(h + 1) * hd],
                        keys,
                        values,
                        pos + 1,
                        kv_dim,
                        kvh * hd,
                        att_scale,
                    );
                }
                Ok::<(), ModelError>(())
            })?;

            // x += wo·att                                        xb: [dim]
            st.acts_dim.reset();
            ahead(l, 5);
            let a = st.acts_dim.for_weight(k, &lw.wo, &st.att)?;
            matmul(k, src, pool, &lw.wo, &a, &mut st.xb, &mut st.scratch)?;
            ops::add(&mut st.x, &st.xb);

            // xb = rmsnorm(x) * ffn_norm
            ops::rmsnorm(&mut st.xb, &st.x, &lw.ffn_norm, c.norm_eps);
            st.acts_dim.reset();
            // hb = silu(w_gate·xb) * (w_up·xb)                   hb, hb2: [ffn_dim]
            ahead(l, 6);
            let a = st.acts_dim.for_weight(k, &lw.w_gate, &st.xb)?;
            matmul(k, src, pool, &lw.w_gate, &a, &mut st.hb, &mut st.scratch)?;
            ahead(l, 7);
            let a = st.acts_dim.for_weight(k, &lw.w_up, &st.xb)?;
            matmul(k, src, pool, &lw.w_up, &a, &mut st.hb2, &mut st.scratch)?;
            // hb = silu(hb) * hb2, split across workers (1536 expf per layer would otherwise be serial)
            let hb2 = &st.hb2;
            par_chunks(pool, &mut st.hb, 1, &mut st.scratch, |r, part, _| {
                ops::silu_mul(part, &hb2[r]);
                Ok::<(), ModelError>(())
            })?;

            // x += w_down·hb                                     xb: [dim]
            st.acts_ffn.reset();
            ahead(l, 8);
            let a = st.acts_ffn.for_weight(k, &lw.w_down, &st.hb)?;
            matmul(k, src, pool, &lw.w_down, &a, &mut st.xb, &mut st.scratch)?;
            ops::add(&mut st.x, &st.xb);
        }
        st.pos += 1;

        if want_logits {
            // logits = output · rmsnorm(x) * output_norm          logits: [vocab]
            ops::rmsnorm(&mut st.xb, &st.x, &w.output_norm, c.norm_eps);
            st.acts_dim.reset();
            let a = st.acts_dim.for_weight(k, &w.output, &st.xb)?;
            matmul(k, src, pool, &w.output, &a, &mut st.logits, &mut st.scratch)?;
        }
        Ok(())
    }
}
