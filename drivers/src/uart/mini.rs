//! The BCM2835-family AUX "mini UART" (UART1: BCM2837 on the Pi 3 / Zero 2 W, also in the
//! BCM2711) as a link between boards ([`LinkUart`]): 8N1, writes that never wait, receive
//! overruns counted, optional RTS/CTS auto flow control, read polled or by its receive interrupt
//! ([`LinkUart::enable_rx_irq`]).
//!
//! # Registers
//!
//! From the BCM2835 ARM Peripherals guide, section 2 (the BCM2837's is the same), with its
//! published errata. The AUX block (bus address 0x7e21_5000: ARM 0x3f21_5000 on the BCM2837,
//! 0xfe21_5000 on a BCM2711 in low-peripheral mode) holds AUX_IRQ (0x00) and AUX_ENABLES (0x04:
//! bit 0 the mini UART, bits 1 and 2 SPI1 and SPI2, left as they are), then the mini UART's
//! registers from [`MINI_UART_OFFSET`] (0x40: Linux's device tree has the UART at
//! `serial@7e215040`, 0x40 bytes, and the AUX enables at `aux@7e215000`), then SPI1 (0x80) and
//! SPI2 (0xc0), which this driver never touches. The driver's [`Regs`] are the AUX block's first
//! [`AUX_BLOCK_SIZE`] bytes; [`MiniUart::new`] takes the mini UART's own address (the board file's
//! `[ring_uart] base`) and reaches AUX_ENABLES 0x3c below it.
//!
//! | offset | register | as used here |
//! |---|---|---|
//! | 0x40 | AUX_MU_IO | data |
//! | 0x44 | AUX_MU_IER | 0: no interrupts; with the link's interrupt, 0b1101: bit 0 receive (the errata: bits 0 and 1 are swapped in the guide), bits 3:2 set (the errata: needed for any interrupt) |
//! | 0x48 | AUX_MU_IIR | write 0b110: clear both FIFOs (8 bytes each) |
//! | 0x4c | AUX_MU_LCR | 3: 8 data bits (the guide says bit 0; the errata: bits 0 and 1) |
//! | 0x50 | AUX_MU_MCR | 0 (RTS is the auto flow control's, or unused) |
//! | 0x54 | AUX_MU_LSR | bit 0 data ready, bit 1 receiver overrun (cleared by every read of LSR), bit 5 room in the transmit FIFO |
//! | 0x60 | AUX_MU_CNTL | bit 0 receiver on, 1 transmitter on, 2 RTS auto flow, 3 CTS auto flow; bits 5:4 = 00: RTS drops with 3 places left in the receive FIFO; bits 6 and 7 invert the RTS and CTS polarity (left 0, the usual active-low lines, as Linux's 8250_bcm2835aux names them) |
//! | 0x68 | AUX_MU_BAUD | 16 bits: baud = clock / (8 * (reg + 1)) |
//!
//! The mini UART checks no stop bit and has no parity, break or framing flags: the overrun count
//! is all it can tell of a lossy line.
//!
//! # Its clock
//!
//! The mini UART runs from the VPU core clock (Linux: the AUX block's clock is
//! `BCM2835_CLOCK_VPU`), which the firmware raises and lowers with load unless config.txt fixes
//! it: `core_freq=250` (`enable_uart=1` is documented to fix it to 250 MHz on boards whose primary
//! UART is the mini UART, but some firmware releases did not, so a ring sets `core_freq=250`
//! explicitly). The rate to divide is the one in force when [`MiniUart::init_link`] runs:
//! [`crate::bcm2835::mailbox::Mailbox::core_clock`] reads it; a rate that changes afterwards
//! changes the baud rate with it.

use super::{nearest_divisor, BaudError, Flow, LinkUart};
use crate::mmio::{Mmio, Regs};

/// Where the mini UART's registers start inside the AUX block.
pub const MINI_UART_OFFSET: usize = 0x40;
/// Bytes of the AUX block the driver's [`Regs`] cover: AUX_IRQ, AUX_ENABLES and the mini UART,
/// not SPI1 and SPI2 (the `size` for [`Mmio::new`]).
pub const AUX_BLOCK_SIZE: usize = 0x80;

/// AUX_ENABLES: bit 0 the mini UART, bits 1 and 2 SPI1 and SPI2.
const AUX_ENABLES: usize = 0x04;
/// AUX_MU_IO: data.
pub(super) const MU_IO: usize = 0x40;
/// AUX_MU_IER: interrupt enables.
pub(super) const MU_IER: usize = 0x44;
/// AUX_MU_IIR: interrupt identify; writes clear the FIFOs.
const MU_IIR: usize = 0x48;
/// AUX_MU_LCR: line control.
const MU_LCR: usize = 0x4c;
/// AUX_MU_MCR: modem control.
const MU_MCR: usize = 0x50;
/// AUX_MU_LSR: line status.
pub(super) const MU_LSR: usize = 0x54;
/// AUX_MU_CNTL: extra control (receiver, transmitter, auto flow control).
const MU_CNTL: usize = 0x60;
/// AUX_MU_BAUD: the baud rate register.
const MU_BAUD: usize = 0x68;

/// AUX_ENABLES: the mini UART on.
const ENABLE_MINI_UART: u32 = 1 << 0;
/// The receive interrupt (bit 0, per the guide's errata) with bits 3:2, which the errata says
/// must be set for the UART to interrupt at all (Linux's 8250_bcm2835aux and Circle set them too).
const IER_RX: u32 = 0b1101;
/// IIR write: clear both FIFOs.
const IIR_CLEAR_FIFOS: u32 = 0b110;
/// LCR: 8 data bits (bits 0 and 1, per the errata).
const LCR_8BIT: u32 = 0b11;
/// LSR: a byte waits in the receive FIFO.
pub(super) const LSR_DATA_READY: u32 = 1 << 0;
/// LSR: a byte was lost to a full receive FIFO (cleared by every read of LSR).
pub(super) const LSR_RX_OVERRUN: u32 = 1 << 1;
/// LSR: room in the transmit FIFO.
pub(super) const LSR_TX_ROOM: u32 = 1 << 5;
/// CNTL: receiver on.
const CNTL_RX: u32 = 1 << 0;
/// CNTL: transmitter on.
const CNTL_TX: u32 = 1 << 1;
/// CNTL: RTS auto flow control.
const CNTL_AUTO_RTS: u32 = 1 << 2;
/// CNTL: CTS auto flow control.
const CNTL_AUTO_CTS: u32 = 1 << 3;

/// `reg + 1` of the baud register: 1 to 0x10000.
const DIVISOR: core::ops::RangeInclusive<u64> = 1..=0x1_0000;

/// The baud rate the mini UART makes for `baud` from a core clock of `clock_hz`: the register
/// value nearest clock / (8 * baud) - 1, and the rate clock / (8 * (reg + 1)) it gives. Refused
/// outside the 16-bit register (at most clock / 8) or more than
/// [`super::MAX_BAUD_ERROR_PER_MILLE`] off: from 250 MHz, 115200 and 921600 baud are within
/// 0.3%, 3 Mbaud is 4% off.
pub fn achievable_baud(clock_hz: u32, baud: u32) -> Result<u32, BaudError> {
    nearest_divisor(clock_hz, baud, 1, 8, DIVISOR).map(|(_, actual)| actual)
}

/// The mini UART over the AUX block's registers `R` ([`Mmio`] on a board).
#[derive(Debug)]
pub struct MiniUart<R: Regs = Mmio> {
    regs: R,
    overruns: u32,
}

impl MiniUart<Mmio> {
    /// The mini UART whose registers are at `base` (the AUX block + [`MINI_UART_OFFSET`]).
    ///
    /// # Safety
    /// `base` must be a mini UART's registers, [`MINI_UART_OFFSET`] into its AUX block, mapped as
    /// device memory with the block's start; nothing else may use the mini UART, and nothing may
    /// write AUX_ENABLES while [`MiniUart::init_link`] runs (it is shared with SPI1 and SPI2, and
    /// updated by read-modify-write).
    pub const unsafe fn new(base: usize) -> Self {
        // SAFETY: the caller's contract: the AUX block starts MINI_UART_OFFSET below `base`, and
        // every offset the driver uses lies inside its first AUX_BLOCK_SIZE bytes.
        let regs = unsafe { Mmio::new(base - MINI_UART_OFFSET, AUX_BLOCK_SIZE) };
        Self::from_regs(regs)
    }
}

impl<R: Regs> MiniUart<R> {
    /// The mini UART over `aux`, the AUX block's registers (offsets from the block's start).
    pub const fn from_regs(aux: R) -> Self {
        Self {
            regs: aux,
            overruns: 0,
        }
    }

    /// Set up a link: the mini UART on in AUX_ENABLES, then with transmitter and receiver off:
    /// interrupts off, 8 data bits, both FIFOs cleared, the baud register for `baud` from a core
    /// clock of `clock_hz`; then transmitter and receiver on, with RTS/CTS auto flow control when
    /// `flow` asks for it.
    ///
    /// Returns the rate the register makes ([`achievable_baud`]); a rate it refuses is an error
    /// and leaves the UART untouched. A link starts clean: a stale overrun flag is cleared and
    /// the count restarts at 0.
    pub fn init_link(&mut self, clock_hz: u32, baud: u32, flow: Flow) -> Result<u32, BaudError> {
        let (divisor, actual) = nearest_divisor(clock_hz, baud, 1, 8, DIVISOR)?;
        self.regs.barrier();
        let enables = self.regs.read32(AUX_ENABLES);
        self.regs.write32(AUX_ENABLES, enables | ENABLE_MINI_UART);
        self.regs.write32(MU_CNTL, 0);
        self.regs.write32(MU_IER, 0);
        self.regs.write32(MU_LCR, LCR_8BIT);
        self.regs.write32(MU_MCR, 0);
        self.regs.write32(MU_IIR, IIR_CLEAR_FIFOS);
        self.regs.write32(MU_BAUD, (divisor - 1) as u32);
        self.regs.read32(MU_LSR);
        let flow_bits = match flow {
            Flow::None => 0,
            Flow::RtsCts => CNTL_AUTO_RTS | CNTL_AUTO_CTS,
        };
        self.regs.write32(MU_CNTL, CNTL_RX | CNTL_TX | flow_bits);
        self.regs.barrier();
        self.overruns = 0;
        Ok(actual)
    }

    /// LSR, counting the overrun it reports: the read clears the flag, so every read of LSR
    /// goes through here.
    fn lsr(&mut self) -> u32 {
        let lsr = self.regs.read32(MU_LSR);
        if lsr & LSR_RX_OVERRUN != 0 {
            self.overruns = self.overruns.wrapping_add(1);
        }
        lsr
    }
}

/// The link: one LSR read per call, never a wait.
impl<R: Regs> LinkUart for MiniUart<R> {
    fn try_write_byte(&mut self, b: u8) -> bool {
        if self.lsr() & LSR_TX_ROOM == 0 {
            return false;
        }
        self.regs.write32(MU_IO, b as u32);
        true
    }

    fn read_byte(&mut self) -> Option<u8> {
        if self.lsr() & LSR_DATA_READY == 0 {
            return None;
        }
        Some(self.regs.read32(MU_IO) as u8)
    }

    /// Overruns: each read of LSR that found its overrun flag set (one or more bytes lost since
    /// the read before).
    fn overruns(&self) -> u32 {
        self.overruns
    }

    /// The receive interrupt: raised while the 8-byte receive FIFO holds anything (the mini UART
    /// has no level and no timeout), and so cleared by reading it empty.
    fn enable_rx_irq(&mut self) {
        self.regs.write32(MU_IER, IER_RX);
    }
}

#[cfg(test)]
mod tests;
