//! The device tree the firmware or QEMU passes at entry, read once on core 0 before the heap
//! exists (the heap may later cover the blob): every RAM block, the timer frequency and the first
//! hart's ISA string are copied out. The parsing is [`drivers::fdt`] (bounded, host-tested); here
//! the blob is only made readable: its blocks are mapped as normal memory first (on the Pi the
//! firmware may put it above the boot window), and only inside the board's normal regions.

use crate::arch::{Arch, Cpu, MapError};
use core::fmt;
use drivers::fdt::{self, DtError, Fdt, HEADER_LEN};
use drivers::ram::RamBlocks;

/// Largest blob accepted (the Pi's are about 30 KiB; QEMU pads its own up to 1 MiB).
const MAX_BLOB: usize = 2 << 20;
/// ISA string bytes kept (longer strings are cut after the base ISA and the first extensions).
const ISA_MAX: usize = 512;

/// What the kernel takes from the device tree.
#[derive(Debug, Clone, Copy)]
pub struct DtInfo {
    /// Where the blob was.
    pub addr: usize,
    pub ram: RamBlocks,
    pub timebase: Option<u64>,
    /// The Arm timer node's `clock-frequency` (given only where firmware leaves CNTFRQ unset).
    pub timer_hz: Option<u64>,
    /// The Pi 4's `emmc2bus` DMA window (the firmware rewrites it for the BCM2711's C0
    /// stepping).
    pub emmc2_dma: Option<fdt::DmaRange>,
    /// The first hart's `riscv,cbom-block-size`: the block Zicbom's cache operations act on.
    pub cache_block: Option<u64>,
    isa: [u8; ISA_MAX],
    isa_len: usize,
}

impl DtInfo {
    /// The first hart's `riscv,isa`, if the tree has one.
    pub fn isa(&self) -> Option<&str> {
        core::str::from_utf8(&self.isa[..self.isa_len])
            .ok()
            .filter(|s| !s.is_empty())
    }
}

/// Why no device tree was read.
#[derive(Debug, Clone, Copy)]
pub enum DtReadError {
    /// No address was passed (the firmware found no `.dtb` on the card, or QEMU got no `-dtb`).
    Absent,
    /// Something else is there: with no `.dtb` the Pi firmware and QEMU pass the ATAGs at 0x100.
    NotATree {
        addr: usize,
    },
    Misaligned {
        addr: usize,
    },
    /// The blob is not in memory the board file allows as RAM.
    Unmapped {
        addr: usize,
        error: MapError,
    },
    TooBig {
        addr: usize,
        size: usize,
    },
    Bad {
        addr: usize,
        error: DtError,
    },
}

impl fmt::Display for DtReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DtReadError::Absent => write!(f, "no device tree passed"),
            DtReadError::NotATree { addr } => write!(f, "no device tree at {addr:#x}"),
            DtReadError::Misaligned { addr } => {
                write!(f, "device tree address {addr:#x} is not 8-byte aligned")
            }
            DtReadError::Unmapped { addr, error } => {
                write!(f, "device tree at {addr:#x} cannot be read: {error}")
            }
            DtReadError::TooBig { addr, size } => write!(
                f,
                "device tree at {addr:#x} claims {size} bytes (at most {MAX_BLOB} read)"
            ),
            DtReadError::Bad { addr, error } => write!(f, "device tree at {addr:#x}: {error}"),
        }
    }
}

/// Map `[addr, addr + len)` (rounded outward to the MMU's granule) so it can be read.
fn make_readable(addr: usize, len: usize) -> Result<(), DtReadError> {
    let a = Cpu::MAP_ALIGN;
    let start = addr as u64 & !(a - 1);
    let end = (addr as u64 + len as u64).next_multiple_of(a);
    Cpu::map_ram(start, end).map_err(|error| DtReadError::Unmapped { addr, error })
}

/// Read the device tree at `addr`.
pub fn read(addr: usize) -> Result<DtInfo, DtReadError> {
    if addr == 0 {
        return Err(DtReadError::Absent);
    }
    if !addr.is_multiple_of(8) {
        return Err(DtReadError::Misaligned { addr });
    }
    let bad = |error| DtReadError::Bad { addr, error };
    make_readable(addr, HEADER_LEN)?;
    // SAFETY: [addr, addr + HEADER_LEN) was just mapped as normal memory inside the board's RAM;
    // it is only read, on core 0, before anything else uses that memory.
    let header = unsafe { core::slice::from_raw_parts(addr as *const u8, HEADER_LEN) };
    let size = fdt::total_size(header).map_err(|e| match e {
        DtError::BadMagic { .. } => DtReadError::NotATree { addr },
        e => bad(e),
    })?;
    if size > MAX_BLOB {
        return Err(DtReadError::TooBig { addr, size });
    }
    make_readable(addr, size)?;
    // SAFETY: as above, for the `size` bytes the header gives (at most MAX_BLOB), now mapped; the
    // slice does not outlive this function.
    let blob = unsafe { core::slice::from_raw_parts(addr as *const u8, size) };
    let t = Fdt::new(blob).map_err(bad)?;
    let mut info = DtInfo {
        addr,
        ram: t.memory().map_err(bad)?,
        timebase: t
            .property(&["cpus"], "timebase-frequency")
            .map_err(bad)?
            .and_then(fdt::cells),
        timer_hz: t
            .property(&["timer"], "clock-frequency")
            .map_err(bad)?
            .and_then(fdt::cells),
        emmc2_dma: t
            .property(&["emmc2bus"], "dma-ranges")
            .map_err(bad)?
            .and_then(fdt::dma_range),
        cache_block: t
            .property(&["cpus", "cpu@"], "riscv,cbom-block-size")
            .map_err(bad)?
            .and_then(fdt::cells),
        isa: [0; ISA_MAX],
        isa_len: 0,
    };
    if let Some(isa) = t.property(&["cpus", "cpu@"], "riscv,isa").map_err(bad)? {
        let isa = isa.strip_suffix(b"\0").unwrap_or(isa);
        let n = isa.len().min(ISA_MAX);
        info.isa[..n].copy_from_slice(&isa[..n]);
        info.isa_len = n;
    }
    Ok(info)
}
