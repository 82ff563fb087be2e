//! A draft model's output head cut to part of the vocabulary ([`HeadCut`], `draft_vocab` in
//! `lmboot.txt`, `--draft-vocab` on the PC), so that a draft fits beside a streamed target.
//!
//! A draft only proposes: the target checks every guess, so a draft that can propose only some
//! tokens leaves the output exact (greedy: the same tokens; sampled: the same distribution, since
//! a model draft's guesses are certain ones, [`super::ModelDraft`]). What it costs is the guesses
//! it cannot make. FR-Spec (2025) cuts a draft's head to the most frequent tokens for speed; here
//! the reason is memory: Qwen2.5-Coder-0.5B's head is 145 MB of its 486 MB, and a board of
//! 512 MiB cannot hold it and leave the target a useful page cache.
//!
//! Which tokens: the `N` lowest ids, and every token of the context (the prompt and the
//! conversation so far) as it comes. A byte-pair tokenizer numbers its merged tokens in the order
//! the merges were learnt, most frequent pair first, so low ids are the common tokens: a proxy
//! for frequency that needs no table of counts (no such table ships in a GGUF file). The
//! context's tokens are the ones most likely to come again (names, identifiers, quoted text),
//! whatever their id.
//!
//! The kept rows are copied to RAM, bytes as the file has them, and the scores computed from
//! them by the model's own head product ([`crate::model::Model::head_logits`]): each is bit for
//! bit the score the whole head gives that token.

use crate::gguf::TensorInfo;
use crate::model::{Model, ModelError, RunState};
use crate::oom;
use crate::parallel::Parallel;
use crate::quant::Kernels;
use crate::storage::{SliceStorage, Storage};
use alloc::vec::Vec;

/// `draft_vocab`: how much of a draft model's output head it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DraftVocab {
    /// The whole head.
    All,
    /// The `N` lowest ids (and the context's tokens).
    Lowest(usize),
    /// As many rows as [`auto_rows`] gives for the memory left (the whole head when it fits).
    #[default]
    Auto,
}

impl DraftVocab {
    /// `all`, `auto`, or a count of tokens (at least [`MIN_ROWS`]).
    pub fn parse(v: &str) -> Option<DraftVocab> {
        match v {
            "all" => Some(DraftVocab::All),
            "auto" => Some(DraftVocab::Auto),
            _ => match v.parse::<usize>() {
                Ok(n) if n >= MIN_ROWS => Some(DraftVocab::Lowest(n)),
                _ => None,
            },
        }
    }

    /// The lowest ids kept of a `vocab`-token head, with `room` bytes of RAM left for the
    /// target's page cache and the head ([`auto_rows`] for `auto`).
    pub fn rows(self, vocab: usize, row_bytes: u64, room: u64) -> usize {
        match self {
            DraftVocab::All => vocab,
            DraftVocab::Lowest(n) => n.min(vocab),
            DraftVocab::Auto => auto_rows(vocab, row_bytes, room),
        }
    }
}

/// Fewest tokens a cut head keeps (`draft_vocab = N` below it is refused: a draft that cannot
/// name common words is no draft).
pub const MIN_ROWS: usize = 256;

/// Share of the RAM left (for the target's page cache and the head) that `auto` gives the head.
///
/// Each byte the head takes is a byte the target reads from the card at every pass; each row
/// it keeps is a token the draft can guess. With ids in merge order the first rows cover most
/// text, so past some tens of thousands of rows a row buys little. Measured on the bench's four
/// prompts (Qwen2.5-Coder-1.5B at 512 MiB, the 0.5B drafting, a simulated Zero 2 W, 48 tokens,
/// seconds a token for completion / edit / JSON / chat; plain: 21.5 each):
///
/// | head rows | share of the RAM left | s a token | the draft's RAM |
/// |---|---|---|---|
/// | 30720 | an eighth | 7.5 / 7.7 / 8.7 / 21.7 | 288 MB |
/// | 41984 | a sixth | 7.6 / 7.8 / 8.8 / 19.3 | 299 MB |
/// | 49152 | | 7.7 / 7.9 / 7.7 / 19.4 | 306 MB |
/// | 62464 | a quarter | 7.8 / 8.0 / 6.6 / 19.8 | 319 MB |
///
/// Below a sixth the chat reply's guesses fall past the cut and the draft costs more than it
/// saves; above it the JSON reply gains, but the draft takes more than the 300 MB it is given
/// beside the target on a 512 MiB board.
pub const AUTO_SHARE: u64 = 6;

/// `auto`'s row count: the whole head if it fits in [`AUTO_SHARE`] of `room`, else the most
/// whole thousands (1024 rows) that do, and never fewer than [`MIN_ROWS`].
pub fn auto_rows(vocab: usize, row_bytes: u64, room: u64) -> usize {
    let fit = (room / AUTO_SHARE / row_bytes.max(1)) as usize;
    if fit >= vocab {
        return vocab;
    }
    (fit / 1024 * 1024).max(MIN_ROWS).min(vocab)
}

/// A draft's output head cut to some of the vocabulary: the rows kept, in RAM, and the id of
/// each.
#[derive(Debug)]
pub struct HeadCut {
    /// The kept rows' bytes, `rows * row_bytes` of them in use, room for `cap`.
    bytes: Vec<u8>,
    /// Rows `0 .. lowest` are ids `0 .. lowest`.
    lowest: usize,
    /// The ids of rows `lowest ..`, in the order they were added.
    extra: Vec<u32>,
    /// `extra`, sorted (to look an id up).
    sorted: Vec<u32>,
    /// Most rows: `lowest` and the extras' room.
    cap: usize,
    /// The head as the file has it (its type, row length, offset).
    head: TensorInfo,
    /// The scores of the last [`HeadCut::logits`], one a row, `scored` of them.
    scores: Vec<f32>,
    scored: usize,
}

impl HeadCut {
    /// Bytes a cut of `lowest` rows with room for `extra` more takes.
    pub fn bytes_for(model: &Model, lowest: usize, extra: usize) -> u64 {
        let w = &model.weights.output;
        let rows = (lowest.min(model.config.vocab) + extra) as u64;
        rows * (w.row_bytes() + 4) + extra as u64 * 8
    }

    /// The first `lowest` rows of `model`'s output head read from `src`, with room for `extra`
    /// more (the context's tokens: at most the context length).
    pub fn new<S: Storage + ?Sized>(
        model: &Model,
        src: &S,
        lowest: usize,
        extra: usize,
    ) -> Result<HeadCut, ModelError> {
        let head = model.weights.output.try_clone()?;
        let lowest = lowest.min(model.config.vocab);
        let cap = lowest + extra;
        let rb = head.row_bytes() as usize;
        // Its whole room at once: growing it later would copy it and leave a hole in the heap.
        let mut bytes = oom::with_capacity(cap * rb, "the draft's cut head")?;
        bytes.resize(lowest * rb, 0u8);
        src.read_at(head.offset, &mut bytes)
            .map_err(ModelError::Storage)?;
        Ok(HeadCut {
            bytes,
            lowest,
            extra: oom::with_capacity(extra, "the draft's cut head ids")?,
            sorted: oom::with_capacity(extra, "the draft's cut head ids")?,
            cap,
            head,
            scores: oom::filled(cap, 0.0, "the draft's cut head scores")?,
            scored: 0,
        })
    }

    /// Rows kept now.
    pub fn rows(&self) -> usize {
        self.lowest + self.extra.len()
    }

    /// Rows `0 .. lowest` are ids `0 .. lowest`.
    pub fn lowest(&self) -> usize {
        self.lowest
    }

    /// Bytes it holds (rows, ids and scores, with their room).
    pub fn bytes(&self) -> u64 {
        let rb = self.head.row_bytes();
        self.cap as u64 * (rb + 4) + (self.extra.capacity() + self.sorted.capacity()) as u64 * 4
    }

    /// Whether token `id` has a row.
    pub fn contains(&self, id: u32) -> bool {
        (id as usize) < self.lowest || self.sorted.binary_search(&id).is_ok()
    }

    /// The token of row `i`.
    pub fn id(&self, i: u32) -> u32 {
        match (i as usize).checked_sub(self.lowest) {
            None => i,
            Some(j) => self.extra.get(j).copied().unwrap_or(i),
        }
    }

    /// Keep the rows of `tokens` too (the context's), read from `src`; once the room is used,
    /// later tokens are left out (the draft cannot guess them; the output stays exact).
    pub fn add<S: Storage + ?Sized>(&mut self, tokens: &[u32], src: &S) -> Result<(), ModelError> {
        let rb = self.head.row_bytes() as usize;
        for &t in tokens {
            if self.contains(t) || self.rows() >= self.cap || u64::from(t) >= self.head.rows() {
                continue;
            }
            let at = self.bytes.len();
            // Within the capacity reserved at `new`: no allocation.
            self.bytes.resize(at + rb, 0);
            let offset = self.head.offset + u64::from(t) * rb as u64;
            src.read_at(offset, &mut self.bytes[at..])
                .map_err(ModelError::Storage)?;
            self.extra.push(t);
            let i = self.sorted.partition_point(|&s| s < t);
            self.sorted.insert(i, t);
        }
        Ok(())
    }

    /// The kept rows' scores from the hidden state of `row` of `model`'s last pass in `st`
    /// (run without logits), one a row ([`HeadCut::id`] names each row's token).
    pub fn logits<P: Parallel + ?Sized>(
        &mut self,
        model: &Model,
        st: &mut RunState,
        (pool, k): (&P, &Kernels),
        row: usize,
    ) -> Result<&[f32], ModelError> {
        let n = self.rows();
        let rb = self.head.row_bytes();
        let mut dims = self.head.dims;
        dims[1] = n as u64;
        let head = TensorInfo {
            name: alloc::string::String::new(),
            dims,
            offset: 0,
            size: n as u64 * rb,
            ..self.head
        };
        let src = SliceStorage::new(&self.bytes);
        let out = &mut self.scores[..n];
        model.head_logits(st, (&src, pool, k), (&head, row), out)?;
        self.scored = n;
        Ok(out)
    }

    /// The scores [`HeadCut::logits`] last computed.
    pub fn scores(&self) -> &[f32] {
        &self.scores[..self.scored]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draft_vocab_parses_counts_auto_and_all() {
        assert_eq!(DraftVocab::parse("all"), Some(DraftVocab::All));
        assert_eq!(DraftVocab::parse("auto"), Some(DraftVocab::Auto));
        assert_eq!(DraftVocab::parse("32768"), Some(DraftVocab::Lowest(32768)));
        for bad in ["", "255", "-1", "12k", "All"] {
            assert_eq!(DraftVocab::parse(bad), None, "{bad:?}");
        }
        assert_eq!(DraftVocab::Lowest(1 << 20).rows(1000, 10, 0), 1000);
        assert_eq!(DraftVocab::All.rows(1000, 10, 0), 1000);
    }

    #[test]
    fn auto_gives_the_head_a_share_of_the_room() {
        // The whole head when it fits in the share.
        assert_eq!(auto_rows(1000, 100, 1000 * 100 * AUTO_SHARE), 1000);
        // Else whole thousands of rows within the share, never below the floor.
        let rb = 952;
        let room = 240_000_000;
        let n = auto_rows(151_936, rb, room);
        assert!(
            n.is_multiple_of(1024) && n as u64 * rb <= room / AUTO_SHARE,
            "{n}"
        );
        assert!((n as u64 + 1024) * rb > room / AUTO_SHARE, "{n}");
        assert_eq!(auto_rows(151_936, rb, 0), MIN_ROWS);
        assert_eq!(auto_rows(100, rb, 0), 100);
    }
}
