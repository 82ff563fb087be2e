//! The batched kernels (`Kernels::dot_rows_batch`) of every set this CPU runs, the scalar set
//! included, against the scalar one-row path column by column, bit for bit: random rows of every
//! type with extreme scales and nibbles, columns of every kind of activation vector (ordinary,
//! huge, tiny, zero, ties, infinities), the shared quantization fixtures, and shapes that disagree.
//! Compiled on every target (the scalar set's batched kernels are checked on the PC too).

extern crate std;

use super::testgen::*;
use crate::quant::act::ActBuf;
use crate::quant::{ActsBatch, GgmlType, KernelError, Kernels, MAX_BATCH};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

fn all_sets() -> Vec<Kernels> {
    #[cfg(target_arch = "riscv64")]
    super::rvv::tests::record_v();
    #[cfg(target_arch = "arm")]
    super::neon32::tests::record_neon();
    Kernels::available().collect()
}

/// `cols` activation vectors of `n` (laid out `[cols][n]`), drawn from every kind of vector.
fn columns(rng: &mut Rng, n: usize, cols: usize) -> Vec<f32> {
    let kinds = activation_vectors(rng, n);
    (0..cols)
        .flat_map(|c| {
            // Ordinary vectors most of the time, every extreme kind somewhere in a wide batch.
            let kind = if c % 3 == 0 { c / 3 % kinds.len() } else { 0 };
            let scale = 1.0 + c as f32 * 0.37;
            kinds[kind]
                .iter()
                .map(move |v| v * scale)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `w` (rows of `n` elements of `ty`) · the columns `x` through `k`'s batched path, checked
/// against the scalar one-row path for each column.
fn check(k: &Kernels, ty: GgmlType, n: usize, w: &[u8], x: &[f32], cols: usize, what: &str) {
    let rows = w.len() / ty.row_bytes(n as u64).unwrap() as usize;
    let mut buf = ActBuf::with_capacity(n * cols);
    buf.quantize(ty.act_format(), x).unwrap();
    let acts = ActsBatch {
        cols,
        acts: buf.acts().unwrap(),
    };
    let mut got = vec![f32::NAN; rows * cols];
    k.dot_rows_batch(ty, n, w, &acts, &mut got).unwrap();
    for c in 0..cols {
        let mut one = ActBuf::with_capacity(n);
        one.quantize(ty.act_format(), &x[c * n..(c + 1) * n])
            .unwrap();
        let mut want = vec![0.0f32; rows];
        Kernels::SCALAR
            .dot_rows(ty, n, w, &one.acts().unwrap(), &mut want)
            .unwrap();
        for r in 0..rows {
            let g = got[r * cols + c];
            assert!(
                g.to_bits() == want[r].to_bits(),
                "{} {what} {ty} rows={rows} cols={cols}: row {r} col {c}: {g:e} != scalar {:e}",
                k.name,
                want[r]
            );
        }
    }
}

/// Rows of `ty` with random bytes (or all `fill`) and finite random scales.
fn rows_of(rng: &mut Rng, ty: GgmlType, n: usize, rows: usize, fill: Option<u8>) -> Vec<u8> {
    let rb = ty.row_bytes(n as u64).unwrap() as usize;
    let mut w: Vec<u8> = (0..rows * rb)
        .map(|_| fill.unwrap_or_else(|| rng.byte()))
        .collect();
    if ty.block_elems() > 1 {
        for b in w.chunks_exact_mut(ty.block_bytes()) {
            for &at in ty.info().scales {
                b[at..at + 2].copy_from_slice(&rng.f16_scale().to_le_bytes());
            }
        }
    } else if fill.is_none() {
        w.fill(0x3c);
    }
    w
}

#[test]
fn batched_kernels_match_the_one_row_path() {
    let mut rng = Rng(0xba7c);
    let n = 768;
    let mut checked = 0;
    for k in all_sets() {
        for ty in GgmlType::ALL {
            for (rows, cols) in [
                (1, 2),
                (3, 3),
                (4, 7),
                (5, 32),
                (6, 5),
                (7, 9),
                (9, 5),
                (8, MAX_BATCH),
            ] {
                for fill in [None, Some(0x00), Some(0xff), Some(0x88)] {
                    let w = rows_of(&mut rng, ty, n, rows, fill);
                    let x = columns(&mut rng, n, cols);
                    check(&k, ty, n, &w, &x, cols, &format!("fill {fill:?}"));
                    checked += 1;
                }
            }
        }
    }
    std::println!("{checked} weight/column sets checked");
    assert!(checked >= 13 * 8 * 4);
}

#[test]
fn batched_kernels_match_on_the_fixtures() {
    // Every type of the table: its fixture is named after it.
    let names = crate::quant::types::TYPES.map(|t| t.name.to_ascii_lowercase());
    let mut rng = Rng(0xf1c5);
    for k in all_sets() {
        for name in &names {
            let Some((w, ty, n, x)) = fixture(name) else {
                continue;
            };
            // The fixture's activations, then scaled and shuffled copies of them.
            let cols = 6;
            let mut xs = x.clone();
            for c in 1..cols {
                let s = [-1.0, 0.5, 3.0, 1e-3, 17.0][c - 1];
                xs.extend(x.iter().map(|v| v * s + rng.unit() * 0.01));
            }
            check(&k, ty, n, &w, &xs, cols, name);
        }
    }
}

/// Float rows whose length is no multiple of the vector width or of a kernel's chunk, with random
/// finite weights: the tails and the partial chunks of the float batched kernels.
#[test]
fn float_batches_of_any_length() {
    let mut rng = Rng(0xf10a);
    for k in all_sets() {
        for ty in [GgmlType::F32, GgmlType::F16, GgmlType::Bf16] {
            for n in [1, 3, 4, 7, 9, 67, 130, 203] {
                let rows = 3;
                let w: Vec<u8> = (0..rows * n)
                    .flat_map(|_| match ty {
                        GgmlType::F32 => rng.wide().to_le_bytes().to_vec(),
                        GgmlType::F16 => f16_bits(&mut rng).to_le_bytes().to_vec(),
                        _ => bf16_bits(&mut rng).to_le_bytes().to_vec(),
                    })
                    .collect();
                for cols in [2, 5] {
                    let x = columns(&mut rng, n, cols);
                    check(&k, ty, n, &w, &x, cols, &format!("n {n}"));
                }
            }
        }
    }
}

#[test]
fn shapes_that_disagree_are_errors() {
    let ty = GgmlType::Q4_1;
    let n = 64;
    let w = vec![0u8; 2 * ty.row_bytes(n as u64).unwrap() as usize];
    let mut buf = ActBuf::with_capacity(n * 3);
    buf.quantize(ty.act_format(), &vec![0.5f32; n * 3]).unwrap();
    let acts = buf.acts().unwrap();
    let k = Kernels::best();
    let batch = |cols| ActsBatch { cols, acts };
    // Output of the wrong size, zero columns, too many columns.
    let mut out = vec![0.0f32; 5];
    assert!(matches!(
        k.dot_rows_batch(ty, n, &w, &batch(3), &mut out),
        Err(KernelError::Batch { .. })
    ));
    let mut out = vec![0.0f32; 0];
    assert!(k.dot_rows_batch(ty, n, &w, &batch(0), &mut out).is_err());
    let mut out = vec![0.0f32; 2 * (MAX_BATCH + 1)];
    assert!(k
        .dot_rows_batch(ty, n, &w, &batch(MAX_BATCH + 1), &mut out)
        .is_err());
    // Columns whose length is not the row's.
    let mut out = vec![0.0f32; 4];
    assert!(k.dot_rows_batch(ty, n, &w, &batch(2), &mut out).is_err());
    // The right shape works.
    let mut out = vec![0.0f32; 6];
    k.dot_rows_batch(ty, n, &w, &batch(3), &mut out).unwrap();
}
