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
//! A register holds VLENB bytes and the scratch is sized for VLENB ≤ 64 (VLEN ≤ 512); a hart
//! with longer vectors runs the one-row kernels column by column instead.

use super::super::{f16_bits_to_f32, rvv_asm, BIG, INF, K112, MAG};
use super::{
    vec_dot_q4_0_q8_0, vec_dot_q4_1_q8_1, vec_dot_q5_0_q8_0, vec_dot_q5_1_q8_1, vec_dot_q8_0_q8_0,
    Q8_0_BYTES, Q8_1_BYTES,
};
use crate::quant::act::{BlockQ8_0, BlockQ8_1};

/// Largest VLENB (bytes per vector register) the scratch holds.
const MAX_VLENB: usize = 64;

/// One pass of one row, decoded: the scales (`d` from element 0, `m` from element VLENB) and the
/// int8 weights (byte `j` of block `i` at `w[j · VLENB + i]`).
#[repr(C, align(64))]
struct Scratch {
    ds: [f32; 2 * MAX_VLENB],
    w: [u8; 32 * MAX_VLENB],
}

/// VLENB, the bytes of one vector register (CSR 0xc22; only on harts with V).
fn vlenb() -> usize {
    let v: usize;
    // SAFETY: reads a CSR that every hart with V has; reached only on harts with V.
    unsafe { core::arch::asm!("csrr {}, 0xc22", out(reg) v, options(nomem, nostack)) };
    v
}

/// One row's passes: `$dec` decodes the pass at `{w}` into the scratch (`{sc}` weights, `{sd}`
/// scales), `$col` computes the column at `{a}`'s terms into v16..v19 (vtype `e32, m4`, vl =
/// blocks), added in order to the float at `{oc}`. Columns are `{cstr}` bytes apart.
#[rustfmt::skip]
macro_rules! mat_asm {
    ([$($dec:tt)*], [$($col:tt)*], $row:expr, $wbytes:expr, $abytes:expr $(, $($extra:tt)+)?) => {
        q32_asm!(
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
                "flw {acc}, 0({oc})",
                osum!(),
                "fsw {acc}, 0({oc})",
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
    ($k:ident, $op:literal) => {
        concat!(
            $op, "\n",
            q4_adj!($k, "v24"),
            "vs8r.v v24, ({q})\n",
            "add {q}, {q}, {s8}\n",
        )
    };
}

/// Decode a Q4 pass (qs at `{w} + $wq`) into the scratch: elements 0..16 (low nibbles) then
/// 16..32 (high nibbles).
#[rustfmt::skip]
macro_rules! dec_q4_pass {
    ($k:ident, $wq:literal) => {
        concat!(
            "addi {p}, {w}, ", $wq, "\n",
            "vlsseg8e8.v v8, ({p}), {ws}\n",
            "addi {p}, {p}, 8\n",
            "vlsseg8e8.v v16, ({p}), {ws}\n",
            "vsetvli {t}, zero, e8, m8, ta, ma\n",
            "mv {q}, {sc}\n",
            dec_q4!($k, "vand.vi v24, v8, 15"),
            dec_q4!($k, "vand.vi v24, v16, 15"),
            dec_q4!($k, "vsrl.vi v24, v8, 4"),
            dec_q4!($k, "vsrl.vi v24, v16, 4"),
        )
    };
}

/// Decode four Q5 columns (`q5_nib!`) and store them at `{q}`, advancing it by 4 · VLENB.
#[rustfmt::skip]
macro_rules! dec_q5 {
    ($k:ident, $op:literal, $src:literal, $q:literal, $bits:tt) => {
        concat!(
            q5_nib!($k, $op, $src, $q, $bits),
            "vs4r.v v4, ({q})\n",
            "srli {t}, {s8}, 1\n",
            "add {q}, {q}, {t}\n",
        )
    };
}

/// Decode a Q5 pass (qh at `{w} + $qh`, qs at `{w} + $wq`) into the scratch: qh bytes in
/// v24..v27, qs in v8..v23; elements 0..32 in order.
#[rustfmt::skip]
macro_rules! dec_q5_pass {
    ($k:ident, $qh:literal, $wq:literal) => {
        concat!(
            "addi {p}, {w}, ", $qh, "\n",
            "vlsseg4e8.v v24, ({p}), {ws}\n",
            "addi {p}, {w}, ", $wq, "\n",
            "vlsseg8e8.v v8, ({p}), {ws}\n",
            "addi {p}, {p}, 8\n",
            "vlsseg8e8.v v16, ({p}), {ws}\n",
            "mv {q}, {sc}\n",
            dec_q5!($k, "vand.vi", "v8, 15", "v24", [0, 1, 2, 3]),
            dec_q5!($k, "vand.vi", "v12, 15", "v24", [4, 5, 6, 7]),
            dec_q5!($k, "vand.vi", "v16, 15", "v25", [0, 1, 2, 3]),
            dec_q5!($k, "vand.vi", "v20, 15", "v25", [4, 5, 6, 7]),
            dec_q5!($k, "vsrl.vi", "v8, 4", "v26", [0, 1, 2, 3]),
            dec_q5!($k, "vsrl.vi", "v12, 4", "v26", [4, 5, 6, 7]),
            dec_q5!($k, "vsrl.vi", "v16, 4", "v27", [0, 1, 2, 3]),
            dec_q5!($k, "vsrl.vi", "v20, 4", "v27", [4, 5, 6, 7]),
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
            "vl8re8.v v8, ({q})\n",
            "add {q}, {q}, {s8}\n",
            "vsetvli {t}, zero, e8, m4, ta, ma\n",
            $mul, " v0, v8, v16\n",
            "vwmacc.vv v0, v12, v20\n",
            "vl8re8.v v8, ({q})\n",
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

/// What one row's `asm!` needs: the row's blocks `w` (`nb` ≥ 1 of them), the activations `a`
/// (`cols` columns, `cstr` bytes apart, `nb` blocks each), the row's outputs `out` (`cols`
/// floats, zeroed before the first pass), the scratch (`sc` its weights, `sd` its scales) and VLENB (≤ `MAX_VLENB`).
struct Row {
    w: *const u8,
    a: *const u8,
    nb: usize,
    cstr: usize,
    cols: usize,
    out: *mut f32,
    sc: *mut u8,
    sd: *mut f32,
    vlenb: usize,
}

/// Rows · columns with `row` (one row's `asm!`), or through `one` (the one-row kernel) column by
/// column when VLENB > `MAX_VLENB` or there are no whole blocks. Shapes as in `batch::Mat`; a call
/// whose `out` is not `rows · cols` floats does nothing.
fn mat<A>(
    w: &[u8],
    rb: usize,
    a: &[A],
    cols: usize,
    out: &mut [f32],
    bytes: usize,
    one: fn(&[u8], &[A]) -> f32,
    row: unsafe fn(Row),
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
        ds: [0.0; 2 * MAX_VLENB],
        w: [0; 32 * MAX_VLENB],
    };
    for (r, o) in out.chunks_exact_mut(cols).enumerate() {
        let r = Row {
            w: w[r * rb..].as_ptr(),
            a: a.as_ptr().cast(),
            nb: blocks,
            cstr: nb * core::mem::size_of::<A>(),
            cols,
            out: o.as_mut_ptr(),
            sc: s.w.as_mut_ptr(),
            sd: s.ds.as_mut_ptr(),
            vlenb,
        };
        // SAFETY: row r holds `blocks` whole blocks (blocks · bytes ≤ rb, (r + 1) · rb ≤
        // w.len()); column c's blocks 0..blocks lie in a[c · nb..(c + 1) · nb]; `out` has the
        // row's `cols` floats, zeroed; VLENB ≤ MAX_VLENB (the scratch holds a pass); V present
        // (reached only on harts with V).
        unsafe { row(r) };
    }
}

/// The public batched entry of one format and its one-row `asm!` (`$dec`: decode a pass into the
/// scratch, `$col`: a column's terms, see `mat_asm!`); `$one` is the format's one-row kernel.
#[rustfmt::skip]
macro_rules! mat_entry {
    (
        $(#[$doc:meta])* $name:ident, $one:ident, $bytes:literal, $act:ty, $abytes:expr,
        $dec:tt, $col:tt $(, $($extra:tt)+)?
    ) => {
        $(#[$doc])*
        pub fn $name(w: &[u8], rb: usize, a: &[$act], cols: usize, out: &mut [f32]) {
            /// # Safety
            /// See [`Row`]; the hart has V.
            unsafe fn row(r: Row) {
                // SAFETY: the caller guarantees the memory (the passes read blocks 0..nb of the
                // row and of each column, write the scratch within one pass's size and the row's
                // `cols` outputs) and V; only vector registers, the named scalars, vl/vtype, the
                // scratch and the outputs change.
                unsafe { mat_asm!($dec, $col, r, $bytes, $abytes $(, $($extra)+)?) };
            }
            mat(w, rb, a, cols, out, $bytes, $one, row)
        }
    };
}

mat_entry!(
    /// Q4_0 weights · Q8_0 activations, batched (each column equals `vec_dot_q4_0_q8_0`).
    mat_q4_0_q8_0, vec_dot_q4_0_q8_0, 18, BlockQ8_0, Q8_0_BYTES,
    [dec_q4_pass!(sub8, 2), scale_d!(), "vse32.v v16, ({sd})",],
    [col_nib!(-4), "vl4re32.v v16, ({sd})", term_d!(),]
);

mat_entry!(
    /// Q4_1 weights · Q8_1 activations, batched (each column equals `vec_dot_q4_1_q8_1`).
    mat_q4_1_q8_1, vec_dot_q4_1_q8_1, 20, BlockQ8_1, Q8_1_BYTES,
    [dec_q4_pass!(plain, 4), scale_dm!(), "vs8r.v v16, ({sd})",],
    [col_nib!(0), "vl8re32.v v16, ({sd})", term_dm!(),]
);

mat_entry!(
    /// Q5_0 weights · Q8_0 activations, batched (each column equals `vec_dot_q5_0_q8_0`).
    mat_q5_0_q8_0, vec_dot_q5_0_q8_0, 22, BlockQ8_0, Q8_0_BYTES,
    [dec_q5_pass!(q5_0, 2, 6), scale_d!(), "vse32.v v16, ({sd})",],
    [col_nib!(-4), "vl4re32.v v16, ({sd})", term_d!(),]
);

mat_entry!(
    /// Q5_1 weights · Q8_1 activations, batched (each column equals `vec_dot_q5_1_q8_1`).
    mat_q5_1_q8_1, vec_dot_q5_1_q8_1, 24, BlockQ8_1, Q8_1_BYTES,
    [dec_q5_pass!(q5_1, 4, 8), scale_dm!(), "vs8r.v v16, ({sd})",],
    [col_nib!(0), "vl8re32.v v16, ({sd})", term_dm!(),],
    c16 = in(reg) 16usize
);

mat_entry!(
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
        "vs8r.v v8, ({q})",
        "add {q}, {q}, {s8}",
        "vs8r.v v16, ({q})",
        "add {q}, {q}, {s8}",
        "vs8r.v v24, ({q})",
        "add {q}, {q}, {s8}",
        "addi {p}, {p}, 8",
        "vlsseg8e8.v v8, ({p}), {ws}",
        "vs8r.v v8, ({q})",
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
        "vl4re32.v v16, ({sd})",
        term_d!(),
    ],
    bias = in(reg) 32767usize,
    bias16 = in(reg) 16 * 32767usize
);
