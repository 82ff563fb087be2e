//! The VideoCore mailbox property interface (channel 8): the ARM's memory, clock rates (the SD host's
//! base clock, the ARM clock), temperatures and throttling, the SD card's power and the
//! firmware-owned GPIOs. Polled, every wait bounded.
//!
//! # The exchange ([`Mailbox`])
//!
//! A call writes a one-tag request into the [`PropertyBuffer`] ([`property::encode`]), cleans the
//! buffer's cache lines to memory, waits for room in the write mailbox (MAIL1_STA at 0x38 not
//! FULL: the status of the mailbox written, as Linux's bcm2835-mailbox.c checks, not MAIL0's at
//! 0x18), writes the buffer's address with the channel to MAIL1_WRT (0x20), polls MAIL0_STA (0x18)
//! until not EMPTY and reads MAIL0_RD (0x00) until the answer for this buffer comes back, then
//! invalidates the buffer's lines (no clean: the firmware's answer is in memory, and a write-back
//! would overwrite it) and decodes the answer ([`property::decode`]).
//!
//! The buffer is [`PropertyBuffer`]: 64-byte aligned and two whole 64-byte cache lines, so the
//! maintenance touches nothing else, and it sits outside any stack frame. It must not be written
//! by the CPU between the clean and the invalidate; the invalidate drops what a speculative read
//! may have brought into the cache meanwhile.
//!
//! Register access goes through [`Regs`] (a fake firmware in the tests) and the cache maintenance
//! through [`CacheOps`] (the kernel's architecture operations): drivers hold no `asm!`.

mod clock;
mod property;

pub use clock::{
    decide, ArmClock, ArmClockPolicy, ClockDecision, ClockSource, Throttled, ARM_CLOCK_ID,
    CORE_CLOCK_ID, DEFAULT_SD_BASE_CLOCK_HZ, SD_POWER_DEVICE, THERMAL_MARGIN_MC,
};
pub use property::{
    decode, encode, tag_name, tags, MailboxError, Waiting, BUFFER_BYTES, BUFFER_WORDS,
    CODE_SUCCESS, MAX_ANSWER_WORDS,
};

use core::cell::UnsafeCell;
use core::ptr::{read_volatile, write_volatile};

use crate::mmio::{Mmio, Regs};

/// Size of the mailbox register block (MAIL0 at 0x00, MAIL1 at 0x20): the `size` for
/// [`Mmio::new`].
pub const MAILBOX_BLOCK_SIZE: usize = 0x40;
const MAIL0_READ: usize = 0x00;
const MAIL0_STATUS: usize = 0x18;
const MAIL1_WRITE: usize = 0x20;
const MAIL1_STATUS: usize = 0x38;
const FULL: u32 = 1 << 31;
const EMPTY: u32 = 1 << 30;
/// The property channel (ARM to VideoCore).
pub const CHANNEL: u32 = 8;
/// Default polls of a status register before giving up on the firmware.
pub const SPIN_LIMIT: u32 = 10_000_000;

/// The buffer the firmware reads the request from and writes the answer to: whole 64-byte cache
/// lines, 64-byte aligned, accessed by volatile copies only.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct PropertyBuffer(UnsafeCell<[u32; BUFFER_WORDS]>);

const _: () = assert!(core::mem::size_of::<PropertyBuffer>() == BUFFER_BYTES);
const _: () = assert!(BUFFER_BYTES.is_multiple_of(64));

// SAFETY: the buffer is only read and written by the `Mailbox` that holds it, inside a call, and
// `Mailbox::new`'s contract gives one mailbox at a time a buffer; a static of this type is
// therefore never accessed from two cores at once.
unsafe impl Sync for PropertyBuffer {}

impl PropertyBuffer {
    pub const fn new() -> PropertyBuffer {
        PropertyBuffer(UnsafeCell::new([0; BUFFER_WORDS]))
    }

    /// Its address (the firmware is given its low 32 bits).
    pub fn addr(&self) -> usize {
        self.0.get() as usize
    }

    fn store(&self, words: &[u32; BUFFER_WORDS]) {
        // SAFETY: the cell's memory, written only here and by the firmware, which does not touch
        // it outside a call; volatile so the stores are not dropped or moved past the clean.
        unsafe { write_volatile(self.0.get(), *words) }
    }

    fn load(&self) -> [u32; BUFFER_WORDS] {
        // SAFETY: as in `store`; volatile so the firmware's answer is read from memory after the
        // invalidate, not from an earlier load.
        unsafe { read_volatile(self.0.get()) }
    }
}

impl Default for PropertyBuffer {
    fn default() -> Self {
        PropertyBuffer::new()
    }
}

/// Data cache maintenance by address range, from the kernel's architecture code.
#[derive(Debug, Clone, Copy)]
pub struct CacheOps {
    /// Write the range's dirty lines back to memory (aarch64 `dc cvac`), before the firmware reads.
    pub clean: fn(addr: usize, len: usize),
    /// Drop the range's lines without writing them back (aarch64 `dc ivac`), before the CPU reads
    /// the firmware's answer.
    ///
    /// # Safety
    /// The range must be whole cache lines that nothing else uses: dirty data in them is lost.
    pub invalidate: unsafe fn(addr: usize, len: usize),
}

/// The mailbox, over its registers `R` ([`Mmio`] on a board).
#[derive(Debug)]
pub struct Mailbox<R: Regs = Mmio> {
    regs: R,
    buffer: &'static PropertyBuffer,
    cache: CacheOps,
    spin_limit: u32,
}

impl<R: Regs> Mailbox<R> {
    /// # Safety
    /// `regs` must be the VideoCore mailbox registers (MAIL0 at 0x00, MAIL1 at 0x20), used by
    /// nothing else during a call. `buffer` must be RAM the VideoCore reaches at the low 32 bits of
    /// its address, used by no other mailbox while this one is in a call. `cache` must be the
    /// architecture's range operations for that RAM.
    pub const unsafe fn new(regs: R, buffer: &'static PropertyBuffer, cache: CacheOps) -> Self {
        Self {
            regs,
            buffer,
            cache,
            spin_limit: SPIN_LIMIT,
        }
    }

    /// Give up on a status register after `polls` polls (at least 1) instead of [`SPIN_LIMIT`].
    pub fn with_spin_limit(mut self, polls: u32) -> Self {
        self.spin_limit = polls.max(1);
        self
    }

    pub fn regs_mut(&mut self) -> &mut R {
        &mut self.regs
    }

    /// One property call with a single tag: request words `req`, answer of `answer_words` words.
    fn call(
        &mut self,
        tag: u32,
        req: &[u32],
        answer_words: usize,
    ) -> Result<[u32; MAX_ANSWER_WORDS], MailboxError> {
        let mut words = [0u32; BUFFER_WORDS];
        encode(&mut words, tag, req, answer_words)?;
        self.buffer.store(&words);
        self.exchange(tag)?;
        decode(&self.buffer.load(), tag, answer_words)
    }

    /// Hand the buffer to the firmware and wait for it to come back, with the cache maintenance
    /// around it and a barrier before the first and after the last register access.
    fn exchange(&mut self, tag: u32) -> Result<(), MailboxError> {
        let addr = self.buffer.addr();
        (self.cache.clean)(addr, BUFFER_BYTES);
        // The buffer is 64-byte aligned: the low four bits are free for the channel.
        let sent = (addr as u32 & !0xF) | CHANNEL;
        self.regs.barrier();
        let r = self.post_and_wait(tag, sent);
        self.regs.barrier();
        // SAFETY: the buffer is 64-byte aligned and whole 64-byte lines (checked at compile time),
        // used only by this mailbox during the call; nothing in it is dirty (cleaned above, not
        // written since), so only stale copies are dropped.
        unsafe { (self.cache.invalidate)(addr, BUFFER_BYTES) };
        r
    }

    /// Wait for room in MAIL1, write `sent`, wait for it to come back in MAIL0 (messages of other
    /// channels are passed over). Every wait at most `spin_limit` polls.
    fn post_and_wait(&mut self, tag: u32, sent: u32) -> Result<(), MailboxError> {
        let mut polls = 0u32;
        while self.regs.read32(MAIL1_STATUS) & FULL != 0 {
            polls += 1;
            if polls >= self.spin_limit {
                let waiting = Waiting::WriteRoom;
                return Err(MailboxError::Timeout { tag, waiting });
            }
        }
        self.regs.write32(MAIL1_WRITE, sent);
        let mut polls = 0u32;
        loop {
            if self.regs.read32(MAIL0_STATUS) & EMPTY == 0 {
                let got = self.regs.read32(MAIL0_READ);
                if got == sent {
                    return Ok(());
                }
                if got & 0xF == CHANNEL {
                    return Err(MailboxError::WrongAnswer { tag, sent, got });
                }
            }
            polls += 1;
            if polls >= self.spin_limit {
                let waiting = Waiting::Answer;
                return Err(MailboxError::Timeout { tag, waiting });
            }
        }
    }

    /// (base, size) of the ARM's memory.
    pub fn arm_memory(&mut self) -> Result<(u32, u32), MailboxError> {
        let r = self.call(tags::GET_ARM_MEMORY, &[], 2)?;
        Ok((r[0], r[1]))
    }

    /// The system DMA channels the firmware leaves to the ARM (GET_DMA_CHANNELS): bit n =
    /// channel n (see [`crate::bcm2835::dma::pick_channel`]).
    pub fn dma_channels(&mut self) -> Result<u32, MailboxError> {
        Ok(self.call(tags::GET_DMA_CHANNELS, &[0], 1)?[0])
    }

    /// The board revision code.
    pub fn board_revision(&mut self) -> Result<u32, MailboxError> {
        Ok(self.call(tags::GET_BOARD_REVISION, &[], 1)?[0])
    }
}

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
