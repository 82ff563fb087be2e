//! lmboot's runtime: everything between the board's drivers and the model, portable and tested on
//! the host. The bare-metal `kernel` crate brings a board up and calls [`run::run`]; `lmboot-host`
//! uses the page cache on a PC.
//!
//! Organised by the stages of a token's path:
//! - [`card`]: the model file on the card (FAT extents over a block device) as a page-cache source;
//! - [`pagecache`]: the fixed-size page cache standing in for mmap, with read-ahead announced by
//!   the forward pass (and, with `std`, a file on the PC as a source);
//! - [`iocore`]: one core serving the card while the others compute (cards that cannot queue);
//! - [`promptcache`]: the state after the system prompt, kept in a file on the card;
//! - [`config`][]: `lmboot.txt`;
//! - [`console`]: the serial line as the runtime sees it;
//! - [`chat`]: the conversation on the serial line (session, line editor, commands);
//! - [`platform`]: what a board offers the run (clock, heap figures, worker pool, hooks), one
//!   trait the kernel's board and the tests' PC implement;
//! - [`run`]: the run itself, in named steps (mount, read the config, open the model, size the
//!   buffers and cache, load, then chat or generate), with typed errors, and per-core
//!   instruction measurement ([`run::measure`]).
#![cfg_attr(not(any(test, feature = "std")), no_std)]

extern crate alloc;

pub mod card;
pub mod chat;
pub mod config;
pub mod console;
pub mod iocore;
pub mod pagecache;
pub mod platform;
pub mod promptcache;
pub mod ring;
pub mod run;
#[cfg(test)]
mod testutil;

pub use drivers;
pub use inference;
