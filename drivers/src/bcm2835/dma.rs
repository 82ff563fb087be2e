//! The BCM2835-family system DMA controller ("DMA engine", 0x7E00_7000 on the bus: ARM
//! 0x3F00_7000 on the BCM2836/7), for peripherals without a DMA engine of their own: the
//! sdhost card controller ([`crate::sdhost`], DREQ [`DREQ_SDHOST`]) and the Arasan "EMMC"
//! ([`DREQ_EMMC`]). Polled: the channel's interrupt is left off and CS is read.
//!
//! What it does, in the order a transfer does it (the facts from the BCM2835 peripherals guide,
//! chapter 4, and Linux's `bcm2835-dma.c`):
//!
//! - A channel is chosen from the firmware's mask (mailbox GET_DMA_CHANNELS, tag 0x0006_0001:
//!   bit n = channel n is free for the ARM): the highest normal channel (0-6) in the mask
//!   ([`pick_channel`]); without the tag, [`FALLBACK_CHANNEL`] (5: a normal channel in every
//!   firmware's map), and the caller says so.
//! - A control block ([`ControlBlock`]: 8 words, 32-byte aligned) lies in the driver's own DMA
//!   memory; its address and every address in it are bus addresses (on the BCM2836/7 RAM's is the
//!   ARM physical address | 0xC000_0000, the uncached alias, as the platform's
//!   [`crate::dma::DmaMemory::bus_address`] gives it).
//! - [`DmaChannel::start`] refuses a control block that is not 32-byte aligned or lies outside the
//!   range the caller says it owns ([`DmaError::ControlBlockOutside`]): the engine never fetches a
//!   control block from memory nobody set up. It then resets the channel (CS.RESET), clears the
//!   error bits DEBUG has set (write 1 to clear: only the bits read set are written, since QEMU's
//!   model keeps a written DEBUG as it is and would read the ones back as errors), sets the
//!   global enable bit of the channel, writes CONBLK_AD and sets
//!   CS.ACTIVE with WAIT_FOR_OUTSTANDING_WRITES (the END comes only once the last write is in
//!   memory).
//! - [`DmaChannel::status`] never waits: `None` while ACTIVE, else the end or the error with
//!   CS and DEBUG named ([`DmaError::Engine`]).
//!
//! A peripheral-paced read ([`ControlBlock::from_peripheral`]): TI = WAIT_RESP | PERMAP(dreq) |
//! SRC_DREQ | DEST_INC, the source the peripheral's data register (not incremented). The engine
//! then moves a word only while the peripheral raises its DREQ line.
//!
//! No crate is used: the `bcm2835-*` HAL crates target the Pi's Linux userland or the Pico's
//! RP2040 (whose DMA is another design); the register set is small.

use crate::mmio::Regs;
use core::fmt;

/// Size of the DMA controller's register block (channels 0-14 at n x 0x100, the global enable at
/// 0xFF0): the `size` for [`crate::mmio::Mmio::new`].
pub const DMA_BLOCK_SIZE: usize = 0x1000;
/// The sdhost controller's DREQ (peripheral number in TI.PERMAP).
pub const DREQ_SDHOST: u32 = 13;
/// The Arasan "EMMC" controller's DREQ.
pub const DREQ_EMMC: u32 = 11;
/// The channel used when the firmware does not give its mask: normal in every firmware's map
/// (2, 4 and 5 are; Linux's device tree masks 0x7f35 on the Pi 3 and QEMU's 0x3c both hold 5).
pub const FALLBACK_CHANNEL: u8 = 5;
/// Normal ("full") channels are 0-6; 7-14 are "lite" (at most 64 KiB - 4 per control block, no
/// 2D mode), 15 sits elsewhere.
pub const NORMAL_CHANNELS: u8 = 7;
/// Alignment of a control block.
pub const CB_ALIGN: usize = 32;
/// Most bytes one control block of a normal channel moves (TXFR_LEN bits 29:0).
pub const MAX_TXFR_LEN: u32 = (1 << 30) - 4;

/// Channel register offsets (from the channel's base, n x 0x100).
pub mod reg {
    pub const CS: usize = 0x00;
    pub const CONBLK_AD: usize = 0x04;
    pub const TI: usize = 0x08;
    pub const SOURCE_AD: usize = 0x0C;
    pub const DEST_AD: usize = 0x10;
    pub const TXFR_LEN: usize = 0x14;
    pub const NEXTCONBK: usize = 0x1C;
    pub const DEBUG: usize = 0x20;
    /// Global: interrupt status of every channel.
    pub const INT_STATUS: usize = 0xFE0;
    /// Global: bit n enables channel n.
    pub const ENABLE: usize = 0xFF0;
    /// Bytes between channels.
    pub const CHANNEL_STRIDE: usize = 0x100;
}

/// CS bits.
pub mod cs {
    pub const ACTIVE: u32 = 1 << 0;
    pub const END: u32 = 1 << 1;
    pub const INT: u32 = 1 << 2;
    pub const DREQ: u32 = 1 << 3;
    pub const PAUSED: u32 = 1 << 4;
    pub const ERROR: u32 = 1 << 8;
    /// AXI priority, bits 19:16, and panic priority, bits 23:20 (a middle value for both).
    pub const PRIORITY_SHIFT: u32 = 16;
    pub const PANIC_PRIORITY_SHIFT: u32 = 20;
    pub const WAIT_FOR_OUTSTANDING_WRITES: u32 = 1 << 28;
    pub const ABORT: u32 = 1 << 30;
    pub const RESET: u32 = 1 << 31;
}

/// TI (transfer information) bits.
pub mod ti {
    pub const INTEN: u32 = 1 << 0;
    pub const WAIT_RESP: u32 = 1 << 3;
    pub const DEST_INC: u32 = 1 << 4;
    pub const DEST_WIDTH_128: u32 = 1 << 5;
    pub const DEST_DREQ: u32 = 1 << 6;
    pub const SRC_INC: u32 = 1 << 8;
    pub const SRC_DREQ: u32 = 1 << 10;
    pub const PERMAP_SHIFT: u32 = 16;
    pub const PERMAP_MASK: u32 = 0x1F;
}

/// DEBUG bits.
pub mod debug {
    /// The AXI read of a last word came without its "last" signal.
    pub const READ_LAST_NOT_SET: u32 = 1 << 0;
    /// The engine's FIFO lost data.
    pub const FIFO_ERROR: u32 = 1 << 1;
    /// A read on the AXI bus (a control block or the source) returned an error.
    pub const READ_ERROR: u32 = 1 << 2;
    /// The error bits (write 1 to clear).
    pub const ERRORS: u32 = READ_LAST_NOT_SET | FIFO_ERROR | READ_ERROR;
    /// A lite channel.
    pub const LITE: u32 = 1 << 28;
    pub const NAMES: [(u32, &str); 3] = [
        (READ_LAST_NOT_SET, "read last not set"),
        (FIFO_ERROR, "FIFO error"),
        (READ_ERROR, "read error"),
    ];
}

/// Where the channel number came from, for the card line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelSource {
    /// The firmware's mask (GET_DMA_CHANNELS) held it.
    Firmware { mask: u32 },
    /// The firmware did not answer the tag: [`FALLBACK_CHANNEL`].
    Fallback,
    /// The firmware's mask had no normal channel: [`FALLBACK_CHANNEL`] anyway.
    NoNormalInMask { mask: u32 },
}

impl fmt::Display for ChannelSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ChannelSource::Firmware { mask } => write!(f, "from the firmware's mask {mask:#x}"),
            ChannelSource::Fallback => write!(
                f,
                "fixed: the firmware did not give its channel mask (GET_DMA_CHANNELS)"
            ),
            ChannelSource::NoNormalInMask { mask } => {
                write!(
                    f,
                    "fixed: the firmware's mask {mask:#x} has no normal channel"
                )
            }
        }
    }
}

/// The channel to use given the firmware's mask (`None`: the tag failed): the highest normal
/// channel in it (the firmware hands out channels from the top, keeping the low ones for the
/// VideoCore), else [`FALLBACK_CHANNEL`].
pub fn pick_channel(mask: Option<u32>) -> (u8, ChannelSource) {
    let Some(mask) = mask else {
        return (FALLBACK_CHANNEL, ChannelSource::Fallback);
    };
    match (0..NORMAL_CHANNELS).rev().find(|&n| mask & (1 << n) != 0) {
        Some(n) => (n, ChannelSource::Firmware { mask }),
        None => (FALLBACK_CHANNEL, ChannelSource::NoNormalInMask { mask }),
    }
}

/// Why a DMA transfer failed or was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DmaError {
    /// The engine stopped with CS.ERROR or DEBUG error bits (as read).
    Engine { channel: u8, cs: u32, debug: u32 },
    /// A control block at bus `bus` is not 32-byte aligned or not inside the caller's range
    /// `[lo, hi)`: not started.
    ControlBlockOutside { bus: u32, lo: u32, hi: u32 },
    /// A transfer of `len` bytes does not fit one control block (a multiple of 4, at most
    /// [`MAX_TXFR_LEN`], or 64 KiB - 4 on a lite channel).
    Length { len: usize },
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DmaError::Engine { channel, cs, debug } => {
                write!(f, "DMA channel {channel} error: ")?;
                let mut any = false;
                for (bit, name) in debug::NAMES {
                    if debug & bit != 0 {
                        if any {
                            f.write_str(", ")?;
                        }
                        f.write_str(name)?;
                        any = true;
                    }
                }
                if !any {
                    f.write_str("CS.ERROR without DEBUG bits")?;
                }
                write!(f, " (CS {cs:#010x}, DEBUG {debug:#010x})")
            }
            DmaError::ControlBlockOutside { bus, lo, hi } => write!(
                f,
                "DMA control block at bus {bus:#010x} is not 32-byte aligned inside the driver's \
                 memory {lo:#010x}..{hi:#010x}: not started"
            ),
            DmaError::Length { len } => {
                write!(
                    f,
                    "DMA transfer of {len} bytes does not fit one control block"
                )
            }
        }
    }
}

/// One control block as the engine reads it (8 little-endian words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ControlBlock {
    pub ti: u32,
    pub source: u32,
    pub dest: u32,
    pub len: u32,
    pub stride: u32,
    pub next: u32,
}

impl ControlBlock {
    /// `len` bytes from the peripheral register at bus address `source` (DREQ `dreq`) to memory
    /// at bus address `dest`, paced by the DREQ, each write acknowledged (WAIT_RESP); the last
    /// block of its chain.
    pub fn from_peripheral(dreq: u32, source: u32, dest: u32, len: u32) -> ControlBlock {
        ControlBlock {
            ti: ti::WAIT_RESP
                | (dreq & ti::PERMAP_MASK) << ti::PERMAP_SHIFT
                | ti::SRC_DREQ
                | ti::DEST_INC,
            source,
            dest,
            len,
            stride: 0,
            next: 0,
        }
    }

    /// The words as the engine reads them.
    pub fn words(&self) -> [u32; 8] {
        [
            self.ti,
            self.source,
            self.dest,
            self.len,
            self.stride,
            self.next,
            0,
            0,
        ]
    }

    /// Write the block at `ptr` with volatile stores.
    ///
    /// # Safety
    /// `ptr` must be valid for 32 bytes of writes, aligned to [`CB_ALIGN`], and not referenced.
    pub unsafe fn store(&self, ptr: *mut u32) {
        for (i, w) in self.words().into_iter().enumerate() {
            // SAFETY: the caller's promise: 8 words of writable, aligned, unreferenced memory.
            unsafe { ptr.add(i).write_volatile(w.to_le()) };
        }
    }
}

/// One channel of the controller, over the controller's whole register block.
#[derive(Debug)]
pub struct DmaChannel<R: Regs> {
    regs: R,
    channel: u8,
    /// DEBUG.LITE as read when the channel was taken.
    lite: bool,
}

impl<R: Regs> DmaChannel<R> {
    /// Channel `channel` (0-14) of the controller whose registers `regs` are; reset, enabled.
    pub fn new(mut regs: R, channel: u8) -> DmaChannel<R> {
        let channel = channel.min(14);
        let base = channel as usize * reg::CHANNEL_STRIDE;
        regs.write32(base + reg::CS, cs::RESET);
        let lite = regs.read32(base + reg::DEBUG) & debug::LITE != 0;
        let enable = regs.read32(reg::ENABLE);
        regs.write32(reg::ENABLE, enable | 1 << channel);
        DmaChannel {
            regs,
            channel,
            lite,
        }
    }

    pub fn channel(&self) -> u8 {
        self.channel
    }

    pub fn is_lite(&self) -> bool {
        self.lite
    }

    pub fn regs_mut(&mut self) -> &mut R {
        &mut self.regs
    }

    fn off(&self, r: usize) -> usize {
        self.channel as usize * reg::CHANNEL_STRIDE + r
    }

    /// Can one control block move `len` bytes on this channel?
    pub fn check_len(&self, len: usize) -> Result<u32, DmaError> {
        let max = if self.lite { 0xFFFC } else { MAX_TXFR_LEN };
        match u32::try_from(len) {
            Ok(l) if l > 0 && l.is_multiple_of(4) && l <= max => Ok(l),
            _ => Err(DmaError::Length { len }),
        }
    }

    /// Start the chain whose first control block is at bus address `cb`, which must be
    /// [`CB_ALIGN`]-aligned and inside `[lo, hi)` (the caller's DMA memory, the whole block in
    /// it). The caller has cleaned the blocks to memory.
    pub fn start(&mut self, cb: u32, lo: u32, hi: u32) -> Result<(), DmaError> {
        let inside = cb >= lo && cb.checked_add(CB_ALIGN as u32).is_some_and(|end| end <= hi);
        if !inside || !(cb as usize).is_multiple_of(CB_ALIGN) {
            return Err(DmaError::ControlBlockOutside { bus: cb, lo, hi });
        }
        let (cs_off, dbg, ad) = (
            self.off(reg::CS),
            self.off(reg::DEBUG),
            self.off(reg::CONBLK_AD),
        );
        self.regs.write32(cs_off, cs::RESET);
        self.clear_errors(dbg);
        self.regs.write32(cs_off, cs::END | cs::INT);
        self.regs.write32(ad, cb);
        self.regs.write32(
            cs_off,
            cs::ACTIVE
                | cs::WAIT_FOR_OUTSTANDING_WRITES
                | 8 << cs::PRIORITY_SHIFT
                | 8 << cs::PANIC_PRIORITY_SHIFT,
        );
        Ok(())
    }

    /// The transfer's state, never waiting: `None` while the channel is active; `Ok` once it has
    /// ended without error; the error with CS and DEBUG as read.
    pub fn status(&mut self) -> Option<Result<(), DmaError>> {
        let c = self.regs.read32(self.off(reg::CS));
        let d = self.regs.read32(self.off(reg::DEBUG));
        if c & cs::ERROR != 0 || d & debug::ERRORS != 0 {
            return Some(Err(DmaError::Engine {
                channel: self.channel,
                cs: c,
                debug: d,
            }));
        }
        if c & cs::ACTIVE != 0 {
            return None;
        }
        Some(Ok(()))
    }

    /// Bytes the running control block still has to move (TXFR_LEN counts down).
    pub fn remaining(&mut self) -> u32 {
        self.regs.read32(self.off(reg::TXFR_LEN))
    }

    /// Stop the channel: reset (which aborts a transfer under way), clear END and the errors.
    pub fn stop(&mut self) {
        let (cs_off, dbg) = (self.off(reg::CS), self.off(reg::DEBUG));
        self.regs.write32(cs_off, cs::RESET);
        self.regs.write32(cs_off, cs::END | cs::INT);
        self.clear_errors(dbg);
    }

    /// Clear the error bits the DEBUG register at `dbg` has set: write 1 to clear on the chip,
    /// and only the bits read set, so that a model that keeps a written value (QEMU 10's) does
    /// not read the ones back as errors.
    fn clear_errors(&mut self, dbg: usize) {
        let set = self.regs.read32(dbg) & debug::ERRORS;
        if set != 0 {
            self.regs.write32(dbg, set);
        }
    }

    /// CS and DEBUG as read now, for a timeout's message.
    pub fn snapshot(&mut self) -> (u32, u32) {
        (
            self.regs.read32(self.off(reg::CS)),
            self.regs.read32(self.off(reg::DEBUG)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_from_the_mask() {
        assert_eq!(pick_channel(Some(0x3c)).0, 5, "QEMU's channels 2-5");
        assert_eq!(pick_channel(Some(0x7f35)).0, 5, "Linux's Pi 3 mask");
        assert_eq!(pick_channel(None), (5, ChannelSource::Fallback));
        assert_eq!(
            pick_channel(Some(0x7f00)),
            (5, ChannelSource::NoNormalInMask { mask: 0x7f00 })
        );
        assert_eq!(pick_channel(Some(0x14)).0, 4);
    }

    /// Registers that keep what is written, as QEMU 10's model of the controller does (its
    /// DEBUG is no write-1-to-clear register); CS.ACTIVE ends at once.
    struct Kept([u32; 0x400]);

    impl Regs for Kept {
        fn read32(&mut self, off: usize) -> u32 {
            self.0[off / 4]
        }
        fn write32(&mut self, off: usize, v: u32) {
            self.0[off / 4] = if v & cs::ACTIVE != 0 { cs::END } else { v };
        }
    }

    #[test]
    fn a_clean_end_reads_as_one_where_debug_keeps_what_is_written() {
        let mut ch = DmaChannel::new(Kept([0; 0x400]), 5);
        for _ in 0..3 {
            ch.start(0xc000_0100, 0xc000_0000, 0xc001_0000).unwrap();
            assert_eq!(ch.status(), Some(Ok(())));
            ch.stop();
        }
        // An error the engine set is cleared by writing its bit.
        let dbg = ch.off(reg::DEBUG);
        ch.regs_mut().0[dbg / 4] = debug::READ_ERROR;
        assert!(matches!(ch.status(), Some(Err(DmaError::Engine { .. }))));
        ch.stop();
        assert_eq!(
            ch.regs_mut().0[dbg / 4],
            debug::READ_ERROR,
            "written back to clear"
        );
    }

    #[test]
    fn peripheral_block_words() {
        let cb = ControlBlock::from_peripheral(DREQ_SDHOST, 0x7e20_2040, 0xc010_0000, 512);
        assert_eq!(
            cb.ti,
            0x000d_0000 | ti::WAIT_RESP | ti::SRC_DREQ | ti::DEST_INC
        );
        assert_eq!(cb.words()[..4], [cb.ti, 0x7e20_2040, 0xc010_0000, 512]);
    }
}
