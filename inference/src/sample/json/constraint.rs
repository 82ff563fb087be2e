//! The JSON automaton against a vocabulary ([`JsonConstraint`]): which tokens may come next.

use super::JsonState;
use crate::oom::{self, OutOfMemory};
use crate::sample::stop::LogitsFilter;
use crate::tokenizer::Tokenizer;
use alloc::vec::Vec;
use core::fmt;

/// Why a vocabulary cannot be used for JSON mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    /// No one-byte token for a byte that starts a shortest completion, so completion within the
    /// budget cannot be guaranteed. `byte` is the (first) byte looked for.
    MissingByteToken { byte: u8 },
    /// More tokens or token bytes than 32-bit offsets can index.
    VocabularyTooLarge,
    /// A table did not fit in memory.
    OutOfMemory(OutOfMemory),
}

impl From<OutOfMemory> for JsonError {
    fn from(e: OutOfMemory) -> Self {
        JsonError::OutOfMemory(e)
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::MissingByteToken { byte } => write!(
                f,
                "JSON mode needs a one-byte token for byte 0x{byte:02x} ({:?}) and the vocabulary has none",
                *byte as char
            ),
            JsonError::VocabularyTooLarge => {
                write!(f, "the vocabulary is too large for JSON mode's tables")
            }
            JsonError::OutOfMemory(e) => write!(f, "{e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for JsonError {}

/// Bytes (or byte ranges) that some shortest completion starts with; JSON mode needs a one-byte
/// token for one byte of each entry. From [`JsonState::closing_bytes`]: `{` at the start, `0` for a
/// value / digit / hex digit, `}` `]` closers, `"` for keys, string ends and the escape `\"`, `:`,
/// the rest of `true` `false` `null`, `\` `u` `d` for a surrogate pair's low half (DC00), and
/// UTF-8 continuation bytes (80-8F fits after F4/ED/others, A0-BF after E0/F0/others).
const NEEDED: &[(u8, u8)] = &[
    single(b'{'),
    single(b'}'),
    single(b']'),
    single(b'"'),
    single(b':'),
    single(b'0'),
    single(b'\\'),
    single(b'u'),
    single(b'r'),
    single(b'e'),
    single(b'a'),
    single(b'l'),
    single(b's'),
    single(b'D'), // or `d` (checked below)
    (0x80, 0x8f),
    (0xa0, 0xbf),
];

/// The range of one byte.
const fn single(b: u8) -> (u8, u8) {
    (b, b)
}

/// The JSON automaton against a vocabulary: masks logits so only tokens that keep the reply valid
/// (and completable within the budget) can be drawn. Build once per vocabulary (it copies every
/// token's bytes: 0.7 MB for SmolLM2's 49152 tokens, see [`heap_bytes`](Self::heap_bytes)),
/// [`reset`](Self::reset) per reply. Masking copies the small state per candidate, skips whole
/// groups of tokens whose first byte is refused, and inside strings passes plain-text tokens
/// with one comparison (about 0.3 ms per token for 49152 tokens on a PC).
#[derive(Clone)]
pub struct JsonConstraint {
    state: JsonState,
    initial: JsonState,
    /// Token bytes, concatenated by token id.
    bytes: Vec<u8>,
    /// Token `t`'s bytes are `bytes[starts[t]..starts[t + 1]]`.
    starts: Vec<u32>,
    /// Ids of the tokens with bytes, sorted by first byte (then id).
    by_first: Vec<u32>,
    /// Tokens starting with byte `b` are `by_first[groups[b]..groups[b + 1]]`.
    groups: [u32; 257],
    /// Ids of the tokens without bytes (never allowed).
    empty: Vec<u32>,
    /// Bit `t`: token `t` is whole UTF-8 characters without `"`, `\` or control characters, so
    /// inside a string (between characters) it is plain text that changes nothing: most of a
    /// vocabulary, allowed or not by one comparison.
    plain: Vec<u64>,
    /// End-of-generation tokens: allowed once (and only once) the value is complete.
    eog: Vec<u32>,
}

impl fmt::Debug for JsonConstraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonConstraint")
            .field("state", &self.state)
            .field("vocab", &self.vocab())
            .field("eog", &self.eog)
            .finish_non_exhaustive()
    }
}

impl JsonConstraint {
    /// From each token's bytes (index = token id; empty = never allowed: give special and control
    /// tokens no bytes) and the end-of-generation tokens. Fails if the vocabulary lacks a one-byte
    /// token JSON mode needs to guarantee completion (see the module docs).
    pub fn new<I>(pieces: I, eog: &[u32]) -> Result<Self, JsonError>
    where
        I: IntoIterator,
        I::IntoIter: Clone,
        I::Item: AsRef<[u8]>,
    {
        // Measured first, so both tables are allocated once at their exact size.
        let pieces = pieces.into_iter();
        let (n, total) = pieces
            .clone()
            .fold((0, 0), |(n, b), p| (n + 1, b + p.as_ref().len()));
        u32::try_from(total).map_err(|_| JsonError::VocabularyTooLarge)?;
        u32::try_from(n).map_err(|_| JsonError::VocabularyTooLarge)?;
        let mut bytes = oom::with_capacity(total, "JSON mode's token bytes")?;
        let mut starts = oom::with_capacity(n + 1, "JSON mode's token offsets")?;
        starts.push(0u32);
        for p in pieces {
            bytes.extend_from_slice(p.as_ref());
            starts.push(bytes.len() as u32);
        }
        let piece = |t: usize| &bytes[starts[t] as usize..starts[t + 1] as usize];

        // Group by first byte (a counting sort keeps ids ascending inside a group).
        let mut groups = [0u32; 257];
        for t in 0..n {
            if let Some(&b) = piece(t).first() {
                groups[b as usize + 1] += 1;
            }
        }
        for b in 0..256 {
            groups[b + 1] += groups[b];
        }
        let mut fill = groups;
        let mut by_first = oom::filled(groups[256] as usize, 0u32, "JSON mode's token groups")?;
        for t in 0..n {
            if let Some(&b) = piece(t).first() {
                by_first[fill[b as usize] as usize] = t as u32;
                fill[b as usize] += 1;
            }
        }

        let empties = || (0..n as u32).filter(|&t| piece(t as usize).is_empty());
        let mut empty = oom::with_capacity(empties().count(), "JSON mode's empty tokens")?;
        empty.extend(empties());
        let mut plain = oom::filled(n.div_ceil(64), 0u64, "JSON mode's plain tokens")?;
        for t in 0..n {
            let p = piece(t);
            if !p.is_empty()
                && core::str::from_utf8(p).is_ok()
                && !p.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
            {
                plain[t / 64] |= 1 << (t % 64);
            }
        }
        let mut single = [false; 256];
        for t in 0..n {
            if let [b] = piece(t) {
                single[*b as usize] = true;
            }
        }
        for &(lo, hi) in NEEDED {
            let found =
                (lo..=hi).any(|b| single[b as usize]) || (lo == b'D' && single[b'd' as usize]);
            if !found {
                return Err(JsonError::MissingByteToken { byte: lo });
            }
        }

        let mut eog = oom::collect(eog.len(), "JSON mode's end tokens", |i| eog[i])?;
        eog.sort_unstable();
        eog.dedup();
        let initial = JsonState::new();
        Ok(Self {
            state: initial,
            initial,
            bytes,
            starts,
            by_first,
            groups,
            empty,
            plain,
            eog,
        })
    }

    /// From a tokenizer: every token's [`Tokenizer::token_to_piece`] (the bytes the caller prints),
    /// with control, end-of-generation and the named special tokens (BOS, EOS, UNK, PAD, FIM...)
    /// given no bytes; the tokenizer's end-of-generation tokens end a complete reply.
    pub fn from_tokenizer(tok: &Tokenizer) -> Result<Self, JsonError> {
        let ids = tok.special_ids();
        let special = [
            ids.bos,
            ids.eos,
            ids.eot,
            ids.eom,
            ids.unk,
            ids.sep,
            ids.pad,
            ids.mask,
            ids.fim_pre,
            ids.fim_suf,
            ids.fim_mid,
            ids.fim_pad,
            ids.fim_rep,
            ids.fim_sep,
        ];
        let pieces = (0..tok.vocab_size() as u32).map(|id| {
            if tok.is_control(id) || tok.is_eog(id) || special.contains(&Some(id)) {
                &[][..]
            } else {
                tok.token_to_piece(id)
            }
        });
        Self::new(pieces, tok.eog_ids())
    }

    /// Allow at most `n` whitespace bytes in a row outside strings (applies from the next
    /// [`reset`](Self::reset); a fresh constraint is reset).
    pub fn with_max_whitespace(mut self, n: u8) -> Self {
        self.initial = JsonState::with_max_whitespace(n);
        self.state = self.initial;
        self
    }

    /// Start a new reply.
    pub fn reset(&mut self) {
        self.state = self.initial;
    }

    /// Heap bytes of the tables (token bytes, offsets, groups, flags).
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
            + 4 * (self.starts.capacity()
                + self.by_first.capacity()
                + self.empty.capacity()
                + self.eog.capacity())
            + 8 * self.plain.capacity()
    }

    /// Tokens the constraint knows (ids beyond are never allowed).
    pub fn vocab(&self) -> usize {
        self.starts.len() - 1
    }

    /// The automaton after the tokens accepted so far.
    pub fn state(&self) -> &JsonState {
        &self.state
    }

    /// Whether the reply is a complete JSON value.
    pub fn is_complete(&self) -> bool {
        self.state.is_complete()
    }

    /// Shortest completion from here, in bytes (see [`JsonState::closing_bytes`]).
    pub fn closing_bytes(&self) -> usize {
        self.state.closing_bytes()
    }

    /// Token `t`'s bytes (empty for special tokens and ids outside the vocabulary).
    pub fn token_bytes(&self, t: u32) -> &[u8] {
        let t = t as usize;
        if t >= self.vocab() {
            return &[];
        }
        &self.bytes[self.starts[t] as usize..self.starts[t + 1] as usize]
    }

    /// Set the logit of every token that may not come next to `f32::NEG_INFINITY`; `remaining`
    /// is how many tokens may still be generated, this one included. A token may come if its bytes
    /// continue the document and the shortest completion after it fits in `remaining - 1` tokens
    /// (or, when the budget is already too small, if it shortens the completion). Once the value is
    /// complete only end-of-generation tokens are allowed. Returns how many tokens are allowed: at
    /// least one while the value is incomplete (guaranteed by the vocabulary check in
    /// [`new`](Self::new)).
    pub fn mask(&self, logits: &mut [f32], remaining: usize) -> usize {
        const NO: f32 = f32::NEG_INFINITY;
        let n = self.vocab().min(logits.len());
        logits[n..].fill(NO);
        if self.state.is_complete() {
            let mut allowed = 0;
            for (t, l) in logits[..n].iter_mut().enumerate() {
                if self.eog.binary_search(&(t as u32)).is_ok() {
                    allowed += 1;
                } else {
                    *l = NO;
                }
            }
            return allowed;
        }
        let s0 = self.state;
        let limit = remaining
            .saturating_sub(1)
            .max(s0.closing_bytes().saturating_sub(1));
        // Tokens without bytes are never allowed.
        for &t in &self.empty {
            if let Some(l) = logits.get_mut(t as usize) {
                *l = NO;
            }
        }
        // Between characters of a string, plain text keeps the state as it is.
        let plain_ok = s0
            .between_string_chars()
            .then(|| s0.closing_bytes() <= limit);
        let mut allowed = 0;
        for b in 0..256 {
            let group = &self.by_first[self.groups[b] as usize..self.groups[b + 1] as usize];
            if group.is_empty() {
                continue;
            }
            let mut s1 = s0;
            if !s1.step(b as u8) {
                for &t in group {
                    if let Some(l) = logits.get_mut(t as usize) {
                        *l = NO;
                    }
                }
                continue;
            }
            for &t in group {
                let Some(l) = logits.get_mut(t as usize) else {
                    continue;
                };
                if let Some(ok) = plain_ok {
                    if self.plain[t as usize / 64] >> (t % 64) & 1 == 1 {
                        if ok {
                            allowed += 1;
                        } else {
                            *l = NO;
                        }
                        continue;
                    }
                }
                let (a, e) = (
                    self.starts[t as usize] as usize + 1,
                    self.starts[t as usize + 1] as usize,
                );
                let mut s = s1;
                if self.bytes[a..e].iter().all(|&c| s.step(c)) && s.closing_bytes() <= limit {
                    allowed += 1;
                } else {
                    *l = NO;
                }
            }
        }
        allowed
    }

    /// Advance over token `t`. False (and nothing changes) if its bytes do not continue the
    /// document; an end-of-generation token after a complete value is accepted and changes nothing.
    pub fn accept(&mut self, t: u32) -> bool {
        if self.state.is_complete() && self.eog.binary_search(&t).is_ok() {
            return true;
        }
        let mut next = self.state;
        let bytes = self.token_bytes(t);
        if bytes.is_empty() || !next.push_bytes(bytes) {
            return false;
        }
        self.state = next;
        true
    }
}

impl LogitsFilter for JsonConstraint {
    fn apply(&mut self, logits: &mut [f32], remaining: usize) {
        self.mask(logits, remaining);
    }

    fn advance(&mut self, token: u32) -> bool {
        // `generate_filtered` only draws tokens `apply` left allowed, which `accept` takes.
        self.accept(token);
        self.is_complete()
    }

    /// The tokens the automaton takes in turn, stopping at a complete value (nothing follows
    /// one but its end).
    fn valid_prefix(&self, tokens: &[u32]) -> usize {
        let mut state = self.state;
        for (i, &t) in tokens.iter().enumerate() {
            let bytes = self.token_bytes(t);
            if state.is_complete() || bytes.is_empty() || !state.push_bytes(bytes) {
                return i;
            }
        }
        tokens.len()
    }
}
