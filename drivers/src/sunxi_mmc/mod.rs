//! Allwinner SD/MMC host controller driver: reads SD cards through the H3 / H2+ "SMHC" controller
//! (Orange Pi Zero, One, PC: MMC0 at [`MMC0_BASE`], the card slot; QEMU's `-M orangepi-pc`
//! attaches `-drive if=sd` there). Reads, and block writes when asked ([`WriteBlocks`]); polled.
//! Data moves by programmed I/O through the FIFO, or, for reads when a [`DmaMemory`] is given
//! ([`SunxiMmc::init_dma`]), through the controller's internal DMA controller (IDMAC): a page
//! in one command straight into the caller's buffer, and queued ([`BlockDevice::submit_read`])
//! so the IDMAC moves it while the cores compute.
//!
//! # Design
//!
//! The SD protocol (identification, the closed command set, CID/CSD, [`CardInfo`], the errors,
//! the request loop with retries and recovery) is [`crate::sd`], shared with [`crate::sdhci`];
//! this module is the Allwinner side, and keeps that driver's rules:
//!
//! - **Hardware behind two small traits.** [`Regs`] for the controller (and the clock controller,
//!   CCU), [`Clock`] for time. Every wait is a poll loop with a deadline from the clock and an
//!   iteration cap, ending in a [`Cause::SunxiTimeout`]; no register value can make the driver
//!   hang or panic.
//! - **32-bit accesses only**, FIFO included (the QEMU model accepts nothing else).
//! - **Polled.** GCTRL has the interrupt enable off and, but during a DMA read, the DMA enable off
//!   and "access by AHB" on; IMASK is 0; status is read from RINT (raw interrupt status) and, for
//!   DMA, IDST. Without DMA, data moves through the FIFO at 0x200
//!   in 32-bit words: a read takes as many words as STATUS's FIFO level says (at least one when
//!   FIFO empty is clear, at most what the block still needs); a write puts one word each time FIFO
//!   full is clear.
//! - **A closed command set** ([`COMMANDS`]): reads only unless [`WriteBlocks::write_blocks`] is
//!   called, and then only CMD24/25, refused before anything is sent when the CSD says the card is
//!   write-protected. The controller has no write-protect switch input on these boards.
//! - **Errors are values** ([`SdError`]), naming the step or command, the LBA, the RINT bits or
//!   what a deadline was waiting for.
//!
//! # Clocks
//!
//! The card clock is the CCU's module clock SDMMCn_CLK (source / 2^N / M), divided again by
//! CLKCR's divider (0 = by one). With the CCU given ([`SunxiMmc::init`]'s `ccu`), the driver
//! gates and resets the controller there ([`ccu_enable`]) and sets the module clock from OSC24M
//! ([`ccu_set_module_clock`]; U-Boot's `mmc_set_mod_clk` does the same below 24 MHz): 400 kHz
//! (N = 2, M = 15) for identification, then 24 MHz (N = 0, M = 1) for data, CLKCR's divider 0.
//! Output and sample phase delays are U-Boot's for those rates (0/0, then 0/5). Without the CCU
//! the module clock is taken to be [`Config::module_clock_hz`] as someone left it, and CLKCR's
//! divider (module / 2n) makes both clocks.
//!
//! High Speed: above 24 MHz the module clock comes from PLL_PERIPH0 (U-Boot's rule in
//! `mmc_set_mod_clk`), whose rate is read from its control register (24 MHz * N * K / 2: 600 MHz
//! as U-Boot's SPL sets it up), divided to 50 MHz (N = 0, M = 12) with U-Boot's phase delays for
//! up to 52 MHz (output 3, sample 4). The H3's MMC0 is bound by Linux as `sun7i-a20-mmc`, without
//! the "new timing" mode, so the controller itself has nothing to switch. CMD6 runs as on SDHCI
//! (see [`crate::sd`]); PLL_PERIPH0 off, no CCU given (CLKCR's divider cannot beat the module
//! clock found), or a card that cannot, leaves the card at Default Speed with
//! [`CardInfo::speed_note`] saying why.
//!
//! Every CLKCR change is followed by an "update clock" command (CMD = start | update clock only |
//! wait for previous data), whose start bit the controller clears when it has taken the new
//! setting: the card clock is switched off, the divider changed, and switched on again, each with
//! its update (U-Boot's `mmc_config_clock`).
//!
//! # Init sequence ([`SunxiMmc::init`])
//!
//! 1. CCU (when given): MMCn's bus reset asserted, bus clock gate on, reset released; module clock
//!    400 kHz from OSC24M.
//! 2. GCTRL soft + FIFO + DMA reset, wait for the bits to clear; GCTRL = access by AHB; the IDMAC
//!    reset and off, IDST cleared, IDIE 0 (FTRGLEVEL Linux's DMA value with DMA); IMASK 0, RINT
//!    cleared, TIMEOUT 0xFFFF_FF40 (Linux's value), 1-bit bus.
//! 3. The card clock at <= 400 kHz (above), 1 ms for the card's 74 clocks (CMD0 also asks the
//!    controller for its init sequence).
//! 4. The SD identification sequence ([`crate::sd`]): CMD0, CMD8, ACMD41 polling, CMD2, CMD3, CMD9,
//!    CMD7, ACMD6 and WIDTH = 4 bits, CMD16 for SDSC. No response to CMD8 and CMD55 is
//!    [`Cause::NoCard`].
//! 5. Data clock: 24 MHz (or the configured rate, capped at 25 MHz and the CSD's TRAN_SPEED).
//! 6. High Speed, when card and clocks allow it (above).
//!
//! The controller's card-present bit (STATUS bit 8) is not consulted: the Orange Pi boards wire
//! card detect to a GPIO (PF6), and "no card" comes from the card not answering.
//!
//! # A command
//!
//! Wait for the start bit of the previous command to be clear (and for a data or R1b command the
//! card not busy, STATUS bit 9), clear RINT, set BLKSZ 512 and BYTECNT for a data command, ARG,
//! then CMD with the start bit. Wait for the start bit to clear (the controller took the command),
//! then for RINT command done or an error bit; R1b commands then wait
//! for the card busy bit to clear. A multi-block transfer uses auto stop (the controller sends
//! CMD12 after the last block; [`Config::auto_stop`] off makes the driver send it). The end of a
//! transfer is RINT data over (and auto command done with auto stop); a write then waits for the
//! card busy bit and polls CMD13 until the card has finished programming. Any error resets the
//! controller (GCTRL soft, FIFO and DMA reset, then the clock update U-Boot does after it), then
//! the shared recovery brings the card back to the transfer state; before the last try the whole
//! controller and card are initialised again.
//!
//! # DMA reads
//!
//! With a [`DmaMemory`] (the platform's bus addresses and cache maintenance: the driver has no
//! architecture code; [`NoDma`] is the FIFO path), the driver allocates once a
//! [`DMA_ALIGN`]-aligned area of whole cache lines: [`DMA_DESCRIPTORS`] descriptors of
//! [`DMA_DESC_BYTES`] (4 KiB: below the 16-bit size field of the H3 and the 13-bit one of the
//! A10, and never the value 0 that Linux and QEMU read as "the maximum"; see [`DMA_DESC_BYTES`]),
//! enough for [`DMA_MAX_BYTES`] (1 MiB, the largest request of the page cache), then a
//! [`DMA_BUFFER_BYTES`] bounce buffer. If the area cannot be allocated or has no 32-bit bus
//! address, reads stay on PIO ([`SunxiMmc::dma_active`]).
//!
//! Where a command's data go: straight into the caller's buffer when its start is a whole cache
//! line ([`DMA_ALIGN`]; its length, whole blocks, always is) and [`DmaMemory::bus_address`] gives
//! the command's part of it a 32-bit bus address. Then a read of up to 1 MiB is one command
//! (`max_blocks_per_command` defaults to [`DEFAULT_MAX_BLOCKS_PER_COMMAND`] = 2048 blocks): a
//! 256 KiB page is one CMD18 with auto stop. Otherwise through the bounce buffer, a command per
//! [`DMA_BUFFER_BYTES`] and a copy. A read command:
//!
//! 1. The chain: a descriptor per 4 KiB of the destination (config OWN | CHAIN, FIRST on the
//!    first, LAST and end of ring on the last, "disable interrupt" on the others; the buffer
//!    size; the buffer's bus address; the next descriptor's), cleaned with
//!    [`DmaMemory::to_device`]; the destination invalidated ([`DmaMemory::from_device`]) so no
//!    dirty line lands on what the controller writes.
//! 2. GCTRL = DMA enable ("access by AHB" clear) with a DMA reset, waited for; DMAC soft reset;
//!    IDST cleared; IDIE receive interrupt (the interrupt stays off at GCTRL); DLBA = the chain;
//!    DMAC = fixed burst | IDMAC on (Linux's `sunxi_mmc_start_dma`).
//! 3. The command as for PIO (CMD17, or CMD18 with auto stop), its R1 checked.
//! 4. The end: IDST receive interrupt (IDST error bits are [`Cause::Idmac`], RINT's
//!    [`Cause::Rint`]) and RINT data over (and auto command done), before a deadline of
//!    [`BLOCK_TIMEOUT_US`] plus, per block, [`DMA_BLOCK_US`] or four times its time on the bus.
//! 5. IDST cleared, the IDMAC off, GCTRL back to "access by AHB" with a DMA reset; the
//!    destination invalidated again (and the bounce buffer copied out).
//!
//! Any failure resets the controller (the IDMAC with it: GCTRL DMA reset, DMAC soft reset) and
//! names the command's first LBA; the shared retries and recovery follow, as for PIO. Writes stay
//! on PIO (they are rare: the prompt cache), as does everything during initialisation.
//!
//! Queued reads: with DMA, [`BlockDevice::queue_depth`] is [`QUEUE_DEPTH`]. `submit_read` checks
//! the request and starts its command at once if the controller is idle, else keeps it in a
//! fixed array of [`QUEUE_SLOTS`] (all taken: the request is read at once, after the queue);
//! `poll_read` never waits: a command that has ended is finished (steps 4 and 5) and the next
//! started, and a finished request reported with its tag. A failed command resets the controller
//! and the rest of its request is read at once through the shared retries (the failed command
//! counting as the first try); `read_blocks` and `write_blocks` first let every queued read end,
//! keeping the outcomes for `poll_read`. The runtime then needs no I/O core for the card. Drop
//! the driver only once every tag is reported: a driver dropped with a command running leaks its
//! DMA area rather than free memory the IDMAC may still read.
//!
//! # What QEMU's model does differently from hardware
//!
//! QEMU 10's `allwinner-sdhost` (sun5i flavour on the H3) executes a command synchronously when CMD
//! is written: the start bit is clear at once and RINT has command done (a clock update raises
//! command done too). A missing response raises RINT bit 1 (response error) alone, where hardware
//! raises response timeout with command done: both are "no response" here. The FIFO is a window on
//! the card: STATUS reports FIFO empty or one word present (FIFO level 1), never full, and every
//! FIFO access moves one word to or from the card; data over comes with the last word, and auto
//! stop sends CMD12 right then. There are no CRC errors, no card busy, no timeouts but the missing
//! response, and the soft reset bits clear at once without resetting anything (so the driver
//! clears RINT itself). STATUS bit 8 follows the card's presence. The clock registers are stored
//! and ignored; QEMU's H3 CCU model is a plain register file (PLL lock bits excepted), which the
//! driver's CCU writes land in harmlessly. Its IDMAC moves a whole transfer when CMD is written
//! (IDST and RINT data over are set before the driver first looks), ignores DMAC (its soft reset
//! bit reads back as written) and takes descriptors of up to 64 KiB. So under QEMU a queued read
//! has ended by the time `submit_read` returns, and `poll_read` reports it at once; on hardware
//! the data take their time on the bus (about 21 us per block at 50 MHz on 4 lines, 11 ms for a
//! 256 KiB page) while the cores compute.
//!
//! # Not covered
//!
//! UHS-I, 1.8 V, eMMC and 8-bit buses, DMA writes, interrupts (the queue is polled), several
//! commands in flight at once (the controller runs one; the others wait in the queue), DMA into a
//! buffer that is not cache-line aligned (it is bounced), SDUC, erase, the card's write-protect
//! groups. Pin muxing (PF0-PF5 to function 2) and card power are the board's: U-Boot has done both
//! on a real board, QEMU needs neither.
//!
//! # Barriers
//!
//! [`SunxiMmc::init`], [`BlockDevice::read_blocks`], [`WriteBlocks::write_blocks`],
//! [`BlockDevice::submit_read`] and [`BlockDevice::poll_read`] (when they touch the controller)
//! call [`Regs::barrier`] on the controller before their first register access and after their
//! last (see [`crate::mmio`]).

mod dma;
mod idmac;
pub use crate::sd::regs::sunxi as regs;

use crate::block::{BlockDevice, WriteBlocks, BLOCK_SIZE};
pub use crate::dma::{DmaMemory, NoDma, DMA_ALIGN};
pub use crate::mmio::{Mmio, Regs};
pub use crate::sd::queue::{QUEUE_DEPTH, SLOTS as QUEUE_SLOTS};
use crate::sd::{self, Command, Direction, Failure, Host, Resp, SpeedCap, Xfer, READ, WRITE};
pub use crate::sd::{
    BusMode, CardInfo, Cause, Clock, Cmd, Failed, HostKind, SdError, SpeedNote, Step, Wait,
    WriteProtect, BLOCK_TIMEOUT_US, BUSY_TIMEOUT_US, CLOCK_TIMEOUT_US, CMD_TIMEOUT_US, COMMANDS,
    DATA_CLOCK_MAX_HZ, HS_CLOCK_MAX_HZ, ID_CLOCK_MAX_HZ, POWER_UP_US, READ_ONLY_COMMANDS,
    RESET_TIMEOUT_US, WRITE_COMMANDS, WRITE_TIMEOUT_US,
};
use dma::DmaArea;
pub use dma::{
    DMA_BUFFER_BLOCKS, DMA_BUFFER_BYTES, DMA_DESCRIPTORS, DMA_DESC_BYTES, DMA_MAX_BLOCKS,
    DMA_MAX_BYTES,
};
pub use idmac::DMA_BLOCK_US;
use regs::*;

/// MMC0 (the card slot) on the H3 / H2+.
pub const MMC0_BASE: usize = 0x01C0_F000;
/// The H3 clock controller.
pub const CCU_BASE: usize = 0x01C2_0000;
/// Size of a controller's register block: the `size` to give [`Mmio::new`].
pub const REGISTER_BLOCK_SIZE: usize = 0x1000;
/// Size of the CCU's register block: the `size` to give [`Mmio::new`].
pub const CCU_BLOCK_SIZE: usize = 0x400;

/// Time the controller is held in reset in the CCU.
pub const CCU_RESET_US: u32 = 10;
/// Default limit of blocks per read or write command: 1 MiB, the largest request the page cache
/// makes, in one command.
pub const DEFAULT_MAX_BLOCKS_PER_COMMAND: u16 = DMA_MAX_BLOCKS;
/// The data clock by default: OSC24M undivided.
pub const DEFAULT_DATA_CLOCK_HZ: u32 = 24_000_000;
/// TIMEOUT: data timeout 0xFFFFFF card clocks, response timeout 0x40 (Linux's value).
const TIMEOUT_VALUE: u32 = 0xFFFF_FF40;

/// A module clock setting of the CCU: source / 2^`n` / `m`, with the phase delays for its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleClock {
    /// The source (`ccu::CLK_SRC_OSC24M` or `ccu::CLK_SRC_PLL_PERIPH0`).
    pub src: u32,
    /// Pre-divider exponent (0..=3).
    pub n: u8,
    /// Divider (1..=16).
    pub m: u8,
    /// The rate it gives.
    pub hz: u32,
    /// Output and sample clock phase delays (U-Boot's for the rate).
    pub output_delay: u8,
    pub sample_delay: u8,
}

impl ModuleClock {
    /// The fastest setting not above `target_hz` from OSC24M; `None` below 24 MHz / 8 / 16.
    pub fn for_rate(target_hz: u32) -> Option<ModuleClock> {
        Self::from_source(ccu::CLK_SRC_OSC24M, ccu::OSC24M_HZ, target_hz)
    }

    /// The fastest setting not above `target_hz` from source `src` running at `parent_hz`;
    /// `None` if even parent / 8 / 16 is faster. U-Boot's `mmc_set_mod_clk`: M = ceil(parent /
    /// target), halved (rounding up) with N + 1 while above 16; its phase delays for the rate
    /// (output 0 / sample 0 up to 400 kHz, 0 / 5 up to 25 MHz, 3 / 4 up to 52 MHz, 1 / 4 above).
    pub fn from_source(src: u32, parent_hz: u32, target_hz: u32) -> Option<ModuleClock> {
        if target_hz == 0 || parent_hz == 0 {
            return None;
        }
        let mut div = parent_hz.div_ceil(target_hz);
        let mut n = 0u8;
        while div > 16 {
            n += 1;
            div = div.div_ceil(2);
        }
        if n > 3 {
            return None;
        }
        let hz = (parent_hz >> n) / div;
        let (output_delay, sample_delay) = if hz <= ID_CLOCK_MAX_HZ {
            (0, 0)
        } else if hz <= DATA_CLOCK_MAX_HZ {
            (0, 5)
        } else if hz <= 52_000_000 {
            (3, 4)
        } else {
            (1, 4)
        };
        Some(ModuleClock {
            src,
            n,
            m: div as u8,
            hz,
            output_delay,
            sample_delay,
        })
    }

    /// The SDMMCn_CLK_REG value: enabled, from the setting's source.
    pub fn register(&self) -> u32 {
        ccu::CLK_ENABLE
            | (self.src & 3) << ccu::CLK_SRC_SHIFT
            | (self.sample_delay as u32 & 7) << ccu::CLK_SAMPLE_SHIFT
            | (self.n as u32 & 3) << ccu::CLK_N_SHIFT
            | (self.output_delay as u32 & 7) << ccu::CLK_OUTPUT_SHIFT
            | ((self.m as u32).saturating_sub(1) & ccu::CLK_M_MASK)
    }
}

/// Gate and reset controller `index` (0 = MMC0) in the CCU: its bus reset asserted, its bus clock
/// gate on, the reset released after [`CCU_RESET_US`] (`delay_us` waits).
pub fn ccu_enable<K: Regs>(ccu: &mut K, index: u8, mut delay_us: impl FnMut(u32)) {
    let bit = 1u32 << (ccu::MMC0_BIT + (index as u32 & 3));
    let rst = ccu.read32(ccu::BUS_SOFT_RST_REG0);
    ccu.write32(ccu::BUS_SOFT_RST_REG0, rst & !bit);
    let gate = ccu.read32(ccu::BUS_CLK_GATING_REG0);
    ccu.write32(ccu::BUS_CLK_GATING_REG0, gate | bit);
    delay_us(CCU_RESET_US);
    let rst = ccu.read32(ccu::BUS_SOFT_RST_REG0);
    ccu.write32(ccu::BUS_SOFT_RST_REG0, rst | bit);
}

/// PLL_PERIPH0's rate from its control register: 24 MHz * N * K / 2 (U-Boot's `clock_get_pll6`),
/// or `None` while it is off or not locked.
pub fn pll_periph0_hz(ctrl: u32) -> Option<u32> {
    if ctrl & ccu::PLL_ENABLE == 0 || ctrl & ccu::PLL_LOCK == 0 {
        return None;
    }
    let n = ((ctrl >> ccu::PLL_N_SHIFT) & 0x1F) + 1;
    let k = ((ctrl >> ccu::PLL_K_SHIFT) & 0x3) + 1;
    Some(ccu::OSC24M_HZ / 2 * n * k)
}

/// The module clock for `target_hz` as U-Boot chooses it: from OSC24M up to 24 MHz, from
/// PLL_PERIPH0 above (read from the CCU; an error if it is off).
pub fn ccu_module_clock<K: Regs>(ccu: &mut K, target_hz: u32) -> Result<ModuleClock, Cause> {
    let (src, parent_hz) = if target_hz <= ccu::OSC24M_HZ {
        (ccu::CLK_SRC_OSC24M, ccu::OSC24M_HZ)
    } else {
        let ctrl = ccu.read32(ccu::PLL_PERIPH0_CTRL_REG);
        let hz = pll_periph0_hz(ctrl).ok_or(Cause::PllOff { ctrl })?;
        (ccu::CLK_SRC_PLL_PERIPH0, hz)
    };
    ModuleClock::from_source(src, parent_hz, target_hz).ok_or(Cause::ModClock {
        parent_hz,
        target_hz,
    })
}

/// Set controller `index`'s module clock to the fastest rate not above `target_hz`
/// ([`ccu_module_clock`]).
pub fn ccu_set_module_clock<K: Regs>(
    ccu: &mut K,
    index: u8,
    target_hz: u32,
) -> Result<ModuleClock, Cause> {
    let m = ccu_module_clock(ccu, target_hz)?;
    ccu.write32(ccu::SDMMC0_CLK_REG + 4 * (index as usize % 3), m.register());
    Ok(m)
}

/// Driver settings; [`Config::new`] gives the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Which controller (0 = MMC0, the card slot), for its CCU bits and clock register.
    pub index: u8,
    /// Without a CCU: the module clock as found (CLKCR's divider makes the card clocks from it).
    pub module_clock_hz: u32,
    /// Identification clock target (at most [`ID_CLOCK_MAX_HZ`]).
    pub id_clock_hz: u32,
    /// Default Speed data clock target (at most [`DATA_CLOCK_MAX_HZ`]; with the CCU, at most 24
    /// MHz: OSC24M undivided).
    pub data_clock_hz: u32,
    /// The fastest bus mode to try: [`BusMode::HighSpeed`] by default (50 MHz from PLL_PERIPH0
    /// with the CCU), [`BusMode::DefaultSpeed`] to stay at 24 MHz.
    pub max_bus_mode: BusMode,
    /// Switch the card and host to a 4-bit data bus.
    pub four_bit: bool,
    /// Let the controller send CMD12 after a multi-block transfer (else the driver sends it).
    pub auto_stop: bool,
    /// Largest number of blocks one command moves (1..=65535).
    pub max_blocks_per_command: u16,
    /// Tries per read or write command (>= 1); the card is initialised again before the last one.
    pub tries: u8,
}

impl Config {
    pub const fn new() -> Config {
        Config {
            index: 0,
            module_clock_hz: ccu::OSC24M_HZ,
            id_clock_hz: ID_CLOCK_MAX_HZ,
            data_clock_hz: DEFAULT_DATA_CLOCK_HZ,
            max_bus_mode: BusMode::HighSpeed,
            four_bit: true,
            auto_stop: true,
            max_blocks_per_command: DEFAULT_MAX_BLOCKS_PER_COMMAND,
            tries: 3,
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config::new()
    }
}

/// Counters for printing and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Commands issued (CMD55 counted apart from its ACMD; auto stop not counted).
    pub commands: u64,
    pub blocks_read: u64,
    pub blocks_written: u64,
    /// Read or write commands tried again after a failure.
    pub retries: u64,
    /// Re-initialisations before a try.
    pub reinits: u64,
    /// Bus modes given up after CRC errors (each followed by a re-initialisation).
    pub step_downs: u64,
    /// Read or write commands that failed with a CRC (or framing) error on the bus.
    pub crc_errors: u64,
    /// GCTRL resets after a failure.
    pub controller_resets: u64,
    /// Clock update commands.
    pub clock_updates: u64,
    /// Read commands whose data the IDMAC moved.
    pub dma_transfers: u64,
    /// Of those, the commands whose data went through the bounce buffer.
    pub bounce_transfers: u64,
    /// Reads taken into the queue ([`BlockDevice::submit_read`] answered `Queued`).
    pub queued_reads: u64,
}

/// The SD card behind an Allwinner SD/MMC controller, as a [`BlockDevice`]; reads through the
/// IDMAC with a [`DmaMemory`] `D`, through the FIFO with [`NoDma`].
#[derive(Debug)]
pub struct SunxiMmc<R: Regs, C: Clock, D: DmaMemory = NoDma> {
    regs: R,
    ccu: Option<R>,
    clock: C,
    config: Config,
    info: CardInfo,
    speed: SpeedCap,
    stats: Stats,
    dma: D,
    /// The descriptors and bounce buffer; `None`: PIO only.
    area: Option<DmaArea>,
    /// Reads through the FIFO though the area is there ([`BlockDevice::set_transfer`]).
    pio: bool,
    /// Queued reads (with DMA).
    queue: crate::sd::queue::ReadQueue,
}

impl<R: Regs, C: Clock> SunxiMmc<R, C> {
    /// Reset the controller (through the CCU `ccu` when given: gate, reset, module clock) and
    /// bring up the card with the default [`Config`]; data through the FIFO.
    pub fn init(regs: R, ccu: Option<R>, clock: C) -> Result<Self, SdError> {
        Self::with_config(regs, ccu, clock, Config::new())
    }

    /// [`SunxiMmc::init`] with explicit settings.
    pub fn with_config(regs: R, ccu: Option<R>, clock: C, config: Config) -> Result<Self, SdError> {
        Self::with_config_dma(regs, ccu, clock, config, NoDma)
    }
}

impl<R: Regs, C: Clock, D: DmaMemory> SunxiMmc<R, C, D> {
    /// [`SunxiMmc::init`] with reads through the IDMAC, over `dma`'s bus addresses and cache
    /// maintenance (see [DMA](self#dma-reads)). If the DMA area cannot be allocated or `dma` gives
    /// it no bus address, the driver reads through the FIFO ([`SunxiMmc::dma_active`] says which).
    pub fn init_dma(regs: R, ccu: Option<R>, clock: C, dma: D) -> Result<Self, SdError> {
        Self::with_config_dma(regs, ccu, clock, Config::new(), dma)
    }

    /// [`SunxiMmc::init_dma`] with explicit settings. With DMA, a command moves at most
    /// [`DMA_MAX_BLOCKS`] blocks straight into the caller's buffer, [`DMA_BUFFER_BLOCKS`] through
    /// the bounce buffer (`max_blocks_per_command` is capped to the first).
    pub fn with_config_dma(
        regs: R,
        ccu: Option<R>,
        clock: C,
        mut config: Config,
        mut dma: D,
    ) -> Result<Self, SdError> {
        let area = if D::ENABLED {
            DmaArea::new(&mut dma)
        } else {
            None
        };
        if area.is_some() {
            config.max_blocks_per_command = config.max_blocks_per_command.min(DMA_MAX_BLOCKS);
        }
        let mut sd = SunxiMmc {
            regs,
            ccu,
            clock,
            config,
            info: CardInfo::default(),
            speed: SpeedCap::new(config.max_bus_mode),
            stats: Stats::default(),
            dma,
            area,
            pio: false,
            queue: crate::sd::queue::ReadQueue::new(),
        };
        sd.reinit()?;
        Ok(sd)
    }

    sd::driver_accessors!(Config, Stats);

    /// Do reads go through the IDMAC (else through the FIFO)?
    pub fn dma_active(&self) -> bool {
        sd::queue::DmaReads::dma_on(self)
    }

    pub fn regs_mut(&mut self) -> &mut R {
        &mut self.regs
    }

    pub fn clock_mut(&mut self) -> &mut C {
        &mut self.clock
    }

    /// The registers and clock back, once every queued read has ended (their outcomes are
    /// dropped: poll them first to see them).
    pub fn into_parts(mut self) -> (R, Option<R>, C) {
        sd::queue::drain(&mut self);
        (self.regs, self.ccu, self.clock)
    }

    // ---- waits ----

    /// Poll: `check` the register values until it says done (Ok) or failed (Err), at most
    /// `timeout_us` and an iteration cap, then a timeout for `wait`.
    fn poll<T>(
        &mut self,
        timeout_us: u64,
        wait: Wait,
        mut check: impl FnMut(&mut R) -> Option<Result<T, Cause>>,
    ) -> Result<T, Cause> {
        sd::poll(self, timeout_us, wait, |h| check(&mut h.regs))
    }

    /// Wait for register `off` to have `mask` all clear.
    fn wait_clear(
        &mut self,
        off: usize,
        mask: u32,
        timeout_us: u64,
        wait: Wait,
    ) -> Result<(), Cause> {
        self.poll(timeout_us, wait, |r| {
            (r.read32(off) & mask == 0).then_some(Ok(()))
        })
    }

    /// Wait for RINT to have all of `want` (Ok, RINT) or an error bit (Err).
    fn wait_rint(&mut self, want: u32, timeout_us: u64, wait: Wait) -> Result<u32, Cause> {
        self.poll(timeout_us, wait, |r| {
            let rint = r.read32(RINT);
            if rint & RINT_ERRORS != 0 {
                Some(Err(Cause::Rint { rint }))
            } else {
                (rint & want == want).then_some(Ok(rint))
            }
        })
    }

    /// Wait for STATUS to have `mask` clear (FIFO not empty / not full), watching RINT for errors;
    /// returns STATUS.
    fn wait_fifo(&mut self, mask: u32, timeout_us: u64, wait: Wait) -> Result<u32, Cause> {
        self.poll(timeout_us, wait, |r| {
            let status = r.read32(STATUS);
            if status & mask == 0 {
                return Some(Ok(status));
            }
            let rint = r.read32(RINT);
            (rint & RINT_ERRORS != 0).then_some(Err(Cause::Rint { rint }))
        })
    }

    // ---- controller ----

    /// GCTRL soft, FIFO and DMA reset, then PIO mode, the IDMAC reset and off with its status
    /// cleared, no interrupts, RINT cleared, the timeouts and the bus width set again (and the
    /// FIFO levels for DMA).
    fn reset_controller(&mut self) -> Result<(), Cause> {
        self.gctrl_reset(GCTRL_ACCESS_BY_AHB, GCTRL_RESET)?;
        self.regs.write32(GCTRL, GCTRL_ACCESS_BY_AHB);
        self.regs.write32(DMAC, DMAC_SOFT_RESET);
        self.regs.write32(DMAC, 0);
        self.regs.write32(IDST, IDST_ALL);
        self.regs.write32(IDIE, 0);
        if let Some(area) = self.area.as_mut() {
            // The IDMAC is reset: it reads no descriptor any more.
            area.mem.busy = false;
            self.regs.write32(FTRGLEVEL, FTRGLEVEL_DMA);
        }
        self.regs.write32(IMASK, 0);
        self.regs.write32(RINT, u32::MAX);
        self.regs.write32(TIMEOUT, TIMEOUT_VALUE);
        let width = if self.info.bus_width == 4 { 1 } else { 0 };
        self.regs.write32(WIDTH, width);
        Ok(())
    }

    /// GCTRL = `mode` with the reset bits `resets`, then wait for them to clear.
    fn gctrl_reset(&mut self, mode: u32, resets: u32) -> Result<(), Cause> {
        self.regs.write32(GCTRL, mode | resets);
        self.wait_clear(GCTRL, resets, RESET_TIMEOUT_US, Wait::GlobalReset(resets))
    }

    /// The "update clock" command: the controller takes CLKCR when it clears the start bit.
    fn update_clock(&mut self) -> Result<(), Cause> {
        self.stats.clock_updates += 1;
        self.regs
            .write32(CMD, CMD_START | CMD_UPCLK_ONLY | CMD_WAIT_PRE_OVER);
        self.wait_clear(CMD, CMD_START, CLOCK_TIMEOUT_US, Wait::ClockUpdate)?;
        // The update may raise command done (QEMU) or other bits: none concern a command.
        self.regs.write32(RINT, u32::MAX);
        Ok(())
    }

    /// Run the card clock at `target_hz` or the fastest rate below it: clock off, module clock
    /// (with the CCU) or CLKCR divider, clock on, each CLKCR change with its update. Returns the
    /// rate.
    fn set_clock(&mut self, target_hz: u32) -> Result<u32, Cause> {
        let clkcr = self.regs.read32(CLKCR) & !(CLKCR_ENABLE | CLKCR_POWERSAVE);
        self.regs.write32(CLKCR, clkcr);
        self.update_clock()?;
        let (divider, hz) = match self.ccu.as_mut() {
            Some(ccu) => (
                0,
                ccu_set_module_clock(ccu, self.config.index, target_hz)?.hz,
            ),
            None => clkcr_divider(self.config.module_clock_hz, target_hz)?,
        };
        let clkcr = (clkcr & !CLKCR_DIVIDER_MASK) | divider;
        self.regs.write32(CLKCR, clkcr);
        self.update_clock()?;
        self.regs.write32(CLKCR, clkcr | CLKCR_ENABLE);
        self.update_clock()?;
        Ok(hz)
    }

    /// CCU, controller reset, identification clock.
    fn init_controller(&mut self) -> Result<(), (Step, Cause)> {
        self.info = CardInfo {
            host: HostKind::Sunxi,
            base_clock_hz: match self.ccu {
                Some(_) => ccu::OSC24M_HZ,
                None => self.config.module_clock_hz,
            },
            bus_width: 1,
            ..CardInfo::default()
        };
        if let Some(ccu) = self.ccu.as_mut() {
            let clock = &mut self.clock;
            ccu_enable(ccu, self.config.index, |us| clock.delay_us(us));
        }
        self.reset_controller().map_err(|c| (Step::Reset, c))?;
        let target = match self.config.id_clock_hz {
            0 => ID_CLOCK_MAX_HZ,
            hz => hz.min(ID_CLOCK_MAX_HZ),
        };
        let hz = self.set_clock(target).map_err(|c| (Step::Clock, c))?;
        self.info.id_clock_hz = hz;
        self.clock.delay_us(POWER_UP_US);
        Ok(())
    }

    fn bring_up(&mut self) -> Result<(), (Step, Cause)> {
        self.init_controller()?;
        let four_bit = self.config.four_bit;
        sd::bring_up_card(self, four_bit, |h, csd| {
            let target = h.default_target(csd);
            h.set_clock(target).map_err(|c| (Step::Clock, c))
        })
    }

    /// The Default Speed data clock to ask for: from OSC24M, so at most 24 MHz with the CCU.
    fn default_target(&self, csd: &sd::Csd) -> u32 {
        let target = sd::data_clock_target(self.config.data_clock_hz, csd);
        match self.ccu {
            Some(_) => target.min(ccu::OSC24M_HZ),
            None => target,
        }
    }

    /// The CMD register value for `c` (without the start bit).
    fn command_word(&self, c: &Command, xfer: Option<Xfer>) -> u32 {
        let mut w = c.cmd.index as u32 & 0x3F;
        if c.cmd == sd::GO_IDLE_STATE.cmd {
            w |= CMD_SEND_INIT_SEQ;
        }
        if c.resp != Resp::None {
            w |= CMD_RESP_EXPIRE;
        }
        match c.resp {
            Resp::R2 => w |= CMD_LONG_RESPONSE | CMD_CHECK_RESPONSE_CRC,
            Resp::None | Resp::R3 => {}
            _ => w |= CMD_CHECK_RESPONSE_CRC,
        }
        if c.abort {
            w |= CMD_STOP_ABORT;
        }
        if let Some(x) = xfer {
            w |= CMD_DATA_EXPIRE | CMD_WAIT_PRE_OVER;
            if x.write {
                w |= CMD_WRITE;
            }
            if x.blocks > 1 && self.config.auto_stop {
                w |= CMD_AUTO_STOP;
            }
        }
        w
    }

    /// After a failed command: reset the controller and update the clock (U-Boot does both); a
    /// failure here shows up at the next command.
    fn reset_after_error(&mut self) {
        self.stats.controller_resets += 1;
        if self.reset_controller().is_ok() {
            let _ = self.update_clock();
        }
    }

    /// Issue a command; the part of [`Host::issue`] after which a failure resets the controller.
    fn send(&mut self, c: Command, arg: u32, xfer: Option<Xfer>) -> Result<[u32; 4], Cause> {
        if xfer.is_some() || (c.resp == Resp::R1b && !c.abort) {
            self.wait_clear(STATUS, STATUS_CARD_BUSY, BUSY_TIMEOUT_US, Wait::CardBusy)?;
        }
        self.wait_clear(CMD, CMD_START, CMD_TIMEOUT_US, Wait::CommandStart)?;
        self.regs.write32(RINT, u32::MAX);
        if let Some(x) = xfer {
            self.regs.write32(BLKSZ, x.block_len as u32);
            self.regs
                .write32(BYTECNT, x.blocks as u32 * x.block_len as u32);
        }
        self.regs.write32(ARG, arg);
        self.stats.commands += 1;
        let word = self.command_word(&c, xfer);
        self.regs.write32(CMD, word | CMD_START);
        self.wait_clear(CMD, CMD_START, CMD_TIMEOUT_US, Wait::CommandStart)?;
        self.wait_rint(RINT_COMMAND_DONE, CMD_TIMEOUT_US, Wait::CommandComplete)?;
        let mut resp = [0u32; 4];
        match c.resp {
            Resp::None => {}
            Resp::R2 => {
                let mut full = [0u32; 4];
                for (w, off) in full.iter_mut().zip(RESP) {
                    *w = self.regs.read32(off);
                }
                resp = sd::r2_from_full(&full);
            }
            _ => resp[0] = self.regs.read32(RESP[0]),
        }
        if c.resp == Resp::R1b {
            self.wait_clear(STATUS, STATUS_CARD_BUSY, BUSY_TIMEOUT_US, Wait::CardBusy)?;
        }
        if xfer.is_none() {
            self.regs.write32(RINT, RINT_COMMAND_DONE);
        }
        Ok(resp)
    }

    // ---- reads and writes ----

    /// The end of a transfer: RINT data over (and auto command done with auto stop), cleared.
    fn wait_data_over(&mut self, blocks: u32, timeout_us: u64) -> Result<(), Cause> {
        let want = self.data_over_bits(blocks);
        self.wait_rint(want, timeout_us, Wait::TransferComplete)?;
        self.regs.write32(RINT, u32::MAX);
        Ok(())
    }

    /// Read one block from the FIFO into `block` (512 bytes, or a register's fewer): as many words
    /// at a time as the FIFO level says.
    fn read_fifo_block(&mut self, block: &mut [u8], n: u32) -> Result<(), Cause> {
        let mut left = block.len() / 4;
        let mut words = block.chunks_exact_mut(4);
        while left > 0 {
            let status = self.wait_fifo(STATUS_FIFO_EMPTY, BLOCK_TIMEOUT_US, Wait::FifoData(n))?;
            let level = (status >> STATUS_FIFO_LEVEL_SHIFT) & STATUS_FIFO_LEVEL_MASK;
            let take = (level as usize).clamp(1, left);
            for w in words.by_ref().take(take) {
                w.copy_from_slice(&self.regs.read32(FIFO).to_le_bytes());
            }
            left -= take;
        }
        Ok(())
    }

    /// Write one block to the FIFO, a word each time it is not full.
    fn write_fifo_block(&mut self, block: &[u8], n: u32) -> Result<(), Cause> {
        for w in block.chunks_exact(4) {
            self.wait_fifo(STATUS_FIFO_FULL, WRITE_TIMEOUT_US, Wait::FifoSpace(n))?;
            self.regs
                .write32(FIFO, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
        }
        Ok(())
    }

    /// One read or write command for the blocks of `buf` (`buf.len() / 512`, 1..=65535) at
    /// `start`: the command, each block through the FIFO (`block` moves block `i`), data over, and
    /// CMD12 from the driver when auto stop is off. A failure resets the controller. Returns the
    /// LBA of the last block.
    fn transfer(
        &mut self,
        d: &Direction,
        start: u64,
        blocks: u32,
        mut block: impl FnMut(&mut Self, u32) -> Result<(), Cause>,
    ) -> Result<u64, Failure> {
        let c = sd::begin_transfer(self, d, start, blocks)?;
        let timeout = if d.write {
            WRITE_TIMEOUT_US
        } else {
            BLOCK_TIMEOUT_US
        };
        let mut lba = start;
        let r = (0..blocks)
            .try_for_each(|i| {
                lba = start + i as u64;
                block(self, i)
            })
            .and_then(|()| self.wait_data_over(blocks, timeout));
        if let Err(cause) = r {
            self.reset_after_error();
            return Err(Failure {
                cmd: c.cmd,
                lba,
                cause,
            });
        }
        if blocks > 1 && !self.config.auto_stop {
            sd::stop(self, lba)?;
        }
        Ok(lba)
    }

    /// Read the `buf.len() / 512` blocks of `buf` from `start`: through the IDMAC when DMA is on
    /// (one command straight into `buf` when it can take the data, else as many as the bounce
    /// buffer needs), else one command through the FIFO.
    fn read_once(&mut self, start: u64, buf: &mut [u8]) -> Result<(), Failure> {
        if sd::queue::DmaReads::dma_on(self) {
            return sd::queue::read_once_dma(self, start, buf);
        }
        let blocks = (buf.len() / BLOCK_SIZE) as u32;
        self.transfer(&READ, start, blocks, |sd, i| {
            let at = i as usize * BLOCK_SIZE;
            sd.read_fifo_block(&mut buf[at..at + BLOCK_SIZE], i)
        })?;
        self.stats.blocks_read += blocks as u64;
        Ok(())
    }

    /// One write command for the blocks of `buf` to `start`, up to the card having programmed
    /// them (busy released, then CMD13 until it is back in "tran").
    fn write_once(&mut self, start: u64, buf: &[u8]) -> Result<(), Failure> {
        let blocks = (buf.len() / BLOCK_SIZE) as u32;
        let last = self.transfer(&WRITE, start, blocks, |sd, i| {
            let at = i as usize * BLOCK_SIZE;
            sd.write_fifo_block(&buf[at..at + BLOCK_SIZE], i)
        })?;
        let fail = |(cmd, cause)| Failure {
            cmd,
            lba: last,
            cause,
        };
        let c = WRITE.command(blocks).cmd;
        self.wait_clear(STATUS, STATUS_CARD_BUSY, WRITE_TIMEOUT_US, Wait::CardBusy)
            .map_err(|cause| fail((c, cause)))?;
        sd::wait_programmed(self).map_err(fail)?;
        self.stats.blocks_written += blocks as u64;
        Ok(())
    }
}

/// CLKCR's divider for `target_hz` or less from `module_hz`: 0 (undivided) when the module clock
/// is not faster, else n with module / 2n <= target (n <= 255). Returns (divider, rate).
fn clkcr_divider(module_hz: u32, target_hz: u32) -> Result<(u32, u32), Cause> {
    let err = Cause::ModClock {
        parent_hz: module_hz,
        target_hz,
    };
    if module_hz == 0 || target_hz == 0 {
        return Err(err);
    }
    if module_hz <= target_hz {
        return Ok((0, module_hz));
    }
    let n = module_hz.div_ceil(2 * target_hz);
    if n > CLKCR_DIVIDER_MASK {
        return Err(err);
    }
    Ok((n, module_hz / (2 * n)))
}

impl<R: Regs, C: Clock, D: DmaMemory> Host for SunxiMmc<R, C, D> {
    sd::host_fields!();

    fn issue(&mut self, c: Command, arg: u32, xfer: Option<Xfer>) -> Result<[u32; 4], Cause> {
        sd::check_allowed(c)?;
        let r = self.send(c, arg, xfer);
        if r.is_err() {
            self.reset_after_error();
        }
        r
    }

    fn set_four_bit(&mut self) {
        self.regs.write32(WIDTH, 1);
    }

    fn read_register(&mut self, c: Command, arg: u32, buf: &mut [u8]) -> Result<u32, Cause> {
        let xfer = Xfer::register(buf.len());
        let r = self.send(c, arg, Some(xfer)).and_then(|resp| {
            self.read_fifo_block(buf, 0)?;
            self.wait_data_over(1, BLOCK_TIMEOUT_US)?;
            Ok(resp[0])
        });
        if r.is_err() {
            self.reset_after_error();
        }
        r
    }

    /// High Speed only (no 1.8 V here). With the CCU: 50 MHz from PLL_PERIPH0 (600 MHz / 12 as
    /// U-Boot's SPL sets it up); without it, CLKCR's divider from the module clock as found.
    fn mode_clock(&mut self, mode: BusMode) -> Result<u32, SpeedNote> {
        if mode != BusMode::HighSpeed {
            return Err(SpeedNote::HostLacks { mode });
        }
        let (base_hz, best) = match self.ccu.as_mut() {
            Some(ccu) => match ccu_module_clock(ccu, HS_CLOCK_MAX_HZ) {
                Ok(m) => (m.hz * m.m as u32, m.hz),
                Err(Cause::PllOff { ctrl }) => return Err(SpeedNote::PllOff { ctrl }),
                Err(_) => (0, 0),
            },
            None => {
                let base = self.config.module_clock_hz;
                (
                    base,
                    clkcr_divider(base, HS_CLOCK_MAX_HZ).map_or(0, |d| d.1),
                )
            }
        };
        if best <= self.info.data_clock_hz {
            return Err(SpeedNote::HostClock {
                base_hz,
                best_hz: best,
            });
        }
        Ok(best)
    }

    /// The controller has no timing switch for High Speed on the H3 (Linux binds its MMC0 as
    /// `sun7i-a20-mmc`, without the new timing mode): only the clock and its phase delays change.
    fn enter_mode(&mut self, mode: BusMode) -> Result<u32, Cause> {
        if mode != BusMode::HighSpeed {
            let csd = self.info.csd()?;
            return self.set_clock(self.default_target(&csd));
        }
        let hz = self.set_clock(HS_CLOCK_MAX_HZ)?;
        if let Some(ccu) = self.ccu.as_mut() {
            // The card clock's source is PLL_PERIPH0 now.
            let ctrl = ccu.read32(ccu::PLL_PERIPH0_CTRL_REG);
            self.info.base_clock_hz = pll_periph0_hz(ctrl).unwrap_or(self.info.base_clock_hz);
        }
        Ok(hz)
    }

    fn reset_lines(&mut self) {
        self.reset_after_error();
    }

    fn bring_up(&mut self) -> Result<(), (Step, Cause)> {
        SunxiMmc::bring_up(self)
    }

    fn timeout(&mut self, wait: Wait, waited_us: u64) -> Cause {
        Cause::SunxiTimeout {
            wait,
            waited_us,
            rint: self.regs.read32(RINT),
            status: self.regs.read32(STATUS),
            idst: self.regs.read32(IDST),
        }
    }
}

// Reads synchronous or queued (with DMA, see `crate::sd::queue`); writes synchronous through
// the FIFO. A synchronous request first lets every queued read end.
sd::queue::queued_block_device!(SunxiMmc, D: DmaMemory);

impl<R: Regs, C: Clock, D: DmaMemory> sd::queue::DmaReads for SunxiMmc<R, C, D> {
    fn queue(&mut self) -> &mut sd::queue::ReadQueue {
        &mut self.queue
    }

    fn has_dma(&self) -> bool {
        self.area.is_some()
    }

    fn dma_on(&self) -> bool {
        self.area.is_some() && !self.pio
    }

    fn start_read(
        &mut self,
        lba: u64,
        dst: usize,
        len: usize,
    ) -> Result<sd::queue::DmaCmd, Failure> {
        self.start_dma_read(lba, dst, len)
    }

    const WAIT: Wait = Wait::DmaDone;

    fn check_read(&mut self, c: &sd::queue::DmaCmd) -> Option<Result<(), Cause>> {
        self.dma_check(c)
    }

    fn complete_read(
        &mut self,
        c: &sd::queue::DmaCmd,
        r: Result<(), Cause>,
    ) -> Result<(), Failure> {
        self.complete_dma_read(c, r)
    }

    fn read_once(&mut self, start: u64, buf: &mut [u8]) -> Result<(), Failure> {
        SunxiMmc::read_once(self, start, buf)
    }

    fn read_now(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError> {
        SunxiMmc::read_now(self, lba, buf)
    }

    fn note_queued(&mut self) {
        self.stats.queued_reads += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_clock_settings_match_u_boot() {
        // 400 kHz: 24 MHz / 60 -> N = 2, M = 15.
        let id = ModuleClock::for_rate(400_000).unwrap();
        assert_eq!((id.n, id.m, id.hz), (2, 15, 400_000));
        assert_eq!(id.register(), 0x8002_000E);
        // 24 MHz: undivided, sample delay 5.
        let data = ModuleClock::for_rate(24_000_000).unwrap();
        assert_eq!((data.n, data.m, data.hz), (0, 1, 24_000_000));
        assert_eq!(data.register(), 0x8050_0000);
        // 25 MHz asks for more than OSC24M: undivided.
        assert_eq!(ModuleClock::for_rate(25_000_000).unwrap().hz, 24_000_000);
        // Never above the target.
        for t in [187_500, 200_000, 390_000, 1_000_000, 12_345_678] {
            let m = ModuleClock::for_rate(t).unwrap();
            assert!(
                m.hz <= t && (1..=16).contains(&m.m) && m.n <= 3,
                "{t}: {m:?}"
            );
        }
        assert_eq!(ModuleClock::for_rate(187_499), None);
        assert_eq!(ModuleClock::for_rate(0), None);
    }

    #[test]
    fn high_speed_module_clock_from_pll_periph0() {
        // U-Boot's SPL: enabled, locked, N = 25, K = 2 -> 600 MHz.
        assert_eq!(
            pll_periph0_hz(0x9004_1811 | ccu::PLL_LOCK),
            Some(600_000_000)
        );
        assert_eq!(pll_periph0_hz(0x0004_1811), None);
        assert_eq!(pll_periph0_hz(0x8004_1811), None, "not locked");
        // 600 MHz / 12 = 50 MHz with U-Boot's phase delays for it (output 3, sample 4).
        let hs =
            ModuleClock::from_source(ccu::CLK_SRC_PLL_PERIPH0, 600_000_000, 50_000_000).unwrap();
        assert_eq!((hs.n, hs.m, hs.hz), (0, 12, 50_000_000));
        assert_eq!(hs.register(), 0x8140_030B);
        // A slower PLL still never goes above the target.
        let m =
            ModuleClock::from_source(ccu::CLK_SRC_PLL_PERIPH0, 432_000_000, 50_000_000).unwrap();
        assert!(m.hz <= 50_000_000 && m.hz > 40_000_000, "{m:?}");
    }

    #[test]
    fn clkcr_divider_values() {
        assert_eq!(clkcr_divider(24_000_000, 400_000), Ok((30, 400_000)));
        assert_eq!(clkcr_divider(50_000_000, 400_000), Ok((63, 396_825)));
        assert_eq!(clkcr_divider(24_000_000, 25_000_000), Ok((0, 24_000_000)));
        assert!(clkcr_divider(200_000_000, 100_000).is_err());
        assert!(clkcr_divider(0, 400_000).is_err());
    }
}
