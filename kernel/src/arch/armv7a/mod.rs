//! armv7a (AArch32, Cortex-A7: Raspberry Pi 2, Allwinner H3): started through `cortex-a-rt` (its
//! vector table, exception trampolines and start routine; `boot.s` runs first on every core, see
//! there), the short-descriptor identity map (`mmu.rs`), the exception reports, the generic timer
//! and the PMU, cache maintenance, and the board methods that start cores (the BCM2836 mailboxes,
//! the H3's CPU configuration block, PSCI over SMC) and stop (semihosting under QEMU).
//!
//! The kernel runs in System mode, as `cortex-a-rt` sets it up. The Rust target is
//! `armv7a-none-eabi` (the soft-float ABI: rustup ships no prebuilt `core` for the hard-float
//! `armv7a-none-eabihf` on this toolchain), built for the Cortex-A7 with VFPv4 and NEON turned on
//! (`.cargo/config.toml`), so floating point runs on the FPU and only calls pass floats in integer
//! registers. `boot.s` enables the FPU before any Rust code runs.

pub mod mmu;

use super::{Arch, Cpu};
use crate::board::{CoreStart, Exit};
use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU32, Ordering};
use smccc::{psci, Smc};

global_asm!(include_str!("boot.s"));

extern "C" {
    fn _start();
    fn lmboot_main(dtb_addr: usize, core: usize) -> !;
}

/// Core 0's device tree candidate (the firmware's r2), saved by `boot.s` before cortex-a-rt
/// clears BSS: an initialised static lives in .data, which is not cleared.
#[no_mangle]
static mut LMBOOT_BOOT_DTB: usize = usize::MAX;

/// The mode core 0 was entered in (CPSR.M), saved by `boot.s` for [`Arch::detect_features`]'s
/// line.
#[no_mangle]
static mut LMBOOT_ENTRY_MODE: u32 = u32::MAX;

/// Core 0's Rust entry, called by cortex-a-rt's `_default_start` in System mode with every mode's
/// stack set, BSS cleared and the MMU, caches and FPU on (`boot.s`).
#[cortex_a_rt::entry]
fn kmain() -> ! {
    // SAFETY: written once by boot.s before Rust runs; only core 0 is running.
    let dtb = unsafe { core::ptr::addr_of!(LMBOOT_BOOT_DTB).read_volatile() };
    // SAFETY: the platform's entry, called once, on core 0.
    unsafe { lmboot_main(if dtb == usize::MAX { 0 } else { dtb }, 0) }
}

/// The first CNTFRQ a core read (core 0's), for cores whose firmware left theirs at 0.
static CORE0_HZ: AtomicU32 = AtomicU32::new(0);

/// The exception kinds `cortex-a-rt` routes to Rust, as [`Fault`] numbers them.
const UNDEFINED: u64 = 0;
const PREFETCH_ABORT: u64 = 1;
const DATA_ABORT: u64 = 2;

/// A CPU exception: which, the faulting instruction, the fault status and address registers,
/// and the mode it came from (SPSR).
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    kind: u64,
    pc: u64,
    /// DFSR / IFSR (0 for an undefined instruction).
    fsr: u64,
    /// DFAR / IFAR; for an undefined instruction the SPSR sits in the upper half of `spsr_far`.
    spsr_far: u64,
}

fn mode_name(m: u32) -> &'static str {
    match m & 0x1f {
        0x10 => "User",
        0x11 => "FIQ",
        0x12 => "IRQ",
        0x13 => "Supervisor",
        0x16 => "Monitor",
        0x17 => "Abort",
        0x1a => "Hyp",
        0x1b => "Undefined",
        0x1f => "System",
        _ => "an unknown mode",
    }
}

/// The fault status field of a short-descriptor DFSR/IFSR (`FS[4]` at bit 10, `FS[3:0]` at 3:0).
fn fault_status(fsr: u32) -> (u32, &'static str) {
    let fs = ((fsr >> 6) & 0x10) | (fsr & 0xf);
    let what = match fs {
        0x01 => "alignment fault",
        0x02 => "debug event",
        0x03 | 0x06 => "access flag fault",
        0x05 | 0x07 => "translation fault",
        0x08 => "synchronous external abort",
        0x09 | 0x0b => "domain fault",
        0x0d | 0x0f => "permission fault",
        0x16 => "asynchronous external abort",
        0x19 => "synchronous parity error",
        _ => "other fault",
    };
    (fs, what)
}

impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (pc, fsr) = (self.pc as u32, self.fsr as u32);
        let (spsr, far) = ((self.spsr_far >> 32) as u32, self.spsr_far as u32);
        let from = mode_name(spsr);
        match self.kind {
            UNDEFINED => write!(
                f,
                "exception: undefined instruction at {pc:#x} in {from} mode (SPSR {spsr:#x})"
            ),
            PREFETCH_ABORT | DATA_ABORT => {
                let (kind, fsr_name, far_name) = if self.kind == DATA_ABORT {
                    ("data abort", "DFSR", "DFAR")
                } else {
                    ("prefetch abort", "IFSR", "IFAR")
                };
                let (fs, what) = fault_status(fsr);
                let wnr = if self.kind == DATA_ABORT && fsr & (1 << 11) != 0 {
                    ", on a write"
                } else {
                    ""
                };
                write!(
                    f,
                    "exception: {kind} ({what}, status {fs:#x}{wnr}) at {pc:#x} in {from} mode: {fsr_name} {fsr:#x}, {far_name} {far:#x}"
                )
            }
            k => write!(f, "exception: kind {k} at {pc:#x}"),
        }
    }
}

/// The mode the exception came from (this mode's SPSR), in the upper half of the word
/// [`Fault`] keeps with the fault address.
fn spsr() -> u64 {
    let v: u32;
    // SAFETY: reads this mode's SPSR (Undefined or Abort mode: the handlers run there).
    unsafe { asm!("mrs {}, spsr", out(reg) v, options(nomem, nostack)) };
    (v as u64) << 32
}

extern "C" {
    fn lmboot_trap(a: u64, b: u64, c: u64, d: u64) -> !;
}

#[cortex_a_rt::exception(Undefined)]
fn undefined(addr: usize) -> ! {
    // SAFETY: the platform's report-and-stop entry.
    unsafe { lmboot_trap(UNDEFINED, addr as u64, 0, spsr()) }
}

#[cortex_a_rt::exception(PrefetchAbort)]
fn prefetch_abort(addr: usize) -> ! {
    let (ifsr, ifar): (u32, u32);
    // SAFETY: reads of this core's fault status and address registers.
    unsafe {
        asm!("mrc p15, 0, {}, c5, c0, 1", "mrc p15, 0, {}, c6, c0, 2", out(reg) ifsr, out(reg) ifar, options(nomem, nostack))
    };
    // SAFETY: the platform's report-and-stop entry.
    unsafe {
        lmboot_trap(
            PREFETCH_ABORT,
            addr as u64,
            ifsr as u64,
            spsr() | ifar as u64,
        )
    }
}

#[cortex_a_rt::exception(DataAbort)]
fn data_abort(addr: usize) -> ! {
    let (dfsr, dfar): (u32, u32);
    // SAFETY: reads of this core's fault status and address registers.
    unsafe {
        asm!("mrc p15, 0, {}, c5, c0, 0", "mrc p15, 0, {}, c6, c0, 0", out(reg) dfsr, out(reg) dfar, options(nomem, nostack))
    };
    // SAFETY: the platform's report-and-stop entry.
    unsafe { lmboot_trap(DATA_ABORT, addr as u64, dfsr as u64, spsr() | dfar as u64) }
}

impl Arch for Cpu {
    const QEMU_EXIT: Exit = Exit::Semihosting;
    /// PMU event counters are 32 bits wide on ARMv7.
    const INSTRUCTION_COUNTER_BITS: u32 = 32;
    /// 1 MiB sections.
    const MAP_ALIGN: u64 = 1 << 20;

    fn core_id() -> usize {
        (cortex_ar::register::Mpidr::read().0 & 0xff) as usize
    }

    /// Instructions architecturally executed (PMU event 0x08) on counter 0, and the cycle counter.
    fn core_init() {
        // SAFETY: configures this core's PMU: enable and reset the counters (PMCR E|P|C), select
        // counter 0 (PMSELR), count event 0x08 at PL1 (PMXEVTYPER), enable counter 0 and the
        // cycle counter (PMCNTENSET). No memory is touched.
        unsafe {
            asm!(
                "mcr p15, 0, {pmcr}, c9, c12, 0",
                "mcr p15, 0, {zero}, c9, c12, 5",
                "mcr p15, 0, {ev}, c9, c13, 1",
                "mcr p15, 0, {en}, c9, c12, 1",
                "isb",
                pmcr = in(reg) 0b111u32,
                zero = in(reg) 0u32,
                ev = in(reg) 0x08u32,
                en = in(reg) (1u32 << 31) | 1,
                options(nomem, nostack)
            )
        };
    }

    fn counter() -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: reads the physical counter (CNTPCT); PL1 access is allowed (boot.s sets
        // CNTHCTL when it leaves HYP).
        unsafe {
            asm!("isb", "mrrc p15, 0, {}, {}, c14", out(reg) lo, out(reg) hi, options(nomem, nostack))
        };
        (hi as u64) << 32 | lo as u64
    }

    /// CNTFRQ, which firmware sets per core: U-Boot sets only core 0's on the H3, so the other
    /// cores read 0 there and take core 0's (read first, by the console's bring-up).
    fn counter_hz() -> Option<u64> {
        let v: u32;
        // SAFETY: reading CNTFRQ has no side effects.
        unsafe { asm!("mrc p15, 0, {}, c14, c0, 0", out(reg) v, options(nomem, nostack)) };
        if v > 0 {
            let _ = CORE0_HZ.compare_exchange(0, v, Ordering::Relaxed, Ordering::Relaxed);
            return Some(v as u64);
        }
        let hz = CORE0_HZ.load(Ordering::Relaxed);
        (hz > 0).then_some(hz as u64)
    }

    fn instructions() -> u64 {
        let v: u32;
        // SAFETY: selects counter 0 and reads it (PMSELR, PMXEVCNTR) on this core.
        unsafe {
            asm!("mcr p15, 0, {z}, c9, c12, 5", "isb", "mrc p15, 0, {v}, c9, c13, 2", z = in(reg) 0u32, v = out(reg) v, options(nomem, nostack))
        };
        v as u64
    }

    /// PMCCNTR is 32 bits wide.
    const CYCLE_COUNTER_BITS: u32 = 32;

    /// PMCCNTR, counting every cycle (PMCR.D clear).
    fn cycles() -> Option<u64> {
        let v: u32;
        // SAFETY: a read of this core's PMU cycle counter.
        unsafe { asm!("isb", "mrc p15, 0, {}, c9, c13, 0", out(reg) v, options(nomem, nostack)) };
        Some(v as u64)
    }

    fn cpu_id() -> Option<alloc::string::String> {
        let midr = cortex_ar::register::Midr::read().raw_value();
        Some(alloc::format!("{midr:08x}"))
    }

    /// NEON (with VFP's half-precision conversions) is there when MVFR1 says so
    /// (`neon32::mvfr1_has_neon`); the NEON kernels are chosen from that. The whole kernel is
    /// built for VFPv4 + NEON, so a core without them stops at its first vector instruction: the
    /// line says so.
    fn detect_features(
        _isa: Option<&str>,
        _cache_block: Option<u64>,
    ) -> Option<alloc::string::String> {
        use inference::quant::neon32;
        let mvfr1: u32;
        // SAFETY: reads MVFR1 (the FPU is on since boot.s).
        unsafe { asm!("vmrs {}, mvfr1", out(reg) mvfr1, options(nomem, nostack)) };
        let neon = neon32::mvfr1_has_neon(mvfr1);
        inference::quant::set_features(inference::quant::Features {
            neon,
            ..Default::default()
        });
        let midr = cortex_ar::register::Midr::read().raw_value();
        // SAFETY: written once by boot.s before Rust runs.
        let entry = unsafe { core::ptr::addr_of!(LMBOOT_ENTRY_MODE).read_volatile() };
        let part = match (midr >> 4) & 0xfff {
            0xc07 => "Cortex-A7",
            0xc0f => "Cortex-A15",
            0xd03 => "Cortex-A53",
            _ => "an Armv7-A core",
        };
        let (var, rev) = ((midr >> 20) & 0xf, midr & 0xf);
        let mut line = alloc::format!(
            "cpu: {part} r{var}p{rev} (MIDR {midr:#x}), entered in {} mode, running in System mode; {}",
            mode_name(entry),
            if neon { "VFPv4 + NEON" } else { "no NEON" }
        );
        if !neon {
            line.push_str(&alloc::format!("\nwarning: MVFR1 {mvfr1:#x} reports no NEON: this kernel is built for VFPv4 + NEON and will stop at its first vector instruction"));
        }
        Some(line)
    }

    fn irq_save() -> u64 {
        let cpsr: u32;
        // SAFETY: only changes this core's interrupt mask.
        unsafe { asm!("mrs {}, cpsr", "cpsid if", out(reg) cpsr, options(nostack)) };
        cpsr as u64
    }

    fn irq_restore(cpsr: u64) {
        // SAFETY: restores the control field (mode unchanged, I/F as saved) read by irq_save.
        unsafe { asm!("msr cpsr_c, {}", in(reg) cpsr as u32, options(nostack)) };
    }

    fn dcache_flush(addr: usize, len: usize) {
        for a in cache_lines(addr, len) {
            cortex_ar::cache::clean_and_invalidate_data_cache_line_to_poc(a as u32);
        }
        cortex_ar::asm::dsb();
        cortex_ar::asm::isb();
    }

    fn dcache_clean(addr: usize, len: usize) {
        for a in cache_lines(addr, len) {
            cortex_ar::cache::clean_data_cache_line_to_poc(a as u32);
        }
        cortex_ar::asm::dsb();
    }

    unsafe fn dcache_invalidate(addr: usize, len: usize) {
        cortex_ar::asm::dsb();
        for a in cache_lines(addr, len) {
            cortex_ar::cache::invalidate_data_cache_line_to_poc(a as u32);
        }
        cortex_ar::asm::dsb();
    }

    fn io_barrier() {
        cortex_ar::asm::dsb();
    }

    fn wait() {
        cortex_ar::asm::wfe();
    }

    fn wake() {
        cortex_ar::asm::dsb();
        cortex_ar::asm::sev();
    }

    fn map_ram(start: u64, end: u64) -> Result<(), super::MapError> {
        mmu::map_normal(start, end)
    }

    fn fault([kind, pc, fsr, spsr_far]: [u64; 4]) -> Fault {
        Fault {
            kind,
            pc,
            fsr,
            spsr_far,
        }
    }

    /// Read an address the identity map leaves out: a translation fault.
    fn raise_exception() {
        // SAFETY: deliberately faults; the exception handler reports it and stops the machine.
        unsafe { core::ptr::read_volatile(mmu::UNMAPPED as *const u32) };
    }

    fn secondary_entry() -> usize {
        _start as *const () as usize
    }

    fn start_core(how: CoreStart, core: usize) -> bool {
        match how {
            CoreStart::Bcm2836Mailbox => bcm2836_release(core, Self::secondary_entry()),
            CoreStart::SunxiCpucfg => sunxi_cpu_on(core, Self::secondary_entry()),
            // Cores the machine does not have (QEMU -smp) answer CPU_ON with an error.
            CoreStart::PsciSmc => {
                psci::cpu_on_32::<Smc>(core as u32, Self::secondary_entry() as u32, 0).is_ok()
            }
            CoreStart::PsciHvc | CoreStart::SpinTable | CoreStart::SbiHsm => false,
        }
    }

    fn power_off(how: Exit, code: u32) {
        if how == Exit::Semihosting {
            semihosting_exit(code);
        }
    }
}

/// Data cache line size of the Cortex-A7 (CTR's DminLine is 4: 16 words).
const CACHE_LINE: usize = 64;

/// The addresses of the cache lines that cover `[addr, addr + len)`.
fn cache_lines(addr: usize, len: usize) -> impl Iterator<Item = usize> {
    (addr & !(CACHE_LINE - 1)..addr + len).step_by(CACHE_LINE)
}

/// Semihosting SYS_EXIT_EXTENDED with an exit status (QEMU `-semihosting`): QEMU exits with
/// `code`. The trap is `HLT #0xF000` (A32), written as its encoding: ARMv7 assemblers do not know
/// HLT, and a real ARMv7 core would take it as undefined (QEMU builds only).
fn semihosting_exit(code: u32) {
    let block = [0x20026u32, code]; // ADP_Stopped_ApplicationExit, status
                                    // SAFETY: the semihosting trap reads the two-word block; under QEMU with semihosting enabled
                                    // it ends the emulation.
    unsafe {
        asm!(".inst 0xe10f0070", in("r0") 0x20u32, in("r1") block.as_ptr(), options(nostack, readonly))
    };
}

/// The BCM2836 local controller (ARM control block at 0x4000_0000): core `n`'s mailbox 3 set
/// register is at 0x8c + 16 n. The Pi 2 firmware (and QEMU's stand-in for it) parks cores 1-3
/// polling it and jumps to the address written there.
const BCM2836_LOCAL: usize = 0x4000_0000;

/// Start `core` (1-3) of a BCM2836 at `entry` through its mailbox 3.
fn bcm2836_release(core: usize, entry: usize) -> bool {
    if !(1..4).contains(&core) {
        return false;
    }
    let set = BCM2836_LOCAL + 0x8c + 16 * core;
    // SAFETY: the ARM local controller's mailbox register (device memory in the board's map);
    // the parked core reads it and jumps to `entry`, our `_start`.
    unsafe { core::ptr::write_volatile(set as *mut u32, entry as u32) };
    Cpu::wake();
    true
}

/// Busy-wait about `us` microseconds on the generic timer.
fn delay_us(us: u64) {
    let hz = Cpu::counter_hz().unwrap_or(24_000_000);
    let end = Cpu::counter() + us * hz / 1_000_000;
    while Cpu::counter() < end {
        core::hint::spin_loop();
    }
}

/// The H3's CPU configuration block (R_CPUCFG) and its power management (R_PRCM).
const SUNXI_CPUCFG: usize = 0x01f0_1c00;
const SUNXI_PRCM: usize = 0x01f0_1400;

/// Start `core` (1-3) of an H3 at `entry`, as U-Boot's PSCI for sun8i and Linux's sunxi SMP code
/// do: hold the core in reset, set the entry address, invalidate its L1 on reset, power it up
/// (open the power clamp step by step, lift the power-off gate), release the reset. QEMU models
/// the entry address and the reset register (a write starts the core); the power registers
/// read as zero there and the writes are ignored.
fn sunxi_cpu_on(core: usize, entry: usize) -> bool {
    if !(1..4).contains(&core) {
        return false;
    }
    let w = |addr: usize, v: u32| {
        // SAFETY: the SoC's CPU configuration and power registers (device memory in the board's
        // map), used only here, by core 0, before the core starts.
        unsafe { core::ptr::write_volatile(addr as *mut u32, v) }
    };
    // SAFETY: as `w`, a read.
    let r = |addr: usize| unsafe { core::ptr::read_volatile(addr as *const u32) };
    let rst = SUNXI_CPUCFG + 0x40 * (core + 1);
    w(rst, 0); // hold in reset
    w(SUNXI_CPUCFG + 0x1a4, entry as u32); // the cores' reset entry address
    w(SUNXI_CPUCFG + 0x184, r(SUNXI_CPUCFG + 0x184) & !(1 << core)); // L1 reset-invalidate
    let clamp = SUNXI_PRCM + 0x140 + 4 * core;
    for v in [0xfe, 0xf8, 0xe0, 0x80, 0x00] {
        w(clamp, v);
        delay_us(10);
    }
    w(SUNXI_PRCM + 0x100, r(SUNXI_PRCM + 0x100) & !(1 << core)); // power-off gate off
    delay_us(10);
    w(rst, 0b11); // out of reset: core and its power-on reset
    true
}
