//! The VideoCore mailbox property interface (channel 8): ask the firmware for the ARM's memory and
//! clock rates. Polled, every wait bounded.

use core::ptr::read_volatile;

use crate::mmio::RegisterBlock;

const READ: usize = 0x00;
const STATUS: usize = 0x18;
const WRITE: usize = 0x20;
const FULL: u32 = 1 << 31;
const EMPTY: u32 = 1 << 30;
const CHANNEL: u32 = 8;
/// Polls before giving up on the firmware.
const SPIN_LIMIT: u32 = 10_000_000;

/// Why a mailbox call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MailboxError {
    /// The mailbox stayed full (sending) or empty (receiving).
    Timeout { tag: u32 },
    /// The firmware answered without success (response code).
    Failed { tag: u32, code: u32 },
}

impl core::fmt::Display for MailboxError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MailboxError::Timeout { tag } => {
                write!(f, "mailbox tag {tag:#x}: no answer from the firmware")
            }
            MailboxError::Failed { tag, code } => {
                write!(f, "mailbox tag {tag:#x}: firmware answered {code:#x}")
            }
        }
    }
}

/// A 16-byte aligned property buffer.
#[repr(C, align(16))]
struct Buffer([u32; 36]);

/// Cache maintenance hook: the buffer must reach memory before the firmware reads it, and stale
/// lines must be dropped before the CPU reads the answer. The kernel passes its architecture's
/// clean-and-invalidate for a range.
pub type CacheFlush = fn(addr: usize, len: usize);

/// The mailbox at `base`.
#[derive(Debug)]
pub struct Mailbox {
    regs: RegisterBlock,
    flush: CacheFlush,
}

impl Mailbox {
    /// # Safety
    /// `base` must be the VideoCore mailbox 0 registers, mapped as device memory, used by nothing else.
    pub const unsafe fn new(base: usize, flush: CacheFlush) -> Self {
        // SAFETY: the caller's contract; the offsets used are the mailbox's register offsets.
        let regs = unsafe { RegisterBlock::new(base) };
        Self { regs, flush }
    }

    /// One property call with a single tag: `tag`, request words `req`, answer of `resp_words`.
    fn call(&mut self, tag: u32, req: &[u32], resp_words: usize) -> Result<[u32; 4], MailboxError> {
        let mut b = Buffer([0; 36]);
        let value_words = req.len().max(resp_words);
        let total = 5 + value_words + 1;
        b.0[0] = (total * 4) as u32;
        b.0[1] = 0; // request
        b.0[2] = tag;
        b.0[3] = (value_words * 4) as u32;
        b.0[4] = 0;
        b.0[5..5 + req.len()].copy_from_slice(req);
        b.0[5 + value_words] = 0; // end tag
        let addr = b.0.as_ptr() as usize;
        (self.flush)(addr, total * 4);
        let mut spins = 0;
        while self.regs.read32(STATUS) & FULL != 0 {
            spins += 1;
            if spins > SPIN_LIMIT {
                return Err(MailboxError::Timeout { tag });
            }
        }
        // The buffer is 16-byte aligned and below 4 GiB (kernel RAM).
        self.regs.write32(WRITE, (addr as u32 & !0xf) | CHANNEL);
        loop {
            spins = 0;
            while self.regs.read32(STATUS) & EMPTY != 0 {
                spins += 1;
                if spins > SPIN_LIMIT {
                    return Err(MailboxError::Timeout { tag });
                }
            }
            let v = self.regs.read32(READ);
            if v & 0xf == CHANNEL {
                break;
            }
        }
        (self.flush)(addr, total * 4);
        // SAFETY: the firmware wrote the buffer; volatile reads see it after the flush.
        let words: [u32; 36] = unsafe { read_volatile(&b.0) };
        if words[1] != 0x8000_0000 || words[4] & 0x8000_0000 == 0 {
            return Err(MailboxError::Failed {
                tag,
                code: words[1],
            });
        }
        let mut out = [0u32; 4];
        out[..resp_words.min(4)].copy_from_slice(&words[5..5 + resp_words.min(4)]);
        Ok(out)
    }

    /// (base, size) of the ARM's memory.
    pub fn arm_memory(&mut self) -> Result<(u32, u32), MailboxError> {
        let r = self.call(0x0001_0005, &[], 2)?;
        Ok((r[0], r[1]))
    }

    /// The rate of clock `id` in Hz (1 = EMMC, 12 = EMMC2 on the BCM2711).
    pub fn clock_rate(&mut self, id: u32) -> Result<u32, MailboxError> {
        let r = self.call(0x0003_0002, &[id, 0], 2)?;
        Ok(r[1])
    }

    /// The board revision code.
    pub fn board_revision(&mut self) -> Result<u32, MailboxError> {
        Ok(self.call(0x0001_0002, &[], 1)?[0])
    }
}
