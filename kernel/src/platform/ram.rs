//! Where the RAM is: every memory node of the device tree, else (on the Pi) the VideoCore's
//! ARM memory block, else the board file's fallback (the smallest board of the kind). The blocks
//! are clipped to the board's normal regions and mapped; nothing else is mapped as RAM.

use super::dtb::DtInfo;
use super::mailbox;
use crate::arch::{Arch, Cpu};
use crate::board::{self, MemKind, RamFrom};
use core::fmt;
use drivers::ram::{Block, RamBlocks};

/// Where the RAM blocks were learnt.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    DeviceTree { addr: usize },
    Mailbox,
    DramController,
    Fallback,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::DeviceTree { addr } => write!(f, "the device tree at {addr:#x}"),
            Source::Mailbox => f.write_str("the mailbox (no device tree)"),
            Source::DramController => f.write_str("the DRAM controller"),
            Source::Fallback => f.write_str("the board file (fallback)"),
        }
    }
}

/// The usable RAM blocks, mapped, and where they were learnt.
pub fn find(dt: Option<&DtInfo>) -> (RamBlocks, Source) {
    let from_dt = dt.filter(|d| !d.ram.is_empty());
    let (found, source) = match (from_dt, board::RAM_FROM) {
        (Some(d), RamFrom::DtbThenMailbox) => {
            (without_gpu(d.ram), Source::DeviceTree { addr: d.addr })
        }
        (Some(d), RamFrom::Dtb) => (d.ram, Source::DeviceTree { addr: d.addr }),
        (None, RamFrom::DtbThenMailbox) => match from_mailbox() {
            Some(r) => (r, Source::Mailbox),
            None => fallback(),
        },
        (None, RamFrom::Dtb) => fallback(),
        (_, RamFrom::SunxiDramc) => match from_sunxi_dramc() {
            Some(r) => (r, Source::DramController),
            None => fallback(),
        },
    };
    let mapped = map(&found);
    if mapped.is_empty() {
        crate::println!("warning: none of that RAM is normal memory in the board file");
        let (f, s) = fallback();
        return (map(&f), s);
    }
    (mapped, source)
}

/// The board file's size at its RAM base, with a warning (the boot window: always mapped).
fn fallback() -> (RamBlocks, Source) {
    crate::println!(
        "warning: RAM size unknown; assuming the board file's {} MiB at {:#x}",
        board::RAM_SIZE_FALLBACK >> 20,
        board::RAM_BASE
    );
    let r = RamBlocks::one(board::RAM_BASE as u64, board::RAM_SIZE_FALLBACK as u64);
    (r, Source::Fallback)
}

/// The device tree's blocks less the VideoCore's memory, `[end of the ARM's block, 1 GiB)` on
/// every Pi (the GPU split sits at the top of the first gigabyte): the firmware fills the memory
/// node, but a mainline tree left as shipped says 1 GiB (512 MiB on the Zero 2 W), which would
/// put the heap over the GPU's memory.
fn without_gpu(mut ram: RamBlocks) -> RamBlocks {
    if let Some(Ok((base, size))) = mailbox::open().map(|mut mb| mb.arm_memory()) {
        let end = base as u64 + size as u64;
        if end < 1 << 30 && ram.cut(Block::new(end, 1 << 30)) {
            crate::println!(
                "warning: the device tree's RAM overlaps the GPU's above {end:#x} (memory node not filled in?): cut there"
            );
        }
    }
    ram
}

/// The DRAM an Allwinner H3's controller was configured for (by U-Boot's SPL).
fn from_sunxi_dramc() -> Option<RamBlocks> {
    use drivers::sunxi_dram::{size_from_cr, DRAM_BASE, MCTL_COM_BASE};
    // SAFETY: the DRAM controller's CR, device-mapped (the board's memory map); a read only.
    let cr = unsafe { core::ptr::read_volatile(MCTL_COM_BASE as *const u32) };
    match size_from_cr(cr) {
        Ok(size) => Some(RamBlocks::one(DRAM_BASE, size)),
        Err(e) => {
            crate::println!("warning: DRAM controller CR {cr:#x}: {e}");
            None
        }
    }
}

/// The ARM's memory block from the VideoCore (only the first block on a Pi 4: under 1 GiB).
fn from_mailbox() -> Option<RamBlocks> {
    match mailbox::open()?.arm_memory() {
        Ok((base, size)) => Some(RamBlocks::one(base as u64, size as u64)),
        Err(e) => {
            crate::println!("warning: {e}");
            None
        }
    }
}

/// `found` clipped to the board's normal regions in whole map granules, each block mapped; a
/// block that cannot be mapped is left out with a warning.
fn map(found: &RamBlocks) -> RamBlocks {
    let mut normal = RamBlocks::new();
    for r in board::MEMORY.iter().filter(|r| r.kind == MemKind::Normal) {
        normal.push(r.start, r.end - r.start);
    }
    let mut out = RamBlocks::new();
    for b in found.usable(normal.as_slice(), Cpu::MAP_ALIGN).as_slice() {
        match Cpu::map_ram(b.start, b.end) {
            Ok(()) => {
                out.push(b.start, b.len());
            }
            Err(e) => crate::println!("warning: RAM {:#x}..{:#x} left out: {e}", b.start, b.end),
        }
    }
    out
}
