//! The pass's kernel paths: the operations whose arithmetic a run may choose, a matrix product
//! over a batch (every layer's and the output head's) and a layer's attention, as the
//! [`KernelPath`] trait. [`Quantized`] is a normal run's: activations quantized to 8 bits for the
//! integer kernels, attention over the f16 cache with online softmax, split across the workers.
//! [`ExactPath`] is the error budget's (`cargo xtask fidelity`): f64 products and attention
//! ([`super::exact`]) for the switches that are on, the quantized path for the rest. A pass picks
//! its path once, from the run state's switches, and no branch on them sits inside it.

use super::exact::{self, Exact, KvSource};
use super::state::{ActSet, RunState};
use super::tree::Tree;
use super::{Config, ModelError};
use crate::gguf::TensorInfo;
use crate::matvec::matmat;
use crate::ops::{Head, RopeTable};
use crate::parallel::{par_chunks, Parallel};
use crate::quant::{ActsBatch, Kernels, MAX_BATCH};
use crate::storage::Storage;
use alloc::vec::Vec;

/// What a kernel path computes with: the model's configuration, the weights' storage, the
/// worker pool and the kernel set.
pub(super) struct Cx<'a, S: ?Sized, P: ?Sized> {
    pub c: &'a Config,
    pub src: &'a S,
    pub pool: &'a P,
    pub k: &'a Kernels,
}

/// A product `out = w · input` for the `b` inputs of `input` (`[b][cols]`; `out` is
/// `[b][rows]`): `(w, input, b, out)`.
pub(super) type Io<'o> = (&'o TensorInfo, &'o [f32], usize, &'o mut [f32]);

/// A product's buffers: the input's activation set, the batch buffer (`mm`) and the workers'
/// read buffers.
pub(super) type Bufs<'b> = (&'b mut ActSet, &'b mut [f32], &'b mut [Vec<u8>]);

type Res = Result<(), ModelError>;

/// The operations a pass leaves to its kernel path, for weights in `S` and workers `P`.
pub(super) trait KernelPath<S: ?Sized, P: ?Sized> {
    /// The product `io`, the `which`-th of a layer's (its index in [`exact::PRODUCTS`]).
    fn product(&self, cx: &Cx<'_, S, P>, which: usize, io: Io<'_>, bufs: Bufs<'_>) -> Res;

    /// Layer `l`'s attention for the batch's `b` tokens at `st.pos ..` (rows of `st.tree` when
    /// the batch is one), from `st.q` and the cache into `st.att`.
    fn attend(&self, cx: &Cx<'_, S, P>, st: &mut RunState, lb: (usize, usize)) -> Res;
}

/// A normal run's kernels.
#[derive(Debug, Clone, Copy)]
pub(super) struct Quantized;

impl<S: Storage + Sync + ?Sized, P: Parallel + ?Sized> KernelPath<S, P> for Quantized {
    /// The input quantized once per activation format (the activation set remembers), then the
    /// kernels over W's rows, split across the workers.
    fn product(&self, cx: &Cx<'_, S, P>, _: usize, io: Io<'_>, bufs: Bufs<'_>) -> Res {
        let ((w, input, b, out), (acts, mm, scratch)) = (io, bufs);
        let a = acts.for_weight(cx.k, cx.pool, w, input, b)?;
        matmul(cx, w, &a, out, mm, scratch)
    }

    /// One (token, head) pair per chunk of hd, pairs split across workers, each with the online
    /// softmax of [`Kernels::attend_head`](crate::quant::Kernels).
    fn attend(&self, cx: &Cx<'_, S, P>, st: &mut RunState, (l, b): (usize, usize)) -> Res {
        let c = cx.c;
        let (hd, qd, kv_dim, n_head, pos) = (c.head_dim, c.q_dim(), c.kv_dim(), c.n_head, st.pos);
        let group = c.n_head / c.n_head_kv;
        let (scale, window) = (c.attn_scale, c.window(l));
        let (q, kv, k, tree) = (&st.q, &st.kv, cx.k, st.tree.as_ref());
        let rope = rope_of(c, l, &st.rope, &st.rope_local);
        par_chunks(
            cx.pool,
            &mut st.att[..b * qd],
            hd,
            &mut st.scratch,
            |r, part, _| {
                for (j, out) in part.chunks_exact_mut(hd).enumerate() {
                    let t = r.start / hd + j;
                    let (i, h) = (t / n_head, t % n_head);
                    let q = &q[i * qd + h * hd..i * qd + (h + 1) * hd];
                    // Row i's position (its depth in a tree).
                    let at = pos + tree.map_or(i, |t| t.depth(i));
                    // The query head's RoPE here, in the job, when it fits the stack buffer.
                    let mut rq = [0.0f32; Q_IN_JOB_MAX];
                    let q = if hd <= Q_IN_JOB_MAX {
                        let rq = &mut rq[..hd];
                        rq.copy_from_slice(q);
                        rope.apply(rq, hd, at);
                        &*rq
                    } else {
                        q
                    };
                    let seen = kv.seen(l, at, window);
                    let mut slots = [0u32; MAX_BATCH];
                    let gathered = tree.map_or(&[][..], |t| {
                        path_slots(t, i, seen.n, |r| kv.slot(l, pos + r), &mut slots)
                    });
                    let head = Head {
                        keys: seen.keys,
                        values: seen.values,
                        n: seen.n,
                        first: seen.first,
                        ring: seen.ring,
                        stride: kv_dim,
                        offset: (h / group) * hd,
                        scale,
                        run: seen.n - gathered.len(),
                        gathered,
                    };
                    (k.attend_head)(out, q, &head);
                }
                Ok::<(), ModelError>(())
            },
        )
    }
}

/// The error budget's path: the products and the attention its switches name in f64, the rest
/// as [`Quantized`].
#[derive(Debug, Clone, Copy)]
pub(super) struct ExactPath(pub Exact);

impl<S: Storage + Sync + ?Sized, P: Parallel + ?Sized> KernelPath<S, P> for ExactPath {
    fn product(&self, cx: &Cx<'_, S, P>, which: usize, io: Io<'_>, bufs: Bufs<'_>) -> Res {
        if !self.0.acts[which] {
            return Quantized.product(cx, which, io, bufs);
        }
        let (w, input, b, out) = io;
        exact::product(cx.src, w, input, b, out, &mut bufs.2[0])
    }

    fn attend(&self, cx: &Cx<'_, S, P>, st: &mut RunState, (l, b): (usize, usize)) -> Res {
        if !self.0.attention_path() {
            return Quantized.attend(cx, st, (l, b));
        }
        let c = cx.c;
        let (hd, qd, pos) = (c.head_dim, c.q_dim(), st.pos);
        let (q, kv, tree) = (&st.q, &st.kv, st.tree.as_ref());
        let rope = rope_of(c, l, &st.rope, &st.rope_local);
        let src = st.kv32.as_ref().map_or(KvSource::F16(kv), KvSource::F32);
        let rope_q = (hd <= Q_IN_JOB_MAX).then_some(rope);
        let rows = (pos, b, tree);
        exact::attend(c, l, rows, q, rope_q, src, &mut st.att[..b * qd]);
        Ok(())
    }
}

/// `out = W · x` for each column of `acts`, W's rows split across the pool's workers. `out`
/// is `[cols][rows]` (one output vector per token); a batch is computed into `mm` as
/// `[rows][cols]` (each worker a contiguous range of rows) and then laid out per token, in
/// as many steps as `mm` needs (one, but for the output head of [`super::Model::forward_rows`]).
pub(super) fn matmul<S: Storage + Sync + ?Sized, P: Parallel + ?Sized>(
    cx: &Cx<'_, S, P>,
    w: &TensorInfo,
    acts: &ActsBatch<'_>,
    out: &mut [f32],
    mm: &mut [f32],
    scratch: &mut [Vec<u8>],
) -> Result<(), ModelError> {
    let (k, src, cols) = (cx.k, cx.src, acts.cols);
    if cols == 1 {
        par_chunks(cx.pool, out, 1, scratch, |rows, part, s| {
            matmat(k, src, w, rows, acts, part, s)
        })?;
        return Ok(());
    }
    let rows = out.len() / cols;
    let step = (mm.len() / cols).min(rows);
    if step == 0 {
        return Err(ModelError::Matvec("batch buffer too small".into()));
    }
    for first in (0..rows).step_by(step) {
        let n = step.min(rows - first);
        let mm = &mut mm[..n * cols];
        par_chunks(cx.pool, mm, cols, scratch, |r, part, s| {
            let r = first + r.start / cols..first + r.end / cols;
            matmat(k, src, w, r, acts, part, s)
        })?;
        for (c, o) in out.chunks_exact_mut(rows).enumerate() {
            for (r, v) in o[first..first + n].iter_mut().enumerate() {
                *v = mm[r * cols + c];
            }
        }
    }
    Ok(())
}

/// The slots (`slot(row)`) of the rows on tree row `i`'s path that a query seeing `n` positions
/// reads: the last of them, up to its depth and itself (all of them unless a window is shorter).
pub(super) fn path_slots<'o>(
    tree: &Tree,
    i: usize,
    n: usize,
    slot: impl Fn(usize) -> usize,
    out: &'o mut [u32; MAX_BATCH],
) -> &'o [u32] {
    let mut rows = [0u8; MAX_BATCH];
    let path = tree.path(i, &mut rows);
    let path = &path[path.len() - path.len().min(n)..];
    for (o, &r) in out.iter_mut().zip(path) {
        *o = slot(r as usize) as u32;
    }
    &out[..path.len()]
}

/// Longest head whose query [`Pass::attend`] rotates in its jobs (on the stack), so that the
/// query's RoPE is split across the workers with the heads.
pub(super) const Q_IN_JOB_MAX: usize = 256;

/// The RoPE table of layer `l`: the sliding-window layers' own, or the global one.
pub(super) fn rope_of<'a>(
    c: &Config,
    l: usize,
    global: &'a RopeTable,
    local: &'a Option<RopeTable>,
) -> &'a RopeTable {
    match (c.window(l), local) {
        (Some(_), Some(t)) => t,
        _ => global,
    }
}
