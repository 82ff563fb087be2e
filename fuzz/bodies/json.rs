//! `json`: token streams through the JSON constraint (`inference::sample::json`), over a small
//! real vocabulary: the first [`VOCAB`] tokens of GPT-2's (its 256 byte tokens and the first
//! merges, as `token_to_piece` prints them) and an end-of-text token after them. A table the size
//! of a whole vocabulary would make masking cost 0.3 ms a token, far from the 17 k runs/s the
//! campaign needs.
//!
//! The input is 16-bit words: a word with the top two bits set masks the logits (once a run) and
//! takes the `n`-th token the mask allows, as the sampler would; a word with only the top bit set
//! draws a one-byte token the automaton takes; any other word offers that token id to `accept`
//! unmasked. Checked, with `serde_json` as the independent judge: the mask leaves a token while
//! the value is incomplete; every token it allows continues the document; the text accepted so
//! far is always a prefix of some JSON document; once the constraint calls the value complete,
//! the text parses.

use super::peak::bounded;
use super::vocab::gpt2;
use inference::sample::json::JsonConstraint;
use std::cell::RefCell;

/// Tokens of the vocabulary taken from GPT-2's; token `VOCAB` is the end of generation.
pub const VOCAB: usize = 512;

/// The most one run may allocate: the text accepted (at most the input's 512 words times the
/// longest piece), its copy with short numbers and the checker's parse of it.
pub const MAX_ALLOC: usize = 256 << 10;

thread_local! {
    static CONSTRAINT: RefCell<JsonConstraint> = RefCell::new(build());
}

pub fn build() -> JsonConstraint {
    let tok = gpt2();
    let pieces = (0..=VOCAB as u32).map(|id| {
        if (id as usize) < VOCAB {
            tok.token_to_piece(id).to_vec()
        } else {
            Vec::new()
        }
    });
    JsonConstraint::new(pieces, &[VOCAB as u32])
        .expect("GPT-2's first tokens make a JSON vocabulary")
}

/// Whether `text` is a whole JSON value (`Some(true)`), a prefix of one (`Some(false)`), or
/// neither (`None`), by `serde_json` (into a `Value`, which checks UTF-8 and surrogate pairs).
fn judge(text: &[u8]) -> Option<bool> {
    match serde_json::from_slice::<serde_json::Value>(&small_numbers(text)) {
        Ok(_) => Some(true),
        Err(e) if e.is_eof() => Some(false),
        Err(_) => None,
    }
}

/// `text` with every run of digits outside strings shortened to one digit (two for a run of more
/// than one starting with `0`, which stays invalid where it was): JSON allows numbers of any
/// size, a `Value` only those within f64, and the grammar does not depend on the digits' count.
fn small_numbers(text: &[u8]) -> Vec<u8> {
    let (mut out, mut in_str, mut esc, mut run) = (Vec::with_capacity(text.len()), false, false, 0);
    for &b in text {
        if in_str {
            (in_str, esc) = (esc || b != b'"', !esc && b == b'\\');
        } else if b == b'"' {
            in_str = true;
        } else if b.is_ascii_digit() {
            run += 1;
            let keep = run == 1 || (run == 2 && out.last() == Some(&b'0'));
            if keep {
                out.push(if run == 1 && b != b'0' { b'1' } else { b'0' });
            }
            continue;
        }
        run = 0;
        out.push(b);
    }
    out
}

/// Offer the input's tokens to a fresh reply.
pub fn run(data: &[u8]) {
    CONSTRAINT.with(|c| {
        let mut c = c.borrow_mut();
        bounded("json", MAX_ALLOC, || stream(&mut c, data));
    });
}

/// Full masks per run at most: a mask, and checking every token it allows, is a pass over the
/// whole vocabulary.
const MASKS: usize = 1;

fn stream(c: &mut JsonConstraint, data: &[u8]) {
    c.reset();
    let mut text = Vec::new();
    let mut logits = [0f32; VOCAB + 1];
    let (mut masks, mut checked_complete) = (0, false);
    let words = data
        .chunks(2)
        .map(|w| u16::from_le_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    for (i, w) in words.enumerate() {
        let t = if w & 0xC000 == 0xC000 && masks < MASKS {
            masks += 1;
            masked(c, &mut logits, w, i)
        } else if w & 0x8000 != 0 {
            byte_draw(c, w)
        } else {
            // Any id, some beyond the vocabulary.
            Some((w as u32) % (VOCAB as u32 + 8))
        };
        let Some(t) = t else { continue };
        let bytes = c.token_bytes(t).to_vec();
        if c.accept(t) {
            text.extend_from_slice(&bytes);
        }
        if c.is_complete() && !checked_complete {
            checked_complete = true;
            assert_eq!(
                judge(&text),
                Some(true),
                "json: the constraint calls {:?} complete",
                String::from_utf8_lossy(&text)
            );
        }
    }
    // Every prefix of a prefix is a prefix: checking the whole text checks every step.
    assert!(
        judge(&text).is_some(),
        "json: the constraint accepted {:?}, no prefix of a JSON document",
        String::from_utf8_lossy(&text)
    );
}

/// The mask with a budget from `w`: it allows a token while the value is incomplete, every token
/// it allows continues the document; returns its `n`-th allowed token.
fn masked(c: &JsonConstraint, logits: &mut [f32], w: u16, i: usize) -> Option<u32> {
    let remaining = 1 + ((w >> 9) & 31) as usize * 4;
    logits.fill(0.0);
    let allowed = c.mask(logits, remaining);
    if !c.is_complete() {
        assert!(allowed > 0, "json: the mask allows nothing at step {i}");
    }
    let mut kept = 0;
    let mut pick = None;
    for (t, l) in logits.iter().enumerate().filter(|(_, l)| l.is_finite()) {
        let _ = l;
        let mut s = *c.state();
        assert!(
            c.is_complete() || s.push_bytes(c.token_bytes(t as u32)),
            "json: token {t} ({:?}) allowed by the mask but refused",
            c.token_bytes(t as u32)
        );
        if kept == (w & 0x1FF) as usize % allowed.max(1) {
            pick = Some(t as u32);
        }
        kept += 1;
    }
    assert_eq!(
        kept, allowed,
        "json: the mask counted {allowed} tokens, left {kept}"
    );
    pick
}

/// A one-byte token (GPT-2's first 256 are the bytes) that continues the document: the first
/// the automaton takes from byte `w` on, as a sampler would draw one (testing all 256 every time
/// made the target ten times slower).
fn byte_draw(c: &JsonConstraint, w: u16) -> Option<u32> {
    (0..256u32).map(|k| (w as u32 + k) % 256).find(|&t| {
        let mut s = *c.state();
        c.token_bytes(t).len() == 1 && s.push_bytes(c.token_bytes(t))
    })
}
