//! The vocabulary fixtures the `tokenizer`, `chat` and `json` targets load once per process.

use inference::tokenizer::Tokenizer;
use inference::{Gguf, SliceStorage};
use std::sync::OnceLock;

fn load(name: &str) -> Tokenizer {
    let dir = std::env::var("LMBOOT_SHARED")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared").into());
    let bytes = std::fs::read(format!("{dir}/fixtures/vocab/{name}"))
        .expect("vocab fixture (set LMBOOT_SHARED)");
    let src = SliceStorage::new(&bytes);
    let g = Gguf::open(&src).expect("vocab GGUF");
    Tokenizer::from_gguf(&g, &src).expect("vocab tokenizer")
}

/// GPT-2's BPE tokenizer, loaded on first use.
pub fn gpt2() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| load("ggml-vocab-gpt-2.gguf"))
}

/// Llama's SentencePiece tokenizer, loaded on first use.
pub fn spm() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| load("ggml-vocab-llama-spm.gguf"))
}
