//! `cargo xtask bench --only speculative`: speculative decoding where the weights stream, on two
//! boards' clocks (`lmboot-host --board-sim`: the kernel's page cache sized for the board's RAM,
//! the card and cores of a Pi Zero 2 W and a Pi 4), for each draft source and kind of prompt,
//! beside the same run without speculation. Writes `results/speculative.md`.

use crate::bench::write_results;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// The prompts: code completion, an edit that quotes the given code, a JSON answer, free chat
/// (ChatML: both models' template).
pub const PROMPTS: [(&str, &str); 4] = [
    (
        "completion",
        "<|im_start|>user\nWrite a Python function that returns the n-th Fibonacci number.<|im_end|>\n<|im_start|>assistant\n```python\ndef fibonacci(n):\n",
    ),
    (
        "edit",
        "<|im_start|>user\nRename the variable x to total in this code and print it again in full:\ndef add(a, b):\n    x = a + b\n    return x\n\ndef add3(a, b, c):\n    x = a + b + c\n    return x\n<|im_end|>\n<|im_start|>assistant\n",
    ),
    (
        "json",
        "<|im_start|>user\nGive this record as a JSON object with the keys name, age, city and languages: Alice Smith, 30 years old, lives in Paris, speaks French and English.<|im_end|>\n<|im_start|>assistant\n",
    ),
    (
        "chat",
        "<|im_start|>user\nWhy is the sky blue? Answer in three sentences.<|im_end|>\n<|im_start|>assistant\n",
    ),
];

/// One configuration: model, RAM, and the speculation flags (`None` in a row: its draft model).
struct Setup {
    model: &'static str,
    mem: &'static str,
    source: &'static str,
    flags: &'static [&'static str],
    draft: Option<&'static str>,
}

const SETUPS: [Setup; 5] = [
    Setup {
        model: "qwen2.5-coder-1.5b",
        mem: "512M",
        source: "lookup",
        flags: &["--lookup", "3"],
        draft: None,
    },
    Setup {
        model: "qwen2.5-coder-1.5b",
        mem: "512M",
        source: "self-draft, 14 of 28 layers",
        flags: &["--self-draft", "14"],
        draft: None,
    },
    Setup {
        model: "qwen2.5-coder-1.5b",
        mem: "512M",
        source: "draft model Qwen2.5-Coder-0.5B, its head cut (`draft_vocab = auto`)",
        flags: &[],
        draft: Some("qwen2.5-coder-0.5b"),
    },
    Setup {
        model: "smollm2-135m",
        mem: "32M",
        source: "lookup",
        flags: &["--lookup", "3"],
        draft: None,
    },
    Setup {
        model: "smollm2-135m",
        mem: "32M",
        source: "self-draft, 15 of 30 layers",
        flags: &["--self-draft", "15"],
        draft: None,
    },
];

const BOARDS: [&str; 2] = ["zero2w", "pi4"];

/// What one simulated run printed.
#[derive(Debug, Clone, Default)]
struct Figures {
    /// Card bytes and board milliseconds per generated token after the first.
    bytes: f64,
    ms: f64,
    tokens_per_pass: Option<f64>,
    /// "62% of 211 guesses taken".
    taken: String,
    text: String,
    what: String,
}

fn parse(stdout: &str, stderr: &str) -> Result<Figures, String> {
    let mut f = Figures {
        text: stdout.to_string(),
        ..Figures::default()
    };
    for l in stderr.lines() {
        if let Some(rest) = l.strip_prefix("board-sim: ") {
            if let Some((_, per)) = rest.split_once("per generated token after the first: ") {
                let (bytes, rest) = per.split_once(" card bytes, ").ok_or(l)?;
                let (ms, _) = rest.split_once(" ms").ok_or(l)?;
                f.bytes = bytes.parse().map_err(|_| l.to_string())?;
                f.ms = ms.parse().map_err(|_| l.to_string())?;
            } else {
                f.what = rest.to_string();
            }
        }
        if let Some(rest) = l.strip_prefix("speculation: ") {
            let (tpp, rest) = rest.split_once(" tokens per target pass, ").ok_or(l)?;
            f.tokens_per_pass = Some(tpp.parse().map_err(|_| l.to_string())?);
            f.taken = rest.to_string();
        }
    }
    if f.ms == 0.0 {
        return Err(format!("no board-sim figures in:\n{stderr}"));
    }
    Ok(f)
}

/// One `lmboot-host --board-sim` run.
fn sim(
    host: &Path,
    model: &Path,
    board: &str,
    mem: &str,
    prompt: &str,
    n: usize,
    extra: &[String],
) -> Result<Figures, String> {
    let out = Command::new(host)
        .arg("--model")
        .arg(model)
        .args(["--board-sim", board, "--mem", mem, "--prompt", prompt])
        .args(["-n", &n.to_string(), "--temp", "0", "--ctx", "512"])
        .args(extra)
        .output()
        .map_err(|e| format!("lmboot-host: {e}"))?;
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if !out.status.success() {
        return Err(format!(
            "lmboot-host --board-sim {board} {extra:?} failed:\n{se}"
        ));
    }
    parse(&so, &se)
}

/// The bench: every setup, prompt and board, with `n` tokens each.
pub fn run(n: usize) -> Result<String, String> {
    let host = crate::build_host()?;
    let mut md = String::new();
    let _ = writeln!(md, "# Speculative decoding where the weights stream (`cargo xtask bench --only speculative`)\n");
    let _ = writeln!(md, "Greedy, {n} tokens, `--speculate auto` (the planner on the board's clock). Each run is `lmboot-host --board-sim BOARD --mem RAM`: the kernel's page cache sized for that RAM, the bytes it reads from the model file counted, and a clock that charges them at the card's rate and the arithmetic at the cores' (the boards' figures below). \"plain\" is the same run without speculation; every speculative run printed the plain run's text, which the bench checks.\n");
    let mut boards_said = vec![];
    let _ = writeln!(md, "| model, RAM | source | prompt | tokens per target pass | guesses taken | card MB per token (plain) | Zero 2 W ms per token (plain) | Pi 4 ms per token (plain) |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    let mut summary = vec![];
    // The plain runs, shared by the setups of one model and RAM.
    let mut plain_runs: std::collections::HashMap<(String, String, String, String), Figures> =
        Default::default();
    for s in &SETUPS {
        let model = crate::ensure_named_model(s.model)?;
        let mut extra: Vec<String> = s.flags.iter().map(|f| f.to_string()).collect();
        if let Some(d) = s.draft {
            extra.push("--draft".into());
            extra.push(crate::ensure_named_model(d)?.display().to_string());
        }
        for (kind, prompt) in PROMPTS {
            let mut cells = vec![];
            for board in BOARDS {
                eprintln!(
                    "xtask: bench speculative {} {} {} {kind} {board}",
                    s.model, s.mem, s.source
                );
                let key = (s.model.into(), s.mem.into(), kind.into(), board.into());
                let plain = match plain_runs.get(&key) {
                    Some(p) => p.clone(),
                    None => {
                        let p = sim(&host, &model, board, s.mem, prompt, n, &[])?;
                        plain_runs.insert(key, p.clone());
                        p
                    }
                };
                let spec = sim(&host, &model, board, s.mem, prompt, n, &extra)?;
                if spec.text != plain.text {
                    return Err(format!(
                        "{} {} {kind} {board}: speculation changed the text:\n{}\n---\n{}",
                        s.model, s.source, plain.text, spec.text
                    ));
                }
                if !boards_said.contains(&spec.what) {
                    boards_said.push(spec.what.clone());
                }
                cells.push((plain, spec));
            }
            let (p0, s0) = &cells[0];
            let tpp = s0.tokens_per_pass.map_or("-".into(), |t| format!("{t:.2}"));
            let ms = |i: usize| {
                let (p, s) = &cells[i];
                format!("{:.0} ({:.0}), {:.2}x", s.ms, p.ms, p.ms / s.ms)
            };
            // A model held whole reads nothing from the card: no ratio to give.
            let bytes_ratio = match p0.bytes > 0.0 {
                true => format!("{:.2}x", s0.bytes / p0.bytes),
                false => "-".into(),
            };
            let _ = writeln!(
                md,
                "| {} at {} | {} | {kind} | {tpp} | {} | {:.1} ({:.1}), {bytes_ratio} | {} | {} |",
                s.model,
                s.mem,
                s.source,
                s0.taken,
                s0.bytes / 1e6,
                p0.bytes / 1e6,
                ms(0),
                ms(1)
            );
            summary.push((
                s.model,
                s.source,
                kind,
                cells
                    .iter()
                    .map(|(p, s)| p.ms / s.ms)
                    .fold(f64::INFINITY, f64::min),
            ));
        }
    }
    let _ = writeln!(
        md,
        "\nBoards (assumptions of the simulation; no board was at hand):\n"
    );
    for b in &boards_said {
        let _ = writeln!(md, "- {b}");
    }
    let worst = summary.iter().map(|s| s.3).fold(f64::INFINITY, f64::min);
    let _ = writeln!(md, "\nSlowest speculative run against its plain run, over every row and board: {worst:.2}x the plain speed (above 1: faster).");
    write_results("speculative", &md, None)?;
    Ok(md)
}
