//! SD host controller (SDHCI) driver: reads SD cards through the Raspberry Pi's Arasan "EMMC"
//! controller (Pi 3 / Zero 2 W at `0x3F30_0000`, Pi 4 legacy `0xFE30_0000`, where QEMU's raspi3b
//! and raspi4b attach `-drive if=sd`) and other SDHCI v2/v3 controllers such as the Pi 4's EMMC2,
//! the Sophgo CV1800B / SG2002's DesignWare MSHC (Milk-V Duo) and the SpacemiT K1's SDHCI
//! (BPI-F3): what those two need beyond the specification is [`Config::variant`] (the module
//! `vendor`, [`Variant`]).
//! Reads, and block writes when asked ([`WriteBlocks`]); polled; High Speed on every host, UHS-I
//! (DDR50, SDR50, SDR104) on SDHCI v3 hosts in a slot that switches to 1.8 V ([`Slot`]), ADMA2
//! reads where the host has it.
//!
//! # Design
//!
//! - **The SD protocol is shared.** The identification sequence, the command set, the request loop
//!   with its retries and recovery, the errors and [`CardInfo`] are in [`crate::sd`], used by the
//!   Allwinner driver ([`crate::sunxi_mmc`]) too; this module is the SDHCI side: registers,
//!   clock, how a command and its data go through the controller.
//! - **Hardware behind two small traits.** [`Regs`] is 32-bit register access at an offset;
//!   [`Mmio`] is the real one, a simulator in the tests is another. [`Clock`] is a microsecond
//!   time source; every wait in the driver is a poll loop with a deadline from it (and an iteration
//!   cap besides) that ends in a [`Cause::Timeout`], so a dead card or a wedged controller gives an
//!   error, never a hang.
//! - **32-bit accesses only.** The BCM2835 Arasan controller drops 8- and 16-bit writes, so the
//!   16-bit SDHCI registers are written as the 32-bit words that hold them: block size and count
//!   together at 0x04, transfer mode and command together at 0x0C (writing the command half issues
//!   the command), clock control with timeout control and software reset at 0x2C (one reset bit per
//!   write: QEMU honours only a single bit). While the SD clock runs at 400 kHz or less, every
//!   write is followed by a delay of four SD clocks (Linux's sdhci-iproc does the same: the Arasan
//!   may lose a write that follows another within two SD clocks).
//! - **Polled; ADMA2 where the host has it.** Status is read from INT_STATUS (NORM_INT_STAT |
//!   ERR_INT_STAT << 16) with the wanted bits enabled in INT_STATUS_ENABLE and all signal enables
//!   off. On a host whose capabilities report ADMA2 (the Pi 4's EMMC2), given a [`DmaMemory`]
//!   ([`Sdhci::with_dma`]: the board's bus addresses and cache maintenance), reads go by the
//!   ADMA2 engine and are queued like virtio-blk's ([`BlockDevice::queue_depth`]
//!   [`QUEUE_DEPTH`]; the module `adma` says how). Everything else (writes, registers, hosts
//!   without ADMA2 such as the BCM2835 Arasan, buffers the controller cannot reach and too big
//!   for the bounce buffer) moves through the 0x20 data port in 32-bit words when
//!   BUFFER_READ_READY is set (written to it when BUFFER_WRITE_READY is).
//! - **The Arasan "EMMC" keeps programmed I/O.** It has no DMA of its own; Linux feeds it through
//!   the BCM2835 system DMA controller (DREQ 11). This driver does not: the runtime gives the
//!   card a core of its own while the others compute (`io_core`), so the words the CPU moves
//!   cost that core, not the forward pass. In the simulator's model a 256 KiB page at High Speed
//!   (41.7 MHz) takes 12.9 ms of bus time and 26.1 ms with the CPU draining the port
//!   (`cargo xtask bench --only card`); with the I/O core reading ahead, that time hides behind
//!   compute as long as compute per page is longer. What the system DMA controller would buy is
//!   that core back for compute (a quarter of a Pi 3's), measured nowhere yet: no QEMU machine
//!   paces the BCM2835 DMA controller with the SD host's DREQ.
//! - **A closed command set.** The driver sends only the commands in [`COMMANDS`]: the
//!   [`READ_ONLY_COMMANDS`] and the two block writes [`WRITE_COMMANDS`] (CMD24/25), which only
//!   [`WriteBlocks::write_blocks`] sends. The one function that issues commands refuses anything
//!   else (a `debug_assert!` and a [`Cause::Forbidden`] error), so no erase (CMD32/33/38), lock
//!   (CMD42), CSD program (CMD27) or write-protect command can reach the card. A driver that is never
//!   asked to write sends read-only commands only.
//! - **Errors are values.** [`SdError`] names the step or command, the LBA, the error status bits
//!   or what a deadline was waiting for. No register value can make the driver panic.
//!
//! # Init sequence ([`Sdhci::init`])
//!
//! 1. Read the host version (0xFE) and capabilities (0x40); base clock = the given one, else the
//!    capabilities' base clock field (the BCM2835 reports none: the kernel asks the firmware; a
//!    [`Variant`] whose field is not to be trusted refuses to start without a given one).
//! 2. SRST_ALL, wait for it to clear; a [`Variant`]'s host control 2 cleared and its vendor
//!    registers set ([`Variant`]'s docs). Status enables on (command complete, transfer complete, buffer
//!    read ready, error bits 0-9), signal enables off, status cleared. Bus power on at 3.3 V.
//! 3. Identification clock <= 400 kHz: SDHCI v3 10-bit divider (base / 2N), v1/v2 8-bit power of
//!    two; internal clock on, wait for stable, then SD clock on; 1 ms for the card's 74 clocks.
//! 4. CMD0 (idle). CMD8 0x1AA: an echo means a v2 card; no answer means v1 (SDSC), or no card.
//! 5. CMD55 + ACMD41 (HCS for v2 cards, 2.7-3.6 V) every 10 ms until OCR bit 31 (powered up), for
//!    at most [`ACMD41_TIMEOUT_US`] (2 s: the spec gives a card 1 s of busy, Circle's emmc.cpp
//!    waits without limit); then CCS (OCR bit 30) says SDHC/SDXC (block addresses) or SDSC (byte
//!    addresses). When neither CMD8 nor the first CMD55 gets a response, nothing answers on the
//!    bus: the slot is empty (or not wired to this controller), reported as [`Cause::NoCard`].
//! 6. CMD2 (CID), CMD3 (RCA), CMD9 (CSD: capacity from CSD v1 or v2), CMD7 (select, R1b).
//! 7. CMD55 + ACMD6 (4-bit bus) and the host control data width bit; CMD16 512 for SDSC.
//! 8. Data clock: 25 MHz or the fastest the divider allows below it (and below the CSD's
//!    TRAN_SPEED).
//! 9. High Speed ([`crate::sd`]'s `raise_speed`, unless [`Config::max_bus_mode`] says no): when
//!    the divider can give more than the Default Speed clock at or below 50 MHz and the CSD lists
//!    command class 10, CMD6 in check mode (0x00FF_FFF0) and, if its 64-byte status block (read
//!    whole, as one block of BLOCK_SIZE 64) lists High Speed, CMD6 in switch mode (0x80FF_FFF1);
//!    when that status says group 1 switched to function 1, host control 1's high-speed enable
//!    (not on the BCM2835 Arasan: [`Config::high_speed_bit`]) and the fastest divider at or below
//!    50 MHz (100 MHz / 2 on EMMC2, 250 MHz / 6 = 41.7 MHz on a Pi 3's EMMC). Anything else
//!    leaves the card at Default Speed with [`CardInfo::speed_note`] saying why.
//!
//! UHS-I (see the module `uhs`): on a v3 host reporting 1.8 V with a [`Slot`] that switches the
//! rail and [`Config::max_bus_mode`] above High Speed, ACMD41 asks for 1.8 V (S18R, XPC); a card
//! answering S18A gets CMD11 and the host's voltage switch before CMD2; then CMD6 offers SDR50,
//! SDR104 and DDR50, tried fastest first (DDR50 before SDR50: the same 50 MB/s without tuning),
//! with host control 2's UHS mode and, for SDR104 (and SDR50 when the capabilities ask), tuning by
//! CMD19. A failed switch power-cycles the card back to 3.3 V; failed tuning tries the next mode.
//!
//! Two CRC errors in a row on one request above Default Speed step the bus down: the mode is
//! capped one lower for this driver, the card is initialised again and the request gets its tries
//! afresh (one CRC error alone is retried at the same speed).
//!
//! The card-detect bit (PRESENT_STATE bit 16) is not consulted: Linux's sdhci-iproc.c sets
//! `SDHCI_QUIRK_BROKEN_CARD_DETECTION` for the BCM2835's Arasan controller ("brcm,bcm2835-sdhci").
//! The BCM2711's EMMC2 has no such quirk there, but one rule for both costs little: "no card" comes
//! from the card not answering, within the command deadlines.
//!
//! # Reads ([`BlockDevice::read_blocks`])
//!
//! A request is checked against the capacity, then split into commands of at most
//! [`Config::max_blocks_per_command`] blocks (default [`DEFAULT_MAX_BLOCKS_PER_COMMAND`], far
//! below the 16-bit block count limit). One block is CMD17; more are CMD18 with block count enable
//! and auto CMD12 (or CMD12 sent after the data when [`Config::auto_cmd12`] is off). Each block waits
//! for BUFFER_READ_READY, then 128 words come from the data port; the end waits for
//! TRANSFER_COMPLETE. On any error (ERR_INT_STAT command or data bits, an R1 error bit, a deadline)
//! the CMD and DAT lines are reset (SRST_CMD, SRST_DAT), the card is brought back to the transfer
//! state (CMD13, and CMD12 if it is still sending), and the command is tried again, up to
//! [`Config::tries`] times in all; before the last try the whole controller and card are
//! initialised again.
//!
//! # Writes ([`WriteBlocks::write_blocks`])
//!
//! Refused before anything is sent ([`SdError::WriteProtected`]) when the CSD says
//! PERM_WRITE_PROTECT or TMP_WRITE_PROTECT, or, only if [`Config::write_protect_switch`] is set,
//! when the controller reports a write-protect switch on "lock" (PRESENT_STATE bit 19 clear). That
//! check is off by default: the bit is undocumented on the BCM2835 controllers and a microSD slot
//! has no switch, so its level says nothing about the card. Otherwise the request is split like a
//! read; one block is CMD24, more are CMD25 with block count and auto CMD12 (or CMD12 from the
//! driver). Each block waits for BUFFER_WRITE_READY and then 128 words go to the data port; the end
//! waits for TRANSFER_COMPLETE (which the controller raises after the card's busy signal), and then
//! CMD13 is polled until the card has left the programming state (`prg`) for `tran` with
//! READY_FOR_DATA: a controller may raise transfer complete early, and a card may keep programming
//! after CMD12. Every wait has a deadline ([`WRITE_TIMEOUT_US`], [`PROGRAM_TIMEOUT_US`]). Error
//! handling and retries are those of reads (a card stuck receiving is stopped with CMD12 and
//! waited for); a write protect violation in the card status is reported at once, not retried.
//!
//! Writes are synchronous: `write_blocks` returns when the card reports the blocks programmed.
//! There is nothing to overlap (the CPU moves every word through the data port), and it gives the
//! caller an order it can rely on: a block written after another reaches the card after it, which
//! is what the prompt cache's "payload first, valid flag last" needs against a power cut.
//!
//! # Not covered
//!
//! SDUC (CSD v3), 8-bit eMMC, card interrupts, erase before write (ACMD23), the card's
//! write-protect groups, SDMA and 64-bit ADMA2, writes by DMA, the driver-strength and
//! current-limit function groups of CMD6 (UHS-I runs with the card's defaults), the BCM2835's
//! other SD host ("sdhost", which Linux uses on the Pi 3 for 50 MHz). Board setup belongs to the caller:
//! on a Pi 3 / Zero 2 W the card slot must be routed to this controller (GPIO 48-53 to ALT3; the
//! firmware routes it to SDHOST) and on a Pi the card power and the base clock come from the
//! firmware mailbox.
//!
//! # Barriers
//!
//! [`Sdhci::init`], [`BlockDevice::read_blocks`] and [`WriteBlocks::write_blocks`] call
//! [`Regs::barrier`] before their first register access and after their last (the BCM2835
//! peripherals guide, section 1.3; see [`crate::mmio`]).

mod adma;
mod divider;
pub use crate::sd::regs::sdhci as regs;
mod uhs;
mod vendor;

pub use crate::dma::{DmaMemory, NoDma, DMA_ALIGN};
pub use crate::sd::queue::QUEUE_DEPTH;
pub use crate::sd::{
    is_allowed, is_read_only, parse_cid, parse_csd, r2_register, state_name, tran_speed_hz,
    BusMode, CardInfo, Cause, Cid, Clock, Cmd, Csd, Failed, SdError, SpeedNote, Step, Wait,
    WriteProtect, ACMD41_POLL_US, ACMD41_TIMEOUT_US, BLOCK_TIMEOUT_US, BUSY_TIMEOUT_US,
    CLOCK_TIMEOUT_US, CMD_TIMEOUT_US, COMMANDS, DATA_CLOCK_MAX_HZ, HS_CLOCK_MAX_HZ,
    ID_CLOCK_MAX_HZ, POWER_UP_US, PROGRAM_POLL_US, PROGRAM_TIMEOUT_US, READ_ONLY_COMMANDS,
    RESET_TIMEOUT_US, WRITE_COMMANDS, WRITE_TIMEOUT_US,
};
pub use adma::{ADMA_BOUNCE_BYTES, ADMA_DESCRIPTORS, ADMA_DESC_BYTES, ADMA_MAX_BYTES};
pub use divider::{clock_divider, Divider};
pub use uhs::{NoSlot, Slot, POWER_OFF_US, SIGNAL_CLOCK_US, SIGNAL_SETTLE_US, TUNING_TRIES};
pub use vendor::*;

use core::fmt;

use crate::block::{BlockDevice, WriteBlocks, BLOCK_SIZE};
pub use crate::mmio::{Mmio, Regs};
use crate::sd::{self, Command, Direction, Failure, Host, Resp, SpeedCap, Xfer, READ, WRITE};
use regs::*;

/// Size of an SDHCI register block: the `size` to give [`Mmio::new`] for a controller.
pub const REGISTER_BLOCK_SIZE: usize = 0x100;

/// Is a card inserted, by the present state's card-inserted bit? Works in QEMU and on EMMC2; the
/// BCM2835's legacy controller may not report it (Linux marks its card detection broken), so a
/// caller there should rather try [`Sdhci::init`].
pub fn card_present<R: Regs>(regs: &mut R) -> bool {
    regs.read32(PRESENT_STATE) & PS_CARD_INSERTED != 0
}

/// [`clock_divider`], or the clock-setup error naming the base clock, the target and the host
/// version when no divider reaches the target.
fn divider_for(base_hz: u32, target_hz: u32, host_version: u8) -> Result<Divider, (Step, Cause)> {
    clock_divider(base_hz, target_hz, host_version).ok_or((
        Step::Clock,
        Cause::Divider {
            base_hz,
            target_hz,
            host_version,
        },
    ))
}

/// Pause after the SD clock is (re)enabled.
pub const CLOCK_SETTLE_US: u32 = 1_000;
/// Default limit of blocks per read command (512 KiB): big enough that command overhead does not
/// matter, small enough that a retry re-reads little.
pub const DEFAULT_MAX_BLOCKS_PER_COMMAND: u16 = 1024;

/// The command half of the CMD_TRANSFER word for `c`.
fn command_word(c: &Command) -> u32 {
    let resp = match c.resp {
        Resp::None => CMD_RESP_NONE,
        Resp::R2 => CMD_RESP_136 | CMD_CRC_CHECK,
        Resp::R3 => CMD_RESP_48,
        Resp::R1 | Resp::R6 | Resp::R7 => CMD_RESP_48 | CMD_CRC_CHECK | CMD_INDEX_CHECK,
        Resp::R1b => CMD_RESP_48_BUSY | CMD_CRC_CHECK | CMD_INDEX_CHECK,
    };
    let mut w = ((c.cmd.index as u32 & 0x3F) << CMD_INDEX_SHIFT) | resp;
    if c.data {
        w |= CMD_DATA_PRESENT;
    }
    if c.abort {
        w |= CMD_TYPE_ABORT;
    }
    w
}

/// Driver settings; [`Config::new`] gives the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The controller's base clock in Hz (on a Pi: the firmware's EMMC / EMMC2 clock rate); 0 = take
    /// it from the capabilities register.
    pub base_clock_hz: u32,
    /// Identification clock target (at most [`ID_CLOCK_MAX_HZ`]).
    pub id_clock_hz: u32,
    /// Data clock target (at most [`DATA_CLOCK_MAX_HZ`]).
    pub data_clock_hz: u32,
    /// Switch the card and host to a 4-bit data bus.
    pub four_bit: bool,
    /// Let the controller send CMD12 after a multi-block read (else the driver sends it).
    pub auto_cmd12: bool,
    /// Largest number of blocks one read command asks for (1..=65535).
    pub max_blocks_per_command: u16,
    /// Tries per read command (>= 1); the card is initialised again before the last one.
    pub tries: u8,
    /// Delay four SD clocks after each register write while the SD clock is at most 400 kHz
    /// (needed by the BCM2835 Arasan controller).
    pub arasan_write_delay: bool,
    /// Refuse writes while the controller reports the card's write-protect switch on "lock"
    /// (PRESENT_STATE bit 19 clear). Off by default: the bit is undocumented on the BCM2835 Arasan
    /// and EMMC2 controllers and microSD has no switch (the Pi's slots have no switch line). Turn
    /// on only for a full-size SD slot whose switch line the controller reports.
    pub write_protect_switch: bool,
    /// The fastest bus mode to try: [`BusMode::HighSpeed`] by default, [`BusMode::DefaultSpeed`]
    /// to stay at 25 MHz.
    pub max_bus_mode: BusMode,
    /// Set host control 1's high-speed enable (bit 2) in High Speed. Off for the BCM2835 Arasan
    /// "EMMC" (Pi 1 to 3, the Pi 4's legacy controller): Linux's sdhci-iproc gives it
    /// `SDHCI_QUIRK_NO_HISPD_BIT`, and runs its High Speed with the bit clear.
    pub high_speed_bit: bool,
    /// Which host, for its quirks ([`Variant`]): [`Variant::Standard`] by default.
    pub variant: Variant,
}

impl Config {
    pub const fn new(base_clock_hz: u32) -> Config {
        Config {
            base_clock_hz,
            id_clock_hz: ID_CLOCK_MAX_HZ,
            data_clock_hz: DATA_CLOCK_MAX_HZ,
            four_bit: true,
            auto_cmd12: true,
            max_blocks_per_command: DEFAULT_MAX_BLOCKS_PER_COMMAND,
            tries: 3,
            arasan_write_delay: true,
            write_protect_switch: false,
            max_bus_mode: BusMode::HighSpeed,
            high_speed_bit: true,
            variant: Variant::Standard,
        }
    }
}

/// Counters for printing and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Commands issued (CMD55 counted apart from its ACMD; auto CMD12 not counted).
    pub commands: u64,
    /// Blocks read successfully.
    pub blocks_read: u64,
    /// Blocks written successfully.
    pub blocks_written: u64,
    /// Read or write commands tried again after a failure.
    pub retries: u64,
    /// Re-initialisations before a last try.
    pub reinits: u64,
    /// Bus modes given up after CRC errors (each followed by a re-initialisation).
    pub step_downs: u64,
    /// Read or write commands that failed with a CRC (or framing) error on the bus.
    pub crc_errors: u64,
    /// Read commands whose data the ADMA2 engine moved.
    pub dma_transfers: u64,
    /// SRST_CMD resets.
    pub cmd_line_resets: u64,
    /// SRST_DAT resets.
    pub dat_line_resets: u64,
}

/// What the SDHCI side of a read and a write differ in.
struct Way {
    /// The buffer ready status bit awaited before each block.
    ready: u32,
    /// Deadline for each block and for transfer complete.
    timeout_us: u64,
    /// What the wait before block `n` (0-based) of the request is, for its timeout.
    wait: fn(u32) -> Wait,
}

impl Way {
    fn of(d: &Direction) -> Way {
        if d.write {
            Way {
                ready: INT_BUFFER_WRITE_READY,
                timeout_us: WRITE_TIMEOUT_US,
                wait: Wait::BufferWriteReady,
            }
        } else {
            Way {
                ready: INT_BUFFER_READ_READY,
                timeout_us: BLOCK_TIMEOUT_US,
                wait: Wait::BufferReady,
            }
        }
    }
}

/// The SD card behind an SDHCI controller, as a [`BlockDevice`].
pub struct Sdhci<R: Regs, C: Clock, S: Slot = NoSlot, D: DmaMemory = NoDma> {
    regs: R,
    clock: C,
    slot: S,
    dma: D,
    /// The ADMA2 table and bounce buffer; `None`: PIO only.
    area: Option<adma::AdmaArea>,
    /// Reads by PIO though the area is there ([`BlockDevice::set_transfer`]).
    pio: bool,
    queue: sd::queue::ReadQueue,
    config: Config,
    info: CardInfo,
    /// The Default Speed data clock target found at identification (for going back to it).
    default_hz: u32,
    /// SD clock now running (0 = off), for the Arasan write delay.
    sd_clock_hz: u32,
    speed: SpeedCap,
    stats: Stats,
}

impl<R: Regs, C: Clock, S: Slot, D: DmaMemory> fmt::Debug for Sdhci<R, C, S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sdhci")
            .field("config", &self.config)
            .field("info", &self.info)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<R: Regs, C: Clock> Sdhci<R, C> {
    /// Reset the controller and bring up the card with the default [`Config`]; `base_clock_hz` is
    /// the controller's base clock (0 = from the capabilities register).
    pub fn init(regs: R, clock: C, base_clock_hz: u32) -> Result<Self, SdError> {
        Self::with_config(regs, clock, Config::new(base_clock_hz))
    }

    /// [`Sdhci::init`] with explicit settings, in a slot of fixed 3.3 V ([`NoSlot`]).
    pub fn with_config(regs: R, clock: C, config: Config) -> Result<Self, SdError> {
        Self::with_slot(regs, clock, config, NoSlot)
    }
}

impl<R: Regs, C: Clock, S: Slot> Sdhci<R, C, S> {
    /// [`Sdhci::with_config`] in a slot whose I/O rail and card power the board controls: UHS-I
    /// when [`Config::max_bus_mode`] asks for it and host and card can.
    pub fn with_slot(regs: R, clock: C, config: Config, slot: S) -> Result<Self, SdError> {
        Sdhci::with_dma(regs, clock, config, slot, NoDma)
    }
}

impl<R: Regs, C: Clock, S: Slot, D: DmaMemory> Sdhci<R, C, S, D> {
    /// [`Sdhci::with_slot`] with reads by ADMA2 when the controller reports it and `dma` gives the
    /// driver's area a bus address ([`Sdhci::dma_active`] says), queued
    /// ([`BlockDevice::queue_depth`] [`QUEUE_DEPTH`]).
    pub fn with_dma(regs: R, clock: C, config: Config, slot: S, dma: D) -> Result<Self, SdError> {
        let mut sd = Sdhci {
            regs,
            clock,
            slot,
            dma,
            area: None,
            pio: false,
            queue: sd::queue::ReadQueue::new(),
            config,
            default_hz: DATA_CLOCK_MAX_HZ,
            info: CardInfo::default(),
            sd_clock_hz: 0,
            speed: SpeedCap::new(config.max_bus_mode),
            stats: Stats::default(),
        };
        sd.reinit()?;
        Ok(sd)
    }

    sd::driver_accessors!(Config, Stats);

    pub fn regs(&self) -> &R {
        &self.regs
    }

    pub fn regs_mut(&mut self) -> &mut R {
        &mut self.regs
    }

    pub fn clock_mut(&mut self) -> &mut C {
        &mut self.clock
    }

    pub fn into_parts(self) -> (R, C) {
        (self.regs, self.clock)
    }

    pub fn slot_mut(&mut self) -> &mut S {
        &mut self.slot
    }

    // ---- register access and waits ----

    /// Write a register; while the SD clock is at most 400 kHz, then wait four SD clocks.
    fn write(&mut self, off: usize, v: u32) {
        self.regs.write32(off, v);
        if self.config.arasan_write_delay && self.sd_clock_hz <= ID_CLOCK_MAX_HZ {
            let hz = self.sd_clock_hz;
            let us = if hz == 0 {
                10
            } else {
                4_000_000u32.div_ceil(hz)
            };
            self.clock.delay_us(us);
        }
    }

    /// Poll register `off` until `(value & mask != 0) == set`; returns the value.
    fn poll(
        &mut self,
        off: usize,
        mask: u32,
        set: bool,
        timeout_us: u64,
        wait: Wait,
    ) -> Result<u32, Cause> {
        let start = self.clock.now_us();
        // An iteration cap besides the deadline, in case the clock stands still: one poll takes far
        // longer than 10 ns on any bus.
        let max_polls = timeout_us.saturating_mul(100).max(10_000);
        let mut polls = 0u64;
        loop {
            let v = self.regs.read32(off);
            if (v & mask != 0) == set {
                return Ok(v);
            }
            polls += 1;
            let waited = self.clock.now_us().saturating_sub(start);
            if waited >= timeout_us || polls >= max_polls {
                return Err(self.timeout(wait, waited));
            }
        }
    }

    fn timeout(&mut self, wait: Wait, waited_us: u64) -> Cause {
        Cause::Timeout {
            wait,
            waited_us,
            int_status: self.regs.read32(INT_STATUS),
            present: self.regs.read32(PRESENT_STATE),
        }
    }

    /// Poll INT_STATUS until a bit of `want` is set (Ok, the status) or an error bit is (Err).
    /// Transfer complete with only a data timeout counts as complete (SDHCI 3.00, 2.2.18).
    fn wait_int(&mut self, want: u32, timeout_us: u64, wait: Wait) -> Result<u32, Cause> {
        let start = self.clock.now_us();
        let max_polls = timeout_us.saturating_mul(100).max(10_000);
        let mut polls = 0u64;
        loop {
            let s = self.regs.read32(INT_STATUS);
            let err = (s >> 16) as u16;
            if s & want != 0
                && (err == 0 || (want == INT_TRANSFER_COMPLETE && err == ERR_DATA_TIMEOUT))
            {
                return Ok(s);
            }
            if err != 0 || s & INT_ERROR != 0 {
                return Err(self.error_cause(err));
            }
            polls += 1;
            let waited = self.clock.now_us().saturating_sub(start);
            if waited >= timeout_us || polls >= max_polls {
                return Err(self.timeout(wait, waited));
            }
        }
    }

    /// The cause for error status bits `err`: an ADMA error with the engine's own status.
    fn error_cause(&mut self, err: u16) -> Cause {
        if err & ERR_ADMA != 0 {
            let adma_status = self.regs.read32(ADMA_ERROR_STATUS) & 0x7;
            return Cause::Adma {
                adma_status,
                err_status: err,
            };
        }
        Cause::Error { err_status: err }
    }

    /// Software reset of `bit` (SRST_ALL, SRST_CMD or SRST_DAT), waiting for it to clear.
    fn reset(&mut self, bit: u32) -> Result<(), Cause> {
        let v = if bit == SRST_ALL {
            self.sd_clock_hz = 0;
            bit
        } else {
            // Keep the clock and timeout settings that share the word.
            (self.regs.read32(CLOCK_CONTROL) & 0x000F_FFFF) | bit
        };
        match bit {
            SRST_CMD => self.stats.cmd_line_resets += 1,
            SRST_DAT => self.stats.dat_line_resets += 1,
            _ => {}
        }
        self.write(CLOCK_CONTROL, v);
        self.poll(
            CLOCK_CONTROL,
            bit,
            false,
            RESET_TIMEOUT_US,
            Wait::Reset(bit),
        )?;
        if bit == SRST_CMD && self.config.variant.cmd_reset_keeps_complete() {
            self.write(INT_STATUS, INT_CMD_COMPLETE);
        }
        Ok(())
    }

    /// Reset the lines after a failed command: CMD always, DAT when the command used it.
    fn reset_after(&mut self, cause: Cause, dat: bool) {
        let dat_error =
            matches!(cause, Cause::Error { err_status } if err_status & !ERR_CMD_LINE != 0);
        // A failed reset shows up as an inhibit timeout at the next command.
        let _ = self.reset(SRST_CMD);
        if dat || dat_error || matches!(cause, Cause::Timeout { .. }) {
            let _ = self.reset(SRST_DAT);
        }
    }

    /// Set the SD clock: everything off, the divider with the internal clock, wait until stable,
    /// then the SD clock on.
    fn set_clock(&mut self, d: Divider) -> Result<(), Cause> {
        let timeout = TIMEOUT_MAX << TIMEOUT_SHIFT;
        self.poll(
            PRESENT_STATE,
            PS_CMD_INHIBIT | PS_DAT_INHIBIT,
            false,
            CMD_TIMEOUT_US,
            Wait::Inhibit(PS_CMD_INHIBIT | PS_DAT_INHIBIT),
        )?;
        self.write(CLOCK_CONTROL, timeout);
        self.sd_clock_hz = 0;
        let cc = (d.bits & CC_DIVIDER_MASK) | CC_INTERNAL_EN | timeout;
        self.write(CLOCK_CONTROL, cc);
        self.poll(
            CLOCK_CONTROL,
            CC_INTERNAL_STABLE,
            true,
            CLOCK_TIMEOUT_US,
            Wait::ClockStable,
        )?;
        self.write(CLOCK_CONTROL, cc | CC_SD_EN);
        self.sd_clock_hz = d.hz;
        self.clock.delay_us(CLOCK_SETTLE_US);
        Ok(())
    }

    /// The transfer mode bits for `x`: direction, and for more than one block the block count and
    /// (if configured) auto CMD12.
    fn transfer_mode(&self, x: Xfer) -> u32 {
        let mut mode = if x.write { 0 } else { TM_READ };
        if x.dma {
            mode |= TM_DMA;
        }
        if x.blocks > 1 {
            mode |= TM_MULTI_BLOCK | TM_BLOCK_COUNT_EN;
            if self.config.auto_cmd12 {
                mode |= TM_AUTO_CMD12;
            }
        }
        mode
    }

    // ---- bring-up ----

    fn bring_up(&mut self) -> Result<(), (Step, Cause)> {
        self.init_controller()?;
        self.identify()
    }

    /// Reset the controller, power the bus, start the identification clock.
    fn init_controller(&mut self) -> Result<(), (Step, Cause)> {
        let version = ((self.regs.read32(SLOT_STATUS_VERSION) >> VERSION_SHIFT) & 0xFF) as u8;
        let caps = self.regs.read32(CAPABILITIES);
        if D::ENABLED && caps & CAPS_ADMA2 != 0 && self.area.is_none() {
            // Once, at the first initialisation; `None` (PIO) if the controller cannot reach it.
            self.area = adma::AdmaArea::new(&mut self.dma);
        }
        let base_hz = if self.config.base_clock_hz != 0 {
            self.config.base_clock_hz
        } else if self.config.variant.caps_base_clock_broken() {
            return Err((Step::Clock, Cause::BaseClockNotGiven { caps }));
        } else {
            let mask = if version >= SPEC_V3 { 0xFF } else { 0x3F };
            ((caps >> CAPS_BASE_CLOCK_SHIFT) & mask) * 1_000_000
        };
        if base_hz == 0 {
            return Err((Step::Clock, Cause::NoBaseClock { caps }));
        }
        let target = match self.config.id_clock_hz {
            0 => ID_CLOCK_MAX_HZ,
            hz => hz.min(ID_CLOCK_MAX_HZ),
        };
        let id = divider_for(base_hz, target, version)?;
        self.info = CardInfo {
            host_version: version,
            base_clock_hz: base_hz,
            bus_width: 1,
            ..CardInfo::default()
        };

        self.slot_to_3v3();
        self.reset(SRST_ALL).map_err(|c| (Step::Reset, c))?;
        self.after_reset_all().map_err(|c| (Step::Reset, c))?;
        self.write(INT_SIGNAL_ENABLE, 0);
        self.write(INT_STATUS_ENABLE, INT_ENABLED);
        self.write(INT_STATUS, u32::MAX);
        // Voltage first, then power on (host control 1 = 0: 1-bit bus, normal speed).
        self.write(HOST_CONTROL, PWR_3V3);
        self.write(HOST_CONTROL, PWR_3V3 | PWR_ON);
        self.set_clock(id).map_err(|c| (Step::Clock, c))?;
        self.info.id_clock_hz = id.hz;
        self.clock.delay_us(POWER_UP_US);
        Ok(())
    }

    /// The identification sequence ([`sd::identify`]), then the data clock.
    fn identify(&mut self) -> Result<(), (Step, Cause)> {
        let four_bit = self.config.four_bit;
        sd::bring_up_card(self, four_bit, |h, csd| {
            let target = sd::data_clock_target(h.config.data_clock_hz, csd);
            let (base_hz, version) = (h.info.base_clock_hz, h.info.host_version);
            let d = divider_for(base_hz, target, version)?;
            h.set_clock(d).map_err(|c| (Step::Clock, c))?;
            h.default_hz = target;
            Ok(d.hz)
        })
    }

    // ---- reads and writes ----

    /// The data phase that reads and writes share: issue `d`'s command for the `blocks` blocks at
    /// `start` ([`sd::begin_transfer`]), wait for the buffer before each block and let `port`
    /// move block `i` (0-based) through the data port, then wait for transfer complete (for a write,
    /// raised once the last block is sent and the card's busy signal has ended). Returns the LBA of
    /// the last block.
    fn transfer(
        &mut self,
        d: &Direction,
        start: u64,
        blocks: u32,
        mut port: impl FnMut(&mut Self, usize),
    ) -> Result<u64, Failure> {
        let c = sd::begin_transfer(self, d, start, blocks)?;
        let way = Way::of(d);
        let fail = |lba: u64, cause: Cause| Failure {
            cmd: c.cmd,
            lba,
            cause,
        };
        for i in 0..blocks {
            let lba = start + i as u64;
            self.wait_int(way.ready, way.timeout_us, (way.wait)(i))
                .map_err(|e| fail(lba, e))?;
            self.write(INT_STATUS, way.ready);
            port(self, i as usize);
        }
        let last = start + blocks as u64 - 1;
        self.wait_int(
            INT_TRANSFER_COMPLETE,
            way.timeout_us,
            Wait::TransferComplete,
        )
        .map_err(|e| fail(last, e))?;
        self.write(INT_STATUS, INT_TRANSFER_COMPLETE);
        Ok(last)
    }

    /// One read command for `buf.len() / 512` (1..=65535) blocks from `start`: by ADMA2 when the
    /// buffer can go that way, else through the data port.
    fn read_once(&mut self, start: u64, buf: &mut [u8]) -> Result<(), Failure> {
        if sd::queue::DmaReads::dma_on(self) {
            return sd::queue::read_once_dma(self, start, buf);
        }
        let blocks = (buf.len() / BLOCK_SIZE) as u32;
        let last = self.transfer(&READ, start, blocks, |sd, i| {
            let block = &mut buf[i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE];
            for w in block.chunks_exact_mut(4) {
                w.copy_from_slice(&sd.regs.read32(DATA_PORT).to_le_bytes());
            }
        })?;
        if blocks > 1 && !self.config.auto_cmd12 {
            sd::stop(self, last)?;
        }
        self.stats.blocks_read += blocks as u64;
        Ok(())
    }

    /// One write command for the `buf.len() / 512` (1..=65535) blocks in `buf` to `start`, up to
    /// the card having programmed them.
    fn write_once(&mut self, start: u64, buf: &[u8]) -> Result<(), Failure> {
        let blocks = (buf.len() / BLOCK_SIZE) as u32;
        let last = self.transfer(&WRITE, start, blocks, |sd, i| {
            let block = &buf[i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE];
            for w in block.chunks_exact(4) {
                sd.write(DATA_PORT, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            }
        })?;
        if blocks > 1 {
            let r1 = if self.config.auto_cmd12 {
                // The auto CMD12's response: errors found while programming clear on being
                // reported.
                self.regs.read32(RESPONSE[3])
            } else {
                sd::stop(self, last)?
            };
            if r1 & sd::R1_ERRORS != 0 {
                return Err(Failure {
                    cmd: sd::STOP_TRANSMISSION.cmd,
                    lba: last,
                    cause: Cause::CardStatus { r1 },
                });
            }
        }
        sd::wait_programmed(self).map_err(|(cmd, cause)| Failure {
            cmd,
            lba: last,
            cause,
        })?;
        self.stats.blocks_written += blocks as u64;
        Ok(())
    }
}

impl<R: Regs, C: Clock, S: Slot, D: DmaMemory> Host for Sdhci<R, C, S, D> {
    sd::host_fields!();

    fn issue(&mut self, c: Command, arg: u32, xfer: Option<Xfer>) -> Result<[u32; 4], Cause> {
        sd::check_allowed(c)?;
        let busy = c.resp == Resp::R1b;
        let uses_dat = xfer.is_some() || busy;
        let mut inhibit = PS_CMD_INHIBIT;
        if xfer.is_some() || (busy && !c.abort) {
            inhibit |= PS_DAT_INHIBIT;
        }
        if let Err(cause) = self.poll(
            PRESENT_STATE,
            inhibit,
            false,
            CMD_TIMEOUT_US,
            Wait::Inhibit(inhibit),
        ) {
            self.reset_after(cause, true);
            return Err(cause);
        }
        self.write(INT_STATUS, u32::MAX);
        let mut word = command_word(&c);
        if let Some(x) = xfer {
            self.write(
                BLOCK_SIZE_COUNT,
                x.block_len as u32 | (x.blocks as u32) << 16,
            );
            word |= self.transfer_mode(x);
        }
        self.write(ARGUMENT, arg);
        self.stats.commands += 1;
        self.write(CMD_TRANSFER, word);
        if let Err(cause) = self.wait_int(INT_CMD_COMPLETE, CMD_TIMEOUT_US, Wait::CommandComplete) {
            self.reset_after(cause, uses_dat);
            return Err(cause);
        }
        self.write(INT_STATUS, INT_CMD_COMPLETE);
        let mut resp = [0u32; 4];
        match c.resp {
            Resp::None => {}
            Resp::R2 => {
                for (r, off) in resp.iter_mut().zip(RESPONSE) {
                    *r = self.regs.read32(off);
                }
            }
            _ => resp[0] = self.regs.read32(RESPONSE[0]),
        }
        if busy {
            match self.wait_int(INT_TRANSFER_COMPLETE, BUSY_TIMEOUT_US, Wait::Busy) {
                Ok(_) => self.write(INT_STATUS, INT_TRANSFER_COMPLETE),
                // A controller that raised no transfer complete but has let go of DAT: done.
                Err(Cause::Timeout { present, .. }) if present & PS_DAT_INHIBIT == 0 => {}
                Err(cause) => {
                    self.reset_after(cause, true);
                    return Err(cause);
                }
            }
        }
        Ok(resp)
    }

    fn set_four_bit(&mut self) {
        let hc = self.regs.read32(HOST_CONTROL) & 0xFFFF;
        self.write(HOST_CONTROL, hc | HC_DATA_4BIT);
    }

    fn read_register(&mut self, c: Command, arg: u32, buf: &mut [u8]) -> Result<u32, Cause> {
        let xfer = Xfer::register(buf.len());
        let r1 = self.issue(c, arg, Some(xfer))?[0];
        let r = self
            .wait_int(
                INT_BUFFER_READ_READY,
                BLOCK_TIMEOUT_US,
                Wait::BufferReady(0),
            )
            .and_then(|_| {
                self.write(INT_STATUS, INT_BUFFER_READ_READY);
                for w in buf.chunks_exact_mut(4) {
                    w.copy_from_slice(&self.regs.read32(DATA_PORT).to_le_bytes());
                }
                self.wait_int(
                    INT_TRANSFER_COMPLETE,
                    BLOCK_TIMEOUT_US,
                    Wait::TransferComplete,
                )
            });
        match r {
            Ok(_) => {
                self.write(INT_STATUS, INT_TRANSFER_COMPLETE);
                Ok(r1)
            }
            Err(cause) => {
                self.reset_after(cause, true);
                Err(cause)
            }
        }
    }

    fn mode_clock(&mut self, mode: BusMode) -> Result<u32, SpeedNote> {
        self.mode_clock_for(mode)
    }

    fn enter_mode(&mut self, mode: BusMode) -> Result<u32, Cause> {
        self.enter_mode_at(mode)
    }

    fn needs_tuning(&mut self, mode: BusMode) -> bool {
        self.tuning_needed(mode)
    }

    fn tune(&mut self) -> Result<(), Cause> {
        self.tune_sampling()
    }

    fn can_signal_1v8(&mut self) -> bool {
        self.uhs_possible()
    }

    fn switch_to_1v8(&mut self) -> Result<(), Cause> {
        self.signal_1v8()
    }

    fn power_cycle(&mut self) -> Result<(), Cause> {
        self.cycle_power()
    }

    /// Reset both lines and clear the status.
    fn reset_lines(&mut self) {
        let _ = self.reset(SRST_CMD);
        let _ = self.reset(SRST_DAT);
        self.write(INT_STATUS, u32::MAX);
    }

    fn bring_up(&mut self) -> Result<(), (Step, Cause)> {
        Sdhci::bring_up(self)
    }

    /// Why the card may not be written, if it may not: the write-protect switch (when
    /// [`Config::write_protect_switch`]) or the CSD's write-protect bits.
    fn write_protection(&mut self) -> Option<WriteProtect> {
        let present = self.regs.read32(PRESENT_STATE);
        let believed = self.config.variant.write_protect_line();
        if self.config.write_protect_switch && believed && present & PS_WRITE_ENABLED == 0 {
            return Some(WriteProtect::Switch { present });
        }
        sd::csd_write_protection(&self.info)
    }

    fn timeout(&mut self, wait: Wait, waited_us: u64) -> Cause {
        Sdhci::timeout(self, wait, waited_us)
    }
}

sd::queue::queued_block_device!(Sdhci, S: Slot, D: DmaMemory);
