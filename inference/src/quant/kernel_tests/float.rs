//! The float entries of every set: f32/f16/bf16 dot products, the attention's q·k and whole head,
//! and the activation quantizers.

use super::gen::*;
use super::{same, sets};
use crate::quant::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::{GgmlType, Kernels};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

type Dot16 = fn(&[u8], &[u16]) -> f32;

const FLOAT_LENS: [usize; 17] = [
    0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 130, 257, 576, 1536,
];

/// The one-row kernel of a 16-bit float type in set `k`.
fn dot16(k: &Kernels, ty: GgmlType) -> Dot16 {
    k.row::<u16>(ty).expect("16-bit float kernels").dot
}

/// f32 weights at any alignment (finite there too), and more weights than activations or fewer.
fn check_f32(k: &Kernels, rng: &mut Rng, n: usize) {
    let dot = |k: &Kernels| k.row::<f32>(GgmlType::F32).expect("f32 kernels").dot;
    let (f, sc) = (dot(k), dot(&Kernels::SCALAR));
    let x: Vec<f32> = (0..n).map(|_| rng.wide()).collect();
    // One spare word in front, so the row can also start 1, 2 or 3 bytes later.
    let mut buf = vec![0u8; 4 * n + 4];
    for b in buf[4..].chunks_exact_mut(4) {
        b.copy_from_slice(&rng.wide().to_le_bytes());
    }
    finite_at_any_address(&mut buf, 0x7f);
    for off in [4, 0, 1, 2, 3] {
        let w = &buf[off..off + 4 * n];
        same(
            &format!("{} f32 n={n} at +{off}", k.name),
            f(w, &x),
            sc(w, &x),
        );
    }
    let w = &buf[4..];
    if n > 0 {
        same(
            &format!("{} f32 short x", k.name),
            f(w, &x[1..]),
            sc(w, &x[1..]),
        );
        same(
            &format!("{} f32 short w", k.name),
            f(&w[4..], &x),
            sc(&w[4..], &x),
        );
    }
}

/// Keep every byte of `buf` from having all of `exp_hi`, the exponent bits of a float's high byte,
/// so that the floats read at any address are finite. Read at an odd address, weights are other
/// values, made of two neighbours' bytes; NaN and infinity never reach a kernel (the model's
/// weights are checked at load), and a NaN's payload follows the operand order, which the kernels
/// do not promise to keep.
fn finite_at_any_address(buf: &mut [u8], exp_hi: u8) {
    for b in buf {
        if *b & exp_hi == exp_hi {
            *b &= !0x40;
        }
    }
}

/// A 16-bit float format: its name, the set's and the scalar entry, random finite bits, and the
/// exponent bits of its high byte.
struct Half {
    what: String,
    f: Dot16,
    sc: Dot16,
    bits: fn(&mut Rng) -> u16,
    exp_hi: u8,
}

/// f16 or bf16 weights at any alignment (finite there too), an odd byte count, and fewer
/// activations.
fn check_16(h: &Half, rng: &mut Rng, n: usize) {
    let x: Vec<u16> = (0..n).map(|_| (h.bits)(rng)).collect();
    let mut buf = vec![0u8; 2 * n + 2];
    for b in buf[2..].chunks_exact_mut(2) {
        b.copy_from_slice(&(h.bits)(rng).to_le_bytes());
    }
    finite_at_any_address(&mut buf, h.exp_hi);
    let (f, sc, what) = (h.f, h.sc, &h.what);
    for off in [2, 0, 1] {
        let w = &buf[off..off + 2 * n];
        same(&format!("{what} n={n} at +{off}"), f(w, &x), sc(w, &x));
    }
    if n > 0 {
        let w = &buf[2..];
        same(&format!("{what} odd"), f(&w[1..], &x), sc(&w[1..], &x));
        same(&format!("{what} short x"), f(w, &x[1..]), sc(w, &x[1..]));
    }
}

#[test]
fn float_dots_match_scalar() {
    let mut rng = Rng(0xf10a7);
    let s = Kernels::SCALAR;
    for k in sets("float_dots_match_scalar") {
        for n in FLOAT_LENS {
            for _ in 0..4 {
                check_f32(&k, &mut rng, n);
                type Bits = fn(&mut Rng) -> u16;
                let formats: [(&str, Dot16, Dot16, Bits, u8); 2] = [
                    (
                        "f16",
                        dot16(&k, GgmlType::F16),
                        dot16(&s, GgmlType::F16),
                        f16_bits,
                        0x7c,
                    ),
                    (
                        "bf16",
                        dot16(&k, GgmlType::Bf16),
                        dot16(&s, GgmlType::Bf16),
                        bf16_bits,
                        0x7f,
                    ),
                ];
                for (name, f, sc, bits, exp_hi) in formats {
                    let what = format!("{} {name}", k.name);
                    check_16(
                        &Half {
                            what,
                            f,
                            sc,
                            bits,
                            exp_hi,
                        },
                        &mut rng,
                        n,
                    );
                }
            }
        }
    }
}

#[test]
fn attention_matches_scalar() {
    let mut rng = Rng(0xa77e);
    let s = Kernels::SCALAR;
    for k in sets("attention_matches_scalar") {
        for hd in [1, 7, 8, 9, 15, 16, 17, 33, 64, 65, 128] {
            for n in [1, 2, 5, 33] {
                // A cache of every position (first slot 0), then a ring that wraps after two.
                for (big, (first, ring)) in
                    [(false, (0, n)), (true, (0, n)), (true, (n + 1, n + 3))]
                {
                    let (stride, offset) = (3 * hd + 5, hd + 2);
                    let q: Vec<f32> = (0..hd)
                        .map(|_| if big { rng.wide() } else { rng.unit() })
                        .collect();
                    let keys: Vec<u16> = (0..ring * stride).map(|_| f16_bits(&mut rng)).collect();
                    let values: Vec<u16> = (0..ring * stride).map(|_| f16_bits(&mut rng)).collect();
                    let key = &keys[offset..offset + hd];
                    let what = format!("{} hd={hd} n={n} big={big} ring={first}/{ring}", k.name);
                    same(
                        &format!("{what} q·k"),
                        (k.dot_f32_f16)(&q, key),
                        (s.dot_f32_f16)(&q, key),
                    );
                    let scale = 1.0 / libm::sqrtf(hd as f32);
                    let mut want = vec![0.0f32; hd];
                    let mut got = vec![1.0f32; hd];
                    let head = crate::ops::Head {
                        keys: &keys,
                        values: &values,
                        n,
                        first,
                        ring,
                        stride,
                        offset,
                        scale,
                        run: n,
                        gathered: &[],
                    };
                    (s.attend_head)(&mut want, &q, &head);
                    (k.attend_head)(&mut got, &q, &head);
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        same(&format!("{what} attend [{i}]"), *g, *w);
                    }
                    // A tree pass's row: the last positions gathered from slots out of order
                    // (the ring's last slots, backwards), as the same positions laid out in order.
                    let run = n / 2;
                    let gathered: Vec<u32> = (0..n - run).map(|j| (ring - 1 - j) as u32).collect();
                    let tree = crate::ops::Head {
                        run,
                        gathered: &gathered,
                        ..head
                    };
                    let mut laid = (keys.clone(), values.clone());
                    let mut flat = crate::ops::Head { ..head };
                    let copy = |d: &mut Vec<u16>, src: &[u16]| {
                        for t in 0..n {
                            let (from, to) = (tree.row(t) - offset, t * stride);
                            d[to..to + stride].copy_from_slice(&src[from..from + stride]);
                        }
                    };
                    copy(&mut laid.0, &keys);
                    copy(&mut laid.1, &values);
                    (flat.keys, flat.values, flat.first) = (&laid.0, &laid.1, 0);
                    let mut tree_want = vec![0.0f32; hd];
                    (s.attend_head)(&mut tree_want, &q, &flat);
                    (k.attend_head)(&mut got, &q, &tree);
                    for (i, (g, w)) in got.iter().zip(&tree_want).enumerate() {
                        same(&format!("{what} gathered attend [{i}]"), *g, *w);
                    }
                }
            }
        }
        // q and k of different lengths: the shorter side decides.
        let q: Vec<f32> = (0..20).map(|_| rng.unit()).collect();
        let key: Vec<u16> = (0..13).map(|_| f16_bits(&mut rng)).collect();
        for (qq, kk) in [
            (&q[..], &key[..]),
            (&q[..13], &key[..]),
            (&[][..], &key[..]),
        ] {
            let what = format!("{} q·k {}/{}", k.name, qq.len(), kk.len());
            same(&what, (k.dot_f32_f16)(qq, kk), (s.dot_f32_f16)(qq, kk));
        }
    }
}

/// The blocks a set's quantizers make from `x` equal the scalar ones.
pub(super) fn check_quantizers(k: &Kernels, x: &[f32], what: &str) {
    let s = Kernels::SCALAR;
    let nb = x.len() / 32;
    let (mut a, mut b) = (
        vec![BlockQ8_0::default(); nb],
        vec![BlockQ8_0::default(); nb],
    );
    (s.quantize_q8_0)(x, &mut a);
    (k.quantize_q8_0)(x, &mut b);
    for (i, (a, b)) in a.iter().zip(&b).enumerate() {
        let block = &x[32 * i..32 * i + 32];
        // The range the kernels rely on (see `BlockQ8_0`).
        assert!(
            a.qs.iter().all(|&q| q != -128),
            "{what} q8_0 block {i} holds -128"
        );
        assert_eq!(
            (a.d.to_bits(), a.qs),
            (b.d.to_bits(), b.qs),
            "{what} q8_0 block {i}: {block:?}"
        );
    }
    let (mut a, mut b) = (
        vec![BlockQ8_1::default(); nb],
        vec![BlockQ8_1::default(); nb],
    );
    (s.quantize_q8_1)(x, &mut a);
    (k.quantize_q8_1)(x, &mut b);
    for (i, (a, b)) in a.iter().zip(&b).enumerate() {
        let (a, b) = (
            (a.d.to_bits(), a.s.to_bits(), a.qs),
            (b.d.to_bits(), b.s.to_bits(), b.qs),
        );
        assert!(
            a.2.iter().all(|&q| q != -128),
            "{what} q8_1 block {i} holds -128"
        );
        assert_eq!(a, b, "{what} q8_1 block {i}");
    }
    let nb = x.len() / 256;
    let (mut a, mut b) = (vec![BlockQ8K::default(); nb], vec![BlockQ8K::default(); nb]);
    (s.quantize_q8_k)(x, &mut a);
    (k.quantize_q8_k)(x, &mut b);
    for (i, (a, b)) in a.iter().zip(&b).enumerate() {
        assert_eq!(a.d.to_bits(), b.d.to_bits(), "{what} q8_k block {i} d");
        assert_eq!(a.qs, b.qs, "{what} q8_k block {i} qs");
        assert_eq!(a.bsums, b.bsums, "{what} q8_k block {i} bsums");
    }
}

#[test]
fn quantizers_match_scalar() {
    let mut rng = Rng(0x9a);
    let s = Kernels::SCALAR;
    for k in sets("quantizers_match_scalar") {
        // Block counts that leave a tail after the SIMD kernels' groups of 2 and 4 blocks, too.
        for n in [96, 224, 256, 512, 1536] {
            for (kind, x) in activation_vectors(&mut rng, n).iter().enumerate() {
                check_quantizers(&k, x, &format!("{} n={n} kind {kind}", k.name));
            }
        }
        // Shorter output than input and the other way round: both stop at the shorter side.
        let x = activation_vectors(&mut rng, 512).swap_remove(0);
        let mut a = vec![BlockQ8_0::default(); 20];
        let mut b = a.clone();
        (s.quantize_q8_0)(&x[..256], &mut a);
        (k.quantize_q8_0)(&x[..256], &mut b);
        assert!(a
            .iter()
            .zip(&b)
            .all(|(a, b)| (a.d.to_bits(), a.qs) == (b.d.to_bits(), b.qs)));
        let mut a = vec![BlockQ8K::default(); 1];
        let mut b = a.clone();
        (s.quantize_q8_k)(&x, &mut a);
        (k.quantize_q8_k)(&x, &mut b);
        assert_eq!(
            (a[0].d.to_bits(), a[0].qs, a[0].bsums),
            (b[0].d.to_bits(), b[0].qs, b[0].bsums)
        );
    }
}

/// The K/V cache store: every rounding case (halfway, subnormal, overflow to infinity, signed
/// zero, infinities) and random bit patterns, at every length around the vector width. NaN is
/// left out: the model's values are checked finite at load, and a NaN's payload is not promised.
#[test]
fn f16_stores_match_scalar() {
    let mut rng = Rng(0xf16);
    // The last three are exact binary fractions (1 + 2^-11, 1 + 3·2^-12, 1 + 2^-10: f16 ties and
    // steps), written out in full.
    #[allow(clippy::excessive_precision)]
    let special = [
        0.0f32,
        -0.0,
        1.0,
        -1.0,
        65504.0,
        65520.0,
        65519.99,
        -65520.0,
        1e9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        5.96e-8,
        2.98e-8,
        2.99e-8,
        1e-10,
        -6.1e-5,
        6.097e-5,
        1.00048828125,
        1.000732421875,
        1.0009765625,
        f32::MIN_POSITIVE,
    ];
    for k in sets("f16_stores_match_scalar") {
        for n in FLOAT_LENS {
            let x: Vec<f32> = (0..n)
                .map(|i| match rng.below(3) {
                    0 => special[i % special.len()],
                    1 => rng.wide(),
                    _ => Some(f32::from_bits(rng.next() as u32))
                        .filter(|v| !v.is_nan())
                        .unwrap_or(1.5),
                })
                .collect();
            let (mut got, mut want) = (vec![0u16; n], vec![0u16; n]);
            (k.to_f16)(&mut got, &x);
            (Kernels::SCALAR.to_f16)(&mut want, &x);
            assert_eq!(got, want, "{} to_f16 n={n}: {x:?}", k.name);
        }
    }
}
