//! The board this kernel was built for, as constants generated from `boards/<name>.toml`.
#![allow(dead_code)]

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

/// How secondary cores are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreStart {
    PsciHvc,
    SpinTable,
    SbiHsm,
}

/// How the kernel powers off with a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Semihosting SYS_EXIT (QEMU machines only).
    Semihosting,
    PsciHvc,
    SbiSrst,
    /// No power control: stop the cores (a user resets the board).
    Halt,
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
