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
//!
//! # Layers
//!
//! The top modules import one way, down this list: a module imports only modules on lines above
//! its own. `cargo xtask house` checks it (every top module listed, every import downwards,
//! re-exports followed to the module that defines the item), and in every crate fails on a cycle
//! and on an import through a re-export of an item whose module imports the importer back.
//!
//! 1. leaves, importing no other module: [`oom`], [`fit`], [`parallel`], [`storage`];
//! 2. [`ops`] (the float helpers), [`kv`] (the f16 KV cache);
//! 3. [`quant`]: the weight types, the activation blocks and the kernel sets;
//! 4. [`gguf`]: the file's metadata and tensor table (its types come from `quant`);
//! 5. [`matvec`] (weight rows through the kernels), [`tokenizer`];
//! 6. [`template`] (chat templates), [`sample`] (the sampler, JSON constraints over the
//!    tokenizer's pieces);
//! 7. [`model`]: the forward pass (it keeps the sampler's running best over the output head);
//! 8. [`generate`]: the generation loop;
//! 9. [`speculate`]: several tokens per pass, over the model and the generation loop.
//!
//! Inside the crate an item is named by the module that defines it (`crate::oom::OutOfMemory`);
//! the re-exports below are for the crates that use `inference`.
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
