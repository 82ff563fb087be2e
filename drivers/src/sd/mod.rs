//! The SD card protocol, shared by the SD host controller drivers ([`crate::sdhci`],
//! [`crate::sunxi_mmc`]): the closed command set, the identification sequence (CMD0 to CMD7,
//! ACMD41 polling, ACMD6, CMD16), CID/CSD parsing and [`CardInfo`], the errors ([`SdError`] and
//! what it holds), and the request loop every driver runs the same way: range check, split into
//! commands, retries with recovery (CMD13, CMD12) and a full re-initialisation before the last
//! try, the CMD13 wait for the end of programming after a write.
//!
//! A driver supplies what differs between controllers through the crate-private `Host` trait:
//! how one command goes out (with its data transfer set up) and comes back, how a data transfer
//! moves its words, how the lines are reset after a failure, how the clock and bus width are set.
//! What is in this module never touches a register.

mod card;
mod error;
pub(crate) mod queue;
pub mod regs;
mod speed;

pub use card::{
    parse_cid, parse_csd, r2_from_full, r2_register, tran_speed_hz, CardInfo, Cid, Csd, HostKind,
};
pub use error::{state_name, Cause, Cmd, Failed, SdError, Step, Wait, WriteProtect};
pub use speed::{
    switch_check_arg, switch_set_arg, BusMode, SpeedNote, SwitchStatus, CCC_SWITCH,
    SWITCH_STATUS_BYTES,
};

use core::ops::Range;

use crate::block::{check_request, BLOCK_SIZE};

/// A microsecond time source: every wait of the drivers is measured with it.
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

// The deadlines both controllers use: one SD bus, one set of card timings.
/// Deadline for a controller's software reset bits to clear.
pub const RESET_TIMEOUT_US: u64 = 100_000;
/// Deadline for the SD clock to become stable (SDHCI) or to be taken by the controller (sunxi).
pub const CLOCK_TIMEOUT_US: u64 = 100_000;
/// Deadline for the controller to take a command and for command complete (the controller itself
/// reports a missing response after 64 SD clocks or its TIMEOUT register's response field; this
/// catches a controller that does not).
pub const CMD_TIMEOUT_US: u64 = 100_000;
/// Deadline for the end of an R1b busy signal (CMD7, CMD12).
pub const BUSY_TIMEOUT_US: u64 = 500_000;
/// Deadline for each block of a read and for the end of the transfer (the spec's read access time
/// is at most 100 ms).
pub const BLOCK_TIMEOUT_US: u64 = 250_000;
/// Deadline for buffer or FIFO room for each block of a write and for the end of the transfer,
/// which includes the card's busy signal while it programs (the spec's write timeout is 250 ms for
/// SDHC and 500 ms for SDXC).
pub const WRITE_TIMEOUT_US: u64 = 750_000;
/// Pause after power and the identification clock are on, before CMD0 (>= 74 SD clocks).
pub const POWER_UP_US: u32 = 1_000;
/// Deadline for the card to leave the programming state after a write (CMD13 polls).
pub const PROGRAM_TIMEOUT_US: u64 = 1_000_000;
/// Pause between CMD13 polls while the card programs.
pub const PROGRAM_POLL_US: u32 = 100;
/// Deadline for ACMD41 to report the card powered up: the SD spec gives a card up to 1 s of busy
/// from the first ACMD41; twice that leaves room for slow cards and a slow first poll.
pub const ACMD41_TIMEOUT_US: u64 = 2_000_000;
/// Pause between ACMD41 polls.
pub const ACMD41_POLL_US: u32 = 10_000;
/// The identification clock's upper limit.
pub const ID_CLOCK_MAX_HZ: u32 = 400_000;
/// The default-speed data clock's upper limit.
pub const DATA_CLOCK_MAX_HZ: u32 = 25_000_000;
/// The High Speed data clock's upper limit.
pub const HS_CLOCK_MAX_HZ: u32 = 50_000_000;

/// R1 card status bits that mean the command failed (out of range, address, block length, write
/// protect violation, card ECC failed, card controller error, general error). ILLEGAL_COMMAND and
/// COM_CRC_ERROR are left out: they report on the previous command.
pub(crate) const R1_ERRORS: u32 =
    (1 << 31) | (1 << 30) | (1 << 29) | (1 << 26) | (1 << 21) | (1 << 20) | (1 << 19);
/// R1 APP_CMD: the card takes the next command as an application command.
pub const R1_APP_CMD: u32 = 1 << 5;
/// R1 CURRENT_STATE, bits 12:9.
pub const R1_STATE_SHIFT: u32 = 9;
/// R1 READY_FOR_DATA: the card's buffer is empty.
pub const R1_READY_FOR_DATA: u32 = 1 << 8;
/// R1 WP_VIOLATION: a write to a protected block or card.
pub const R1_WP_VIOLATION: u32 = 1 << 26;
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
pub const OCR_POWERED_UP: u32 = 1 << 31;
/// OCR CCS (card capacity status) / ACMD41 argument HCS (host capacity support).
pub const OCR_CCS: u32 = 1 << 30;
/// ACMD41 argument S18R (the host asks for 1.8 V signalling) / OCR S18A (the card accepts).
pub const OCR_S18: u32 = 1 << 24;
/// ACMD41 argument XPC: the host supplies more than 150 mA (needed for SDR50 and faster).
pub const OCR_XPC: u32 = 1 << 28;
/// VDD window 2.7-3.6 V.
pub const OCR_VDD_27_36: u32 = 0x00FF_8000;
/// CMD8 argument: VHS 2.7-3.6 V, check pattern 0xAA.
const CMD8_ARG: u32 = 0x1AA;
/// ACMD6 argument for a 4-bit bus.
const BUS_WIDTH_4: u32 = 2;

/// Response kinds, as a controller must be told them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resp {
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

/// A command the drivers send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Command {
    pub cmd: Cmd,
    pub resp: Resp,
    /// Moves data blocks.
    pub data: bool,
    /// Command type "abort" (CMD12).
    pub abort: bool,
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

    /// Moves data blocks.
    const fn data(self) -> Command {
        Command { data: true, ..self }
    }
}

pub(crate) const GO_IDLE_STATE: Command = Command::new(Cmd::new(0), Resp::None);
const ALL_SEND_CID: Command = Command::new(Cmd::new(2), Resp::R2);
const SEND_RELATIVE_ADDR: Command = Command::new(Cmd::new(3), Resp::R6);
const SELECT_CARD: Command = Command::new(Cmd::new(7), Resp::R1b);
/// SWITCH_FUNC: check or switch a card function; a 64-byte status block comes back on DAT.
pub(crate) const SWITCH_FUNC: Command = Command::new(Cmd::new(6), Resp::R1).data();
/// VOLTAGE_SWITCH: the card switches its signalling to 1.8 V (after ACMD41 with S18A).
const VOLTAGE_SWITCH: Command = Command::new(Cmd::new(11), Resp::R1);
/// SEND_TUNING_BLOCK: a 64-byte known pattern on 4 lines, for the host to tune its sampling.
pub(crate) const SEND_TUNING_BLOCK: Command = Command::new(Cmd::new(19), Resp::R1).data();
const SEND_IF_COND: Command = Command::new(Cmd::new(8), Resp::R7);
const SEND_CSD: Command = Command::new(Cmd::new(9), Resp::R2);
pub(crate) const STOP_TRANSMISSION: Command = Command {
    abort: true,
    ..Command::new(Cmd::new(12), Resp::R1b)
};
const SEND_STATUS: Command = Command::new(Cmd::new(13), Resp::R1);
const SET_BLOCKLEN: Command = Command::new(Cmd::new(16), Resp::R1);
const READ_SINGLE_BLOCK: Command = Command::new(Cmd::new(17), Resp::R1).data();
const READ_MULTIPLE_BLOCK: Command = Command::new(Cmd::new(18), Resp::R1).data();
const WRITE_BLOCK: Command = Command::new(Cmd::new(24), Resp::R1).data();
const WRITE_MULTIPLE_BLOCK: Command = Command::new(Cmd::new(25), Resp::R1).data();
const APP_CMD: Command = Command::new(Cmd::new(55), Resp::R1);
const SET_BUS_WIDTH: Command = Command::new(Cmd::acmd(6), Resp::R1);
const SD_SEND_OP_COND: Command = Command::new(Cmd::acmd(41), Resp::R3);

/// Every command a driver sends unless asked to write. None writes, erases, locks or programs the
/// card (CMD6 changes only the bus timing, and only in switch mode).
pub const READ_ONLY_COMMANDS: [Cmd; 17] = [
    GO_IDLE_STATE.cmd,
    ALL_SEND_CID.cmd,
    SEND_RELATIVE_ADDR.cmd,
    SWITCH_FUNC.cmd,
    VOLTAGE_SWITCH.cmd,
    SEND_TUNING_BLOCK.cmd,
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
/// [`crate::block::WriteBlocks::write_blocks`].
pub const WRITE_COMMANDS: [Cmd; 2] = [WRITE_BLOCK.cmd, WRITE_MULTIPLE_BLOCK.cmd];

/// Every command a driver can send: [`READ_ONLY_COMMANDS`] and [`WRITE_COMMANDS`]. No erase,
/// lock, CSD program or write-protect command.
pub const COMMANDS: [Cmd; 19] = {
    const R: usize = READ_ONLY_COMMANDS.len();
    let mut all = [READ_ONLY_COMMANDS[0]; R + 2];
    let mut i = 0;
    while i < R {
        all[i] = READ_ONLY_COMMANDS[i];
        i += 1;
    }
    all[R] = WRITE_COMMANDS[0];
    all[R + 1] = WRITE_COMMANDS[1];
    all
};

/// Is `cmd` one a driver may send ([`COMMANDS`])?
pub fn is_allowed(cmd: Cmd) -> bool {
    COMMANDS.contains(&cmd)
}

/// A data transfer that goes with a command.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Xfer {
    /// Blocks of `block_len` bytes (1..=65535).
    pub blocks: u16,
    /// Bytes per block: 512 for the card's data, less for a register such as CMD6's status.
    pub block_len: u16,
    /// Host to card.
    pub write: bool,
    /// The host's DMA engine moves the data (else the CPU, through the data port or FIFO).
    pub dma: bool,
}

impl Xfer {
    /// One block of `len` bytes from the card through the data port or FIFO: a register such as
    /// CMD6's status or CMD19's tuning block.
    pub const fn register(len: usize) -> Xfer {
        Xfer {
            blocks: 1,
            block_len: len as u16,
            write: false,
            dma: false,
        }
    }
}

/// A failed read or write attempt: which command, at which block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Failure {
    pub cmd: Cmd,
    pub lba: u64,
    pub cause: Cause,
}

/// What a read and a write of data blocks differ in, for the shared request loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Direction {
    /// Host to card.
    pub write: bool,
    /// The one-block command (CMD17 / CMD24).
    pub single: Command,
    /// The multi-block command (CMD18 / CMD25).
    pub multi: Command,
}

impl Direction {
    /// The command for a transfer of `blocks` blocks.
    pub fn command(&self, blocks: u32) -> Command {
        if blocks > 1 {
            self.multi
        } else {
            self.single
        }
    }
}

pub(crate) const READ: Direction = Direction {
    write: false,
    single: READ_SINGLE_BLOCK,
    multi: READ_MULTIPLE_BLOCK,
};

pub(crate) const WRITE: Direction = Direction {
    write: true,
    single: WRITE_BLOCK,
    multi: WRITE_MULTIPLE_BLOCK,
};

/// Counters the shared request loop keeps in a driver's statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// A read or write command is tried again.
    Retry,
    /// The card is initialised again before a try.
    Reinit,
    /// The bus stepped down a speed mode after errors (and the card was initialised again).
    StepDown,
    /// A read or write command failed with a CRC (or framing) error ([`Cause::is_crc`]).
    Crc,
}

/// What a controller driver supplies to the shared protocol code.
pub(crate) trait Host {
    /// Issue one command (with its data transfer set up, if any) and wait for its response and,
    /// for R1b, the end of busy. Returns the response words (R2 in the layout of
    /// [`r2_register`]). On failure the controller is left ready for the next command. A command
    /// outside [`COMMANDS`] must be refused with [`Cause::Forbidden`] (see [`check_allowed`]).
    fn issue(&mut self, c: Command, arg: u32, xfer: Option<Xfer>) -> Result<[u32; 4], Cause>;
    /// Microseconds from the driver's clock.
    fn now_us(&mut self) -> u64;
    /// Wait `us` microseconds.
    fn delay_us(&mut self, us: u32);
    /// The card as known so far.
    fn info_mut(&mut self) -> &mut CardInfo;
    /// Switch the host side to a 4-bit data bus (the card has been told with ACMD6).
    fn set_four_bit(&mut self);
    /// After a failed read or write: put the controller's command and data paths back to idle.
    fn reset_lines(&mut self);
    /// Reset the controller and identify the card again.
    fn bring_up(&mut self) -> Result<(), (Step, Cause)>;
    /// Tries per read or write command (>= 1).
    fn tries(&self) -> u8;
    /// Count `e` in the driver's statistics.
    fn note(&mut self, e: Event);
    /// The controller's timeout cause: `waited_us` microseconds for `wait`, with the status
    /// registers read now.
    fn timeout(&mut self, wait: Wait, waited_us: u64) -> Cause;
    /// [`crate::mmio::Regs::barrier`] on the controller.
    fn barrier(&mut self);
    /// Why the card may not be written, if it may not (at least [`csd_write_protection`]).
    fn write_protection(&mut self) -> Option<WriteProtect> {
        csd_write_protection(self.info_mut())
    }
    /// Issue `c` with one data block of `buf.len()` bytes (a multiple of 4, at most 512) from the
    /// card, move it into `buf` through the data port and wait for the end of the transfer: for
    /// registers such as CMD6's status block. Returns the R1 (not checked here). On failure the
    /// controller is left ready for the next command (the card may still be sending: the caller
    /// recovers it).
    fn read_register(&mut self, c: Command, arg: u32, buf: &mut [u8]) -> Result<u32, Cause>;
    /// The clock the host would run `mode` at (the fastest at or below the mode's limit), or why
    /// it cannot run the mode (or no faster than the mode below it).
    fn mode_clock(&mut self, mode: BusMode) -> Result<u32, SpeedNote>;
    /// Put the host in `mode`'s timing at the clock of [`Host::mode_clock`]; returns the clock.
    fn enter_mode(&mut self, mode: BusMode) -> Result<u32, Cause>;
    /// Does `mode` need tuning on this host (SDR104 always; SDR50 if the host says so)?
    fn needs_tuning(&mut self, mode: BusMode) -> bool {
        mode.needs_tuning()
    }
    /// Tune the sampling point (CMD19 blocks until the host reports it tuned).
    fn tune(&mut self) -> Result<(), Cause> {
        Err(Cause::Unsupported { what: "tune" })
    }
    /// Can host and slot switch the signalling to 1.8 V (UHS-I), and may the driver try?
    fn can_signal_1v8(&mut self) -> bool {
        false
    }
    /// After the card answered CMD11: the host's side of the switch to 1.8 V.
    fn switch_to_1v8(&mut self) -> Result<(), Cause> {
        Err(Cause::Unsupported {
            what: "switch to 1.8 V",
        })
    }
    /// Power the card off and on again, back at 3.3 V signalling and the identification clock.
    fn power_cycle(&mut self) -> Result<(), Cause> {
        Err(Cause::Unsupported {
            what: "power-cycle the card",
        })
    }
    /// The speed the driver may use, kept across re-initialisations.
    fn speed_cap(&mut self) -> &mut SpeedCap;
}

/// How fast a driver may run the bus: the configured limit, lowered when a mode fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeedCap {
    /// The fastest mode to try at the next initialisation.
    pub limit: BusMode,
    /// Why `limit` is lower than the configured one, once a mode has failed.
    pub stepped: Option<SpeedNote>,
}

impl SpeedCap {
    pub const fn new(limit: BusMode) -> SpeedCap {
        SpeedCap {
            limit,
            stepped: None,
        }
    }
}

/// Poll `check` until it answers (`Some`), at most `timeout_us` by the driver's clock and, in
/// case the clock stands still, a number of polls (one takes far longer than 10 ns on any bus);
/// then the driver's timeout cause for `wait`.
pub(crate) fn poll<H: Host, T>(
    h: &mut H,
    timeout_us: u64,
    wait: Wait,
    mut check: impl FnMut(&mut H) -> Option<Result<T, Cause>>,
) -> Result<T, Cause> {
    let start = h.now_us();
    let max_polls = timeout_us.saturating_mul(100).max(10_000);
    for _ in 0..max_polls {
        if let Some(r) = check(h) {
            return r;
        }
        if h.now_us().saturating_sub(start) >= timeout_us {
            break;
        }
    }
    let waited = h.now_us().saturating_sub(start);
    Err(h.timeout(wait, waited))
}

/// The check every [`Host::issue`] starts with: only [`COMMANDS`] go out.
pub(crate) fn check_allowed(c: Command) -> Result<(), Cause> {
    debug_assert!(is_allowed(c.cmd), "{} is not in the command set", c.cmd);
    if is_allowed(c.cmd) {
        Ok(())
    } else {
        Err(Cause::Forbidden)
    }
}

/// A command of the init sequence, its failure named by the command.
fn cmd<H: Host>(h: &mut H, c: Command, arg: u32) -> Result<[u32; 4], (Step, Cause)> {
    h.issue(c, arg, None)
        .map_err(|cause| (Step::Command(c.cmd), cause))
}

/// CMD55 (with the card's RCA) then the application command.
fn app<H: Host>(h: &mut H, c: Command, arg: u32) -> Result<[u32; 4], (Step, Cause)> {
    let rca = (h.info_mut().rca as u32) << 16;
    let r = cmd(h, APP_CMD, rca)?;
    if r[0] & R1_APP_CMD == 0 {
        return Err((Step::Command(APP_CMD.cmd), Cause::NotAppCmd { r1: r[0] }));
    }
    cmd(h, c, arg)
}

/// A command answered with R1, checked for error bits.
fn cmd_r1<H: Host>(h: &mut H, c: Command, arg: u32) -> Result<u32, (Step, Cause)> {
    let r1 = if c.cmd.app {
        app(h, c, arg)?
    } else {
        cmd(h, c, arg)?
    }[0];
    if r1 & R1_ERRORS != 0 {
        return Err((Step::Command(c.cmd), Cause::CardStatus { r1 }));
    }
    Ok(r1)
}

/// CMD55 + ACMD41 every [`ACMD41_POLL_US`] until the card reports itself powered up (OCR bit
/// 31), at most [`ACMD41_TIMEOUT_US`]; returns the OCR. `sd_v2`: the card answered CMD8 (so
/// HCS is offered, and a card is known to be there). No response to the first CMD55 from a card
/// that did not answer CMD8 either means no card: [`Cause::NoCard`].
fn power_up<H: Host>(h: &mut H, sd_v2: bool, s18r: bool) -> Result<u32, (Step, Cause)> {
    let mut arg = OCR_VDD_27_36 | if sd_v2 { OCR_CCS } else { 0 };
    if s18r {
        arg |= OCR_S18 | OCR_XPC;
    }
    let start = h.now_us();
    let max_polls = ACMD41_TIMEOUT_US / ACMD41_POLL_US as u64 + 2;
    let mut ocr = 0;
    for poll in 0..max_polls {
        ocr = match app(h, SD_SEND_OP_COND, arg) {
            Ok(r) => r[0],
            Err((step, cause)) if poll == 0 && !sd_v2 && cause.is_timeout() => {
                return Err((step, Cause::NoCard))
            }
            Err(e) => return Err(e),
        };
        if ocr & OCR_POWERED_UP != 0 {
            return Ok(ocr);
        }
        if h.now_us().saturating_sub(start) >= ACMD41_TIMEOUT_US {
            break;
        }
        h.delay_us(ACMD41_POLL_US);
    }
    let waited_us = h.now_us().saturating_sub(start);
    Err((
        Step::Command(SD_SEND_OP_COND.cmd),
        Cause::NotReady { ocr, waited_us },
    ))
}

/// CMD8: a v2 card echoes the pattern; a v1 card (or no card) does not answer.
fn interface_condition<H: Host>(h: &mut H) -> Result<bool, (Step, Cause)> {
    match h.issue(SEND_IF_COND, CMD8_ARG, None) {
        Ok(r) if r[0] & 0xFFF != CMD8_ARG => {
            Err((Step::Command(SEND_IF_COND.cmd), Cause::BadEcho { r7: r[0] }))
        }
        Ok(_) => Ok(true),
        Err(c) if c.is_timeout() => Ok(false),
        Err(c) => Err((Step::Command(SEND_IF_COND.cmd), c)),
    }
}

/// CMD3 until the card publishes a non-zero relative address (three tries).
fn relative_address<H: Host>(h: &mut H) -> Result<u16, (Step, Cause)> {
    for _ in 0..3 {
        let rca = (cmd(h, SEND_RELATIVE_ADDR, 0)?[0] >> 16) as u16;
        if rca != 0 {
            return Ok(rca);
        }
    }
    Err((Step::Command(SEND_RELATIVE_ADDR.cmd), Cause::ZeroRca))
}

/// The bring-up every driver shares once its controller runs at the identification clock:
/// [`identify`], then `data_clock` sets the host's Default Speed clock for the card's CSD and
/// answers the rate it runs at, then [`raise_speed`]. `blocks` is set last: a failed bring-up
/// leaves a card of no blocks, so every request fails its range check.
pub(crate) fn bring_up_card<H: Host>(
    h: &mut H,
    four_bit: bool,
    data_clock: impl FnOnce(&mut H, &Csd) -> Result<u32, (Step, Cause)>,
) -> Result<(), (Step, Cause)> {
    let csd = identify(h, four_bit)?;
    let hz = data_clock(h, &csd)?;
    h.info_mut().data_clock_hz = hz;
    let ccc = csd_ccc(h.info_mut());
    raise_speed(h, ccc)?;
    h.info_mut().blocks = csd.blocks;
    Ok(())
}

/// The identification sequence from CMD0 up to the transfer state: CMD0, CMD8, ACMD41, CMD2,
/// CMD3, CMD9, CMD7, then ACMD6 and the host's 4-bit bus when `four_bit`, CMD16 512 on SDSC. Fills
/// in the card's part of [`Host::info_mut`] (not `blocks`, which the caller sets last) and
/// returns the CSD, for the data clock and the capacity.
pub(crate) fn identify<H: Host>(h: &mut H, four_bit: bool) -> Result<Csd, (Step, Cause)> {
    let (sd_v2, ocr, note) = wake(h)?;
    let high_capacity = sd_v2 && ocr & OCR_CCS != 0;

    let cid = cmd(h, ALL_SEND_CID, 0)?;
    let rca = relative_address(h)?;
    let rca_arg = (rca as u32) << 16;
    let csd_raw = cmd(h, SEND_CSD, rca_arg)?;
    let csd = parse_csd(&csd_raw).map_err(|c| (Step::Command(SEND_CSD.cmd), c))?;
    let info = h.info_mut();
    info.sd_v2 = sd_v2;
    info.high_capacity = high_capacity;
    info.ocr = ocr;
    info.speed_note = note;
    info.rca = rca;
    info.cid = cid;
    info.csd = csd_raw;

    cmd_r1(h, SELECT_CARD, rca_arg)?;
    if four_bit {
        cmd_r1(h, SET_BUS_WIDTH, BUS_WIDTH_4)?;
        h.set_four_bit();
        h.info_mut().bus_width = 4;
    }
    if !high_capacity {
        cmd_r1(h, SET_BLOCKLEN, BLOCK_SIZE as u32)?;
    }
    Ok(csd)
}

/// Bring the bus up to the fastest mode the card, the host and the driver's [`SpeedCap`] allow,
/// after [`identify`] and with the Default Speed data clock running. CMD6 in check mode lists the
/// access modes the card supports (its 64-byte status block read whole); the modes are tried
/// fastest first ([`BusMode::FASTEST_FIRST`]; the UHS-I ones only when the card signals at 1.8
/// V): the host's clock for it must beat the mode below, the card must offer it, CMD6 in switch
/// mode must answer it, then the host's timing and clock, then tuning where the mode needs it.
/// [`CardInfo::speed_note`] says why the bus runs no faster than the driver's limit; only a
/// failure to set the host's clock is an error.
pub(crate) fn raise_speed<H: Host>(h: &mut H, csd_ccc: u16) -> Result<(), (Step, Cause)> {
    let cap = *h.speed_cap();
    let woke = h.info_mut().speed_note.take();
    h.info_mut().bus_mode = BusMode::DefaultSpeed;
    let (reached, why) = faster_mode(h, csd_ccc, cap.limit, woke)?;
    let info = h.info_mut();
    // A note when the bus runs below the limit, or at Default Speed whatever the limit.
    let short = reached.is_none_or(|(mode, _)| mode < cap.limit);
    if let Some((mode, hz)) = reached {
        info.bus_mode = mode;
        info.data_clock_hz = hz;
    }
    info.speed_note = cap.stepped.or(if short { why } else { None });
    Ok(())
}

/// A mode above Default Speed reached, and its clock.
type Reached = Option<(BusMode, u32)>;

/// The modes above Default Speed tried fastest first, up to `limit`: the mode reached and its
/// clock (`None`: Default Speed, card and host put back there), and the first reason a faster
/// one was not (`woke`: why the card does not signal at 1.8 V, if it does not).
fn faster_mode<H: Host>(
    h: &mut H,
    csd_ccc: u16,
    limit: BusMode,
    woke: Option<SpeedNote>,
) -> Result<(Reached, Option<SpeedNote>), (Step, Cause)> {
    if limit < BusMode::HighSpeed {
        return Ok((None, Some(SpeedNote::Configured { limit })));
    }
    if csd_ccc & CCC_SWITCH == 0 {
        return Ok((None, Some(SpeedNote::NoSwitchClass { ccc: csd_ccc })));
    }
    let uhs = h.info_mut().signal_1v8;
    let mut why = match (uhs, limit.is_uhs()) {
        (false, true) => Some(woke.unwrap_or(SpeedNote::HostLacks { mode: limit })),
        _ => None,
    };
    let mut check: Option<SwitchStatus> = None;
    let mut switched = false;
    for mode in BusMode::FASTEST_FIRST {
        if mode > limit || (mode.is_uhs() && !uhs) {
            continue;
        }
        if let Err(note) = h.mode_clock(mode) {
            why.get_or_insert(note);
            continue;
        }
        let status = match check {
            Some(s) => s,
            None => match switch_status(h, switch_check_arg(0)) {
                Ok(s) => *check.insert(s),
                Err(cause) => {
                    why.get_or_insert(SpeedNote::CheckFailed { cause });
                    break;
                }
            },
        };
        if !status.supports(mode) {
            why.get_or_insert(SpeedNote::NotOffered {
                mode,
                support: status.group1_support,
            });
            continue;
        }
        if let Err(note) = switch_to(h, mode) {
            why.get_or_insert(note);
            continue;
        }
        switched = true;
        let hz = h.enter_mode(mode).map_err(|c| (Step::Clock, c))?;
        if h.needs_tuning(mode) {
            if let Err(cause) = h.tune() {
                why.get_or_insert(SpeedNote::TuningFailed { mode, cause });
                continue;
            }
        }
        return Ok((Some((mode, hz)), why));
    }
    if switched {
        // A mode was switched to and then failed: card and host back to Default Speed (SDR12).
        let _ = switch_to(h, BusMode::DefaultSpeed);
        let hz = h
            .enter_mode(BusMode::DefaultSpeed)
            .map_err(|c| (Step::Clock, c))?;
        h.info_mut().data_clock_hz = hz;
    }
    Ok((None, why))
}

/// CMD6 in switch mode to `mode`'s access function; `Err` says why the card is not in it.
fn switch_to<H: Host>(h: &mut H, mode: BusMode) -> Result<(), SpeedNote> {
    let set = switch_status(h, switch_set_arg(mode.function()))
        .map_err(|cause| SpeedNote::SwitchFailed { mode, cause })?;
    if set.group1_result != mode.function() {
        return Err(SpeedNote::SwitchRefused {
            mode,
            result: set.group1_result,
        });
    }
    Ok(())
}

/// CMD6 with `arg` and its whole 64-byte status block; a failure recovers the card to "tran".
fn switch_status<H: Host>(h: &mut H, arg: u32) -> Result<SwitchStatus, Cause> {
    let mut block = [0u8; SWITCH_STATUS_BYTES];
    let r = h.read_register(SWITCH_FUNC, arg, &mut block);
    let r = match r {
        Ok(r1) if r1 & R1_ERRORS != 0 => Err(Cause::CardStatus { r1 }),
        other => other,
    };
    match r {
        Ok(_) => Ok(SwitchStatus::parse(&block)),
        Err(cause) => {
            recover(h, false);
            Err(cause)
        }
    }
}

/// The CSD's command classes (CCC, bits 95:84).
pub(crate) fn csd_ccc(info: &CardInfo) -> u16 {
    ((r2_register(&info.csd) >> 84) & 0xFFF) as u16
}

/// CMD0, CMD8 and ACMD41 until the card is ready, asking for 1.8 V when the host can switch to it;
/// when the card accepts (S18A), CMD11 and the host's switch. A failed switch power-cycles the
/// card and wakes it again at 3.3 V. Returns (CMD8 answered, the OCR, why there is no UHS-I).
fn wake<H: Host>(h: &mut H) -> Result<(bool, u32, Option<SpeedNote>), (Step, Cause)> {
    cmd(h, GO_IDLE_STATE, 0)?;
    let sd_v2 = interface_condition(h)?;
    let s18r = sd_v2 && h.can_signal_1v8();
    let ocr = power_up(h, sd_v2, s18r)?;
    h.info_mut().signal_1v8 = false;
    if !s18r {
        return Ok((sd_v2, ocr, None));
    }
    if ocr & OCR_S18 == 0 || ocr & OCR_CCS == 0 {
        return Ok((sd_v2, ocr, Some(SpeedNote::No1v8 { ocr })));
    }
    let switched = cmd_r1(h, VOLTAGE_SWITCH, 0)
        .map_err(|(_, c)| c)
        .and_then(|_| h.switch_to_1v8());
    match switched {
        Ok(()) => {
            h.info_mut().signal_1v8 = true;
            Ok((sd_v2, ocr, None))
        }
        Err(cause) => {
            // The card may be holding its lines low for ever: only power brings it back.
            h.power_cycle()
                .map_err(|c| (Step::Command(VOLTAGE_SWITCH.cmd), c))?;
            cmd(h, GO_IDLE_STATE, 0)?;
            let sd_v2 = interface_condition(h)?;
            let ocr = power_up(h, sd_v2, false)?;
            Ok((sd_v2, ocr, Some(SpeedNote::VoltageSwitch { cause })))
        }
    }
}

/// The data clock to ask for: `configured` (0 = the default-speed limit) capped at
/// [`DATA_CLOCK_MAX_HZ`] and at the CSD's TRAN_SPEED.
pub(crate) fn data_clock_target(configured: u32, csd: &Csd) -> u32 {
    let target = match configured {
        0 => DATA_CLOCK_MAX_HZ,
        hz => hz.min(DATA_CLOCK_MAX_HZ),
    };
    csd.max_clock_hz.map_or(target, |max| target.min(max))
}

/// The argument of a data command for `lba`: the block number on SDHC/SDXC, the byte address on
/// SDSC.
fn card_address(info: &CardInfo, lba: u64) -> Result<u32, Cause> {
    let addr = if info.high_capacity {
        Some(lba)
    } else {
        lba.checked_mul(BLOCK_SIZE as u64)
    };
    addr.and_then(|a| u32::try_from(a).ok())
        .ok_or(Cause::AddressTooLarge { lba })
}

/// Issue `d`'s data command for `blocks` blocks at `start` and check the card's R1 status: the
/// start of every read and write. Returns the command sent.
pub(crate) fn begin_transfer<H: Host>(
    h: &mut H,
    d: &Direction,
    start: u64,
    blocks: u32,
) -> Result<Command, Failure> {
    begin_transfer_with(h, d, start, blocks, false)
}

/// [`begin_transfer`], the data moved by the host's DMA engine when `dma`.
pub(crate) fn begin_transfer_with<H: Host>(
    h: &mut H,
    d: &Direction,
    start: u64,
    blocks: u32,
    dma: bool,
) -> Result<Command, Failure> {
    let c = d.command(blocks);
    let fail = |cause: Cause| Failure {
        cmd: c.cmd,
        lba: start,
        cause,
    };
    let arg = card_address(h.info_mut(), start).map_err(fail)?;
    let xfer = Xfer {
        blocks: blocks.min(u16::MAX as u32) as u16,
        block_len: BLOCK_SIZE as u16,
        write: d.write,
        dma,
    };
    let r1 = h.issue(c, arg, Some(xfer)).map_err(fail)?[0];
    if r1 & R1_ERRORS != 0 {
        return Err(fail(Cause::CardStatus { r1 }));
    }
    Ok(c)
}

/// CMD12 after the multi-block transfer that ended at `last`; returns its R1 (not checked here).
pub(crate) fn stop<H: Host>(h: &mut H, last: u64) -> Result<u32, Failure> {
    let r = h
        .issue(STOP_TRANSMISSION, 0, None)
        .map_err(|cause| Failure {
            cmd: STOP_TRANSMISSION.cmd,
            lba: last,
            cause,
        })?;
    Ok(r[0])
}

/// Poll CMD13 until the card is in the transfer state and ready for data (it has finished
/// programming), at most [`PROGRAM_TIMEOUT_US`]. A card status error bit (a write protect
/// violation, an ECC or controller error reported after the data) is an error.
pub(crate) fn wait_programmed<H: Host>(h: &mut H) -> Result<(), (Cmd, Cause)> {
    let rca = (h.info_mut().rca as u32) << 16;
    let start = h.now_us();
    let max_polls = PROGRAM_TIMEOUT_US / PROGRAM_POLL_US as u64 + 2;
    let mut state = 0u8;
    for _ in 0..max_polls {
        let r1 = h
            .issue(SEND_STATUS, rca, None)
            .map_err(|c| (SEND_STATUS.cmd, c))?[0];
        if r1 & R1_ERRORS != 0 {
            return Err((SEND_STATUS.cmd, Cause::CardStatus { r1 }));
        }
        state = ((r1 >> R1_STATE_SHIFT) & 0xF) as u8;
        if state as u32 == STATE_TRAN && r1 & R1_READY_FOR_DATA != 0 {
            return Ok(());
        }
        if h.now_us().saturating_sub(start) >= PROGRAM_TIMEOUT_US {
            break;
        }
        h.delay_us(PROGRAM_POLL_US);
    }
    let waited = h.now_us().saturating_sub(start);
    Err((
        SEND_STATUS.cmd,
        h.timeout(Wait::Programmed { state }, waited),
    ))
}

/// The CSD's write protection, if any.
pub(crate) fn csd_write_protection(info: &CardInfo) -> Option<WriteProtect> {
    let csd = r2_register(&info.csd);
    if csd >> CSD_PERM_WRITE_PROTECT & 1 != 0 {
        return Some(WriteProtect::CsdPermanent);
    }
    if csd >> CSD_TMP_WRITE_PROTECT & 1 != 0 {
        return Some(WriteProtect::CsdTemporary);
    }
    None
}

/// After a CRC error (`cause`) in a mode above Default Speed: lower the driver's [`SpeedCap`] to
/// the next slower mode, for the re-initialisation the caller does next. False at Default Speed.
fn step_down<H: Host>(h: &mut H, cause: Cause) -> bool {
    let from = h.info_mut().bus_mode;
    let Some(lower) = from.step_down() else {
        return false;
    };
    let cap = h.speed_cap();
    cap.limit = cap.limit.min(lower);
    cap.stepped = Some(SpeedNote::SteppedDown { from, cause });
    h.note(Event::StepDown);
    true
}

/// After a failed read or write: reset the lines, and if the card may still be sending or
/// receiving (CMD13 says state "data" or "rcv", or does not answer), stop it with CMD12. After a
/// write, wait (bounded) for the card to finish programming what it got. Failures here are left to
/// the next try (and the re-initialisation before the last). Returns false when a write left the
/// card still programming: the next try must start with re-initialising it (a write command
/// would be illegal in that state).
pub(crate) fn recover<H: Host>(h: &mut H, write: bool) -> bool {
    h.reset_lines();
    let rca = (h.info_mut().rca as u32) << 16;
    let busy = match h.issue(SEND_STATUS, rca, None) {
        Ok(r) => matches!((r[0] >> R1_STATE_SHIFT) & 0xF, STATE_DATA | STATE_RCV),
        Err(_) => true,
    };
    if busy {
        let _ = h.issue(STOP_TRANSMISSION, 0, None);
    }
    !write || wait_programmed(h).is_ok()
}

/// The error a request reports after its last try failed with `f`.
fn final_error(d: &Direction, start: u64, blocks: u32, attempts: u8, f: Failure) -> SdError {
    let failed = Failed {
        cmd: f.cmd,
        lba: f.lba,
        start,
        blocks,
        attempts,
        cause: f.cause,
    };
    if d.write {
        SdError::Write(failed)
    } else {
        SdError::Read(failed)
    }
}

/// The error a request reports when re-initialising after its failure `f` failed too.
fn reinit_error(
    d: &Direction,
    start: u64,
    blocks: u32,
    f: Failure,
    (step, cause): (Step, Cause),
) -> SdError {
    if d.write {
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
    }
}

/// One read or write command (`once`, for the `blocks` blocks from `start`) with its retries:
/// [`recover`] after each failure, the card initialised again before the last try (and before
/// any try that a write left the card programming for). A write protect violation is not retried.
pub(crate) fn with_retries<H: Host>(
    h: &mut H,
    d: &Direction,
    start: u64,
    blocks: u32,
    mut once: impl FnMut(&mut H) -> Result<(), Failure>,
) -> Result<(), SdError> {
    let tries = h.tries().max(1);
    let mut attempt = 1u8;
    // The first failure is reported: later ones may only be its consequences.
    let mut first: Option<Failure> = None;
    // The previous failure of this request was a CRC error.
    let mut crc_before = false;
    loop {
        let f = match once(h) {
            Ok(()) => return Ok(()),
            Err(f) => f,
        };
        // Always true after a read.
        let settled = recover(h, d.write);
        // One CRC error is retried as any error; a second in a row above Default Speed says the
        // bus cannot carry the clock: step down, and the slower mode gets the tries afresh.
        let crc = f.cause.is_crc();
        if crc {
            h.note(Event::Crc);
        }
        if crc && crc_before && step_down(h, f.cause) {
            h.bring_up()
                .map_err(|e| reinit_error(d, start, blocks, f, e))?;
            attempt = 1;
            crc_before = false;
            continue;
        }
        crc_before = crc;
        let f = *first.get_or_insert(f);
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
            return Err(final_error(d, start, blocks, attempt, f));
        }
        attempt += 1;
        h.note(Event::Retry);
        if attempt == tries || !settled {
            h.note(Event::Reinit);
            h.bring_up()
                .map_err(|e| reinit_error(d, start, blocks, f, e))?;
        }
    }
}

/// Run `f` between two [`Host::barrier`]s: one before its first register access, one after its
/// last.
pub(crate) fn fenced<H: Host, T>(h: &mut H, f: impl FnOnce(&mut H) -> T) -> T {
    h.barrier();
    let r = f(h);
    h.barrier();
    r
}

/// Reset the controller and identify the card again, fenced.
pub(crate) fn reinit<H: Host>(h: &mut H) -> Result<(), SdError> {
    fenced(h, |h| h.bring_up()).map_err(|(step, cause)| SdError::Init { step, cause })
}

/// The commands of a request of `len` bytes from `lba`, at most `per` blocks each, each run by
/// `once(host, start, range of the buffer)` through [`with_retries`].
fn each_command<H: Host>(
    h: &mut H,
    d: &Direction,
    lba: u64,
    len: usize,
    per: u16,
    mut once: impl FnMut(&mut H, u64, Range<usize>) -> Result<(), Failure>,
) -> Result<(), SdError> {
    let per = per.max(1) as usize * BLOCK_SIZE;
    let mut off = 0;
    while off < len {
        let end = (off + per).min(len);
        let start = lba + (off / BLOCK_SIZE) as u64;
        let blocks = ((end - off) / BLOCK_SIZE) as u32;
        with_retries(h, d, start, blocks, |h| once(h, start, off..end))?;
        off = end;
    }
    Ok(())
}

/// A whole read request: checked against the capacity, fenced, split into commands of at most
/// `per` blocks, each `once(host, start, blocks of buf)` with its retries.
pub(crate) fn read_request<H: Host>(
    h: &mut H,
    lba: u64,
    buf: &mut [u8],
    per: u16,
    mut once: impl FnMut(&mut H, u64, &mut [u8]) -> Result<(), Failure>,
) -> Result<(), SdError> {
    check_request(lba, buf.len(), h.info_mut().blocks)?;
    fenced(h, |h| {
        each_command(h, &READ, lba, buf.len(), per, |h, start, range| {
            once(h, start, &mut buf[range])
        })
    })
}

/// A whole write request: checked against the capacity and the card's write protection
/// ([`Host::write_protection`]: nothing is sent to a protected card), then as a read.
pub(crate) fn write_request<H: Host>(
    h: &mut H,
    lba: u64,
    buf: &[u8],
    per: u16,
    mut once: impl FnMut(&mut H, u64, &[u8]) -> Result<(), Failure>,
) -> Result<(), SdError> {
    check_request(lba, buf.len(), h.info_mut().blocks)?;
    if buf.is_empty() {
        return Ok(());
    }
    fenced(h, |h| {
        if let Some(by) = h.write_protection() {
            return Err(SdError::WriteProtected {
                start: lba,
                blocks: (buf.len() / BLOCK_SIZE) as u32,
                by,
            });
        }
        each_command(h, &WRITE, lba, buf.len(), per, |h, start, range| {
            once(h, start, &buf[range])
        })
    })
}

/// The [`Host`] methods every driver implements alike, over its fields `regs`, `clock`, `info`,
/// `speed`, `config.tries` and `stats.retries` / `stats.reinits` / `stats.step_downs` /
/// `stats.crc_errors`: used inside `impl Host for ...`.
macro_rules! host_fields {
    () => {
        fn now_us(&mut self) -> u64 {
            self.clock.now_us()
        }

        fn delay_us(&mut self, us: u32) {
            self.clock.delay_us(us)
        }

        fn info_mut(&mut self) -> &mut CardInfo {
            &mut self.info
        }

        fn tries(&self) -> u8 {
            self.config.tries
        }

        fn note(&mut self, e: $crate::sd::Event) {
            match e {
                $crate::sd::Event::Retry => self.stats.retries += 1,
                $crate::sd::Event::Reinit => self.stats.reinits += 1,
                $crate::sd::Event::StepDown => self.stats.step_downs += 1,
                $crate::sd::Event::Crc => self.stats.crc_errors += 1,
            }
        }

        fn barrier(&mut self) {
            self.regs.barrier()
        }

        fn speed_cap(&mut self) -> &mut $crate::sd::SpeedCap {
            &mut self.speed
        }
    };
}
pub(crate) use host_fields;

/// The public accessors every driver has alike (`reinit`, `info`, `config`, `stats`), over its
/// fields `info`, `config` (of type `$config`) and `stats` (`$stats`): used inside the driver's
/// inherent `impl`.
macro_rules! driver_accessors {
    ($config:ty, $stats:ty) => {
        /// Reset the controller and identify the card again.
        pub fn reinit(&mut self) -> Result<(), SdError> {
            $crate::sd::reinit(self)
        }

        /// The card and controller as found by the last initialisation.
        pub fn info(&self) -> &CardInfo {
            &self.info
        }

        pub fn config(&self) -> &$config {
            &self.config
        }

        pub fn stats(&self) -> $stats {
            self.stats
        }
    };
}
pub(crate) use driver_accessors;
