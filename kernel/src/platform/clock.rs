//! The ARM cores' clock on the Raspberry Pi: the firmware boots them below their maximum, and
//! `lmboot.txt`'s `arm_freq` (read after the card is mounted) says what to set through the
//! VideoCore mailbox (GET_MAX_CLOCK_RATE / SET_CLOCK_RATE, with a temperature check, as Circle's
//! CCPUThrottle does).

use super::mailbox;
use alloc::format;
use alloc::string::String;
use drivers::bcm2835::mailbox::{Mailbox, MailboxError};
use runtime::config::ArmClock;

/// Set the clock as `policy` says; the line to print.
pub fn set_arm_clock(policy: ArmClock) -> String {
    match raise(&mut mailbox::open(), policy) {
        Some(Ok((before, after, milli_c))) => format!(
            "ARM clock: {} MHz -> {} MHz (arm_freq = {policy}); SoC at {}.{} C",
            before / 1_000_000,
            after / 1_000_000,
            milli_c / 1000,
            milli_c % 1000 / 100
        ),
        Some(Err(e)) => format!("warning: ARM clock left as the firmware set it: {e}"),
        None => format!(
            "ARM clock: left as the firmware set it (arm_freq = {policy} needs the mailbox's clock call)"
        ),
    }
}

/// The mailbox call: (rate before in Hz, rate after in Hz, temperature in milli-degrees C).
/// `None` while this build has no `Mailbox::raise_arm_clock` (the driver's clock call) to call.
fn raise(_mb: &mut Mailbox, _policy: ArmClock) -> Option<Result<(u32, u32, u32), MailboxError>> {
    None
}
