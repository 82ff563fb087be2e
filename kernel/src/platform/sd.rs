//! The Raspberry Pi card slot: route the pins (Pi 3), find the SD host controller with a card, take
//! its base clock from the VideoCore, and bring the card up with the polled SDHCI driver.

use crate::arch::{Arch, Cpu};
use crate::board;
use alloc::format;
use alloc::string::String;
use drivers::bcm2835::mailbox::Mailbox;
use drivers::mmio::Mmio;
use drivers::sdhci::{card_present, Sdhci, REGISTER_BLOCK_SIZE};

/// The ARM generic timer as the driver's clock.
pub struct TimerClock;

impl drivers::sdhci::Clock for TimerClock {
    fn now_us(&mut self) -> u64 {
        super::time::micros()
    }
    fn delay_us(&mut self, us: u32) {
        super::time::wait_us(us)
    }
}

pub type Card = Sdhci<Mmio, TimerClock>;

/// Bring up the first controller that has a card.
pub fn open(mb: &mut Mailbox) -> Result<Card, String> {
    if board::GPIO_KIND == drivers::bcm2835::gpio::GpioKind::Bcm2835 {
        use drivers::bcm2835::gpio::{sd_on_emmc, GPIO_BLOCK_SIZE};
        // SAFETY: the board's GPIO block, device-mapped; nothing else touches it during bring-up.
        let regs = unsafe { Mmio::new(board::GPIO_BASE, GPIO_BLOCK_SIZE) };
        sd_on_emmc(
            &mut regs.with_barrier(Cpu::io_barrier),
            super::time::wait_us,
        );
    }
    let mut tried = String::new();
    for (&base, &id) in board::BLOCK_BASES.iter().zip(board::BLOCK_CLOCK_IDS) {
        // SAFETY: `base` is an SD host controller of this board, device-mapped, used only here.
        let mut regs =
            unsafe { Mmio::new(base, REGISTER_BLOCK_SIZE) }.with_barrier(Cpu::io_barrier);
        if !card_present(&mut regs) {
            tried.push_str(&format!(" {base:#x}: no card;"));
            continue;
        }
        let rate = match mb.clock_rate(id) {
            Ok(r) if r > 0 => r,
            Ok(_) | Err(_) => 0, // the driver then tries the controller's capabilities
        };
        match Sdhci::init(regs, TimerClock, rate) {
            Ok(card) => {
                let i = card.info();
                crate::println!(
                    "card: SD at {base:#x}, {} MiB, {}, base clock {} MHz, data clock {} kHz, {}-bit",
                    i.blocks * 512 >> 20,
                    if i.high_capacity { "SDHC/SDXC (block addressed)" } else { "SDSC (byte addressed)" },
                    i.base_clock_hz / 1_000_000,
                    i.data_clock_hz / 1000,
                    i.bus_width
                );
                return Ok(card);
            }
            Err(e) => tried.push_str(&format!(" {base:#x}: {e};")),
        }
    }
    Err(format!("no usable SD card:{tried}"))
}
