//! What a platform offers the run: one trait, [`Platform`], that the kernel's board, the tests'
//! `Host` (with `std`) and any other runner implement. A method with a default means "this
//! platform has none" (no instruction counter, no link UART, no clock to set): a platform writes
//! only what it has.

use crate::config::ArmClock;
use alloc::string::String;
use drivers::sd::BusMode;
use inference::parallel::Parallel;
use inference::Kernels;

/// What a board (or a PC standing in for one) offers the run besides the card and the console.
pub trait Platform {
    /// The worker pool the kernels run on.
    type Pool: Parallel + ?Sized;
    /// The clock, nanoseconds since boot, as a function (the page cache and a ring's node keep
    /// it).
    fn clock(&self) -> fn() -> u64;
    /// Free heap bytes now.
    fn heap_free(&self) -> u64;
    /// Heap high-water mark in bytes.
    fn heap_high(&self) -> u64;
    /// The worker pool.
    fn pool(&self) -> &Self::Pool;
    /// The best kernel set this CPU runs.
    fn kernels(&self) -> Kernels;
    /// Power off (or stop) with a status; never returns.
    fn exit(&self, code: u32) -> !;

    /// The board's name (its board file's), for the self-test's report; empty where there is none.
    fn board(&self) -> &'static str {
        ""
    }
    /// Nanoseconds since boot.
    fn now_ns(&self) -> u64 {
        (self.clock())()
    }
    /// This core's retired-instruction counter and its width in bits (it may wrap); `None`: the
    /// CPU counts no instructions.
    fn instruction_counter(&self) -> Option<(fn() -> u64, u32)> {
        None
    }
    /// Choose how many cores work (`None` = all); returns how many will. `None`: the pool's
    /// workers all work, as many as it has.
    fn set_cores(&self, _cores: Option<usize>) -> Option<usize> {
        None
    }
    /// Raise a CPU exception (an access to unmapped memory), for `selftest = exception`. A
    /// platform without one returns, and the self-test reports that nothing was raised.
    fn raise_exception(&self) {}
    /// A core to serve the card while the others compute (boards with more than one core).
    fn io_core(&self) -> Option<IoCoreHooks> {
        None
    }
    /// Set the ARM cores' clock as `lmboot.txt`'s `arm_freq` says, once the card is read (boards
    /// whose firmware sets it); returns a line to print.
    fn set_arm_clock(&self, _policy: ArmClock) -> Option<String> {
        None
    }
    /// The link UART to the next board of a ring, set up for this board's place in it (1: the
    /// head) at a line rate (bits/s; `None`: the highest its clock makes): the link and a line
    /// naming it, or why it cannot run. `None`: the platform has no link UART.
    fn ring_link(
        &self,
        _place: u8,
        _baud: Option<u32>,
    ) -> Option<Result<(RingLink, String), String>> {
        None
    }
    /// The SD bus the card is on, for the profile's predictions (`None`: not an SD bus, such as
    /// virtio-blk).
    fn card_bus(&self) -> Option<CardBus> {
        None
    }
    /// The board's clocks as the CPU, the firmware and the device tree state them, and as
    /// measured one against another, for the self-test's clocks check (a figure the board cannot
    /// read is `None`). `None`: the platform reports no clocks.
    fn clocks(&self) -> Option<Clocks> {
        None
    }
    /// The CPU's id: MIDR_EL1 / MIDR on Arm, `mvendorid.marchid` on RISC-V (hex).
    fn cpu_id(&self) -> Option<String> {
        None
    }
}

/// A board's clocks ([`Platform::clocks`]); each figure `None` where the board has no way to
/// read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clocks {
    /// The system counter's frequency as the CPU reports it (CNTFRQ on Arm; RISC-V has no such
    /// register).
    pub counter_hz: Option<u64>,
    /// The counter's frequency as the device tree states it (`timebase-frequency`, or the Arm
    /// timer node's `clock-frequency`).
    pub dt_hz: Option<u64>,
    /// The firmware's figures (all `None` on a board without firmware to ask).
    pub firmware: FirmwareClocks,
    /// The counter's rate measured over a span of the SoC's own timer (a clock apart from the
    /// CPU's: the Pi's 1 MHz system timer), Hz.
    pub measured_hz: Option<u64>,
    /// The CPU's cycle counter's rate over a span of the system counter, Hz.
    pub cycles_hz: Option<u64>,
}

/// The clocks and the state a board's firmware reports (the Pi's VideoCore, through the mailbox).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FirmwareClocks {
    /// The ARM clock, Hz: as the firmware measures it (GET_CLOCK_RATE_MEASURED), and as it set
    /// it (GET_CLOCK_RATE).
    pub arm_hz: [Option<u32>; 2],
    /// The VPU core clock, Hz.
    pub core_hz: Option<u32>,
    /// The SoC's temperature, m°C.
    pub temp_mc: Option<u32>,
    /// The throttling flags (GET_THROTTLED).
    pub throttled: Option<u32>,
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

/// A board's line to the next board of a ring.
pub type RingLink = alloc::boxed::Box<dyn ::ring::link::Link + Send>;

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

/// The PC as a platform, for tests: a monotonic clock, a fixed free-heap figure, one thread, the
/// best kernels, and a ring link that can be taken once.
#[cfg(feature = "std")]
pub struct Host {
    /// The free heap it reports, in bytes.
    pub heap: u64,
    link: std::sync::Mutex<Option<(RingLink, String)>>,
}

#[cfg(feature = "std")]
impl Host {
    /// A PC reporting `heap` bytes free, with no ring link.
    pub fn new(heap: u64) -> Self {
        Host {
            heap,
            link: std::sync::Mutex::new(None),
        }
    }

    /// With `link` to the next board, named `name` on the ring's first line.
    pub fn with_link(self, link: RingLink, name: &str) -> Self {
        Host {
            link: std::sync::Mutex::new(Some((link, name.into()))),
            ..self
        }
    }

    fn now() -> u64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

#[cfg(feature = "std")]
impl core::fmt::Debug for Host {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Host")
            .field("heap", &self.heap)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "std")]
impl Platform for Host {
    type Pool = inference::parallel::SingleThread;
    fn clock(&self) -> fn() -> u64 {
        Host::now
    }
    fn heap_free(&self) -> u64 {
        self.heap
    }
    fn heap_high(&self) -> u64 {
        0
    }
    fn pool(&self) -> &Self::Pool {
        &inference::parallel::SingleThread
    }
    fn kernels(&self) -> Kernels {
        Kernels::best()
    }
    fn exit(&self, code: u32) -> ! {
        std::process::exit(code as i32)
    }
    fn ring_link(
        &self,
        _place: u8,
        _baud: Option<u32>,
    ) -> Option<Result<(RingLink, String), String>> {
        let taken = self.link.lock().map(|mut l| l.take()).ok().flatten();
        Some(taken.ok_or_else(|| "the link was taken twice".into()))
    }
}
