//! Which layers each board of a ring runs, as prima.cpp's Halda scheduler decides it: every board
//! gets a contiguous window (board 1, the head, also the embedding and the output head), the
//! windows in ring order, so that the predicted time per token is least; among splits within
//! [`SLACK_PERCENT`] of that (the measured rates of equal boards differ by a few percent), the
//! one whose slowest board is fastest (what a pipelined prompt waits for).
//!
//! A board's predicted time for a window is its weight bytes through its matrix kernels plus, for
//! the bytes its RAM (or the page cache its `cache =` setting allows) cannot hold, a read from its
//! card every token.

use crate::pagecache::{MAX_READAHEAD, MIN_WINDOW_PAGES};
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;
use inference::model::{Model, RunState};
use serde::{Deserialize, Serialize};

/// What a board reports of itself at ring formation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// Heap bytes free before the model's buffers.
    pub ram: u64,
    /// Most bytes its page cache may take (its `cache =` setting; `u64::MAX` for `auto`): what
    /// it can keep of its window is the least of this and what its heap leaves.
    pub cache: u64,
    /// Weight bytes per second through the matrix-vector kernels on all its working cores.
    pub compute: u64,
    /// Card read rate, bytes per second.
    pub card: u64,
    /// Working cores.
    pub cores: u8,
}

/// What the plan needs to know of the model and the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Weight bytes of each layer's matrices.
    pub layer_bytes: Vec<u64>,
    /// Bytes the head reads every token besides its layers (the output head).
    pub head_compute: u64,
    /// KV-cache bytes per layer for the run's context.
    pub kv_per_layer: u64,
    /// Bytes every board needs besides weights and KV cache (buffers, the cache's window, slack).
    pub fixed: u64,
}

/// A board's window and what is predicted for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub layers: Range<usize>,
    /// Weight bytes it reads per token.
    pub bytes: u64,
    /// Of those, bytes read from its card every token (its RAM holds the rest).
    pub streamed: u64,
    /// Predicted nanoseconds per token.
    pub ns: u64,
}

impl core::fmt::Display for Window {
    /// `layers 0..3 and the ends: 277 MB of weights a token, 0 MB of them from its card: 277 ms`
    /// (the window from layer 0 is the head's, which also holds the ends).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "layers {}..{}{}: {} MB of weights a token, {} MB of them from its card: {} ms",
            self.layers.start,
            self.layers.end,
            if self.layers.start == 0 {
                " and the ends"
            } else {
                ""
            },
            self.bytes / 1_000_000,
            self.streamed / 1_000_000,
            self.ns / 1_000_000
        )
    }
}

/// Splits whose predicted time per token is within this of the least count as equal; among
/// them the one with the fastest slowest board wins.
pub const SLACK_PERCENT: u64 = 5;

/// Why no split exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// More boards than layers.
    TooManyBoards { boards: usize, layers: usize },
    /// Some board cannot hold even its buffers and KV cache for one layer.
    NoRoom,
}

impl core::fmt::Display for PlanError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PlanError::TooManyBoards { boards, layers } => write!(
                f,
                "{boards} boards but the model has {layers} layers (each board needs at least one)"
            ),
            PlanError::NoRoom => write!(
                f,
                "no split fits: a board has no room for its buffers and KV cache"
            ),
        }
    }
}

/// The prediction for board `i` (0 = the head) running `layers`, or `None` if it cannot.
pub fn predict(shape: &Shape, p: &Profile, i: usize, layers: Range<usize>) -> Option<Window> {
    let n = layers.len() as u64;
    let weights: u64 = shape.layer_bytes[layers.clone()].iter().sum();
    let bytes = match i {
        0 => weights + shape.head_compute,
        _ => weights,
    };
    let avail = p
        .ram
        .checked_sub(shape.fixed)?
        .checked_sub(n * shape.kv_per_layer)?
        .min(p.cache);
    // The page cache pins what a token reads first and an untied token embedding (one row a
    // token) last (`pagecache::order`): what streams is what a token reads beyond the cache.
    let streamed = bytes.saturating_sub(avail);
    let ns = time_ns(bytes, p.compute) + time_ns(streamed, p.card);
    Some(Window {
        layers,
        bytes,
        streamed,
        ns,
    })
}

fn time_ns(bytes: u64, rate: u64) -> u64 {
    (bytes as u128 * 1_000_000_000 / rate.max(1) as u128).min(u64::MAX as u128) as u64
}

/// The split for `profiles` (in ring order, the head first).
pub fn plan(shape: &Shape, profiles: &[Profile]) -> Result<Vec<Window>, PlanError> {
    let (boards, layers) = (profiles.len(), shape.layer_bytes.len());
    if boards > layers || boards == 0 {
        return Err(PlanError::TooManyBoards { boards, layers });
    }
    let least = best(shape, profiles, u64::MAX).ok_or(PlanError::NoRoom)?;
    let total = |w: &[Window]| w.iter().map(|w| w.ns).sum::<u64>();
    let bound = total(&least).saturating_add(total(&least) / 100 * SLACK_PERCENT);
    // The smallest cap on any one board's time that still allows a split within the bound.
    let mut caps: Vec<u64> = (0..boards)
        .flat_map(|i| (0..layers).flat_map(move |a| (a + 1..=layers).map(move |b| (i, a, b))))
        .filter_map(|(i, a, b)| predict(shape, &profiles[i], i, a..b).map(|w| w.ns))
        .collect();
    caps.sort_unstable();
    caps.dedup();
    let fits = |cap: u64| best(shape, profiles, cap).filter(|w| total(w) <= bound);
    let (mut lo, mut hi) = (0, caps.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if fits(caps[mid]).is_some() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(caps.get(lo).and_then(|&c| fits(c)).unwrap_or(least))
}

/// The split with the least total time in which no board takes longer than `cap`.
fn best(shape: &Shape, profiles: &[Profile], cap: u64) -> Option<Vec<Window>> {
    let (boards, layers) = (profiles.len(), shape.layer_bytes.len());
    // cost[i][b]: least total for boards 0..=i covering layers 0..b; from[i][b]: where board i
    // starts in it.
    let mut cost = vec![vec![u64::MAX; layers + 1]; boards];
    let mut from = vec![vec![0usize; layers + 1]; boards];
    for i in 0..boards {
        for b in i + 1..=layers - (boards - 1 - i) {
            let starts = if i == 0 { 0..1 } else { i..b };
            for a in starts {
                let before = if i == 0 { 0 } else { cost[i - 1][a] };
                let Some(w) = predict(shape, &profiles[i], i, a..b) else {
                    continue;
                };
                if before == u64::MAX || w.ns > cap {
                    continue;
                }
                let c = before.saturating_add(w.ns);
                if c < cost[i][b] {
                    cost[i][b] = c;
                    from[i][b] = a;
                }
            }
        }
    }
    if cost[boards - 1][layers] == u64::MAX {
        return None;
    }
    let mut out = Vec::with_capacity(boards);
    let mut b = layers;
    for i in (0..boards).rev() {
        let a = from[i][b];
        out.push(predict(shape, &profiles[i], i, a..b)?);
        b = a;
    }
    out.reverse();
    Some(out)
}

/// What the plan needs of `model` for a run of `ctx` positions in prompt batches of `batch`, with
/// pages of `page` bytes, `workers` cores and `margin` bytes of heap kept free.
pub fn shape(
    model: &Model,
    ctx: usize,
    batch: usize,
    page: usize,
    workers: usize,
    margin: u64,
) -> Shape {
    let w = &model.weights;
    let layer_bytes = w
        .layers
        .iter()
        .map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down])
        .map(|ms| ms.iter().map(|t| t.size).sum())
        .collect();
    let c = &model.config;
    let row = (inference::model::state::SCRATCH_BYTES as u64).max(w.max_row_bytes());
    let scratch = workers as u64 * row;
    let fixed = RunState::bytes_per_batch_token(model) * batch as u64
        + scratch
        + c.vocab as u64 * 4
        + ((MIN_WINDOW_PAGES + MAX_READAHEAD) * page) as u64;
    Shape {
        layer_bytes,
        head_compute: w.output.size,
        kv_per_layer: RunState::kv_bytes_for(model, ctx) / c.n_layer.max(1) as u64,
        fixed: fixed + margin,
    }
}

#[cfg(test)]
mod tests;
