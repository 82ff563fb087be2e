//! Boot tests of the 32-bit Arm kernel (armv7a, Cortex-A7) on QEMU's `raspi2b` (Raspberry Pi 2),
//! `orangepi-pc` (Allwinner H3, booted as an Orange Pi Zero card: U-Boot from the card, its
//! `boot.scr` loading lmboot.img) and `virt` with the virtualization extensions (entered in HYP, as
//! the Pi 2's firmware enters): each prints exactly what `lmboot-host` prints, ends with the success
//! marker and exits with status 0; and an exception on purpose is reported and stops the board
//! with status 2.
//!
//! What QEMU shows and what it cannot: the boot path, the mode changes (HYP to SVC on the Pi,
//! U-Boot's secure SVC on the H3), the identity map, the cores' start, the drivers against QEMU's
//! models, and the arithmetic (bit for bit, so the tokens match). QEMU models no caches, so the
//! cache maintenance at entry and around the mailbox is not exercised; its SD hosts, mailbox and
//! CPU configuration block are simpler than the silicon (no clocks, no power clamps).

mod common;

use common::boot::{boot, built, generated, host_text, make_card, selftest_passed};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(900);

/// Boot `board` with a 16-token run of the default model and the first-boot self-test (each
/// board's one boot with it: every check passes or is skipped); checks exit, agreement and
/// `lines`.
fn run(board: &str, lines: &[&str]) -> String {
    let b = built(board);
    let model = common::model_path();
    let mut s = xtask::Settings {
        selftest: Some("full".into()),
        ..common::boot::once(16)
    };
    // QEMU's emulated SD cards (raspi2b, orangepi-pc) read at 1 to 2 MB/s of host time: the
    // model check digests the file's first and last 4 MiB (`model_digest`); the virt boots
    // digest it whole.
    if board != "qemu-virt-armv7" {
        s.extra.push(("model_digest".into(), "4".into()));
    }
    let want = host_text(b, &model, &s);
    let img = make_card(b, &format!("{board}-once"), &s, &model);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0, "QEMU exit status");
    for line in [
        &format!("lmboot 0.1.0 on {board}") as &str,
        "cores: 4 online (ids 0-3)",
    ]
    .iter()
    .chain(lines)
    {
        assert!(uart.contains(line), "no {line:?} in:\n{uart}");
    }
    let warning = uart.lines().find(|l| l.contains("warning:"));
    assert!(warning.is_none(), "a warning at boot: {warning:?}\n{uart}");
    assert_eq!(generated(&uart), want, "kernel and lmboot-host disagree");
    assert!(
        uart.trim_end().ends_with("lmboot: done"),
        "no success marker:\n{uart}"
    );
    selftest_passed(&uart, board);
    uart
}

#[test]
fn raspi2b_matches_the_pc_runner() {
    let uart = run(
        "rpi2",
        &[
            "RAM: 0x0..0x3c000000 (960 MiB) from the mailbox (no device tree)",
            // The sdhost controller, as on the Pi 3: 350 MHz / (5 + 2), DMA channel 5.
            "card: SD at 0x3f202000 (sdhost), ",
            "base clock 350 MHz (core clock, firmware); High Speed, 50 MHz, 4-bit, DMA (channel 5), reads queued",
            "ARM clock: ",
        ],
    );
    let b = built("rpi2");
    assert!(
        b.kernel
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("kernel7-"),
        "{:?}",
        b.kernel
    );
    assert!(uart.contains("(kernels neon)"), "{uart}");
}

#[test]
fn orangepi_pc_boots_the_orange_pi_zero_card_and_matches_the_pc_runner() {
    let uart = run(
        "orangepi-h3",
        &[
            // U-Boot (Debian's Orange Pi Zero build) ran from the card and found boot.scr.
            "Model: Xunlong Orange Pi Zero",
            "Found U-Boot script /boot.scr",
            "RAM: 0x40000000..0x80000000 (1024 MiB) from the DRAM controller",
            "card: SD at 0x1c0f000",
            // 600 MHz PLL_PERIPH0 (as U-Boot's SPL left it) / 12.
            "; High Speed, 50 MHz, 4-bit, IDMA",
        ],
    );
    assert!(uart.contains("(kernels neon)"), "{uart}");
}

/// QEMU's 32-bit virt machine with the virtualization extensions enters the kernel in HYP mode
/// with a device tree in r2, as the Pi 2's firmware does: the HYP-to-SVC path, the device tree's
/// RAM, PSCI over SMC and virtio-blk on 32 bits.
#[test]
fn virt_armv7_entered_in_hyp_matches_the_pc_runner() {
    run(
        "qemu-virt-armv7",
        &[
            "entered in Hyp mode, running in System mode; VFPv4 + NEON",
            "RAM: 0x40000000..0x60000000 (512 MiB) from the device tree at 0x",
            "card: virtio-blk",
            "(kernels neon)",
        ],
    );
}

/// `selftest = exception` reads an address the identity map leaves out: the data abort is
/// reported with its status and address registers and the board stops with status 2.
#[test]
fn a_data_abort_is_reported_on_armv7a() {
    let b = built("rpi2");
    let mut s = common::boot::once(1);
    s.selftest = Some("exception".into());
    // A small page cache: nothing is read ahead before the selftest.
    s.cache = "8M".into();
    let img = make_card(b, "rpi2-exception", &s, &common::model_path());
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    assert_eq!(code, 2, "QEMU exit status:\n{uart}");
    let line = uart
        .lines()
        .find(|l| l.starts_with("*** exception: data abort"))
        .unwrap_or_else(|| panic!("no data abort report in:\n{uart}"));
    assert!(
        line.contains("translation fault")
            && line.contains("in System mode")
            && line.contains("DFAR 0x"),
        "{line}"
    );
}
