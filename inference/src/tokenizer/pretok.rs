//! Pre-tokenizers of byte-level BPE: split text into the words BPE merges within.
//!
//! llama.cpp describes each pre-tokenizer as a list of regular expressions applied in turn, each one
//! splitting every piece the previous one produced (matches and the text between matches both
//! become pieces). This module implements those expressions by hand, as [`Stage`]s over code points
//! and their classes ([`super::unicode::flags`]):
//!
//! - [`Stage::Gpt2`], the GPT-2 rule: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//! - [`Stage::Llama3`], the llama-3 rule: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,N}|
//!   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+` with N = 3 (llama 3) or 1 (qwen2)
//! - [`Stage::Isolate`] and [`Stage::Runs`], a one-character class, alone or as runs (`\p{N}`,
//!   `\p{N}+`, `[\p{P}\$\+<=>\^~\|]+`)
//! - [`Stage::AsciiDigits3`], `[0-9][0-9][0-9]`
//!
//! The first two follow llama.cpp's hand-written matchers (`unicode.cpp`), quirks included: a
//! lookahead never sees past the end of the current piece, and a code point that matches no branch
//! is a piece of its own. The others are what a backtracking regex engine finds, which is what
//! llama.cpp runs for them: leftmost matches, the text between two matches kept as one piece. For
//! qwen2 llama.cpp runs its expression through `std::regex`; on every input it gives the same pieces
//! as the llama-3 matcher with one digit per number, which is how it is done here.

use super::unicode::{flags, LETTER, NUMBER, PUNCTUATION, WHITESPACE};
use alloc::vec::Vec;

/// One split rule (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Gpt2,
    /// The llama-3 rule; the number branch takes at most `max_digits` code points.
    Llama3 {
        max_digits: usize,
    },
    /// Each code point of the class is a piece of its own.
    Isolate(Class),
    /// Each maximal run of code points of the class is a piece.
    Runs(Class),
    /// Each `[0-9][0-9][0-9]` (scanning left to right) is a piece.
    AsciiDigits3,
}

/// A character class of [`Stage::Isolate`] and [`Stage::Runs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// `\p{N}`
    Number,
    /// `[\p{P}\$\+<=>\^~\|]`
    PunctAndSome,
}

impl Class {
    fn contains(self, cp: u32, f: u16) -> bool {
        match self {
            Class::Number => f & NUMBER != 0,
            Class::PunctAndSome => {
                f & PUNCTUATION != 0
                    || matches!(cp, 0x24 | 0x2B | 0x3C | 0x3D | 0x3E | 0x5E | 0x7E | 0x7C)
            }
        }
    }
}

/// Code points of one text with their classes and byte offsets.
struct Text {
    cps: Vec<u32>,
    flags: Vec<u16>,
    /// Byte offset of each code point, plus the text length at the end.
    offs: Vec<usize>,
}

const OUT_OF_RANGE: u32 = u32::MAX;

/// The piece `[ini, end)` of a text, as seen by one matcher: nothing exists outside it.
struct Piece<'a> {
    t: &'a Text,
    ini: usize,
    end: usize,
}

impl Piece<'_> {
    fn cpt(&self, pos: usize) -> u32 {
        if pos >= self.ini && pos < self.end {
            self.t.cps[pos]
        } else {
            OUT_OF_RANGE
        }
    }
    fn flags(&self, pos: usize) -> u16 {
        if pos >= self.ini && pos < self.end {
            self.t.flags[pos]
        } else {
            0
        }
    }
}

/// Collects piece boundaries: `cut(end)` closes the piece running from the previous cut.
struct Cuts<'o> {
    prev: usize,
    out: &'o mut Vec<(usize, usize)>,
}

impl Cuts<'_> {
    /// Close the piece at `end`; returns its length in code points.
    fn cut(&mut self, end: usize) -> usize {
        let len = end.saturating_sub(self.prev);
        if len > 0 {
            self.out.push((self.prev, end));
        }
        self.prev = end;
        len
    }
}

/// Split `text` by `stages`; returns byte ranges of the words, in order, covering the text.
pub fn split(text: &str, stages: &[Stage]) -> Vec<(usize, usize)> {
    let mut t = Text {
        cps: Vec::new(),
        flags: Vec::new(),
        offs: Vec::new(),
    };
    for (off, c) in text.char_indices() {
        t.cps.push(c as u32);
        t.flags.push(flags(c as u32));
        t.offs.push(off);
    }
    t.offs.push(text.len());

    let mut pieces: Vec<(usize, usize)> = Vec::new();
    if !t.cps.is_empty() {
        pieces.push((0, t.cps.len()));
    }
    let mut next = Vec::new();
    for &stage in stages {
        next.clear();
        for &(ini, end) in &pieces {
            let p = Piece { t: &t, ini, end };
            let mut cuts = Cuts {
                prev: ini,
                out: &mut next,
            };
            match stage {
                Stage::Gpt2 => gpt2(&p, &mut cuts),
                Stage::Llama3 { max_digits } => llama3(&p, &mut cuts, max_digits.max(1)),
                Stage::Isolate(class) => class_split(&p, &mut cuts, class, false),
                Stage::Runs(class) => class_split(&p, &mut cuts, class, true),
                Stage::AsciiDigits3 => digits3(&p, &mut cuts),
            }
            // Whatever a matcher left (it never does for the hand-written ones) stays one piece.
            cuts.cut(end);
        }
        core::mem::swap(&mut pieces, &mut next);
    }
    pieces
        .iter()
        .map(|&(a, b)| (t.offs[a], t.offs[b]))
        .collect()
}

fn is_ws(f: u16) -> bool {
    f & WHITESPACE != 0
}
fn is_letter(f: u16) -> bool {
    f & LETTER != 0
}
fn is_number(f: u16) -> bool {
    f & NUMBER != 0
}

/// Length of a contraction (`'s 't 'm 'd 're 've 'll`) at `pos`, if one starts there.
fn contraction(p: &Piece, pos: usize, ignore_case: bool) -> Option<usize> {
    if p.cpt(pos) != '\'' as u32 || pos + 1 >= p.end {
        return None;
    }
    let lower = |c: u32| {
        if ignore_case && (0x41..=0x5A).contains(&c) {
            c + 0x20
        } else {
            c
        }
    };
    let c1 = lower(p.cpt(pos + 1));
    if [b's', b't', b'm', b'd'].iter().any(|&x| c1 == x as u32) {
        return Some(2);
    }
    if pos + 2 < p.end {
        let c2 = lower(p.cpt(pos + 2));
        let pair = |a: u8, b: u8| c1 == a as u32 && c2 == b as u32;
        if pair(b'r', b'e') || pair(b'v', b'e') || pair(b'l', b'l') {
            return Some(3);
        }
    }
    None
}

/// Count of whitespace code points from `pos`, and the end of the last `\r`/`\n` among them (0 if none).
fn whitespace_run(p: &Piece, pos: usize) -> (usize, usize) {
    let mut n = 0;
    let mut last_rn = 0;
    while is_ws(p.flags(pos + n)) {
        let c = p.cpt(pos + n);
        if c == '\r' as u32 || c == '\n' as u32 {
            last_rn = pos + n + 1;
        }
        n += 1;
    }
    (n, last_rn)
}

/// The last branches of both hand-written rules, at `pos` where `n_ws` whitespace code points start:
/// `\s+(?!\S)` (leave the last space to the word that follows), `\s+`, else the code point alone.
/// Cuts the piece and returns its end.
fn spaces_or_one(p: &Piece, cuts: &mut Cuts, pos: usize, n_ws: usize) -> usize {
    let end = if n_ws > 1 && p.cpt(pos + n_ws) != OUT_OF_RANGE {
        pos + n_ws - 1
    } else if n_ws > 0 {
        pos + n_ws
    } else {
        pos + 1
    };
    cuts.cut(end);
    end
}

fn gpt2(p: &Piece, cuts: &mut Cuts) {
    let mut pos = p.ini;
    while pos < p.end {
        let c = p.cpt(pos);
        let f = p.flags(pos);

        if let Some(n) = contraction(p, pos, false) {
            pos += cuts.cut(pos + n);
            continue;
        }

        // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the class is decided after the optional space.
        let space = c == ' ' as u32;
        let f2 = if space { p.flags(pos + 1) } else { f };
        let run: Option<fn(u16) -> bool> = if is_letter(f2) {
            Some(is_letter)
        } else if is_number(f2) {
            Some(is_number)
        } else if f2 != 0 && !is_ws(f2) {
            Some(|f| f != 0 && !is_ws(f) && !is_letter(f) && !is_number(f))
        } else {
            None
        };
        if let Some(in_class) = run {
            pos += usize::from(space);
            while in_class(p.flags(pos)) {
                pos += 1;
            }
            cuts.cut(pos);
            continue;
        }

        let (n_ws, _) = whitespace_run(p, pos);
        pos = spaces_or_one(p, cuts, pos, n_ws);
    }
}

fn llama3(p: &Piece, cuts: &mut Cuts, max_digits: usize) {
    let mut pos = p.ini;
    while pos < p.end {
        let c = p.cpt(pos);
        let f = p.flags(pos);

        if let Some(n) = contraction(p, pos, true) {
            pos += cuts.cut(pos + n);
            continue;
        }

        // `[^\r\n\p{L}\p{N}]?\p{L}+`
        if !(c == '\r' as u32 || c == '\n' as u32 || is_number(f))
            && (is_letter(f) || is_letter(p.flags(pos + 1)))
        {
            pos += 1;
            while is_letter(p.flags(pos)) {
                pos += 1;
            }
            cuts.cut(pos);
            continue;
        }

        // `\p{N}{1,max}`
        if is_number(f) {
            let mut ini = pos;
            while is_number(p.flags(pos)) {
                pos += 1;
                if pos - ini >= max_digits {
                    cuts.cut(pos);
                    ini = pos;
                }
            }
            cuts.cut(pos);
            continue;
        }

        // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (the current code point is in the piece, so its flags are set)
        let space = c == ' ' as u32;
        let f2 = if space { p.flags(pos + 1) } else { f };
        if !(is_ws(f2) || is_letter(f2) || is_number(f2)) && f != 0 {
            pos += usize::from(space);
            let mut g = f2;
            while !(is_ws(g) || is_letter(g) || is_number(g)) && g != 0 {
                pos += 1;
                g = p.flags(pos);
            }
            while p.cpt(pos) == '\r' as u32 || p.cpt(pos) == '\n' as u32 {
                pos += 1;
            }
            cuts.cut(pos);
            continue;
        }

        let (n_ws, last_rn) = whitespace_run(p, pos);
        // `\s*[\r\n]+`
        if last_rn > 0 {
            pos = last_rn;
            cuts.cut(pos);
            continue;
        }
        pos = spaces_or_one(p, cuts, pos, n_ws);
    }
}

/// Matches of a one-class pattern (`X` or `X+`); text between matches stays one piece.
fn class_split(p: &Piece, cuts: &mut Cuts, class: Class, runs: bool) {
    let t = p.t;
    let mut pos = p.ini;
    while pos < p.end {
        if class.contains(t.cps[pos], t.flags[pos]) {
            cuts.cut(pos);
            pos += 1;
            if runs {
                while pos < p.end && class.contains(t.cps[pos], t.flags[pos]) {
                    pos += 1;
                }
            }
            cuts.cut(pos);
        } else {
            pos += 1;
        }
    }
}

/// Matches of `[0-9][0-9][0-9]`, leftmost first.
fn digits3(p: &Piece, cuts: &mut Cuts) {
    let digit = |i: usize| i < p.end && (0x30..=0x39).contains(&p.t.cps[i]);
    let mut pos = p.ini;
    while pos < p.end {
        if digit(pos) && digit(pos + 1) && digit(pos + 2) {
            cuts.cut(pos);
            pos += 3;
            cuts.cut(pos);
        } else {
            pos += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn words<'a>(text: &'a str, stages: &[Stage]) -> Vec<&'a str> {
        split(text, stages)
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect()
    }

    #[test]
    fn gpt2_rule() {
        assert_eq!(
            words("Hello world", &[Stage::Gpt2]),
            vec!["Hello", " world"]
        );
        assert_eq!(
            words("I'm  here 123!!", &[Stage::Gpt2]),
            vec!["I", "'m", " ", " here", " 123", "!!"]
        );
        assert_eq!(words("a  ", &[Stage::Gpt2]), vec!["a", "  "]);
        assert_eq!(words("I'M", &[Stage::Gpt2]), vec!["I", "'", "M"]);
    }

    #[test]
    fn llama3_rule() {
        let s = [Stage::Llama3 { max_digits: 3 }];
        assert_eq!(
            words("I'M 12345 (x)\n\n y", &s),
            vec!["I", "'M", " ", "123", "45", " (", "x", ")\n\n", " y"]
        );
        assert_eq!(words("a \n b", &s), vec!["a", " \n", " b"]);
    }

    #[test]
    fn smollm_rule() {
        let s = [Stage::Isolate(Class::Number), Stage::Gpt2];
        assert_eq!(words("ab 12c", &s), vec!["ab", " ", "1", "2", "c"]);
    }
}
