//! Boot tests on QEMU `raspi3b` and `raspi4b` with the card image on `-drive if=sd`: the kernel
//! (raw kernel8.img entered at EL2) finds the card through its SDHCI driver and prints exactly what
//! `lmboot-host` prints, ends with the success marker and powers off with status 0.
//!
//! QEMU loads kernel8.img itself: the firmware, config.txt and the device trees on the card are
//! not used. A device tree reaches the kernel only through `-dtb`, and QEMU rewrites its memory
//! node (one block, the machine's RAM below the GPU's): the tests with `-dtb` run the device tree
//! path, the one without runs the mailbox path the Pi takes when the card has no device tree.

mod common;

use common::boot::{boot, built, generated, host_text, make_card, selftest_passed};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(900);

/// Boot `board` with the cached device tree `dtb` passed by `-dtb` (or none), with the
/// first-boot self-test if `selftest` (one boot per board runs it: every check passes or is
/// skipped); the UART.
fn pi(board: &str, dtb: Option<&str>, selftest: bool) -> String {
    let b = built(board);
    let img_len = std::fs::metadata(&b.kernel).unwrap().len();
    assert_eq!(
        img_len % 4,
        0,
        "kernel8.img is {img_len} bytes, not whole words"
    );
    let model = common::model_path();
    let mut s = common::boot::once(16);
    if selftest {
        s.selftest = Some("full".into());
        // QEMU's emulated card reads at 2 to 3 MB/s of host time: the model check digests the
        // file's first and last 4 MiB (`model_digest`); the virt boots digest it whole.
        s.extra.push(("model_digest".into(), "4".into()));
    }
    let want = host_text(b, &model, &s);
    let tag = if dtb.is_some() { "dtb" } else { "nodtb" };
    let img = make_card(b, &format!("{board}-once-{tag}"), &s, &model);
    let extra: Vec<String> = match dtb {
        Some(name) => {
            xtask::dtb::read(name).unwrap_or_else(|e| panic!("{e}"));
            let path = xtask::dtb::dir().join(name);
            vec!["-dtb".into(), path.display().to_string()]
        }
        None => vec![],
    };
    let (code, uart) = boot(b, &img, None, &extra, LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0, "QEMU exit status");
    for line in [
        format!("lmboot 0.1.0 on {board}"),
        "uart: PL011 at ".into(),
        "115200 baud from a 48 MHz clock".into(),
        "cores: 4 online (ids 0-3)".into(),
        "card: SD at".into(),
        // QEMU's SD card implements CMD6 and High Speed: the driver switches to it.
        "; High Speed, ".into(),
        "ARM clock: ".into(),
    ] {
        assert!(uart.contains(&line), "no {line:?} in:\n{uart}");
    }
    // QEMU's firmware model lacks some property tags (raspi4b: SET_GPIO_STATE for the SD 3.3 V
    // select); the kernel says so and goes on. Any other warning fails the test.
    let unexpected = uart
        .lines()
        .filter(|l| l.contains("warning:"))
        .find(|l| !l.contains("the firmware does not implement the tag"));
    assert!(unexpected.is_none(), "a warning at boot:\n{uart}");
    assert_eq!(generated(&uart), want, "kernel and lmboot-host disagree");
    assert!(
        uart.trim_end().ends_with("lmboot: done"),
        "no success marker:\n{uart}"
    );
    if selftest {
        let report = selftest_passed(&uart, board);
        // The sdhost's DMA really moves the card's bytes (QEMU once made every transfer look
        // failed, and the driver read by PIO unnoticed); the Pi 4's card in QEMU is on the
        // legacy host, PIO only.
        let card = match board {
            "rpi3" => " read by DMA at ",
            _ => " read by PIO at ",
        };
        let line = common::boot::line(&uart, "selftest: card ok: ");
        assert!(line.contains(card), "{line}");
        assert!(report.contains(" bus=HS50x4 crc=0 retries=0 "), "{report}");
    }
    uart
}

/// QEMU's raspi machines have 1 GiB (raspi3b) and 2 GiB (raspi4b); the ARM gets the 960 MiB below
/// the GPU's memory, as one block, from either source.
const RAM_LINE: &str = "RAM: 0x0..0x3c000000 (960 MiB) from ";

/// The Pi 3's card on the sdhost controller: High Speed at 50 MHz from QEMU's 350 MHz core clock
/// (350 / (5 + 2)), reads through DMA channel 5 (the highest of QEMU's mask 0x3c), queued.
const SDHOST_LINES: [&str; 2] = [
    "card: SD at 0x3f202000 (sdhost), ",
    "base clock 350 MHz (core clock, firmware); High Speed, 50 MHz, 4-bit, DMA (channel 5), reads queued",
];

#[test]
fn raspi3b_matches_the_pc_runner() {
    let uart = pi("rpi3", Some("bcm2837-rpi-3-b.dtb"), true);
    for line in SDHOST_LINES {
        assert!(uart.contains(line), "no {line:?} in:\n{uart}");
    }
    assert!(
        uart.contains(&format!("{RAM_LINE}the device tree at 0x")),
        "{uart}"
    );
}

#[test]
fn raspi4b_matches_the_pc_runner() {
    let uart = pi("rpi4", Some("bcm2711-rpi-4-b.dtb"), true);
    assert!(
        uart.contains(&format!("{RAM_LINE}the device tree at 0x")),
        "{uart}"
    );
}

#[test]
fn raspi4b_without_a_device_tree_takes_the_mailbox() {
    let uart = pi("rpi4", None, false);
    assert!(
        uart.contains(&format!("{RAM_LINE}the mailbox (no device tree)")),
        "{uart}"
    );
}
