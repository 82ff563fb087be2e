//! lmboot's inference core: everything between the bytes of a GGUF file and the next token, with no
//! operating system underneath.
//!
//! `#![no_std]` with `alloc`: the same code runs on the host (tests, the PC runner) and on the boards.
//! The `std` feature adds host conveniences only (file-backed storage, `std::error::Error` impls).
//!
//! Data flow: a [`storage::Storage`] (file, page cache, memory) → [`gguf::Gguf`] (metadata and the
//! tensor table, validated) → [`matvec`] over weight rows with [`quant::Kernels`] (the scalar
//! reference, and its NEON, NEON+SDOT and RVV twins, chosen at start from what the CPU has, bit for
//! bit the same results) → the model's forward pass ([`model`]) → [`sample`] → [`tokenizer`].
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

pub mod fit;
pub mod generate;
pub mod gguf;
pub mod kv;
pub mod matvec;
pub mod model;
pub mod oom;
pub mod ops;
pub mod parallel;
pub mod quant;
pub mod sample;
pub mod speculate;
pub mod storage;
pub mod template;
pub mod tokenizer;

pub use fit::TooLarge;
pub use gguf::{Gguf, GgufError, GgufErrorKind, TensorInfo};
pub use oom::OutOfMemory;
pub use quant::{ActBuf, ActFormat, Acts, GgmlType, Kernels};
pub use sample::{json, sampler};
pub use storage::{SliceStorage, Storage, StorageError};
