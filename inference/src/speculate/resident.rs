//! A draft model's weights as a board holds them ([`DraftStore`]): what a draft step reads in
//! full (its layers' matrices) copied to RAM, and what it reads only a part of left where it is,
//! read from the file when asked: the token embedding (one row a token fed) and the output head
//! (the rows of a [`super::HeadCut`], read once, and one row a new token of the context).
//!
//! An embedding row is a few hundred bytes (two 512-byte blocks on the card), read once a token
//! the draft is fed; a row cache would save a fraction of a millisecond a token beside a draft
//! step of tenths of a second, so there is none.

use super::{DraftVocab, HeadCut};
use crate::model::{Model, ModelError, Part};
use crate::oom;
use crate::storage::{check_range, Storage, StorageError};
use alloc::vec::Vec;

/// Tensors closer than this in the file are held as one run (the norms and biases between a
/// layer's matrices).
const GAP: u64 = 64 << 10;

/// Bytes read per call while copying the runs in.
const CHUNK: usize = 8 << 20;

/// Runs of a file held in RAM: `(offset, bytes)`, in file order, apart.
pub type Runs = Vec<(u64, Vec<u8>)>;

/// The file ranges a draft step reads in full: `model`'s layer matrices, merged into runs
/// `(offset, length)` in file order (tensors less than 64 KiB apart are one run).
pub fn layer_runs(model: &Model) -> Vec<(u64, u64)> {
    let layers = Part {
        layers: 0..model.config.n_layer,
        ends: false,
    };
    let mut ranges: Vec<(u64, u64)> = model.weights.ranges_of(&layers).collect();
    ranges.sort_unstable();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (o, n) in ranges {
        match runs.last_mut() {
            Some(last) if o <= last.0 + last.1 + GAP => {
                last.1 = last.1.max(o + n - last.0);
            }
            _ => runs.push((o, n)),
        }
    }
    runs
}

/// Bytes [`layer_runs`] holds.
pub fn layer_bytes(model: &Model) -> u64 {
    layer_runs(model).iter().map(|r| r.1).sum()
}

/// Copy `model`'s [`layer_runs`] from `src` into RAM.
pub fn load_runs<S: Storage + ?Sized>(model: &Model, src: &S) -> Result<Runs, ModelError> {
    let mut runs = Vec::new();
    for (offset, len) in layer_runs(model) {
        let mut bytes = oom::filled(len as usize, 0u8, "the draft model's layers")?;
        for (i, chunk) in bytes.chunks_mut(CHUNK).enumerate() {
            src.read_at(offset + (i * CHUNK) as u64, chunk)
                .map_err(ModelError::Storage)?;
        }
        runs.push((offset, bytes));
    }
    Ok(runs)
}

/// What a draft model takes of the heap, counted as the board simulator counts it: its layers,
/// its head's rows (`draft_vocab`, with the room left) and its run state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DraftPlan {
    /// The head's lowest ids kept (the vocabulary: the whole head).
    pub rows: usize,
    /// Room for the context's tokens beside them (none for the whole head).
    pub extra: usize,
    pub layers: u64,
    pub head: u64,
    pub state: u64,
}

impl DraftPlan {
    /// The plan for `model` with `heap` bytes left for it and the target's page cache, its run
    /// state `state` bytes, the context `ctx` positions.
    pub fn new(model: &Model, vocab: DraftVocab, heap: u64, state: u64, ctx: usize) -> Self {
        let layers = layer_bytes(model);
        let room = heap.saturating_sub(layers + state);
        let rb = model.weights.output.row_bytes();
        let rows = vocab.rows(model.config.vocab, rb, room);
        let extra = if rows >= model.config.vocab { 0 } else { ctx };
        DraftPlan {
            rows,
            extra,
            layers,
            head: HeadCut::bytes_for(model, rows, extra),
            state,
        }
    }

    /// Bytes in all.
    pub fn bytes(&self) -> u64 {
        self.layers + self.head + self.state
    }

    /// Bytes a pass of a `len`-byte target reads from the card, with `heap` bytes for the page
    /// cache: (without the draft, with it).
    pub fn streamed(&self, heap: u64, len: u64) -> (u64, u64) {
        let capacity = |taken: u64| heap.saturating_sub(taken).min(len);
        (len - capacity(0), len - capacity(self.bytes()))
    }
}

/// A draft's file: the [`Runs`] in RAM, the rest read from `back`.
#[derive(Debug)]
pub struct DraftStore<B> {
    runs: Runs,
    back: B,
}

impl<B: Storage> DraftStore<B> {
    pub fn new(runs: Runs, back: B) -> Self {
        DraftStore { runs, back }
    }

    /// Bytes held in RAM.
    pub fn resident_bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.1.len() as u64).sum()
    }

    /// The run holding `offset`, and where in it.
    fn run_at(&self, offset: u64) -> Option<(&[u8], usize)> {
        let i = self
            .runs
            .partition_point(|r| r.0 <= offset)
            .checked_sub(1)?;
        let (start, bytes) = &self.runs[i];
        let at = (offset - start) as usize;
        (at < bytes.len()).then_some((&bytes[..], at))
    }
}

impl<B: Storage> Storage for DraftStore<B> {
    fn len(&self) -> u64 {
        self.back.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        check_range(offset, buf.len() as u64, self.len())?;
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let left = buf.len() - done;
            if let Some((bytes, i)) = self.run_at(at) {
                let n = (bytes.len() - i).min(left);
                buf[done..done + n].copy_from_slice(&bytes[i..i + n]);
                done += n;
                continue;
            }
            // Up to the next run (or the end): from the file.
            let next = self.runs.iter().map(|r| r.0).find(|&o| o > at);
            let n = next.map_or(left as u64, |o| (o - at).min(left as u64)) as usize;
            self.back.read_at(at, &mut buf[done..done + n])?;
            done += n;
        }
        Ok(())
    }

    fn resident(&self, offset: u64, len: usize) -> Option<&[u8]> {
        let (bytes, i) = self.run_at(offset)?;
        bytes.get(i..i.checked_add(len)?)
    }
}
