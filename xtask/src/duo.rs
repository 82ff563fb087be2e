//! `cargo xtask bench --only xtheadvector`: the XTheadVector set's instructions per token and the
//! Milk-V Duo's predicted time per token.
//!
//! 1. **Instructions per token, counted in T-Head's emulator.** `lmboot-host` built for
//!    riscv64gc Linux runs the default model ("Once upon a time", greedy, one thread) under
//!    xuantie-qemu's user-mode `qemu-riscv64` with this repository's instruction-counting plugin
//!    (`xtask/insncount`: user mode has no `-icount`), once with 1 and once with 1 + `EXTRA`
//!    generated tokens: the difference over `EXTRA` is the count per generated token. The sets:
//!    scalar and `xtheadvector` on `-cpu c906fdv` (the Duo's C906, VLEN 128), and the RVV 1.0 set
//!    on `-cpu c908v` (T-Head's C908: RVV 1.0 at the same VLEN 128), so that both vector sets are
//!    counted by one emulator and one method. Every run must print the same text.
//! 2. **Bytes from the card per token on a 64 MB Duo**: the stand-in `qemu-virt-c906` (the
//!    C906's scalar ISA, one hart) booted at the Duo's usable RAM (the FIT's memory node, 64768
//!    KiB) with `ctx` 512 (the default) and 256, its stats' bytes read per generated token.
//! 3. **The prediction**: the card's time is those bytes at the bus's rate (High Speed at the
//!    Duo's 46.9 MHz: 23.4 MB/s, the ceiling; and 21.9 MB/s, what the Duo's SD card gave the TPU
//!    peer streaming SmolLM2 under Linux); the compute's is the xtheadvector count at 1 GHz and an assumed CPI (stated
//!    in the table: no C906 was at hand to measure it). With ADMA2 the card's reads are queued
//!    and land while the hart computes, so the time per token is the larger of the two; the sum
//!    is the bound without overlap. At 256 MB the model is resident: compute alone.

use crate::{
    board, build_kernel, card_image, ensure_model, qemu_command, run_quiet, workspace_root,
    QemuOpts, Settings,
};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Generated tokens beyond the first in the longer run.
const EXTRA: usize = 2;
const PROMPT: &str = "Once upon a time";

/// One counted run: the text and the instructions.
fn count(
    host: &Path,
    plugin: &Path,
    model: &Path,
    set: &str,
    cpu: &str,
    n: usize,
) -> Result<(String, u64), String> {
    let out_file =
        std::env::temp_dir().join(format!("lmboot-insns-{set}-{n}-{}", std::process::id()));
    let q = crate::xuantie::binary();
    let out = Command::new(&q)
        .args(["-L", "/usr/riscv64-linux-gnu", "-plugin"])
        .arg(plugin)
        .arg(host)
        .arg("--model")
        .arg(model)
        .args([
            "--prompt",
            PROMPT,
            "-n",
            &n.to_string(),
            "--temp",
            "0",
            "--threads",
            "1",
            "--kernels",
            set,
        ])
        .env("QEMU_CPU", cpu)
        .env("LMBOOT_INSNS", &out_file)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", q.display()))?;
    if !out.status.success() {
        return Err(format!(
            "lmboot-host --kernels {set} under -cpu {cpu}: {}",
            out.status
        ));
    }
    let n = fs::read_to_string(&out_file)
        .map_err(|e| format!("{}: {e} (the plugin wrote no count)", out_file.display()))?
        .trim()
        .parse()
        .map_err(|e| format!("the plugin's count: {e}"))?;
    let _ = fs::remove_file(&out_file);
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), n))
}

/// The plugin and the riscv64 Linux build of `lmboot-host`.
fn builds() -> Result<(PathBuf, PathBuf), String> {
    let mut c = crate::cargo();
    c.args(["build", "--release", "-p", "insncount"]);
    run_quiet(c, "building the instruction-counting plugin")?;
    let mut c = crate::cargo();
    c.args([
        "build",
        "--release",
        "-p",
        "host",
        "--bin",
        "lmboot-host",
        "--target",
        "riscv64gc-unknown-linux-gnu",
    ]);
    run_quiet(c, "building lmboot-host for riscv64gc Linux")?;
    let t = workspace_root().join("target");
    Ok((
        t.join("riscv64gc-unknown-linux-gnu/release/lmboot-host"),
        t.join("release/libinsncount.so"),
    ))
}

/// Bytes read from the card per generated token on the C906 stand-in at the Duo's RAM.
fn streamed(ctx: usize) -> Result<u64, String> {
    let b = board("qemu-virt-c906")?;
    let kernel = build_kernel(&b, true)?;
    let img = workspace_root()
        .join("target")
        .join(format!("duo-stream-{ctx}.img"));
    let s = Settings {
        prompt: PROMPT.into(),
        n: 4,
        ctx,
        ..Default::default()
    };
    card_image(&b, Some(&kernel), &s, &ensure_model()?, &img)?;
    let o = QemuOpts {
        mem: Some("64768K".into()),
        ..Default::default()
    };
    let out = qemu_command(&b, &kernel, &img, &o)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("QEMU: {e}"))?;
    let uart = String::from_utf8_lossy(&out.stdout);
    uart.split("bytes read ")
        .nth(1)
        .and_then(|r| r.split(" per generated token").next())
        .and_then(|r| r.rsplit(", ").next())
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| format!("the C906 stand-in printed no bytes per token:\n{uart}"))
}

/// Instructions per generated token of one set, and its text.
fn per_token(
    host: &Path,
    plugin: &Path,
    model: &Path,
    set: &str,
    cpu: &str,
) -> Result<(u64, String), String> {
    let (_, one) = count(host, plugin, model, set, cpu, 1)?;
    let (text, more) = count(host, plugin, model, set, cpu, 1 + EXTRA)?;
    Ok((more.saturating_sub(one) / EXTRA as u64, text))
}

/// The measurement and the table (`results/xtheadvector.md`).
pub fn run() -> Result<String, String> {
    crate::xuantie::ensure()?;
    let model = ensure_model()?;
    let (host, plugin) = builds()?;
    let sets = [
        ("scalar", "c906fdv"),
        ("xtheadvector", "c906fdv"),
        ("rvv", "c908v"),
    ];
    let mut rows = Vec::new();
    let mut text: Option<String> = None;
    for (set, cpu) in sets {
        let (n, t) = per_token(&host, &plugin, &model, set, cpu)?;
        match &text {
            Some(want) if *want != t => {
                return Err(format!(
                    "--kernels {set} printed another text:\n{t}\nthan:\n{want}"
                ))
            }
            _ => text = Some(t),
        }
        rows.push((set, cpu, n));
    }
    let xt = rows[1].2 as f64;
    let rvv = rows[2].2 as f64;
    let mut md = format!(
        "# XTheadVector: instructions per token, and the Milk-V Duo's time per token\n\n\
         `cargo xtask bench --only xtheadvector`. SmolLM2-135M Q4_1, \"{PROMPT}\", greedy, one thread; \
         `lmboot-host` for riscv64gc Linux under xuantie-qemu 20230825 (user mode) with the \
         `insncount` plugin; per generated token = (count with {} tokens - count with 1) / {EXTRA}. \
         All runs print the same text.\n\n| set | CPU model | instructions per generated token |\n|---|---|---|\n",
        1 + EXTRA
    );
    for (set, cpu, n) in &rows {
        md += &format!("| {set} | {cpu} | {:.1} M |\n", *n as f64 / 1e6);
    }
    md += &format!(
        "\nxtheadvector / rvv (VLEN 128) = {:.2} (target: at most 1.2)\n\n",
        xt / rvv
    );
    md += &prediction(xt)?;
    crate::bench::write_results("xtheadvector", &md, None)?;
    Ok(md)
}

/// The card's rates: the Duo's High Speed ceiling (its host divides 375 MHz by 8: 46.875 MHz on
/// four lines), and what the Duo's card gave the TPU peer streaming SmolLM2 under Linux.
const RATES: [(&str, f64); 2] = [
    (
        "High Speed at 46.9 MHz, its ceiling: 23.4 MB/s",
        46.875e6 / 2.0,
    ),
    ("21.9 MB/s (the peer's, under Linux)", 21.9e6),
];

/// The Duo's predicted time per token, streaming at 64 MB and resident at 256 MB.
fn prediction(xt: f64) -> Result<String, String> {
    let mut md = String::from(
        "## The Milk-V Duo's predicted time per token\n\n\
         Card bytes per generated token: the `qemu-virt-c906` stand-in at the Duo's usable RAM \
         (64768 KiB). Compute: the xtheadvector count above at 1 GHz, CPI assumed (C906: \
         single-issue, in order; 2 = every vector instruction twice a scalar one's cost, 4 = a \
         pessimistic bound). Overlapped: ADMA2 queues the reads, which land while the hart \
         computes (the larger of the two); sequential: their sum.\n\n\
         | RAM, ctx | card MB per token | card bus | card time | compute (CPI 2 / 4) | predicted, overlapped (CPI 2) | sequential (CPI 4) |\n|---|---|---|---|---|---|---|\n",
    );
    let compute = |cpi: f64| xt * cpi / 1e9;
    for ctx in [512usize, 256] {
        let bytes = streamed(ctx)? as f64;
        for (bus, rate) in RATES {
            let card = bytes / rate;
            md += &format!(
                "| 64 MB, {ctx} | {:.1} | {bus} | {card:.2} s | {:.2} / {:.2} s | {:.2} s | {:.2} s |\n",
                bytes / 1e6,
                compute(2.0),
                compute(4.0),
                card.max(compute(2.0)),
                card + compute(4.0)
            );
        }
    }
    md += &format!(
        "| 256 MB (resident) | 0 | - | 0 | {:.2} / {:.2} s | {:.2} s | {:.2} s |\n\n\
         Target: at most 2.5 s per token at 64 MB (half the TPU peer's 4.9 s).\n",
        compute(2.0),
        compute(4.0),
        compute(2.0),
        compute(4.0)
    );
    Ok(md)
}
