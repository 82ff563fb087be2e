//! The Orange Pi card under QEMU's `orangepi-pc` with a page cache smaller than the model: the
//! weights stream from the card through the Allwinner SD/MMC driver's queued IDMAC reads
//! (`submit_read` / `poll_read`, queue depth 4: no core serves the card), read ahead while every
//! core computes, and the text is still exactly the PC runner's.

mod common;

use common::boot::{boot, built, generated, host_text, make_card};
use std::time::Duration;

#[test]
fn orangepi_pc_streams_the_model_through_queued_idmac_reads() {
    let b = built("orangepi-h3");
    let model = common::model_path();
    let mut s = common::boot::once(4);
    // Half the model: each token streams the rest.
    s.cache = "48M".into();
    let want = host_text(b, &model, &s);
    let img = make_card(b, "orangepi-h3-stream", &s, &model);
    let (code, uart) = boot(b, &img, None, &[], Duration::from_secs(1200));
    eprintln!("{uart}");
    assert_eq!(code, 0, "QEMU exit status");
    assert!(uart.contains("; High Speed, 50 MHz, 4-bit, IDMA"), "{uart}");
    assert!(uart.contains("read-ahead 4 pages"), "{uart}");
    let stats = uart
        .lines()
        .find(|l| l.starts_with("stats: heap"))
        .unwrap_or_else(|| panic!("no stats line:\n{uart}"));
    let ahead: u64 = stats
        .split("read ahead ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{stats}"));
    assert!(ahead > 50, "{stats}");
    assert_eq!(generated(&uart), want, "kernel and lmboot-host disagree");
    assert!(uart.trim_end().ends_with("lmboot: done"), "{uart}");
}
