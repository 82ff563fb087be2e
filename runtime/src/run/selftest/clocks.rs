//! The clocks check: the system counter's frequency against the device tree's and against a
//! second clock (the Pi's 1 MHz system timer), the CPU's cycle counter against the ARM clock the
//! firmware measures, and the firmware's core clock, temperature and throttling flags.
//!
//! A comparison needs two figures from different sources; with none the verdict is a skip that
//! names what there was. The cycle counter is compared with the firmware's *measured* ARM clock
//! only: the rate it set is a request (throttling lowers the real one), and QEMU states 700 MHz
//! while its cycle counter runs at 1 GHz of its virtual time.

use super::Findings;
use crate::console::Out;
use crate::platform::{Clocks, Platform};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use drivers::bcm2835::mailbox::Throttled;

/// Largest disagreement between the counter's stated and measured frequency, in parts per
/// thousand (both come from crystals; a wrong CNTFRQ is off by far more, e.g. 19.2 against
/// 54 MHz).
const COUNTER_TOLERANCE: u64 = 10;
/// Largest disagreement between the cycle counter and the firmware's measured ARM clock, in
/// parts per thousand (the firmware samples its clock; ours spans a few milliseconds).
const ARM_TOLERANCE: u64 = 50;

/// What the comparisons found: the verdict ("ok", "fail", "skip") and the line after
/// `selftest: clocks `.
pub(super) fn judge(c: &Clocks) -> (&'static str, String) {
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    let mut notes = Vec::new();
    let mhz = |hz: u64| format!("{}.{:02} MHz", hz / 1_000_000, hz % 1_000_000 / 10_000);
    // The rate the kernel counts time with: the CPU's, else the device tree's.
    let used = c
        .counter_hz
        .map(|h| (h, "CNTFRQ"))
        .or(c.dt_hz.map(|h| (h, "the device tree's timebase-frequency")));
    if let (Some(cpu), Some(dt)) = (c.counter_hz, c.dt_hz) {
        if off(cpu, dt) > COUNTER_TOLERANCE {
            failed.push(format!(
                "the counter reports {} (CNTFRQ) but the device tree says {}",
                mhz(cpu),
                mhz(dt)
            ));
        } else {
            ok.push(format!(
                "counter {} (CNTFRQ) as the device tree says",
                mhz(cpu)
            ));
        }
    }
    match (used, c.measured_hz) {
        (Some((hz, from)), Some(m)) if off(hz, m) > COUNTER_TOLERANCE => failed.push(format!(
            "the counter is taken to run at {} ({from}) but runs at {} against the SoC's 1 MHz timer: times are off by {}",
            mhz(hz),
            mhz(m),
            ratio(hz, m)
        )),
        (Some((hz, from)), Some(m)) => ok.push(format!(
            "counter {} ({from}) runs at {} against the SoC's 1 MHz timer",
            mhz(hz),
            mhz(m)
        )),
        (Some((hz, from)), None) if c.counter_hz.is_none() || c.dt_hz.is_none() => {
            notes.push(format!("counter {} ({from}): no second clock to measure it against", mhz(hz)))
        }
        _ => {}
    }
    match (c.cycles_hz, c.firmware.arm_hz[0]) {
        (Some(cy), Some(arm)) if off(cy, arm as u64) > ARM_TOLERANCE => failed.push(format!(
            "the cycle counter runs at {} but the firmware measures the ARM clock at {}",
            mhz(cy),
            mhz(arm as u64)
        )),
        (Some(cy), Some(arm)) => ok.push(format!(
            "cycle counter {}, the firmware measures the ARM clock at {}",
            mhz(cy),
            mhz(arm as u64)
        )),
        (Some(cy), None) => {
            let set = c.firmware.arm_hz[1].map_or(String::new(), |s| {
                format!(" (it states {} as set)", mhz(s as u64))
            });
            notes.push(format!(
                "cycle counter {}: the firmware measures no ARM clock{set}",
                mhz(cy)
            ))
        }
        (None, Some(arm)) => notes.push(format!(
            "no cycle counter to check the firmware's ARM clock ({}) against",
            mhz(arm as u64)
        )),
        (None, None) => {}
    }
    let mut tail = String::new();
    if let Some(core) = c.firmware.core_hz {
        let _ = write!(tail, "; core clock {}", mhz(core as u64));
    }
    if let Some(t) = c.firmware.temp_mc {
        let _ = write!(tail, "; SoC {}.{} C", t / 1000, t % 1000 / 100);
    }
    if let Some(t) = c.firmware.throttled {
        let _ = write!(tail, "; {}", Throttled(t));
        if Throttled(t).now() {
            tail.push_str(" (the ARM clock is held down: check the supply and the cooling)");
        }
    }
    let join = |v: &[String]| v.join("; ");
    if !failed.is_empty() {
        let mut line = format!("FAILED: {}", join(&failed));
        for more in ok.iter().chain(&notes) {
            let _ = write!(line, "; {more}");
        }
        return ("fail", line + &tail);
    }
    if !ok.is_empty() {
        let mut line = format!("ok: {}", join(&ok));
        for more in &notes {
            let _ = write!(line, "; {more}");
        }
        return ("ok", line + &tail);
    }
    if notes.is_empty() {
        notes.push("no counter frequency to check".into());
    }
    ("skip", format!("skip: {}{tail}", join(&notes)))
}

/// How far `a` is from `b`, in parts per thousand of `b`.
fn off(a: u64, b: u64) -> u64 {
    (a.abs_diff(b) as u128 * 1000 / b.max(1) as u128) as u64
}

/// `a / b` as "2.81x".
fn ratio(a: u64, b: u64) -> String {
    let r = a as u128 * 100 / b.max(1) as u128;
    format!("{}.{:02}x", r / 100, r % 100)
}

/// The clocks check: [`judge`] on what the platform reports, its line, the report's `cpu`,
/// `cntfrq`, `arm`, `core`, `temp` and `throttled` fields.
pub(super) fn check<P: Platform + ?Sized>(platform: &P, found: &mut Findings, out: &mut Out<'_>) {
    if let Some(cpu) = platform.cpu_id() {
        found.field("cpu", cpu);
    }
    let Some(c) = platform.clocks() else {
        let _ = writeln!(
            out,
            "selftest: clocks skip: this platform reports no clocks"
        );
        found.verdicts.push(("clocks", "skip"));
        return;
    };
    if let Some(hz) = c.counter_hz.or(c.dt_hz) {
        found.field("cntfrq", hz);
    }
    if let Some(hz) = c.firmware.arm_hz[0].or(c.firmware.arm_hz[1]) {
        found.field("arm", hz);
    }
    if let Some(hz) = c.firmware.core_hz {
        found.field("core", hz);
    }
    if let Some(t) = c.firmware.temp_mc {
        found.field("temp", t);
    }
    if let Some(t) = c.firmware.throttled {
        found.field("throttled", format_args!("{t:x}"));
    }
    let (verdict, line) = judge(&c);
    let _ = writeln!(out, "selftest: clocks {line}");
    found.verdicts.push(("clocks", verdict));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::FirmwareClocks;

    const MHZ: u64 = 1_000_000;

    /// A Pi 3 as its firmware and CPU report it.
    fn pi3() -> Clocks {
        Clocks {
            counter_hz: Some(19_200_000),
            measured_hz: Some(19_200_040),
            cycles_hz: Some(1_199_800_000),
            firmware: FirmwareClocks {
                arm_hz: [Some(1_200_000_000); 2],
                core_hz: Some(400_000_000),
                temp_mc: Some(45_300),
                throttled: Some(0),
            },
            ..Clocks::default()
        }
    }

    #[test]
    fn a_pi_whose_clocks_agree_is_ok() {
        let (v, line) = judge(&pi3());
        assert_eq!(v, "ok");
        assert_eq!(
            line,
            "ok: counter 19.20 MHz (CNTFRQ) runs at 19.20 MHz against the SoC's 1 MHz timer; \
             cycle counter 1199.80 MHz, the firmware measures the ARM clock at 1200.00 MHz; \
             core clock 400.00 MHz; SoC 45.3 C; not throttled"
        );
    }

    /// `judge` on `c` gives `verdict` and a line starting with `start`.
    fn judged(c: Clocks, verdict: &str, start: &str) -> String {
        let (v, line) = judge(&c);
        assert_eq!(v, verdict, "{line}");
        assert!(line.starts_with(start), "{line}");
        line
    }

    #[test]
    fn a_wrong_cntfrq_fails_naming_both_figures() {
        // A Pi 4's 54 MHz counter with a Pi 3's CNTFRQ (a wrong armstub).
        let wrong = Clocks {
            measured_hz: Some(54 * MHZ),
            ..pi3()
        };
        judged(
            wrong,
            "fail",
            "FAILED: the counter is taken to run at 19.20 MHz (CNTFRQ) but runs at 54.00 MHz \
             against the SoC's 1 MHz timer: times are off by 0.35x; cycle counter",
        );
        // 1 % apart is still the same crystal; 1.3 % is not.
        for (hz, verdict) in [(19_392_000, "ok"), (19_450_000, "fail")] {
            let c = Clocks {
                measured_hz: Some(hz),
                ..pi3()
            };
            assert_eq!(judge(&c).0, verdict, "{hz}");
        }
        // The device tree disagreeing with CNTFRQ.
        let dt = Clocks {
            dt_hz: Some(54 * MHZ),
            measured_hz: None,
            ..pi3()
        };
        judged(
            dt,
            "fail",
            "FAILED: the counter reports 19.20 MHz (CNTFRQ) but the device tree says 54.00 MHz",
        );
    }

    #[test]
    fn a_cycle_counter_off_the_measured_arm_clock_fails() {
        let slow = Clocks {
            cycles_hz: Some(600 * MHZ),
            ..pi3()
        };
        judged(slow, "fail", "FAILED: the cycle counter runs at 600.00 MHz but the firmware measures the ARM clock at 1200.00 MHz; counter");
    }

    #[test]
    fn qemus_raspi_compares_the_counter_only() {
        // QEMU: no measured ARM clock (the tag is unknown), 700 MHz stated, a 1 GHz cycle
        // counter; its system timer and counter share the virtual clock.
        let qemu = Clocks {
            counter_hz: Some(62_500_000),
            measured_hz: Some(62_500_100),
            cycles_hz: Some(1_000 * MHZ),
            firmware: FirmwareClocks {
                arm_hz: [None, Some(700_000_000)],
                core_hz: Some(350_000_000),
                temp_mc: Some(25_000),
                throttled: Some(0),
            },
            ..pi3()
        };
        let line = judged(qemu, "ok", "ok: ");
        assert_eq!(
            line,
            "ok: counter 62.50 MHz (CNTFRQ) runs at 62.50 MHz against the SoC's 1 MHz timer; \
             cycle counter 1000.00 MHz: the firmware measures no ARM clock (it states 700.00 MHz \
             as set); core clock 350.00 MHz; SoC 25.0 C; not throttled"
        );
    }

    #[test]
    fn nothing_to_compare_is_a_skip_naming_what_there_was() {
        let virt = Clocks {
            counter_hz: Some(62_500_000),
            cycles_hz: Some(1_000 * MHZ),
            ..Clocks::default()
        };
        assert_eq!(
            judge(&virt),
            (
                "skip",
                "skip: counter 62.50 MHz (CNTFRQ): no second clock to measure it against; \
                 cycle counter 1000.00 MHz: the firmware measures no ARM clock"
                    .into()
            )
        );
        let riscv = Clocks {
            dt_hz: Some(10 * MHZ),
            ..Clocks::default()
        };
        assert_eq!(
            judge(&riscv).1,
            "skip: counter 10.00 MHz (the device tree's timebase-frequency): no second clock to measure it against"
        );
        assert_eq!(
            judge(&Clocks::default()),
            ("skip", "skip: no counter frequency to check".into())
        );
    }

    #[test]
    fn throttling_is_said_plainly() {
        let mut hot = pi3();
        hot.firmware.throttled = Some(0x5_0005);
        let line = judged(hot, "ok", "ok: ");
        assert!(
            line.ends_with("; under-voltage, throttled now; under-voltage, throttled since boot (the ARM clock is held down: check the supply and the cooling)"),
            "{line}"
        );
    }
}
