//! `cargo xtask report LOG`: a board's first-boot report (the `lmboot-report:` line of a saved
//! serial log, [`report`] crate) decoded: every field named, each failed check with what it means
//! and what to check, and the board's measured rates beside what `lmboot-host --board-sim`
//! assumes, with the time per token recomputed from each.

use report::{Assumed, ASSUMED, FIELDS};
use std::fmt::Write as _;

/// What a failed check means and what to check (docs/bring-up.md's failure table, per check).
const HINTS: [(&str, &str); 7] = [
    ("kernels", "a kernel set computed other numbers than the scalar set on this CPU; the run used the next set (the `kernels:` line names it). Send the report: the cpu field names the core"),
    ("cores", "a core did not start or computed another checksum than the first; the run used the cores that agree. Send the log (the firmware's core release, the board's supply)"),
    ("memory", "the pattern test read back a word it did not write: RAM, its clock (over-clocking in config.txt) or the supply"),
    ("card", "the card read other bytes by DMA than by PIO (a cache maintenance or DMA bug); the run reads by PIO. Send the report"),
    ("model", "the model file on the card is not the file written to it: write the card again (`cargo xtask image`), or try another card"),
    ("forward", "this CPU's first logits differ from those the PC computed when the image was written: send the report"),
    ("clocks", "the counter runs at another frequency than the firmware or device tree says: the log's times are off by that ratio"),
];

/// The decoded report of the log `text`, or why it cannot be read.
pub fn decode(text: &str) -> Result<String, String> {
    let fields = report::parse(text).map_err(|e| format!("report: {e}"))?;
    let get = |k: &str| field(&fields, k);
    let mut out = String::new();
    let _ = writeln!(out, "| field | value | what it is |\n|---|---|---|");
    for (k, v) in &fields {
        let what = FIELDS
            .iter()
            .find(|(f, _)| f == k)
            .map_or("(unknown field)", |f| f.1);
        let _ = writeln!(out, "| {k} | {v} | {what} |");
    }
    let failed: Vec<&str> = get("verdicts")
        .unwrap_or("")
        .split(',')
        .filter_map(|v| v.strip_suffix(":fail"))
        .collect();
    let _ = writeln!(out);
    if failed.is_empty() {
        let _ = writeln!(out, "Every check passed.");
    }
    for check in &failed {
        let hint = HINTS
            .iter()
            .find(|h| h.0 == *check)
            .map_or("send the log", |h| h.1);
        let _ = writeln!(out, "FAILED {check}: {hint}.");
    }
    if let Some(a) = get("board").and_then(|b| ASSUMED.iter().find(|a| a.boards.contains(&b))) {
        out.push_str(&against(a, &fields));
    }
    Ok(out)
}

/// The value of field `k`.
fn field<'f>(fields: &'f [(String, String)], k: &str) -> Option<&'f str> {
    fields.iter().find(|(f, _)| f == k).map(|(_, v)| v.as_str())
}

/// The measured card and kernel rates beside `a`'s, and the time per token from each.
fn against(a: &Assumed, fields: &[(String, String)]) -> String {
    let num = |k: &str| field(fields, k).and_then(|v| v.parse::<f64>().ok());
    let card = num("dma").or(num("pio")).or(num("blk")).map(|c| c * 1e6);
    let matvec = num("mvn").map(|m| m * 1e6);
    let mut out = format!(
        "\n| | measured | assumed by `lmboot-host --board-sim {}` |\n|---|---|---|\n",
        a.sim
    );
    let mb = |r: Option<f64>| r.map_or("-".into(), |r| format!("{:.1} MB/s", r / 1e6));
    let _ = writeln!(out, "| card | {} | {} |", mb(card), mb(Some(a.card)));
    let _ = writeln!(
        out,
        "| weights through the kernels, all cores | {} | {} |",
        mb(matvec),
        mb(Some(a.matvec))
    );
    if let (Some(stream), Some(weights)) = (num("stream"), num("weights")) {
        let t = |card: f64, matvec: f64| stream * 1e6 / card + weights * 1e6 / matvec;
        let measured = match (card, matvec) {
            (Some(c), Some(m)) => format!("{:.2} s", t(c, m)),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "| a token ({stream} MB from the card, {weights} MB through the kernels) | {measured} | {:.2} s |",
            t(a.card, a.matvec)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(verdicts: &str) -> String {
        let mut r = report::Report::new();
        r.push("board", "rpi3")
            .push("kernels", "neon-dotprod")
            .push("dma", 22.5)
            .push("mvn", 600)
            .push("stream", 482)
            .push("weights", 990)
            .push("verdicts", verdicts);
        format!("card: ...\n{}\nstats: ...\n", r.finish())
    }

    #[test]
    fn a_report_is_decoded_with_failures_and_rates() {
        let out = decode(&line("kernels:ok,card:fail,model:ok")).unwrap();
        assert!(
            out.contains("| board | rpi3 | board (its board file's name) |"),
            "{out}"
        );
        assert!(
            out.contains("FAILED card: the card read other bytes by DMA"),
            "{out}"
        );
        assert!(!out.contains("FAILED kernels"), "{out}");
        // 482 MB at 22.5 MB/s and 990 MB at 600 MB/s: 21.42 + 1.65 s; assumed 19.28 + 1.98 s.
        assert!(out.contains("| 23.07 s | 21.26 s |"), "{out}");
        assert!(out.contains("lmboot-host --board-sim zero2w"), "{out}");
        let ok = decode(&line("kernels:ok")).unwrap();
        assert!(ok.contains("Every check passed."), "{ok}");
    }

    #[test]
    fn a_device_with_one_way_to_read_gives_its_rate_as_the_card_s() {
        let mut r = report::Report::new();
        r.push("board", "rpi3").push("blk", 180);
        let out = decode(&r.finish()).unwrap();
        assert!(
            out.contains("| blk | 180 | card read on a device with one way"),
            "{out}"
        );
        assert!(out.contains("| card | 180.0 MB/s | 25.0 MB/s |"), "{out}");
    }

    #[test]
    fn a_damaged_or_missing_report_is_named() {
        let l = line("kernels:ok").replace("rpi3", "rpi4");
        assert!(decode(&l).unwrap_err().contains("altered or cut"));
        assert!(decode("no report")
            .unwrap_err()
            .contains("no line starts with"));
    }
}
