//! ARM PL011 UART (QEMU virt, Raspberry Pi): 8N1 with FIFOs, polled. As the console ([`Uart`]:
//! [`Pl011::init`], writes that wait boundedly for room) and as a link between boards
//! ([`LinkUart`]: [`Pl011::init_link`] with optional RTS/CTS flow control, writes that never wait,
//! receive errors counted from the flags each byte carries in DR bits 8-11; the receive and
//! receive-timeout interrupts for a link read by interrupt, [`LinkUart::enable_rx_irq`]).
//!
//! Written against [`Regs`]: [`Pl011::new`] maps a real one, [`Pl011::from_regs`] takes any
//! register file (a fake in the tests). Like the console, the link has no barrier of its own per
//! byte: the drivers of the other peripherals fence their accesses on both sides
//! ([`crate::mmio`]); [`Pl011::init_link`] fences its own.

use super::{div_round, nearest_divisor, BaudError, Flow, LinkUart, Uart};
use crate::mmio::{Mmio, Regs};

/// Data register: a byte to send, or a received byte with its error flags in bits 11:8.
pub(super) const DR: usize = 0x00;
/// RSR on read, ECR on write (any value clears the error flags).
const RSR_ECR: usize = 0x04;
/// Flag register.
pub(super) const FR: usize = 0x18;
/// Integer baud rate divisor.
const IBRD: usize = 0x24;
/// Fractional baud rate divisor (64ths).
const FBRD: usize = 0x28;
/// Line control (LCR_H).
const LCRH: usize = 0x2c;
/// Control register.
const CR: usize = 0x30;
/// Interrupt FIFO level select.
pub(super) const IFLS: usize = 0x34;
/// Interrupt mask set/clear.
pub(super) const IMSC: usize = 0x38;
/// Interrupt clear.
pub(super) const ICR: usize = 0x44;

/// Bytes of registers the driver uses from the base: the `size` for [`Mmio::new`] (the BCM2711
/// puts its PL011s 0x200 apart, QEMU's virt machine 0x1000 apart).
pub const PL011_BLOCK_SIZE: usize = 0x100;

/// FR: transmit FIFO full.
const FR_TXFF: u32 = 1 << 5;
/// FR: receive FIFO empty.
pub(super) const FR_RXFE: u32 = 1 << 4;
/// FR: the UART is sending.
const FR_BUSY: u32 = 1 << 3;

/// DR: framing error on the received byte.
const DR_FE: u32 = 1 << 8;
/// DR: parity error.
const DR_PE: u32 = 1 << 9;
/// DR: break.
const DR_BE: u32 = 1 << 10;
/// DR: overrun (a byte was lost before this one, the FIFO being full).
pub(super) const DR_OE: u32 = 1 << 11;

/// CR: the UART on.
const CR_UARTEN: u32 = 1 << 0;
/// CR: transmitter on.
const CR_TXE: u32 = 1 << 8;
/// CR: receiver on.
const CR_RXE: u32 = 1 << 9;
/// Hardware RTS: deasserted while the receive FIFO is at its watermark (IFLS).
const CR_RTSEN: u32 = 1 << 14;
/// Hardware CTS: the transmitter sends only while CTS is asserted.
const CR_CTSEN: u32 = 1 << 15;

/// 8 data bits, FIFOs on (LCR_H WLEN = 0b11, FEN).
const LCRH_8N1_FIFO: u32 = (0b11 << 5) | (1 << 4);
/// Receive and transmit watermarks at half full (RXIFLSEL = TXIFLSEL = 0b010, the reset value):
/// under flow control RTS drops when the receive FIFO is half full, leaving the other half for
/// what the sender has under way when it sees CTS fall.
const IFLS_HALF: u32 = (0b010 << 3) | 0b010;
/// Receive interrupt (FIFO at its level): RXIM in IMSC and ICR.
pub(super) const INT_RX: u32 = 1 << 4;
/// Receive-timeout interrupt (bytes below the level, line quiet for 32 bit periods): RTIM in
/// IMSC and ICR.
pub(super) const INT_RT: u32 = 1 << 6;

/// The divisor in 64ths (16.6 fixed point): IBRD 1 to 0xffff, and FBRD 0 at IBRD 0xffff (PL011
/// TRM, UARTIBRD/UARTFBRD).
const DIVISOR_64THS: core::ops::RangeInclusive<u64> = (1 << 6)..=(0xffff << 6);

/// Polls of a full transmit FIFO before a byte is dropped (a wedged or absent UART must not hang
/// the kernel): far longer than one character takes at 115200 baud.
const TX_SPIN_LIMIT: u32 = 10_000_000;
/// Reads that empty the receive FIFO when a link starts: more than any PL011's FIFO holds.
const RX_DRAIN_LIMIT: u32 = 64;

/// The baud rate a PL011 makes for `baud` from a UART clock of `clock_hz`: the divisor
/// clock / (16 * baud) rounded to 64ths (the PL011 TRM's FBRD = integer(fraction * 64 + 0.5)),
/// and the rate clock * 4 / divisor it gives. Refused outside IBRD 1..=0xffff (at most
/// clock / 16: 3 Mbaud from 48 MHz) or more than [`super::MAX_BAUD_ERROR_PER_MILLE`] off (which
/// a divisor of at least 1 in 64ths never is).
pub fn achievable_baud(clock_hz: u32, baud: u32) -> Result<u32, BaudError> {
    nearest_divisor(clock_hz, baud, 4, 1, DIVISOR_64THS).map(|(_, actual)| actual)
}

/// Receive errors counted on a link, from the flags each received byte carries (DR bits 8-11).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineErrors {
    /// OE: a byte arrived while the receive FIFO was full and was lost.
    pub overruns: u32,
    /// FE: no valid stop bit (wrong baud rate, noise).
    pub framing: u32,
    /// PE (no parity is used: only seen if the other end sends parity).
    pub parity: u32,
    /// BE: the line held low for longer than a character (a break, or a disconnected wire).
    pub breaks: u32,
}

impl LineErrors {
    fn count(&mut self, dr: u32) {
        let bump = |n: &mut u32, flag: u32| *n = n.wrapping_add((dr & flag != 0) as u32);
        bump(&mut self.overruns, DR_OE);
        bump(&mut self.framing, DR_FE);
        bump(&mut self.parity, DR_PE);
        bump(&mut self.breaks, DR_BE);
    }
}

/// A PL011 over its registers `R` ([`Mmio`] on a board).
#[derive(Debug)]
pub struct Pl011<R: Regs = Mmio> {
    regs: R,
    /// Bytes received before `init` (turning the FIFO on empties it): handed out first.
    early: [u8; 32],
    early_len: u8,
    early_pos: u8,
    /// Receive errors seen by [`LinkUart::read_byte`] since [`Pl011::init_link`].
    errors: LineErrors,
}

impl Pl011<Mmio> {
    /// # Safety
    /// `base` must be the address of a PL011's registers, mapped as device memory, and used by
    /// nothing else.
    pub const unsafe fn new(base: usize) -> Self {
        // SAFETY: the caller's contract; every offset the driver uses lies inside
        // PL011_BLOCK_SIZE bytes of the PL011's registers.
        let regs = unsafe { Mmio::new(base, PL011_BLOCK_SIZE) };
        Self::from_regs(regs)
    }
}

impl<R: Regs> Pl011<R> {
    /// A PL011 over `regs` (a fake in tests, or an [`Mmio`] with a barrier hook).
    pub const fn from_regs(regs: R) -> Self {
        Self {
            regs,
            early: [0; 32],
            early_len: 0,
            early_pos: 0,
            errors: LineErrors {
                overruns: 0,
                framing: 0,
                parity: 0,
                breaks: 0,
            },
        }
    }

    /// Set up 8N1 at `baud` from a UART clock of `clock_hz`, FIFOs on, interrupts masked. Bytes
    /// received before this call are kept (switching the FIFO on empties the receive side, so they
    /// are read out first and the FIFO is switched on at once).
    pub fn init(&mut self, clock_hz: u32, baud: u32) {
        while self.regs.read32(FR) & FR_RXFE == 0 && (self.early_len as usize) < self.early.len() {
            self.early[self.early_len as usize] = self.regs.read32(DR) as u8;
            self.early_len += 1;
        }
        self.regs.write32(LCRH, LCRH_8N1_FIFO);
        self.regs.write32(CR, 0);
        self.wait_not_busy();
        // Divisor = clock / (16 * baud), as 16.6 fixed point; latched by the LCR_H write after it
        // (FIFO enable unchanged, so nothing received is lost).
        let div64 = div_round(clock_hz as u64 * 4, baud as u64);
        self.regs.write32(IBRD, (div64 >> 6) as u32);
        self.regs.write32(FBRD, (div64 & 0x3f) as u32);
        self.regs.write32(LCRH, LCRH_8N1_FIFO);
        self.regs.write32(IMSC, 0);
        self.regs.write32(ICR, 0x7ff);
        self.regs.write32(CR, CR_UARTEN | CR_TXE | CR_RXE);
    }

    /// Set up a link: 8N1 at `baud` from a UART clock of `clock_hz`, FIFOs on with their
    /// watermarks at half full, interrupts masked, and RTS/CTS flow control (CR.RTSEN and
    /// CR.CTSEN) when `flow` asks for it. The sequence is the PL011 TRM's for reprogramming: UART
    /// off, wait for the character under way (boundedly), FIFOs off (which flushes the transmit
    /// side), new settings, UART on.
    ///
    /// Returns the rate the divisor makes ([`achievable_baud`]); a rate it refuses is an error and
    /// leaves the UART untouched. A link starts clean: bytes received before are dropped, the
    /// error flags cleared and the counts ([`Pl011::errors`]) restart at 0.
    pub fn init_link(&mut self, clock_hz: u32, baud: u32, flow: Flow) -> Result<u32, BaudError> {
        let (div64, actual) = nearest_divisor(clock_hz, baud, 4, 1, DIVISOR_64THS)?;
        self.regs.barrier();
        self.regs.write32(CR, 0);
        self.wait_not_busy();
        self.regs.write32(LCRH, 0);
        for _ in 0..RX_DRAIN_LIMIT {
            if self.regs.read32(FR) & FR_RXFE != 0 {
                break;
            }
            self.regs.read32(DR);
        }
        self.regs.write32(RSR_ECR, 0);
        self.regs.write32(IBRD, (div64 >> 6) as u32);
        self.regs.write32(FBRD, (div64 & 0x3f) as u32);
        self.regs.write32(LCRH, LCRH_8N1_FIFO);
        self.regs.write32(IFLS, IFLS_HALF);
        self.regs.write32(IMSC, 0);
        self.regs.write32(ICR, 0x7ff);
        let flow_bits = match flow {
            Flow::None => 0,
            Flow::RtsCts => CR_RTSEN | CR_CTSEN,
        };
        self.regs
            .write32(CR, CR_UARTEN | CR_TXE | CR_RXE | flow_bits);
        self.regs.barrier();
        self.early_len = 0;
        self.early_pos = 0;
        self.errors = LineErrors::default();
        Ok(actual)
    }

    /// Receive errors the link has seen since [`Pl011::init_link`].
    pub fn errors(&self) -> LineErrors {
        self.errors
    }

    /// Wait (at most [`TX_SPIN_LIMIT`] polls) for the character under way to finish.
    fn wait_not_busy(&mut self) {
        let mut spins = 0;
        while self.regs.read32(FR) & FR_BUSY != 0 && spins < TX_SPIN_LIMIT {
            spins += 1;
        }
    }
}

impl<R: Regs> Uart for Pl011<R> {
    fn write_byte(&mut self, b: u8) {
        let mut spins = 0;
        while self.regs.read32(FR) & FR_TXFF != 0 {
            spins += 1;
            if spins >= TX_SPIN_LIMIT {
                return;
            }
        }
        self.regs.write32(DR, b as u32);
    }

    fn read_byte(&mut self) -> Option<u8> {
        if self.early_pos < self.early_len {
            self.early_pos += 1;
            return Some(self.early[self.early_pos as usize - 1]);
        }
        if self.regs.read32(FR) & FR_RXFE != 0 {
            None
        } else {
            Some(self.regs.read32(DR) as u8)
        }
    }
}

/// The link: one FR poll per call, never a wait. A byte that arrives with an error flag is handed
/// out as received (an overrun flag means a byte next to it was lost, not this one) and counted.
impl<R: Regs> LinkUart for Pl011<R> {
    fn try_write_byte(&mut self, b: u8) -> bool {
        if self.regs.read32(FR) & FR_TXFF != 0 {
            return false;
        }
        self.regs.write32(DR, b as u32);
        true
    }

    fn read_byte(&mut self) -> Option<u8> {
        if self.regs.read32(FR) & FR_RXFE != 0 {
            return None;
        }
        let dr = self.regs.read32(DR);
        self.errors.count(dr);
        Some(dr as u8)
    }

    fn overruns(&self) -> u32 {
        self.errors.overruns
    }

    /// RXIM and RTIM: the interrupt rises when the receive FIFO reaches half full (16 of the
    /// BCM2711's 32 bytes, the watermark [`Pl011::init_link`] set), or holds fewer bytes while the
    /// line has been quiet for 32 bit periods. Both clear themselves as the FIFO is read (RX below
    /// its level, RT once empty: the PL011 TRM), so the handler never writes ICR: a clear racing a
    /// byte that has just arrived could leave it unannounced (QEMU's PL011 raises RX only as its
    /// FIFO goes from empty to one byte, and clearing it then would leave the FIFO to fill with no
    /// interrupt ever again).
    fn enable_rx_irq(&mut self) {
        self.regs.write32(IMSC, INT_RX | INT_RT);
    }
}

#[cfg(test)]
mod tests;
