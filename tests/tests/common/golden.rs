//! Reading `../shared/golden/NAME.*` and comparing distributions.

use std::path::PathBuf;

pub struct Case {
    pub name: String,
    /// The model it was made with: `None` for the default model (cases at the top of
    /// `golden/`), else the name `cargo xtask fetch-model` knows it by (cases in `golden/models/`).
    pub model: Option<&'static str>,
    pub prompt: Vec<u8>,
    pub prompt_ids: Vec<u32>,
    pub generated_ids: Vec<u32>,
    /// (step, chosen id, top-5 (id, logit)) per step.
    pub steps: Vec<(usize, u32, Vec<(u32, f32)>)>,
    pub out: Vec<u8>,
    pub ref64: PathBuf,
    pub logits0: PathBuf,
}

impl Case {
    /// The prompt's tokens followed by the reply's: a whole conversation to feed.
    pub fn conversation_ids(&self) -> Vec<u32> {
        self.prompt_ids
            .iter()
            .chain(&self.generated_ids)
            .copied()
            .collect()
    }
}

fn ids(s: &str) -> Vec<u32> {
    s.split_whitespace().map(|t| t.parse().unwrap()).collect()
}

/// The folder of the golden cases.
pub fn dir() -> PathBuf {
    super::shared().join("golden")
}

/// The models of the cases in `golden/models/`: the file named on a case's first line, and the
/// name `cargo xtask fetch-model` fetches it by.
const MODELS: &[(&str, &str)] = &[
    ("gemma-3-270m-q4_k_m.gguf", "gemma-3-270m"),
    (
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "qwen2.5-coder-0.5b",
    ),
];

/// Names of all golden cases present (NAME.txt files), sorted: the default model's at the top of
/// `golden/`, then `models/NAME` for the other models' cases.
pub fn names() -> Vec<String> {
    let mut names = names_in(&dir());
    names.extend(
        names_in(&dir().join("models"))
            .into_iter()
            .map(|n| format!("models/{n}")),
    );
    names
}

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".txt")
                .map(String::from)
        })
        .collect();
    names.sort();
    names
}

/// All golden cases present (NAME.txt files).
pub fn cases() -> Vec<Case> {
    let mut names = names();
    // LMBOOT_GOLDEN_CASES=a,b limits the run (slow emulated targets check a subset); a name
    // matches with or without its `models/` folder.
    if let Ok(only) = std::env::var("LMBOOT_GOLDEN_CASES") {
        let only: Vec<&str> = only.split(',').filter(|s| !s.is_empty()).collect();
        if !only.is_empty() {
            names.retain(|n| {
                only.iter()
                    .any(|o| n == o || n.strip_prefix("models/") == Some(o))
            });
        }
    }
    assert!(!names.is_empty(), "no golden cases in {}", dir().display());
    names.into_iter().map(|n| load(&n)).collect()
}

pub fn load(name: &str) -> Case {
    let dir = dir();
    let txt = std::fs::read_to_string(dir.join(format!("{name}.txt"))).unwrap();
    let model = txt
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("model: "))
        .filter(|_| name.starts_with("models/"))
        .map(|file| {
            MODELS
                .iter()
                .find(|(f, _)| *f == file.trim())
                .unwrap_or_else(|| panic!("{name}: model {file:?} is not in golden::MODELS"))
                .1
        });
    let mut c = Case {
        name: name.trim_start_matches("models/").into(),
        model,
        prompt: std::fs::read(dir.join(format!("{name}.prompt"))).unwrap(),
        prompt_ids: vec![],
        generated_ids: vec![],
        steps: vec![],
        out: std::fs::read(dir.join(format!("{name}.out"))).unwrap(),
        ref64: dir.join(format!("{name}.ref64.f32")),
        logits0: dir.join(format!("{name}.logits0.f32")),
    };
    for line in txt.lines() {
        if let Some(r) = line.strip_prefix("prompt_ids:") {
            c.prompt_ids = ids(r);
        } else if let Some(r) = line.strip_prefix("generated_ids:") {
            c.generated_ids = ids(r);
        } else if let Some(r) = line.strip_prefix("step ") {
            let parts: Vec<&str> = r.split_whitespace().collect();
            let step = parts[0].parse().unwrap();
            let id = parts[2].parse().unwrap();
            let top = parts[4..]
                .iter()
                .map(|p| {
                    let (i, l) = p.split_once(':').unwrap();
                    (i.parse().unwrap(), l.parse().unwrap())
                })
                .collect();
            c.steps.push((step, id, top));
        }
    }
    assert!(
        !c.prompt_ids.is_empty() && !c.generated_ids.is_empty(),
        "{name}: unreadable golden file"
    );
    c
}

/// Rows of little-endian f32 of width `n`.
pub fn rows(path: &std::path::Path, n: usize) -> Vec<Vec<f32>> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(
        b.len() % (n * 4),
        0,
        "{}: not whole rows of {n}",
        path.display()
    );
    b.chunks_exact(n * 4)
        .map(|r| {
            r.chunks_exact(4)
                .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
                .collect()
        })
        .collect()
}

/// log-softmax in f64.
pub fn log_softmax(x: &[f32]) -> Vec<f64> {
    let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let lse = max + x.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
    x.iter().map(|&v| v as f64 - lse).collect()
}

/// KL(reference || ours) in nats.
pub fn kl(reference: &[f32], ours: &[f32]) -> f64 {
    let lp = log_softmax(reference);
    let lq = log_softmax(ours);
    lp.iter().zip(&lq).map(|(&a, &b)| a.exp() * (a - b)).sum()
}

/// Index of the largest value and the margin to the second largest.
pub fn top2(x: &[f32]) -> (usize, f32) {
    let mut best = (0, f32::NEG_INFINITY);
    let mut second = f32::NEG_INFINITY;
    for (i, &v) in x.iter().enumerate() {
        if v > best.1 {
            second = best.1;
            best = (i, v);
        } else if v > second {
            second = v;
        }
    }
    (best.0, best.1 - second)
}
