//! The 32-wide weight types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) · Q8_0 / Q8_1 activations, one row or
//! four rows sharing the activation loads: one `asm!` loop per kernel, one block per pass.
//!
//! Registers (named in the templates, all declared clobbered):
//! - q8, q9: the block's 32 weights as int8 (q8 elements 0..16, q9 16..32), decoded from the row;
//! - q10, q11: the activation block's 32 int8 values;
//! - q12, q13: products (and the Q5 high-bit masks while decoding); q14 = 0x0f in every byte,
//!   q15 = the bit of each lane (`1 << (lane % 8)`, Q5) or 8 (Q4_0);
//! - one row: q1 gets the block's four i32 partial sums, s0..s3 the scales (`d`, `m`, `y.d`,
//!   `y.s`), s16 the running sum `sumf`;
//! - four rows: q4..q7 the four rows' partial sums, s0..s3 their block sums, s4..s7 their running
//!   sums, s8..s11 their raw f16 scale fields, s12..s15 `y.d`, `y.s` and temporaries.
//!
//! Per block, exactly the scalar code: the integer sum `sumi` (exact, see [`dot!`]), then in VFP
//! `sumf += sumi · (d · y.d)` (Q4_0, Q5_0, Q8_0) or `sumf += (d · y.d) · sumi + m · y.s` (Q4_1,
//! Q5_1), one rounding per scalar operation, in its order. Weight rows are read with byte loads
//! (VLD1.8) and unaligned LDR/LDRH (ARMv7 allows them: SCTLR.A is clear under Linux and the
//! bare-metal build is `-strict-align`), so a row may start at any address.

use crate::quant::act::{BlockQ8_0, BlockQ8_1};
use core::arch::asm;

/// Before the loop: q14 = 0x0f bytes, q15 = `[1, 2, 4, .., 128]` twice (built in `{t}`), and for
/// Q4_0 q15 = 8 bytes instead.
#[rustfmt::skip]
macro_rules! consts {
    ($fmt:tt) => {
        concat!(
            "vmov.i8 q14, #0x0f\n",
            "movw {t}, #0x0201\n",
            "movt {t}, #0x0804\n",
            "vmov.32 d30[0], {t}\n",
            "movw {t}, #0x2010\n",
            "movt {t}, #0x8040\n",
            "vmov.32 d30[1], {t}\n",
            "vmov d31, d30\n",
            consts!(@extra $fmt),
        )
    };
    (@extra q4_0) => { "vmov.i8 q15, #8\n" };
    (@extra $other:tt) => { "" };
}

/// A weight block's scale field(s) from `[$p]` (post-incremented) into `$s`: `d` (LDRH) or `d`
/// and `m` (LDR; `d` in the low half, `m` in the high half).
#[rustfmt::skip]
macro_rules! head {
    (d, $p:literal, $s:literal) => {
        concat!("ldrh {t}, [", $p, "], #2\n", "vmov ", $s, ", {t}\n")
    };
    (dm, $p:literal, $s:literal) => {
        concat!("ldr {t}, [", $p, "], #4\n", "vmov ", $s, ", {t}\n")
    };
}

/// The rest of a weight block at `[$p]` (post-incremented past it) decoded to 32 int8 weights in
/// q8 (elements 0..16) and q9 (16..32).
#[rustfmt::skip]
macro_rules! decode {
    (q8_0, $p:literal) => { concat!("vld1.8 {{d16-d19}}, [", $p, "]!\n") };
    // Nibbles: element j is the low nibble of byte j, element 16 + j its high nibble; minus 8.
    (q4_0, $p:literal) => {
        concat!(
            "vld1.8 {{d18-d19}}, [", $p, "]!\n",
            "vand q8, q9, q14\n",
            "vshr.u8 q9, q9, #4\n",
            "vsub.i8 q8, q8, q15\n",
            "vsub.i8 q9, q9, q15\n",
        )
    };
    (q4_1, $p:literal) => {
        concat!(
            "vld1.8 {{d18-d19}}, [", $p, "]!\n",
            "vand q8, q9, q14\n",
            "vshr.u8 q9, q9, #4\n",
        )
    };
    // (n | b << 4) - 16: n where the high bit b is set, else n - 16 = n | 0xf0 = n | !(mask | 0x0f).
    (q5_0, $p:literal) => {
        concat!(
            decode!(@q5 $p),
            "vorr q13, q13, q14\n",
            "vorn q8, q8, q13\n",
            "vorr q12, q12, q14\n",
            "vorn q9, q9, q12\n",
        )
    };
    // n | b << 4: the mask's top bit shifted to bit 0, inserted above the nibble (VSLI).
    (q5_1, $p:literal) => {
        concat!(
            decode!(@q5 $p),
            "vshr.u8 q13, q13, #7\n",
            "vsli.8 q8, q13, #4\n",
            "vshr.u8 q12, q12, #7\n",
            "vsli.8 q9, q12, #4\n",
        )
    };
    // `qh` (u32) to byte masks: q13 lane j = bit j set (elements 0..16: bytes 0, 1 of qh),
    // q12 lane j = bit 16 + j set (elements 16..32: bytes 2, 3); then the nibbles.
    (@q5 $p:literal) => {
        concat!(
            "ldr {t}, [", $p, "], #4\n",
            "vdup.32 d24, {t}\n",
            "vdup.8 d25, d24[3]\n",
            "vdup.8 d26, d24[0]\n",
            "vdup.8 d27, d24[1]\n",
            "vdup.8 d24, d24[2]\n",
            "vtst.8 q13, q13, q15\n",
            "vtst.8 q12, q12, q15\n",
            "vld1.8 {{d18-d19}}, [", $p, "]!\n",
            "vand q8, q9, q14\n",
            "vshr.u8 q9, q9, #4\n",
        )
    };
}

/// The activation block at `[{pa}]` (advanced past it): `y.d` into `$d`, `y.s` into `$s` (Q8_1),
/// the 32 values into q10, q11.
#[rustfmt::skip]
macro_rules! acts {
    (q8_0, $d:literal, $s:literal) => {
        concat!(
            "vldr ", $d, ", [{pa}]\n",
            "add {pa}, {pa}, #4\n",
            "vld1.8 {{d20-d23}}, [{pa}]!\n",
        )
    };
    (q8_1, $d:literal, $s:literal) => {
        concat!(
            "vldr ", $d, ", [{pa}]\n",
            "vldr ", $s, ", [{pa}, #4]\n",
            "add {pa}, {pa}, #8\n",
            "vld1.8 {{d20-d23}}, [{pa}]!\n",
        )
    };
}

/// The 32 products of q8:q9 with q10:q11 summed into four i32 lanes of `$q` (exact):
/// - `narrow` (|w| ≤ 31: Q4_0, Q4_1, Q5_0, Q5_1): four products per i16 lane, 4 · 31 · 128 < 2^15,
///   then VPADDL to i32;
/// - `wide` (any int8 weight: Q8_0): one product per i16 lane (|p| ≤ 2^14), pairs summed into i32
///   lanes at once by VPADDL/VPADAL.
#[rustfmt::skip]
macro_rules! dot {
    (narrow, $q:literal) => {
        concat!(
            "vmull.s8 q12, d16, d20\n",
            "vmull.s8 q13, d17, d21\n",
            "vmlal.s8 q12, d18, d22\n",
            "vmlal.s8 q13, d19, d23\n",
            "vadd.i16 q12, q12, q13\n",
            "vpaddl.s16 ", $q, ", q12\n",
        )
    };
    (wide, $q:literal) => {
        concat!(
            "vmull.s8 q12, d16, d20\n",
            "vmull.s8 q13, d17, d21\n",
            "vpaddl.s16 ", $q, ", q12\n",
            "vpadal.s16 ", $q, ", q13\n",
            "vmull.s8 q12, d18, d22\n",
            "vmull.s8 q13, d19, d23\n",
            "vpadal.s16 ", $q, ", q12\n",
            "vpadal.s16 ", $q, ", q13\n",
        )
    };
}

/// One row's float step: `$sum` (sumi, f32) from the block sum, `$h` (the raw scale field(s)),
/// `y.d` in `$yd`, `y.s` in `$ys`, `$t` a temporary; `$acc += ...` as the scalar code.
#[rustfmt::skip]
macro_rules! step {
    // sumf += sumi · (d · y.d)
    (d, $sum:literal, $h:literal, $yd:literal, $ys:literal, $t:literal, $acc:literal) => {
        concat!(
            "vcvtb.f32.f16 ", $h, ", ", $h, "\n",
            "vmul.f32 ", $h, ", ", $h, ", ", $yd, "\n",
            "vmul.f32 ", $sum, ", ", $sum, ", ", $h, "\n",
            "vadd.f32 ", $acc, ", ", $acc, ", ", $sum, "\n",
        )
    };
    // sumf += (d · y.d) · sumi + m · y.s
    (dm, $sum:literal, $h:literal, $yd:literal, $ys:literal, $t:literal, $acc:literal) => {
        concat!(
            "vcvtt.f32.f16 ", $t, ", ", $h, "\n",
            "vcvtb.f32.f16 ", $h, ", ", $h, "\n",
            "vmul.f32 ", $h, ", ", $h, ", ", $yd, "\n",
            "vmul.f32 ", $sum, ", ", $h, ", ", $sum, "\n",
            "vmul.f32 ", $t, ", ", $t, ", ", $ys, "\n",
            "vadd.f32 ", $sum, ", ", $sum, ", ", $t, "\n",
            "vadd.f32 ", $acc, ", ", $acc, ", ", $sum, "\n",
        )
    };
}

/// Row `$r`'s block in the four-row loop: its scale field(s) into `$h`, its weights decoded and
/// multiplied with the activations into `$q`.
#[rustfmt::skip]
macro_rules! row4 {
    ($fmt:tt, $head:tt, $dot:tt, $p:literal, $h:literal, $q:literal) => {
        concat!(head!($head, $p, $h), decode!($fmt, $p), dot!($dot, $q))
    };
}

/// `[sum of row 0, .., row 3]` (the four rows' i32 partial sums in q4..q7) into s0..s3 as f32
/// (NEON VCVT: |sum| ≤ 32 · 2^14 < 2^24 converts exactly, as VFP's would).
#[rustfmt::skip]
macro_rules! sums4 {
    () => {
        concat!(
            "vpadd.i32 d8, d8, d9\n",
            "vpadd.i32 d9, d10, d11\n",
            "vpadd.i32 d10, d12, d13\n",
            "vpadd.i32 d11, d14, d15\n",
            "vpadd.i32 d0, d8, d9\n",
            "vpadd.i32 d1, d10, d11\n",
            "vcvt.f32.s32 q0, q0\n",
        )
    };
}

/// The one-row and four-row kernels of one format: `$fmt` (decode), `$head` (`d` or `dm`), `$dot`
/// (`narrow` or `wide`), `$acts` (`q8_0` or `q8_1`), block bytes `$bytes`.
macro_rules! q32_kernels {
    ($(#[$doc:meta])* $one:ident, $four:ident, $fmt:tt, $head:tt, $dot:tt, $acts:tt, $act:ty,
     $bytes:literal) => {
        $(#[$doc])*
        pub fn $one(w: &[u8], a: &[$act]) -> f32 {
            let nb = (w.len() / $bytes).min(a.len());
            let mut sumf = 0.0f32;
            if nb == 0 {
                return sumf;
            }
            // SAFETY: the loop reads `nb` whole blocks of `w` (nb · BYTES ≤ w.len()) and `nb`
            // activation blocks (nb ≤ a.len()), with loads that need no alignment beyond the
            // activation blocks' own (VLDR of their f32 fields); it writes only registers, all
            // declared (the q registers clobbered, the running sum in s16).
            unsafe {
                asm!(
                    consts!($fmt),
                    "2:",
                    acts!($acts, "s2", "s3"),
                    head!($head, "{pw}", "s0"),
                    decode!($fmt, "{pw}"),
                    dot!($dot, "q1"),
                    "vpadd.i32 d2, d2, d3",
                    "vpadd.i32 d2, d2, d2",
                    "vcvt.f32.s32 s4, s4",
                    step!($head, "s4", "s0", "s2", "s3", "s1", "s16"),
                    "subs {n}, {n}, #1",
                    "bne 2b",
                    pw = inout(reg) w.as_ptr() => _,
                    pa = inout(reg) a.as_ptr() => _,
                    n = inout(reg) nb => _,
                    t = out(reg) _,
                    inout("s16") sumf,
                    out("q0") _, out("q1") _,
                    out("q8") _, out("q9") _, out("q10") _, out("q11") _,
                    out("q12") _, out("q13") _, out("q14") _, out("q15") _,
                    options(readonly, nostack)
                );
            }
            sumf
        }

        $(#[$doc])*
        /// Four rows of `rb` bytes, consecutive in `w`, at once (the activations loaded once per
        /// block): `out[r]` equals the one-row kernel on row `r`, bit for bit.
        pub fn $four(w: &[u8], rb: usize, a: &[$act], out: &mut [f32; 4]) {
            if crate::quant::short_rows4(w, rb, a, out, $one) {
                return;
            }
            let nb = (rb / $bytes).min(a.len());
            let mut acc = [0.0f32; 4];
            if nb > 0 {
                let p = w.as_ptr();
                // SAFETY: row r is `w[r·rb..(r + 1)·rb]` (4·rb ≤ w.len(), checked above), of which
                // the loop reads the first nb · BYTES ≤ rb bytes; `nb` activation blocks; loads as
                // in the one-row kernel; registers only written, all declared (q0 and q2..q15
                // clobbered, the running sums in s4..s7).
                unsafe {
                    asm!(
                        consts!($fmt),
                        "2:",
                        acts!($acts, "s12", "s13"),
                        row4!($fmt, $head, $dot, "{p0}", "s8", "q4"),
                        row4!($fmt, $head, $dot, "{p1}", "s9", "q5"),
                        row4!($fmt, $head, $dot, "{p2}", "s10", "q6"),
                        row4!($fmt, $head, $dot, "{p3}", "s11", "q7"),
                        sums4!(),
                        step!($head, "s0", "s8", "s12", "s13", "s14", "s4"),
                        step!($head, "s1", "s9", "s12", "s13", "s14", "s5"),
                        step!($head, "s2", "s10", "s12", "s13", "s14", "s6"),
                        step!($head, "s3", "s11", "s12", "s13", "s14", "s7"),
                        "subs {n}, {n}, #1",
                        "bne 2b",
                        p0 = inout(reg) p => _,
                        p1 = inout(reg) p.add(rb) => _,
                        p2 = inout(reg) p.add(2 * rb) => _,
                        p3 = inout(reg) p.add(3 * rb) => _,
                        pa = inout(reg) a.as_ptr() => _,
                        n = inout(reg) nb => _,
                        t = out(reg) _,
                        inout("s4") acc[0], inout("s5") acc[1],
                        inout("s6") acc[2], inout("s7") acc[3],
                        out("q0") _, out("q2") _, out("q3") _,
                        out("q4") _, out("q5") _, out("q6") _, out("q7") _,
                        out("q8") _, out("q9") _, out("q10") _, out("q11") _,
                        out("q12") _, out("q13") _, out("q14") _, out("q15") _,
                        options(readonly, nostack)
                    );
                }
            }
            *out = acc;
        }
    };
}

q32_kernels!(
    /// Q4_0 weights · Q8_0 activations (twin of `scalar::vec_dot_q4_0_q8_0`).
    vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_x4, q4_0, d, narrow, q8_0, BlockQ8_0, 18
);
q32_kernels!(
    /// Q4_1 weights · Q8_1 activations (twin of `scalar::vec_dot_q4_1_q8_1`).
    vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_x4, q4_1, dm, narrow, q8_1, BlockQ8_1, 20
);
q32_kernels!(
    /// Q5_0 weights · Q8_0 activations (twin of `scalar::vec_dot_q5_0_q8_0`).
    vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_x4, q5_0, d, narrow, q8_0, BlockQ8_0, 22
);
q32_kernels!(
    /// Q5_1 weights · Q8_1 activations (twin of `scalar::vec_dot_q5_1_q8_1`).
    vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_x4, q5_1, dm, narrow, q8_1, BlockQ8_1, 24
);
q32_kernels!(
    /// Q8_0 weights · Q8_0 activations (twin of `scalar::vec_dot_q8_0_q8_0`).
    vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_x4, q8_0, d, wide, q8_0, BlockQ8_0, 34
);
