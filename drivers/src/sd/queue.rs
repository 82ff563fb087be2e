//! Queued reads on a host whose DMA engine moves the data while the CPU computes, the way
//! virtio-blk queues them ([`crate::block::BlockDevice::submit_read`]): one transfer runs on the
//! controller, the others wait in a fixed-capacity queue in order, and finished ones wait for
//! [`poll`] to report them. `poll` never blocks: it looks whether the running transfer has ended
//! (the host's [`DmaReads::dma_check`], which also enforces its deadline), finishes it, and starts
//! the next. A transfer that fails is done again synchronously, with the request loop's retries
//! and recovery ([`DmaReads::read_now`]), and that outcome is reported. A synchronous request
//! (a read, a write, a re-initialisation) first [`drain`]s the queue, so the controller always has
//! one user.
//!
//! The queue holds raw buffer pointers: [`crate::block::BlockDevice::submit_read`]'s contract
//! keeps each buffer valid and untouched by its owner until its tag is reported.

use alloc::collections::VecDeque;

use super::{Failure, Host, SdError};
use crate::block::{check_request, Submitted, BLOCK_SIZE};

/// Reads a queue takes at most (in flight and waiting).
pub const QUEUE_DEPTH: usize = 4;

/// A read handed to the queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Queued {
    pub tag: u16,
    pub lba: u64,
    pub buf: *mut u8,
    pub len: usize,
}

/// The queue's state, kept in the driver.
#[derive(Debug)]
pub(crate) struct ReadQueue {
    waiting: VecDeque<Queued>,
    /// The transfer on the controller and when it started (µs).
    running: Option<(Queued, u64)>,
    done: VecDeque<(u16, Result<(), SdError>)>,
    next_tag: u16,
}

// SAFETY: the pointers are buffers the submitter lent the device until their tags are reported
// (`submit_read`'s contract); nothing in the queue is tied to a thread.
unsafe impl Send for ReadQueue {}

impl ReadQueue {
    /// An empty queue with room for [`QUEUE_DEPTH`] reads (allocated once, here).
    pub fn new() -> ReadQueue {
        ReadQueue {
            waiting: VecDeque::with_capacity(QUEUE_DEPTH),
            running: None,
            done: VecDeque::with_capacity(QUEUE_DEPTH),
            next_tag: 0,
        }
    }

    /// Reads submitted and not yet reported.
    fn held(&self) -> usize {
        self.waiting.len() + self.running.is_some() as usize + self.done.len()
    }

    /// Nothing in flight or waiting (finished reads may still wait to be reported).
    pub fn idle(&self) -> bool {
        self.running.is_none() && self.waiting.is_empty()
    }
}

impl Default for ReadQueue {
    fn default() -> Self {
        ReadQueue::new()
    }
}

/// What a host driver supplies to queue its DMA reads.
pub(crate) trait DmaReads: Host {
    /// The driver's queue.
    fn queue(&mut self) -> &mut ReadQueue;
    /// Can `r` go by DMA (its buffer reachable by the controller, or a bounce buffer big
    /// enough)? If not, [`submit`] reads it synchronously.
    fn dma_fits(&mut self, r: &Queued) -> bool;
    /// Set up the DMA and issue the read command for `r`; returns without waiting for the data.
    fn dma_start(&mut self, r: &Queued) -> Result<(), Failure>;
    /// Has `r`'s transfer, started at `started_us`, ended? `Some(Ok)`: the data are in memory
    /// (not yet handed to the CPU); `Some(Err)`: it failed, or ran past its deadline (the
    /// controller is reset); `None`: still running. Never waits.
    fn dma_check(&mut self, r: &Queued, started_us: u64) -> Option<Result<(), Failure>>;
    /// After `r` ended well: the cache maintenance that lets the CPU see the data (and the copy
    /// out of a bounce buffer).
    fn dma_finish(&mut self, r: &Queued);
    /// Read synchronously, with the request loop's retries: for a queued read that failed.
    fn read_now(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError>;
}

/// Queue a read of `len / 512` blocks at `lba` into `buf` (or read it now when it cannot go by
/// DMA). When the queue is full, the oldest transfer is waited for first.
///
/// # Safety
/// As [`crate::block::BlockDevice::submit_read`].
pub(crate) unsafe fn submit<H: DmaReads>(
    h: &mut H,
    lba: u64,
    buf: *mut u8,
    len: usize,
) -> Result<Submitted, SdError> {
    check_request(lba, len, h.info_mut().blocks)?;
    let tag = h.queue().next_tag;
    let r = Queued { tag, lba, buf, len };
    if len == 0 || !h.dma_fits(&r) {
        drain(h);
        // SAFETY: the caller's guarantee: `buf` is valid for `len` bytes of writes.
        let b = unsafe { core::slice::from_raw_parts_mut(buf, len) };
        h.read_now(lba, b)?;
        return Ok(Submitted::Done);
    }
    while h.queue().held() >= QUEUE_DEPTH && !h.queue().idle() {
        wait_one(h);
    }
    if h.queue().held() >= QUEUE_DEPTH {
        // Full of finished reads nobody has polled: read this one now instead.
        // SAFETY: as above.
        let b = unsafe { core::slice::from_raw_parts_mut(buf, len) };
        h.read_now(lba, b)?;
        return Ok(Submitted::Done);
    }
    let q = h.queue();
    q.next_tag = q.next_tag.wrapping_add(1);
    q.waiting.push_back(r);
    kick(h);
    Ok(Submitted::Queued(tag))
}

/// A finished read, if any; starts the next waiting one. Never blocks.
pub(crate) fn poll<H: DmaReads>(h: &mut H) -> Option<(u16, Result<(), SdError>)> {
    advance(h);
    h.queue().done.pop_front()
}

/// Wait for every transfer in flight or waiting (their outcomes stay for [`poll`]).
pub(crate) fn drain<H: DmaReads>(h: &mut H) {
    while !h.queue().idle() {
        wait_one(h);
    }
}

/// Start waiting reads while the controller is free.
fn kick<H: DmaReads>(h: &mut H) {
    while h.queue().running.is_none() {
        let Some(r) = h.queue().waiting.pop_front() else {
            return;
        };
        match h.dma_start(&r) {
            Ok(()) => {
                let now = h.now_us();
                h.queue().running = Some((r, now));
            }
            Err(_) => {
                let outcome = redo(h, &r);
                h.queue().done.push_back((r.tag, outcome));
            }
        }
    }
}

/// If the running transfer has ended, finish or redo it and start the next.
fn advance<H: DmaReads>(h: &mut H) -> bool {
    let Some((r, started)) = h.queue().running else {
        return false;
    };
    let outcome = match h.dma_check(&r, started) {
        None => return false,
        Some(Ok(())) => {
            h.dma_finish(&r);
            Ok(())
        }
        Some(Err(_)) => {
            h.queue().running = None;
            redo(h, &r)
        }
    };
    let q = h.queue();
    q.running = None;
    q.done.push_back((r.tag, outcome));
    kick(h);
    true
}

/// Wait (bounded: `dma_check` enforces each transfer's deadline) until one transfer ends.
fn wait_one<H: DmaReads>(h: &mut H) {
    kick(h);
    while h.queue().running.is_some() && !advance(h) {}
}

/// Read `r` again synchronously (its buffer is still the device's by `submit_read`'s contract),
/// after bringing the card back to "tran" (it may still be sending the failed transfer's blocks).
fn redo<H: DmaReads>(h: &mut H, r: &Queued) -> Result<(), SdError> {
    super::recover(h, false);
    debug_assert!(r.len.is_multiple_of(BLOCK_SIZE));
    // SAFETY: `r.buf` is valid for `r.len` bytes and untouched by its owner until `r.tag` is
    // reported (`submit_read`'s contract); no transfer writes it now (it failed and the
    // controller was reset).
    let b = unsafe { core::slice::from_raw_parts_mut(r.buf, r.len) };
    h.read_now(r.lba, b)
}
