//! One read command through the IDMAC, in three steps the synchronous read and the queue share:
//! start it ([`SunxiMmc::start_dma_read`]: the chain, the IDMAC, the command), see whether it has
//! ended ([`SunxiMmc::dma_check`], never waiting; `sd::queue`'s `wait_read` waits, bounded),
//! and finish it ([`SunxiMmc::complete_dma_read`]: the IDMAC stopped, the destination invalidated
//! and, through the bounce buffer, copied out).

use core::sync::atomic::{compiler_fence, Ordering};

use super::dma::bus_range_fits;
use super::regs::*;
use super::{
    Cause, Clock, DmaMemory, Host, Regs, SunxiMmc, Wait, BLOCK_SIZE, BLOCK_TIMEOUT_US, DMA_ALIGN,
    DMA_BUFFER_BYTES, DMA_MAX_BYTES, ID_CLOCK_MAX_HZ,
};
use crate::sd::queue::DmaCmd;
use crate::sd::{self, Failure, READ};

/// The least time a DMA read is given per block, on top of [`BLOCK_TIMEOUT_US`] (four times the
/// block's time on the bus when that is longer, at a slow data clock): a card slower than
/// 0.5 MB/s is taken for a stuck one.
pub const DMA_BLOCK_US: u64 = 1_000;

impl<R: Regs, C: Clock, D: DmaMemory> SunxiMmc<R, C, D> {
    /// The next read command of at most `len` bytes into `dst`: straight into it (its bus
    /// address) when it is whole cache lines the controller reaches, up to [`DMA_MAX_BYTES`];
    /// else through the bounce buffer, up to [`DMA_BUFFER_BYTES`]; never above
    /// `max_blocks_per_command`. Returns the bus address (direct) and the bytes.
    fn plan(&mut self, dst: usize, len: usize) -> (Option<u32>, usize) {
        let per = self.config.max_blocks_per_command.max(1) as usize * BLOCK_SIZE;
        let direct = len.min(DMA_MAX_BYTES).min(per);
        if dst.is_multiple_of(DMA_ALIGN) && direct.is_multiple_of(DMA_ALIGN) {
            let bus = self.dma.bus_address(dst, direct);
            if let Some(bus) = bus.filter(|&b| bus_range_fits(b, direct)) {
                return (Some(bus), direct);
            }
        }
        (None, len.min(DMA_BUFFER_BYTES).min(per))
    }

    /// Before a DMA read of `bytes` to `dst`, at bus address `direct` or through the bounce
    /// buffer: the chain written and cleaned, the destination invalidated, GCTRL in DMA mode with
    /// a DMA reset, the IDMAC reset and started on the chain.
    fn start_dma(&mut self, dst: usize, direct: Option<u32>, bytes: usize) -> Result<(), Cause> {
        let Some(area) = self.area.as_mut() else {
            return Ok(());
        };
        let chain = area.write_chain(direct.unwrap_or(area.buffer_bus()), bytes);
        area.mem.busy = true;
        let target = if direct.is_some() {
            dst
        } else {
            area.buffer_addr()
        };
        let (desc, dlba) = (area.desc_addr(), area.desc_bus());
        self.dma.to_device(desc, chain);
        // SAFETY: whole cache lines (an aligned start, whole blocks) of the bounce buffer, which is
        // ours, or of the caller's buffer, held for this transfer (`plan` checked its alignment).
        unsafe {
            self.dma
                .from_device(target, bytes.next_multiple_of(DMA_ALIGN))
        };
        self.gctrl_reset(GCTRL_DMA_ENABLE, GCTRL_DMA_RESET)?;
        self.regs.write32(DMAC, DMAC_SOFT_RESET);
        self.regs.write32(IDST, IDST_ALL);
        self.regs.write32(IDIE, IDST_RX_INT);
        self.regs.write32(DLBA, dlba);
        self.regs.write32(DMAC, DMAC_FIXED_BURST | DMAC_IDMA_ON);
        Ok(())
    }

    /// After a DMA read: the IDMAC stopped and its status cleared, GCTRL back in PIO mode with a
    /// DMA reset.
    pub(super) fn stop_dma(&mut self) -> Result<(), Cause> {
        self.regs.write32(IDST, IDST_ALL);
        self.regs.write32(IDIE, 0);
        self.regs.write32(DMAC, 0);
        if let Some(area) = self.area.as_mut() {
            area.mem.busy = false;
        }
        self.gctrl_reset(GCTRL_ACCESS_BY_AHB, GCTRL_DMA_RESET)
    }

    /// Deadline for a DMA read of `blocks` blocks: [`BLOCK_TIMEOUT_US`] for the card's access
    /// time, then per block [`DMA_BLOCK_US`] or four times its time on the bus (4096 data bits,
    /// CRC, start and end bits on the lines in use), whichever is longer.
    fn dma_timeout_us(&self, blocks: u32) -> u64 {
        let hz = self.info.data_clock_hz.max(ID_CLOCK_MAX_HZ) as u64;
        let lines = if self.info.bus_width == 4 { 4 } else { 1 };
        let clocks = (BLOCK_SIZE as u64 * 8 + 16) / lines + 2;
        let per_block = (4 * clocks * 1_000_000 / hz).max(DMA_BLOCK_US);
        BLOCK_TIMEOUT_US.saturating_add(per_block.saturating_mul(blocks as u64))
    }

    /// Start one read command through the IDMAC for the first blocks of the `len` bytes at `lba`
    /// into `dst` (as many as one command moves, see `plan`): the chain and the IDMAC set up, the
    /// command sent and its R1 checked. The controller must be idle. A failure resets the
    /// controller (the IDMAC with it).
    pub(super) fn start_dma_read(
        &mut self,
        lba: u64,
        dst: usize,
        len: usize,
    ) -> Result<DmaCmd, Failure> {
        let (direct, bytes) = self.plan(dst, len);
        let blocks = (bytes / BLOCK_SIZE) as u32;
        let now = self.clock.now_us();
        let target = match (direct, self.area.as_ref()) {
            (None, Some(area)) => area.buffer_addr(),
            _ => dst,
        };
        let c = DmaCmd::new(lba, dst, target, bytes, now, self.dma_timeout_us(blocks));
        let started = self
            .start_dma(dst, direct, bytes)
            .map_err(|cause| c.failure(cause))
            .and_then(|()| sd::begin_transfer(self, &READ, lba, blocks));
        if let Err(f) = started {
            self.reset_after_error();
            return Err(f);
        }
        Ok(c)
    }

    /// Has `c` ended? `None` while it runs and its deadline is ahead; then Ok once IDST has the
    /// receive interrupt (the last descriptor's buffer is written) and RINT data over (and auto
    /// command done with auto stop), an error for an IDST or RINT error bit or the deadline
    /// passed ([`Cause::SunxiTimeout`] naming what was missing). Never waits.
    pub(super) fn dma_check(&mut self, c: &DmaCmd) -> Option<Result<(), Cause>> {
        let want = self.data_over_bits(c.blocks);
        let rint = self.regs.read32(RINT);
        if rint & RINT_ERRORS != 0 {
            return Some(Err(Cause::Rint { rint }));
        }
        let idst = self.regs.read32(IDST);
        if idst & IDST_ERRORS != 0 {
            return Some(Err(Cause::Idmac { idst, rint }));
        }
        let wait = if idst & IDST_RX_INT == 0 {
            Wait::DmaDone
        } else if rint & want != want {
            Wait::TransferComplete
        } else {
            return Some(Ok(()));
        };
        let now = self.clock.now_us();
        let waited = now.saturating_sub(c.started_us);
        (now >= c.deadline_us).then(|| Err(Host::timeout(self, wait, waited)))
    }

    /// After `c` ended with `r`: on success the IDMAC stopped, the destination invalidated (and
    /// the bounce buffer copied out to it), CMD12 from the driver when auto stop is off, the
    /// counters; on failure the controller reset (the IDMAC with it). The failure names the
    /// command's first LBA.
    pub(super) fn complete_dma_read(
        &mut self,
        c: &DmaCmd,
        r: Result<(), Cause>,
    ) -> Result<(), Failure> {
        if let Err(cause) = r.and_then(|()| self.stop_dma()) {
            self.reset_after_error();
            return Err(c.failure(cause));
        }
        let bytes = c.bytes();
        if let Some(area) = self.area.as_ref() {
            // SAFETY: whole cache lines of the bounce buffer (ours) or of the caller's buffer
            // (held for this transfer, its alignment checked by `plan`).
            unsafe { self.dma.from_device(c.target, bytes) };
            if c.bounced() {
                // SAFETY: the caller's buffer is valid for `bytes` of writes (the request's
                // promise) and another allocation than the area.
                unsafe { area.copy_out(c.dst as *mut u8, bytes) };
                self.stats.bounce_transfers += 1;
            }
        }
        // The controller's writes are not the compiler's: no read of the caller's buffer may move
        // above the end of the transfer.
        compiler_fence(Ordering::SeqCst);
        if c.blocks > 1 && !self.config.auto_stop {
            sd::stop(self, c.lba + c.blocks as u64 - 1)?;
        }
        self.stats.dma_transfers += 1;
        self.stats.blocks_read += c.blocks as u64;
        Ok(())
    }

    /// The RINT bits that end a read of `blocks`: data over, and auto command done with auto
    /// stop.
    pub(super) fn data_over_bits(&self, blocks: u32) -> u32 {
        if blocks > 1 && self.config.auto_stop {
            RINT_DATA_OVER | RINT_AUTO_COMMAND_DONE
        } else {
            RINT_DATA_OVER
        }
    }

    /// Read whole blocks now (the queue drained or empty): checked against the capacity, split
    /// into commands of at most `max_blocks_per_command` blocks (of the bounce buffer's when
    /// `buf` is not cache-line aligned), each tried up to `Config::tries` times.
    pub(super) fn read_now(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), super::SdError> {
        let mut per = self.config.max_blocks_per_command;
        let dma = crate::sd::queue::DmaReads::dma_on(self);
        if dma && !(buf.as_ptr() as usize).is_multiple_of(DMA_ALIGN) {
            per = per.min(super::DMA_BUFFER_BLOCKS);
        }
        sd::read_request(self, lba, buf, per, Self::read_once)
    }
}
