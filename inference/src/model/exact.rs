//! The error budget's switches: approximations of the forward pass that can be made exact one at a
//! time, to measure what each costs against the float64 reference (`cargo xtask fidelity`). All
//! are off in a normal run, where none of this code is reached; with one on, the pass runs on the
//! exact kernel path (`ExactPath` in `path.rs`), slow, single-threaded and allocating for the
//! steps switched on (a measuring tool, not a mode to run in).

use super::tree::Tree;
use super::{Config, ModelError};
use crate::gguf::TensorInfo;
use crate::kv::KvCache;
use crate::matvec::read_row_f32;
use crate::ops::RopeTable;
use crate::quant::MAX_BATCH;
use crate::storage::Storage;
use alloc::vec;
use alloc::vec::Vec;

/// The products, in the order of [`Exact::acts`] (the forward pass's `Product` order, then the
/// output head).
pub const PRODUCTS: [&str; 8] = ["q", "k", "v", "gate", "up", "o", "down", "output"];

/// Which approximations to make exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exact {
    /// Products whose input is not quantized to 8 bits: each weight row dequantized and dotted
    /// with the f32 input in f64 (indexed as [`PRODUCTS`]).
    pub acts: [bool; 8],
    /// Keys and values kept in f32 beside the f16 cache, and attention read from them.
    pub kv: bool,
    /// Scores, softmax and the weighted sum of values in f64 (over the f16 cache unless `kv`).
    pub attention: bool,
}

impl Exact {
    /// Turn on the switch `name`: a product of [`PRODUCTS`], `acts` (all of them), `kv` or
    /// `attention`. `false` for an unknown name.
    pub fn set(&mut self, name: &str) -> bool {
        match name {
            "acts" => self.acts = [true; 8],
            "kv" => self.kv = true,
            "attention" => self.attention = true,
            p => match PRODUCTS.iter().position(|&q| q == p) {
                Some(i) => self.acts[i] = true,
                None => return false,
            },
        }
        true
    }

    /// Whether attention takes the exact path.
    pub fn attention_path(&self) -> bool {
        self.kv || self.attention
    }
}

/// `out[i][r] = Σ_c W[r][c] · x[i][c]` for the `b` inputs of `x` (`[b][cols]`), the weights
/// dequantized to f32 and the sum in f64; `out` is `[b][rows]`.
pub fn product<S: Storage + ?Sized>(
    src: &S,
    w: &TensorInfo,
    x: &[f32],
    b: usize,
    out: &mut [f32],
    scratch: &mut [u8],
) -> Result<(), ModelError> {
    let (rows, cols) = (w.rows() as usize, w.row_len() as usize);
    let mut row = vec![0f32; cols];
    for r in 0..rows {
        read_row_f32(src, w, r, &mut row, scratch)?;
        for i in 0..b {
            let xi = &x[i * cols..(i + 1) * cols];
            let s: f64 = row.iter().zip(xi).map(|(&a, &v)| a as f64 * v as f64).sum();
            out[i * rows + r] = s as f32;
        }
    }
    Ok(())
}

/// The f32 keys and values of the exact path: `[layer][pos][kv_dim]` each.
#[derive(Debug, Clone)]
pub struct Kv32 {
    ctx: usize,
    kv_dim: usize,
    k: Vec<f32>,
    v: Vec<f32>,
}

impl Kv32 {
    pub fn new(layers: usize, ctx: usize, kv_dim: usize) -> Self {
        let n = layers * ctx * kv_dim;
        Self {
            ctx,
            kv_dim,
            k: vec![0.0; n],
            v: vec![0.0; n],
        }
    }
    fn at(&self, l: usize, pos: usize) -> core::ops::Range<usize> {
        let s = (l * self.ctx + pos) * self.kv_dim;
        s..s + self.kv_dim
    }
    /// Copy layer `l`'s K/V at position `from` to position `to`.
    pub fn copy(&mut self, l: usize, from: usize, to: usize) {
        let (a, b) = (self.at(l, from), self.at(l, to));
        self.k.copy_within(a.clone(), b.start);
        self.v.copy_within(a, b.start);
    }

    /// Keep `k`, `v` of layer `l` at `pos`.
    pub fn store(&mut self, l: usize, pos: usize, k: &[f32], v: &[f32]) {
        let r = self.at(l, pos);
        self.k[r.clone()].copy_from_slice(k);
        self.v[r].copy_from_slice(v);
    }
}

/// Where the exact attention reads keys and values: the f32 copies, or the f16 cache.
#[derive(Debug, Clone, Copy)]
pub enum KvSource<'a> {
    F32(&'a Kv32),
    F16(&'a KvCache),
}

/// One layer's attention for the batch's `b` tokens from position `pos` (rows of `tree`, when
/// the batch is one), in f64: `q` is `[b][n_head * hd]` (RoPE not yet applied when the heads are
/// short enough for the pass to rotate them in its jobs, as `rope_q` says), `att` the output.
pub fn attend(
    c: &Config,
    l: usize,
    (pos, b, tree): (usize, usize, Option<&Tree>),
    q: &[f32],
    rope: Option<&RopeTable>,
    kv: KvSource<'_>,
    att: &mut [f32],
) {
    let (hd, qd, n_head) = (c.head_dim, c.q_dim(), c.n_head);
    let group = n_head / c.n_head_kv;
    let window = c.window(l);
    for i in 0..b {
        let p = pos + tree.map_or(i, |t| t.depth(i));
        let n = window.map_or(p + 1, |w| w.min(p + 1));
        // Where the t-th position seen is stored: in order, then (a tree's row) on its path.
        let mut rows = [0u8; MAX_BATCH];
        let path = tree.map_or(&[][..], |t| t.path(i, &mut rows));
        let path = &path[path.len() - path.len().min(n)..];
        let run = n - path.len();
        let at = |t: usize| {
            if t < run {
                p + 1 - n + t
            } else {
                pos + path[t - run] as usize
            }
        };
        for h in 0..n_head {
            let mut qh = q[i * qd + h * hd..i * qd + (h + 1) * hd].to_vec();
            if let Some(t) = rope {
                t.apply(&mut qh, hd, p);
            }
            let off = (h / group) * hd;
            let row = |t: usize, keys: bool| -> Vec<f64> { kv_row(kv, l, at(t), off, hd, keys) };
            let scores: Vec<f64> = (0..n)
                .map(|t| {
                    let k = row(t, true);
                    qh.iter().zip(&k).map(|(&a, &b)| a as f64 * b).sum::<f64>()
                        * c.attn_scale as f64
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| libm::exp(s - m)).collect();
            let z: f64 = e.iter().sum();
            let mut o = vec![0f64; hd];
            for (t, w) in e.iter().enumerate() {
                for (o, v) in o.iter_mut().zip(row(t, false)) {
                    *o += w / z * v;
                }
            }
            let dst = &mut att[i * qd + h * hd..i * qd + (h + 1) * hd];
            for (d, v) in dst.iter_mut().zip(o) {
                *d = v as f32;
            }
        }
    }
}

/// `hd` values from `off` of the key (`keys`) or value row of layer `l` at position `p`.
fn kv_row(kv: KvSource<'_>, l: usize, p: usize, off: usize, hd: usize, keys: bool) -> Vec<f64> {
    match kv {
        KvSource::F32(k32) => {
            let r = k32.at(l, p);
            let src = if keys { &k32.k[r] } else { &k32.v[r] };
            src[off..off + hd].iter().map(|&v| v as f64).collect()
        }
        KvSource::F16(cache) => {
            let seen = cache.seen(l, p, Some(1));
            let base = seen.first * cache.kv_dim + off;
            let src = if keys { seen.keys } else { seen.values };
            src[base..base + hd]
                .iter()
                .map(|&b| half::f16::from_bits(b).to_f64())
                .collect()
        }
    }
}
