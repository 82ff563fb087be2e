//! The run state: every buffer the forward pass uses ([`RunState`]), sized once for a context
//! length, a batch size and the layers a board runs, with the sums that say beforehand whether it
//! fits; and what a state does between passes (reset, rollback, the logits of every row kept for
//! checking guesses, the path of a tree kept).

use super::exact::{Exact, Kv32};
use super::tree::Tree;
use super::{Config, Model, ModelError, Part};
use crate::fit;
use crate::gguf::TensorInfo;
use crate::kv::KvCache;
use crate::oom::{self, OutOfMemory};
use crate::ops::RopeTable;
use crate::parallel::{Parallel, MAX_WORKERS};
use crate::quant::{ActBuf, ActFormat, ActsBatch, Kernels, MAX_BATCH};
use crate::sample::sampler::RunningBest;
use alloc::vec;
use alloc::vec::Vec;

/// One input (B vectors, `[B][n]`) quantized lazily to each activation format it is multiplied in.
#[derive(Debug)]
pub(super) struct ActSet {
    pub(super) bufs: [ActBuf; 6],
    pub(super) fresh: [bool; 6],
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
    pub(super) fn new(n: usize) -> Result<Self, OutOfMemory> {
        let [a, b, c, d, e, f] = FORMATS;
        let buf = |f| ActBuf::for_format(f, n);
        Ok(Self {
            bufs: [buf(a)?, buf(b)?, buf(c)?, buf(d)?, buf(e)?, buf(f)?],
            fresh: [false; 6],
        })
    }
    /// Bytes [`ActSet::new`] reserves for `n` values.
    pub(super) fn bytes_for(n: usize) -> usize {
        FORMATS.iter().map(|&f| ActBuf::bytes_for(f, n)).sum()
    }
    /// Forget the previous input.
    pub(super) fn reset(&mut self) {
        self.fresh = [false; 6];
    }
    /// `x` (`cols` vectors) quantized for multiplying with `w` (once per format per input).
    pub(super) fn for_weight<P: Parallel + ?Sized>(
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
    pub(super) fn bytes(&self) -> usize {
        self.bufs.iter().map(|b| b.reserved_bytes()).sum()
    }
}

/// Every buffer the forward pass uses, allocated once for a context length and a batch size B.
#[derive(Debug)]
pub struct RunState {
    /// Residual stream. `[B][dim]`
    pub x: Vec<f32>,
    /// Normed input / projection output. `[B][dim]`
    pub(super) xb: Vec<f32>,
    /// Attention output, all heads. `[B][n_head * head_dim]`
    pub(super) att: Vec<f32>,
    /// Queries. `[B][n_head * head_dim]`
    pub(super) q: Vec<f32>,
    /// Keys and values of the batch's positions. `[B][kv_dim]`
    pub(super) k: Vec<f32>,
    pub(super) v: Vec<f32>,
    /// Feed-forward gate and up projections. `[B][ffn_dim]`
    pub(super) hb: Vec<f32>,
    pub(super) hb2: Vec<f32>,
    /// A batched product as the kernels write it, `[rows][B]`, before it is laid out per token
    /// (empty when B = 1).
    pub(super) mm: Vec<f32>,
    /// Tokens per forward pass at most.
    pub(super) batch: usize,
    /// Scores over the vocabulary. `[vocab]`
    pub logits: Vec<f32>,
    /// Scores over the vocabulary after every token of the last batch, for checking draft tokens
    /// (empty unless [`RunState::keep_row_logits`] asked for them). `[B][vocab]`
    pub(super) row_logits: Vec<f32>,
    /// Each batch row's greedy pick after a [`Model::forward_tree_best`] pass. `[MAX_BATCH]`
    pub(super) best: [RunningBest; MAX_BATCH],
    /// Quantized activations of the current matmul input: one set for `dim`-wide inputs and one for
    /// the feed-forward hidden vector.
    pub(super) acts_dim: ActSet,
    pub(super) acts_ffn: ActSet,
    /// One read buffer per worker for rows that are not resident in memory.
    pub(super) scratch: Vec<Vec<u8>>,
    pub kv: KvCache,
    /// RoPE of the global layers, and of the sliding-window layers when their base differs.
    pub(super) rope: RopeTable,
    pub(super) rope_local: Option<RopeTable>,
    /// Next position to fill (tokens processed so far).
    pub pos: usize,
    /// One past the highest position written since the last [`RunState::reset`] (how far back a
    /// [`RunState::rollback`] may go without a window ring having lost what it needs).
    pub(super) top: usize,
    /// The error budget's switches (all off in a normal run) and the f32 K/V they may keep.
    pub(super) exact: Exact,
    pub(super) kv32: Option<Kv32>,
    /// The shape of the next pass when its rows form a tree of candidates rather than
    /// consecutive tokens ([`RunState::set_tree`]).
    pub(super) tree: Option<Tree>,
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
        2 * kv_half_bytes(&model.config, |l| kv_slot(&model.config, ctx, l))
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
        let kv_half = kv_half_bytes(c, |l| part_slot(c, ctx, part, l));
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
        // Every buffer allocated fallibly: running out is an error naming the buffer.
        let f32s = |n, what| oom::filled(n, 0.0f32, what);
        let mut scratch = oom::with_capacity(workers, "scratch table")?;
        for _ in 0..workers {
            scratch.push(oom::filled(scratch_bytes, 0u8, "worker scratch")?);
        }
        let rope_local = match c.swa {
            Some(s) => Some(rope_table(model, ctx, s.rope_base)?),
            None => None,
        };
        Ok(RunState {
            x: f32s(b * c.dim, "activations x")?,
            xb: f32s(b * c.dim, "activations xb")?,
            att: f32s(b * c.q_dim(), "attention output")?,
            q: f32s(b * c.q_dim(), "queries")?,
            k: f32s(b * c.kv_dim(), "keys")?,
            v: f32s(b * c.kv_dim(), "values")?,
            hb: f32s(b * c.ffn_dim, "feed-forward hb")?,
            hb2: f32s(b * c.ffn_dim, "feed-forward hb2")?,
            mm: f32s(if b > 1 { b * mm_rows } else { 0 }, "batch product")?,
            batch: b,
            logits: f32s(if part.ends { c.vocab } else { 0 }, "logits")?,
            row_logits: Vec::new(),
            best: [RunningBest::NONE; MAX_BATCH],
            acts_dim: ActSet::new(b * c.dim.max(c.q_dim()))?,
            acts_ffn: ActSet::new(b * c.ffn_dim)?,
            scratch,
            kv: KvCache::with_slots(ctx, c.kv_dim(), &part_slots(c, ctx, part)?)?,
            rope: rope_table(model, ctx, c.rope_base)?,
            rope_local,
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

    /// Row `row`'s greedy pick after a [`Model::forward_tree_best`] pass (`None` past the
    /// batch): the token, or greedy's error on that row's logits.
    pub fn row_best(
        &self,
        row: usize,
    ) -> Option<Result<u32, crate::sample::sampler::SamplerError>> {
        (row < self.batch).then(|| self.best.get(row).map(|b| b.token()))?
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

/// Positions layer `l`'s KV cache keeps: all `ctx`, or for a sliding-window layer its window and
/// one batch (a batch's tokens are all stored before any of them attends).
fn kv_slot(c: &Config, ctx: usize, l: usize) -> usize {
    c.window(l).map_or(ctx, |w| (w + MAX_BATCH - 1).min(ctx))
}

/// [`kv_slot`] for a layer of `part` (one slot for each layer it does not run).
fn part_slot(c: &Config, ctx: usize, part: &Part, l: usize) -> usize {
    if part.layers.contains(&l) {
        kv_slot(c, ctx, l)
    } else {
        1
    }
}

/// Bytes of the keys (or of the values) of a KV cache with `slot(l)` positions in each layer, in
/// `u64` (saturating: an overflow is too large for any address space). Allocates nothing.
fn kv_half_bytes(c: &Config, slot: impl Fn(usize) -> usize) -> u64 {
    let positions: u64 = (0..c.n_layer).map(|l| slot(l) as u64).sum();
    fit::bytes(positions, c.kv_dim() as u64 * 2)
}

/// [`part_slot`] of every layer.
fn part_slots(c: &Config, ctx: usize, part: &Part) -> Result<Vec<usize>, OutOfMemory> {
    oom::collect(c.n_layer, "KV cache slot table", |l| {
        part_slot(c, ctx, part, l)
    })
}

fn rope_table(model: &Model, ctx: usize, base: f32) -> Result<RopeTable, OutOfMemory> {
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
