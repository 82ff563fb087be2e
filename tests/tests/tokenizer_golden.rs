//! The models' tokenizers (SmolLM2: byte-level BPE, `pre = smollm`; Qwen2.5: `pre = qwen2`;
//! Gemma 3: SentencePiece, 262,144 tokens) against llama.cpp's golden outputs in `shared/golden`:
//! - encoding each `NAME.prompt` (add_special = true, parse_special = true) gives exactly the
//!   `prompt_ids:` line of `NAME.txt`, and decoding those ids gives the prompt's bytes back;
//! - `NAME.out` is the decode of `generated_ids:` (without a final end-of-generation token);
//! - special tokens, end-of-generation tokens and build / encode speed.

mod common;

use common::golden;
use inference::tokenizer::{Model, PreTokenizer, StreamDecoder, Tokenizer};
use std::time::Instant;

fn smollm2() -> Tokenizer {
    let (src, g) = common::open(&common::model_path());
    let t0 = Instant::now();
    let tok = Tokenizer::from_gguf(&g, &src).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("SmolLM2 tokenizer built in {:?}", t0.elapsed());
    tok
}

#[test]
fn golden_prompts_and_outputs() {
    assert!(
        golden::names().len() >= 4,
        "golden cases missing in {}",
        golden::dir().display()
    );
    for (path, cases) in common::cases_by_model() {
        let (src, g) = common::open(&path);
        let tok = Tokenizer::from_gguf(&g, &src).unwrap_or_else(|e| panic!("{e}"));
        for case in &cases {
            check_case(&tok, case);
        }
    }
}

/// A case's prompt ids, and the decode of its output, with the tokenizer of its model.
fn check_case(tok: &Tokenizer, case: &golden::Case) {
    let (name, prompt, want) = (&case.name, &case.prompt, &case.prompt_ids);
    let t0 = Instant::now();
    let got = tok.encode_bytes(prompt, true, true).unwrap();
    eprintln!(
        "{name}: encoded {} bytes in {:?}",
        prompt.len(),
        t0.elapsed()
    );
    assert_eq!(got, *want, "{name}: prompt ids");
    // The BOS the vocabulary adds (Gemma) is not part of the prompt's text.
    let text = match (tok.add_bos(), tok.bos()) {
        (true, Some(bos)) if got.first() == Some(&bos) => &got[1..],
        _ => &got[..],
    };
    assert_eq!(tok.decode(text), *prompt, "{name}: decode(encode(prompt))");

    let mut generated = case.generated_ids.clone();
    if generated.last().is_some_and(|&id| tok.is_eog(id)) {
        generated.pop();
    }
    let out = &case.out;
    assert_eq!(
        String::from_utf8_lossy(&tok.decode(&generated)),
        String::from_utf8_lossy(out),
        "{name}: decode(generated_ids)"
    );
    // The same through the streaming decoder.
    let mut sd = StreamDecoder::new();
    let mut streamed = String::new();
    for &id in &generated {
        sd.push_token(tok, id, |s| streamed.push_str(s));
    }
    sd.finish(|s| streamed.push_str(s));
    assert_eq!(streamed.as_bytes(), &out[..], "{name}: streamed output");
}

#[test]
fn smollm2_special_tokens() {
    let tok = smollm2();
    assert_eq!(tok.model(), Model::ByteLevelBpe);
    assert_eq!(tok.pre_tokenizer(), PreTokenizer::StarCoder);
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!(tok.bos(), Some(1));
    assert_eq!(tok.eos(), Some(2));
    assert!(!tok.add_bos() && !tok.add_eos());
    assert_eq!(tok.token_text(1), Some(&b"<|im_start|>"[..]));
    assert_eq!(tok.token_text(49152), None);
    // No eot_token_id in the file: found by text, "<|im_end|>" first in llama.cpp's list.
    assert_eq!(tok.eot(), Some(2));
    for id in [0, 2] {
        assert!(tok.is_eog(id), "{id} should end generation");
    }
    assert!(!tok.is_eog(1) && !tok.is_eog(504));
    // The whole set as llama.cpp builds it: "<|endoftext|>", "<|im_end|>" (EOS) by their text, and
    // "<reponame>", which llama.cpp's list takes for the FIM repository token.
    assert_eq!(tok.eog_ids(), &[0, 2, 4]);

    // parse_special: the marker is one token; without it, ordinary text.
    assert_eq!(tok.encode("<|im_start|>", false, true).unwrap(), vec![1]);
    let plain = tok.encode("<|im_start|>", false, false).unwrap();
    assert!(plain.len() > 1 && !plain.contains(&1), "{plain:?}");
    assert_eq!(tok.decode(&plain), b"<|im_start|>");
    // Text around special tokens is tokenized on its own.
    let ids = tok.encode("a<|im_end|>b", false, true).unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[1], 2);
    // Control tokens decode to their text.
    assert_eq!(tok.token_to_piece(2), b"<|im_end|>");
    assert_eq!(tok.token_to_piece(u32::MAX), b"");
    // Pieces: GPT-2 characters back to bytes.
    assert_eq!(
        tok.decode(&tok.encode(" héllo\n\tworld", false, false).unwrap()),
        " héllo\n\tworld".as_bytes()
    );
    // Digits are split one by one by the smollm pre-tokenizer.
    let digits = tok.encode("12345", false, false).unwrap();
    assert_eq!(digits.len(), 5);
}

#[test]
fn smollm2_encode_speed() {
    let tok = smollm2();
    let text =
        "The quick brown fox jumps over the lazy dog; ünïcödé, 12345 and <|im_start|> markers. "
            .repeat(200);
    let t0 = Instant::now();
    let ids = tok.encode(&text, true, true).unwrap();
    let dt = t0.elapsed();
    eprintln!(
        "encoded {} bytes into {} tokens in {:?}",
        text.len(),
        ids.len(),
        dt
    );
    assert_eq!(tok.decode(&ids), text.as_bytes());
    assert!(dt.as_millis() < 2000, "encoding is too slow: {dt:?}");
}
