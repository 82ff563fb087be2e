//! The Raspberry Pi card slot: find the SD host controller with a card and bring it up.
//! (Filled in when the SDHCI driver lands.)

use alloc::string::String;
use drivers::bcm2835::mailbox::Mailbox;

pub struct NoCard;

impl drivers::block::BlockDevice for NoCard {
    type Error = &'static str;
    fn num_blocks(&self) -> u64 {
        0
    }
    fn read_blocks(&mut self, _lba: u64, _buf: &mut [u8]) -> Result<(), &'static str> {
        Err("no card")
    }
}

// SAFETY: holds nothing.
unsafe impl Send for NoCard {}

pub fn open(mb: &mut Mailbox) -> Result<NoCard, String> {
    for (&base, &id) in crate::board::BLOCK_BASES.iter().zip(crate::board::BLOCK_CLOCK_IDS) {
        let rate = mb.clock_rate(id);
        crate::println!("sd: controller {base:#x}, clock id {id}: {rate:?}");
    }
    Err("SD driver pending".into())
}
