//! The BCM2836/BCM2837 interrupt path for one VideoCore ("GPU") peripheral interrupt, the AUX
//! mini UART's on a Pi 3 / Zero 2 W: the ARMCTRL block (the BCM2835's interrupt controller,
//! `brcm,bcm2836-armctrl-ic`) enables and reports it, and the BCM2836 per-core local interrupt
//! controller (`brcm,bcm2836-l1-intc`) routes every GPU interrupt to one core's IRQ.
//!
//! Registers, from the BCM2835 ARM Peripherals guide (section 7.5, offsets from 0x7e00_b200:
//! ARM 0x3f00_b200 on the BCM2837) and the BCM2836 "ARM Quad A7 core" document (at 0x4000_0000):
//!
//! | block | offset | register | as used here |
//! |---|---|---|---|
//! | ARMCTRL | 0x04 / 0x08 | IRQ pending 1 / 2 | GPU interrupts 0-31 / 32-63, one bit each |
//! | ARMCTRL | 0x10 / 0x14 | Enable IRQs 1 / 2 | write 1s to enable |
//! | ARMCTRL | 0x1c / 0x20 | Disable IRQs 1 / 2 | write 1s to disable |
//! | local | 0x0c | GPU interrupts routing | bits 1:0 the core that takes GPU IRQs, 3:2 FIQs |
//! | local | 0x60 + 4 × core | core n IRQ source | bit 8: a GPU interrupt is pending |
//!
//! The AUX block's interrupt is GPU interrupt 29 (Linux's device tree: `interrupts = <1 29>` on
//! `serial@7e215040`, bank 1 being IRQ pending 1). There is no acknowledge and no end: a GPU
//! interrupt is the level of its peripheral's line, the mini UART's while its receive FIFO holds
//! anything.

use crate::mmio::{Mmio, Regs};
use core::fmt;

const PENDING: [usize; 2] = [0x04, 0x08];
const ENABLE: [usize; 2] = [0x10, 0x14];
const DISABLE: [usize; 2] = [0x1c, 0x20];
const GPU_INT_ROUTING: usize = 0x0c;
const CORE_IRQ_SOURCE: usize = 0x60;
const SOURCE_GPU: u32 = 1 << 8;

/// Bytes of the ARMCTRL block the driver uses (from its IRQ basic pending register).
pub const ARMCTRL_BLOCK_SIZE: usize = 0x40;
/// Bytes of the local interrupt controller the driver uses (up to core 3's IRQ source).
pub const LOCAL_BLOCK_SIZE: usize = 0x100;
/// The GPU interrupt of the AUX block (mini UART, SPI1, SPI2).
pub const AUX_IRQ: u32 = 29;
/// GPU interrupts: 0 to 63.
pub const GPU_IRQS: u32 = 64;

/// A GPU interrupt or core the driver refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadGpuIrq {
    /// Not a GPU interrupt (0 to 63).
    Irq(u32),
    /// Not one of the four cores.
    Core(usize),
}

impl fmt::Display for BadGpuIrq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BadGpuIrq::Irq(n) => {
                write!(f, "interrupt {n} is not a BCM2835 GPU interrupt (0 to 63)")
            }
            BadGpuIrq::Core(c) => write!(
                f,
                "core {c}: the BCM2836 routes GPU interrupts to cores 0 to 3"
            ),
        }
    }
}

/// The ARMCTRL block and the local interrupt controller, for GPU interrupts taken on `core`.
#[derive(Debug)]
pub struct GpuIrqs<R: Regs = Mmio> {
    armctrl: R,
    local: R,
    core: usize,
}

impl GpuIrqs<Mmio> {
    /// # Safety
    /// `armctrl` must be the ARMCTRL block's IRQ basic pending register (0x3f00_b200 on the
    /// BCM2837) and `local` the BCM2836 local interrupt controller (0x4000_0000), both mapped as
    /// device memory; nothing else may route GPU interrupts or enable the ones used here.
    pub const unsafe fn new(armctrl: usize, local: usize, core: usize) -> Self {
        // SAFETY: the caller's contract; every offset used lies inside the two sizes.
        let (armctrl, local) = unsafe {
            (
                Mmio::new(armctrl, ARMCTRL_BLOCK_SIZE),
                Mmio::new(local, LOCAL_BLOCK_SIZE),
            )
        };
        Self::from_regs(armctrl, local, core)
    }
}

impl<R: Regs> GpuIrqs<R> {
    /// Over fake or real register files.
    pub const fn from_regs(armctrl: R, local: R, core: usize) -> Self {
        Self {
            armctrl,
            local,
            core,
        }
    }

    /// Route every GPU interrupt to this core's IRQ (the routing is one for all of them) and
    /// enable GPU interrupt `irq`.
    pub fn enable(&mut self, irq: u32) -> Result<(), BadGpuIrq> {
        if irq >= GPU_IRQS {
            return Err(BadGpuIrq::Irq(irq));
        }
        if self.core > 3 {
            return Err(BadGpuIrq::Core(self.core));
        }
        let (bank, bit) = ((irq / 32) as usize, 1u32 << (irq % 32));
        self.armctrl.write32(DISABLE[bank], bit);
        self.local.write32(GPU_INT_ROUTING, self.core as u32);
        self.armctrl.write32(ENABLE[bank], bit);
        Ok(())
    }

    /// Whether GPU interrupt `irq` is what interrupts this core now.
    pub fn pending(&mut self, irq: u32) -> bool {
        if irq >= GPU_IRQS || self.core > 3 {
            return false;
        }
        let source = self.local.read32(CORE_IRQ_SOURCE + 4 * self.core);
        let (bank, bit) = ((irq / 32) as usize, 1u32 << (irq % 32));
        source & SOURCE_GPU != 0 && self.armctrl.read32(PENDING[bank]) & bit != 0
    }
}

#[cfg(test)]
mod tests;
