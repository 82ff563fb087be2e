//! The card's block device, whichever driver the board's kind names: [`open`] has one arm per
//! kind, and [`Card`] holds the device behind one interface (its errors as text), so the runtime
//! sees one type (`dyn WriteBlocks`). Adding a block driver is its kind in `lmboot-boards`, the driver in `drivers`,
//! and an arm here.

use super::sd;
use crate::board::{self, BlockKind};
use alloc::boxed::Box;
use alloc::string::{String, ToString};
use core::fmt;
use drivers::block::{BlockDevice, CardStats, Retry, Submitted, Transfer, WriteBlocks};
use drivers::sd::{BusMode, CardInfo};
use drivers::virtio_blk::VirtioBlock;
use runtime::platform::CardBus;

/// Find and bring up the board's card.
pub fn open() -> Result<Card, String> {
    match board::BLOCK {
        BlockKind::VirtioMmio => {
            // SAFETY: the board's virtio-mmio slots, mapped as device memory, used by nothing else.
            let dev = unsafe {
                VirtioBlock::probe_mmio(
                    board::BLOCK_BASES[0],
                    board::BLOCK_COUNT,
                    board::BLOCK_STRIDE,
                )
            }
            .ok_or("no virtio block device found (is the card image attached?)")?;
            crate::println!("card: virtio-blk, {} MiB", (dev.num_blocks() * 512) >> 20);
            // Transient device errors cost a retry, not the run.
            Ok(Card::new("virtio-blk", Retry::new(dev, 3), None))
        }
        BlockKind::Sdhci => match board::BLOCK_HOST {
            None => {
                let (dev, best) = sd::open().map_err(|e| alloc::format!("card: {e}"))?;
                let bus = sd_bus(dev.info(), best);
                Ok(Card::new("SD", dev, Some(bus)))
            }
            Some(host) => {
                let dev = sd::open_host(host).map_err(|e| alloc::format!("card: {e}"))?;
                // A 3.3 V slot (`sd::open_host`): High Speed at most.
                let bus = sd_bus(dev.info(), BusMode::HighSpeed);
                Ok(Card::new("SD", dev, Some(bus)))
            }
        },
        BlockKind::Sdhost => {
            let dev = sd::open_sdhost().map_err(|e| alloc::format!("card: {e}"))?;
            // A 3.3 V slot: High Speed at most.
            let bus = sd_bus(dev.info(), BusMode::HighSpeed);
            Ok(Card::new("SD (sdhost)", dev, Some(bus)))
        }
        BlockKind::SunxiMmc => {
            let dev = sd::open_sunxi().map_err(|e| alloc::format!("card: {e}"))?;
            // The Orange Pi's slot: 3.3 V only as far as is known (its 1.8 V switching is
            // unverified), so High Speed.
            let bus = sd_bus(dev.info(), BusMode::HighSpeed);
            Ok(Card::new("SD (Allwinner)", dev, Some(bus)))
        }
    }
}

/// The SD bus as the driver brought it up, and the fastest mode the slot could run.
fn sd_bus(i: &CardInfo, best: BusMode) -> CardBus {
    CardBus {
        mode: i.bus_mode,
        clock_hz: i.data_clock_hz,
        width: i.bus_width,
        best: best.max(i.bus_mode),
    }
}

/// The card, on the board's block device.
pub struct Card {
    dev: Box<dyn WriteBlocks<Error = CardError> + Send>,
    kind: &'static str,
    bus: Option<CardBus>,
}

impl Card {
    fn new<D>(kind: &'static str, dev: D, bus: Option<CardBus>) -> Self
    where
        D: WriteBlocks + Send + 'static,
    {
        Card {
            dev: Box::new(Texted(dev)),
            kind,
            bus,
        }
    }

    /// The SD bus the card runs on, for the profile (`None` for virtio-blk).
    pub fn bus(&self) -> Option<CardBus> {
        self.bus
    }

    /// The block device, for the run.
    pub fn device(&mut self) -> &mut (dyn WriteBlocks<Error = CardError> + Send) {
        &mut *self.dev
    }
}

impl fmt::Debug for Card {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Card")
            .field("kind", &self.kind)
            .field("blocks", &self.dev.num_blocks())
            .finish()
    }
}

/// A card error, from whichever driver, as the driver words it.
#[derive(Debug)]
pub struct CardError(String);

impl fmt::Display for CardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A driver's device with its errors turned into [`CardError`]s.
struct Texted<D>(D);

fn text<E: fmt::Display>(e: E) -> CardError {
    CardError(e.to_string())
}

impl<D: BlockDevice> BlockDevice for Texted<D> {
    type Error = CardError;
    fn num_blocks(&self) -> u64 {
        self.0.num_blocks()
    }
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), CardError> {
        self.0.read_blocks(lba, buf).map_err(text)
    }
    fn queue_depth(&self) -> usize {
        self.0.queue_depth()
    }
    unsafe fn submit_read(
        &mut self,
        lba: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<Submitted, CardError> {
        // SAFETY: the caller's guarantee for `buf`, passed on.
        unsafe { self.0.submit_read(lba, buf, len) }.map_err(text)
    }
    fn poll_read(&mut self) -> Option<(u16, Result<(), CardError>)> {
        self.0.poll_read().map(|(t, r)| (t, r.map_err(text)))
    }
    fn transfer(&self) -> Option<Transfer> {
        self.0.transfer()
    }
    fn set_transfer(&mut self, t: Transfer) -> bool {
        self.0.set_transfer(t)
    }
    fn card_stats(&self) -> Option<CardStats> {
        self.0.card_stats()
    }
}

impl<D: WriteBlocks> WriteBlocks for Texted<D> {
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), CardError> {
        self.0.write_blocks(lba, buf).map_err(text)
    }
    fn flush(&mut self) -> Result<(), CardError> {
        self.0.flush().map_err(text)
    }
}
