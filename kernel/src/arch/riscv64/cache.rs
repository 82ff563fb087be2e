//! Data-cache maintenance for DMA on RISC-V, as the board file names it
//! (`cache_maintenance`): nothing on coherent machines (QEMU's virt), T-Head's XTheadCmo on the
//! C906 (Milk-V Duo family: the CV18xx SoCs are `dma-noncoherent` and the C906 has no Zicbom),
//! the standard Zicbom on the SpacemiT K1.
//!
//! - XTheadCmo (T-Head's `thead-extension-spec`, `xtheadcmo.adoc`; Linux's `THEAD_CMO` in
//!   `arch/riscv/include/asm/errata_list.h`): `th.dcache.cva` (clean), `.iva` (invalidate),
//!   `.civa` (clean and invalidate) act on the line holding a virtual address; `th.sync.s` then
//!   waits until they are done everywhere. Every `th.*` instruction is illegal in S-mode unless
//!   M-mode set `mxstatus.THEADISAEE` (bit 22): the vendor OpenSBI does, and [`check_thead`] reads
//!   the S-mode view (`sxstatus`, CSR 0x5c0) before any is run.
//! - Zicbom: `cbo.clean`, `cbo.inval`, `cbo.flush` on the cache block holding an address; the
//!   block size is the device tree's `riscv,cbom-block-size` (64 on the K1's X60 and on QEMU).
//!
//! Lines are walked from the one holding `addr` to the one holding `addr + len - 1`. A fence
//! first orders the CPU's earlier stores before the operations, and one after orders the
//! operations before what follows (the DMA's start, or reads of what it wrote).

use crate::board::{self, CacheMaintenance};
use core::arch::asm;
use core::sync::atomic::{AtomicUsize, Ordering};

/// The C906's data-cache line.
const THEAD_LINE: usize = 64;

/// Zicbom's cache block (the device tree's, 64 until told).
static CBOM_BLOCK: AtomicUsize = AtomicUsize::new(64);

/// `sxstatus.THEADISAEE`: the T-Head instructions are enabled.
const THEADISAEE: u64 = 1 << 22;

/// What a cache operation does to each line.
#[derive(Clone, Copy)]
pub enum Op {
    /// Write dirty data back (before a device reads memory).
    Clean,
    /// Drop the lines (before the CPU reads what a device wrote).
    Invalidate,
    /// Write back, then drop.
    Flush,
}

/// Take the device tree's Zicbom block size (a power of two from 16 to 4096; anything else is
/// refused and the line says so).
pub fn set_block(block: Option<u64>) -> Option<&'static str> {
    match block {
        Some(b) if b.is_power_of_two() && (16..=4096).contains(&b) => {
            CBOM_BLOCK.store(b as usize, Ordering::Relaxed);
            None
        }
        Some(_) => Some("the device tree's riscv,cbom-block-size is not a power of two from 16 to 4096; 64 assumed"),
        None => None,
    }
}

/// The block the board's operations act on (0: none).
pub fn block() -> usize {
    match board::CACHE_MAINTENANCE {
        CacheMaintenance::None => 0,
        CacheMaintenance::Xtheadcmo => THEAD_LINE,
        CacheMaintenance::Zicbom => CBOM_BLOCK.load(Ordering::Relaxed),
    }
}

/// Read `sxstatus` (T-Head harts only: elsewhere CSR 0x5c0 does not exist). Called only when the
/// board file says XTheadCmo.
pub fn check_thead() -> Result<u64, u64> {
    let s: u64;
    // SAFETY: reads T-Head's S-mode status CSR, which the C906 has (the board file says this is
    // one); no side effects.
    unsafe { asm!("csrr {}, 0x5c0", out(reg) s, options(nomem, nostack)) };
    if s & THEADISAEE != 0 {
        Ok(s)
    } else {
        Err(s)
    }
}

/// Lines of their own for [`self_test`] (the largest block Zicbom allows, twice).
#[repr(C, align(4096))]
struct Probe([u8; 8192]);
static mut PROBE: Probe = Probe([0; 8192]);

/// Run each operation once, on lines nothing else uses, and check the data survive a clean
/// and a flush: at boot, so an operation the hart refuses traps here, named, and not in the
/// middle of the card's first DMA read.
pub fn self_test() -> Result<(), ()> {
    let p = &raw mut PROBE;
    let (addr, len) = (p as usize, core::mem::size_of::<Probe>());
    // SAFETY: PROBE is used by nothing else, and only here (core 0, once, at boot); its bytes
    // are written through the raw pointer and read back after the cache operations, which
    // change no value the CPU wrote except by the invalidation, after which they are rewritten.
    unsafe {
        core::ptr::write_volatile(p.cast::<u64>(), 0x5a5a_0000_c0de_0001);
        range(Op::Clean, addr, len);
        range(Op::Flush, addr, len);
        if core::ptr::read_volatile(p.cast::<u64>()) != 0x5a5a_0000_c0de_0001 {
            return Err(());
        }
        range(Op::Invalidate, addr, len);
        core::ptr::write_volatile(p.cast::<u64>(), 0);
    }
    Ok(())
}

/// `op` on every cache line of `[addr, addr + len)`.
pub fn range(op: Op, addr: usize, len: usize) {
    let line = block();
    if line == 0 || len == 0 {
        return;
    }
    let end = addr.saturating_add(len);
    let mut a = addr & !(line - 1);
    // SAFETY: a fence only: earlier stores reach the cache before the operations below.
    unsafe { asm!("fence rw, rw", options(nostack)) };
    while a < end {
        one(op, a);
        a += line;
    }
    match board::CACHE_MAINTENANCE {
        // SAFETY: waits for the T-Head cache operations above to complete (THEADISAEE was
        // checked at boot).
        CacheMaintenance::Xtheadcmo => unsafe {
            asm!(
                ".option push",
                ".option arch, +xtheadsync",
                "th.sync.s",
                ".option pop",
                options(nostack)
            )
        },
        // SAFETY: a fence only: the operations above before later accesses.
        _ => unsafe { asm!("fence rw, rw", options(nostack)) },
    }
}

/// `op` on the line holding `a`.
fn one(op: Op, a: usize) {
    use CacheMaintenance::{Xtheadcmo, Zicbom};
    // SAFETY: (every arm) a cache operation on one line of memory the caller owns for DMA: it
    // writes back or drops that line, never changing what a later read of memory the CPU wrote
    // returns, except for an invalidation, which the callers ask for only on buffers a device
    // writes and nothing else reads meanwhile (the `dcache_invalidate` contract). The XThead
    // instructions run only on boards whose file says XTheadCmo, after `check_thead`.
    unsafe {
        match (board::CACHE_MAINTENANCE, op) {
            (Xtheadcmo, Op::Clean) => {
                asm!(".option push", ".option arch, +xtheadcmo", "th.dcache.cva {0}", ".option pop", in(reg) a, options(nostack))
            }
            (Xtheadcmo, Op::Invalidate) => {
                asm!(".option push", ".option arch, +xtheadcmo", "th.dcache.iva {0}", ".option pop", in(reg) a, options(nostack))
            }
            (Xtheadcmo, Op::Flush) => {
                asm!(".option push", ".option arch, +xtheadcmo", "th.dcache.civa {0}", ".option pop", in(reg) a, options(nostack))
            }
            (Zicbom, Op::Clean) => {
                asm!(".option push", ".option arch, +zicbom", "cbo.clean ({0})", ".option pop", in(reg) a, options(nostack))
            }
            (Zicbom, Op::Invalidate) => {
                asm!(".option push", ".option arch, +zicbom", "cbo.inval ({0})", ".option pop", in(reg) a, options(nostack))
            }
            (Zicbom, Op::Flush) => {
                asm!(".option push", ".option arch, +zicbom", "cbo.flush ({0})", ".option pop", in(reg) a, options(nostack))
            }
            (CacheMaintenance::None, _) => {}
        }
    }
}
