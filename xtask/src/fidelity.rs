//! `cargo xtask fidelity`: the error budget. Each golden case is run teacher-forced by
//! `lmboot-host` as lmboot runs it, then with one approximation at a time made exact (`--exact`:
//! a product's 8-bit activations, the f16 K/V, the attention sums), and the mean KL divergence
//! from the float64 reference is reported for each, beside llama.cpp's own mean. What an
//! approximation costs is the drop when it alone is made exact. Writes `results/fidelity.md`.

use crate::{build_host, ensure_model, ensure_named_model, shared_dir};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The switches measured, one column each ("" = lmboot as it runs).
const VARIANTS: [&str; 13] = [
    "",
    "q",
    "k",
    "v",
    "o",
    "gate",
    "up",
    "down",
    "output",
    "acts",
    "kv",
    "attention",
    "acts,kv,attention",
];

/// The golden cases: (case file stem, model path, llama.cpp's mean KL from `shared/README.md`).
fn cases() -> Result<Vec<(PathBuf, PathBuf, &'static str)>, String> {
    let g = shared_dir().join("golden");
    let default = ensure_model()?;
    let mut v = vec![];
    for (name, theirs) in [
        ("smollm2-capital", "0.0025"),
        ("smollm2-chat-mountain", "0.0023"),
        ("smollm2-fib", "0.0026"),
        ("smollm2-once", "0.0037"),
    ] {
        v.push((g.join(name), default.clone(), theirs));
    }
    for (name, model, theirs) in [
        ("qwen05-chat-prime", "qwen2.5-coder-0.5b", "0.0001"),
        ("gemma3-colors", "gemma-3-270m", "0.0033"),
    ] {
        v.push((
            g.join("models").join(name),
            ensure_named_model(model)?,
            theirs,
        ));
    }
    Ok(v)
}

/// log-softmax of one row, in f64.
fn log_softmax(x: &[f32]) -> Vec<f64> {
    let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let lse = max + x.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
    x.iter().map(|&v| v as f64 - lse).collect()
}

fn read_f32(path: &Path) -> Result<Vec<f32>, String> {
    let b = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Mean over the steps of KL(reference ‖ ours), both files rows of `vocab` f32.
fn mean_kl(reference: &Path, ours: &Path, vocab: usize) -> Result<f64, String> {
    let (r, o) = (read_f32(reference)?, read_f32(ours)?);
    if r.len() != o.len() || r.is_empty() || r.len() % vocab != 0 {
        return Err(format!(
            "{}: {} values against the reference's {}",
            ours.display(),
            o.len(),
            r.len()
        ));
    }
    let rows = r.len() / vocab;
    let mut sum = 0.0;
    for (a, b) in r.chunks_exact(vocab).zip(o.chunks_exact(vocab)) {
        let (lp, lq) = (log_softmax(a), log_softmax(b));
        sum += lp
            .iter()
            .zip(&lq)
            .map(|(&p, &q)| p.exp() * (p - q))
            .sum::<f64>();
    }
    Ok(sum / rows as f64)
}

/// The vocabulary size of a case: its `logits0` file holds one row.
fn vocab_of(case: &Path) -> Result<usize, String> {
    let p = case.with_extension("logits0.f32");
    Ok(std::fs::metadata(&p)
        .map_err(|e| format!("{}: {e}", p.display()))?
        .len() as usize
        / 4)
}

/// Run every case under every variant; the markdown table.
pub fn run() -> Result<String, String> {
    let host = build_host()?;
    let tmp = std::env::temp_dir().join(format!("lmboot-fidelity-{}.f32", std::process::id()));
    let mut md =
        String::from("# Error budget: mean KL from the float64 reference, teacher-forced\n\n");
    let _ = writeln!(md, "Each column makes one approximation exact (`lmboot-host --exact`); a product's column keeps its input in f32 (weights dequantized, sums in f64).\n");
    let head: Vec<&str> = VARIANTS
        .iter()
        .map(|v| if v.is_empty() { "lmboot" } else { v })
        .collect();
    let _ = writeln!(md, "| case | llama.cpp | {} |", head.join(" | "));
    let _ = writeln!(md, "|---|---|{}", "---|".repeat(VARIANTS.len()));
    for (case, model, theirs) in cases()? {
        let stem = case
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or("?")
            .to_string();
        let vocab = vocab_of(&case)?;
        let mut row = vec![];
        for v in VARIANTS {
            eprintln!("xtask: fidelity {stem} --exact {v:?}");
            let out = Command::new(&host)
                .arg("--model")
                .arg(&model)
                .arg("--teacher")
                .arg(case.with_extension("txt"))
                .arg("--dump-logits")
                .arg(&tmp)
                .args(["--exact", v])
                .output()
                .map_err(|e| format!("running lmboot-host: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "{stem} --exact {v:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            row.push(format!(
                "{:.5}",
                mean_kl(&case.with_extension("ref64.f32"), &tmp, vocab)?
            ));
        }
        let _ = writeln!(md, "| {stem} | {theirs} | {} |", row.join(" | "));
    }
    let _ = std::fs::remove_file(&tmp);
    crate::bench::write_results("fidelity", &md, None)?;
    Ok(md)
}
