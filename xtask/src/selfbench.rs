//! `cargo xtask bench --only selftest`: how long `selftest = full` takes on a Zero 2 W, from the
//! instruction counts of a QEMU raspi3b boot under `-icount shift=0` (the Zero 2 W's stand-in:
//! the same BCM2837 and Cortex-A53 cores) and the card rate `lmboot-host --board-sim zero2w`
//! assumes. Writes `results/selftest.md`.
//!
//! QEMU's instruction counter counts every vCPU's instructions, so the boot runs the whole
//! self-test on one core (`cores = 1`; the others wait in WFE, which the counter barely sees):
//! the count is what one core would execute, an upper bound for the checks that run on all four
//! (cores, the copy on all cores, the kernel rate on all cores).

use crate::bench::boot_uart;
use crate::{board, build_kernel, card_image, ensure_model, workspace_root, QemuOpts, Settings};
use report::ASSUMED;
use std::fmt::Write as _;

/// The Zero 2 W's ARM clock (its firmware's default `arm_freq`), Hz.
const CLOCK_HZ: f64 = 1.0e9;

/// Instructions a Cortex-A53 retires per cycle, assumed: 0.5, half its dual-issue peak, for
/// loops that stream memory (the pattern test, the copies, the CRC of a file read into RAM).
const IPC: f64 = 0.5;

/// The targets: the whole self-test, and the self-test without the model's digest, in seconds.
const TARGETS: (f64, f64) = (30.0, 10.0);

/// One check as the boot's `selftest: took` line gives it: name, guest ms, M instructions.
#[derive(Debug, Clone, PartialEq)]
pub struct Took {
    pub check: String,
    pub ms: u64,
    pub minstr: Option<u64>,
}

/// The checks of a `selftest: took N ms: model 12 ms (3 M instructions on core 0), ...` line.
pub fn parse_took(line: &str) -> Option<Vec<Took>> {
    let rest = line.strip_prefix("selftest: took ")?.split_once(": ")?.1;
    rest.split(", ")
        .map(|part| {
            let mut w = part.split(' ');
            let check = w.next()?.to_string();
            let ms = w.next()?.parse().ok()?;
            let minstr = part
                .split_once(" (")
                .and_then(|(_, r)| r.split(' ').next()?.parse().ok());
            Some(Took { check, ms, minstr })
        })
        .collect()
}

/// Seconds `t` takes on a Zero 2 W: its instructions at [`IPC`] and [`CLOCK_HZ`], and the card's
/// time at the rate assumed for what the check reads (the reads and the work on them do not
/// overlap): the model's digest reads `model_bytes`; the card check reads its span twice, by DMA
/// and by PIO (PIO charged at DMA's rate: the bus, not the CPU, bounds both at 50 MHz).
fn zero2w_s(t: &Took, model_bytes: u64, card: f64) -> f64 {
    let cpu = t.minstr.unwrap_or(0) as f64 * 1e6 / (IPC * CLOCK_HZ);
    match t.check.as_str() {
        "model" => cpu + model_bytes as f64 / card,
        "card" => cpu + 2.0 * runtime::run::CARD_SPAN as f64 / card,
        _ => cpu,
    }
}

/// Boot raspi3b with `selftest = full` under `-icount` and write the table.
pub fn run() -> Result<String, String> {
    let model = ensure_model()?;
    let model_bytes = std::fs::metadata(&model).map_err(|e| e.to_string())?.len();
    let b = board("rpi3")?;
    let kernel = build_kernel(&b, true)?;
    let settings = Settings {
        prompt: "Once upon a time".into(),
        n: 1,
        cores: Some(1),
        selftest: Some("full".into()),
        ..Default::default()
    };
    let img = workspace_root().join("target").join("bench-selftest.img");
    card_image(&b, Some(&kernel), &settings, &model, &img)?;
    let opts = QemuOpts {
        icount: true,
        ..Default::default()
    };
    eprintln!("xtask: bench: selftest, rpi3 under -icount");
    let uart = boot_uart(&b, &kernel, &img, &opts, "rpi3 selftest")?;
    let took_line = uart
        .lines()
        .find(|l| l.starts_with("selftest: took "))
        .ok_or_else(|| format!("no `selftest: took` line in:\n{uart}"))?;
    let took = parse_took(took_line).ok_or_else(|| format!("unreadable: {took_line}"))?;
    let card = ASSUMED
        .iter()
        .find(|a| a.sim == "zero2w")
        .map_or(25e6, |a| a.card);
    Ok(table(&uart, &took, (model_bytes, card)))
}

/// The results page: the boot's self-test lines, each check's count and Zero 2 W estimate, and
/// the targets.
fn table(uart: &str, took: &[Took], (model_bytes, card): (u64, f64)) -> String {
    let mut md = String::from("# The first-boot self-test's time on a Zero 2 W (QEMU raspi3b, -icount shift=0, one core)\n\n");
    let _ = writeln!(md, "Command: `cargo xtask bench --only selftest`. A Zero 2 W is estimated at {} GHz and {IPC} instructions a cycle (half a Cortex-A53's dual-issue peak, for loops that stream memory), with the model read at the {:.0} MB/s `lmboot-host --board-sim zero2w` assumes. The boot runs every check on one core, so the checks that use all four are counted as one core would run them (an upper bound). QEMU proves the instruction counts, not the board's time: the first report from a real board replaces these assumptions (`cargo xtask report` puts its measured rates beside them).\n", CLOCK_HZ / 1e9, card / 1e6);
    md.push_str("\nThe boot's lines:\n\n");
    for l in uart.lines().filter(|l| l.starts_with("selftest: ")) {
        let _ = writeln!(md, "    {l}");
    }
    md.push_str("\n| check | M instructions (core 0) | Zero 2 W, s |\n|---|---|---|\n");
    let (mut all, mut no_model) = (0.0, 0.0);
    for t in took {
        let s = zero2w_s(t, model_bytes, card);
        all += s;
        if t.check != "model" {
            no_model += s;
        }
        let m = t.minstr.map_or("-".into(), |m| m.to_string());
        let _ = writeln!(md, "| {} | {m} | {s:.2} |", t.check);
    }
    let verdict = |s: f64, t: f64| if s <= t { "met" } else { "NOT met" };
    let _ = writeln!(
        md,
        "\nThe whole self-test ({:.0} MB model digested): {all:.1} s (target {} s: {}). Without the model's digest: {no_model:.1} s (target {} s: {}).",
        model_bytes as f64 / 1e6,
        TARGETS.0,
        verdict(all, TARGETS.0),
        TARGETS.1,
        verdict(no_model, TARGETS.1)
    );
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_took_line_is_read_and_charged_at_the_board_rates() {
        let line = "selftest: took 900 ms: model 150 ms (60 M instructions on core 0), memory 500 ms (400 M instructions on core 0), kernels 12 ms";
        let t = parse_took(line).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(
            t[0],
            Took {
                check: "model".into(),
                ms: 150,
                minstr: Some(60)
            }
        );
        assert_eq!(t[2].minstr, None);
        // 60 M instructions at 0.5 a cycle and 1 GHz, and 100 MB at 25 MB/s.
        let s = zero2w_s(&t[0], 100_000_000, 25e6);
        assert!((s - 4.12).abs() < 1e-9, "{s}");
        assert!((zero2w_s(&t[1], 100_000_000, 25e6) - 0.8).abs() < 1e-9);
        let md = table("selftest: model ok\n", &t, (100_000_000, 25e6));
        assert!(md.contains("4.9 s (target 30 s: met)"), "{md}");
        assert!(md.contains("0.8 s (target 10 s: met)"), "{md}");
    }
}
