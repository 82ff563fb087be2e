//! NS16550A-compatible UART (QEMU riscv virt, many RISC-V boards; the DesignWare APB UART of
//! Allwinner and Sophgo SoCs; the XScale-style UART of the SpacemiT K1): 8N1 with FIFOs, polled.
//!
//! Registers are bytes `stride` bytes apart; with a stride of 4 they are read and written as
//! 32-bit words (Linux's `reg-shift = <2>`, `reg-io-width = <4>`: the DesignWare APB UART sits on
//! a 32-bit bus, and so does the K1's). [`Ns16550::new`] maps a real one; [`Ns16550::from_regs`]
//! runs the same logic on any 32-bit register file (a fake in the tests).
//!
//! # Variants ([`Variant`])
//!
//! - **DesignWare APB UART** (`snps,dw-apb-uart`: the Milk-V Duo's UART0 at 0x0414_0000, 25 MHz;
//!   the Allwinner H3's). It ignores writes to LCR while USR.BUSY (register 31, byte offset 0x7C
//!   at a stride of 4, bit 0) says it is sending or receiving (Linux's `8250_dw.c`:
//!   `dw8250_check_lcr` writes LCR again until it reads back, `dw8250_force_idle` clears the
//!   FIFOs in between). [`Ns16550::init`] waits (boundedly) for the transmitter to drain and for
//!   USR.BUSY to clear before each LCR write, reads LCR back, and clears the FIFOs and tries
//!   again when the write did not take, at most [`LCR_TRIES`] times.
//! - **XScale** (`intel,xscale-uart`, the SpacemiT K1's UART0 at 0xD401_7000: PXA heritage).
//!   IER bit 6 is the UART Unit Enable (UUE): with it clear the unit is off, so IER is written
//!   0x40 (unit on, no interrupts) where a plain 16550 gets 0 (Linux's `8250_port.c`
//!   `UART_CAP_UUE` for `PORT_XSCALE`; barebox's PXA debug UART re-enables the unit after
//!   clearing IER for the same reason). The K1's first Linux tree gave the UART clock as
//!   14857000 Hz (`clock-frequency`, the PXA UART clock); 115200 baud is then divisor 8.
//! - **Plain**: everything else (QEMU's 16550A); an LCR write that did not take is still
//!   retried, which costs nothing on a UART that takes it at once.

use super::{div_round, Uart};
use crate::mmio::{RegisterBlock, Regs};

/// Receive buffer (read) / transmit holding (write); with LCR.DLAB, the divisor's low byte.
const RBR_THR_DLL: usize = 0;
/// Interrupt enable; with LCR.DLAB, the divisor's high byte.
const IER_DLM: usize = 1;
/// FIFO control (write only).
const FCR: usize = 2;
/// Line control.
const LCR: usize = 3;
/// Modem control.
const MCR: usize = 4;
/// Line status.
const LSR: usize = 5;
/// DesignWare: UART status register (register 31).
const USR: usize = 31;
/// LSR: a received byte waits.
const LSR_DR: u8 = 1 << 0;
/// LSR: the transmit holding register (or FIFO) is empty.
const LSR_THRE: u8 = 1 << 5;
/// LSR: the transmitter is empty, the last bit sent.
const LSR_TEMT: u8 = 1 << 6;
/// DesignWare USR.BUSY: a character is being sent or received; LCR writes are ignored.
const USR_BUSY: u8 = 1 << 0;
/// XScale IER bit 6: UART Unit Enable.
pub const IER_UUE: u8 = 1 << 6;
/// FCR: FIFOs on, both cleared.
const FCR_FIFO_CLEAR: u8 = 0x07;
/// LCR: divisor latch access (DLL and DLM in place of the data and IER registers).
const LCR_DLAB: u8 = 0x80;
/// LCR: 8 data bits, no parity, 1 stop bit.
const LCR_8N1: u8 = 0x03;
/// MCR: DTR and RTS asserted.
const MCR_DTR_RTS: u8 = 0x03;

/// Polls of the transmitter before `init` goes on without it draining.
const DRAIN_SPIN_LIMIT: u32 = 1_000_000;
/// Polls of USR.BUSY before an LCR write is tried anyway.
const BUSY_SPIN_LIMIT: u32 = 100_000;
/// Tries at an LCR value a busy DesignWare UART ignored.
pub const LCR_TRIES: u32 = 8;
/// Polls of a busy transmitter before a byte is dropped (never hang on a wedged UART).
const TX_SPIN_LIMIT: u32 = 10_000_000;

/// Which kind of 16550 (module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Variant {
    #[default]
    Plain,
    /// The DesignWare APB UART: USR.BUSY blocks LCR writes.
    DwApb,
    /// The XScale / PXA UART: IER's unit enable must stay set.
    Xscale,
}

/// Byte registers by number, as the driver needs them.
pub trait ByteRegs {
    fn read(&mut self, reg: usize) -> u8;
    fn write(&mut self, reg: usize, v: u8);
}

/// The real registers: bytes `stride` bytes apart, as 32-bit words at a stride of 4.
#[derive(Debug)]
pub struct Raw {
    regs: RegisterBlock,
    stride: usize,
}

impl ByteRegs for Raw {
    fn read(&mut self, reg: usize) -> u8 {
        if self.stride == 4 {
            self.regs.read32(reg * 4) as u8
        } else {
            self.regs.read8(reg * self.stride)
        }
    }

    fn write(&mut self, reg: usize, v: u8) {
        if self.stride == 4 {
            self.regs.write32(reg * 4, v as u32)
        } else {
            self.regs.write8(reg * self.stride, v)
        }
    }
}

/// Any 32-bit register file as registers 4 bytes apart (a stride of 4).
#[derive(Debug)]
pub struct Words<R: Regs>(pub R);

impl<R: Regs> ByteRegs for Words<R> {
    fn read(&mut self, reg: usize) -> u8 {
        self.0.read32(reg * 4) as u8
    }

    fn write(&mut self, reg: usize, v: u8) {
        self.0.write32(reg * 4, v as u32)
    }
}

/// An NS16550A over its registers `R`.
#[derive(Debug)]
pub struct Ns16550<R: ByteRegs = Raw> {
    regs: R,
    variant: Variant,
}

impl Ns16550<Raw> {
    /// # Safety
    /// `base` must be the UART's registers, mapped as device memory, used by nothing else.
    pub const unsafe fn new(base: usize, stride: usize) -> Self {
        // SAFETY: the caller's contract; the offsets are the register numbers times `stride`.
        let regs = unsafe { RegisterBlock::new(base) };
        Self {
            regs: Raw { regs, stride },
            variant: Variant::Plain,
        }
    }
}

impl<R: Regs> Ns16550<Words<R>> {
    /// A UART over any 32-bit register file, registers 4 bytes apart.
    pub const fn from_regs(regs: R, variant: Variant) -> Self {
        Self {
            regs: Words(regs),
            variant,
        }
    }

    pub fn regs(&self) -> &R {
        &self.regs.0
    }
}

impl<R: ByteRegs> Ns16550<R> {
    /// The same UART handled as `variant`.
    pub fn with_variant(self, variant: Variant) -> Self {
        Self { variant, ..self }
    }

    /// Wait (boundedly) while `reg & mask` is `set`; whether it cleared.
    fn wait_while(&mut self, reg: usize, mask: u8, set: bool, limit: u32) -> bool {
        for _ in 0..limit {
            if (self.regs.read(reg) & mask != 0) != set {
                return true;
            }
        }
        false
    }

    /// Write LCR until it reads back `v` (a busy DesignWare UART drops the write); on the
    /// DesignWare UART wait for USR.BUSY to clear before each try. Whether it took.
    fn set_lcr(&mut self, v: u8) -> bool {
        for _ in 0..LCR_TRIES {
            if self.variant == Variant::DwApb {
                self.wait_while(USR, USR_BUSY, true, BUSY_SPIN_LIMIT);
            }
            self.regs.write(LCR, v);
            if self.regs.read(LCR) == v {
                return true;
            }
            // FIFOs cleared: the UART is no longer busy with them.
            self.regs.write(FCR, FCR_FIFO_CLEAR);
        }
        false
    }

    /// IER with interrupts off: 0, and the unit enable on an XScale UART.
    fn ier_off(&self) -> u8 {
        if self.variant == Variant::Xscale {
            IER_UUE
        } else {
            0
        }
    }

    /// 8N1 at `baud` from `clock_hz`, FIFOs on, interrupts off; `clock_hz` 0 keeps the divisor
    /// the boot loader programmed (for a UART whose clock the board file cannot be sure of: the
    /// K1's may come from 14.7456, 48 or 57.6 MHz). Whether every LCR write took (a DesignWare
    /// UART that stayed busy throughout may not have): the console goes on either way, at
    /// whatever the boot loader had set.
    pub fn init(&mut self, clock_hz: u32, baud: u32) -> bool {
        // What a boot loader printed last leaves first (bounded: a wedged UART is not waited on).
        self.wait_while(LSR, LSR_TEMT, false, DRAIN_SPIN_LIMIT);
        let ier = self.ier_off();
        self.regs.write(IER_DLM, ier);
        let dlab = clock_hz == 0 || self.set_divisor(clock_hz, baud);
        let line = self.set_lcr(LCR_8N1);
        self.regs.write(FCR, FCR_FIFO_CLEAR); // FIFOs on and cleared
        self.regs.write(MCR, MCR_DTR_RTS);
        dlab && line
    }

    /// DLL/DLM for `baud` from `clock_hz`, through the divisor latch; whether DLAB took.
    fn set_divisor(&mut self, clock_hz: u32, baud: u32) -> bool {
        // Rounded to the nearest, as U-Boot's `ns16550_calc_divisor` does: 25 MHz gives 14
        // (111607 baud, 3.1% slow) where truncating would give 13 (120192 baud, 4.3% fast).
        let div = div_round(clock_hz as u64, 16 * baud.max(1) as u64).clamp(1, 0xffff) as u16;
        let dlab = self.set_lcr(LCR_DLAB);
        self.regs.write(RBR_THR_DLL, div as u8);
        self.regs.write(IER_DLM, (div >> 8) as u8);
        dlab
    }
}

impl<R: ByteRegs> Uart for Ns16550<R> {
    fn write_byte(&mut self, b: u8) {
        if self.wait_while(LSR, LSR_THRE, false, TX_SPIN_LIMIT) {
            self.regs.write(RBR_THR_DLL, b);
        }
    }

    fn read_byte(&mut self) -> Option<u8> {
        (self.regs.read(LSR) & LSR_DR != 0).then(|| self.regs.read(RBR_THR_DLL))
    }
}

#[cfg(test)]
mod tests;
