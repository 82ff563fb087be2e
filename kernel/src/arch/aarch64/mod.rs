//! aarch64: boot (assembly in `boot.s`), the identity map, exceptions, counters, cache
//! maintenance, and the firmware interfaces boards use to start cores and power off (PSCI over HVC
//! through the `smccc` crate, the Raspberry Pi spin table, semihosting under QEMU).

pub mod mmu;

use super::{Arch, Cpu};
use crate::board::{CoreStart, Exit};
use core::arch::{asm, global_asm};
use smccc::{psci, Hvc};

global_asm!(include_str!("boot.s"));

extern "C" {
    fn _start();
}

/// A CPU exception: the vector's index and the syndrome, return and fault address registers.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    index: u64,
    esr: u64,
    elr: u64,
    far: u64,
}

impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let kinds = ["sync", "irq", "fiq", "serror"];
        let from = [
            "EL1 with SP_EL0",
            "EL1 with SP_EL1",
            "lower EL (AArch64)",
            "lower EL (AArch32)",
        ];
        let Fault {
            index,
            esr,
            elr,
            far,
        } = *self;
        write!(
            f,
            "exception: {} from {}: ESR_EL1 {esr:#x} (class {:#x}), ELR_EL1 {elr:#x}, FAR_EL1 {far:#x}",
            kinds[(index % 4) as usize],
            from[(index / 4) as usize % 4],
            esr >> 26
        )
    }
}

impl Arch for Cpu {
    const QEMU_EXIT: Exit = Exit::Semihosting;
    const TAKES_IRQS: bool = true;
    /// PMEVCNTR0_EL0 is 32 bits wide on ARMv8.0 cores.
    const INSTRUCTION_COUNTER_BITS: u32 = 32;
    /// Level-2 blocks.
    const MAP_ALIGN: u64 = 2 << 20;

    fn core_id() -> usize {
        let m: u64;
        // SAFETY: reading MPIDR_EL1 has no side effects.
        unsafe { asm!("mrs {}, mpidr_el1", out(reg) m, options(nomem, nostack)) };
        (m & 0xff) as usize
    }

    /// Retired instructions (PMU event 0x08) on counter 0, and the cycle counter.
    fn core_init() {
        // SAFETY: configures this core's PMU: enable counters, count instructions on counter 0 at
        // EL1, enable counter 0 and the cycle counter. No memory is touched.
        unsafe {
            asm!(
                "msr pmcr_el0, {pmcr}",
                "msr pmselr_el0, xzr",
                "msr pmxevtyper_el0, {ev}",
                "msr pmcntenset_el0, {en}",
                "isb",
                pmcr = in(reg) 0b111u64, // E | P (reset event counters) | C (reset cycle counter)
                ev = in(reg) 0x08u64,    // INST_RETIRED, counted at EL1
                en = in(reg) (1u64 << 31) | 1,
                options(nomem, nostack)
            )
        };
    }

    fn counter() -> u64 {
        let v: u64;
        // SAFETY: reading the virtual counter has no side effects; EL1 access is enabled at boot.
        unsafe { asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
        v
    }

    fn counter_hz() -> Option<u64> {
        let v: u64;
        // SAFETY: reading CNTFRQ_EL0 has no side effects.
        unsafe { asm!("mrs {}, cntfrq_el0", out(reg) v, options(nomem, nostack)) };
        (v > 0).then_some(v)
    }

    fn instructions() -> u64 {
        let i: u64;
        // SAFETY: a read of this core's PMU event counter 0.
        unsafe { asm!("isb", "mrs {i}, pmevcntr0_el0", i = out(reg) i, options(nomem, nostack)) };
        i
    }

    /// PMCCNTR_EL0, 64 bits, counting every cycle (PMCR.D clear).
    fn cycles() -> Option<u64> {
        let c: u64;
        // SAFETY: a read of this core's PMU cycle counter.
        unsafe { asm!("isb", "mrs {c}, pmccntr_el0", c = out(reg) c, options(nomem, nostack)) };
        Some(c)
    }

    /// MIDR_EL1 (at EL1 it reads VPIDR_EL2, which boot.s sets to the real MIDR).
    fn cpu_id() -> Option<alloc::string::String> {
        let m: u64;
        // SAFETY: reading MIDR_EL1 has no side effects.
        unsafe { asm!("mrs {}, midr_el1", out(reg) m, options(nomem, nostack)) };
        Some(alloc::format!("{m:08x}"))
    }

    /// The kernel sets' features from ID_AA64ISAR0_EL1 (SDOT: its DP field), recorded once; no
    /// line to print (the kernel set's line names the set chosen).
    fn detect_features(
        _isa: Option<&str>,
        _cache_block: Option<u64>,
    ) -> Option<alloc::string::String> {
        use aarch64_cpu::registers::{Readable, ID_AA64ISAR0_EL1};
        inference::quant::set_features(inference::quant::Features::aarch64(ID_AA64ISAR0_EL1.get()));
        None
    }

    /// Not `nomem` (nor in the other architectures): masking is a compiler barrier too, so no
    /// memory access of a critical section moves outside it now that an interrupt handler runs.
    fn irq_save() -> u64 {
        let daif: u64;
        // SAFETY: only changes this core's interrupt mask.
        unsafe { asm!("mrs {}, daif", "msr daifset, #0xf", out(reg) daif, options(nostack)) };
        daif
    }

    fn irq_restore(daif: u64) {
        // SAFETY: restores a DAIF value read by irq_save.
        unsafe { asm!("msr daif, {}", in(reg) daif, options(nostack)) };
    }

    /// Clear PSTATE.I: IRQs go to `irq_entry` in `boot.s` (vector 5), which saves the interrupted
    /// state, calls `lmboot_irq` and returns.
    fn irqs_on() {
        // SAFETY: unmasks IRQs on this core; the vector table has an IRQ entry that returns, and
        // only the interrupts the kernel enabled at the controller can arrive. Not `nomem`: memory
        // the handler writes may be read after this.
        unsafe { asm!("msr daifclr, #2", "isb", options(nostack)) };
    }

    fn dcache_flush(addr: usize, len: usize) {
        for a in cache_lines(addr, len) {
            // SAFETY: clean and invalidate by address on mapped memory: the data stays the same.
            unsafe { asm!("dc civac, {}", in(reg) a, options(nostack)) };
        }
        // SAFETY: barriers only.
        unsafe { asm!("dsb sy", "isb", options(nostack)) };
    }

    fn dcache_clean(addr: usize, len: usize) {
        for a in cache_lines(addr, len) {
            // SAFETY: a clean by address writes a dirty line back and keeps it: no data changes.
            unsafe { asm!("dc cvac, {}", in(reg) a, options(nostack)) };
        }
        // SAFETY: a barrier only: the cleans complete before any later access (the mailbox write).
        unsafe { asm!("dsb sy", options(nostack)) };
    }

    unsafe fn dcache_invalidate(addr: usize, len: usize) {
        // Complete earlier accesses (the read of the mailbox answer) before the lines are dropped.
        // SAFETY: a barrier only.
        unsafe { asm!("dsb sy", options(nostack)) };
        for a in cache_lines(addr, len) {
            // SAFETY: the caller's contract: whole lines it owns, so dropping them loses nothing
            // of anyone else's; DC IVAC is allowed at EL1.
            unsafe { asm!("dc ivac, {}", in(reg) a, options(nostack)) };
        }
        // SAFETY: a barrier only: later loads see memory, not the dropped lines.
        unsafe { asm!("dsb sy", options(nostack)) };
    }

    fn io_barrier() {
        // SAFETY: a barrier only.
        unsafe { asm!("dsb sy", options(nostack)) };
    }

    fn wait() {
        // SAFETY: wfe only idles the core.
        unsafe { asm!("wfe", options(nomem, nostack)) };
    }

    fn wake() {
        // SAFETY: sev only signals other cores.
        unsafe { asm!("dsb sy", "sev", options(nostack)) };
    }

    fn map_ram(start: u64, end: u64) -> Result<(), super::MapError> {
        mmu::map_normal(start, end)
    }

    fn fault([index, esr, elr, far]: [u64; 4]) -> Fault {
        Fault {
            index,
            esr,
            elr,
            far,
        }
    }

    /// Read an address outside the identity map (T0SZ = 25: 512 GiB): a translation fault.
    fn raise_exception() {
        // SAFETY: deliberately faults; the exception handler reports it and stops the machine.
        unsafe { core::ptr::read_volatile(0x80_0000_0000 as *const u64) };
    }

    fn secondary_entry() -> usize {
        _start as *const () as usize
    }

    fn start_core(how: CoreStart, core: usize) -> bool {
        match how {
            // Cores the machine does not have (QEMU -smp) answer CPU_ON with an error.
            CoreStart::PsciHvc => {
                psci::cpu_on::<Hvc>(core as u64, Self::secondary_entry() as u64, 0).is_ok()
            }
            CoreStart::SpinTable => {
                spin_table_release(core, Self::secondary_entry());
                true
            }
            CoreStart::SbiHsm
            | CoreStart::Bcm2836Mailbox
            | CoreStart::SunxiCpucfg
            | CoreStart::PsciSmc => false,
        }
    }

    fn power_off(how: Exit, code: u32) {
        match how {
            Exit::Semihosting => {
                semihosting_exit(code);
                let _ = psci::system_off::<Hvc>();
            }
            Exit::PsciHvc => {
                let _ = psci::system_off::<Hvc>();
            }
            Exit::SbiSrst | Exit::Halt => {}
        }
    }
}

/// Data cache line size of the supported cores (Cortex-A53, Cortex-A72, Cortex-A76: CTR_EL0's
/// DminLine is 4, 16 words).
const CACHE_LINE: usize = 64;

/// The addresses of the cache lines that cover `[addr, addr + len)`.
fn cache_lines(addr: usize, len: usize) -> impl Iterator<Item = usize> {
    (addr & !(CACHE_LINE - 1)..addr + len).step_by(CACHE_LINE)
}

/// Semihosting SYS_EXIT with an exit status (QEMU `-semihosting`): QEMU exits with `code`.
fn semihosting_exit(code: u32) {
    let block = [0x20026u64, code as u64]; // ADP_Stopped_ApplicationExit, status
                                           // SAFETY: the semihosting trap reads the two-word block; under QEMU with semihosting enabled
                                           // it ends the emulation.
    unsafe {
        asm!("hlt #0xf000", in("w0") 0x18u32, in("x1") block.as_ptr(), options(nostack, readonly))
    };
}

/// Release `core`, waiting on a Raspberry Pi spin table (entries at 0xe0 + 8 * (core - 1)).
fn spin_table_release(core: usize, entry: usize) {
    let slot = 0xd8 + 8 * core;
    // SAFETY: the spin table is RAM below the kernel image reserved by the firmware for this; the
    // waiting cores read it with caches off, so the line is cleaned after the write.
    unsafe { core::ptr::write_volatile(slot as *mut u64, entry as u64) };
    Cpu::dcache_flush(slot, 8);
    Cpu::wake();
}
