//! What can go wrong, as values: a [`Cause`] says what the controller or card did (error bits, a
//! deadline that passed, a bad response), an [`SdError`] says what the driver was doing at the time
//! (initialising, at which step; reading, which command and LBA). Shared by the SD host drivers
//! ([`crate::sdhci`], [`crate::sunxi_mmc`]); the variants that name a controller's registers say
//! which controller.

use core::fmt;

use super::regs::sdhci::*;
use super::regs::sdhost as sh;
use super::regs::sunxi as aw;
use crate::bcm2835::dma::DmaError;
use crate::block::RequestError;

/// An SD command: `CMDn` or, after CMD55, the application command `ACMDn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cmd {
    pub index: u8,
    pub app: bool,
}

impl Cmd {
    pub const fn new(index: u8) -> Cmd {
        Cmd { index, app: false }
    }

    pub const fn acmd(index: u8) -> Cmd {
        Cmd { index, app: true }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.app {
            write!(f, "ACMD{}", self.index)
        } else {
            write!(f, "CMD{}", self.index)
        }
    }
}

/// What a poll loop was waiting for when its deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// A software reset bit (`SRST_ALL` / `SRST_CMD` / `SRST_DAT`, as in CLOCK_CONTROL) to clear.
    Reset(u32),
    /// The internal clock to report stable.
    ClockStable,
    /// The command line to be free (present state command inhibit and, for data or busy
    /// commands, DAT inhibit).
    Inhibit(u32),
    /// Command complete.
    CommandComplete,
    /// Transfer complete at the end of an R1b busy signal.
    Busy,
    /// Buffer read ready for block `n` (0-based) of the request.
    BufferReady(u32),
    /// Transfer complete after the last block.
    TransferComplete,
    /// Buffer write ready for block `n` (0-based) of a write request.
    BufferWriteReady(u32),
    /// The card to finish programming written blocks: CMD13 until the card is back in the transfer
    /// state and ready for data; `state` is the last CURRENT_STATE it reported (7 = programming).
    Programmed { state: u8 },
    /// Allwinner: the GCTRL reset bits written (soft, FIFO, DMA reset) to clear.
    GlobalReset(u32),
    /// Allwinner: the controller to take a clock update (the CMD register's start bit to clear
    /// after an "update clock only" command).
    ClockUpdate,
    /// Allwinner: the controller to take a command (the CMD register's start bit to clear).
    CommandStart,
    /// Allwinner: the card to release DAT0 (STATUS card busy clear), after an R1b command or a write.
    CardBusy,
    /// Allwinner: the FIFO to hold data for block `n` (0-based) of a read request.
    FifoData(u32),
    /// Allwinner: room in the FIFO for block `n` (0-based) of a write request.
    FifoSpace(u32),
    /// Allwinner: the internal DMA controller to finish a read (IDST receive interrupt).
    DmaDone,
    /// sdhost: the controller to finish a command (SDCMD NEW to clear).
    SdhostCommand,
    /// sdhost: the card to end its busy signal (SDHSTS busy interrupt).
    SdhostBusy,
    /// sdhost: the state machine (SDEDM 3:0) back to idle (IDENT or DATA).
    SdhostIdle,
    /// sdhost: FIFO words for block `n` (0-based) of the request.
    SdhostFifo(u32),
    /// sdhost: FIFO room for block `n` (0-based) of a write request.
    SdhostFifoSpace(u32),
    /// The BCM2835 system DMA channel to finish (CS.ACTIVE to clear).
    SystemDma,
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Wait::Reset(bit) => {
                let name = match bit {
                    SRST_ALL => "SRST_ALL",
                    SRST_CMD => "SRST_CMD",
                    SRST_DAT => "SRST_DAT",
                    _ => "SRST_?",
                };
                write!(f, "software reset {name} to complete")
            }
            Wait::ClockStable => f.write_str("the internal clock to become stable"),
            Wait::Inhibit(mask) => write!(
                f,
                "the {} line(s) to be free (PRESENT_STATE inhibit mask {mask:#x})",
                if mask & PS_DAT_INHIBIT != 0 {
                    "CMD and DAT"
                } else {
                    "CMD"
                }
            ),
            Wait::CommandComplete => f.write_str("command complete"),
            Wait::Busy => f.write_str("the card to end its busy signal (R1b)"),
            Wait::BufferReady(n) => write!(f, "buffer read ready for block {n} of the request"),
            Wait::TransferComplete => f.write_str("transfer complete"),
            Wait::BufferWriteReady(n) => {
                write!(f, "buffer write ready for block {n} of the request")
            }
            Wait::Programmed { state } => write!(
                f,
                "the card to finish programming (CMD13 until state tran and ready for data; last \
                 state {state} = {})",
                state_name(state)
            ),
            Wait::GlobalReset(bits) => {
                write!(
                    f,
                    "the GCTRL reset bits {bits:#x} to clear (controller reset)"
                )
            }
            Wait::ClockUpdate => {
                f.write_str("the controller to take a clock update (CMD start bit 31 to clear)")
            }
            Wait::CommandStart => {
                f.write_str("the controller to take the command (CMD start bit 31 to clear)")
            }
            Wait::CardBusy => f.write_str("the card to end its busy signal (STATUS bit 9)"),
            Wait::FifoData(n) => write!(f, "FIFO data for block {n} of the request"),
            Wait::FifoSpace(n) => write!(f, "FIFO space for block {n} of the request"),
            Wait::DmaDone => {
                f.write_str("the internal DMA controller to finish (IDST receive interrupt)")
            }
            Wait::SdhostCommand => {
                f.write_str("the controller to finish the command (SDCMD NEW to clear)")
            }
            Wait::SdhostBusy => {
                f.write_str("the card to end its busy signal (SDHSTS busy interrupt)")
            }
            Wait::SdhostIdle => {
                f.write_str("the state machine to be idle (SDEDM state IDENT or DATA)")
            }
            Wait::SdhostFifo(n) => write!(f, "FIFO data for block {n} of the request"),
            Wait::SdhostFifoSpace(n) => write!(f, "FIFO room for block {n} of the request"),
            Wait::SystemDma => f.write_str("the system DMA channel to finish (CS.ACTIVE to clear)"),
        }
    }
}

/// The name of an R1 CURRENT_STATE value.
pub fn state_name(state: u8) -> &'static str {
    match state {
        0 => "idle",
        1 => "ready",
        2 => "ident",
        3 => "stby",
        4 => "tran",
        5 => "data",
        6 => "rcv",
        7 => "prg",
        8 => "dis",
        _ => "reserved",
    }
}

/// What the controller or the card did wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The controller set error status bits (ERR_INT_STAT, the upper half of INT_STATUS).
    Error { err_status: u16 },
    /// A poll loop ran out of time: `waited_us` microseconds for `wait`, with the last INT_STATUS
    /// and PRESENT_STATE read.
    Timeout {
        wait: Wait,
        waited_us: u64,
        int_status: u32,
        present: u32,
    },
    /// The card's R1 status has error bits set.
    CardStatus { r1: u32 },
    /// CMD55's R1 lacks APP_CMD: the card will not take the application command.
    NotAppCmd { r1: u32 },
    /// CMD8's R7 did not echo the voltage and check pattern 0x1AA.
    BadEcho { r7: u32 },
    /// ACMD41 never reported the card powered up (OCR bit 31) within `waited_us`.
    NotReady { ocr: u32, waited_us: u64 },
    /// CMD3 published relative card address 0 every time.
    ZeroRca,
    /// Nothing answered on the bus: no response to CMD8 nor to the first CMD55 (the slot is empty,
    /// or not wired to this controller).
    NoCard,
    /// The CSD structure version or block length is not one this driver knows.
    BadCsd { structure: u8, read_bl_len: u8 },
    /// No base clock: none given and the capabilities register has none.
    NoBaseClock { caps: u32 },
    /// No base clock given, and this controller's capabilities register is not to be trusted
    /// for one (Linux's `SDHCI_QUIRK_CAP_CLOCK_BASE_BROKEN`; `caps` as read).
    BaseClockNotGiven { caps: u32 },
    /// The DesignWare MSHC's P_VENDOR_AREA1 (0xE8, bits 11:0: `ptr`) points outside the register
    /// block, where its vendor registers cannot be.
    VendorArea { ptr: u32 },
    /// No divider brings `base_hz` down to `target_hz` or below on this controller version.
    Divider {
        base_hz: u32,
        target_hz: u32,
        host_version: u8,
    },
    /// The driver refused to send a command outside its command set ([`super::COMMANDS`]).
    Forbidden,
    /// The card address of `lba` does not fit the 32-bit argument.
    AddressTooLarge { lba: u64 },
    /// Allwinner: the controller set error bits in RINT (raw interrupt status; `rint` is the
    /// register as read).
    Rint { rint: u32 },
    /// Allwinner: a poll loop ran out of time: `waited_us` microseconds for `wait`, with the last
    /// RINT, STATUS and IDST (internal DMA status) read.
    SunxiTimeout {
        wait: Wait,
        waited_us: u64,
        rint: u32,
        status: u32,
        idst: u32,
    },
    /// Allwinner: the internal DMA controller set error bits in IDST (`idst` and `rint` as read).
    Idmac { idst: u32, rint: u32 },
    /// Allwinner: no module clock setting (OSC24M / 2^N / M, N <= 3, M <= 16) gives `target_hz`
    /// or less from `parent_hz`.
    ModClock { parent_hz: u32, target_hz: u32 },
    /// Allwinner: PLL_PERIPH0, the source above 24 MHz, is off or not locked (`ctrl`: its
    /// control register).
    PllOff { ctrl: u32 },
    /// The host cannot do `what` (a driver asked of a controller that lacks it).
    Unsupported { what: &'static str },
    /// The signal voltage switch went wrong at `stage`: the DAT lines (PRESENT_STATE bits 23:20,
    /// `dat`) were not as the SD spec wants them, or the 1.8 V enable did not stay set.
    VoltageSwitch { stage: &'static str, dat: u8 },
    /// SDHCI: the ADMA2 engine stopped on an error (ERR_INT_STAT `err_status` with its ADMA
    /// error bit; `adma_status` the ADMA error status register: the state it stopped in and a
    /// length mismatch).
    Adma { adma_status: u32, err_status: u16 },
    /// Tuning (CMD19) did not converge in `tries` blocks (host control 2 execute tuning still set,
    /// or the sampling clock not selected).
    Tuning { tries: u32, host_control2: u32 },
    /// sdhost: the controller set error bits in SDHSTS (`hsts`), with SDEDM (`edm`) as read.
    Sdhost { hsts: u32, edm: u32 },
    /// sdhost: a poll loop ran out of time: `waited_us` microseconds for `wait`, with SDCMD,
    /// SDHSTS and SDEDM as read.
    SdhostTimeout {
        wait: Wait,
        waited_us: u64,
        sdcmd: u32,
        hsts: u32,
        edm: u32,
    },
    /// sdhost: the state machine stayed in state `edm & 0xF` after FORCE_DATA_MODE.
    StuckFsm { edm: u32 },
    /// The BCM2835 system DMA engine failed or refused the transfer.
    Dma(DmaError),
}

impl Cause {
    /// Was it a CRC or framing error on the bus (what a clock too fast for the card or the board
    /// gives)?
    pub fn is_crc(&self) -> bool {
        const SDHCI: u16 = ERR_CMD_CRC | ERR_CMD_END_BIT | ERR_DATA_CRC | ERR_DATA_END_BIT;
        const SUNXI: u32 = aw::RINT_RESP_CRC_ERROR
            | aw::RINT_DATA_CRC_ERROR
            | aw::RINT_START_BIT_ERROR
            | aw::RINT_END_BIT_ERROR;
        match *self {
            Cause::Error { err_status } => err_status & SDHCI != 0,
            Cause::Rint { rint } | Cause::Idmac { rint, .. } => rint & SUNXI != 0,
            Cause::Sdhost { hsts, .. } => hsts & (sh::SDHSTS_CRC7 | sh::SDHSTS_CRC16) != 0,
            _ => false,
        }
    }

    /// Did the command or data time out (in the controller or in a driver deadline)?
    pub fn is_timeout(&self) -> bool {
        match *self {
            Cause::Error { err_status } => err_status & (ERR_CMD_TIMEOUT | ERR_DATA_TIMEOUT) != 0,
            // The QEMU model reports a missing response as a response error alone.
            Cause::Rint { rint } => rint & aw::RINT_NO_RESPONSE != 0,
            Cause::Sdhost { hsts, .. } => {
                hsts & (sh::SDHSTS_CMD_TIMEOUT | sh::SDHSTS_REW_TIMEOUT) != 0
            }
            Cause::Timeout { .. }
            | Cause::SunxiTimeout { .. }
            | Cause::SdhostTimeout { .. }
            | Cause::NotReady { .. }
            | Cause::NoCard => true,
            _ => false,
        }
    }
}

/// Names of the ERR_INT_STAT bits.
fn error_bits(f: &mut fmt::Formatter<'_>, err: u16) -> fmt::Result {
    const NAMES: [&str; 10] = [
        "command timeout (no response)",
        "command CRC error",
        "command end bit error",
        "command index error",
        "data timeout",
        "data CRC error",
        "data end bit error",
        "current limit error",
        "auto CMD12 error",
        "ADMA error",
    ];
    let mut first = true;
    for (i, name) in NAMES.iter().enumerate() {
        if err & (1 << i) != 0 {
            if !first {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
            first = false;
        }
    }
    if err & 0xFC00 != 0 || first {
        if !first {
            f.write_str(", ")?;
        }
        write!(
            f,
            "error bits {:#06x}",
            err & if first { 0xFFFF } else { 0xFC00 }
        )?;
    }
    write!(f, " (ERR_INT_STAT {err:#06x})")
}

/// The names of the bits of `value` that `names` has, comma-separated ("no error bits" if none).
fn bit_names(f: &mut fmt::Formatter<'_>, value: u32, names: &[(u32, &str)]) -> fmt::Result {
    let mut first = true;
    for &(bit, name) in names {
        if value & bit != 0 {
            if !first {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
            first = false;
        }
    }
    if first {
        f.write_str("no error bits")?;
    }
    Ok(())
}

/// An ADMA2 error: the state the engine stopped in, a length mismatch, the registers.
fn adma_error(f: &mut fmt::Formatter<'_>, adma_status: u32, err_status: u16) -> fmt::Result {
    let state = match adma_status & 3 {
        0 => "stop (ST_STOP)",
        1 => "fetching a descriptor (ST_FDS)",
        _ => "transferring data (ST_TFR)",
    };
    write!(
        f,
        "ADMA2 error while {state}{} (ADMA error status {adma_status:#x}, ERR_INT_STAT {err_status:#06x})",
        if adma_status & 4 != 0 { ", length mismatch" } else { "" }
    )
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Cause::Error { err_status } => error_bits(f, err_status),
            Cause::Timeout {
                wait,
                waited_us,
                int_status,
                present,
            } => write!(
                f,
                "timeout: waited {waited_us} us for {wait} (INT_STATUS {int_status:#010x}, PRESENT_STATE {present:#010x})"
            ),
            Cause::CardStatus { r1 } => write!(
                f,
                "card status {r1:#010x} has error bits {:#010x}",
                r1 & super::R1_ERRORS
            ),
            Cause::NotAppCmd { r1 } => {
                write!(f, "the card did not accept an application command (R1 {r1:#010x} lacks APP_CMD)")
            }
            Cause::BadEcho { r7 } => write!(
                f,
                "R7 {r7:#010x} does not echo voltage 0x1 and check pattern 0xAA (unusable card)"
            ),
            Cause::NotReady { ocr, waited_us } => write!(
                f,
                "the card did not become ready in {} ms (last OCR {ocr:#010x}: power-up bit 31 never set)",
                waited_us / 1000
            ),
            Cause::ZeroRca => f.write_str("the card kept publishing relative address 0"),
            Cause::NoCard => f.write_str(
                "no card answered (no response to CMD8 nor to CMD55: the slot is empty or not \
                 wired to this controller)",
            ),
            Cause::BadCsd {
                structure,
                read_bl_len,
            } => write!(
                f,
                "unsupported CSD (CSD_STRUCTURE {structure}, READ_BL_LEN {read_bl_len})"
            ),
            Cause::NoBaseClock { caps } => write!(
                f,
                "no base clock given and none in the capabilities register ({caps:#010x})"
            ),
            Cause::BaseClockNotGiven { caps } => write!(
                f,
                "no base clock given, and this controller's capabilities register ({caps:#010x}) is not to be trusted for one (the board file's base_clock_hz must give it)"
            ),
            Cause::VendorArea { ptr } => write!(
                f,
                "the vendor area pointer P_VENDOR_AREA1 ({ptr:#x}) lies outside the controller's registers"
            ),
            Cause::Divider {
                base_hz,
                target_hz,
                host_version,
            } => write!(
                f,
                "no clock divider gives {target_hz} Hz or less from a base clock of {base_hz} Hz (SDHCI spec version field {host_version})"
            ),
            Cause::Forbidden => {
                f.write_str("command outside the driver's command set (no erase, lock or program) refused")
            }
            Cause::AddressTooLarge { lba } => {
                write!(f, "the card address of LBA {lba} does not fit 32 bits")
            }
            Cause::Rint { rint } => {
                bit_names(f, rint, &aw::RINT_ERROR_NAMES)?;
                write!(f, " (RINT {rint:#010x})")
            }
            Cause::SunxiTimeout {
                wait,
                waited_us,
                rint,
                status,
                idst,
            } => write!(
                f,
                "timeout: waited {waited_us} us for {wait} (RINT {rint:#010x}, STATUS {status:#010x}, IDST {idst:#010x})"
            ),
            Cause::Idmac { idst, rint } => {
                f.write_str("internal DMA error: ")?;
                bit_names(f, idst, &aw::IDST_ERROR_NAMES)?;
                write!(f, " (IDST {idst:#010x}, RINT {rint:#010x})")
            }
            Cause::ModClock {
                parent_hz,
                target_hz,
            } => write!(
                f,
                "no module clock divider gives {target_hz} Hz or less from {parent_hz} Hz"
            ),
            Cause::PllOff { ctrl } => write!(
                f,
                "PLL_PERIPH0 is off or not locked (PLL_PERIPH0_CTRL {ctrl:#010x})"
            ),
            Cause::Unsupported { what } => write!(f, "the controller cannot {what}"),
            Cause::Adma {
                adma_status,
                err_status,
            } => adma_error(f, adma_status, err_status),
            Cause::VoltageSwitch { stage, dat } => write!(
                f,
                "signal voltage switch: {stage} (DAT[3:0] {dat:#06b})"
            ),
            Cause::Tuning {
                tries,
                host_control2,
            } => write!(
                f,
                "tuning did not converge in {tries} CMD19 blocks (HOST_CONTROL2 {host_control2:#06x})"
            ),
            Cause::Sdhost { .. } | Cause::SdhostTimeout { .. } | Cause::StuckFsm { .. } => {
                sdhost_cause(f, self)
            }
            Cause::Dma(e) => e.fmt(f),
        }
    }
}

/// The sdhost controller's causes, as [`Cause`]'s `Display` words them.
fn sdhost_cause(f: &mut fmt::Formatter<'_>, c: &Cause) -> fmt::Result {
    match *c {
        Cause::Sdhost { hsts, edm } => {
            bit_names(f, hsts, &sh::SDHSTS_NAMES)?;
            write!(f, " (SDHSTS {hsts:#06x}, SDEDM {edm:#010x})")
        }
        Cause::SdhostTimeout {
            wait,
            waited_us,
            sdcmd,
            hsts,
            edm,
        } => write!(
            f,
            "timeout: waited {waited_us} us for {wait} (SDCMD {sdcmd:#06x}, SDHSTS {hsts:#06x}, SDEDM {edm:#010x})"
        ),
        Cause::StuckFsm { edm } => write!(
            f,
            "the controller's state machine stayed in state {} after FORCE_DATA_MODE (SDEDM {edm:#010x})",
            edm & sh::SDEDM_FSM_MASK
        ),
        _ => Ok(()),
    }
}

/// Where in bringing up the controller and card a failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Software reset of the whole controller.
    Reset,
    /// Working out or setting the SD clock.
    Clock,
    /// A command of the identification sequence.
    Command(Cmd),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Reset => f.write_str("controller reset"),
            Step::Clock => f.write_str("SD clock setup"),
            Step::Command(c) => write!(f, "{c}"),
        }
    }
}

/// Why the card may not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteProtect {
    /// The controller reports the card's write-protect switch on "lock" (PRESENT_STATE bit 19
    /// clear; `present` is the register).
    Switch { present: u32 },
    /// The CSD's PERM_WRITE_PROTECT bit: the card is read-only for good.
    CsdPermanent,
    /// The CSD's TMP_WRITE_PROTECT bit: the card is write-protected until that bit is cleared.
    CsdTemporary,
    /// The card refused the write with WP_VIOLATION in its status (`r1`).
    Violation { r1: u32 },
}

impl fmt::Display for WriteProtect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WriteProtect::Switch { present } => write!(
                f,
                "the card's write-protect switch is on \"lock\" (PRESENT_STATE {present:#010x}, bit 19 \
                 clear; slide the switch, or leave the driver's Config::write_protect_switch off on a \
                 board whose slot has no switch line)"
            ),
            WriteProtect::CsdPermanent => {
                f.write_str("the card is permanently write-protected (CSD PERM_WRITE_PROTECT)")
            }
            WriteProtect::CsdTemporary => {
                f.write_str("the card is temporarily write-protected (CSD TMP_WRITE_PROTECT)")
            }
            WriteProtect::Violation { r1 } => write!(
                f,
                "the card refused the write: write protect violation (card status {r1:#010x}, bit 26)"
            ),
        }
    }
}

/// A failed request to the SD driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdError {
    /// Bringing up the controller or the card failed.
    Init { step: Step, cause: Cause },
    /// A read failed on every try.
    Read(Failed),
    /// A read failed (first `read_cmd` at `read_lba`: `read_cause`) and re-initialising the card
    /// before the last try failed too.
    Reinit {
        start: u64,
        blocks: u32,
        read_cmd: Cmd,
        read_lba: u64,
        read_cause: Cause,
        step: Step,
        cause: Cause,
    },
    /// The request itself is wrong (partial block, past the end of the card).
    Request(RequestError),
    /// A write failed on every try (`cmd` is CMD24/25, or CMD13 / CMD12 after the data).
    Write(Failed),
    /// A write failed (first `write_cmd` at `write_lba`: `write_cause`) and re-initialising the card
    /// before the last try failed too.
    WriteReinit {
        start: u64,
        blocks: u32,
        write_cmd: Cmd,
        write_lba: u64,
        write_cause: Cause,
        step: Step,
        cause: Cause,
    },
    /// The card may not be written: nothing was sent for the request of `blocks` blocks from
    /// `start` (or the card refused it).
    WriteProtected {
        start: u64,
        blocks: u32,
        by: WriteProtect,
    },
}

/// A request of `blocks` blocks from `start` that failed on every one of its `attempts`: `cmd`
/// failed at block `lba` with `cause` (the first failure; the later tries are not described).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed {
    pub cmd: Cmd,
    pub lba: u64,
    pub start: u64,
    pub blocks: u32,
    pub attempts: u8,
    pub cause: Cause,
}

impl SdError {
    /// The hardware cause (the re-initialisation's for [`SdError::Reinit`]); `None` for bad requests.
    pub fn cause(&self) -> Option<Cause> {
        match *self {
            SdError::Init { cause, .. }
            | SdError::Read(Failed { cause, .. })
            | SdError::Reinit { cause, .. }
            | SdError::Write(Failed { cause, .. })
            | SdError::WriteReinit { cause, .. } => Some(cause),
            SdError::Request(_) | SdError::WriteProtected { .. } => None,
        }
    }

    /// Did the initialisation find no card at all ([`Cause::NoCard`])? A card that answered and
    /// then failed is not "no card".
    pub fn is_no_card(&self) -> bool {
        matches!(
            self,
            SdError::Init {
                cause: Cause::NoCard,
                ..
            }
        )
    }

    /// Was it a timeout (no answer from the card or the controller)?
    pub fn is_timeout(&self) -> bool {
        match *self {
            SdError::Reinit {
                read_cause: first,
                cause,
                ..
            }
            | SdError::WriteReinit {
                write_cause: first,
                cause,
                ..
            } => first.is_timeout() || cause.is_timeout(),
            _ => self.cause().is_some_and(|c| c.is_timeout()),
        }
    }

    /// "write" for the errors of a write, "read" for the others.
    fn op(&self) -> &'static str {
        match self {
            SdError::Write(_) | SdError::WriteReinit { .. } | SdError::WriteProtected { .. } => {
                "write"
            }
            _ => "read",
        }
    }
}

impl From<RequestError> for SdError {
    fn from(e: RequestError) -> SdError {
        SdError::Request(e)
    }
}

impl fmt::Display for SdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SdError::Init { step, cause } => write!(f, "SD card init failed at {step}: {cause}"),
            SdError::Read(t) | SdError::Write(t) => write!(
                f,
                "SD {} failed: {} at LBA {} (request of {} block(s) from LBA {}), {} attempt(s): {}",
                self.op(),
                t.cmd,
                t.lba,
                t.blocks,
                t.start,
                t.attempts,
                t.cause
            ),
            SdError::Reinit {
                start,
                blocks,
                read_cmd: cmd,
                read_lba: lba,
                read_cause: first,
                step,
                cause,
            }
            | SdError::WriteReinit {
                start,
                blocks,
                write_cmd: cmd,
                write_lba: lba,
                write_cause: first,
                step,
                cause,
            } => write!(
                f,
                "SD {} failed: {cmd} at LBA {lba} (request of {blocks} block(s) from LBA {start}): {first}; re-initialising the card then failed at {step}: {cause}",
                self.op()
            ),
            SdError::Request(e) => write!(f, "SD {e}"),
            SdError::WriteProtected { start, blocks, by } => write!(
                f,
                "SD write of {blocks} block(s) at LBA {start} refused: {by}"
            ),
        }
    }
}

impl core::error::Error for SdError {}
