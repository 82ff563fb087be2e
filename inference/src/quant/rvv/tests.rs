//! Every RVV kernel against its scalar twin, bit for bit (`to_bits()` equal), on random inputs with
//! extreme values (fixed-seed PRNG) and on the shared quantization fixtures; the V detection and the
//! choice of kernel set. Run under qemu-user at several vector lengths:
//!
//! ```text
//! QEMU_CPU="rv64,v=true,vlen=128,elen=64" cargo test -p inference --target riscv64gc-unknown-linux-gnu
//! QEMU_CPU="rv64,v=true,vlen=256,elen=64" cargo test -p inference --target riscv64gc-unknown-linux-gnu
//! QEMU_CPU="rv64,v=false" cargo test -p inference --target riscv64gc-unknown-linux-gnu
//! ```
//!
//! The last one has no V: the kernel tests report that they are skipped (the hart would trap on the
//! first vector instruction) and the selection test checks that the scalar set is chosen. Adding
//! `,rvv_ta_all_1s=true,rvv_ma_all_1s=true` to a V CPU makes QEMU overwrite tail and masked-off
//! lanes with ones, as hardware may under `ta` / `ma`: the kernels must still agree.
//! No tolerance anywhere: every comparison is exact.

extern crate std;

use super::*;
use crate::quant::act::{self, ActBuf, BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::{scalar, GgmlType};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use half::{bf16, f16};

/// `AT_HWCAP` of this process, from the auxiliary vector (qemu-user emulates /proc/self/auxv).
fn hwcap() -> u64 {
    const AT_HWCAP: u64 = 16;
    let auxv = std::fs::read("/proc/self/auxv").expect("/proc/self/auxv");
    auxv.chunks_exact(16)
        .map(|e| {
            let word = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            (word(&e[..8]), word(&e[8..]))
        })
        .find(|&(k, _)| k == AT_HWCAP)
        .map_or(0, |(_, v)| v)
}

/// Records what the hart reports (as the kernel does at boot from the device tree) and returns it;
/// `false` means the RVV kernels must not run, and the caller skips with a message.
fn init(test: &str) -> bool {
    let v = hwcap_has_v(hwcap());
    set_available(v);
    if !v {
        std::println!(
            "{test}: skipped, this hart has no V extension (AT_HWCAP = {:#x})",
            hwcap()
        );
    }
    v
}

/// VLEN in bits (vlenb · 8); only on harts with V.
fn vlen() -> usize {
    let b: usize;
    // SAFETY: reads the read-only CSR vlenb; the caller checked that the hart has V.
    unsafe {
        core::arch::asm!(".option push", ".option arch, +v", "csrr {b}, vlenb", ".option pop",
            b = out(reg) b, options(nomem, nostack));
    }
    b * 8
}

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
    /// Widely varying magnitude, never NaN or infinite.
    fn wide(&mut self) -> f32 {
        let e = self.below(40) as i32 - 20;
        self.unit() * libm::powf(2.0, e as f32)
    }
    /// f16 bits for a scale: mostly ordinary values, and the extremes (largest, ±0, subnormals,
    /// huge, any finite bits, infinity).
    fn f16_scale(&mut self) -> u16 {
        match self.below(14) {
            0 => 0x7bff,
            1 => 0xfbff,
            2 => 0x0000,
            3 => 0x8000,
            4 => 0x0001,
            5 => 0x83ff,
            6 => (self.next() as u16) & 0x03ff | 0x7800,
            7 => 0x7c00,
            8 => {
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

fn same(what: &str, got: f32, want: f32) {
    assert_eq!(
        got.to_bits(),
        want.to_bits(),
        "{what}: RVV {got:e} ({:#010x}) != scalar {want:e} ({:#010x})",
        got.to_bits(),
        want.to_bits()
    );
}

/// Weight bytes for `nb` blocks of `bytes`, random or all `fill`, with f16 scales at `halves`.
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
        Fill::Alternate => [-128, 127][i % 2],
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

/// Block counts: single blocks, partial and whole passes at VLEN 128 (16 blocks) and 256 (32),
/// several passes, and the model's rows (576 and 1536 elements: 18 and 48 blocks).
const BLOCK_COUNTS: [usize; 13] = [0, 1, 2, 3, 7, 15, 16, 17, 18, 31, 33, 48, 130];
const FILLS: [Fill; 6] = [
    Fill::Random,
    Fill::Random,
    Fill::Const(-128),
    Fill::Const(127),
    Fill::Const(0),
    Fill::Alternate,
];

type One<A> = fn(&[u8], &[A]) -> f32;
type Four<A> = fn(&[u8], usize, &[A], &mut [f32; 4]);

/// One 32-wide type against its scalar twin: every block count × activation fill × weight fill,
/// the one-row kernel on rows at any byte offset (unaligned) and the four-row kernel, and lengths
/// that disagree.
fn check_q32<A: Copy>(
    name: &str,
    bytes: usize,
    halves: &[usize],
    make_acts: fn(&mut Rng, usize, Fill) -> Vec<A>,
    scalar_fn: One<A>,
    (rvv_fn, four): (One<A>, Four<A>),
) {
    let mut rng = Rng(0x5eed ^ bytes as u64);
    let mut checked = 0;
    for nb in BLOCK_COUNTS {
        for fill in FILLS {
            for wfill in [
                None,
                None,
                Some(0x00),
                Some(0xff),
                Some(0x88),
                Some(0x80),
                Some(0x0f),
            ] {
                let rb = nb * bytes;
                let w4 = weights(&mut rng, 4 * nb, bytes, halves, wfill);
                let w = &w4[..rb];
                let a = make_acts(&mut rng, nb, fill);
                let want = scalar_fn(w, &a);
                let what = alloc::format!("{name} nb={nb} acts={fill:?} weights={wfill:?}");
                same(&what, rvv_fn(w, &a), want);
                let mut out = [f32::NAN; 4];
                four(&w4, rb, &a, &mut out);
                for r in 0..4 {
                    let want = scalar_fn(&w4[r * rb..(r + 1) * rb], &a);
                    same(&alloc::format!("{what} x4 row {r}"), out[r], want);
                }
                // The same row at another address (byte loads only: any alignment works).
                let shift = 1 + rng.below(7) as usize;
                let mut buf = vec![0u8; w.len() + 8];
                buf[shift..shift + w.len()].copy_from_slice(w);
                same(
                    &alloc::format!("{what} at +{shift}"),
                    rvv_fn(&buf[shift..shift + w.len()], &a),
                    want,
                );
                checked += 1;
            }
        }
    }
    // Lengths that disagree: both stop at the shorter side.
    let w = weights(&mut rng, 20, bytes, halves, None);
    for na in [0, 3, 19, 20, 21, 40] {
        let a = make_acts(&mut rng, na, Fill::Random);
        same(
            &alloc::format!("{name} w=20 a={na}"),
            rvv_fn(&w, &a),
            scalar_fn(&w, &a),
        );
        let short = &w[..w.len() - bytes / 2];
        same(
            &alloc::format!("{name} w=19.5 a={na}"),
            rvv_fn(short, &a),
            scalar_fn(short, &a),
        );
        // Four rows of 5 blocks, with fewer activations or fewer bytes than four rows need.
        let mut out = [0.0f32; 4];
        for len in [w.len(), w.len() - 1, 3 * 5 * bytes + 7] {
            four(&w[..len], 5 * bytes, &a, &mut out);
            for r in 0..4 {
                let row = w[..len].get(r * 5 * bytes..).unwrap_or(&[]);
                let want = scalar_fn(&row[..row.len().min(5 * bytes)], &a);
                same(
                    &alloc::format!("{name} x4 len={len} a={na} row {r}"),
                    out[r],
                    want,
                );
            }
        }
    }
    assert!(checked > 0);
}

#[test]
fn q4_0_matches_scalar() {
    if init("q4_0_matches_scalar") {
        check_q32(
            "q4_0",
            18,
            &[0],
            acts_q8_0,
            scalar::vec_dot_q4_0_q8_0,
            (vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_x4),
        );
    }
}

#[test]
fn q4_1_matches_scalar() {
    if init("q4_1_matches_scalar") {
        check_q32(
            "q4_1",
            20,
            &[0, 2],
            acts_q8_1,
            scalar::vec_dot_q4_1_q8_1,
            (vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_x4),
        );
    }
}

#[test]
fn q5_0_matches_scalar() {
    if init("q5_0_matches_scalar") {
        check_q32(
            "q5_0",
            22,
            &[0],
            acts_q8_0,
            scalar::vec_dot_q5_0_q8_0,
            (vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_x4),
        );
    }
}

#[test]
fn q5_1_matches_scalar() {
    if init("q5_1_matches_scalar") {
        check_q32(
            "q5_1",
            24,
            &[0, 2],
            acts_q8_1,
            scalar::vec_dot_q5_1_q8_1,
            (vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_x4),
        );
    }
}

#[test]
fn q8_0_matches_scalar() {
    if init("q8_0_matches_scalar") {
        check_q32(
            "q8_0",
            34,
            &[0],
            acts_q8_0,
            scalar::vec_dot_q8_0_q8_0,
            (vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_x4),
        );
    }
}

/// Q8_K blocks; `bsums` are the true group sums, or (with `random_bsums`) any i16 values, which
/// the kernels must use exactly as the scalar code does.
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

type DotK = fn(&[u8], &[BlockQ8K]) -> f32;

/// One K-quant type against its scalar twin: super-block counts × activation fills × weight fills
/// (random, all bits clear or set, alternating bits) × true or random `bsums`, and lengths that
/// disagree.
fn check_k(name: &str, bytes: usize, halves: &[usize], scalar_fn: DotK, rvv_fn: DotK) {
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
                    same(
                        &alloc::format!(
                            "{name} nb={nb} acts={fill:?} weights={wfill:?} random bsums={random_bsums}"
                        ),
                        rvv_fn(&w, &a),
                        scalar_fn(&w, &a),
                    );
                }
            }
        }
    }
    let w = weights(&mut rng, 3, bytes, halves, None);
    for na in [0, 2, 4] {
        let a = acts_q8_k(&mut rng, na, Fill::Random, false);
        same(
            &alloc::format!("{name} w=3 a={na}"),
            rvv_fn(&w, &a),
            scalar_fn(&w, &a),
        );
        let short = &w[..w.len() - 1];
        same(
            &alloc::format!("{name} w=2.99 a={na}"),
            rvv_fn(short, &a),
            scalar_fn(short, &a),
        );
    }
}

#[test]
fn q2_k_matches_scalar() {
    if init("q2_k_matches_scalar") {
        check_k(
            "q2_k",
            84,
            &[80, 82],
            scalar::vec_dot_q2_k_q8_k,
            vec_dot_q2_k_q8_k,
        );
    }
}

#[test]
fn q3_k_matches_scalar() {
    if init("q3_k_matches_scalar") {
        check_k(
            "q3_k",
            110,
            &[108],
            scalar::vec_dot_q3_k_q8_k,
            vec_dot_q3_k_q8_k,
        );
    }
}

#[test]
fn q4_k_matches_scalar() {
    if init("q4_k_matches_scalar") {
        check_k(
            "q4_k",
            144,
            &[0, 2],
            scalar::vec_dot_q4_k_q8_k,
            vec_dot_q4_k_q8_k,
        );
    }
}

#[test]
fn q5_k_matches_scalar() {
    if init("q5_k_matches_scalar") {
        check_k(
            "q5_k",
            176,
            &[0, 2],
            scalar::vec_dot_q5_k_q8_k,
            vec_dot_q5_k_q8_k,
        );
    }
}

#[test]
fn q6_k_matches_scalar() {
    if init("q6_k_matches_scalar") {
        check_k(
            "q6_k",
            210,
            &[208],
            scalar::vec_dot_q6_k_q8_k,
            vec_dot_q6_k_q8_k,
        );
    }
}

/// Every f16 value converts as `half` converts it (the scales of every 32-wide kernel and the f16
/// dot product go through the same conversion): one Q8_0 block per f16 bit pattern, with sumi = 1
/// and y.d = 1, gives `d` itself.
#[test]
fn f16_scales_convert_exactly() {
    if !init("f16_scales_convert_exactly") {
        return;
    }
    let mut w = [0u8; 34];
    w[2] = 1;
    let mut y = BlockQ8_0 {
        d: 1.0,
        qs: [0; 32],
    };
    y.qs[0] = 1;
    for h in 0..=u16::MAX {
        w[..2].copy_from_slice(&h.to_le_bytes());
        let got = vec_dot_q8_0_q8_0(&w, core::slice::from_ref(&y));
        let want = scalar::vec_dot_q8_0_q8_0(&w, core::slice::from_ref(&y));
        // NaN included: RISC-V arithmetic returns the canonical NaN, in scalar and vector code.
        same(&alloc::format!("f16 {h:#06x}"), got, want);
    }
}

/// Random finite f16 bits (huge and subnormal values among them).
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

type Dot16 = fn(&[u8], &[u16]) -> f32;

const FLOAT_LENS: [usize; 17] = [
    0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 130, 257, 576, 1536,
];

#[test]
fn float_dots_match_scalar() {
    if !init("float_dots_match_scalar") {
        return;
    }
    let mut rng = Rng(0xf10a7);
    for n in FLOAT_LENS {
        for _ in 0..4 {
            let x: Vec<f32> = (0..n).map(|_| rng.wide()).collect();
            // One spare word in front, so the row can also start 1, 2 or 3 bytes later.
            let mut buf = vec![0u8; 4 * n + 4];
            for (b, v) in buf[4..].chunks_exact_mut(4).zip(0..n) {
                let _ = v;
                b.copy_from_slice(&rng.wide().to_le_bytes());
            }
            for off in [4, 0, 1, 2, 3] {
                let w = &buf[off..off + 4 * n];
                same(
                    &alloc::format!("f32 n={n} at +{off}"),
                    vec_dot_f32_f32(w, &x),
                    scalar::vec_dot_f32_f32(w, &x),
                );
            }
            let w = &buf[4..];
            if n > 0 {
                same(
                    "f32 short x",
                    vec_dot_f32_f32(w, &x[1..]),
                    scalar::vec_dot_f32_f32(w, &x[1..]),
                );
                same(
                    "f32 short w",
                    vec_dot_f32_f32(&w[4..], &x),
                    scalar::vec_dot_f32_f32(&w[4..], &x),
                );
            }

            for (ty, bits) in [
                ("f16", f16_bits as fn(&mut Rng) -> u16),
                ("bf16", bf16_bits),
            ] {
                let (rvv, sc): (Dot16, Dot16) = if ty == "f16" {
                    (vec_dot_f16_f16, scalar::vec_dot_f16_f16)
                } else {
                    (vec_dot_bf16_bf16, scalar::vec_dot_bf16_bf16)
                };
                let x: Vec<u16> = (0..n).map(|_| bits(&mut rng)).collect();
                let mut buf = vec![0u8; 2 * n + 2];
                for b in buf[2..].chunks_exact_mut(2) {
                    b.copy_from_slice(&bits(&mut rng).to_le_bytes());
                }
                for off in [2, 0, 1] {
                    let w = &buf[off..off + 2 * n];
                    same(
                        &alloc::format!("{ty} n={n} at +{off}"),
                        rvv(w, &x),
                        sc(w, &x),
                    );
                }
                if n > 0 {
                    let w = &buf[2..];
                    same(
                        &alloc::format!("{ty} odd"),
                        rvv(&w[1..], &x),
                        sc(&w[1..], &x),
                    );
                    same(
                        &alloc::format!("{ty} short x"),
                        rvv(w, &x[1..]),
                        sc(w, &x[1..]),
                    );
                }
            }
        }
    }
}

#[test]
fn attention_matches_scalar() {
    if !init("attention_matches_scalar") {
        return;
    }
    let mut rng = Rng(0xa77e);
    for hd in [1, 7, 8, 9, 15, 16, 17, 33, 64, 65, 128] {
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
    // q and k of different lengths: the shorter side decides.
    let q: Vec<f32> = (0..20).map(|_| rng.unit()).collect();
    let k: Vec<u16> = (0..13).map(|_| f16_bits(&mut rng)).collect();
    same(
        "q·k 20/13",
        dot_f32_f16(&q, &k),
        crate::ops::dot_f32_f16(&q, &k),
    );
    same(
        "q·k 13/20",
        dot_f32_f16(&q[..13], &k),
        crate::ops::dot_f32_f16(&q[..13], &k),
    );
    same(
        "q·k empty",
        dot_f32_f16(&[], &k),
        crate::ops::dot_f32_f16(&[], &k),
    );
}

/// Activation vectors with every kind of block: ordinary, wide-ranging, all zero, tiny (the scale
/// underflows or its inverse overflows), huge, infinite, NaN, exact rounding ties, ±0, and (Q8_K)
/// the largest magnitude reached with both signs in either order.
fn activation_vectors(rng: &mut Rng, n: usize) -> Vec<Vec<f32>> {
    (0..14)
        .map(|kind| {
            (0..n)
                .map(|i| match kind {
                    0 => rng.unit(),
                    1 => rng.wide(),
                    2 => 0.0,
                    3 => rng.unit() * 1.0e-40,
                    4 => rng.unit() * 1.0e-36,
                    5 => rng.unit() * 3.0e38,
                    6 if i % 37 == 5 => f32::INFINITY,
                    7 if i % 41 == 7 => f32::NAN,
                    8 => ((rng.below(255) as f32) - 127.0) * 0.5,
                    9 => [1.0, -1.0, 0.5, -0.25][i % 4],
                    10 if i % 64 == 3 => -2.0,
                    10 if i % 64 == 9 => 2.0,
                    11 if i % 64 == 3 => 2.0,
                    11 if i % 64 == 9 => -2.0,
                    12 => [0.0, -0.0][i % 2],
                    13 if i % 256 == 255 => -1.0,
                    13 => rng.unit() * 0.001,
                    _ => rng.unit(),
                })
                .collect()
        })
        .collect()
}

#[test]
fn quantizers_match_scalar() {
    if !init("quantizers_match_scalar") {
        return;
    }
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
    // Shorter output than input and the other way round: both stop at the shorter side.
    let x = activation_vectors(&mut rng, 512).swap_remove(0);
    let mut a = vec![BlockQ8_0::default(); 20];
    let mut b = a.clone();
    act::quantize_q8_0(&x[..256], &mut a);
    quantize_q8_0(&x[..256], &mut b);
    assert!(a
        .iter()
        .zip(&b)
        .all(|(a, b)| (a.d.to_bits(), a.qs) == (b.d.to_bits(), b.qs)));
    let mut a = vec![BlockQ8K::default(); 1];
    let mut b = a.clone();
    act::quantize_q8_k(&x, &mut a);
    quantize_q8_k(&x, &mut b);
    assert_eq!(
        (a[0].d.to_bits(), a[0].qs, a[0].bsums),
        (b[0].d.to_bits(), b[0].qs, b[0].bsums)
    );
}

#[test]
fn dot_rows_match_scalar() {
    if !init("dot_rows_match_scalar") {
        return;
    }
    let mut rng = Rng(0xd07);
    let n = 768;
    let x: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
    for ty in GgmlType::ALL {
        let mut acts = ActBuf::with_capacity(n);
        acts.quantize(ty.act_format(), &x).unwrap();
        let a = acts.acts().unwrap();
        let rb = ty.row_bytes(n as u64).unwrap() as usize;
        for rows in [1, 3, 4, 5, 9] {
            let mut w: Vec<u8> = (0..rows * rb).map(|_| rng.byte()).collect();
            if ty.block_elems() > 1 {
                for b in w.chunks_exact_mut(ty.block_bytes()) {
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
            let mut got = vec![0.0f32; rows];
            KERNELS.dot_rows(ty, n, &w, &a, &mut got).unwrap();
            for r in 0..rows {
                same(&alloc::format!("{ty} rows={rows} row {r}"), got[r], want[r]);
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
    if !init("fixtures_match_scalar") {
        return;
    }
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
        let mut got = vec![0.0f32; rows];
        KERNELS.dot_rows(t.ty, n, w, &a, &mut got).unwrap();
        let rb = w.len() / rows;
        for r in 0..rows {
            same(&alloc::format!("{name} row {r}"), got[r], want[r]);
            let one = KERNELS.dot(t.ty, n, &w[r * rb..(r + 1) * rb], &a).unwrap();
            same(&alloc::format!("{name} one row {r}"), one, want[r]);
        }
        // The RVV quantizers give the same blocks for this `x`.
        match a {
            crate::Acts::Q8_0(s) => {
                let mut b = vec![BlockQ8_0::default(); n / 32];
                quantize_q8_0(&x, &mut b);
                for (s, b) in s.iter().zip(&b) {
                    assert_eq!((s.d.to_bits(), s.qs), (b.d.to_bits(), b.qs), "{name} q8_0");
                }
            }
            crate::Acts::Q8_1(s) => {
                let mut b = vec![BlockQ8_1::default(); n / 32];
                quantize_q8_1(&x, &mut b);
                for (s, b) in s.iter().zip(&b) {
                    assert_eq!(
                        (s.d.to_bits(), s.s.to_bits(), s.qs),
                        (b.d.to_bits(), b.s.to_bits(), b.qs),
                        "{name} q8_1"
                    );
                }
            }
            crate::Acts::Q8K(s) => {
                let mut b = vec![BlockQ8K::default(); n / 256];
                quantize_q8_k(&x, &mut b);
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
    std::println!("VLEN {}\n{report}", vlen());
}

#[test]
fn isa_string_decides_v() {
    // QEMU virt's riscv,isa, with and without V.
    assert!(isa_has_v(
        "rv64imafdcvh_zicbom_zicboz_zicntr_zicsr_zifencei_zihintntl_zihintpause_zihpm_zawrs_zfa_zca_zcd_zba_zbb_zbc_zbs_zve32f_zve64d_zve64f_zvl128b_sstc_svadu"
    ));
    assert!(!isa_has_v("rv64imafdch_zicsr_zifencei_zihpm_sstc"));
    assert!(isa_has_v("rv64imafdcv"));
    assert!(isa_has_v("RV64IMAFDCV_ZICSR"));
    assert!(isa_has_v("rv64gcv"));
    assert!(!isa_has_v("rv64gc"));
    assert!(!isa_has_v("rv64gc_zve64d_zvl128b"), "Zve* is not full V");
    assert!(
        !isa_has_v("rv64imafdc_xtheadvector"),
        "vendor vector extensions are not RVV 1.0"
    );
    // With versions (as in ELF attributes): `p` between digits is not the P extension.
    assert!(isa_has_v("rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0_v1p0"));
    assert!(isa_has_v("rv64i2p1m2p0a2p1f2p2d2p2c2p0v1p0_zicsr2p0"));
    assert!(!isa_has_v("rv64i2p1m2p0a2p1f2p2d2p2c2p0_zvl128b1p0"));
    assert!(!isa_has_v(""));
    assert!(!isa_has_v("v"));
    assert!(!isa_has_v("arm64v"));
    // Linux AT_HWCAP: one bit per letter.
    assert!(hwcap_has_v(1 << 21));
    assert!(hwcap_has_v(0x20_112d)); // qemu-user rv64 with v=true: acdfimv
    assert!(!hwcap_has_v(0x112d)); // v=false: acdfim
}

#[test]
fn kernel_set_follows_v() {
    // The decision as a function of the answer.
    assert_eq!(best(false).name, "scalar");
    assert_eq!(best(true).name, "rvv");
    assert_eq!(
        sets(false).map(|k| k.map(|k| k.name)),
        [Some("scalar"), None]
    );
    assert_eq!(
        sets(true).map(|k| k.map(|k| k.name)),
        [Some("scalar"), Some("rvv")]
    );

    // This hart: what AT_HWCAP says (every test records the same answer, so no test races
    // another), and what qemu-user's CPU model has.
    let v = hwcap_has_v(hwcap());
    set_available(v);
    assert_eq!(available(), v);
    let best = Kernels::best();
    let names: Vec<&str> = Kernels::available()
        .iter()
        .flatten()
        .map(|k| k.name)
        .collect();
    if v {
        assert_eq!(best.name, "rvv");
        assert_eq!(names, ["scalar", "rvv"]);
        assert!(Kernels::by_name("rvv").is_some());
    } else {
        assert_eq!(best.name, "scalar");
        assert_eq!(names, ["scalar"]);
        assert!(Kernels::by_name("rvv").is_none());
    }
    assert!(Kernels::by_name("scalar").is_some());
    match std::env::var("QEMU_CPU") {
        Ok(cpu) if cpu.contains("v=true") => assert!(v, "QEMU_CPU={cpu} but AT_HWCAP has no V"),
        Ok(cpu) if cpu.contains("v=false") => assert!(!v, "QEMU_CPU={cpu} but AT_HWCAP has V"),
        _ => {}
    }
    if v {
        std::println!(
            "kernel_set_follows_v: V present, VLEN {}: best = rvv",
            vlen()
        );
    } else {
        std::println!("kernel_set_follows_v: no V in AT_HWCAP: best = scalar");
    }
}
