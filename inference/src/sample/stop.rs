//! How a generation ends and what it reports: the [`StopReason`], the [`LogitsFilter`] a
//! constraint implements (JSON mode), and `Stops`, the draw and the stop rules every generation
//! loop (the plain one in `generate`, the speculative one in `speculate`) applies
//! in the same order after each token, so all stop alike.

use super::sampler::{greedy, Sampler, SamplerError};
use crate::parallel::Parallel;

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token (not printed).
    EndToken(u32),
    /// The requested number of tokens was generated.
    MaxTokens,
    /// The KV cache is full.
    ContextFull,
    /// The callback asked to stop (e.g. Ctrl-C), or the [`LogitsFilter`] said the output is
    /// complete (e.g. a complete JSON value).
    Stopped,
}

/// A constraint on what may be generated, applied by the generation loops
/// (`Engine::generate_filtered`) around each draw (e.g. [`super::json::JsonConstraint`] for JSON
/// mode).
pub trait LogitsFilter {
    /// Forbid tokens by setting their logits to `f32::NEG_INFINITY` (leave at least one).
    /// `remaining`: how many tokens may still be generated, this one included.
    fn apply(&mut self, logits: &mut [f32], remaining: usize);
    /// Advance over the drawn token (never an end token); true when the output is complete and
    /// generation should stop after reporting it.
    fn advance(&mut self, token: u32) -> bool;
    /// How many of `tokens`, in turn from the current state, the constraint could take (guessed
    /// tokens past that are not worth checking). By default all.
    fn valid_prefix(&self, tokens: &[u32]) -> usize {
        tokens.len()
    }
}

/// Counts and times of one generation (times in the clock's units, e.g. nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GenReport {
    pub prompt_tokens: usize,
    pub generated: usize,
    /// Time to run the prompt.
    pub prefill_time: u64,
    /// Time from the start to the first generated token.
    pub first_token_time: u64,
    /// Time spent generating after the prompt.
    pub gen_time: u64,
    pub stop: Option<StopReason>,
}

/// How a generation ends, checked after each drawn token in the same order by every loop (the
/// plain one in `generate` and the speculative one in `speculate`), so both stop
/// alike.
#[derive(Clone, Copy)]
pub(crate) struct Stops<'f> {
    pub max_tokens: usize,
    pub is_end: &'f dyn Fn(u32) -> bool,
    pub clock: &'f dyn Fn() -> u64,
    /// When generation started (for the first token's time).
    pub t0: u64,
}

impl Stops<'_> {
    /// Draw the token after `logits` (to be fed at position `pos` of `ctx`), checking `drafts`
    /// against it: `(token, which draft it is, whether it completes the output)`. A `filter`
    /// masks first, told how many tokens may still come (the token limit or the free context,
    /// whichever is smaller, this one included), and advances over the token unless it is an
    /// end token.
    #[allow(clippy::too_many_arguments)]
    pub fn draw<P: Parallel + ?Sized>(
        &self,
        pool: &P,
        sampler: &mut Sampler,
        logits: &mut [f32],
        drafts: &[u32],
        rep: &GenReport,
        filter: Option<&mut (dyn LogitsFilter + '_)>,
        (pos, ctx): (usize, usize),
    ) -> Result<(u32, Option<usize>, bool), SamplerError> {
        let Some(f) = filter else {
            let (t, kept) = sampler.check_on(pool, logits, drafts)?;
            return Ok((t, kept, false));
        };
        // Tokens that can still be drawn: this one, then one per free position.
        let remaining = (self.max_tokens - rep.generated).min(ctx.saturating_sub(pos) + 1);
        f.apply(logits, remaining);
        let (mut t, mut kept) = sampler.check_on(pool, logits, drafts)?;
        if logits.get(t as usize) == Some(&f32::NEG_INFINITY) {
            // Only in a corner of the sampler's arithmetic: never break the filter.
            t = greedy(logits)?;
            kept = drafts.iter().position(|&d| d == t);
        }
        let complete = !(self.is_end)(t) && f.advance(t);
        Ok((t, kept, complete))
    }

    /// Take the drawn `tok`: an end token stops unreported; any other is counted, recorded in
    /// the sampler and reported, then the callback, a complete filter, the token limit and a full
    /// context (`pos` of `ctx` positions filled, `tok` not yet fed) may stop generation.
    pub fn take(
        &self,
        rep: &mut GenReport,
        sampler: &mut Sampler,
        on_token: &mut dyn FnMut(u32) -> bool,
        tok: u32,
        complete: bool,
        (pos, ctx): (usize, usize),
    ) -> Option<StopReason> {
        if rep.generated == 0 {
            rep.first_token_time = (self.clock)().wrapping_sub(self.t0);
        }
        if (self.is_end)(tok) {
            return Some(StopReason::EndToken(tok));
        }
        rep.generated += 1;
        sampler.accept(tok);
        if !on_token(tok) || complete {
            return Some(StopReason::Stopped);
        }
        if rep.generated == self.max_tokens {
            return Some(StopReason::MaxTokens);
        }
        (pos >= ctx).then_some(StopReason::ContextFull)
    }
}
