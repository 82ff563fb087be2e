//! Shared helpers for the integration tests: reference data paths and the default model.
#![allow(dead_code)]

use inference::storage::FileStorage;
use inference::{Gguf, Storage};
use std::path::PathBuf;

/// `../shared` beside the repository.
pub fn shared() -> PathBuf {
    let d = xtask::shared_dir();
    assert!(
        d.is_dir(),
        "reference data not found at {} (set LMBOOT_SHARED)",
        d.display()
    );
    d
}

/// The default model, fetched into the cache if needed.
pub fn model_path() -> PathBuf {
    xtask::ensure_model().unwrap_or_else(|e| panic!("default model unavailable: {e}"))
}

/// A model `cargo xtask fetch-model NAME` knows, fetched into the cache if needed.
pub fn named_model(name: &str) -> PathBuf {
    // One fetch at a time in this process (tests run in parallel threads; `cargo xtask test`
    // fetches them all before the tests start).
    static FETCH: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = FETCH.lock().unwrap_or_else(|e| e.into_inner());
    xtask::ensure_named_model(name).unwrap_or_else(|e| panic!("model {name} unavailable: {e}"))
}

/// The model a golden case was made with.
pub fn case_model(case: &golden::Case) -> PathBuf {
    case.model.map_or_else(model_path, named_model)
}

/// The golden cases grouped by model (the default model's first), each model opened once.
pub fn cases_by_model() -> Vec<(PathBuf, Vec<golden::Case>)> {
    let mut groups: Vec<(PathBuf, Vec<golden::Case>)> = vec![];
    for case in golden::cases() {
        let path = case_model(&case);
        match groups.iter_mut().find(|(p, _)| *p == path) {
            Some((_, g)) => g.push(case),
            None => groups.push((path, vec![case])),
        }
    }
    groups
}

/// Run the PC runner `bin` on `model` with `args`; its output, whatever its status.
pub fn run_host<S: AsRef<std::ffi::OsStr>>(
    bin: &std::path::Path,
    model: &std::path::Path,
    args: impl IntoIterator<Item = S>,
) -> std::process::Output {
    std::process::Command::new(bin)
        .arg("--model")
        .arg(model)
        .args(args)
        .output()
        .unwrap()
}

/// [`run_host`], which must succeed (else the test fails with its stderr).
pub fn host_ok<S: AsRef<std::ffi::OsStr>>(
    bin: &std::path::Path,
    model: &std::path::Path,
    args: impl IntoIterator<Item = S>,
) -> std::process::Output {
    let out = run_host(bin, model, args);
    assert!(
        out.status.success(),
        "lmboot-host failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn open(path: &std::path::Path) -> (FileStorage, Gguf) {
    let src = FileStorage::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let g = Gguf::open(&src).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (src, g)
}

/// All bytes of tensor `name`.
pub fn tensor_bytes<S: Storage>(src: &S, g: &Gguf, name: &str) -> Vec<u8> {
    let t = g.require_tensor(name).unwrap();
    let mut buf = vec![0u8; t.size as usize];
    src.read_at(t.offset, &mut buf).unwrap();
    buf
}

/// Tensor `name` (F32) as floats.
pub fn tensor_f32<S: Storage>(src: &S, g: &Gguf, name: &str) -> Vec<f32> {
    assert_eq!(
        g.require_tensor(name).unwrap().ty,
        inference::GgmlType::F32,
        "{name} is not F32"
    );
    tensor_bytes(src, g, name)
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

pub mod boot;
pub mod golden;
pub mod models;
pub mod synth;

/// The weight-type fixtures in `shared/fixtures/quant`: file stem (the type's name in lower case)
/// and type, for every type of the type table that has one (a type added after the fixtures is
/// named on the output and skipped). Iterate it: `for (stem, ty) in QUANT_FIXTURES`.
pub const QUANT_FIXTURES: QuantFixtures = QuantFixtures;

/// See [`QUANT_FIXTURES`].
pub struct QuantFixtures;

/// The types added after the shared fixtures were made (their names as the table prints them).
pub const WITHOUT_FIXTURE: [&str; 1] = ["IQ4_NL"];

impl IntoIterator for QuantFixtures {
    type Item = (String, inference::GgmlType);
    type IntoIter = std::vec::IntoIter<Self::Item>;

    fn into_iter(self) -> Self::IntoIter {
        let dir = shared().join("fixtures/quant");
        let mut v = Vec::new();
        for t in &inference::quant::types::TYPES {
            let stem = t.name.to_ascii_lowercase();
            if dir.join(format!("{stem}.gguf")).is_file() {
                v.push((stem, t.ty));
            } else {
                // Only a type added after the fixtures may lack one (it has a test of known
                // values in quant_fixtures.rs instead).
                assert!(
                    WITHOUT_FIXTURE.contains(&t.name),
                    "no fixture {stem}.gguf in {} for {}",
                    dir.display(),
                    t.name
                );
                eprintln!("no fixture for {}: skipped", t.name);
            }
        }
        assert!(!v.is_empty(), "no fixtures in {}", dir.display());
        v.into_iter()
    }
}

/// xorshift64*: a deterministic generator for the tests' random inputs.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
