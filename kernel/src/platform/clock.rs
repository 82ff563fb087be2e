//! The ARM cores' clock on the Raspberry Pi: the firmware boots them below their maximum, and
//! `lmboot.txt`'s `arm_freq` (read after the card is mounted) says what to set through the
//! VideoCore mailbox (GET_MAX_CLOCK_RATE / SET_CLOCK_RATE, with a temperature check, as Circle's
//! CCPUThrottle does).

use super::mailbox;
use alloc::format;
use alloc::string::String;
use drivers::bcm2835::mailbox::ArmClockPolicy;
use runtime::config::ArmClock;

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
