//! Serial ports. [`Uart`] is what the kernel's console needs: send a byte, maybe receive one.
//! [`LinkUart`] is what a board-to-board link needs (the ring, where board k's TX goes to board
//! k+1's RX): never wait, and count what the line lost.
//!
//! Drivers: [`pl011::Pl011`] (console and link), [`ns16550::Ns16550`] (console),
//! [`mini::MiniUart`] (the BCM2835-family AUX mini UART, link). A link is brought up at a rate its
//! clock can make: [`LinkKind::achievable_baud`] says what the divisor really gives, or refuses a
//! rate more than [`MAX_BAUD_ERROR_PER_MILLE`] off.
//!
//! Why not the `arm-pl011-uart` and `uart_16550` crates: both need a newer Rust than this
//! workspace's (1.88 and 1.91), and both drive raw pointers of their own, where these drivers are
//! written against [`crate::mmio::Regs`] so that the tests run them on fake register files. Neither
//! has the link side ([`LinkUart`]: writes that never wait, lost bytes counted) nor the DesignWare
//! UART's busy-LCR retry, and the mini UART has no crate at all.

use core::fmt;
use core::ops::RangeInclusive;

pub mod mini;
pub mod ns16550;
pub mod pl011;
pub mod rx;

/// A serial port.
pub trait Uart {
    /// Send one byte (waits, boundedly, for room in the transmit FIFO).
    fn write_byte(&mut self, b: u8);
    /// A received byte, if one is waiting.
    fn read_byte(&mut self) -> Option<u8>;
}

/// A serial link between boards, polled and never waiting: the protocol above it decides what to
/// do when the line is busy or quiet.
pub trait LinkUart {
    /// Put `b` in the transmit FIFO if there is room; `false` (nothing sent) when it is full, as
    /// it stays while flow control holds the transmitter.
    fn try_write_byte(&mut self, b: u8) -> bool;
    /// A received byte, if one is waiting.
    fn read_byte(&mut self) -> Option<u8>;
    /// Receive overruns seen so far (from the UART's error flags): bytes the line delivered while
    /// the receive FIFO was full, lost.
    fn overruns(&self) -> u32;
    /// Let the UART raise its interrupt while received bytes wait (the receive FIFO at its level,
    /// or bytes left below it when the line goes quiet), after the link was set up. The handler
    /// empties the FIFO ([`rx::RxIrq::drain`]), which is what clears the interrupt.
    fn enable_rx_irq(&mut self);
}

/// Hardware flow control on a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// TX and RX only.
    None,
    /// RTS/CTS: the receiver drops RTS when its FIFO fills, and the transmitter waits while CTS is
    /// deasserted (so an unconnected CTS, pulled up, holds the transmitter: wire both or neither).
    RtsCts,
}

/// Which UART a link uses (the board file's `[ring_uart] kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// An ARM PL011 ([`pl011`]).
    Pl011,
    /// The BCM2835-family AUX mini UART ([`mini`]).
    Mini,
}

impl LinkKind {
    /// The baud rate this kind of UART really makes for `baud` from a clock of `clock_hz`:
    /// [`pl011::achievable_baud`] or [`mini::achievable_baud`].
    pub fn achievable_baud(self, clock_hz: u32, baud: u32) -> Result<u32, BaudError> {
        match self {
            LinkKind::Pl011 => pl011::achievable_baud(clock_hz, baud),
            LinkKind::Mini => mini::achievable_baud(clock_hz, baud),
        }
    }
}

/// The most a link's actual rate may differ from the rate asked for, in thousandths (2%). Two
/// ends each within 2% stay inside the roughly 5% an 8N1 frame tolerates between them.
pub const MAX_BAUD_ERROR_PER_MILLE: u32 = 20;

/// A baud rate the UART cannot make from its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaudError {
    /// A baud rate or a clock of 0.
    Zero { clock_hz: u32, baud: u32 },
    /// Outside what the divisor register reaches from this clock: `min..=max` baud.
    OutOfRange {
        clock_hz: u32,
        baud: u32,
        min: u32,
        max: u32,
    },
    /// The nearest divisor gives `actual`, more than [`MAX_BAUD_ERROR_PER_MILLE`] off `baud`.
    Inexact {
        clock_hz: u32,
        baud: u32,
        actual: u32,
    },
}

impl fmt::Display for BaudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BaudError::Zero { clock_hz, baud } => {
                write!(f, "{baud} baud from a {clock_hz} Hz clock: neither may be 0")
            }
            BaudError::OutOfRange {
                clock_hz,
                baud,
                min,
                max,
            } => write!(
                f,
                "{baud} baud from a {clock_hz} Hz clock: the divisor reaches {min} to {max} baud"
            ),
            BaudError::Inexact {
                clock_hz,
                baud,
                actual,
            } => write!(
                f,
                "{baud} baud from a {clock_hz} Hz clock: the nearest divisor gives {actual} baud, more than {}.{}% off",
                MAX_BAUD_ERROR_PER_MILLE / 10,
                MAX_BAUD_ERROR_PER_MILLE % 10
            ),
        }
    }
}

/// The divisor `q` in `range` nearest to `baud` for a UART that makes `clock_hz * mul / (per * q)`
/// baud, with the rate it makes; refused when out of range or more than
/// [`MAX_BAUD_ERROR_PER_MILLE`] off.
fn nearest_divisor(
    clock_hz: u32,
    baud: u32,
    mul: u64,
    per: u64,
    range: RangeInclusive<u64>,
) -> Result<(u64, u32), BaudError> {
    if clock_hz == 0 || baud == 0 {
        return Err(BaudError::Zero { clock_hz, baud });
    }
    let top = clock_hz as u64 * mul;
    let q = div_round(top, per * baud as u64);
    if !range.contains(&q) {
        return Err(BaudError::OutOfRange {
            clock_hz,
            baud,
            min: top.div_ceil(per * range.end()) as u32,
            max: (top / (per * range.start())) as u32,
        });
    }
    let actual = div_round(top, per * q) as u32;
    let off = (actual as u64).abs_diff(baud as u64);
    if off * 1000 > baud as u64 * MAX_BAUD_ERROR_PER_MILLE as u64 {
        return Err(BaudError::Inexact {
            clock_hz,
            baud,
            actual,
        });
    }
    Ok((q, actual))
}

/// `n / d` rounded to the nearest integer (`d` > 0).
const fn div_round(n: u64, d: u64) -> u64 {
    (n + d / 2) / d
}
