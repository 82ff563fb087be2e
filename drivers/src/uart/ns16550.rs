//! NS16550A-compatible UART (QEMU riscv virt, many RISC-V boards): 8N1 with FIFOs, polled.

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
        self.regs.read8(reg * self.stride)
    }

    fn write(&mut self, reg: usize, v: u8) {
        self.regs.write8(reg * self.stride, v)
    }

    /// 8N1 at `baud` from `clock_hz`, FIFOs on, interrupts off.
    pub fn init(&mut self, clock_hz: u32, baud: u32) {
        let div = (clock_hz / (16 * baud.max(1))).clamp(1, 0xffff) as u16;
        self.write(IER_DLM, 0);
        self.write(LCR, 0x80); // DLAB
        self.write(RBR_THR_DLL, div as u8);
        self.write(IER_DLM, (div >> 8) as u8);
        self.write(LCR, 0x03); // 8N1
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
