//! JSON mode: constrain generation token by token so the reply is always one syntactically valid
//! JSON document (RFC 8259), and say when that document is complete.
//!
//! Two layers:
//!
//! - [`JsonState`], a pushdown automaton over bytes: the JSON grammar (objects, arrays, strings
//!   with every escape including `\uXXXX` and surrogate pairs, numbers with sign, fraction and
//!   exponent, `true`/`false`/`null`, whitespace) with a stack of at most [`MAX_DEPTH`] open
//!   containers kept in a bit set. It is `Copy` and 12 bytes, so checking a token is "copy the
//!   state, push the token's bytes, stop at the first refusal". Strings must be valid UTF-8 (no
//!   overlong forms, no encoded surrogates, nothing above U+10FFFF) and a `\u` high surrogate must
//!   be followed by a `\u` low surrogate, so every accepted document is also a valid Rust `str`
//!   that strict parsers (serde_json) accept.
//! - [`JsonConstraint`], the automaton against a vocabulary: the token bytes are laid out once,
//!   grouped by first byte; [`JsonConstraint::mask`] sets the logit of every token that cannot
//!   come next to `f32::NEG_INFINITY`, [`JsonConstraint::accept`] advances over the drawn token.
//!   It implements [`LogitsFilter`] for [`crate::generate::Engine::generate_filtered`].
//!
//! Choices, on purpose:
//!
//! - **The top-level value must be an object or an array.** That is what a user of `json = true`
//!   wants, and it makes completion observable: a top-level number (`12`) is only known to be
//!   over when something follows it, which generation never produces.
//! - **No dead ends.** Every prefix the automaton accepts can be completed, and
//!   [`JsonState::closing_bytes`] is the exact length of the shortest completion (the unit tests
//!   check the Bellman equation `closing_bytes(s) = 1 + min over bytes b of closing_bytes(s + b)`
//!   on every reachable state they visit, which makes it exact).
//! - **The reply always completes within the budget.** `mask` is told how many tokens remain
//!   (`remaining`, this one included) and allows a token only if, after it, the shortest completion
//!   still fits in the tokens left at one byte per token: `closing_bytes(after) <= remaining - 1`.
//!   The vocabulary must hold a one-byte token for every byte that starts a shortest completion
//!   (checked by [`JsonConstraint::new`], true of every byte-level BPE vocabulary and of
//!   SentencePiece vocabularies with byte fallback), so at least one token is always allowed and
//!   the budget invariant carries from step to step. When the budget is already too small
//!   (`remaining < closing_bytes`, e.g. `max_tokens = 1`) only tokens that shorten the completion
//!   are allowed: the reply gets as close as it can and is cut off by the token limit.
//! - **Whitespace runs are bounded.** Outside strings at most `max_whitespace` bytes of whitespace
//!   in a row ([`DEFAULT_MAX_WHITESPACE`] unless set), so the model cannot spend its budget on
//!   blanks. Inside strings raw control characters (newline, tab...) are invalid JSON anyway.
//! - **Special tokens never appear.** Control and end-of-generation tokens have no bytes for the
//!   constraint and are never allowed, except that once the value is complete *only* the
//!   end-of-generation tokens are allowed, for callers that keep sampling after completion.
#![forbid(unsafe_code)]

use crate::generate::LogitsFilter;
use crate::tokenizer::Tokenizer;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// Most containers (`{` / `[`) open at once. Deeper nesting is refused (the model can still put
/// strings, numbers and literals there).
pub const MAX_DEPTH: usize = 32;

/// Default limit of consecutive whitespace bytes outside strings.
pub const DEFAULT_MAX_WHITESPACE: u8 = 2;

/// The literals, indexed by `Mode::Lit::word`.
const WORDS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// Where in a number we are (RFC 8259 §6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    /// After `-`: a digit must follow.
    Minus,
    /// The integer part is `0`: no more integer digits (`01` is invalid).
    Zero,
    /// In an integer part that starts with 1-9.
    Int,
    /// After `.`: a digit must follow.
    Dot,
    /// In the fraction digits.
    Frac,
    /// After `e`/`E`: a sign or a digit must follow.
    Exp,
    /// After the exponent's sign: a digit must follow.
    ExpSign,
    /// In the exponent digits.
    ExpInt,
}

impl Num {
    /// Whether the number may end here.
    fn can_end(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpInt)
    }
}

/// Where inside a string we are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Str {
    /// Between characters.
    Plain,
    /// `need` continuation bytes of a UTF-8 sequence remain; the next one must be in `lo..=hi`
    /// (narrower than 80..BF right after E0, ED, F0 and F4: no overlongs, surrogates or > U+10FFFF).
    Utf8 { need: u8, lo: u8, hi: u8 },
    /// After `\`.
    Escape,
    /// In `\uXXXX` with `seen` hex digits; `first` is the first digit; `high`: the digits so far
    /// make a high surrogate (D800-DBFF), so a `\u` low surrogate must follow.
    Hex { seen: u8, first: u8, high: bool },
    /// After a high surrogate: its low surrogate's `\`.
    LowBackslash,
    /// After a high surrogate and `\`: the `u`.
    LowU,
    /// In the low surrogate's digits (DC00-DFFF), `seen` of them so far.
    LowHex { seen: u8 },
}

impl Str {
    /// [`Str::Utf8`]: `need` more bytes, the next one in `lo..=hi`.
    fn utf8(need: u8, lo: u8, hi: u8) -> Str {
        Str::Utf8 { need, lo, hi }
    }

    /// Bytes still needed before the closing quote can come.
    fn cost(self) -> usize {
        match self {
            Str::Plain => 0,
            Str::Utf8 { need, .. } => need as usize,
            Str::Escape => 1,
            // A high surrogate needs its pair: `\uDC00` is six more bytes.
            Str::Hex { seen, high, .. } => (4 - seen as usize) + if high { 6 } else { 0 },
            Str::LowBackslash => 6,
            Str::LowU => 5,
            Str::LowHex { seen } => 4 - seen as usize,
        }
    }
}

/// The lexical position of the automaton (the container stack is beside it in [`JsonState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Before the top-level value (only `{` or `[`).
    Start,
    /// A value must come (after `:`, or after `,` in an array).
    Value,
    /// Right after `[`: a value or `]`.
    ArrayFirst,
    /// Right after `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object: a key must come.
    Key,
    /// After a key: `:` must come.
    Colon,
    /// After a value inside a container: `,` or the container's closer.
    After,
    /// The top-level value is complete: nothing more is accepted.
    Done,
    /// In a string (`key`: an object key, which a `:` and a value must follow).
    Str { key: bool, s: Str },
    /// In a number.
    Num(Num),
    /// In literal `WORDS[word]` with `pos` bytes matched.
    Lit { word: u8, pos: u8 },
}

impl Mode {
    /// Whether whitespace may come here (between tokens of the grammar).
    fn allows_ws(self) -> bool {
        matches!(
            self,
            Mode::Start
                | Mode::Value
                | Mode::ArrayFirst
                | Mode::ObjectFirst
                | Mode::Key
                | Mode::Colon
                | Mode::After
        )
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The JSON grammar as a pushdown automaton over bytes (see the module docs). Small and `Copy`:
/// checking a candidate is copying the state and pushing bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonState {
    mode: Mode,
    /// Open containers.
    depth: u8,
    /// Bit `i` set: the container at depth `i + 1` is an object (clear: an array).
    stack: u32,
    /// Whitespace bytes in a row so far.
    ws: u8,
    /// Most whitespace bytes in a row.
    max_ws: u8,
}

// The stack is a u32 bit set; the state stays small enough to copy per candidate token.
const _: () = assert!(MAX_DEPTH <= 32);
const _: () = assert!(core::mem::size_of::<JsonState>() <= 12);

impl Default for JsonState {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonState {
    /// Before any byte, with [`DEFAULT_MAX_WHITESPACE`].
    pub const fn new() -> Self {
        Self::with_max_whitespace(DEFAULT_MAX_WHITESPACE)
    }

    /// Before any byte, allowing at most `max_ws` whitespace bytes in a row outside strings
    /// (0: compact JSON only).
    pub const fn with_max_whitespace(max_ws: u8) -> Self {
        Self {
            mode: Mode::Start,
            depth: 0,
            stack: 0,
            ws: 0,
            max_ws,
        }
    }

    /// Push one byte. False if the grammar (or a limit: depth, whitespace run) does not allow it
    /// here; the state is then unchanged.
    pub fn push(&mut self, b: u8) -> bool {
        let mut next = *self;
        if next.step(b) {
            *self = next;
            true
        } else {
            false
        }
    }

    /// Push every byte of `bytes`; false (and the state unchanged) if any is refused.
    pub fn push_bytes(&mut self, bytes: &[u8]) -> bool {
        let mut next = *self;
        if bytes.iter().all(|&b| next.step(b)) {
            *self = next;
            true
        } else {
            false
        }
    }

    /// Whether a whole top-level value (object or array) has been pushed.
    pub fn is_complete(&self) -> bool {
        self.mode == Mode::Done
    }

    /// Open containers.
    pub fn depth(&self) -> usize {
        self.depth as usize
    }

    /// The length of the shortest byte string that completes the document from here (0 when
    /// complete): e.g. 2 (`{}`) at the start, 1 inside `[1`, 4 inside `{"a":"b` (`"` `}`)... Every
    /// state has a byte that lowers it by exactly one.
    pub fn closing_bytes(&self) -> usize {
        let local = match self.mode {
            Mode::Start => 2, // `{}`
            Mode::Value => 1, // `0`
            Mode::ArrayFirst | Mode::ObjectFirst | Mode::After | Mode::Done => 0,
            Mode::Key => 4,   // `"":0`
            Mode::Colon => 2, // `:0`
            Mode::Str { key, s } => s.cost() + 1 + if key { 2 } else { 0 },
            Mode::Num(n) => usize::from(!n.can_end()),
            Mode::Lit { word, pos } => WORDS[word as usize].len() - pos as usize,
        };
        // One closer per open container.
        local + self.depth as usize
    }

    /// Whether the innermost open container is an object.
    fn in_object(&self) -> bool {
        self.depth > 0 && (self.stack >> (self.depth - 1)) & 1 == 1
    }

    /// A value just ended.
    fn value_done(&mut self) {
        self.mode = if self.depth == 0 {
            Mode::Done
        } else {
            Mode::After
        };
    }

    fn open(&mut self, object: bool) -> bool {
        if self.depth as usize >= MAX_DEPTH {
            return false;
        }
        if object {
            self.stack |= 1 << self.depth;
            self.mode = Mode::ObjectFirst;
        } else {
            self.stack &= !(1 << self.depth);
            self.mode = Mode::ArrayFirst;
        }
        self.depth += 1;
        true
    }

    fn close(&mut self, object: bool) -> bool {
        if self.depth == 0 || self.in_object() != object {
            return false;
        }
        self.depth -= 1;
        self.value_done();
        true
    }

    /// The first byte of a value.
    fn begin_value(&mut self, b: u8) -> bool {
        self.mode = match b {
            b'{' => return self.open(true),
            b'[' => return self.open(false),
            b'"' => Mode::Str {
                key: false,
                s: Str::Plain,
            },
            b'-' => Mode::Num(Num::Minus),
            b'0' => Mode::Num(Num::Zero),
            b'1'..=b'9' => Mode::Num(Num::Int),
            b't' => Mode::Lit { word: 0, pos: 1 },
            b'f' => Mode::Lit { word: 1, pos: 1 },
            b'n' => Mode::Lit { word: 2, pos: 1 },
            _ => return false,
        };
        true
    }

    /// Push one byte; on refusal the state is left half-changed (callers work on a copy).
    fn step(&mut self, b: u8) -> bool {
        match self.mode {
            Mode::Str { key, s } => return self.string_byte(key, s, b),
            Mode::Lit { word, pos } => {
                let w = WORDS[word as usize];
                if b != w[pos as usize] {
                    return false;
                }
                if pos as usize + 1 == w.len() {
                    self.value_done();
                } else {
                    self.mode = Mode::Lit { word, pos: pos + 1 };
                }
                return true;
            }
            Mode::Num(n) => {
                let digit = b.is_ascii_digit();
                let next = match (n, b) {
                    (Num::Minus, b'0') => Num::Zero,
                    (Num::Minus, b'1'..=b'9') => Num::Int,
                    (Num::Int, _) if digit => Num::Int,
                    (Num::Zero | Num::Int, b'.') => Num::Dot,
                    (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::Exp,
                    (Num::Dot | Num::Frac, _) if digit => Num::Frac,
                    (Num::Exp, b'+' | b'-') => Num::ExpSign,
                    (Num::Exp | Num::ExpSign | Num::ExpInt, _) if digit => Num::ExpInt,
                    _ => {
                        // Not part of the number: it ends it, if it may end here, and the byte
                        // is read as what follows a value.
                        if !n.can_end() {
                            return false;
                        }
                        self.value_done();
                        return self.structural(b);
                    }
                };
                self.mode = Mode::Num(next);
                return true;
            }
            _ => {}
        }
        self.structural(b)
    }

    /// A byte between the grammar's tokens: whitespace, punctuation, or a value's first byte.
    fn structural(&mut self, b: u8) -> bool {
        if is_ws(b) {
            if !self.mode.allows_ws() || self.ws >= self.max_ws {
                return false;
            }
            self.ws += 1;
            return true;
        }
        self.ws = 0;
        let key = Mode::Str {
            key: true,
            s: Str::Plain,
        };
        match (self.mode, b) {
            (Mode::Start, b'{') => self.open(true),
            (Mode::Start, b'[') => self.open(false),
            (Mode::ArrayFirst, b']') => self.close(false),
            (Mode::Value | Mode::ArrayFirst, _) => self.begin_value(b),
            (Mode::ObjectFirst | Mode::Key, b'"') => {
                self.mode = key;
                true
            }
            (Mode::ObjectFirst, b'}') => self.close(true),
            (Mode::Colon, b':') => {
                self.mode = Mode::Value;
                true
            }
            (Mode::After, b',') => {
                self.mode = if self.in_object() {
                    Mode::Key
                } else {
                    Mode::Value
                };
                true
            }
            (Mode::After, b'}') => self.close(true),
            (Mode::After, b']') => self.close(false),
            _ => false,
        }
    }

    /// A byte inside a string.
    fn string_byte(&mut self, key: bool, s: Str, b: u8) -> bool {
        let next = match s {
            Str::Plain => match b {
                b'"' => {
                    if key {
                        self.mode = Mode::Colon;
                    } else {
                        self.value_done();
                    }
                    return true;
                }
                b'\\' => Str::Escape,
                0x20..=0x7f => Str::Plain,
                0xc2..=0xdf => Str::utf8(1, 0x80, 0xbf),
                0xe0 => Str::utf8(2, 0xa0, 0xbf),
                0xe1..=0xec | 0xee | 0xef => Str::utf8(2, 0x80, 0xbf),
                0xed => Str::utf8(2, 0x80, 0x9f),
                0xf0 => Str::utf8(3, 0x90, 0xbf),
                0xf1..=0xf3 => Str::utf8(3, 0x80, 0xbf),
                0xf4 => Str::utf8(3, 0x80, 0x8f),
                // Control characters, stray continuation bytes, C0/C1 overlong leads, F5-FF.
                _ => return false,
            },
            Str::Utf8 { need, lo, hi } => {
                if b < lo || b > hi {
                    return false;
                }
                if need == 1 {
                    Str::Plain
                } else {
                    Str::utf8(need - 1, 0x80, 0xbf)
                }
            }
            Str::Escape => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Str::Plain,
                b'u' => Str::Hex {
                    seen: 0,
                    first: 0,
                    high: false,
                },
                _ => return false,
            },
            Str::Hex { seen, first, high } => {
                let Some(d) = hex(b) else {
                    return false;
                };
                let (first, high) = match seen {
                    0 => (d, false),
                    1 if first == 0xd => {
                        if d >= 0xc {
                            // DC00-DFFF: a low surrogate without its high one.
                            return false;
                        }
                        (first, d >= 0x8)
                    }
                    _ => (first, high),
                };
                match (seen, high) {
                    (3, true) => Str::LowBackslash,
                    (3, false) => Str::Plain,
                    _ => Str::Hex {
                        seen: seen + 1,
                        first,
                        high,
                    },
                }
            }
            Str::LowBackslash if b == b'\\' => Str::LowU,
            Str::LowU if b == b'u' => Str::LowHex { seen: 0 },
            Str::LowHex { seen } => {
                let ok = match (seen, hex(b)) {
                    (_, None) => false,
                    (0, Some(d)) => d == 0xd,
                    (1, Some(d)) => d >= 0xc,
                    _ => true,
                };
                if !ok {
                    return false;
                }
                if seen == 3 {
                    Str::Plain
                } else {
                    Str::LowHex { seen: seen + 1 }
                }
            }
            Str::LowBackslash | Str::LowU => return false,
        };
        self.mode = Mode::Str { key, s: next };
        true
    }
}

/// Why a vocabulary cannot be used for JSON mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonError {
    /// No one-byte token for a byte that starts a shortest completion, so completion within the
    /// budget cannot be guaranteed. `byte` is the (first) byte looked for.
    MissingByteToken { byte: u8 },
    /// More tokens or token bytes than 32-bit offsets can index.
    VocabularyTooLarge,
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
    (b'{', b'{'),
    (b'}', b'}'),
    (b']', b']'),
    (b'"', b'"'),
    (b':', b':'),
    (b'0', b'0'),
    (b'\\', b'\\'),
    (b'u', b'u'),
    (b'r', b'r'),
    (b'e', b'e'),
    (b'a', b'a'),
    (b'l', b'l'),
    (b's', b's'),
    (b'D', b'D'), // or `d` (checked below)
    (0x80, 0x8f),
    (0xa0, 0xbf),
];

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
        I::Item: AsRef<[u8]>,
    {
        let mut bytes = Vec::new();
        let mut starts = vec![0u32];
        for p in pieces {
            bytes.extend_from_slice(p.as_ref());
            starts.push(u32::try_from(bytes.len()).map_err(|_| JsonError::VocabularyTooLarge)?);
        }
        bytes.shrink_to_fit();
        starts.shrink_to_fit();
        let n = starts.len() - 1;
        u32::try_from(n).map_err(|_| JsonError::VocabularyTooLarge)?;
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
        let mut by_first = vec![0u32; groups[256] as usize];
        for t in 0..n {
            if let Some(&b) = piece(t).first() {
                by_first[fill[b as usize] as usize] = t as u32;
                fill[b as usize] += 1;
            }
        }

        let empty = (0..n as u32)
            .filter(|&t| piece(t as usize).is_empty())
            .collect();
        let mut plain = vec![0u64; n.div_ceil(64)];
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

        let mut eog = eog.to_vec();
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
        let plain_ok = match s0.mode {
            Mode::Str { s: Str::Plain, .. } => Some(s0.closing_bytes() <= limit),
            _ => None,
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec::Vec;

    /// An independent recursive-descent JSON checker (RFC 8259, strict UTF-8, paired surrogates),
    /// written from the grammar and sharing no code with the automaton.
    struct Checker<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Checker<'_> {
        fn peek(&self) -> Option<u8> {
            self.s.get(self.i).copied()
        }
        fn eat(&mut self, b: u8) -> bool {
            if self.peek() == Some(b) {
                self.i += 1;
                true
            } else {
                false
            }
        }
        fn ws(&mut self) {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                self.i += 1;
            }
        }
        fn value(&mut self, depth: usize) -> bool {
            if depth > 64 {
                return false;
            }
            match self.peek() {
                Some(b'{') => self.members(b'}', |c| c.key_value(depth + 1)),
                Some(b'[') => self.members(b']', |c| c.value(depth + 1)),
                Some(b'"') => self.string(),
                Some(b't') => self.lit(b"true"),
                Some(b'f') => self.lit(b"false"),
                Some(b'n') => self.lit(b"null"),
                Some(b'-' | b'0'..=b'9') => self.number(),
                _ => false,
            }
        }
        /// After the opening bracket (at `self.i`): `member`s separated by commas, each with
        /// white space around it, up to `close`; or nothing but white space before `close`.
        fn members(&mut self, close: u8, mut member: impl FnMut(&mut Self) -> bool) -> bool {
            self.i += 1;
            self.ws();
            if self.eat(close) {
                return true;
            }
            loop {
                self.ws();
                if !member(self) {
                    return false;
                }
                self.ws();
                if self.eat(close) {
                    return true;
                }
                if !self.eat(b',') {
                    return false;
                }
            }
        }
        /// `"key" : value` of an object.
        fn key_value(&mut self, depth: usize) -> bool {
            if !self.string() {
                return false;
            }
            self.ws();
            if !self.eat(b':') {
                return false;
            }
            self.ws();
            self.value(depth)
        }
        fn lit(&mut self, w: &[u8]) -> bool {
            if self.s[self.i..].starts_with(w) {
                self.i += w.len();
                true
            } else {
                false
            }
        }
        fn digits(&mut self) -> usize {
            let st = self.i;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.i += 1;
            }
            self.i - st
        }
        fn number(&mut self) -> bool {
            self.eat(b'-');
            if self.eat(b'0') {
            } else if matches!(self.peek(), Some(b'1'..=b'9')) {
                self.digits();
            } else {
                return false;
            }
            if self.eat(b'.') && self.digits() == 0 {
                return false;
            }
            if self.eat(b'e') || self.eat(b'E') {
                if !self.eat(b'+') {
                    self.eat(b'-');
                }
                if self.digits() == 0 {
                    return false;
                }
            }
            true
        }
        fn hex4(&mut self) -> Option<u32> {
            let h = self.s.get(self.i..self.i + 4)?;
            let t = core::str::from_utf8(h).ok()?;
            if !t.bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            self.i += 4;
            u32::from_str_radix(t, 16).ok()
        }
        fn string(&mut self) -> bool {
            if !self.eat(b'"') {
                return false;
            }
            loop {
                let Some(c) = self.peek() else { return false };
                match c {
                    b'"' => {
                        self.i += 1;
                        return true;
                    }
                    b'\\' => {
                        self.i += 1;
                        match self.peek() {
                            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {
                                self.i += 1
                            }
                            Some(b'u') => {
                                self.i += 1;
                                let Some(v) = self.hex4() else { return false };
                                if (0xdc00..0xe000).contains(&v) {
                                    return false;
                                }
                                if (0xd800..0xdc00).contains(&v) {
                                    if !self.eat(b'\\') || !self.eat(b'u') {
                                        return false;
                                    }
                                    match self.hex4() {
                                        Some(w) if (0xdc00..0xe000).contains(&w) => {}
                                        _ => return false,
                                    }
                                }
                            }
                            _ => return false,
                        }
                    }
                    0..=0x1f => return false,
                    _ => {
                        // One UTF-8 character, checked by core.
                        let len = match c {
                            0x00..=0x7f => 1,
                            0xc0..=0xdf => 2,
                            0xe0..=0xef => 3,
                            0xf0..=0xf7 => 4,
                            _ => return false,
                        };
                        let Some(ch) = self.s.get(self.i..self.i + len) else {
                            return false;
                        };
                        if core::str::from_utf8(ch).is_err() {
                            return false;
                        }
                        self.i += len;
                    }
                }
            }
        }
    }

    /// Whether `b` may follow `s`.
    fn can(s: &JsonState, b: u8) -> bool {
        let mut t = *s;
        t.push(b)
    }

    /// Whether `s` is one valid JSON document (any top-level value, surrounding whitespace).
    fn valid_json(s: &[u8]) -> bool {
        let mut c = Checker { s, i: 0 };
        c.ws();
        if !c.value(0) {
            return false;
        }
        c.ws();
        c.i == s.len()
    }

    /// The automaton's verdict on a whole document: every byte accepted and complete at the end.
    fn accepts(doc: &[u8], max_ws: u8) -> bool {
        let mut s = JsonState::with_max_whitespace(max_ws);
        s.push_bytes(doc) && s.is_complete()
    }

    const VALID: &[&str] = &[
        "{}",
        "[]",
        "{\"a\":1}",
        "[1,2,3]",
        "[-0.5e+10]",
        "[0]",
        "[-0]",
        "[0.0]",
        "[1E5, 2e-3, 3.25E+0]",
        "[12345678901234567890]",
        "{\"a\": [true, false, null], \"b\": {\"c\": \"d\"}}",
        "[[[[[[[[[[]]]]]]]]]]",
        "{\"\":\"\"}",
        "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]",
        "[\"\\u0041\\u00e9\\uFFFF\\ud83d\\ude00\"]",
        "[\"caf\u{e9} \u{1f600} \u{4e2d}\u{6587} \u{10ffff}\"]",
        " {\"a\" : 1 }",
        "{\n  \"a\": 1,\n  \"b\": [ 2 ]\n}",
        "[\"a\", {\"b\": [\"c\", {}]}, [], \"\"]",
        "[1.5, -2, 0e0, -0.0e-0]",
        "[\"\u{7f}\"]",
    ];

    const INVALID: &[&[u8]] = &[
        b"",
        b"{",
        b"[1,]",
        b"{\"a\":1,}",
        b"[01]",
        b"[-01]",
        b"[1.]",
        b"[.5]",
        b"[1e]",
        b"[1e+]",
        b"[-]",
        b"[+1]",
        b"[1 2]",
        b"{\"a\" 1}",
        b"{\"a\":}",
        b"{1:2}",
        b"{\"a\":1]",
        b"[1}",
        b"[tru]",
        b"[True]",
        b"[nul]",
        b"[\"abc]",
        b"[\"a\nb\"]",
        b"[\"a\tb\"]",
        b"[\"\\x\"]",
        b"[\"\\u12\"]",
        b"[\"\\u12G4\"]",
        b"[\"\\ud83d\"]",
        b"[\"\\ud83dx\"]",
        b"[\"\\ud83d\\u0041\"]",
        b"[\"\\ude00\"]",
        b"[\"\xff\"]",
        b"[\"\xc3\"]",
        b"[\"\xc0\x80\"]",
        b"[\"\xed\xa0\x80\"]",
        b"[\"\xf4\x90\x80\x80\"]",
        b"[\"\x80\"]",
        b"{}{}",
        b"{},",
        b"[] x",
        b"[1,,2]",
        b"[,1]",
        b"{,}",
        b"'a'",
        b"\"top-level string\"",
        b"12",
        b"true",
        b"[NaN]",
        b"[Infinity]",
        b"{\"a\":1 \"b\":2}",
    ];

    #[test]
    fn accepts_valid_and_rejects_invalid_documents() {
        for doc in VALID {
            assert!(accepts(doc.as_bytes(), 8), "refused valid {doc:?}");
            assert!(valid_json(doc.as_bytes()), "checker refused {doc:?}");
        }
        for doc in INVALID {
            assert!(
                !accepts(doc, 8),
                "accepted invalid {:?}",
                String::from_utf8_lossy(doc)
            );
        }
        // Top-level scalars are valid JSON but refused on purpose (see the module docs).
        assert!(valid_json(b"12") && valid_json(b"\"s\"") && valid_json(b"true"));
    }

    #[test]
    fn refusal_leaves_the_state_unchanged_and_nothing_follows_completion() {
        let mut s = JsonState::new();
        assert!(s.push_bytes(b"[1"));
        let before = s;
        assert!(!s.push(b'x'));
        assert!(!s.push_bytes(b",]"));
        assert_eq!(s, before);
        assert!(s.push(b']'));
        assert!(s.is_complete());
        for b in 0..=255u8 {
            assert!(!can(&s, b), "byte {b} after completion");
        }
    }

    #[test]
    fn whitespace_runs_are_limited() {
        let mut s = JsonState::with_max_whitespace(2);
        assert!(s.push_bytes(b"{  "));
        assert!(!s.push(b' '));
        assert!(!s.push(b'\n'));
        assert!(s.push_bytes(b"\"a\"\n\t:\r\n1  "));
        assert!(!s.push(b' '));
        assert!(s.push(b'}'));
        assert!(s.is_complete());
        assert!(!accepts(b"[ 1]", 0));
        assert!(accepts(b"[1]", 0));
        // Spaces inside strings are content, not whitespace.
        assert!(accepts(b"[\"a          b\"]", 1));
    }

    #[test]
    fn depth_is_limited() {
        let deep: Vec<u8> = core::iter::repeat_n(b'[', MAX_DEPTH)
            .chain(core::iter::repeat_n(b']', MAX_DEPTH))
            .collect();
        assert!(accepts(&deep, 0));
        let mut s = JsonState::new();
        assert!(s.push_bytes(&deep[..MAX_DEPTH]));
        assert_eq!(s.depth(), MAX_DEPTH);
        assert!(!s.push(b'['));
        assert!(!s.push(b'{'));
        // Scalars still fit at the deepest level.
        assert!(s.push_bytes(b"\"x\",1,null"));
        assert_eq!(s.closing_bytes(), MAX_DEPTH);
        // Mixed stacks close in order.
        assert!(accepts(b"[{\"a\":[{\"b\":[]}]}]", 0));
        assert!(!accepts(b"[{\"a\":[{\"b\":[}]}]", 0));
    }

    /// Closing bytes after each prefix, checked by hand.
    #[test]
    fn closing_bytes_of_known_prefixes() {
        let cases: &[(&[u8], usize)] = &[
            (b"", 2),
            (b" ", 2),
            (b"{", 1),
            (b"[", 1),
            (b"{\"", 4),          // `":0}`
            (b"{\"ab", 4),        // `":0}`
            (b"{\"ab\"", 3),      // `:0}`
            (b"{\"ab\":", 2),     // `0}`
            (b"{\"ab\":[", 2),    // `]}`
            (b"{\"ab\":[1", 2),   // `]}`
            (b"{\"ab\":[1,", 3),  // `0]}`
            (b"{\"ab\":[1.", 3),  // `0]}`
            (b"{\"ab\":[1e", 3),  // `0]}`
            (b"{\"ab\":[1e-", 3), // `0]}`
            (b"{\"ab\":[-", 3),   // `0]}`
            (b"{\"a\":1,", 5),    // `"":0}`
            (b"{\"a\":\"", 2),    // `"}`
            (b"{\"a\":\"\\", 3),  // `"` `"}`
            (b"[\"\\u", 6),       // `0000"]`
            (b"[\"\\uD", 5),      // `000"]`
            (b"[\"\\uD8", 10),    // `00\uDC00"]`
            (b"[\"\\uD83D", 8),   // `\uDC00"]`
            (b"[\"\\uD83D\\", 7),
            (b"[\"\\uD83D\\u", 6),
            (b"[\"\\uD83D\\uDE", 4),
            (b"[\"\xf0", 5), // three continuation bytes, `"]`
            (b"[\"\xf0\x9f", 4),
            (b"[t", 4),
            (b"[fal", 3),
            (b"[nu", 3),
            (b"[[[{", 4),
            (b"{}", 0),
        ];
        for &(p, want) in cases {
            let mut s = JsonState::new();
            assert!(s.push_bytes(p), "{:?}", String::from_utf8_lossy(p));
            assert_eq!(s.closing_bytes(), want, "{:?}", String::from_utf8_lossy(p));
        }
    }

    /// `closing_bytes` is exact: zero exactly when complete, otherwise one more than the best next
    /// byte gives (so there is always a byte that brings completion one closer, and none closer).
    fn check_bellman(s: &JsonState) {
        let cb = s.closing_bytes();
        assert_eq!(cb == 0, s.is_complete(), "{s:?}");
        if cb == 0 {
            return;
        }
        let best = (0..=255u8)
            .filter_map(|b| {
                let mut t = *s;
                t.push(b).then(|| t.closing_bytes())
            })
            .min();
        assert_eq!(best, Some(cb - 1), "{s:?}");
    }

    #[test]
    fn closing_bytes_is_the_exact_shortest_completion() {
        for doc in VALID.iter().map(|d| d.as_bytes()) {
            let mut s = JsonState::with_max_whitespace(8);
            check_bellman(&s);
            for &b in doc {
                assert!(s.push(b));
                check_bellman(&s);
            }
        }
        // Random walks over all bytes: every reachable state, including odd ones.
        let mut rng = crate::sampler::Rng::new(7);
        for _ in 0..300 {
            let mut s = JsonState::new();
            for _ in 0..200 {
                check_bellman(&s);
                let ok: Vec<u8> = (0..=255u8).filter(|&b| can(&s, b)).collect();
                if ok.is_empty() {
                    assert!(s.is_complete());
                    break;
                }
                s.push(ok[(rng.next_u64() % ok.len() as u64) as usize]);
            }
        }
    }

    /// A toy vocabulary: exactly the needed one-byte tokens plus some printable ones, and
    /// multi-byte tokens that cross grammar boundaries, a special token (empty) and an EOG token.
    fn toy_vocab() -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = Vec::new();
        v.push(Vec::new()); // 0: EOG (special, no bytes)
        for b in b" \n{}[]\":,0123456789-+.eEtrfalsnu\\/dDcbABx" {
            v.push(vec![*b]);
        }
        v.push(vec![0x80]);
        v.push(vec![0xa0]);
        for t in [
            "{\"",
            "\":",
            "\": \"",
            "\", \"",
            "\"}",
            "}}",
            "]}",
            "}]",
            "[[",
            "{\n  \"",
            ",\n  ",
            "\n}",
            "  ",
            "   ",
            "true",
            "false",
            "null",
            "\\u",
            "D83D",
            "\\uDE00",
            "\\uDC",
            "\u{e9}",
            "\u{1f600}",
            "\u{4e2d}",
            "\u{10ffff}",
            "1.5e",
            "-0",
            "e+",
            "0.",
            " -",
            "name",
            " cat",
            "\"name\": \"",
            "\"age\": ",
            "\\n",
            "\\\"",
            "\":[",
            "\"]",
            ", \"",
            ",\"",
            "ab\"",
            "\"a",
        ] {
            v.push(t.as_bytes().to_vec());
        }
        v.push(vec![0xe4]); // a lead byte alone (its continuation comes from other tokens)
        v.push(vec![0xf0, 0x9f]);
        v.push(vec![0xb8, 0xad]);
        v
    }

    #[test]
    fn drafts_are_cut_where_the_automaton_refuses() {
        let v = toy_vocab();
        let id = |t: &str| v.iter().position(|p| p.as_slice() == t.as_bytes()).unwrap() as u32;
        let mut j = JsonConstraint::new(&v, &[0]).unwrap();
        let draft = [id("{"), id("\""), id("}"), id("{")];
        // `{"` then `}` inside a string is text: three; the fourth is the closing quote's job.
        assert_eq!(j.valid_prefix(&draft[..3]), 3);
        assert_eq!(j.valid_prefix(&[id("}")]), 0);
        assert!(j.accept(id("[")));
        assert_eq!(j.valid_prefix(&[id("]"), id("]")]), 1);
        assert_eq!(j.valid_prefix(&[]), 0);
    }

    #[test]
    fn vocabulary_checks() {
        let v = toy_vocab();
        assert!(JsonConstraint::new(&v, &[0]).is_ok());
        let without: Vec<Vec<u8>> = v.iter().filter(|p| p.as_slice() != b"}").cloned().collect();
        assert_eq!(
            JsonConstraint::new(&without, &[0]).unwrap_err(),
            JsonError::MissingByteToken { byte: b'}' }
        );
        let without: Vec<Vec<u8>> = v
            .iter()
            .filter(|p| p.as_slice() != [0x80])
            .cloned()
            .collect();
        assert_eq!(
            JsonConstraint::new(&without, &[0]).unwrap_err(),
            JsonError::MissingByteToken { byte: 0x80 }
        );
    }

    #[test]
    fn mask_allows_only_continuations() {
        let v = toy_vocab();
        let mut c = JsonConstraint::new(&v, &[0]).unwrap();
        let id = |s: &str| v.iter().position(|p| p == s.as_bytes()).unwrap() as u32;
        let mut logits = vec![0.0f32; v.len() + 3];
        let allowed = c.mask(&mut logits, 100);
        let ok: Vec<usize> = (0..logits.len()).filter(|&i| logits[i] == 0.0).collect();
        assert_eq!(allowed, ok.len());
        let mut want: Vec<usize> = ["{", "[", " ", "\n", "{\"", "[[", "  "]
            .iter()
            .map(|s| id(s) as usize)
            .collect();
        want.sort();
        assert_eq!(ok, want);
        assert!(c.accept(id("{\"")));
        assert!(!c.accept(id("\n")), "raw newline in a string");
        assert!(c.accept(id("name")));
        assert!(c.accept(id("\":")));
        assert!(c.accept(id("\"a")));
        // `"}` closes the string and the object; in a string `}}` is text.
        logits.fill(0.0);
        c.mask(&mut logits, 100);
        assert_eq!(logits[id("\"}") as usize], 0.0);
        assert_eq!(logits[id("}}") as usize], 0.0);
        assert_eq!(logits[id("\n") as usize], f32::NEG_INFINITY);
        assert_eq!(logits[0], f32::NEG_INFINITY, "EOG before completion");
        // After a value, `}}` would close one container too many, `]}` the wrong one.
        let mut d = c.clone();
        d.reset();
        for t in ["{\"", "name", "\":", "0"] {
            assert!(d.accept(id(t)));
        }
        logits.fill(0.0);
        d.mask(&mut logits, 100);
        assert_eq!(logits[id("}") as usize], 0.0);
        assert_eq!(logits[id("}}") as usize], f32::NEG_INFINITY);
        assert_eq!(logits[id("]}") as usize], f32::NEG_INFINITY);
        // Tight budget: two tokens left, two bytes (`"}`) needed → only tokens after which one
        // byte is enough.
        logits.fill(0.0);
        c.mask(&mut logits, 2);
        let ok: Vec<u32> = (0..v.len() as u32)
            .filter(|&i| logits[i as usize] == 0.0)
            .collect();
        // (`{"`, `, "`: text, then the closing quote.)
        let mut want: Vec<u32> = ["\"", "\"}", "ab\"", "{\"", ", \"", ",\""]
            .iter()
            .map(|s| id(s))
            .collect();
        want.sort();
        assert_eq!(ok, want);
        assert!(c.accept(id("\"}")));
        assert!(c.is_complete());
        logits.fill(0.0);
        assert_eq!(c.mask(&mut logits, 5), 1);
        assert_eq!(logits[0], 0.0, "only EOG after completion");
        assert!(c.accept(0));
        c.reset();
        assert_eq!(c.closing_bytes(), 2);
    }

    /// Random tokens among the allowed ones, with random budgets (some smaller than the shortest
    /// document): with a budget of at least 2 every reply is complete, valid JSON within it.
    #[test]
    fn random_generation_always_ends_in_valid_json() {
        let v = toy_vocab();
        let mut rng = crate::sampler::Rng::new(42);
        for max_ws in [0u8, 2] {
            let mut c = JsonConstraint::new(&v, &[0])
                .unwrap()
                .with_max_whitespace(max_ws);
            let mut logits = vec![0.0f32; v.len()];
            for round in 0..3000 {
                c.reset();
                let budget = (rng.next_u64() % 60) as usize;
                let mut text = Vec::new();
                let mut used = 0;
                while used < budget && !c.is_complete() {
                    logits.fill(0.0);
                    let n = c.mask(&mut logits, budget - used);
                    assert!(n > 0, "round {round}: nothing allowed after {text:?}");
                    let ok: Vec<u32> = (0..v.len() as u32)
                        .filter(|&i| logits[i as usize] == 0.0)
                        .collect();
                    assert_eq!(ok.len(), n);
                    // The grouped, short-cut mask agrees with the definition, token by token.
                    let cb = c.closing_bytes();
                    let limit = (budget - used - 1).max(cb - 1);
                    let slow: Vec<u32> = (0..v.len() as u32)
                        .filter(|&i| {
                            let mut s = *c.state();
                            !v[i as usize].is_empty()
                                && s.push_bytes(&v[i as usize])
                                && s.closing_bytes() <= limit
                        })
                        .collect();
                    assert_eq!(ok, slow);
                    let t = ok[(rng.next_u64() % n as u64) as usize];
                    assert!(c.accept(t));
                    text.extend_from_slice(&v[t as usize]);
                    used += 1;
                }
                if budget >= 2 {
                    assert!(
                        c.is_complete(),
                        "budget {budget}: {:?}",
                        String::from_utf8_lossy(&text)
                    );
                    assert!(valid_json(&text), "{:?}", String::from_utf8_lossy(&text));
                    assert!(core::str::from_utf8(&text).is_ok());
                    assert!(matches!(
                        text.iter().find(|b| !b" \n".contains(b)),
                        Some(&(b'{' | b'['))
                    ));
                } else {
                    assert!(!c.is_complete());
                }
            }
        }
    }
}
