//! The sdhost's DMA reads through the BCM2835 DMA engine: the driver's DMA area (one control
//! block, then the bounce buffer; allocated once, whole cache lines) and one read command in the
//! three steps [`crate::sd::queue`] drives: start, check (never waiting), complete.

use core::sync::atomic::{compiler_fence, Ordering};

use super::regs::{PIO_TAIL_WORDS, SDDATA};
use super::{Cause, Clock, DmaMemory, Regs, Sdhost, Wait, BLOCK_SIZE, BLOCK_TIMEOUT_US, DMA_ALIGN};
use crate::bcm2835::dma::{ControlBlock, DREQ_SDHOST};
use crate::dma::Area;
use crate::sd::queue::{DmaCmd, DmaReads, ReadQueue};
use crate::sd::{self, Failure, Host, SdError, READ};

/// Bytes of the bounce buffer (reads into a buffer without a cache-line aligned start).
pub const DMA_BUFFER_BYTES: usize = 64 << 10;
/// Bytes before the bounce buffer: the control block, alone in its cache line.
const CB_AREA: usize = DMA_ALIGN;
const AREA_BYTES: usize = CB_AREA + DMA_BUFFER_BYTES;
/// Per block, on top of [`BLOCK_TIMEOUT_US`]: a block takes 21 us at 50 MHz on 4 lines, 1.3 ms
/// at 400 kHz on one.
const DMA_BLOCK_US: u64 = 2_000;

/// The driver's DMA area: the control block in its first cache line, the bounce buffer after.
pub(super) fn new_area<D: DmaMemory>(mem: &mut D) -> Option<Area> {
    Area::new(mem, AREA_BYTES)
}

/// CPU address of the bounce buffer in `area`.
fn buffer_addr(area: &Area) -> usize {
    area.addr() + CB_AREA
}

impl<R: Regs, C: Clock, D: DmaMemory> Sdhost<R, C, D> {
    /// Where a command for `len` bytes at `dst` goes: straight to `dst` (a cache-line aligned
    /// start with a bus address) or the bounce buffer; its bus address, CPU address and bytes.
    fn plan(&mut self, dst: usize, len: usize) -> Option<(u32, usize, usize)> {
        let per = self.config.max_blocks_per_command.max(1) as usize * BLOCK_SIZE;
        let direct = len.min(per);
        if dst.is_multiple_of(DMA_ALIGN) {
            if let Some(bus) = self.mem.bus_address(dst, direct) {
                return Some((bus, dst, direct));
            }
        }
        let (_, area) = self.dma.as_ref()?;
        let bytes = len.min(per).min(DMA_BUFFER_BYTES);
        let off = (buffer_addr(area) - area.addr()) as u32;
        Some((area.bus + off, buffer_addr(area), bytes))
    }

    fn dma_timeout_us(&self, blocks: u32) -> u64 {
        BLOCK_TIMEOUT_US.saturating_add(DMA_BLOCK_US.saturating_mul(blocks as u64))
    }

    /// Step 1-3: destination invalidated, control block written and cleaned, the command, then
    /// the channel started.
    fn start_dma_read(&mut self, lba: u64, dst: usize, len: usize) -> Result<DmaCmd, Failure> {
        let now = self.clock.now_us();
        let Some((bus, target, bytes)) = self.plan(dst, len) else {
            let c = DmaCmd::new(lba, dst, dst, len, now, 0);
            return Err(c.failure(Cause::Unsupported { what: "DMA" }));
        };
        let blocks = (bytes / BLOCK_SIZE) as u32;
        let c = DmaCmd::new(lba, dst, target, bytes, now, self.dma_timeout_us(blocks));
        let tail = if blocks > 1 { PIO_TAIL_WORDS * 4 } else { 0 };
        // SAFETY: whole cache lines (an aligned start, whole blocks) of the bounce buffer or of
        // the caller's buffer, held for this transfer.
        unsafe { self.mem.from_device(target, bytes) };
        let source = self.config.bus_base + SDDATA as u32;
        let Some((ch, area)) = self.dma.as_mut() else {
            return Err(c.failure(Cause::Unsupported { what: "DMA" }));
        };
        let len32 = match ch.check_len(bytes - tail) {
            Ok(l) => l,
            Err(e) => {
                self.dma_failed(e);
                return Err(c.failure(Cause::Dma(e)));
            }
        };
        let cb = ControlBlock::from_peripheral(DREQ_SDHOST, source, bus, len32);
        // SAFETY: the area's first 32 bytes, aligned to DMA_ALIGN, never referenced.
        unsafe { cb.store(area.addr() as *mut u32) };
        let (cb_addr, cb_bus) = (area.addr(), area.bus);
        self.mem.to_device(cb_addr, 32);
        if let Err(f) = sd::begin_transfer_with(self, &READ, lba, blocks, true) {
            self.reset_after_error();
            return Err(f);
        }
        let Some((ch, area)) = self.dma.as_mut() else {
            return Err(c.failure(Cause::Unsupported { what: "DMA" }));
        };
        if let Err(e) = ch.start(cb_bus, cb_bus, cb_bus + CB_AREA as u32) {
            self.reset_after_error();
            self.dma_failed(e);
            return Err(c.failure(Cause::Dma(e)));
        }
        area.busy = true;
        Ok(c)
    }

    /// Step 4: the channel's state, never waiting.
    fn dma_check(&mut self, c: &DmaCmd) -> Option<Result<(), Cause>> {
        let Some((ch, _)) = self.dma.as_mut() else {
            return Some(Err(Cause::Unsupported { what: "DMA" }));
        };
        match ch.status() {
            Some(Ok(())) => Some(self.status_error()),
            Some(Err(e)) => Some(Err(Cause::Dma(e))),
            None => {
                // A data error (CRC, timeout) stops the card's words: the engine would wait for
                // ever on its DREQ.
                if let Err(cause) = self.status_error() {
                    return Some(Err(cause));
                }
                let now = self.clock.now_us();
                let waited = now.saturating_sub(c.started_us);
                (now >= c.deadline_us).then(|| Err(Host::timeout(self, Wait::SystemDma, waited)))
            }
        }
    }

    /// Step 5: the channel stopped, the destination invalidated, the PIO tail, SDHSTS, CMD12,
    /// the bounce copy. A DMA error counts towards giving DMA up.
    fn complete_dma_read(&mut self, c: &DmaCmd, r: Result<(), Cause>) -> Result<(), Failure> {
        if let Some((ch, area)) = self.dma.as_mut() {
            ch.stop();
            area.busy = false;
        }
        if let Err(cause) = r {
            self.reset_after_error();
            if let Cause::Dma(e) = cause {
                self.dma_failed(e);
            }
            return Err(c.failure(cause));
        }
        let bytes = c.bytes();
        // SAFETY: as in `start_dma_read`: whole cache lines the transfer owns.
        unsafe { self.mem.from_device(c.target, bytes) };
        compiler_fence(Ordering::SeqCst);
        let done = self.read_tail(c).and_then(|()| self.status_error());
        if let Err(cause) = done {
            self.reset_after_error();
            return Err(c.failure(cause));
        }
        if c.bounced() {
            // SAFETY: the caller's buffer is valid for `bytes` of writes (the request's promise)
            // and another allocation than the area; the bounce buffer holds `bytes`.
            unsafe {
                core::ptr::copy_nonoverlapping(c.target as *const u8, c.dst as *mut u8, bytes)
            };
            self.stats.bounce_transfers += 1;
        }
        if c.blocks > 1 {
            sd::stop(self, c.lba + c.blocks as u64 - 1)?;
        }
        self.stats.dma_transfers += 1;
        self.stats.blocks_read += c.blocks as u64;
        Ok(())
    }

    /// Count DMA error `e`; after [`super::Config::dma_errors_before_pio`] of them, reads go by
    /// PIO from now on (the channel is stopped, the area idle).
    fn dma_failed(&mut self, e: crate::bcm2835::dma::DmaError) {
        self.stats.dma_errors += 1;
        self.stats.last_dma_error = Some(e);
        if self.stats.dma_errors >= self.config.dma_errors_before_pio as u64 {
            self.dma = None;
            self.stats.dma_channel = None;
        }
    }

    /// The last [`PIO_TAIL_WORDS`] words of a multi-block read, by PIO into the target.
    fn read_tail(&mut self, c: &DmaCmd) -> Result<(), Cause> {
        if c.blocks <= 1 {
            return Ok(());
        }
        let mut tail = [0u8; PIO_TAIL_WORDS * 4];
        self.read_fifo(&mut tail, c.blocks - 1)?;
        let at = c.target + c.bytes() - tail.len();
        // SAFETY: the last 12 bytes of the target (bounce buffer or the caller's buffer, held for
        // this transfer), no reference into them; the engine has stopped.
        unsafe { core::ptr::copy_nonoverlapping(tail.as_ptr(), at as *mut u8, tail.len()) };
        Ok(())
    }
}

impl<R: Regs, C: Clock, D: DmaMemory> DmaReads for Sdhost<R, C, D> {
    fn queue(&mut self) -> &mut ReadQueue {
        &mut self.queue
    }

    fn has_dma(&self) -> bool {
        self.dma.is_some()
    }

    fn dma_on(&self) -> bool {
        self.dma.is_some() && !self.pio
    }

    fn dma_errors(&self) -> u64 {
        self.stats.dma_errors
    }

    fn start_read(&mut self, lba: u64, dst: usize, len: usize) -> Result<DmaCmd, Failure> {
        self.start_dma_read(lba, dst, len)
    }

    const WAIT: Wait = Wait::SystemDma;

    fn check_read(&mut self, c: &DmaCmd) -> Option<Result<(), Cause>> {
        self.dma_check(c)
    }

    fn complete_read(&mut self, c: &DmaCmd, r: Result<(), Cause>) -> Result<(), Failure> {
        self.complete_dma_read(c, r)
    }

    fn read_once(&mut self, start: u64, buf: &mut [u8]) -> Result<(), Failure> {
        Sdhost::read_once(self, start, buf)
    }

    fn read_now(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError> {
        Sdhost::read_now(self, lba, buf)
    }

    fn note_queued(&mut self) {
        self.stats.queued_reads += 1;
    }
}
