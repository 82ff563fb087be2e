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
use crate::sd::queue::{DmaReads, Queued, ReadQueue};

/// Bytes one descriptor moves at most (a power of two below the 16-bit length field's 65536).
pub const ADMA_DESC_BYTES: usize = 32 << 10;
/// Bytes one command moves at most.
pub const ADMA_MAX_BYTES: usize = 1 << 20;
/// Descriptors in the table.
pub const ADMA_DESCRIPTORS: usize = ADMA_MAX_BYTES / ADMA_DESC_BYTES;
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
    /// `bus`; returns the bytes of table written.
    fn write_table(&mut self, bus: u32, len: usize) -> usize {
        let n = len.div_ceil(ADMA_DESC_BYTES).clamp(1, ADMA_DESCRIPTORS);
        let base = self.ptr.as_ptr().cast::<u32>();
        for i in 0..n {
            let size = (len - i * ADMA_DESC_BYTES).min(ADMA_DESC_BYTES) as u32;
            let end = if i + 1 == n { DESC_END } else { 0 };
            let attr = DESC_VALID | DESC_TRAN | end | size << 16;
            let addr = bus + (i * ADMA_DESC_BYTES) as u32;
            for (w, v) in [attr, addr].into_iter().enumerate() {
                // SAFETY: descriptor i < ADMA_DESCRIPTORS lies in the area's first TABLE_BYTES,
                // aligned for u32; the area is ours and no reference points into it.
                unsafe { base.add(2 * i + w).write_volatile(v.to_le()) };
            }
        }
        n * 8
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

/// Where one transfer's data land: its CPU address, bus address and length (whole cache lines),
/// and whether it is the bounce buffer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Target {
    cpu: usize,
    bus: u32,
    span: usize,
    bounced: bool,
}

impl<R: Regs, C: Clock, S: Slot, D: DmaMemory> Sdhci<R, C, S, D> {
    /// Where a read of `len` bytes into `buf` goes by DMA, if it can.
    fn target(&mut self, buf: *mut u8, len: usize) -> Option<Target> {
        let area = self.area.as_ref()?;
        if len == 0 || len > ADMA_MAX_BYTES {
            return None;
        }
        let cpu = buf as usize;
        if cpu.is_multiple_of(DMA_ALIGN) && len.is_multiple_of(DMA_ALIGN) {
            let bus = self.dma.bus_address(cpu, len);
            if let Some(bus) = bus.filter(|b| b.is_multiple_of(4)) {
                if bus.checked_add(len as u32 - 1).is_some() {
                    let (bounced, span) = (false, len);
                    return Some(Target {
                        cpu,
                        bus,
                        span,
                        bounced,
                    });
                }
            }
        }
        (len <= ADMA_BOUNCE_BYTES).then(|| Target {
            cpu: area.bounce(),
            bus: area.bus + TABLE_BYTES as u32,
            span: len.next_multiple_of(DMA_ALIGN),
            bounced: true,
        })
    }

    /// Set up the table and caches for `t` and issue the read of `blocks` at `lba`.
    fn start_adma(&mut self, t: Target, lba: u64, blocks: u32) -> Result<(), Failure> {
        let Some(area) = self.area.as_mut() else {
            return Err(Failure {
                cmd: READ.command(blocks).cmd,
                lba,
                cause: Cause::Unsupported { what: "ADMA2" },
            });
        };
        let table_len = area.write_table(t.bus, blocks as usize * BLOCK_SIZE);
        let (table, table_bus) = (area.table(), area.bus);
        self.dma.to_device(table, table_len);
        // SAFETY: whole cache lines (`span`, aligned start) of a buffer this transfer owns: the
        // bounce buffer, or the caller's, lent to the device until it is reported.
        unsafe { self.dma.from_device(t.cpu, t.span) };
        self.write(ADMA_ADDRESS, table_bus);
        self.write(ADMA_ADDRESS_HI, 0);
        let hc = self.regs.read32(HOST_CONTROL) & 0xFFFF & !HC_DMA_SELECT_MASK;
        self.write(HOST_CONTROL, hc | HC_DMA_ADMA2_32);
        self.dma_target = Some(t);
        sd::begin_transfer_with(self, &READ, lba, blocks, true)?;
        Ok(())
    }

    /// Transfer complete (Ok), an error (the lines reset), or not yet (None; a timeout once
    /// `started_us` is `deadline_us` ago).
    fn check_adma(
        &mut self,
        lba: u64,
        blocks: u32,
        started_us: u64,
    ) -> Option<Result<(), Failure>> {
        let fail = |cause| Failure {
            cmd: READ.command(blocks).cmd,
            lba,
            cause,
        };
        let s = self.regs.read32(INT_STATUS);
        let err = (s >> 16) as u16;
        if err != 0 || s & INT_ERROR != 0 {
            let cause = self.error_cause(err);
            self.reset_after(cause, true);
            self.dma_target = None;
            return Some(Err(fail(cause)));
        }
        if s & INT_TRANSFER_COMPLETE != 0 {
            self.write(INT_STATUS, INT_TRANSFER_COMPLETE);
            return Some(Ok(()));
        }
        let deadline = BLOCK_TIMEOUT_US.saturating_mul(blocks as u64);
        let waited = self.clock.now_us().saturating_sub(started_us);
        if waited >= deadline {
            let cause = self.timeout(Wait::TransferComplete, waited);
            self.reset_after(cause, true);
            self.dma_target = None;
            return Some(Err(fail(cause)));
        }
        None
    }

    /// After a transfer into `dst` (`len` bytes): the caches, the copy out of the bounce buffer.
    fn finish_adma(&mut self, dst: *mut u8, len: usize) {
        let Some(t) = self.dma_target.take() else {
            return;
        };
        // SAFETY: as in `start_adma`: whole cache lines of a buffer the transfer owned.
        unsafe { self.dma.from_device(t.cpu, t.span) };
        if t.bounced {
            if let Some(area) = self.area.as_ref() {
                area.copy_out(dst, len);
            }
        }
        compiler_fence(Ordering::SeqCst);
        self.stats.dma_transfers += 1;
        self.stats.blocks_read += (len / BLOCK_SIZE) as u64;
    }

    /// One read command by ADMA2 when `buf` can go that way (`None`: use PIO), waiting for it.
    pub(super) fn read_once_adma(
        &mut self,
        start: u64,
        buf: &mut [u8],
    ) -> Option<Result<(), Failure>> {
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        let t = self.target(ptr, len)?;
        let blocks = (len / BLOCK_SIZE) as u32;
        let begun = self.clock.now_us();
        if let Err(f) = self.start_adma(t, start, blocks) {
            self.dma_target = None;
            return Some(Err(f));
        }
        loop {
            match self.check_adma(start, blocks, begun) {
                None => continue,
                Some(Ok(())) => break,
                Some(Err(f)) => return Some(Err(f)),
            }
        }
        self.finish_adma(ptr, len);
        Some(Ok(()))
    }

    /// Do reads go by ADMA2?
    pub fn dma_active(&self) -> bool {
        self.area.is_some()
    }
}

impl<R: Regs, C: Clock, S: Slot, D: DmaMemory> DmaReads for Sdhci<R, C, S, D> {
    fn queue(&mut self) -> &mut ReadQueue {
        &mut self.queue
    }

    fn dma_fits(&mut self, r: &Queued) -> bool {
        self.target(r.buf, r.len).is_some()
    }

    fn dma_start(&mut self, r: &Queued) -> Result<(), Failure> {
        let blocks = (r.len / BLOCK_SIZE) as u32;
        let Some(t) = self.target(r.buf, r.len) else {
            return Err(Failure {
                cmd: READ.command(blocks).cmd,
                lba: r.lba,
                cause: Cause::Unsupported {
                    what: "reach this buffer by DMA",
                },
            });
        };
        let started = self.start_adma(t, r.lba, blocks);
        if started.is_err() {
            self.dma_target = None;
        }
        started
    }

    fn dma_check(&mut self, r: &Queued, started_us: u64) -> Option<Result<(), Failure>> {
        self.check_adma(r.lba, (r.len / BLOCK_SIZE) as u32, started_us)
    }

    fn dma_finish(&mut self, r: &Queued) {
        self.finish_adma(r.buf, r.len);
    }

    fn read_now(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError> {
        let per = self.config.max_blocks_per_command;
        sd::read_request(self, lba, buf, per, Self::read_once)
    }
}
