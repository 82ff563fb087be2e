//! Clocks, temperatures and power through the mailbox: the SD host's base clock and the VPU core
//! clock (the mini UART's) with their fallbacks, the SD card's power and 1.8 V select on the Pi 4,
//! and raising the ARM clock, which the firmware leaves at its boot rate (600 MHz on the Pi 3,
//! Zero 2 W and Pi 4) unless the kernel asks.
//! The policy decision ([`decide`]) is a pure function.

use core::fmt;

use super::{tags, Mailbox, MailboxError};
use crate::mmio::Regs;

/// Clock id of the ARM cores.
pub const ARM_CLOCK_ID: u32 = 3;
/// Clock id of the VPU core (the firmware's "CORE" clock; `core_freq` in config.txt): the mini
/// UART's and the AUX block's clock.
pub const CORE_CLOCK_ID: u32 = 4;
/// SD host base clock assumed when the firmware gives none (Circle's machineinfo.cpp: 100 MHz for
/// EMMC and EMMC2 up to the Pi 4; the BCM2835's capabilities register has no base clock field).
pub const DEFAULT_SD_BASE_CLOCK_HZ: u32 = 100_000_000;
/// Power domain id of the SD card (SET_POWER_STATE).
pub const SD_POWER_DEVICE: u32 = 0;
/// The ARM clock is not raised when the SoC is this close to its maximum temperature (m°C).
pub const THERMAL_MARGIN_MC: u32 = 5_000;
/// SET_POWER_STATE request bits: on, and wait for the power to be stable.
const POWER_ON: u32 = 1 << 0;
const POWER_WAIT: u32 = 1 << 1;
/// SET_POWER_STATE answer bit: the device does not exist.
const POWER_NO_DEVICE: u32 = 1 << 1;

/// Where the SD base clock came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockSource {
    /// GET_CLOCK_RATE: the rate the firmware set.
    Firmware,
    /// GET_CLOCK_RATE_MEASURED: the firmware gave no set rate but measured one.
    Measured,
    /// Neither: [`DEFAULT_SD_BASE_CLOCK_HZ`].
    Default,
}

impl fmt::Display for ClockSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClockSource::Firmware => "firmware",
            ClockSource::Measured => "measured by the firmware",
            ClockSource::Default => "default: the firmware gave none",
        })
    }
}

/// What to do with the ARM clock at boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArmClockPolicy {
    /// Leave it where the firmware booted it.
    Boot,
    /// The firmware's maximum (GET_MAX_CLOCK_RATE).
    Max,
    /// This many MHz, clamped to the maximum.
    Mhz(u32),
}

/// What [`decide`] chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockDecision {
    /// Nothing to do: the policy is [`ArmClockPolicy::Boot`], or the clock is already there.
    Keep,
    /// Ask the firmware for `hz`; `clamped`: the policy asked for more than the maximum.
    Set { hz: u32, clamped: bool },
    /// A raise to `wanted_hz` refused: the SoC is within [`THERMAL_MARGIN_MC`] of its maximum.
    TooHot { wanted_hz: u32 },
}

/// The ARM clock policy on plain values: `now_hz` the current rate, `max_hz` the firmware's
/// maximum, temperatures in m°C. Lowering is always allowed; raising only with more than
/// [`THERMAL_MARGIN_MC`] left below the maximum temperature.
pub fn decide(
    policy: ArmClockPolicy,
    now_hz: u32,
    max_hz: u32,
    temp_mc: u32,
    max_temp_mc: u32,
) -> ClockDecision {
    let (hz, clamped) = match policy {
        ArmClockPolicy::Boot => return ClockDecision::Keep,
        ArmClockPolicy::Max => (max_hz, false),
        ArmClockPolicy::Mhz(mhz) => {
            let want = mhz.saturating_mul(1_000_000);
            (want.min(max_hz), want > max_hz)
        }
    };
    if hz == 0 || hz == now_hz {
        return ClockDecision::Keep;
    }
    if hz > now_hz && temp_mc.saturating_add(THERMAL_MARGIN_MC) >= max_temp_mc {
        return ClockDecision::TooHot { wanted_hz: hz };
    }
    ClockDecision::Set { hz, clamped }
}

/// What [`Mailbox::raise_arm_clock`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmClock {
    /// The ARM clock before (GET_CLOCK_RATE).
    pub before_hz: u32,
    /// The ARM clock after (GET_CLOCK_RATE again once set; `before_hz` when nothing was set).
    pub after_hz: u32,
    /// The firmware's maximum (GET_MAX_CLOCK_RATE).
    pub max_hz: u32,
    /// SoC temperature and its maximum, m°C.
    pub temp_mc: u32,
    pub max_temp_mc: u32,
    pub decision: ClockDecision,
}

impl fmt::Display for ArmClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mhz = |hz: u32| hz / 1_000_000;
        write!(
            f,
            "ARM clock: {} -> {} MHz (max {} MHz), SoC {}.{} C (max {} C)",
            mhz(self.before_hz),
            mhz(self.after_hz),
            mhz(self.max_hz),
            self.temp_mc / 1000,
            self.temp_mc % 1000 / 100,
            self.max_temp_mc / 1000
        )?;
        match self.decision {
            ClockDecision::Keep => Ok(()),
            ClockDecision::Set { clamped: true, .. } => f.write_str(", clamped to the maximum"),
            ClockDecision::Set { .. } => Ok(()),
            ClockDecision::TooHot { wanted_hz } => {
                write!(f, ", not raised to {} MHz: too hot", mhz(wanted_hz))
            }
        }
    }
}

/// The firmware's throttling flags (the Raspberry Pi documentation of `vcgencmd get_throttled`):
/// bits 0-3 hold now (under-voltage, ARM frequency capped, throttled, soft temperature limit),
/// bits 16-19 the same since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Throttled(pub u32);

impl Throttled {
    /// The conditions, in the order of their bits.
    const NAMES: [&'static str; 4] = [
        "under-voltage",
        "ARM frequency capped",
        "throttled",
        "soft temperature limit",
    ];

    /// No flag set, now or since boot.
    pub fn none(self) -> bool {
        self.0 & 0x000f_000f == 0
    }

    /// A flag set now (bits 0-3).
    pub fn now(self) -> bool {
        self.0 & 0xf != 0
    }
}

impl fmt::Display for Throttled {
    /// "not throttled", or the flags in words: "under-voltage, throttled now; under-voltage
    /// since boot".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.none() {
            return f.write_str("not throttled");
        }
        let mut first = true;
        for (shift, when) in [(0, "now"), (16, "since boot")] {
            let bits = (self.0 >> shift) & 0xf;
            if bits == 0 {
                continue;
            }
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            let mut sep = "";
            for (i, name) in Self::NAMES.iter().enumerate() {
                if bits & (1 << i) != 0 {
                    write!(f, "{sep}{name}")?;
                    sep = ", ";
                }
            }
            write!(f, " {when}")?;
        }
        Ok(())
    }
}

impl<R: Regs> Mailbox<R> {
    /// A `[clock id, rate]` tag for clock `id`: the rate.
    fn rate(&mut self, tag: u32, id: u32) -> Result<u32, MailboxError> {
        Ok(self.call(tag, &[id, 0], 2)?[1])
    }

    /// The rate the firmware set for clock `id` in Hz (1 = EMMC, 3 = ARM, 12 = EMMC2); 0 when the
    /// firmware does not say.
    pub fn clock_rate(&mut self, id: u32) -> Result<u32, MailboxError> {
        self.rate(tags::GET_CLOCK_RATE, id)
    }

    /// Clock `id`'s rate as the firmware measures it, in Hz.
    pub fn measured_clock_rate(&mut self, id: u32) -> Result<u32, MailboxError> {
        self.rate(tags::GET_CLOCK_RATE_MEASURED, id)
    }

    /// The most clock `id` may be set to, in Hz.
    pub fn max_clock_rate(&mut self, id: u32) -> Result<u32, MailboxError> {
        self.rate(tags::GET_MAX_CLOCK_RATE, id)
    }

    /// Set clock `id` to `hz` (the firmware clamps it to what it allows) and let the firmware set
    /// turbo mode (and with it the voltage) as the rate needs: "skip setting turbo" = 0. Returns
    /// the rate the firmware answers; an answer of 0 is [`MailboxError::Refused`].
    pub fn set_clock_rate(&mut self, id: u32, hz: u32) -> Result<u32, MailboxError> {
        let tag = tags::SET_CLOCK_RATE;
        let r = self.call(tag, &[id, hz, 0], 2)?;
        if r[1] == 0 {
            return Err(MailboxError::Refused {
                tag,
                answer: [r[0], r[1]],
            });
        }
        Ok(r[1])
    }

    /// The SoC temperature in m°C.
    pub fn temperature(&mut self) -> Result<u32, MailboxError> {
        Ok(self.call(tags::GET_TEMPERATURE, &[0, 0], 2)?[1])
    }

    /// The SoC's maximum safe temperature in m°C.
    pub fn max_temperature(&mut self) -> Result<u32, MailboxError> {
        Ok(self.call(tags::GET_MAX_TEMPERATURE, &[0, 0], 2)?[1])
    }

    /// The firmware's throttling flags (GET_THROTTLED, as `vcgencmd get_throttled` prints them):
    /// [`Throttled`].
    pub fn throttled(&mut self) -> Result<Throttled, MailboxError> {
        Ok(Throttled(self.call(tags::GET_THROTTLED, &[0], 1)?[0]))
    }

    /// Clock `id`'s rate and where it came from: the set rate, else the measured rate (some
    /// firmware answers 0 for the set rate), else `default_hz`; a failed call counts as an answer
    /// of 0 (Circle's machineinfo.cpp falls back the same way).
    pub fn clock_or(&mut self, id: u32, default_hz: u32) -> (u32, ClockSource) {
        match self.clock_rate(id) {
            Ok(hz) if hz > 0 => return (hz, ClockSource::Firmware),
            _ => {}
        }
        match self.measured_clock_rate(id) {
            Ok(hz) if hz > 0 => (hz, ClockSource::Measured),
            _ => (default_hz, ClockSource::Default),
        }
    }

    /// The SD host's base clock (clock `id`: 1 = EMMC, 12 = EMMC2) and where it came from, else
    /// [`DEFAULT_SD_BASE_CLOCK_HZ`] ([`Mailbox::clock_or`]).
    pub fn sd_base_clock(&mut self, id: u32) -> (u32, ClockSource) {
        self.clock_or(id, DEFAULT_SD_BASE_CLOCK_HZ)
    }

    /// The VPU core clock ([`CORE_CLOCK_ID`]), which the mini UART divides, and where it came
    /// from, else `default_hz` (the board file's `[ring_uart] clock_hz`) ([`Mailbox::clock_or`]).
    /// It holds for the baud rate only while the firmware keeps it: `core_freq=250` in config.txt
    /// ([`crate::uart::mini`]).
    pub fn core_clock(&mut self, default_hz: u32) -> (u32, ClockSource) {
        self.clock_or(CORE_CLOCK_ID, default_hz)
    }

    /// Power `device` on and wait until it is (SET_POWER_STATE; [`SD_POWER_DEVICE`] = the SD
    /// card, as Circle's emmc.cpp does before bringing the card up). A missing device or a state
    /// left off is [`MailboxError::Refused`].
    pub fn power_on(&mut self, device: u32) -> Result<(), MailboxError> {
        let tag = tags::SET_POWER_STATE;
        let r = self.call(tag, &[device, POWER_ON | POWER_WAIT], 2)?;
        if r[1] & POWER_NO_DEVICE != 0 || r[1] & POWER_ON == 0 {
            return Err(MailboxError::Refused {
                tag,
                answer: [r[0], r[1]],
            });
        }
        Ok(())
    }

    /// Power `device` off and wait until it is (SET_POWER_STATE with the on bit clear): with
    /// [`Mailbox::power_on`], the card's power cycle. A missing device, or one left on, is
    /// [`MailboxError::Refused`].
    pub fn power_off(&mut self, device: u32) -> Result<(), MailboxError> {
        let tag = tags::SET_POWER_STATE;
        let r = self.call(tag, &[device, POWER_WAIT], 2)?;
        if r[1] & POWER_NO_DEVICE != 0 || r[1] & POWER_ON != 0 {
            return Err(MailboxError::Refused {
                tag,
                answer: [r[0], r[1]],
            });
        }
        Ok(())
    }

    /// Drive the firmware-owned GPIO `gpio` (128 + n: the Pi 4's expander) to `state`
    /// (SET_GPIO_STATE). The answer's first word is a status, 0 = done (Linux's
    /// gpio-raspberrypi-exp.c); anything else is [`MailboxError::Refused`].
    pub fn set_firmware_gpio(&mut self, gpio: u32, state: u32) -> Result<(), MailboxError> {
        let tag = tags::SET_GPIO_STATE;
        let r = self.call(tag, &[gpio, state], 2)?;
        if r[0] != 0 {
            return Err(MailboxError::Refused {
                tag,
                answer: [r[0], r[1]],
            });
        }
        Ok(())
    }

    /// Apply `policy` to the ARM clock (clock 3): read the current and maximum rates and the
    /// temperatures, [`decide`], and if it says so set the rate and read it back. A failed call is
    /// an error and leaves the clock as it was.
    pub fn raise_arm_clock(&mut self, policy: ArmClockPolicy) -> Result<ArmClock, MailboxError> {
        let before_hz = self.clock_rate(ARM_CLOCK_ID)?;
        let max_hz = self.max_clock_rate(ARM_CLOCK_ID)?;
        let temp_mc = self.temperature()?;
        let max_temp_mc = self.max_temperature()?;
        let decision = decide(policy, before_hz, max_hz, temp_mc, max_temp_mc);
        let after_hz = match decision {
            ClockDecision::Set { hz, .. } => {
                self.set_clock_rate(ARM_CLOCK_ID, hz)?;
                self.clock_rate(ARM_CLOCK_ID)?
            }
            ClockDecision::Keep | ClockDecision::TooHot { .. } => before_hz,
        };
        Ok(ArmClock {
            before_hz,
            after_hz,
            max_hz,
            temp_mc,
            max_temp_mc,
            decision,
        })
    }
}
