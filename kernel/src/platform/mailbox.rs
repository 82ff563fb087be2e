//! The VideoCore mailbox of the Raspberry Pi boards: the RAM size, the SD host's base clock and
//! power, the ARM clock.

use crate::arch::{Arch, Cpu};
use crate::board;
use drivers::bcm2835::mailbox::{CacheOps, Mailbox, PropertyBuffer, MAILBOX_BLOCK_SIZE};
use drivers::mmio::Mmio;

/// The one property buffer: a static (not on a stack), 64-byte aligned, whole cache lines, in the
/// kernel image's RAM below 1 GiB where the VideoCore reaches it at its ARM address.
static BUFFER: PropertyBuffer = PropertyBuffer::new();

/// The board's mailbox (`None`: the board has none).
pub fn open() -> Option<Mailbox> {
    let base = board::MAILBOX_BASE?;
    let cache = CacheOps {
        clean: Cpu::dcache_clean,
        invalidate: Cpu::dcache_invalidate,
    };
    // SAFETY: MAILBOX_BASE is this board's mailbox block, mapped as device memory. Calls are made
    // one at a time, so BUFFER has one user: from core 0 during bring-up and when the run sets
    // the ARM clock (before any read is handed to another core), and by the card slot's power
    // and 1.8 V lines, from inside a card request, which one core at a time makes (the card has
    // one owner); BUFFER is kernel RAM, identity-mapped below 4 GiB; the cache operations are the
    // architecture's.
    unsafe {
        let regs = Mmio::new(base, MAILBOX_BLOCK_SIZE).with_barrier(Cpu::io_barrier);
        Some(Mailbox::new(regs, &BUFFER, cache))
    }
}
