//! Rings of QEMU virt boards, linked through their second PL011 (0x0904_0000): three boards, each
//! with its own card (`ring = K/3`), print exactly what `lmboot-host` prints on one PC; a board
//! killed while tokens are generated ends the head's run with an error naming it. The link has
//! no flow control (`flow = "none"`) and every board receives it by interrupt (the GIC's SPI 8):
//! each says so, and counts every byte it received through the handler and no overrun.

mod common;

use common::boot::{built, generated, host_text, make_card, Built};
use std::time::Duration;

const BOARD: &str = "qemu-virt-aarch64";

fn settings(n: usize) -> xtask::Settings {
    xtask::Settings {
        prompt: "The ring of boards passed the hidden states around, and".into(),
        n,
        ..Default::default()
    }
}

/// One card per board of a ring of `boards`, named `name-K`.
fn cards(b: &Built, name: &str, s: &xtask::Settings, boards: usize) -> Vec<std::path::PathBuf> {
    (1..=boards)
        .map(|k| {
            let mut s = s.clone();
            s.extra.push(("ring".into(), format!("{k}/{boards}")));
            make_card(b, &format!("{name}-{k}"), &s, &common::model_path())
        })
        .collect()
}

/// One ring at a time: three QEMU machines are load enough for a two-core runner.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn ring(
    b: &Built,
    images: Vec<std::path::PathBuf>,
    kill: Option<(usize, String)>,
) -> xtask::ring::RingOutcome {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let spec = xtask::ring::RingSpec {
        images,
        opts: xtask::QemuOpts::default(),
        echo: false,
        kill,
        limit: Duration::from_secs(600),
    };
    xtask::ring::run(&b.board, &b.kernel, &spec).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn three_boards_print_what_the_pc_prints() {
    let b = built(BOARD);
    let s = settings(12);
    let want = host_text(b, &common::model_path(), &s);
    let o = ring(b, cards(b, "ring3", &s, 3), None);
    for (k, c) in o.consoles.iter().enumerate() {
        eprintln!("--- board {} ---\n{c}", k + 1);
    }
    assert_eq!(o.code, 0, "the head's exit status");
    assert_eq!(
        generated(&o.consoles[0]),
        want,
        "the ring and lmboot-host disagree"
    );
    for k in 2..=3 {
        assert!(
            o.consoles[k - 1].contains("ring: serving layers"),
            "board {k}"
        );
        assert!(
            o.consoles[k - 1].contains("lmboot: done"),
            "board {k} ended cleanly"
        );
    }
    for (k, c) in o.consoles.iter().enumerate() {
        let k = k + 1;
        assert!(
            c.contains("no flow control, received by interrupt 40"),
            "board {k}: the link line"
        );
        let (irq_bytes, overruns, dropped, received_kib) = line_counts(c)
            .unwrap_or_else(|| panic!("board {k}: no line counts in the link's statistics"));
        assert!(
            irq_bytes >> 10 >= received_kib && irq_bytes > 0,
            "board {k}: {irq_bytes} bytes by interrupt, {received_kib} KiB received"
        );
        assert_eq!((overruns, dropped), (0, 0), "board {k}: bytes lost");
        eprintln!("board {k}: {irq_bytes} bytes received by interrupt, {overruns} overruns, {dropped} dropped");
    }
    // Every hop carried hidden states: at least one f32 row per token.
    let row = 576 * 4;
    assert!(
        o.hops.iter().all(|&h| h >= (row * s.n) as u64),
        "{:?}",
        o.hops
    );
    eprintln!(
        "hops {:?} bytes in {:.1} s; {:.0} bytes per hop per generated token",
        o.hops,
        o.seconds,
        o.hops[0] as f64 / (s.n as f64 + 1.0)
    );
}

/// From the link's statistics line: bytes received by interrupt, overruns, bytes dropped with
/// the buffer full, and KiB the link layer received.
fn line_counts(console: &str) -> Option<(u64, u64, u64, u64)> {
    let line = console.lines().find(|l| l.starts_with("ring: link sent"))?;
    let number_before = |text: &str, what: &str| -> Option<u64> {
        let head = &text[..text.find(what)?];
        head.rsplit(|c: char| !c.is_ascii_digit())
            .find(|w| !w.is_empty())?
            .parse()
            .ok()
    };
    let (_, line_part) = line.split_once("; line: ")?;
    let received = &line[line.find(", received ")? + ", received ".len()..];
    Some((
        number_before(line_part, " bytes received by interrupt")?,
        number_before(line_part, " overruns")?,
        number_before(line_part, " dropped")?,
        number_before(received, " KiB)")?,
    ))
}

#[test]
fn a_killed_board_is_named_on_the_head() {
    let b = built(BOARD);
    let s = settings(48);
    let trigger = runtime::run::BEGIN_OUTPUT.to_string();
    let o = ring(b, cards(b, "ringkill", &s, 3), Some((2, trigger)));
    let head = &o.consoles[0];
    eprintln!("{head}");
    assert_eq!(o.code, 1, "the head's exit status");
    assert!(
        head.contains("error: generation: ring: board 2 stopped answering"),
        "{head}"
    );
}
