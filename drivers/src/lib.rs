//! lmboot's device drivers, `no_std` + `alloc`. Hardware sits behind small traits with fakes, so
//! everything above the register level is tested on the host.
//!
//! Modules:
//! - [`block`]: the [`block::BlockDevice`] trait every storage driver implements (virtio-blk,
//!   SDHCI/EMMC, SPI-SD), and its fakes [`block::RamDisk`] and [`block::CountingDevice`].
//! - [`fat`]: a read-only FAT32 reader (`#![forbid(unsafe_code)]`) that mounts an MBR-partitioned or
//!   bare volume, finds a file by path and resolves it to extents of device blocks.
//!
//! UART drivers (PL011, NS16550) and the block drivers themselves are filled in by later issues
//! (see README "Status").
#![no_std]

extern crate alloc;

pub mod bcm2835;
pub mod block;
pub mod fat;
pub mod sdhci;
pub mod uart;
