//! The ARM Generic Interrupt Controller, version 2 (GICv2: QEMU's virt machine by default; the
//! GIC-400 of the BCM2711 on a Pi 4), as far as a kernel with one device interrupt needs it: one
//! shared peripheral interrupt (SPI) enabled, level-sensitive, routed to the core that enables it;
//! the CPU interface on; acknowledge and end of interrupt.
//!
//! Offsets from the GICv2 architecture specification (IHI 0048B), section 4: the distributor's
//! GICD_CTLR (0x000), GICD_ISENABLERn (0x100), GICD_ICENABLERn (0x180), GICD_IPRIORITYRn (0x400,
//! a byte per interrupt), GICD_ITARGETSRn (0x800, a byte per interrupt: a bit per CPU interface)
//! and GICD_ICFGRn (0xc00, two bits per interrupt); the CPU interface's GICC_CTLR (0x00), GICC_PMR
//! (0x04), GICC_IAR (0x0c) and GICC_EOIR (0x10). The byte-wide registers are written here as the
//! 32-bit words that hold them (read, change one byte, write), which the specification allows.
//!
//! Written here rather than taken from the `arm-gic` crate so that, like the UART drivers, it is
//! written against [`Regs`] and its tests run it on a fake register file; it is five registers.
//!
//! Security: the kernel runs non-secure on a Pi 4 (the firmware's armstub puts every interrupt in
//! group 1 and hands over at EL2), where bit 0 of GICD_CTLR and GICC_CTLR enables group 1; QEMU's
//! virt machine has no security extensions, where bit 0 enables group 0, signalled as IRQ. Either
//! way bit 0 is what turns the interrupt on.

use crate::mmio::{Mmio, Regs};
use core::fmt;

const GICD_CTLR: usize = 0x000;
const GICD_ISENABLER: usize = 0x100;
const GICD_ICENABLER: usize = 0x180;
const GICD_IPRIORITYR: usize = 0x400;
const GICD_ITARGETSR: usize = 0x800;
const GICD_ICFGR: usize = 0xc00;

const GICC_CTLR: usize = 0x00;
const GICC_PMR: usize = 0x04;
const GICC_IAR: usize = 0x0c;
const GICC_EOIR: usize = 0x10;

/// Bytes of the distributor the driver uses (GICD_ICFGR for interrupt 1019 ends below 0x1000).
pub const DIST_BLOCK_SIZE: usize = 0x1000;
/// Bytes of the CPU interface the driver uses.
pub const CPU_BLOCK_SIZE: usize = 0x100;

/// The first shared peripheral interrupt: 0-15 are software generated, 16-31 per core.
pub const FIRST_SPI: u32 = 32;
/// Interrupt ids 1020 to 1023 are special (1023: nothing pending, a spurious interrupt).
pub const SPURIOUS: u32 = 1020;
/// The priority given to the enabled interrupt: the middle of the range, above the mask.
const PRIORITY: u32 = 0xa0;
/// The priority mask: every priority passes.
const PMR_ALL: u32 = 0xff;

/// An interrupt id the driver refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadIrq(pub u32);

impl fmt::Display for BadIrq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "interrupt {} is not a GICv2 shared peripheral interrupt ({FIRST_SPI} to {})",
            self.0,
            SPURIOUS - 1
        )
    }
}

/// A GICv2: its distributor and CPU interface registers.
#[derive(Debug)]
pub struct GicV2<R: Regs = Mmio> {
    dist: R,
    cpu: R,
}

impl GicV2<Mmio> {
    /// # Safety
    /// `dist` and `cpu` must be a GICv2's distributor and CPU interface, mapped as device memory;
    /// nothing else may program the interrupts this driver enables.
    pub const unsafe fn new(dist: usize, cpu: usize) -> Self {
        // SAFETY: the caller's contract; every offset used lies inside the two sizes.
        let (dist, cpu) = unsafe {
            (
                Mmio::new(dist, DIST_BLOCK_SIZE),
                Mmio::new(cpu, CPU_BLOCK_SIZE),
            )
        };
        Self { dist, cpu }
    }
}

impl<R: Regs> GicV2<R> {
    /// A GIC over fake or real register files.
    pub const fn from_regs(dist: R, cpu: R) -> Self {
        Self { dist, cpu }
    }

    /// Enable shared peripheral interrupt `id`, level-sensitive, routed to the calling core only,
    /// and turn on the distributor and this core's CPU interface. Returns the CPU interface mask
    /// it routed to.
    pub fn enable_spi(&mut self, id: u32) -> Result<u8, BadIrq> {
        if !(FIRST_SPI..SPURIOUS).contains(&id) {
            return Err(BadIrq(id));
        }
        let (word, bit) = ((id / 32) as usize * 4, 1u32 << (id % 32));
        self.dist.write32(GICD_ICENABLER + word, bit);
        // ITARGETSR0-7 read as this core's own bit (the specification, 4.3.12); 0 on a GIC with
        // one CPU interface, which delivers to that one anyway.
        let me = (self.dist.read32(GICD_ITARGETSR) & 0xff).max(1) as u8;
        self.set_byte(GICD_ITARGETSR, id, me as u32);
        self.set_byte(GICD_IPRIORITYR, id, PRIORITY);
        let cfg = GICD_ICFGR + (id / 16) as usize * 4;
        let edge = 2 << ((id % 16) * 2);
        let v = self.dist.read32(cfg);
        self.dist.write32(cfg, v & !edge);
        self.dist.write32(GICD_ISENABLER + word, bit);
        let ctlr = self.dist.read32(GICD_CTLR);
        self.dist.write32(GICD_CTLR, ctlr | 1);
        self.cpu.write32(GICC_PMR, PMR_ALL);
        let ctlr = self.cpu.read32(GICC_CTLR);
        self.cpu.write32(GICC_CTLR, ctlr | 1);
        Ok(me)
    }

    /// The byte for interrupt `id` in a byte-per-interrupt register bank, set to `v`.
    fn set_byte(&mut self, bank: usize, id: u32, v: u32) {
        let off = bank + (id as usize & !3);
        let shift = (id % 4) * 8;
        let w = self.dist.read32(off);
        self.dist
            .write32(off, (w & !(0xff << shift)) | (v << shift));
    }

    /// Take the highest-priority pending interrupt: `(id, iar)`, the id and the value to hand to
    /// [`GicV2::end`], or `None` when nothing is pending (a spurious id, which needs no end).
    pub fn acknowledge(&mut self) -> Option<(u32, u32)> {
        let iar = self.cpu.read32(GICC_IAR);
        let id = iar & 0x3ff;
        (id < SPURIOUS).then_some((id, iar))
    }

    /// End the interrupt [`GicV2::acknowledge`] returned `iar` for.
    pub fn end(&mut self, iar: u32) {
        self.cpu.write32(GICC_EOIR, iar);
    }
}

#[cfg(test)]
mod tests;
