//! virtio-blk on the MMIO bus through the `virtio-drivers` crate, as a [`BlockDevice`]. Memory is
//! identity-mapped, so DMA addresses are virtual addresses and buffers are shared in place.

use alloc::alloc::{alloc_zeroed, dealloc, Layout};
use core::fmt;
use core::ptr::NonNull;
use drivers::block::BlockDevice;
use virtio_drivers::device::blk::VirtIOBlk;
use virtio_drivers::transport::mmio::{MmioTransport, VirtIOHeader};
use virtio_drivers::transport::{DeviceType, Transport};
use virtio_drivers::{BufferDirection, Hal, PhysAddr, PAGE_SIZE};

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

/// The first virtio block device on the board's MMIO bus.
pub struct VirtioBlock {
    blk: VirtIOBlk<IdentityHal, MmioTransport<'static>>,
    blocks: u64,
}

// SAFETY: the device's MMIO registers and DMA queues are only touched through `&mut self`, and the
// block device moves into the page cache's lock; no core ever uses it without holding that lock.
unsafe impl Send for VirtioBlock {}

#[derive(Debug)]
pub struct VirtioError {
    pub lba: u64,
    pub blocks: u64,
    pub err: virtio_drivers::Error,
}

impl fmt::Display for VirtioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "virtio-blk read of {} blocks at LBA {} failed: {:?}",
            self.blocks, self.lba, self.err
        )
    }
}

/// Most bytes per request (QEMU accepts larger; this keeps one request's DMA buffer modest).
const MAX_REQUEST: usize = 1 << 20;

impl VirtioBlock {
    /// Probe the board's virtio-mmio slots for a block device.
    pub fn probe() -> Option<Self> {
        use crate::board::{BLOCK_BASES, BLOCK_COUNT, BLOCK_STRIDE};
        for i in (0..BLOCK_COUNT).rev() {
            let addr = BLOCK_BASES[0] + i * BLOCK_STRIDE;
            let header = NonNull::new(addr as *mut VirtIOHeader)?;
            // SAFETY: addr is a virtio-mmio slot of this board, mapped as device memory, not
            // otherwise used.
            let Ok(t) = (unsafe { MmioTransport::new(header, BLOCK_STRIDE) }) else {
                continue;
            };
            if t.device_type() != DeviceType::Block {
                continue;
            }
            let blk = VirtIOBlk::<IdentityHal, _>::new(t).ok()?;
            let blocks = blk.capacity();
            return Some(Self { blk, blocks });
        }
        None
    }
}

impl BlockDevice for VirtioBlock {
    type Error = VirtioError;

    fn num_blocks(&self) -> u64 {
        self.blocks
    }

    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), VirtioError> {
        let mut at = lba;
        for chunk in buf.chunks_mut(MAX_REQUEST) {
            let n = (chunk.len() / 512) as u64;
            self.blk
                .read_blocks(at as usize, chunk)
                .map_err(|err| VirtioError {
                    lba: at,
                    blocks: n,
                    err,
                })?;
            at += n;
        }
        Ok(())
    }
}
