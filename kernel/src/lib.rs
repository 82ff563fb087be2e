//! lmboot's bare-metal kernel. Boot flow (per architecture): entry in assembly → exception level /
//! mode switch → FP/SIMD on → BSS cleared → MMU and caches → heap → secondary cores → mount the card
//! → page cache → model → generation loop → power off.
//!
//! This library holds the kernel's portable logic (page cache, configuration, the run), which builds
//! and is tested on the host; the architecture and board code joins it in the boot issues.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod config;
pub mod measure;
pub mod pagecache;
pub mod run;

pub use drivers;
pub use inference;
