//! Broadcom BCM2835-family peripherals (Raspberry Pi 3 / Zero 2 W = BCM2837, Pi 4 = BCM2711): the
//! VideoCore mailbox (RAM size, clock rates, temperatures, SD power, firmware GPIOs) and the GPIO
//! function select and pulls (the console's and the ring link's UART pins, the Pi 3's card slot);
//! the Pi 3's path for the mini UART's interrupt ([`irq`]); the system DMA engine ([`dma`]) the
//! sdhost card controller reads through.

pub mod dma;
pub mod gpio;
pub mod irq;
pub mod mailbox;
