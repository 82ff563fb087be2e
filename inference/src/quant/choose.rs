//! The one way a kernel set is picked: every set built for this architecture says what it needs
//! (`runs_on`), and [`Kernels::available`] keeps those the [`Features`] allow, fastest last. Above
//! the sets (it lists them and reads the CPU through them); `features` is below them.

use super::features::{recorded, Features};
use super::Kernels;

/// What [`set_features`](super::set_features) recorded, or else what the CPU tells by itself (nothing on 32-bit Arm
/// and riscv64, whose features only the boot code can read).
pub fn features() -> Features {
    recorded().unwrap_or_else(detect)
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
    }
}
