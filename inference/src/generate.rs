//! The generation loop shared by the PC runner and the kernel: feed the prompt (logits only for its
//! last token), then sample, report and feed each new token until an end-of-generation token, the
//! token limit, or a full context. Time comes from the caller's clock, output goes to the caller's
//! callback, so the same loop runs on every platform.

use crate::model::{HeadRows, Input, Model, ModelError, Part, RunState, Tree};
use crate::parallel::Parallel;
use crate::quant::Kernels;
use crate::sample::sampler::{Sampler, SamplerError};
use crate::sample::stop::Stops;
use crate::storage::Storage;
use alloc::string::String;
use core::fmt;

pub use crate::sample::stop::{GenReport, LogitsFilter, StopReason};

/// Why generation failed.
#[derive(Debug, Clone, PartialEq)]
pub enum GenError {
    Model(ModelError),
    Sampler(SamplerError),
    /// The prompt does not fit in the context.
    PromptTooLong {
        tokens: usize,
        free: usize,
    },
    EmptyPrompt,
    /// The ring of boards that runs the other layers failed (the message names the board).
    Ring(String),
}

impl fmt::Display for GenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenError::Model(e) => write!(f, "{e}"),
            GenError::Sampler(e) => write!(f, "sampling: {e}"),
            GenError::PromptTooLong { tokens, free } => write!(
                f,
                "the prompt is {tokens} tokens but only {free} positions of the context are free (raise the context length or shorten the prompt)"
            ),
            GenError::EmptyPrompt => write!(f, "the prompt is empty (no tokens)"),
            GenError::Ring(e) => write!(f, "ring: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for GenError {}

impl From<ModelError> for GenError {
    fn from(e: ModelError) -> Self {
        GenError::Model(e)
    }
}
impl From<SamplerError> for GenError {
    fn from(e: SamplerError) -> Self {
        GenError::Sampler(e)
    }
}

/// The layers a ring's other boards run, as the head sees them: it hands them the hidden states
/// after its own part and, when logits are wanted, gets back the last token's hidden state after
/// the model's last layer. The values cross the ring as f32, so the logits are bit for bit those
/// of one board.
pub trait Remote {
    /// The head's own part (the ends and the first layers).
    fn part(&self) -> &Part;
    /// Hand `x` (`[b][dim]`, `rows` = `(pos, b, back)`: positions `pos..pos + b`) to the next
    /// board, asking for the last `back` rows back (0: none; 1: the next token's; `b`: every
    /// row, to check guesses). The rows form a tree when `parents` (row `i + 1`'s parent at `i`)
    /// is not empty ([`crate::model::Tree`]). Returns once it is queued: the line sends while
    /// the head computes the next batch.
    fn send(&self, x: &[f32], rows: (usize, usize, usize), parents: &[u8]) -> Result<(), String>;
    /// After a tree batch at `base`, the boards keep the path `rows` of it
    /// ([`RunState::keep_path`]): said with the next batch.
    fn keep(&self, base: usize, rows: &[u8]);
    /// Wait for the rows asked for (`[back][dim]`, after every layer).
    fn receive(&self, out: &mut [f32]) -> Result<(), String>;
    /// Serve the line (called between matrix products).
    fn tick(&self);
}

/// Everything the loop needs besides the prompt.
pub struct Engine<'a, S: Storage + Sync + ?Sized, P: Parallel + ?Sized> {
    pub model: &'a Model,
    pub src: &'a S,
    pub pool: &'a P,
    pub kernels: Kernels,
    /// Called after every forward pass (a prompt batch, a generated token, a checking pass, a
    /// self-draft's guess) with its tokens and the layers it ran, e.g. to sample a counter.
    pub on_forward: Option<&'a dyn Fn(usize, usize)>,
    /// The other boards of a ring, when this board is its head (`None`: one board runs it all).
    pub remote: Option<&'a dyn Remote>,
}

impl<S: Storage + Sync + ?Sized, P: Parallel + ?Sized> fmt::Debug for Engine<'_, S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("kernels", &self.kernels)
            .finish_non_exhaustive()
    }
}

impl<'a, S: Storage + Sync + ?Sized, P: Parallel + ?Sized> Engine<'a, S, P> {
    /// An engine over `model` read from `src`, split across `pool`, computing with `kernels`,
    /// with no hook after each forward pass.
    pub fn new(model: &'a Model, src: &'a S, pool: &'a P, kernels: Kernels) -> Self {
        Engine {
            model,
            src,
            pool,
            kernels,
            on_forward: None,
            remote: None,
        }
    }

    /// One forward pass over `tokens` at the next positions: here, or here and around the ring.
    fn pass(&self, st: &mut RunState, tokens: &[u32], want_logits: bool) -> Result<(), GenError> {
        let run = (self.src, self.pool, &self.kernels);
        let Some(r) = self.remote else {
            let (src, pool, k) = run;
            return Ok(self
                .model
                .forward_batch(st, src, pool, k, tokens, want_logits)?);
        };
        let (pos, b, dim) = (st.pos, tokens.len(), self.model.config.dim);
        let tick = || r.tick();
        let input = Input::Tokens(tokens);
        self.model
            .forward_part(st, run, input, r.part(), false, Some(&tick))?;
        r.send(&st.x[..b * dim], (pos, b, usize::from(want_logits)), &[])
            .map_err(GenError::Ring)?;
        if want_logits {
            let row = b - 1;
            r.receive(&mut st.x[row * dim..(row + 1) * dim])
                .map_err(GenError::Ring)?;
            self.model.logits(st, run, HeadRows::One(row))?;
        }
        Ok(())
    }

    /// A checking pass over the rows of `tree` at the next positions with the logits of every
    /// one ([`RunState::row_logits`]), or with `best` only each one's greedy pick
    /// ([`RunState::row_best`], one board only): here, or here and around the ring (every row
    /// comes back).
    pub(crate) fn pass_rows(
        &self,
        st: &mut RunState,
        tree: &Tree,
        best: bool,
    ) -> Result<(), GenError> {
        let run = (self.src, self.pool, &self.kernels);
        let Some(r) = self.remote else {
            if best {
                return Ok(self.model.forward_tree_best(st, run, tree)?);
            }
            return Ok(self.model.forward_tree(st, run, tree)?);
        };
        let tokens = tree.tokens();
        let parents = if tree.is_chain() {
            &[][..]
        } else {
            tree.parents()
        };
        let (pos, b, dim) = (st.pos, tokens.len(), self.model.config.dim);
        let tick = || r.tick();
        let input = Input::Tokens(tokens);
        st.set_tree(Some(tree));
        let ran = self
            .model
            .forward_part(st, run, input, r.part(), false, Some(&tick));
        st.set_tree(None);
        ran?;
        r.send(&st.x[..b * dim], (pos, b, b), parents)
            .map_err(GenError::Ring)?;
        r.receive(&mut st.x[..b * dim]).map_err(GenError::Ring)?;
        self.model.logits(st, run, HeadRows::First(b))?;
        Ok(())
    }

    pub(crate) fn forwarded(&self, tokens: usize) {
        self.forwarded_layers(tokens, self.model.config.n_layer)
    }

    pub(crate) fn forwarded_layers(&self, tokens: usize, layers: usize) {
        if let Some(f) = self.on_forward {
            f(tokens, layers)
        }
    }

    /// Feed `tokens` at the next positions, in batches of up to `st.batch()` tokens per forward
    /// pass (each weight read and decoded once per batch); computes logits for the last one. The
    /// logits are bit for bit those of feeding the tokens one at a time.
    pub fn feed(&self, st: &mut RunState, tokens: &[u32]) -> Result<(), GenError> {
        let free = st.ctx() - st.pos;
        if tokens.len() > free {
            return Err(GenError::PromptTooLong {
                tokens: tokens.len(),
                free,
            });
        }
        let b = st.batch().max(1);
        let passes = tokens.len().div_ceil(b);
        for (i, chunk) in tokens.chunks(b).enumerate() {
            self.pass(st, chunk, i + 1 == passes)?;
            self.forwarded(chunk.len());
        }
        Ok(())
    }

    /// Feed `prompt` and record it in the sampler: the report so far, the start time and the
    /// time after the prompt.
    pub(crate) fn prefill(
        &self,
        st: &mut RunState,
        sampler: &mut Sampler,
        prompt: &[u32],
        clock: &dyn Fn() -> u64,
    ) -> Result<(GenReport, u64, u64), GenError> {
        if prompt.is_empty() {
            return Err(GenError::EmptyPrompt);
        }
        let t0 = clock();
        let mut rep = GenReport {
            prompt_tokens: prompt.len(),
            ..Default::default()
        };
        self.feed(st, prompt)?;
        for &t in prompt {
            sampler.accept(t);
        }
        let t1 = clock();
        rep.prefill_time = t1.wrapping_sub(t0);
        Ok((rep, t0, t1))
    }

    /// Run `prompt`, then generate up to `max_tokens`, calling `on_token(id)` for each new token
    /// (return false to stop). `is_end(id)` says which tokens end generation.
    pub fn generate(
        &self,
        st: &mut RunState,
        sampler: &mut Sampler,
        prompt: &[u32],
        max_tokens: usize,
        is_end: &dyn Fn(u32) -> bool,
        clock: &dyn Fn() -> u64,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<GenReport, GenError> {
        self.generate_filtered(
            st, sampler, prompt, max_tokens, is_end, clock, None, on_token,
        )
    }

    /// [`Engine::generate`] with an optional [`LogitsFilter`] (e.g. JSON mode,
    /// [`crate::sample::json::JsonConstraint`]): before each draw the filter masks the logits,
    /// told how many tokens may still come (the token limit or the free context, whichever is smaller, this
    /// one included); after it the filter sees the token, and when it says the output is complete
    /// the token is reported and generation stops with [`StopReason::Stopped`]. With `None` this is
    /// exactly `generate`.
    pub fn generate_filtered(
        &self,
        st: &mut RunState,
        sampler: &mut Sampler,
        prompt: &[u32],
        max_tokens: usize,
        is_end: &dyn Fn(u32) -> bool,
        clock: &dyn Fn() -> u64,
        mut filter: Option<&mut dyn LogitsFilter>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<GenReport, GenError> {
        let (mut rep, t0, t1) = self.prefill(st, sampler, prompt, clock)?;
        let stops = Stops {
            max_tokens,
            is_end,
            clock,
            t0,
        };
        while rep.generated < max_tokens {
            let at = (st.pos, st.ctx());
            let (tok, _, complete) = stops.draw(
                self.pool,
                sampler,
                &mut st.logits,
                &[],
                &rep,
                filter.as_deref_mut(),
                at,
            )?;
            if let Some(stop) = stops.take(&mut rep, sampler, on_token, tok, complete, at) {
                rep.stop = Some(stop);
                break;
            }
            self.pass(st, &[tok], true)?;
            self.forwarded(1);
        }
        rep.stop.get_or_insert(StopReason::MaxTokens);
        rep.gen_time = clock().wrapping_sub(t1);
        Ok(rep)
    }
}
