//! The card's block device, whichever kind the board has: virtio-blk (QEMU virt, with retries for
//! transient errors) or the SD host controller (Raspberry Pi). [`Card`] is one block device over
//! either, so the runtime sees one type.

use super::{sd, virtio};
use crate::board::{self, BlockKind};
use alloc::string::String;
use core::fmt;
use drivers::block::{BlockDevice, Retry, RetryError, Submitted, WriteBlocks};
use drivers::sd::{BusMode, CardInfo};
use runtime::platform::CardBus;

/// The card, on the board's block device.
pub enum Card {
    Virtio(Retry<virtio::VirtioBlock>),
    /// An SDHCI card, and the fastest bus mode its slot could run.
    Sd(sd::Card, BusMode),
    Sunxi(sd::SunxiCard),
}

impl fmt::Debug for Card {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Card::Virtio(_) => "virtio-blk",
            Card::Sd(..) => "SD",
            Card::Sunxi(_) => "SD (Allwinner)",
        };
        f.debug_struct("Card")
            .field("kind", &kind)
            .field("blocks", &self.num_blocks())
            .finish()
    }
}

/// A card error, from whichever driver.
#[derive(Debug)]
pub enum CardError {
    Virtio(RetryError<virtio::VirtioError>),
    Sd(drivers::sdhci::SdError),
}

impl fmt::Display for CardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CardError::Virtio(e) => e.fmt(f),
            CardError::Sd(e) => e.fmt(f),
        }
    }
}

/// Find and bring up the board's card.
pub fn open() -> Result<Card, String> {
    match board::BLOCK {
        BlockKind::VirtioMmio => match virtio::VirtioBlock::probe() {
            Some(dev) => {
                crate::println!("card: virtio-blk, {} MiB", dev.num_blocks() * 512 >> 20);
                // Transient device errors cost a retry, not the run.
                Ok(Card::Virtio(Retry::new(dev, 3)))
            }
            None => Err("no virtio block device found (is the card image attached?)".into()),
        },
        BlockKind::Sdhci => sd::open()
            .map(|(card, best)| Card::Sd(card, best))
            .map_err(|e| alloc::format!("card: {e}")),
        BlockKind::SunxiMmc => sd::open_sunxi()
            .map(Card::Sunxi)
            .map_err(|e| alloc::format!("card: {e}")),
    }
}

impl Card {
    /// The SD bus the card runs on, for the profile (`None` for virtio-blk).
    pub fn bus(&self) -> Option<CardBus> {
        let bus = |i: &CardInfo, best: BusMode| CardBus {
            mode: i.bus_mode,
            clock_hz: i.data_clock_hz,
            width: i.bus_width,
            best: best.max(i.bus_mode),
        };
        match self {
            Card::Virtio(_) => None,
            Card::Sd(d, best) => Some(bus(d.info(), *best)),
            // The Orange Pi's slot: 3.3 V only as far as is known (its 1.8 V switching is
            // unverified), so High Speed.
            Card::Sunxi(d) => Some(bus(d.info(), BusMode::HighSpeed)),
        }
    }
}

/// Run `$body` on the inner device as `$d`, mapping its error into [`CardError`].
macro_rules! each {
    ($self:expr, $d:ident => $body:expr) => {
        match $self {
            Card::Virtio($d) => $body.map_err(CardError::Virtio),
            Card::Sd($d, _) => $body.map_err(CardError::Sd),
            Card::Sunxi($d) => $body.map_err(CardError::Sd),
        }
    };
}

impl BlockDevice for Card {
    type Error = CardError;
    fn num_blocks(&self) -> u64 {
        match self {
            Card::Virtio(d) => d.num_blocks(),
            Card::Sd(d, _) => d.num_blocks(),
            Card::Sunxi(d) => d.num_blocks(),
        }
    }
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), CardError> {
        each!(self, d => d.read_blocks(lba, buf))
    }
    fn queue_depth(&self) -> usize {
        match self {
            Card::Virtio(d) => d.queue_depth(),
            Card::Sd(d, _) => d.queue_depth(),
            Card::Sunxi(d) => d.queue_depth(),
        }
    }
    unsafe fn submit_read(
        &mut self,
        lba: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<Submitted, CardError> {
        // SAFETY: the caller's guarantee for `buf`, passed on.
        each!(self, d => unsafe { d.submit_read(lba, buf, len) })
    }
    fn poll_read(&mut self) -> Option<(u16, Result<(), CardError>)> {
        match self {
            Card::Virtio(d) => d
                .poll_read()
                .map(|(t, r)| (t, r.map_err(CardError::Virtio))),
            Card::Sd(d, _) => d.poll_read().map(|(t, r)| (t, r.map_err(CardError::Sd))),
            Card::Sunxi(d) => d.poll_read().map(|(t, r)| (t, r.map_err(CardError::Sd))),
        }
    }
}

impl WriteBlocks for Card {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), CardError> {
        each!(self, d => d.write_blocks(lba, buf))
    }
    fn flush(&mut self) -> Result<(), CardError> {
        each!(self, d => d.flush())
    }
}
