//! What is specific to XTheadVector: the encoding layer (every re-encoded instruction against a
//! known-good word, and its behaviour on the emulated C906), the ISA string and ids, and the
//! choice of kernel set. Every kernel against its scalar twin is checked by the shared harness
//! (`quant::kernel_tests`). Run under T-Head's user-mode QEMU (PyPI `xuantie-qemu`, which
//! `cargo xtask setup` installs in the cache):
//!
//! ```text
//! QEMU_CPU=c906fdv CARGO_TARGET_RISCV64GC_UNKNOWN_LINUX_GNU_RUNNER="<cache>/xuantie-qemu/qemu-riscv64 -L /usr/riscv64-linux-gnu" \
//!     cargo test --release -p inference --target riscv64gc-unknown-linux-gnu
//! ```
//!
//! Elsewhere (RVV 1.0 or no vector unit) the behaviour test says it is skipped; the encodings are
//! checked everywhere (the words are read, never run).

extern crate std;

use super::*;
use crate::quant::testgen::{check_set_choice, record_riscv_vector};
use crate::quant::Features;
use alloc::vec::Vec;

/// The instructions `$insn` as the encoding layer assembles them, one after another in a
/// read-only data section (never run): their words, in order.
macro_rules! words {
    ($($insn:literal),* $(,)?) => {{
        let p: *const u32;
        // SAFETY: emits the words into a read-only data section and takes the first one's
        // address; they are read below, never executed. No register but `p` changes.
        unsafe {
            core::arch::asm!(
                ".option push",
                ".option arch, +v",
                xtv_enter!(),
                ".pushsection .rodata.xtv_words, \"a\"",
                ".balign 4",
                "1:",
                $($insn,)*
                ".popsection",
                xtv_leave!(),
                ".option pop",
                "lla {p}, 1b",
                p = out(reg) p,
                options(nomem, nostack, preserves_flags)
            );
        }
        let insns: &[&str] = &[$($insn),*];
        // SAFETY: word `i` of the `insns.len()` 4-byte words emitted above, 4-byte aligned.
        (0..insns.len()).map(|i| (insns[i], unsafe { p.add(i).read() })).collect::<Vec<_>>()
    }};
}

/// Every re-encoded instruction, and two shared ones, against a known word: Linux's
/// `THEAD_VSETVLI_T4X0E8M8D1` (the first) and LLVM's XTheadVector MC tests
/// (`llvm/test/MC/RISCV/xtheadvector/*.s`: vsetvl.s, fmv.s, mv.s, convert.s, mask.s, fothers.s,
/// macc.s, freduction.s, zvlsseg.s), whose names are the `th.` ones (`th.vext.x.v` for `vmv.x.s`'s place,
/// `th.vfncvt.f.f.v`, `th.vmfirst.m`, `th.vmpopc.m`, `th.vlsseg2bu.v`).
#[test]
fn encodings_match_known_words() {
    let got = words!(
        "vsetvli t4, zero, e8, m8, ta, ma",
        "vsetvli a2, a0, e32, m4, ta, ma",
        "vsetvli a2, a0, e16, m2, ta, mu",
        "vfmv.f.s fa0, v4",
        "vfmv.s.f v8, fa0",
        "vmv.s.x v8, a0",
        "th.vext.x.v a2, v4, a0",
        "vfcvt.xu.f.v v8, v4",
        "vfcvt.x.f.v v8, v4",
        "vfcvt.f.xu.v v8, v4",
        "vfcvt.f.x.v v8, v4",
        "vfwcvt.f.f.v v8, v4",
        "vfncvt.f.f.w v8, v4",
        "vid.v v8",
        "viota.m v8, v4",
        "vmsbf.m v8, v4",
        "vfirst.m a2, v4",
        "vcpop.m a2, v4",
        "vfsqrt.v v8, v4",
        "vfclass.v v8, v4",
        "vwmaccsu.vv v8, v20, v4",
        "vwmaccsu.vx v8, a0, v4",
        "vwmaccus.vx v8, a0, v4",
        // Shared encodings, assembled as RVV 1.0.
        "vfredosum.vs v8, v4, v20",
        "vlsseg2e8.v v8, (a0), a1",
    );
    // (The third: vsew 1 << 2 | vlmul 1 = 5.)
    let want: [u32; 25] = [
        0x0030_7ed7,
        0x00a5_7657,
        0x0055_7657,
        0x3240_1557,
        0x3605_5457,
        0x3605_6457,
        0x3245_2657,
        0x8a40_1457,
        0x8a40_9457,
        0x8a41_1457,
        0x8a41_9457,
        0x8a46_1457,
        0x8a4a_1457,
        0x5a08_a457,
        0x5a48_2457,
        0x5a40_a457,
        0x5640_2657,
        0x5240_2657,
        0x8e40_1457,
        0x8e48_1457,
        0xfa4a_2457,
        0xfa45_6457,
        0xfe45_6457,
        0x0e4a_1457,
        0x2ab5_0407,
    ];
    assert_eq!(got.len(), want.len());
    for ((insn, got), want) in got.into_iter().zip(want) {
        assert_eq!(got, want, "{insn}: {got:#010x} != {want:#010x}");
    }
}

/// Runs `$tpl` through `xtv_asm!` with the given operands (a behaviour probe).
macro_rules! probe {
    ([$($tpl:tt)*], [$($ops:tt)*]) => {
        // SAFETY: reached only on a hart with XTheadVector (checked by the caller); the template
        // touches only the operands' memory, which the caller provides.
        unsafe { xtv_asm!([$($tpl)*], [$($ops)*], [nostack]) }
    };
}

/// The emulated C906: vector length, vlenb, tail zeroing, the mask layout, and every
/// re-encoded instruction doing what it says.
#[test]
fn encoding_layer_behaves_on_the_hart() {
    if !record_riscv_vector().xtheadvector {
        std::println!("encoding_layer_behaves_on_the_hart: skipped, this hart has no XTheadVector");
        return;
    }
    let (vl32, vl8, vlenb, vlmax): (usize, usize, usize, usize);
    probe!(
        [
            "vsetvli {a}, {n}, e32, m4, ta, ma",
            "vsetvli {b}, {n}, e8, m1, ta, ma",
            "csrr {c}, 0xc22",
            // rd = rs1 = x0: VLMAX in 0.7.1 (RVV 1.0 would keep vl = 3).
            "vsetvli zero, {three}, e8, m1, ta, ma",
            "vsetvli zero, zero, e32, m1, ta, ma",
            "csrr {d}, 0xc20",
        ],
        [a = out(reg) vl32, b = out(reg) vl8, c = out(reg) vlenb, d = out(reg) vlmax,
         n = in(reg) 100usize, three = in(reg) 3usize,]
    );
    assert_eq!(
        (vl32, vl8, vlenb),
        (16, 16, 16),
        "VLEN 128: vl at e32 m4, at e8 m1, vlenb"
    );
    assert_eq!(vlmax, 4, "vsetvli zero, zero sets VLMAX");

    // Tail zeroing: 7 everywhere, then 1 in the first three lanes only.
    let mut tail = [0xaau8; 16];
    probe!(
        [
            "vsetvli {t}, zero, e8, m1, ta, ma",
            "vmv.v.i v8, 7",
            "vsetvli zero, {three}, e8, m1, ta, ma",
            "vmv.v.i v8, 1",
            "vsetvli {t}, zero, e8, m1, ta, ma",
            "vse8.v v8, ({p})",
        ],
        [t = out(reg) _, three = in(reg) 3usize, p = in(reg) tail.as_mut_ptr(),]
    );
    let mut want = [0u8; 16];
    want[..3].fill(1);
    assert_eq!(tail, want, "0.7.1 zeroes the tail");

    // Mask layout: at e32 m1 (MLEN 32) element 1's bit is bit 32 of v0; masked-off lanes
    // keep their value.
    let mut mask = [0xaau8; 16];
    let mut merged = [0u32; 4];
    probe!(
        [
            "vsetvli {t}, zero, e32, m1, ta, mu",
            "vid.v v8",
            "vmseq.vi v0, v8, 1",
            "vmv.v.i v9, 5",
            "vadd.vi v9, v9, 2, v0.t",
            "vse32.v v9, ({m})",
            "vsetvli {t}, zero, e8, m1, ta, ma",
            "vse8.v v0, ({p})",
        ],
        [t = out(reg) _, p = in(reg) mask.as_mut_ptr(), m = in(reg) merged.as_mut_ptr(),]
    );
    let set: Vec<usize> = (0..128)
        .filter(|&i| mask[i / 8] >> (i % 8) & 1 != 0)
        .collect();
    assert_eq!(set, [32], "mask bit of element 1 at e32 m1");
    assert_eq!(merged, [5, 7, 5, 5], "masked-off lanes undisturbed");

    // th.vext.x.v zero-extends and takes element rs1; vfirst.m / vcpop.m; vmv.s.x.
    let (ext, elem2, first, pop, sbf, iota): (usize, usize, usize, usize, usize, usize);
    probe!(
        [
            "vsetvli {t}, zero, e16, m1, ta, ma",
            "vmv.v.i v8, -1",
            "th.vext.x.v {ext}, v8, zero",
            "vid.v v9",
            "th.vext.x.v {e2}, v9, {two}",
            "vsetvli {t}, zero, e8, m1, ta, ma",
            "vid.v v12",
            "vmsgtu.vi v0, v12, 4",
            "vfirst.m {first}, v0",
            "vcpop.m {pop}, v0",
            "vmv.s.x v13, {t}",
            "vmsbf.m v1, v0",
            "vcpop.m {sbf}, v1",
            "viota.m v2, v0",
            "th.vext.x.v {iota}, v2, {fifteen}",
        ],
        [t = out(reg) _, ext = out(reg) ext, e2 = out(reg) elem2, two = in(reg) 2usize,
         first = out(reg) first, pop = out(reg) pop, sbf = out(reg) sbf, iota = out(reg) iota,
         fifteen = in(reg) 15usize,]
    );
    assert_eq!(
        (sbf, iota),
        (5, 10),
        "vmsbf.m: elements 0..5; viota.m at element 15"
    );
    assert_eq!(ext, 0xffff, "th.vext.x.v zero-extends an e16 -1");
    assert_eq!(elem2, 2, "th.vext.x.v takes element rs1");
    assert_eq!(
        (first, pop),
        (5, 11),
        "vfirst.m / vcpop.m over elements 5..16"
    );

    // Signed · unsigned widening multiply-adds: -1 · 1 (vwmaccsu) and 255 · 1 (vwmaccus).
    let (su, su_x, us_x): (usize, usize, usize);
    probe!(
        [
            "vsetvli {t}, zero, e8, m1, ta, ma",
            "vmv.v.i v8, -1",
            "vmv.v.i v9, 1",
            "vsetvli {t}, zero, e16, m2, ta, ma",
            "vmv.v.i v16, 0",
            "vmv.v.i v18, 0",
            "vmv.v.i v20, 0",
            "vsetvli {t}, zero, e8, m1, ta, ma",
            "vwmaccsu.vv v16, v8, v9",
            "vwmaccsu.vx v18, {m1}, v9",
            "vwmaccus.vx v20, {m1}, v9",
            "vsetvli {t}, zero, e16, m1, ta, ma",
            "th.vext.x.v {su}, v16, zero",
            "th.vext.x.v {sux}, v18, zero",
            "th.vext.x.v {usx}, v20, zero",
        ],
        [t = out(reg) _, m1 = in(reg) -1isize, su = out(reg) su, sux = out(reg) su_x,
         usx = out(reg) us_x,]
    );
    let want = (0xffff, 0xffff, 255);
    assert_eq!(
        (su, su_x, us_x),
        want,
        "vwmaccsu.vv, vwmaccsu.vx, vwmaccus.vx"
    );

    // vfcvt both ways (to nearest even), vfmv.s.f / vfmv.f.s, vfsqrt.v.
    let (f, back, root): (f32, f32, f32);
    probe!(
        [
            "vsetvli {t}, zero, e32, m1, ta, ma",
            "vmv.v.i v10, -3",
            "vfcvt.f.x.v v10, v10",
            "vfmv.f.s {f}, v10",
            "vfmv.s.f v11, {half}",
            "vfcvt.x.f.v v11, v11",
            "vfcvt.f.x.v v11, v11",
            "vfmv.f.s {back}, v11",
            "vfmv.s.f v12, {nine}",
            "vfsqrt.v v12, v12",
            "vfmv.f.s {root}, v12",
        ],
        [t = out(reg) _, f = out(freg) f, half = in(freg) 2.5f32, back = out(freg) back,
         nine = in(freg) 9.0f32, root = out(freg) root,]
    );
    assert_eq!(f.to_bits(), (-3.0f32).to_bits(), "vfcvt.f.x.v");
    assert_eq!(root.to_bits(), 3.0f32.to_bits(), "vfsqrt.v");
    assert_eq!(
        back.to_bits(),
        2.0f32.to_bits(),
        "vfcvt.x.f.v rounds to nearest even"
    );
    std::println!(
        "encoding_layer_behaves_on_the_hart: VLEN 128 (vlenb {vlenb}), tail zeroed, MLEN = SEW/LMUL"
    );
}

#[test]
fn isa_string_and_ids_decide_xtheadvector() {
    let cases = [
        ("rv64imafdc_xtheadvector", true),
        ("rv64imafdcv_zicsr_zifencei_xtheadvector1p0", true),
        ("RV64IMAFDC_XTHEADVECTOR", true),
        // An entry of `riscv,isa-extensions`.
        ("xtheadvector", true),
        ("rv64imafdcv", false),
        ("rv64imafdc_xtheadcmo_xtheadsync", false),
        ("rv64gc_xtheadvectorx", false),
        ("rv64gc_zve64d_zvl128b", false),
        ("", false),
    ];
    for (isa, want) in cases {
        assert_eq!(isa_has_xtheadvector(isa), want, "{isa}");
    }
    assert!(ids_have_xtheadvector(0x5b7, 0, true));
    assert!(!ids_have_xtheadvector(0x5b7, 0, false), "no V in misa");
    assert!(
        !ids_have_xtheadvector(0x5b7, 0x1, true),
        "a later T-Head core (RVV 1.0)"
    );
    assert!(!ids_have_xtheadvector(0x489, 0, true), "SiFive");
}

/// Features with XTheadVector or nothing.
fn with_xtv(xtheadvector: bool) -> Features {
    Features {
        xtheadvector,
        ..Features::default()
    }
}

#[test]
fn kernel_set_follows_xtheadvector() {
    let f = record_riscv_vector();
    check_set_choice("xtheadvector", with_xtv, true, f.xtheadvector);
    // A hart has one vector unit or the other; a record claiming both runs neither.
    let both = Features {
        rvv: true,
        ..with_xtv(true)
    };
    assert_eq!(Kernels::best_on(&both).name, "scalar");
    assert_eq!(
        Kernels::best_on(&Features {
            rvv: true,
            ..with_xtv(false)
        })
        .name,
        "rvv"
    );
    let here: Vec<&str> = Kernels::available().map(|k| k.name).collect();
    if f.xtheadvector {
        assert_eq!(here, ["scalar", "xtheadvector"]);
    }
    std::println!(
        "kernel_set_follows_xtheadvector: {} (QEMU_CPU={}): sets {here:?}",
        if f.xtheadvector {
            "XTheadVector"
        } else {
            "no XTheadVector"
        },
        std::env::var("QEMU_CPU").unwrap_or_default()
    );
}
