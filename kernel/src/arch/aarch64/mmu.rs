//! The identity map. At compile time it maps the board's device regions and, of its normal
//! regions, only the boot window `[RAM_BASE, RAM_BASE + RAM_SIZE_FALLBACK)`: RAM every board of
//! the kind has (the smallest one's), which holds the kernel. 1 GiB blocks where a whole gigabyte
//! has one kind, 2 MiB blocks (in a level-2 table) where it is mixed. `boot.s` turns the level-1
//! entries that point to level-2 tables from offsets into addresses before the MMU is on.
//!
//! Once core 0 knows the RAM (device tree, firmware), [`map_normal`] adds it, so no address
//! without RAM is ever mapped cacheable (a speculative fill there can hang the bus). Entries only
//! go from invalid to valid, which needs no TLB maintenance (Arm ARM D8.13, "translation table
//! entries that generate a Translation fault are not cached"; Linux's `__set_pte` likewise only
//! issues `dsb ishst; isb`), and never change once valid, so no break-before-make is needed.

use crate::arch::MapError;
use crate::board::{MemKind, Region, MEMORY, RAM_BASE, RAM_SIZE_FALLBACK};

/// Level-2 tables available for mixed gigabytes (at boot and for RAM found later).
const N_L2: usize = 8;
const GIB: u64 = 1 << 30;
const MIB2: u64 = 1 << 21;
/// The boot window: normal regions are mapped only inside it at first.
const WINDOW: (u64, u64) = (RAM_BASE as u64, (RAM_BASE + RAM_SIZE_FALLBACK) as u64);
/// Descriptor type bits: a block (levels 1 and 2) and a table (level 1).
const TYPE_MASK: u64 = 0b11;
const BLOCK: u64 = 0b01;
const TABLE: u64 = 0b11;
/// Output address bits of a descriptor.
const ADDR_MASK: u64 = 0x0000_ffff_ffff_f000;

/// Normal memory: attr index 1 (write-back), inner shareable, accessed.
const NORMAL: u64 = 0b01 | (1 << 2) | (3 << 8) | (1 << 10);
/// Device memory: attr index 0 (nGnRE), accessed, never executable.
const DEVICE: u64 = 0b01 | (1 << 10) | (1 << 53) | (1 << 54);

#[repr(C, align(4096))]
pub struct Tables {
    l1: [u64; 512],
    l2: [[u64; 512]; N_L2],
}

/// `r` as mapped at boot: a normal region clipped to the boot window (possibly empty).
const fn at_boot(r: &Region) -> (u64, u64) {
    match r.kind {
        MemKind::Device => (r.start, r.end),
        MemKind::Normal => (
            if r.start > WINDOW.0 {
                r.start
            } else {
                WINDOW.0
            },
            if r.end < WINDOW.1 { r.end } else { WINDOW.1 },
        ),
    }
}

/// The boot-time kind of `[start, end)`: `Some(Some(kind))` if one region covers it, `Some(None)`
/// if none touches it, `None` if it is mixed.
const fn kind_of(map: &[Region], start: u64, end: u64) -> Option<Option<MemKind>> {
    let mut i = 0;
    while i < map.len() {
        let (rs, re) = at_boot(&map[i]);
        if rs < re && rs <= start && end <= re {
            return Some(Some(map[i].kind));
        }
        if rs < re && rs < end && start < re {
            return None;
        }
        i += 1;
    }
    Some(None)
}

const fn block(addr: u64, kind: MemKind) -> u64 {
    addr | match kind {
        MemKind::Normal => NORMAL,
        MemKind::Device => DEVICE,
    }
}

const fn build(map: &[Region]) -> Tables {
    let mut t = Tables {
        l1: [0; 512],
        l2: [[0; 512]; N_L2],
    };
    let mut used = 0;
    let mut i = 0;
    while i < 512 {
        let start = i as u64 * GIB;
        match kind_of(map, start, start + GIB) {
            Some(Some(k)) => t.l1[i] = block(start, k),
            Some(None) => {}
            None => {
                assert!(used < N_L2, "memory map needs more level-2 tables");
                let mut j = 0;
                while j < 512 {
                    let s = start + j as u64 * MIB2;
                    match kind_of(map, s, s + MIB2) {
                        Some(Some(k)) => t.l2[used][j] = block(s, k),
                        Some(None) => {}
                        None => panic!("memory regions must be 2 MiB aligned"),
                    }
                    j += 1;
                }
                // Offset of the level-2 table from the table base; boot.s adds the base.
                t.l1[i] = (4096 * (1 + used as u64)) | 0b11;
                used += 1;
            }
        }
        i += 1;
    }
    t
}

/// The translation tables (written once by `boot.s` to fix up level-2 pointers).
#[no_mangle]
static mut LMBOOT_PAGE_TABLE: Tables = build(MEMORY);

/// Set by `boot.s` once the level-2 pointers are fixed up (secondary cores skip the fix-up).
#[no_mangle]
static mut LMBOOT_TABLES_FIXED: u32 = 0;

/// Whether the 2 MiB block at `a` lies inside a normal region of the board's memory map.
fn normal_at(a: u64) -> bool {
    MEMORY
        .iter()
        .any(|r| r.kind == MemKind::Normal && r.start <= a && a + MIB2 <= r.end)
}

/// Map `[start, end)` (2 MiB aligned, inside the board's normal regions) as normal memory. Blocks
/// already mapped stay as they are. Core 0 only, before the other cores start.
pub fn map_normal(start: u64, end: u64) -> Result<(), MapError> {
    if !start.is_multiple_of(MIB2) || !end.is_multiple_of(MIB2) || end > 512 * GIB {
        return Err(MapError::Unaligned { start, end });
    }
    // Checked whole before anything is written. At most 2^18 steps (512 GiB in 2 MiB).
    if let Some(addr) = (start..end).step_by(MIB2 as usize).find(|&a| !normal_at(a)) {
        return Err(MapError::NotNormal { addr });
    }
    // SAFETY: core 0 alone runs (the other cores start after RAM is mapped), so nothing else
    // writes the tables; the walker reads them coherently (TCR: inner-shareable write-back walks).
    let t = unsafe { &mut *core::ptr::addr_of_mut!(LMBOOT_PAGE_TABLE) };
    let mut gib = start / GIB;
    while gib * GIB < end {
        let (s, e) = ((gib * GIB).max(start), ((gib + 1) * GIB).min(end));
        map_in_gib(t, gib as usize, s, e)?;
        gib += 1;
    }
    publish(t);
    Ok(())
}

/// Map `[s, e)`, inside gigabyte `i`, through its level-1 entry.
fn map_in_gib(t: &mut Tables, i: usize, s: u64, e: u64) -> Result<(), MapError> {
    let l1 = t.l1[i];
    let k = match l1 & TYPE_MASK {
        // A 1 GiB block: the whole gigabyte is mapped already (normal: checked by the caller).
        BLOCK => return Ok(()),
        TABLE => l2_index(t, l1).ok_or(MapError::NoTable { addr: s })?,
        _ if s.is_multiple_of(GIB) && e - s == GIB => {
            t.l1[i] = block(s, MemKind::Normal);
            return Ok(());
        }
        // Tables are taken in order and never given back: the next free one is the count used.
        _ => {
            let used = t.l1.iter().filter(|&&d| d & TYPE_MASK == TABLE).count();
            if used == N_L2 {
                return Err(MapError::NoTable { addr: s });
            }
            used
        }
    };
    let mut a = s;
    while a < e {
        let j = ((a % GIB) / MIB2) as usize;
        if t.l2[k][j] & TYPE_MASK == 0 {
            t.l2[k][j] = block(a, MemKind::Normal);
        }
        a += MIB2;
    }
    if l1 & TYPE_MASK != TABLE {
        // The level-2 entries must be visible to the walker before the pointer to them.
        barrier();
        t.l1[i] = (core::ptr::addr_of!(t.l2[k]) as u64) | TABLE;
    }
    Ok(())
}

/// Which of our level-2 tables the table descriptor `d` points to.
fn l2_index(t: &Tables, d: u64) -> Option<usize> {
    let base = core::ptr::addr_of!(t.l2) as u64;
    let off = (d & ADDR_MASK).checked_sub(base)?;
    let k = (off / 4096) as usize;
    (off % 4096 == 0 && k < N_L2).then_some(k)
}

/// Make table writes visible to this core's walks before the next access.
fn barrier() {
    // SAFETY: barriers only; the missing `nomem` keeps the compiler from moving the table writes
    // across them.
    unsafe { core::arch::asm!("dsb ishst", "isb", options(nostack)) };
}

/// After a change: barriers for this core, and the tables and the fixed-up flag cleaned to the
/// point of coherency, because secondary cores read both with their caches off before their MMU
/// is on (`mmu_on` in boot.s).
fn publish(t: &Tables) {
    barrier();
    use crate::arch::{Arch, Cpu};
    Cpu::dcache_flush(t as *const Tables as usize, core::mem::size_of::<Tables>());
    Cpu::dcache_flush(core::ptr::addr_of!(LMBOOT_TABLES_FIXED) as usize, 4);
}
