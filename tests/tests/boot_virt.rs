//! Boot tests on QEMU `virt` (aarch64, Cortex-A53): the kernel reads the model from a FAT32 card
//! image over virtio-blk and prints exactly what `lmboot-host` prints for the same model, prompt and
//! settings; QEMU exits with status 0. Damaged cards give a clear error and a non-zero status.

mod common;

use common::boot::{boot, built, generated, host_text, make_image};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(600);

fn check_case(name: &str, prompt: &str, n: usize) {
    let s = xtask::Settings {
        prompt: prompt.into(),
        n,
        temp: "0".into(),
        ..Default::default()
    };
    let opts = xtask::QemuOpts::default();
    let uart = common::boot::matches_host(name, &common::model_path(), &s, &opts, LIMIT);
    assert!(uart.contains("stats: heap high-water"), "no stats line");
}

#[test]
fn once_upon_a_time_matches_the_pc_runner() {
    check_case("virt-once", "Once upon a time", 32);
}

/// One core and four cores print the same text (rows and heads split across cores change nothing).
#[test]
fn one_core_matches_four_cores() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let s = xtask::Settings {
        prompt: "The capital of France is".into(),
        n: 12,
        ..Default::default()
    };
    let img = make_image("virt-cores", &s, &model);
    let (c1, one) = common::boot::boot_smp(b, &img, None, Some(1), &[], LIMIT);
    let (c4, four) = common::boot::boot_smp(b, &img, None, Some(4), &[], LIMIT);
    assert_eq!((c1, c4), (0, 0));
    assert!(one.contains("cores: 1 working"), "{one}");
    assert!(four.contains("cores: 4 working"), "{four}");
    assert_eq!(generated(&one), generated(&four));
    assert_eq!(generated(&one), host_text(b, &model, &s));
}

#[test]
fn chat_prompt_matches_the_pc_runner() {
    let prompt = String::from_utf8(common::golden::load("smollm2-chat-mountain").prompt).unwrap();
    check_case("virt-chat", &prompt, 32);
}

#[test]
fn truncated_model_is_a_clear_error() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let cut = common::boot::image_dir().join("truncated.gguf");
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let img = make_image("virt-truncated", &xtask::Settings::default(), &cut);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 1, "QEMU exit status");
    assert!(uart.contains("error: model: GGUF error at byte"), "{uart}");
    assert!(uart.contains("extends past the end"), "{uart}");
}

#[test]
fn bad_boot_sector_is_a_clear_error() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let img = make_image("virt-badboot", &xtask::Settings::default(), &model);
    common::boot::break_boot_signature(&img);
    let (code, uart) = boot(b, &img, None, &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 1, "QEMU exit status");
    assert!(uart.contains("error: card:"), "{uart}");
}

/// With 64 MiB of RAM the 98 MB model does not fit: part is pinned, the rest streams from the card
/// every token, and the text is the same.
#[test]
fn less_ram_than_the_model_gives_the_same_tokens() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let s = common::boot::once(12);
    let want = host_text(b, &model, &s);
    let img = make_image("virt-64m", &s, &model);
    let (code, uart) = boot(b, &img, Some("64M"), &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0);
    assert!(uart.contains("RAM 64 MiB"), "{uart}");
    let streamed: u64 = uart
        .lines()
        .find(|l| l.starts_with("stats: heap"))
        .and_then(|l| l.split("bytes read ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("bytes read in the stats");
    assert!(
        streamed > 100_000_000,
        "the model should have streamed: {streamed} bytes read"
    );
    // Queued virtio-blk reads went ahead of the forward pass.
    assert!(uart.contains("read-ahead 4 pages"), "{uart}");
    assert!(read_ahead_pages(&uart) > 100, "{uart}");
    // The profile says what an SD card's bus would cost (virtio-blk is none): High Speed's and
    // DDR50's ceilings.
    assert!(
        uart.contains("profile: the card is not on an SD bus; from an SD card in High Speed (25.0 MB/s ceiling)")
            && uart.contains("in UHS-I DDR50 (50.0 MB/s)"),
        "{uart}"
    );
    assert_eq!(generated(&uart), want);
}

/// A 32 MiB board (context 256): a page cache of about 13 MiB for the 98 MB model, each token
/// streaming M - C through the window that keeps the pages needed soonest; the same text.
#[test]
fn a_32_mib_board_runs_the_model_with_the_same_tokens() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let mut s = common::boot::once(6);
    s.ctx = 256;
    let want = host_text(b, &model, &s);
    let img = make_image("virt-32m", &s, &model);
    let (code, uart) = boot(b, &img, Some("32M"), &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0);
    assert!(uart.contains("RAM 32 MiB"), "{uart}");
    assert!(uart.contains("(256 positions)"), "{uart}");
    assert_eq!(generated(&uart), want);
}

/// Pages read ahead over the whole run, from the stats line.
fn read_ahead_pages(uart: &str) -> u64 {
    uart.lines()
        .find(|l| l.starts_with("stats: heap"))
        .and_then(|l| l.split("read ahead ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("pages read ahead in the stats")
}

/// The other two ways to read a streaming model give the same text: no read-ahead (every read
/// synchronous), and one core serving the card while three compute (what a board whose card
/// cannot queue reads, the Pi, does by default).
#[test]
fn read_ahead_off_and_a_serving_core_give_the_same_tokens() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    let mut s = common::boot::once(8);
    let want = host_text(b, &model, &s);
    s.extra = vec![("readahead".into(), "off".into())];
    let img = make_image("virt-64m-sync", &s, &model);
    let (code, uart) = boot(b, &img, Some("64M"), &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0);
    assert!(uart.contains("read-ahead off"), "{uart}");
    assert_eq!(read_ahead_pages(&uart), 0);
    assert_eq!(generated(&uart), want);

    s.extra = vec![("io_core".into(), "on".into())];
    let img = make_image("virt-64m-iocore", &s, &model);
    let (code, uart) = boot(b, &img, Some("64M"), &[], LIMIT);
    eprintln!("{uart}");
    assert_eq!(code, 0);
    assert!(
        uart.contains("read-ahead: core 3 serves the card, 3 compute"),
        "{uart}"
    );
    assert!(read_ahead_pages(&uart) > 100, "{uart}");
    assert_eq!(generated(&uart), want);
}

/// A panic and a CPU exception are reported on the UART with their location and end QEMU with a
/// non-zero status (`selftest` in lmboot.txt triggers them after loading).
#[test]
fn panics_and_exceptions_are_reported() {
    let b = built("qemu-virt-aarch64");
    let model = common::model_path();
    for (what, code, needles) in [
        (
            "panic",
            3,
            vec![
                "*** panic at runtime/src/run/mod.rs:",
                "selftest: a deliberate panic",
            ],
        ),
        (
            "exception",
            2,
            vec![
                "*** exception: sync from EL1",
                "ESR_EL1 0x96",
                "FAR_EL1 0x8000000000",
            ],
        ),
    ] {
        let s = xtask::Settings {
            selftest: Some(what.into()),
            n: 1,
            ..Default::default()
        };
        let img = make_image(&format!("virt-selftest-{what}"), &s, &model);
        let (c, uart) = boot(b, &img, None, &[], LIMIT);
        assert_eq!(c, code, "{what}: {uart}");
        for n in needles {
            assert!(uart.contains(n), "{what}: no {n:?} in:\n{uart}");
        }
    }
}
