//! Speculative decoding: several tokens per pass of the target model. A [`Draft`] source guesses
//! the next tokens; one batched pass of the target over the last token and the guesses gives the
//! logits after each of them ([`crate::model::Model::forward_rows`], each weight read once for all); the guesses
//! are kept while they are what the target itself would have chosen, and the state is rolled back
//! over the rest ([`RunState::rollback`]). Since a batched pass is bit for bit a pass per token,
//! greedy output is token for token that of plain greedy decoding, in fewer passes over the
//! weights: what counts when the weights stream from a card.
//!
//! Sources: [`Lookup`] (prompt-lookup decoding: continuations of the last tokens found earlier in
//! the context). A self-draft (the target's first layers and its output head) and a draft model
//! fit the same [`Draft`] trait: they see the whole context at each call, so they can sync their
//! own state with it.
//!
//! This first slice verifies greedily (temperature 0, no repetition penalty); other sampling
//! settings run the plain loop.

use crate::generate::{Engine, GenError, GenReport, StopReason, Stops};
use crate::model::{ModelError, RunState};
use crate::parallel::Parallel;
use crate::quant::MAX_BATCH;
use crate::sampler::{par_greedy, Sampler};
use crate::storage::Storage;
use alloc::vec::Vec;

/// A source of draft tokens: guesses at what the target model generates next.
pub trait Draft {
    /// Up to `out.len()` tokens that may follow `context` (the prompt and every token generated
    /// so far), written to the front of `out`; how many (0: no guess).
    fn propose(&mut self, context: &[u32], out: &mut [u32]) -> Result<usize, GenError>;
}

/// Prompt-lookup decoding: the tokens that followed the latest earlier occurrence of the
/// context's last `n` tokens, `n` from `max_n` down to 1. Costs no memory; suits replies that
/// quote the prompt (code edits, extraction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    /// Longest tail searched for.
    pub max_n: usize,
    /// Most tokens proposed at once.
    pub max_draft: usize,
}

impl Draft for Lookup {
    fn propose(&mut self, context: &[u32], out: &mut [u32]) -> Result<usize, GenError> {
        let k = out.len().min(self.max_draft);
        Ok(lookup(context, self.max_n, &mut out[..k]))
    }
}

/// The continuation of the latest earlier occurrence of `context`'s last `n` tokens (longest `n`
/// up to `max_n` first) into `out`, filling it; how many tokens (0: no match). Where the
/// continuation reaches the end of the context it goes on over what it proposed, as an LZ77 copy
/// does: a context that repeats with some period is proposed to go on repeating.
pub fn lookup(context: &[u32], max_n: usize, out: &mut [u32]) -> usize {
    let len = context.len();
    for n in (1..=max_n.min(len.saturating_sub(1))).rev() {
        let tail = &context[len - n..];
        // Starts before the tail's own: at least one token follows.
        if let Some(i) = (0..len - n).rev().find(|&i| &context[i..i + n] == tail) {
            for j in 0..out.len() {
                // Token j follows at i + n + j of the context and then of the proposal.
                let at = i + n + j;
                out[j] = if at < len { context[at] } else { out[at - len] };
            }
            return out.len();
        }
    }
    0
}

/// Counts of a speculative generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpecStats {
    /// Passes of the target model after the prompt.
    pub passes: usize,
    /// Draft tokens checked.
    pub drafted: usize,
    /// Draft tokens the target agreed with.
    pub accepted: usize,
}

impl SpecStats {
    /// Tokens each pass gave: its own next token and the drafts accepted (1 without speculation).
    pub fn tokens_per_pass(&self) -> f32 {
        (self.passes + self.accepted) as f32 / self.passes.max(1) as f32
    }
}

/// Whether `sampler` picks the highest logit unchanged, so that a draft is checked by an argmax.
fn plain_greedy(sampler: &Sampler) -> bool {
    let c = &sampler.config;
    c.temperature <= 0.0 && (c.repeat_penalty == 1.0 || c.repeat_last_n == 0)
}

impl<S: Storage + Sync + ?Sized, P: Parallel + ?Sized> Engine<'_, S, P> {
    /// [`Engine::generate`] with drafts from `draft` checked by the target, a round per pass:
    /// the same tokens, stop reason and final position as the plain loop, in fewer passes. Runs
    /// the plain loop when the sampler is not plain greedy or a ring runs the model. Allocates the
    /// logits of every batch row ([`RunState::keep_row_logits`], unless the caller kept fewer
    /// rows: at most that many tokens are checked per pass) and the context, once.
    pub fn generate_speculative(
        &self,
        st: &mut RunState,
        sampler: &mut Sampler,
        prompt: &[u32],
        max_tokens: usize,
        draft: &mut dyn Draft,
        is_end: &dyn Fn(u32) -> bool,
        clock: &dyn Fn() -> u64,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<(GenReport, SpecStats), GenError> {
        if !plain_greedy(sampler) || self.remote.is_some() {
            let start = st.pos + prompt.len();
            let rep = self.generate(st, sampler, prompt, max_tokens, is_end, clock, on_token)?;
            let passes = st.pos.saturating_sub(start);
            return Ok((
                rep,
                SpecStats {
                    passes,
                    ..SpecStats::default()
                },
            ));
        }
        let (rep, t0, t1) = self.prefill(st, sampler, prompt, clock)?;
        if st.rows_kept() == 0 {
            st.keep_row_logits(self.model, st.batch())?;
        }
        let mut run = Round {
            stops: Stops {
                max_tokens,
                is_end,
                clock,
                t0,
            },
            rep,
            stats: SpecStats::default(),
            context: Vec::with_capacity(prompt.len() + max_tokens.min(st.ctx())),
            batch: [0; MAX_BATCH],
        };
        run.context.extend_from_slice(prompt);
        if max_tokens > 0 {
            let first = sampler.sample_on(self.pool, &mut st.logits)?;
            self.rounds(&mut run, st, sampler, draft, first, on_token)?;
        }
        run.rep.stop.get_or_insert(StopReason::MaxTokens);
        run.rep.gen_time = clock().wrapping_sub(t1);
        Ok((run.rep, run.stats))
    }

    /// Rounds until a stop, from the target's token `next` (drawn, not yet taken): take it, ask
    /// for drafts, check them in one pass, take those the target agrees with, roll back the rest.
    fn rounds(
        &self,
        run: &mut Round<'_>,
        st: &mut RunState,
        sampler: &mut Sampler,
        draft: &mut dyn Draft,
        mut next: u32,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<(), GenError> {
        loop {
            let base = st.pos;
            if let Some(stop) = run.take(sampler, on_token, next, (base, st.ctx())) {
                run.rep.stop = Some(stop);
                return Ok(());
            }
            // Drafts that fit the batch and the context, and can still be generated.
            let room = (run.stops.max_tokens - run.rep.generated)
                .min(st.ctx() - base - 1)
                .min(st.rows_kept().max(1) - 1);
            let n = draft
                .propose(&run.context, &mut run.batch[1..1 + room])?
                .min(room);
            run.batch[0] = next;
            let (src, pool, k) = (self.src, self.pool, &self.kernels);
            let tokens = &run.batch[..1 + n];
            self.model.forward_rows(st, src, pool, k, tokens)?;
            self.forwarded();
            run.stats.passes += 1;
            run.stats.drafted += n;
            match self.check(run, st, sampler, on_token, base, n)? {
                Checked::Next(t) => next = t,
                Checked::Stop(stop, pos) => {
                    st.rollback(pos)?;
                    run.rep.stop = Some(stop);
                    return Ok(());
                }
            }
        }
    }

    /// Walk the checked pass from position `base` (`n` drafts after the taken token): take each
    /// draft the target's argmax agrees with, then roll back past the last one taken.
    fn check(
        &self,
        run: &mut Round<'_>,
        st: &mut RunState,
        sampler: &mut Sampler,
        on_token: &mut dyn FnMut(u32) -> bool,
        base: usize,
        n: usize,
    ) -> Result<Checked, GenError> {
        let vocab = self.model.config.vocab;
        let mut a = 0;
        let next = loop {
            let row = st.row_logits(a, vocab).ok_or(ModelError::NoRowLogits)?;
            let t = par_greedy(self.pool, row)?;
            if a == n || t != run.batch[1 + a] {
                break t;
            }
            a += 1;
            run.stats.accepted += 1;
            // Draft `a` sits at position base + a; the plain loop would be there, not past it.
            if let Some(stop) = run.take(sampler, on_token, t, (base + a, st.ctx())) {
                return Ok(Checked::Stop(stop, base + a));
            }
        };
        st.rollback(base + 1 + a)?;
        Ok(Checked::Next(next))
    }
}

/// What a checked pass gave.
enum Checked {
    /// The target's own next token (drawn, not yet taken).
    Next(u32),
    /// Generation stops, at this position.
    Stop(StopReason, usize),
}

/// The state of a speculative generation across its rounds.
struct Round<'f> {
    stops: Stops<'f>,
    rep: GenReport,
    stats: SpecStats,
    /// The prompt and the tokens taken so far, for the draft source.
    context: Vec<u32>,
    /// The pass being checked: the last token taken, then the drafts.
    batch: [u32; MAX_BATCH],
}

impl Round<'_> {
    /// [`Stops::take`], keeping the token in the context unless generation stops.
    fn take(
        &mut self,
        sampler: &mut Sampler,
        on_token: &mut dyn FnMut(u32) -> bool,
        tok: u32,
        at: (usize, usize),
    ) -> Option<StopReason> {
        let stop = self
            .stops
            .take(&mut self.rep, sampler, on_token, tok, false, at);
        if stop.is_none() {
            self.context.push(tok);
        }
        stop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `lookup` on `context` with room for `k` tokens: what it proposes.
    fn proposed(context: &[u32], max_n: usize, k: usize) -> Vec<u32> {
        let mut out = [0u32; 16];
        let m = lookup(context, max_n, &mut out[..k]);
        out[..m].to_vec()
    }

    #[test]
    fn lookup_takes_the_latest_match() {
        // "1 2" occurs twice before the tail; the later one is followed by 7 8.
        let c = [1, 2, 3, 4, 1, 2, 7, 8, 9, 1, 2];
        assert_eq!(proposed(&c, 2, 3), [7, 8, 9]);
    }

    #[test]
    fn lookup_tries_the_longest_tail_first() {
        // The tail "5 1 2" matches only the first occurrence; "1 2" alone the later one.
        let c = [5, 1, 2, 3, 1, 2, 4, 5, 1, 2];
        assert_eq!(proposed(&c, 3, 2), [3, 1]);
        assert_eq!(proposed(&c, 2, 2), [4, 5]);
        // n falls to 1 when no longer tail matches.
        assert_eq!(proposed(&[9, 4, 6, 4], 3, 1), [6]);
    }

    #[test]
    fn lookup_proposes_at_most_k_and_what_follows() {
        let c = [1, 2, 3, 4, 5, 6, 1];
        assert_eq!(proposed(&c, 2, 4), [2, 3, 4, 5]);
        assert_eq!(proposed(&c, 2, 0), [] as [u32; 0]);
        // Past the end of the context the continuation copies itself: the period repeats.
        assert_eq!(proposed(&[7, 7, 7], 2, 5), [7, 7, 7, 7, 7]);
        assert_eq!(proposed(&[1, 2, 3, 1, 2], 2, 5), [3, 1, 2, 3, 1]);
        let mut l = Lookup {
            max_n: 2,
            max_draft: 3,
        };
        let mut out = [0u32; 8];
        assert_eq!(l.propose(&c, &mut out), Ok(3));
        assert_eq!(out[..3], [2, 3, 4]);
    }

    #[test]
    fn lookup_handles_empty_and_short_contexts() {
        assert!(proposed(&[], 3, 4).is_empty());
        assert!(proposed(&[5], 3, 4).is_empty());
        assert!(proposed(&[5, 6], 3, 4).is_empty());
        assert!(proposed(&[1, 2, 3], 0, 4).is_empty());
        assert_eq!(proposed(&[5, 5], 3, 4), [5, 5, 5, 5]);
    }
}
