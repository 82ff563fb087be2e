//! What can be wrong with a vocabulary in GGUF metadata, or with text to encode.

use crate::gguf::{GgufError, ValueType};
use alloc::string::String;
use core::fmt;

/// A tokenizer error, naming the metadata key and the value that were wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum TokenizerError {
    /// Reading the metadata key from the file failed.
    Gguf { key: &'static str, error: GgufError },
    /// A table of the vocabulary could not be allocated.
    OutOfMemory(crate::oom::OutOfMemory),
    /// A required key is absent.
    MissingKey { key: &'static str },
    /// A scalar key holds the wrong type.
    WrongType {
        key: &'static str,
        expected: &'static str,
        found: ValueType,
    },
    /// An array key holds elements of the wrong type (or is not an array).
    WrongElemType {
        key: &'static str,
        expected: &'static str,
        found: ValueType,
    },
    /// A per-token array does not have one element per token.
    LengthMismatch {
        key: &'static str,
        len: u64,
        n_tokens: u64,
    },
    /// The vocabulary is empty, or has more tokens than ids can name.
    BadTokenCount { n_tokens: u64 },
    /// Two tokens have the same text.
    DuplicateToken {
        text: String,
        first: u32,
        second: u32,
    },
    /// A special-token id is negative or not below the vocabulary size.
    IdOutOfRange {
        key: &'static str,
        value: i64,
        n_tokens: u32,
    },
    /// `flag` asks for a token that the vocabulary does not define (`id_key`).
    MissingSpecialToken {
        flag: &'static str,
        id_key: &'static str,
    },
    /// Merge rule `index` is not two space-separated parts.
    MalformedMerge { index: u64, merge: String },
    /// Merge rule `index` names `part`, which is not a token.
    MergeUnknownToken {
        index: u64,
        merge: String,
        part: String,
    },
    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    UnsupportedModel { model: String },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    UnsupportedPre { pre: String },
    /// Text to encode is not UTF-8: the first bad byte is at `offset`.
    InvalidUtf8 { offset: usize },
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TokenizerError::*;
        write!(f, "tokenizer: ")?;
        match self {
            Gguf { key, error } => write!(f, "reading {key}: {error}"),
            OutOfMemory(e) => write!(f, "{e}"),
            MissingKey { key } => write!(f, "metadata key {key} is missing"),
            WrongType { key, expected, found } => {
                write!(f, "{key} is {}, expected {expected}", found.name())
            }
            WrongElemType { key, expected, found } => {
                write!(f, "{key} holds {} elements, expected an array of {expected}", found.name())
            }
            LengthMismatch { key, len, n_tokens } => {
                write!(f, "{key} has {len} elements but the vocabulary has {n_tokens} tokens")
            }
            BadTokenCount { n_tokens } => write!(f, "tokenizer.ggml.tokens holds {n_tokens} tokens"),
            DuplicateToken { text, first, second } => {
                write!(f, "tokens {first} and {second} have the same text {text:?}")
            }
            IdOutOfRange { key, value, n_tokens } => {
                write!(f, "{key} = {value} is not a token id (the vocabulary has {n_tokens} tokens)")
            }
            MissingSpecialToken { flag, id_key } => write!(f, "{flag} is true but {id_key} is not set"),
            MalformedMerge { index, merge } => {
                write!(f, "tokenizer.ggml.merges[{index}] = {merge:?} is not two space-separated tokens")
            }
            MergeUnknownToken { index, merge, part } => {
                write!(f, "tokenizer.ggml.merges[{index}] = {merge:?} names {part:?}, which is not a token")
            }
            UnsupportedModel { model } => {
                write!(f, "tokenizer.ggml.model = {model:?} is not supported (llama, gpt2 are)")
            }
            UnsupportedPre { pre } => write!(
                f,
                "tokenizer.ggml.pre = {pre:?} is not supported (gpt2/gpt-2, llama-bpe/llama3, qwen2, smollm/starcoder, default are)"
            ),
            InvalidUtf8 { offset } => write!(f, "text is not valid UTF-8 at byte {offset}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for TokenizerError {}

impl From<crate::oom::OutOfMemory> for TokenizerError {
    fn from(e: crate::oom::OutOfMemory) -> Self {
        TokenizerError::OutOfMemory(e)
    }
}
