//! The boot-time profile: what the hardware does (memory copy rate, matrix throughput on all
//! working cores), to predict a token's time and say whether the run is I/O- or compute-bound.

use crate::pagecache::{FileSource, PageCache};
use crate::platform::Platform;
use alloc::vec::Vec;
use inference::gguf::TensorInfo;
use inference::matvec::matvec;
use inference::model::Model;
use inference::parallel::{par_chunks, Parallel};
use inference::{Kernels, Storage};

/// What the hardware does.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Profile {
    /// Bytes/s.
    pub memory: u64,
    /// Weight bytes/s through the matrix-vector kernels on all working cores.
    pub matvec: u64,
    /// Weight bytes per token.
    pub weights: u64,
}

/// Bytes per second (0 if no time passed).
pub(super) fn rate(bytes: u64, ns: u64) -> u64 {
    if ns == 0 {
        0
    } else {
        (bytes as u128 * 1_000_000_000 / ns as u128) as u64
    }
}

/// Nanoseconds to move `bytes` at `rate` bytes/s (0 if the rate is unknown).
pub(super) fn time_ns(bytes: u64, rate: u64) -> u64 {
    if rate == 0 {
        0
    } else {
        (bytes as u128 * 1_000_000_000 / rate as u128) as u64
    }
}

/// Measure memory bandwidth (a copy) and matrix throughput (one feed-forward matrix, all cores).
pub(super) fn profile<F: FileSource + Send, P: Parallel + ?Sized, Q: Platform + ?Sized>(
    (model, cache, kernels): (&Model, &PageCache<F>, &Kernels),
    pool: &P,
    platform: &Q,
) -> Profile {
    let w = &model.weights;
    Profile {
        weights: w.matrices().map(|t| t.size).sum::<u64>() + w.token_embd.row_bytes(),
        memory: copy_rate(platform),
        matvec: matvec_rate(&w.layers[0].w_gate, cache, kernels, pool, platform),
    }
}

/// Memory copy rate over two buffers of up to 8 MiB (0 if the heap cannot spare them).
fn copy_rate<Q: Platform + ?Sized>(platform: &Q) -> u64 {
    let size = (platform.heap_free() / 8).min(8 << 20) as usize;
    let mut a: Vec<u8> = Vec::new();
    let mut b: Vec<u8> = Vec::new();
    if size < 1 << 16 || a.try_reserve_exact(size).is_err() || b.try_reserve_exact(size).is_err() {
        return 0;
    }
    a.resize(size, 1);
    b.resize(size, 0);
    let t0 = platform.now_ns();
    for _ in 0..4 {
        b.copy_from_slice(&a);
        a[0] = a[0].wrapping_add(b[size - 1]);
    }
    rate(4 * size as u64, platform.now_ns() - t0)
}

/// Weight bytes per second through the matrix `w` (the first layer's gate) on all working cores
/// (best of two; 0 if it cannot run).
pub(super) fn matvec_rate<
    S: Storage + Sync + ?Sized,
    P: Parallel + ?Sized,
    Q: Platform + ?Sized,
>(
    w: &TensorInfo,
    src: &S,
    kernels: &Kernels,
    pool: &P,
    platform: &Q,
) -> u64 {
    let mut acts = inference::ActBuf::with_capacity(w.row_len() as usize);
    let x = alloc::vec![0.25f32; w.row_len() as usize];
    if acts.quantize(w.ty.act_format(), &x).is_err() {
        return 0;
    }
    let Some(act) = acts.acts() else {
        return 0;
    };
    let mut out = alloc::vec![0f32; w.rows() as usize];
    let mut scratch: Vec<Vec<u8>> = (0..pool.workers())
        .map(|_| alloc::vec![0u8; 64 * 1024])
        .collect();
    let mut best = u64::MAX;
    for _ in 0..2 {
        let t0 = platform.now_ns();
        let r = par_chunks(pool, &mut out, 1, &mut scratch, |rows, part, s| {
            matvec(kernels, src, w, rows, &act, part, s)
        });
        if r.is_err() {
            return 0;
        }
        best = best.min(platform.now_ns() - t0);
    }
    rate(w.size, best)
}
