//! Whole rows through `Kernels::dot_rows` and `Kernels::dot` (the four-row kernels where a set has
//! them), on random rows of every type and on the shared quantization fixtures.

extern crate std;

use super::float::check_quantizers;
use super::gen::*;
use super::{same, sets};
use crate::quant::act::ActBuf;
use crate::quant::{GgmlType, Kernels};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Offsets of the f16 scale fields of a block of `ty` (set to finite values in random rows).
fn scale_fields(ty: GgmlType) -> [usize; 2] {
    match ty {
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => [0, 2],
        GgmlType::Q2K => [80, 82],
        GgmlType::Q3K => [108, 108],
        GgmlType::Q6K => [208, 208],
        _ => [0, 0],
    }
}

#[test]
fn dot_rows_match_scalar() {
    let mut rng = Rng(0xd07);
    let n = 768;
    let x: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
    for k in sets("dot_rows_match_scalar") {
        for ty in GgmlType::ALL {
            let mut acts = ActBuf::with_capacity(n);
            acts.quantize(ty.act_format(), &x).unwrap();
            let a = acts.acts().unwrap();
            let rb = ty.row_bytes(n as u64).unwrap() as usize;
            for rows in [1, 3, 4, 5, 8, 9, 13] {
                let mut w: Vec<u8> = (0..rows * rb).map(|_| rng.byte()).collect();
                if ty.block_elems() > 1 {
                    for b in w.chunks_exact_mut(ty.block_bytes()) {
                        for at in scale_fields(ty) {
                            b[at..at + 2].copy_from_slice(&rng.f16_scale().to_le_bytes());
                        }
                    }
                } else {
                    w.fill(0x3c);
                }
                let mut want = vec![0.0f32; rows];
                Kernels::SCALAR.dot_rows(ty, n, &w, &a, &mut want).unwrap();
                let mut got = vec![0.0f32; rows];
                k.dot_rows(ty, n, &w, &a, &mut got).unwrap();
                for r in 0..rows {
                    same(
                        &format!("{} {ty} rows={rows} row {r}", k.name),
                        got[r],
                        want[r],
                    );
                }
            }
        }
    }
}

fn fixtures_dir() -> std::path::PathBuf {
    match std::env::var_os("LMBOOT_SHARED") {
        Some(s) => std::path::PathBuf::from(s).join("fixtures/quant"),
        None => std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/quant"
        )),
    }
}

/// The fixture `name`: its four weight rows (bytes, type, row length) and its activations.
fn fixture(name: &str) -> (Vec<u8>, GgmlType, usize, Vec<f32>) {
    let path = fixtures_dir().join(format!("{name}.gguf"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let src = crate::SliceStorage::new(&bytes);
    let g = crate::Gguf::open(&src).unwrap();
    let t = g.require_tensor("w").unwrap().clone();
    let w = bytes[t.offset as usize..(t.offset + t.size) as usize].to_vec();
    let xt = g.require_tensor("x").unwrap();
    let x: Vec<f32> = bytes[xt.offset as usize..(xt.offset + xt.size) as usize]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let (rows, n) = (t.rows() as usize, t.row_len() as usize);
    assert_eq!((rows, n, x.len()), (4, 1536, 1536), "{name}");
    (w, t.ty, n, x)
}

#[test]
fn fixtures_match_scalar() {
    let names = [
        "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k",
        "q5_k", "q6_k",
    ];
    let mut report = String::new();
    for k in sets("fixtures_match_scalar") {
        for name in names {
            let (w, ty, n, x) = fixture(name);
            let mut acts = ActBuf::with_capacity(n);
            acts.quantize(ty.act_format(), &x).unwrap();
            let a = acts.acts().unwrap();
            let mut want = vec![0.0f32; 4];
            Kernels::SCALAR.dot_rows(ty, n, &w, &a, &mut want).unwrap();
            // All four rows at once (the four-row kernels), then row by row (one-row kernels).
            let mut got = vec![0.0f32; 4];
            k.dot_rows(ty, n, &w, &a, &mut got).unwrap();
            let rb = w.len() / 4;
            for r in 0..4 {
                same(&format!("{name} {} row {r}", k.name), got[r], want[r]);
                let one = k.dot(ty, n, &w[r * rb..(r + 1) * rb], &a).unwrap();
                same(&format!("{name} {} one row {r}", k.name), one, want[r]);
            }
            // The set's quantizers give the same blocks for this `x`.
            check_quantizers(&k, &x, &format!("{name} {}", k.name));
            report.push_str(&format!("{} {name}: {want:?}\n", k.name));
        }
    }
    std::println!("{report}");
}
