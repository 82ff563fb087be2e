//! Speculative decoding on the board (`lookup`, `self_draft`, `draft`, `draft_vocab`,
//! `speculate` in `lmboot.txt`): the draft model, held as the board simulator holds it (its
//! layers and its output head, cut to `draft_vocab`'s rows, copied to RAM before the page cache
//! is sized; its token embedding left on the card and read a row a token through the block
//! device the page cache owns) and checked to share the target's vocabulary; the memory
//! speculation takes, counted and allocated with the run's other buffers; and the
//! [`Speculator`] that generate mode and chat run with.

use super::{Opened, RunError};
use crate::card::Direct;
use crate::config::Config;
use crate::console::Out;
use crate::pagecache::order::PinScope;
use crate::pagecache::{DynDev, FileSource, PageCache};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};
use drivers::block::WriteBlocks;
use drivers::fat::File;
use inference::fit::Size;
use inference::generate::{GenError, Remote};
use inference::model::{Model, Part, RunState};
use inference::parallel::Parallel;
use inference::speculate::resident::{self, DraftPlan, DraftStore, Runs};
use inference::speculate::{
    draft_model_pays, draft_state, same_vocabulary, Draft, DraftShape, HeadCut, ModelDraft,
    PassCost, SpecMode, Speculator,
};
use inference::storage::check_range;
use inference::tokenizer::Tokenizer;
use inference::{Gguf, Kernels, Storage, StorageError};

/// A draft model on the card: its path, its file and its header's model (what it holds in RAM
/// is a [`DraftHeld`]).
#[derive(Debug)]
pub struct DraftModel {
    pub path: String,
    pub file: File,
    pub model: Model,
}

/// What a draft model holds in RAM: its layers' matrices and its output head's rows.
#[derive(Debug)]
pub struct DraftHeld {
    pub runs: Runs,
    pub cut: HeadCut,
}

/// The run's shape: context positions, workers, prompt tokens per pass.
pub(super) type Shape = (usize, usize, usize);

/// A file on the card read in place through the target's device (the draft's header,
/// vocabulary, layers and head, before the page cache owns the device).
struct OnCard<'a, D: WriteBlocks + Send>(&'a File, &'a Direct<D>);

impl<D: WriteBlocks + Send> Storage for OnCard<'_, D> {
    fn len(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        check_range(offset, buf.len() as u64, self.len())?;
        let mut card = self.1 .0.lock();
        self.0
            .read_at(&mut card.dev, offset, buf)
            .map_err(|e| StorageError::Io {
                offset,
                len: buf.len() as u64,
                detail: e.to_string(),
            })
    }
}

/// The draft's file on the card once the page cache owns the device: read through it
/// ([`PageCache::with_device`], as the prompt cache reads its file). What a [`DraftStore`] does
/// not hold comes from here: a token embedding row a token fed, a head row a new context token.
pub(crate) struct OnDevice<'c, F: FileSource> {
    cache: &'c PageCache<F>,
    file: &'c File,
    path: &'c str,
}

impl<F: FileSource + Send> Storage for OnDevice<'_, F> {
    fn len(&self) -> u64 {
        self.file.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        check_range(offset, buf.len() as u64, self.len())?;
        let len = buf.len() as u64;
        let mut r = None;
        self.cache
            .with_device(&mut |d| r = Some(self.file.read_at(&mut DynDev(d), offset, buf)));
        let detail = match r {
            Some(Ok(())) => return Ok(()),
            Some(Err(e)) => format!("{}: {e}", self.path),
            None => format!("{}: no block device to read it through", self.path),
        };
        Err(StorageError::Io {
            offset,
            len,
            detail,
        })
    }
}

/// `head 4096 of 49152 tokens (2.8 MiB)`: what a head of `rows` lowest ids holds.
struct Head {
    rows: usize,
    vocab: usize,
    bytes: u64,
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = Size(self.bytes);
        match self.rows >= self.vocab {
            true => write!(f, "the whole head ({} tokens, {b})", self.vocab),
            false => write!(f, "head {} of {} tokens ({b})", self.rows, self.vocab),
        }
    }
}

/// The heap left for a draft model and the page cache: `free` less the target's buffers for
/// `shape` (and speculation's rows of logits) and [`super::HEAP_MARGIN`].
pub(super) fn room(cfg: &Config, model: &Model, shape: Shape, free: u64) -> Result<u64, RunError> {
    let (ctx, workers, batch) = shape;
    let whole = Part::whole(model.config.n_layer);
    let (kv, bufs) =
        RunState::size_of(model, ctx, workers, batch, &whole).map_err(RunError::Buffers)?;
    let spec = bytes(cfg, (model, None), shape)?;
    let taken = kv.saturating_add(bufs).saturating_add(spec);
    Ok(free.saturating_sub(taken.saturating_add(super::HEAP_MARGIN)))
}

/// Open the draft file at `path` through `direct`'s device, check its vocabulary against the
/// target `m`'s, and copy in what it holds ([`DraftPlan`], with `heap` bytes left for it and the
/// page cache: [`room`]). Prints a line naming it. `None`: left on the card, as not worth its
/// RAM ([`draft_model_pays`]).
pub(super) fn load<D: WriteBlocks + Send>(
    direct: &Direct<D>,
    (path, file): (String, File),
    (cfg, m): (&Config, &Opened),
    (clock_ns, heap, shape): (fn() -> u64, u64, Shape),
    out: &mut Out<'_>,
) -> Result<Option<(DraftModel, DraftHeld)>, RunError> {
    let what = |e: &dyn fmt::Display| RunError::Speculation(format!("draft = {path}: {e}"));
    // The vocabulary first, read in place: a wrong file fails before anything is loaded.
    let in_place = OnCard(&file, direct);
    let g = Gguf::open(&in_place).map_err(|e| what(&e))?;
    let tok = Tokenizer::from_gguf(&g, &in_place).map_err(|e| what(&e))?;
    same_vocabulary(&m.tok, &tok).map_err(|e| what(&e))?;
    drop(tok);
    let model = Model::load(&g, &in_place).map_err(|e| what(&e))?;
    let (ctx, workers, batch) = shape;
    let whole = Part::whole(model.config.n_layer);
    let (kv, bufs) =
        RunState::size_of(&model, ctx, workers, batch, &whole).map_err(|e| what(&e))?;
    let plan = DraftPlan::new(&model, cfg.spec.draft_vocab, heap, kv + bufs, ctx);
    let head = Head {
        rows: plan.rows,
        vocab: model.config.vocab,
        bytes: plan.head,
    };
    // Room to spare: the draft must not take what the target's buffers need.
    if plan.bytes() > heap {
        return Err(what(&format_args!(
            "its layers {}, {head} and run state {} do not fit in the {} of heap left beside the model's buffers",
            Size(plan.layers),
            Size(plan.state),
            Size(heap)
        )));
    }
    // With speculate = auto, a draft whose bytes would cost the target more card reads per token
    // than its guesses could save stays on the card.
    let (without, with) = plan.streamed(heap, m.gguf_len);
    let max = cfg.spec.max_guesses();
    if cfg.spec.mode == SpecMode::Auto && !draft_model_pays(without, with, max) {
        let _ = writeln!(
            out,
            "draft: {path} not loaded: its layers {}, {head} and run state {} would leave the model {} MB to read from the card a pass instead of {} MB, more than its guesses could save (speculate = {max} loads it anyway)",
            Size(plan.layers),
            Size(plan.state),
            with / 1_000_000,
            without / 1_000_000,
        );
        return Ok(None);
    }
    let t0 = clock_ns();
    let runs = resident::load_runs(&model, &in_place).map_err(|e| what(&e))?;
    let cut = HeadCut::new(&model, &in_place, plan.rows, plan.extra).map_err(|e| what(&e))?;
    let ms = (clock_ns() - t0) / 1_000_000;
    let _ = writeln!(
        out,
        "draft: {path}, {}, layers {} and {head} resident (read in {ms} ms), token embedding on the card (a row a token)",
        super::summary(&g, &model),
        Size(plan.layers),
    );
    let held = DraftHeld { runs, cut };
    Ok(Some((DraftModel { path, file, model }, held)))
}

/// What speculation needs beyond the target's run state, made by [`buffers`]: the draft model,
/// what it holds and its run state (a self-draft runs in the target's). Once the page cache is
/// up, [`SpecBuffers::store`] and [`SpecBuffers::parts`] make the [`SpecParts`] a speculator
/// takes.
#[derive(Debug, Default)]
pub(crate) struct SpecBuffers<'a> {
    pub model: Option<(&'a DraftModel, DraftHeld, RunState)>,
}

impl<'a> SpecBuffers<'a> {
    /// The draft's storage: its layers (taken from here) in RAM, the rest of its file read
    /// through `cache`'s device.
    pub(crate) fn store<'c, F: FileSource + Send>(
        &mut self,
        cache: &'c PageCache<F>,
    ) -> Option<DraftStore<OnDevice<'c, F>>>
    where
        'a: 'c,
    {
        let (d, held, _) = self.model.as_mut()?;
        let d: &'a DraftModel = d;
        let back = OnDevice {
            cache,
            file: &d.file,
            path: &d.path,
        };
        Some(DraftStore::new(core::mem::take(&mut held.runs), back))
    }

    /// What a speculator takes, the draft read from `store` (what [`SpecBuffers::store`] made).
    pub(crate) fn parts<'s>(self, store: Option<&'s (dyn Storage + Sync)>) -> SpecParts<'s>
    where
        'a: 's,
    {
        let model = self
            .model
            .zip(store)
            .map(|((d, held, st), store)| DraftRun {
                model: &d.model,
                store,
                cut: held.cut,
                st,
            });
        SpecParts { model }
    }
}

/// What a speculator takes beyond the target's run state: the draft model ready to run.
#[derive(Default)]
pub(crate) struct SpecParts<'a> {
    pub model: Option<DraftRun<'a>>,
}

/// A draft model ready to run: its weights as [`SpecBuffers::store`] serves them, its head's
/// rows, its run state.
pub(crate) struct DraftRun<'a> {
    model: &'a Model,
    store: &'a (dyn Storage + Sync),
    cut: HeadCut,
    st: RunState,
}
/// Rows of logits a check keeps ([`inference::speculate::SpecSettings::rows_kept`]): none for
/// greedy without a repetition penalty or JSON mode (each row's greedy pick is computed as the
/// output head is), so that memory stays the page cache's; in chat, where `/json` may come, the
/// rows a pass checks.
fn rows(cfg: &Config) -> usize {
    cfg.spec
        .rows_kept(cfg.sampler.plain_greedy(), cfg.json || cfg.chats())
}

/// Bytes speculation adds (`cfg.spec`) beyond what a draft model holds ([`DraftHeld`]): the logits of the
/// rows a pass checks when the check needs them ([`rows`]) and the draft model's KV cache and
/// buffers (a self-draft uses the target's); 0 when it is off. A self-draft as deep as the
/// model is refused.
pub(super) fn bytes(
    cfg: &Config,
    (model, draft): (&Model, Option<&Model>),
    (ctx, workers, batch): (usize, usize, usize),
) -> Result<u64, RunError> {
    let s = &cfg.spec;
    if !s.on() {
        return Ok(0);
    }
    s.check_self_draft(model.config.n_layer)
        .map_err(RunError::Speculation)?;
    let mut total = match rows(cfg) {
        0 => 0,
        rows => RunState::row_logits_bytes(model, rows),
    };
    if let Some(d) = draft {
        let whole = Part::whole(d.config.n_layer);
        let (kv, bufs) =
            RunState::size_of(d, ctx, workers, batch, &whole).map_err(RunError::Buffers)?;
        total = total.saturating_add(kv).saturating_add(bufs);
    }
    Ok(total)
}

/// Allocate what [`bytes`] counted: the rows of logits in `st`, and the drafts' run states.
/// Returns them with what the draft holds, and a note for the memory line.
pub(super) fn buffers<'a>(
    cfg: &Config,
    (model, draft): (&Model, Option<(&'a DraftModel, DraftHeld)>),
    st: &mut RunState,
    (ctx, workers, batch): Shape,
) -> Result<(SpecBuffers<'a>, String), RunError> {
    let s = &cfg.spec;
    if !s.on() {
        return Ok((SpecBuffers::default(), String::new()));
    }
    let mut note = match rows(cfg) {
        0 => String::from(", speculation (greedy: no rows of logits kept"),
        rows => {
            st.keep_row_logits(model, rows).map_err(RunError::Buffers)?;
            format!(
                ", speculation {} KiB (logits of {rows} rows",
                RunState::row_logits_bytes(model, rows) >> 10
            )
        }
    };
    let shape = DraftShape {
        ctx,
        batch,
        max_draft: s.max_guesses(),
    };
    let kib = |st: &RunState| (st.bytes().0 + st.bytes().1) >> 10;
    if s.self_draft > 0 {
        note.push_str(&format!(
            ", the first {} layers guess in the target's own KV cache",
            s.self_draft
        ));
    }
    let model = match draft {
        Some((d, held)) => {
            let st = draft_state(&d.model, shape, workers).map_err(RunError::Buffers)?;
            let layers: u64 = held.runs.iter().map(|r| r.1.len() as u64).sum();
            note.push_str(&format!(
                ", the draft model's layers {} and head {} ({} of {} tokens) and its KV cache and buffers {} KiB",
                Size(layers),
                Size(held.cut.bytes()),
                held.cut.lowest(),
                d.model.config.vocab,
                kib(&st)
            ));
            Some((d, held, st))
        }
        None => None,
    };
    note.push(')');
    Ok((SpecBuffers { model }, note))
}

/// The speculation `cfg` names (`None`: off), in the run states [`buffers`] made (a ring's head
/// has none: it drafts by lookup and from the layers it holds); `prior` stands for the pass costs
/// until the planner has measured them.
pub(crate) fn speculator<'a, P: Parallel + ?Sized>(
    cfg: &Config,
    remote: Option<&dyn Remote>,
    (pool, kernels): (&'a P, Kernels),
    parts: SpecParts<'a>,
    prior: Option<PassCost>,
) -> Result<Option<Speculator<'a>>, GenError> {
    let s = &cfg.spec;
    if !s.on() {
        return Ok(None);
    }
    let _ = remote;
    let max = s.max_guesses();
    let other = match parts.model {
        Some(d) => {
            let layers = d.model.config.n_layer;
            let m = ModelDraft::with_state(d.model, d.store, pool, kernels, (layers, max), d.st)?;
            Some(Box::new(m.with_cut(d.cut)) as Box<dyn Draft + 'a>)
        }
        None => None,
    };
    Ok(Some(Speculator::new(s, other, prior)))
}

/// What a board running `part` of `model` pins ([`PinScope`]): its tensors by card bytes saved
/// per byte of RAM, the self-draft's layers and the output head first when speculation has a
/// self-draft (a ring's head: within its own layers).
pub(super) fn pin_scope<'a>(cfg: &Config, model: &'a Model, part: &'a Part) -> PinScope<'a> {
    let own = if cfg.spec.on() {
        cfg.spec.self_draft
    } else {
        0
    };
    PinScope {
        model,
        part,
        self_draft: own,
    }
}

/// The file ranges a page cache pins, most valuable first ([`PinScope::ranges`]); a board alone
/// (`file`: the file's length) then the rest of its file.
pub(super) fn pin_order(
    cfg: &Config,
    (model, part): (&Model, &Part),
    file: Option<u64>,
) -> Result<Vec<(u64, u64)>, RunError> {
    pin_scope(cfg, model, part)
        .ranges(file)
        .map_err(RunError::OutOfMemory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pagecache::tests::pin_order::model;
    use inference::speculate::DraftVocab;

    /// The draft's share of the heap, counted as the board simulator counts it: its layers, its
    /// run state and its head's rows, with room for the context's tokens when the head is cut.
    #[test]
    fn a_draft_plan_counts_layers_head_and_state() {
        let (m, _, _) = model(4, true, 0);
        let (layers, rb, vocab) = (
            resident::layer_bytes(&m),
            m.weights.output.row_bytes(),
            m.config.vocab,
        );
        let all = DraftPlan::new(&m, DraftVocab::All, 0, 10, 64);
        assert_eq!((all.rows, all.extra, all.layers), (vocab, 0, layers));
        assert_eq!(all.bytes(), layers + 10 + HeadCut::bytes_for(&m, vocab, 0));
        let cut = DraftPlan::new(&m, DraftVocab::Lowest(256), 0, 10, 64);
        assert_eq!((cut.rows, cut.extra), (256, 64));
        assert_eq!(cut.head, HeadCut::bytes_for(&m, 256, 64));
        // `auto`: the whole head when it fits in its share of the room left, else a cut.
        let share = inference::speculate::AUTO_SHARE;
        let fits = layers + 10 + share * rb * vocab as u64;
        let auto = |heap| DraftPlan::new(&m, DraftVocab::Auto, heap, 10, 64);
        assert_eq!((auto(fits).rows, auto(fits).extra), (vocab, 0));
        assert_eq!((auto(fits - 1).rows, auto(fits - 1).extra), (256, 64));
    }

    /// What a pass reads from the card with and without the draft: the model less the page
    /// cache, which gets the heap the draft leaves.
    #[test]
    fn a_draft_plan_says_what_a_pass_streams() {
        let (m, _, _) = model(2, false, 0);
        let p = DraftPlan::new(&m, DraftVocab::All, 0, 0, 64);
        let b = p.bytes();
        let len = 10 * b;
        assert_eq!(p.streamed(b + 100, len), (len - b - 100, len - 100));
        assert_eq!(p.streamed(b + len, len), (0, 0));
        assert_eq!(p.streamed(b / 2, len), (len - b / 2, len));
    }
}
