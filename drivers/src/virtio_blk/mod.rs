//! virtio-blk through the `virtio-drivers` crate, as a [`BlockDevice`], over any virtio
//! transport: the MMIO bus on a board ([`VirtioBlock::probe_mmio`]), a fake device in tests
//! ([`VirtioBlock::new`]). Memory is identity-mapped, so DMA addresses are virtual addresses and
//! buffers are shared in place.
//!
//! The crate is adopted rather than written again: it keeps the virtqueues, offers non-blocking
//! requests (`read_blocks_nb`, `peek_used`, `complete_read_blocks`) for queued reads, and reports a
//! device's failures as error values. What it lacks for the page cache, reads queued and
//! synchronous requests mixed on one queue, is the request slots here.
//!
//! Reads can be queued: [`BlockDevice::submit_read`] puts a request on the virtqueue and returns at
//! once, the device fills the buffer while the cores compute, and [`BlockDevice::poll_read`] reports
//! it finished. With indirect descriptors each request takes one ring entry, so up to [`SLOTS`]
//! are in flight. A synchronous [`BlockDevice::read_blocks`] goes through the same queue and keeps
//! any other request that finishes meanwhile for `poll_read`, so the two kinds mix safely (the
//! crate's own blocking read would fail on finding another request's completion first).
//!
//! Writes ([`WriteBlocks::write_blocks`], used only for the prompt-cache file when the configuration
//! allows writing) take the same slots and are synchronous: each request is submitted and waited
//! for before the next one (and before `write_blocks` returns). A virtio-blk device may complete
//! queued requests in any order, so waiting is the only way to know the payload is written before
//! the header that marks it valid; and a write happens once per run, off the token path, so there
//! is nothing worth overlapping it with. A device that offers VIRTIO_BLK_F_RO refuses writes before
//! anything is queued. [`WriteBlocks::flush`] waits for the requests in flight, then sends a
//! virtio flush (a no-op unless the device offers VIRTIO_BLK_F_FLUSH).

use crate::block::{check_request, BlockDevice, Op, Submitted, WriteBlocks};
use alloc::alloc::{alloc_zeroed, dealloc, Layout};
use alloc::boxed::Box;
use core::fmt;
use core::ptr::NonNull;
use virtio_drivers::device::blk::{BlkReq, BlkResp, VirtIOBlk};
use virtio_drivers::transport::mmio::{MmioTransport, VirtIOHeader};
use virtio_drivers::transport::{DeviceType, Transport};
use virtio_drivers::{BufferDirection, Hal, PhysAddr, PAGE_SIZE};

/// DMA for identity-mapped memory: buffers are shared in place, DMA pages come from the heap.
#[derive(Debug)]
pub struct IdentityHal;

// SAFETY: memory is identity-mapped and coherent for the device (QEMU); DMA pages come from the
// heap, page-aligned and zeroed, and are freed with the same layout.
unsafe impl Hal for IdentityHal {
    fn dma_alloc(pages: usize, _dir: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let layout = Layout::from_size_align(pages * PAGE_SIZE, PAGE_SIZE).expect("DMA layout");
        // SAFETY: non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        let p = NonNull::new(p).expect("out of memory for virtio DMA");
        (p.as_ptr() as PhysAddr, p)
    }
    unsafe fn dma_dealloc(_paddr: PhysAddr, vaddr: NonNull<u8>, pages: usize) -> i32 {
        let layout = Layout::from_size_align(pages * PAGE_SIZE, PAGE_SIZE).expect("DMA layout");
        // SAFETY: allocated by dma_alloc with this layout.
        unsafe { dealloc(vaddr.as_ptr(), layout) };
        0
    }
    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        NonNull::new(paddr as *mut u8).expect("null MMIO address")
    }
    unsafe fn share(buffer: NonNull<[u8]>, _dir: BufferDirection) -> PhysAddr {
        buffer.as_ptr() as *mut u8 as PhysAddr
    }
    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _dir: BufferDirection) {}
}

/// Requests in flight at most (the crate's queue has 16 entries; indirect descriptors use one each).
pub const SLOTS: usize = 16;

/// One request's header and status, at a fixed address while the device owns them.
#[derive(Default)]
struct Slot {
    req: BlkReq,
    resp: BlkResp,
    /// The request's buffer.
    buf: usize,
    len: usize,
    lba: u64,
    /// Ring token while in flight.
    token: Option<u16>,
    /// A write (the buffer is only read by the device).
    write: bool,
    /// Finished, waiting for `poll_read` to hand it over (the slot is busy until then).
    finished: Option<Result<(), virtio_drivers::Error>>,
    busy: bool,
}

/// A virtio block device (the first on the board's MMIO bus, or the one a transport reaches).
pub struct VirtioBlock<T: Transport = MmioTransport<'static>> {
    blk: VirtIOBlk<IdentityHal, T>,
    blocks: u64,
    /// Boxed: the device holds pointers to the headers while requests are in flight.
    slots: Box<[Slot; SLOTS]>,
}

impl<T: Transport> fmt::Debug for VirtioBlock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VirtioBlock")
            .field("blocks", &self.blocks)
            .finish_non_exhaustive()
    }
}

// SAFETY: the device's MMIO registers and DMA queues are only touched through `&mut self`, and the
// block device moves into the page cache's lock; no core ever uses it without holding that lock.
unsafe impl<T: Transport> Send for VirtioBlock<T> {}

#[derive(Debug)]
pub struct VirtioError {
    pub op: Op,
    pub lba: u64,
    pub blocks: u64,
    pub err: virtio_drivers::Error,
}

impl fmt::Display for VirtioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.op, self.err) {
            (Op::Write, virtio_drivers::Error::Unsupported) => write!(
                f,
                "virtio-blk write of {} blocks at LBA {} refused: the device is read-only \
                 (VIRTIO_BLK_F_RO; is the card image attached with readonly=on?)",
                self.blocks, self.lba
            ),
            (Op::Flush, err) => write!(f, "virtio-blk flush failed: {err:?}"),
            (op, err) => write!(
                f,
                "virtio-blk {op} of {} blocks at LBA {} failed: {err:?}",
                self.blocks, self.lba
            ),
        }
    }
}

/// Most bytes per request (QEMU accepts larger; this keeps one request's DMA buffer modest).
const MAX_REQUEST: usize = 1 << 20;

impl VirtioBlock {
    /// The first block device in `count` virtio-mmio slots of `stride` bytes from `first`,
    /// probed from the last slot down.
    ///
    /// # Safety
    /// Every slot must be a virtio-mmio register block mapped as device memory, used by nothing
    /// else.
    pub unsafe fn probe_mmio(first: usize, count: usize, stride: usize) -> Option<Self> {
        for i in (0..count).rev() {
            let header = NonNull::new((first + i * stride) as *mut VirtIOHeader)?;
            // SAFETY: the caller's guarantee for the slot.
            let Ok(t) = (unsafe { MmioTransport::new(header, stride) }) else {
                continue;
            };
            if t.device_type() == DeviceType::Block {
                return VirtioBlock::new(t);
            }
        }
        None
    }
}

impl<T: Transport> VirtioBlock<T> {
    /// The block device behind `transport`, set up; `None` if it is not one or refuses the
    /// driver's features.
    pub fn new(transport: T) -> Option<Self> {
        if transport.device_type() != DeviceType::Block {
            return None;
        }
        let blk = VirtIOBlk::<IdentityHal, T>::new(transport).ok()?;
        let blocks = blk.capacity();
        Some(Self {
            blk,
            blocks,
            slots: Box::new(core::array::from_fn(|_| Slot::default())),
        })
    }

    fn error(&self, i: usize, err: virtio_drivers::Error) -> VirtioError {
        let s = &self.slots[i];
        VirtioError {
            op: if s.write { Op::Write } else { Op::Read },
            lba: s.lba,
            blocks: (s.len / 512) as u64,
            err,
        }
    }

    /// Take the next finished request off the used ring into its slot; false if none has finished.
    fn reap(&mut self) -> bool {
        let Some(token) = self.blk.peek_used() else {
            return false;
        };
        let Some(i) = self.slots.iter().position(|s| s.token == Some(token)) else {
            // Not ours: nothing to complete it with. Cannot happen (every request is submitted here).
            return false;
        };
        let s = &mut self.slots[i];
        // SAFETY: the same header, buffer and status that were queued with this token; the buffer is
        // still reserved for the device by the `submit_read` contract (for a write, `write_blocks`
        // holds it borrowed until the request is reaped).
        let r = unsafe {
            if s.write {
                let buf = core::slice::from_raw_parts(s.buf as *const u8, s.len);
                self.blk
                    .complete_write_blocks(token, &s.req, buf, &mut s.resp)
            } else {
                let buf = core::slice::from_raw_parts_mut(s.buf as *mut u8, s.len);
                self.blk
                    .complete_read_blocks(token, &s.req, buf, &mut s.resp)
            }
        };
        s.token = None;
        s.finished = Some(r);
        true
    }

    /// Queue one request (at most [`MAX_REQUEST`] bytes), waiting for a free ring entry if need be:
    /// a read into `buf`, or with `write` a write of `buf`'s bytes.
    ///
    /// # Safety
    /// As [`BlockDevice::submit_read`] (for a write: `buf .. buf + len` valid for reads and not
    /// written or freed until the request is reaped).
    unsafe fn queue(
        &mut self,
        lba: u64,
        buf: *mut u8,
        len: usize,
        write: bool,
    ) -> Result<usize, VirtioError> {
        let op = if write { Op::Write } else { Op::Read };
        let i = loop {
            if let Some(i) = self.slots.iter().position(|s| !s.busy) {
                break i;
            }
            // Every slot busy: some are finished and not yet handed over, or in flight.
            if !self.reap() {
                core::hint::spin_loop();
            }
            if self.slots.iter().all(|s| s.busy && s.token.is_none()) {
                // All finished but none handed over: the caller must poll first.
                return Err(VirtioError {
                    op,
                    lba,
                    blocks: (len / 512) as u64,
                    err: virtio_drivers::Error::QueueFull,
                });
            }
        };
        loop {
            let s = &mut self.slots[i];
            s.lba = lba;
            s.buf = buf as usize;
            s.len = len;
            // SAFETY: the header and status live in the boxed slot until completion; the buffer is
            // the caller's, reserved for the device by the contract.
            let r = unsafe {
                if write {
                    let b = core::slice::from_raw_parts(buf as *const u8, len);
                    self.blk
                        .write_blocks_nb(lba as usize, &mut s.req, b, &mut s.resp)
                } else {
                    let b = core::slice::from_raw_parts_mut(buf, len);
                    self.blk
                        .read_blocks_nb(lba as usize, &mut s.req, b, &mut s.resp)
                }
            };
            match r {
                Ok(token) => {
                    let s = &mut self.slots[i];
                    s.token = Some(token);
                    s.write = write;
                    s.busy = true;
                    s.finished = None;
                    return Ok(i);
                }
                Err(virtio_drivers::Error::QueueFull) => {
                    if !self.reap() {
                        core::hint::spin_loop();
                    }
                }
                Err(err) => {
                    return Err(VirtioError {
                        op,
                        lba,
                        blocks: (len / 512) as u64,
                        err,
                    })
                }
            }
        }
    }

    /// Wait for slot `i` and free it.
    fn wait(&mut self, i: usize) -> Result<(), VirtioError> {
        while self.slots[i].finished.is_none() {
            if !self.reap() {
                core::hint::spin_loop();
            }
        }
        let r = self.slots[i].finished.take().unwrap_or(Ok(()));
        self.slots[i].busy = false;
        r.map_err(|e| self.error(i, e))
    }
}

impl<T: Transport> BlockDevice for VirtioBlock<T> {
    type Error = VirtioError;

    fn num_blocks(&self) -> u64 {
        self.blocks
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), VirtioError> {
        check_request(lba, buf.len(), self.blocks).map_err(|_| VirtioError {
            op: Op::Read,
            lba,
            blocks: (buf.len() / 512) as u64,
            err: virtio_drivers::Error::InvalidParam,
        })?;
        let mut at = lba;
        for chunk in buf.chunks_mut(MAX_REQUEST) {
            let n = (chunk.len() / 512) as u64;
            // SAFETY: `chunk` is borrowed mutably for this whole call, and `wait` returns only once
            // the device is done with it.
            let i = unsafe { self.queue(at, chunk.as_mut_ptr(), chunk.len(), false) }?;
            self.wait(i)?;
            at += n;
        }
        Ok(())
    }

    fn queue_depth(&self) -> usize {
        SLOTS
    }

    unsafe fn submit_read(
        &mut self,
        lba: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<Submitted, VirtioError> {
        let bad = |err| VirtioError {
            op: Op::Read,
            lba,
            blocks: (len / 512) as u64,
            err,
        };
        check_request(lba, len, self.blocks)
            .map_err(|_| bad(virtio_drivers::Error::InvalidParam))?;
        if len > MAX_REQUEST {
            return Err(bad(virtio_drivers::Error::InvalidParam));
        }
        // SAFETY: the caller's guarantee, passed on.
        let i = unsafe { self.queue(lba, buf, len, false) }?;
        Ok(Submitted::Queued(i as u16))
    }

    fn poll_read(&mut self) -> Option<(u16, Result<(), VirtioError>)> {
        let i = match self
            .slots
            .iter()
            .position(|s| s.busy && s.finished.is_some())
        {
            Some(i) => i,
            None => {
                if !self.reap() {
                    return None;
                }
                self.slots
                    .iter()
                    .position(|s| s.busy && s.finished.is_some())?
            }
        };
        let r = self.slots[i].finished.take().unwrap_or(Ok(()));
        self.slots[i].busy = false;
        Some((i as u16, r.map_err(|e| self.error(i, e))))
    }
}

impl<T: Transport> WriteBlocks for VirtioBlock<T> {
    /// Synchronous (see the module docs): each piece of at most `MAX_REQUEST` bytes is queued and
    /// waited for before the next.
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), VirtioError> {
        let blocks = (buf.len() / 512) as u64;
        let bad = |err| VirtioError {
            op: Op::Write,
            lba,
            blocks,
            err,
        };
        check_request(lba, buf.len(), self.blocks)
            .map_err(|_| bad(virtio_drivers::Error::InvalidParam))?;
        if self.blk.readonly() {
            return Err(bad(virtio_drivers::Error::Unsupported));
        }
        let mut at = lba;
        for chunk in buf.chunks(MAX_REQUEST) {
            let n = (chunk.len() / 512) as u64;
            // SAFETY: `chunk` is borrowed for this whole call and only read by the device, and
            // `wait` returns only once the device is done with it.
            let i = unsafe { self.queue(at, chunk.as_ptr() as *mut u8, chunk.len(), true) }?;
            self.wait(i)?;
            at += n;
        }
        Ok(())
    }

    /// Wait until no request is in flight (finished reads stay for `poll_read`), then flush: the
    /// crate's flush is a blocking request that must be the only one on the ring.
    fn flush(&mut self) -> Result<(), VirtioError> {
        while self.slots.iter().any(|s| s.token.is_some()) {
            if !self.reap() {
                core::hint::spin_loop();
            }
        }
        self.blk.flush().map_err(|err| VirtioError {
            op: Op::Flush,
            lba: 0,
            blocks: 0,
            err,
        })
    }
}

#[cfg(test)]
mod tests;
