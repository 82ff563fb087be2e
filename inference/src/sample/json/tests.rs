//! The automaton against an independent checker, and the constraint on toy vocabularies.

use super::*;
use crate::sample::stop::LogitsFilter;
use alloc::string::String;
use alloc::vec;
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
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 1,
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
    let mut rng = crate::sample::sampler::Rng::new(7);
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
    let mut rng = crate::sample::sampler::Rng::new(42);
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
