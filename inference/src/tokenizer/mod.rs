//! Tokenizers built from GGUF metadata (being written).
