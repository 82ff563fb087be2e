//! 32-wide weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) · Q8_0 / Q8_1 activations.
//!
//! A pass takes `vl` blocks, `vl = vsetvli(blocks left, e8, m1)` (up to VLEN/8). Strided segment
//! loads (`vlsseg8e8`, stride = the block size) transpose the blocks: register `v8 + j` holds byte
//! `j` (of the 8 loaded) of every block, element `i` belonging to block `i`; the activations are
//! loaded the same way, so products of one block stay in one lane. Four byte columns at a time are
//! multiplied as one LMUL=4 group into an e16 LMUL=8 accumulator (four column positions), which is
//! summed to one e32 per block at the end of the integer phase. The weights are read with byte
//! loads only, so rows may start at any address.
//!
//! Then, per block and in one lane each, the scalar code's float expression, one instruction per
//! scalar operation (scales decoded from f16 exactly, see `f16_bits_to_f32!`):
//! Q4_0, Q8_0: `sumi as f32 * (d * y.d)`; Q5_0: `(d * y.d) * sumi as f32` (the same bits: IEEE
//! multiplication commutes); Q4_1, Q5_1: `(d * y.d) * sumi as f32 + m * y.s`. `vfredosum` adds the
//! terms of the pass to the running sum in block order, as `sumf += term` does.
//!
//! One `asm!` block runs all rows of a call (one, or four for the `_x4` entries that
//! `Kernels::dot_rows` uses), so the constants are set up once per four rows.
//!
//! Register use in the integer phase: v8..v15 weight columns, v16..v23 activation columns, the
//! accumulator v0..v7 (Q4, Q8_0's e32 sums) or v24..v31 (Q5, whose high bits need v0 for masks).

use super::{f16_bits_to_f32, rvv_asm, BIG, INF, K112, MAG};
use crate::quant::act::{BlockQ8_0, BlockQ8_1};

/// Bytes per activation block (`BlockQ8_0`: d, qs; `BlockQ8_1`: d, s, qs).
pub(crate) const Q8_0_BYTES: usize = core::mem::size_of::<BlockQ8_0>();
pub(crate) const Q8_1_BYTES: usize = core::mem::size_of::<BlockQ8_1>();
const _: () = assert!(Q8_0_BYTES == 36 && Q8_1_BYTES == 40);

/// Blocks both sides hold (the scalar loops stop at the shorter side too).
pub(crate) fn blocks<A>(w: &[u8], bytes: usize, a: &[A]) -> usize {
    (w.len() / bytes).min(a.len())
}

/// `vd ← vd − 8` when `$k` is `sub8` (Q4_0's weight = nibble − 8), nothing for `plain`.
#[rustfmt::skip]
macro_rules! q4_adj {
    (sub8, $r:literal) => {
        concat!("vadd.vi ", $r, ", ", $r, ", -8\n")
    };
    (plain, $r:literal) => {
        ""
    };
}

/// Half of a Q4 pass: 8 weight bytes per block at `{w} + $wq` (low nibbles: elements `e..e + 8`,
/// high nibbles: `e + 16..e + 24`), their activations at `{a} + $alo` and `{a} + $ahi`. Products go
/// to v0..v7 (e16, four column positions per block): `$mul` is `vwmul.vv` in the first half (it
/// starts the sums), `vwmacc.vv` in the second. Expects vtype `e8, m1` with vl = blocks.
///
/// Bound: a lane adds 8 products (2 halves × 2 nibbles × 2 column groups), each at most
/// 15 · 128 = 1920 (Q4_1, 0..15) or 8 · 128 = 1024 (Q4_0, -8..7) in magnitude: < 2^15.
#[rustfmt::skip]
macro_rules! q4_half {
    ($mul:literal, $k:ident, $wq:literal, $alo:literal, $ahi:literal) => {
        concat!(
            "addi {p}, {w}, ", $wq, "\n",
            "vlsseg8e8.v v8, ({p}), {ws}\n",
            "addi {p}, {a}, ", $alo, "\n",
            "vlsseg8e8.v v16, ({p}), {astr}\n",
            "vsetvli {t}, zero, e8, m4, ta, ma\n",
            "vand.vi v24, v8, 15\n",
            q4_adj!($k, "v24"),
            $mul, " v0, v24, v16\n",
            "vand.vi v24, v12, 15\n",
            q4_adj!($k, "v24"),
            "vwmacc.vv v0, v24, v20\n",
            "vsrl.vi v8, v8, 4\n",
            q4_adj!($k, "v8"),
            "vsrl.vi v12, v12, 4\n",
            q4_adj!($k, "v12"),
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            "addi {p}, {a}, ", $ahi, "\n",
            "vlsseg8e8.v v16, ({p}), {astr}\n",
            "vsetvli {t}, zero, e8, m4, ta, ma\n",
            "vwmacc.vv v0, v8, v16\n",
            "vwmacc.vv v0, v12, v20\n",
        )
    };
}

/// The four e16 column positions in `$acc` (LMUL=8) summed per block into v4..v7 (e32, LMUL=4),
/// converted to f32 (exact: |sumi| < 2^24).
#[rustfmt::skip]
macro_rules! reduce_positions {
    ($acc0:literal, $acc1:literal, $acc2:literal, $acc3:literal) => {
        concat!(
            "vsetvli zero, {vl}, e16, m2, ta, ma\n",
            "vwadd.vv v8, ", $acc0, ", ", $acc1, "\n",
            "vwadd.vv v12, ", $acc2, ", ", $acc3, "\n",
            "vsetvli zero, {vl}, e32, m4, ta, ma\n",
            "vadd.vv v4, v8, v12\n",
            "vfcvt.f.x.v v4, v4\n",
        )
    };
}

/// Float phase for blocks with `d` only (Q4_0, Q5_0, Q8_0 · Q8_0): `sumi` (f32) in v4..v7, the
/// weight blocks at `{w}` start with `d` (f16), the activation blocks at `{a}` with `d` (f32).
/// Adds `sumi · (d · y.d)` of each block, in order, to `{acc}`.
#[rustfmt::skip]
macro_rules! float_d {
    () => {
        concat!(scale_d!(), term_d!(), osum!())
    };
}

/// The weights' `d` (f16 at `{w}`, stride `{ws}`) as f32 in v16..v19; ends with vtype
/// `e32, m4` and vl = blocks.
#[rustfmt::skip]
macro_rules! scale_d {
    () => {
        concat!(
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            "vlsseg2e8.v v24, ({w}), {ws}\n",
            // d = lo + 256 · hi (e16, v16..v17): hi·128 + hi·128 + lo.
            "vwmulu.vx v16, v25, {c128}\n",
            "vwmaccu.vx v16, {c128}, v25\n",
            "vwaddu.wv v16, v16, v24\n",
            "vsetvli zero, {vl}, e16, m2, ta, ma\n",
            "vwmulu.vx v8, v16, {c8192}\n",
            "vsetvli zero, {vl}, e32, m4, ta, mu\n",
            f16_bits_to_f32!("v8", "v16"),
        )
    };
}

/// Each block's term `sumi · (d · y.d)` into v16..v19, from `sumi` (f32) in v4..v7, `d` in
/// v16..v19 and the activation blocks at `{a}` (stride `{astr}`, `d` first). Vtype `e32, m4`.
#[rustfmt::skip]
macro_rules! term_d {
    () => {
        concat!(
            "vlse32.v v8, ({a}), {astr}\n",
            "vfmul.vv v16, v16, v8\n",
            "vfmul.vv v16, v4, v16\n",
        )
    };
}

/// `{acc}` += the terms in v16.. (or `$r`..; vl of them), in order (`vfredosum`).
#[rustfmt::skip]
macro_rules! osum {
    () => {
        osum!("v16")
    };
    ($r:literal) => {
        concat!(
            "vfmv.s.f v1, {acc}\n",
            "vfredosum.vs v1, ", $r, ", v1\n",
            "vfmv.f.s {acc}, v1\n",
        )
    };
}

/// Float phase for blocks with `d` and `m` (Q4_1, Q5_1 · Q8_1): `sumi` (f32) in v4..v7, the weight
/// blocks at `{w}` start with `d`, `m` (f16), the activation blocks at `{a}` with `d`, `s` (f32).
/// Adds `(d · y.d) · sumi + m · y.s` of each block, in order, to `{acc}`.
#[rustfmt::skip]
macro_rules! float_dm {
    () => {
        concat!(scale_dm!(), term_dm!(), osum!())
    };
}

/// The weights' `d` and `m` (f16 at `{w}`, stride `{ws}`) as f32: `d` in v16..v19, `m` in
/// v20..v23 (together one LMUL=8 group, `m` from element VLEN/8); ends with vtype `e32, m8`, VLMAX.
#[rustfmt::skip]
macro_rules! scale_dm {
    () => {
        concat!(
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            "vlsseg4e8.v v24, ({w}), {ws}\n",
            // d in v16..v17, m in v18..v19 (e16): together one LMUL=4 group, m from element VLEN/8.
            "vwmulu.vx v16, v25, {c128}\n",
            "vwmaccu.vx v16, {c128}, v25\n",
            "vwaddu.wv v16, v16, v24\n",
            "vwmulu.vx v18, v27, {c128}\n",
            "vwmaccu.vx v18, {c128}, v27\n",
            "vwaddu.wv v18, v18, v26\n",
            "vsetvli {t}, zero, e16, m4, ta, ma\n",
            "vwmulu.vx v8, v16, {c8192}\n",
            "vsetvli {t}, zero, e32, m8, ta, mu\n",
            // d (f32) in v16..v19, m in v20..v23.
            f16_bits_to_f32!("v8", "v16"),
        )
    };
}

/// Each block's term `(d · y.d) · sumi + m · y.s` into v16..v19, from `sumi` (f32) in v4..v7, `d`
/// in v16..v19, `m` in v20..v23 and the activation blocks at `{a}` (stride `{astr}`, `d`, `s`
/// first). Ends with vtype `e32, m4` and vl = blocks.
#[rustfmt::skip]
macro_rules! term_dm {
    () => {
        concat!(
            "vsetvli zero, {vl}, e32, m4, ta, ma\n",
            // y.d in v8..v11, y.s in v12..v15.
            "vlsseg2e32.v v8, ({a}), {astr}\n",
            "vfmul.vv v16, v16, v8\n",
            "vfmul.vv v16, v16, v4\n",
            "vfmul.vv v20, v20, v12\n",
            "vfadd.vv v16, v16, v20\n",
        )
    };
}

/// Move `{w}` and `$a` (`{a}`) past this pass's blocks, loop while blocks are left.
#[rustfmt::skip]
macro_rules! next_pass {
    ($a:literal) => {
        concat!(
            "mul {p}, {vl}, {ws}\n",
            "add {w}, {w}, {p}\n",
            "mul {p}, {vl}, {astr}\n",
            "add ", $a, ", ", $a, ", {p}\n",
            "sub {n}, {n}, {vl}\n",
            "bnez {n}, 2b\n",
        )
    };
}

/// `$rows` rows of `$rb` bytes from `$w`, each `· $a` over `$nb` blocks (≥ 1), into `$out[r]`:
/// the passes (`$pass`, one per up to VLEN/8 blocks) inside a loop over rows, so the constants
/// are set up once per call. Extra operands (named) follow.
#[rustfmt::skip]
macro_rules! q32_rows_asm {
    ($asm:ident, [$($pass:tt)*], $w:expr, $rb:expr, $rows:expr, $a:expr, $nb:expr, $out:expr, $wbytes:expr, $abytes:expr $(, $($extra:tt)+)?) => {
        q32_asm!(
            $asm,
            [
                "3:",
                "mv {w}, {wr}",
                "mv {a}, {a0}",
                "mv {n}, {nb}",
                "fmv.w.x {acc}, zero",
                "2:",
                "vsetvli {vl}, {n}, e8, m1, ta, ma",
                $($pass)*
                next_pass!("{a}"),
                "fsw {acc}, 0({o})",
                "addi {o}, {o}, 4",
                "add {wr}, {wr}, {rb}",
                "addi {rows}, {rows}, -1",
                "bnez {rows}, 3b",
            ],
            [
                $($($extra)+ ,)?
                wr = inout(reg) $w => _,
                rb = in(reg) $rb,
                rows = inout(reg) $rows => _,
                a0 = in(reg) $a,
                nb = in(reg) $nb,
                o = inout(reg) $out => _,
                w = out(reg) _,
                a = out(reg) _,
                n = out(reg) _,
            ],
            $wbytes,
            $abytes
        )
    };
}

/// `$asm!` (`rvv_asm!`, `xtv_asm!`) with the operands every 32-wide kernel uses added: the block sizes `{ws}`
/// (weights) and `{astr}` (activations), `{vl}`, scratch `{p}`, `{t}`, the constants of the
/// scale decoding (`{c128}`, `{c8192}`, `f16_bits_to_f32!`'s) and the running sum `{acc}`.
#[rustfmt::skip]
macro_rules! q32_asm {
    ($asm:ident, [$($tpl:tt)*], [$($ops:tt)*], $wbytes:expr, $abytes:expr) => {
        $asm!(
            [$($tpl)*],
            [
                $($ops)*
                ws = in(reg) $wbytes,
                astr = in(reg) $abytes,
                vl = out(reg) _,
                p = out(reg) _,
                t = out(reg) _,
                c128 = in(reg) 128usize,
                c8192 = in(reg) 8192usize,
                mag = in(reg) MAG,
                big = in(reg) BIG,
                inf = in(reg) INF,
                k112 = in(freg) K112,
                acc = out(freg) _,
            ],
            [nostack]
        )
    };
}

/// The public entries of one format: `$one(w, a)` (one row, twin of the scalar kernel) and
/// `$four(w, rb, a, out)` (four consecutive rows of `rb` bytes), both through `$rows`, an
/// `unsafe fn(w, rb, rows, a, nb, out)` that needs `rows` rows of at least `nb` blocks at
/// `w + r·rb`, `nb` ≥ 1 activation blocks at `a` and `rows` floats at `out`.
#[rustfmt::skip]
macro_rules! entries {
    ($(#[$doc:meta])* $one:ident, $four:ident, $rows:ident, $bytes:literal, $act:ty) => {
        $(#[$doc])*
        pub fn $one(w: &[u8], a: &[$act]) -> f32 {
            let nb = blocks(w, $bytes, a);
            let mut out = [0.0f32];
            if nb > 0 {
                // SAFETY: one row of `nb` whole blocks (`nb` ≤ w.len() / bytes), `nb` ≤ a.len()
                // activation blocks, one output. Reached only on harts with the set's vector unit
                // (its `runs_on`).
                unsafe { $rows(w.as_ptr(), 0, 1, a.as_ptr().cast(), nb, out.as_mut_ptr()) };
            }
            out[0]
        }

        $(#[$doc])*
        /// Four rows of `rb` bytes, consecutive in `w`, at once: `out[r]` equals the one-row
        /// kernel on row `r`.
        pub fn $four(w: &[u8], rb: usize, a: &[$act], out: &mut [f32; 4]) {
            if crate::quant::short_rows4(w, rb, a, out, $one) {
                return;
            }
            let nb = (rb / $bytes).min(a.len());
            if nb == 0 {
                *out = [0.0; 4];
                return;
            }
            // SAFETY: row r's `nb` blocks lie in r·rb..r·rb + nb·bytes ⊆ r·rb..(r + 1)·rb ⊆ w
            // (4·rb ≤ w.len()); `nb` ≤ a.len(); four outputs. Reached only on harts with the
            // set's vector unit.
            unsafe { $rows(w.as_ptr(), rb, 4, a.as_ptr().cast(), nb, out.as_mut_ptr()) };
        }
    };
}

/// The fifth bits of four byte columns: for `b` in `$b0..$b0 + 4`, column register `v4 + b - $b0`
/// gets its bit 4 set (`q5_1`: `| 16`) or, for Q5_0 (`q5_0`: nibbles pre-set to `n | 0xf0`, i.e.
/// n - 16), its high bits cleared (`& 15`, i.e. n) where bit `b` of `$q` is set. Mask per column:
/// shift bit `b` to the sign bit and compare with zero.
#[rustfmt::skip]
macro_rules! q5_bit {
    (q5_1, $q:literal, $b:literal, $r:literal) => {
        concat!(
            "vsll.vi v3, ", $q, ", 7-", $b, "\n",
            "vmslt.vx v0, v3, zero\n",
            "vor.vx ", $r, ", ", $r, ", {c16}, v0.t\n",
        )
    };
    (q5_0, $q:literal, $b:literal, $r:literal) => {
        concat!(
            "vsll.vi v3, ", $q, ", 7-", $b, "\n",
            "vmslt.vx v0, v3, zero\n",
            "vand.vi ", $r, ", ", $r, ", 15, v0.t\n",
        )
    };
}

/// Nibbles of four weight columns into v4..v7 (`$op` is `vand.vi` for low, `vsrl.vi` for high
/// nibbles), their fifth bits from `$q` (bits `$b0..$b0 + 4`), then multiplied with activation
/// columns `$act` into v24..v31 (`$mul`: `vwmul.vv` starts the sums).
#[rustfmt::skip]
macro_rules! q5_cols {
    ($k:ident, $op:literal, $src:literal, $q:literal, $bits:tt, $mul:literal, $act:literal) => {
        concat!(
            q5_nib!($k, $op, $src, $q, $bits),
            "vsetvli {t}, zero, e8, m4, ta, ma\n",
            $mul, " v24, v4, ", $act, "\n",
        )
    };
}

/// Four weight columns decoded to int8 in v4..v7 (VLMAX lanes): nibbles (`$op $src`), Q5_0's
/// offset, the fifth bits from `$q` (bits `$b0..$b0 + 4`). Uses v0 and v3.
#[rustfmt::skip]
macro_rules! q5_nib {
    ($k:ident, $op:literal, $src:literal, $q:literal, [$b0:literal, $b1:literal, $b2:literal, $b3:literal]) => {
        concat!(
            "vsetvli {t}, zero, e8, m4, ta, ma\n",
            $op, " v4, ", $src, "\n",
            q5_pre!($k),
            // Mask-undisturbed: the masked ops below must leave unselected lanes alone.
            "vsetvli {t}, zero, e8, m1, ta, mu\n",
            q5_bit!($k, $q, $b0, "v4"),
            q5_bit!($k, $q, $b1, "v5"),
            q5_bit!($k, $q, $b2, "v6"),
            q5_bit!($k, $q, $b3, "v7"),
        )
    };
}

/// Q5_0's nibbles as `n | 0xf0` (= n - 16 as i8) before the fifth bits are applied.
#[rustfmt::skip]
macro_rules! q5_pre {
    (q5_0) => {
        "vor.vi v4, v4, -16\n"
    };
    (q5_1) => {
        ""
    };
}

/// Half of a Q5 pass: 8 nibble bytes per block at `{w} + $wq`, the fifth bits of their low nibbles
/// in qh byte `$qlo`, of their high nibbles in `$qhi`, activations at `{a} + $alo` and `{a} + $ahi`.
/// Products go to v24..v31 (e16, four column positions). Expects vtype `e8, m1` with vl = blocks.
///
/// Bound: a lane adds 8 products, each at most 31 · 128 = 3968 (Q5_1, 0..31) or 16 · 128 = 2048
/// (Q5_0, -16..15) in magnitude: 31744 < 2^15.
#[rustfmt::skip]
macro_rules! q5_half {
    ($mul:literal, $k:ident, $wq:literal, $qlo:literal, $qhi:literal, $alo:literal, $ahi:literal) => {
        concat!(
            "addi {p}, {w}, ", $wq, "\n",
            "vlsseg8e8.v v8, ({p}), {ws}\n",
            "addi {p}, {a}, ", $alo, "\n",
            "vlsseg8e8.v v16, ({p}), {astr}\n",
            "addi {p}, {w}, ", $qlo, "\n",
            "vlse8.v v1, ({p}), {ws}\n",
            "addi {p}, {w}, ", $qhi, "\n",
            "vlse8.v v2, ({p}), {ws}\n",
            q5_cols!($k, "vand.vi", "v8, 15", "v1", [0, 1, 2, 3], $mul, "v16"),
            q5_cols!($k, "vand.vi", "v12, 15", "v1", [4, 5, 6, 7], "vwmacc.vv", "v20"),
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            "addi {p}, {a}, ", $ahi, "\n",
            "vlsseg8e8.v v16, ({p}), {astr}\n",
            q5_cols!($k, "vsrl.vi", "v8, 4", "v2", [0, 1, 2, 3], "vwmacc.vv", "v16"),
            q5_cols!($k, "vsrl.vi", "v12, 4", "v2", [4, 5, 6, 7], "vwmacc.vv", "v20"),
        )
    };
}

/// A quarter of a Q8_0 pass: 8 weight columns into v8..v15 (`$wl`: `[seg, $wq]` the 8 bytes per
/// block at `{w} + $wq`, `[scratch]` the next 8 decoded columns at `{q}`, see `mat`), 8
/// activations at `{a} + $aq`. Two products per e16 lane plus a bias of 32767 (v24..v31; the pair
/// sum is in -32512..=32768, so biased it is 255..=65535: exact as u16, whatever wraps on the way),
/// widened unsigned into the e32 sums v0..v7 (two column positions per block); `$first` starts the
/// sums. Expects vtype `e8, m1` with vl = blocks.
#[rustfmt::skip]
macro_rules! q8_quarter {
    (first, $wl:tt, $aq:literal) => {
        concat!(q8_quarter!(@load $wl, $aq), "vwaddu.vv v0, v24, v28\n")
    };
    (next, $wl:tt, $aq:literal) => {
        concat!(
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            q8_quarter!(@load $wl, $aq),
            "vwaddu.wv v0, v0, v24\n",
            "vwaddu.wv v0, v0, v28\n",
        )
    };
    (@load [seg, $wq:literal], $aq:literal) => {
        concat!(
            "addi {p}, {w}, ", $wq, "\n",
            "vlsseg8e8.v v8, ({p}), {ws}\n",
            q8_quarter!(@mul $aq),
        )
    };
    (@load [scratch], $aq:literal) => {
        concat!(
            whole_reg!(ld, 8, 8, "v8", "{q}", "vsetvli zero, {vl}, e8, m1, ta, ma\n"),
            "add {q}, {q}, {s8}\n",
            q8_quarter!(@mul $aq),
        )
    };
    (@mul $aq:literal) => {
        concat!(
            "addi {p}, {a}, ", $aq, "\n",
            "vlsseg8e8.v v16, ({p}), {astr}\n",
            "vsetvli {t}, zero, e16, m8, ta, ma\n",
            "vmv.v.x v24, {bias}\n",
            "vsetvli {t}, zero, e8, m4, ta, ma\n",
            "vwmacc.vv v24, v8, v16\n",
            "vwmacc.vv v24, v12, v20\n",
            "vsetvli {t}, zero, e16, m4, ta, ma\n",
        )
    };
}

/// The sums of the four Q8_0 quarters (v0..v7) per block as f32 in v4..v7; vtype `e32, m4`.
#[rustfmt::skip]
macro_rules! q8_sum {
    () => {
        concat!(
            // Sixteen biased pair sums per block: subtract 16 · 32767.
            "vsetvli zero, {vl}, e32, m4, ta, ma\n",
            "vadd.vv v4, v0, v4\n",
            "vsub.vx v4, v4, {bias16}\n",
            "vfcvt.f.x.v v4, v4\n",
        )
    };
}

/// A pass of a nibble format: two halves (`$half!` with the arguments `$lo`, then `$hi`), the
/// e16 accumulator `$acc` (four column positions) summed per block, the float phase `$float!`.
#[rustfmt::skip]
macro_rules! nibble_pass {
    ($half:ident, [$($lo:tt)*], [$($hi:tt)*], [$($acc:literal),*], $float:ident) => {
        concat!(
            $half!("vwmul.vv", $($lo)*), "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            $half!("vwmacc.vv", $($hi)*), reduce_positions!($($acc),*), $float!(),
        )
    };
}

/// One format's kernels: `$rows`, an `unsafe fn(w, rb, rows, a, nb, out)` that needs `rows` rows
/// of at least `nb` ≥ 1 blocks at `w + r·rb`, `nb` activation blocks at `a`, `rows` floats at
/// `out` and the set's vector unit, running `$pass` per up to VLEN/8 blocks through `$asm`
/// (`q32_rows_asm!`, extra operands `$extra`); and its entries `$one`, `$four` (`entries!`).
/// `$what` describes the blocks.
#[rustfmt::skip]
macro_rules! kernel {
    ($asm:ident, $what:literal, $rows:ident, $one:ident, $four:ident, $wbytes:literal, $abytes:expr,
     $act:ty, [$($pass:tt)*] $(, $($extra:tt)+)?) => {
        #[doc = concat!($what, "\n\n# Safety\nSee `kernel!` (`rvv::q32`).")]
        unsafe fn $rows(w: *const u8, rb: usize, rows: usize, a: *const u8, nb: usize, out: *mut f32) {
            // SAFETY: the caller guarantees the memory (the passes read blocks 0..nb of each row
            // and of the activations, vl ≤ blocks left) and the vector unit; only vector
            // registers, the named scalars, vl/vtype and `out[..rows]` change.
            unsafe {
                q32_rows_asm!($asm, [$($pass)*], w, rb, rows, a, nb, out, $wbytes as usize, $abytes
                    $(, $($extra)+)?);
            }
        }

        entries!(
            #[doc = concat!("Twin of `scalar::", stringify!($one), "`.")]
            $one, $four, $rows, $wbytes, $act
        );
    };
}

/// The one-row and four-row kernels of the five formats (`vec_dot_q4_0_q8_0`,
/// `vec_dot_q4_0_q8_0_x4`, ...), their `asm!` blocks through `$asm`: `rvv_asm` here; `xtv_asm` in
/// `quant::xtheadvector::q32`, where the same text assembles to XTheadVector (the integer and
/// float phases hold under RVV 0.7.1: tails are never read, masks are made and used under one
/// vtype, no widening op overlaps its sources).
#[rustfmt::skip]
macro_rules! q32_kernels {
    ($asm:ident) => {
        kernel!($asm, "Q4_0 rows · Q8_0: d | qs[16] (weight = nibble - 8) · d | qs[32].",
            rows_q4_0, vec_dot_q4_0_q8_0, vec_dot_q4_0_q8_0_x4, 18, Q8_0_BYTES, BlockQ8_0,
            [nibble_pass!(q4_half, [sub8, 2, 4, 20], [sub8, 10, 12, 28],
                ["v0", "v2", "v4", "v6"], float_d),]);
        kernel!($asm, "Q4_1 rows · Q8_1: d | m | qs[16] (weight = nibble) · d | s | qs[32].",
            rows_q4_1, vec_dot_q4_1_q8_1, vec_dot_q4_1_q8_1_x4, 20, Q8_1_BYTES, BlockQ8_1,
            [nibble_pass!(q4_half, [plain, 4, 8, 24], [plain, 12, 16, 32],
                ["v0", "v2", "v4", "v6"], float_dm),]);
        kernel!($asm,
            "Q5_0 rows · Q8_0: d | qh (u32) | qs[16] (weight = (nibble | bit << 4) - 16) · d | qs[32].",
            rows_q5_0, vec_dot_q5_0_q8_0, vec_dot_q5_0_q8_0_x4, 22, Q8_0_BYTES, BlockQ8_0,
            [nibble_pass!(q5_half, [q5_0, 6, 2, 4, 4, 20], [q5_0, 14, 3, 5, 12, 28],
                ["v24", "v26", "v28", "v30"], float_d),]);
        kernel!($asm,
            "Q5_1 rows · Q8_1: d | m | qh (u32) | qs[16] (weight = nibble | bit << 4) · d | s | qs[32].",
            rows_q5_1, vec_dot_q5_1_q8_1, vec_dot_q5_1_q8_1_x4, 24, Q8_1_BYTES, BlockQ8_1,
            [nibble_pass!(q5_half, [q5_1, 8, 4, 6, 8, 24], [q5_1, 16, 5, 7, 16, 32],
                ["v24", "v26", "v28", "v30"], float_dm),], c16 = in(reg) 16usize);
        kernel!($asm, "Q8_0 rows · Q8_0: d | qs[32] · d | qs[32].",
            rows_q8_0, vec_dot_q8_0_q8_0, vec_dot_q8_0_q8_0_x4, 34, Q8_0_BYTES, BlockQ8_0, [
            q8_quarter!(first, [seg, 2], 4), q8_quarter!(next, [seg, 10], 12),
            q8_quarter!(next, [seg, 18], 20), q8_quarter!(next, [seg, 26], 28),
            q8_sum!(), float_d!(),
        ], bias = in(reg) 32767usize, bias16 = in(reg) 16 * 32767usize);
    };
}

q32_kernels!(rvv_asm);
pub(crate) use {
    entries, float_d, float_dm, kernel, next_pass, nibble_pass, osum, q32_asm, q32_kernels,
    q32_rows_asm, q4_adj, q4_half, q5_bit, q5_cols, q5_half, q5_nib, q5_pre, q8_quarter, q8_sum,
    reduce_positions, scale_d, scale_dm, term_d, term_dm,
};

pub(crate) mod mat;
pub use mat::{mat_q4_0_q8_0, mat_q4_1_q8_1, mat_q5_0_q8_0, mat_q5_1_q8_1, mat_q8_0_q8_0};
