//! Byte-level BPE merging (llama.cpp's `llm_tokenizer_bpe`), for `tokenizer.ggml.model = gpt2`.
//!
//! A word from the pre-tokenizer starts as one symbol per byte; in the vocabulary each byte is the
//! token of its GPT-2 character ([`super::unicode::byte_to_char`]). Adjacent pairs found in the merge
//! table are queued by merge rank (lowest first, then leftmost); the best is merged, its neighbours'
//! pairs are queued, stale entries are skipped. Symbols carry token ids, and the merge table maps a
//! pair of ids to its rank and the id of the merged text, so no strings are built while merging.

use super::spm::TOKENS;
use super::symbols;
use super::vocab::Vocab;
use super::NONE;
use crate::oom::{self, OutOfMemory};
use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// One merge rule: `left right` (token ids), its rank, and the token of `left + right` ([`NONE`] if
/// that text is not a token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merge {
    pub key: u64,
    pub rank: u32,
    pub merged: u32,
}

pub fn merge_key(left: u32, right: u32) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

/// The merge table, sorted by key; the first rule of a duplicated pair wins.
#[derive(Debug, Clone, Default)]
pub struct Merges {
    rules: Vec<Merge>,
}

impl Merges {
    pub fn new(mut rules: Vec<Merge>) -> Self {
        rules.sort_unstable_by(|a, b| a.key.cmp(&b.key).then(a.rank.cmp(&b.rank)));
        rules.dedup_by_key(|m| m.key);
        rules.shrink_to_fit();
        Merges { rules }
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn find(&self, left: u32, right: u32) -> Option<&Merge> {
        let key = merge_key(left, right);
        self.rules
            .binary_search_by(|m| m.key.cmp(&key))
            .ok()
            .map(|i| &self.rules[i])
    }
}

/// A span of the word; its data is the token of its text, or [`NONE`].
type Symbol = symbols::Symbol<u32>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bigram {
    rank: u32,
    left: usize,
    right: usize,
    /// The two tokens when queued, to recognise stale entries.
    left_id: u32,
    right_id: u32,
    merged: u32,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // Max-heap: the lowest rank first, then the leftmost pair.
        other.rank.cmp(&self.rank).then(other.left.cmp(&self.left))
    }
}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// What BPE needs besides the vocabulary.
#[derive(Debug)]
pub struct Tables<'a> {
    pub merges: &'a Merges,
    /// Token of each byte's GPT-2 character.
    pub byte_tokens: &'a [u32; 256],
    /// Token whose text is the single raw byte `b` (the fallback llama.cpp uses for unknown symbols).
    pub raw_byte_tokens: &'a [u32; 256],
    /// GPT-2 character of each byte, as UTF-8 (bytes, length).
    pub byte_chars: &'a [([u8; 2], u8); 256],
    /// A whole word that is a token is taken as is (llama.cpp's `ignore_merges`).
    pub ignore_merges: bool,
}

/// Append the tokens of one pre-tokenized `word` to `out`.
pub fn tokenize_word(
    vocab: &Vocab,
    t: &Tables,
    word: &[u8],
    scratch: &mut Vec<u8>,
    out: &mut Vec<u32>,
) -> Result<(), OutOfMemory> {
    if word.is_empty() {
        return Ok(());
    }
    if t.ignore_merges {
        encode_bytes(t, word, scratch);
        if let Some(id) = vocab.find(scratch) {
            return oom::push(out, id, TOKENS);
        }
    }

    let n = word.len();
    let mut syms = symbols::chain(n, word.iter().map(|&b| (1, t.byte_tokens[b as usize])))?;

    let mut queue = BinaryHeap::new();
    let try_add = |syms: &[Symbol], queue: &mut BinaryHeap<Bigram>, left: usize, right: usize| {
        let (Some(l), Some(r)) = (syms.get(left), syms.get(right)) else {
            return Ok(());
        };
        if l.data == NONE || r.data == NONE {
            return Ok(());
        }
        match t.merges.find(l.data, r.data) {
            Some(m) => {
                let b = Bigram {
                    rank: m.rank,
                    left,
                    right,
                    left_id: l.data,
                    right_id: r.data,
                    merged: m.merged,
                };
                oom::push_heap(queue, b, "the tokenizer's merge queue")
            }
            None => Ok(()),
        }
    };
    for i in 1..n {
        try_add(&syms, &mut queue, i - 1, i)?;
    }

    while let Some(b) = queue.pop() {
        let (l, r) = (syms[b.left], syms[b.right]);
        if l.len == 0 || r.len == 0 || l.data != b.left_id || r.data != b.right_id {
            continue; // stale
        }
        let (prev, next) = symbols::merge(&mut syms, b.left, b.right);
        syms[b.left].data = b.merged;
        try_add(&syms, &mut queue, prev, b.left)?;
        try_add(&syms, &mut queue, b.left, next)?;
    }

    for s in symbols::in_order(&syms) {
        if s.data != NONE {
            oom::push(out, s.data, TOKENS)?;
        } else {
            // The symbol's text is no token: llama.cpp looks up each byte of its GPT-2 encoding as a
            // one-byte token and drops the bytes that are none.
            encode_bytes(t, &word[s.start..s.start + s.len], scratch);
            for &e in scratch.iter() {
                match t.raw_byte_tokens[e as usize] {
                    NONE => {}
                    id => oom::push(out, id, TOKENS)?,
                }
            }
        }
    }
    Ok(())
}

/// `bytes` written in GPT-2 characters (UTF-8), into `out`.
pub fn encode_bytes(t: &Tables, bytes: &[u8], out: &mut Vec<u8>) {
    out.clear();
    for &b in bytes {
        let (c, n) = &t.byte_chars[b as usize];
        out.extend_from_slice(&c[..*n as usize]);
    }
}
