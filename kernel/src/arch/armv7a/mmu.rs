//! The identity map, in short descriptors: one level-1 table of 4096 section entries, each
//! mapping 1 MiB of the 4 GiB address space. At compile time it maps the board's device regions
//! and, of its normal regions, only the boot window `[RAM_BASE, RAM_BASE + RAM_SIZE_FALLBACK)`
//! (RAM every board of the kind has, holding the kernel), as the aarch64 map does. Once core 0
//! knows the RAM, [`map_normal`] adds it, so no address without RAM is ever mapped cacheable.
//! Entries only go from invalid to valid (a translation fault is never cached in the TLB: Arm ARM
//! B3.10.2), and never change once valid, so no TLB maintenance or break-before-make is needed.
//!
//! Section attributes (Arm ARM B3.5.1, TEX remap off): normal memory is TEX=001 C=1 B=1 (outer
//! and inner write-back, write-allocate), shareable (S) so the cores' caches stay coherent;
//! device memory is TEX=000 C=0 B=1 (shareable device) and never executable (XN). Both are
//! `AP[2:0]` = 011 (read/write at every privilege level) in domain 0, which DACR sets to "client".

use crate::arch::MapError;
use crate::board::{MemKind, Region, MEMORY, RAM_BASE, RAM_SIZE_FALLBACK};

const MIB: u64 = 1 << 20;
const SECTIONS: usize = 4096;
const SECTION: u32 = 0b10;
const AP_RW: u32 = 0b11 << 10;
/// Normal, write-back write-allocate, shareable.
const NORMAL: u32 = SECTION | (1 << 2) | (1 << 3) | AP_RW | (0b001 << 12) | (1 << 16);
/// Shareable device, execute never.
const DEVICE: u32 = SECTION | (1 << 2) | (1 << 4) | AP_RW;
/// The boot window: normal regions are mapped only inside it at first.
const WINDOW: (u64, u64) = (RAM_BASE as u64, (RAM_BASE + RAM_SIZE_FALLBACK) as u64);

#[repr(C, align(16384))]
pub struct Table([u32; SECTIONS]);

/// The kind of the 1 MiB at `addr` at boot: a device region, or a normal one inside the window.
const fn boot_kind(map: &[Region], addr: u64) -> Option<MemKind> {
    let mut i = 0;
    while i < map.len() {
        let r = &map[i];
        if r.start <= addr && addr + MIB <= r.end {
            return match r.kind {
                MemKind::Device => Some(MemKind::Device),
                MemKind::Normal if WINDOW.0 <= addr && addr + MIB <= WINDOW.1 => {
                    Some(MemKind::Normal)
                }
                MemKind::Normal => None,
            };
        }
        i += 1;
    }
    None
}

const fn build(map: &[Region]) -> Table {
    let mut t = [0u32; SECTIONS];
    let mut i = 0;
    while i < SECTIONS {
        let addr = i as u64 * MIB;
        t[i] = match boot_kind(map, addr) {
            Some(MemKind::Normal) => addr as u32 | NORMAL,
            Some(MemKind::Device) => addr as u32 | DEVICE,
            None => 0,
        };
        i += 1;
    }
    Table(t)
}

/// The translation table (read by `boot.s` on every core, extended by core 0).
#[no_mangle]
static mut LMBOOT_PAGE_TABLE: Table = build(MEMORY);

/// The first megabyte the board's memory map leaves out (never mapped): `selftest = exception`
/// reads it to fault on purpose.
pub const UNMAPPED: usize = {
    let mut i = SECTIONS - 1;
    while i > 0 && in_map(i as u64 * MIB) {
        i -= 1;
    }
    i * MIB as usize
};

const fn in_map(addr: u64) -> bool {
    let mut i = 0;
    while i < MEMORY.len() {
        if MEMORY[i].start < addr + MIB && addr < MEMORY[i].end {
            return true;
        }
        i += 1;
    }
    false
}

/// Whether the megabyte at `a` lies inside a normal region of the board's memory map.
fn normal_at(a: u64) -> bool {
    MEMORY
        .iter()
        .any(|r| r.kind == MemKind::Normal && r.start <= a && a + MIB <= r.end)
}

/// Map `[start, end)` (1 MiB aligned, inside the board's normal regions, below 4 GiB) as normal
/// memory. Sections already mapped stay as they are. Core 0 only, before the other cores start.
pub fn map_normal(start: u64, end: u64) -> Result<(), MapError> {
    if !start.is_multiple_of(MIB) || !end.is_multiple_of(MIB) || end > 1 << 32 {
        return Err(MapError::Unaligned { start, end });
    }
    if let Some(addr) = (start..end).step_by(MIB as usize).find(|&a| !normal_at(a)) {
        return Err(MapError::NotNormal { addr });
    }
    // SAFETY: core 0 alone runs (the other cores start after RAM is mapped), so nothing else
    // writes the table; the walker reads it coherently (TTBR0: cacheable, shareable walks).
    let t = unsafe { &mut *core::ptr::addr_of_mut!(LMBOOT_PAGE_TABLE) };
    for a in (start..end).step_by(MIB as usize) {
        let e = &mut t.0[(a / MIB) as usize];
        if *e == 0 {
            *e = a as u32 | NORMAL;
        }
    }
    publish(t);
    Ok(())
}

/// After a change: the writes visible to this core's walks, and the table cleaned to the point of
/// coherency, because secondary cores read it with their caches off before their MMU is on.
fn publish(t: &Table) {
    use crate::arch::{Arch, Cpu};
    Cpu::dcache_flush(t as *const Table as usize, core::mem::size_of::<Table>());
}
