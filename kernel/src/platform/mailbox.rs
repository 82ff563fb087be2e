//! The VideoCore mailbox of the Raspberry Pi boards: the RAM size and the SD host's base clock.

use crate::arch::{Arch, Cpu};
use crate::board;
use drivers::bcm2835::mailbox::Mailbox;

/// The board's mailbox.
pub fn open() -> Mailbox {
    // SAFETY: MAILBOX_BASE is this board's mailbox, mapped as device memory; calls are made from
    // core 0 during bring-up only.
    unsafe { Mailbox::new(board::MAILBOX_BASE, Cpu::dcache_flush) }
}
