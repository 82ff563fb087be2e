//! GPIO function select and pulls for the pin setups lmboot needs: the PL011 console on the
//! header pins (GPIO 14/15), the ring link's UART ([`link_uart_pins`]) and, on a Pi 3 / Zero 2 W,
//! the card slot (GPIO 48-53) on the Arasan "EMMC" controller. Written against [`Regs`], so a
//! RAM-backed register file tests them.
//!
//! Pulls: the BCM2835/BCM2837 set them with the GPPUD / GPPUDCLK sequence of the peripherals guide
//! (section 6.1: control value, 150 cycles, clock the pins, 150 cycles, release both); the BCM2711
//! has two bits a pin in GPIO_PUP_PDN_CNTRL_REG0..3.
//!
//! # UARTs on the 40-pin header
//!
//! The pins carrying a UART, as Linux's device trees (bcm283x.dtsi, bcm2711.dtsi) name their pin
//! groups after the alternate-function tables of the BCM2835 and BCM2711 peripherals guides:
//!
//! | SoC | UART | TX, RX | CTS, RTS | function |
//! |---|---|---|---|---|
//! | both | UART0 (PL011) | 14, 15 | 16, 17 (ALT3) | ALT0 |
//! | both | UART1 (mini) | 14, 15 | 16, 17 | ALT5 |
//! | BCM2711 | UART2 | 0, 1 | 2, 3 | ALT4 |
//! | BCM2711 | UART3 | 4, 5 | 6, 7 | ALT4 |
//! | BCM2711 | UART4 | 8, 9 | 10, 11 | ALT4 |
//! | BCM2711 | UART5 | 12, 13 | 14, 15 | ALT4 |
//!
//! GPIO 0-27 reach the header; the other groups (UART0/1 on 30-33, 36-39, 40-43) go to the
//! Bluetooth chip or nowhere. So on a BCM2837 (Pi 3, Zero 2 W) only GPIO 14/15 carry a UART to the
//! header, and a ring link there takes the console's pins. On a BCM2711, UART2 sits on the HAT
//! ID EEPROM's I2C pins (0/1), UART4 on SPI0 (8-11), UART5's CTS/RTS on the console (14/15):
//! UART3 on 4-7 is the one that collides with nothing lmboot uses.

use crate::mmio::Regs;
use crate::uart::Flow;

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
    Alt1 = 0b101,
    Alt2 = 0b110,
    Alt3 = 0b111,
    Alt4 = 0b011,
    Alt5 = 0b010,
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

/// Where a board's ring-link UART reaches its pins (the board file's `[ring_uart] pins`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkPins {
    /// Nothing to route (QEMU, whose UARTs have no pins).
    None,
    /// BCM2711 (Pi 4) UART3, a PL011 at 0x7e20_1600 (ARM 0xfe20_1600 in low-peripheral mode):
    /// TXD3 on GPIO 4 (header pin 7), RXD3 on GPIO 5 (pin 29), and with flow control CTS3 on
    /// GPIO 6 (pin 31) and RTS3 on GPIO 7 (pin 26), all ALT4. The console keeps GPIO 14/15.
    Bcm2711Uart3,
    /// BCM2837 (Pi 3, Zero 2 W) mini UART on GPIO 14 (TXD1, header pin 8) and 15 (RXD1, pin 10),
    /// and with flow control CTS1 on GPIO 16 (pin 36) and RTS1 on GPIO 17 (pin 11), all ALT5.
    ///
    /// These are the console's pins: GPIO 14/15 are the only header pins with a UART on this
    /// chip (UART0 and UART1 elsewhere, GPIO 32/33 and 40/41, go to the Bluetooth chip or to no
    /// pin of a Zero 2 W's header). A board in a ring therefore has its console off the header:
    /// the PL011 stays the console but reaches no pin (do not call [`uart0_on_14_15`] after this:
    /// it would take the pins back; on a Pi 3B the PL011 could go to GPIO 32/33, which reach no
    /// header either).
    Bcm2837MiniGpio14,
}

/// One routing: the pull scheme, the function and the TX, RX, CTS, RTS pins.
struct LinkRoute {
    kind: GpioKind,
    function: Function,
    tx: u8,
    rx: u8,
    cts: u8,
    rts: u8,
}

impl LinkPins {
    fn route(self) -> Option<LinkRoute> {
        let (kind, function, tx) = match self {
            LinkPins::None => return None,
            LinkPins::Bcm2711Uart3 => (GpioKind::Bcm2711, Function::Alt4, 4),
            LinkPins::Bcm2837MiniGpio14 => (GpioKind::Bcm2835, Function::Alt5, 14),
        };
        Some(LinkRoute {
            kind,
            function,
            tx,
            rx: tx + 1,
            cts: tx + 2,
            rts: tx + 3,
        })
    }
}

/// Route the ring link's UART to its pins ([`LinkPins`]), with CTS and RTS when `flow` asks for
/// flow control, as Linux's device trees set them: TX and RTS without pull, RX and CTS pulled up
/// (an unconnected RX reads idle; an unconnected CTS reads "not clear", which holds a
/// flow-controlled transmitter). Pins not named keep their function and pull. `delay` waits
/// microseconds. [`LinkPins::None`] touches nothing.
pub fn link_uart_pins<R: Regs>(
    regs: &mut R,
    pins: LinkPins,
    flow: Flow,
    mut delay: impl FnMut(u32),
) {
    let Some(r) = pins.route() else { return };
    let (outputs, inputs, used): (&[u8], &[u8], &[u8]) = match flow {
        Flow::None => (&[r.tx], &[r.rx], &[r.tx, r.rx]),
        Flow::RtsCts => (&[r.tx, r.rts], &[r.rx, r.cts], &[r.tx, r.rx, r.cts, r.rts]),
    };
    regs.barrier();
    set_pulls(regs, r.kind, outputs, Pull::None, &mut delay);
    set_pulls(regs, r.kind, inputs, Pull::Up, &mut delay);
    for &pin in used {
        set_function(regs, pin, r.function);
    }
    regs.barrier();
}

/// Route the card slot (GPIO 48-53: CLK, CMD, DAT0-3) to the Arasan EMMC controller (ALT3) of a
/// BCM2837, with no pull on CLK and pull-ups on CMD and DAT0-3 (the pulls of Linux's device tree
/// for this pin group). First GPIO 34-39, the Wi-Fi SDIO pins the firmware connected to the same
/// controller, become inputs, as in Circle's addon/SDCard/emmc.cpp: two pin groups on one
/// controller would fight over CMD and DAT. `delay` waits microseconds.
pub fn sd_on_emmc<R: Regs>(regs: &mut R, delay: impl FnMut(u32)) {
    regs.barrier();
    for pin in 34..=39 {
        set_function(regs, pin, Function::Input);
    }
    card_pins(regs, Function::Alt3, delay);
    regs.barrier();
}

/// Route the card slot (GPIO 48-53) to the "sdhost" controller (ALT0) of a BCM2835/6/7, with the
/// pulls of Linux's device tree for the pin group (`sdhost_gpio48`: none on CLK, up on CMD and
/// DAT0-3). GPIO 34-39 keep what the firmware gave them (on a Pi 3 the Wi-Fi's SDIO on the
/// Arasan, which no longer shares pins with the card). QEMU moves its card to sdhost once all six
/// are ALT0. `delay` waits microseconds.
pub fn sd_on_sdhost<R: Regs>(regs: &mut R, delay: impl FnMut(u32)) {
    regs.barrier();
    card_pins(regs, Function::Alt0, delay);
    regs.barrier();
}

/// GPIO 48-53 (CLK, CMD, DAT0-3) to `f`, no pull on CLK, pull-ups on the others.
fn card_pins<R: Regs>(regs: &mut R, f: Function, mut delay: impl FnMut(u32)) {
    for pin in 48..=53 {
        set_function(regs, pin, f);
    }
    set_pulls(regs, GpioKind::Bcm2835, &[48], Pull::None, &mut delay);
    set_pulls(
        regs,
        GpioKind::Bcm2835,
        &[49, 50, 51, 52, 53],
        Pull::Up,
        &mut delay,
    );
}

#[cfg(test)]
mod tests;
