//! NS16550A-compatible UART (QEMU riscv virt, many RISC-V boards; the DesignWare APB UART of
//! Allwinner SoCs): 8N1 with FIFOs, polled.
//!
//! Registers are bytes `stride` bytes apart; with a stride of 4 they are read and written as
//! 32-bit words (Linux's `reg-io-width = <4>` for the Allwinner UARTs: the DesignWare APB UART
//! sits on a 32-bit bus). The DesignWare UART ignores writes to LCR while it is busy sending or
//! receiving, so [`Ns16550::init`] waits for the transmitter to drain and checks that LCR took
//! each value, clearing the FIFOs and trying again a few times when it did not.

use super::Uart;
use crate::mmio::RegisterBlock;

const RBR_THR_DLL: usize = 0;
const IER_DLM: usize = 1;
const FCR: usize = 2;
const LCR: usize = 3;
const MCR: usize = 4;
const LSR: usize = 5;
const LSR_DR: u8 = 1 << 0;
const LSR_THRE: u8 = 1 << 5;
const LSR_TEMT: u8 = 1 << 6;
/// Polls of the transmitter before `init` goes on without it draining.
const DRAIN_SPIN_LIMIT: u32 = 1_000_000;
/// Tries at an LCR value a busy DesignWare UART ignored.
const LCR_TRIES: u32 = 8;
/// Polls of a busy transmitter before a byte is dropped (never hang on a wedged UART).
const TX_SPIN_LIMIT: u32 = 10_000_000;

/// An NS16550A with byte-wide registers `stride` bytes apart.
#[derive(Debug)]
pub struct Ns16550 {
    regs: RegisterBlock,
    stride: usize,
}

impl Ns16550 {
    /// # Safety
    /// `base` must be the UART's registers, mapped as device memory, used by nothing else.
    pub const unsafe fn new(base: usize, stride: usize) -> Self {
        // SAFETY: the caller's contract; the offsets are the register numbers times `stride`.
        let regs = unsafe { RegisterBlock::new(base) };
        Self { regs, stride }
    }

    fn read(&self, reg: usize) -> u8 {
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

    /// Write LCR until it reads back `v` (a busy DesignWare UART drops the write).
    fn set_lcr(&mut self, v: u8) {
        for _ in 0..LCR_TRIES {
            self.write(LCR, v);
            if self.read(LCR) == v {
                return;
            }
            self.write(FCR, 0x07); // FIFOs cleared: the UART is no longer busy with them
        }
    }

    /// 8N1 at `baud` from `clock_hz`, FIFOs on, interrupts off.
    pub fn init(&mut self, clock_hz: u32, baud: u32) {
        let div = (clock_hz / (16 * baud.max(1))).clamp(1, 0xffff) as u16;
        // What a boot loader printed last leaves first (bounded: a wedged UART is not waited on).
        let mut spins = 0;
        while self.read(LSR) & LSR_TEMT == 0 && spins < DRAIN_SPIN_LIMIT {
            spins += 1;
        }
        self.write(IER_DLM, 0);
        self.set_lcr(0x80); // DLAB
        self.write(RBR_THR_DLL, div as u8);
        self.write(IER_DLM, (div >> 8) as u8);
        self.set_lcr(0x03); // 8N1
        self.write(FCR, 0x07); // FIFOs on and cleared
        self.write(MCR, 0x03); // DTR, RTS
    }
}

impl Uart for Ns16550 {
    fn write_byte(&mut self, b: u8) {
        let mut spins = 0;
        while self.read(LSR) & LSR_THRE == 0 {
            spins += 1;
            if spins >= TX_SPIN_LIMIT {
                return;
            }
        }
        self.write(RBR_THR_DLL, b);
    }

    fn read_byte(&mut self) -> Option<u8> {
        (self.read(LSR) & LSR_DR != 0).then(|| self.read(RBR_THR_DLL))
    }
}
