//! The board this kernel was built for, as constants generated from `boards/<name>.toml` by
//! `build.rs`. Pure data: the code that acts on it is in `platform/`. How cores start and how the
//! board powers off are the architecture's methods ([`crate::arch::CoreStart`],
//! [`crate::arch::Exit`]), so a board naming another architecture's method does not build.
#![allow(dead_code)]

pub use crate::arch::{CoreStart, Exit};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemKind {
    Normal,
    Device,
}

/// `[start, end)` of the physical address space and how to map it.
#[derive(Debug, Clone, Copy)]
pub struct Region {
    pub start: u64,
    pub end: u64,
    pub kind: MemKind,
}

/// Where the RAM size comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RamFrom {
    Dtb,
    Mailbox,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UartKind {
    Pl011,
    Ns16550,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    VirtioMmio,
    Sdhci,
}

include!(concat!(env!("OUT_DIR"), "/board.rs"));
