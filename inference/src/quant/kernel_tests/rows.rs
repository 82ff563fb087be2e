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
            for rows in [1, 3, 4, 5, 6, 7, 8, 9, 13] {
                let mut w: Vec<u8> = (0..rows * rb).map(|_| rng.byte()).collect();
                if ty.block_elems() > 1 {
                    for b in w.chunks_exact_mut(ty.block_bytes()) {
                        for &at in ty.info().scales {
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

#[test]
fn fixtures_match_scalar() {
    // Every type of the table: its fixture is named after it.
    let names = crate::quant::types::TYPES.map(|t| t.name.to_ascii_lowercase());
    let mut report = String::new();
    for k in sets("fixtures_match_scalar") {
        for name in &names {
            let Some((w, ty, n, x)) = fixture(name) else {
                continue;
            };
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
