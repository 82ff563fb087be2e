//! Inputs for checking a kernel set against the scalar one: a fixed-seed generator, weight rows
//! with extreme scales and nibbles, activation blocks with extreme values, f16/bf16 bits, and
//! activation vectors with every kind of block (for the quantizers). The kernel-set tests and the
//! board's self-test ([`super::selfcheck`]) draw from the same generators.

use crate::quant::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use alloc::vec;
use alloc::vec::Vec;
use half::{bf16, f16};

/// splitmix64: a fixed-seed generator, so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    /// Widely varying magnitude, never NaN or infinite.
    pub fn wide(&mut self) -> f32 {
        let e = self.below(40) as i32 - 20;
        self.unit() * libm::powf(2.0, e as f32)
    }
    /// f16 bits for a scale: mostly ordinary values, and the extremes (largest, ±0, subnormals,
    /// huge, any finite bits, infinity).
    pub fn f16_scale(&mut self) -> u16 {
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
    pub fn f32_scale(&mut self) -> f32 {
        match self.below(8) {
            0 => 0.0,
            1 => -self.wide(),
            2 => 1.0e30 * self.unit(),
            _ => self.wide(),
        }
    }
}

/// Weight bytes for `nb` blocks of `bytes`, random or all `fill`, with f16 scales at `halves`.
pub fn weights(
    rng: &mut Rng,
    nb: usize,
    bytes: usize,
    halves: &[usize],
    fill: Option<u8>,
) -> Vec<u8> {
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
pub enum Fill {
    Random,
    Const(i8),
    /// Alternating -128 and 127.
    Alternate,
}

pub fn act_byte(rng: &mut Rng, fill: Fill, i: usize) -> i8 {
    match fill {
        Fill::Random => rng.byte() as i8,
        Fill::Const(v) => v,
        Fill::Alternate => [-128, 127][i % 2],
    }
}

/// The quants of a Q8_0 / Q8_1 activation block: [`act_byte`] within -127..=127, the range
/// every quantizer gives them (see `BlockQ8_0`).
fn act32_byte(rng: &mut Rng, fill: Fill, i: usize) -> i8 {
    act_byte(rng, fill, i).max(-127)
}

pub fn acts_q8_0(rng: &mut Rng, nb: usize, fill: Fill) -> Vec<BlockQ8_0> {
    (0..nb)
        .map(|_| {
            let mut b = BlockQ8_0 {
                d: rng.f32_scale(),
                qs: [0; 32],
            };
            for (i, q) in b.qs.iter_mut().enumerate() {
                *q = act32_byte(rng, fill, i);
            }
            b
        })
        .collect()
}

pub fn acts_q8_1(rng: &mut Rng, nb: usize, fill: Fill) -> Vec<BlockQ8_1> {
    (0..nb)
        .map(|_| {
            let mut b = BlockQ8_1 {
                d: rng.f32_scale(),
                s: rng.f32_scale(),
                qs: [0; 32],
            };
            for (i, q) in b.qs.iter_mut().enumerate() {
                *q = act32_byte(rng, fill, i);
            }
            b
        })
        .collect()
}

pub fn acts_q8_k(rng: &mut Rng, nb: usize, fill: Fill, random_bsums: bool) -> Vec<BlockQ8K> {
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

/// Any 16 bits but those with all of `exp` (the format's exponent) set.
fn finite_bits(rng: &mut Rng, exp: u16) -> u16 {
    let b = rng.next() as u16;
    if b & exp == exp {
        b & !0x4000
    } else {
        b
    }
}

/// Random finite f16 bits (huge and subnormal values among them).
pub fn f16_bits(rng: &mut Rng) -> u16 {
    match rng.below(10) {
        0 => finite_bits(rng, 0x7c00),
        1 => rng.next() as u16 & 0x83ff,
        _ => f16::from_f32(rng.unit() * 4.0).to_bits(),
    }
}

/// Random finite bf16 bits.
pub fn bf16_bits(rng: &mut Rng) -> u16 {
    match rng.below(10) {
        0 => finite_bits(rng, 0x7f80),
        _ => bf16::from_f32(rng.wide()).to_bits(),
    }
}

/// Activation vectors with every kind of block: ordinary, wide-ranging, all zero, tiny (the scale
/// underflows or its inverse overflows), huge, infinite, NaN, exact rounding ties, ±0, and (Q8_K)
/// the largest magnitude reached with both signs in either order.
pub fn activation_vectors(rng: &mut Rng, n: usize) -> Vec<Vec<f32>> {
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
