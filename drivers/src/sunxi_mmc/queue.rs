//! Queued reads ([`BlockDevice::submit_read`](crate::block::BlockDevice::submit_read) and
//! `poll_read`), as virtio-blk has them: the IDMAC moves one request's data while the caller
//! computes, the others wait their turn in a fixed array of [`SLOTS`] (no allocation per
//! request). The controller runs one command at a time, so "in flight" means one running and the
//! rest waiting; a request's tag is its slot.
//!
//! - `submit_read` checks the request (range, whole blocks), puts it in a free slot and, if the
//!   controller is idle, starts its command at once. With every slot taken (more pieces than
//!   [`QUEUE_DEPTH`] pages bring), it drains the queue and reads the request synchronously.
//! - `poll_read` never waits: if the running command has ended (IDST receive interrupt, RINT data
//!   over and auto command done) it finishes it, starts the next command (the next piece of the
//!   same request through the bounce buffer, or the next request), and reports a finished request.
//! - A command that fails (or outlives its deadline) resets the controller, and what is left of
//!   its request is read synchronously through the shared retries ([`sd::with_retries`], the
//!   failed command counting as the first try, so the card is recovered as after any failure);
//!   the outcome is reported as the request's. The buffer is still the driver's alone then.
//! - A synchronous `read_blocks` or `write_blocks` (and `into_parts`) first drains the queue:
//!   every queued request is run to its end, its outcome kept for `poll_read`, so the controller
//!   is never shared.

use super::idmac::DmaCmd;
use super::{Clock, DmaMemory, Regs, SdError, SunxiMmc, BLOCK_SIZE};
use crate::block::{check_request, Submitted};
use crate::sd::{self, Failure, READ};

/// Read requests the driver takes queued ([`crate::block::BlockDevice::queue_depth`] with DMA).
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

/// The queued requests and the command running for one of them.
#[derive(Debug)]
pub(super) struct Queue {
    slots: [Slot; SLOTS],
    next_seq: u64,
    /// The slot whose command runs, and the command.
    running: Option<(usize, DmaCmd)>,
}

impl Queue {
    pub const fn new() -> Queue {
        Queue {
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

impl<R: Regs, C: Clock, D: DmaMemory> SunxiMmc<R, C, D> {
    /// [`crate::block::BlockDevice::submit_read`]: queued with DMA and a free slot, else read now.
    ///
    /// # Safety
    /// As `submit_read`: `buf` valid for `len` bytes of writes, untouched until reported.
    pub(super) unsafe fn submit(
        &mut self,
        lba: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<Submitted, SdError> {
        check_request(lba, len, self.info.blocks)?;
        let free = self.queue.oldest(|s| *s == Stage::Free);
        let (Some(i), true, false) = (free, self.area.is_some(), len == 0) else {
            // SAFETY: the caller's promise: `buf` is valid for `len` bytes of writes.
            let b = unsafe { core::slice::from_raw_parts_mut(buf, len) };
            self.drain();
            self.read_now(lba, b)?;
            return Ok(Submitted::Done);
        };
        let seq = self.queue.next_seq;
        self.queue.next_seq += 1;
        self.queue.slots[i] = Slot {
            stage: Stage::Waiting,
            lba,
            dst: buf as usize,
            len,
            done: 0,
            seq,
        };
        self.stats.queued_reads += 1;
        sd::fenced(self, |h| h.advance(false));
        Ok(Submitted::Queued(i as u16))
    }

    /// [`crate::block::BlockDevice::poll_read`]: move the queue on without waiting, then report
    /// the oldest finished request.
    pub(super) fn poll_queue(&mut self) -> Option<(u16, Result<(), SdError>)> {
        if self.queue.busy() {
            sd::fenced(self, |h| h.advance(false));
        }
        self.queue.take_finished()
    }

    /// Run every queued request to its end (their outcomes stay for `poll_read`).
    pub(super) fn drain(&mut self) {
        if self.queue.busy() {
            sd::fenced(self, |h| h.advance(true));
        }
    }

    /// Move the queue on: finish the running command if it has ended (wait for it when `block`),
    /// start the next one; with `block`, until no request is left. Each turn finishes or starts
    /// a command, or returns, and every wait has a deadline.
    fn advance(&mut self, block: bool) {
        loop {
            if let Some((i, c)) = self.queue.running {
                let r = if block {
                    self.wait_dma_read(&c)
                } else {
                    match self.dma_check(&c) {
                        Some(r) => r,
                        None => return,
                    }
                };
                self.queue.running = None;
                match self.complete_dma_read(&c, r) {
                    Ok(()) => self.piece_done(i, c.bytes()),
                    Err(f) => self.retry_queued(i, f),
                }
            }
            let Some(i) = self.queue.oldest(|s| *s == Stage::Waiting) else {
                return;
            };
            let s = self.queue.slots[i];
            let lba = s.lba + (s.done / BLOCK_SIZE) as u64;
            match self.start_dma_read(lba, s.dst + s.done, s.len - s.done) {
                Ok(c) => {
                    self.queue.slots[i].stage = Stage::Running;
                    self.queue.running = Some((i, c));
                }
                Err(f) => self.retry_queued(i, f),
            }
        }
    }

    /// Slot `i`'s command moved `bytes`: the request is finished, or waits for its next command.
    fn piece_done(&mut self, i: usize, bytes: usize) {
        let s = &mut self.queue.slots[i];
        s.done += bytes;
        s.stage = if s.done >= s.len {
            Stage::Finished(Ok(()))
        } else {
            Stage::Waiting
        };
    }

    /// Slot `i`'s command failed with `first` (the controller is reset): read what is left of
    /// the request now, with the shared retries counting `first` as the first try, and keep the
    /// outcome.
    fn retry_queued(&mut self, i: usize, first: Failure) {
        let s = self.queue.slots[i];
        let start = s.lba + (s.done / BLOCK_SIZE) as u64;
        let len = s.len - s.done;
        // SAFETY: the submitter's promise (`submit`): valid for writes and untouched by anyone
        // else until the request is reported, which it is not yet.
        let buf = unsafe { core::slice::from_raw_parts_mut((s.dst + s.done) as *mut u8, len) };
        let mut first = Some(first);
        let blocks = (len / BLOCK_SIZE) as u32;
        let r = sd::with_retries(self, &READ, start, blocks, |h| match first.take() {
            Some(f) => Err(f),
            None => h.read_once(start, buf),
        });
        self.queue.slots[i].stage = Stage::Finished(r);
    }
}
