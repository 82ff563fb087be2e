//! Inputs for the kernel-set tests: a fixed-seed generator, weight rows with extreme scales and
//! nibbles, activation blocks with extreme values, f16/bf16 bits, and activation vectors with every
//! kind of block (for the quantizers).

extern crate std;

use crate::quant::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::{Features, GgmlType, Kernels};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;
use half::{bf16, f16};

/// How an architecture's one SIMD set `name` is chosen: with features `on(false)` the scalar set
/// alone; with `on(true)` (when `usable`: what else the core needs is there) the scalar set and
/// `name`, the best last; and on this CPU (`has`: what it recorded allows the set) the same
/// through `Kernels::best`, `available` and `by_name`.
pub fn check_set_choice(name: &str, on: impl Fn(bool) -> Features, usable: bool, has: bool) {
    let names = |f: Features| {
        Kernels::available_on(&f)
            .map(|k| k.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(Kernels::best_on(&on(false)).name, "scalar");
    assert_eq!(names(on(false)), ["scalar"]);
    if usable {
        assert_eq!(Kernels::best_on(&on(true)).name, name);
        assert_eq!(names(on(true)), ["scalar", name]);
    }
    // (Another set of the architecture may run here instead: RVV 1.0 or XTheadVector.)
    let here: Vec<&str> = Kernels::available().map(|k| k.name).collect();
    assert_eq!(here[0], "scalar");
    assert_eq!(here.contains(&name), has, "{here:?}");
    if has {
        assert_eq!(Kernels::best().name, name);
    }
    assert_eq!(Kernels::by_name(name).is_some(), has);
    assert!(Kernels::by_name("scalar").is_some());
}

/// riscv64 under qemu-user: what the hart has, recorded with `set_features` (as the boot code
/// records it) and returned. AT_HWCAP's V bit (`rvv::hwcap_has_v`) is RVV 1.0, except on a T-Head
/// CPU model ([`qemu_cpu_is_thead`]), where it is XTheadVector (user mode cannot read mvendorid).
/// Every test records the same answer, so none races another.
#[cfg(target_arch = "riscv64")]
pub fn record_riscv_vector() -> Features {
    let v = crate::quant::rvv::hwcap_has_v(at_hwcap());
    let thead = qemu_cpu_is_thead();
    let f = Features {
        rvv: v && !thead,
        xtheadvector: v && thead,
        ..Features::default()
    };
    crate::quant::set_features(f);
    f
}

/// Whether `QEMU_CPU` names one of T-Head's RVV 0.7.1 cores of xuantie-qemu (`c906fdv`,
/// `c910v`, `c920`): their AT_HWCAP says V, but RVV 1.0 instructions are illegal there.
pub fn qemu_cpu_is_thead() -> bool {
    std::env::var("QEMU_CPU").is_ok_and(|c| {
        ["c906", "c910", "c920"]
            .iter()
            .any(|m| c.to_ascii_lowercase().starts_with(m))
    })
}

/// `AT_HWCAP` of this process, from the auxiliary vector (pairs of native words; qemu-user
/// emulates /proc/self/auxv).
pub fn at_hwcap() -> u64 {
    const AT_HWCAP: u64 = 16;
    const WORD: usize = core::mem::size_of::<usize>();
    let auxv = std::fs::read("/proc/self/auxv").expect("/proc/self/auxv");
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w[..WORD].copy_from_slice(&b[..WORD]);
        u64::from_le_bytes(w)
    };
    auxv.chunks_exact(2 * WORD)
        .map(|e| (word(e), word(&e[WORD..])))
        .find(|&(k, _)| k == AT_HWCAP)
        .map_or(0, |(_, v)| v)
}

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

pub fn fixtures_dir() -> std::path::PathBuf {
    match std::env::var_os("LMBOOT_SHARED") {
        Some(s) => std::path::PathBuf::from(s).join("fixtures/quant"),
        None => std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/quant"
        )),
    }
}

/// The types added after the shared fixtures were made: their names (as the table prints them)
/// are the only ones whose fixture may be missing; each has a GGUF-level test of known values
/// instead (`tests/tests/quant_fixtures.rs`).
pub const WITHOUT_FIXTURE: [&str; 1] = ["IQ4_NL"];

/// The fixture `name`: its four weight rows (bytes, type, row length) and its activations;
/// `None` (said on the output) when the fixtures have none of that name, which only a type of
/// [`WITHOUT_FIXTURE`] may lack.
pub fn fixture(name: &str) -> Option<(Vec<u8>, GgmlType, usize, Vec<f32>)> {
    let dir = fixtures_dir();
    assert!(dir.is_dir(), "no fixtures at {}", dir.display());
    let path = dir.join(format!("{name}.gguf"));
    if !path.exists() {
        assert!(
            WITHOUT_FIXTURE.iter().any(|t| t.eq_ignore_ascii_case(name)),
            "no fixture {} for a type the fixtures cover",
            path.display()
        );
        std::println!("no fixture {name}: skipped");
        return None;
    }
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
    Some((w, t.ty, n, x))
}
