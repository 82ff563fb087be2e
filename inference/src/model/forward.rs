//! The forward pass of every architecture lmboot runs (llama, qwen2, qwen3, gemma3), top to
//! bottom, as llama2.c's `run.c`; the pieces a recipe ([`super::arch`]) switches are marked
//! `[recipe: ...]`.
//!
//! A batch of B tokens at consecutive positions (B = 1 when generating, up to the run state's batch
//! for a prompt): embedding rows [× sqrt(dim)] → for each layer [RMSNorm → Q, K, V [+ biases] →
//! [per-head RMSNorm of Q and K] → RoPE → store K, V of all B positions in the f16 cache →
//! online-softmax attention, token i over positions up to its own (the causal mask inside the
//! batch), or over its window on a sliding-window layer → output projection [→ RMSNorm] → residual
//! → RMSNorm → gated feed-forward (SiLU or GELU) [→ RMSNorm] → residual] → final RMSNorm → output
//! head (last token only, or every token when checking draft tokens). Every matrix is read
//! from the storage once per batch through `matmat`, its rows split across the workers of a
//! [`Parallel`] pool, each weight block decoded once for all B tokens. Every value a token gets is
//! computed exactly as in a one-token pass (same operations, same order), so a batched prompt
//! gives bit for bit the logits of feeding it one token at a time. No allocation happens here
//! (all buffers live in [`RunState`]); per-token buffers are `[B][width]`.

use super::exact::{self, Exact, Kv32, KvSource};
use super::tree::Tree;
use super::{Activation, Config, ModelError, Part, Weights};
use crate::fit;
use crate::gguf::{Gguf, TensorInfo};
use crate::kv::KvCache;
use crate::matvec::{matmat, read_row_f32};
use crate::ops::{self, Head, RopeTable};
use crate::parallel::{par_chunks, Parallel, MAX_WORKERS};
use crate::quant::{ActBuf, ActFormat, ActsBatch, Kernels, MAX_BATCH};
use crate::storage::Storage;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

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

/// One input (B vectors, `[B][n]`) quantized lazily to each activation format it is multiplied in.
#[derive(Debug)]
struct ActSet {
    bufs: [ActBuf; 6],
    fresh: [bool; 6],
}

/// The formats, one slot each.
const FORMATS: [ActFormat; 6] = [
    ActFormat::F32,
    ActFormat::F16,
    ActFormat::Bf16,
    ActFormat::Q8_0,
    ActFormat::Q8_1,
    ActFormat::Q8K,
];

fn slot(f: ActFormat) -> usize {
    FORMATS.iter().position(|&g| g == f).unwrap_or(0)
}

impl ActSet {
    fn new(n: usize) -> Self {
        Self {
            bufs: FORMATS.map(|f| ActBuf::for_format(f, n)),
            fresh: [false; 6],
        }
    }
    /// Bytes [`ActSet::new`] reserves for `n` values.
    fn bytes_for(n: usize) -> usize {
        FORMATS.iter().map(|&f| ActBuf::bytes_for(f, n)).sum()
    }
    /// Forget the previous input.
    fn reset(&mut self) {
        self.fresh = [false; 6];
    }
    /// `x` (`cols` vectors) quantized for multiplying with `w` (once per format per input).
    fn for_weight<P: Parallel + ?Sized>(
        &mut self,
        k: &Kernels,
        pool: &P,
        w: &TensorInfo,
        x: &[f32],
        cols: usize,
    ) -> Result<ActsBatch<'_>, ModelError> {
        let f = w.ty.act_format();
        let i = slot(f);
        if !self.fresh[i] {
            self.bufs[i]
                .quantize_with(
                    f,
                    x,
                    (k.quantize_q8_0, k.quantize_q8_1, k.quantize_q8_k),
                    pool,
                )
                .map_err(|e| ModelError::Matvec(alloc::format!("{e:?}")))?;
            self.fresh[i] = true;
        }
        let acts = self.bufs[i]
            .acts()
            .ok_or_else(|| ModelError::Matvec("no activations".into()))?;
        Ok(ActsBatch { cols, acts })
    }
    fn bytes(&self) -> usize {
        self.bufs.iter().map(|b| b.reserved_bytes()).sum()
    }
}

/// Every buffer the forward pass uses, allocated once for a context length and a batch size B.
#[derive(Debug)]
pub struct RunState {
    /// Residual stream. `[B][dim]`
    pub x: Vec<f32>,
    /// Normed input / projection output. `[B][dim]`
    xb: Vec<f32>,
    /// Attention output, all heads. `[B][n_head * head_dim]`
    att: Vec<f32>,
    /// Queries. `[B][n_head * head_dim]`
    q: Vec<f32>,
    /// Keys and values of the batch's positions. `[B][kv_dim]`
    k: Vec<f32>,
    v: Vec<f32>,
    /// Feed-forward gate and up projections. `[B][ffn_dim]`
    hb: Vec<f32>,
    hb2: Vec<f32>,
    /// A batched product as the kernels write it, `[rows][B]`, before it is laid out per token
    /// (empty when B = 1).
    mm: Vec<f32>,
    /// Tokens per forward pass at most.
    batch: usize,
    /// Scores over the vocabulary. `[vocab]`
    pub logits: Vec<f32>,
    /// Scores over the vocabulary after every token of the last batch, for checking draft tokens
    /// (empty unless [`RunState::keep_row_logits`] asked for them). `[B][vocab]`
    row_logits: Vec<f32>,
    /// Quantized activations of the current matmul input: one set for `dim`-wide inputs and one for
    /// the feed-forward hidden vector.
    acts_dim: ActSet,
    acts_ffn: ActSet,
    /// One read buffer per worker for rows that are not resident in memory.
    scratch: Vec<Vec<u8>>,
    pub kv: KvCache,
    /// RoPE of the global layers, and of the sliding-window layers when their base differs.
    rope: RopeTable,
    rope_local: Option<RopeTable>,
    /// Next position to fill (tokens processed so far).
    pub pos: usize,
    /// One past the highest position written since the last [`RunState::reset`] (how far back a
    /// [`RunState::rollback`] may go without a window ring having lost what it needs).
    top: usize,
    /// The error budget's switches (all off in a normal run) and the f32 K/V they may keep.
    exact: Exact,
    kv32: Option<Kv32>,
    /// The shape of the next pass when its rows form a tree of candidates rather than
    /// consecutive tokens ([`RunState::set_tree`]).
    tree: Option<Tree>,
}

/// Smallest per-worker read buffer: rows are read in chunks of this size when not resident.
pub const SCRATCH_BYTES: usize = 64 * 1024;

impl RunState {
    /// Buffers for `model` with a KV cache of `ctx` positions and `workers` workers, one token
    /// per forward pass.
    pub fn new(model: &Model, ctx: usize, workers: usize) -> Result<RunState, ModelError> {
        Self::with_batch(model, ctx, workers, 1)
    }

    /// Bytes of the f16 KV cache for `ctx` positions (sliding-window layers keep their ring only),
    /// in `u64` (a context too long for the address space is still counted right).
    pub fn kv_bytes_for(model: &Model, ctx: usize) -> u64 {
        2 * kv_half_bytes(&model.config, &kv_slots(&model.config, ctx))
    }

    /// Bytes of the per-token buffers one more token of batch costs (to size the batch from
    /// free RAM).
    pub fn bytes_per_batch_token(model: &Model) -> u64 {
        let c = &model.config;
        // x, xb, att, q, k, v, hb, hb2, the [rows][B] product, and the two activation sets.
        let floats = 2 * c.dim + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.ffn_dim;
        let mm = c.dim.max(c.q_dim()).max(c.ffn_dim);
        let acts = ActSet::bytes_for(c.dim.max(c.q_dim())) + ActSet::bytes_for(c.ffn_dim);
        (floats + mm) as u64 * 4 + acts as u64
    }

    /// Bytes of the buffers [`RunState::for_part`] would allocate, `(KV cache, everything else)`,
    /// checked against the address space before any is allocated: a buffer that one allocation
    /// cannot hold, or a total past it, is a [`ModelError::TooLarge`] naming it.
    pub fn size_of(
        model: &Model,
        ctx: usize,
        workers: usize,
        batch: usize,
        part: &Part,
    ) -> Result<(u64, u64), ModelError> {
        Self::size_within(model, ctx, workers, batch, part, fit::ADDRESS_LIMIT)
    }

    /// [`RunState::size_of`] against an explicit `limit` of the address space.
    pub fn size_within(
        model: &Model,
        ctx: usize,
        workers: usize,
        batch: usize,
        part: &Part,
        limit: u64,
    ) -> Result<(u64, u64), ModelError> {
        let c = &model.config;
        let b = batch as u64;
        let workers = workers.clamp(1, MAX_WORKERS) as u64;
        let kv_half = kv_half_bytes(c, &part_slots(c, ctx, part));
        let widest = c.dim.max(c.q_dim()).max(c.ffn_dim) as u64;
        let rope = fit::bytes(ctx as u64, (c.rope_dim / 2) as u64 * 4);
        let scratch = model.weights.max_row_bytes().max(SCRATCH_BYTES as u64);
        let logits = if part.ends { c.vocab as u64 * 4 } else { 0 };
        let pieces = [
            ("the KV cache's keys (or values)", kv_half),
            ("an activation buffer", fit::bytes(b, widest * 4)),
            ("the RoPE table's cosines (or sines)", rope),
            ("a core's read buffer for a row", scratch),
            ("the logits", logits),
        ];
        for (what, bytes) in pieces {
            fit::fit_within(bytes, limit, || {
                alloc::format!("{what} for {ctx} positions and batches of {batch}")
            })?;
        }
        let kv = 2 * kv_half;
        let tables = if c.swa.is_some() { 4 * rope } else { 2 * rope };
        let other = fit::bytes(b, Self::bytes_per_batch_token(model))
            .saturating_add(workers * scratch)
            .saturating_add(tables)
            .saturating_add(logits);
        fit::fit_within(kv.saturating_add(other), limit, || {
            alloc::format!(
                "the KV cache ({}) and buffers ({}) for {ctx} positions",
                fit::Size(kv),
                fit::Size(other)
            )
        })?;
        Ok((kv, other))
    }

    /// [`RunState::new`] with buffers for up to `batch` tokens per forward pass (1 to
    /// [`MAX_BATCH`]).
    pub fn with_batch(
        model: &Model,
        ctx: usize,
        workers: usize,
        batch: usize,
    ) -> Result<RunState, ModelError> {
        let part = Part::whole(model.config.n_layer);
        Self::for_part(model, ctx, workers, batch, &part)
    }

    /// [`RunState::with_batch`] for a board that runs `part` of the model: the KV cache holds only
    /// its layers, and the logits exist only where the output head is.
    pub fn for_part(
        model: &Model,
        ctx: usize,
        workers: usize,
        batch: usize,
        part: &Part,
    ) -> Result<RunState, ModelError> {
        let c = &model.config;
        if ctx == 0 || ctx > c.train_ctx {
            return Err(ModelError::BadContext {
                asked: ctx,
                max: c.train_ctx,
            });
        }
        if batch == 0 || batch > MAX_BATCH {
            return Err(ModelError::Batch {
                tokens: batch,
                max: MAX_BATCH,
            });
        }
        Self::size_of(model, ctx, workers, batch, part)?;
        let workers = workers.clamp(1, MAX_WORKERS);
        // In range: `size_of` checked it against the address space.
        let scratch_bytes = SCRATCH_BYTES.max(model.weights.max_row_bytes() as usize);
        let b = batch;
        let mm_rows = c.dim.max(c.q_dim()).max(c.ffn_dim);
        Ok(RunState {
            x: vec![0.0; b * c.dim],
            xb: vec![0.0; b * c.dim],
            att: vec![0.0; b * c.q_dim()],
            q: vec![0.0; b * c.q_dim()],
            k: vec![0.0; b * c.kv_dim()],
            v: vec![0.0; b * c.kv_dim()],
            hb: vec![0.0; b * c.ffn_dim],
            hb2: vec![0.0; b * c.ffn_dim],
            mm: vec![0.0; if b > 1 { b * mm_rows } else { 0 }],
            batch: b,
            logits: vec![0.0; if part.ends { c.vocab } else { 0 }],
            row_logits: Vec::new(),
            acts_dim: ActSet::new(b * c.dim.max(c.q_dim())),
            acts_ffn: ActSet::new(b * c.ffn_dim),
            scratch: (0..workers).map(|_| vec![0u8; scratch_bytes]).collect(),
            kv: KvCache::with_slots(ctx, c.kv_dim(), &part_slots(c, ctx, part)),
            rope: rope_table(model, ctx, c.rope_base),
            rope_local: c.swa.map(|s| rope_table(model, ctx, s.rope_base)),
            pos: 0,
            top: 0,
            exact: Exact::default(),
            kv32: None,
            tree: None,
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
            + f(&self.mm)
            + f(&self.logits)
            + f(&self.row_logits);
        let other = bufs
            + self.acts_dim.bytes()
            + self.acts_ffn.bytes()
            + self.scratch.iter().map(Vec::len).sum::<usize>()
            + self.rope.bytes()
            + self.rope_local.as_ref().map_or(0, RopeTable::bytes);
        (self.kv.bytes(), other)
    }

    /// Make the approximations `e` names exact from now on (to measure the error budget; slow).
    pub fn set_exact(&mut self, e: Exact, model: &Model) {
        let c = &model.config;
        self.kv32 = e.kv.then(|| Kv32::new(c.n_layer, self.kv.ctx, c.kv_dim()));
        self.exact = e;
    }

    /// Tokens one forward pass takes at most.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Context positions in the KV cache.
    pub fn ctx(&self) -> usize {
        self.kv.ctx
    }

    /// Forget the conversation (positions restart at 0; the cache is overwritten as it refills).
    pub fn reset(&mut self) {
        self.pos = 0;
        self.top = 0;
    }

    /// Bytes [`RunState::keep_row_logits`] adds for `rows` rows: the scores of each.
    pub fn row_logits_bytes(model: &Model, rows: usize) -> u64 {
        fit::bytes(rows as u64, model.config.vocab as u64 * 4)
    }

    /// Keep the logits of up to `rows` tokens of a batch (1 to the batch; `[rows][vocab]`), for
    /// [`Model::forward_rows`] passes of as many tokens. The buffer is allocated here, once, so
    /// that runs that never check drafts do not pay for it, and a board with a large vocabulary
    /// pays only for the drafts it checks.
    pub fn keep_row_logits(&mut self, model: &Model, rows: usize) -> Result<(), ModelError> {
        let rows = rows.clamp(1, self.batch);
        let bytes = Self::row_logits_bytes(model, rows);
        let len = fit::fit(bytes, || {
            alloc::format!("the logits of {rows} tokens of a batch")
        })? / 4;
        if self.row_logits.len() != len {
            self.row_logits = vec![0.0; len];
        }
        Ok(())
    }

    /// Tokens whose logits a [`Model::forward_rows`] pass can keep (0 without
    /// [`RunState::keep_row_logits`]).
    pub fn rows_kept(&self) -> usize {
        self.row_logits
            .len()
            .checked_div(self.logits.len())
            .unwrap_or(0)
    }

    /// The scores over the vocabulary after token `row` of the last [`Model::forward_rows`] pass
    /// (`None` past the batch, or without [`RunState::keep_row_logits`]).
    pub fn row_logits(&self, row: usize, vocab: usize) -> Option<&[f32]> {
        self.row_logits.get(row * vocab..(row + 1) * vocab)
    }

    /// [`RunState::row_logits`], to be changed in place (penalties and filters before a draw).
    pub fn row_logits_mut(&mut self, row: usize, vocab: usize) -> Option<&mut [f32]> {
        self.row_logits.get_mut(row * vocab..(row + 1) * vocab)
    }

    /// Go back to position `pos`, as if only the tokens before it had been fed (the rejected
    /// draft tokens of a check are forgotten; their cache rows are overwritten as it refills).
    /// At most [`MAX_BATCH`] positions below the highest one written since the last reset: a
    /// sliding-window ring holds its window and `MAX_BATCH - 1` more positions, so the positions
    /// `pos` and later attend to are all still in it.
    pub fn rollback(&mut self, pos: usize) -> Result<(), ModelError> {
        self.check_back(pos)?;
        self.pos = pos;
        Ok(())
    }

    fn check_back(&self, pos: usize) -> Result<(), ModelError> {
        let top = self.top.max(self.pos);
        if pos > self.pos || top - pos > MAX_BATCH {
            return Err(ModelError::Rollback {
                to: pos,
                pos: self.pos,
                top,
            });
        }
        Ok(())
    }

    /// The rows of the next pass form `tree` (`None`: consecutive tokens, as usual). The pass at
    /// position `base` writes row `i`'s K/V to position `base + i`, and each row sees only its own
    /// path (see [`super::tree`]); [`RunState::keep_path`] then keeps one path. A chain is a
    /// plain batch and is run as one.
    pub fn set_tree(&mut self, tree: Option<&Tree>) {
        self.tree = tree.filter(|t| !t.is_chain()).cloned();
    }

    /// After a tree pass at `base` (the state at `base + rows`), keep the path `rows` (row 0, then
    /// a child of each row before it): its K/V move to positions `base ..`, and the state goes
    /// to `base + rows.len()`, as if only those tokens had been fed. The other rows are
    /// forgotten, as a rollback forgets.
    pub fn keep_path(&mut self, base: usize, rows: &[u8]) -> Result<(), ModelError> {
        let to = base + rows.len();
        let valid = rows.first() == Some(&0)
            && rows.windows(2).all(|w| w[0] < w[1])
            && rows.last().is_some_and(|&r| base + (r as usize) < self.pos);
        if !valid || to > self.pos {
            return Err(ModelError::Rollback {
                to,
                pos: self.pos,
                top: self.top,
            });
        }
        self.check_back(to)?;
        for (d, &r) in rows.iter().enumerate() {
            let (from, at) = (base + r as usize, base + d);
            if from != at {
                for l in 0..self.kv.layers {
                    self.kv.copy(l, from, at);
                    if let Some(k32) = self.kv32.as_mut() {
                        k32.copy(l, from, at);
                    }
                }
            }
        }
        self.pos = to;
        Ok(())
    }
}

/// Positions each layer's KV cache keeps: all `ctx`, or for a sliding-window layer its window and
/// one batch (a batch's tokens are all stored before any of them attends).
fn kv_slots(c: &Config, ctx: usize) -> Vec<usize> {
    (0..c.n_layer)
        .map(|l| c.window(l).map_or(ctx, |w| (w + MAX_BATCH - 1).min(ctx)))
        .collect()
}

/// Bytes of the keys (or of the values) of a KV cache with `slots` positions in each layer, in
/// `u64` (saturating: an overflow is too large for any address space).
fn kv_half_bytes(c: &Config, slots: &[usize]) -> u64 {
    let positions: u64 = slots.iter().map(|&s| s as u64).sum();
    fit::bytes(positions, c.kv_dim() as u64 * 2)
}

/// [`kv_slots`] for the layers of `part` (one slot for each layer it does not run).
fn part_slots(c: &Config, ctx: usize, part: &Part) -> Vec<usize> {
    let mut slots = kv_slots(c, ctx);
    for (l, s) in slots.iter_mut().enumerate() {
        if !part.layers.contains(&l) {
            *s = 1;
        }
    }
    slots
}

fn rope_table(model: &Model, ctx: usize, base: f32) -> RopeTable {
    let c = &model.config;
    let factors = model.weights.rope_freqs.as_deref();
    RopeTable::new(
        ctx,
        c.rope_dim,
        base,
        c.rope_position_scale(),
        factors,
        c.recipe.rope,
    )
}

/// The slots (`slot(row)`) of the rows on tree row `i`'s path that a query seeing `n` positions
/// reads: the last of them, up to its depth and itself (all of them unless a window is shorter).
fn path_slots<'o>(
    tree: &Tree,
    i: usize,
    n: usize,
    slot: impl Fn(usize) -> usize,
    out: &'o mut [u32; MAX_BATCH],
) -> &'o [u32] {
    let mut rows = [0u8; MAX_BATCH];
    let path = tree.path(i, &mut rows);
    let path = &path[path.len() - path.len().min(n)..];
    for (o, &r) in out.iter_mut().zip(path) {
        *o = slot(r as usize) as u32;
    }
    &out[..path.len()]
}

/// Matrix `j` of layer `l` in the order one token reads them (0 wq, 1 wk, 2 wv, 3 wo, 4 gate, 5 up,
/// 6 down; `j` past 6 runs on into the next layers, up to layer `end`), the output head after the
/// last layer (when the logits are wanted), then `None`.
fn matrix_at(
    w: &super::Weights,
    l: usize,
    j: usize,
    end: usize,
    logits: bool,
) -> Option<&TensorInfo> {
    let (l, j) = (l + j / 7, j % 7);
    match w.layers.get(l) {
        Some(lw) if l < end => Some(
            [
                &lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down,
            ][j],
        ),
        _ if logits && l == w.layers.len() && j == 0 => Some(&w.output),
        _ => None,
    }
}

/// Longest head whose query [`Pass::attend`] rotates in its jobs (on the stack), so that the
/// query's RoPE is split across the workers with the heads.
const Q_IN_JOB_MAX: usize = 256;

fn add_bias(x: &mut [f32], b: &Option<Vec<f32>>) {
    if let Some(b) = b {
        ops::add(x, b);
    }
}

/// RMSNorm of each `hd`-wide head of `x` in place with the head norm `w`, if there is one.
fn norm_heads(x: &mut [f32], w: &Option<Vec<f32>>, hd: usize, eps: f32) {
    if let Some(w) = w {
        for head in x.chunks_exact_mut(hd) {
            ops::rmsnorm_in_place(head, w, eps);
        }
    }
}

/// The RoPE table of layer `l`: the sliding-window layers' own, or the global one.
fn rope_of<'a>(
    c: &Config,
    l: usize,
    global: &'a RopeTable,
    local: &'a Option<RopeTable>,
) -> &'a RopeTable {
    match (c.window(l), local) {
        (Some(_), Some(t)) => t,
        _ => global,
    }
}

/// The matrix products of a layer, by what they read and write (all `[B][width]`): Q, K, V, gate
/// and up read the normed input `xb` and write `q`, `k`, `v`, `hb`, `hb2`; the attention's output
/// projection reads `att`, the down projection reads `hb`, and both add to the residual `x`.
#[derive(Debug, Clone, Copy)]
enum Product {
    Q,
    K,
    V,
    Gate,
    Up,
    AttOut,
    Down,
}

/// One forward pass's view of the world: the model, where its weights are read from, the pool and
/// the kernels, the layers it runs, whether the logits are wanted, and what to call between two
/// matrix products (a ring board serves its serial line there).
struct Pass<'a, S: ?Sized, P: ?Sized> {
    model: &'a Model,
    src: &'a S,
    pool: &'a P,
    k: &'a Kernels,
    layers: Range<usize>,
    want_logits: bool,
    /// The logits of every token of the batch (into `row_logits`), not only of the last.
    rows: bool,
    tick: Option<&'a dyn Fn()>,
}

/// Where a pass over a part of the model starts.
#[derive(Debug, Clone, Copy)]
pub enum Input<'t> {
    /// Token ids at the next positions: their embedding rows (the part must hold the ends).
    Tokens(&'t [u32]),
    /// `b` hidden states already in `RunState::x` (`[b][dim]`): the previous board's output.
    Hidden(usize),
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
        self.forward_batch(st, src, pool, k, &[token], want_logits)
    }

    /// Run `tokens` (1 to `st.batch()`) at the next positions in one pass. With `want_logits`,
    /// the scores over the vocabulary after the last of them go to `st.logits`. The result is bit
    /// for bit that of running them one by one with [`Model::forward`].
    pub fn forward_batch<S, P>(
        &self,
        st: &mut RunState,
        src: &S,
        pool: &P,
        k: &Kernels,
        tokens: &[u32],
        want_logits: bool,
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        let layers = self.config.n_layer;
        self.forward_layers(st, (src, pool, k), tokens, layers, want_logits)
    }

    /// A pass over every layer, with the logits of the last token, of every token, or none.
    fn whole_pass<'p, S: ?Sized, P: ?Sized>(
        &'p self,
        (src, pool, k): (&'p S, &'p P, &'p Kernels),
        want_logits: bool,
        rows: bool,
    ) -> Pass<'p, S, P> {
        Pass {
            model: self,
            src,
            pool,
            k,
            layers: 0..self.config.n_layer,
            want_logits,
            rows,
            tick: None,
        }
    }

    /// [`Model::forward_batch`] that leaves the logits after every one of `tokens` in the run
    /// state ([`RunState::row_logits`], which [`RunState::keep_row_logits`] must have allocated),
    /// to check draft tokens in one pass. Each row is bit for bit the logits of feeding the tokens
    /// one at a time with [`Model::forward`].
    pub fn forward_rows<S, P>(
        &self,
        st: &mut RunState,
        src: &S,
        pool: &P,
        k: &Kernels,
        tokens: &[u32],
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        if st.row_logits.len() < tokens.len() * self.config.vocab {
            return Err(ModelError::NoRowLogits);
        }
        let layers = self.config.n_layer;
        self.token_pass(st, (src, pool, k), tokens, layers, (true, true))
    }

    /// [`Model::forward_rows`] over the rows of `tree` (see [`super::tree`]): the logits after
    /// each row are bit for bit those of feeding its path one token at a time. The state ends at
    /// the position past every row, for [`RunState::keep_path`] to keep one path.
    pub fn forward_tree<S, P>(
        &self,
        st: &mut RunState,
        (src, pool, k): (&S, &P, &Kernels),
        tree: &Tree,
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        st.set_tree(Some(tree));
        let r = self.forward_rows(st, src, pool, k, tree.tokens());
        st.set_tree(None);
        r
    }

    /// [`Model::forward_batch`] through the first `layers` layers only (1 to all), the output
    /// head then reading the residual stream as it stands: a cheap draft of the whole model (a
    /// self-draft). `st` needs a KV cache for those layers ([`RunState::for_part`]).
    pub fn forward_layers<S, P>(
        &self,
        st: &mut RunState,
        run: (&S, &P, &Kernels),
        tokens: &[u32],
        layers: usize,
        want_logits: bool,
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        self.token_pass(st, run, tokens, layers, (want_logits, false))
    }

    /// A pass of `tokens` through the first `layers` layers, with the logits of the last token
    /// (`(true, false)`), of every token (`(true, true)`) or none.
    fn token_pass<S, P>(
        &self,
        st: &mut RunState,
        run: (&S, &P, &Kernels),
        tokens: &[u32],
        layers: usize,
        (want_logits, rows): (bool, bool),
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        let c = &self.config;
        check_pass(c, st, Input::Tokens(tokens), tokens.len())?;
        if layers == 0 || layers > c.n_layer {
            return Err(ModelError::Part {
                layers: 0..layers,
                n_layer: c.n_layer,
            });
        }
        let mut pass = self.whole_pass(run, want_logits, rows);
        pass.layers = 0..layers;
        pass.run(st, Input::Tokens(tokens))
    }

    /// Run the layers of `part` over `input` at the next positions, calling `tick` between matrix
    /// products. The logits are computed when `want_logits` and the part is the whole model; a
    /// ring's head computes them with [`Model::logits`] once the last board's output is back.
    /// Every value is computed as in [`Model::forward_batch`], so the boards of a ring together
    /// give bit for bit the logits of one board.
    pub fn forward_part<S, P>(
        &self,
        st: &mut RunState,
        (src, pool, k): (&S, &P, &Kernels),
        input: Input<'_>,
        part: &Part,
        want_logits: bool,
        tick: Option<&dyn Fn()>,
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        let c = &self.config;
        let b = match input {
            Input::Tokens(t) => t.len(),
            Input::Hidden(b) => b,
        };
        check_pass(c, st, input, b)?;
        if part.layers.end > c.n_layer || part.layers.is_empty() {
            return Err(ModelError::Part {
                layers: part.layers.clone(),
                n_layer: c.n_layer,
            });
        }
        if matches!(input, Input::Tokens(_)) && !(part.ends && part.layers.start == 0) {
            return Err(ModelError::Part {
                layers: part.layers.clone(),
                n_layer: c.n_layer,
            });
        }
        let pass = Pass {
            model: self,
            src,
            pool,
            k,
            layers: part.layers.clone(),
            want_logits: want_logits && part.is_whole(c.n_layer),
            rows: false,
            tick,
        };
        pass.run(st, input)
    }

    /// The scores over the vocabulary from the hidden state of token `row` of the last batch
    /// (`st.x[row]`, after every layer), into `st.logits`.
    pub fn logits<S, P>(
        &self,
        st: &mut RunState,
        (src, pool, k): (&S, &P, &Kernels),
        row: usize,
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        if row >= st.batch || st.logits.len() != self.config.vocab {
            return Err(ModelError::Matvec(
                "no logits buffer or row out of batch".into(),
            ));
        }
        self.head_only((src, pool, k), false).logits(st, row)
    }

    /// A pass of no layers that computes logits from `st.x` (of one row, or of every row).
    fn head_only<'p, S: ?Sized, P: ?Sized>(
        &'p self,
        run: (&'p S, &'p P, &'p Kernels),
        rows: bool,
    ) -> Pass<'p, S, P> {
        let mut pass = self.whole_pass(run, true, rows);
        pass.layers = self.config.n_layer..self.config.n_layer;
        pass
    }

    /// The scores over the vocabulary from the hidden states of the last batch's `b` rows
    /// (`st.x`, after every layer), into [`RunState::row_logits`] (which
    /// [`RunState::keep_row_logits`] must have made room for): a ring's head, once the last
    /// board's rows are back.
    pub fn logits_rows<S, P>(
        &self,
        st: &mut RunState,
        (src, pool, k): (&S, &P, &Kernels),
        b: usize,
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        if b == 0 || b > st.batch || st.row_logits.len() < b * self.config.vocab {
            return Err(ModelError::NoRowLogits);
        }
        self.head_only((src, pool, k), true).row_logits(st, b)
    }
}

/// A pass of `b` tokens fits the run state's batch and context, and its tokens the vocabulary.
fn check_pass(c: &Config, st: &RunState, input: Input<'_>, b: usize) -> Result<(), ModelError> {
    if b == 0 || b > st.batch {
        return Err(ModelError::Batch {
            tokens: b,
            max: st.batch,
        });
    }
    if st.pos + b > st.kv.ctx {
        return Err(ModelError::ContextFull { ctx: st.kv.ctx });
    }
    if let Some(t) = &st.tree {
        if t.len() != b {
            return Err(ModelError::Matvec(alloc::format!(
                "a tree of {} rows for a pass of {b}",
                t.len()
            )));
        }
    }
    if let Input::Tokens(tokens) = input {
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= c.vocab) {
            return Err(ModelError::TokenOutOfRange {
                token,
                vocab: c.vocab,
            });
        }
    }
    Ok(())
}

impl<S, P> Pass<'_, S, P>
where
    S: Storage + Sync + ?Sized,
    P: Parallel + ?Sized,
{
    /// Read-ahead: before each matrix, announce the one two further on, so a streaming source
    /// reads it while these are computed.
    fn ahead(&self, l: usize, j: usize) {
        let (w, end) = (&self.model.weights, self.layers.end);
        if let Some(t) = matrix_at(w, l, j, end, self.want_logits) {
            self.src.prefetch(t.offset, t.size);
        }
    }

    /// `out = W · x` for each column of `acts`, W's rows split across the pool's workers. `out`
    /// is `[cols][rows]` (one output vector per token); a batch is computed into `mm` as
    /// `[rows][cols]` (each worker a contiguous range of rows) and then laid out per token, in
    /// as many steps as `mm` needs (one, but for the output head of [`Model::forward_rows`]).
    fn matmul(
        &self,
        w: &TensorInfo,
        acts: &ActsBatch<'_>,
        out: &mut [f32],
        mm: &mut [f32],
        scratch: &mut [Vec<u8>],
    ) -> Result<(), ModelError> {
        let (k, src, cols) = (self.k, self.src, acts.cols);
        if cols == 1 {
            par_chunks(self.pool, out, 1, scratch, |rows, part, s| {
                matmat(k, src, w, rows, acts, part, s)
            })?;
            return Ok(());
        }
        let rows = out.len() / cols;
        let step = (mm.len() / cols).min(rows);
        if step == 0 {
            return Err(ModelError::Matvec("batch buffer too small".into()));
        }
        for first in (0..rows).step_by(step) {
            let n = step.min(rows - first);
            let mm = &mut mm[..n * cols];
            par_chunks(self.pool, mm, cols, scratch, |r, part, s| {
                let r = first + r.start / cols..first + r.end / cols;
                matmat(k, src, w, r, acts, part, s)
            })?;
            for (c, o) in out.chunks_exact_mut(rows).enumerate() {
                for (r, v) in o[first..first + n].iter_mut().enumerate() {
                    *v = mm[r * cols + c];
                }
            }
        }
        Ok(())
    }

    /// The whole pass over `input` (checked by the caller): the embedding rows of its tokens, or
    /// the hidden states in `x`, through the pass's layers, then the logits if wanted.
    fn run(&self, st: &mut RunState, input: Input<'_>) -> Result<(), ModelError> {
        let (c, w) = (&self.model.config, &self.model.weights);
        let first = self.layers.start;
        self.ahead(first, 0);
        self.ahead(first, 1);
        let b = match input {
            Input::Hidden(b) => b,
            Input::Tokens(tokens) => {
                // x[i] = token_embd[tokens[i]]                         x: [B][dim]
                for (x, &t) in st.x.chunks_exact_mut(c.dim).zip(tokens) {
                    read_row_f32(self.src, &w.token_embd, t as usize, x, &mut st.scratch[0])?;
                    // [recipe: embed_scale] x *= sqrt(dim)
                    if c.recipe.embed_scale {
                        let s = libm::sqrtf(c.dim as f32);
                        x.iter_mut().for_each(|v| *v *= s);
                    }
                }
                tokens.len()
            }
        };
        for l in self.layers.clone() {
            self.attention(st, l, b)?;
            self.ffn(st, l, b)?;
        }
        st.pos += b;
        st.top = st.top.max(st.pos);
        match (self.want_logits, self.rows) {
            (true, false) => self.logits(st, b - 1),
            (true, true) => self.row_logits(st, b),
            (false, _) => Ok(()),
        }
    }

    /// row_logits[i] = output · rmsnorm(x[i]) * output_norm, for the batch's `b` tokens, the
    /// output head read once for all of them                       row_logits: [B][vocab]
    fn row_logits(&self, st: &mut RunState, b: usize) -> Result<(), ModelError> {
        let (c, w) = (&self.model.config, &self.model.weights);
        self.norm(st, &w.output_norm, b);
        let RunState {
            xb,
            acts_dim,
            row_logits,
            mm,
            scratch,
            exact: switches,
            ..
        } = st;
        let x = &xb[..b * c.dim];
        let out = row_logits
            .get_mut(..b * c.vocab)
            .ok_or(ModelError::NoRowLogits)?;
        if switches.acts[7] {
            exact::product(self.src, &w.output, x, b, out, &mut scratch[0])?;
            return Ok(());
        }
        let a = acts_dim.for_weight(self.k, self.pool, &w.output, x, b)?;
        self.matmul(&w.output, &a, out, mm, scratch)
    }

    /// logits = output · rmsnorm(x[row]) * output_norm                logits: [vocab]
    fn logits(&self, st: &mut RunState, row: usize) -> Result<(), ModelError> {
        let (c, w) = (&self.model.config, &self.model.weights);
        let x = &st.x[row * c.dim..(row + 1) * c.dim];
        ops::rmsnorm(&mut st.xb[..c.dim], x, &w.output_norm, c.norm_eps);
        st.acts_dim.reset();
        if st.exact.acts[7] {
            let (x, s) = (&st.xb[..c.dim], &mut st.scratch[0]);
            exact::product(self.src, &w.output, x, 1, &mut st.logits, s)?;
            return Ok(());
        }
        let a = st
            .acts_dim
            .for_weight(self.k, self.pool, &w.output, &st.xb[..c.dim], 1)?;
        self.matmul(&w.output, &a, &mut st.logits, &mut st.mm, &mut st.scratch)
    }

    /// `xb[i] = rmsnorm(x[i]) * weight` for the batch's `b` tokens, and a fresh input for the
    /// activation set.
    fn norm(&self, st: &mut RunState, weight: &[f32], b: usize) {
        let c = &self.model.config;
        let rows = st.xb.chunks_exact_mut(c.dim).zip(st.x.chunks_exact(c.dim));
        for (xb, x) in rows.take(b) {
            ops::rmsnorm(xb, x, weight, c.norm_eps);
        }
        st.acts_dim.reset();
    }

    /// One product for the batch's `b` tokens: `w` is matrix `j` of layer `l` in the read order
    /// (the matrix two further on is announced first). Q, K, V, gate and up read the normed input
    /// `xb` (quantized once for all of them); the output projection and the down projection read
    /// the attention output or the hidden vector and add their result to the residual stream.
    fn product(
        &self,
        st: &mut RunState,
        w: &TensorInfo,
        (l, j): (usize, usize),
        what: Product,
        b: usize,
    ) -> Result<(), ModelError> {
        if let Some(tick) = self.tick {
            tick();
        }
        self.ahead(l, j + 2);
        let (dim, eps) = (self.model.config.dim, self.model.config.norm_eps);
        let lw = &self.model.weights.layers[l];
        let post_norm = match what {
            Product::AttOut => lw.post_attn_norm.as_deref(),
            Product::Down => lw.post_ffn_norm.as_deref(),
            _ => None,
        };
        let RunState {
            x,
            xb,
            att,
            q,
            k,
            v,
            hb,
            hb2,
            acts_dim,
            acts_ffn,
            mm,
            scratch,
            exact: switches,
            ..
        } = st;
        let (input, acts, out, fresh) = match what {
            Product::Q => (&*xb, acts_dim, q, false),
            Product::K => (&*xb, acts_dim, k, false),
            Product::V => (&*xb, acts_dim, v, false),
            Product::Gate => (&*xb, acts_dim, hb, false),
            Product::Up => (&*xb, acts_dim, hb2, false),
            Product::AttOut => (&*att, acts_dim, xb, true),
            Product::Down => (&*hb, acts_ffn, xb, true),
        };
        if fresh {
            acts.reset();
        }
        let (n, rows) = (w.row_len() as usize, w.rows() as usize);
        if switches.acts[what as usize] {
            exact::product(
                self.src,
                w,
                &input[..b * n],
                b,
                &mut out[..b * rows],
                &mut scratch[0],
            )?;
        } else {
            let a = acts.for_weight(self.k, self.pool, w, &input[..b * n], b)?;
            self.matmul(w, &a, &mut out[..b * rows], mm, scratch)?;
        }
        if fresh {
            // [recipe: post_norms] xb = rmsnorm(xb) * post_norm, then x += xb
            if let Some(w) = post_norm {
                for o in out.chunks_exact_mut(dim).take(b) {
                    ops::rmsnorm_in_place(o, w, eps);
                }
            }
            ops::add(&mut x[..b * dim], &out[..b * dim]);
        }
        Ok(())
    }

    /// Layer `l`'s attention for the batch of `b` tokens at `st.pos ..`: x += wo · attention.
    fn attention(&self, st: &mut RunState, l: usize, b: usize) -> Result<(), ModelError> {
        let lw = &self.model.weights.layers[l];
        // xb = rmsnorm(x) * attn_norm                            xb: [B][dim]
        self.norm(st, &lw.attn_norm, b);
        // q = wq·xb + bq, k = wk·xb + bk, v = wv·xb + bv  q: [B][n_head*hd], k, v: [B][kv_dim]
        self.product(st, &lw.wq, (l, 0), Product::Q, b)?;
        self.product(st, &lw.wk, (l, 1), Product::K, b)?;
        self.product(st, &lw.wv, (l, 2), Product::V, b)?;
        for i in 0..b {
            self.rope_and_store(st, l, i);
        }
        self.attend(st, l, b)?;
        // x += wo·att                                          xb: [B][dim]
        self.product(st, &lw.wo, (l, 3), Product::AttOut, b)?;
        Ok(())
    }

    /// Token `i` of the batch, layer `l`: biases, RoPE of K at its position (of Q too when its
    /// heads are too long for [`Pass::attend`] to rotate them in its jobs), and its K, V into the
    /// f16 cache (`[layer][pos][kv_dim]`).
    fn rope_and_store(&self, st: &mut RunState, l: usize, i: usize) {
        let c = &self.model.config;
        let lw = &self.model.weights.layers[l];
        let (hd, qd, kv_dim, pos) = (c.head_dim, c.q_dim(), c.kv_dim(), st.pos + i);
        // A tree's row sits at its depth, its K/V in its own slot.
        let at = st.pos + st.tree.as_ref().map_or(i, |t| t.depth(i));
        let q = &mut st.q[i * qd..(i + 1) * qd];
        let k = &mut st.k[i * kv_dim..(i + 1) * kv_dim];
        let v = &mut st.v[i * kv_dim..(i + 1) * kv_dim];
        // [recipe: qkv_bias] q += bq, k += bk, v += bv
        add_bias(q, &lw.bq);
        add_bias(k, &lw.bk);
        add_bias(v, &lw.bv);
        // [recipe: qk_norm] each head of q and k RMS-normed
        norm_heads(q, &lw.q_norm, hd, c.norm_eps);
        norm_heads(k, &lw.k_norm, hd, c.norm_eps);
        let rope = rope_of(c, l, &st.rope, &st.rope_local);
        if hd > Q_IN_JOB_MAX {
            rope.apply(q, hd, at);
        }
        rope.apply(k, hd, at);
        let (ks, vs) = st.kv.slot_mut(l, pos);
        (self.k.to_f16)(ks, k);
        (self.k.to_f16)(vs, v);
        if let Some(k32) = st.kv32.as_mut() {
            k32.store(l, pos, k, v);
        }
    }

    /// att[i][h] = softmax(q[i][h]·K[kvh] · attn_scale) · V[kvh] over positions 0..=pos+i (the
    /// causal mask inside the batch) [recipe: swa_period: the last `window` of them on a
    /// sliding-window layer], one (token, head) pair per chunk of hd, pairs split across workers.
    fn attend(&self, st: &mut RunState, l: usize, b: usize) -> Result<(), ModelError> {
        let c = &self.model.config;
        let (hd, qd, kv_dim, n_head, pos) = (c.head_dim, c.q_dim(), c.kv_dim(), c.n_head, st.pos);
        let group = c.n_head / c.n_head_kv;
        let (scale, window) = (c.attn_scale, c.window(l));
        let (q, kv, k, tree) = (&st.q, &st.kv, self.k, st.tree.as_ref());
        let rope = rope_of(c, l, &st.rope, &st.rope_local);
        if st.exact.attention_path() {
            let src = st.kv32.as_ref().map_or(KvSource::F16(kv), KvSource::F32);
            let rope_q = (hd <= Q_IN_JOB_MAX).then_some(rope);
            let rows = (pos, b, tree);
            exact::attend(c, l, rows, q, rope_q, src, &mut st.att[..b * qd]);
            return Ok(());
        }
        par_chunks(
            self.pool,
            &mut st.att[..b * qd],
            hd,
            &mut st.scratch,
            |r, part, _| {
                for (j, out) in part.chunks_exact_mut(hd).enumerate() {
                    let t = r.start / hd + j;
                    let (i, h) = (t / n_head, t % n_head);
                    let q = &q[i * qd + h * hd..i * qd + (h + 1) * hd];
                    // Row i's position (its depth in a tree).
                    let at = pos + tree.map_or(i, |t| t.depth(i));
                    // The query head's RoPE here, in the job, when it fits the stack buffer.
                    let mut rq = [0.0f32; Q_IN_JOB_MAX];
                    let q = if hd <= Q_IN_JOB_MAX {
                        let rq = &mut rq[..hd];
                        rq.copy_from_slice(q);
                        rope.apply(rq, hd, at);
                        &*rq
                    } else {
                        q
                    };
                    let seen = kv.seen(l, at, window);
                    let mut slots = [0u32; MAX_BATCH];
                    let gathered = tree.map_or(&[][..], |t| {
                        path_slots(t, i, seen.n, |r| kv.slot(l, pos + r), &mut slots)
                    });
                    let head = Head {
                        keys: seen.keys,
                        values: seen.values,
                        n: seen.n,
                        first: seen.first,
                        ring: seen.ring,
                        stride: kv_dim,
                        offset: (h / group) * hd,
                        scale,
                        run: seen.n - gathered.len(),
                        gathered,
                    };
                    (k.attend_head)(out, q, &head);
                }
                Ok::<(), ModelError>(())
            },
        )
    }

    /// Layer `l`'s feed-forward for the batch: x += w_down · (act(w_gate · xb) * (w_up · xb)).
    fn ffn(&self, st: &mut RunState, l: usize, b: usize) -> Result<(), ModelError> {
        let c = &self.model.config;
        let lw = &self.model.weights.layers[l];
        let ffn = c.ffn_dim;
        // xb = rmsnorm(x) * ffn_norm                             xb: [B][dim]
        self.norm(st, &lw.ffn_norm, b);
        // hb = silu(w_gate·xb) * (w_up·xb)                     hb, hb2: [B][ffn_dim]
        self.product(st, &lw.w_gate, (l, 4), Product::Gate, b)?;
        self.product(st, &lw.w_up, (l, 5), Product::Up, b)?;
        // hb = act(hb) * hb2 [recipe: activation], split across workers (B · ffn_dim expf or tanhf
        // would otherwise be serial)
        let (hb2, act) = (&st.hb2, c.recipe.activation);
        par_chunks(
            self.pool,
            &mut st.hb[..b * ffn],
            1,
            &mut st.scratch,
            |r, part, _| {
                match act {
                    Activation::Silu => ops::silu_mul(part, &hb2[r]),
                    Activation::GeluTanh => ops::gelu_tanh_mul(part, &hb2[r]),
                }
                Ok::<(), ModelError>(())
            },
        )?;
        // x += w_down·hb                                       xb: [B][dim]
        self.product(st, &lw.w_down, (l, 6), Product::Down, b)?;
        Ok(())
    }
}
