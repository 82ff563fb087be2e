//! The identity map, built at compile time from the board's memory map: 1 GiB blocks where a whole
//! gigabyte has one kind, 2 MiB blocks (in a level-2 table) where it is mixed. `boot.s` turns the
//! level-1 entries that point to level-2 tables from offsets into addresses before the MMU is on.

use crate::board::{MemKind, Region, MEMORY};

/// Level-2 tables available for mixed gigabytes.
const N_L2: usize = 4;
const GIB: u64 = 1 << 30;
const MIB2: u64 = 1 << 21;

/// Normal memory: attr index 1 (write-back), inner shareable, accessed.
const NORMAL: u64 = 0b01 | (1 << 2) | (3 << 8) | (1 << 10);
/// Device memory: attr index 0 (nGnRE), accessed, never executable.
const DEVICE: u64 = 0b01 | (1 << 10) | (1 << 53) | (1 << 54);

#[repr(C, align(4096))]
pub struct Tables {
    l1: [u64; 512],
    l2: [[u64; 512]; N_L2],
}

/// The kind of `[start, end)`: `Some(Some(kind))` if one region covers it, `Some(None)` if none
/// touches it, `None` if it is mixed.
const fn kind_of(map: &[Region], start: u64, end: u64) -> Option<Option<MemKind>> {
    let mut i = 0;
    while i < map.len() {
        let r = &map[i];
        if r.start <= start && end <= r.end {
            return Some(Some(r.kind));
        }
        if r.start < end && start < r.end {
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
