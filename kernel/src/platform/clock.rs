//! The ARM cores' clock on the Raspberry Pi: the firmware boots them below their maximum, and
//! `lmboot.txt`'s `arm_freq` (read after the card is mounted) says what to set through the
//! VideoCore mailbox (GET_MAX_CLOCK_RATE / SET_CLOCK_RATE, with a temperature check, as Circle's
//! CCPUThrottle does). And the clocks for the self-test: the counter and the cycle counter each
//! measured against another clock, with the firmware's figures.

use super::{mailbox, time};
use crate::arch::{Arch, Cpu};
use crate::board;
use alloc::format;
use alloc::string::String;
use drivers::bcm2835::mailbox::{ArmClockPolicy, ARM_CLOCK_ID, CORE_CLOCK_ID};
use drivers::mmio::{Mmio, Regs};
use runtime::config::ArmClock;
use runtime::platform::{Clocks, FirmwareClocks};

/// Set the clock as `policy` says; the line to print (the driver's report, or a warning naming
/// the mailbox call that failed: the clock is then left as the firmware set it). `None`: the
/// board has no mailbox, so no clock to set.
pub fn set_arm_clock(policy: ArmClock) -> Option<String> {
    let mut mb = mailbox::open()?;
    let p = match policy {
        ArmClock::Max => ArmClockPolicy::Max,
        ArmClock::Boot => ArmClockPolicy::Boot,
        ArmClock::Mhz(m) => ArmClockPolicy::Mhz(m),
    };
    Some(match mb.raise_arm_clock(p) {
        Ok(r) => format!("{r} (arm_freq = {policy})"),
        Err(e) => {
            format!("warning: ARM clock left as the firmware set it (arm_freq = {policy}): {e}")
        }
    })
}

/// Span of each rate measurement, µs of the clock measured against.
const SPAN_US: u64 = 20_000;
/// Most polls of a clock while waiting for a span to pass (a clock that stops gives no rate).
const POLL_LIMIT: u32 = 50_000_000;
/// Most reads of a counter pair per sample: the pair read closest together is kept.
const SAMPLES: usize = 5;

/// The clocks as the CPU, the device tree and the firmware state them, and the counter and the
/// cycle counter each measured against another clock, for the self-test (on core 0, before the
/// card is handed to another core: the mailbox has one user).
pub fn clocks() -> Clocks {
    let mut c = Clocks {
        counter_hz: Cpu::counter_hz(),
        dt_hz: time::stated_hz(),
        measured_hz: counter_against_systimer(),
        cycles_hz: cycles_against_counter(),
        ..Clocks::default()
    };
    if let Some(mut mb) = mailbox::open() {
        // A tag the firmware does not know (QEMU's: GET_CLOCK_RATE_MEASURED) leaves its figure
        // out; the check then compares what there is.
        let hz = |r: Result<u32, _>| r.ok().filter(|&h| h > 0);
        c.firmware = FirmwareClocks {
            arm_hz: [
                hz(mb.measured_clock_rate(ARM_CLOCK_ID)),
                hz(mb.clock_rate(ARM_CLOCK_ID)),
            ],
            core_hz: hz(mb.clock_rate(CORE_CLOCK_ID)),
            temp_mc: mb.temperature().ok(),
            throttled: mb.throttled().ok().map(|t| t.0),
        };
    }
    c
}

/// The system counter's rate in Hz over [`SPAN_US`] of the SoC's 1 MHz system timer (its low
/// word, CLO at +0x04); `None` without one, or if it does not advance.
fn counter_against_systimer() -> Option<u64> {
    let base = board::SYSTIMER_BASE?;
    // SAFETY: SYSTIMER_BASE is this board's system timer block, mapped as device memory; CLO is
    // only read, and nothing else in the kernel uses the block.
    let mut regs = unsafe { Mmio::new(base, 0x20) }.with_barrier(Cpu::io_barrier);
    regs.barrier();
    let timer = Clock {
        read: &mut || regs.read32(0x04) as u64,
        bits: 32,
    };
    let counter = Clock {
        read: &mut Cpu::counter,
        bits: 64,
    };
    let r = rate(timer, counter, 1_000_000, SPAN_US);
    regs.barrier();
    r
}

/// The cycle counter's rate in Hz over [`SPAN_US`] of the system counter; `None` without one,
/// or if it reads 0.
fn cycles_against_counter() -> Option<u64> {
    Cpu::cycles()?;
    let hz = time::hz();
    let counter = Clock {
        read: &mut Cpu::counter,
        bits: 64,
    };
    let cycles = Clock {
        read: &mut || Cpu::cycles().unwrap_or(0),
        bits: Cpu::CYCLE_COUNTER_BITS,
    };
    rate(counter, cycles, hz, hz * SPAN_US / 1_000_000)
}

/// A free-running counter `bits` wide.
struct Clock<'a> {
    read: &'a mut dyn FnMut() -> u64,
    bits: u32,
}

impl Clock<'_> {
    /// Ticks from `from` to `to`, across a wrap.
    fn since(&self, from: u64, to: u64) -> u64 {
        let mask = u64::MAX >> (64 - self.bits.clamp(1, 64));
        to.wrapping_sub(from) & mask
    }
}

/// The rate of clock `b` measured over `span` ticks of clock `a` (`a_hz` Hz); each end is an `a`
/// read with the `b` reads around it, the closest of [`SAMPLES`] pairs. `None` if either
/// stands still.
fn rate(mut a: Clock<'_>, b: Clock<'_>, a_hz: u64, span: u64) -> Option<u64> {
    let mut sample = |a: &mut Clock<'_>| {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..SAMPLES {
            let b0 = (b.read)();
            let t = (a.read)();
            let b1 = (b.read)();
            let width = b.since(b0, b1);
            if width < best.0 {
                best = (width, t, b0.wrapping_add(width / 2));
            }
        }
        (best.1, best.2)
    };
    let (a0, b0) = sample(&mut a);
    let mut polls = 0u32;
    loop {
        let now = (a.read)();
        if a.since(a0, now) >= span {
            break;
        }
        polls += 1;
        if polls >= POLL_LIMIT {
            return None;
        }
    }
    let (a1, b1) = sample(&mut a);
    let (da, db) = (a.since(a0, a1), b.since(b0, b1));
    (da > 0 && db > 0).then(|| (db as u128 * a_hz as u128 / da as u128) as u64)
}
