//! The code each fuzz target runs, shared by the fuzz binaries (`fuzz/fuzz_targets/`) and the
//! regression test that replays saved crash inputs (`tests/tests/fuzz_regressions.rs`).
#![allow(dead_code)]

use drivers::block::RamDisk;
use drivers::fat::Volume;
use inference::tokenizer::{StreamDecoder, Tokenizer};
use inference::{Gguf, SliceStorage, Storage};
use std::sync::OnceLock;

/// The GGUF reader: open, read every array, touch every tensor's first row, read the model config.
pub fn gguf(data: &[u8]) {
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
    for t in &g.tensors {
        let mut buf = vec![0u8; t.row_bytes().min(4096) as usize];
        let _ = src.read_at(t.offset, &mut buf);
    }
    let _ = inference::model::Config::from_gguf(&g);
    let _ = Tokenizer::from_gguf(&g, &src);
}

/// The FAT32 reader over an in-memory card: mount, list, open and read.
pub fn fat(data: &[u8]) {
    let mut dev = RamDisk::new(data);
    let Ok(vol) = Volume::mount(&mut dev) else {
        return;
    };
    if let Ok(entries) = vol.list_dir(&mut dev, "/") {
        for e in entries.iter().take(16) {
            let path = format!("/{}", e.name);
            if let Ok(f) = vol.open(&mut dev, &path) {
                let mut buf = vec![0u8; f.size().min(1 << 16) as usize];
                let _ = f.read_at(&mut dev, 0, &mut buf);
            }
            let _ = vol.list_dir(&mut dev, &path);
        }
    }
    let _ = vol.open(&mut dev, "/model.gguf");
    let _ = vol.open(&mut dev, "/a/b/c/lmboot.txt");
}

fn load(name: &str) -> Tokenizer {
    let dir = std::env::var("LMBOOT_SHARED")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared").into());
    let bytes = std::fs::read(format!("{dir}/fixtures/vocab/{name}"))
        .expect("vocab fixture (set LMBOOT_SHARED)");
    let src = SliceStorage::new(&bytes);
    let g = Gguf::open(&src).expect("vocab GGUF");
    Tokenizer::from_gguf(&g, &src).expect("vocab tokenizer")
}

fn toks() -> &'static [Tokenizer; 2] {
    static T: OnceLock<[Tokenizer; 2]> = OnceLock::new();
    T.get_or_init(|| {
        [
            load("ggml-vocab-gpt-2.gguf"),
            load("ggml-vocab-llama-spm.gguf"),
        ]
    })
}

/// Both tokenizers: the first byte picks GPT-2 BPE or SentencePiece and the flags; the rest is
/// text to encode and decode, and then token ids for the streaming decoder.
pub fn tokenizer(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let tok = &toks()[(sel & 1) as usize];
    if let Ok(ids) = tok.encode_bytes(rest, sel & 4 != 0, sel & 2 != 0) {
        let _ = tok.decode(&ids);
    }
    let mut dec = StreamDecoder::new();
    let mut out = String::new();
    for c in rest.chunks(2) {
        let id =
            u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32 % tok.vocab_size() as u32;
        dec.push(tok.token_to_piece(id), |s| out.push_str(s));
    }
    dec.finish(|s| out.push_str(s));
}

/// The `lmboot.txt` parser.
pub fn config(data: &[u8]) {
    if let Ok(c) = runtime::config::Config::parse(data) {
        let _ = c.sampler.validate();
    }
}
