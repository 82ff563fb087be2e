//! The streaming decoder: pieces that split a character emit nothing until it completes, bytes that
//! can never be UTF-8 become U+FFFD, and on any byte stream cut anywhere the output equals
//! `String::from_utf8_lossy` of the whole stream. Plus SentencePiece byte tokens through it.

mod common;

use common::XorShift as Rng;
use inference::tokenizer::{StreamDecoder, Tokenizer};

/// What one `push` emits, collected.
fn feed(sd: &mut StreamDecoder, bytes: &[u8]) -> String {
    let mut out = String::new();
    sd.push(bytes, |s| out.push_str(s));
    out
}

fn feed_token(sd: &mut StreamDecoder, tok: &Tokenizer, id: u32) -> String {
    let mut out = String::new();
    sd.push_token(tok, id, |s| out.push_str(s));
    out
}

fn finish(sd: &mut StreamDecoder) -> String {
    let mut out = String::new();
    sd.finish(|s| out.push_str(s));
    out
}

fn spm() -> Tokenizer {
    let (src, g) = common::open(&common::shared().join("fixtures/vocab/ggml-vocab-llama-spm.gguf"));
    Tokenizer::from_gguf(&g, &src).unwrap()
}

#[test]
fn byte_tokens_complete_a_character() {
    let tok = spm();
    let ids: Vec<u32> = ["<0xE2>", "<0x82>", "<0xAC>"]
        .iter()
        .map(|t| tok.token_id(t.as_bytes()).unwrap())
        .collect();
    assert!(ids.iter().all(|&id| tok.is_byte(id)));
    assert_eq!(tok.token_to_piece(ids[0]), &[0xE2]);

    let mut sd = StreamDecoder::new();
    assert_eq!(feed_token(&mut sd, &tok, ids[0]), "");
    assert!(sd.has_pending());
    assert_eq!(feed_token(&mut sd, &tok, ids[1]), "");
    assert_eq!(feed_token(&mut sd, &tok, ids[2]), "€");
    assert!(!sd.has_pending());
    assert_eq!(finish(&mut sd), "");

    // Text around it: "▁a" is " a" (U+2581 becomes a space).
    let a = tok.token_id("▁a".as_bytes()).unwrap();
    assert_eq!(feed_token(&mut sd, &tok, a), " a");
    assert_eq!(feed_token(&mut sd, &tok, ids[0]), "");
    assert_eq!(
        feed_token(&mut sd, &tok, a),
        "\u{FFFD} a",
        "an interrupted character is U+FFFD"
    );
    assert_eq!(feed_token(&mut sd, &tok, ids[0]), "");
    assert_eq!(
        finish(&mut sd),
        "\u{FFFD}",
        "finish flushes an unfinished character"
    );

    // The SentencePiece encoder falls back to the same byte tokens for characters it lacks.
    let enc = tok.encode("€", false, false).unwrap();
    assert_eq!(tok.decode(&enc), "€".as_bytes());
}

#[test]
fn invalid_sequences() {
    let mut sd = StreamDecoder::new();
    assert_eq!(feed(&mut sd, &[0xFF]), "\u{FFFD}");
    assert_eq!(feed(&mut sd, &[0x80, b'a']), "\u{FFFD}a");
    assert_eq!(
        feed(&mut sd, &[0xC0, 0xAF]),
        "\u{FFFD}\u{FFFD}",
        "overlong lead byte"
    );
    assert_eq!(
        feed(&mut sd, &[0xED, 0xA0, 0x80]),
        "\u{FFFD}\u{FFFD}\u{FFFD}",
        "surrogate"
    );
    assert_eq!(feed(&mut sd, &[0xF0, 0x9F]), "");
    assert_eq!(feed(&mut sd, &[0x98, 0x80]), "😀");
    assert_eq!(
        feed(&mut sd, &[0xF4, 0x90]),
        "\u{FFFD}\u{FFFD}",
        "above U+10FFFF"
    );
    assert_eq!(feed(&mut sd, &[0xE2, 0x82, b'x']), "\u{FFFD}x");
    assert_eq!(finish(&mut sd), "");
}

#[test]
fn any_stream_any_cut_matches_lossy_decoding() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let samples: &[&[u8]] = &[
        "héllo wörld € 😀 中文".as_bytes(),
        &[0xE2, 0x82],
        &[0xF0, 0x9F, 0x98],
        &[0xC3],
    ];
    for round in 0..3000 {
        // Random bytes, biased towards UTF-8 lead and continuation bytes, mixed with real text.
        let mut bytes = Vec::new();
        let len = rng.below(40) as usize;
        while bytes.len() < len {
            match rng.below(4) {
                0 => bytes.push(rng.next() as u8),
                1 => bytes.push(0x80 | (rng.next() as u8 & 0x3F)),
                2 => bytes.push([0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xE2][rng.below(6) as usize]),
                _ => bytes.extend_from_slice(samples[rng.below(samples.len() as u64) as usize]),
            }
        }
        let mut sd = StreamDecoder::new();
        let mut out = String::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let n = 1 + rng.below(5) as usize;
            let end = (pos + n).min(bytes.len());
            sd.push(&bytes[pos..end], |s| out.push_str(s));
            pos = end;
        }
        sd.finish(|s| out.push_str(s));
        assert_eq!(
            out,
            String::from_utf8_lossy(&bytes),
            "round {round}: {bytes:02x?}"
        );
    }
}

#[test]
fn every_token_streams_without_panic() {
    let tok = spm();
    let mut sd = StreamDecoder::new();
    let mut n = 0usize;
    for id in 0..tok.vocab_size() as u32 + 10 {
        sd.push_token(&tok, id, |s| n += s.len());
    }
    sd.finish(|s| n += s.len());
    assert!(n > 0);
}
