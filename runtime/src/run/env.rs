//! What the board hands the run besides the card and the console: clock, heap figures, counters,
//! the worker pool and its kernels, and the hooks that lend a core to the card.

use crate::config::ArmClock;
use alloc::string::String;
use core::fmt;
use drivers::sd::BusMode;
use inference::parallel::Parallel;
use inference::Kernels;

/// What the board provides besides the device and console.
pub struct Env<'a, P: Parallel + ?Sized> {
    /// Nanoseconds since boot.
    pub clock_ns: fn() -> u64,
    /// Free heap bytes now.
    pub heap_free: &'a dyn Fn() -> u64,
    /// Heap high-water mark in bytes.
    pub heap_high: &'a dyn Fn() -> u64,
    /// This core's retired-instruction counter and its width in bits (it may wrap), if the CPU
    /// counts instructions.
    pub instructions: Option<(&'a (dyn Fn() -> u64 + Sync), u32)>,
    pub pool: &'a P,
    pub kernels: Kernels,
    /// Choose how many cores work (`None` = all); returns how many will.
    pub set_cores: Option<&'a dyn Fn(Option<usize>) -> usize>,
    /// Raise a CPU exception (an access to unmapped memory), for `selftest = exception`.
    pub raise_exception: Option<fn()>,
    /// A core to serve the card while the others compute (boards with more than one core).
    pub io_core: Option<IoCoreHooks>,
    /// Set the ARM cores' clock as `lmboot.txt`'s `arm_freq` says, once the card is read (boards
    /// whose firmware sets it); returns a line to print.
    pub arm_clock: Option<&'a dyn Fn(ArmClock) -> Option<String>>,
    /// The link UART to the next board of a ring, set up for this board's place in it (1: the
    /// head) at a line rate (bits/s; `None`: the highest its clock makes): the link and a line
    /// naming it, or why it cannot run. `None`: the platform has none.
    pub ring_link: Option<&'a RingLinkFn<'a>>,
    /// The SD bus the card is on, for the profile's predictions (`None`: not an SD bus, such as
    /// virtio-blk).
    pub card_bus: Option<CardBus>,
}

/// The SD bus a card runs on, as the driver brought it up, and the fastest mode the board's slot
/// could run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CardBus {
    pub mode: BusMode,
    pub clock_hz: u32,
    /// Data lines: 1 or 4.
    pub width: u8,
    /// The fastest mode the slot and controller could run with a card that offers it (High
    /// Speed on a Pi 3 / Zero 2 W, UHS-I DDR50 on a Pi 4's EMMC2).
    pub best: BusMode,
}

impl CardBus {
    /// The bus's ceiling in bytes/s in the mode it runs (data bits only: no CRC, start and end
    /// bits, command gaps or card access time).
    pub fn ceiling(&self) -> u64 {
        self.mode.bytes_per_s(self.clock_hz, self.width.max(1))
    }
}

/// [`Env::ring_link`]: the link for a place in the ring at a line rate, and a line naming it.
pub type RingLinkFn<'a> = dyn Fn(u8, Option<u32>) -> Result<(RingLink, String), String> + 'a;

/// A board's line to the next board of a ring.
pub type RingLink = alloc::boxed::Box<dyn ::ring::link::Link + Send>;

impl<P: Parallel + ?Sized> fmt::Debug for Env<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env")
            .field("kernels", &self.kernels)
            .finish_non_exhaustive()
    }
}

/// How the run takes a core out of the compute jobs to serve the card ([`crate::iocore`]).
#[derive(Debug, Clone, Copy)]
pub struct IoCoreHooks {
    /// Have one working core call `serve` in a loop (sleeping while it returns `false`); returns
    /// that core's index, or `None` if no core can be spared.
    ///
    /// # Safety
    /// `stop` must be called before `serve` is dropped.
    pub start: unsafe fn(&(dyn Fn() -> bool + Sync)) -> Option<usize>,
    /// Stop serving and give the core back to the jobs.
    pub stop: fn(),
    /// Wake the serving core (after queueing a read).
    pub wake: fn(),
}
