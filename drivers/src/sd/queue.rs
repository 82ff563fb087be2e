//! Queued reads on a host whose DMA engine moves the data while the CPU computes, as virtio-blk
//! has them ([`BlockDevice::submit_read`] and `poll_read`), shared by the SDHCI driver's ADMA2
//! and the Allwinner driver's IDMAC. The controller runs one command at a time, so "in flight"
//! means one running and the rest waiting in a fixed array of [`SLOTS`] (no allocation per
//! request); a request's tag is its slot.
//!
//! - `submit_read` checks the request (range, whole blocks), puts it in a free slot and, if the
//!   controller is idle, starts its command at once. With every slot taken (more pieces than
//!   [`QUEUE_DEPTH`] pages bring), it drains the queue and reads the request synchronously.
//! - `poll_read` never waits: if the running command has ended it finishes it, starts the next
//!   command (the next piece of the same request, when one command cannot move all of it, or the
//!   next request), and reports a finished request.
//! - A command that fails (or outlives its deadline) resets the controller, and what is left of
//!   its request is read synchronously through the shared retries ([`super::with_retries`], the
//!   failed command counting as the first try, so the card is recovered as after any failure);
//!   the outcome is reported as the request's. The buffer is still the driver's alone then.
//! - A synchronous request (a read, a write, `into_parts`) first drains the queue: every queued
//!   request is run to its end, its outcome kept for `poll_read`, so the controller is never
//!   shared.
//!
//! [`BlockDevice::submit_read`]: crate::block::BlockDevice::submit_read

use super::{fenced, with_retries, Cause, Failure, Host, SdError, Wait, READ};
use crate::block::{check_request, Submitted, BLOCK_SIZE};

/// Read requests a driver takes queued (its `queue_depth` with DMA).
pub const QUEUE_DEPTH: usize = 4;
/// Slots for queued requests and finished ones not yet reported: room for the pieces a page
/// split over extents brings.
pub const SLOTS: usize = 2 * QUEUE_DEPTH;

/// Where a queued request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Free,
    /// Waiting for the controller (or for its next command).
    Waiting,
    /// Its command is the one running.
    Running,
    /// Ended, not yet reported.
    Finished(Result<(), SdError>),
}

/// A queued read: `len` bytes from `lba` into `dst`, `done` of them there.
#[derive(Debug, Clone, Copy)]
struct Slot {
    stage: Stage,
    lba: u64,
    dst: usize,
    len: usize,
    done: usize,
    /// Submission order.
    seq: u64,
}

const FREE: Slot = Slot {
    stage: Stage::Free,
    lba: 0,
    dst: 0,
    len: 0,
    done: 0,
    seq: 0,
};

/// One DMA read command under way: its blocks, where they go, and when they must be there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DmaCmd {
    /// The first block.
    pub lba: u64,
    pub blocks: u32,
    /// CPU address of the destination: the caller's buffer.
    pub dst: usize,
    /// CPU address the engine writes: `dst`, or a bounce buffer copied out to `dst` after.
    pub target: usize,
    pub started_us: u64,
    pub deadline_us: u64,
}

impl DmaCmd {
    /// A command of `bytes` (whole blocks) from `lba` into `dst` through `target`, started at
    /// `now_us`, to end within `timeout_us`.
    pub fn new(
        lba: u64,
        dst: usize,
        target: usize,
        bytes: usize,
        now_us: u64,
        timeout_us: u64,
    ) -> DmaCmd {
        DmaCmd {
            lba,
            blocks: (bytes / BLOCK_SIZE) as u32,
            dst,
            target,
            started_us: now_us,
            deadline_us: now_us.saturating_add(timeout_us),
        }
    }

    pub fn bytes(&self) -> usize {
        self.blocks as usize * BLOCK_SIZE
    }

    /// The engine writes a bounce buffer, not the destination.
    pub fn bounced(&self) -> bool {
        self.target != self.dst
    }

    /// The failure of this command with `cause`; which block failed is not known.
    pub fn failure(&self, cause: Cause) -> Failure {
        Failure {
            cmd: READ.command(self.blocks).cmd,
            lba: self.lba,
            cause,
        }
    }
}

/// The queued requests and the command running for one of them.
#[derive(Debug)]
pub(crate) struct ReadQueue {
    slots: [Slot; SLOTS],
    next_seq: u64,
    /// The slot whose command runs, and the command.
    running: Option<(usize, DmaCmd)>,
}

impl ReadQueue {
    pub const fn new() -> ReadQueue {
        ReadQueue {
            slots: [FREE; SLOTS],
            next_seq: 0,
            running: None,
        }
    }

    /// Is a request waiting or running?
    pub fn busy(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s.stage, Stage::Waiting | Stage::Running))
    }

    /// The oldest slot whose stage passes `f`.
    fn oldest(&self, f: impl Fn(&Stage) -> bool) -> Option<usize> {
        (0..SLOTS)
            .filter(|&i| f(&self.slots[i].stage))
            .min_by_key(|&i| self.slots[i].seq)
    }

    /// Report the oldest finished request, freeing its slot.
    fn take_finished(&mut self) -> Option<(u16, Result<(), SdError>)> {
        let i = self.oldest(|s| matches!(s, Stage::Finished(_)))?;
        let Stage::Finished(r) = self.slots[i].stage else {
            return None;
        };
        self.slots[i] = FREE;
        Some((i as u16, r))
    }
}

/// What a host driver supplies to queue its DMA reads: one read command in three steps (start,
/// see whether it ended, finish) that its synchronous path shares.
pub(crate) trait DmaReads: Host {
    /// The driver's queue.
    fn queue(&mut self) -> &mut ReadQueue;
    /// Has the host its DMA engine set up (and not given up after errors)?
    fn has_dma(&self) -> bool;
    /// Do reads go by DMA (else they are synchronous): the engine there, and PIO not chosen
    /// ([`BlockDevice::set_transfer`](crate::block::BlockDevice::set_transfer))?
    fn dma_on(&self) -> bool;
    /// DMA errors counted towards reading by PIO for good (0 on a host that never gives up).
    fn dma_errors(&self) -> u64 {
        0
    }
    /// Start one read command for the first blocks of the `len` bytes at `lba` into `dst` (as
    /// many as one command moves). The controller must be idle. A failure resets the controller.
    fn start_read(&mut self, lba: u64, dst: usize, len: usize) -> Result<DmaCmd, Failure>;
    /// What a command's end is, for a timeout's message.
    const WAIT: Wait;
    /// Has `c` ended (`Ok`, or an error, a passed deadline included)? `None` while it runs.
    /// Never waits.
    fn check_read(&mut self, c: &DmaCmd) -> Option<Result<(), Cause>>;
    /// Wait for `c` to end ([`DmaReads::check_read`]): bounded by its deadline and, in case the
    /// clock stands still, by a number of polls.
    fn wait_read(&mut self, c: &DmaCmd) -> Result<(), Cause> {
        let (started, deadline) = (c.started_us, c.deadline_us);
        let polls = deadline
            .saturating_sub(started)
            .saturating_mul(100)
            .max(10_000);
        for _ in 0..polls {
            if let Some(r) = self.check_read(c) {
                return r;
            }
        }
        let waited = self.now_us().saturating_sub(started);
        Err(self.timeout(Self::WAIT, waited))
    }
    /// After `c` ended with `r`: on success the data handed to the CPU (cache maintenance, the
    /// copy out of a bounce buffer) and the counters; on failure the controller reset. The
    /// failure names the command's first LBA.
    fn complete_read(&mut self, c: &DmaCmd, r: Result<(), Cause>) -> Result<(), Failure>;
    /// One read command of the request loop (DMA or programmed I/O), waiting for it.
    fn read_once(&mut self, start: u64, buf: &mut [u8]) -> Result<(), Failure>;
    /// A whole synchronous read, with the request loop's retries (the queue drained or empty).
    fn read_now(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError>;
    /// Count a request taken into the queue.
    fn note_queued(&mut self) {}
}

/// Start, wait for and finish one read command: the synchronous path of a DMA host.
pub(crate) fn read_once_dma<H: DmaReads>(
    h: &mut H,
    start: u64,
    buf: &mut [u8],
) -> Result<(), Failure> {
    let (dst, len) = (buf.as_mut_ptr() as usize, buf.len());
    let mut off = 0;
    while off < len {
        let lba = start + (off / BLOCK_SIZE) as u64;
        let c = h.start_read(lba, dst + off, len - off)?;
        let r = h.wait_read(&c);
        h.complete_read(&c, r)?;
        off += c.bytes();
    }
    Ok(())
}

/// [`BlockDevice::submit_read`](crate::block::BlockDevice::submit_read): queued with DMA and a
/// free slot, else read now.
///
/// # Safety
/// As `submit_read`: `buf` valid for `len` bytes of writes, untouched until reported.
pub(crate) unsafe fn submit<H: DmaReads>(
    h: &mut H,
    lba: u64,
    buf: *mut u8,
    len: usize,
) -> Result<Submitted, SdError> {
    check_request(lba, len, h.info_mut().blocks)?;
    let free = h.queue().oldest(|s| *s == Stage::Free);
    let (Some(i), true, false) = (free, h.dma_on(), len == 0) else {
        // SAFETY: the caller's promise: `buf` is valid for `len` bytes of writes.
        let b = unsafe { core::slice::from_raw_parts_mut(buf, len) };
        drain(h);
        h.read_now(lba, b)?;
        return Ok(Submitted::Done);
    };
    let q = h.queue();
    let seq = q.next_seq;
    q.next_seq += 1;
    q.slots[i] = Slot {
        stage: Stage::Waiting,
        lba,
        dst: buf as usize,
        len,
        done: 0,
        seq,
    };
    h.note_queued();
    fenced(h, |h| advance(h, false));
    Ok(Submitted::Queued(i as u16))
}

/// [`BlockDevice::poll_read`](crate::block::BlockDevice::poll_read): move the queue on without
/// waiting, then report the oldest finished request.
pub(crate) fn poll<H: DmaReads>(h: &mut H) -> Option<(u16, Result<(), SdError>)> {
    if h.queue().busy() {
        fenced(h, |h| advance(h, false));
    }
    h.queue().take_finished()
}

/// Run every queued request to its end (their outcomes stay for `poll_read`).
pub(crate) fn drain<H: DmaReads>(h: &mut H) {
    if h.queue().busy() {
        fenced(h, |h| advance(h, true));
    }
}

/// Move the queue on: finish the running command if it has ended (wait for it when `block`),
/// start the next one; with `block`, until no request is left. Each turn finishes or starts a
/// command, or returns, and every wait has a deadline.
fn advance<H: DmaReads>(h: &mut H, block: bool) {
    loop {
        if let Some((i, c)) = h.queue().running {
            let r = if block {
                h.wait_read(&c)
            } else {
                match h.check_read(&c) {
                    Some(r) => r,
                    None => return,
                }
            };
            h.queue().running = None;
            match h.complete_read(&c, r) {
                Ok(()) => piece_done(h.queue(), i, c.bytes()),
                Err(f) => retry_queued(h, i, f),
            }
        }
        let Some(i) = h.queue().oldest(|s| *s == Stage::Waiting) else {
            return;
        };
        let s = h.queue().slots[i];
        let lba = s.lba + (s.done / BLOCK_SIZE) as u64;
        match h.start_read(lba, s.dst + s.done, s.len - s.done) {
            Ok(c) => {
                let q = h.queue();
                q.slots[i].stage = Stage::Running;
                q.running = Some((i, c));
            }
            Err(f) => retry_queued(h, i, f),
        }
    }
}

/// Slot `i`'s command moved `bytes`: the request is finished, or waits for its next command.
fn piece_done(q: &mut ReadQueue, i: usize, bytes: usize) {
    let s = &mut q.slots[i];
    s.done += bytes;
    s.stage = if s.done >= s.len {
        Stage::Finished(Ok(()))
    } else {
        Stage::Waiting
    };
}

/// Slot `i`'s command failed with `first` (the controller is reset): read what is left of the
/// request now, with the shared retries counting `first` as the first try, and keep the outcome.
fn retry_queued<H: DmaReads>(h: &mut H, i: usize, first: Failure) {
    let s = h.queue().slots[i];
    let start = s.lba + (s.done / BLOCK_SIZE) as u64;
    let len = s.len - s.done;
    // SAFETY: the submitter's promise (`submit`): valid for writes and untouched by anyone else
    // until the request is reported, which it is not yet.
    let buf = unsafe { core::slice::from_raw_parts_mut((s.dst + s.done) as *mut u8, len) };
    let mut first = Some(first);
    let blocks = (len / BLOCK_SIZE) as u32;
    let r = with_retries(h, &READ, start, blocks, |h| match first.take() {
        Some(f) => Err(f),
        None => h.read_once(start, buf),
    });
    h.queue().slots[i].stage = Stage::Finished(r);
}

/// [`BlockDevice`](crate::block::BlockDevice) and [`WriteBlocks`](crate::block::WriteBlocks) for
/// a driver `$t<R, C, ...>` that queues its DMA reads ([`DmaReads`]), over its fields `info`,
/// `config.max_blocks_per_command`, `pio` (reads by PIO by choice), `stats` (the counters of
/// [`CardStats`](crate::block::CardStats)) and its `write_once`: reads synchronous or queued;
/// writes synchronous; a synchronous request, or a change of transfer, first drains the queue.
macro_rules! queued_block_device {
    ($t:ident $(, $g:ident: $bound:path)*) => {
        impl<R: Regs, C: Clock $(, $g: $bound)*> BlockDevice for $t<R, C $(, $g)*> {
            type Error = SdError;

            fn num_blocks(&self) -> u64 {
                self.info.blocks
            }

            /// Read whole blocks: the queued reads drained, then checked against the capacity,
            /// split into commands of at most `Config::max_blocks_per_command` blocks (by DMA
            /// where it can), each tried up to `Config::tries` times.
            fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError> {
                $crate::sd::queue::drain(self);
                $crate::sd::queue::DmaReads::read_now(self, lba, buf)
            }

            /// [`QUEUE_DEPTH`]($crate::sd::queue::QUEUE_DEPTH) with DMA, else 0 (reads are
            /// synchronous).
            fn queue_depth(&self) -> usize {
                if $crate::sd::queue::DmaReads::dma_on(self) {
                    $crate::sd::queue::QUEUE_DEPTH
                } else {
                    0
                }
            }

            unsafe fn submit_read(
                &mut self,
                lba: u64,
                buf: *mut u8,
                len: usize,
            ) -> Result<$crate::block::Submitted, SdError> {
                // SAFETY: the caller's promise, passed on.
                unsafe { $crate::sd::queue::submit(self, lba, buf, len) }
            }

            fn poll_read(&mut self) -> Option<(u16, Result<(), SdError>)> {
                $crate::sd::queue::poll(self)
            }

            fn transfer(&self) -> Option<$crate::block::Transfer> {
                use $crate::block::Transfer;
                let dma = $crate::sd::queue::DmaReads::dma_on(self);
                Some(if dma { Transfer::Dma } else { Transfer::Pio })
            }

            /// PIO always; DMA while the engine is there.
            fn set_transfer(&mut self, t: $crate::block::Transfer) -> bool {
                let dma = t == $crate::block::Transfer::Dma;
                if dma && !$crate::sd::queue::DmaReads::has_dma(self) {
                    return false;
                }
                $crate::sd::queue::drain(self);
                self.pio = !dma;
                true
            }

            fn card_stats(&self) -> Option<$crate::block::CardStats> {
                Some($crate::block::CardStats {
                    bus: $crate::block::SdBus {
                        mode: self.info.bus_mode.name(),
                        family: self.info.bus_mode.short(),
                        clock_hz: self.info.data_clock_hz,
                        width: self.info.bus_width,
                    },
                    crc_errors: self.stats.crc_errors,
                    retries: self.stats.retries,
                    reinits: self.stats.reinits,
                    step_downs: self.stats.step_downs,
                    dma_errors: $crate::sd::queue::DmaReads::dma_errors(self),
                })
            }
        }

        impl<R: Regs, C: Clock $(, $g: $bound)*> WriteBlocks for $t<R, C $(, $g)*> {
            /// Write whole blocks (the queued reads drained first): checked against the capacity
            /// and the card's write protection (nothing is sent to a protected card), split into
            /// commands of at most `Config::max_blocks_per_command` blocks, each tried up to
            /// `Config::tries` times and finished only when the card has programmed it.
            fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), SdError> {
                $crate::sd::queue::drain(self);
                let per = self.config.max_blocks_per_command;
                $crate::sd::write_request(self, lba, buf, per, Self::write_once)
            }
        }
    };
}
pub(crate) use queued_block_device;
