//! One harness for every kernel set: each set this CPU runs (`Kernels::available()`, the scalar
//! set excepted: plain NEON and NEON with SDOT on aarch64, RVV on riscv64 harts with V) is checked
//! against `Kernels::SCALAR`, entry by entry, bit for bit (`to_bits()` equal, no tolerance), on
//! random inputs with extreme values (fixed-seed generator), on lengths that disagree, on rows at
//! any alignment, and on the shared quantization fixtures. The architecture's own test module keeps
//! only what is specific to it (how the set is chosen, conversions of its own instructions).
//!
//! Run under qemu-user for the sets to exist (`cargo xtask test` does): `QEMU_CPU=cortex-a53`
//! (NEON), `cortex-a76` (NEON and SDOT), `rv64,v=true,vlen=128|256,elen=64` (RVV), `c906fdv` under
//! T-Head's qemu-riscv64 (XTheadVector; see `xtheadvector::tests`); on a CPU with no set but the
//! scalar one each test says it is skipped.

extern crate std;

pub(super) use super::testgen as gen;

use crate::quant::act::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::types::{TypeInfo, TYPES};
use crate::quant::{ActElem, ActFormat, Dot, Dot4, GgmlType, Kernels, RowKernels, TypeKernels};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;
use gen::*;

/// The sets this CPU runs besides the scalar one (empty, with a line saying the test is skipped,
/// where there are none).
pub(in crate::quant) fn sets(test: &str) -> Vec<Kernels> {
    #[cfg(target_arch = "riscv64")]
    super::rvv::tests::record_v();
    #[cfg(target_arch = "arm")]
    super::neon32::tests::record_neon();
    let v: Vec<Kernels> = Kernels::available()
        .filter(|k| k.name != Kernels::SCALAR.name)
        .collect();
    if v.is_empty() {
        std::println!("{test}: skipped, this CPU runs no kernel set but the scalar one");
    }
    v
}

fn same(what: &str, got: f32, want: f32) {
    assert_eq!(
        got.to_bits(),
        want.to_bits(),
        "{what}: {got:e} ({:#010x}) != scalar {want:e} ({:#010x})",
        got.to_bits(),
        want.to_bits()
    );
}

/// A 32-wide weight type (its name, block bytes and f16 fields from the type table) with its
/// activations.
struct Q32<A> {
    ty: GgmlType,
    acts: fn(&mut Rng, usize, Fill) -> Vec<A>,
}

impl<A: ActElem> Q32<A> {
    fn info(&self) -> &'static TypeInfo {
        self.ty.info()
    }

    /// A set's one-row and four-row entries for the type.
    fn pick(&self, k: &Kernels) -> RowKernels<A> {
        k.row(self.ty).expect("a 32-wide type's kernels")
    }
}

/// Block counts: single blocks, partial and whole passes at VLEN 128 (16 blocks) and 256 (32),
/// several passes, and the model's rows (576 and 1536 elements: 18 and 48 blocks).
const BLOCK_COUNTS: [usize; 15] = [0, 1, 2, 3, 5, 7, 8, 15, 16, 17, 18, 31, 33, 48, 130];
const FILLS: [Fill; 6] = [
    Fill::Random,
    Fill::Random,
    Fill::Const(-128),
    Fill::Const(127),
    Fill::Const(0),
    Fill::Alternate,
];
const WEIGHT_FILLS: [Option<u8>; 7] = [
    None,
    None,
    Some(0x00),
    Some(0xff),
    Some(0x88),
    Some(0x80),
    Some(0x0f),
];

/// One 32-wide type in every set: every block count × activation fill × weight fill, the one-row
/// kernel (also on the row at an odd address) and the four-row kernel, and lengths that disagree.
fn check_q32<A: ActElem + Copy>(t: &Q32<A>, test: &str) {
    let scalar_fn = t.pick(&Kernels::SCALAR).dot;
    let (name, bytes, halves) = (t.info().name, t.info().block_bytes, t.info().scales);
    let mut rng = Rng(0x5eed ^ bytes as u64);
    let mut checked = 0;
    let sets = sets(test);
    for k in &sets {
        let RowKernels {
            dot: one, x4: four, ..
        } = t.pick(k);
        for nb in BLOCK_COUNTS {
            for fill in FILLS {
                for wfill in WEIGHT_FILLS {
                    let rb = nb * bytes;
                    let w4 = weights(&mut rng, 4 * nb, bytes, halves, wfill);
                    let a = (t.acts)(&mut rng, nb, fill);
                    let what = format!("{name} {} nb={nb} acts={fill:?} weights={wfill:?}", k.name);
                    let want = check_rows(&what, scalar_fn, one, four, &w4, rb, &a);
                    // The same row at another address.
                    let shift = 1 + rng.below(7) as usize;
                    let mut buf = vec![0u8; rb + 8];
                    buf[shift..shift + rb].copy_from_slice(&w4[..rb]);
                    same(
                        &format!("{what} at +{shift}"),
                        one(&buf[shift..shift + rb], &a),
                        want[0],
                    );
                    checked += 1;
                }
            }
        }
        check_q32_lengths(t, k, &mut rng);
    }
    assert!(checked > 0 || sets.is_empty());
}

/// Lengths that disagree: every kernel stops at the shorter side, as the scalar one does, and the
/// four-row kernel with fewer bytes than four rows takes each row as far as it goes.
fn check_q32_lengths<A: ActElem + Copy>(t: &Q32<A>, k: &Kernels, rng: &mut Rng) {
    let scalar_fn = t.pick(&Kernels::SCALAR).dot;
    let RowKernels {
        dot: one, x4: four, ..
    } = t.pick(k);
    let (name, bytes) = (
        format!("{} {}", t.info().name, k.name),
        t.info().block_bytes,
    );
    let w = weights(rng, 20, bytes, t.info().scales, None);
    for na in [0, 3, 6, 7, 9, 19, 20, 21, 40] {
        let a = (t.acts)(rng, na, Fill::Random);
        same(
            &format!("{name} w=20 a={na}"),
            one(&w, &a),
            scalar_fn(&w, &a),
        );
        let short = &w[..w.len() - bytes / 2];
        same(
            &format!("{name} w=19.5 a={na}"),
            one(short, &a),
            scalar_fn(short, &a),
        );
        if let Some(four) = four {
            check_x4_short(
                &format!("{name} a={na}"),
                scalar_fn,
                four,
                &w,
                5 * bytes,
                &a,
            );
        }
    }
}

/// Four rows of `rb` bytes (`w4`) · `a`: the one-row kernel on row 0 and the four-row kernel, if
/// any, against the scalar kernel on each row; the scalar results.
fn check_rows<A>(
    what: &str,
    scalar_fn: Dot<A>,
    one: Dot<A>,
    four: Option<Dot4<A>>,
    w4: &[u8],
    rb: usize,
    a: &[A],
) -> Vec<f32> {
    let want: Vec<f32> = (0..4)
        .map(|r| scalar_fn(&w4[r * rb..(r + 1) * rb], a))
        .collect();
    same(what, one(&w4[..rb], a), want[0]);
    if let Some(four) = four {
        let mut out = [f32::NAN; 4];
        four(w4, rb, a, &mut out);
        for r in 0..4 {
            same(&format!("{what} x4 row {r}"), out[r], want[r]);
        }
    }
    want
}

/// The four-row kernel on `w` cut to fewer bytes than four rows of `rb` (and to exactly four):
/// each row as far as it goes, as the scalar kernel takes it.
fn check_x4_short<A>(what: &str, scalar_fn: Dot<A>, four: Dot4<A>, w: &[u8], rb: usize, a: &[A]) {
    let mut out = [0.0f32; 4];
    for len in [w.len(), w.len() - 1, 3 * rb + 7] {
        four(&w[..len], rb, a, &mut out);
        for r in 0..4 {
            let row = w[..len].get(r * rb..).unwrap_or(&[]);
            let want = scalar_fn(&row[..row.len().min(rb)], a);
            same(&format!("{what} x4 len={len} row {r}"), out[r], want);
        }
    }
}

/// One quantized type of the table in every set against the scalar kernels: the 32-wide ones
/// with their Q8_0 or Q8_1 activations, the K-quants with Q8_K.
fn check_type(ty: GgmlType) {
    let t = ty.info();
    match t.act {
        ActFormat::Q8_0 => check_q32(
            &Q32 {
                ty: t.ty,
                acts: acts_q8_0,
            },
            t.name,
        ),
        ActFormat::Q8_1 => check_q32(
            &Q32 {
                ty: t.ty,
                acts: acts_q8_1,
            },
            t.name,
        ),
        ActFormat::Q8K => {
            let pick = |k: &Kernels| k.row(t.ty).expect("a K-quant's kernels");
            check_k(t.name, t.block_bytes, t.scales, &pick, t.name);
        }
        f => panic!("{}: {f:?} activations are the float tests'", t.name),
    }
}

/// One test per quantized weight type, so a failing type is a failing test of its own; the list
/// is checked against the table ([`every_quantized_type_has_its_test`]).
macro_rules! type_tests {
    ($($test:ident: $ty:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check_type(GgmlType::$ty);
            }
        )*
        /// The types [`type_tests`] covers.
        const TESTED: &[GgmlType] = &[$(GgmlType::$ty),*];
    };
}

type_tests! {
    q4_0_matches_scalar: Q4_0,
    q4_1_matches_scalar: Q4_1,
    q5_0_matches_scalar: Q5_0,
    q5_1_matches_scalar: Q5_1,
    q8_0_matches_scalar: Q8_0,
    iq4_nl_matches_scalar: IQ4NL,
    q2_k_matches_scalar: Q2K,
    q3_k_matches_scalar: Q3K,
    q4_k_matches_scalar: Q4K,
    q5_k_matches_scalar: Q5K,
    q6_k_matches_scalar: Q6K,
}

/// Every row of the table with quantized activations has its test above.
#[test]
fn every_quantized_type_has_its_test() {
    for t in &TYPES {
        let quantized = matches!(t.act, ActFormat::Q8_0 | ActFormat::Q8_1 | ActFormat::Q8K);
        assert_eq!(
            TESTED.contains(&t.ty),
            quantized,
            "{}: add it to type_tests!",
            t.name
        );
    }
}

/// One K-quant type in every set: super-block counts × activation fills × weight fills (random,
/// all bits clear or set, alternating bits) × true or random `bsums`, the one-row kernel and the
/// four-row one (four rows of such blocks), and lengths that disagree.
fn check_k(
    name: &str,
    bytes: usize,
    halves: &[usize],
    pick: &dyn Fn(&Kernels) -> RowKernels<BlockQ8K>,
    test: &str,
) {
    let scalar_fn = pick(&Kernels::SCALAR).dot;
    let mut rng = Rng(0x6b ^ bytes as u64);
    for k in sets(test) {
        let RowKernels {
            dot: f, x4: four, ..
        } = pick(&k);
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
                        let rb = nb * bytes;
                        let w4 = weights(&mut rng, 4 * nb, bytes, halves, wfill);
                        let a = acts_q8_k(&mut rng, nb, fill, random_bsums);
                        let what = format!(
                            "{name} {} nb={nb} acts={fill:?} weights={wfill:?} random bsums={random_bsums}",
                            k.name
                        );
                        check_rows(&what, scalar_fn, f, four, &w4, rb, &a);
                    }
                }
            }
        }
        let w = weights(&mut rng, 3, bytes, halves, None);
        for na in [0, 2, 4] {
            let a = acts_q8_k(&mut rng, na, Fill::Random, false);
            same(
                &format!("{name} {} w=3 a={na}", k.name),
                f(&w, &a),
                scalar_fn(&w, &a),
            );
            let short = &w[..w.len() - 1];
            same(
                &format!("{name} {} w=2.99 a={na}", k.name),
                f(short, &a),
                scalar_fn(short, &a),
            );
            if let Some(four) = four {
                // Rows of 3 blocks.
                let w4 = weights(&mut rng, 12, bytes, halves, None);
                let what = format!("{name} {} a={na}", k.name);
                check_x4_short(&what, scalar_fn, four, &w4, 3 * bytes, &a);
            }
        }
    }
}

/// Every f16 value converts as `half` converts it, in every set (the scales of every 32-wide
/// kernel go through the set's conversion): one block per f16 bit pattern as `d` (Q8_0) and as
/// `m` (Q4_1), with a single product 1 and y.d = 1 (y.s = 1), gives `d` (and `1 + m`). NaN
/// included: a set's conversion keeps a NaN's payload as `half` does.
#[test]
fn f16_scales_convert_exactly() {
    let q8_0 = |k: &Kernels| k.row::<BlockQ8_0>(GgmlType::Q8_0).expect("Q8_0").dot;
    let q4_1 = |k: &Kernels| k.row::<BlockQ8_1>(GgmlType::Q4_1).expect("Q4_1").dot;
    let (mut w, mut w1) = ([0u8; 34], [0u8; 20]);
    w[2] = 1;
    w1[..2].copy_from_slice(&0x3c00u16.to_le_bytes());
    w1[4] = 1;
    let mut qs = [0i8; 32];
    qs[0] = 1;
    let y = [BlockQ8_0 { d: 1.0, qs }];
    let y1 = [BlockQ8_1 { d: 1.0, s: 1.0, qs }];
    for k in sets("f16_scales_convert_exactly") {
        for h in 0..=u16::MAX {
            w[..2].copy_from_slice(&h.to_le_bytes());
            let want = (q8_0(&Kernels::SCALAR))(&w, &y);
            same(
                &format!("{} f16 {h:#06x} as d", k.name),
                (q8_0(&k))(&w, &y),
                want,
            );
            w1[2..4].copy_from_slice(&h.to_le_bytes());
            let want = (q4_1(&Kernels::SCALAR))(&w1, &y1);
            same(
                &format!("{} f16 {h:#06x} as m", k.name),
                (q4_1(&k))(&w1, &y1),
                want,
            );
        }
    }
}

/// The address of an entry's one-row kernel (to tell which function an entry is).
fn dot_addr(t: TypeKernels) -> usize {
    match t {
        TypeKernels::F32(k) => k.dot as usize,
        TypeKernels::F16(k) | TypeKernels::Bf16(k) => k.dot as usize,
        TypeKernels::Q8_0(k) => k.dot as usize,
        TypeKernels::Q8_1(k) => k.dot as usize,
        TypeKernels::Q8K(k) => k.dot as usize,
    }
}

/// A set that leaves a type's entry empty (IQ4_NL on the sets with no kernel for it) runs the
/// scalar kernels for it, by construction: `Kernels::of` hands out the type table's.
#[test]
fn empty_entries_run_the_scalar_kernels() {
    for k in sets("empty_entries_run_the_scalar_kernels") {
        let mut scalar = Vec::new();
        for t in &TYPES {
            match k.types[t.ty.index()] {
                None => {
                    assert_eq!(dot_addr(k.of(t.ty)), dot_addr(t.kernels), "{}", t.name);
                    scalar.push(t.name);
                }
                Some(own) => assert_eq!(dot_addr(k.of(t.ty)), dot_addr(own), "{}", t.name),
            }
        }
        std::println!("{}: the scalar kernels for {scalar:?}", k.name);
    }
}

mod float;
mod rows;
