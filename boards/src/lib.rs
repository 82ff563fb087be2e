//! lmboot's boards: the kinds a board file names and the memory map's region ([`kinds`],
//! `no_std`: the kernel uses them as they are) and, with the `std` feature, the schema of
//! `boards/<name>.toml` that `kernel/build.rs` and `xtask` read (`schema.rs`: [`load`],
//! [`Board`], the kernel's constants).
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]

#[cfg(feature = "std")]
extern crate alloc;

pub mod kinds;
pub use kinds::*;

#[cfg(feature = "std")]
mod schema;
#[cfg(feature = "std")]
pub use schema::*;
