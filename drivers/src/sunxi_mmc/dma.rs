//! The memory side of the DMA read path: the [`DmaMemory`] hook the platform supplies (cache
//! maintenance and bus addresses; the driver has no architecture code) and the driver's own DMA
//! area, one heap allocation holding the IDMAC's descriptor chain and the bounce buffer.
//!
//! The area is allocated once, aligned to [`DMA_ALIGN`] and made of whole cache lines: the
//! descriptors in the first lines, the bounce buffer after them, so invalidating the buffer never
//! touches a descriptor or anything of the caller's. It lives on the heap, so the driver struct may
//! move between requests; its bus address is taken once, when it is allocated. The CPU reaches it
//! only through raw pointers (volatile stores for the descriptors, a copy out of the buffer after
//! the transfer), never through a reference the controller's writes could invalidate.
//!
//! A chain points either into the bounce buffer or straight into the caller's buffer (whole cache
//! lines with a bus address, see [`DmaMemory::from_device`]): [`DMA_DESCRIPTORS`] descriptors of
//! [`DMA_DESC_BYTES`] cover [`DMA_MAX_BYTES`], the most one command moves.

use core::sync::atomic::{compiler_fence, Ordering};

use super::regs::desc;
pub(super) use crate::dma::bus_range_fits;
use crate::dma::{Area, DmaMemory, DMA_ALIGN};

/// Bytes of the bounce buffer: the most one DMA read command moves when the caller's buffer cannot
/// take the data directly (128 blocks).
pub const DMA_BUFFER_BYTES: usize = 64 << 10;
/// Blocks of the bounce buffer.
pub const DMA_BUFFER_BLOCKS: u16 = (DMA_BUFFER_BYTES / crate::block::BLOCK_SIZE) as u16;
/// The most one DMA read command moves straight into the caller's buffer: 1 MiB, the largest
/// request the page cache makes (a page, or an extent piece of one).
pub const DMA_MAX_BYTES: usize = 1 << 20;
/// Blocks of [`DMA_MAX_BYTES`].
pub const DMA_MAX_BLOCKS: u16 = (DMA_MAX_BYTES / crate::block::BLOCK_SIZE) as u16;
/// Bytes of one descriptor's buffer. The size field is 16 bits on the H3 (Linux binds its MMC0 as
/// `sun7i-a20-mmc`, `idma_des_size_bits = 16`; QEMU's model takes up to 64 KiB) but 13 bits on the
/// A10, and its value 0 means "the maximum" to Linux and QEMU where Allwinner's manual says
/// "skip this buffer". 4 KiB is far below every limit and never 0: 256 descriptors (4 KiB of
/// chain, allocated once) cover 1 MiB, and the IDMAC fetches one 16-byte descriptor per 4 KiB of
/// data, a cost lost in the card's transfer time.
pub const DMA_DESC_BYTES: usize = 4096;
/// Descriptors of the chain: enough for [`DMA_MAX_BYTES`].
pub const DMA_DESCRIPTORS: usize = DMA_MAX_BYTES / DMA_DESC_BYTES;
/// Bytes of the descriptor chain, in whole cache lines.
const DESC_AREA: usize = (DMA_DESCRIPTORS * desc::SIZE).next_multiple_of(DMA_ALIGN);
/// Bytes of the whole area.
const AREA_BYTES: usize = DESC_AREA + DMA_BUFFER_BYTES;

/// The descriptor chain and bounce buffer, owned by the driver.
#[derive(Debug)]
pub(super) struct DmaArea {
    pub mem: Area,
}

impl DmaArea {
    /// Allocate the area and get its bus address from `mem`; `None` if the allocation fails or the
    /// controller cannot reach it.
    pub fn new<D: DmaMemory>(mem: &mut D) -> Option<DmaArea> {
        Area::new(mem, AREA_BYTES).map(|mem| DmaArea { mem })
    }

    /// CPU address of the first descriptor.
    pub fn desc_addr(&self) -> usize {
        self.mem.addr()
    }

    /// Bus address of the first descriptor (DLBA).
    pub fn desc_bus(&self) -> u32 {
        self.mem.bus
    }

    /// CPU address of the bounce buffer.
    pub fn buffer_addr(&self) -> usize {
        self.desc_addr() + DESC_AREA
    }

    /// Bus address of the bounce buffer.
    pub fn buffer_bus(&self) -> u32 {
        self.mem.bus + DESC_AREA as u32
    }

    /// Write the chain for a transfer of `bytes` (1..=[`DMA_MAX_BYTES`]) to bus address `target`
    /// (the bounce buffer's, or the caller's buffer's: contiguous, `bytes` long):
    /// [`DMA_DESC_BYTES`] per descriptor, each owned by the IDMAC, chained, the first marked
    /// first, the last marked last with its completion status on. Returns the bytes of the chain
    /// written, to clean.
    pub fn write_chain(&mut self, target: u32, bytes: usize) -> usize {
        let bytes = bytes.clamp(1, DMA_MAX_BYTES);
        let n = bytes.div_ceil(DMA_DESC_BYTES);
        let base = self.mem.ptr().cast::<u32>();
        for i in 0..n {
            let last = i + 1 == n;
            let mut config = desc::OWN | desc::CHAIN;
            if i == 0 {
                config |= desc::FIRST;
            }
            config |= if last {
                desc::LAST | desc::END_OF_RING
            } else {
                desc::DISABLE_INT
            };
            let size = (bytes - i * DMA_DESC_BYTES).min(DMA_DESC_BYTES);
            let buffer = target.wrapping_add((i * DMA_DESC_BYTES) as u32);
            let next = if last {
                0
            } else {
                self.mem.bus + ((i + 1) * desc::SIZE) as u32
            };
            for (w, v) in [config, size as u32, buffer, next].into_iter().enumerate() {
                // SAFETY: descriptor i < DMA_DESCRIPTORS lies in the area's first DESC_AREA
                // bytes, which are aligned for u32; the area is ours and no reference points in.
                unsafe { base.add(i * 4 + w).write_volatile(v.to_le()) };
            }
        }
        n * desc::SIZE
    }

    /// Copy the first `len` (at most [`DMA_BUFFER_BYTES`]) bytes of the bounce buffer to `dst`,
    /// after the transfer and the invalidate.
    ///
    /// # Safety
    /// `dst` must be valid for `len` bytes of writes and not overlap the area.
    pub unsafe fn copy_out(&self, dst: *mut u8, len: usize) {
        let len = len.min(DMA_BUFFER_BYTES);
        // The controller's writes are not the compiler's: no read of the buffer may move above
        // the waits for the end of the transfer.
        compiler_fence(Ordering::SeqCst);
        // SAFETY: `len` bytes from the buffer's start stay inside the area, which is never
        // borrowed; the caller guarantees `dst`.
        unsafe { core::ptr::copy_nonoverlapping(self.mem.ptr().add(DESC_AREA), dst, len) };
    }
}
