//! lmboot's bare-metal kernel. Boot flow (per architecture): entry in assembly → exception level /
//! mode switch → FP/SIMD on → BSS cleared → MMU and caches → heap → secondary cores → mount the card
//! → page cache → model → generation loop → power off.
//!
//! This library holds the kernel's portable logic, which builds and is tested on the host: the page
//! cache with read-ahead ([`pagecache`]) and the core that serves the card for it ([`iocore`]), the
//! configuration file ([`config`]), the run from mounting the card to the stats line ([`run`]), the
//! chat on the serial line ([`session`], [`lineedit`], [`chatcmd`]), the prompt cache on the card
//! ([`promptcache`]), and per-core instruction measurement ([`measure`]). The binary (`main.rs`)
//! adds what only runs on a board: the architecture folders (`arch/aarch64`, `arch/riscv64`: entry,
//! exception level or mode, MMU or bare mode, traps, counters, power), the board constants generated
//! from `boards/*.toml`, the console, heap, worker pool on all cores (`smp.rs`), and the glue to the
//! block drivers (virtio-blk, SDHCI).
#![cfg_attr(not(any(test, feature = "std")), no_std)]

extern crate alloc;

pub mod chatcmd;
pub mod config;
#[cfg(feature = "std")]
pub mod hostfile;
pub mod iocore;
pub mod lineedit;
pub mod measure;
pub mod pagecache;
pub mod promptcache;
pub mod run;
pub mod session;

pub use drivers;
pub use inference;
