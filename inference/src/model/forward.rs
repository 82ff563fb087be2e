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
//! (all buffers live in [`RunState`], sized in `state.rs`); per-token buffers are `[B][width]`.
//! The products and the attention run on a kernel path chosen once per pass (`path.rs`): the
//! quantized kernels, or the error budget's exact path when one of its switches is on.

use super::exact::{Exact, PRODUCTS};
use super::path::{rope_of, Cx, ExactPath, KernelPath, Quantized, Q_IN_JOB_MAX};
use super::state::RunState;
use super::tree::Tree;
use super::{Activation, Config, Model, ModelError, Part};
use crate::gguf::TensorInfo;
use crate::matvec::read_row_f32;
use crate::ops;
use crate::parallel::{par_chunks, Parallel};
use crate::quant::Kernels;
use crate::sample::sampler::RunningBest;
use crate::storage::Storage;
use alloc::vec::Vec;
use core::ops::Range;

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

/// The output head's index among the products (after those of [`Product`]).
const OUTPUT: usize = PRODUCTS.len() - 1;

/// One forward pass's view of the world: the model, where its weights are read from, the pool and
/// the kernels, the layers it runs, whether the logits are wanted, and what to call between two
/// matrix products (a ring board serves its serial line there).
struct Pass<'a, S: ?Sized, P: ?Sized, K = Quantized> {
    model: &'a Model,
    src: &'a S,
    pool: &'a P,
    k: &'a Kernels,
    layers: Range<usize>,
    want_logits: bool,
    /// Whose logits: the last token's, every token's, or every token's greedy pick.
    rows: Rows,
    tick: Option<&'a dyn Fn()>,
    /// The kernel path: [`Quantized`] until the entry point chooses ([`Pass::run`]).
    path: K,
}

/// Which hidden states of the last batch [`Model::logits`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadRows {
    /// Row `row`'s, into `st.logits`.
    One(usize),
    /// The first `b` rows', into [`RunState::row_logits`].
    First(usize),
}

/// What a pass's output head gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rows {
    /// The last token's logits (`st.logits`).
    Last,
    /// Every token's logits ([`RunState::row_logits`]).
    All,
    /// Every token's greedy pick ([`RunState::row_best`]), the head computed a chunk of its rows
    /// at a time into `st.logits`: no row of logits kept whole.
    Best,
}

/// Where a pass over a part of the model starts.
#[derive(Debug, Clone, Copy)]
pub enum Input<'t> {
    /// Token ids at the next positions: their embedding rows (the part must hold the ends).
    Tokens(&'t [u32]),
    /// `b` hidden states already in `RunState::x` (`[b][dim]`): the previous board's output.
    Hidden(usize),
}

/// Rows `first .. first + n` of the matrix `w` (2-D: the output head) as a matrix of its own.
fn head_rows(w: &TensorInfo, first: usize, n: usize) -> TensorInfo {
    let rb = w.row_bytes();
    let mut dims = w.dims;
    dims[1] = n as u64;
    TensorInfo {
        name: alloc::string::String::new(),
        dims,
        offset: w.offset + first as u64 * rb,
        size: n as u64 * rb,
        ..*w
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
        rows: Rows,
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
            path: Quantized,
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
        self.token_pass(st, (src, pool, k), tokens, layers, (true, Rows::All))
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

    /// [`Model::forward_tree`] that keeps only each row's greedy pick
    /// ([`RunState::row_best`]: the token greedy sampling would take from the row's logits, ties
    /// and NaN alike), the output head computed a chunk of its rows at a time into `st.logits`
    /// for all rows: no rows of logits are kept, so a greedy check without penalties or a
    /// filter needs no memory beyond the run state's.
    pub fn forward_tree_best<S, P>(
        &self,
        st: &mut RunState,
        run: (&S, &P, &Kernels),
        tree: &Tree,
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        let (layers, rows) = (self.config.n_layer, (true, Rows::Best));
        st.set_tree(Some(tree));
        let r = self.token_pass(st, run, tree.tokens(), layers, rows);
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
        self.token_pass(st, run, tokens, layers, (want_logits, Rows::Last))
    }

    /// A pass of `tokens` through the first `layers` layers, with the logits of the last token
    /// (`(true, Rows::Last)`), of every token (`Rows::All`), every token's greedy pick
    /// (`Rows::Best`) or none.
    fn token_pass<S, P>(
        &self,
        st: &mut RunState,
        run: (&S, &P, &Kernels),
        tokens: &[u32],
        layers: usize,
        (want_logits, rows): (bool, Rows),
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
        pass.run_chosen(st, Input::Tokens(tokens))
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
            rows: Rows::Last,
            tick,
            path: Quantized,
        };
        pass.run_chosen(st, input)
    }

    /// The scores over the vocabulary from hidden states of the last batch (`st.x`, after every
    /// layer): of one row into `st.logits`, or of the first rows into [`RunState::row_logits`]
    /// (which [`RunState::keep_row_logits`] must have made room for): a ring's head, once the
    /// last board's rows are back.
    pub fn logits<S, P>(
        &self,
        st: &mut RunState,
        run: (&S, &P, &Kernels),
        rows: HeadRows,
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        let vocab = self.config.vocab;
        match rows {
            HeadRows::One(row) => {
                if row >= st.batch || st.logits.len() != vocab {
                    return Err(ModelError::Matvec(
                        "no logits buffer or row out of batch".into(),
                    ));
                }
                self.head_only(run, false).logits_chosen(st, row)
            }
            HeadRows::First(b) => {
                if b == 0 || b > st.batch || st.row_logits.len() < b * vocab {
                    return Err(ModelError::NoRowLogits);
                }
                self.head_only(run, true).row_logits_chosen(st, b)
            }
        }
    }

    /// The scores of `head`'s rows from the hidden state of `row` of the last pass (run with no
    /// logits) into `out`, one a row: `head` is a matrix of `dim`-long rows in `src`, such as a
    /// draft's output head cut to part of the vocabulary
    /// ([`HeadCut`](crate::speculate::HeadCut)). Each score is bit for bit the one the whole
    /// head gives the same row, since each row's product is computed alone.
    pub fn head_logits<S, P>(
        &self,
        st: &mut RunState,
        run: (&S, &P, &Kernels),
        (head, row): (&TensorInfo, usize),
        out: &mut [f32],
    ) -> Result<(), ModelError>
    where
        S: Storage + Sync + ?Sized,
        P: Parallel + ?Sized,
    {
        let dim = self.config.dim;
        if row >= st.batch || head.row_len() != dim as u64 || out.len() as u64 != head.rows() {
            return Err(ModelError::Matvec(
                "head rows: row out of batch, or a head not of the model's width".into(),
            ));
        }
        self.head_only(run, false).head_into(st, row, head, out)
    }

    /// A pass of no layers that computes logits from `st.x` (of one row, or of every row).
    fn head_only<'p, S: ?Sized, P: ?Sized>(
        &'p self,
        run: (&'p S, &'p P, &'p Kernels),
        rows: bool,
    ) -> Pass<'p, S, P> {
        let rows = if rows { Rows::All } else { Rows::Last };
        let mut pass = self.whole_pass(run, true, rows);
        pass.layers = self.config.n_layer..self.config.n_layer;
        pass
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

impl<'a, S, P> Pass<'a, S, P>
where
    S: Storage + Sync + ?Sized,
    P: Parallel + ?Sized,
{
    /// This pass on the kernel path `st`'s error-budget switches choose: [`Quantized`] when all
    /// are off (a normal run), [`ExactPath`] otherwise.
    fn on_path<R>(
        &self,
        st: &mut RunState,
        run: impl FnOnce(&Self, &mut RunState) -> R,
        exact: impl FnOnce(&Pass<'a, S, P, ExactPath>, &mut RunState) -> R,
    ) -> R {
        if st.exact == Exact::default() {
            return run(self, st);
        }
        let pass = Pass {
            model: self.model,
            src: self.src,
            pool: self.pool,
            k: self.k,
            layers: self.layers.clone(),
            want_logits: self.want_logits,
            rows: self.rows,
            tick: self.tick,
            path: ExactPath(st.exact),
        };
        exact(&pass, st)
    }

    /// [`Pass::run`] on the chosen kernel path.
    fn run_chosen(&self, st: &mut RunState, input: Input<'_>) -> Result<(), ModelError> {
        self.on_path(st, |p, st| p.run(st, input), |p, st| p.run(st, input))
    }

    /// [`Pass::logits`] on the chosen kernel path.
    fn logits_chosen(&self, st: &mut RunState, row: usize) -> Result<(), ModelError> {
        self.on_path(st, |p, st| p.logits(st, row), |p, st| p.logits(st, row))
    }

    /// [`Pass::row_logits`] on the chosen kernel path.
    fn row_logits_chosen(&self, st: &mut RunState, b: usize) -> Result<(), ModelError> {
        self.on_path(st, |p, st| p.row_logits(st, b), |p, st| p.row_logits(st, b))
    }
}

impl<S, P, K> Pass<'_, S, P, K>
where
    S: Storage + Sync + ?Sized,
    P: Parallel + ?Sized,
    K: KernelPath<S, P>,
{
    /// What the kernel path computes with.
    fn cx(&self) -> Cx<'_, S, P> {
        Cx {
            c: &self.model.config,
            src: self.src,
            pool: self.pool,
            k: self.k,
        }
    }

    /// Read-ahead: before each matrix, announce the one two further on, so a streaming source
    /// reads it while these are computed.
    fn ahead(&self, l: usize, j: usize) {
        let (w, end) = (&self.model.weights, self.layers.end);
        if let Some(t) = matrix_at(w, l, j, end, self.want_logits) {
            self.src.prefetch(t.offset, t.size);
        }
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
            (true, Rows::Last) => self.logits(st, b - 1),
            (true, Rows::All) => self.row_logits(st, b),
            (true, Rows::Best) => self.row_bests(st, b),
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
            ..
        } = st;
        let x = &xb[..b * c.dim];
        let out = row_logits
            .get_mut(..b * c.vocab)
            .ok_or(ModelError::NoRowLogits)?;
        let bufs = (acts_dim, &mut mm[..], &mut scratch[..]);
        self.path
            .product(&self.cx(), OUTPUT, (&w.output, x, b, out), bufs)
    }

    /// best[i] = greedy(output · rmsnorm(x[i]) * output_norm) for the batch's `b` tokens, the
    /// head's rows computed a chunk at a time for all tokens into `logits` (`[b][chunk]`), each
    /// token's running best updated in row order       best: [B], logits as [b][vocab / b]
    fn row_bests(&self, st: &mut RunState, b: usize) -> Result<(), ModelError> {
        let (c, w) = (&self.model.config, &self.model.weights);
        let step = st.logits.len() / b.max(1);
        if step == 0 || b > st.best.len() {
            return Err(ModelError::NoRowLogits);
        }
        self.norm(st, &w.output_norm, b);
        st.best[..b].fill(RunningBest::NONE);
        for first in (0..c.vocab).step_by(step) {
            let n = step.min(c.vocab - first);
            let part = head_rows(&w.output, first, n);
            let (x, out) = (&st.xb[..b * c.dim], &mut st.logits[..b * n]);
            let bufs = (&mut st.acts_dim, &mut st.mm[..], &mut st.scratch[..]);
            self.path
                .product(&self.cx(), OUTPUT, (&part, x, b, out), bufs)?;
            let rows = st.logits[..b * n].chunks_exact(n);
            for (best, row) in st.best.iter_mut().zip(rows) {
                best.update(row, first);
            }
        }
        Ok(())
    }

    /// logits = output · rmsnorm(x[row]) * output_norm                logits: [vocab]
    fn logits(&self, st: &mut RunState, row: usize) -> Result<(), ModelError> {
        // Taken out for the product and put back (moving a Vec allocates nothing).
        let mut out = core::mem::take(&mut st.logits);
        let r = self.head_into(st, row, &self.model.weights.output, &mut out);
        st.logits = out;
        r
    }

    /// out = head · rmsnorm(x[row]) * output_norm, for any matrix of `dim`-long rows as the
    /// head (the output head, or rows of it)                              out: [head rows]
    fn head_into(
        &self,
        st: &mut RunState,
        row: usize,
        head: &TensorInfo,
        out: &mut [f32],
    ) -> Result<(), ModelError> {
        let (c, w) = (&self.model.config, &self.model.weights);
        let x = &st.x[row * c.dim..(row + 1) * c.dim];
        ops::rmsnorm(&mut st.xb[..c.dim], x, &w.output_norm, c.norm_eps);
        st.acts_dim.reset();
        let io = (head, &st.xb[..c.dim], 1, out);
        let bufs = (&mut st.acts_dim, &mut st.mm[..], &mut st.scratch[..]);
        self.path.product(&self.cx(), OUTPUT, io, bufs)
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
        let io = (w, &input[..b * n], b, &mut out[..b * rows]);
        let bufs = (acts, &mut mm[..], &mut scratch[..]);
        self.path.product(&self.cx(), what as usize, io, bufs)?;
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
    /// sliding-window layer], on the pass's kernel path.
    fn attend(&self, st: &mut RunState, l: usize, b: usize) -> Result<(), ModelError> {
        self.path.attend(&self.cx(), st, (l, b))
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
