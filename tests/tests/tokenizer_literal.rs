//! Text that looks like a byte token stays text: `<0x41>` typed in a prompt must not become the byte
//! token for "A" (byte tokens are not special tokens, with or without special-token parsing).

mod common;

use inference::tokenizer::Tokenizer;

fn tok(name: &str) -> Tokenizer {
    let (src, g) = common::open(&common::shared().join("fixtures/vocab").join(name));
    Tokenizer::from_gguf(&g, &src).unwrap()
}

#[test]
fn literal_byte_token_text_is_text() {
    let spm = tok("ggml-vocab-llama-spm.gguf");
    let byte_a = spm
        .token_id(b"<0x41>")
        .expect("the SentencePiece vocabulary has byte tokens");
    for special in [false, true] {
        let ids = spm.encode("<0x41>", false, special).unwrap();
        assert!(!ids.contains(&byte_a), "special={special}: {ids:?}");
        assert!(ids.len() > 1);
        let text = spm.decode(&ids);
        assert_eq!(String::from_utf8_lossy(&text).trim_start(), "<0x41>");
    }
    // While the byte token itself decodes to the byte.
    assert_eq!(spm.token_to_piece(byte_a), b"A");

    let bpe = tok("ggml-vocab-gpt-2.gguf");
    for special in [false, true] {
        let ids = bpe
            .encode("<0x41> and <|endoftext|>", false, special)
            .unwrap();
        let text = bpe.decode(&ids);
        assert_eq!(String::from_utf8_lossy(&text), "<0x41> and <|endoftext|>");
        assert_eq!(ids.len() > 4, true);
    }
}
