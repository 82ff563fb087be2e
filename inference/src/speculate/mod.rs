//! Speculative decoding: several tokens per pass of the target model. A [`Draft`] source guesses
//! the next tokens as a tree of candidates ([`Tree`]: continuations that share prefixes); one
//! batched pass of the target over the last token and the guesses gives the logits after each of
//! them ([`crate::model::Model::forward_tree`], each weight read once for all, each row seeing
//! only its own path); the guesses are checked from the root down ([`Sampler::check_on`] among
//! each row's children) and the state keeps the path taken ([`RunState::keep_path`]). Since a
//! tree pass is bit for bit a pass per token along each path, greedy output is token for token
//! that of plain greedy decoding, and sampled output has the plain sampler's distribution, in
//! fewer passes over the weights: what counts when the weights stream from a card.
//!
//! Sources: [`Lookup`] (continuations found earlier in the context), [`ModelDraft`] (a draft
//! model, or the target's own first layers and output head, its chain and runner-ups picked by
//! [`Growth`]), and [`Drafts`] (several, the first with a guess wins). Each sees the whole
//! context at each call and syncs its own state with it.

mod cut;
mod draft;
mod grow;
mod lookup;
pub mod plan;
pub mod resident;
mod speculator;

pub use cut::{auto_rows, DraftVocab, HeadCut, AUTO_SHARE, MIN_ROWS};
pub use draft::{draft_state, same_vocabulary, DraftShape, ModelDraft, VocabMismatch};
pub use grow::{top_two, Growth};
pub use lookup::{lookup, lookup_tree, Lookup};
pub use plan::{draft_model_pays, PassCost, Planner};
pub use speculator::Speculator;

use crate::generate::{Engine, GenError};
use crate::model::{ModelError, RunState, Tree};
use crate::parallel::Parallel;
use crate::quant::MAX_BATCH;
use crate::sample::sampler::Sampler;
use crate::sample::stop::{GenReport, LogitsFilter, StopReason, Stops};
use crate::storage::Storage;
use alloc::vec::Vec;

/// A source of draft tokens: guesses at what the target model generates next.
pub trait Draft {
    /// Up to `out.len()` tokens that may follow `context` (every token at positions 0 on: the
    /// conversation so far, the prompt and every token generated since; only the prompt and
    /// what follows when the caller did not say what came before), written to the front of
    /// `out`; how many (0: no guess).
    /// (By default none: a source that only guesses trees.)
    fn propose(&mut self, context: &[u32], out: &mut [u32]) -> Result<usize, GenError> {
        let _ = (context, out);
        Ok(0)
    }

    /// Guesses below `tree`'s root (the context's last token), as many rows as it has room for:
    /// [`Draft::propose`]'s chain unless the source knows of several continuations. Returns the
    /// passes the source ran (a model's; 0 for one that runs none).
    fn propose_tree(&mut self, context: &[u32], tree: &mut Tree) -> Result<usize, GenError> {
        let mut out = [0u32; MAX_BATCH];
        let n = self.propose(context, &mut out[..tree.room()])?;
        tree.extend(0, &out[..n]);
        Ok(n)
    }
}

/// Several sources, asked in order: the first that guesses anything gives the draft (e.g. lookup,
/// free when the context repeats, then a model).
pub struct Drafts<'d>(pub Vec<alloc::boxed::Box<dyn Draft + 'd>>);

impl<D: Draft + ?Sized> Draft for &mut D {
    fn propose(&mut self, context: &[u32], out: &mut [u32]) -> Result<usize, GenError> {
        (**self).propose(context, out)
    }

    fn propose_tree(&mut self, context: &[u32], tree: &mut Tree) -> Result<usize, GenError> {
        (**self).propose_tree(context, tree)
    }
}

impl core::fmt::Debug for Drafts<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Drafts({} sources)", self.0.len())
    }
}

impl Draft for Drafts<'_> {
    fn propose(&mut self, context: &[u32], out: &mut [u32]) -> Result<usize, GenError> {
        for d in self.0.iter_mut() {
            let n = d.propose(context, out)?;
            if n > 0 {
                return Ok(n);
            }
        }
        Ok(0)
    }

    fn propose_tree(&mut self, context: &[u32], tree: &mut Tree) -> Result<usize, GenError> {
        let mut passes = 0;
        for d in self.0.iter_mut() {
            passes += d.propose_tree(context, tree)?;
            if tree.len() > 1 {
                break;
            }
        }
        Ok(passes)
    }
}

/// How many guesses to check per pass (`speculate = auto|off|K`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecMode {
    /// The plain loop.
    Off,
    /// As many as pay for themselves ([`Planner::auto`]).
    Auto,
    /// Always this many (at most the sources give).
    Fixed(usize),
}

/// The speculation settings every runner takes (`lmboot.txt` keys, `lmboot-host` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecSettings {
    /// `lookup = N`: guesses from earlier text ending like the last N tokens (0: off).
    pub lookup: usize,
    /// `self_draft = L`: the target's first L layers guess (0: off).
    pub self_draft: usize,
    /// `draft = FILE`: a draft model of the target's vocabulary.
    pub draft: Option<alloc::string::String>,
    /// `draft_vocab = N|auto|all`: how much of the draft model's output head it keeps.
    pub draft_vocab: DraftVocab,
    /// `draft_max = K`: most guesses per pass.
    pub draft_max: usize,
    /// `speculate = auto|off|K`.
    pub mode: SpecMode,
}

/// Longest tail `lookup` may search for.
pub const MAX_LOOKUP: usize = 8;
/// Default of `draft_max`.
pub const DRAFT_MAX: usize = 8;

impl Default for SpecSettings {
    fn default() -> Self {
        SpecSettings {
            lookup: 0,
            self_draft: 0,
            draft: None,
            draft_vocab: DraftVocab::Auto,
            draft_max: DRAFT_MAX,
            mode: SpecMode::Auto,
        }
    }
}

impl SpecSettings {
    /// Whether a source is named and speculation is not off.
    pub fn on(&self) -> bool {
        self.mode != SpecMode::Off
            && (self.lookup > 0 || self.self_draft > 0 || self.draft.is_some())
    }

    /// The most guesses a pass may check, and so the rows of logits it keeps, less one.
    pub fn max_guesses(&self) -> usize {
        match self.mode {
            SpecMode::Fixed(k) => k,
            _ => self.draft_max,
        }
        .min(MAX_BATCH - 1)
    }

    /// Rows of logits a run with these settings keeps: none when greedy without a repetition
    /// penalty (`plain_greedy`) and without a filter (`filter`: JSON mode), whose checks need
    /// only each row's greedy pick, computed as the output head is; otherwise the rows a pass
    /// checks at most. (0 when speculation is off.)
    pub fn rows_kept(&self, plain_greedy: bool, filter: bool) -> usize {
        match self.on() && (filter || !plain_greedy) {
            true => self.max_guesses() + 1,
            false => 0,
        }
    }

    /// The planner these settings ask for; `prior` stands for the pass costs until measured.
    pub fn planner(&self, prior: Option<PassCost>) -> Planner {
        match self.mode {
            SpecMode::Fixed(k) => Planner::fixed(k),
            _ => {
                let p = Planner::auto(self.max_guesses(), prior);
                // A self-draft alone starts from its own (low) odds; lookup and a draft model
                // from even ones.
                match self.lookup == 0 && self.draft.is_none() {
                    true => p.with_acceptance_prior(plan::SELF_DRAFT_ALPHA),
                    false => p,
                }
            }
        }
    }

    /// `speculate`'s value: `auto`, `off`, or K (1 to 63) guesses every pass.
    pub fn parse_mode(v: &str) -> Option<SpecMode> {
        match v {
            "auto" => Some(SpecMode::Auto),
            "off" => Some(SpecMode::Off),
            _ => match v.parse::<usize>() {
                Ok(0) => Some(SpecMode::Off),
                Ok(k) if k < MAX_BATCH => Some(SpecMode::Fixed(k)),
                _ => None,
            },
        }
    }

    /// A self-draft of `self.self_draft` layers fits a model of `n_layer` layers (fewer than
    /// all: the whole model is no draft).
    pub fn check_self_draft(&self, n_layer: usize) -> Result<(), alloc::string::String> {
        if self.self_draft >= n_layer {
            return Err(alloc::format!(
                "self_draft = {}: the model has {n_layer} layers (a draft of its first 1 to {})",
                self.self_draft,
                n_layer.saturating_sub(1)
            ));
        }
        Ok(())
    }
}

/// The file ranges a page cache of `capacity` bytes should pin first for a self-draft of
/// `layers` layers: the output head and those layers (read at every guess), then the other
/// layers, then the embedding (a row a token). `None` when the head alone does not fit: the
/// draft would stream it at every guess, and the plain order serves better.
pub fn self_draft_pins(
    model: &crate::model::Model,
    layers: usize,
    capacity: u64,
) -> Option<Vec<(u64, u64)>> {
    use crate::model::Part;
    if model.weights.output.size >= capacity {
        return None;
    }
    let n = model.config.n_layer;
    let part = |r: core::ops::Range<usize>| Part {
        layers: r,
        ends: false,
    };
    let w = &model.weights;
    let head = (w.output.offset, w.output.size);
    let embd = (w.token_embd.offset, w.token_embd.size);
    let mut seen = alloc::collections::BTreeSet::new();
    [head]
        .into_iter()
        .chain(w.read_order_of(&part(0..layers.min(n))))
        .chain(w.read_order_of(&part(layers.min(n)..n)))
        .chain([embd])
        .filter(|r| seen.insert(r.0))
        .collect::<Vec<_>>()
        .into()
}

/// Bytes of the output head and the first `layers` layers (what a self-draft reads at each
/// guess), and how many of them `src` does not hold resident (read from the card at each guess).
pub fn self_draft_bytes<S: Storage + ?Sized>(
    model: &crate::model::Model,
    layers: usize,
    src: &S,
) -> (u64, u64) {
    use crate::model::Part;
    let w = &model.weights;
    let part = Part {
        layers: 0..layers.min(model.config.n_layer),
        ends: false,
    };
    let mut seen = alloc::collections::BTreeSet::new();
    let (mut total, mut streamed) = (0u64, 0u64);
    for (offset, size) in [(w.output.offset, w.output.size)]
        .into_iter()
        .chain(w.read_order_of(&part))
    {
        if !seen.insert(offset) {
            continue;
        }
        total += size;
        let resident = usize::try_from(size)
            .ok()
            .and_then(|n| src.resident(offset, n));
        if resident.is_none() {
            streamed += size;
        }
    }
    (total, streamed)
}

/// A draft source and how much of it to check per pass, kept across generations (a chat's
/// turns): the planner's measurements and the counts carry over.
pub struct Speculation<'d> {
    pub draft: &'d mut dyn Draft,
    pub plan: Planner,
    /// Counts over every generation run with it.
    pub stats: SpecStats,
    /// The tokens at positions 0 on, as far as known: what the drafts see. A generation cuts
    /// it to the run state's position, adds the prompt and what it generates.
    pub context: Vec<u32>,
    /// The target's first layers as the last source (0: none): they guess in the target's own
    /// run state, whose K/V for those layers are the draft's too, so they cost no memory.
    pub self_draft: usize,
}

impl<'d> Speculation<'d> {
    pub fn new(draft: &'d mut dyn Draft, plan: Planner) -> Self {
        Speculation {
            draft,
            plan,
            stats: SpecStats::default(),
            context: Vec::new(),
            self_draft: 0,
        }
    }
}

impl core::fmt::Debug for Speculation<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Speculation")
            .field("plan", &self.plan)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
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
    /// Passes whose guesses branched (a tree, not a chain).
    pub branched: usize,
}

impl SpecStats {
    /// Tokens each pass gave: its own next token and the drafts accepted (1 without speculation).
    pub fn tokens_per_pass(&self) -> f32 {
        (self.passes + self.accepted) as f32 / self.passes.max(1) as f32
    }

    /// Share of the checked draft tokens taken (0 when none was checked).
    pub fn acceptance(&self) -> f32 {
        self.accepted as f32 / self.drafted.max(1) as f32
    }

    /// Add another generation's counts (a chat's turns).
    pub fn add(&mut self, o: &SpecStats) {
        self.passes += o.passes;
        self.drafted += o.drafted;
        self.accepted += o.accepted;
        self.branched += o.branched;
    }
}

impl core::fmt::Display for SpecStats {
    /// `2.31 tokens per target pass, 62% of 211 guesses taken (12 passes branched)` (the start
    /// of the `speculation:` line every runner prints; no parenthesis when none branched).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{:.2} tokens per target pass, {:.0}% of {} guesses taken",
            self.tokens_per_pass(),
            self.acceptance() * 100.0,
            self.drafted
        )?;
        match self.branched {
            0 => Ok(()),
            1 => write!(f, " (1 pass branched)"),
            n => write!(f, " ({n} passes branched)"),
        }
    }
}

impl<S: Storage + Sync + ?Sized, P: Parallel + ?Sized> Engine<'_, S, P> {
    /// [`Engine::generate_filtered`] with guesses from `spec`'s draft checked by the target, a
    /// round per pass, as many as its planner chooses: greedy, the same tokens, stop reason and
    /// final position as the plain loop; sampled, the same distribution. On a ring's head the
    /// checking pass goes round the ring and every row comes back. Greedy without a repetition
    /// penalty or a filter, on one board, keeps no rows of logits: the checking pass gives each
    /// row's greedy pick as the output head is computed ([`Model::forward_tree_best`]). Otherwise
    /// the logits of the rows a pass checks are kept ([`RunState::keep_row_logits`], grown to
    /// the largest pass checked, unless the caller kept rows: then at most that many tokens are
    /// checked per pass). Allocates the context once. Returns this generation's counts
    /// (`spec.stats` adds them up).
    ///
    /// [`Model::forward_tree_best`]: crate::model::Model::forward_tree_best
    pub fn generate_speculative(
        &self,
        st: &mut RunState,
        sampler: &mut Sampler,
        prompt: &[u32],
        max_tokens: usize,
        spec: &mut Speculation<'_>,
        is_end: &dyn Fn(u32) -> bool,
        clock: &dyn Fn() -> u64,
        filter: Option<&mut dyn LogitsFilter>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<(GenReport, SpecStats), GenError> {
        let (rep, t0, t1) = self.prefill(st, sampler, prompt, clock)?;
        let passes = prompt.len().div_ceil(st.batch().max(1));
        spec.plan.prompt(prompt.len(), passes, t1.wrapping_sub(t0));
        // The rows a pass may check: the batch, or the rows of logits the caller kept.
        let best = self.remote.is_none() && filter.is_none() && sampler.plain_greedy();
        let rows = match st.rows_kept() {
            0 => st.batch(),
            kept => kept,
        };
        let mut run = Round {
            best: best && st.rows_kept() == 0,
            rows,
            stops: Stops {
                max_tokens,
                is_end,
                clock,
                t0,
            },
            rep,
            stats: SpecStats::default(),
            context: core::mem::take(&mut spec.context),
            filter,
        };
        // What came before the prompt: the tokens the state holds, as far as the context kept
        // them (a state rolled back, or reset and refilled alike, keeps a prefix of them; one
        // filled with tokens never seen here leaves the drafts only the prompt).
        let before = st.pos - prompt.len();
        if run.context.len() < before {
            run.context.clear();
        }
        run.context.truncate(before);
        run.context.reserve(prompt.len() + max_tokens.min(st.ctx()));
        run.context.extend_from_slice(prompt);
        if max_tokens > 0 {
            let at = (st.pos, st.ctx());
            let (first, _, complete) = run.draw(self.pool, sampler, &mut st.logits, &[], at)?;
            self.rounds(&mut run, st, sampler, spec, (first, complete), on_token)?;
        }
        run.rep.stop.get_or_insert(StopReason::MaxTokens);
        run.rep.gen_time = clock().wrapping_sub(t1);
        spec.stats.add(&run.stats);
        // Only what the state holds: the last token taken was not fed.
        run.context.truncate(st.pos);
        spec.context = run.context;
        Ok((run.rep, run.stats))
    }

    /// Rounds until a stop, from the target's token `next` (drawn, not yet taken; `complete`
    /// when the filter said it completes the output): take it, ask for drafts, check them in one
    /// pass, take those the target agrees with, roll back the rest.
    fn rounds(
        &self,
        run: &mut Round<'_, '_>,
        st: &mut RunState,
        sampler: &mut Sampler,
        spec: &mut Speculation<'_>,
        mut next: (u32, bool),
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<(), GenError> {
        let vocab = self.model.config.vocab as u32;
        let clock = run.stops.clock;
        loop {
            let base = st.pos;
            if let Some(stop) = run.take(sampler, on_token, next, (base, st.ctx())) {
                run.rep.stop = Some(stop);
                return Ok(());
            }
            // Drafts that fit the batch and the context, and can still be generated.
            let room = (run.stops.max_tokens - run.rep.generated)
                .min(st.ctx() - base - 1)
                .min(run.rows.max(1) - 1)
                .min(vocab as usize - 1);
            let k = spec.plan.choose(room);
            let t0 = clock();
            let mut tree = Tree::new(next.0, 1 + k);
            if k > 0 {
                spec.draft.propose_tree(&run.context, &mut tree)?;
            }
            let own = self.remote.map_or(spec.self_draft, |r| {
                // A ring's head guesses only from the layers it holds.
                spec.self_draft.min(r.part().layers.end)
            });
            if tree.len() == 1 && k > 0 && own > 0 {
                self.guess_own(st, own, &mut tree)?;
            }
            // JSON mode: no guess past what the automaton takes after `next`.
            if let Some(f) = run.filter.as_deref() {
                tree.retain(|g| f.valid_prefix(g) == g.len());
            }
            // A draft model with a wider output than the target's may guess past its vocabulary.
            tree.retain(|g| g.last().is_some_and(|&t| t < vocab));
            let n = tree.len() - 1;
            let t1 = clock();
            spec.plan.drafted(n, t1.wrapping_sub(t0));
            if !run.best && st.rows_kept() < tree.len() {
                // Sized to the rows checked: grown to the largest pass.
                st.keep_row_logits(self.model, tree.len())?;
            }
            self.pass_rows(st, &tree, run.best)?;
            self.forwarded(tree.len());
            spec.plan.pass(tree.len(), clock().wrapping_sub(t1));
            run.stats.passes += 1;
            run.stats.drafted += n;
            run.stats.branched += usize::from(!tree.is_chain());
            let before = run.stats.accepted;
            let checked = self.check(run, st, sampler, on_token, base, &tree)?;
            if n > 0 {
                let refused = matches!(checked, Checked::Next(_, _, true));
                spec.plan.checked(run.stats.accepted - before, refused);
            }
            match checked {
                Checked::Next(t, complete, _) => next = (t, complete),
                Checked::Stop(stop) => {
                    run.rep.stop = Some(stop);
                    return Ok(());
                }
            }
        }
    }

    /// A self-draft: guesses below `tree`'s root (drawn, not yet fed) from the first `layers`
    /// layers and the output head, run in `st` itself at the next positions and rolled back: its
    /// greedy chain and runner-ups as [`Growth`] picks them. The K/V those layers keep for the
    /// context are the ones the draft needs (the same weights on the same tokens), and the
    /// checking pass that follows rewrites the positions guessed over, so the target's state
    /// ends as it would without the draft.
    fn guess_own(&self, st: &mut RunState, layers: usize, tree: &mut Tree) -> Result<(), GenError> {
        let (base, vocab) = (st.pos, self.model.config.vocab);
        let run = (self.src, self.pool, &self.kernels);
        let mut grow = Growth::new(tree.room());
        let mut tok = Some(tree.tokens()[0]);
        while let Some(t) = tok {
            self.model.forward_layers(st, run, &[t], layers, true)?;
            self.forwarded_layers(1, layers);
            tok = grow.step(&st.logits[..vocab]);
        }
        st.rollback(base)?;
        grow.plant(tree);
        Ok(())
    }

    /// Walk the checked tree from its root at position `base`: at each row, draw the target's
    /// token and follow the child that guessed it, taking each; then keep that path (the last
    /// token taken is not fed).
    fn check(
        &self,
        run: &mut Round<'_, '_>,
        st: &mut RunState,
        sampler: &mut Sampler,
        on_token: &mut dyn FnMut(u32) -> bool,
        base: usize,
        tree: &Tree,
    ) -> Result<Checked, GenError> {
        let (vocab, ctx) = (self.model.config.vocab, st.ctx());
        let mut path = [0u8; MAX_BATCH];
        let mut a = 0;
        let next = loop {
            let row = path[a] as usize;
            let mut kids = [0u32; MAX_BATCH];
            let mut rows = [0usize; MAX_BATCH];
            let mut m = 0;
            for c in tree.children(row) {
                (kids[m], rows[m]) = (tree.tokens()[c], c);
                m += 1;
            }
            // The token drawn here goes to position base + a + 1.
            let at = (base + a + 1, ctx);
            let (t, kept, complete) = if run.best {
                // Greedy's pick, the row's logits never kept whole.
                let t = st.row_best(row).ok_or(ModelError::NoRowLogits)??;
                (t, kids[..m].iter().position(|&k| k == t), false)
            } else {
                let logits = st
                    .row_logits_mut(row, vocab)
                    .ok_or(ModelError::NoRowLogits)?;
                run.draw(self.pool, sampler, logits, &kids[..m], at)?
            };
            let Some(c) = kept else {
                break (t, complete, m > 0);
            };
            a += 1;
            path[a] = rows[c] as u8;
            run.stats.accepted += 1;
            // The guess sits at position base + a; the plain loop would be there, not past it.
            if let Some(stop) = run.take(sampler, on_token, (t, complete), (base + a, ctx)) {
                self.keep(st, base, &path[..a], tree)?;
                return Ok(Checked::Stop(stop));
            }
        };
        self.keep(st, base, &path[..=a], tree)?;
        Ok(Checked::Next(next.0, next.1, next.2))
    }

    /// Keep the path `rows` of the tree checked at `base` (on the ring's boards too).
    fn keep(
        &self,
        st: &mut RunState,
        base: usize,
        rows: &[u8],
        tree: &Tree,
    ) -> Result<(), GenError> {
        st.keep_path(base, rows)?;
        if let Some(r) = self.remote.filter(|_| !tree.is_chain()) {
            r.keep(base, rows);
        }
        Ok(())
    }
}

/// What a checked pass gave.
enum Checked {
    /// The target's own next token (drawn, not yet taken), whether it completes the output, and
    /// whether it refused guesses (the walk stopped at a row with children).
    Next(u32, bool, bool),
    /// Generation stops (the state at the last token taken, not fed).
    Stop(StopReason),
}

/// The state of a speculative generation across its rounds.
struct Round<'f, 'g> {
    stops: Stops<'f>,
    rep: GenReport,
    stats: SpecStats,
    /// The prompt and the tokens taken so far, for the draft source.
    context: Vec<u32>,
    filter: Option<&'g mut dyn LogitsFilter>,
    /// Check each row's greedy pick ([`RunState::row_best`]), not its logits.
    best: bool,
    /// Most rows a pass may check.
    rows: usize,
}

impl Round<'_, '_> {
    /// [`Stops::draw`] with this generation's filter and count.
    fn draw<P: Parallel + ?Sized>(
        &mut self,
        pool: &P,
        sampler: &mut Sampler,
        logits: &mut [f32],
        drafts: &[u32],
        (pos, ctx): (usize, usize),
    ) -> Result<(u32, Option<usize>, bool), GenError> {
        let filter = self.filter.as_deref_mut();
        let at = (pos, ctx);
        Ok(self
            .stops
            .draw(pool, sampler, logits, drafts, &self.rep, filter, at)?)
    }

    /// [`Stops::take`], keeping the token in the context unless generation stops.
    fn take(
        &mut self,
        sampler: &mut Sampler,
        on_token: &mut dyn FnMut(u32) -> bool,
        (tok, complete): (u32, bool),
        at: (usize, usize),
    ) -> Option<StopReason> {
        let stop = self
            .stops
            .take(&mut self.rep, sampler, on_token, tok, complete, at);
        if stop.is_none() {
            self.context.push(tok);
        }
        stop
    }
}
