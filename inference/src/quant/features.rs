//! What the CPU offers the kernel sets, recorded once, and the one way a set is picked: every set
//! built for this architecture says what it needs (`runs_on`), and [`Kernels::available`] keeps
//! those the [`Features`] allow, fastest last.

use super::Kernels;
use core::sync::atomic::{AtomicU8, Ordering};

/// What the CPU offers the kernel sets. The arch code fills it once at boot (aarch64:
/// ID_AA64ISAR0_EL1; 32-bit Arm: MVFR1; riscv64: the device tree's ISA string, and for
/// XTheadVector also SBI's mvendorid) and records it
/// with [`set_features`]; where nothing was recorded, [`features`] reads what the CPU itself
/// tells (ID_AA64ISAR0_EL1 on aarch64, CPUID on x86-64).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    /// Advanced SIMD: every aarch64 core; on 32-bit Arm, NEON with VFPv4's half-precision
    /// conversions and 32 double registers.
    pub neon: bool,
    /// SDOT/UDOT (aarch64 FEAT_DotProd).
    pub dotprod: bool,
    /// The V extension (RVV 1.0) on riscv64.
    pub rvv: bool,
    /// T-Head's XTheadVector (RVV 0.7.1: the C906 of the Milk-V Duo, the C910/C920) on riscv64.
    /// Its encodings overlap RVV 1.0's with other meanings, so a hart has one or the other: a
    /// record with both runs neither vector set.
    pub xtheadvector: bool,
    /// AVX2 and F16C, with the OS saving the YMM registers (x86-64).
    pub avx2: bool,
}

impl Features {
    /// An aarch64 core whose ID_AA64ISAR0_EL1 reads `isar0`: NEON, and SDOT when the DP field
    /// (bits 47:44) is at least 1.
    pub fn aarch64(isar0: u64) -> Features {
        Features {
            neon: true,
            dotprod: (isar0 >> 44) & 0xf >= 1,
            ..Features::default()
        }
    }

    fn bits(self) -> u8 {
        u8::from(self.neon)
            | u8::from(self.dotprod) << 1
            | u8::from(self.rvv) << 2
            | u8::from(self.avx2) << 3
            | u8::from(self.xtheadvector) << 4
    }

    fn from_bits(b: u8) -> Features {
        Features {
            neon: b & 1 != 0,
            dotprod: b & 2 != 0,
            rvv: b & 4 != 0,
            avx2: b & 8 != 0,
            xtheadvector: b & 16 != 0,
        }
    }
}

/// The recorded features' bits, with [`RECORDED`] set once they are.
static FEATURES: AtomicU8 = AtomicU8::new(0);
const RECORDED: u8 = 0x80;

/// Record what the CPU offers (once at boot, before the first [`Kernels::best`]; all cores must
/// agree).
pub fn set_features(f: Features) {
    FEATURES.store(f.bits() | RECORDED, Ordering::Relaxed);
}

/// What [`set_features`] recorded, or else what the CPU tells by itself (nothing on 32-bit Arm
/// and riscv64, whose features only the boot code can read).
pub fn features() -> Features {
    let b = FEATURES.load(Ordering::Relaxed);
    if b & RECORDED != 0 {
        return Features::from_bits(b);
    }
    detect()
}

#[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
fn detect() -> Features {
    Features::aarch64(super::neon::read_id_aa64isar0())
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Features {
    Features {
        avx2: super::avx2::available(),
        ..Features::default()
    }
}

#[cfg(not(any(
    all(target_arch = "aarch64", target_feature = "neon"),
    target_arch = "x86_64"
)))]
fn detect() -> Features {
    Features::default()
}

/// The name of every set lmboot has, on any architecture (`kernels = NAME`, `--kernels NAME`).
pub const SET_NAMES: [&str; 6] = [
    "scalar",
    "neon",
    "neon-dotprod",
    "rvv",
    "xtheadvector",
    "avx2",
];

/// What a `kernels` setting may say, for error messages: `auto` and [`SET_NAMES`].
pub const SET_CHOICES: &str = "auto, scalar, neon, neon-dotprod, rvv, xtheadvector or avx2";

/// A set built for this architecture and what it needs.
type Candidate = (Kernels, fn(&Features) -> bool);

/// The sets built for this architecture, slowest first (the scalar set runs everywhere).
const SETS: &[Candidate] = &[
    (Kernels::SCALAR, |_| true),
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    (super::neon::KERNELS, super::neon::runs_on),
    #[cfg(all(target_arch = "aarch64", target_feature = "neon"))]
    (super::neon::KERNELS_DOTPROD, super::neon::runs_on_dotprod),
    #[cfg(target_arch = "arm")]
    (super::neon32::KERNELS, super::neon32::runs_on),
    #[cfg(target_arch = "riscv64")]
    (super::rvv::KERNELS, super::rvv::runs_on),
    #[cfg(target_arch = "riscv64")]
    (super::xtheadvector::KERNELS, super::xtheadvector::runs_on),
    #[cfg(target_arch = "x86_64")]
    (super::avx2::KERNELS, super::avx2::runs_on),
];

impl Kernels {
    /// Every set a CPU with `f` runs, scalar first, fastest last.
    pub fn available_on(f: &Features) -> impl Iterator<Item = Kernels> + '_ {
        SETS.iter()
            .filter(move |(_, runs)| runs(f))
            .map(|(k, _)| *k)
    }

    /// The fastest set a CPU with `f` runs.
    pub fn best_on(f: &Features) -> Kernels {
        Self::available_on(f).last().unwrap_or(Kernels::SCALAR)
    }

    /// Every set this CPU runs ([`features`]), scalar first, fastest last.
    pub fn available() -> impl Iterator<Item = Kernels> {
        let f = features();
        SETS.iter()
            .filter(move |(_, runs)| runs(&f))
            .map(|(k, _)| *k)
    }

    /// The fastest set this CPU runs.
    pub fn best() -> Kernels {
        Self::best_on(&features())
    }

    /// The set called `name` (one of [`SET_NAMES`]) if this CPU runs it.
    pub fn by_name(name: &str) -> Option<Kernels> {
        Self::available().find(|k| k.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_set_built_here_is_named_and_the_choices_list_them_all() {
        for (k, _) in SETS {
            assert!(SET_NAMES.contains(&k.name), "{}", k.name);
        }
        for n in SET_NAMES {
            assert!(SET_CHOICES.contains(n), "{n}");
        }
        // Nothing recorded is the scalar set on a CPU that tells nothing.
        assert_eq!(Kernels::best_on(&Features::default()).name, "scalar");
        let all = Features {
            neon: true,
            dotprod: true,
            rvv: true,
            avx2: true,
            xtheadvector: true,
        };
        assert_eq!(Features::from_bits(all.bits()), all);
        assert_eq!(Features::from_bits(0), Features::default());
    }
}
