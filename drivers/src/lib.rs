//! lmboot's device drivers, `no_std` + `alloc`. Hardware sits behind small traits with fakes, so
//! everything above the register level is tested on the host.
//!
//! Modules:
//! - [`block`]: the [`block::BlockDevice`] trait every storage driver implements (virtio-blk,
//!   SDHCI/EMMC, SPI-SD), [`block::WriteBlocks`] for the ones that can also write, and the fakes
//!   [`block::RamDisk`] and [`block::CountingDevice`].
//! - [`fat`]: a FAT32 reader (`#![forbid(unsafe_code)]`) that mounts an MBR-partitioned or bare
//!   volume, finds a file by path and resolves it to extents of device blocks; it writes only inside
//!   a preallocated file's blocks, never the file system's metadata.
//!
//! - [`sd`]: the SD card protocol the SD host drivers share: identification, the closed command
//!   set, CID/CSD, errors, the request loop with retries and recovery.
//! - [`sunxi_mmc`]: the polled Allwinner SD/MMC host controller driver (H3 / H2+: Orange Pi),
//!   reading through its internal DMA controller when given a [`sunxi_mmc::DmaMemory`], with the
//!   clock controller's gate, reset and module clock for it; [`sunxi_dram`]: the H3's DRAM size
//!   from its controller.
//! - [`sdhci`]: the polled SD host controller driver (Raspberry Pi EMMC / EMMC2): reads, and
//!   synchronous block writes when asked, with every wait bounded; tested against a register-level
//!   simulator.
//! - [`sdhost`]: the polled BCM2835-family "sdhost" SD controller driver (Pi 3, Zero 2 W, Pi 2):
//!   High Speed at 50 MHz from the core clock, reads through the system DMA engine
//!   ([`bcm2835::dma`]), queued; writes by PIO; tested against a register-level simulator.
//! - [`uart`]: PL011 and NS16550A serial ports for the console ([`uart::Uart`]); PL011 and the
//!   BCM2835-family mini UART for the ring link between boards ([`uart::LinkUart`]: never waits,
//!   counts receive overruns, RTS/CTS flow control, baud rates checked against the clock), and
//!   [`uart::rx`], a link received by interrupt into a lock-free buffer.
//! - [`bcm2835`]: the VideoCore mailbox (memory, clocks, temperatures, power, firmware GPIOs) and
//!   the GPIO function select and pulls of the Raspberry Pi SoCs (console, ring link, card slot).
//! - [`gic`]: the ARM GICv2 interrupt controller (QEMU virt, the Pi 4's GIC-400), enough to take
//!   the ring link's receive interrupt ([`uart::rx`]).
//! - [`mmio`]: [`mmio::Regs`], the 32-bit register access the polled drivers are written against
//!   (fakes in the tests), [`mmio::Mmio`] for real registers, and the barrier hook the drivers call
//!   when they start and stop using a peripheral.
//! - [`fdt`]: a bounded reader for the device tree the firmware passes (`#![forbid(unsafe_code)]`):
//!   every memory node's blocks, properties by path.
//! - [`ram`]: RAM as a short list of blocks, clipped to the board's memory map, and where the heap
//!   goes.
//!
//! The block layer also has [`block::Retry`] (transient errors cost a retry) and
//! [`block::FaultyDevice`] (fault injection for tests).
//! - [`virtio_blk`]: virtio-blk (QEMU's card) over the `virtio-drivers` crate's queues, reads
//!   queued, over the MMIO bus or any transport.
#![no_std]

extern crate alloc;

pub mod bcm2835;
pub mod block;
pub mod dma;
pub mod fat;
pub mod fdt;
pub mod gic;
pub mod mmio;
pub mod ram;
pub mod sd;
pub mod sdhci;
pub mod sdhost;
pub mod sunxi_dram;
pub mod sunxi_mmc;
pub mod uart;
pub mod virtio_blk;
