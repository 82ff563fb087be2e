//! llama.cpp's tokenizer test vectors (test-tokenizer-0): for each vocabulary in
//! `shared/fixtures/vocab`, every string of `NAME.gguf.inp` must tokenize (no BOS/EOS, special tokens
//! not parsed) to exactly the ids on the same line of `NAME.gguf.out`.
//!
//! Plus the round trip: `decode(encode(s)) == s` for every string, where `decode` concatenates the
//! token pieces and, for SentencePiece (`add_space_prefix`), drops the one leading space the encoder
//! added, as llama.cpp's detokenizer does. For the vocabularies without
//! `clean_up_tokenization_spaces` (llama-spm, qwen2) llama.cpp's `detokenize` gives the text back as
//! well; gpt-2 and llama-bpe remove spaces before punctuation there (`tokenizer_special` checks that).

mod common;

use inference::tokenizer::{Model, Tokenizer};
use std::time::Instant;

const SEPARATOR: &[u8] = b"\n__ggml_vocab_test__\n";

fn load(name: &str) -> (Tokenizer, Vec<Vec<u8>>, Vec<Vec<u32>>) {
    let dir = common::shared().join("fixtures/vocab");
    let gguf = dir.join(format!("ggml-vocab-{name}.gguf"));
    let (src, g) = common::open(&gguf);
    let t0 = Instant::now();
    let tok = Tokenizer::from_gguf(&g, &src).unwrap_or_else(|e| panic!("{name}: {e}"));
    eprintln!(
        "{name}: built {} tokens in {:?}",
        tok.vocab_size(),
        t0.elapsed()
    );

    let inp = std::fs::read(dir.join(format!("ggml-vocab-{name}.gguf.inp"))).unwrap();
    // Every string is followed by the separator, the last one too.
    assert!(
        inp.ends_with(SEPARATOR),
        "{name}.inp does not end with a separator"
    );
    let body = &inp[..inp.len() - SEPARATOR.len()];
    let mut strings = Vec::new();
    let mut rest = body;
    loop {
        match rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
            Some(p) => {
                strings.push(rest[..p].to_vec());
                rest = &rest[p + SEPARATOR.len()..];
            }
            None => {
                strings.push(rest.to_vec());
                break;
            }
        }
    }

    let out = std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf.out"))).unwrap();
    let expected: Vec<Vec<u32>> = out
        .lines()
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(strings.len(), 46, "{name}: strings in .inp");
    assert_eq!(expected.len(), 46, "{name}: lines in .out");
    (tok, strings, expected)
}

fn check_vocab(name: &str, model: Model) {
    let (tok, strings, expected) = load(name);
    assert_eq!(tok.model(), model);
    let mut matched = 0;
    let mut failures = Vec::new();
    let t0 = Instant::now();
    for (s, want) in strings.iter().zip(&expected) {
        let got = tok
            .encode_bytes(s, false, false)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if &got == want {
            matched += 1;
        } else {
            failures.push(format!(
                "  {:?}\n    want {want:?}\n    got  {got:?}",
                String::from_utf8_lossy(s)
            ));
        }
    }
    eprintln!("{name}: encoded 46 strings in {:?}", t0.elapsed());
    eprintln!("{name}: {matched}/46 match llama.cpp");
    assert!(
        failures.is_empty(),
        "{name}: {matched}/46 match; mismatches:\n{}",
        failures.join("\n")
    );

    // Round trip.
    for s in &strings {
        let ids = tok.encode_bytes(s, false, false).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&tok.decode(&ids)),
            String::from_utf8_lossy(s),
            "{name}: decode(encode(s)) != s"
        );
        // llama.cpp's detokenize: the same text unless the vocabulary cleans up spaces.
        let det = tok.detokenize(&ids, false, true);
        if !matches!(name, "gpt-2" | "llama-bpe") {
            assert_eq!(det, *s, "{name}: detokenize(encode(s)) != s");
        }
    }
}

/// One test per vocabulary: `test name => (vocabulary, model)`.
macro_rules! vocab_tests {
    ($($test:ident => ($name:literal, $model:ident),)*) => {$(
        #[test]
        fn $test() {
            check_vocab($name, Model::$model);
        }
    )*};
}

vocab_tests! {
    llama_spm => ("llama-spm", SentencePiece),
    gpt_2 => ("gpt-2", ByteLevelBpe),
    qwen2 => ("qwen2", ByteLevelBpe),
    llama_bpe => ("llama-bpe", ByteLevelBpe),
}
