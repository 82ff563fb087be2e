//! `gguf`: the GGUF reader over arbitrary bytes (at most 64 KiB a run).

use super::peak::bounded;
use inference::tokenizer::Tokenizer;
use inference::{Gguf, SliceStorage, Storage};

/// The most one run may allocate: the parsed header (keys, strings, tensor list, the tokenizer's
/// tables), each at most a small multiple of the input's 64 KiB, never what a count claims.
pub const MAX_ALLOC: usize = 16 << 20;

/// Open, read every array, touch every tensor's first row, read the model config and tokenizer.
pub fn run(data: &[u8]) {
    bounded("gguf", MAX_ALLOC, || parse(data));
}

fn parse(data: &[u8]) {
    let src = SliceStorage::new(data);
    let Ok(g) = Gguf::open(&src) else { return };
    for e in &g.metadata {
        if let inference::gguf::Value::Array(_) = e.value {
            if let Ok(it) = g.array(&src, &e.key) {
                for v in it.take(1 << 16) {
                    let _ = v;
                }
            }
        }
    }
    // One small buffer for every tensor: a per-tensor allocation would dominate the run.
    let mut buf = [0u8; 4096];
    for t in &g.tensors {
        let n = t.row_bytes().min(buf.len() as u64) as usize;
        let _ = src.read_at(t.offset, &mut buf[..n]);
    }
    let _ = inference::model::Config::from_gguf(&g);
    let _ = Tokenizer::from_gguf(&g, &src);
}
