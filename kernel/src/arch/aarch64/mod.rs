//! aarch64: boot (assembly in `boot.s`), the identity map, exceptions, counters, power off.

pub mod mmu;

use core::arch::{asm, global_asm};

global_asm!(include_str!("boot.s"));

/// The exception-vector entry point (see `boot.s`): print what happened and stop with status 2.
#[no_mangle]
extern "C" fn lmboot_exception(index: u64, esr: u64, elr: u64, far: u64) -> ! {
    let kinds = ["sync", "irq", "fiq", "serror"];
    let from = [
        "EL1 with SP_EL0",
        "EL1 with SP_EL1",
        "lower EL (AArch64)",
        "lower EL (AArch32)",
    ];
    crate::console::emergency(format_args!(
        "\n*** exception: {} from {}: ESR_EL1 {esr:#x} (class {:#x}), ELR_EL1 {elr:#x}, FAR_EL1 {far:#x}\n",
        kinds[(index % 4) as usize],
        from[(index / 4) as usize % 4],
        esr >> 26
    ));
    crate::power::exit(2)
}

/// Counter ticks since boot and their frequency.
pub fn counter() -> u64 {
    let v: u64;
    // SAFETY: reading the virtual counter has no side effects; EL1 access is enabled at boot.
    unsafe { asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
    v
}

pub fn counter_hz() -> u64 {
    let v: u64;
    // SAFETY: reading CNTFRQ_EL0 has no side effects.
    unsafe { asm!("mrs {}, cntfrq_el0", out(reg) v, options(nomem, nostack)) };
    v
}

/// Retired instructions (PMU event 0x08) and cycles: exact under QEMU `-icount`.
pub fn perf_counters_enable() {
    // SAFETY: configures this core's PMU: enable counters, count instructions on counter 0 at EL1,
    // enable counter 0 and the cycle counter. No memory is touched.
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

/// (instructions, cycles) since [`perf_counters_enable`].
pub fn perf_counters() -> (u64, u64) {
    let (i, c): (u64, u64);
    // SAFETY: reads of this core's PMU counters.
    unsafe {
        asm!("isb", "mrs {i}, pmevcntr0_el0", "mrs {c}, pmccntr_el0", i = out(reg) i, c = out(reg) c, options(nomem, nostack))
    };
    (i, c)
}

/// Mask interrupts and return the previous DAIF.
pub fn irq_save() -> u64 {
    let daif: u64;
    // SAFETY: only changes this core's interrupt mask.
    unsafe { asm!("mrs {}, daif", "msr daifset, #0xf", out(reg) daif, options(nomem, nostack)) };
    daif
}

pub fn irq_restore(daif: u64) {
    // SAFETY: restores a DAIF value read by irq_save.
    unsafe { asm!("msr daif, {}", in(reg) daif, options(nomem, nostack)) };
}

/// This core's number.
pub fn core_id() -> usize {
    let m: u64;
    // SAFETY: reading MPIDR_EL1 has no side effects.
    unsafe { asm!("mrs {}, mpidr_el1", out(reg) m, options(nomem, nostack)) };
    (m & 0xff) as usize
}

/// PSCI SYSTEM_OFF over HVC.
pub fn psci_system_off() {
    // SAFETY: a firmware call that powers the machine off (or returns if unsupported).
    unsafe { asm!("hvc #0", inout("x0") 0x8400_0008u64 => _, options(nomem, nostack)) };
}

/// Semihosting SYS_EXIT with an exit status (QEMU `-semihosting`): QEMU exits with `code`.
pub fn semihosting_exit(code: u32) {
    let block = [0x20026u64, code as u64]; // ADP_Stopped_ApplicationExit, status
                                           // SAFETY: the semihosting trap reads the two-word block; under QEMU with semihosting enabled
                                           // it ends the emulation.
    unsafe {
        asm!("hlt #0xf000", in("w0") 0x18u32, in("x1") block.as_ptr(), options(nostack, readonly))
    };
}

/// Wait for an event (low-power idle).
pub fn wait() {
    // SAFETY: wfe only idles the core.
    unsafe { asm!("wfe", options(nomem, nostack)) };
}

/// Clean and invalidate the data cache over `[addr, addr + len)` to the point of coherency (for
/// buffers shared with the VideoCore or a core running with caches off).
pub fn dcache_flush(addr: usize, len: usize) {
    let line = 64;
    let mut a = addr & !(line - 1);
    while a < addr + len {
        // SAFETY: cache maintenance by address on mapped memory has no other effect.
        unsafe { asm!("dc civac, {}", in(reg) a, options(nostack)) };
        a += line;
    }
    // SAFETY: barriers only.
    unsafe { asm!("dsb sy", "isb", options(nostack)) };
}

/// Wait for an interrupt: with interrupts masked and none pending this parks the core for good
/// (QEMU stops the vCPU instead of spinning, as it does on `wfe`).
pub fn park() -> ! {
    loop {
        // SAFETY: wfi only idles the core.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}

/// Send an event to cores waiting in `wfe`.
pub fn sev() {
    // SAFETY: sev only signals other cores.
    unsafe { asm!("dsb sy", "sev", options(nostack)) };
}

/// Release cores `1..cores` waiting on a Raspberry Pi spin table (entries at 0xe0 + 8 * (core - 1)).
pub fn spin_table_release(cores: usize, entry: usize) {
    for core in 1..cores {
        let slot = 0xd8 + 8 * core;
        // SAFETY: the spin table is RAM below the kernel image reserved by the firmware for this;
        // the waiting cores read it with caches off, so the line is cleaned after the write.
        unsafe { core::ptr::write_volatile(slot as *mut u64, entry as u64) };
        dcache_flush(slot, 8);
    }
    sev();
}

/// PSCI CPU_ON over HVC: start the core with MPIDR `target` at `entry`. Returns the PSCI status
/// (0 = success).
pub fn psci_cpu_on(target: u64, entry: usize) -> i64 {
    let r: i64;
    // SAFETY: a firmware call that starts another core at `entry` (our `_start`).
    unsafe {
        asm!("hvc #0", inout("x0") 0xc400_0003u64 as i64 => r, in("x1") target, in("x2") entry, in("x3") 0u64, options(nomem, nostack))
    };
    r
}

/// SBI calls do not exist here.
pub fn sbi_system_reset(_code: u32) {}
pub fn start_hart(_hart: usize) -> bool {
    false
}
pub fn set_timebase(_hz: u64) {}

/// Width of the instruction counter read by `perf_counters` (PMEVCNTR0_EL0 is 32 bits wide on ARMv8.0 cores.)
pub const INSTRUCTION_COUNTER_BITS: u32 = 32;

/// Nothing to do: the kernel set reads ID_AA64ISAR0_EL1 itself.
pub fn detect_features(_dtb: usize) {}

/// Read an address outside the identity map (T0SZ = 25: 512 GiB): a translation fault.
pub fn raise_exception() {
    // SAFETY: deliberately faults; the exception handler reports it and stops the machine.
    unsafe { core::ptr::read_volatile(0x80_0000_0000 as *const u64) };
}
