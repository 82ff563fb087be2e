//! Nanoseconds per block of the K-quant kernels of every set this CPU runs, one row and batched,
//! and of the Q8_K quantizer: printed, not asserted (`cargo test --release -p inference --lib
//! kquant_speed -- --ignored --nocapture`).

use super::*;
use crate::quant::{Acts, ActsBatch, GgmlType};
use std::time::Instant;

/// Nanoseconds per call of `f`, the best of a few rounds of `reps` calls.
fn ns(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_nanos() as f64 / reps as f64
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
#[ignore]
fn kquant_speed() {
    let mut rng = Rng(0x5eed);
    let (n, rows, cols) = (4096, 64, 8);
    let nb = n / 256;
    let x: Vec<f32> = (0..n * cols).map(|_| rng.unit()).collect();
    let mut q = vec![BlockQ8K::default(); nb * cols];
    let mut out = vec![0.0f32; rows * cols];
    let scalar = Some(Kernels::SCALAR).into_iter();
    for k in scalar.chain(Kernels::available().into_iter().skip(1).flatten()) {
        let t = ns(20, || (k.quantize_q8_k)(&x, &mut q));
        let per = t / q.len() as f64;
        std::println!("{:>8} quantize_q8_k: {per:.1} ns/block", k.name);
        let (one, batch) = (
            Acts::Q8K(&q[..nb]),
            ActsBatch {
                cols,
                acts: Acts::Q8K(&q),
            },
        );
        for ty in [
            GgmlType::Q2K,
            GgmlType::Q3K,
            GgmlType::Q4K,
            GgmlType::Q5K,
            GgmlType::Q6K,
        ] {
            let w = weights(
                &mut rng,
                rows * nb,
                ty.block_bytes(),
                &scale_fields(ty),
                None,
            );
            let blocks = (rows * nb) as f64;
            let t1 = ns(20, || {
                k.dot_rows(ty, n, &w, &one, &mut out[..rows]).unwrap()
            }) / blocks;
            let tb = ns(5, || k.dot_rows_batch(ty, n, &w, &batch, &mut out).unwrap()) / blocks;
            let tb = tb / cols as f64;
            std::println!(
                "{:>8} {ty}: one row {t1:.1} ns/block, batched {tb:.1} ns/block/column",
                k.name
            );
        }
    }
}
