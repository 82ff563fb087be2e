//! SD host controller (SDHCI) driver: reads SD cards through the Raspberry Pi's Arasan "EMMC"
//! controller (Pi 3 / Zero 2 W at `0x3F30_0000`, Pi 4 legacy `0xFE30_0000`, where QEMU's raspi3b
//! and raspi4b attach `-drive if=sd`) and other SDHCI v2/v3 controllers such as the Pi 4's EMMC2.
//! Reads, and block writes when asked ([`WriteBlocks`]); polled, programmed I/O.
//!
//! # Design
//!
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
//! - **Polled, no DMA.** Status is read from INT_STATUS (NORM_INT_STAT | ERR_INT_STAT << 16) with
//!   the wanted bits enabled in INT_STATUS_ENABLE and all signal enables off; data is read from the
//!   0x20 data port in 32-bit words when BUFFER_READ_READY is set (written to it when
//!   BUFFER_WRITE_READY is). DMA is not used: the data goes
//!   through the CPU anyway (it lands in the page cache and is parsed), DMA would need cache
//!   maintenance around every transfer (clean/invalidate by VA, bus addresses that differ from
//!   ARM physical addresses on the Pi), and the legacy controller's SDMA stops at buffer
//!   boundaries and has board-specific quirks. A later change may add ADMA2 for EMMC2.
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
//!    capabilities' base clock field (the BCM2835 reports none: the kernel asks the firmware).
//! 2. SRST_ALL, wait for it to clear. Status enables on (command complete, transfer complete, buffer
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
//! High speed (50 MHz), UHS-I and 1.8 V signalling, SDUC (CSD v3), 8-bit eMMC, card interrupts,
//! erase before write (ACMD23), the card's write-protect groups. Board setup belongs to the caller:
//! on a Pi 3 / Zero 2 W the card slot must be routed to this controller (GPIO 48-53 to ALT3; the
//! firmware routes it to SDHOST) and on a Pi the card power and the base clock come from the
//! firmware mailbox.
//!
//! # Barriers
//!
//! [`Sdhci::init`], [`BlockDevice::read_blocks`] and [`WriteBlocks::write_blocks`] call
//! [`Regs::barrier`] before their first register access and after their last (the BCM2835
//! peripherals guide, section 1.3; see [`crate::mmio`]).

mod card;
mod error;
pub mod regs;

pub use card::{
    clock_divider, parse_cid, parse_csd, r2_register, tran_speed_hz, CardInfo, Cid, Csd, Divider,
};
pub use error::{state_name, Cause, Cmd, SdError, Step, Wait, WriteProtect};

use core::fmt;

use crate::block::{check_request, BlockDevice, WriteBlocks, BLOCK_SIZE};
pub use crate::mmio::{Mmio, Regs};
use regs::*;

/// A microsecond time source: every wait of the driver is measured with it.
pub trait Clock {
    /// Microseconds since some fixed point; never goes back.
    fn now_us(&mut self) -> u64;
    /// Wait at least `us` microseconds.
    fn delay_us(&mut self, us: u32);
}

impl<T: Clock + ?Sized> Clock for &mut T {
    fn now_us(&mut self) -> u64 {
        (**self).now_us()
    }

    fn delay_us(&mut self, us: u32) {
        (**self).delay_us(us)
    }
}

/// Size of an SDHCI register block: the `size` to give [`Mmio::new`] for a controller.
pub const REGISTER_BLOCK_SIZE: usize = 0x100;

/// Is a card inserted, by the present state's card-inserted bit? Works in QEMU and on EMMC2; the
/// BCM2835's legacy controller may not report it (Linux marks its card detection broken), so a
/// caller there should rather try [`Sdhci::init`].
pub fn card_present<R: Regs>(regs: &mut R) -> bool {
    regs.read32(PRESENT_STATE) & PS_CARD_INSERTED != 0
}

/// Deadline for a software reset bit to clear.
pub const RESET_TIMEOUT_US: u64 = 100_000;
/// Deadline for the internal clock to become stable.
pub const CLOCK_TIMEOUT_US: u64 = 100_000;
/// Deadline for the command lines to be free and for command complete (the controller itself
/// reports a missing response after 64 SD clocks; this catches a controller that does not).
pub const CMD_TIMEOUT_US: u64 = 100_000;
/// Deadline for the end of an R1b busy signal (CMD7, CMD12).
pub const BUSY_TIMEOUT_US: u64 = 500_000;
/// Deadline for each block of a read and for transfer complete (the spec's read access time is
/// at most 100 ms).
pub const BLOCK_TIMEOUT_US: u64 = 250_000;
/// Deadline for buffer write ready and for transfer complete of a write, which includes the card's
/// busy signal while it programs (the spec's write timeout is 250 ms for SDHC and 500 ms for SDXC).
pub const WRITE_TIMEOUT_US: u64 = 750_000;
/// Deadline for the card to leave the programming state after a write (CMD13 polls).
pub const PROGRAM_TIMEOUT_US: u64 = 1_000_000;
/// Pause between CMD13 polls while the card programs.
pub const PROGRAM_POLL_US: u32 = 100;
/// Deadline for ACMD41 to report the card powered up: the SD spec gives a card up to 1 s of busy
/// from the first ACMD41; twice that leaves room for slow cards and a slow first poll.
pub const ACMD41_TIMEOUT_US: u64 = 2_000_000;
/// Pause between ACMD41 polls.
pub const ACMD41_POLL_US: u32 = 10_000;
/// Pause after power and the identification clock are on, before CMD0 (>= 74 SD clocks).
pub const POWER_UP_US: u32 = 1_000;
/// Pause after the SD clock is (re)enabled.
pub const CLOCK_SETTLE_US: u32 = 1_000;
/// Default limit of blocks per read command (512 KiB): big enough that command overhead does not
/// matter, small enough that a retry re-reads little.
pub const DEFAULT_MAX_BLOCKS_PER_COMMAND: u16 = 1024;
/// The identification clock's upper limit.
pub const ID_CLOCK_MAX_HZ: u32 = 400_000;
/// The default-speed data clock's upper limit.
pub const DATA_CLOCK_MAX_HZ: u32 = 25_000_000;

/// R1 card status bits that mean the command failed (out of range, address, block length, write
/// protect violation, card ECC failed, card controller error, general error). ILLEGAL_COMMAND and
/// COM_CRC_ERROR are left out: they report on the previous command.
pub(crate) const R1_ERRORS: u32 =
    (1 << 31) | (1 << 30) | (1 << 29) | (1 << 26) | (1 << 21) | (1 << 20) | (1 << 19);
const R1_APP_CMD: u32 = 1 << 5;
const R1_STATE_SHIFT: u32 = 9;
/// R1 READY_FOR_DATA: the card's buffer is empty.
const R1_READY_FOR_DATA: u32 = 1 << 8;
/// R1 WP_VIOLATION: a write to a protected block or card.
const R1_WP_VIOLATION: u32 = 1 << 26;
/// R1 CURRENT_STATE "tran": selected and idle.
const STATE_TRAN: u32 = 4;
/// R1 CURRENT_STATE "data": the card is sending blocks.
const STATE_DATA: u32 = 5;
/// R1 CURRENT_STATE "rcv": the card is receiving blocks.
const STATE_RCV: u32 = 6;
/// CSD bit PERM_WRITE_PROTECT.
const CSD_PERM_WRITE_PROTECT: u32 = 13;
/// CSD bit TMP_WRITE_PROTECT.
const CSD_TMP_WRITE_PROTECT: u32 = 12;

/// OCR / ACMD41: card powered up (busy bit, 1 = ready).
const OCR_POWERED_UP: u32 = 1 << 31;
/// OCR CCS (card capacity status) / ACMD41 argument HCS (host capacity support).
const OCR_CCS: u32 = 1 << 30;
/// VDD window 2.7-3.6 V.
const OCR_VDD_27_36: u32 = 0x00FF_8000;
/// CMD8 argument: VHS 2.7-3.6 V, check pattern 0xAA.
const CMD8_ARG: u32 = 0x1AA;
/// ACMD6 argument for a 4-bit bus.
const BUS_WIDTH_4: u32 = 2;

/// Response kinds, as the controller must be told them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resp {
    None,
    /// Card status (48 bits, CRC and index checked).
    R1,
    /// R1 then busy on DAT0.
    R1b,
    /// CID/CSD (136 bits, CRC checked).
    R2,
    /// OCR (48 bits, no CRC, no index).
    R3,
    /// Published RCA (48 bits, CRC and index checked).
    R6,
    /// Interface condition (48 bits, CRC and index checked).
    R7,
}

/// A command this driver sends.
#[derive(Debug, Clone, Copy)]
struct Command {
    cmd: Cmd,
    resp: Resp,
    /// Moves data blocks (the direction is in the transfer mode).
    data: bool,
    /// Command type "abort" (CMD12).
    abort: bool,
}

impl Command {
    const fn new(cmd: Cmd, resp: Resp) -> Command {
        Command {
            cmd,
            resp,
            data: false,
            abort: false,
        }
    }

    /// The command half of the CMD_TRANSFER word.
    fn word(&self) -> u32 {
        let resp = match self.resp {
            Resp::None => CMD_RESP_NONE,
            Resp::R2 => CMD_RESP_136 | CMD_CRC_CHECK,
            Resp::R3 => CMD_RESP_48,
            Resp::R1 | Resp::R6 | Resp::R7 => CMD_RESP_48 | CMD_CRC_CHECK | CMD_INDEX_CHECK,
            Resp::R1b => CMD_RESP_48_BUSY | CMD_CRC_CHECK | CMD_INDEX_CHECK,
        };
        let mut w = ((self.cmd.index as u32 & 0x3F) << CMD_INDEX_SHIFT) | resp;
        if self.data {
            w |= CMD_DATA_PRESENT;
        }
        if self.abort {
            w |= CMD_TYPE_ABORT;
        }
        w
    }
}

const GO_IDLE_STATE: Command = Command::new(Cmd::new(0), Resp::None);
const ALL_SEND_CID: Command = Command::new(Cmd::new(2), Resp::R2);
const SEND_RELATIVE_ADDR: Command = Command::new(Cmd::new(3), Resp::R6);
const SELECT_CARD: Command = Command::new(Cmd::new(7), Resp::R1b);
const SEND_IF_COND: Command = Command::new(Cmd::new(8), Resp::R7);
const SEND_CSD: Command = Command::new(Cmd::new(9), Resp::R2);
const STOP_TRANSMISSION: Command = Command {
    abort: true,
    ..Command::new(Cmd::new(12), Resp::R1b)
};
const SEND_STATUS: Command = Command::new(Cmd::new(13), Resp::R1);
const SET_BLOCKLEN: Command = Command::new(Cmd::new(16), Resp::R1);
const READ_SINGLE_BLOCK: Command = Command {
    data: true,
    ..Command::new(Cmd::new(17), Resp::R1)
};
const READ_MULTIPLE_BLOCK: Command = Command {
    data: true,
    ..Command::new(Cmd::new(18), Resp::R1)
};
const WRITE_BLOCK: Command = Command {
    data: true,
    ..Command::new(Cmd::new(24), Resp::R1)
};
const WRITE_MULTIPLE_BLOCK: Command = Command {
    data: true,
    ..Command::new(Cmd::new(25), Resp::R1)
};
const APP_CMD: Command = Command::new(Cmd::new(55), Resp::R1);
const SET_BUS_WIDTH: Command = Command::new(Cmd::acmd(6), Resp::R1);
const SD_SEND_OP_COND: Command = Command::new(Cmd::acmd(41), Resp::R3);

/// Every command the driver can send. None writes, erases, locks or programs the card.
pub const READ_ONLY_COMMANDS: [Cmd; 14] = [
    GO_IDLE_STATE.cmd,
    ALL_SEND_CID.cmd,
    SEND_RELATIVE_ADDR.cmd,
    SELECT_CARD.cmd,
    SEND_IF_COND.cmd,
    SEND_CSD.cmd,
    STOP_TRANSMISSION.cmd,
    SEND_STATUS.cmd,
    SET_BLOCKLEN.cmd,
    READ_SINGLE_BLOCK.cmd,
    READ_MULTIPLE_BLOCK.cmd,
    APP_CMD.cmd,
    SET_BUS_WIDTH.cmd,
    SD_SEND_OP_COND.cmd,
];

/// Is `cmd` one of the [`READ_ONLY_COMMANDS`]?
pub fn is_read_only(cmd: Cmd) -> bool {
    READ_ONLY_COMMANDS.contains(&cmd)
}

/// The commands that write: single and multiple block writes. Sent only by
/// [`WriteBlocks::write_blocks`].
pub const WRITE_COMMANDS: [Cmd; 2] = [WRITE_BLOCK.cmd, WRITE_MULTIPLE_BLOCK.cmd];

/// Every command the driver can send: [`READ_ONLY_COMMANDS`] and [`WRITE_COMMANDS`]. No erase,
/// lock, CSD program or write-protect command.
pub const COMMANDS: [Cmd; 16] = {
    let mut all = [READ_ONLY_COMMANDS[0]; 16];
    let mut i = 0;
    while i < 14 {
        all[i] = READ_ONLY_COMMANDS[i];
        i += 1;
    }
    all[14] = WRITE_COMMANDS[0];
    all[15] = WRITE_COMMANDS[1];
    all
};

/// Is `cmd` one the driver may send ([`COMMANDS`])?
pub fn is_allowed(cmd: Cmd) -> bool {
    COMMANDS.contains(&cmd)
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
    /// SRST_CMD resets.
    pub cmd_line_resets: u64,
    /// SRST_DAT resets.
    pub dat_line_resets: u64,
}

/// A data transfer that goes with a command.
#[derive(Debug, Clone, Copy)]
struct Xfer {
    blocks: u16,
    /// Transfer mode bits.
    mode: u32,
}

/// A failed read or write attempt: which command, at which block.
#[derive(Debug, Clone, Copy)]
struct Failure {
    cmd: Cmd,
    lba: u64,
    cause: Cause,
}

/// What a read and a write of data blocks differ in.
#[derive(Debug, Clone, Copy)]
struct Direction {
    /// Host to card.
    write: bool,
    /// The one-block command (CMD17 / CMD24).
    single: Command,
    /// The multi-block command (CMD18 / CMD25).
    multi: Command,
    /// Transfer mode direction bits: `TM_READ`, or 0 for a write.
    mode: u32,
    /// The buffer ready status bit awaited before each block.
    ready: u32,
    /// Deadline for each block and for transfer complete.
    timeout_us: u64,
    /// What the wait before block `n` (0-based) of the request is, for its timeout.
    wait: fn(u32) -> Wait,
}

const READ: Direction = Direction {
    write: false,
    single: READ_SINGLE_BLOCK,
    multi: READ_MULTIPLE_BLOCK,
    mode: TM_READ,
    ready: INT_BUFFER_READ_READY,
    timeout_us: BLOCK_TIMEOUT_US,
    wait: Wait::BufferReady,
};

const WRITE: Direction = Direction {
    write: true,
    single: WRITE_BLOCK,
    multi: WRITE_MULTIPLE_BLOCK,
    // No TM_READ: the data goes from the host to the card.
    mode: 0,
    ready: INT_BUFFER_WRITE_READY,
    timeout_us: WRITE_TIMEOUT_US,
    wait: Wait::BufferWriteReady,
};

/// The SD card behind an SDHCI controller, as a [`BlockDevice`].
pub struct Sdhci<R: Regs, C: Clock> {
    regs: R,
    clock: C,
    config: Config,
    info: CardInfo,
    /// SD clock now running (0 = off), for the Arasan write delay.
    sd_clock_hz: u32,
    stats: Stats,
}

impl<R: Regs, C: Clock> fmt::Debug for Sdhci<R, C> {
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

    /// [`Sdhci::init`] with explicit settings.
    pub fn with_config(regs: R, clock: C, config: Config) -> Result<Self, SdError> {
        let mut sd = Sdhci {
            regs,
            clock,
            config,
            info: CardInfo::default(),
            sd_clock_hz: 0,
            stats: Stats::default(),
        };
        sd.reinit()?;
        Ok(sd)
    }

    /// Reset the controller and identify the card again.
    pub fn reinit(&mut self) -> Result<(), SdError> {
        self.fenced(|sd| sd.bring_up())
            .map_err(|(step, cause)| SdError::Init { step, cause })
    }

    /// Run `f` between two [`Regs::barrier`]s: one before its first register access, one after
    /// its last (see the module docs).
    fn fenced<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        self.regs.barrier();
        let r = f(self);
        self.regs.barrier();
        r
    }

    /// The card and controller as found by the last initialisation.
    pub fn info(&self) -> &CardInfo {
        &self.info
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

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
                return Err(Cause::Error { err_status: err });
            }
            polls += 1;
            let waited = self.clock.now_us().saturating_sub(start);
            if waited >= timeout_us || polls >= max_polls {
                return Err(self.timeout(wait, waited));
            }
        }
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
        Ok(())
    }

    /// Reset the lines after a failed command: CMD always, DAT when the command used it.
    fn reset_lines(&mut self, cause: Cause, dat: bool) {
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

    // ---- commands ----

    /// Issue one command (with its data transfer set up, if any) and wait for its response and,
    /// for R1b, the end of busy. Returns the response words. On failure the lines are reset.
    fn issue(&mut self, c: Command, arg: u32, xfer: Option<Xfer>) -> Result<[u32; 4], Cause> {
        debug_assert!(is_allowed(c.cmd), "{} is not in the command set", c.cmd);
        if !is_allowed(c.cmd) {
            return Err(Cause::Forbidden);
        }
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
            self.reset_lines(cause, true);
            return Err(cause);
        }
        self.write(INT_STATUS, u32::MAX);
        let mut word = c.word();
        if let Some(x) = xfer {
            self.write(
                BLOCK_SIZE_COUNT,
                BLOCK_SIZE as u32 | (x.blocks as u32) << 16,
            );
            word |= x.mode & 0xFFFF;
        }
        self.write(ARGUMENT, arg);
        self.stats.commands += 1;
        self.write(CMD_TRANSFER, word);
        if let Err(cause) = self.wait_int(INT_CMD_COMPLETE, CMD_TIMEOUT_US, Wait::CommandComplete) {
            self.reset_lines(cause, uses_dat);
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
                    self.reset_lines(cause, true);
                    return Err(cause);
                }
            }
        }
        Ok(resp)
    }

    /// CMD55 (with the card's RCA) then the application command.
    fn app(&mut self, c: Command, arg: u32) -> Result<[u32; 4], (Step, Cause)> {
        let rca = (self.info.rca as u32) << 16;
        let r = self.cmd(APP_CMD, rca)?;
        if r[0] & R1_APP_CMD == 0 {
            return Err((Step::Command(APP_CMD.cmd), Cause::NotAppCmd { r1: r[0] }));
        }
        self.cmd(c, arg)
    }

    /// A command of the init sequence, its failure named by the command.
    fn cmd(&mut self, c: Command, arg: u32) -> Result<[u32; 4], (Step, Cause)> {
        self.issue(c, arg, None)
            .map_err(|cause| (Step::Command(c.cmd), cause))
    }

    /// A command answered with R1, checked for error bits.
    fn cmd_r1(&mut self, c: Command, arg: u32) -> Result<u32, (Step, Cause)> {
        let r1 = if c.cmd.app {
            self.app(c, arg)?
        } else {
            self.cmd(c, arg)?
        }[0];
        if r1 & R1_ERRORS != 0 {
            return Err((Step::Command(c.cmd), Cause::CardStatus { r1 }));
        }
        Ok(r1)
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
        let base_hz = if self.config.base_clock_hz != 0 {
            self.config.base_clock_hz
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
        let id = clock_divider(base_hz, target, version).ok_or((
            Step::Clock,
            Cause::Divider {
                base_hz,
                target_hz: target,
                host_version: version,
            },
        ))?;
        self.info = CardInfo {
            host_version: version,
            base_clock_hz: base_hz,
            bus_width: 1,
            ..CardInfo::default()
        };

        self.reset(SRST_ALL).map_err(|c| (Step::Reset, c))?;
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

    /// CMD55 + ACMD41 every [`ACMD41_POLL_US`] until the card reports itself powered up (OCR bit
    /// 31), at most [`ACMD41_TIMEOUT_US`]; returns the OCR. `sd_v2`: the card answered CMD8 (so
    /// HCS is offered, and a card is known to be there). No response to the first CMD55 from a card
    /// that did not answer CMD8 either means no card: [`Cause::NoCard`].
    fn power_up(&mut self, sd_v2: bool) -> Result<u32, (Step, Cause)> {
        let arg = OCR_VDD_27_36 | if sd_v2 { OCR_CCS } else { 0 };
        let start = self.clock.now_us();
        let max_polls = ACMD41_TIMEOUT_US / ACMD41_POLL_US as u64 + 2;
        let mut ocr = 0;
        for poll in 0..max_polls {
            ocr = match self.app(SD_SEND_OP_COND, arg) {
                Ok(r) => r[0],
                Err((step, cause)) if poll == 0 && !sd_v2 && cause.is_timeout() => {
                    return Err((step, Cause::NoCard))
                }
                Err(e) => return Err(e),
            };
            if ocr & OCR_POWERED_UP != 0 {
                return Ok(ocr);
            }
            if self.clock.now_us().saturating_sub(start) >= ACMD41_TIMEOUT_US {
                break;
            }
            self.clock.delay_us(ACMD41_POLL_US);
        }
        let waited_us = self.clock.now_us().saturating_sub(start);
        Err((
            Step::Command(SD_SEND_OP_COND.cmd),
            Cause::NotReady { ocr, waited_us },
        ))
    }

    /// The identification sequence up to the transfer state and the data clock.
    fn identify(&mut self) -> Result<(), (Step, Cause)> {
        self.cmd(GO_IDLE_STATE, 0)?;

        // CMD8: a v2 card echoes the pattern; a v1 card (or no card) does not answer.
        let sd_v2 = match self.issue(SEND_IF_COND, CMD8_ARG, None) {
            Ok(r) => {
                if r[0] & 0xFFF != CMD8_ARG {
                    return Err((Step::Command(SEND_IF_COND.cmd), Cause::BadEcho { r7: r[0] }));
                }
                true
            }
            Err(c) if c.is_timeout() => false,
            Err(c) => return Err((Step::Command(SEND_IF_COND.cmd), c)),
        };

        let ocr = self.power_up(sd_v2)?;
        let high_capacity = sd_v2 && ocr & OCR_CCS != 0;

        let cid = self.cmd(ALL_SEND_CID, 0)?;
        let mut rca = 0u16;
        for _ in 0..3 {
            rca = (self.cmd(SEND_RELATIVE_ADDR, 0)?[0] >> 16) as u16;
            if rca != 0 {
                break;
            }
        }
        if rca == 0 {
            return Err((Step::Command(SEND_RELATIVE_ADDR.cmd), Cause::ZeroRca));
        }
        let rca_arg = (rca as u32) << 16;
        let csd_raw = self.cmd(SEND_CSD, rca_arg)?;
        let csd = parse_csd(&csd_raw).map_err(|c| (Step::Command(SEND_CSD.cmd), c))?;
        self.info.sd_v2 = sd_v2;
        self.info.high_capacity = high_capacity;
        self.info.ocr = ocr;
        self.info.rca = rca;
        self.info.cid = cid;
        self.info.csd = csd_raw;

        self.cmd_r1(SELECT_CARD, rca_arg)?;
        if self.config.four_bit {
            self.cmd_r1(SET_BUS_WIDTH, BUS_WIDTH_4)?;
            let hc = self.regs.read32(HOST_CONTROL) & 0xFFFF;
            self.write(HOST_CONTROL, hc | HC_DATA_4BIT);
            self.info.bus_width = 4;
        }
        if !high_capacity {
            self.cmd_r1(SET_BLOCKLEN, BLOCK_SIZE as u32)?;
        }

        let mut target = match self.config.data_clock_hz {
            0 => DATA_CLOCK_MAX_HZ,
            hz => hz.min(DATA_CLOCK_MAX_HZ),
        };
        if let Some(max) = csd.max_clock_hz {
            target = target.min(max);
        }
        let (base_hz, version) = (self.info.base_clock_hz, self.info.host_version);
        let d = clock_divider(base_hz, target, version).ok_or((
            Step::Clock,
            Cause::Divider {
                base_hz,
                target_hz: target,
                host_version: version,
            },
        ))?;
        self.set_clock(d).map_err(|c| (Step::Clock, c))?;
        self.info.data_clock_hz = d.hz;
        // Set last: a failed bring-up leaves a card of no blocks, so reads fail their range check.
        self.info.blocks = csd.blocks;
        Ok(())
    }

    // ---- reads, and the transfer and retry steps writes share ----

    /// The argument of CMD17/18 for `lba`: the block number on SDHC/SDXC, the byte address on SDSC.
    fn card_address(&self, lba: u64) -> Result<u32, Cause> {
        let addr = if self.info.high_capacity {
            Some(lba)
        } else {
            lba.checked_mul(BLOCK_SIZE as u64)
        };
        addr.and_then(|a| u32::try_from(a).ok())
            .ok_or(Cause::AddressTooLarge { lba })
    }

    /// Issue data command `c` for `blocks` blocks at `start` (direction bits `dir`: `TM_READ` or
    /// 0), multi-block with a block count (and auto CMD12 if configured) when `blocks > 1`, and
    /// check the card's R1 status: the start that reads and writes share.
    fn begin_transfer(
        &mut self,
        c: Command,
        start: u64,
        blocks: u32,
        dir: u32,
    ) -> Result<(), Failure> {
        let fail = |lba: u64, cause: Cause| Failure {
            cmd: c.cmd,
            lba,
            cause,
        };
        let arg = self.card_address(start).map_err(|e| fail(start, e))?;
        let mut mode = dir;
        if blocks > 1 {
            mode |= TM_MULTI_BLOCK | TM_BLOCK_COUNT_EN;
            if self.config.auto_cmd12 {
                mode |= TM_AUTO_CMD12;
            }
        }
        let xfer = Xfer {
            blocks: blocks.min(u16::MAX as u32) as u16,
            mode,
        };
        let r1 = self.issue(c, arg, Some(xfer)).map_err(|e| fail(start, e))?[0];
        if r1 & R1_ERRORS != 0 {
            return Err(fail(start, Cause::CardStatus { r1 }));
        }
        Ok(())
    }

    /// The data phase that reads and writes share: issue `d`'s command for the `blocks` blocks at
    /// `start` ([`Sdhci::begin_transfer`]), wait for the buffer before each block and let `port`
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
        let c = if blocks > 1 { d.multi } else { d.single };
        let fail = |lba: u64, cause: Cause| Failure {
            cmd: c.cmd,
            lba,
            cause,
        };
        self.begin_transfer(c, start, blocks, d.mode)?;
        for i in 0..blocks {
            let lba = start + i as u64;
            self.wait_int(d.ready, d.timeout_us, (d.wait)(i))
                .map_err(|e| fail(lba, e))?;
            self.write(INT_STATUS, d.ready);
            port(self, i as usize);
        }
        let last = start + blocks as u64 - 1;
        self.wait_int(INT_TRANSFER_COMPLETE, d.timeout_us, Wait::TransferComplete)
            .map_err(|e| fail(last, e))?;
        self.write(INT_STATUS, INT_TRANSFER_COMPLETE);
        Ok(last)
    }

    /// CMD12 from the driver after the multi-block transfer that ended at `last`; returns its R1
    /// (not checked here).
    fn stop(&mut self, last: u64) -> Result<u32, Failure> {
        let r = self
            .issue(STOP_TRANSMISSION, 0, None)
            .map_err(|cause| Failure {
                cmd: STOP_TRANSMISSION.cmd,
                lba: last,
                cause,
            })?;
        Ok(r[0])
    }

    /// One read command for `buf.len() / 512` (1..=65535) blocks from `start`.
    fn read_once(&mut self, start: u64, buf: &mut [u8]) -> Result<(), Failure> {
        let blocks = (buf.len() / BLOCK_SIZE) as u32;
        let last = self.transfer(&READ, start, blocks, |sd, i| {
            let block = &mut buf[i * BLOCK_SIZE..(i + 1) * BLOCK_SIZE];
            for w in block.chunks_exact_mut(4) {
                w.copy_from_slice(&sd.regs.read32(DATA_PORT).to_le_bytes());
            }
        })?;
        if blocks > 1 && !self.config.auto_cmd12 {
            self.stop(last)?;
        }
        self.stats.blocks_read += blocks as u64;
        Ok(())
    }

    /// After a failed read or write: reset both lines, clear the status, and if the card may
    /// still be sending or receiving (CMD13 says state "data" or "rcv", or does not answer), stop it
    /// with CMD12. After a write, wait (bounded) for the card to finish programming what it got.
    /// Failures here are left to the next try (and the re-initialisation before the last).
    /// Returns false when a write left the card still programming: the next try must start with
    /// re-initialising it (a write command would be illegal in that state).
    fn recover(&mut self, write: bool) -> bool {
        let _ = self.reset(SRST_CMD);
        let _ = self.reset(SRST_DAT);
        self.write(INT_STATUS, u32::MAX);
        let rca = (self.info.rca as u32) << 16;
        let busy = match self.issue(SEND_STATUS, rca, None) {
            Ok(r) => matches!((r[0] >> R1_STATE_SHIFT) & 0xF, STATE_DATA | STATE_RCV),
            Err(_) => true,
        };
        if busy {
            let _ = self.issue(STOP_TRANSMISSION, 0, None);
        }
        !write || self.wait_programmed().is_ok()
    }

    /// One read or write command (`once`, for the `blocks` blocks from `start`) with its retries:
    /// [`Sdhci::recover`] after each failure, the card initialised again before the last try (and
    /// before any try that a write left the card programming for). A write protect violation is
    /// not retried.
    fn with_retries(
        &mut self,
        d: &Direction,
        start: u64,
        blocks: u32,
        mut once: impl FnMut(&mut Self) -> Result<(), Failure>,
    ) -> Result<(), SdError> {
        let tries = self.config.tries.max(1);
        let mut attempt = 1u8;
        // The first failure is reported: later ones may only be its consequences.
        let mut first: Option<Failure> = None;
        loop {
            let f = match once(self) {
                Ok(()) => return Ok(()),
                Err(f) => *first.get_or_insert(f),
            };
            // Always true after a read.
            let settled = self.recover(d.write);
            if let Cause::CardStatus { r1 } = f.cause {
                if d.write && r1 & R1_WP_VIOLATION != 0 {
                    return Err(SdError::WriteProtected {
                        start,
                        blocks,
                        by: WriteProtect::Violation { r1 },
                    });
                }
            }
            if attempt >= tries {
                return Err(if d.write {
                    SdError::Write {
                        cmd: f.cmd,
                        lba: f.lba,
                        start,
                        blocks,
                        attempts: attempt,
                        cause: f.cause,
                    }
                } else {
                    SdError::Read {
                        cmd: f.cmd,
                        lba: f.lba,
                        start,
                        blocks,
                        attempts: attempt,
                        cause: f.cause,
                    }
                });
            }
            attempt += 1;
            self.stats.retries += 1;
            if attempt == tries || !settled {
                self.stats.reinits += 1;
                if let Err((step, cause)) = self.bring_up() {
                    return Err(if d.write {
                        SdError::WriteReinit {
                            start,
                            blocks,
                            write_cmd: f.cmd,
                            write_lba: f.lba,
                            write_cause: f.cause,
                            step,
                            cause,
                        }
                    } else {
                        SdError::Reinit {
                            start,
                            blocks,
                            read_cmd: f.cmd,
                            read_lba: f.lba,
                            read_cause: f.cause,
                            step,
                            cause,
                        }
                    });
                }
            }
        }
    }
}

impl<R: Regs, C: Clock> Sdhci<R, C> {
    // ---- writes ----

    /// Why the card may not be written, if it may not: the write-protect switch (when
    /// [`Config::write_protect_switch`]) or the CSD's write-protect bits.
    fn write_protection(&mut self) -> Option<WriteProtect> {
        let present = self.regs.read32(PRESENT_STATE);
        if self.config.write_protect_switch && present & PS_WRITE_ENABLED == 0 {
            return Some(WriteProtect::Switch { present });
        }
        let csd = r2_register(&self.info.csd);
        if csd >> CSD_PERM_WRITE_PROTECT & 1 != 0 {
            return Some(WriteProtect::CsdPermanent);
        }
        if csd >> CSD_TMP_WRITE_PROTECT & 1 != 0 {
            return Some(WriteProtect::CsdTemporary);
        }
        None
    }

    /// Poll CMD13 until the card is in the transfer state and ready for data (it has finished
    /// programming), at most [`PROGRAM_TIMEOUT_US`]. A card status error bit (a write protect
    /// violation, an ECC or controller error reported after the data) is an error.
    fn wait_programmed(&mut self) -> Result<(), (Cmd, Cause)> {
        let rca = (self.info.rca as u32) << 16;
        let start = self.clock.now_us();
        let max_polls = PROGRAM_TIMEOUT_US / PROGRAM_POLL_US as u64 + 2;
        let mut state = 0u8;
        for _ in 0..max_polls {
            let r1 = self
                .issue(SEND_STATUS, rca, None)
                .map_err(|c| (SEND_STATUS.cmd, c))?[0];
            if r1 & R1_ERRORS != 0 {
                return Err((SEND_STATUS.cmd, Cause::CardStatus { r1 }));
            }
            state = ((r1 >> R1_STATE_SHIFT) & 0xF) as u8;
            if state as u32 == STATE_TRAN && r1 & R1_READY_FOR_DATA != 0 {
                return Ok(());
            }
            if self.clock.now_us().saturating_sub(start) >= PROGRAM_TIMEOUT_US {
                break;
            }
            self.clock.delay_us(PROGRAM_POLL_US);
        }
        let waited = self.clock.now_us().saturating_sub(start);
        Err((
            SEND_STATUS.cmd,
            self.timeout(Wait::Programmed { state }, waited),
        ))
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
                self.stop(last)?
            };
            if r1 & R1_ERRORS != 0 {
                return Err(Failure {
                    cmd: STOP_TRANSMISSION.cmd,
                    lba: last,
                    cause: Cause::CardStatus { r1 },
                });
            }
        }
        self.wait_programmed().map_err(|(cmd, cause)| Failure {
            cmd,
            lba: last,
            cause,
        })?;
        self.stats.blocks_written += blocks as u64;
        Ok(())
    }
}

impl<R: Regs, C: Clock> BlockDevice for Sdhci<R, C> {
    type Error = SdError;

    fn num_blocks(&self) -> u64 {
        self.info.blocks
    }

    /// Read whole blocks: checked against the capacity, split into commands of at most
    /// [`Config::max_blocks_per_command`] blocks, each tried up to [`Config::tries`] times.
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), SdError> {
        check_request(lba, buf.len(), self.info.blocks)?;
        let per = self.config.max_blocks_per_command.max(1) as usize;
        self.fenced(|sd| {
            for (i, chunk) in buf.chunks_mut(per * BLOCK_SIZE).enumerate() {
                let start = lba + (i * per) as u64;
                let blocks = (chunk.len() / BLOCK_SIZE) as u32;
                sd.with_retries(&READ, start, blocks, |sd| sd.read_once(start, chunk))?;
            }
            Ok(())
        })
    }
}

impl<R: Regs, C: Clock> WriteBlocks for Sdhci<R, C> {
    /// Write whole blocks: checked against the capacity and the card's write protection (nothing is
    /// sent to a protected card), split into commands of at most
    /// [`Config::max_blocks_per_command`] blocks, each tried up to [`Config::tries`] times and
    /// finished only when the card has programmed it (synchronous, see the module docs).
    fn write_blocks(&mut self, lba: u64, buf: &[u8]) -> Result<(), SdError> {
        check_request(lba, buf.len(), self.info.blocks)?;
        if buf.is_empty() {
            return Ok(());
        }
        let per = self.config.max_blocks_per_command.max(1) as usize;
        self.fenced(|sd| {
            if let Some(by) = sd.write_protection() {
                return Err(SdError::WriteProtected {
                    start: lba,
                    blocks: (buf.len() / BLOCK_SIZE) as u32,
                    by,
                });
            }
            for (i, chunk) in buf.chunks(per * BLOCK_SIZE).enumerate() {
                let start = lba + (i * per) as u64;
                let blocks = (chunk.len() / BLOCK_SIZE) as u32;
                sd.with_retries(&WRITE, start, blocks, |sd| sd.write_once(start, chunk))?;
            }
            Ok(())
        })
    }
}
