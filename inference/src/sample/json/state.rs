//! The JSON grammar as a pushdown automaton over bytes ([`JsonState`], see the module docs of
//! [`super`]).

use super::{DEFAULT_MAX_WHITESPACE, MAX_DEPTH};

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

    /// Between characters of a string, where plain text leaves the state as it is.
    pub(super) fn between_string_chars(&self) -> bool {
        matches!(self.mode, Mode::Str { s: Str::Plain, .. })
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
    pub(super) fn step(&mut self, b: u8) -> bool {
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
