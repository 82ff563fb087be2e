//! Boot tests on QEMU `raspi3b` and `raspi4b` with the card image on `-drive if=sd`: the kernel
//! (raw kernel8.img entered at EL2) finds the card through its SDHCI driver and prints exactly what
//! `lmboot-host` prints, ends with the success marker and powers off with status 0.

mod common;

use common::boot::{boot, built, generated, host_text, make_card};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(900);

fn pi(board: &str) {
    let b = built(board);
    let model = common::model_path();
    let s = common::boot::once(16);
    let want = host_text(b, &model, &s);
    let img = make_card(b, &format!("{board}-once"), &s, &model);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0, "QEMU exit status");
    assert!(uart.contains(&format!("lmboot 0.1.0 on {board}")), "{uart}");
    assert!(
        uart.contains("card: SD at"),
        "the SD driver did not find the card:\n{uart}"
    );
    assert_eq!(generated(&uart), want, "kernel and lmboot-host disagree");
    assert!(
        uart.trim_end().ends_with("lmboot: done"),
        "no success marker:\n{uart}"
    );
}

#[test]
fn raspi3b_matches_the_pc_runner() {
    pi("rpi3");
}

#[test]
fn raspi4b_matches_the_pc_runner() {
    pi("rpi4");
}
