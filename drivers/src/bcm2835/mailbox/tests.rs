//! The mailbox on the host: the buffer encoding and decoding as pure functions, then the register
//! protocol and the clock, power and GPIO calls against the fake firmware in `fake`.

use super::fake::{events, mailbox, Event, Firmware};
use super::*;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

const EMMC: u32 = 1;
const EMMC2: u32 = 12;
const MHZ: u32 = 1_000_000;

// ---- the buffer, pure ----

#[test]
fn a_request_is_laid_out_as_the_firmware_reads_it() {
    let mut b = [0xdead_beef; BUFFER_WORDS];
    let n = encode(&mut b, tags::SET_CLOCK_RATE, &[3, 1_200 * MHZ, 0], 2).unwrap();
    // size, code, tag, value size, indicator, 3 values, end tag.
    assert_eq!(n, 9);
    assert_eq!(
        b[..9],
        [36, 0, tags::SET_CLOCK_RATE, 12, 0, 3, 1_200 * MHZ, 0, 0]
    );
    assert!(b[9..].iter().all(|&w| w == 0), "the rest cleared");
    // The value buffer is as large as the larger of request and answer.
    let n = encode(&mut b, tags::GET_ARM_MEMORY, &[], 2).unwrap();
    assert_eq!((n, b[0], b[3]), (8, 32, 8));
    let e = encode(&mut b, tags::SET_GPIO_STATE, &[0; 30], 2).unwrap_err();
    assert!(
        matches!(e, MailboxError::TooLarge { words: 36, .. }),
        "{e:?}"
    );
}

#[test]
fn answers_are_checked_before_their_values_are_used() {
    let tag = tags::GET_CLOCK_RATE;
    let mut b = [0; BUFFER_WORDS];
    encode(&mut b, tag, &[EMMC, 0], 2).unwrap();
    let mut ok = b;
    ok[1] = CODE_SUCCESS;
    ok[4] = (1 << 31) | 8;
    ok[6] = 250 * MHZ;
    assert_eq!(decode(&ok, tag, 2).unwrap()[..2], [EMMC, 250 * MHZ]);

    let mut parse_error = ok;
    parse_error[1] = 0x8000_0001;
    let e = decode(&parse_error, tag, 2).unwrap_err();
    assert_eq!(
        e,
        MailboxError::Failed {
            tag,
            code: 0x8000_0001
        }
    );
    assert!(e.to_string().contains("GET_CLOCK_RATE (0x30002)"), "{e}");

    let mut untouched = ok;
    untouched[4] = 0;
    let e = decode(&untouched, tag, 2).unwrap_err();
    assert!(matches!(e, MailboxError::NotProcessed { .. }), "{e:?}");

    // QEMU answers a tag it does not implement with the response bit and 0 bytes.
    let mut unknown = ok;
    unknown[4] = 1 << 31;
    let e = decode(&unknown, tag, 2).unwrap_err();
    assert_eq!(
        e,
        MailboxError::Short {
            tag,
            len: 0,
            want: 8
        }
    );
    assert!(e.to_string().contains("does not implement"), "{e}");
}

// ---- the register protocol ----

#[test]
fn the_buffer_is_cleaned_before_the_post_and_invalidated_after_the_answer() {
    let (mut mb, fw) = mailbox(Firmware {
        clocks: [(EMMC, 250 * MHZ)].into(),
        full_polls: 3,
        ..Firmware::default()
    });
    assert_eq!(mb.clock_rate(EMMC), Ok(250 * MHZ));
    let addr = mb.buffer.addr();
    assert_eq!(addr % 64, 0, "64-byte aligned");
    let lines = (addr, BUFFER_BYTES);
    assert_eq!(
        events(),
        vec![
            Event::Clean(lines.0, lines.1),
            Event::Barrier,
            Event::Posted,
            Event::Answered,
            Event::Barrier,
            Event::Invalidate(lines.0, lines.1),
        ]
    );
    let fw = fw.borrow();
    assert!(fw.violations.is_empty(), "{:?}", fw.violations);
    assert_eq!(fw.log, vec![(tags::GET_CLOCK_RATE, vec![EMMC, 0])]);
}

#[test]
fn the_write_waits_while_mail1_is_full() {
    // The fake flags a write to a full MAIL1: the driver must poll MAIL1_STA (0x38), not MAIL0's.
    let (mut mb, fw) = mailbox(Firmware {
        full_polls: 50,
        ..Firmware::default()
    });
    assert_eq!(mb.board_revision(), Ok(0x00a0_2082));
    assert_eq!(mb.arm_memory(), Ok((0, 0x3b40_0000)));
    assert!(
        fw.borrow().violations.is_empty(),
        "{:?}",
        fw.borrow().violations
    );

    // A MAIL1 that never empties: bounded.
    let (mb, _) = mailbox(Firmware {
        full_polls: u32::MAX,
        ..Firmware::default()
    });
    let e = mb.with_spin_limit(1000).board_revision().unwrap_err();
    let waiting = Waiting::WriteRoom;
    assert_eq!(
        e,
        MailboxError::Timeout {
            tag: tags::GET_BOARD_REVISION,
            waiting
        }
    );
}

#[test]
fn a_firmware_that_never_answers_times_out() {
    let (mb, fw) = mailbox(Firmware {
        silent: true,
        ..Firmware::default()
    });
    let mut mb = mb.with_spin_limit(10_000);
    let e = mb.clock_rate(EMMC2).unwrap_err();
    let waiting = Waiting::Answer;
    assert_eq!(
        e,
        MailboxError::Timeout {
            tag: tags::GET_CLOCK_RATE,
            waiting
        }
    );
    assert!(e.to_string().contains("no answer"), "{e}");
    // Invalidated even so, and the default limit ends too.
    assert_eq!(
        events().last(),
        Some(&Event::Invalidate(mb.buffer.addr(), BUFFER_BYTES))
    );
    let mut mb = mb.with_spin_limit(SPIN_LIMIT);
    assert!(matches!(
        mb.temperature(),
        Err(MailboxError::Timeout { .. })
    ));
    assert!(fw.borrow().violations.is_empty());
}

#[test]
fn a_failure_code_is_an_error() {
    let (mut mb, _) = mailbox(Firmware {
        code: 0x8000_0001,
        clocks: [(EMMC, 250 * MHZ)].into(),
        ..Firmware::default()
    });
    let e = mb.clock_rate(EMMC).unwrap_err();
    assert_eq!(
        e,
        MailboxError::Failed {
            tag: tags::GET_CLOCK_RATE,
            code: 0x8000_0001
        }
    );
    // The SD clock still gets a rate, marked as the default.
    assert_eq!(
        mb.sd_base_clock(EMMC),
        (DEFAULT_SD_BASE_CLOCK_HZ, ClockSource::Default)
    );
}

// ---- the SD base clock ----

#[test]
fn sd_base_clock_falls_back_to_the_measured_rate_then_100_mhz() {
    let (mut mb, fw) = mailbox(Firmware {
        clocks: [(EMMC2, 0)].into(),
        measured: [(EMMC2, 99_999_871)].into(),
        ..Firmware::default()
    });
    assert_eq!(mb.sd_base_clock(EMMC2), (99_999_871, ClockSource::Measured));
    let asked: Vec<u32> = fw.borrow().log.iter().map(|(t, _)| *t).collect();
    assert_eq!(asked, [tags::GET_CLOCK_RATE, tags::GET_CLOCK_RATE_MEASURED]);

    assert_eq!(
        mb.sd_base_clock(EMMC),
        (DEFAULT_SD_BASE_CLOCK_HZ, ClockSource::Default)
    );
    fw.borrow_mut().clocks.insert(EMMC, 250 * MHZ);
    assert_eq!(mb.sd_base_clock(EMMC), (250 * MHZ, ClockSource::Firmware));
    // A firmware without the measured tag (QEMU) still ends at the default.
    fw.borrow_mut().unknown.push(tags::GET_CLOCK_RATE_MEASURED);
    assert_eq!(
        mb.sd_base_clock(EMMC2),
        (DEFAULT_SD_BASE_CLOCK_HZ, ClockSource::Default)
    );
}

// ---- the core clock (the mini UART's) ----

#[test]
fn core_clock_asks_for_clock_4_then_falls_back_to_the_board_file() {
    let fallback = 250 * MHZ;
    let (mut mb, fw) = mailbox(Firmware {
        clocks: [(CORE_CLOCK_ID, 400 * MHZ)].into(),
        ..Firmware::default()
    });
    // A Zero 2 W whose config.txt does not fix core_freq: the firmware's rate, not the board's.
    assert_eq!(mb.core_clock(fallback), (400 * MHZ, ClockSource::Firmware));
    assert_eq!(fw.borrow().log[0], (tags::GET_CLOCK_RATE, vec![4, 0]));
    fw.borrow_mut().clocks.clear();
    fw.borrow_mut().measured.insert(CORE_CLOCK_ID, 249_999_000);
    assert_eq!(
        mb.core_clock(fallback),
        (249_999_000, ClockSource::Measured)
    );
    fw.borrow_mut().code = 0x8000_0001;
    assert_eq!(mb.core_clock(fallback), (fallback, ClockSource::Default));
    assert!(fw.borrow().violations.is_empty());
}

// ---- power and the Pi 4's 1.8 V select ----

#[test]
fn power_and_gpio_report_refusals() {
    let (mut mb, fw) = mailbox(Firmware::default());
    assert_eq!(mb.power_on(SD_POWER_DEVICE), Ok(()));
    assert_eq!(mb.set_firmware_gpio(128 + 4, 0), Ok(()));
    assert_eq!(fw.borrow().powered, [0]);
    assert_eq!(mb.power_off(SD_POWER_DEVICE), Ok(()));
    assert_eq!(
        fw.borrow().log.last().unwrap(),
        &(tags::SET_POWER_STATE, vec![0, 2]),
        "off + wait"
    );
    assert_eq!(fw.borrow().gpios.get(&132), Some(&0));
    assert_eq!(
        fw.borrow().log[0],
        (tags::SET_POWER_STATE, vec![0, 3]),
        "on + wait"
    );

    fw.borrow_mut().no_power_device = true;
    fw.borrow_mut().gpio_status = 1;
    let e = mb.power_on(SD_POWER_DEVICE).unwrap_err();
    assert!(
        matches!(e, MailboxError::Refused { answer: [0, 2], .. }),
        "{e:?}"
    );
    let e = mb.set_firmware_gpio(132, 0).unwrap_err();
    assert!(
        matches!(e, MailboxError::Refused { answer: [1, 0], .. }),
        "{e:?}"
    );
    fw.borrow_mut().unknown.push(tags::SET_GPIO_STATE);
    let e = mb.set_firmware_gpio(132, 0).unwrap_err();
    assert!(matches!(e, MailboxError::Short { len: 0, .. }), "{e:?}");
}

// ---- the ARM clock ----

#[test]
fn the_policy_decision() {
    use ArmClockPolicy::*;
    let (boot, max, hot) = (600 * MHZ, 1_400 * MHZ, 85_000);
    let d = |p, t| decide(p, boot, max, t, hot);
    assert_eq!(d(Boot, 40_000), ClockDecision::Keep);
    assert_eq!(
        d(Max, 40_000),
        ClockDecision::Set {
            hz: max,
            clamped: false
        }
    );
    assert_eq!(
        d(Mhz(1_000), 40_000),
        ClockDecision::Set {
            hz: 1_000 * MHZ,
            clamped: false
        }
    );
    assert_eq!(
        d(Mhz(2_000), 40_000),
        ClockDecision::Set {
            hz: max,
            clamped: true
        }
    );
    assert_eq!(d(Mhz(600), 40_000), ClockDecision::Keep, "already there");
    assert_eq!(d(Mhz(0), 40_000), ClockDecision::Keep);
    // Within 5 C of the maximum: no raise, but lowering is still allowed.
    assert_eq!(d(Max, 80_000), ClockDecision::TooHot { wanted_hz: max });
    assert_eq!(
        d(Max, 79_999),
        ClockDecision::Set {
            hz: max,
            clamped: false
        }
    );
    let lower = decide(Mhz(600), max, max, 84_000, hot);
    assert_eq!(
        lower,
        ClockDecision::Set {
            hz: 600 * MHZ,
            clamped: false
        }
    );
}

fn pi3_firmware(temp_mc: u32) -> Firmware {
    Firmware {
        clocks: [(ARM_CLOCK_ID, 600 * MHZ)].into(),
        max: [(ARM_CLOCK_ID, 1_200 * MHZ)].into(),
        temp_mc,
        max_temp_mc: 85_000,
        ..Firmware::default()
    }
}

#[test]
fn raise_arm_clock_sets_and_reads_back() {
    let (mut mb, fw) = mailbox(pi3_firmware(45_300));
    let r = mb.raise_arm_clock(ArmClockPolicy::Max).unwrap();
    assert_eq!(
        (r.before_hz, r.after_hz, r.max_hz),
        (600 * MHZ, 1_200 * MHZ, 1_200 * MHZ)
    );
    assert_eq!((r.temp_mc, r.max_temp_mc), (45_300, 85_000));
    let set = fw
        .borrow()
        .log
        .iter()
        .find(|(t, _)| *t == tags::SET_CLOCK_RATE)
        .cloned();
    assert_eq!(
        set,
        Some((tags::SET_CLOCK_RATE, vec![3, 1_200 * MHZ, 0])),
        "skip turbo = 0"
    );
    assert_eq!(
        r.to_string(),
        "ARM clock: 600 -> 1200 MHz (max 1200 MHz), SoC 45.3 C (max 85 C)"
    );

    let (mut mb, _) = mailbox(pi3_firmware(45_000));
    let r = mb.raise_arm_clock(ArmClockPolicy::Mhz(5_000)).unwrap();
    assert_eq!(r.after_hz, 1_200 * MHZ);
    assert!(r.to_string().ends_with("clamped to the maximum"), "{r}");

    let (mut mb, fw) = mailbox(pi3_firmware(45_000));
    let r = mb.raise_arm_clock(ArmClockPolicy::Boot).unwrap();
    assert_eq!((r.after_hz, r.decision), (600 * MHZ, ClockDecision::Keep));
    assert!(fw
        .borrow()
        .log
        .iter()
        .all(|(t, _)| *t != tags::SET_CLOCK_RATE));
}

#[test]
fn raise_arm_clock_stays_when_hot_or_when_the_firmware_fails() {
    let (mut mb, fw) = mailbox(pi3_firmware(81_000));
    let r = mb.raise_arm_clock(ArmClockPolicy::Max).unwrap();
    assert_eq!(
        r.decision,
        ClockDecision::TooHot {
            wanted_hz: 1_200 * MHZ
        }
    );
    assert_eq!(r.after_hz, 600 * MHZ);
    assert!(r.to_string().contains("too hot"), "{r}");
    assert!(fw
        .borrow()
        .log
        .iter()
        .all(|(t, _)| *t != tags::SET_CLOCK_RATE));

    let (mut mb, fw) = mailbox(pi3_firmware(40_000));
    fw.borrow_mut().unknown.push(tags::GET_TEMPERATURE);
    let e = mb.raise_arm_clock(ArmClockPolicy::Max).unwrap_err();
    assert!(
        matches!(
            e,
            MailboxError::Short {
                tag: tags::GET_TEMPERATURE,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        fw.borrow().clocks[&ARM_CLOCK_ID],
        600 * MHZ,
        "left as it was"
    );
}

// ---- throttling ----

#[test]
fn throttled_flags_are_read_and_named() {
    let (mut mb, fw) = mailbox(Firmware {
        throttled: 0x0005_0005,
        ..Firmware::default()
    });
    let t = mb.throttled().unwrap();
    assert_eq!(t, Throttled(0x0005_0005));
    assert_eq!(fw.borrow().log, vec![(tags::GET_THROTTLED, vec![0])]);
    assert!(t.now() && !t.none());
    assert_eq!(
        t.to_string(),
        "under-voltage, throttled now; under-voltage, throttled since boot"
    );
    assert_eq!(
        Throttled(0x000a_0000).to_string(),
        "ARM frequency capped, soft temperature limit since boot"
    );
    assert!(!Throttled(0x000a_0000).now());
    // Bits outside the documented ones say nothing.
    assert_eq!(Throttled(0x0010_0010).to_string(), "not throttled");
    fw.borrow_mut().throttled = 0;
    assert_eq!(mb.throttled().unwrap().to_string(), "not throttled");
    // A firmware without the tag: the error says so.
    fw.borrow_mut().unknown.push(tags::GET_THROTTLED);
    let e = mb.throttled().unwrap_err();
    assert!(matches!(e, MailboxError::Short { len: 0, .. }), "{e:?}");
    assert!(
        e.to_string().starts_with("mailbox GET_THROTTLED (0x30046)"),
        "{e}"
    );
}
