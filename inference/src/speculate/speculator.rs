//! The sources a [`SpecSettings`] names, kept across generations (a chat's turns): lookup, a
//! draft model, a self-draft, asked in that order, and the planner that measures what pays.

use super::{Draft, Drafts, Lookup, PassCost, Planner, SpecSettings, SpecStats, Speculation};
use crate::generate::{Engine, GenError};
use crate::model::RunState;
use crate::parallel::Parallel;
use crate::sample::sampler::Sampler;
use crate::sample::stop::{GenReport, LogitsFilter};
use crate::storage::Storage;
use alloc::boxed::Box;
use alloc::vec::Vec;

/// Speculative generation as configured: the sources, the planner, the counts so far.
pub struct Speculator<'a> {
    lookup: Option<Lookup>,
    /// A draft model (its storage may be another file's: hence behind `dyn`).
    model: Option<Box<dyn Draft + 'a>>,
    /// Layers of the target that guess last (0: none).
    self_draft: usize,
    plan: Planner,
    /// The tokens at positions 0 on, as far as known ([`Speculation::context`]).
    context: Vec<u32>,
    /// Counts over every generation so far.
    pub stats: SpecStats,
}

impl<'a> Speculator<'a> {
    /// The sources `s` names: lookup and the self-draft from its settings, the draft model as
    /// made by the caller (it needs storage and memory the caller owns); `prior` stands for the
    /// pass costs until they are measured.
    pub fn new(
        s: &SpecSettings,
        model: Option<Box<dyn Draft + 'a>>,
        prior: Option<PassCost>,
    ) -> Self {
        Speculator {
            lookup: (s.lookup > 0).then_some(Lookup {
                max_n: s.lookup,
                max_draft: s.max_guesses(),
            }),
            model,
            self_draft: s.self_draft,
            plan: s.planner(prior),
            context: Vec::new(),
            stats: SpecStats::default(),
        }
    }

    /// `t` stands for a guess's time until drafting has been timed ([`Planner::with_draft_prior`]:
    /// e.g. a self-draft's layers and head, their card time where they are not resident).
    pub fn with_draft_prior(mut self, t: f64) -> Self {
        self.plan = self.plan.clone().with_draft_prior(t);
        self
    }

    /// The run state now holds `tokens` at positions 0 on (e.g. a chat's system piece, fed or
    /// restored before the first turn): the drafts see them too.
    pub fn set_context(&mut self, tokens: &[u32]) {
        self.context.clear();
        self.context.extend_from_slice(tokens);
    }

    /// The planner (its measurements so far).
    pub fn plan(&self) -> &Planner {
        &self.plan
    }

    /// [`Engine::generate_speculative`] with these sources; this generation's counts.
    pub fn generate<S: Storage + Sync + ?Sized, P: Parallel + ?Sized>(
        &mut self,
        engine: &Engine<'_, S, P>,
        st: &mut RunState,
        sampler: &mut Sampler,
        (prompt, max_tokens): (&[u32], usize),
        (is_end, clock): (&dyn Fn(u32) -> bool, &dyn Fn() -> u64),
        filter: Option<&mut dyn LogitsFilter>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<(GenReport, SpecStats), GenError> {
        let mut sources: Vec<Box<dyn Draft + '_>> = Vec::with_capacity(3);
        if let Some(l) = self.lookup.as_mut() {
            sources.push(Box::new(l));
        }
        if let Some(m) = self.model.as_mut() {
            sources.push(Box::new(&mut **m));
        }
        let mut all = Drafts(sources);
        let plan = core::mem::replace(&mut self.plan, Planner::fixed(0));
        let mut spec = Speculation::new(&mut all, plan);
        spec.context = core::mem::take(&mut self.context);
        spec.self_draft = self.self_draft;
        let r = engine.generate_speculative(
            st, sampler, prompt, max_tokens, &mut spec, is_end, clock, filter, on_token,
        );
        self.plan = spec.plan;
        self.context = spec.context;
        let (rep, stats) = r?;
        self.stats.add(&stats);
        Ok((rep, stats))
    }
}

impl core::fmt::Debug for Speculator<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Speculator")
            .field("lookup", &self.lookup)
            .field("model", &self.model.is_some())
            .field("self_draft", &self.self_draft)
            .field("plan", &self.plan)
            .field("stats", &self.stats)
            .finish()
    }
}
