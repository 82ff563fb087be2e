//! `promptcache`: the prompt-cache file read back from the card, through
//! `runtime::promptcache::load_parts` with a tiny KV layout; and a round trip: a state built from
//! the input, saved then loaded, comes back the same.
//!
//! The header carries checksums, so arbitrary bytes stop at the first check. The first input byte
//! therefore says which parts of the file the body makes right before loading it (the magic and
//! header checksum; the layout and a prompt that matches; the payload's checksum), so the fuzzer
//! also reaches the payload reader with every other field its own.

use super::bytes::Bytes;
use super::peak::bounded;
use inference::kv::KvCache;
use runtime::promptcache::{
    self as pc, CacheSink, CacheSource, Fnv64, KvLayout, LoadOutcome, HEADER_BYTES,
};

/// The most one run may allocate: the payload reader's and writer's 64 KiB chunk, the tiny KV
/// cache and a copy of the input (at most 2 KiB).
pub const MAX_ALLOC: usize = 256 << 10;

/// The tiny model: layers, positions, KV width, vocabulary.
pub const LAYERS: usize = 2;
pub const CTX: usize = 8;
pub const KV_DIM: usize = 4;
pub const VOCAB: usize = 8;

/// A prompt-cache file in memory.
#[derive(Debug)]
pub struct MemFile(pub Vec<u8>);

impl CacheSource for MemFile {
    type Error = &'static str;

    fn size(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), &'static str> {
        let o = usize::try_from(offset).map_err(|_| "offset past the file's end")?;
        let src = o
            .checked_add(buf.len())
            .and_then(|end| self.0.get(o..end))
            .ok_or("read past the file's end")?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl CacheSink for MemFile {
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), &'static str> {
        let o = usize::try_from(offset).map_err(|_| "offset past the file's end")?;
        o.checked_add(buf.len())
            .and_then(|end| self.0.get_mut(o..end))
            .ok_or("write past the file's end")?
            .copy_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), &'static str> {
        Ok(())
    }
}

/// Load the input as a file (fixed up as its first byte says), then round-trip a state made from
/// the input.
pub fn run(data: &[u8]) {
    bounded("promptcache", MAX_ALLOC, || {
        load(data);
        round_trip(data);
    });
}

pub fn layout() -> KvLayout {
    KvLayout {
        n_layer: LAYERS as u32,
        kv_dim: KV_DIM as u32,
        elem_bytes: pc::ELEM_BYTES,
        vocab: VOCAB as u32,
    }
}

/// The model key the tiny model's files carry.
pub const KEY: u64 = 0x6c6d_626f_6f74;

fn put(file: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = file.get_mut(at..at + v.len()) {
        d.copy_from_slice(v);
    }
}

fn load(data: &[u8]) {
    let Some((&fix, file)) = data.split_first() else {
        return;
    };
    let mut file = file.to_vec();
    let hb = HEADER_BYTES as usize;
    // The prompt: the header's count (small, so that it fits) of tokens from the payload, or
    // tokens of their own that the file must match.
    let n = file.get(16).map_or(0, |&b| b as usize % (CTX + 2));
    let mut tokens: Vec<u32> = (0..n as u32).collect();
    if fix & 2 != 0 && file.len() >= hb {
        put(&mut file, 0, &pc::MAGIC);
        put(&mut file, 6, &pc::VERSION.to_le_bytes());
        put(&mut file, 8, &KEY.to_le_bytes());
        put(&mut file, 16, &(n as u32).to_le_bytes());
        for (i, t) in tokens.iter_mut().enumerate() {
            let at = hb + 4 * i;
            *t = file
                .get(at..at + 4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        }
        put(&mut file, 24, &pc::tokens_hash(&tokens).to_le_bytes());
        let l = layout();
        for (i, v) in [l.n_layer, l.kv_dim, l.elem_bytes, l.vocab]
            .iter()
            .enumerate()
        {
            put(&mut file, 32 + 4 * i, &v.to_le_bytes());
        }
        let payload = l.payload_bytes(n as u64);
        put(&mut file, 48, &payload.to_le_bytes());
        if fix & 4 != 0 {
            let end = (hb + payload as usize).min(file.len());
            let mut h = Fnv64::new();
            h.update(&file[hb..end]);
            put(&mut file, 56, &h.finish().to_le_bytes());
        }
        put(&mut file, 64, &pc::VALID.to_le_bytes());
    }
    if fix & 1 != 0 && file.len() >= 80 {
        let mut h = Fnv64::new();
        h.update(&file[..72]);
        put(&mut file, 72, &h.finish().to_le_bytes());
    }
    let mut kv = KvCache::new(LAYERS, CTX, KV_DIM);
    let mut logits = [0f32; VOCAB];
    let r = pc::load_parts(&mut MemFile(file), KEY, &tokens, &mut kv, &mut logits);
    if let Ok(LoadOutcome::Restored { tokens: got, .. }) = r {
        assert_eq!(
            got,
            tokens.len(),
            "promptcache: restored another prompt's length"
        );
    }
}

/// A state from the input: saved into a file of the size needed, loaded back equal.
fn round_trip(data: &[u8]) {
    let mut r = Bytes(data);
    let n = 1 + r.u8() as usize % CTX;
    let tokens: Vec<u32> = (0..n).map(|_| r.u32()).collect();
    let logits: Vec<f32> = (0..VOCAB).map(|_| f32::from_bits(r.u32())).collect();
    let mut kv = KvCache::new(LAYERS, CTX, KV_DIM);
    for x in kv.k.iter_mut().chain(kv.v.iter_mut()) {
        *x = r.u16();
    }
    let mut file = MemFile(vec![0; layout().file_bytes(n as u64) as usize]);
    let saved = pc::save_parts(&mut file, KEY, &tokens, &kv, n, &logits);
    assert!(saved.is_ok(), "promptcache: save failed: {saved:?}");
    let mut kv2 = KvCache::new(LAYERS, CTX, KV_DIM);
    let mut logits2 = [0f32; VOCAB];
    let got = pc::load_parts(&mut file, KEY, &tokens, &mut kv2, &mut logits2);
    assert!(
        matches!(got, Ok(LoadOutcome::Restored { tokens, .. }) if tokens == n),
        "promptcache: a fresh save did not load: {got:?}"
    );
    let bits = |l: &[f32]| l.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&logits),
        bits(&logits2),
        "promptcache: logits round trip"
    );
    for layer in 0..LAYERS {
        assert_eq!(
            kv.keys(layer, n),
            kv2.keys(layer, n),
            "promptcache: keys round trip"
        );
        assert_eq!(
            kv.values(layer, n),
            kv2.values(layer, n),
            "promptcache: values round trip"
        );
    }
    // The same file for another model, or another prompt, is a mismatch.
    let other = pc::load_parts(&mut file, KEY ^ 1, &tokens, &mut kv2, &mut logits2);
    assert_eq!(
        other.ok(),
        Some(LoadOutcome::Mismatch { why: pc::WHY_MODEL })
    );
}
