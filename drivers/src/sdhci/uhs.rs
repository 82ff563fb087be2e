//! The SDHCI side of the bus speed modes: the clock and timing of each mode (High Speed, and the
//! UHS-I modes DDR50, SDR50 and SDR104 on SDHCI v3 hosts), the switch to 1.8 V signalling after
//! CMD11, tuning (CMD19), and the card's power cycle back to 3.3 V. What the board does besides
//! the controller (the I/O rail's regulator, the card's power) is the [`Slot`] it gives.
//!
//! The signal voltage switch follows the SD Host Controller Simplified Specification 3.00,
//! 3.6.1: after the card answered CMD11, stop the SD clock; DAT[3:0] must read 0000 (the card
//! holds them); set host control 2's 1.8 V enable and switch the slot's regulator; wait 5 ms; the
//! enable must still be set; start the SD clock; wait 1 ms; DAT[3:0] must read 1111. Any
//! deviation is a [`Cause::VoltageSwitch`]; the shared code then power-cycles the card
//! ([`Slot::power_cycle`]) and identifies it again at 3.3 V.
//!
//! Tuning, as Linux's `sdhci_execute_tuning` does it: set execute tuning, send CMD19 (a 64-byte
//! block the host compares itself: buffer read ready comes, the data are not read) up to 40 times
//! until the host clears execute tuning; success when it then has the sampling clock selected.

use super::*;

/// Wait after the 1.8 V enable (and the regulator) before the clock runs again.
pub const SIGNAL_SETTLE_US: u32 = 5_000;
/// Wait after the clock runs again before DAT\[3:0\] must be high.
pub const SIGNAL_CLOCK_US: u32 = 1_000;
/// The card's power is off this long in a power cycle.
pub const POWER_OFF_US: u32 = 10_000;
/// CMD19 blocks at most per tuning (the SD spec's 40).
pub const TUNING_TRIES: u32 = 40;

/// What the board does for the card slot beyond the controller. The Pi 4's slot: the I/O rail is
/// a GPIO regulator on the firmware's expander line 4 (Linux's `sd_io_1v8_reg`), the card's
/// power a firmware power domain.
pub trait Slot {
    /// `false` for [`NoSlot`]: the I/O rail cannot go to 1.8 V, no UHS-I.
    const UHS: bool = true;
    /// Switch the I/O rail to 1.8 V (`true`) or 3.3 V; `false` if the board refused.
    fn set_signal_1v8(&mut self, on: bool) -> bool;
    /// Cut the card's power, wait `off_us`, power it again (at 3.3 V signalling).
    fn power_cycle(&mut self, off_us: u32);
}

/// A slot with a fixed 3.3 V rail and no power switch the driver can reach: no UHS-I.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoSlot;

impl Slot for NoSlot {
    const UHS: bool = false;

    fn set_signal_1v8(&mut self, _on: bool) -> bool {
        false
    }

    fn power_cycle(&mut self, _off_us: u32) {}
}

/// The next slower mode's clock limit, that `mode` must beat to be worth running.
fn clock_to_beat(mode: BusMode) -> u32 {
    match mode {
        BusMode::Sdr104 => BusMode::Sdr50.max_clock_hz(),
        BusMode::DefaultSpeed => 0,
        _ => DATA_CLOCK_MAX_HZ,
    }
}

impl<R: Regs, C: Clock, S: Slot, D: DmaMemory> Sdhci<R, C, S, D> {
    /// Can this controller run `mode` at all (its capabilities, the slot)?
    fn host_runs(&mut self, mode: BusMode) -> bool {
        if !mode.is_uhs() {
            return true;
        }
        let caps1 = self.regs.read32(CAPABILITIES_1);
        let bit = match mode {
            BusMode::Sdr50 => CAPS1_SDR50,
            BusMode::Sdr104 => CAPS1_SDR104,
            _ => CAPS1_DDR50,
        };
        self.info.host_version >= SPEC_V3 && caps1 & bit != 0
    }

    /// The divider for `mode`: the fastest clock at or below its limit from the base clock.
    pub(super) fn mode_divider(&self, mode: BusMode) -> Option<Divider> {
        let (base, version) = (self.info.base_clock_hz, self.info.host_version);
        match mode {
            BusMode::DefaultSpeed => clock_divider(base, self.default_hz, version),
            _ => clock_divider(base, mode.max_clock_hz(), version),
        }
    }

    /// [`Host::mode_clock`]: the mode's clock, if the host runs it and it beats the mode below.
    pub(super) fn mode_clock_for(&mut self, mode: BusMode) -> Result<u32, SpeedNote> {
        if !self.host_runs(mode) {
            return Err(SpeedNote::HostLacks { mode });
        }
        let best = self.mode_divider(mode).map_or(0, |d| d.hz);
        let beat = match mode {
            BusMode::HighSpeed => self.default_hz,
            m => clock_to_beat(m),
        };
        if best <= beat {
            return Err(SpeedNote::HostClock {
                base_hz: self.info.base_clock_hz,
                best_hz: best,
            });
        }
        Ok(best)
    }

    /// [`Host::enter_mode`]: the clock off, host control 1's high-speed enable (above Default
    /// Speed, unless [`Config::high_speed_bit`] is off), host control 2's UHS mode at 1.8 V (and
    /// at 3.3 V where [`Variant::uhs_mode_at_3v3`]: SDR25 for High Speed), then
    /// the mode's clock (Linux's order: timing, then clock).
    pub(super) fn enter_mode_at(&mut self, mode: BusMode) -> Result<u32, Cause> {
        let d = self.mode_divider(mode).ok_or(Cause::Divider {
            base_hz: self.info.base_clock_hz,
            target_hz: mode.max_clock_hz(),
            host_version: self.info.host_version,
        })?;
        let cc = self.regs.read32(CLOCK_CONTROL) & 0x000F_FFFF;
        self.write(CLOCK_CONTROL, cc & !CC_SD_EN);
        self.sd_clock_hz = 0;
        let hc = self.regs.read32(HOST_CONTROL) & 0xFFFF & !HC_HIGH_SPEED;
        let hs = mode > BusMode::DefaultSpeed && self.config.high_speed_bit;
        self.write(HOST_CONTROL, if hs { hc | HC_HIGH_SPEED } else { hc });
        if self.info.signal_1v8 || self.config.variant.uhs_mode_at_3v3() {
            let hc2 = self.host_control2() & !HC2_UHS_MODE_MASK;
            self.write(
                AUTO_CMD_ERR_HOST_CONTROL2,
                hc2 | (mode.function() as u32) << HC2_UHS_MODE_SHIFT,
            );
        }
        self.set_clock(d)?;
        Ok(d.hz)
    }

    /// Host control 2, in its place in the 32-bit word (the low half, auto CMD error status, is
    /// read-only and written as 0).
    fn host_control2(&mut self) -> u32 {
        self.regs.read32(AUTO_CMD_ERR_HOST_CONTROL2) & 0xFFFF_0000
    }

    /// DAT[3:0] as the present state reads them.
    fn dat_levels(&mut self) -> u8 {
        ((self.regs.read32(PRESENT_STATE) >> PS_DAT_LEVEL_SHIFT) & 0xF) as u8
    }

    /// [`Host::can_signal_1v8`]: a v3 host that reports 1.8 V, a slot with a 1.8 V rail, and a
    /// limit that asks for UHS-I.
    pub(super) fn uhs_possible(&mut self) -> bool {
        S::UHS
            && self.speed.limit.is_uhs()
            && self.info.host_version >= SPEC_V3
            && self.regs.read32(CAPABILITIES) & CAPS_VOLTAGE_1V8 != 0
    }

    /// [`Host::switch_to_1v8`]: the host's side of the signal voltage switch (module docs).
    pub(super) fn signal_1v8(&mut self) -> Result<(), Cause> {
        let fail = |stage, dat| Cause::VoltageSwitch { stage, dat };
        let cc = self.regs.read32(CLOCK_CONTROL) & 0x000F_FFFF;
        self.write(CLOCK_CONTROL, cc & !CC_SD_EN);
        let hz = core::mem::replace(&mut self.sd_clock_hz, 0);
        let dat = self.dat_levels();
        if dat != 0 {
            return Err(fail("the card did not hold DAT[3:0] low after CMD11", dat));
        }
        let hc2 = self.host_control2();
        self.write(AUTO_CMD_ERR_HOST_CONTROL2, hc2 | HC2_SIGNAL_1V8);
        if !self.slot.set_signal_1v8(true) {
            return Err(fail(
                "the board refused to switch the I/O rail to 1.8 V",
                dat,
            ));
        }
        self.clock.delay_us(SIGNAL_SETTLE_US);
        if self.host_control2() & HC2_SIGNAL_1V8 == 0 {
            return Err(fail("the host did not keep its 1.8 V enable", dat));
        }
        self.write(CLOCK_CONTROL, cc | CC_SD_EN);
        self.sd_clock_hz = hz;
        self.clock.delay_us(SIGNAL_CLOCK_US);
        let dat = self.dat_levels();
        if dat != 0xF {
            return Err(fail(
                "the card did not release DAT[3:0] once the clock ran at 1.8 V",
                dat,
            ));
        }
        Ok(())
    }

    /// [`Host::power_cycle`]: the rail back to 3.3 V, the card's power cut and restored, the
    /// controller reset and powered at 3.3 V with the identification clock.
    pub(super) fn cycle_power(&mut self) -> Result<(), Cause> {
        let hc2 = self.host_control2() & !(HC2_SIGNAL_1V8 | HC2_UHS_MODE_MASK);
        self.write(AUTO_CMD_ERR_HOST_CONTROL2, hc2);
        self.write(HOST_CONTROL, 0);
        self.info.signal_1v8 = false;
        self.init_controller().map_err(|(_, c)| c)
    }

    /// Before the controller is reset for an identification: a slot configured for UHS-I is put
    /// back to 3.3 V with the card's power cycled (a card left at 1.8 V, by a failed switch, an
    /// earlier identification or whatever ran before, answers at 3.3 V only after that).
    pub(super) fn slot_to_3v3(&mut self) {
        if S::UHS && self.config.max_bus_mode.is_uhs() {
            self.slot.set_signal_1v8(false);
            self.slot.power_cycle(POWER_OFF_US);
        }
    }

    /// [`Host::tune`]: CMD19 until the host clears execute tuning (module docs).
    pub(super) fn tune_sampling(&mut self) -> Result<(), Cause> {
        let hc2 = self.host_control2() & !HC2_SAMPLING_CLOCK;
        self.write(AUTO_CMD_ERR_HOST_CONTROL2, hc2 | HC2_EXECUTE_TUNING);
        let xfer = Xfer::register(sd::SWITCH_STATUS_BYTES);
        let mut last = 0;
        for tries in 1..=TUNING_TRIES {
            self.issue(sd::SEND_TUNING_BLOCK, 0, Some(xfer))?;
            if let Err(cause) = self.wait_int(
                INT_BUFFER_READ_READY,
                BLOCK_TIMEOUT_US,
                Wait::BufferReady(0),
            ) {
                self.reset_after(cause, true);
                return Err(cause);
            }
            self.write(INT_STATUS, INT_BUFFER_READ_READY);
            last = self.host_control2();
            if last & HC2_EXECUTE_TUNING == 0 {
                if last & HC2_SAMPLING_CLOCK != 0 {
                    return Ok(());
                }
                return Err(Cause::Tuning {
                    tries,
                    host_control2: last >> 16,
                });
            }
        }
        // Give up: execute tuning off, the fixed sampling clock.
        self.write(
            AUTO_CMD_ERR_HOST_CONTROL2,
            last & !(HC2_EXECUTE_TUNING | HC2_SAMPLING_CLOCK),
        );
        let _ = self.reset(SRST_CMD);
        let _ = self.reset(SRST_DAT);
        Err(Cause::Tuning {
            tries: TUNING_TRIES,
            host_control2: last >> 16,
        })
    }

    /// Does `mode` need tuning here: SDR104, and SDR50 when the capabilities say so.
    pub(super) fn tuning_needed(&mut self, mode: BusMode) -> bool {
        mode.needs_tuning()
            || (mode == BusMode::Sdr50
                && self.regs.read32(CAPABILITIES_1) & CAPS1_TUNING_SDR50 != 0)
    }
}
