//! ARM PL011 UART (QEMU virt, Raspberry Pi): 8N1 with FIFOs, polled.

use super::Uart;
use crate::mmio::RegisterBlock;

const DR: usize = 0x00;
const FR: usize = 0x18;
const IBRD: usize = 0x24;
const FBRD: usize = 0x28;
const LCRH: usize = 0x2c;
const CR: usize = 0x30;
const IMSC: usize = 0x38;
const ICR: usize = 0x44;

const FR_TXFF: u32 = 1 << 5;
const FR_RXFE: u32 = 1 << 4;
const FR_BUSY: u32 = 1 << 3;

/// Polls of a full transmit FIFO before a byte is dropped (a wedged or absent UART must not hang
/// the kernel): far longer than one character takes at 115200 baud.
const TX_SPIN_LIMIT: u32 = 10_000_000;

/// A PL011 at a fixed MMIO address.
#[derive(Debug)]
pub struct Pl011 {
    regs: RegisterBlock,
    /// Bytes received before `init` (turning the FIFO on empties it): handed out first.
    early: [u8; 32],
    early_len: u8,
    early_pos: u8,
}

impl Pl011 {
    /// # Safety
    /// `base` must be the address of a PL011's registers, mapped as device memory, and used by
    /// nothing else.
    pub const unsafe fn new(base: usize) -> Self {
        // SAFETY: the caller's contract; the offsets used are the PL011's register offsets.
        let regs = unsafe { RegisterBlock::new(base) };
        Self {
            regs,
            early: [0; 32],
            early_len: 0,
            early_pos: 0,
        }
    }

    /// Set up 8N1 at `baud` from a UART clock of `clock_hz`, FIFOs on, interrupts masked. Bytes
    /// received before this call are kept (switching the FIFO on empties the receive side, so they
    /// are read out first and the FIFO is switched on at once).
    pub fn init(&mut self, clock_hz: u32, baud: u32) {
        const LCRH_8N1_FIFO: u32 = (0b11 << 5) | (1 << 4);
        while self.regs.read32(FR) & FR_RXFE == 0 && (self.early_len as usize) < self.early.len() {
            self.early[self.early_len as usize] = self.regs.read32(DR) as u8;
            self.early_len += 1;
        }
        self.regs.write32(LCRH, LCRH_8N1_FIFO);
        self.regs.write32(CR, 0);
        let mut spins = 0;
        while self.regs.read32(FR) & FR_BUSY != 0 && spins < TX_SPIN_LIMIT {
            spins += 1;
        }
        // Divisor = clock / (16 * baud), as 16.6 fixed point; latched by the LCR_H write after it
        // (FIFO enable unchanged, so nothing received is lost).
        let div64 = ((clock_hz as u64) * 4 + baud as u64 / 2) / baud as u64;
        self.regs.write32(IBRD, (div64 >> 6) as u32);
        self.regs.write32(FBRD, (div64 & 0x3f) as u32);
        self.regs.write32(LCRH, LCRH_8N1_FIFO);
        self.regs.write32(IMSC, 0);
        self.regs.write32(ICR, 0x7ff);
        self.regs.write32(CR, (1 << 0) | (1 << 8) | (1 << 9)); // UARTEN | TXE | RXE
    }
}

impl Uart for Pl011 {
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
