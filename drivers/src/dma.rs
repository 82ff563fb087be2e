//! What a DMA engine needs of the platform: bus addresses and cache maintenance
//! ([`DmaMemory`]), shared by the SD host drivers ([`crate::sunxi_mmc`]'s IDMAC,
//! [`crate::sdhci`]'s ADMA2); [`NoDma`] is programmed I/O.

/// Cache line size a driver's DMA area, a buffer the controller writes directly and every
/// [`DmaMemory::from_device`] range are aligned to (the Cortex-A7's 64 bytes; a multiple of
/// smaller lines).
pub const DMA_ALIGN: usize = 64;
/// What a driver needs of the platform to let its controller's DMA engine write memory: bus
/// addresses and cache maintenance. Given to [`crate::sunxi_mmc::SunxiMmc::init_dma`] and
/// [`crate::sdhci::Sdhci::with_dma`]; [`NoDma`] is the polled FIFO path.
pub trait DmaMemory {
    /// `false` for [`NoDma`]: the driver then never allocates a DMA area nor calls the methods.
    const ENABLED: bool = true;

    /// The bus address the controller uses for the CPU's `[addr, addr + len)`, contiguous; `None`
    /// if the controller cannot reach all of it. Identity on the H3. Called once for the driver's
    /// DMA area (`None`: the driver stays on PIO), and for each read command that could go
    /// straight into the caller's buffer (`None`: that command goes through the bounce buffer).
    fn bus_address(&mut self, addr: usize, len: usize) -> Option<u32>;

    /// The CPU wrote `[addr, addr + len)` and the controller is about to read it: clean (write
    /// back) the data cache over it. Called for the descriptors before each transfer.
    fn to_device(&mut self, addr: usize, len: usize);

    /// The controller writes (or wrote) `[addr, addr + len)`: invalidate the data cache over it,
    /// discarding what the CPU has cached, so the CPU reads memory. Called for the destination of
    /// each transfer (the bounce buffer, or the caller's buffer) before it (no dirty line may be
    /// written back over the controller's data) and after it (drop lines fetched in between).
    ///
    /// # Safety
    /// The driver calls it only on whole cache lines ([`DMA_ALIGN`]: start and length) of memory
    /// it holds exclusively and that no live reference is read or written through while the
    /// controller writes it: its own DMA area, or the caller's buffer of a read while the driver
    /// holds it for the transfer (a `&mut [u8]` given to `read_blocks`, or the buffer of a
    /// `submit_read` not yet reported). An implementation may rely on that: discarding the lines
    /// loses nothing anyone else wrote.
    // "From the device" names the direction of the transfer, not a constructor.
    #[allow(clippy::wrong_self_convention)]
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

/// A driver's DMA area: `len` bytes of zeroed heap memory aligned to [`DMA_ALIGN`], allocated
/// once, with the bus address the platform gives it (the sunxi IDMAC's descriptors and bounce
/// buffer, the sdhost's control block and bounce buffer). The driver struct may move between
/// requests: the memory does not. Freed on drop unless `busy` (the engine may still read it:
/// leaked rather than handed back).
#[derive(Debug)]
pub(crate) struct Area {
    ptr: core::ptr::NonNull<u8>,
    len: usize,
    /// The bus address of the first byte.
    pub bus: u32,
    /// Handed to the engine and not yet taken back.
    pub busy: bool,
}

// SAFETY: memory the driver owns alone; nothing in it is tied to a thread.
unsafe impl Send for Area {}

impl Area {
    fn layout(len: usize) -> Option<alloc::alloc::Layout> {
        alloc::alloc::Layout::from_size_align(len.max(DMA_ALIGN), DMA_ALIGN).ok()
    }

    /// Allocate `len` bytes and take their bus address from `mem`; `None` if the allocation
    /// fails or the engine cannot reach all of it with word-aligned 32-bit addresses.
    pub fn new<D: DmaMemory>(mem: &mut D, len: usize) -> Option<Area> {
        let layout = Self::layout(len)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = core::ptr::NonNull::new(unsafe { alloc::alloc::alloc_zeroed(layout) })?;
        // Freed by its drop if the engine cannot reach it.
        let mut area = Area {
            ptr,
            len: layout.size(),
            bus: 0,
            busy: false,
        };
        area.bus = mem.bus_address(area.addr(), area.len)?;
        bus_range_fits(area.bus, area.len).then_some(area)
    }

    /// CPU address of the first byte.
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// The first byte, for raw accesses (never a reference: the engine writes it).
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

/// Can an engine take `len` bytes from bus address `bus`: word-aligned, below 4 GiB to the end?
pub(crate) fn bus_range_fits(bus: u32, len: usize) -> bool {
    let last = u32::try_from(len.max(1) - 1).ok();
    bus.is_multiple_of(4) && last.is_some_and(|l| bus.checked_add(l).is_some())
}

impl Drop for Area {
    fn drop(&mut self) {
        if self.busy {
            return;
        }
        if let Some(layout) = Self::layout(self.len) {
            // SAFETY: allocated in `new` with this layout, freed once.
            unsafe { alloc::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}
