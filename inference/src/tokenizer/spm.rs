//! SentencePiece-style merging (llama.cpp's `llm_tokenizer_spm`), for `tokenizer.ggml.model = llama`.
//!
//! The text (already given its space prefix and with spaces written as U+2581) starts as one symbol
//! per UTF-8 character. Every adjacent pair whose concatenation is a token goes into a priority
//! queue keyed by that token's score (higher first, then leftmost); the best pair is merged, its
//! neighbours' pairs are queued, and stale entries (a side already merged elsewhere) are skipped.
//! Each final symbol is its token, or, if its text is no token, one byte token (`<0xNN>`) per byte.

use super::symbols;
use super::vocab::Vocab;
use super::NONE;
use crate::oom::{self, OutOfMemory};
use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// A span of the text (one UTF-8 character to begin with).
type Symbol = symbols::Symbol<()>;

/// A queued pair: merging `left` and `right` (`len` bytes together) gives a token of `score`.
#[derive(Debug, Clone, Copy)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // Max-heap: the higher score first, then the leftmost pair.
        match self.score.partial_cmp(&other.score) {
            Some(Ordering::Equal) | None => other.left.cmp(&self.left),
            Some(o) => o,
        }
    }
}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}

/// Append the tokens of `text` to `out`. `byte_tokens[b]` is the token for byte `b` ([`NONE`] if the
/// vocabulary has none; then `unk` is used, or the byte is dropped). Every buffer grows
/// fallibly.
pub fn tokenize(
    vocab: &Vocab,
    byte_tokens: &[u32; 256],
    unk: Option<u32>,
    text: &[u8],
    out: &mut Vec<u32>,
) -> Result<(), OutOfMemory> {
    if text.is_empty() {
        return Ok(());
    }
    // One symbol per UTF-8 character (a truncated one at the end is what is left).
    let mut offs = 0;
    let spans = core::iter::from_fn(|| {
        let n = utf8_len(*text.get(offs)?).min(text.len() - offs);
        offs += n;
        Some((n, ()))
    });
    let mut syms = symbols::chain(text.len(), spans)?;

    let mut queue = BinaryHeap::new();
    let try_add = |syms: &[Symbol], queue: &mut BinaryHeap<Bigram>, left: usize, right: usize| {
        let (Some(l), Some(r)) = (syms.get(left), syms.get(right)) else {
            return Ok(());
        };
        let len = l.len + r.len;
        let Some(piece) = text.get(l.start..l.start + len) else {
            return Ok(());
        };
        match vocab.find(piece) {
            Some(id) => {
                let score = vocab.score(id);
                let b = Bigram {
                    score,
                    left,
                    right,
                    len,
                };
                oom::push_heap(queue, b, "the tokenizer's merge queue")
            }
            None => Ok(()),
        }
    };
    for i in 1..syms.len() {
        try_add(&syms, &mut queue, i - 1, i)?;
    }

    while let Some(b) = queue.pop() {
        let (l, r) = (syms[b.left], syms[b.right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.len {
            continue; // stale
        }
        let (prev, next) = symbols::merge(&mut syms, b.left, b.right);
        try_add(&syms, &mut queue, prev, b.left)?;
        try_add(&syms, &mut queue, b.left, next)?;
    }

    for s in symbols::in_order(&syms) {
        let piece = &text[s.start..s.start + s.len];
        match vocab.find(piece) {
            Some(id) => oom::push(out, id, TOKENS)?,
            None => {
                for &b in piece {
                    match byte_tokens[b as usize] {
                        NONE => oom::extend(out, unk.as_slice(), TOKENS)?,
                        id => oom::push(out, id, TOKENS)?,
                    }
                }
            }
        }
    }
    Ok(())
}

/// What the token buffer is, in an out-of-memory error.
pub(super) const TOKENS: &str = "the prompt's tokens";

/// Length of the UTF-8 sequence a lead byte announces (1 for continuation and invalid bytes).
pub fn utf8_len(b: u8) -> usize {
    match b >> 4 {
        0xC | 0xD => 2,
        0xE => 3,
        0xF => 4,
        _ => 1,
    }
}
