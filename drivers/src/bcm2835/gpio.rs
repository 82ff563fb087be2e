//! GPIO function select and pulls for the two pin setups lmboot needs: the PL011 console on the
//! header pins (GPIO 14/15) and, on a Pi 3 / Zero 2 W, the card slot (GPIO 48-53) on the Arasan
//! "EMMC" controller. Written against [`Regs`], so a RAM-backed register file tests them.
//!
//! Pulls: the BCM2835/BCM2837 set them with the GPPUD / GPPUDCLK sequence of the peripherals guide
//! (section 6.1: control value, 150 cycles, clock the pins, 150 cycles, release both); the BCM2711
//! has two bits a pin in GPIO_PUP_PDN_CNTRL_REG0..3.

use crate::mmio::Regs;

/// Which pull-control scheme the chip has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpioKind {
    /// BCM2835/2837: GPPUD + GPPUDCLK sequence.
    Bcm2835,
    /// BCM2711: GPIO_PUP_PDN_CNTRL registers.
    Bcm2711,
}

/// Size of the GPIO register block (the `size` for [`crate::mmio::Mmio::new`]).
pub const GPIO_BLOCK_SIZE: usize = 0x100;

/// A pin's function (3 bits in GPFSELn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    Input = 0b000,
    Output = 0b001,
    Alt0 = 0b100,
    Alt3 = 0b111,
}

/// A pin's pull resistor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pull {
    None,
    Up,
    Down,
}

const GPFSEL0: usize = 0x00;
const GPPUD: usize = 0x94;
const GPPUDCLK0: usize = 0x98;
const PUP_PDN_CNTRL0: usize = 0xe4;
/// The guide's "150 cycles" of the pull sequence, as microseconds for the caller's delay (far
/// more than 150 cycles of any clock the chip runs).
const PULL_SETUP_US: u32 = 150;

/// Set `pin`'s function (read-modify-write of its GPFSEL register).
pub fn set_function<R: Regs>(regs: &mut R, pin: u8, f: Function) {
    let off = GPFSEL0 + 4 * (pin as usize / 10);
    let shift = 3 * (pin as u32 % 10);
    let v = regs.read32(off) & !(7 << shift);
    regs.write32(off, v | (f as u32) << shift);
}

/// Set the pull of every pin in `pins` (all in 0..=53) to `pull`; `delay` waits microseconds.
pub fn set_pulls<R: Regs>(
    regs: &mut R,
    kind: GpioKind,
    pins: &[u8],
    pull: Pull,
    delay: &mut impl FnMut(u32),
) {
    match kind {
        GpioKind::Bcm2835 => {
            let code = match pull {
                Pull::None => 0,
                Pull::Down => 1,
                Pull::Up => 2,
            };
            let mut clk = [0u32; 2];
            for &p in pins {
                clk[p as usize / 32] |= 1 << (p % 32);
            }
            regs.write32(GPPUD, code);
            delay(PULL_SETUP_US);
            for (i, &bits) in clk.iter().enumerate() {
                regs.write32(GPPUDCLK0 + 4 * i, bits);
            }
            delay(PULL_SETUP_US);
            regs.write32(GPPUD, 0);
            for i in 0..clk.len() {
                regs.write32(GPPUDCLK0 + 4 * i, 0);
            }
        }
        GpioKind::Bcm2711 => {
            let code = match pull {
                Pull::None => 0,
                Pull::Up => 1,
                Pull::Down => 2,
            };
            for &p in pins {
                let off = PUP_PDN_CNTRL0 + 4 * (p as usize / 16);
                let shift = 2 * (p as u32 % 16);
                let v = regs.read32(off) & !(3 << shift);
                regs.write32(off, v | code << shift);
            }
        }
    }
}

/// Route the PL011 to GPIO 14 (TXD) and 15 (RXD), ALT0, as Circle's lib/serial.cpp does: TXD
/// without pull, RXD pulled up (an unconnected RX line then reads idle, not a stream of breaks),
/// and GPIO 32/33, where the firmware may have put the PL011 for Bluetooth, back to inputs without
/// pulls so the UART is not driven from two pin groups. `delay` waits microseconds.
pub fn uart0_on_14_15<R: Regs>(regs: &mut R, kind: GpioKind, mut delay: impl FnMut(u32)) {
    regs.barrier();
    for pin in [32, 33] {
        set_function(regs, pin, Function::Input);
    }
    set_pulls(regs, kind, &[14, 32, 33], Pull::None, &mut delay);
    set_pulls(regs, kind, &[15], Pull::Up, &mut delay);
    set_function(regs, 14, Function::Alt0);
    set_function(regs, 15, Function::Alt0);
    regs.barrier();
}

/// Route the card slot (GPIO 48-53: CLK, CMD, DAT0-3) to the Arasan EMMC controller (ALT3) of a
/// BCM2837, with no pull on CLK and pull-ups on CMD and DAT0-3 (the pulls of Linux's device tree
/// for this pin group). First GPIO 34-39, the Wi-Fi SDIO pins the firmware connected to the same
/// controller, become inputs, as in Circle's addon/SDCard/emmc.cpp: two pin groups on one
/// controller would fight over CMD and DAT. `delay` waits microseconds.
pub fn sd_on_emmc<R: Regs>(regs: &mut R, mut delay: impl FnMut(u32)) {
    regs.barrier();
    for pin in 34..=39 {
        set_function(regs, pin, Function::Input);
    }
    for pin in 48..=53 {
        set_function(regs, pin, Function::Alt3);
    }
    set_pulls(regs, GpioKind::Bcm2835, &[48], Pull::None, &mut delay);
    set_pulls(
        regs,
        GpioKind::Bcm2835,
        &[49, 50, 51, 52, 53],
        Pull::Up,
        &mut delay,
    );
    regs.barrier();
}

#[cfg(test)]
mod tests;
