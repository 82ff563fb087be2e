//! The board this kernel was built for, as constants generated from `boards/<name>.toml` by
//! `build.rs`. Pure data, depending on nothing: `platform/` acts on it, and `arch/` reads the
//! memory map, core count and the firmware methods (the board schema accepts only the target
//! architecture's methods for `core_start` and `exit`).
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

/// How secondary cores are started (by the architecture's firmware interface).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreStart {
    /// aarch64: PSCI CPU_ON over HVC (QEMU virt).
    PsciHvc,
    /// aarch64: the Raspberry Pi firmware's spin table.
    SpinTable,
    /// riscv64: SBI HSM hart_start.
    SbiHsm,
    /// armv7a: the BCM2836 local controller's mailbox 3 (Raspberry Pi 2).
    Bcm2836Mailbox,
    /// armv7a: the Allwinner H3 CPU configuration block.
    SunxiCpucfg,
    /// armv7a: PSCI CPU_ON over SMC (QEMU virt with virtualization on).
    PsciSmc,
}

/// How the kernel powers off with a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// aarch64 and armv7a: semihosting SYS_EXIT (QEMU machines only; aarch64 then tries PSCI
    /// SYSTEM_OFF).
    Semihosting,
    /// aarch64: PSCI SYSTEM_OFF over HVC.
    PsciHvc,
    /// riscv64: SBI SRST shutdown.
    SbiSrst,
    /// No power control: stop the cores (a user resets the board).
    Halt,
}

/// Where the RAM size comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RamFrom {
    /// The device tree passed at entry (or found at the start of RAM).
    Dtb,
    /// The device tree passed at entry if the firmware passes one, else the VideoCore mailbox.
    DtbThenMailbox,
    /// The Allwinner H3's DRAM controller, as U-Boot's SPL configured it (no device tree comes
    /// with U-Boot's `go`).
    SunxiDramc,
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
    SunxiMmc,
}

include!(concat!(env!("OUT_DIR"), "/board.rs"));
