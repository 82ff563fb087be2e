//! GPIO function select: put the PL011 on GPIO 14 (TXD) and 15 (RXD), ALT0, pulls off, so the
//! serial console works on the header pins (on a Pi 3 the firmware gives the PL011 to Bluetooth).

use crate::mmio::RegisterBlock;

/// Which pull-control scheme the chip has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpioKind {
    /// BCM2835/2837: GPPUD + GPPUDCLK sequence.
    Bcm2835,
    /// BCM2711: GPIO_PUP_PDN_CNTRL registers.
    Bcm2711,
}

const GPFSEL1: usize = 0x04;
const GPPUD: usize = 0x94;
const GPPUDCLK0: usize = 0x98;
const PUP_PDN_CNTRL0: usize = 0xe4;

/// Route the PL011 to GPIO 14/15.
///
/// # Safety
/// `base` must be the GPIO registers, mapped as device memory; no one else may change them now.
pub unsafe fn uart0_on_14_15(base: usize, kind: GpioKind, delay: impl Fn(u32)) {
    // SAFETY: the caller's contract; 32-bit accesses to GPIO registers.
    let mut regs = unsafe { RegisterBlock::new(base) };
    // Function select: pins 14 and 15 are bits 12..18 of GPFSEL1; ALT0 = 0b100.
    let mut f = regs.read32(GPFSEL1);
    f &= !((7 << 12) | (7 << 15));
    f |= (4 << 12) | (4 << 15);
    regs.write32(GPFSEL1, f);
    match kind {
        GpioKind::Bcm2835 => {
            regs.write32(GPPUD, 0);
            delay(150);
            regs.write32(GPPUDCLK0, (1 << 14) | (1 << 15));
            delay(150);
            regs.write32(GPPUDCLK0, 0);
        }
        GpioKind::Bcm2711 => {
            // Two bits per pin; pins 14 and 15 are bits 28..32 of register 0; 0 = no pull.
            let mut p = regs.read32(PUP_PDN_CNTRL0);
            p &= !(0xf << 28);
            regs.write32(PUP_PDN_CNTRL0, p);
        }
    }
}

const GPFSEL4: usize = 0x10;
const GPFSEL5: usize = 0x14;
const GPPUDCLK1: usize = 0x9c;

/// Route the card slot (GPIO 48..=53) to the Arasan EMMC controller, ALT3, with pull-ups on CMD
/// and DAT0-3 (the BCM2837 firmware leaves the slot on its SDHOST controller).
///
/// # Safety
/// As [`uart0_on_14_15`].
pub unsafe fn sd_on_emmc(base: usize, delay: impl Fn(u32)) {
    // SAFETY: the caller's contract; 32-bit accesses to GPIO registers.
    let mut regs = unsafe { RegisterBlock::new(base) };
    // Pins 48, 49: GPFSEL4 bits 24..30; pins 50..=53: GPFSEL5 bits 0..12; ALT3 = 0b111.
    let mut f4 = regs.read32(GPFSEL4);
    f4 |= (7 << 24) | (7 << 27);
    regs.write32(GPFSEL4, f4);
    let mut f5 = regs.read32(GPFSEL5);
    f5 |= 0xfff;
    regs.write32(GPFSEL5, f5);
    // Pull-ups on 49..=53 (CMD, DAT0-3): GPPUD = 2, clock the pins, release.
    regs.write32(GPPUD, 2);
    delay(150);
    regs.write32(GPPUDCLK1, 0b11_1110 << 16);
    delay(150);
    regs.write32(GPPUD, 0);
    regs.write32(GPPUDCLK1, 0);
}
