//! What every architecture provides, as one trait ([`Arch`]), implemented for [`Cpu`] by the twin
//! for the target (`aarch64/`, `armv7a/`, `riscv64/`), which also defines its [`Fault`]. Nothing
//! outside `arch/` touches system registers or writes `asm!`; the board code calls [`Cpu`] through
//! this trait only. Firmware calls go through the `smccc` crate (PSCI over HVC or SMC) and the
//! `sbi-rt` crate (SBI HSM, IPI and SRST).
//!
//! Entry: each twin's `boot.s` is the image's entry point (`_start`). It brings core 0 to the
//! kernel's exception level or mode with FP/SIMD on, a stack and BSS cleared (and on aarch64 the
//! MMU and caches on), then calls `lmboot_main(dtb, core)`; secondary cores enter at
//! [`Arch::secondary_entry`] and call `lmboot_secondary(core)`. A CPU exception calls
//! `lmboot_trap(a, b, c, d)` with the twin's fault registers, which [`Arch::fault`] turns into a
//! report; on aarch64 an IRQ calls `lmboot_irq()` and returns ([`Arch::irqs_on`]). The
//! `lmboot_*` functions live in `platform/`.

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "aarch64")]
pub use aarch64::Fault;

#[cfg(target_arch = "arm")]
mod armv7a;
#[cfg(target_arch = "arm")]
pub use armv7a::Fault;

#[cfg(target_arch = "riscv64")]
mod riscv64;
#[cfg(target_arch = "riscv64")]
pub use riscv64::Fault;

/// The CPU the kernel is built for: [`Arch`] as the target's twin implements it.
#[derive(Debug, Clone, Copy)]
pub struct Cpu;

use crate::board::{CoreStart, Exit};
use core::fmt;

/// Why RAM could not be mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // riscv64 runs untranslated: it never fails to map
pub enum MapError {
    /// The range is not aligned to [`Arch::MAP_ALIGN`] or lies past the address space mapped.
    Unaligned { start: u64, end: u64 },
    /// Part of the range is not normal memory in the board description.
    NotNormal { addr: u64 },
    /// No translation table left for the gigabyte holding `addr`.
    NoTable { addr: u64 },
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MapError::Unaligned { start, end } => {
                write!(f, "{start:#x}..{end:#x} is not aligned or past the map")
            }
            MapError::NotNormal { addr } => {
                write!(f, "{addr:#x} is not normal memory in the board file")
            }
            MapError::NoTable { addr } => {
                write!(f, "no translation table left to map {addr:#x}")
            }
        }
    }
}

/// One architecture: its counters, caches, idle and wake, faults, and how its firmware starts
/// cores and powers off.
pub trait Arch {
    /// The power-off method a QEMU build uses when the board has no test finisher, so that QEMU
    /// exits with the kernel's status.
    const QEMU_EXIT: Exit;
    /// Width in bits of the counter [`Arch::instructions`] reads (it wraps).
    const INSTRUCTION_COUNTER_BITS: u32;
    /// The granule [`Arch::map_ram`] maps in.
    const MAP_ALIGN: u64;

    /// This core's number.
    fn core_id() -> usize;
    /// Per-core setup once in Rust (each core, before taking part in jobs): performance
    /// counters on, wake-ups from [`Arch::wake`] enabled.
    fn core_init();
    /// Timer ticks since boot.
    fn counter() -> u64;
    /// Timer frequency, if the CPU reports it (else the device tree's is used).
    fn counter_hz() -> Option<u64>;
    /// Retired instructions on this core (exact under QEMU `-icount`).
    fn instructions() -> u64;
    /// Width in bits of the counter [`Arch::cycles`] reads (it wraps).
    const CYCLE_COUNTER_BITS: u32 = 64;
    /// This core's cycle counter (enabled by [`Arch::core_init`]); `None`: none is read.
    fn cycles() -> Option<u64> {
        None
    }
    /// The CPU's id for the self-test's report: MIDR on Arm, `mvendorid.marchid` on RISC-V (hex).
    fn cpu_id() -> Option<alloc::string::String>;
    /// Enable the SIMD kernels the CPU has and ready the cache maintenance; `isa` is the device
    /// tree's ISA string and `cache_block` its cache-block size (`riscv,cbom-block-size`) where
    /// the architecture needs them. Returns lines for the console, if there is something to say.
    fn detect_features(
        isa: Option<&str>,
        cache_block: Option<u64>,
    ) -> Option<alloc::string::String>;

    /// Mask interrupts on this core; returns the state for [`Arch::irq_restore`].
    fn irq_save() -> u64;
    fn irq_restore(state: u64);
    /// Whether the twin has an interrupt entry (which calls `lmboot_irq` and returns): where not,
    /// the kernel enables no interrupt and the ring link is polled.
    const TAKES_IRQS: bool = false;
    /// Take interrupts on this core from now on (only where [`Arch::TAKES_IRQS`]).
    fn irqs_on() {}
    /// Clean and invalidate the data cache over `[addr, addr + len)` to the point of coherency
    /// (buffers shared with a co-processor or with a core running with caches off).
    fn dcache_flush(addr: usize, len: usize);
    /// Clean (write back) the data cache over `[addr, addr + len)` to the point of coherency,
    /// keeping the lines: before a co-processor reads a buffer the CPU wrote.
    fn dcache_clean(addr: usize, len: usize);
    /// Invalidate the data cache over `[addr, addr + len)` to the point of coherency without
    /// writing anything back: before the CPU reads what a co-processor wrote to memory.
    ///
    /// # Safety
    /// `addr` and `len` must cover whole cache lines (64-byte aligned on the supported cores) of
    /// memory the caller owns: whatever is dirty in those lines is discarded.
    unsafe fn dcache_invalidate(addr: usize, len: usize);
    /// A full data synchronisation barrier, for switching between peripherals (the BCM2835 guide's
    /// "memory barrier before the first write to and after the last read from a peripheral").
    fn io_barrier();

    /// Idle until [`Arch::wake`] from another core (or return at once if one is pending).
    fn wait();
    /// Wake the cores in [`Arch::wait`].
    fn wake();

    /// Map `[start, end)` (aligned to [`Arch::MAP_ALIGN`]) as normal cacheable memory, on core 0
    /// before the other cores start. Only RAM that exists is ever mapped so.
    fn map_ram(start: u64, end: u64) -> Result<(), MapError>;

    /// Turn the trap entry's four registers into a report (a CPU exception as the trap entry
    /// reported it).
    fn fault(regs: [u64; 4]) -> Fault;
    /// Raise a CPU exception on purpose (`selftest = exception`).
    fn raise_exception();

    /// Where secondary cores start.
    fn secondary_entry() -> usize;
    /// Start core `core` at [`Arch::secondary_entry`] by the board's method. Returns whether the
    /// firmware accepted (never, for another architecture's method: the board schema refuses
    /// those at build time).
    fn start_core(how: CoreStart, core: usize) -> bool;
    /// Power off with `code` (0 = success) by the board's method; returns if the firmware
    /// refuses (or the method is another architecture's).
    fn power_off(how: Exit, code: u32);
}
