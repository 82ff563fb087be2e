//! `tokenizer`: text through both fixture tokenizers, and token ids through the stream decoder.

use super::peak::bounded;
use super::vocab::{gpt2, spm};
use inference::tokenizer::StreamDecoder;

/// The most one run may allocate: token lists and pieces of a 4 KiB input.
pub const MAX_ALLOC: usize = 4 << 20;

/// The first byte picks GPT-2 BPE or SentencePiece and the flags; the rest is text to encode and
/// decode, and then token ids for the streaming decoder.
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let tok = if sel & 1 == 0 { gpt2() } else { spm() };
    bounded("tokenizer", MAX_ALLOC, || {
        if let Ok(ids) = tok.encode_bytes(rest, sel & 4 != 0, sel & 2 != 0) {
            let _ = tok.decode(&ids);
        }
        let mut dec = StreamDecoder::new();
        let mut out = String::new();
        for c in rest.chunks(2) {
            let id = u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32
                % tok.vocab_size() as u32;
            dec.push(tok.token_to_piece(id), |s| out.push_str(s));
        }
        dec.finish(|s| out.push_str(s));
    });
}
