//! Models as GGUF describes them: the hyperparameters ([`Config`]), the weights as views into the
//! storage ([`Weights`]), the architectures as recipes of named pieces ([`arch`]), the one
//! forward pass they all run ([`forward`]) and the buffers it runs in ([`state`]).
//!
//! Only small tensors (norm weights, biases, RoPE factors) are copied to RAM at load; every matrix
//! stays in the storage and is read row range by row range during the forward pass.

pub mod arch;
pub mod exact;
pub mod forward;
mod path;
pub mod state;
pub mod tree;

use crate::fit::{self, TooLarge};
use crate::gguf::{Gguf, GgufError, TensorInfo};
use crate::matvec::MatvecError;
use crate::quant::{GgmlType, KernelError};
use crate::storage::{Storage, StorageError};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

pub use arch::{Activation, Recipe, RopeLayout};
pub use forward::{HeadRows, Input};
pub use state::RunState;
pub use tree::Tree;

/// A loaded model: hyperparameters and weight views (the weights stay in the storage).
#[derive(Debug, Clone)]
pub struct Model {
    pub config: Config,
    pub weights: Weights,
}

impl Model {
    /// Read the configuration and locate every weight.
    pub fn load<S: Storage + ?Sized>(g: &Gguf, src: &S) -> Result<Model, ModelError> {
        let config = Config::from_gguf(g)?;
        let weights = Weights::from_gguf(g, src, &config)?;
        Ok(Model { config, weights })
    }
}

/// The share of the model one board runs: a contiguous window of layers, and whether it holds the
/// ends (the embedding and the output head, on the ring's head board or a board alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub layers: core::ops::Range<usize>,
    pub ends: bool,
}

impl Part {
    /// All `n_layer` layers and the ends: a board alone.
    pub fn whole(n_layer: usize) -> Part {
        Part {
            layers: 0..n_layer,
            ends: true,
        }
    }

    /// Whether this part is the whole model.
    pub fn is_whole(&self, n_layer: usize) -> bool {
        self.ends && self.layers == (0..n_layer)
    }
}

/// Interleaved sliding-window attention (gemma3): which layers attend over a window, how wide it
/// is, and their RoPE base.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlidingWindow {
    /// Positions a local layer attends over: the token's own and the `window - 1` before it.
    pub window: usize,
    /// Of every `period` layers, all but the last are local.
    pub period: usize,
    /// RoPE base of the local layers.
    pub rope_base: f32,
}

/// How RoPE positions or frequencies are scaled for contexts beyond the trained one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RopeScaling {
    None,
    /// Positions divided by the factor.
    Linear(f32),
    /// Llama 3.x: each frequency divided by its own factor (`rope_freqs.weight`, or computed from
    /// these `rope.scaling.*` values when the file has no such tensor).
    Llama3 {
        factor: f32,
        low_freq_factor: f32,
        high_freq_factor: f32,
        original_context: usize,
    },
}

/// Hyperparameters, read from the GGUF metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The architecture's pieces.
    pub recipe: &'static Recipe,
    pub name: String,
    pub n_layer: usize,
    /// Embedding width.
    pub dim: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub ffn_dim: usize,
    pub vocab: usize,
    /// Dimensions of each head that RoPE rotates.
    pub rope_dim: usize,
    pub rope_base: f32,
    pub rope_scaling: RopeScaling,
    pub norm_eps: f32,
    /// Attention scores are `q·k * attn_scale` (1/sqrt(key length)).
    pub attn_scale: f32,
    /// Sliding-window layers, if the architecture has them.
    pub swa: Option<SlidingWindow>,
    /// The context length the model was trained with (the most it may be run with).
    pub train_ctx: usize,
}

impl Config {
    /// Width of the keys (and values) of one position.
    pub fn kv_dim(&self) -> usize {
        self.n_head_kv * self.head_dim
    }
    /// Width of all query heads.
    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim
    }
    /// The window layer `l` attends over (`None`: every position so far).
    pub fn window(&self, l: usize) -> Option<usize> {
        let s = self.swa?;
        (l % s.period < s.period - 1).then_some(s.window)
    }
    /// The linear RoPE position scale (1 for none).
    pub fn rope_position_scale(&self) -> f32 {
        match self.rope_scaling {
            RopeScaling::Linear(f) => f,
            _ => 1.0,
        }
    }
}

/// Why a model could not be loaded or run.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelError {
    Gguf(GgufError),
    /// A buffer or table could not be allocated.
    OutOfMemory(crate::oom::OutOfMemory),
    Storage(StorageError),
    Kernel(KernelError),
    /// `general.architecture` names a model lmboot does not run.
    UnsupportedArch {
        arch: String,
    },
    /// A hyperparameter is missing a sensible value.
    BadParam {
        key: String,
        value: String,
        why: &'static str,
    },
    /// A tensor has the wrong shape.
    BadShape {
        tensor: String,
        expected: [u64; 2],
        found: Vec<u64>,
    },
    /// A small tensor (norm, bias) has a type it cannot be read as.
    BadTensorType {
        tensor: String,
        ty: GgmlType,
    },
    /// A weight holds NaN or infinity.
    NonFinite {
        tensor: String,
        index: u64,
    },
    /// A block scale of a quantized tensor is NaN or infinite.
    NonFiniteScale {
        tensor: String,
        block: u64,
    },
    /// No room left in the KV cache.
    ContextFull {
        ctx: usize,
    },
    /// A token id outside the vocabulary.
    TokenOutOfRange {
        token: u32,
        vocab: usize,
    },
    /// The context length asked for is 0 or larger than the model's.
    BadContext {
        asked: usize,
        max: usize,
    },
    /// Matvec arguments disagree (a bug; reported rather than panicking).
    Matvec(String),
    /// A forward pass was given `tokens` tokens but the run state holds buffers for `1..=max`.
    Batch {
        tokens: usize,
        max: usize,
    },
    /// A pass over layers `layers` of a model of `n_layer` (empty, out of range, or starting from
    /// tokens without the embedding).
    Part {
        layers: core::ops::Range<usize>,
        n_layer: usize,
    },
    /// Something the model or the run needs in memory cannot be held on this board.
    TooLarge(TooLarge),
    /// A pass asked for the logits of every token, but the run state keeps no buffer for them
    /// (`RunState::keep_row_logits`).
    NoRowLogits,
    /// A rollback to position `to` from `pos`, with positions up to `top` written: later than
    /// `pos`, or further back than a window ring keeps.
    Rollback {
        to: usize,
        pos: usize,
        top: usize,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Gguf(e) => write!(f, "{e}"),
            ModelError::OutOfMemory(e) => write!(f, "{e}"),
            ModelError::Storage(e) => write!(f, "reading weights: {e}"),
            ModelError::Kernel(e) => write!(f, "kernel: {e}"),
            ModelError::UnsupportedArch { arch } => {
                write!(f, "architecture {arch:?} is not supported (these are:")?;
                for n in arch::names() {
                    write!(f, " {n}")?;
                }
                write!(f, ")")
            }
            ModelError::BadParam { key, value, why } => write!(f, "{key} = {value}: {why}"),
            ModelError::BadShape {
                tensor,
                expected,
                found,
            } => {
                write!(
                    f,
                    "tensor {tensor:?} has shape {found:?}, expected {expected:?}"
                )
            }
            ModelError::BadTensorType { tensor, ty } => {
                write!(
                    f,
                    "tensor {tensor:?} has type {ty}, which is not allowed there"
                )
            }
            ModelError::NonFiniteScale { tensor, block } => {
                write!(
                    f,
                    "tensor {tensor:?}: block {block} has a NaN or infinite scale"
                )
            }
            ModelError::NonFinite { tensor, index } => {
                write!(
                    f,
                    "tensor {tensor:?} holds NaN or infinity at element {index}"
                )
            }
            ModelError::ContextFull { ctx } => {
                write!(
                    f,
                    "context full: all {ctx} positions of the KV cache are used"
                )
            }
            ModelError::TokenOutOfRange { token, vocab } => {
                write!(f, "token id {token} is outside the vocabulary of {vocab}")
            }
            ModelError::BadContext { asked, max } => {
                write!(f, "context length {asked} is outside 1..={max}")
            }
            ModelError::Matvec(m) => write!(f, "matvec: {m}"),
            ModelError::Batch { tokens, max } => write!(
                f,
                "a forward pass of {tokens} tokens: the run state holds batches of 1 to {max}"
            ),
            ModelError::Part { layers, n_layer } => write!(
                f,
                "a pass over layers {}..{} of a {n_layer}-layer model cannot run here",
                layers.start, layers.end
            ),
            ModelError::TooLarge(e) => write!(f, "{e}"),
            ModelError::NoRowLogits => write!(
                f,
                "a pass asked for the logits of every token, but the run state keeps none"
            ),
            ModelError::Rollback { to, pos, top } => write!(
                f,
                "cannot roll back to position {to} from {pos} (positions up to {top} written; at most {} back)",
                crate::quant::MAX_BATCH
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ModelError {}

impl From<crate::oom::OutOfMemory> for ModelError {
    fn from(e: crate::oom::OutOfMemory) -> Self {
        ModelError::OutOfMemory(e)
    }
}

impl From<GgufError> for ModelError {
    fn from(e: GgufError) -> Self {
        ModelError::Gguf(e)
    }
}
impl From<TooLarge> for ModelError {
    fn from(e: TooLarge) -> Self {
        ModelError::TooLarge(e)
    }
}
impl From<StorageError> for ModelError {
    fn from(e: StorageError) -> Self {
        ModelError::Storage(e)
    }
}
impl From<MatvecError> for ModelError {
    fn from(e: MatvecError) -> Self {
        match e {
            MatvecError::Storage(s) => ModelError::Storage(s),
            MatvecError::Kernel(k) => ModelError::Kernel(k),
            other => ModelError::Matvec(alloc::format!("{other}")),
        }
    }
}

fn param(g: &Gguf, suffix: &str, min: i64, max: i64) -> Result<usize, ModelError> {
    Ok(g.get_int_in(&g.arch_key(suffix)?, min, max)? as usize)
}

fn param_or(
    g: &Gguf,
    suffix: &str,
    min: i64,
    max: i64,
    default: usize,
) -> Result<usize, ModelError> {
    let key = g.arch_key(suffix)?;
    if g.get(&key).is_none() {
        return Ok(default);
    }
    Ok(g.get_int_in(&key, min, max)? as usize)
}

fn float_or(
    g: &Gguf,
    suffix: &str,
    default: f32,
    ok: impl Fn(f32) -> bool,
    why: &'static str,
) -> Result<f32, ModelError> {
    let key = g.arch_key(suffix)?;
    let v = if g.get(&key).is_none() {
        default
    } else {
        g.get_f32(&key)?
    };
    if !v.is_finite() || !ok(v) {
        return Err(ModelError::BadParam {
            key,
            value: alloc::format!("{v}"),
            why,
        });
    }
    Ok(v)
}

impl Config {
    /// Read the hyperparameters; the vocabulary size comes from the embedding tensor.
    pub fn from_gguf(g: &Gguf) -> Result<Config, ModelError> {
        let arch_name = g.architecture()?;
        let recipe = arch::recipe(arch_name).ok_or_else(|| ModelError::UnsupportedArch {
            arch: arch_name.into(),
        })?;
        const BIG: i64 = 1 << 20;
        let n_layer = param(g, "block_count", 1, 4096)?;
        let dim = param(g, "embedding_length", 1, BIG)?;
        let n_head = param(g, "attention.head_count", 1, 4096)?;
        let n_head_kv = param_or(g, "attention.head_count_kv", 1, 4096, n_head)?;
        let ffn_dim = param(g, "feed_forward_length", 1, BIG)?;
        let train_ctx = param(g, "context_length", 1, 1 << 24)?;
        let key_length = g.arch_key("attention.key_length")?;
        if g.get(&key_length).is_none() && dim % n_head != 0 {
            return Err(ModelError::BadParam {
                key: g.arch_key("attention.head_count")?,
                value: alloc::format!("{n_head}"),
                why: "does not divide the embedding length",
            });
        }
        let head_dim = param_or(g, "attention.key_length", 1, 4096, dim / n_head)?;
        let value_length = param_or(g, "attention.value_length", 1, 4096, head_dim)?;
        if value_length != head_dim {
            return Err(ModelError::BadParam {
                key: g.arch_key("attention.value_length")?,
                value: alloc::format!("{value_length}"),
                why: "must equal attention.key_length",
            });
        }
        if n_head % n_head_kv != 0 {
            return Err(ModelError::BadParam {
                key: g.arch_key("attention.head_count_kv")?,
                value: alloc::format!("{n_head_kv}"),
                why: "must divide the number of query heads",
            });
        }
        let rope_dim = param_or(g, "rope.dimension_count", 2, 4096, head_dim)?;
        if rope_dim > head_dim || rope_dim % 2 != 0 {
            return Err(ModelError::BadParam {
                key: g.arch_key("rope.dimension_count")?,
                value: alloc::format!("{rope_dim}"),
                why: "must be even and at most the head dimension",
            });
        }
        let above_one = |v: f32| v > 1.0;
        let rope_base = float_or(g, "rope.freq_base", 10000.0, above_one, ABOVE_ONE)?;
        let norm_eps = float_or(
            g,
            "attention.layer_norm_rms_epsilon",
            1e-5,
            |v| v > 0.0 && v < 1.0,
            "must be in (0, 1)",
        )?;
        let swa = match recipe.swa_period {
            None => None,
            Some(period) => Some(SlidingWindow {
                window: param(g, "attention.sliding_window", 1, 1 << 24)?,
                period,
                rope_base: float_or(g, "rope.freq_base_swa", 10000.0, above_one, ABOVE_ONE)?,
            }),
        };
        let emb = g.require_tensor("token_embd.weight")?;
        // The logits hold one f32 for each row of the embedding.
        fit::fit(fit::bytes(emb.rows(), 4), || {
            alloc::format!("the logits of a vocabulary of {} tokens", emb.rows())
        })?;
        let vocab = emb.rows() as usize;
        let name = g.get_str("general.name").unwrap_or(arch_name);
        let name = crate::oom::copy_str(name, "the model's name")?;
        Ok(Config {
            recipe,
            name,
            n_layer,
            dim,
            n_head,
            n_head_kv,
            head_dim,
            ffn_dim,
            vocab,
            rope_dim,
            rope_base,
            rope_scaling: rope_scaling(g)?,
            norm_eps,
            attn_scale: 1.0 / libm::sqrtf(head_dim as f32),
            swa,
            train_ctx,
        })
    }
}

const ABOVE_ONE: &str = "must be a finite number above 1";

/// `rope.scaling.type` and its parameters.
fn rope_scaling(g: &Gguf) -> Result<RopeScaling, ModelError> {
    let key = g.arch_key("rope.scaling.type")?;
    let at_least_one = |v: f32| v >= 1.0;
    Ok(match g.get(&key).and_then(|v| v.as_str()) {
        None | Some("none") => RopeScaling::None,
        Some("linear") => RopeScaling::Linear(float_or(
            g,
            "rope.scaling.factor",
            1.0,
            at_least_one,
            "must be at least 1",
        )?),
        Some("llama3") => {
            let positive = |v: f32| v > 0.0;
            let low = float_or(g, "rope.scaling.low_freq_factor", 1.0, positive, POSITIVE)?;
            let high = float_or(g, "rope.scaling.high_freq_factor", 4.0, positive, POSITIVE)?;
            if high <= low {
                return Err(ModelError::BadParam {
                    key: g.arch_key("rope.scaling.high_freq_factor")?,
                    value: alloc::format!("{high}"),
                    why: "must be above rope.scaling.low_freq_factor",
                });
            }
            RopeScaling::Llama3 {
                factor: float_or(
                    g,
                    "rope.scaling.factor",
                    8.0,
                    at_least_one,
                    "must be at least 1",
                )?,
                low_freq_factor: low,
                high_freq_factor: high,
                original_context: param_or(
                    g,
                    "rope.scaling.original_context_length",
                    1,
                    1 << 24,
                    8192,
                )?,
            }
        }
        Some(other) => {
            return Err(ModelError::BadParam {
                key,
                value: other.into(),
                why: "only none, linear and llama3 RoPE scaling are supported",
            })
        }
    })
}

const POSITIVE: &str = "must be a positive number";

/// Llama 3's per-frequency RoPE factors (as llama.cpp's converter writes `rope_freqs.weight`):
/// frequencies whose wavelength is shorter than `original_context / high_freq_factor` keep their
/// value, those longer than `original_context / low_freq_factor` are divided by `factor`, and the
/// ones between blend smoothly.
pub fn llama3_rope_factors(c: &Config) -> Option<Vec<f32>> {
    let RopeScaling::Llama3 {
        factor,
        low_freq_factor: low,
        high_freq_factor: high,
        original_context: ctx,
    } = c.rope_scaling
    else {
        return None;
    };
    let (factor, low, high, ctx) = (factor as f64, low as f64, high as f64, ctx as f64);
    let (low_wavelen, high_wavelen) = (ctx / low, ctx / high);
    let factors = (0..c.rope_dim / 2).map(|i| {
        let freq = libm::pow(c.rope_base as f64, -2.0 * i as f64 / c.rope_dim as f64);
        let wavelen = 2.0 * core::f64::consts::PI / freq;
        if wavelen < high_wavelen {
            1.0
        } else if wavelen > low_wavelen {
            factor as f32
        } else {
            let smooth = (ctx / wavelen - low) / (high - low);
            (1.0 / ((1.0 - smooth) / factor + smooth)) as f32
        }
    });
    Some(factors.collect())
}

/// One transformer block's weights: matrices as views into the storage, small vectors in RAM.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: TensorInfo,
    pub wk: TensorInfo,
    pub wv: TensorInfo,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    /// Per-head RMSNorm weights of the queries and keys (`[head_dim]`), when the recipe has them.
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub wo: TensorInfo,
    /// RMSNorm of the attention output before the residual, when the recipe has it.
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub w_gate: TensorInfo,
    pub w_up: TensorInfo,
    pub w_down: TensorInfo,
    /// RMSNorm of the feed-forward output before the residual, when the recipe has it.
    pub post_ffn_norm: Option<Vec<f32>>,
}

/// All weights of a model.
#[derive(Debug, Clone)]
pub struct Weights {
    pub token_embd: TensorInfo,
    pub output_norm: Vec<f32>,
    /// The output head: `output.weight`, or `token_embd.weight` when the model ties them.
    pub output: TensorInfo,
    pub layers: Vec<LayerWeights>,
    /// Per-frequency RoPE divisors (`[rope_dim / 2]`, Llama 3.x), from `rope_freqs.weight` or the
    /// `rope.scaling.*` keys.
    pub rope_freqs: Option<Vec<f32>>,
}

impl Weights {
    /// Every matrix (the tensors read during the forward pass), in the order the pass reads them.
    pub fn matrices(&self) -> impl Iterator<Item = &TensorInfo> {
        self.layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down])
            .chain(core::iter::once(&self.output))
    }

    /// The file ranges `(offset, length)` one token's forward pass reads, in the order it reads
    /// them (for a page cache that evicts by next use).
    pub fn read_order(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.matrices().map(|t| (t.offset, t.size))
    }

    /// The matrices `part` reads, in the order its pass reads them: its layers', then the output
    /// head if it holds the ends.
    pub fn matrices_of<'a>(&'a self, part: &Part) -> impl Iterator<Item = &'a TensorInfo> + 'a {
        let layers = self.layers.get(part.layers.clone()).unwrap_or(&[]);
        layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down])
            .chain(part.ends.then_some(&self.output))
    }

    /// [`Weights::read_order`] of a part.
    pub fn read_order_of<'a>(&'a self, part: &Part) -> impl Iterator<Item = (u64, u64)> + 'a {
        self.matrices_of(part).map(|t| (t.offset, t.size))
    }

    /// The file ranges `part` reads at all, most used first: the embedding (when it holds the
    /// ends), then its matrices in read order. What a board with this part keeps in RAM.
    pub fn ranges_of<'a>(&'a self, part: &Part) -> impl Iterator<Item = (u64, u64)> + 'a {
        let embd = part.ends.then_some(&self.token_embd);
        embd.into_iter()
            .chain(self.matrices_of(part))
            .map(|t| (t.offset, t.size))
    }

    /// Bytes of the distinct tensors `part` reads (a tied output head counts once).
    pub fn bytes_of(&self, part: &Part) -> u64 {
        let mut seen = alloc::collections::BTreeSet::new();
        self.ranges_of(part)
            .filter(|&(o, _)| seen.insert(o))
            .map(|(_, n)| n)
            .sum()
    }

    /// Largest row of any matrix, in bytes.
    pub fn max_row_bytes(&self) -> u64 {
        self.matrices()
            .chain(core::iter::once(&self.token_embd))
            .map(|t| t.row_bytes())
            .max()
            .unwrap_or(0)
    }
}

fn matrix(g: &Gguf, name: &str, cols: usize, rows: usize) -> Result<TensorInfo, ModelError> {
    let t = g.require_tensor(name)?;
    if t.n_dims > 2 || t.row_len() != cols as u64 || t.rows() != rows as u64 {
        return Err(ModelError::BadShape {
            tensor: name.into(),
            expected: [cols as u64, rows as u64],
            found: t.shape().to_vec(),
        });
    }
    Ok(t.try_clone()?)
}

/// Read a small 1-D tensor of `n` values into RAM as f32, rejecting NaN and infinity.
fn vector<S: Storage + ?Sized>(
    g: &Gguf,
    src: &S,
    name: &str,
    n: usize,
) -> Result<Vec<f32>, ModelError> {
    let t = g.require_tensor(name)?;
    if t.n_elements() != n as u64 {
        return Err(ModelError::BadShape {
            tensor: name.into(),
            expected: [n as u64, 1],
            found: t.shape().to_vec(),
        });
    }
    if !matches!(t.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16) {
        return Err(ModelError::BadTensorType {
            tensor: name.into(),
            ty: t.ty,
        });
    }
    let size = fit::fit(t.size, || alloc::format!("tensor {name:?}"))?;
    let mut bytes = crate::oom::filled(size, 0u8, "a norm or bias vector's bytes")?;
    src.read_at(t.offset, &mut bytes)?;
    let mut out = crate::oom::filled(n, 0f32, "a norm or bias vector")?;
    crate::quant::dequantize_row(t.ty, &bytes, &mut out);
    if let Some(index) = out.iter().position(|v| !v.is_finite()) {
        return Err(ModelError::NonFinite {
            tensor: name.into(),
            index: index as u64,
        });
    }
    Ok(out)
}

impl Weights {
    /// Find, shape-check and (for small vectors) load every weight of `cfg`'s model.
    pub fn from_gguf<S: Storage + ?Sized>(
        g: &Gguf,
        src: &S,
        cfg: &Config,
    ) -> Result<Weights, ModelError> {
        let (d, q, kv, f) = (cfg.dim, cfg.q_dim(), cfg.kv_dim(), cfg.ffn_dim);
        let token_embd = matrix(g, "token_embd.weight", d, cfg.vocab)?;
        let output = match g.tensor("output.weight") {
            Some(_) => matrix(g, "output.weight", d, cfg.vocab)?,
            None => token_embd.try_clone()?,
        };
        let output_norm = vector(g, src, "output_norm.weight", d)?;
        let r = cfg.recipe;
        let mut layers = crate::oom::with_capacity(cfg.n_layer, "the layers' weights")?;
        for l in 0..cfg.n_layer {
            let n = |s: &str| crate::oom::format(format_args!("blk.{l}.{s}"), "a tensor name");
            // A vector the recipe has (else `None`).
            let opt = |has: bool, s: &str, len| -> Result<Option<Vec<f32>>, ModelError> {
                has.then(|| vector(g, src, &n(s)?, len)).transpose()
            };
            layers.push(LayerWeights {
                attn_norm: vector(g, src, &n("attn_norm.weight")?, d)?,
                wq: matrix(g, &n("attn_q.weight")?, d, q)?,
                wk: matrix(g, &n("attn_k.weight")?, d, kv)?,
                wv: matrix(g, &n("attn_v.weight")?, d, kv)?,
                bq: opt(r.qkv_bias, "attn_q.bias", q)?,
                bk: opt(r.qkv_bias, "attn_k.bias", kv)?,
                bv: opt(r.qkv_bias, "attn_v.bias", kv)?,
                q_norm: opt(r.qk_norm, "attn_q_norm.weight", cfg.head_dim)?,
                k_norm: opt(r.qk_norm, "attn_k_norm.weight", cfg.head_dim)?,
                wo: matrix(g, &n("attn_output.weight")?, q, d)?,
                post_attn_norm: opt(r.post_norms, "post_attention_norm.weight", d)?,
                ffn_norm: vector(g, src, &n("ffn_norm.weight")?, d)?,
                w_gate: matrix(g, &n("ffn_gate.weight")?, d, f)?,
                w_up: matrix(g, &n("ffn_up.weight")?, d, f)?,
                w_down: matrix(g, &n("ffn_down.weight")?, f, d)?,
                post_ffn_norm: opt(r.post_norms, "post_ffw_norm.weight", d)?,
            });
        }
        let rope_freqs = match g.tensor("rope_freqs.weight") {
            Some(_) => Some(vector(g, src, "rope_freqs.weight", cfg.rope_dim / 2)?),
            None => llama3_rope_factors(cfg),
        };
        if let Some(v) = rope_freqs.iter().flatten().find(|&&v| v <= 0.0) {
            return Err(ModelError::BadParam {
                key: "rope_freqs.weight".into(),
                value: alloc::format!("{v}"),
                why: "RoPE frequency factors must be positive",
            });
        }
        Ok(Weights {
            token_embd,
            output_norm,
            output,
            layers,
            rope_freqs,
        })
    }
}

fn f16_finite(b: &[u8], at: usize) -> bool {
    u16::from_le_bytes([b[at], b[at + 1]]) & 0x7c00 != 0x7c00
}

/// Check that tensor `t` holds no NaN or infinity: every value of a float tensor, every block scale
/// of a quantized one. Reads the tensor through `src` in chunks of `scratch`.
pub fn check_finite<S: Storage + ?Sized>(
    src: &S,
    t: &TensorInfo,
    scratch: &mut [u8],
) -> Result<(), ModelError> {
    let bb = t.ty.block_bytes();
    if scratch.len() < bb {
        return Err(ModelError::Matvec(alloc::format!(
            "scratch of {} bytes is smaller than a block",
            scratch.len()
        )));
    }
    let chunk = scratch.len() / bb * bb;
    let mut done = 0u64;
    while done < t.size {
        let n = (chunk as u64).min(t.size - done) as usize;
        let buf = &mut scratch[..n];
        src.read_at(t.offset + done, buf)?;
        for (i, b) in buf.chunks_exact(bb).enumerate() {
            let block = done / bb as u64 + i as u64;
            let ok = match t.ty {
                GgmlType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite(),
                GgmlType::F16 => f16_finite(b, 0),
                GgmlType::Bf16 => u16::from_le_bytes([b[0], b[1]]) & 0x7f80 != 0x7f80,
                ty => ty.info().scales.iter().all(|&at| f16_finite(b, at)),
            };
            if !ok {
                return Err(match t.ty {
                    GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16 => ModelError::NonFinite {
                        tensor: t.name.clone(),
                        index: block,
                    },
                    _ => ModelError::NonFiniteScale {
                        tensor: t.name.clone(),
                        block,
                    },
                });
            }
        }
        done += n as u64;
    }
    Ok(())
}

impl Weights {
    /// [`check_finite`] over every matrix and the embedding table (each tensor once).
    pub fn check_finite<S: Storage + ?Sized>(
        &self,
        src: &S,
        scratch: &mut [u8],
    ) -> Result<(), ModelError> {
        self.check_finite_of(&Part::whole(self.layers.len()), src, scratch)
    }

    /// [`Weights::check_finite`] for the tensors `part` reads.
    pub fn check_finite_of<S: Storage + ?Sized>(
        &self,
        part: &Part,
        src: &S,
        scratch: &mut [u8],
    ) -> Result<(), ModelError> {
        let embd = part.ends.then_some(&self.token_embd);
        let tensors = || self.matrices_of(part).chain(embd);
        for (i, t) in tensors().enumerate() {
            // Each tensor once (a tied output head is the embedding), without a set to allocate.
            if !tensors().take(i).any(|u| u.offset == t.offset) {
                check_finite(src, t, scratch)?;
            }
        }
        Ok(())
    }
}
