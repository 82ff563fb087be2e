//! lmboot's device drivers, `no_std`: UART (PL011, NS16550), block devices (SDHCI/EMMC, virtio-blk,
//! SPI-SD) and a read-only FAT32 reader that resolves a file to its extents.
//!
//! Each driver sits behind a small trait with a fake for host tests. Filled in by later issues
//! (see README "Status").
#![no_std]
