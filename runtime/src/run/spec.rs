//! Speculative decoding on the board (`lookup`, `self_draft`, `draft`, `speculate` in
//! `lmboot.txt`): the draft model, read whole into RAM before the page cache is sized (it is read
//! at every guess, so it stays resident, with its own share of memory) and checked to share the
//! target's vocabulary; the memory speculation takes, counted and allocated with the run's other
//! buffers; and the [`Speculator`] that generate mode and chat run with.

use super::{Opened, RunError};
use crate::card::Direct;
use crate::config::Config;
use crate::console::Out;
use crate::pagecache::order::PinScope;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use drivers::block::WriteBlocks;
use drivers::fat::File;
use inference::generate::{GenError, Remote};
use inference::model::{Model, Part, RunState};
use inference::parallel::Parallel;
use inference::speculate::{
    draft_model_pays, draft_state, same_vocabulary, Draft, DraftShape, ModelDraft, PassCost,
    Speculator,
};
use inference::tokenizer::Tokenizer;
use inference::{Gguf, Kernels, Storage, StorageError};

/// A draft model in RAM.
#[derive(Debug)]
pub struct DraftModel {
    /// The file, whole (the model reads its weights from here).
    pub bytes: Vec<u8>,
    pub model: Model,
}

/// Bytes read per device call while loading the draft.
const CHUNK: usize = 8 << 20;

/// A file on the card read in place through the target's device (the draft's header and
/// vocabulary, before it is loaded).
struct OnCard<'a, D: WriteBlocks + Send>(&'a File, &'a Direct<D>);

impl<D: WriteBlocks + Send> Storage for OnCard<'_, D> {
    fn len(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        inference::storage::check_range(offset, buf.len() as u64, self.len())?;
        let mut card = self.1 .0.lock();
        self.0
            .read_at(&mut card.dev, offset, buf)
            .map_err(|e| StorageError::Io {
                offset,
                len: buf.len() as u64,
                detail: alloc::string::ToString::to_string(&e),
            })
    }
}

/// Read the draft file at `path` through `direct`'s device, open it and check its vocabulary
/// against the target `m`'s. Prints a line naming it. `None`: left on the card, as not worth
/// its RAM ([`draft_model_pays`]).
pub(super) fn load<D: WriteBlocks + Send>(
    direct: &Direct<D>,
    (path, file): &(String, File),
    (cfg, m): (&Config, &Opened),
    (clock_ns, heap_free): (fn() -> u64, &dyn Fn() -> u64),
    out: &mut Out<'_>,
) -> Result<Option<DraftModel>, RunError> {
    let what = |e: &dyn core::fmt::Display| RunError::Speculation(format!("draft = {path}: {e}"));
    let size = file.size();
    // The file and room to spare: the draft must not take what the target's buffers need.
    if size.saturating_add(super::HEAP_MARGIN) > heap_free() {
        let free = inference::fit::Size(heap_free());
        return Err(what(&format_args!(
            "{} does not fit in the {free} of heap free",
            inference::fit::Size(size)
        )));
    }
    // The vocabulary first, read in place: a wrong file fails before it is loaded.
    let in_place = OnCard(file, direct);
    let g = Gguf::open(&in_place).map_err(|e| what(&e))?;
    let tok = Tokenizer::from_gguf(&g, &in_place).map_err(|e| what(&e))?;
    same_vocabulary(&m.tok, &tok).map_err(|e| what(&e))?;
    drop(tok);
    // With speculate = auto, a draft whose bytes would cost the target more card reads per token
    // than its guesses could save stays on the card.
    let room = heap_free().saturating_sub(super::HEAP_MARGIN);
    let (without, with) = (
        m.gguf_len.saturating_sub(room),
        m.gguf_len
            .saturating_sub(room.saturating_sub(size + size / 8)),
    );
    let auto = cfg.spec.mode == inference::speculate::SpecMode::Auto;
    if auto && !draft_model_pays(without, with, cfg.spec.max_guesses()) {
        let _ = writeln!(
            out,
            "draft: {path} not loaded: its {} MiB would leave the model {} MB to read from the card a pass instead of {} MB, more than its guesses could save (speculate = {} loads it anyway)",
            size >> 20,
            with / 1_000_000,
            without / 1_000_000,
            cfg.spec.max_guesses()
        );
        return Ok(None);
    }
    let t0 = clock_ns();
    let mut bytes = alloc::vec![0u8; size as usize];
    for (i, chunk) in bytes.chunks_mut(CHUNK).enumerate() {
        in_place
            .read_at((i * CHUNK) as u64, chunk)
            .map_err(|e| what(&e))?;
    }
    let ms = (clock_ns() - t0) / 1_000_000;
    let model = Model::load(&g, &bytes).map_err(|e| what(&e))?;
    let _ = writeln!(
        out,
        "draft: {path}, {}, {} MiB read in {ms} ms, resident",
        super::summary(&g, &model),
        size >> 20
    );
    Ok(Some(DraftModel { bytes, model }))
}

/// What speculation needs beyond the target's run state, made by [`buffers`]: the draft model
/// and its run state (a self-draft runs in the target's).
#[derive(Debug, Default)]
pub(crate) struct SpecParts<'a> {
    pub model: Option<(&'a DraftModel, RunState)>,
}

/// Rows of logits a check keeps ([`inference::speculate::SpecSettings::rows_kept`]): none for
/// greedy without a repetition penalty or JSON mode (each row's greedy pick is computed as the
/// output head is), so that memory stays the page cache's; in chat, where `/json` may come, the
/// rows a pass checks.
fn rows(cfg: &Config) -> usize {
    let chat = cfg.mode == crate::config::Mode::Chat
        || (cfg.mode == crate::config::Mode::Auto && cfg.prompt.is_none());
    cfg.spec
        .rows_kept(cfg.sampler.plain_greedy(), cfg.json || chat)
}

/// Bytes speculation adds (`cfg.spec`) beyond a resident draft model's file: the logits of the
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
/// Returns them and a note for the memory line.
pub(super) fn buffers<'a>(
    cfg: &Config,
    (model, draft): (&Model, Option<&'a DraftModel>),
    st: &mut RunState,
    (ctx, workers, batch): (usize, usize, usize),
) -> Result<(SpecParts<'a>, String), RunError> {
    let s = &cfg.spec;
    if !s.on() {
        return Ok((SpecParts::default(), String::new()));
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
        Some(d) => {
            let st = draft_state(&d.model, shape, workers).map_err(RunError::Buffers)?;
            note.push_str(&format!(
                ", the draft model {} MiB and its KV cache and buffers {} KiB",
                d.bytes.len() >> 20,
                kib(&st)
            ));
            Some((d, st))
        }
        None => None,
    };
    note.push(')');
    Ok((SpecParts { model }, note))
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
        Some((d, st)) => {
            let layers = d.model.config.n_layer;
            let m = ModelDraft::with_state(&d.model, &d.bytes, pool, kernels, (layers, max), st)?;
            Some(Box::new(m) as Box<dyn Draft + 'a>)
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
