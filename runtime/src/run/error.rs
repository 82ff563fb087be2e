//! Why a run failed: one variant per step that can fail, each carrying its cause. The text is made
//! where the error is printed (its `Display`), naming the step, the file and what was wrong.

use crate::config::ConfigError;
use crate::pagecache::CacheError;
use crate::run::{CONFIG_PATH, HEAP_MARGIN};
use alloc::string::String;
use core::fmt;
use drivers::fat::FatError;
use inference::fit::Size;
use inference::generate::GenError;
use inference::json::JsonError;
use inference::model::ModelError;
use inference::oom::OutOfMemory;
use inference::sampler::SamplerError;
use inference::tokenizer::TokenizerError;
use inference::GgufError;

/// A card error, with the block device's error as text (the run is generic over the device).
pub type CardError = FatError<String>;

/// Why a run failed.
#[derive(Debug)]
pub enum RunError {
    /// The card holds no FAT volume that mounts.
    Mount(CardError),
    /// `lmboot.txt` is not on the card.
    ConfigMissing(CardError),
    /// `lmboot.txt` is there but could not be read.
    ConfigRead(CardError),
    /// A line of `lmboot.txt` is wrong.
    Config(ConfigError),
    /// The configured model file could not be opened.
    ModelOpen { path: String, error: CardError },
    /// The GGUF header, metadata or tensor table is malformed.
    Gguf(GgufError),
    /// The model cannot be built from the file (architecture, tensors, NaN or infinity).
    Model(ModelError),
    /// The vocabulary in the file is unusable.
    Tokenizer(TokenizerError),
    /// The run's buffers (KV cache, activations) do not fit.
    Buffers(ModelError),
    /// The run's buffers fit the address space but not the heap (checked before allocating).
    NoRoom {
        ctx: usize,
        kv: u64,
        buffers: u64,
        free: u64,
    },
    /// The page cache could not be set up or filled.
    Cache(CacheError),
    /// `kernels = NAME` names a set this CPU lacks.
    KernelsUnavailable(String),
    /// `selftest = exception` on a platform that cannot raise one.
    NoException,
    /// `measure_cores` without an instruction counter.
    NoInstructionCounter,
    /// A self-test check that the run cannot go on after (the model file on the card is not the
    /// file written to it).
    SelfTest(String),
    /// The sampling settings are out of range.
    Sampler(SamplerError),
    /// The model's recommended sampling (`general.sampling.*`) is unreadable or out of range.
    ModelSampling(String),
    /// `json = true` with a vocabulary that cannot express JSON.
    Json(JsonError),
    /// `generate` mode and no prompt configured.
    NoPrompt,
    /// The prompt could not be tokenized.
    Prompt(TokenizerError),
    /// The forward pass or the device failed while generating.
    Generate(GenError),
    /// The chat stopped on a model or device error, or out of memory.
    Chat(crate::chat::ChatError),
    /// The speculation settings do not fit the model (`self_draft`, `draft`).
    Speculation(String),
    /// `ring = K/N` on a board without a link UART, or the link cannot run at `ring_baud`.
    RingLink(String),
    /// The ring of boards failed (the message names the board and the cause).
    Ring(crate::ring::RingError),
    /// A buffer of the run itself (the configuration's text, a path, a scratch buffer) does not
    /// fit the heap.
    OutOfMemory(OutOfMemory),
}

impl RunError {
    /// True when the run stopped because an allocation failed (the board then prints its heap
    /// figures beside the error).
    pub fn out_of_memory(&self) -> bool {
        use inference::model::ModelError as M;
        match self {
            RunError::Gguf(e) => e.out_of_memory(),
            RunError::Model(M::OutOfMemory(_)) | RunError::Buffers(M::OutOfMemory(_)) => true,
            RunError::Tokenizer(TokenizerError::OutOfMemory(_)) => true,
            RunError::Cache(CacheError::OutOfMemory(_)) => true,
            RunError::Sampler(SamplerError::OutOfMemory(_)) => true,
            RunError::Chat(e) => e.out_of_memory(),
            RunError::OutOfMemory(_) => true,
            _ => false,
        }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use RunError::*;
        match self {
            Mount(e) => write!(f, "card: {e}"),
            ConfigMissing(e) => write!(f, "{CONFIG_PATH}: cannot open it: {e}"),
            ConfigRead(e) => write!(f, "card: reading {CONFIG_PATH}: {e}"),
            Config(e) => write!(f, "{CONFIG_PATH}: {e}"),
            ModelOpen { path, error } => write!(f, "card: opening the model {path}: {error}"),
            Gguf(e) => write!(f, "model: {e}"),
            Model(e) => write!(f, "model: {e}"),
            Tokenizer(e) => write!(f, "model: {e}"),
            Buffers(e) => write!(f, "memory: {e}"),
            NoRoom {
                ctx,
                kv,
                buffers,
                free,
            } => write!(
                f,
                "memory: the KV cache for {ctx} positions ({}) and the buffers ({}) need more than \
                 the {} of heap free ({} kept in reserve): lower ctx in {CONFIG_PATH}",
                Size(*kv),
                Size(*buffers),
                Size(*free),
                Size(HEAP_MARGIN)
            ),
            Cache(e) => write!(f, "memory: {e}"),
            KernelsUnavailable(name) => {
                write!(
                    f,
                    "{CONFIG_PATH}: kernels = {name}: not available on this CPU"
                )
            }
            NoException => write!(
                f,
                "{CONFIG_PATH}: selftest = exception: this platform cannot raise one"
            ),
            NoInstructionCounter => write!(
                f,
                "{CONFIG_PATH}: measure_cores needs an instruction counter"
            ),
            SelfTest(what) => write!(f, "selftest: {what}"),
            Sampler(e) => write!(f, "{CONFIG_PATH}: {e}"),
            ModelSampling(e) => write!(f, "the model's sampling settings: {e}"),
            Json(e) => write!(f, "{CONFIG_PATH}: json = true: {e}"),
            NoPrompt => write!(f, "{CONFIG_PATH} sets no prompt (add `prompt = ...`)"),
            Prompt(e) => write!(f, "generation: {e}"),
            Generate(e) => write!(f, "generation: {e}"),
            Chat(e) => write!(f, "generation: {e}"),
            Speculation(e) => write!(f, "{CONFIG_PATH}: {e}"),
            RingLink(e) => write!(f, "{CONFIG_PATH}: ring: {e}"),
            Ring(e) => write!(f, "ring: {e}"),
            OutOfMemory(e) => write!(f, "memory: {e}"),
        }
    }
}

impl core::error::Error for RunError {}
