//! riscv64 (S-mode under OpenSBI): boot (assembly in `boot.s`), traps, SBI calls (HSM to start
//! harts, IPI to wake them, SRST to power off), counters. Bare mode: no page table (see the board
//! file for why). Functions of the aarch64 twin that have no meaning here are inert.

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU64, Ordering};

global_asm!(
    include_str!("boot.s"),
    max_cores = const crate::board::MAX_CORES,
    stack_size = const crate::board::STACK_SIZE,
);

extern "C" {
    fn _secondary();
}

/// The trap entry point (see `boot.s`): print what happened and stop with status 2.
#[no_mangle]
extern "C" fn lmboot_trap(scause: u64, sepc: u64, stval: u64) -> ! {
    let interrupt = scause >> 63 != 0;
    crate::console::emergency(format_args!(
        "\n*** trap: {} {}: scause {scause:#x}, sepc {sepc:#x}, stval {stval:#x}\n",
        if interrupt { "interrupt" } else { "exception" },
        scause & 0xfff
    ));
    crate::power::exit(2)
}

fn sbi(eid: u64, fid: u64, a0: u64, a1: u64, a2: u64) -> (i64, u64) {
    let (err, val): (i64, u64);
    // SAFETY: an SBI call into OpenSBI; the arguments are plain values.
    unsafe {
        asm!("ecall", inlateout("a0") a0 as i64 => err, inlateout("a1") a1 => val, in("a2") a2, in("a6") fid, in("a7") eid, options(nostack))
    };
    (err, val)
}

const EID_HSM: u64 = 0x48_534d;
const EID_SRST: u64 = 0x5352_5354;
const EID_IPI: u64 = 0x73_5049;

/// Timer frequency (the device tree's `timebase-frequency`; QEMU virt uses 10 MHz).
static TIMEBASE: AtomicU64 = AtomicU64::new(10_000_000);
/// Harts online, as a bit mask (for IPIs).
static HARTS: AtomicU64 = AtomicU64::new(0);

pub fn set_timebase(hz: u64) {
    if hz > 0 {
        TIMEBASE.store(hz, Ordering::Relaxed);
    }
}

pub fn counter() -> u64 {
    let v: u64;
    // SAFETY: reading the time CSR has no side effects.
    unsafe { asm!("rdtime {}", out(reg) v, options(nomem, nostack)) };
    v
}

pub fn counter_hz() -> u64 {
    TIMEBASE.load(Ordering::Relaxed)
}

/// Mark this hart online and let IPIs wake it from `wfi`.
pub fn perf_counters_enable() {
    HARTS.fetch_or(1 << core_id(), Ordering::AcqRel);
    // SAFETY: enable the supervisor software interrupt locally (sie.SSIE); sstatus.SIE stays off, so
    // no trap is taken: the pending bit only ends `wfi`.
    unsafe { asm!("csrs sie, {}", in(reg) 1u64 << 1, options(nomem, nostack)) };
}

/// (instructions, cycles): `instret` and `cycle`, exact under QEMU `-icount`.
pub fn perf_counters() -> (u64, u64) {
    let (i, c): (u64, u64);
    // SAFETY: counter reads (OpenSBI enables them for S-mode).
    unsafe { asm!("rdinstret {}", "rdcycle {}", out(reg) i, out(reg) c, options(nomem, nostack)) };
    (i, c)
}

pub fn irq_save() -> u64 {
    let s: u64;
    // SAFETY: clears sstatus.SIE and returns the old sstatus.
    unsafe { asm!("csrrci {}, sstatus, 2", out(reg) s, options(nomem, nostack)) };
    s & 2
}

pub fn irq_restore(s: u64) {
    if s & 2 != 0 {
        // SAFETY: re-enables interrupts that irq_save found enabled.
        unsafe { asm!("csrsi sstatus, 2", options(nomem, nostack)) };
    }
}

/// This hart's id (kept in `tp` since entry).
pub fn core_id() -> usize {
    let t: usize;
    // SAFETY: reads tp, which boot.s set to the hart id and nothing changes.
    unsafe { asm!("mv {}, tp", out(reg) t, options(nomem, nostack)) };
    t
}

/// Sleep until an IPI (or return at once if one is pending), then clear it.
pub fn wait() {
    // SAFETY: wfi idles the hart; clearing sip.SSIP acknowledges the software interrupt.
    unsafe { asm!("wfi", "csrci sip, 2", options(nomem, nostack)) };
}

/// Wake the other harts in `wait` (an IPI through SBI).
pub fn sev() {
    let others = HARTS.load(Ordering::Acquire) & !(1u64 << core_id());
    if others != 0 {
        let _ = sbi(EID_IPI, 0, others, 0, 0);
    }
}

pub fn park() -> ! {
    loop {
        // SAFETY: wfi only idles the hart.
        unsafe { asm!("wfi", options(nomem, nostack)) };
    }
}

/// Start hart `hart` at `_secondary` (SBI HSM); true if the SBI accepted.
pub fn start_hart(hart: usize) -> bool {
    sbi(EID_HSM, 0, hart as u64, _secondary as usize as u64, 0).0 == 0
}

/// Power off through SBI SRST: shutdown, with "system failure" as the reason for a non-zero code
/// (QEMU then exits with status 1).
pub fn sbi_system_reset(code: u32) {
    let _ = sbi(EID_SRST, 0, 0, u64::from(code != 0), 0);
}

/// Caches are coherent for the harts and virtio here: nothing to do.
pub fn dcache_flush(_addr: usize, _len: usize) {}

pub fn semihosting_exit(_code: u32) {}
pub fn psci_system_off() {}
pub fn psci_cpu_on(_target: u64, _entry: usize) -> i64 {
    -1
}
pub fn spin_table_release(_cores: usize, _entry: usize) {}

/// Width of the instruction counter read by `perf_counters` (instret is 64 bits wide.)
pub const INSTRUCTION_COUNTER_BITS: u32 = 64;

/// Enable the RVV kernels if the device tree says the harts have V.
pub fn detect_features(dtb: usize) {
    let isa = crate::dtb::riscv_isa(dtb);
    let v = isa.is_some_and(inference::quant::rvv::isa_has_v);
    inference::quant::rvv::set_available(v);
    crate::println!(
        "isa: {} (vector {})",
        isa.unwrap_or("unknown"),
        if v { "on" } else { "off" }
    );
}

/// Read an address below RAM, where nothing answers: a load access fault.
pub fn raise_exception() {
    // SAFETY: deliberately faults; the exception handler reports it and stops the machine.
    unsafe { core::ptr::read_volatile(0x8 as *const u64) };
}
