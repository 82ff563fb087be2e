//! Every NEON kernel against its scalar twin, bit for bit (`to_bits()` equal), on random inputs
//! with extreme values (fixed-seed PRNG) and on the shared quantization fixtures; the choice of
//! kernel set from ID_AA64ISAR0_EL1. Run under qemu-user with `QEMU_CPU=cortex-a53` (plain NEON,
//! no SDOT) and `QEMU_CPU=cortex-a76` (SDOT): the SDOT kernels are tested where the core has them.
//!
//! No tolerance anywhere: every comparison is exact.

extern crate std;

use super::*;
use crate::quant::act::{self, ActBuf, BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::{scalar, GgmlType, Kernels};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::arch::aarch64::{vcombine_u16, vdup_n_u16, vgetq_lane_f32};
use half::{bf16, f16};

/// splitmix64: a fixed-seed generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    /// A float of widely varying magnitude (never NaN or infinite).
    fn wide(&mut self) -> f32 {
        let e = self.below(40) as i32 - 20;
        self.unit() * libm::powf(2.0, e as f32)
    }
    /// f16 bits for a scale: ordinary values mostly, and the extremes (largest, zero, subnormal,
    /// negative), never NaN or infinity.
    fn f16_scale(&mut self) -> u16 {
        match self.below(12) {
            0 => 0x7bff,                                           // 65504
            1 => 0xfbff,                                           // -65504
            2 => 0x0000,                                           // 0
            3 => 0x8000,                                           // -0
            4 => 0x0001,                                           // smallest subnormal
            5 => 0x03ff,                                           // largest subnormal
            6 => (self.next() as u16) & 0x7fff & !0x7c00 | 0x7800, // huge
            7 => {
                // Any finite bits.
                let b = self.next() as u16;
                if b & 0x7c00 == 0x7c00 {
                    b & !0x4000
                } else {
                    b
                }
            }
            _ => f16::from_f32(self.unit() * 0.05).to_bits(),
        }
    }
    /// A finite f32 activation scale, sometimes zero, negative or large.
    fn f32_scale(&mut self) -> f32 {
        match self.below(8) {
            0 => 0.0,
            1 => -self.wide(),
            2 => 1.0e30 * self.unit(),
            _ => self.wide(),
        }
    }
}

/// Weight bytes for `nb` blocks of `bytes` each, random, with the f16 fields at `halves` set to
/// scale-like values; `fill` forces every other byte (extreme nibbles) when given.
fn weights(rng: &mut Rng, nb: usize, bytes: usize, halves: &[usize], fill: Option<u8>) -> Vec<u8> {
    let mut w = vec![0u8; nb * bytes];
    for b in w.chunks_exact_mut(bytes) {
        for x in b.iter_mut() {
            *x = fill.unwrap_or_else(|| rng.byte());
        }
        for &h in halves {
            b[h..h + 2].copy_from_slice(&rng.f16_scale().to_le_bytes());
        }
    }
    w
}

/// How activation bytes are drawn.
#[derive(Clone, Copy, Debug)]
enum Fill {
    Random,
    Const(i8),
    /// Alternating -128 and 127.
    Alternate,
}

fn act_byte(rng: &mut Rng, fill: Fill, i: usize) -> i8 {
    match fill {
        Fill::Random => rng.byte() as i8,
        Fill::Const(v) => v,
        Fill::Alternate => {
            if i.is_multiple_of(2) {
                -128
            } else {
                127
            }
        }
    }
}

fn acts_q8_0(rng: &mut Rng, nb: usize, fill: Fill) -> Vec<BlockQ8_0> {
    (0..nb)
        .map(|_| {
            let mut b = BlockQ8_0 {
                d: rng.f32_scale(),
                qs: [0; 32],
            };
            for (i, q) in b.qs.iter_mut().enumerate() {
                *q = act_byte(rng, fill, i);
            }
            b
        })
        .collect()
}

fn acts_q8_1(rng: &mut Rng, nb: usize, fill: Fill) -> Vec<BlockQ8_1> {
    (0..nb)
        .map(|_| {
            let mut b = BlockQ8_1 {
                d: rng.f32_scale(),
                s: rng.f32_scale(),
                qs: [0; 32],
            };
            for (i, q) in b.qs.iter_mut().enumerate() {
                *q = act_byte(rng, fill, i);
            }
            b
        })
        .collect()
}

/// Q8_K blocks; `bsums` are the true group sums, or (with `random_bsums`) any i16 values, which the
/// kernels must treat exactly as the scalar code does.
fn acts_q8_k(rng: &mut Rng, nb: usize, fill: Fill, random_bsums: bool) -> Vec<BlockQ8K> {
    (0..nb)
        .map(|_| {
            let mut b = BlockQ8K {
                d: rng.f32_scale(),
                ..BlockQ8K::default()
            };
            for (i, q) in b.qs.iter_mut().enumerate() {
                *q = act_byte(rng, fill, i);
            }
            for (s, g) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
                *s = if random_bsums {
                    rng.next() as i16
                } else {
                    g.iter().map(|&q| q as i16).sum()
                };
            }
            b
        })
        .collect()
}

fn same(what: &str, got: f32, want: f32) {
    assert_eq!(
        got.to_bits(),
        want.to_bits(),
        "{what}: NEON {got:e} ({:#010x}) != scalar {want:e} ({:#010x})",
        got.to_bits(),
        want.to_bits()
    );
}

fn dotprod() -> bool {
    has_dotprod(read_id_aa64isar0())
}

/// The NEON sets this core runs (the SDOT one only where it has SDOT).
fn sets() -> Vec<Kernels> {
    let mut v = vec![Kernels::NEON];
    if dotprod() {
        v.push(Kernels::NEON_DOTPROD);
    }
    v
}

const BLOCK_COUNTS: [usize; 8] = [1, 2, 3, 5, 8, 18, 48, 0];
const FILLS: [Fill; 5] = [
    Fill::Random,
    Fill::Random,
    Fill::Const(-128),
    Fill::Const(127),
    Fill::Alternate,
];

type One<A> = fn(&[u8], &[A]) -> f32;
type Four<A> = fn(&[u8], usize, &[A], &mut [f32; 4]);

/// One 32-wide type: one-row kernels and the four-row kernel against the scalar twin.
fn check_q32<A: Copy>(
    name: &str,
    bytes: usize,
    halves: &[usize],
    make_acts: fn(&mut Rng, usize, Fill) -> Vec<A>,
    scalar_fn: fn(&[u8], &[A]) -> f32,
    neon: &[(&str, One<A>, Four<A>)],
) {
    let mut rng = Rng(0x5eed ^ bytes as u64);
    let mut checked = 0;
    for nb in BLOCK_COUNTS {
        for (fi, fill) in FILLS.iter().enumerate() {
            for wfill in [None, None, Some(0x00), Some(0xff), Some(0x88), Some(0x80)] {
                let rb = nb * bytes;
                let w = weights(&mut rng, 4 * nb, bytes, halves, wfill);
                let a = make_acts(&mut rng, nb, *fill);
                let want: Vec<f32> = w
                    .chunks_exact(rb.max(1))
                    .take(4)
                    .map(|r| scalar_fn(r, &a))
                    .collect();
                for (set, one, four) in neon {
                    let what = alloc::format!(
                        "{name} {set} nb={nb} acts={fill:?} weights={wfill:?} #{fi}"
                    );
                    if nb == 0 {
                        same(&what, one(&[], &a), scalar_fn(&[], &a));
                        continue;
                    }
                    for r in 0..4 {
                        same(&what, one(&w[r * rb..(r + 1) * rb], &a), want[r]);
                    }
                    let mut out = [0.0f32; 4];
                    four(&w, rb, &a, &mut out);
                    for r in 0..4 {
                        same(&alloc::format!("{what} x4 row {r}"), out[r], want[r]);
                    }
                    checked += 1;
                }
            }
        }
    }
    // Lengths that disagree: the loops stop at the shorter side, as the scalar ones do.
    let w = weights(&mut rng, 7, bytes, halves, None);
    for na in [0, 3, 6, 7, 9] {
        let a = make_acts(&mut rng, na, Fill::Random);
        for (set, one, _) in neon {
            same(
                &alloc::format!("{name} {set} w=7 a={na}"),
                one(&w, &a),
                scalar_fn(&w, &a),
            );
            same(
                &alloc::format!("{name} {set} w=7.5 a={na}"),
                one(&w[..w.len() - bytes / 2], &a),
                scalar_fn(&w[..w.len() - bytes / 2], &a),
            );
        }
    }
    assert!(checked > 0);
}

#[test]
fn q4_0_matches_scalar() {
    let mut k: Vec<(&str, One<BlockQ8_0>, Four<BlockQ8_0>)> =
        vec![("neon", vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_x4)];
    if dotprod() {
        k.push((
            "neon-dotprod",
            vec_dot_q4_0_q8_0_dp,
            vec_dot_q4_0_q8_0_x4_dp,
        ));
    }
    check_q32("q4_0", 18, &[0], acts_q8_0, scalar::vec_dot_q4_0_q8_0, &k);
}

#[test]
fn q4_1_matches_scalar() {
    let mut k: Vec<(&str, One<BlockQ8_1>, Four<BlockQ8_1>)> =
        vec![("neon", vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_x4)];
    if dotprod() {
        k.push((
            "neon-dotprod",
            vec_dot_q4_1_q8_1_dp,
            vec_dot_q4_1_q8_1_x4_dp,
        ));
    }
    check_q32(
        "q4_1",
        20,
        &[0, 2],
        acts_q8_1,
        scalar::vec_dot_q4_1_q8_1,
        &k,
    );
}

#[test]
fn q5_0_matches_scalar() {
    let mut k: Vec<(&str, One<BlockQ8_0>, Four<BlockQ8_0>)> =
        vec![("neon", vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_x4)];
    if dotprod() {
        k.push((
            "neon-dotprod",
            vec_dot_q5_0_q8_0_dp,
            vec_dot_q5_0_q8_0_x4_dp,
        ));
    }
    check_q32("q5_0", 22, &[0], acts_q8_0, scalar::vec_dot_q5_0_q8_0, &k);
}

#[test]
fn q5_1_matches_scalar() {
    let mut k: Vec<(&str, One<BlockQ8_1>, Four<BlockQ8_1>)> =
        vec![("neon", vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_x4)];
    if dotprod() {
        k.push((
            "neon-dotprod",
            vec_dot_q5_1_q8_1_dp,
            vec_dot_q5_1_q8_1_x4_dp,
        ));
    }
    check_q32(
        "q5_1",
        24,
        &[0, 2],
        acts_q8_1,
        scalar::vec_dot_q5_1_q8_1,
        &k,
    );
}

#[test]
fn q8_0_matches_scalar() {
    let mut k: Vec<(&str, One<BlockQ8_0>, Four<BlockQ8_0>)> =
        vec![("neon", vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_x4)];
    if dotprod() {
        k.push((
            "neon-dotprod",
            vec_dot_q8_0_q8_0_dp,
            vec_dot_q8_0_q8_0_x4_dp,
        ));
    }
    check_q32("q8_0", 34, &[0], acts_q8_0, scalar::vec_dot_q8_0_q8_0, &k);
}

type DotK = fn(&[u8], &[BlockQ8K]) -> f32;

fn check_k(name: &str, bytes: usize, halves: &[usize], scalar_fn: DotK, plain: DotK, dp: DotK) {
    let mut k: Vec<(&str, DotK)> = vec![("neon", plain)];
    if dotprod() {
        k.push(("neon-dotprod", dp));
    }
    let mut rng = Rng(0x6b ^ bytes as u64);
    for nb in [0, 1, 2, 3, 6] {
        for fill in FILLS {
            for wfill in [
                None,
                None,
                None,
                Some(0x00),
                Some(0xff),
                Some(0xaa),
                Some(0x55),
            ] {
                for random_bsums in [false, true] {
                    let w = weights(&mut rng, nb, bytes, halves, wfill);
                    let a = acts_q8_k(&mut rng, nb, fill, random_bsums);
                    let want = scalar_fn(&w, &a);
                    for (set, f) in &k {
                        let what = alloc::format!(
                            "{name} {set} nb={nb} acts={fill:?} weights={wfill:?} bsums random={random_bsums}"
                        );
                        same(&what, f(&w, &a), want);
                    }
                }
            }
        }
    }
    // Lengths that disagree.
    let w = weights(&mut rng, 3, bytes, halves, None);
    for na in [0, 2, 4] {
        let a = acts_q8_k(&mut rng, na, Fill::Random, false);
        for (set, f) in &k {
            same(
                &alloc::format!("{name} {set} w=3 a={na}"),
                f(&w, &a),
                scalar_fn(&w, &a),
            );
        }
    }
}

#[test]
fn q2_k_matches_scalar() {
    check_k(
        "q2_k",
        84,
        &[80, 82],
        scalar::vec_dot_q2_k_q8_k,
        vec_dot_q2_k_q8_k,
        vec_dot_q2_k_q8_k_dp,
    );
}

#[test]
fn q3_k_matches_scalar() {
    check_k(
        "q3_k",
        110,
        &[108],
        scalar::vec_dot_q3_k_q8_k,
        vec_dot_q3_k_q8_k,
        vec_dot_q3_k_q8_k_dp,
    );
}

#[test]
fn q4_k_matches_scalar() {
    check_k(
        "q4_k",
        144,
        &[0, 2],
        scalar::vec_dot_q4_k_q8_k,
        vec_dot_q4_k_q8_k,
        vec_dot_q4_k_q8_k_dp,
    );
}

#[test]
fn q5_k_matches_scalar() {
    check_k(
        "q5_k",
        176,
        &[0, 2],
        scalar::vec_dot_q5_k_q8_k,
        vec_dot_q5_k_q8_k,
        vec_dot_q5_k_q8_k_dp,
    );
}

#[test]
fn q6_k_matches_scalar() {
    check_k(
        "q6_k",
        210,
        &[208],
        scalar::vec_dot_q6_k_q8_k,
        vec_dot_q6_k_q8_k,
        vec_dot_q6_k_q8_k_dp,
    );
}

/// Random finite f16 bits (a few huge and subnormal values among them).
fn f16_bits(rng: &mut Rng) -> u16 {
    match rng.below(10) {
        0 => {
            let b = rng.next() as u16;
            if b & 0x7c00 == 0x7c00 {
                b & !0x4000
            } else {
                b
            }
        }
        1 => rng.next() as u16 & 0x83ff,
        _ => f16::from_f32(rng.unit() * 4.0).to_bits(),
    }
}

/// Random finite bf16 bits.
fn bf16_bits(rng: &mut Rng) -> u16 {
    match rng.below(10) {
        0 => {
            let b = rng.next() as u16;
            if b & 0x7f80 == 0x7f80 {
                b & !0x4000
            } else {
                b
            }
        }
        _ => bf16::from_f32(rng.wide()).to_bits(),
    }
}

const FLOAT_LENS: [usize; 14] = [0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 576, 1536];

#[test]
fn float_dots_match_scalar() {
    let mut rng = Rng(0xf10a7);
    for n in FLOAT_LENS {
        for _ in 0..4 {
            let x: Vec<f32> = (0..n).map(|_| rng.wide()).collect();
            let w: Vec<u8> = (0..n).flat_map(|_| rng.wide().to_le_bytes()).collect();
            same(
                &alloc::format!("f32 n={n}"),
                vec_dot_f32_f32(&w, &x),
                scalar::vec_dot_f32_f32(&w, &x),
            );
            // One more weight than activations, and the other way round.
            if n > 0 {
                same(
                    "f32 short x",
                    vec_dot_f32_f32(&w, &x[1..]),
                    scalar::vec_dot_f32_f32(&w, &x[1..]),
                );
                same(
                    "f32 short w",
                    vec_dot_f32_f32(&w[4..], &x),
                    scalar::vec_dot_f32_f32(&w[4..], &x),
                );
            }

            let x: Vec<u16> = (0..n).map(|_| f16_bits(&mut rng)).collect();
            let w: Vec<u8> = (0..n)
                .flat_map(|_| f16_bits(&mut rng).to_le_bytes())
                .collect();
            same(
                &alloc::format!("f16 n={n}"),
                vec_dot_f16_f16(&w, &x),
                scalar::vec_dot_f16_f16(&w, &x),
            );
            // Odd byte count: the last half-element is ignored by both.
            if n > 0 {
                same(
                    "f16 odd",
                    vec_dot_f16_f16(&w[1..], &x),
                    scalar::vec_dot_f16_f16(&w[1..], &x),
                );
            }

            let x: Vec<u16> = (0..n).map(|_| bf16_bits(&mut rng)).collect();
            let w: Vec<u8> = (0..n)
                .flat_map(|_| bf16_bits(&mut rng).to_le_bytes())
                .collect();
            same(
                &alloc::format!("bf16 n={n}"),
                vec_dot_bf16_bf16(&w, &x),
                scalar::vec_dot_bf16_bf16(&w, &x),
            );
        }
    }
}

#[test]
fn attention_matches_scalar() {
    let mut rng = Rng(0xa77e);
    for hd in [1, 7, 8, 15, 16, 64, 65, 128] {
        for n in [1, 2, 5, 33] {
            for big in [false, true] {
                let (stride, offset) = (3 * hd + 5, hd + 2);
                let q: Vec<f32> = (0..hd)
                    .map(|_| if big { rng.wide() } else { rng.unit() })
                    .collect();
                let keys: Vec<u16> = (0..n * stride).map(|_| f16_bits(&mut rng)).collect();
                let values: Vec<u16> = (0..n * stride).map(|_| f16_bits(&mut rng)).collect();
                let k = &keys[offset..offset + hd];
                same(
                    &alloc::format!("q·k hd={hd}"),
                    dot_f32_f16(&q, k),
                    crate::ops::dot_f32_f16(&q, k),
                );
                let scale = 1.0 / libm::sqrtf(hd as f32);
                let mut want = vec![0.0f32; hd];
                let mut got = vec![1.0f32; hd];
                crate::ops::attend_head(&mut want, &q, &keys, &values, n, stride, offset, scale);
                attend_head(&mut got, &q, &keys, &values, n, stride, offset, scale);
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    same(
                        &alloc::format!("attend hd={hd} n={n} big={big} [{i}]"),
                        *g,
                        *w,
                    );
                }
            }
        }
    }
}

/// Activation vectors with every kind of block: ordinary, wide-ranging, all zero, tiny (the scale
/// underflows or its inverse overflows), huge, infinite, exact ties for rounding, and (Q8_K) the
/// largest magnitude reached with both signs in either order.
fn activation_vectors(rng: &mut Rng, n: usize) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    for kind in 0..12 {
        let x: Vec<f32> = (0..n)
            .map(|i| match kind {
                0 => rng.unit(),
                1 => rng.wide(),
                2 => 0.0,
                3 => rng.unit() * 1.0e-40,
                4 => rng.unit() * 1.0e-36,
                5 => rng.unit() * 3.0e38,
                6 => {
                    if i % 37 == 5 {
                        f32::INFINITY
                    } else {
                        rng.unit()
                    }
                }
                7 => ((rng.below(255) as f32) - 127.0) * 0.5,
                8 => [1.0, -1.0, 0.5, -0.25][i % 4],
                9 => {
                    if i % 64 == 3 {
                        -2.0
                    } else if i % 64 == 9 {
                        2.0
                    } else {
                        rng.unit()
                    }
                }
                10 => {
                    if i % 64 == 3 {
                        2.0
                    } else if i % 64 == 9 {
                        -2.0
                    } else {
                        rng.unit()
                    }
                }
                _ => {
                    if i % 3 == 0 {
                        -0.0
                    } else {
                        0.0
                    }
                }
            })
            .collect();
        out.push(x);
    }
    out
}

#[test]
fn quantizers_match_scalar() {
    let mut rng = Rng(0x9a);
    for n in [256, 512, 1536] {
        for x in activation_vectors(&mut rng, n) {
            let nb = n / 32;
            let (mut a, mut b) = (
                vec![BlockQ8_0::default(); nb],
                vec![BlockQ8_0::default(); nb],
            );
            act::quantize_q8_0(&x, &mut a);
            quantize_q8_0(&x, &mut b);
            for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                assert_eq!(
                    (a.d.to_bits(), a.qs),
                    (b.d.to_bits(), b.qs),
                    "q8_0 block {i}: {:?}",
                    &x[32 * i..32 * i + 32]
                );
            }
            let (mut a, mut b) = (
                vec![BlockQ8_1::default(); nb],
                vec![BlockQ8_1::default(); nb],
            );
            act::quantize_q8_1(&x, &mut a);
            quantize_q8_1(&x, &mut b);
            for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                assert_eq!(
                    (a.d.to_bits(), a.s.to_bits(), a.qs),
                    (b.d.to_bits(), b.s.to_bits(), b.qs),
                    "q8_1 block {i}"
                );
            }
            let nb = n / 256;
            let (mut a, mut b) = (vec![BlockQ8K::default(); nb], vec![BlockQ8K::default(); nb]);
            act::quantize_q8_k(&x, &mut a);
            quantize_q8_k(&x, &mut b);
            for (i, (a, b)) in a.iter().zip(&b).enumerate() {
                assert_eq!(a.d.to_bits(), b.d.to_bits(), "q8_k block {i} d");
                assert_eq!(a.qs, b.qs, "q8_k block {i} qs");
                assert_eq!(a.bsums, b.bsums, "q8_k block {i} bsums");
            }
        }
    }
}

#[test]
fn dot_rows_four_at_a_time_matches_scalar() {
    let mut rng = Rng(0xd07);
    let n = 768;
    let x: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
    for ty in GgmlType::ALL {
        let mut acts = ActBuf::with_capacity(n);
        acts.quantize(ty.act_format(), &x).unwrap();
        let a = acts.acts().unwrap();
        let rb = ty.row_bytes(n as u64).unwrap() as usize;
        for rows in [1, 3, 4, 5, 8, 9, 13] {
            let mut w: Vec<u8> = (0..rows * rb).map(|_| rng.byte()).collect();
            // Finite scales for the block types (random bytes elsewhere).
            if ty.block_elems() > 1 {
                let bb = ty.block_bytes();
                for b in w.chunks_exact_mut(bb) {
                    for at in match ty {
                        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => [0, 2],
                        GgmlType::Q2K => [80, 82],
                        GgmlType::Q3K => [108, 108],
                        GgmlType::Q6K => [208, 208],
                        _ => [0, 0],
                    } {
                        b[at..at + 2].copy_from_slice(&rng.f16_scale().to_le_bytes());
                    }
                }
            } else {
                w.fill(0x3c);
            }
            let mut want = vec![0.0f32; rows];
            Kernels::SCALAR.dot_rows(ty, n, &w, &a, &mut want).unwrap();
            for k in sets() {
                let mut got = vec![0.0f32; rows];
                k.dot_rows(ty, n, &w, &a, &mut got).unwrap();
                for r in 0..rows {
                    same(
                        &alloc::format!("{} {ty} rows={rows} row {r}", k.name),
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

#[test]
fn fixtures_match_scalar() {
    let names = [
        "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k",
        "q5_k", "q6_k",
    ];
    let mut report = String::new();
    for name in names {
        let path = fixtures_dir().join(alloc::format!("{name}.gguf"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let src = crate::SliceStorage::new(&bytes);
        let g = crate::Gguf::open(&src).unwrap();
        let t = g.require_tensor("w").unwrap().clone();
        let w = &bytes[t.offset as usize..(t.offset + t.size) as usize];
        let xt = g.require_tensor("x").unwrap();
        let x: Vec<f32> = bytes[xt.offset as usize..(xt.offset + xt.size) as usize]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let (rows, n) = (t.rows() as usize, t.row_len() as usize);
        assert_eq!((rows, n, x.len()), (4, 1536, 1536), "{name}");
        let mut acts = ActBuf::with_capacity(n);
        acts.quantize(t.ty.act_format(), &x).unwrap();
        let a = acts.acts().unwrap();
        let mut want = vec![0.0f32; rows];
        Kernels::SCALAR.dot_rows(t.ty, n, w, &a, &mut want).unwrap();
        for k in sets() {
            // All four rows at once (the four-row kernels), then row by row (one-row kernels).
            let mut got = vec![0.0f32; rows];
            k.dot_rows(t.ty, n, w, &a, &mut got).unwrap();
            let rb = w.len() / rows;
            for r in 0..rows {
                same(
                    &alloc::format!("{name} {} row {r}", k.name),
                    got[r],
                    want[r],
                );
                let one = k.dot(t.ty, n, &w[r * rb..(r + 1) * rb], &a).unwrap();
                same(
                    &alloc::format!("{name} {} one row {r}", k.name),
                    one,
                    want[r],
                );
            }
        }
        // The NEON quantizers give the same blocks for this `x`.
        match t.ty.act_format() {
            crate::ActFormat::Q8_0 => {
                let mut b = vec![BlockQ8_0::default(); n / 32];
                quantize_q8_0(&x, &mut b);
                let crate::Acts::Q8_0(s) = a else {
                    unreachable!()
                };
                for (s, b) in s.iter().zip(&b) {
                    assert_eq!((s.d.to_bits(), s.qs), (b.d.to_bits(), b.qs), "{name} q8_0");
                }
            }
            crate::ActFormat::Q8_1 => {
                let mut b = vec![BlockQ8_1::default(); n / 32];
                quantize_q8_1(&x, &mut b);
                let crate::Acts::Q8_1(s) = a else {
                    unreachable!()
                };
                for (s, b) in s.iter().zip(&b) {
                    assert_eq!(
                        (s.d.to_bits(), s.s.to_bits(), s.qs),
                        (b.d.to_bits(), b.s.to_bits(), b.qs),
                        "{name} q8_1"
                    );
                }
            }
            crate::ActFormat::Q8K => {
                let mut b = vec![BlockQ8K::default(); n / 256];
                quantize_q8_k(&x, &mut b);
                let crate::Acts::Q8K(s) = a else {
                    unreachable!()
                };
                for (s, b) in s.iter().zip(&b) {
                    assert_eq!(
                        (s.d.to_bits(), s.qs, s.bsums),
                        (b.d.to_bits(), b.qs, b.bsums),
                        "{name} q8_k"
                    );
                }
            }
            _ => {}
        }
        report.push_str(&alloc::format!("{name}: {want:?}\n"));
    }
    std::println!("{report}");
}

/// `bits` converted by FCVTL (lane 3) and FCVTL2 (lane 4 of 8).
#[target_feature(enable = "neon")]
fn fcvtl_both(bits: u16) -> (f32, f32) {
    let v = vcombine_u16(vdup_n_u16(bits), vdup_n_u16(bits));
    (
        vgetq_lane_f32::<3>(f16x8_low_to_f32(v)),
        vgetq_lane_f32::<0>(f16x8_high_to_f32(v)),
    )
}

/// The f16 → f32 conversions the kernels use (FCVT, FCVTL, FCVTL2) against `half`, for every f16
/// that is not a NaN; and f32 → f16 → f32 rounding (FCVT) against `half` on every f16 rounding
/// boundary (midpoints, ties to even) and its neighbours.
#[test]
fn f16_conversions_match_half() {
    let finite = |b: u16| b & 0x7c00 != 0x7c00 || b & 0x03ff == 0;
    for bits in 0..=u16::MAX {
        if !finite(bits) {
            continue;
        }
        let want = f16::from_bits(bits).to_f32().to_bits();
        assert_eq!(f16_to_f32(bits).to_bits(), want, "fcvt {bits:#06x}");
        // SAFETY: NEON is part of the aarch64 baseline.
        let (lo, hi) = unsafe { fcvtl_both(bits) };
        assert_eq!(lo.to_bits(), want, "fcvtl {bits:#06x}");
        assert_eq!(hi.to_bits(), want, "fcvtl2 {bits:#06x}");
    }
    let hw = quantize::fpcr_is_ieee();
    assert!(hw, "FPCR is not IEEE: the FCVT rounding path is not tested");
    let mut rng = Rng(0x16);
    for bits in 0..0x7c00u16 {
        let lo = f16::from_bits(bits).to_f32();
        let hi = f16::from_bits(bits + 1).to_f32();
        let mid = (lo + hi) / 2.0;
        for x in [
            lo,
            mid,
            hi,
            f32::from_bits(mid.to_bits() - 1),
            f32::from_bits(mid.to_bits() + 1),
        ] {
            for x in [x, -x, x * rng.unit()] {
                let want = f16::from_f32(x).to_f32().to_bits();
                assert_eq!(quantize::f16_round(x, true).to_bits(), want, "round {x:e}");
                assert_eq!(quantize::f16_round(x, false).to_bits(), want, "round {x:e}");
            }
        }
    }
    for x in [
        65520.0f32,
        65519.99,
        1.0e10,
        f32::INFINITY,
        f32::MAX,
        1.0e-30,
        f32::MIN_POSITIVE,
    ] {
        for x in [x, -x] {
            let want = f16::from_f32(x).to_f32().to_bits();
            assert_eq!(quantize::f16_round(x, true).to_bits(), want, "round {x:e}");
        }
    }
}

#[test]
fn kernel_set_follows_id_aa64isar0_dp() {
    // The decision as a function of the register value.
    assert_eq!(Kernels::for_aarch64(0).name, "neon");
    assert_eq!(Kernels::for_aarch64(1 << 44).name, "neon-dotprod");
    assert_eq!(Kernels::for_aarch64(2 << 44).name, "neon-dotprod");
    // Other fields set, DP clear (Cortex-A53's value: AES, SHA1, SHA2, CRC32).
    assert_eq!(Kernels::for_aarch64(0x11120).name, "neon");
    assert_eq!(Kernels::for_aarch64(!(0xf << 44)).name, "neon");
    // Cortex-A76: DP = 1 among others.
    assert_eq!(Kernels::for_aarch64(0x1000_1021_1120).name, "neon-dotprod");
    let names = |isar0| Kernels::aarch64_sets(isar0).map(|k| k.map(|k| k.name));
    assert_eq!(names(0), [Some("neon"), None]);
    assert_eq!(names(1 << 44), [Some("neon"), Some("neon-dotprod")]);

    // This core: what the register says, and what qemu-user's CPU model has.
    let isar0 = read_id_aa64isar0();
    let best = Kernels::best();
    assert_eq!(best.name, Kernels::for_aarch64(isar0).name);
    let available: Vec<&str> = Kernels::available()
        .iter()
        .flatten()
        .map(|k| k.name)
        .collect();
    assert_eq!(available.first(), Some(&"scalar"));
    assert_eq!(available.last(), Some(&best.name));
    match std::env::var("QEMU_CPU").as_deref() {
        Ok("cortex-a53") | Ok("cortex-a57") | Ok("cortex-a72") => {
            assert_eq!(best.name, "neon", "ID_AA64ISAR0_EL1 = {isar0:#x}");
            assert_eq!(available, ["scalar", "neon"]);
        }
        Ok("cortex-a76") | Ok("cortex-a55") | Ok("neoverse-n1") | Ok("max") => {
            assert_eq!(best.name, "neon-dotprod", "ID_AA64ISAR0_EL1 = {isar0:#x}");
            assert_eq!(available, ["scalar", "neon", "neon-dotprod"]);
        }
        _ => {}
    }
    // The scalar set stays selectable.
    assert_eq!(Kernels::SCALAR.name, "scalar");
    assert!(Kernels::by_name("scalar").is_some());
    assert!(Kernels::by_name("neon").is_some());
}
