//! The memory side of the DMA read path: the [`DmaMemory`] hook the platform supplies (cache
//! maintenance and bus addresses; the driver has no architecture code) and the driver's own DMA
//! area, one heap allocation holding the IDMAC's descriptor chain and the bounce buffer it fills.
//!
//! The area is allocated once, aligned to [`DMA_ALIGN`] and made of whole cache lines: the
//! descriptors in the first lines, the bounce buffer after them, so invalidating the buffer never
//! touches a descriptor or anything of the caller's. It lives on the heap, so the driver struct may
//! move between requests; its bus address is taken once, when it is allocated. The CPU reaches it
//! only through raw pointers (volatile stores for the descriptors, a copy out of the buffer after
//! the transfer), never through a reference the controller's writes could invalidate.

use alloc::alloc::{alloc_zeroed, dealloc, Layout};
use core::ptr::NonNull;
use core::sync::atomic::{compiler_fence, Ordering};

use super::regs::desc;

/// Cache line size the DMA area and every [`DmaMemory::from_device`] range are aligned to (the
/// Cortex-A7's 64 bytes; a multiple of smaller lines).
pub const DMA_ALIGN: usize = 64;
/// Bytes of the bounce buffer: the most one DMA read command moves (128 blocks).
pub const DMA_BUFFER_BYTES: usize = 64 << 10;
/// Blocks of the bounce buffer.
pub const DMA_BUFFER_BLOCKS: u16 = (DMA_BUFFER_BYTES / crate::block::BLOCK_SIZE) as u16;
/// Bytes of one descriptor's buffer: 4 KiB fits every variant's size field (13 bits on the A10,
/// 16 on the H3) without the "0 means the maximum" case.
pub const DMA_DESC_BYTES: usize = 4096;
/// Descriptors the bounce buffer needs.
pub const DMA_DESCRIPTORS: usize = DMA_BUFFER_BYTES / DMA_DESC_BYTES;
/// Bytes of the descriptor chain, in whole cache lines.
const DESC_AREA: usize = (DMA_DESCRIPTORS * desc::SIZE).next_multiple_of(DMA_ALIGN);
/// Bytes of the whole area.
const AREA_BYTES: usize = DESC_AREA + DMA_BUFFER_BYTES;

/// What the driver needs of the platform to let the controller's IDMAC write memory: bus
/// addresses and cache maintenance. Given to [`super::SunxiMmc::init_dma`]; [`NoDma`] is the
/// polled FIFO path.
pub trait DmaMemory {
    /// `false` for [`NoDma`]: the driver then never allocates a DMA area nor calls the methods.
    const ENABLED: bool = true;

    /// The bus address the controller uses for the CPU's `[addr, addr + len)`, contiguous; `None`
    /// if the controller cannot reach all of it (then the driver stays on PIO). Identity on the
    /// H3. Called once, for the whole DMA area.
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32>;

    /// The CPU wrote `[addr, addr + len)` and the controller is about to read it: clean (write
    /// back) the data cache over it. Called for the descriptors before each transfer.
    fn to_device(&mut self, addr: usize, len: usize);

    /// The controller writes (or wrote) `[addr, addr + len)`: invalidate the data cache over it,
    /// discarding what the CPU has cached, so the CPU reads memory. Called for the bounce buffer
    /// before each transfer (no dirty line may be written back over the controller's data) and
    /// after it (drop lines fetched in between).
    ///
    /// # Safety
    /// The driver calls it only on whole cache lines ([`DMA_ALIGN`]) of its own DMA area, which no
    /// reference points into; an implementation may rely on that.
    unsafe fn from_device(&mut self, addr: usize, len: usize);
}

/// No DMA: every transfer goes through the FIFO (programmed I/O).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoDma;

impl DmaMemory for NoDma {
    const ENABLED: bool = false;

    fn bus_address(&mut self, _addr: usize, _len: usize) -> Option<u32> {
        None
    }

    fn to_device(&mut self, _addr: usize, _len: usize) {}

    unsafe fn from_device(&mut self, _addr: usize, _len: usize) {}
}

/// The descriptor chain and bounce buffer, owned by the driver.
#[derive(Debug)]
pub(super) struct DmaArea {
    ptr: NonNull<u8>,
    /// The bus address of `ptr`.
    bus: u32,
}

// SAFETY: the area is memory the driver owns alone; nothing in it is tied to a thread.
unsafe impl Send for DmaArea {}

impl DmaArea {
    fn layout() -> Layout {
        // Both are constants: a non-zero size, a power-of-two alignment.
        Layout::from_size_align(AREA_BYTES, DMA_ALIGN).expect("DMA area layout")
    }

    /// Allocate the area and get its bus address from `mem`; `None` if the allocation fails or the
    /// controller cannot reach it.
    pub fn new<D: DmaMemory>(mem: &mut D) -> Option<DmaArea> {
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(Self::layout()) })?;
        // Freed by its drop if the controller cannot reach it.
        let mut area = DmaArea { ptr, bus: 0 };
        area.bus = mem.bus_address(area.desc_addr(), AREA_BYTES)?;
        let fits = area.bus % 4 == 0 && area.bus.checked_add(AREA_BYTES as u32 - 1).is_some();
        fits.then_some(area)
    }

    /// CPU address of the first descriptor.
    pub fn desc_addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Bus address of the first descriptor (DLBA).
    pub fn desc_bus(&self) -> u32 {
        self.bus
    }

    /// CPU address of the bounce buffer.
    pub fn buffer_addr(&self) -> usize {
        self.desc_addr() + DESC_AREA
    }

    /// Write the chain for a transfer of `bytes` (1..=[`DMA_BUFFER_BYTES`]) into the bounce
    /// buffer: [`DMA_DESC_BYTES`] per descriptor, each owned by the IDMAC, chained, the first
    /// marked first, the last marked last with its completion status on. Returns the bytes of
    /// the chain written, to clean.
    pub fn write_chain(&mut self, bytes: usize) -> usize {
        let bytes = bytes.clamp(1, DMA_BUFFER_BYTES);
        let n = bytes.div_ceil(DMA_DESC_BYTES);
        let base = self.ptr.as_ptr().cast::<u32>();
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
            let buffer = self.bus + (DESC_AREA + i * DMA_DESC_BYTES) as u32;
            let next = if last {
                0
            } else {
                self.bus + ((i + 1) * desc::SIZE) as u32
            };
            for (w, v) in [config, size as u32, buffer, next].into_iter().enumerate() {
                // SAFETY: descriptor i < DMA_DESCRIPTORS lies in the area's first DESC_AREA
                // bytes, which are aligned for u32; the area is ours and no reference points in.
                unsafe { base.add(i * 4 + w).write_volatile(v.to_le()) };
            }
        }
        n * desc::SIZE
    }

    /// Copy the first `dst.len()` (at most [`DMA_BUFFER_BYTES`]) bytes of the bounce buffer out,
    /// after the transfer and the invalidate.
    pub fn copy_out(&self, dst: &mut [u8]) {
        let len = dst.len().min(DMA_BUFFER_BYTES);
        // The controller's writes are not the compiler's: no read of the buffer may move above
        // the waits for the end of the transfer.
        compiler_fence(Ordering::SeqCst);
        // SAFETY: `len` bytes from the buffer's start stay inside the area; `dst` is another
        // allocation (the caller's), and the area is never borrowed.
        unsafe {
            core::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(DESC_AREA), dst.as_mut_ptr(), len)
        };
    }
}

impl Drop for DmaArea {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout()) };
    }
}
