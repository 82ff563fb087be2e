//! ADMA2 reads (SD Host Controller Simplified Specification 3.00, 1.13): on an SDHCI host whose
//! capabilities report ADMA2 (the Pi 4's EMMC2), given a [`DmaMemory`] (the board's bus
//! addresses and cache maintenance), a read command's data go straight to memory through a
//! descriptor table; the CPU only writes the table and waits for transfer complete. The reads
//! are also queued ([`crate::sd::queue`]): the controller moves a page while every core computes.
//!
//! The driver allocates once a [`DMA_ALIGN`]-aligned area of whole cache lines: the descriptor
//! table ([`ADMA_DESCRIPTORS`] 32-bit ADMA2 descriptors of at most [`ADMA_DESC_BYTES`] each, so a
//! command moves at most [`ADMA_MAX_BYTES`], the largest request the page cache makes), then a
//! [`ADMA_BOUNCE_BYTES`] bounce buffer. A read goes straight into the caller's buffer when it is
//! whole cache lines and the controller can reach all of it; else through the bounce buffer (when
//! it fits), else by programmed I/O. A descriptor is two little-endian words: attributes (valid,
//! end, act = transfer) with the length in bits 31:16, then the 32-bit address.
//!
//! One command: the table written and cleaned ([`DmaMemory::to_device`]), the destination
//! invalidated ([`DmaMemory::from_device`]: no dirty line may land on the controller's data),
//! ADMA_ADDRESS = the table, host control 1's DMA select = ADMA2 (32-bit), then the command with
//! the transfer mode's DMA enable; transfer complete ends it (after the auto CMD12); the
//! destination invalidated again (lines the CPU may have fetched meanwhile) and, if bounced,
//! copied out. An ADMA error ([`Cause::Adma`], with the ADMA error status), a data or auto CMD12
//! error, or the deadline resets the lines; the request loop's retries follow as for PIO.

use alloc::alloc::{alloc_zeroed, dealloc, Layout};
use core::ptr::NonNull;
use core::sync::atomic::{compiler_fence, Ordering};

use super::*;
use crate::dma::{DmaMemory, DMA_ALIGN};
use crate::sd::queue::{DmaCmd, DmaReads, ReadQueue};

/// Bytes one descriptor moves at most (a power of two below the 16-bit length field's 65536).
pub const ADMA_DESC_BYTES: usize = 32 << 10;
/// Bytes one command moves at most.
pub const ADMA_MAX_BYTES: usize = 1 << 20;
/// Descriptors in the table: a command's, and one more for a host whose descriptors may not
/// cross a boundary ([`Variant::adma_boundary`], 128 MiB: a command of at most
/// [`ADMA_MAX_BYTES`] crosses one at most once).
pub const ADMA_DESCRIPTORS: usize = ADMA_MAX_BYTES / ADMA_DESC_BYTES + 1;
/// Bytes of the bounce buffer for reads whose buffer the controller cannot reach.
pub const ADMA_BOUNCE_BYTES: usize = 256 << 10;
/// Bytes of the table, in whole cache lines.
const TABLE_BYTES: usize = (ADMA_DESCRIPTORS * 8).next_multiple_of(DMA_ALIGN);
const AREA_BYTES: usize = TABLE_BYTES + ADMA_BOUNCE_BYTES;

// Descriptor attributes (word 0 bits 5:0).
const DESC_VALID: u32 = 1 << 0;
const DESC_END: u32 = 1 << 1;
/// act = 0b10: transfer data.
const DESC_TRAN: u32 = 0b10 << 4;

/// The descriptor table and bounce buffer, owned by the driver.
#[derive(Debug)]
pub(super) struct AdmaArea {
    ptr: NonNull<u8>,
    /// The bus address of `ptr`.
    bus: u32,
}

// SAFETY: memory the driver owns alone; nothing in it is tied to a thread.
unsafe impl Send for AdmaArea {}

impl AdmaArea {
    fn layout() -> Layout {
        // Constants: a non-zero size and a power-of-two alignment.
        Layout::from_size_align(AREA_BYTES, DMA_ALIGN).expect("ADMA area layout")
    }

    /// Allocate the area and get its bus address; `None` if either fails.
    pub fn new<D: DmaMemory>(mem: &mut D) -> Option<AdmaArea> {
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(Self::layout()) })?;
        // Freed by its drop if the controller cannot reach it.
        let mut area = AdmaArea { ptr, bus: 0 };
        area.bus = mem.bus_address(area.table(), AREA_BYTES)?;
        let fits = area.bus.is_multiple_of(4) && area.bus.checked_add(AREA_BYTES as u32).is_some();
        fits.then_some(area)
    }

    fn table(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    fn bounce(&self) -> usize {
        self.table() + TABLE_BYTES
    }

    /// Write the table for `len` bytes (1..=[`ADMA_MAX_BYTES`], a multiple of 4) at bus address
    /// `bus`, no descriptor crossing a multiple of `boundary` (when given: Linux's
    /// `dwcmshc_adma_write_desc` splits such a one in two); returns the bytes of table written.
    fn write_table(&mut self, bus: u32, len: usize, boundary: Option<u32>) -> usize {
        let base = self.ptr.as_ptr().cast::<u32>();
        let (mut i, mut off) = (0, 0);
        while i < ADMA_DESCRIPTORS {
            let addr = bus.wrapping_add(off as u32);
            let mut size = (len - off).min(ADMA_DESC_BYTES);
            if let Some(b) = boundary.filter(|&b| b > 0) {
                size = size.min((b - addr % b) as usize);
            }
            off += size;
            // The last one ends the table, also if (against the arithmetic) the table is full.
            let last = off >= len || i + 1 == ADMA_DESCRIPTORS;
            let end = if last { DESC_END } else { 0 };
            let attr = DESC_VALID | DESC_TRAN | end | (size as u32) << 16;
            for (w, v) in [attr, addr].into_iter().enumerate() {
                // SAFETY: descriptor i < ADMA_DESCRIPTORS lies in the area's first TABLE_BYTES,
                // aligned for u32; the area is ours and no reference points into it.
                unsafe { base.add(2 * i + w).write_volatile(v.to_le()) };
            }
            i += 1;
            if last {
                break;
            }
        }
        i * 8
    }

    /// Copy the first `dst.len()` bytes of the bounce buffer out (after the transfer).
    fn copy_out(&self, dst: *mut u8, len: usize) {
        compiler_fence(Ordering::SeqCst);
        // SAFETY: `len` is at most ADMA_BOUNCE_BYTES (checked when the target was chosen); `dst`
        // is the caller's buffer, valid for `len` bytes and apart from the area.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.bounce() as *const u8,
                dst,
                len.min(ADMA_BOUNCE_BYTES),
            )
        };
    }
}

impl Drop for AdmaArea {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout()) };
    }
}

impl<R: Regs, C: Clock, S: Slot, D: DmaMemory> Sdhci<R, C, S, D> {
    /// The next command of at most `len` bytes into `dst`: straight into it when it is whole
    /// cache lines the controller reaches, up to [`ADMA_MAX_BYTES`]; else through the bounce
    /// buffer, up to [`ADMA_BOUNCE_BYTES`]; never above `max_blocks_per_command`. Returns the
    /// engine's bus address, the CPU address it writes, and the bytes.
    fn plan(&mut self, dst: usize, len: usize) -> Option<(u32, usize, usize)> {
        let area = self.area.as_ref()?;
        let (bounce, bounce_bus) = (area.bounce(), area.bus + TABLE_BYTES as u32);
        let per = self.config.max_blocks_per_command.max(1) as usize * BLOCK_SIZE;
        let direct = len.min(ADMA_MAX_BYTES).min(per);
        if dst.is_multiple_of(DMA_ALIGN) && direct.is_multiple_of(DMA_ALIGN) && direct > 0 {
            let bus = self.dma.bus_address(dst, direct);
            let fits = |b: &u32| b.is_multiple_of(4) && b.checked_add(direct as u32 - 1).is_some();
            if let Some(bus) = bus.filter(fits) {
                return Some((bus, dst, direct));
            }
        }
        Some((bounce_bus, bounce, len.min(ADMA_BOUNCE_BYTES).min(per)))
    }

    /// Deadline for a read of `blocks`: the card's access time, then 1 ms a block (a card
    /// slower than 0.5 MB/s is taken for a stuck one).
    fn adma_timeout_us(blocks: u32) -> u64 {
        BLOCK_TIMEOUT_US.saturating_add(1_000u64.saturating_mul(blocks as u64))
    }

    /// [`DmaReads::start_read`]: the table written and cleaned, the destination invalidated,
    /// ADMA_ADDRESS and host control 1's DMA select set, the command issued with DMA.
    fn start_adma(&mut self, lba: u64, dst: usize, len: usize) -> Result<DmaCmd, Failure> {
        let no_dma = |blocks: u32| Failure {
            cmd: READ.command(blocks).cmd,
            lba,
            cause: Cause::Unsupported { what: "ADMA2" },
        };
        let (bus, target, bytes) = self.plan(dst, len).ok_or_else(|| no_dma(1))?;
        let blocks = (bytes / BLOCK_SIZE) as u32;
        let now = self.clock.now_us();
        let timeout = Self::adma_timeout_us(blocks);
        let c = DmaCmd::new(lba, dst, target, bytes, now, timeout);
        let area = self.area.as_mut().ok_or_else(|| no_dma(blocks))?;
        let table_len = area.write_table(bus, bytes, self.config.variant.adma_boundary());
        let (table, table_bus) = (area.table(), area.bus);
        self.dma.to_device(table, table_len);
        // SAFETY: whole cache lines (an aligned start, whole blocks) of a buffer this transfer
        // owns: the bounce buffer, or the caller's, lent to the device until it is reported.
        unsafe { self.dma.from_device(c.target, bytes) };
        self.write(ADMA_ADDRESS, table_bus);
        self.write(ADMA_ADDRESS_HI, 0);
        let hc = self.regs.read32(HOST_CONTROL) & 0xFFFF & !HC_DMA_SELECT_MASK;
        self.write(HOST_CONTROL, hc | HC_DMA_ADMA2_32);
        sd::begin_transfer_with(self, &READ, lba, blocks, true)?;
        Ok(c)
    }

    /// [`DmaReads::check_read`]: transfer complete, an error (with the ADMA error status), the
    /// deadline passed, or `None`. Never waits.
    fn check_adma(&mut self, c: &DmaCmd) -> Option<Result<(), Cause>> {
        let s = self.regs.read32(INT_STATUS);
        let err = (s >> 16) as u16;
        if err != 0 || s & INT_ERROR != 0 {
            return Some(Err(self.error_cause(err)));
        }
        if s & INT_TRANSFER_COMPLETE != 0 {
            self.write(INT_STATUS, INT_TRANSFER_COMPLETE);
            return Some(Ok(()));
        }
        let now = self.clock.now_us();
        let waited = now.saturating_sub(c.started_us);
        (now >= c.deadline_us).then(|| Err(self.timeout(Wait::TransferComplete, waited)))
    }

    /// [`DmaReads::complete_read`]: on success the destination invalidated again (lines the CPU
    /// may have fetched meanwhile) and, bounced, copied out; CMD12 from the driver when auto
    /// CMD12 is off; the counters. On failure the lines reset.
    fn complete_adma(&mut self, c: &DmaCmd, r: Result<(), Cause>) -> Result<(), Failure> {
        if let Err(cause) = r {
            self.reset_after(cause, true);
            return Err(c.failure(cause));
        }
        // SAFETY: as in `start_adma`: whole cache lines of a buffer the transfer owned.
        unsafe { self.dma.from_device(c.target, c.bytes()) };
        if c.bounced() {
            if let Some(area) = self.area.as_ref() {
                area.copy_out(c.dst as *mut u8, c.bytes());
            }
        }
        // The engine's writes are not the compiler's: no read of the buffer may move above here.
        compiler_fence(Ordering::SeqCst);
        if c.blocks > 1 && !self.config.auto_cmd12 {
            sd::stop(self, c.lba + c.blocks as u64 - 1)?;
        }
        self.stats.dma_transfers += 1;
        self.stats.blocks_read += c.blocks as u64;
        Ok(())
    }

    /// Do reads go by ADMA2?
    pub fn dma_active(&self) -> bool {
        self.dma_on()
    }
}

impl<R: Regs, C: Clock, S: Slot, D: DmaMemory> DmaReads for Sdhci<R, C, S, D> {
    fn queue(&mut self) -> &mut ReadQueue {
        &mut self.queue
    }

    fn has_dma(&self) -> bool {
        self.area.is_some()
    }

    fn dma_on(&self) -> bool {
        self.area.is_some() && !self.pio
    }

    fn start_read(&mut self, lba: u64, dst: usize, len: usize) -> Result<DmaCmd, Failure> {
        self.start_adma(lba, dst, len)
    }

    const WAIT: Wait = Wait::TransferComplete;

    fn check_read(&mut self, c: &DmaCmd) -> Option<Result<(), Cause>> {
        self.check_adma(c)
    }

    fn complete_read(&mut self, c: &DmaCmd, r: Result<(), Cause>) -> Result<(), Failure> {
        self.complete_adma(c, r)
    }

    fn read_once(&mut self, start: u64, buf: &mut [u8]) -> Result<(), Failure> {
        Sdhci::read_once(self, start, buf)
    }

    fn read_now(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError> {
        let per = self.config.max_blocks_per_command;
        sd::read_request(self, lba, buf, per, Self::read_once)
    }
}
