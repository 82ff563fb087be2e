//! Prompt reuse: the state after a (system) prompt — the KV cache of its positions and the logits
//! of its last token — kept in a preallocated file on the card, so the next boot with the same
//! model and prompt skips running it.
//!
//! # Design
//!
//! - **No file-system writes.** The file (e.g. `/lmboot.kv`) is made on the PC, full size, before
//!   the card goes in the board; the kernel only overwrites its existing blocks
//!   ([`drivers::fat::File::write_at`]): no cluster is allocated, no FAT, directory entry or FSInfo
//!   changes. The caller saves only when its configuration says `allow_write = true`.
//! - **Keyed, never trusted blindly.** The header holds a 64-bit key of the model (the caller's,
//!   e.g. [`model_key`] over the GGUF header and a sample of the weights), the prompt's token count
//!   and hash (and the payload holds the tokens themselves, compared exactly), the KV layout
//!   (layers, KV width, positions, element size, logits) and a checksum of the payload. Anything
//!   different is a [`LoadOutcome::Mismatch`] naming what differed, and the caller runs the prompt
//!   again and saves; a stale state is never used silently.
//! - **Safe against a power cut.** [`save`] first writes the header with the "valid" flag clear
//!   (so an old save is invalid from then on), then the payload, flushes, and only then writes the
//!   header again with the flag set. Device writes are synchronous and ordered
//!   ([`drivers::block::WriteBlocks`]), and the header is one 512-byte block with its own checksum,
//!   so a cut at any point leaves either the old valid save, an invalid header, or the new valid
//!   save.
//! - **Board-independent.** The format logic runs over [`CacheSource`] / [`CacheSink`] (a FAT file
//!   on a block device is [`OnCard`]); it is tested on the host with the real model.
//!
//! # Format (little-endian)
//!
//! Block 0, the header (512 bytes, zero past byte 80):
//!
//! | bytes | field |
//! |---|---|
//! | 0..6 | magic `LMBKV\0` |
//! | 6..8 | format version ([`VERSION`]) |
//! | 8..16 | model key |
//! | 16..20 | prompt tokens = positions stored (n) |
//! | 20..24 | 0 |
//! | 24..32 | FNV-1a 64 of the prompt tokens ([`tokens_hash`]) |
//! | 32..36 | layers |
//! | 36..40 | KV width (values per position per layer: KV heads × head size) |
//! | 40..44 | element size (2: f16) |
//! | 44..48 | logits stored (the vocabulary size) |
//! | 48..56 | payload bytes |
//! | 56..64 | FNV-1a 64 of the payload |
//! | 64..68 | valid flag: `VALD` once the payload is complete, else 0 |
//! | 68..72 | 0 |
//! | 72..80 | FNV-1a 64 of bytes 0..72 |
//!
//! From byte 512, the payload: the n tokens (u32), the logits after the last token (f32, one per
//! vocabulary entry), then for each layer its keys for positions 0..n and its values for
//! positions 0..n (f16 bits, KV width per position). Zero padding to a whole block.
//!
//! File size needed: `512 + ceil512(4·n + 4·vocab + 2·layers·n·kv_width·2)` bytes
//! ([`required_file_bytes`]); for SmolLM2-135M (30 layers, KV width 192, vocabulary 49152) that is
//! 23 044 bytes per token plus 197 120 (rounded up to a block): 3.0 MiB for 128 tokens.

use alloc::vec::Vec;
use core::fmt;

use drivers::block::{BlockDevice, WriteBlocks, BLOCK_SIZE};
use drivers::fat::{FatError, File};
use inference::gguf::Value;
use inference::kv::KvCache;
use inference::model::{Config as ModelConfig, RunState};
use inference::{Gguf, Storage, StorageError};

/// First bytes of a prompt-cache file.
pub const MAGIC: [u8; 6] = *b"LMBKV\0";
/// Format version; a file of another version is a mismatch.
pub const VERSION: u16 = 1;
/// Bytes of the header (one block); the payload starts here.
pub const HEADER_BYTES: u64 = BLOCK_SIZE as u64;
/// The valid flag's value once a save is complete.
pub const VALID: u32 = u32::from_le_bytes(*b"VALD");
/// Bytes per stored KV element (f16).
pub const ELEM_BYTES: u32 = 2;
/// Bytes moved per device request while saving and loading (a multiple of 512).
const CHUNK: usize = 64 * 1024;

const BS: u64 = BLOCK_SIZE as u64;

/// FNV-1a, 64-bit: the hash of the file's keys and checksums. Any single changed byte changes it.
#[derive(Debug, Clone, Copy)]
pub struct Fnv64(u64);

impl Fnv64 {
    pub const fn new() -> Fnv64 {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }

    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn u64(&mut self, v: u64) {
        self.update(&v.to_le_bytes());
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64::new()
    }
}

/// `key` with `bytes` mixed in: to fold more into a model key (a runtime version, the kernel set
/// when bit-exact continuation across builds matters).
pub fn mix(key: u64, bytes: &[u8]) -> u64 {
    let mut h = Fnv64::new();
    h.u64(key);
    h.update(bytes);
    h.finish()
}

/// The hash of a prompt's tokens as the header stores it: FNV-1a 64 over the count (u64) and the
/// tokens (u32 each), little-endian.
pub fn tokens_hash(tokens: &[u32]) -> u64 {
    let mut h = Fnv64::new();
    h.u64(tokens.len() as u64);
    for t in tokens {
        h.update(&t.to_le_bytes());
    }
    h.finish()
}

/// Bytes of tensor data [`model_key`] samples at each end of the data region.
pub const MODEL_KEY_SAMPLE: u64 = 64 * 1024;

/// A 64-bit identity of a GGUF model: FNV-1a over its header (version, sizes, every metadata key and
/// value, every tensor's name, type, shape, offset and size) and the first and last
/// [`MODEL_KEY_SAMPLE`] bytes of its tensor data (so two files with the same layout but other
/// weights differ). Reads at most 128 KiB.
pub fn model_key<S: Storage + ?Sized>(g: &Gguf, src: &S) -> Result<u64, StorageError> {
    let mut h = Fnv64::new();
    h.update(b"gguf");
    for v in [
        g.version as u64,
        g.file_len,
        g.alignment,
        g.data_offset,
        g.metadata.len() as u64,
        g.tensors.len() as u64,
    ] {
        h.u64(v);
    }
    for e in &g.metadata {
        h.u64(e.key.len() as u64);
        h.update(e.key.as_bytes());
        match &e.value {
            Value::U8(v) => h.u64(*v as u64),
            Value::I8(v) => h.u64(*v as u64),
            Value::U16(v) => h.u64(*v as u64),
            Value::I16(v) => h.u64(*v as u64),
            Value::U32(v) => h.u64(*v as u64),
            Value::I32(v) => h.u64(*v as u64),
            Value::U64(v) => h.u64(*v),
            Value::I64(v) => h.u64(*v as u64),
            Value::F32(v) => h.u64(v.to_bits() as u64),
            Value::F64(v) => h.u64(v.to_bits()),
            Value::Bool(v) => h.u64(*v as u64),
            Value::String(s) => {
                h.u64(s.len() as u64);
                h.update(s.as_bytes());
            }
            // Array contents are in the file's header bytes; their place and size stand for them.
            Value::Array(a) => {
                h.u64(a.len);
                h.u64(a.offset);
            }
        }
        h.u64(e.value.value_type() as u64);
    }
    for t in &g.tensors {
        h.u64(t.name.len() as u64);
        h.update(t.name.as_bytes());
        h.u64(t.ty.id() as u64);
        h.u64(t.n_dims as u64);
        for d in t.dims {
            h.u64(d);
        }
        h.u64(t.offset);
        h.u64(t.size);
    }
    let data = g.data_offset.min(src.len());
    let end = src.len();
    let head = (end - data).min(MODEL_KEY_SAMPLE);
    hash_range(src, &mut h, data, head)?;
    let tail_start = end.saturating_sub(MODEL_KEY_SAMPLE).max(data);
    hash_range(src, &mut h, tail_start, end - tail_start)?;
    Ok(h.finish())
}

/// Hash `len` bytes of `src` from `at`, through a buffer on the stack (the key allocates nothing,
/// so it cannot fail for want of memory).
fn hash_range<S: Storage + ?Sized>(
    src: &S,
    h: &mut Fnv64,
    at: u64,
    len: u64,
) -> Result<(), StorageError> {
    let mut buf = [0u8; 1024];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(buf.len() as u64) as usize;
        src.read_at(at + done, &mut buf[..n])?;
        h.update(&buf[..n]);
        done += n as u64;
    }
    Ok(())
}

/// The shape of what a file stores per position, which must be the model's to restore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLayout {
    pub n_layer: u32,
    /// Values per position per layer (KV heads × head size).
    pub kv_dim: u32,
    /// Bytes per element (2: f16).
    pub elem_bytes: u32,
    /// Logits stored (the vocabulary size).
    pub vocab: u32,
}

impl KvLayout {
    /// The layout of `config`'s model.
    pub fn of(config: &ModelConfig) -> KvLayout {
        KvLayout {
            n_layer: config.n_layer as u32,
            kv_dim: config.kv_dim() as u32,
            elem_bytes: ELEM_BYTES,
            vocab: config.vocab as u32,
        }
    }

    fn of_state(kv: &KvCache, logits: &[f32]) -> KvLayout {
        KvLayout {
            n_layer: kv.layers as u32,
            kv_dim: kv.kv_dim as u32,
            elem_bytes: ELEM_BYTES,
            vocab: logits.len() as u32,
        }
    }

    /// Payload bytes for `positions` prompt tokens: tokens, logits, keys and values.
    pub fn payload_bytes(&self, positions: u64) -> u64 {
        positions * 4
            + self.vocab as u64 * 4
            + 2 * self.n_layer as u64 * positions * self.kv_dim as u64 * self.elem_bytes as u64
    }

    /// File bytes needed for `positions` prompt tokens: the header block and the payload rounded
    /// up to whole blocks.
    pub fn file_bytes(&self, positions: u64) -> u64 {
        HEADER_BYTES + self.payload_bytes(positions).div_ceil(BS) * BS
    }
}

/// Bytes the prompt-cache file must have to hold `positions` prompt tokens of `config`'s model:
/// `512 + ceil512(4·n + 4·vocab + 2·layers·n·kv_width·2)`.
pub fn required_file_bytes(config: &ModelConfig, positions: usize) -> u64 {
    KvLayout::of(config).file_bytes(positions as u64)
}

/// The parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    version: u16,
    model_key: u64,
    n_tokens: u32,
    tokens_hash: u64,
    layout: KvLayout,
    payload_bytes: u64,
    payload_hash: u64,
    valid: u32,
}

/// Bytes of the header the header checksum covers.
const HEADER_HASHED: usize = 72;

impl Header {
    fn encode(&self) -> [u8; BLOCK_SIZE] {
        let mut b = [0u8; BLOCK_SIZE];
        b[0..6].copy_from_slice(&MAGIC);
        b[6..8].copy_from_slice(&self.version.to_le_bytes());
        b[8..16].copy_from_slice(&self.model_key.to_le_bytes());
        b[16..20].copy_from_slice(&self.n_tokens.to_le_bytes());
        b[24..32].copy_from_slice(&self.tokens_hash.to_le_bytes());
        b[32..36].copy_from_slice(&self.layout.n_layer.to_le_bytes());
        b[36..40].copy_from_slice(&self.layout.kv_dim.to_le_bytes());
        b[40..44].copy_from_slice(&self.layout.elem_bytes.to_le_bytes());
        b[44..48].copy_from_slice(&self.layout.vocab.to_le_bytes());
        b[48..56].copy_from_slice(&self.payload_bytes.to_le_bytes());
        b[56..64].copy_from_slice(&self.payload_hash.to_le_bytes());
        b[64..68].copy_from_slice(&self.valid.to_le_bytes());
        let mut h = Fnv64::new();
        h.update(&b[..HEADER_HASHED]);
        b[72..80].copy_from_slice(&h.finish().to_le_bytes());
        b
    }

    /// Parse a header block, or say why it is not a usable one.
    fn decode(b: &[u8; BLOCK_SIZE]) -> Result<Header, &'static str> {
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        if b[0..6] != MAGIC {
            return Err(WHY_NEVER_WRITTEN);
        }
        if u16_at(6) != VERSION {
            return Err(WHY_VERSION);
        }
        let mut h = Fnv64::new();
        h.update(&b[..HEADER_HASHED]);
        if h.finish() != u64_at(72) {
            return Err(WHY_HEADER);
        }
        Ok(Header {
            version: u16_at(6),
            model_key: u64_at(8),
            n_tokens: u32_at(16),
            tokens_hash: u64_at(24),
            layout: KvLayout {
                n_layer: u32_at(32),
                kv_dim: u32_at(36),
                elem_bytes: u32_at(40),
                vocab: u32_at(44),
            },
            payload_bytes: u64_at(48),
            payload_hash: u64_at(56),
            valid: u32_at(64),
        })
    }
}

/// [`LoadOutcome::Mismatch`] reasons.
pub const WHY_NEVER_WRITTEN: &str = "never written";
pub const WHY_VERSION: &str = "format version";
pub const WHY_HEADER: &str = "header checksum";
pub const WHY_INCOMPLETE: &str = "incomplete save";
pub const WHY_MODEL: &str = "model";
pub const WHY_LAYOUT: &str = "layout";
pub const WHY_PROMPT: &str = "prompt";
pub const WHY_CONTEXT: &str = "context";
pub const WHY_FILE_SIZE: &str = "file size";
pub const WHY_CHECKSUM: &str = "checksum";

/// What [`load`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadOutcome {
    /// The state after the prompt's `tokens` tokens is restored (`st.pos == tokens`, the KV cache
    /// and the logits of the last token as after running the prompt); `bytes` were read.
    Restored { tokens: usize, bytes: u64 },
    /// The file holds no usable state for this model and prompt (not an error): run the prompt and
    /// [`save`]. `why` is one of the `WHY_*` words: "never written", "format version", "header
    /// checksum", "incomplete save", "model", "layout", "prompt", "context", "file size",
    /// "checksum".
    Mismatch { why: &'static str },
}

impl fmt::Display for LoadOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LoadOutcome::Restored { tokens, bytes } => write!(
                f,
                "restored the state after {tokens} prompt tokens ({} KiB)",
                bytes >> 10
            ),
            LoadOutcome::Mismatch { why } => {
                let what = match why {
                    WHY_NEVER_WRITTEN => "nothing saved yet",
                    WHY_VERSION => "saved by another format version",
                    WHY_HEADER => "the header is damaged",
                    WHY_INCOMPLETE => "the last save did not finish",
                    WHY_MODEL => "saved for another model",
                    WHY_LAYOUT => "saved with another KV layout",
                    WHY_PROMPT => "saved for another prompt",
                    WHY_CONTEXT => "the saved prompt does not fit this context",
                    WHY_FILE_SIZE => "the file is smaller than the saved state",
                    WHY_CHECKSUM => "the saved state is damaged (checksum)",
                    other => other,
                };
                write!(f, "not used: {what}")
            }
        }
    }
}

/// What [`save`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaveReport {
    /// Prompt tokens (positions) saved.
    pub tokens: usize,
    /// Bytes written, the header twice included.
    pub bytes: u64,
    /// The payload checksum stored.
    pub payload_hash: u64,
}

/// Why a save or load failed (a [`LoadOutcome::Mismatch`] is not a failure). `E` is the file's
/// error: [`FatError`] of the block device for a file on the card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptCacheError<E> {
    /// The file has `size` bytes; saving these tokens needs `needed`. Nothing was written.
    FileTooSmall { size: u64, needed: u64 },
    /// `tokens` prompt tokens were given for a state at position `pos`: they must be equal.
    StateMismatch { tokens: usize, pos: usize },
    /// Nothing to save: the prompt has no tokens.
    EmptyPrompt,
    /// The prompt is longer than a sliding-window layer keeps (its oldest positions are gone).
    BeyondWindow { tokens: usize },
    /// Reading or writing the file failed.
    Io(E),
    /// The buffer for writing the file could not be allocated.
    OutOfMemory(inference::OutOfMemory),
}

impl<E: fmt::Display> fmt::Display for PromptCacheError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PromptCacheError::FileTooSmall { size, needed } => write!(
                f,
                "prompt cache: the file has {size} bytes but this prompt needs {needed}: make the \
                 file at least {} MiB (e.g. `dd if=/dev/zero of=lmboot.kv bs=1M count={}` on the \
                 card)",
                needed.div_ceil(1 << 20),
                needed.div_ceil(1 << 20)
            ),
            PromptCacheError::StateMismatch { tokens, pos } => write!(
                f,
                "prompt cache: {tokens} prompt tokens given for a state at position {pos}"
            ),
            PromptCacheError::EmptyPrompt => f.write_str("prompt cache: the prompt has no tokens"),
            PromptCacheError::BeyondWindow { tokens } => write!(
                f,
                "prompt cache: not saved: the prompt's {tokens} tokens are more than the model's \
                 sliding-window layers keep"
            ),
            PromptCacheError::Io(e) => write!(f, "prompt cache: {e}"),
            PromptCacheError::OutOfMemory(e) => write!(f, "prompt cache: {e}"),
        }
    }
}

/// Where a cache file is read from.
pub trait CacheSource {
    type Error;
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Fill `buf` from `offset` (inside the size).
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error>;
}

/// A cache file that can also be written, in place, inside its size.
pub trait CacheSink: CacheSource {
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), Self::Error>;
    /// Make what was written durable before what is written next.
    fn flush(&mut self) -> Result<(), Self::Error>;
}

/// A FAT file on a block device, as a cache file: reads with [`File::read_at`], writes in place
/// with [`File::write_at`] (never outside the file's blocks).
pub struct OnCard<'a, D> {
    pub file: &'a File,
    pub dev: &'a mut D,
}

impl<D> fmt::Debug for OnCard<'_, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnCard")
            .field("file", self.file)
            .finish_non_exhaustive()
    }
}

impl<D: BlockDevice> CacheSource for OnCard<'_, D> {
    type Error = FatError<D::Error>;

    fn size(&self) -> u64 {
        self.file.size()
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        self.file.read_at(self.dev, offset, buf)
    }
}

impl<D: WriteBlocks> CacheSink for OnCard<'_, D> {
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), Self::Error> {
        self.file.write_at(self.dev, offset, buf)
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        // Not a block range: name the device failure at LBA 0.
        self.dev.flush().map_err(|error| FatError::DeviceWrite {
            lba: 0,
            blocks: 0,
            error,
        })
    }
}

/// Save the state after the prompt `tokens` (`st.pos == tokens.len()`) into the preallocated
/// `file` on `dev`: the KV cache of positions `0..pos` of every layer and the logits of the last
/// token, keyed by `model_key` and the tokens. Writes only the file's own blocks. Call it only when
/// the configuration allows writing to the card.
pub fn save<D: WriteBlocks>(
    file: &File,
    dev: &mut D,
    model_key: u64,
    tokens: &[u32],
    st: &RunState,
) -> Result<SaveReport, PromptCacheError<FatError<D::Error>>> {
    save_parts(
        &mut OnCard { file, dev },
        model_key,
        tokens,
        &st.kv,
        st.pos,
        &st.logits,
    )
}

/// Look in `file` for the state after the prompt `tokens` of the model `model_key` and restore it
/// into `st`: on [`LoadOutcome::Restored`] `st.pos == tokens.len()` and the KV cache and logits are
/// as after running the prompt, so the next forward pass (or sampling from `st.logits`) continues
/// exactly. On a mismatch or an error `st` is reset (`st.pos == 0`; KV entries and logits may have
/// been overwritten, which running the prompt again makes irrelevant).
pub fn load<D: BlockDevice>(
    file: &File,
    dev: &mut D,
    model_key: u64,
    tokens: &[u32],
    st: &mut RunState,
) -> Result<LoadOutcome, PromptCacheError<FatError<D::Error>>> {
    st.pos = 0;
    let r = load_parts(
        &mut OnCard { file, dev },
        model_key,
        tokens,
        &mut st.kv,
        &mut st.logits,
    );
    if let Ok(LoadOutcome::Restored { tokens, .. }) = r {
        st.pos = tokens;
    }
    r
}

/// [`save`] over any [`CacheSink`], from the parts of a run state: `kv` holds positions
/// `0..pos`, `logits` are the last token's.
pub fn save_parts<S: CacheSink>(
    sink: &mut S,
    model_key: u64,
    tokens: &[u32],
    kv: &KvCache,
    pos: usize,
    logits: &[f32],
) -> Result<SaveReport, PromptCacheError<S::Error>> {
    if tokens.is_empty() {
        return Err(PromptCacheError::EmptyPrompt);
    }
    if tokens.len() != pos || pos > kv.ctx {
        return Err(PromptCacheError::StateMismatch {
            tokens: tokens.len(),
            pos,
        });
    }
    if !kv.holds_prefix(pos) {
        return Err(PromptCacheError::BeyondWindow { tokens: pos });
    }
    let layout = KvLayout::of_state(kv, logits);
    let n = tokens.len();
    let needed = layout.file_bytes(n as u64);
    if sink.size() < needed {
        return Err(PromptCacheError::FileTooSmall {
            size: sink.size(),
            needed,
        });
    }
    let mut header = Header {
        version: VERSION,
        model_key,
        n_tokens: n as u32,
        tokens_hash: tokens_hash(tokens),
        layout,
        payload_bytes: layout.payload_bytes(n as u64),
        payload_hash: 0,
        valid: 0,
    };
    let io = PromptCacheError::Io;
    // 1. Invalidate whatever the file held.
    sink.write_at(0, &header.encode()).map_err(io)?;
    sink.flush().map_err(io)?;
    // 2. The payload.
    let mut w = Writer::new(sink)?;
    for t in tokens {
        w.put(&t.to_le_bytes())?;
    }
    for l in logits {
        w.put(&l.to_le_bytes())?;
    }
    for layer in 0..kv.layers {
        for v in kv.keys(layer, n) {
            w.put(&v.to_le_bytes())?;
        }
        for v in kv.values(layer, n) {
            w.put(&v.to_le_bytes())?;
        }
    }
    let (payload_hash, written) = w.finish()?;
    debug_assert_eq!(written, header.payload_bytes);
    sink.flush().map_err(io)?;
    // 3. The header again, valid: the last write.
    header.payload_hash = payload_hash;
    header.valid = VALID;
    sink.write_at(0, &header.encode()).map_err(io)?;
    sink.flush().map_err(io)?;
    Ok(SaveReport {
        tokens: n,
        bytes: 2 * HEADER_BYTES + header.payload_bytes.div_ceil(BS) * BS,
        payload_hash,
    })
}

/// [`load`] over any [`CacheSource`], into the parts of a run state. On `Restored { tokens }` the
/// caller sets its position to `tokens`.
pub fn load_parts<S: CacheSource>(
    src: &mut S,
    model_key: u64,
    tokens: &[u32],
    kv: &mut KvCache,
    logits: &mut [f32],
) -> Result<LoadOutcome, PromptCacheError<S::Error>> {
    let io = PromptCacheError::Io;
    let mismatch = |why| Ok(LoadOutcome::Mismatch { why });
    if src.size() < HEADER_BYTES {
        return mismatch(WHY_NEVER_WRITTEN);
    }
    let mut block = [0u8; BLOCK_SIZE];
    src.read_at(0, &mut block).map_err(io)?;
    let h = match Header::decode(&block) {
        Ok(h) => h,
        Err(why) => return mismatch(why),
    };
    if h.valid != VALID {
        return mismatch(WHY_INCOMPLETE);
    }
    if h.model_key != model_key {
        return mismatch(WHY_MODEL);
    }
    let layout = KvLayout::of_state(kv, logits);
    if h.layout != layout {
        return mismatch(WHY_LAYOUT);
    }
    let n = h.n_tokens as usize;
    if n != tokens.len() || h.tokens_hash != tokens_hash(tokens) {
        return mismatch(WHY_PROMPT);
    }
    if n == 0 || !kv.holds_prefix(n) {
        return mismatch(WHY_CONTEXT);
    }
    if h.payload_bytes != layout.payload_bytes(n as u64) {
        return mismatch(WHY_LAYOUT);
    }
    if src.size() < layout.file_bytes(n as u64) {
        return mismatch(WHY_FILE_SIZE);
    }
    let mut r = Reader::new(src, h.payload_bytes);
    let mut b4 = [0u8; 4];
    for &t in tokens {
        r.get(&mut b4)?;
        if u32::from_le_bytes(b4) != t {
            return mismatch(WHY_PROMPT);
        }
    }
    for l in logits.iter_mut() {
        r.get(&mut b4)?;
        *l = f32::from_le_bytes(b4);
    }
    let mut b2 = [0u8; 2];
    for layer in 0..kv.layers {
        for v in kv.keys_mut(layer, n) {
            r.get(&mut b2)?;
            *v = u16::from_le_bytes(b2);
        }
        for v in kv.values_mut(layer, n) {
            r.get(&mut b2)?;
            *v = u16::from_le_bytes(b2);
        }
    }
    if r.hash.finish() != h.payload_hash {
        return mismatch(WHY_CHECKSUM);
    }
    Ok(LoadOutcome::Restored {
        tokens: n,
        bytes: HEADER_BYTES + h.payload_bytes.div_ceil(BS) * BS,
    })
}

/// Streams the payload into the file from [`HEADER_BYTES`] in whole-block chunks, hashing it.
struct Writer<'a, S> {
    sink: &'a mut S,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    at: u64,
    bytes: u64,
    hash: Fnv64,
}

impl<'a, S: CacheSink> Writer<'a, S> {
    fn new(sink: &'a mut S) -> Result<Self, PromptCacheError<S::Error>> {
        let buf = inference::oom::with_capacity(CHUNK, "prompt cache write buffer");
        Ok(Writer {
            sink,
            buf: buf.map_err(PromptCacheError::OutOfMemory)?,
            at: HEADER_BYTES,
            bytes: 0,
            hash: Fnv64::new(),
        })
    }

    fn put(&mut self, b: &[u8]) -> Result<(), PromptCacheError<S::Error>> {
        self.hash.update(b);
        self.bytes += b.len() as u64;
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.sink
                .write_at(self.at, &self.buf[..CHUNK])
                .map_err(PromptCacheError::Io)?;
            self.at += CHUNK as u64;
            self.buf.drain(..CHUNK);
        }
        Ok(())
    }

    /// Write the rest, zero-padded to a whole block; the payload's hash and length.
    fn finish(mut self) -> Result<(u64, u64), PromptCacheError<S::Error>> {
        if !self.buf.is_empty() {
            let padded = self.buf.len().div_ceil(BLOCK_SIZE) * BLOCK_SIZE;
            self.buf.resize(padded, 0);
            self.sink
                .write_at(self.at, &self.buf)
                .map_err(PromptCacheError::Io)?;
        }
        Ok((self.hash.finish(), self.bytes))
    }
}

/// Streams `len` payload bytes from [`HEADER_BYTES`] in whole-block chunks, hashing them.
struct Reader<'a, S> {
    src: &'a mut S,
    buf: Vec<u8>,
    pos: usize,
    /// File offset of the next chunk.
    at: u64,
    /// Payload bytes not yet read from the file.
    left: u64,
    hash: Fnv64,
}

impl<'a, S: CacheSource> Reader<'a, S> {
    fn new(src: &'a mut S, len: u64) -> Self {
        Reader {
            src,
            buf: Vec::new(),
            pos: 0,
            at: HEADER_BYTES,
            left: len,
            hash: Fnv64::new(),
        }
    }

    /// The next `out.len()` payload bytes (the caller never asks past the payload's length).
    fn get(&mut self, out: &mut [u8]) -> Result<(), PromptCacheError<S::Error>> {
        let mut done = 0;
        while done < out.len() {
            if self.pos == self.buf.len() {
                // The file holds the payload padded to whole blocks (checked before reading).
                let n = self.left.min(CHUNK as u64).div_ceil(BS) * BS;
                let grow = (n as usize).saturating_sub(self.buf.len());
                inference::oom::reserve(&mut self.buf, grow, "prompt cache read buffer")
                    .map_err(PromptCacheError::OutOfMemory)?;
                self.buf.resize(n as usize, 0);
                self.src
                    .read_at(self.at, &mut self.buf)
                    .map_err(PromptCacheError::Io)?;
                let payload = self.left.min(n) as usize;
                self.buf.truncate(payload);
                self.at += n;
                self.left -= payload as u64;
                self.pos = 0;
                if payload == 0 {
                    // Unreachable: the reads ask for exactly the payload's bytes.
                    out[done..].fill(0);
                    return Ok(());
                }
            }
            let k = (out.len() - done).min(self.buf.len() - self.pos);
            let bytes = &self.buf[self.pos..self.pos + k];
            self.hash.update(bytes);
            out[done..done + k].copy_from_slice(bytes);
            self.pos += k;
            done += k;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    /// A cache file in memory that counts writes and can lose its power after some of them.
    #[derive(Debug)]
    struct MemFile {
        data: Vec<u8>,
        writes: usize,
        flushes: usize,
        /// Fail every write from this one (0-based) on.
        cut_at: Option<usize>,
    }

    impl MemFile {
        fn new(size: usize) -> MemFile {
            MemFile {
                data: vec![0; size],
                writes: 0,
                flushes: 0,
                cut_at: None,
            }
        }
    }

    impl CacheSource for MemFile {
        type Error = &'static str;
        fn size(&self) -> u64 {
            self.data.len() as u64
        }
        fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), &'static str> {
            let o = offset as usize;
            let src = self.data.get(o..o + buf.len()).ok_or("read past end")?;
            buf.copy_from_slice(src);
            Ok(())
        }
    }

    impl CacheSink for MemFile {
        fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), &'static str> {
            if self.cut_at.is_some_and(|c| self.writes >= c) {
                return Err("power cut");
            }
            self.writes += 1;
            let o = offset as usize;
            self.data
                .get_mut(o..o + buf.len())
                .ok_or("write past end")?
                .copy_from_slice(buf);
            Ok(())
        }
        fn flush(&mut self) -> Result<(), &'static str> {
            self.flushes += 1;
            Ok(())
        }
    }

    const LAYERS: usize = 3;
    const KV_DIM: usize = 40;
    const VOCAB: usize = 1000;

    /// A state after `n` positions with pseudo-random keys, values and logits.
    fn state(n: usize, ctx: usize, seed: u64) -> (KvCache, Vec<f32>) {
        state_dim(n, ctx, KV_DIM, seed)
    }

    fn state_dim(n: usize, ctx: usize, kv_dim: usize, seed: u64) -> (KvCache, Vec<f32>) {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut kv = KvCache::new(LAYERS, ctx, kv_dim);
        for l in 0..LAYERS {
            for p in 0..n {
                let (k, v) = kv.slot_mut(l, p);
                k.iter_mut().for_each(|e| *e = next() as u16);
                v.iter_mut().for_each(|e| *e = next() as u16);
            }
        }
        let logits = (0..VOCAB).map(|_| (next() % 1000) as f32 / 7.0).collect();
        (kv, logits)
    }

    fn layout() -> KvLayout {
        KvLayout {
            n_layer: LAYERS as u32,
            kv_dim: KV_DIM as u32,
            elem_bytes: 2,
            vocab: VOCAB as u32,
        }
    }

    fn tokens(n: usize) -> Vec<u32> {
        (0..n as u32).map(|i| i * 31 + 7).collect()
    }

    #[test]
    fn promptcache_round_trip_restores_kv_and_logits() {
        let n = 13;
        let (kv, logits) = state(n, 32, 1);
        let need = layout().file_bytes(n as u64);
        assert_eq!(
            need,
            512 + (4 * 13 + 4 * 1000 + 2 * 3 * 13 * 40 * 2u64).div_ceil(512) * 512
        );
        let mut f = MemFile::new(need as usize + 700);
        let rep = save_parts(&mut f, 42, &tokens(n), &kv, n, &logits).unwrap();
        assert_eq!(rep.tokens, n);
        assert_eq!(f.flushes, 3);
        assert!(
            f.data[need as usize..].iter().all(|&b| b == 0),
            "wrote past the payload"
        );
        // A fresh state with another context length takes it.
        let (mut kv2, mut logits2) = (KvCache::new(LAYERS, 20, KV_DIM), vec![0f32; VOCAB]);
        let out = load_parts(&mut f, 42, &tokens(n), &mut kv2, &mut logits2).unwrap();
        assert_eq!(
            out,
            LoadOutcome::Restored {
                tokens: n,
                bytes: need
            }
        );
        for l in 0..LAYERS {
            assert_eq!(kv2.keys(l, n), kv.keys(l, n));
            assert_eq!(kv2.values(l, n), kv.values(l, n));
        }
        assert_eq!(
            logits2.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            logits.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert!(out.to_string().contains("13 prompt tokens"));
    }

    #[test]
    fn promptcache_header_layout_is_fixed() {
        let (kv, logits) = state(2, 4, 2);
        let mut f = MemFile::new(layout().file_bytes(2) as usize);
        save_parts(&mut f, 0x1122_3344_5566_7788, &[5, 6], &kv, 2, &logits).unwrap();
        let h = &f.data[..512];
        assert_eq!(&h[0..6], b"LMBKV\0");
        assert_eq!(h[6..8], 1u16.to_le_bytes());
        assert_eq!(h[8..16], 0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(h[16..20], 2u32.to_le_bytes());
        assert_eq!(h[24..32], tokens_hash(&[5, 6]).to_le_bytes());
        assert_eq!(
            h[32..48],
            [3, 0, 0, 0, 40, 0, 0, 0, 2, 0, 0, 0, 0xE8, 3, 0, 0]
        );
        assert_eq!(h[48..56], layout().payload_bytes(2).to_le_bytes());
        assert_eq!(&h[64..68], b"VALD");
        assert!(h[80..].iter().all(|&b| b == 0));
        // The payload starts with the tokens and the logits.
        assert_eq!(f.data[512..520], [5, 0, 0, 0, 6, 0, 0, 0]);
        assert_eq!(f.data[520..524], logits[0].to_le_bytes());
    }

    fn outcome(f: &mut MemFile, key: u64, toks: &[u32], ctx: usize) -> LoadOutcome {
        outcome_dim(f, key, toks, ctx, KV_DIM)
    }

    fn outcome_dim(
        f: &mut MemFile,
        key: u64,
        toks: &[u32],
        ctx: usize,
        kv_dim: usize,
    ) -> LoadOutcome {
        let (mut kv, mut logits) = (KvCache::new(LAYERS, ctx, kv_dim), vec![0f32; VOCAB]);
        load_parts(f, key, toks, &mut kv, &mut logits).unwrap()
    }

    fn why(o: LoadOutcome) -> &'static str {
        match o {
            LoadOutcome::Mismatch { why } => why,
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }

    #[test]
    fn promptcache_every_difference_is_a_mismatch() {
        let n = 9;
        let (kv, logits) = state(n, 16, 3);
        let t = tokens(n);
        let mut f = MemFile::new(layout().file_bytes(n as u64) as usize);
        assert_eq!(why(outcome(&mut f, 7, &t, 16)), WHY_NEVER_WRITTEN);
        save_parts(&mut f, 7, &t, &kv, n, &logits).unwrap();
        assert!(matches!(
            outcome(&mut f, 7, &t, 16),
            LoadOutcome::Restored { .. }
        ));
        assert_eq!(why(outcome(&mut f, 8, &t, 16)), WHY_MODEL);
        let mut other = t.clone();
        other[4] += 1;
        assert_eq!(why(outcome(&mut f, 7, &other, 16)), WHY_PROMPT);
        assert_eq!(why(outcome(&mut f, 7, &t[..8], 16)), WHY_PROMPT);
        assert_eq!(why(outcome(&mut f, 7, &t, 8)), WHY_CONTEXT);
        let (mut kv4, mut logits4) = (KvCache::new(LAYERS + 1, 16, KV_DIM), vec![0f32; VOCAB]);
        let o = load_parts(&mut f, 7, &t, &mut kv4, &mut logits4).unwrap();
        assert_eq!(why(o), WHY_LAYOUT);
        let mut logits_small = vec![0f32; VOCAB - 1];
        let o = load_parts(&mut f, 7, &t, &mut kv4, &mut logits_small).unwrap();
        assert_eq!(why(o), WHY_LAYOUT);

        // Any payload byte changed: the checksum.
        for at in [
            512usize,
            600,
            512 + 4 * n + 4 * VOCAB + 1,
            f.data.len() - 600,
        ] {
            let mut g = MemFile::new(f.data.len());
            g.data.copy_from_slice(&f.data);
            g.data[at] ^= 0x40;
            let w = why(outcome(&mut g, 7, &t, 16));
            let expect = if at < 512 + 4 * n {
                WHY_PROMPT
            } else {
                WHY_CHECKSUM
            };
            assert_eq!(w, expect, "byte {at}");
        }
        // A header byte changed: the header checksum.
        for at in [8usize, 17, 40, 60, 66, 75] {
            let mut g = MemFile::new(f.data.len());
            g.data.copy_from_slice(&f.data);
            g.data[at] ^= 1;
            assert_eq!(why(outcome(&mut g, 7, &t, 16)), WHY_HEADER, "byte {at}");
        }
        let mut g = MemFile::new(f.data.len());
        g.data.copy_from_slice(&f.data);
        g.data[6] = 9;
        assert_eq!(why(outcome(&mut g, 7, &t, 16)), WHY_VERSION);
        // A file cut shorter than the saved state.
        let mut g = MemFile::new(f.data.len() - 512);
        let len = g.data.len();
        g.data.copy_from_slice(&f.data[..len]);
        assert_eq!(why(outcome(&mut g, 7, &t, 16)), WHY_FILE_SIZE);
        assert!(LoadOutcome::Mismatch { why: WHY_PROMPT }
            .to_string()
            .contains("another prompt"));
    }

    #[test]
    fn promptcache_a_cut_save_is_never_used() {
        // A payload of three 64 KiB chunks (145 KiB).
        let (n, wide) = (30, 400);
        let (kv, logits) = state_dim(n, 32, wide, 4);
        let t = tokens(n);
        let size = KvLayout {
            kv_dim: wide as u32,
            ..layout()
        }
        .file_bytes(n as u64) as usize;
        // How many writes a whole save takes.
        let mut f = MemFile::new(size);
        save_parts(&mut f, 1, &t, &kv, n, &logits).unwrap();
        let writes = f.writes;
        assert_eq!(writes, 5, "two headers and three chunks");
        // An old valid save of another prompt, then a new save cut after each write.
        let (kv_old, logits_old) = state_dim(n, 32, wide, 5);
        let old: Vec<u32> = tokens(n).iter().map(|x| x + 1).collect();
        for cut in 0..writes {
            let mut f = MemFile::new(size);
            save_parts(&mut f, 1, &old, &kv_old, n, &logits_old).unwrap();
            f.writes = 0;
            f.cut_at = Some(cut);
            let e = save_parts(&mut f, 1, &t, &kv, n, &logits).unwrap_err();
            assert_eq!(e, PromptCacheError::Io("power cut"));
            let o = outcome_dim(&mut f, 1, &t, 32, wide);
            assert!(
                matches!(o, LoadOutcome::Mismatch { .. }),
                "cut at {cut}: {o:?}"
            );
            let o_old = outcome_dim(&mut f, 1, &old, 32, wide);
            if cut == 0 {
                // Nothing written: the old save is still whole.
                assert!(matches!(o_old, LoadOutcome::Restored { .. }));
            } else {
                assert_eq!(why(o), WHY_INCOMPLETE, "cut at {cut}");
            }
        }
    }

    #[test]
    fn promptcache_errors() {
        let n = 10;
        let (kv, logits) = state(n, 16, 6);
        let need = layout().file_bytes(n as u64);
        let mut f = MemFile::new(need as usize - 1);
        let e = save_parts(&mut f, 1, &tokens(n), &kv, n, &logits).unwrap_err();
        assert_eq!(
            e,
            PromptCacheError::FileTooSmall {
                size: need - 1,
                needed: need
            }
        );
        assert_eq!(f.writes, 0, "nothing written");
        let s = e.to_string();
        assert!(
            s.contains(&need.to_string()) && s.contains("at least 1 MiB"),
            "{s}"
        );
        let mut f = MemFile::new(need as usize);
        assert_eq!(
            save_parts(&mut f, 1, &tokens(n - 1), &kv, n, &logits).unwrap_err(),
            PromptCacheError::StateMismatch {
                tokens: n - 1,
                pos: n
            }
        );
        assert_eq!(
            save_parts(&mut f, 1, &[], &kv, 0, &logits).unwrap_err(),
            PromptCacheError::EmptyPrompt
        );
        assert_eq!(f.writes, 0);
    }

    #[test]
    fn promptcache_hashes() {
        // FNV-1a 64 reference values.
        let mut h = Fnv64::new();
        assert_eq!(h.finish(), 0xcbf2_9ce4_8422_2325);
        h.update(b"a");
        assert_eq!(h.finish(), 0xaf63_dc4c_8601_ec8c);
        let mut h = Fnv64::new();
        h.update(b"foobar");
        assert_eq!(h.finish(), 0x8594_4171_f739_67e8);
        assert_ne!(tokens_hash(&[1, 2]), tokens_hash(&[2, 1]));
        assert_ne!(tokens_hash(&[]), tokens_hash(&[0]));
        assert_ne!(mix(1, b"x"), mix(2, b"x"));
    }
}
