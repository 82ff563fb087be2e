//! What the CPU offers the kernel sets, recorded once. Below the sets: each set says what it
//! needs from a [`Features`] (`runs_on`), and `choose`, above them, picks among them.

use core::sync::atomic::{AtomicU8, Ordering};

/// What the CPU offers the kernel sets. The arch code fills it once at boot (aarch64:
/// ID_AA64ISAR0_EL1; 32-bit Arm: MVFR1; riscv64: the device tree's ISA string, and for
/// XTheadVector also SBI's mvendorid) and records it
/// with [`set_features`]; where nothing was recorded, [`features`](super::features) reads what
/// the CPU itself tells (ID_AA64ISAR0_EL1 on aarch64, CPUID on x86-64).
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

    pub(super) fn bits(self) -> u8 {
        u8::from(self.neon)
            | u8::from(self.dotprod) << 1
            | u8::from(self.rvv) << 2
            | u8::from(self.avx2) << 3
            | u8::from(self.xtheadvector) << 4
    }

    pub(super) fn from_bits(b: u8) -> Features {
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

/// Record what the CPU offers (once at boot, before the first
/// [`Kernels::best`](super::Kernels::best); all cores must agree).
pub fn set_features(f: Features) {
    FEATURES.store(f.bits() | RECORDED, Ordering::Relaxed);
}

/// What [`set_features`] recorded, if it was.
pub(super) fn recorded() -> Option<Features> {
    let b = FEATURES.load(Ordering::Relaxed);
    (b & RECORDED != 0).then(|| Features::from_bits(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_bits_give_the_features_back() {
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
