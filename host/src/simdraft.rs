//! The draft model as a board holds it, for `--board-sim`: its layers in RAM, its output head cut
//! to the rows `draft_vocab` keeps (a [`HeadCut`]), its token embedding left on the card and read
//! a row a token, those reads counted with the card's.

use crate::spec::DraftFile;
use crate::MmapStorage;
use inference::model::{Model, Part, RunState};
use inference::parallel::SingleThread;
use inference::speculate::resident::{self, DraftPlan, DraftStore};
use inference::speculate::{DraftShape, HeadCut, ModelDraft, SpecSettings};
use inference::{Kernels, Storage, StorageError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A file whose bytes read are counted as the card counts them: whole 512-byte blocks.
pub struct Counted<'a> {
    inner: &'a MmapStorage,
    read: Arc<AtomicU64>,
}

impl Storage for Counted<'_> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        let end = offset + buf.len() as u64;
        let blocks = end.div_ceil(512) - offset / 512;
        self.read.fetch_add(blocks * 512, Ordering::Relaxed);
        self.inner.read_at(offset, buf)
    }
}

/// What the draft takes of `heap` (what it and the target's page cache share), as the kernel
/// counts it ([`DraftPlan`]); `state` is its run state's size.
pub fn plan(d: &DraftFile, s: &SpecSettings, heap: u64, state: u64, ctx: usize) -> DraftPlan {
    DraftPlan::new(&d.model, s.draft_vocab, heap, state, ctx)
}

/// The draft's run state's bytes.
pub fn state_bytes(m: &Model, ctx: usize, batch: usize) -> u64 {
    let whole = Part::whole(m.config.n_layer);
    RunState::size_of(m, ctx, 1, batch, &whole).map_or(0, |(k, b)| k + b)
}

/// A draft model held as a board holds it.
pub struct SimDraft<'a> {
    pub model: &'a Model,
    pub store: DraftStore<Counted<'a>>,
    pub rows: usize,
    /// Room for the context's tokens in the cut.
    pub extra: usize,
}

impl<'a> SimDraft<'a> {
    /// `d`'s layers copied in, the rest read through a counter of the card's bytes.
    pub fn load(d: &'a DraftFile, ram: DraftPlan, read: Arc<AtomicU64>) -> Result<Self, String> {
        let runs = resident::load_runs(&d.model, &d.src).map_err(|e| e.to_string())?;
        let back = Counted {
            inner: &d.src,
            read,
        };
        Ok(SimDraft {
            model: &d.model,
            store: DraftStore::new(runs, back),
            rows: ram.rows,
            extra: ram.extra,
        })
    }

    /// Weight bytes a draft step runs through the kernels: its layers and its head's rows.
    pub fn step_bytes(&self) -> u64 {
        let rb = self.model.weights.output.row_bytes();
        resident::layer_bytes(self.model) + self.rows as u64 * rb
    }

    /// The draft in run state `st`, its cut head read (from the card, counted) now.
    pub fn draft(
        &'a self,
        (shape, k): (DraftShape, Kernels),
        st: RunState,
    ) -> Result<ModelDraft<'a, DraftStore<Counted<'a>>, SingleThread>, String> {
        let e = |e: &dyn std::fmt::Display| e.to_string();
        let m = self.model;
        let how = (m.config.n_layer, shape.max_draft);
        let cut = HeadCut::new(m, &self.store, self.rows, self.extra).map_err(|x| e(&x))?;
        let draft =
            ModelDraft::with_state(m, &self.store, &SingleThread, k, how, st).map_err(|x| e(&x))?;
        Ok(draft.with_cut(cut))
    }
}
