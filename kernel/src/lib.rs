//! lmboot's bare-metal kernel. Boot flow (per architecture): entry in assembly → exception level /
//! mode switch → FP/SIMD on → BSS cleared → MMU and caches → heap → secondary cores → mount the card
//! → page cache → model → generation loop → power off.
//!
//! Filled in by the boot issues (see README "Status"); for now it only proves that `inference` and
//! `drivers` link into a `no_std` program.
#![no_std]

pub use drivers;
pub use inference;
