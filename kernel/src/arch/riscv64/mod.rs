//! riscv64 (S-mode under OpenSBI): boot (assembly in `boot.s`), traps, counters, and the SBI calls
//! through the `sbi-rt` crate (HSM to start harts, IPI to wake them, SRST to power off). Bare mode:
//! no page table (see the board file for why).

mod cache;

use super::{Arch, Cpu};
use crate::board::{self, CacheMaintenance, CoreStart, Exit, Vector};
use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU64, Ordering};
use sbi_rt::{HartMask, NoReason, Shutdown, SystemFailure};

global_asm!(
    include_str!("boot.s"),
    max_cores = const crate::board::MAX_CORES,
    stack_size = const crate::board::STACK_SIZE,
);

extern "C" {
    fn _secondary();
}

/// A trap: the cause, the faulting PC and the trap value.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    scause: u64,
    sepc: u64,
    stval: u64,
}

impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let Fault {
            scause,
            sepc,
            stval,
        } = *self;
        let interrupt = scause >> 63 != 0;
        write!(
            f,
            "trap: {} {}: scause {scause:#x}, sepc {sepc:#x}, stval {stval:#x}",
            if interrupt { "interrupt" } else { "exception" },
            scause & 0xfff
        )
    }
}

/// XTheadVector's state field in `sstatus` (bits 24:23, where the C906 keeps VS; RVV 1.0's is
/// at 10:9, which boot.s sets): Initial.
const SSTATUS_VS_THEAD: u64 = 1 << 23;

/// Turn the C906's vector unit on (Linux's `SR_VS_THEAD`). Only on boards whose file says
/// XTheadVector: elsewhere bit 23 is reserved.
fn enable_thead_vector() {
    // SAFETY: sets the vector state field T-Head's harts keep at sstatus bits 24:23 to Initial;
    // run only where the board file says the harts are T-Head's with XTheadVector.
    unsafe { asm!("csrs sstatus, {}", in(reg) SSTATUS_VS_THEAD, options(nomem, nostack)) };
}

/// The cache operations' boot check, as the end of the `cache:` line.
fn self_test() -> &'static str {
    match cache::self_test() {
        Ok(()) => "; clean, invalidate and flush checked",
        Err(_) => "; CHECK FAILED: a cleaned and flushed line lost what the CPU wrote",
    }
}

/// (RVV 1.0, XTheadVector) as the device tree's ISA string and the firmware's ids tell: V is RVV
/// 1.0 unless the string names XTheadVector, or the hart is a T-Head one whose `mimpid` is 0 (the
/// XTheadVector spec's rule: those harts call their 0.7.1 unit `v`).
fn vector_from_isa(isa: Option<&str>) -> (bool, bool) {
    use inference::quant::{rvv, xtheadvector as xt};
    let v = isa.is_some_and(rvv::isa_has_v);
    let named = isa.is_some_and(xt::isa_has_xtheadvector);
    let thead_v = v && {
        let vendor = sbi_rt::get_mvendorid();
        let imp = sbi_rt::get_mimpid();
        xt::ids_have_xtheadvector(vendor, imp, true)
    };
    let thead = named || thead_v;
    (v && !thead, thead)
}

/// Record the kernel sets the harts run.
fn record_features(rvv: bool, xtheadvector: bool) {
    inference::quant::set_features(inference::quant::Features {
        rvv,
        xtheadvector,
        ..Default::default()
    });
}

/// Harts online, as a bit mask (for IPIs).
static HARTS: AtomicU64 = AtomicU64::new(0);

impl Arch for Cpu {
    const QEMU_EXIT: Exit = Exit::SbiSrst;
    /// instret is 64 bits wide.
    const INSTRUCTION_COUNTER_BITS: u32 = 64;
    /// No translation (satp = 0): any alignment.
    const MAP_ALIGN: u64 = 1;

    /// This hart's id (kept in `tp` since entry).
    fn core_id() -> usize {
        let t: usize;
        // SAFETY: reads tp, which boot.s set to the hart id and nothing changes.
        unsafe { asm!("mv {}, tp", out(reg) t, options(nomem, nostack)) };
        t
    }

    /// Mark this hart online and let IPIs wake it from `wfi` (OpenSBI enables the counters).
    fn core_init() {
        HARTS.fetch_or(1 << Self::core_id(), Ordering::AcqRel);
        if board::VECTOR == Vector::Xtheadvector {
            enable_thead_vector();
        }
        // SAFETY: enable the supervisor software interrupt locally (sie.SSIE); sstatus.SIE stays
        // off, so no trap is taken: the pending bit only ends `wfi`.
        unsafe { asm!("csrs sie, {}", in(reg) 1u64 << 1, options(nomem, nostack)) };
    }

    fn counter() -> u64 {
        let v: u64;
        // SAFETY: reading the time CSR has no side effects.
        unsafe { asm!("rdtime {}", out(reg) v, options(nomem, nostack)) };
        v
    }

    /// The timebase is the device tree's `timebase-frequency`: no CSR holds it.
    fn counter_hz() -> Option<u64> {
        None
    }

    fn instructions() -> u64 {
        let i: u64;
        // SAFETY: a counter read (OpenSBI enables it for S-mode).
        unsafe { asm!("rdinstret {}", out(reg) i, options(nomem, nostack)) };
        i
    }

    /// `mvendorid.marchid` from the SBI (no cycle counter is read: no firmware here states a
    /// clock to check it against, and QEMU's `cycle` counts the host's ticks).
    fn cpu_id() -> Option<alloc::string::String> {
        let (vendor, arch) = (sbi_rt::get_mvendorid(), sbi_rt::get_marchid());
        Some(alloc::format!("{vendor:x}.{arch:x}"))
    }

    /// Enable the vector kernels the harts have: RVV 1.0 if the device tree's ISA string names V,
    /// or XTheadVector where the board file says so (its vector unit turned on first); ready the
    /// cache maintenance the board file names.
    fn detect_features(
        isa: Option<&str>,
        cache_block: Option<u64>,
    ) -> Option<alloc::string::String> {
        use alloc::format;
        let (rvv, thead) = match board::VECTOR {
            Vector::Isa => vector_from_isa(isa),
            Vector::Xtheadvector => (false, true),
        };
        if thead {
            enable_thead_vector();
        }
        record_features(rvv, thead);
        let vector = match (rvv, thead) {
            (true, _) => "RVV 1.0",
            (_, true) => "XTheadVector",
            _ => "off",
        };
        let mut s = format!("isa: {} (vector {vector})", isa.unwrap_or("unknown"));
        if let Some(warn) = cache::set_block(cache_block) {
            s += &format!("\nwarning: {warn}");
        }
        match board::CACHE_MAINTENANCE {
            CacheMaintenance::None => {}
            CacheMaintenance::Xtheadcmo => match cache::check_thead() {
                Ok(sx) => s += &format!("\ncache: XTheadCmo, {}-byte lines (sxstatus {sx:#x}: THEADISAEE on){}", cache::block(), self_test()),
                Err(sx) => s += &format!("\nwarning: cache: sxstatus {sx:#x} lacks THEADISAEE (bit 22): the firmware did not enable T-Head's instructions, so the card's DMA cache maintenance (th.dcache) will trap; use the vendor's fip.bin (its OpenSBI sets mxstatus)"),
            },
            CacheMaintenance::Zicbom => s += &format!("\ncache: Zicbom, {}-byte blocks{}", cache::block(), self_test()),
        }
        Some(s)
    }

    fn irq_save() -> u64 {
        let s: u64;
        // SAFETY: clears sstatus.SIE and returns the old sstatus.
        unsafe { asm!("csrrci {}, sstatus, 2", out(reg) s, options(nostack)) };
        s & 2
    }

    fn irq_restore(s: u64) {
        if s & 2 != 0 {
            // SAFETY: re-enables interrupts that irq_save found enabled.
            unsafe { asm!("csrsi sstatus, 2", options(nostack)) };
        }
    }

    /// As the board file's `cache_maintenance` says (nothing on coherent machines).
    fn dcache_flush(addr: usize, len: usize) {
        cache::range(cache::Op::Flush, addr, len);
    }

    fn dcache_clean(addr: usize, len: usize) {
        cache::range(cache::Op::Clean, addr, len);
    }

    unsafe fn dcache_invalidate(addr: usize, len: usize) {
        cache::range(cache::Op::Invalidate, addr, len);
    }

    fn io_barrier() {
        // SAFETY: a fence only: orders device and memory accesses.
        unsafe { asm!("fence iorw, iorw", options(nostack)) };
    }

    /// Sleep until an IPI (or return at once if one is pending), then clear it.
    fn wait() {
        // SAFETY: wfi idles the hart; clearing sip.SSIP acknowledges the software interrupt.
        unsafe { asm!("wfi", "csrci sip, 2", options(nomem, nostack)) };
    }

    /// Wake the other harts in `wait` (an IPI through SBI).
    fn wake() {
        let others = HARTS.load(Ordering::Acquire) & !(1u64 << Self::core_id());
        if others != 0 {
            let _ = sbi_rt::send_ipi(HartMask::from_mask_base(others as usize, 0));
        }
    }

    /// Bare mode: all memory is reachable as it is, nothing to map.
    fn map_ram(_start: u64, _end: u64) -> Result<(), super::MapError> {
        Ok(())
    }

    fn fault([scause, sepc, stval, _]: [u64; 4]) -> Fault {
        Fault {
            scause,
            sepc,
            stval,
        }
    }

    /// Read an address below RAM, where nothing answers: a load access fault.
    fn raise_exception() {
        // SAFETY: deliberately faults; the exception handler reports it and stops the machine.
        unsafe { core::ptr::read_volatile(0x8 as *const u64) };
    }

    fn secondary_entry() -> usize {
        _secondary as *const () as usize
    }

    /// Hart ids are core numbers here; the boot hart is skipped by the caller.
    fn start_core(how: CoreStart, hart: usize) -> bool {
        match how {
            CoreStart::SbiHsm => sbi_rt::hart_start(hart, Self::secondary_entry(), 0).is_ok(),
            CoreStart::PsciHvc
            | CoreStart::SpinTable
            | CoreStart::Bcm2836Mailbox
            | CoreStart::SunxiCpucfg
            | CoreStart::PsciSmc => false,
        }
    }

    /// SBI SRST: shutdown, with "system failure" as the reason for a non-zero code (QEMU then
    /// exits with status 1).
    fn power_off(how: Exit, code: u32) {
        match how {
            Exit::SbiSrst if code != 0 => {
                let _ = sbi_rt::system_reset(Shutdown, SystemFailure);
            }
            Exit::SbiSrst => {
                let _ = sbi_rt::system_reset(Shutdown, NoReason);
            }
            Exit::Semihosting | Exit::PsciHvc | Exit::Halt => {}
        }
    }
}
