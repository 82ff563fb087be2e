//! Batched 32-wide kernels (rows · several activation columns, see `quant::batch`): each pass of
//! `vl` blocks of a row is decoded once, then multiplied with every column.
//!
//! Per row and pass (`vl` blocks, `vl` ≤ VLMAX of `e8, m1` = VLENB): the weights are loaded
//! transposed as in the one-row kernels (`vlsseg8e8`), decoded to int8 (nibbles, Q4_0's and
//! Q5_0's offsets, the fifth bits) and stored in a scratch buffer as whole registers
//! (`vs8r.v` / `vs4r.v`): byte `j` of block `i` at `w[j · VLENB + i]`, 32 · VLENB bytes; the
//! scales `d` (and `m`) as f32 at `ds` (`d` from element 0, `m` from element VLENB). Then for
//! each column: the activations with strided segment loads (`vlsseg8e8`, as in the one-row
//! kernels), the decoded weights with whole-register loads (`vl8re8.v`, unit stride, no
//! segment), the same widening multiply-accumulates (every lane bound of the one-row kernels
//! holds: Q5_1's weights 0..31 are the widest of the nibble formats), the same reduction to
//! `sumi` per block and the same float expression per block (`term_d!` / `term_dm!`, shared with
//! the one-row kernels), added with `vfredosum` to that column's output, which is kept in
//! `out[r · cols + c]` between passes. So output `(r, c)` is, operation for operation, the
//! one-row kernel's sum for row `r` and column `c`; only the loop order differs.
//!
//! Rows go in pairs where they can (the nibble formats; Q8_0's integer phase needs more
//! registers): both rows' passes are decoded (their groups of 8 weight columns interleaved in the
//! scratch, their scales side by side), and each column's activations are loaded once for both:
//! the integer sums go to v0..v7 and v24..v31, the float expression runs once over an LMUL=8
//! group holding both rows' blocks (row 1 from element VLENB; the same operations per lane), and
//! two `vfredosum`s add each row's terms to its output. A last odd row runs alone.
//!
//! A register holds VLENB bytes and the scratch is sized for VLENB ≤ 64 (VLEN ≤ 512); a hart
//! with longer vectors runs the one-row kernels column by column instead.

use super::super::{f16_bits_to_f32, rvv_asm, vlenb, BIG, INF, K112, MAG};
use super::{
    vec_dot_q4_0_q8_0, vec_dot_q4_1_q8_1, vec_dot_q5_0_q8_0, vec_dot_q5_1_q8_1, vec_dot_q8_0_q8_0,
    Q8_0_BYTES, Q8_1_BYTES,
};
use crate::quant::act::{BlockQ8_0, BlockQ8_1};

/// Largest VLENB (bytes per vector register) the scratch holds.
pub(crate) const MAX_VLENB: usize = 64;

/// One pass of one row or of a pair of rows, decoded: the scales (one row: `d` from element 0,
/// `m` from element VLENB; a pair: see `store_d!`) and the int8 weights (one row: byte `j` of
/// block `i` at `w[j · VLENB + i]`; a pair: groups of 8 columns of each row in turn).
#[repr(C, align(64))]
pub(crate) struct Scratch {
    ds: [f32; 4 * MAX_VLENB],
    w: [u8; 64 * MAX_VLENB],
}

/// One row's (or two rows') passes: `$dec` decodes the pass at `{w}` into the scratch (`{sc}`
/// weights, `{sd}` scales), `$col` adds the column at `{a}`'s terms in order to the float at `{oc}`
/// (`out1!`; and the next row's, `out2!`). Columns are `{cstr}` bytes apart.
#[rustfmt::skip]
macro_rules! mat_asm {
    ($asm:ident, [$($dec:tt)*], [$($col:tt)*], $row:expr, $wbytes:expr, $abytes:expr $(, $($extra:tt)+)?) => {
        q32_asm!(
            $asm,
            [
                "2:",
                "vsetvli {vl}, {n}, e8, m1, ta, ma",
                $($dec)*
                "mv {a}, {ap}",
                "mv {oc}, {o}",
                "mv {c}, {cols}",
                "5:",
                "vsetvli zero, {vl}, e8, m1, ta, ma",
                $($col)*
                "addi {oc}, {oc}, 4",
                "add {a}, {a}, {cstr}",
                "addi {c}, {c}, -1",
                "bnez {c}, 5b",
                next_pass!("{ap}"),
            ],
            [
                $($($extra)+ ,)?
                w = inout(reg) $row.w => _,
                ap = inout(reg) $row.a => _,
                n = inout(reg) $row.nb => _,
                o = in(reg) $row.out,
                cols = in(reg) $row.cols,
                cstr = in(reg) $row.cstr,
                sc = in(reg) $row.sc,
                sd = in(reg) $row.sd,
                s8 = in(reg) 8 * $row.vlenb,
                a = out(reg) _,
                oc = out(reg) _,
                c = out(reg) _,
                q = out(reg) _,
            ],
            $wbytes,
            $abytes
        )
    };
}

/// Decode 8 nibble columns of a Q4 pass (`$op`: the low or high nibbles of a segment load) into
/// v24..v31 and store them at `{q}`, advancing it. Vtype `e8, m8`, VLMAX.
#[rustfmt::skip]
macro_rules! dec_q4 {
    ($k:ident, $op:literal, $adv:expr) => {
        concat!(
            $op, "\n",
            q4_adj!($k, "v24"),
            whole_reg!(st, 8, 8, "v24", "{q}", ""),
            $adv,
        )
    };
}

/// Advance `{q}` past one group of 8 decoded columns (one row), or two (`pair`: the other row's
/// group of the same columns sits between).
#[rustfmt::skip]
macro_rules! adv {
    (one) => {
        "add {q}, {q}, {s8}\n"
    };
    (pair) => {
        "add {q}, {q}, {s8}\nadd {q}, {q}, {s8}\n"
    };
}

/// Decode a Q4 pass (qs at `{w} + $wq`) into the scratch at `{q}`: elements 0..16 (low nibbles)
/// then 16..32 (high nibbles), groups of 8 advanced by `adv!($n)`.
#[rustfmt::skip]
macro_rules! dec_q4_pass {
    ($k:ident, $wq:literal, $n:ident) => {
        concat!(
            "addi {p}, {w}, ", $wq, "\n",
            "vlsseg8e8.v v8, ({p}), {ws}\n",
            "addi {p}, {p}, 8\n",
            "vlsseg8e8.v v16, ({p}), {ws}\n",
            "vsetvli {t}, zero, e8, m8, ta, ma\n",
            dec_q4!($k, "vand.vi v24, v8, 15", adv!($n)),
            dec_q4!($k, "vand.vi v24, v16, 15", adv!($n)),
            dec_q4!($k, "vsrl.vi v24, v8, 4", adv!($n)),
            dec_q4!($k, "vsrl.vi v24, v16, 4", adv!($n)),
        )
    };
}

/// Decode eight Q5 columns (`q5_nib!` of `$s0`, then of `$s1`, fifth bits from `$q`) and store
/// them at `{q}`, advancing it by `adv!($n)`.
#[rustfmt::skip]
macro_rules! dec_q5 {
    ($k:ident, $op:literal, $s0:literal, $s1:literal, $q:literal, $n:ident) => {
        concat!(
            q5_nib!($k, $op, $s0, $q, [0, 1, 2, 3]),
            whole_reg!(st, 4, 8, "v4", "{q}", ""),
            "srli {t}, {s8}, 1\n",
            "add {p}, {q}, {t}\n",
            q5_nib!($k, $op, $s1, $q, [4, 5, 6, 7]),
            whole_reg!(st, 4, 8, "v4", "{p}", ""),
            adv!($n),
        )
    };
}

/// Decode a Q5 pass (qh at `{w} + $qh`, qs at `{w} + $wq`) into the scratch at `{q}`: qh bytes in
/// v24..v27, qs in v8..v23; elements 0..32 in order, groups of 8 advanced by `adv!($n)`.
#[rustfmt::skip]
macro_rules! dec_q5_pass {
    ($k:ident, $qh:literal, $wq:literal, $n:ident) => {
        concat!(
            "addi {p}, {w}, ", $qh, "\n",
            "vlsseg4e8.v v24, ({p}), {ws}\n",
            "addi {p}, {w}, ", $wq, "\n",
            "vlsseg8e8.v v8, ({p}), {ws}\n",
            "addi {p}, {p}, 8\n",
            "vlsseg8e8.v v16, ({p}), {ws}\n",
            dec_q5!($k, "vand.vi", "v8, 15", "v12, 15", "v24", $n),
            dec_q5!($k, "vand.vi", "v16, 15", "v20, 15", "v25", $n),
            dec_q5!($k, "vsrl.vi", "v8, 4", "v12, 4", "v26", $n),
            dec_q5!($k, "vsrl.vi", "v16, 4", "v20, 4", "v27", $n),
        )
    };
}

/// A pass of two rows (`{w}` and `{w} + {rb}`) decoded: `$pass` (a `dec_*_pass!` with `pair`)
/// for each, their weight groups interleaved (row 0's 8 columns, row 1's, ...), the scales
/// stored by `$store`, which is given the row (0 or 1).
#[rustfmt::skip]
macro_rules! dec_pair {
    ($pass:ident!($($args:tt)*), $scale:ident, $store:ident) => {
        concat!(
            "mv {q}, {sc}\n",
            $pass!($($args)*, pair),
            $scale!(),
            $store!(0),
            "add {w}, {w}, {rb}\n",
            "add {q}, {sc}, {s8}\n",
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            $pass!($($args)*, pair),
            $scale!(),
            $store!(1),
            "sub {w}, {w}, {rb}\n",
        )
    };
}

/// Store `d` (v16..v19, vtype `e32, m4`) of row `$r` of a pair: the pair's scales are `d` of row
/// 0, of row 1 (from element VLENB), then `m` of row 0, of row 1 (each VLENB floats).
#[rustfmt::skip]
macro_rules! store_d {
    (0) => {
        "vse32.v v16, ({sd})\n"
    };
    (1) => {
        concat!("srli {t}, {s8}, 1\n", "add {p}, {sd}, {t}\n", "vse32.v v16, ({p})\n")
    };
}

/// Store `d` (v16..v19) and `m` (v20..v23) of row `$r` of a pair (layout: `store_d!`).
#[rustfmt::skip]
macro_rules! store_dm {
    (0) => {
        concat!(
            whole_reg!(st, 4, 32, "v16", "{sd}", ""),
            "add {p}, {sd}, {s8}\n",
            whole_reg!(st, 4, 32, "v20", "{p}", ""),
        )
    };
    (1) => {
        concat!(
            "srli {t}, {s8}, 1\n",
            "add {p}, {sd}, {t}\n",
            whole_reg!(st, 4, 32, "v16", "{p}", ""),
            "add {p}, {p}, {s8}\n",
            whole_reg!(st, 4, 32, "v20", "{p}", ""),
        )
    };
}

/// Sixteen decoded weight columns from `{q}` (advanced) times the activations at `{p} + 8`,
/// `{p} + 16` (`{p}` advanced by 16) into v0..v7 (e16, four column positions); `$mul` starts or
/// continues the sums. Expects vtype `e8, m1` with vl = blocks.
#[rustfmt::skip]
macro_rules! col16 {
    ($mul:literal) => {
        concat!(
            "addi {p}, {p}, 8\n",
            "vlsseg8e8.v v16, ({p}), {astr}\n",
            "addi {p}, {p}, 8\n",
            "vlsseg8e8.v v24, ({p}), {astr}\n",
            "vsetvli {t}, zero, e8, m4, ta, ma\n",
            whole_reg!(ld, 8, 8, "v8", "{q}", "vsetvli {t}, zero, e8, m4, ta, ma\n"),
            "add {q}, {q}, {s8}\n",
            $mul, " v0, v8, v16\n",
            "vwmacc.vv v0, v12, v20\n",
            whole_reg!(ld, 8, 8, "v8", "{q}", "vsetvli {t}, zero, e8, m4, ta, ma\n"),
            "add {q}, {q}, {s8}\n",
            "vwmacc.vv v0, v8, v24\n",
            "vwmacc.vv v0, v12, v28\n",
        )
    };
}

/// A column of a nibble format (Q4_0, Q4_1, Q5_0, Q5_1; quants at `{a} + $aq8 + 8`): `sumi` of each
/// block as f32 in v4..v7. Bound: a lane adds 8 products of at most 31 · 128 in magnitude, as in
/// the one-row kernels.
#[rustfmt::skip]
macro_rules! col_nib {
    ($aq8:literal) => {
        concat!(
            "addi {p}, {a}, ", $aq8, "\n",
            "mv {q}, {sc}\n",
            col16!("vwmul.vv"),
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            col16!("vwmacc.vv"),
            reduce_positions!("v0", "v2", "v4", "v6"),
        )
    };
}

/// Eight decoded weight columns of both rows of a pair (from `{q}`, advanced) times the
/// activations at `{p} + 8` (`{p}` advanced by 8) into v0..v7 (row 0) and v24..v31 (row 1), e16,
/// four column positions; `$mul` starts or continues the sums. Expects vtype `e8, m1`, vl = blocks.
#[rustfmt::skip]
macro_rules! col8_pair {
    ($mul:literal) => {
        concat!(
            "addi {p}, {p}, 8\n",
            "vlsseg8e8.v v16, ({p}), {astr}\n",
            "vsetvli {t}, zero, e8, m4, ta, ma\n",
            whole_reg!(ld, 8, 8, "v8", "{q}", "vsetvli {t}, zero, e8, m4, ta, ma\n"),
            "add {q}, {q}, {s8}\n",
            $mul, " v0, v8, v16\n",
            "vwmacc.vv v0, v12, v20\n",
            whole_reg!(ld, 8, 8, "v8", "{q}", "vsetvli {t}, zero, e8, m4, ta, ma\n"),
            "add {q}, {q}, {s8}\n",
            $mul, " v24, v8, v16\n",
            "vwmacc.vv v24, v12, v20\n",
        )
    };
}

/// A column of a nibble format for a pair of rows (quants at `{a} + $aq8 + 8`): `sumi` of each
/// block as f32, row 0 in v0..v3, row 1 in v4..v7 (one e32 LMUL=8 group, row 1 from element
/// VLENB). Bound per lane as in `col_nib!`.
#[rustfmt::skip]
macro_rules! col_nib_pair {
    ($aq8:literal) => {
        concat!(
            "addi {p}, {a}, ", $aq8, "\n",
            "mv {q}, {sc}\n",
            col8_pair!("vwmul.vv"),
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            col8_pair!("vwmacc.vv"),
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            col8_pair!("vwmacc.vv"),
            "vsetvli zero, {vl}, e8, m1, ta, ma\n",
            col8_pair!("vwmacc.vv"),
            "vsetvli zero, {vl}, e16, m2, ta, ma\n",
            "vwadd.vv v8, v0, v2\n",
            "vwadd.vv v12, v4, v6\n",
            "vwadd.vv v16, v24, v26\n",
            "vwadd.vv v20, v28, v30\n",
            "vsetvli zero, {vl}, e32, m4, ta, ma\n",
            "vadd.vv v0, v8, v12\n",
            "vadd.vv v4, v16, v20\n",
            "vsetvli {t}, zero, e32, m8, ta, ma\n",
            "vfcvt.f.x.v v0, v0\n",
        )
    };
}

/// A pair's terms `sumi · (d · y.d)` (as `term_d!`), row 0 in v8..v11, row 1 in v12..v15; `y.d`
/// loaded once for both.
#[rustfmt::skip]
macro_rules! term_d_pair {
    () => {
        concat!(
            "vsetvli zero, {vl}, e32, m4, ta, ma\n",
            "vlse32.v v16, ({a}), {astr}\n",
            // (Lanes past vl of each row's half are never added: a copy of vl lanes is enough.)
            whole_reg!(mv, 4, 32, "v20", "v16", ""),
            "vsetvli {t}, zero, e32, m8, ta, ma\n",
            whole_reg!(ld, 8, 32, "v8", "{sd}", ""),
            "vfmul.vv v8, v8, v16\n",
            "vfmul.vv v8, v0, v8\n",
        )
    };
}

/// A pair's terms `(d · y.d) · sumi + m · y.s` (as `term_dm!`), row 0 in v8..v11, row 1 in
/// v12..v15; `y.d`, `y.s` loaded once for both.
#[rustfmt::skip]
macro_rules! term_dm_pair {
    () => {
        concat!(
            "vsetvli zero, {vl}, e32, m4, ta, ma\n",
            "vlsseg2e32.v v16, ({a}), {astr}\n",
            // (Lanes past vl of each row's half are never added: copies of vl lanes are enough.)
            whole_reg!(mv, 4, 32, "v24", "v16", ""),
            whole_reg!(mv, 4, 32, "v28", "v16", ""),
            whole_reg!(mv, 4, 32, "v16", "v20", ""),
            "vsetvli {t}, zero, e32, m8, ta, ma\n",
            whole_reg!(ld, 8, 32, "v8", "{sd}", ""),
            "vfmul.vv v8, v8, v24\n",
            "vfmul.vv v8, v8, v0\n",
            "add {p}, {sd}, {s8}\n",
            whole_reg!(ld, 8, 32, "v24", "{p}", ""),
            "vfmul.vv v24, v24, v16\n",
            "vfadd.vv v8, v8, v24\n",
        )
    };
}

/// Q8_0's first 24 weight columns (v8..v31, loaded transposed) stored at `{q}` (advanced past
/// them); vtype `e8, m1`, vl = blocks after it.
#[rustfmt::skip]
macro_rules! st_q8_cols {
    () => {
        concat!(
            whole_reg!(st, 8, 8, "v8", "{q}", ""),
            "add {q}, {q}, {s8}\n",
            whole_reg!(st, 8, 8, "v16", "{q}", ""),
            "add {q}, {q}, {s8}\n",
            whole_reg!(st, 8, 8, "v24", "{q}", "vsetvli zero, {vl}, e8, m1, ta, ma\n"),
            "add {q}, {q}, {s8}\n",
        )
    };
}

/// The scales `d` of one row (VLENB floats at `{sd}`) into v16..v19; vtype `e32, m4`, vl = blocks
/// after it.
#[rustfmt::skip]
macro_rules! ld_d {
    () => {
        whole_reg!(ld, 4, 32, "v16", "{sd}", "vsetvli zero, {vl}, e32, m4, ta, ma\n")
    };
}

/// Add the terms in v16.. to the float at `{oc}` (one row).
#[rustfmt::skip]
macro_rules! out1 {
    () => {
        concat!("flw {acc}, 0({oc})\n", osum!(), "fsw {acc}, 0({oc})\n")
    };
}

/// Add the terms in v8.. to the float at `{oc}` (row 0 of a pair) and those in v12.. to the one
/// `{cols}` floats further (row 1).
#[rustfmt::skip]
macro_rules! out2 {
    () => {
        concat!(
            "vsetvli zero, {vl}, e32, m4, ta, ma\n",
            "flw {acc}, 0({oc})\n",
            osum!("v8"),
            "fsw {acc}, 0({oc})\n",
            "slli {p}, {cols}, 2\n",
            "add {p}, {p}, {oc}\n",
            "flw {acc}, 0({p})\n",
            osum!("v12"),
            "fsw {acc}, 0({p})\n",
        )
    };
}

/// What one row's (or pair's) `asm!` needs: the row's blocks `w` (`nb` ≥ 1 of them; a pair's
/// second row `rb` bytes further, its outputs `cols` floats further), the activations `a`
/// (`cols` columns, `cstr` bytes apart, `nb` blocks each), the row's outputs `out` (`cols`
/// floats, zeroed before the first pass), the scratch (`sc` its weights, `sd` its scales) and VLENB (≤ `MAX_VLENB`).
pub(crate) struct Row {
    pub(crate) w: *const u8,
    pub(crate) rb: usize,
    pub(crate) a: *const u8,
    pub(crate) nb: usize,
    pub(crate) cstr: usize,
    pub(crate) cols: usize,
    pub(crate) out: *mut f32,
    pub(crate) sc: *mut u8,
    pub(crate) sd: *mut f32,
    pub(crate) vlenb: usize,
}

/// Rows · columns with `pair` (two rows' `asm!`, when given) and `row` (one row's), or through
/// `one` (the one-row kernel) column by column when VLENB > `MAX_VLENB` or there are no whole
/// blocks. Shapes as in `batch::Mat`; a call whose `out` is not `rows · cols` floats does nothing.
pub(crate) fn mat<A>(
    w: &[u8],
    rb: usize,
    a: &[A],
    cols: usize,
    out: &mut [f32],
    bytes: usize,
    one: fn(&[u8], &[A]) -> f32,
    row: unsafe fn(Row),
    pair: Option<unsafe fn(Row)>,
) {
    let rows = w.len().checked_div(rb).unwrap_or(0);
    let nb = a.len().checked_div(cols).unwrap_or(0);
    if rb == 0 || cols == 0 || rows * cols != out.len() {
        return;
    }
    let blocks = (rb / bytes).min(nb);
    let vlenb = vlenb();
    if blocks == 0 || vlenb > MAX_VLENB {
        for (r, o) in out.chunks_exact_mut(cols).enumerate() {
            for (c, x) in o.iter_mut().enumerate() {
                *x = one(&w[r * rb..(r + 1) * rb], &a[c * nb..(c + 1) * nb]);
            }
        }
        return;
    }
    out.fill(0.0);
    let mut s = Scratch {
        ds: [0.0; 4 * MAX_VLENB],
        w: [0; 64 * MAX_VLENB],
    };
    let mut r = 0;
    while r < rows {
        let k = match pair {
            Some(_) if r + 2 <= rows => 2,
            _ => 1,
        };
        let at = Row {
            w: w[r * rb..].as_ptr(),
            rb,
            a: a.as_ptr().cast(),
            nb: blocks,
            cstr: nb * core::mem::size_of::<A>(),
            cols,
            out: out[r * cols..].as_mut_ptr(),
            sc: s.w.as_mut_ptr(),
            sd: s.ds.as_mut_ptr(),
            vlenb,
        };
        // SAFETY: rows r..r + k hold `blocks` whole blocks each (blocks · bytes ≤ rb, (r + k) · rb
        // ≤ w.len()); column c's blocks 0..blocks lie in a[c · nb..(c + 1) · nb]; `out` has the
        // rows' `k · cols` floats, zeroed; VLENB ≤ MAX_VLENB (the scratch holds a pass of two
        // rows); the set's vector unit present (reached only on harts with it).
        unsafe {
            match (k, pair) {
                (2, Some(f)) => f(at),
                _ => row(at),
            }
        }
        r += k;
    }
}

/// One row's (`one`) or two rows' (`pair`) `asm!` as `unsafe fn $f(Row)`: `$dec` decodes a pass
/// into the scratch, `$col` adds a column's terms to its output(s), see `mat_asm!`.
#[rustfmt::skip]
macro_rules! mat_fn {
    ($asm:ident, $f:ident, one, $dec:tt, $col:tt, $bytes:literal, $abytes:expr
     $(, $($extra:tt)+)?) => {
        /// # Safety
        /// See [`Row`] (one row); the hart has the set's vector unit.
        unsafe fn $f(r: Row) {
            // SAFETY: the caller guarantees the memory (the passes read blocks 0..nb of the row
            // and of each column, write the scratch within one pass's size and the row's `cols`
            // outputs) and the vector unit; only vector registers, the named scalars, vl/vtype,
            // the scratch and the outputs change.
            unsafe { mat_asm!($asm, $dec, $col, r, $bytes, $abytes $(, $($extra)+)?) };
        }
    };
    ($asm:ident, $f:ident, pair, $dec:tt, $col:tt, $bytes:literal, $abytes:expr
     $(, $($extra:tt)+)?) => {
        /// # Safety
        /// See [`Row`] (two rows); the hart has the set's vector unit.
        unsafe fn $f(r: Row) {
            // SAFETY: as for one row, for the rows at `w` and `w + rb` and their outputs.
            unsafe {
                mat_asm!($asm, $dec, $col, r, $bytes, $abytes, rb = in(reg) r.rb $(, $($extra)+)?)
            };
        }
    };
}

/// The two-row `asm!` of a format (`[$dec, $col]`, see `mat_fn!`), or `None` (`none`).
#[rustfmt::skip]
macro_rules! pair_fn {
    ($asm:ident, none, $bytes:literal, $abytes:expr $(, $($extra:tt)+)?) => {
        None
    };
    ($asm:ident, [$dec:tt, $col:tt], $bytes:literal, $abytes:expr $(, $($extra:tt)+)?) => {{
        mat_fn!($asm, pair, pair, $dec, $col, $bytes, $abytes $(, $($extra)+)?);
        Some(pair as unsafe fn(Row))
    }};
}

/// The public batched entry of one format: its one-row `asm!` (`$dec`, `$col`), its two-row one
/// (`$pair`: `[$dec, $col]` or `none`); `$one` is the format's one-row kernel.
#[rustfmt::skip]
macro_rules! mat_entry {
    (
        $asm:ident, $(#[$doc:meta])* $name:ident, $one:ident, $bytes:literal, $act:ty, $abytes:expr,
        $dec:tt, $col:tt, $pair:tt $(; $($extra:tt)+)?
    ) => {
        $(#[$doc])*
        pub fn $name(w: &[u8], rb: usize, a: &[$act], cols: usize, out: &mut [f32]) {
            mat_fn!($asm, row, one, $dec, $col, $bytes, $abytes $(, $($extra)+)?);
            let pair = pair_fn!($asm, $pair, $bytes, $abytes $(, $($extra)+)?);
            mat(w, rb, a, cols, out, $bytes, $one, row, pair)
        }
    };
}

/// The batched kernels of the five formats (`mat_q4_0_q8_0`, ...), their `asm!` blocks through
/// `$asm`: `rvv_asm` here, `xtv_asm` in `quant::xtheadvector::q32::mat`. The text names its
/// whole-register operations `whole_reg!(st | ld | mv, registers, element width, register,
/// address or source, vtype to restore)`, which the module expanding it defines: here the RVV
/// 1.0 instructions (`vs8r.v`, `vl8re8.v`, `vmv4r.v`, ...; the vtype to restore is unused);
/// XTheadVector has none and sets the vtype of a unit-stride access to the registers instead,
/// then restores the one given (the text places each such operation where the vtype it leaves
/// is either the one given or set again before use).
#[rustfmt::skip]
macro_rules! mat_kernels {
    ($asm:ident) => {
        mat_entry!(
            $asm,
            /// Q4_0 weights · Q8_0 activations, batched (each column equals `vec_dot_q4_0_q8_0`).
            mat_q4_0_q8_0, vec_dot_q4_0_q8_0, 18, BlockQ8_0, Q8_0_BYTES,
            ["mv {q}, {sc}", dec_q4_pass!(sub8, 2, one), scale_d!(), "vse32.v v16, ({sd})",],
            [col_nib!(-4), ld_d!(), term_d!(), out1!(),],
            [
                [dec_pair!(dec_q4_pass!(sub8, 2), scale_d, store_d),],
                [col_nib_pair!(-4), term_d_pair!(), out2!(),]
            ]
        );

        mat_entry!(
            $asm,
            /// Q4_1 weights · Q8_1 activations, batched (each column equals `vec_dot_q4_1_q8_1`).
            mat_q4_1_q8_1, vec_dot_q4_1_q8_1, 20, BlockQ8_1, Q8_1_BYTES,
            ["mv {q}, {sc}", dec_q4_pass!(plain, 4, one), scale_dm!(), whole_reg!(st, 8, 32, "v16", "{sd}", ""),],
            [col_nib!(0), whole_reg!(ld, 8, 32, "v16", "{sd}", ""), term_dm!(), out1!(),],
            [
                [dec_pair!(dec_q4_pass!(plain, 4), scale_dm, store_dm),],
                [col_nib_pair!(0), term_dm_pair!(), out2!(),]
            ]
        );

        mat_entry!(
            $asm,
            /// Q5_0 weights · Q8_0 activations, batched (each column equals `vec_dot_q5_0_q8_0`).
            mat_q5_0_q8_0, vec_dot_q5_0_q8_0, 22, BlockQ8_0, Q8_0_BYTES,
            ["mv {q}, {sc}", dec_q5_pass!(q5_0, 2, 6, one), scale_d!(), "vse32.v v16, ({sd})",],
            [col_nib!(-4), ld_d!(), term_d!(), out1!(),],
            [
                [dec_pair!(dec_q5_pass!(q5_0, 2, 6), scale_d, store_d),],
                [col_nib_pair!(-4), term_d_pair!(), out2!(),]
            ]
        );

        mat_entry!(
            $asm,
            /// Q5_1 weights · Q8_1 activations, batched (each column equals `vec_dot_q5_1_q8_1`).
            mat_q5_1_q8_1, vec_dot_q5_1_q8_1, 24, BlockQ8_1, Q8_1_BYTES,
            ["mv {q}, {sc}", dec_q5_pass!(q5_1, 4, 8, one), scale_dm!(), whole_reg!(st, 8, 32, "v16", "{sd}", ""),],
            [col_nib!(0), whole_reg!(ld, 8, 32, "v16", "{sd}", ""), term_dm!(), out1!(),],
            [
                [dec_pair!(dec_q5_pass!(q5_1, 4, 8), scale_dm, store_dm),],
                [col_nib_pair!(0), term_dm_pair!(), out2!(),]
            ];
            c16 = in(reg) 16usize
        );

        mat_entry!(
            $asm,
            /// Q8_0 weights · Q8_0 activations, batched (each column equals `vec_dot_q8_0_q8_0`): the
            /// pass's 32 weight columns are stored as they are (transposed).
            mat_q8_0_q8_0, vec_dot_q8_0_q8_0, 34, BlockQ8_0, Q8_0_BYTES,
            [
                "addi {p}, {w}, 2",
                "vlsseg8e8.v v8, ({p}), {ws}",
                "addi {p}, {p}, 8",
                "vlsseg8e8.v v16, ({p}), {ws}",
                "addi {p}, {p}, 8",
                "vlsseg8e8.v v24, ({p}), {ws}",
                "mv {q}, {sc}",
                st_q8_cols!(),
                "addi {p}, {p}, 8",
                "vlsseg8e8.v v8, ({p}), {ws}",
                whole_reg!(st, 8, 8, "v8", "{q}", ""),
                scale_d!(),
                "vse32.v v16, ({sd})",
            ],
            [
                "mv {q}, {sc}",
                q8_quarter!(first, [scratch], 4),
                q8_quarter!(next, [scratch], 12),
                q8_quarter!(next, [scratch], 20),
                q8_quarter!(next, [scratch], 28),
                q8_sum!(),
                ld_d!(),
                term_d!(),
                out1!(),
            ],
            none;
            bias = in(reg) 32767usize,
            bias16 = in(reg) 16 * 32767usize
        );
    };
}

/// RVV 1.0's whole-register operations (see `mat_kernels!`).
#[rustfmt::skip]
macro_rules! whole_reg {
    (st, $n:literal, $eew:literal, $v:literal, $addr:literal, $back:literal) => {
        concat!("vs", $n, "r.v ", $v, ", (", $addr, ")\n")
    };
    (ld, $n:literal, $eew:literal, $v:literal, $addr:literal, $back:literal) => {
        concat!("vl", $n, "re", $eew, ".v ", $v, ", (", $addr, ")\n")
    };
    (mv, $n:literal, $eew:literal, $vd:literal, $vs:literal, $back:literal) => {
        concat!("vmv", $n, "r.v ", $vd, ", ", $vs, "\n")
    };
}

mat_kernels!(rvv_asm);

pub(crate) use {
    adv, col16, col8_pair, col_nib, col_nib_pair, dec_pair, dec_q4, dec_q4_pass, dec_q5,
    dec_q5_pass, ld_d, mat_asm, mat_entry, mat_fn, mat_kernels, out1, out2, pair_fn, st_q8_cols,
    store_d, store_dm, term_d_pair, term_dm_pair,
};
