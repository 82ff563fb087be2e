//! Drafts from a smaller model of the same vocabulary (a draft model). It keeps its own KV cache,
//! synced with the context at each call: the positions it already holds are kept (its own accepted guesses
//! included), the rest rolled back and fed again. It guesses greedily (its chain and runner-ups),
//! so each guess is a certain one, which [`crate::sample::sampler::Sampler::check_on`] checks
//! exactly at any temperature.

use super::{Draft, Growth, HeadCut};
use crate::generate::GenError;
use crate::model::Tree;
use crate::model::{Model, ModelError, RunState};
use crate::parallel::Parallel;
use crate::quant::Kernels;
use crate::sample::sampler::par_greedy;
use crate::storage::Storage;
use crate::tokenizer::Tokenizer;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// A model that drafts: its weights, the layers it runs and its own run state.
pub struct ModelDraft<'a, S: Storage + Sync + ?Sized, P: Parallel + ?Sized> {
    model: &'a Model,
    src: &'a S,
    pool: &'a P,
    kernels: Kernels,
    /// Layers run per draft token (all of them).
    layers: usize,
    st: RunState,
    /// The tokens whose keys and values `st` holds, in order (`st.pos` of them).
    fed: Vec<u32>,
    /// Most tokens proposed at once.
    max_draft: usize,
    /// Its output head cut to part of the vocabulary (`None`: the whole head).
    cut: Option<HeadCut>,
}

impl<S: Storage + Sync + ?Sized, P: Parallel + ?Sized> fmt::Debug for ModelDraft<'_, S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelDraft")
            .field("layers", &self.layers)
            .field("fed", &self.fed.len())
            .field("max_draft", &self.max_draft)
            .field("cut", &self.cut.as_ref().map(HeadCut::rows))
            .finish_non_exhaustive()
    }
}

/// How large a model draft's run state is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DraftShape {
    /// Context positions (the target's).
    pub ctx: usize,
    /// Tokens per catch-up pass (a prompt is fed to the draft in batches of this many).
    pub batch: usize,
    /// Most tokens proposed at once.
    pub max_draft: usize,
}

impl<'a, S: Storage + Sync + ?Sized, P: Parallel + ?Sized> ModelDraft<'a, S, P> {
    /// A draft model: all of `model`'s layers, read from `src`.
    pub fn model(
        model: &'a Model,
        src: &'a S,
        pool: &'a P,
        kernels: Kernels,
        shape: DraftShape,
    ) -> Result<Self, ModelError> {
        let st = draft_state(model, shape, pool.workers())?;
        let layers = model.config.n_layer;
        Self::with_state(model, src, pool, kernels, (layers, shape.max_draft), st)
    }

    /// A draft of `model`'s first `layers` layers (all, for a draft model) in a run state made
    /// by [`draft_state`], guessing at most `max_draft` tokens at once.
    pub fn with_state(
        model: &'a Model,
        src: &'a S,
        pool: &'a P,
        kernels: Kernels,
        (layers, max_draft): (usize, usize),
        mut st: RunState,
    ) -> Result<Self, ModelError> {
        let n_layer = model.config.n_layer;
        if layers == 0 || layers > n_layer || st.logits.len() != model.config.vocab {
            return Err(ModelError::Part {
                layers: 0..layers,
                n_layer,
            });
        }
        st.reset();
        Ok(ModelDraft {
            model,
            src,
            pool,
            kernels,
            layers,
            st,
            fed: Vec::new(),
            max_draft,
            cut: None,
        })
    }

    /// The same draft guessing only among `cut`'s tokens (the context's tokens are added to it
    /// as they come, read from the draft's storage).
    pub fn with_cut(mut self, cut: HeadCut) -> Self {
        self.cut = Some(cut);
        self
    }

    /// Its cut head, if it has one.
    pub fn cut(&self) -> Option<&HeadCut> {
        self.cut.as_ref()
    }

    /// Its run state back (to keep for the next generation).
    pub fn into_state(self) -> RunState {
        self.st
    }

    /// Bytes of its run state: (KV cache, everything else).
    pub fn bytes(&self) -> (usize, usize) {
        self.st.bytes()
    }

    /// Layers it runs per token.
    pub fn layers(&self) -> usize {
        self.layers
    }

    /// Bring the run state to `context` (at least one token), with the logits after its last
    /// token: keep the common prefix, roll back the rest (or start over when a rollback cannot
    /// go that far), feed what is new.
    fn sync(&mut self, context: &[u32]) -> Result<(), GenError> {
        let same = self.fed.iter().zip(context).take_while(|(a, b)| a == b);
        // The last token is always fed again: its logits are the first guess.
        let mut keep = same.count().min(context.len() - 1);
        if self.st.rollback(keep).is_err() {
            self.st.reset();
            keep = 0;
        }
        self.fed.truncate(keep);
        let new = &context[keep..];
        if let Some(cut) = self.cut.as_mut() {
            cut.add(new, self.src)?;
        }
        let chunks = new.len().div_ceil(self.st.batch());
        for (i, chunk) in new.chunks(self.st.batch()).enumerate() {
            self.feed(chunk, i + 1 == chunks)?;
        }
        Ok(())
    }

    fn feed(&mut self, tokens: &[u32], want_logits: bool) -> Result<(), GenError> {
        let run = (self.src, self.pool, &self.kernels);
        let whole = want_logits && self.cut.is_none();
        let st = &mut self.st;
        self.model
            .forward_layers(st, run, tokens, self.layers, whole)?;
        if let Some(cut) = self.cut.as_mut().filter(|_| want_logits) {
            let row = tokens.len() - 1;
            cut.logits(self.model, st, (self.pool, &self.kernels), row)?;
        }
        self.fed.extend_from_slice(tokens);
        Ok(())
    }

    /// The scores after the last token fed (the whole head's, or the cut's rows), and the token
    /// of an index into them.
    fn scores(&self) -> (&[f32], Option<&HeadCut>) {
        match &self.cut {
            Some(cut) => (cut.scores(), Some(cut)),
            None => (&self.st.logits[..self.model.config.vocab], None),
        }
    }
}

impl<S: Storage + Sync + ?Sized, P: Parallel + ?Sized> Draft for ModelDraft<'_, S, P> {
    fn propose(&mut self, context: &[u32], out: &mut [u32]) -> Result<usize, GenError> {
        // Room for the context and the guesses but the last (which is never fed).
        let room = (self.st.ctx() + 1).saturating_sub(context.len());
        let k = out.len().min(self.max_draft).min(room);
        if k == 0 || context.is_empty() {
            return Ok(0);
        }
        self.sync(context)?;
        for i in 0..k {
            let (scores, cut) = self.scores();
            let t = token(cut, par_greedy(self.pool, scores)?);
            out[i] = t;
            if i + 1 < k {
                self.feed(&[t], true)?;
            }
        }
        Ok(k)
    }

    /// The greedy chain and each step's runner-up, as [`Growth`] picks them (a runner-up costs
    /// no pass). Returns the passes run: the catch-up with the context, then one a chain step.
    fn propose_tree(&mut self, context: &[u32], tree: &mut Tree) -> Result<usize, GenError> {
        let room = (self.st.ctx() + 1).saturating_sub(context.len());
        let k = tree.room().min(self.max_draft).min(room);
        if k == 0 || context.is_empty() {
            return Ok(0);
        }
        self.sync(context)?;
        let mut passes = 1;
        let mut grow = Growth::new(k);
        loop {
            let (scores, cut) = self.scores();
            let Some(t) = grow.step_ids(scores, |i| token(cut, i)) else {
                break;
            };
            self.feed(&[t], true)?;
            passes += 1;
        }
        grow.plant(tree);
        Ok(passes)
    }
}

/// The token of index `i` into a draft's scores: of the cut's row `i`, or `i` itself.
fn token(cut: Option<&HeadCut>, i: u32) -> u32 {
    cut.map_or(i, |c| c.id(i))
}

/// The run state a draft model needs (allocated before the page cache takes the rest of the
/// memory, on a board).
pub fn draft_state(
    model: &Model,
    shape: DraftShape,
    workers: usize,
) -> Result<RunState, ModelError> {
    RunState::with_batch(model, shape.ctx, workers, shape.batch)
}

/// Why a draft model cannot draft for a target: their vocabularies differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VocabMismatch(pub String);

impl fmt::Display for VocabMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the draft model's vocabulary is not the target's: {} (a draft must share the target's tokenizer)",
            self.0
        )
    }
}

/// Whether `draft`'s tokenizer gives every token the id `target`'s does: the same count, the same
/// text of each, the same special ids.
pub fn same_vocabulary(target: &Tokenizer, draft: &Tokenizer) -> Result<(), VocabMismatch> {
    let (n, m) = (target.vocab_size(), draft.vocab_size());
    if n != m {
        return Err(VocabMismatch(alloc::format!(
            "{m} tokens, the target has {n}"
        )));
    }
    if let Some(id) = (0..n as u32).find(|&i| target.token_text(i) != draft.token_text(i)) {
        let text = |t: &Tokenizer| {
            String::from_utf8_lossy(t.token_text(id).unwrap_or_default()).into_owned()
        };
        return Err(VocabMismatch(alloc::format!(
            "token {id} is {:?}, the target's is {:?}",
            text(draft),
            text(target)
        )));
    }
    let (a, b) = (target.special_ids(), draft.special_ids());
    if a != b {
        return Err(VocabMismatch(alloc::format!(
            "special ids {b:?}, the target's are {a:?}"
        )));
    }
    Ok(())
}
