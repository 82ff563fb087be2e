//! Bus speed modes: which one the card runs in ([`BusMode`]), why it runs no faster
//! ([`SpeedNote`]), and the SWITCH_FUNC (CMD6) status block that says what a card offers
//! ([`SwitchStatus`]). Pure logic: the commands go out through [`super::Host`] in
//! [`super::switch_high_speed`].
//!
//! Bus ceilings on 4 data lines (SD Physical Layer Simplified Specification 3.01, 3.x):
//! Default Speed 25 MHz = 12.5 MB/s, High Speed 50 MHz = 25 MB/s, UHS-I SDR50 100 MHz and DDR50
//! 50 MHz on both edges = 50 MB/s, SDR104 208 MHz = 104 MB/s. UHS-I needs 1.8 V signalling.

use core::fmt;

use super::error::Cause;

/// The bus timing the card and host run in, slowest first (the order is used to step down).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub enum BusMode {
    /// Default Speed: at most 25 MHz, 3.3 V.
    #[default]
    DefaultSpeed,
    /// High Speed (SDR25 timing at 3.3 V): at most 50 MHz.
    HighSpeed,
    /// UHS-I DDR50: at most 50 MHz, data on both clock edges, 1.8 V.
    Ddr50,
    /// UHS-I SDR50: at most 100 MHz, 1.8 V.
    Sdr50,
    /// UHS-I SDR104: at most 208 MHz, 1.8 V, tuned.
    Sdr104,
}

impl BusMode {
    /// The clock limit of the mode.
    pub const fn max_clock_hz(self) -> u32 {
        match self {
            BusMode::DefaultSpeed => 25_000_000,
            BusMode::HighSpeed | BusMode::Ddr50 => 50_000_000,
            BusMode::Sdr50 => 100_000_000,
            BusMode::Sdr104 => 208_000_000,
        }
    }

    /// Data bits moved per clock per data line (2 for DDR50).
    pub const fn bits_per_clock(self) -> u32 {
        match self {
            BusMode::Ddr50 => 2,
            _ => 1,
        }
    }

    /// The mode's ceiling in bytes per second on a `width`-bit bus at `clock_hz` (block
    /// overheads aside).
    pub const fn bytes_per_s(self, clock_hz: u32, width: u8) -> u64 {
        clock_hz as u64 * width as u64 * self.bits_per_clock() as u64 / 8
    }

    /// The mode's ceiling on a 4-bit bus at its clock limit, in bytes per second.
    pub const fn ceiling_bytes_per_s(self) -> u64 {
        self.bytes_per_s(self.max_clock_hz(), 4)
    }

    /// Does it signal at 1.8 V?
    pub const fn is_uhs(self) -> bool {
        matches!(self, BusMode::Sdr50 | BusMode::Ddr50 | BusMode::Sdr104)
    }

    /// The CMD6 group 1 (access mode) function number of the mode: Default / SDR12 0, High Speed
    /// / SDR25 1, SDR50 2, SDR104 3, DDR50 4. SDHCI v3's UHS mode select (host control 2 bits
    /// 2:0) numbers them the same way.
    pub const fn function(self) -> u8 {
        match self {
            BusMode::DefaultSpeed => 0,
            BusMode::HighSpeed => 1,
            BusMode::Sdr50 => 2,
            BusMode::Sdr104 => 3,
            BusMode::Ddr50 => 4,
        }
    }

    /// Does the mode need the sampling point tuned (CMD19) before data moves? SDR104 always;
    /// SDR50 when the host says so (its capabilities), which the host decides.
    pub const fn needs_tuning(self) -> bool {
        matches!(self, BusMode::Sdr104)
    }

    /// The modes above Default Speed, fastest first: the order the shared bring-up tries them
    /// in (DDR50 before SDR50: the same 50 MB/s, without tuning).
    pub const FASTEST_FIRST: [BusMode; 4] = [
        BusMode::Sdr104,
        BusMode::Ddr50,
        BusMode::Sdr50,
        BusMode::HighSpeed,
    ];

    /// The next slower mode to try after this one failed; `None` from Default Speed.
    pub const fn step_down(self) -> Option<BusMode> {
        match self {
            BusMode::DefaultSpeed => None,
            BusMode::HighSpeed => Some(BusMode::DefaultSpeed),
            // A UHS card that failed falls back to 3.3 V High Speed after a power cycle.
            BusMode::Ddr50 => Some(BusMode::HighSpeed),
            BusMode::Sdr50 => Some(BusMode::Ddr50),
            BusMode::Sdr104 => Some(BusMode::Sdr50),
        }
    }

    /// The mode's family in two or three letters, for a short line: `DS`, `HS`, `DDR`, `SDR`
    /// (the clock tells SDR50 from SDR104).
    pub const fn short(self) -> &'static str {
        match self {
            BusMode::DefaultSpeed => "DS",
            BusMode::HighSpeed => "HS",
            BusMode::Ddr50 => "DDR",
            BusMode::Sdr50 | BusMode::Sdr104 => "SDR",
        }
    }

    /// The name a serial log shows.
    pub const fn name(self) -> &'static str {
        match self {
            BusMode::DefaultSpeed => "Default Speed",
            BusMode::HighSpeed => "High Speed",
            BusMode::Sdr50 => "UHS-I SDR50",
            BusMode::Ddr50 => "UHS-I DDR50",
            BusMode::Sdr104 => "UHS-I SDR104",
        }
    }
}

impl fmt::Display for BusMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// CSD command class 10 (switch): the card takes CMD6.
pub const CCC_SWITCH: u16 = 1 << 10;

/// CMD6 argument in check mode: every group "no influence" (0xF) but group 1, which asks about
/// function `f` (0 = Default Speed: the reply then lists what the card supports).
pub const fn switch_check_arg(f: u8) -> u32 {
    0x00FF_FFF0 | (f as u32 & 0xF)
}

/// CMD6 argument in switch mode: group 1 (access mode) to function `f`, the rest unchanged.
pub const fn switch_set_arg(f: u8) -> u32 {
    0x80FF_FFF0 | (f as u32 & 0xF)
}

/// Bytes of the CMD6 status block (512 bits).
pub const SWITCH_STATUS_BYTES: usize = 64;

/// The CMD6 status block, decoded (SD Physical Layer Simplified Specification 3.01, table 4-11;
/// sent most significant byte first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchStatus {
    /// Bits 511:496: maximum current consumption in mA (0 = error).
    pub max_current_ma: u16,
    /// Bits 415:400: the functions of group 1 (access mode) the card supports, one bit each.
    pub group1_support: u16,
    /// Bits 379:376: the group 1 function the card switched to (switch mode) or would switch to
    /// (check mode); 0xF = the function cannot be switched to.
    pub group1_result: u8,
    /// Bits 375:368: data structure version (1: the busy bits are valid).
    pub version: u8,
    /// Bits 287:272: group 1 functions busy (version 1 only).
    pub group1_busy: u16,
}

impl SwitchStatus {
    /// Decode the 64 bytes.
    pub fn parse(b: &[u8; SWITCH_STATUS_BYTES]) -> SwitchStatus {
        SwitchStatus {
            max_current_ma: u16::from_be_bytes([b[0], b[1]]),
            group1_support: u16::from_be_bytes([b[12], b[13]]),
            group1_result: b[16] & 0xF,
            version: b[17],
            group1_busy: if b[17] >= 1 {
                u16::from_be_bytes([b[28], b[29]])
            } else {
                0
            },
        }
    }

    /// Does the card offer group 1 function `mode`?
    pub fn supports(&self, mode: BusMode) -> bool {
        self.group1_support & (1 << mode.function()) != 0
    }
}

/// Why the card runs no faster than it does: printed on the card line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeedNote {
    /// The driver was configured to go no faster (`Config::max_bus_mode`).
    Configured { limit: BusMode },
    /// The card's CSD lacks command class 10 (switch), so it has no CMD6 (an SD 1.0 card).
    NoSwitchClass { ccc: u16 },
    /// CMD6 in check mode failed (no response, illegal command, a CRC error, an R1 error bit).
    CheckFailed { cause: Cause },
    /// The card does not offer the mode (`support`: group 1's support bits).
    NotOffered { mode: BusMode, support: u16 },
    /// CMD6 in switch mode failed.
    SwitchFailed { mode: BusMode, cause: Cause },
    /// The card answered the switch with another function in group 1 (`result`; 0xF: refused).
    SwitchRefused { mode: BusMode, result: u8 },
    /// The host's clock cannot go above Default Speed's from its base clock.
    HostClock { base_hz: u32, best_hz: u32 },
    /// The host cannot run the mode (its capabilities, or this driver on this controller).
    HostLacks { mode: BusMode },
    /// Allwinner: PLL_PERIPH0, the clock source above 24 MHz, is off (`ctrl`: its control
    /// register; U-Boot's SPL normally leaves it at 600 MHz).
    PllOff { ctrl: u32 },
    /// The card did not accept 1.8 V signalling (no S18A in its OCR: not a UHS-I card, or it was
    /// already switched), so no UHS-I mode.
    No1v8 { ocr: u32 },
    /// The switch to 1.8 V signalling failed (`cause`); the card was power-cycled and runs at 3.3
    /// V.
    VoltageSwitch { cause: Cause },
    /// Tuning the sampling point for `mode` failed.
    TuningFailed { mode: BusMode, cause: Cause },
    /// The mode ran and failed (`cause`, e.g. CRC errors): the driver stepped down from it and
    /// initialised the card again.
    SteppedDown { from: BusMode, cause: Cause },
}

impl fmt::Display for SpeedNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SpeedNote::Configured { limit } => {
                write!(f, "the driver is configured for {limit} at most")
            }
            SpeedNote::NoSwitchClass { ccc } => write!(
                f,
                "the card has no switch function (CSD command classes {ccc:#05x} lack class 10)"
            ),
            SpeedNote::CheckFailed { cause } => {
                write!(f, "the card did not answer CMD6 in check mode: {cause}")
            }
            SpeedNote::NotOffered { mode, support } => write!(
                f,
                "the card does not offer {mode} (CMD6 group 1 support bits {support:#06x})"
            ),
            SpeedNote::SwitchFailed { mode, cause } => {
                write!(f, "CMD6 switching to {mode} failed: {cause}")
            }
            SpeedNote::SwitchRefused { mode, result } => write!(
                f,
                "the card refused {mode} (CMD6 switch answered group 1 function {result:#x})"
            ),
            SpeedNote::HostClock { base_hz, best_hz } => write!(
                f,
                "the controller's base clock of {} kHz divides to no more than {} kHz at or below 50 MHz",
                base_hz / 1000,
                best_hz / 1000
            ),
            SpeedNote::HostLacks { mode } => write!(f, "the controller cannot run {mode}"),
            SpeedNote::PllOff { ctrl } => write!(
                f,
                "PLL_PERIPH0, the clock above 24 MHz, is off or unlocked (PLL_PERIPH0_CTRL {ctrl:#010x})"
            ),
            SpeedNote::No1v8 { ocr } => write!(
                f,
                "the card did not accept 1.8 V signalling (OCR {ocr:#010x} lacks S18A), so no UHS-I"
            ),
            SpeedNote::VoltageSwitch { cause } => write!(
                f,
                "the switch to 1.8 V failed ({cause}); the card was power-cycled back to 3.3 V"
            ),
            SpeedNote::TuningFailed { mode, cause } => write!(f, "tuning for {mode} failed: {cause}"),
            SpeedNote::SteppedDown { from, cause } => {
                write!(f, "stepped down from {from} after: {cause}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status block as a card sends it: support bits, result nibble, version and busy bits.
    fn status(support: u16, result: u8, version: u8, busy: u16) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..2].copy_from_slice(&100u16.to_be_bytes());
        b[12..14].copy_from_slice(&support.to_be_bytes());
        b[16] = result & 0xF;
        b[17] = version;
        b[28..30].copy_from_slice(&busy.to_be_bytes());
        b
    }

    #[test]
    fn status_fields_sit_at_their_bits() {
        let s = SwitchStatus::parse(&status(0x8003, 1, 1, 0x0002));
        assert_eq!(s.max_current_ma, 100);
        assert_eq!(s.group1_support, 0x8003);
        assert!(s.supports(BusMode::DefaultSpeed) && s.supports(BusMode::HighSpeed));
        assert!(!s.supports(BusMode::Sdr50) && !s.supports(BusMode::Ddr50));
        assert_eq!((s.group1_result, s.version, s.group1_busy), (1, 1, 2));
        // Version 0: the busy bits are not defined.
        assert_eq!(
            SwitchStatus::parse(&status(3, 0xF, 0, 0xFFFF)).group1_busy,
            0
        );
        // Bit 401 of the 512 is byte 13's bit 1 (bytes go most significant first).
        let mut raw = [0u8; 64];
        raw[13] = 0b10;
        assert!(SwitchStatus::parse(&raw).supports(BusMode::HighSpeed));
    }

    #[test]
    fn arguments_and_modes() {
        assert_eq!(switch_check_arg(0), 0x00FF_FFF0);
        assert_eq!(switch_set_arg(1), 0x80FF_FFF1);
        assert_eq!(switch_set_arg(BusMode::Ddr50.function()), 0x80FF_FFF4);
        assert_eq!(BusMode::DefaultSpeed.ceiling_bytes_per_s(), 12_500_000);
        assert_eq!(BusMode::HighSpeed.ceiling_bytes_per_s(), 25_000_000);
        assert_eq!(BusMode::Ddr50.ceiling_bytes_per_s(), 50_000_000);
        assert_eq!(BusMode::Sdr104.ceiling_bytes_per_s(), 104_000_000);
        let mut m = BusMode::Sdr104;
        let mut steps = 0;
        while let Some(n) = m.step_down() {
            assert!(n < m, "{m} -> {n}");
            m = n;
            steps += 1;
        }
        assert_eq!((m, steps), (BusMode::DefaultSpeed, 4));
    }
}
