//! What the kernel-set tests need beyond the generators they share with the board's self-test
//! (`quant::gen`, re-exported here): how a set is chosen, what a riscv64 hart under qemu-user
//! has, and the shared quantization fixtures.

extern crate std;

use crate::quant::{Features, GgmlType, Kernels};
use alloc::format;
use alloc::vec::Vec;

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

pub use crate::quant::gen::*;

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
    let src = crate::storage::SliceStorage::new(&bytes);
    let g = crate::gguf::Gguf::open(&src).unwrap();
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
